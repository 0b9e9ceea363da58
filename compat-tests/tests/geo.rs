//! Geospatial query operators through the Rust driver: `$geoWithin` (`$geometry`, `$box`,
//! `$polygon`, `$center`, `$centerSphere`), `$geoIntersects` (points, lines, polygons, a
//! strict-winding big polygon) in find, count, delete, update and `$match`, without an index,
//! and their BadValue errors.

use bson::{Bson, Document, doc};
use cairn_compat_tests::{TestServer, code_of, collect};
use mongodb::{Collection, Database};

fn places() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "name": "Central Park", "loc": {"type": "Point", "coordinates": [-73.97, 40.77]}},
        doc! {"_id": 2, "name": "La Guardia Airport", "loc": {"type": "Point", "coordinates": [-73.88, 40.78]}},
        doc! {"_id": 3, "name": "Sara D. Roosevelt Park", "loc": [-73.9928, 40.7193]},
        doc! {"_id": 4, "name": "Broadway stretch", "loc": {"type": "LineString", "coordinates": [[-73.99, 40.75], [-73.98, 40.76]]}},
        doc! {"_id": 5, "name": "Block", "loc": {"type": "Polygon", "coordinates": [[[-74.0, 40.7], [-73.9, 40.7], [-73.9, 40.8], [-74.0, 40.8], [-74.0, 40.7]]]}},
        doc! {"_id": 6, "name": "off the globe", "loc": [200, 100]},
        doc! {"_id": 7, "name": "not a place", "loc": "nowhere"},
        doc! {"_id": 8, "name": "no location"},
        doc! {"_id": 9, "name": "two pairs", "loc": [[1, 1], [50, 50]]},
    ]
}

async fn setup(db: &Database) -> Collection<Document> {
    let c = db.collection::<Document>("places");
    c.insert_many(places()).await.unwrap();
    c
}

async fn ids(c: &Collection<Document>, filter: Document) -> Vec<i32> {
    collect(c.find(filter).sort(doc! {"_id": 1}).await.unwrap())
        .await
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect()
}

fn polygon(ring: &[(f64, f64)]) -> Document {
    let coords: Vec<Bson> = ring
        .iter()
        .map(|(x, y)| Bson::Array(vec![Bson::Double(*x), Bson::Double(*y)]))
        .collect();
    doc! {"type": "Polygon", "coordinates": [coords]}
}

#[tokio::test]
async fn geo_within_shapes() {
    let s = TestServer::start();
    let db = s.client().await.database("geowithin");
    let c = setup(&db).await;
    let west = polygon(&[
        (-74.0, 40.7),
        (-73.95, 40.7),
        (-73.95, 40.8),
        (-74.0, 40.8),
        (-74.0, 40.7),
    ]);
    let cases: Vec<(Document, Vec<i32>)> = vec![
        (
            doc! {"loc": {"$geoWithin": {"$geometry": west.clone()}}},
            vec![1, 3, 4],
        ),
        (
            doc! {"loc": {"$within": {"$geometry": west}}},
            vec![1, 3, 4],
        ),
        (
            doc! {"loc": {"$geoWithin": {"$box": [[-74, 40.7], [-73.9, 40.8]]}}},
            vec![1, 3],
        ),
        (
            doc! {"loc": {"$geoWithin": {"$box": [[0, 0], [300, 300]]}}},
            vec![6, 9],
        ),
        (
            doc! {"loc": {"$geoWithin": {"$center": [[0, 0], 2]}}},
            vec![9],
        ),
        (
            doc! {"loc": {"$geoWithin": {"$polygon": [[0, 0], [300, 0], [300, 200]]}}},
            vec![6],
        ),
        // The manual's example: 5 miles around a point, radius in radians.
        (
            doc! {"loc": {"$geoWithin": {"$centerSphere": [[-73.97, 40.77], 5.0 / 3963.2]}}},
            vec![1, 2, 3, 4],
        ),
        // With another predicate on the same path and on another field.
        (
            doc! {"loc": {"$geoWithin": {"$box": [[-74, 40.7], [-73.9, 40.8]]}, "$type": "array"}},
            vec![3],
        ),
        (
            doc! {"loc": {"$geoWithin": {"$box": [[-74, 40.7], [-73.9, 40.8]]}}, "name": {"$regex": "^C"}},
            vec![1],
        ),
        (
            doc! {"loc": {"$not": {"$geoWithin": {"$box": [[-74, 40.7], [-73.9, 40.8]]}}}},
            vec![2, 4, 5, 6, 7, 8, 9],
        ),
    ];
    for (filter, want) in cases {
        assert_eq!(ids(&c, filter.clone()).await, want, "{filter}");
    }
    let n = c
        .count_documents(doc! {"loc": {"$geoWithin": {"$box": [[0, 0], [300, 300]]}}})
        .await
        .unwrap();
    assert_eq!(n, 2);
}

#[tokio::test]
async fn geo_intersects_shapes() {
    let s = TestServer::start();
    let db = s.client().await.database("geointersects");
    let c = setup(&db).await;
    let east = polygon(&[
        (-73.95, 40.75),
        (-73.85, 40.75),
        (-73.85, 40.79),
        (-73.95, 40.79),
        (-73.95, 40.75),
    ]);
    let strict =
        doc! {"type": "name", "properties": {"name": "urn:x-mongodb:crs:strictwinding:EPSG:4326"}};
    let cases: Vec<(Document, Vec<i32>)> = vec![
        (
            doc! {"loc": {"$geoIntersects": {"$geometry": east}}},
            vec![2, 5],
        ),
        (
            doc! {"loc": {"$geoIntersects": {"$geometry": {"type": "LineString", "coordinates": [[-73.985, 40.74], [-73.985, 40.77]]}}}},
            vec![4, 5],
        ),
        (
            doc! {"loc": {"$geoIntersects": {"$geometry": {"type": "Point", "coordinates": [-73.97, 40.77]}}}},
            vec![1, 5],
        ),
        (
            doc! {"loc": {"$geoIntersects": {"$geometry": {"type": "MultiPoint", "coordinates": [[-73.88, 40.78], [1, 1]]}}}},
            vec![2, 9],
        ),
        // The manual's big polygon: everything between longitudes -100 and 100, both poles.
        (
            doc! {"loc": {"$geoIntersects": {"$geometry": {"type": "Polygon", "coordinates": [[[-100, 60], [-100, 0], [-100, -60], [100, -60], [100, 60], [-100, 60]]], "crs": strict}}}},
            vec![1, 2, 3, 4, 5, 9],
        ),
    ];
    for (filter, want) in cases {
        assert_eq!(ids(&c, filter.clone()).await, want, "{filter}");
    }
    // $match in a pipeline.
    let out = collect(
        c.aggregate(vec![
            doc! {"$match": {"loc": {"$geoIntersects": {"$geometry": {"type": "Point", "coordinates": [-73.97, 40.77]}}}}},
            doc! {"$project": {"name": 1}},
            doc! {"$sort": {"_id": 1}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "name": "Central Park"},
            doc! {"_id": 5, "name": "Block"}
        ]
    );
}

#[tokio::test]
async fn geo_writes() {
    let s = TestServer::start();
    let db = s.client().await.database("geowrites");
    let c = setup(&db).await;
    let r = c
        .update_many(
            doc! {"loc": {"$geoWithin": {"$centerSphere": [[-73.97, 40.77], 5.0 / 3963.2]}}},
            doc! {"$set": {"near": true}},
        )
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (4, 4));
    assert_eq!(ids(&c, doc! {"near": true}).await, vec![1, 2, 3, 4]);
    let d = c
        .delete_many(doc! {"loc": {"$geoWithin": {"$box": [[0, 0], [300, 300]]}}})
        .await
        .unwrap();
    assert_eq!(d.deleted_count, 2);
    assert_eq!(ids(&c, doc! {}).await, vec![1, 2, 3, 4, 5, 7, 8]);
}

#[tokio::test]
async fn geo_operand_errors() {
    let s = TestServer::start();
    let db = s.client().await.database("geoerrors");
    let c = setup(&db).await;
    for (filter, code, msg) in [
        (
            doc! {"loc": {"$geoWithin": 1}},
            2,
            "geometry must be an object",
        ),
        (
            doc! {"loc": {"$geoWithin": {}}},
            2,
            "geo query doesn't have any geometry",
        ),
        (
            doc! {"loc": {"$geoWithin": {"$circle": [[0, 0], 1]}}},
            2,
            "unknown geo specifier: $circle: [ [ 0, 0 ], 1 ]",
        ),
        (
            doc! {"loc": {"$geoWithin": {"$center": [[0, 0], -1]}}},
            2,
            "radius must be a non-negative number",
        ),
        (
            doc! {"loc": {"$geoWithin": {"$geometry": {"type": "Point", "coordinates": [0, 0]}}}},
            2,
            "$within not supported with provided geometry: { $geoWithin: { $geometry: { type: \"Point\", coordinates: [ 0, 0 ] } } }",
        ),
        (
            doc! {"loc": {"$geoIntersects": {"$box": [[0, 0], [1, 1]]}}},
            2,
            "$geoIntersect not supported with provided geometry: { $geoIntersects: { $box: [ [ 0, 0 ], [ 1, 1 ] ] } }",
        ),
        (
            doc! {"loc": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]]}}}},
            2,
            "Loop is not closed: [ [ 0, 0 ], [ 1, 0 ], [ 1, 1 ], [ 0, 1 ] ]",
        ),
        (
            doc! {"loc": {"$geoIntersects": {"$geometry": {"type": "Point", "coordinates": [0, 100]}}}},
            2,
            "longitude/latitude is out of bounds, lng: 0 lat: 100",
        ),
    ] {
        let e = c.find(filter.clone()).await.map(|_| ()).unwrap_err();
        assert_eq!(code_of(&e), code, "{filter}");
        assert!(e.to_string().contains(msg), "{filter}: {e}");
    }
}

#[tokio::test]
async fn geo_indexes() {
    let s = TestServer::start();
    let db = s.client().await.database("geoindexes");
    let c = setup(&db).await;
    // Documents 6 (off the globe), 7 (a string) and 9 (an array of pairs) are not geometries:
    // a 2dsphere index over them is refused.
    let e = db
        .run_command(doc! {"createIndexes": "places", "indexes": [{"key": {"loc": "2dsphere"}, "name": "loc_2dsphere"}]})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 16755, "{e}");
    c.delete_many(doc! {"_id": {"$in": [6, 7, 9]}})
        .await
        .unwrap();
    db.run_command(doc! {"createIndexes": "places", "indexes": [
        {"key": {"loc": "2dsphere", "name": 1}, "name": "loc_2dsphere_name_1"},
    ]})
    .await
    .unwrap();
    let specs = collect_specs(&db, "places").await;
    assert_eq!(
        specs[1],
        doc! {"v": 2, "key": {"loc": "2dsphere", "name": 1}, "name": "loc_2dsphere_name_1", "2dsphereIndexVersion": 3}
    );
    // Writes keep the index: invalid geometry is refused with MongoDB's code and message shape.
    let e = c
        .insert_one(doc! {"_id": 20, "loc": {"type": "Point", "coordinates": [0, 100]}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 16755);
    assert!(
        write_message(&e).contains("Can't extract geo keys: { _id: 20, loc: { type: \"Point\", coordinates: [ 0, 100 ] } }  longitude/latitude is out of bounds, lng: 0 lat: 100"),
        "{e}"
    );
    let e = c
        .update_one(doc! {"_id": 1}, doc! {"$set": {"loc": [1, 2, 3, "x"]}})
        .await
        .map(|_| ());
    assert!(
        e.is_ok(),
        "a legacy pair with extra values is a point: {e:?}"
    );
    let e = c
        .update_one(doc! {"_id": 1}, doc! {"$set": {"loc": {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 16755);
    // Documents without the field are not indexed (and still inserted).
    c.insert_one(doc! {"_id": 21, "name": "nowhere yet"})
        .await
        .unwrap();
    c.insert_one(doc! {"_id": 22, "loc": null}).await.unwrap();
    // Queries see the same documents with the geo index present.
    assert_eq!(
        ids(&c, doc! {"name": {"$gte": "B"}}).await,
        vec![1, 2, 3, 4, 5, 8, 21]
    );
    assert_eq!(ids(&c, doc! {"loc": {"$exists": false}}).await, vec![8, 21]);
    assert_eq!(
        ids(
            &c,
            doc! {"loc": {"$geoWithin": {"$box": [[-74, 40.7], [-73.9, 40.8]]}}}
        )
        .await,
        vec![3]
    );

    // 2d: legacy pairs within [min, max).
    let t = db.collection::<Document>("flat");
    t.insert_many(vec![
        doc! {"_id": 1, "p": [10, 10]},
        doc! {"_id": 2, "p": {"x": -5, "y": 5}},
        doc! {"_id": 3},
    ])
    .await
    .unwrap();
    db.run_command(doc! {"createIndexes": "flat", "indexes": [{"key": {"p": "2d"}, "name": "p_2d", "bits": 20, "min": -50, "max": 50}]})
        .await
        .unwrap();
    let specs = collect_specs(&db, "flat").await;
    assert_eq!(
        specs[1],
        doc! {"v": 2, "key": {"p": "2d"}, "name": "p_2d", "bits": 20, "min": -50.0, "max": 50.0}
    );
    let e = t
        .insert_one(doc! {"_id": 4, "p": [60, 0]})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 13027, "{e}");
    let e = t
        .insert_one(doc! {"_id": 4, "p": [1, "a"]})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 13026, "{e}");
    let e = t
        .insert_one(doc! {"_id": 4, "p": ["a", 0]})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 16804, "{e}");
    let e = t
        .insert_one(doc! {"_id": 4, "p": [1, "a"]})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 13026, "{e}");
    for (spec, code) in [
        (doc! {"key": {"a": 1, "p": "2d"}, "name": "x"}, 16801),
        (doc! {"key": {"p": "2d"}, "name": "x", "bits": 33}, 13028),
        (doc! {"key": {"p": "2d", "q": "2dsphere"}, "name": "x"}, 67),
        (
            doc! {"key": {"p": "2dsphere"}, "name": "x", "2dsphereIndexVersion": 4},
            67,
        ),
    ] {
        let e = db
            .run_command(doc! {"createIndexes": "flat", "indexes": [spec.clone()]})
            .await
            .unwrap_err();
        assert_eq!(code_of(&e), code, "{spec}: {e}");
    }
}

async fn collect_specs(db: &Database, coll: &str) -> Vec<Document> {
    let r = db.run_command(doc! {"listIndexes": coll}).await.unwrap();
    r.get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|b| b.as_document().unwrap().clone())
        .collect()
}

fn write_message(e: &mongodb::error::Error) -> String {
    match &*e.kind {
        mongodb::error::ErrorKind::Write(mongodb::error::WriteFailure::WriteError(w)) => {
            w.message.clone()
        }
        other => format!("{other:?}"),
    }
}

/// The manual's `places` collection for `$geoNear`.
async fn manual_places(db: &Database) -> Collection<Document> {
    let c = db.collection::<Document>("places");
    c.insert_many(vec![
        doc! {"_id": 1, "name": "Central Park", "location": {"type": "Point", "coordinates": [-73.97, 40.77]}, "category": "Parks"},
        doc! {"_id": 2, "name": "Sara D. Roosevelt Park", "location": {"type": "Point", "coordinates": [-73.9928, 40.7193]}, "category": "Parks"},
        doc! {"_id": 3, "name": "Polo Grounds", "location": {"type": "Point", "coordinates": [-73.9375, 40.8303]}, "category": "Stadiums"},
    ])
    .await
    .unwrap();
    c
}

async fn agg_err(c: &Collection<Document>, pipeline: Vec<Document>) -> (i32, String) {
    let e = c.aggregate(pipeline).await.map(|_| ()).unwrap_err();
    (code_of(&e), e.to_string())
}

#[tokio::test]
async fn geo_near_stage() {
    let s = TestServer::start();
    let db = s.client().await.database("geonear");
    let c = manual_places(&db).await;
    // Without a geo index: IndexNotFound.
    let (code, msg) = agg_err(
        &c,
        vec![doc! {"$geoNear": {"near": {"type": "Point", "coordinates": [-73.99279, 40.719296]}, "distanceField": "d"}}],
    )
    .await;
    assert_eq!(code, 27, "{msg}");
    assert!(
        msg.contains("$geoNear requires a 2d or 2dsphere index, but none were found"),
        "{msg}"
    );
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"location": "2dsphere"})
            .build(),
    )
    .await
    .unwrap();
    // The manual's maximum-distance example, exact.
    let out = collect(
        c.aggregate(vec![doc! {"$geoNear": {
            "near": {"type": "Point", "coordinates": [-73.99279, 40.719296]},
            "distanceField": "dist.calculated",
            "maxDistance": 2,
            "query": {"category": "Parks"},
            "includeLocs": "dist.location",
            "spherical": true,
        }}])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 2, "name": "Sara D. Roosevelt Park", "location": {"type": "Point", "coordinates": [-73.9928, 40.7193]}, "category": "Parks",
            "dist": {"calculated": 0.9539931676365992, "location": {"type": "Point", "coordinates": [-73.9928, 40.7193]}}}
        ]
    );
    // Minimum distance: the other park.
    let out = collect(
        c.aggregate(vec![
            doc! {"$geoNear": {"near": {"type": "Point", "coordinates": [-73.99279, 40.719296]}, "distanceField": "d", "minDistance": 2, "query": {"category": "Parks"}, "spherical": true}},
            doc! {"$project": {"name": 1}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(out, vec![doc! {"_id": 1, "name": "Central Park"}]);
    // Distances from Sara D. Roosevelt Park (the manual's $lookup example), nearest first.
    let out = collect(
        c.aggregate(vec![
            doc! {"$geoNear": {"near": {"type": "Point", "coordinates": [-73.9928, 40.7193]}, "distanceField": "distance"}},
            doc! {"$project": {"distance": 1}},
        ])
        .await
        .unwrap(),
    )
    .await;
    // (The manual prints 5962.448255234964 for Central Park: ours differs in the 14th digit,
    // the order of floating-point operations in the angle.)
    assert_eq!(out.len(), 3);
    assert_eq!(out[0], doc! {"_id": 2, "distance": 0.0});
    assert_eq!(out[1].get_i32("_id").unwrap(), 1);
    assert!((out[1].get_f64("distance").unwrap() - 5962.448255234964).abs() < 1e-6);
    assert_eq!(out[2], doc! {"_id": 3, "distance": 13206.535424939102});
    // A legacy pair with spherical: radians (the manual's `let` example).
    let out = collect(
        c.aggregate(vec![
            doc! {"$geoNear": {"near": [-73.99279, 40.719296], "distanceField": "distance", "maxDistance": 2, "query": {"category": "Parks"}, "spherical": true}},
            doc! {"$project": {"distance": 1}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(out.len(), 2);
    assert_eq!(out[0], doc! {"_id": 2, "distance": 1.4957325341976439e-7});
    assert_eq!(out[1].get_i32("_id").unwrap(), 1);
    assert!((out[1].get_f64("distance").unwrap() - 0.0009348548688841822).abs() < 1e-15);
    // The `key` example and distanceMultiplier (meters to kilometers).
    let out = collect(
        c.aggregate(vec![
            doc! {"$geoNear": {"near": {"type": "Point", "coordinates": [-73.98142, 40.71782]}, "key": "location", "distanceField": "dist.calculated", "query": {"category": "Parks"}}},
            doc! {"$limit": 5},
            doc! {"$project": {"dist": 1}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        out[0],
        doc! {"_id": 2, "dist": {"calculated": 974.175764916902}}
    );
    assert_eq!(out.len(), 2);
    // Errors.
    for (pipeline, code) in [
        (
            vec![
                doc! {"$match": {}},
                doc! {"$geoNear": {"near": [0, 0], "distanceField": "d", "spherical": true}},
            ],
            40603,
        ),
        (vec![doc! {"$geoNear": {"near": [0, 0]}}], 16606),
        (
            vec![doc! {"$geoNear": {"near": [0, 0], "distanceField": "d", "includeLocs": 1}}],
            16607,
        ),
        (
            vec![doc! {"$geoNear": {"near": [0, 0], "distanceField": "d", "key": 1}}],
            51080,
        ),
        (
            vec![doc! {"$geoNear": {"near": [0, 0], "distanceField": "d", "key": ""}}],
            51081,
        ),
        (
            vec![
                doc! {"$geoNear": {"near": [0, 0], "distanceField": "d", "collation": {"locale": "simple"}}},
            ],
            40227,
        ),
        // A flat legacy point needs a 2d index.
        (
            vec![doc! {"$geoNear": {"near": [0, 0], "distanceField": "d"}}],
            291,
        ),
    ] {
        let (got, msg) = agg_err(&c, pipeline.clone()).await;
        assert_eq!(got, code, "{pipeline:?}: {msg}");
    }
    // Two 2dsphere indexes: `key` is required.
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"other": "2dsphere"})
            .build(),
    )
    .await
    .unwrap();
    let (code, msg) = agg_err(
        &c,
        vec![doc! {"$geoNear": {"near": {"type": "Point", "coordinates": [0, 0]}, "distanceField": "d"}}],
    )
    .await;
    assert_eq!(code, 27, "{msg}");
    assert!(msg.contains("There is more than one 2dsphere index on geonear.places; unsure which to use for $geoNear"), "{msg}");
}

#[tokio::test]
async fn geo_near_2d() {
    let s = TestServer::start();
    let db = s.client().await.database("geonear2d");
    let c = db.collection::<Document>("pts");
    c.insert_many(vec![
        doc! {"_id": 1, "p": [3, 4]},
        doc! {"_id": 2, "p": [1, 0]},
        doc! {"_id": 3, "p": [[10, 0], [0, 2]]},
        doc! {"_id": 4},
    ])
    .await
    .unwrap();
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"p": "2d"})
            .build(),
    )
    .await
    .unwrap();
    let out = collect(
        c.aggregate(vec![
            doc! {"$geoNear": {"near": [0, 0], "distanceField": "d", "includeLocs": "at"}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 2, "p": [1, 0], "d": 1.0, "at": [1, 0]},
            doc! {"_id": 3, "p": [[10, 0], [0, 2]], "d": 2.0, "at": [0, 2]},
            doc! {"_id": 1, "p": [3, 4], "d": 5.0, "at": [3, 4]},
        ]
    );
    let out = collect(
        c.aggregate(vec![
            doc! {"$geoNear": {"near": [0, 0], "distanceField": "d", "maxDistance": 2, "distanceMultiplier": 10}},
            doc! {"$project": {"d": 1}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        out,
        vec![doc! {"_id": 2, "d": 10.0}, doc! {"_id": 3, "d": 20.0}]
    );
}

#[tokio::test]
async fn near_queries() {
    let s = TestServer::start();
    let db = s.client().await.database("nearq");
    let c = manual_places(&db).await;
    let sara = doc! {"type": "Point", "coordinates": [-73.99279, 40.719296]};
    // Without a geo index MongoDB's planner finds no plan.
    let e = c
        .find(doc! {"location": {"$near": {"$geometry": sara.clone()}}})
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(code_of(&e), 291, "{e}");
    assert!(
        e.to_string()
            .contains("unable to find index for $geoNear query"),
        "{e}"
    );
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"location": "2dsphere"})
            .build(),
    )
    .await
    .unwrap();
    // Nearest first.
    assert_eq!(
        ids_in_order(
            &c,
            doc! {"location": {"$near": {"$geometry": sara.clone()}}}
        )
        .await,
        vec![2, 1, 3]
    );
    // The manual's $near example: between 1000 and 5000 meters.
    assert_eq!(
        ids_in_order(&c, doc! {"location": {"$near": {"$geometry": {"type": "Point", "coordinates": [-73.9667, 40.78]}, "$minDistance": 1000, "$maxDistance": 5000}}}).await,
        vec![1]
    );
    // $nearSphere with a legacy pair: radians.
    assert_eq!(
        ids_in_order(
            &c,
            doc! {"location": {"$nearSphere": [-73.9667, 40.78], "$maxDistance": 0.001}}
        )
        .await,
        vec![1, 3]
    );
    // With other predicates, skip and limit.
    let out = collect(
        c.find(doc! {"location": {"$near": {"$geometry": sara.clone()}}, "category": "Parks"})
            .skip(1)
            .limit(1)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        out.iter()
            .map(|d| d.get_i32("_id").unwrap())
            .collect::<Vec<_>>(),
        vec![1]
    );
    // A flat legacy $near needs a 2d index.
    let e = c
        .find(doc! {"location": {"$near": [-73.9667, 40.78]}})
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(code_of(&e), 291);
    // Placement rules.
    for (filter, msg) in [
        (
            doc! {"$or": [{"location": {"$near": {"$geometry": sara.clone()}}}, {"_id": 1}]},
            "geoNear must be top-level expr",
        ),
        (
            doc! {"location": {"$near": {"$geometry": sara.clone()}}, "other": {"$near": {"$geometry": sara.clone()}}},
            "Too many geoNear expressions",
        ),
        (
            doc! {"location": {"$near": {"$geometry": sara.clone(), "$maxDistance": -1}}},
            "$maxDistance must be non-negative",
        ),
    ] {
        let e = c.find(filter.clone()).await.map(|_| ()).unwrap_err();
        assert_eq!(code_of(&e), 2, "{filter}");
        assert!(e.to_string().contains(msg), "{filter}: {e}");
    }

    // 2d: planar distances.
    let t = db.collection::<Document>("flat");
    t.insert_many(vec![
        doc! {"_id": 1, "p": [3, 4]},
        doc! {"_id": 2, "p": [1, 0]},
        doc! {"_id": 3, "p": [[10, 0], [0, 2]]},
        doc! {"_id": 4},
    ])
    .await
    .unwrap();
    t.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"p": "2d"})
            .build(),
    )
    .await
    .unwrap();
    assert_eq!(
        ids_in_order(&t, doc! {"p": {"$near": [0, 0]}}).await,
        vec![2, 3, 1]
    );
    assert_eq!(
        ids_in_order(&t, doc! {"p": {"$near": [0, 0], "$maxDistance": 2}}).await,
        vec![2, 3]
    );
    assert_eq!(
        ids_in_order(&t, doc! {"p": {"$near": [0, 0, 1.5]}}).await,
        vec![2]
    );
    assert_eq!(
        t.count_documents(doc! {"p": {"$geoWithin": {"$center": [[0, 0], 2]}}})
            .await
            .unwrap(),
        2
    );
}

async fn ids_in_order(c: &Collection<Document>, filter: Document) -> Vec<i32> {
    collect(c.find(filter).await.unwrap())
        .await
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect()
}

#[tokio::test]
async fn near_in_pipelines_is_refused() {
    let s = TestServer::start();
    let db = s.client().await.database("nearmatch");
    let c = manual_places(&db).await;
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"location": "2dsphere"})
            .build(),
    )
    .await
    .unwrap();
    let near =
        doc! {"location": {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}}}};
    for pipeline in [
        vec![doc! {"$match": near.clone()}],
        vec![
            doc! {"$geoNear": {"near": [0, 0], "distanceField": "d", "spherical": true, "query": near.clone()}},
        ],
    ] {
        let (code, msg) = agg_err(&c, pipeline).await;
        assert_eq!(code, 5626500, "{msg}");
        assert!(
            msg.contains("$geoNear, $near, and $nearSphere are not allowed in this context"),
            "{msg}"
        );
    }
}
