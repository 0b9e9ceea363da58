//! Planar predicates for legacy coordinate pairs (`$box`, `$polygon`, `$center`), with
//! MongoDB's boundary rules: a box is inclusive, a circle includes its rim (comparing
//! axis-aligned distances without rounding error), and a polygon uses MongoDB's ray casting in
//! which vertices, horizontal edges and vertical edges through the point count as inside.
//!
//! Invariant: total on finite input; never divides by a zero it has not checked.

/// An axis-aligned rectangle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    /// Lower-left corner.
    pub min: (f64, f64),
    /// Upper-right corner.
    pub max: (f64, f64),
}

impl Rect {
    /// The rectangle spanned by two corners in any order.
    pub fn new(a: (f64, f64), b: (f64, f64)) -> Rect {
        Rect {
            min: (a.0.min(b.0), a.1.min(b.1)),
            max: (a.0.max(b.0), a.1.max(b.1)),
        }
    }

    /// Whether `p` is inside or on the border.
    pub fn contains(&self, p: (f64, f64)) -> bool {
        self.min.0 <= p.0 && p.0 <= self.max.0 && self.min.1 <= p.1 && p.1 <= self.max.1
    }
}

/// MongoDB's `distanceCompare`: the distance from `a` to `b` minus `radius`, exact along axes.
pub fn distance_compare(a: (f64, f64), b: (f64, f64), radius: f64) -> f64 {
    let dx = b.0 - a.0;
    let dy = b.1 - a.1;
    if dx == 0.0 {
        return if b.1 > a.1 {
            b.1 - (a.1 + radius)
        } else {
            a.1 - (b.1 + radius)
        };
    }
    if dy == 0.0 {
        return if b.0 > a.0 {
            b.0 - (a.0 + radius)
        } else {
            a.0 - (b.0 + radius)
        };
    }
    (dx * dx + dy * dy).sqrt() - radius
}

/// Whether `p` is within `radius` of `center` (rim included).
pub fn distance_within(center: (f64, f64), p: (f64, f64), radius: f64) -> bool {
    distance_compare(center, p, radius) <= 0.0
}

/// The planar distance between two points (exact along axes).
pub fn distance(a: (f64, f64), b: (f64, f64)) -> f64 {
    let dx = a.0 - b.0;
    let dy = a.1 - b.1;
    if dx == 0.0 {
        return dy.abs();
    }
    if dy == 0.0 {
        return dx.abs();
    }
    (dx * dx + dy * dy).sqrt()
}

/// MongoDB's legacy polygon containment (ray casting, last vertex joined to the first).
pub fn polygon_contains(points: &[(f64, f64)], p: (f64, f64)) -> bool {
    let n = points.len();
    if n == 0 {
        return false;
    }
    let mut counter = 0usize;
    let mut p1 = points[0];
    for i in 1..=n {
        let p2 = points[i % n];
        if p == p1 || p == p2 {
            return true;
        }
        if p1.1 == p2.1 && p.1 == p1.1 && p.0 >= p1.0.min(p2.0) && p.0 <= p1.0.max(p2.0) {
            return true;
        }
        if p.1 > p1.1.min(p2.1) && p.1 <= p1.1.max(p2.1) && p.0 <= p1.0.max(p2.0) && p1.1 != p2.1 {
            let xinters = (p.1 - p1.1) * (p2.0 - p1.0) / (p2.1 - p1.1) + p1.0;
            if p1.0 == p2.0 && p.0 == p1.0 {
                return true;
            } else if p1.0 == p2.0 || p.0 <= xinters {
                counter += 1;
            }
        }
        p1 = p2;
    }
    counter % 2 == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_circles_polygons() {
        let r = Rect::new((5.0, 5.0), (0.0, 0.0));
        assert!(r.contains((0.0, 5.0)));
        assert!(!r.contains((5.1, 1.0)));
        assert!(distance_within((0.0, 0.0), (1.0, 0.0), 1.0));
        assert!(!distance_within((0.0, 0.0), (1.0, 0.1), 1.0));
        assert!(distance_within((52.0, 0.0), (51.9999, 0.0), 0.0001));
        let tri = [(0.0, 0.0), (3.0, 6.0), (6.0, 0.0)];
        for (p, want) in [
            ((1.0, 1.0), true),
            ((3.0, 6.0), true),
            ((3.0, 0.0), true),
            ((0.0, 6.0), false),
            ((3.0, 5.0), true),
            ((6.1, 0.0), false),
        ] {
            assert_eq!(polygon_contains(&tri, p), want, "{p:?}");
        }
    }
}
