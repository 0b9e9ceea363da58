//! Operator commands through the official Rust driver: `currentOp` (running commands with
//! their client, appName, lsid, planSummary; `$all`, `$ownOps`, filters), `killOp` (a long
//! collection scan stops with Interrupted; a sleeping command too), and `top`.

use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use cairn_compat_tests::{TestServer, code_of};

async fn admin(c: &mongodb::Client, cmd: Document) -> mongodb::error::Result<Document> {
    c.database("admin").run_command(cmd).await
}

async fn inprog(c: &mongodb::Client, cmd: Document) -> Vec<Document> {
    admin(c, cmd)
        .await
        .unwrap()
        .get_array("inprog")
        .unwrap()
        .iter()
        .map(|d| d.as_document().unwrap().clone())
        .collect()
}

/// Polls `currentOp` with `filter` until exactly one operation matches.
async fn wait_for_op(c: &mongodb::Client, filter: Document) -> Document {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut cmd = doc! {"currentOp": 1};
        cmd.extend(filter.clone());
        let ops = inprog(c, cmd).await;
        if ops.len() == 1 {
            return ops.into_iter().next().unwrap();
        }
        assert!(Instant::now() < deadline, "no operation matching {filter}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn opid(op: &Document) -> i32 {
    op.get_i32("opid").unwrap()
}

#[tokio::test]
async fn current_op_reports_running_commands() {
    let s = TestServer::start_with(&["--enable-test-commands"]);
    let c = s.client().await;
    let sleeper = s.client_with("appName=sleeper").await;
    let task = {
        let sleeper = sleeper.clone();
        tokio::spawn(async move {
            let mut session = sleeper.start_session().await.unwrap();
            sleeper
                .database("admin")
                .run_command(doc! {"sleep": 1, "millis": 1500, "comment": "zzz"})
                .session(&mut session)
                .await
        })
    };
    let op = wait_for_op(&c, doc! {"command.sleep": 1}).await;
    assert_eq!(op.get_str("type").unwrap(), "op");
    assert!(op.get_bool("active").unwrap());
    assert_eq!(op.get_str("op").unwrap(), "command");
    assert_eq!(op.get_str("ns").unwrap(), "admin.$cmd");
    assert_eq!(op.get_str("appName").unwrap(), "sleeper");
    assert!(op.get_str("client").unwrap().starts_with("127.0.0.1:"));
    assert!(op.get_str("desc").unwrap().starts_with("conn"));
    assert!(op.get_document("lsid").unwrap().contains_key("id"));
    assert_eq!(
        op.get_document("command")
            .unwrap()
            .get_str("comment")
            .unwrap(),
        "zzz"
    );
    assert!(op.get_i64("microsecs_running").unwrap() >= 0);
    assert!(opid(&op) > 0);
    assert!(!op.contains_key("killPending"));
    // currentOp sees itself.
    let me = inprog(&c, doc! {"currentOp": 1, "command.currentOp": 1}).await;
    assert_eq!(me.len(), 1);
    // A filter on a computed field.
    assert!(
        inprog(
            &c,
            doc! {"currentOp": 1, "command.sleep": 1, "secs_running": {"$gte": 1000}}
        )
        .await
        .is_empty()
    );
    // $ownOps: with access control off every operation is the caller's.
    let own = inprog(
        &c,
        doc! {"currentOp": 1, "$ownOps": true, "command.sleep": 1},
    )
    .await;
    assert_eq!(own.len(), 1);
    // $all adds idle connections (active: false).
    let all = inprog(&c, doc! {"currentOp": 1, "$all": true}).await;
    assert!(
        all.iter()
            .any(|o| o.get_bool("active").ok() == Some(false) && o.contains_key("connectionId")),
        "{all:?}"
    );
    // The aggregation stage reports the same operations.
    let staged = cairn_compat_tests::collect(
        c.database("admin")
            .aggregate([
                doc! {"$currentOp": {"idleConnections": false}},
                doc! {"$match": {"command.sleep": 1}},
            ])
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(staged.len(), 1);
    assert_eq!(opid(&staged[0]), opid(&op));
    let idle = cairn_compat_tests::collect(
        c.database("admin")
            .aggregate([
                doc! {"$currentOp": {"idleConnections": true}},
                doc! {"$match": {"active": false}},
            ])
            .await
            .unwrap(),
    )
    .await;
    assert!(!idle.is_empty());
    let active = inprog(&c, doc! {"currentOp": 1}).await;
    assert!(active.iter().all(|o| o.get_bool("active").unwrap()));
    task.await.unwrap().unwrap();
    assert!(
        inprog(&c, doc! {"currentOp": 1, "command.sleep": 1})
            .await
            .is_empty()
    );
    // Admin only.
    let e = c
        .database("x")
        .run_command(doc! {"currentOp": 1})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 13);
}

#[tokio::test]
async fn kill_op_stops_a_long_collection_scan() {
    let s = TestServer::start();
    let c = s.client().await;
    let coll = c.database("ops").collection::<Document>("big");
    let batch: Vec<Document> = (0..10_000).map(|i| doc! {"x": i}).collect();
    for _ in 0..10 {
        coll.insert_many(batch.clone()).await.unwrap();
    }
    // A count over 100,000 documents that match nothing: a full collection scan.
    let scanner = {
        let c = c.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            let r = c
                .database("ops")
                .run_command(doc! {"count": "big", "query": {"x": -1}, "comment": "scan"})
                .await;
            (r, t.elapsed())
        })
    };
    // The operation is listed as soon as it starts; its plan a moment later.
    let op = wait_for_op(
        &c,
        doc! {"command.comment": "scan", "planSummary": {"$exists": true}},
    )
    .await;
    assert_eq!(op.get_str("ns").unwrap(), "ops.big");
    assert_eq!(op.get_str("planSummary").unwrap(), "COLLSCAN");
    let r = admin(&c, doc! {"killOp": 1, "op": opid(&op)})
        .await
        .unwrap();
    assert_eq!(r.get_str("info").unwrap(), "attempting to kill op");
    let (r, took) = scanner.await.unwrap();
    let e = r.unwrap_err();
    assert_eq!(code_of(&e), 11601, "{e}");
    assert!(e.to_string().contains("operation was interrupted"), "{e}");
    // It ended early: a second full scan takes longer than the killed one did.
    let t = Instant::now();
    let n = c
        .database("ops")
        .run_command(doc! {"count": "big", "query": {"x": -1}})
        .await
        .unwrap();
    assert_eq!(n.get_i32("n").unwrap(), 0);
    assert!(
        took < t.elapsed(),
        "killed after {took:?}, full scan {:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn kill_op_interrupts_sleep_and_reports_kill_pending() {
    let s = TestServer::start_with(&["--enable-test-commands"]);
    let c = s.client().await;
    let task = {
        let c = c.clone();
        tokio::spawn(
            async move { admin(&c, doc! {"sleep": 1, "secs": 30, "comment": "long"}).await },
        )
    };
    let op = wait_for_op(&c, doc! {"command.comment": "long"}).await;
    let t = Instant::now();
    admin(
        &c,
        doc! {"killOp": 1, "op": Bson::Int64(i64::from(opid(&op)))},
    )
    .await
    .unwrap();
    let e = task.await.unwrap().unwrap_err();
    assert_eq!(code_of(&e), 11601);
    assert!(t.elapsed() < Duration::from_secs(5));
    // The router form "<shard>:<opid>" and errors.
    admin(&c, doc! {"killOp": 1, "op": "cairn:999999"})
        .await
        .unwrap();
    for (cmd, code) in [
        (doc! {"killOp": 1}, 4),
        (doc! {"killOp": 1, "op": true}, 14),
        (doc! {"killOp": 1, "op": "nope"}, 2),
        (doc! {"killOp": 1, "op": "other:5"}, 70),
    ] {
        assert_eq!(
            code_of(&admin(&c, cmd.clone()).await.unwrap_err()),
            code,
            "{cmd}"
        );
    }
    // Killing what does not run is not an error.
    admin(&c, doc! {"killOp": 1, "op": 123_456_789})
        .await
        .unwrap();
}

#[tokio::test]
async fn top_counts_per_collection() {
    let s = TestServer::start();
    let c = s.client().await;
    let coll = c.database("topdb").collection::<Document>("t");
    coll.insert_one(doc! {"a": 1}).await.unwrap();
    coll.insert_one(doc! {"a": 2}).await.unwrap();
    coll.find_one(doc! {"a": 1}).await.unwrap();
    coll.update_one(doc! {"a": 1}, doc! {"$set": {"b": 1}})
        .await
        .unwrap();
    c.database("topdb")
        .run_command(doc! {"count": "t"})
        .await
        .unwrap();
    let top = admin(&c, doc! {"top": 1}).await.unwrap();
    let totals = top.get_document("totals").unwrap();
    assert_eq!(totals.get_str("note").unwrap(), "all times in microseconds");
    let t = totals.get_document("topdb.t").unwrap();
    let count = |k: &str| t.get_document(k).unwrap().get_i64("count").unwrap();
    assert_eq!(count("insert"), 2);
    assert_eq!(count("queries"), 1);
    assert_eq!(count("update"), 1);
    assert_eq!(count("commands"), 1);
    assert_eq!(count("total"), 5);
    assert_eq!(count("writeLock"), 3);
    assert_eq!(count("readLock"), 2);
    let keys: Vec<&str> = t.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "total",
            "readLock",
            "writeLock",
            "queries",
            "getmore",
            "insert",
            "update",
            "remove",
            "commands"
        ]
    );
    coll.drop().await.unwrap();
    let top = admin(&c, doc! {"top": 1}).await.unwrap();
    assert!(!top.get_document("totals").unwrap().contains_key("topdb.t"));
}

/// `killOp` ends a change stream's waiting `getMore` at once (Interrupted) and closes its
/// cursor.
#[tokio::test]
async fn kill_op_interrupts_an_awaiting_change_stream_get_more() {
    let s = TestServer::start();
    let c = s.client().await;
    let db = c.database("killcs");
    db.create_collection("c").await.unwrap();
    // One explicit session for the stream's commands: the cursor belongs to the session that
    // opened it, and implicit sessions would race with the currentOp polls for the pool.
    let mut session = c.start_session().await.unwrap();
    let r = db
        .run_command(doc! {"aggregate": "c", "pipeline": [{"$changeStream": {}}], "cursor": {}})
        .session(&mut session)
        .await
        .unwrap();
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(id, 0);
    let task = {
        let db = db.clone();
        tokio::spawn(async move {
            let r = db
                .run_command(doc! {"getMore": id, "collection": "c", "maxTimeMS": 30_000})
                .session(&mut session)
                .await;
            (r, session)
        })
    };
    let op = wait_for_op(&c, doc! {"command.getMore": id}).await;
    let t = Instant::now();
    admin(
        &c,
        doc! {"killOp": 1, "op": Bson::Int64(i64::from(opid(&op)))},
    )
    .await
    .unwrap();
    let (r, mut session) = task.await.unwrap();
    assert_eq!(code_of(&r.unwrap_err()), 11601);
    assert!(t.elapsed() < Duration::from_secs(5));
    let e = db
        .run_command(doc! {"getMore": id, "collection": "c"})
        .session(&mut session)
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 43);
}
