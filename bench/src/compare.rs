//! Everyday workloads side by side with PostgreSQL 15 on a JSONB column.
//!
//! Both servers start fresh in this run: a release `cairn` (default durability: the journal
//! reaches the OS, no fsync, like mongod's `j: false`) and a throwaway PostgreSQL cluster
//! ([`crate::pg`], its defaults: every commit fsynced). Both are loaded with the same
//! [`DOCS`] documents of ~300 bytes and ten fields, a nested object and a 5-string array
//! (see [`document`]); PostgreSQL holds them as `docs(id bigint primary key, doc jsonb)` with
//! expression indexes on the indexed fields and `ANALYZE` run, Cairn with the same indexes.
//! After the load both are checkpointed the same way: PostgreSQL's `CHECKPOINT` writes its
//! dirty buffers to the data files, Cairn's `fsync` command flushes its write buffers
//! (memtables) into tables. The CPU each server spends from the end of the timed batches
//! until it is idle again — the `$addToSet` collection's 10,000 documents, PostgreSQL's
//! `ANALYZE`, the checkpoint and whatever flushes and compactions follow — is added to the
//! `insertMany` row's server CPU.
//! The clients are the official Rust driver (documents decoded into `bson::Document`) and
//! `tokio-postgres` with prepared statements (rows decoded into `serde_json::Value`), one
//! connection per client, connected and warmed before timing.
//!
//! Each workload runs at each of its client counts for `--seconds` per target, split in two
//! halves run in the order A B B A so that both share the machine's drift. Printed per row:
//! operations per second, p50/p99 latency, server CPU per operation (user + system from
//! `/proc/<pid>/stat` of the server and its children — PostgreSQL forks a backend per
//! connection) and client CPU per operation (this process), then Cairn's throughput over
//! PostgreSQL's and PostgreSQL's server CPU over Cairn's (both > 1 when Cairn is ahead).
//! After each row both servers are left to finish what it started: 1.5 s, then until half a
//! second passes with under 5 % of a core used. The CPU each used meanwhile is added to that
//! row's server CPU, so background work a workload leaves behind (Cairn's memtable flushes —
//! idle write buffers are flushed after 1 s — and compactions; PostgreSQL's background and
//! WAL writers) is charged to it rather than to the row after it.
//!
//! Workloads (the table of issue "beat PostgreSQL JSONB"):
//! - `insertMany` of 1,000 documents (the load itself, batches alternating between targets;
//!   per document) — PostgreSQL: `INSERT … SELECT * FROM unnest($1::bigint[], $2::jsonb[])`;
//! - `insert_one` of a new document, 1 and 8 clients, into a collection (table) of its own
//!   with the same two indexes, so that every read below sees the same documents on both
//!   targets whatever number each inserted;
//! - `find_one` by `_id`, 1 and 16 clients — `SELECT doc FROM docs WHERE id = $1`;
//! - indexed equality `{cat: v}` limit 10 (100 documents per value), 16 clients;
//! - indexed range + sort + limit 20: `{score: {$gte: x}}` sorted by `score`, 16 clients;
//! - `$inc` of `age` by `_id`, 8 clients — `jsonb_set(doc, '{age}', …)`;
//! - `$addToSet` of a string into a 50-element array (10,000 documents of their own; about
//!   half the values are already present), 8 clients — `jsonb_set(… || …)` unless
//!   `doc->'items' ? $2`;
//! - `$match` (indexed `cat`) + `$group` by `city` with `$sum`/`$avg`, 8 clients —
//!   `GROUP BY doc->>'city'`;
//! - `ping` / `SELECT 1`, 1 client.
//!
//! `cargo build --release -p cairn -p cairn-bench && ./target/release/cairn-bench compare
//! [--seconds S] [--docs N]` (PostgreSQL 15 is installed with apt when missing; the cluster
//! lives in a temporary directory and is stopped at the end). `CAIRN_BENCH_ONLY=<text>` runs
//! only the workloads whose name contains the text (e.g. to profile one with `perf`).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};

use crate::harness::{Opts, Server};
use crate::pg::{Postgres, cpu_seconds};

/// Documents loaded into both targets (default).
pub const DOCS: usize = 100_000;
const BATCH: usize = 1_000;
/// Documents of the `$addToSet` collection.
const SETS: i64 = 10_000;
/// Distinct values of the indexed `cat` field (so 100 documents each at 100k).
const CATS: usize = 1_000;

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

const CITIES: [&str; 8] = [
    "Lisbon", "Oslo", "Lima", "Pune", "Kyoto", "Accra", "Quito", "Hanoi",
];
const WORDS: [&str; 16] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa",
];

/// The i-th document: ten fields (`_id`, strings, numbers, a bool, a date, a 5-string array
/// and a nested object), ~300 bytes of BSON.
pub fn document(i: i64) -> Document {
    let h = splitmix(i as u64);
    let tags: Vec<&str> = (0..5)
        .map(|k| WORDS[((h >> (k * 4)) % 16) as usize])
        .collect();
    doc! {
        "_id": i,
        "name": format!("user-{i:08}"),
        "email": format!("user{i}@example.com"),
        "age": (h % 90) as i32,
        "score": (h >> 8) as f64 / (1u64 << 56) as f64 * 1000.0,
        "active": h & 1 == 1,
        "cat": format!("cat-{:04}", i as usize % CATS),
        "created": bson::DateTime::from_millis(1_700_000_000_000 + i * 1000),
        "tags": tags,
        "address": {
            "street": format!("{} Harbour Road", h % 10_000),
            "city": CITIES[(h >> 20) as usize % CITIES.len()],
            "zip": format!("{:05}", h % 100_000),
        },
    }
}

/// A document of the `$addToSet` collection: 50 distinct strings out of 100.
fn set_document(i: i64) -> Document {
    let items: Vec<String> = (0..50).map(|k| format!("v{}", (i + k * 2) % 100)).collect();
    doc! {"_id": i, "items": items}
}

/// A document as JSON (only the types [`document`] and [`set_document`] use; dates as
/// milliseconds).
fn json(d: &Document) -> serde_json::Value {
    fn value(v: &Bson) -> serde_json::Value {
        match v {
            Bson::Int32(i) => (*i).into(),
            Bson::Int64(i) => (*i).into(),
            Bson::Double(x) => (*x).into(),
            Bson::Boolean(b) => (*b).into(),
            Bson::String(s) => s.as_str().into(),
            Bson::DateTime(t) => t.timestamp_millis().into(),
            Bson::Array(a) => a.iter().map(value).collect(),
            Bson::Document(d) => json(d),
            other => panic!("unexpected value in a benchmark document: {other:?}"),
        }
    }
    d.iter().map(|(k, v)| (k.clone(), value(v))).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    InsertOne,
    FindById,
    IndexedEq,
    RangeSort,
    Inc,
    AddToSet,
    MatchGroup,
    Ping,
}

impl Workload {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::InsertOne => "insert_one",
            Workload::FindById => "find_one by _id",
            Workload::IndexedEq => "indexed eq, limit 10",
            Workload::RangeSort => "range+sort+limit 20",
            Workload::Inc => "$inc by _id",
            Workload::AddToSet => "$addToSet (50 elems)",
            Workload::MatchGroup => "$match+$group",
            Workload::Ping => "ping / SELECT 1",
        }
    }
}

/// What both targets share while a phase runs.
pub(crate) struct Shared {
    docs: i64,
    /// The next `_id` for `insert_one`.
    next_id: AtomicI64,
}

impl Shared {
    /// For a data set of `docs` documents.
    pub(crate) fn new(docs: usize) -> Shared {
        Shared {
            docs: docs as i64,
            next_id: AtomicI64::new(10_000_000),
        }
    }
}

/// The workload whose name contains `name` (for [`crate::drive`]).
pub(crate) fn workload(name: &str) -> Option<Workload> {
    [
        Workload::InsertOne,
        Workload::FindById,
        Workload::IndexedEq,
        Workload::RangeSort,
        Workload::Inc,
        Workload::AddToSet,
        Workload::MatchGroup,
        Workload::Ping,
    ]
    .into_iter()
    .find(|w| w.name().contains(name))
}

/// A client's random state seeded from `k`.
pub(crate) fn seed(k: u64) -> u64 {
    splitmix(k)
}

/// A Cairn client of `db` (for [`crate::drive`]).
pub(crate) fn cairn_worker(db: &mongodb::Database) -> Worker {
    Worker::Cairn(CairnWorker {
        db: db.clone(),
        docs: db.collection("docs"),
        inserts: db.collection("inserts"),
        sets: db.collection("sets"),
    })
}

/// Creates Cairn's two collections of [`document`]s (`docs`, read by the workloads, and
/// `inserts`, written by `insert_one`) with their indexes on `cat` and `score`.
async fn create_indexes(cairn: &mongodb::Database) {
    for name in ["docs", "inserts"] {
        for keys in [doc! {"cat": 1}, doc! {"score": 1}] {
            cairn
                .collection::<Document>(name)
                .create_index(mongodb::IndexModel::builder().keys(keys).build())
                .await
                .expect("index");
        }
    }
}

/// Loads Cairn alone as [`load`] does (for [`crate::drive`]).
pub(crate) async fn load_cairn(cairn: &mongodb::Database, n: usize) {
    create_indexes(cairn).await;
    let coll = cairn.collection::<Document>("docs");
    let mut i = 0;
    while i < n {
        let end = (i + BATCH).min(n);
        let docs: Vec<Document> = (i..end).map(|k| document(k as i64)).collect();
        coll.insert_many(docs).await.expect("insert_many");
        i = end;
    }
    let sets = cairn.collection::<Document>("sets");
    let all: Vec<Document> = (0..SETS).map(set_document).collect();
    for chunk in all.chunks(BATCH) {
        sets.insert_many(chunk.to_vec()).await.expect("sets");
    }
}

pub(crate) struct CairnWorker {
    db: mongodb::Database,
    docs: mongodb::Collection<Document>,
    /// `insert_one`'s collection.
    inserts: mongodb::Collection<Document>,
    sets: mongodb::Collection<Document>,
}

pub(crate) struct PgWorker {
    c: tokio_postgres::Client,
    insert: tokio_postgres::Statement,
    by_id: tokio_postgres::Statement,
    eq: tokio_postgres::Statement,
    range: tokio_postgres::Statement,
    inc: tokio_postgres::Statement,
    add: tokio_postgres::Statement,
    group: tokio_postgres::Statement,
    ping: tokio_postgres::Statement,
}

pub(crate) enum Worker {
    Cairn(CairnWorker),
    Pg(Box<PgWorker>),
}

impl Worker {
    pub(crate) async fn op(&mut self, w: Workload, x: &mut u64, shared: &Shared) {
        let r = next(x);
        let id = (r % shared.docs as u64) as i64;
        let cat = format!("cat-{:04}", (r >> 20) as usize % CATS);
        let score = ((r >> 11) % 1000) as f64;
        let set_id = ((r >> 7) % SETS as u64) as i64;
        let item = format!("v{}", (r >> 33) % 100);
        match self {
            Worker::Cairn(c) => match w {
                Workload::InsertOne => {
                    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
                    c.inserts.insert_one(document(id)).await.expect("insert");
                }
                Workload::FindById => {
                    let d = c.docs.find_one(doc! {"_id": id}).await.expect("find");
                    assert!(d.is_some());
                }
                Workload::IndexedEq => {
                    let mut cur = c
                        .docs
                        .find(doc! {"cat": cat})
                        .limit(10)
                        .await
                        .expect("find");
                    let mut n = 0;
                    while cur.advance().await.expect("next") {
                        let _: Document = cur.deserialize_current().expect("doc");
                        n += 1;
                    }
                    assert_eq!(n, 10);
                }
                Workload::RangeSort => {
                    let mut cur = c
                        .docs
                        .find(doc! {"score": {"$gte": score}})
                        .sort(doc! {"score": 1})
                        .limit(20)
                        .await
                        .expect("find");
                    while cur.advance().await.expect("next") {
                        let _: Document = cur.deserialize_current().expect("doc");
                    }
                }
                Workload::Inc => {
                    let r = c
                        .docs
                        .update_one(doc! {"_id": id}, doc! {"$inc": {"age": 1}})
                        .await
                        .expect("update");
                    assert_eq!(r.matched_count, 1);
                }
                Workload::AddToSet => {
                    c.sets
                        .update_one(doc! {"_id": set_id}, doc! {"$addToSet": {"items": item}})
                        .await
                        .expect("update");
                }
                Workload::MatchGroup => {
                    let mut cur = c
                        .docs
                        .aggregate([
                            doc! {"$match": {"cat": cat}},
                            doc! {"$group": {"_id": "$address.city", "n": {"$sum": 1}, "avg": {"$avg": "$score"}}},
                        ])
                        .await
                        .expect("aggregate");
                    while cur.advance().await.expect("next") {
                        let _: Document = cur.deserialize_current().expect("doc");
                    }
                }
                Workload::Ping => {
                    c.db.run_command(doc! {"ping": 1}).await.expect("ping");
                }
            },
            Worker::Pg(p) => match w {
                Workload::InsertOne => {
                    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
                    let d = json(&document(id));
                    p.c.execute(&p.insert, &[&id, &d]).await.expect("insert");
                }
                Workload::FindById => {
                    let row = p.c.query_opt(&p.by_id, &[&id]).await.expect("select");
                    let _: serde_json::Value = row.expect("row").get(0);
                }
                Workload::IndexedEq => {
                    let rows = p.c.query(&p.eq, &[&cat]).await.expect("select");
                    assert_eq!(rows.len(), 10);
                    for r in rows {
                        let _: serde_json::Value = r.get(0);
                    }
                }
                Workload::RangeSort => {
                    for r in p.c.query(&p.range, &[&score]).await.expect("select") {
                        let _: serde_json::Value = r.get(0);
                    }
                }
                Workload::Inc => {
                    let n = p.c.execute(&p.inc, &[&id]).await.expect("update");
                    assert_eq!(n, 1);
                }
                Workload::AddToSet => {
                    p.c.execute(&p.add, &[&set_id, &item])
                        .await
                        .expect("update");
                }
                Workload::MatchGroup => {
                    for r in p.c.query(&p.group, &[&cat]).await.expect("group") {
                        let _: (String, i64, f64) = (r.get(0), r.get(1), r.get(2));
                    }
                }
                Workload::Ping => {
                    p.c.query_one(&p.ping, &[]).await.expect("select 1");
                }
            },
        }
    }
}

async fn pg_worker(pg: &Postgres) -> Worker {
    let c = pg.connect().await;
    let prep = async |sql: &str| c.prepare(sql).await.expect("prepare");
    let insert = prep("INSERT INTO inserts VALUES ($1, $2)").await;
    let by_id = prep("SELECT doc FROM docs WHERE id = $1").await;
    let eq = prep("SELECT doc FROM docs WHERE doc->>'cat' = $1 LIMIT 10").await;
    let range = prep(
        "SELECT doc FROM docs WHERE (doc->>'score')::float8 >= $1 \
         ORDER BY (doc->>'score')::float8 LIMIT 20",
    )
    .await;
    let inc = prep(
        "UPDATE docs SET doc = jsonb_set(doc, '{age}', to_jsonb((doc->>'age')::int + 1)) \
         WHERE id = $1",
    )
    .await;
    let add = prep(
        "UPDATE sets SET doc = jsonb_set(doc, '{items}', (doc->'items') || to_jsonb($2::text)) \
         WHERE id = $1 AND NOT (doc->'items') ? $2",
    )
    .await;
    let group = prep(
        "SELECT doc->'address'->>'city', count(*), avg((doc->>'score')::float8) \
         FROM docs WHERE doc->>'cat' = $1 GROUP BY 1",
    )
    .await;
    let ping = prep("SELECT 1").await;
    Worker::Pg(Box::new(PgWorker {
        c,
        insert,
        by_id,
        eq,
        range,
        inc,
        add,
        group,
        ping,
    }))
}

/// One target's measurements for one workload.
#[derive(Debug, Default, Clone)]
struct Sample {
    ops: u64,
    elapsed: Duration,
    lat: Vec<Duration>,
    server_cpu: f64,
    client_cpu: f64,
}

impl Sample {
    fn merge(&mut self, o: Sample) {
        self.ops += o.ops;
        self.elapsed += o.elapsed;
        self.lat.extend(o.lat);
        self.server_cpu += o.server_cpu;
        self.client_cpu += o.client_cpu;
    }
    fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }
    fn pct(&mut self, q: f64) -> f64 {
        self.lat.sort_unstable();
        self.lat
            .get(((self.lat.len() as f64 - 1.0) * q) as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1e6)
    }
    fn cpu_per_op(&self) -> (f64, f64) {
        let n = self.ops.max(1) as f64;
        (self.server_cpu / n * 1e6, self.client_cpu / n * 1e6)
    }
}

/// CPU seconds this process (the clients) has used, without its children (the spawned
/// Cairn server is one).
fn own_cpu() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// Runs `w` on `workers` concurrently for `d`.
async fn phase(
    workers: Vec<Worker>,
    w: Workload,
    d: Duration,
    server_pid: u32,
    shared: &Arc<Shared>,
) -> (Vec<Worker>, Sample) {
    let s0 = cpu_seconds(server_pid);
    let c0 = own_cpu();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (k, mut wk) in workers.into_iter().enumerate() {
        let shared = shared.clone();
        tasks.push(tokio::spawn(async move {
            let mut x = splitmix(k as u64 + 1 + start.elapsed().as_nanos() as u64);
            let mut lat = Vec::with_capacity(1 << 16);
            while start.elapsed() < d {
                let t = Instant::now();
                wk.op(w, &mut x, &shared).await;
                lat.push(t.elapsed());
            }
            (wk, lat)
        }));
    }
    let mut back = Vec::new();
    let mut lat = Vec::new();
    for t in tasks {
        let (wk, l) = t.await.expect("client task");
        back.push(wk);
        lat.extend(l);
    }
    let elapsed = start.elapsed();
    let sample = Sample {
        ops: lat.len() as u64,
        elapsed,
        lat,
        server_cpu: cpu_seconds(server_pid) - s0,
        client_cpu: own_cpu() - c0,
    };
    (back, sample)
}

struct Target {
    pid: u32,
    workers: Vec<Worker>,
    shared: Arc<Shared>,
}

impl Target {
    async fn run(&mut self, w: Workload, clients: usize, d: Duration) -> Sample {
        let rest = self.workers.split_off(clients);
        let mine = std::mem::take(&mut self.workers);
        let (mut back, s) = phase(mine, w, d, self.pid, &self.shared).await;
        back.extend(rest);
        self.workers = back;
        s
    }
}

fn header() {
    println!(
        "{:<26} {:>7} {:>11} {:>9} {:>9} {:>10} {:>10}",
        "workload", "target", "ops/s", "p50 µs", "p99 µs", "srv µs/op", "cli µs/op"
    );
}

fn print_row(label: &str, target: &str, s: &mut Sample) {
    let (srv, cli) = s.cpu_per_op();
    println!(
        "{label:<26} {target:>7} {:>11.0} {:>9.1} {:>9.1} {srv:>10.1} {cli:>10.1}",
        s.rate(),
        s.pct(0.5),
        s.pct(0.99),
    );
}

/// One line of the closing summary.
struct Summary {
    label: String,
    cairn_rate: f64,
    pg_rate: f64,
    cairn_cpu: f64,
    pg_cpu: f64,
}

fn compare_rows(label: &str, c: &mut Sample, p: &mut Sample, out: &mut Vec<Summary>) {
    print_row(label, "cairn", c);
    print_row("", "pg", p);
    let (cs, _) = c.cpu_per_op();
    let (ps, _) = p.cpu_per_op();
    println!(
        "{:<26} {:>7} {:>10.2}x throughput, {:.2}x server CPU per op (pg/cairn)",
        "",
        "ratio",
        c.rate() / p.rate(),
        ps / cs.max(1e-9)
    );
    out.push(Summary {
        label: label.to_string(),
        cairn_rate: c.rate(),
        pg_rate: p.rate(),
        cairn_cpu: cs,
        pg_cpu: ps,
    });
}

async fn load(
    cairn: &mongodb::Database,
    pg: &tokio_postgres::Client,
    n: usize,
    cairn_pid: u32,
    pg_pid: u32,
) -> (Sample, Sample) {
    pg.batch_execute(
        "CREATE TABLE docs (id bigint PRIMARY KEY, doc jsonb NOT NULL);
         CREATE TABLE sets (id bigint PRIMARY KEY, doc jsonb NOT NULL);
         CREATE INDEX docs_cat ON docs ((doc->>'cat'));
         CREATE INDEX docs_score ON docs (((doc->>'score')::float8));
         CREATE TABLE inserts (id bigint PRIMARY KEY, doc jsonb NOT NULL);
         CREATE INDEX inserts_cat ON inserts ((doc->>'cat'));
         CREATE INDEX inserts_score ON inserts (((doc->>'score')::float8));",
    )
    .await
    .expect("create tables");
    create_indexes(cairn).await;
    let coll = cairn.collection::<Document>("docs");
    let stmt = pg
        .prepare("INSERT INTO docs SELECT * FROM unnest($1::bigint[], $2::jsonb[])")
        .await
        .expect("prepare");
    let (mut c, mut p) = (Sample::default(), Sample::default());
    let mut i = 0usize;
    let mut round = 0;
    while i < n {
        let end = (i + BATCH).min(n);
        let docs: Vec<Document> = (i..end).map(|k| document(k as i64)).collect();
        let ids: Vec<i64> = (i as i64..end as i64).collect();
        let jdocs: Vec<serde_json::Value> = docs.iter().map(json).collect();
        let cairn_batch = async |docs: Vec<Document>| {
            let (s0, c0) = (cpu_seconds(cairn_pid), own_cpu());
            let t = Instant::now();
            coll.insert_many(docs).await.expect("insert_many");
            Sample {
                ops: (end - i) as u64,
                elapsed: t.elapsed(),
                lat: vec![t.elapsed()],
                server_cpu: cpu_seconds(cairn_pid) - s0,
                client_cpu: own_cpu() - c0,
            }
        };
        let pg_batch = async || {
            let (s0, c0) = (cpu_seconds(pg_pid), own_cpu());
            let t = Instant::now();
            pg.execute(&stmt, &[&ids, &jdocs]).await.expect("insert");
            Sample {
                ops: (end - i) as u64,
                elapsed: t.elapsed(),
                lat: vec![t.elapsed()],
                server_cpu: cpu_seconds(pg_pid) - s0,
                client_cpu: own_cpu() - c0,
            }
        };
        if round % 2 == 0 {
            c.merge(cairn_batch(docs).await);
            p.merge(pg_batch().await);
        } else {
            p.merge(pg_batch().await);
            c.merge(cairn_batch(docs).await);
        }
        round += 1;
        i = end;
    }
    // From here until both are idle again the CPU is charged to the load (see the module docs).
    let (c0, p0) = (cpu_seconds(cairn_pid), cpu_seconds(pg_pid));
    // The $addToSet collection (untimed).
    let sets = cairn.collection::<Document>("sets");
    let all: Vec<Document> = (0..SETS).map(set_document).collect();
    for chunk in all.chunks(BATCH) {
        sets.insert_many(chunk.to_vec()).await.expect("sets");
    }
    let ids: Vec<i64> = (0..SETS).collect();
    let jdocs: Vec<serde_json::Value> = all.iter().map(json).collect();
    pg.execute(
        "INSERT INTO sets SELECT * FROM unnest($1::bigint[], $2::jsonb[])",
        &[&ids, &jdocs],
    )
    .await
    .expect("sets");
    pg.batch_execute("ANALYZE docs; ANALYZE sets; CHECKPOINT")
        .await
        .expect("analyze");
    cairn
        .client()
        .database("admin")
        .run_command(doc! {"fsync": 1})
        .await
        .expect("fsync");
    tokio::join!(drain(cairn_pid), drain(pg_pid));
    c.server_cpu += cpu_seconds(cairn_pid) - c0;
    p.server_cpu += cpu_seconds(pg_pid) - p0;
    (c, p)
}

/// Waits (at most a minute) until the server `pid` is idle — below 5% of a core over half a
/// second — so that work left over from a row (LSM flushes and compactions, checkpoints) is
/// not charged to the next ([`drain`]); returns the seconds waited.
async fn settle(pid: u32) -> f64 {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        let c0 = cpu_seconds(pid);
        tokio::time::sleep(Duration::from_millis(500)).await;
        if cpu_seconds(pid) - c0 < 0.025 {
            break;
        }
    }
    start.elapsed().as_secs_f64()
}

/// Waits [`DRAIN`], then until the server `pid` is idle ([`settle`]); returns the CPU seconds
/// it used meanwhile: the background work the last row left behind.
async fn drain(pid: u32) -> f64 {
    let c0 = cpu_seconds(pid);
    tokio::time::sleep(DRAIN).await;
    settle(pid).await;
    cpu_seconds(pid) - c0
}

/// How long [`drain`] waits before it looks for idleness: longer than Cairn's idle-flush
/// period (1 s), so that a flush the row's writes will cause has started.
const DRAIN: Duration = Duration::from_millis(1500);

/// Checks that both targets answer the read workloads alike before anything is timed.
async fn check(cairn: &mongodb::Database, pg: &tokio_postgres::Client) {
    let coll = cairn.collection::<Document>("docs");
    let d = coll
        .find_one(doc! {"_id": 42i64})
        .await
        .expect("find")
        .expect("doc 42");
    assert_eq!(d, document(42));
    let row = pg
        .query_one("SELECT doc FROM docs WHERE id = 42", &[])
        .await
        .expect("select");
    let v: serde_json::Value = row.get(0);
    assert_eq!(v, json(&document(42)));
    let want: Vec<i64> = pg
        .query(
            "SELECT id FROM docs WHERE (doc->>'score')::float8 >= 500 \
             ORDER BY (doc->>'score')::float8 LIMIT 20",
            &[],
        )
        .await
        .expect("range")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut cur = coll
        .find(doc! {"score": {"$gte": 500.0}})
        .sort(doc! {"score": 1})
        .limit(20)
        .await
        .expect("find");
    let mut have = Vec::new();
    while cur.advance().await.expect("next") {
        let d: Document = cur.deserialize_current().expect("doc");
        have.push(d.get_i64("_id").expect("_id"));
    }
    assert_eq!(have, want, "range+sort+limit agree");
}

/// Runs the benchmark.
pub async fn run(opts: &Opts) {
    let n = opts.docs.unwrap_or(DOCS);
    let d = opts.duration();
    let server = Server::start();
    let pg = Postgres::start();
    let setup = pg.connect().await;
    let version: String = setup
        .query_one("SHOW server_version", &[])
        .await
        .expect("version")
        .get(0);
    let max_clients = 16;
    let client = mongodb::Client::with_uri_str(format!(
        "mongodb://127.0.0.1:{}/?maxPoolSize={}&minPoolSize={}",
        server.port,
        max_clients + 2,
        max_clients
    ))
    .await
    .expect("client");
    let db = client.database("bench_compare");
    println!(
        "cairn (default durability: journal written, not fsynced) vs PostgreSQL {version} \
         (defaults: fsync per commit); {n} documents, {:.1} s per row and target",
        d.as_secs_f64()
    );
    let (mut lc, mut lp) = load(&db, &setup, n, server.pid(), pg.pid()).await;
    check(&db, &setup).await;
    println!();
    header();
    let mut summary = Vec::new();
    compare_rows("insertMany 1000 (per doc)", &mut lc, &mut lp, &mut summary);

    let shared = || {
        Arc::new(Shared {
            docs: n as i64,
            next_id: AtomicI64::new(10_000_000),
        })
    };
    let mut cairn = Target {
        pid: server.pid(),
        workers: (0..max_clients)
            .map(|_| {
                Worker::Cairn(CairnWorker {
                    db: db.clone(),
                    docs: db.collection("docs"),
                    inserts: db.collection("inserts"),
                    sets: db.collection("sets"),
                })
            })
            .collect(),
        shared: shared(),
    };
    let mut pgt = Target {
        pid: pg.pid(),
        workers: Vec::new(),
        shared: shared(),
    };
    for _ in 0..max_clients {
        pgt.workers.push(pg_worker(&pg).await);
    }
    let rows: &[(Workload, usize)] = &[
        (Workload::InsertOne, 1),
        (Workload::InsertOne, 8),
        (Workload::FindById, 1),
        (Workload::FindById, 16),
        (Workload::IndexedEq, 16),
        (Workload::RangeSort, 16),
        (Workload::Inc, 8),
        (Workload::AddToSet, 8),
        (Workload::MatchGroup, 8),
        (Workload::Ping, 1),
    ];
    let half = d / 2;
    let warm = Duration::from_millis(300).min(half);
    // `CAIRN_BENCH_ONLY=find` runs only the rows whose name contains "find" (profiling).
    let only = std::env::var("CAIRN_BENCH_ONLY").unwrap_or_default();
    for &(w, clients) in rows {
        if !w.name().contains(only.as_str()) {
            continue;
        }
        cairn.run(w, clients, warm).await;
        pgt.run(w, clients, warm).await;
        let mut c = cairn.run(w, clients, half).await;
        let mut p = pgt.run(w, clients, half).await;
        p.merge(pgt.run(w, clients, half).await);
        c.merge(cairn.run(w, clients, half).await);
        // Work the row left behind is charged to it (see the module docs).
        let (dc, dp) = tokio::join!(drain(cairn.pid), drain(pgt.pid));
        c.server_cpu += dc;
        p.server_cpu += dp;
        let label = format!("{}, {} cl", w.name(), clients);
        compare_rows(&label, &mut c, &mut p, &mut summary);
    }
    println!();
    println!("summary (Cairn at default durability, PostgreSQL fsyncing each commit):");
    println!(
        "| workload | PostgreSQL ops/s | Cairn ops/s | throughput Cairn/PG | PG server CPU µs/op | Cairn server CPU µs/op |"
    );
    println!("|---|---|---|---|---|---|");
    for s in &summary {
        println!(
            "| {} | {:.0} | {:.0} | {:.2}x | {:.1} | {:.1} |",
            s.label,
            s.pg_rate,
            s.cairn_rate,
            s.cairn_rate / s.pg_rate,
            s.pg_cpu,
            s.cairn_cpu
        );
    }
}
