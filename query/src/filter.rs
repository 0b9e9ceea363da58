//! Query filters (MongoDB's match expressions).
//!
//! PLACEHOLDER SKELETON (issue 4 replaces the body, keeping this API): supports only
//! top-level equality; every operator answers NotImplemented.

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::error::{QueryError, Result};

/// A parsed filter.
#[derive(Debug, Clone)]
pub struct Filter {
    eq: Vec<(String, RawBson)>,
}

impl Filter {
    /// Parses a filter document.
    pub fn parse(doc: &RawDocument) -> Result<Filter> {
        let mut eq = Vec::new();
        for el in doc.iter() {
            let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
            if k.as_str().starts_with('$') {
                return Err(QueryError::NotImplemented(format!(
                    "filter operator {} is not supported yet",
                    k.as_str()
                )));
            }
            if let RawBsonRef::Document(d) = v
                && d.iter()
                    .next()
                    .and_then(|e| e.ok())
                    .is_some_and(|(k, _)| k.as_str().starts_with('$'))
            {
                return Err(QueryError::NotImplemented(
                    "query operators are not supported yet".into(),
                ));
            }
            eq.push((k.as_str().to_string(), RawBson::from(v)));
        }
        Ok(Filter { eq })
    }

    /// True when the filter matches every document.
    pub fn is_empty(&self) -> bool {
        self.eq.is_empty()
    }

    /// Whether `doc` matches.
    pub fn matches(&self, doc: &RawDocument) -> bool {
        self.eq.iter().all(|(k, v)| {
            doc.get(k).ok().flatten().is_some_and(|x| {
                cairn_storage::compare::compare_values(x, v.as_raw_bson_ref()).is_eq()
            })
        })
    }

    /// If the filter is exactly `{_id: <value>}` with a non-operator value, that value.
    pub fn id_equality(&self) -> Option<RawBson> {
        match self.eq.as_slice() {
            [(k, v)] if k == "_id" => Some(v.clone()),
            _ => None,
        }
    }
}

#[allow(dead_code)]
fn _doc() -> RawDocumentBuf {
    RawDocumentBuf::new()
}
