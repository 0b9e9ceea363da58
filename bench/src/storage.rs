//! Storage benchmarks: `insert` and `_id` point reads through the Rust driver, each next to
//! raw fjall doing the same key-value work in the same process run.
//!
//! - insert: 100,000 documents of 10 fields, `insertMany` in batches of 1,000. The raw
//!   baseline encodes every document into exactly the key-value pairs Cairn stores
//!   (`E(_id)` + materialized paths) and commits them with fjall optimistic transactions of
//!   1,000 documents, with the same journal durability (`PersistMode::Buffer`).
//! - point reads: `find({_id})` of random existing ids with 1 and 16 concurrent clients,
//!   next to raw fjall prefix scans of the same document keys with 1 and 16 threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bson::{Document, RawDocumentBuf, doc};
use fjall::{KeyspaceCreateOptions, OptimisticTxDatabase, Readable};

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

fn kv_pairs(i: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let d = RawDocumentBuf::try_from(&document(i)).expect("bson");
    let id = d.get("_id").expect("id").expect("id");
    let key = cairn_storage::store::id_key(id).expect("key");
    cairn_storage::doc::encode_document(&key, &d)
        .expect("encode")
        .nodes
}

fn raw_db() -> (
    tempfile::TempDir,
    OptimisticTxDatabase,
    fjall::OptimisticTxKeyspace,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = OptimisticTxDatabase::builder(dir.path())
        .open()
        .expect("fjall");
    let ks = db
        .keyspace("docs", KeyspaceCreateOptions::default)
        .expect("keyspace");
    (dir, db, ks)
}

fn raw_insert(db: &OptimisticTxDatabase, ks: &fjall::OptimisticTxKeyspace) -> Measured {
    let started = Instant::now();
    for batch in 0..DOCS / BATCH {
        let mut tx = db.write_tx().expect("tx");
        for i in batch * BATCH..(batch + 1) * BATCH {
            let pairs = kv_pairs(i);
            // Like Cairn, read the _id key before writing (inserts must see collisions).
            let root = &pairs[0].0;
            assert!(tx.get(ks, root).expect("get").is_none());
            for (k, v) in pairs {
                tx.insert(ks, k, v);
            }
        }
        tx.commit().expect("commit").expect("no conflict");
    }
    Measured {
        ops: DOCS as u64,
        elapsed: started.elapsed(),
        p50: Duration::ZERO,
        p99: Duration::ZERO,
    }
}

fn raw_point_reads(
    db: &OptimisticTxDatabase,
    ks: &fjall::OptimisticTxKeyspace,
    threads: usize,
    d: Duration,
) -> Measured {
    let keys: Arc<Vec<Vec<u8>>> =
        Arc::new((0..DOCS).map(|i| kv_pairs(i).swap_remove(0).0).collect());
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
                    assert!(n > 1);
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

async fn cairn_insert(client: &mongodb::Client) -> Measured {
    let coll = client.database("bench").collection::<Document>("docs");
    let started = Instant::now();
    for batch in 0..DOCS / BATCH {
        let docs: Vec<Document> = (batch * BATCH..(batch + 1) * BATCH).map(document).collect();
        coll.insert_many(docs).await.expect("insert");
    }
    Measured {
        ops: DOCS as u64,
        elapsed: started.elapsed(),
        p50: Duration::ZERO,
        p99: Duration::ZERO,
    }
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
    let pairs: usize = (0..100).map(|i| kv_pairs(i).len()).sum::<usize>() / 100;
    println!(
        "storage: {DOCS} docs x 10 fields ({pairs} key-value pairs each), batches of {BATCH}; point reads {} s per phase",
        o.seconds
    );
    let (_dir, db, ks) = raw_db();
    let raw_ins = tokio::task::block_in_place(|| raw_insert(&db, &ks));
    let server = Server::start();
    let client = mongodb::Client::with_uri_str(format!("mongodb://127.0.0.1:{}/", server.port))
        .await
        .expect("client");
    let cairn_ins = cairn_insert(&client).await;
    harness::row("raw fjall insert (docs)", &raw_ins);
    harness::row("cairn insertMany (docs)", &cairn_ins);
    println!(
        "ratio raw fjall / cairn insert throughput: {:.2}x",
        raw_ins.rate() / cairn_ins.rate()
    );
    let (ping, find) = raw_round_trips(server.port, d).await;
    harness::row("cairn ping (raw OP_MSG)", &ping);
    harness::row("cairn find by _id (raw OP_MSG)", &find);
    for clients in [1, o.clients] {
        let raw = tokio::task::block_in_place(|| raw_point_reads(&db, &ks, clients, d));
        let cairn = cairn_point_reads(server.port, clients, d).await;
        harness::row(&format!("raw fjall point read, {clients} thr"), &raw);
        harness::row(&format!("cairn find by _id, {clients} clients"), &cairn);
        println!(
            "ratio raw fjall / cairn point reads ({clients}): {:.2}x",
            raw.rate() / cairn.rate()
        );
    }
}
