//! The row cache: a bounded in-memory map of (keyspace, key) → newest committed value that
//! answers the point reads of read-only snapshots without fjall's memtable and table lookups
//! (RocksDB's row cache; WiredTiger's in-memory pages play the same part).
//!
//! What it holds: entries keyed by a 64-bit hash of (fjall keyspace id, key), each holding
//! the keyspace id, the key, a private copy of the value and `valid_from`, a sequence number.
//! Only present values are cached, never "absent". The keyspace id is fjall's internal id,
//! unique for every keyspace the database ever created, so a dropped and re-created space
//! never meets the entries of its predecessor. The cache is split into [`SHARDS`] shards by
//! the top bits of the hash; each shard is a mutex over a weighted `quick_cache` map and two
//! counters:
//! - `pending`: how many write commits that wrote a key of this shard are in flight;
//! - `watermark`: fjall's visible sequence number read after the last such commit finished
//!   (at open: the visible sequence number then).
//!
//! The protocol (fjall numbers a commit's batch `B`, inserts it into the memtables, then
//! publishes visibility `B + 1`; a snapshot at sequence number `S` sees exactly the batches
//! `B < S`; the next batch allocated is never below the visible sequence number):
//! 1. A write transaction records the hash of every (keyspace, key) it puts or deletes.
//!    Its commit, before calling fjall, takes each touched shard's lock in turn, removes the
//!    entries under its hashes and increments `pending`. After fjall's commit returns
//!    (committed, conflicted or failed, or unwinding), it takes each touched shard's lock,
//!    decrements `pending` and raises `watermark` to fjall's visible sequence number.
//! 2. A snapshot at `S` that finds an entry under the shard lock with the same keyspace and
//!    key uses its value only if `S >= valid_from`; otherwise it reads fjall.
//! 3. A snapshot at `S` that read a present value `V` from fjall stores it only if, under the
//!    shard lock, `pending == 0 && S >= watermark`, with `valid_from = watermark`.
//!
//! Why a stored entry is the newest committed value of its key, at fill time `T`: every
//! commit writing the key either (a) finished step 1 before `T`: then `watermark >= B + 1`
//! at `T`, and `S >= watermark`, so the snapshot saw it; or (b) was in flight at `T`:
//! impossible, `pending` counts it; or (c) starts after `T`: it removes the entry before its
//! batch exists. A batch `B < S` that wrote the key started before `T` (it was visible when
//! the snapshot was taken) so it is case (a), and a finished batch `B >= S` would have raised
//! `watermark` above `S`. So `V` (what fjall returns at `S`) is the newest committed value at
//! `T`, and stays so while the entry exists (any later writer removes it first).
//!
//! Why a hit is exact: the entry exists at the hit's time `H`, so no commit writing the key
//! started between its fill and `H`; every earlier one has `B + 1 <= valid_from <= S`, so the
//! snapshot sees them and its value is `V`; a commit starting after `H` gets a batch number
//! at or above the visible sequence number at `H`, which is at or above `S`, so the snapshot
//! does not see it.
//!
//! Writes that bypass the write transactions: dropping a space (its entries are removed by a
//! scan of the cache, and any an in-flight reader stores afterwards carry the dead keyspace
//! id, unreachable, until evicted); checkpoints and compactions move data between files
//! without changing any visible value; the engine writes nothing else outside transactions.
//! Write transactions never read through the cache: their reads must stay tracked for
//! fjall's conflict detection.
//!
//! Memory: each shard holds at most its share of the configured bytes, counting per entry
//! the key, the value and [`ENTRY_OVERHEAD`] (the entry, its heap allocation and the map's
//! slot). A value fjall returns can be a slice of a whole data block, so the cache keeps its
//! own copy of exactly the key's and the value's bytes, in one allocation (a hit then reads
//! the map's slot and that one block). A size of 0 disables the cache.

use std::hash::{BuildHasher, Hasher};
use std::sync::{Mutex, MutexGuard};

use byteview::ByteView;

use super::Bytes;

/// Number of shards (a power of two; a commit's touched shards fit a `u64` mask).
pub const SHARDS: usize = 64;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

/// Bytes counted per entry beyond its key and value.
pub const ENTRY_OVERHEAD: u64 = 128;

/// One cached value: the key and the value in one allocation (`buf` is the key's bytes
/// then the value's, copied in by one `memcpy` each), so a hit reads one heap block besides
/// the map's slot.
#[derive(Clone)]
struct Entry {
    keyspace: u64,
    valid_from: u64,
    key_len: usize,
    buf: ByteView,
}

impl Entry {
    fn key(&self) -> &[u8] {
        self.buf.get(..self.key_len).unwrap_or_default()
    }

    fn value(&self) -> Bytes {
        // A view of the value part: no copy (`key_len <= buf.len()` by construction).
        Bytes::from_fjall(::fjall::Slice::from(self.buf.slice(self.key_len..)))
    }
}

#[derive(Clone)]
struct Weigher;

impl quick_cache::Weighter<u64, Entry> for Weigher {
    fn weight(&self, _hash: &u64, e: &Entry) -> u64 {
        e.buf.len() as u64 + ENTRY_OVERHEAD
    }
}

type Map = quick_cache::unsync::Cache<
    u64,
    Entry,
    Weigher,
    foldhash::fast::FixedState,
    quick_cache::unsync::DefaultLifecycle<u64, Entry>,
>;

struct Shard {
    pending: u64,
    watermark: u64,
    map: Map,
}

/// The row cache (see the module docs).
pub struct RowCache {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::FixedState,
    capacity: u64,
}

/// Average entry size assumed to presize each shard's map.
const ESTIMATED_ENTRY: u64 = 1024;

impl RowCache {
    /// A cache of at most `bytes` (None when `bytes` is 0: no cache), whose watermarks start
    /// at `visible_seqno`.
    pub fn new(bytes: u64, visible_seqno: u64) -> Option<RowCache> {
        if bytes == 0 {
            return None;
        }
        let per_shard = (bytes / SHARDS as u64).max(1);
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    pending: 0,
                    watermark: visible_seqno,
                    map: Map::with(
                        (per_shard / ESTIMATED_ENTRY).max(16) as usize,
                        per_shard,
                        Weigher,
                        foldhash::fast::FixedState::default(),
                        Default::default(),
                    ),
                })
            })
            .collect();
        Some(RowCache {
            shards,
            hasher: foldhash::fast::FixedState::default(),
            capacity: per_shard * SHARDS as u64,
        })
    }

    /// The hash of (keyspace, key): the entry's map key, and its shard in the top bits.
    pub fn hash(&self, keyspace: u64, key: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write_u64(keyspace);
        h.write(key);
        h.finish()
    }

    fn shard_index(hash: u64) -> usize {
        (hash >> (64 - SHARD_BITS)) as usize
    }

    fn lock(&self, index: usize) -> Option<MutexGuard<'_, Shard>> {
        // A poisoned shard (a panic while held) is never used again: no hit, no fill; the
        // commit path below still counts on it through `lock_any`.
        self.shards.get(index)?.lock().ok()
    }

    fn lock_any(&self, index: usize) -> Option<MutexGuard<'_, Shard>> {
        let m = self.shards.get(index)?;
        Some(m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The cached value of (keyspace, key) for a snapshot at `seqno` (step 2).
    pub fn get(&self, hash: u64, keyspace: u64, key: &[u8], seqno: u64) -> Option<Bytes> {
        let shard = self.lock(Self::shard_index(hash))?;
        let e = shard.map.get(&hash)?;
        (e.keyspace == keyspace && e.key() == key && seqno >= e.valid_from).then(|| e.value())
    }

    /// Stores `value`, read from fjall by a snapshot at `seqno`, when the protocol allows it
    /// (step 3). Returns the cached copy when stored.
    pub fn fill(
        &self,
        hash: u64,
        keyspace: u64,
        key: &[u8],
        seqno: u64,
        value: &[u8],
    ) -> Option<Bytes> {
        let mut shard = self.lock(Self::shard_index(hash))?;
        if shard.pending != 0 || seqno < shard.watermark {
            return None;
        }
        // One allocation of exactly the key and the value.
        let buf = ByteView::fused(key, value);
        let entry = Entry {
            keyspace,
            valid_from: shard.watermark,
            key_len: key.len(),
            buf,
        };
        let value = entry.value();
        shard.map.insert(hash, entry);
        Some(value)
    }

    /// Step 1 before fjall's commit: removes the entries under `hashes` (sorted and
    /// deduplicated here) and counts the commit in every touched shard. Returns the mask of
    /// touched shards for [`RowCache::end_commit`].
    pub fn begin_commit(&self, hashes: &mut Vec<u64>) -> u64 {
        hashes.sort_unstable();
        hashes.dedup();
        let mut mask = 0u64;
        let mut rest = &hashes[..];
        while let Some(&first) = rest.first() {
            let index = Self::shard_index(first);
            let run = rest
                .iter()
                .position(|&h| Self::shard_index(h) != index)
                .unwrap_or(rest.len());
            let (these, tail) = rest.split_at(run);
            rest = tail;
            if let Some(mut shard) = self.lock_any(index) {
                if !shard.map.is_empty() {
                    for h in these {
                        shard.map.remove(h);
                    }
                }
                shard.pending += 1;
                mask |= 1 << index;
            }
        }
        mask
    }

    /// Step 1 after fjall's commit: uncounts the commit in the shards of `mask` and raises
    /// their watermarks to `visible_seqno`.
    pub fn end_commit(&self, mask: u64, visible_seqno: u64) {
        let mut m = mask;
        while m != 0 {
            let index = m.trailing_zeros() as usize;
            m &= m - 1;
            if let Some(mut shard) = self.lock_any(index) {
                shard.pending -= 1;
                shard.watermark = shard.watermark.max(visible_seqno);
            }
        }
    }

    /// Removes every entry of `keyspace`.
    pub fn remove_keyspace(&self, keyspace: u64) {
        for i in 0..SHARDS {
            if let Some(mut shard) = self.lock_any(i) {
                shard.map.retain(|_, e| e.keyspace != keyspace);
            }
        }
    }

    /// Bytes the entries hold now, by the accounting above.
    pub fn used_bytes(&self) -> u64 {
        (0..SHARDS)
            .filter_map(|i| self.lock_any(i).map(|s| s.map.weight()))
            .sum()
    }

    /// The configured bound in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        (0..SHARDS)
            .filter_map(|i| self.lock_any(i).map(|s| s.map.len()))
            .sum()
    }

    /// True when the cache holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_and_hit_follow_the_watermark() {
        let c = RowCache::new(1 << 20, 5).unwrap();
        let h = c.hash(1, b"k");
        // A snapshot older than the watermark may not fill.
        assert!(c.fill(h, 1, b"k", 4, b"v").is_none());
        assert!(c.fill(h, 1, b"k", 5, b"v").is_some());
        assert_eq!(c.get(h, 1, b"k", 5).as_deref(), Some(&b"v"[..]));
        assert!(c.get(h, 1, b"k", 4).is_none());
        // Another keyspace or key under the same hash is not a hit.
        assert!(c.get(h, 2, b"k", 5).is_none());
        assert!(c.get(h, 1, b"j", 5).is_none());
        // A commit in flight removes the entry and blocks fills until it ends.
        let mut hs = vec![h, h];
        let mask = c.begin_commit(&mut hs);
        assert_eq!(mask.count_ones(), 1);
        assert!(c.get(h, 1, b"k", 9).is_none());
        assert!(c.fill(h, 1, b"k", 9, b"w").is_none());
        c.end_commit(mask, 7);
        assert!(c.fill(h, 1, b"k", 6, b"w").is_none());
        assert!(c.fill(h, 1, b"k", 7, b"w").is_some());
        assert_eq!(c.get(h, 1, b"k", 8).as_deref(), Some(&b"w"[..]));
        assert!(c.get(h, 1, b"k", 6).is_none());
        c.remove_keyspace(1);
        assert!(c.is_empty());
        assert_eq!(c.used_bytes(), 0);
    }

    #[test]
    fn the_bound_holds() {
        let c = RowCache::new(64 * 4096, 0).unwrap();
        let value = vec![1u8; 1000];
        for i in 0..10_000u32 {
            let key = i.to_be_bytes();
            let h = c.hash(1, &key);
            c.fill(h, 1, &key, 0, &value);
        }
        assert!(c.used_bytes() <= c.capacity());
        assert!(c.len() > 64);
        assert!(RowCache::new(0, 0).is_none());
    }
}
