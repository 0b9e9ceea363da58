//! `$lookup`'s equality form through the Rust driver, differentially: every way the server
//! may run it (a hash join in natural order when no index answers the equality, a hash join
//! in index order with one plain index, planned queries per document with other indexes or
//! when the stage memory limit is too small for a table) returns byte for byte what the
//! sub-pipeline form `{localField, foreignField, pipeline: []}` returns, which always runs
//! the equality as a planned `$match` per document — over mixed numeric types, strings,
//! null and missing, arrays on either side, documents, duplicates, and with `$unwind`
//! following. A few results are also pinned literally.

use bson::{Bson, Document, doc};
use cairn_compat_tests::{TestServer, assert_docs, collect};
use mongodb::{Database, IndexModel};

/// Values stored at the foreign field and used at the local field.
fn values() -> Vec<Option<Bson>> {
    vec![
        Some(Bson::Int32(1)),
        Some(Bson::Int64(1)),
        Some(Bson::Double(1.0)),
        Some(Bson::Double(-0.0)),
        Some(Bson::Int32(2)),
        Some(Bson::Double(f64::NAN)),
        Some(Bson::Decimal128("1.00".parse().unwrap())),
        Some(Bson::String("x".into())),
        Some(Bson::String("y".into())),
        Some(Bson::Null),
        None,
        Some(Bson::Array(vec![])),
        Some(Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)])),
        Some(Bson::Array(vec![Bson::Int32(2), Bson::Int32(2)])),
        Some(Bson::Array(vec![Bson::Array(vec![
            Bson::Int32(1),
            Bson::Int32(2),
        ])])),
        Some(Bson::Array(vec![Bson::Null, Bson::String("x".into())])),
        Some(Bson::Document(doc! {"a": 1})),
        Some(Bson::Document(doc! {"a": [1, 3]})),
        Some(Bson::Array(vec![
            Bson::Document(doc! {"a": 2}),
            Bson::Document(doc! {"b": 2}),
            Bson::Int32(5),
        ])),
        Some(Bson::Boolean(true)),
        Some(Bson::Int64(3)),
    ]
}

/// Foreign documents inserted out of `_id` order (natural order is `_id` order), several per
/// value; local documents cycling through the values and some arrays of them, enough of
/// them that a hash join behind an index is tried and used.
async fn load(db: &Database) {
    let vals = values();
    let mut foreign = Vec::new();
    for copy in 0..3 {
        for (i, v) in vals.iter().enumerate() {
            let id = ((i * 7 + copy * 13) % 97) as i32 + 100 * copy as i32;
            let mut d = doc! {"_id": id, "x": (i % 4) as i32};
            if let Some(v) = v {
                d.insert("k", v.clone());
            }
            foreign.push(d);
        }
    }
    foreign.reverse();
    db.collection::<Document>("f")
        .insert_many(foreign)
        .await
        .unwrap();
    let mut local = Vec::new();
    for i in 0..400usize {
        let mut d = doc! {"_id": i as i32};
        match i % 25 {
            21 => {
                d.insert("v", vec![Bson::Int32(2), Bson::String("x".into())]);
            }
            22 => {
                d.insert("v", vec![Bson::Int64(3), Bson::Int32(1), Bson::Int32(2)]);
            }
            23 => {
                d.insert("v", vec![Bson::Null, Bson::Int32(5)]);
            }
            24 => {
                d.insert("v", doc! {"a": [2, 1]});
            }
            j => {
                if let Some(v) = vals.get(j).cloned().flatten() {
                    d.insert("v", v);
                }
            }
        }
        local.push(d);
    }
    db.collection::<Document>("l")
        .insert_many(local)
        .await
        .unwrap();
}

async fn run(db: &Database, pipeline: Vec<Document>) -> Vec<Document> {
    collect(
        db.collection::<Document>("l")
            .aggregate(pipeline)
            .await
            .unwrap(),
    )
    .await
}

/// The equality form against the sub-pipeline form, for every pair of paths, with and
/// without `$unwind`.
async fn same_as_sub_pipeline(db: &Database, setting: &str) {
    for (local, foreign) in [("v", "k"), ("v", "k.a"), ("v.a", "k"), ("v.a", "k.a")] {
        let eq = doc! {"$lookup": {"from": "f", "localField": local, "foreignField": foreign, "as": "m"}};
        let sub = doc! {"$lookup": {"from": "f", "localField": local, "foreignField": foreign, "pipeline": [], "as": "m"}};
        for tail in [vec![], vec![doc! {"$unwind": "$m"}]] {
            let mut a = vec![doc! {"$sort": {"_id": 1}}, eq.clone()];
            a.extend(tail.clone());
            let mut b = vec![doc! {"$sort": {"_id": 1}}, sub.clone()];
            b.extend(tail.clone());
            let got = run(db, a).await;
            let want = run(db, b).await;
            assert!(!want.is_empty());
            let matched: usize = got
                .iter()
                .map(|d| match d.get("m") {
                    Some(Bson::Array(a)) => a.len(),
                    Some(_) => 1,
                    None => 0,
                })
                .sum();
            assert!(
                matched > 100,
                "{setting} {local}/{foreign}: {matched} matches"
            );
            eprintln!(
                "{setting}: {local} -> {foreign} (unwind: {})",
                !tail.is_empty()
            );
            assert_docs(&got, &want);
        }
    }
}

async fn set_index(db: &Database, keys: Option<Document>) {
    let f = db.collection::<Document>("f");
    f.drop_indexes().await.unwrap();
    if let Some(keys) = keys {
        f.create_index(IndexModel::builder().keys(keys).build())
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn every_strategy_returns_what_the_planned_query_returns() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("lookup_diff");
    load(&db).await;
    for keys in [
        None,
        Some(doc! {"k": 1}),
        Some(doc! {"k": -1}),
        Some(doc! {"k.a": 1}),
        Some(doc! {"k": 1, "x": 1}),
    ] {
        let name = format!("{keys:?}");
        set_index(&db, keys).await;
        same_as_sub_pipeline(&db, &name).await;
    }
}

/// A stage memory limit too small for any table: planned queries (a collection scan per
/// document without an index, the index with one).
#[tokio::test]
async fn without_room_for_a_table_the_planned_queries_answer() {
    let server = TestServer::start_with(&[
        "--setParameter",
        "internalQueryMaxBlockingSortMemoryUsageBytes=1000",
    ]);
    let client = server.client().await;
    let db = client.database("lookup_small");
    load(&db).await;
    for keys in [None, Some(doc! {"k": 1})] {
        let name = format!("{keys:?}, 1000-byte limit");
        set_index(&db, keys).await;
        same_as_sub_pipeline(&db, &name).await;
    }
}

#[tokio::test]
async fn numbers_null_and_arrays_match_as_in_mongodb() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("lookup_pin");
    db.collection::<Document>("f")
        .insert_many(vec![
            doc! {"_id": 4, "k": 1.0},
            doc! {"_id": 1, "k": 1_i64},
            doc! {"_id": 3, "k": [1, 2]},
            doc! {"_id": 2},
            doc! {"_id": 5, "k": null},
            doc! {"_id": 6, "k": "1"},
            doc! {"_id": 0, "k": [[1]]},
        ])
        .await
        .unwrap();
    db.collection::<Document>("l")
        .insert_many(vec![
            doc! {"_id": 0, "v": 1},
            doc! {"_id": 1},
            doc! {"_id": 2, "v": [2, null]},
            doc! {"_id": 3, "v": [[1]]},
        ])
        .await
        .unwrap();
    let ids = |docs: &[Document]| -> Vec<Vec<i32>> {
        docs.iter()
            .map(|d| {
                d.get_array("m")
                    .unwrap()
                    .iter()
                    .map(|m| m.as_document().unwrap().get_i32("_id").unwrap())
                    .collect()
            })
            .collect()
    };
    let pipeline = vec![
        doc! {"$sort": {"_id": 1}},
        doc! {"$lookup": {"from": "f", "localField": "v", "foreignField": "k", "as": "m"}},
    ];
    // Natural order (no index): 1 == NumberLong(1) == 1.0 and an array holding 1; missing
    // matches null and missing; [2, null] matches 2 and null/missing; [[1]] matches [1] (an
    // element of [[1]]) and [[1]] itself.
    let natural = vec![vec![1, 3, 4], vec![2, 5], vec![2, 3, 5], vec![0]];
    assert_eq!(ids(&run(&db, pipeline.clone()).await), natural);
    // With an index on k the same documents, in index order for several values (null and
    // missing before 2).
    db.collection::<Document>("f")
        .create_index(IndexModel::builder().keys(doc! {"k": 1}).build())
        .await
        .unwrap();
    let indexed = run(&db, pipeline.clone()).await;
    assert_eq!(
        ids(&indexed),
        vec![vec![1, 3, 4], vec![2, 5], vec![2, 5, 3], vec![0]]
    );
}

/// A `$lookup` followed by an `$unwind` of its `as` path runs as one stage (the `$unwind`
/// absorbed, as MongoDB's optimizer does): it outputs exactly what the two stages output
/// apart (kept apart here by an empty `$match` between them) — for every form of `$lookup`,
/// every `$unwind` option, `as` paths that are new, overwrite the local field or are dotted,
/// and with later stages that read only some fields.
#[tokio::test]
async fn absorbed_unwind_outputs_what_the_two_stages_output() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("lookup_unwind");
    load(&db).await;
    let mut checked = 0;
    for keys in [None, Some(doc! {"k": 1})] {
        set_index(&db, keys).await;
        for as_ in ["m", "v", "m.x"] {
            let lookups = [
                doc! {"$lookup": {"from": "f", "localField": "v", "foreignField": "k", "as": as_}},
                doc! {"$lookup": {"from": "f", "localField": "v", "foreignField": "k", "pipeline": [{"$match": {"x": {"$lt": 3}}}], "as": as_}},
                doc! {"$lookup": {"from": "f", "let": {"v": "$v"}, "pipeline": [{"$match": {"$expr": {"$eq": ["$k", "$$v"]}}}], "as": as_}},
                doc! {"$lookup": {"from": "f", "pipeline": [{"$match": {"x": 1}}, {"$sort": {"_id": -1}}, {"$limit": 3}], "as": as_}},
                doc! {"$lookup": {"from": "missing", "localField": "v", "foreignField": "k", "as": as_}},
            ];
            let path = format!("${as_}");
            let unwinds = [
                doc! {"$unwind": path.clone()},
                doc! {"$unwind": {"path": path.clone(), "preserveNullAndEmptyArrays": true}},
                doc! {"$unwind": {"path": path.clone(), "includeArrayIndex": "i"}},
                doc! {"$unwind": {"path": path.clone(), "includeArrayIndex": "n.i", "preserveNullAndEmptyArrays": true}},
            ];
            let tails = [
                vec![],
                vec![
                    doc! {"$group": {"_id": format!("{path}._id"), "n": {"$sum": 1}, "x": {"$sum": format!("{path}.x")}}},
                ],
                vec![doc! {"$project": {"_id": 1, "i": 1, as_: 1}}],
            ];
            for lookup in &lookups {
                for unwind in &unwinds {
                    for tail in &tails {
                        let mut fused =
                            vec![doc! {"$sort": {"_id": 1}}, lookup.clone(), unwind.clone()];
                        fused.extend(tail.clone());
                        let mut apart = vec![
                            doc! {"$sort": {"_id": 1}},
                            lookup.clone(),
                            doc! {"$match": {}},
                            unwind.clone(),
                        ];
                        apart.extend(tail.clone());
                        let got = run(&db, fused.clone()).await;
                        let want = run(&db, apart).await;
                        assert_docs(&got, &want);
                        checked += usize::from(!want.is_empty());
                    }
                }
            }
        }
    }
    assert!(checked > 300, "{checked}");
}

/// Explain shows the absorbed `$unwind` as MongoDB 7.0 does: no `$unwind` stage, and the
/// `$lookup` as `{from, as, localField, foreignField, unwinding: {…}}`.
#[tokio::test]
async fn explain_shows_the_absorbed_unwind() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("lookup_explain");
    load(&db).await;
    for (unwind, want) in [
        (
            doc! {"$unwind": "$m"},
            doc! {"from": "f", "as": "m", "localField": "v", "foreignField": "k", "unwinding": {"preserveNullAndEmptyArrays": false}},
        ),
        (
            doc! {"$unwind": {"path": "$m", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}},
            doc! {"from": "f", "as": "m", "localField": "v", "foreignField": "k", "unwinding": {"preserveNullAndEmptyArrays": true, "includeArrayIndex": "i"}},
        ),
    ] {
        for verbosity in ["queryPlanner", "executionStats"] {
            let r = db
                .run_command(doc! {"explain": {"aggregate": "l", "pipeline": [
                    {"$lookup": {"foreignField": "k", "as": "m", "from": "f", "localField": "v"}},
                    unwind.clone(),
                ], "cursor": {}}, "verbosity": verbosity})
                .await
                .unwrap();
            let stages = r.get_array("stages").unwrap();
            let names: Vec<String> = stages
                .iter()
                .map(|s| s.as_document().unwrap().keys().next().unwrap().clone())
                .collect();
            assert_eq!(names, ["$cursor", "$lookup"], "{r}");
            let lookup = stages[1].as_document().unwrap();
            assert_eq!(lookup.get_document("$lookup").unwrap(), &want);
            if verbosity == "executionStats" {
                assert!(lookup.get_i64("nReturned").unwrap() > 100, "{lookup}");
            }
        }
    }
    // A $lookup without an $unwind of its `as` keeps both stages.
    let r = db
        .run_command(doc! {"explain": {"aggregate": "l", "pipeline": [
            {"$lookup": {"from": "f", "localField": "v", "foreignField": "k", "as": "m"}},
            {"$unwind": "$v"},
        ], "cursor": {}}})
        .await
        .unwrap();
    let names: Vec<String> = r
        .get_array("stages")
        .unwrap()
        .iter()
        .map(|s| s.as_document().unwrap().keys().next().unwrap().clone())
        .collect();
    assert_eq!(names, ["$cursor", "$lookup", "$unwind"], "{r}");
}
