//! Change streams through the Rust driver's `watch()` and raw commands: every event type's
//! document (fields, order, types), resume tokens and resuming (also across a restart),
//! transactions' events, invalidation, waiting getMores, and MongoDB's errors.

use std::time::Duration;

use bson::{Document, RawDocumentBuf, doc, rawdoc};
use cairn_compat_tests::{RawConn, TestServer};
use mongodb::change_stream::event::{ChangeStreamEvent, OperationType};
use mongodb::options::{FullDocumentBeforeChangeType, FullDocumentType};

type Event = ChangeStreamEvent<Document>;

async fn next(stream: &mut mongodb::change_stream::ChangeStream<Event>) -> Event {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no event within 10 s"
        );
        if let Some(e) = stream.next_if_any().await.expect("no error") {
            return e;
        }
        assert!(stream.is_alive(), "stream ended");
    }
}

fn ok(r: &RawDocumentBuf) -> bool {
    r.get_f64("ok").ok() == Some(1.0)
}

fn code(r: &RawDocumentBuf) -> i32 {
    assert!(!ok(r), "{r:?}");
    r.get_i32("code").unwrap()
}

fn keys(d: &bson::RawDocument) -> Vec<String> {
    d.iter().map(|e| e.unwrap().0.to_string()).collect()
}

async fn raw_next(c: &mut RawConn, id: i64, coll: &str, db: &str) -> RawDocumentBuf {
    c.command(rawdoc! {"getMore": id, "collection": coll, "maxTimeMS": 2000, "$db": db})
        .await
}

#[tokio::test]
async fn crud_events_through_the_driver() {
    let server = TestServer::start();
    let client = server.client().await;
    let coll = client.database("cs").collection::<Document>("c");
    let mut stream = coll
        .watch()
        .full_document(FullDocumentType::UpdateLookup)
        .await
        .unwrap();
    coll.insert_one(doc! {"_id": 1, "a": {"b": 1}, "arr": [1]})
        .await
        .unwrap();
    coll.update_one(
        doc! {"_id": 1},
        doc! {"$set": {"a.b": 2}, "$push": {"arr": 2}, "$unset": {"gone": ""}},
    )
    .await
    .unwrap();
    coll.replace_one(doc! {"_id": 1}, doc! {"x": 1})
        .await
        .unwrap();
    coll.delete_one(doc! {"_id": 1}).await.unwrap();
    let e = next(&mut stream).await;
    assert_eq!(e.operation_type, OperationType::Insert);
    assert_eq!(e.document_key, Some(doc! {"_id": 1}));
    assert_eq!(
        e.full_document,
        Some(doc! {"_id": 1, "a": {"b": 1}, "arr": [1]})
    );
    assert_eq!(e.ns.as_ref().unwrap().db, "cs");
    assert!(e.cluster_time.is_some() && e.wall_time.is_some());
    let first_token = e.id.clone();
    let e = next(&mut stream).await;
    assert_eq!(e.operation_type, OperationType::Update);
    let u = e.update_description.unwrap();
    assert_eq!(u.updated_fields, doc! {"a.b": 2, "arr.1": 2});
    assert!(u.removed_fields.is_empty());
    // updateLookup: the document as it is now (already replaced, then deleted: null)
    assert!(e.full_document.is_none());
    let e = next(&mut stream).await;
    assert_eq!(e.operation_type, OperationType::Replace);
    assert_eq!(e.full_document, Some(doc! {"_id": 1, "x": 1}));
    let e = next(&mut stream).await;
    assert_eq!(e.operation_type, OperationType::Delete);
    assert_eq!(e.document_key, Some(doc! {"_id": 1}));
    // Resuming after the first event replays the rest.
    let mut again = coll.watch().resume_after(first_token).await.unwrap();
    let kinds: Vec<OperationType> = vec![
        next(&mut again).await.operation_type,
        next(&mut again).await.operation_type,
        next(&mut again).await.operation_type,
    ];
    assert_eq!(
        kinds,
        [
            OperationType::Update,
            OperationType::Replace,
            OperationType::Delete
        ]
    );
}

#[tokio::test]
async fn event_documents_field_by_field() {
    let server = TestServer::start();
    let mut c = server.raw().await;
    let r = c
        .command(rawdoc! {"aggregate": "e", "pipeline": [{"$changeStream": {}}], "cursor": {}, "$db": "cs"})
        .await;
    assert!(ok(&r), "{r:?}");
    let cur = r.get_document("cursor").unwrap();
    // A router's first reply: no events yet, a resume token, the cursor.
    assert_eq!(
        keys(cur),
        ["firstBatch", "postBatchResumeToken", "id", "ns"]
    );
    let id = cur.get_i64("id").unwrap();
    assert_ne!(id, 0);
    c.command(rawdoc! {"insert": "e", "documents": [{"_id": 1, "v": 1}], "$db": "cs"})
        .await;
    c.command(rawdoc! {"update": "e", "updates": [{"q": {"_id": 1}, "u": {"$set": {"v": 2}}}], "$db": "cs"})
        .await;
    c.command(rawdoc! {"delete": "e", "deletes": [{"q": {"_id": 1}, "limit": 1}], "$db": "cs"})
        .await;
    let mut events = Vec::new();
    while events.len() < 3 {
        let r = raw_next(&mut c, id, "e", "cs").await;
        let cur = r.get_document("cursor").unwrap();
        assert_eq!(keys(cur), ["id", "ns", "nextBatch", "postBatchResumeToken"]);
        for e in cur.get_array("nextBatch").unwrap() {
            events.push(e.unwrap().as_document().unwrap().to_owned());
        }
    }
    assert_eq!(
        keys(&events[0]),
        [
            "_id",
            "operationType",
            "clusterTime",
            "wallTime",
            "fullDocument",
            "ns",
            "documentKey"
        ]
    );
    assert_eq!(
        keys(&events[1]),
        [
            "_id",
            "operationType",
            "clusterTime",
            "wallTime",
            "ns",
            "documentKey",
            "updateDescription"
        ]
    );
    assert_eq!(
        events[1]
            .get_document("updateDescription")
            .unwrap()
            .to_owned(),
        rawdoc! {"updatedFields": {"v": 2}, "removedFields": [], "truncatedArrays": []}
    );
    assert_eq!(
        keys(&events[2]),
        [
            "_id",
            "operationType",
            "clusterTime",
            "wallTime",
            "ns",
            "documentKey"
        ]
    );
    assert_eq!(
        events[2].get_document("ns").unwrap().to_owned(),
        rawdoc! {"db": "cs", "coll": "e"}
    );
    // Tokens are {_data: hex} and increase.
    let t: Vec<String> = events
        .iter()
        .map(|e| {
            let id = e.get_document("_id").unwrap();
            assert_eq!(keys(id), ["_data"]);
            id.get_str("_data").unwrap().to_string()
        })
        .collect();
    assert!(t[0] < t[1] && t[1] < t[2]);
    // An idle getMore waits maxTimeMS, then answers an empty batch and the same cursor.
    let started = std::time::Instant::now();
    let r = c
        .command(rawdoc! {"getMore": id, "collection": "e", "maxTimeMS": 300, "$db": "cs"})
        .await;
    assert!(started.elapsed() >= Duration::from_millis(250));
    let cur = r.get_document("cursor").unwrap();
    assert_eq!(cur.get_i64("id").unwrap(), id);
    assert!(cur.get_array("nextBatch").unwrap().is_empty());
    // A waiting getMore returns as soon as a write commits.
    let port = server.port;
    let writer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut w = RawConn::connect(port).await;
        w.command(rawdoc! {"insert": "e", "documents": [{"_id": 2}], "$db": "cs"})
            .await;
    });
    let started = std::time::Instant::now();
    let r = c
        .command(rawdoc! {"getMore": id, "collection": "e", "maxTimeMS": 10000, "$db": "cs"})
        .await;
    writer.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        r.get_document("cursor")
            .unwrap()
            .get_array("nextBatch")
            .unwrap()
            .into_iter()
            .count(),
        1
    );
}

#[tokio::test]
async fn transactions_ddl_and_invalidation() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("cs2");
    let coll = db.collection::<Document>("t");
    coll.insert_one(doc! {"_id": 0}).await.unwrap();
    let mut stream = coll.watch().show_expanded_events(true).await.unwrap();
    let mut dbstream = db.watch().await.unwrap();
    // A transaction's events arrive together after commit, with lsid and txnNumber; an
    // aborted one's never.
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    coll.insert_one(doc! {"_id": 1})
        .session(&mut s)
        .await
        .unwrap();
    coll.insert_one(doc! {"_id": 2})
        .session(&mut s)
        .await
        .unwrap();
    s.abort_transaction().await.unwrap();
    s.start_transaction().await.unwrap();
    coll.insert_one(doc! {"_id": 3})
        .session(&mut s)
        .await
        .unwrap();
    coll.insert_one(doc! {"_id": 4})
        .session(&mut s)
        .await
        .unwrap();
    s.commit_transaction().await.unwrap();
    let a = next(&mut stream).await;
    let b = next(&mut stream).await;
    assert_eq!(a.document_key, Some(doc! {"_id": 3}));
    assert_eq!(b.document_key, Some(doc! {"_id": 4}));
    assert_eq!(a.cluster_time, b.cluster_time);
    assert!(a.txn_number.is_some() && a.lsid.is_some());
    // DDL with showExpandedEvents.
    coll.create_index(mongodb::IndexModel::builder().keys(doc! {"k": 1}).build())
        .await
        .unwrap();
    let e = next(&mut stream).await;
    assert_eq!(
        e.operation_type,
        OperationType::Other("createIndexes".into())
    );
    // Dropping the collection: drop, then invalidate, then the stream is over.
    coll.drop().await.unwrap();
    assert_eq!(next(&mut stream).await.operation_type, OperationType::Drop);
    let inv = next(&mut stream).await;
    assert_eq!(inv.operation_type, OperationType::Invalidate);
    // The database stream saw the inserts and the drop, and is not invalidated by it.
    let mut kinds = Vec::new();
    for _ in 0..3 {
        kinds.push(next(&mut dbstream).await.operation_type);
    }
    assert_eq!(
        kinds,
        [
            OperationType::Insert,
            OperationType::Insert,
            OperationType::Drop
        ]
    );
    // startAfter the invalidation continues with the new collection's events.
    let mut after = coll.watch().start_after(inv.id).await.unwrap();
    coll.insert_one(doc! {"_id": "new"}).await.unwrap();
    assert_eq!(
        next(&mut after).await.document_key,
        Some(doc! {"_id": "new"})
    );
}

#[tokio::test]
async fn pre_and_post_images() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("cs3");
    db.run_command(doc! {"create": "img", "changeStreamPreAndPostImages": {"enabled": true}})
        .await
        .unwrap();
    let coll = db.collection::<Document>("img");
    coll.insert_one(doc! {"_id": 1, "n": 1}).await.unwrap();
    let mut stream = coll
        .watch()
        .full_document(FullDocumentType::Required)
        .full_document_before_change(FullDocumentBeforeChangeType::Required)
        .await
        .unwrap();
    coll.update_one(doc! {"_id": 1}, doc! {"$inc": {"n": 1}})
        .await
        .unwrap();
    let e = next(&mut stream).await;
    assert_eq!(e.full_document, Some(doc! {"_id": 1, "n": 2}));
    assert_eq!(e.full_document_before_change, Some(doc! {"_id": 1, "n": 1}));
}

#[tokio::test]
async fn an_empty_coll_mod_is_a_modify_event() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("cs5");
    db.run_command(doc! {"create": "m"}).await.unwrap();
    let mut c = server.raw().await;
    let opened = c
        .command(rawdoc! {"aggregate": "m", "pipeline": [{"$changeStream": {"showExpandedEvents": true}}], "cursor": {}, "$db": "cs5"})
        .await;
    assert!(ok(&opened), "{opened:?}");
    let id = opened
        .get_document("cursor")
        .unwrap()
        .get_i64("id")
        .unwrap();
    db.run_command(doc! {"collMod": "m"}).await.unwrap();
    let mut events = Vec::new();
    for _ in 0..5 {
        let r = raw_next(&mut c, id, "m", "cs5").await;
        for e in r
            .get_document("cursor")
            .unwrap()
            .get_array("nextBatch")
            .unwrap()
        {
            events.push(e.unwrap().as_document().unwrap().to_owned());
        }
        if !events.is_empty() {
            break;
        }
    }
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].get_str("operationType").unwrap(), "modify");
    assert!(
        events[0]
            .get_document("operationDescription")
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn coll_mod_turns_images_on_and_off() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("cs4");
    db.run_command(doc! {"create": "later"}).await.unwrap();
    let coll = db.collection::<Document>("later");
    coll.insert_one(doc! {"_id": 1, "n": 1}).await.unwrap();
    let options = || async {
        let r = db
            .run_command(doc! {"listCollections": 1, "filter": {"name": "later"}})
            .await
            .unwrap();
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()[0]
            .as_document()
            .unwrap()
            .get_document("options")
            .unwrap()
            .clone()
    };
    // Not in admin, local or config; malformed options are the IDL's errors.
    for (dbname, command, code) in [
        (
            "admin",
            doc! {"create": "x", "changeStreamPreAndPostImages": {"enabled": true}},
            72,
        ),
        (
            "cs4",
            doc! {"collMod": "later", "changeStreamPreAndPostImages": {}},
            40414,
        ),
        (
            "cs4",
            doc! {"collMod": "later", "changeStreamPreAndPostImages": {"enabled": 1}},
            14,
        ),
        (
            "cs4",
            doc! {"collMod": "later", "changeStreamPreAndPostImages": true},
            14,
        ),
    ] {
        let e = client
            .database(dbname)
            .run_command(command.clone())
            .await
            .unwrap_err();
        assert_eq!(cairn_compat_tests::code_of(&e), code, "{command}");
    }
    client
        .database("admin")
        .run_command(doc! {"create": "y"})
        .await
        .unwrap();
    let e = client
        .database("admin")
        .run_command(doc! {"collMod": "y", "changeStreamPreAndPostImages": {"enabled": true}})
        .await
        .unwrap_err();
    assert_eq!(cairn_compat_tests::code_of(&e), 72);

    let mut stream = coll
        .watch()
        .full_document_before_change(FullDocumentBeforeChangeType::WhenAvailable)
        .await
        .unwrap();
    db.run_command(doc! {"collMod": "later", "changeStreamPreAndPostImages": {"enabled": true}})
        .await
        .unwrap();
    assert_eq!(
        options().await,
        doc! {"changeStreamPreAndPostImages": {"enabled": true}}
    );
    // Other options leave it alone.
    db.run_command(doc! {"collMod": "later", "validationLevel": "off"})
        .await
        .unwrap();
    assert_eq!(
        options().await,
        doc! {"changeStreamPreAndPostImages": {"enabled": true}, "validationLevel": "off"}
    );
    coll.update_one(doc! {"_id": 1}, doc! {"$inc": {"n": 1}})
        .await
        .unwrap();
    db.run_command(doc! {"collMod": "later", "changeStreamPreAndPostImages": {"enabled": false}})
        .await
        .unwrap();
    assert_eq!(options().await, doc! {"validationLevel": "off"});
    coll.update_one(doc! {"_id": 1}, doc! {"$inc": {"n": 1}})
        .await
        .unwrap();
    let with_image = next(&mut stream).await;
    assert_eq!(
        with_image.full_document_before_change,
        Some(doc! {"_id": 1, "n": 1})
    );
    let without = next(&mut stream).await;
    assert_eq!(without.operation_type, OperationType::Update);
    assert_eq!(without.full_document_before_change, None);
}

#[tokio::test]
async fn errors_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let token = {
        let server = TestServer::start_in(dir.path(), &[]);
        let mut c = server.raw().await;
        let cs = |d: RawDocumentBuf| {
            rawdoc! {"aggregate": "c", "pipeline": [{"$changeStream": d}], "cursor": {}, "$db": "x"}
        };
        assert_eq!(code(&c.command(cs(rawdoc! {"bogus": 1})).await), 40415);
        assert_eq!(
            code(&c.command(cs(rawdoc! {"fullDocument": "sometimes"})).await),
            2
        );
        assert_eq!(
            code(
                &c.command(rawdoc! {"aggregate": 1, "pipeline": [{"$changeStream": {}}], "cursor": {}, "$db": "admin"})
                    .await
            ),
            73
        );
        assert_eq!(
            code(
                &c.command(rawdoc! {"aggregate": "c", "pipeline": [{"$match": {}}, {"$changeStream": {}}], "cursor": {}, "$db": "x"})
                    .await
            ),
            40602
        );
        assert_eq!(
            code(
                &c.command(rawdoc! {"aggregate": "c", "pipeline": [{"$changeStream": {}}, {"$group": {"_id": 1}}], "cursor": {}, "$db": "x"})
                    .await
            ),
            20
        );
        let r = c.command(cs(rawdoc! {})).await;
        let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
        c.command(rawdoc! {"insert": "c", "documents": [{"_id": 1}], "$db": "x"})
            .await;
        let r = raw_next(&mut c, id, "c", "x").await;
        let e = r
            .get_document("cursor")
            .unwrap()
            .get_array("nextBatch")
            .unwrap()
            .into_iter()
            .next()
            .unwrap()
            .unwrap();
        let token = e
            .as_document()
            .unwrap()
            .get_document("_id")
            .unwrap()
            .to_owned();
        c.command(rawdoc! {"insert": "c", "documents": [{"_id": 2}], "$db": "x"})
            .await;
        // A pipeline that changes _id cannot be resumed: 280.
        let r = c
            .command(rawdoc! {"aggregate": "c", "pipeline": [{"$changeStream": {"resumeAfter": token.clone()}}, {"$project": {"_id": 0}}], "cursor": {}, "$db": "x"})
            .await;
        let bad = r.get_document("cursor").unwrap().get_i64("id").unwrap();
        let r = raw_next(&mut c, bad, "c", "x").await;
        assert_eq!(code(&r), 280);
        server.signal("KILL");
        token
    };
    // After a restart the token still resumes, and sees the second insert.
    let server = TestServer::start_in(dir.path(), &[]);
    let mut c = server.raw().await;
    let r = c
        .command(rawdoc! {"aggregate": "c", "pipeline": [{"$changeStream": {"resumeAfter": token}}], "cursor": {}, "$db": "x"})
        .await;
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    let r = raw_next(&mut c, id, "c", "x").await;
    let e = r
        .get_document("cursor")
        .unwrap()
        .get_array("nextBatch")
        .unwrap()
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(
        e.as_document()
            .unwrap()
            .get_document("documentKey")
            .unwrap()
            .to_owned(),
        rawdoc! {"_id": 2}
    );
}

async fn open(c: &mut RawConn, stages: Vec<RawDocumentBuf>) -> RawDocumentBuf {
    let mut pipeline = bson::RawArrayBuf::new();
    for s in stages {
        pipeline.push(s);
    }
    c.command(rawdoc! {"aggregate": "big", "pipeline": pipeline, "cursor": {}, "$db": "sp"})
        .await
}

#[tokio::test]
async fn large_events_split_into_fragments() {
    let server = TestServer::start();
    let mut c = server.raw().await;
    let r = c
        .command(rawdoc! {"create": "big", "changeStreamPreAndPostImages": {"enabled": true}, "$db": "sp"})
        .await;
    assert!(ok(&r), "{r:?}");
    let nine_mb = |ch: &str| ch.repeat(9 * 1024 * 1024);
    let r = c
        .command(
            rawdoc! {"insert": "big", "documents": [{"_id": 1, "s": nine_mb("a")}], "$db": "sp"},
        )
        .await;
    assert!(ok(&r), "{r:?}");
    let images = rawdoc! {"fullDocument": "required", "fullDocumentBeforeChange": "required"};
    let split = rawdoc! {"$changeStreamSplitLargeEvent": {}};
    let r = open(
        &mut c,
        vec![rawdoc! {"$changeStream": images.clone()}, split.clone()],
    )
    .await;
    let with_split = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    let r = open(&mut c, vec![rawdoc! {"$changeStream": images.clone()}]).await;
    let without = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    let r = c
        .command(rawdoc! {"update": "big", "updates": [{"q": {"_id": 1}, "u": {"_id": 1, "s": nine_mb("b")}}], "$db": "sp"})
        .await;
    assert!(ok(&r), "{r:?}");

    // Two fragments, in two batches: the fields by encoded size (then name), so the small
    // ones and fullDocument, then the pre-image.
    let mut fragments = Vec::new();
    while fragments.len() < 2 {
        let r = raw_next(&mut c, with_split, "big", "sp").await;
        assert!(ok(&r), "{r:?}");
        let cur = r.get_document("cursor").unwrap();
        for f in cur.get_array("nextBatch").unwrap() {
            let f = f.unwrap().as_document().unwrap().to_owned();
            // Each fragment is the batch's resume point.
            assert_eq!(
                cur.get_document("postBatchResumeToken").unwrap(),
                f.get_document("_id").unwrap()
            );
            fragments.push(f);
        }
    }
    assert_eq!(
        keys(&fragments[0]),
        [
            "_id",
            "splitEvent",
            "wallTime",
            "clusterTime",
            "documentKey",
            "operationType",
            "ns",
            "fullDocument"
        ]
    );
    assert_eq!(
        keys(&fragments[1]),
        ["_id", "splitEvent", "fullDocumentBeforeChange"]
    );
    for (i, f) in fragments.iter().enumerate() {
        assert_eq!(
            f.get_document("splitEvent").unwrap(),
            &*rawdoc! {"fragment": i as i32 + 1, "of": 2}
        );
    }
    assert_eq!(fragments[0].get_str("operationType").unwrap(), "replace");
    assert_eq!(
        fragments[1]
            .get_document("fullDocumentBeforeChange")
            .unwrap()
            .get_str("s")
            .unwrap()
            .len(),
        9 * 1024 * 1024
    );

    // Without the stage the event is too large for a document.
    assert_eq!(code(&raw_next(&mut c, without, "big", "sp").await), 10334);

    // Resuming after the first fragment gives the second.
    let first = fragments[0].get_document("_id").unwrap().to_owned();
    let r = open(
        &mut c,
        vec![
            rawdoc! {"$changeStream": {"resumeAfter": first.clone(), "fullDocument": "required", "fullDocumentBeforeChange": "required"}},
            split.clone(),
        ],
    )
    .await;
    assert!(ok(&r), "{r:?}");
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    let mut got = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .into_iter()
        .map(|d| d.unwrap().as_document().unwrap().to_owned())
        .collect::<Vec<_>>();
    while got.is_empty() {
        let r = raw_next(&mut c, id, "big", "sp").await;
        got.extend(
            r.get_document("cursor")
                .unwrap()
                .get_array("nextBatch")
                .unwrap()
                .into_iter()
                .map(|d| d.unwrap().as_document().unwrap().to_owned()),
        );
    }
    assert_eq!(
        got[0].get_document("_id").unwrap(),
        fragments[1].get_document("_id").unwrap()
    );

    // Errors: a fragment token needs the stage (280); the stage's place and argument.
    let r = open(
        &mut c,
        vec![rawdoc! {"$changeStream": {"resumeAfter": first}}],
    )
    .await;
    assert_eq!(code(&r), 280);
    let r = open(
        &mut c,
        vec![
            rawdoc! {"$changeStream": {}},
            split.clone(),
            rawdoc! {"$match": {}},
        ],
    )
    .await;
    assert_eq!(code(&r), 7182802);
    let r = open(
        &mut c,
        vec![
            rawdoc! {"$changeStream": {}},
            rawdoc! {"$changeStreamSplitLargeEvent": {"a": 1}},
        ],
    )
    .await;
    assert_eq!(code(&r), 7182800);
    let r = open(&mut c, vec![split]).await;
    assert_eq!(code(&r), 20);
}
