//! The Prometheus endpoint: `GET /metrics` over HTTP on `--metrics-port` (off by default), so
//! no exporter is needed.
//!
//! [`start`] listens on the `--bind` addresses at that port and answers each connection once
//! (`Connection: close`): `GET`/`HEAD /metrics` returns the text exposition format (version
//! 0.0.4) rendered by [`render`] from the live counters — opcounters, operation latencies as
//! histograms, connections, network, cursors, documents, the query executor's work,
//! transactions, storage (commits, write conflicts, keys read and written, fsyncs, disk and
//! write-buffer bytes, journals, compactions) and uptime. Any other path is 404, any other
//! method 405, a malformed request 400.
//!
//! The HTTP handling is deliberately minimal: only the request line is read (bounded to
//! [`MAX_REQUEST_BYTES`] of head within [`REQUEST_TIMEOUT`]), at most [`MAX_CONNECTIONS`] are
//! served at once, and nothing is kept between requests. Invariant: a scrape reads atomics and
//! takes the cursor map's lock briefly; it never touches the storage engine beyond its
//! statistics.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tracing::{debug, info};

use crate::metrics::Kind;
use crate::state::ServerState;

/// Largest request head read.
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// Time allowed to send the request head.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapes served at once.
pub const MAX_CONNECTIONS: usize = 16;

/// Binds the endpoint on every `--bind` address at `port` and serves it in the background;
/// returns the addresses bound (with the actual port when `port` is 0).
pub async fn start(state: Arc<ServerState>, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let mut bound = Vec::new();
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut port = port;
    for host in &state.config.bind {
        let listener = TcpListener::bind((host.as_str(), port)).await?;
        let addr = listener.local_addr()?;
        // With port 0 the first address picks the port; the others use the same one.
        port = addr.port();
        info!(id = 4615612, address = %addr, port = addr.port(), "Metrics endpoint listening");
        bound.push(addr);
        let state = state.clone();
        let limit = limit.clone();
        tokio::spawn(async move {
            let mut shutdown = state.watch_shutdown();
            loop {
                let accepted = tokio::select! {
                    _ = shutdown.wait_for(|s| *s) => return,
                    a = listener.accept() => a,
                };
                let Ok((stream, _)) = accepted else {
                    continue;
                };
                let Ok(permit) = limit.clone().try_acquire_owned() else {
                    continue;
                };
                let state = state.clone();
                tokio::spawn(async move {
                    answer(&state, stream).await;
                    drop(permit);
                });
            }
        });
    }
    Ok(bound)
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// `GET`/`HEAD` on a path (without its query string); `head` for `HEAD`.
    Get {
        /// The path.
        path: String,
        /// A `HEAD` request.
        head: bool,
    },
    /// Another method.
    OtherMethod,
    /// Not an HTTP/1.x request line.
    Malformed,
}

/// Parses the request line of an HTTP/1.x request head.
pub fn parse_request(head: &[u8]) -> Request {
    let line_end = head
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(head.len());
    let Ok(line) = std::str::from_utf8(&head[..line_end]) else {
        return Request::Malformed;
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Request::Malformed;
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Request::Malformed;
    }
    let path = target.split('?').next().unwrap_or(target).to_string();
    match method {
        "GET" => Request::Get { path, head: false },
        "HEAD" => Request::Get { path, head: true },
        _ => Request::OtherMethod,
    }
}

async fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            return Some(buf);
        }
        if buf.len() >= MAX_REQUEST_BYTES {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn answer(state: &ServerState, mut stream: TcpStream) {
    let head = tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream))
        .await
        .ok()
        .flatten();
    let (status, body, head_only) = match head.as_deref().map(parse_request) {
        Some(Request::Get { path, head }) if path == "/metrics" => ("200 OK", render(state), head),
        Some(Request::Get { head, .. }) => ("404 Not Found", "not found\n".to_string(), head),
        Some(Request::OtherMethod) => ("405 Method Not Allowed", "GET only\n".to_string(), false),
        Some(Request::Malformed) | None => ("400 Bad Request", "bad request\n".to_string(), false),
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if !head_only {
        response.push_str(&body);
    }
    if let Err(e) = stream.write_all(response.as_bytes()).await {
        debug!(error = %e, "metrics response not sent");
    }
    let _ = stream.shutdown().await;
}

/// Writes one metric family: `# HELP`, `# TYPE` and its samples.
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(&str, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, v) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {v}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    }
}

fn u(a: &AtomicU64) -> f64 {
    a.load(Relaxed) as f64
}

fn i(a: &AtomicI64) -> f64 {
    a.load(Relaxed) as f64
}

/// The exposition text for the server's current counters.
pub fn render(s: &ServerState) -> String {
    let mut out = String::with_capacity(8 * 1024);
    family(
        &mut out,
        "cairn_uptime_seconds",
        "gauge",
        "Seconds since the server started.",
        &[("", s.uptime().as_secs_f64())],
    );
    let o = &s.opcounters;
    family(
        &mut out,
        "cairn_opcounters_total",
        "counter",
        "Operations by type (serverStatus.opcounters).",
        &[
            ("type=\"insert\"", i(&o.insert)),
            ("type=\"query\"", i(&o.query)),
            ("type=\"update\"", i(&o.update)),
            ("type=\"delete\"", i(&o.delete)),
            ("type=\"getmore\"", i(&o.getmore)),
            ("type=\"command\"", i(&o.command)),
        ],
    );
    let name = "cairn_operation_latency_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Command latency by kind (serverStatus.opLatencies)."
    );
    let _ = writeln!(out, "# TYPE {name} histogram");
    for k in Kind::ALL {
        let l = s.metrics.latency(k);
        let kind = k.name();
        for (bound, n) in l.cumulative() {
            let _ = writeln!(out, "{name}_bucket{{kind=\"{kind}\",le=\"{bound}\"}} {n}");
        }
        let ops = l.ops.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{kind=\"{kind}\",le=\"+Inf\"}} {ops}");
        let _ = writeln!(
            out,
            "{name}_sum{{kind=\"{kind}\"}} {}",
            l.micros.load(Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count{{kind=\"{kind}\"}} {ops}");
    }
    let c = &s.connections;
    family(
        &mut out,
        "cairn_connections",
        "gauge",
        "Client connections: open, running a command, still available under --max-connections.",
        &[
            ("state=\"current\"", i(&c.current)),
            ("state=\"active\"", i(&c.active)),
            (
                "state=\"available\"",
                f64::from(s.config.max_connections) - i(&c.current),
            ),
        ],
    );
    family(
        &mut out,
        "cairn_connections_created_total",
        "counter",
        "Connections accepted since start.",
        &[("", i(&c.total_created))],
    );
    family(
        &mut out,
        "cairn_connections_rejected_total",
        "counter",
        "Connections refused at the connection limit.",
        &[("", i(&c.rejected))],
    );
    let n = &s.network;
    family(
        &mut out,
        "cairn_network_bytes_total",
        "counter",
        "Bytes received and sent on client connections (after decompression / before compression).",
        &[
            ("direction=\"in\"", i(&n.bytes_in)),
            ("direction=\"out\"", i(&n.bytes_out)),
        ],
    );
    family(
        &mut out,
        "cairn_network_requests_total",
        "counter",
        "Messages received.",
        &[("", i(&n.num_requests))],
    );
    let m = &s.metrics;
    let (open, pinned, no_timeout) = s.cursors.counts();
    family(
        &mut out,
        "cairn_cursors_open",
        "gauge",
        "Open cursors: all, in use by a getMore, without an idle timeout.",
        &[
            ("state=\"total\"", open as f64),
            ("state=\"pinned\"", pinned as f64),
            ("state=\"noTimeout\"", no_timeout as f64),
        ],
    );
    family(
        &mut out,
        "cairn_cursors_total",
        "counter",
        "Cursors opened, timed out, and returning more than one batch.",
        &[
            ("event=\"opened\"", u(&m.cursors_opened)),
            ("event=\"timedOut\"", u(&m.cursors_timed_out)),
            (
                "event=\"moreThanOneBatch\"",
                u(&m.cursors_more_than_one_batch),
            ),
        ],
    );
    family(
        &mut out,
        "cairn_documents_total",
        "counter",
        "Documents inserted, returned, updated and deleted (serverStatus.metrics.document).",
        &[
            ("op=\"inserted\"", u(&m.docs_inserted)),
            ("op=\"returned\"", u(&m.docs_returned)),
            ("op=\"updated\"", u(&m.docs_updated)),
            ("op=\"deleted\"", u(&m.docs_deleted)),
        ],
    );
    family(
        &mut out,
        "cairn_query_examined_total",
        "counter",
        "Index keys and documents examined by queries and writes.",
        &[
            ("what=\"keys\"", u(&m.scanned)),
            ("what=\"documents\"", u(&m.scanned_objects)),
        ],
    );
    family(
        &mut out,
        "cairn_query_collection_scans_total",
        "counter",
        "Operations that scanned a whole collection.",
        &[("", u(&m.collection_scans))],
    );
    family(
        &mut out,
        "cairn_transactions_total",
        "counter",
        "Multi-document transactions started, committed, and aborted by abortTransaction.",
        &[
            ("event=\"started\"", u(&m.txn_started)),
            ("event=\"committed\"", u(&m.txn_committed)),
            ("event=\"aborted\"", u(&m.txn_aborted)),
        ],
    );
    let sc = &s.store.counters;
    family(
        &mut out,
        "cairn_storage_commits_total",
        "counter",
        "Storage write transactions committed.",
        &[("", u(&sc.commits))],
    );
    family(
        &mut out,
        "cairn_storage_write_conflicts_total",
        "counter",
        "Storage transactions rerun after a write conflict.",
        &[("", u(&sc.conflicts))],
    );
    family(
        &mut out,
        "cairn_storage_keys_total",
        "counter",
        "Keys read and written by committed storage write transactions.",
        &[
            ("op=\"read\"", u(&sc.keys_read)),
            ("op=\"written\"", u(&sc.keys_written)),
        ],
    );
    family(
        &mut out,
        "cairn_storage_fsyncs_total",
        "counter",
        "Journal fsyncs.",
        &[("", s.store.syncs() as f64)],
    );
    let e = s.store.engine().stats();
    family(
        &mut out,
        "cairn_storage_bytes",
        "gauge",
        "Bytes of the database on disk, in write buffers, in the block cache, in the row cache, and pinned (filter and index blocks held outside the block cache).",
        &[
            ("where=\"disk\"", e.disk_bytes as f64),
            ("where=\"writeBuffer\"", e.write_buffer_bytes as f64),
            ("where=\"blockCache\"", e.cache_bytes as f64),
            ("where=\"rowCache\"", e.row_cache_bytes as f64),
            ("where=\"pinned\"", e.pinned_bytes as f64),
        ],
    );
    family(
        &mut out,
        "cairn_storage_journals",
        "gauge",
        "Journal files on disk.",
        &[("", e.journals as f64)],
    );
    family(
        &mut out,
        "cairn_storage_compactions_total",
        "counter",
        "Storage compactions finished since start.",
        &[("", e.compactions_completed as f64)],
    );
    family(
        &mut out,
        "cairn_storage_compactions_running",
        "gauge",
        "Storage compactions running now.",
        &[("", e.active_compactions as f64)],
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        assert_eq!(
            parse_request(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Request::Get {
                path: "/metrics".into(),
                head: false
            }
        );
        assert_eq!(
            parse_request(b"HEAD /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Request::Get {
                path: "/metrics".into(),
                head: true
            }
        );
        assert_eq!(
            parse_request(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Request::OtherMethod
        );
        assert_eq!(parse_request(b"GET /metrics\r\n\r\n"), Request::Malformed);
        assert_eq!(
            parse_request(b"GET metrics HTTP/1.1\r\n\r\n"),
            Request::Malformed
        );
        assert_eq!(
            parse_request(&[0xff, 0xfe, b'\r', b'\n']),
            Request::Malformed
        );
    }

    #[test]
    fn family_format() {
        let mut s = String::new();
        family(
            &mut s,
            "x_total",
            "counter",
            "Help.",
            &[("a=\"b\"", 2.0), ("", 1.5)],
        );
        assert_eq!(
            s,
            "# HELP x_total Help.\n# TYPE x_total counter\nx_total{a=\"b\"} 2\nx_total 1.5\n"
        );
    }
}
