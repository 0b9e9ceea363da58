//! Shared helpers for the `$jsonSchema` tests.
#![allow(dead_code)]

use bson::{Bson, Document, RawDocumentBuf};
use cairn_query::QueryError;
use cairn_query::filter::Filter;
use cairn_query::jsonschema::{JsonSchema, JsonSchemaExtensions};

pub fn raw(v: &Bson) -> RawDocumentBuf {
    match v {
        Bson::Document(d) => RawDocumentBuf::try_from(d).expect("encodable"),
        other => panic!("not a document: {other:?}"),
    }
}

/// The document as a collection stores it: `_id` first (`0` when the test gave none), as
/// MongoDB's jstests see it after `insert`.
pub fn stored(v: &Bson) -> RawDocumentBuf {
    let Bson::Document(d) = v else {
        panic!("not a document: {v:?}")
    };
    if d.contains_key("_id") {
        return raw(v);
    }
    let mut out = Document::new();
    out.insert("_id", 0);
    for (k, v) in d {
        out.insert(k.clone(), v.clone());
    }
    RawDocumentBuf::try_from(&out).expect("encodable")
}

/// The MongoDB error code of a query error.
pub fn code(e: &QueryError) -> i32 {
    match e {
        QueryError::BadValue(_) => 2,
        QueryError::FailedToParse(_) => 9,
        QueryError::TypeMismatch(_) => 14,
        QueryError::DollarPrefixedFieldName(_) => 52,
        QueryError::InvalidIdField(_) => 53,
        QueryError::NotImplemented(_) => 238,
        QueryError::Location(c, _) => *c,
        QueryError::Storage(_) => -1,
    }
}

pub fn schema(v: &Bson) -> JsonSchema {
    JsonSchema::parse(&raw(v)).unwrap_or_else(|e| panic!("{v} does not parse: {e:?}"))
}

/// Runs `(document, expected)` cases against one schema, checking `JsonSchema::matches`, the
/// filter `{$jsonSchema: schema}` and its negation `{$nor: [{$jsonSchema: schema}]}` (as
/// MongoDB's `assertSchemaMatch` does). Collects every failure before panicking.
pub fn check(schema_doc: Bson, cases: &[(Bson, bool)]) {
    let s = schema(&schema_doc);
    let mut filter = Document::new();
    filter.insert("$jsonSchema", schema_doc.clone());
    let f = Filter::parse_with(&raw(&Bson::Document(filter.clone())), &JsonSchemaExtensions)
        .unwrap_or_else(|e| panic!("filter with {schema_doc}: {e:?}"));
    let nor = bson::doc! {"$nor": [Bson::Document(filter)]};
    let n = Filter::parse_with(
        &RawDocumentBuf::try_from(&nor).expect("encodable"),
        &JsonSchemaExtensions,
    )
    .unwrap_or_else(|e| panic!("$nor with {schema_doc}: {e:?}"));
    let mut failures = Vec::new();
    for (doc, want) in cases {
        let d = stored(doc);
        let got = s.matches(&d);
        if got != *want {
            failures.push(format!(
                "schema {schema_doc}\n  doc {doc}: got {got}, want {want}"
            ));
        }
        if f.matches(&d) != *want || n.matches(&d) == *want {
            failures.push(format!(
                "schema {schema_doc}\n  doc {doc}: filter disagrees"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Asserts that `schema_doc` fails to parse with `want` and returns the message.
pub fn expect_err(schema_doc: Bson, want: i32) -> String {
    match JsonSchema::parse(&raw(&schema_doc)) {
        Ok(_) => panic!("{schema_doc}: parsed, want error {want}"),
        Err(e) => {
            assert_eq!(code(&e), want, "{schema_doc}: {e:?}");
            e.to_string()
        }
    }
}

/// Asserts the code and the exact message.
pub fn err(schema_doc: Bson, want: i32, msg: &str) {
    let got = expect_err(schema_doc.clone(), want);
    assert_eq!(got, msg, "schema {schema_doc}");
}
