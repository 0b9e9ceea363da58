//! `ping` round trips: Cairn vs a raw TCP echo (the network floor) vs the Rust driver.
//!
//! The raw client writes a pre-encoded OP_MSG `{ping: 1, $db: "admin"}` and reads the reply
//! frame; the echo server returns the very bytes it receives, so both loops move a similar
//! number of bytes through the same loopback stack. The ratio Cairn/echo is what the server
//! adds per request: decode, dispatch, encode, syscalls.

use std::time::{Duration, Instant};

use bson::{doc, rawdoc};
use cairn_wire::op_msg;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::harness::{self, Measured, Opts, Server};

/// Serves a raw TCP echo on an ephemeral port, printing the port on stdout; runs until
/// killed. Used as `cairn-bench echo-server` in a child process, so that the floor is
/// measured across processes exactly like Cairn.
pub async fn echo_server_main() {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    println!("{}", l.local_addr().expect("addr").port());
    serve_echo(l).await;
}

/// A child process running [`echo_server_main`].
struct EchoProcess {
    child: std::process::Child,
    port: u16,
}

impl EchoProcess {
    fn start() -> EchoProcess {
        use std::io::BufRead;
        let exe = std::env::current_exe().expect("exe");
        let mut child = std::process::Command::new(exe)
            .arg("echo-server")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn echo server");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("port");
        EchoProcess {
            child,
            port: line.trim().parse().expect("port number"),
        }
    }
}

impl Drop for EchoProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn serve_echo(l: TcpListener) {
    {
        while let Ok((mut s, _)) = l.accept().await {
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        }
    }
}

/// One request/response over a raw socket: write `msg`, read one length-prefixed frame.
async fn round_trip(s: &mut TcpStream, msg: &[u8], buf: &mut Vec<u8>) {
    s.write_all(msg).await.expect("write");
    let mut head = [0u8; 4];
    s.read_exact(&mut head).await.expect("read");
    let len = i32::from_le_bytes(head) as usize;
    buf.resize(len - 4, 0);
    s.read_exact(buf).await.expect("read");
}

async fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    s.set_nodelay(true).expect("nodelay");
    s
}

async fn single(port: u16, d: Duration) -> Measured {
    let msg = op_msg::encode(1, 0, 0, &rawdoc! {"ping": 1, "$db": "admin"}, false);
    let mut s = connect(port).await;
    let mut buf = Vec::new();
    for _ in 0..1000 {
        round_trip(&mut s, &msg, &mut buf).await;
    }
    let mut lat = Vec::with_capacity(100_000);
    let start = Instant::now();
    while start.elapsed() < d {
        let t = Instant::now();
        round_trip(&mut s, &msg, &mut buf).await;
        lat.push(t.elapsed());
    }
    harness::summarize(lat, start.elapsed())
}

async fn parallel(port: u16, clients: usize, d: Duration) -> Measured {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        tasks.push(tokio::spawn(async move { single(port, d).await }));
    }
    let mut ops = 0;
    for t in tasks {
        ops += t.await.expect("task").ops;
    }
    Measured {
        ops,
        elapsed: start.elapsed(),
        p50: Duration::ZERO,
        p99: Duration::ZERO,
    }
}

/// Runs the benchmark.
pub async fn run(o: &Opts) {
    let server = Server::start();
    let echo_process = EchoProcess::start();
    let echo = echo_process.port;
    let d = o.duration();
    println!(
        "ping round trips, {} s per phase, {} parallel clients",
        o.seconds, o.clients
    );

    let echo1 = single(echo, d).await;
    let cairn1 = single(server.port, d).await;
    let client = mongodb::Client::with_uri_str(format!("mongodb://127.0.0.1:{}/", server.port))
        .await
        .expect("driver");
    let db = client.database("admin");
    db.run_command(doc! {"ping": 1}).await.expect("ping");
    let driver1 = harness::timed(d, async || {
        db.run_command(doc! {"ping": 1}).await.expect("ping");
    })
    .await;
    let echon = parallel(echo, o.clients, d).await;
    let cairnn = parallel(server.port, o.clients, d).await;

    harness::row("raw TCP echo, 1 client", &echo1);
    harness::row("cairn ping (raw OP_MSG), 1 client", &cairn1);
    harness::row("cairn ping (Rust driver), 1 client", &driver1);
    harness::row(&format!("raw TCP echo, {} clients", o.clients), &echon);
    harness::row(&format!("cairn ping (raw), {} clients", o.clients), &cairnn);
    println!(
        "ratio cairn/echo latency (1 client, p50): {:.2}x; throughput echo/cairn ({} clients): {:.2}x",
        cairn1.p50.as_secs_f64() / echo1.p50.as_secs_f64(),
        o.clients,
        echon.rate() / cairnn.rate()
    );
}
