//! `explain`: `{explain: <command>, verbosity}` → how the command's query is (or was)
//! answered, in mongod's shape: `{explainVersion, queryPlanner: {namespace, parsedQuery,
//! queryHash, planCacheKey, winningPlan, rejectedPlans, …}, executionStats: {nReturned,
//! executionTimeMillis, totalKeysExamined, totalDocsExamined, executionStages,
//! allPlansExecution}, command, serverInfo, serverParameters, ok}`.
//!
//! Explainable: `find`, `count`, `distinct`, `update`, `delete` (one statement each) and
//! `findAndModify`. The inner command is parsed by the same code as the command itself; its
//! candidates always race (the plan cache is neither read nor written), and with
//! `executionStats`/`allPlansExecution` (the default) the winner runs to completion — or to
//! its `limit` when it streams in order — counting keys and documents. Writes are never
//! applied: `update`/`findAndModify` report what would change (`nWouldModify`), `delete`
//! what would go (`nWouldDelete`). `aggregate` is NotImplemented (there is no aggregation
//! yet); other commands are IllegalOperation (20) "Cannot explain cmd", unknown ones
//! CommandNotFound (59).

use std::sync::Arc;
use std::time::Instant;

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use cairn_query::agg::stages::geo_near::GeoNear;
use cairn_query::filter::Filter;
use cairn_query::plan::explain::{Run, Wrap, num, returned, stage_tree};
use cairn_query::plan::{
    Chosen, Execution, Hint, Modifies, Plan, Query, Stats, choose, shape, signature,
};
use cairn_query::projection::ProjectionKind;
use cairn_query::sort::SortSpec;
use cairn_storage::catalog::CollectionMeta;

use super::build_info::{GIT_VERSION, MONGODB_VERSION};
use super::host_info::pretty_host_name;
use super::{CmdFuture, Command, Counter, Fields, Invocation, Request, opt_document, type_name};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;

/// `explain`.
pub static COMMAND: Command = Command {
    name: "explain",
    aliases: &[],
    help: "explain the query plan of a command",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&["verbosity"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::explain),
    run,
};

/// `queryPlanner` verbosity (the `explain: true` field of `aggregate`).
pub(crate) const QUERY_PLANNER: Verbosity = Verbosity::QueryPlanner;

/// How much to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Verbosity {
    QueryPlanner,
    ExecutionStats,
    AllPlansExecution,
}

/// A plan chosen (and possibly run) for explain.
struct Explained {
    chosen: Chosen,
    /// The winner's statistics at the end of its trial (for `allPlansExecution`).
    winner_trial: (Stats, bool),
    millis: i64,
    /// What the query is over.
    ns: String,
    shape: String,
    signature: u64,
}

/// An 8-hex-digit hash (`queryHash`, `planCacheKey`).
pub fn hash8(s: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    format!("{:08X}", h.finish() as u32)
}

/// Chooses (racing every candidate) and, for execution verbosities, runs the plan: to the
/// end, or until `cap` results when it streams in the requested order.
fn explain_plan(
    server: &ServerState,
    meta: Option<&CollectionMeta>,
    ns: &str,
    q: &Query<'_>,
    filter: &Arc<Filter>,
    verbosity: Verbosity,
    count_only: bool,
) -> Result<Explained, CommandError> {
    let Some(meta) = meta else {
        // No collection: nothing to plan (MongoDB's EOF plan).
        return Ok(Explained {
            chosen: Chosen {
                exec: Execution::new(Arc::new(Plan::eof()), filter.clone(), count_only),
                buffered: Vec::new(),
                rejected: Vec::new(),
                candidates: 1,
                from_cache: false,
            },
            winner_trial: (Stats::default(), true),
            millis: 0,
            ns: ns.to_string(),
            shape: shape(q),
            signature: 0,
        });
    };
    let read = server.store.read()?;
    let start = Instant::now();
    let mut chosen = choose(None, ns, meta, q, filter, &read, count_only)?;
    let winner_trial = (chosen.exec.stats.clone(), chosen.exec.is_exhausted());
    if verbosity >= Verbosity::ExecutionStats {
        let streams = q.sort.is_none() || chosen.exec.plan().provides_sort;
        let cap = if streams { q.limit } else { None };
        while !chosen.exec.is_exhausted() {
            crate::deadline::check()?;
            let want = match cap {
                Some(c) => {
                    let left = c.saturating_sub(chosen.exec.stats.advanced);
                    if left == 0 {
                        break;
                    }
                    usize::try_from(left).unwrap_or(usize::MAX)
                }
                None => 1000,
            };
            chosen.exec.next(&read, meta, want, usize::MAX, 10_000)?;
        }
    }
    Ok(Explained {
        chosen,
        winner_trial,
        millis: i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX),
        ns: ns.to_string(),
        shape: shape(q),
        signature: signature(meta),
    })
}

/// The explain reply for one plan.
fn render(
    e: &Explained,
    filter_doc: &RawDocument,
    wrap: &Wrap,
    verbosity: Verbosity,
    root_stats: Option<RawDocumentBuf>,
) -> RawDocumentBuf {
    let plan: &Plan = e.chosen.exec.plan();
    let mut rejected = RawArrayBuf::new();
    for t in &e.chosen.rejected {
        rejected.push(stage_tree(t.exec.plan(), filter_doc, wrap, None));
    }
    let mut qp = rawdoc! {
        "namespace": e.ns.clone(),
        "indexFilterSet": false,
        "parsedQuery": filter_doc.to_owned(),
        "queryHash": hash8(&e.shape),
        "planCacheKey": hash8(&format!("{}|{}", e.shape, e.signature)),
        "maxIndexedOrSolutionsReached": false,
        "maxIndexedAndSolutionsReached": false,
        "maxScansToExplodeReached": false,
    };
    qp.append(
        cstr!("winningPlan"),
        stage_tree(plan, filter_doc, wrap, None),
    );
    qp.append(cstr!("rejectedPlans"), rejected);
    let mut out = rawdoc! {"explainVersion": "1"};
    out.append(cstr!("queryPlanner"), qp);
    if verbosity >= Verbosity::ExecutionStats {
        let stats = &e.chosen.exec.stats;
        let run = Run {
            stats,
            eof: e.chosen.exec.is_exhausted(),
            millis: e.millis,
        };
        let mut stages = stage_tree(plan, filter_doc, wrap, Some(&run));
        if let Some(extra) = root_stats {
            for (k, v) in extra.iter().flatten() {
                stages.append(k, v);
            }
        }
        let mut es = rawdoc! {
            "executionSuccess": true,
            "nReturned": num(returned(stats, wrap)),
            "executionTimeMillis": num(e.millis.max(0) as u64),
            "totalKeysExamined": num(stats.keys_examined),
            "totalDocsExamined": num(stats.docs_examined),
        };
        es.append(cstr!("executionStages"), stages);
        if verbosity == Verbosity::AllPlansExecution {
            let mut all = RawArrayBuf::new();
            let trials = std::iter::once((plan, &e.winner_trial.0, e.winner_trial.1)).chain(
                e.chosen
                    .rejected
                    .iter()
                    .map(|t| (&**t.exec.plan(), &t.exec.stats, t.exec.is_exhausted())),
            );
            if e.chosen.candidates > 1 {
                for (p, s, eof) in trials {
                    let r = Run {
                        stats: s,
                        eof,
                        millis: 0,
                    };
                    let mut d = rawdoc! {
                        "nReturned": num(returned(s, wrap)),
                        "executionTimeMillisEstimate": 0,
                        "totalKeysExamined": num(s.keys_examined),
                        "totalDocsExamined": num(s.docs_examined),
                    };
                    d.append(
                        cstr!("executionStages"),
                        stage_tree(p, filter_doc, wrap, Some(&r)),
                    );
                    all.push(d);
                }
            }
            es.append(cstr!("allPlansExecution"), all);
        }
        out.append(cstr!("executionStats"), es);
    }
    out
}

fn verbosity(body: &RawDocument) -> Result<Verbosity, CommandError> {
    match body.get("verbosity") {
        Ok(None) => Ok(Verbosity::AllPlansExecution),
        Ok(Some(RawBsonRef::String(s))) => match s {
            "queryPlanner" => Ok(Verbosity::QueryPlanner),
            "executionStats" => Ok(Verbosity::ExecutionStats),
            "allPlansExecution" => Ok(Verbosity::AllPlansExecution),
            _ => Err(CommandError::bad_value(
                "verbosity string must be one of {'queryPlanner', 'executionStats', 'allPlansExecution'}",
            )),
        },
        Ok(Some(other)) => Err(CommandError::wrong_type(
            "explain.verbosity",
            type_name(&other),
            "string",
        )),
        Err(e) => Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    }
}

/// The projection stage MongoDB would show.
fn projection_stage(
    r: &super::find::FindRequest,
    covered: bool,
) -> Option<(&'static str, RawDocumentBuf)> {
    let doc = r.projection_doc.clone()?;
    let p = &r.output.as_ref()?.projection;
    let name = if covered {
        "PROJECTION_COVERED"
    } else if p.simple_inclusion_paths().is_some() || p.kind() == ProjectionKind::Exclusion {
        "PROJECTION_SIMPLE"
    } else {
        "PROJECTION_DEFAULT"
    };
    Some((name, doc))
}

/// Explains an aggregation: with `queryPlanner` the plan of its `$cursor` stage and the
/// optimized stages; with execution verbosities the pipeline also runs (nothing is
/// returned, and `$out`/`$merge` refuse to, 51184) and every stage reports `nReturned` and
/// `executionTimeMillisEstimate`. A pipeline that went entirely into its `$cursor` stage is
/// explained as `find` is (`queryPlanner` / `executionStats` at the top level); others as
/// `{explainVersion, stages: [{$cursor: {queryPlanner, executionStats}}, {$group: …}, …]}`.
/// A leading `$geoNear` the planner's ring search answers shows as MongoDB's
/// `{$geoNearCursor: {queryPlanner, executionStats}}` in place of `$cursor` and itself: its
/// near query, planned and (for statistics) run as far as a `$limit` right after it allows.
pub(crate) fn explain_aggregate(
    server: &ServerState,
    r: &super::aggregate::AggRequest,
    v: Verbosity,
) -> Result<RawDocumentBuf, CommandError> {
    let agg = r.prepare()?;
    if v >= Verbosity::ExecutionStats && agg.writes() {
        return Err(CommandError::new(
            ErrorCode::Location(51184),
            "Explain of a pipeline that writes ($out, $merge) is only supported with the \
             'queryPlanner' verbosity",
        ));
    }
    let mut cursor_explain: Option<RawDocumentBuf> = None;
    // A leading `$geoNear` the planner answers is MongoDB's `$geoNearCursor`: the near query's
    // plan in place of the `$cursor` stage and the `$geoNear` itself.
    let geo_near = match (&agg.cursor, agg.pipeline.stages().first()) {
        (Some(c), Some(first)) => match first.as_any().downcast_ref::<GeoNear>() {
            Some(g) => geo_near_explain(server, c, g, agg.pipeline.stages(), v)?,
            None => None,
        },
        _ => None,
    };
    let geo_near_cursor = geo_near.is_some();
    if geo_near_cursor {
        cursor_explain = geo_near;
    } else if let Some(c) = &agg.cursor {
        let meta = server.store.collection(&c.db, &c.coll);
        let count_only = c.count_only && c.sort.is_none();
        let e = explain_plan(
            server,
            meta.as_deref(),
            &c.ns(),
            &c.query(),
            &c.filter,
            v,
            count_only,
        )?;
        let plan = e.chosen.exec.plan().clone();
        let blocking_sort = c.sort.is_some() && !plan.provides_sort;
        let wrap = Wrap {
            sort: c
                .sort
                .as_ref()
                .filter(|_| blocking_sort)
                .map(|(_, d)| (d.clone(), c.limit.map(|l| l.saturating_add(c.skip)))),
            skip: Some(c.skip),
            limit: if blocking_sort { None } else { c.limit },
            projection: c.projection_doc().map(|d| {
                let name = if plan.covered {
                    "PROJECTION_COVERED"
                } else {
                    "PROJECTION_SIMPLE"
                };
                (name, d)
            }),
            root: None,
        };
        cursor_explain = Some(render(&e, &c.filter_doc, &wrap, v, None));
    }
    let mut counters: Vec<(u64, u64)> = Vec::new();
    if v >= Verbosity::ExecutionStats {
        let mut running = agg.open(cairn_query::agg::Options {
            stage_stats: true,
            ..r.options(server)
        })?;
        loop {
            crate::deadline::check()?;
            let (_, done) = super::aggregate::batch(
                server,
                &crate::session::target::Target::Auto,
                &mut running,
                r.durability,
                10_000,
            )?;
            if done {
                break;
            }
        }
        counters = running
            .counters()
            .iter()
            .map(|c| {
                (
                    c.returned.load(std::sync::atomic::Ordering::Relaxed),
                    c.nanos.load(std::sync::atomic::Ordering::Relaxed) / 1_000_000,
                )
            })
            .collect();
    }
    if agg.fully_pushed_down()
        && let Some(out) = cursor_explain
    {
        return Ok(out);
    }
    let exec = v >= Verbosity::ExecutionStats;
    let mut counts = counters.into_iter();
    let mut stages = RawArrayBuf::new();
    let mut rest = agg.pipeline.stages();
    let mut cursor_name = cstr!("$cursor");
    if geo_near_cursor {
        // The `$cursor` stage's counter and the `$geoNear`'s: the latter is what it returned.
        counts.next();
        rest = &rest[1..];
        cursor_name = cstr!("$geoNearCursor");
    }
    if let Some(ce) = cursor_explain {
        let mut inner = RawDocumentBuf::new();
        for (k, val) in ce.iter().flatten() {
            if k.as_str() != "explainVersion" {
                inner.append(k, val);
            }
        }
        let mut d = RawDocumentBuf::new();
        d.append(cursor_name, inner);
        if exec && let Some((n, ms)) = counts.next() {
            d.append(cstr!("nReturned"), i64::try_from(n).unwrap_or(i64::MAX));
            d.append(
                cstr!("executionTimeMillisEstimate"),
                i64::try_from(ms).unwrap_or(i64::MAX),
            );
        }
        stages.push(d);
    }
    for st in rest {
        let mut d = RawDocumentBuf::new();
        d.append(super::aggregate::stage_key(st.name())?, st.serialize());
        if exec && let Some((n, ms)) = counts.next() {
            d.append(cstr!("nReturned"), i64::try_from(n).unwrap_or(i64::MAX));
            d.append(
                cstr!("executionTimeMillisEstimate"),
                i64::try_from(ms).unwrap_or(i64::MAX),
            );
        }
        stages.push(d);
    }
    let mut out = rawdoc! {"explainVersion": "1"};
    out.append(cstr!("stages"), stages);
    Ok(out)
}

/// The explain of a leading `$geoNear` answered by the planner's ring search (`None` when the
/// stage reads and sorts instead, or there is no collection): the near query's plan, run as
/// far as a `$limit` right after it lets the stage read when statistics are wanted.
fn geo_near_explain(
    server: &ServerState,
    c: &cairn_query::agg::cursor::CursorStage,
    g: &GeoNear,
    stages: &[Arc<dyn cairn_query::agg::Stage>],
    v: Verbosity,
) -> Result<Option<RawDocumentBuf>, CommandError> {
    let Some(meta) = server.store.collection(&c.db, &c.coll) else {
        return Ok(None);
    };
    let Some(filter_doc) = g.index_query(&meta)? else {
        return Ok(None);
    };
    let filter = Arc::new(Filter::parse(&filter_doc)?);
    let hint = Hint::None;
    let mut q = Query::new(&filter, &hint);
    q.limit = stages
        .get(1)
        .and_then(|s| {
            s.as_any()
                .downcast_ref::<cairn_query::agg::stages::limit::Limit>()
        })
        .map(|l| l.n);
    let e = explain_plan(server, Some(&meta), &c.ns(), &q, &filter, v, false)?;
    Ok(Some(render(&e, &filter_doc, &Wrap::default(), v, None)))
}

/// The single statement of an explained write batch.
fn only_statement<'a>(
    inner: &'a RawDocument,
    cmd: &str,
    field: &str,
) -> Result<&'a RawDocument, CommandError> {
    let stmts = match inner.get(field) {
        Ok(Some(RawBsonRef::Array(a))) => a,
        Ok(Some(other)) => {
            return Err(CommandError::wrong_type(
                &format!("{cmd}.{field}"),
                type_name(&other),
                "array",
            ));
        }
        _ => return Err(CommandError::missing_field(&format!("{cmd}.{field}"))),
    };
    let mut it = stmts.into_iter();
    let first = it.next();
    if first.is_none() || it.next().is_some() {
        return Err(CommandError::new(
            ErrorCode::InvalidLength,
            "explained write batches must be of size 1",
        ));
    }
    match first {
        Some(Ok(RawBsonRef::Document(d))) => Ok(d),
        Some(Ok(other)) => Err(CommandError::wrong_type(
            &format!("{cmd}.{field}.0"),
            type_name(&other),
            "object",
        )),
        _ => Err(CommandError::new(
            ErrorCode::InvalidBSON,
            "invalid statement",
        )),
    }
}

fn sub_document(d: &RawDocument, field: &str) -> RawDocumentBuf {
    match d.get(field) {
        Ok(Some(RawBsonRef::Document(f))) => f.to_owned(),
        _ => RawDocumentBuf::new(),
    }
}

/// Explains one inner command (on a blocking thread).
fn explain_inner(
    server: &ServerState,
    name: &str,
    db: &str,
    inner: &RawDocument,
    v: Verbosity,
) -> Result<RawDocumentBuf, CommandError> {
    let req = Request {
        name,
        db,
        body: inner,
        exhaust_allowed: false,
    };
    let target = crate::session::target::Target::default();
    if name == "aggregate" {
        let mut r = super::aggregate::AggRequest::parse(&req, server, true)?;
        r.resolve_view(server, &target)?;
        return explain_aggregate(server, &r, v);
    }
    let coll = super::collection_arg(&req)?.to_string();
    if let Some(resolved) = crate::views::resolve_in(server, &target, db, &coll)? {
        return explain_on_view(server, name, db, &coll, inner, resolved, v);
    }
    let ns = format!("{db}.{coll}");
    let meta = server.store.collection(db, &coll);
    let meta = meta.as_deref();
    match name {
        "find" => {
            let r = super::find::FindRequest::parse(&req, server)?;
            let e = explain_plan(server, meta, &ns, &r.query(), &r.filter, v, false)?;
            let plan = e.chosen.exec.plan().clone();
            let blocking_sort = r.sort.is_some() && !plan.provides_sort;
            let limit = r.limit.map(|l| l as u64);
            let wrap = Wrap {
                sort: blocking_sort.then(|| {
                    (
                        r.sort_doc.clone().unwrap_or_default(),
                        limit.map(|l| l + r.skip as u64),
                    )
                }),
                skip: Some(r.skip as u64),
                // A blocking sort takes the limit itself (`limitAmount`), as in MongoDB.
                limit: if blocking_sort { None } else { limit },
                projection: projection_stage(&r, plan.covered),
                root: None,
            };
            Ok(render(&e, &r.filter_doc, &wrap, v, None))
        }
        "count" => {
            let query = opt_document(inner, "count", "query")?;
            let lang =
                crate::lang::Lang::for_command(inner, "count", crate::lang::cluster_time(server))?;
            let filter = Arc::new(lang.filter(query)?);
            let hint = super::args::parse_hint(inner, "count")?;
            let skip = super::count::signed(inner, "skip")?.max(0) as u64;
            let limit = super::count::signed(inner, "limit")?.unsigned_abs();
            let filter_doc = query.map(RawDocument::to_owned).unwrap_or_default();
            if filter.is_empty() && hint == Hint::None {
                // Answered from the collection's statistics.
                let mut out = rawdoc! {"explainVersion": "1"};
                let mut qp = rawdoc! {
                    "namespace": ns,
                    "indexFilterSet": false,
                    "parsedQuery": filter_doc,
                    "maxIndexedOrSolutionsReached": false,
                    "maxIndexedAndSolutionsReached": false,
                    "maxScansToExplodeReached": false,
                    "winningPlan": {"stage": "RECORD_STORE_FAST_COUNT"},
                };
                qp.append(cstr!("rejectedPlans"), RawArrayBuf::new());
                out.append(cstr!("queryPlanner"), qp);
                if v >= Verbosity::ExecutionStats {
                    let n = server
                        .store
                        .collection(db, &coll)
                        .map(|m| server.store.stats(&m).map(|s| s.count))
                        .transpose()?
                        .unwrap_or(0)
                        .max(0) as u64;
                    let counted = n.saturating_sub(skip);
                    let counted = if limit > 0 {
                        counted.min(limit)
                    } else {
                        counted
                    };
                    let mut es = rawdoc! {
                        "executionSuccess": true,
                        "nReturned": 0,
                        "executionTimeMillis": 0,
                        "totalKeysExamined": 0,
                        "totalDocsExamined": 0,
                        "executionStages": {
                            "stage": "RECORD_STORE_FAST_COUNT",
                            "nReturned": 0,
                            "nCounted": num(counted),
                            "nSkipped": num(n - n.saturating_sub(skip)),
                        },
                    };
                    if v == Verbosity::AllPlansExecution {
                        es.append(cstr!("allPlansExecution"), RawArrayBuf::new());
                    }
                    out.append(cstr!("executionStats"), es);
                }
                return Ok(out);
            }
            let mut q = Query::new(&filter, &hint);
            q.count = true;
            if limit > 0 {
                q.limit = Some(limit + skip);
            }
            let e = explain_plan(server, meta, &ns, &q, &filter, v, true)?;
            let matched = e.chosen.exec.stats.advanced;
            let counted = matched.saturating_sub(skip);
            let counted = if limit > 0 {
                counted.min(limit)
            } else {
                counted
            };
            let wrap = Wrap {
                root: Some("COUNT"),
                ..Wrap::default()
            };
            let extra = rawdoc! {
                "nCounted": num(counted),
                "nSkipped": num(matched - matched.saturating_sub(skip)),
            };
            let mut out = render(&e, &filter_doc, &wrap, v, Some(extra));
            // COUNT returns nothing itself.
            if let Ok(Some(RawBsonRef::Document(_))) = out.get("executionStats") {
                out = replace_n_returned(&out)?;
            }
            Ok(out)
        }
        "distinct" => {
            let query = opt_document(inner, "distinct", "query")?;
            let lang = crate::lang::Lang::for_command(
                inner,
                "distinct",
                crate::lang::cluster_time(server),
            )?;
            let filter = Arc::new(lang.filter(query)?);
            let hint = Hint::None;
            let q = Query::new(&filter, &hint);
            let e = explain_plan(server, meta, &ns, &q, &filter, v, false)?;
            let filter_doc = query.map(RawDocument::to_owned).unwrap_or_default();
            Ok(render(&e, &filter_doc, &Wrap::default(), v, None))
        }
        "update" => {
            let lang =
                crate::lang::Lang::for_command(inner, "update", crate::lang::cluster_time(server))?;
            let stmt = only_statement(inner, "update", "updates")?;
            let st = super::update::parse_statement(&lang, stmt)??;
            let modifies = match st.update.touched_top_level_fields() {
                Some(f) => Modifies::Paths(f),
                None => Modifies::Everything,
            };
            let mut q = Query::new(&st.filter, &st.hint);
            q.modifies = Some(&modifies);
            if !st.multi {
                q.limit = Some(1);
            }
            let e = explain_plan(server, meta, &ns, &q, &st.filter, v, false)?;
            let filter_doc = sub_document(stmt, "q");
            let extra = would_update(server, meta, &e, &st, v)?;
            let wrap = Wrap {
                root: Some("UPDATE"),
                ..Wrap::default()
            };
            Ok(render(&e, &filter_doc, &wrap, v, extra))
        }
        "delete" => {
            let lang =
                crate::lang::Lang::for_command(inner, "delete", crate::lang::cluster_time(server))?;
            let stmt = only_statement(inner, "delete", "deletes")?;
            let st = super::delete::parse_statement(&lang, 0, stmt)??;
            let mut q = Query::new(&st.filter, &st.hint);
            if st.limit_one {
                q.limit = Some(1);
            }
            let e = explain_plan(server, meta, &ns, &q, &st.filter, v, false)?;
            let filter_doc = sub_document(stmt, "q");
            let n = e.chosen.exec.stats.advanced;
            let n = if st.limit_one { n.min(1) } else { n };
            let wrap = Wrap {
                root: Some("DELETE"),
                ..Wrap::default()
            };
            let extra = (v >= Verbosity::ExecutionStats).then(|| rawdoc! {"nWouldDelete": num(n)});
            Ok(render(&e, &filter_doc, &wrap, v, extra))
        }
        "findAndModify" | "findandmodify" => {
            let lang = crate::lang::Lang::for_command(
                inner,
                "findAndModify",
                crate::lang::cluster_time(server),
            )?;
            let query = opt_document(inner, "findAndModify", "query")?;
            let filter = Arc::new(lang.filter(query)?);
            let hint = super::args::parse_hint(inner, "findAndModify")?;
            let sort_doc = opt_document(inner, "findAndModify", "sort")?;
            let sort = match sort_doc {
                Some(s) => Some(SortSpec::parse(s)?).filter(|s| !s.is_empty()),
                None => None,
            };
            let remove = matches!(inner.get("remove"), Ok(Some(RawBsonRef::Boolean(true))));
            let update = match inner.get("update") {
                Ok(Some(u)) if !remove => Some(cairn_query::update::Update::parse_with(
                    u,
                    None,
                    false,
                    lang.expr(),
                )?),
                _ => None,
            };
            let modifies = update.as_ref().map(|u| match u.touched_top_level_fields() {
                Some(f) => Modifies::Paths(f),
                None => Modifies::Everything,
            });
            let mut q = Query::new(&filter, &hint);
            q.sort = sort.as_ref();
            q.modifies = modifies.as_ref();
            q.limit = Some(1);
            let e = explain_plan(server, meta, &ns, &q, &filter, v, false)?;
            let blocking_sort = sort.is_some() && !e.chosen.exec.plan().provides_sort;
            let wrap = Wrap {
                sort: blocking_sort.then(|| {
                    (
                        sort_doc.map(RawDocument::to_owned).unwrap_or_default(),
                        Some(1),
                    )
                }),
                root: Some(if update.is_some() { "UPDATE" } else { "DELETE" }),
                ..Wrap::default()
            };
            let n = num(e.chosen.exec.stats.advanced.min(1));
            let extra = (v >= Verbosity::ExecutionStats).then(|| {
                if update.is_some() {
                    rawdoc! {"nMatched": n.clone(), "nWouldModify": n.clone(), "nWouldUpsert": 0}
                } else {
                    rawdoc! {"nWouldDelete": n}
                }
            });
            let filter_doc = query.map(RawDocument::to_owned).unwrap_or_default();
            Ok(render(&e, &filter_doc, &wrap, v, extra))
        }
        _ => unreachable_command(name),
    }
}

/// `explain` of a read on a view: the aggregation MongoDB turns it into (the view's pipeline,
/// then the command's stages), explained as an aggregation; writes are 166.
fn explain_on_view(
    server: &ServerState,
    name: &str,
    db: &str,
    view: &str,
    inner: &RawDocument,
    resolved: crate::views::Resolved,
    v: Verbosity,
) -> Result<RawDocumentBuf, CommandError> {
    let req = Request {
        name,
        db,
        body: inner,
        exhaust_allowed: false,
    };
    let lang = crate::lang::Lang::for_command(inner, name, crate::lang::cluster_time(server))?;
    let (own, hint) = match name {
        "find" => {
            let r = super::find::FindRequest::parse(&req, server)?;
            let own = crate::views::find_stages(
                &r.filter_doc,
                r.sort_doc.as_deref(),
                r.skip,
                r.limit,
                r.projection_doc.as_deref(),
            );
            (own, r.hint.clone())
        }
        "count" => {
            let query = opt_document(inner, "count", "query")?;
            let skip = match inner.get("skip").ok().flatten() {
                Some(RawBsonRef::Int32(i)) => i64::from(i),
                Some(RawBsonRef::Int64(i)) => i,
                Some(RawBsonRef::Double(d)) => d as i64,
                _ => 0,
            };
            let limit = match inner.get("limit").ok().flatten() {
                Some(RawBsonRef::Int32(i)) => i64::from(i),
                Some(RawBsonRef::Int64(i)) => i,
                Some(RawBsonRef::Double(d)) => d as i64,
                _ => 0,
            };
            (
                crate::views::count_stages(query, skip.max(0), limit.unsigned_abs()),
                super::args::parse_hint(inner, "count")?,
            )
        }
        "distinct" => {
            let query = opt_document(inner, "distinct", "query")?;
            let key = match inner.get("key").ok().flatten() {
                Some(RawBsonRef::String(k)) => k.to_string(),
                _ => return Err(CommandError::missing_field("distinct.key")),
            };
            (
                crate::views::distinct_stages(query, &key),
                cairn_query::plan::Hint::None,
            )
        }
        _ => return Err(crate::views::not_a_collection(db, view)),
    };
    let r = super::aggregate::AggRequest::for_view(server, db, view, resolved, &own, lang, hint)?;
    explain_aggregate(server, &r, v)
}

fn unreachable_command(name: &str) -> Result<RawDocumentBuf, CommandError> {
    Err(CommandError::new(
        ErrorCode::IllegalOperation,
        format!("Cannot explain cmd: {name}"),
    ))
}

/// `executionStats.nReturned` of a `count` explain is 0 (COUNT returns no documents).
fn replace_n_returned(out: &RawDocument) -> Result<RawDocumentBuf, CommandError> {
    let mut d = RawDocumentBuf::new();
    for el in out.iter() {
        let (k, v) = el.map_err(|e| CommandError::new(ErrorCode::InternalError, e.to_string()))?;
        if k.as_str() == "executionStats"
            && let RawBsonRef::Document(es) = v
        {
            let mut e2 = RawDocumentBuf::new();
            for el in es.iter().flatten() {
                if el.0.as_str() == "nReturned" {
                    e2.append(el.0, 0);
                } else {
                    e2.append(el.0, el.1);
                }
            }
            d.append(k, e2);
        } else {
            d.append(k, v);
        }
    }
    Ok(d)
}

/// `nMatched`/`nWouldModify`/`nWouldUpsert` of an explained update: the update applied in
/// memory to what the plan found (nothing is written).
fn would_update(
    server: &ServerState,
    meta: Option<&CollectionMeta>,
    e: &Explained,
    st: &super::update::Statement,
    v: Verbosity,
) -> Result<Option<RawDocumentBuf>, CommandError> {
    if v < Verbosity::ExecutionStats {
        return Ok(None);
    }
    let read = server.store.read()?;
    let Some(meta) = meta else {
        return Ok(Some(rawdoc! {
            "nMatched": 0,
            "nWouldModify": 0,
            "nWouldUpsert": i32::from(st.upsert),
        }));
    };
    let mut exec = Execution::new(e.chosen.exec.plan().clone(), st.filter.clone(), false);
    let now = || (bson::DateTime::now(), server.store.clock.next());
    let (mut matched, mut modified) = (0i64, 0i64);
    while !exec.is_exhausted() {
        crate::deadline::check()?;
        let want = if st.multi { 1000 } else { 1 };
        for doc in exec.next(&read, meta, want, usize::MAX, 10_000)? {
            matched += 1;
            let details = if st.update.is_positional() {
                st.filter.try_match_details(&doc)?
            } else {
                None
            };
            if st.update.apply(&doc, details.as_ref(), &now)?.modified {
                modified += 1;
            }
        }
        if !st.multi && matched > 0 {
            break;
        }
    }
    let would_upsert = matched == 0 && st.upsert;
    Ok(Some(rawdoc! {
        "nMatched": matched,
        "nWouldModify": modified,
        "nWouldUpsert": i32::from(would_upsert),
    }))
}

/// Appends `command` (the explained command with its `$db`), `serverInfo` and
/// `serverParameters` to an explain reply.
pub fn append_server_info(
    out: &mut RawDocumentBuf,
    server: &ServerState,
    port: u16,
    db: &str,
    inner: RawDocumentBuf,
) {
    let mut command = inner;
    command.append(cstr!("$db"), db);
    out.append(cstr!("command"), command);
    out.append(
        cstr!("serverInfo"),
        rawdoc! {
            "host": pretty_host_name(&server.host, port),
            "port": i32::from(port),
            "version": MONGODB_VERSION,
            "gitVersion": GIT_VERSION,
        },
    );
    out.append(
        cstr!("serverParameters"),
        rawdoc! {
            "internalQueryMaxBlockingSortMemoryUsageBytes":
                RawBson::Int64(i64::try_from(server.config.sort_memory_limit_bytes).unwrap_or(i64::MAX)),
        },
    );
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let db = inv.req.db.to_string();
        let inner = match body.get("explain") {
            Ok(Some(RawBsonRef::Document(d))) => d.to_owned(),
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "explain.explain",
                    type_name(&other),
                    "object",
                ));
            }
            _ => return Err(CommandError::missing_field("explain.explain")),
        };
        let v = verbosity(body)?;
        let name = inner
            .iter()
            .next()
            .and_then(Result::ok)
            .map(|(k, _)| k.as_str().to_string())
            .unwrap_or_default();
        let Some(cmd) = super::lookup(&name) else {
            return Err(CommandError::new(
                ErrorCode::CommandNotFound,
                format!("Explain failed due to unknown command: {name}"),
            ));
        };
        if !matches!(
            cmd.name,
            "aggregate" | "find" | "count" | "distinct" | "update" | "delete" | "findAndModify"
        ) {
            return Err(CommandError::new(
                ErrorCode::IllegalOperation,
                format!("Cannot explain cmd: {}", cmd.name),
            ));
        }
        super::check_fields(
            cmd,
            &Request {
                name: &name,
                db: &db,
                body: &inner,
                exhaust_allowed: false,
            },
        )?;
        let server = inv.server.clone();
        let port = inv.client.local.port();
        let cmd_name = cmd.name;
        let inner2 = inner.clone();
        let db2 = db.clone();
        let mut out =
            blocking::run(move || explain_inner(&server, cmd_name, &db2, &inner2, v)).await?;
        append_server_info(&mut out, inv.server, port, &db, inner);
        Ok(out.into())
    })
}
