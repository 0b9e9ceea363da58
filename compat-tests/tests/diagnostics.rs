//! Diagnostic commands through the official Rust driver: `validate`, `dbHash`, the
//! `serverStatus` sections drivers and tools read (`opLatencies`, `metrics.document`,
//! `metrics.queryExecutor`, `metrics.cursor`, `storageEngine`), `logRotate` with a log file,
//! and `getLog: "global"`. (A `validate` that finds an index entry damaged through the storage
//! layer is a unit test of `cairn::validate`.)

use bson::{Document, doc};
use cairn_compat_tests::{TestServer, code_of, collect};
use mongodb::{Database, IndexModel};

async fn run(db: &Database, cmd: Document) -> Document {
    db.run_command(cmd.clone())
        .await
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

#[tokio::test]
async fn validate_reports_consistent_collections() {
    let s = TestServer::start();
    let c = s.client().await;
    let db = c.database("diag");
    let coll = db.collection::<Document>("v");
    coll.insert_many((0..200).map(|i| doc! {"_id": i, "a": i % 7, "tags": [i, i + 1]}))
        .await
        .unwrap();
    coll.create_index(IndexModel::builder().keys(doc! {"a": 1}).build())
        .await
        .unwrap();
    coll.create_index(IndexModel::builder().keys(doc! {"tags": 1}).build())
        .await
        .unwrap();
    coll.delete_many(doc! {"_id": {"$gte": 150}}).await.unwrap();
    coll.update_many(doc! {}, doc! {"$inc": {"a": 1}})
        .await
        .unwrap();
    for full in [false, true] {
        let r = run(&db, doc! {"validate": "v", "full": full}).await;
        assert!(r.get_bool("valid").unwrap(), "{r}");
        assert_eq!(r.get_str("ns").unwrap(), "diag.v");
        assert_eq!(r.get_i64("nrecords").unwrap(), 150);
        assert_eq!(r.get_i32("nIndexes").unwrap(), 3);
        let keys = r.get_document("keysPerIndex").unwrap();
        assert_eq!(keys.get_i64("_id_").unwrap(), 150);
        assert_eq!(keys.get_i64("a_1").unwrap(), 150);
        assert_eq!(keys.get_i64("tags_1").unwrap(), 300);
        assert!(r.get_array("errors").unwrap().is_empty());
        assert!(r.get_array("warnings").unwrap().is_empty(), "{r}");
        assert!(r.get_array("missingIndexEntries").unwrap().is_empty());
        assert!(r.get_array("extraIndexEntries").unwrap().is_empty());
        assert!(
            r.get_document("indexDetails")
                .unwrap()
                .get_document("tags_1")
                .unwrap()
                .get_bool("valid")
                .unwrap()
        );
        assert!(!r.get_bool("repaired").unwrap());
        assert!(!r.contains_key("advice"));
    }
    let keys: Vec<String> = run(&db, doc! {"validate": "v"})
        .await
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        &keys[..16],
        [
            "ns",
            "uuid",
            "nInvalidDocuments",
            "nNonCompliantDocuments",
            "nrecords",
            "nIndexes",
            "keysPerIndex",
            "indexDetails",
            "valid",
            "repaired",
            "warnings",
            "errors",
            "extraIndexEntries",
            "missingIndexEntries",
            "corruptRecords",
            "ok"
        ]
    );
    for (cmd, code) in [
        (doc! {"validate": "missing"}, 26),
        (doc! {"validate": "v", "repair": true}, 72),
        (doc! {"validate": "v", "full": true, "background": true}, 72),
        (doc! {"validate": "v", "bogus": 1}, 40415),
        (doc! {"validate": 3}, 73),
    ] {
        let e = db.run_command(cmd.clone()).await.unwrap_err();
        assert_eq!(code_of(&e), code, "{cmd}");
    }
}

#[tokio::test]
async fn db_hash_follows_the_data() {
    let s = TestServer::start();
    let c = s.client().await;
    let a = c.database("hash_a");
    let b = c.database("hash_b");
    a.collection::<Document>("x")
        .insert_many([doc! {"_id": 1, "v": "one"}, doc! {"_id": 2, "v": "two"}])
        .await
        .unwrap();
    // Same documents inserted in another order: the same hash (documents go in _id order).
    b.collection::<Document>("x")
        .insert_many([doc! {"_id": 2, "v": "two"}, doc! {"_id": 1, "v": "one"}])
        .await
        .unwrap();
    let ha = run(&a, doc! {"dbHash": 1}).await;
    let hb = run(&b, doc! {"dbHash": 1}).await;
    let coll_hash = |h: &Document| {
        h.get_document("collections")
            .unwrap()
            .get_str("x")
            .unwrap()
            .to_string()
    };
    assert_eq!(coll_hash(&ha), coll_hash(&hb));
    assert_eq!(ha.get_str("md5").unwrap(), hb.get_str("md5").unwrap());
    assert_eq!(ha.get_str("md5").unwrap().len(), 32);
    assert!(ha.get_document("uuids").unwrap().contains_key("x"));
    assert!(ha.get_array("capped").unwrap().is_empty());
    // MongoDB's digest of these two documents (MD5 of their BSON in _id order).
    assert_eq!(coll_hash(&ha), "c224ec825c9dc6935167ad71149d1e87");
    b.collection::<Document>("x")
        .update_one(doc! {"_id": 1}, doc! {"$set": {"v": "uno"}})
        .await
        .unwrap();
    let hb = run(&b, doc! {"dbHash": 1}).await;
    assert_ne!(coll_hash(&ha), coll_hash(&hb));
    // A subset of collections.
    b.collection::<Document>("y")
        .insert_one(doc! {})
        .await
        .unwrap();
    let only = run(&b, doc! {"dbHash": 1, "collections": ["y"]}).await;
    let names: Vec<&String> = only.get_document("collections").unwrap().keys().collect();
    assert_eq!(names, ["y"]);
    let e = b
        .run_command(doc! {"dbHash": 1, "collections": "y"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 14);
}

#[tokio::test]
async fn server_status_sections() {
    let s = TestServer::start();
    let c = s.client().await;
    let admin = c.database("admin");
    let coll = c.database("ss").collection::<Document>("c");
    let before = run(&admin, doc! {"serverStatus": 1}).await;
    coll.insert_many((0..150).map(|i| doc! {"i": i}))
        .await
        .unwrap();
    let all = collect(coll.find(doc! {}).await.unwrap()).await;
    assert_eq!(all.len(), 150);
    coll.update_many(doc! {"i": {"$lt": 10}}, doc! {"$set": {"x": 1}})
        .await
        .unwrap();
    coll.delete_many(doc! {"i": {"$gte": 140}}).await.unwrap();
    let after = run(&admin, doc! {"serverStatus": 1}).await;
    let delta = |section: &str, path: &[&str]| -> i64 {
        let get = |d: &Document| {
            let mut cur = d.get_document(section).unwrap();
            for p in &path[..path.len() - 1] {
                cur = cur.get_document(p).unwrap();
            }
            cur.get_i64(path[path.len() - 1]).unwrap()
        };
        get(&after) - get(&before)
    };
    assert_eq!(delta("metrics", &["document", "inserted"]), 150);
    assert_eq!(delta("metrics", &["document", "returned"]), 150);
    assert_eq!(delta("metrics", &["document", "updated"]), 10);
    assert_eq!(delta("metrics", &["document", "deleted"]), 10);
    assert!(delta("metrics", &["queryExecutor", "scannedObjects"]) >= 150 * 3);
    assert!(delta("metrics", &["queryExecutor", "collectionScans", "total"]) >= 3);
    // The find returned 101 documents, then a getMore: one cursor, more than one batch.
    assert_eq!(delta("metrics", &["cursor", "totalOpened"]), 1);
    assert_eq!(delta("metrics", &["cursor", "moreThanOneBatch"]), 1);
    assert_eq!(
        after
            .get_document("metrics")
            .unwrap()
            .get_document("cursor")
            .unwrap()
            .get_document("open")
            .unwrap()
            .get_i64("total")
            .unwrap(),
        0
    );
    assert!(delta("opLatencies", &["reads", "ops"]) >= 2);
    assert!(delta("opLatencies", &["writes", "ops"]) >= 3);
    assert!(delta("opLatencies", &["reads", "latency"]) > 0);
    let engine = after.get_document("storageEngine").unwrap();
    assert_eq!(engine.get_str("name").unwrap(), "cairn");
    assert!(engine.get_bool("persistent").unwrap());
    assert!(!after.contains_key("wiredTiger"));
    let sections: Vec<&String> = after.keys().collect();
    let pos = |k: &str| sections.iter().position(|s| *s == k).unwrap();
    assert!(pos("network") < pos("opLatencies"));
    assert!(pos("opLatencies") < pos("opcounters"));
    assert!(pos("opcounters") < pos("storageEngine"));
    // Histograms on request.
    let h = run(
        &admin,
        doc! {"serverStatus": 1, "opLatencies": {"histograms": true}},
    )
    .await;
    let reads = h
        .get_document("opLatencies")
        .unwrap()
        .get_document("reads")
        .unwrap();
    let buckets = reads.get_array("histogram").unwrap();
    let counted: i64 = buckets
        .iter()
        .map(|b| b.as_document().unwrap().get_i64("count").unwrap())
        .sum();
    assert_eq!(counted, reads.get_i64("ops").unwrap());
    // Sections can be left out.
    let without = run(&admin, doc! {"serverStatus": 1, "opLatencies": 0}).await;
    assert!(!without.contains_key("opLatencies"));
}

#[tokio::test]
async fn log_rotate_and_get_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cairn.log");
    let log_arg = log.to_str().unwrap().to_string();
    let s = TestServer::start_with(&["--log-path", &log_arg]);
    let c = s.client().await;
    let admin = c.database("admin");
    run(&admin, doc! {"ping": 1, "comment": "before-rotation"}).await;
    let lines = run(&admin, doc! {"getLog": "global"}).await;
    assert!(lines.get_i32("totalLinesWritten").unwrap() > 0);
    assert!(
        lines
            .get_array("log")
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("Waiting for connections"))
    );
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("Waiting for connections")
    );
    run(&admin, doc! {"logRotate": 1}).await;
    run(&admin, doc! {"logRotate": "server"}).await;
    let rotated: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("cairn.log."))
        .collect();
    assert_eq!(rotated.len(), 2, "{rotated:?}");
    let old = std::fs::read_to_string(dir.path().join(rotated.iter().min().unwrap())).unwrap();
    assert!(old.contains("Waiting for connections"));
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("\"Log rotated\"")
    );
    let e = admin
        .run_command(doc! {"logRotate": "audit"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 4);
    // Without a log file there is nothing to rotate.
    let plain = TestServer::start();
    let pc = plain.client().await;
    run(&pc.database("admin"), doc! {"logRotate": 1}).await;
}
