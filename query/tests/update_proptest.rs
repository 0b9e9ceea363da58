//! Property tests: parsing and applying updates never panic, whatever the document, the
//! update or the array filters, and a successful result is valid BSON that keeps `_id`.

#[path = "update_support.rs"]
mod support;

use bson::{Bson, Document, RawBsonRef, RawDocumentBuf};
use cairn_query::filter::{Filter, MatchDetails};
use cairn_query::update::Update;
use proptest::prelude::*;
use support::now;

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        any::<i64>().prop_map(Bson::Int64),
        prop_oneof![
            Just(0.5),
            Just(-0.0),
            Just(f64::NAN),
            Just(1e300),
            any::<f64>()
        ]
        .prop_map(Bson::Double),
        prop_oneof![
            Just("1.5"),
            Just("-0"),
            Just("NaN"),
            Just("1E+6144"),
            Just("9999999999999999999999999999999999")
        ]
        .prop_map(|s| Bson::Decimal128(s.parse().expect("decimal"))),
        "[a-c$.]{0,3}".prop_map(Bson::String),
        Just(Bson::Null),
        any::<bool>().prop_map(Bson::Boolean),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("_id".to_string()),
        Just("0".to_string()),
        Just("1".to_string()),
        Just("$each".to_string()),
        Just("$gt".to_string()),
        Just("$x".to_string()),
        "[a-c0-2$]{1,2}",
    ]
}

fn value() -> impl Strategy<Value = Bson> {
    scalar().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
            prop::collection::vec((key(), inner), 0..4).prop_map(|kv| {
                let mut d = Document::new();
                for (k, v) in kv {
                    d.insert(k, v);
                }
                Bson::Document(d)
            }),
        ]
    })
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("a"),
            Just("b"),
            Just("0"),
            Just("1"),
            Just("3"),
            Just("$"),
            Just("$[]"),
            Just("$[x]"),
            Just("$[y]"),
            Just("_id"),
            Just(""),
            Just("$x"),
        ],
        1..4,
    )
    .prop_map(|parts| parts.join("."))
}

fn operator() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("$set"),
        Just("$unset"),
        Just("$inc"),
        Just("$mul"),
        Just("$min"),
        Just("$max"),
        Just("$rename"),
        Just("$currentDate"),
        Just("$setOnInsert"),
        Just("$push"),
        Just("$addToSet"),
        Just("$pop"),
        Just("$pull"),
        Just("$pullAll"),
        Just("$bit"),
        Just("$foo"),
        Just("a"),
    ]
    .prop_map(str::to_string)
}

fn operand() -> impl Strategy<Value = Bson> {
    prop_oneof![
        value(),
        path().prop_map(Bson::String),
        Just(Bson::Document(
            bson::doc! {"$each": [1, 2], "$sort": 1, "$slice": -1, "$position": 1}
        )),
        Just(Bson::Document(
            bson::doc! {"$each": [{"a": 1}], "$sort": {"a": -1}}
        )),
        Just(Bson::Document(bson::doc! {"and": 5, "or": 2i64})),
        Just(Bson::Document(bson::doc! {"$type": "timestamp"})),
        Just(Bson::Document(bson::doc! {"$gte": 1})),
        Just(Bson::Int32(-1)),
    ]
}

fn update() -> impl Strategy<Value = Bson> {
    prop_oneof![
        3 => prop::collection::vec(
            (operator(), prop::collection::vec((path(), operand()), 0..4)),
            0..3,
        )
        .prop_map(|ops| {
            let mut d = Document::new();
            for (op, fields) in ops {
                let mut inner = Document::new();
                for (p, v) in fields {
                    inner.insert(p, v);
                }
                d.insert(op, inner);
            }
            Bson::Document(d)
        }),
        1 => value(),
    ]
}

fn filters() -> impl Strategy<Value = Option<Vec<Bson>>> {
    prop::option::of(prop::collection::vec(
        prop_oneof![
            Just(Bson::Document(bson::doc! {"x": {"$gte": 1}})),
            Just(Bson::Document(bson::doc! {"y.a": 1})),
            Just(Bson::Document(bson::doc! {"X": 1})),
            Just(Bson::Int32(1)),
        ],
        0..3,
    ))
}

fn document() -> impl Strategy<Value = Document> {
    (scalar(), prop::collection::vec((key(), value()), 0..5)).prop_map(|(id, kv)| {
        let mut d = Document::new();
        d.insert("_id", id);
        for (k, v) in kv {
            if k != "_id" {
                d.insert(k, v);
            }
        }
        d
    })
}

/// The `_id` element's bytes (NaN-safe comparison).
fn id_bytes(d: &RawDocumentBuf) -> Vec<u8> {
    let mut out = RawDocumentBuf::new();
    if let Ok(Some(v)) = d.get("_id") {
        out.append(bson::raw::cstr!("_id"), v);
    }
    out.into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn parse_and_apply_never_panic(
        doc in document(),
        upd in update(),
        af in filters(),
        matched in prop::option::of(0usize..4),
        upsert_filter in prop::collection::vec((key(), value()), 0..3),
    ) {
        let wrapper = bson::doc! {"u": upd};
        let Ok(wrapper) = RawDocumentBuf::try_from(&wrapper) else { return Ok(()); };
        let Ok(Some(spec)) = wrapper.get("u") else { return Ok(()); };
        let af_raw = af.map(|fs| {
            let mut a = bson::RawArrayBuf::new();
            for f in fs {
                if let Ok(r) = bson::RawBson::try_from(f) {
                    a.push(r);
                }
            }
            a
        });
        let Ok(parsed) = Update::parse(spec, af_raw.as_deref(), false) else { return Ok(()); };
        let Ok(raw_doc) = RawDocumentBuf::try_from(&doc) else { return Ok(()); };
        let details = MatchDetails { elem_match_key: matched };
        if let Ok(applied) = parsed.apply(&raw_doc, Some(&details), &now) {
            let back = Document::try_from(applied.doc.as_ref());
            prop_assert!(back.is_ok());
            // `_id` may change type only to an equal value (MongoDB compares it by value:
            // `{_id: -0.0}` may replace `{_id: Decimal128("0")}`).
            let (new_id, old_id) = (applied.doc.get("_id").ok().flatten(), raw_doc.get("_id").ok().flatten());
            match (new_id, old_id) {
                (Some(a), Some(b)) => prop_assert_eq!(
                    cairn_storage::compare::compare_values(a, b),
                    std::cmp::Ordering::Equal
                ),
                _ => prop_assert_eq!(id_bytes(&applied.doc), id_bytes(&raw_doc)),
            }
            if !applied.modified {
                prop_assert_eq!(applied.doc.as_bytes(), raw_doc.as_bytes());
            }
            // Applying again never panics either.
            let _ = parsed.apply(&applied.doc, None, &now);
        }
        let mut f = Document::new();
        for (k, v) in upsert_filter {
            f.insert(k, v);
        }
        if let Ok(fraw) = RawDocumentBuf::try_from(&f)
            && let Ok(filter) = Filter::parse(&fraw)
            && let Ok(inserted) = parsed.upsert_document(&filter, &now)
        {
            prop_assert!(Document::try_from(inserted.as_ref()).is_ok());
            let first = inserted.iter().next().and_then(|e| e.ok()).map(|(k, _)| k.as_str().to_string());
            prop_assert_eq!(first.as_deref(), Some("_id"));
        }
        let _ = RawBsonRef::Null;
    }
}
