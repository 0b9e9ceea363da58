//! Aggregation expressions: expression × document → value tables with exact BSON types
//! pinned. Sources: the MongoDB 7.0 manual's operator pages (their examples and outputs),
//! expression.cpp's type rules, and FerretDB's recorded MongoDB results.

use bson::{Bson, DateTime, Decimal128, Document, RawBson, RawDocumentBuf, bson, doc};
use cairn_query::expr::{Expression, ParseContext, Variables};

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("encodable")
}

fn dec(s: &str) -> Bson {
    Bson::Decimal128(s.parse::<Decimal128>().expect("decimal"))
}

/// Parses and evaluates `expr` against `input`; `None` is missing.
fn eval(expr: Bson, input: Document) -> Result<Option<Bson>, cairn_query::QueryError> {
    let holder = raw(&doc! {"e": expr});
    let v = holder.get("e").expect("readable").expect("present");
    let e = Expression::parse(v, &ParseContext::new())?;
    let out = e.evaluate(&raw(&input), &Variables::with_now(DateTime::from_millis(0)))?;
    Ok(out.map(|r: RawBson| Bson::try_from(r).expect("convertible")))
}

#[track_caller]
fn check(expr: Bson, input: Document, want: Bson) {
    let got =
        eval(expr.clone(), input.clone()).unwrap_or_else(|e| panic!("{expr} on {input}: {e:?}"));
    assert_eq!(got, Some(want.clone()), "{expr} on {input}");
}

#[track_caller]
fn check_missing(expr: Bson, input: Document) {
    let got = eval(expr.clone(), input.clone()).unwrap_or_else(|e| panic!("{expr}: {e:?}"));
    assert_eq!(got, None, "{expr} on {input}");
}

#[track_caller]
fn check_nan(expr: Bson, input: Document) {
    match eval(expr.clone(), input).unwrap_or_else(|e| panic!("{expr}: {e:?}")) {
        Some(Bson::Double(d)) => assert!(d.is_nan(), "{expr} gave {d}"),
        other => panic!("{expr} gave {other:?}"),
    }
}

fn date(ms: i64) -> Bson {
    Bson::DateTime(DateTime::from_millis(ms))
}

#[test]
fn operands() {
    let d = doc! {"a": {"b": 1, "c": [1, 2]}, "x": 5, "arr": [{"b": 1}, {"c": 1}, 5, {"b": [2]}, [{"b": 9}]]};
    check(bson!("$x"), d.clone(), bson!(5));
    check(bson!("$a.b"), d.clone(), bson!(1));
    check(bson!("$a.c"), d.clone(), bson!([1, 2]));
    check_missing(bson!("$nope"), d.clone());
    check_missing(bson!("$x.y"), d.clone());
    // Arrays map the rest of the path over their document elements; others are skipped.
    check(bson!("$arr.b"), d.clone(), bson!([1, [2]]));
    check(bson!("$$ROOT.x"), d.clone(), bson!(5));
    check(bson!("$$CURRENT.a.b"), d.clone(), bson!(1));
    check(bson!("$$ROOT"), doc! {"k": 1}, bson!({"k": 1}));
    check_missing(bson!("$$REMOVE"), d.clone());
    // No positional indexing in expressions.
    check(bson!("$a.c.0"), d.clone(), bson!([]));
    check(bson!({"$literal": "$x"}), d.clone(), bson!("$x"));
    check(
        bson!({"$literal": {"$add": 1}}),
        d.clone(),
        bson!({"$add": 1}),
    );
    check(bson!("plain"), d.clone(), bson!("plain"));
    check(bson!(["$x", "$nope", 1]), d.clone(), bson!([5, null, 1]));
    check(
        bson!({"k": "$x", "m": "$nope", "n": {"o": "$a.b"}}),
        d.clone(),
        bson!({"k": 5, "n": {"o": 1}}),
    );
    check(bson!({}), d.clone(), bson!({}));
    check(bson!("$$NOW"), d, date(0));
}

#[test]
fn comparisons() {
    let d = doc! {"qty": 250, "n": null, "s": "abc"};
    check(bson!({"$cmp": ["$qty", 250]}), d.clone(), bson!(0));
    check(bson!({"$cmp": ["$qty", 300]}), d.clone(), bson!(-1));
    check(bson!({"$cmp": ["$qty", 100]}), d.clone(), bson!(1));
    check(bson!({"$eq": ["$qty", 250.0]}), d.clone(), bson!(true));
    check(
        bson!({"$eq": ["$qty", dec("2.5E2")]}),
        d.clone(),
        bson!(true),
    );
    check(bson!({"$ne": ["$qty", 250]}), d.clone(), bson!(false));
    check(bson!({"$gt": ["$qty", 250]}), d.clone(), bson!(false));
    check(bson!({"$gte": ["$qty", 250]}), d.clone(), bson!(true));
    check(bson!({"$lt": ["$qty", 300]}), d.clone(), bson!(true));
    check(bson!({"$lte": ["$qty", 200]}), d.clone(), bson!(false));
    // Missing sorts below null; null equals null.
    check(bson!({"$eq": ["$missing", null]}), d.clone(), bson!(false));
    check(bson!({"$lt": ["$missing", null]}), d.clone(), bson!(true));
    check(bson!({"$eq": ["$n", null]}), d.clone(), bson!(true));
    check(
        bson!({"$eq": ["$missing", "$alsoMissing"]}),
        d.clone(),
        bson!(true),
    );
    check(
        bson!({"$eq": ["$missing", Bson::Undefined]}),
        d.clone(),
        bson!(true),
    );
    // Type order: numbers < strings < objects < arrays.
    check(bson!({"$lt": [1000, "$s"]}), d.clone(), bson!(true));
    check(bson!({"$gt": [[1], {"a": 1}]}), d.clone(), bson!(true));
    check(bson!({"$gt": ["$s", "abb"]}), d.clone(), bson!(true));
    check(bson!({"$eq": [f64::NAN, f64::NAN]}), d.clone(), bson!(true));
    check(
        bson!({"$lt": [f64::NAN, f64::NEG_INFINITY]}),
        d,
        bson!(true),
    );
}

#[test]
fn add_and_subtract() {
    // The manual's $add example.
    let d = doc! {"price": 10, "fee": 2, "date": DateTime::from_millis(1_393_660_800_000i64)};
    check(bson!({"$add": ["$price", "$fee"]}), d.clone(), bson!(12));
    check(
        bson!({"$add": ["$date", 3 * 24 * 60 * 60000]}),
        d.clone(),
        date(1_393_660_800_000 + 259_200_000),
    );
    check(bson!({"$add": []}), d.clone(), bson!(0));
    check(
        bson!({"$add": [i32::MAX, 1]}),
        d.clone(),
        Bson::Int64(2_147_483_648),
    );
    check(
        bson!({"$add": [i32::MAX, "$fee"]}),
        d.clone(),
        Bson::Int64(2_147_483_649),
    );
    check(
        bson!({"$add": [Bson::Int64(1), 1]}),
        d.clone(),
        Bson::Int64(2),
    );
    check(
        bson!({"$add": [Bson::Int64(i64::MAX), "$fee"]}),
        d.clone(),
        Bson::Double(9_223_372_036_854_775_807.0 + 2.0),
    );
    check(bson!({"$add": ["$price", 2.5]}), d.clone(), bson!(12.5));
    check(
        bson!({"$add": ["$price", dec("2.5")]}),
        d.clone(),
        dec("12.5"),
    );
    check(
        bson!({"$add": [dec("1.50"), "$fee"]}),
        d.clone(),
        dec("3.50"),
    );
    check(bson!({"$add": ["$price", null]}), d.clone(), Bson::Null);
    check(
        bson!({"$add": ["$price", "$missing"]}),
        d.clone(),
        Bson::Null,
    );
    check(
        bson!({"$add": ["$date", 1.5]}),
        d.clone(),
        date(1_393_660_800_002),
    );
    // The manual's $subtract examples.
    let d2 = doc! {"price": 10, "fee": 2, "discount": 5,
    "date": DateTime::from_millis(1_393_660_800_000i64)};
    check(
        bson!({"$subtract": [{"$add": ["$price", "$fee"]}, "$discount"]}),
        d2.clone(),
        bson!(7),
    );
    check(
        bson!({"$subtract": ["$date", 5 * 60 * 1000]}),
        d2.clone(),
        date(1_393_660_500_000),
    );
    check(
        bson!({"$subtract": ["$date", {"$literal": DateTime::from_millis(1_393_660_000_000)}]}),
        d2.clone(),
        Bson::Int64(800_000),
    );
    check(
        bson!({"$subtract": [i32::MIN, "$fee"]}),
        d2.clone(),
        Bson::Int64(-2_147_483_650),
    );
    check(
        bson!({"$subtract": [Bson::Int64(i64::MIN), "$fee"]}),
        d2.clone(),
        Bson::Double(-9_223_372_036_854_775_808.0 - 2.0),
    );
    check(bson!({"$subtract": [5.5, "$fee"]}), d2.clone(), bson!(3.5));
    check(
        bson!({"$subtract": [dec("5.5"), "$fee"]}),
        d2.clone(),
        dec("3.5"),
    );
    check(bson!({"$subtract": ["$missing", "x"]}), d2, Bson::Null);
}

#[test]
fn multiply_divide_mod() {
    let d = doc! {"price": 10, "quantity": 2, "hours": 80, "tasks": 7, "zero": 0};
    check(
        bson!({"$multiply": ["$price", "$quantity"]}),
        d.clone(),
        bson!(20),
    );
    check(bson!({"$multiply": []}), d.clone(), bson!(1));
    check(
        bson!({"$multiply": [i32::MAX, "$quantity"]}),
        d.clone(),
        Bson::Int64(4_294_967_294),
    );
    check(
        bson!({"$multiply": [Bson::Int64(i64::MAX), "$quantity"]}),
        d.clone(),
        Bson::Double(9_223_372_036_854_775_807.0 * 2.0),
    );
    check(bson!({"$multiply": ["$price", 0.5]}), d.clone(), bson!(5.0));
    check(
        bson!({"$multiply": ["$price", dec("0.50")]}),
        d.clone(),
        dec("5.00"),
    );
    check(
        bson!({"$multiply": ["$price", null, "x"]}),
        d.clone(),
        Bson::Null,
    );
    check(bson!({"$divide": ["$hours", 8]}), d.clone(), bson!(10.0));
    check(bson!({"$divide": [1, "$quantity"]}), d.clone(), bson!(0.5));
    check(
        bson!({"$divide": [dec("1"), "$quantity"]}),
        d.clone(),
        dec("0.5"),
    );
    check(
        bson!({"$divide": ["$price", dec("3")]}),
        d.clone(),
        dec("3.333333333333333333333333333333333"),
    );
    check(bson!({"$divide": ["$missing", 0]}), d.clone(), Bson::Null);
    check(bson!({"$mod": ["$hours", "$tasks"]}), d.clone(), bson!(3));
    check(bson!({"$mod": [-13, "$tasks"]}), d.clone(), bson!(-6));
    check(bson!({"$mod": ["$hours", 7.0]}), d.clone(), bson!(3));
    check(bson!({"$mod": ["$hours", 7.5]}), d.clone(), bson!(5.0));
    check(bson!({"$mod": [5.5, "$quantity"]}), d.clone(), bson!(1.5));
    check(
        bson!({"$mod": [Bson::Int64(81), "$tasks"]}),
        d.clone(),
        Bson::Int64(4),
    );
    check(
        bson!({"$mod": [Bson::Int64(i64::MIN), -1]}),
        d.clone(),
        Bson::Int64(0),
    );
    check(
        bson!({"$mod": [dec("10.5"), "$quantity"]}),
        d.clone(),
        dec("0.5"),
    );
    check(bson!({"$mod": [null, "$zero"]}), d, Bson::Null);
}

#[test]
fn single_numeric() {
    let temps = [(50, 80, 30), (40, 40, 0), (90, 70, 20), (60, 70, 10)];
    for (s, e, want) in temps {
        check(
            bson!({"$abs": {"$subtract": ["$startTemp", "$endTemp"]}}),
            doc! {"startTemp": s, "endTemp": e},
            bson!(want),
        );
    }
    let d = doc! {};
    check(bson!({"$abs": null}), d.clone(), Bson::Null);
    check(bson!({"$abs": "$missing"}), d.clone(), Bson::Null);
    check(
        bson!({"$abs": i32::MIN}),
        d.clone(),
        Bson::Int64(2_147_483_648),
    );
    check(bson!({"$abs": -2.5}), d.clone(), bson!(2.5));
    check(bson!({"$abs": dec("-2.50")}), d.clone(), dec("2.50"));
    for (v, c, f) in [
        (9.25, 10.0, 9.0),
        (8.73, 9.0, 8.0),
        (4.12, 5.0, 4.0),
        (-5.34, -5.0, -6.0),
    ] {
        check(bson!({"$ceil": "$value"}), doc! {"value": v}, bson!(c));
        check(bson!({"$floor": "$value"}), doc! {"value": v}, bson!(f));
    }
    check(bson!({"$ceil": 3}), d.clone(), bson!(3));
    check(bson!({"$ceil": Bson::Int64(3)}), d.clone(), Bson::Int64(3));
    check(bson!({"$ceil": dec("-2.1")}), d.clone(), dec("-2"));
    check(bson!({"$floor": dec("-2.1")}), d.clone(), dec("-3"));
    check(bson!({"$sqrt": 25}), d.clone(), bson!(5.0));
    check(bson!({"$sqrt": dec("2.25")}), d.clone(), dec("1.5"));
    check(
        bson!({"$sqrt": dec("2")}),
        d.clone(),
        dec("1.414213562373095048801688724209698"),
    );
    check_nan(bson!({"$sqrt": f64::NAN}), d.clone());
    // The manual's $sqrt example: distance between two points.
    let dist = bson!({"$sqrt": {"$add": [
        {"$pow": [{"$subtract": ["$p2.y", "$p1.y"]}, 2]},
        {"$pow": [{"$subtract": ["$p2.x", "$p1.x"]}, 2]},
    ]}});
    check(
        dist.clone(),
        doc! {"p1": {"x": 5, "y": 8}, "p2": {"x": 0, "y": 5}},
        bson!(5.830951894845301),
    );
    check(
        dist,
        doc! {"p1": {"x": -3, "y": 7}, "p2": {"x": 4, "y": -2}},
        bson!(11.40175425099138),
    );
    check(bson!({"$exp": 0}), d.clone(), bson!(1.0));
    check(bson!({"$exp": 2}), d.clone(), bson!(7.38905609893065));
    check(bson!({"$exp": -2}), d.clone(), bson!(0.1353352832366127));
    check(bson!({"$exp": dec("0")}), d.clone(), dec("1"));
    check(bson!({"$ln": 1}), d.clone(), bson!(0.0));
    check(bson!({"$ln": std::f64::consts::E}), d.clone(), bson!(1.0));
    check(
        bson!({"$ln": 10}),
        d.clone(),
        bson!(std::f64::consts::LN_10),
    );
    check(bson!({"$ln": dec("1")}), d.clone(), dec("0"));
    check(bson!({"$log": [100, 10]}), d.clone(), bson!(2.0));
    check(
        bson!({"$log": [100, std::f64::consts::E]}),
        d.clone(),
        bson!(4.605170185988092),
    );
    check(bson!({"$log": [dec("100"), 10]}), d.clone(), dec("2"));
    for (v, want) in [(1, 0.0), (10, 1.0), (100, 2.0), (1000, 3.0)] {
        check(bson!({"$log10": v}), d.clone(), bson!(want));
    }
    check(bson!({"$log10": dec("1000")}), d.clone(), dec("3"));
    check(bson!({"$log10": null}), d, Bson::Null);
}

#[test]
fn pow() {
    let d = doc! {};
    check(bson!({"$pow": [5, 0]}), d.clone(), bson!(1));
    check(bson!({"$pow": [5, 2]}), d.clone(), bson!(25));
    check(bson!({"$pow": [5, -2]}), d.clone(), bson!(0.04));
    check_nan(bson!({"$pow": [-5, 0.5]}), d.clone());
    check(bson!({"$pow": [2, 62]}), d.clone(), Bson::Int64(1 << 62));
    check(
        bson!({"$pow": [2, 63]}),
        d.clone(),
        bson!(9_223_372_036_854_775_808.0),
    );
    check(bson!({"$pow": [-2, 63]}), d.clone(), Bson::Int64(i64::MIN));
    check(
        bson!({"$pow": [Bson::Int64(2), 3]}),
        d.clone(),
        Bson::Int64(8),
    );
    check(bson!({"$pow": [-1, 5]}), d.clone(), bson!(-1));
    check(bson!({"$pow": [0, 0]}), d.clone(), bson!(1));
    check(bson!({"$pow": [2.0, 3]}), d.clone(), bson!(8.0));
    // Intel's bid128_pow shows 34 significant digits (jstests/aggregation/bugs/server18427.js).
    check(
        bson!({"$pow": [dec("1.5"), 2]}),
        d.clone(),
        dec("2.250000000000000000000000000000000"),
    );
    check(
        bson!({"$pow": [dec("10.0"), -2]}),
        d.clone(),
        dec("0.01000000000000000000000000000000000"),
    );
    check(
        bson!({"$pow": [0.5, dec("-1")]}),
        d.clone(),
        dec("2.000000000000000000000000000000000"),
    );
    check(
        bson!({"$pow": [5, dec("-112")]}),
        d.clone(),
        dec("5192296858534827628530496329220096E-112"),
    );
    check(
        bson!({"$pow": [dec("10.0"), 2]}),
        d.clone(),
        dec("100.0000000000000000000000000000000"),
    );
    check(bson!({"$pow": [null, 2]}), d, Bson::Null);
}

#[test]
fn round_and_trunc() {
    for (v, r1, t1, rm1) in [
        (19.25, 19.2, 19.2, 20.0),
        (28.73, 28.7, 28.7, 30.0),
        (34.32, 34.3, 34.3, 30.0),
        (-45.39, -45.4, -45.3, -50.0),
    ] {
        let d = doc! {"value": v};
        check(bson!({"$round": ["$value", 1]}), d.clone(), bson!(r1));
        check(bson!({"$trunc": ["$value", 1]}), d.clone(), bson!(t1));
        check(bson!({"$round": ["$value", -1]}), d, bson!(rm1));
    }
    let d = doc! {};
    check(bson!({"$round": [10.5, 0]}), d.clone(), bson!(10.0));
    check(bson!({"$round": [11.5, 0]}), d.clone(), bson!(12.0));
    check(bson!({"$round": [12.5, 0]}), d.clone(), bson!(12.0));
    check(bson!({"$round": [-12.5, 0]}), d.clone(), bson!(-12.0));
    check(bson!({"$round": 2.5}), d.clone(), bson!(2.0));
    check(bson!({"$round": [1234.5678, 2]}), d.clone(), bson!(1234.57));
    check(bson!({"$round": [1234, -2]}), d.clone(), bson!(1200));
    check(bson!({"$round": [1250, -2]}), d.clone(), bson!(1200));
    check(
        bson!({"$round": [Bson::Int64(1234), -2]}),
        d.clone(),
        Bson::Int64(1200),
    );
    check(bson!({"$round": [1234, 2]}), d.clone(), bson!(1234));
    check(
        bson!({"$round": [i32::MAX, -1]}),
        d.clone(),
        Bson::Int64(2_147_483_650),
    );
    check(
        bson!({"$round": [dec("1.2345"), 2]}),
        d.clone(),
        dec("1.23"),
    );
    check(
        bson!({"$trunc": [dec("-1.2399"), 2]}),
        d.clone(),
        dec("-1.23"),
    );
    check(bson!({"$trunc": 5.9}), d.clone(), bson!(5.0));
    check(
        bson!({"$round": [dec("Infinity"), 2]}),
        d.clone(),
        dec("Infinity"),
    );
    check(bson!({"$round": [null, 2]}), d.clone(), Bson::Null);
    check(bson!({"$round": [1.5, null]}), d, Bson::Null);
}

#[test]
fn logic_and_conditionals() {
    let d = doc! {"qty": 250, "zero": 0, "s": "", "arr": [], "n": null};
    check(
        bson!({"$and": [{"$gt": ["$qty", 100]}, {"$lt": ["$qty", 300]}]}),
        d.clone(),
        bson!(true),
    );
    check(bson!({"$and": []}), d.clone(), bson!(true));
    check(bson!({"$or": []}), d.clone(), bson!(false));
    check(bson!({"$and": [1, "$s", "$arr"]}), d.clone(), bson!(true));
    check(bson!({"$and": ["$qty", "$zero"]}), d.clone(), bson!(false));
    check(
        bson!({"$or": ["$zero", "$n", "$missing", f64::NAN]}),
        d.clone(),
        bson!(true),
    );
    check(
        bson!({"$or": ["$zero", "$n", "$missing"]}),
        d.clone(),
        bson!(false),
    );
    check(bson!({"$not": ["$qty"]}), d.clone(), bson!(false));
    check(bson!({"$not": "$missing"}), d.clone(), bson!(true));
    check(bson!({"$not": [dec("0")]}), d.clone(), bson!(true));
    check(bson!({"$and": ["$qty", true]}), d.clone(), bson!(true));
    // $cond, both forms.
    let cond = bson!({"$cond": {"if": {"$gte": ["$qty", 250]}, "then": 30, "else": 20}});
    check(cond, d.clone(), bson!(30));
    check(
        bson!({"$cond": [{"$lt": ["$qty", 250]}, 30, 20]}),
        d.clone(),
        bson!(20),
    );
    check_missing(bson!({"$cond": ["$missing", 1, "$missing"]}), d.clone());
    check_missing(bson!({"$cond": [false, 1, "$missing"]}), d.clone());
    // $ifNull, including the n-ary form.
    check(
        bson!({"$ifNull": ["$n", "Unspecified"]}),
        d.clone(),
        bson!("Unspecified"),
    );
    check(
        bson!({"$ifNull": ["$missing", "$n", "$qty", 1]}),
        d.clone(),
        bson!(250),
    );
    check(bson!({"$ifNull": ["$zero", 1]}), d.clone(), bson!(0));
    check_missing(bson!({"$ifNull": ["$n", "$missing"]}), d.clone());
    // $switch.
    let grade = |avg: i32| {
        eval(
            bson!({"$switch": {
                "branches": [
                    {"case": {"$gte": ["$avg", 90]}, "then": "Doing great!"},
                    {"case": {"$and": [{"$gte": ["$avg", 80]}, {"$lt": ["$avg", 90]}]}, "then": "Doing pretty well."},
                    {"case": {"$lt": ["$avg", 80]}, "then": "Needs improvement."},
                ],
                "default": "No scores found."
            }}),
            doc! {"avg": avg},
        )
        .expect("evaluates")
    };
    assert_eq!(grade(93), Some(bson!("Doing great!")));
    assert_eq!(grade(84), Some(bson!("Doing pretty well.")));
    assert_eq!(grade(52), Some(bson!("Needs improvement.")));
    check(
        bson!({"$switch": {"branches": [{"case": "$missing", "then": 1}], "default": "$qty"}}),
        d.clone(),
        bson!(250),
    );
    // $let and rebinding CURRENT.
    check(
        bson!({"$let": {"vars": {"total": {"$add": ["$qty", 10]}, "disc": 0.5},
                        "in": {"$multiply": ["$$total", "$$disc"]}}}),
        d.clone(),
        bson!(130.0),
    );
    check(
        bson!({"$let": {"vars": {"CURRENT": "$sub"}, "in": "$k"}}),
        doc! {"sub": {"k": 7}, "k": 1},
        bson!(7),
    );
    check(
        bson!({"$let": {"vars": {"o": {"a": [{"b": 1}, {"b": 2}]}}, "in": "$$o.a.b"}}),
        d,
        bson!([1, 2]),
    );
}

#[test]
fn arrays() {
    let d = doc! {"in_stock": ["apples", "oranges", "bananas"], "favorites": ["chocolate", "cake", "butter", "apples"], "colors": [], "n": null};
    check(
        bson!({"$in": ["bananas", "$in_stock"]}),
        d.clone(),
        bson!(true),
    );
    check(
        bson!({"$in": ["grapes", "$in_stock"]}),
        d.clone(),
        bson!(false),
    );
    check(bson!({"$in": [null, [null]]}), d.clone(), bson!(true));
    check(
        bson!({"$in": ["$missing", [null]]}),
        d.clone(),
        bson!(false),
    );
    check(bson!({"$in": [1, [1.0, 2]]}), d.clone(), bson!(true));
    check(bson!({"$size": "$in_stock"}), d.clone(), bson!(3));
    check(bson!({"$size": "$colors"}), d.clone(), bson!(0));
    check(
        bson!({"$arrayElemAt": ["$favorites", 0]}),
        d.clone(),
        bson!("chocolate"),
    );
    check(
        bson!({"$arrayElemAt": ["$favorites", -1]}),
        d.clone(),
        bson!("apples"),
    );
    check(
        bson!({"$arrayElemAt": ["$favorites", 1.0]}),
        d.clone(),
        bson!("cake"),
    );
    check_missing(bson!({"$arrayElemAt": ["$favorites", 15]}), d.clone());
    check_missing(bson!({"$arrayElemAt": ["$favorites", -15]}), d.clone());
    check(bson!({"$arrayElemAt": ["$n", 0]}), d.clone(), Bson::Null);
    check(
        bson!({"$first": "$favorites"}),
        d.clone(),
        bson!("chocolate"),
    );
    check(bson!({"$last": "$favorites"}), d.clone(), bson!("apples"));
    check_missing(bson!({"$first": "$colors"}), d.clone());
    check(
        bson!({"$concatArrays": ["$colors", [1], [[2]]]}),
        d.clone(),
        bson!([1, [2]]),
    );
    check(
        bson!({"$concatArrays": ["$colors", "$missing"]}),
        d.clone(),
        Bson::Null,
    );
    check(
        bson!({"$reverseArray": [[1, 2, 3]]}),
        d.clone(),
        bson!([3, 2, 1]),
    );
    check(bson!({"$isArray": ["$colors"]}), d.clone(), bson!(true));
    check(bson!({"$isArray": "$n"}), d.clone(), bson!(false));
    check(
        bson!({"$slice": ["$favorites", 2]}),
        d.clone(),
        bson!(["chocolate", "cake"]),
    );
    check(
        bson!({"$slice": ["$favorites", -2]}),
        d.clone(),
        bson!(["butter", "apples"]),
    );
    check(
        bson!({"$slice": ["$favorites", 1, 2]}),
        d.clone(),
        bson!(["cake", "butter"]),
    );
    check(
        bson!({"$slice": ["$favorites", -3, 1]}),
        d.clone(),
        bson!(["cake"]),
    );
    check(
        bson!({"$indexOfArray": ["$in_stock", "bananas"]}),
        d.clone(),
        bson!(2),
    );
    check(
        bson!({"$indexOfArray": ["$in_stock", "bananas", 0, 2]}),
        d.clone(),
        bson!(-1),
    );
    check(
        bson!({"$range": [0, 10, 3]}),
        d.clone(),
        bson!([0, 3, 6, 9]),
    );
    check(bson!({"$range": [5, 0, -2]}), d.clone(), bson!([5, 3, 1]));
    check(
        bson!({"$allElementsTrue": [[1, "a", []]]}),
        d.clone(),
        bson!(true),
    );
    check(
        bson!({"$anyElementTrue": [[0, null, false]]}),
        d.clone(),
        bson!(false),
    );
    check(
        bson!({"$map": {"input": [1, 2, 3], "as": "v", "in": {"$multiply": ["$$v", 2]}}}),
        d.clone(),
        bson!([2, 4, 6]),
    );
    check(
        bson!({"$map": {"input": "$in_stock", "in": {"$strLenCP": "$$this"}}}),
        d.clone(),
        bson!([6, 7, 7]),
    );
    check(
        bson!({"$filter": {"input": [1, 5, 2, 8], "as": "x", "cond": {"$gt": ["$$x", 1]}, "limit": 2}}),
        d.clone(),
        bson!([5, 2]),
    );
    check(
        bson!({"$reduce": {"input": [1, 2, 3, 4], "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}),
        d.clone(),
        bson!(10),
    );
    check(
        bson!({"$reduce": {"input": "$missing", "initialValue": 0, "in": 1}}),
        d,
        Bson::Null,
    );
}

#[test]
fn strings() {
    let d = doc! {"item": "ABC1", "description": "product 1", "quarter": "13Q1", "name": "éclair", "n": null};
    check(
        bson!({"$concat": ["$item", " - ", "$description"]}),
        d.clone(),
        bson!("ABC1 - product 1"),
    );
    check(bson!({"$concat": ["$item", "$n"]}), d.clone(), Bson::Null);
    check(
        bson!({"$concat": ["$item", "$missing"]}),
        d.clone(),
        Bson::Null,
    );
    check(bson!({"$concat": []}), d.clone(), bson!(""));
    check(bson!({"$toLower": "$item"}), d.clone(), bson!("abc1"));
    check(
        bson!({"$toUpper": "$description"}),
        d.clone(),
        bson!("PRODUCT 1"),
    );
    check(bson!({"$toUpper": "$n"}), d.clone(), bson!(""));
    check(bson!({"$toUpper": "$name"}), d.clone(), bson!("éCLAIR"));
    check(bson!({"$toLower": 1.5}), d.clone(), bson!("1.5"));
    check(bson!({"$toLower": Bson::Int64(12)}), d.clone(), bson!("12"));
    check(bson!({"$strLenCP": "$name"}), d.clone(), bson!(6));
    check(bson!({"$strLenBytes": "$name"}), d.clone(), bson!(7));
    check(bson!({"$strLenCP": "寿司"}), d.clone(), bson!(2));
    check(
        bson!({"$substrCP": ["$quarter", 0, 2]}),
        d.clone(),
        bson!("13"),
    );
    check(
        bson!({"$substrCP": ["$name", 0, 3]}),
        d.clone(),
        bson!("écl"),
    );
    check(bson!({"$substrCP": ["$name", 10, 3]}), d.clone(), bson!(""));
    check(
        bson!({"$substrBytes": ["$quarter", 2, -1]}),
        d.clone(),
        bson!("Q1"),
    );
    check(
        bson!({"$substr": ["$quarter", 0, 2]}),
        d.clone(),
        bson!("13"),
    );
    check(
        bson!({"$strcasecmp": ["$quarter", "13q4"]}),
        d.clone(),
        bson!(-1),
    );
    check(
        bson!({"$strcasecmp": ["$quarter", "13q1"]}),
        d.clone(),
        bson!(0),
    );
    check(
        bson!({"$split": ["June-15-2013", "-"]}),
        d.clone(),
        bson!(["June", "15", "2013"]),
    );
    check(bson!({"$split": ["$n", "-"]}), d, Bson::Null);
}

#[test]
fn types_and_conversions() {
    let d = doc! {"i": 1, "l": Bson::Int64(5000), "f": 2.5, "s": "100", "b": true, "n": null, "a": [], "o": {}};
    for (path, name) in [
        ("$i", "int"),
        ("$l", "long"),
        ("$f", "double"),
        ("$s", "string"),
        ("$b", "bool"),
        ("$n", "null"),
        ("$a", "array"),
        ("$o", "object"),
        ("$missing", "missing"),
    ] {
        check(bson!({"$type": path}), d.clone(), bson!(name));
    }
    check(bson!({"$type": dec("1")}), d.clone(), bson!("decimal"));
    check(bson!({"$isNumber": "$f"}), d.clone(), bson!(true));
    check(bson!({"$isNumber": "$s"}), d.clone(), bson!(false));
    check(bson!({"$toInt": 5.5}), d.clone(), bson!(5));
    check(bson!({"$toInt": "$s"}), d.clone(), bson!(100));
    check(bson!({"$toInt": true}), d.clone(), bson!(1));
    check(bson!({"$toInt": "$l"}), d.clone(), bson!(5000));
    check(bson!({"$toInt": dec("-5.9")}), d.clone(), bson!(-5));
    check(bson!({"$toInt": "$n"}), d.clone(), Bson::Null);
    check(bson!({"$toInt": "$missing"}), d.clone(), Bson::Null);
    check(bson!({"$toLong": "$i"}), d.clone(), Bson::Int64(1));
    check(bson!({"$toLong": "$s"}), d.clone(), Bson::Int64(100));
    check(
        bson!({"$toLong": {"$literal": DateTime::from_millis(1234)}}),
        d.clone(),
        Bson::Int64(1234),
    );
    check(bson!({"$toDouble": "$s"}), d.clone(), bson!(100.0));
    check(bson!({"$toDouble": "$b"}), d.clone(), bson!(1.0));
    check(bson!({"$toDouble": dec("2.5")}), d.clone(), bson!(2.5));
    check(
        bson!({"$toDecimal": "$f"}),
        d.clone(),
        dec("2.50000000000000"),
    );
    check(bson!({"$toDecimal": "$b"}), d.clone(), dec("1"));
    check(bson!({"$toDecimal": "$l"}), d.clone(), dec("5000"));
    check(bson!({"$toDecimal": "1.5E3"}), d.clone(), dec("1.5E+3"));
    check(bson!({"$toString": "$f"}), d.clone(), bson!("2.5"));
    check(bson!({"$toString": "$i"}), d.clone(), bson!("1"));
    check(bson!({"$toString": "$b"}), d.clone(), bson!("true"));
    check(bson!({"$toString": dec("2.50")}), d.clone(), bson!("2.50"));
    check(
        bson!({"$toString": {"$literal": DateTime::from_millis(0)}}),
        d.clone(),
        bson!("1970-01-01T00:00:00.000Z"),
    );
    check(bson!({"$toBool": "false"}), d.clone(), bson!(true));
    check(bson!({"$toBool": 0}), d.clone(), bson!(false));
    check(bson!({"$toBool": "$a"}), d.clone(), bson!(true));
    check(
        bson!({"$convert": {"input": "abc", "to": "int", "onError": "bad"}}),
        d.clone(),
        bson!("bad"),
    );
    check(
        bson!({"$convert": {"input": "$missing", "to": "int", "onNull": -1}}),
        d.clone(),
        bson!(-1),
    );
    check(
        bson!({"$convert": {"input": "$i", "to": 18}}),
        d.clone(),
        Bson::Int64(1),
    );
    check(
        bson!({"$convert": {"input": "$i", "to": null}}),
        d,
        Bson::Null,
    );
}
