//! Shared helpers for the document-validation tests.
#![allow(dead_code)]

use bson::{Bson, Document, RawDocumentBuf};
use cairn_query::validation::Validator;

pub fn raw(v: &Bson) -> RawDocumentBuf {
    match v {
        Bson::Document(d) => RawDocumentBuf::try_from(d).expect("encodable"),
        other => panic!("not a document: {other:?}"),
    }
}

/// The document validated: as given, with `_id: 1` appended when it has none (as MongoDB's
/// unit tests add it).
pub fn stored(v: &Bson) -> RawDocumentBuf {
    let Bson::Document(d) = v else {
        panic!("not a document: {v:?}")
    };
    let mut out = d.clone();
    if !out.contains_key("_id") {
        out.insert("_id", 1);
    }
    RawDocumentBuf::try_from(&out).expect("encodable")
}

/// MongoDB's code names for the codes the tests meet.
pub fn code_name(code: i32) -> String {
    match code {
        2 => "BadValue".into(),
        14 => "TypeMismatch".into(),
        n => format!("Location{n}"),
    }
}

/// The `errInfo` of `doc` failing `validator` (panics if it passes).
pub fn err_info(validator: &Bson, doc: &Bson) -> RawDocumentBuf {
    let v = Validator::parse(&raw(validator))
        .unwrap_or_else(|e| panic!("validator {validator} does not parse: {e:?}"));
    match v.check(&stored(doc), &code_name) {
        Ok(()) => panic!("{doc} passes {validator}"),
        Err(info) => info,
    }
}

/// Whether `doc` passes `validator`.
pub fn passes(validator: &Bson, doc: &Bson) -> bool {
    let v = Validator::parse(&raw(validator))
        .unwrap_or_else(|e| panic!("validator {validator} does not parse: {e:?}"));
    v.check(&stored(doc), &code_name).is_ok()
}

/// Checks `(validator, document, expected details)` cases: the `details` of the generated
/// `errInfo` must equal the expected document byte for byte (field order and numeric types
/// included). Collects every failure before panicking.
pub fn check_details(cases: &[(&str, Bson, Bson, Bson)]) {
    let mut failures = Vec::new();
    for (name, validator, doc, expected) in cases {
        let info = err_info(validator, doc);
        let details = info
            .get_document("details")
            .map(|d| d.to_owned())
            .unwrap_or_default();
        let want = raw(expected);
        if details.as_bytes() != want.as_bytes() {
            let got = Document::try_from(details.as_ref()).ok();
            failures.push(format!(
                "{name}:\n  validator {validator}\n  document  {doc}\n  expected  {expected}\n  got       {got:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
