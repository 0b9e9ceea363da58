//! Geospatial semantics: GeoJSON and legacy-coordinate parsing, and the `$geoWithin` /
//! `$within` / `$geoIntersects` match predicates (MongoDB 7.0's `GeoMatchExpression`).
//!
//! - [`parse_stored`] reads a document's value the way MongoDB's `parseFromStorage` does: an
//!   array, or an object whose first value is a number, is a legacy point `[x, y]` / `{x, y}`
//!   (extra trailing values allowed, finite numbers required); any other object is GeoJSON
//!   (`Point`, `LineString`, `Polygon` with holes, `MultiPoint`, `MultiLineString`,
//!   `MultiPolygon`, `GeometryCollection`) with an optional named `crs` (CRS84, EPSG:4326, or
//!   MongoDB's strict-winding CRS, which only a polygon may carry). Unparseable values simply do
//!   not match.
//! - [`GeoMatch::parse`] reads the operand of `$geoWithin` (`$geometry` Polygon/MultiPolygon
//!   — or a strict-winding "big" polygon — spherical; `$box`, `$polygon`, `$center` planar;
//!   `$centerSphere` spherical, radius in radians) or `$geoIntersects` (`$geometry` of any
//!   type, always spherical), with MongoDB's BadValue messages.
//! - Matching: planar regions see only points (legacy or GeoJSON), by their raw x/y; spherical
//!   regions see points whose legacy coordinates are valid longitude/latitude, and every
//!   GeoJSON geometry; stored big polygons never match. Point-in-region counts the boundary
//!   (as MongoDB's leaf-cell test does); a `$centerSphere` holds a line or polygon when every
//!   vertex lies in it (MongoDB's vertex test, about π meters inside the rim);
//!   `$geoIntersects` with a `$centerSphere` matches nothing, as in MongoDB.
//! - [`near`] parses `$near`/`$nearSphere` and measures distances for them.
//! - [`cells`] covers regions with index cells: [`GeoMatch::sphere_cover`] and
//!   [`GeoMatch::planar_cover`] give the cells a `2dsphere` / `2d` index scan reads for a
//!   predicate (conservative: every location the predicate matches lies in one of them).
//! - [`sphere`] holds the spherical predicates, [`planar`] the flat ones.
//!
//! Invariant: parsing and matching never panic; loops above
//! [`sphere::MAX_VALIDATED_VERTICES`] skip the quadratic self-intersection check.

pub mod cells;
pub mod near;
pub mod planar;
pub mod sphere;

use bson::{RawBsonRef, RawDocument};
use cairn_storage::display;

use sphere::{Cap, Loop, Polygon, V3};

/// A coordinate reference system (MongoDB's `CRS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crs {
    /// Legacy coordinate pairs on a plane.
    Flat,
    /// Longitude/latitude on the sphere (GeoJSON).
    Sphere,
    /// MongoDB's strict-winding CRS: a polygon's interior is left of its edges, however big.
    StrictSphere,
}

/// A parsed geometry.
#[derive(Debug, Clone)]
pub enum Shape {
    /// A point: its raw coordinates, its position on the sphere when they are a valid
    /// longitude/latitude, and the CRS it was given in.
    Point {
        /// `x` (longitude) and `y` (latitude) as given.
        flat: (f64, f64),
        /// The point on the sphere, when valid.
        sphere: Option<V3>,
        /// `Flat` for legacy pairs, `Sphere` for GeoJSON.
        crs: Crs,
    },
    /// A GeoJSON LineString.
    Line(Vec<V3>),
    /// A GeoJSON Polygon (`big`: strict winding, one loop, never normalized).
    Polygon {
        /// The polygon.
        polygon: Polygon,
        /// Given with the strict-winding CRS.
        big: bool,
    },
    /// A GeoJSON MultiPoint.
    MultiPoint(Vec<V3>),
    /// A GeoJSON MultiLineString.
    MultiLine(Vec<Vec<V3>>),
    /// A GeoJSON MultiPolygon.
    MultiPolygon(Vec<Polygon>),
    /// A GeoJSON GeometryCollection (never nested).
    Collection(Vec<Shape>),
}

/// The primitive parts of a spherical geometry.
#[derive(Default)]
struct Parts<'a> {
    points: Vec<V3>,
    lines: Vec<&'a [V3]>,
    polygons: Vec<&'a Polygon>,
}

impl Shape {
    /// Whether the shape can be seen on the sphere (legacy points only with valid
    /// longitude/latitude).
    fn spherical(&self) -> bool {
        match self {
            Shape::Point { sphere, .. } => sphere.is_some(),
            Shape::Collection(c) => c.iter().all(Shape::spherical),
            _ => true,
        }
    }

    fn parts(&self) -> Parts<'_> {
        let mut p = Parts::default();
        self.collect(&mut p);
        p
    }

    fn collect<'a>(&'a self, out: &mut Parts<'a>) {
        match self {
            Shape::Point { sphere, .. } => out.points.extend(*sphere),
            Shape::Line(l) => out.lines.push(l),
            Shape::Polygon { polygon, .. } => out.polygons.push(polygon),
            Shape::MultiPoint(ps) => out.points.extend(ps.iter().copied()),
            Shape::MultiLine(ls) => out.lines.extend(ls.iter().map(Vec::as_slice)),
            Shape::MultiPolygon(ps) => out.polygons.extend(ps.iter()),
            Shape::Collection(c) => c.iter().for_each(|s| s.collect(out)),
        }
    }

    fn is_big(&self) -> bool {
        matches!(self, Shape::Polygon { big: true, .. })
    }
}

/// Whether a longitude/latitude pair is on the sphere (`isValidLngLat`).
pub fn valid_lng_lat(lng: f64, lat: f64) -> bool {
    lng.abs() <= 180.0 && lat.abs() <= 90.0
}

fn is_number(v: RawBsonRef<'_>) -> bool {
    matches!(
        v,
        RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_)
    )
}

/// A number as a double (`BSONElement::number`).
pub(crate) fn number(v: RawBsonRef<'_>) -> Option<f64> {
    match v {
        RawBsonRef::Int32(i) => Some(f64::from(i)),
        RawBsonRef::Int64(i) => Some(i as f64),
        RawBsonRef::Double(d) => Some(d),
        RawBsonRef::Decimal128(d) => Some(cairn_storage::decimal::to_f64(
            cairn_storage::decimal::Decimal::from_decimal128(d),
        )),
        _ => None,
    }
}

/// The elements of an array or document value.
fn elements<'a>(v: RawBsonRef<'a>) -> Option<Vec<RawBsonRef<'a>>> {
    let d: &RawDocument = match v {
        RawBsonRef::Array(a) => RawDocument::from_bytes(a.as_bytes()).ok()?,
        RawBsonRef::Document(d) => d,
        _ => return None,
    };
    let mut out = Vec::new();
    for el in d.iter() {
        out.push(el.ok()?.1);
    }
    Some(out)
}

fn first_value<'a>(d: &'a RawDocument) -> Option<RawBsonRef<'a>> {
    d.iter().next().and_then(|e| e.ok()).map(|(_, v)| v)
}

fn field<'a>(d: &'a RawDocument, name: &str) -> Option<RawBsonRef<'a>> {
    d.get(name).ok().flatten()
}

type PResult<T> = std::result::Result<T, String>;

/// MongoDB's `parseFlatPoint`: two finite numbers from an array or object.
pub fn parse_flat_point(v: RawBsonRef<'_>, allow_extra: bool) -> PResult<(f64, f64)> {
    let Some(els) = elements(v) else {
        return Err("Point must be an array or object".into());
    };
    let x = els.first().copied().and_then(number);
    let Some(x) = x else {
        return Err("Point must only contain numeric elements".into());
    };
    let y = els.get(1).copied().and_then(number);
    let Some(y) = y else {
        return Err("Point must only contain numeric elements".into());
    };
    if !allow_extra && els.len() > 2 {
        return Err("Point must only contain two numeric elements".into());
    }
    if !x.is_finite() || !y.is_finite() {
        return Err("Point coordinates must be finite numbers".into());
    }
    Ok((x, y))
}

fn to_sphere(x: f64, y: f64) -> PResult<V3> {
    if !valid_lng_lat(x, y) {
        return Err(format!(
            "longitude/latitude is out of bounds, lng: {} lat: {}",
            display::format_g(x),
            display::format_g(y)
        ));
    }
    Ok(sphere::from_lng_lat(x, y))
}

fn parse_coordinate(v: RawBsonRef<'_>) -> PResult<V3> {
    if !matches!(v, RawBsonRef::Array(_)) {
        return Err("GeoJSON coordinates must be an array".into());
    }
    let (x, y) = parse_flat_point(v, true)?;
    to_sphere(x, y)
}

fn parse_coordinates(v: Option<RawBsonRef<'_>>) -> PResult<Vec<V3>> {
    let Some(v @ RawBsonRef::Array(_)) = v else {
        return Err("GeoJSON coordinates must be an array of coordinates".into());
    };
    elements(v)
        .unwrap_or_default()
        .into_iter()
        .map(parse_coordinate)
        .collect()
}

fn dedup(points: &mut Vec<V3>) {
    points.dedup();
}

fn parse_crs(d: &RawDocument, allow_strict: bool) -> PResult<Crs> {
    let Some(crs) = field(d, "crs") else {
        return Ok(Crs::Sphere);
    };
    let crs = match crs {
        RawBsonRef::Document(c) => c,
        RawBsonRef::Array(a) => match RawDocument::from_bytes(a.as_bytes()) {
            Ok(c) => c,
            Err(_) => return Err("GeoJSON CRS must be an object".into()),
        },
        _ => return Err("GeoJSON CRS must be an object".into()),
    };
    if !matches!(field(crs, "type"), Some(RawBsonRef::String("name"))) {
        return Err("GeoJSON CRS must have field \"type\": \"name\"".into());
    }
    let props = match field(crs, "properties") {
        Some(RawBsonRef::Document(p)) => p,
        _ => return Err("CRS must have field \"properties\" which is an object".into()),
    };
    let Some(RawBsonRef::String(name)) = field(props, "name") else {
        return Err("In CRS, \"properties.name\" must be a string".into());
    };
    match name {
        "urn:ogc:def:crs:OGC:1.3:CRS84" | "EPSG:4326" => Ok(Crs::Sphere),
        "urn:x-mongodb:crs:strictwinding:EPSG:4326" => {
            if allow_strict {
                Ok(Crs::StrictSphere)
            } else {
                Err("Strict winding order is only supported by polygon".into())
            }
        }
        other => Err(format!("Unknown CRS name: {other}")),
    }
}

fn parse_line_coordinates(v: Option<RawBsonRef<'_>>) -> PResult<Vec<V3>> {
    let mut vertices = parse_coordinates(v)?;
    dedup(&mut vertices);
    let shown = v.map(display::value).unwrap_or_default();
    if vertices.len() < 2 {
        return Err(format!(
            "GeoJSON LineString must have at least 2 vertices: {shown}"
        ));
    }
    for (i, w) in vertices.windows(2).enumerate() {
        if sphere::angle(w[0], w[1]) >= std::f64::consts::PI - 1e-15 {
            return Err(format!(
                "GeoJSON LineString is not valid: Vertices {} and {} are antipodal {shown}",
                i,
                i + 1
            ));
        }
    }
    Ok(vertices)
}

fn parse_polygon_coordinates(v: Option<RawBsonRef<'_>>) -> PResult<Polygon> {
    let Some(v @ RawBsonRef::Array(_)) = v else {
        return Err("Polygon coordinates must be an array".into());
    };
    let rings = elements(v).unwrap_or_default();
    let mut loops: Vec<Loop> = Vec::new();
    for ring in &rings {
        let shown = display::value(*ring);
        let mut points = parse_coordinates(Some(*ring))?;
        if points.is_empty() {
            return Err(format!("Loop has no vertices: {shown}"));
        }
        if points.first() != points.last() {
            return Err(format!("Loop is not closed: {shown}"));
        }
        dedup(&mut points);
        points.pop();
        if points.len() < 3 {
            return Err(format!(
                "Loop must have at least 3 different vertices: {shown}"
            ));
        }
        let mut l = Loop::new(points);
        if let Some(err) = l.invalid_reason() {
            return Err(format!("Loop is not valid: {shown} {err}"));
        }
        l.normalize();
        if let Some(shell) = loops.first()
            && !loop_covers_loop(shell, &l)
        {
            let first = rings
                .first()
                .map(|r| display::value(*r))
                .unwrap_or_default();
            return Err(format!(
                "Secondary loops not contained by first exterior loop - secondary loops must \
                 be holes: {shown} first loop: {first}"
            ));
        }
        loops.push(l);
    }
    if loops.is_empty() {
        return Err("Polygon has no loops.".into());
    }
    Ok(Polygon { loops })
}

fn loop_covers_loop(outer: &Loop, inner: &Loop) -> bool {
    let shell = Polygon {
        loops: vec![outer.clone()],
    };
    let mut ring = inner.vertices().to_vec();
    if let Some(&f) = ring.first() {
        ring.push(f);
    }
    shell.covers_line(&ring)
}

fn parse_big_polygon(v: Option<RawBsonRef<'_>>) -> PResult<Polygon> {
    let Some(v @ RawBsonRef::Array(_)) = v else {
        return Err("Coordinates of polygon must be an array".into());
    };
    let shown = display::value(v);
    let rings = elements(v).unwrap_or_default();
    if rings.len() != 1 {
        return Err(format!(
            "Only one simple loop is allowed in a big polygon: {shown}"
        ));
    }
    let mut points = parse_coordinates(Some(rings[0]))?;
    let ring_shown = display::value(rings[0]);
    if points.is_empty() {
        return Err(format!("Loop has no vertices: {ring_shown}"));
    }
    if points.first() != points.last() {
        return Err(format!("Loop is not closed: {ring_shown}"));
    }
    dedup(&mut points);
    points.pop();
    if points.len() < 3 {
        return Err(format!(
            "Loop must have at least 3 different vertices: {shown}"
        ));
    }
    let l = Loop::new(points);
    if let Some(err) = l.invalid_reason() {
        return Err(format!("Loop is not valid: {shown} {err}"));
    }
    Ok(Polygon { loops: vec![l] })
}

/// The GeoJSON `type` of an object, if it is one of the seven.
fn geojson_type(d: &RawDocument) -> Option<&str> {
    match field(d, "type") {
        Some(RawBsonRef::String(
            t @ ("Point" | "LineString" | "Polygon" | "MultiPoint" | "MultiLineString"
            | "MultiPolygon" | "GeometryCollection"),
        )) => Some(t),
        _ => None,
    }
}

/// Parses a GeoJSON object (MongoDB's `parseFromGeoJSON`).
pub fn parse_geojson(d: &RawDocument) -> PResult<Shape> {
    let Some(t) = geojson_type(d) else {
        return Err(format!("unknown GeoJSON type: {}", display::document(d)));
    };
    parse_typed(d, t, true)
}

fn parse_typed(d: &RawDocument, t: &str, allow_collection: bool) -> PResult<Shape> {
    let coords = field(d, "coordinates");
    Ok(match t {
        "Point" => {
            parse_crs(d, false)?;
            let (x, y) = match coords {
                Some(c) => parse_flat_point(c, true)?,
                None => return Err("Point must be an array or object".into()),
            };
            let p = to_sphere(x, y)?;
            Shape::Point {
                flat: (x, y),
                sphere: Some(p),
                crs: Crs::Sphere,
            }
        }
        "LineString" => {
            parse_crs(d, false)?;
            Shape::Line(parse_line_coordinates(coords)?)
        }
        "Polygon" => match parse_crs(d, true)? {
            Crs::StrictSphere => Shape::Polygon {
                polygon: parse_big_polygon(coords)?,
                big: true,
            },
            _ => Shape::Polygon {
                polygon: parse_polygon_coordinates(coords)?,
                big: false,
            },
        },
        "MultiPoint" => {
            parse_crs(d, false)?;
            let points = parse_coordinates(coords)?;
            if points.is_empty() {
                return Err("MultiPoint coordinates must have at least 1 element".into());
            }
            Shape::MultiPoint(points)
        }
        "MultiLineString" => {
            parse_crs(d, false)?;
            let Some(c @ RawBsonRef::Array(_)) = coords else {
                return Err("MultiLineString coordinates must be an array".into());
            };
            let lines = elements(c)
                .unwrap_or_default()
                .into_iter()
                .map(|l| parse_line_coordinates(Some(l)))
                .collect::<PResult<Vec<_>>>()?;
            if lines.is_empty() {
                return Err("MultiLineString coordinates must have at least 1 element".into());
            }
            Shape::MultiLine(lines)
        }
        "MultiPolygon" => {
            parse_crs(d, false)?;
            let Some(c @ RawBsonRef::Array(_)) = coords else {
                return Err("MultiPolygon coordinates must be an array".into());
            };
            let polys = elements(c)
                .unwrap_or_default()
                .into_iter()
                .map(|p| parse_polygon_coordinates(Some(p)))
                .collect::<PResult<Vec<_>>>()?;
            if polys.is_empty() {
                return Err("MultiPolygon coordinates must have at least 1 element".into());
            }
            Shape::MultiPolygon(polys)
        }
        _ => {
            if !allow_collection {
                return Err(format!(
                    "GeometryCollections cannot be nested: {}",
                    display::document(d)
                ));
            }
            let Some(g @ RawBsonRef::Array(_)) = field(d, "geometries") else {
                return Err("GeometryCollection geometries must be an array".into());
            };
            let geoms = elements(g).unwrap_or_default();
            if geoms.is_empty() {
                return Err("GeometryCollection geometries must have at least 1 element".into());
            }
            let mut out = Vec::new();
            for (i, g) in geoms.into_iter().enumerate() {
                let RawBsonRef::Document(gd) = g else {
                    return Err(format!("Element {i} of \"geometries\" is not an object"));
                };
                let Some(t) = geojson_type(gd) else {
                    return Err(format!("Unknown GeoJSON type: {}", display::value(g)));
                };
                if t == "GeometryCollection" {
                    return Err(format!(
                        "GeometryCollections cannot be nested: {}",
                        display::value(g)
                    ));
                }
                out.push(parse_typed(gd, t, false)?);
            }
            Shape::Collection(out)
        }
    })
}

/// Reads a stored value as a geometry (MongoDB's `parseFromStorage`), or why it is not one.
pub fn parse_stored(v: RawBsonRef<'_>) -> PResult<Shape> {
    let d = match v {
        RawBsonRef::Array(_) => {
            let (x, y) = parse_flat_point(v, true)?;
            return Ok(legacy_point(x, y));
        }
        RawBsonRef::Document(d) => d,
        _ => {
            return Err(format!(
                "geo element must be an array or object: {}",
                display::value(v)
            ));
        }
    };
    if first_value(d).is_some_and(is_number) {
        let (x, y) = parse_flat_point(v, true)?;
        return Ok(legacy_point(x, y));
    }
    parse_geojson(d)
}

fn legacy_point(x: f64, y: f64) -> Shape {
    Shape::Point {
        flat: (x, y),
        sphere: valid_lng_lat(x, y).then(|| sphere::from_lng_lat(x, y)),
        crs: Crs::Flat,
    }
}

/// A `$geoWithin` region.
#[derive(Debug, Clone)]
pub enum Region {
    /// `$box` (planar, inclusive).
    Box(planar::Rect),
    /// `$polygon` (planar).
    FlatPolygon(Vec<(f64, f64)>),
    /// `$center` (planar): center and radius.
    Center((f64, f64), f64),
    /// `$centerSphere`.
    CenterSphere(Cap),
    /// `$geometry` Polygon, MultiPolygon, or a collection's polygons; `big` for strict winding.
    Polygons(Vec<Polygon>),
}

/// A parsed `$geoWithin` / `$geoIntersects` predicate.
#[derive(Debug, Clone)]
pub enum GeoMatch {
    /// `$geoWithin` / `$within`.
    Within(Region),
    /// `$geoIntersects` (the query geometry on the sphere; `None` matches nothing, as a
    /// `$centerSphere` does).
    Intersects(Option<Shape>),
}

fn bad<T>(msg: impl Into<String>) -> PResult<T> {
    Err(msg.into())
}

impl GeoMatch {
    /// Parses `{<op>: operand}` for `$geoWithin`, `$within` or `$geoIntersects`. `wrapped`
    /// renders `{<op>: operand}` for messages. Errors are BadValue messages.
    pub fn parse(op: &str, operand: RawBsonRef<'_>, wrapped: &str) -> PResult<GeoMatch> {
        let RawBsonRef::Document(obj) = operand else {
            return bad("geometry must be an object");
        };
        let within = op != "$geoIntersects";
        let mut found: Option<(String, RawBsonRef<'_>)> = None;
        for el in obj.iter() {
            let Ok((k, v)) = el else {
                return bad("invalid BSON in geo query");
            };
            if found.is_some() && op == "$geoWithin" {
                return bad(format!(
                    "$geoWithin doesn't accept multiple shapes {}",
                    format_element(op, operand)
                ));
            }
            if k.as_str() == "$uniqueDocs" {
                continue;
            }
            // Each shape is parsed as it comes, so a bad one fails even if another follows.
            parse_specifier(k.as_str(), v)?;
            found = Some((k.as_str().to_string(), v));
        }
        let Some((k, v)) = found else {
            return bad("geo query doesn't have any geometry");
        };
        let spec = parse_specifier(&k, v)?;
        if within {
            let region = match spec {
                Spec::Box(r) => Region::Box(r),
                Spec::FlatPolygon(p) => Region::FlatPolygon(p),
                Spec::Center(c, r) => Region::Center(c, r),
                Spec::CenterSphere(cap) => Region::CenterSphere(cap),
                Spec::Shape(s) => {
                    let parts = s.parts();
                    if parts.polygons.is_empty() {
                        return bad(format!(
                            "$within not supported with provided geometry: {wrapped}"
                        ));
                    }
                    Region::Polygons(parts.polygons.into_iter().cloned().collect())
                }
            };
            Ok(GeoMatch::Within(region))
        } else {
            match spec {
                Spec::Shape(s) if s.spherical() => Ok(GeoMatch::Intersects(Some(s))),
                Spec::CenterSphere(_) => Ok(GeoMatch::Intersects(None)),
                _ => bad(format!(
                    "$geoIntersect not supported with provided geometry: {wrapped}"
                )),
            }
        }
    }

    /// Whether one value (reached by the path) satisfies the predicate.
    pub fn matches(&self, v: RawBsonRef<'_>) -> bool {
        if !matches!(v, RawBsonRef::Array(_) | RawBsonRef::Document(_)) {
            return false;
        }
        let Ok(shape) = parse_stored(v) else {
            return false;
        };
        if shape.is_big() {
            return false;
        }
        match self {
            GeoMatch::Within(region) => region.covers(&shape),
            GeoMatch::Intersects(None) => false,
            GeoMatch::Intersects(Some(q)) => shape.spherical() && intersects(q, &shape),
        }
    }
}

/// Slack (radians) added to distance tests of cells, beyond the matcher's own tolerance.
const COVER_SLACK: f64 = 4.0 * sphere::BOUNDARY_TOL;

impl GeoMatch {
    /// The `2dsphere` cells (mixed levels, at most about `max_cells`) holding every location
    /// the predicate can match, or `None` when a `2dsphere` index cannot answer it (the
    /// planar `$box`, `$polygon` and `$center`). A strict-winding polygon gets the six faces.
    pub fn sphere_cover(&self, max_cells: usize, max_level: u32) -> Option<Vec<u64>> {
        let whole = || Some(cells::faces().to_vec());
        match self {
            GeoMatch::Within(Region::CenterSphere(cap)) => {
                let (c, r) = (cap.center, cap.radius + COVER_SLACK);
                if r >= std::f64::consts::PI {
                    return whole();
                }
                Some(cells::cover_sphere(
                    &mut |id| cells::cell_distance(id, c) <= r,
                    max_cells,
                    max_level,
                ))
            }
            GeoMatch::Within(Region::Polygons(polys)) => {
                if polys
                    .iter()
                    .any(|p| p.shell().area() > 2.0 * std::f64::consts::PI)
                {
                    return whole();
                }
                Some(cells::cover_sphere(
                    &mut |id| polys.iter().any(|p| cells::touches_polygon(id, p)),
                    max_cells,
                    max_level,
                ))
            }
            GeoMatch::Within(_) => None,
            GeoMatch::Intersects(None) => Some(Vec::new()),
            GeoMatch::Intersects(Some(q)) => {
                if q.is_big() {
                    return whole();
                }
                Some(cells::cover_sphere(
                    &mut |id| cells::touches_shape(id, q),
                    max_cells,
                    max_level,
                ))
            }
        }
    }

    /// The `2d` cells (of a `[min, max)` square hashed to `bits` bits per axis) holding
    /// every point the predicate can match, or `None` when a `2d` index cannot answer it
    /// (`$geometry` regions and `$geoIntersects`).
    pub fn planar_cover(
        &self,
        min: f64,
        max: f64,
        bits: u32,
        max_cells: usize,
    ) -> Option<Vec<cells::PlanarCell>> {
        let GeoMatch::Within(region) = self else {
            return None;
        };
        let overlaps = |a: ((f64, f64), (f64, f64)), lo: (f64, f64), hi: (f64, f64)| {
            a.0.0 <= hi.0 && lo.0 <= a.1.0 && a.0.1 <= hi.1 && lo.1 <= a.1.1
        };
        let mut touches: Box<dyn FnMut(&cells::PlanarCell) -> bool + '_> = match region {
            Region::Box(r) => Box::new(move |c| overlaps(c.bounds(min, max), r.min, r.max)),
            Region::FlatPolygon(pts) => {
                let lo = pts.iter().fold((f64::INFINITY, f64::INFINITY), |a, p| {
                    (a.0.min(p.0), a.1.min(p.1))
                });
                let hi = pts
                    .iter()
                    .fold((f64::NEG_INFINITY, f64::NEG_INFINITY), |a, p| {
                        (a.0.max(p.0), a.1.max(p.1))
                    });
                Box::new(move |c| overlaps(c.bounds(min, max), lo, hi))
            }
            Region::Center(center, r) => {
                let r = r * (1.0 + 1e-12) + 1e-12;
                Box::new(move |c| {
                    let (lo, hi) = c.bounds(min, max);
                    cells::box_distance(*center, lo, hi) <= r
                })
            }
            Region::CenterSphere(cap) => {
                let center = sphere::to_lng_lat(cap.center);
                let r = cap.radius + COVER_SLACK;
                Box::new(move |c| {
                    let (lo, hi) = c.bounds(min, max);
                    cells::box_sphere_distance_lower(center, lo, hi) <= r
                })
            }
            Region::Polygons(_) => return None,
        };
        Some(cells::cover_planar(&mut *touches, max_cells, bits))
    }
}

fn format_element(name: &str, v: RawBsonRef<'_>) -> String {
    format!("{name}: {}", display::value(v))
}

/// A parsed geo specifier (`$box`, `$center`, `$polygon`, `$centerSphere`, `$geometry`).
enum Spec {
    Box(planar::Rect),
    FlatPolygon(Vec<(f64, f64)>),
    Center((f64, f64), f64),
    CenterSphere(Cap),
    Shape(Shape),
}

fn parse_specifier(name: &str, v: RawBsonRef<'_>) -> PResult<Spec> {
    let known = matches!(
        name,
        "$box" | "$center" | "$polygon" | "$centerSphere" | "$geometry"
    );
    if !known || !matches!(v, RawBsonRef::Array(_) | RawBsonRef::Document(_)) {
        return bad(format!(
            "unknown geo specifier: {}",
            format_element(name, v)
        ));
    }
    let els = elements(v).unwrap_or_default();
    let eoo = RawBsonRef::Undefined;
    let at = |i: usize| els.get(i).copied();
    Ok(match name {
        "$box" => {
            let a = parse_flat_point(at(0).unwrap_or(eoo), false)?;
            let b = parse_flat_point(at(1).unwrap_or(eoo), false)?;
            Spec::Box(planar::Rect::new(a, b))
        }
        "$polygon" => {
            let pts = els
                .iter()
                .map(|p| parse_flat_point(*p, false))
                .collect::<PResult<Vec<_>>>()?;
            if pts.len() < 3 {
                return bad("Polygon must have at least 3 points");
            }
            Spec::FlatPolygon(pts)
        }
        "$center" | "$centerSphere" => {
            let c = parse_flat_point(at(0).unwrap_or(eoo), false)?;
            let center = if name == "$centerSphere" {
                Some(to_sphere(c.0, c.1)?)
            } else {
                None
            };
            let r = at(1).and_then(number);
            let r = match r {
                Some(r) if r >= 0.0 => r,
                _ => return bad("radius must be a non-negative number"),
            };
            if els.len() > 2 {
                return bad("Only 2 fields allowed for circular region");
            }
            match center {
                Some(center) => Spec::CenterSphere(Cap { center, radius: r }),
                None => Spec::Center(c, r),
            }
        }
        _ => {
            let RawBsonRef::Document(d) = v else {
                let (x, y) = parse_flat_point(v, false)?;
                return Ok(Spec::Shape(legacy_point(x, y)));
            };
            if first_value(d).is_some_and(is_number) {
                let (x, y) = parse_flat_point(v, false)?;
                return Ok(Spec::Shape(legacy_point(x, y)));
            }
            Spec::Shape(parse_geojson(d)?)
        }
    })
}

impl Region {
    fn covers(&self, shape: &Shape) -> bool {
        let flat_point = match shape {
            Shape::Point { flat, .. } => Some(*flat),
            _ => None,
        };
        match self {
            Region::Box(r) => flat_point.is_some_and(|p| r.contains(p)),
            Region::FlatPolygon(poly) => {
                flat_point.is_some_and(|p| planar::polygon_contains(poly, p))
            }
            Region::Center(c, r) => flat_point.is_some_and(|p| planar::distance_within(*c, p, *r)),
            Region::CenterSphere(cap) => {
                if !shape.spherical() {
                    return false;
                }
                let parts = shape.parts();
                parts.points.iter().all(|&p| cap.covers_point(p))
                    && parts.lines.iter().all(|l| cap.covers_vertices(l))
                    && parts
                        .polygons
                        .iter()
                        .all(|poly| poly.loops.iter().all(|l| cap.covers_vertices(l.vertices())))
            }
            Region::Polygons(polys) => {
                if !shape.spherical() {
                    return false;
                }
                let parts = shape.parts();
                parts
                    .points
                    .iter()
                    .all(|&p| polys.iter().any(|q| q.covers_point(p)))
                    && parts
                        .lines
                        .iter()
                        .all(|l| polys.iter().any(|q| q.covers_line(l)))
                    && parts
                        .polygons
                        .iter()
                        .all(|o| polys.iter().any(|q| q.covers_polygon(o)))
            }
        }
    }
}

/// The angle (radians) from `p` to the nearest point of a spherical shape (0 inside a
/// polygon), `None` when the shape is not on the sphere.
pub fn sphere_distance(shape: &Shape, p: V3) -> Option<f64> {
    if !shape.spherical() {
        return None;
    }
    let parts = shape.parts();
    let mut best = f64::INFINITY;
    for &q in &parts.points {
        best = best.min(sphere::angle(p, q));
    }
    for l in &parts.lines {
        for w in l.windows(2) {
            best = best.min(sphere::dist_to_edge(p, w[0], w[1]));
        }
    }
    for g in &parts.polygons {
        if g.contains_interior(p) {
            return Some(0.0);
        }
        for (a, b) in g.edges() {
            best = best.min(sphere::dist_to_edge(p, a, b));
        }
    }
    best.is_finite().then_some(best)
}

/// Whether two spherical geometries share a point.
fn intersects(a: &Shape, b: &Shape) -> bool {
    let (pa, pb) = (a.parts(), b.parts());
    let point_point = |p: V3, q: V3| sphere::leaf_cell(p) == sphere::leaf_cell(q);
    for &p in &pa.points {
        if pb.points.iter().any(|&q| point_point(p, q))
            || pb.lines.iter().any(|l| sphere::line_touches_point(l, p))
            || pb.polygons.iter().any(|g| g.covers_point(p))
        {
            return true;
        }
    }
    for l in &pa.lines {
        if pb.points.iter().any(|&q| sphere::line_touches_point(l, q))
            || pb.lines.iter().any(|m| sphere::lines_intersect(l, m))
            || pb.polygons.iter().any(|g| g.intersects_line(l))
        {
            return true;
        }
    }
    for g in &pa.polygons {
        if pb.points.iter().any(|&q| g.covers_point(q))
            || pb.lines.iter().any(|m| g.intersects_line(m))
            || pb.polygons.iter().any(|h| g.intersects_polygon(h))
        {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests;
