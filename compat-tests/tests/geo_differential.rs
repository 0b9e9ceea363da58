//! Differential testing of geo index scans: a geo predicate answered through a `2dsphere` or
//! `2d` index returns exactly what the collection scan (`hint: {$natural: 1}`) returns, and
//! a `$near` ring search returns the documents a client computing the distances itself
//! expects, nearest first.
//!
//! Each seed drives a deterministic generator (splitmix64) building a collection of points
//! (GeoJSON and legacy pairs, clustered and spread), short lines and small polygons, with a
//! `2dsphere` index (sometimes compound behind an ordinary field `k`), or legacy points with
//! a `2d` index of random `bits`. Queries: `$geoWithin` with `$centerSphere` and `$geometry`
//! polygons, `$geoIntersects` with polygons, lines and points taken from the data, `$box`,
//! `$polygon`, `$center` and `$centerSphere` on the `2d` index, sometimes beside an equality
//! on `k`. `$near`/`$nearSphere` queries take random `$minDistance`/`$maxDistance` and limits;
//! the expected answer is every document whose distance (haversine on the sphere of
//! 6,378,100 m, or planar) lies in the range, sorted, cut at the limit — equal up to ties and
//! rounding at the cut.

use bson::{Bson, Document, doc};
use cairn_compat_tests::{TestServer, collect};
use mongodb::Collection;

struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn f(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f()
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

const R: f64 = 6_378_100.0;

/// Creates the index `keys` on `c`.
async fn index(c: &Collection<Document>, keys: Document) {
    c.create_index(mongodb::IndexModel::builder().keys(keys).build())
        .await
        .unwrap();
}

fn haversine(a: (f64, f64), b: (f64, f64)) -> f64 {
    let (la1, la2) = (a.1.to_radians(), b.1.to_radians());
    let dla = la2 - la1;
    let dlo = (b.0 - a.0).to_radians();
    let h = (dla / 2.0).sin().powi(2) + la1.cos() * la2.cos() * (dlo / 2.0).sin().powi(2);
    2.0 * h.sqrt().min(1.0).asin()
}

fn pt(x: f64, y: f64) -> Bson {
    Bson::Array(vec![Bson::Double(x), Bson::Double(y)])
}

fn polygon(ring: &[(f64, f64)]) -> Document {
    let mut coords: Vec<Bson> = ring.iter().map(|(x, y)| pt(*x, *y)).collect();
    coords.push(pt(ring[0].0, ring[0].1));
    doc! {"type": "Polygon", "coordinates": [coords]}
}

/// A small convex quadrilateral (counter-clockwise) around `c`.
fn quad(rng: &mut Rng, c: (f64, f64), size: f64) -> Vec<(f64, f64)> {
    let rot = rng.range(0.0, std::f64::consts::FRAC_PI_2);
    (0..4)
        .map(|k| {
            let a = rot + f64::from(k) * std::f64::consts::FRAC_PI_2;
            let r = size * rng.range(0.6, 1.0);
            (
                (c.0 + r * a.cos()).clamp(-179.0, 179.0),
                (c.1 + r * a.sin()).clamp(-89.0, 89.0),
            )
        })
        .collect()
}

async fn id_set(c: &Collection<Document>, filter: Document, natural: bool) -> Vec<i32> {
    let mut find = c.find(filter);
    if natural {
        find = find.hint(mongodb::options::Hint::Keys(doc! {"$natural": 1}));
    }
    let mut ids: Vec<i32> = collect(find.await.unwrap())
        .await
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

async fn winning_stage(c: &Collection<Document>, filter: Document) -> String {
    let db = c.client().database(c.namespace().db.as_str());
    let e = db
        .run_command(
            doc! {"explain": {"find": c.name(), "filter": filter}, "verbosity": "queryPlanner"},
        )
        .await
        .unwrap();
    let plan = e
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap();
    let mut s = plan.get_str("stage").unwrap().to_string();
    if let Ok(input) = plan.get_document("inputStage") {
        s.push('/');
        s.push_str(input.get_str("stage").unwrap());
        if let Ok(name) = input.get_str("indexName") {
            s.push(':');
            s.push_str(name);
        }
    }
    s
}

fn sphere_doc(rng: &mut Rng, id: i32, centers: &[(f64, f64)]) -> Document {
    let c = centers[rng.below(centers.len() as u64) as usize];
    let spread = if rng.below(4) == 0 { 20.0 } else { 1.0 };
    let p = (
        (c.0 + rng.range(-spread, spread)).clamp(-180.0, 180.0),
        (c.1 + rng.range(-spread, spread)).clamp(-90.0, 90.0),
    );
    let k = rng.below(3) as i32;
    let loc = match rng.below(20) {
        0..=9 => Bson::Document(doc! {"type": "Point", "coordinates": pt(p.0, p.1)}),
        10..=13 => pt(p.0, p.1),
        14..=15 => {
            let q = (
                p.0 + rng.range(-0.5, 0.5),
                (p.1 + rng.range(-0.5, 0.5)).clamp(-89.0, 89.0),
            );
            Bson::Document(doc! {"type": "LineString", "coordinates": [pt(p.0, p.1), pt(q.0, q.1)]})
        }
        16..=17 => {
            let size = rng.range(0.01, 0.6);
            let ring = quad(rng, p, size);
            Bson::Document(polygon(&ring))
        }
        18 => Bson::Null,
        _ => return doc! {"_id": id, "k": k},
    };
    doc! {"_id": id, "k": k, "loc": loc}
}

fn sphere_query(rng: &mut Rng, centers: &[(f64, f64)], docs: &[Document]) -> Document {
    let c = centers[rng.below(centers.len() as u64) as usize];
    let c = (
        c.0 + rng.range(-1.0, 1.0),
        (c.1 + rng.range(-1.0, 1.0)).clamp(-89.0, 89.0),
    );
    let geo = match rng.below(6) {
        0 | 1 => {
            let r = rng.range(0.0005, 0.05);
            doc! {"$geoWithin": {"$centerSphere": [pt(c.0, c.1), r]}}
        }
        2 => {
            let size = rng.range(0.05, 3.0);
            let ring = quad(rng, c, size);
            doc! {"$geoWithin": {"$geometry": polygon(&ring)}}
        }
        3 => {
            let size = rng.range(0.05, 3.0);
            let ring = quad(rng, c, size);
            doc! {"$geoIntersects": {"$geometry": polygon(&ring)}}
        }
        4 => {
            let q = (
                c.0 + rng.range(-2.0, 2.0),
                (c.1 + rng.range(-2.0, 2.0)).clamp(-89.0, 89.0),
            );
            doc! {"$geoIntersects": {"$geometry": {"type": "LineString", "coordinates": [pt(c.0, c.1), pt(q.0, q.1)]}}}
        }
        _ => {
            // A point of the data itself (points intersect when they are the same point).
            let d = &docs[rng.below(docs.len() as u64) as usize];
            let p = match d.get("loc") {
                Some(Bson::Document(g)) if g.get_str("type").ok() == Some("Point") => {
                    g.get_array("coordinates").unwrap().clone()
                }
                Some(Bson::Array(a)) => a.clone(),
                _ => vec![Bson::Double(c.0), Bson::Double(c.1)],
            };
            doc! {"$geoIntersects": {"$geometry": {"type": "Point", "coordinates": p}}}
        }
    };
    if rng.below(4) == 0 {
        doc! {"k": rng.below(3) as i32, "loc": geo}
    } else {
        doc! {"loc": geo}
    }
}

#[tokio::test]
async fn sphere_index_scans_match_collection_scans() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("geodiff");
    let mut ixscans = 0;
    let mut queries = 0;
    for seed in 0..6u64 {
        let mut rng = Rng(seed * 7919 + 1);
        let c = db.collection::<Document>(&format!("s{seed}"));
        let centers: Vec<(f64, f64)> = (0..3)
            .map(|_| (rng.range(-150.0, 150.0), rng.range(-60.0, 60.0)))
            .collect();
        let compound = seed % 3 == 2;
        let key = if compound {
            doc! {"k": 1, "loc": "2dsphere"}
        } else {
            doc! {"loc": "2dsphere"}
        };
        let before = seed % 2 == 0;
        if before {
            index(&c, key.clone()).await;
        }
        let docs: Vec<Document> = (0..400)
            .map(|i| sphere_doc(&mut rng, i, &centers))
            .collect();
        c.insert_many(docs.clone()).await.unwrap();
        if !before {
            index(&c, key).await;
        }
        for q in 0..40 {
            let filter = sphere_query(&mut rng, &centers, &docs);
            let got = id_set(&c, filter.clone(), false).await;
            let want = id_set(&c, filter.clone(), true).await;
            assert_eq!(got, want, "seed {seed} query {q}: {filter}");
            let stage = winning_stage(&c, filter.clone()).await;
            if stage.contains("IXSCAN") {
                ixscans += 1;
            }
            queries += 1;
        }
    }
    // Every predicate here can use the index (the compound one too: `k` is unbounded then).
    assert_eq!(ixscans, queries);
}

#[tokio::test]
async fn two_d_index_scans_match_collection_scans() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("geodiff2d");
    for seed in 0..6u64 {
        let mut rng = Rng(seed * 104_729 + 3);
        let c = db.collection::<Document>(&format!("p{seed}"));
        let bits = [26, 8, 3, 32][seed as usize % 4];
        c.create_index(
            mongodb::IndexModel::builder()
                .keys(doc! {"p": "2d"})
                .options(
                    mongodb::options::IndexOptions::builder()
                        .bits(bits as u32)
                        .build(),
                )
                .build(),
        )
        .await
        .unwrap();
        let docs: Vec<Document> = (0..400)
            .map(|i| {
                let (x, y) = (rng.range(-60.0, 60.0), rng.range(-60.0, 60.0));
                match rng.below(10) {
                    0 => doc! {"_id": i, "p": {"x": x, "y": y}},
                    1 => doc! {"_id": i},
                    _ => doc! {"_id": i, "p": pt(x, y)},
                }
            })
            .collect();
        c.insert_many(docs).await.unwrap();
        for q in 0..40 {
            let (x, y) = (rng.range(-60.0, 60.0), rng.range(-60.0, 60.0));
            let s = rng.range(0.5, 20.0);
            let filter = match rng.below(4) {
                0 => doc! {"p": {"$geoWithin": {"$box": [pt(x, y), pt(x + s, y + s * 0.7)]}}},
                1 => {
                    doc! {"p": {"$geoWithin": {"$polygon": [pt(x, y), pt(x + s, y), pt(x, y + s)]}}}
                }
                2 => doc! {"p": {"$geoWithin": {"$center": [pt(x, y), s]}}},
                _ => doc! {"p": {"$geoWithin": {"$centerSphere": [pt(x, y), s / 100.0]}}},
            };
            let got = id_set(&c, filter.clone(), false).await;
            let want = id_set(&c, filter.clone(), true).await;
            assert_eq!(got, want, "seed {seed} query {q}: {filter}");
            let stage = winning_stage(&c, filter.clone()).await;
            assert_eq!(stage, "FETCH/IXSCAN:p_2d", "{filter}");
        }
    }
}

/// The location of a document as (x, y) when it is a point.
fn point_of(d: &Document, field: &str) -> Option<(f64, f64)> {
    let num = |b: &Bson| match b {
        Bson::Double(f) => Some(*f),
        Bson::Int32(i) => Some(f64::from(*i)),
        _ => None,
    };
    match d.get(field)? {
        Bson::Document(g) if g.get_str("type").ok() == Some("Point") => {
            let a = g.get_array("coordinates").ok()?;
            Some((num(&a[0])?, num(&a[1])?))
        }
        Bson::Array(a) => Some((num(&a[0])?, num(&a[1])?)),
        Bson::Document(g) => {
            let mut it = g.values();
            Some((num(it.next()?)?, num(it.next()?)?))
        }
        _ => None,
    }
}

/// Checks a `$near` answer against the client's own distances.
fn check_near(
    what: &str,
    docs: &[Document],
    got: &[Document],
    dist: &dyn Fn((f64, f64)) -> Option<f64>,
    (min, max): (f64, f64),
    limit: Option<usize>,
) {
    let mut want: Vec<(f64, i32)> = docs
        .iter()
        .filter_map(|d| {
            let p = point_of(d, "loc")?;
            let dd = dist(p)?;
            (dd >= min && dd <= max).then(|| (dd, d.get_i32("_id").unwrap()))
        })
        .collect();
    want.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = limit.map_or(want.len(), |l| l.min(want.len()));
    let tol = |d: f64| 1e-9 * d.abs().max(1.0);
    // Near the range's ends rounding may decide either way.
    let borderline = |d: f64| (d - min).abs() <= tol(d) || (d - max).abs() <= tol(d);
    let got: Vec<(f64, i32)> = got
        .iter()
        .map(|d| {
            let id = d.get_i32("_id").unwrap();
            (dist(point_of(d, "loc").unwrap()).unwrap(), id)
        })
        .collect();
    let extra = got.iter().filter(|g| borderline(g.0)).count();
    assert!(
        got.len() + extra >= n && got.len() <= n + extra,
        "{what}: {} results, want {n}",
        got.len()
    );
    for w in got.windows(2) {
        assert!(
            w[0].0 <= w[1].0 + tol(w[1].0),
            "{what}: not in order: {w:?}"
        );
    }
    if let Some(&(last, _)) = got.last() {
        for (d, id) in &want {
            if *d < last - tol(last) && !borderline(*d) {
                assert!(
                    got.iter().any(|g| g.1 == *id),
                    "{what}: missing {id} at {d} (last {last})"
                );
            }
        }
    }
}

#[tokio::test]
async fn near_ring_search_matches_distances() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("geonear");
    for seed in 0..4u64 {
        let mut rng = Rng(seed * 31 + 5);
        let c = db.collection::<Document>(&format!("n{seed}"));
        index(&c, doc! {"loc": "2dsphere"}).await;
        let centers: Vec<(f64, f64)> = (0..3)
            .map(|_| (rng.range(-150.0, 150.0), rng.range(-60.0, 60.0)))
            .collect();
        let docs: Vec<Document> = (0..1500)
            .map(|i| {
                let c = centers[rng.below(3) as usize];
                let s = if rng.below(5) == 0 { 30.0 } else { 0.5 };
                let p = (
                    (c.0 + rng.range(-s, s)).clamp(-180.0, 180.0),
                    (c.1 + rng.range(-s, s)).clamp(-90.0, 90.0),
                );
                if rng.below(3) == 0 {
                    doc! {"_id": i, "loc": pt(p.0, p.1)}
                } else {
                    doc! {"_id": i, "loc": {"type": "Point", "coordinates": pt(p.0, p.1)}}
                }
            })
            .collect();
        c.insert_many(docs.clone()).await.unwrap();
        for q in 0..25 {
            let cc = centers[rng.below(3) as usize];
            let center = (
                cc.0 + rng.range(-1.0, 1.0),
                (cc.1 + rng.range(-1.0, 1.0)).clamp(-89.0, 89.0),
            );
            let limit = match rng.below(3) {
                0 => None,
                _ => Some(1 + rng.below(40) as usize),
            };
            let geojson = rng.below(2) == 0;
            let (min, max) = match rng.below(3) {
                0 => (0.0, f64::MAX),
                1 => (0.0, rng.range(1_000.0, 300_000.0)),
                _ => (
                    rng.range(1_000.0, 50_000.0),
                    rng.range(60_000.0, 3_000_000.0),
                ),
            };
            let (filter, scale) = if geojson {
                let mut near =
                    doc! {"$geometry": {"type": "Point", "coordinates": pt(center.0, center.1)}};
                if min > 0.0 {
                    near.insert("$minDistance", min);
                }
                if max < f64::MAX {
                    near.insert("$maxDistance", max);
                }
                (doc! {"loc": {"$near": near}}, R)
            } else {
                let mut f = doc! {"$nearSphere": pt(center.0, center.1)};
                if min > 0.0 {
                    f.insert("$minDistance", min / R);
                }
                if max < f64::MAX {
                    f.insert("$maxDistance", max / R);
                }
                (doc! {"loc": f}, 1.0)
            };
            let mut find = c.find(filter.clone());
            if let Some(l) = limit {
                find = find.limit(l as i64);
            }
            let got = collect(find.await.unwrap()).await;
            let range = if scale == R {
                (min, max)
            } else {
                (min / R, if max < f64::MAX { max / R } else { f64::MAX })
            };
            check_near(
                &format!("seed {seed} query {q}: {filter} limit {limit:?}"),
                &docs,
                &got,
                &|p| Some(haversine(center, p) * scale),
                range,
                limit,
            );
        }
        // $geoNear runs the same search: nearest first, with its distances.
        for q in 0..10 {
            let cc = centers[rng.below(3) as usize];
            let center = (cc.0 + rng.range(-1.0, 1.0), cc.1 + rng.range(-1.0, 1.0));
            let limit = 1 + rng.below(30) as usize;
            let max = rng.range(20_000.0, 2_000_000.0);
            let min = if q % 2 == 0 {
                0.0
            } else {
                rng.range(0.0, 10_000.0)
            };
            let mut stage = doc! {
                "near": {"type": "Point", "coordinates": pt(center.0, center.1)},
                "distanceField": "d.m", "maxDistance": max, "minDistance": min,
                "query": {"_id": {"$gte": 100}}, "includeLocs": "at",
            };
            if q % 3 == 0 {
                stage.insert("key", "loc");
            }
            let got = collect(
                c.aggregate(vec![
                    doc! {"$geoNear": stage},
                    doc! {"$limit": limit as i64},
                ])
                .await
                .unwrap(),
            )
            .await;
            let eligible: Vec<Document> = docs
                .iter()
                .filter(|d| d.get_i32("_id").unwrap() >= 100)
                .cloned()
                .collect();
            let what = format!("seed {seed} $geoNear {q}");
            check_near(
                &what,
                &eligible,
                &got,
                &|p| Some(haversine(center, p) * R),
                (min, max),
                Some(limit),
            );
            for d in &got {
                let p = point_of(d, "loc").unwrap();
                let dist = d.get_document("d").unwrap().get_f64("m").unwrap();
                let want = haversine(center, p) * R;
                assert!(
                    (dist - want).abs() <= 1e-6 * want.max(1.0),
                    "{what}: {dist} vs {want}"
                );
                assert_eq!(d.get("at"), d.get("loc"), "{what}");
            }
        }
        // A small limit reads near the point only.
        let e = db
            .run_command(doc! {
                "explain": {"find": c.name(), "filter": {"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": pt(centers[0].0, centers[0].1)}}}}, "limit": 10},
                "verbosity": "executionStats",
            })
            .await
            .unwrap();
        let stats = e.get_document("executionStats").unwrap();
        let examined = stats.get_i32("totalDocsExamined").unwrap();
        assert!(examined < 500, "docs examined {examined}");
        let plan = e
            .get_document("queryPlanner")
            .unwrap()
            .get_document("winningPlan")
            .unwrap();
        let text = format!("{plan}");
        assert!(
            text.contains("GEO_NEAR_2DSPHERE") && text.contains("loc_2dsphere"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn near_2d_ring_search_matches_distances() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("geonear2d");
    let mut rng = Rng(99);
    let c = db.collection::<Document>("n");
    index(&c, doc! {"loc": "2d"}).await;
    let docs: Vec<Document> = (0..1500)
        .map(|i| doc! {"_id": i, "loc": pt(rng.range(-100.0, 100.0), rng.range(-60.0, 60.0))})
        .collect();
    c.insert_many(docs.clone()).await.unwrap();
    for q in 0..30 {
        let center = (rng.range(-120.0, 120.0), rng.range(-70.0, 70.0));
        let limit = (rng.below(3) != 0).then(|| 1 + rng.below(60) as usize);
        let spherical = rng.below(2) == 0;
        let max = if rng.below(2) == 0 {
            f64::MAX
        } else {
            rng.range(1.0, 40.0)
        };
        let (filter, range) = if spherical {
            let mut f = doc! {"$nearSphere": pt(center.0, center.1)};
            let m = max.min(1e300) / 57.0;
            if max < f64::MAX {
                f.insert("$maxDistance", m);
            }
            (
                doc! {"loc": f},
                (0.0, if max < f64::MAX { m } else { f64::MAX }),
            )
        } else {
            let mut f = doc! {"$near": pt(center.0, center.1)};
            if max < f64::MAX {
                f.insert("$maxDistance", max);
            }
            (doc! {"loc": f}, (0.0, max))
        };
        let mut find = c.find(filter.clone());
        if let Some(l) = limit {
            find = find.limit(l as i64);
        }
        let got = collect(find.await.unwrap()).await;
        let dist = |p: (f64, f64)| {
            Some(if spherical {
                if p.0.abs() > 180.0 || p.1.abs() > 90.0 {
                    return None;
                }
                haversine(center, p)
            } else {
                (p.0 - center.0).hypot(p.1 - center.1)
            })
        };
        check_near(
            &format!("query {q}: {filter} limit {limit:?}"),
            &docs,
            &got,
            &dist,
            range,
            limit,
        );
    }
}

/// `$geoNear` streams from the index: with a memory limit that holding every document would
/// break (292, as the form without the index path shows), the nearest few come back.
#[tokio::test]
async fn geo_near_streams_from_the_index() {
    let server = TestServer::start_with(&["--sort-memory-limit-bytes", "20000"]);
    let client = server.client().await;
    let c = client.database("geonear").collection::<Document>("stream");
    index(&c, doc! {"loc": "2dsphere"}).await;
    let mut rng = Rng(7);
    let docs: Vec<Document> = (0..3000)
        .map(|i| {
            let p = (rng.range(-10.0, 10.0), rng.range(-10.0, 10.0));
            doc! {"_id": i, "loc": {"type": "Point", "coordinates": pt(p.0, p.1)}, "pad": "x".repeat(50)}
        })
        .collect();
    c.insert_many(docs.clone()).await.unwrap();
    let center = (1.0, 2.0);
    let near = doc! {"type": "Point", "coordinates": pt(center.0, center.1)};
    let got = collect(
        c.aggregate(vec![
            doc! {"$geoNear": {"near": near.clone(), "distanceField": "d", "query": {"_id": {"$lt": 2000}}}},
            doc! {"$limit": 10},
        ])
        .await
        .unwrap(),
    )
    .await;
    let eligible: Vec<Document> = docs
        .into_iter()
        .filter(|d| d.get_i32("_id").unwrap() < 2000)
        .collect();
    check_near(
        "streamed $geoNear",
        &eligible,
        &got,
        &|p| Some(haversine(center, p) * R),
        (0.0, f64::MAX),
        Some(10),
    );
    // A query the index path does not take ($or) reads and sorts everything: over the limit.
    let e = c
        .aggregate(vec![
            doc! {"$geoNear": {"near": near, "distanceField": "d", "query": {"$or": [{"_id": {"$lt": 2000}}]}}},
            doc! {"$limit": 10},
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(*e.kind, mongodb::error::ErrorKind::Command(ref c) if c.code == 292),
        "{e}"
    );
}

/// Runs a `$geoNear` (then `$limit` when given) and returns its documents.
async fn geo_near(c: &Collection<Document>, stage: Document, limit: Option<i64>) -> Vec<Document> {
    let mut pipeline = vec![doc! {"$geoNear": stage}];
    if let Some(l) = limit {
        pipeline.push(doc! {"$limit": l});
    }
    collect(c.aggregate(pipeline).await.unwrap()).await
}

/// The explain of `[{$geoNear: stage}]`.
async fn explain_geo_near(
    c: &Collection<Document>,
    stage: &Document,
    more: &[Document],
    verbosity: &str,
) -> Document {
    let db = c.client().database(c.namespace().db.as_str());
    let mut pipeline = vec![doc! {"$geoNear": stage.clone()}];
    pipeline.extend(more.iter().cloned());
    db.run_command(doc! {
        "explain": {"aggregate": c.name(), "pipeline": pipeline, "cursor": {}},
        "verbosity": verbosity,
    })
    .await
    .unwrap()
}

/// The name of the first stage an aggregation's explain shows.
async fn first_stage(c: &Collection<Document>, stage: &Document) -> String {
    let e = explain_geo_near(c, stage, &[], "queryPlanner").await;
    let stages = e.get_array("stages").unwrap();
    let first = stages[0].as_document().unwrap();
    first.keys().next().unwrap().clone()
}

/// `explain` of a `$geoNear` the ring search answers shows MongoDB's `$geoNearCursor` stage:
/// the near query as `parsedQuery`, a `GEO_NEAR_2DSPHERE`/`GEO_NEAR_2D` winning plan over
/// the geo index, and with execution statistics the keys and documents the search read (a
/// following `$limit` stops it early); the stages after it follow as usual.
#[tokio::test]
async fn geo_near_explain_shows_the_index_path() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("geonearexplain");
    let mut rng = Rng(5);
    let sphere = db.collection::<Document>("s");
    index(&sphere, doc! {"loc": "2dsphere"}).await;
    let flat = db.collection::<Document>("t");
    index(&flat, doc! {"loc": "2d"}).await;
    let mut docs = Vec::new();
    let mut pairs = Vec::new();
    for i in 0..2000 {
        let p = (rng.range(-20.0, 20.0), rng.range(-20.0, 20.0));
        docs.push(
            doc! {"_id": i, "k": i % 2, "loc": {"type": "Point", "coordinates": pt(p.0, p.1)}},
        );
        pairs.push(doc! {"_id": i, "k": i % 2, "loc": pt(p.0, p.1)});
    }
    sphere.insert_many(docs).await.unwrap();
    flat.insert_many(pairs).await.unwrap();

    let near = doc! {"type": "Point", "coordinates": [1.5, 2.5]};
    let stage = doc! {"near": near.clone(), "distanceField": "d", "maxDistance": 900_000.0, "query": {"k": 1}};
    let e = explain_geo_near(&sphere, &stage, &[doc! {"$limit": 5}], "queryPlanner").await;
    let stages = e.get_array("stages").unwrap();
    assert_eq!(stages.len(), 2, "{e}");
    let cursor = stages[0]
        .as_document()
        .unwrap()
        .get_document("$geoNearCursor")
        .unwrap();
    let qp = cursor.get_document("queryPlanner").unwrap();
    assert_eq!(qp.get_str("namespace").unwrap(), "geonearexplain.s");
    assert_eq!(
        qp.get_document("parsedQuery").unwrap(),
        &doc! {"k": 1, "loc": {"$near": near.clone(), "$maxDistance": 900_000.0}}
    );
    let plan = qp.get_document("winningPlan").unwrap();
    assert_eq!(
        plan.get_str("stage").unwrap(),
        "GEO_NEAR_2DSPHERE",
        "{plan}"
    );
    assert_eq!(plan.get_str("indexName").unwrap(), "loc_2dsphere");
    assert_eq!(
        plan.get_document("keyPattern").unwrap(),
        &doc! {"loc": "2dsphere"}
    );
    assert_eq!(
        stages[1].as_document().unwrap(),
        &doc! {"$limit": 5_i64},
        "{e}"
    );

    // With statistics: the search stopped near the point.
    let e = explain_geo_near(&sphere, &stage, &[doc! {"$limit": 5}], "executionStats").await;
    let stages = e.get_array("stages").unwrap();
    let first = stages[0].as_document().unwrap();
    let stats = first
        .get_document("$geoNearCursor")
        .unwrap()
        .get_document("executionStats")
        .unwrap();
    assert_eq!(stats.get_i32("nReturned").unwrap(), 5, "{stats}");
    let examined = stats.get_i32("totalDocsExamined").unwrap();
    assert!(examined > 5 && examined < 500, "{stats}");
    assert!(stats.get_i32("totalKeysExamined").unwrap() > 0, "{stats}");
    assert_eq!(
        stats
            .get_document("executionStages")
            .unwrap()
            .get_str("stage")
            .unwrap(),
        "GEO_NEAR_2DSPHERE"
    );
    assert_eq!(first.get_i64("nReturned").unwrap(), 5, "{first}");

    // A legacy pair with spherical over a 2d index: $nearSphere, GEO_NEAR_2D.
    let stage =
        doc! {"near": [1.5, 2.5], "distanceField": "d", "spherical": true, "minDistance": 0.01};
    let e = explain_geo_near(&flat, &stage, &[], "queryPlanner").await;
    let qp = e.get_array("stages").unwrap()[0]
        .as_document()
        .unwrap()
        .get_document("$geoNearCursor")
        .unwrap()
        .get_document("queryPlanner")
        .unwrap()
        .clone();
    assert_eq!(
        qp.get_document("parsedQuery").unwrap(),
        &doc! {"loc": {"$nearSphere": [1.5, 2.5], "$minDistance": 0.01}}
    );
    let plan = qp.get_document("winningPlan").unwrap();
    assert_eq!(plan.get_str("stage").unwrap(), "GEO_NEAR_2D", "{plan}");
    assert_eq!(plan.get_str("indexName").unwrap(), "loc_2d");

    // `explain: true` on the command is the queryPlanner form.
    let e = db
        .run_command(doc! {"aggregate": "t", "pipeline": [{"$geoNear": stage}], "explain": true})
        .await
        .unwrap();
    assert!(
        e.get_array("stages").unwrap()[0]
            .as_document()
            .unwrap()
            .contains_key("$geoNearCursor"),
        "{e}"
    );

    // A query the ring search does not take: a collection scan under the stage itself.
    let stage = doc! {"near": near, "distanceField": "d", "query": {"$or": [{"k": 1}]}};
    let e = explain_geo_near(&sphere, &stage, &[], "queryPlanner").await;
    let stages = e.get_array("stages").unwrap();
    let plan = stages[0]
        .as_document()
        .unwrap()
        .get_document("$cursor")
        .unwrap()
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap();
    assert_eq!(plan.get_str("stage").unwrap(), "COLLSCAN");
    assert!(stages[1].as_document().unwrap().contains_key("$geoNear"));

    // A missing collection: NamespaceNotFound, as MongoDB's $geoNear says (Cairn raises it
    // as the pipeline starts, so the message carries the executor's prefix).
    let e = db
        .collection::<Document>("nope")
        .aggregate(vec![
            doc! {"$geoNear": {"near": [0, 0], "distanceField": "d"}},
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(*e.kind, mongodb::error::ErrorKind::Command(ref c) if c.code == 26
            && c.message.ends_with("$geoNear requires a geo index to run, but geonearexplain.nope does not exist")),
        "{e}"
    );
}

/// `$geoNear` through the planner's ring search returns exactly what the same stage returns
/// when it reads and sorts every document (its `query` wrapped in `$and` keeps it off the
/// index): the same documents in the same order, with the same distances and locations, for
/// every form — GeoJSON and legacy `near`, `spherical`, `minDistance`/`maxDistance`,
/// `distanceMultiplier` — over `2dsphere` indexes (points, legacy pairs, lines, polygons) and
/// `2d` indexes (pairs and arrays of pairs). Legacy spherical distances are radians and agree
/// with the client's haversine.
#[tokio::test]
async fn geo_near_index_path_matches_sorting_path() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("geonearpaths");
    let mut compared = 0;
    for seed in 0..3u64 {
        let mut rng = Rng(seed * 7717 + 11);
        let centers: Vec<(f64, f64)> = (0..3)
            .map(|_| (rng.range(-150.0, 150.0), rng.range(-60.0, 60.0)))
            .collect();
        let sphere = db.collection::<Document>(&format!("s{seed}"));
        index(&sphere, doc! {"loc": "2dsphere"}).await;
        let docs: Vec<Document> = (0..600)
            .map(|i| sphere_doc(&mut rng, i, &centers))
            .collect();
        sphere.insert_many(docs).await.unwrap();
        let flat = db.collection::<Document>(&format!("t{seed}"));
        index(&flat, doc! {"loc": "2d"}).await;
        let flat_docs: Vec<Document> = (0..600)
            .map(|i| {
                let c = centers[rng.below(3) as usize];
                let kind = rng.below(7);
                let mut p = || {
                    (
                        (c.0 + rng.range(-8.0, 8.0)).clamp(-179.0, 179.0),
                        c.1 + rng.range(-8.0, 8.0),
                    )
                };
                let loc = match kind {
                    // Not a longitude/latitude: no spherical distance.
                    2 => {
                        let a = p();
                        pt(a.0, 100.0 + a.1.abs())
                    }
                    0 => {
                        let (a, b) = (p(), p());
                        Bson::Array(vec![pt(a.0, a.1), pt(b.0, b.1)])
                    }
                    1 => {
                        let a = p();
                        Bson::Document(doc! {"x": a.0, "y": a.1})
                    }
                    _ => {
                        let a = p();
                        pt(a.0, a.1)
                    }
                };
                doc! {"_id": i, "k": (i % 3), "loc": loc}
            })
            .collect();
        flat.insert_many(flat_docs).await.unwrap();
        for q in 0..24 {
            let cc = centers[rng.below(3) as usize];
            let center = (
                cc.0 + rng.range(-2.0, 2.0),
                (cc.1 + rng.range(-2.0, 2.0)).clamp(-89.0, 89.0),
            );
            // (collection, GeoJSON near, spherical, distance scale: meters, radians or planar)
            let (c, geojson, spherical, scale) = match q % 4 {
                0 => (&sphere, true, rng.below(2) == 0, R),
                1 => (&sphere, false, true, 1.0),
                2 => (&flat, false, true, 1.0),
                _ => (&flat, false, false, 0.0),
            };
            let unit = if scale == 0.0 { 1.0 } else { 1_000_000.0 / R };
            let unit = if scale == R { 1_000_000.0 } else { unit };
            let near = if geojson {
                Bson::Document(doc! {"type": "Point", "coordinates": pt(center.0, center.1)})
            } else {
                pt(center.0, center.1)
            };
            let mut stage = doc! {"near": near, "distanceField": "d", "spherical": spherical, "includeLocs": "at"};
            if rng.below(2) == 0 {
                stage.insert("minDistance", rng.range(0.0, 0.2) * unit);
            }
            if rng.below(2) == 0 {
                stage.insert("maxDistance", rng.range(0.3, 3.0) * unit);
            }
            if rng.below(4) == 0 {
                stage.insert("distanceMultiplier", 3.5);
            }
            let limit = (rng.below(3) != 0).then(|| 1 + rng.below(80) as i64);
            let cond = doc! {"k": {"$lte": rng.below(3) as i32}};
            let mut indexed = stage.clone();
            indexed.insert("query", cond.clone());
            let mut sorted = stage.clone();
            sorted.insert("query", doc! {"$and": [cond]});
            let got = geo_near(c, indexed.clone(), limit).await;
            let want = geo_near(c, sorted.clone(), limit).await;
            // The two really are the two paths.
            assert_eq!(
                first_stage(c, &indexed).await,
                "$geoNearCursor",
                "{indexed}"
            );
            assert_eq!(first_stage(c, &sorted).await, "$cursor", "{sorted}");
            assert_eq!(
                got, want,
                "seed {seed} query {q}: {indexed} limit {limit:?}"
            );
            compared += got.len();
            if spherical && !geojson {
                // Radians, as the client measures them.
                for d in &got {
                    if let Some(p) = point_of(d, "at") {
                        let dist = d.get_f64("d").unwrap()
                            / stage.get_f64("distanceMultiplier").unwrap_or(1.0);
                        let want = haversine(center, p);
                        assert!(
                            (dist - want).abs() <= 1e-9,
                            "seed {seed} query {q}: {dist} vs {want}"
                        );
                    }
                }
            }
        }
    }
    assert!(compared > 1000, "compared {compared} documents");
}

/// The `_id`s `{k}` finds with `hint` (sorted; each document once).
async fn hinted_ids(c: &Collection<Document>, k: i32, hint: Document) -> Vec<i32> {
    let find = c
        .find(doc! {"k": k})
        .hint(mongodb::options::Hint::Keys(hint));
    let mut ids: Vec<i32> = collect(find.await.unwrap())
        .await
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "a document came twice");
    ids
}

/// A hint naming a geo index without a geo predicate scans the whole index, as MongoDB does:
/// each document holding a location once (a polygon's many cells deduplicated), those without
/// one not at all; `explain` shows the index scan.
#[tokio::test]
async fn hinted_geo_index_without_geo_predicate_scans_it() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("geohint");
    let mut rng = Rng(42);
    let centers = [(10.0, 10.0), (-40.0, 30.0)];
    let sphere = db.collection::<Document>("s");
    index(&sphere, doc! {"loc": "2dsphere"}).await;
    let docs: Vec<Document> = (0..300)
        .map(|i| sphere_doc(&mut rng, i, &centers))
        .collect();
    sphere.insert_many(docs.clone()).await.unwrap();
    let flat = db.collection::<Document>("t");
    index(&flat, doc! {"p": "2d"}).await;
    let pairs: Vec<Document> = (0..300)
        .map(|i| match i % 4 {
            0 => doc! {"_id": i, "k": i % 3},
            _ => {
                doc! {"_id": i, "k": i % 3, "p": pt(rng.range(-50.0, 50.0), rng.range(-50.0, 50.0))}
            }
        })
        .collect();
    flat.insert_many(pairs.clone()).await.unwrap();
    for k in 0..3 {
        let want: Vec<i32> = docs
            .iter()
            .filter(|d| {
                d.get_i32("k").unwrap() == k
                    && matches!(d.get("loc"), Some(Bson::Document(_) | Bson::Array(_)))
            })
            .map(|d| d.get_i32("_id").unwrap())
            .collect();
        assert_eq!(hinted_ids(&sphere, k, doc! {"loc": "2dsphere"}).await, want);
        let want: Vec<i32> = pairs
            .iter()
            .filter(|d| d.get_i32("k").unwrap() == k && d.contains_key("p"))
            .map(|d| d.get_i32("_id").unwrap())
            .collect();
        assert_eq!(hinted_ids(&flat, k, doc! {"p": "2d"}).await, want);
    }
    let e = db
        .run_command(doc! {
            "explain": {"find": "s", "filter": {"k": 1}, "hint": {"loc": "2dsphere"}},
            "verbosity": "queryPlanner",
        })
        .await
        .unwrap();
    let plan = e
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap();
    assert_eq!(plan.get_str("stage").unwrap(), "FETCH", "{plan}");
    let ix = plan.get_document("inputStage").unwrap();
    assert_eq!(ix.get_str("stage").unwrap(), "IXSCAN");
    assert_eq!(ix.get_str("indexName").unwrap(), "loc_2dsphere");
    assert_eq!(
        ix.get_document("indexBounds").unwrap(),
        &doc! {"loc": ["[MinKey, MaxKey]"]}
    );
}

/// With execution statistics a `$near` search shows its rings as MongoDB's `searchIntervals`:
/// contiguous, growing outward, the last one inclusive when the search ran out, and their
/// counts adding up to what the stage returned.
#[tokio::test]
async fn near_explain_shows_search_intervals() {
    let server = TestServer::start();
    let client = server.client().await;
    let c = client.database("geointervals").collection::<Document>("c");
    index(&c, doc! {"loc": "2dsphere"}).await;
    let mut rng = Rng(3);
    c.insert_many((0..400).map(|i| {
        doc! {"_id": i, "loc": {"type": "Point", "coordinates": pt(rng.range(-5.0, 5.0), rng.range(-5.0, 5.0))}}
    }))
    .await
    .unwrap();
    let db = c.client().database("geointervals");
    for (filter, limit, radians) in [
        (
            doc! {"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}}}},
            Some(20),
            false,
        ),
        (
            doc! {"loc": {"$nearSphere": [0, 0], "$maxDistance": 0.02}},
            None,
            true,
        ),
    ] {
        let mut find = doc! {"find": "c", "filter": filter.clone()};
        if let Some(l) = limit {
            find.insert("limit", l);
        }
        let e = db
            .run_command(doc! {"explain": find, "verbosity": "executionStats"})
            .await
            .unwrap();
        let stats = e.get_document("executionStats").unwrap();
        let mut stage = stats.get_document("executionStages").unwrap();
        while stage.get_str("stage").unwrap() != "GEO_NEAR_2DSPHERE" {
            stage = stage.get_document("inputStage").unwrap();
        }
        let ivs = stage.get_array("searchIntervals").unwrap();
        assert!(!ivs.is_empty(), "{stage}");
        let mut returned = 0;
        let mut last_max = ivs[0]
            .as_document()
            .unwrap()
            .get_f64("minDistance")
            .unwrap();
        for (n, iv) in ivs.iter().enumerate() {
            let iv = iv.as_document().unwrap();
            let keys: Vec<&str> = iv.keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                [
                    "minDistance",
                    "maxDistance",
                    "maxInclusive",
                    "nBuffered",
                    "nReturned"
                ]
            );
            let (lo, hi) = (
                iv.get_f64("minDistance").unwrap(),
                iv.get_f64("maxDistance").unwrap(),
            );
            assert_eq!(lo, last_max, "{iv}");
            assert!(hi > lo, "{iv}");
            last_max = hi;
            let (b, r) = (
                iv.get_i32("nBuffered").unwrap(),
                iv.get_i32("nReturned").unwrap(),
            );
            assert!(r <= b, "{iv}");
            returned += r;
            if n + 1 < ivs.len() {
                assert!(!iv.get_bool("maxInclusive").unwrap(), "{iv}");
            }
        }
        assert_eq!(returned, stats.get_i32("nReturned").unwrap(), "{stats}");
        if radians {
            // The search measures meters, as MongoDB's does for radians queries too.
            assert!((last_max - 0.02 * R).abs() < 1e-3 * R, "{last_max}");
            assert!(
                ivs.last()
                    .unwrap()
                    .as_document()
                    .unwrap()
                    .get_bool("maxInclusive")
                    .unwrap()
            );
        }
    }
}
