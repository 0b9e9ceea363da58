//! Property tests: parsing never panics on any filter document, matching never panics on any
//! document (malformed BSON included), and a few algebraic laws hold.

mod common;

use bson::{Bson, Document, RawDocument};
use cairn_query::filter::Filter;
use common::*;
use proptest::prelude::*;

const KEYS: &[&str] = &[
    "a",
    "b",
    "a.b",
    "a.0",
    "a.0.b",
    "0",
    "",
    "a..b",
    "_id",
    "$and",
    "$or",
    "$nor",
    "$not",
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$all",
    "$elemMatch",
    "$size",
    "$exists",
    "$type",
    "$mod",
    "$regex",
    "$options",
    "$bitsAllSet",
    "$bitsAnyClear",
    "$comment",
    "$alwaysTrue",
    "$where",
    "$expr",
    "$ref",
    "$id",
    "$near",
    "$foo",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(KEYS).prop_map(str::to_string),
        1 => "[a-c$.0-9]{0,4}",
    ]
}

fn leaf() -> impl Strategy<Value = Bson> {
    prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        (-3i32..70).prop_map(Bson::Int32),
        any::<i64>().prop_map(Bson::Int64),
        any::<f64>().prop_map(Bson::Double),
        prop_oneof![
            Just(f64::NAN),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(1.5),
            Just(9.3e18)
        ]
        .prop_map(Bson::Double),
        prop_oneof![
            Just("1"),
            Just("-0.00"),
            Just("NaN"),
            Just("-Inf"),
            Just("1E+6000"),
            Just("4.5")
        ]
        .prop_map(|s| Bson::Decimal128(s.parse().unwrap())),
        "[a-z^$.*()\\[\\]\\\\?+{}0-9]{0,6}".prop_map(Bson::String),
        ("[a-z^$.*()\\[\\]?+{}0-9]{0,5}", "[imsxug]{0,2}").prop_map(|(p, o)| re(&p, &o)),
        proptest::collection::vec(any::<u8>(), 0..10).prop_map(|b| bin(0, &b)),
        any::<bool>().prop_map(Bson::Boolean),
        Just(Bson::Null),
        Just(Bson::Undefined),
        Just(Bson::MinKey),
        Just(Bson::MaxKey),
        any::<i64>().prop_map(dt),
        (any::<u32>(), any::<u32>()).prop_map(|(t, i)| ts(t, i)),
        Just(oid([7; 12])),
        Just(Bson::Symbol("x".into())),
        Just(Bson::JavaScriptCode("1".into())),
    ]
}

fn value() -> impl Strategy<Value = Bson> {
    leaf().prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Bson::Array),
            proptest::collection::vec((key(), inner), 0..5).prop_map(|kvs| {
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
    proptest::collection::vec((key(), value()), 0..5).prop_map(|kvs| {
        let mut d = Document::new();
        for (k, v) in kvs {
            d.insert(k, v);
        }
        d
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn parse_and_match_never_panic(filter in document(), docs in proptest::collection::vec(document(), 1..4)) {
        let raw_filter = raw_doc(&filter);
        if let Ok(f) = Filter::parse(&raw_filter) {
            for d in &docs {
                let r = raw_doc(d);
                let m = f.matches(&r);
                let details = f.match_details(&r);
                prop_assert_eq!(m, details.is_some());
                let _ = f.id_equality();
                let _ = f.equality_fields();
                let _ = f.expr().matches_value(None);
                for (_, v) in r.iter().flatten() {
                    let _ = f.expr().matches_value(Some(v));
                }
            }
        }
    }

    #[test]
    fn negations_are_complements(v in value(), bound in leaf()) {
        let doc = raw_doc(&bson::doc! {"a": v});
        for op in ["$eq", "$gt", "$lte", "$in", "$exists", "$type", "$size", "$regex"] {
            let operand = match op {
                "$in" => Bson::Array(vec![bound.clone()]),
                _ => bound.clone(),
            };
            let pos = raw_doc(&bson::doc! {"a": {op: operand.clone()}});
            let neg = raw_doc(&bson::doc! {"a": {"$not": {op: operand.clone()}}});
            if let (Ok(p), Ok(n)) = (Filter::parse(&pos), Filter::parse(&neg)) {
                prop_assert_ne!(p.matches(&doc), n.matches(&doc), "{} {:?}", op, operand);
            }
            let nor = raw_doc(&bson::doc! {"$nor": [{"a": {op: operand.clone()}}]});
            if let (Ok(p), Ok(n)) = (Filter::parse(&pos), Filter::parse(&nor)) {
                prop_assert_ne!(p.matches(&doc), n.matches(&doc));
            }
        }
    }

    #[test]
    fn equality_agrees_with_in(v in value(), x in leaf()) {
        let doc = raw_doc(&bson::doc! {"a": v});
        let eq = Filter::parse(&raw_doc(&bson::doc! {"a": {"$eq": x.clone()}}));
        let inn = Filter::parse(&raw_doc(&bson::doc! {"a": {"$in": [x.clone()]}}));
        if let (Ok(eq), Ok(inn)) = (eq, inn)
            && !matches!(x, Bson::RegularExpression(_))
        {
            prop_assert_eq!(eq.matches(&doc), inn.matches(&doc));
        }
    }

    #[test]
    fn malformed_bson_never_panics(body in proptest::collection::vec(any::<u8>(), 0..64), filter in document()) {
        let mut bytes = Vec::with_capacity(body.len() + 5);
        bytes.extend_from_slice(&((body.len() as i32 + 5).to_le_bytes()));
        bytes.extend_from_slice(&body);
        bytes.push(0);
        if let Ok(doc) = RawDocument::from_bytes(&bytes) {
            let _ = Filter::parse(doc).map(|f| f.matches(doc));
            if let Ok(f) = Filter::parse(&raw_doc(&filter)) {
                let _ = f.matches(doc);
                let _ = f.match_details(doc);
            }
        }
    }
}
