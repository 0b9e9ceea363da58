//! Property tests: parsing and evaluating arbitrary aggregation expressions against arbitrary
//! documents never panics, evaluation is deterministic, and `$expr` filters agree with
//! direct evaluation.

use bson::{Bson, DateTime, Decimal128, Document, RawDocument, RawDocumentBuf, doc};
use cairn_query::expr::{ExprExtensions, Expression, ParseContext, Variables};
use cairn_query::filter::Filter;
use proptest::prelude::*;

const OPS: &[&str] = &[
    "$add",
    "$subtract",
    "$multiply",
    "$divide",
    "$mod",
    "$abs",
    "$ceil",
    "$floor",
    "$round",
    "$trunc",
    "$sqrt",
    "$pow",
    "$exp",
    "$ln",
    "$log",
    "$log10",
    "$and",
    "$or",
    "$not",
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$cmp",
    "$cond",
    "$ifNull",
    "$in",
    "$size",
    "$arrayElemAt",
    "$first",
    "$last",
    "$concatArrays",
    "$reverseArray",
    "$isArray",
    "$slice",
    "$indexOfArray",
    "$range",
    "$allElementsTrue",
    "$anyElementTrue",
    "$concat",
    "$toLower",
    "$toUpper",
    "$strLenCP",
    "$strLenBytes",
    "$substrCP",
    "$substrBytes",
    "$strcasecmp",
    "$split",
    "$type",
    "$isNumber",
    "$toString",
    "$toInt",
    "$toLong",
    "$toDouble",
    "$toDecimal",
    "$toBool",
    "$literal",
    "$switch",
    "$let",
    "$map",
    "$filter",
    "$reduce",
    "$convert",
    "$foo",
    "$dateAdd",
    "$dateSubtract",
    "$dateDiff",
    "$dateTrunc",
    "$dateToString",
    "$dateFromString",
    "$dateToParts",
    "$dateFromParts",
    "$year",
    "$isoWeek",
    "$isoWeekYear",
    "$week",
    "$millisecond",
    "$toDate",
    "$setEquals",
    "$setIntersection",
    "$setUnion",
    "$setDifference",
    "$setIsSubset",
    "$regexFind",
    "$regexFindAll",
    "$regexMatch",
    "$trim",
    "$ltrim",
    "$replaceOne",
    "$replaceAll",
    "$indexOfBytes",
    "$indexOfCP",
    "$getField",
    "$setField",
    "$unsetField",
    "$sortArray",
    "$zip",
    "$objectToArray",
    "$arrayToObject",
    "$mergeObjects",
    "$bitAnd",
    "$bitOr",
    "$bitXor",
    "$bitNot",
    "$bsonSize",
    "$binarySize",
    "$tsSecond",
    "$tsIncrement",
    "$toHashedIndexKey",
    "$sin",
    "$acos",
    "$atanh",
    "$atan2",
    "$degreesToRadians",
    "$toObjectId",
    "$rand",
    "$meta",
    "$function",
];

const KEYS: &[&str] = &[
    "if",
    "then",
    "else",
    "branches",
    "default",
    "case",
    "vars",
    "in",
    "input",
    "as",
    "cond",
    "initialValue",
    "to",
    "onError",
    "onNull",
    "limit",
    "x",
    "this",
    "date",
    "timezone",
    "format",
    "unit",
    "amount",
    "startDate",
    "endDate",
    "binSize",
    "startOfWeek",
    "dateString",
    "year",
    "month",
    "isoWeekYear",
    "iso8601",
    "regex",
    "options",
    "chars",
    "find",
    "replacement",
    "field",
    "value",
    "sortBy",
    "inputs",
    "useLongestLength",
    "defaults",
];

fn decimal() -> impl Strategy<Value = Bson> {
    prop_oneof![
        any::<[u8; 16]>().prop_map(|b| Bson::Decimal128(Decimal128::from_bytes(b))),
        (any::<i64>(), -40i32..40).prop_map(|(c, e)| Bson::Decimal128(
            format!("{c}E{e}")
                .parse()
                .unwrap_or_else(|_| "0".parse().expect("zero"))
        )),
    ]
}

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        (-3i32..300).prop_map(Bson::Int32),
        any::<i64>().prop_map(Bson::Int64),
        any::<f64>().prop_map(Bson::Double),
        prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(2.5)
        ]
        .prop_map(Bson::Double),
        decimal(),
        "[a-zé1 ]{0,5}".prop_map(Bson::String),
        prop_oneof![
            Just("$a"),
            Just("$a.b"),
            Just("$b"),
            Just("$x.y.z"),
            Just("$$ROOT"),
            Just("$$CURRENT.a"),
            Just("$$REMOVE"),
            Just("$$NOW"),
            Just("$$this"),
            Just("$$value"),
            Just("$$v"),
            Just("$"),
            Just("$$"),
            Just("$a..b"),
            Just("int"),
            Just("string"),
            Just("missing"),
            Just("America/New_York"),
            Just("+05:30"),
            Just("day"),
            Just("month"),
            Just("week"),
            Just("%Y-%m-%dT%H:%M:%S.%L%z"),
            Just("2017-02-08T12:10:40.787Z"),
            Just("July 4, 2017 10:00pm"),
            Just("(a)|b*"),
        ]
        .prop_map(|s| Bson::String(s.to_string())),
        Just(Bson::Null),
        Just(Bson::Undefined),
        any::<bool>().prop_map(Bson::Boolean),
        any::<i64>().prop_map(|m| Bson::DateTime(DateTime::from_millis(m))),
        Just(Bson::MinKey),
        (any::<u32>(), any::<u32>())
            .prop_map(|(time, increment)| Bson::Timestamp(bson::Timestamp { time, increment })),
    ]
}

fn expr() -> impl Strategy<Value = Bson> {
    scalar().prop_recursive(5, 64, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
            (
                prop::sample::select(OPS),
                prop::collection::vec(inner.clone(), 0..4)
            )
                .prop_map(|(op, args)| {
                    let mut d = Document::new();
                    d.insert(op, Bson::Array(args));
                    Bson::Document(d)
                }),
            (prop::sample::select(OPS), inner.clone()).prop_map(|(op, arg)| {
                let mut d = Document::new();
                d.insert(op, arg);
                Bson::Document(d)
            }),
            (
                prop::sample::select(OPS),
                prop::collection::vec((prop::sample::select(KEYS), inner.clone()), 0..4)
            )
                .prop_map(|(op, kvs)| {
                    let mut args = Document::new();
                    for (k, v) in kvs {
                        args.insert(k, v);
                    }
                    let mut d = Document::new();
                    d.insert(op, Bson::Document(args));
                    Bson::Document(d)
                }),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..3).prop_map(|kvs| {
                let mut d = Document::new();
                for (k, v) in kvs {
                    d.insert(k, v);
                }
                Bson::Document(d)
            }),
        ]
    })
}

fn document() -> impl Strategy<Value = Document> {
    let value = scalar().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
            prop::collection::vec((prop::sample::select(&["a", "b", "y"][..]), inner), 0..3)
                .prop_map(|kvs| {
                    let mut d = Document::new();
                    for (k, v) in kvs {
                        d.insert(k, v);
                    }
                    Bson::Document(d)
                }),
        ]
    });
    prop::collection::vec((prop::sample::select(&["a", "b", "x"][..]), value), 0..4).prop_map(
        |kvs| {
            let mut d = Document::new();
            for (k, v) in kvs {
                d.insert(k, v);
            }
            d
        },
    )
}

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("encodable")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 768, ..ProptestConfig::default() })]

    #[test]
    fn parse_and_evaluate_never_panic(e in expr(), docs in prop::collection::vec(document(), 1..4)) {
        // `$rand` is the one operator whose value changes between evaluations.
        let deterministic = !format!("{e}").contains("$rand");
        let holder = raw(&doc! {"e": e});
        let v = holder.get("e").expect("readable").expect("present");
        let vars = Variables::with_now(DateTime::from_millis(0));
        if let Ok(parsed) = Expression::parse(v, &ParseContext::new()) {
            for d in &docs {
                let d = raw(d);
                let first = parsed.evaluate(&d, &vars);
                let second = parsed.evaluate(&d, &vars);
                if deterministic {
                    prop_assert_eq!(format!("{first:?}"), format!("{second:?}"));
                }
                // $expr agrees with direct evaluation.
                let ext = ExprExtensions::with_variables(vars.clone());
                let pred = ext.parse_predicate(v).expect("parsed once already");
                let truthy = parsed.evaluate_truthy(&d, &vars);
                if deterministic {
                    prop_assert_eq!(format!("{:?}", pred.try_matches(&d)), format!("{truthy:?}"));
                }
            }
        }
        let mut filter = doc! {};
        filter.insert("$expr", Bson::try_from(bson::RawBson::from(v)).unwrap_or(Bson::Null));
        let ext = ExprExtensions::new();
        if let Ok(f) = Filter::parse_with(&raw(&filter), &ext) {
            for d in &docs {
                let _ = f.matches(&raw(d));
                let _ = f.try_matches(&raw(d));
            }
        }
    }

    #[test]
    fn malformed_documents_never_panic(e in expr(), bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let holder = raw(&doc! {"e": e});
        let v = holder.get("e").expect("readable").expect("present");
        if let Ok(parsed) = Expression::parse(v, &ParseContext::new()) {
            let mut buf = (bytes.len() as i32 + 5).to_le_bytes().to_vec();
            buf.extend_from_slice(&bytes);
            buf.push(0);
            if let Ok(d) = RawDocument::from_bytes(&buf) {
                let _ = parsed.evaluate(d, &Variables::new());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Date strings, formats, zones, units and dates of any value never panic.
    #[test]
    fn date_operators_never_panic(
        s in "[0-9A-Za-z :.,/+%TZ-]{0,24}",
        f in "(%[bBdGHjLmMSwuUVYzZ%]|[-/: T]){0,8}",
        tz in prop::sample::select(&["UTC", "America/New_York", "Europe/Berlin", "+05:30", "-11", "Asia/Kathmandu", "Bad/Zone"][..]),
        unit in prop::sample::select(&["year", "quarter", "month", "week", "day", "hour", "minute", "second", "millisecond", "x"][..]),
        ms in any::<i64>(),
        amount in any::<i64>(),
    ) {
        let date = Bson::DateTime(DateTime::from_millis(ms));
        let exprs = [
            doc! {"$dateFromString": {"dateString": &s, "timezone": tz, "onError": "e"}},
            doc! {"$dateFromString": {"dateString": &s, "format": &f, "onError": "e"}},
            doc! {"$dateToString": {"date": date.clone(), "format": &f, "timezone": tz}},
            doc! {"$dateToParts": {"date": date.clone(), "timezone": tz, "iso8601": true}},
            doc! {"$dateAdd": {"startDate": date.clone(), "unit": unit, "amount": amount, "timezone": tz}},
            doc! {"$dateDiff": {"startDate": date.clone(), "endDate": Bson::DateTime(DateTime::from_millis(amount)), "unit": unit, "timezone": tz}},
            doc! {"$dateTrunc": {"date": date.clone(), "unit": unit, "binSize": amount, "timezone": tz}},
            doc! {"$dateFromParts": {"year": (amount % 10_000).abs(), "month": ms % 40_000, "day": amount % 40_000, "second": ms, "millisecond": amount, "timezone": tz}},
            doc! {"$isoWeekYear": {"date": date.clone(), "timezone": tz}},
        ];
        let vars = Variables::with_now(DateTime::from_millis(0));
        for e in exprs {
            let holder = raw(&doc! {"e": e});
            let v = holder.get("e").expect("readable").expect("present");
            if let Ok(parsed) = Expression::parse(v, &ParseContext::new()) {
                let _ = parsed.evaluate(&raw(&doc! {}), &vars);
            }
        }
    }
}
