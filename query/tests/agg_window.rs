//! `$setWindowFields`: the manual's examples (cakeSales), every window function, document,
//! range and time-range windows, partitions, memory limits and MongoDB's parse errors.

mod agg_common;

use agg_common::{Db, assert_same, code};
use bson::{Bson, DateTime, Document, doc};

fn date(s: &str) -> DateTime {
    DateTime::parse_rfc3339_str(s).unwrap()
}

fn cakes() -> Db {
    let db = Db::new();
    db.insert(
        "cakeSales",
        &[
            doc! {"_id": 0, "type": "chocolate", "orderDate": date("2020-05-18T14:10:30Z"), "state": "CA", "price": 13, "quantity": 120},
            doc! {"_id": 1, "type": "chocolate", "orderDate": date("2021-03-20T11:30:05Z"), "state": "WA", "price": 14, "quantity": 140},
            doc! {"_id": 2, "type": "vanilla", "orderDate": date("2021-01-11T06:31:15Z"), "state": "CA", "price": 12, "quantity": 145},
            doc! {"_id": 3, "type": "vanilla", "orderDate": date("2020-02-08T13:13:23Z"), "state": "WA", "price": 13, "quantity": 104},
            doc! {"_id": 4, "type": "strawberry", "orderDate": date("2019-05-18T16:09:01Z"), "state": "CA", "price": 41, "quantity": 162},
            doc! {"_id": 5, "type": "strawberry", "orderDate": date("2019-01-08T06:12:03Z"), "state": "WA", "price": 43, "quantity": 134},
        ],
    );
    db
}

/// The cakeSales documents by `_id`, with extra fields appended.
fn cake(id: i32, extra: Document) -> Document {
    let base = [
        doc! {"_id": 0, "type": "chocolate", "orderDate": date("2020-05-18T14:10:30Z"), "state": "CA", "price": 13, "quantity": 120},
        doc! {"_id": 1, "type": "chocolate", "orderDate": date("2021-03-20T11:30:05Z"), "state": "WA", "price": 14, "quantity": 140},
        doc! {"_id": 2, "type": "vanilla", "orderDate": date("2021-01-11T06:31:15Z"), "state": "CA", "price": 12, "quantity": 145},
        doc! {"_id": 3, "type": "vanilla", "orderDate": date("2020-02-08T13:13:23Z"), "state": "WA", "price": 13, "quantity": 104},
        doc! {"_id": 4, "type": "strawberry", "orderDate": date("2019-05-18T16:09:01Z"), "state": "CA", "price": 41, "quantity": 162},
        doc! {"_id": 5, "type": "strawberry", "orderDate": date("2019-01-08T06:12:03Z"), "state": "WA", "price": 43, "quantity": 134},
    ];
    let mut d = base[id as usize].clone();
    for (k, v) in extra {
        d.insert(k, v);
    }
    d
}

fn run(db: &Db, stage: Document) -> Vec<Document> {
    db.run("cakeSales", &[doc! {"$setWindowFields": stage}])
        .unwrap_or_else(|e| panic!("{e:?}"))
}

#[test]
fn manual_documents_windows() {
    let db = cakes();
    let got = run(
        &db,
        doc! {"partitionBy": "$state", "sortBy": {"orderDate": 1}, "output": {
        "cumulativeQuantityForState": {"$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}}}},
    );
    let f = |id, v: i32| cake(id, doc! {"cumulativeQuantityForState": v});
    assert_same(
        &got,
        &[
            f(4, 162),
            f(0, 282),
            f(2, 427),
            f(5, 134),
            f(3, 238),
            f(1, 378),
        ],
    );

    let got = run(
        &db,
        doc! {"partitionBy": {"$year": "$orderDate"}, "sortBy": {"orderDate": 1}, "output": {
        "cumulativeQuantityForYear": {"$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}}}},
    );
    let f = |id, v: i32| cake(id, doc! {"cumulativeQuantityForYear": v});
    assert_same(
        &got,
        &[
            f(5, 134),
            f(4, 296),
            f(3, 104),
            f(0, 224),
            f(2, 145),
            f(1, 285),
        ],
    );

    let got = run(
        &db,
        doc! {"partitionBy": {"$year": "$orderDate"}, "sortBy": {"orderDate": 1}, "output": {
        "averageQuantity": {"$avg": "$quantity", "window": {"documents": [-1, 0]}}}},
    );
    let f = |id, v: f64| cake(id, doc! {"averageQuantity": v});
    assert_same(
        &got,
        &[
            f(5, 134.0),
            f(4, 148.0),
            f(3, 104.0),
            f(0, 112.0),
            f(2, 145.0),
            f(1, 142.5),
        ],
    );

    let got = run(
        &db,
        doc! {"partitionBy": {"$year": "$orderDate"}, "sortBy": {"orderDate": 1}, "output": {
        "cumulativeQuantityForYear": {"$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}},
        "maximumQuantityForYear": {"$max": "$quantity", "window": {"documents": ["unbounded", "unbounded"]}}}},
    );
    let f = |id, c: i32, m: i32| {
        cake(
            id,
            doc! {"cumulativeQuantityForYear": c, "maximumQuantityForYear": m},
        )
    };
    assert_same(
        &got,
        &[
            f(5, 134, 162),
            f(4, 296, 162),
            f(3, 104, 120),
            f(0, 224, 120),
            f(2, 145, 145),
            f(1, 285, 145),
        ],
    );
}

#[test]
fn manual_range_and_time_windows() {
    let db = cakes();
    let got = run(
        &db,
        doc! {"partitionBy": "$state", "sortBy": {"price": 1}, "output": {
        "quantityFromSimilarOrders": {"$sum": "$quantity", "window": {"range": [-10, 10]}}}},
    );
    let f = |id, v: i32| cake(id, doc! {"quantityFromSimilarOrders": v});
    assert_same(
        &got,
        &[
            f(2, 265),
            f(0, 265),
            f(4, 162),
            f(3, 244),
            f(1, 244),
            f(5, 134),
        ],
    );

    let d = |s: &str| Bson::DateTime(date(s));
    let (ca1, ca2, ca3) = (
        d("2019-05-18T16:09:01Z"),
        d("2020-05-18T14:10:30Z"),
        d("2021-01-11T06:31:15Z"),
    );
    let (wa1, wa2, wa3) = (
        d("2019-01-08T06:12:03Z"),
        d("2020-02-08T13:13:23Z"),
        d("2021-03-20T11:30:05Z"),
    );
    let got = run(
        &db,
        doc! {"partitionBy": "$state", "sortBy": {"orderDate": 1}, "output": {
        "recentOrders": {"$push": "$orderDate", "window": {"range": ["unbounded", 10], "unit": "month"}}}},
    );
    let f = |id, v: Vec<Bson>| cake(id, doc! {"recentOrders": v});
    assert_same(
        &got,
        &[
            f(4, vec![ca1.clone()]),
            f(0, vec![ca1.clone(), ca2.clone(), ca3.clone()]),
            f(2, vec![ca1.clone(), ca2.clone(), ca3.clone()]),
            f(5, vec![wa1.clone()]),
            f(3, vec![wa1.clone(), wa2.clone()]),
            f(1, vec![wa1.clone(), wa2.clone(), wa3.clone()]),
        ],
    );
    let got = run(
        &db,
        doc! {"partitionBy": "$state", "sortBy": {"orderDate": 1}, "output": {
        "recentOrders": {"$push": "$orderDate", "window": {"range": ["unbounded", -10], "unit": "month"}}}},
    );
    assert_same(
        &got,
        &[
            f(4, vec![]),
            f(0, vec![ca1.clone()]),
            f(2, vec![ca1.clone()]),
            f(5, vec![]),
            f(3, vec![wa1.clone()]),
            f(1, vec![wa1, wa2]),
        ],
    );
}

fn with_duplicates() -> Db {
    let db = cakes();
    db.insert(
        "cakeSales",
        &[
            doc! {"_id": 6, "type": "strawberry", "orderDate": date("2020-01-08T06:12:03Z"), "state": "WA", "price": 41, "quantity": 134},
            doc! {"_id": 7, "type": "strawberry", "orderDate": date("2020-01-01T06:12:03Z"), "state": "WA", "price": 34, "quantity": 134},
            doc! {"_id": 8, "type": "strawberry", "orderDate": date("2020-01-02T06:12:03Z"), "state": "WA", "price": 40, "quantity": 134},
            doc! {"_id": 9, "type": "strawberry", "orderDate": date("2020-05-11T16:09:01Z"), "state": "CA", "price": 39, "quantity": 162},
            doc! {"_id": 10, "type": "strawberry", "orderDate": date("2020-05-11T16:09:01Z"), "state": "CA", "price": 39, "quantity": null},
            doc! {"_id": 11, "type": "strawberry", "orderDate": date("2020-05-11T16:09:01Z"), "state": "CA", "price": 39},
        ],
    );
    db
}

/// `(_id, field)` of each result.
fn ids_and(got: &[Document], field: &str) -> Vec<(i32, Option<Bson>)> {
    got.iter()
        .map(|d| (d.get_i32("_id").unwrap(), d.get(field).cloned()))
        .collect()
}

fn ints(v: &[(i32, i32)]) -> Vec<(i32, Option<Bson>)> {
    v.iter().map(|(i, x)| (*i, Some(Bson::Int32(*x)))).collect()
}

#[test]
fn ranks_and_document_numbers() {
    let db = cakes();
    let got = run(
        &db,
        doc! {"partitionBy": "$state", "sortBy": {"quantity": -1}, "output": {"r": {"$rank": {}}}},
    );
    assert_eq!(
        ids_and(&got, "r"),
        ints(&[(4, 1), (2, 2), (0, 3), (1, 1), (5, 2), (3, 3)])
    );
    let db = with_duplicates();
    let stage = |op: &str| {
        let mut out = Document::new();
        out.insert("r", doc! {op: {}});
        doc! {"partitionBy": "$state", "sortBy": {"quantity": -1}, "output": out}
    };
    // Null and missing rank apart; ties share a rank (with a gap for $rank).
    assert_eq!(
        ids_and(&run(&db, stage("$rank")), "r"),
        ints(&[
            (4, 1),
            (9, 1),
            (2, 3),
            (0, 4),
            (10, 5),
            (11, 6),
            (1, 1),
            (5, 2),
            (6, 2),
            (7, 2),
            (8, 2),
            (3, 6)
        ])
    );
    assert_eq!(
        ids_and(&run(&db, stage("$denseRank")), "r"),
        ints(&[
            (4, 1),
            (9, 1),
            (2, 2),
            (0, 3),
            (10, 4),
            (11, 5),
            (1, 1),
            (5, 2),
            (6, 2),
            (7, 2),
            (8, 2),
            (3, 3)
        ])
    );
    assert_eq!(
        ids_and(&run(&db, stage("$documentNumber")), "r"),
        ints(&[
            (4, 1),
            (9, 2),
            (2, 3),
            (0, 4),
            (10, 5),
            (11, 6),
            (1, 1),
            (5, 2),
            (6, 3),
            (7, 4),
            (8, 5),
            (3, 6)
        ])
    );
}

#[test]
fn shift_covariance_first_last() {
    let db = cakes();
    let na = || Some(Bson::String("Not available".into()));
    let i = |x: i32| Some(Bson::Int32(x));
    let got = run(
        &db,
        doc! {"partitionBy": "$state", "sortBy": {"quantity": -1}, "output": {
        "s": {"$shift": {"output": "$quantity", "by": 1, "default": "Not available"}}}},
    );
    assert_eq!(
        ids_and(&got, "s"),
        vec![
            (4, i(145)),
            (2, i(120)),
            (0, na()),
            (1, i(134)),
            (5, i(104)),
            (3, na())
        ]
    );
    let got = run(
        &db,
        doc! {"partitionBy": "$state", "sortBy": {"quantity": -1}, "output": {
        "s": {"$shift": {"output": "$quantity", "by": -1}}}},
    );
    assert_eq!(
        ids_and(&got, "s"),
        vec![
            (4, Some(Bson::Null)),
            (2, i(162)),
            (0, i(145)),
            (1, Some(Bson::Null)),
            (5, i(140)),
            (3, i(134))
        ]
    );
    let f = |x: f64| Some(Bson::Double(x));
    let got = run(
        &db,
        doc! {"partitionBy": "$state", "sortBy": {"orderDate": 1}, "output": {
        "p": {"$covariancePop": [{"$year": "$orderDate"}, "$quantity"], "window": {"documents": ["unbounded", "current"]}},
        "s": {"$covarianceSamp": [{"$year": "$orderDate"}, "$quantity"], "window": {"documents": ["unbounded", "current"]}}}},
    );
    assert_eq!(
        ids_and(&got, "p"),
        vec![
            (4, f(0.0)),
            (0, f(-10.5)),
            (2, f(-5.666666666666671)),
            (5, f(0.0)),
            (3, f(-7.5)),
            (1, f(2.0))
        ]
    );
    assert_eq!(
        ids_and(&got, "s"),
        vec![
            (4, Some(Bson::Null)),
            (0, f(-21.0)),
            (2, f(-8.500000000000007)),
            (5, Some(Bson::Null)),
            (3, f(-15.0)),
            (1, f(3.0))
        ]
    );
    // A sliding covariance gives the same values as recomputing each window.
    let got = run(
        &db,
        doc! {"sortBy": {"_id": 1}, "output": {
        "p": {"$covariancePop": ["$price", "$quantity"], "window": {"documents": [-1, 1]}},
        "q": {"$first": "$quantity", "window": {"documents": [-1, 1]}},
        "l": {"$last": "$quantity", "window": {"documents": [-1, 1]}}}},
    );
    let firsts: Vec<_> = ids_and(&got, "q");
    assert_eq!(
        firsts,
        vec![
            (0, i(120)),
            (1, i(120)),
            (2, i(140)),
            (3, i(145)),
            (4, i(104)),
            (5, i(162))
        ]
    );
    assert_eq!(
        ids_and(&got, "l"),
        vec![
            (0, i(140)),
            (1, i(145)),
            (2, i(104)),
            (3, i(162)),
            (4, i(134)),
            (5, i(134))
        ]
    );
    // Windows 0..1: prices 13,14 quantities 120,140 → cov = 5.
    assert_eq!(got[0].get("p"), Some(&Bson::Double(5.0)));
}

fn fleet() -> Db {
    let db = Db::new();
    let t = |s: &str| date(&format!("2020-05-18T{s}Z"));
    db.insert(
        "deliveryFleet",
        &[
            doc! {"_id": 1, "truckID": "1", "timeStamp": t("14:10:30"), "miles": 1295.1},
            doc! {"_id": 2, "truckID": "1", "timeStamp": t("14:11:00"), "miles": 1295.63},
            doc! {"_id": 3, "truckID": "1", "timeStamp": t("14:11:30"), "miles": 1296.25},
            doc! {"_id": 4, "truckID": "1", "timeStamp": t("14:12:00"), "miles": 1296.76},
            doc! {"_id": 5, "truckID": "2", "timeStamp": t("14:10:30"), "miles": 10234.1},
            doc! {"_id": 6, "truckID": "2", "timeStamp": t("14:11:00"), "miles": 10234.33},
            doc! {"_id": 7, "truckID": "2", "timeStamp": t("14:11:30"), "miles": 10234.73},
            doc! {"_id": 8, "truckID": "2", "timeStamp": t("14:12:00"), "miles": 10235.13},
        ],
    );
    db.insert(
        "powerConsumption",
        &[
            doc! {"_id": 1, "powerMeterID": "1", "timeStamp": t("14:10:30"), "kilowatts": 2.95},
            doc! {"_id": 2, "powerMeterID": "1", "timeStamp": t("14:11:00"), "kilowatts": 2.7},
            doc! {"_id": 3, "powerMeterID": "1", "timeStamp": t("14:11:30"), "kilowatts": 2.6},
            doc! {"_id": 4, "powerMeterID": "1", "timeStamp": t("14:12:00"), "kilowatts": 2.98},
            doc! {"_id": 5, "powerMeterID": "2", "timeStamp": t("14:10:30"), "kilowatts": 2.5},
            doc! {"_id": 6, "powerMeterID": "2", "timeStamp": t("14:11:00"), "kilowatts": 2.25},
            doc! {"_id": 7, "powerMeterID": "2", "timeStamp": t("14:11:30"), "kilowatts": 2.75},
            doc! {"_id": 8, "powerMeterID": "2", "timeStamp": t("14:12:00"), "kilowatts": 2.82},
        ],
    );
    db.insert(
        "stockPrices",
        &[
            doc! {"_id": 1, "stock": "MDB", "date": date("2020-05-18T20:00:00Z"), "price": 13},
            doc! {"_id": 2, "stock": "MDB", "date": date("2020-05-19T20:00:00Z"), "price": 15.4},
            doc! {"_id": 3, "stock": "MDB", "date": date("2020-05-20T20:00:00Z"), "price": 12},
            doc! {"_id": 4, "stock": "MDB", "date": date("2020-05-21T20:00:00Z"), "price": 11.7},
            doc! {"_id": 5, "stock": "MSFT", "date": date("2020-05-18T20:00:00Z"), "price": 82},
            doc! {"_id": 6, "stock": "MSFT", "date": date("2020-05-19T20:00:00Z"), "price": 94},
            doc! {"_id": 7, "stock": "MSFT", "date": date("2020-05-20T20:00:00Z"), "price": 112},
            doc! {"_id": 8, "stock": "MSFT", "date": date("2020-05-21T20:00:00Z"), "price": 97.3},
        ],
    );
    db.insert(
        "stock",
        &[
            doc! {"_id": 1, "time": date("2021-03-08T09:00:00Z"), "price": 500},
            doc! {"_id": 2, "time": date("2021-03-08T10:00:00Z")},
            doc! {"_id": 3, "time": date("2021-03-08T11:00:00Z"), "price": 515},
            doc! {"_id": 4, "time": date("2021-03-08T12:00:00Z")},
            doc! {"_id": 5, "time": date("2021-03-08T13:00:00Z")},
            doc! {"_id": 6, "time": date("2021-03-08T14:00:00Z"), "price": 485},
        ],
    );
    db
}

fn field_values(got: &[Document], field: &str) -> Vec<Option<Bson>> {
    got.iter().map(|d| d.get(field).cloned()).collect()
}

#[test]
fn derivative_integral_exp_moving_avg_fills() {
    let db = fleet();
    let got = db
        .run(
            "deliveryFleet",
            &[
                doc! {"$setWindowFields": {"partitionBy": "$truckID", "sortBy": {"timeStamp": 1}, "output": {
                    "truckAverageSpeed": {"$derivative": {"input": "$miles", "unit": "hour"},
                        "window": {"range": [-30, 0], "unit": "second"}}}}},
                doc! {"$match": {"truckAverageSpeed": {"$gt": 50}}},
            ],
        )
        .unwrap();
    let f = |x: f64| Some(Bson::Double(x));
    assert_eq!(
        field_values(&got, "truckAverageSpeed"),
        vec![
            f(63.60000000002401),
            f(74.3999999999869),
            f(61.199999999998916)
        ]
    );
    let got = db
        .run(
            "powerConsumption",
            &[doc! {"$setWindowFields": {"partitionBy": "$powerMeterID", "sortBy": {"timeStamp": 1}, "output": {
                "kwh": {"$integral": {"input": "$kilowatts", "unit": "hour"},
                    "window": {"range": ["unbounded", "current"], "unit": "hour"}}}}}],
        )
        .unwrap();
    assert_eq!(
        field_values(&got, "kwh"),
        vec![
            f(0.0),
            f(0.023541666666666666),
            f(0.045625),
            f(0.068875),
            f(0.0),
            f(0.019791666666666666),
            f(0.040625),
            f(0.06383333333333334)
        ]
    );
    let ema = |arg: Document| {
        let got = db
            .run(
                "stockPrices",
                &[doc! {"$setWindowFields": {"partitionBy": "$stock", "sortBy": {"date": 1}, "output": {
                    "e": {"$expMovingAvg": arg}}}}],
            )
            .unwrap();
        field_values(&got, "e")
    };
    assert_eq!(
        ema(doc! {"input": "$price", "N": 2}),
        vec![
            f(13.0),
            f(14.6),
            f(12.866666666666667),
            f(12.088888888888889),
            f(82.0),
            f(90.0),
            f(104.66666666666667),
            f(99.75555555555556)
        ]
    );
    assert_eq!(
        ema(doc! {"input": "$price", "alpha": 0.75}),
        vec![
            f(13.0),
            f(14.8),
            f(12.7),
            f(11.95),
            f(82.0),
            f(91.0),
            f(106.75),
            f(99.6625)
        ]
    );
    let got = db
        .run(
            "stock",
            &[
                doc! {"$setWindowFields": {"sortBy": {"time": 1}, "output": {
                "linearFillPrice": {"$linearFill": "$price"},
                "locfPrice": {"$locf": "$price"}}}},
            ],
        )
        .unwrap();
    let i = |x: i32| Some(Bson::Int32(x));
    assert_eq!(
        field_values(&got, "linearFillPrice"),
        vec![i(500), f(507.5), i(515), f(505.0), f(495.0), i(485)]
    );
    assert_eq!(
        field_values(&got, "locfPrice"),
        vec![i(500), i(500), i(515), i(515), i(515), i(485)]
    );
}

/// Sliding and growing windows agree with a direct computation over each window, for
/// document windows of many shapes, over a partitioned collection with nulls and missing.
#[test]
fn windows_agree_with_direct_computation() {
    let db = Db::new();
    let mut seed = 12345u64;
    let mut rnd = |m: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % m
    };
    let mut docs = Vec::new();
    for i in 0..60 {
        let mut d = doc! {"_id": i, "p": (rnd(3) as i32), "t": i};
        match rnd(6) {
            0 => {}
            1 => {
                d.insert("v", Bson::Null);
            }
            _ => {
                d.insert("v", rnd(100) as i32 - 30);
            }
        }
        docs.push(d);
    }
    db.insert("w", &docs);
    let bound = |b: &Bson| match b {
        Bson::String(s) if s == "unbounded" => None,
        Bson::String(_) => Some(0i64),
        Bson::Int32(i) => Some(i64::from(*i)),
        _ => unreachable!(),
    };
    let shapes: Vec<[Bson; 2]> = vec![
        ["unbounded".into(), "current".into()],
        ["unbounded".into(), "unbounded".into()],
        ["unbounded".into(), Bson::Int32(2)],
        ["unbounded".into(), Bson::Int32(-2)],
        [Bson::Int32(-3), "current".into()],
        [Bson::Int32(-2), Bson::Int32(2)],
        [Bson::Int32(1), Bson::Int32(3)],
        [Bson::Int32(-5), Bson::Int32(-2)],
        ["current".into(), "unbounded".into()],
        [Bson::Int32(0), Bson::Int32(0)],
    ];
    for shape in shapes {
        let window = doc! {"documents": [shape[0].clone(), shape[1].clone()]};
        let got = db
            .run(
                "w",
                &[
                    doc! {"$setWindowFields": {"partitionBy": "$p", "sortBy": {"t": 1}, "output": {
                        "sum": {"$sum": "$v", "window": window.clone()},
                        "min": {"$min": "$v", "window": window.clone()},
                        "max": {"$max": "$v", "window": window.clone()},
                        "push": {"$push": "$v", "window": window.clone()},
                        "count": {"$count": {}, "window": window.clone()},
                        "first": {"$first": "$t", "window": window.clone()},
                        "last": {"$last": "$t", "window": window.clone()},
                        "firstN": {"$firstN": {"input": "$t", "n": 2}, "window": window.clone()},
                        "maxN": {"$maxN": {"input": "$v", "n": 2}, "window": window.clone()},
                    }}},
                ],
            )
            .unwrap();
        // Group the input by partition, in `t` order.
        for p in 0..3 {
            let part: Vec<&Document> = docs
                .iter()
                .filter(|d| d.get_i32("p").ok() == Some(p))
                .collect();
            let out: Vec<&Document> = got
                .iter()
                .filter(|d| d.get_i32("p").ok() == Some(p))
                .collect();
            assert_eq!(part.len(), out.len());
            let n = part.len() as i64;
            for (cur, o) in out.iter().enumerate() {
                let cur = cur as i64;
                let lo = bound(&shape[0]).map_or(0, |k| (cur + k).max(0));
                let hi = bound(&shape[1]).map_or(n - 1, |k| (cur + k).min(n - 1));
                let win: Vec<&Document> = if lo <= hi && hi >= 0 {
                    part[lo as usize..=hi as usize].to_vec()
                } else {
                    vec![]
                };
                let vals: Vec<i32> = win.iter().filter_map(|d| d.get_i32("v").ok()).collect();
                let pushed: Vec<Bson> = win.iter().filter_map(|d| d.get("v").cloned()).collect();
                let what = format!("{shape:?} p={p} cur={cur}: {o}");
                assert_eq!(
                    o.get("sum"),
                    Some(&Bson::Int32(vals.iter().sum())),
                    "{what}"
                );
                let mm = |v: Option<&i32>| v.map_or(Bson::Null, |x| Bson::Int32(*x));
                assert_eq!(o.get("min"), Some(&mm(vals.iter().min())), "{what}");
                assert_eq!(o.get("max"), Some(&mm(vals.iter().max())), "{what}");
                assert_eq!(o.get("push"), Some(&Bson::Array(pushed)), "{what}");
                assert_eq!(
                    o.get("count"),
                    Some(&Bson::Int32(win.len() as i32)),
                    "{what}"
                );
                let t =
                    |d: Option<&&Document>| d.map_or(Bson::Null, |d| d.get("t").unwrap().clone());
                assert_eq!(o.get("first"), Some(&t(win.first())), "{what}");
                assert_eq!(o.get("last"), Some(&t(win.last())), "{what}");
                let first_n: Vec<Bson> = win
                    .iter()
                    .take(2)
                    .map(|d| d.get("t").unwrap().clone())
                    .collect();
                assert_eq!(o.get("firstN"), Some(&Bson::Array(first_n)), "{what}");
                let mut sorted = vals.clone();
                sorted.sort_unstable_by(|a, b| b.cmp(a));
                let max_n: Vec<Bson> = sorted.iter().take(2).map(|x| Bson::Int32(*x)).collect();
                assert_eq!(o.get("maxN"), Some(&Bson::Array(max_n)), "{what}");
            }
        }
    }
}

#[test]
fn numeric_types_and_empty_windows() {
    let db = Db::new();
    db.insert(
        "n",
        &[
            doc! {"_id": 1, "v": 1_i64},
            doc! {"_id": 2, "v": 2_i64},
            doc! {"_id": 3, "v": 1.5},
            doc! {"_id": 4, "v": 4},
            doc! {"_id": 5, "v": "str"},
        ],
    );
    let run1 = |output: Document| {
        db.run(
            "n",
            &[doc! {"$setWindowFields": {"sortBy": {"_id": 1}, "output": output}}],
        )
        .unwrap()
    };
    // A growing $sum keeps $group's types (long); a sliding one narrows back to int once the
    // wider values have left the window (MongoDB's RemovableSum).
    let got = run1(doc! {
        "grow": {"$sum": "$v", "window": {"documents": ["unbounded", "current"]}},
        "slide": {"$sum": "$v", "window": {"documents": [-1, 0]}},
        "avg": {"$avg": "$v", "window": {"documents": [-1, 0]}},
        "empty": {"$sum": "$v", "window": {"documents": [5, 6]}},
        "emptyAvg": {"$avg": "$v", "window": {"documents": [5, 6]}},
        "emptyPush": {"$push": "$v", "window": {"documents": [5, 6]}},
        "std": {"$stdDevPop": "$v", "window": {"documents": [-1, 0]}},
    });
    assert_eq!(
        field_values(&got, "grow"),
        vec![
            Some(Bson::Int64(1)),
            Some(Bson::Int64(3)),
            Some(Bson::Double(4.5)),
            Some(Bson::Double(8.5)),
            Some(Bson::Double(8.5))
        ]
    );
    assert_eq!(
        field_values(&got, "slide"),
        vec![
            Some(Bson::Int32(1)),
            Some(Bson::Int32(3)),
            Some(Bson::Double(3.5)),
            Some(Bson::Double(5.5)),
            Some(Bson::Int32(4))
        ]
    );
    assert_eq!(
        field_values(&got, "avg"),
        vec![
            Some(Bson::Double(1.0)),
            Some(Bson::Double(1.5)),
            Some(Bson::Double(1.75)),
            Some(Bson::Double(2.75)),
            Some(Bson::Double(4.0))
        ]
    );
    assert!(
        field_values(&got, "empty")
            .iter()
            .all(|v| *v == Some(Bson::Int32(0)))
    );
    assert!(
        field_values(&got, "emptyAvg")
            .iter()
            .all(|v| *v == Some(Bson::Null))
    );
    assert!(
        field_values(&got, "emptyPush")
            .iter()
            .all(|v| *v == Some(Bson::Array(vec![])))
    );
    assert_eq!(
        field_values(&got, "std"),
        vec![
            Some(Bson::Int32(0)),
            Some(Bson::Double(0.5)),
            Some(Bson::Double(0.25)),
            Some(Bson::Double(1.25)),
            Some(Bson::Int32(0))
        ]
    );
    // $addToSet over a sliding window comes out in BSON order.
    let got =
        run1(doc! {"s": {"$addToSet": {"$mod": ["$_id", 2]}, "window": {"documents": [-2, 0]}}});
    assert_eq!(
        field_values(&got, "s"),
        vec![
            Some(Bson::Array(vec![Bson::Int32(1)])),
            Some(Bson::Array(vec![Bson::Int32(0), Bson::Int32(1)])),
            Some(Bson::Array(vec![Bson::Int32(0), Bson::Int32(1)])),
            Some(Bson::Array(vec![Bson::Int32(0), Bson::Int32(1)])),
            Some(Bson::Array(vec![Bson::Int32(0), Bson::Int32(1)])),
        ]
    );
    // Output paths: dotted fields nest, a missing $first removes the field.
    let got = run1(doc! {"a.b": {"$first": "$v"}, "gone": {"$last": "$nope"}});
    assert_same(&got[..1], &[doc! {"_id": 1, "v": 1_i64, "a": {"b": 1_i64}}]);
}

#[test]
fn range_windows_skip_other_types_and_check_the_current_one() {
    let db = Db::new();
    db.insert(
        "r",
        &[
            doc! {"_id": 1, "x": Bson::Null},
            doc! {"_id": 2, "x": 0},
            doc! {"_id": 3, "x": 1},
            doc! {"_id": 4, "x": 1.5},
            doc! {"_id": 5, "x": 2},
            doc! {"_id": 6, "x": 3},
            doc! {"_id": 7, "x": 100},
        ],
    );
    let got = db
        .run(
            "r",
            &[
                doc! {"$match": {"x": {"$type": "number"}}},
                doc! {"$setWindowFields": {"sortBy": {"x": 1}, "output": {
                    "y": {"$push": "$x", "window": {"range": [-1, 1]}},
                    "z": {"$push": "$x", "window": {"range": ["current", 1]}},
                    "u": {"$push": "$x", "window": {"range": [1.5, "unbounded"]}},
                    "v": {"$push": "$x", "window": {"range": [Bson::Decimal128("0.5".parse().unwrap()), 1]}}}}},
            ],
        )
        .unwrap();
    let arr = |v: &[f64]| {
        Some(Bson::Array(
            v.iter()
                .map(|x| {
                    if x.fract() == 0.0 {
                        Bson::Int32(*x as i32)
                    } else {
                        Bson::Double(*x)
                    }
                })
                .collect(),
        ))
    };
    assert_eq!(
        field_values(&got, "y"),
        vec![
            arr(&[0.0, 1.0]),
            arr(&[0.0, 1.0, 1.5, 2.0]),
            arr(&[1.0, 1.5, 2.0]),
            arr(&[1.0, 1.5, 2.0, 3.0]),
            arr(&[2.0, 3.0]),
            arr(&[100.0])
        ]
    );
    assert_eq!(
        field_values(&got, "z"),
        vec![
            arr(&[0.0, 1.0]),
            arr(&[1.0, 1.5, 2.0]),
            arr(&[1.5, 2.0]),
            arr(&[2.0, 3.0]),
            arr(&[3.0]),
            arr(&[100.0])
        ]
    );
    assert_eq!(
        field_values(&got, "u"),
        vec![
            arr(&[1.5, 2.0, 3.0, 100.0]),
            arr(&[3.0, 100.0]),
            arr(&[3.0, 100.0]),
            arr(&[100.0]),
            arr(&[100.0]),
            arr(&[])
        ]
    );
    assert_eq!(
        field_values(&got, "v"),
        vec![
            arr(&[1.0]),
            arr(&[1.5, 2.0]),
            arr(&[2.0]),
            arr(&[3.0]),
            arr(&[]),
            arr(&[])
        ]
    );
    // The null sorts first and makes the range fail on it.
    let e = db
        .run(
            "r",
            &[doc! {"$setWindowFields": {"sortBy": {"x": 1}, "output": {
            "y": {"$sum": "$x", "window": {"range": [-1, 1]}}}}}],
        )
        .unwrap_err();
    assert_eq!(code(&e), 5429414, "{e:?}");
    let e = db
        .run(
            "r",
            &[doc! {"$setWindowFields": {"sortBy": {"x": 1}, "output": {
            "y": {"$sum": "$x", "window": {"range": [-1, 1], "unit": "day"}}}}}],
        )
        .unwrap_err();
    assert_eq!(code(&e), 5429513, "{e:?}");
}

#[test]
fn parse_errors() {
    let db = cakes();
    let cases: Vec<(Bson, i32)> = vec![
        (Bson::String("x".into()), 9),
        (doc! {"sortBy": "x", "output": {}}.into(), 14),
        (doc! {"output": "x"}.into(), 14),
        (doc! {"what": 1, "output": {}}.into(), 40415),
        (doc! {"sortBy": {"a": 1}}.into(), 40414),
        (doc! {"partitionBy": {"$notAnOperator": 1}, "output": {}}.into(), 168),
        (doc! {"partitionBy": [1, 2], "output": {}}.into(), 14),
        (doc! {"output": {"a": {"$sum": 1}, "a.b": {"$sum": 1}}}.into(), 6307900),
        (doc! {"output": {"a": 1}}.into(), 9),
        (doc! {"output": {"a": {"b": {"$sum": 1}}}}.into(), 9),
        (doc! {"output": {"a": {"$summ": 1}}}.into(), 9),
        (doc! {"output": {"a": {"$mergeObjects": "$x"}}}.into(), 9),
        (doc! {"output": {"a": {"$sum": 1, "$avg": 1}}}.into(), 9),
        (doc! {"output": {"a": {"$sum": 1, "abc": 1}}}.into(), 9),
        (doc! {"output": {"a": {"$sum": 1, "window": {"documents": ["unbounded", "current"]}}}}.into(), 5339901),
        (doc! {"output": {"a": {"$sum": 1, "window": {"range": [-1, 1]}}}}.into(), 5339902),
        (doc! {"sortBy": {"a": 1, "b": 1}, "output": {"a": {"$sum": 1, "window": {"range": [-1, 1]}}}}.into(), 5339902),
        (doc! {"sortBy": {"a": -1}, "output": {"a": {"$sum": 1, "window": {"range": [-1, 1]}}}}.into(), 8947401),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [1, -1]}}}}.into(), 5339900),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"range": ["current", -1]}}}}.into(), 5339900),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [1.5, 2]}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"documents": ["now", 2]}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [0, 1], "range": [0, 1]}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [0, 1], "unit": "day"}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"range": [0, 1.5], "unit": "day"}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"range": [0, 1], "unit": "fortnight"}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [0]}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"documents": ["$x", 1]}}}}.into(), 9),
        (doc! {"output": {"a": {"$rank": {}}}}.into(), 5371602),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$rank": 1}}}.into(), 5371603),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$rank": {}, "window": {}}}}.into(), 5371601),
        (doc! {"output": {"a": {"$shift": {"output": "$a", "by": 1}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$shift": {"output": "$a", "by": 1}, "window": {}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$shift": {"output": "$a", "by": 1.5}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$shift": {"output": "$a", "by": 1, "default": "$a"}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$shift": {"by": 1}}}}.into(), 9),
        (doc! {"output": {"a": {"$expMovingAvg": {"input": "$a", "N": 2}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$expMovingAvg": {"input": "$a", "N": 0}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$expMovingAvg": {"input": "$a", "alpha": 1}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$derivative": {"input": "$a"}}}}.into(), 9),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$derivative": {"input": "$a", "unit": "month"}, "window": {"documents": [-1, 0]}}}}.into(), 5490710),
        (doc! {"sortBy": {"a": 1, "b": 1}, "output": {"a": {"$integral": {"input": "$a"}}}}.into(), 9),
        (doc! {"output": {"a": {"$linearFill": "$a"}}}.into(), 605001),
        (doc! {"sortBy": {"a": 1}, "output": {"a": {"$locf": "$a", "window": {}}}}.into(), 9),
        (doc! {"output": {"a": {"$topN": {"n": 0, "sortBy": {"a": 1}, "output": "$a"}}}}.into(), 5787908),
        (doc! {"output": {"a": {"$firstN": {"n": 2, "input": "$a"}, "window": {}, "$lastN": 1}}}.into(), 9),
    ];
    for (spec, want) in cases {
        let e = db
            .run("cakeSales", &[doc! {"$setWindowFields": spec.clone()}])
            .map(|_| ())
            .unwrap_err();
        assert_eq!(code(&e), want, "{spec}: {e:?}");
    }
    // Messages as MongoDB words them.
    let msg = |spec: Document| {
        db.run("cakeSales", &[doc! {"$setWindowFields": spec}])
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        msg(doc! {"output": {"v": {"$mergeObjects": "$a"}}}),
        "Unrecognized window function, $mergeObjects"
    );
    assert_eq!(
        msg(doc! {"output": {"total": {"sum": "$x"}}}),
        "Expected a $-prefixed window function, sum"
    );
    assert_eq!(
        msg(
            doc! {"sortBy": {"a": 1}, "output": {"v": {"$sum": 1, "window": {"documents": [1, -1]}}}}
        ),
        "Lower bound must not exceed upper bound: [1, -1]"
    );
    // An array partition key at run time.
    let e = db
        .run(
            "cakeSales",
            &[
                doc! {"$set": {"arr": [1, 2]}},
                doc! {"$setWindowFields": {"partitionBy": "$arr", "output": {"n": {"$count": {}}}}},
            ],
        )
        .unwrap_err();
    assert_eq!(code(&e), 14);
}

#[test]
fn memory_limit_and_spilling() {
    let mut db = Db::new();
    let big = "x".repeat(1000);
    let docs: Vec<Document> = (0..300)
        .map(|i| doc! {"_id": i, "s": big.clone(), "v": i})
        .collect();
    db.insert("m", &docs);
    db.options.window_memory_limit = 100_000;
    db.options.allow_disk_use = false;
    let pipeline = [doc! {"$setWindowFields": {"sortBy": {"_id": 1}, "output": {
    "total": {"$sum": "$v", "window": {"documents": ["unbounded", "unbounded"]}},
    "moving": {"$avg": "$v", "window": {"documents": [-2, 0]}}}}}];
    // An unbounded window holds the whole partition: over the limit.
    let e = db.run("m", &pipeline).unwrap_err();
    assert_eq!(code(&e), 5414201, "{e:?}");
    assert!(
        e.to_string()
            .contains("Exceeded memory limit in DocumentSourceSetWindowFields")
    );
    // A sliding window only holds a few documents: fine.
    let got = db
        .run(
            "m",
            &[doc! {"$setWindowFields": {"sortBy": {"_id": 1}, "output": {
            "moving": {"$avg": "$v", "window": {"documents": [-2, 0]}}}}}],
        )
        .unwrap();
    assert_eq!(got.len(), 300);
    assert_eq!(got[299].get("moving"), Some(&Bson::Double(298.0)));
    // With allowDiskUse the partition spills and the results are the same.
    db.options.allow_disk_use = true;
    let dir = tempfile::tempdir().unwrap();
    db.options.spill_dir = Some(dir.path().to_path_buf());
    let got = db.run("m", &pipeline).unwrap();
    assert_eq!(got.len(), 300);
    assert!(
        got.iter()
            .all(|d| d.get("total") == Some(&Bson::Int32(44850)))
    );
    assert_eq!(got[10].get("moving"), Some(&Bson::Double(9.0)));
    assert_eq!(got[10].get_str("s").unwrap().len(), 1000);
    // A function state over the limit fails even with allowDiskUse.
    let e = db
        .run(
            "m",
            &[doc! {"$setWindowFields": {"sortBy": {"_id": 1}, "output": {
            "all": {"$push": "$s", "window": {"documents": ["unbounded", "current"]}}}}}],
        )
        .unwrap_err();
    assert_eq!(code(&e), 5414201, "{e:?}");
}

#[test]
fn explain_shows_the_desugared_stages() {
    let db = cakes();
    let agg = db
        .prepare(
            Some("cakeSales"),
            &[doc! {"$setWindowFields": {"partitionBy": {"$year": "$orderDate"}, "sortBy": {"orderDate": 1},
                "output": {"s": {"$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}}}}}],
            cairn_query::plan::Hint::None,
        )
        .unwrap();
    let names = agg.stage_names();
    assert_eq!(
        names,
        vec![
            "$cursor",
            "$addFields",
            "$sort",
            "$_internalSetWindowFields",
            "$unset"
        ]
    );
}
