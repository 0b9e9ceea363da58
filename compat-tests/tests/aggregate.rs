//! `aggregate` through the Rust driver: the driver's count helpers, cursors and `getMore`,
//! `explain`, `$out`/`$merge` (and their failures leaving the target intact), and MongoDB's
//! error codes for bad pipelines.

use bson::{Document, doc};
use cairn_compat_tests::{TestServer, assert_docs, cmd, code_of, collect};
use mongodb::options::AggregateOptions;

async fn agg(c: &mongodb::Collection<Document>, pipeline: Vec<Document>) -> Vec<Document> {
    collect(c.aggregate(pipeline).await.unwrap()).await
}

async fn agg_err(c: &mongodb::Collection<Document>, pipeline: Vec<Document>) -> i32 {
    match c.aggregate(pipeline.clone()).await {
        Ok(cur) => {
            let mut cur = cur;
            loop {
                match cur.advance().await {
                    Ok(true) => {}
                    Ok(false) => panic!("{pipeline:?} succeeded"),
                    Err(e) => return code_of(&e),
                }
            }
        }
        Err(e) => code_of(&e),
    }
}

#[tokio::test]
async fn count_documents_and_estimated_count() {
    let server = TestServer::start();
    let client = server.client().await;
    let c = client.database("agg").collection::<Document>("c");
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 0);
    c.insert_many(
        (0..250).map(|i| doc! {"_id": i, "n": i, "tag": if i % 2 == 0 { "even" } else { "odd" }}),
    )
    .await
    .unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 250);
    assert_eq!(c.count_documents(doc! {"tag": "odd"}).await.unwrap(), 125);
    assert_eq!(
        c.count_documents(doc! {"n": {"$gte": 100}})
            .skip(10)
            .limit(50)
            .await
            .unwrap(),
        50
    );
    c.create_index(mongodb::IndexModel::builder().keys(doc! {"n": 1}).build())
        .await
        .unwrap();
    assert_eq!(
        c.count_documents(doc! {"n": {"$lt": 42}}).await.unwrap(),
        42
    );
    assert_eq!(c.estimated_document_count().await.unwrap(), 250);
    let missing = client.database("agg").collection::<Document>("nope");
    assert_eq!(missing.count_documents(doc! {}).await.unwrap(), 0);
}

#[tokio::test]
async fn group_sort_project_unwind() {
    let server = TestServer::start();
    let client = server.client().await;
    let c = client.database("agg").collection::<Document>("sales");
    c.insert_many([
        doc! {"_id": 1, "item": "abc", "price": 10, "quantity": 2, "tags": ["a", "b"]},
        doc! {"_id": 2, "item": "jkl", "price": 20, "quantity": 1, "tags": []},
        doc! {"_id": 3, "item": "xyz", "price": 5, "quantity": 10, "tags": ["c"]},
        doc! {"_id": 4, "item": "xyz", "price": 5, "quantity": 20},
        doc! {"_id": 5, "item": "abc", "price": 10, "quantity": 10, "tags": "solo"},
    ])
    .await
    .unwrap();
    let got = agg(
        &c,
        vec![
            doc! {"$group": {"_id": "$item", "total": {"$sum": {"$multiply": ["$price", "$quantity"]}}, "n": {"$sum": 1}, "avg": {"$avg": "$quantity"}}},
            doc! {"$sort": {"total": -1}},
        ],
    )
    .await;
    assert_docs(
        &got,
        &[
            doc! {"_id": "xyz", "total": 150, "n": 2, "avg": 15.0},
            doc! {"_id": "abc", "total": 120, "n": 2, "avg": 6.0},
            doc! {"_id": "jkl", "total": 20, "n": 1, "avg": 1.0},
        ],
    );
    let got = agg(
        &c,
        vec![
            doc! {"$unwind": {"path": "$tags", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}},
            doc! {"$project": {"_id": 1, "tags": 1, "i": 1}},
        ],
    )
    .await;
    assert_docs(
        &got,
        &[
            doc! {"_id": 1, "tags": "a", "i": 0_i64},
            doc! {"_id": 1, "tags": "b", "i": 1_i64},
            doc! {"_id": 2, "i": bson::Bson::Null},
            doc! {"_id": 3, "tags": "c", "i": 0_i64},
            doc! {"_id": 4, "i": bson::Bson::Null},
            doc! {"_id": 5, "tags": "solo", "i": bson::Bson::Null},
        ],
    );
    let got = agg(
        &c,
        vec![
            doc! {"$match": {"price": {"$gte": 10}}},
            doc! {"$addFields": {"revenue": {"$multiply": ["$price", "$quantity"]}}},
            doc! {"$set": {"x.y": 1}},
            doc! {"$unset": ["tags", "quantity"]},
            doc! {"$skip": 1},
            doc! {"$limit": 2},
            doc! {"$count": "n"},
        ],
    )
    .await;
    assert_docs(&got, &[doc! {"n": 2}]);
}

#[tokio::test]
async fn cursors_and_get_more() {
    let server = TestServer::start();
    let client = server.client().await;
    let c = client.database("agg").collection::<Document>("big");
    c.insert_many((0..1000).map(|i| doc! {"_id": i, "v": i % 7}))
        .await
        .unwrap();
    let mut cur = c
        .aggregate([doc! {"$match": {"v": 3}}, doc! {"$project": {"v": 0}}])
        .with_options(AggregateOptions::builder().batch_size(10).build())
        .await
        .unwrap();
    let mut ids = Vec::new();
    while cur.advance().await.unwrap() {
        ids.push(cur.deserialize_current().unwrap().get_i32("_id").unwrap());
    }
    let want: Vec<i32> = (0..1000).filter(|i| i % 7 == 3).collect();
    assert_eq!(ids, want);
    // A blocking pipeline across batches.
    let got = collect(
        c.aggregate([
            doc! {"$group": {"_id": "$v", "n": {"$sum": 1}}},
            doc! {"$sort": {"_id": 1}},
        ])
        .with_options(AggregateOptions::builder().batch_size(2).build())
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(got.len(), 7);
    assert_eq!(got[0], doc! {"_id": 0, "n": 143});
    // The raw reply shape.
    let r = cmd(
        &client.database("agg"),
        doc! {"aggregate": "big", "pipeline": [{"$limit": 3}], "cursor": {"batchSize": 2}},
    )
    .await;
    let cursor = r.get_document("cursor").unwrap();
    assert_eq!(cursor.get_array("firstBatch").unwrap().len(), 2);
    assert!(cursor.get_i64("id").unwrap() != 0);
    assert_eq!(cursor.get_str("ns").unwrap(), "agg.big");
}

#[tokio::test]
async fn error_codes() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("agg");
    let c = db.collection::<Document>("e");
    c.insert_one(doc! {"_id": 1, "a": 1}).await.unwrap();
    assert_eq!(agg_err(&c, vec![doc! {"$bogus": 1}]).await, 40324);
    assert_eq!(
        agg_err(&c, vec![doc! {"$match": {}, "$limit": 1}]).await,
        40323
    );
    assert_eq!(agg_err(&c, vec![doc! {}]).await, 40323);
    assert_eq!(
        agg_err(&c, vec![doc! {"$group": {"_id": 1, "x": {"$bogus": 1}}}]).await,
        15952
    );
    assert_eq!(
        agg_err(&c, vec![doc! {"$project": {"x": {"$bogus": 1}}}]).await,
        31325
    );
    assert_eq!(
        agg_err(&c, vec![doc! {"$group": {"_id": {"$bogus": 1}}}]).await,
        168
    );
    assert_eq!(
        agg_err(
            &c,
            vec![doc! {"$project": {"x": {"$add": [{"$bogus": 1}]}}}]
        )
        .await,
        168
    );
    assert_eq!(
        agg_err(&c, vec![doc! {"$group": {"x": {"$sum": 1}}}]).await,
        15955
    );
    assert_eq!(agg_err(&c, vec![doc! {"$project": {"$x": 1}}]).await, 16410);
    assert_eq!(agg_err(&c, vec![doc! {"$unwind": "$a\u{0}b"}]).await, 16411);
    assert_eq!(agg_err(&c, vec![doc! {"$sort": {"$a": 1}}]).await, 16410);
    assert_eq!(
        agg_err(&c, vec![doc! {"$project": {"x": "$a\u{0}"}}]).await,
        16419
    );
    // A required field missing (`output`).
    assert_eq!(
        agg_err(&c, vec![doc! {"$setWindowFields": {}}]).await,
        40414
    );
    assert_eq!(
        agg_err(&c, vec![doc! {"$project": {"x": {"$divide": [1, 0]}}}]).await,
        2
    );
    // Runtime errors carry MongoDB's prefix.
    let e = db
        .run_command(doc! {"aggregate": "e", "pipeline": [{"$project": {"x": {"$divide": [1, {"$subtract": ["$a", 1]}]}}}], "cursor": {}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 2);
    assert!(
        e.to_string().contains(
            "PlanExecutor error during aggregation :: caused by :: can't $divide by zero"
        ),
        "{e}"
    );
    let e = db
        .run_command(doc! {"aggregate": "e", "pipeline": []})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 9);
    let e = db
        .run_command(doc! {"aggregate": "e", "pipeline": {}, "cursor": {}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 14);
    let e = db
        .run_command(doc! {"aggregate": "e", "pipeline": [], "cursor": {}, "bogus": 1})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 40415);
}

#[tokio::test]
async fn out_and_merge_failures_leave_target_intact() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("agg");
    let src = db.collection::<Document>("src");
    let target = db.collection::<Document>("target");
    src.insert_many((0..1200).map(|i| doc! {"_id": i, "k": i % 3}))
        .await
        .unwrap();
    target
        .insert_many([doc! {"_id": "keep1"}, doc! {"_id": "keep2"}])
        .await
        .unwrap();
    // Every document has k = 7: the duplicate _ids come late, after the first batches.
    let e = db
        .run_command(doc! {
            "aggregate": "src",
            "pipeline": [{"$project": {"_id": {"$cond": [{"$lt": ["$_id", 1100]}, "$_id", 5]}}}, {"$out": "target"}],
            "cursor": {},
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 11000, "{e}");
    let left = collect(target.find(doc! {}).await.unwrap()).await;
    assert_docs(&left, &[doc! {"_id": "keep1"}, doc! {"_id": "keep2"}]);
    let names = db.list_collection_names().await.unwrap();
    assert!(
        !names.iter().any(|n| n.starts_with("tmp.agg_out")),
        "{names:?}"
    );
    // A successful $out replaces it, with an empty first batch.
    let r = cmd(
        &db,
        doc! {"aggregate": "src", "pipeline": [{"$match": {"k": 0}}, {"$out": "target"}], "cursor": {}},
    )
    .await;
    assert!(
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .is_empty()
    );
    assert_eq!(target.count_documents(doc! {}).await.unwrap(), 400);
    // $merge with whenNotMatched: fail fails and leaves the matched ones as they were.
    let e = db
        .run_command(doc! {
            "aggregate": "src",
            "pipeline": [{"$match": {"_id": {"$in": [0, 1]}}}, {"$merge": {"into": "target", "whenNotMatched": "fail"}}],
            "cursor": {},
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 13113);
    assert_eq!(target.count_documents(doc! {}).await.unwrap(), 400);
    assert_eq!(
        agg_err(&src, vec![doc! {"$out": "target"}, doc! {"$match": {}}]).await,
        40601
    );
    assert_eq!(
        agg_err(&src, vec![doc! {"$merge": {"into": "target", "on": "k"}}]).await,
        51183
    );
}

#[tokio::test]
async fn server_stages_and_collectionless() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("agg");
    let c = db.collection::<Document>("s");
    c.insert_many((0..10).map(|i| doc! {"_id": i, "a": i}))
        .await
        .unwrap();
    c.create_index(mongodb::IndexModel::builder().keys(doc! {"a": 1}).build())
        .await
        .unwrap();
    c.find(doc! {"a": 3}).await.unwrap();
    let got = agg(
        &c,
        vec![doc! {"$collStats": {"count": {}, "storageStats": {}, "latencyStats": {}}}],
    )
    .await;
    assert_eq!(got.len(), 1);
    let s = &got[0];
    assert_eq!(s.get_str("ns").unwrap(), "agg.s");
    assert_eq!(s.get_i32("count").unwrap(), 10);
    assert_eq!(
        s.get_document("storageStats")
            .unwrap()
            .get_i32("count")
            .unwrap(),
        10
    );
    assert!(
        s.get_document("latencyStats")
            .unwrap()
            .get_document("reads")
            .unwrap()
            .get_i64("ops")
            .unwrap()
            >= 1
    );
    let keys: Vec<&str> = s.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "ns",
            "host",
            "localTime",
            "latencyStats",
            "storageStats",
            "count"
        ]
    );
    let idx = agg(
        &c,
        vec![doc! {"$indexStats": {}}, doc! {"$sort": {"name": 1}}],
    )
    .await;
    let names: Vec<&str> = idx.iter().map(|d| d.get_str("name").unwrap()).collect();
    assert_eq!(names, ["_id_", "a_1"]);
    assert!(
        idx[1]
            .get_document("accesses")
            .unwrap()
            .get_i64("ops")
            .unwrap()
            >= 1
    );
    let got = collect(
        db.aggregate([
            doc! {"$documents": [{"x": 1}, {"x": 2}]},
            doc! {"$project": {"y": {"$multiply": ["$x", 10]}, "_id": 0}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_docs(&got, &[doc! {"y": 10}, doc! {"y": 20}]);
    let admin = client.database("admin");
    let ops = collect(admin.aggregate([doc! {"$currentOp": {}}]).await.unwrap()).await;
    assert!(ops.is_empty() || ops[0].contains_key("op"));
    let e = db
        .run_command(doc! {"aggregate": 1, "pipeline": [{"$currentOp": {}}], "cursor": {}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 73);
    let e = db
        .run_command(doc! {"aggregate": 1, "pipeline": [{"$match": {}}], "cursor": {}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 73);
    let missing = db.collection::<Document>("missing");
    assert_eq!(
        agg_err(&missing, vec![doc! {"$collStats": {"storageStats": {}}}]).await,
        26
    );
}

#[tokio::test]
async fn list_catalog_shows_collections_indexes_and_views() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("lc");
    let c = db.collection::<Document>("c");
    c.insert_one(doc! {"a": [1, 2]}).await.unwrap();
    c.create_index(mongodb::IndexModel::builder().keys(doc! {"a": 1}).build())
        .await
        .unwrap();
    db.create_collection("v")
        .view_on("c".to_string())
        .pipeline(vec![doc! {"$match": {"a": 1}}])
        .await
        .unwrap();
    // On a collection: its own entry.
    let got = agg(&c, vec![doc! {"$listCatalog": {}}]).await;
    assert_eq!(got.len(), 1);
    let e = &got[0];
    let keys: Vec<&str> = e.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["db", "name", "type", "md", "idxIdent", "ns", "ident"]
    );
    assert_eq!(e.get_str("type").unwrap(), "collection");
    assert_eq!(e.get_str("ns").unwrap(), "lc.c");
    let md = e.get_document("md").unwrap();
    assert_eq!(md.get_str("ns").unwrap(), "lc.c");
    assert!(md.get_document("options").unwrap().contains_key("uuid"));
    let idx = md.get_array("indexes").unwrap();
    assert_eq!(idx.len(), 2);
    let a = idx[1].as_document().unwrap();
    assert_eq!(
        a.get_document("spec").unwrap().get_str("name").unwrap(),
        "a_1"
    );
    assert!(a.get_bool("ready").unwrap());
    assert!(a.get_bool("multikey").unwrap());
    // A missing collection: nothing.
    let missing = db.collection::<Document>("missing");
    assert!(
        agg(&missing, vec![doc! {"$listCatalog": {}}])
            .await
            .is_empty()
    );
    // Collectionless on admin: every collection (system.views among them, as on mongod),
    // then the views.
    let all = collect(
        client
            .database("admin")
            .aggregate([
                doc! {"$listCatalog": {}},
                doc! {"$match": {"db": "lc"}},
                doc! {"$project": {"_id": 0, "name": 1, "type": 1, "viewOn": 1}},
            ])
            .await
            .unwrap(),
    )
    .await;
    assert_docs(
        &all,
        &[
            doc! {"name": "c", "type": "collection"},
            doc! {"name": "system.views", "type": "collection"},
            doc! {"name": "v", "type": "view", "viewOn": "c"},
        ],
    );
    // Errors: collectionless elsewhere (73), a non-empty argument (6200600), not first (40602).
    let e = db
        .run_command(doc! {"aggregate": 1, "pipeline": [{"$listCatalog": {}}], "cursor": {}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 73);
    assert_eq!(
        agg_err(&c, vec![doc! {"$listCatalog": {"x": 1}}]).await,
        6200600
    );
    assert_eq!(
        agg_err(&c, vec![doc! {"$match": {}}, doc! {"$listCatalog": {}}]).await,
        40602
    );
}

#[tokio::test]
async fn explain_shows_pushdown_and_stages() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("agg");
    let c = db.collection::<Document>("x");
    c.insert_many((0..200).map(|i| doc! {"_id": i, "k": i % 20, "v": i}))
        .await
        .unwrap();
    c.create_index(mongodb::IndexModel::builder().keys(doc! {"k": 1}).build())
        .await
        .unwrap();
    // A pipeline with a $group: stages, the $cursor with the index scan.
    let r = cmd(
        &db,
        doc! {"explain": {"aggregate": "x", "pipeline": [{"$match": {"k": 3}}, {"$group": {"_id": null, "s": {"$sum": "$v"}}}], "cursor": {}}, "verbosity": "executionStats"},
    )
    .await;
    let stages = r.get_array("stages").unwrap();
    assert_eq!(stages.len(), 2);
    let cursor = stages[0].as_document().unwrap();
    let qp = cursor
        .get_document("$cursor")
        .unwrap()
        .get_document("queryPlanner")
        .unwrap();
    let wp = qp.get_document("winningPlan").unwrap();
    let text = format!("{wp}");
    assert!(text.contains("IXSCAN") && text.contains("k_1"), "{text}");
    assert_eq!(cursor.get_i64("nReturned").unwrap(), 10);
    let group = stages[1].as_document().unwrap();
    assert!(group.contains_key("$group"));
    assert_eq!(group.get_i64("nReturned").unwrap(), 1);
    assert_eq!(
        r.get_document("command")
            .unwrap()
            .get_str("aggregate")
            .unwrap(),
        "x"
    );
    // Entirely pushed down: find-style explain; explain: true is queryPlanner.
    let r = cmd(
        &db,
        doc! {"aggregate": "x", "pipeline": [{"$match": {"k": {"$gte": 18}}}, {"$sort": {"k": -1}}, {"$limit": 5}], "explain": true},
    )
    .await;
    assert!(r.get_document("queryPlanner").is_ok(), "{r}");
    assert!(!r.contains_key("executionStats"));
    assert!(!r.contains_key("stages"));
    let e = db
        .run_command(doc! {"explain": {"aggregate": "x", "pipeline": [{"$out": "y"}], "cursor": {}}, "verbosity": "executionStats"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 51184);
    assert!(
        db.list_collection_names()
            .await
            .unwrap()
            .iter()
            .all(|n| n != "y")
    );
}

#[tokio::test]
async fn max_time_ms_and_memory_limit() {
    let server = TestServer::start_with(&["--sort-memory-limit-bytes", "100000"]);
    let client = server.client().await;
    let db = client.database("agg");
    let c = db.collection::<Document>("m");
    c.insert_many((0..2000).map(|i| doc! {"_id": i, "g": i, "pad": "x".repeat(100)}))
        .await
        .unwrap();
    let group = doc! {"$group": {"_id": "$g", "p": {"$first": "$pad"}}};
    let e = db
        .run_command(doc! {"aggregate": "m", "pipeline": [group.clone()], "cursor": {}, "allowDiskUse": false})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 292, "{e}");
    let r = cmd(
        &db,
        doc! {"aggregate": "m", "pipeline": [group, {"$count": "n"}], "cursor": {}, "allowDiskUse": true},
    )
    .await;
    assert_eq!(
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()[0]
            .as_document()
            .unwrap()
            .get_i32("n")
            .unwrap(),
        2000
    );
    let e = db
        .run_command(doc! {
            "aggregate": "m",
            "pipeline": [{"$lookup": {"from": "m", "pipeline": [{"$group": {"_id": "$g"}}], "let": {"x": "$g"}, "as": "all"}}],
            "cursor": {},
            "maxTimeMS": 50,
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 50, "{e}");
}

/// `$setWindowFields` through the driver: the manual's cumulative and moving-average
/// examples, a range window, a rank, the memory limit (5414201) and spilling with
/// `allowDiskUse`, and parse errors.
#[tokio::test]
async fn set_window_fields() {
    let server = TestServer::start_with(&["--window-memory-limit-bytes", "200000"]);
    let client = server.client().await;
    let db = client.database("aggwin");
    let c = db.collection::<Document>("cakeSales");
    let d = |s: &str| bson::DateTime::parse_rfc3339_str(s).unwrap();
    c.insert_many([
        doc! {"_id": 0, "type": "chocolate", "orderDate": d("2020-05-18T14:10:30Z"), "state": "CA", "price": 13, "quantity": 120},
        doc! {"_id": 1, "type": "chocolate", "orderDate": d("2021-03-20T11:30:05Z"), "state": "WA", "price": 14, "quantity": 140},
        doc! {"_id": 2, "type": "vanilla", "orderDate": d("2021-01-11T06:31:15Z"), "state": "CA", "price": 12, "quantity": 145},
        doc! {"_id": 3, "type": "vanilla", "orderDate": d("2020-02-08T13:13:23Z"), "state": "WA", "price": 13, "quantity": 104},
        doc! {"_id": 4, "type": "strawberry", "orderDate": d("2019-05-18T16:09:01Z"), "state": "CA", "price": 41, "quantity": 162},
        doc! {"_id": 5, "type": "strawberry", "orderDate": d("2019-01-08T06:12:03Z"), "state": "WA", "price": 43, "quantity": 134},
    ])
    .await
    .unwrap();
    let got = agg(
        &c,
        vec![
            doc! {"$setWindowFields": {"partitionBy": "$state", "sortBy": {"orderDate": 1}, "output": {
                "cum": {"$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}},
                "avg": {"$avg": "$quantity", "window": {"documents": [-1, 0]}},
                "similar": {"$sum": "$quantity", "window": {"range": [-1, 1], "unit": "year"}},
                "rank": {"$rank": {}}}}},
            doc! {"$project": {"cum": 1, "avg": 1, "similar": 1, "rank": 1}},
        ],
    )
    .await;
    assert_docs(
        &got,
        &[
            doc! {"_id": 4, "cum": 162, "avg": 162.0, "similar": 282, "rank": 1},
            doc! {"_id": 0, "cum": 282, "avg": 141.0, "similar": 427, "rank": 2},
            doc! {"_id": 2, "cum": 427, "avg": 132.5, "similar": 265, "rank": 3},
            doc! {"_id": 5, "cum": 134, "avg": 134.0, "similar": 134, "rank": 1},
            doc! {"_id": 3, "cum": 238, "avg": 119.0, "similar": 104, "rank": 2},
            doc! {"_id": 1, "cum": 378, "avg": 122.0, "similar": 140, "rank": 3},
        ],
    );
    // Memory: an unbounded window over ~300 KB fails without allowDiskUse, spills with it.
    let m = db.collection::<Document>("m");
    m.insert_many((0..300).map(|i| doc! {"_id": i, "pad": "x".repeat(1000)}))
        .await
        .unwrap();
    let pipeline = vec![doc! {"$setWindowFields": {"sortBy": {"_id": 1}, "output": {
    "n": {"$count": {}, "window": {"documents": ["unbounded", "unbounded"]}}}}}];
    let e = db
        .run_command(doc! {"aggregate": "m", "pipeline": pipeline.clone(), "cursor": {}, "allowDiskUse": false})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 5414201, "{e}");
    let got = collect(
        m.aggregate(pipeline)
            .with_options(AggregateOptions::builder().allow_disk_use(true).build())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(got.len(), 300);
    assert!(got.iter().all(|d| d.get_i32("n").ok() == Some(300)));
    // Errors.
    for (stage, code) in [
        (
            doc! {"$setWindowFields": {"output": {"a": {"$rank": {}}}}},
            5371602,
        ),
        (
            doc! {"$setWindowFields": {"output": {"a": {"$sum": 1, "window": {"documents": [-1, 0]}}}}},
            5339901,
        ),
        (doc! {"$setWindowFields": {"bogus": 1, "output": {}}}, 40415),
        (
            doc! {"$setWindowFields": {"output": {"a": {"$summ": 1}}}},
            9,
        ),
    ] {
        assert_eq!(agg_err(&c, vec![stage.clone()]).await, code, "{stage}");
    }
    // A moving average over 2000 documents in batches (getMore resumes the window).
    let big = db.collection::<Document>("big");
    big.insert_many((0..2000).map(|i| doc! {"_id": i, "v": i}))
        .await
        .unwrap();
    let got = collect(
        big.aggregate(vec![
            doc! {"$setWindowFields": {"sortBy": {"_id": 1}, "output": {
            "ma": {"$avg": "$v", "window": {"documents": [-9, 0]}}}}},
        ])
        .batch_size(7)
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(got.len(), 2000);
    for (i, d) in got.iter().enumerate() {
        let lo = i.saturating_sub(9);
        let want = (lo..=i).sum::<usize>() as f64 / (i - lo + 1) as f64;
        assert_eq!(d.get_f64("ma").unwrap(), want, "{d}");
    }
}

/// `$densify` and `$fill` through the driver, with their error codes.
#[tokio::test]
async fn densify_and_fill() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("aggdens");
    let c = db.collection::<Document>("coffee");
    c.insert_many([
        doc! {"_id": 1, "altitude": 600, "variety": "Arabica Typica", "score": 68.3},
        doc! {"_id": 2, "altitude": 750, "variety": "Arabica Typica", "score": 69.5},
        doc! {"_id": 3, "altitude": 950, "variety": "Arabica Typica", "score": 70.5},
        doc! {"_id": 4, "altitude": 1250, "variety": "Gesha", "score": 88.15},
        doc! {"_id": 5, "altitude": 1700, "variety": "Gesha", "score": 95.5, "price": 1029},
    ])
    .await
    .unwrap();
    let got = agg(
        &c,
        vec![
            doc! {"$densify": {"field": "altitude", "partitionByFields": ["variety"],
            "range": {"bounds": "partition", "step": 200}}},
            doc! {"$fill": {"sortBy": {"altitude": 1}, "partitionByFields": ["variety"],
            "output": {"score": {"method": "linear"}, "price": {"value": 0}}}},
        ],
    )
    .await;
    assert_docs(
        &got,
        &[
            doc! {"_id": 1, "altitude": 600, "variety": "Arabica Typica", "score": 68.3, "price": 0},
            doc! {"_id": 2, "altitude": 750, "variety": "Arabica Typica", "score": 69.5, "price": 0},
            doc! {"variety": "Arabica Typica", "altitude": 800, "score": 69.75, "price": 0},
            doc! {"_id": 3, "altitude": 950, "variety": "Arabica Typica", "score": 70.5, "price": 0},
            doc! {"_id": 4, "altitude": 1250, "variety": "Gesha", "score": 88.15, "price": 0},
            doc! {"variety": "Gesha", "altitude": 1450, "score": 91.41666666666667, "price": 0},
            doc! {"variety": "Gesha", "altitude": 1650, "score": 94.68333333333334, "price": 0},
            doc! {"_id": 5, "altitude": 1700, "variety": "Gesha", "score": 95.5, "price": 1029},
        ],
    );
    for (stage, code) in [
        (
            doc! {"$densify": {"field": "a", "range": {"step": 1, "bounds": "partition"}}},
            5733408,
        ),
        (
            doc! {"$densify": {"field": "a", "range": {"step": -1, "bounds": [0, 1]}}},
            5733401,
        ),
        (
            doc! {"$densify": {"field": "variety", "range": {"step": 1, "bounds": "full"}}},
            5733201,
        ),
        (doc! {"$fill": {"output": {}}}, 6050203),
        (
            doc! {"$fill": {"output": {"a": {"method": "cubic"}}}},
            6050202,
        ),
    ] {
        assert_eq!(agg_err(&c, vec![stage.clone()]).await, code, "{stage}");
    }
}

#[tokio::test]
async fn a_result_over_16_mb_is_bson_object_too_large() {
    let server = TestServer::start();
    let client = server.client().await;
    let c = client.database("big").collection::<Document>("c");
    c.insert_one(doc! {"_id": 1, "s": "a".repeat(9 * 1024 * 1024)})
        .await
        .unwrap();
    assert_eq!(
        agg_err(&c, vec![doc! {"$addFields": {"t": "$s"}}]).await,
        10334
    );
    // Below the limit it is returned.
    let got = agg(&c, vec![doc! {"$project": {"n": {"$strLenBytes": "$s"}}}]).await;
    assert_eq!(got, [doc! {"_id": 1, "n": 9 * 1024 * 1024}]);
}
