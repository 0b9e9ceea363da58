//! A harness for aggregation tests: collections in an in-memory store, pipelines parsed,
//! prepared and run through [`cairn_query::agg`] with a host that writes to the same store.

#![allow(dead_code)]

use std::sync::Arc;

use bson::{Document, RawArrayBuf, RawDocumentBuf, doc};
use cairn_query::agg::{
    Aggregation, Catalog, Ddl, ExecCx, Host, Options, ParseCx, Pipeline, Writer,
};
use cairn_query::expr::{ExprExtensions, Variables};
use cairn_query::index::QueryKeyGen;
use cairn_query::plan::{Hint, PlanCache, Source};
use cairn_query::{QueryError, Result};
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::engine::memory::MemoryEngine;
use cairn_storage::{Durability, ReadTxn, StorageError, Store, StoreOptions, WriteTxn};

/// An in-memory database.
pub struct Db {
    pub store: Store,
    pub cache: PlanCache,
    pub options: Options,
}

struct View<'a>(&'a Store);

impl Catalog for View<'_> {
    fn collection(&self, db: &str, name: &str) -> Result<Option<Arc<CollectionMeta>>> {
        Ok(self.0.collection(db, name))
    }
}

struct TxWriter<'a, 't>(&'a mut WriteTxn<'t>);

impl Writer for TxWriter<'_, '_> {
    fn source(&self) -> &dyn Source {
        &*self.0
    }
    fn collection(&mut self, db: &str, name: &str) -> Result<Option<Arc<CollectionMeta>>> {
        Ok(self.0.collection(db, name)?)
    }
    fn insert(&mut self, coll: &CollectionMeta, d: &bson::RawDocument) -> Result<()> {
        Ok(self.0.insert(coll, d)?)
    }
    fn replace(&mut self, coll: &CollectionMeta, key: &[u8], d: &bson::RawDocument) -> Result<()> {
        self.0.replace(coll, key, d)?;
        Ok(())
    }
}

#[derive(Debug)]
struct WErr(QueryError);
impl From<StorageError> for WErr {
    fn from(e: StorageError) -> WErr {
        WErr(e.into())
    }
}
impl cairn_storage::TxError for WErr {
    fn retryable(&self) -> bool {
        matches!(&self.0, QueryError::Storage(s) if s.is_transient())
    }
}

struct TestHost<'a>(&'a Db);

impl Host for TestHost<'_> {
    fn plan_cache(&self) -> Option<&PlanCache> {
        Some(&self.0.cache)
    }
    fn write(&self, f: &mut dyn FnMut(&mut dyn Writer) -> Result<()>) -> Result<()> {
        self.0
            .store
            .write(Durability::Buffered, |tx| {
                f(&mut TxWriter(tx)).map_err(WErr)
            })
            .map_err(|e| e.0)
    }
    fn ddl(&self, op: Ddl<'_>) -> Result<()> {
        let s = &self.0.store;
        match op {
            Ddl::CreateLike { db, name, like } => {
                s.create_collection(db, name, &RawDocumentBuf::new())?;
                if let Some(l) = like {
                    let specs: Vec<RawDocumentBuf> =
                        l.secondary_indexes().map(|i| i.spec.clone()).collect();
                    if !specs.is_empty() {
                        let c = s.create_indexes(db, name, &specs)?;
                        for n in c.new {
                            s.build_index(db, name, &n, &|_| {})?;
                        }
                    }
                }
            }
            Ddl::Ensure { db, name } => {
                s.ensure_collection(db, name)?;
            }
            Ddl::Replace {
                db,
                from,
                to_db,
                to,
            } => s.rename_collection((db, from), (to_db, to), true)?,
            Ddl::Drop { db, name } => {
                s.drop_collection(db, name)?;
            }
        }
        Ok(())
    }
}

impl Db {
    pub fn new() -> Db {
        Db {
            store: Store::open_with(
                Arc::new(MemoryEngine::new()),
                StoreOptions { sync_always: false },
                Arc::new(QueryKeyGen::new()),
            )
            .unwrap(),
            cache: PlanCache::default(),
            options: Options::default(),
        }
    }

    /// Inserts documents into `db.<coll>`.
    pub fn insert(&self, coll: &str, docs: &[Document]) {
        let meta = self.store.ensure_collection("db", coll).unwrap();
        self.store
            .write(
                Durability::Buffered,
                |tx| -> std::result::Result<(), StorageError> {
                    for d in docs {
                        tx.insert(&meta, &RawDocumentBuf::try_from(d).unwrap())?;
                    }
                    Ok(())
                },
            )
            .unwrap();
    }

    /// Creates and builds an index.
    pub fn index(&self, coll: &str, spec: Document) {
        let spec = RawDocumentBuf::try_from(&spec).unwrap();
        let c = self.store.create_indexes("db", coll, &[spec]).unwrap();
        for n in c.new {
            self.store.build_index("db", coll, &n, &|_| {}).unwrap();
        }
    }

    /// Parses and prepares a pipeline over `coll` (`None`: collectionless).
    pub fn prepare(
        &self,
        coll: Option<&str>,
        pipeline: &[Document],
        hint: Hint,
    ) -> Result<Aggregation> {
        let mut arr = RawArrayBuf::new();
        for d in pipeline {
            arr.push(RawDocumentBuf::try_from(d).unwrap());
        }
        let ext =
            ExprExtensions::with_variables(Variables::with_now(bson::DateTime::from_millis(0)));
        let cx = ParseCx::new("db", coll, ext);
        let p = Pipeline::parse(&arr, &cx)?;
        Aggregation::prepare(p, &cx, hint)
    }

    /// Runs a prepared aggregation to the end.
    pub fn run_prepared(&self, agg: &Aggregation) -> Result<Vec<Document>> {
        let mut running = agg.open(self.options.clone())?;
        let read: ReadTxn = self.store.read()?;
        let view = View(&self.store);
        let host = TestHost(self);
        let cx = ExecCx {
            source: &read,
            catalog: &view,
            host: &host,
        };
        let mut out = Vec::new();
        while let Some(d) = running.next(&cx)? {
            out.push(Document::try_from(d.as_ref()).unwrap());
        }
        Ok(out)
    }

    /// Runs a pipeline over `coll`.
    pub fn run(&self, coll: &str, pipeline: &[Document]) -> Result<Vec<Document>> {
        let agg = self.prepare(Some(coll), pipeline, Hint::None)?;
        self.run_prepared(&agg)
    }

    /// Runs a collectionless pipeline.
    pub fn run_db(&self, pipeline: &[Document]) -> Result<Vec<Document>> {
        let agg = self.prepare(None, pipeline, Hint::None)?;
        self.run_prepared(&agg)
    }

    /// The documents of a collection in `_id` order.
    pub fn all(&self, coll: &str) -> Vec<Document> {
        self.run(coll, &[doc! {"$sort": {"_id": 1}}]).unwrap()
    }
}

/// The error code of a query error.
pub fn code(e: &QueryError) -> i32 {
    match e {
        QueryError::BadValue(_) => 2,
        QueryError::FailedToParse(_) => 9,
        QueryError::TypeMismatch(_) => 14,
        QueryError::DollarPrefixedFieldName(_) => 52,
        QueryError::InvalidIdField(_) => 53,
        QueryError::NotImplemented(_) => 238,
        QueryError::Location(n, _) => *n,
        QueryError::Storage(StorageError::DuplicateKey { .. }) => 11000,
        QueryError::Storage(_) => 1,
    }
}

/// Byte-exact comparison (field order and types count).
#[track_caller]
pub fn assert_same(actual: &[Document], expected: &[Document]) {
    let b = |d: &Document| RawDocumentBuf::try_from(d).unwrap().into_bytes();
    let same =
        actual.len() == expected.len() && actual.iter().zip(expected).all(|(x, y)| b(x) == b(y));
    assert!(
        same,
        "documents differ\nactual:\n  {}\nexpected:\n  {}",
        actual
            .iter()
            .map(|d| format!("{d}"))
            .collect::<Vec<_>>()
            .join("\n  "),
        expected
            .iter()
            .map(|d| format!("{d}"))
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}
