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
    assert_eq!(agg_err(&c, vec![doc! {"$setWindowFields": {}}]).await, 238);
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
