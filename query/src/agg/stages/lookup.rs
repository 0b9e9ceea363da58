//! `$lookup`: for each input document, an array (`as`) of the documents of another
//! collection (`from`) that match it.
//!
//! - Equality form `{from, localField, foreignField, as}`: the values at `localField`
//!   (through arrays, array elements flattened; none is null) select the foreign documents
//!   whose `foreignField` equals one of them (null matches missing), through the query
//!   planner, so an index on `foreignField` is used. On a collection (not a view) it runs as
//!   a hash join ([`join`]) when the foreign collection fits the stage memory limit and a
//!   table can reproduce the planned query's order: at once when no index could answer the
//!   equality (the alternative is a collection scan per document), and, with one plain
//!   index on `foreignField`, once the input has outgrown the foreign side (a first attempt
//!   once the input documents times [`INDEX_DOCS_PER_INPUT`] reach the collection's
//!   document count, at least 16 of them; then at twice as many input documents each time;
//!   each attempt reading at most [`INDEX_DOCS_PER_INPUT`] foreign documents per input
//!   document so far). Otherwise, and for the values a table cannot
//!   answer, one planned query per document (`plan::choose` with the plan cache, then the
//!   execution), without building a sub-pipeline each time.
//! - Followed by an `$unwind` of the `as` path, the stage absorbs it ([`Lookup::absorbing`],
//!   as MongoDB's optimizer does): one output per match, built from the input document and
//!   the match ([`Unwind::lookup_output`]) without an `as` array, hence without the 16 MiB
//!   limit of one (as in MongoDB); explain shows `unwinding` on the `$lookup`. Without it,
//!   the `as` array is written straight into the output document.
//! - Pipeline form `{from, let, pipeline, as}`: `let` variables are evaluated on the input
//!   document and the sub-pipeline runs over `from` with them (`$$name`), so correlated
//!   sub-pipelines work; without `let` (and without `localField`) the results are computed
//!   once and reused. Both forms combine (`localField`/`foreignField` with `pipeline`: the
//!   equality match runs first). Without `from` the pipeline must start with `$documents`.
//!
//! Errors (FailedToParse 9): not an object, unknown argument, non-string arguments, missing
//! `as`, only one of `localField`/`foreignField`, neither `pipeline` nor both fields; the
//! sub-pipeline may not write (51047); results over 16 MiB are 4568.

use std::any::Any;
use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::match_::Match;
use super::unwind::Unwind;
use crate::agg::doc::{NewValue, key, set_nested, with_top_level};
use crate::agg::{
    Aggregation, Deps, DepsState, DocStream, ExecCx, MAX_DOC_BYTES, Options, ParseCx, Pipeline,
    Stage, SubContext,
};
use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Expression, Variables};
use crate::sort::validate_field_path;

mod join;

use join::{Hits, NotBuilt, Order, Table};

/// Input documents probed one by one before the first attempt at a table when an index on
/// the foreign field answers each of them.
const INDEX_FIRST_TRY: usize = 16;

/// Foreign documents a table attempt may read per input document seen so far, when an index
/// answers each input document (a table read costs a small fraction of an indexed query per
/// document, so it pays once the input outgrows the foreign side by this factor).
const INDEX_DOCS_PER_INPUT: usize = 32;

/// A parsed `$lookup`.
#[derive(Debug, Clone)]
pub struct Lookup {
    db: String,
    from: Option<String>,
    as_path: Vec<String>,
    local: Option<Vec<String>>,
    foreign: Option<String>,
    lets: Vec<(String, Expression)>,
    pipeline_raw: Option<RawArrayBuf>,
    /// The sub-pipeline parsed once (for checks, and reused when uncorrelated).
    pipeline: Option<Pipeline>,
    raw: RawDocumentBuf,
    ext: ExprExtensions,
    /// An `$unwind` of the `as` path that followed, absorbed by the optimizer (see
    /// [`Lookup::absorbing`]).
    unwinding: Option<Arc<Unwind>>,
}

fn failed(msg: impl Into<String>) -> QueryError {
    QueryError::FailedToParse(msg.into())
}

/// Parses `{$lookup: {…}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(failed(format!(
            "the $lookup stage specification must be an object, but found {}",
            cairn_storage::display::type_name(arg)
        )));
    };
    let (mut from, mut as_, mut local, mut foreign) = (None, None, None, None);
    let mut let_doc: Option<&RawDocument> = None;
    let mut pipeline_raw: Option<&bson::RawArray> = None;
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "pipeline" => match v {
                RawBsonRef::Array(a) => pipeline_raw = Some(a),
                other => {
                    return Err(failed(format!(
                        "$lookup argument 'pipeline' must be an array, is type {}",
                        cairn_storage::display::type_name(other)
                    )));
                }
            },
            "let" => match v {
                RawBsonRef::Document(l) => let_doc = Some(l),
                other => {
                    return Err(failed(format!(
                        "$lookup argument 'let' must be an object, is type {}",
                        cairn_storage::display::type_name(other)
                    )));
                }
            },
            "from" => match v {
                RawBsonRef::String(s) => from = Some(s.to_string()),
                RawBsonRef::Document(_) => {
                    return Err(QueryError::NotImplemented(
                        "$lookup 'from' as {db, coll} is not supported by Cairn".into(),
                    ));
                }
                other => {
                    return Err(failed(format!(
                        "$lookup 'from' field must be a string, but found {}",
                        cairn_storage::display::type_name(other)
                    )));
                }
            },
            name @ ("as" | "localField" | "foreignField") => {
                let RawBsonRef::String(s) = v else {
                    return Err(failed(format!(
                        "$lookup argument '{name}: {}' must be a string, found {}: {}",
                        cairn_storage::display::value(v),
                        cairn_storage::display::value(v),
                        cairn_storage::display::type_name(v)
                    )));
                };
                match name {
                    "as" => as_ = Some(s.to_string()),
                    "localField" => local = Some(s.to_string()),
                    _ => foreign = Some(s.to_string()),
                }
            }
            other => return Err(failed(format!("unknown argument to $lookup: {other}"))),
        }
    }
    let Some(as_) = as_ else {
        return Err(failed("must specify 'as' field for a $lookup"));
    };
    let as_path: Vec<String> = validate_field_path(&as_)?
        .into_iter()
        .map(str::to_string)
        .collect();
    match (&local, &foreign, pipeline_raw) {
        (Some(_), None, _) | (None, Some(_), _) => {
            return Err(failed(
                "$lookup requires both or neither of 'localField' and 'foreignField' to be \
                 specified",
            ));
        }
        (None, None, None) => {
            return Err(failed(
                "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to \
                 be specified",
            ));
        }
        _ => {}
    }
    let local = match local {
        Some(l) => Some(
            validate_field_path(&l)?
                .into_iter()
                .map(str::to_string)
                .collect(),
        ),
        None => None,
    };
    if let Some(f) = &foreign {
        validate_field_path(f)?;
    }
    if let Some(f) = &from {
        cairn_storage::namespace::check_collection_name(f).map_err(|_| {
            QueryError::Location(73, format!("Invalid namespace specified '{}.{f}'", cx.db))
        })?;
    }
    let mut lets = Vec::new();
    let mut check_vars: Variables = cx.ext.variables().clone();
    if let Some(l) = let_doc {
        for el in l.iter() {
            let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
            check_vars.set(k.as_str(), RawBson::Null)?;
            lets.push((k.as_str().to_string(), cx.ext.parse_expression(v)?));
        }
    }
    let pipeline = match pipeline_raw {
        Some(p) => {
            let mut sub = cx.sub(SubContext::Lookup, from.as_deref())?;
            sub.ext = ExprExtensions::with_variables(check_vars);
            let parsed = Pipeline::parse(p, &sub)?;
            if from.is_none()
                && !parsed
                    .stages()
                    .first()
                    .is_some_and(|s| s.constraints().collectionless)
            {
                return Err(failed(
                    "$lookup stage without explicit collection must have a pipeline with \
                     $documents as first stage",
                ));
            }
            Some(parsed)
        }
        None => {
            if from.is_none() {
                return Err(failed("must specify 'from' field for a $lookup"));
            }
            None
        }
    };
    Ok(vec![Arc::new(Lookup {
        db: cx.db.clone(),
        from,
        as_path,
        local,
        foreign,
        lets,
        pipeline_raw: pipeline_raw.map(|a| a.to_owned()),
        pipeline,
        raw: d.to_owned(),
        ext: cx.ext.clone(),
        unwinding: None,
    })])
}

/// Every value at `path` in `doc`, entering arrays along the way and flattening a trailing
/// array (MongoDB's `extractAllElementsAlongPath`).
pub(crate) fn values_along(doc: &RawDocument, path: &[String], out: &mut Vec<RawBson>) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(v) = crate::expr::field::field(doc, first) else {
        return;
    };
    values_of(v, rest, out);
}

fn values_of(v: RawBsonRef<'_>, rest: &[String], out: &mut Vec<RawBson>) {
    match v {
        RawBsonRef::Array(a) => {
            for e in a.into_iter().flatten() {
                if rest.is_empty() {
                    out.push(RawBson::from(e));
                } else if let RawBsonRef::Document(d) = e {
                    values_along(d, rest, out);
                }
            }
        }
        RawBsonRef::Document(d) if !rest.is_empty() => values_along(d, rest, out),
        other if rest.is_empty() => out.push(RawBson::from(other)),
        _ => {}
    }
}

/// The equality filter selecting foreign documents for local values.
pub(crate) fn equality_filter(foreign: &str, mut values: Vec<RawBson>) -> Result<RawDocumentBuf> {
    if values.is_empty() {
        values.push(RawBson::Null);
    }
    let k = key(foreign)?;
    let regex = values
        .iter()
        .any(|v| matches!(v, RawBson::RegularExpression(_)));
    let mut d = RawDocumentBuf::new();
    if values.len() == 1 {
        let v = values.pop().unwrap_or(RawBson::Null);
        d.append(k, rawdoc! {"$eq": v});
    } else if !regex {
        let mut arr = RawArrayBuf::new();
        for v in values {
            arr.push(v);
        }
        d.append(k, rawdoc! {"$in": arr});
    } else {
        let mut arr = RawArrayBuf::new();
        for v in values {
            let mut one = RawDocumentBuf::new();
            one.append(k, rawdoc! {"$eq": v});
            arr.push(one);
        }
        d.append(bson::raw::cstr!("$or"), arr);
    }
    Ok(d)
}

impl Lookup {
    fn correlated(&self) -> bool {
        self.local.is_some() || !self.lets.is_empty()
    }

    /// The equality form alone (no `let`, no `pipeline`): it can run as one planned query
    /// per document ([`Lookup::probe`]) instead of a sub-pipeline.
    fn equality_only(&self) -> bool {
        self.pipeline_raw.is_none() && self.lets.is_empty() && self.from.is_some()
    }

    /// The equality form's matches for the values `vals` on the collection `meta`: the filter the
    /// sub-pipeline's `$match` would hold, planned and run directly (the same planner,
    /// plan cache and execution as the `$cursor` stage, without building a pipeline per
    /// document).
    fn probe(
        &self,
        vals: Vec<RawBson>,
        meta: &cairn_storage::catalog::CollectionMeta,
        cx: &ExecCx<'_>,
        max_bytes: usize,
    ) -> Result<Vec<RawDocumentBuf>> {
        let (Some(foreign), Some(from)) = (&self.foreign, &self.from) else {
            return Ok(Vec::new());
        };
        let f = equality_filter(foreign, vals)?;
        let filter = Arc::new(crate::filter::Filter::parse_with(
            &f,
            &super::match_::NoGeoNear(&crate::jsonschema::WithJsonSchema(&self.ext)),
        )?);
        let hint = crate::plan::Hint::None;
        let q = crate::plan::Query::new(&filter, &hint);
        let ns = format!("{}.{from}", self.db);
        let chosen = crate::plan::choose(
            cx.host.plan_cache(),
            &ns,
            meta,
            &q,
            &filter,
            cx.source,
            false,
        )?;
        let mut out = chosen.buffered;
        let mut bytes: usize = out.iter().map(|d| d.as_bytes().len()).sum();
        let mut exec = chosen.exec;
        loop {
            if bytes > max_bytes {
                return Err(QueryError::Location(
                    4568,
                    format!(
                        "Total size of documents in {from} matching pipeline's $lookup stage \
                         exceeds maximum document size"
                    ),
                ));
            }
            if exec.is_exhausted() {
                return Ok(out);
            }
            cx.host.check_interrupt()?;
            let docs = exec.next(cx.source, meta, 256, MAX_DOC_BYTES, 10_000)?;
            bytes = bytes.saturating_add(docs.iter().map(|d| d.as_bytes().len()).sum::<usize>());
            out.extend(docs);
        }
    }

    /// The matching foreign documents for `doc` (4568 past `max_bytes` of them).
    fn matches(
        &self,
        doc: &RawDocument,
        opts: &Arc<Options>,
        cx: &ExecCx<'_>,
        max_bytes: usize,
    ) -> Result<Vec<RawDocumentBuf>> {
        let mut ext = self.ext.clone();
        if !self.lets.is_empty() {
            let mut vars = self.ext.variables().clone();
            for (name, e) in &self.lets {
                let v = e.evaluate(doc, self.ext.variables())?;
                vars.set(name, v.unwrap_or(RawBson::Undefined))?;
            }
            ext = ExprExtensions::with_variables(vars);
        }
        let mut stages: Vec<Arc<dyn Stage>> = match (&self.pipeline_raw, self.lets.is_empty()) {
            (Some(_), true) => self
                .pipeline
                .as_ref()
                .map(|p| p.stages().to_vec())
                .unwrap_or_default(),
            (Some(raw), false) => {
                let cx2 = ParseCx::new(&self.db, self.from.as_deref(), ext.clone());
                let mut sub = cx2.sub(SubContext::Lookup, self.from.as_deref())?;
                sub.ext = ext.clone();
                Pipeline::parse(raw, &sub)?.stages().to_vec()
            }
            (None, _) => Vec::new(),
        };
        if let (Some(local), Some(foreign)) = (&self.local, &self.foreign) {
            let mut vals = Vec::new();
            values_along(doc, local, &mut vals);
            let f = equality_filter(foreign, vals)?;
            let m: Arc<dyn Stage> = Arc::new(Match::from_doc(&f, &ext)?);
            // The equality match runs first, right after a source such as `$documents`.
            let at = usize::from(
                stages
                    .first()
                    .is_some_and(|s| s.constraints().collectionless),
            );
            stages.insert(at, m);
        }
        let agg =
            Aggregation::from_parsed(&self.db, self.from.as_deref(), stages, &ext, cx.catalog)?;
        let what = format!(
            "{} matching pipeline's $lookup stage",
            self.from.as_deref().unwrap_or("")
        );
        agg.collect(opts, cx, max_bytes, &what)
    }

    /// This `$lookup` absorbing `u`, an `$unwind` that follows it, when `u` unwinds the `as`
    /// path (MongoDB's optimizer does the same; explain then shows `unwinding` on the
    /// `$lookup`). The combined stage outputs exactly what the two stages output, one
    /// document per match, without building the `as` array.
    pub(crate) fn absorbing(&self, u: &Unwind) -> Option<Lookup> {
        if self.unwinding.is_some() || u.path != self.as_path {
            return None;
        }
        Some(Lookup {
            unwinding: Some(Arc::new(u.clone())),
            ..self.clone()
        })
    }

    /// The absorbed `$unwind`, if any.
    pub fn unwinding(&self) -> Option<&Unwind> {
        self.unwinding.as_deref()
    }
}

impl Stage for Lookup {
    fn name(&self) -> &'static str {
        "$lookup"
    }

    /// As MongoDB's explain shows it: the equality form as `{from, as, localField,
    /// foreignField}`, other forms as written; an absorbed `$unwind` as `unwinding:
    /// {preserveNullAndEmptyArrays, includeArrayIndex}` (the index only when set).
    fn serialize(&self) -> RawBson {
        let mut d = match (&self.from, &self.local, &self.foreign, &self.pipeline_raw) {
            (Some(from), Some(local), Some(foreign), None) => {
                let mut d = RawDocumentBuf::new();
                d.append(bson::raw::cstr!("from"), from.as_str());
                d.append(bson::raw::cstr!("as"), self.as_path.join("."));
                d.append(bson::raw::cstr!("localField"), local.join("."));
                d.append(bson::raw::cstr!("foreignField"), foreign.as_str());
                d
            }
            _ => self.raw.clone(),
        };
        if let Some(u) = &self.unwinding {
            let mut w = rawdoc! {"preserveNullAndEmptyArrays": u.preserve};
            if let Some(i) = &u.index {
                w.append(bson::raw::cstr!("includeArrayIndex"), i.join("."));
            }
            d.append(bson::raw::cstr!("unwinding"), w);
        }
        RawBson::Document(d)
    }

    fn deps(&self, deps: &mut Deps) -> DepsState {
        if let Some(l) = &self.local {
            deps.add_path(&l.join("."));
        }
        if let Some(u) = &self.unwinding {
            deps.add_path(&u.path.join("."));
        }
        for (_, e) in &self.lets {
            deps.add_expr(e);
        }
        DepsState::SeeNext
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(LookupStream {
            stage: self,
            opts: opts.clone(),
            input,
            cached: None,
            plain: None,
            join: JoinState::Unknown,
            current: None,
            vals: Vec::new(),
            kbuf: Vec::new(),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct LookupStream {
    stage: Arc<Lookup>,
    opts: Arc<Options>,
    input: Box<dyn DocStream>,
    /// Results of an uncorrelated sub-pipeline.
    cached: Option<Vec<RawDocumentBuf>>,
    /// Whether `from` is a plain collection, decided once per run (equality form only).
    plain: Option<bool>,
    /// The equality form's hash join.
    join: JoinState,
    /// With an absorbed `$unwind`: the input document being unwound, its matches and the
    /// position of the next one.
    current: Option<(RawDocumentBuf, Matches, usize)>,
    /// Scratch: the local values of one document, and a key.
    vals: Vec<RawBson>,
    kbuf: Vec<u8>,
}

/// One input document's matches.
enum Matches {
    /// Documents in the hash join's table.
    Table(Hits),
    /// Documents read for it.
    Docs(Vec<RawDocumentBuf>),
    /// The uncorrelated sub-pipeline's results ([`LookupStream::cached`]).
    Cached,
}

impl Matches {
    /// The `i`-th match.
    fn get<'a>(&'a self, i: usize, s: &'a LookupStream) -> Option<&'a RawDocument> {
        match self {
            Matches::Table(h) => match &s.join {
                JoinState::Table(t) => t.doc(h, i).map(|d| &**d),
                _ => None,
            },
            Matches::Docs(d) => d.get(i).map(|d| &**d),
            Matches::Cached => s.cached.as_ref()?.get(i).map(|d| &**d),
        }
    }

    fn is_empty(&self, s: &LookupStream) -> bool {
        self.get(0, s).is_none()
    }
}

/// Where the equality form's hash join stands.
enum JoinState {
    /// No input document has met the collection yet.
    Unknown,
    /// Planned queries per document; a table is tried once `seen` reaches `next_try`.
    Waiting {
        order: Order,
        seen: usize,
        next_try: usize,
    },
    /// The table, read once.
    Table(Table),
    /// Planned queries per document only.
    Off,
}

/// How the equality form reads `from` in this batch.
enum Direct {
    /// A collection: probe it directly.
    Collection(Arc<cairn_storage::catalog::CollectionMeta>),
    /// No such collection (and no view): no matches.
    Missing,
    /// A view, or not the equality form: run the sub-pipeline.
    No,
}

impl LookupStream {
    fn direct(&mut self, cx: &ExecCx<'_>) -> Result<Direct> {
        let st = &self.stage;
        let Some(from) = st.from.as_deref().filter(|_| st.equality_only()) else {
            return Ok(Direct::No);
        };
        if self.plain.is_none() {
            self.plain = Some(cx.catalog.view(&st.db, from)?.is_none());
        }
        if self.plain != Some(true) {
            return Ok(Direct::No);
        }
        Ok(match cx.catalog.collection(&st.db, from)? {
            Some(meta) => Direct::Collection(meta),
            None => Direct::Missing,
        })
    }
}

impl LookupStream {
    /// Moves the hash join along for one more input document on the collection `meta`:
    /// decides whether it applies, and builds the table when it is time.
    fn advance_join(
        &mut self,
        meta: &cairn_storage::catalog::CollectionMeta,
        cx: &ExecCx<'_>,
    ) -> Result<()> {
        let Some(foreign) = self.stage.foreign.as_deref() else {
            self.join = JoinState::Off;
            return Ok(());
        };
        if let JoinState::Unknown = self.join {
            let order = join::order_of(meta, foreign);
            self.join = match order {
                Order::Planned => JoinState::Off,
                Order::Natural => JoinState::Waiting {
                    order,
                    seen: 0,
                    next_try: 0,
                },
                Order::Index(_) => JoinState::Waiting {
                    order,
                    seen: 0,
                    next_try: self.first_try(meta, cx),
                },
            };
        }
        let JoinState::Waiting {
            order,
            seen,
            next_try,
        } = &mut self.join
        else {
            return Ok(());
        };
        if *seen < *next_try {
            *seen += 1;
            return Ok(());
        }
        let max_docs = match order {
            Order::Natural => usize::MAX,
            _ => seen.saturating_mul(INDEX_DOCS_PER_INPUT),
        };
        let path = crate::path::FieldPath::new(foreign);
        match Table::build(meta, &path, *order, max_docs, self.opts.memory_limit, cx)? {
            Ok(t) => self.join = JoinState::Table(t),
            Err(NotBuilt::TooMany) => {
                *seen += 1;
                *next_try = seen.saturating_mul(2);
            }
            Err(NotBuilt::Never) => self.join = JoinState::Off,
        }
        Ok(())
    }

    /// The input documents to probe one by one before the first attempt at a table behind an
    /// index: enough for the collection's document count (as the server counts it now; a
    /// later attempt is still bounded by the documents seen) to fit [`INDEX_DOCS_PER_INPUT`]
    /// per input document, and at least [`INDEX_FIRST_TRY`]; [`INDEX_FIRST_TRY`] when the
    /// host does not count.
    fn first_try(&self, meta: &cairn_storage::catalog::CollectionMeta, cx: &ExecCx<'_>) -> usize {
        let spec = crate::agg::CollStatsSpec {
            count: true,
            ..Default::default()
        };
        let from = self.stage.from.as_deref().unwrap_or("");
        let count = cx
            .host
            .coll_stats(&self.stage.db, from, Some(meta), &spec)
            .ok()
            .and_then(|d| match d.get("count").ok().flatten() {
                Some(RawBsonRef::Int32(n)) => usize::try_from(n).ok(),
                Some(RawBsonRef::Int64(n)) => usize::try_from(n).ok(),
                _ => None,
            });
        match count {
            Some(n) => n.div_ceil(INDEX_DOCS_PER_INPUT).max(INDEX_FIRST_TRY),
            None => INDEX_FIRST_TRY,
        }
    }

    /// The equality form's matches for `doc`, read from the collection directly (4568 past
    /// `max_bytes` of them).
    fn equality(
        &mut self,
        doc: &RawDocument,
        cx: &ExecCx<'_>,
        max_bytes: usize,
    ) -> Result<Matches> {
        let st = self.stage.clone();
        let mut vals = std::mem::take(&mut self.vals);
        vals.clear();
        if let Some(local) = &st.local {
            values_along(doc, local, &mut vals);
        }
        if let JoinState::Table(t) = &self.join
            && let Some(p) = t.positions(&vals, &mut self.kbuf)
        {
            self.vals = vals;
            return Ok(Matches::Table(p));
        }
        let meta = match self.direct(cx)? {
            Direct::Collection(meta) => meta,
            Direct::Missing => return Ok(Matches::Docs(Vec::new())),
            Direct::No => return Ok(Matches::Docs(st.matches(doc, &self.opts, cx, max_bytes)?)),
        };
        if !matches!(self.join, JoinState::Table(_) | JoinState::Off) {
            self.advance_join(&meta, cx)?;
            if let JoinState::Table(t) = &self.join
                && let Some(p) = t.positions(&vals, &mut self.kbuf)
            {
                return Ok(Matches::Table(p));
            }
        }
        Ok(Matches::Docs(st.probe(vals, &meta, cx, max_bytes)?))
    }

    /// `doc`'s matches (4568 past `max_bytes` of them).
    fn matches(&mut self, doc: &RawDocument, cx: &ExecCx<'_>, max_bytes: usize) -> Result<Matches> {
        if self.stage.correlated() {
            if self.stage.equality_only() {
                return self.equality(doc, cx, max_bytes);
            }
            return Ok(Matches::Docs(
                self.stage.matches(doc, &self.opts, cx, max_bytes)?,
            ));
        }
        if self.cached.is_none() {
            self.cached = Some(self.stage.matches(doc, &self.opts, cx, max_bytes)?);
        }
        Ok(Matches::Cached)
    }

    /// The next output of a `$lookup` that absorbed the `$unwind` `u`: one document per
    /// match, built from the input document and the match (no `as` array); matches are read
    /// per input document without the 16 MiB limit of an array, as MongoDB does.
    fn next_unwound(&mut self, u: &Unwind, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        loop {
            if let Some((doc, matches, i)) = &self.current {
                if let Some(m) = matches.get(*i, self) {
                    let out = u.lookup_output(doc, m, *i)?;
                    if let Some((_, _, i)) = &mut self.current {
                        *i += 1;
                    }
                    return Ok(Some(out));
                }
                self.current = None;
            }
            let Some(doc) = self.input.next(cx)? else {
                return Ok(None);
            };
            let matches = self.matches(&doc, cx, usize::MAX)?;
            if matches.is_empty(self) {
                if let Some(out) = u.lookup_no_match(&doc)? {
                    return Ok(Some(out));
                }
                continue;
            }
            self.current = Some((doc, matches, 0));
        }
    }
}

/// 4568 when `docs` exceed the largest document, as the planned query reports (`from`
/// named; empty when that check was already made).
fn check_size<'a>(docs: impl Iterator<Item = &'a RawDocument>, from: &str) -> Result<()> {
    let bytes: usize = docs.map(|d| d.as_bytes().len()).sum();
    if bytes > MAX_DOC_BYTES {
        return Err(QueryError::Location(
            4568,
            format!(
                "Total size of documents in {from} matching pipeline's $lookup stage exceeds \
                 maximum document size"
            ),
        ));
    }
    Ok(())
}

impl DocStream for LookupStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if let Some(u) = self.stage.unwinding.clone() {
            return self.next_unwound(&u, cx);
        }
        let Some(doc) = self.input.next(cx)? else {
            return Ok(None);
        };
        let matches = self.matches(&doc, cx, MAX_DOC_BYTES)?;
        let from = self.stage.from.as_deref().unwrap_or("");
        let docs = (0..).map_while(|i| matches.get(i, self));
        if let Matches::Table(_) = matches {
            // The planned query and the sub-pipeline check their sizes as they read.
            check_size(docs.clone(), from)?;
        }
        match self.stage.as_path.as_slice() {
            [name] => Ok(Some(with_top_level(
                &doc,
                name,
                NewValue::Docs(docs),
                |_| true,
            )?)),
            path => {
                let mut arr = RawArrayBuf::new();
                for d in docs {
                    arr.push(d);
                }
                let v = RawBson::Array(arr);
                Ok(Some(set_nested(&doc, path, Some(v.as_raw_bson_ref()))?))
            }
        }
    }
}
