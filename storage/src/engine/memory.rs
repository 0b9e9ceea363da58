//! An in-memory engine for tests, with the same serializable semantics as fjall's.
//!
//! Each key keeps a chain of `(commit version, value-or-tombstone)`; a snapshot at version
//! `v` sees the newest entry at or below `v`. A transaction records the keys and ranges it
//! read and buffers its writes; commit takes the engine lock, fails with
//! [`EngineError::Conflict`] if any read key, or any key inside a read range, got a version
//! newer than the snapshot, and otherwise applies every write under one new version.
//! Nothing is ever garbage-collected: this engine is for tests, not for data.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{
    Bytes, CATALOG_SPACE, Engine, EngineError, KvIter, Read, Result, Snapshot, SpaceId, Tx,
};

type Chain = Vec<(u64, Option<Arc<[u8]>>)>;
type Rows = Vec<(Vec<u8>, Arc<[u8]>)>;

#[derive(Default)]
struct State {
    version: u64,
    spaces: HashMap<SpaceId, BTreeMap<Vec<u8>, Chain>>,
}

/// The in-memory engine.
#[derive(Clone)]
pub struct MemoryEngine {
    state: Arc<Mutex<State>>,
    syncs: Arc<AtomicUsize>,
}

impl Default for MemoryEngine {
    fn default() -> Self {
        MemoryEngine::new()
    }
}

impl MemoryEngine {
    /// An empty engine holding only the catalog space.
    pub fn new() -> MemoryEngine {
        let mut st = State::default();
        st.spaces.insert(CATALOG_SPACE, BTreeMap::new());
        MemoryEngine {
            state: Arc::new(Mutex::new(st)),
            syncs: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// How many times [`Engine::sync`] ran.
    pub fn sync_count(&self) -> usize {
        self.syncs.load(Ordering::Relaxed)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| EngineError::Io("memory engine lock poisoned".into()))
    }
}

fn visible(chain: &Chain, at: u64) -> Option<&Option<Arc<[u8]>>> {
    chain
        .iter()
        .rev()
        .find(|(v, _)| *v <= at)
        .map(|(_, val)| val)
}

fn in_range(key: &[u8], start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> bool {
    let after_start = match start {
        Bound::Included(s) => key >= s.as_slice(),
        Bound::Excluded(s) => key > s.as_slice(),
        Bound::Unbounded => true,
    };
    let before_end = match end {
        Bound::Included(e) => key <= e.as_slice(),
        Bound::Excluded(e) => key < e.as_slice(),
        Bound::Unbounded => true,
    };
    after_start && before_end
}

fn owned(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Reads `range` of `space` as of `at` into a vector (sorted ascending).
fn read_range(
    st: &State,
    space: SpaceId,
    start: &Bound<Vec<u8>>,
    end: &Bound<Vec<u8>>,
    at: u64,
) -> Result<Rows> {
    let map = st
        .spaces
        .get(&space)
        .ok_or(EngineError::NoSuchSpace(space))?;
    if let (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) =
        (start, end)
        && s > e
    {
        return Ok(Vec::new());
    }
    Ok(map
        .range::<Vec<u8>, _>((start.clone(), end.clone()))
        .filter_map(|(k, chain)| match visible(chain, at) {
            Some(Some(v)) => Some((k.clone(), v.clone())),
            _ => None,
        })
        .collect())
}

/// A memory snapshot.
pub struct MemorySnapshot {
    engine: MemoryEngine,
    at: u64,
}

impl Read for MemorySnapshot {
    fn get(&self, space: SpaceId, key: &[u8]) -> Result<Option<Bytes>> {
        let st = self.engine.lock()?;
        let map = st
            .spaces
            .get(&space)
            .ok_or(EngineError::NoSuchSpace(space))?;
        Ok(match map.get(key).and_then(|c| visible(c, self.at)) {
            Some(Some(v)) => Some(Bytes::copy_from(v)),
            _ => None,
        })
    }

    fn range<'a>(
        &'a self,
        space: SpaceId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<KvIter<'a>> {
        let st = self.engine.lock()?;
        let mut rows = read_range(&st, space, &owned(start), &owned(end), self.at)?;
        if reverse {
            rows.reverse();
        }
        Ok(Box::new(rows.into_iter().map(|(k, v)| {
            Ok((Bytes::copy_from(&k), Bytes::copy_from(&v)))
        })))
    }
}

impl Snapshot for MemorySnapshot {}

type ReadRange = (SpaceId, Bound<Vec<u8>>, Bound<Vec<u8>>);

/// A memory transaction.
pub struct MemoryTx {
    engine: MemoryEngine,
    at: u64,
    writes: BTreeMap<(SpaceId, Vec<u8>), Option<Vec<u8>>>,
    read_keys: Mutex<Vec<(SpaceId, Vec<u8>)>>,
    read_ranges: Mutex<Vec<ReadRange>>,
    reads: AtomicUsize,
    nwrites: usize,
}

impl Read for MemoryTx {
    fn get(&self, space: SpaceId, key: &[u8]) -> Result<Option<Bytes>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut r) = self.read_keys.lock() {
            r.push((space, key.to_vec()));
        }
        if let Some(w) = self.writes.get(&(space, key.to_vec())) {
            return Ok(w.as_deref().map(Bytes::copy_from));
        }
        let st = self.engine.lock()?;
        let map = st
            .spaces
            .get(&space)
            .ok_or(EngineError::NoSuchSpace(space))?;
        Ok(match map.get(key).and_then(|c| visible(c, self.at)) {
            Some(Some(v)) => Some(Bytes::copy_from(v)),
            _ => None,
        })
    }

    fn range<'a>(
        &'a self,
        space: SpaceId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<KvIter<'a>> {
        let (start, end) = (owned(start), owned(end));
        if let Ok(mut r) = self.read_ranges.lock() {
            r.push((space, start.clone(), end.clone()));
        }
        let base = {
            let st = self.engine.lock()?;
            read_range(&st, space, &start, &end, self.at)?
        };
        let mut merged: BTreeMap<Vec<u8>, Vec<u8>> =
            base.into_iter().map(|(k, v)| (k, v.to_vec())).collect();
        for ((s, k), v) in &self.writes {
            if *s == space && in_range(k, &start, &end) {
                match v {
                    Some(v) => {
                        merged.insert(k.clone(), v.clone());
                    }
                    None => {
                        merged.remove(k);
                    }
                }
            }
        }
        let mut rows: Vec<(Vec<u8>, Vec<u8>)> = merged.into_iter().collect();
        if reverse {
            rows.reverse();
        }
        let counter = &self.reads;
        Ok(Box::new(rows.into_iter().map(move |(k, v)| {
            counter.fetch_add(1, Ordering::Relaxed);
            Ok((Bytes::copy_from(&k), Bytes::copy_from(&v)))
        })))
    }
}

impl Tx for MemoryTx {
    fn put(&mut self, space: SpaceId, key: &[u8], value: &[u8]) -> Result<()> {
        if !self.engine.lock()?.spaces.contains_key(&space) {
            return Err(EngineError::NoSuchSpace(space));
        }
        self.nwrites += 1;
        self.writes
            .insert((space, key.to_vec()), Some(value.to_vec()));
        Ok(())
    }

    fn delete(&mut self, space: SpaceId, key: &[u8]) -> Result<()> {
        if !self.engine.lock()?.spaces.contains_key(&space) {
            return Err(EngineError::NoSuchSpace(space));
        }
        self.nwrites += 1;
        self.writes.insert((space, key.to_vec()), None);
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<()> {
        let engine = self.engine.clone();
        let mut st = engine.lock()?;
        if self.writes.is_empty() {
            return Ok(());
        }
        let newer = |chain: &Chain| chain.iter().any(|(v, _)| *v > self.at);
        let keys = self.read_keys.lock().map(|k| k.clone()).unwrap_or_default();
        for (space, key) in &keys {
            if let Some(chain) = st.spaces.get(space).and_then(|m| m.get(key))
                && newer(chain)
            {
                return Err(EngineError::Conflict);
            }
        }
        let ranges = self
            .read_ranges
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        for (space, start, end) in &ranges {
            if let Some(map) = st.spaces.get(space)
                && map
                    .iter()
                    .any(|(k, chain)| in_range(k, start, end) && newer(chain))
            {
                return Err(EngineError::Conflict);
            }
        }
        st.version += 1;
        let version = st.version;
        for ((space, key), value) in self.writes {
            if let Some(map) = st.spaces.get_mut(&space) {
                map.entry(key)
                    .or_default()
                    .push((version, value.map(Arc::from)));
            }
        }
        Ok(())
    }

    fn writes(&self) -> usize {
        self.nwrites
    }

    fn reads(&self) -> usize {
        self.reads.load(Ordering::Relaxed)
    }
}

impl Engine for MemoryEngine {
    fn begin(&self) -> Result<Box<dyn Tx>> {
        let at = self.lock()?.version;
        Ok(Box::new(MemoryTx {
            engine: self.clone(),
            at,
            writes: BTreeMap::new(),
            read_keys: Mutex::new(Vec::new()),
            read_ranges: Mutex::new(Vec::new()),
            reads: AtomicUsize::new(0),
            nwrites: 0,
        }))
    }

    fn snapshot(&self) -> Result<Box<dyn Snapshot>> {
        let at = self.lock()?.version;
        Ok(Box::new(MemorySnapshot {
            engine: self.clone(),
            at,
        }))
    }

    fn open_space(&self, space: SpaceId) -> Result<()> {
        self.lock()?.spaces.entry(space).or_default();
        Ok(())
    }

    fn drop_space(&self, space: SpaceId) -> Result<()> {
        if space == CATALOG_SPACE {
            return Err(EngineError::Io(
                "the catalog space cannot be dropped".into(),
            ));
        }
        self.lock()?.spaces.remove(&space);
        Ok(())
    }

    fn spaces(&self) -> Vec<SpaceId> {
        let mut v: Vec<SpaceId> = self
            .lock()
            .map(|s| s.spaces.keys().copied().collect())
            .unwrap_or_default();
        v.sort_unstable();
        v
    }

    fn space_disk_size(&self, space: SpaceId) -> u64 {
        self.lock()
            .ok()
            .and_then(|s| {
                s.spaces.get(&space).map(|m| {
                    m.iter()
                        .map(|(k, c)| {
                            (k.len()
                                + c.last()
                                    .and_then(|(_, v)| v.as_ref())
                                    .map_or(0, |v| v.len())) as u64
                        })
                        .sum()
                })
            })
            .unwrap_or(0)
    }

    fn sync(&self) -> Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn checkpoint(&self) -> Result<usize> {
        Ok(self.spaces().len())
    }

    fn max_key_len(&self) -> usize {
        super::fjall::FJALL_MAX_KEY
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn collect(it: KvIter<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
        it.map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
    }

    /// Behaviour every engine must show.
    pub(crate) fn conformance_suite(e: &dyn Engine) {
        e.open_space(1).unwrap();
        // writes are visible to their own transaction and, after commit, to new snapshots
        let mut tx = e.begin().unwrap();
        for k in [b"a", b"b", b"c", b"d"] {
            tx.put(1, k, k).unwrap();
        }
        assert_eq!(tx.get(1, b"b").unwrap().as_deref(), Some(&b"b"[..]));
        let before = e.snapshot().unwrap();
        tx.commit().unwrap();
        assert_eq!(before.get(1, b"b").unwrap(), None, "snapshot isolation");
        let s = e.snapshot().unwrap();
        let all = collect(
            s.range(1, Bound::Unbounded, Bound::Unbounded, false)
                .unwrap(),
        );
        assert_eq!(all.len(), 4);
        let rev = collect(
            s.range(
                1,
                Bound::Excluded(&b"a"[..]),
                Bound::Included(&b"c"[..]),
                true,
            )
            .unwrap(),
        );
        assert_eq!(
            rev,
            vec![
                (b"c".to_vec(), b"c".to_vec()),
                (b"b".to_vec(), b"b".to_vec())
            ]
        );
        assert_eq!(collect(s.prefix(1, b"c").unwrap()).len(), 1);

        // a transaction sees its own deletes and puts inside ranges
        let mut tx = e.begin().unwrap();
        tx.delete(1, b"b").unwrap();
        tx.put(1, b"bb", b"x").unwrap();
        let keys: Vec<Vec<u8>> = collect(
            tx.range(1, Bound::Unbounded, Bound::Unbounded, false)
                .unwrap(),
        )
        .into_iter()
        .map(|(k, _)| k)
        .collect();
        assert_eq!(
            keys,
            vec![b"a".to_vec(), b"bb".to_vec(), b"c".to_vec(), b"d".to_vec()]
        );
        tx.commit().unwrap();

        // read-write conflict on a point read
        let mut t1 = e.begin().unwrap();
        let mut t2 = e.begin().unwrap();
        t1.get(1, b"a").unwrap();
        t2.put(1, b"a", b"2").unwrap();
        t2.commit().unwrap();
        t1.put(1, b"z", b"1").unwrap();
        assert_eq!(t1.commit(), Err(EngineError::Conflict));

        // conflict on a range read (phantom insert)
        let mut t1 = e.begin().unwrap();
        let mut t2 = e.begin().unwrap();
        let _ = collect(t1.prefix(1, b"q").unwrap());
        t2.put(1, b"q1", b"x").unwrap();
        t2.commit().unwrap();
        t1.put(1, b"y", b"1").unwrap();
        assert_eq!(t1.commit(), Err(EngineError::Conflict));

        // blind writes never conflict
        let mut t1 = e.begin().unwrap();
        let mut t2 = e.begin().unwrap();
        t1.put(1, b"blind", b"1").unwrap();
        t2.put(1, b"blind", b"2").unwrap();
        t2.commit().unwrap();
        t1.commit().unwrap();

        // a conflicted transaction wrote nothing
        let s = e.snapshot().unwrap();
        assert_eq!(s.get(1, b"z").unwrap(), None);
        assert_eq!(s.get(1, b"y").unwrap(), None);

        // dropping a space removes its data; missing spaces are errors
        e.drop_space(1).unwrap();
        assert!(!e.spaces().contains(&1));
        assert!(matches!(
            e.snapshot().unwrap().get(1, b"a"),
            Err(EngineError::NoSuchSpace(1))
        ));
        e.open_space(1).unwrap();
        assert_eq!(e.snapshot().unwrap().get(1, b"a").unwrap(), None);
        e.sync().unwrap();
    }

    #[test]
    fn conformance() {
        conformance_suite(&MemoryEngine::new());
    }
}
