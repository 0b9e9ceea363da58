//! Spherical geometry on the unit sphere: points as unit vectors, great-circle edges, loops,
//! polygons with holes and caps — the predicates MongoDB's 2dsphere semantics need (S2's
//! model: edges are geodesics, a polygon loop is the smaller of the two regions it bounds
//! unless a strict winding order says otherwise).
//!
//! - Distances are angles in radians ([`angle`]); meters are radians × [`EARTH_RADIUS_M`].
//! - A loop's interior is on the left of its edges (counter-clockwise seen from outside the
//!   sphere). Its area comes from the turning angles (Gauss–Bonnet); containment of a point
//!   counts the crossings of an arc from a reference point just inside the loop (next to the
//!   middle of an edge) to the point, retrying another reference when the arc passes too close
//!   to a vertex.
//! - Boundaries: MongoDB tests points as S2 leaf cells (about 1 cm wide), so a point within
//!   [`BOUNDARY_TOL`] of an edge is on it, and a geometry touching another intersects it.
//!   Two points intersect when they fall in the same leaf cell ([`leaf_cell`]).
//!
//! Invariant: every function is total on finite unit vectors (no panic, no division by an
//! unchecked zero); degenerate input (zero-length edges) is handled by the callers' parsers,
//! which drop repeated vertices.

use std::f64::consts::PI;

/// The sphere radius MongoDB uses for meters (`kRadiusOfEarthInMeters`).
pub const EARTH_RADIUS_M: f64 = 6_378_100.0;

/// How close (radians) a point must be to an edge to touch it: about the size of an S2 leaf
/// cell (level 30), which is how MongoDB sees a point.
pub const BOUNDARY_TOL: f64 = 1.5e-9;

/// A point on the unit sphere.
pub type V3 = [f64; 3];

/// The unit vector of a longitude/latitude pair in degrees (already range-checked).
pub fn from_lng_lat(lng: f64, lat: f64) -> V3 {
    let (lat, lng) = (lat.to_radians(), lng.to_radians());
    [lat.cos() * lng.cos(), lat.cos() * lng.sin(), lat.sin()]
}

/// Longitude and latitude in degrees of a unit vector.
pub fn to_lng_lat(p: V3) -> (f64, f64) {
    let lat = p[2].atan2((p[0] * p[0] + p[1] * p[1]).sqrt());
    let lng = p[1].atan2(p[0]);
    (lng.to_degrees(), lat.to_degrees())
}

pub(crate) fn dot(a: V3, b: V3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

pub(crate) fn cross(a: V3, b: V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn norm(a: V3) -> f64 {
    dot(a, a).sqrt()
}

fn scale(a: V3, k: f64) -> V3 {
    [a[0] * k, a[1] * k, a[2] * k]
}

fn add(a: V3, b: V3) -> V3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

fn sub(a: V3, b: V3) -> V3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn normalize(a: V3) -> Option<V3> {
    let n = norm(a);
    (n > 0.0 && n.is_finite()).then(|| scale(a, 1.0 / n))
}

/// The angle between two points (radians, in `[0, π]`), accurate for small and large angles.
pub fn angle(a: V3, b: V3) -> f64 {
    norm(cross(a, b)).atan2(dot(a, b))
}

/// Orientation of the triangle `a, b, c`: positive when counter-clockwise.
fn orient(a: V3, b: V3, c: V3) -> f64 {
    dot(cross(a, b), c)
}

/// The tangent direction at `a` towards `b` (not normalized; zero when `b` is `±a`).
fn tangent(a: V3, b: V3) -> V3 {
    sub(b, scale(a, dot(a, b)))
}

/// The angular distance from `p` to the great-circle arc `a`–`b` (shorter arc).
pub fn dist_to_edge(p: V3, a: V3, b: V3) -> f64 {
    let n = cross(a, b);
    let nn = norm(n);
    if nn > 0.0 {
        // The projection of p falls inside the arc when it is on the inner side of both
        // endpoints' planes.
        let inside_a = dot(cross(n, a), p) >= 0.0;
        let inside_b = dot(cross(b, n), p) >= 0.0;
        if inside_a && inside_b {
            let s = (dot(p, n) / nn).abs().min(1.0);
            return s.asin();
        }
    }
    angle(p, a).min(angle(p, b))
}

/// Whether the arcs `a`–`b` and `c`–`d` cross at a point interior to both (S2's robust
/// crossing with strict signs; shared or touching vertices are not a crossing).
pub fn edges_cross(a: V3, b: V3, c: V3, d: V3) -> bool {
    let acb = -orient(a, b, c);
    let bda = orient(a, b, d);
    if acb == 0.0 || bda == 0.0 || (acb > 0.0) != (bda > 0.0) {
        return false;
    }
    let cbd = -orient(c, d, b);
    if cbd == 0.0 || (cbd > 0.0) != (acb > 0.0) {
        return false;
    }
    let dac = orient(c, d, a);
    dac != 0.0 && (dac > 0.0) == (acb > 0.0)
}

/// Whether the arcs `a`–`b` and `c`–`d` share a point (crossing or touching).
pub fn edges_intersect(a: V3, b: V3, c: V3, d: V3) -> bool {
    edges_cross(a, b, c, d)
        || dist_to_edge(a, c, d) <= BOUNDARY_TOL
        || dist_to_edge(b, c, d) <= BOUNDARY_TOL
        || dist_to_edge(c, a, b) <= BOUNDARY_TOL
        || dist_to_edge(d, a, b) <= BOUNDARY_TOL
}

/// A closed loop: vertices without the repeated last one, interior on the left.
#[derive(Debug, Clone)]
pub struct Loop {
    vertices: Vec<V3>,
    area: f64,
}

impl Loop {
    /// A loop of at least three vertices, oriented as given.
    pub fn new(vertices: Vec<V3>) -> Loop {
        let area = loop_area(&vertices);
        Loop { vertices, area }
    }

    /// The vertices.
    pub fn vertices(&self) -> &[V3] {
        &self.vertices
    }

    /// The area of the interior (steradians, `0..4π`).
    pub fn area(&self) -> f64 {
        self.area
    }

    /// Makes the interior the smaller region (S2's `Normalize`).
    pub fn normalize(&mut self) {
        if self.area > 2.0 * PI + 1e-12 {
            self.invert();
        }
    }

    /// Swaps interior and exterior.
    pub fn invert(&mut self) {
        self.vertices.reverse();
        self.area = 4.0 * PI - self.area;
    }

    /// The edges, each as its two endpoints.
    pub fn edges(&self) -> impl Iterator<Item = (V3, V3)> + '_ {
        let n = self.vertices.len();
        (0..n).map(move |i| (self.vertices[i], self.vertices[(i + 1) % n]))
    }

    /// The angular distance from `p` to the loop's boundary.
    pub fn boundary_distance(&self, p: V3) -> f64 {
        self.edges()
            .map(|(a, b)| dist_to_edge(p, a, b))
            .fold(f64::INFINITY, f64::min)
    }

    /// Whether `p` is in the interior (points on the boundary may go either way; callers test
    /// the boundary first).
    pub fn contains(&self, p: V3) -> bool {
        let n = self.vertices.len();
        if n < 3 {
            return false;
        }
        for i in 0..n {
            if let Some(inside) = self.contains_from_edge(i, p) {
                return inside;
            }
        }
        // Every reference was degenerate (a loop of near-zero size): treat as outside.
        false
    }

    /// Containment of `p` by crossing parity from a reference point just left of edge `i`'s
    /// middle, or `None` when that reference gives a degenerate arc.
    fn contains_from_edge(&self, i: usize, p: V3) -> Option<bool> {
        let n = self.vertices.len();
        let (a, b) = (self.vertices[i], self.vertices[(i + 1) % n]);
        let len = angle(a, b);
        if len < 1e-12 {
            return None;
        }
        let mid = normalize(add(a, b))?;
        let left = normalize(cross(a, b))?;
        let offset = (len * 1e-3).min(1e-7);
        let r = normalize(add(mid, scale(left, offset)))?;
        // The reference is inside by construction, unless another edge passes between it
        // and the edge (then it is too close to tell).
        for (j, (c, d)) in self.edges().enumerate() {
            if j != i && dist_to_edge(r, c, d) <= offset * 2.0 {
                return None;
            }
        }
        // The arc r→p must be shorter than π; split it through a midpoint when long.
        let mut path = vec![r];
        if angle(r, p) > PI * 0.9 {
            let m = normalize(add(r, p)).or_else(|| normalize(tangent(r, left)))?;
            path.push(m);
        }
        path.push(p);
        let mut inside = true;
        for w in path.windows(2) {
            let (s, t) = (w[0], w[1]);
            for (c, d) in self.edges() {
                // A vertex too close to the arc makes the parity unreliable.
                if dist_to_edge(c, s, t) <= 1e-12 {
                    return None;
                }
                if edges_cross(s, t, c, d) {
                    inside = !inside;
                }
            }
        }
        Some(inside)
    }

    /// Why the loop is invalid (repeated vertices, crossing edges), if it is (the pairwise
    /// checks are skipped above [`MAX_VALIDATED_VERTICES`]).
    pub fn invalid_reason(&self) -> Option<String> {
        let v = &self.vertices;
        let n = v.len();
        if n < 3 {
            return Some(format!("Loop must have at least 3 vertices; has {n}"));
        }
        // Pairwise checks are quadratic: beyond this many vertices they are skipped.
        if n > MAX_VALIDATED_VERTICES {
            return None;
        }
        for i in 0..n {
            for j in i + 1..n {
                if angle(v[i], v[j]) == 0.0 {
                    return Some(format!("Duplicate vertices: {i} and {j}"));
                }
            }
        }
        for i in 0..n {
            let (a, b) = (v[i], v[(i + 1) % n]);
            for j in i + 2..n {
                if i == 0 && j == n - 1 {
                    continue;
                }
                let (c, d) = (v[j], v[(j + 1) % n]);
                if edges_cross(a, b, c, d) {
                    return Some(format!("Edges {i} and {j} cross"));
                }
            }
        }
        None
    }
}

/// Loops above this many vertices skip the quadratic self-intersection check.
pub const MAX_VALIDATED_VERTICES: usize = 4096;

/// The area left of a loop, by Gauss–Bonnet: 2π minus the sum of turning angles.
fn loop_area(v: &[V3]) -> f64 {
    let n = v.len();
    if n < 3 {
        return 0.0;
    }
    let mut turning = 0.0;
    for i in 0..n {
        let prev = v[(i + n - 1) % n];
        let cur = v[i];
        let next = v[(i + 1) % n];
        let d_in = scale(tangent(cur, prev), -1.0);
        let d_out = tangent(cur, next);
        turning += dot(cross(d_in, d_out), cur).atan2(dot(d_in, d_out));
    }
    let a = 2.0 * PI - turning;
    a.clamp(0.0, 4.0 * PI)
}

/// A polygon: a shell and holes (each loop normalized, holes inside the shell).
#[derive(Debug, Clone)]
pub struct Polygon {
    /// `[0]` is the shell, the rest are holes.
    pub loops: Vec<Loop>,
}

impl Polygon {
    /// The shell.
    pub fn shell(&self) -> &Loop {
        &self.loops[0]
    }

    /// Every edge of every loop.
    pub fn edges(&self) -> impl Iterator<Item = (V3, V3)> + '_ {
        self.loops.iter().flat_map(|l| l.edges())
    }

    /// Whether `p` is on the boundary (within the tolerance).
    pub fn on_boundary(&self, p: V3) -> bool {
        self.loops
            .iter()
            .any(|l| l.boundary_distance(p) <= BOUNDARY_TOL)
    }

    /// Whether the interior contains `p` (boundary excluded or not, undecided).
    pub fn contains_interior(&self, p: V3) -> bool {
        self.shell().contains(p) && !self.loops[1..].iter().any(|h| h.contains(p))
    }

    /// Whether `p` is in the closed polygon (interior or boundary): MongoDB's containment of
    /// a point (`Contains(point) || MayIntersect(leaf cell)`).
    pub fn covers_point(&self, p: V3) -> bool {
        self.on_boundary(p) || self.contains_interior(p)
    }

    /// Whether the polyline lies in the closed polygon.
    pub fn covers_line(&self, line: &[V3]) -> bool {
        if !line.iter().all(|&p| self.covers_point(p)) {
            return false;
        }
        for w in line.windows(2) {
            for (c, d) in self.edges() {
                if edges_cross(w[0], w[1], c, d) {
                    return false;
                }
            }
            // An edge between two boundary vertices may still leave through the outside.
            if let Some(m) = normalize(add(w[0], w[1]))
                && !self.covers_point(m)
            {
                return false;
            }
        }
        true
    }

    /// Whether `other` lies in the closed polygon.
    pub fn covers_polygon(&self, other: &Polygon) -> bool {
        let shell = other.shell();
        let mut ring = shell.vertices().to_vec();
        if let Some(&f) = ring.first() {
            ring.push(f);
        }
        if !self.covers_line(&ring) {
            return false;
        }
        // A hole of this polygon inside the other's region uncovers part of it.
        for hole in &self.loops[1..] {
            if hole
                .vertices()
                .iter()
                .any(|&v| other.contains_interior(v) && !other.on_boundary(v))
            {
                return false;
            }
        }
        true
    }

    /// Whether the polyline and the closed polygon share a point.
    pub fn intersects_line(&self, line: &[V3]) -> bool {
        if line.iter().any(|&p| self.covers_point(p)) {
            return true;
        }
        line.windows(2)
            .any(|w| self.edges().any(|(c, d)| edges_intersect(w[0], w[1], c, d)))
    }

    /// Whether two closed polygons share a point.
    pub fn intersects_polygon(&self, other: &Polygon) -> bool {
        for (a, b) in self.edges() {
            for (c, d) in other.edges() {
                if edges_intersect(a, b, c, d) {
                    return true;
                }
            }
        }
        other
            .shell()
            .vertices()
            .iter()
            .any(|&v| self.covers_point(v))
            || self
                .shell()
                .vertices()
                .iter()
                .any(|&v| other.covers_point(v))
    }
}

/// Whether two polylines share a point.
pub fn lines_intersect(a: &[V3], b: &[V3]) -> bool {
    a.windows(2).any(|x| {
        b.windows(2)
            .any(|y| edges_intersect(x[0], x[1], y[0], y[1]))
    })
}

/// Whether `p` is on the polyline (within the tolerance).
pub fn line_touches_point(line: &[V3], p: V3) -> bool {
    line.windows(2)
        .any(|w| dist_to_edge(p, w[0], w[1]) <= BOUNDARY_TOL)
        || (line.len() == 1 && angle(line[0], p) <= BOUNDARY_TOL)
}

/// A spherical cap (`$centerSphere`): center and radius in radians.
#[derive(Debug, Clone, Copy)]
pub struct Cap {
    /// The center.
    pub center: V3,
    /// The radius (radians, non-negative).
    pub radius: f64,
}

impl Cap {
    /// MongoDB's point test (the cap may intersect the point's leaf cell).
    pub fn covers_point(&self, p: V3) -> bool {
        angle(self.center, p) <= self.radius + BOUNDARY_TOL
    }

    /// MongoDB's vertex test for lines and polygons in a cap: every vertex's distance (in
    /// meters) to the complement cap must be at least the complement's arc length, capped at
    /// π — which in practice asks each vertex to lie about π meters inside the cap.
    pub fn covers_vertices(&self, vertices: &[V3]) -> bool {
        let complement_angle = (PI - self.radius).max(0.0);
        let anti = scale(self.center, -1.0);
        let arc = (EARTH_RADIUS_M * complement_angle).min(PI);
        vertices
            .iter()
            .all(|&v| EARTH_RADIUS_M * (angle(v, anti) - complement_angle) >= arc)
    }
}

/// The S2 leaf cell (level 30) holding a point, as (face, i, j).
pub fn leaf_cell(p: V3) -> (u8, u32, u32) {
    let (ax, ay, az) = (p[0].abs(), p[1].abs(), p[2].abs());
    let face = if ax > ay {
        if ax > az { 0 } else { 2 }
    } else if ay > az {
        1
    } else {
        2
    };
    let face = if p[face] < 0.0 { face + 3 } else { face };
    let (u, v) = match face {
        0 => (p[1] / p[0], p[2] / p[0]),
        1 => (-p[0] / p[1], p[2] / p[1]),
        2 => (-p[0] / p[2], -p[1] / p[2]),
        3 => (p[2] / p[0], p[1] / p[0]),
        4 => (p[2] / p[1], -p[0] / p[1]),
        _ => (-p[1] / p[2], -p[0] / p[2]),
    };
    let st = |u: f64| {
        if u >= 0.0 {
            0.5 * (1.0 + 3.0 * u).sqrt()
        } else {
            1.0 - 0.5 * (1.0 - 3.0 * u).sqrt()
        }
    };
    const MAX: f64 = (1u64 << 30) as f64;
    let ij = |s: f64| ((s * MAX).floor().clamp(0.0, MAX - 1.0)) as u32;
    (face as u8, ij(st(u)), ij(st(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ll(lng: f64, lat: f64) -> V3 {
        from_lng_lat(lng, lat)
    }

    fn square(x0: f64, y0: f64, x1: f64, y1: f64) -> Loop {
        let mut l = Loop::new(vec![ll(x0, y0), ll(x1, y0), ll(x1, y1), ll(x0, y1)]);
        l.normalize();
        l
    }

    #[test]
    fn loop_area_and_normalize() {
        let l = square(0.0, 0.0, 1.0, 1.0);
        let expected = (1f64.to_radians()) * (1f64.to_radians());
        assert!(
            (l.area() - expected).abs() / expected < 1e-3,
            "{}",
            l.area()
        );
        // Clockwise input is normalized to the small region.
        let mut cw = Loop::new(vec![ll(0.0, 0.0), ll(0.0, 1.0), ll(1.0, 1.0), ll(1.0, 0.0)]);
        assert!(cw.area() > 2.0 * PI);
        cw.normalize();
        assert!(cw.area() < 1e-3);
    }

    #[test]
    fn loop_contains() {
        let l = square(0.0, 0.0, 10.0, 10.0);
        for (p, want) in [
            ((5.0, 5.0), true),
            ((0.5, 9.5), true),
            ((15.0, 5.0), false),
            ((-175.0, -5.0), false),
            ((5.0, 10.5), false),
            ((5.0, -0.001), false),
            ((5.0, 0.001), true),
        ] {
            assert_eq!(l.contains(ll(p.0, p.1)), want, "{p:?}");
        }
        // Geodesic edges: the top edge at latitude 10 bulges north in the middle.
        assert!(l.contains(ll(5.0, 10.03)));
        assert!(!l.contains(ll(5.0, 10.05)));
        assert!(!l.contains(ll(0.01, 10.03)));
    }

    #[test]
    fn big_loop_contains() {
        // A strict-winding loop (clockwise): everything but the small square.
        let l = Loop::new(vec![ll(0.0, 0.0), ll(0.0, 1.0), ll(1.0, 1.0), ll(1.0, 0.0)]);
        assert!(!l.contains(ll(0.5, 0.5)));
        assert!(l.contains(ll(100.0, 40.0)));
        assert!(l.contains(ll(-179.0, -89.0)));
    }

    #[test]
    fn crossings_and_distances() {
        assert!(edges_cross(
            ll(0.0, -1.0),
            ll(0.0, 1.0),
            ll(-1.0, 0.0),
            ll(1.0, 0.0)
        ));
        assert!(!edges_cross(
            ll(0.0, 0.0),
            ll(0.0, 1.0),
            ll(0.0, 1.0),
            ll(1.0, 1.0)
        ));
        assert!(edges_intersect(
            ll(0.0, 0.0),
            ll(0.0, 1.0),
            ll(0.0, 1.0),
            ll(1.0, 1.0)
        ));
        let d = dist_to_edge(ll(0.5, 1.0), ll(0.0, 0.0), ll(1.0, 0.0));
        assert!((d - 1f64.to_radians()).abs() < 1e-4);
        assert!((angle(ll(0.0, 0.0), ll(180.0, 0.0)) - PI).abs() < 1e-15);
    }

    #[test]
    fn leaf_cells() {
        assert_eq!(leaf_cell(ll(10.0, 10.0)), leaf_cell(ll(10.0, 10.0)));
        assert_ne!(leaf_cell(ll(10.0, 10.0)), leaf_cell(ll(10.0, 10.000001)));
        assert_eq!(leaf_cell(ll(0.0, 90.0)).0, 2);
        assert_eq!(leaf_cell(ll(180.0, 0.0)).0, 3);
    }

    #[test]
    fn self_crossing_loop_is_invalid() {
        let bow = Loop::new(vec![ll(0.0, 0.0), ll(1.0, 1.0), ll(1.0, 0.0), ll(0.0, 1.0)]);
        assert!(bow.invalid_reason().is_some());
        assert!(square(0.0, 0.0, 1.0, 1.0).invalid_reason().is_none());
    }
}
