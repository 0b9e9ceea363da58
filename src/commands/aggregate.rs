//! `aggregate`: runs an aggregation pipeline ([`cairn_query::agg`]) and returns the first
//! batch of results with a cursor for the rest.
//!
//! `{aggregate: <collection> | 1, pipeline: [...], cursor: {batchSize}, explain, allowDiskUse,
//! hint, let, comment, maxTimeMS, bypassDocumentValidation, readConcern, writeConcern,
//! collation}`:
//! 1. Arguments are checked as MongoDB's IDL does (`pipeline` required and an array, `cursor`
//!    required unless `explain`, 9 / 14 / 51024 / 40415); `{aggregate: 1}` runs collectionless
//!    pipelines (`$documents`, `$currentOp`).
//! 2. [`AggRequest::prepare`] parses the pipeline with the command's `let` variables and
//!    optimizes it ([`cairn_query::agg::Aggregation::prepare`]).
//! 3. The first batch starts inline on the runtime worker under a read budget
//!    ([`blocking::run_budgeted`]) when every stage's work is bounded by what it reads and
//!    nothing writes ([`INLINE_STAGES`]); past the budget, or for any other pipeline, it runs
//!    off the worker ([`blocking::escalate`]). An inline attempt's work is recorded, and its
//!    cursor registered, only once its batch stands ([`Deferred`]). Every batch reads through
//!    the command's session target ([`crate::session::target::Target`]: a fresh snapshot, a
//!    `readConcern: snapshot` snapshot, or the session's transaction) and `$out`/`$merge`
//!    write through [`write_txn`] (the one place writes happen; never inside a transaction,
//!    as in MongoDB); the server side of the pipeline is [`ServerHost`].
//! 4. The first batch holds `cursor.batchSize` documents (101 by default) within 16 MiB; when
//!    more may follow, a cursor keeps the running pipeline ([`PipelineCursor`]): a streaming
//!    pipeline keeps only its position and reads each `getMore` batch from a fresh snapshot;
//!    blocking stages keep their buffered results.
//! 5. A pipeline ending in `$out`/`$merge` runs to completion and returns an empty batch.
//!
//! Runtime errors carry MongoDB's prefix `PlanExecutor error during aggregation :: caused by
//! :: `; parse errors do not. `explain` (the field, or the `explain` command wrapping
//! `aggregate`) is [`explain`].

use std::sync::{Arc, Weak};

use std::time::Instant;

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use cairn_query::agg::{
    Aggregation, Catalog, CollStatsSpec, CurrentOpSpec, Ddl, ExecCx, Host, Options, ParseCx,
    Pipeline, Running, Writer,
};
use cairn_query::plan::{Hint, PlanCache, Source};
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::{Durability, Store, WriteTxn};

use super::{CmdFuture, Command, Counter, Fields, Invocation, Request, opt_strict_bool, type_name};
use crate::blocking::{self, ReadBudget};
use crate::cursor::{Cursor, MAX_BATCH_BYTES};
use crate::error::{CommandError, ErrorCode};
use crate::session::target::{ReadView, Target};
use crate::state::ServerState;
use cairn_query::agg::stages::change_stream::SharedProgress;

/// Default first batch size.
pub const DEFAULT_BATCH: usize = 101;

const FIELDS: &[&str] = &[
    "allowDiskUse",
    "bypassDocumentValidation",
    "collation",
    "collectionUUID",
    "cursor",
    "explain",
    "fromMongos",
    "hint",
    "isMapReduceCommand",
    "let",
    "needsMerge",
    "pipeline",
];

/// `aggregate`.
pub static COMMAND: Command = Command {
    name: "aggregate",
    aliases: &[],
    help: "Runs the aggregation command. See http://dochub.mongodb.org/core/aggregation for more \
           details.",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Strict(FIELDS),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::aggregate),
    run,
};

/// A parsed `aggregate` command.
pub struct AggRequest {
    /// Database.
    pub db: String,
    /// Collection, `None` for `{aggregate: 1}`.
    pub coll: Option<String>,
    /// The pipeline as given.
    pub pipeline: RawArrayBuf,
    /// `explain: true`.
    pub explain: bool,
    /// `cursor.batchSize`.
    pub batch_size: Option<i64>,
    /// `allowDiskUse` (the server default when absent).
    pub allow_disk_use: bool,
    /// `hint`.
    pub hint: Hint,
    /// The command's language (its `let` variables).
    pub lang: crate::lang::Lang,
    /// Durability for `$out`/`$merge`.
    pub durability: Durability,
    /// The view the command named, once [`AggRequest::resolve_view`] replaced `coll` and
    /// `pipeline` by what it reads.
    pub view: Option<String>,
    /// `bypassDocumentValidation` for `$out`/`$merge`.
    pub bypass: bool,
}

fn invalid_bson(e: impl std::fmt::Display) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

impl AggRequest {
    /// Parses and checks an `aggregate` command body.
    /// `wrapped`: the command is explained by the `explain` command (no `cursor` needed).
    pub fn parse(
        req: &Request<'_>,
        server: &ServerState,
        wrapped: bool,
    ) -> Result<AggRequest, CommandError> {
        Self::parse_args(req, &super::Parsed::parse(req.body), server, wrapped)
    }

    /// [`AggRequest::parse`] reading the body's fields from `args`, `req.body`'s
    /// [`super::Parsed`] table (the dispatcher's answers each lookup without walking the body
    /// again).
    pub fn parse_args<'a>(
        req: &Request<'a>,
        args: &super::Parsed<'a>,
        server: &ServerState,
        wrapped: bool,
    ) -> Result<AggRequest, CommandError> {
        let db = req.db.to_string();
        let coll = match args.first() {
            Some(Ok((_, RawBsonRef::String(_)))) => {
                Some(super::collection_arg_parsed(req, args)?.to_string())
            }
            Some(Ok((
                _,
                v @ (RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_)),
            ))) => {
                let one = match v {
                    RawBsonRef::Int32(i) => i == 1,
                    RawBsonRef::Int64(i) => i == 1,
                    RawBsonRef::Double(d) => d == 1.0,
                    _ => false,
                };
                if !one {
                    return Err(CommandError::new(
                        ErrorCode::FailedToParse,
                        "Invalid command format: the 'aggregate' field must specify a collection \
                         name or 1",
                    ));
                }
                None
            }
            Some(Ok((_, other))) => {
                return Err(CommandError::new(
                    ErrorCode::InvalidNamespace,
                    format!("collection name has invalid type {}", type_name(&other)),
                ));
            }
            _ => {
                return Err(CommandError::new(
                    ErrorCode::InvalidNamespace,
                    "no collection name",
                ));
            }
        };
        let pipeline = match args.get("pipeline") {
            Ok(Some(RawBsonRef::Array(a))) => a.to_owned(),
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "aggregate.pipeline",
                    type_name(&other),
                    "array",
                ));
            }
            Ok(None) => return Err(CommandError::missing_field("aggregate.pipeline")),
            Err(e) => return Err(e),
        };
        let explain = opt_strict_bool(args, "aggregate", "explain")?.unwrap_or(false);
        if wrapped && explain {
            return Err(CommandError::new(
                ErrorCode::FailedToParse,
                "explain cannot explain itself.",
            ));
        }
        let batch_size = match args.get("cursor") {
            Ok(None) => {
                if !explain && !wrapped {
                    return Err(CommandError::new(
                        ErrorCode::FailedToParse,
                        "The 'cursor' option is required, except for aggregate with the explain \
                         argument",
                    ));
                }
                None
            }
            Ok(Some(RawBsonRef::Document(c))) => {
                for el in c.iter() {
                    let (k, _) = el.map_err(invalid_bson)?;
                    if k.as_str() != "batchSize" {
                        return Err(CommandError::unknown_field("cursor", k.as_str()));
                    }
                }
                super::opt_count(c, "cursor", "batchSize")?
            }
            Ok(Some(_)) => {
                return Err(CommandError::new(
                    ErrorCode::TypeMismatch,
                    "cursor field must be missing or an object",
                ));
            }
            Err(e) => return Err(e),
        };
        let allow_disk_use = opt_strict_bool(args, "aggregate", "allowDiskUse")?
            .unwrap_or(server.config.allow_disk_use_by_default);
        let bypass =
            opt_strict_bool(args, "aggregate", "bypassDocumentValidation")?.unwrap_or(false);
        if let Some(c) = super::opt_document(args, "aggregate", "collation")?
            && !matches!(c.get("locale"), Ok(Some(RawBsonRef::String("simple"))))
        {
            return Err(CommandError::new(
                ErrorCode::NotImplemented,
                "collations other than simple are not supported by Cairn yet",
            ));
        }
        let hint = super::args::parse_hint(args, "aggregate")?;
        let lang =
            crate::lang::Lang::for_command(args, "aggregate", crate::lang::cluster_time(server))?;
        let durability = crate::write_concern::WriteConcern::from_command(args)?.durability();
        Ok(AggRequest {
            db,
            coll,
            pipeline,
            explain,
            batch_size,
            allow_disk_use,
            hint,
            lang,
            durability,
            view: None,
            bypass,
        })
    }

    /// `db.coll` (the view's name on a view), or `db.$cmd.aggregate`.
    pub fn ns(&self) -> String {
        match (&self.view, &self.coll) {
            (Some(c), _) | (None, Some(c)) => cairn_query::plan::namespace(&self.db, c),
            (None, None) => cairn_query::plan::namespace(&self.db, "$cmd.aggregate"),
        }
    }

    /// A read-only request for a command other than `aggregate` run on a view: the view's
    /// stages then `own`, over what the view reads.
    pub fn for_view(
        server: &ServerState,
        db: &str,
        view: &str,
        resolved: crate::views::Resolved,
        own: &bson::RawArray,
        lang: crate::lang::Lang,
        hint: Hint,
    ) -> Result<AggRequest, CommandError> {
        Ok(AggRequest {
            db: db.to_string(),
            coll: resolved.base,
            pipeline: crate::views::concat(&resolved.stages, own)?,
            explain: false,
            batch_size: None,
            allow_disk_use: server.config.allow_disk_use_by_default,
            hint,
            lang,
            durability: Durability::Buffered,
            bypass: false,
            view: Some(view.to_string()),
        })
    }

    /// Runs the whole pipeline (blocking), handing each result to `f` until it returns false.
    pub fn drain(
        &self,
        server: &ServerState,
        target: &Target,
        mut f: impl FnMut(RawDocumentBuf) -> Result<bool, CommandError>,
    ) -> Result<(), CommandError> {
        let agg = self.prepare()?;
        check_target(target, agg.writes())?;
        let mut running = agg.open(self.options(server))?;
        target.read(&server.store, |view| {
            let host = ServerHost::new(server, self.durability);
            let catalog = ViewCatalog(view);
            let cx = ExecCx {
                source: view.source(),
                catalog: &catalog,
                host: &host,
            };
            while let Some(d) = running.next(&cx).map_err(executor_error)? {
                if !f(d)? {
                    break;
                }
            }
            Ok(())
        })
    }

    /// On a view: runs on what the view reads instead — its base collection (or the view
    /// definitions of `system.views`) with the view's pipeline before the command's
    /// ([`crate::views::resolve_in`], read through `target`).
    pub fn resolve_view(
        &mut self,
        server: &ServerState,
        target: &Target,
    ) -> Result<(), CommandError> {
        let Some(name) = self.coll.clone() else {
            return Ok(());
        };
        let Some(resolved) = crate::views::resolve_in(server, target, &self.db, &name)? else {
            return Ok(());
        };
        if let Some(Ok(RawBsonRef::Document(first))) = self.pipeline.into_iter().next()
            && first.get("$changeStream").ok().flatten().is_some()
        {
            return Err(CommandError::new(
                ErrorCode::CommandNotSupportedOnView,
                format!(
                    "Namespace {}.{name} is a view. $changeStream cannot be used on views",
                    self.db
                ),
            ));
        }
        // A leading `$collStats` reports on the view itself (latency statistics only), as
        // in MongoDB: the view's pipeline is not prepended.
        if let Some(Ok(RawBsonRef::Document(first))) = self.pipeline.into_iter().next()
            && let Ok(Some(RawBsonRef::Document(spec))) = first.get("$collStats")
        {
            if ["storageStats", "count", "queryExecStats"]
                .iter()
                .any(|f| spec.get(f).ok().flatten().is_some())
            {
                return Err(crate::views::not_a_collection(&self.db, &name));
            }
            return Ok(());
        }
        self.pipeline = crate::views::concat(&resolved.stages, &self.pipeline)?;
        self.coll = resolved.base;
        self.view = Some(name);
        Ok(())
    }

    /// Parses and optimizes the pipeline.
    pub fn prepare(&self) -> Result<Aggregation, CommandError> {
        let cx = ParseCx::new(&self.db, self.coll.as_deref(), self.lang.expr().clone());
        let pipeline = Pipeline::parse(&self.pipeline, &cx)?;
        Ok(Aggregation::prepare(pipeline, &cx, self.hint.clone())?)
    }

    /// The run's limits.
    pub fn options(&self, server: &ServerState) -> Options {
        Options {
            memory_limit: usize::try_from(server.config.sort_memory_limit_bytes)
                .unwrap_or(usize::MAX),
            allow_disk_use: self.allow_disk_use,
            spill_dir: Some(server.config.data_dir.join(crate::cursor::SPILL_DIR)),
            window_memory_limit: usize::try_from(server.config.window_memory_limit_bytes)
                .unwrap_or(usize::MAX),
            ..Options::default()
        }
    }
}

/// The stages of a pipeline that may start inline ([`blocking::run_budgeted`]): their work
/// is bounded by the documents they read, and they write nothing. Stages that produce
/// documents without reading (`$documents`, `$densify`, `$collStats`, `$currentOp`, ...),
/// run sub-pipelines (`$lookup`, `$unionWith`, `$facet`, `$graphLookup`) or write (`$out`,
/// `$merge`), and change streams, run off the worker from the start.
const INLINE_STAGES: &[&str] = &[
    "$cursor",
    "$match",
    "$group",
    "$project",
    "$addFields",
    "$set",
    "$unset",
    "$sort",
    "$limit",
    "$skip",
    "$count",
    "$unwind",
    "$replaceRoot",
    "$replaceWith",
    "$redact",
    "$bucketAuto",
];

/// Whether `agg` may start inline: a collection's pipeline of [`INLINE_STAGES`] only.
fn inline_ok(agg: &Aggregation) -> bool {
    agg.cursor.is_some()
        && !agg.writes()
        && !agg.is_change_stream()
        && agg.stage_names().iter().all(|s| INLINE_STAGES.contains(s))
}

/// A stage name as a BSON key.
pub fn stage_key(name: &str) -> Result<&bson::raw::CStr, CommandError> {
    crate::error::key(name)
}

/// MongoDB's prefix for errors raised while a pipeline runs.
pub fn executor_error(e: impl Into<CommandError>) -> CommandError {
    let mut e = e.into();
    if !e
        .message
        .starts_with("PlanExecutor error during aggregation")
    {
        e.message = format!(
            "PlanExecutor error during aggregation :: caused by :: {}",
            e.message
        );
    }
    e
}

/// The catalog of one batch's read view (the committed catalog, or a transaction's).
struct ViewCatalog<'a, 'b, 's>(&'a ReadView<'b, 's>);

impl Catalog for ViewCatalog<'_, '_, '_> {
    fn collection(&self, db: &str, name: &str) -> cairn_query::Result<Option<Arc<CollectionMeta>>> {
        self.0
            .collection(db, name)
            .map_err(|e| cairn_query::QueryError::Location(e.code.code(), e.message))
    }

    fn view(
        &self,
        db: &str,
        name: &str,
    ) -> cairn_query::Result<Option<(Option<String>, RawArrayBuf)>> {
        crate::views::resolve(self.0, db, name)
            .map(|r| r.map(|r| (r.base, r.stages)))
            .map_err(|e| cairn_query::QueryError::Location(e.code.code(), e.message))
    }
}

/// A write transaction as `$out`/`$merge` see it.
struct TxWriter<'a, 't>(&'a mut WriteTxn<'t>);

impl Writer for TxWriter<'_, '_> {
    fn source(&self) -> &dyn Source {
        &*self.0
    }

    fn collection(
        &mut self,
        db: &str,
        name: &str,
    ) -> cairn_query::Result<Option<Arc<CollectionMeta>>> {
        Ok(self.0.collection(db, name)?)
    }

    fn insert(&mut self, coll: &CollectionMeta, doc: &RawDocument) -> cairn_query::Result<()> {
        Ok(self.0.insert(coll, doc)?)
    }

    fn replace(
        &mut self,
        coll: &CollectionMeta,
        key: &[u8],
        doc: &RawDocument,
    ) -> cairn_query::Result<()> {
        self.0.replace(coll, key, doc)?;
        Ok(())
    }
}

/// A query error that a storage conflict caused, so the write can be retried.
#[derive(Debug)]
struct WriteError(cairn_query::QueryError);

impl From<cairn_storage::StorageError> for WriteError {
    fn from(e: cairn_storage::StorageError) -> WriteError {
        WriteError(e.into())
    }
}

impl cairn_storage::TxError for WriteError {
    fn retryable(&self) -> bool {
        matches!(&self.0, cairn_query::QueryError::Storage(s) if s.is_transient())
    }
}

/// The one place an aggregation writes (`$out`, `$merge`): `f` runs in a write transaction,
/// rerun on conflicts; the target's validator checks every document unless `bypass`
/// (`bypassDocumentValidation`).
pub fn write_txn(
    store: &Store,
    durability: Durability,
    bypass: bool,
    f: &mut dyn FnMut(&mut dyn Writer) -> cairn_query::Result<()>,
) -> cairn_query::Result<()> {
    store
        .write(durability, |tx| {
            tx.set_bypass_validation(bypass);
            f(&mut TxWriter(tx)).map_err(WriteError)
        })
        .map_err(|e| e.0)
}

/// The server as a pipeline sees it.
pub struct ServerHost<'a> {
    server: &'a ServerState,
    durability: Durability,
    bypass: bool,
    /// Set in an inline attempt: the work it reports is held here until it succeeds.
    deferred: Option<&'a Deferred>,
    /// The command's interruption context, taken where the host is made: a read-ahead
    /// thread reports work and checks for interruption through it too.
    ctx: crate::deadline::Interrupt,
}

/// The work an inline attempt reported ([`Host::record_work`]), held until the attempt is
/// known to stand: then it is recorded as it would have been ([`Deferred::record`]); an
/// abandoned attempt instead takes back the index uses its plans counted
/// ([`Deferred::forget`]), since the rerun counts them again.
#[derive(Default)]
pub struct Deferred(std::sync::Mutex<DeferredWork>);

#[derive(Default)]
struct DeferredWork {
    keys: u64,
    docs: u64,
    plans: Vec<Arc<cairn_query::plan::Plan>>,
}

impl Deferred {
    fn add(&self, plan: &Arc<cairn_query::plan::Plan>, keys: u64, docs: u64) {
        let mut w = self.0.lock().unwrap_or_else(|p| p.into_inner());
        w.keys += keys;
        w.docs += docs;
        if !w.plans.iter().any(|p| Arc::ptr_eq(p, plan)) {
            w.plans.push(plan.clone());
        }
    }

    /// Records the held work in the running operation, as [`ServerHost::record_work`] does.
    pub fn record(self) {
        let w = self.0.into_inner().unwrap_or_else(|p| p.into_inner());
        for plan in &w.plans {
            record_work_now(plan, 0, 0);
        }
        crate::ops::record_work(w.keys, w.docs);
    }

    /// Takes back the index uses the plans chosen on `ns` counted in the plan cache.
    pub fn forget(self, server: &ServerState, ns: &str) {
        let w = self.0.into_inner().unwrap_or_else(|p| p.into_inner());
        for plan in &w.plans {
            server.plan_cache.forget_use(ns, plan);
        }
    }
}

/// The work of `plan` recorded in the running operation: its keys and documents examined,
/// and the plan itself when none is recorded yet.
fn record_work_now(plan: &Arc<cairn_query::plan::Plan>, keys: u64, docs: u64) {
    crate::ops::record_work(keys, docs);
    if let Some(op) = crate::deadline::context().op
        && !op.has_plan()
    {
        crate::ops::record_chosen_plan(plan);
    }
}

impl<'a> ServerHost<'a> {
    /// The host for one batch.
    pub fn new(server: &'a ServerState, durability: Durability) -> ServerHost<'a> {
        ServerHost {
            server,
            durability,
            bypass: false,
            deferred: None,
            ctx: crate::deadline::context(),
        }
    }

    /// The work reported is held in `deferred` (an inline attempt, see [`Deferred`]).
    pub fn deferring(mut self, deferred: Option<&'a Deferred>) -> ServerHost<'a> {
        self.deferred = deferred;
        self
    }

    /// Writes (`$out`, `$merge`) skip document validation (`bypassDocumentValidation`).
    pub fn bypassing_validation(mut self, bypass: bool) -> ServerHost<'a> {
        self.bypass = bypass;
        self
    }
}

/// The pipeline's target, refusing what MongoDB refuses: `$out`/`$merge` inside a transaction
/// (263) or with a snapshot read concern (72).
fn check_target(target: &Target, writes: bool) -> Result<(), CommandError> {
    if !writes {
        return Ok(());
    }
    match target {
        Target::Txn(_) => Err(CommandError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            "$out and $merge cannot be used in a transaction",
        )),
        Target::Snapshot(..) => Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "$out and $merge cannot be used with readConcern level snapshot",
        )),
        Target::Auto => Ok(()),
    }
}

fn query_error(e: CommandError) -> cairn_query::QueryError {
    cairn_query::QueryError::Location(e.code.code(), e.message)
}

impl Host for ServerHost<'_> {
    fn change_log(
        &self,
        after: Option<(u64, u32)>,
        max: usize,
    ) -> cairn_query::Result<(Vec<((u64, u32), RawDocumentBuf)>, u64)> {
        Ok(self.server.store.read_changes(after, max)?)
    }

    fn sessions(&self) -> cairn_query::Result<Vec<([u8; 16], bson::DateTime)>> {
        Ok(self
            .server
            .sessions
            .all()
            .into_iter()
            .map(|s| {
                let st = s.state.lock().unwrap_or_else(|p| p.into_inner());
                (s.lsid, bson::DateTime::from_system_time(st.last_use))
            })
            .collect())
    }

    fn check_interrupt(&self) -> cairn_query::Result<()> {
        crate::deadline::with_thread_context(self.ctx.clone(), crate::deadline::check)
            .map_err(query_error)
    }

    /// The plan is recorded once, unrendered (its `planSummary` is built when read).
    fn record_work(&self, plan: &Arc<cairn_query::plan::Plan>, keys: u64, docs: u64) {
        match self.deferred {
            Some(d) => d.add(plan, keys, docs),
            None => crate::deadline::with_thread_context(self.ctx.clone(), || {
                record_work_now(plan, keys, docs)
            }),
        }
    }

    fn plan_cache(&self) -> Option<&PlanCache> {
        Some(&self.server.plan_cache)
    }

    fn host_name(&self) -> String {
        format!("{}:{}", self.server.host, self.server.config.port)
    }

    fn coll_stats(
        &self,
        db: &str,
        coll: &str,
        meta: Option<&CollectionMeta>,
        spec: &CollStatsSpec,
    ) -> cairn_query::Result<RawDocumentBuf> {
        let ns = format!("{db}.{coll}");
        let not_found = |what: &str| {
            cairn_query::QueryError::Location(
                26,
                format!(
                    "Unable to retrieve {what} in $collStats stage :: caused by :: Collection \
                     [{ns}] not found."
                ),
            )
        };
        let mut d = RawDocumentBuf::new();
        if let Some(h) = spec.latency {
            d.append(cstr!("latencyStats"), self.server.latency.document(&ns, h));
        }
        if let Some(scale) = spec.storage {
            let meta = meta.ok_or_else(|| not_found("storageStats"))?;
            let stats = super::coll_stats::storage_stats(&self.server.store, meta, scale)
                .map_err(query_error)?;
            d.append(cstr!("storageStats"), stats);
        }
        if spec.count {
            let meta = meta.ok_or_else(|| not_found("count"))?;
            let n = self.server.store.stats(meta)?.count;
            let mut c = RawDocumentBuf::new();
            super::args::append_number(&mut c, cstr!("count"), n);
            crate::error::append_all(&mut d, &c);
        }
        if spec.query_exec {
            let scans = self
                .server
                .plan_cache
                .usage(&ns, "$collscan")
                .map_or(0, |(n, _)| n);
            let scans = i64::try_from(scans).unwrap_or(i64::MAX);
            d.append(
                cstr!("queryExecStats"),
                rawdoc! {"collectionScans": {"total": scans, "nonTailable": scans}},
            );
        }
        Ok(d)
    }

    fn index_stats(&self, meta: &CollectionMeta) -> cairn_query::Result<Vec<RawDocumentBuf>> {
        let ns = meta.namespace();
        let started = bson::DateTime::from_system_time(self.server.started_at);
        let mut out = Vec::new();
        for idx in &meta.indexes {
            let (ops, since) = match self.server.plan_cache.usage(&ns, &idx.name) {
                Some((n, ms)) => (n, bson::DateTime::from_millis(ms)),
                None => (0, started),
            };
            let mut d = rawdoc! {
                "name": idx.name.clone(),
                "key": idx.key_pattern().map(RawDocument::to_owned).unwrap_or_default(),
                "host": self.host_name(),
                "accesses": {"ops": i64::try_from(ops).unwrap_or(i64::MAX), "since": since},
                "spec": idx.list_spec(),
            };
            if idx.state != cairn_storage::index::IndexState::Ready {
                d.append(cstr!("building"), true);
            }
            out.push(d);
        }
        Ok(out)
    }

    fn list_catalog(&self, ns: Option<(&str, &str)>) -> cairn_query::Result<Vec<RawDocumentBuf>> {
        let catalog = self.server.store.catalog();
        let Some((db, coll)) = ns else {
            let mut out: Vec<RawDocumentBuf> = catalog.all().map(|m| catalog_entry(m)).collect();
            for db in catalog.databases() {
                out.extend(catalog.views_in(&db).map(|v| {
                    let ns = v.namespace();
                    let mut d = rawdoc! {
                        "db": v.db.as_str(),
                        "name": v.name.as_str(),
                        "type": "view",
                        "ns": ns.as_str(),
                        "_id": ns.as_str(),
                    };
                    crate::error::append_all(&mut d, &v.description());
                    d
                }));
            }
            return Ok(out);
        };
        Ok(catalog
            .get(db, coll)
            .map(|m| catalog_entry(m))
            .into_iter()
            .collect())
    }

    fn current_op(&self, spec: &CurrentOpSpec) -> cairn_query::Result<Vec<RawDocumentBuf>> {
        Ok(super::current_op::operations(
            self.server,
            &self.host_name(),
            spec.idle_connections,
        ))
    }

    fn plan_cache_stats(
        &self,
        ns: &str,
        meta: &CollectionMeta,
    ) -> cairn_query::Result<Vec<RawDocumentBuf>> {
        let sig = cairn_query::plan::signature(meta);
        Ok(self
            .server
            .plan_cache
            .entries_for(ns)
            .into_iter()
            .map(|e| {
                rawdoc! {
                    "version": "1",
                    "queryHash": super::explain::hash8(&e.shape),
                    "planCacheKey": super::explain::hash8(&format!("{}|{sig}", e.shape)),
                    "isActive": true,
                    "works": i64::try_from(e.works).unwrap_or(i64::MAX),
                    "cachedPlan": {"plan": e.plan_key},
                    "shape": e.shape,
                    "host": self.host_name(),
                }
            })
            .collect())
    }

    fn write(
        &self,
        f: &mut dyn FnMut(&mut dyn Writer) -> cairn_query::Result<()>,
    ) -> cairn_query::Result<()> {
        write_txn(&self.server.store, self.durability, self.bypass, f)
    }

    fn ddl(&self, op: Ddl<'_>) -> cairn_query::Result<()> {
        let store = &self.server.store;
        match op {
            Ddl::CreateLike { db, name, like } => {
                let options = like.map(|l| l.options.clone()).unwrap_or_default();
                store.create_collection(db, name, &options)?;
                if let Some(l) = like {
                    let specs: Vec<RawDocumentBuf> =
                        l.secondary_indexes().map(|i| i.list_spec()).collect();
                    if !specs.is_empty() {
                        let created = store.create_indexes(db, name, &specs)?;
                        for n in created.new {
                            store.build_index(db, name, &n, &|_| {})?;
                        }
                    }
                }
            }
            Ddl::Ensure { db, name } => {
                store.ensure_collection(db, name)?;
            }
            Ddl::Replace {
                db,
                from,
                to_db,
                to,
            } => {
                store.rename_collection((db, from), (to_db, to), true)?;
                self.server
                    .plan_cache
                    .clear_namespace(&format!("{to_db}.{to}"));
            }
            Ddl::Drop { db, name } => {
                store.drop_collection(db, name)?;
            }
        }
        Ok(())
    }
}

/// A running pipeline kept by a cursor between batches.
pub struct PipelineCursor {
    running: Running,
    server: Weak<ServerState>,
    durability: Durability,
    target: Target,
    /// For a change stream: its progress (resume token, invalidation).
    stream: Option<SharedProgress>,
}

impl PipelineCursor {
    /// A change stream's `postBatchResumeToken`.
    pub fn post_batch_resume_token(&self) -> Option<RawDocumentBuf> {
        let p = self.stream.as_ref()?;
        p.lock().ok().and_then(|p| p.pbrt.clone())
    }

    /// Whether this is a change stream (a tailable, awaitData cursor).
    pub fn is_change_stream(&self) -> bool {
        self.stream.is_some()
    }
}

/// The change stream error for a pipeline that changed an event's `_id` (its resume token).
fn id_modified(expected: &RawDocument, found: &RawDocument) -> CommandError {
    CommandError::new(
        ErrorCode::ChangeStreamFatalError,
        format!(
            "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed. Expected: {} but found: {}",
            cairn_storage::display::document(&rawdoc! {"_id": expected.to_owned()}),
            cairn_storage::display::document(found)
        ),
    )
    .with_label("NonResumableChangeStreamError")
}

/// A change stream's batch: the events, each checked to keep its resume token as `_id`.
fn stream_batch(
    server: &ServerState,
    target: &Target,
    running: &mut Running,
    durability: Durability,
    progress: &SharedProgress,
    max_docs: usize,
) -> Result<(Vec<RawDocumentBuf>, bool), CommandError> {
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while out.len() < max_docs {
        let (docs, eof) = batch(server, target, running, durability, 1)?;
        for d in docs {
            let expected = progress.lock().ok().and_then(|p| p.pbrt.clone());
            match (expected, d.get_document("_id")) {
                (Some(e), Ok(id)) if e.as_bytes() == id.as_bytes() => {}
                (Some(e), _) => return Err(id_modified(&e, &d)),
                (None, _) => {}
            }
            bytes += d.as_bytes().len();
            out.push(d);
        }
        let invalidated = progress.lock().map(|p| p.invalidated).unwrap_or(false);
        if eof || bytes >= MAX_BATCH_BYTES / 2 {
            return Ok((out, eof && invalidated));
        }
    }
    Ok((out, false))
}

impl std::fmt::Debug for PipelineCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineCursor").finish()
    }
}

/// Pulls up to `max_docs` documents (within 16 MiB) from a running pipeline on a fresh read
/// view. Returns the documents and whether the pipeline is exhausted.
pub fn next_batch(
    p: &mut PipelineCursor,
    max_docs: usize,
) -> Result<(Vec<RawDocumentBuf>, bool), CommandError> {
    let server = p.server.upgrade().ok_or_else(|| {
        CommandError::new(ErrorCode::ShutdownInProgress, "the server is shutting down")
    })?;
    let target = p.target.clone();
    match p.stream.clone() {
        Some(progress) => stream_batch(
            &server,
            &target,
            &mut p.running,
            p.durability,
            &progress,
            max_docs,
        ),
        None => batch(&server, &target, &mut p.running, p.durability, max_docs),
    }
}

/// Pulls up to `max_docs` documents from `running` on a read view of `target` (a fresh
/// snapshot outside transactions).
pub(crate) fn batch(
    server: &ServerState,
    target: &Target,
    running: &mut Running,
    durability: Durability,
    max_docs: usize,
) -> Result<(Vec<RawDocumentBuf>, bool), CommandError> {
    batch_writing(server, target, running, durability, false, max_docs, None)
}

/// [`batch`] whose `$out`/`$merge` writes bypass document validation when `bypass`; with
/// `inline`, an inline attempt's: reads count against its budget and the work reported is
/// deferred.
fn batch_writing(
    server: &ServerState,
    target: &Target,
    running: &mut Running,
    durability: Durability,
    bypass: bool,
    max_docs: usize,
    inline: Option<(&ReadBudget, &Deferred)>,
) -> Result<(Vec<RawDocumentBuf>, bool), CommandError> {
    target.read(&server.store, |view| {
        let host = ServerHost::new(server, durability)
            .bypassing_validation(bypass)
            .deferring(inline.map(|(_, d)| d));
        let catalog = ViewCatalog(view);
        let budgeted = inline.map(|(b, _)| b.source(view.source()));
        let cx = ExecCx {
            source: match &budgeted {
                Some(b) => b,
                None => view.source(),
            },
            catalog: &catalog,
            host: &host,
        };
        let mut out = Vec::new();
        let mut bytes = 0usize;
        while out.len() < max_docs {
            match running.next(&cx).map_err(executor_error)? {
                Some(d) => {
                    let len = d.as_bytes().len();
                    if !out.is_empty() && bytes + len > MAX_BATCH_BYTES {
                        running.push_back(d);
                        return Ok((out, false));
                    }
                    bytes += len;
                    out.push(d);
                }
                None => return Ok((out, true)),
            }
        }
        Ok((out, false))
    })
}

/// How to start a pipeline for a command: where it reads, its cursor's namespace and first
/// batch, and what its cursor carries (session, transaction, time budget).
pub(crate) struct Start {
    /// The server.
    pub server: Arc<ServerState>,
    /// Where the pipeline reads.
    pub target: Target,
    /// The cursor's namespace (the view's on a view).
    pub ns: String,
    /// The first batch's size.
    pub first_max: usize,
    /// No cursor after the first batch.
    pub single_batch: bool,
    /// The command's session.
    pub lsid: Option<Vec<u8>>,
    /// The command's transaction number.
    pub txn_number: Option<i64>,
    /// The command's deadline.
    pub deadline: Option<Instant>,
}

impl Start {
    /// Prepares and opens `r`'s pipeline, returns its first batch, the id of the cursor
    /// holding the rest (0: none) and, for a change stream, its post-batch resume token.
    /// Blocking.
    pub fn run(
        self,
        r: &AggRequest,
    ) -> Result<(Vec<RawDocumentBuf>, i64, Option<RawDocumentBuf>), CommandError> {
        self.run_with(r, None)
    }

    /// [`Start::run`]; with a `budget`, an inline attempt ([`blocking::run_budgeted`]): a
    /// pipeline that may run inline ([`inline_ok`]) reads its first batch through the
    /// budget and, once that batch stands, records its work and registers its cursor; any
    /// other moves off the worker first ([`blocking::escalate`]).
    pub fn run_with(
        &self,
        r: &AggRequest,
        budget: Option<&ReadBudget>,
    ) -> Result<(Vec<RawDocumentBuf>, i64, Option<RawDocumentBuf>), CommandError> {
        let agg = r.prepare()?;
        match budget {
            Some(b) if inline_ok(&agg) => self.run_prepared(r, agg, Some(b)),
            Some(_) => blocking::escalate(|| self.run_prepared(r, agg, None)),
            None => self.run_prepared(r, agg, None),
        }
    }

    fn run_prepared(
        &self,
        r: &AggRequest,
        agg: Aggregation,
        budget: Option<&ReadBudget>,
    ) -> Result<(Vec<RawDocumentBuf>, i64, Option<RawDocumentBuf>), CommandError> {
        let server = &self.server;
        let target = &self.target;
        let writes = agg.writes();
        check_target(target, writes)?;
        let opts = r.options(server);
        let stream = agg.is_change_stream().then(|| opts.stream.clone());
        if let Some(p) = &stream {
            if target.in_txn() {
                return Err(CommandError::new(
                    ErrorCode::OperationNotSupportedInTransaction,
                    "Operation not permitted in transaction :: caused by :: Aggregation stage $changeStream cannot run within a multi-document transaction.",
                ));
            }
            if let Ok(mut p) = p.lock() {
                p.start = Some(server.store.clock.last());
            }
        }
        let mut running = agg.open(opts)?;
        let mut pbrt = None;
        let (docs, exhausted) = if let Some(progress) = &stream {
            // A router's first reply establishes the stream and returns no event.
            let (_, _) = stream_batch(server, target, &mut running, r.durability, progress, 0)?;
            pbrt = progress.lock().ok().and_then(|p| p.pbrt.clone());
            (Vec::new(), false)
        } else if writes {
            let (_, done) = batch_writing(
                server,
                target,
                &mut running,
                r.durability,
                r.bypass,
                usize::MAX,
                None,
            )?;
            (Vec::new(), done)
        } else if let Some(budget) = budget {
            let deferred = Deferred::default();
            let out = batch_writing(
                server,
                target,
                &mut running,
                r.durability,
                false,
                self.first_max,
                Some((budget, &deferred)),
            );
            if budget.tripped() {
                // Abandoned: the rerun counts its own work and index uses.
                let ns = cairn_query::plan::namespace(&r.db, r.coll.as_deref().unwrap_or(""));
                deferred.forget(server, &ns);
                return Err(ReadBudget::error().into());
            }
            deferred.record();
            out?
        } else {
            batch(server, target, &mut running, r.durability, self.first_max)?
        };
        if exhausted || (self.single_batch && stream.is_none()) {
            return Ok((docs, 0, None));
        }
        let time_budget = match stream {
            Some(_) => None,
            None => self
                .deadline
                .map(|d| d.saturating_duration_since(Instant::now())),
        };
        let mut cursor = Cursor {
            id: server.cursors.new_id(),
            ns: self.ns.clone(),
            source: crate::cursor::Source::Pipeline(Box::new(PipelineCursor {
                running,
                server: Arc::downgrade(server),
                durability: r.durability,
                target: target.clone(),
                stream,
            })),
            remaining: None,
            output: None,
            time_budget,
            lsid: self.lsid.clone(),
            txn_number: self.txn_number,
            target: target.clone(),
            no_timeout: false,
            last_used: Instant::now(),
        };
        let id = cursor.id;
        cursor.last_used = Instant::now();
        server.cursors.insert(cursor);
        Ok((docs, id, pbrt))
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let r = AggRequest::parse_args(&inv.req, inv.parsed, inv.server, false)?;
        let ns = r.ns();
        if r.explain {
            let server = inv.server.clone();
            let db = r.db.clone();
            let target = inv.op.target.clone();
            let mut r = r;
            let mut out = blocking::run(move || {
                r.resolve_view(&server, &target)?;
                super::explain::explain_aggregate(&server, &r, super::explain::QUERY_PLANNER)
            })
            .await?;
            let port = inv.client.local.port();
            super::explain::append_server_info(&mut out, inv.server, port, &db, body.to_owned());
            return Ok(out.into());
        }
        let first_max = r
            .batch_size
            .map_or(DEFAULT_BATCH, |b| usize::try_from(b).unwrap_or(usize::MAX));
        let start = Start {
            server: inv.server.clone(),
            target: inv.op.target.clone(),
            ns: ns.clone(),
            first_max,
            single_batch: false,
            lsid: crate::cursor::session_in(inv.parsed.find("lsid")),
            txn_number: inv.op.txn_number(),
            deadline: crate::deadline::current(),
        };
        let at_cluster_time = inv.op.at_cluster_time;
        // Every pipeline starts inline under a read budget; one that may not run inline
        // ([`inline_ok`]) or trips the budget moves off the worker (see [`Start::run_with`]).
        let mut r = r;
        let mut resolved = false;
        let (docs, id, pbrt) = blocking::run_budgeted(move |budget| {
            if !resolved {
                r.resolve_view(&start.server, &start.target)?;
                resolved = true;
            }
            start.run_with(&r, budget)
        })
        .await?;
        Ok(first_reply(docs, pbrt, id, &ns, at_cluster_time))
    })
}

/// The first batch's reply, `{cursor: {firstBatch, postBatchResumeToken?, id, ns,
/// atClusterTime?}}`, written in one buffer ([`crate::cursor::batch_reply_counted`]; without
/// a resume token — all but change streams — the reply `find` gives).
fn first_reply(
    docs: Vec<RawDocumentBuf>,
    pbrt: Option<RawDocumentBuf>,
    id: i64,
    ns: &str,
    at_cluster_time: Option<bson::Timestamp>,
) -> super::Reply {
    crate::cursor::batch_reply_counted(
        "firstBatch",
        &docs,
        pbrt.as_deref(),
        id,
        ns,
        at_cluster_time,
    )
}

/// A collection's `$listCatalog` entry: `{db, name, type, md: {ns, options, indexes}, idxIdent,
/// ns, ident}`, the idents naming the storage spaces that hold it.
fn catalog_entry(m: &CollectionMeta) -> RawDocumentBuf {
    let ns = m.namespace();
    let mut options = rawdoc! {
        "uuid": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: m.uuid.to_vec() },
    };
    crate::error::append_all(&mut options, &m.options);
    let mut indexes = RawArrayBuf::new();
    let mut idents = RawDocumentBuf::new();
    for idx in &m.indexes {
        indexes.push(rawdoc! {
            "spec": idx.list_spec(),
            "ready": idx.state == cairn_storage::index::IndexState::Ready,
            "multikey": idx.multikey,
        });
        if let Ok(name) = <&bson::raw::CStr>::try_from(idx.name.as_str()) {
            idents.append(name, format!("index-{}", idx.space));
        }
    }
    rawdoc! {
        "db": m.db.as_str(),
        "name": m.name.as_str(),
        "type": "collection",
        "md": {"ns": ns.as_str(), "options": options, "indexes": indexes},
        "idxIdent": idents,
        "ns": ns.as_str(),
        "ident": format!("collection-{}", m.id),
    }
}

#[cfg(test)]
mod reply_tests {
    use super::*;

    /// The one-buffer reply is the document built field by field.
    #[test]
    fn first_reply_is_the_general_document() {
        let docs = vec![
            rawdoc! {"_id": "x", "n": 3_i32, "avg": 2.5},
            rawdoc! {"_id": bson::RawBson::Null, "a": {"b": [1_i64, "s"]}},
        ];
        for (docs, at) in [
            (docs.clone(), None),
            (
                docs,
                Some(bson::Timestamp {
                    time: 7,
                    increment: 9,
                }),
            ),
            (Vec::new(), None),
        ] {
            let mut batch = RawArrayBuf::new();
            for d in &docs {
                batch.push(d.clone());
            }
            let mut cursor = rawdoc! {"firstBatch": batch, "id": 42_i64, "ns": "db.c"};
            if let Some(t) = at {
                cursor.append(cstr!("atClusterTime"), t);
            }
            let want = rawdoc! {"cursor": cursor};
            assert_eq!(first_reply(docs, None, 42, "db.c", at).body, want);
        }
        let with_token =
            first_reply(Vec::new(), Some(rawdoc! {"_data": "00"}), 0, "db.c", None).body;
        assert_eq!(
            with_token,
            rawdoc! {"cursor": {"firstBatch": [], "postBatchResumeToken": {"_data": "00"}, "id": 0_i64, "ns": "db.c"}}
        );
    }
}
