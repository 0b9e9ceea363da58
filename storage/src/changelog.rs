//! The change log (the single node's oplog): every committed write, in commit order, written
//! in the same storage transaction as the write itself, so change streams can never disagree
//! with the data.
//!
//! # Layout
//! The log is its own space, [`CHANGE_LOG_SPACE`], keyed byte by byte:
//! ```text
//! u64be(commit cluster time, packed as seconds << 32 | increment) u32be(index in commit)
//!     → entry (BSON, below)
//! ```
//! Commit times are assigned under the store's commit lock in commit order, so key order is
//! commit order, and one commit's entries (a multi-document transaction's, or a DDL's several)
//! are contiguous and numbered in the order they happened.
//!
//! An entry is a BSON document:
//! `{op, ns: "db.coll", ui?: UUID, key?: {_id}, doc?, upd?, pre?, post?, to?, desc?, lsid?,
//! txnNumber?, wall: Date}` where `op` is `i` (insert: `doc` is the document), `u` (update:
//! `upd` the update description of [`crate::diff`]), `r` (replace: `doc` the new document),
//! `d` (delete), or a DDL name — `create`, `drop`, `rename` (`to` the target namespace),
//! `dropDatabase`, `createIndexes`, `dropIndexes`, `modify` — with `desc` its
//! `operationDescription`. `pre`/`post` are the document before and after the change when the
//! collection has `changeStreamPreAndPostImages` enabled. `lsid`/`txnNumber` mark the entries
//! of a session's transaction.
//!
//! # Retention
//! [`crate::store::Store::trim_change_log`] deletes the oldest entries beyond a size budget and
//! records, in the catalog key `'L'`, the commit time through which the log was trimmed: a
//! change stream resuming at or before it gets ChangeStreamHistoryLost.
//!
//! Invariants: an entry exists if and only if its write committed; entries are never
//! rewritten; trimming only removes a prefix.

use std::ops::Bound;

use bson::raw::cstr;
use bson::spec::BinarySubtype;
use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::catalog::CollectionMeta;
use crate::engine::{CATALOG_SPACE, Read, SpaceId};
use crate::error::{Result, StorageError};

/// The change log's space (reserved: never allocated to a collection or index).
pub const CHANGE_LOG_SPACE: SpaceId = u64::MAX - 1;

/// Catalog key of the commit time through which the log has been trimmed.
pub const TRIMMED_KEY: &[u8] = b"L";

/// A position in the log: (packed commit time, index in the commit).
pub type Position = (u64, u32);

/// The key of an entry.
pub fn key(pos: Position) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..8].copy_from_slice(&pos.0.to_be_bytes());
    k[8..].copy_from_slice(&pos.1.to_be_bytes());
    k
}

/// The position of a key.
pub fn position(k: &[u8]) -> Option<Position> {
    let ts = <[u8; 8]>::try_from(k.get(..8)?).ok()?;
    let i = <[u8; 4]>::try_from(k.get(8..12)?).ok()?;
    Some((u64::from_be_bytes(ts), u32::from_be_bytes(i)))
}

/// A change being recorded by a transaction (it gets its position at commit).
#[derive(Debug, Clone)]
pub struct Change(pub RawDocumentBuf);

fn uuid(bytes: &[u8; 16]) -> bson::Binary {
    bson::Binary {
        subtype: BinarySubtype::Uuid,
        bytes: bytes.to_vec(),
    }
}

impl Change {
    /// A change of `op` on collection `coll`.
    pub fn on(op: &str, coll: &CollectionMeta) -> Change {
        let mut d = RawDocumentBuf::new();
        d.append(cstr!("op"), op);
        d.append(cstr!("ns"), coll.namespace());
        d.append(cstr!("ui"), uuid(&coll.uuid));
        Change(d)
    }

    /// A change of `op` on a namespace without a collection record (`dropDatabase`).
    pub fn on_ns(op: &str, ns: &str) -> Change {
        let mut d = RawDocumentBuf::new();
        d.append(cstr!("op"), op);
        d.append(cstr!("ns"), ns);
        Change(d)
    }

    /// Appends a field.
    pub fn with(self, name: &'static str, value: impl Into<RawBson>) -> Change {
        self.with_ref(name, value.into().as_raw_bson_ref())
    }

    /// Appends a field whose value is borrowed (a document being written is copied once,
    /// into the entry, not first into an owned value).
    pub fn with_ref(mut self, name: &'static str, value: RawBsonRef<'_>) -> Change {
        if let Ok(k) = <&bson::raw::CStr>::try_from(name) {
            self.0.append(k, value);
        }
        self
    }

    /// Writes the stored entry — this change's fields, then `wall` — into `out` (cleared
    /// first), so a commit needs no copy of the change beyond the bytes it stores.
    pub fn entry_into(&self, wall: bson::DateTime, out: &mut Vec<u8>) {
        let body = self.0.as_bytes();
        out.clear();
        out.reserve(body.len() + 14);
        // the document without its trailing NUL, the `wall` element, the NUL, then the
        // length fixed up
        out.extend_from_slice(&body[..body.len() - 1]);
        out.push(bson::spec::ElementType::DateTime as u8);
        out.extend_from_slice(b"wall\0");
        out.extend_from_slice(&wall.timestamp_millis().to_le_bytes());
        out.push(0);
        let len = i32::try_from(out.len()).unwrap_or(i32::MAX);
        out[..4].copy_from_slice(&len.to_le_bytes());
    }

    /// Marks the change as part of a session's transaction.
    pub fn in_txn(self, lsid: &[u8; 16], txn_number: i64) -> Change {
        let uid = bson::Binary {
            subtype: BinarySubtype::Generic,
            bytes: crate::sessions::NO_AUTH_UID.to_vec(),
        };
        self.with("lsid", bson::rawdoc! {"id": uuid(lsid), "uid": uid})
            .with("txnNumber", txn_number)
    }
}

/// The `{_id: v}` document key of a document.
pub fn document_key(doc: &RawDocument) -> RawDocumentBuf {
    let mut k = RawDocumentBuf::new();
    if let Ok(Some(id)) = doc.get("_id") {
        k.append(cstr!("_id"), id);
    }
    k
}

/// Reads up to `max` entries after `after` (exclusive; from the start when `None`) on `r`.
pub fn read(
    r: &dyn Read,
    after: Option<Position>,
    max: usize,
) -> Result<Vec<(Position, RawDocumentBuf)>> {
    let start = after.map(key);
    let lower = match &start {
        Some(k) => Bound::Excluded(&k[..]),
        None => Bound::Unbounded,
    };
    let mut out = Vec::new();
    for kv in r.range(CHANGE_LOG_SPACE, lower, Bound::Unbounded, false)? {
        let (k, v) = kv?;
        let pos = position(&k).ok_or_else(|| StorageError::Corrupt("change log key".into()))?;
        let d = RawDocumentBuf::from_bytes(v.to_vec())
            .map_err(|e| StorageError::Corrupt(e.to_string()))?;
        out.push((pos, d));
        if out.len() >= max {
            break;
        }
    }
    Ok(out)
}

/// The packed commit time through which the log has been trimmed (0: never).
pub fn trimmed_through(r: &dyn Read) -> Result<u64> {
    Ok(r.get(CATALOG_SPACE, TRIMMED_KEY)?
        .and_then(|b| <[u8; 8]>::try_from(&*b).ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0))
}

/// Whether a collection records pre- and post-images (`changeStreamPreAndPostImages`).
pub fn wants_images(coll: &CollectionMeta) -> bool {
    matches!(
        coll.options.get("changeStreamPreAndPostImages"),
        Ok(Some(RawBsonRef::Document(d))) if matches!(d.get("enabled"), Ok(Some(RawBsonRef::Boolean(true))))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_is_the_change_then_wall() {
        let c = Change(bson::rawdoc! {"op": "i", "doc": {"_id": 1, "a": "x"}});
        let wall = bson::DateTime::from_millis(1_700_000_000_123);
        let mut out = vec![9, 9, 9];
        c.entry_into(wall, &mut out);
        let mut want = c.0.clone();
        want.append(cstr!("wall"), wall);
        assert_eq!(out, want.as_bytes());
        assert!(RawDocumentBuf::from_bytes(out).is_ok());
        let empty = Change(RawDocumentBuf::new());
        let mut out = Vec::new();
        empty.entry_into(wall, &mut out);
        assert_eq!(out, bson::rawdoc! {"wall": wall}.as_bytes());
    }

    #[test]
    fn keys_order_by_position() {
        let a = key((5, 1));
        let b = key((5, 2));
        let c = key((6, 0));
        assert!(a < b && b < c);
        assert_eq!(position(&b), Some((5, 2)));
        assert_eq!(position(&[1, 2]), None);
    }
}
