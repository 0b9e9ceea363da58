//! Shared helpers for the update tests (included with `#[path]`; also built as its own empty
//! test crate).
#![allow(dead_code, missing_docs)]

use bson::{DateTime, Document, RawBsonRef, RawDocumentBuf, Timestamp};
use cairn_query::QueryError;
use cairn_query::filter::Filter;
use cairn_query::update::{Applied, Update};

/// The fixed clock of the tests.
pub fn now() -> (DateTime, Timestamp) {
    (
        DateTime::from_millis(1_700_000_000_000),
        Timestamp {
            time: 1_700_000_000,
            increment: 1,
        },
    )
}

pub fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("encodable")
}

/// The numeric code of an error, as the server reports it.
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

pub fn parse(update: &Document, filters: Option<Vec<Document>>) -> Result<Update, QueryError> {
    let u = raw(update);
    let f = filters.map(|fs| {
        let mut a = bson::RawArrayBuf::new();
        for f in fs {
            a.push(RawBsonRef::Document(&raw(&f)));
        }
        a
    });
    Update::parse(RawBsonRef::Document(&u), f.as_deref(), false)
}

/// Applies `update` (with optional array filters and positional match) to `doc`.
pub fn apply_full(
    doc: &Document,
    update: &Document,
    filters: Option<Vec<Document>>,
    matched: Option<usize>,
) -> Result<Applied, QueryError> {
    let u = parse(update, filters)?;
    let d = raw(doc);
    let details = matched.map(|m| cairn_query::filter::MatchDetails {
        elem_match_key: Some(m),
    });
    u.apply(&d, details.as_ref(), &now)
}

pub fn apply(doc: &Document, update: &Document) -> Result<Applied, QueryError> {
    apply_full(doc, update, None, None)
}

fn show(b: &RawDocumentBuf) -> String {
    match Document::try_from(b.as_ref()) {
        Ok(d) => format!("{d}"),
        Err(e) => format!("<invalid {e}>"),
    }
}

/// Asserts the result is byte-identical to `expected` (field order and number types included).
#[track_caller]
pub fn assert_doc(got: &Applied, expected: &Document) {
    let want = raw(expected);
    assert!(
        got.doc.as_bytes() == want.as_bytes(),
        "\n got: {}\nwant: {}",
        show(&got.doc),
        show(&want)
    );
}

#[track_caller]
pub fn check(doc: Document, update: Document, expected: Document) {
    match apply(&doc, &update) {
        Ok(a) => assert_doc(&a, &expected),
        Err(e) => panic!("{update} on {doc}: unexpected error {e:?}"),
    }
}

/// Like [`check`], and also asserts `modified`.
#[track_caller]
pub fn check_mod(doc: Document, update: Document, expected: Document, modified: bool) {
    match apply(&doc, &update) {
        Ok(a) => {
            assert_doc(&a, &expected);
            assert_eq!(a.modified, modified, "modified flag for {update} on {doc}");
        }
        Err(e) => panic!("{update} on {doc}: unexpected error {e:?}"),
    }
}

#[track_caller]
pub fn check_err(doc: Document, update: Document, want_code: i32, want_msg: &str) {
    match apply(&doc, &update) {
        Ok(a) => panic!(
            "{update} on {doc}: expected error {want_code}, got {}",
            show(&a.doc)
        ),
        Err(e) => {
            assert_eq!(code(&e), want_code, "code for {update} on {doc}: {e:?}");
            if !want_msg.is_empty() {
                assert_eq!(e.to_string(), want_msg, "message for {update} on {doc}");
            }
        }
    }
}

/// The document an upsert with `filter` and `update` inserts.
pub fn upsert(filter: &Document, update: &Document) -> Result<RawDocumentBuf, QueryError> {
    let u = parse(update, None)?;
    let f = Filter::parse(&raw(filter))?;
    u.upsert_document(&f, &now)
}

pub fn to_bson_doc(b: &RawDocumentBuf) -> Document {
    Document::try_from(b.as_ref()).expect("valid")
}
