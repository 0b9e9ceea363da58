//! `$geoNear`: the input documents (the collection; first stage only, 40603) that match
//! `query`, nearest first, each with its distance in `distanceField` and, with `includeLocs`,
//! the location that distance was measured to.
//!
//! The geo field comes from the collection's geo indexes (MongoDB's rules): `key` names it
//! (an index must cover it), otherwise the one `2d` index, otherwise the one `2dsphere` index;
//! none is IndexNotFound (27) "$geoNear requires a 2d or 2dsphere index, but none were found",
//! several of a kind is 27 too. A GeoJSON `near` needs a `2dsphere` index, a legacy `near`
//! without `spherical` a `2d` one (otherwise 291 "unable to find index for $geoNear query").
//! Distances: meters (× 6378100) for a GeoJSON `near`; radians for a legacy `near` with
//! `spherical`; planar units for a legacy `near` over a `2d` index. A geometry's distance is
//! to its nearest point (0 inside a polygon); with several locations in the field the nearest
//! counts. `minDistance`/`maxDistance` bound it (inclusive, before `distanceMultiplier`).
//! Ties keep input order.
//!
//! Execution: a GeoJSON `near` over a `2dsphere` index, or a flat legacy `near` over a `2d`
//! index (without `minDistance`), with a `query` of plain field conditions, runs as the
//! planner's nearest-first ring search over the index (the query plus a `$nearSphere`/`$near`
//! on the geo field), streamed: a later `$limit` stops the search early. Other forms read
//! every input document (the collection scan the `$cursor` stage gives a first stage) and
//! sort by distance within the memory limit. Ties come in `_id` order on the index path and
//! in input order otherwise.

use std::any::Any;
use std::sync::Arc;

use bson::raw::{CStr, cstr};
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::agg::doc::set_nested;
use crate::agg::{DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};
use crate::expr::ExprExtensions;
use crate::filter::Filter;
use crate::geo::{self, Shape, planar, sphere};
use crate::index::geo_keys::geo_plugin;
use crate::jsonschema::WithJsonSchema;

/// The center of a `$geoNear`.
#[derive(Debug, Clone, Copy)]
struct Near {
    flat: (f64, f64),
    sphere: Option<sphere::V3>,
    geojson: bool,
}

/// A parsed `$geoNear`.
#[derive(Debug)]
pub struct GeoNear {
    spec: RawDocumentBuf,
    near: Near,
    distance_field: Vec<String>,
    include_locs: Option<Vec<String>>,
    spherical: bool,
    min_distance: Option<f64>,
    max_distance: Option<f64>,
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
        let Some(near) = near else {
            return Err(loc(5860400, "$geoNear requires a 'near' argument"));
        };
        let Some(distance_field) = distance_field else {
            return Err(loc(
                16606,
                "$geoNear requires a 'distanceField' option as a String",
            ));
        };
        if spherical && !near.geojson && near.sphere.is_none() {
            return Err(QueryError::BadValue(
                "Legacy point is out of bounds for spherical query".into(),
            ));
        }
        Ok(GeoNear {
            spec: d.to_owned(),
            near,
            distance_field,
            include_locs,
            spherical,
            min_distance,
            max_distance,
            multiplier,
            key,
            query: Arc::new(query),
            query_doc,
            db: cx.db.clone(),
            coll: cx.coll.clone(),
        })
    }
}

fn parse_near(v: RawBsonRef<'_>) -> Result<Near> {
    let bad = |m: String| QueryError::BadValue(m);
    match v {
        RawBsonRef::Array(_) => {
            let (x, y) = geo::parse_flat_point(v, false).map_err(bad)?;
            Ok(Near {
                flat: (x, y),
                sphere: geo::valid_lng_lat(x, y).then(|| sphere::from_lng_lat(x, y)),
                geojson: false,
            })
        }
        RawBsonRef::Document(d) => {
            let first_is_number = d
                .iter()
                .next()
                .and_then(|e| e.ok())
                .is_some_and(|(_, v)| number(v).is_some());
            if first_is_number {
                let (x, y) = geo::parse_flat_point(v, false).map_err(bad)?;
                return Ok(Near {
                    flat: (x, y),
                    sphere: geo::valid_lng_lat(x, y).then(|| sphere::from_lng_lat(x, y)),
                    geojson: false,
                });
            }
            match geo::parse_geojson(d).map_err(bad)? {
                Shape::Point { flat, sphere, .. } => Ok(Near {
                    flat,
                    sphere,
                    geojson: true,
                }),
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
    /// The distance of one location value, or `None` when it is not one.
    fn distance(&self, kind: Kind, v: RawBsonRef<'_>) -> Option<f64> {
        let st = self;
        match kind {
            Kind::Sphere => {
                let shape = geo::parse_stored(v).ok()?;
                let center = st.near.sphere?;
                let rad = geo::sphere_distance(&shape, center)?;
                Some(if st.near.geojson {
                    rad * sphere::EARTH_RADIUS_M
                } else {
                    rad
                })
            }
            Kind::TwoD => {
                let (x, y) = geo::parse_flat_point(v, true).ok()?;
                if st.spherical {
                    let c = st.near.sphere?;
                    if !geo::valid_lng_lat(x, y) {
                        return None;
                    }
                    Some(sphere_dist_deg(c, x, y))
                } else {
                    Some(planar::distance(st.near.flat, (x, y)))
                }
            }
        }
    }

    /// The nearest of `d`'s locations at `path` within `minDistance`/`maxDistance`, with its
    /// distance; `None` when there is none.
    fn nearest<'d>(
        &self,
        kind: Kind,
        path: &[String],
        d: &'d RawDocument,
    ) -> Option<(f64, RawBsonRef<'d>)> {
        let mut locations = Vec::new();
        collect_locations(d, path, kind, &mut locations);
        let mut best: Option<(f64, RawBsonRef<'_>)> = None;
        for loc in locations {
            if let Some(dist) = self.distance(kind, loc)
                && best.is_none_or(|(b, _)| dist < b)
            {
                best = Some((dist, loc));
            }
        }
        best.filter(|&(dist, _)| {
            !(self.max_distance.is_some_and(|m| dist > m)
                || self.min_distance.is_some_and(|m| dist < m))
        })
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
    fn annotate(
        &self,
        kind: Kind,
        path: &[String],
        d: &RawDocument,
    ) -> Result<Option<RawDocumentBuf>> {
        self.nearest(kind, path, d)
            .map(|(dist, at)| self.annotated(d, dist, at))
            .transpose()
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
    out: Option<std::collections::VecDeque<RawDocumentBuf>>,
    /// The index path, while it has more to produce.
    near: Option<NearScan>,
}

/// The index path: the planner's nearest-first search, and what annotating its documents
/// needs.
struct NearScan {
    meta: Arc<cairn_storage::catalog::CollectionMeta>,
    exec: crate::plan::Execution,
    kind: Kind,
    path: Vec<String>,
}

fn not_found(msg: impl Into<String>) -> QueryError {
    QueryError::Location(27, msg.into())
}

impl GeoNearStream {
    /// The geo field and index kind (see the module documentation).
    fn field(&self, cx: &ExecCx<'_>) -> Result<Option<(String, Kind)>> {
        let st = &self.stage;
        let Some(coll) = &st.coll else {
            return Ok(None);
        };
        let Some(meta) = cx.catalog.collection(&st.db, coll)? else {
            return Ok(None);
        };
        let ns = format!("{}.{}", st.db, coll);
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
        let (field, kind) = if let Some(key) = &st.key {
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
            Kind::Sphere => st.near.geojson || st.spherical,
            Kind::TwoD => !st.near.geojson,
        };
        if !usable {
            return Err(QueryError::Location(
                291,
                "error processing query: planner returned error :: caused by :: unable to find \
                 index for $geoNear query"
                    .into(),
            ));
        }
        Ok(Some((field, kind)))
    }

    /// The filter that makes the planner search the index nearest first, when the index path
    /// applies (see the module documentation).
    fn near_filter(&self, field: &str, kind: Kind) -> Option<RawDocumentBuf> {
        let st = &self.stage;
        let (x, y) = st.near.flat;
        let mut cond = RawDocumentBuf::new();
        match kind {
            Kind::Sphere if st.near.geojson => {
                let mut g = rawdoc! {"$geometry": {"type": "Point", "coordinates": [x, y]}};
                if let Some(m) = st.max_distance {
                    g.append(cstr!("$maxDistance"), m);
                }
                if let Some(m) = st.min_distance {
                    g.append(cstr!("$minDistance"), m);
                }
                cond.append(cstr!("$nearSphere"), g);
            }
            Kind::TwoD if !st.spherical && st.min_distance.is_none() => {
                let mut point = RawArrayBuf::new();
                point.push(x);
                point.push(y);
                cond.append(cstr!("$near"), point);
                if let Some(m) = st.max_distance {
                    cond.append(cstr!("$maxDistance"), m);
                }
            }
            _ => return None,
        }
        let mut filter = RawDocumentBuf::new();
        for el in st.query_doc.iter() {
            let (k, v) = el.ok()?;
            if k.as_str().starts_with('$') || k.as_str() == field {
                return None;
            }
            filter.append(k, v);
        }
        filter.append(<&CStr>::try_from(field).ok()?, cond);
        Some(filter)
    }

    /// Starts the index path; `None` when it does not apply. Returns the planner's first
    /// documents, annotated.
    fn start_near(
        &mut self,
        cx: &ExecCx<'_>,
        field: &str,
        kind: Kind,
    ) -> Result<Option<std::collections::VecDeque<RawDocumentBuf>>> {
        let Some(coll) = self.stage.coll.clone() else {
            return Ok(None);
        };
        let Some(filter_doc) = self.near_filter(field, kind) else {
            return Ok(None);
        };
        let Some(meta) = cx.catalog.collection(&self.stage.db, &coll)? else {
            return Ok(None);
        };
        let filter = Arc::new(Filter::parse(&filter_doc)?);
        let hint = crate::plan::Hint::None;
        let q = crate::plan::Query::new(&filter, &hint);
        let ns = format!("{}.{coll}", self.stage.db);
        let chosen = crate::plan::choose(
            cx.host.plan_cache(),
            &ns,
            &meta,
            &q,
            &filter,
            cx.source,
            false,
        )?;
        let path: Vec<String> = field.split('.').map(str::to_string).collect();
        let mut out = std::collections::VecDeque::new();
        for d in chosen.buffered {
            if let Some(d) = self.stage.annotate(kind, &path, &d)? {
                out.push_back(d);
            }
        }
        self.near = Some(NearScan {
            meta,
            exec: chosen.exec,
            kind,
            path,
        });
        Ok(Some(out))
    }

    /// Reads every input document and sorts by distance (the path without the index).
    fn run(
        &mut self,
        cx: &ExecCx<'_>,
        field: &str,
        kind: Kind,
    ) -> Result<std::collections::VecDeque<RawDocumentBuf>> {
        let path: Vec<String> = field.split('.').map(str::to_string).collect();
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
            let Some((dist, at)) = self.stage.nearest(kind, &path, &d) else {
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
        let mut out = std::collections::VecDeque::with_capacity(hits.len());
        for (dist, _, d, at) in hits {
            out.push_back(self.stage.annotated(&d, dist, at.as_raw_bson_ref())?);
        }
        Ok(out)
    }
}

/// MongoDB's `spheredist_deg`: the n-vector angle between two longitude/latitude points.
fn sphere_dist_deg(c: sphere::V3, x: f64, y: f64) -> f64 {
    let p = sphere::from_lng_lat(x, y);
    let d = sphere::dot(c, p);
    if d >= 1.0 {
        0.0
    } else if d <= -1.0 {
        std::f64::consts::PI
    } else {
        d.acos()
    }
}

/// The location values at `path`: arrays on the way are entered; for `2d`, an array of
/// points at the end gives each point.
fn collect_locations<'a>(
    d: &'a RawDocument,
    path: &[String],
    kind: Kind,
    out: &mut Vec<RawBsonRef<'a>>,
) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Ok(Some(v)) = d.get(first) else { return };
    if rest.is_empty() {
        if kind == Kind::TwoD
            && let RawBsonRef::Array(a) = v
            && a.into_iter()
                .flatten()
                .next()
                .is_some_and(|e| matches!(e, RawBsonRef::Array(_) | RawBsonRef::Document(_)))
        {
            out.extend(a.into_iter().flatten());
            return;
        }
        out.push(v);
        return;
    }
    match v {
        RawBsonRef::Document(sub) => collect_locations(sub, rest, kind, out),
        RawBsonRef::Array(a) => {
            for el in a.into_iter().flatten() {
                if let RawBsonRef::Document(sub) = el {
                    collect_locations(sub, rest, kind, out);
                }
            }
        }
        _ => {}
    }
}

impl DocStream for GeoNearStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if self.out.is_none() {
            let out = match self.field(cx)? {
                None => {
                    // No collection: nothing to read.
                    while self.input.next(cx)?.is_some() {}
                    Default::default()
                }
                Some((field, kind)) => match self.start_near(cx, &field, kind)? {
                    Some(first) => first,
                    None => self.run(cx, &field, kind)?,
                },
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
                .next(cx.source, &scan.meta, 128, 16 << 20, 10_000)?;
            let mut ready = std::collections::VecDeque::with_capacity(docs.len());
            for d in docs {
                if let Some(d) = self.stage.annotate(scan.kind, &scan.path, &d)? {
                    ready.push_back(d);
                }
            }
            self.out = Some(ready);
        }
    }
}
