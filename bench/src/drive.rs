//! A fixed client workload against a server started elsewhere, for profiling it (under
//! `valgrind --tool=callgrind`, `perf record -p`): the same documents and operations as
//! [`crate::compare`], Cairn side only.
//!
//! `cairn-bench drive <port> load [--docs N]` loads the `bench_compare` collections (with
//! the `cat` and `score` indexes); `cairn-bench drive <port> <workload> [--clients N]
//! [--docs N] [--ops N]` then runs `--ops` operations of the workload whose name contains
//! `<workload>` (see [`crate::compare`]: `insert_one`, `find_one`, `indexed eq`, `range`,
//! `$inc`, `$addToSet`, `$match`, `ping`) split over the clients, and prints the elapsed
//! time — so a profiler's totals taken around it divide by a known operation count.
//!
//! The aggregation benchmark's pipelines likewise: `cairn-bench drive <port> agg-load [--docs
//! N]` loads [`crate::agg`]'s data set (database `bench_agg`), and `cairn-bench drive <port>
//! agg:<name> [--ops N]` runs the pipeline named `<name>` (`match+group`, `lookup`, `top-k`,
//! `unwind+group`) `--ops` times, one client, every result read to the end.

use std::sync::Arc;
use std::time::Instant;

use crate::compare;

/// Runs `drive` with its arguments (after the subcommand).
pub async fn run(args: &[String]) {
    let port: u16 = args.first().and_then(|p| p.parse().ok()).expect("port");
    let what = args.get(1).cloned().unwrap_or_default();
    let mut docs = compare::DOCS;
    let mut clients = 1usize;
    let mut ops = 10_000u64;
    let mut it = args.iter().skip(2);
    while let Some(a) = it.next() {
        let v = it.next().map(String::as_str).unwrap_or("");
        match a.as_str() {
            "--docs" => docs = v.parse().expect("--docs"),
            "--clients" => clients = v.parse().expect("--clients"),
            "--ops" => ops = v.parse().expect("--ops"),
            other => panic!("unknown option {other}"),
        }
    }
    let client = mongodb::Client::with_uri_str(format!(
        "mongodb://127.0.0.1:{port}/?maxPoolSize={}&minPoolSize={}",
        clients + 2,
        clients
    ))
    .await
    .expect("client");
    if let Some(name) = what.strip_prefix("agg:") {
        let (name, coll, pipeline) = crate::agg::pipelines()
            .into_iter()
            .find(|(n, _, _)| *n == name)
            .unwrap_or_else(|| panic!("no aggregation pipeline named {name}"));
        let c = client
            .database("bench_agg")
            .collection::<bson::Document>(coll);
        let t = Instant::now();
        let mut out = 0usize;
        for _ in 0..ops {
            out += crate::agg::collect(&c, pipeline.clone()).await.len();
        }
        let e = t.elapsed().as_secs_f64();
        println!("{ops} × {name} ({out} results) in {e:.2} s");
        return;
    }
    if what == "agg-load" {
        crate::agg::load_cairn(&client.database("bench_agg"), docs).await;
        return;
    }
    let db = client.database("bench_compare");
    if what == "load" {
        let t = Instant::now();
        compare::load_cairn(&db, docs).await;
        println!(
            "loaded {docs} documents in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        return;
    }
    let w = compare::workload(&what).unwrap_or_else(|| panic!("no workload named {what}"));
    let shared = Arc::new(compare::Shared::new(docs));
    let mut tasks = Vec::new();
    let t = Instant::now();
    for k in 0..clients {
        let mut wk = compare::cairn_worker(&db);
        let shared = shared.clone();
        let n = ops / clients as u64 + u64::from((k as u64) < ops % clients as u64);
        tasks.push(tokio::spawn(async move {
            let mut x = compare::seed(k as u64 + 1);
            for _ in 0..n {
                wk.op(w, &mut x, &shared).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("client");
    }
    let e = t.elapsed().as_secs_f64();
    println!(
        "{ops} × {} with {clients} clients in {e:.2} s ({:.0} ops/s)",
        w.name(),
        ops as f64 / e
    );
}
