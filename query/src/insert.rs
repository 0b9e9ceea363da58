//! Preparing documents for insertion (MongoDB's `fixDocumentForInsert`).
//!
//! [`prepare`] returns the document exactly as it will be stored:
//! - `_id` is the first field: an existing `_id` is moved to the front, a missing one is
//!   generated as a new ObjectId;
//! - `_id` may not be an array, a regex or undefined (53), and an object `_id` may not have
//!   `$`-prefixed fields (52); two `_id` fields are BadValue;
//! - top-level `Timestamp(0, 0)` values are replaced with the current time (MongoDB's
//!   "empty timestamp" rule), each from the caller's clock so values are unique;
//! - a document over 16 MiB after preparation is BadValue ("object to insert too large").
//!
//! Invariant: a document that needs no change is returned without being copied.
//!
//! The common case — `_id` first, no empty timestamp — is recognized by one light walk over
//! the elements' bytes; anything that walk does not read plainly (a non-ASCII key, a type it
//! does not size) is left to the bson crate's walk, so the answer is always that walk's.

use std::borrow::Cow;

use bson::raw::cstr;
use bson::spec::ElementType;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf, Timestamp};

use cairn_storage::elements::{Elements, Step};

use crate::error::{QueryError, Result};

/// MongoDB's `BSONObjMaxUserSize`.
pub const MAX_USER_SIZE: usize = 16 * 1024 * 1024;

fn type_name(v: &RawBsonRef<'_>) -> &'static str {
    match v {
        RawBsonRef::Array(_) => "array",
        RawBsonRef::RegularExpression(_) => "regex",
        RawBsonRef::Undefined => "undefined",
        _ => "value",
    }
}

fn check_id(id: RawBsonRef<'_>) -> Result<()> {
    match id {
        RawBsonRef::Array(_) | RawBsonRef::RegularExpression(_) | RawBsonRef::Undefined => {
            Err(QueryError::InvalidIdField(format!(
                "The '_id' value cannot be of type {}",
                type_name(&id)
            )))
        }
        RawBsonRef::Document(d) => {
            for el in d.iter() {
                let (k, _) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
                if k.as_str().starts_with('$') {
                    return Err(QueryError::DollarPrefixedFieldName(format!(
                        "_id fields may not contain '$'-prefixed fields: {} is not valid for storage.",
                        k.as_str()
                    )));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether one light walk ([`cairn_storage::elements`]) finds `doc` needs no change: every
/// element read plainly with an ASCII key, the only `_id` first, no top-level empty
/// timestamp; then the `_id`'s type byte. `None` leaves the answer to [`prepare`]'s walk.
fn unchanged(doc: &RawDocument) -> Option<u8> {
    let mut elements = Elements::new(doc.as_bytes());
    let mut first = true;
    let mut id_kind = 0;
    loop {
        match elements.step_ascii() {
            Step::Element(e) => {
                if !e.string_framed()
                    || (e.key == b"_id") != first
                    || (e.kind == 0x11 && e.value == [0; 8])
                {
                    return None;
                }
                if first {
                    id_kind = e.kind;
                }
                first = false;
            }
            Step::End => return (!first).then_some(id_kind),
            Step::Unsure => return None,
        }
    }
}

/// Prepares `doc` for insertion; `now` supplies a fresh timestamp for each empty one.
pub fn prepare<'a>(
    doc: &'a RawDocument,
    now: impl FnMut() -> Timestamp,
) -> Result<Cow<'a, RawDocument>> {
    if let Some(id_kind) = unchanged(doc) {
        // What the walk below finds for such a document: only the `_id` is to be read and
        // checked. A value of fixed width (a number, an ObjectId, a date, a timestamp, null,
        // MinKey, MaxKey) always reads, and `check_id` accepts it.
        if matches!(
            id_kind,
            0x01 | 0x07 | 0x09 | 0x0A | 0x10 | 0x11 | 0x12 | 0x13 | 0x7F | 0xFF
        ) {
            return check_size(Cow::Borrowed(doc));
        }
        let id = match doc.iter_elements().next() {
            Some(Ok(el)) => el
                .value()
                .map_err(|e| QueryError::BadValue(e.to_string()))?,
            Some(Err(e)) => return Err(QueryError::BadValue(e.to_string())),
            None => return prepare_walk(doc, now),
        };
        check_id(id)?;
        return check_size(Cow::Borrowed(doc));
    }
    prepare_walk(doc, now)
}

/// [`prepare`] by the bson crate's iterator over every element.
fn prepare_walk<'a>(
    doc: &'a RawDocument,
    mut now: impl FnMut() -> Timestamp,
) -> Result<Cow<'a, RawDocument>> {
    let mut id: Option<RawBsonRef<'a>> = None;
    let mut id_first = false;
    let mut empty_ts = false;
    // Only `_id` and timestamps are looked at: the other values are stepped over without
    // being read (the document was validated when it was received).
    for (i, el) in doc.iter_elements().enumerate() {
        let el = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        if el.key().as_str() == "_id" {
            if id.is_some() {
                return Err(QueryError::BadValue(
                    "can't have multiple _id fields in one document".into(),
                ));
            }
            let v = el
                .value()
                .map_err(|e| QueryError::BadValue(e.to_string()))?;
            check_id(v)?;
            id = Some(v);
            id_first = i == 0;
        } else if el.element_type() == ElementType::Timestamp
            && let Ok(RawBsonRef::Timestamp(t)) = el.value()
            && t.time == 0
            && t.increment == 0
        {
            empty_ts = true;
        }
    }
    let prepared: Cow<'a, RawDocument> = if id_first && !empty_ts {
        Cow::Borrowed(doc)
    } else {
        let mut out = RawDocumentBuf::new();
        match id {
            Some(v) => out.append(cstr!("_id"), v),
            None => out.append(cstr!("_id"), bson::oid::ObjectId::new()),
        }
        for el in doc.iter() {
            let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
            if k.as_str() == "_id" {
                continue;
            }
            match v {
                RawBsonRef::Timestamp(t) if t.time == 0 && t.increment == 0 => {
                    out.append(k, now());
                }
                _ => out.append(k, v),
            }
        }
        Cow::Owned(out)
    };
    check_size(prepared)
}

/// The document, unless it is over [`MAX_USER_SIZE`].
fn check_size(prepared: Cow<'_, RawDocument>) -> Result<Cow<'_, RawDocument>> {
    let size = prepared.as_bytes().len();
    if size > MAX_USER_SIZE {
        return Err(QueryError::BadValue(format!(
            "object to insert too large. size in bytes: {size}, max size: {MAX_USER_SIZE}"
        )));
    }
    Ok(prepared)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn ts() -> Timestamp {
        Timestamp {
            time: 100,
            increment: 7,
        }
    }

    #[test]
    fn unchanged_documents_are_borrowed() {
        let d = rawdoc! {"_id": 1, "a": 2};
        assert!(matches!(prepare(&d, ts).unwrap(), Cow::Borrowed(_)));
    }

    #[test]
    fn id_is_moved_or_generated_first() {
        let d = rawdoc! {"a": 1, "_id": "x", "b": 2};
        let p = prepare(&d, ts).unwrap();
        let keys: Vec<_> = p.iter().map(|e| e.unwrap().0.as_str().to_owned()).collect();
        assert_eq!(keys, ["_id", "a", "b"]);
        let d = rawdoc! {"a": 1};
        let p = prepare(&d, ts).unwrap();
        assert!(matches!(
            p.get("_id").unwrap(),
            Some(RawBsonRef::ObjectId(_))
        ));
        assert_eq!(p.iter().next().unwrap().unwrap().0.as_str(), "_id");
    }

    #[test]
    fn illegal_ids() {
        let code = |d: RawDocumentBuf| prepare(&d, ts).unwrap_err();
        assert_eq!(
            code(rawdoc! {"_id": [1]}),
            QueryError::InvalidIdField("The '_id' value cannot be of type array".into())
        );
        assert!(matches!(
            code(
                rawdoc! {"_id": bson::Regex { pattern: "a".try_into().unwrap(), options: "".try_into().unwrap() }}
            ),
            QueryError::InvalidIdField(_)
        ));
        assert!(matches!(
            code(rawdoc! {"_id": bson::RawBson::Undefined}),
            QueryError::InvalidIdField(_)
        ));
        assert!(matches!(
            code(rawdoc! {"_id": {"$x": 1}}),
            QueryError::DollarPrefixedFieldName(_)
        ));
        let mut twice = rawdoc! {"_id": 1};
        twice.append(cstr!("_id"), 2);
        assert!(matches!(code(twice), QueryError::BadValue(_)));
        // a nested object id with ordinary fields is fine
        prepare(&rawdoc! {"_id": {"a": 1}}, ts).unwrap();
    }

    #[test]
    fn empty_timestamps_are_filled_at_top_level_only() {
        let zero = Timestamp {
            time: 0,
            increment: 0,
        };
        let d = rawdoc! {"_id": 1, "t": zero, "n": {"t": zero}};
        let p = prepare(&d, ts).unwrap();
        assert_eq!(p.get_timestamp("t").unwrap(), ts());
        assert_eq!(
            p.get_document("n").unwrap().get_timestamp("t").unwrap(),
            zero
        );
    }

    /// The light walk's answers are the general walk's, on documents of every shape and on
    /// every one-byte corruption of them.
    #[test]
    fn light_walk_agrees_with_the_general_one() {
        use bson::{Bson, doc};
        let zero = Timestamp {
            time: 0,
            increment: 0,
        };
        let docs = [
            doc! {"_id": 1, "a": "x", "b": {"c": [1, 2]}, "t": ts()},
            doc! {"a": 1, "_id": 2},
            doc! {"a": 1},
            doc! {"_id": 1, "t": zero},
            doc! {"_id": [1], "a": 1},
            doc! {"_id": {"$x": 1}},
            doc! {"_id": {"a": 1}, "é": 1, "n": {"t": zero}},
            doc! {"_id": Bson::Undefined},
            doc! {"_id": bson::Regex { pattern: "a".try_into().unwrap(), options: "".try_into().unwrap() }},
            doc! {"_id": bson::oid::ObjectId::from_bytes([1; 12]), "d": 1.5, "l": 2_i64},
            doc! {"_id": 1.5, "n": null},
            doc! {"_id": "s", "a": 1},
            doc! {"_id": true, "a": 1},
            doc! {"_id": Bson::Symbol("y".into()), "a": 1},
            doc! {"_id": bson::Decimal128::from_bytes([0; 16]), "m": Bson::MinKey, "x": Bson::MaxKey},
            doc! {"_id": Bson::Null, "ts": Timestamp { time: 5, increment: 1 }, "dt": bson::DateTime::from_millis(1)},
            doc! {"_id": "s", "bin": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1] }},
            doc! {},
        ];
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for d in docs {
            let b = RawDocumentBuf::try_from(&d).unwrap().into_bytes();
            for i in 0..b.len() {
                for v in [0u8, 1, 0x11, b'_', 0x7f, 0x80, 0xff] {
                    let mut c = b.clone();
                    c[i] = v;
                    cases.push(c);
                }
            }
            cases.push(b);
        }
        let mut twice = rawdoc! {"_id": 1, "a": 2};
        twice.append(cstr!("_id"), 3);
        cases.push(twice.into_bytes());
        let mut fast = 0;
        for c in cases {
            let Ok(d) = RawDocument::from_bytes(&c) else {
                continue;
            };
            fast += usize::from(unchanged(d).is_some());
            // A generated `_id` (an ObjectId first, the input having none) differs from call
            // to call: its bytes are left out.
            let generated = matches!(d.get("_id"), Ok(None));
            let bytes = |p: Cow<'_, RawDocument>| {
                let mut b = p.as_bytes().to_vec();
                if generated && let Some(oid) = b.get_mut(9..21) {
                    oid.fill(0);
                }
                b
            };
            let got = prepare(d, ts).map(bytes);
            let want = prepare_walk(d, ts).map(bytes);
            assert_eq!(got, want, "{c:?}");
        }
        assert!(fast > 50, "{fast}");
    }

    #[test]
    fn too_large() {
        let d = rawdoc! {"_id": 1, "s": "x".repeat(MAX_USER_SIZE)};
        assert!(
            matches!(prepare(&d, ts).unwrap_err(), QueryError::BadValue(m) if m.starts_with("object to insert too large"))
        );
    }
}
