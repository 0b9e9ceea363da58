//! What an index scan reads: a batch of `n` documents reads about `n` index entries (not a
//! whole fixed-size chunk), and entries the bounds or the residual filter reject only make
//! the next read larger — the results stay those of a collection scan.

use std::cell::Cell;
use std::ops::Bound;
use std::sync::Arc;

use bson::{RawDocument, RawDocumentBuf, rawdoc};
use cairn_query::filter::Filter;
use cairn_query::index::QueryKeyGen;
use cairn_query::plan::{Access, Execution, Hint, Query, Source, candidates};
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::engine::memory::MemoryEngine;
use cairn_storage::index::IndexMeta;
use cairn_storage::index_ops::{IndexHit, KeyRange};
use cairn_storage::{
    Durability, ReadTxn, ScanBatch, ScanLimits, StorageError, Store, StoreOptions,
};

/// A snapshot that counts the index entries handed out.
struct Counting<'a> {
    inner: &'a ReadTxn,
    entries: Cell<usize>,
}

impl Source for Counting<'_> {
    fn scan_range(
        &self,
        coll: &CollectionMeta,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        resume: Option<&[u8]>,
        reverse: bool,
        limits: ScanLimits,
        pred: &mut dyn FnMut(&RawDocument) -> bool,
    ) -> Result<ScanBatch, StorageError> {
        Source::scan_range(self.inner, coll, range, resume, reverse, limits, pred)
    }

    fn index_scan(
        &self,
        idx: &IndexMeta,
        ranges: &[KeyRange],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StorageError> {
        let hits = Source::index_scan(self.inner, idx, ranges, reverse, limit)?;
        self.entries.set(self.entries.get() + hits.len());
        Ok(hits)
    }

    fn get_by_key(
        &self,
        coll: &CollectionMeta,
        key: &[u8],
    ) -> Result<Option<RawDocumentBuf>, StorageError> {
        Source::get_by_key(self.inner, coll, key)
    }
}

fn store() -> (Store, Arc<CollectionMeta>) {
    let store = Store::open_with(
        Arc::new(MemoryEngine::new()),
        StoreOptions { sync_always: false },
        Arc::new(QueryKeyGen::new()),
    )
    .unwrap();
    let meta = store.ensure_collection("db", "c").unwrap();
    store
        .write(Durability::Buffered, |tx| -> Result<(), StorageError> {
            for i in 0..1000 {
                tx.insert(&meta, &rawdoc! {"_id": i, "a": i % 2, "b": i % 3})?;
            }
            Ok(())
        })
        .unwrap();
    let created = store
        .create_indexes("db", "c", &[rawdoc! {"key": {"a": 1}, "name": "a_1"}])
        .unwrap();
    for name in created.new {
        store.build_index("db", "c", &name, &|_| {}).unwrap();
    }
    let meta = store.collection("db", "c").unwrap();
    (store, meta)
}

/// Runs the `a_1` index plan for `filter`, one batch of `n`; returns the documents' `_id`s
/// and the index entries read.
fn batch(filter: RawDocumentBuf, n: usize) -> (Vec<i32>, usize) {
    let (store, meta) = store();
    let filter = Arc::new(Filter::parse(&filter).unwrap());
    let hint = Hint::None;
    let plan = candidates(&meta, &Query::new(&filter, &hint))
        .unwrap()
        .into_iter()
        .find(|p| matches!(p.access, Access::Index(_)))
        .expect("an index plan");
    let read = store.read().unwrap();
    let src = Counting {
        inner: &read,
        entries: Cell::new(0),
    };
    let mut exec = Execution::new(Arc::new(plan), filter, false);
    let docs = exec.next(&src, &meta, n, usize::MAX, 10_000).unwrap();
    let ids = docs
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect::<Vec<_>>();
    (ids, src.entries.get())
}

#[test]
fn a_batch_reads_the_entries_it_returns() {
    let (ids, entries) = batch(rawdoc! {"a": 1}, 10);
    assert_eq!(ids, (0..10).map(|i| 2 * i + 1).collect::<Vec<_>>());
    assert_eq!(entries, 10);
}

#[test]
fn rejected_entries_grow_the_next_read() {
    // b == 0 holds for one document in three of those with a == 1: the first read of 10
    // entries yields 3 or 4, then reads of 20, 40 … complete the batch.
    let (ids, entries) = batch(rawdoc! {"a": 1, "b": 0}, 10);
    let want: Vec<i32> = (0..1000)
        .filter(|i| i % 2 == 1 && i % 3 == 0)
        .take(10)
        .collect();
    assert_eq!(ids, want);
    assert!((30..=70).contains(&entries), "read {entries} entries");
}
