//! Storage through the Rust driver: every BSON type round-trips across a restart, DDL,
//! inserts with MongoDB's write errors, cursors, statistics, write concerns.

use std::time::{Duration, Instant};

use bson::spec::BinarySubtype;
use bson::{
    Binary, Bson, DateTime, Decimal128, Document, JavaScriptCodeWithScope, Regex, Timestamp, doc,
    oid::ObjectId, rawdoc,
};
use cairn_compat_tests::{TestServer, cmd, code_of};
use mongodb::options::WriteConcern;

fn every_type() -> Document {
    doc! {
        "_id": ObjectId::new(),
        "double": 1.5,
        "negzero": -0.0,
        "nan": f64::NAN,
        "inf": f64::INFINITY,
        "string": "héllo\u{0}x",
        "empty_string": "",
        "doc": {"z": 1, "a": {"nested": [1, 2, {"deep": true}]}},
        "empty_doc": {},
        "array": [1, "two", 3.0, null, [4, [5]], {"six": 6}],
        "empty_array": [],
        "bin_generic": Binary { subtype: BinarySubtype::Generic, bytes: vec![0, 1, 2, 255] },
        "bin_uuid": Binary { subtype: BinarySubtype::Uuid, bytes: vec![7; 16] },
        "bin_user": Binary { subtype: BinarySubtype::UserDefined(0x80), bytes: vec![9] },
        "undefined": Bson::Undefined,
        "oid": ObjectId::new(),
        "true": true,
        "false": false,
        "date": DateTime::from_millis(1_700_000_000_123),
        "date_pre_1970": DateTime::from_millis(-86_400_000 * 365),
        "null": Bson::Null,
        "regex": Regex { pattern: "^a.*b$".try_into().unwrap(), options: "imsx".try_into().unwrap() },
        "code": Bson::JavaScriptCode("function() { return 1; }".into()),
        "code_w_scope": JavaScriptCodeWithScope { code: "x + y".into(), scope: doc! {"x": 1, "y": 2} },
        "int32": 42_i32,
        "int32_min": i32::MIN,
        "timestamp": Timestamp { time: 1_700_000_000, increment: 7 },
        "int64": 42_i64,
        "int64_max": i64::MAX,
        "decimal": "1234.5678".parse::<Decimal128>().unwrap(),
        "decimal_neg": "-0.00".parse::<Decimal128>().unwrap(),
        "minkey": Bson::MinKey,
        "maxkey": Bson::MaxKey,
        "symbol": Bson::Symbol("sym".into()),
        "10": "numeric field names keep insertion order",
        "9": "after 10",
        "": "empty field name",
        "a.b": "dotted field name",
        "$dollar": "top-level dollar field",
    }
}

fn same_bytes(a: &Document, b: &Document) -> bool {
    bson::RawDocumentBuf::try_from(a).unwrap().as_bytes()
        == bson::RawDocumentBuf::try_from(b).unwrap().as_bytes()
}

#[tokio::test]
async fn every_bson_type_round_trips_across_restart() {
    let dir = tempfile::tempdir().unwrap();
    let original = every_type();
    {
        let s = TestServer::start_in(dir.path(), &[]);
        let c = s.client().await;
        let coll = c.database("types").collection::<Document>("all");
        coll.insert_one(original.clone()).await.unwrap();
        let back = coll
            .find_one(doc! {"_id": original.get("_id").unwrap()})
            .await
            .unwrap()
            .unwrap();
        assert!(
            same_bytes(&back, &original),
            "before restart:\n{back}\n{original}"
        );
        s.signal("TERM");
        let mut s = s;
        assert_eq!(s.wait_exit(Duration::from_secs(10)), Some(0));
    }
    let s = TestServer::start_in(dir.path(), &[]);
    let c = s.client().await;
    let coll = c.database("types").collection::<Document>("all");
    let back = coll.find_one(doc! {}).await.unwrap().unwrap();
    assert!(
        same_bytes(&back, &original),
        "after restart:\n{back}\n{original}"
    );
    let keys: Vec<&String> = back.keys().collect();
    let pos = |k: &str| keys.iter().position(|x| *x == k).unwrap();
    assert!(pos("10") < pos("9"), "insertion order, not name order");
}

#[tokio::test]
async fn insert_generates_and_orders_ids_and_reports_write_errors() {
    let s = TestServer::start();
    let c = s.client().await;
    let db = c.database("w");
    // _id generated first, or moved first
    let r = db
        .run_command(doc! {"insert": "c", "documents": [{"a": 1}, {"b": 2, "_id": "x"}]})
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 2);
    let all: Vec<Document> = {
        use futures_util_stub::collect;
        collect(db.collection::<Document>("c").find(doc! {}).await.unwrap()).await
    };
    for d in &all {
        assert_eq!(d.keys().next().unwrap(), "_id");
    }
    assert!(
        all.iter()
            .any(|d| matches!(d.get("_id"), Some(Bson::ObjectId(_))))
    );
    // duplicate key: ordered stops, unordered continues
    let r = db
        .run_command(doc! {"insert": "c", "documents": [{"_id": 1}, {"_id": 1}, {"_id": 2}], "ordered": true})
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 1);
    let errs = r.get_array("writeErrors").unwrap();
    assert_eq!(errs.len(), 1);
    let e = errs[0].as_document().unwrap();
    assert_eq!(e.get_i32("index").unwrap(), 1);
    assert_eq!(e.get_i32("code").unwrap(), 11000);
    assert_eq!(e.get_document("keyPattern").unwrap(), &doc! {"_id": 1});
    assert_eq!(e.get_document("keyValue").unwrap(), &doc! {"_id": 1});
    assert_eq!(
        e.get_str("errmsg").unwrap(),
        "E11000 duplicate key error collection: w.c index: _id_ dup key: { _id: 1 }"
    );
    let r = db
        .run_command(doc! {"insert": "c", "documents": [{"_id": 3}, {"_id": 1.0}, {"_id": 4}, {"_id": [1]}, {"_id": 5}], "ordered": false})
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 3);
    let errs = r.get_array("writeErrors").unwrap();
    let codes: Vec<(i32, i32)> = errs
        .iter()
        .map(|e| {
            let e = e.as_document().unwrap();
            (e.get_i32("index").unwrap(), e.get_i32("code").unwrap())
        })
        .collect();
    assert_eq!(codes, [(1, 11000), (3, 53)]);
    // batch size limits and bad documents
    assert_eq!(
        code_of(
            &db.run_command(doc! {"insert": "c", "documents": []})
                .await
                .unwrap_err()
        ),
        16
    );
    assert_eq!(
        code_of(
            &db.run_command(doc! {"insert": "c", "documents": [1]})
                .await
                .unwrap_err()
        ),
        14
    );
    assert_eq!(
        code_of(
            &db.run_command(doc! {"insert": "c", "documents": [{}], "ordered": "x"})
                .await
                .unwrap_err()
        ),
        14
    );
    assert_eq!(
        code_of(
            &db.run_command(doc! {"insert": "c", "documents": [{}], "bogus": 1})
                .await
                .unwrap_err()
        ),
        40415
    );
    // invalid namespaces
    for coll in ["system.foo", "a$b", ".x"] {
        let e = db
            .run_command(doc! {"insert": coll, "documents": [{}]})
            .await
            .unwrap_err();
        assert_eq!(code_of(&e), 73, "{coll}");
    }
    // the driver's typed API surfaces duplicate keys as 11000 too
    let e = db
        .collection::<Document>("c")
        .insert_one(doc! {"_id": 3})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 11000);
}

/// Minimal stream collection without pulling in futures-util.
mod futures_util_stub {
    use bson::Document;
    pub async fn collect(mut cursor: mongodb::Cursor<Document>) -> Vec<Document> {
        let mut out = Vec::new();
        while cursor.advance().await.unwrap() {
            out.push(cursor.deserialize_current().unwrap());
        }
        out
    }
}

#[tokio::test]
async fn cursors_batch_resume_and_die_properly() {
    let s = TestServer::start();
    let c = s.client().await;
    let db = c.database("cur");
    let docs: Vec<Document> = (0..350)
        .map(|i| doc! {"_id": i, "pad": "x".repeat(100)})
        .collect();
    db.collection::<Document>("c")
        .insert_many(docs)
        .await
        .unwrap();

    // default first batch is 101
    let r = db.run_command(doc! {"find": "c"}).await.unwrap();
    let cur = r.get_document("cursor").unwrap();
    let keys: Vec<&String> = cur.keys().collect();
    assert_eq!(keys, ["firstBatch", "id", "ns"]);
    assert_eq!(cur.get_array("firstBatch").unwrap().len(), 101);
    assert_eq!(cur.get_str("ns").unwrap(), "cur.c");
    let id = cur.get_i64("id").unwrap();
    assert!(id > 0);
    // getMore without batchSize returns the rest; then the cursor is gone
    let r = db
        .run_command(doc! {"getMore": id, "collection": "c"})
        .await
        .unwrap();
    let cur = r.get_document("cursor").unwrap();
    assert_eq!(cur.get_array("nextBatch").unwrap().len(), 249);
    assert_eq!(cur.get_i64("id").unwrap(), 0);
    let e = db
        .run_command(doc! {"getMore": id, "collection": "c"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 43);

    // getMore argument errors
    let r = db
        .run_command(doc! {"find": "c", "batchSize": 2})
        .await
        .unwrap();
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_eq!(
        code_of(
            &db.run_command(doc! {"getMore": 5_i32, "collection": "c"})
                .await
                .unwrap_err()
        ),
        14
    );
    assert_eq!(
        code_of(
            &db.run_command(doc! {"getMore": id, "collection": "other"})
                .await
                .unwrap_err()
        ),
        13
    );
    assert_eq!(
        code_of(&db.run_command(doc! {"getMore": id}).await.unwrap_err()),
        40414
    );
    // killCursors
    let r = db
        .run_command(doc! {"killCursors": "c", "cursors": [id, 12345_i64]})
        .await
        .unwrap();
    assert_eq!(
        r.get_array("cursorsKilled").unwrap(),
        &vec![Bson::Int64(id)]
    );
    assert_eq!(
        r.get_array("cursorsNotFound").unwrap(),
        &vec![Bson::Int64(12345)]
    );
    assert!(r.get_array("cursorsAlive").unwrap().is_empty());
    assert!(r.get_array("cursorsUnknown").unwrap().is_empty());
    assert_eq!(
        code_of(
            &db.run_command(doc! {"killCursors": "c", "cursors": [1_i32]})
                .await
                .unwrap_err()
        ),
        14
    );

    // batchSize 0 opens a cursor with an empty first batch; singleBatch closes it
    let r = db
        .run_command(doc! {"find": "c", "batchSize": 0})
        .await
        .unwrap();
    let cur = r.get_document("cursor").unwrap();
    assert!(cur.get_array("firstBatch").unwrap().is_empty());
    assert!(cur.get_i64("id").unwrap() > 0);
    let r = db
        .run_command(doc! {"find": "c", "batchSize": 5, "singleBatch": true})
        .await
        .unwrap();
    assert_eq!(r.get_document("cursor").unwrap().get_i64("id").unwrap(), 0);
    assert_eq!(
        code_of(
            &db.run_command(doc! {"find": "c", "batchSize": -1})
                .await
                .unwrap_err()
        ),
        51024
    );
    assert_eq!(
        code_of(
            &db.run_command(doc! {"find": "c", "limit": -1})
                .await
                .unwrap_err()
        ),
        51024
    );

    // skip/limit/sort through the driver; the cursor iterates across getMores
    let opts = mongodb::options::FindOptions::builder()
        .sort(doc! {"_id": -1})
        .skip(10)
        .limit(150)
        .batch_size(40)
        .build();
    let got = futures_util_stub::collect(
        db.collection::<Document>("c")
            .find(doc! {})
            .with_options(opts)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(got.len(), 150);
    assert_eq!(got[0].get_i32("_id").unwrap(), 339);
    assert_eq!(got[149].get_i32("_id").unwrap(), 190);

    // point reads by _id, across numeric types
    let one = db
        .collection::<Document>("c")
        .find_one(doc! {"_id": 7.0})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(one.get_i32("_id").unwrap(), 7);
    assert!(
        db.collection::<Document>("c")
            .find_one(doc! {"_id": 1000})
            .await
            .unwrap()
            .is_none()
    );
    // a missing collection is an empty result with no cursor
    let r = db.run_command(doc! {"find": "nope"}).await.unwrap();
    assert_eq!(r.get_document("cursor").unwrap().get_i64("id").unwrap(), 0);

    // dropping the collection kills its cursors on their next getMore
    let r = db
        .run_command(doc! {"find": "c", "batchSize": 1})
        .await
        .unwrap();
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    db.collection::<Document>("c").drop().await.unwrap();
    assert_eq!(
        code_of(
            &db.run_command(doc! {"getMore": id, "collection": "c"})
                .await
                .unwrap_err()
        ),
        175
    );
}

#[tokio::test]
async fn idle_cursors_time_out() {
    let s = TestServer::start_with(&["--cursor-timeout-ms", "300"]);
    let c = s.client().await;
    let db = c.database("t");
    db.collection::<Document>("c")
        .insert_many((0..10).map(|i| doc! {"_id": i}))
        .await
        .unwrap();
    let r = db
        .run_command(doc! {"find": "c", "batchSize": 1})
        .await
        .unwrap();
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    let r = db
        .run_command(doc! {"find": "c", "batchSize": 1, "noCursorTimeout": true})
        .await
        .unwrap();
    let kept = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        code_of(
            &db.run_command(doc! {"getMore": id, "collection": "c"})
                .await
                .unwrap_err()
        ),
        43
    );
    db.run_command(doc! {"getMore": kept, "collection": "c"})
        .await
        .unwrap();
}

#[tokio::test]
async fn ddl_commands() {
    let s = TestServer::start();
    let c = s.client().await;
    let db = c.database("ddl");
    db.run_command(doc! {"create": "a"}).await.unwrap();
    db.run_command(doc! {"create": "a"}).await.unwrap();
    assert_eq!(
        code_of(
            &db.run_command(doc! {"create": "a", "validationLevel": "moderate"})
                .await
                .unwrap_err()
        ),
        48
    );
    assert_eq!(
        code_of(
            &db.run_command(doc! {"create": "b", "capped": true})
                .await
                .unwrap_err()
        ),
        72
    );
    // a capped collection needs only its size (capped.rs covers the rest)
    db.run_command(doc! {"create": "capped_b", "capped": true, "size": 1000})
        .await
        .unwrap();
    db.run_command(doc! {"drop": "capped_b"}).await.unwrap();
    // a validator is accepted (validation.rs covers the rest); a malformed one is refused
    db.run_command(doc! {"create": "validated_b", "validator": {"a": 1}})
        .await
        .unwrap();
    db.run_command(doc! {"drop": "validated_b"}).await.unwrap();
    assert_eq!(
        code_of(
            &db.run_command(doc! {"create": "b", "validator": {"$where": "true"}})
                .await
                .unwrap_err()
        ),
        2
    );
    assert_eq!(
        code_of(
            &db.run_command(doc! {"create": "b", "collation": {"locale": "fr"}})
                .await
                .unwrap_err()
        ),
        238
    );
    assert_eq!(
        code_of(
            &db.run_command(doc! {"create": "b", "size": 0})
                .await
                .unwrap_err()
        ),
        51024
    );
    assert_eq!(
        code_of(
            &db.run_command(doc! {"create": "b", "nope": 1})
                .await
                .unwrap_err()
        ),
        40415
    );
    assert_eq!(
        code_of(
            &db.run_command(doc! {"create": "system.bad"})
                .await
                .unwrap_err()
        ),
        73
    );
    db.run_command(doc! {"create": "v", "validationLevel": "moderate"})
        .await
        .unwrap();

    // listCollections: shape, nameOnly, filter, batching
    let r = db.run_command(doc! {"listCollections": 1}).await.unwrap();
    let cur = r.get_document("cursor").unwrap();
    assert_eq!(cur.keys().collect::<Vec<_>>(), ["id", "ns", "firstBatch"]);
    assert_eq!(cur.get_str("ns").unwrap(), "ddl.$cmd.listCollections");
    let batch = cur.get_array("firstBatch").unwrap();
    assert_eq!(batch.len(), 2);
    let a = batch[0].as_document().unwrap();
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        ["name", "type", "options", "info", "idIndex"]
    );
    assert!(
        matches!(a.get_document("info").unwrap().get("uuid"), Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid)
    );
    assert_eq!(
        batch[1]
            .as_document()
            .unwrap()
            .get_document("options")
            .unwrap(),
        &doc! {"validationLevel": "moderate"}
    );
    let names = db
        .list_collection_names()
        .filter(doc! {"name": "v"})
        .await
        .unwrap();
    assert_eq!(names, ["v"]);
    let r = db
        .run_command(doc! {"listCollections": 1, "nameOnly": true, "cursor": {"batchSize": 1}})
        .await
        .unwrap();
    let cur = r.get_document("cursor").unwrap();
    assert_eq!(
        cur.get_array("firstBatch").unwrap()[0]
            .as_document()
            .unwrap(),
        &doc! {"name": "a", "type": "collection"}
    );
    let id = cur.get_i64("id").unwrap();
    let r = db
        .run_command(doc! {"getMore": id, "collection": "$cmd.listCollections"})
        .await
        .unwrap();
    assert_eq!(
        r.get_document("cursor")
            .unwrap()
            .get_array("nextBatch")
            .unwrap()
            .len(),
        1
    );

    // listDatabases
    db.collection::<Document>("a")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    let r = c
        .database("admin")
        .run_command(doc! {"listDatabases": 1})
        .await
        .unwrap();
    let dbs = r.get_array("databases").unwrap();
    let ddl = dbs
        .iter()
        .map(|d| d.as_document().unwrap())
        .find(|d| d.get_str("name").unwrap() == "ddl")
        .unwrap();
    assert!(matches!(ddl.get("sizeOnDisk"), Some(Bson::Int64(_))));
    assert!(!ddl.get_bool("empty").unwrap());
    assert!(matches!(r.get("totalSize"), Some(Bson::Int64(_))));
    let r = c
        .database("admin")
        .run_command(doc! {"listDatabases": 1, "nameOnly": true, "filter": {"name": "ddl"}})
        .await
        .unwrap();
    assert_eq!(
        r.get_array("databases").unwrap(),
        &vec![Bson::Document(doc! {"name": "ddl"})]
    );
    assert!(r.get("totalSize").is_none());
    assert_eq!(
        code_of(&db.run_command(doc! {"listDatabases": 1}).await.unwrap_err()),
        13
    );

    // renameCollection, within and across databases
    let admin = c.database("admin");
    admin
        .run_command(doc! {"renameCollection": "ddl.a", "to": "ddl.a2"})
        .await
        .unwrap();
    assert_eq!(
        code_of(
            &admin
                .run_command(doc! {"renameCollection": "ddl.a2", "to": "ddl.v"})
                .await
                .unwrap_err()
        ),
        48
    );
    assert_eq!(
        code_of(
            &admin
                .run_command(doc! {"renameCollection": "ddl.nope", "to": "ddl.x"})
                .await
                .unwrap_err()
        ),
        26
    );
    assert_eq!(
        code_of(
            &admin
                .run_command(doc! {"renameCollection": "ddl.a2", "to": "ddl.a2"})
                .await
                .unwrap_err()
        ),
        20
    );
    assert_eq!(
        code_of(
            &db.run_command(doc! {"renameCollection": "ddl.a2", "to": "ddl.z"})
                .await
                .unwrap_err()
        ),
        13
    );
    admin
        .run_command(doc! {"renameCollection": "ddl.a2", "to": "other.moved"})
        .await
        .unwrap();
    let moved = c
        .database("other")
        .collection::<Document>("moved")
        .find_one(doc! {})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(moved.get_i32("x").unwrap(), 1);
    admin
        .run_command(doc! {"renameCollection": "other.moved", "to": "ddl.v", "dropTarget": true})
        .await
        .unwrap();
    assert_eq!(db.list_collection_names().await.unwrap(), ["v"]);

    // drop / dropDatabase
    let r = cmd(&db, doc! {"drop": "v"}).await;
    assert_eq!(r, doc! {"ok": 1.0});
    db.run_command(doc! {"drop": "v"}).await.unwrap();
    db.run_command(doc! {"create": "q"}).await.unwrap();
    db.run_command(doc! {"dropDatabase": 1}).await.unwrap();
    assert!(db.list_collection_names().await.unwrap().is_empty());
    let r = db.run_command(doc! {"drop": "v"}).await.unwrap();
    assert_eq!(r.get_str("info").unwrap(), "database does not exist");
}

#[tokio::test]
async fn statistics_reflect_real_data() {
    let s = TestServer::start();
    let c = s.client().await;
    let db = c.database("st");
    let docs: Vec<Document> = (0..100)
        .map(|i| doc! {"_id": i, "v": "y".repeat(i as usize)})
        .collect();
    let total: i64 = docs
        .iter()
        .map(|d| bson::RawDocumentBuf::try_from(d).unwrap().as_bytes().len() as i64)
        .sum();
    db.collection::<Document>("c")
        .insert_many(docs)
        .await
        .unwrap();
    let r = db.run_command(doc! {"collStats": "c"}).await.unwrap();
    assert_eq!(r.get_i32("count").unwrap(), 100);
    assert_eq!(r.get_i32("size").unwrap() as i64, total);
    assert_eq!(r.get_i32("nindexes").unwrap(), 1);
    let r = db
        .run_command(doc! {"collStats": "c", "scale": 1024})
        .await
        .unwrap();
    assert_eq!(r.get_i32("size").unwrap() as i64, total / 1024);
    assert_eq!(
        code_of(
            &db.run_command(doc! {"collStats": "c", "scale": 0})
                .await
                .unwrap_err()
        ),
        51024
    );
    let r = db.run_command(doc! {"collStats": "missing"}).await.unwrap();
    assert_eq!(r.get_i32("count").unwrap(), 0);
    let r = db.run_command(doc! {"dbStats": 1}).await.unwrap();
    assert_eq!(r.get_i32("objects").unwrap(), 100);
    assert_eq!(r.get_i32("collections").unwrap(), 1);
    assert_eq!(r.get_f64("dataSize").unwrap() as i64, total);
    assert!(r.get_f64("fsTotalSize").unwrap() > 0.0);
}

#[tokio::test]
async fn write_concerns() {
    let s = TestServer::start();
    let c = s.client().await;
    let db = c.database("wc");
    for wc in [
        doc! {"w": 1, "j": true},
        doc! {"w": "majority"},
        doc! {"w": 0},
    ] {
        let r = db
            .run_command(doc! {"insert": "c", "documents": [{}], "writeConcern": wc.clone()})
            .await
            .unwrap();
        assert!(r.get("writeConcernError").is_none(), "{wc}");
    }
    let r = db
        .run_command(doc! {"insert": "c", "documents": [{}], "writeConcern": {"w": 2}})
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 1, "the write is applied");
    let wce = r.get_document("writeConcernError").unwrap();
    assert_eq!(wce.get_i32("code").unwrap(), 100);
    assert_eq!(
        wce.get_str("codeName").unwrap(),
        "UnsatisfiableWriteConcern"
    );
    assert_eq!(
        code_of(
            &db.run_command(doc! {"insert": "c", "documents": [{}], "writeConcern": {"w": 99}})
                .await
                .unwrap_err()
        ),
        9
    );
    // the driver's write concern API
    let opts = mongodb::options::CollectionOptions::builder()
        .write_concern(WriteConcern::builder().journal(true).build())
        .build();
    let coll = db.collection_with_options::<Document>("c", opts);
    coll.insert_one(doc! {"_id": "durable"}).await.unwrap();
    assert!(
        coll.find_one(doc! {"_id": "durable"})
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn dropping_a_large_collection_is_fast_and_frees_its_files() {
    let s = TestServer::start();
    let c = s.client().await;
    let coll = c.database("big").collection::<Document>("c");
    // the collection's own spaces are the directories its creation adds (the change log, which
    // keeps the inserts as MongoDB's oplog does, exists from start-up)
    let spaces = s.data_path().join("keyspaces");
    let dirs = || -> std::collections::BTreeSet<std::path::PathBuf> {
        std::fs::read_dir(&spaces)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let at_start = dirs();
    c.database("big").create_collection("c").await.unwrap();
    let own: Vec<std::path::PathBuf> = dirs().difference(&at_start).cloned().collect();
    assert!(!own.is_empty(), "creating a collection adds its spaces");
    let batch: Vec<Document> = (0..1000)
        .map(|i| doc! {"i": i, "pad": "z".repeat(200)})
        .collect();
    for _ in 0..100 {
        coll.insert_many(batch.clone()).await.unwrap();
    }
    let r = c
        .database("big")
        .run_command(doc! {"collStats": "c"})
        .await
        .unwrap();
    assert_eq!(r.get_i32("count").unwrap(), 100_000);
    // fsync writes the buffered data into the collection's own files
    let r = c
        .database("admin")
        .run_command(doc! {"fsync": 1})
        .await
        .unwrap();
    assert!(r.get_i32("numFiles").unwrap() >= 2);
    let du = |p: &std::path::Path| -> u64 {
        fn walk(p: &std::path::Path) -> u64 {
            std::fs::read_dir(p)
                .map(|d| {
                    d.flatten()
                        .map(|e| match e.metadata() {
                            Ok(m) if m.is_dir() => walk(&e.path()),
                            Ok(m) => m.len(),
                            Err(_) => 0,
                        })
                        .sum()
                })
                .unwrap_or(0)
        }
        walk(p)
    };
    let own_size = || own.iter().map(|p| du(p)).sum::<u64>();
    let before = own_size();
    assert!(
        before > 5_000_000,
        "collection files hold the data: {before}"
    );
    let started = Instant::now();
    coll.drop().await.unwrap();
    let took = started.elapsed();
    // constant time: a shared, loaded machine still drops well inside this
    assert!(took < Duration::from_secs(3), "drop took {took:?}");
    // the collection's files are deleted once nothing references them
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let after = own_size();
        if after < before / 10 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "files not freed: {before} -> {after}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = rawdoc! {};
}
