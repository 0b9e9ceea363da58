//! Planner benchmarks: geo index scans next to collection scans, and the memory one huge
//! `$in` costs the server.
//!
//! `geo` (N points, default 200,000: GeoJSON points uniformly in a 20° × 20° box, with a
//! `2dsphere` index):
//! - `$near` (GeoJSON point, `limit 10`) through the index's ring search, next to the same
//!   ten nearest by a collection scan sorted by distance (`$geoNear` + `$limit`, which reads
//!   its whole input): ops/s, and the documents each examines (from `explain`);
//! - `$geoWithin` a 0.2° × 0.2° polygon through the index (IXSCAN over its covering cells),
//!   next to `hint: {$natural: 1}`.
//!
//! Each pair is checked to return the same documents while measured.
//!
//! `inmem`: the resident-memory growth (peak `VmHWM` minus `VmRSS` before, from `/proc`) of a
//! fresh server answering one `count` whose filter is a 1,000,000-element `$in` (about
//! 12 MB of command) on `_id` and on an indexed field, then eight such commands at once.
//! `CAIRN_BIN` picks the server binary, so two builds can be compared.

use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use mongodb::options::Hint;

use crate::harness::{self, Opts, Server};

const DEFAULT_DOCS: usize = 200_000;
const BATCH: usize = 1_000;

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn unit(i: u64) -> f64 {
    (splitmix(i) >> 11) as f64 / (1u64 << 53) as f64
}

fn point(x: f64, y: f64) -> Document {
    doc! {"type": "Point", "coordinates": [x, y]}
}

async fn explain_examined(db: &mongodb::Database, cmd: Document) -> i64 {
    let e = db
        .run_command(doc! {"explain": cmd, "verbosity": "executionStats"})
        .await
        .expect("explain");
    if let Ok(s) = e.get_document("executionStats") {
        return s
            .get("totalDocsExamined")
            .and_then(Bson::as_i64)
            .or_else(|| s.get_i32("totalDocsExamined").ok().map(i64::from))
            .unwrap_or(-1);
    }
    -1
}

/// The `geo` benchmark.
pub async fn run(opts: &Opts) {
    let n = opts.docs.unwrap_or(DEFAULT_DOCS);
    let server = Server::start();
    let client = mongodb::Client::with_uri_str(format!("mongodb://127.0.0.1:{}", server.port))
        .await
        .expect("client");
    let db = client.database("bench_geo");
    let c = db.collection::<Document>("points");
    let t = Instant::now();
    for start in (0..n).step_by(BATCH) {
        let docs: Vec<Document> = (start..(start + BATCH).min(n))
            .map(|i| {
                let i = i as u64;
                let (x, y) = (-10.0 + 20.0 * unit(2 * i), 40.0 + 20.0 * unit(2 * i + 1));
                doc! {"_id": i as i64, "loc": point(x, y), "v": (i % 100) as i32}
            })
            .collect();
        c.insert_many(docs).await.expect("insert");
    }
    println!("loaded {n} points in {:.1} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"loc": "2dsphere"})
            .build(),
    )
    .await
    .expect("index");
    println!("2dsphere index built in {:.1} s", t.elapsed().as_secs_f64());
    let d = opts.duration();
    let mut k = 0u64;
    let mut center = || {
        k += 1;
        (
            -9.0 + 18.0 * unit(1_000_000 + 2 * k),
            41.0 + 18.0 * unit(1_000_001 + 2 * k),
        )
    };

    // $near limit 10: index ring search vs a full scan sorted by distance.
    let near_ids = |docs: Vec<Document>| -> Vec<i64> {
        docs.iter()
            .map(|d| d.get_i64("_id").expect("_id"))
            .collect()
    };
    let m_index = harness::timed(d, async || {
        let (x, y) = center();
        let got: Vec<Document> = collect(
            c.find(doc! {"loc": {"$near": {"$geometry": point(x, y)}}})
                .limit(10)
                .await
                .expect("near"),
        )
        .await;
        assert_eq!(got.len(), 10);
    })
    .await;
    let m_scan = harness::timed(d.max(Duration::from_secs(2)), async || {
        let (x, y) = center();
        let scan: Vec<Document> = collect(
            c.aggregate(vec![
                doc! {"$geoNear": {"near": point(x, y), "distanceField": "d", "spherical": true}},
                doc! {"$limit": 10},
            ])
            .await
            .expect("geoNear"),
        )
        .await;
        let near: Vec<Document> = collect(
            c.find(doc! {"loc": {"$near": {"$geometry": point(x, y)}}})
                .limit(10)
                .await
                .expect("near"),
        )
        .await;
        assert_eq!(near_ids(scan), near_ids(near), "near vs scan at ({x}, {y})");
    })
    .await;
    let (x, y) = center();
    let ex_index = explain_examined(
        &db,
        doc! {"find": "points", "filter": {"loc": {"$near": {"$geometry": point(x, y)}}}, "limit": 10},
    )
    .await;
    harness::row("$near limit 10 (GEO_NEAR_2DSPHERE)", &m_index);
    harness::row("  nearest 10 by full scan (+$near)", &m_scan);
    println!(
        "  docs examined: index {ex_index}, scan {n}; speedup {:.0}x (the scan row also runs one $near)",
        m_index.rate() / m_scan.rate()
    );

    // $geoWithin a small box: IXSCAN over its cells vs a collection scan.
    let boxed = |x: f64, y: f64| {
        doc! {"loc": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [[
            [x, y], [x + 0.2, y], [x + 0.2, y + 0.2], [x, y + 0.2], [x, y]
        ]]}}}}
    };
    let ids = async |filter: Document, natural: bool| -> Vec<i64> {
        let mut f = c.find(filter);
        if natural {
            f = f.hint(Hint::Keys(doc! {"$natural": 1}));
        }
        let mut v: Vec<i64> = collect(f.await.expect("within"))
            .await
            .iter()
            .map(|d| d.get_i64("_id").expect("_id"))
            .collect();
        v.sort_unstable();
        v
    };
    let mut expected = 0usize;
    let m_within = harness::timed(d, async || {
        let (x, y) = center();
        expected += ids(boxed(x, y), false).await.len();
    })
    .await;
    let m_within_scan = harness::timed(d.max(Duration::from_secs(2)), async || {
        let (x, y) = center();
        let a = ids(boxed(x, y), true).await;
        let b = ids(boxed(x, y), false).await;
        assert_eq!(a, b, "within at ({x}, {y})");
    })
    .await;
    let (x, y) = center();
    let ex_within = explain_examined(&db, doc! {"find": "points", "filter": boxed(x, y)}).await;
    harness::row("$geoWithin 0.2° box (IXSCAN)", &m_within);
    harness::row("  same, collection scan (+IXSCAN)", &m_within_scan);
    println!(
        "  docs examined: index {ex_within} (about {:.0} match), scan {n}; speedup {:.0}x",
        expected as f64 / m_within.ops.max(1) as f64,
        m_within.rate() / m_within_scan.rate()
    );
}

async fn collect(mut cur: mongodb::Cursor<Document>) -> Vec<Document> {
    let mut out = Vec::new();
    while cur.advance().await.expect("cursor") {
        out.push(cur.deserialize_current().expect("doc"));
    }
    out
}

/// `(VmRSS, VmHWM)` of a process in KiB.
fn mem_kib(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The `inmem` benchmark.
pub async fn run_inmem(_opts: &Opts) {
    const VALUES: i64 = 1_000_000;
    const DOCS: i64 = 100_000;
    let list: Vec<Bson> = (0..VALUES).map(|i| Bson::Int64(i * 7)).collect();
    for (what, field) in [("_id", "_id"), ("indexed field a", "a")] {
        for clients in [1usize, 8] {
            let server = Server::start();
            let client =
                mongodb::Client::with_uri_str(format!("mongodb://127.0.0.1:{}", server.port))
                    .await
                    .expect("client");
            let db = client.database("bench_inmem");
            let c = db.collection::<Document>("c");
            c.create_index(mongodb::IndexModel::builder().keys(doc! {"a": 1}).build())
                .await
                .expect("index");
            for start in (0..DOCS).step_by(BATCH) {
                let docs: Vec<Document> = (start..(start + BATCH as i64).min(DOCS))
                    .map(|i| doc! {"_id": i, "a": i})
                    .collect();
                c.insert_many(docs).await.expect("insert");
            }
            let cmd = doc! {"count": "c", "query": {field: {"$in": list.clone()}}};
            let bytes = cmd.to_vec().map(|v| v.len()).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(300)).await;
            // Resets the peak (VmHWM) to the current RSS, so loading does not count.
            let _ = std::fs::write(format!("/proc/{}/clear_refs", server.pid()), "5");
            let (rss0, _) = mem_kib(server.pid());
            let t = Instant::now();
            let mut tasks = Vec::new();
            for _ in 0..clients {
                let db = db.clone();
                let cmd = cmd.clone();
                tasks.push(tokio::spawn(async move {
                    db.run_command(cmd).await.expect("count")
                }));
            }
            for t in tasks {
                let r = t.await.expect("join");
                let n = r.get_i32("n").map(i64::from).unwrap_or(-1);
                assert_eq!(n, (DOCS + 6) / 7, "count");
            }
            let took = t.elapsed();
            let (rss1, hwm) = mem_kib(server.pid());
            println!(
                "$in of {VALUES} on {what:<16} ({:.1} MB command) x{clients}: peak RSS +{:>6.0} MB (before {:.0} MB, after {:.0} MB), {:.2} s",
                bytes as f64 / 1e6,
                (hwm.saturating_sub(rss0)) as f64 / 1024.0,
                rss0 as f64 / 1024.0,
                rss1 as f64 / 1024.0,
                took.as_secs_f64()
            );
        }
    }
}
