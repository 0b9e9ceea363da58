//! Transactions side by side with PostgreSQL 15.
//!
//! The workload: 1,000 accounts `{_id, balance, owner, history}`; a transfer reads the source
//! account, checks its balance, and moves an amount to another account — in Cairn a
//! multi-document transaction through the Rust driver (`startTransaction`, `find`, two
//! `$inc` updates, `commitTransaction`, rerun on `TransientTransactionError`), in PostgreSQL
//! `BEGIN; SELECT … FOR UPDATE; UPDATE; UPDATE; COMMIT` on a JSONB table, both at their
//! default durability (PostgreSQL fsyncs every commit; Cairn's commit reaches the journal in
//! the OS). Reported at 1, 8 and 32 clients: transfers per second, server CPU per transfer,
//! and Cairn's conflict (rerun) rate. Then the cost of a transaction itself: one `$inc`
//! outside a transaction, the same `$inc` inside one, and a read-only transaction.
//!
//! `cargo run -p cairn-bench --release -- txn [--seconds S]`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bson::{Document, doc};
use mongodb::error::TRANSIENT_TRANSACTION_ERROR;

use crate::harness::{self, Opts, Server};
use crate::pg::{Postgres, cpu_seconds};

const ACCOUNTS: i64 = 1000;

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn pick(x: &mut u64) -> (i64, i64, i64) {
    let a = (next(x) % ACCOUNTS as u64) as i64;
    let b = (a + 1 + (next(x) % (ACCOUNTS as u64 - 1)) as i64) % ACCOUNTS;
    (a, b, (next(x) % 20) as i64 + 1)
}

struct Outcome {
    transfers: u64,
    reruns: u64,
    elapsed: Duration,
    cpu: f64,
}

impl Outcome {
    fn print(&self, name: &str) {
        let rate = self.transfers as f64 / self.elapsed.as_secs_f64();
        println!(
            "{name:<34} {rate:>10.0} transfers/s   {:>7.1} µs CPU/transfer   reruns {:>5.2}%",
            self.cpu / self.transfers.max(1) as f64 * 1e6,
            self.reruns as f64 * 100.0 / (self.transfers + self.reruns).max(1) as f64
        );
    }
}

async fn cairn_transfer(
    client: &mongodb::Client,
    coll: &mongodb::Collection<Document>,
    s: &mut mongodb::ClientSession,
    (a, b, amount): (i64, i64, i64),
) -> mongodb::error::Result<()> {
    s.start_transaction().await?;
    let r: mongodb::error::Result<()> = async {
        let src = coll
            .find_one(doc! {"_id": a})
            .session(&mut *s)
            .await?
            .expect("account");
        if src.get_i64("balance").unwrap_or(0) >= amount {
            coll.update_one(doc! {"_id": a}, doc! {"$inc": {"balance": -amount}})
                .session(&mut *s)
                .await?;
            coll.update_one(doc! {"_id": b}, doc! {"$inc": {"balance": amount}})
                .session(&mut *s)
                .await?;
        }
        Ok(())
    }
    .await;
    match r {
        Ok(()) => s.commit_transaction().await,
        Err(e) => {
            let _ = s.abort_transaction().await;
            let _ = client;
            Err(e)
        }
    }
}

async fn run_cairn(server: &Server, clients: usize, d: Duration) -> Outcome {
    let client = mongodb::Client::with_uri_str(format!(
        "mongodb://127.0.0.1:{}/?maxPoolSize={}",
        server.port,
        clients + 2
    ))
    .await
    .expect("client");
    let coll = client.database("bench").collection::<Document>("accounts");
    let transfers = Arc::new(AtomicU64::new(0));
    let reruns = Arc::new(AtomicU64::new(0));
    let cpu0 = cpu_seconds(server.pid());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..clients {
        let (client, coll) = (client.clone(), coll.clone());
        let (transfers, reruns) = (transfers.clone(), reruns.clone());
        tasks.push(tokio::spawn(async move {
            let mut s = client.start_session().await.expect("session");
            let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (w as u64 + 1);
            while start.elapsed() < d {
                let t = pick(&mut x);
                loop {
                    match cairn_transfer(&client, &coll, &mut s, t).await {
                        Ok(()) => break,
                        Err(e) if e.contains_label(TRANSIENT_TRANSACTION_ERROR) => {
                            reruns.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("transfer: {e}"),
                    }
                }
                transfers.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    Outcome {
        transfers: transfers.load(Ordering::Relaxed),
        reruns: reruns.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
        cpu: cpu_seconds(server.pid()) - cpu0,
    }
}

async fn run_pg(pg: &Postgres, clients: usize, d: Duration) -> Outcome {
    let transfers = Arc::new(AtomicU64::new(0));
    let mut conns = Vec::new();
    for _ in 0..clients {
        conns.push(pg.connect().await);
    }
    let cpu0 = cpu_seconds(pg.pid());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (w, mut c) in conns.into_iter().enumerate() {
        let transfers = transfers.clone();
        tasks.push(tokio::spawn(async move {
            let select = c
                .prepare("SELECT (doc->>'balance')::bigint FROM accounts WHERE id = $1 FOR UPDATE")
                .await
                .expect("prepare");
            let update = c
                .prepare(
                    "UPDATE accounts SET doc = jsonb_set(doc, '{balance}', to_jsonb((doc->>'balance')::bigint + $2)) WHERE id = $1",
                )
                .await
                .expect("prepare");
            let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (w as u64 + 1);
            while start.elapsed() < d {
                let (a, b, amount) = pick(&mut x);
                let tx = c.transaction().await.expect("begin");
                let row = tx.query_one(&select, &[&a]).await.expect("select");
                let balance: i64 = row.get(0);
                if balance >= amount {
                    tx.execute(&update, &[&a, &(-amount)]).await.expect("update");
                    tx.execute(&update, &[&b, &amount]).await.expect("update");
                }
                tx.commit().await.expect("commit");
                transfers.fetch_add(1, Ordering::Relaxed);
            }
            // Keep the connection (and its backend's CPU counters) until measured.
            c
        }));
    }
    let mut alive = Vec::new();
    for t in tasks {
        alive.push(t.await.expect("task"));
    }
    let elapsed = start.elapsed();
    let cpu = cpu_seconds(pg.pid()) - cpu0;
    drop(alive);
    Outcome {
        transfers: transfers.load(Ordering::Relaxed),
        reruns: 0,
        elapsed,
        cpu,
    }
}

/// Runs the benchmark.
pub async fn run(opts: &Opts) {
    let d = opts.duration();
    let server = Server::start();
    let pg = Postgres::start();
    let client = mongodb::Client::with_uri_str(format!("mongodb://127.0.0.1:{}/", server.port))
        .await
        .expect("client");
    let coll = client.database("bench").collection::<Document>("accounts");
    coll.insert_many((0..ACCOUNTS).map(|i| {
        doc! {"_id": i, "balance": 1_000_000i64, "owner": format!("owner-{i}"), "history": [1, 2, 3]}
    }))
    .await
    .expect("seed");
    let setup = pg.connect().await;
    setup
        .batch_execute("CREATE TABLE accounts (id bigint PRIMARY KEY, doc jsonb NOT NULL)")
        .await
        .expect("create");
    setup
        .execute(
            "INSERT INTO accounts SELECT i, jsonb_build_object('_id', i, 'balance', 1000000, 'owner', 'owner-' || i, 'history', '[1,2,3]'::jsonb) FROM generate_series(0, $1::bigint - 1) i",
            &[&ACCOUNTS],
        )
        .await
        .expect("seed");
    setup
        .batch_execute("ANALYZE accounts")
        .await
        .expect("analyze");
    println!(
        "transfers between {ACCOUNTS} accounts, {:.0} s per row",
        d.as_secs_f64()
    );
    for clients in [1usize, 8, 32] {
        // Alternate the order so both share the machine's drift.
        let (c, p) = if clients == 8 {
            let p = run_pg(&pg, clients, d).await;
            (run_cairn(&server, clients, d).await, p)
        } else {
            let c = run_cairn(&server, clients, d).await;
            (c, run_pg(&pg, clients, d).await)
        };
        c.print(&format!("cairn, {clients} clients"));
        p.print(&format!("postgresql, {clients} clients"));
        println!(
            "{:<34} {:>10.2}x throughput",
            "cairn / postgresql",
            (c.transfers as f64 / c.elapsed.as_secs_f64())
                / (p.transfers as f64 / p.elapsed.as_secs_f64())
        );
    }
    // The cost of a transaction itself (one client).
    let mut s = client.start_session().await.expect("session");
    let plain = harness::timed(d, async || {
        coll.update_one(doc! {"_id": 1}, doc! {"$inc": {"balance": 1}})
            .await
            .expect("update");
    })
    .await;
    harness::row("$inc, no transaction", &plain);
    let in_txn = harness::timed(d, async || {
        s.start_transaction().await.expect("start");
        coll.update_one(doc! {"_id": 1}, doc! {"$inc": {"balance": 1}})
            .session(&mut s)
            .await
            .expect("update");
        s.commit_transaction().await.expect("commit");
    })
    .await;
    harness::row("$inc in a transaction", &in_txn);
    let read_only = harness::timed(d, async || {
        s.start_transaction().await.expect("start");
        coll.find_one(doc! {"_id": 1})
            .session(&mut s)
            .await
            .expect("find");
        s.commit_transaction().await.expect("commit");
    })
    .await;
    harness::row("read-only transaction (find_one)", &read_only);
    println!(
        "{:<34} {:>10.2}x the latency of a plain $inc",
        "transaction overhead",
        in_txn.p50.as_secs_f64() / plain.p50.as_secs_f64()
    );
}
