//! A throwaway PostgreSQL 15 cluster for side-by-side runs (see `shared/notes/postgres.md`):
//! initdb into a temporary directory as the `postgres` user, start it on a free port with its
//! defaults (every commit fsynced), connect with `tokio-postgres`, stop it on drop. Installs
//! Debian's `postgresql` package when no server binaries are found (benchmarks only; CI never
//! runs this).

use std::path::PathBuf;
use std::process::Command;

/// A running cluster.
pub struct Postgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    /// Its port.
    pub port: u16,
}

fn server_bin() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop()
}

fn run(cmd: &mut Command) {
    let st = cmd.status().expect("spawn");
    assert!(st.success(), "{cmd:?} failed");
}

impl Postgres {
    /// Installs (if needed), initialises and starts a cluster.
    pub fn start() -> Postgres {
        let bin = server_bin().unwrap_or_else(|| {
            eprintln!("installing postgresql with apt (benchmark only)");
            run(Command::new("apt-get").args(["install", "-y", "-q", "postgresql"]));
            server_bin().expect("postgresql server binaries")
        });
        let dir = tempfile::tempdir().expect("tempdir");
        run(Command::new("chown").arg("postgres:").arg(dir.path()));
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
            l.local_addr().expect("addr").port()
        };
        let data = dir.path().join("data");
        run(Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .stdout(std::process::Stdio::null()));
        run(Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.path().join("log"))
            .args(["-w", "-o"])
            .arg(format!(
                "-c listen_addresses=127.0.0.1 -p {port} -k {} -c max_connections=200",
                dir.path().display()
            ))
            .arg("start")
            .stdout(std::process::Stdio::null()));
        Postgres { bin, dir, port }
    }

    /// A new connection (its driver task runs on the current runtime).
    pub async fn connect(&self) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::connect(
            &format!(
                "host=127.0.0.1 port={} user=postgres dbname=postgres",
                self.port
            ),
            tokio_postgres::NoTls,
        )
        .await
        .expect("connect to postgres");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        client
    }

    /// The postmaster's pid.
    pub fn pid(&self) -> u32 {
        let s = std::fs::read_to_string(self.dir.path().join("data/postmaster.pid"))
            .expect("postmaster.pid");
        s.lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .expect("pid")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "stop"])
            .stdout(std::process::Stdio::null())
            .status();
    }
}

/// CPU time (user + system) consumed so far by process `pid` and its direct children, in
/// seconds (PostgreSQL forks a backend per connection), counting the children `pid` has
/// already reaped (parallel query workers live only for one query).
pub fn cpu_seconds(pid: u32) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    let mut total = 0u64;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    for e in entries.flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state ppid … utime(14) stime(15).
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ppid: u32 = f.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if p == pid || ppid == pid {
            total += ticks(11) + ticks(12);
        }
        if p == pid {
            // Children that exited and were reaped (PostgreSQL's parallel workers) left
            // their CPU in the parent's cutime/cstime.
            total += ticks(13) + ticks(14);
        }
    }
    total as f64 / tick
}
