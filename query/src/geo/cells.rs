//! Cells and coverings: the regions a geo index scan reads.
//!
//! - Sphere cells are the `2dsphere` index's S2-style ids (see
//!   [`crate::index::geo_keys`]): a cell is a geodesic quadrilateral on one cube face
//!   ([`cell_polygon`]); its descendants are the ids strictly between `id - lsb` and
//!   `id + lsb` ([`descendants`]), its children the four ids `id - lsb + (2q + 1)·lsb/4`.
//! - Planar cells are the `2d` index's geohash prefixes: level `k` keeps the top `2k` bits
//!   (x bit first), a box of `(max - min) / 2^k` on each side ([`PlanarCell`]).
//! - [`cover_sphere`] / [`cover_planar`] refine from the coarsest cells level by level,
//!   keeping every cell the caller's test says may touch the region, until the next level
//!   would need more than `max_cells` cells or the finest level is reached. The tests must
//!   be conservative (never say "no" for a cell the region touches); then every point of
//!   the region lies in a cell of the covering, which is what makes an index scan over the
//!   covering return everything a collection scan returns.
//!
//! Invariant: never panics; the work is bounded by `4 × max_cells` tests per level.

use super::sphere::{self, Loop, Polygon, V3};

/// The level of a sphere cell id (0 for a face, 30 for a leaf).
pub fn level(id: u64) -> u32 {
    let tz = id.trailing_zeros().min(60);
    (60 - tz) / 2
}

/// The lowest set bit of a cell id.
fn lsb(id: u64) -> u64 {
    id & id.wrapping_neg()
}

/// The inclusive id range of a cell's strict descendants and itself: `[id - lsb + 1, id +
/// lsb - 1]`.
pub fn descendants(id: u64) -> (u64, u64) {
    let l = lsb(id);
    (id - l + 1, id + l - 1)
}

/// The parent of a cell (the cell itself at level 0).
pub fn parent(id: u64) -> u64 {
    let l = lsb(id);
    if level(id) == 0 {
        return id;
    }
    let pl = l << 2;
    (id & !((pl << 1) - 1)) | pl
}

/// The four children of a cell (none for a leaf).
pub fn children(id: u64) -> [u64; 4] {
    let l = lsb(id);
    let q = l >> 2;
    let base = id - l;
    [base + q, base + 3 * q, base + 5 * q, base + 7 * q]
}

/// The six face cells.
pub fn faces() -> [u64; 6] {
    std::array::from_fn(|f| ((f as u64) << 61) | (1u64 << 60))
}

/// `(face, i0, j0, size)` of a cell: its lower leaf coordinates and side in leaves.
fn face_ij(id: u64) -> (u8, u32, u32, u32) {
    let face = (id >> 61) as u8;
    let lv = level(id);
    let (mut i, mut j) = (0u32, 0u32);
    for k in 0..lv {
        let shift = 59 - 2 * k;
        let q = (id >> shift) & 3;
        i |= ((q >> 1) as u32 & 1) << (29 - k);
        j |= (q as u32 & 1) << (29 - k);
    }
    (face, i, j, 1u32 << (30 - lv))
}

fn st_to_uv(s: f64) -> f64 {
    if s >= 0.5 {
        (4.0 * s * s - 1.0) / 3.0
    } else {
        (1.0 - 4.0 * (1.0 - s) * (1.0 - s)) / 3.0
    }
}

/// The unit vector at face coordinates `(u, v)` (the inverse of [`sphere::leaf_cell`]'s
/// projection).
fn face_uv_to_xyz(face: u8, u: f64, v: f64) -> V3 {
    let p = match face {
        0 => [1.0, u, v],
        1 => [-u, 1.0, v],
        2 => [-u, -v, 1.0],
        3 => [-1.0, -v, -u],
        4 => [v, -1.0, -u],
        _ => [v, u, -1.0],
    };
    let n = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
    [p[0] / n, p[1] / n, p[2] / n]
}

/// A cell's four corners (counter-clockwise or not; [`cell_polygon`] orients them).
pub fn cell_vertices(id: u64) -> [V3; 4] {
    let (face, i, j, size) = face_ij(id);
    const MAX: f64 = (1u64 << 30) as f64;
    let s0 = f64::from(i) / MAX;
    let s1 = (f64::from(i) + f64::from(size)) / MAX;
    let t0 = f64::from(j) / MAX;
    let t1 = (f64::from(j) + f64::from(size)) / MAX;
    let (u0, u1, v0, v1) = (st_to_uv(s0), st_to_uv(s1), st_to_uv(t0), st_to_uv(t1));
    [
        face_uv_to_xyz(face, u0, v0),
        face_uv_to_xyz(face, u1, v0),
        face_uv_to_xyz(face, u1, v1),
        face_uv_to_xyz(face, u0, v1),
    ]
}

/// A cell as a polygon (its edges are geodesics: lines of constant u or v on a cube face).
pub fn cell_polygon(id: u64) -> Polygon {
    let mut l = Loop::new(cell_vertices(id).to_vec());
    l.normalize();
    Polygon { loops: vec![l] }
}

/// Whether the cell holds `p`, decided as the index keys it: by `p`'s leaf cell (exact,
/// where a loop test on a cell a metre wide would be at the mercy of rounding).
pub fn contains_point(id: u64, p: V3) -> bool {
    let leaf = crate::index::geo_keys::point_cell(p, 30);
    let (lo, hi) = descendants(id);
    (lo..=hi).contains(&leaf)
}

/// The cell's edges.
fn cell_edges(id: u64) -> [(V3, V3); 4] {
    let v = cell_vertices(id);
    [(v[0], v[1]), (v[1], v[2]), (v[2], v[3]), (v[3], v[0])]
}

/// The angular distance (radians) from `p` to the closed cell (0 inside it).
pub fn cell_distance(id: u64, p: V3) -> f64 {
    if contains_point(id, p) {
        return 0.0;
    }
    cell_edges(id)
        .iter()
        .map(|&(a, b)| sphere::dist_to_edge(p, a, b))
        .fold(f64::INFINITY, f64::min)
}

/// Whether a point touches the cell (inside it, or within the matcher's tolerance of it).
pub fn touches_point(id: u64, p: V3) -> bool {
    cell_distance(id, p) <= 2.0 * sphere::BOUNDARY_TOL
}

/// Whether a polyline touches the cell.
pub fn touches_line(id: u64, line: &[V3]) -> bool {
    if line.iter().any(|&p| touches_point(id, p)) {
        return true;
    }
    let edges = cell_edges(id);
    line.windows(2).any(|w| {
        edges
            .iter()
            .any(|&(c, d)| sphere::edges_intersect(w[0], w[1], c, d))
    })
}

/// Whether a polygon (closed) touches the cell: a corner of the cell in the polygon, a
/// vertex of the polygon in the cell, or crossing edges.
pub fn touches_polygon(id: u64, poly: &Polygon) -> bool {
    if cell_vertices(id).iter().any(|&v| poly.covers_point(v)) {
        return true;
    }
    if poly
        .loops
        .iter()
        .any(|l| l.vertices().iter().any(|&v| touches_point(id, v)))
    {
        return true;
    }
    let edges = cell_edges(id);
    poly.edges().any(|(a, b)| {
        edges
            .iter()
            .any(|&(c, d)| sphere::edges_intersect(a, b, c, d))
    })
}

/// Whether a spherical shape touches the cell.
pub fn touches_shape(id: u64, shape: &super::Shape) -> bool {
    let parts = shape.parts();
    parts.points.iter().any(|&p| touches_point(id, p))
        || parts.lines.iter().any(|l| touches_line(id, l))
        || parts.polygons.iter().any(|g| touches_polygon(id, g))
}

/// Whether every point of the cell lies within `radius` (radians, below π/2) of `c`.
pub fn cell_within(id: u64, c: V3, radius: f64) -> bool {
    radius < std::f64::consts::FRAC_PI_2
        && cell_vertices(id)
            .iter()
            .all(|&v| sphere::angle(c, v) <= radius)
}

/// A covering of a region on the sphere, as cell ids of one level at most `max_level`:
/// `touches(cell)` must be true for every cell the region touches.
pub fn cover_sphere(
    touches: &mut dyn FnMut(u64) -> bool,
    max_cells: usize,
    max_level: u32,
) -> Vec<u64> {
    let current: Vec<u64> = faces().into_iter().filter(|&f| touches(f)).collect();
    refine(
        current,
        children,
        &mut |c| touches(*c),
        max_cells,
        max_level.min(30),
    )
}

/// Refines `current` (cells of one level) level by level while the cells that `touches`
/// keeps number at most `max_cells`, down to `levels` more levels. A region that touches a
/// cell touches one of its children, so an empty refinement only comes from rounding and
/// the coarser covering is kept (still sound).
fn refine<C, const N: usize>(
    mut current: Vec<C>,
    children: impl Fn(C) -> [C; N],
    touches: &mut dyn FnMut(&C) -> bool,
    max_cells: usize,
    levels: u32,
) -> Vec<C>
where
    C: Copy,
{
    for _ in 0..levels {
        let mut next = Vec::with_capacity(current.len() * N);
        for &c in &current {
            next.extend(children(c).into_iter().filter(|ch| touches(ch)));
            if next.len() > max_cells {
                return current;
            }
        }
        if next.is_empty() {
            return current;
        }
        current = next;
    }
    current
}

/// The ancestors (levels `0..level`) of the cells, sorted and deduplicated: where larger
/// geometries' keys may sit.
pub fn ancestors(cells: &[u64]) -> Vec<u64> {
    let mut out = Vec::new();
    for &c in cells {
        let mut x = c;
        while level(x) > 0 {
            x = parent(x);
            out.push(x);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A `2d` cell: the top `2 × level` bits of a geohash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanarCell {
    /// The hash prefix (lower bits zero).
    pub hash: u64,
    /// Bits of x (and of y) fixed.
    pub level: u32,
}

impl PlanarCell {
    /// The whole square.
    pub fn root() -> PlanarCell {
        PlanarCell { hash: 0, level: 0 }
    }

    /// The four children (x bit first).
    pub fn children(&self) -> [PlanarCell; 4] {
        let shift = 62 - 2 * self.level;
        std::array::from_fn(|q| PlanarCell {
            hash: self.hash | ((q as u64) << shift),
            level: self.level + 1,
        })
    }

    /// The inclusive range of hashes inside the cell.
    pub fn hash_range(&self) -> (u64, u64) {
        let free = 64 - 2 * self.level;
        let ones = if free >= 64 {
            u64::MAX
        } else {
            (1u64 << free) - 1
        };
        (self.hash, self.hash | ones)
    }

    /// The cell's box `((x0, y0), (x1, y1))` in the index's coordinates (half-open on the
    /// upper side).
    pub fn bounds(&self, min: f64, max: f64) -> ((f64, f64), (f64, f64)) {
        let (mut x, mut y) = (0u64, 0u64);
        for k in 0..self.level {
            let b = self.hash >> (62 - 2 * k);
            x = (x << 1) | ((b >> 1) & 1);
            y = (y << 1) | (b & 1);
        }
        let side = (max - min) / (1u64 << self.level) as f64;
        let (x0, y0) = (min + x as f64 * side, min + y as f64 * side);
        ((x0, y0), (x0 + side, y0 + side))
    }
}

/// A covering of a planar region by `2d` cells of one level at most `max_level`.
pub fn cover_planar(
    touches: &mut dyn FnMut(&PlanarCell) -> bool,
    max_cells: usize,
    max_level: u32,
) -> Vec<PlanarCell> {
    let root = PlanarCell::root();
    let current = if touches(&root) {
        vec![root]
    } else {
        Vec::new()
    };
    refine(
        current,
        |c| c.children(),
        touches,
        max_cells,
        max_level.min(32),
    )
}

/// The planar distance from `p` to a box (0 inside).
pub fn box_distance(p: (f64, f64), lo: (f64, f64), hi: (f64, f64)) -> f64 {
    let dx = (lo.0 - p.0).max(0.0).max(p.0 - hi.0);
    let dy = (lo.1 - p.1).max(0.0).max(p.1 - hi.1);
    dx.hypot(dy)
}

/// A lower bound of the spherical distance (radians) from the longitude/latitude `c`
/// (degrees) to any point of a longitude/latitude box: by the haversine formula,
/// `hav(d) = hav(Δφ) + cos φ1 cos φ2 hav(Δλ)`, each term at its least over the box.
pub fn box_sphere_distance_lower(c: (f64, f64), lo: (f64, f64), hi: (f64, f64)) -> f64 {
    let (lo_lat, hi_lat) = (lo.1.clamp(-90.0, 90.0), hi.1.clamp(-90.0, 90.0));
    let dlat = (lo_lat - c.1).max(0.0).max(c.1 - hi_lat).to_radians();
    let lng = c.0;
    let dlng = if lng >= lo.0 && lng <= hi.0 {
        0.0
    } else {
        let gap = |a: f64| {
            let d = (a - lng).abs() % 360.0;
            d.min(360.0 - d)
        };
        if hi.0 - lo.0 >= 360.0 {
            0.0
        } else {
            gap(lo.0).min(gap(hi.0))
        }
    }
    .to_radians();
    let hav = |x: f64| (x / 2.0).sin().powi(2);
    let max_abs_lat = lo_lat.abs().max(hi_lat.abs());
    // cos φ2 is least at the box's latitude farthest from the equator.
    let min_cos2 = max_abs_lat.to_radians().cos();
    let cos1 = c.1.to_radians().cos().max(0.0);
    let h = hav(dlat) + cos1 * min_cos2.max(0.0) * hav(dlng);
    2.0 * h.clamp(0.0, 1.0).sqrt().asin()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::geo_keys::{FINEST_LEVEL, point_cell};

    #[test]
    fn children_parents_levels() {
        let p = sphere::from_lng_lat(-73.97, 40.77);
        for lv in 0..FINEST_LEVEL {
            let c = point_cell(p, lv);
            assert_eq!(level(c), lv);
            let kids = children(c);
            assert!(kids.contains(&point_cell(p, lv + 1)), "level {lv}");
            for k in kids {
                assert_eq!(parent(k), c);
                let (lo, hi) = descendants(c);
                assert!(k >= lo && k <= hi);
            }
        }
        assert_eq!(faces().len(), 6);
        assert!(faces().iter().all(|&f| level(f) == 0));
    }

    #[test]
    fn cell_polygons_hold_their_points() {
        for (lng, lat) in [
            (-73.97, 40.77),
            (0.0, 0.0),
            (179.9, -89.0),
            (-120.0, 10.0),
            (45.0, 80.0),
            (100.0, -45.0),
        ] {
            let p = sphere::from_lng_lat(lng, lat);
            for lv in [0, 3, 10, 20] {
                let c = point_cell(p, lv);
                assert!(
                    cell_distance(c, p) < 1e-12,
                    "({lng}, {lat}) level {lv}: {}",
                    cell_distance(c, p)
                );
            }
        }
    }

    #[test]
    fn sphere_cover_holds_the_region() {
        let c = sphere::from_lng_lat(10.0, 20.0);
        let r = 0.01;
        let cells = cover_sphere(&mut |id| cell_distance(id, c) <= r, 20, FINEST_LEVEL);
        assert!(!cells.is_empty() && cells.len() <= 20);
        for k in 0..100 {
            let a = f64::from(k) * 0.7;
            let q = sphere::from_lng_lat(10.0 + 0.5 * a.cos(), 20.0 + 0.5 * a.sin());
            if sphere::angle(c, q) > r {
                continue;
            }
            let leaf = point_cell(q, FINEST_LEVEL);
            assert!(cells.iter().any(|&x| {
                let (lo, hi) = descendants(x);
                leaf >= lo && leaf <= hi
            }));
        }
    }

    #[test]
    fn planar_cells() {
        let root = PlanarCell::root();
        assert_eq!(root.hash_range(), (0, u64::MAX));
        let kids = root.children();
        // x bit first: child 2 is the right half, bottom.
        let ((x0, y0), (x1, y1)) = kids[2].bounds(-180.0, 180.0);
        assert_eq!((x0, y0, x1, y1), (0.0, -180.0, 180.0, 0.0));
        let h = crate::index::geo_keys::geohash(10.0, -20.0, 26, -180.0, 180.0);
        let (lo, hi) = kids[2].hash_range();
        assert!(h >= lo && h <= hi);
        assert!(box_distance((0.0, 0.0), (1.0, 1.0), (2.0, 2.0)) - 2f64.sqrt() < 1e-12);
        let d = box_sphere_distance_lower((0.0, 0.0), (10.0, -1.0), (20.0, 1.0));
        assert!(d > 0.0 && d <= 10f64.to_radians() + 1e-12);
    }
}
