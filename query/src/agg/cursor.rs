//! The `$cursor` stage: the pipeline's leading `$match`, `$sort`, `$skip` and `$limit`, run by
//! the query planner (MongoDB's pushdown into the query layer), plus the projection of the
//! fields the rest of the pipeline reads ([`crate::agg::deps`]).
//!
//! On its first call it resolves the collection through the [`crate::agg::Catalog`] (a
//! missing collection is empty), chooses a plan with [`crate::plan::choose`] on the call's
//! [`crate::plan::Source`] (index bounds from the filter, a sort provided by an index, a
//! covered plan when the index holds every needed field, `hint`), and then produces documents:
//! streamed from the plan, or through a top-k [`Sorter`] when the plan's order is not the
//! requested sort. When the rest of the pipeline needs no field at all (`$count`,
//! `count_documents`' `$group`), the plan only counts and empty documents flow on; when it
//! needs only top-level fields, the projection copies those elements in document order; and
//! when the next stage is `$group` (it reads only those fields and keeps no document),
//! documents pass unprojected, saving a copy of each (the planner still sees the projection,
//! for covered plans). An `$unwind` gets the projected documents: it builds one output per
//! element, and walking the small projection each time is cheaper than the whole document.
//! As the plan works it reports the keys and documents it examined, and itself, to the host
//! ([`crate::agg::Host::record_work`]: the operation's `keysExamined`, `docsExamined`,
//! `planSummary`).
//!
//! Invariant: between calls the stage keeps only the plan's position (no snapshot), so a
//! cursor may continue it on a newer snapshot.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bson::{RawBson, RawDocumentBuf, rawdoc};
use cairn_storage::catalog::CollectionMeta;

use super::stages::group::Group;
use super::stages::limit::Limit;
use super::stages::match_::Match;
use super::stages::skip::Skip;
use super::stages::sort::Sort;
use super::{DocStream, ExecCx, Options, Stage};
use crate::error::Result;
use crate::expr::ExprExtensions;
use crate::filter::Filter;
use crate::jsonschema::WithJsonSchema;
use crate::plan::{Chosen, Execution, Hint, Plan, Query, Stats, Trial, choose};
use crate::projection::Projection;
use crate::sort::{SortSpec, SortedDocs, Sorter};

/// What the `$cursor` stage chose and did (for `explain`).
#[derive(Debug, Clone)]
pub struct Report {
    /// The winning plan.
    pub plan: Arc<Plan>,
    /// The losing candidates.
    pub rejected: Vec<Arc<Plan>>,
    /// The rejected trials' statistics.
    pub rejected_stats: Vec<(Stats, bool)>,
    /// How many candidates there were.
    pub candidates: usize,
    /// The winner's statistics so far.
    pub stats: Stats,
    /// Whether the plan finished.
    pub eof: bool,
    /// Whether a blocking sort ran (the plan did not provide the order).
    pub blocking_sort: bool,
}

/// The `$cursor` stage (see the module docs).
#[derive(Debug)]
pub struct CursorStage {
    /// Database.
    pub db: String,
    /// Collection.
    pub coll: String,
    /// The filter as given (merged `$match`es).
    pub filter_doc: RawDocumentBuf,
    /// The parsed filter.
    pub filter: Arc<Filter>,
    /// The sort and its pattern as given.
    pub sort: Option<(SortSpec, RawDocumentBuf)>,
    /// Documents skipped after sorting.
    pub skip: u64,
    /// Documents returned at most.
    pub limit: Option<u64>,
    /// The projection of the needed fields, and its document.
    pub projection: Option<(Projection, RawDocumentBuf)>,
    /// The needed fields when they are all top-level (`_id` among them only when needed):
    /// the projection is then a copy of those elements, in document order.
    pub top_level: Option<Vec<String>>,
    /// Whether documents leave with the projection applied: not when the next stage is
    /// `$group`, which reads only the needed fields and keeps no document, so the
    /// projection's copy would be thrown away.
    pub project_output: bool,
    /// Only the number of matches is needed.
    pub count_only: bool,
    /// The `hint`.
    pub hint: Hint,
    /// What the last run chose (for explain).
    pub report: Mutex<Option<Report>>,
}

impl CursorStage {
    /// Takes the leading stages the query layer can run from `stages` and returns the
    /// `$cursor` stage with the remaining stages.
    pub fn absorb(
        db: &str,
        coll: &str,
        stages: Vec<Arc<dyn Stage>>,
        hint: Hint,
        ext: &ExprExtensions,
    ) -> Result<(CursorStage, Vec<Arc<dyn Stage>>)> {
        let mut it = stages.into_iter().peekable();
        let mut filters: Vec<RawDocumentBuf> = Vec::new();
        while let Some(m) = it.peek().and_then(|s| s.as_any().downcast_ref::<Match>()) {
            filters.push(m.doc.clone());
            it.next();
        }
        let mut sort = None;
        let mut skip = 0u64;
        let mut limit = None;
        if let Some(s) = it.peek().and_then(|s| s.as_any().downcast_ref::<Sort>()) {
            sort = Some((s.spec.clone(), s.doc.clone()));
            limit = s.limit;
            it.next();
        }
        if limit.is_none() {
            if let Some(s) = it.peek().and_then(|s| s.as_any().downcast_ref::<Skip>()) {
                skip = s.n;
                it.next();
            }
            if let Some(l) = it.peek().and_then(|s| s.as_any().downcast_ref::<Limit>()) {
                limit = Some(l.n);
                it.next();
            }
        }
        let rest: Vec<Arc<dyn Stage>> = it.collect();
        let project_output = !rest.first().is_some_and(|s| s.as_any().is::<Group>());
        let filter_doc = match filters.len() {
            0 => RawDocumentBuf::new(),
            1 => filters.pop().unwrap_or_default(),
            _ => {
                let mut arr = bson::RawArrayBuf::new();
                for f in filters {
                    arr.push(f);
                }
                rawdoc! {"$and": arr}
            }
        };
        let filter = Arc::new(Filter::parse_with(&filter_doc, &WithJsonSchema(ext))?);
        let deps = super::Pipeline::from_stages(rest.clone()).deps();
        let mut top_level = None;
        let (projection, count_only) = if deps.whole {
            (None, false)
        } else {
            let paths = deps.minimal_paths();
            if paths.is_empty() {
                (None, true)
            } else {
                if paths.iter().all(|p| !p.contains('.')) {
                    top_level = Some(paths.clone());
                }
                let mut d = RawDocumentBuf::new();
                let mut id = false;
                for p in &paths {
                    if p == "_id" || p.starts_with("_id.") {
                        id = true;
                    }
                    if let Ok(k) = <&bson::raw::CStr>::try_from(p.as_str()) {
                        d.append(k, 1i32);
                    }
                }
                if !id {
                    d.append(bson::raw::cstr!("_id"), 0i32);
                }
                match Projection::parse(&d) {
                    Ok(p) => (Some((p, d)), false),
                    Err(_) => (None, false),
                }
            }
        };
        Ok((
            CursorStage {
                db: db.to_string(),
                coll: coll.to_string(),
                filter_doc,
                filter,
                sort,
                skip,
                limit,
                projection,
                top_level,
                project_output,
                count_only,
                hint,
                report: Mutex::new(None),
            },
            rest,
        ))
    }

    /// `db.coll`.
    pub fn ns(&self) -> String {
        format!("{}.{}", self.db, self.coll)
    }

    /// The query the planner sees.
    pub fn query(&self) -> Query<'_> {
        let mut q = Query::new(&self.filter, &self.hint);
        q.sort = self.sort.as_ref().map(|(s, _)| s);
        q.projection = self.projection.as_ref().map(|(p, _)| p);
        q.count = self.count_only && self.sort.is_none();
        q.limit = self.limit.map(|l| l.saturating_add(self.skip));
        q
    }

    /// Chooses the plan (racing candidates when `cache` is `None`).
    pub fn choose(
        &self,
        cx: &ExecCx<'_>,
        meta: &CollectionMeta,
        use_cache: bool,
    ) -> Result<Chosen> {
        let cache = if use_cache {
            cx.host.plan_cache()
        } else {
            None
        };
        let count_only = self.count_only && self.sort.is_none();
        choose(
            cache,
            &self.ns(),
            meta,
            &self.query(),
            &self.filter,
            cx.source,
            count_only,
        )
    }

    fn record(&self, chosen: &Chosen, blocking_sort: bool) {
        let r = Report {
            plan: chosen.exec.plan().clone(),
            rejected: chosen
                .rejected
                .iter()
                .map(|t: &Trial| t.exec.plan().clone())
                .collect(),
            rejected_stats: chosen
                .rejected
                .iter()
                .map(|t| (t.exec.stats.clone(), t.exec.is_exhausted()))
                .collect(),
            candidates: chosen.candidates,
            stats: chosen.exec.stats.clone(),
            eof: chosen.exec.is_exhausted(),
            blocking_sort,
        };
        if let Ok(mut g) = self.report.lock() {
            *g = Some(r);
        }
    }

    fn update_stats(&self, exec: &Execution) {
        if let Ok(mut g) = self.report.lock()
            && let Some(r) = g.as_mut()
        {
            r.stats.clone_from(&exec.stats);
            r.eof = exec.is_exhausted();
        }
    }
}

impl Stage for CursorStage {
    fn name(&self) -> &'static str {
        "$cursor"
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(rawdoc! {"filter": self.filter_doc.clone()})
    }

    fn open(
        self: Arc<Self>,
        _input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(CursorStream {
            stage: self,
            opts: opts.clone(),
            state: State::Start,
            seen: (0, 0),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

enum State {
    Start,
    Plan {
        meta: Arc<CollectionMeta>,
        exec: Box<Execution>,
        pending: VecDeque<RawDocumentBuf>,
        skip: u64,
        remaining: Option<u64>,
        /// Empty documents still to produce (count-only plans).
        owed: u64,
    },
    Sorted {
        docs: SortedDocs,
        skip: u64,
    },
    Done,
}

struct CursorStream {
    stage: Arc<CursorStage>,
    opts: Arc<Options>,
    state: State,
    /// The keys and documents examined when last reported to the host.
    seen: (u64, u64),
}

/// Reports `exec`'s work since `seen` to the host ([`crate::agg::Host::record_work`]).
pub(crate) fn report_work(cx: &ExecCx<'_>, exec: &Execution, seen: &mut (u64, u64)) {
    let now = (exec.stats.keys_examined, exec.stats.docs_examined);
    cx.host.record_work(
        exec.plan(),
        now.0.saturating_sub(seen.0),
        now.1.saturating_sub(seen.1),
    );
    *seen = now;
}

/// Documents fetched per storage call.
const BATCH: usize = 256;
/// Work per storage call.
const BUDGET: u64 = 10_000;

impl CursorStream {
    fn start(&mut self, cx: &ExecCx<'_>) -> Result<()> {
        let st = &self.stage;
        let Some(meta) = cx.catalog.collection(&st.db, &st.coll)? else {
            self.state = State::Done;
            return Ok(());
        };
        let chosen = st.choose(cx, &meta, true)?;
        let blocking = st
            .sort
            .as_ref()
            .is_some_and(|_| !chosen.exec.plan().provides_sort);
        st.record(&chosen, blocking);
        report_work(cx, &chosen.exec, &mut self.seen);
        if blocking {
            let Some((spec, _)) = &st.sort else {
                return Ok(());
            };
            let top_k = st
                .limit
                .map(|l| usize::try_from(l.saturating_add(st.skip)).unwrap_or(usize::MAX));
            let mut sorter = Sorter::new(
                spec.clone(),
                top_k,
                self.opts.memory_limit,
                self.opts.allow_disk_use,
                self.opts.spill_dir.clone(),
            );
            for d in chosen.buffered {
                sorter.push(d)?;
            }
            let mut exec = chosen.exec;
            while !exec.is_exhausted() {
                cx.host.check_interrupt()?;
                for d in exec.next(cx.source, &meta, 1000, 16 * 1024 * 1024, BUDGET)? {
                    sorter.push(d)?;
                }
                report_work(cx, &exec, &mut self.seen);
            }
            st.update_stats(&exec);
            self.state = State::Sorted {
                docs: sorter.finish()?,
                skip: st.skip,
            };
            return Ok(());
        }
        let count_only = st.count_only && st.sort.is_none();
        let owed = if count_only {
            chosen.exec.stats.advanced
        } else {
            0
        };
        self.state = State::Plan {
            meta,
            exec: Box::new(chosen.exec),
            pending: chosen.buffered.into(),
            skip: st.skip,
            remaining: st.limit,
            owed,
        };
        Ok(())
    }

    fn project(&self, d: RawDocumentBuf) -> Result<RawDocumentBuf> {
        if !self.stage.project_output {
            return Ok(d);
        }
        if let Some(names) = &self.stage.top_level {
            // An inclusion of top-level fields keeps them in document order, whatever their
            // type: a copy of those elements (what the projection would build).
            let mut out = RawDocumentBuf::new();
            for el in d.iter() {
                let (k, v) = el.map_err(|e| crate::error::QueryError::BadValue(e.to_string()))?;
                if names.iter().any(|n| n == k.as_str()) {
                    out.append(k, v);
                }
            }
            return Ok(out);
        }
        match &self.stage.projection {
            Some((p, _)) => p.apply(&d, None),
            None => Ok(d),
        }
    }
}

impl DocStream for CursorStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if matches!(self.state, State::Start) {
            self.start(cx)?;
        }
        let count_only = self.stage.count_only && self.stage.sort.is_none();
        loop {
            match &mut self.state {
                State::Start | State::Done => return Ok(None),
                State::Sorted { docs, skip } => {
                    while *skip > 0 {
                        match docs.next() {
                            Some(r) => {
                                r?;
                                *skip -= 1;
                            }
                            None => return Ok(None),
                        }
                    }
                    return match docs.next() {
                        Some(d) => {
                            let d = d?;
                            if count_only {
                                return Ok(Some(RawDocumentBuf::new()));
                            }
                            self.project(d).map(Some)
                        }
                        None => Ok(None),
                    };
                }
                State::Plan {
                    meta,
                    exec,
                    pending,
                    skip,
                    remaining,
                    owed,
                } => {
                    if *remaining == Some(0) {
                        self.state = State::Done;
                        return Ok(None);
                    }
                    if count_only {
                        if *owed == 0 {
                            if exec.is_exhausted() {
                                self.stage.update_stats(exec);
                                self.state = State::Done;
                                return Ok(None);
                            }
                            cx.host.check_interrupt()?;
                            *owed += exec.count(cx.source, meta, BUDGET)?;
                            report_work(cx, exec, &mut self.seen);
                            continue;
                        }
                        *owed -= 1;
                        if *skip > 0 {
                            *skip -= 1;
                            continue;
                        }
                        if let Some(r) = remaining.as_mut() {
                            *r -= 1;
                        }
                        return Ok(Some(RawDocumentBuf::new()));
                    }
                    if let Some(d) = pending.pop_front() {
                        if *skip > 0 {
                            *skip -= 1;
                            continue;
                        }
                        if let Some(r) = remaining.as_mut() {
                            *r -= 1;
                        }
                        return self.project(d).map(Some);
                    }
                    if exec.is_exhausted() {
                        self.stage.update_stats(exec);
                        self.state = State::Done;
                        return Ok(None);
                    }
                    cx.host.check_interrupt()?;
                    let want = match remaining {
                        Some(r) => usize::try_from(r.saturating_add(*skip))
                            .unwrap_or(usize::MAX)
                            .min(BATCH),
                        None => BATCH,
                    };
                    let docs = exec.next(cx.source, meta, want, 16 * 1024 * 1024, BUDGET)?;
                    pending.extend(docs);
                    self.stage.update_stats(exec);
                    report_work(cx, exec, &mut self.seen);
                }
            }
        }
    }
}
