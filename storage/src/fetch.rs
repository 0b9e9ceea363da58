//! Batched document reads: the documents of many keys (an index scan's hits) from one
//! snapshot, in key order.
//!
//! A point read per hit pays the LSM's full lookup each time (bloom probes per table, a block
//! search, a memtable search). [`get_documents`] sorts the keys and reads them in key order
//! with one of two strategies, chosen as it goes by how dense the hits are:
//! - **walk**: one range iterator from the first key to the end of the last document, taking
//!   the targets' nodes and stepping over the documents between them (the analogue of a bitmap
//!   heap scan). While hits are dense, stepping over a few unrelated keys costs less than one
//!   point read;
//! - **point reads in key order**: once more than [`MAX_GAP`] unrelated keys lie between two
//!   targets, the walk stops and the remaining targets are read one by one (still in key
//!   order, so consecutive reads share cached blocks).
//!
//! Before either, a batch of [`MIN_WALK`] keys or more takes the documents whose roots the
//! engine holds in memory ([`Read::get_cached`], the row cache: no LSM lookup, no iterator),
//! and only the others are walked or read. Fewer than [`MIN_WALK`] keys (or misses) go
//! straight to point reads ([`Read::get_many`], which looks the space up once per batch).
//! The result is in the callers' order, one entry per key given (`None` for a key with no
//! document; a key given twice gets the document twice).
//!
//! Invariants: one snapshot (`r`) serves the whole batch, so no document is torn and all of
//! them are as of one moment; every document is decoded exactly as a single read
//! ([`crate::store`]'s `get_document`) decodes it (both end in
//! [`doc::decode_stored_document`]); the walk never reads past the end of the last requested
//! document.

use std::ops::Bound;

use bson::RawDocumentBuf;

use crate::doc;
use crate::engine::{Bytes, Read, SpaceId, prefix_end};
use crate::error::{Result, StorageError};

/// Unrelated keys the walk steps over between two targets before it gives up on walking and
/// reads the rest point by point. Measured on fjall (300k packed documents, flushed, release
/// build): one iterator step costs about a fifth of a point read, and walking contiguous hits
/// took 56 ms of CPU against 92–98 ms by point reads, but hits 10 % dense (nine steps each)
/// took 193–204 ms against 127–133 ms. So the walk goes on only while at least about a third
/// of the keys it steps over are wanted.
pub const MAX_GAP: usize = 2;

/// Below this many distinct keys, point reads: a small batch (a `find` with a small limit)
/// gains little from a walk, and when its hits are sparse the walk's iterator and the steps
/// before it gives up are pure overhead; from this size on they are a small part of the batch.
pub const MIN_WALK: usize = 32;

fn doc_error(e: doc::DocError) -> StorageError {
    StorageError::Corrupt(e.to_string())
}

/// The documents with `keys` (document keys, `E(_id)`), in the order given; see the module
/// docs.
pub fn get_documents(
    r: &dyn Read,
    space: SpaceId,
    keys: &[&[u8]],
) -> Result<Vec<Option<RawDocumentBuf>>> {
    if keys.windows(2).all(|w| w[0] < w[1]) {
        return read_sorted(r, space, keys);
    }
    // Positions in key order; equal keys are read once.
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| keys[a].cmp(keys[b]));
    let mut uniq: Vec<&[u8]> = Vec::with_capacity(keys.len());
    // The index in `uniq` of each position of `order`.
    let mut slot_of: Vec<usize> = Vec::with_capacity(keys.len());
    for &i in &order {
        let k = keys[i];
        if uniq.last() != Some(&k) {
            uniq.push(k);
        }
        slot_of.push(uniq.len() - 1);
    }
    let mut docs = read_sorted(r, space, &uniq)?;
    let mut out: Vec<Option<RawDocumentBuf>> = vec![None; keys.len()];
    for (pos, &i) in order.iter().enumerate().rev() {
        let s = slot_of[pos];
        // The last position of a slot takes the document; earlier duplicates clone it.
        let last_of_slot = slot_of.get(pos + 1) != Some(&s);
        out[i] = if last_of_slot {
            docs[s].take()
        } else {
            out[order[pos + 1]].clone()
        };
    }
    Ok(out)
}

/// The documents of `keys` (strictly ascending), in that order.
///
/// A small batch is point reads ([`Read::get_many`]). A larger one first takes what the
/// engine holds in memory ([`Read::get_cached`]: no LSM lookup, no iterator), then reads the
/// rest as the module docs say: walking them while they are dense, point reads after.
fn read_sorted(
    r: &dyn Read,
    space: SpaceId,
    keys: &[&[u8]],
) -> Result<Vec<Option<RawDocumentBuf>>> {
    let mut roots = Vec::with_capacity(keys.len());
    if keys.len() < MIN_WALK {
        r.get_many(space, keys, &mut roots)?;
        return documents(r, space, keys, roots, std::iter::empty());
    }
    r.get_cached(space, keys, &mut roots)?;
    let misses: Vec<&[u8]> = keys
        .iter()
        .zip(&roots)
        .filter(|(_, root)| root.is_none())
        .map(|(k, _)| *k)
        .collect();
    if misses.is_empty() {
        return documents(r, space, keys, roots, std::iter::empty());
    }
    let mut read = Vec::with_capacity(misses.len());
    if misses.len() >= MIN_WALK {
        walk(r, space, &misses, &mut read)?;
    }
    let rest = misses.get(read.len()..).unwrap_or_default();
    if !rest.is_empty() {
        let mut rest_roots = Vec::with_capacity(rest.len());
        r.get_many(space, rest, &mut rest_roots)?;
        read.extend(documents(r, space, rest, rest_roots, std::iter::empty())?);
    }
    documents(r, space, keys, roots, read.into_iter())
}

/// The documents of `keys`: from the root of each where `roots` holds one (as
/// [`Read::get`] returns it), else the next of `others` (`None` when it has run out).
fn documents(
    r: &dyn Read,
    space: SpaceId,
    keys: &[&[u8]],
    roots: Vec<Option<Bytes>>,
    mut others: impl Iterator<Item = Option<RawDocumentBuf>>,
) -> Result<Vec<Option<RawDocumentBuf>>> {
    let mut out = Vec::with_capacity(keys.len());
    for (k, root) in keys.iter().zip(roots) {
        out.push(match root {
            Some(root) => crate::store::document_from_root(r, space, k, &root)?,
            None => others.next().flatten(),
        });
    }
    Ok(out)
}

/// Walks one iterator over the span of `keys`, pushing their documents onto `out` until the
/// span is done or a gap wider than [`MAX_GAP`] makes point reads cheaper (the caller reads
/// the keys from `out.len()` on).
fn walk(
    r: &dyn Read,
    space: SpaceId,
    keys: &[&[u8]],
    out: &mut Vec<Option<RawDocumentBuf>>,
) -> Result<()> {
    let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
        return Ok(());
    };
    let end = prefix_end(last);
    let hi = match &end {
        Some(e) => Bound::Excluded(e.as_slice()),
        None => Bound::Unbounded,
    };
    let iter = r.range(space, Bound::Included(first), hi, false)?;
    // The nodes of the current target read so far.
    let mut nodes: Vec<(Bytes, Bytes)> = Vec::new();
    let mut gap = 0usize;
    'kv: for kv in iter {
        let (k, v) = kv?;
        loop {
            let Some(target) = keys.get(out.len()) else {
                break 'kv;
            };
            if k.starts_with(target) {
                nodes.push((k, v));
                gap = 0;
                continue 'kv;
            }
            if *k < **target {
                gap += 1;
                if gap > MAX_GAP {
                    return Ok(());
                }
                continue 'kv;
            }
            // Past the target: it is complete (or absent).
            out.push(finish(target, &mut nodes)?);
        }
    }
    if let Some(target) = keys.get(out.len())
        && !nodes.is_empty()
    {
        out.push(finish(target, &mut nodes)?);
    }
    // The span is done: targets not reached have no document.
    out.resize(keys.len(), None);
    Ok(())
}

/// The document made of `nodes` (taken), or `None` when there are none.
fn finish(key: &[u8], nodes: &mut Vec<(Bytes, Bytes)>) -> Result<Option<RawDocumentBuf>> {
    if nodes.is_empty() {
        return Ok(None);
    }
    doc::decode_stored_document(key.len(), nodes.drain(..))
        .map(Some)
        .map_err(doc_error)
}
