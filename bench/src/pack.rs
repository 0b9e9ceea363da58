//! The pack threshold, measured: for documents of several sizes, the storage layer's own
//! cost (no server, no network) of inserting, reading a document by `_id`, `$inc` of one
//! top-level field (read the field, write it back) and appending to a 100-element array,
//! at pack thresholds from 0 (one key per node) to 16 KiB, on the fjall engine with
//! buffered durability, in one process run.
//!
//! The documents have ten top-level fields of mixed types (as `cairn-bench compare`'s) plus
//! enough string fields to reach each size; every size is measured at every threshold, so a
//! row shows what packing a document of that size gains or costs. The default threshold is
//! the largest that wins on every operation for every size up to it.
//!
//! `cargo run -p cairn-bench --release -- pack [--docs N] [--seconds S]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Bson, RawBson, RawDocumentBuf, doc};
use cairn_storage::engine::fjall::{FjallEngine, FjallOptions};
use cairn_storage::{Durability, StorageError, Store, StoreOptions};

use crate::harness::Opts;

const SIZES: [usize; 6] = [300, 1000, 2000, 4000, 8000, 16000];
const THRESHOLDS: [u32; 7] = [0, 512, 1024, 2048, 4096, 8192, 16384];

fn document(i: i64, size: usize) -> RawDocumentBuf {
    let mut d = doc! {
        "_id": i,
        "name": format!("user-{i:08}"),
        "age": (i % 90) as i32,
        "score": i as f64 * 0.37,
        "active": i % 3 == 0,
        "cat": format!("cat-{:04}", i % 1000),
        "created": bson::DateTime::from_millis(1_700_000_000_000 + i),
        "tags": ["a", "bb", "ccc", "dddd", "eeeee"],
        "address": {"street": format!("{i} Main St"), "zip": format!("{:05}", i % 100_000), "city": "Oslo"},
        "list": (0..100).map(Bson::Int32).collect::<Vec<_>>(),
    };
    // The list makes documents at least ~1.2 KB; the smallest size leaves it short.
    if size < 1000 {
        d.insert("list", vec![Bson::Int32(1), Bson::Int32(2)]);
    }
    let mut k = 0;
    loop {
        let len = RawDocumentBuf::try_from(&d).expect("bson").as_bytes().len();
        if len + 8 >= size {
            break;
        }
        let fill = (size - len - 8).min(200);
        d.insert(format!("f{k}"), "x".repeat(fill.saturating_sub(10).max(1)));
        k += 1;
    }
    RawDocumentBuf::try_from(&d).expect("bson")
}

struct Row {
    insert: f64,
    read: f64,
    inc: f64,
    push: f64,
    keys: usize,
}

fn measure(size: usize, threshold: u32, docs: i64, d: Duration) -> Row {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Arc::new(FjallEngine::open(dir.path(), &FjallOptions::default()).expect("fjall"));
    let store = Store::open(engine, StoreOptions { sync_always: false }).expect("store");
    store.set_pack_threshold(threshold);
    let meta = store.ensure_collection("bench", "c").expect("collection");
    let all: Vec<RawDocumentBuf> = (0..docs).map(|i| document(i, size)).collect();
    let t = Instant::now();
    for chunk in all.chunks(100) {
        store
            .write(Durability::Buffered, |tx| -> Result<(), StorageError> {
                for doc in chunk {
                    tx.insert(&meta, doc)?;
                }
                Ok(())
            })
            .expect("insert");
    }
    let insert = docs as f64 / t.elapsed().as_secs_f64();
    let keys = store
        .read()
        .expect("read")
        .snapshot()
        .prefix(meta.id, &[])
        .expect("scan")
        .count()
        / docs as usize;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut pick = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % docs as u64) as i64
    };
    let rate = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        let mut n = 0u64;
        while t.elapsed() < d {
            for _ in 0..50 {
                f();
            }
            n += 50;
        }
        n as f64 / t.elapsed().as_secs_f64()
    };
    let read = rate(&mut || {
        let r = store.read().expect("read");
        let got = r.get(&meta, bson::RawBsonRef::Int64(pick())).expect("get");
        assert!(got.is_some());
    });
    let mut update = |field: &str, f: &dyn Fn(bson::RawBsonRef<'_>) -> RawBson| {
        let id = bson::RawBson::Int64(pick());
        store
            .write(Durability::Buffered, |tx| -> Result<(), StorageError> {
                let key = cairn_storage::store::id_key(id.as_raw_bson_ref())?;
                let view = tx.read_fields(&meta, &key, &[field])?.expect("doc");
                let new = f(view.field(field).expect("field").value());
                tx.write_fields(&meta, &view, &[(field, Some(new.as_raw_bson_ref()))])
            })
            .expect("update");
    };
    let inc = rate(&mut || {
        update("age", &|v| RawBson::Int32(v.as_i32().unwrap_or(0) + 1));
    });
    let push = rate(&mut || {
        update("list", &|v| {
            let bson::RawBsonRef::Array(a) = v else {
                panic!("list is not an array")
            };
            let mut a = a.to_owned();
            a.push(7);
            RawBson::Array(a)
        });
    });
    Row {
        insert,
        read,
        inc,
        push,
        keys,
    }
}

/// Runs the benchmark.
pub async fn run(opts: &Opts) {
    let docs = opts.docs.unwrap_or(20_000) as i64;
    let d = opts.duration().min(Duration::from_secs(1));
    println!(
        "pack threshold: storage-layer ops/s by document size and threshold ({docs} documents; insert in transactions of 100; {:.1} s per read/update figure)",
        d.as_secs_f64()
    );
    println!(
        "{:>6} {:>6} {:>5} {:>10} {:>10} {:>10} {:>10}",
        "size", "thresh", "keys", "insert/s", "get/s", "$inc/s", "$push/s"
    );
    for size in SIZES {
        let real = document(0, size).as_bytes().len();
        for t in THRESHOLDS {
            let r = tokio::task::block_in_place(|| measure(size, t, docs, d));
            println!(
                "{real:>6} {t:>6} {:>5} {:>10.0} {:>10.0} {:>10.0} {:>10.0}",
                r.keys, r.insert, r.read, r.inc, r.push
            );
        }
    }
}
