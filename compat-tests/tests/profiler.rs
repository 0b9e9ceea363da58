//! The database profiler through the official Rust driver: the `profile` command's replies
//! and errors, `system.profile` entries in MongoDB's shape (readable with `find`), levels 1
//! and 2, `slowms`, `sampleRate`, `filter`, the `--profile`/`--slowms` startup options, the
//! capped `system.profile` (created at 1 MiB, evicting the oldest entries, resizable by
//! dropping it while profiling is off, a non-capped one refused), and the "Slow query" log.

use bson::{Document, doc};
use cairn_compat_tests::{TestServer, code_of, collect};
use mongodb::Database;

async fn run(db: &Database, cmd: Document) -> Document {
    db.run_command(cmd.clone())
        .await
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

async fn options_of(db: &Database, name: &str) -> Document {
    let r = run(db, doc! {"listCollections": 1, "filter": {"name": name}}).await;
    let batch = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(batch.len(), 1, "{r}");
    batch[0]
        .as_document()
        .unwrap()
        .get_document("options")
        .unwrap()
        .clone()
}

fn number(d: &Document, k: &str) -> i64 {
    match d.get(k) {
        Some(bson::Bson::Int32(i)) => i64::from(*i),
        Some(bson::Bson::Int64(i)) => *i,
        other => panic!("{k}: {other:?} in {d}"),
    }
}

async fn entries(db: &Database, filter: Document) -> Vec<Document> {
    collect(
        db.collection::<Document>("system.profile")
            .find(filter)
            .sort(doc! {"ts": 1, "_id": 1})
            .await
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn profile_command_replies_and_errors() {
    let s = TestServer::start();
    let c = s.client().await;
    let db = c.database("prof1");
    let r = run(&db, doc! {"profile": -1}).await;
    assert_eq!(r.get_i32("was").unwrap(), 0);
    assert_eq!(r.get_i32("slowms").unwrap(), 100);
    assert_eq!(r.get_f64("sampleRate").unwrap(), 1.0);
    assert!(!r.contains_key("filter"));
    // Reading does not create anything.
    assert!(db.list_collection_names().await.unwrap().is_empty());
    let r = run(&db, doc! {"profile": 2, "slowms": 20, "sampleRate": 0.5}).await;
    assert_eq!(r.get_i32("was").unwrap(), 0);
    assert_eq!(r.get_i32("slowms").unwrap(), 100);
    let r = run(&db, doc! {"profile": -1}).await;
    assert_eq!(r.get_i32("was").unwrap(), 2);
    assert_eq!(r.get_i32("slowms").unwrap(), 20);
    assert_eq!(r.get_f64("sampleRate").unwrap(), 0.5);
    // Turning profiling on created system.profile.
    assert!(
        db.list_collection_names()
            .await
            .unwrap()
            .contains(&"system.profile".to_string())
    );
    // slowms and sampleRate are server-wide; the level is per database.
    let other = run(&c.database("prof1b"), doc! {"profile": -1}).await;
    assert_eq!(other.get_i32("was").unwrap(), 0);
    assert_eq!(other.get_i32("slowms").unwrap(), 20);
    // A filter: reported with a note; "unset" removes it.
    let r = run(&db, doc! {"profile": 0, "filter": {"op": "insert"}}).await;
    assert!(
        r.get_str("note")
            .unwrap()
            .starts_with("When a filter expression is set")
    );
    let r = run(&db, doc! {"profile": -1}).await;
    assert_eq!(r.get_document("filter").unwrap(), &doc! {"op": "insert"});
    run(&db, doc! {"profile": 0, "filter": "unset"}).await;
    assert!(!run(&db, doc! {"profile": -1}).await.contains_key("filter"));
    for (cmd, code) in [
        (doc! {"profile": 1, "sampleRate": 1.5}, 2),
        (doc! {"profile": 1, "filter": 3}, 2),
        (doc! {"profile": 1, "filter": {"$bogus": 1}}, 2),
        (doc! {"profile": "x"}, 14),
        (doc! {"profile": 1, "verbose": true}, 40415),
    ] {
        let e = db.run_command(cmd.clone()).await.unwrap_err();
        assert_eq!(code_of(&e), code, "{cmd}");
    }
    // Clients cannot write system.profile.
    let e = db
        .collection::<Document>("system.profile")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap_err();
    assert!(e.to_string().contains("system.profile"), "{e}");
}

#[tokio::test]
async fn level_two_profiles_every_operation() {
    let s = TestServer::start();
    let c = s.client_with("appName=profiled").await;
    let db = c.database("prof2");
    let coll = db.collection::<Document>("c");
    coll.insert_one(doc! {"warm": 1}).await.unwrap();
    run(&db, doc! {"profile": 2}).await;
    coll.insert_many((0..5).map(|i| doc! {"a": i}))
        .await
        .unwrap();
    coll.create_index(mongodb::IndexModel::builder().keys(doc! {"a": 1}).build())
        .await
        .unwrap();
    let found = collect(coll.find(doc! {"a": {"$gte": 3}}).await.unwrap()).await;
    assert_eq!(found.len(), 2);
    coll.update_many(doc! {"a": {"$lt": 2}}, doc! {"$set": {"b": 1}})
        .await
        .unwrap();
    coll.delete_one(doc! {"a": 4}).await.unwrap();
    let e = db
        .run_command(doc! {"find": "c", "filter": {"$bad": 1}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 2);
    let all = entries(&db, doc! {}).await;
    let ops: Vec<&str> = all.iter().map(|e| e.get_str("op").unwrap()).collect();
    assert_eq!(
        ops,
        ["insert", "command", "query", "update", "remove", "query"],
        "{all:#?}"
    );
    let insert = &all[0];
    assert_eq!(insert.get_str("ns").unwrap(), "prof2.c");
    assert_eq!(insert.get_i32("ninserted").unwrap(), 5);
    assert_eq!(
        insert
            .get_document("command")
            .unwrap()
            .get_str("insert")
            .unwrap(),
        "c"
    );
    assert_eq!(insert.get_str("client").unwrap(), "127.0.0.1");
    assert_eq!(insert.get_str("appName").unwrap(), "profiled");
    assert_eq!(insert.get_str("user").unwrap(), "");
    assert!(insert.get_datetime("ts").is_ok());
    assert_eq!(insert.get_str("protocol").unwrap(), "op_msg");
    let find = &all[2];
    assert_eq!(find.get_str("planSummary").unwrap(), "IXSCAN { a: 1 }");
    assert_eq!(find.get_i32("keysExamined").unwrap(), 2);
    assert_eq!(find.get_i32("docsExamined").unwrap(), 2);
    assert_eq!(find.get_i32("nreturned").unwrap(), 2);
    assert!(find.get_bool("cursorExhausted").unwrap());
    assert!(find.get_i32("millis").unwrap() >= 0);
    // MongoDB's field order for a query entry (the _id Cairn's storage needs comes first).
    let keys: Vec<&str> = find.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "_id",
            "op",
            "ns",
            "command",
            "keysExamined",
            "docsExamined",
            "cursorExhausted",
            "numYield",
            "locks",
            "flowControl",
            "nreturned",
            "responseLength",
            "protocol",
            "millis",
            "planSummary",
            "ts",
            "client",
            "appName",
            "allUsers",
            "user"
        ]
    );
    let update = &all[3];
    assert_eq!(update.get_i32("nMatched").unwrap(), 2);
    assert_eq!(update.get_i32("nModified").unwrap(), 2);
    assert_eq!(all[4].get_i32("ndeleted").unwrap(), 1);
    let failed = &all[5];
    assert_eq!(failed.get_i32("errCode").unwrap(), 2);
    assert_eq!(failed.get_str("errName").unwrap(), "BadValue");
    assert_eq!(failed.get_f64("ok").unwrap(), 0.0);
    // Reading system.profile is itself profiled, and the entries answer queries.
    let queries = entries(&db, doc! {"op": "query", "ns": "prof2.system.profile"}).await;
    assert_eq!(queries.len(), 1);
    // Turning profiling off is the last profiled command.
    run(&db, doc! {"profile": 0}).await;
    coll.insert_one(doc! {"after": 1}).await.unwrap();
    let last = entries(&db, doc! {}).await.pop().unwrap();
    assert_eq!(
        last.get_document("command")
            .unwrap()
            .get_i32("profile")
            .unwrap(),
        0
    );
    // Other databases are not profiled.
    let other = c.database("prof2_other");
    other
        .collection::<Document>("x")
        .insert_one(doc! {})
        .await
        .unwrap();
    assert!(
        !other
            .list_collection_names()
            .await
            .unwrap()
            .contains(&"system.profile".to_string())
    );
}

#[tokio::test]
async fn level_one_slowms_sample_rate_and_filter() {
    let s = TestServer::start_with(&["--enable-test-commands"]);
    let c = s.client().await;
    let db = c.database("prof3");
    let coll = db.collection::<Document>("c");
    coll.insert_one(doc! {"a": 1}).await.unwrap();
    run(&db, doc! {"profile": 1, "slowms": 150}).await;
    let slow = |ms: i32| {
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["find"], "blockConnection": true, "blockTimeMS": ms}}
    };
    let admin = c.database("admin");
    collect(coll.find(doc! {"fast": 1}).await.unwrap()).await;
    run(&admin, slow(200)).await;
    collect(coll.find(doc! {"slow": 1}).await.unwrap()).await;
    let got = entries(&db, doc! {"op": "query", "ns": "prof3.c"}).await;
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0]
            .get_document("command")
            .unwrap()
            .get_document("filter")
            .unwrap()
            .contains_key("slow")
    );
    assert!(got[0].get_i32("millis").unwrap() >= 150);
    // Slow operations are still logged.
    let logged = s
        .log()
        .iter()
        .any(|l| l.contains("\"Slow query\"") && l.contains("\"command\":\"find\""));
    assert!(logged);
    // sampleRate 0: nothing sampled.
    run(&db, doc! {"profile": 1, "sampleRate": 0.0}).await;
    run(&admin, slow(200)).await;
    collect(coll.find(doc! {"slow2": 1}).await.unwrap()).await;
    assert_eq!(
        entries(&db, doc! {"command.filter.slow2": 1}).await.len(),
        0
    );
    // A filter replaces slowms and sampleRate: every insert, nothing else.
    run(
        &db,
        doc! {"profile": 1, "sampleRate": 1.0, "filter": {"op": "insert"}},
    )
    .await;
    coll.insert_one(doc! {"f": 1}).await.unwrap();
    run(&admin, slow(200)).await;
    collect(coll.find(doc! {"slow3": 1}).await.unwrap()).await;
    assert_eq!(entries(&db, doc! {"op": "insert"}).await.len(), 1);
    assert_eq!(
        entries(&db, doc! {"command.filter.slow3": 1}).await.len(),
        0
    );
    // The filter only decides at level 1: level 2 profiles everything, level 0 nothing.
    run(&db, doc! {"profile": 2}).await;
    collect(coll.find(doc! {"slow4": 1}).await.unwrap()).await;
    assert_eq!(
        entries(&db, doc! {"command.filter.slow4": 1}).await.len(),
        1
    );
    run(&db, doc! {"profile": 0}).await;
    coll.insert_one(doc! {"f": 2}).await.unwrap();
    assert_eq!(entries(&db, doc! {"op": "insert"}).await.len(), 1);

    // The filter also decides the "Slow query" log, at any level: with profiling off and a
    // slowms no command reaches, the filter's inserts are logged and nothing else.
    let logdb = c.database("prof3log");
    let logged = |cmd: &str| {
        s.log()
            .iter()
            .filter(|l| {
                l.contains("\"Slow query\"")
                    && l.contains("prof3log.$cmd")
                    && l.contains(&format!("\"command\":\"{cmd}\""))
            })
            .count()
    };
    run(&logdb, doc! {"profile": 0, "slowms": 100_000}).await;
    logdb
        .collection::<Document>("c")
        .insert_one(doc! {"a": 1})
        .await
        .unwrap();
    assert_eq!(logged("insert"), 0);
    run(&logdb, doc! {"profile": 0, "filter": {"op": "insert"}}).await;
    logdb
        .collection::<Document>("c")
        .insert_one(doc! {"a": 2})
        .await
        .unwrap();
    collect(
        logdb
            .collection::<Document>("c")
            .find(doc! {})
            .await
            .unwrap(),
    )
    .await;
    // The log line is written as the command finishes, read from the server's stdout by a
    // thread: give it a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while logged("insert") == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(logged("insert"), 1);
    assert_eq!(logged("find"), 0);
    assert!(
        !logdb
            .list_collection_names()
            .await
            .unwrap()
            .contains(&"system.profile".to_string())
    );
}

#[tokio::test]
async fn startup_options_and_the_capped_collection() {
    let s = TestServer::start_with(&["--profile", "2", "--slowms", "7"]);
    let c = s.client().await;
    let db = c.database("prof4");
    let r = run(&db, doc! {"profile": -1}).await;
    assert_eq!(r.get_i32("was").unwrap(), 2);
    assert_eq!(r.get_i32("slowms").unwrap(), 7);
    let opts = run(&c.database("admin"), doc! {"getCmdLineOpts": 1}).await;
    let p = opts
        .get_document("parsed")
        .unwrap()
        .get_document("operationProfiling")
        .unwrap();
    assert_eq!(p.get_str("mode").unwrap(), "all");
    assert_eq!(p.get_i32("slowOpThresholdMs").unwrap(), 7);
    // --profile 2 writes entries into a system.profile the profiler creates capped at 1 MiB.
    let coll = db.collection::<Document>("c");
    coll.find_one(doc! {"first": 1}).await.unwrap();
    let opts = options_of(&db, "system.profile").await;
    assert_eq!(opts, doc! {"capped": true, "size": 1048576});
    // Entries with 10 KB commands: far more than 1 MiB in total; the capped collection evicts
    // the oldest.
    let pad = "x".repeat(10_000);
    for i in 0..150 {
        coll.find_one(doc! {"i": i, "pad": &pad}).await.unwrap();
    }
    let stats = run(&db, doc! {"collStats": "system.profile"}).await;
    assert!(stats.get_bool("capped").unwrap());
    assert_eq!(number(&stats, "maxSize"), 1024 * 1024);
    let size = number(&stats, "size");
    assert!(size <= 1024 * 1024, "{size}");
    let kept = entries(&db, doc! {"op": "query", "ns": "prof4.c"}).await;
    assert!(kept.len() > 50 && kept.len() < 150, "{}", kept.len());
    assert!(
        entries(&db, doc! {"command.filter.first": 1})
            .await
            .is_empty()
    );
    // Newest first with $natural: -1, oldest first with $natural: 1.
    let natural = |dir: i32| {
        let db = db.clone();
        async move {
            let d = db
                .collection::<Document>("system.profile")
                .find_one(doc! {"op": "query", "ns": "prof4.c"})
                .sort(doc! {"$natural": dir})
                .await
                .unwrap()
                .unwrap();
            d.get_document("command")
                .unwrap()
                .get_document("filter")
                .unwrap()
                .get_i32("i")
                .unwrap()
        }
    };
    assert_eq!(natural(-1).await, 149);
    // Reading system.profile is profiled too (each read may evict one more old entry).
    let oldest = natural(1).await;
    let first_kept = 150 - kept.len() as i32;
    assert!((first_kept..=first_kept + 2).contains(&oldest), "{oldest}");
}

/// MongoDB's procedure to resize `system.profile`, and what a non-capped one does.
#[tokio::test]
async fn system_profile_resize_and_non_capped() {
    let s = TestServer::start();
    let c = s.client().await;
    let db = c.database("prof5");
    let coll = db.collection::<Document>("c");
    // Turning profiling on creates the capped collection.
    run(&db, doc! {"profile": 2}).await;
    assert_eq!(
        options_of(&db, "system.profile").await,
        doc! {"capped": true, "size": 1048576}
    );
    // It cannot be dropped while profiling is on.
    let e = db
        .run_command(doc! {"drop": "system.profile"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 20, "{e}");
    assert!(e.to_string().contains("turn off profiling"), "{e}");
    // Turn it off, drop it, create a smaller one, turn it back on.
    run(&db, doc! {"profile": 0}).await;
    db.collection::<Document>("system.profile")
        .drop()
        .await
        .unwrap();
    run(
        &db,
        doc! {"create": "system.profile", "capped": true, "size": 8192},
    )
    .await;
    run(&db, doc! {"profile": 2}).await;
    let pad = "y".repeat(1000);
    for i in 0..40 {
        coll.find_one(doc! {"i": i, "pad": &pad}).await.unwrap();
    }
    let stats = run(&db, doc! {"collStats": "system.profile"}).await;
    assert!(stats.get_bool("capped").unwrap());
    assert_eq!(number(&stats, "maxSize"), 8192);
    assert!(number(&stats, "size") <= 8192, "{stats}");
    let kept = entries(&db, doc! {"ns": "prof5.c"}).await;
    assert!(!kept.is_empty() && kept.len() < 10, "{}", kept.len());
    // The same through $collStats (mongosh's stats()).
    let agg = collect(
        db.collection::<Document>("system.profile")
            .aggregate([doc! {"$collStats": {"storageStats": {}}}])
            .await
            .unwrap(),
    )
    .await;
    let storage = agg[0].get_document("storageStats").unwrap();
    assert!(storage.get_bool("capped").unwrap(), "{storage}");

    // A non-capped system.profile: turning profiling on fails with NamespaceExists and leaves
    // the level alone; a server profiling every database by default writes no entries into it.
    let other = c.database("prof6");
    run(&other, doc! {"create": "system.profile"}).await;
    let e = other.run_command(doc! {"profile": 1}).await.unwrap_err();
    assert_eq!(code_of(&e), 48, "{e}");
    assert!(
        e.to_string()
            .contains("prof6.system.profile exists but isn't capped"),
        "{e}"
    );
    assert_eq!(
        run(&other, doc! {"profile": -1})
            .await
            .get_i32("was")
            .unwrap(),
        0
    );
    drop(c);
    drop(s);
    let s = TestServer::start_with(&["--profile", "2"]);
    let c = s.client().await;
    let db = c.database("prof7");
    run(&db, doc! {"create": "system.profile"}).await;
    db.collection::<Document>("c")
        .insert_one(doc! {"a": 1})
        .await
        .unwrap();
    db.collection::<Document>("c")
        .find_one(doc! {})
        .await
        .unwrap();
    assert_eq!(
        db.collection::<Document>("system.profile")
            .count_documents(doc! {})
            .await
            .unwrap(),
        0
    );
    assert!(
        s.log()
            .iter()
            .any(|l| l.contains("Caught Assertion while trying to profile operation")),
        "no warning logged"
    );
}
