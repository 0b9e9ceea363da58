// Copyright (c) 2024-present, fjall-rs
// This source code is licensed under both the Apache 2.0 and MIT License
// (found in the LICENSE-* files in the repository)

use crate::key::InternalKey;
use crate::{
    value::{InternalValue, SeqNo, UserKey, UserValue},
    ValueType,
};
use crossbeam_skiplist::SkipMap;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicBool, AtomicU64};

pub use crate::tree::inner::MemtableId;

/// The memtable serves as an intermediary, ephemeral, sorted storage for new items
///
/// When the Memtable exceeds some size, it should be flushed to a table.
pub struct Memtable {
    #[doc(hidden)]
    pub id: MemtableId,

    /// The actual content, stored in a lock-free skiplist.
    #[doc(hidden)]
    pub items: SkipMap<InternalKey, UserValue>,

    /// Approximate active memtable size.
    ///
    /// If this grows too large, a flush is triggered.
    pub(crate) approximate_size: AtomicU64,

    /// Highest encountered sequence number.
    ///
    /// This is used so that `get_highest_seqno` has O(1) complexity.
    pub(crate) highest_seqno: AtomicU64,

    pub(crate) requested_rotation: AtomicBool,
}

impl Memtable {
    /// Returns the memtable ID.
    pub fn id(&self) -> MemtableId {
        self.id
    }

    /// Returns `true` if the memtable was already flagged for rotation.
    pub fn is_flagged_for_rotation(&self) -> bool {
        self.requested_rotation
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Flags the memtable as requested for rotation.
    pub fn flag_rotated(&self) {
        self.requested_rotation
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    #[doc(hidden)]
    #[must_use]
    pub fn new(id: MemtableId) -> Self {
        Self {
            id,
            items: SkipMap::default(),
            approximate_size: AtomicU64::default(),
            highest_seqno: AtomicU64::default(),
            requested_rotation: AtomicBool::default(),
        }
    }

    /// Creates an iterator over all items.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = InternalValue> + '_ {
        self.items.iter().map(|entry| InternalValue {
            key: entry.key().clone(),
            value: entry.value().clone(),
        })
    }

    /// Creates an iterator over a range of items.
    pub(crate) fn range<'a, R: RangeBounds<InternalKey> + 'a>(
        &'a self,
        range: R,
    ) -> impl DoubleEndedIterator<Item = InternalValue> + 'a {
        self.items.range(range).map(|entry| InternalValue {
            key: entry.key().clone(),
            value: entry.value().clone(),
        })
    }

    /// Cairn patch: an iterator over the items whose user keys are within `lo` and `hi` and
    /// whose seqnos are below `seqno`, in internal-key order: what `range` gives over the
    /// internal-key bounds the tree's range read builds from `lo` and `hi`, filtered by
    /// `seqno_filter` (see [`MemtableRange`]).
    pub(crate) fn range_user_keys(
        &self,
        lo: Bound<UserKey>,
        hi: Bound<UserKey>,
        seqno: SeqNo,
    ) -> MemtableRange<'_> {
        MemtableRange {
            items: &self.items,
            lo,
            hi,
            seqno,
            iter: None,
            lo_kept: false,
            hi_kept: false,
            done: false,
        }
    }

    /// Returns the item by key if it exists.
    ///
    /// The item with the highest seqno will be returned, if `seqno` is None.
    #[doc(hidden)]
    pub fn get(&self, key: &[u8], seqno: SeqNo) -> Option<InternalValue> {
        if seqno == 0 {
            return None;
        }

        // NOTE: This range start deserves some explanation...
        // InternalKeys are multi-sorted by 2 categories: user_key and Reverse(seqno). (tombstone doesn't really matter)
        // We search for the lowest entry that is greater or equal the user's prefix key
        // and has the seqno (or lower) we want (because the seqno is stored in reverse order)
        //
        // Example: We search for "abc"
        //
        // key -> seqno
        //
        // a   -> 7
        // abc -> 5 <<< This is the lowest key (highest seqno) that matches the key with seqno=None
        // abc -> 4
        // abc -> 3 <<< If searching for abc and seqno=4, we would get this
        // abcdef -> 6
        // abcdef -> 5
        //
        let lower_bound = InternalKey::new(key, seqno - 1, ValueType::Value);

        let mut iter = self
            .items
            .range(lower_bound..)
            .take_while(|entry| &*entry.key().user_key == key);

        iter.next().map(|entry| InternalValue {
            key: entry.key().clone(),
            value: entry.value().clone(),
        })
    }

    /// Gets approximate size of memtable in bytes.
    pub fn size(&self) -> u64 {
        self.approximate_size
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Counts the number of items in the memtable.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Returns `true` if the memtable is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Inserts an item into the memtable
    #[doc(hidden)]
    pub fn insert(&self, item: InternalValue) -> (u64, u64) {
        #[expect(
            clippy::expect_used,
            reason = "keys are limited to 16-bit length + values are limited to 32-bit length"
        )]
        let item_size =
            (item.key.user_key.len() + item.value.len() + std::mem::size_of::<InternalValue>())
                .try_into()
                .expect("should fit into u64");

        let size_before = self
            .approximate_size
            .fetch_add(item_size, std::sync::atomic::Ordering::AcqRel);

        let key = InternalKey::new(item.key.user_key, item.key.seqno, item.key.value_type);
        self.items.insert(key, item.value);

        self.highest_seqno
            .fetch_max(item.key.seqno, std::sync::atomic::Ordering::AcqRel);

        (item_size, size_before + item_size)
    }

    /// Returns the highest sequence number in the memtable.
    pub fn get_highest_seqno(&self) -> Option<SeqNo> {
        if self.is_empty() {
            None
        } else {
            Some(
                self.highest_seqno
                    .load(std::sync::atomic::Ordering::Acquire),
            )
        }
    }
}

type SkipRange<'a> = crossbeam_skiplist::map::Range<
    'a,
    InternalKey,
    (Bound<InternalKey>, Bound<InternalKey>),
    InternalKey,
    UserValue,
>;

/// Cairn patch: a memtable range over user-key bounds whose skiplist range is bounded on the
/// side it starts from only.
///
/// Upstream's range read iterated the skiplist over internal-key bounds on both sides
/// (`Included(k)` as `Included((k, SeqNo::MAX))` below and `Included((k, 0))` above,
/// `Excluded(k)` as `Excluded((k, 0))` below and `Excluded((k, SeqNo::MAX))` above), so the
/// skiplist compared every item with the far bound as an internal key. Those bounds keep
/// exactly the items whose user key is within the user-key bound (internal keys order by
/// user key, then by descending seqno). Here the skiplist range is opened on the first call,
/// bounded by the internal key of the bound on the side iteration starts from (the lower one
/// for `next`, the upper one for `next_back`), and each item met is checked against the
/// other bound by its user key: the first one beyond it ends the iteration (every item not
/// yet returned lies beyond it too, both directions). Called in the other direction later,
/// the skiplist range is unbounded on that side, so the items met there are checked against
/// both bounds and those outside skipped. The items at or above `seqno` are skipped before
/// their key and value are cloned (upstream cloned them, then filtered them out with
/// `seqno_filter`).
pub(crate) struct MemtableRange<'a> {
    items: &'a SkipMap<InternalKey, UserValue>,
    lo: Bound<UserKey>,
    hi: Bound<UserKey>,
    seqno: SeqNo,
    iter: Option<SkipRange<'a>>,
    /// Whether `iter` itself keeps to `lo` (it was opened going forward).
    lo_kept: bool,
    /// Whether `iter` itself keeps to `hi` (it was opened going backward).
    hi_kept: bool,
    done: bool,
}

impl MemtableRange<'_> {
    #[inline]
    fn open(&mut self, forward: bool) {
        if self.iter.is_some() {
            return;
        }
        let range = if forward {
            self.lo_kept = true;
            // NOTE: See TreeIter::create_range (range.rs) for these bounds
            let lo = match &self.lo {
                Bound::Included(key) => Bound::Included(InternalKey::new(
                    key.clone(),
                    SeqNo::MAX,
                    ValueType::Tombstone,
                )),
                Bound::Excluded(key) => {
                    Bound::Excluded(InternalKey::new(key.clone(), 0, ValueType::Tombstone))
                }
                Bound::Unbounded => Bound::Unbounded,
            };
            (lo, Bound::Unbounded)
        } else {
            self.hi_kept = true;
            let hi = match &self.hi {
                Bound::Included(key) => {
                    Bound::Included(InternalKey::new(key.clone(), 0, ValueType::Value))
                }
                Bound::Excluded(key) => {
                    Bound::Excluded(InternalKey::new(key.clone(), SeqNo::MAX, ValueType::Value))
                }
                Bound::Unbounded => Bound::Unbounded,
            };
            (Bound::Unbounded, hi)
        };
        self.iter = Some(self.items.range(range));
    }
}

fn above_lower(bound: &Bound<UserKey>, key: &[u8]) -> bool {
    match bound {
        Bound::Included(lo) => key >= &**lo,
        Bound::Excluded(lo) => key > &**lo,
        Bound::Unbounded => true,
    }
}

fn below_upper(bound: &Bound<UserKey>, key: &[u8]) -> bool {
    match bound {
        Bound::Included(hi) => key <= &**hi,
        Bound::Excluded(hi) => key < &**hi,
        Bound::Unbounded => true,
    }
}

impl Iterator for MemtableRange<'_> {
    type Item = crate::Result<InternalValue>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        self.open(true);
        loop {
            let entry = self.iter.as_mut()?.next()?;
            let key = &*entry.key().user_key;
            if !below_upper(&self.hi, key) {
                self.done = true;
                return None;
            }
            if (self.lo_kept || above_lower(&self.lo, key))
                && crate::range::seqno_filter(entry.key().seqno, self.seqno)
            {
                return Some(Ok(InternalValue {
                    key: entry.key().clone(),
                    value: entry.value().clone(),
                }));
            }
        }
    }
}

impl DoubleEndedIterator for MemtableRange<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        self.open(false);
        loop {
            let entry = self.iter.as_mut()?.next_back()?;
            let key = &*entry.key().user_key;
            if !above_lower(&self.lo, key) {
                self.done = true;
                return None;
            }
            if (self.hi_kept || below_upper(&self.hi, key))
                && crate::range::seqno_filter(entry.key().seqno, self.seqno)
            {
                return Some(Ok(InternalValue {
                    key: entry.key().clone(),
                    value: entry.value().clone(),
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ValueType;
    use test_log::test;

    #[test]
    #[expect(clippy::unwrap_used)]
    fn memtable_mvcc_point_read() {
        let memtable = Memtable::new(0);

        memtable.insert(InternalValue::from_components(
            *b"hello-key-999991",
            *b"hello-value-999991",
            0,
            ValueType::Value,
        ));

        let item = memtable.get(b"hello-key-99999", SeqNo::MAX);
        assert_eq!(None, item);

        let item = memtable.get(b"hello-key-999991", SeqNo::MAX);
        assert_eq!(*b"hello-value-999991", &*item.unwrap().value);

        memtable.insert(InternalValue::from_components(
            *b"hello-key-999991",
            *b"hello-value-999991-2",
            1,
            ValueType::Value,
        ));

        let item = memtable.get(b"hello-key-99999", SeqNo::MAX);
        assert_eq!(None, item);

        let item = memtable.get(b"hello-key-999991", SeqNo::MAX);
        assert_eq!((*b"hello-value-999991-2"), &*item.unwrap().value);

        let item = memtable.get(b"hello-key-99999", 1);
        assert_eq!(None, item);

        let item = memtable.get(b"hello-key-999991", 1);
        assert_eq!((*b"hello-value-999991"), &*item.unwrap().value);

        let item = memtable.get(b"hello-key-99999", 2);
        assert_eq!(None, item);

        let item = memtable.get(b"hello-key-999991", 2);
        assert_eq!((*b"hello-value-999991-2"), &*item.unwrap().value);
    }

    #[test]
    fn memtable_get() {
        let memtable = Memtable::new(0);

        let value =
            InternalValue::from_components(b"abc".to_vec(), b"abc".to_vec(), 0, ValueType::Value);

        memtable.insert(value.clone());

        assert_eq!(Some(value), memtable.get(b"abc", SeqNo::MAX));
    }

    #[test]
    fn memtable_get_highest_seqno() {
        let memtable = Memtable::new(0);

        memtable.insert(InternalValue::from_components(
            b"abc".to_vec(),
            b"abc".to_vec(),
            0,
            ValueType::Value,
        ));
        memtable.insert(InternalValue::from_components(
            b"abc".to_vec(),
            b"abc".to_vec(),
            1,
            ValueType::Value,
        ));
        memtable.insert(InternalValue::from_components(
            b"abc".to_vec(),
            b"abc".to_vec(),
            2,
            ValueType::Value,
        ));
        memtable.insert(InternalValue::from_components(
            b"abc".to_vec(),
            b"abc".to_vec(),
            3,
            ValueType::Value,
        ));
        memtable.insert(InternalValue::from_components(
            b"abc".to_vec(),
            b"abc".to_vec(),
            4,
            ValueType::Value,
        ));

        assert_eq!(
            Some(InternalValue::from_components(
                b"abc".to_vec(),
                b"abc".to_vec(),
                4,
                ValueType::Value,
            )),
            memtable.get(b"abc", SeqNo::MAX)
        );
    }

    #[test]
    fn memtable_get_prefix() {
        let memtable = Memtable::new(0);

        memtable.insert(InternalValue::from_components(
            b"abc0".to_vec(),
            b"abc".to_vec(),
            0,
            ValueType::Value,
        ));
        memtable.insert(InternalValue::from_components(
            b"abc".to_vec(),
            b"abc".to_vec(),
            255,
            ValueType::Value,
        ));

        assert_eq!(
            Some(InternalValue::from_components(
                b"abc".to_vec(),
                b"abc".to_vec(),
                255,
                ValueType::Value,
            )),
            memtable.get(b"abc", SeqNo::MAX)
        );

        assert_eq!(
            Some(InternalValue::from_components(
                b"abc0".to_vec(),
                b"abc".to_vec(),
                0,
                ValueType::Value,
            )),
            memtable.get(b"abc0", SeqNo::MAX)
        );
    }

    #[test]
    fn memtable_get_old_version() {
        let memtable = Memtable::new(0);

        memtable.insert(InternalValue::from_components(
            b"abc".to_vec(),
            b"abc".to_vec(),
            0,
            ValueType::Value,
        ));
        memtable.insert(InternalValue::from_components(
            b"abc".to_vec(),
            b"abc".to_vec(),
            99,
            ValueType::Value,
        ));
        memtable.insert(InternalValue::from_components(
            b"abc".to_vec(),
            b"abc".to_vec(),
            255,
            ValueType::Value,
        ));

        assert_eq!(
            Some(InternalValue::from_components(
                b"abc".to_vec(),
                b"abc".to_vec(),
                255,
                ValueType::Value,
            )),
            memtable.get(b"abc", SeqNo::MAX)
        );

        assert_eq!(
            Some(InternalValue::from_components(
                b"abc".to_vec(),
                b"abc".to_vec(),
                99,
                ValueType::Value,
            )),
            memtable.get(b"abc", 100)
        );

        assert_eq!(
            Some(InternalValue::from_components(
                b"abc".to_vec(),
                b"abc".to_vec(),
                0,
                ValueType::Value,
            )),
            memtable.get(b"abc", 50)
        );
    }
}
