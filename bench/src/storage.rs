//! Storage benchmarks: `insert` and `_id` point reads through the Rust driver, each next to
//! raw fjall doing the same key-value work in the same process run.
//!
//! - insert: [`DOCS`] of `cairn-bench compare`'s documents (~300 bytes, ten fields) into a
//!   collection with its two secondary indexes (`cat`, `score`), `insertMany` in batches of
//!   [`BATCH`]. The raw baseline is the exact key-value work of those inserts: the storage
//!   layer runs the same inserts once over a recording engine ([`Recorder`]), which captures
//!   every transaction's point reads and puts (documents, index entries, change-log chunks,
//!   statistics), and raw fjall then replays them — the same reads, the same bytes under the
//!   same keys in the same keyspaces, one optimistic transaction per recorded one, with the
//!   server's engine options and the same journal durability (`PersistMode::Buffer`). Both
//!   sides report wall time and CPU per document (the server's from `/proc`, raw fjall's
//!   from this process, background flushes and compactions included on both).
//! - point reads: `find({_id})` of random existing ids with 1 and 16 concurrent clients,
//!   next to raw fjall reading the same document keys (as stored) with 1 and 16 threads.
//! - `storemem` ([`run_storemem`]): the storage layer's memory while loading, without a
//!   server, for heap profilers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Mutex;

use bson::{Document, RawDocumentBuf, doc};
use cairn_storage::engine::fjall::FjallOptions;
use cairn_storage::engine::memory::MemoryEngine;
use cairn_storage::engine::{
    Bytes, Engine, KvIter, Read, Result as EngineResult, Snapshot, SpaceId, Tx,
};
use cairn_storage::{Durability, StorageError, Store, StoreOptions};
use fjall::{KeyspaceCreateOptions, OptimisticTxDatabase, Readable};

use crate::compare;
use crate::harness::{self, Measured, Opts, Server};

/// Documents in the insert benchmark.
pub const DOCS: usize = 100_000;
/// Documents per insertMany batch / raw transaction.
pub const BATCH: usize = 1_000;

/// The i-th benchmark document: `_id` plus 9 fields of mixed types.
pub fn document(i: usize) -> Document {
    doc! {
        "_id": i as i64,
        "name": format!("user{i:08}"),
        "age": (i % 90) as i32,
        "score": i as f64 * 0.37,
        "active": i.is_multiple_of(3),
        "email": format!("user{i}@example.com"),
        "city": (["Lisbon", "Oslo", "Lima", "Pune", "Kyoto"][i % 5]),
        "tags": ["a", "b", "c"],
        "created": bson::DateTime::from_millis(1_700_000_000_000 + i as i64),
        "address": {"street": format!("{i} Main St"), "zip": format!("{:05}", i % 100_000)},
    }
}

/// One recorded storage transaction: its point reads and its puts, in order.
#[derive(Default)]
struct Recorded {
    gets: Vec<(SpaceId, Vec<u8>)>,
    puts: Vec<(SpaceId, Vec<u8>, Vec<u8>)>,
}

/// An engine that forwards to another and records every committed transaction's point reads
/// and puts (a transaction that also deletes or scans is recorded only for what it puts and
/// reads by key — inserts into a collection without unique secondary indexes do neither).
struct Recorder {
    inner: Arc<dyn Engine>,
    log: Arc<Mutex<Vec<Recorded>>>,
}

struct RecTx {
    inner: Box<dyn Tx>,
    rec: Mutex<Recorded>,
    log: Arc<Mutex<Vec<Recorded>>>,
}

impl Read for RecTx {
    fn get(&self, space: SpaceId, key: &[u8]) -> EngineResult<Option<Bytes>> {
        self.rec
            .lock()
            .expect("rec")
            .gets
            .push((space, key.to_vec()));
        self.inner.get(space, key)
    }

    fn range<'a>(
        &'a self,
        space: SpaceId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
    ) -> EngineResult<KvIter<'a>> {
        self.inner.range(space, start, end, reverse)
    }
}

impl Tx for RecTx {
    fn put(&mut self, space: SpaceId, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.rec
            .get_mut()
            .expect("rec")
            .puts
            .push((space, key.to_vec(), value.to_vec()));
        self.inner.put(space, key, value)
    }

    fn delete(&mut self, space: SpaceId, key: &[u8]) -> EngineResult<()> {
        self.inner.delete(space, key)
    }

    fn commit(self: Box<Self>) -> EngineResult<()> {
        let RecTx { inner, rec, log } = *self;
        inner.commit()?;
        log.lock()
            .expect("log")
            .push(rec.into_inner().expect("rec"));
        Ok(())
    }

    fn writes(&self) -> usize {
        self.inner.writes()
    }

    fn reads(&self) -> usize {
        self.inner.reads()
    }
}

impl Engine for Recorder {
    fn begin(&self) -> EngineResult<Box<dyn Tx>> {
        Ok(Box::new(RecTx {
            inner: self.inner.begin()?,
            rec: Mutex::new(Recorded::default()),
            log: self.log.clone(),
        }))
    }

    fn snapshot(&self) -> EngineResult<Box<dyn Snapshot>> {
        self.inner.snapshot()
    }

    fn open_space(&self, space: SpaceId) -> EngineResult<()> {
        self.inner.open_space(space)
    }

    fn drop_space(&self, space: SpaceId) -> EngineResult<()> {
        self.inner.drop_space(space)
    }

    fn spaces(&self) -> Vec<SpaceId> {
        self.inner.spaces()
    }

    fn space_disk_size(&self, space: SpaceId) -> u64 {
        self.inner.space_disk_size(space)
    }

    fn sync(&self) -> EngineResult<()> {
        self.inner.sync()
    }

    fn checkpoint(&self) -> EngineResult<usize> {
        self.inner.checkpoint()
    }

    fn max_key_len(&self) -> usize {
        self.inner.max_key_len()
    }
}

/// A store on `engine` at the default pack threshold with `compare`'s `bench.docs`
/// collection and its `cat` and `score` indexes, as the inserts are measured against.
fn bench_store(engine: Arc<dyn Engine>) -> (Store, Arc<cairn_storage::catalog::CollectionMeta>) {
    let store = Store::open(engine, StoreOptions { sync_always: false }).expect("store");
    store.set_pack_threshold(cairn_storage::doc::DEFAULT_PACK_THRESHOLD);
    store
        .create_indexes(
            "bench",
            "docs",
            &[
                bson::rawdoc! {"key": {"cat": 1}, "name": "cat_1"},
                bson::rawdoc! {"key": {"score": 1}, "name": "score_1"},
            ],
        )
        .expect("indexes");
    let meta = store
        .collection("bench", "docs")
        .expect("collection exists");
    (store, meta)
}

/// The storage transactions of inserting [`DOCS`] of `compare`'s documents in batches of
/// [`BATCH`] into a collection with the `cat` and `score` indexes, as the server does
/// (default pack threshold, one storage transaction per batch).
fn record_inserts() -> (Vec<Recorded>, SpaceId) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let engine = Arc::new(Recorder {
        inner: Arc::new(MemoryEngine::new()),
        log: log.clone(),
    });
    let (store, meta) = bench_store(engine);
    log.lock().expect("log").clear();
    let docs: Vec<RawDocumentBuf> = (0..DOCS)
        .map(|i| RawDocumentBuf::try_from(&compare::document(i as i64)).expect("bson"))
        .collect();
    for chunk in docs.chunks(BATCH) {
        store
            .write(Durability::Buffered, |tx| -> Result<(), StorageError> {
                for d in chunk {
                    tx.insert(&meta, d)?;
                }
                Ok(())
            })
            .expect("insert");
    }
    (std::mem::take(&mut *log.lock().expect("log")), meta.id)
}

/// A raw fjall database opened as the server opens its engine (cache and journal sizes).
struct RawDb {
    _dir: tempfile::TempDir,
    db: OptimisticTxDatabase,
    spaces: HashMap<SpaceId, fjall::OptimisticTxKeyspace>,
}

impl RawDb {
    fn open() -> RawDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let o = FjallOptions::default();
        let db = OptimisticTxDatabase::builder(dir.path())
            .cache_size(o.cache_bytes)
            .max_journaling_size(o.journal_bytes)
            .open()
            .expect("fjall");
        RawDb {
            _dir: dir,
            db,
            spaces: HashMap::new(),
        }
    }

    fn space(&mut self, space: SpaceId) -> fjall::OptimisticTxKeyspace {
        let db = &self.db;
        self.spaces
            .entry(space)
            .or_insert_with(|| {
                db.keyspace(&format!("s{space}"), KeyspaceCreateOptions::default)
                    .expect("keyspace")
            })
            .clone()
    }
}

/// CPU seconds this process has used (all threads, fjall's workers included).
fn own_cpu() -> f64 {
    crate::pg::cpu_seconds(std::process::id())
}

/// Replays the recorded transactions on raw fjall; returns the wall time and CPU seconds.
fn raw_replay(raw: &mut RawDb, txs: &[Recorded]) -> (Measured, f64) {
    for t in txs {
        for (s, _, _) in &t.puts {
            raw.space(*s);
        }
        for (s, _) in &t.gets {
            raw.space(*s);
        }
    }
    let c0 = own_cpu();
    let started = Instant::now();
    for t in txs {
        let mut tx = raw.db.write_tx().expect("tx");
        for (s, k) in &t.gets {
            std::hint::black_box(tx.get(&raw.spaces[s], k).expect("get"));
        }
        for (s, k, v) in &t.puts {
            tx.insert(&raw.spaces[s], k.as_slice(), v.as_slice());
        }
        tx.commit().expect("commit").expect("no conflict");
    }
    let m = Measured {
        ops: DOCS as u64,
        elapsed: started.elapsed(),
        p50: Duration::ZERO,
        p99: Duration::ZERO,
    };
    (m, own_cpu() - c0)
}

fn raw_point_reads(
    db: &OptimisticTxDatabase,
    ks: &fjall::OptimisticTxKeyspace,
    threads: usize,
    d: Duration,
) -> Measured {
    let keys: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..DOCS)
            .map(|i| cairn_storage::store::id_key(bson::RawBsonRef::Int64(i as i64)).expect("key"))
            .collect(),
    );
    let ops = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut lat_all = Vec::new();
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for t in 0..threads {
            let (keys, ops, db, ks) = (keys.clone(), ops.clone(), db.clone(), ks.clone());
            handles.push(s.spawn(move || {
                let mut x = 0x9E37_79B9_u64 ^ t as u64;
                let mut lat = Vec::new();
                let start = Instant::now();
                while start.elapsed() < d {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let key = &keys[(x % DOCS as u64) as usize];
                    let t0 = Instant::now();
                    let snap = db.read_tx();
                    // read every node's key and value, as a document read does
                    let mut n = 0;
                    for g in snap.prefix(&ks, key) {
                        let (k, v) = g.into_inner().expect("kv");
                        n += usize::from(!k.is_empty() && !v.is_empty());
                    }
                    assert!(n >= 1);
                    lat.push(t0.elapsed());
                    ops.fetch_add(1, Ordering::Relaxed);
                }
                lat
            }));
        }
        for h in handles {
            lat_all.extend(h.join().expect("thread"));
        }
    });
    let mut m = harness::summarize(lat_all, started.elapsed());
    m.ops = ops.load(Ordering::Relaxed);
    m
}

async fn cairn_insert(client: &mongodb::Client, pid: u32) -> (Measured, f64) {
    let coll = client.database("bench").collection::<Document>("docs");
    for keys in [doc! {"cat": 1}, doc! {"score": 1}] {
        coll.create_index(mongodb::IndexModel::builder().keys(keys).build())
            .await
            .expect("index");
    }
    let batches: Vec<Vec<Document>> = (0..DOCS / BATCH)
        .map(|b| {
            (b * BATCH..(b + 1) * BATCH)
                .map(|i| compare::document(i as i64))
                .collect()
        })
        .collect();
    let c0 = crate::pg::cpu_seconds(pid);
    let started = Instant::now();
    for docs in batches {
        coll.insert_many(docs).await.expect("insert");
    }
    let m = Measured {
        ops: DOCS as u64,
        elapsed: started.elapsed(),
        p50: Duration::ZERO,
        p99: Duration::ZERO,
    };
    (m, crate::pg::cpu_seconds(pid) - c0)
}

async fn cairn_point_reads(port: u16, clients: usize, d: Duration) -> Measured {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..clients {
        tasks.push(tokio::spawn(async move {
            let client = mongodb::Client::with_uri_str(format!("mongodb://127.0.0.1:{port}/"))
                .await
                .expect("client");
            let coll = client.database("bench").collection::<Document>("docs");
            let mut x = 0x2545_F491_u64 ^ t as u64;
            let mut lat = Vec::new();
            let start = Instant::now();
            while start.elapsed() < d {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let id = (x % DOCS as u64) as i64;
                let t0 = Instant::now();
                let found = coll.find_one(doc! {"_id": id}).await.expect("find");
                assert!(found.is_some());
                lat.push(t0.elapsed());
            }
            lat
        }));
    }
    let mut lat_all = Vec::new();
    for t in tasks {
        lat_all.extend(t.await.expect("task"));
    }
    harness::summarize(lat_all, started.elapsed())
}

/// Raw OP_MSG round trips (no driver): `ping`, then `find` by `_id`, on one connection —
/// separates the server's own cost from the driver's.
async fn raw_round_trips(port: u16, d: Duration) -> (Measured, Measured) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let mut buf = Vec::new();
    let mut measure = async |msgs: &dyn Fn(u64) -> Vec<u8>, s: &mut tokio::net::TcpStream| {
        let mut lat = Vec::new();
        let start = Instant::now();
        let mut i = 0u64;
        while start.elapsed() < d {
            let m = msgs(i);
            i += 1;
            let t0 = Instant::now();
            s.write_all(&m).await.expect("write");
            let mut head = [0u8; 4];
            s.read_exact(&mut head).await.expect("read");
            buf.resize(i32::from_le_bytes(head) as usize - 4, 0);
            s.read_exact(&mut buf).await.expect("read");
            lat.push(t0.elapsed());
        }
        harness::summarize(lat, start.elapsed())
    };
    let ping =
        cairn_wire::op_msg::encode(1, 0, 0, &bson::rawdoc! {"ping": 1, "$db": "admin"}, false);
    let p = measure(&|_| ping.clone(), &mut s).await;
    let f = measure(
        &|i| {
            let id = (i.wrapping_mul(0x9E37_79B9) % DOCS as u64) as i64;
            cairn_wire::op_msg::encode(
                1,
                0,
                0,
                &bson::rawdoc! {"find": "docs", "filter": {"_id": id}, "limit": 1, "singleBatch": true, "$db": "bench"},
                false,
            )
        },
        &mut s,
    )
    .await;
    (p, f)
}

/// Runs the benchmark.
pub async fn run(o: &Opts) {
    let d = o.duration();
    let (txs, docs_space) = tokio::task::block_in_place(record_inserts);
    let puts: usize = txs.iter().map(|t| t.puts.len()).sum();
    let bytes: usize = txs
        .iter()
        .flat_map(|t| &t.puts)
        .map(|(_, k, v)| k.len() + v.len())
        .sum();
    println!(
        "storage: {DOCS} compare documents with 2 secondary indexes, batches of {BATCH} ({:.1} key-value pairs, {:.0} bytes written per document); point reads {} s per phase",
        puts as f64 / DOCS as f64,
        bytes as f64 / DOCS as f64,
        o.seconds
    );
    let mut raw = RawDb::open();
    let (raw_ins, raw_cpu) = tokio::task::block_in_place(|| raw_replay(&mut raw, &txs));
    drop(txs);
    let server = Server::start();
    let client = mongodb::Client::with_uri_str(format!("mongodb://127.0.0.1:{}/", server.port))
        .await
        .expect("client");
    let (cairn_ins, cairn_cpu) = cairn_insert(&client, server.pid()).await;
    harness::row("raw fjall, same key-value work (docs)", &raw_ins);
    harness::row("cairn insertMany (docs)", &cairn_ins);
    let per_doc = |cpu: f64| cpu / DOCS as f64 * 1e6;
    println!(
        "CPU per document: raw fjall {:.1} µs, cairn server {:.1} µs ({:.2}x); throughput raw / cairn {:.2}x",
        per_doc(raw_cpu),
        per_doc(cairn_cpu),
        cairn_cpu / raw_cpu,
        raw_ins.rate() / cairn_ins.rate()
    );
    let (ping, find) = raw_round_trips(server.port, d).await;
    harness::row("cairn ping (raw OP_MSG)", &ping);
    harness::row("cairn find by _id (raw OP_MSG)", &find);
    let ks = raw.space(docs_space);
    for clients in [1, o.clients] {
        let r = tokio::task::block_in_place(|| raw_point_reads(&raw.db, &ks, clients, d));
        let cairn = cairn_point_reads(server.port, clients, d).await;
        harness::row(&format!("raw fjall point read, {clients} thr"), &r);
        harness::row(&format!("cairn find by _id, {clients} clients"), &cairn);
        println!(
            "ratio raw fjall / cairn point reads ({clients}): {:.2}x",
            r.rate() / cairn.rate()
        );
    }
}

/// Resident set of this process in kB (`/proc/self/statm`, 4 KiB pages).
fn own_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4)
}

/// `cairn-bench storemem [DOCS] [CACHE_MB]`: inserts `DOCS` (default 1,000,000) of
/// `compare`'s documents straight into a store on fjall — no server, the system allocator,
/// so a heap profiler (`heaptrack`) sees every allocation — in batches of [`BATCH`] with the
/// `cat` and `score` indexes, with a block cache of `CACHE_MB` (default 256), in a temporary
/// directory; prints the resident set next to the engine's own memory figures every 100,000
/// documents, then while compactions run after the load (at most a minute).
pub fn run_storemem(args: &[String]) {
    use cairn_storage::engine::fjall::FjallEngine;
    let docs: usize = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let cache_mb: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(256);
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Arc::new(
        FjallEngine::open(
            dir.path(),
            &FjallOptions::with_cache(cache_mb << 20, 64 << 20),
        )
        .expect("fjall"),
    );
    let (store, meta) = bench_store(engine.clone());
    let report = |label: &str| {
        let s = engine.stats();
        println!(
            "{label}: rss {} MB, write buffers {} MB, block cache {} MB, pinned {} MB, disk {} MB, compactions running {}",
            own_rss_kb() / 1024,
            s.write_buffer_bytes >> 20,
            s.cache_bytes >> 20,
            s.pinned_bytes >> 20,
            s.disk_bytes >> 20,
            s.active_compactions
        );
    };
    let started = Instant::now();
    let mut batch = Vec::with_capacity(BATCH);
    for start in (0..docs).step_by(BATCH) {
        batch.clear();
        batch.extend(
            (start..(start + BATCH).min(docs))
                .map(|i| RawDocumentBuf::try_from(&compare::document(i as i64)).expect("bson")),
        );
        store
            .write(Durability::Buffered, |tx| -> Result<(), StorageError> {
                for d in &batch {
                    tx.insert(&meta, d)?;
                }
                Ok(())
            })
            .expect("insert");
        let done = (start + BATCH).min(docs);
        if done.is_multiple_of(100_000) || done == docs {
            report(&format!(
                "{done} docs, {:.0} s",
                started.elapsed().as_secs_f64()
            ));
        }
    }
    for i in 1..=12 {
        std::thread::sleep(Duration::from_secs(5));
        report(&format!("after the load, {} s", i * 5));
        if engine.stats().active_compactions == 0 {
            break;
        }
    }
}
