// Copyright (c) 2025-present, fjall-rs
// This source code is licensed under both the Apache 2.0 and MIT License
// (found in the LICENSE-* files in the repository)

use super::{data_block::Iter as DataBlockIter, BlockOffset, DataBlock, GlobalTableId};
use crate::{
    file_accessor::FileAccessor,
    table::{
        block::ParsedItem,
        block_index::{BlockIndexIter, BlockIndexIterImpl},
        util::load_block,
        BlockHandle, KeyedBlockHandle,
    },
    Cache, CompressionType, InternalValue, SeqNo, UserKey,
};
use self_cell::self_cell;
use std::{path::PathBuf, sync::Arc};

#[cfg(feature = "metrics")]
use crate::metrics::Metrics;

type InnerIter<'a> = DataBlockIter<'a>;

pub enum Bound {
    Included(UserKey),
    Excluded(UserKey),
}
type Bounds = (Option<Bound>, Option<Bound>);

self_cell!(
    pub struct OwnedDataBlockIter {
        owner: DataBlock,

        #[covariant]
        dependent: InnerIter,
    }
);

impl OwnedDataBlockIter {
    fn seek_lower_inclusive(&mut self, needle: &[u8], _seqno: SeqNo) -> bool {
        self.with_dependent_mut(|_, m| m.seek(needle /* TODO: , seqno */))
    }

    fn seek_upper_inclusive(&mut self, needle: &[u8], _seqno: SeqNo) -> bool {
        self.with_dependent_mut(|_, m| m.seek_upper(needle /* TODO: , seqno */))
    }

    fn seek_lower_exclusive(&mut self, needle: &[u8], _seqno: SeqNo) -> bool {
        self.with_dependent_mut(|_, m| m.seek_exclusive(needle /* TODO: , seqno */))
    }

    fn seek_upper_exclusive(&mut self, needle: &[u8], _seqno: SeqNo) -> bool {
        self.with_dependent_mut(|_, m| m.seek_upper_exclusive(needle /* TODO: , seqno */))
    }

    pub fn seek_lower_bound(&mut self, bound: &Bound, seqno: SeqNo) -> bool {
        match bound {
            Bound::Included(key) => self.seek_lower_inclusive(key, seqno),
            Bound::Excluded(key) => self.seek_lower_exclusive(key, seqno),
        }
    }

    pub fn seek_upper_bound(&mut self, bound: &Bound, seqno: SeqNo) -> bool {
        match bound {
            Bound::Included(key) => self.seek_upper_inclusive(key, seqno),
            Bound::Excluded(key) => self.seek_upper_exclusive(key, seqno),
        }
    }
}

impl Iterator for OwnedDataBlockIter {
    type Item = InternalValue;

    fn next(&mut self) -> Option<Self::Item> {
        self.with_dependent_mut(|block, iter| {
            iter.next().map(|item| item.materialize(&block.inner.data))
        })
    }
}

impl DoubleEndedIterator for OwnedDataBlockIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.with_dependent_mut(|block, iter| {
            iter.next_back()
                .map(|item| item.materialize(&block.inner.data))
        })
    }
}

fn create_data_block_reader(block: DataBlock) -> OwnedDataBlockIter {
    OwnedDataBlockIter::new(block, super::data_block::DataBlock::iter)
}

pub struct Iter {
    table_id: GlobalTableId,
    path: Arc<PathBuf>,

    global_seqno: SeqNo,

    #[expect(clippy::struct_field_names)]
    index_iter: BlockIndexIterImpl,

    file_accessor: FileAccessor,
    cache: Arc<Cache>,
    compression: CompressionType,

    index_initialized: bool,

    lo_offset: BlockOffset,
    lo_data_block: Option<OwnedDataBlockIter>,

    hi_offset: BlockOffset,
    hi_data_block: Option<OwnedDataBlockIter>,

    range: Bounds,

    /// Cairn patch: set once an item beyond a bound was met in the direction of travel
    /// (above the upper bound going forward, below the lower bound going backward). Every item
    /// not yet returned lies on the far side of it, so both directions are over.
    done: bool,

    #[cfg(feature = "metrics")]
    metrics: Arc<Metrics>,
}

impl Iter {
    pub fn new(
        table_id: GlobalTableId,
        global_seqno: SeqNo,
        path: Arc<PathBuf>,
        index_iter: BlockIndexIterImpl,
        file_accessor: FileAccessor,
        cache: Arc<Cache>,
        compression: CompressionType,
        #[cfg(feature = "metrics")] metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            table_id,
            path,

            global_seqno,

            index_iter,
            file_accessor,
            cache,
            compression,

            index_initialized: false,

            lo_offset: BlockOffset(0),
            lo_data_block: None,

            hi_offset: BlockOffset(u64::MAX),
            hi_data_block: None,

            range: (None, None),

            done: false,

            #[cfg(feature = "metrics")]
            metrics,
        }
    }

    pub fn set_lower_bound(&mut self, bound: Bound) {
        self.range.0 = Some(bound);
    }

    pub fn set_upper_bound(&mut self, bound: Bound) {
        self.range.1 = Some(bound);
    }
}

/// Cairn patch: whether `key` is at or above the lower bound `bound`.
fn above_lower(bound: Option<&Bound>, key: &[u8]) -> bool {
    match bound {
        None => true,
        Some(Bound::Included(lo)) => key >= &**lo,
        Some(Bound::Excluded(lo)) => key > &**lo,
    }
}

/// Cairn patch: whether `key` is at or below the upper bound `bound`.
fn below_upper(bound: Option<&Bound>, key: &[u8]) -> bool {
    match bound {
        None => true,
        Some(Bound::Included(hi)) => key <= &**hi,
        Some(Bound::Excluded(hi)) => key < &**hi,
    }
}

/// Cairn patch: what to do with an item met while iterating in one direction.
enum Verdict {
    /// Inside the range: return it.
    Yield,
    /// On the near side of the range (reachable only when the other direction loaded the block
    /// without seeking this side's bound): skip it.
    Skip,
    /// On the far side: the iteration is over in both directions.
    Done,
}

impl Iter {
    /// Cairn patch: the verdict on `item` met going forward; `check_lower` when the block it
    /// comes from was not seeked to the lower bound.
    fn forward_verdict(&self, item: &InternalValue, check_lower: bool) -> Verdict {
        let key = &*item.key.user_key;
        if !below_upper(self.range.1.as_ref(), key) {
            Verdict::Done
        } else if check_lower && !above_lower(self.range.0.as_ref(), key) {
            Verdict::Skip
        } else {
            Verdict::Yield
        }
    }

    /// Cairn patch: the verdict on `item` met going backward; `check_upper` when the block it
    /// comes from was not seeked to the upper bound.
    fn backward_verdict(&self, item: &InternalValue, check_upper: bool) -> Verdict {
        let key = &*item.key.user_key;
        if !above_lower(self.range.0.as_ref(), key) {
            Verdict::Done
        } else if check_upper && !below_upper(self.range.1.as_ref(), key) {
            Verdict::Skip
        } else {
            Verdict::Yield
        }
    }

    /// Cairn patch: ends the iteration in both directions.
    fn finish(&mut self) {
        self.done = true;
        self.lo_data_block = None;
        self.hi_data_block = None;
    }
}

impl Iter {
    /// Cairn patch: the data block at `handle` (from the block cache, or read on a miss).
    fn data_block(&self, handle: &KeyedBlockHandle) -> crate::Result<OwnedDataBlockIter> {
        // Load the next data block referenced by the index handle.  We try the shared block
        // cache first to avoid hitting the filesystem, and fall back to `load_block` on miss.
        let block = match self.cache.get_block(self.table_id, handle.offset()) {
            Some(block) => block,
            None => load_block(
                self.table_id,
                &self.path,
                &self.file_accessor,
                &self.cache,
                &BlockHandle::new(handle.offset(), handle.size()),
                crate::table::block::BlockType::Data,
                self.compression,
                #[cfg(feature = "metrics")]
                &self.metrics,
            )?,
        };
        Ok(create_data_block_reader(DataBlock::new(block)))
    }
}

// Cairn patch: each direction seeks only its own starting bound (forward: the lower bound, in
// the block index and in each data block it loads; backward: the upper bound), and checks the
// items it meets against the other bound, stopping at the first one beyond it (`Verdict`).
// Upstream seeked both bounds eagerly, in the block index and in every data block loaded,
// although a forward read cut short (a `limit`) never reaches its upper end. Forward, a data
// block after the first is loaded only when every item of the one before it is within the
// upper bound, so its last key is, and the upper-bound seek in the block index (which keeps
// every block up to the first whose last key is beyond the bound) would have kept it too;
// backward, a block whose last key is below the lower bound ends the iteration before it is
// loaded, as the lower-bound seek in the block index would have. A block the other direction
// loaded (reached when both directions meet) was seeked to the other bound only, so its items
// are checked against both.
impl Iterator for Iter {
    type Item = crate::Result<InternalValue>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }

        loop {
            // Always try to keep iterating inside the already-materialized low data block first;
            // this lets callers consume multiple entries without touching the index or cache
            // again.
            if let Some(mut item) = self.lo_data_block.as_mut().and_then(Iterator::next) {
                match self.forward_verdict(&item, false) {
                    Verdict::Yield => {
                        item.key.seqno += self.global_seqno;
                        return Some(Ok(item));
                    }
                    Verdict::Skip => continue,
                    Verdict::Done => {
                        self.finish();
                        return None;
                    }
                }
            }

            if !self.index_initialized {
                // Lazily initialize the index iterator here (not in `new`) so callers can set
                // bounds before we incur any seek or I/O cost.
                let ok = if let Some(bound) = &self.range.0 {
                    // Seek to the first block whose end key is ≥ lower bound.
                    // If this fails we can immediately conclude the range is empty.
                    let key = match bound {
                        Bound::Included(k) | Bound::Excluded(k) => k,
                    };
                    self.index_iter.seek_lower(key, u64::MAX)
                } else {
                    true
                };

                self.index_initialized = true;

                if !ok {
                    // No block in the index overlaps the requested window, so we clear state and
                    // return EOF without attempting to touch any data blocks.
                    self.lo_data_block = None;
                    self.hi_data_block = None;
                    return None;
                }
            }

            let Some(handle) = self.index_iter.next() else {
                // No more block handles coming from the index.  Flush any pending items buffered
                // on the high side (used by reverse iteration) before signalling completion.
                while let Some(mut item) = self.hi_data_block.as_mut().and_then(Iterator::next) {
                    match self.forward_verdict(&item, true) {
                        Verdict::Yield => {
                            item.key.seqno += self.global_seqno;
                            return Some(Ok(item));
                        }
                        Verdict::Skip => {}
                        Verdict::Done => {
                            self.finish();
                            return None;
                        }
                    }
                }

                // Nothing left to serve; drop both buffers so the iterator can be reused safely.
                self.lo_data_block = None;
                self.hi_data_block = None;
                return None;
            };
            let handle = fail_iter!(handle);

            let mut reader = fail_iter!(self.data_block(&handle));

            // Forward path: seek the low side to avoid returning entries below the lower bound;
            // the high side is checked item by item.
            if let Some(bound) = &self.range.0 {
                reader.seek_lower_bound(bound, SeqNo::MAX);
            }

            self.lo_offset = handle.offset();
            self.lo_data_block = Some(reader);
        }
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }

        loop {
            // Mirror the forward iterator: prefer consuming buffered items from the high data
            // block to avoid touching the index once a block has been materialized.
            if let Some(mut item) = self
                .hi_data_block
                .as_mut()
                .and_then(DoubleEndedIterator::next_back)
            {
                match self.backward_verdict(&item, false) {
                    Verdict::Yield => {
                        item.key.seqno += self.global_seqno;
                        return Some(Ok(item));
                    }
                    Verdict::Skip => continue,
                    Verdict::Done => {
                        self.finish();
                        return None;
                    }
                }
            }

            if !self.index_initialized {
                // Mirror forward iteration: initialize lazily so bounds can be applied up-front.
                let ok = if let Some(bound) = &self.range.1 {
                    let key = match bound {
                        Bound::Included(k) | Bound::Excluded(k) => k,
                    };
                    self.index_iter.seek_upper(key, u64::MAX)
                } else {
                    true
                };

                self.index_initialized = true;

                if !ok {
                    // No index span overlaps the requested window; clear both buffers and finish
                    // early.
                    self.lo_data_block = None;
                    self.hi_data_block = None;
                    return None;
                }
            }

            let Some(handle) = self.index_iter.next_back() else {
                // Once we exhaust the index in reverse order, flush any items that were buffered
                // on the low side (set when iterating forward first) before signalling
                // completion.
                while let Some(mut item) = self
                    .lo_data_block
                    .as_mut()
                    .and_then(DoubleEndedIterator::next_back)
                {
                    match self.backward_verdict(&item, true) {
                        Verdict::Yield => {
                            item.key.seqno += self.global_seqno;
                            return Some(Ok(item));
                        }
                        Verdict::Skip => {}
                        Verdict::Done => {
                            self.finish();
                            return None;
                        }
                    }
                }

                // Nothing left to produce; reset both buffers to keep the iterator reusable.
                self.lo_data_block = None;
                self.hi_data_block = None;
                return None;
            };
            let handle = fail_iter!(handle);

            // A block whose last key is below the lower bound holds nothing in range, nor does
            // any block before it.
            if !above_lower(self.range.0.as_ref(), handle.end_key()) {
                self.finish();
                return None;
            }

            let mut reader = fail_iter!(self.data_block(&handle));

            // Reverse path: clamp the high side so `next_back` never yields an entry above the
            // upper bound; the low side is checked item by item.
            if let Some(bound) = &self.range.1 {
                reader.seek_upper_bound(bound, SeqNo::MAX);
            }

            self.hi_offset = handle.offset();
            self.hi_data_block = Some(reader);
        }
    }
}
