//! The embedded engine: fjall's `OptimisticTxDatabase`, one keyspace per space.
//!
//! Space 0 is the keyspace `catalog`; space `n` is the keyspace `s<n>`. Transactions are
//! fjall's optimistic (SSI) write transactions, which commit with `PersistMode::Buffer`
//! (the journal write reaches the OS before commit returns, so a process crash loses
//! nothing committed); [`Engine::sync`] fsyncs the journal. Keyspace handles are kept in a
//! map guarded by a `RwLock` that is only held to clone a handle, never during I/O.

use std::collections::HashMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use ::fjall::{
    KeyspaceCreateOptions, OptimisticTxDatabase, OptimisticTxKeyspace, OptimisticWriteTx,
    PersistMode, Readable,
};

use super::{
    Bytes, CATALOG_SPACE, Engine, EngineError, KvIter, Read, Result, Snapshot, SpaceId, Tx,
};

/// fjall's key size limit.
pub const FJALL_MAX_KEY: usize = 65_535;

/// Options for opening the engine.
#[derive(Debug, Clone)]
pub struct FjallOptions {
    /// Block cache size in bytes.
    pub cache_bytes: u64,
    /// Upper bound of the journal in bytes (fjall's `max_journaling_size`, at least 64 MiB):
    /// beyond it the write buffers pinning the oldest journal file are flushed, so crash
    /// recovery replays at most about this much.
    pub journal_bytes: u64,
}

impl Default for FjallOptions {
    fn default() -> Self {
        FjallOptions {
            cache_bytes: 256 * 1024 * 1024,
            journal_bytes: 64 * 1024 * 1024,
        }
    }
}

struct Inner {
    db: OptimisticTxDatabase,
    spaces: RwLock<HashMap<SpaceId, OptimisticTxKeyspace>>,
}

/// The fjall engine.
#[derive(Clone)]
pub struct FjallEngine {
    inner: Arc<Inner>,
}

fn io(e: impl std::fmt::Display) -> EngineError {
    EngineError::Io(e.to_string())
}

fn space_name(space: SpaceId) -> String {
    if space == CATALOG_SPACE {
        "catalog".to_string()
    } else {
        format!("s{space}")
    }
}

fn parse_space_name(name: &str) -> Option<SpaceId> {
    if name == "catalog" {
        return Some(CATALOG_SPACE);
    }
    name.strip_prefix('s')?.parse().ok()
}

impl FjallEngine {
    /// Opens (or creates) the database in `path`, reopening every existing space.
    pub fn open(path: &Path, opts: &FjallOptions) -> Result<FjallEngine> {
        let db = OptimisticTxDatabase::builder(path)
            .cache_size(opts.cache_bytes)
            .max_journaling_size(opts.journal_bytes.max(64 * 1024 * 1024))
            .open()
            .map_err(io)?;
        let mut spaces = HashMap::new();
        for name in db.list_keyspace_names() {
            let name: &str = name.as_ref();
            if let Some(id) = parse_space_name(name) {
                let ks = db
                    .keyspace(name, KeyspaceCreateOptions::default)
                    .map_err(io)?;
                spaces.insert(id, ks);
            }
        }
        if let std::collections::hash_map::Entry::Vacant(slot) = spaces.entry(CATALOG_SPACE) {
            let ks = db
                .keyspace(&space_name(CATALOG_SPACE), KeyspaceCreateOptions::default)
                .map_err(io)?;
            slot.insert(ks);
        }
        Ok(FjallEngine {
            inner: Arc::new(Inner {
                db,
                spaces: RwLock::new(spaces),
            }),
        })
    }

    fn handle(&self, space: SpaceId) -> Result<OptimisticTxKeyspace> {
        self.inner.handle(space)
    }
}

impl Inner {
    fn handle(&self, space: SpaceId) -> Result<OptimisticTxKeyspace> {
        self.spaces
            .read()
            .map_err(|_| io("space map poisoned"))?
            .get(&space)
            .cloned()
            .ok_or(EngineError::NoSuchSpace(space))
    }
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > FJALL_MAX_KEY {
        return Err(EngineError::KeyTooLong {
            len: key.len(),
            max: FJALL_MAX_KEY,
        });
    }
    Ok(())
}

fn convert(iter: ::fjall::Iter, reverse: bool, counter: Option<&AtomicUsize>) -> KvIter<'_> {
    let map = move |g: ::fjall::Guard| {
        if let Some(c) = counter {
            c.fetch_add(1, Ordering::Relaxed);
        }
        g.into_inner()
            .map(|(k, v)| (Bytes::from_fjall(k), Bytes::from_fjall(v)))
            .map_err(io)
    };
    if reverse {
        Box::new(iter.rev().map(map))
    } else {
        Box::new(iter.map(map))
    }
}

/// A fjall read-write transaction.
pub struct FjallTx {
    tx: OptimisticWriteTx,
    inner: Arc<Inner>,
    writes: usize,
    reads: AtomicUsize,
}

impl Read for FjallTx {
    fn get(&self, space: SpaceId, key: &[u8]) -> Result<Option<Bytes>> {
        let ks = self.inner.handle(space)?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        Ok(self.tx.get(&ks, key).map_err(io)?.map(Bytes::from_fjall))
    }

    fn range<'a>(
        &'a self,
        space: SpaceId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<KvIter<'a>> {
        let ks = self.inner.handle(space)?;
        let it = self.tx.range::<&[u8], _>(&ks, (start, end));
        Ok(convert(it, reverse, Some(&self.reads)))
    }
}

impl Tx for FjallTx {
    fn put(&mut self, space: SpaceId, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        let ks = self.inner.handle(space)?;
        self.writes += 1;
        self.tx.insert(&ks, key, value);
        Ok(())
    }

    fn delete(&mut self, space: SpaceId, key: &[u8]) -> Result<()> {
        check_key(key)?;
        let ks = self.inner.handle(space)?;
        self.writes += 1;
        self.tx.remove(&ks, key);
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<()> {
        match self.tx.commit() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_conflict)) => Err(EngineError::Conflict),
            Err(e) => Err(io(e)),
        }
    }

    fn writes(&self) -> usize {
        self.writes
    }

    fn reads(&self) -> usize {
        self.reads.load(Ordering::Relaxed)
    }
}

/// A fjall snapshot.
pub struct FjallSnapshot {
    snap: ::fjall::Snapshot,
    inner: Arc<Inner>,
}

impl Read for FjallSnapshot {
    fn get(&self, space: SpaceId, key: &[u8]) -> Result<Option<Bytes>> {
        let ks = self.inner.handle(space)?;
        Ok(self.snap.get(&ks, key).map_err(io)?.map(Bytes::from_fjall))
    }

    fn range<'a>(
        &'a self,
        space: SpaceId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<KvIter<'a>> {
        let ks = self.inner.handle(space)?;
        Ok(convert(
            self.snap.range::<&[u8], _>(&ks, (start, end)),
            reverse,
            None,
        ))
    }
}

impl Snapshot for FjallSnapshot {}

impl Engine for FjallEngine {
    fn begin(&self) -> Result<Box<dyn Tx>> {
        let tx = self.inner.db.write_tx().map_err(io)?;
        Ok(Box::new(FjallTx {
            tx,
            inner: self.inner.clone(),
            writes: 0,
            reads: AtomicUsize::new(0),
        }))
    }

    fn snapshot(&self) -> Result<Box<dyn Snapshot>> {
        Ok(Box::new(FjallSnapshot {
            snap: self.inner.db.read_tx(),
            inner: self.inner.clone(),
        }))
    }

    fn open_space(&self, space: SpaceId) -> Result<()> {
        if self.handle(space).is_ok() {
            return Ok(());
        }
        let ks = self
            .inner
            .db
            .keyspace(&space_name(space), KeyspaceCreateOptions::default)
            .map_err(io)?;
        self.inner
            .spaces
            .write()
            .map_err(|_| io("space map poisoned"))?
            .insert(space, ks);
        Ok(())
    }

    fn drop_space(&self, space: SpaceId) -> Result<()> {
        if space == CATALOG_SPACE {
            return Err(io("the catalog space cannot be dropped"));
        }
        let removed = self
            .inner
            .spaces
            .write()
            .map_err(|_| io("space map poisoned"))?
            .remove(&space);
        if let Some(ks) = removed {
            self.inner
                .db
                .inner()
                .delete_keyspace(ks.inner().clone())
                .map_err(io)?;
        }
        Ok(())
    }

    fn spaces(&self) -> Vec<SpaceId> {
        let mut v: Vec<SpaceId> = self
            .inner
            .spaces
            .read()
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default();
        v.sort_unstable();
        v
    }

    fn space_disk_size(&self, space: SpaceId) -> u64 {
        self.handle(space)
            .map(|ks| ks.inner().disk_space())
            .unwrap_or(0)
    }

    fn sync(&self) -> Result<()> {
        self.inner.db.persist(PersistMode::SyncAll).map_err(io)
    }

    fn stats(&self) -> super::EngineStats {
        let db = &self.inner.db;
        super::EngineStats {
            disk_bytes: db.disk_space().unwrap_or(0),
            write_buffer_bytes: db.write_buffer_size(),
            journals: db.journal_count() as u64,
            compactions_completed: db.inner().compactions_completed() as u64,
            active_compactions: db.inner().active_compactions() as u64,
        }
    }

    fn checkpoint(&self) -> Result<usize> {
        let handles: Vec<OptimisticTxKeyspace> = self
            .inner
            .spaces
            .read()
            .map_err(|_| io("space map poisoned"))?
            .values()
            .cloned()
            .collect();
        for ks in &handles {
            ks.inner().rotate_memtable_and_wait().map_err(io)?;
        }
        self.sync()?;
        Ok(handles.len())
    }

    fn max_key_len(&self) -> usize {
        FJALL_MAX_KEY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> (tempfile::TempDir, FjallEngine) {
        let dir = tempfile::tempdir().unwrap();
        let e = FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap();
        (dir, e)
    }

    #[test]
    fn conformance() {
        let (_d, e) = engine();
        super::super::memory::tests::conformance_suite(&e);
    }

    #[test]
    fn spaces_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let e = FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap();
            e.open_space(7).unwrap();
            let mut tx = e.begin().unwrap();
            tx.put(7, b"k", b"v").unwrap();
            tx.commit().unwrap();
            e.sync().unwrap();
        }
        let e = FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap();
        assert_eq!(e.spaces(), vec![0, 7]);
        let s = e.snapshot().unwrap();
        assert_eq!(s.get(7, b"k").unwrap().as_deref(), Some(&b"v"[..]));
    }

    #[test]
    fn over_long_keys_are_errors() {
        let (_d, e) = engine();
        let mut tx = e.begin().unwrap();
        let key = vec![1u8; FJALL_MAX_KEY + 1];
        assert!(matches!(
            tx.put(CATALOG_SPACE, &key, b"v"),
            Err(EngineError::KeyTooLong { .. })
        ));
    }
}
