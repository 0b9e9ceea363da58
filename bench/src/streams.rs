//! Change streams side by side with PostgreSQL 15's `LISTEN`/`NOTIFY`.
//!
//! 1. Write throughput: 8 clients inserting 150-byte documents one by one, with no stream
//!    open and with one change stream draining every event — next to PostgreSQL inserting
//!    the same documents into a JSONB table without and with an `AFTER INSERT` trigger that
//!    `pg_notify`s the row to one listening connection. Cairn appends every commit to its
//!    change log whether or not a stream is open, so the first row already pays for the log;
//!    the second adds a reader.
//! 2. Event latency: one writer inserts 200 documents a second; 1 and then 100 open streams
//!    (100 listening connections for PostgreSQL) each receive every event, and the time from
//!    sending the insert to receiving its event is recorded per stream (p50/p99 over all
//!    deliveries), with the insert's own acknowledgement latency for reference.
//!
//! `cargo run -p cairn-bench --release -- streams [--seconds S]`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::{Document, doc};
use tokio_postgres::AsyncMessage;

use crate::harness::{Opts, Server, summarize};
use crate::pg::Postgres;

const WRITERS: usize = 8;
const PAD: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\
                   0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

/// 8 clients inserting into `coll` for `d`; returns inserts per second.
async fn cairn_inserts(coll: &mongodb::Collection<Document>, d: Duration, base: i64) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (coll, done) = (coll.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0i64;
            while start.elapsed() < d {
                let id = base + (w as i64) * 10_000_000 + i;
                coll.insert_one(doc! {"_id": id, "n": i, "pad": PAD})
                    .await
                    .expect("insert");
                i += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
    rate(done.load(Ordering::Relaxed), start.elapsed())
}

/// Drains a change stream, counting events, until `stop` is set.
fn drain_stream(
    mut stream: mongodb::change_stream::ChangeStream<
        mongodb::change_stream::event::ChangeStreamEvent<Document>,
    >,
    seen: Arc<AtomicU64>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            if stream.next_if_any().await.expect("stream").is_some() {
                seen.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
}

/// A PostgreSQL connection whose notifications go to `on_note` (payload text).
async fn pg_listener(
    pg: &Postgres,
    channel: &str,
    on_note: impl Fn(&str) + Send + 'static,
) -> tokio_postgres::Client {
    let (client, mut conn) = tokio_postgres::connect(
        &format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            pg.port
        ),
        tokio_postgres::NoTls,
    )
    .await
    .expect("connect to postgres");
    tokio::spawn(async move {
        while let Some(m) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
            if let Ok(AsyncMessage::Notification(n)) = m {
                on_note(n.payload());
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {channel}"))
        .await
        .expect("listen");
    client
}

async fn pg_inserts(pg: &Postgres, table: &str, d: Duration) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let mut conns = Vec::new();
    for _ in 0..WRITERS {
        conns.push(pg.connect().await);
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (w, c) in conns.into_iter().enumerate() {
        let done = done.clone();
        let sql = format!("INSERT INTO {table} (id, doc) VALUES ($1, $2)");
        tasks.push(tokio::spawn(async move {
            let st = c.prepare(&sql).await.expect("prepare");
            let mut i = 0i64;
            while start.elapsed() < d {
                let id = (w as i64) * 10_000_000 + i;
                let doc = serde_json::json!({"_id": id, "n": i, "pad": PAD});
                c.execute(&st, &[&id, &doc]).await.expect("insert");
                i += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
    rate(done.load(Ordering::Relaxed), start.elapsed())
}

/// Send instants of the latency phase's inserts, by sequence number.
type Sent = Arc<Mutex<Vec<Option<Instant>>>>;

fn record(sent: &Sent, lat: &Mutex<Vec<Duration>>, seq: usize) {
    let now = Instant::now();
    let t0 = sent.lock().expect("sent").get(seq).copied().flatten();
    if let Some(t0) = t0 {
        lat.lock().expect("lat").push(now - t0);
    }
}

struct Latency {
    deliveries: Vec<Duration>,
    acks: Vec<Duration>,
    expected: usize,
}

impl Latency {
    fn print(self, name: &str, d: Duration) {
        let got = self.deliveries.len();
        let e = summarize(self.deliveries, d);
        let a = summarize(self.acks, d);
        println!(
            "{name:<34} event p50 {:>8.1} µs  p99 {:>8.1} µs   (insert ack p50 {:>7.1} µs)   delivered {got}/{}",
            e.p50.as_secs_f64() * 1e6,
            e.p99.as_secs_f64() * 1e6,
            a.p50.as_secs_f64() * 1e6,
            self.expected,
        );
    }
}

/// One writer at 200 inserts/s for `d`, each insert's send instant recorded under its
/// sequence number; returns the acknowledgement latencies and the number sent.
async fn paced_writer(
    d: Duration,
    sent: Sent,
    mut insert: impl AsyncFnMut(usize),
) -> (Vec<Duration>, usize) {
    let mut acks = Vec::new();
    let start = Instant::now();
    let mut seq = 0usize;
    while start.elapsed() < d {
        let due = start + Duration::from_millis(5) * seq as u32;
        tokio::time::sleep_until(due.into()).await;
        let t0 = Instant::now();
        sent.lock().expect("sent").push(Some(t0));
        insert(seq).await;
        acks.push(t0.elapsed());
        seq += 1;
    }
    (acks, seq)
}

async fn cairn_latency(server: &Server, streams: usize, d: Duration, coll_name: &str) -> Latency {
    let client = mongodb::Client::with_uri_str(format!(
        "mongodb://127.0.0.1:{}/?maxPoolSize={}",
        server.port,
        streams + 8
    ))
    .await
    .expect("client");
    let coll = client.database("bench").collection::<Document>(coll_name);
    let sent: Sent = Arc::new(Mutex::new(Vec::new()));
    let lat = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..streams {
        let mut stream = coll.watch().await.expect("watch");
        let (sent, lat, stop) = (sent.clone(), lat.clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Some(e) = stream.next_if_any().await.expect("stream")
                    && let Some(doc) = e.full_document
                {
                    record(&sent, &lat, doc.get_i64("seq").unwrap_or(-1) as usize);
                }
            }
        }));
    }
    let (acks, n) = paced_writer(d, sent.clone(), async |seq| {
        coll.insert_one(doc! {"seq": seq as i64, "pad": PAD})
            .await
            .expect("insert");
    })
    .await;
    // Let the last events arrive, then stop the readers (each wakes within its await time).
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.await.expect("reader");
    }
    let deliveries = std::mem::take(&mut *lat.lock().expect("lat"));
    Latency {
        deliveries,
        acks,
        expected: n * streams,
    }
}

async fn pg_latency(pg: &Postgres, listeners: usize, d: Duration) -> Latency {
    let sent: Sent = Arc::new(Mutex::new(Vec::new()));
    let lat = Arc::new(Mutex::new(Vec::new()));
    let mut conns = Vec::new();
    for _ in 0..listeners {
        let (sent, lat) = (sent.clone(), lat.clone());
        conns.push(
            pg_listener(pg, "lat", move |payload| {
                if let Ok(seq) = payload.parse::<usize>() {
                    record(&sent, &lat, seq);
                }
            })
            .await,
        );
    }
    let writer = pg.connect().await;
    let st = writer
        .prepare("INSERT INTO lat (id, doc) VALUES ($1, $2)")
        .await
        .expect("prepare");
    let (acks, n) = paced_writer(d, sent, async |seq| {
        let doc = serde_json::json!({"seq": seq, "pad": PAD});
        writer
            .execute(&st, &[&(seq as i64), &doc])
            .await
            .expect("insert");
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(conns);
    let deliveries = std::mem::take(&mut *lat.lock().expect("lat"));
    Latency {
        deliveries,
        acks,
        expected: n * listeners,
    }
}

/// Runs the benchmark.
pub async fn run(opts: &Opts) {
    let d = opts.duration();
    let server = Server::start();
    let pg = Postgres::start();
    let setup = pg.connect().await;
    setup
        .batch_execute(
            "CREATE TABLE plain (id bigint PRIMARY KEY, doc jsonb NOT NULL);
             CREATE TABLE notified (id bigint PRIMARY KEY, doc jsonb NOT NULL);
             CREATE TABLE lat (id bigint PRIMARY KEY, doc jsonb NOT NULL);
             CREATE FUNCTION notify_row() RETURNS trigger AS $$
               BEGIN PERFORM pg_notify(TG_ARGV[0], NEW.doc::text); RETURN NEW; END $$
               LANGUAGE plpgsql;
             CREATE FUNCTION notify_seq() RETURNS trigger AS $$
               BEGIN PERFORM pg_notify('lat', NEW.id::text); RETURN NEW; END $$
               LANGUAGE plpgsql;
             CREATE TRIGGER n AFTER INSERT ON notified FOR EACH ROW EXECUTE FUNCTION notify_row('rows');
             CREATE TRIGGER n AFTER INSERT ON lat FOR EACH ROW EXECUTE FUNCTION notify_seq();",
        )
        .await
        .expect("schema");
    let client = mongodb::Client::with_uri_str(format!(
        "mongodb://127.0.0.1:{}/?maxPoolSize=32",
        server.port
    ))
    .await
    .expect("client");
    let db = client.database("bench");

    println!("== write throughput, {WRITERS} clients inserting one document at a time");
    let plain = cairn_inserts(&db.collection("w0"), d, 0).await;
    let coll = db.collection::<Document>("w1");
    let seen = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = drain_stream(
        coll.watch().await.expect("watch"),
        seen.clone(),
        stop.clone(),
    );
    let streamed = cairn_inserts(&coll, d, 0).await;
    let inserted = coll.estimated_document_count().await.expect("count");
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.load(Ordering::Relaxed) < inserted && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    reader.await.expect("reader");
    let pg_plain = pg_inserts(&pg, "plain", d).await;
    let notes = Arc::new(AtomicU64::new(0));
    let n2 = notes.clone();
    let listener = pg_listener(&pg, "rows", move |_| {
        n2.fetch_add(1, Ordering::Relaxed);
    })
    .await;
    let pg_notified = pg_inserts(&pg, "notified", d).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(listener);
    println!("cairn, no stream open               {plain:>10.0} inserts/s");
    println!(
        "cairn, one stream draining           {streamed:>10.0} inserts/s   ({:.2}x of no stream; stream saw {}/{inserted})",
        streamed / plain,
        seen.load(Ordering::Relaxed)
    );
    println!("postgres, plain insert               {pg_plain:>10.0} inserts/s");
    println!(
        "postgres, insert + NOTIFY trigger    {pg_notified:>10.0} inserts/s   ({:.2}x of plain; listener saw {})",
        pg_notified / pg_plain,
        notes.load(Ordering::Relaxed)
    );
    println!(
        "cairn / postgres                     {:>10.2}x plain   {:>6.2}x with a reader",
        plain / pg_plain,
        streamed / pg_notified
    );

    println!("== commit-to-delivery latency, one writer at 200 inserts/s");
    for streams in [1usize, 100] {
        cairn_latency(&server, streams, d, &format!("lat{streams}"))
            .await
            .print(&format!("cairn, {streams} streams"), d);
        setup.batch_execute("TRUNCATE lat").await.expect("truncate");
        pg_latency(&pg, streams, d)
            .await
            .print(&format!("postgres, {streams} listeners"), d);
    }
}
