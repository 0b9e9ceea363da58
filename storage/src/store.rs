//! The store: collections of documents on an [`Engine`], with the catalog and statistics.
//!
//! # Writing a document, end to end
//! 1. The caller runs [`Store::write`] with a closure; it gets a [`WriteTxn`] over a fresh
//!    serializable engine transaction.
//! 2. [`WriteTxn::collection`] resolves `db.coll` *inside* the transaction by reading the
//!    collection's catalog record, so a concurrent `drop`/`rename` that commits first makes
//!    this transaction conflict instead of writing into a dropped collection.
//! 3. [`WriteTxn::insert`] encodes `_id` with [`crate::keys`] (the document key), reads that
//!    key (an insert must read what it could collide with: fjall's blind writes never
//!    conflict), encodes the nodes with [`crate::doc::encode_received_document`] and writes them, and
//!    adds to the collection's statistics delta. Before anything is written, the
//!    collection's validator is consulted ([`crate::validation`]); so it is for updates and
//!    replacements.
//! 4. On commit the deltas are written as blind keys (no counter contention), the engine
//!    commits (a conflict reruns the closure, up to a limit), and for durable writes
//!    [`GroupCommit`] waits for an fsync shared with concurrent writers.
//!
//! Reads ([`Store::read`]) use an engine snapshot: a document is one prefix scan, so it is
//! never torn; scans resume from a key, so cursors pin neither memory nor old versions.
//!
//! Every engine commit that writes goes through [`Store::commit_engine`]: under the commit lock
//! it commits and takes the next cluster time, so commit order is clock order and
//! [`Store::snapshot_at`] can pair a snapshot with the exact time it reflects (see
//! [`crate::history`]).
//!
//! A session's multi-document transaction is a [`TxnState`] from [`Store::begin_txn`]: each of
//! its commands [`Store::resume`]s it as a [`WriteTxn`] (reads see its own writes; nothing is
//! rerun on conflict) and [`WriteTxn::suspend`]s it again; [`Store::commit_txn`] commits it
//! whole, swapping in the collections it created ([`WriteTxn::create_collection`], indexes by
//! `create_indexes_here`), and [`Store::abort_txn`] drops their spaces. Space ids come from one
//! allocator, so no two creators ever share a space.
//!
//! DDL (create, drop, rename) is serialized by one mutex, commits its catalog change durably,
//! swaps the in-memory [`Catalog`], and only then drops the spaces it freed. On open, spaces
//! with no catalog record (a crash between those steps) are dropped.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

use crate::catalog::{
    Catalog, CollectionMeta, NEXT_ID_KEY, SCHEMA_VERSION, STATS_PREFIX, Stats, VERSION_KEY,
    collection_key, read_stats, stats_key, stats_prefix,
};
use crate::changelog::{self, CHANGE_LOG_SPACE, Change};
use crate::clock::Clock;
use crate::doc::{self, DocAssembler, DocError};
use crate::engine::group_commit::GroupCommit;
use crate::engine::{CATALOG_SPACE, Engine, EngineError, Read, SpaceId, Tx, prefix_end};
use crate::error::{Result, StorageError};
use crate::history::History;
use crate::index::IndexKeyGen;
use crate::validation::DocumentValidator;
use crate::{display, keys, namespace};

/// How many times a conflicting transaction is rerun before giving up.
pub const MAX_RETRIES: usize = 100;

thread_local! {
    /// Set while a write runs inline on an async runtime's worker ([`run_inline`]).
    static INLINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, a short storage operation, on the calling async runtime worker: conflict reruns
/// inside [`Store::write`] then yield the thread instead of sleeping on it (a sleep there
/// would stall every task of that worker).
pub fn run_inline<R>(f: impl FnOnce() -> R) -> R {
    let _reset = ResetInline(INLINE.replace(true));
    f()
}

/// Runs `f` with [`run_inline`]'s mark cleared: work that began inline and moved off the
/// runtime worker (a `block_in_place`) may sleep between conflict reruns again.
pub fn run_blocking<R>(f: impl FnOnce() -> R) -> R {
    let _reset = ResetInline(INLINE.replace(false));
    f()
}

/// Restores the thread's [`INLINE`] mark when dropped.
struct ResetInline(bool);

impl Drop for ResetInline {
    fn drop(&mut self) {
        INLINE.set(self.0);
    }
}

/// Deltas beyond which a collection's statistics are folded into one key.
const FOLD_THRESHOLD: usize = 256;

/// An error a write-transaction closure may fail with.
pub trait TxError: From<StorageError> {
    /// Whether rerunning the whole transaction may succeed: a write conflict, or a space that
    /// vanished because its collection was dropped or renamed concurrently (the transaction
    /// read the collection's catalog record, so it would conflict anyway; a rerun resolves
    /// the collection again).
    fn retryable(&self) -> bool;
}

impl TxError for StorageError {
    fn retryable(&self) -> bool {
        self.is_transient() || matches!(self, StorageError::Engine(EngineError::NoSuchSpace(_)))
    }
}

/// How durable a commit must be before the write returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The journal write reached the OS (survives a process crash).
    Buffered,
    /// The journal is fsynced (survives a machine crash); `j: true`.
    Journal,
}

/// Options for a store.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    /// Treat every write as [`Durability::Journal`] (`--sync`).
    pub sync_always: bool,
}

/// Counters over committed write transactions (for `serverStatus` and tests).
#[derive(Debug, Default)]
pub struct Counters {
    /// Write transactions committed.
    pub commits: AtomicU64,
    /// Transactions rerun after a conflict.
    pub conflicts: AtomicU64,
    /// Keys read by committed write transactions.
    pub keys_read: AtomicU64,
    /// Keys written (put or deleted) by committed write transactions.
    pub keys_written: AtomicU64,
}

/// The store.
pub struct Store {
    /// Activity counters.
    pub counters: Counters,
    pub(crate) keygen: Arc<dyn IndexKeyGen>,
    /// Index spaces known to be multikey (loaded from the catalog, set before commit).
    pub(crate) multikey: RwLock<std::collections::HashSet<SpaceId>>,
    /// The cluster clock; commits take their timestamps from it (see [`crate::clock`]).
    pub clock: Clock,
    /// `minSnapshotHistoryWindowInSeconds`: how long snapshots handed to snapshot reads are
    /// kept for later reads at the same cluster time.
    pub history_window_secs: Arc<AtomicU64>,
    engine: Arc<dyn Engine>,
    group: GroupCommit,
    catalog: RwLock<Arc<Catalog>>,
    pub(crate) ddl: Mutex<()>,
    /// The commit lock: held while a write commits and takes its timestamp, and while a
    /// snapshot read pairs a snapshot with the cluster time it is exact for.
    commits: Mutex<History>,
    stats_seq: AtomicU64,
    /// Documents written by open session transactions, by (space, document key), with the
    /// transaction that wrote them: a second transaction writing the same document fails at
    /// once with a write conflict, as in MongoDB (first writer wins), instead of at commit.
    intents: Mutex<std::collections::HashMap<(SpaceId, Vec<u8>), u64>>,
    next_txn_id: AtomicU64,
    /// Called after every commit that wrote (change streams and tailable cursors wait on
    /// it).
    on_commit: RwLock<Option<Arc<dyn Fn() + Send + Sync>>>,
    /// Checks every document write against its collection's validator (see
    /// [`crate::validation`]).
    validator: RwLock<Option<Arc<dyn DocumentValidator>>>,
    /// Bytes of the change log: its space's size at open, plus what was appended since,
    /// minus what was trimmed.
    log_bytes: AtomicU64,
    /// The next unused space id. Every creator (DDL, index creation, a transaction creating a
    /// collection) takes ids from here, so two creators never share a space and a failed one
    /// can drop its spaces safely. `NEXT_ID_KEY` persists a lower bound; at open the id is
    /// also raised past every space that exists.
    next_space: AtomicU64,
    /// The pack threshold given to collections created from now on.
    pack_threshold: AtomicU32,
    opts: StoreOptions,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("opts", &self.opts).finish()
    }
}

fn poisoned() -> StorageError {
    StorageError::Engine(EngineError::Io("lock poisoned".into()))
}

fn doc_error(e: DocError) -> StorageError {
    match e {
        DocError::TooDeep { limit } => StorageError::TooDeep(format!(
            "cannot insert document because it exceeds {limit} levels of nesting"
        )),
        DocError::KeyTooLong { len, max } => StorageError::KeyTooLong(format!(
            "a field path of the document is too long to store ({len} bytes with its _id; the limit is {max})"
        )),
        DocError::TooLarge { size, max } => StorageError::DocumentTooLarge { size, max },
        DocError::Malformed(m) => StorageError::BadValue(m),
        DocError::Corrupt(m) => StorageError::Corrupt(m),
    }
}

fn key_error(e: keys::KeyError) -> StorageError {
    match e {
        keys::KeyError::DepthExceeded { limit } => StorageError::TooDeep(format!(
            "cannot insert document because its _id exceeds {limit} levels of nesting"
        )),
        other => StorageError::BadValue(other.to_string()),
    }
}

/// The `operationDescription` of a `create` change event: the `_id` index, then the
/// collection's options.
fn create_description(options: &RawDocument) -> RawDocumentBuf {
    let mut d = bson::rawdoc! {"idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"}};
    for (k, v) in options.iter().flatten() {
        d.append(k, v);
    }
    d
}

/// The document key for an `_id` value.
pub fn id_key(id: RawBsonRef<'_>) -> Result<Vec<u8>> {
    let mut k = Vec::with_capacity(16);
    keys::encode_value(&mut k, id, false).map_err(key_error)?;
    Ok(k)
}

fn be_u64(b: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(b).ok().map(u64::from_be_bytes)
}

impl Store {
    /// Opens the store on `engine`: initialises or checks the catalog, loads it, and drops
    /// spaces no collection owns.
    pub fn open(engine: Arc<dyn Engine>, opts: StoreOptions) -> Result<Store> {
        Store::open_with(engine, opts, Arc::new(crate::index::TopLevelKeys))
    }

    /// Opens the store with the index key generator of the query layer.
    pub fn open_with(
        engine: Arc<dyn Engine>,
        opts: StoreOptions,
        keygen: Arc<dyn IndexKeyGen>,
    ) -> Result<Store> {
        let window = Arc::new(AtomicU64::new(crate::history::DEFAULT_WINDOW_SECS));
        let store = Store {
            counters: Counters::default(),
            keygen,
            multikey: RwLock::new(std::collections::HashSet::new()),
            clock: Clock::new(),
            history_window_secs: window.clone(),
            commits: Mutex::new(History::new(window)),
            engine,
            group: GroupCommit::default(),
            catalog: RwLock::new(Arc::new(Catalog::default())),
            ddl: Mutex::new(()),
            stats_seq: AtomicU64::new(1),
            next_space: AtomicU64::new(1),
            intents: Mutex::new(std::collections::HashMap::new()),
            next_txn_id: AtomicU64::new(1),
            pack_threshold: AtomicU32::new(doc::DEFAULT_PACK_THRESHOLD),
            on_commit: RwLock::new(None),
            validator: RwLock::new(None),
            log_bytes: AtomicU64::new(0),
            opts,
        };
        let mut tx = store.engine.begin()?;
        match tx.get(CATALOG_SPACE, VERSION_KEY)? {
            None => {
                tx.put(CATALOG_SPACE, VERSION_KEY, &SCHEMA_VERSION.to_be_bytes())?;
                tx.put(CATALOG_SPACE, NEXT_ID_KEY, &1u64.to_be_bytes())?;
                tx.commit()?;
                store.engine.sync()?;
            }
            Some(v) => {
                let version = <[u8; 4]>::try_from(&*v)
                    .map(u32::from_be_bytes)
                    .map_err(|_| StorageError::Corrupt("catalog version".into()))?;
                if version > SCHEMA_VERSION {
                    return Err(StorageError::Corrupt(format!(
                        "the data directory has catalog version {version}, newer than this server's {SCHEMA_VERSION}; upgrade Cairn"
                    )));
                }
                if version < SCHEMA_VERSION {
                    // Older layouts are subsets of this one (see SCHEMA_VERSION); mark the
                    // directory so that older servers refuse it once it may hold packed
                    // documents.
                    tx.put(CATALOG_SPACE, VERSION_KEY, &SCHEMA_VERSION.to_be_bytes())?;
                    tx.commit()?;
                    store.engine.sync()?;
                }
            }
        }
        let snap = store.engine.snapshot()?;
        let cat = Catalog::load(&*snap)?;
        let mut max_seq = 0;
        for kv in snap.prefix(CATALOG_SPACE, &[STATS_PREFIX])? {
            let (k, _) = kv?;
            max_seq = max_seq.max(k.get(9..17).and_then(be_u64).unwrap_or(0));
        }
        store.stats_seq.store(max_seq + 1, Ordering::Relaxed);
        {
            let mut mk = store.multikey.write().map_err(|_| poisoned())?;
            for kv in snap.prefix(CATALOG_SPACE, &[crate::catalog::MULTIKEY_PREFIX])? {
                let (k, _) = kv?;
                if let Some(space) = k.get(1..9).and_then(be_u64) {
                    mk.insert(space);
                }
            }
        }
        let owned: std::collections::HashSet<SpaceId> = cat
            .all()
            .flat_map(|m| {
                std::iter::once(m.id)
                    .chain(m.natural)
                    .chain(m.secondary_indexes().map(|i| i.space))
            })
            .collect();
        let persisted_next = snap
            .get(CATALOG_SPACE, NEXT_ID_KEY)?
            .and_then(|b| be_u64(&b))
            .unwrap_or(1);
        drop(snap);
        let highest = store
            .engine
            .spaces()
            .into_iter()
            .filter(|s| *s != CHANGE_LOG_SPACE)
            .max()
            .unwrap_or(0);
        store
            .next_space
            .store(persisted_next.max(highest + 1), Ordering::Relaxed);
        store.engine.open_space(CHANGE_LOG_SPACE)?;
        store.log_bytes.store(
            store.engine.space_disk_size(CHANGE_LOG_SPACE),
            Ordering::Relaxed,
        );
        for space in store.engine.spaces() {
            if space != CATALOG_SPACE && space != CHANGE_LOG_SPACE && !owned.contains(&space) {
                store.engine.drop_space(space)?;
            }
        }
        for meta in cat.all() {
            let _ = store.fold_stats(meta.id);
        }
        store.swap_catalog(cat)?;
        Ok(store)
    }

    /// Sets the pack threshold of collections created from now on (capped at
    /// [`doc::MAX_PACK_THRESHOLD`]; 0 stores one key per node). Existing collections keep
    /// the threshold recorded in their catalog record.
    pub fn set_pack_threshold(&self, threshold: u32) {
        self.pack_threshold
            .store(threshold.min(doc::MAX_PACK_THRESHOLD), Ordering::Relaxed);
    }

    /// The pack threshold new collections get.
    pub fn pack_threshold(&self) -> u32 {
        self.pack_threshold.load(Ordering::Relaxed)
    }

    /// Reserves `n` consecutive unused space ids; returns the first.
    pub(crate) fn alloc_spaces(&self, n: u64) -> SpaceId {
        self.next_space.fetch_add(n, Ordering::Relaxed)
    }

    /// The engine (for benchmarks and tests).
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    /// The committed catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().map(|c| c.clone()).unwrap_or_default()
    }

    /// A collection's metadata, if it exists.
    pub fn collection(&self, db: &str, name: &str) -> Option<Arc<CollectionMeta>> {
        self.catalog().get(db, name).cloned()
    }

    /// Installs a new catalog (with the multikey flags learnt so far applied).
    pub(crate) fn swap_catalog(&self, c: Catalog) -> Result<()> {
        let mut guard = self.catalog.write().map_err(|_| poisoned())?;
        let c = match self.multikey.read() {
            Ok(set) => c.with_multikey(&set),
            Err(_) => c,
        };
        *guard = Arc::new(c);
        Ok(())
    }

    /// Marks an index space multikey in the in-memory catalog (queries planned from now on
    /// see it).
    pub(crate) fn refresh_multikey(&self) -> Result<()> {
        let mut guard = self.catalog.write().map_err(|_| poisoned())?;
        if let Ok(set) = self.multikey.read() {
            *guard = Arc::new(guard.with_multikey(&set));
        }
        Ok(())
    }

    /// `meta` with the multikey flags learnt so far.
    pub(crate) fn with_multikey_flags(&self, meta: CollectionMeta) -> CollectionMeta {
        let Ok(set) = self.multikey.read() else {
            return meta;
        };
        let mut meta = meta;
        for i in &mut meta.indexes {
            if !i.is_id() && set.contains(&i.space) {
                i.multikey = true;
            }
        }
        meta
    }

    /// Runs `f` in a DDL transaction with conflict retries, then makes it durable.
    pub(crate) fn ddl_tx<R>(&self, mut f: impl FnMut(&mut dyn Tx) -> Result<R>) -> Result<R> {
        self.ddl_tx_logged(Vec::new(), |tx| f(tx))
    }

    /// Like [`Store::ddl_tx`], recording `changes` in the change log with the commit.
    pub(crate) fn ddl_tx_logged<R>(
        &self,
        changes: Vec<Change>,
        mut f: impl FnMut(&mut dyn Tx) -> Result<R>,
    ) -> Result<R> {
        let mut attempt = 0;
        loop {
            let mut tx = self.engine.begin()?;
            let r = f(&mut *tx);
            let r = match r {
                Ok(v) => self.commit_engine(tx, &changes).map(|_| v),
                Err(e) => Err(e),
            };
            match r {
                Err(e) if e.is_transient() && attempt < MAX_RETRIES => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_micros(50 * attempt as u64));
                }
                Err(e) => return Err(e),
                Ok(v) => {
                    self.group.wait_durable(&*self.engine)?;
                    return Ok(v);
                }
            }
        }
    }

    /// Creates a collection with validated `options`. Returns false when an identical
    /// collection already existed (MongoDB 7.0 treats that as success); an existing
    /// collection with other options is NamespaceExists.
    pub fn create_collection(&self, db: &str, name: &str, options: &RawDocument) -> Result<bool> {
        namespace::check_collection_for_create(db, name)?;
        let _ddl = self.ddl.lock().map_err(|_| poisoned())?;
        let cat = self.catalog();
        if cat.view(db, name).is_some() {
            return Err(StorageError::NamespaceExists(format!("{db}.{name}")));
        }
        if let Some(existing) = cat.get(db, name) {
            if existing.options.as_bytes() == options.as_bytes() {
                return Ok(false);
            }
            return Err(StorageError::NamespaceExists(format!(
                "namespace {db}.{name} already exists, but with different options: {}",
                display::document(&existing.options)
            )));
        }
        if let Some(other) = cat
            .databases()
            .into_iter()
            .find(|d| d != db && d.eq_ignore_ascii_case(db))
        {
            return Err(StorageError::DatabaseDifferCase(format!(
                "db already exists with different case already have: [{other}] trying to create [{db}]"
            )));
        }
        let mut meta = CollectionMeta {
            id: 0,
            db: db.to_string(),
            name: name.to_string(),
            uuid: bson::Uuid::new().bytes(),
            options: options.to_owned(),
            created: bson::DateTime::now(),
            indexes: vec![crate::index::IndexMeta::id_index()],
            pack_threshold: self.pack_threshold(),
            natural: None,
        };
        let capped = matches!(options.get("capped"), Ok(Some(RawBsonRef::Boolean(true))));
        let next = self.alloc_spaces(if capped { 2 } else { 1 });
        if capped {
            meta.natural = Some(next + 1);
            self.engine.open_space(next + 1)?;
        }
        let change = Change::on("create", &meta).with("desc", create_description(options));
        let id = self.ddl_tx_logged(vec![change], |tx| {
            tx.put(CATALOG_SPACE, NEXT_ID_KEY, &(next + 1).to_be_bytes())?;
            meta.id = next;
            self.engine.open_space(next)?;
            tx.put(
                CATALOG_SPACE,
                &collection_key(db, name),
                meta.to_bson().as_bytes(),
            )?;
            Ok(next)
        });
        let id = match id {
            Ok(id) => id,
            Err(e) => {
                // The space opened for the failed attempt is this creator's alone.
                if meta.id != 0 {
                    let _ = self.engine.drop_space(meta.id);
                }
                return Err(e);
            }
        };
        meta.id = id;
        self.swap_catalog(self.catalog().with(meta))?;
        Ok(true)
    }

    /// Replaces a collection's options (`collMod`: validator, validation level and action)
    /// atomically in the catalog: `change` computes the new options from the current ones
    /// under the DDL lock (so concurrent changes of different options do not lose each other),
    /// and a `modify` change whose `operationDescription` is `desc` is recorded. Writes that
    /// resolved the collection before commit conflict and rerun with the new options. Returns
    /// the options it had.
    pub fn set_collection_options(
        &self,
        db: &str,
        name: &str,
        change: impl FnOnce(&RawDocument) -> RawDocumentBuf,
        desc: &RawDocument,
    ) -> Result<RawDocumentBuf> {
        let _ddl = self.ddl.lock().map_err(|_| poisoned())?;
        let Some(meta) = self.catalog().get(db, name).cloned() else {
            return Err(StorageError::NamespaceNotFound(format!(
                "ns does not exist: {db}.{name}"
            )));
        };
        let mut next = (*meta).clone();
        next.options = change(&meta.options);
        let change = Change::on("modify", &meta).with("desc", desc.to_owned());
        self.ddl_tx_logged(vec![change], |tx| {
            tx.put(
                CATALOG_SPACE,
                &collection_key(db, name),
                next.to_bson().as_bytes(),
            )?;
            Ok(())
        })?;
        self.swap_catalog(self.catalog().with(next))?;
        Ok(meta.options.clone())
    }

    /// Returns the collection, creating it with default options if it does not exist
    /// (writes create collections implicitly).
    pub fn ensure_collection(&self, db: &str, name: &str) -> Result<Arc<CollectionMeta>> {
        if let Some(m) = self.collection(db, name) {
            return Ok(m);
        }
        namespace::check_write(db, name)?;
        match self.create_collection(db, name, &RawDocumentBuf::new()) {
            Ok(_) => {}
            Err(StorageError::NamespaceExists(_)) => {}
            Err(e) => return Err(e),
        }
        self.collection(db, name).ok_or_else(|| {
            StorageError::NamespaceNotFound(format!(
                "collection {db}.{name} was dropped concurrently"
            ))
        })
    }

    /// Deletes a collection's statistics and its indexes' catalog keys (DDL helper).
    fn delete_collection_keys(tx: &mut dyn Tx, meta: &CollectionMeta) -> Result<()> {
        Self::delete_stats(tx, meta.id)?;
        for idx in meta.secondary_indexes() {
            tx.delete(CATALOG_SPACE, &crate::catalog::multikey_key(idx.space))?;
            tx.delete(CATALOG_SPACE, &crate::catalog::build_key(idx.space))?;
        }
        Ok(())
    }

    /// Drops a collection's document space and index spaces (after its DDL committed).
    fn drop_collection_spaces(&self, meta: &CollectionMeta) -> Result<()> {
        for idx in meta.secondary_indexes() {
            if let Ok(mut m) = self.multikey.write() {
                m.remove(&idx.space);
            }
            self.engine.drop_space(idx.space)?;
        }
        if let Some(n) = meta.natural {
            self.engine.drop_space(n)?;
        }
        self.engine.drop_space(meta.id)?;
        Ok(())
    }

    fn delete_stats(tx: &mut dyn Tx, space: SpaceId) -> Result<()> {
        let keys: Vec<Vec<u8>> = tx
            .prefix(CATALOG_SPACE, &stats_prefix(space))?
            .map(|kv| kv.map(|(k, _)| k.to_vec()))
            .collect::<std::result::Result<_, _>>()?;
        for k in keys {
            tx.delete(CATALOG_SPACE, &k)?;
        }
        Ok(())
    }

    /// Drops a collection; returns false if it did not exist. Costs the same whatever the
    /// collection holds: the catalog record goes, then the whole space.
    pub fn drop_collection(&self, db: &str, name: &str) -> Result<bool> {
        let _ddl = self.ddl.lock().map_err(|_| poisoned())?;
        let Some(meta) = self.catalog().get(db, name).cloned() else {
            return Ok(false);
        };
        self.ddl_tx_logged(vec![Change::on("drop", &meta)], |tx| {
            tx.delete(CATALOG_SPACE, &collection_key(db, name))?;
            Self::delete_collection_keys(tx, &meta)
        })?;
        self.swap_catalog(self.catalog().without(db, name))?;
        self.drop_collection_spaces(&meta)?;
        Ok(true)
    }

    /// Drops every collection of a database.
    pub fn drop_database(&self, db: &str) -> Result<()> {
        let _ddl = self.ddl.lock().map_err(|_| poisoned())?;
        let cat = self.catalog();
        let metas: Vec<Arc<CollectionMeta>> = cat.in_database(db).cloned().collect();
        let views: Vec<String> = cat.views_in(db).map(|v| v.name.clone()).collect();
        if metas.is_empty() && views.is_empty() {
            return Ok(());
        }
        let mut changes: Vec<Change> = metas.iter().map(|m| Change::on("drop", m)).collect();
        changes.push(Change::on_ns("dropDatabase", db));
        self.ddl_tx_logged(changes, |tx| {
            for m in &metas {
                tx.delete(CATALOG_SPACE, &collection_key(&m.db, &m.name))?;
                Self::delete_collection_keys(tx, m)?;
            }
            for v in &views {
                tx.delete(CATALOG_SPACE, &crate::catalog::view_key(db, v))?;
            }
            Ok(())
        })?;
        let mut next = (*cat).clone();
        for m in &metas {
            next = next.without(&m.db, &m.name);
        }
        for v in &views {
            next = next.without_view(db, v);
        }
        self.swap_catalog(next)?;
        for m in &metas {
            self.drop_collection_spaces(m)?;
        }
        Ok(())
    }

    /// Renames a collection, within or across databases, without touching its documents.
    pub fn rename_collection(
        &self,
        from: (&str, &str),
        to: (&str, &str),
        drop_target: bool,
    ) -> Result<()> {
        namespace::check_collection_for_create(to.0, to.1)?;
        let _ddl = self.ddl.lock().map_err(|_| poisoned())?;
        let cat = self.catalog();
        let Some(source) = cat.get(from.0, from.1).cloned() else {
            return Err(StorageError::NamespaceNotFound(format!(
                "Collection {}.{} doesn't exist.",
                from.0, from.1
            )));
        };
        if cat.view(to.0, to.1).is_some() {
            return Err(StorageError::NamespaceExists(format!("{}.{}", to.0, to.1)));
        }
        let target = cat.get(to.0, to.1).cloned();
        if target.is_some() && !drop_target {
            return Err(StorageError::NamespaceExists(format!(
                "Target collection {}.{} exists but dropTarget is not set",
                to.0, to.1
            )));
        }
        let mut renamed = (*source).clone();
        renamed.db = to.0.to_string();
        renamed.name = to.1.to_string();
        if from.0 != to.0 {
            // MongoDB gives a collection moved to another database a new UUID.
            renamed.uuid = bson::Uuid::new().bytes();
        }
        let mut desc = bson::rawdoc! {"to": {"db": to.0, "coll": to.1}};
        if let Some(t) = &target {
            desc.append(
                bson::raw::cstr!("dropTarget"),
                bson::Binary {
                    subtype: bson::spec::BinarySubtype::Uuid,
                    bytes: t.uuid.to_vec(),
                },
            );
        }
        let change = Change::on("rename", &source)
            .with("to", format!("{}.{}", to.0, to.1))
            .with("desc", desc);
        self.ddl_tx_logged(vec![change], |tx| {
            tx.delete(CATALOG_SPACE, &collection_key(from.0, from.1))?;
            if let Some(t) = &target {
                Self::delete_collection_keys(tx, t)?;
            }
            tx.put(
                CATALOG_SPACE,
                &collection_key(to.0, to.1),
                renamed.to_bson().as_bytes(),
            )?;
            Ok(())
        })?;
        self.swap_catalog(cat.without(from.0, from.1).with(renamed))?;
        if let Some(t) = target {
            self.drop_collection_spaces(&t)?;
        }
        Ok(())
    }

    /// Document count and BSON bytes of a collection (exact, as of now).
    pub fn stats(&self, meta: &CollectionMeta) -> Result<Stats> {
        let snap = self.engine.snapshot()?;
        let (stats, _, n) = read_stats(&*snap, meta.id)?;
        drop(snap);
        if n > FOLD_THRESHOLD {
            let _ = self.fold_stats(meta.id);
        }
        Ok(stats)
    }

    /// Bytes the collection's space occupies on disk.
    pub fn storage_size(&self, meta: &CollectionMeta) -> u64 {
        self.engine.space_disk_size(meta.id)
    }

    /// Folds a collection's statistics deltas into one (best effort: a conflict with a
    /// concurrent writer simply leaves the deltas for next time).
    pub fn fold_stats(&self, space: SpaceId) -> Result<()> {
        let mut tx = self.engine.begin()?;
        let (total, _, n) = read_stats(&*tx, space)?;
        if n <= 1 {
            return Ok(());
        }
        Self::delete_stats(&mut *tx, space)?;
        let seq = self.stats_seq.fetch_add(1, Ordering::Relaxed);
        tx.put(CATALOG_SPACE, &stats_key(space, seq), &total.encode())?;
        self.commit_engine(tx, &[])?;
        Ok(())
    }

    /// Runs `f` in a write transaction, rerunning it on conflicts, committing, and waiting for
    /// the requested durability. `f` may fail with any error type that can carry a storage
    /// error and say whether it is worth a rerun ([`TxError`]).
    pub fn write<R, E: TxError>(
        &self,
        durability: Durability,
        mut f: impl FnMut(&mut WriteTxn<'_>) -> std::result::Result<R, E>,
    ) -> std::result::Result<R, E> {
        let mut attempt = 0;
        loop {
            let mut t = WriteTxn {
                store: self,
                tx: self
                    .engine
                    .begin()
                    .map_err(|e| E::from(StorageError::from(e)))?,
                deltas: BTreeMap::new(),
                created: Vec::new(),
                owner: None,
                changes: Vec::new(),
                origin: None,
                diff_mode: crate::diff::Mode::Operators,
                bypass_validation: false,
            };
            let r = f(&mut t).and_then(|v| {
                let (reads, writes, _) = self.finish(t).map_err(E::from)?;
                let c = &self.counters;
                c.commits.fetch_add(1, Ordering::Relaxed);
                c.keys_read.fetch_add(reads as u64, Ordering::Relaxed);
                c.keys_written.fetch_add(writes as u64, Ordering::Relaxed);
                Ok(v)
            });
            match r {
                Ok(v) => {
                    if self.waits_for_sync(durability) {
                        self.group
                            .wait_durable(&*self.engine)
                            .map_err(|e| E::from(StorageError::from(e)))?;
                    }
                    return Ok(v);
                }
                Err(e) if e.retryable() && attempt < MAX_RETRIES => {
                    attempt += 1;
                    self.counters.conflicts.fetch_add(1, Ordering::Relaxed);
                    if INLINE.get() {
                        // On an async runtime's worker: never sleep it; the conflicting
                        // writer runs on another thread.
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_micros(20 * attempt as u64));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether a write committed with `durability` waits for an fsync of the journal (`j: true`,
    /// or every write under `--sync`) — the one wait a point write can have that is not bounded
    /// by its own few keys.
    pub fn waits_for_sync(&self, durability: Durability) -> bool {
        durability == Durability::Journal || self.opts.sync_always
    }

    /// A read snapshot.
    pub fn read(&self) -> Result<ReadTxn> {
        Ok(ReadTxn {
            snap: Arc::from(self.engine.snapshot()?),
        })
    }

    fn commit_lock(&self) -> Result<MutexGuard<'_, History>> {
        self.commits.lock().map_err(|_| poisoned())
    }

    /// Commits an engine transaction. One that wrote something commits under the commit
    /// lock and gets the next cluster time, which is returned; its `changes` go into the
    /// change log under that time, in the same engine transaction (see [`crate::changelog`]).
    pub(crate) fn commit_engine(
        &self,
        mut tx: Box<dyn Tx>,
        changes: &[Change],
    ) -> Result<Option<bson::Timestamp>> {
        if tx.writes() == 0 && changes.is_empty() {
            tx.commit()?;
            return Ok(None);
        }
        let mut history = self.commit_lock()?;
        let ts = self.clock.next();
        if !changes.is_empty() {
            let at = crate::history::pack(ts);
            let mut chunk = Vec::new();
            let bytes = changelog::write_chunks(
                at,
                bson::DateTime::now(),
                changes,
                changelog::CHUNK_BYTES,
                &mut chunk,
                |pos, chunk| tx.put(CHANGE_LOG_SPACE, &changelog::key(pos), chunk),
            )?;
            self.log_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        tx.commit()?;
        history.on_commit(ts);
        drop(history);
        let notify = self.on_commit.read().ok().and_then(|g| g.clone());
        if let Some(f) = notify {
            f();
        }
        Ok(Some(ts))
    }

    /// Sets the function called after every commit that wrote.
    pub fn set_on_commit(&self, f: Arc<dyn Fn() + Send + Sync>) {
        if let Ok(mut g) = self.on_commit.write() {
            *g = Some(f);
        }
    }

    /// Installs the document validator every write consults (see [`crate::validation`]).
    pub fn set_validator(&self, v: Arc<dyn DocumentValidator>) {
        if let Ok(mut g) = self.validator.write() {
            *g = Some(v);
        }
    }

    /// Change log entries after `after` (from the oldest retained when `None`), at most
    /// `max`, read on a fresh snapshot; and the packed time through which the log was trimmed.
    pub fn read_changes(
        &self,
        after: Option<changelog::Position>,
        max: usize,
    ) -> Result<(Vec<(changelog::Position, RawDocumentBuf)>, u64)> {
        let r = self.read()?;
        let entries = changelog::read(r.snapshot(), after, max)?;
        let trimmed = changelog::trimmed_through(r.snapshot())?;
        Ok((entries, trimmed))
    }

    /// Deletes the oldest change log entries while the log holds more than `max_bytes`
    /// (bytes appended since open plus the space's size at open, less what was trimmed), up
    /// to about `batch` entries per call; a commit's entries (all its chunks) go together, and
    /// commits younger than `keep_secs` seconds stay whatever the size (mongod's minimum
    /// retention). Returns how many entries were deleted.
    pub fn trim_change_log(&self, max_bytes: u64, keep_secs: u64, batch: usize) -> Result<usize> {
        let size = self.log_bytes.load(Ordering::Relaxed);
        if size <= max_bytes {
            return Ok(0);
        }
        // Commits at or after this second are kept whatever the size (`--oplog-min-retention-hours`).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let keep_from = now.saturating_sub(keep_secs);
        let mut tx = self.engine.begin()?;
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        let mut freed = 0u64;
        let mut trimmed = 0usize;
        for kv in tx.range(CHANGE_LOG_SPACE, Bound::Unbounded, Bound::Unbounded, false)? {
            let (k, v) = kv?;
            let len = (k.len() + v.len()) as u64;
            let same_commit = chunks.last().is_some_and(|p| p.get(..8) == k.get(..8));
            let young = keep_secs > 0
                && changelog::position(&k).is_some_and(|(ts, _)| ts >> 32 >= keep_from);
            if !same_commit && (trimmed >= batch || size - freed.min(size) <= max_bytes || young) {
                break;
            }
            freed += len;
            trimmed += changelog::entries(&v).count();
            chunks.push(k.to_vec());
        }
        let Some(last) = chunks.last().and_then(|k| changelog::position(k)) else {
            return Ok(0);
        };
        for k in &chunks {
            tx.delete(CHANGE_LOG_SPACE, k)?;
        }
        tx.put(CATALOG_SPACE, changelog::TRIMMED_KEY, &last.0.to_be_bytes())?;
        tx.commit()?;
        self.log_bytes.fetch_sub(freed.min(size), Ordering::Relaxed);
        Ok(trimmed)
    }

    /// A snapshot for a `readConcern: snapshot` read at cluster time `at` (now when `None`),
    /// with the cluster time it reads at. SnapshotTooOld when `at` is older than the retained
    /// history, SnapshotInFuture when it is later than the clock (see [`crate::history`]).
    pub fn snapshot_at(&self, at: Option<bson::Timestamp>) -> Result<(ReadTxn, bson::Timestamp)> {
        let mut history = self.commit_lock()?;
        let now = self.clock.last();
        let (snap, ts) = history.snapshot(at, now, || self.engine.snapshot())?;
        Ok((ReadTxn { snap }, ts))
    }

    /// Starts a multi-statement transaction that reads at cluster time `at`: possible only
    /// when nothing has committed since `at` (a transaction's snapshot is the present), else
    /// SnapshotTooOld. Checked and begun under the commit lock, so no commit slips between.
    pub fn begin_txn_at(&self, at: bson::Timestamp) -> Result<TxnState> {
        let history = self.commit_lock()?;
        let now = self.clock.last();
        if crate::history::pack(at) > crate::history::pack(now) {
            return Err(StorageError::SnapshotInFuture(format!(
                "readConcern atClusterTime value must not be greater than the current clusterTime. Requested clusterTime: {{ ts: {} }}; current clusterTime: {{ ts: {} }}",
                crate::history::display(at),
                crate::history::display(now)
            )));
        }
        if crate::history::pack(at) < history.last_commit() {
            return Err(StorageError::SnapshotTooOld(format!(
                "Read timestamp {} is older than the oldest available timestamp.",
                crate::history::display(at)
            )));
        }
        let state = self.begin_txn();
        drop(history);
        state
    }

    /// Starts a multi-statement transaction for a session; it stays open between commands
    /// until [`Store::commit_txn`] or [`Store::abort_txn`].
    pub fn begin_txn(&self) -> Result<TxnState> {
        Ok(TxnState {
            tx: self.engine.begin()?,
            deltas: BTreeMap::new(),
            created: Vec::new(),
            owner: Some(Owner {
                id: self.next_txn_id.fetch_add(1, Ordering::Relaxed),
                held: Vec::new(),
            }),
            changes: Vec::new(),
            origin: None,
        })
    }

    /// Continues a session's transaction: the returned [`WriteTxn`] reads the transaction's
    /// snapshot plus its own writes; [`WriteTxn::suspend`] gives the state back.
    pub fn resume(&self, state: TxnState) -> WriteTxn<'_> {
        WriteTxn {
            store: self,
            tx: state.tx,
            deltas: state.deltas,
            created: state.created,
            owner: state.owner,
            changes: state.changes,
            origin: state.origin,
            diff_mode: crate::diff::Mode::Operators,
            bypass_validation: false,
        }
    }

    /// Commits a session's transaction atomically, waiting for `durability`; returns its
    /// commit time (`None` when it wrote nothing). A conflict with a transaction that committed
    /// since this one's snapshot is [`EngineError::Conflict`] and nothing is written. The
    /// collections it created become visible to everyone when it commits.
    pub fn commit_txn(
        &self,
        state: TxnState,
        durability: Durability,
    ) -> Result<Option<bson::Timestamp>> {
        let mut t = self.resume(state);
        let owner = t.owner.take();
        let r = self.finish(t);
        if let Some(o) = owner {
            self.release_intents(&o);
        }
        let (reads, writes, ts) = r?;
        let c = &self.counters;
        c.commits.fetch_add(1, Ordering::Relaxed);
        c.keys_read.fetch_add(reads as u64, Ordering::Relaxed);
        c.keys_written.fetch_add(writes as u64, Ordering::Relaxed);
        if ts.is_some() && self.waits_for_sync(durability) {
            self.group.wait_durable(&*self.engine)?;
        }
        Ok(ts)
    }

    /// Commits a write transaction; collections it created are swapped into the catalog
    /// (under the DDL lock) when it commits, and their spaces dropped when it fails.
    fn finish(&self, t: WriteTxn<'_>) -> Result<(usize, usize, Option<bson::Timestamp>)> {
        if t.created.is_empty() {
            return t.commit();
        }
        let created = t.created.clone();
        let _ddl = self.ddl.lock().map_err(|_| poisoned())?;
        match t.commit() {
            Ok(r) => {
                let mut cat = (*self.catalog()).clone();
                for m in &created {
                    cat = cat.with(self.with_multikey_flags(m.clone()));
                }
                self.swap_catalog(cat)?;
                Ok(r)
            }
            Err(e) => {
                drop(_ddl);
                self.drop_created(&created);
                Err(e)
            }
        }
    }

    /// Abandons a session's transaction: nothing it wrote becomes visible, and the spaces of
    /// collections and indexes it created are dropped.
    pub fn abort_txn(&self, state: TxnState) {
        let created = state.created;
        drop(state.tx);
        if let Some(o) = &state.owner {
            self.release_intents(o);
        }
        self.drop_created(&created);
    }

    fn release_intents(&self, owner: &Owner) {
        if owner.held.is_empty() {
            return;
        }
        if let Ok(mut map) = self.intents.lock() {
            for k in &owner.held {
                if map.get(k) == Some(&owner.id) {
                    map.remove(k);
                }
            }
        }
    }

    fn drop_created(&self, created: &[CollectionMeta]) {
        let cat = self.catalog();
        for m in created {
            let owned = |space: SpaceId| {
                cat.all()
                    .any(|c| c.id == space || c.secondary_indexes().any(|i| i.space == space))
            };
            for idx in m.secondary_indexes() {
                if !owned(idx.space) {
                    let _ = self.engine.drop_space(idx.space);
                }
            }
            if !owned(m.id) {
                let _ = self.engine.drop_space(m.id);
            }
        }
    }

    /// Waits until every commit so far is on stable storage (shared with concurrent
    /// writers through group commit).
    pub fn wait_durable(&self) -> Result<()> {
        Ok(self.group.wait_durable(&*self.engine)?)
    }

    /// How many fsyncs group commit has run.
    pub fn syncs(&self) -> u64 {
        self.group.syncs()
    }
}

/// A write transaction; see [`Store::write`].
pub struct WriteTxn<'s> {
    pub(crate) store: &'s Store,
    pub(crate) tx: Box<dyn Tx>,
    pub(crate) deltas: BTreeMap<SpaceId, Stats>,
    /// Collections created (or given indexes) inside this transaction, as they stand now.
    pub(crate) created: Vec<CollectionMeta>,
    /// For a session's transaction: its id and the documents it has written.
    pub(crate) owner: Option<Owner>,
    /// The changes to record in the change log at commit.
    pub(crate) changes: Vec<Change>,
    /// The session and transaction number the changes belong to, for a session's
    /// transaction.
    pub(crate) origin: Option<([u8; 16], i64)>,
    /// How [`WriteTxn::write_fields`] describes array changes in the change log.
    pub(crate) diff_mode: crate::diff::Mode,
    /// `bypassDocumentValidation`: writes skip the collection's validator.
    pub(crate) bypass_validation: bool,
}

/// A session transaction's claim on the documents it writes (see `Store::intents`).
#[derive(Debug)]
pub(crate) struct Owner {
    id: u64,
    held: Vec<(SpaceId, Vec<u8>)>,
}

/// A session's open transaction between its commands (see [`Store::begin_txn`]).
pub struct TxnState {
    tx: Box<dyn Tx>,
    deltas: BTreeMap<SpaceId, Stats>,
    created: Vec<CollectionMeta>,
    owner: Option<Owner>,
    changes: Vec<Change>,
    origin: Option<([u8; 16], i64)>,
}

impl std::fmt::Debug for TxnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnState")
            .field("writes", &self.tx.writes())
            .field("created", &self.created.len())
            .finish()
    }
}

impl TxnState {
    /// Keys written so far.
    pub fn writes(&self) -> usize {
        self.tx.writes()
    }

    /// Names the session and transaction number the transaction's changes belong to (change
    /// events carry them).
    pub fn set_origin(&mut self, lsid: [u8; 16], txn_number: i64) {
        self.origin = Some((lsid, txn_number));
    }
}

impl WriteTxn<'_> {
    /// Resolves `db.name` inside this transaction (see the module doc); `None` if it does not
    /// exist as of this transaction's snapshot.
    pub fn collection(&self, db: &str, name: &str) -> Result<Option<Arc<CollectionMeta>>> {
        let Some(record) = self.tx.get(CATALOG_SPACE, &collection_key(db, name))? else {
            return Ok(None);
        };
        // The in-memory catalog is used when it holds exactly this record; otherwise (a DDL
        // committed but not yet swapped in, or the reverse) the record itself is the truth for
        // this transaction.
        let cat = self.store.catalog();
        match (cat.get(db, name), cat.record(db, name)) {
            (Some(m), Some(r)) if r.as_slice() == &*record => Ok(Some(m.clone())),
            _ => Ok(Some(Arc::new(
                self.store
                    .with_multikey_flags(CollectionMeta::from_bson(&record)?),
            ))),
        }
    }

    /// Creates a collection inside this transaction (a session's multi-document transaction):
    /// its catalog record is written in the transaction, so only this transaction sees it
    /// until it commits; [`Store::commit_txn`] then swaps it into the catalog, and an abort
    /// drops its space. An existing collection (as this transaction sees it) is
    /// NamespaceExists.
    pub fn create_collection(
        &mut self,
        db: &str,
        name: &str,
        options: &RawDocument,
    ) -> Result<Arc<CollectionMeta>> {
        namespace::check_collection_for_create(db, name)?;
        if self.collection(db, name)?.is_some() || self.view(db, name)?.is_some() {
            return Err(StorageError::NamespaceExists(format!("{db}.{name}")));
        }
        let cat = self.store.catalog();
        if let Some(other) = cat
            .databases()
            .into_iter()
            .find(|d| d != db && d.eq_ignore_ascii_case(db))
        {
            return Err(StorageError::DatabaseDifferCase(format!(
                "db already exists with different case already have: [{other}] trying to create [{db}]"
            )));
        }
        let next = self.store.alloc_spaces(1);
        let meta = CollectionMeta {
            id: next,
            db: db.to_string(),
            name: name.to_string(),
            uuid: bson::Uuid::new().bytes(),
            options: options.to_owned(),
            created: bson::DateTime::now(),
            indexes: vec![crate::index::IndexMeta::id_index()],
            pack_threshold: self.store.pack_threshold(),
            natural: None,
        };
        self.store.engine.open_space(next)?;
        self.created.push(meta.clone());
        self.log(Change::on("create", &meta).with("desc", create_description(options)));
        self.tx.put(
            CATALOG_SPACE,
            &collection_key(db, name),
            meta.to_bson().as_bytes(),
        )?;
        Ok(Arc::new(meta))
    }

    /// The collection, created inside this transaction if it does not exist yet (implicit
    /// creation by a write in a multi-document transaction).
    pub fn ensure_collection(&mut self, db: &str, name: &str) -> Result<Arc<CollectionMeta>> {
        if let Some(m) = self.collection(db, name)? {
            return Ok(m);
        }
        namespace::check_write(db, name)?;
        self.create_collection(db, name, &RawDocumentBuf::new())
    }

    /// Whether this transaction created the collection `db.name`.
    pub fn created_here(&self, db: &str, name: &str) -> bool {
        self.created.iter().any(|m| m.db == db && m.name == name)
    }

    /// Inserts a document whose first field is `_id`. A document with an existing `_id` is
    /// a [`StorageError::DuplicateKey`] and writes nothing; one the collection's validator
    /// refuses is [`StorageError::DocumentValidationFailure`] (checked first, as MongoDB
    /// does). Its names and strings must be UTF-8, as every document the server holds is
    /// (see [`doc::encode_received_document`]).
    pub fn insert(&mut self, coll: &CollectionMeta, doc: &RawDocument) -> Result<()> {
        let id = match doc.iter().next() {
            Some(Ok((k, v))) if k.as_str() == "_id" => v,
            _ => {
                return Err(StorageError::BadValue(
                    "a stored document must start with its _id".into(),
                ));
            }
        };
        if let Some(v) = self.validator_for(coll) {
            v.check(coll, None, doc)?;
        }
        let key = id_key(id)?;
        self.claim(coll.id, &key)?;
        if self.tx.get(coll.id, &key)?.is_some() {
            let mut kv = RawDocumentBuf::new();
            kv.append(bson::raw::cstr!("_id"), id);
            return Err(StorageError::DuplicateKey {
                namespace: coll.namespace(),
                index: "_id_".into(),
                key_pattern: bson::rawdoc! {"_id": 1},
                key_display: display::document(&kv),
                key_value: kv,
            });
        }
        let enc = doc::encode_received_document(&key, doc, &coll.limits()).map_err(doc_error)?;
        // Indexes first: a refused document must leave nothing behind (the caller may
        // commit the transaction with its other documents).
        self.index_document(coll, &key, None, Some(doc))?;
        for (k, v) in &enc.nodes {
            self.tx.put(coll.id, k, v)?;
        }
        self.deltas.entry(coll.id).or_default().add(Stats {
            count: 1,
            size: i64::from(enc.bson_size),
        });
        self.log(Change::insert(coll, doc));
        if coll.natural.is_some() {
            self.capped_append(coll, &key)?;
        }
        Ok(())
    }

    /// The document with this `_id`, as of this transaction (including its own writes).
    pub fn get(&self, coll: &CollectionMeta, id: RawBsonRef<'_>) -> Result<Option<RawDocumentBuf>> {
        get_document(&*self.tx, coll.id, &id_key(id)?)
    }

    /// Deletes the document with this `_id`; returns whether one existed.
    pub fn delete(&mut self, coll: &CollectionMeta, id: RawBsonRef<'_>) -> Result<bool> {
        let key = id_key(id)?;
        self.delete_by_key(coll, &key)
    }

    /// The document with this key (`E(_id)`), read whole.
    pub fn get_by_key(&self, coll: &CollectionMeta, key: &[u8]) -> Result<Option<RawDocumentBuf>> {
        get_document(&*self.tx, coll.id, key)
    }

    /// Reads the root of the document with key `key` and the named top-level fields — what a
    /// targeted update needs, and no more: from a packed document its one value, from a
    /// spilled one the root header and one prefix scan per field. `None` when the document
    /// does not exist.
    pub fn read_fields(
        &self,
        coll: &CollectionMeta,
        key: &[u8],
        names: &[&str],
    ) -> Result<Option<DocView>> {
        let Some(root) = self.tx.get(coll.id, key)? else {
            return Ok(None);
        };
        let (next_ordinal, bson_size, child_count) =
            match doc::parse_stored_value(&root).map_err(doc_error)? {
                doc::Node::Root {
                    next_ordinal,
                    bson_size,
                    child_count,
                } => (next_ordinal, bson_size, child_count),
                doc::Node::PackedRoot { bson } => {
                    return packed_view(key, bson, names).map(Some);
                }
                _ => {
                    return Err(StorageError::Corrupt(
                        "document key without a root header".into(),
                    ));
                }
            };
        let mut fields = Vec::new();
        for name in names {
            if fields.iter().any(|f: &FieldState| f.name == *name) {
                continue;
            }
            let fk = doc::node_key(key, &[doc::PathPart::Field(name)]).map_err(doc_error)?;
            let nodes: Vec<(Vec<u8>, Vec<u8>)> = self
                .tx
                .prefix(coll.id, &fk)?
                .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<std::result::Result<_, _>>()?;
            let Some((_, first)) = nodes.first() else {
                continue;
            };
            let ordinal = doc::parse_stored_value(first)
                .map_err(doc_error)?
                .ordinal()
                .ok_or_else(|| StorageError::Corrupt("field node without ordinal".into()))?;
            let value = doc::decode_stored_subtree(fk.len(), nodes.iter().map(|(k, v)| (k, v)))
                .map_err(doc_error)?
                .ok_or_else(|| StorageError::Corrupt("empty field subtree".into()))?;
            fields.push(FieldState::new(
                name,
                ordinal,
                value.as_raw_bson_ref(),
                nodes,
            ));
        }
        Ok(Some(DocView {
            key: key.to_vec(),
            next_ordinal,
            bson_size,
            child_count,
            fields,
            packed: None,
        }))
    }

    /// Writes new values for top-level fields of the document `view` was read from:
    /// `(name, Some(value))` sets a field (a new field is appended after the existing ones, in
    /// the order given), `(name, None)` removes it. Every field named must have been read
    /// into `view`. A packed document is rewritten as one value (spilled if it outgrew the
    /// collection's pack threshold); in a spilled one only nodes whose bytes change are
    /// written, removed nodes are deleted, and the root header (size, field count, next
    /// ordinal) is rewritten only if it changed — unless the document shrank enough to be
    /// packed again, when it is rewritten whole. When the collection is validated, the whole
    /// old and new documents are checked first (see [`crate::validation`]).
    pub fn write_fields(
        &mut self,
        coll: &CollectionMeta,
        view: &DocView,
        changes: &[FieldChange<'_>],
    ) -> Result<()> {
        self.claim(coll.id, &view.key)?;
        let limits = coll.limits();
        // The size the document will have, to see whether it becomes small enough to pack.
        let mut new_size = i64::from(view.bson_size);
        for (name, new) in changes {
            if let Some(f) = view.field(name) {
                new_size -= f.size() as i64;
            }
            if let Some(v) = new {
                new_size += element_size(name, *v) as i64;
            }
        }
        let repack = view.packed.is_none()
            && new_size >= 0
            && (new_size as u64) <= u64::from(limits.pack_threshold / 2);
        // Indexes over a changed field need the whole old and new documents for their diff
        // (compound and partial indexes read other fields too); others are untouched. So do
        // a collection's pre- and post-images, and a rewrite of the whole document (a packed
        // one, or one that shrinks enough to be packed again).
        let changed: Vec<&str> = changes.iter().map(|(n, _)| *n).collect();
        let images = changelog::wants_images(coll);
        let indexed = self.indexes_affected(coll, &changed);
        let validator = self.validator_for(coll);
        let mut whole = None;
        if images || indexed || repack || view.packed.is_some() || validator.is_some() {
            let old = match &view.packed {
                Some(p) => p.clone(),
                None => self
                    .get_by_key(coll, &view.key)?
                    .ok_or_else(|| StorageError::Corrupt("updated document vanished".into()))?,
            };
            let new = apply_field_changes(&old, changes)?;
            if let Some(v) = validator {
                v.check(coll, Some(&old), &new)?;
            }
            whole = Some((old, new));
        }
        let mut description = crate::diff::Description::default();
        for (name, new) in changes {
            crate::diff::describe(
                &mut description,
                name,
                view.field(name).map(FieldState::value),
                *new,
                self.diff_mode,
            );
        }
        if !description.is_empty() {
            let key = self.document_key_at(coll, view)?;
            let mut c = Change::on("u", coll)
                .with("key", key)
                .with("upd", description.to_document());
            if let Some((old, new)) = whole.as_ref().filter(|_| images) {
                c = c.with("pre", old.clone()).with("post", new.clone());
            }
            self.log(c);
        }
        if let Some((old, new)) = &whole {
            if view.packed.is_some() {
                return self.rewrite_packed(coll, &view.key, old, new, indexed);
            }
            if repack {
                self.replace_nodes(coll, &view.key, new, false)?;
                return Ok(());
            }
            if indexed {
                self.index_document(coll, &view.key, Some(old), Some(new))?;
            }
        }
        let mut next_ordinal = view.next_ordinal;
        let mut size = i64::from(view.bson_size);
        let mut count = i64::from(view.child_count);
        for (name, new) in changes {
            let old = view.field(name);
            let fk = doc::node_key(&view.key, &[doc::PathPart::Field(name)]).map_err(doc_error)?;
            let ordinal = match old {
                Some(f) => f.ordinal,
                None => {
                    let o = next_ordinal;
                    next_ordinal += 1;
                    o
                }
            };
            let old_nodes: &[(Vec<u8>, Vec<u8>)] = old.map_or(&[], |f| f.nodes.as_slice());
            let spilled = doc::spilled_keys(old_nodes);
            let new_nodes = match new {
                Some(v) => doc::encode_subtree_after(&fk, ordinal, *v, 1, &limits, &|k| {
                    spilled.contains(k)
                })
                .map_err(doc_error)?,
                None => Vec::new(),
            };
            let stored: std::collections::HashMap<&[u8], &[u8]> = old_nodes
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect();
            let mut kept = std::collections::HashSet::new();
            for (k, v) in &new_nodes {
                kept.insert(k.as_slice());
                if stored.get(k.as_slice()) != Some(&v.as_slice()) {
                    self.tx.put(coll.id, k, v)?;
                }
            }
            for (k, _) in old_nodes {
                if !kept.contains(k.as_slice()) {
                    self.tx.delete(coll.id, k)?;
                }
            }
            if let Some(f) = old {
                size -= f.size() as i64;
                count -= 1;
            }
            if let Some(v) = new {
                size += element_size(name, *v) as i64;
                count += 1;
            }
        }
        let size =
            usize::try_from(size).map_err(|_| StorageError::Corrupt("negative size".into()))?;
        if size > doc::MAX_BSON_SIZE {
            return Err(StorageError::DocumentTooLarge {
                size,
                max: doc::MAX_BSON_SIZE,
            });
        }
        let root = doc::Node::Root {
            next_ordinal,
            bson_size: u32::try_from(size).unwrap_or(u32::MAX),
            child_count: u32::try_from(count).unwrap_or(0),
        };
        if next_ordinal != view.next_ordinal
            || size != view.bson_size as usize
            || count != i64::from(view.child_count)
        {
            self.tx.put(coll.id, &view.key, &root.to_bytes())?;
        }
        let delta = size as i64 - i64::from(view.bson_size);
        if delta != 0 {
            self.deltas.entry(coll.id).or_default().add(Stats {
                count: 0,
                size: delta,
            });
        }
        Ok(())
    }

    /// [`WriteTxn::write_fields`] on a packed document `old`, now `new`: encoded whole
    /// (packed while it stays within the threshold, else spilled) over the one stored value.
    fn rewrite_packed(
        &mut self,
        coll: &CollectionMeta,
        key: &[u8],
        old: &RawDocument,
        new: &RawDocument,
        indexed: bool,
    ) -> Result<()> {
        let size = new.as_bytes().len();
        if size > doc::MAX_BSON_SIZE {
            return Err(StorageError::DocumentTooLarge {
                size,
                max: doc::MAX_BSON_SIZE,
            });
        }
        if indexed {
            self.index_document(coll, key, Some(old), Some(new))?;
        }
        // A packed document has no spilled nodes.
        let enc =
            doc::encode_document_after(key, new, &coll.limits(), &|_| false).map_err(doc_error)?;
        for (k, v) in &enc.nodes {
            let unchanged = k.as_slice() == key
                && v.first() == Some(&doc::KIND_PACKED_ROOT)
                && v.get(1..) == Some(old.as_bytes());
            if !unchanged {
                self.tx.put(coll.id, k, v)?;
            }
        }
        let delta = i64::from(enc.bson_size) - old.as_bytes().len() as i64;
        if delta != 0 {
            self.deltas.entry(coll.id).or_default().add(Stats {
                count: 0,
                size: delta,
            });
        }
        Ok(())
    }

    /// Replaces the document whose key is `key` with `new` (same `_id`), writing only the
    /// nodes whose bytes change and deleting the ones that disappear. Returns false when no
    /// document has that key. The collection's validator checks the new document against the
    /// old one before anything is written.
    pub fn replace(
        &mut self,
        coll: &CollectionMeta,
        key: &[u8],
        new: &RawDocument,
    ) -> Result<bool> {
        self.claim(coll.id, key)?;
        self.replace_nodes(coll, key, new, true)
    }

    /// [`WriteTxn::replace`] after the claim; `log` records the replacement in the change
    /// log and validates it (false for an update that rewrites the whole document: it
    /// validated the document and logs itself as an update).
    fn replace_nodes(
        &mut self,
        coll: &CollectionMeta,
        key: &[u8],
        new: &RawDocument,
        log: bool,
    ) -> Result<bool> {
        let stored: Vec<(Vec<u8>, Vec<u8>)> = self
            .tx
            .prefix(coll.id, key)?
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<std::result::Result<_, _>>()?;
        let Some((_, root)) = stored.first() else {
            return Ok(false);
        };
        let old_size = match doc::parse_stored_value(root).map_err(doc_error)? {
            doc::Node::Root { bson_size, .. } => i64::from(bson_size),
            doc::Node::PackedRoot { bson } => bson.len() as i64,
            _ => {
                return Err(StorageError::Corrupt(
                    "document key without a root header".into(),
                ));
            }
        };
        let images = log && changelog::wants_images(coll);
        // An update that rewrites the whole document (`log` false) has validated it already.
        let validator = if log { self.validator_for(coll) } else { None };
        if images || validator.is_some() || coll.secondary_indexes().next().is_some() {
            let old_doc = doc::decode_document(key.len(), stored.iter().map(|(k, v)| (k, v)))
                .map_err(doc_error)?;
            if let Some(v) = validator {
                v.check(coll, Some(&old_doc), new)?;
            }
            if coll.secondary_indexes().next().is_some() {
                self.index_document(coll, key, Some(&old_doc), Some(new))?;
            }
            if images {
                self.log(
                    Change::on("r", coll)
                        .with("key", changelog::document_key(new))
                        .with_ref("doc", RawBsonRef::Document(new))
                        .with("pre", old_doc),
                );
            }
        }
        if log && !images {
            self.log(
                Change::on("r", coll)
                    .with("key", changelog::document_key(new))
                    .with_ref("doc", RawBsonRef::Document(new)),
            );
        }
        let spilled = doc::spilled_keys(&stored);
        let enc = doc::encode_document_after(key, new, &coll.limits(), &|k| spilled.contains(k))
            .map_err(doc_error)?;
        let old: std::collections::HashMap<&[u8], &[u8]> = stored
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        let mut kept = std::collections::HashSet::new();
        for (k, v) in &enc.nodes {
            kept.insert(k.as_slice());
            if old.get(k.as_slice()) != Some(&v.as_slice()) {
                self.tx.put(coll.id, k, v)?;
            }
        }
        for (k, _) in &stored {
            if !kept.contains(k.as_slice()) {
                self.tx.delete(coll.id, k)?;
            }
        }
        let delta = i64::from(enc.bson_size) - old_size;
        if delta != 0 {
            self.deltas.entry(coll.id).or_default().add(Stats {
                count: 0,
                size: delta,
            });
        }
        Ok(true)
    }

    /// Deletes the document with this key; returns whether one existed.
    pub fn delete_by_key(&mut self, coll: &CollectionMeta, key: &[u8]) -> Result<bool> {
        self.claim(coll.id, key)?;
        let nodes: Vec<(Vec<u8>, Vec<u8>)> = self
            .tx
            .prefix(coll.id, key)?
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<std::result::Result<_, _>>()?;
        let Some((_, root)) = nodes.first() else {
            return Ok(false);
        };
        let size = match doc::parse_stored_value(root).map_err(doc_error)? {
            doc::Node::Root { bson_size, .. } => i64::from(bson_size),
            doc::Node::PackedRoot { bson } => bson.len() as i64,
            _ => {
                return Err(StorageError::Corrupt(
                    "document without a root header".into(),
                ));
            }
        };
        let old = doc::decode_document(key.len(), nodes.iter().map(|(k, v)| (k, v)))
            .map_err(doc_error)?;
        if coll.secondary_indexes().next().is_some() {
            self.index_document(coll, key, Some(&old), None)?;
        }
        for (k, _) in &nodes {
            self.tx.delete(coll.id, k)?;
        }
        if coll.natural.is_some() {
            self.capped_remove(coll, key)?;
        }
        let mut c = Change::on("d", coll).with("key", changelog::document_key(&old));
        if changelog::wants_images(coll) {
            c = c.with("pre", old);
        }
        self.log(c);
        self.deltas.entry(coll.id).or_default().add(Stats {
            count: -1,
            size: -size,
        });
        Ok(true)
    }

    /// Scans documents like [`ReadTxn::scan_where`], but inside this transaction: the
    /// documents read join its read set (an update that read a document conflicts with a
    /// concurrent write to it).
    pub fn scan_where(
        &self,
        coll: &CollectionMeta,
        resume: Option<&[u8]>,
        reverse: bool,
        limits: ScanLimits,
        pred: &mut dyn FnMut(&RawDocument) -> bool,
    ) -> Result<ScanBatch> {
        scan_where(&*self.tx, coll, resume, reverse, limits, pred)
    }

    /// [`WriteTxn::scan_where`] limited to the document keys in `[lo, hi)` (bounds on
    /// `E(_id)`, e.g. from index bounds on `_id`); `resume` continues a previous batch of the
    /// same range.
    pub fn scan_range(
        &self,
        coll: &CollectionMeta,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        resume: Option<&[u8]>,
        reverse: bool,
        limits: ScanLimits,
        pred: &mut dyn FnMut(&RawDocument) -> bool,
    ) -> Result<ScanBatch> {
        scan_range(&*self.tx, coll, range, resume, reverse, limits, pred)
    }

    /// Keys written so far in this transaction.
    pub fn writes(&self) -> usize {
        self.tx.writes()
    }

    /// Keys read so far in this transaction.
    pub fn reads(&self) -> usize {
        self.tx.reads()
    }

    /// Gives a session's transaction back after a command (see [`Store::resume`]).
    pub fn suspend(self) -> TxnState {
        TxnState {
            tx: self.tx,
            deltas: self.deltas,
            created: self.created,
            owner: self.owner,
            changes: self.changes,
            origin: self.origin,
        }
    }

    /// `bypassDocumentValidation`: the documents this transaction writes from now on skip
    /// their collections' validators (see [`crate::validation`]).
    pub fn set_bypass_validation(&mut self, bypass: bool) {
        self.bypass_validation = bypass;
    }

    /// The validator to check a write to `coll` with, unless validation is bypassed or does
    /// not apply to the collection.
    fn validator_for(&self, coll: &CollectionMeta) -> Option<Arc<dyn DocumentValidator>> {
        if self.bypass_validation {
            return None;
        }
        let v = self.store.validator.read().ok()?.clone()?;
        v.applies(coll).then_some(v)
    }

    /// Makes [`WriteTxn::write_fields`] describe changes as MongoDB's generic document diff
    /// does (pipeline-style updates) rather than as update operators log them.
    pub fn set_generic_diff(&mut self, generic: bool) {
        self.diff_mode = if generic {
            crate::diff::Mode::Generic
        } else {
            crate::diff::Mode::Operators
        };
    }

    /// The `{_id}` document key of the document a view was read from.
    fn document_key_at(&self, coll: &CollectionMeta, view: &DocView) -> Result<RawDocumentBuf> {
        let mut k = RawDocumentBuf::new();
        if let Some(f) = view.field("_id") {
            k.append(bson::raw::cstr!("_id"), f.value());
            return Ok(k);
        }
        if let Some(whole) = &view.packed {
            if let Some(id) = whole
                .get("_id")
                .map_err(|e| StorageError::Corrupt(e.to_string()))?
            {
                k.append(bson::raw::cstr!("_id"), id);
            }
            return Ok(k);
        }
        let fk = doc::node_key(&view.key, &[doc::PathPart::Field("_id")]).map_err(doc_error)?;
        let nodes: Vec<(Vec<u8>, Vec<u8>)> = self
            .tx
            .prefix(coll.id, &fk)?
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<std::result::Result<_, _>>()?;
        if let Some(id) = doc::decode_stored_subtree(fk.len(), nodes).map_err(doc_error)? {
            k.append(bson::raw::cstr!("_id"), id);
        }
        Ok(k)
    }

    /// Records a change for the change log (written at commit).
    pub(crate) fn log(&mut self, c: Change) {
        let c = match self.origin {
            Some((lsid, n)) => c.in_txn(&lsid, n),
            None => c,
        };
        self.changes.push(c);
    }

    /// In a session's transaction, claims the document `key` of `space` before writing it:
    /// a document another open transaction has written is a write conflict now (MongoDB's
    /// first-writer-wins), not at commit.
    pub(crate) fn claim(&mut self, space: SpaceId, key: &[u8]) -> Result<()> {
        let Some(owner) = &mut self.owner else {
            return Ok(());
        };
        let mut map = self.store.intents.lock().map_err(|_| poisoned())?;
        let k = (space, key.to_vec());
        match map.get(&k) {
            Some(id) if *id == owner.id => Ok(()),
            Some(_) => Err(StorageError::Engine(EngineError::Conflict)),
            None => {
                map.insert(k.clone(), owner.id);
                owner.held.push(k);
                Ok(())
            }
        }
    }

    /// Writes the statistics deltas and commits; returns the keys read and written in all,
    /// and the commit's cluster time when it wrote anything.
    fn commit(self) -> Result<(usize, usize, Option<bson::Timestamp>)> {
        let WriteTxn {
            store,
            mut tx,
            deltas,
            created: _,
            owner: _,
            changes,
            origin: _,
            diff_mode: _,
            bypass_validation: _,
        } = self;
        for (space, delta) in deltas {
            if !delta.is_zero() {
                let seq = store.stats_seq.fetch_add(1, Ordering::Relaxed);
                tx.put(CATALOG_SPACE, &stats_key(space, seq), &delta.encode())?;
            }
        }
        let (reads, writes) = (tx.reads(), tx.writes());
        let ts = store.commit_engine(tx, &changes)?;
        Ok((reads, writes, ts))
    }
}

/// The document at `key` (its `E(_id)` key), read from `r`.
pub(crate) fn get_document(
    r: &dyn Read,
    space: SpaceId,
    key: &[u8],
) -> Result<Option<RawDocumentBuf>> {
    // The root first: a packed document is that one value (a point read, no scan).
    let Some(root) = r.get(space, key)? else {
        return Ok(None);
    };
    document_from_root(r, space, key, &root)
}

/// The document at `key` whose root value, read from `r`, is `root`: a packed document is
/// that value alone; a spilled one is the prefix scan of `key` from `r` (which holds the
/// root again; `None` if it finds nothing).
pub(crate) fn document_from_root(
    r: &dyn Read,
    space: SpaceId,
    key: &[u8],
    root: &[u8],
) -> Result<Option<RawDocumentBuf>> {
    if root.first() == Some(&doc::KIND_PACKED_ROOT) {
        return doc::decode_stored_document(key.len(), [(key, root)])
            .map(Some)
            .map_err(doc_error);
    }
    let nodes: Vec<(crate::engine::Bytes, crate::engine::Bytes)> =
        r.prefix(space, key)?
            .collect::<std::result::Result<_, _>>()?;
    if nodes.is_empty() {
        return Ok(None);
    }
    doc::decode_stored_document(key.len(), nodes)
        .map(Some)
        .map_err(doc_error)
}

/// A stored top-level field, as [`WriteTxn::read_fields`] read it.
#[derive(Debug, Clone)]
pub struct FieldState {
    /// The field name.
    pub name: String,
    /// Its position among the document's fields.
    pub ordinal: u64,
    /// Its value, held as the one-field document `{"": value}` (see [`FieldState::value`]).
    holder: RawDocumentBuf,
    /// The stored nodes of its subtree, in key order.
    nodes: Vec<(Vec<u8>, Vec<u8>)>,
}

impl FieldState {
    fn new(
        name: &str,
        ordinal: u64,
        value: RawBsonRef<'_>,
        nodes: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Self {
        // The value's bytes are copied as they are. (bson's owned `RawBson::Array` would walk
        // and check every element of an array to count them, twice per targeted update.)
        let mut holder = RawDocumentBuf::new();
        holder.append(bson::raw::cstr!(""), value);
        FieldState {
            name: name.to_string(),
            ordinal,
            holder,
            nodes,
        }
    }

    /// The field's value.
    pub fn value(&self) -> RawBsonRef<'_> {
        // `holder` was built by appending one valid value, so reading it back finds that
        // value (only its framing is looked at again).
        match self.holder.iter().next() {
            Some(Ok((_, v))) => v,
            _ => RawBsonRef::Null,
        }
    }

    /// Bytes the field takes in its document: type byte, name, NUL, value.
    fn size(&self) -> usize {
        held_element_size(&self.name, &self.holder)
    }
}

/// One change [`WriteTxn::write_fields`] makes: a top-level field and its new value (`None`
/// removes it).
pub type FieldChange<'a> = (&'a str, Option<RawBsonRef<'a>>);

/// The parts of a stored document a targeted update read.
#[derive(Debug, Clone)]
pub struct DocView {
    /// The document key (`E(_id)`).
    pub key: Vec<u8>,
    next_ordinal: u64,
    bson_size: u32,
    child_count: u32,
    /// The requested fields that exist, in request order.
    pub fields: Vec<FieldState>,
    /// The whole document, when it is stored packed.
    packed: Option<RawDocumentBuf>,
}

impl DocView {
    /// A field read into the view, if it exists.
    pub fn field(&self, name: &str) -> Option<&FieldState> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The BSON size of the whole document.
    pub fn bson_size(&self) -> u32 {
        self.bson_size
    }

    /// Number of top-level fields of the whole document.
    pub fn field_count(&self) -> u32 {
        self.child_count
    }
}

/// The [`DocView`] of a packed document (`bson`, validated by the codec): the named fields
/// with their positions as ordinals.
fn packed_view(key: &[u8], bson: &[u8], names: &[&str]) -> Result<DocView> {
    let whole = RawDocumentBuf::from_bytes(bson.to_vec())
        .map_err(|e| StorageError::Corrupt(e.to_string()))?;
    let mut fields: Vec<FieldState> = Vec::new();
    let mut count = 0u32;
    for (i, el) in whole.iter().enumerate() {
        let (k, v) = el.map_err(|e| StorageError::Corrupt(e.to_string()))?;
        count += 1;
        if names.contains(&k.as_str()) && !fields.iter().any(|f| f.name == k.as_str()) {
            fields.push(FieldState::new(k.as_str(), i as u64, v, Vec::new()));
        }
    }
    // Request order, as for spilled documents.
    fields.sort_by_key(|f| names.iter().position(|n| *n == f.name));
    Ok(DocView {
        key: key.to_vec(),
        next_ordinal: u64::from(count),
        bson_size: u32::try_from(bson.len()).unwrap_or(u32::MAX),
        child_count: count,
        fields,
        packed: Some(whole),
    })
}

/// `doc` with top-level fields changed as [`WriteTxn::write_fields`] changes them: replaced in
/// place, removed, or appended in the order given.
pub fn apply_field_changes(
    doc: &RawDocument,
    changes: &[FieldChange<'_>],
) -> Result<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    for el in doc.iter() {
        let (k, v) = el.map_err(|e| StorageError::Corrupt(e.to_string()))?;
        match changes.iter().find(|(n, _)| *n == k.as_str()) {
            Some((_, Some(new))) => out.append(k, *new),
            Some((_, None)) => {}
            None => out.append(k, v),
        }
    }
    for (name, new) in changes {
        if let Some(v) = new
            && doc.get(name).ok().flatten().is_none()
        {
            let k = <&bson::raw::CStr>::try_from(*name)
                .map_err(|e| StorageError::BadValue(e.to_string()))?;
            out.append(k, *v);
        }
    }
    Ok(out)
}

/// Bytes a field takes in its document: type byte, name, NUL, value.
pub fn element_size(name: &str, v: RawBsonRef<'_>) -> usize {
    // An embedded document or array is its framed bytes (no copy needed to measure it).
    match v {
        RawBsonRef::Document(d) => return 2 + name.len() + d.as_bytes().len(),
        RawBsonRef::Array(a) => return 2 + name.len() + a.as_bytes().len(),
        _ => {}
    }
    let mut holder = RawDocumentBuf::new();
    holder.append(bson::raw::cstr!(""), v);
    held_element_size(name, &holder)
}

/// [`element_size`] of the value held in the one-field document `holder` (`{"": value}`).
fn held_element_size(name: &str, holder: &RawDocument) -> usize {
    // holder = 4 (length) + 1 (type) + 1 (empty name's NUL) + value + 1 (terminator)
    holder.as_bytes().len() - 5 + name.len()
}

/// One batch of a collection scan.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanBatch {
    /// The matching documents, in scan order.
    pub docs: Vec<RawDocumentBuf>,
    /// Where the next batch continues, or `None` when the scan is complete: for a forward
    /// scan the inclusive start key, for a reverse scan the exclusive end key.
    pub resume: Option<Vec<u8>>,
    /// Documents examined (matching or not).
    pub examined: usize,
}

/// Limits of one scan batch.
#[derive(Debug, Clone, Copy)]
pub struct ScanLimits {
    /// Stop after this many matching documents.
    pub max_docs: usize,
    /// Stop once the matching documents reach this many BSON bytes (always at least one).
    pub max_bytes: usize,
    /// Stop after examining this many documents (bounds the work of a selective filter).
    pub max_examined: usize,
    /// Whether the first matching document may exceed `max_bytes` on its own (a batch
    /// always makes progress); false when the caller already holds documents.
    pub first_may_exceed: bool,
}

impl ScanLimits {
    /// Up to `max_docs` documents, no byte or work bound.
    pub fn docs(max_docs: usize) -> ScanLimits {
        ScanLimits {
            max_docs,
            max_bytes: usize::MAX,
            max_examined: usize::MAX,
            first_may_exceed: true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Take {
    /// Keep scanning.
    More,
    /// The batch is full including this document.
    FullAfter,
    /// The batch is full; this document starts the next one.
    FullBefore,
}

/// A read snapshot; see [`Store::read`]. Clones share the snapshot.
#[derive(Clone)]
pub struct ReadTxn {
    snap: Arc<dyn crate::engine::Snapshot>,
}

impl std::fmt::Debug for ReadTxn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadTxn")
    }
}

impl ReadTxn {
    /// The document with this `_id`.
    pub fn get(&self, coll: &CollectionMeta, id: RawBsonRef<'_>) -> Result<Option<RawDocumentBuf>> {
        get_document(&*self.snap, coll.id, &id_key(id)?)
    }

    /// The documents with these keys (`E(_id)`), in the order given (`None` where there is
    /// none), read as one batch in key order (see [`crate::fetch`]).
    pub fn get_many_by_key(
        &self,
        coll: &CollectionMeta,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<RawDocumentBuf>>> {
        crate::fetch::get_documents(&*self.snap, coll.id, keys)
    }

    /// Documents in `_id` order starting at `from` (inclusive; `None` = the beginning), until
    /// `max_docs` documents or `max_bytes` of BSON (always at least one document).
    pub fn scan(
        &self,
        coll: &CollectionMeta,
        from: Option<&[u8]>,
        max_docs: usize,
        max_bytes: usize,
    ) -> Result<ScanBatch> {
        self.scan_where(
            coll,
            from,
            false,
            ScanLimits {
                max_docs,
                max_bytes,
                max_examined: usize::MAX,
                first_may_exceed: true,
            },
            &mut |_| true,
        )
    }

    /// Scans documents in `_id` order (descending with `reverse`), keeping those `pred`
    /// accepts, from `resume` (see [`ScanBatch::resume`]; `None` = the first document).
    /// The returned resume position lies just after the last document *examined*, so no
    /// document is skipped or repeated across batches.
    pub fn scan_where(
        &self,
        coll: &CollectionMeta,
        resume: Option<&[u8]>,
        reverse: bool,
        limits: ScanLimits,
        pred: &mut dyn FnMut(&RawDocument) -> bool,
    ) -> Result<ScanBatch> {
        scan_where(&*self.snap, coll, resume, reverse, limits, pred)
    }

    /// [`ReadTxn::scan_where`] limited to the document keys in `[lo, hi)` (see
    /// [`WriteTxn::scan_range`]).
    pub fn scan_range(
        &self,
        coll: &CollectionMeta,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        resume: Option<&[u8]>,
        reverse: bool,
        limits: ScanLimits,
        pred: &mut dyn FnMut(&RawDocument) -> bool,
    ) -> Result<ScanBatch> {
        scan_range(&*self.snap, coll, range, resume, reverse, limits, pred)
    }

    /// The underlying snapshot, for statistics and tests.
    pub fn snapshot(&self) -> &dyn Read {
        &*self.snap
    }
}

/// The scan behind [`ReadTxn::scan_where`] and [`WriteTxn::scan_where`].
fn scan_where(
    r: &dyn Read,
    coll: &CollectionMeta,
    resume: Option<&[u8]>,
    reverse: bool,
    limits: ScanLimits,
    pred: &mut dyn FnMut(&RawDocument) -> bool,
) -> Result<ScanBatch> {
    scan_range(
        r,
        coll,
        (Bound::Unbounded, Bound::Unbounded),
        resume,
        reverse,
        limits,
        pred,
    )
}

/// True when no key lies between `lo` and `hi`.
pub fn range_is_empty(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l), Bound::Excluded(h))
        | (Bound::Excluded(l), Bound::Included(h))
        | (Bound::Excluded(l), Bound::Excluded(h)) => l >= h,
    }
}

/// The later of two lower bounds.
pub fn max_lower<T: Ord>(a: Bound<T>, b: Bound<T>) -> Bound<T> {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x,
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.max(y)),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.max(y)),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i > e {
                Bound::Included(i)
            } else {
                Bound::Excluded(e)
            }
        }
    }
}

/// The earlier of two upper bounds.
pub fn min_upper<T: Ord>(a: Bound<T>, b: Bound<T>) -> Bound<T> {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x,
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.min(y)),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.min(y)),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i < e {
                Bound::Included(i)
            } else {
                Bound::Excluded(e)
            }
        }
    }
}

/// A document scan over the keys in `range`, continuing from `resume` (the previous
/// batch's [`ScanBatch::resume`]): forward, `resume` is the inclusive start; in reverse, the
/// exclusive end.
fn scan_range(
    r: &dyn Read,
    coll: &CollectionMeta,
    range: (Bound<&[u8]>, Bound<&[u8]>),
    resume: Option<&[u8]>,
    reverse: bool,
    limits: ScanLimits,
    pred: &mut dyn FnMut(&RawDocument) -> bool,
) -> Result<ScanBatch> {
    let mut out = ScanBatch {
        docs: Vec::new(),
        resume: None,
        examined: 0,
    };
    let mut bytes = 0usize;
    // Offers one complete document to the batch.
    let mut take = |doc: RawDocumentBuf, out: &mut ScanBatch| -> Take {
        if !pred(&doc) {
            out.examined += 1;
            return if out.examined >= limits.max_examined {
                Take::FullAfter
            } else {
                Take::More
            };
        }
        let len = doc.as_bytes().len();
        if out.docs.len() >= limits.max_docs
            || ((!out.docs.is_empty() || !limits.first_may_exceed)
                && bytes.saturating_add(len) > limits.max_bytes)
        {
            // It belongs to the next batch.
            return Take::FullBefore;
        }
        out.examined += 1;
        bytes += len;
        out.docs.push(doc);
        if out.docs.len() >= limits.max_docs
            || bytes >= limits.max_bytes
            || out.examined >= limits.max_examined
        {
            Take::FullAfter
        } else {
            Take::More
        }
    };
    if let (Some(space), (Bound::Unbounded, Bound::Unbounded)) = (coll.natural, range) {
        // A whole capped collection is read in insertion order.
        return crate::capped::scan_natural(r, coll, space, resume, reverse, limits, pred);
    }
    if limits.max_docs == 0 {
        return Err(StorageError::BadValue(
            "a scan batch needs max_docs >= 1".into(),
        ));
    }
    let (lo, hi) = if reverse {
        (
            range.0,
            min_upper(range.1, resume.map_or(Bound::Unbounded, Bound::Excluded)),
        )
    } else {
        (
            max_lower(range.0, resume.map_or(Bound::Unbounded, Bound::Included)),
            range.1,
        )
    };
    if range_is_empty(lo, hi) {
        return Ok(out);
    }
    if reverse {
        let end = hi;
        let iter = r.range(coll.id, range.0, end, true)?;
        let mut pending: Vec<(crate::engine::Bytes, crate::engine::Bytes)> = Vec::new();
        for kv in iter {
            let (k, v) = kv?;
            let root = doc::is_root(&v);
            pending.push((k, v));
            if root {
                let root_key = pending.last().map(|(k, _)| k.to_vec()).unwrap_or_default();
                pending.reverse();
                let doc = doc::decode_stored_document(root_key.len(), pending.drain(..))
                    .map_err(doc_error)?;
                match take(doc, &mut out) {
                    Take::More => {}
                    // Reverse resume is exclusive: the next batch ends below this key.
                    Take::FullAfter => {
                        out.resume = Some(root_key);
                        return Ok(out);
                    }
                    Take::FullBefore => {
                        out.resume = document_end(&root_key);
                        return Ok(out);
                    }
                }
            }
        }
        return Ok(out);
    }
    let start = max_lower(range.0, resume.map_or(Bound::Unbounded, Bound::Included));
    let iter = r.range(coll.id, start, range.1, false)?;
    let mut asm = DocAssembler::stored();
    let mut current_root: Option<Vec<u8>> = None;
    for kv in iter {
        let (k, v) = kv?;
        if doc::is_root(&v) {
            let starting = k.to_vec();
            if let Some(done) = asm.push(&k, &v).map_err(doc_error)? {
                match take(done, &mut out) {
                    Take::More => {}
                    Take::FullAfter => {
                        out.resume = Some(starting);
                        return Ok(out);
                    }
                    Take::FullBefore => {
                        out.resume = current_root;
                        return Ok(out);
                    }
                }
            }
            current_root = Some(starting);
        } else {
            asm.push(&k, &v).map_err(doc_error)?;
        }
    }
    if let Some(done) = asm.finish().map_err(doc_error)?
        && take(done, &mut out) == Take::FullBefore
    {
        out.resume = current_root;
    }
    Ok(out)
}

/// Collection names of a database as stored (for listCollections without a catalog copy).
pub fn collection_names(cat: &Catalog, db: &str) -> Vec<String> {
    cat.in_database(db).map(|m| m.name.clone()).collect()
}

/// The end of the key range of one document (exclusive), given its key.
pub fn document_end(key: &[u8]) -> Option<Vec<u8>> {
    prefix_end(key)
}

#[cfg(test)]
mod inline_tests {
    use super::*;

    /// Inline work is marked; work moved off the worker from inside it is not; each mark is
    /// restored on the way out.
    #[test]
    fn run_blocking_clears_the_inline_mark_inside_inline_work() {
        assert!(!INLINE.get());
        run_inline(|| {
            assert!(INLINE.get());
            run_blocking(|| assert!(!INLINE.get()));
            assert!(INLINE.get());
        });
        assert!(!INLINE.get());
    }
}
