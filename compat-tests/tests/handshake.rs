//! Handshake and diagnostic commands through the official Rust driver.

use bson::{Bson, Document, doc};
use cairn_compat_tests::TestServer;
use mongodb::error::ErrorKind;

fn code_of(e: &mongodb::error::Error) -> (i32, String) {
    match &*e.kind {
        ErrorKind::Command(c) => (c.code, c.code_name.clone()),
        other => panic!("expected a command error, got {other:?}"),
    }
}

async fn run(c: &mongodb::Client, db: &str, cmd: Document) -> Document {
    let mut r = c.database(db).run_command(cmd).await.expect("command");
    cairn_compat_tests::strip_gossip(&mut r);
    r
}

async fn run_err(c: &mongodb::Client, db: &str, cmd: Document) -> (i32, String) {
    let e = c
        .database(db)
        .run_command(cmd)
        .await
        .expect_err("command should fail");
    code_of(&e)
}

#[tokio::test]
async fn hello_has_mongos_shape_and_types() {
    let s = TestServer::start();
    let c = s.client().await;
    let h = run(&c, "admin", doc! {"hello": 1, "helloOk": true}).await;
    let keys: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "isWritablePrimary",
            "msg",
            "topologyVersion",
            "helloOk",
            "maxBsonObjectSize",
            "maxMessageSizeBytes",
            "maxWriteBatchSize",
            "localTime",
            "logicalSessionTimeoutMinutes",
            "connectionId",
            "maxWireVersion",
            "minWireVersion",
            "ok"
        ]
    );
    assert!(h.get_bool("isWritablePrimary").unwrap());
    assert_eq!(h.get_str("msg").unwrap(), "isdbgrid");
    let tv = h.get_document("topologyVersion").unwrap();
    assert!(matches!(tv.get("processId"), Some(Bson::ObjectId(_))));
    assert!(matches!(tv.get("counter"), Some(Bson::Int64(0))));
    assert_eq!(h.get_i32("maxBsonObjectSize").unwrap(), 16 * 1024 * 1024);
    assert_eq!(h.get_i32("maxMessageSizeBytes").unwrap(), 48_000_000);
    assert_eq!(h.get_i32("maxWriteBatchSize").unwrap(), 100_000);
    assert!(matches!(h.get("localTime"), Some(Bson::DateTime(_))));
    assert_eq!(h.get_i32("logicalSessionTimeoutMinutes").unwrap(), 30);
    assert!(h.get_i32("connectionId").unwrap() >= 1);
    assert_eq!(h.get_i32("maxWireVersion").unwrap(), 21);
    assert_eq!(h.get_i32("minWireVersion").unwrap(), 0);
    assert_eq!(h.get_f64("ok").unwrap(), 1.0);

    // the processId is stable for the process
    let h2 = run(&c, "test", doc! {"hello": 1}).await;
    assert_eq!(
        h2.get_document("topologyVersion").unwrap().get("processId"),
        tv.get("processId")
    );
    assert!(h2.get("helloOk").is_none(), "helloOk only when requested");
}

#[tokio::test]
async fn is_master_uses_legacy_field() {
    let s = TestServer::start();
    let c = s.client().await;
    for name in ["isMaster", "ismaster"] {
        let r = run(&c, "admin", doc! {name: 1}).await;
        assert!(r.get_bool("ismaster").unwrap(), "{name}");
        assert!(r.get("isWritablePrimary").is_none());
        assert_eq!(r.get_str("msg").unwrap(), "isdbgrid");
    }
}

#[tokio::test]
async fn driver_sees_a_mongos_and_supports_sessions() {
    let s = TestServer::start();
    let c = s.client().await;
    run(&c, "admin", doc! {"ping": 1}).await;
    // An explicit session requires logicalSessionTimeoutMinutes; the driver checks it.
    let mut session = c.start_session().await.expect("sessions supported");
    c.database("admin")
        .run_command(doc! {"ping": 1})
        .session(&mut session)
        .await
        .unwrap();
}

#[tokio::test]
async fn compression_is_negotiated_for_each_compressor() {
    let s = TestServer::start();
    for comp in ["snappy", "zlib", "zstd"] {
        let c = s.client_with(&format!("compressors={comp}")).await;
        // The driver's handshake lists its compressor; the reply echoes the intersection.
        let r = run(&c, "admin", doc! {"buildInfo": 1}).await;
        assert_eq!(r.get_str("version").unwrap(), "7.0.0");
        let before = run(&c, "admin", doc! {"serverStatus": 1}).await;
        let big = "x".repeat(20_000);
        // a compressible command round-trips through the negotiated compressor
        let e = run_err(&c, "admin", doc! {"nosuchcommand": 1, "pad": &big}).await;
        assert_eq!(e.0, 59);
        let after = run(&c, "admin", doc! {"serverStatus": 1}).await;
        let net = |d: &Document, k: &str| d.get_document("network").unwrap().get_i64(k).unwrap();
        let logical_in = net(&after, "bytesIn") - net(&before, "bytesIn");
        let physical_in = net(&after, "physicalBytesIn") - net(&before, "physicalBytesIn");
        assert!(
            physical_in < logical_in / 2,
            "{comp}: requests should arrive compressed (logical {logical_in}, physical {physical_in})"
        );
    }
}

#[tokio::test]
async fn build_info_is_real() {
    let s = TestServer::start();
    let c = s.client().await;
    for name in ["buildInfo", "buildinfo"] {
        let b = run(&c, "test", doc! {name: 1}).await;
        let v = b.get_str("version").unwrap();
        let parts: Vec<u32> = v.split('.').map(|p| p.parse().unwrap()).collect();
        assert_eq!(parts.len(), 3, "strict X.Y.Z version");
        let arr = b.get_array("versionArray").unwrap();
        assert_eq!(arr.len(), 4);
        assert!(arr.iter().all(|x| matches!(x, Bson::Int32(_))));
        assert_eq!(b.get_i32("maxBsonObjectSize").unwrap(), 16 * 1024 * 1024);
        assert_eq!(b.get_i32("bits").unwrap(), 64);
        assert!(b.get_str("gitVersion").unwrap().len() >= 7);
        assert!(
            b.get("storageEngines").is_none(),
            "mongos has no storageEngines"
        );
    }
}

#[tokio::test]
async fn ping_and_strict_fields() {
    let s = TestServer::start();
    let c = s.client().await;
    let r = run(
        &c,
        "anydb",
        doc! {"ping": 1, "comment": "generic args are fine"},
    )
    .await;
    assert_eq!(r, doc! {"ok": 1.0});
    assert_eq!(
        run_err(&c, "admin", doc! {"ping": 1, "bogus": 1}).await,
        (40415, "Location40415".into())
    );
}

#[tokio::test]
async fn unknown_commands_and_case_sensitivity() {
    let s = TestServer::start();
    let c = s.client().await;
    for name in ["nosuch", "PING", "Hello", "Find", "fInd"] {
        assert_eq!(
            run_err(&c, "test", doc! {name: 1}).await,
            (59, "CommandNotFound".into()),
            "{name}"
        );
    }
}

#[tokio::test]
async fn admin_only_commands() {
    let s = TestServer::start();
    let c = s.client().await;
    for cmd in [
        doc! {"getParameter": "*"},
        doc! {"getCmdLineOpts": 1},
        doc! {"getLog": "*"},
    ] {
        assert_eq!(run_err(&c, "test", cmd.clone()).await.0, 13, "{cmd}");
        run(&c, "admin", cmd).await;
    }
}

#[tokio::test]
async fn get_parameter_forms() {
    let s = TestServer::start();
    let c = s.client().await;
    let all = run(&c, "admin", doc! {"getParameter": "*"}).await;
    assert_eq!(
        all.get_document("featureCompatibilityVersion").unwrap(),
        &doc! {"version": "7.0"}
    );
    let keys: Vec<&String> = all.keys().filter(|k| *k != "ok").collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "alphabetical");

    let one = run(
        &c,
        "admin",
        doc! {"getParameter": 1, "featureCompatibilityVersion": 1},
    )
    .await;
    assert_eq!(one.len(), 2);

    let details = run(
        &c,
        "admin",
        doc! {"getParameter": {"showDetails": true}, "logLevel": 1},
    )
    .await;
    let d = details.get_document("logLevel").unwrap();
    assert_eq!(d.get_i32("value").unwrap(), 0);
    assert!(!d.get_bool("settableAtRuntime").unwrap());

    assert_eq!(
        run_err(&c, "admin", doc! {"getParameter": 1, "noSuchParameter": 1}).await,
        (72, "InvalidOptions".into())
    );
    assert_eq!(run_err(&c, "admin", doc! {"getParameter": 1}).await.0, 72);
    assert_eq!(
        run_err(
            &c,
            "admin",
            doc! {"getParameter": {"showDetails": "yes"}, "logLevel": 1}
        )
        .await
        .0,
        14
    );
}

#[tokio::test]
async fn get_log_serves_real_lines() {
    let s = TestServer::start();
    let c = s.client().await;
    let names = run(&c, "admin", doc! {"getLog": "*"}).await;
    assert_eq!(
        names.get_array("names").unwrap(),
        &vec![Bson::from("global"), Bson::from("startupWarnings")]
    );
    let w = run(&c, "admin", doc! {"getLog": "startupWarnings"}).await;
    let lines = w.get_array("log").unwrap();
    assert!(!lines.is_empty());
    let first: serde_json::Value = serde_json::from_str(lines[0].as_str().unwrap()).unwrap();
    assert_eq!(first["s"], "W");
    assert_eq!(first["tags"][0], "startupWarnings");
    assert!(first["msg"].as_str().unwrap().contains("Access control"));
    let g = run(&c, "admin", doc! {"getLog": "global"}).await;
    assert!(g.get_i32("totalLinesWritten").unwrap() >= lines.len() as i32);
    assert!(
        g.get_array("log")
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("Waiting for connections"))
    );
    assert_eq!(
        run_err(&c, "admin", doc! {"getLog": "nope"}).await,
        (96, "OperationFailed".into())
    );
    assert_eq!(run_err(&c, "admin", doc! {"getLog": 1}).await.0, 14);
    assert_eq!(
        run_err(&c, "admin", doc! {"getLog": Bson::Null}).await.0,
        40414
    );
}

#[tokio::test]
async fn get_cmd_line_opts_reports_argv_and_explicit_options() {
    let s = TestServer::start_with(&["--slow-ms", "250"]);
    let c = s.client().await;
    let r = run(&c, "admin", doc! {"getCmdLineOpts": 1}).await;
    let argv = r.get_array("argv").unwrap();
    assert!(argv.contains(&Bson::from("--slow-ms")));
    let parsed = r.get_document("parsed").unwrap();
    assert_eq!(
        parsed.get_document("net").unwrap().get_i32("port").unwrap(),
        0
    );
    assert_eq!(
        parsed
            .get_document("operationProfiling")
            .unwrap()
            .get_i32("slowOpThresholdMs")
            .unwrap(),
        250
    );
    assert!(
        parsed
            .get_document("storage")
            .unwrap()
            .get_str("dbPath")
            .is_ok()
    );
}

#[tokio::test]
async fn connection_status_and_whatsmyuri() {
    let s = TestServer::start();
    let c = s.client().await;
    let r = run(&c, "test", doc! {"connectionStatus": 1}).await;
    let auth = r.get_document("authInfo").unwrap();
    assert!(auth.get_array("authenticatedUsers").unwrap().is_empty());
    assert!(auth.get("authenticatedUserPrivileges").is_none());
    let r = run(
        &c,
        "test",
        doc! {"connectionStatus": 1, "showPrivileges": true},
    )
    .await;
    assert!(
        r.get_document("authInfo")
            .unwrap()
            .get_array("authenticatedUserPrivileges")
            .unwrap()
            .is_empty()
    );
    let me = run(&c, "test", doc! {"whatsmyuri": 1}).await;
    let you = me.get_str("you").unwrap();
    assert!(you.starts_with("127.0.0.1:"), "{you}");
}

#[tokio::test]
async fn host_info_and_server_status_are_live() {
    let s = TestServer::start();
    let c = s.client().await;
    let h = run(&c, "admin", doc! {"hostInfo": 1}).await;
    let sys = h.get_document("system").unwrap();
    assert!(sys.get_i64("memSizeMB").unwrap() > 0);
    assert!(sys.get_i32("numCores").unwrap() >= 1);
    assert_eq!(
        h.get_document("os").unwrap().get_str("type").unwrap(),
        "Linux"
    );

    let a = run(&c, "admin", doc! {"serverStatus": 1}).await;
    assert_eq!(a.get_str("process").unwrap(), "mongos");
    assert!(matches!(a.get("pid"), Some(Bson::Int64(p)) if *p == s.pid() as i64));
    assert!(matches!(a.get("uptime"), Some(Bson::Double(_))));
    assert!(matches!(a.get("uptimeMillis"), Some(Bson::Int64(_))));
    for _ in 0..5 {
        run(&c, "admin", doc! {"ping": 1}).await;
    }
    let b = run(&c, "admin", doc! {"serverStatus": 1}).await;
    let cmds = |d: &Document| {
        d.get_document("opcounters")
            .unwrap()
            .get_i64("command")
            .unwrap()
    };
    assert!(cmds(&b) >= cmds(&a) + 6, "{} -> {}", cmds(&a), cmds(&b));
    let conns = b.get_document("connections").unwrap();
    assert!(conns.get_i32("current").unwrap() >= 1);
    assert!(conns.get_i32("totalCreated").unwrap() >= conns.get_i32("current").unwrap());
    assert!(b.get_document("mem").unwrap().get_i32("resident").unwrap() > 0);

    let trimmed = run(
        &c,
        "admin",
        doc! {"serverStatus": 1, "network": 0, "metrics": 0},
    )
    .await;
    assert!(trimmed.get("network").is_none());
    assert!(trimmed.get("mem").is_none());
    assert!(trimmed.get("opcounters").is_some());
}

#[tokio::test]
async fn list_commands_matches_dispatch() {
    let s = TestServer::start();
    let c = s.client().await;
    let r = run(&c, "admin", doc! {"listCommands": 1}).await;
    let cmds = r.get_document("commands").unwrap();
    let names: Vec<&String> = cmds.keys().collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert!(
        !names.iter().any(|n| *n == "ismaster"),
        "aliases are not listed"
    );
    for name in names {
        let info = cmds.get_document(name).unwrap();
        assert!(info.get_str("help").is_ok());
        // every listed command is dispatched (never CommandNotFound)
        let e = c
            .database("admin")
            .run_command(doc! {name.as_str(): 1})
            .await;
        if let Err(e) = e {
            assert_ne!(code_of(&e).0, 59, "{name} is listed but not found");
        }
    }
    let ping = cmds.get_document("ping").unwrap();
    assert_eq!(
        ping.get_array("apiVersions").unwrap(),
        &vec![Bson::from("1")]
    );
}

#[tokio::test]
async fn end_sessions_validates_its_argument() {
    let s = TestServer::start();
    let c = s.client().await;
    let id = bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: vec![7; 16],
    };
    run(&c, "admin", doc! {"endSessions": [{"id": id}]}).await;
    assert_eq!(run_err(&c, "admin", doc! {"endSessions": "x"}).await.0, 14);
    assert_eq!(
        run_err(&c, "admin", doc! {"endSessions": [{"x": 1}]})
            .await
            .0,
        40415
    );
    assert_eq!(
        run_err(&c, "admin", doc! {"endSessions": [{}]}).await.0,
        40414
    );
}

#[tokio::test]
async fn stable_api_parameters() {
    let s = TestServer::start();
    let c = s.client().await;
    run(
        &c,
        "admin",
        doc! {"ping": 1, "apiVersion": "1", "apiStrict": true},
    )
    .await;
    assert_eq!(
        run_err(&c, "admin", doc! {"ping": 1, "apiVersion": "2"}).await,
        (322, "APIVersionError".into())
    );
    assert_eq!(
        run_err(&c, "admin", doc! {"ping": 1, "apiStrict": true})
            .await
            .0,
        4886600
    );
    assert_eq!(
        run_err(
            &c,
            "admin",
            doc! {"getLog": "*", "apiVersion": "1", "apiStrict": true}
        )
        .await,
        (323, "APIStrictError".into())
    );
    // a driver configured with the stable API works end to end
    let opts = mongodb::options::ClientOptions::parse(s.uri("serverSelectionTimeoutMS=10000"))
        .await
        .unwrap();
    let mut opts = opts;
    opts.server_api = Some(
        mongodb::options::ServerApi::builder()
            .version(mongodb::options::ServerApiVersion::V1)
            .strict(true)
            .build(),
    );
    let strict = mongodb::Client::with_options(opts).unwrap();
    run(&strict, "admin", doc! {"ping": 1}).await;
}
