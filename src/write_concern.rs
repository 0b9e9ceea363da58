//! Write concern: parsing `writeConcern` and applying it.
//!
//! Cairn is one data-bearing node behind a router identity, so:
//! - `w: 0` and `w: 1` are satisfied by the local commit; `w: "majority"` too (one node is a
//!   majority of one);
//! - `w: n > 1` and tag sets can never be satisfied: the write is applied and the reply
//!   carries a `writeConcernError` (100 UnsatisfiableWriteConcern / 79 UnknownReplWriteConcern),
//!   as a mongos in front of a one-node shard answers;
//! - `j: true` (or the server's `--sync`) waits for the journal fsync (group commit); so
//!   does `w: "majority"`, whose writes MongoDB makes durable in the journal;
//! - `fsync: true` is accepted as MongoDB's synonym for journaling and cannot be combined
//!   with `j`.

use bson::{Bson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::commands::type_name;
use crate::error::{CommandError, ErrorCode};

/// The `w` of a write concern.
#[derive(Debug, Clone, PartialEq)]
pub enum W {
    /// A node count.
    Nodes(i64),
    /// `"majority"`.
    Majority,
    /// A tag-set name.
    Tag(String),
}

/// A parsed write concern.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteConcern {
    /// `w` (default 1).
    pub w: W,
    /// `j` or `fsync`.
    pub journal: bool,
    /// `wtimeout` in milliseconds.
    pub wtimeout: i64,
    /// Whether the client supplied it (for `errInfo.writeConcern.provenance`).
    pub client_supplied: bool,
}

impl Default for WriteConcern {
    fn default() -> Self {
        WriteConcern {
            w: W::Nodes(1),
            journal: false,
            wtimeout: 0,
            client_supplied: false,
        }
    }
}

fn failed(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::FailedToParse, msg)
}

impl WriteConcern {
    /// Parses the command's `writeConcern` field (absent → the default).
    pub fn from_command<'a>(
        body: impl crate::commands::Args<'a>,
    ) -> Result<WriteConcern, CommandError> {
        match body.arg("writeConcern") {
            Ok(None) => Ok(WriteConcern::default()),
            Ok(Some(RawBsonRef::Document(d))) => WriteConcern::parse(d),
            Ok(Some(other)) => Err(CommandError::wrong_type(
                "writeConcern",
                type_name(&other),
                "object",
            )),
            Err(e) => Err(e),
        }
    }

    /// Parses a write concern document.
    pub fn parse(d: &RawDocument) -> Result<WriteConcern, CommandError> {
        let mut wc = WriteConcern {
            client_supplied: true,
            ..WriteConcern::default()
        };
        let mut j = None;
        let mut fsync = None;
        for el in d.iter() {
            let (k, v) =
                el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            match k.as_str() {
                "w" => {
                    wc.w = match v {
                        RawBsonRef::String("majority") => W::Majority,
                        RawBsonRef::String(tag) => W::Tag(tag.to_string()),
                        RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_) => {
                            let n = match v {
                                RawBsonRef::Int32(i) => i64::from(i),
                                RawBsonRef::Int64(i) => i,
                                RawBsonRef::Double(f) => f as i64,
                                _ => 0,
                            };
                            if !(0..=50).contains(&n) {
                                return Err(failed(format!(
                                    "w has to be a non-negative number and not greater than 50; found: {n}"
                                )));
                            }
                            W::Nodes(n)
                        }
                        other => {
                            return Err(failed(format!(
                                "w has to be a number or a string; found: {}",
                                type_name(&other)
                            )));
                        }
                    };
                }
                "j" => j = Some(crate::commands::truthy(&v)),
                "fsync" => fsync = Some(crate::commands::truthy(&v)),
                "wtimeout" | "wtimeoutMS" => {
                    wc.wtimeout = match v {
                        RawBsonRef::Int32(i) => i64::from(i),
                        RawBsonRef::Int64(i) => i,
                        RawBsonRef::Double(f) => f as i64,
                        _ => 0,
                    };
                }
                // Fields MongoDB itself attaches to write concerns it passes around.
                "provenance" | "getLastError" | "wOpTime" | "wElectionId" => {}
                other => {
                    return Err(failed(format!("unrecognized write concern field: {other}")));
                }
            }
        }
        if j == Some(true) && fsync == Some(true) {
            return Err(failed("fsync and j options cannot be used together"));
        }
        wc.journal = j == Some(true) || fsync == Some(true) || wc.w == W::Majority;
        Ok(wc)
    }

    /// Whether the server sends a reply at all (`w: 0` asks for none that matters; MongoDB
    /// still answers unless the request had `moreToCome`).
    pub fn acknowledged(&self) -> bool {
        !matches!(self.w, W::Nodes(0)) || self.journal
    }

    /// The `writeConcernError` to attach after a successful write, if this write concern
    /// cannot be satisfied by one node.
    pub fn error(&self) -> Option<RawDocumentBuf> {
        let provenance = if self.client_supplied {
            "clientSupplied"
        } else {
            "implicitDefault"
        };
        let wc_doc = |w: Bson| {
            rawdoc! {"w": bson::RawBson::try_from(w).unwrap_or(bson::RawBson::Null), "wtimeout": self.wtimeout as i32, "provenance": provenance}
        };
        match &self.w {
            W::Nodes(n) if *n > 1 => Some(rawdoc! {
                "code": 100,
                "codeName": "UnsatisfiableWriteConcern",
                "errmsg": "Not enough data-bearing nodes",
                "errInfo": {"writeConcern": wc_doc(Bson::Int32(*n as i32))},
            }),
            W::Tag(t) => Some(rawdoc! {
                "code": 79,
                "codeName": "UnknownReplWriteConcern",
                "errmsg": format!("No write concern mode named '{t}' found in replica set configuration"),
                "errInfo": {"writeConcern": wc_doc(Bson::String(t.clone()))},
            }),
            _ => None,
        }
    }

    /// The storage durability this write concern requires.
    pub fn durability(&self) -> cairn_storage::Durability {
        if self.journal {
            cairn_storage::Durability::Journal
        } else {
            cairn_storage::Durability::Buffered
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let p = |d: RawDocumentBuf| WriteConcern::parse(&d);
        assert_eq!(p(rawdoc! {}).unwrap().w, W::Nodes(1));
        assert_eq!(p(rawdoc! {"w": "majority"}).unwrap().w, W::Majority);
        assert!(p(rawdoc! {"w": "majority"}).unwrap().journal);
        assert!(p(rawdoc! {"j": true}).unwrap().journal);
        assert!(!p(rawdoc! {"w": 1, "j": false}).unwrap().journal);
        assert_eq!(p(rawdoc! {"w": 51}).unwrap_err().code.code(), 9);
        assert_eq!(p(rawdoc! {"w": -1}).unwrap_err().code.code(), 9);
        assert_eq!(
            p(rawdoc! {"j": true, "fsync": true})
                .unwrap_err()
                .code
                .code(),
            9
        );
        assert!(p(rawdoc! {"w": 2}).unwrap().error().is_some());
        assert!(p(rawdoc! {"w": 1}).unwrap().error().is_none());
        assert_eq!(
            p(rawdoc! {"w": "dc"})
                .unwrap()
                .error()
                .unwrap()
                .get_i32("code")
                .unwrap(),
            79
        );
    }
}
