//! `$graphLookup`: a breadth-first search over another collection. Starting from the values
//! of `startWith`, each round finds the documents of `from` whose `connectToField` equals a
//! value of the frontier (and match `restrictSearchWithMatch`), adds the ones not seen yet
//! (by `_id`) to the result with their depth (`depthField`, a long) and takes their
//! `connectFromField` values as the next frontier, up to `maxDepth` rounds. The result array
//! goes to `as`. Each round is one query through the planner, so an index on
//! `connectToField` is used.
//!
//! Errors: 40103 non-string arguments, 40104 unknown argument, 40105 missing required ones,
//! 40100/40101 bad `maxDepth`, 40185 `restrictSearchWithMatch` not an object; results beyond
//! the memory limit are 40099.

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf, rawdoc};

use super::lookup::{equality_filter, values_along};
use super::match_::Match;
use crate::agg::accumulators::value_key;
use crate::agg::doc::set_nested;
use crate::agg::{Aggregation, Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Expression};
use crate::sort::validate_field_path;

/// A parsed `$graphLookup`.
#[derive(Debug)]
pub struct GraphLookup {
    db: String,
    from: String,
    start: Expression,
    connect_from: Vec<String>,
    connect_to: String,
    as_path: Vec<String>,
    max_depth: Option<u64>,
    depth_field: Option<Vec<String>>,
    restrict: Option<RawDocumentBuf>,
    raw: RawDocumentBuf,
    ext: ExprExtensions,
}

fn path(s: &str) -> Result<Vec<String>> {
    Ok(validate_field_path(s)?
        .into_iter()
        .map(str::to_string)
        .collect())
}

/// Parses `{$graphLookup: {…}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(QueryError::FailedToParse(
            "the $graphLookup stage specification must be an object".into(),
        ));
    };
    let (mut from, mut start, mut cf, mut ct, mut as_) = (None, None, None, None, None);
    let (mut max_depth, mut depth_field, mut restrict) = (None, None, None);
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        let name = k.as_str();
        match name {
            "startWith" => start = Some(cx.ext.parse_expression(v)?),
            "maxDepth" => {
                let n = match v {
                    RawBsonRef::Int32(i) => f64::from(i),
                    RawBsonRef::Int64(i) => i as f64,
                    RawBsonRef::Double(f) => f,
                    _ => {
                        return Err(loc(
                            40100,
                            format!(
                                "maxDepth requires a numeric argument, found: {}",
                                cairn_storage::display::type_name(v)
                            ),
                        ));
                    }
                };
                if n < 0.0 || n.fract() != 0.0 {
                    return Err(loc(
                        40101,
                        format!(
                            "maxDepth requires a nonnegative argument, found: {}",
                            cairn_storage::display::value(v)
                        ),
                    ));
                }
                max_depth = Some(n as u64);
            }
            "restrictSearchWithMatch" => {
                let RawBsonRef::Document(r) = v else {
                    return Err(loc(
                        40185,
                        format!(
                            "restrictSearchWithMatch must be an object, found {}",
                            cairn_storage::display::type_name(v)
                        ),
                    ));
                };
                Match::from_doc(r, &cx.ext)?;
                restrict = Some(r.to_owned());
            }
            "from" | "connectFromField" | "connectToField" | "as" | "depthField" => {
                let RawBsonRef::String(s) = v else {
                    return Err(loc(
                        40103,
                        format!(
                            "expected string as argument for {name}, found: {}",
                            cairn_storage::display::value(v)
                        ),
                    ));
                };
                let s = s.to_string();
                match name {
                    "from" => from = Some(s),
                    "connectFromField" => cf = Some(path(&s)?),
                    "connectToField" => {
                        validate_field_path(&s)?;
                        ct = Some(s)
                    }
                    "as" => as_ = Some(path(&s)?),
                    _ => depth_field = Some(path(&s)?),
                }
            }
            other => {
                return Err(loc(
                    40104,
                    format!("Unknown argument to $graphLookup: {other}"),
                ));
            }
        }
    }
    let (Some(from), Some(start), Some(cf), Some(ct), Some(as_path)) = (from, start, cf, ct, as_)
    else {
        return Err(loc(
            40105,
            "$graphLookup requires 'from', 'startWith', 'connectFromField', 'connectToField' and \
             'as' to be specified",
        ));
    };
    cairn_storage::namespace::check_collection_name(&from).map_err(|_| {
        QueryError::Location(
            73,
            format!("Invalid namespace specified '{}.{from}'", cx.db),
        )
    })?;
    Ok(vec![Arc::new(GraphLookup {
        db: cx.db.clone(),
        from,
        start,
        connect_from: cf,
        connect_to: ct,
        as_path,
        max_depth,
        depth_field,
        restrict,
        raw: d.to_owned(),
        ext: cx.ext.clone(),
    })])
}

impl GraphLookup {
    fn search(
        &self,
        doc: &RawDocumentBuf,
        opts: &Arc<Options>,
        cx: &ExecCx<'_>,
    ) -> Result<RawArrayBuf> {
        let start = self.start.evaluate(doc, self.ext.variables())?;
        let mut frontier: Vec<RawBson> = match start {
            Some(RawBson::Array(a)) => a.into_iter().flatten().map(RawBson::from).collect(),
            Some(v) => vec![v],
            None => vec![RawBson::Null],
        };
        let mut queried: HashSet<Vec<u8>> = HashSet::new();
        frontier.retain(|v| queried.insert(value_key(v.as_raw_bson_ref())));
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        let mut out = RawArrayBuf::new();
        let mut bytes = 0usize;
        let mut depth = 0u64;
        while !frontier.is_empty() && self.max_depth.is_none_or(|m| depth <= m) {
            cx.host.check_interrupt()?;
            let eq = equality_filter(&self.connect_to, std::mem::take(&mut frontier))?;
            let filter = match &self.restrict {
                Some(r) => rawdoc! {"$and": [eq, r.clone()]},
                None => eq,
            };
            let stage: Arc<dyn Stage> = Arc::new(Match::from_doc(&filter, &self.ext)?);
            let agg = Aggregation::from_parsed(&self.db, Some(&self.from), vec![stage], &self.ext)?;
            let found = agg.collect(opts, cx, usize::MAX, "$graphLookup")?;
            for f in found {
                let id = f
                    .get("_id")
                    .ok()
                    .flatten()
                    .map(value_key)
                    .unwrap_or_default();
                if !seen.insert(id) {
                    continue;
                }
                let mut next = Vec::new();
                values_along(&f, &self.connect_from, &mut next);
                for v in next {
                    if queried.insert(value_key(v.as_raw_bson_ref())) {
                        frontier.push(v);
                    }
                }
                let f = match &self.depth_field {
                    Some(p) => set_nested(&f, p, Some(RawBsonRef::Int64(depth as i64)))?,
                    None => f,
                };
                bytes += f.as_bytes().len();
                if bytes > opts.memory_limit {
                    return Err(loc(
                        40099,
                        format!(
                            "$graphLookup reached maximum memory consumption of {} bytes",
                            opts.memory_limit
                        ),
                    ));
                }
                out.push(f);
            }
            depth += 1;
        }
        Ok(out)
    }
}

impl Stage for GraphLookup {
    fn name(&self) -> &'static str {
        "$graphLookup"
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(self.raw.clone())
    }

    fn deps(&self, deps: &mut Deps) -> DepsState {
        deps.add_expr(&self.start);
        DepsState::SeeNext
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(GraphStream {
            stage: self,
            opts: opts.clone(),
            input,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct GraphStream {
    stage: Arc<GraphLookup>,
    opts: Arc<Options>,
    input: Box<dyn DocStream>,
}

impl DocStream for GraphStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        let Some(doc) = self.input.next(cx)? else {
            return Ok(None);
        };
        let arr = RawBson::Array(self.stage.search(&doc, &self.opts, cx)?);
        Ok(Some(set_nested(
            &doc,
            &self.stage.as_path,
            Some(arr.as_raw_bson_ref()),
        )?))
    }
}
