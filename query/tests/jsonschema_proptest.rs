//! Property tests: parsing any schema-like document and matching any document (malformed BSON
//! included) never panics; matching agrees with its negation under `not`.

mod jsonschema_common;

use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use cairn_query::jsonschema::JsonSchema;
use proptest::prelude::*;

const KEYS: &[&str] = &[
    "type",
    "bsonType",
    "properties",
    "required",
    "items",
    "additionalItems",
    "additionalProperties",
    "patternProperties",
    "dependencies",
    "enum",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "title",
    "description",
    "encrypt",
    "encryptMetadata",
    "keyId",
    "algorithm",
    "a",
    "b",
    "a.b",
    "",
    "_id",
    "^a",
    "$ref",
    "0",
];

const STRINGS: &[&str] = &[
    "object", "array", "number", "string", "int", "long", "double", "decimal", "bool", "boolean",
    "null", "integer", "a", "b", "^a", "(", "a+b", "é", "/k", "missing",
];

fn leaf() -> impl Strategy<Value = Bson> {
    prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        (-3i64..3).prop_map(Bson::Int64),
        any::<i64>().prop_map(Bson::Int64),
        prop_oneof![
            Just(0.1),
            Just(-0.0),
            Just(f64::NAN),
            Just(f64::INFINITY),
            any::<f64>()
        ]
        .prop_map(Bson::Double),
        prop_oneof![
            Just("0"),
            Just("1.5"),
            Just("-1E+6000"),
            Just("NaN"),
            Just("3E-10")
        ]
        .prop_map(|s| Bson::Decimal128(s.parse().expect("decimal"))),
        proptest::sample::select(STRINGS).prop_map(|s| Bson::String(s.to_string())),
        any::<bool>().prop_map(Bson::Boolean),
        Just(Bson::Null),
        Just(Bson::Undefined),
        Just(Bson::MinKey),
        proptest::collection::vec(any::<u8>(), 0..24).prop_map(|b| Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::from(if b.len() % 2 == 0 { 6 } else { 4 }),
            bytes: b,
        })),
    ]
}

fn value() -> impl Strategy<Value = Bson> {
    leaf().prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Bson::Array),
            proptest::collection::vec((proptest::sample::select(KEYS), inner), 0..6).prop_map(
                |kv| {
                    let mut d = Document::new();
                    for (k, v) in kv {
                        d.insert(k, v);
                    }
                    Bson::Document(d)
                }
            ),
        ]
    })
}

fn doc() -> impl Strategy<Value = Document> {
    proptest::collection::vec((proptest::sample::select(KEYS), value()), 0..6).prop_map(|kv| {
        let mut d = Document::new();
        for (k, v) in kv {
            d.insert(k, v);
        }
        d
    })
}

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("encodable")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn never_panics(schema in doc(), docs in proptest::collection::vec(doc(), 1..4)) {
        if let Ok(s) = JsonSchema::parse(&raw(&schema)) {
            let mut negated = Document::new();
            negated.insert("not", Bson::Document(schema.clone()));
            let n = JsonSchema::parse(&raw(&negated)).expect("not of a valid schema parses");
            for d in &docs {
                let r = raw(d);
                prop_assert_eq!(s.matches(&r), !n.matches(&r));
            }
        }
    }

    #[test]
    fn schema_shaped_inputs(
        ty in proptest::sample::select(STRINGS),
        bound in leaf(),
        items in value(),
        docs in proptest::collection::vec(doc(), 1..4),
    ) {
        let mut prop = Document::new();
        prop.insert("bsonType", ty);
        prop.insert("minimum", bound.clone());
        prop.insert("items", items);
        prop.insert("enum", Bson::Array(vec![bound]));
        let mut props = Document::new();
        props.insert("a", Bson::Document(prop.clone()));
        props.insert("a.b", Bson::Document(prop));
        let mut schema = Document::new();
        schema.insert("properties", Bson::Document(props));
        if let Ok(s) = JsonSchema::parse(&raw(&schema)) {
            for d in &docs {
                let _ = s.matches(&raw(d));
            }
        }
    }

    #[test]
    fn malformed_bytes(bytes in proptest::collection::vec(any::<u8>(), 5..96), good in doc()) {
        // A length-prefixed byte soup ending in NUL: iteration hits malformed elements.
        let mut b = bytes;
        let len = i32::try_from(b.len()).expect("small");
        b.splice(0..4, len.to_le_bytes());
        if let Some(last) = b.last_mut() {
            *last = 0;
        }
        if let Ok(d) = RawDocument::from_bytes(&b) {
            let _ = JsonSchema::parse(d);
            if let Ok(s) = JsonSchema::parse(&raw(&good)) {
                let _ = s.matches(d);
            }
            let s = jsonschema_common::schema(&bson::bson!({
                "properties": {"a": {"uniqueItems": true, "enum": [1, {"x": 1}], "items": {"minLength": 1}}},
                "patternProperties": {".": {"maxProperties": 2}},
                "minProperties": 1
            }));
            let _ = s.matches(d);
        }
    }
}
