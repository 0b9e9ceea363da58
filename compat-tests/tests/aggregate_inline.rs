//! `aggregate` run inline on the runtime worker under a read budget, and rerun off it when
//! the budget trips (`src/blocking.rs`, `run_budgeted`): the same results, errors and side
//! effects whether a pipeline finishes inline (the default budget, on small pipelines), trips
//! part-way (`CAIRN_INLINE_READS=40`) or trips on its first read (`CAIRN_INLINE_READS=0`) —
//! and pipelines over more than the default budget trip it there too. The abandoned attempt
//! leaves nothing behind: the profiler's `keysExamined`/`docsExamined` and `$indexStats`'
//! accesses count the one run that answered, and a `$merge` writes once.

use bson::{Bson, Document, doc};
use cairn_compat_tests::{TestServer, code_of, collect};
use mongodb::{Collection, Database};

const DOCS: i32 = 1000;

fn doc_of(i: i32) -> Document {
    doc! {"_id": i, "cat": format!("c{}", i % 10), "city": format!("city{}", i % 7), "n": i}
}

async fn setup(db: &Database) -> Collection<Document> {
    let c = db.collection::<Document>("c");
    c.insert_many((0..DOCS).map(doc_of)).await.unwrap();
    c.create_index(mongodb::IndexModel::builder().keys(doc! {"cat": 1}).build())
        .await
        .unwrap();
    c
}

async fn agg(c: &Collection<Document>, pipeline: Vec<Document>) -> Vec<Document> {
    collect(c.aggregate(pipeline).await.unwrap()).await
}

async fn agg_err(c: &Collection<Document>, pipeline: Vec<Document>) -> i32 {
    match c.aggregate(pipeline.clone()).await {
        Ok(mut cur) => loop {
            match cur.advance().await {
                Ok(true) => {}
                Ok(false) => panic!("{pipeline:?} succeeded"),
                Err(e) => return code_of(&e),
            }
        },
        Err(e) => code_of(&e),
    }
}

/// `{_id: city, n, avg}` of the documents of category `cat`, by city.
fn by_city(cat: i32) -> Vec<Document> {
    (0..7)
        .map(|city| {
            let ns: Vec<i32> = (0..DOCS)
                .filter(|i| i % 10 == cat && i % 7 == city)
                .collect();
            let avg = f64::from(ns.iter().sum::<i32>()) / ns.len() as f64;
            doc! {"_id": format!("city{city}"), "n": ns.len() as i32, "avg": avg}
        })
        .collect()
}

fn number(d: &Document, k: &str) -> i64 {
    match d.get(k) {
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        other => panic!("{k}: {other:?} in {d}"),
    }
}

async fn index_uses(c: &Collection<Document>, name: &str) -> i64 {
    let stats = agg(c, vec![doc! {"$indexStats": {}}]).await;
    let s = stats
        .iter()
        .find(|s| s.get_str("name").ok() == Some(name))
        .unwrap_or_else(|| panic!("{name} in {stats:?}"));
    number(s.get_document("accesses").unwrap(), "ops")
}

/// Every check, on a server with the given inline read budget.
async fn check(server: &TestServer) {
    let client = server.client().await;
    let db = client.database("inl");
    let c = setup(&db).await;
    let match_group = vec![
        doc! {"$match": {"cat": "c3"}},
        doc! {"$group": {"_id": "$city", "n": {"$sum": 1}, "avg": {"$avg": "$n"}}},
        doc! {"$sort": {"_id": 1}},
    ];

    // Results: small ($match on the index, 100 documents) and large (every document).
    assert_eq!(agg(&c, match_group.clone()).await, by_city(3));
    let all = agg(
        &c,
        vec![
            doc! {"$group": {"_id": "$cat", "n": {"$sum": 1}, "total": {"$sum": "$n"}}},
            doc! {"$sort": {"_id": 1}},
        ],
    )
    .await;
    let want: Vec<Document> = (0..10)
        .map(|k| {
            let total: i32 = (0..DOCS).filter(|i| i % 10 == k).sum();
            doc! {"_id": format!("c{k}"), "n": 100, "total": total}
        })
        .collect();
    assert_eq!(all, want);
    let top = agg(
        &c,
        vec![
            doc! {"$match": {"cat": {"$in": ["c1", "c2"]}}},
            doc! {"$sort": {"n": -1}},
            doc! {"$limit": 5},
            doc! {"$project": {"n": 1, "_id": 0}},
        ],
    )
    .await;
    let want: Vec<Document> = [992, 991, 982, 981, 972]
        .iter()
        .map(|n| doc! {"n": n})
        .collect();
    assert_eq!(top, want);
    // More than a first batch: the rest comes by getMore from the registered cursor.
    let ids = agg(
        &c,
        vec![
            doc! {"$match": {"n": {"$gte": 100}}},
            doc! {"$project": {"_id": 1}},
        ],
    )
    .await;
    let want: Vec<Document> = (100..DOCS).map(|i| doc! {"_id": i}).collect();
    assert_eq!(ids, want);
    let unwound = agg(
        &c,
        vec![
            doc! {"$match": {"cat": "c0", "n": {"$lt": 30}}},
            doc! {"$project": {"x": ["$n", "$city"]}},
            doc! {"$unwind": "$x"},
            doc! {"$count": "k"},
        ],
    )
    .await;
    assert_eq!(unwound, vec![doc! {"k": 6}]);

    // An error on document 50 is reported with its code, whichever attempt meets it.
    let code = agg_err(
        &c,
        vec![
            doc! {"$match": {"n": {"$lt": 200}}},
            doc! {"$project": {"x": {"$divide": [1, {"$cond": [{"$eq": ["$n", 50]}, 0, 1]}]}}},
        ],
    )
    .await;
    assert_eq!(code, 2);

    // The profiler counts the run that answered (over every document, the default budget
    // trips after the attempt has reported two storage calls' work).
    db.run_command(doc! {"profile": 2}).await.unwrap();
    assert_eq!(agg(&c, match_group.clone()).await, by_city(3));
    let by_cat = vec![doc! {"$group": {"_id": "$cat", "n": {"$sum": 1}}}];
    assert_eq!(agg(&c, by_cat).await.len(), 10);
    db.run_command(doc! {"profile": 0}).await.unwrap();
    let entries = collect(
        db.collection::<Document>("system.profile")
            .find(doc! {"command.aggregate": "c"})
            .sort(doc! {"ts": 1, "_id": 1})
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(entries.len(), 2, "{entries:#?}");
    let [ix, scan] = [&entries[0], &entries[1]];
    assert_eq!(ix.get_str("planSummary").ok(), Some("IXSCAN { cat: 1 }"));
    assert_eq!(number(ix, "keysExamined"), 100);
    assert_eq!(number(ix, "docsExamined"), 100);
    assert_eq!(number(ix, "nreturned"), 7);
    assert_eq!(scan.get_str("planSummary").ok(), Some("COLLSCAN"));
    assert_eq!(number(scan, "keysExamined"), 0);
    assert_eq!(number(scan, "docsExamined"), i64::from(DOCS));
    assert_eq!(number(scan, "nreturned"), 10);

    // `$indexStats` counts one use per aggregate.
    let before = index_uses(&c, "cat_1").await;
    assert_eq!(agg(&c, match_group.clone()).await, by_city(3));
    assert_eq!(index_uses(&c, "cat_1").await, before + 1);

    // A `$merge` writes exactly once.
    let hits = db.collection::<Document>("hits");
    hits.insert_many((0..7).map(|city| doc! {"_id": format!("city{city}"), "hits": 0}))
        .await
        .unwrap();
    agg(
        &c,
        vec![
            doc! {"$match": {"cat": "c4"}},
            doc! {"$group": {"_id": "$city"}},
            doc! {"$merge": {"into": "hits", "whenMatched": [{"$set": {"hits": {"$add": ["$hits", 1]}}}], "whenNotMatched": "discard"}},
        ],
    )
    .await;
    let got = collect(hits.find(doc! {}).sort(doc! {"_id": 1}).await.unwrap()).await;
    let want: Vec<Document> = (0..7)
        .map(|city| doc! {"_id": format!("city{city}"), "hits": 1})
        .collect();
    assert_eq!(got, want);

    // maxTimeMS still applies (the fail point makes every deadline pass).
    client
        .database("admin")
        .run_command(doc! {"configureFailPoint": "maxTimeAlwaysTimeOut", "mode": "alwaysOn"})
        .await
        .unwrap();
    let e = db
        .run_command(doc! {"aggregate": "c", "pipeline": match_group.clone(), "cursor": {}, "maxTimeMS": 60_000})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 50, "{e}");
    client
        .database("admin")
        .run_command(doc! {"configureFailPoint": "maxTimeAlwaysTimeOut", "mode": "off"})
        .await
        .unwrap();
    assert_eq!(agg(&c, match_group).await, by_city(3));
}

#[tokio::test]
async fn default_budget() {
    check(&TestServer::start_with(&["--enable-test-commands"])).await;
}

#[tokio::test]
async fn budget_trips_part_way() {
    let s =
        TestServer::start_with_env(&["--enable-test-commands"], &[("CAIRN_INLINE_READS", "40")]);
    check(&s).await;
}

#[tokio::test]
async fn budget_trips_on_first_read() {
    let s = TestServer::start_with_env(&["--enable-test-commands"], &[("CAIRN_INLINE_READS", "0")]);
    check(&s).await;
}
