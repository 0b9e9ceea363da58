//! `aggregate` in the database profiler, through the official Rust driver: its
//! `system.profile` entries carry `keysExamined`, `docsExamined` and `planSummary` as `find`'s
//! do (the plan of the pipeline's `$cursor` stage, or of a leading `$geoNear`'s ring search),
//! in MongoDB's field order, with the work of the whole run.

use bson::{Document, doc};
use cairn_compat_tests::{TestServer, collect};
use mongodb::Database;

async fn entries(db: &Database, filter: Document) -> Vec<Document> {
    collect(
        db.collection::<Document>("system.profile")
            .find(filter)
            .sort(doc! {"ts": 1, "_id": 1})
            .await
            .unwrap(),
    )
    .await
}

fn number(d: &Document, k: &str) -> i64 {
    match d.get(k) {
        Some(bson::Bson::Int32(i)) => i64::from(*i),
        Some(bson::Bson::Int64(i)) => *i,
        other => panic!("{k}: {other:?} in {d}"),
    }
}

#[tokio::test]
async fn aggregate_entries_report_the_work_and_plan() {
    let s = TestServer::start();
    let c = s.client().await;
    let db = c.database("aggprof");
    let coll = db.collection::<Document>("c");
    coll.insert_many((0..6).map(|i| doc! {"_id": i, "a": i, "b": i % 2}))
        .await
        .unwrap();
    coll.create_index(mongodb::IndexModel::builder().keys(doc! {"a": 1}).build())
        .await
        .unwrap();
    let geo = db.collection::<Document>("g");
    geo.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"loc": "2dsphere"})
            .build(),
    )
    .await
    .unwrap();
    geo.insert_many((0..50).map(|i| {
        doc! {"_id": i, "loc": {"type": "Point", "coordinates": [f64::from(i) * 0.5, 0.0]}}
    }))
    .await
    .unwrap();
    db.run_command(doc! {"profile": 2}).await.unwrap();

    // An index scan under the pipeline: IXSCAN, its keys and documents.
    let got = collect(
        coll.aggregate(vec![
            doc! {"$match": {"a": {"$gte": 3}}},
            doc! {"$addFields": {"x": 1}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(got.len(), 3);
    // A collection scan with a blocking stage after it.
    let got = collect(
        coll.aggregate(vec![
            doc! {"$match": {"b": 1}},
            doc! {"$group": {"_id": "$b", "n": {"$sum": 1}}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(got, vec![doc! {"_id": 1, "n": 3}]);
    // A $geoNear answered by the ring search, stopped by $limit.
    let got = collect(
        geo.aggregate(vec![
            doc! {"$geoNear": {"near": {"type": "Point", "coordinates": [0.0, 0.0]}, "distanceField": "d"}},
            doc! {"$limit": 3},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(got.len(), 3);

    let all = entries(&db, doc! {"command.aggregate": {"$exists": true}}).await;
    assert_eq!(all.len(), 3, "{all:#?}");
    let ix = &all[0];
    assert_eq!(ix.get_str("op").unwrap(), "command");
    assert_eq!(ix.get_str("ns").unwrap(), "aggprof.c");
    assert_eq!(ix.get_str("planSummary").unwrap(), "IXSCAN { a: 1 }");
    assert_eq!(number(ix, "keysExamined"), 3);
    assert_eq!(number(ix, "docsExamined"), 3);
    assert_eq!(number(ix, "nreturned"), 3);
    let keys: Vec<&str> = ix.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "_id",
            "op",
            "ns",
            "command",
            "keysExamined",
            "docsExamined",
            "cursorExhausted",
            "numYield",
            "locks",
            "flowControl",
            "nreturned",
            "responseLength",
            "protocol",
            "millis",
            "planSummary",
            "ts",
            "client",
            "allUsers",
            "user"
        ]
    );
    let scan = &all[1];
    assert_eq!(scan.get_str("planSummary").unwrap(), "COLLSCAN");
    assert_eq!(number(scan, "keysExamined"), 0);
    assert_eq!(number(scan, "docsExamined"), 6);
    assert_eq!(number(scan, "nreturned"), 1);
    let near = &all[2];
    assert_eq!(near.get_str("ns").unwrap(), "aggprof.g");
    assert_eq!(
        near.get_str("planSummary").unwrap(),
        "GEO_NEAR_2DSPHERE { loc: \"2dsphere\" }"
    );
    // The same work explain reports for the search.
    db.run_command(doc! {"profile": 0}).await.unwrap();
    let e = db
        .run_command(doc! {
            "explain": {"aggregate": "g", "pipeline": [
                {"$geoNear": {"near": {"type": "Point", "coordinates": [0.0, 0.0]}, "distanceField": "d"}},
                {"$limit": 3},
            ], "cursor": {}},
            "verbosity": "executionStats",
        })
        .await
        .unwrap();
    let stats = e.get_array("stages").unwrap()[0]
        .as_document()
        .unwrap()
        .get_document("$geoNearCursor")
        .unwrap()
        .get_document("executionStats")
        .unwrap()
        .clone();
    assert!(number(near, "docsExamined") >= 3, "{near}");
    assert_eq!(
        number(near, "docsExamined"),
        number(&stats, "totalDocsExamined"),
        "{near} {stats}"
    );
    assert_eq!(
        number(near, "keysExamined"),
        number(&stats, "totalKeysExamined"),
        "{near} {stats}"
    );
}
