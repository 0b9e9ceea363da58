//! Shared helpers for the filter tests: terse BSON builders and error codes.
#![allow(dead_code)]

use bson::{
    Binary, Bson, Document, RawDocumentBuf, Regex, Timestamp, oid::ObjectId, spec::BinarySubtype,
};
use cairn_query::QueryError;
use cairn_query::filter::Filter;

/// A document from key/value pairs (keys may repeat and keep their order).
pub fn d(pairs: Vec<(&str, Bson)>) -> Bson {
    let mut doc = Document::new();
    for (k, v) in pairs {
        doc.insert(k, v);
    }
    Bson::Document(doc)
}

pub fn a(items: Vec<Bson>) -> Bson {
    Bson::Array(items)
}

pub fn i(v: i64) -> Bson {
    Bson::Int32(v as i32)
}

pub fn l(v: i64) -> Bson {
    Bson::Int64(v)
}

pub fn f(v: f64) -> Bson {
    Bson::Double(v)
}

pub fn s(v: &str) -> Bson {
    Bson::String(v.to_string())
}

pub fn null() -> Bson {
    Bson::Null
}

pub fn b(v: bool) -> Bson {
    Bson::Boolean(v)
}

pub fn bin(subtype: u8, bytes: &[u8]) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::from(subtype),
        bytes: bytes.to_vec(),
    })
}

pub fn re(pattern: &str, options: &str) -> Bson {
    Bson::RegularExpression(Regex {
        pattern: pattern.try_into().expect("pattern"),
        options: options.try_into().expect("options"),
    })
}

pub fn oid(bytes: [u8; 12]) -> Bson {
    Bson::ObjectId(ObjectId::from_bytes(bytes))
}

pub fn ts(time: u32, increment: u32) -> Bson {
    Bson::Timestamp(Timestamp { time, increment })
}

pub fn dt(ms: i64) -> Bson {
    Bson::DateTime(bson::DateTime::from_millis(ms))
}

pub fn dec(v: &str) -> Bson {
    Bson::Decimal128(v.parse().expect("decimal"))
}

/// `{_id: id, field: value}` (or `{_id: id}` when `value` is `None`).
pub fn d_id(id: &str, value: Option<Bson>, field: &str) -> Document {
    let mut doc = Document::new();
    doc.insert("_id", id);
    if let Some(v) = value {
        doc.insert(field, v);
    }
    doc
}

pub fn raw(v: &Bson) -> RawDocumentBuf {
    match v {
        Bson::Document(d) => RawDocumentBuf::try_from(d).expect("encodable"),
        other => panic!("not a document: {other:?}"),
    }
}

pub fn raw_doc(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("encodable")
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

pub fn parse(filter: &Bson) -> Result<Filter, QueryError> {
    Filter::parse(&raw(filter))
}

/// Asserts that `filter` selects exactly the documents with the `_id`s `want` (rendered as
/// MongoDB prints them: strings bare, numbers as numbers).
pub fn expect(docs: &[Bson], filter: Bson, want: &[&str]) {
    let raws: Vec<_> = docs.iter().map(raw).collect();
    let f = parse(&filter).unwrap_or_else(|e| panic!("{filter}: {e:?}"));
    let got = select(&f, &raws);
    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(got, want, "filter {filter}");
}

/// Asserts that `filter` fails to parse with `code`, and returns the message.
pub fn expect_err(filter: Bson, want: i32) -> String {
    match parse(&filter) {
        Ok(_) => panic!("{filter}: parsed, want error {want}"),
        Err(e) => {
            assert_eq!(code(&e), want, "{filter}: {e:?}");
            e.to_string()
        }
    }
}

/// Whether `filter` matches `doc`; panics if the filter does not parse.
pub fn matches(filter: &Bson, doc: &Bson) -> bool {
    let f = parse(filter).unwrap_or_else(|e| panic!("{filter} does not parse: {e:?}"));
    f.matches(&raw(doc))
}

/// The `_id`s (rendered) of the documents `filter` selects, sorted.
pub fn select(filter: &Filter, docs: &[RawDocumentBuf]) -> Vec<String> {
    let mut ids: Vec<String> = docs
        .iter()
        .filter(|d| filter.matches(d))
        .map(|d| match d.get("_id").ok().flatten() {
            Some(bson::RawBsonRef::String(s)) => s.to_string(),
            Some(other) => cairn_query::storage::display::value(other),
            None => "<no _id>".into(),
        })
        .collect();
    ids.sort();
    ids
}
