//! Capped collections: insertion order, and the size and count limits.
//!
//! A capped collection has, besides its document space, a *natural-order space*
//! ([`CollectionMeta::natural`]) holding, byte by byte:
//! ```text
//! 0x00                  → u64be(next record id)
//! 0x01 u64be(record id) → E(_id)          insertion order
//! 0x02 E(_id)           → u64be(record id) the way back, for deletes
//! ```
//! Record ids grow with every insert and are never reused; the counter is read and bumped in
//! the inserting transaction, so concurrent inserts into one capped collection serialize by
//! conflict, as MongoDB serializes them. After an insert, while the collection's BSON bytes
//! exceed `size` or its documents exceed `max`, the oldest documents are deleted in the same
//! transaction (through the normal delete path, so indexes, statistics and the change log see
//! them); the document just inserted is never removed.
//!
//! A full collection scan of a capped collection reads in natural order ([`scan_natural`]);
//! tailable cursors follow new documents with [`tail`], and find their position gone
//! ([`position_exists`]) when it was deleted to make room (CappedPositionLost).

use std::ops::Bound;

use bson::{RawBsonRef, RawDocumentBuf};

use crate::catalog::{CollectionMeta, read_stats};
use crate::engine::{Read, SpaceId};
use crate::error::{Result, StorageError};
use crate::store::{ScanBatch, ScanLimits, WriteTxn, get_document};

const NEXT: u8 = 0x00;
const ORDER: u8 = 0x01;
const BACK: u8 = 0x02;

/// The natural-order key of record `rid`.
pub fn order_key(rid: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = ORDER;
    k[1..].copy_from_slice(&rid.to_be_bytes());
    k
}

fn back_key(doc_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(doc_key.len() + 1);
    k.push(BACK);
    k.extend_from_slice(doc_key);
    k
}

fn rid_of(order: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(order.get(1..9)?)
        .ok()
        .map(u64::from_be_bytes)
}

/// The limits of a capped collection: (`size` in bytes, `max` documents).
pub fn limits(coll: &CollectionMeta) -> Option<(i64, Option<i64>)> {
    coll.natural?;
    let num = |f: &str| match coll.options.get(f) {
        Ok(Some(RawBsonRef::Int32(i))) => Some(i64::from(i)),
        Ok(Some(RawBsonRef::Int64(i))) => Some(i),
        Ok(Some(RawBsonRef::Double(d))) => Some(d as i64),
        _ => None,
    };
    let size = num("size").unwrap_or(i64::MAX);
    let max = num("max").filter(|m| *m > 0);
    Some((size, max))
}

impl WriteTxn<'_> {
    /// Records a new document (key `doc_key`) at the end of a capped collection's natural
    /// order, then deletes the oldest documents beyond the collection's limits.
    pub(crate) fn capped_append(&mut self, coll: &CollectionMeta, doc_key: &[u8]) -> Result<()> {
        let (Some(space), Some((size, max))) = (coll.natural, limits(coll)) else {
            return Ok(());
        };
        // Record ids are never reused (a tailable cursor positioned on a deleted newest
        // document must not skip its successor); reading and bumping the counter is also what
        // makes concurrent inserts into one capped collection conflict, so they serialize.
        let rid = match self.tx.get(space, &[NEXT])? {
            Some(v) => <[u8; 8]>::try_from(&*v)
                .map(u64::from_be_bytes)
                .map_err(|_| StorageError::Corrupt("capped record counter".into()))?,
            None => 1,
        };
        self.tx.put(space, &[NEXT], &(rid + 1).to_be_bytes())?;
        self.tx.put(space, &order_key(rid), doc_key)?;
        self.tx.put(space, &back_key(doc_key), &rid.to_be_bytes())?;
        // The collection's totals as this transaction sees them, its own changes included.
        let (mut stats, _, _) = read_stats(&*self.tx, coll.id)?;
        if let Some(d) = self.deltas.get(&coll.id) {
            stats.add(*d);
        }
        let mut count = stats.count;
        let mut bytes = stats.size;
        while bytes > size || max.is_some_and(|m| count > m) {
            let Some((k, v)) = self
                .tx
                .range(
                    space,
                    Bound::Included(&[ORDER][..]),
                    Bound::Excluded(&[BACK][..]),
                    false,
                )?
                .next()
                .transpose()?
            else {
                break;
            };
            if rid_of(&k) == Some(rid) {
                break;
            }
            let old_key = v.to_vec();
            let before = self.deltas.get(&coll.id).copied().unwrap_or_default();
            if !self.delete_by_key(coll, &old_key)? {
                // An order entry without its document: drop the entry.
                self.tx.delete(space, &k)?;
                continue;
            }
            let after = self.deltas.get(&coll.id).copied().unwrap_or_default();
            count += after.count - before.count;
            bytes += after.size - before.size;
        }
        Ok(())
    }

    /// Removes a deleted document from a capped collection's natural order.
    pub(crate) fn capped_remove(&mut self, coll: &CollectionMeta, doc_key: &[u8]) -> Result<()> {
        let Some(space) = coll.natural else {
            return Ok(());
        };
        let back = back_key(doc_key);
        if let Some(rid) = self.tx.get(space, &back)? {
            let rid = <[u8; 8]>::try_from(&*rid)
                .map(u64::from_be_bytes)
                .map_err(|_| StorageError::Corrupt("capped record id".into()))?;
            self.tx.delete(space, &order_key(rid))?;
            self.tx.delete(space, &back)?;
        }
        Ok(())
    }
}

/// One batch of a natural-order scan of a capped collection, with [`ScanBatch`]'s
/// semantics: a forward `resume` is the inclusive order key to start at, a reverse one the
/// exclusive order key to end before.
pub fn scan_natural(
    r: &dyn Read,
    coll: &CollectionMeta,
    space: SpaceId,
    resume: Option<&[u8]>,
    reverse: bool,
    limits: ScanLimits,
    pred: &mut dyn FnMut(&bson::RawDocument) -> bool,
) -> Result<ScanBatch> {
    let mut out = ScanBatch {
        docs: Vec::new(),
        resume: None,
        examined: 0,
    };
    if limits.max_docs == 0 {
        return Err(StorageError::BadValue(
            "a scan batch needs max_docs >= 1".into(),
        ));
    }
    let (lo, hi) = if reverse {
        (
            Bound::Included(&[ORDER][..]),
            resume.map_or(Bound::Excluded(&[BACK][..]), Bound::Excluded),
        )
    } else {
        (
            resume.map_or(Bound::Included(&[ORDER][..]), Bound::Included),
            Bound::Excluded(&[BACK][..]),
        )
    };
    let mut bytes = 0usize;
    for kv in r.range(space, lo, hi, reverse)? {
        let (k, doc_key) = kv?;
        let Some(doc) = get_document(r, coll.id, &doc_key)? else {
            continue;
        };
        if !pred(&doc) {
            out.examined += 1;
            if out.examined >= limits.max_examined {
                out.resume = next_resume(&k, reverse);
                return Ok(out);
            }
            continue;
        }
        let len = doc.as_bytes().len();
        if out.docs.len() >= limits.max_docs
            || ((!out.docs.is_empty() || !limits.first_may_exceed)
                && bytes.saturating_add(len) > limits.max_bytes)
        {
            // It belongs to the next batch.
            out.resume = Some(if reverse {
                next_resume(&k, false).unwrap_or_default()
            } else {
                k.to_vec()
            });
            return Ok(out);
        }
        out.examined += 1;
        bytes += len;
        out.docs.push(doc);
        if out.docs.len() >= limits.max_docs
            || bytes >= limits.max_bytes
            || out.examined >= limits.max_examined
        {
            out.resume = next_resume(&k, reverse);
            return Ok(out);
        }
    }
    Ok(out)
}

/// The resume key after having consumed order key `k`: the next key up (forward, inclusive
/// start) or `k` itself (reverse, exclusive end).
fn next_resume(k: &[u8], reverse: bool) -> Option<Vec<u8>> {
    if reverse {
        return Some(k.to_vec());
    }
    rid_of(k).map(|rid| order_key(rid.saturating_add(1)).to_vec())
}

/// Documents inserted after record `after` (all when `None`), at most `max`, with their
/// record ids, in insertion order (tailable cursors).
pub fn tail(
    r: &dyn Read,
    coll: &CollectionMeta,
    after: Option<u64>,
    max: usize,
) -> Result<Vec<(u64, RawDocumentBuf)>> {
    let Some(space) = coll.natural else {
        return Ok(Vec::new());
    };
    let start = after.map(|a| order_key(a.saturating_add(1)));
    let lo = match &start {
        Some(k) => Bound::Included(&k[..]),
        None => Bound::Included(&[ORDER][..]),
    };
    let mut out = Vec::new();
    for kv in r.range(space, lo, Bound::Excluded(&[BACK][..]), false)? {
        let (k, doc_key) = kv?;
        let Some(rid) = rid_of(&k) else { continue };
        if let Some(doc) = get_document(r, coll.id, &doc_key)? {
            out.push((rid, doc));
        }
        if out.len() >= max {
            break;
        }
    }
    Ok(out)
}

/// What [`check_natural`] found in a capped collection's natural-order space.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NaturalCheck {
    /// Insertion-order entries.
    pub order_entries: u64,
    /// Way-back entries.
    pub back_entries: u64,
    /// Order entries whose document is gone.
    pub dangling: u64,
    /// Order entries whose way-back entry is missing or names another record.
    pub unpaired: u64,
    /// The record-id counter is not above every record id.
    pub counter_behind: bool,
}

/// Walks a capped collection's natural-order space (`None` for other collections): every
/// order entry must name an existing document and be paired with its way-back entry, and the
/// counter must be above every record id. The caller compares the entry counts with the
/// documents it walked.
pub fn check_natural(r: &dyn Read, coll: &CollectionMeta) -> Result<Option<NaturalCheck>> {
    let Some(space) = coll.natural else {
        return Ok(None);
    };
    let mut out = NaturalCheck::default();
    let mut max_rid = 0u64;
    for kv in r.range(
        space,
        Bound::Included(&[ORDER][..]),
        Bound::Excluded(&[BACK][..]),
        false,
    )? {
        let (k, doc_key) = kv?;
        out.order_entries += 1;
        let rid = rid_of(&k).unwrap_or(0);
        max_rid = max_rid.max(rid);
        // Every document has a value at its own key (its root).
        if r.get(coll.id, &doc_key)?.is_none() {
            out.dangling += 1;
        }
        let back = r.get(space, &back_key(&doc_key))?;
        if back.as_deref() != Some(&rid.to_be_bytes()[..]) {
            out.unpaired += 1;
        }
    }
    for kv in r.range(space, Bound::Included(&[BACK][..]), Bound::Unbounded, false)? {
        kv?;
        out.back_entries += 1;
    }
    let next = match r.get(space, &[NEXT])? {
        Some(v) => <[u8; 8]>::try_from(&*v)
            .map(u64::from_be_bytes)
            .unwrap_or(0),
        None => 1,
    };
    out.counter_behind = out.order_entries > 0 && next <= max_rid;
    Ok(Some(out))
}

/// Whether record `rid` is still in the collection (a tailable cursor's position).
pub fn position_exists(r: &dyn Read, coll: &CollectionMeta, rid: u64) -> Result<bool> {
    let Some(space) = coll.natural else {
        return Ok(false);
    };
    Ok(r.get(space, &order_key(rid))?.is_some())
}

impl crate::store::Store {
    /// Creates capped collection `db.to` (`size` bytes, already validated) and copies
    /// `db.from`'s documents into it in `from`'s natural order, chunk by chunk; the oldest are
    /// dropped as the limit requires. `to` keeps `from`'s validation options; the copied
    /// documents are not validated. `from` must exist and `to` must not (NamespaceExists).
    pub fn clone_as_capped(&self, db: &str, from: &str, to: &str, size: i64) -> Result<()> {
        let Some(src) = self.collection(db, from) else {
            return Err(StorageError::NamespaceNotFound(format!(
                "source collection {db}.{from} does not exist"
            )));
        };
        if self.collection(db, to).is_some() {
            return Err(StorageError::NamespaceExists(format!(
                "cloneCollectionAsCapped failed - destination collection {db}.{to} already exists. source collection: {db}.{from}"
            )));
        }
        let mut options = bson::rawdoc! {"capped": true};
        // As MongoDB's `appendNumber` stores it: an int32 within ±2^30.
        match i32::try_from(size) {
            Ok(s) if s.abs() < 1 << 30 => options.append(bson::raw::cstr!("size"), s),
            _ => options.append(bson::raw::cstr!("size"), size),
        }
        // The source's validation options carry over (MongoDB copies the collection's options);
        // the copy itself is not validated.
        for (k, v) in src.options.iter().flatten() {
            if matches!(
                k.as_str(),
                "validator" | "validationLevel" | "validationAction"
            ) {
                options.append(k, v);
            }
        }
        self.create_collection(db, to, &options)?;
        let Some(dst) = self.collection(db, to) else {
            return Err(StorageError::NamespaceNotFound(format!(
                "collection {db}.{to} was dropped concurrently"
            )));
        };
        let mut resume: Option<Vec<u8>> = None;
        loop {
            let read = self.read()?;
            let batch = read.scan_where(
                &src,
                resume.as_deref(),
                false,
                ScanLimits::docs(1000),
                &mut |_| true,
            )?;
            drop(read);
            self.write(crate::Durability::Buffered, |tx| -> Result<()> {
                tx.set_bypass_validation(true);
                for d in &batch.docs {
                    tx.insert(&dst, d)?;
                }
                Ok(())
            })?;
            match batch.resume {
                Some(r) => resume = Some(r),
                None => return Ok(()),
            }
        }
    }
}
