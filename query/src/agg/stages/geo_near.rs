//! `$geoNear`: the input documents (the collection; first stage only, 40603) that match
//! `query`, nearest first, each with its distance in `distanceField` and, with `includeLocs`,
//! the location that distance was measured to.
//!
//! The geo field comes from the collection's geo indexes (MongoDB's rules; a missing collection
//! is NamespaceNotFound, 26): `key` names it
//! (an index must cover it), otherwise the one `2d` index, otherwise the one `2dsphere` index;
//! none is IndexNotFound (27) "$geoNear requires a 2d or 2dsphere index, but none were found",
//! several of a kind is 27 too. A GeoJSON `near` needs a `2dsphere` index, a legacy `near`
//! without `spherical` a `2d` one (otherwise 291 "unable to find index for $geoNear query").
//!
//! The stage is MongoDB's near query on that field: `query` plus `{<field>: {$near |
//! $nearSphere (with spherical): <near as given>, $minDistance, $maxDistance}}`
//! ([`GeoNear::index_query`], parsed once into a [`NearQuery`]), so distances, units and
//! ranges are exactly `find`'s: meters for a GeoJSON `near`; radians for a legacy `near` with
//! `spherical` (over a `2dsphere` or a `2d` index); planar units for a legacy `near` over a
//! `2d` index. A document's distance is its nearest location's (0 inside a polygon);
//! `minDistance`/`maxDistance` bound it (inclusive, before `distanceMultiplier`).
//!
//! Execution: with a `query` of plain field conditions the planner runs that near query as
//! its nearest-first ring search over the index, streamed: a later `$limit` stops the search
//! early, and `explain` shows it as MongoDB's `$geoNearCursor` stage with the
//! `GEO_NEAR_2D`/`GEO_NEAR_2DSPHERE` plan. A `query` with top-level operators (`$and`, `$or`,
//! `$expr`, …) or a condition on the geo field itself reads every input document (the
//! collection scan the `$cursor` stage gives a first stage) and sorts by distance within the
//! memory limit (292 beyond it). Ties come in `_id` order on the index path and in input order
//! otherwise.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;

use bson::raw::{CStr, cstr};
use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::catalog::CollectionMeta;

use crate::agg::cursor::report_work;
use crate::agg::doc::set_nested;
use crate::agg::{DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};
use crate::expr::ExprExtensions;
use crate::filter::Filter;
use crate::geo::near::NearQuery;
use crate::geo::{self, Shape};
use crate::index::geo_keys::geo_plugin;
use crate::jsonschema::WithJsonSchema;
use crate::path::FieldPath;

/// A parsed `$geoNear`.
#[derive(Debug)]
pub struct GeoNear {
    spec: RawDocumentBuf,
    /// The near condition of the index query, without the field: `{$near | $nearSphere:
    /// <near>, $minDistance, $maxDistance}`.
    near_cond: RawDocumentBuf,
    /// `near_cond` parsed: what measures and bounds distances.
    near: Arc<NearQuery>,
    /// `near` is a GeoJSON point.
    geojson: bool,
    distance_field: Vec<String>,
    include_locs: Option<Vec<String>>,
    spherical: bool,
    multiplier: f64,
    key: Option<String>,
    query: Arc<Filter>,
    /// `query` as given (empty when absent), for the index path.
    query_doc: RawDocumentBuf,
    db: String,
    coll: Option<String>,
}

/// `BSONElement::trueValue`.
fn true_value(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Boolean(b) => b,
        RawBsonRef::Null | RawBsonRef::Undefined => false,
        v => number(v).is_none_or(|n| n != 0.0),
    }
}

fn number(v: RawBsonRef<'_>) -> Option<f64> {
    crate::geo::number(v)
}

/// Parses `{$geoNear: {…}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            10065,
            "invalid parameter: expected an object ($geoNear)",
        ));
    };
    Ok(vec![Arc::new(GeoNear::from_doc(d, cx, &cx.ext)?)])
}

impl GeoNear {
    fn from_doc(d: &RawDocument, cx: &ParseCx, ext: &ExprExtensions) -> Result<GeoNear> {
        let mut near = None;
        let mut distance_field = None;
        let mut include_locs = None;
        let mut spherical = false;
        let (mut min_distance, mut max_distance) = (None, None);
        let mut multiplier = 1.0;
        let mut key = None;
        let mut query = Filter::parse(&RawDocumentBuf::new())?;
        let mut query_doc = RawDocumentBuf::new();
        for el in d.iter() {
            let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
            match k.as_str() {
                "near" => near = Some(parse_near(v)?),
                "distanceField" => {
                    let RawBsonRef::String(s) = v else {
                        return Err(loc(
                            16606,
                            "$geoNear requires a 'distanceField' option as a String",
                        ));
                    };
                    distance_field = Some(s.split('.').map(str::to_string).collect());
                }
                "includeLocs" => {
                    let RawBsonRef::String(s) = v else {
                        return Err(loc(
                            16607,
                            "$geoNear requires that 'includeLocs' option is a String",
                        ));
                    };
                    include_locs = Some(s.split('.').map(str::to_string).collect());
                }
                "spherical" => spherical = true_value(v),
                "maxDistance" | "minDistance" => {
                    let Some(n) = number(v) else {
                        return Err(QueryError::TypeMismatch(format!(
                            "{} must be a number",
                            k.as_str()
                        )));
                    };
                    if n.is_nan() || n < 0.0 {
                        return Err(QueryError::BadValue(format!(
                            "{} must be nonnegative",
                            k.as_str()
                        )));
                    }
                    if k.as_str() == "maxDistance" {
                        max_distance = Some(n);
                    } else {
                        min_distance = Some(n);
                    }
                }
                "distanceMultiplier" => {
                    let Some(n) = number(v) else {
                        return Err(QueryError::TypeMismatch(
                            "distanceMultiplier must be a number".into(),
                        ));
                    };
                    if n.is_nan() || n < 0.0 {
                        return Err(QueryError::BadValue(
                            "distanceMultiplier must be nonnegative".into(),
                        ));
                    }
                    multiplier = n;
                }
                "query" => {
                    let RawBsonRef::Document(q) = v else {
                        return Err(QueryError::TypeMismatch("query must be an object".into()));
                    };
                    query = Filter::parse_with(q, &super::match_::NoGeoNear(&WithJsonSchema(ext)))?;
                    query_doc = q.to_owned();
                }
                "key" => {
                    let RawBsonRef::String(s) = v else {
                        return Err(loc(
                            51080,
                            format!(
                                "$geoNear parameter 'key' must be of type string but found type: {}",
                                crate::index::spec::type_name(v)
                            ),
                        ));
                    };
                    if s.is_empty() {
                        return Err(loc(
                            51081,
                            "$geoNear parameter 'key' cannot be the empty string",
                        ));
                    }
                    key = Some(s.to_string());
                }
                "collation" => {
                    return Err(loc(
                        40227,
                        "$geoNear does not accept the 'collation' parameter. Instead, specify a \
                         collation for the entire aggregation command.",
                    ));
                }
                "uniqueDocs" => {}
                other => {
                    return Err(QueryError::FailedToParse(format!(
                        "Unknown argument to $geoNear: {other}"
                    )));
                }
            }
        }
        let Some((near_value, geojson)) = near else {
            return Err(loc(5860400, "$geoNear requires a 'near' argument"));
        };
        let Some(distance_field) = distance_field else {
            return Err(loc(
                16606,
                "$geoNear requires a 'distanceField' option as a String",
            ));
        };
        // MongoDB's `asNearQuery`: the operator by `spherical`, the point as given.
        let mut near_cond = RawDocumentBuf::new();
        let op = if spherical {
            cstr!("$nearSphere")
        } else {
            cstr!("$near")
        };
        near_cond.append(op, near_value);
        if let Some(m) = min_distance {
            near_cond.append(cstr!("$minDistance"), m);
        }
        if let Some(m) = max_distance {
            near_cond.append(cstr!("$maxDistance"), m);
        }
        let near = NearQuery::parse(&near_cond).map_err(|(code, m)| match code {
            2 => QueryError::BadValue(m),
            code => QueryError::Location(code, m),
        })?;
        Ok(GeoNear {
            spec: d.to_owned(),
            near_cond,
            near: Arc::new(near),
            geojson,
            distance_field,
            include_locs,
            spherical,
            multiplier,
            key,
            query: Arc::new(query),
            query_doc,
            db: cx.db.clone(),
            coll: cx.coll.clone(),
        })
    }
}

/// Checks `near` (a legacy pair or a GeoJSON point); returns it as given and whether it is
/// GeoJSON.
fn parse_near(v: RawBsonRef<'_>) -> Result<(RawBson, bool)> {
    let bad = |m: String| QueryError::BadValue(m);
    match v {
        RawBsonRef::Array(_) => {
            geo::parse_flat_point(v, false).map_err(bad)?;
            Ok((v.into(), false))
        }
        RawBsonRef::Document(d) => {
            let first_is_number = d
                .iter()
                .next()
                .and_then(|e| e.ok())
                .is_some_and(|(_, v)| number(v).is_some());
            if first_is_number {
                geo::parse_flat_point(v, false).map_err(bad)?;
                return Ok((v.into(), false));
            }
            match geo::parse_geojson(d).map_err(bad)? {
                Shape::Point { .. } => Ok((v.into(), true)),
                _ => Err(bad(format!(
                    "$geoNear requires a GeoJSON point or a legacy point, given {}",
                    cairn_storage::display::document(d)
                ))),
            }
        }
        _ => Err(loc(
            5860401,
            "$geoNear requires near argument to be a GeoJSON object or a legacy point(array)",
        )),
    }
}

impl Stage for GeoNear {
    fn name(&self) -> &'static str {
        "$geoNear"
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(self.spec.clone())
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(GeoNearStream {
            stage: self,
            input,
            limit: opts.memory_limit,
            out: None,
            near: None,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl GeoNear {
    /// The nearest of `d`'s locations at `path` within `minDistance`/`maxDistance`, with its
    /// distance; `None` when there is none.
    fn nearest<'d>(&self, path: &FieldPath, d: &'d RawDocument) -> Option<(f64, RawBsonRef<'d>)> {
        self.near
            .nearest(d, path)
            .filter(|&(dist, _)| self.near.in_range(dist))
    }

    /// `d` with `distanceField` (and `includeLocs`) set.
    fn annotated(&self, d: &RawDocument, dist: f64, at: RawBsonRef<'_>) -> Result<RawDocumentBuf> {
        let value = RawBson::Double(dist * self.multiplier);
        let mut doc = set_nested(d, &self.distance_field, Some(value.as_raw_bson_ref()))?;
        if let Some(p) = &self.include_locs {
            doc = set_nested(&doc, p, Some(at))?;
        }
        Ok(doc)
    }

    /// [`GeoNear::annotated`] for the nearest location, or `None` when there is none.
    fn annotate(&self, path: &FieldPath, d: &RawDocument) -> Result<Option<RawDocumentBuf>> {
        self.nearest(path, d)
            .map(|(dist, at)| self.annotated(d, dist, at))
            .transpose()
    }

    /// The geo field and index kind over `meta` (see the module documentation).
    fn field(&self, meta: &CollectionMeta) -> Result<(String, Kind)> {
        let ns = format!("{}.{}", self.db, self.coll.as_deref().unwrap_or_default());
        let mut two_d = Vec::new();
        let mut spheres = Vec::new();
        for idx in meta.secondary_indexes() {
            let Some(p) = idx.key_pattern() else { continue };
            let Some(plugin) = geo_plugin(p) else {
                continue;
            };
            for (k, v) in p.iter().flatten() {
                match (plugin, v) {
                    ("2d", RawBsonRef::String("2d")) => two_d.push(k.as_str().to_string()),
                    ("2dsphere", RawBsonRef::String("2dsphere")) => {
                        spheres.push(k.as_str().to_string());
                    }
                    _ => {}
                }
            }
        }
        let (field, kind) = if let Some(key) = &self.key {
            if two_d.contains(key) {
                (key.clone(), Kind::TwoD)
            } else if spheres.contains(key) {
                (key.clone(), Kind::Sphere)
            } else {
                return Err(QueryError::BadValue(format!(
                    "$geoNear requires a 2d or 2dsphere index on field '{key}', but none were found"
                )));
            }
        } else if two_d.len() > 1 {
            return Err(not_found(format!(
                "There is more than one 2d index on {ns}; unsure which to use for $geoNear"
            )));
        } else if let Some(f) = two_d.first() {
            (f.clone(), Kind::TwoD)
        } else if spheres.is_empty() {
            return Err(not_found(
                "$geoNear requires a 2d or 2dsphere index, but none were found",
            ));
        } else if spheres.len() > 1 {
            return Err(not_found(format!(
                "There is more than one 2dsphere index on {ns}; unsure which to use for $geoNear"
            )));
        } else {
            (spheres[0].clone(), Kind::Sphere)
        };
        // A GeoJSON point needs the sphere; a flat legacy point needs a 2d index.
        let usable = match kind {
            Kind::Sphere => self.geojson || self.spherical,
            Kind::TwoD => !self.geojson,
        };
        if !usable {
            return Err(QueryError::Location(
                291,
                "error processing query: planner returned error :: caused by :: unable to find \
                 index for $geoNear query"
                    .into(),
            ));
        }
        Ok((field, kind))
    }

    /// MongoDB's near query for the stage over `field` (`query`'s conditions, then the near
    /// condition on the field), when the planner's ring search can answer it: `None` when
    /// `query` has top-level operators or a condition on the field itself.
    fn near_query(&self, field: &str) -> Option<RawDocumentBuf> {
        let mut filter = RawDocumentBuf::new();
        for el in self.query_doc.iter() {
            let (k, v) = el.ok()?;
            if k.as_str().starts_with('$') || k.as_str() == field {
                return None;
            }
            filter.append(k, v);
        }
        filter.append(<&CStr>::try_from(field).ok()?, self.near_cond.clone());
        Some(filter)
    }

    /// The query the planner answers this stage with over `meta` (MongoDB's `$geoNearCursor`
    /// query), `None` when the stage reads and sorts instead (see the module documentation).
    /// Errors: no usable geo index (27, 291), as running the stage gives.
    pub fn index_query(&self, meta: &CollectionMeta) -> Result<Option<RawDocumentBuf>> {
        let (field, _) = self.field(meta)?;
        Ok(self.near_query(&field))
    }
}

/// Which index kind answers, and over which field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    TwoD,
    Sphere,
}

struct GeoNearStream {
    stage: Arc<GeoNear>,
    input: Box<dyn DocStream>,
    limit: usize,
    /// Documents ready to return; `None` until the first `next`.
    out: Option<VecDeque<RawDocumentBuf>>,
    /// The index path, while it has more to produce.
    near: Option<NearScan>,
}

/// The index path: the planner's nearest-first search, and what annotating its documents
/// needs.
struct NearScan {
    meta: Arc<CollectionMeta>,
    exec: crate::plan::Execution,
    path: FieldPath,
    /// The work last reported to the host.
    seen: (u64, u64),
    /// Documents to ask the search for next: doubling from 1 up to [`NEAR_BATCH`], so a
    /// `$limit` after the stage stops the search about where it needs to.
    want: usize,
}

/// The most documents one call asks the ring search for.
const NEAR_BATCH: usize = 128;

fn not_found(msg: impl Into<String>) -> QueryError {
    QueryError::Location(27, msg.into())
}

impl GeoNearStream {
    /// The collection's metadata, `None` without a collection.
    fn meta(&self, cx: &ExecCx<'_>) -> Result<Option<Arc<CollectionMeta>>> {
        match &self.stage.coll {
            Some(coll) => cx.catalog.collection(&self.stage.db, coll),
            None => Ok(None),
        }
    }

    /// Starts the index path; `None` when it does not apply. Returns the planner's first
    /// documents, annotated.
    fn start_near(
        &mut self,
        cx: &ExecCx<'_>,
        meta: Arc<CollectionMeta>,
        field: &str,
    ) -> Result<Option<VecDeque<RawDocumentBuf>>> {
        let Some(filter_doc) = self.stage.near_query(field) else {
            return Ok(None);
        };
        let filter = Arc::new(Filter::parse(&filter_doc)?);
        let hint = crate::plan::Hint::None;
        let q = crate::plan::Query::new(&filter, &hint);
        let ns = format!("{}.{}", self.stage.db, meta.name);
        let chosen = crate::plan::choose(
            cx.host.plan_cache(),
            &ns,
            &meta,
            &q,
            &filter,
            cx.source,
            false,
        )?;
        let path = FieldPath::new(field);
        let mut out = VecDeque::new();
        for d in chosen.buffered {
            if let Some(d) = self.stage.annotate(&path, &d)? {
                out.push_back(d);
            }
        }
        let mut seen = (0, 0);
        report_work(cx, &chosen.exec, &mut seen);
        self.near = Some(NearScan {
            meta,
            exec: chosen.exec,
            path,
            seen,
            want: 1,
        });
        Ok(Some(out))
    }

    /// Reads every input document and sorts by distance (the path without the index).
    fn run(&mut self, cx: &ExecCx<'_>, field: &str) -> Result<VecDeque<RawDocumentBuf>> {
        let path = FieldPath::new(field);
        let mut hits: Vec<(f64, usize, RawDocumentBuf, RawBson)> = Vec::new();
        let mut bytes = 0usize;
        let mut n = 0usize;
        while let Some(d) = self.input.next(cx)? {
            n += 1;
            if n.is_multiple_of(1024) {
                cx.host.check_interrupt()?;
            }
            if !self.stage.query.try_matches(&d)? {
                continue;
            }
            let Some((dist, at)) = self.stage.nearest(&path, &d) else {
                continue;
            };
            let at = RawBson::from(at);
            bytes += d.as_bytes().len();
            if bytes > self.limit {
                return Err(QueryError::Location(
                    292,
                    "$geoNear exceeded its memory limit".into(),
                ));
            }
            hits.push((dist, n, d, at));
        }
        hits.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut out = VecDeque::with_capacity(hits.len());
        for (dist, _, d, at) in hits {
            out.push_back(self.stage.annotated(&d, dist, at.as_raw_bson_ref())?);
        }
        Ok(out)
    }
}

impl DocStream for GeoNearStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if self.out.is_none() {
            let out = match self.meta(cx)? {
                None => {
                    return Err(QueryError::Location(
                        26,
                        format!(
                            "$geoNear requires a geo index to run, but {}.{} does not exist",
                            self.stage.db,
                            self.stage.coll.as_deref().unwrap_or_default()
                        ),
                    ));
                }
                Some(meta) => {
                    let (field, _) = self.stage.field(&meta)?;
                    match self.start_near(cx, meta, &field)? {
                        Some(first) => first,
                        None => self.run(cx, &field)?,
                    }
                }
            };
            self.out = Some(out);
        }
        loop {
            if let Some(d) = self.out.as_mut().and_then(|o| o.pop_front()) {
                return Ok(Some(d));
            }
            let Some(scan) = self.near.as_mut() else {
                return Ok(None);
            };
            if scan.exec.is_exhausted() {
                self.near = None;
                return Ok(None);
            }
            cx.host.check_interrupt()?;
            let docs = scan
                .exec
                .next(cx.source, &scan.meta, scan.want, 16 << 20, 10_000)?;
            scan.want = (scan.want * 2).min(NEAR_BATCH);
            report_work(cx, &scan.exec, &mut scan.seen);
            let mut ready = VecDeque::with_capacity(docs.len());
            for d in docs {
                if let Some(d) = self.stage.annotate(&scan.path, &d)? {
                    ready.push_back(d);
                }
            }
            self.out = Some(ready);
        }
    }
}
