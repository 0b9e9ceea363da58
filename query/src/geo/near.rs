//! `$near` / `$nearSphere` / `$geoNear` query operators (MongoDB's `GeoNearExpression`).
//!
//! Forms: legacy `{$near: [x, y], $maxDistance: d, $minDistance: d}` (also `[x, y, max]`,
//! `{x, y}` objects, and a GeoJSON point in the place of the pair — the form `$geoNear` hands
//! the planner), and GeoJSON `{$near: {$geometry: <Point>, $maxDistance, $minDistance}}` (its
//! only argument). Units: a GeoJSON point measures meters on the sphere; a legacy point with
//! `$nearSphere` measures radians on the sphere (MongoDB measures meters and divides by the
//! earth's radius, and so does [`NearQuery::distance`], to the last bit); a legacy point with
//! `$near` measures planar units. Which index answers: GeoJSON → `2dsphere`; legacy
//! `$nearSphere` → `2dsphere` or `2d`; legacy `$near` → `2d` (the planner refuses the query
//! with 291 otherwise). A document's distance is that of its nearest location on the path
//! ([`NearQuery::nearest`]); it matches when that lies in `[min, max]`; results are ordered by
//! distance by the caller (`find`, `$geoNear`).

use std::ops::ControlFlow;

use bson::{RawBsonRef, RawDocument};
use cairn_storage::display;

use crate::path::{FieldPath, LeafArrays};

use super::{parse_flat_point, parse_stored, planar, sphere, sphere_distance, valid_lng_lat};

/// A parsed near query.
#[derive(Debug, Clone)]
pub struct NearQuery {
    /// The center as given.
    pub flat: (f64, f64),
    /// The center on the sphere (when valid).
    pub center: Option<sphere::V3>,
    /// Given as a GeoJSON point (distances in meters).
    pub geojson: bool,
    /// `$nearSphere` (or GeoJSON): spherical distances.
    pub spherical: bool,
    /// `$minDistance` (0 when absent).
    pub min: f64,
    /// `$maxDistance` (infinite when absent).
    pub max: f64,
}

fn number(v: RawBsonRef<'_>) -> Option<f64> {
    super::number(v)
}

type PResult<T> = std::result::Result<T, (i32, String)>;

fn bad<T>(m: impl Into<String>) -> PResult<T> {
    Err((2, m.into()))
}

impl NearQuery {
    /// Parses the operator document whose first key is `$near`, `$nearSphere` or `$geoNear`.
    /// Errors carry MongoDB's code (2 BadValue, or 16893–16896/18522/34413 as `Location`).
    pub fn parse(obj: &RawDocument) -> PResult<NearQuery> {
        if let Some(q) = parse_legacy(obj)? {
            return Ok(q);
        }
        parse_new(obj)
    }

    /// The distance from the center to a value, in the query's units, `None` when the value
    /// is not a location this query can measure.
    pub fn distance(&self, v: RawBsonRef<'_>) -> Option<f64> {
        if !matches!(v, RawBsonRef::Array(_) | RawBsonRef::Document(_)) {
            return None;
        }
        let shape = parse_stored(v).ok()?;
        if self.spherical {
            let meters = sphere_distance(&shape, self.center?)? * sphere::EARTH_RADIUS_M;
            Some(if self.geojson {
                meters
            } else {
                meters / sphere::EARTH_RADIUS_M
            })
        } else {
            match shape {
                super::Shape::Point {
                    flat,
                    crs: super::Crs::Flat,
                    ..
                } => Some(planar::distance(self.flat, flat)),
                _ => None,
            }
        }
    }

    /// The nearest of the locations `path` reaches in `doc` (each element of an array, then
    /// the array itself, which may be a legacy pair), with its distance; the first found wins
    /// a tie. `None` when no value is a location this query can measure.
    pub fn nearest<'d>(
        &self,
        doc: &'d RawDocument,
        path: &FieldPath,
    ) -> Option<(f64, RawBsonRef<'d>)> {
        let mut best: Option<(f64, RawBsonRef<'d>)> = None;
        crate::path::visit(doc, path, LeafArrays::Traverse, |pv| {
            if let Some(v) = pv.value
                && let Some(d) = self.distance(v)
                && best.is_none_or(|(b, _)| d < b)
            {
                best = Some((d, v));
            }
            ControlFlow::<()>::Continue(())
        });
        best
    }

    /// Whether a distance lies within `[min, max]`.
    pub fn in_range(&self, d: f64) -> bool {
        d >= self.min && d <= self.max
    }

    /// Whether a value lies within `[min, max]`.
    pub fn matches(&self, v: RawBsonRef<'_>) -> bool {
        self.distance(v).is_some_and(|d| self.in_range(d))
    }

    /// Whether a `2d` index can answer (legacy point).
    pub fn needs_2d_or_sphere(&self) -> (bool, bool) {
        // (2d usable, 2dsphere usable)
        if self.geojson {
            (false, true)
        } else if self.spherical {
            (true, true)
        } else {
            (true, false)
        }
    }
}

fn parse_legacy(obj: &RawDocument) -> PResult<Option<NearQuery>> {
    let mut center: Option<(f64, f64)> = None;
    let mut geojson_center: Option<sphere::V3> = None;
    let mut spherical = false;
    let (mut min, mut max) = (0.0, f64::MAX);
    for el in obj.iter() {
        let Ok((k, e)) = el else {
            return bad("invalid BSON");
        };
        match k.as_str() {
            "$near" | "$geoNear" | "$nearSphere" => {
                let embedded = match e {
                    RawBsonRef::Array(_) | RawBsonRef::Document(_) => e,
                    _ => return Ok(None),
                };
                let is_point = match e {
                    RawBsonRef::Array(_) => true,
                    RawBsonRef::Document(d) => d
                        .iter()
                        .next()
                        .and_then(|x| x.ok())
                        .is_some_and(|(_, v)| number(v).is_some()),
                    _ => false,
                };
                let parsed = if is_point {
                    match parse_flat_point(embedded, false) {
                        Ok(p) => Some((p, None, None)),
                        Err(_) => with_max_distance(embedded).map(|(p, m)| (p, Some(m), None)),
                    }
                } else if let RawBsonRef::Document(d) = e
                    && let Ok(super::Shape::Point {
                        flat,
                        sphere: Some(s),
                        ..
                    }) = super::parse_geojson(d)
                {
                    // A GeoJSON point where the pair goes (MongoDB's `parseQueryPoint`).
                    Some((flat, None, Some(s)))
                } else {
                    None
                };
                if let Some((p, m, s)) = parsed {
                    if let Some(m) = m {
                        if m < 0.0 {
                            return Err((18522, "max distance must be non-negative".into()));
                        }
                        max = m;
                    }
                    center = Some(p);
                    geojson_center = s;
                    spherical = k.as_str() == "$nearSphere";
                }
            }
            "$minDistance" => {
                let Some(n) = number(e) else {
                    return Err((16893, "$minDistance must be a number".into()));
                };
                if n < 0.0 {
                    return Err((16894, "$minDistance must be non-negative".into()));
                }
                min = n;
            }
            "$maxDistance" => {
                let Some(n) = number(e) else {
                    return Err((16895, "$maxDistance must be a number".into()));
                };
                if n < 0.0 {
                    return Err((16896, "$maxDistance must be non-negative".into()));
                }
                max = n;
            }
            "$uniqueDocs" => {}
            other => {
                return Err((
                    34413,
                    format!("invalid argument in geo near query: {other}"),
                ));
            }
        }
    }
    let Some((x, y)) = center else {
        return Ok(None);
    };
    if let Some(s) = geojson_center {
        // A GeoJSON center measures meters on the sphere, `$near` or `$nearSphere`.
        return Ok(Some(NearQuery {
            flat: (x, y),
            center: Some(s),
            geojson: true,
            spherical: true,
            min,
            max,
        }));
    }
    if spherical && !valid_lng_lat(x, y) {
        return bad("Legacy point is out of bounds for spherical query");
    }
    Ok(Some(NearQuery {
        flat: (x, y),
        center: valid_lng_lat(x, y).then(|| sphere::from_lng_lat(x, y)),
        geojson: false,
        spherical,
        min,
        max,
    }))
}

/// `[x, y, maxDistance]`.
fn with_max_distance(v: RawBsonRef<'_>) -> Option<((f64, f64), f64)> {
    let d = match v {
        RawBsonRef::Array(a) => RawDocument::from_bytes(a.as_bytes()).ok()?,
        RawBsonRef::Document(d) => d,
        _ => return None,
    };
    let vals: Vec<f64> = d
        .iter()
        .map(|e| e.ok().and_then(|(_, v)| number(v)))
        .collect::<Option<Vec<_>>>()?;
    match vals.as_slice() {
        [x, y, m] => Some(((*x, *y), *m)),
        _ => None,
    }
}

fn parse_new(obj: &RawDocument) -> PResult<NearQuery> {
    let mut it = obj.iter();
    let Some(Ok((k, e))) = it.next() else {
        return bad("empty geo near query object");
    };
    if let Some(Ok((k2, v2))) = it.next() {
        return bad(format!(
            "geo near accepts just one argument when querying for a GeoJSON point. Extra field \
             found: {}: {}",
            k2.as_str(),
            display::value(v2)
        ));
    }
    let RawBsonRef::Document(arg) = e else {
        return bad("geo near query argument is not an object");
    };
    if !matches!(k.as_str(), "$near" | "$geoNear" | "$nearSphere") {
        return bad(format!("invalid geo near query operator: {}", k.as_str()));
    }
    let valid = |x: f64| x >= 0.0 && x.is_finite();
    let (mut min, mut max) = (0.0, f64::MAX);
    let mut center = None;
    for el in arg.iter() {
        let Ok((f, v)) = el else {
            return bad("invalid BSON");
        };
        match f.as_str() {
            "$geometry" => {
                let RawBsonRef::Document(g) = v else {
                    if matches!(v, RawBsonRef::Array(_)) {
                        return bad(format!(
                            "$near requires geojson point, given {}",
                            display::value(v)
                        ));
                    }
                    continue;
                };
                let first_number = g
                    .iter()
                    .next()
                    .and_then(|x| x.ok())
                    .is_some_and(|(_, v)| number(v).is_some());
                if first_number {
                    return bad(format!(
                        "$near requires geojson point, given {}",
                        display::document(g)
                    ));
                }
                match super::parse_geojson(g) {
                    Ok(super::Shape::Point { flat, sphere, .. }) => center = Some((flat, sphere)),
                    Ok(_) => {
                        return bad(format!(
                            "invalid point in geo near query $geometry argument: {}  Point must \
                             be an array or object",
                            display::document(g)
                        ));
                    }
                    Err(reason) => {
                        return bad(format!(
                            "invalid point in geo near query $geometry argument: {}  {reason}",
                            display::document(g)
                        ));
                    }
                }
            }
            "$minDistance" => {
                let Some(n) = number(v) else {
                    return bad("$minDistance must be a number");
                };
                if !valid(n) {
                    return bad("$minDistance must be non-negative");
                }
                min = n;
            }
            "$maxDistance" => {
                let Some(n) = number(v) else {
                    return bad("$maxDistance must be a number");
                };
                if !valid(n) {
                    return bad("$maxDistance must be non-negative");
                }
                max = n;
            }
            other => return bad(format!("invalid argument in geo near query: {other}")),
        }
    }
    let Some((flat, sphere)) = center else {
        return bad("$geometry is required for geo near query");
    };
    Ok(NearQuery {
        flat,
        center: sphere,
        geojson: true,
        spherical: true,
        min,
        max,
    })
}
