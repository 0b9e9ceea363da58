// Cairn patch: a transaction's write buffer for one keyspace (see vendor/README.md).
//
// Upstream buffers a transaction's writes to a keyspace in a private `Memtable` (a lock-free
// skiplist) from the first write on: every write pays a skiplist insertion (a node allocation
// and ~2 log n key comparisons) although most transactions only ever read their own writes
// by point (`get`), which a hash of the key answers. This buffer keeps the writes in order in
// a `Vec`, with a map from each key's hash to its latest write, until a range read needs the
// skiplist (`memtable`): that read builds it from the logged writes (same items, same
// sequence numbers, so the same skiplist upstream would hold), and every later write goes to
// the skiplist as upstream. Two keys with one hash also switch to the skiplist, so the map
// always holds one key per hash. `into_sorted` gives what upstream's commit read from the
// skiplist: each key's latest write, in key order.

use lsm_tree::{InternalValue, Memtable, SeqNo};
use std::{
    collections::{hash_map::Entry, HashMap},
    hash::{BuildHasherDefault, Hasher},
    sync::{Arc, OnceLock},
};

/// A `Hasher` for keys that already are hashes (`u64`s from xxh3).
#[derive(Default)]
pub(crate) struct HashedKey(u64);

impl Hasher for HashedKey {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; anything else is still hashed.
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// The writes of one transaction to one keyspace.
pub(crate) struct WriteBuffer {
    /// The writes in the order they were made (ascending sequence numbers), while `skiplist`
    /// is unset.
    log: Vec<InternalValue>,

    /// For each key in `log` (by its hash; one key per hash), the index of its latest write.
    latest: HashMap<u64, u32, BuildHasherDefault<HashedKey>>,

    /// Once a range read (or a hash collision) has needed it: every write, in a skiplist.
    skiplist: OnceLock<Arc<Memtable>>,
}

impl WriteBuffer {
    pub(crate) fn new() -> Self {
        Self {
            log: Vec::new(),
            latest: HashMap::default(),
            skiplist: OnceLock::new(),
        }
    }

    /// The skiplist holding every write, built from the log the first time.
    fn skiplist(&self) -> &Arc<Memtable> {
        self.skiplist.get_or_init(|| {
            let memtable = Memtable::new(0);
            for item in &self.log {
                memtable.insert(item.clone());
            }
            Arc::new(memtable)
        })
    }

    /// Records a write (its sequence number above every earlier one's).
    pub(crate) fn insert(&mut self, item: InternalValue) {
        if let Some(memtable) = self.skiplist.get() {
            if !self.log.is_empty() {
                // The skiplist holds them now.
                self.log.clear();
                self.latest.clear();
            }
            memtable.insert(item);
            return;
        }
        let Ok(index) = u32::try_from(self.log.len()) else {
            self.skiplist().insert(item);
            return;
        };
        let collision = match self.latest.entry(key_hash(&item.key.user_key)) {
            Entry::Vacant(slot) => {
                slot.insert(index);
                false
            }
            Entry::Occupied(mut slot) => {
                let same = self
                    .log
                    .get(*slot.get() as usize)
                    .is_some_and(|prev| prev.key.user_key == item.key.user_key);
                if same {
                    *slot.get_mut() = index;
                }
                !same
            }
        };
        if collision {
            self.skiplist().insert(item);
        } else {
            self.log.push(item);
        }
    }

    /// The latest write of `key`, if any (what `Memtable::get(key, SeqNo::MAX)` returns).
    pub(crate) fn get(&self, key: &[u8]) -> Option<InternalValue> {
        if let Some(memtable) = self.skiplist.get() {
            return memtable.get(key, SeqNo::MAX);
        }
        let index = *self.latest.get(&key_hash(key))?;
        let item = self.log.get(index as usize)?;
        (&*item.key.user_key == key).then(|| item.clone())
    }

    /// The writes as a skiplist, for a range read merged with the keyspace's own.
    pub(crate) fn memtable(&self) -> Arc<Memtable> {
        self.skiplist().clone()
    }

    /// Each written key's latest write, in ascending key order.
    pub(crate) fn into_sorted(self) -> Vec<InternalValue> {
        let mut items: Vec<InternalValue> = match self.skiplist.into_inner() {
            // Ascending key, then descending sequence number.
            Some(memtable) => memtable.iter().collect(),
            None => {
                let mut log = self.log;
                // `InternalKey`'s order: ascending key, then descending sequence number
                // (unique: every write has its own). The keys are compared as byte slices,
                // in one comparison (`ByteView`'s order compares a 4-byte prefix first, to
                // the same result).
                log.sort_unstable_by(|a, b| {
                    (*a.key.user_key)
                        .cmp(&*b.key.user_key)
                        .then_with(|| b.key.seqno.cmp(&a.key.seqno))
                });
                log
            }
        };
        // Keep the first of each key's run: its latest write.
        items.dedup_by(|later, kept| later.key.user_key == kept.key.user_key);
        items
    }
}
