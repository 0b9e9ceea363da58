//! Index entries of geospatial indexes: `2dsphere` (version 3) and `2d`.
//!
//! Entry layout, byte by byte (each part is storage's order-preserving `E(v)` encoding, so
//! entries sort and range-scan like every other index key; the storage key is then
//! `X | index id | <these bytes> | E(_id)` as for B-tree indexes):
//! - `2dsphere`: for each key-pattern component in order, `E(NumberLong(cell))` for a
//!   `"2dsphere"` component and `E(v)` (inverted when descending) for an ordinary one. `cell`
//!   is a 64-bit S2-style cell id read as a signed integer: bits 63–61 the cube face (0–5),
//!   then two bits per level (level 1 first) giving the quadrant of the child cell — the
//!   quadrant is `(i bit << 1) | j bit` of the face's (i, j) leaf coordinates (Z-order, where
//!   S2 uses a Hilbert curve) — then a single 1 bit marking the level, then zeros. A cell's
//!   descendants are exactly the ids in `(id - lsb, id + lsb)`, `lsb` being its lowest set
//!   bit, so a region's cells are key ranges. Points are keyed by their cell at
//!   [`FINEST_LEVEL`]; lines and polygons by the cells at one level (chosen from the shape's
//!   extent, at most [`FINEST_LEVEL`]) that hold their vertices, points sampled along their
//!   edges every quarter cell, and, for polygons, points of a grid over their
//!   longitude/latitude box that they contain. `values` holds `{"0": NumberLong(cell), …}`.
//!   A document whose every `2dsphere` field is missing or null has no entry (index version
//!   2 and later); one that is not a geometry is refused with 16755 `Can't extract geo keys`.
//!   Ordinary components take every element of an array they reach (missing is null, an empty
//!   array undefined); the entries are the product of the components' values.
//! - `2d`: the first component is the location: `E(BinData(128, hash))`, `hash` the 8 bytes
//!   big-endian of MongoDB's GeoHash — x and y scaled from `[min, max)` onto 32 bits each,
//!   interleaved x bit first from the top, keeping the top `2 × bits` bits. Other
//!   components are `E(v)` of the value at their path (arrays whole, missing null). A location
//!   holds one point (an array or object whose first value is a number) or several (an array
//!   of points); no entry when the field is missing or not an object. Errors: 13026 (not
//!   numbers), 13027 (outside `[min, max)`), 16804 (an element of a point list is not one).
//!
//! Invariant: never panics; the number of cells per geometry is bounded by [`MAX_CELLS`].

use std::collections::BTreeSet;

use bson::raw::CStr;
use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::display;
use cairn_storage::index::{IndexEntry, IndexKeys, IndexMeta};
use cairn_storage::keys::encode_value;

use super::{IndexError, number};
use crate::geo::sphere::{self, V3};
use crate::geo::{self, Shape};

/// The level points are indexed at (about 1 m cells, MongoDB's `finestIndexedLevel`).
pub const FINEST_LEVEL: u32 = 23;

/// Cells at most per geometry (MongoDB's `maxKeysPerInsert` is 200).
pub const MAX_CELLS: usize = 200;

/// "Can't extract geo keys".
pub const CANT_EXTRACT: i32 = 16755;

/// The index plugin named by a key pattern's string values, when it is a geo one.
pub fn geo_plugin(pattern: &RawDocument) -> Option<&'static str> {
    if numbers_only(pattern) {
        return None;
    }
    for (_, v) in pattern.iter().flatten() {
        match v {
            RawBsonRef::String("2dsphere") => return Some("2dsphere"),
            RawBsonRef::String("2d") => return Some("2d"),
            _ => {}
        }
    }
    None
}

/// Whether every value of a key pattern is a number (double, int32, int64) — the usual
/// ascending and descending patterns, which name no plugin — read by the light element walk
/// ([`cairn_storage::elements`]); false for anything else (then the bson iterator decides).
pub(crate) fn numbers_only(pattern: &RawDocument) -> bool {
    use cairn_storage::elements::{Elements, Step};
    let mut walk = Elements::new(pattern.as_bytes());
    loop {
        match walk.step() {
            Step::Element(e) if matches!(e.kind, 0x01 | 0x10 | 0x12) => {}
            Step::End => return true,
            _ => return false,
        }
    }
}

/// The entries of `doc` for a geo index.
pub fn generate(
    index: &IndexMeta,
    pattern: &RawDocument,
    doc: &RawDocument,
) -> Result<IndexKeys, IndexError> {
    match geo_plugin(pattern) {
        Some("2d") => two_d_keys(index, pattern, doc),
        _ => sphere_keys(pattern, doc),
    }
}

/// The S2-style id of the cell at `level` holding the leaf cell `(face, i, j)`.
pub fn cell_id(face: u8, i: u32, j: u32, level: u32) -> u64 {
    let mut pos: u64 = 0;
    for k in 0..level {
        let shift = 29 - k;
        let q = (u64::from((i >> shift) & 1) << 1) | u64::from((j >> shift) & 1);
        pos = (pos << 2) | q;
    }
    let used = 2 * level;
    let body = if used == 0 { 0 } else { pos << (60 - used) };
    (u64::from(face) << 61) | (body << 1) | (1u64 << (60 - used))
}

/// The cell at `level` holding a point.
pub fn point_cell(p: V3, level: u32) -> u64 {
    let (f, i, j) = sphere::leaf_cell(p);
    cell_id(f, i, j, level)
}

fn err_cant_extract(doc: &RawDocument, reason: &str) -> IndexError {
    IndexError::new(
        CANT_EXTRACT,
        format!(
            "Can't extract geo keys: {}  {reason}",
            display::document(doc)
        ),
    )
}

/// Values found at `path`: intermediate arrays are entered element by element; the last
/// value is returned as is (arrays whole).
fn values_along<'a>(d: &'a RawDocument, path: &str, out: &mut Vec<RawBsonRef<'a>>, depth: usize) {
    if depth > 64 {
        return;
    }
    let (head, rest) = match path.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let Ok(Some(v)) = d.get(head) else { return };
    let Some(rest) = rest else {
        out.push(v);
        return;
    };
    match v {
        RawBsonRef::Document(sub) => values_along(sub, rest, out, depth + 1),
        RawBsonRef::Array(a) => {
            for el in a.into_iter().flatten() {
                if let RawBsonRef::Document(sub) = el {
                    values_along(sub, rest, out, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// The ordinary component's values (arrays expanded; missing null; empty array undefined).
fn literal_values<'a>(d: &'a RawDocument, path: &str) -> Vec<RawBsonRef<'a>> {
    let mut found = Vec::new();
    values_along(d, path, &mut found, 0);
    let mut out = Vec::new();
    for v in found {
        match v {
            RawBsonRef::Array(a) => {
                let before = out.len();
                out.extend(a.into_iter().flatten());
                if out.len() == before {
                    out.push(RawBsonRef::Undefined);
                }
            }
            v => out.push(v),
        }
    }
    if out.is_empty() {
        out.push(RawBsonRef::Null);
    }
    out
}

fn sphere_keys(pattern: &RawDocument, doc: &RawDocument) -> Result<IndexKeys, IndexError> {
    let mut per_component: Vec<(Vec<RawBson>, bool)> = Vec::new();
    let mut any_geo = false;
    for (k, v) in pattern.iter().flatten() {
        let path = k.as_str();
        if matches!(v, RawBsonRef::String("2dsphere")) {
            let mut found = Vec::new();
            values_along(doc, path, &mut found, 0);
            let mut cells = BTreeSet::new();
            for g in found {
                if matches!(g, RawBsonRef::Null | RawBsonRef::Undefined) {
                    continue;
                }
                let shape = geo::parse_stored(g).map_err(|r| err_cant_extract(doc, &r))?;
                shape_cells(&shape, &mut cells).map_err(|r| err_cant_extract(doc, &r))?;
            }
            if !cells.is_empty() {
                any_geo = true;
            }
            let vals: Vec<RawBson> = cells
                .into_iter()
                .map(|c| RawBson::Int64(c as i64))
                .collect();
            per_component.push((vals, false));
        } else {
            let desc = number(v).is_some_and(|n| n < 0.0);
            let vals = literal_values(doc, path)
                .into_iter()
                .map(RawBson::from)
                .collect();
            per_component.push((vals, desc));
        }
    }
    if !any_geo {
        return Ok(IndexKeys::default());
    }
    // The product of the components' values.
    let mut rows: Vec<Vec<usize>> = vec![Vec::new()];
    for (vals, _) in &per_component {
        if vals.is_empty() {
            return Ok(IndexKeys::default());
        }
        let mut next = Vec::with_capacity(rows.len() * vals.len());
        for r in &rows {
            for i in 0..vals.len() {
                let mut r2 = r.clone();
                r2.push(i);
                next.push(r2);
            }
        }
        if next.len() > 100_000 {
            return Err(err_cant_extract(doc, "too many index keys"));
        }
        rows = next;
    }
    let mut entries = Vec::with_capacity(rows.len());
    for r in rows {
        let mut key = Vec::new();
        let mut values = RawDocumentBuf::new();
        for (n, (ix, (vals, desc))) in r.iter().zip(&per_component).enumerate() {
            let v = vals[*ix].as_raw_bson_ref();
            encode_value(&mut key, v, *desc)
                .map_err(|e| IndexError::new(super::code::BAD_VALUE, e.to_string()))?;
            let name = n.to_string();
            let cname = <&CStr>::try_from(name.as_str())
                .map_err(|e| IndexError::new(super::code::BAD_VALUE, e.to_string()))?;
            values.append(cname, v);
        }
        entries.push(IndexEntry { key, values });
    }
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries.dedup_by(|a, b| a.key == b.key);
    let multikey = entries.len() > 1;
    Ok(IndexKeys { entries, multikey })
}

/// The cells of a shape's covering (see the module documentation).
fn shape_cells(shape: &Shape, out: &mut BTreeSet<u64>) -> Result<(), String> {
    match shape {
        Shape::Point { sphere, flat, .. } => {
            let Some(p) = sphere else {
                return Err(format!(
                    "longitude/latitude is out of bounds, lng: {} lat: {}",
                    display::format_g(flat.0),
                    display::format_g(flat.1)
                ));
            };
            out.insert(point_cell(*p, FINEST_LEVEL));
        }
        Shape::MultiPoint(ps) => {
            for p in ps {
                out.insert(point_cell(*p, FINEST_LEVEL));
            }
        }
        Shape::Line(l) => cover_lines(&[l.as_slice()], &[], out),
        Shape::MultiLine(ls) => {
            let ls: Vec<&[V3]> = ls.iter().map(Vec::as_slice).collect();
            cover_lines(&ls, &[], out);
        }
        Shape::Polygon { polygon, big } => {
            if *big {
                return Err("Strict winding order is only supported for queries".into());
            }
            cover_lines(&[], std::slice::from_ref(polygon), out);
        }
        Shape::MultiPolygon(ps) => cover_lines(&[], ps, out),
        Shape::Collection(c) => {
            for s in c {
                shape_cells(s, out)?;
            }
        }
    }
    Ok(())
}

/// Cell size (radians) at a level, roughly.
fn cell_size(level: u32) -> f64 {
    (std::f64::consts::FRAC_PI_2) / f64::from(1u32 << level.min(30))
}

fn cover_lines(lines: &[&[V3]], polys: &[sphere::Polygon], out: &mut BTreeSet<u64>) {
    let mut vertices: Vec<V3> = lines.iter().flat_map(|l| l.iter().copied()).collect();
    for p in polys {
        for l in &p.loops {
            vertices.extend_from_slice(l.vertices());
        }
    }
    let Some(&first) = vertices.first() else {
        return;
    };
    let extent = vertices
        .iter()
        .map(|&v| sphere::angle(first, v))
        .fold(0.0, f64::max)
        .max(1e-9);
    // About eight cells across the shape, never finer than points.
    let mut level = 0;
    while level < FINEST_LEVEL && cell_size(level + 1) * 8.0 > extent {
        level += 1;
    }
    loop {
        let mut cells = BTreeSet::new();
        sample_cover(lines, polys, level, &mut cells);
        if cells.len() <= MAX_CELLS || level == 0 {
            out.extend(cells);
            return;
        }
        level -= 1;
    }
}

fn sample_cover(lines: &[&[V3]], polys: &[sphere::Polygon], level: u32, out: &mut BTreeSet<u64>) {
    let step = cell_size(level) / 4.0;
    let edge = |a: V3, b: V3, out: &mut BTreeSet<u64>| {
        let len = sphere::angle(a, b);
        let n = ((len / step).ceil() as usize).clamp(1, 4096);
        for k in 0..=n {
            let t = k as f64 / n as f64;
            let p = slerp(a, b, t);
            out.insert(point_cell(p, level));
        }
    };
    for l in lines {
        for w in l.windows(2) {
            edge(w[0], w[1], out);
        }
    }
    for poly in polys {
        for (a, b) in poly.edges() {
            edge(a, b, out);
        }
        // Interior: a longitude/latitude grid over the shell's box.
        let (mut lo_x, mut lo_y, mut hi_x, mut hi_y) = (180.0f64, 90.0f64, -180.0f64, -90.0f64);
        for &v in poly.shell().vertices() {
            let (x, y) = sphere::to_lng_lat(v);
            lo_x = lo_x.min(x);
            hi_x = hi_x.max(x);
            lo_y = lo_y.min(y);
            hi_y = hi_y.max(y);
        }
        if hi_x - lo_x > 180.0 {
            (lo_x, hi_x) = (-180.0, 180.0);
        }
        let (lo_y, hi_y) = ((lo_y - 1.0).max(-90.0), (hi_y + 1.0).min(90.0));
        let deg = step.to_degrees().max(1e-7);
        let nx = (((hi_x - lo_x) / deg).ceil() as usize).clamp(1, 256);
        let ny = (((hi_y - lo_y) / deg).ceil() as usize).clamp(1, 256);
        for ix in 0..=nx {
            for iy in 0..=ny {
                let x = lo_x + (hi_x - lo_x) * ix as f64 / nx as f64;
                let y = lo_y + (hi_y - lo_y) * iy as f64 / ny as f64;
                let p = sphere::from_lng_lat(x, y);
                if poly.contains_interior(p) {
                    out.insert(point_cell(p, level));
                }
            }
        }
    }
}

fn slerp(a: V3, b: V3, t: f64) -> V3 {
    let w = sphere::angle(a, b);
    if w < 1e-15 {
        return a;
    }
    let s = w.sin();
    let (ka, kb) = (((1.0 - t) * w).sin() / s, (t * w).sin() / s);
    [
        a[0] * ka + b[0] * kb,
        a[1] * ka + b[1] * kb,
        a[2] * ka + b[2] * kb,
    ]
}

/// The `2d` parameters of a specification: `(bits, min, max)`.
pub fn two_d_params(spec: &RawDocument) -> (u32, f64, f64) {
    let get = |k: &str| spec.get(k).ok().flatten().and_then(number);
    let bits = get("bits").map_or(26, |b| b.clamp(1.0, 32.0) as u32);
    (
        bits,
        get("min").unwrap_or(-180.0),
        get("max").unwrap_or(180.0),
    )
}

/// MongoDB's GeoHash of a point, the top `2 × bits` bits kept.
pub fn geohash(x: f64, y: f64, bits: u32, min: f64, max: f64) -> u64 {
    let scaling = 4_294_967_296.0 / (max - min);
    let scale = |v: f64| ((v - min) * scaling).clamp(0.0, 4_294_967_295.0) as u32;
    let (sx, sy) = (scale(x), scale(y));
    let mut h: u64 = 0;
    for k in (0..32).rev() {
        h = (h << 1) | u64::from((sx >> k) & 1);
        h = (h << 1) | u64::from((sy >> k) & 1);
    }
    let keep = 2 * bits.clamp(1, 32);
    if keep >= 64 {
        h
    } else {
        h & !(u64::MAX >> keep)
    }
}

fn two_d_keys(
    index: &IndexMeta,
    pattern: &RawDocument,
    doc: &RawDocument,
) -> Result<IndexKeys, IndexError> {
    let (bits, min, max) = two_d_params(&index.spec);
    let comps: Vec<(String, bool)> = pattern
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str().to_string(), number(v).is_some_and(|n| n < 0.0)))
        .collect();
    let Some((geo_path, _)) = comps.first() else {
        return Ok(IndexKeys::default());
    };
    let mut found = Vec::new();
    values_along(doc, geo_path, &mut found, 0);
    let mut points: Vec<RawBsonRef<'_>> = Vec::new();
    for g in found {
        let els: Vec<RawBsonRef<'_>> = match g {
            RawBsonRef::Array(a) => a.into_iter().flatten().collect(),
            RawBsonRef::Document(d) => d.iter().flatten().map(|(_, v)| v).collect(),
            _ => continue,
        };
        if els.is_empty() {
            continue;
        }
        if number(els[0]).is_some() {
            points.push(g);
        } else {
            for e in els {
                match e {
                    RawBsonRef::Array(_) | RawBsonRef::Document(_) => points.push(e),
                    _ => {
                        return Err(IndexError::new(
                            16804,
                            "location object expected, location array not in correct format",
                        ));
                    }
                }
            }
        }
    }
    let mut hashes = BTreeSet::new();
    for p in points {
        let els: Vec<RawBsonRef<'_>> = match p {
            RawBsonRef::Array(a) => a.into_iter().flatten().collect(),
            RawBsonRef::Document(d) => d.iter().flatten().map(|(_, v)| v).collect(),
            _ => continue,
        };
        if els.is_empty() {
            continue;
        }
        let (Some(x), Some(y)) = (
            els.first().and_then(|v| number(*v)),
            els.get(1).and_then(|v| number(*v)),
        ) else {
            return Err(IndexError::new(
                13026,
                "geo values must be 'legacy coordinate pairs' for 2d indexes",
            ));
        };
        if !(min <= x && x < max && min <= y && y < max) {
            return Err(IndexError::new(
                13027,
                format!(
                    "point not in interval of [ {}, {} ) :: caused by :: {}",
                    display::format_g(min),
                    display::format_g(max),
                    display::value(p)
                ),
            ));
        }
        hashes.insert(geohash(x, y, bits, min, max));
    }
    if hashes.is_empty() {
        return Ok(IndexKeys::default());
    }
    let others: Vec<RawBsonRef<'_>> = comps[1..]
        .iter()
        .map(|(path, _)| {
            let mut f = Vec::new();
            values_along(doc, path, &mut f, 0);
            f.first().copied().unwrap_or(RawBsonRef::Null)
        })
        .collect();
    let mut entries = Vec::new();
    for h in hashes {
        let bin = RawBson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::UserDefined(128),
            bytes: h.to_be_bytes().to_vec(),
        });
        let mut key = Vec::new();
        let mut values = RawDocumentBuf::new();
        let all: Vec<(RawBsonRef<'_>, bool)> = std::iter::once((bin.as_raw_bson_ref(), false))
            .chain(others.iter().zip(&comps[1..]).map(|(v, (_, d))| (*v, *d)))
            .collect();
        for (n, (v, desc)) in all.into_iter().enumerate() {
            encode_value(&mut key, v, desc)
                .map_err(|e| IndexError::new(super::code::BAD_VALUE, e.to_string()))?;
            let name = n.to_string();
            let cname = <&CStr>::try_from(name.as_str())
                .map_err(|e| IndexError::new(super::code::BAD_VALUE, e.to_string()))?;
            values.append(cname, v);
        }
        entries.push(IndexEntry { key, values });
    }
    let multikey = entries.len() > 1;
    Ok(IndexKeys { entries, multikey })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers-only shortcut never changes what the bson iterator finds.
    #[test]
    fn geo_plugin_shortcut_reads_as_the_iterator() {
        let by_iter = |p: &RawDocument| {
            p.iter().flatten().find_map(|(_, v)| match v {
                RawBsonRef::String("2dsphere") => Some("2dsphere"),
                RawBsonRef::String("2d") => Some("2d"),
                _ => None,
            })
        };
        let mut patterns = vec![
            bson::rawdoc! {"a": 1, "b": -1.0_f64, "c": 1_i64},
            bson::rawdoc! {"a": 1, "loc": "2dsphere"},
            bson::rawdoc! {"loc": "2d", "a": 1},
            bson::rawdoc! {"a": "hashed"},
            bson::rawdoc! {"a": true, "loc": "2d"},
            bson::rawdoc! {},
        ];
        // A key that is not UTF-8 ends the iterator's walk before the geo field.
        let mut bytes = bson::rawdoc! {"a": 1, "loc": "2d"}.into_bytes();
        bytes[5] = 0xFF;
        patterns.push(RawDocumentBuf::from_bytes(bytes).unwrap());
        for p in &patterns {
            assert_eq!(geo_plugin(p), by_iter(p), "{p:?}");
        }
        assert!(numbers_only(&patterns[0]) && !numbers_only(&patterns[1]));
    }

    #[test]
    fn cell_ids_nest() {
        let p = sphere::from_lng_lat(-73.97, 40.77);
        let leaf = point_cell(p, 30);
        assert_eq!(leaf & 1, 1);
        for level in [0, 1, 5, 12, 23, 29] {
            let c = point_cell(p, level);
            let lsb = c & c.wrapping_neg();
            assert_eq!(lsb, 1u64 << (60 - 2 * level));
            assert!(leaf > c - lsb && leaf < c + lsb, "level {level}");
        }
        assert_eq!(point_cell(sphere::from_lng_lat(0.0, 0.0), 0), 1u64 << 60);
    }

    #[test]
    fn geohash_bits() {
        // The origin of [-180, 180) maps to the middle: x and y top bits set.
        let h = geohash(0.0, 0.0, 26, -180.0, 180.0);
        assert_eq!(h >> 62, 0b11);
        assert_eq!(h & 0xFFF, 0);
        assert_eq!(geohash(-180.0, -180.0, 32, -180.0, 180.0), 0);
    }
}
