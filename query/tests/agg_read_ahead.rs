//! The `$cursor` stage's read-ahead: a large pipeline run on a snapshot reads its input on a
//! second thread ([`Source::shared`]); the same pipeline on a source that cannot be shared
//! runs on one thread. Both must give the same documents in the same order, the same errors
//! (read errors, stage errors, interruption) and report the same work.

mod agg_common;

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::ThreadId;

use agg_common::{Db, assert_same, code};
use bson::{Document, RawDocument, RawDocumentBuf, doc};
use cairn_query::agg::{Aggregation, Catalog, ExecCx, Host};
use cairn_query::plan::{Hint, Source};
use cairn_query::{QueryError, Result};
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::index::IndexMeta;
use cairn_storage::index_ops::{IndexHit, KeyRange};
use cairn_storage::{ReadTxn, ScanBatch, ScanLimits, StorageError};

/// A snapshot that records the threads reading it, shareable or not.
struct Tracked<'a> {
    inner: &'a ReadTxn,
    share: bool,
    threads: Mutex<HashSet<ThreadId>>,
}

impl Tracked<'_> {
    fn seen(&self) {
        if let Ok(mut t) = self.threads.lock() {
            t.insert(std::thread::current().id());
        }
    }
}

impl Source for Tracked<'_> {
    fn scan_range(
        &self,
        coll: &CollectionMeta,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        resume: Option<&[u8]>,
        reverse: bool,
        limits: ScanLimits,
        pred: &mut dyn FnMut(&RawDocument) -> bool,
    ) -> std::result::Result<ScanBatch, StorageError> {
        self.seen();
        Source::scan_range(self.inner, coll, range, resume, reverse, limits, pred)
    }

    fn index_scan(
        &self,
        idx: &IndexMeta,
        ranges: &[KeyRange],
        reverse: bool,
        limit: usize,
    ) -> std::result::Result<Vec<IndexHit>, StorageError> {
        self.seen();
        Source::index_scan(self.inner, idx, ranges, reverse, limit)
    }

    fn get_by_key(
        &self,
        coll: &CollectionMeta,
        key: &[u8],
    ) -> std::result::Result<Option<RawDocumentBuf>, StorageError> {
        self.seen();
        Source::get_by_key(self.inner, coll, key)
    }

    fn get_many_by_key(
        &self,
        coll: &CollectionMeta,
        keys: &[&[u8]],
    ) -> std::result::Result<Vec<Option<RawDocumentBuf>>, StorageError> {
        self.seen();
        Source::get_many_by_key(self.inner, coll, keys)
    }

    fn shared(&self) -> Option<&(dyn Source + Sync)> {
        if self.share { Some(self) } else { None }
    }
}

/// Interrupts after a number of checks; sums the work reported.
#[derive(Default)]
struct CountingHost {
    interrupt_after: Option<usize>,
    checks: AtomicUsize,
    keys: AtomicU64,
    docs: AtomicU64,
}

impl Host for CountingHost {
    fn check_interrupt(&self) -> Result<()> {
        let n = self.checks.fetch_add(1, Ordering::SeqCst);
        match self.interrupt_after {
            Some(limit) if n >= limit => Err(QueryError::Location(
                50,
                "operation exceeded time limit".into(),
            )),
            _ => Ok(()),
        }
    }

    fn record_work(&self, _plan: &std::sync::Arc<cairn_query::plan::Plan>, keys: u64, docs: u64) {
        self.keys.fetch_add(keys, Ordering::SeqCst);
        self.docs.fetch_add(docs, Ordering::SeqCst);
    }
}

struct View<'a>(&'a Db);

impl Catalog for View<'_> {
    fn collection(&self, db: &str, name: &str) -> Result<Option<std::sync::Arc<CollectionMeta>>> {
        Ok(self.0.store.collection(db, name))
    }
}

/// What one run gave: the documents or the error (code and message), the threads that read
/// storage, and the keys and documents examined.
struct Outcome {
    result: std::result::Result<Vec<Document>, (i32, String)>,
    threads: usize,
    work: (u64, u64),
}

fn run(db: &Db, agg: &Aggregation, share: bool, interrupt_after: Option<usize>) -> Outcome {
    let read = db.store.read().unwrap();
    let src = Tracked {
        inner: &read,
        share,
        threads: Mutex::new(HashSet::new()),
    };
    let host = CountingHost {
        interrupt_after,
        ..CountingHost::default()
    };
    let view = View(db);
    let cx = ExecCx {
        source: &src,
        catalog: &view,
        host: &host,
    };
    let result = (|| {
        let mut running = agg.open(db.options.clone())?;
        let mut out = Vec::new();
        while let Some(d) = running.next(&cx)? {
            out.push(Document::try_from(d.as_ref()).unwrap());
        }
        Ok(out)
    })()
    .map_err(|e: QueryError| (code(&e), e.to_string()));
    let threads = src.threads.lock().unwrap().len();
    Outcome {
        result,
        threads,
        work: (
            host.keys.load(Ordering::SeqCst),
            host.docs.load(Ordering::SeqCst),
        ),
    }
}

/// `n` events `{_id, g, s, v, z, tags}` with an index on `s`; `z` is 0 for `_id` 2500 only.
fn events(n: i32) -> Db {
    let db = Db::new();
    let docs: Vec<Document> = (0..n)
        .map(|i| {
            let h = (i as i64).wrapping_mul(2_654_435_761) & 0xffff;
            doc! {
                "_id": i,
                "g": (h % 7) as i32,
                "s": i % 10,
                "v": (h % 1000) as i32,
                "z": if i == 2500 { 0 } else { 1 + i % 3 },
                "tags": [format!("t{}", h % 5), format!("t{}", (h / 5) % 5), "x"],
            }
        })
        .collect();
    for chunk in docs.chunks(1000) {
        db.insert("e", chunk);
    }
    db.index("e", doc! {"key": {"s": 1}, "name": "s_1"});
    db
}

/// Runs `pipeline` both ways; asserts equal outcomes and returns the shared run's.
#[track_caller]
fn both(db: &Db, pipeline: &[Document], interrupt_after: Option<usize>) -> Outcome {
    let agg = db.prepare(Some("e"), pipeline, Hint::None).unwrap();
    let serial = run(db, &agg, false, interrupt_after);
    let shared = run(db, &agg, true, interrupt_after);
    assert_eq!(
        serial.threads, 1,
        "{pipeline:?}: the serial run stays on one thread"
    );
    match (&serial.result, &shared.result) {
        (Ok(a), Ok(b)) => {
            assert_same(b, a);
            assert_eq!(shared.work, serial.work, "{pipeline:?}: work reported");
        }
        (Err(a), Err(b)) => assert_eq!(b, a, "{pipeline:?}"),
        (a, b) => panic!(
            "{pipeline:?}: serial {:?} vs read-ahead {:?}",
            a.as_ref().map(Vec::len),
            b.as_ref().map(Vec::len)
        ),
    }
    shared
}

#[test]
fn large_pipelines_read_ahead_and_return_what_one_thread_returns() {
    let db = events(6000);
    let pipelines: Vec<Vec<Document>> = vec![
        // index hits into $group ($push keeps the input order visible)
        vec![
            doc! {"$match": {"s": 3}},
            doc! {"$group": {"_id": "$g", "n": {"$sum": 1}, "ids": {"$push": "$_id"}}},
            doc! {"$sort": {"_id": 1}},
        ],
        // index hits, projected, into $unwind + $group
        vec![
            doc! {"$match": {"s": {"$gte": 2}}},
            doc! {"$unwind": "$tags"},
            doc! {"$group": {"_id": "$tags", "n": {"$sum": 1}, "last": {"$last": "$_id"}}},
            doc! {"$sort": {"_id": 1}},
        ],
        // a collection scan into $group, and one with a residual filter
        vec![doc! {"$group": {"_id": null, "ids": {"$push": "$_id"}, "v": {"$sum": "$v"}}}],
        vec![
            doc! {"$match": {"v": {"$lt": 300}}},
            doc! {"$group": {"_id": "$g", "ids": {"$push": {"i": "$_id", "t": "$tags"}}}},
            doc! {"$sort": {"_id": -1}},
        ],
        // top-k and a whole blocking sort over a collection scan
        vec![doc! {"$sort": {"v": -1, "_id": 1}}, doc! {"$limit": 10}],
        vec![
            doc! {"$sort": {"v": 1, "_id": -1}},
            doc! {"$project": {"v": 1}},
        ],
        vec![
            doc! {"$match": {"s": {"$in": [1, 4, 7]}}},
            doc! {"$sort": {"g": 1, "v": -1, "_id": 1}},
            doc! {"$limit": 1500},
            doc! {"$group": {"_id": "$g", "ids": {"$push": "$_id"}}},
        ],
    ];
    for p in &pipelines {
        let shared = both(&db, p, None);
        assert!(shared.result.is_ok(), "{p:?}");
        assert_eq!(shared.threads, 2, "{p:?}: read ahead on a second thread");
    }
}

#[test]
fn small_pipelines_stay_on_one_thread() {
    let db = events(6000);
    for p in [
        vec![
            doc! {"$match": {"_id": {"$lt": 100}}},
            doc! {"$group": {"_id": "$g", "n": {"$sum": 1}}},
        ],
        vec![
            doc! {"$match": {"s": 3, "_id": {"$lt": 2000}}},
            doc! {"$group": {"_id": "$g", "ids": {"$push": "$_id"}}},
        ],
        // a limit is applied on the consumer's thread: no read-ahead past it
        vec![
            doc! {"$match": {"s": 3}},
            doc! {"$limit": 400},
            doc! {"$group": {"_id": "$g", "ids": {"$push": "$_id"}}},
        ],
    ] {
        let shared = both(&db, &p, None);
        assert!(shared.result.is_ok(), "{p:?}");
        assert_eq!(shared.threads, 1, "{p:?}");
    }
    // Streaming stages pull one document at a time: no read-ahead.
    let shared = both(&db, &[doc! {"$match": {"s": 3}}], None);
    assert_eq!(shared.threads, 1);
}

#[test]
fn errors_mid_way_are_the_same() {
    let db = events(6000);
    // An evaluation error in the plan's filter, on the reading thread, after thousands of
    // documents have been handed on.
    let filter_error = both(
        &db,
        &[
            doc! {"$match": {"$expr": {"$gt": [{"$mod": ["$v", "$z"]}, -1]}}},
            doc! {"$group": {"_id": "$g", "n": {"$sum": 1}}},
        ],
        None,
    );
    assert!(filter_error.result.is_err());
    // An error in the consuming stage while the reader is ahead.
    let stage_error = both(
        &db,
        &[
            doc! {"$match": {"s": {"$gte": 0}}},
            doc! {"$group": {"_id": {"$mod": ["$v", "$z"]}, "n": {"$sum": 1}}},
        ],
        None,
    );
    assert!(stage_error.result.is_err());
    let top_k_error = both(
        &db,
        &[
            doc! {"$match": {"$expr": {"$gt": [{"$mod": ["$v", "$z"]}, -1]}}},
            doc! {"$sort": {"v": 1}},
            doc! {"$limit": 3},
        ],
        None,
    );
    assert!(top_k_error.result.is_err());
    // Interruption (maxTimeMS, killOp) after a few storage calls, on either thread.
    for after in [1, 2, 3, 5] {
        for p in [
            vec![
                doc! {"$match": {"s": {"$gte": 0}}},
                doc! {"$group": {"_id": "$g", "n": {"$sum": 1}}},
            ],
            vec![doc! {"$sort": {"v": -1, "_id": 1}}, doc! {"$limit": 10}],
        ] {
            let o = both(&db, &p, Some(after));
            assert_eq!(o.result.err().map(|e| e.0), Some(50), "{p:?} after {after}");
        }
    }
}
