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
