//! Secondary-index benchmarks: every query through an index is measured next to the same
//! query answered by a collection scan in the same run (forced with `hint: {$natural: 1}`,
//! or, for sort, on an unindexed field), and the speedup is the number to read. The keys and
//! documents each indexed query examines come from `explain` (`executionStats`) and are
//! checked against what the query needs.
//!
//! Documents: `{_id: i, a: <a permutation of 0..N>, b: i % 1000, c: <20 random
//! alphanumerics>, d: i % 7, pad: <100 bytes>}`, inserted with `insertMany` of 1,000.
//!
//! - insert: min(N, 200,000) documents into collections with 0, 1 (`a`) and 3 (`a`, `b`,
//!   `c`) secondary indexes, in the order 0, 1, 3, 3, 1, 0 (half the documents per pass, so
//!   that a drift of the machine's speed cancels out): docs/s and the slowdown per index set.
//! - build: `createIndexes` on `b`, then on `a`, over the full N-document collection, next to
//!   the insert throughput of that collection: docs/s.
//! - equality `find({a: X})` for random X, and a 100-entry range
//!   `find({a: {$gte: X, $lt: X + 100}})`, vs the same with `hint: {$natural: 1}`.
//! - `find({}).sort({a: -1}).limit(10)` vs `.sort({c: -1}).limit(10)` (no index on `c`: a
//!   top-k sort over every document); the indexed one must examine exactly 10 keys and 10
//!   documents.
//! - `count` of `{b: 5}` (COUNT_SCAN) vs the same with `hint: {$natural: 1}`.
//!
//! Every result is verified while it is measured (one document for the lookup, the exact 100
//! for the range, the exact top 10 for both sorts, the exact count). Planner surprises (a
//! collection scan where an index applies, more keys or documents examined than the query
//! needs) are printed as `PLANNER PROBLEM` lines and fail the run at the end, after every
//! number has been printed.

use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use mongodb::options::Hint;

use crate::harness::{self, Measured, Opts, Server};

/// Documents in the main collection unless `--docs` says otherwise.
const DEFAULT_DOCS: usize = 1_000_000;
/// Documents per collection in the insert-throughput part, at most.
const INSERT_DOCS: usize = 200_000;
/// Documents per insertMany batch.
const BATCH: usize = 1_000;
/// Entries returned by the range scan.
const RANGE: i64 = 100;
/// The sort limit.
const TOP: usize = 10;
/// Collection-scan variants run at least this many times.
const MIN_SCANS: usize = 3;

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

const ALNUM: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `len` alphanumerics derived from `seed`.
fn alnum(seed: u64, len: usize) -> String {
    let mut s = String::with_capacity(len);
    let mut h = splitmix(seed);
    for k in 0..len {
        if k % 10 == 9 {
            h = splitmix(h);
        }
        s.push(ALNUM[(h % ALNUM.len() as u64) as usize] as char);
        h /= ALNUM.len() as u64;
    }
    s
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The documents of one collection: `a` is `i * mul mod n`, a permutation of `0..n` (so a
/// range of 100 consecutive values holds exactly 100 documents, scattered over `_id`).
#[derive(Debug, Clone, Copy)]
struct Gen {
    n: usize,
    mul: u64,
}

impl Gen {
    fn new(n: usize) -> Gen {
        let mut mul = 1_000_003u64;
        while gcd(mul, n as u64) != 1 {
            mul += 2;
        }
        Gen { n, mul }
    }

    fn a(&self, i: usize) -> i64 {
        ((i as u128 * u128::from(self.mul)) % self.n as u128) as i64
    }

    fn c(i: usize) -> String {
        alnum(i as u64, 20)
    }

    fn doc(&self, i: usize) -> Document {
        doc! {
            "_id": i as i64,
            "a": self.a(i),
            "b": (i % 1000) as i32,
            "c": Gen::c(i),
            "d": (i % 7) as i32,
            "pad": alnum(!(i as u64), 100),
        }
    }
}

/// Inserts documents `range` of `g` in batches of [`BATCH`]; returns the time spent inside
/// `insertMany` (document generation is not timed).
async fn insert(
    coll: &mongodb::Collection<Document>,
    g: &Gen,
    range: std::ops::Range<usize>,
) -> Duration {
    let mut spent = Duration::ZERO;
    let mut i = range.start;
    while i < range.end {
        let end = (i + BATCH).min(range.end);
        let docs: Vec<Document> = (i..end).map(|k| g.doc(k)).collect();
        let t = Instant::now();
        coll.insert_many(docs).await.expect("insertMany");
        spent += t.elapsed();
        i = end;
    }
    spent
}

fn throughput(ops: usize, elapsed: Duration) -> Measured {
    Measured {
        ops: ops as u64,
        elapsed,
        p50: Duration::ZERO,
        p99: Duration::ZERO,
    }
}

async fn create_index(db: &mongodb::Database, coll: &str, key: Document, name: &str) {
    db.run_command(doc! {
        "createIndexes": coll,
        "indexes": [{"key": key, "name": name}],
    })
    .await
    .expect("createIndexes");
}

/// Like [`harness::timed`], but at least `min` operations even when each takes longer than
/// the whole phase (the collection scans).
async fn timed_min(d: Duration, min: usize, mut op: impl AsyncFnMut()) -> Measured {
    let mut lat = Vec::new();
    let start = Instant::now();
    while start.elapsed() < d || lat.len() < min {
        let t = Instant::now();
        op().await;
        lat.push(t.elapsed());
    }
    harness::summarize(lat, start.elapsed())
}

async fn all(mut cur: mongodb::Cursor<Document>) -> Vec<Document> {
    let mut out = Vec::new();
    while cur.advance().await.expect("cursor") {
        out.push(cur.deserialize_current().expect("document"));
    }
    out
}

fn int(d: &Document, k: &str) -> i64 {
    match d.get(k) {
        Some(Bson::Int32(v)) => i64::from(*v),
        Some(Bson::Int64(v)) => *v,
        Some(Bson::Double(v)) => *v as i64,
        other => panic!("{k}: not a number: {other:?}"),
    }
}

/// What `explain` (`executionStats`) says about one query.
#[derive(Debug, Clone)]
struct Explained {
    /// The winning stage tree, root first: `LIMIT > FETCH > IXSCAN(a_1 backward)`.
    stages: String,
    keys: i64,
    docs: i64,
    returned: i64,
    rejected: usize,
    raw: Document,
}

fn stage_chain(s: &Document, out: &mut Vec<String>) {
    let name = s.get_str("stage").unwrap_or("?");
    let label = match (s.get_str("indexName"), s.get_str("direction")) {
        (Ok(ix), Ok(dir)) => format!("{name}({ix} {dir})"),
        _ => name.to_string(),
    };
    out.push(label);
    if let Ok(input) = s.get_document("inputStage") {
        stage_chain(input, out);
    } else if let Ok(inputs) = s.get_array("inputStages") {
        let parts: Vec<String> = inputs
            .iter()
            .filter_map(Bson::as_document)
            .map(|c| {
                let mut v = Vec::new();
                stage_chain(c, &mut v);
                v.join(" > ")
            })
            .collect();
        out.push(format!("[{}]", parts.join(" | ")));
    }
}

async fn explain(db: &mongodb::Database, cmd: Document) -> Explained {
    let raw = db
        .run_command(doc! {"explain": cmd, "verbosity": "executionStats"})
        .await
        .expect("explain");
    let es = raw.get_document("executionStats").expect("executionStats");
    let mut chain = Vec::new();
    stage_chain(
        es.get_document("executionStages").expect("executionStages"),
        &mut chain,
    );
    Explained {
        stages: chain.join(" > "),
        keys: int(es, "totalKeysExamined"),
        docs: int(es, "totalDocsExamined"),
        returned: int(es, "nReturned"),
        rejected: raw
            .get_document("queryPlanner")
            .and_then(|q| q.get_array("rejectedPlans"))
            .map_or(0, |a| a.len()),
        raw,
    }
}

fn print_explain(e: &Explained) {
    println!(
        "{:<34} explain: {} keys, {} docs examined, {} returned; {} (rejected plans: {})",
        "", e.keys, e.docs, e.returned, e.stages, e.rejected
    );
}

/// Planner checks: failures are printed at once and collected for the end of the run.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn check(&mut self, ok: bool, what: &str, query: &Document, e: &Explained) {
        if !ok {
            let msg = format!(
                "{what}\n  query: {query}\n  stages: {}; totalKeysExamined {} totalDocsExamined {} nReturned {}\n  explain: {}",
                e.stages, e.keys, e.docs, e.returned, e.raw
            );
            println!("PLANNER PROBLEM: {msg}");
            self.0.push(msg);
        }
    }
}

fn ratio_line(what: &str, fast: &Measured, slow: &Measured) -> f64 {
    let r = fast.rate() / slow.rate();
    println!(
        "ratio {what}: {r:.1}x ops/s, {:.1}x p50 latency",
        slow.p50.as_secs_f64() / fast.p50.as_secs_f64().max(1e-9)
    );
    r
}

/// Part 1: insert throughput with 0, 1 and 3 secondary indexes.
async fn insert_part(db: &mongodb::Database, n: usize) {
    let g = Gen::new(n);
    let sets: [(&str, Vec<(Document, &str)>); 3] = [
        ("ins0", vec![]),
        ("ins1", vec![(doc! {"a": 1}, "a_1")]),
        (
            "ins3",
            vec![
                (doc! {"a": 1}, "a_1"),
                (doc! {"b": 1}, "b_1"),
                (doc! {"c": 1}, "c_1"),
            ],
        ),
    ];
    for (coll, idx) in &sets {
        db.create_collection(*coll).await.expect("create");
        for (key, name) in idx {
            create_index(db, coll, key.clone(), name).await;
        }
    }
    let half = n / 2;
    let mut spent = [Duration::ZERO; 3];
    for k in [0usize, 1, 2] {
        let c = db.collection::<Document>(sets[k].0);
        spent[k] += insert(&c, &g, 0..half).await;
    }
    for k in [2usize, 1, 0] {
        let c = db.collection::<Document>(sets[k].0);
        spent[k] += insert(&c, &g, half..n).await;
    }
    let m: Vec<Measured> = spent.iter().map(|s| throughput(n, *s)).collect();
    harness::row("insert, 0 secondary indexes (docs)", &m[0]);
    harness::row("insert, 1 index: a (docs)", &m[1]);
    harness::row("insert, 3 indexes: a, b, c (docs)", &m[2]);
    println!(
        "ratio insert throughput 0-index / 1-index: {:.2}x, 0-index / 3-index: {:.2}x",
        m[0].rate() / m[1].rate(),
        m[0].rate() / m[2].rate()
    );
}

/// Runs the benchmark.
pub async fn run(o: &Opts) {
    let d = o.duration();
    let n = o.docs.unwrap_or(DEFAULT_DOCS);
    assert!(n >= 1000, "--docs must be at least 1000");
    let n_ins = n.min(INSERT_DOCS);
    println!(
        "indexes: {n} documents {{_id, a, b: i%1000, c: 20 chars, d: i%7, pad: 100 bytes}}, batches of {BATCH}; insert part {n_ins} per collection; {} s per phase",
        o.seconds
    );
    let started = Instant::now();
    let server = Server::start();
    let client = mongodb::Client::with_uri_str(format!("mongodb://127.0.0.1:{}/", server.port))
        .await
        .expect("client");
    let db = client.database("bench");
    let admin = client.database("admin");
    let mut problems = Problems::default();

    println!("\n-- insert throughput vs number of secondary indexes ({n_ins} docs each)");
    insert_part(&db, n_ins).await;

    println!("\n-- index build on {n} documents");
    let g = Gen::new(n);
    let docs = db.collection::<Document>("docs");
    let ins = throughput(n, insert(&docs, &g, 0..n).await);
    admin.run_command(doc! {"fsync": 1}).await.expect("fsync");
    let t = Instant::now();
    create_index(&db, "docs", doc! {"b": 1}, "b_1").await;
    let build_b = throughput(n, t.elapsed());
    let t = Instant::now();
    create_index(&db, "docs", doc! {"a": 1}, "a_1").await;
    let build_a = throughput(n, t.elapsed());
    harness::row("insert, no index (docs)", &ins);
    harness::row("createIndexes b_1 (docs)", &build_b);
    harness::row("createIndexes a_1 (docs)", &build_a);
    println!(
        "ratio build / insert throughput: b_1 {:.2}x, a_1 {:.2}x ({:.1} s and {:.1} s to index what took {:.1} s to insert)",
        build_b.rate() / ins.rate(),
        build_a.rate() / ins.rate(),
        build_b.elapsed.as_secs_f64(),
        build_a.elapsed.as_secs_f64(),
        ins.elapsed.as_secs_f64()
    );
    admin.run_command(doc! {"fsync": 1}).await.expect("fsync");
    let natural = || Hint::Keys(doc! {"$natural": 1});

    // Equality lookup.
    println!("\n-- equality find({{a: X}}), random X");
    let mut x = 0x2545_F491_4F6C_DD1D_u64;
    let lookup = harness::timed(d, async || {
        let v = (xorshift(&mut x) % n as u64) as i64;
        let got = all(docs.find(doc! {"a": v}).await.expect("find")).await;
        assert_eq!(got.len(), 1, "find({{a: {v}}})");
        assert_eq!(int(&got[0], "a"), v);
    })
    .await;
    let lookup_scan = timed_min(d, MIN_SCANS, async || {
        let v = (xorshift(&mut x) % n as u64) as i64;
        let got = all(docs
            .find(doc! {"a": v})
            .hint(natural())
            .await
            .expect("find"))
        .await;
        assert_eq!(got.len(), 1, "find({{a: {v}}}) $natural");
        assert_eq!(int(&got[0], "a"), v);
    })
    .await;
    harness::row("find a=X, index a_1", &lookup);
    let q = doc! {"a": (n / 3) as i64};
    let e = explain(&db, doc! {"find": "docs", "filter": q.clone()}).await;
    print_explain(&e);
    problems.check(
        e.stages.contains("IXSCAN(a_1") && !e.stages.contains("COLLSCAN"),
        "equality on indexed a does not use a_1",
        &q,
        &e,
    );
    problems.check(
        e.returned == 1 && e.docs == 1 && e.keys <= 2,
        "equality on a_1 examines more than the one match",
        &q,
        &e,
    );
    harness::row("find a=X, $natural (collscan)", &lookup_scan);
    let e = explain(
        &db,
        doc! {"find": "docs", "filter": q.clone(), "hint": {"$natural": 1}},
    )
    .await;
    print_explain(&e);
    problems.check(
        e.stages.contains("COLLSCAN") && e.docs == n as i64,
        "hint $natural does not scan the collection",
        &q,
        &e,
    );
    let r = ratio_line("index / collscan, equality", &lookup, &lookup_scan);
    println!(
        "  target >= 100x on 1M documents: {} (this run: {n} documents)",
        if r >= 100.0 { "met" } else { "NOT met" }
    );

    // Range scan of 100 entries.
    println!("\n-- range find({{a: {{$gte: X, $lt: X+{RANGE}}}}}), random X");
    let range_filter = |v: i64| doc! {"a": {"$gte": v, "$lt": v + RANGE}};
    let check_range = |got: &[Document], v: i64| {
        assert_eq!(got.len(), RANGE as usize, "range from {v}");
        let mut a: Vec<i64> = got.iter().map(|d| int(d, "a")).collect();
        a.sort_unstable();
        assert!(a.iter().copied().eq(v..v + RANGE), "range from {v}: {a:?}");
    };
    let span = n as u64 - RANGE as u64;
    let range = harness::timed(d, async || {
        let v = (xorshift(&mut x) % span) as i64;
        let got = all(docs.find(range_filter(v)).await.expect("find")).await;
        check_range(&got, v);
    })
    .await;
    let range_scan = timed_min(d, MIN_SCANS, async || {
        let v = (xorshift(&mut x) % span) as i64;
        let got = all(docs
            .find(range_filter(v))
            .hint(natural())
            .await
            .expect("find"))
        .await;
        check_range(&got, v);
    })
    .await;
    harness::row("find a in [X, X+100), index a_1", &range);
    let q = range_filter((n / 3) as i64);
    let e = explain(&db, doc! {"find": "docs", "filter": q.clone()}).await;
    print_explain(&e);
    problems.check(
        e.stages.contains("IXSCAN(a_1") && !e.stages.contains("COLLSCAN"),
        "range on indexed a does not use a_1",
        &q,
        &e,
    );
    problems.check(
        e.returned == RANGE && e.docs == RANGE && e.keys <= RANGE + 1,
        "range on a_1 examines more than the 100 matches",
        &q,
        &e,
    );
    harness::row("find a in [X, X+100), collscan", &range_scan);
    let e = explain(
        &db,
        doc! {"find": "docs", "filter": q.clone(), "hint": {"$natural": 1}},
    )
    .await;
    print_explain(&e);
    ratio_line("index / collscan, range of 100", &range, &range_scan);

    // sort + limit.
    println!("\n-- find({{}}).sort({{a: -1}}).limit({TOP}) vs sort({{c: -1}}) (c unindexed)");
    let top_a: Vec<i64> = (0..TOP as i64).map(|k| n as i64 - 1 - k).collect();
    let top_c: Vec<String> = {
        let mut cs: Vec<String> = (0..n).map(Gen::c).collect();
        cs.sort_unstable_by(|p, q| q.cmp(p));
        cs.truncate(TOP);
        cs
    };
    let sort_ix = harness::timed(d, async || {
        let got = all(docs
            .find(doc! {})
            .sort(doc! {"a": -1})
            .limit(TOP as i64)
            .await
            .expect("find"))
        .await;
        let a: Vec<i64> = got.iter().map(|d| int(d, "a")).collect();
        assert_eq!(a, top_a, "sort a -1 limit {TOP}");
    })
    .await;
    let sort_scan = timed_min(d, MIN_SCANS, async || {
        let got = all(docs
            .find(doc! {})
            .sort(doc! {"c": -1})
            .limit(TOP as i64)
            .await
            .expect("find"))
        .await;
        let c: Vec<&str> = got.iter().map(|d| d.get_str("c").expect("c")).collect();
        assert_eq!(c, top_c, "sort c -1 limit {TOP}");
    })
    .await;
    harness::row("sort a -1 limit 10, index a_1", &sort_ix);
    let q = doc! {};
    let e = explain(
        &db,
        doc! {"find": "docs", "filter": {}, "sort": {"a": -1}, "limit": TOP as i64},
    )
    .await;
    print_explain(&e);
    problems.check(
        e.stages.contains("IXSCAN(a_1 backward)")
            && !e.stages.contains("SORT")
            && !e.stages.contains("COLLSCAN"),
        "sort({a: -1}).limit(10) is not a backward scan of a_1",
        &q,
        &e,
    );
    problems.check(
        e.keys == TOP as i64 && e.docs == TOP as i64,
        "sort({a: -1}).limit(10) must examine exactly 10 keys and 10 documents",
        &q,
        &e,
    );
    harness::row("sort c -1 limit 10, top-k sort", &sort_scan);
    let e = explain(
        &db,
        doc! {"find": "docs", "filter": {}, "sort": {"c": -1}, "limit": TOP as i64},
    )
    .await;
    print_explain(&e);
    ratio_line("index / blocking top-k sort", &sort_ix, &sort_scan);

    // count.
    println!("\n-- count({{b: 5}})");
    let expect = (0..n).filter(|i| i % 1000 == 5).count() as i64;
    let count_cmd = |hint: Option<Document>| {
        let mut c = doc! {"count": "docs", "query": {"b": 5}};
        if let Some(h) = hint {
            c.insert("hint", h);
        }
        c
    };
    let count_ix = harness::timed(d, async || {
        let r = db.run_command(count_cmd(None)).await.expect("count");
        assert_eq!(int(&r, "n"), expect, "count b=5");
    })
    .await;
    let count_scan = timed_min(d, MIN_SCANS, async || {
        let r = db
            .run_command(count_cmd(Some(doc! {"$natural": 1})))
            .await
            .expect("count");
        assert_eq!(int(&r, "n"), expect, "count b=5 $natural");
    })
    .await;
    harness::row("count b=5, index b_1", &count_ix);
    let q = doc! {"b": 5};
    let e = explain(&db, count_cmd(None)).await;
    print_explain(&e);
    problems.check(
        e.stages.contains("COUNT_SCAN(b_1") && e.docs == 0 && e.keys <= expect + 1,
        "count({b: 5}) is not a COUNT_SCAN of b_1 examining only the matching keys",
        &q,
        &e,
    );
    harness::row("count b=5, $natural (collscan)", &count_scan);
    let e = explain(&db, count_cmd(Some(doc! {"$natural": 1}))).await;
    print_explain(&e);
    ratio_line("index / collscan, count", &count_ix, &count_scan);
    println!(
        "\nindexes: {n} documents ({expect} with b = 5), total {:.1} s",
        started.elapsed().as_secs_f64()
    );
    drop(server);
    assert!(
        problems.0.is_empty(),
        "{} planner problem(s):\n{}",
        problems.0.len(),
        problems.0.join("\n")
    );
}
