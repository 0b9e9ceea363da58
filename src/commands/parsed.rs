//! A command body's top-level fields, read in one pass.
//!
//! A raw BSON document answers `get(key)` by walking its elements from the start, decoding
//! each key and value header on the way; a command's generic arguments (`$db`, `lsid`,
//! `txnNumber`, `autocommit`, `startTransaction`, `readConcern`, `writeConcern`,
//! `$clusterTime`, `maxTimeMS`, the stable-API fields …) and its own options are looked up
//! dozens of times between the dispatcher, the session layer, the deadline, the metrics and
//! the command itself — most of them absent, so each lookup walked the whole body. [`Parsed`]
//! walks it once into a table of `(key, value)` references; lookups then compare keys only.
//!
//! [`Args`] is what argument readers (see [`super::args`]) take: the raw body or its
//! [`Parsed`], with the same answers.
//!
//! Invariants: [`Parsed::get`] answers exactly what `RawDocument::get` answers on the same
//! body — the first field with that key, a value found before a malformed element, and an
//! `InvalidBSON` error when the walk met a malformed element before finding the key. Nothing
//! is copied: every value borrows the body.

use bson::{RawBsonRef, RawDocument};

use crate::error::{CommandError, ErrorCode};

/// The top-level fields of one command body, in order (see the module doc).
#[derive(Debug, Clone)]
pub struct Parsed<'a> {
    body: &'a RawDocument,
    entries: Vec<(&'a str, RawBsonRef<'a>)>,
    /// The message of the malformed element that ended the walk, if one did.
    malformed: Option<String>,
}

fn invalid(message: &str) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, message.to_string())
}

impl<'a> Parsed<'a> {
    /// Walks `body` once.
    pub fn parse(body: &'a RawDocument) -> Parsed<'a> {
        let mut entries = Vec::with_capacity(16);
        let mut malformed = None;
        for el in body.iter() {
            match el {
                Ok((k, v)) => entries.push((k.as_str(), v)),
                Err(e) => {
                    malformed = Some(e.to_string());
                    break;
                }
            }
        }
        Parsed {
            body,
            entries,
            malformed,
        }
    }

    /// The body the fields were read from.
    pub fn body(&self) -> &'a RawDocument {
        self.body
    }

    /// The first field named `key`, as `RawDocument::get` finds it.
    pub fn get(&self, key: &str) -> Result<Option<RawBsonRef<'a>>, CommandError> {
        match self.entries.iter().find(|(k, _)| *k == key) {
            Some((_, v)) => Ok(Some(*v)),
            None => match &self.malformed {
                Some(m) => Err(invalid(m)),
                None => Ok(None),
            },
        }
    }

    /// The first field named `key`; `None` when absent or unreadable (as
    /// `body.get(key).ok().flatten()`).
    pub fn find(&self, key: &str) -> Option<RawBsonRef<'a>> {
        self.get(key).ok().flatten()
    }

    /// Whether the walk stopped at a malformed element (then a key not found before it is an
    /// `InvalidBSON` error rather than absent).
    pub fn is_malformed(&self) -> bool {
        self.malformed.is_some()
    }

    /// The first field (the command name and its value), as `body.iter().next()` gives it.
    pub fn first(&self) -> Option<Result<(&'a str, RawBsonRef<'a>), CommandError>> {
        match (self.entries.first(), &self.malformed) {
            (Some(e), _) => Some(Ok(*e)),
            (None, Some(m)) => Some(Err(invalid(m))),
            (None, None) => None,
        }
    }

    /// Every field in order, then the malformed element's error if the walk met one.
    pub fn iter(
        &self,
    ) -> impl Iterator<Item = Result<(&'a str, RawBsonRef<'a>), CommandError>> + '_ {
        self.entries
            .iter()
            .map(|e| Ok(*e))
            .chain(self.malformed.iter().map(|m| Err(invalid(m))))
    }
}

/// Where argument readers find a command's fields: its raw body, or the [`Parsed`] already
/// read from it (the same answers, see the module doc).
pub trait Args<'a>: Copy {
    /// The first field named `field`, or `InvalidBSON` for a malformed body.
    fn arg(self, field: &str) -> Result<Option<RawBsonRef<'a>>, CommandError>;
}

impl<'a> Args<'a> for &'a RawDocument {
    fn arg(self, field: &str) -> Result<Option<RawBsonRef<'a>>, CommandError> {
        self.get(field)
            .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))
    }
}

impl<'a> Args<'a> for &'a bson::RawDocumentBuf {
    fn arg(self, field: &str) -> Result<Option<RawBsonRef<'a>>, CommandError> {
        self.as_ref().arg(field)
    }
}

impl<'a> Args<'a> for &Parsed<'a> {
    fn arg(self, field: &str) -> Result<Option<RawBsonRef<'a>>, CommandError> {
        self.get(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn answers_as_raw_get() {
        let body = rawdoc! {"find": "c", "filter": {"a": 1}, "limit": 1, "limit": 2, "$db": "d"};
        let f = Parsed::parse(&body);
        for key in ["find", "filter", "limit", "$db", "lsid", ""] {
            assert_eq!(
                f.get(key).unwrap(),
                body.get(key).unwrap(),
                "{key}: the first occurrence, or none"
            );
        }
        assert_eq!(f.first().unwrap().unwrap().0, "find");
        assert_eq!(f.iter().count(), 5);
        assert_eq!(f.body().as_bytes(), body.as_bytes());
    }

    #[test]
    fn empty_body() {
        let body = rawdoc! {};
        let f = Parsed::parse(&body);
        assert!(f.first().is_none());
        assert_eq!(f.get("x").unwrap(), None);
    }

    #[test]
    fn malformed_body_errors_like_raw_get() {
        // {a: 1, b: "x"} with the string's length claiming more bytes than there are.
        let mut bytes = rawdoc! {"a": 1, "b": "x"}.into_bytes();
        let at = bytes.len() - 7; // the string's length prefix
        bytes[at] = 100;
        let body = RawDocument::from_bytes(&bytes).unwrap();
        assert!(body.get("b").is_err());
        let f = Parsed::parse(body);
        assert_eq!(f.get("a").unwrap(), body.get("a").unwrap());
        let e = f.get("b").unwrap_err();
        assert_eq!(e.code.code(), ErrorCode::InvalidBSON.code());
        assert!(f.get("zzz").is_err());
        assert!(f.iter().last().unwrap().is_err());
    }
}
