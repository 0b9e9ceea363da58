//! The query planner and `explain` through the Rust driver: the plans of the MongoDB
//! manual's index examples ("Analyze Query Performance", compound indexes, sort, covered
//! queries, `$or`), with their documented `executionStats` numbers, plus hint, min/max,
//! count, distinct and write explains.

use bson::{Bson, Document, doc};
use cairn_compat_tests::{TestServer, code_of};
use mongodb::Database;

async fn explain(db: &Database, cmd: Document, verbosity: &str) -> Document {
    db.run_command(doc! {"explain": cmd, "verbosity": verbosity})
        .await
        .unwrap()
}

/// The stages of a plan from the top down, e.g. `["FETCH", "IXSCAN"]`.
fn stages(plan: &Document) -> Vec<String> {
    let mut out = vec![plan.get_str("stage").unwrap().to_string()];
    if let Ok(input) = plan.get_document("inputStage") {
        out.extend(stages(input));
    }
    if let Ok(inputs) = plan.get_array("inputStages") {
        for i in inputs {
            out.push(format!("[{}]", stages(i.as_document().unwrap()).join(",")));
        }
    }
    out
}

/// The first stage named `name` in a plan tree.
fn find_stage<'a>(plan: &'a Document, name: &str) -> Option<&'a Document> {
    if plan.get_str("stage").ok() == Some(name) {
        return Some(plan);
    }
    if let Ok(input) = plan.get_document("inputStage") {
        return find_stage(input, name);
    }
    None
}

fn winning(e: &Document) -> &Document {
    e.get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap()
}

fn exec_stats(e: &Document) -> &Document {
    e.get_document("executionStats").unwrap()
}

fn n(d: &Document, field: &str) -> i64 {
    match d.get(field) {
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        other => panic!("{field}: {other:?} in {d:?}"),
    }
}

async fn inventory(db: &Database) {
    let c = db.collection::<Document>("inventory");
    c.insert_many([
        doc! {"_id": 1, "item": "f1", "type": "food", "quantity": 500},
        doc! {"_id": 2, "item": "f2", "type": "food", "quantity": 100},
        doc! {"_id": 3, "item": "p1", "type": "paper", "quantity": 200},
        doc! {"_id": 4, "item": "p2", "type": "paper", "quantity": 150},
        doc! {"_id": 5, "item": "f3", "type": "food", "quantity": 300},
        doc! {"_id": 6, "item": "t1", "type": "toys", "quantity": 500},
        doc! {"_id": 7, "item": "a1", "type": "apparel", "quantity": 250},
        doc! {"_id": 8, "item": "a2", "type": "apparel", "quantity": 400},
        doc! {"_id": 9, "item": "t2", "type": "toys", "quantity": 50},
        doc! {"_id": 10, "item": "f4", "type": "food", "quantity": 75},
    ])
    .await
    .unwrap();
}

/// The manual's "Analyze Query Performance" tutorial, step by step, with its numbers.
#[tokio::test]
async fn analyze_query_performance_manual() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("perf");
    inventory(&db).await;
    let range = doc! {"quantity": {"$gte": 100, "$lte": 200}};
    // Without an index: a collection scan reads all ten documents for three results.
    let e = explain(
        &db,
        doc! {"find": "inventory", "filter": range.clone()},
        "executionStats",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["COLLSCAN"]);
    let s = exec_stats(&e);
    assert_eq!(
        (
            n(s, "nReturned"),
            n(s, "totalKeysExamined"),
            n(s, "totalDocsExamined")
        ),
        (3, 0, 10)
    );
    // With {quantity: 1}: three keys, three documents.
    let c = db.collection::<Document>("inventory");
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"quantity": 1})
            .build(),
    )
    .await
    .unwrap();
    let e = explain(
        &db,
        doc! {"find": "inventory", "filter": range.clone()},
        "executionStats",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["FETCH", "IXSCAN"]);
    let ix = find_stage(winning(&e), "IXSCAN").unwrap();
    assert_eq!(
        ix.get_document("keyPattern").unwrap(),
        &doc! {"quantity": 1}
    );
    assert_eq!(ix.get_str("indexName").unwrap(), "quantity_1");
    assert_eq!(
        ix.get_document("indexBounds").unwrap(),
        &doc! {"quantity": ["[100, 200]"]}
    );
    let s = exec_stats(&e);
    assert_eq!(
        (
            n(s, "nReturned"),
            n(s, "totalKeysExamined"),
            n(s, "totalDocsExamined")
        ),
        (3, 3, 3)
    );
    // Compound indexes: {type, quantity} examines 2 keys for 2 documents and beats
    // {quantity, type}, which examines 5; the loser is a rejected plan.
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"quantity": 1, "type": 1})
            .build(),
    )
    .await
    .unwrap();
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"type": 1, "quantity": 1})
            .build(),
    )
    .await
    .unwrap();
    let q = doc! {"quantity": {"$gte": 100, "$lte": 300}, "type": "food"};
    let e = explain(
        &db,
        doc! {"find": "inventory", "filter": q.clone()},
        "allPlansExecution",
    )
    .await;
    let ix = find_stage(winning(&e), "IXSCAN").unwrap();
    assert_eq!(ix.get_str("indexName").unwrap(), "type_1_quantity_1");
    assert_eq!(
        ix.get_document("indexBounds").unwrap(),
        &doc! {"type": ["[\"food\", \"food\"]"], "quantity": ["[100, 300]"]}
    );
    let s = exec_stats(&e);
    assert_eq!(
        (
            n(s, "nReturned"),
            n(s, "totalKeysExamined"),
            n(s, "totalDocsExamined")
        ),
        (2, 2, 2)
    );
    let rejected = e
        .get_document("queryPlanner")
        .unwrap()
        .get_array("rejectedPlans")
        .unwrap();
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    let all = s.get_array("allPlansExecution").unwrap();
    assert_eq!(all.len(), 3);
    let keys_of = |name: &str| {
        all.iter()
            .map(|p| p.as_document().unwrap())
            .find(|p| {
                find_stage(p.get_document("executionStages").unwrap(), "IXSCAN")
                    .and_then(|i| i.get_str("indexName").ok())
                    == Some(name)
            })
            .map(|p| n(p, "totalKeysExamined"))
    };
    assert_eq!(keys_of("type_1_quantity_1"), Some(2));
    assert_eq!(keys_of("quantity_1_type_1"), Some(5));
    // The results are those of a collection scan.
    let docs: Vec<Document> = {
        let mut cur = c.find(q.clone()).sort(doc! {"_id": 1}).await.unwrap();
        let mut v = Vec::new();
        while cur.advance().await.unwrap() {
            v.push(cur.deserialize_current().unwrap());
        }
        v
    };
    assert_eq!(
        docs.iter()
            .map(|d| d.get_i32("_id").unwrap())
            .collect::<Vec<_>>(),
        [2, 5]
    );
}

#[tokio::test]
async fn sort_limit_covered_or_and_hints() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("plans");
    inventory(&db).await;
    let c = db.collection::<Document>("inventory");
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"quantity": 1})
            .build(),
    )
    .await
    .unwrap();
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"type": 1, "item": 1})
            .build(),
    )
    .await
    .unwrap();
    // Sort + limit served by the index backward: only `limit` keys are read.
    let e = explain(
        &db,
        doc! {"find": "inventory", "sort": {"quantity": -1}, "limit": 2},
        "executionStats",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["LIMIT", "FETCH", "IXSCAN"]);
    let ix = find_stage(winning(&e), "IXSCAN").unwrap();
    assert_eq!(ix.get_str("direction").unwrap(), "backward");
    let s = exec_stats(&e);
    assert_eq!(
        (
            n(s, "nReturned"),
            n(s, "totalKeysExamined"),
            n(s, "totalDocsExamined")
        ),
        (2, 2, 2)
    );
    // A sort no index provides is a blocking SORT over the scan.
    let e = explain(
        &db,
        doc! {"find": "inventory", "sort": {"item": 1}, "limit": 2},
        "queryPlanner",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["SORT", "COLLSCAN"]);
    assert!(e.get("executionStats").is_none());
    // The manual's covered query: {type: 1, item: 1}, projection on those fields only.
    let e = explain(
        &db,
        doc! {
            "find": "inventory",
            "filter": {"type": "food", "item": {"$regex": "^f"}},
            "projection": {"item": 1, "_id": 0},
        },
        "executionStats",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["PROJECTION_COVERED", "IXSCAN"]);
    let s = exec_stats(&e);
    assert_eq!(
        (n(s, "nReturned"), n(s, "totalDocsExamined")),
        (4, 0),
        "{s:?}"
    );
    let mut cur = c
        .find(doc! {"type": "food", "item": {"$regex": "^f"}})
        .projection(doc! {"item": 1, "_id": 0})
        .await
        .unwrap();
    let mut items = Vec::new();
    while cur.advance().await.unwrap() {
        items.push(cur.deserialize_current().unwrap());
    }
    assert_eq!(
        items,
        [
            doc! {"item": "f1"},
            doc! {"item": "f2"},
            doc! {"item": "f3"},
            doc! {"item": "f4"}
        ]
    );
    // $or: a union of two index scans.
    let e = explain(
        &db,
        doc! {"find": "inventory", "filter": {"$or": [{"quantity": {"$lt": 80}}, {"type": "paper"}]}},
        "executionStats",
    )
    .await;
    assert_eq!(
        stages(winning(&e)),
        ["FETCH", "OR", "[IXSCAN]", "[IXSCAN]"],
        "{e:?}"
    );
    assert_eq!(n(exec_stats(&e), "nReturned"), 4);
    // Hints: by name, by key pattern, $natural; a bad one is BadValue.
    for hint in [
        Bson::String("quantity_1".into()),
        Bson::Document(doc! {"quantity": 1}),
    ] {
        let e = explain(
            &db,
            doc! {"find": "inventory", "filter": {"type": "food"}, "hint": hint},
            "executionStats",
        )
        .await;
        let ix = find_stage(winning(&e), "IXSCAN").unwrap();
        assert_eq!(ix.get_str("indexName").unwrap(), "quantity_1");
        assert_eq!(
            ix.get_document("indexBounds").unwrap(),
            &doc! {"quantity": ["[MinKey, MaxKey]"]}
        );
        assert_eq!(n(exec_stats(&e), "nReturned"), 4);
    }
    let e = explain(
        &db,
        doc! {"find": "inventory", "filter": {"quantity": 500}, "hint": {"$natural": -1}},
        "queryPlanner",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["COLLSCAN"]);
    assert_eq!(winning(&e).get_str("direction").unwrap(), "backward");
    for hint in [
        Bson::String("nope".into()),
        Bson::Document(doc! {"nope": 1}),
    ] {
        let err = c
            .find(doc! {})
            .hint(mongodb::options::Hint::Keys(doc! {}))
            .await
            .err();
        assert!(err.is_none());
        let err = db
            .run_command(doc! {"find": "inventory", "hint": hint})
            .await
            .unwrap_err();
        assert_eq!(code_of(&err), 2);
    }
    // Hidden indexes are not used (and cannot be hinted).
    db.run_command(doc! {"collMod": "inventory", "index": {"name": "quantity_1", "hidden": true}})
        .await
        .unwrap();
    let e = explain(
        &db,
        doc! {"find": "inventory", "filter": {"quantity": 500}},
        "queryPlanner",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["COLLSCAN"]);
    let err = db
        .run_command(doc! {"find": "inventory", "hint": "quantity_1"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), 2);
}

#[tokio::test]
async fn min_max_count_distinct_and_writes() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("more");
    inventory(&db).await;
    let c = db.collection::<Document>("inventory");
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"quantity": 1})
            .build(),
    )
    .await
    .unwrap();
    // min/max need a hint; they select [min, max) of it.
    let err = db
        .run_command(doc! {"find": "inventory", "min": {"quantity": 100}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), 51173);
    let r = db
        .run_command(doc! {
            "find": "inventory",
            "min": {"quantity": 100},
            "max": {"quantity": 300},
            "hint": "quantity_1",
        })
        .await
        .unwrap();
    let batch = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let mut ids: Vec<i32> = batch
        .iter()
        .map(|d| d.as_document().unwrap().get_i32("_id").unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [2, 3, 4, 7]);
    // count: COUNT_SCAN when the index alone answers; RECORD_STORE_FAST_COUNT without a query.
    let e = explain(
        &db,
        doc! {"count": "inventory", "query": {"quantity": {"$gt": 200}}},
        "executionStats",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["COUNT", "COUNT_SCAN"]);
    let s = exec_stats(&e);
    assert_eq!(n(s, "totalDocsExamined"), 0);
    assert_eq!(n(s.get_document("executionStages").unwrap(), "nCounted"), 5);
    let r = db
        .run_command(doc! {"count": "inventory", "query": {"quantity": {"$gt": 200}}})
        .await
        .unwrap();
    assert_eq!(n(&r, "n"), 5);
    let e = explain(&db, doc! {"count": "inventory"}, "queryPlanner").await;
    assert_eq!(stages(winning(&e)), ["RECORD_STORE_FAST_COUNT"]);
    // distinct through the index.
    let e = explain(
        &db,
        doc! {"distinct": "inventory", "key": "type", "query": {"quantity": {"$lt": 100}}},
        "executionStats",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["FETCH", "IXSCAN"]);
    // Writes are explained, not applied.
    let e = explain(
        &db,
        doc! {"update": "inventory", "updates": [{"q": {"quantity": {"$gte": 400}}, "u": {"$set": {"big": true}}, "multi": true}]},
        "executionStats",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["UPDATE", "FETCH", "IXSCAN"]);
    let st = exec_stats(&e).get_document("executionStages").unwrap();
    assert_eq!((n(st, "nMatched"), n(st, "nWouldModify")), (3, 3));
    assert_eq!(
        c.find_one(doc! {"big": true}).await.unwrap(),
        None,
        "explain must not write"
    );
    // An update changing the indexed field does not scan that index.
    let e = explain(
        &db,
        doc! {"update": "inventory", "updates": [{"q": {"quantity": {"$gte": 400}}, "u": {"$inc": {"quantity": 1}}, "multi": true}]},
        "queryPlanner",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["UPDATE", "COLLSCAN"]);
    let e = explain(
        &db,
        doc! {"delete": "inventory", "deletes": [{"q": {"quantity": 50}, "limit": 0}]},
        "executionStats",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["DELETE", "FETCH", "IXSCAN"]);
    assert_eq!(
        n(
            exec_stats(&e).get_document("executionStages").unwrap(),
            "nWouldDelete"
        ),
        1
    );
    assert_eq!(
        c.count_documents(doc! {}).await.map_err(|e| code_of(&e)),
        Ok(10)
    );
    let e = explain(
        &db,
        doc! {"findAndModify": "inventory", "query": {"quantity": {"$gt": 0}}, "sort": {"quantity": 1}, "update": {"$set": {"x": 1}}},
        "executionStats",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["UPDATE", "FETCH", "IXSCAN"]);
    // The updates really run through the same plans.
    let r = c
        .update_many(
            doc! {"quantity": {"$gte": 400}},
            doc! {"$inc": {"quantity": 1}},
        )
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (3, 3));
    let r = c
        .delete_many(doc! {"quantity": {"$lt": 100}})
        .await
        .unwrap();
    assert_eq!(r.deleted_count, 2);
    // Errors: unknown verbosity, unknown and unexplainable commands, write batches of 2.
    let err = db
        .run_command(doc! {"explain": {"find": "inventory"}, "verbosity": "everything"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), 2);
    let err = db
        .run_command(doc! {"explain": {"nope": 1}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), 59);
    let err = db
        .run_command(doc! {"explain": {"ping": 1}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), 20);
    let err = db
        .run_command(doc! {"explain": {"delete": "inventory", "deletes": [{"q": {}, "limit": 0}, {"q": {}, "limit": 0}]}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), 16);
    // A missing collection explains as EOF.
    let e = explain(
        &db,
        doc! {"find": "nothing", "filter": {"a": 1}},
        "executionStats",
    )
    .await;
    assert_eq!(stages(winning(&e)), ["EOF"]);
}
