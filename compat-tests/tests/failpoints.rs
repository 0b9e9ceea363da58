//! Test commands and fail points through the official Rust driver: test commands exist only
//! with `--enable-test-commands` / `--setParameter enableTestCommands=1`; `configureFailPoint`
//! modes; `failCommand` (errorCode, errorLabels overriding the computed labels,
//! closeConnection, blockConnection, writeConcernError, appName) driving the driver's
//! retryable reads, retryable writes and transaction commit retries; `waitForFailPoint`,
//! `sleep`, `maxTimeAlwaysTimeOut`, `failGetMoreAfterCursorCheckout` and
//! `onPrimaryTransactionalWrite`.

use std::time::{Duration, Instant};

use bson::{Bson, Document, RawDocumentBuf, doc, rawdoc};
use cairn_compat_tests::{TestServer, code_of, collect};

async fn admin(c: &mongodb::Client, cmd: Document) -> mongodb::error::Result<Document> {
    c.database("admin").run_command(cmd).await
}

async fn fail_point(c: &mongodb::Client, cmd: Document) -> Document {
    admin(c, cmd).await.expect("configureFailPoint")
}

fn test_server() -> TestServer {
    TestServer::start_with(&["--enable-test-commands"])
}

#[tokio::test]
async fn test_commands_exist_only_when_enabled() {
    let s = TestServer::start();
    let c = s.client().await;
    for cmd in [
        doc! {"configureFailPoint": "failCommand", "mode": "off"},
        doc! {"sleep": 1, "millis": 1},
        doc! {"waitForFailPoint": "failCommand", "timesEntered": 1},
    ] {
        let e = admin(&c, cmd.clone()).await.unwrap_err();
        assert_eq!(code_of(&e), 59, "{cmd}");
    }
    let params = admin(&c, doc! {"getParameter": "*"}).await.unwrap();
    assert!(!params.get_bool("enableTestCommands").unwrap());
    let cmds = admin(&c, doc! {"listCommands": 1}).await.unwrap();
    assert!(!cmds.get_document("commands").unwrap().contains_key("sleep"));

    for flags in [
        &["--enable-test-commands"][..],
        &["--setParameter", "enableTestCommands=1"][..],
    ] {
        let s = TestServer::start_with(flags);
        let c = s.client().await;
        let params = admin(&c, doc! {"getParameter": "*"}).await.unwrap();
        assert!(params.get_bool("enableTestCommands").unwrap());
        let details = admin(
            &c,
            doc! {"getParameter": {"showDetails": true}, "enableTestCommands": 1},
        )
        .await
        .unwrap();
        let d = details.get_document("enableTestCommands").unwrap();
        assert!(!d.get_bool("settableAtRuntime").unwrap());
        assert!(d.get_bool("settableAtStartup").unwrap());
        let opts = admin(&c, doc! {"getCmdLineOpts": 1}).await.unwrap();
        assert_eq!(
            opts.get_document("parsed")
                .unwrap()
                .get_document("setParameter")
                .unwrap()
                .get_str("enableTestCommands")
                .unwrap(),
            "1"
        );
        let cmds = admin(&c, doc! {"listCommands": 1}).await.unwrap();
        assert!(cmds.get_document("commands").unwrap().contains_key("sleep"));
        // Runtime-only: setParameter refuses it.
        let e = admin(&c, doc! {"setParameter": 1, "enableTestCommands": 0})
            .await
            .unwrap_err();
        assert_eq!(code_of(&e), 72);
    }
}

/// A mongod-style YAML config file: `setParameter` and mongod options, the command line
/// winning over it; unknown options stop the server.
#[tokio::test]
async fn config_file_parameters_and_options() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cairn.yaml");
    std::fs::write(
        &path,
        "setParameter:\n  enableTestCommands: 1\n  transactionLifetimeLimitSeconds: 9\n\
         operationProfiling:\n  mode: all\n  slowOpThresholdMs: 12\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let s = TestServer::start_with(&["--config", p, "--slowms", "15"]);
    let c = s.client().await;
    let r = admin(
        &c,
        doc! {"getParameter": 1, "enableTestCommands": 1, "transactionLifetimeLimitSeconds": 1},
    )
    .await
    .unwrap();
    assert!(r.get_bool("enableTestCommands").unwrap());
    assert_eq!(r.get_i32("transactionLifetimeLimitSeconds").unwrap(), 9);
    // Test commands are on.
    admin(&c, doc! {"sleep": 1, "millis": 1}).await.unwrap();
    let prof = c
        .database("cfg")
        .run_command(doc! {"profile": -1})
        .await
        .unwrap();
    assert_eq!(prof.get_i32("was").unwrap(), 2);
    assert_eq!(prof.get_i32("slowms").unwrap(), 15, "the command line wins");
    let opts = admin(&c, doc! {"getCmdLineOpts": 1}).await.unwrap();
    let parsed = opts.get_document("parsed").unwrap();
    assert_eq!(parsed.get_str("config").unwrap(), p);
    assert_eq!(
        parsed
            .get_document("setParameter")
            .unwrap()
            .get_str("transactionLifetimeLimitSeconds")
            .unwrap(),
        "9"
    );
    assert_eq!(
        parsed
            .get_document("operationProfiling")
            .unwrap()
            .get_i32("slowOpThresholdMs")
            .unwrap(),
        15
    );

    for (text, want) in [
        ("net:\n  portt: 1\n", "Unrecognized option: net.portt"),
        (
            "setParameter:\n  noSuchParameter: 1\n",
            "Unknown --setParameter 'noSuchParameter'",
        ),
        ("net: [1\n", "Error parsing YAML config file"),
    ] {
        std::fs::write(&path, text).unwrap();
        let out = std::process::Command::new(cairn_compat_tests::cairn_bin())
            .args(["--port", "0", "-f", p])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{text}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{text}: {err}");
    }
}

#[tokio::test]
async fn bad_startup_parameters_stop_the_server() {
    for (arg, want) in [
        (
            "noSuchParameter=1",
            "Unknown --setParameter 'noSuchParameter'",
        ),
        ("maxBSONDepth=10", "Cannot use --setParameter to set"),
        ("enableTestCommands=maybe", "Invalid boolean value"),
    ] {
        let out = std::process::Command::new(cairn_compat_tests::cairn_bin())
            .args(["--port", "0", "--setParameter", arg])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{arg}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{arg}: {err}");
    }
    // A state parameter takes effect at startup.
    let s = TestServer::start_with(&["--setParameter", "transactionLifetimeLimitSeconds=7"]);
    let c = s.client().await;
    let r = admin(
        &c,
        doc! {"getParameter": 1, "transactionLifetimeLimitSeconds": 1},
    )
    .await
    .unwrap();
    assert_eq!(r.get_i32("transactionLifetimeLimitSeconds").unwrap(), 7);
}

#[tokio::test]
async fn configure_fail_point_modes_and_errors() {
    let s = test_server();
    let c = s.client().await;
    let err = |cmd: Document| {
        let c = c.clone();
        async move { code_of(&admin(&c, cmd).await.unwrap_err()) }
    };
    assert_eq!(
        err(doc! {"configureFailPoint": "noSuchPoint", "mode": "alwaysOn"}).await,
        266
    );
    assert_eq!(err(doc! {"configureFailPoint": "failCommand"}).await, 20);
    assert_eq!(
        err(doc! {"configureFailPoint": "failCommand", "mode": "sometimes"}).await,
        2
    );
    assert_eq!(
        err(doc! {"configureFailPoint": "failCommand", "mode": {"times": -1}}).await,
        2
    );
    assert_eq!(
        err(doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn", "data": 3}).await,
        14
    );
    let e = c
        .database("test")
        .run_command(doc! {"configureFailPoint": "failCommand", "mode": "off"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 13);

    // {times: 2}: two failures, then the point turns itself off; `count` is timesEntered.
    let r = fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 2},
        "data": {"failCommands": ["ping"], "errorCode": 2}},
    )
    .await;
    assert_eq!(r.get_i32("count").unwrap(), 0);
    let db = c.database("fp");
    for _ in 0..2 {
        let e = db.run_command(doc! {"ping": 1}).await.unwrap_err();
        assert_eq!(code_of(&e), 2);
        assert!(
            e.to_string()
                .contains("Failing command via 'failCommand' failpoint")
        );
    }
    db.run_command(doc! {"ping": 1}).await.unwrap();
    // Other commands are not selected.
    db.run_command(doc! {"buildInfo": 1}).await.unwrap();
    let r = fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "off"},
    )
    .await;
    assert_eq!(r.get_i32("count").unwrap(), 2);

    // {skip: 1}: the first selected command passes, the next ones fail.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"skip": 1},
        "data": {"failCommands": ["ping"], "errorCode": 8}},
    )
    .await;
    db.run_command(doc! {"ping": 1}).await.unwrap();
    assert_eq!(
        code_of(&db.run_command(doc! {"ping": 1}).await.unwrap_err()),
        8
    );
    assert_eq!(
        code_of(&db.run_command(doc! {"ping": 1}).await.unwrap_err()),
        8
    );
    // {activationProbability: 0}: never.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"activationProbability": 0.0},
        "data": {"failCommands": ["ping"], "errorCode": 8}},
    )
    .await;
    for _ in 0..20 {
        db.run_command(doc! {"ping": 1}).await.unwrap();
    }
    // The failpoint.<name> parameters are not listed, but configureFailPoint itself is never
    // failed, even when named.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn",
        "data": {"failCommands": ["configureFailPoint"], "errorCode": 8}},
    )
    .await;
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "off"},
    )
    .await;
}

#[tokio::test]
async fn error_labels_replace_the_computed_ones() {
    let s = test_server();
    let c = s.client().await;
    let mut raw = s.raw().await;
    // errorLabels given: exactly those labels.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["find"], "errorCode": 91,
                 "errorLabels": ["RetryableWriteError", "Custom"]}},
    )
    .await;
    let r = raw.command(rawdoc! {"find": "c", "$db": "t"}).await;
    assert_eq!(r.get_i32("code").unwrap(), 91);
    assert_eq!(r.get_str("codeName").unwrap(), "ShutdownInProgress");
    let labels: Vec<&str> = r
        .get_array("errorLabels")
        .unwrap()
        .into_iter()
        .map(|l| l.unwrap().as_str().unwrap())
        .collect();
    assert_eq!(labels, ["RetryableWriteError", "Custom"]);

    // Inside a transaction a WriteConflict is labelled TransientTransactionError…
    let lsid =
        rawdoc! {"id": bson::Binary {subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![7; 16]}};
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["insert"], "errorCode": 112}},
    )
    .await;
    let r = raw
        .command(
            rawdoc! {"insert": "c", "documents": [{"_id": 1}], "lsid": lsid.clone(),
            "txnNumber": 1_i64, "startTransaction": true, "autocommit": false,
            "$db": "t"},
        )
        .await;
    assert_eq!(r.get_i32("code").unwrap(), 112);
    assert_eq!(
        r.get_array("errorLabels")
            .unwrap()
            .into_iter()
            .next()
            .unwrap()
            .unwrap()
            .as_str(),
        Some("TransientTransactionError")
    );
    // …and `errorLabels: []` suppresses it.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["insert"], "errorCode": 112, "errorLabels": []}},
    )
    .await;
    let r = raw
        .command(
            rawdoc! {"insert": "c", "documents": [{"_id": 1}], "lsid": lsid,
            "txnNumber": 2_i64, "startTransaction": true, "autocommit": false,
            "$db": "t"},
        )
        .await;
    assert_eq!(r.get_i32("code").unwrap(), 112);
    assert!(r.get_array("errorLabels").is_err(), "{r:?}");
}

#[tokio::test]
async fn retryable_writes_and_reads_under_fail_command() {
    let s = test_server();
    let c = s.client().await;
    let coll = c.database("fp").collection::<Document>("rw");

    // A RetryableWriteError label makes the driver retry the insert once: it succeeds. (The
    // code is HostUnreachable, retryable without being a state-change error: a
    // ShutdownInProgress would also make the driver mark the server unknown and wait for its
    // monitor before retrying, as it does with a real router.)
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["insert"], "errorCode": 6,
                 "errorLabels": ["RetryableWriteError"]}},
    )
    .await;
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    // Without the label (a router adds none itself) the error reaches the application.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["insert"], "errorCode": 6}},
    )
    .await;
    let e = coll.insert_one(doc! {"_id": 2}).await.unwrap_err();
    assert_eq!(code_of(&e), 6);
    assert!(!e.contains_label("RetryableWriteError"));
    // Two failures in a row: the one retry fails too.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 2},
        "data": {"failCommands": ["insert"], "errorCode": 6,
                 "errorLabels": ["RetryableWriteError"]}},
    )
    .await;
    let e = coll.insert_one(doc! {"_id": 3}).await.unwrap_err();
    assert_eq!(code_of(&e), 6);
    // A closed connection is a network error: the driver retries the write on a new one.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["insert"], "closeConnection": true}},
    )
    .await;
    coll.insert_one(doc! {"_id": 4}).await.unwrap();
    // A writeConcernError carrying RetryableWriteError: the write applied, the driver
    // retries it, and the retry is answered from the retryable-write record (no duplicate).
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["insert"],
                 "writeConcernError": {"code": 64, "errmsg": "waiting for replication timed out"},
                 "errorLabels": ["RetryableWriteError"]}},
    )
    .await;
    coll.insert_one(doc! {"_id": 5}).await.unwrap();
    let ids: Vec<Bson> = collect(coll.find(doc! {}).sort(doc! {"_id": 1}).await.unwrap())
        .await
        .into_iter()
        .map(|d| d.get("_id").unwrap().clone())
        .collect();
    assert_eq!(ids, [Bson::Int32(1), Bson::Int32(4), Bson::Int32(5)]);

    // Retryable reads: a closed connection and a retryable code are retried once.
    for data in [
        doc! {"failCommands": ["find"], "closeConnection": true},
        doc! {"failCommands": ["find"], "errorCode": 6},
    ] {
        fail_point(
            &c,
            doc! {"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": data},
        )
        .await;
        let docs = collect(coll.find(doc! {}).await.unwrap()).await;
        assert_eq!(docs.len(), 3);
    }
    // With retryReads=false the failure reaches the application.
    let no_retry = s.client_with("retryReads=false").await;
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["find"], "errorCode": 6}},
    )
    .await;
    let e = no_retry
        .database("fp")
        .collection::<Document>("rw")
        .find(doc! {})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 6);
}

#[tokio::test]
async fn write_concern_error_reply_shape() {
    let s = test_server();
    let c = s.client().await;
    let mut raw = s.raw().await;
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["insert"],
                 "writeConcernError": {"code": 100, "errmsg": "Not enough data-bearing nodes"}}},
    )
    .await;
    let r = raw
        .command(rawdoc! {"insert": "w", "documents": [{"_id": 1}], "$db": "t"})
        .await;
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    assert_eq!(r.get_i32("n").unwrap(), 1);
    let wce = r.get_document("writeConcernError").unwrap();
    assert_eq!(wce.get_i32("code").unwrap(), 100);
    assert!(r.get_array("errorLabels").is_err());
    // Commands that take no write concern are never given one.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn",
        "data": {"failCommands": ["find"], "writeConcernError": {"code": 100, "errmsg": "x"}}},
    )
    .await;
    let r = raw.command(rawdoc! {"find": "w", "$db": "t"}).await;
    assert!(r.get_document("writeConcernError").is_err());
    // An aggregate takes one when its pipeline writes ($out, $merge), not otherwise.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn",
        "data": {"failCommands": ["aggregate"], "writeConcernError": {"code": 79, "errmsg": "x"}}},
    )
    .await;
    for (stage, want) in [
        (rawdoc! {"$out": "w_out"}, true),
        (rawdoc! {"$merge": {"into": "w_merge"}}, true),
        (rawdoc! {"$match": {}}, false),
    ] {
        let r = raw
            .command(
                rawdoc! {"aggregate": "w", "pipeline": [stage.clone()], "cursor": {}, "$db": "t"},
            )
            .await;
        assert_eq!(r.get_f64("ok").unwrap(), 1.0, "{r:?}");
        assert_eq!(
            r.get_document("writeConcernError").is_ok(),
            want,
            "{stage:?}"
        );
    }
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "off"},
    )
    .await;
}

#[tokio::test]
async fn app_name_selects_the_client() {
    let s = test_server();
    let c = s.client().await;
    let target = s.client_with("appName=victim").await;
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn",
        "data": {"failCommands": ["find"], "errorCode": 2, "appName": "victim"}},
    )
    .await;
    let coll = |cl: &mongodb::Client| cl.database("fp").collection::<Document>("a");
    collect(coll(&c).find(doc! {}).await.unwrap()).await;
    let e = coll(&target).find(doc! {}).await.unwrap_err();
    assert_eq!(code_of(&e), 2);
    // The handshake hello is selected by the appName it declares (so drivers can slow their
    // own monitors' handshakes).
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn",
        "data": {"failCommands": ["hello"], "errorCode": 2, "appName": "victim"}},
    )
    .await;
    let hello = |app: &str| {
        rawdoc! {"hello": 1, "client": {"application": {"name": app},
        "driver": {"name": "raw", "version": "0"}, "os": {"type": "Linux"}}, "$db": "admin"}
    };
    let r = s.raw().await.command(hello("victim")).await;
    assert_eq!(r.get_i32("code").unwrap(), 2, "{r:?}");
    let r = s.raw().await.command(hello("other")).await;
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    // failInternalCommands: every Cairn client is external, so either value selects them.
    for internal in [true, false] {
        fail_point(
            &c,
            doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
            "data": {"failCommands": ["find"], "errorCode": 2,
                     "failInternalCommands": internal}},
        )
        .await;
        let e = coll(&c).find(doc! {}).await.unwrap_err();
        assert_eq!(code_of(&e), 2, "failInternalCommands: {internal}");
        collect(coll(&c).find(doc! {}).await.unwrap()).await;
    }
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "off"},
    )
    .await;
}

/// `getParameter` with `allParameters` and `showDetails`, and `setParameter`'s errors.
#[tokio::test]
async fn get_parameter_all_with_details_and_set_parameter_errors() {
    let s = test_server();
    let c = s.client().await;
    let all = admin(
        &c,
        doc! {"getParameter": {"allParameters": true, "showDetails": true}},
    )
    .await
    .unwrap();
    let star = admin(&c, doc! {"getParameter": "*"}).await.unwrap();
    let names = |d: &Document| -> Vec<String> {
        d.keys()
            .filter(|k| !matches!(k.as_str(), "ok" | "$clusterTime" | "operationTime"))
            .cloned()
            .collect()
    };
    assert_eq!(names(&all), names(&star));
    assert!(names(&all).len() > 5, "{all}");
    for name in names(&all) {
        let d = all.get_document(&name).unwrap();
        assert_eq!(Some(d.get("value").unwrap()), star.get(&name), "{name}");
        d.get_bool("settableAtRuntime").unwrap();
        d.get_bool("settableAtStartup").unwrap();
    }
    let t = all.get_document("enableTestCommands").unwrap();
    assert!(t.get_bool("value").unwrap());
    // setParameter: unknown names, startup-only parameters, wrong types, nothing to set.
    let code = |cmd: Document| {
        let c = c.clone();
        async move { code_of(&admin(&c, cmd).await.unwrap_err()) }
    };
    assert_eq!(
        code(doc! {"setParameter": 1, "noSuchParameter": 1}).await,
        72
    );
    assert_eq!(
        code(doc! {"setParameter": 1, "enableTestCommands": 0}).await,
        72
    );
    assert_eq!(
        code(doc! {"setParameter": 1, "transactionLifetimeLimitSeconds": "x"}).await,
        2
    );
    assert_eq!(code(doc! {"setParameter": 1}).await, 72);
    let old = admin(
        &c,
        doc! {"setParameter": 1, "transactionLifetimeLimitSeconds": 45},
    )
    .await
    .unwrap();
    assert_eq!(old.get_i32("was").unwrap(), 60);
    let r = admin(
        &c,
        doc! {"getParameter": 1, "transactionLifetimeLimitSeconds": 1},
    )
    .await
    .unwrap();
    assert_eq!(r.get_i32("transactionLifetimeLimitSeconds").unwrap(), 45);
}

#[tokio::test]
async fn block_connection_sleep_and_wait_for_fail_point() {
    let s = test_server();
    let c = s.client().await;
    let db = c.database("fp");
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn",
        "data": {"failCommands": ["ping"], "blockConnection": true, "blockTimeMS": 300}},
    )
    .await;
    let t = Instant::now();
    db.run_command(doc! {"ping": 1}).await.unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    // maxTimeMS cuts the block short.
    let t = Instant::now();
    let e = db
        .run_command(doc! {"ping": 1, "maxTimeMS": 50})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 50);
    assert!(
        t.elapsed() < Duration::from_millis(280),
        "{:?}",
        t.elapsed()
    );
    // blockConnection without blockTimeMS is InvalidOptions.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn",
        "data": {"failCommands": ["ping"], "blockConnection": true}},
    )
    .await;
    assert_eq!(
        code_of(&db.run_command(doc! {"ping": 1}).await.unwrap_err()),
        72
    );
    let count = fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "off"},
    )
    .await
    .get_i32("count")
    .unwrap();

    // waitForFailPoint returns once a blocked command entered the point.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["insert"], "blockConnection": true, "blockTimeMS": 500}},
    )
    .await;
    let writer = {
        let c = c.clone();
        tokio::spawn(async move {
            c.database("fp")
                .collection::<Document>("w")
                .insert_one(doc! {"x": 1})
                .await
        })
    };
    admin(
        &c,
        doc! {"waitForFailPoint": "failCommand", "timesEntered": i64::from(count) + 1,
        "maxTimeMS": 10_000},
    )
    .await
    .unwrap();
    writer.await.unwrap().unwrap();
    // Waiting for an entry that never comes ends with maxTimeMS.
    let e = admin(
        &c,
        doc! {"waitForFailPoint": "failCommand", "timesEntered": 1_000_000_i64, "maxTimeMS": 100},
    )
    .await
    .unwrap_err();
    assert_eq!(code_of(&e), 50);
    let e = admin(&c, doc! {"waitForFailPoint": "nope", "timesEntered": 1})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 266);

    // sleep: sleeps, and maxTimeMS interrupts it.
    let t = Instant::now();
    admin(&c, doc! {"sleep": 1, "millis": 200}).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(200));
    let e = admin(&c, doc! {"sleep": 1, "secs": 5, "maxTimeMS": 100})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 50);
    let e = admin(&c, doc! {"sleep": 1, "millis": "x"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 34345);
    let e = c
        .database("fp")
        .run_command(doc! {"sleep": 1, "millis": 1})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 13);
}

#[tokio::test]
async fn max_time_always_times_out() {
    let s = test_server();
    let c = s.client().await;
    let coll = c.database("fp").collection::<Document>("m");
    coll.insert_many((0..10).map(|i| doc! {"i": i}))
        .await
        .unwrap();
    fail_point(
        &c,
        doc! {"configureFailPoint": "maxTimeAlwaysTimeOut", "mode": "alwaysOn"},
    )
    .await;
    let e = coll
        .find(doc! {})
        .max_time(Duration::from_secs(60))
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 50);
    // Without maxTimeMS nothing times out.
    assert_eq!(collect(coll.find(doc! {}).await.unwrap()).await.len(), 10);
    let e = c
        .database("fp")
        .run_command(doc! {"count": "m", "maxTimeMS": 60_000})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 50);
    fail_point(
        &c,
        doc! {"configureFailPoint": "maxTimeAlwaysTimeOut", "mode": "off"},
    )
    .await;
    assert_eq!(
        collect(
            coll.find(doc! {})
                .max_time(Duration::from_secs(60))
                .await
                .unwrap()
        )
        .await
        .len(),
        10
    );
}

#[tokio::test]
async fn fail_get_more_after_cursor_checkout_kills_the_cursor() {
    let s = test_server();
    let c = s.client().await;
    let mut raw = s.raw().await;
    let coll = c.database("t").collection::<Document>("g");
    coll.insert_many((0..10).map(|i| doc! {"_id": i}))
        .await
        .unwrap();
    let r = raw
        .command(rawdoc! {"find": "g", "batchSize": 2, "$db": "t"})
        .await;
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    fail_point(
        &c,
        doc! {"configureFailPoint": "failGetMoreAfterCursorCheckout", "mode": {"times": 1},
        "data": {"errorCode": 280}},
    )
    .await;
    let get_more = |id: i64| rawdoc! {"getMore": id, "collection": "g", "batchSize": 2, "$db": "t"};
    let r = raw.command(get_more(id)).await;
    assert_eq!(r.get_i32("code").unwrap(), 280, "{r:?}");
    let r = raw.command(get_more(id)).await;
    assert_eq!(r.get_i32("code").unwrap(), 43, "{r:?}");
    // The default code is InternalError.
    let r = raw
        .command(rawdoc! {"find": "g", "batchSize": 2, "$db": "t"})
        .await;
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    fail_point(
        &c,
        doc! {"configureFailPoint": "failGetMoreAfterCursorCheckout", "mode": {"times": 1}},
    )
    .await;
    let r = raw.command(get_more(id)).await;
    assert_eq!(r.get_i32("code").unwrap(), 1, "{r:?}");
    assert!(r.get("errorLabels").unwrap().is_none(), "{r:?}");
    // On a change stream's cursor a resumable code carries ResumableChangeStreamError (drivers
    // resume on it); a find cursor's does not.
    let labels = |r: &bson::RawDocumentBuf| -> Vec<String> {
        match r.get_array("errorLabels") {
            Ok(a) => a
                .into_iter()
                .map(|l| l.unwrap().as_str().unwrap().to_string())
                .collect(),
            Err(_) => Vec::new(),
        }
    };
    for (stream, code, want) in [(true, 6, true), (true, 2, false), (false, 6, false)] {
        let open = if stream {
            rawdoc! {"aggregate": "g", "pipeline": [{"$changeStream": {}}], "cursor": {}, "$db": "t"}
        } else {
            rawdoc! {"find": "g", "batchSize": 2, "$db": "t"}
        };
        let r = raw.command(open).await;
        let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
        fail_point(
            &c,
            doc! {"configureFailPoint": "failGetMoreAfterCursorCheckout", "mode": {"times": 1},
            "data": {"errorCode": code}},
        )
        .await;
        let r = raw.command(get_more(id)).await;
        assert_eq!(r.get_i32("code").unwrap(), code, "{r:?}");
        assert_eq!(
            labels(&r).contains(&"ResumableChangeStreamError".to_string()),
            want,
            "stream {stream}, code {code}: {r:?}"
        );
    }
}

#[tokio::test]
async fn transaction_commit_retries_under_fail_command() {
    let s = test_server();
    let c = s.client().await;
    let coll = c.database("fp").collection::<Document>("txn");
    coll.insert_one(doc! {"_id": 0}).await.unwrap();
    // commitTransaction fails once with a retryable label: the driver's commit retry
    // succeeds, and the transaction's write is there once.
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["commitTransaction"], "errorCode": 6,
                 "errorLabels": ["RetryableWriteError"]}},
    )
    .await;
    let mut session = c.start_session().await.unwrap();
    session.start_transaction().await.unwrap();
    coll.insert_one(doc! {"_id": 1})
        .session(&mut session)
        .await
        .unwrap();
    session.commit_transaction().await.unwrap();
    assert_eq!(collect(coll.find(doc! {}).await.unwrap()).await.len(), 2);
    // abortTransaction failing once is retried too (and the write is gone).
    fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["abortTransaction"], "closeConnection": true}},
    )
    .await;
    session.start_transaction().await.unwrap();
    coll.insert_one(doc! {"_id": 2})
        .session(&mut session)
        .await
        .unwrap();
    session.abort_transaction().await.unwrap();
    assert_eq!(collect(coll.find(doc! {}).await.unwrap()).await.len(), 2);
    let r = fail_point(
        &c,
        doc! {"configureFailPoint": "failCommand", "mode": "off"},
    )
    .await;
    assert_eq!(r.get_i32("count").unwrap(), 2);
}

#[tokio::test]
async fn on_primary_transactional_write() {
    let s = test_server();
    // Error 91 (ShutdownInProgress) below makes the driver mark the server Unknown until its
    // next heartbeat answers; with the default 10 s heartbeat that races the 10 s server
    // selection timeout of the next operation on a loaded machine.
    let c = s.client_with("heartbeatFrequencyMS=500").await;
    let coll = c.database("fp").collection::<Document>("opw");
    // The write commits, the connection closes before the reply, the driver retries and is
    // answered from the retryable-write record: one document.
    fail_point(
        &c,
        doc! {"configureFailPoint": "onPrimaryTransactionalWrite", "mode": {"times": 1}},
    )
    .await;
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    // failBeforeCommitExceptionCode without closing: nothing is written, the error reaches
    // the application (no retryable label from a router).
    fail_point(
        &c,
        doc! {"configureFailPoint": "onPrimaryTransactionalWrite", "mode": {"times": 1},
        "data": {"closeConnection": false, "failBeforeCommitExceptionCode": 91}},
    )
    .await;
    let e = coll.insert_one(doc! {"_id": 2}).await.unwrap_err();
    assert_eq!(code_of(&e), 91);
    let docs = collect(coll.find(doc! {}).await.unwrap()).await;
    assert_eq!(docs, [doc! {"_id": 1}]);
    // Writes without a session transaction number are not selected.
    fail_point(
        &c,
        doc! {"configureFailPoint": "onPrimaryTransactionalWrite", "mode": "alwaysOn",
        "data": {"closeConnection": false, "failBeforeCommitExceptionCode": 91}},
    )
    .await;
    let mut raw = s.raw().await;
    let r: RawDocumentBuf = raw
        .command(rawdoc! {"insert": "opw", "documents": [{"_id": 3}], "$db": "fp"})
        .await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
    fail_point(
        &c,
        doc! {"configureFailPoint": "onPrimaryTransactionalWrite", "mode": "off"},
    )
    .await;
}
