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
//! documents pass unprojected, saving a copy of each (the planner still sees the projection's
//! paths, for covered plans). The planner needs only those paths
//! ([`crate::plan::Query::inclusion`]), so the projection is parsed only when documents are
//! projected with it; the stage's filter is the leading `$match`'s, parsed once. An `$unwind` gets the projected documents: it builds one output per
//! element, and walking the small projection each time is cheaper than the whole document.
//! As the plan works it reports the keys and documents it examined, and itself, to the host
//! ([`crate::agg::Host::record_work`]: the operation's `keysExamined`, `docsExamined`,
//! `planSummary`).
//!
//! # Reading ahead on a second thread
//! A large read overlaps with the stages that consume it: when a consuming stage drains the
//! `$cursor` stage ([`DocStream::drain`]: `$group`, through `$unwind` too) or a blocking sort
//! takes the whole plan, and the plan is still going after its first storage call, the rest of
//! the plan runs on a scoped second thread ([`ReadAhead`]) that fetches, decodes and projects
//! batches while this thread runs the pipeline on the batches before. Only a snapshot can be
//! shared ([`crate::plan::Source::shared`]); a write transaction reads on one thread. Short
//! reads, plans with a skip or limit still to apply, counts, and documents pulled one at a
//! time (`next`) never start a thread.
//!
//! Invariants: between calls the stage keeps only the plan's position (no snapshot), so a
//! cursor may continue it on a newer snapshot; a read-ahead thread ends within the call that
//! started it; documents reach the pipeline in plan order, the same documents and errors as
//! on one thread, with at most a few bounded batches in flight. The work reported is the
//! same, except when a stage fails mid-way: the batches read ahead of it count as examined.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use bson::{RawBson, RawDocumentBuf, rawdoc};
use cairn_storage::catalog::CollectionMeta;

use super::stages::group::Group;
use super::stages::limit::Limit;
use super::stages::match_::Match;
use super::stages::skip::Skip;
use super::stages::sort::Sort;
use super::{DocStream, ExecCx, Host, Options, Stage};
use crate::error::Result;
use crate::expr::ExprExtensions;
use crate::filter::Filter;
use crate::jsonschema::WithJsonSchema;
use crate::plan::{Chosen, Execution, Hint, Plan, Query, Source, Stats, Trial, choose};
use crate::projection::Projection;
use crate::sort::{SortSpec, SortedDocs, Sorter};

/// The inclusion projection of `paths` (minimal, sorted), `_id: 0` unless `_id` is among
/// them.
fn inclusion_doc(paths: &[String]) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    let mut id = false;
    for p in paths {
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
    d
}

/// A dotted path whose inclusion projection certainly parses: non-empty components not
/// starting with `$`, no NUL byte.
fn plain_path(p: &str) -> bool {
    !p.contains('\0') && p.split('.').all(|c| !c.is_empty() && !c.starts_with('$'))
}

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
    /// The needed fields, minimal and sorted, when their projection is valid (an inclusion of
    /// them, `_id: 0` unless `_id` is needed: [`CursorStage::projection_doc`]).
    pub projected: Option<Vec<String>>,
    /// The paths that projection keeps, as [`Projection::simple_inclusion_paths`] lists them:
    /// what the planner needs to consider covered plans ([`crate::plan::Query::inclusion`]).
    pub inclusion: Option<Vec<String>>,
    /// The parsed projection, built when documents are first projected with it (dotted
    /// paths, when the next stage is not `$group`).
    parsed: OnceLock<Option<Projection>>,
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
        let mut matches = Vec::new();
        while let Some(s) = it.next_if(|s| s.as_any().is::<Match>()) {
            matches.push(s);
        }
        let filters: Vec<&Match> = matches
            .iter()
            .filter_map(|s| s.as_any().downcast_ref::<Match>())
            .collect();
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
        // One `$match` (adjacent ones were merged): its filter, already parsed.
        let (filter_doc, filter) = match filters.as_slice() {
            [] => {
                let d = RawDocumentBuf::new();
                let f = Filter::parse_with(&d, &WithJsonSchema(ext))?;
                (d, Arc::new(f))
            }
            [m] => (m.doc.clone(), m.filter.clone()),
            many => {
                let mut arr = bson::RawArrayBuf::new();
                for m in many {
                    arr.push(m.doc.clone());
                }
                let d = rawdoc! {"$and": arr};
                let f = Filter::parse_with(&d, &WithJsonSchema(ext))?;
                (d, Arc::new(f))
            }
        };
        let deps = super::Pipeline::from_stages(rest.clone()).deps();
        let mut top_level = None;
        let mut projected = None;
        let mut inclusion = None;
        let parsed = OnceLock::new();
        let count_only = if deps.whole {
            false
        } else {
            let paths = deps.minimal_paths();
            if paths.is_empty() {
                true
            } else {
                if paths.iter().all(|p| !p.contains('.')) {
                    top_level = Some(paths.clone());
                }
                if paths.iter().all(|p| plain_path(p)) {
                    // The projection of plain paths parses, and keeps them in this
                    // (sorted) order: no need to build or parse it to plan.
                    inclusion = Some(paths.clone());
                    projected = Some(paths);
                } else if let Ok(p) = Projection::parse(&inclusion_doc(&paths)) {
                    inclusion = p.simple_inclusion_paths().map(<[String]>::to_vec);
                    projected = Some(paths);
                    let _ = parsed.set(Some(p));
                }
                false
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
                projected,
                inclusion,
                parsed,
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
        crate::plan::namespace(&self.db, &self.coll)
    }

    /// The projection of the needed fields, as explain shows it.
    pub fn projection_doc(&self) -> Option<RawDocumentBuf> {
        self.projected.as_deref().map(inclusion_doc)
    }

    /// The query the planner sees.
    pub fn query(&self) -> Query<'_> {
        let mut q = Query::new(&self.filter, &self.hint);
        q.sort = self.sort.as_ref().map(|(s, _)| s);
        q.inclusion = self.inclusion.as_deref();
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
    report_work_to(cx.host, exec, seen);
}

/// [`report_work`] given the host alone (from the read-ahead thread).
fn report_work_to(host: &dyn Host, exec: &Execution, seen: &mut (u64, u64)) {
    let now = (exec.stats.keys_examined, exec.stats.docs_examined);
    host.record_work(
        exec.plan(),
        now.0.saturating_sub(seen.0),
        now.1.saturating_sub(seen.1),
    );
    *seen = now;
}

/// Documents fetched per storage call.
const BATCH: usize = 256;
/// Documents fetched per storage call feeding a blocking sort.
const SORT_BATCH: usize = 1000;
/// Work per storage call.
const BUDGET: u64 = 10_000;
/// Storage calls made on the consumer's thread before the rest of a drain or a blocking
/// sort's input is read ahead on a second thread ([`ReadAhead`]): short reads never start a
/// thread.
const AHEAD_AFTER_BATCHES: usize = 1;
/// Batches the read-ahead thread may have finished and not yet handed over.
const IN_FLIGHT: usize = 2;
/// Bytes per read-ahead batch (one document may exceed it). With [`IN_FLIGHT`] waiting, one
/// being read and one being consumed, a read-ahead holds at most about four of these beyond
/// what the pipeline holds.
const AHEAD_BATCH_BYTES: usize = 1024 * 1024;

/// Reading a plan to its end on a second thread while the caller's thread runs the rest of
/// the pipeline on what it read. The documents reach the consumer in plan order, in batches
/// through a bounded channel ([`IN_FLIGHT`] batches of at most about [`AHEAD_BATCH_BYTES`]),
/// so memory stays bounded however far the plan goes. Both threads read one snapshot (a
/// [`Source::shared`] source), so the documents are those the serial path would read. The
/// reading thread checks for interruption before every storage call, as the serial path does,
/// and an error (read or interruption) reaches the consumer after every document read before
/// it; when the consumer fails, the channel closes and the reader stops after its current
/// batch. The thread is scoped: it ends before the call that started it returns, so nothing
/// outlives the call's snapshot.
struct ReadAhead<'a> {
    src: &'a (dyn Source + Sync),
    host: &'a dyn Host,
    stage: &'a CursorStage,
    meta: &'a CollectionMeta,
    max_docs: usize,
    /// Whether documents leave projected ([`CursorStage::project`]; done on the reading
    /// thread).
    project: bool,
}

impl ReadAhead<'_> {
    /// One batch: what the serial path does per storage call.
    fn batch(&self, exec: &mut Execution, seen: &mut (u64, u64)) -> Result<Vec<RawDocumentBuf>> {
        self.host.check_interrupt()?;
        let docs = exec.next(
            self.src,
            self.meta,
            self.max_docs,
            AHEAD_BATCH_BYTES,
            BUDGET,
        )?;
        self.stage.update_stats(exec);
        report_work_to(self.host, exec, seen);
        if self.project {
            docs.into_iter().map(|d| self.stage.project(d)).collect()
        } else {
            Ok(docs)
        }
    }

    /// Runs `exec` to its end, passing every document to `consume` on this thread in order.
    fn run(
        self,
        exec: &mut Execution,
        seen: &mut (u64, u64),
        consume: &mut dyn FnMut(RawDocumentBuf) -> Result<()>,
    ) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Vec<RawDocumentBuf>>>(IN_FLIGHT);
        std::thread::scope(|s| {
            let reader = &self;
            s.spawn(move || {
                while !exec.is_exhausted() {
                    let batch = reader.batch(exec, seen);
                    let failed = batch.is_err();
                    if tx.send(batch).is_err() || failed {
                        return;
                    }
                }
                reader.stage.update_stats(exec);
            });
            for batch in rx {
                for d in batch? {
                    consume(d)?;
                }
            }
            Ok(())
        })
    }
}

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
            let mut batches = 0usize;
            while !exec.is_exhausted() {
                // A scan still going after its first batches reads the rest on a second
                // thread while this one sorts.
                if batches >= AHEAD_AFTER_BATCHES
                    && let Some(src) = cx.source.shared()
                {
                    let ahead = ReadAhead {
                        src,
                        host: cx.host,
                        stage: st,
                        meta: &meta,
                        max_docs: SORT_BATCH,
                        project: false,
                    };
                    ahead.run(&mut exec, &mut self.seen, &mut |d| sorter.push(d))?;
                    break;
                }
                cx.host.check_interrupt()?;
                for d in exec.next(cx.source, &meta, SORT_BATCH, 16 * 1024 * 1024, BUDGET)? {
                    sorter.push(d)?;
                }
                report_work(cx, &exec, &mut self.seen);
                batches += 1;
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
}

impl CursorStage {
    /// `d` as the stage hands it on: projected to the needed fields unless the next stage
    /// is `$group` (see [`CursorStage::project_output`]).
    fn project(&self, d: RawDocumentBuf) -> Result<RawDocumentBuf> {
        if !self.project_output {
            return Ok(d);
        }
        if let Some(names) = &self.top_level {
            // An inclusion of top-level fields keeps them in document order, whatever their
            // type: a copy of those elements (what the projection would build), their bytes
            // copied in one light walk when it reads the document plainly.
            if let Some(out) = crate::expr::field::copy_top_level(&d, names) {
                return Ok(out);
            }
            let mut out = RawDocumentBuf::new();
            for el in d.iter() {
                let (k, v) = el.map_err(|e| crate::error::QueryError::BadValue(e.to_string()))?;
                if names.iter().any(|n| n == k.as_str()) {
                    out.append(k, v);
                }
            }
            return Ok(out);
        }
        let parsed = self.parsed.get_or_init(|| {
            self.projection_doc()
                .and_then(|d| Projection::parse(&d).ok())
        });
        match parsed {
            Some(p) => p.apply(&d, None),
            None => Ok(d),
        }
    }
}

impl CursorStream {
    /// Whether the rest of the plan may be read ahead: a plan producing documents (not a
    /// count), with nothing buffered, no skip or limit left to apply, and more to read.
    fn can_read_ahead(&self) -> bool {
        let count_only = self.stage.count_only && self.stage.sort.is_none();
        match &self.state {
            State::Plan {
                exec,
                pending,
                skip,
                remaining,
                ..
            } => {
                !count_only
                    && pending.is_empty()
                    && *skip == 0
                    && remaining.is_none()
                    && !exec.is_exhausted()
            }
            _ => false,
        }
    }
}

impl DocStream for CursorStream {
    /// As [`DocStream::next`] one by one; once the plan has made [`AHEAD_AFTER_BATCHES`]
    /// storage calls and still has more, the rest is read ahead on a second thread
    /// ([`ReadAhead`]) when the source is a snapshot.
    fn drain(
        &mut self,
        cx: &ExecCx<'_>,
        f: &mut dyn FnMut(&bson::RawDocument) -> Result<()>,
    ) -> Result<()> {
        let mut calls = 0usize;
        loop {
            if matches!(&self.state, State::Plan { pending, .. } if pending.is_empty()) {
                if calls >= AHEAD_AFTER_BATCHES
                    && self.can_read_ahead()
                    && let Some(src) = cx.source.shared()
                    && let State::Plan { meta, exec, .. } = &mut self.state
                {
                    let ahead = ReadAhead {
                        src,
                        host: cx.host,
                        stage: &self.stage,
                        meta,
                        max_docs: BATCH,
                        project: true,
                    };
                    ahead.run(exec, &mut self.seen, &mut |d| f(&d))?;
                    self.state = State::Done;
                    return Ok(());
                }
                calls += 1;
            }
            match self.next(cx)? {
                Some(d) => f(&d)?,
                None => return Ok(()),
            }
        }
    }

    /// Its documents are the plan's, read from the call's [`crate::plan::Source`] (sorted
    /// through this process's own spill files, or not), whole or projected (a projection
    /// builds its output from the stored document's values), or the empty documents of a
    /// count.
    fn stored(&self) -> bool {
        true
    }

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
                            self.stage.project(d).map(Some)
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
                        return self.stage.project(d).map(Some);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agg::deps::Deps;

    /// The planner's paths taken without parsing ([`CursorStage::inclusion`] for plain
    /// paths) are those the parsed projection lists, in the same order.
    #[test]
    fn plain_inclusion_paths_are_the_parsed_projections() {
        let sets: &[&[&str]] = &[
            &["score", "address.city"],
            &["a"],
            &["_id"],
            &["_id.x", "b"],
            &["B", "_id", "a"],
            &["a-b", "a.c", "a/d", "a.b.c", "a.b-x", "ab.c", "a!"],
            &["x.y.z", "x.y", "x.w", "x"],
            &["z", "y.a", "y.b.c", "_id.a", "_id.b", "Z"],
        ];
        for set in sets {
            let mut deps = Deps::default();
            for p in *set {
                deps.add_path(p);
            }
            let paths = deps.minimal_paths();
            assert!(paths.iter().all(|p| plain_path(p)), "{paths:?}");
            let doc = inclusion_doc(&paths);
            let parsed = Projection::parse(&doc).unwrap();
            assert_eq!(
                parsed.simple_inclusion_paths(),
                Some(paths.as_slice()),
                "{doc:?}"
            );
        }
        assert!(!plain_path("a..b"));
        assert!(!plain_path("a.$b"));
        assert!(!plain_path(""));
    }
}
