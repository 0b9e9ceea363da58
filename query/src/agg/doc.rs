//! Small document edits the stages share: reading a nested field without entering arrays
//! (MongoDB's `Document::getNestedField`) and setting or removing one, creating (or
//! replacing non-document values with) sub-documents along the way
//! (`MutableDocument::setNestedField`). Field order is kept; a new field goes last.
//!
//! Invariant: never panics; recursion is bounded by the path length.

use bson::raw::CStr;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

use crate::error::{QueryError, Result};

/// A field name as a BSON key.
pub(crate) fn key(name: &str) -> Result<&CStr> {
    <&CStr>::try_from(name).map_err(|e| QueryError::BadValue(format!("invalid field name: {e}")))
}

/// The value at `path`, entering documents only (an array on the way gives `None`).
pub(crate) fn get_nested<'a, S: AsRef<str>>(
    doc: &'a RawDocument,
    path: &[S],
) -> Option<RawBsonRef<'a>> {
    let (first, rest) = path.split_first()?;
    let v = crate::path::field(doc, first.as_ref())?;
    if rest.is_empty() {
        return Some(v);
    }
    match v {
        RawBsonRef::Document(d) => get_nested(d, rest),
        _ => None,
    }
}

/// `doc` with the value at `path` set to `value` (removed when `None`).
pub(crate) fn set_nested<S: AsRef<str>>(
    doc: &RawDocument,
    path: &[S],
    value: Option<RawBsonRef<'_>>,
) -> Result<RawDocumentBuf> {
    let Some((first, rest)) = path.split_first() else {
        return Ok(doc.to_owned());
    };
    let first = first.as_ref();
    let mut out = RawDocumentBuf::new();
    let mut found = false;
    for el in doc.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        if k.as_str() != first || found {
            out.append(k, v);
            continue;
        }
        found = true;
        if rest.is_empty() {
            if let Some(nv) = value {
                out.append(k, nv);
            }
            continue;
        }
        let sub = match v {
            RawBsonRef::Document(d) => set_nested(d, rest, value)?,
            _ => match value {
                Some(_) => set_nested(&RawDocumentBuf::new(), rest, value)?,
                None => {
                    out.append(k, v);
                    continue;
                }
            },
        };
        out.append(k, sub);
    }
    if !found && value.is_some() {
        let k = key(first)?;
        if rest.is_empty() {
            if let Some(nv) = value {
                out.append(k, nv);
            }
        } else {
            out.append(k, set_nested(&RawDocumentBuf::new(), rest, value)?);
        }
    }
    Ok(out)
}
