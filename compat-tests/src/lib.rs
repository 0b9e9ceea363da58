//! Harness for compatibility tests: a real `cairn` process and real clients.
//!
//! [`TestServer::start`] spawns the `cairn` binary (from `CAIRN_BIN`, or the workspace's
//! `target/debug/cairn`, which the test command builds first) on `127.0.0.1:0` with a
//! temporary data directory and `--log-format json`, and learns the port from the
//! "Waiting for connections" log line. Its stdout is drained on a thread (so the server can
//! never block on a full pipe) and kept for [`TestServer::log`]. Dropping the server kills
//! the process and removes the data directory.
//!
//! [`TestServer::client`] returns an official `mongodb` driver client; [`RawConn`] speaks raw
//! bytes for wire-level edge cases.
//!
//! The storage layout under test follows `CAIRN_PACK_THRESHOLD` (the server reads it like
//! `--pack-threshold`; `./test.sh` runs the layout-sensitive files again at 0, one key per
//! node); [`pack_threshold`] tells a test which layout its server uses.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bson::{RawDocumentBuf, rawdoc};
use cairn_wire::{HEADER_LEN, Header, header, op_msg};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Path of the server binary under test.
pub fn cairn_bin() -> PathBuf {
    if let Ok(p) = std::env::var("CAIRN_BIN") {
        return PathBuf::from(p);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf();
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    let bin = target.join("debug").join("cairn");
    assert!(
        bin.exists(),
        "{} not found: run `cargo build --bin cairn` first (the test command does)",
        bin.display()
    );
    bin
}

/// The pack threshold of collections the test server creates: `CAIRN_PACK_THRESHOLD` when
/// set (the spawned server inherits it), else the server's default (2048).
pub fn pack_threshold() -> u32 {
    std::env::var("CAIRN_PACK_THRESHOLD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2048)
}

/// A running `cairn` process.
pub struct TestServer {
    child: Child,
    /// The port it listens on.
    pub port: u16,
    /// Its data directory (removed on drop unless kept).
    pub data_dir: Option<tempfile::TempDir>,
    data_path: PathBuf,
    log: Arc<Mutex<Vec<String>>>,
}

impl TestServer {
    /// Starts a server with default flags.
    pub fn start() -> TestServer {
        TestServer::start_with(&[])
    }

    /// Starts a server with extra flags.
    pub fn start_with(args: &[&str]) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().to_path_buf();
        let mut s = TestServer::spawn(&path, args);
        s.data_dir = Some(dir);
        s
    }

    /// Starts a server with extra flags and environment variables.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().to_path_buf();
        let mut s = TestServer::spawn_env(&path, args, env);
        s.data_dir = Some(dir);
        s
    }

    /// Starts a server on an existing data directory (for restart tests).
    pub fn start_in(data_path: &std::path::Path, args: &[&str]) -> TestServer {
        TestServer::spawn(data_path, args)
    }

    /// Starts a server on an existing data directory with environment variables.
    pub fn start_in_env(
        data_path: &std::path::Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> TestServer {
        TestServer::spawn_env(data_path, args, env)
    }

    fn spawn(data_path: &std::path::Path, args: &[&str]) -> TestServer {
        TestServer::spawn_env(data_path, args, &[])
    }

    fn spawn_env(data_path: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> TestServer {
        let mut child = Command::new(cairn_bin())
            .args(["--port", "0", "--log-format", "json", "--data-dir"])
            .arg(data_path)
            .args(args)
            .env_remove("CAIRN_AUTH")
            .env_remove("CAIRN_INITDB_ROOT_USERNAME")
            .env_remove("CAIRN_INITDB_ROOT_PASSWORD")
            .env_remove("MONGO_INITDB_ROOT_USERNAME")
            .env_remove("MONGO_INITDB_ROOT_PASSWORD")
            .envs(env.iter().copied())
            .env_remove("CAIRN_PORT")
            .env_remove("CAIRN_BIND")
            .env_remove("CAIRN_DATA_DIR")
            .env_remove("CAIRN_LOG_FORMAT")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn cairn");
        let stdout = child.stdout.take().expect("stdout");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel::<u16>();
        {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut sent = false;
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if !sent
                        && line.contains("\"Waiting for connections\"")
                        && let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                        && let Some(p) = v["attr"]["port"].as_u64()
                    {
                        let _ = tx.send(p as u16);
                        sent = true;
                    }
                    log.lock().expect("log").push(line);
                }
            });
        }
        let port = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(p) => p,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "cairn did not report its port; log:\n{}",
                    log.lock().expect("log").join("\n")
                );
            }
        };
        TestServer {
            child,
            port,
            data_dir: None,
            data_path: data_path.to_path_buf(),
            log,
        }
    }

    /// The data directory path.
    pub fn data_path(&self) -> &std::path::Path {
        &self.data_path
    }

    /// `mongodb://127.0.0.1:<port>` plus `options` (e.g. "compressors=zlib").
    pub fn uri(&self, options: &str) -> String {
        if options.is_empty() {
            format!("mongodb://127.0.0.1:{}/", self.port)
        } else {
            format!("mongodb://127.0.0.1:{}/?{options}", self.port)
        }
    }

    /// A driver client.
    pub async fn client(&self) -> mongodb::Client {
        self.client_with("").await
    }

    /// A driver client logged in as `user` (on `admin`) with URI options `extra` (each
    /// starting with `&`, e.g. "&authMechanism=SCRAM-SHA-1").
    pub async fn login(&self, user: &str, pwd: &str, extra: &str) -> mongodb::Client {
        mongodb::Client::with_uri_str(format!(
            "mongodb://{user}:{pwd}@127.0.0.1:{}/?authSource=admin&serverSelectionTimeoutMS=10000{extra}",
            self.port
        ))
        .await
        .expect("client")
    }

    /// A driver client with URI options.
    pub async fn client_with(&self, options: &str) -> mongodb::Client {
        let opts = if options.is_empty() {
            "serverSelectionTimeoutMS=10000".to_string()
        } else {
            format!("serverSelectionTimeoutMS=10000&{options}")
        };
        mongodb::Client::with_uri_str(self.uri(&opts))
            .await
            .expect("client")
    }

    /// A raw connection.
    pub async fn raw(&self) -> RawConn {
        RawConn::connect(self.port).await
    }

    /// The log lines so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().expect("log").clone()
    }

    /// The log, joined, once a line contains `needle`: the server's output is read on
    /// another thread, so a line written just before a reply may arrive after it. Panics
    /// after 5 s without one.
    pub async fn log_with(&self, needle: &str) -> String {
        for _ in 0..100 {
            let log = self.log().join("\n");
            if log.contains(needle) {
                return log;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("no log line with {needle:?}:\n{}", self.log().join("\n"));
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal (e.g. "TERM", "KILL", "INT").
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits for the process to exit (up to `timeout`), returning its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw TCP connection speaking bytes.
pub struct RawConn {
    /// The socket.
    pub stream: TcpStream,
    next_id: i32,
}

/// A reply read off a raw connection.
#[derive(Debug)]
pub struct RawReply {
    /// Its header.
    pub header: Header,
    /// The complete frame.
    pub frame: Vec<u8>,
}

impl RawReply {
    /// The body of an OP_MSG reply.
    pub fn msg(&self) -> cairn_wire::OpMsg<'_> {
        cairn_wire::OpMsg::parse(&self.frame).expect("OP_MSG reply")
    }

    /// The body document of an OP_MSG reply.
    pub fn body(&self) -> RawDocumentBuf {
        self.msg().body.into_owned()
    }

    /// The document of an OP_REPLY.
    pub fn reply_doc(&self) -> RawDocumentBuf {
        cairn_wire::op_query::parse_reply(&self.frame)
            .expect("OP_REPLY")
            .documents
            .into_iter()
            .next()
            .expect("one document")
    }
}

impl RawConn {
    /// Connects to 127.0.0.1:port.
    pub async fn connect(port: u16) -> RawConn {
        RawConn {
            stream: TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect"),
            next_id: 100,
        }
    }

    /// A fresh request id.
    pub fn next_id(&mut self) -> i32 {
        self.next_id += 1;
        self.next_id
    }

    /// Writes raw bytes.
    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    /// Writes raw bytes the server may refuse part-way: a server that closes the connection
    /// while a large message is still being written makes the write fail (broken pipe or
    /// reset), which is the outcome being tested. Returns whether every byte was written.
    pub async fn send_until_closed(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).await.is_ok()
    }

    /// Sends an OP_MSG command; returns its request id.
    pub async fn send_command(&mut self, body: &RawDocumentBuf, flags: u32) -> i32 {
        let id = self.next_id();
        let m = op_msg::encode(id, 0, flags, body, false);
        self.send(&m).await;
        id
    }

    /// Reads one message, or `None` if the server closed the connection; panics after
    /// `timeout`.
    pub async fn recv_within(&mut self, timeout: Duration) -> Option<RawReply> {
        tokio::time::timeout(timeout, self.recv_inner())
            .await
            .expect("timed out waiting for a reply")
    }

    /// Reads one message (10 s timeout), or `None` if the connection closed.
    pub async fn recv(&mut self) -> Option<RawReply> {
        self.recv_within(Duration::from_secs(10)).await
    }

    async fn recv_inner(&mut self) -> Option<RawReply> {
        let mut head = [0u8; HEADER_LEN];
        if self.stream.read_exact(&mut head).await.is_err() {
            return None;
        }
        let len = header::check_frame(&head, cairn_wire::MAX_MESSAGE_SIZE)
            .expect("valid reply length")
            .expect("length");
        let mut frame = head.to_vec();
        frame.resize(len, 0);
        if self
            .stream
            .read_exact(&mut frame[HEADER_LEN..])
            .await
            .is_err()
        {
            return None;
        }
        let header = Header::parse(&frame).expect("header");
        Some(RawReply { header, frame })
    }

    /// True when the server has closed the connection (reads EOF within `timeout`).
    pub async fn is_closed_within(&mut self, timeout: Duration) -> bool {
        let mut b = [0u8; 1];
        matches!(
            tokio::time::timeout(timeout, self.stream.read(&mut b)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }

    /// Runs a command and returns the reply body.
    pub async fn command(&mut self, body: RawDocumentBuf) -> RawDocumentBuf {
        let id = self.send_command(&body, 0).await;
        let r = self.recv().await.expect("reply");
        assert_eq!(r.header.response_to, id);
        r.body()
    }

    /// `ping` succeeds on this connection.
    pub async fn ping_ok(&mut self) -> bool {
        let r = self.command(rawdoc! {"ping": 1, "$db": "admin"}).await;
        r.get_f64("ok").ok() == Some(1.0)
    }
}

/// The error code of a failed driver operation: a command error, a single write error, or the
/// first write error of an `insertMany`.
pub fn code_of(e: &mongodb::error::Error) -> i32 {
    use mongodb::error::{ErrorKind, WriteFailure};
    match &*e.kind {
        ErrorKind::Command(c) => c.code,
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code,
        ErrorKind::InsertMany(m) => m
            .write_errors
            .as_ref()
            .and_then(|w| w.first())
            .map(|w| w.code)
            .unwrap_or(-1),
        other => panic!("unexpected error {other:?}"),
    }
}

/// Every document of a cursor.
pub async fn collect(mut cursor: mongodb::Cursor<bson::Document>) -> Vec<bson::Document> {
    let mut out = Vec::new();
    while cursor.advance().await.unwrap() {
        out.push(cursor.deserialize_current().unwrap());
    }
    out
}

/// A document's BSON bytes.
pub fn bytes(d: &bson::Document) -> Vec<u8> {
    RawDocumentBuf::try_from(d).unwrap().into_bytes()
}

/// Byte-for-byte equality of two document lists (order of documents, order of fields and
/// BSON types all matter).
#[track_caller]
pub fn assert_docs(actual: &[bson::Document], expected: &[bson::Document]) {
    let same = actual.len() == expected.len()
        && actual
            .iter()
            .zip(expected)
            .all(|(a, b)| bytes(a) == bytes(b));
    let show = |v: &[bson::Document]| {
        v.iter()
            .map(|d| format!("{d:?}"))
            .collect::<Vec<_>>()
            .join("\n  ")
    };
    assert!(
        same,
        "documents differ\nactual:\n  {}\nexpected:\n  {}",
        show(actual),
        show(expected)
    );
}

/// Runs a command that must succeed; returns its reply without the cluster-time gossip
/// (`$clusterTime`, `operationTime`) that a router adds to every reply (see
/// [`strip_gossip`]).
pub async fn cmd(db: &mongodb::Database, command: bson::Document) -> bson::Document {
    let mut r = db
        .run_command(command.clone())
        .await
        .unwrap_or_else(|e| panic!("{command}: {e}"));
    strip_gossip(&mut r);
    r
}

/// Removes `$clusterTime` and `operationTime` from a reply after checking they are there and
/// well formed (every reply of a router carries them, last).
#[track_caller]
pub fn strip_gossip(r: &mut bson::Document) {
    let ct = r
        .remove("$clusterTime")
        .unwrap_or_else(|| panic!("no $clusterTime in {r}"));
    let ct = ct.as_document().expect("$clusterTime document");
    assert!(ct.get_timestamp("clusterTime").is_ok(), "{ct}");
    assert!(
        matches!(r.remove("operationTime"), Some(bson::Bson::Timestamp(_))),
        "no operationTime in {r}"
    );
}

/// A raw reply without the cluster-time gossip (see [`strip_gossip`]).
#[track_caller]
pub fn strip_raw(r: &RawDocumentBuf) -> RawDocumentBuf {
    let mut d = bson::Document::try_from(r.as_ref()).expect("reply");
    strip_gossip(&mut d);
    RawDocumentBuf::try_from(&d).expect("reply")
}
