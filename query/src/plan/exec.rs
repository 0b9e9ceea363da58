//! Running a plan over a storage snapshot or write transaction, batch by batch.
//!
//! An [`Execution`] never holds storage state between calls: each access remembers the last
//! key it consumed and continues after it, so a cursor can run one batch per snapshot (and
//! pins nothing while idle), and a multi-document write can run chunk by chunk in write
//! transactions. Invariants:
//! - every call does bounded work (`budget` keys plus documents examined), so callers can
//!   check deadlines between calls;
//! - an index scan continues after its last key by binary search over its ranges
//!   ([`split_after`]), never copying the ranges left, so a scan over many ranges stays linear;
//! - an index scan reads, per storage call, as many entries as documents are still wanted
//!   (doubling while entries are rejected, up to `ENTRY_CHUNK`), so a small `limit` reads
//!   only the entries it returns;
//! - an index scan fetches the documents of each chunk of entries as one batch
//!   ([`Source::get_many_by_key`]: in key order from one snapshot, walking the span when the
//!   hits are dense) and hands them on in index order, so a sort provided by the index holds;
//!   it reads no more entries than the work budget can fetch, so no fetched document is
//!   thrown away (except when the byte bound of a batch cuts a chunk);
//! - a document reached twice (multikey entries, `$or` branches) is returned once;
//! - the filter is re-checked on every fetched document unless the plan is exact, and an
//!   evaluation error (`$expr`) fails the execution.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;

use bson::{RawDocument, RawDocumentBuf};
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::index::IndexMeta;
use cairn_storage::index_ops::{IndexHit, KeyRange};
use cairn_storage::store::{id_key, max_lower, min_upper};
use cairn_storage::{ReadTxn, ScanBatch, ScanLimits, StorageError, WriteTxn};

use super::planner::{Access, IndexAccess, NearAccess, Plan};
use crate::error::{QueryError, Result};
use crate::filter::Filter;

/// What an execution reads from: a snapshot ([`ReadTxn`]) or a write transaction
/// ([`WriteTxn`], whose reads then take part in its conflict checks).
pub trait Source {
    /// Documents with keys in `range`, continuing from `resume`.
    fn scan_range(
        &self,
        coll: &CollectionMeta,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        resume: Option<&[u8]>,
        reverse: bool,
        limits: ScanLimits,
        pred: &mut dyn FnMut(&RawDocument) -> bool,
    ) -> std::result::Result<ScanBatch, StorageError>;

    /// Index entries in `ranges` (ascending; read backward with `reverse`), at most `limit`.
    fn index_scan(
        &self,
        idx: &IndexMeta,
        ranges: &[KeyRange],
        reverse: bool,
        limit: usize,
    ) -> std::result::Result<Vec<IndexHit>, StorageError>;

    /// The document with this key.
    fn get_by_key(
        &self,
        coll: &CollectionMeta,
        key: &[u8],
    ) -> std::result::Result<Option<RawDocumentBuf>, StorageError>;

    /// The documents with these keys, in the order given (`None` where there is none). By
    /// default one point read each; a snapshot reads them as one batch in key order.
    fn get_many_by_key(
        &self,
        coll: &CollectionMeta,
        keys: &[&[u8]],
    ) -> std::result::Result<Vec<Option<RawDocumentBuf>>, StorageError> {
        keys.iter().map(|k| self.get_by_key(coll, k)).collect()
    }

    /// This source as one several threads may read at once (a snapshot: every thread sees
    /// the same moment), or `None` (a write transaction, whose reads join its conflict
    /// checks from one thread). Large aggregations read ahead on a second thread through it.
    fn shared(&self) -> Option<&(dyn Source + Sync)> {
        None
    }
}

impl Source for ReadTxn {
    fn scan_range(
        &self,
        coll: &CollectionMeta,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        resume: Option<&[u8]>,
        reverse: bool,
        limits: ScanLimits,
        pred: &mut dyn FnMut(&RawDocument) -> bool,
    ) -> std::result::Result<ScanBatch, StorageError> {
        ReadTxn::scan_range(self, coll, range, resume, reverse, limits, pred)
    }

    fn index_scan(
        &self,
        idx: &IndexMeta,
        ranges: &[KeyRange],
        reverse: bool,
        limit: usize,
    ) -> std::result::Result<Vec<IndexHit>, StorageError> {
        ReadTxn::index_scan(self, idx, ranges, reverse, limit)
    }

    fn get_by_key(
        &self,
        coll: &CollectionMeta,
        key: &[u8],
    ) -> std::result::Result<Option<RawDocumentBuf>, StorageError> {
        ReadTxn::get_by_key(self, coll, key)
    }

    fn get_many_by_key(
        &self,
        coll: &CollectionMeta,
        keys: &[&[u8]],
    ) -> std::result::Result<Vec<Option<RawDocumentBuf>>, StorageError> {
        ReadTxn::get_many_by_key(self, coll, keys)
    }

    fn shared(&self) -> Option<&(dyn Source + Sync)> {
        Some(self)
    }
}

impl Source for WriteTxn<'_> {
    fn scan_range(
        &self,
        coll: &CollectionMeta,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        resume: Option<&[u8]>,
        reverse: bool,
        limits: ScanLimits,
        pred: &mut dyn FnMut(&RawDocument) -> bool,
    ) -> std::result::Result<ScanBatch, StorageError> {
        WriteTxn::scan_range(self, coll, range, resume, reverse, limits, pred)
    }

    fn index_scan(
        &self,
        idx: &IndexMeta,
        ranges: &[KeyRange],
        reverse: bool,
        limit: usize,
    ) -> std::result::Result<Vec<IndexHit>, StorageError> {
        WriteTxn::index_scan(self, idx, ranges, reverse, limit)
    }

    fn get_by_key(
        &self,
        coll: &CollectionMeta,
        key: &[u8],
    ) -> std::result::Result<Option<RawDocumentBuf>, StorageError> {
        WriteTxn::get_by_key(self, coll, key)
    }
}

/// One ring of a `$near` search, as `explain` shows it (`searchIntervals`): distances in the
/// search's own units (meters on the sphere — radians queries included, as MongoDB — or
/// planar units), whether the outer bound was inclusive (the last ring), the documents found
/// in it and those of them returned so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NearInterval {
    /// Inner distance.
    pub min: f64,
    /// Outer distance.
    pub max: f64,
    /// The outer distance counts (the last ring).
    pub max_inclusive: bool,
    /// Documents the ring held.
    pub buffered: u64,
    /// Of those, returned.
    pub returned: u64,
}

/// Work counters of an execution (what `explain` reports).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Index entries read.
    pub keys_examined: u64,
    /// Documents read.
    pub docs_examined: u64,
    /// Entries inside the bounds (what the index scan passed on).
    pub keys_advanced: u64,
    /// Results produced (documents, or counted entries).
    pub advanced: u64,
    /// Documents dropped as already returned.
    pub dups_dropped: u64,
    /// Entries or documents from each `$or` branch: `(keys, docs, advanced)`.
    pub branches: Vec<(u64, u64, u64)>,
    /// The rings a `$near` search read, in order.
    pub near_intervals: Vec<NearInterval>,
}

impl Stats {
    /// Keys plus documents examined: the unit of work.
    pub fn works(&self) -> u64 {
        self.keys_examined + self.docs_examined
    }
}

/// Where one access stands: the range being read and the last key consumed in it.
#[derive(Debug, Clone, Default)]
struct Position {
    range: usize,
    resume: Option<Vec<u8>>,
    done: bool,
}

/// Index entries read per storage call.
const ENTRY_CHUNK: usize = 256;

/// A plan being run.
#[derive(Clone)]
pub struct Execution {
    plan: Arc<Plan>,
    filter: Arc<Filter>,
    count_only: bool,
    positions: Vec<Position>,
    child: usize,
    seen: Option<HashSet<Vec<u8>>>,
    near: Option<NearState>,
    /// Work done so far.
    pub stats: Stats,
    exhausted: bool,
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execution")
            .field("plan", &self.plan.key())
            .field("stats", &self.stats)
            .field("exhausted", &self.exhausted)
            .finish()
    }
}

fn is_empty(r: &KeyRange) -> bool {
    cairn_storage::store::range_is_empty(
        r.0.as_ref().map(Vec::as_slice),
        r.1.as_ref().map(Vec::as_slice),
    )
}

/// The part of `ranges` (ascending) still to read after consuming entry `resume`.
pub fn ranges_after(ranges: &[KeyRange], resume: Option<&[u8]>, reverse: bool) -> Vec<KeyRange> {
    let (head, rest) = split_after(ranges, resume, reverse);
    let mut out: Vec<KeyRange> = Vec::with_capacity(rest.len() + 1);
    if reverse {
        out.extend_from_slice(rest);
        out.extend(head);
    } else {
        out.extend(head);
        out.extend_from_slice(rest);
    }
    out
}

/// What is left of `ranges` (ascending, disjoint) after consuming entry `resume`, without
/// copying it: the range holding the position, cut there (`None` when nothing of it is
/// left), and the untouched ranges still to read after it (in scan order: above it going
/// forward, below it going backward). Binary search, so each read of a long scan costs
/// O(log n), not a copy of every range left.
pub fn split_after<'r>(
    ranges: &'r [KeyRange],
    resume: Option<&[u8]>,
    reverse: bool,
) -> (Option<KeyRange>, &'r [KeyRange]) {
    let Some(r) = resume else {
        return match (reverse, ranges.split_last(), ranges.split_first()) {
            (true, Some((last, rest)), _) => (Some(last.clone()), rest),
            (false, _, Some((first, rest))) => (Some(first.clone()), rest),
            _ => (None, &[]),
        };
    };
    let cut = Bound::Excluded(r.to_vec());
    if reverse {
        // Ranges holding keys below `r`: those whose lower end admits one.
        let j = ranges.partition_point(|(lo, _)| match lo {
            Bound::Unbounded => true,
            Bound::Included(k) | Bound::Excluded(k) => k.as_slice() < r,
        });
        let Some(((lo, hi), rest)) = ranges[..j].split_last() else {
            return (None, &[]);
        };
        let head = (lo.clone(), min_upper(hi.clone(), cut));
        (Some(head).filter(|h| !is_empty(h)), rest)
    } else {
        // Ranges holding keys above `r`: those whose upper end admits one.
        let i = ranges.partition_point(|(_, hi)| match hi {
            Bound::Unbounded => false,
            Bound::Included(k) | Bound::Excluded(k) => k.as_slice() <= r,
        });
        let Some(((lo, hi), rest)) = ranges[i..].split_first() else {
            return (None, &[]);
        };
        let head = (max_lower(lo.clone(), cut), hi.clone());
        (Some(head).filter(|h| !is_empty(h)), rest)
    }
}

/// Reads at most `limit` entries of what is left after `resume`: the cut range first, then
/// the untouched ones (borrowed, never copied).
fn scan_after(
    src: &dyn Source,
    idx: &IndexMeta,
    ranges: &[KeyRange],
    resume: Option<&[u8]>,
    reverse: bool,
    limit: usize,
) -> std::result::Result<Vec<IndexHit>, StorageError> {
    let (head, rest) = split_after(ranges, resume, reverse);
    let mut hits = match head {
        Some(h) => src.index_scan(idx, std::slice::from_ref(&h), reverse, limit)?,
        None => Vec::new(),
    };
    if hits.len() < limit && !rest.is_empty() {
        hits.extend(src.index_scan(idx, rest, reverse, limit - hits.len())?);
    }
    Ok(hits)
}

/// A document holding an entry's values at the key pattern's paths (in key-pattern order),
/// for a covered query to project.
fn covered_document(idx: &IndexMeta, values: &RawDocument) -> Result<RawDocumentBuf> {
    enum Node {
        Leaf(bson::RawBson),
        Doc(Vec<(String, Node)>),
    }
    fn insert(fields: &mut Vec<(String, Node)>, parts: &[&str], v: bson::RawBson) {
        let Some((first, rest)) = parts.split_first() else {
            return;
        };
        if rest.is_empty() {
            fields.push(((*first).to_string(), Node::Leaf(v)));
            return;
        }
        if let Some((_, Node::Doc(sub))) = fields.iter_mut().find(|(k, _)| k == first) {
            insert(sub, rest, v);
            return;
        }
        let mut sub = Vec::new();
        insert(&mut sub, rest, v);
        fields.push(((*first).to_string(), Node::Doc(sub)));
    }
    fn write(fields: Vec<(String, Node)>) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        for (k, n) in fields {
            let Ok(k) = <&bson::raw::CStr>::try_from(k.as_str()) else {
                continue;
            };
            match n {
                Node::Leaf(v) => d.append(k, v),
                Node::Doc(sub) => d.append(k, write(sub)),
            }
        }
        d
    }
    let mut root = Vec::new();
    let mut vals = values.iter();
    for (path, _) in idx.fields() {
        let v = match vals.next() {
            Some(Ok((_, v))) => bson::RawBson::from(v),
            _ => {
                return Err(QueryError::Storage(StorageError::Corrupt(
                    "index entry values".into(),
                )));
            }
        };
        let parts: Vec<&str> = path.split('.').collect();
        insert(&mut root, &parts, v);
    }
    Ok(write(root))
}

/// Output of one [`Execution::next`] call.
struct Sink<'a> {
    docs: &'a mut Vec<RawDocumentBuf>,
    max_docs: usize,
    max_bytes: usize,
    bytes: usize,
    budget: u64,
    work: u64,
}

impl Sink<'_> {
    fn full(&self) -> bool {
        self.docs.len() >= self.max_docs || self.bytes >= self.max_bytes || self.work >= self.budget
    }
}

impl Execution {
    /// Starts `plan`; `filter` is the query's whole filter. With `count_only` results are
    /// counted in [`Stats::advanced`] and no document is materialised.
    pub fn new(plan: Arc<Plan>, filter: Arc<Filter>, count_only: bool) -> Execution {
        let children = match &plan.access {
            Access::Or(cs) => cs.len(),
            _ => 1,
        };
        let near = match &plan.access {
            Access::Near(na) => Some(NearState::new(na)),
            _ => None,
        };
        Execution {
            near,
            seen: plan.dedupe.then(HashSet::new),
            positions: vec![Position::default(); children],
            stats: Stats {
                branches: if children > 1 {
                    vec![(0, 0, 0); children]
                } else {
                    Vec::new()
                },
                ..Stats::default()
            },
            plan,
            filter,
            count_only,
            child: 0,
            exhausted: false,
        }
    }

    /// The plan.
    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    /// True once every result has been produced.
    pub fn is_exhausted(&self) -> bool {
        self.exhausted
    }

    /// The next matching documents, in plan order: at most `max_docs`, stopping once about
    /// `max_bytes` are gathered or `budget` units of work are spent (so it may return fewer,
    /// even none, without being exhausted: call again).
    pub fn next(
        &mut self,
        src: &dyn Source,
        coll: &CollectionMeta,
        max_docs: usize,
        max_bytes: usize,
        budget: u64,
    ) -> Result<Vec<RawDocumentBuf>> {
        let mut docs = Vec::new();
        if self.exhausted || max_docs == 0 {
            return Ok(docs);
        }
        let mut sink = Sink {
            docs: &mut docs,
            max_docs,
            max_bytes,
            bytes: 0,
            budget: budget.max(1),
            work: 0,
        };
        let plan = self.plan.clone();
        match &plan.access {
            Access::Eof => self.exhausted = true,
            Access::IdPoint { key } => {
                if let Some(doc) = src.get_by_key(coll, key)? {
                    self.stats.docs_examined += 1;
                    self.offer(doc, &mut sink)?;
                }
                self.exhausted = true;
            }
            Access::Or(children) => {
                while self.child < children.len() && !sink.full() {
                    let i = self.child;
                    let before = (
                        self.stats.keys_examined,
                        self.stats.docs_examined,
                        self.stats.advanced,
                    );
                    if let Some(c) = children.get(i) {
                        self.run_access(c, i, src, coll, &mut sink)?;
                    }
                    if let Some(b) = self.stats.branches.get_mut(i) {
                        b.0 += self.stats.keys_examined - before.0;
                        b.1 += self.stats.docs_examined - before.1;
                        b.2 += self.stats.advanced - before.2;
                    }
                    if self.positions.get(i).is_some_and(|p| p.done) {
                        self.child += 1;
                    }
                }
                self.exhausted = self.child >= children.len();
            }
            other => {
                self.run_access(other, 0, src, coll, &mut sink)?;
                self.exhausted = self.positions.first().is_some_and(|p| p.done);
            }
        }
        Ok(docs)
    }

    /// Runs up to `budget` units of work counting results (for `count`); returns how many
    /// were added.
    pub fn count(&mut self, src: &dyn Source, coll: &CollectionMeta, budget: u64) -> Result<u64> {
        let before = self.stats.advanced;
        self.count_only = true;
        self.next(src, coll, usize::MAX, usize::MAX, budget)?;
        Ok(self.stats.advanced - before)
    }

    /// Passes one result on (after the residual filter and deduplication by `key`).
    fn offer(&mut self, doc: RawDocumentBuf, sink: &mut Sink<'_>) -> Result<()> {
        if self.plan.residual && !self.filter.try_matches(&doc)? {
            return Ok(());
        }
        self.emit(doc, sink);
        Ok(())
    }

    fn emit(&mut self, doc: RawDocumentBuf, sink: &mut Sink<'_>) {
        self.stats.advanced += 1;
        if !self.count_only {
            sink.bytes += doc.as_bytes().len();
            sink.docs.push(doc);
        }
    }

    /// True when the document `key` was already returned.
    fn seen(&self, key: &[u8]) -> bool {
        self.seen.as_ref().is_some_and(|s| s.contains(key))
    }

    /// True when the document `key` was already returned (and remembers it).
    fn duplicate(&mut self, key: &[u8]) -> bool {
        match &mut self.seen {
            Some(seen) => {
                if seen.contains(key) {
                    self.stats.dups_dropped += 1;
                    true
                } else {
                    seen.insert(key.to_vec());
                    false
                }
            }
            None => false,
        }
    }

    fn run_access(
        &mut self,
        access: &Access,
        slot: usize,
        src: &dyn Source,
        coll: &CollectionMeta,
        sink: &mut Sink<'_>,
    ) -> Result<()> {
        match access {
            Access::Docs {
                ranges, reverse, ..
            } => self.run_docs(ranges, *reverse, slot, src, coll, sink),
            Access::Index(ia) => self.run_index(ia, slot, src, coll, sink),
            Access::Near(na) => self.run_near(na, slot, src, coll, sink),
            Access::IdPoint { key } => {
                if let Some(p) = self.positions.get(slot)
                    && p.done
                {
                    return Ok(());
                }
                if let Some(doc) = src.get_by_key(coll, key)? {
                    self.stats.docs_examined += 1;
                    sink.work += 1;
                    if !self.duplicate(key) {
                        self.offer(doc, sink)?;
                    }
                }
                if let Some(p) = self.positions.get_mut(slot) {
                    p.done = true;
                }
                Ok(())
            }
            Access::Or(_) => Err(QueryError::BadValue("nested $or plans".into())),
            Access::Eof => {
                if let Some(p) = self.positions.get_mut(slot) {
                    p.done = true;
                }
                Ok(())
            }
        }
    }

    fn run_docs(
        &mut self,
        ranges: &[KeyRange],
        reverse: bool,
        slot: usize,
        src: &dyn Source,
        coll: &CollectionMeta,
        sink: &mut Sink<'_>,
    ) -> Result<()> {
        let mut pos = self.positions.get(slot).cloned().unwrap_or_default();
        while !pos.done && !sink.full() {
            let idx = if reverse {
                ranges.len().checked_sub(pos.range + 1)
            } else {
                Some(pos.range)
            };
            let Some((lo, hi)) = idx.and_then(|i| ranges.get(i)) else {
                pos.done = true;
                break;
            };
            let room = sink.max_docs.saturating_sub(sink.docs.len()).max(1);
            let limits = ScanLimits {
                max_docs: if self.count_only { usize::MAX } else { room },
                max_bytes: sink.max_bytes.saturating_sub(sink.bytes),
                max_examined: usize::try_from(sink.budget.saturating_sub(sink.work))
                    .unwrap_or(usize::MAX)
                    .max(1),
                first_may_exceed: sink.docs.is_empty(),
            };
            let residual = self.plan.residual;
            let filter = self.filter.clone();
            let mut failed: Option<QueryError> = None;
            let batch = src.scan_range(
                coll,
                (
                    lo.as_ref().map(Vec::as_slice),
                    hi.as_ref().map(Vec::as_slice),
                ),
                pos.resume.as_deref(),
                reverse,
                limits,
                &mut |d| {
                    if !residual || failed.is_some() {
                        return failed.is_none();
                    }
                    match filter.try_matches(d) {
                        Ok(m) => m,
                        Err(e) => {
                            failed = Some(e);
                            false
                        }
                    }
                },
            )?;
            if let Some(e) = failed {
                return Err(e);
            }
            self.stats.docs_examined += batch.examined as u64;
            sink.work += batch.examined as u64;
            let progressed = batch.examined > 0;
            for doc in batch.docs {
                if self.seen.is_some() {
                    let key = match doc.get("_id") {
                        Ok(Some(id)) => id_key(id)?,
                        _ => Vec::new(),
                    };
                    if self.duplicate(&key) {
                        continue;
                    }
                }
                self.emit(doc, sink);
            }
            match batch.resume {
                Some(r) => pos.resume = Some(r),
                None => {
                    pos.range += 1;
                    pos.resume = None;
                    if pos.range >= ranges.len() {
                        pos.done = true;
                    }
                }
            }
            if !progressed && pos.resume.is_some() {
                // The next document does not fit in what is left of this batch.
                break;
            }
        }
        if let Some(p) = self.positions.get_mut(slot) {
            *p = pos;
        }
        Ok(())
    }

    fn run_index(
        &mut self,
        ia: &IndexAccess,
        slot: usize,
        src: &dyn Source,
        coll: &CollectionMeta,
        sink: &mut Sink<'_>,
    ) -> Result<()> {
        let mut pos = self.positions.get(slot).cloned().unwrap_or_default();
        let covered = self.plan.covered;
        let entries_only = covered || (self.count_only && self.plan.count_scan);
        // Entries to read per storage call: as many as the documents still wanted (each
        // entry yields at most one), doubling when entries fail the bounds or the residual
        // filter, capped at ENTRY_CHUNK — so a `limit: 10` reads 10 entries, not 256.
        let mut chunk = if self.count_only {
            ENTRY_CHUNK
        } else {
            sink.max_docs.saturating_sub(sink.docs.len())
        };
        while !pos.done && !sink.full() {
            let left = usize::try_from(sink.budget.saturating_sub(sink.work)).unwrap_or(usize::MAX);
            let mut room = left.min(chunk).clamp(1, ENTRY_CHUNK);
            chunk = room.saturating_mul(2);
            if !entries_only {
                // Each fetched hit costs two units (entry and document): read no more than
                // the budget can take, so no fetched document is thrown away.
                room = room.min((left / 2).max(1));
            }
            let hits = scan_after(
                src,
                &ia.index,
                &ia.ranges,
                pos.resume.as_deref(),
                ia.reverse,
                room,
            )?;
            let complete = hits.len() < room;
            let inside: Vec<bool> = hits
                .iter()
                .map(|h| !ia.check_entries || ia.bounds.contains_values(h.values()))
                .collect();
            // The documents of the hits that may be returned, read as one batch (in key
            // order by the source) and consumed below in index order.
            let mut wanted: Vec<bool> = Vec::new();
            let mut fetched = Vec::new().into_iter();
            if !entries_only {
                wanted = hits
                    .iter()
                    .zip(&inside)
                    .map(|(h, ok)| *ok && !self.seen(h.doc_key()))
                    .collect();
                let keys: Vec<&[u8]> = hits
                    .iter()
                    .zip(&wanted)
                    .filter(|(_, w)| **w)
                    .map(|(h, _)| h.doc_key())
                    .collect();
                fetched = src.get_many_by_key(coll, &keys)?.into_iter();
            }
            let mut consumed = 0usize;
            let mut stopped = false;
            for (i, h) in hits.iter().enumerate() {
                consumed = i + 1;
                self.stats.keys_examined += 1;
                sink.work += 1;
                let doc = if wanted.get(i).copied().unwrap_or(false) {
                    fetched.next().flatten()
                } else {
                    None
                };
                if !inside.get(i).copied().unwrap_or(false) {
                    continue;
                }
                self.stats.keys_advanced += 1;
                if self.duplicate(h.doc_key()) {
                    continue;
                }
                if entries_only {
                    if self.count_only {
                        self.stats.advanced += 1;
                    } else {
                        let doc = covered_document(&ia.index, h.values())?;
                        self.emit(doc, sink);
                    }
                } else {
                    let Some(doc) = doc else {
                        continue;
                    };
                    self.stats.docs_examined += 1;
                    sink.work += 1;
                    self.offer(doc, sink)?;
                }
                if sink.full() {
                    stopped = true;
                    break;
                }
            }
            if let Some(h) = consumed.checked_sub(1).and_then(|i| hits.get(i)) {
                pos.resume = Some(h.key.to_vec());
            }
            if complete && !stopped {
                pos.done = true;
            }
        }
        if let Some(p) = self.positions.get_mut(slot) {
            *p = pos;
        }
        Ok(())
    }
}

/// Where a `$near` ring search stands.
#[derive(Debug, Clone)]
struct NearState {
    /// Inner radius of the next ring (query units).
    inner: f64,
    /// Width of the next ring.
    width: f64,
    /// The smallest width tried.
    min_width: f64,
    /// Distances beyond this hold nothing (the query's `$maxDistance`, or the farthest the
    /// index's space reaches).
    outer: f64,
    /// Documents of the last ring, nearest first.
    pending: std::collections::VecDeque<RawDocumentBuf>,
    /// Every ring has been read.
    done: bool,
    /// Rings read.
    rings: u64,
}

/// Documents a ring may hold before it is read again narrower.
const RING_MAX_DOCS: usize = 2048;
/// Ring widths adapt to keep about this many documents per ring.
const RING_TARGET_DOCS: usize = 64;

/// Query distance units per radian (meters for GeoJSON points, else radians).
fn units_per_radian(na: &NearAccess) -> f64 {
    if na.near.geojson {
        crate::geo::sphere::EARTH_RADIUS_M
    } else {
        1.0
    }
}

impl NearState {
    fn new(na: &NearAccess) -> NearState {
        use crate::index::geo_bounds::GeoKind;
        let (farthest, width) = match na.kind {
            GeoKind::Flat { min, max, .. } if !na.near.spherical => {
                let (x, y) = na.near.flat;
                let far = [(min, min), (min, max), (max, min), (max, max)]
                    .iter()
                    .map(|c| (c.0 - x).hypot(c.1 - y))
                    .fold(0.0, f64::max);
                (far, (max - min) / f64::from(1u32 << 20))
            }
            _ => {
                let k = units_per_radian(na);
                (
                    std::f64::consts::PI * k,
                    k * std::f64::consts::FRAC_PI_2 / f64::from(1u32 << 20),
                )
            }
        };
        let width = if width > 0.0 && width.is_finite() {
            width
        } else {
            1e-9
        };
        NearState {
            inner: na.near.min.max(0.0),
            width,
            min_width: width,
            outer: na.near.max.min(farthest * (1.0 + 1e-9) + width),
            pending: std::collections::VecDeque::new(),
            done: false,
            rings: 0,
        }
    }
}

/// The bounds of one ring `[lo, hi]` (query units) of a near search.
fn ring_bounds(na: &NearAccess, lo: f64, hi: f64) -> crate::index::IndexBounds {
    use crate::geo::cells;
    use crate::index::geo_bounds::{GeoKind, planar_intervals, sphere_intervals};
    let mut b = na.base.clone();
    let ivs = match na.kind {
        GeoKind::Sphere => {
            let k = units_per_radian(na);
            let (lo, hi) = (lo / k, hi / k + 4.0 * crate::geo::sphere::BOUNDARY_TOL);
            let inner = lo - 4.0 * crate::geo::sphere::BOUNDARY_TOL;
            match na.near.center {
                Some(c) => sphere_intervals(&cells::cover_sphere(
                    &mut |id| {
                        cells::cell_distance(id, c) <= hi && !cells::cell_within(id, c, inner)
                    },
                    32,
                    crate::index::geo_keys::FINEST_LEVEL,
                )),
                None => Vec::new(),
            }
        }
        GeoKind::Flat { bits, min, max } => {
            let center = na.near.flat;
            let cover = if na.near.spherical {
                let hi = hi + 4.0 * crate::geo::sphere::BOUNDARY_TOL;
                cells::cover_planar(
                    &mut |c| {
                        let (a, z) = c.bounds(min, max);
                        cells::box_sphere_distance_lower(center, a, z) <= hi
                    },
                    32,
                    bits,
                )
            } else {
                let hi = hi * (1.0 + 1e-12) + 1e-12;
                let inner = lo * (1.0 - 1e-12) - 1e-12;
                cells::cover_planar(
                    &mut |c| {
                        let (a, z) = c.bounds(min, max);
                        let far = [(a.0, a.1), (a.0, z.1), (z.0, a.1), (z.0, z.1)]
                            .iter()
                            .map(|p| (p.0 - center.0).hypot(p.1 - center.1))
                            .fold(0.0, f64::max);
                        cells::box_distance(center, a, z) <= hi && far >= inner
                    },
                    32,
                    bits,
                )
            };
            planar_intervals(&cover)
        }
    };
    if let Some(f) = b.fields.get_mut(na.field) {
        f.intervals = ivs;
    }
    b
}

impl Execution {
    /// The `$near` ring search: each ring's documents, nearest first (ties in `_id` order),
    /// then the next ring.
    fn run_near(
        &mut self,
        na: &NearAccess,
        slot: usize,
        src: &dyn Source,
        coll: &CollectionMeta,
        sink: &mut Sink<'_>,
    ) -> Result<()> {
        let Some(mut st) = self.near.take() else {
            if let Some(p) = self.positions.get_mut(slot) {
                p.done = true;
            }
            return Ok(());
        };
        let out = self.near_rings(na, &mut st, src, coll, sink);
        if st.done
            && st.pending.is_empty()
            && let Some(p) = self.positions.get_mut(slot)
        {
            p.done = true;
        }
        self.near = Some(st);
        out
    }

    fn near_rings(
        &mut self,
        na: &NearAccess,
        st: &mut NearState,
        src: &dyn Source,
        coll: &CollectionMeta,
        sink: &mut Sink<'_>,
    ) -> Result<()> {
        while !sink.full() {
            if let Some(d) = st.pending.pop_front() {
                if let Some(iv) = self.stats.near_intervals.last_mut() {
                    iv.returned += 1;
                }
                self.emit(d, sink);
                continue;
            }
            if st.done {
                return Ok(());
            }
            let lo = st.inner;
            let hi = (lo + st.width).min(st.outer);
            let last = hi >= st.outer;
            let bounds = ring_bounds(na, lo, hi);
            let ranges = bounds.key_ranges();
            // The documents with an entry in the ring's cells, each once.
            let mut keys: Vec<Vec<u8>> = Vec::new();
            let mut seen: HashSet<Vec<u8>> = HashSet::new();
            let mut resume: Option<Vec<u8>> = None;
            let mut too_many = false;
            loop {
                let hits = scan_after(
                    src,
                    &na.index,
                    &ranges,
                    resume.as_deref(),
                    false,
                    ENTRY_CHUNK,
                )?;
                let complete = hits.len() < ENTRY_CHUNK;
                for h in hits {
                    resume = Some(h.key.to_vec());
                    self.stats.keys_examined += 1;
                    sink.work += 1;
                    if !bounds.contains_values(h.values()) {
                        continue;
                    }
                    self.stats.keys_advanced += 1;
                    if seen.insert(h.doc_key().to_vec()) {
                        keys.push(h.doc_key().to_vec());
                    }
                }
                if keys.len() > RING_MAX_DOCS && st.width > st.min_width {
                    too_many = true;
                    break;
                }
                if complete {
                    break;
                }
            }
            if too_many {
                // Too wide for the data here: read it again, narrower.
                st.width = (st.width / 8.0).max(st.min_width);
                continue;
            }
            let mut found: Vec<(f64, Vec<u8>, RawDocumentBuf)> = Vec::new();
            for k in keys {
                let Some(doc) = src.get_by_key(coll, &k)? else {
                    continue;
                };
                self.stats.docs_examined += 1;
                sink.work += 1;
                let Some(d) = self.filter.near_distance(&doc) else {
                    continue;
                };
                let in_ring = d >= lo && (d < hi || (last && d <= hi));
                if in_ring && self.filter.try_matches(&doc)? {
                    found.push((d, k, doc));
                }
            }
            found.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
            let n = found.len();
            st.pending.extend(found.into_iter().map(|(_, _, d)| d));
            let k = if na.near.spherical && !na.near.geojson {
                crate::geo::sphere::EARTH_RADIUS_M
            } else {
                1.0
            };
            self.stats.near_intervals.push(NearInterval {
                min: lo * k,
                max: hi * k,
                max_inclusive: last,
                buffered: n as u64,
                returned: 0,
            });
            st.rings += 1;
            st.inner = hi;
            if last {
                st.done = true;
            } else if n < RING_TARGET_DOCS / 4 {
                st.width *= 2.0;
            } else if n > RING_TARGET_DOCS * 4 {
                st.width = (st.width / 2.0).max(st.min_width);
            }
        }
        Ok(())
    }

    /// Rings a `$near` search has read so far.
    pub fn near_rings_read(&self) -> u64 {
        self.near.as_ref().map_or(0, |n| n.rings)
    }
}

/// A plan tried in the race, with what it produced meanwhile.
#[derive(Debug)]
pub struct Trial {
    /// The execution (continues from where the trial stopped).
    pub exec: Execution,
    /// Documents it produced during the trial, in order.
    pub buffered: Vec<RawDocumentBuf>,
    /// Its score (higher is better).
    pub score: f64,
}

/// Results a trial aims for before the race stops (MongoDB's default batch).
pub const TRIAL_RESULTS: u64 = 101;
/// Work each plan may spend in the race.
pub const TRIAL_WORKS: u64 = 10_000;

/// Runs the candidates side by side, a slice of work each in turn, until one has produced
/// [`TRIAL_RESULTS`] results or finished, or all have spent [`TRIAL_WORKS`]; scores them as
/// MongoDB's plan ranker does (results per unit of work, with small bonuses for needing no
/// fetch and no blocking sort; a plan that needs a blocking sort produces nothing until it
/// finishes). Returns the trials, best first. `needs_sort`: a sort was requested; `limit`:
/// results needed at most (a plan that streams in the requested order stops there, as
/// MongoDB's LIMIT stage ends its trial).
pub fn race(
    plans: Vec<Arc<Plan>>,
    filter: &Arc<Filter>,
    src: &dyn Source,
    coll: &CollectionMeta,
    needs_sort: bool,
    count_only: bool,
    limit: Option<u64>,
) -> Result<Vec<Trial>> {
    let mut trials: Vec<Trial> = plans
        .into_iter()
        .map(|p| Trial {
            exec: Execution::new(p, filter.clone(), count_only),
            buffered: Vec::new(),
            score: 0.0,
        })
        .collect();
    let effective = |t: &Trial| -> u64 {
        let blocking = needs_sort && !t.exec.plan.provides_sort;
        if blocking && !t.exec.exhausted {
            0
        } else {
            t.exec.stats.advanced
        }
    };
    // Results a streaming plan still needs before its limit.
    let wanted = |t: &Trial| -> Option<u64> {
        let streams = !needs_sort || t.exec.plan.provides_sort;
        match limit {
            Some(l) if streams => Some(l.saturating_sub(t.exec.stats.advanced)),
            _ => None,
        }
    };
    const QUANTUM: u64 = 16;
    loop {
        let mut progressed = false;
        let mut finished = false;
        for t in &mut trials {
            if t.exec.exhausted || t.exec.stats.works() >= TRIAL_WORKS || wanted(t) == Some(0) {
                continue;
            }
            let max_docs =
                wanted(t).map_or(usize::MAX, |w| usize::try_from(w).unwrap_or(usize::MAX));
            let more = t
                .exec
                .next(src, coll, max_docs, 16 * 1024 * 1024, QUANTUM)?;
            t.buffered.extend(more);
            progressed = true;
            if t.exec.exhausted || effective(t) >= TRIAL_RESULTS || wanted(t) == Some(0) {
                // The others still get this round, so all are compared at about the same
                // amount of work.
                finished = true;
            }
        }
        if finished || !progressed {
            break;
        }
    }
    for t in &mut trials {
        let works = t.exec.stats.works().max(1) as f64;
        let eps = (1.0 / (10.0 * works)).min(1e-4);
        let mut score = 1.0 + effective(t) as f64 / works;
        if t.exec.plan.covered || t.exec.plan.count_scan {
            score += eps;
        }
        if !needs_sort || t.exec.plan.provides_sort {
            score += eps;
        }
        if t.exec.exhausted || wanted(t) == Some(0) {
            // Finishing first is what the race measures best.
            score += 2.0 * eps;
        }
        t.score = score;
    }
    // Stable: among equal scores the earlier candidate wins.
    trials.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Ok(trials)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(lo: u8, hi: u8) -> KeyRange {
        (Bound::Included(vec![lo]), Bound::Excluded(vec![hi]))
    }

    #[test]
    fn split_after_walks_without_copying() {
        let ranges = vec![r(1, 3), r(5, 7), r(9, 11)];
        // Nothing read yet: the first (or, backward, the last) range, then the others.
        let (h, rest) = split_after(&ranges, None, false);
        assert_eq!(h, Some(r(1, 3)));
        assert_eq!(rest.len(), 2);
        let (h, rest) = split_after(&ranges, None, true);
        assert_eq!(h, Some(r(9, 11)));
        assert_eq!(rest, &ranges[..2]);
        // Forward after key 5: the rest of [5, 7), then [9, 11).
        let (h, rest) = split_after(&ranges, Some(&[5]), false);
        assert_eq!(
            h,
            Some((Bound::Excluded(vec![5]), Bound::Excluded(vec![7])))
        );
        assert_eq!(rest, &ranges[2..]);
        // After the last key of a range: the next range whole.
        let (h, rest) = split_after(&ranges, Some(&[7]), false);
        assert_eq!(h, Some(r(9, 11)));
        assert!(rest.is_empty());
        let (h, rest) = split_after(&ranges, Some(&[12]), false);
        assert_eq!(h, None);
        assert!(rest.is_empty());
        // Backward after key 9: [5, 7) whole, then [1, 3).
        let (h, rest) = split_after(&ranges, Some(&[9]), true);
        assert_eq!(h, Some(r(5, 7)));
        assert_eq!(rest, &ranges[..1]);
        let (h, rest) = split_after(&ranges, Some(&[6]), true);
        assert_eq!(
            h,
            Some((Bound::Included(vec![5]), Bound::Excluded(vec![6])))
        );
        assert_eq!(rest, &ranges[..1]);
        assert_eq!(ranges_after(&ranges, Some(&[6]), false).len(), 2);
        assert_eq!(
            ranges_after(&ranges, Some(&[0]), true),
            Vec::<KeyRange>::new()
        );
    }
}
