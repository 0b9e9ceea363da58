//! CRUD benchmarks: collection-scan filter throughput and targeted updates, each with the
//! key-value pairs read and written per operation (from `serverStatus.cairnStorage`), next to
//! raw fjall doing the comparable key-value work in the same run.
//!
//! - scan: `find` with a filter matching nothing over 100,000 ten-field documents (every
//!   document is read, decoded and tested) vs a raw fjall iteration over the same key-value
//!   pairs (no decoding): documents/s.
//! - `$inc` on one field of random documents vs a raw fjall transaction reading and rewriting
//!   one key: ops/s.
//! - `$addToSet` of a new value and `$pullAll` of an existing one on 100-element arrays
//!   (1,000 such documents) vs raw fjall reading the array's key range and writing two keys.

use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use fjall::{KeyspaceCreateOptions, OptimisticTxDatabase, Readable};

use crate::harness::{self, Measured, Opts, Server};
use crate::storage::{BATCH, DOCS, document};

async fn counters(c: &mongodb::Client) -> (i64, i64, i64) {
    let st = c
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .await
        .expect("serverStatus");
    let s = st.get_document("cairnStorage").expect("cairnStorage");
    (
        s.get_i64("commits").unwrap_or(0),
        s.get_i64("keysRead").unwrap_or(0),
        s.get_i64("keysWritten").unwrap_or(0),
    )
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Times `op` repeatedly for `d` and reports the key-value traffic per operation.
async fn timed_updates(
    c: &mongodb::Client,
    name: &str,
    d: Duration,
    mut op: impl FnMut(u64) -> (String, Document, Document),
) -> Measured {
    let db = c.database("bench");
    let (c0, r0, w0) = counters(c).await;
    let mut lat = Vec::new();
    let start = Instant::now();
    let mut x = 0x1234_5678_u64;
    while start.elapsed() < d {
        let (coll, filter, update) = op(xorshift(&mut x));
        let t = Instant::now();
        db.collection::<Document>(&coll)
            .update_one(filter, update)
            .await
            .expect("update");
        lat.push(t.elapsed());
    }
    let m = harness::summarize(lat, start.elapsed());
    let (c1, r1, w1) = counters(c).await;
    let ops = (c1 - c0).max(1) as f64;
    harness::row(name, &m);
    println!(
        "{:<34} {:>8.1} keys read, {:>6.1} keys written per op",
        "",
        (r1 - r0) as f64 / ops,
        (w1 - w0) as f64 / ops
    );
    m
}

fn raw_rmw(
    db: &OptimisticTxDatabase,
    ks: &fjall::OptimisticTxKeyspace,
    range: usize,
    d: Duration,
) -> Measured {
    let mut lat = Vec::new();
    let start = Instant::now();
    let mut x = 0x9E37_79B9_u64;
    while start.elapsed() < d {
        let i = (xorshift(&mut x) % range as u64) as u32;
        let t = Instant::now();
        let mut tx = db.write_tx().expect("tx");
        let key = i.to_be_bytes();
        let v = tx
            .get(ks, key)
            .expect("get")
            .map(|v| v.to_vec())
            .unwrap_or_default();
        let mut v = v;
        v.push(1);
        v.truncate(16);
        tx.insert(ks, key, v);
        tx.commit().expect("commit").expect("no conflict");
        lat.push(t.elapsed());
    }
    harness::summarize(lat, start.elapsed())
}

/// Runs the benchmark.
pub async fn run(o: &Opts) {
    let d = o.duration();
    let server = Server::start();
    let client = mongodb::Client::with_uri_str(format!("mongodb://127.0.0.1:{}/", server.port))
        .await
        .expect("client");
    let db = client.database("bench");
    let docs = db.collection::<Document>("docs");
    for batch in 0..DOCS / BATCH {
        let b: Vec<Document> = (batch * BATCH..(batch + 1) * BATCH).map(document).collect();
        docs.insert_many(b).await.expect("insert");
    }
    let arrays = db.collection::<Document>("arrays");
    let array_docs: Vec<Document> = (0..1000)
        .map(|i| {
            let arr: Vec<Bson> = (0..100).map(|v| Bson::Int32(v * 2)).collect();
            doc! {"_id": i, "arr": arr}
        })
        .collect();
    arrays.insert_many(array_docs).await.expect("insert arrays");
    client
        .database("admin")
        .run_command(doc! {"fsync": 1})
        .await
        .expect("fsync");
    println!(
        "crud: {DOCS} documents of 10 fields; {} s per phase",
        o.seconds
    );

    // Collection scan with a filter that matches nothing: every document is examined.
    let filter = doc! {"age": 1000, "active": true};
    let mut lat = Vec::new();
    let start = Instant::now();
    let mut scans = 0u64;
    while start.elapsed() < d || scans == 0 {
        let t = Instant::now();
        let r = db
            .run_command(doc! {"count": "docs", "query": filter.clone()})
            .await
            .expect("count");
        assert_eq!(r.get_i32("n").expect("n"), 0);
        lat.push(t.elapsed());
        scans += 1;
    }
    let mut scan = harness::summarize(lat, start.elapsed());
    scan.ops = scans * DOCS as u64;
    // raw fjall: iterate the same key-value pairs (one keyspace holding them)
    let dir = tempfile::tempdir().expect("tempdir");
    let raw = OptimisticTxDatabase::builder(dir.path())
        .open()
        .expect("fjall");
    let ks = raw
        .keyspace("docs", KeyspaceCreateOptions::default)
        .expect("ks");
    tokio::task::block_in_place(|| {
        for batch in 0..DOCS / BATCH {
            let mut tx = raw.write_tx().expect("tx");
            for i in batch * BATCH..(batch + 1) * BATCH {
                let d = bson::RawDocumentBuf::try_from(&document(i)).expect("bson");
                let key = cairn_storage::store::id_key(d.get("_id").expect("id").expect("id"))
                    .expect("key");
                for (k, v) in cairn_storage::doc::encode_document(&key, &d)
                    .expect("encode")
                    .nodes
                {
                    tx.insert(&ks, k, v);
                }
            }
            tx.commit().expect("commit").expect("ok");
        }
    });
    let raw_scan = tokio::task::block_in_place(|| {
        let start = Instant::now();
        let mut passes = 0u64;
        while start.elapsed() < d || passes == 0 {
            let snap = raw.read_tx();
            let mut roots = 0u64;
            for g in snap.iter(&ks) {
                let (_, v) = g.into_inner().expect("kv");
                roots += u64::from(cairn_storage::doc::is_root(&v));
            }
            assert_eq!(roots, DOCS as u64);
            passes += 1;
        }
        Measured {
            ops: passes * DOCS as u64,
            elapsed: start.elapsed(),
            p50: Duration::ZERO,
            p99: Duration::ZERO,
        }
    });
    harness::row("raw fjall scan (docs)", &raw_scan);
    harness::row("cairn filtered scan (docs)", &scan);
    println!(
        "ratio raw fjall / cairn scan throughput: {:.2}x",
        raw_scan.rate() / scan.rate()
    );

    let raw_inc = tokio::task::block_in_place(|| raw_rmw(&raw, &ks, DOCS, d));
    harness::row("raw fjall read+write one key", &raw_inc);
    let inc = timed_updates(&client, "cairn $inc one field", d, |r| {
        let id = (r % DOCS as u64) as i64;
        ("docs".into(), doc! {"_id": id}, doc! {"$inc": {"age": 1}})
    })
    .await;
    println!(
        "ratio raw fjall / cairn $inc: {:.2}x",
        raw_inc.rate() / inc.rate()
    );

    let mut next = 1_000_000i32;
    let add = timed_updates(&client, "cairn $addToSet (100-elem array)", d, |r| {
        next += 1;
        let id = (r % 1000) as i32;
        (
            "arrays".into(),
            doc! {"_id": id},
            doc! {"$addToSet": {"arr": next}},
        )
    })
    .await;
    let pull = timed_updates(&client, "cairn $pullAll (100-elem array)", d, |r| {
        let id = (r % 1000) as i32;
        let v = ((r >> 10) % 100) as i32 * 2;
        (
            "arrays".into(),
            doc! {"_id": id},
            doc! {"$pullAll": {"arr": [v]}},
        )
    })
    .await;
    println!(
        "ratio raw fjall read+write / cairn: $addToSet {:.2}x, $pullAll {:.2}x",
        raw_inc.rate() / add.rate(),
        raw_inc.rate() / pull.rate()
    );
}
