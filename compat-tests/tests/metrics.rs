//! The Prometheus endpoint (`--metrics-port`): off by default; `GET /metrics` serves the text
//! exposition format with counters that follow what clients do; other paths and methods are
//! refused.

use std::time::Duration;

use bson::{Document, doc};
use cairn_compat_tests::{TestServer, collect};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn metrics_port(s: &TestServer) -> Option<u16> {
    s.log().iter().find_map(|l| {
        if !l.contains("\"Metrics endpoint listening\"") {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
        v["attr"]["port"].as_u64().map(|p| p as u16)
    })
}

async fn http(port: u16, request: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    out
}

/// The value of the sample `name{labels}` (or `name` without labels).
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {series}"))
}

#[tokio::test]
async fn off_by_default() {
    let s = TestServer::start();
    assert!(metrics_port(&s).is_none());
}

#[tokio::test]
async fn scrape_follows_the_server() {
    let s = TestServer::start_with(&["--metrics-port", "0"]);
    let port = metrics_port(&s).expect("metrics port in the log");
    let c = s.client().await;
    let coll = c.database("m").collection::<Document>("c");
    coll.insert_many((0..20).map(|i| doc! {"i": i}))
        .await
        .unwrap();
    assert_eq!(collect(coll.find(doc! {}).await.unwrap()).await.len(), 20);
    let mut session = c.start_session().await.unwrap();
    session.start_transaction().await.unwrap();
    coll.insert_one(doc! {"t": 1})
        .session(&mut session)
        .await
        .unwrap();
    session.commit_transaction().await.unwrap();

    let resp = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let (head, body) = resp.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4"));
    assert!(body.contains("# TYPE cairn_opcounters_total counter"));
    assert!(body.contains("# TYPE cairn_operation_latency_seconds histogram"));
    assert_eq!(
        sample(body, "cairn_opcounters_total{type=\"insert\"}"),
        21.0
    );
    assert_eq!(sample(body, "cairn_documents_total{op=\"inserted\"}"), 21.0);
    assert_eq!(sample(body, "cairn_documents_total{op=\"returned\"}"), 20.0);
    assert_eq!(
        sample(body, "cairn_transactions_total{event=\"started\"}"),
        1.0
    );
    assert_eq!(
        sample(body, "cairn_transactions_total{event=\"committed\"}"),
        1.0
    );
    let writes = sample(
        body,
        "cairn_operation_latency_seconds_count{kind=\"writes\"}",
    );
    assert!(writes >= 2.0);
    assert_eq!(
        sample(
            body,
            "cairn_operation_latency_seconds_bucket{kind=\"writes\",le=\"+Inf\"}"
        ),
        writes
    );
    // Buckets are cumulative.
    let mut last = 0.0;
    for l in body
        .lines()
        .filter(|l| l.starts_with("cairn_operation_latency_seconds_bucket{kind=\"reads\""))
    {
        let v: f64 = l.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(v >= last, "{l}");
        last = v;
    }
    assert!(sample(body, "cairn_connections{state=\"current\"}") >= 1.0);
    assert!(sample(body, "cairn_storage_commits_total") >= 2.0);
    assert!(sample(body, "cairn_storage_bytes{where=\"disk\"}") > 0.0);
    assert!(sample(body, "cairn_uptime_seconds") >= 0.0);
    sample(body, "cairn_storage_compactions_total");
    sample(body, "cairn_storage_write_conflicts_total");
    // Every sample line belongs to a declared family.
    for l in body.lines().filter(|l| !l.starts_with('#')) {
        let name = l.split(['{', ' ']).next().unwrap();
        let base = name
            .trim_end_matches("_bucket")
            .trim_end_matches("_sum")
            .trim_end_matches("_count");
        assert!(
            body.contains(&format!("# TYPE {name} ")) || body.contains(&format!("# TYPE {base} ")),
            "{l}"
        );
    }

    let head = http(port, "HEAD /metrics HTTP/1.1\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 200 OK"));
    assert!(head.ends_with("\r\n\r\n"), "HEAD has no body");
    assert!(
        http(port, "GET /nope HTTP/1.1\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 404")
    );
    assert!(
        http(port, "POST /metrics HTTP/1.1\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 405")
    );
    assert!(
        http(port, "nonsense\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 400")
    );
    // The server is unaffected.
    coll.insert_one(doc! {"after": 1}).await.unwrap();
}
