//! The database profiler through the official Rust driver: the `profile` command's replies
//! and errors, `system.profile` entries in MongoDB's shape (readable with `find`), levels 1
//! and 2, `slowms`, `sampleRate`, `filter`, the `--profile`/`--slowms` startup options, the
//! size bound, and the "Slow query" log.

use bson::{Document, doc};
use cairn_compat_tests::{TestServer, code_of, collect};
use mongodb::Database;

async fn run(db: &Database, cmd: Document) -> Document {
    db.run_command(cmd.clone())
        .await
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
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
}

#[tokio::test]
async fn startup_options_and_the_size_bound() {
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
    // Entries with 10 KB commands: far more than 1 MiB in total, the collection stays under it.
    let coll = db.collection::<Document>("c");
    let pad = "x".repeat(10_000);
    for i in 0..150 {
        coll.find_one(doc! {"i": i, "pad": &pad}).await.unwrap();
    }
    let stats = run(&db, doc! {"collStats": "system.profile"}).await;
    let size = stats
        .get_i32("size")
        .map(i64::from)
        .unwrap_or_else(|_| stats.get_i64("size").unwrap());
    assert!(size <= 1024 * 1024, "{size}");
    let kept = entries(&db, doc! {"op": "query", "ns": "prof4.c"}).await;
    assert!(kept.len() > 50 && kept.len() < 150, "{}", kept.len());
    // The oldest went first: the newest entry is kept.
    let newest = kept.last().unwrap();
    assert_eq!(
        newest
            .get_document("command")
            .unwrap()
            .get_document("filter")
            .unwrap()
            .get_i32("i")
            .unwrap(),
        149
    );
}
