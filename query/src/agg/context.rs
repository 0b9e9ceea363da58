//! What a running pipeline may touch, and nothing more: the traits through which the caller
//! hands it data.
//!
//! - [`ExecCx`] is passed to every [`super::DocStream::next`] call: the read view
//!   ([`Source`], a snapshot or a transaction), the collection metadata of that view
//!   ([`Catalog`]) and the server ([`Host`]). A cursor builds a fresh one for each batch, so a
//!   streaming pipeline pins no snapshot between batches.
//! - [`Host`] is the server: interrupt checks (`maxTimeMS`), the plan cache, server-level data
//!   (`$collStats`, `$indexStats`, `$listCatalog`, `$currentOp`, `$planCacheStats`) and the
//!   only way to write (`$out`, `$merge`): [`Host::write`] runs a closure in one write
//!   transaction given as a [`Writer`], and [`Host::ddl`] creates, renames and drops collections.
//! - [`Options`] are fixed when a pipeline is opened: memory limits and spilling.
//!
//! Invariant: `query` never opens storage itself; everything a pipeline reads or writes goes
//! through these traits, so the caller decides which snapshot or transaction it sees.

use std::path::PathBuf;
use std::sync::Arc;

use bson::{RawDocument, RawDocumentBuf};
use cairn_storage::catalog::CollectionMeta;

use crate::error::{QueryError, Result};
use crate::plan::{PlanCache, Source};

/// Collection metadata as the read view sees it.
pub trait Catalog {
    /// `db.name`'s metadata, `None` when it does not exist.
    fn collection(&self, db: &str, name: &str) -> Result<Option<Arc<CollectionMeta>>>;

    /// When `db.name` is a view: what it reads (its base collection, `None` for a source
    /// stage such as `$documents`) and the stages to run first, its whole `viewOn` chain
    /// resolved. Sub-pipelines (`$lookup`, `$graphLookup`, `$unionWith`) read views through
    /// this.
    fn view(&self, _db: &str, _name: &str) -> Result<Option<(Option<String>, bson::RawArrayBuf)>> {
        Ok(None)
    }
}

/// Writes of one transaction (`$out`, `$merge`), implemented by the server over its write
/// transaction.
pub trait Writer {
    /// The transaction as a read source (its reads join its conflict checks).
    fn source(&self) -> &dyn Source;
    /// `db.name` as of this transaction.
    fn collection(&mut self, db: &str, name: &str) -> Result<Option<Arc<CollectionMeta>>>;
    /// Inserts a document whose first field is `_id` (DuplicateKey when it exists).
    fn insert(&mut self, coll: &CollectionMeta, doc: &RawDocument) -> Result<()>;
    /// Replaces the document stored under `key` (same `_id`).
    fn replace(&mut self, coll: &CollectionMeta, key: &[u8], doc: &RawDocument) -> Result<()>;
}

/// Catalog changes a pipeline may ask for.
#[derive(Debug, Clone, Copy)]
pub enum Ddl<'a> {
    /// Creates `db.name` (empty) with the options and indexes of `like` when given (`$out`'s
    /// temporary collection).
    CreateLike {
        /// Database.
        db: &'a str,
        /// Name.
        name: &'a str,
        /// The collection to copy options and indexes from.
        like: Option<&'a CollectionMeta>,
    },
    /// Creates `db.name` unless it exists (`$merge`'s implicit creation).
    Ensure {
        /// Database.
        db: &'a str,
        /// Name.
        name: &'a str,
    },
    /// Renames `from` to `to` in `db`, replacing `to` atomically.
    Replace {
        /// Database of both.
        db: &'a str,
        /// Source name.
        from: &'a str,
        /// Target database.
        to_db: &'a str,
        /// Target name.
        to: &'a str,
    },
    /// Drops `db.name` if it exists.
    Drop {
        /// Database.
        db: &'a str,
        /// Name.
        name: &'a str,
    },
}

/// What `$currentOp` asks for.
#[derive(Debug, Clone, Copy, Default)]
pub struct CurrentOpSpec {
    /// `allUsers`.
    pub all_users: bool,
    /// `idleConnections`.
    pub idle_connections: bool,
    /// `idleCursors`.
    pub idle_cursors: bool,
    /// `idleSessions`.
    pub idle_sessions: bool,
    /// `localOps`.
    pub local_ops: bool,
}

/// What `$collStats` asks for.
#[derive(Debug, Clone, Default)]
pub struct CollStatsSpec {
    /// `latencyStats` (and its `histograms` flag).
    pub latency: Option<bool>,
    /// `storageStats` (and its `scale`).
    pub storage: Option<i64>,
    /// `count`.
    pub count: bool,
    /// `queryExecStats`.
    pub query_exec: bool,
}

/// The server, as a pipeline sees it. Every method has a default that refuses, so tests can
/// implement only what they use.
pub trait Host: Send + Sync {
    /// Fails once the operation's time limit has passed (MaxTimeMSExpired) or it was killed.
    fn check_interrupt(&self) -> Result<()> {
        Ok(())
    }

    /// The plan cache for choosing plans (`None`: every choice races).
    fn plan_cache(&self) -> Option<&PlanCache> {
        None
    }

    /// Called as a plan works: the index keys and documents it examined since its last call,
    /// and the plan (what the operation reports as `keysExamined`, `docsExamined` and
    /// `planSummary`). Ignored by default.
    fn record_work(&self, _plan: &Arc<crate::plan::Plan>, _keys: u64, _docs: u64) {}

    /// The `$collStats` sections (`latencyStats`, `storageStats`, `count`, …) for a
    /// collection (`meta` is `None` when it does not exist), in MongoDB's order, after `ns`,
    /// `host` and `localTime`, which the stage adds itself.
    fn coll_stats(
        &self,
        _db: &str,
        _coll: &str,
        _meta: Option<&CollectionMeta>,
        _spec: &CollStatsSpec,
    ) -> Result<RawDocumentBuf> {
        Err(unsupported("$collStats"))
    }

    /// The host name as `$collStats` and `$indexStats` report it (`host:port`).
    fn host_name(&self) -> String {
        String::new()
    }

    /// One `$indexStats` document per index of `meta`.
    fn index_stats(&self, _meta: &CollectionMeta) -> Result<Vec<RawDocumentBuf>> {
        Err(unsupported("$indexStats"))
    }

    /// The storage catalog's entries (`$listCatalog`): of `(db, collection)` when given (none
    /// when it does not exist), else of every collection and then every view.
    fn list_catalog(&self, _ns: Option<(&str, &str)>) -> Result<Vec<RawDocumentBuf>> {
        Err(unsupported("$listCatalog"))
    }

    /// The logical sessions the server knows, with their last use (`$listLocalSessions`,
    /// `$listSessions`).
    fn sessions(&self) -> Result<Vec<([u8; 16], bson::DateTime)>> {
        Err(unsupported("$listLocalSessions"))
    }

    /// Change log entries after `after` (at most `max`), with the packed commit time through
    /// which the log has been trimmed (`$changeStream`).
    #[allow(clippy::type_complexity)]
    fn change_log(
        &self,
        _after: Option<(u64, u32)>,
        _max: usize,
    ) -> Result<(Vec<((u64, u32), RawDocumentBuf)>, u64)> {
        Err(unsupported("$changeStream"))
    }

    /// The operations `$currentOp` reports.
    fn current_op(&self, _spec: &CurrentOpSpec) -> Result<Vec<RawDocumentBuf>> {
        Err(unsupported("$currentOp"))
    }

    /// The plan cache entries of a namespace (`$planCacheStats`).
    fn plan_cache_stats(&self, _ns: &str, _meta: &CollectionMeta) -> Result<Vec<RawDocumentBuf>> {
        Err(unsupported("$planCacheStats"))
    }

    /// Runs `f` in one write transaction (rerun from the start on a write conflict).
    fn write(&self, _f: &mut dyn FnMut(&mut dyn Writer) -> Result<()>) -> Result<()> {
        Err(unsupported("writing"))
    }

    /// Changes the catalog.
    fn ddl(&self, _op: Ddl<'_>) -> Result<()> {
        Err(unsupported("changing the catalog"))
    }
}

fn unsupported(what: &str) -> QueryError {
    QueryError::NotImplemented(format!("{what} is not available here"))
}

/// A host with no server behind it (tests, `$documents` pipelines): nothing but the defaults.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHost;

impl Host for NoHost {}

/// A view with no data: no collections, no documents. Runs pipelines that never read
/// storage (update pipelines, `$documents` checks).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoData;

impl Catalog for NoData {
    fn collection(&self, _db: &str, _name: &str) -> Result<Option<Arc<CollectionMeta>>> {
        Ok(None)
    }
}

impl Source for NoData {
    fn scan_range(
        &self,
        _coll: &CollectionMeta,
        _range: (std::ops::Bound<&[u8]>, std::ops::Bound<&[u8]>),
        _resume: Option<&[u8]>,
        _reverse: bool,
        _limits: cairn_storage::store::ScanLimits,
        _pred: &mut dyn FnMut(&RawDocument) -> bool,
    ) -> std::result::Result<cairn_storage::store::ScanBatch, cairn_storage::StorageError> {
        Ok(cairn_storage::store::ScanBatch {
            docs: Vec::new(),
            resume: None,
            examined: 0,
        })
    }

    fn index_scan(
        &self,
        _idx: &cairn_storage::index::IndexMeta,
        _ranges: &[cairn_storage::index_ops::KeyRange],
        _reverse: bool,
        _limit: usize,
    ) -> std::result::Result<Vec<cairn_storage::index_ops::IndexHit>, cairn_storage::StorageError>
    {
        Ok(Vec::new())
    }

    fn get_by_key(
        &self,
        _coll: &CollectionMeta,
        _key: &[u8],
    ) -> std::result::Result<Option<RawDocumentBuf>, cairn_storage::StorageError> {
        Ok(None)
    }
}

/// The per-call view of the data.
#[derive(Clone, Copy)]
pub struct ExecCx<'a> {
    /// Reads documents and index entries.
    pub source: &'a dyn Source,
    /// Collection metadata of the same view.
    pub catalog: &'a dyn Catalog,
    /// The server.
    pub host: &'a dyn Host,
}

/// Limits and settings fixed for one run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Bytes a blocking stage (`$group`, `$sort`, `$bucketAuto`, …) may hold
    /// (`internalQueryMaxBlockingSortMemoryUsageBytes`, 100 MiB by default).
    pub memory_limit: usize,
    /// Whether blocking stages may spill to disk (`allowDiskUse`).
    pub allow_disk_use: bool,
    /// Where spill files go (the system temporary directory when `None`).
    pub spill_dir: Option<PathBuf>,
    /// Bytes `$setWindowFields` may hold (its partition cache and window functions):
    /// `internalDocumentSourceSetWindowFieldsMaxMemoryBytes`, 100 MiB by default.
    pub window_memory_limit: usize,
    /// Most documents `$densify` may generate (`internalQueryMaxAllowedDensifyDocs`, 500).
    pub densify_max_docs: usize,
    /// A change stream's progress, shared with the command (see
    /// [`crate::agg::stages::change_stream`]).
    pub stream: crate::agg::stages::change_stream::SharedProgress,
    /// Whether the run keeps per-stage counters (explain's `nReturned` and
    /// `executionTimeMillisEstimate`): a clock read around every call of every stage, so off
    /// unless explain asks.
    pub stage_stats: bool,
}

/// `internalDocumentSourceSetWindowFieldsMaxMemoryBytes`' default.
pub const DEFAULT_WINDOW_MEMORY_LIMIT_BYTES: usize = 100 * 1024 * 1024;

impl Default for Options {
    fn default() -> Options {
        Options {
            memory_limit: crate::sort::DEFAULT_MEMORY_LIMIT_BYTES,
            allow_disk_use: true,
            spill_dir: None,
            window_memory_limit: DEFAULT_WINDOW_MEMORY_LIMIT_BYTES,
            densify_max_docs: 500,
            stream: Default::default(),
            stage_stats: false,
        }
    }
}
