//! Parsed pipelines ([`Pipeline`]), the parse context ([`ParseCx`]), and a whole prepared
//! aggregation ([`Aggregation`]: the `$cursor` source plus the remaining stages) with its
//! running form ([`Running`]).
//!
//! Invariants: a [`Pipeline`] has passed every position check before it can be opened; an
//! [`Aggregation`]'s stages are in the order they run, the `$cursor` stage (if any) first.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bson::{RawArray, RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf};

use super::cursor::CursorStage;
use super::deps::{Deps, DepsState};
use super::{DocStream, Empty, ExecCx, Options, Stage, loc, stages};
use crate::error::{QueryError, Result};
use crate::expr::ExprExtensions;
use crate::plan::Hint;

/// Most stages in a pipeline (`internalPipelineLengthLimit`).
pub const MAX_STAGES: usize = 1000;

/// Deepest nesting of sub-pipelines (`$lookup` in `$facet` in …).
pub const MAX_SUB_PIPELINE_DEPTH: usize = 20;

/// Which kind of pipeline is being parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubContext {
    /// The command's own pipeline.
    Top,
    /// A `$facet` sub-pipeline.
    Facet,
    /// A `$lookup` (or `$graphLookup`) sub-pipeline.
    Lookup,
    /// A `$unionWith` sub-pipeline.
    UnionWith,
}

/// What parsing a pipeline needs to know.
#[derive(Debug, Clone)]
pub struct ParseCx {
    /// The expression language with the variables in scope (the command's `let`, `$lookup`'s
    /// `let`, `$$NOW`).
    pub ext: ExprExtensions,
    /// The database.
    pub db: String,
    /// The collection the pipeline reads, `None` for `{aggregate: 1}`.
    pub coll: Option<String>,
    /// Which kind of pipeline.
    pub sub: SubContext,
    /// Nesting depth of sub-pipelines.
    pub depth: usize,
}

impl ParseCx {
    /// The context of a command's pipeline.
    pub fn new(db: &str, coll: Option<&str>, ext: ExprExtensions) -> ParseCx {
        ParseCx {
            ext,
            db: db.to_string(),
            coll: coll.map(str::to_string),
            sub: SubContext::Top,
            depth: 0,
        }
    }

    /// The context of a sub-pipeline over `coll`.
    pub fn sub(&self, sub: SubContext, coll: Option<&str>) -> Result<ParseCx> {
        if self.depth + 1 > MAX_SUB_PIPELINE_DEPTH {
            return Err(loc(
                5052602,
                format!(
                    "Maximum number of nested sub-pipelines exceeded. Limit is {MAX_SUB_PIPELINE_DEPTH}"
                ),
            ));
        }
        Ok(ParseCx {
            ext: self.ext.clone(),
            db: self.db.clone(),
            coll: coll.map(str::to_string),
            sub,
            depth: self.depth + 1,
        })
    }

    /// `db.coll` (`db.$cmd.aggregate` without a collection).
    pub fn ns(&self) -> String {
        match &self.coll {
            Some(c) => format!("{}.{c}", self.db),
            None => format!("{}.$cmd.aggregate", self.db),
        }
    }
}

/// A parsed pipeline.
#[derive(Debug, Clone, Default)]
pub struct Pipeline {
    pub(crate) stages: Vec<Arc<dyn Stage>>,
}

impl Pipeline {
    /// Parses and checks a pipeline (see the module docs of [`crate::agg`]).
    pub fn parse(arr: &RawArray, cx: &ParseCx) -> Result<Pipeline> {
        let mut out = Vec::new();
        let mut n = 0usize;
        for el in arr {
            let el = el.map_err(|e| QueryError::BadValue(format!("invalid pipeline: {e}")))?;
            n += 1;
            if n > MAX_STAGES {
                return Err(QueryError::FailedToParse(format!(
                    "Pipeline length must be no longer than {MAX_STAGES} stages"
                )));
            }
            let RawBsonRef::Document(spec) = el else {
                return Err(QueryError::TypeMismatch(
                    "Each element of the 'pipeline' array must be an object".into(),
                ));
            };
            out.extend(stages::parse_stage(spec, cx)?);
        }
        let p = Pipeline { stages: out };
        p.check_positions(cx)?;
        Ok(p)
    }

    /// The stages.
    pub fn stages(&self) -> &[Arc<dyn Stage>] {
        &self.stages
    }

    /// Stage position rules.
    fn check_positions(&self, cx: &ParseCx) -> Result<()> {
        let last = self.stages.len().saturating_sub(1);
        for (i, s) in self.stages.iter().enumerate() {
            let c = s.constraints();
            let name = s.name();
            if c.not_in_facet && cx.sub == SubContext::Facet {
                return Err(loc(
                    40600,
                    format!("{name} is not allowed to be used within a $facet stage"),
                ));
            }
            if c.writes {
                match cx.sub {
                    SubContext::Facet => {
                        return Err(loc(
                            40600,
                            format!("{name} is not allowed to be used within a $facet stage"),
                        ));
                    }
                    SubContext::Lookup => {
                        return Err(loc(
                            51047,
                            format!("{name} is not allowed within a $lookup's sub-pipeline"),
                        ));
                    }
                    SubContext::UnionWith => {
                        return Err(loc(
                            31441,
                            format!("{name} is not allowed within a $unionWith's sub-pipeline"),
                        ));
                    }
                    SubContext::Top => {}
                }
            }
            if c.last && i != last {
                return Err(loc(
                    40601,
                    format!("{name} can only be the final stage in the pipeline"),
                ));
            }
            if name == "$geoNear" && i != 0 {
                return Err(loc(
                    40603,
                    "$geoNear was not the first stage in the pipeline.",
                ));
            }
            if c.first && i != 0 {
                return Err(loc(
                    40602,
                    format!("{name} is only valid as the first stage in a pipeline"),
                ));
            }
        }
        let first_change_stream = self.stages.first().and_then(|s| {
            s.as_any()
                .downcast_ref::<super::stages::change_stream::ChangeStream>()
        });
        let splits = self
            .stages
            .iter()
            .filter(|s| s.name() == "$changeStreamSplitLargeEvent")
            .count();
        if splits > 0 && first_change_stream.is_none() {
            return Err(QueryError::Location(
                20,
                "$changeStreamSplitLargeEvent can only be used in a $changeStream pipeline".into(),
            ));
        }
        if splits > 1 {
            return Err(loc(
                7183900,
                "$changeStreamSplitLargeEvent can only be used once in the pipeline",
            ));
        }
        if splits == 1
            && self
                .stages
                .last()
                .is_some_and(|s| s.name() != "$changeStreamSplitLargeEvent")
        {
            return Err(loc(
                7182802,
                "$changeStreamSplitLargeEvent must be the last stage in the pipeline",
            ));
        }
        if splits == 0 && first_change_stream.is_some_and(|c| c.resumes_from_fragment()) {
            return Err(QueryError::Location(
                280,
                "To resume from a split event, the $changeStream pipeline must include a $changeStreamSplitLargeEvent stage".into(),
            ));
        }
        if first_change_stream.is_some() {
            const ALLOWED: &[&str] = &[
                "$addFields",
                "$changeStreamSplitLargeEvent",
                "$match",
                "$project",
                "$redact",
                "$replaceRoot",
                "$replaceWith",
                "$set",
                "$unset",
            ];
            for s in self.stages.iter().skip(1) {
                if !ALLOWED.contains(&s.name()) {
                    return Err(loc(
                        20,
                        format!("{} is not permitted in a $changeStream pipeline", s.name()),
                    ));
                }
            }
        }
        if cx.coll.is_none() && cx.sub == SubContext::Top {
            match self.stages.first() {
                Some(s) if s.constraints().collectionless => {}
                Some(s) => {
                    return Err(QueryError::Location(
                        73,
                        format!(
                            "{{aggregate: 1}} is not valid for '{}'; a collection is required.",
                            s.name()
                        ),
                    ));
                }
                None => {
                    return Err(QueryError::Location(
                        73,
                        "{aggregate: 1} is not valid for an empty pipeline.".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The fields the pipeline reads from its input.
    pub fn deps(&self) -> Deps {
        let mut d = Deps::default();
        for s in &self.stages {
            match s.deps(&mut d) {
                DepsState::SeeNext => {}
                DepsState::Exhaustive => return d,
                DepsState::WholeDocument => {
                    d.whole = true;
                    return d;
                }
            }
        }
        d.whole = true;
        d
    }

    /// The stages as explain shows them.
    pub fn serialize(&self) -> RawArrayBuf {
        let mut a = RawArrayBuf::new();
        for s in &self.stages {
            a.push(super::stage_doc(s.name(), s.serialize()));
        }
        a
    }

    /// Chains the stages over `input`.
    pub fn open(
        &self,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        let mut s = input;
        for st in &self.stages {
            s = Arc::clone(st).open(s, opts)?;
        }
        Ok(s)
    }

    /// A pipeline of these stages.
    pub(crate) fn from_stages(stages: Vec<Arc<dyn Stage>>) -> Pipeline {
        Pipeline { stages }
    }
}

/// What one stage did (explain's `nReturned`, `executionTimeMillisEstimate`).
#[derive(Debug, Default)]
pub struct StageCounter {
    /// Documents returned.
    pub returned: AtomicU64,
    /// Time spent in this stage and the ones before it, in nanoseconds.
    pub nanos: AtomicU64,
}

struct Counted {
    inner: Box<dyn DocStream>,
    counter: Arc<StageCounter>,
}

impl DocStream for Counted {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        let t = Instant::now();
        let r = self.inner.next(cx);
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.counter.nanos.fetch_add(ns, Ordering::Relaxed);
        if let Ok(Some(_)) = &r {
            self.counter.returned.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

/// A prepared aggregation: the optimized pipeline with its `$cursor` source.
#[derive(Debug)]
pub struct Aggregation {
    /// The database.
    pub db: String,
    /// The collection, `None` for `{aggregate: 1}`.
    pub coll: Option<String>,
    /// The `$cursor` source (absent for `{aggregate: 1}` and pipelines starting with a source
    /// stage such as `$collStats`).
    pub cursor: Option<Arc<CursorStage>>,
    /// The stages after the source.
    pub pipeline: Pipeline,
}

impl Aggregation {
    /// Optimizes `pipeline` and moves its leading stages into the `$cursor` source.
    pub fn prepare(pipeline: Pipeline, cx: &ParseCx, hint: Hint) -> Result<Aggregation> {
        let stages = super::optimize::optimize(pipeline.stages, &cx.ext);
        let starts_with_source = stages
            .first()
            .is_some_and(|s| s.constraints().collectionless || s.constraints().first);
        let (cursor, rest) = match &cx.coll {
            Some(coll) if !starts_with_source => {
                let (c, rest) = CursorStage::absorb(&cx.db, coll, stages, hint, &cx.ext)?;
                (Some(Arc::new(c)), rest)
            }
            _ => (None, stages),
        };
        Ok(Aggregation {
            db: cx.db.clone(),
            coll: cx.coll.clone(),
            cursor,
            pipeline: Pipeline::from_stages(rest),
        })
    }

    /// True when every stage went into the `$cursor` source (explain then looks like
    /// `find`'s).
    pub fn fully_pushed_down(&self) -> bool {
        self.cursor.is_some() && self.pipeline.stages.is_empty()
    }

    /// Whether the pipeline is a change stream (starts with `$changeStream`).
    pub fn is_change_stream(&self) -> bool {
        self.pipeline
            .stages
            .first()
            .is_some_and(|s| s.name() == "$changeStream")
    }

    /// Whether the pipeline ends in a stage that writes (`$out`, `$merge`).
    pub fn writes(&self) -> bool {
        self.pipeline
            .stages
            .last()
            .is_some_and(|s| s.constraints().writes)
    }

    /// True when some stage must see all its input before producing output (the results
    /// are then computed on the first batch).
    pub fn stage_names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.cursor.is_some() {
            v.push("$cursor");
        }
        v.extend(self.pipeline.stages.iter().map(|s| s.name()));
        v
    }

    /// Prepares already-parsed stages over `coll` (sub-pipelines). When `coll` is a view in
    /// `catalog`, the stages run over what it reads: its base collection, after the view's
    /// own stages.
    pub(crate) fn from_parsed(
        db: &str,
        coll: Option<&str>,
        mut stages: Vec<Arc<dyn Stage>>,
        ext: &ExprExtensions,
        catalog: &dyn super::context::Catalog,
    ) -> Result<Aggregation> {
        let mut base = coll.map(str::to_string);
        if let Some(c) = coll
            && let Some((b, view_stages)) = catalog.view(db, c)?
        {
            let vcx = ParseCx::new(db, b.as_deref(), ext.clone());
            let mut all = Pipeline::parse(&view_stages, &vcx)?.stages().to_vec();
            all.append(&mut stages);
            stages = all;
            base = b;
        }
        let mut cx = ParseCx::new(db, base.as_deref(), ext.clone());
        cx.sub = SubContext::Lookup;
        Aggregation::prepare(Pipeline::from_stages(stages), &cx, Hint::None)
    }

    /// Runs to the end, collecting the results (at most `max_bytes` of them: 16 MiB for a
    /// `$lookup` result array, the memory limit for a `$facet`). Sub-pipelines keep no
    /// per-stage counters: nothing reads them.
    pub(crate) fn collect(
        &self,
        opts: &Arc<Options>,
        cx: &ExecCx<'_>,
        max_bytes: usize,
        what: &str,
    ) -> Result<Vec<RawDocumentBuf>> {
        let mut running = self.open_with(opts.clone(), false)?;
        let mut out = Vec::new();
        let mut bytes = 0usize;
        while let Some(d) = running.next(cx)? {
            bytes += d.as_bytes().len();
            if bytes > max_bytes {
                return Err(QueryError::Location(
                    4568,
                    format!("Total size of documents in {what} exceeds maximum document size"),
                ));
            }
            out.push(d);
        }
        Ok(out)
    }

    /// Starts running; per-stage counters ([`Running::counters`]) are kept when
    /// [`Options::stage_stats`] asks for them.
    pub fn open(&self, opts: Options) -> Result<Running> {
        let counted = opts.stage_stats;
        self.open_with(Arc::new(opts), counted)
    }

    /// Starts running with shared options (a sub-pipeline: no per-stage counters).
    pub(crate) fn open_shared(&self, opts: Arc<Options>) -> Result<Running> {
        self.open_with(opts, false)
    }

    /// Starts running; with `counted`, every stage is wrapped in a [`Counted`] that counts
    /// its documents and times its calls (two clock reads per call, so only for explain).
    fn open_with(&self, opts: Arc<Options>, counted: bool) -> Result<Running> {
        let mut counters = Vec::new();
        let mut wrap = |inner: Box<dyn DocStream>| -> Box<dyn DocStream> {
            if !counted {
                return inner;
            }
            let counter = Arc::new(StageCounter::default());
            counters.push(counter.clone());
            Box::new(Counted { inner, counter })
        };
        let mut s: Box<dyn DocStream> = match &self.cursor {
            Some(c) => wrap(Arc::clone(c).open(Box::new(Empty), &opts)?),
            None => Box::new(Empty),
        };
        for st in &self.pipeline.stages {
            s = wrap(Arc::clone(st).open(s, &opts)?);
        }
        Ok(Running {
            stream: s,
            counters,
            pending: None,
        })
    }
}

/// The largest result document (MongoDB's `BSONObjMaxInternalSize`, 16 MB + 16 KiB).
pub const MAX_RESULT_BYTES: usize = 16 * 1024 * 1024 + 16 * 1024;

/// BSONObjectTooLarge (10334) for a result over [`MAX_RESULT_BYTES`], worded as MongoDB's.
fn too_large(d: &RawDocument) -> QueryError {
    let n = d.as_bytes().len();
    let first = match d.iter().next() {
        Some(Ok((k, v))) => {
            let v = cairn_storage::display::value(v);
            let short: String = v.chars().take(200).collect();
            format!("{}: {short}", k.as_str())
        }
        _ => "EOO".into(),
    };
    QueryError::Location(
        10334,
        format!(
            "BSONObj size: {n} (0x{n:X}) is invalid. Size must be between 0 and {MAX_RESULT_BYTES}(16MB) First element: {first}"
        ),
    )
}

/// A pipeline being run (kept by a cursor between batches).
pub struct Running {
    stream: Box<dyn DocStream>,
    counters: Vec<Arc<StageCounter>>,
    pending: Option<RawDocumentBuf>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("stages", &self.counters.len())
            .finish()
    }
}

impl Running {
    /// The next result document, `None` at the end.
    pub fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if let Some(d) = self.pending.take() {
            return Ok(Some(d));
        }
        match self.stream.next(cx)? {
            Some(d) if d.as_bytes().len() > MAX_RESULT_BYTES => Err(too_large(&d)),
            other => Ok(other),
        }
    }

    /// Puts a document back (it did not fit the batch); it is returned first next time.
    pub fn push_back(&mut self, d: RawDocumentBuf) {
        self.pending = Some(d);
    }

    /// Per-stage counters, in stage order (`$cursor` first when present); empty unless
    /// [`Options::stage_stats`] asked for them.
    pub fn counters(&self) -> &[Arc<StageCounter>] {
        &self.counters
    }
}
