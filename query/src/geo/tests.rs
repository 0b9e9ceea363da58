//! Table tests of geometry parsing and the `$geoWithin` / `$geoIntersects` predicates.

use bson::{Bson, doc};

use super::*;

fn raw(b: Bson) -> bson::RawBson {
    bson::RawBson::try_from(b).unwrap()
}

fn parse(op: &str, operand: Bson) -> PResult<GeoMatch> {
    let r = raw(operand);
    GeoMatch::parse(op, r.as_raw_bson_ref(), "{}")
}

fn matches(m: &GeoMatch, v: Bson) -> bool {
    let r = raw(v);
    m.matches(r.as_raw_bson_ref())
}

fn square(x0: f64, y0: f64, x1: f64, y1: f64) -> Bson {
    Bson::Document(
        doc! {"type": "Polygon", "coordinates": [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]]},
    )
}

fn point(x: f64, y: f64) -> Bson {
    Bson::Document(doc! {"type": "Point", "coordinates": [x, y]})
}

#[test]
fn within_polygon() {
    let m = parse(
        "$geoWithin",
        Bson::Document(doc! {"$geometry": square(0.0, 0.0, 10.0, 10.0)}),
    )
    .unwrap();
    let cases: Vec<(Bson, bool)> = vec![
        (point(5.0, 5.0), true),
        (point(0.0, 0.0), true), // a vertex
        (point(5.0, 0.0), true), // on an edge
        (point(11.0, 5.0), false),
        (Bson::Array(vec![5.into(), 5.into()]), true), // legacy pair
        (Bson::Document(doc! {"x": 5, "y": 5, "z": "extra"}), true),
        (Bson::Array(vec![500.into(), 5.into()]), false), // not a longitude
        (Bson::Array(vec![5.into()]), false),
        (Bson::String("x".into()), false),
        (
            Bson::Document(doc! {"type": "LineString", "coordinates": [[1, 1], [9, 9]]}),
            true,
        ),
        (
            Bson::Document(doc! {"type": "LineString", "coordinates": [[1, 1], [19, 9]]}),
            false,
        ),
        (square(1.0, 1.0, 2.0, 2.0), true),
        (square(1.0, 1.0, 12.0, 2.0), false),
        (
            Bson::Document(doc! {"type": "MultiPoint", "coordinates": [[1, 1], [9, 9]]}),
            true,
        ),
        (
            Bson::Document(doc! {"type": "MultiPoint", "coordinates": [[1, 1], [19, 9]]}),
            false,
        ),
        (
            Bson::Document(
                doc! {"type": "GeometryCollection", "geometries": [point(1.0, 1.0), point(2.0, 2.0)]},
            ),
            true,
        ),
        (
            Bson::Document(doc! {"type": "Point", "coordinates": [5, 95]}),
            false,
        ),
        (
            Bson::Document(doc! {"type": "Unknown", "coordinates": [5, 5]}),
            false,
        ),
    ];
    for (v, want) in cases {
        assert_eq!(matches(&m, v.clone()), want, "{v}");
    }
}

#[test]
fn within_polygon_with_hole() {
    let poly = Bson::Document(doc! {"type": "Polygon", "coordinates": [
        [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]],
        [[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]],
    ]});
    let m = parse("$geoWithin", Bson::Document(doc! {"$geometry": poly})).unwrap();
    assert!(matches(&m, point(2.0, 2.0)));
    assert!(!matches(&m, point(5.0, 5.0)));
    assert!(matches(&m, point(4.0, 5.0))); // the hole's boundary belongs to the polygon
    assert!(!matches(&m, square(3.0, 3.0, 7.0, 7.0)));
}

#[test]
fn legacy_shapes() {
    let b = parse(
        "$geoWithin",
        Bson::Document(doc! {"$box": [[0, 0], [100, 100]]}),
    )
    .unwrap();
    assert!(matches(&b, Bson::Array(vec![100.into(), 0.into()])));
    assert!(matches(&b, point(5.0, 5.0)));
    assert!(!matches(&b, Bson::Array(vec![100.5.into(), 0.into()])));
    assert!(!matches(&b, square(1.0, 1.0, 2.0, 2.0)));
    let c = parse("$within", Bson::Document(doc! {"$center": [[0, 0], 10]})).unwrap();
    assert!(matches(&c, Bson::Array(vec![0.into(), 10.into()])));
    assert!(!matches(&c, Bson::Array(vec![7.1.into(), 7.1.into()])));
    assert!(!matches(&c, Bson::Array(vec![500.into(), 500.into()])));
    let p = parse(
        "$geoWithin",
        Bson::Document(doc! {"$polygon": [[0, 0], [3, 6], [6, 0]]}),
    )
    .unwrap();
    assert!(matches(&p, Bson::Array(vec![3.into(), 1.into()])));
    assert!(!matches(&p, Bson::Array(vec![0.into(), 6.into()])));
    // $centerSphere: radius in radians (10 miles / 3963.2).
    let s = parse(
        "$geoWithin",
        Bson::Document(doc! {"$centerSphere": [[-88, 30], 10.0 / 3963.2]}),
    )
    .unwrap();
    assert!(matches(&s, Bson::Array(vec![(-88.0).into(), 30.1.into()])));
    assert!(!matches(&s, Bson::Array(vec![(-88.0).into(), 30.2.into()])));
    assert!(matches(
        &s,
        Bson::Document(
            doc! {"type": "LineString", "coordinates": [[-88.0, 30.0], [-88.05, 30.05]]}
        )
    ));
}

#[test]
fn intersects() {
    let m = parse(
        "$geoIntersects",
        Bson::Document(doc! {"$geometry": square(0.0, 0.0, 10.0, 10.0)}),
    )
    .unwrap();
    assert!(matches(
        &m,
        Bson::Document(doc! {"type": "LineString", "coordinates": [[-5, 5], [15, 5]]})
    ));
    assert!(!matches(
        &m,
        Bson::Document(doc! {"type": "LineString", "coordinates": [[-5, 5], [-1, 5]]})
    ));
    assert!(matches(&m, square(9.0, 9.0, 12.0, 12.0)));
    assert!(matches(&m, square(-5.0, -5.0, 15.0, 15.0)));
    assert!(!matches(&m, square(11.0, 11.0, 12.0, 12.0)));
    assert!(matches(&m, square(10.0, 5.0, 12.0, 7.0))); // sharing an edge
    let p = parse(
        "$geoIntersects",
        Bson::Document(doc! {"$geometry": point(1.0, 2.0)}),
    )
    .unwrap();
    assert!(matches(&p, Bson::Array(vec![1.into(), 2.into()])));
    assert!(!matches(&p, Bson::Array(vec![1.into(), 2.0001.into()])));
    let l = parse(
        "$geoIntersects",
        Bson::Document(
            doc! {"$geometry": {"type": "LineString", "coordinates": [[0, 0], [10, 10]]}},
        ),
    )
    .unwrap();
    assert!(matches(
        &l,
        Bson::Document(doc! {"type": "LineString", "coordinates": [[0, 10], [10, 0]]})
    ));
    assert!(matches(&l, point(0.0, 0.0)));
    let cs = parse(
        "$geoIntersects",
        Bson::Document(doc! {"$centerSphere": [[0, 0], 1]}),
    )
    .unwrap();
    assert!(!matches(&cs, point(0.0, 0.0)));
}

#[test]
fn big_polygon() {
    let crs =
        doc! {"type": "name", "properties": {"name": "urn:x-mongodb:crs:strictwinding:EPSG:4326"}};
    // Clockwise: everything outside the small square.
    let g = Bson::Document(
        doc! {"type": "Polygon", "coordinates": [[[0, 0], [0, 1], [1, 1], [1, 0], [0, 0]]], "crs": crs.clone()},
    );
    let m = parse("$geoWithin", Bson::Document(doc! {"$geometry": g.clone()})).unwrap();
    assert!(matches(&m, point(100.0, 50.0)));
    assert!(!matches(&m, point(0.5, 0.5)));
    // Stored big polygons never match.
    let i = parse(
        "$geoIntersects",
        Bson::Document(doc! {"$geometry": point(100.0, 50.0)}),
    )
    .unwrap();
    assert!(!matches(&i, g));
    let err = parse(
        "$geoIntersects",
        Bson::Document(doc! {"$geometry": {"type": "Point", "coordinates": [0, 0], "crs": crs}}),
    )
    .unwrap_err();
    assert_eq!(err, "Strict winding order is only supported by polygon");
}

#[test]
fn parse_errors() {
    let cases: Vec<(&str, Bson, &str)> = vec![
        ("$geoWithin", Bson::Int32(1), "geometry must be an object"),
        (
            "$geoWithin",
            Bson::Document(doc! {}),
            "geo query doesn't have any geometry",
        ),
        (
            "$geoWithin",
            Bson::Document(doc! {"$foo": [1]}),
            "unknown geo specifier: $foo: [ 1 ]",
        ),
        (
            "$geoWithin",
            Bson::Document(doc! {"$box": 1}),
            "unknown geo specifier: $box: 1",
        ),
        (
            "$geoWithin",
            Bson::Document(doc! {"$box": [[0, 0]]}),
            "Point must be an array or object",
        ),
        (
            "$geoWithin",
            Bson::Document(doc! {"$box": [[0, "a"], [1, 1]]}),
            "Point must only contain numeric elements",
        ),
        (
            "$geoWithin",
            Bson::Document(doc! {"$polygon": [[0, 0], [1, 1]]}),
            "Polygon must have at least 3 points",
        ),
        (
            "$geoWithin",
            Bson::Document(doc! {"$center": [[0, 0], -1]}),
            "radius must be a non-negative number",
        ),
        (
            "$geoWithin",
            Bson::Document(doc! {"$center": [[0, 0], 1, 2]}),
            "Only 2 fields allowed for circular region",
        ),
        (
            "$geoWithin",
            Bson::Document(doc! {"$centerSphere": [[200, 0], 1]}),
            "longitude/latitude is out of bounds, lng: 200 lat: 0",
        ),
        (
            "$geoWithin",
            Bson::Document(doc! {"$box": [[0, 0], [1, 1]], "$center": [[0, 0], 1]}),
            "$geoWithin doesn't accept multiple shapes $geoWithin: { $box: [ [ 0, 0 ], [ 1, 1 ] ], $center: [ [ 0, 0 ], 1 ] }",
        ),
        (
            "$geoWithin",
            Bson::Document(doc! {"$geometry": point(0.0, 0.0)}),
            "$within not supported with provided geometry: {}",
        ),
        (
            "$geoIntersects",
            Bson::Document(doc! {"$box": [[0, 0], [1, 1]]}),
            "$geoIntersect not supported with provided geometry: {}",
        ),
        (
            "$geoWithin",
            Bson::Document(
                doc! {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]]}},
            ),
            "Loop is not closed: [ [ 0, 0 ], [ 1, 0 ], [ 1, 1 ], [ 0, 1 ] ]",
        ),
        (
            "$geoWithin",
            Bson::Document(
                doc! {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [0, 0]]]}},
            ),
            "Loop must have at least 3 different vertices: [ [ 0, 0 ], [ 1, 0 ], [ 0, 0 ] ]",
        ),
        (
            "$geoWithin",
            Bson::Document(
                doc! {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}},
            ),
            "Loop is not valid: [ [ 0, 0 ], [ 1, 1 ], [ 1, 0 ], [ 0, 1 ], [ 0, 0 ] ] Edges 0 and 2 cross",
        ),
        (
            "$geoWithin",
            Bson::Document(
                doc! {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [200, 0], [1, 1], [0, 0]]]}},
            ),
            "longitude/latitude is out of bounds, lng: 200 lat: 0",
        ),
        (
            "$geoWithin",
            Bson::Document(doc! {"$geometry": {"type": "Squiggle"}}),
            "unknown GeoJSON type: { type: \"Squiggle\" }",
        ),
        (
            "$geoIntersects",
            Bson::Document(doc! {"$geometry": {"type": "LineString", "coordinates": [[0, 0]]}}),
            "GeoJSON LineString must have at least 2 vertices: [ [ 0, 0 ] ]",
        ),
        (
            "$geoIntersects",
            Bson::Document(doc! {"$geometry": {"type": "MultiPoint", "coordinates": []}}),
            "MultiPoint coordinates must have at least 1 element",
        ),
    ];
    for (op, operand, want) in cases {
        let got = parse(op, operand.clone()).map(|_| ()).unwrap_err();
        assert_eq!(got, want, "{op} {operand}");
    }
}

#[test]
fn near_parsing_and_distances() {
    use super::near::NearQuery;
    let parse = |d: bson::Document| {
        let raw = bson::RawDocumentBuf::try_from(&d).unwrap();
        NearQuery::parse(&raw)
    };
    // Legacy forms.
    let q = parse(doc! {"$near": [1, 2], "$maxDistance": 3, "$minDistance": 1}).unwrap();
    assert!(!q.spherical && !q.geojson);
    assert_eq!((q.flat, q.min, q.max), ((1.0, 2.0), 1.0, 3.0));
    let q = parse(doc! {"$near": [1, 2, 5]}).unwrap();
    assert_eq!(q.max, 5.0);
    let q = parse(doc! {"$nearSphere": {"x": 10, "y": 20}}).unwrap();
    assert!(q.spherical && !q.geojson);
    assert_eq!(
        q.distance(raw(Bson::Array(vec![10.into(), 21.into()])).as_raw_bson_ref())
            .map(|d| (d - 1f64.to_radians()).abs() < 1e-12),
        Some(true)
    );
    // GeoJSON: meters.
    let q = parse(
        doc! {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}, "$maxDistance": 10}},
    )
    .unwrap();
    assert!(q.geojson && q.spherical);
    let d = q.distance(raw(point(0.0, 1.0)).as_raw_bson_ref()).unwrap();
    assert!((d - 1f64.to_radians() * 6_378_100.0).abs() < 1e-6);
    // A polygon around the center is at distance 0.
    assert_eq!(
        q.distance(raw(square(-1.0, -1.0, 1.0, 1.0)).as_raw_bson_ref()),
        Some(0.0)
    );
    // A GeoJSON point where the legacy pair goes (`$geoNear`'s query): meters on the sphere,
    // with `$near` or `$nearSphere`, bounds beside it.
    for op in ["$near", "$nearSphere"] {
        let q = parse(doc! {op: {"type": "Point", "coordinates": [0, 0]}, "$minDistance": 5, "$maxDistance": 10})
            .unwrap();
        assert!(q.geojson && q.spherical, "{op}");
        assert_eq!((q.flat, q.min, q.max), ((0.0, 0.0), 5.0, 10.0));
        assert_eq!(q.needs_2d_or_sphere(), (false, true));
        let d = q.distance(raw(point(0.0, 1.0)).as_raw_bson_ref()).unwrap();
        assert!((d - 1f64.to_radians() * 6_378_100.0).abs() < 1e-6);
    }
    // Radians are MongoDB's meters divided by the radius, to the last bit.
    let q = parse(doc! {"$nearSphere": [0, 0]}).unwrap();
    let p = raw(Bson::Array(vec![0.3.into(), 0.7.into()]));
    let rad = super::sphere::angle(
        super::sphere::from_lng_lat(0.0, 0.0),
        super::sphere::from_lng_lat(0.3, 0.7),
    );
    assert_eq!(
        q.distance(p.as_raw_bson_ref()),
        Some(rad * 6_378_100.0 / 6_378_100.0)
    );
    // The nearest of several locations, with the location.
    let doc = bson::RawDocumentBuf::try_from(&doc! {"loc": [[5, 5], [1, 1], [3, 3]]}).unwrap();
    let (d, at) = q
        .nearest(&doc, &crate::path::FieldPath::new("loc"))
        .unwrap();
    assert_eq!(
        at,
        raw(Bson::Array(vec![1.into(), 1.into()])).as_raw_bson_ref()
    );
    assert!(d > 0.0 && d < 0.03);
    // Errors with MongoDB's codes.
    let cases: Vec<(bson::Document, i32, &str)> = vec![
        (
            doc! {"$near": [0, 0], "$maxDistance": "x"},
            16895,
            "$maxDistance must be a number",
        ),
        (
            doc! {"$near": [0, 0], "$minDistance": -1},
            16894,
            "$minDistance must be non-negative",
        ),
        (
            doc! {"$near": [0, 0], "$foo": 1},
            34413,
            "invalid argument in geo near query: $foo",
        ),
        (
            doc! {"$near": [0, 0, -1]},
            18522,
            "max distance must be non-negative",
        ),
        (
            doc! {"$nearSphere": [200, 0]},
            2,
            "Legacy point is out of bounds for spherical query",
        ),
        (
            doc! {"$near": {"$geometry": [0, 0]}},
            2,
            "$near requires geojson point, given [ 0, 0 ]",
        ),
        (
            doc! {"$near": {"$maxDistance": 1}},
            2,
            "$geometry is required for geo near query",
        ),
        (
            doc! {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}}, "$maxDistance": 1},
            2,
            "geo near accepts just one argument when querying for a GeoJSON point. Extra field found: $maxDistance: 1",
        ),
    ];
    for (d, code, msg) in cases {
        let e = parse(d.clone()).unwrap_err();
        assert_eq!((e.0, e.1.as_str()), (code, msg), "{d}");
    }
}
