//! Awaitable and exhaust `hello`, driver monitoring, the connection limit and graceful
//! shutdown.

use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::{RawDocumentBuf, doc, rawdoc};
use cairn_compat_tests::TestServer;
use cairn_wire::op_msg::{EXHAUST_ALLOWED, MORE_TO_COME};

fn topology(h: &RawDocumentBuf) -> (ObjectId, i64) {
    let tv = h.get_document("topologyVersion").unwrap();
    (
        tv.get_object_id("processId").unwrap(),
        tv.get_i64("counter").unwrap(),
    )
}

#[tokio::test]
async fn awaitable_hello_waits_max_await_time() {
    let s = TestServer::start();
    let mut c = s.raw().await;
    let h = c.command(rawdoc! {"hello": 1, "$db": "admin"}).await;
    let (pid, counter) = topology(&h);

    let started = Instant::now();
    let r = c
        .command(rawdoc! {"hello": 1, "$db": "admin", "topologyVersion": {"processId": pid, "counter": counter}, "maxAwaitTimeMS": 700})
        .await;
    let waited = started.elapsed();
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    assert!(
        waited >= Duration::from_millis(650),
        "waited only {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");

    // a different processId is answered at once
    let started = Instant::now();
    c.command(rawdoc! {"hello": 1, "$db": "admin", "topologyVersion": {"processId": ObjectId::new(), "counter": 0_i64}, "maxAwaitTimeMS": 5000})
        .await;
    assert!(started.elapsed() < Duration::from_millis(500));

    // a counter ahead of the server's is an error
    let r = c
        .command(rawdoc! {"hello": 1, "$db": "admin", "topologyVersion": {"processId": pid, "counter": counter + 5}, "maxAwaitTimeMS": 10})
        .await;
    assert_eq!(r.get_i32("code").unwrap(), 51761);
}

#[tokio::test]
async fn exhaust_hello_streams_replies() {
    let s = TestServer::start();
    let mut c = s.raw().await;
    let h = c.command(rawdoc! {"hello": 1, "$db": "admin"}).await;
    let (pid, counter) = topology(&h);
    let body = rawdoc! {"hello": 1, "$db": "admin", "topologyVersion": {"processId": pid, "counter": counter}, "maxAwaitTimeMS": 300};
    let started = Instant::now();
    let id = c.send_command(&body, EXHAUST_ALLOWED).await;
    let first = c.recv().await.unwrap();
    assert_eq!(first.header.response_to, id);
    assert!(
        first.msg().more_to_come(),
        "exhaust replies carry moreToCome"
    );
    // further replies arrive without further requests, each answering the previous reply
    let mut previous = first.header.request_id;
    for _ in 0..3 {
        let next = c.recv().await.unwrap();
        assert!(next.msg().more_to_come());
        assert_eq!(next.header.response_to, previous);
        assert_eq!(next.body().get_f64("ok").unwrap(), 1.0);
        previous = next.header.request_id;
    }
    // four replies, each after ~300 ms of waiting: the stream does not spin
    assert!(
        started.elapsed() >= Duration::from_millis(1100),
        "{:?}",
        started.elapsed()
    );
    // exhaust without maxAwaitTimeMS is an error (and ends the stream: no moreToCome)
    let mut c = s.raw().await;
    c.send_command(&rawdoc! {"hello": 1, "$db": "admin"}, EXHAUST_ALLOWED)
        .await;
    let r = c.recv().await.unwrap();
    assert!(!r.msg().more_to_come());
    assert_eq!(r.body().get_i32("code").unwrap(), 51763);
    let _ = MORE_TO_COME;
}

#[tokio::test]
async fn closing_an_exhaust_stream_frees_the_connection() {
    let s = TestServer::start();
    let watcher = s.client().await;
    {
        let mut c = s.raw().await;
        let h = c.command(rawdoc! {"hello": 1, "$db": "admin"}).await;
        let (pid, counter) = topology(&h);
        c.send_command(
            &rawdoc! {"hello": 1, "$db": "admin", "topologyVersion": {"processId": pid, "counter": counter}, "maxAwaitTimeMS": 1_000},
            EXHAUST_ALLOWED,
        )
        .await;
        // the first reply also waits for maxAwaitTimeMS
        c.recv().await.unwrap();
    } // dropped mid-wait
    // the server notices the disconnect while waiting and closes its side
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let st = watcher
            .database("admin")
            .run_command(doc! {"serverStatus": 1})
            .await
            .unwrap();
        let conns = st.get_document("connections").unwrap();
        if conns.get_i32("exhaustHello").unwrap() == 0
            && conns.get_i32("awaitingTopologyChanges").unwrap() <= 1
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "exhaust stream still open: {conns}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn idle_driver_does_not_spin() {
    let s = TestServer::start();
    let client = s.client_with("heartbeatFrequencyMS=500").await;
    client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
    let probe = s.raw().await;
    drop(probe);
    let count = || async {
        let mut c = s.raw().await;
        let st = c.command(rawdoc! {"serverStatus": 1, "$db": "admin"}).await;
        st.get_document("network")
            .unwrap()
            .get_i64("numRequests")
            .unwrap()
    };
    let before = count().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = count().await;
    // Streaming monitoring sends one awaitable hello per heartbeat (≈6 in 3 s) plus RTT
    // pings; a spinning monitor would send thousands.
    assert!(after - before < 40, "{} requests in 3 s", after - before);
}

#[tokio::test]
async fn connection_limit_refuses_excess_connections() {
    let s = TestServer::start_with(&["--max-connections", "3"]);
    let mut a = s.raw().await;
    let mut b = s.raw().await;
    let mut c = s.raw().await;
    assert!(a.ping_ok().await && b.ping_ok().await && c.ping_ok().await);
    let mut d = s.raw().await;
    assert!(
        d.is_closed_within(Duration::from_secs(5)).await,
        "4th connection refused"
    );
    let st = a.command(rawdoc! {"serverStatus": 1, "$db": "admin"}).await;
    let conns = st.get_document("connections").unwrap();
    assert_eq!(conns.get_i32("rejected").unwrap(), 1);
    assert_eq!(conns.get_i32("available").unwrap(), 0);
    drop(c);
    // a freed permit admits a new connection
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut e = s.raw().await;
        if !e.is_closed_within(Duration::from_millis(100)).await {
            assert!(e.ping_ok().await);
            break;
        }
        assert!(Instant::now() < deadline);
    }
    assert!(b.ping_ok().await);
}

#[tokio::test]
async fn sigterm_drains_gracefully() {
    let mut s = TestServer::start();
    let mut waiting = s.raw().await;
    let h = waiting.command(rawdoc! {"hello": 1, "$db": "admin"}).await;
    let (pid, counter) = topology(&h);
    let id = waiting
        .send_command(
            &rawdoc! {"hello": 1, "$db": "admin", "topologyVersion": {"processId": pid, "counter": counter}, "maxAwaitTimeMS": 30_000},
            0,
        )
        .await;
    let mut idle = s.raw().await;
    assert!(idle.ping_ok().await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.signal("TERM");
    // the waiting hello is answered at once with ShutdownInProgress and a newer topology
    let r = waiting
        .recv_within(Duration::from_secs(5))
        .await
        .expect("an answer before closing");
    assert_eq!(r.header.response_to, id);
    let body = r.body();
    assert_eq!(body.get_i32("code").unwrap(), 91);
    assert_eq!(body.get_str("codeName").unwrap(), "ShutdownInProgress");
    assert_eq!(topology(&body).1, counter + 1);
    assert_eq!(s.wait_exit(Duration::from_secs(10)), Some(0), "clean exit");
    assert!(idle.is_closed_within(Duration::from_secs(1)).await);
    let log = s.log().join("\n");
    assert!(log.contains("Received signal"), "{log}");
    assert!(log.contains("Shutdown complete"), "{log}");
}

#[tokio::test]
async fn connections_are_logged_with_ids() {
    let s = TestServer::start();
    let mut c = s.raw().await;
    assert!(c.ping_ok().await);
    drop(c);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = s.log();
    let accepted = log
        .iter()
        .find(|l| l.contains("\"Connection accepted\""))
        .expect("accept logged");
    let v: serde_json::Value = serde_json::from_str(accepted).unwrap();
    assert_eq!(v["c"], "NETWORK");
    assert_eq!(v["id"], 22943);
    assert!(v["ctx"].as_str().unwrap().starts_with("conn"));
    assert!(
        v["attr"]["remote"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
    assert!(log.iter().any(|l| l.contains("\"Connection ended\"")));
}

#[tokio::test]
async fn slow_commands_are_logged() {
    // With --slow-ms 0 every command counts as slow.
    let s = TestServer::start_with(&["--slow-ms", "0"]);
    let mut c = s.raw().await;
    assert!(c.ping_ok().await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let log = s.log();
    let slow = log
        .iter()
        .find(|l| l.contains("\"Slow query\"") && l.contains("\"ping\""))
        .expect("slow query logged");
    let v: serde_json::Value = serde_json::from_str(slow).unwrap();
    assert_eq!(v["attr"]["ns"], "admin.$cmd");
    assert!(v["attr"]["durationMillis"].is_u64());
    assert!(v["ctx"].as_str().unwrap().starts_with("conn"));
}

#[tokio::test]
async fn slow_reads_log_their_plan_and_work() {
    let s = TestServer::start_with(&["--slow-ms", "0"]);
    let c = s.client().await;
    let coll = c.database("slowlog").collection::<bson::Document>("c");
    coll.insert_many((0..10).map(|i| doc! {"_id": i, "a": i % 5}))
        .await
        .unwrap();
    coll.create_index(mongodb::IndexModel::builder().keys(doc! {"a": 1}).build())
        .await
        .unwrap();
    let n = coll.count_documents(doc! {"a": 3}).await.unwrap();
    assert_eq!(n, 2);
    let mut cur = coll.find(doc! {"a": {"$gte": 4}}).await.unwrap();
    let mut got = 0;
    while cur.advance().await.unwrap() {
        got += 1;
    }
    assert_eq!(got, 2);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let log = s.log();
    let line = |cmd: &str| -> serde_json::Value {
        let l = log
            .iter()
            .find(|l| l.contains("\"Slow query\"") && l.contains(&format!("\"command\":\"{cmd}\"")))
            .unwrap_or_else(|| panic!("no slow {cmd} in {log:#?}"));
        serde_json::from_str(l).unwrap()
    };
    for (cmd, plan, docs) in [
        ("find", "IXSCAN { a: 1 }", 2),
        ("aggregate", "COUNT_SCAN { a: 1 }", 0),
    ] {
        let v = line(cmd);
        assert_eq!(v["attr"]["planSummary"], plan, "{v}");
        assert_eq!(v["attr"]["keysExamined"], 2, "{v}");
        assert_eq!(v["attr"]["docsExamined"], docs, "{v}");
    }
    // A command that reads nothing logs neither.
    let v = line("insert");
    assert!(v["attr"].get("planSummary").is_none(), "{v}");
    assert!(v["attr"].get("docsExamined").is_none(), "{v}");
}
