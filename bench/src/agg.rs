//! Aggregation benchmarks, each next to PostgreSQL doing the same work on a JSONB table when
//! `CAIRN_BENCH_PG` names one (`bench/agg.sh` sets up a throwaway PostgreSQL 15 and runs this).
//! On a shared, noisy machine the ratio is the number to read; Cairn and PostgreSQL are timed
//! alternately (A B A B) so that both share the machine's drift.
//!
//! Data (N documents, default 1,000,000): `{_id: i, g: <0..19>, s: i % 10, v: <0..999>, tags:
//! [5 of 50 words], pad: <40 bytes>}` with an index on `s`; PostgreSQL holds the same documents
//! as `events(id int primary key, doc jsonb)` with an expression index on `(doc->>'s')::int`
//! and `ANALYZE` run. Orders/customers: 10,000 customers `{_id, cid, region}` (index on `cid`)
//! and 100,000 orders `{_id, cust, amount}`.
//!
//! - match+group: `[{$match: {s: 3}}, {$group: {_id: "$g", total: {$sum: "$v"}, avg: {$avg:
//!   "$v"}}}]` — 10% of the documents through an index, 20 groups — vs `SELECT doc->>'g',
//!   sum(v), avg(v) … WHERE (doc->>'s')::int = 3 GROUP BY 1`; reported as matched documents
//!   per second.
//! - lookup: 100k orders `$lookup` their customer on the indexed `cid`, then `$unwind` and
//!   `$group` by region — vs the `JOIN … GROUP BY`.
//! - top-k: `$sort: {v: -1, _id: 1}` + `$limit: 10` over all N documents (no index on `v`: a
//!   top-k sort) — vs `ORDER BY … LIMIT 10`.
//! - unwind+group: `[{$match: {s: 3}}, {$unwind: "$tags"}, {$group: {_id: "$tags", n: {$sum:
//!   1}}}]` — 5-element arrays, 500k unwound documents at N = 1M — vs
//!   `jsonb_array_elements_text … GROUP BY`.
//!
//! Each row also gives the server CPU per run (user + system from `/proc/<pid>/stat` of the
//! Cairn server, and of the postmaster named by `CAIRN_BENCH_PG_PID` with its children — the
//! backend and any parallel workers), read around every timed run.
//!
//! Every result is checked (group totals and counts agree between the two systems, the top
//! 10 is the right one) before it is timed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bson::{Document, doc};
use tokio_postgres::NoTls;

use crate::harness::{Opts, Server};
use crate::pg::cpu_seconds;

const DEFAULT_DOCS: usize = 1_000_000;
const BATCH: usize = 1_000;
const CUSTOMERS: i64 = 10_000;
const ORDERS: i64 = 100_000;

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

const WORDS: [&str; 50] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "red", "orange", "yellow", "green",
    "blue", "indigo", "violet", "black", "white", "grey", "pink", "brown", "cyan", "teal", "olive",
    "navy", "maroon", "lime", "aqua", "silver", "gold", "coral", "ivory", "plum",
];

fn event(i: i64) -> Document {
    let h = splitmix(i as u64);
    let tags: Vec<&str> = (0..5)
        .map(|k| WORDS[((h >> (k * 8)) % 50) as usize])
        .collect();
    doc! {
        "_id": i,
        "g": ((h >> 40) % 20) as i32,
        "s": (i % 10) as i32,
        "v": (h % 1000) as i32,
        "tags": tags,
        "pad": format!("{:040x}", u128::from(h) * 0x1000_0000_0000_0001),
    }
}

fn customer(c: i64) -> Document {
    doc! {"_id": c, "cid": c as i32 * 7, "region": format!("r{}", c % 12)}
}

fn order(o: i64) -> Document {
    let h = splitmix(o as u64 ^ 0xABCD);
    doc! {"_id": o, "cust": ((o % CUSTOMERS) * 7) as i32, "amount": (h % 500) as i32}
}

/// The benchmark documents as JSON (they hold only integers, strings and arrays of those).
fn json(d: &Document) -> serde_json::Value {
    fn value(v: &bson::Bson) -> serde_json::Value {
        match v {
            bson::Bson::Int32(i) => (*i).into(),
            bson::Bson::Int64(i) => (*i).into(),
            bson::Bson::String(s) => s.as_str().into(),
            bson::Bson::Array(a) => a.iter().map(value).collect(),
            bson::Bson::Document(d) => json(d),
            other => panic!("unexpected value in a benchmark document: {other:?}"),
        }
    }
    d.iter().map(|(k, v)| (k.clone(), value(v))).collect()
}

/// One target's totals: runs, wall time and server CPU seconds.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    runs: usize,
    wall: Duration,
    cpu: f64,
}

impl Tally {
    fn rate(&self) -> f64 {
        self.runs as f64 / self.wall.as_secs_f64()
    }
    /// Server CPU milliseconds per run.
    fn cpu_ms(&self) -> f64 {
        self.cpu / self.runs.max(1) as f64 * 1e3
    }
}

/// Server processes whose CPU (`/proc/<pid>/stat`, with direct children: PostgreSQL's
/// backends and parallel workers) is charged to each target.
#[derive(Debug, Clone, Copy)]
struct Pids {
    cairn: u32,
    pg: Option<u32>,
}

/// Alternates `a` and `b` until each has run for `d` (at least `min` times each); returns
/// each one's tally (runs, time, server CPU).
async fn alternate(
    d: Duration,
    min: usize,
    pids: Pids,
    mut a: impl AsyncFnMut(),
    mut b: Option<impl AsyncFnMut()>,
) -> (Tally, Option<Tally>) {
    let (mut ta, mut tb) = (Tally::default(), Tally::default());
    while ta.wall < d || ta.runs < min || (b.is_some() && (tb.wall < d || tb.runs < min)) {
        if ta.wall < d || ta.runs < min {
            let c = cpu_seconds(pids.cairn);
            let t = Instant::now();
            a().await;
            ta.wall += t.elapsed();
            ta.cpu += cpu_seconds(pids.cairn) - c;
            ta.runs += 1;
        }
        if let Some(b) = b.as_mut()
            && (tb.wall < d || tb.runs < min)
        {
            let c = pids.pg.map_or(0.0, cpu_seconds);
            let t = Instant::now();
            b().await;
            tb.wall += t.elapsed();
            tb.cpu += pids.pg.map_or(0.0, cpu_seconds) - c;
            tb.runs += 1;
        }
    }
    (ta, b.map(|_| tb))
}

fn report(name: &str, unit: &str, per_run: f64, cairn: Tally, pg: Option<Tally>) {
    let c = cairn.rate();
    match pg {
        Some(pt) => {
            let p = pt.rate();
            println!(
                "{name:<16} cairn {:>10.0} {unit}/s ({c:>6.2} runs/s, cpu {:>7.1} ms/run)   postgres {:>10.0} {unit}/s ({p:>6.2} runs/s, cpu {:>7.1} ms/run)   cairn/postgres {:.2}",
                c * per_run,
                cairn.cpu_ms(),
                p * per_run,
                pt.cpu_ms(),
                c / p
            )
        }
        None => println!(
            "{name:<16} cairn {:>10.0} {unit}/s ({c:>6.2} runs/s, cpu {:>7.1} ms/run)",
            c * per_run,
            cairn.cpu_ms()
        ),
    }
}

pub(crate) async fn collect(c: &mongodb::Collection<Document>, p: Vec<Document>) -> Vec<Document> {
    let mut cur = c.aggregate(p).await.expect("aggregate");
    let mut out = Vec::new();
    while cur.advance().await.expect("getMore") {
        out.push(cur.deserialize_current().expect("document"));
    }
    out
}

/// The benchmark's pipelines by name, each with the collection it runs on (shared with
/// `cairn-bench drive`, which runs them for profiling).
pub(crate) fn pipelines() -> [(&'static str, &'static str, Vec<Document>); 4] {
    [
        (
            "match+group",
            "events",
            vec![
                doc! {"$match": {"s": 3}},
                doc! {"$group": {"_id": "$g", "total": {"$sum": "$v"}, "avg": {"$avg": "$v"}}},
            ],
        ),
        (
            "lookup",
            "orders",
            vec![
                doc! {"$lookup": {"from": "customers", "localField": "cust", "foreignField": "cid", "as": "c"}},
                doc! {"$unwind": "$c"},
                doc! {"$group": {"_id": "$c.region", "total": {"$sum": "$amount"}, "n": {"$sum": 1}}},
            ],
        ),
        (
            "top-k",
            "events",
            vec![
                doc! {"$sort": {"v": -1, "_id": 1}},
                doc! {"$limit": 10},
                doc! {"$project": {"v": 1}},
            ],
        ),
        (
            "unwind+group",
            "events",
            vec![
                doc! {"$match": {"s": 3}},
                doc! {"$unwind": "$tags"},
                doc! {"$group": {"_id": "$tags", "n": {"$sum": 1}}},
            ],
        ),
    ]
}

pub(crate) async fn load_cairn(db: &mongodb::Database, n: usize) {
    let events = db.collection::<Document>("events");
    let t = Instant::now();
    let mut i = 0i64;
    while (i as usize) < n {
        let end = (i + BATCH as i64).min(n as i64);
        events
            .insert_many((i..end).map(event))
            .await
            .expect("insert events");
        i = end;
    }
    events
        .create_index(mongodb::IndexModel::builder().keys(doc! {"s": 1}).build())
        .await
        .expect("index s");
    let customers = db.collection::<Document>("customers");
    customers
        .insert_many((0..CUSTOMERS).map(customer))
        .await
        .expect("insert customers");
    customers
        .create_index(mongodb::IndexModel::builder().keys(doc! {"cid": 1}).build())
        .await
        .expect("index cid");
    let orders = db.collection::<Document>("orders");
    let mut o = 0;
    while o < ORDERS {
        let end = (o + BATCH as i64).min(ORDERS);
        orders
            .insert_many((o..end).map(order))
            .await
            .expect("insert orders");
        o = end;
    }
    println!(
        "cairn: loaded {n} events, {CUSTOMERS} customers, {ORDERS} orders in {:.1} s",
        t.elapsed().as_secs_f64()
    );
}

async fn load_pg(pg: &tokio_postgres::Client, n: usize) {
    let t = Instant::now();
    pg.batch_execute(
        "DROP TABLE IF EXISTS events, customers, orders;
         CREATE TABLE events (id bigint PRIMARY KEY, doc jsonb NOT NULL);
         CREATE TABLE customers (id bigint PRIMARY KEY, doc jsonb NOT NULL);
         CREATE TABLE orders (id bigint PRIMARY KEY, doc jsonb NOT NULL);",
    )
    .await
    .expect("create tables");
    for (table, count, make) in [
        ("events", n as i64, event as fn(i64) -> Document),
        ("customers", CUSTOMERS, customer),
        ("orders", ORDERS, order),
    ] {
        let stmt = pg
            .prepare(&format!(
                "INSERT INTO {table} SELECT * FROM unnest($1::bigint[], $2::jsonb[])"
            ))
            .await
            .expect("prepare insert");
        let mut i = 0i64;
        while i < count {
            let end = (i + 5_000).min(count);
            let ids: Vec<i64> = (i..end).collect();
            let docs: Vec<serde_json::Value> = (i..end).map(|k| json(&make(k))).collect();
            pg.execute(&stmt, &[&ids, &docs]).await.expect("insert");
            i = end;
        }
    }
    pg.batch_execute(
        "CREATE INDEX ON events (((doc->>'s')::int));
         CREATE INDEX ON customers (((doc->>'cid')::int));
         ANALYZE events; ANALYZE customers; ANALYZE orders;",
    )
    .await
    .expect("indexes");
    println!(
        "postgres: loaded the same data in {:.1} s",
        t.elapsed().as_secs_f64()
    );
}

/// `{key: (i64, f64)}` from Cairn's group results.
fn cairn_groups(docs: &[Document], a: &str, b: &str) -> BTreeMap<String, (i64, f64)> {
    docs.iter()
        .map(|d| {
            let key = match d.get("_id") {
                Some(bson::Bson::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            let num = |f: &str| match d.get(f) {
                Some(bson::Bson::Int32(i)) => f64::from(*i),
                Some(bson::Bson::Int64(i)) => *i as f64,
                Some(bson::Bson::Double(x)) => *x,
                _ => 0.0,
            };
            (key, (num(a) as i64, num(b)))
        })
        .collect()
}

/// Runs the aggregation benchmarks.
pub async fn run(opts: &Opts) {
    let n = opts.docs.unwrap_or(DEFAULT_DOCS);
    let server = Server::start();
    let client = mongodb::Client::with_uri_str(format!(
        "mongodb://127.0.0.1:{}/?serverSelectionTimeoutMS=10000",
        server.port
    ))
    .await
    .expect("client");
    let db = client.database("bench_agg");
    let pg = match std::env::var("CAIRN_BENCH_PG") {
        Ok(url) => {
            let (c, conn) = tokio_postgres::connect(&url, NoTls)
                .await
                .expect("connect to PostgreSQL");
            tokio::spawn(async move {
                let _ = conn.await;
            });
            let v: String = c
                .query_one("SHOW server_version", &[])
                .await
                .expect("version")
                .get(0);
            println!("postgres {v} at {url}");
            Some(c)
        }
        Err(_) => {
            println!("CAIRN_BENCH_PG not set: Cairn only (bench/agg.sh runs PostgreSQL too)");
            None
        }
    };
    load_cairn(&db, n).await;
    if let Some(pg) = &pg {
        load_pg(pg, n).await;
    }
    let d = opts.duration();
    let pids = Pids {
        cairn: server.pid(),
        pg: pg.as_ref().and_then(|_| {
            std::env::var("CAIRN_BENCH_PG_PID")
                .ok()
                .and_then(|p| p.trim().parse().ok())
        }),
    };
    let events = db.collection::<Document>("events");

    // 1. $match (10%, indexed) + $group (20 groups, $sum/$avg).
    let [
        (_, _, pipeline),
        (_, _, lookup),
        (_, _, topk),
        (_, _, unwind),
    ] = pipelines();
    let got = cairn_groups(&collect(&events, pipeline.clone()).await, "total", "avg");
    assert_eq!(got.len(), 20, "20 groups");
    let sql = "SELECT doc->>'g', sum((doc->>'v')::int)::bigint, avg((doc->>'v')::int)::float8 \
               FROM events WHERE (doc->>'s')::int = 3 GROUP BY 1";
    if let Some(pg) = &pg {
        let rows = pg.query(sql, &[]).await.expect("group");
        let want: BTreeMap<String, (i64, f64)> = rows
            .iter()
            .map(|r| {
                (
                    r.get::<_, String>(0),
                    (r.get::<_, i64>(1), r.get::<_, f64>(2)),
                )
            })
            .collect();
        for (k, (t, a)) in &want {
            let (gt, ga) = got.get(k).copied().unwrap_or_default();
            assert!(
                gt == *t && (ga - a).abs() < 1e-9,
                "group {k}: cairn {gt}/{ga}, postgres {t}/{a}"
            );
        }
    }
    let stmt = match &pg {
        Some(pg) => Some(pg.prepare(sql).await.expect("prepare")),
        None => None,
    };
    let (c, p) = alternate(
        d,
        3,
        pids,
        async || {
            collect(&events, pipeline.clone()).await;
        },
        pg.as_ref().zip(stmt.as_ref()).map(|(pg, st)| {
            async move || {
                pg.query(st, &[]).await.expect("group");
            }
        }),
    )
    .await;
    report("match+group", "docs", (n / 10) as f64, c, p);

    // 2. $lookup of 100k orders against 10k customers on the indexed cid.
    let orders = db.collection::<Document>("orders");
    let got = cairn_groups(&collect(&orders, lookup.clone()).await, "total", "n");
    assert_eq!(got.values().map(|(_, n)| *n as i64).sum::<i64>(), ORDERS);
    let sql = "SELECT c.doc->>'region', sum((o.doc->>'amount')::int)::bigint, count(*)::float8 \
               FROM orders o JOIN customers c ON (c.doc->>'cid')::int = (o.doc->>'cust')::int \
               GROUP BY 1";
    if let Some(pg) = &pg {
        let rows = pg.query(sql, &[]).await.expect("join");
        for r in &rows {
            let k: String = r.get(0);
            let t: i64 = r.get(1);
            assert_eq!(got.get(&k).map(|x| x.0), Some(t), "region {k}");
        }
    }
    let stmt = match &pg {
        Some(pg) => Some(pg.prepare(sql).await.expect("prepare")),
        None => None,
    };
    let (c, p) = alternate(
        d,
        2,
        pids,
        async || {
            collect(&orders, lookup.clone()).await;
        },
        pg.as_ref().zip(stmt.as_ref()).map(|(pg, st)| {
            async move || {
                pg.query(st, &[]).await.expect("join");
            }
        }),
    )
    .await;
    report("lookup", "orders", ORDERS as f64, c, p);

    // 3. $sort + $limit top-k over every document.
    let got = collect(&events, topk.clone()).await;
    assert_eq!(got.len(), 10);
    let sql = "SELECT id, (doc->>'v')::int FROM events ORDER BY (doc->>'v')::int DESC, id LIMIT 10";
    if let Some(pg) = &pg {
        let rows = pg.query(sql, &[]).await.expect("top-k");
        let want: Vec<i64> = rows.iter().map(|r| r.get::<_, i64>(0)).collect();
        let have: Vec<i64> = got.iter().map(|d| d.get_i64("_id").expect("_id")).collect();
        assert_eq!(have, want, "the top 10");
    }
    let stmt = match &pg {
        Some(pg) => Some(pg.prepare(sql).await.expect("prepare")),
        None => None,
    };
    let (c, p) = alternate(
        d,
        2,
        pids,
        async || {
            collect(&events, topk.clone()).await;
        },
        pg.as_ref().zip(stmt.as_ref()).map(|(pg, st)| {
            async move || {
                pg.query(st, &[]).await.expect("top-k");
            }
        }),
    )
    .await;
    report("sort+limit top10", "docs", n as f64, c, p);

    // 4. $unwind + $group over 5-element arrays (the 10% subset).
    let got = cairn_groups(&collect(&events, unwind.clone()).await, "n", "n");
    assert_eq!(
        got.values().map(|(n, _)| *n).sum::<i64>(),
        (n / 10 * 5) as i64
    );
    let sql = "SELECT t, count(*)::bigint FROM events, jsonb_array_elements_text(doc->'tags') t \
               WHERE (doc->>'s')::int = 3 GROUP BY t";
    if let Some(pg) = &pg {
        let rows = pg.query(sql, &[]).await.expect("unwind");
        for r in &rows {
            let k: String = r.get(0);
            let c: i64 = r.get(1);
            assert_eq!(got.get(&k).map(|x| x.0), Some(c), "tag {k}");
        }
    }
    let stmt = match &pg {
        Some(pg) => Some(pg.prepare(sql).await.expect("prepare")),
        None => None,
    };
    let (c, p) = alternate(
        d,
        3,
        pids,
        async || {
            collect(&events, unwind.clone()).await;
        },
        pg.as_ref().zip(stmt.as_ref()).map(|(pg, st)| {
            async move || {
                pg.query(st, &[]).await.expect("unwind");
            }
        }),
    )
    .await;
    report("unwind+group", "unwound", (n / 10 * 5) as f64, c, p);
}
