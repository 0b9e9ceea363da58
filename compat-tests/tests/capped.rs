//! Capped collections and tailable cursors through the Rust driver and raw commands: the
//! `size`/`max` options as MongoDB stores them, eviction of the oldest documents in insertion
//! order (indexes and statistics following), `$natural` order, tailable and awaitData cursors
//! fed by concurrent producers, CappedPositionLost, `cloneCollectionAsCapped` and
//! `convertToCapped`, the transaction rules, and a restart.

use std::time::Duration;

use bson::{Bson, Document, RawDocumentBuf, doc, rawdoc};
use cairn_compat_tests::{TestServer, bytes, code_of, collect};
use mongodb::options::CursorType;

fn ok(r: &RawDocumentBuf) -> bool {
    r.get_f64("ok").ok() == Some(1.0)
}

fn code(r: &RawDocumentBuf) -> i32 {
    assert!(!ok(r), "{r:?}");
    r.get_i32("code").unwrap()
}

fn ids(docs: &[Document]) -> Vec<i32> {
    docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

async fn options_of(db: &mongodb::Database, name: &str) -> Document {
    let r = db
        .run_command(doc! {"listCollections": 1, "filter": {"name": name}})
        .await
        .unwrap();
    let batch = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(batch.len(), 1, "{name}");
    batch[0]
        .as_document()
        .unwrap()
        .get_document("options")
        .unwrap()
        .clone()
}

/// A raw command: `base` followed by `extra`'s fields and `$db`.
fn with(base: Document, extra: Document) -> RawDocumentBuf {
    let mut d = base;
    d.extend(extra);
    d.insert("$db", "cap");
    RawDocumentBuf::try_from(&d).unwrap()
}

#[tokio::test]
async fn create_options_as_mongodb_stores_them() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("cap");
    db.run_command(doc! {"create": "small", "capped": true, "size": 100})
        .await
        .unwrap();
    db.run_command(doc! {"create": "odd", "capped": true, "size": 5000, "max": 7})
        .await
        .unwrap();
    let small = options_of(&db, "small").await;
    assert_eq!(small.get("capped"), Some(&Bson::Boolean(true)));
    assert_eq!(small.get("size"), Some(&Bson::Int32(4096)));
    let odd = options_of(&db, "odd").await;
    assert_eq!(odd.get("size"), Some(&Bson::Int32(5120)));
    assert_eq!(odd.get("max"), Some(&Bson::Int32(7)));

    let mut c = server.raw().await;
    let create = |extra: Document| with(doc! {"create": "bad"}, extra);
    assert_eq!(code(&c.command(create(doc! {"capped": true})).await), 72);
    assert_eq!(code(&c.command(create(doc! {"size": 4096})).await), 72);
    assert_eq!(
        code(
            &c.command(create(
                doc! {"capped": true, "size": 4096, "max": 1_i64 << 31}
            ))
            .await
        ),
        2
    );
    assert_eq!(
        code(
            &c.command(create(doc! {"capped": true, "size": "big"}))
                .await
        ),
        14
    );

    // collStats reports the limits.
    let stats = db.run_command(doc! {"collStats": "odd"}).await.unwrap();
    assert_eq!(stats.get("capped"), Some(&Bson::Boolean(true)));
    assert_eq!(stats.get("max"), Some(&Bson::Int32(7)));
    assert_eq!(stats.get("maxSize"), Some(&Bson::Int32(5120)));
    let stats = db
        .run_command(doc! {"collStats": "odd", "scale": 1024})
        .await
        .unwrap();
    assert_eq!(stats.get("maxSize"), Some(&Bson::Int32(5)));
}

#[tokio::test]
async fn max_keeps_the_newest_in_insertion_order() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("cap");
    db.run_command(doc! {"create": "c", "capped": true, "size": 4096, "max": 3})
        .await
        .unwrap();
    let coll = db.collection::<Document>("c");
    coll.create_index(mongodb::IndexModel::builder().keys(doc! {"k": 1}).build())
        .await
        .unwrap();
    for id in [5, 3, 1, 4, 2] {
        coll.insert_one(doc! {"_id": id, "k": id * 10})
            .await
            .unwrap();
    }
    // Insertion order, not _id order; the two oldest (5 and 3) are gone, from the index too.
    assert_eq!(
        ids(&collect(coll.find(doc! {}).await.unwrap()).await),
        [1, 4, 2]
    );
    let back = collect(
        coll.find(doc! {})
            .sort(doc! {"$natural": -1})
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(ids(&back), [2, 4, 1]);
    let by_index = collect(
        coll.find(doc! {"k": {"$gte": 0}})
            .hint(mongodb::options::Hint::Keys(doc! {"k": 1}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(ids(&by_index), [1, 2, 4]);
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 3);
    assert!(coll.find_one(doc! {"_id": 5}).await.unwrap().is_none());

    // Deleting and updating keep the rest of the order; an update may change the size.
    coll.delete_one(doc! {"_id": 4}).await.unwrap();
    coll.update_one(doc! {"_id": 1}, doc! {"$set": {"grown": "x".repeat(200)}})
        .await
        .unwrap();
    coll.insert_one(doc! {"_id": 6}).await.unwrap();
    assert_eq!(
        ids(&collect(coll.find(doc! {}).await.unwrap()).await),
        [1, 2, 6]
    );
    coll.insert_one(doc! {"_id": 7}).await.unwrap();
    assert_eq!(
        ids(&collect(coll.find(doc! {}).await.unwrap()).await),
        [2, 6, 7]
    );
    // A duplicate _id inserts nothing and evicts nothing.
    let e = coll.insert_one(doc! {"_id": 7}).await.unwrap_err();
    assert_eq!(code_of(&e), 11000);
    assert_eq!(
        ids(&collect(coll.find(doc! {}).await.unwrap()).await),
        [2, 6, 7]
    );
}

#[tokio::test]
async fn size_keeps_the_newest_bytes() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("cap");
    db.run_command(doc! {"create": "c", "capped": true, "size": 4096})
        .await
        .unwrap();
    let coll = db.collection::<Document>("c");
    let docs: Vec<Document> = (0..200)
        .map(|i| doc! {"_id": i, "pad": "p".repeat(80)})
        .collect();
    let one = bytes(&docs[0]).len() as i64;
    coll.insert_many(docs).await.unwrap();
    let left = collect(coll.find(doc! {}).await.unwrap()).await;
    let n = left.len() as i32;
    assert_eq!(n as i64, 4096 / one, "as many as fit in 4096 bytes");
    assert_eq!(ids(&left), (200 - n..200).collect::<Vec<_>>());
    let stats = db.run_command(doc! {"collStats": "c"}).await.unwrap();
    assert_eq!(stats.get_i32("count").unwrap(), n);
    assert!(i64::from(stats.get_i32("size").unwrap()) <= 4096);
    // A document larger than the whole collection is still inserted, alone.
    coll.insert_one(doc! {"_id": 1000, "pad": "q".repeat(5000)})
        .await
        .unwrap();
    assert_eq!(
        ids(&collect(coll.find(doc! {}).await.unwrap()).await),
        [1000]
    );
}

#[tokio::test]
async fn tailable_await_follows_four_producers() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("cap");
    db.run_command(doc! {"create": "q", "capped": true, "size": 1 << 20})
        .await
        .unwrap();
    let coll = db.collection::<Document>("q");
    coll.insert_one(doc! {"_id": "start"}).await.unwrap();
    let mut cursor = coll
        .find(doc! {"p": {"$ne": 3}})
        .cursor_type(CursorType::TailableAwait)
        .max_await_time(Duration::from_millis(500))
        .await
        .unwrap();
    let mut producers = Vec::new();
    for p in 0..4 {
        let coll = coll.clone();
        producers.push(tokio::spawn(async move {
            for i in 0..25 {
                coll.insert_one(doc! {"_id": format!("{p}-{i}"), "p": p, "i": i})
                    .await
                    .unwrap();
            }
        }));
    }
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while seen.len() < 1 + 75 {
        assert!(tokio::time::Instant::now() < deadline, "got {}", seen.len());
        let more = tokio::time::timeout(Duration::from_secs(10), cursor.advance())
            .await
            .expect("a document within 10 s")
            .unwrap();
        assert!(more, "cursor alive");
        seen.push(cursor.deserialize_current().unwrap());
    }
    for p in producers {
        p.await.unwrap();
    }
    assert_eq!(seen[0].get_str("_id").unwrap(), "start");
    // Each producer's documents arrive in the order it inserted them; producer 3 is filtered.
    for p in 0..3 {
        let order: Vec<i32> = seen
            .iter()
            .filter(|d| d.get_i32("p").ok() == Some(p))
            .map(|d| d.get_i32("i").unwrap())
            .collect();
        assert_eq!(order, (0..25).collect::<Vec<_>>(), "producer {p}");
    }
    // The order seen is the collection's natural order.
    let natural: Vec<Document> = collect(coll.find(doc! {"p": {"$ne": 3}}).await.unwrap()).await;
    assert_eq!(natural, seen);
}

#[tokio::test]
async fn tailable_rules_and_lost_position() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("cap");
    db.run_command(doc! {"create": "c", "capped": true, "size": 4096, "max": 2})
        .await
        .unwrap();
    db.run_command(doc! {"create": "plain"}).await.unwrap();
    let mut c = server.raw().await;
    let find = |coll: &str, extra: Document| with(doc! {"find": coll}, extra);
    assert_eq!(
        code(&c.command(find("plain", doc! {"tailable": true})).await),
        2
    );
    assert_eq!(
        code(&c.command(find("c", doc! {"awaitData": true})).await),
        9
    );
    assert_eq!(
        code(
            &c.command(find("c", doc! {"tailable": true, "sort": {"a": 1}}))
                .await
        ),
        2
    );
    // On an empty collection the cursor is closed at once, as in MongoDB.
    let r = c.command(find("c", doc! {"tailable": true})).await;
    assert_eq!(r.get_document("cursor").unwrap().get_i64("id").unwrap(), 0);

    let coll = db.collection::<Document>("c");
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    let r = c
        .command(find("c", doc! {"tailable": true, "batchSize": 1}))
        .await;
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(id, 0);
    // Nothing new: an empty batch, the cursor stays open.
    let more = rawdoc! {"getMore": id, "collection": "c", "$db": "cap"};
    let r = c.command(more.clone()).await;
    assert!(ok(&r), "{r:?}");
    let cur = r.get_document("cursor").unwrap();
    assert!(cur.get_array("nextBatch").unwrap().is_empty());
    assert_eq!(cur.get_i64("id").unwrap(), id);
    // Two more inserts evict _id 1, the cursor's position: CappedPositionLost, cursor gone.
    coll.insert_one(doc! {"_id": 2}).await.unwrap();
    coll.insert_one(doc! {"_id": 3}).await.unwrap();
    let r = c.command(more.clone()).await;
    assert_eq!(code(&r), 136);
    assert_eq!(r.get_str("codeName").unwrap(), "CappedPositionLost");
    assert_eq!(code(&c.command(more).await), 43);

    // Tailable cursors and capped writes are refused in transactions, as is creating one.
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    let e = coll
        .insert_one(doc! {"_id": 9})
        .session(&mut s)
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 263);
    s.abort_transaction().await.ok();
    s.start_transaction().await.unwrap();
    let e = db
        .run_command(doc! {"create": "txcap", "capped": true, "size": 4096})
        .session(&mut s)
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 263);
    s.abort_transaction().await.ok();
    assert_eq!(
        ids(&collect(coll.find(doc! {}).await.unwrap()).await),
        [2, 3]
    );
}

#[tokio::test]
async fn clone_and_convert_to_capped() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("cap");
    let plain = db.collection::<Document>("plain");
    plain
        .insert_many((0..50).map(|i| doc! {"_id": i, "pad": "p".repeat(100)}))
        .await
        .unwrap();
    db.run_command(doc! {"cloneCollectionAsCapped": "plain", "toCollection": "copy", "size": 4096})
        .await
        .unwrap();
    let copy = db.collection::<Document>("copy");
    let kept = ids(&collect(copy.find(doc! {}).await.unwrap()).await);
    assert!(!kept.is_empty() && kept.len() < 50, "{kept:?}");
    assert_eq!(kept, (50 - kept.len() as i32..50).collect::<Vec<_>>());
    assert_eq!(
        options_of(&db, "copy").await.get("capped"),
        Some(&Bson::Boolean(true))
    );
    // The source is unchanged.
    assert_eq!(plain.count_documents(doc! {}).await.unwrap(), 50);

    let e = db
        .run_command(
            doc! {"cloneCollectionAsCapped": "plain", "toCollection": "copy", "size": 4096},
        )
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 48);
    let e = db
        .run_command(doc! {"cloneCollectionAsCapped": "nope", "toCollection": "x", "size": 4096})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 26);

    db.run_command(doc! {"convertToCapped": "plain", "size": 1 << 20})
        .await
        .unwrap();
    let opts = options_of(&db, "plain").await;
    assert_eq!(opts.get("capped"), Some(&Bson::Boolean(true)));
    assert_eq!(opts.get("size"), Some(&Bson::Int32(1 << 20)));
    assert_eq!(
        ids(&collect(plain.find(doc! {}).await.unwrap()).await),
        (0..50).collect::<Vec<_>>()
    );
    let e = db
        .run_command(doc! {"convertToCapped": "nope", "size": 4096})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 26);
}

#[tokio::test]
async fn order_and_limits_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = TestServer::start_in(dir.path(), &[]);
        let client = server.client().await;
        let db = client.database("cap");
        db.run_command(doc! {"create": "c", "capped": true, "size": 4096, "max": 3})
            .await
            .unwrap();
        let coll = db.collection::<Document>("c");
        for id in [9, 8, 7] {
            coll.insert_one(doc! {"_id": id}).await.unwrap();
        }
        server.signal("KILL");
    }
    let server = TestServer::start_in(dir.path(), &[]);
    let client = server.client().await;
    let coll = client.database("cap").collection::<Document>("c");
    assert_eq!(
        ids(&collect(coll.find(doc! {}).await.unwrap()).await),
        [9, 8, 7]
    );
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    assert_eq!(
        ids(&collect(coll.find(doc! {}).await.unwrap()).await),
        [8, 7, 1]
    );
}

#[tokio::test]
async fn coll_mod_changes_the_limits() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("capmod");
    db.run_command(doc! {"create": "c", "capped": true, "size": 100_000, "max": 10})
        .await
        .unwrap();
    db.run_command(doc! {"create": "plain"}).await.unwrap();
    let coll = db.collection::<Document>("c");
    for id in 0..10 {
        coll.insert_one(doc! {"_id": id}).await.unwrap();
    }
    // The IDL's ranges come first, then the collection must be capped.
    for (command, code, msg) in [
        (
            doc! {"collMod": "c", "cappedSize": 0},
            51024,
            "BSON field 'cappedSize' value must be >= 1, actual value '0'",
        ),
        (
            doc! {"collMod": "plain", "cappedSize": 0},
            51024,
            "BSON field 'cappedSize' value must be >= 1, actual value '0'",
        ),
        (
            doc! {"collMod": "c", "cappedSize": (1_i64 << 50) + 1},
            51024,
            "BSON field 'cappedSize' value must be <= 1125899906842624, actual value '1125899906842625'",
        ),
        (
            doc! {"collMod": "c", "cappedMax": 1_i64 << 31},
            51024,
            "BSON field 'cappedMax' value must be < 2147483648, actual value '2147483648'",
        ),
        (
            doc! {"collMod": "c", "cappedSize": "x"},
            14,
            "BSON field 'collMod.cappedSize' is the wrong type 'string', expected types '[long, int, decimal, double']",
        ),
        (
            doc! {"collMod": "plain", "cappedMax": 5},
            72,
            "Collection must be capped.",
        ),
    ] {
        let e = db.run_command(command.clone()).await.unwrap_err();
        assert_eq!(code_of(&e), code, "{command}");
        assert!(e.to_string().contains(msg), "{command}: {e}");
    }
    // Lower limits take effect at the next insert, which trims to them (MongoDB 6.0+).
    let r = db
        .run_command(doc! {"collMod": "c", "cappedMax": 4, "cappedSize": 5000})
        .await
        .unwrap();
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    let opts = options_of(&db, "c").await;
    assert_eq!(opts, doc! {"capped": true, "size": 5120, "max": 4});
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 10);
    coll.insert_one(doc! {"_id": 10}).await.unwrap();
    assert_eq!(
        ids(&collect(coll.find(doc! {}).await.unwrap()).await),
        [7, 8, 9, 10]
    );
    let stats = db.run_command(doc! {"collStats": "c"}).await.unwrap();
    assert_eq!(stats.get_i32("max").unwrap(), 4);
    assert_eq!(stats.get_i32("maxSize").unwrap(), 5120);
    // A cappedMax of 0 lifts the document limit; the size still holds.
    db.run_command(doc! {"collMod": "c", "cappedMax": 0})
        .await
        .unwrap();
    assert_eq!(
        options_of(&db, "c").await,
        doc! {"capped": true, "size": 5120}
    );
    for id in 11..15 {
        coll.insert_one(doc! {"_id": id}).await.unwrap();
    }
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 8);
}
