//! Shared pieces: options, spawning a release server, timing loops, printing.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Command-line options common to the benchmarks.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Seconds per measured phase.
    pub seconds: f64,
    /// Concurrent clients for the parallel phase.
    pub clients: usize,
    /// Documents in the data set, for benchmarks whose size is configurable (each has its
    /// own default).
    pub docs: Option<usize>,
}

impl Opts {
    /// Parses `--seconds S --clients N --docs N`.
    pub fn parse(args: &[String]) -> Opts {
        let mut o = Opts {
            seconds: 3.0,
            clients: 16,
            docs: None,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let v = it.next().map(|s| s.as_str()).unwrap_or("");
            match a.as_str() {
                "--seconds" => o.seconds = v.parse().expect("--seconds"),
                "--clients" => o.clients = v.parse().expect("--clients"),
                "--docs" => o.docs = Some(v.parse().expect("--docs")),
                other => panic!("unknown option {other}"),
            }
        }
        o
    }

    /// The measured duration.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.seconds)
    }
}

/// A spawned `cairn` (release build unless `CAIRN_BIN` says otherwise).
pub struct Server {
    child: Child,
    /// Its port.
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Builds nothing: expects `cargo build --release --bin cairn` to have run (cargo run of
    /// this crate in release mode builds the workspace's binary too when asked).
    pub fn start() -> Server {
        let bin = std::env::var("CAIRN_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|_| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/cairn")
            });
        assert!(
            bin.exists(),
            "{} missing: run `cargo build --release --bin cairn` first",
            bin.display()
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = Command::new(bin)
            .args([
                "--port",
                "0",
                "--log-format",
                "json",
                "--log-level",
                "warn,cairn::server=info",
                "--data-dir",
            ])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn cairn");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.contains("Waiting for connections")
                    && let Some(tx) = tx.take()
                {
                    let v: serde_json::Value = serde_json::from_str(&line).expect("json log");
                    let _ = tx.send(v["attr"]["port"].as_u64().expect("port") as u16);
                }
            }
        });
        let port = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("cairn port");
        Server {
            child,
            port,
            _dir: dir,
        }
    }
}

impl Server {
    /// The server's process id (for CPU accounting).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Result of a timed loop.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Operations completed.
    pub ops: u64,
    /// Elapsed time.
    pub elapsed: Duration,
    /// Median latency of one operation (single-client loops).
    pub p50: Duration,
    /// 99th percentile latency.
    pub p99: Duration,
}

impl Measured {
    /// Operations per second.
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }
}

/// Summarises latencies collected over `elapsed`.
pub fn summarize(mut lat: Vec<Duration>, elapsed: Duration) -> Measured {
    lat.sort_unstable();
    let pick = |q: f64| {
        lat.get(((lat.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or_default()
    };
    Measured {
        ops: lat.len() as u64,
        elapsed,
        p50: pick(0.5),
        p99: pick(0.99),
    }
}

/// Runs `op` repeatedly for `d`, recording each latency.
pub async fn timed(d: Duration, mut op: impl AsyncFnMut()) -> Measured {
    let mut lat = Vec::with_capacity(100_000);
    let start = Instant::now();
    while start.elapsed() < d {
        let t = Instant::now();
        op().await;
        lat.push(t.elapsed());
    }
    summarize(lat, start.elapsed())
}

/// Prints one result row (rates below 100/s with two decimals: collection scans of large
/// collections run less than once a second).
pub fn row(name: &str, m: &Measured) {
    let rate = m.rate();
    let prec = if rate < 100.0 { 2 } else { 0 };
    println!(
        "{name:<34} {rate:>12.prec$} ops/s   p50 {:>8.1} µs   p99 {:>8.1} µs",
        m.p50.as_secs_f64() * 1e6,
        m.p99.as_secs_f64() * 1e6
    );
}
