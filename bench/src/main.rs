//! Cairn benchmarks. Each benchmark runs Cairn next to a baseline doing the same work in the
//! same process run, and prints both plus the ratio — on a shared, noisy machine the ratio is
//! the number to read, not the absolute times.
//!
//! `cargo run -p cairn-bench --release -- ping [--seconds S] [--clients N]`:
//! OP_MSG `ping` round trips against a freshly spawned release `cairn`, next to the same
//! bytes bounced off a raw TCP echo server (the network floor), and through the official Rust
//! driver.
//!
//! `cargo run -p cairn-bench --release -- storage [--seconds S] [--clients N]`:
//! insertMany of 100k 10-field documents and `_id` point reads (1 and N clients), next to
//! raw fjall writing and reading the same key-value pairs.
//!
//! `cargo run -p cairn-bench --release -- crud [--seconds S]`: filtered collection scans,
//! `$inc`, `$addToSet` and `$pullAll`, with the keys read and written per operation.
//!
//! `cargo run -p cairn-bench --release -- indexes [--docs N] [--seconds S]`: secondary
//! indexes on N documents (default 1,000,000): insert throughput with 0, 1 and 3 indexes,
//! index build, equality and range lookups, sort+limit and count through an index, each next
//! to the same query forced to (or, for sort, left with) a collection scan, with the keys and
//! documents examined per query from `explain`.
//!
//! `cargo run -p cairn-bench --release -- txn [--seconds S]`: two-account transfers in
//! multi-document transactions at 1, 8 and 32 clients next to the same transfer as a
//! PostgreSQL 15 transaction on a JSONB table (a throwaway cluster, see [`pg`]), with the
//! rerun rate and server CPU per transfer; then a transaction's own cost.
//!
//! `cargo run -p cairn-bench --release -- agg [--docs N] [--seconds S]`: aggregation
//! pipelines ($match+$group, $lookup, top-k $sort+$limit, $unwind+$group) next to PostgreSQL
//! doing the same on JSONB when `CAIRN_BENCH_PG` is set; `bench/agg.sh` starts a throwaway
//! PostgreSQL 15 and runs it.
//!
//! `cargo run -p cairn-bench --release -- compare [--docs N] [--seconds S]`: every everyday
//! workload (insertMany, insert_one, find_one by `_id`, indexed equality, range+sort+limit,
//! `$inc`, `$addToSet`, `$match`+`$group`, ping) against Cairn and a throwaway PostgreSQL 15
//! loaded with the same documents, with ops/s, p50/p99, server and client CPU per operation
//! and the ratios (see [`compare`]).
//!
//! `cargo run -p cairn-bench --release -- pack [--docs N] [--seconds S]`: the storage layer's
//! insert, point read, `$inc` and `$push` rates by document size and pack threshold (how the
//! default threshold was chosen; see [`pack`]).
//!
//! `cairn-bench drive <port> <load|workload> [--docs N] [--clients N] [--ops N]`: a fixed
//! number of [`compare`]'s Cairn operations against a server started elsewhere, for
//! profiling it (see [`drive`]).
//!
//! `cargo run -p cairn-bench --release -- streams [--seconds S]`: insert throughput with and
//! without a change stream draining the events, and commit-to-delivery latency with 1 and 100
//! open streams, next to PostgreSQL 15 inserts with a `NOTIFY` trigger and `LISTEN`ing
//! connections.

//! `cargo run -p cairn-bench --release -- geo [--docs N] [--seconds S]`: `$near` limit 10
//! and `$geoWithin` a small box over N points through a `2dsphere` index next to collection
//! scans; `inmem`: the server's resident-memory growth for 1M-element `$in` commands (see
//! [`geo`]).

mod agg;
mod compare;
mod crud;
mod drive;
mod geo;
mod harness;
mod indexes;
mod pack;
mod pg;
mod ping;
mod storage;
mod streams;
mod txn;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(bench) = args.first() else {
        eprintln!(
            "usage: cairn-bench <ping|storage|storemem|crud|indexes|txn|agg|compare|pack|streams|geo|inmem> [--seconds S] [--clients N] [--docs N]"
        );
        std::process::exit(2);
    };
    if bench == "drive" {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(drive::run(&args[1..]));
        return;
    }
    if bench == "storemem" {
        storage::run_storemem(&args[1..]);
        return;
    }
    let opts = if bench == "echo-server" {
        harness::Opts::parse(&[])
    } else {
        harness::Opts::parse(&args[1..])
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    match bench.as_str() {
        "ping" => rt.block_on(ping::run(&opts)),
        "echo-server" => rt.block_on(ping::echo_server_main()),
        "storage" => rt.block_on(storage::run(&opts)),
        "crud" => rt.block_on(crud::run(&opts)),
        "indexes" => rt.block_on(indexes::run(&opts)),
        "txn" => rt.block_on(txn::run(&opts)),
        "agg" => rt.block_on(agg::run(&opts)),
        "compare" => rt.block_on(compare::run(&opts)),
        "pack" => rt.block_on(pack::run(&opts)),
        "streams" => rt.block_on(streams::run(&opts)),
        "geo" => rt.block_on(geo::run(&opts)),
        "inmem" => rt.block_on(geo::run_inmem(&opts)),
        other => {
            eprintln!("unknown benchmark {other}");
            std::process::exit(2);
        }
    }
}
