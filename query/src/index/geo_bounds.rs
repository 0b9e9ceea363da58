//! Bounds of geo predicates over `2dsphere` and `2d` indexes (MongoDB's `S2` / `2d`
//! index-bounds builders).
//!
//! - `2dsphere`: a `$geoWithin` / `$geoIntersects` on a `"2dsphere"` field becomes the cells of
//!   the region's covering ([`crate::geo::GeoMatch::sphere_cover`], at most
//!   [`QUERY_MAX_CELLS`]): for each cell the range of its descendants and itself (where
//!   points and small shapes are keyed), plus each of its ancestors as a point (where larger
//!   shapes are keyed), as `NumberLong` intervals — what mongod's explain prints for such a
//!   scan.
//! - `2d`: a `$geoWithin` with `$box`, `$polygon`, `$center` or `$centerSphere` on the `2d`
//!   field becomes the geohash ranges of the region's planar covering, as `BinData(128, …)`
//!   intervals.
//! - Ordinary fields of a compound geo index take the usual bounds of the filter.
//!
//! A geo index has no entry for a document without a location, so it answers a query only
//! when some predicate bounds a geo field ([`geo_bounds`] is `None` otherwise). The bounds are
//! never exact: the filter is always checked again on the fetched document.
//!
//! Invariant (soundness): every document the predicate matches has an entry inside the
//! bounds, because the coverings are conservative and an entry's cell either contains a
//! covering cell (an ancestor) or lies inside one (a descendant).

use bson::{RawBson, RawBsonRef};
use cairn_storage::index::IndexMeta;

use super::bounds::{IndexBounds, Interval, build, flatten, unionize};
use super::{geo_keys, key_components, spec};
use crate::filter::{Expr, PathExpr, Predicate};
use crate::geo::GeoMatch;
use crate::geo::cells::{self, PlanarCell};

/// Cells at most in a query's covering (mongod's S2 query coverer uses 20 as well).
pub const QUERY_MAX_CELLS: usize = 20;

/// The kind of geo index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GeoKind {
    /// `2dsphere`.
    Sphere,
    /// `2d` with its `bits`, `min` and `max`.
    Flat {
        /// Bits per axis.
        bits: u32,
        /// Lower bound of both axes.
        min: f64,
        /// Upper bound (exclusive).
        max: f64,
    },
}

/// The geo kind of an index (`None` for other indexes).
pub fn geo_kind(index: &IndexMeta) -> Option<GeoKind> {
    let pattern = index.key_pattern()?;
    match geo_keys::geo_plugin(pattern)? {
        "2d" => {
            let (bits, min, max) = geo_keys::two_d_params(&index.spec);
            Some(GeoKind::Flat { bits, min, max })
        }
        _ => Some(GeoKind::Sphere),
    }
}

/// The positions of the key pattern's geo components (`"2dsphere"`, or the leading `"2d"`).
pub fn geo_fields(index: &IndexMeta) -> Vec<usize> {
    let Some(p) = index.key_pattern() else {
        return Vec::new();
    };
    p.iter()
        .flatten()
        .enumerate()
        .filter(|(n, (_, v))| match v {
            RawBsonRef::String("2dsphere") => true,
            RawBsonRef::String("2d") => *n == 0,
            _ => false,
        })
        .map(|(n, _)| n)
        .collect()
}

/// `NumberLong` intervals of a sphere covering: each cell's descendants and its ancestors.
pub fn sphere_intervals(cover: &[u64]) -> Vec<Interval> {
    let mut ivs = Vec::with_capacity(cover.len() * 2);
    for &c in cover {
        let (lo, hi) = cells::descendants(c);
        ivs.push(Interval::new(
            RawBson::Int64(lo as i64),
            true,
            RawBson::Int64(hi as i64),
            true,
        ));
    }
    for a in cells::ancestors(cover) {
        ivs.push(Interval::point(RawBson::Int64(a as i64)));
    }
    unionize(ivs)
}

fn hash_value(h: u64) -> RawBson {
    RawBson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::UserDefined(128),
        bytes: h.to_be_bytes().to_vec(),
    })
}

/// `BinData(128, …)` intervals of a planar covering.
pub fn planar_intervals(cover: &[PlanarCell]) -> Vec<Interval> {
    let ivs = cover
        .iter()
        .map(|c| {
            let (lo, hi) = c.hash_range();
            Interval::new(hash_value(lo), true, hash_value(hi), true)
        })
        .collect();
    unionize(ivs)
}

/// The bounds of `expr` over a geo index with the geo field at `field` replaced: the ordinary
/// fields' bounds from the filter (what a `$near` scan keeps from ring to ring).
pub fn base_bounds(expr: &Expr, index: &IndexMeta) -> Option<IndexBounds> {
    let comps = index.key_pattern().map(key_components).unwrap_or_default();
    if comps.is_empty() {
        return None;
    }
    if let Some(pf) = index.partial_filter() {
        let filter = spec::parse_partial_filter(pf).ok()?;
        if !super::bounds::implies(expr, filter.expr()) {
            return None;
        }
    }
    let mut b = build(expr, comps, index.multikey);
    // Whatever `build` made of predicates on geo fields does not apply to cell keys.
    for n in geo_fields(index) {
        if let Some(f) = b.fields.get_mut(n) {
            f.intervals = vec![Interval::all()];
        }
    }
    Some(b)
}

/// The geo predicate on `path` in the filter's top-level conjunction.
fn geo_predicate<'e>(conj: &[&'e Expr], path: &str) -> Option<&'e GeoMatch> {
    conj.iter().find_map(|c| match c {
        Expr::Path(PathExpr {
            path: p,
            pred: Predicate::Geo(g),
        }) if p.as_str() == path => Some(&**g),
        _ => None,
    })
}

/// Bounds of `expr` over a geo index, or `None` when no `$geoWithin`/`$geoIntersects` the
/// index can answer bounds one of its geo fields (see the module documentation).
pub fn geo_bounds(expr: &Expr, index: &IndexMeta) -> Option<IndexBounds> {
    let kind = geo_kind(index)?;
    let mut b = base_bounds(expr, index)?;
    let mut conj = Vec::new();
    flatten(expr, &mut conj);
    let mut bounded = false;
    for n in geo_fields(index) {
        let Some(f) = b.fields.get_mut(n) else {
            continue;
        };
        let Some(g) = geo_predicate(&conj, &f.path) else {
            continue;
        };
        let ivs = match kind {
            GeoKind::Sphere => g
                .sphere_cover(QUERY_MAX_CELLS, geo_keys::FINEST_LEVEL)
                .map(|c| sphere_intervals(&c)),
            GeoKind::Flat { bits, min, max } => g
                .planar_cover(min, max, bits, QUERY_MAX_CELLS)
                .map(|c| planar_intervals(&c)),
        };
        if let Some(ivs) = ivs {
            f.intervals = ivs;
            bounded = true;
        }
    }
    bounded.then_some(b)
}
