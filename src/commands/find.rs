//! `find`: query a collection, returning the first batch and a cursor for the rest.
//!
//! 1. Arguments are validated as MongoDB's IDL does (types 14, negative counts 51024,
//!    unknown fields 40415).
//! 2. [`FindRequest::parse`] parses the filter, projection and `let` through
//!    [`crate::lang::Lang`], the sort, `hint`, `min`/`max`.
//! 3. [`cairn_query::plan::choose`] picks the plan on a snapshot (a point read for
//!    `{_id: v}`, an index scan, a `$or` union or a collection scan; see
//!    [`cairn_query::plan`]); `sort: {$natural: ±1}` forces a collection scan. A point read,
//!    and a `skip + limit` of at most [`SHORT_RESULTS`] whose chosen plan reads only what it
//!    returns ([`short_plan`]), run on the runtime worker with no thread hand-off; a race or
//!    any other plan moves off it first ([`crate::blocking::escalate`]).
//! 4. If the plan's order is not the requested sort, every match goes through a [`Sorter`]
//!    (top-k when there is a `limit`; beyond 100 MB it spills to temporary files under
//!    `<data-dir>/_tmp`, or fails with 292 when `allowDiskUse` is false — MongoDB 7.0's
//!    default `allowDiskUseByDefault` is true); otherwise results stream from the plan.
//! 5. The first batch holds `batchSize` documents (101 by default) within 16 MiB; if more
//!    may follow, a cursor keeps the plan's position (no snapshot is pinned); it is
//!    registered, with the session (`lsid`) read only then, once the read is done.
//!
//! Reply: `{cursor: {firstBatch, id, ns}, ok}` (MongoDB's field order for find).
//! `skip`/`limit` apply after ordering, the projection last.
//! Not yet supported (NotImplemented): collations other than simple, `returnKey`,
//! `showRecordId`; tailable cursors need capped collections (BadValue as in MongoDB).
//!
//! On a view, `find` runs as MongoDB runs it: converted into an aggregation ([`on_view`]) —
//! the view's pipeline, then `$match`, `$sort`, `$skip`, `$limit`, `$project` from the
//! command — with options aggregation lacks refused (InvalidPipelineOperator, 168); the
//! cursor's namespace is the view's.

use std::sync::Arc;

use std::time::Instant;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use cairn_query::filter::Filter;
use cairn_query::plan::{Access, Hint, Plan, Query, choose_with};
use cairn_query::sort::{SortSpec, Sorter};

use super::{
    CmdFuture, Command, Counter, Fields, Invocation, Request, collection_arg_parsed, opt_bool,
    opt_count, opt_document, opt_strict_bool,
};
use crate::blocking;
use crate::cursor::{
    Cursor, MAX_BATCH_BYTES, Output, Source, executor_error, finish_batch, next_batch, session_of,
};
use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;

/// Default first batch size.
pub const DEFAULT_BATCH: usize = 101;

/// Largest `skip + limit` of a `find` that starts inline on the runtime worker (see
/// [`short_plan`]): its work is then at most this many index entries and documents.
pub const SHORT_RESULTS: u64 = 101;

/// Whether a plan's reading is bounded by the results it returns — each entry or document
/// it examines is a result: an exact `_id` or secondary-index scan (no residual filter, no
/// entries read outside the bounds, no duplicates) in the requested order — so a `find` with a small limit
/// (at most [`SHORT_RESULTS`]) may run it on the runtime worker without a thread hand-off
/// ([`blocking::run_short`]); any other plan escalates ([`blocking::escalate`]).
fn short_plan(plan: &Plan, sorted: bool) -> bool {
    if plan.residual || plan.dedupe || (sorted && !plan.provides_sort) {
        return false;
    }
    match &plan.access {
        Access::Eof | Access::IdPoint { .. } => true,
        Access::Docs { bounds, .. } => bounds.is_some(),
        // Entries are checked against the bounds; on one field the byte ranges are the
        // intervals themselves (one each, none widened), so no entry is read and rejected.
        Access::Index(ia) => {
            !ia.min_max
                && (!ia.check_entries
                    || matches!(ia.bounds.fields.as_slice(),
                        [f] if f.intervals.len() == ia.ranges.len()))
        }
        Access::Or(_) | Access::Near(_) => false,
    }
}

const FIELDS: &[&str] = &[
    "allowDiskUse",
    "allowPartialResults",
    "awaitData",
    "batchSize",
    "collation",
    "filter",
    "hint",
    "let",
    "limit",
    "max",
    "min",
    "noCursorTimeout",
    "oplogReplay",
    "projection",
    "readOnce",
    "returnKey",
    "showRecordId",
    "singleBatch",
    "skip",
    "sort",
    "tailable",
];

/// `find`.
pub static COMMAND: Command = Command {
    name: "find",
    aliases: &[],
    help: "query for documents",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Strict(FIELDS),
    counter: Counter::Query,
    kill_on_disconnect: false,
    authz: super::Authz::Ns(&[super::ActionType::Find]),
    run,
};

fn not_implemented(what: &str) -> CommandError {
    CommandError::new(
        ErrorCode::NotImplemented,
        format!("{what} is not supported by Cairn yet"),
    )
}

/// The position of `name` in [`FIELDS`] (a `match`: a length switch and at most a couple of
/// byte comparisons, where a search of the list compares strings at every step; a test checks
/// it against the list).
#[inline(always)]
fn field_slot(name: &str) -> Option<usize> {
    Some(match name {
        "allowDiskUse" => 0,
        "allowPartialResults" => 1,
        "awaitData" => 2,
        "batchSize" => 3,
        "collation" => 4,
        "filter" => 5,
        "hint" => 6,
        "let" => 7,
        "limit" => 8,
        "max" => 9,
        "min" => 10,
        "noCursorTimeout" => 11,
        "oplogReplay" => 12,
        "projection" => 13,
        "readOnce" => 14,
        "returnKey" => 15,
        "showRecordId" => 16,
        "singleBatch" => 17,
        "skip" => 18,
        "sort" => 19,
        "tailable" => 20,
        _ => return None,
    })
}

/// `find`'s own fields ([`FIELDS`]) picked out of the body's [`super::Parsed`] table in one
/// pass: each argument reader then finds its field by [`field_slot`] instead of a scan of
/// every body field (find reads some twenty optional fields, most of them absent).
/// Answers exactly what [`super::Parsed::get`] answers: the first occurrence of a field, and
/// for a field not found, `InvalidBSON` when the body's walk stopped at a malformed element;
/// names outside [`FIELDS`] are asked of the table itself.
struct FindFields<'p, 'a> {
    parsed: &'p super::Parsed<'a>,
    values: [Option<RawBsonRef<'a>>; FIELDS.len()],
}

impl<'p, 'a> FindFields<'p, 'a> {
    fn new(parsed: &'p super::Parsed<'a>) -> Self {
        let mut values = [None; FIELDS.len()];
        for (k, v) in parsed.iter().flatten() {
            if let Some(i) = field_slot(k)
                && let Some(slot @ None) = values.get_mut(i)
            {
                *slot = Some(v);
            }
        }
        FindFields { parsed, values }
    }
}

impl<'a> super::Args<'a> for &FindFields<'_, 'a> {
    #[inline(always)]
    fn arg(self, field: &str) -> Result<Option<RawBsonRef<'a>>, CommandError> {
        match field_slot(field) {
            Some(i) => match self.values.get(i).copied().flatten() {
                Some(v) => Ok(Some(v)),
                None if self.parsed.is_malformed() => self.parsed.get(field),
                None => Ok(None),
            },
            None => self.parsed.get(field),
        }
    }
}

/// A parsed `find` command.
pub struct FindRequest {
    /// Database.
    pub db: String,
    /// Collection.
    pub coll: String,
    /// The filter as given (`{}` when absent).
    pub filter_doc: RawDocumentBuf,
    /// The parsed filter.
    pub filter: Arc<Filter>,
    /// The sort (not `$natural`), if any.
    pub sort: Option<SortSpec>,
    /// The sort as given.
    pub sort_doc: Option<RawDocumentBuf>,
    /// `sort: {$natural: ±1}`: backward when true.
    pub natural: Option<bool>,
    /// The projection (and the filter, for positional projections).
    pub output: Option<Arc<Output>>,
    /// The projection as given.
    pub projection_doc: Option<RawDocumentBuf>,
    /// `skip`.
    pub skip: i64,
    /// `limit` (positive), if any.
    pub limit: Option<i64>,
    /// `batchSize`.
    pub batch_size: Option<i64>,
    /// `singleBatch`.
    pub single_batch: bool,
    /// `noCursorTimeout`.
    pub no_timeout: bool,
    /// `tailable` (with `awaitData`): follow a capped collection.
    pub tailable: Option<bool>,
    /// Whether a sort may spill to disk.
    pub allow_disk_use: bool,
    /// `hint`.
    pub hint: Hint,
    /// `min`.
    pub min: Option<RawDocumentBuf>,
    /// `max`.
    pub max: Option<RawDocumentBuf>,
}

impl FindRequest {
    /// Parses and validates a `find` command as MongoDB does.
    pub fn parse(req: &Request<'_>, server: &ServerState) -> Result<FindRequest, CommandError> {
        Self::parse_fields(req, &super::Parsed::parse(req.body), server)
    }

    /// [`FindRequest::parse`] of a body whose fields were already read (`args` is
    /// `req.body`'s [`super::Parsed`]).
    pub fn parse_fields(
        req: &Request<'_>,
        args: &super::Parsed<'_>,
        server: &ServerState,
    ) -> Result<FindRequest, CommandError> {
        let coll = super::args::collection_arg_parsed(req, args)?.to_string();
        let fields = FindFields::new(args);
        let args = &fields;
        let db = req.db.to_string();
        let filter_doc = opt_document(args, "find", "filter")?;
        let sort_doc = opt_document(args, "find", "sort")?;
        let projection = opt_document(args, "find", "projection")?;
        let skip = opt_count(args, "find", "skip")?.unwrap_or(0);
        let limit = opt_count(args, "find", "limit")?.filter(|l| *l > 0);
        let batch_size = opt_count(args, "find", "batchSize")?;
        let single_batch = opt_strict_bool(args, "find", "singleBatch")?.unwrap_or(false);
        let no_timeout = opt_bool(args, "find", "noCursorTimeout")?.unwrap_or(false);
        let tailable = opt_bool(args, "find", "tailable")?.unwrap_or(false);
        let await_data = opt_bool(args, "find", "awaitData")?.unwrap_or(false);
        if await_data && !tailable {
            return Err(CommandError::new(
                ErrorCode::FailedToParse,
                "Cannot set 'awaitData' without also setting 'tailable'",
            ));
        }
        if tailable && single_batch {
            return Err(CommandError::bad_value(
                "cannot use tailable option with the 'singleBatch' option",
            ));
        }
        if tailable
            && let Some(s) = sort_doc
            && !s.is_empty()
            && s.as_bytes() != rawdoc! {"$natural": 1}.as_bytes()
        {
            return Err(CommandError::bad_value(
                "cannot use tailable option with a sort other than {$natural: 1}",
            ));
        }
        for field in ["returnKey", "showRecordId"] {
            if opt_bool(args, "find", field)?.unwrap_or(false) {
                return Err(not_implemented(&format!("find.{field}")));
            }
        }
        let lang = crate::lang::Lang::for_command(args, "find", crate::lang::cluster_time(server))?;
        let projection_doc = projection
            .filter(|p| !p.is_empty())
            .map(RawDocument::to_owned);
        let projection = match &projection_doc {
            Some(p) => Some(lang.projection(p)?),
            None => None,
        };
        let allow_disk_use = opt_strict_bool(args, "find", "allowDiskUse")?
            .unwrap_or(server.config.allow_disk_use_by_default);
        if let Some(c) = opt_document(args, "find", "collation")?
            && !matches!(c.get("locale"), Ok(Some(RawBsonRef::String("simple"))))
        {
            return Err(not_implemented("collations other than simple"));
        }
        let min = opt_document(args, "find", "min")?.map(RawDocument::to_owned);
        let max = opt_document(args, "find", "max")?.map(RawDocument::to_owned);
        let hint = super::args::parse_hint(args, "find")?;
        let sort = match sort_doc {
            Some(s) => Some(SortSpec::parse(s)?),
            None => None,
        };
        let natural = sort
            .as_ref()
            .and_then(SortSpec::natural)
            .map(|forward| !forward);
        let sort = sort.filter(|s| s.natural().is_none() && !s.is_empty());
        let filter = Arc::new(lang.filter(filter_doc)?);
        let output = projection.map(|p| {
            Arc::new(Output {
                projection: p,
                filter: Some(filter.clone()),
            })
        });
        Ok(FindRequest {
            db,
            coll,
            filter_doc: filter_doc.map(RawDocument::to_owned).unwrap_or_default(),
            filter,
            sort,
            sort_doc: sort_doc.map(RawDocument::to_owned),
            natural,
            output,
            projection_doc,
            skip,
            limit,
            batch_size,
            single_batch,
            no_timeout,
            tailable: tailable.then_some(await_data),
            allow_disk_use,
            hint,
            min,
            max,
        })
    }

    /// The query to plan.
    pub fn query(&self) -> Query<'_> {
        Query {
            filter: &self.filter,
            sort: self.sort.as_ref(),
            natural: self.natural,
            projection: self.output.as_ref().map(|o| &o.projection),
            inclusion: None,
            hint: &self.hint,
            min: self.min.as_deref(),
            max: self.max.as_deref(),
            modifies: None,
            count: false,
            limit: self
                .limit
                .map(|l| (l as u64).saturating_add(self.skip as u64)),
        }
    }

    /// `db.coll`.
    pub fn ns(&self) -> String {
        cairn_query::plan::namespace(&self.db, &self.coll)
    }
}

/// The `find` options aggregation cannot express, refused on a view in MongoDB's order
/// (`asAggregationCommand`).
fn check_view_options(body: &RawDocument) -> Result<(), CommandError> {
    let refuse = |msg: String| Err(CommandError::new(ErrorCode::InvalidPipelineOperator, msg));
    for field in ["min", "max"] {
        if opt_document(body, "find", field)?.is_some_and(|d| !d.is_empty()) {
            return refuse(format!("Option {field} not supported in aggregation."));
        }
    }
    for field in ["returnKey", "showRecordId"] {
        if opt_bool(body, "find", field)?.unwrap_or(false) {
            return refuse(format!("Option {field} not supported in aggregation."));
        }
    }
    if opt_bool(body, "find", "tailable")?.unwrap_or(false) {
        return refuse("Tailable cursors are not supported in aggregation.".into());
    }
    for field in ["noCursorTimeout", "allowPartialResults"] {
        if opt_bool(body, "find", field)?.unwrap_or(false) {
            return refuse(format!("Option {field} not supported in aggregation."));
        }
    }
    if opt_document(body, "find", "sort")?
        .is_some_and(|s| s.get("$natural").ok().flatten().is_some())
    {
        return refuse("Sort option $natural not supported in aggregation.".into());
    }
    if opt_strict_bool(body, "find", "singleBatch")?.unwrap_or(false)
        && opt_count(body, "find", "limit")? != Some(1)
    {
        return refuse("Option singleBatch not supported in aggregation.".into());
    }
    if opt_bool(body, "find", "readOnce")?.unwrap_or(false) {
        return refuse("Option readOnce not supported in aggregation.".into());
    }
    // Only plain inclusions, exclusions and expressions project a view's documents: the
    // find-only `$elemMatch` projection is an unknown expression to `$project`.
    if let Some(p) = opt_document(body, "find", "projection")?
        && p.iter().flatten().any(|(_, v)| {
            matches!(v, RawBsonRef::Document(d)
                if d.iter().next().and_then(Result::ok).is_some_and(|(k, _)| k.as_str() == "$elemMatch"))
        })
    {
        return refuse("Unrecognized expression '$elemMatch'".into());
    }
    Ok(())
}

/// `find` on a view, as an aggregation (see the module docs). `None` when the namespace is
/// not a view as the command's target sees it.
async fn on_view(inv: &Invocation<'_>) -> Result<Option<RawDocumentBuf>, CommandError> {
    let body = inv.req.body;
    let coll = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
    let db = inv.req.db.to_string();
    let (server, target) = (inv.server.clone(), inv.op.target.clone());
    let (d, c) = (db.clone(), coll.clone());
    let Some(resolved) =
        blocking::run(move || crate::views::resolve_in(&server, &target, &d, &c)).await?
    else {
        return Ok(None);
    };
    check_view_options(body)?;
    let r = FindRequest::parse(&inv.req, inv.server)?;
    let lang = crate::lang::Lang::for_command(body, "find", crate::lang::cluster_time(inv.server))?;
    let own = crate::views::find_stages(
        &r.filter_doc,
        r.sort_doc.as_deref(),
        r.skip,
        r.limit,
        r.projection_doc.as_deref(),
    );
    let agg = super::aggregate::AggRequest {
        db: db.clone(),
        coll: resolved.base,
        pipeline: crate::views::concat(&resolved.stages, &own)?,
        explain: false,
        batch_size: r.batch_size,
        allow_disk_use: r.allow_disk_use,
        hint: r.hint.clone(),
        lang,
        durability: crate::write_concern::WriteConcern::from_command(body)?.durability(),
        bypass: false,
        view: Some(coll.clone()),
    };
    let ns = agg.ns();
    let start = super::aggregate::Start {
        server: inv.server.clone(),
        target: inv.op.target.clone(),
        ns: ns.clone(),
        first_max: r
            .batch_size
            .map_or(DEFAULT_BATCH, |b| usize::try_from(b).unwrap_or(usize::MAX)),
        single_batch: r.single_batch,
        lsid: session_of(body),
        txn_number: inv.op.txn_number(),
        deadline: crate::deadline::current(),
    };
    let (docs, id, _) = blocking::run(move || start.run(&agg)).await?;
    Ok(Some(crate::cursor::batch_reply(
        "firstBatch",
        &docs,
        id,
        &ns,
        inv.op.at_cluster_time,
    )))
}

/// A tailable `find` on a capped collection: the matching documents in insertion order, and
/// a cursor that stays open at the end (unless the collection is empty, as in MongoDB).
async fn tail(inv: Invocation<'_>, r: FindRequest, await_data: bool) -> super::CmdResult {
    let ns = r.ns();
    let meta = inv
        .server
        .store
        .collection(&r.db, &r.coll)
        .filter(|m| m.is_capped())
        .ok_or_else(|| {
            CommandError::bad_value(format!(
                "error processing query: ns={ns} tailable cursor requested on non capped collection"
            ))
        })?;
    if inv.op.target.in_txn()
        || matches!(inv.op.target, crate::session::target::Target::Snapshot(..))
    {
        return Err(CommandError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            "tailable cursors are not allowed in a transaction or with a snapshot read concern",
        ));
    }
    let first_max = r
        .batch_size
        .map_or(DEFAULT_BATCH, |b| usize::try_from(b).unwrap_or(usize::MAX));
    let lsid = session_of(inv.req.body);
    let server = inv.server.clone();
    let (docs, id) = blocking::run(move || {
        let mut cursor = Cursor {
            id: 0,
            ns: r.ns(),
            source: Source::Tail {
                db: r.db.clone(),
                coll: r.coll.clone(),
                space: meta.id,
                last: None,
                filter: r.filter.clone(),
                await_data,
            },
            remaining: r.limit.map(|l| l as u64),
            output: r.output.clone(),
            time_budget: None,
            lsid,
            txn_number: None,
            target: Default::default(),
            no_timeout: r.no_timeout,
            last_used: Instant::now(),
        };
        let (docs, exhausted) = if first_max == 0 {
            (Vec::new(), false)
        } else {
            next_batch(&server.store, &mut cursor, first_max)?
        };
        let empty = matches!(cursor.source, Source::Tail { last: None, .. })
            && server.store.stats(&meta)?.count == 0;
        if exhausted || empty {
            return Ok((docs, 0));
        }
        cursor.id = server.cursors.new_id();
        let id = cursor.id;
        server.cursors.insert(cursor);
        Ok((docs, id))
    })
    .await?;
    Ok(crate::cursor::batch_reply("firstBatch", &docs, id, &ns, None).into())
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let coll = super::args::collection_arg_parsed(&inv.req, inv.parsed)?;
        if crate::views::may_be_view(inv.server, inv.req.db, coll)
            && let Some(reply) = on_view(&inv).await?
        {
            return Ok(reply.into());
        }
        let r = FindRequest::parse_fields(&inv.req, inv.parsed, inv.server)?;
        if let Some(await_data) = r.tailable {
            return tail(inv, r, await_data).await;
        }
        let first_max = r
            .batch_size
            .map_or(DEFAULT_BATCH, |b| usize::try_from(b).unwrap_or(usize::MAX));
        let server = inv.server.clone();
        let deadline = crate::deadline::current();
        let target = inv.op.target.clone();
        let txn_number = inv.op.txn_number();
        if target.in_txn() && opt_bool(body, "find", "readOnce")?.unwrap_or(false) {
            return Err(CommandError::new(
                ErrorCode::OperationNotSupportedInTransaction,
                "Cannot run 'find' with readOnce in a multi-document transaction.",
            ));
        }
        let at_cluster_time = inv.op.at_cluster_time;
        // A point read by `_id` (no hint, min/max or forced scan) reads one key: inline. A
        // small `limit` starts inline too and stays there when the chosen plan is bounded
        // (see [`short_plan`]); otherwise the race and the rest of the reading escalate.
        let point = r.filter.id_equality().is_some()
            && matches!(r.hint, Hint::None)
            && r.min.is_none()
            && r.max.is_none()
            && r.natural.is_none();
        let small = r.limit.is_some_and(|l| {
            (l as u64).saturating_add(r.skip as u64) <= SHORT_RESULTS
                && r.natural.is_none()
                && r.min.is_none()
                && r.max.is_none()
        });
        // The cursor to keep, if any, comes back to be registered here, where its session is
        // read (most finds return everything in their first batch and keep none).
        let (docs, kept, ns) = blocking::run_short(point || small, move || {
            let store = &server.store;
            let ns = r.ns();
            let (skip, limit) = (r.skip, r.limit);
            let remaining = limit.map(|l| l as u64);
            let source = target.read(store, |view| {
                let Some(meta) = view.collection(&r.db, &r.coll)? else {
                    return Ok(None);
                };
                let read = view.source();
                let chosen = choose_with(
                    Some(&server.plan_cache),
                    &ns,
                    &meta,
                    &r.query(),
                    &r.filter,
                    read,
                    false,
                    &|f| blocking::escalate(f),
                )?;
                crate::ops::record_chosen_plan(chosen.exec.plan());
                let bounded = point || (small && short_plan(chosen.exec.plan(), r.sort.is_some()));
                let rest = || -> Result<_, CommandError> {
                    Ok(match &r.sort {
                        // `$near`: nearest first (ties in scan order), then skip.
                        None if r.filter.near().is_some() && !chosen.exec.plan().by_distance() => {
                            let memory = usize::try_from(server.config.sort_memory_limit_bytes)
                                .unwrap_or(usize::MAX);
                            let mut hits: Vec<(f64, RawDocumentBuf)> = Vec::new();
                            let mut bytes = 0usize;
                            let push = |d: RawDocumentBuf| -> Result<(), CommandError> {
                                bytes = bytes.saturating_add(d.as_bytes().len());
                                if bytes > memory {
                                    return Err(executor_error(CommandError::new(
                                        ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
                                        "$near exceeded the memory limit for sorting by distance",
                                    )));
                                }
                                let dist = r.filter.near_distance(&d).unwrap_or(f64::INFINITY);
                                hits.push((dist, d));
                                Ok(())
                            };
                            drain_plan(chosen, read, &meta, push)?;
                            hits.sort_by(|a, b| a.0.total_cmp(&b.0));
                            (
                                Source::Buffered(
                                    hits.into_iter()
                                        .skip(usize::try_from(skip).unwrap_or(usize::MAX))
                                        .map(|(_, d)| d)
                                        .collect(),
                                ),
                                None,
                            )
                        }
                        Some(spec) if !chosen.exec.plan().provides_sort => {
                            let top_k = limit.map(|l| (l as usize).saturating_add(skip as usize));
                            let mut sorter = Sorter::new(
                                spec.clone(),
                                top_k,
                                usize::try_from(server.config.sort_memory_limit_bytes)
                                    .unwrap_or(usize::MAX),
                                r.allow_disk_use,
                                Some(server.config.data_dir.join(crate::cursor::SPILL_DIR)),
                            );
                            let sort_err = |e| executor_error(CommandError::from(e));
                            drain_plan(chosen, read, &meta, |d| sorter.push(d).map_err(sort_err))?;
                            let mut sorted = sorter.finish().map_err(sort_err)?;
                            for _ in 0..skip {
                                match sorted.next() {
                                    Some(Ok(_)) => {}
                                    Some(Err(e)) => {
                                        return Err(executor_error(CommandError::from(e)));
                                    }
                                    None => break,
                                }
                            }
                            (Source::Sorted(sorted), None)
                        }
                        _ => {
                            // The first batch comes from the snapshot the plan was chosen on (a
                            // point read or a short index read opens one snapshot, not two).
                            let mut exec = Box::new(chosen.exec);
                            let mut pending = chosen.buffered.into();
                            let mut skip = skip as u64;
                            let first = if first_max == 0 {
                                None
                            } else {
                                let want = match remaining {
                                    Some(r) => {
                                        first_max.min(usize::try_from(r).unwrap_or(usize::MAX))
                                    }
                                    None => first_max,
                                };
                                Some(crate::cursor::plan_batch(
                                    read,
                                    &meta,
                                    &mut exec,
                                    &mut pending,
                                    &mut skip,
                                    want,
                                ))
                            };
                            (
                                Source::Plan {
                                    db: r.db.clone(),
                                    coll: r.coll.clone(),
                                    space: meta.id,
                                    exec,
                                    pending,
                                    skip,
                                },
                                first,
                            )
                        }
                    })
                };
                Ok(Some(if bounded {
                    rest()?
                } else {
                    blocking::escalate(rest)?
                }))
            })?;
            let Some((source, first)) = source else {
                return Ok((Vec::new(), None, ns));
            };
            let mut cursor = Cursor {
                id: 0,
                ns,
                source,
                remaining,
                output: r.output.clone(),
                time_budget: None,
                lsid: None,
                txn_number,
                target,
                no_timeout: r.no_timeout,
                last_used: Instant::now(),
            };
            if first_max == 0 {
                crate::ops::record_source_work(&cursor.source, &mut (0, 0));
                cursor.id = server.cursors.new_id();
                let ns = cursor.ns.clone();
                return Ok((Vec::new(), Some(cursor), ns));
            }
            let batch = match first {
                Some(Ok((docs, exhausted))) => finish_batch(&mut cursor, docs, exhausted),
                Some(Err(e)) => Err(e),
                None => next_batch(store, &mut cursor, first_max),
            };
            crate::ops::record_source_work(&cursor.source, &mut (0, 0));
            let (docs, exhausted) = batch?;
            if exhausted || r.single_batch {
                return Ok((docs, None, std::mem::take(&mut cursor.ns)));
            }
            cursor.time_budget = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            cursor.id = server.cursors.new_id();
            let ns = cursor.ns.clone();
            Ok((docs, Some(cursor), ns))
        })
        .await?;
        let id = match kept {
            Some(mut cursor) => {
                cursor.lsid = crate::cursor::session_in(inv.parsed.find("lsid"));
                let id = cursor.id;
                inv.server.cursors.insert(cursor);
                id
            }
            None => 0,
        };
        Ok(crate::cursor::batch_reply_counted(
            "firstBatch",
            &docs,
            None,
            id,
            &ns,
            at_cluster_time,
        ))
    })
}

/// Feeds every result of a chosen plan to `push` — the documents its trial buffered, then the
/// rest batch by batch, checking the deadline between batches — and records the work done
/// (for a blocking sort by distance or by a sort spec, which needs them all).
fn drain_plan(
    chosen: cairn_query::plan::Chosen,
    read: &dyn cairn_query::plan::Source,
    meta: &cairn_storage::catalog::CollectionMeta,
    mut push: impl FnMut(RawDocumentBuf) -> Result<(), CommandError>,
) -> Result<(), CommandError> {
    for d in chosen.buffered {
        push(d)?;
    }
    let mut exec = chosen.exec;
    while !exec.is_exhausted() {
        crate::deadline::check().map_err(executor_error)?;
        for d in exec
            .next(read, meta, 1000, MAX_BATCH_BYTES, 10_000)
            .map_err(|e| executor_error(e.into()))?
        {
            push(d)?;
        }
    }
    crate::ops::record_work(exec.stats.keys_examined, exec.stats.docs_examined);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_fields_answer_as_the_parsed_table() {
        use super::super::Args;
        for (i, name) in FIELDS.iter().enumerate() {
            assert_eq!(field_slot(name), Some(i), "{name}");
        }
        assert_eq!(field_slot("find"), None);
        let body = rawdoc! {
            "find": "c", "filter": {"a": 1}, "limit": 3, "limit": 4, "sort": {"b": -1},
            "hint": "a_1", "$db": "d", "lsid": {"id": 1},
        };
        let parsed = super::super::Parsed::parse(&body);
        let fields = FindFields::new(&parsed);
        for key in FIELDS.iter().chain(&["find", "$db", "lsid", "other", ""]) {
            assert_eq!(
                (&fields).arg(key).unwrap(),
                parsed.get(key).unwrap(),
                "{key}: the first occurrence, or none"
            );
        }
        assert_eq!((&fields).arg("limit").unwrap(), Some(RawBsonRef::Int32(3)));

        // A malformed element ends the walk: fields before it are found, any other is an
        // InvalidBSON error, as Parsed::get answers.
        let mut bytes = rawdoc! {"find": "c", "limit": 1, "skip": "x"}.into_bytes();
        let at = bytes.len() - 7; // the string's length prefix
        bytes[at] = 100;
        let body = RawDocument::from_bytes(&bytes).unwrap();
        let parsed = super::super::Parsed::parse(body);
        let fields = FindFields::new(&parsed);
        assert_eq!((&fields).arg("limit").unwrap(), Some(RawBsonRef::Int32(1)));
        for key in ["skip", "filter", "$db"] {
            let e = (&fields).arg(key).unwrap_err();
            assert_eq!(e.code.code(), ErrorCode::InvalidBSON.code(), "{key}");
        }
    }

    #[test]
    fn only_plans_that_read_what_they_return_are_short() {
        let point = Plan {
            access: Access::IdPoint { key: vec![1] },
            ..Plan::eof()
        };
        assert!(short_plan(&point, false));
        assert!(short_plan(&Plan::eof(), true));
        assert!(!short_plan(&Plan::collscan(false), false));
        let residual = Plan {
            residual: true,
            ..point.clone()
        };
        assert!(!short_plan(&residual, false));
        let unsorted = Plan {
            provides_sort: false,
            ..point.clone()
        };
        assert!(short_plan(&unsorted, false));
        assert!(!short_plan(&unsorted, true));
        let twice = Plan {
            dedupe: true,
            ..point
        };
        assert!(!short_plan(&twice, false));
    }
}
