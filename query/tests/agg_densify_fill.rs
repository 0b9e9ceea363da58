//! `$densify` and `$fill`: the manual's examples, bounds of every kind, partitions, and
//! MongoDB's errors.

mod agg_common;

use agg_common::{Db, assert_same, code};
use bson::{Bson, DateTime, Document, doc};

fn date(s: &str) -> DateTime {
    DateTime::parse_rfc3339_str(s).unwrap()
}

fn hour(h: u32) -> DateTime {
    date(&format!("2021-05-18T{h:02}:00:00Z"))
}

#[test]
fn manual_time_series_with_explicit_bounds() {
    let db = Db::new();
    let meta = doc! {"sensorId": 5578, "type": "temperature"};
    db.insert(
        "weather",
        &[
            doc! {"_id": 1, "metadata": meta.clone(), "timestamp": hour(0), "temp": 12},
            doc! {"_id": 2, "metadata": meta.clone(), "timestamp": hour(4), "temp": 11},
            doc! {"_id": 3, "metadata": meta.clone(), "timestamp": hour(8), "temp": 11},
            doc! {"_id": 4, "metadata": meta.clone(), "timestamp": hour(12), "temp": 12},
        ],
    );
    let got = db
        .run(
            "weather",
            &[
                doc! {"$densify": {"field": "timestamp", "range": {"step": 1, "unit": "hour",
                "bounds": [hour(0), hour(8)]}}},
            ],
        )
        .unwrap();
    let g = |h| doc! {"timestamp": hour(h)};
    assert_same(
        &got,
        &[
            doc! {"_id": 1, "metadata": meta.clone(), "timestamp": hour(0), "temp": 12},
            g(1),
            g(2),
            g(3),
            doc! {"_id": 2, "metadata": meta.clone(), "timestamp": hour(4), "temp": 11},
            g(5),
            g(6),
            g(7),
            doc! {"_id": 3, "metadata": meta.clone(), "timestamp": hour(8), "temp": 11},
            doc! {"_id": 4, "metadata": meta.clone(), "timestamp": hour(12), "temp": 12},
        ],
    );
}

fn coffee() -> Db {
    let db = Db::new();
    db.insert(
        "coffee",
        &[
            doc! {"_id": 1, "altitude": 600, "variety": "Arabica Typica", "score": 68.3},
            doc! {"_id": 2, "altitude": 750, "variety": "Arabica Typica", "score": 69.5},
            doc! {"_id": 3, "altitude": 950, "variety": "Arabica Typica", "score": 70.5},
            doc! {"_id": 4, "altitude": 1250, "variety": "Gesha", "score": 88.15},
            doc! {"_id": 5, "altitude": 1700, "variety": "Gesha", "score": 95.5, "price": 1029},
        ],
    );
    db
}

fn a(alt: i32) -> Document {
    doc! {"variety": "Arabica Typica", "altitude": alt}
}

fn g(alt: i32) -> Document {
    doc! {"variety": "Gesha", "altitude": alt}
}

fn coffee_doc(id: i32) -> Document {
    match id {
        1 => doc! {"_id": 1, "altitude": 600, "variety": "Arabica Typica", "score": 68.3},
        2 => doc! {"_id": 2, "altitude": 750, "variety": "Arabica Typica", "score": 69.5},
        3 => doc! {"_id": 3, "altitude": 950, "variety": "Arabica Typica", "score": 70.5},
        4 => doc! {"_id": 4, "altitude": 1250, "variety": "Gesha", "score": 88.15},
        _ => doc! {"_id": 5, "altitude": 1700, "variety": "Gesha", "score": 95.5, "price": 1029},
    }
}

#[test]
fn manual_partitions_full_and_partition_bounds() {
    let db = coffee();
    let got = db
        .run(
            "coffee",
            &[
                doc! {"$densify": {"field": "altitude", "partitionByFields": ["variety"],
                "range": {"bounds": "full", "step": 200}}},
            ],
        )
        .unwrap();
    assert_same(
        &got,
        &[
            coffee_doc(1),
            coffee_doc(2),
            a(800),
            coffee_doc(3),
            g(600),
            g(800),
            g(1000),
            g(1200),
            coffee_doc(4),
            g(1400),
            g(1600),
            coffee_doc(5),
            a(1000),
            a(1200),
            a(1400),
            a(1600),
        ],
    );
    let got = db
        .run(
            "coffee",
            &[
                doc! {"$densify": {"field": "altitude", "partitionByFields": ["variety"],
                "range": {"bounds": "partition", "step": 200}}},
            ],
        )
        .unwrap();
    assert_same(
        &got,
        &[
            coffee_doc(1),
            coffee_doc(2),
            a(800),
            coffee_doc(3),
            coffee_doc(4),
            g(1450),
            g(1650),
            coffee_doc(5),
        ],
    );
}

#[test]
fn numeric_grids_and_edges() {
    let db = Db::new();
    db.insert(
        "n",
        &[
            doc! {"_id": 1, "v": 1},
            doc! {"_id": 2, "v": 4},
            doc! {"_id": 3, "v": 5},
            doc! {"_id": 4},
            doc! {"_id": 5, "v": Bson::Null},
            doc! {"_id": 6, "v": 9},
        ],
    );
    let vals = |stage: Document| -> Vec<Bson> {
        db.run("n", &[stage])
            .unwrap()
            .iter()
            .map(|d| {
                d.get("v")
                    .cloned()
                    .unwrap_or(Bson::String("missing".into()))
            })
            .collect()
    };
    let i = Bson::Int32;
    let missing = || Bson::String("missing".into());
    // Full: 1, 3 (generated), 4, 5, 7 (generated), 9 — on the grid of the smallest value.
    assert_eq!(
        vals(doc! {"$densify": {"field": "v", "range": {"step": 2, "bounds": "full"}}}),
        vec![missing(), Bson::Null, i(1), i(3), i(4), i(5), i(7), i(9)]
    );
    // Explicit bounds, beyond the data at both ends: upper bound exclusive.
    assert_eq!(
        vals(doc! {"$densify": {"field": "v", "range": {"step": 3, "bounds": [-2, 14]}}}),
        vec![
            missing(),
            Bson::Null,
            i(-2),
            i(1),
            i(4),
            i(5),
            i(7),
            i(9),
            i(10),
            i(13)
        ]
    );
    // The grid starts at the bound as given, then takes $add's types.
    assert_eq!(
        vals(doc! {"$densify": {"field": "v", "range": {"step": 1.5, "bounds": [0, 3]}}}),
        vec![
            missing(),
            Bson::Null,
            i(0),
            i(1),
            Bson::Double(1.5),
            i(4),
            i(5),
            i(9)
        ]
    );
    // No documents at all: explicit bounds still generate.
    let empty = Db::new();
    let got = empty
        .run(
            "none",
            &[doc! {"$densify": {"field": "x.y", "range": {"step": 1, "bounds": [0, 3]}}}],
        )
        .unwrap();
    assert_same(
        &got,
        &[
            doc! {"x": {"y": 0}},
            doc! {"x": {"y": 1}},
            doc! {"x": {"y": 2}},
        ],
    );
    // The generated-documents limit.
    let mut small = Db::new();
    small.options.densify_max_docs = 10;
    assert!(
        small
            .run(
                "x",
                &[doc! {"$densify": {"field": "v", "range": {"step": 1, "bounds": [0, 10]}}}]
            )
            .is_ok()
    );
    let e = small
        .run(
            "x",
            &[doc! {"$densify": {"field": "v", "range": {"step": 1, "bounds": [0, 11]}}}],
        )
        .unwrap_err();
    assert_eq!(code(&e), 5897900);
}

#[test]
fn densify_errors() {
    let db = Db::new();
    db.insert("e", &[doc! {"_id": 1, "v": 1}, doc! {"_id": 2, "v": "x"}]);
    db.insert("d", &[doc! {"_id": 1, "v": date("2021-01-01T00:00:00Z")}]);
    let cases: Vec<(&str, Bson, i32)> = vec![
        ("e", Bson::Int32(1), 9),
        ("e", doc! {"field": "a", "range": {"step": 1.0}}.into(), 40414),
        ("e", doc! {"range": {"step": 1.0, "bounds": "full"}}.into(), 40414),
        ("e", doc! {"field": "a", "range": {"bounds": "full"}}.into(), 40414),
        ("e", doc! {"field": 1.0, "range": {"step": 1.0, "bounds": "full"}}.into(), 14),
        ("e", doc! {"field": "a", "range": {"step": "x", "bounds": "full"}}.into(), 14),
        ("e", doc! {"field": "a", "partitionByFields": "p", "range": {"step": 1, "bounds": "full"}}.into(), 14),
        ("e", doc! {"field": "a", "what": 1, "range": {"step": 1, "bounds": "full"}}.into(), 40415),
        ("e", doc! {"field": "a", "range": {"step": 1, "bounds": [0]}}.into(), 5733403),
        ("e", doc! {"field": "a", "range": {"step": -1, "bounds": [0, 1]}}.into(), 5733401),
        ("e", doc! {"field": "$a", "range": {"step": 1, "bounds": [0, 1]}}.into(), 16410),
        ("e", doc! {"field": "a", "partitionByFields": ["$b"], "range": {"step": 1, "bounds": [0, 1]}}.into(), 16410),
        ("e", doc! {"field": "a", "range": {"step": 1, "bounds": "partition"}}.into(), 5733408),
        ("e", doc! {"field": "a", "range": {"step": 1, "bounds": [2, 1]}}.into(), 5733402),
        ("e", doc! {"field": "a", "range": {"step": 1, "bounds": [1, 2], "unit": "second"}}.into(), 5733409),
        ("e", doc! {"field": "a", "range": {"step": 1, "bounds": [1, date("2020-01-01T00:00:00Z")]}}.into(), 5733406),
        ("e", doc! {"field": "a", "range": {"step": 1.1, "bounds": "full", "unit": "second"}}.into(), 6586400),
        ("e", doc! {"field": "a", "range": {"step": 1, "bounds": "neither"}}.into(), 5946802),
        ("e", doc! {"field": "a", "range": {"step": 1, "bounds": 5}}.into(), 5733404),
        ("e", doc! {"field": "a", "range": {"step": 1, "bounds": ["a", "b"]}}.into(), 5946800),
        ("e", doc! {"field": "a", "range": {"step": 1, "bounds": [date("2020-01-01T00:00:00Z"), date("2020-01-02T00:00:00Z")]}}.into(), 5733410),
        ("e", doc! {"field": "v", "range": {"step": 1, "bounds": "full"}}.into(), 5733201),
        ("e", doc! {"field": "v", "range": {"step": 1, "bounds": "full", "unit": "day"}}.into(), 6053600),
        ("d", doc! {"field": "v", "range": {"step": 1, "bounds": "full"}}.into(), 6053600),
    ];
    for (coll, spec, want) in cases {
        let e = db
            .run(coll, &[doc! {"$densify": spec.clone()}])
            .map(|_| ())
            .unwrap_err();
        assert_eq!(code(&e), want, "{spec}: {e:?}");
    }
}

#[test]
fn manual_fill_examples() {
    let db = Db::new();
    let day = |d: u32| date(&format!("2022-02-{d:02}T00:00:00Z"));
    db.insert(
        "dailySales",
        &[
            doc! {"_id": 1, "date": day(2), "bootsSold": 10, "sandalsSold": 20, "sneakersSold": 12},
            doc! {"_id": 2, "date": day(3), "bootsSold": 7, "sneakersSold": 18},
            doc! {"_id": 3, "date": day(4), "sneakersSold": 5},
        ],
    );
    let got = db
        .run(
            "dailySales",
            &[doc! {"$fill": {"output": {"bootsSold": {"value": 0}, "sandalsSold": {"value": 0}, "sneakersSold": {"value": 0}}}}],
        )
        .unwrap();
    assert_same(
        &got,
        &[
            doc! {"_id": 1, "date": day(2), "bootsSold": 10, "sandalsSold": 20, "sneakersSold": 12},
            doc! {"_id": 2, "date": day(3), "bootsSold": 7, "sneakersSold": 18, "sandalsSold": 0},
            doc! {"_id": 3, "date": day(4), "sneakersSold": 5, "bootsSold": 0, "sandalsSold": 0},
        ],
    );
    let t = |h: u32| date(&format!("2021-03-08T{h:02}:00:00Z"));
    db.insert(
        "stock",
        &[
            doc! {"_id": 1, "time": t(9), "price": 500},
            doc! {"_id": 2, "time": t(10)},
            doc! {"_id": 3, "time": t(11), "price": 515},
            doc! {"_id": 4, "time": t(12)},
            doc! {"_id": 5, "time": t(13)},
            doc! {"_id": 6, "time": t(14), "price": 485},
        ],
    );
    let got = db
        .run(
            "stock",
            &[doc! {"$fill": {"sortBy": {"time": 1}, "output": {"price": {"method": "linear"}}}}],
        )
        .unwrap();
    assert_same(
        &got,
        &[
            doc! {"_id": 1, "time": t(9), "price": 500},
            doc! {"_id": 2, "time": t(10), "price": 507.5},
            doc! {"_id": 3, "time": t(11), "price": 515},
            doc! {"_id": 4, "time": t(12), "price": 505.0},
            doc! {"_id": 5, "time": t(13), "price": 495.0},
            doc! {"_id": 6, "time": t(14), "price": 485},
        ],
    );
    let d = |n: u32| date(&format!("2021-03-{n:02}T00:00:00Z"));
    let joe = "Joe's Pizza";
    let sally = "Sally's Deli";
    db.insert(
        "multi",
        &[
            doc! {"_id": 1, "date": d(8), "restaurant": joe, "score": 90},
            doc! {"_id": 2, "date": d(8), "restaurant": sally, "score": 75},
            doc! {"_id": 3, "date": d(9), "restaurant": joe, "score": 92},
            doc! {"_id": 4, "date": d(9), "restaurant": sally},
            doc! {"_id": 5, "date": d(10), "restaurant": joe},
            doc! {"_id": 6, "date": d(10), "restaurant": sally, "score": 68},
            doc! {"_id": 7, "date": d(11), "restaurant": joe, "score": 93},
            doc! {"_id": 8, "date": d(11), "restaurant": sally},
        ],
    );
    for partition in [
        doc! {"partitionBy": {"restaurant": "$restaurant"}},
        doc! {"partitionByFields": ["restaurant"]},
    ] {
        let mut spec = doc! {"sortBy": {"date": 1}, "output": {"score": {"method": "locf"}}};
        spec.extend(partition);
        let got = db.run("multi", &[doc! {"$fill": spec}]).unwrap();
        assert_same(
            &got,
            &[
                doc! {"_id": 1, "date": d(8), "restaurant": joe, "score": 90},
                doc! {"_id": 3, "date": d(9), "restaurant": joe, "score": 92},
                doc! {"_id": 5, "date": d(10), "restaurant": joe, "score": 92},
                doc! {"_id": 7, "date": d(11), "restaurant": joe, "score": 93},
                doc! {"_id": 2, "date": d(8), "restaurant": sally, "score": 75},
                doc! {"_id": 4, "date": d(9), "restaurant": sally, "score": 75},
                doc! {"_id": 6, "date": d(10), "restaurant": sally, "score": 68},
                doc! {"_id": 8, "date": d(11), "restaurant": sally, "score": 68},
            ],
        );
    }
}

#[test]
fn fill_errors() {
    let db = Db::new();
    db.insert("f", &[doc! {"_id": 1, "a": 1}]);
    let cases: Vec<(Bson, i32)> = vec![
        (Bson::Int32(1), 9),
        (doc! {"sortBy": {"a": 1}}.into(), 40414),
        (doc! {"output": {}}.into(), 6050203),
        (doc! {"output": {"a": 1}}.into(), 6050200),
        (
            doc! {"output": {"a": {"method": "locf", "value": 1}}}.into(),
            6050201,
        ),
        (doc! {"output": {"a": {"method": "spline"}}}.into(), 6050202),
        (doc! {"output": {"a": {"method": 1}}}.into(), 14),
        (doc! {"output": {"a": {"what": 1}}}.into(), 40415),
        (
            doc! {"partitionBy": "$a", "partitionByFields": ["a"], "output": {"a": {"value": 1}}}
                .into(),
            6050204,
        ),
        (
            doc! {"partitionBy": 1, "output": {"a": {"value": 1}}}.into(),
            14,
        ),
        (
            doc! {"bogus": 1, "output": {"a": {"value": 1}}}.into(),
            40415,
        ),
        (doc! {"output": {"a": {"method": "linear"}}}.into(), 605001),
    ];
    for (spec, want) in cases {
        let e = db
            .run("f", &[doc! {"$fill": spec.clone()}])
            .map(|_| ())
            .unwrap_err();
        assert_eq!(code(&e), want, "{spec}: {e:?}");
    }
}
