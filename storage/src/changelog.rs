//! The change log (the single node's oplog): every committed write, in commit order, written
//! in the same storage transaction as the write itself, so change streams can never disagree
//! with the data.
//!
//! # Layout
//! The log is its own space, [`CHANGE_LOG_SPACE`], keyed byte by byte:
//! ```text
//! u64be(commit cluster time, packed as seconds << 32 | increment) u32be(index in commit of
//!     the chunk's first entry) → chunk: entries (BSON, below), concatenated in order
//! ```
//! Commit times are assigned under the store's commit lock in commit order, so key order is
//! commit order, and one commit's entries (a batch insert's, a multi-document transaction's,
//! or a DDL's several) are contiguous and numbered in the order they happened. A commit's
//! entries are stored in as few keys as possible: a chunk takes the next entries of its commit
//! while it stays within [`CHUNK_BYTES`] (an entry larger than that is a chunk of its own), so
//! a batch of 1,000 small inserts writes a handful of keys, not 1,000. The entry at
//! (time, i) is the `i - first`-th entry of the chunk keyed (time, first) with the greatest
//! `first` ≤ `i`; positions, not keys, are what readers see and resume tokens name.
//!
//! Directories written before catalog version 4 hold one key per entry: exactly the chunks of
//! one entry, so both layouts read through the same code.
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
//! [`crate::store::Store::trim_change_log`] deletes the oldest commits' chunks beyond a size
//! budget and
//! records, in the catalog key `'L'`, the commit time through which the log was trimmed: a
//! change stream resuming at or before it gets ChangeStreamHistoryLost.
//!
//! Invariants: an entry exists if and only if its write committed; entries (and chunks) are
//! never rewritten; a chunk never spans two commits; trimming only removes a prefix of whole
//! commits.

use std::ops::Bound;

use bson::raw::cstr;
use bson::spec::{BinarySubtype, ElementType};
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

/// Upper bound of a chunk's bytes (see the module docs): large enough that a batch's entries
/// take few keys, small enough that no value is huge and a reader resuming inside a commit
/// reads at most this much before its entry.
pub const CHUNK_BYTES: usize = 256 << 10;

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
        Change::on_sized(op, coll, 0)
    }

    /// A change of `op` on `coll` with room for `extra` more bytes of fields.
    fn on_sized(op: &str, coll: &CollectionMeta, extra: usize) -> Change {
        // op, ns and ui elements with their names, types and lengths
        let head = 4 + (4 + 4 + op.len() + 1) + (4 + 4 + coll.db.len() + coll.name.len() + 2);
        let mut d = crate::doc::document_with_capacity(head + 25 + extra + 1);
        d.append(cstr!("op"), op);
        d.append(cstr!("ns"), coll.namespace());
        d.append(
            cstr!("ui"),
            bson::RawBinaryRef {
                subtype: BinarySubtype::Uuid,
                bytes: &coll.uuid,
            },
        );
        Change(d)
    }

    /// The change of inserting `doc` (its first field is `_id`): `{op: "i", ns, ui, key:
    /// {_id}, doc}`, written straight into one buffer of the right size (the `_id` element
    /// and the document copied as they are).
    pub fn insert(coll: &CollectionMeta, doc: &RawDocument) -> Change {
        if let Some(c) = Self::insert_direct(coll, doc) {
            return c;
        }
        let key = document_key(doc);
        let extra = (1 + 4 + key.as_bytes().len()) + (1 + 4 + doc.as_bytes().len());
        let mut c = Change::on_sized("i", coll, extra);
        c.0.append(cstr!("key"), &*key);
        c.0.append(cstr!("doc"), doc);
        c
    }

    /// [`Change::insert`] for a document whose first field is `_id`; `None` otherwise.
    fn insert_direct(coll: &CollectionMeta, doc: &RawDocument) -> Option<Change> {
        let bytes = doc.as_bytes();
        let id = crate::doc::first_element(bytes)?;
        if id.get(1..5) != Some(b"_id\0") {
            return None;
        }
        let ns_len = coll.db.len() + 1 + coll.name.len() + 1;
        let key_len = 4 + id.len() + 1;
        let size = 4
            + (1 + 3 + 4 + 2)
            + (1 + 3 + 4 + ns_len)
            + (1 + 3 + 4 + 1 + 16)
            + (1 + 4 + key_len)
            + (1 + 4 + bytes.len())
            + 1;
        let le = |n: usize| i32::try_from(n).ok().map(i32::to_le_bytes);
        let (size_le, ns_le, key_le) = (le(size)?, le(ns_len)?, le(key_len)?);
        let mut v = Vec::with_capacity(size);
        v.extend_from_slice(&size_le);
        v.push(ElementType::String as u8);
        v.extend_from_slice(b"op\0");
        v.extend_from_slice(&2i32.to_le_bytes());
        v.extend_from_slice(b"i\0");
        v.push(ElementType::String as u8);
        v.extend_from_slice(b"ns\0");
        v.extend_from_slice(&ns_le);
        v.extend_from_slice(coll.db.as_bytes());
        v.push(b'.');
        v.extend_from_slice(coll.name.as_bytes());
        v.push(0);
        v.push(ElementType::Binary as u8);
        v.extend_from_slice(b"ui\0");
        v.extend_from_slice(&16i32.to_le_bytes());
        v.push(u8::from(BinarySubtype::Uuid));
        v.extend_from_slice(&coll.uuid);
        v.push(ElementType::EmbeddedDocument as u8);
        v.extend_from_slice(b"key\0");
        v.extend_from_slice(&key_le);
        v.extend_from_slice(id);
        v.push(0);
        v.push(ElementType::EmbeddedDocument as u8);
        v.extend_from_slice(b"doc\0");
        v.extend_from_slice(bytes);
        v.push(0);
        RawDocumentBuf::from_bytes(v).ok().map(Change)
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

    /// Appends the stored entry — this change's fields, then `wall` — to `out`, so a commit
    /// needs no copy of the change beyond the bytes it stores.
    pub fn append_entry(&self, wall: bson::DateTime, out: &mut Vec<u8>) {
        let body = self.0.as_bytes();
        let start = out.len();
        out.reserve(body.len() + 14);
        // the document without its trailing NUL, the `wall` element, the NUL, then the
        // length fixed up
        out.extend_from_slice(&body[..body.len() - 1]);
        out.push(bson::spec::ElementType::DateTime as u8);
        out.extend_from_slice(b"wall\0");
        out.extend_from_slice(&wall.timestamp_millis().to_le_bytes());
        out.push(0);
        let len = i32::try_from(out.len() - start).unwrap_or(i32::MAX);
        out[start..start + 4].copy_from_slice(&len.to_le_bytes());
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

/// Builds the chunks of one commit's `changes` (stamped with `wall`), each at most `bound`
/// bytes unless a single entry is larger, and hands each to `put` with its key's position
/// `(at, index of its first entry)`. `buf` is the reusable chunk buffer. Returns the bytes
/// handed over, keys included.
pub fn write_chunks<E>(
    at: u64,
    wall: bson::DateTime,
    changes: &[Change],
    bound: usize,
    buf: &mut Vec<u8>,
    mut put: impl FnMut(Position, &[u8]) -> std::result::Result<(), E>,
) -> std::result::Result<u64, E> {
    let mut bytes = 0u64;
    let mut first = 0u32;
    buf.clear();
    let total: usize = changes.iter().map(|c| c.0.as_bytes().len() + 14).sum();
    buf.reserve(total.min(bound));
    for (i, c) in changes.iter().enumerate() {
        let i = u32::try_from(i).unwrap_or(u32::MAX);
        // the entry's size: the change, then the 14 bytes of `wall`
        let size = c.0.as_bytes().len() + 14;
        if !buf.is_empty() && buf.len() + size > bound {
            put((at, first), buf)?;
            bytes += buf.len() as u64 + 12;
            buf.clear();
            first = i;
        }
        c.append_entry(wall, buf);
    }
    if !buf.is_empty() {
        put((at, first), buf)?;
        bytes += buf.len() as u64 + 12;
    }
    Ok(bytes)
}

/// The entries of a chunk, in order (each checked to be a well-formed BSON document).
pub fn entries(chunk: &[u8]) -> impl Iterator<Item = Result<&RawDocument>> {
    let mut rest = chunk;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let len = rest
            .get(..4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(i32::from_le_bytes)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n >= 5 && *n <= rest.len());
        let Some(len) = len else {
            rest = &[];
            return Some(Err(StorageError::Corrupt(
                "change log chunk: bad entry length".into(),
            )));
        };
        let (entry, tail) = rest.split_at(len);
        rest = tail;
        Some(RawDocument::from_bytes(entry).map_err(|e| StorageError::Corrupt(e.to_string())))
    })
}

/// The position of the `j`-th entry of the chunk keyed `first`.
fn nth(first: Position, j: usize) -> Result<Position> {
    u32::try_from(j)
        .ok()
        .and_then(|j| first.1.checked_add(j))
        .map(|i| (first.0, i))
        .ok_or_else(|| StorageError::Corrupt("change log chunk: index overflow".into()))
}

/// The key of the chunk holding the entry at `pos`, if that commit has a chunk at or before
/// it.
fn chunk_at(r: &dyn Read, pos: Position) -> Result<Option<[u8; 12]>> {
    let k = key(pos);
    let mut it = r.range(
        CHANGE_LOG_SPACE,
        Bound::Unbounded,
        Bound::Included(&k[..]),
        true,
    )?;
    let Some(kv) = it.next() else {
        return Ok(None);
    };
    let (found, _) = kv?;
    let first = position(&found).ok_or_else(|| StorageError::Corrupt("change log key".into()))?;
    Ok((first.0 == pos.0).then(|| key(first)))
}

/// Reads up to `max` entries after `after` (exclusive; from the start when `None`) on `r`.
pub fn read(
    r: &dyn Read,
    after: Option<Position>,
    max: usize,
) -> Result<Vec<(Position, RawDocumentBuf)>> {
    // Resuming inside a commit starts at the chunk holding `after`; past a whole commit
    // (index u32::MAX) no chunk of it is read.
    let start = match after {
        Some(p) if p.1 != u32::MAX => chunk_at(r, p)?,
        _ => None,
    };
    let after_key = after.map(key);
    let lower = match (&start, &after_key) {
        (Some(k), _) => Bound::Included(&k[..]),
        (None, Some(k)) => Bound::Excluded(&k[..]),
        (None, None) => Bound::Unbounded,
    };
    let mut out = Vec::new();
    if max == 0 {
        return Ok(out);
    }
    for kv in r.range(CHANGE_LOG_SPACE, lower, Bound::Unbounded, false)? {
        let (k, v) = kv?;
        let first = position(&k).ok_or_else(|| StorageError::Corrupt("change log key".into()))?;
        for (j, e) in entries(&v).enumerate() {
            let pos = nth(first, j)?;
            let e = e?;
            if after.is_some_and(|a| pos <= a) {
                continue;
            }
            out.push((pos, e.to_owned()));
            if out.len() >= max {
                return Ok(out);
            }
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
        c.append_entry(wall, &mut out);
        let mut want = c.0.clone();
        want.append(cstr!("wall"), wall);
        assert_eq!(&out[..3], [9, 9, 9]);
        assert_eq!(&out[3..], want.as_bytes());
        assert!(RawDocumentBuf::from_bytes(out[3..].to_vec()).is_ok());
        let empty = Change(RawDocumentBuf::new());
        let mut out = Vec::new();
        empty.append_entry(wall, &mut out);
        assert_eq!(out, bson::rawdoc! {"wall": wall}.as_bytes());
    }

    #[test]
    fn an_insert_change_is_op_ns_ui_key_doc() {
        let mut coll = CollectionMeta {
            id: 3,
            db: "db".into(),
            name: "c".into(),
            uuid: [7; 16],
            options: RawDocumentBuf::new(),
            created: bson::DateTime::from_millis(0),
            indexes: Vec::new(),
            pack_threshold: 0,
            natural: None,
        };
        for doc in [
            bson::rawdoc! {"_id": 1, "a": "x"},
            bson::rawdoc! {"_id": {"k": [1, 2]}},
            bson::rawdoc! {"x": 1},
            bson::rawdoc! {"_idx": 1, "_id": 2},
            bson::rawdoc! {"_id": "s", "t": [1, {"u": null}], "v": 1.5},
        ] {
            let c = Change::insert(&coll, &doc);
            let want = bson::rawdoc! {
                "op": "i",
                "ns": "db.c",
                "ui": bson::Binary { subtype: BinarySubtype::Uuid, bytes: vec![7; 16] },
                "key": document_key(&doc),
                "doc": doc.clone(),
            };
            assert_eq!(c.0.as_bytes(), want.as_bytes());
            assert!(c.0.as_bytes().len() <= 128 + doc.as_bytes().len() * 2);
        }
        coll.name = "x".repeat(200);
        let c = Change::on("drop", &coll);
        assert_eq!(c.0.get_str("ns").unwrap(), format!("db.{}", coll.name));
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

    use crate::engine::Engine;
    use crate::engine::memory::MemoryEngine;

    fn change(i: usize, pad: usize) -> Change {
        Change(bson::rawdoc! {"op": "i", "n": i as i64, "pad": "x".repeat(pad)})
    }

    /// Writes one commit's changes as chunks of at most `bound` bytes; returns the chunk keys.
    fn commit(e: &MemoryEngine, at: u64, changes: &[Change], bound: usize) -> Vec<Position> {
        let mut tx = e.begin().unwrap();
        let mut keys = Vec::new();
        let mut buf = Vec::new();
        let wall = bson::DateTime::from_millis(at as i64);
        write_chunks(at, wall, changes, bound, &mut buf, |pos, chunk| {
            keys.push(pos);
            tx.put(CHANGE_LOG_SPACE, &key(pos), chunk)
        })
        .unwrap();
        tx.commit().unwrap();
        keys
    }

    fn engine() -> MemoryEngine {
        let e = MemoryEngine::new();
        e.open_space(CHANGE_LOG_SPACE).unwrap();
        e
    }

    /// `c`'s log entry as a commit at wall time 0 writes it.
    fn entry_bytes(c: Change) -> Vec<u8> {
        let mut v = Vec::new();
        c.append_entry(bson::DateTime::from_millis(0), &mut v);
        v
    }

    fn n_of(d: &RawDocument) -> i64 {
        d.get_i64("n").unwrap()
    }

    #[test]
    fn a_commit_is_split_into_chunks_at_the_bound() {
        let e = engine();
        // each entry is 60 bytes with `wall` (pad 10): three fit in a chunk of 190, not four
        let size = entry_bytes(change(0, 10)).len();
        assert_eq!(size, 60);
        let mut changes: Vec<Change> = (0..7).map(|i| change(i, 10)).collect();
        // an entry over the bound is a chunk alone
        changes.insert(4, change(4, 500));
        let keys = commit(&e, 7 << 32, &changes, 190);
        assert_eq!(
            keys,
            [(7 << 32, 0), (7 << 32, 3), (7 << 32, 4), (7 << 32, 5)]
        );
        let snap = e.snapshot().unwrap();
        let chunks: Vec<(Position, Vec<i64>)> = snap
            .range(CHANGE_LOG_SPACE, Bound::Unbounded, Bound::Unbounded, false)
            .unwrap()
            .map(|kv| {
                let (k, v) = kv.unwrap();
                let ns = entries(&v).map(|d| n_of(d.unwrap())).collect();
                (position(&k).unwrap(), ns)
            })
            .collect();
        assert_eq!(
            chunks,
            [
                ((7 << 32, 0), vec![0, 1, 2]),
                ((7 << 32, 3), vec![3]),
                ((7 << 32, 4), vec![4]),
                ((7 << 32, 5), vec![4, 5, 6]),
            ]
        );
        // every entry ends with `wall`
        let all = read(&*snap, None, 100).unwrap();
        assert!(all.iter().all(|(_, d)| d.get_datetime("wall").is_ok()));
        // no commit writes nothing
        assert!(commit(&e, 8 << 32, &[], 190).is_empty());
    }

    /// Reading after any position, inside or between chunks, in the chunked layout and in the
    /// one-key-per-entry layout of older directories, gives exactly the entries after it.
    #[test]
    fn reads_resume_at_any_position_in_both_layouts() {
        let e = engine();
        let mut want: Vec<(Position, i64)> = Vec::new();
        let mut n = 0i64;
        let mut add = |at: u64, count: usize, bound: usize, want: &mut Vec<(Position, i64)>| {
            let changes: Vec<Change> = (0..count)
                .map(|i| {
                    n += 1;
                    want.push(((at, i as u32), n));
                    Change(bson::rawdoc! {"op": "i", "n": n})
                })
                .collect();
            commit(&e, at, &changes, bound);
        };
        add(5 << 32, 1, CHUNK_BYTES, &mut want);
        // one entry per key: the layout before catalog version 4
        add(6 << 32, 4, 1, &mut want);
        add((6 << 32) + 1, 10, 120, &mut want);
        add(9 << 32, 10, CHUNK_BYTES, &mut want);
        let snap = e.snapshot().unwrap();
        let got = |after: Option<Position>, max: usize| -> Vec<(Position, i64)> {
            read(&*snap, after, max)
                .unwrap()
                .into_iter()
                .map(|(p, d)| (p, n_of(&d)))
                .collect()
        };
        assert_eq!(got(None, 1000), want);
        for max in 0..want.len() + 2 {
            assert_eq!(got(None, max), want[..max.min(want.len())]);
        }
        for (i, (p, _)) in want.iter().enumerate() {
            assert_eq!(got(Some(*p), 1000), want[i + 1..], "after {p:?}");
            assert_eq!(got(Some(*p), 3), want[i + 1..(i + 4).min(want.len())]);
        }
        // positions between and past commits
        assert_eq!(got(Some((6 << 32, u32::MAX)), 1000), want[5..]);
        assert_eq!(got(Some((7 << 32, 0)), 1000), want[15..]);
        assert_eq!(got(Some((4 << 32, 7)), 1000), want);
        assert_eq!(got(Some((9 << 32, 10)), 1000), []);
        assert_eq!(got(Some((u64::MAX, u32::MAX)), 1000), []);
    }

    #[test]
    fn a_malformed_chunk_is_corrupt_not_a_panic() {
        let e = engine();
        let good = entry_bytes(change(1, 0));
        for bad in [
            vec![1u8, 2],
            vec![0xFF, 0xFF, 0xFF, 0xFF, 0],
            [good.clone(), vec![200, 0, 0, 0, 0]].concat(),
            [good.clone(), good[..good.len() - 1].to_vec()].concat(),
            vec![5, 0, 0, 0, 1],
        ] {
            let mut tx = e.begin().unwrap();
            tx.put(CHANGE_LOG_SPACE, &key((1, 0)), &bad).unwrap();
            tx.commit().unwrap();
            let snap = e.snapshot().unwrap();
            assert!(
                matches!(read(&*snap, None, 100), Err(StorageError::Corrupt(_))),
                "{bad:?}"
            );
        }
    }
}
