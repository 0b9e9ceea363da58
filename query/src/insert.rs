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

use std::borrow::Cow;

use bson::raw::cstr;
use bson::spec::ElementType;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf, Timestamp};

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

/// Prepares `doc` for insertion; `now` supplies a fresh timestamp for each empty one.
pub fn prepare<'a>(
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

    #[test]
    fn too_large() {
        let d = rawdoc! {"_id": 1, "s": "x".repeat(MAX_USER_SIZE)};
        assert!(
            matches!(prepare(&d, ts).unwrap_err(), QueryError::BadValue(m) if m.starts_with("object to insert too large"))
        );
    }
}
