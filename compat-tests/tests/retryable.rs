//! Retryable writes (at most once, the original reply on retry, across connections and a
//! SIGKILL restart), snapshot reads outside transactions (`atClusterTime`, pinned cursors,
//! SnapshotTooOld) and causal consistency (`operationTime`, `$clusterTime`,
//! `afterClusterTime`).

use std::time::Duration;

use bson::{Binary, Document, RawDocumentBuf, Timestamp, doc, rawdoc, spec::BinarySubtype};
use cairn_compat_tests::{RawConn, TestServer, collect};
use mongodb::options::ReadConcern;

fn lsid(n: u8) -> RawDocumentBuf {
    rawdoc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![n; 16] }}
}

fn ok(r: &RawDocumentBuf) -> bool {
    r.get_f64("ok").ok() == Some(1.0)
}

#[track_caller]
fn assert_code(r: &RawDocumentBuf, code: i32) {
    assert!(!ok(r), "expected error {code}, got {r:?}");
    assert_eq!(r.get_i32("code").unwrap(), code, "{r:?}");
}

fn retryable(mut body: RawDocumentBuf, s: u8, txn: i64) -> RawDocumentBuf {
    body.append(bson::raw::cstr!("lsid"), lsid(s));
    body.append(bson::raw::cstr!("txnNumber"), txn);
    body
}

/// The reply without the gossip fields (which change between replies).
fn strip(r: &RawDocumentBuf) -> Document {
    let mut d = Document::try_from(r.as_ref()).unwrap();
    d.remove("$clusterTime");
    d.remove("operationTime");
    d
}

async fn docs(c: &mut RawConn, coll: &str) -> Vec<Document> {
    let r = c
        .command(rawdoc! {"find": coll, "sort": {"_id": 1}, "$db": "r"})
        .await;
    r.get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .into_iter()
        .map(|d| Document::try_from(d.unwrap().as_document().unwrap()).unwrap())
        .collect()
}

#[tokio::test]
async fn retried_writes_apply_once_with_the_same_reply() {
    let server = TestServer::start();
    let mut c = server.raw().await;
    // insert: retried statements are skipped and reported.
    let ins = retryable(
        rawdoc! {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}], "$db": "r"},
        1,
        1,
    );
    let first = c.command(ins.clone()).await;
    assert!(ok(&first), "{first:?}");
    assert_eq!(first.get_i32("n").unwrap(), 2);
    let again = c.command(ins.clone()).await;
    assert_eq!(
        strip(&again),
        doc! {"n": 2, "retriedStmtIds": [0, 1], "ok": 1.0}
    );
    // A retry with one more statement runs only the new one.
    let more = c
        .command(retryable(
            rawdoc! {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}, {"_id": 3}], "$db": "r"},
            1,
            1,
        ))
        .await;
    assert_eq!(
        strip(&more),
        doc! {"n": 3, "retriedStmtIds": [0, 1], "ok": 1.0}
    );
    assert_eq!(docs(&mut c, "c").await.len(), 3);
    // update with $inc: applied once.
    let upd = retryable(
        rawdoc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"n": 1}}}, {"q": {"_id": 9}, "u": {"$set": {"x": 1}}, "upsert": true}], "$db": "r"},
        1,
        2,
    );
    let first = c.command(upd.clone()).await;
    let again = c.command(upd.clone()).await;
    assert_eq!(
        strip(&first),
        doc! {"n": 2, "nModified": 1, "upserted": [{"index": 1, "_id": 9}], "ok": 1.0}
    );
    assert_eq!(
        strip(&again),
        doc! {"n": 2, "nModified": 1, "upserted": [{"index": 1, "_id": 9}], "retriedStmtIds": [0, 1], "ok": 1.0}
    );
    assert_eq!(docs(&mut c, "c").await[0], doc! {"_id": 1, "n": 1});
    // findAndModify: the original value comes back.
    let fam = retryable(
        rawdoc! {"findAndModify": "c", "query": {"_id": 1}, "update": {"$inc": {"n": 1}}, "new": true, "$db": "r"},
        1,
        3,
    );
    let first = c.command(fam.clone()).await;
    let again = c.command(fam.clone()).await;
    assert_eq!(
        strip(&first),
        doc! {"lastErrorObject": {"n": 1, "updatedExisting": true}, "value": {"_id": 1, "n": 2}, "ok": 1.0}
    );
    assert_eq!(
        strip(&again),
        doc! {"lastErrorObject": {"n": 1, "updatedExisting": true}, "value": {"_id": 1, "n": 2}, "retriedStmtId": 0, "ok": 1.0}
    );
    // delete: n stays 1 on retry.
    let del = retryable(
        rawdoc! {"delete": "c", "deletes": [{"q": {"_id": 3}, "limit": 1}], "$db": "r"},
        1,
        4,
    );
    assert_eq!(
        strip(&c.command(del.clone()).await),
        doc! {"n": 1, "ok": 1.0}
    );
    assert_eq!(
        strip(&c.command(del.clone()).await),
        doc! {"n": 1, "retriedStmtIds": [0], "ok": 1.0}
    );
    // An older number: TransactionTooOld.
    assert_code(&c.command(ins.clone()).await, 225);
    // Multi-document statements cannot be retryable.
    let r = c
        .command(retryable(
            rawdoc! {"update": "c", "updates": [{"q": {}, "u": {"$set": {"m": 1}}, "multi": true}], "$db": "r"},
            1,
            5,
        ))
        .await;
    let we = r.get_array("writeErrors").unwrap();
    let e = we.into_iter().next().unwrap().unwrap();
    assert_eq!(e.as_document().unwrap().get_i32("code").unwrap(), 72);
    let r = c
        .command(retryable(
            rawdoc! {"delete": "c", "deletes": [{"q": {}, "limit": 0}], "$db": "r"},
            1,
            6,
        ))
        .await;
    assert!(r.get_array("writeErrors").is_ok(), "{r:?}");
    // A transaction number used by a transaction cannot be retried as a retryable write.
    let r = c
        .command(rawdoc! {"insert": "c", "documents": [{"_id": 50}], "lsid": lsid(1), "txnNumber": 7i64, "startTransaction": true, "autocommit": false, "$db": "r"})
        .await;
    assert!(ok(&r), "{r:?}");
    let r = c
        .command(retryable(
            rawdoc! {"insert": "c", "documents": [{"_id": 51}], "$db": "r"},
            1,
            7,
        ))
        .await;
    assert_code(&r, 217);
}

#[tokio::test]
async fn retry_after_a_dropped_connection_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ins = retryable(
        rawdoc! {"insert": "c", "documents": [{"_id": "x", "v": 1}], "$db": "r"},
        2,
        10,
    );
    let inc = retryable(
        rawdoc! {"update": "c", "updates": [{"q": {"_id": "x"}, "u": {"$inc": {"v": 10}}}], "writeConcern": {"j": true}, "$db": "r"},
        2,
        11,
    );
    let (first_ins, first_inc) = {
        let server = TestServer::start_in(dir.path(), &[]);
        // The first attempt's connection drops before the reply is read.
        let mut lost = server.raw().await;
        lost.send_command(&ins, 0).await;
        drop(lost);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut c = server.raw().await;
        let first_ins = c.command(ins.clone()).await;
        let first_inc = c.command(inc.clone()).await;
        assert!(ok(&first_inc), "{first_inc:?}");
        server.signal("KILL");
        (first_ins, first_inc)
    };
    let server = TestServer::start_in(dir.path(), &[]);
    let mut c = server.raw().await;
    let again_inc = c.command(inc.clone()).await;
    // The first attempt of the insert had executed: the retry on a new connection answered
    // from its record.
    assert_eq!(
        strip(&first_ins),
        doc! {"n": 1, "retriedStmtIds": [0], "ok": 1.0}
    );
    assert_eq!(strip(&first_inc), doc! {"n": 1, "nModified": 1, "ok": 1.0});
    assert_eq!(
        strip(&again_inc),
        doc! {"n": 1, "nModified": 1, "retriedStmtIds": [0], "ok": 1.0}
    );
    assert_eq!(docs(&mut c, "c").await, vec![doc! {"_id": "x", "v": 11}]);
    // The older number is now too old.
    assert_code(&c.command(ins.clone()).await, 225);
    // The session's number survives the restart too.
    assert_code(
        &c.command(retryable(
            rawdoc! {"insert": "c", "documents": [{"_id": "y"}], "$db": "r"},
            2,
            9,
        ))
        .await,
        225,
    );
}

#[tokio::test]
async fn driver_retryable_writes_against_a_plain_uri() {
    let server = TestServer::start();
    let client = server.client().await;
    let coll = client.database("r").collection::<Document>("d");
    coll.insert_one(doc! {"_id": 1, "n": 0}).await.unwrap();
    coll.update_one(doc! {"_id": 1}, doc! {"$inc": {"n": 1}})
        .await
        .unwrap();
    let d = coll
        .find_one_and_update(doc! {"_id": 1}, doc! {"$inc": {"n": 1}})
        .return_document(mongodb::options::ReturnDocument::After)
        .await
        .unwrap();
    assert_eq!(d, Some(doc! {"_id": 1, "n": 2}));
    coll.delete_one(doc! {"_id": 1}).await.unwrap();
    assert!(coll.find_one(doc! {}).await.unwrap().is_none());
}

// ---------------------------------------------------------------------------------------------
// snapshot reads

fn cursor_of(r: &RawDocumentBuf) -> (Vec<Document>, i64, Option<Timestamp>) {
    let c = r.get_document("cursor").unwrap();
    let batch = c
        .get_array("firstBatch")
        .or_else(|_| c.get_array("nextBatch"))
        .unwrap()
        .into_iter()
        .map(|d| Document::try_from(d.unwrap().as_document().unwrap()).unwrap())
        .collect();
    (
        batch,
        c.get_i64("id").unwrap(),
        c.get_timestamp("atClusterTime").ok(),
    )
}

#[tokio::test]
async fn snapshot_reads_keep_their_time() {
    let server = TestServer::start();
    let mut c = server.raw().await;
    c.command(rawdoc! {"insert": "s", "documents": [{"_id": 1, "k": "a"}, {"_id": 2, "k": "b"}, {"_id": 3, "k": "c"}], "$db": "r"})
        .await;
    let r = c
        .command(
            rawdoc! {"find": "s", "batchSize": 1, "readConcern": {"level": "snapshot"}, "$db": "r"},
        )
        .await;
    let (batch, id, at) = cursor_of(&r);
    let at = at.expect("atClusterTime");
    assert_eq!(batch.len(), 1);
    assert_eq!(r.get_timestamp("operationTime").unwrap(), at);
    // Others write meanwhile.
    c.command(rawdoc! {"insert": "s", "documents": [{"_id": 4, "k": "d"}], "$db": "r"})
        .await;
    c.command(rawdoc! {"delete": "s", "deletes": [{"q": {"_id": 2}, "limit": 1}], "$db": "r"})
        .await;
    // The cursor keeps reading its snapshot.
    let r = c
        .command(rawdoc! {"getMore": id, "collection": "s", "$db": "r"})
        .await;
    let (rest, _, at2) = cursor_of(&r);
    assert_eq!(at2, Some(at));
    assert_eq!(
        rest.iter()
            .map(|d| d.get_i32("_id").unwrap())
            .collect::<Vec<_>>(),
        vec![2, 3]
    );
    // A new read at the same time sees the same data; distinct too.
    let r = c
        .command(rawdoc! {"find": "s", "readConcern": {"level": "snapshot", "atClusterTime": at}, "$db": "r"})
        .await;
    let (all, _, at3) = cursor_of(&r);
    assert_eq!(at3, Some(at));
    assert_eq!(all.len(), 3);
    let r = c
        .command(rawdoc! {"distinct": "s", "key": "k", "readConcern": {"level": "snapshot", "atClusterTime": at}, "$db": "r"})
        .await;
    assert_eq!(r.get_timestamp("atClusterTime").unwrap(), at);
    assert_eq!(r.get_array("values").unwrap().into_iter().count(), 3);
    // Now sees the present.
    let r = c
        .command(rawdoc! {"find": "s", "readConcern": {"level": "snapshot"}, "$db": "r"})
        .await;
    let (now, _, later) = cursor_of(&r);
    assert_eq!(now.len(), 3);
    assert!(later.unwrap() > at);
    // A time in the future: 72; a time never read at with writes since: 239.
    let future = Timestamp {
        time: at.time + 1000,
        increment: 1,
    };
    assert_code(
        &c.command(rawdoc! {"find": "s", "readConcern": {"level": "snapshot", "atClusterTime": future}, "$db": "r"})
            .await,
        72,
    );
    let r = c
        .command(rawdoc! {"insert": "s", "documents": [{"_id": 5}], "$db": "r"})
        .await;
    let write_time = r.get_timestamp("operationTime").unwrap();
    c.command(rawdoc! {"insert": "s", "documents": [{"_id": 6}], "$db": "r"})
        .await;
    let r = c
        .command(rawdoc! {"find": "s", "readConcern": {"level": "snapshot", "atClusterTime": write_time}, "$db": "r"})
        .await;
    assert_code(&r, 239);
    // Commands without snapshot support refuse it.
    assert_code(
        &c.command(rawdoc! {"insert": "s", "documents": [{"_id": 7}], "readConcern": {"level": "snapshot"}, "$db": "r"})
            .await,
        72,
    );
    assert_code(
        &c.command(rawdoc! {"count": "s", "readConcern": {"level": "snapshot"}, "$db": "r"})
            .await,
        72,
    );
    assert_code(
        &c.command(rawdoc! {"find": "s", "readConcern": {"level": "local", "atClusterTime": at}, "$db": "r"})
            .await,
        72,
    );
}

#[tokio::test]
async fn snapshot_sessions_through_the_driver() {
    let server = TestServer::start();
    let client = server.client().await;
    let coll = client.database("r").collection::<Document>("snap");
    coll.insert_many(vec![doc! {"_id": 1}, doc! {"_id": 2}])
        .await
        .unwrap();
    let mut s = client.start_session().snapshot(true).await.unwrap();
    let mut cursor = coll.find(doc! {}).session(&mut s).await.unwrap();
    let mut first = Vec::new();
    while let Some(d) = cursor.next(&mut s).await {
        first.push(d.unwrap());
    }
    drop(cursor);
    coll.insert_one(doc! {"_id": 3}).await.unwrap();
    let mut cursor = coll.find(doc! {}).session(&mut s).await.unwrap();
    let mut second = Vec::new();
    while let Some(d) = cursor.next(&mut s).await {
        second.push(d.unwrap());
    }
    assert_eq!(first, second);
    assert_eq!(second.len(), 2);
    assert_eq!(collect(coll.find(doc! {}).await.unwrap()).await.len(), 3);
    let _ = ReadConcern::snapshot();
}

#[tokio::test]
async fn causal_consistency_and_cluster_time() {
    let server = TestServer::start();
    let mut c = server.raw().await;
    let r = c
        .command(rawdoc! {"insert": "cc", "documents": [{"_id": 1}], "$db": "r"})
        .await;
    let op_time = r.get_timestamp("operationTime").unwrap();
    let ct = r
        .get_document("$clusterTime")
        .unwrap()
        .get_timestamp("clusterTime")
        .unwrap();
    assert!(op_time <= ct);
    let sig = r
        .get_document("$clusterTime")
        .unwrap()
        .get_document("signature")
        .unwrap();
    assert_eq!(sig.get_binary("hash").unwrap().bytes.len(), 20);
    assert_eq!(sig.get_i64("keyId").unwrap(), 0);
    // Reading after that time works and sees the write.
    let r = c
        .command(rawdoc! {"find": "cc", "readConcern": {"afterClusterTime": op_time}, "$db": "r"})
        .await;
    assert_eq!(cursor_of(&r).0.len(), 1);
    // A time beyond the cluster time is refused...
    let future = Timestamp {
        time: ct.time + 100,
        increment: 1,
    };
    assert_code(
        &c.command(rawdoc! {"find": "cc", "readConcern": {"afterClusterTime": future}, "$db": "r"})
            .await,
        72,
    );
    // ...unless the client gossips it first: the clock moves forward.
    let r = c
        .command(rawdoc! {"find": "cc", "readConcern": {"afterClusterTime": future}, "$clusterTime": {"clusterTime": future, "signature": {"hash": Binary { subtype: BinarySubtype::Generic, bytes: vec![0; 20] }, "keyId": 0i64}}, "$db": "r"})
        .await;
    assert!(ok(&r), "{r:?}");
    let r = c
        .command(rawdoc! {"insert": "cc", "documents": [{"_id": 2}], "$db": "r"})
        .await;
    assert!(r.get_timestamp("operationTime").unwrap() > future);
    // A causally consistent driver session reads its own writes.
    let client = server.client().await;
    let coll = client.database("r").collection::<Document>("cc");
    let mut s = client
        .start_session()
        .causal_consistency(true)
        .await
        .unwrap();
    coll.insert_one(doc! {"_id": 3})
        .session(&mut s)
        .await
        .unwrap();
    let got = coll
        .find_one(doc! {"_id": 3})
        .session(&mut s)
        .await
        .unwrap();
    assert_eq!(got, Some(doc! {"_id": 3}));
    assert!(s.operation_time().is_some());
}
