//! The embedded engine: fjall's `OptimisticTxDatabase`, one keyspace per space.
//!
//! Space 0 is the keyspace `catalog`; space `n` is the keyspace `s<n>`. Transactions are
//! fjall's optimistic (SSI) write transactions, which commit with `PersistMode::Buffer`
//! (the journal write reaches the OS before commit returns, so a process crash loses
//! nothing committed); [`Engine::sync`] fsyncs the journal. Keyspace handles are kept in a
//! map guarded by a `RwLock` that is only held to clone a handle, never during I/O; a
//! transaction keeps the handle of the space it last wrote, so a run of puts into one space
//! takes the lock once.
//!
//! Conflict tracking: fjall's optimistic transaction records every written key in its
//! conflict set (and keeps the set until no older snapshot is open), and has no untracked
//! put. The keys only ever written, never read back inside a write transaction — change-log
//! chunks and statistics deltas — would be safe to leave out (each commit writes its own,
//! unique keys, so no two writers collide on them, and they commit in the same batch as the
//! rest), but they are a handful per commit (one delta per collection, one chunk per 256 KiB
//! of log) against one key per document and index entry, so tracking them costs nothing
//! measurable; the document and index keys must stay tracked (a unique index's check is a
//! read of the entry's range, which only conflicts with a concurrent writer's tracked put).
//!
//! The journal is not compressed (fjall would lz4 every value of 4 KiB or more): the only
//! such values on the common paths are the change log's chunks, written with every commit,
//! and compressing them was ~10 % of an `insertMany`'s instructions (7.4k of 73k per
//! document); PostgreSQL's WAL is uncompressed by default too. Journals written compressed
//! by an older build still replay (each entry records its own compression).
//!
//! Row cache: a read-only snapshot's point read ([`Read::get`], and each key of
//! [`Read::get_many`]) is answered from the [`RowCache`] when it may be, and fills it after
//! a miss ([`Read::get_cached`] asks the cache alone); every write transaction's
//! commit takes part in its protocol (`row_cache` module docs), recording the hash of each
//! key it writes ([`FjallTx::put`], [`FjallTx::delete`]). Write transactions read fjall
//! only, so fjall tracks their reads for conflicts. Dropping a space removes its entries.
//!
//! Memory: [`FjallOptions::cache_bytes`] is shared by the row cache
//! ([`FjallOptions::row_cache_bytes`], a quarter of it by default) and fjall's block cache
//! (the rest). The write buffers (memtables,
//! active and sealed, of every keyspace) are held to [`FjallOptions::write_buffer_bytes`]:
//! fjall itself rotates a keyspace's memtable only when that one memtable reaches its own
//! size limit (and bounds nothing across keyspaces), so after each commit the engine
//! compares fjall's write-buffer total with the budget and, when over it, rotates the
//! largest active memtables (their flushes run on fjall's workers; a keyspace with 4 sealed
//! memtables queued makes its writers wait, fjall's own back-pressure). Each keyspace's
//! memtable limit is half the budget (at most fjall's default 64 MiB). [`Engine::stats`]
//! reports the block cache's and the row cache's fill and the filter and index blocks fjall
//! pins outside the block cache.
//!
//! Idle write buffers: a keyspace's memtable is flushed for its size (its own limit, the
//! budget, the journal bound) only while it is written, so data loaded and then only read
//! stayed in the active memtable — a skiplist whose nodes are scattered over memory, where a
//! range read's steps are cache misses — and the journal kept it for replay after a crash. A
//! thread owned by the engine's handles (`IdleFlusher`, holding the engine by a `Weak`; the
//! last handle's drop wakes and joins it) looks at every keyspace's active memtable each
//! quarter of [`FjallOptions::idle_flush`] and rotates one that holds at least
//! [`FjallOptions::idle_flush_min_bytes`] and has not changed (same memtable, same size: every
//! write adds to it) for the period ([`IDLE_FLUSH_PERIOD`], 1 s; a server knob,
//! `--idle-flush-ms`). The flush itself runs on fjall's workers, as any rotation's; fjall's
//! rotation takes the journal lock and does nothing when the memtable is empty, so racing a
//! rotation for the budget is harmless, and no lock of the engine's is held. Each keyspace
//! is judged alone, so the server's own periodic writes (session records and statistics in
//! the catalog, the change log) keep only their own keyspaces busy, and a keyspace that is
//! only read is flushed whatever the others do.
//!
//! Measured (release build, `cairn-bench drive` with 8 clients after `load --docs 100000` and
//! a few seconds idle, server CPU per operation from /proc, two alternating runs each on a
//! shared machine): the write buffers fall from 31 MB to 0.25 MB (the catalog) within 2 s of
//! the load; `$match`+`$group` 161–163 → 120–143 µs, `find_one` by `_id` 14–15 → 12 µs,
//! indexed equality 30–32 → 27–28 µs, range+sort+limit 51–54 → 40–46 µs; a restart after
//! `kill -9` 0.6–2.0 → 0.25–0.31 s (the journal's batches for flushed keyspaces are skipped),
//! resident 52–87 → 21 MB after it. Steady writers (`insert_one`, `$inc`) showed no
//! difference beyond the noise (their memtables change every pass). The period: one second
//! of slower reads after a burst of writes, against an extra flush (and, every second one, a
//! level-0 compaction) for a writer that pauses longer than that. The minimum
//! ([`IDLE_FLUSH_MIN_BYTES`], 1 MiB): a small memtable costs reads little (2,000 inserts after
//! the load, ~300 KB per index memtable: indexed equality ~102k instructions per query with
//! it in memory, 93–103k flushed, callgrind, varying with the compaction state), while each
//! flushed table of an index, whose keys arrive in no order, overlaps all of its level 1, so
//! a trickle of writes flushed every period would rewrite that level every second flush.
//!
//! Compaction: fjall's leveled strategy, started by 2 tables in level 0 (`L0_THRESHOLD`; fjall's
//! default is 4). A range read seeks in every table whose key range overlaps it (its starting
//! bound, in an index block and a data block: a table costs an indexed equality with `limit: 10`
//! ~14k instructions, seeks and items, with lsm-tree patched as vendor/README.md says; ~20k when
//! both bounds were seeked), and an index's entries are written in no particular key order, so
//! every table flushed from its memtable spans the whole index and overlaps every read: with the
//! default, up to 3 such tables waited in level 0 for the next compaction, with 2 at most 1 does
//! (indexed equality limit 10 over 3 against 2 tables: 135k → 117k instructions per query,
//! callgrind). The price, compacting level 0 twice as often on fjall's background workers, did not
//! show in a write-heavy load (200k-document `insertMany` with a 16 MiB cache, so flushes and
//! compactions run throughout: 99.1k → 97.2k instructions per document, compaction workers 955M →
//! 907M in all). fjall records a keyspace's options when it creates it, so keyspaces created by
//! older builds keep the threshold they had.

use std::collections::HashMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ::fjall::{
    AbstractTree, KeyspaceCreateOptions, OptimisticTxDatabase, OptimisticTxKeyspace,
    OptimisticWriteTx, PersistMode, Readable,
};

use super::row_cache::RowCache;
use super::{
    Bytes, CATALOG_SPACE, Engine, EngineError, KvIter, Read, Result, Snapshot, SpaceId, Tx,
};

/// fjall's key size limit.
pub const FJALL_MAX_KEY: usize = 65_535;

/// Options for opening the engine.
#[derive(Debug, Clone)]
pub struct FjallOptions {
    /// Cache memory in bytes: [`FjallOptions::row_cache_bytes`] of it for the row cache,
    /// the rest for fjall's block cache.
    pub cache_bytes: u64,
    /// The row cache's share of `cache_bytes` (0: no row cache).
    pub row_cache_bytes: u64,
    /// Upper bound of the journal in bytes (fjall's `max_journaling_size`, at least 64 MiB):
    /// beyond it the write buffers pinning the oldest journal file are flushed, so crash
    /// recovery replays at most about this much.
    pub journal_bytes: u64,
    /// Budget of the write buffers (all memtables, active and sealed), in bytes of fjall's
    /// accounting (keys + values + a fixed per-entry size); see the module docs.
    pub write_buffer_bytes: u64,
    /// How long a keyspace's active memtable must go without a write before it is flushed
    /// (None: never for idleness); see the module docs. [`IDLE_FLUSH_PERIOD`] by default.
    pub idle_flush: Option<Duration>,
    /// The least size (fjall's accounting, as `write_buffer_bytes`) of an idle memtable that
    /// is flushed; [`IDLE_FLUSH_MIN_BYTES`] by default.
    pub idle_flush_min_bytes: u64,
}

/// [`FjallOptions::idle_flush`] by default (see the module docs).
pub const IDLE_FLUSH_PERIOD: Duration = Duration::from_secs(1);

/// [`FjallOptions::idle_flush_min_bytes`] by default (see the module docs).
pub const IDLE_FLUSH_MIN_BYTES: u64 = 1 << 20;

impl FjallOptions {
    /// The options for caches of `cache_bytes` (a quarter for the row cache, the rest for
    /// the block cache), with the write-buffer budget that goes with it
    /// ([`write_buffer_budget`]).
    pub fn with_cache(cache_bytes: u64, journal_bytes: u64) -> FjallOptions {
        FjallOptions {
            cache_bytes,
            row_cache_bytes: cache_bytes / 4,
            journal_bytes,
            write_buffer_bytes: write_buffer_budget(cache_bytes),
            idle_flush: Some(IDLE_FLUSH_PERIOD),
            idle_flush_min_bytes: IDLE_FLUSH_MIN_BYTES,
        }
    }
}

/// The write-buffer budget for a block cache of `cache_bytes`: a quarter of it, between
/// 16 MiB and 256 MiB.
pub fn write_buffer_budget(cache_bytes: u64) -> u64 {
    (cache_bytes / 4).clamp(16 << 20, 256 << 20)
}

impl Default for FjallOptions {
    fn default() -> Self {
        FjallOptions::with_cache(256 * 1024 * 1024, 64 * 1024 * 1024)
    }
}

struct Inner {
    db: OptimisticTxDatabase,
    /// Every open space's handle. Looked up on every read and write (a batch of point reads
    /// asks once per key), so keyed with foldhash: the ids are the engine's own, not
    /// attacker-chosen, and SipHash was most of each lookup.
    spaces: RwLock<HashMap<SpaceId, OptimisticTxKeyspace, foldhash::fast::FixedState>>,
    /// [`FjallOptions::write_buffer_bytes`].
    write_buffer_budget: u64,
    /// Milliseconds since `opened` of the last rotation for the budget (rotations at most
    /// every [`RELIEF_INTERVAL_MS`], so commits while the flushes run do not pile more on).
    last_relief: AtomicU64,
    opened: Instant,
    /// The row cache (None when its size is 0).
    rows: Option<RowCache>,
    /// Memtables rotated for idleness since open.
    idle_flushes: AtomicU64,
}

/// Tables in level 0 that start a compaction into level 1 (see the module docs).
const L0_THRESHOLD: u8 = 2;

/// Least time between two rotations for the write-buffer budget.
const RELIEF_INTERVAL_MS: u64 = 20;

fn keyspace_options(write_buffer_budget: u64) -> KeyspaceCreateOptions {
    KeyspaceCreateOptions::default()
        .max_memtable_size((write_buffer_budget / 2).min(64 << 20))
        .compaction_strategy(Arc::new(
            ::fjall::compaction::Leveled::default().with_l0_threshold(L0_THRESHOLD),
        ))
}

/// The fjall engine.
#[derive(Clone)]
pub struct FjallEngine {
    /// The idle flusher (None when [`FjallOptions::idle_flush`] is). Declared first, so the
    /// last handle's drop stops the thread before it releases `inner`.
    _idle: Option<Arc<IdleFlusher>>,
    inner: Arc<Inner>,
}

/// The thread that flushes idle memtables ([`Inner::flush_idle`]), owned by the engine's
/// handles: dropping the last one closes the channel, which wakes the thread at once, and
/// joins it. The thread holds the engine by a `Weak`, upgraded only for a pass, so it never
/// keeps a dropped engine open.
struct IdleFlusher {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl IdleFlusher {
    fn start(inner: &Arc<Inner>, period: Duration, min_bytes: u64) -> Result<IdleFlusher> {
        let (stop, stopped) = mpsc::channel::<()>();
        let weak = Arc::downgrade(inner);
        let thread = std::thread::Builder::new()
            .name("cairn-idle-flush".into())
            .spawn(move || idle_flush_loop(&weak, &stopped, period, min_bytes))
            .map_err(io)?;
        Ok(IdleFlusher {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for IdleFlusher {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A pass every quarter of the period (so a memtable is flushed between 1 and 1.25 periods
/// after its last write), until the channel closes or the engine is gone.
fn idle_flush_loop(inner: &Weak<Inner>, stop: &mpsc::Receiver<()>, period: Duration, min: u64) {
    let tick = (period / 4).max(Duration::from_millis(1));
    let mut seen = HashMap::new();
    loop {
        match stop.recv_timeout(tick) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        inner.flush_idle(&mut seen, Instant::now(), period, min);
    }
}

/// What the idle flusher last saw of a keyspace's active memtable, and since when.
struct SeenMemtable {
    id: u64,
    size: u64,
    since: Instant,
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
        let row_cache_bytes = opts.row_cache_bytes.min(opts.cache_bytes);
        let db = OptimisticTxDatabase::builder(path)
            .cache_size(opts.cache_bytes - row_cache_bytes)
            .max_journaling_size(opts.journal_bytes.max(64 * 1024 * 1024))
            .journal_compression(::fjall::CompressionType::None)
            .open()
            .map_err(io)?;
        let budget = opts.write_buffer_bytes.max(1 << 20);
        let ks_opts = || keyspace_options(budget);
        let mut spaces = HashMap::with_hasher(foldhash::fast::FixedState::default());
        for name in db.list_keyspace_names() {
            let name: &str = name.as_ref();
            if let Some(id) = parse_space_name(name) {
                let ks = db.keyspace(name, ks_opts).map_err(io)?;
                spaces.insert(id, ks);
            }
        }
        if let std::collections::hash_map::Entry::Vacant(slot) = spaces.entry(CATALOG_SPACE) {
            let ks = db
                .keyspace(&space_name(CATALOG_SPACE), ks_opts)
                .map_err(io)?;
            slot.insert(ks);
        }
        let inner = Arc::new(Inner {
            spaces: RwLock::new(spaces),
            write_buffer_budget: budget,
            last_relief: AtomicU64::new(0),
            opened: Instant::now(),
            rows: RowCache::new(row_cache_bytes, db.inner().visible_seqno()),
            idle_flushes: AtomicU64::new(0),
            db,
        });
        let idle = match opts.idle_flush {
            Some(period) => Some(Arc::new(IdleFlusher::start(
                &inner,
                period,
                opts.idle_flush_min_bytes,
            )?)),
            None => None,
        };
        Ok(FjallEngine { _idle: idle, inner })
    }

    fn handle(&self, space: SpaceId) -> Result<OptimisticTxKeyspace> {
        self.inner.handle(space)
    }
}

impl Inner {
    /// Holds the write buffers to the budget (see the module docs): when fjall's total is
    /// over it, rotates the largest active memtables until what they hold covers the excess.
    fn relieve_write_buffers(&self) {
        let used = self.db.write_buffer_size();
        if used <= self.write_buffer_budget {
            return;
        }
        let now = self.opened.elapsed().as_millis() as u64;
        let last = self.last_relief.load(Ordering::Relaxed);
        if now < last + RELIEF_INTERVAL_MS
            || self
                .last_relief
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let mut active: Vec<(u64, OptimisticTxKeyspace)> = match self.spaces.read() {
            Ok(m) => m
                .values()
                .map(|ks| (ks.inner().tree.active_memtable().size(), ks.clone()))
                .filter(|(n, _)| *n > 0)
                .collect(),
            Err(_) => return,
        };
        active.sort_unstable_by_key(|(n, _)| std::cmp::Reverse(*n));
        // Sealed memtables are already on their way out: rotate active ones to cover the
        // rest of the excess.
        let mut excess = used - self.write_buffer_budget;
        for (n, ks) in active {
            // A failed rotation leaves the memtable active; fjall reports the I/O error on
            // the next write.
            let _ = ks.inner().rotate_memtable();
            excess = excess.saturating_sub(n);
            if excess == 0 {
                break;
            }
        }
    }

    /// One pass of the idle flusher: rotates the active memtable of each keyspace that holds
    /// at least `min` bytes and has not changed (same memtable, same size: every write adds
    /// to it) for `period`. `seen` is the flusher's memory between passes.
    fn flush_idle(
        &self,
        seen: &mut HashMap<SpaceId, SeenMemtable>,
        now: Instant,
        period: Duration,
        min: u64,
    ) {
        let handles: Vec<(SpaceId, OptimisticTxKeyspace)> = match self.spaces.read() {
            Ok(m) => m.iter().map(|(id, ks)| (*id, ks.clone())).collect(),
            Err(_) => return,
        };
        seen.retain(|id, _| handles.iter().any(|(h, _)| h == id));
        for (space, ks) in handles {
            let tree = &ks.inner().tree;
            let active = || {
                let m = tree.active_memtable();
                (m.id(), m.size())
            };
            let (id, size) = active();
            let last = seen.entry(space).or_insert(SeenMemtable {
                id,
                size,
                since: now,
            });
            if last.id != id || last.size != size {
                *last = SeenMemtable {
                    id,
                    size,
                    since: now,
                };
                continue;
            }
            if size == 0 || size < min || now.duration_since(last.since) < period {
                continue;
            }
            // Looked at again right before the rotation, which takes whatever memtable is
            // active then: a rotation for the budget may have come in between (the next pass
            // sees the new memtable), or a write (it is flushed with the rest; nothing lost).
            if active() != (id, size) {
                continue;
            }
            // A failed rotation leaves the memtable active; fjall reports the I/O error on
            // the next write. A rotation that found the memtable rotated already is false.
            if ks.inner().rotate_memtable().unwrap_or(false) {
                self.idle_flushes.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

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
    /// The handle of the space last written (a batch writes runs of puts into a few spaces;
    /// this spares each put the space map's lock and a handle clone).
    last: Option<(SpaceId, OptimisticTxKeyspace)>,
    /// The row-cache hash of every key written (empty without a row cache).
    touched: Vec<u64>,
}

/// The handle of `space` for a write, kept in `last` (see [`FjallTx::last`]).
fn write_handle<'a>(
    last: &'a mut Option<(SpaceId, OptimisticTxKeyspace)>,
    inner: &Inner,
    space: SpaceId,
) -> Result<&'a OptimisticTxKeyspace> {
    if last.as_ref().is_none_or(|(s, _)| *s != space) {
        *last = Some((space, inner.handle(space)?));
    }
    match last {
        Some((_, ks)) => Ok(ks),
        None => Err(EngineError::NoSuchSpace(space)),
    }
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
        let ks = write_handle(&mut self.last, &self.inner, space)?;
        self.writes += 1;
        if let Some(rows) = &self.inner.rows {
            self.touched.push(rows.hash(ks.inner().id(), key));
        }
        self.tx.insert(ks, key, value);
        Ok(())
    }

    fn delete(&mut self, space: SpaceId, key: &[u8]) -> Result<()> {
        check_key(key)?;
        let ks = write_handle(&mut self.last, &self.inner, space)?;
        self.writes += 1;
        if let Some(rows) = &self.inner.rows {
            self.touched.push(rows.hash(ks.inner().id(), key));
        }
        self.tx.remove(ks, key);
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<()> {
        let FjallTx {
            tx,
            inner,
            mut touched,
            ..
        } = *self;
        // The row cache's commit bracket: entries removed and fills held off before fjall
        // commits, released (with the watermark raised) after, also when it fails or unwinds.
        let bracket = match &inner.rows {
            Some(rows) if !touched.is_empty() => Some(CommitBracket {
                mask: rows.begin_commit(&mut touched),
                rows,
                db: &inner.db,
            }),
            _ => None,
        };
        let result = tx.commit();
        drop(bracket);
        match result {
            Ok(Ok(())) => {
                inner.relieve_write_buffers();
                Ok(())
            }
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

/// Ends a commit's part in the row cache protocol when dropped (after fjall's commit).
struct CommitBracket<'a> {
    rows: &'a RowCache,
    db: &'a OptimisticTxDatabase,
    mask: u64,
}

impl Drop for CommitBracket<'_> {
    fn drop(&mut self) {
        self.rows
            .end_commit(self.mask, self.db.inner().visible_seqno());
    }
}

/// A fjall snapshot.
pub struct FjallSnapshot {
    snap: ::fjall::Snapshot,
    inner: Arc<Inner>,
}

impl FjallSnapshot {
    /// [`Read::get`] in the keyspace `ks` (the space's handle, looked up by the caller).
    fn get_in(&self, ks: &OptimisticTxKeyspace, key: &[u8]) -> Result<Option<Bytes>> {
        let Some(rows) = &self.inner.rows else {
            return Ok(self.snap.get(ks, key).map_err(io)?.map(Bytes::from_fjall));
        };
        let id = ks.inner().id();
        let hash = rows.hash(id, key);
        let seqno = self.snap.seqno();
        if let Some(v) = rows.get(hash, id, key, seqno) {
            return Ok(Some(v));
        }
        // The cached copy when stored (it holds only the value, where fjall's slice may hold
        // its whole block).
        Ok(self.snap.get(ks, key).map_err(io)?.map(|v| {
            rows.fill(hash, id, key, seqno, &v)
                .unwrap_or_else(|| Bytes::from_fjall(v))
        }))
    }
}

impl Read for FjallSnapshot {
    fn get(&self, space: SpaceId, key: &[u8]) -> Result<Option<Bytes>> {
        let ks = self.inner.handle(space)?;
        self.get_in(&ks, key)
    }

    fn get_many(&self, space: SpaceId, keys: &[&[u8]], out: &mut Vec<Option<Bytes>>) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let ks = self.inner.handle(space)?;
        out.reserve(keys.len());
        for key in keys {
            out.push(self.get_in(&ks, key)?);
        }
        Ok(())
    }

    fn get_cached(
        &self,
        space: SpaceId,
        keys: &[&[u8]],
        out: &mut Vec<Option<Bytes>>,
    ) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let ks = self.inner.handle(space)?;
        let Some(rows) = &self.inner.rows else {
            out.resize(out.len() + keys.len(), None);
            return Ok(());
        };
        let id = ks.inner().id();
        let seqno = self.snap.seqno();
        out.extend(
            keys.iter()
                .map(|key| rows.get(rows.hash(id, key), id, key, seqno)),
        );
        Ok(())
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
            last: None,
            touched: Vec::new(),
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
            .keyspace(&space_name(space), || {
                keyspace_options(self.inner.write_buffer_budget)
            })
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
            if let Some(rows) = &self.inner.rows {
                rows.remove_keyspace(ks.inner().id());
            }
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
            cache_bytes: db.inner().cache_size(),
            row_cache_bytes: self.inner.rows.as_ref().map_or(0, RowCache::used_bytes),
            idle_flushes: self.inner.idle_flushes.load(Ordering::Relaxed),
            pinned_bytes: self
                .inner
                .spaces
                .read()
                .map(|m| {
                    m.values()
                        .map(|ks| {
                            let t = &ks.inner().tree;
                            (t.pinned_filter_size() + t.pinned_block_index_size()) as u64
                        })
                        .sum()
                })
                .unwrap_or(0),
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
            // fjall waits only for a memtable it rotated itself: one rotated just before (for
            // idleness or the budget) may still be on its way to a table.
            while ks.inner().tree.sealed_memtable_count() > 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
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
    fn conformance_without_the_row_cache() {
        let dir = tempfile::tempdir().unwrap();
        let opts = FjallOptions {
            row_cache_bytes: 0,
            ..FjallOptions::default()
        };
        let e = FjallEngine::open(dir.path(), &opts).unwrap();
        assert!(e.inner.rows.is_none());
        super::super::memory::tests::conformance_suite(&e);
        assert_eq!(e.stats().row_cache_bytes, 0);
    }

    fn put(e: &FjallEngine, space: SpaceId, key: &[u8], value: Option<&[u8]>) {
        let mut tx = e.begin().unwrap();
        match value {
            Some(v) => tx.put(space, key, v).unwrap(),
            None => tx.delete(space, key).unwrap(),
        }
        tx.commit().unwrap();
    }

    fn get(s: &dyn Snapshot, space: SpaceId, key: &[u8]) -> Option<Vec<u8>> {
        s.get(space, key).unwrap().map(|b| b.to_vec())
    }

    #[test]
    fn row_cache_keeps_snapshot_isolation() {
        let (_d, e) = engine();
        e.open_space(1).unwrap();
        put(&e, 1, b"k", Some(b"v1"));
        let s1 = e.snapshot().unwrap();
        assert_eq!(get(&*s1, 1, b"k").as_deref(), Some(&b"v1"[..])); // miss, fills
        assert!(e.stats().row_cache_bytes > 0);
        assert_eq!(get(&*s1, 1, b"k").as_deref(), Some(&b"v1"[..])); // hit
        put(&e, 1, b"k", Some(b"v2"));
        // The old snapshot still sees the old value (the entry is gone; it may not refill).
        assert_eq!(get(&*s1, 1, b"k").as_deref(), Some(&b"v1"[..]));
        let s2 = e.snapshot().unwrap();
        assert_eq!(get(&*s2, 1, b"k").as_deref(), Some(&b"v2"[..])); // miss, fills
        assert_eq!(get(&*s2, 1, b"k").as_deref(), Some(&b"v2"[..])); // hit
        // The entry of v2 is not valid for the older snapshot.
        assert_eq!(get(&*s1, 1, b"k").as_deref(), Some(&b"v1"[..]));
        // Deletes.
        put(&e, 1, b"k", None);
        assert_eq!(get(&*s2, 1, b"k").as_deref(), Some(&b"v2"[..]));
        assert_eq!(get(&*s1, 1, b"k").as_deref(), Some(&b"v1"[..]));
        let s3 = e.snapshot().unwrap();
        assert_eq!(get(&*s3, 1, b"k"), None);
        assert_eq!(get(&*s3, 1, b"k"), None);
        // A write transaction reads fjall, not the cache, and fills nothing.
        put(&e, 1, b"w", Some(b"x"));
        let before = e.stats().row_cache_bytes;
        let tx = e.begin().unwrap();
        assert_eq!(tx.get(1, b"w").unwrap().as_deref(), Some(&b"x"[..]));
        drop(tx);
        assert_eq!(e.stats().row_cache_bytes, before);
        // A dropped and re-created space starts empty, its old entries unreachable.
        put(&e, 1, b"d", Some(b"old"));
        let s4 = e.snapshot().unwrap();
        assert_eq!(get(&*s4, 1, b"d").as_deref(), Some(&b"old"[..]));
        assert_eq!(get(&*s4, 1, b"d").as_deref(), Some(&b"old"[..]));
        drop(s4);
        e.drop_space(1).unwrap();
        e.open_space(1).unwrap();
        let s5 = e.snapshot().unwrap();
        assert_eq!(get(&*s5, 1, b"d"), None);
        put(&e, 1, b"d", Some(b"new"));
        let s6 = e.snapshot().unwrap();
        assert_eq!(get(&*s6, 1, b"d").as_deref(), Some(&b"new"[..]));
        assert_eq!(get(&*s6, 1, b"d").as_deref(), Some(&b"new"[..]));
        assert_eq!(get(&*s5, 1, b"d"), None);
    }

    #[test]
    fn row_cache_reads_are_consistent_under_concurrent_writes() {
        // Each commit bumps the counter `c` to n and writes version n into one of KEYS keys,
        // so in every snapshot the largest version equals the counter. Readers read through
        // the row cache (every key and the counter, twice) while writers commit.
        use std::sync::atomic::AtomicBool;
        const KEYS: u64 = 4;
        let (_d, e) = engine();
        e.open_space(1).unwrap();
        let key = |i: u64| format!("k{i}").into_bytes();
        let version = |b: &[u8]| u64::from_be_bytes(b[..8].try_into().unwrap());
        {
            let mut tx = e.begin().unwrap();
            tx.put(1, b"c", &0u64.to_be_bytes()).unwrap();
            for i in 0..KEYS {
                tx.put(1, &key(i), &0u64.to_be_bytes()).unwrap();
            }
            tx.commit().unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let (e, stop) = (e.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut commits = 0u64;
                    let mut r = w;
                    while !stop.load(Ordering::Relaxed) {
                        let mut tx = e.begin().unwrap();
                        let n = version(&tx.get(1, b"c").unwrap().unwrap()) + 1;
                        r = r
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let mut value = n.to_be_bytes().to_vec();
                        value.extend_from_slice(&[w as u8; 24]);
                        tx.put(1, b"c", &n.to_be_bytes()).unwrap();
                        tx.put(1, &key((r >> 33) % KEYS), &value).unwrap();
                        match tx.commit() {
                            Ok(()) => commits += 1,
                            Err(EngineError::Conflict) => {}
                            Err(err) => panic!("{err}"),
                        }
                    }
                    commits
                })
            })
            .collect();
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (e, stop) = (e.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut checks = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let s = e.snapshot().unwrap();
                        let read = || {
                            let c = version(&s.get(1, b"c").unwrap().unwrap());
                            let vs: Vec<u64> = (0..KEYS)
                                .map(|i| version(&s.get(1, &key(i)).unwrap().unwrap()))
                                .collect();
                            (c, vs)
                        };
                        let (c, vs) = read();
                        assert_eq!(
                            vs.iter().max().copied(),
                            Some(c),
                            "versions {vs:?}, counter {c}"
                        );
                        assert_eq!(read(), (c, vs), "a repeated read differs");
                        checks += 1;
                    }
                    checks
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_secs(3));
        stop.store(true, Ordering::Relaxed);
        let commits: u64 = writers.into_iter().map(|t| t.join().unwrap()).sum();
        let checks: u64 = readers.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(
            commits > 100 && checks > 100,
            "{commits} commits, {checks} checks"
        );
        // Quiet now: a snapshot fills the cache, and the next one hits.
        let s = e.snapshot().unwrap();
        let c = get(&*s, 1, b"c");
        assert!(e.stats().row_cache_bytes > 0);
        assert_eq!(get(&*e.snapshot().unwrap(), 1, b"c"), c);
    }

    #[test]
    fn write_buffers_stay_within_the_budget() {
        // 16 spaces written round-robin, none reaching its own memtable limit: without the
        // budget fjall would keep all 24 MiB in memtables (nothing triggers a flush).
        let dir = tempfile::tempdir().unwrap();
        let budget = 4u64 << 20;
        let opts = FjallOptions {
            write_buffer_bytes: budget,
            ..FjallOptions::default()
        };
        let e = FjallEngine::open(dir.path(), &opts).unwrap();
        for s in 1..=16 {
            e.open_space(s).unwrap();
        }
        let value = vec![7u8; 1000];
        for round in 0..96u32 {
            let mut tx = e.begin().unwrap();
            for s in 1..=16 {
                for i in 0..16u32 {
                    tx.put(s, &(round * 16 + i).to_be_bytes(), &value).unwrap();
                }
            }
            tx.commit().unwrap();
        }
        // Flushes run on fjall's workers; a later commit rotates what is still over.
        let start = std::time::Instant::now();
        for n in 0u32.. {
            let mut tx = e.begin().unwrap();
            tx.put(1, b"tick", &n.to_be_bytes()).unwrap();
            tx.commit().unwrap();
            if e.stats().write_buffer_bytes <= budget {
                break;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "write buffers at {} bytes, budget {budget}",
                e.stats().write_buffer_bytes
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // Everything is still there.
        let snap = e.snapshot().unwrap();
        for s in 1..=16 {
            assert_eq!(
                snap.prefix(s, &[]).unwrap().count(),
                96 * 16 + usize::from(s == 1)
            );
        }
    }

    #[test]
    fn three_flushed_tables_compact_into_one() {
        // Index keys arrive in random order, so every flushed table spans the whole key
        // range and a range read seeks in each. The first flush moves down as it is; the
        // level-0 tables of the next two are compacted with it into one (fjall's default
        // threshold would leave all three).
        let (_d, e) = engine();
        e.open_space(1).unwrap();
        for round in 0..3u32 {
            let mut tx = e.begin().unwrap();
            for i in 0..1000u32 {
                let k = (i * 7919 % 1000).to_be_bytes();
                tx.put(1, &k, &round.to_be_bytes()).unwrap();
            }
            tx.commit().unwrap();
            e.checkpoint().unwrap();
            if round == 0 {
                // The move down runs on a worker: a second table flushed before it would be
                // merged with the first, and the third left alone in level 0.
                let ks = e.handle(1).unwrap();
                wait_until("the first table moved down", || {
                    ks.inner().tree.l0_run_count() == 0
                });
            }
        }
        let ks = e.handle(1).unwrap();
        let tree = &ks.inner().tree;
        let start = std::time::Instant::now();
        while tree.table_count() > 1 {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "{} tables",
                tree.table_count()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // The newer version of every key won.
        let snap = e.snapshot().unwrap();
        let all: Vec<(Vec<u8>, Vec<u8>)> = snap
            .prefix(1, &[])
            .unwrap()
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        assert_eq!(all.len(), 1000);
        assert!(all.iter().all(|(_, v)| v == &2u32.to_be_bytes()));
    }

    fn idle_engine(dir: &Path, period: Option<Duration>, min_bytes: u64) -> FjallEngine {
        let opts = FjallOptions {
            idle_flush: period,
            idle_flush_min_bytes: min_bytes,
            ..FjallOptions::default()
        };
        FjallEngine::open(dir, &opts).unwrap()
    }

    fn everything(r: &dyn Read, space: SpaceId) -> Vec<(Vec<u8>, Vec<u8>)> {
        r.prefix(space, &[])
            .unwrap()
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect()
    }

    /// Waits (up to a minute, for loaded machines) until `done` holds.
    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "timed out: {what}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Bytes in the active memtable of `space`, and tables.
    fn memtable_and_tables(e: &FjallEngine, space: SpaceId) -> (u64, usize) {
        let ks = e.handle(space).unwrap();
        let tree = &ks.inner().tree;
        (tree.active_memtable().size(), tree.table_count())
    }

    #[test]
    fn idle_memtables_are_flushed_and_read_back_from_tables() {
        let dir = tempfile::tempdir().unwrap();
        let period = Duration::from_millis(50);
        let e = idle_engine(dir.path(), Some(period), 64 << 10);
        e.open_space(1).unwrap();
        e.open_space(2).unwrap();
        // Space 1: over the minimum, with overwrites and deletes; space 2: under it.
        for round in 0..3u32 {
            let mut tx = e.begin().unwrap();
            for i in 0..1000u32 {
                let k = (i * 7919 % 1000).to_be_bytes();
                tx.put(1, &k, &[round as u8; 100]).unwrap();
            }
            for i in (0..1000u32).step_by(13) {
                tx.delete(1, &(i + round).to_be_bytes()).unwrap();
            }
            tx.commit().unwrap();
        }
        put(&e, 2, b"small", Some(b"v"));
        let before = everything(&*e.snapshot().unwrap(), 1);
        assert!(before.len() > 900);
        wait_until("space 1 flushed for idleness", || {
            let (mem, tables) = memtable_and_tables(&e, 1);
            let sealed = e.handle(1).unwrap().inner().tree.sealed_memtable_count();
            mem == 0 && tables >= 1 && sealed == 0
        });
        // (A slow machine may have flushed between the transactions too.)
        let flushes = e.stats().idle_flushes;
        assert!((1..=3).contains(&flushes));
        assert_eq!(everything(&*e.snapshot().unwrap(), 1), before);
        // Well past its idle period, the small memtable is still where it was.
        std::thread::sleep(period * 4);
        assert!(memtable_and_tables(&e, 2).0 > 0);
        assert_eq!(memtable_and_tables(&e, 2).1, 0);
        assert_eq!(e.stats().idle_flushes, flushes);
        drop(e);
        // Reopened, everything is there, and space 1's writes were not replayed into its
        // memtable (the journal's batches for it are older than its tables).
        let e = idle_engine(dir.path(), None, 0);
        assert_eq!(everything(&*e.snapshot().unwrap(), 1), before);
        assert_eq!(
            get(&*e.snapshot().unwrap(), 2, b"small").as_deref(),
            Some(&b"v"[..])
        );
        assert_eq!(memtable_and_tables(&e, 1).0, 0);
        assert!(memtable_and_tables(&e, 2).0 > 0);
    }

    #[test]
    fn a_memtable_under_steady_writes_is_not_flushed_for_idleness() {
        let dir = tempfile::tempdir().unwrap();
        let period = Duration::from_millis(50);
        let e = idle_engine(dir.path(), Some(period), 0);
        e.open_space(1).unwrap();
        e.open_space(2).unwrap();
        let memtable_id = |s| e.handle(s).unwrap().inner().tree.active_memtable().id();
        put(&e, 1, b"first", Some(b"v"));
        put(&e, 2, b"idle", Some(b"v"));
        let (id1, id2) = (memtable_id(1), memtable_id(2));
        // Writes into space 1 every millisecond for 20 periods (and until the idle space 2
        // was flushed, so the flusher was at work meanwhile), noting when each began and
        // ended: a rotation for idleness needs a period without a write, so it could only
        // follow two consecutive commits that spanned a period between them (a starved
        // writer on a loaded machine).
        let start = Instant::now();
        let mut commits: Vec<(Instant, Instant)> = Vec::new();
        let mut n = 0u32;
        while start.elapsed() < period * 20 || memtable_id(2) == id2 {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "space 2 not flushed"
            );
            let began = Instant::now();
            put(&e, 1, &n.to_be_bytes(), Some(b"w"));
            commits.push((began, Instant::now()));
            n += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        // Space 2 was flushed once (then empty, never again); any other idle flush was
        // space 1's, and each needs its own pair of commits spanning a period (after a
        // rotation the new memtable is empty until the next write, and an empty one is not
        // flushed).
        let starved = commits
            .windows(2)
            .filter(|w| w[1].1 - w[0].0 >= period)
            .count() as u64;
        let rotations = e.stats().idle_flushes - 1;
        assert!(
            rotations <= starved,
            "a memtable written every millisecond was flushed {rotations} times for idleness \
             ({starved} gaps of a period between its writes)"
        );
        if starved == 0 {
            assert_eq!(memtable_id(1), id1);
            assert_eq!(memtable_and_tables(&e, 1).1, 0);
        }
        assert!(commits.len() >= 20);
        assert_eq!(everything(&*e.snapshot().unwrap(), 1).len(), n as usize + 1);
    }

    #[test]
    fn tables_flushed_for_idleness_are_compacted() {
        // As `three_flushed_tables_compact_into_one`, with the idle flusher doing the flushes.
        let dir = tempfile::tempdir().unwrap();
        let e = idle_engine(dir.path(), Some(Duration::from_millis(50)), 0);
        e.open_space(1).unwrap();
        let tree_counts = || {
            let ks = e.handle(1).unwrap();
            let t = &ks.inner().tree;
            (t.active_memtable().size(), t.sealed_memtable_count())
        };
        for round in 0..3u32 {
            let mut tx = e.begin().unwrap();
            for i in 0..1000u32 {
                tx.put(1, &(i * 7919 % 1000).to_be_bytes(), &round.to_be_bytes())
                    .unwrap();
            }
            tx.commit().unwrap();
            wait_until("the round flushed for idleness", || tree_counts() == (0, 0));
            if round == 0 {
                // (As in `three_flushed_tables_compact_into_one`.)
                let ks = e.handle(1).unwrap();
                wait_until("the first table moved down", || {
                    ks.inner().tree.l0_run_count() == 0
                });
            }
        }
        assert!(e.stats().idle_flushes >= 3);
        wait_until("one table left", || memtable_and_tables(&e, 1).1 == 1);
        let all = everything(&*e.snapshot().unwrap(), 1);
        assert_eq!(all.len(), 1000);
        assert!(all.iter().all(|(_, v)| v == &2u32.to_be_bytes()));
    }

    #[test]
    fn the_idle_flusher_ends_with_the_engine() {
        let dir = tempfile::tempdir().unwrap();
        // A period far longer than the test: dropping must not wait for the next pass.
        let period = Duration::from_secs(120);
        let e = idle_engine(dir.path(), Some(period), 0);
        e.open_space(1).unwrap();
        put(&e, 1, b"k", Some(b"v"));
        let clone = e.clone();
        // A reader keeps the engine's state alive past its handles.
        let reader = e.snapshot().unwrap();
        let inner = e.inner.clone();
        assert_eq!(Arc::weak_count(&inner), 1, "the flusher's reference");
        drop(e);
        assert_eq!(Arc::weak_count(&inner), 1, "a handle is left");
        let start = Instant::now();
        drop(clone);
        // (The flusher wakes each quarter period on its own.)
        assert!(start.elapsed() < period / 8);
        // The thread has ended (its reference with it), though the state lives on.
        assert_eq!(Arc::weak_count(&inner), 0);
        assert_eq!(get(&*reader, 1, b"k").as_deref(), Some(&b"v"[..]));
        drop(reader);
        drop(inner);
        // The database is closed: it reopens at once.
        let e = idle_engine(dir.path(), Some(Duration::from_millis(10)), 0);
        assert_eq!(
            get(&*e.snapshot().unwrap(), 1, b"k").as_deref(),
            Some(&b"v"[..])
        );
        drop(e);
        let e = idle_engine(dir.path(), None, 0);
        assert_eq!(
            get(&*e.snapshot().unwrap(), 1, b"k").as_deref(),
            Some(&b"v"[..])
        );
    }

    #[test]
    fn budget_follows_the_cache() {
        assert_eq!(write_buffer_budget(256 << 20), 64 << 20);
        assert_eq!(write_buffer_budget(8 << 20), 16 << 20);
        assert_eq!(write_buffer_budget(16 << 30), 256 << 20);
        assert_eq!(FjallOptions::default().write_buffer_bytes, 64 << 20);
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

    /// A small deterministic generator (xorshift64*) for the range tests.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    type Reference = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

    /// Key `n` of the range tests' universe: short keys (held inline by fjall's slices) and
    /// longer ones sharing their prefix (held on the heap, prefix-compressed in tables).
    fn universe_key(n: u64) -> Vec<u8> {
        let mut k = format!("k{n:04}").into_bytes();
        if !n.is_multiple_of(3) {
            k.push(b'-');
            k.extend(std::iter::repeat_n(b'x', (n % 40) as usize));
        }
        k
    }

    /// A bound for a range read: on a key of the universe, or between two of them.
    fn random_bound(rng: &mut Rng) -> Bound<Vec<u8>> {
        let mut key = universe_key(rng.below(420));
        if rng.below(4) == 0 {
            key.push(b'0');
        }
        match rng.below(5) {
            0 => Bound::Unbounded,
            1 | 2 => Bound::Included(key),
            _ => Bound::Excluded(key),
        }
    }

    fn within(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>, k: &[u8]) -> bool {
        let above = match lo {
            Bound::Included(l) => k >= l.as_slice(),
            Bound::Excluded(l) => k > l.as_slice(),
            Bound::Unbounded => true,
        };
        let below = match hi {
            Bound::Included(h) => k <= h.as_slice(),
            Bound::Excluded(h) => k < h.as_slice(),
            Bound::Unbounded => true,
        };
        above && below
    }

    fn expected(
        reference: &Reference,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        reference
            .iter()
            .filter(|(k, _)| within(lo, hi, k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn as_slices(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
        b.as_ref().map(Vec::as_slice)
    }

    /// Checks `reads` against `reference` over random ranges, both directions, read to the
    /// end and cut short after a few pairs.
    fn check_ranges(reads: &dyn Read, space: SpaceId, reference: &Reference, rng: &mut Rng) {
        for _ in 0..60 {
            let (mut lo, mut hi) = (random_bound(rng), random_bound(rng));
            if let (
                Bound::Included(l) | Bound::Excluded(l),
                Bound::Included(h) | Bound::Excluded(h),
            ) = (&lo, &hi)
                && l > h
            {
                std::mem::swap(&mut lo, &mut hi);
                lo = match lo {
                    Bound::Included(k) | Bound::Excluded(k) => Bound::Included(k),
                    Bound::Unbounded => Bound::Unbounded,
                };
            }
            let want = expected(reference, &lo, &hi);
            for reverse in [false, true] {
                let mut want = want.clone();
                if reverse {
                    want.reverse();
                }
                let read = |limit: usize| -> Vec<(Vec<u8>, Vec<u8>)> {
                    reads
                        .range(space, as_slices(&lo), as_slices(&hi), reverse)
                        .unwrap()
                        .take(limit)
                        .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
                        .collect()
                };
                assert_eq!(read(usize::MAX), want, "{lo:?}..{hi:?} reverse {reverse}");
                for limit in [1, 2, 5] {
                    let n = limit.min(want.len());
                    assert_eq!(
                        read(limit),
                        want[..n],
                        "{lo:?}..{hi:?} reverse {reverse} limit {limit}"
                    );
                }
            }
        }
    }

    /// Reads `(lo, hi)` from a fjall snapshot taking pairs from either end at random (the
    /// engine's reads go one way; fjall's iterators serve both ends at once).
    fn check_both_ends(e: &FjallEngine, space: SpaceId, reference: &Reference, rng: &mut Rng) {
        let ks = e.handle(space).unwrap();
        let snap = e.inner.db.read_tx();
        for _ in 0..30 {
            let (lo, hi) = (random_bound(rng), random_bound(rng));
            let want = expected(reference, &lo, &hi);
            if let (
                Bound::Included(l) | Bound::Excluded(l),
                Bound::Included(h) | Bound::Excluded(h),
            ) = (&lo, &hi)
                && l > h
            {
                continue;
            }
            let mut it = snap.range::<&[u8], _>(&ks, (as_slices(&lo), as_slices(&hi)));
            let (mut front, mut back) = (Vec::new(), Vec::new());
            loop {
                let from_back = rng.below(2) == 0;
                let g = if from_back { it.next_back() } else { it.next() };
                let Some(g) = g else { break };
                let (k, v) = g.into_inner().unwrap();
                let kv = (k.to_vec(), v.to_vec());
                if from_back {
                    back.push(kv);
                } else {
                    front.push(kv);
                }
            }
            back.reverse();
            front.extend(back);
            assert_eq!(front, want, "{lo:?}..{hi:?} from both ends");
        }
    }

    #[test]
    fn ranges_match_a_reference_over_memtables_tables_and_tombstones() {
        let (_d, e) = engine();
        e.open_space(1).unwrap();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut reference = Reference::new();
        // A snapshot taken mid-way, with what it must keep seeing.
        let mut held: Option<(Box<dyn Snapshot>, Reference)> = None;
        for round in 0..8u32 {
            let mut tx = e.begin().unwrap();
            for op in 0..150u32 {
                let k = universe_key(rng.below(400));
                if rng.below(3) == 0 {
                    tx.delete(1, &k).unwrap();
                    reference.remove(&k);
                } else {
                    let v = format!("r{round}o{op}").into_bytes();
                    tx.put(1, &k, &v).unwrap();
                    reference.insert(k, v);
                }
            }
            tx.commit().unwrap();
            match round % 4 {
                // Flushed to a table, waiting for it.
                0 | 1 => {
                    e.checkpoint().unwrap();
                }
                // Sealed (flushed in the background, maybe not yet when read).
                2 => {
                    e.handle(1).unwrap().inner().rotate_memtable().unwrap();
                }
                // Left in the active memtable.
                _ => {}
            }
            if round == 2 {
                held = Some((e.snapshot().unwrap(), reference.clone()));
            }
            let snap = e.snapshot().unwrap();
            check_ranges(&*snap, 1, &reference, &mut rng);
            check_both_ends(&e, 1, &reference, &mut rng);
            if let Some((old, old_reference)) = &held {
                check_ranges(&**old, 1, old_reference, &mut rng);
            }
        }
        // A write transaction reads its own writes and deletes over everything else.
        let mut tx = e.begin().unwrap();
        let mut mine = reference.clone();
        for op in 0..80u32 {
            let k = universe_key(rng.below(420));
            if rng.below(2) == 0 {
                tx.delete(1, &k).unwrap();
                mine.remove(&k);
            } else {
                let v = format!("tx{op}").into_bytes();
                tx.put(1, &k, &v).unwrap();
                mine.insert(k, v);
            }
        }
        check_ranges(&*tx, 1, &mine, &mut rng);
        drop(tx);
        check_ranges(&*e.snapshot().unwrap(), 1, &reference, &mut rng);
    }

    #[test]
    fn a_snapshot_sees_its_versions_across_a_flush() {
        let (_d, e) = engine();
        e.open_space(1).unwrap();
        let put_all = |tag: &str, keys: std::ops::Range<u64>| {
            let mut tx = e.begin().unwrap();
            for n in keys {
                tx.put(1, &universe_key(n), tag.as_bytes()).unwrap();
            }
            tx.commit().unwrap();
        };
        put_all("old", 0..200);
        let snap = e.snapshot().unwrap();
        // Newer versions of every key, some deleted, all flushed with the old versions the
        // snapshot holds.
        put_all("new", 0..200);
        let mut tx = e.begin().unwrap();
        for n in (0..200).step_by(7) {
            tx.delete(1, &universe_key(n)).unwrap();
        }
        tx.commit().unwrap();
        e.checkpoint().unwrap();
        put_all("newest", 50..60);
        let read = |s: &dyn Read, reverse: bool| -> Vec<(Vec<u8>, Vec<u8>)> {
            s.range(
                1,
                Bound::Included(&universe_key(10)),
                Bound::Excluded(&universe_key(120)),
                reverse,
            )
            .unwrap()
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect()
        };
        let mut old: Vec<(Vec<u8>, Vec<u8>)> = (10..120)
            .map(|n| (universe_key(n), b"old".to_vec()))
            .collect();
        old.sort();
        assert_eq!(read(&*snap, false), old);
        old.reverse();
        assert_eq!(read(&*snap, true), old);
        let now = read(&*e.snapshot().unwrap(), false);
        let mut want: Vec<(Vec<u8>, Vec<u8>)> = (10..120)
            .filter(|n| n % 7 != 0 || (50..60).contains(n))
            .map(|n| {
                let v: &[u8] = if (50..60).contains(&n) {
                    b"newest"
                } else {
                    b"new"
                };
                (universe_key(n), v.to_vec())
            })
            .collect();
        want.sort();
        assert_eq!(now, want);
    }
}
