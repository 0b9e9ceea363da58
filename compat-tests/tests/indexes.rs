//! Index commands and index behaviour through the Rust driver, against MongoDB 7.0:
//! `createIndexes`, `listIndexes`, `dropIndexes`, `collMod` on indexes, unique (multikey,
//! sparse, partial, compound) constraints, parallel arrays, hashed indexes, builds over
//! existing data that survive a restart, and the TTL monitor.
//!
//! Queries do not use secondary indexes yet, so only results are checked, never plans.
//! Expected replies follow the MongoDB 7.0 manual and server source (`create_indexes_cmd.cpp`,
//! `index_key_validate.cpp`, `index_catalog_impl.cpp`, `drop_indexes.cpp`, `coll_mod.cpp`,
//! `coll_mod_index.cpp`, `list_indexes.cpp` with its IDL reply type, `write_ops.cpp`,
//! `btree_key_generator.cpp`, `ttl.cpp`).

use std::time::{Duration, Instant};

use bson::{Bson, DateTime, Document, Timestamp, doc};
use cairn_compat_tests::{TestServer, assert_docs, bytes, cmd, code_of};
use mongodb::error::ErrorKind;
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};

// ---------------------------------------------------------------------------------------------
// helpers

/// Byte-for-byte equality (field order and numeric types matter).
#[track_caller]
fn assert_doc(actual: &Document, expected: &Document) {
    assert!(
        bytes(actual) == bytes(expected),
        "documents differ\nactual:   {actual:?}\nexpected: {expected:?}"
    );
}

/// The `code`, `codeName` and `errmsg` of a command that must fail.
async fn cmd_err(db: &Database, command: Document) -> (i32, String, String) {
    match db.run_command(command.clone()).await {
        Err(e) => match &*e.kind {
            ErrorKind::Command(c) => (c.code, c.code_name.clone(), c.message.clone()),
            other => panic!("{command}: unexpected error {other:?}"),
        },
        Ok(r) => panic!("{command} succeeded: {r}"),
    }
}

/// Asserts a command fails with `code` / `code_name`; returns the message.
#[track_caller]
fn expect_code(got: (i32, String, String), code: i32, code_name: &str) -> String {
    assert_eq!(
        (got.0, got.1.as_str()),
        (code, code_name),
        "message: {}",
        got.2
    );
    got.2
}

async fn create(db: &Database, coll: &str, indexes: Vec<Document>) -> Document {
    cmd(db, doc! {"createIndexes": coll, "indexes": indexes}).await
}

async fn create_err(db: &Database, coll: &str, indexes: Vec<Document>) -> (i32, String, String) {
    cmd_err(db, doc! {"createIndexes": coll, "indexes": indexes}).await
}

/// The index specifications `listIndexes` reports (in one batch).
async fn specs(db: &Database, coll: &str) -> Vec<Document> {
    let r = cmd(db, doc! {"listIndexes": coll}).await;
    let cursor = r.get_document("cursor").unwrap();
    assert_eq!(cursor.get_i64("id").unwrap(), 0, "{r}");
    cursor
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|b| b.as_document().unwrap().clone())
        .collect()
}

async fn index_names(db: &Database, coll: &str) -> Vec<String> {
    specs(db, coll)
        .await
        .iter()
        .map(|s| s.get_str("name").unwrap().to_string())
        .collect()
}

async fn insert(db: &Database, coll: &str, docs: Vec<Document>) -> Document {
    cmd(db, doc! {"insert": coll, "documents": docs}).await
}

/// The `writeErrors` entries as the server sent them.
fn raw_write_errors(reply: &Document) -> Vec<Document> {
    reply
        .get_array("writeErrors")
        .map(|a| a.iter().map(|e| e.as_document().unwrap().clone()).collect())
        .unwrap_or_default()
}

/// The `writeErrors` entries without any `codeName`, which MongoDB does not put there
/// (`WriteError::serialize`: `index, code, errmsg, …extra info`); that entries carry none is
/// asserted once, in [`write_error_entries_have_no_code_name`].
fn write_errors(reply: &Document) -> Vec<Document> {
    raw_write_errors(reply)
        .into_iter()
        .map(|mut e| {
            e.remove("codeName");
            e
        })
        .collect()
}

/// MongoDB's write error entry for a duplicate key: `{index, code, errmsg, keyPattern,
/// keyValue}` (`WriteError::serialize` appends the extra info after `errmsg`).
fn dup_error(index: i32, ns: &str, name: &str, pattern: Document, value: Document) -> Document {
    let shown = value
        .iter()
        .map(|(k, v)| format!("{k}: {}", shown_value(v)))
        .collect::<Vec<_>>()
        .join(", ");
    doc! {
        "index": index,
        "code": 11000,
        "errmsg": format!("E11000 duplicate key error collection: {ns} index: {name} dup key: {{ {shown} }}"),
        "keyPattern": pattern,
        "keyValue": value,
    }
}

/// How the server prints a key value in an E11000 message (`BSONElement::toString`).
fn shown_value(v: &Bson) -> String {
    match v {
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Double(d) if d.fract() == 0.0 => format!("{d:.1}"),
        Bson::Double(d) => d.to_string(),
        Bson::String(s) => format!("\"{s}\""),
        Bson::Null => "null".into(),
        Bson::Undefined => "undefined".into(),
        Bson::Array(a) => format!(
            "[ {} ]",
            a.iter().map(shown_value).collect::<Vec<_>>().join(", ")
        ),
        other => panic!("no display for {other:?}"),
    }
}

async fn count(db: &Database, coll: &str, filter: Document) -> i64 {
    let r = cmd(db, doc! {"count": coll, "query": filter}).await;
    match r.get("n") {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("count reply {other:?}"),
    }
}

async fn find(coll: &Collection<Document>, filter: Document) -> Vec<Document> {
    let mut cursor = coll.find(filter).sort(doc! {"_id": 1}).await.unwrap();
    let mut out = Vec::new();
    while cursor.advance().await.unwrap() {
        out.push(cursor.deserialize_current().unwrap());
    }
    out
}

async fn ids(coll: &Collection<Document>, filter: Document) -> Vec<Bson> {
    find(coll, filter)
        .await
        .iter()
        .map(|d| d.get("_id").unwrap().clone())
        .collect()
}

fn int_ids(v: &[i32]) -> Vec<Bson> {
    v.iter().map(|i| Bson::Int32(*i)).collect()
}

fn as_i64(v: Option<&Bson>) -> i64 {
    match v {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// createIndexes

/// Reply shapes (`CreateIndexesReply` field order), several specifications at once, implicit
/// collection creation, and the specifications echoed by `listIndexes` in creation order.
#[tokio::test]
async fn create_indexes_reply_shape_and_spec_echo() {
    let s = TestServer::start();
    let db = s.client().await.database("ci");
    // On a missing collection: the collection is created with its _id index first.
    let r = create(&db, "c", vec![doc! {"key": {"a": 1}, "name": "a_1"}]).await;
    assert_doc(
        &r,
        &doc! {"numIndexesBefore": 1, "numIndexesAfter": 2, "createdCollectionAutomatically": true, "ok": 1.0},
    );
    // Several at once on an existing collection.
    let r = create(
        &db,
        "c",
        vec![
            doc! {"key": {"b": -1}, "name": "b_-1"},
            doc! {"key": {"c": 1, "d": -1}, "name": "c_1_d_-1", "unique": true},
            doc! {"key": {"e": 1}, "name": "e_partial", "partialFilterExpression": {"e": {"$gt": 5}}},
            doc! {"key": {"f": 1}, "name": "f_1", "sparse": true, "expireAfterSeconds": 3600},
            doc! {"key": {"g.h": 1}, "name": "g.h_1", "hidden": true},
            doc! {"key": {"i": "hashed"}, "name": "i_hashed"},
        ],
    )
    .await;
    assert_doc(
        &r,
        &doc! {"numIndexesBefore": 2, "numIndexesAfter": 8, "createdCollectionAutomatically": false, "ok": 1.0},
    );
    assert_docs(
        &specs(&db, "c").await,
        &[
            doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"},
            doc! {"v": 2, "key": {"a": 1}, "name": "a_1"},
            doc! {"v": 2, "key": {"b": -1}, "name": "b_-1"},
            doc! {"v": 2, "key": {"c": 1, "d": -1}, "name": "c_1_d_-1", "unique": true},
            doc! {"v": 2, "key": {"e": 1}, "name": "e_partial", "partialFilterExpression": {"e": {"$gt": 5}}},
            doc! {"v": 2, "key": {"f": 1}, "name": "f_1", "sparse": true, "expireAfterSeconds": 3600},
            doc! {"v": 2, "key": {"g.h": 1}, "name": "g.h_1", "hidden": true},
            doc! {"v": 2, "key": {"i": "hashed"}, "name": "i_hashed"},
        ],
    );
    // A collection made by `create` is not "created automatically".
    cmd(&db, doc! {"create": "made"}).await;
    let r = create(&db, "made", vec![doc! {"key": {"x": 1}, "name": "x_1"}]).await;
    assert_doc(
        &r,
        &doc! {"numIndexesBefore": 1, "numIndexesAfter": 2, "createdCollectionAutomatically": false, "ok": 1.0},
    );
    // `background` is accepted (and ignored) by 4.2+.
    let r = create(
        &db,
        "made",
        vec![doc! {"key": {"bg": 1}, "name": "bg_1", "background": true}],
    )
    .await;
    assert_eq!(r.get_i32("numIndexesAfter").unwrap(), 3);
    assert_eq!(index_names(&db, "made").await, ["_id_", "x_1", "bg_1"]);
}

/// Identical specifications are skipped with a note; name and key conflicts are 86 and 85.
#[tokio::test]
async fn create_indexes_existing_and_conflicts() {
    let s = TestServer::start();
    let db = s.client().await.database("cc");
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_1"},
            doc! {"key": {"t": 1}, "name": "t_1", "expireAfterSeconds": 100},
        ],
    )
    .await;
    let already = doc! {"numIndexesBefore": 3, "numIndexesAfter": 3, "note": "all indexes already exist", "ok": 1.0};
    let r = create(&db, "c", vec![doc! {"key": {"a": 1}, "name": "a_1"}]).await;
    assert_doc(&r, &already);
    let r = create(
        &db,
        "c",
        vec![
            doc! {"key": {"t": 1}, "name": "t_1", "expireAfterSeconds": 100},
            doc! {"key": {"a": 1}, "name": "a_1"},
        ],
    )
    .await;
    assert_doc(&r, &already);
    let r = create(&db, "c", vec![doc! {"key": {"_id": 1}, "name": "_id_"}]).await;
    assert_doc(&r, &already);

    // Same name, another key: IndexKeySpecsConflict.
    let m = expect_code(
        create_err(&db, "c", vec![doc! {"key": {"b": 1}, "name": "a_1"}]).await,
        86,
        "IndexKeySpecsConflict",
    );
    assert!(
        m.starts_with("An existing index has the same name as the requested index."),
        "{m}"
    );
    // Same key and options under another name: IndexOptionsConflict.
    let m = expect_code(
        create_err(&db, "c", vec![doc! {"key": {"a": 1}, "name": "a_other"}]).await,
        85,
        "IndexOptionsConflict",
    );
    assert!(
        m.starts_with("Index already exists with a different name: a_1"),
        "{m}"
    );
    expect_code(
        create_err(&db, "c", vec![doc! {"key": {"_id": 1}, "name": "pk"}]).await,
        85,
        "IndexOptionsConflict",
    );
    // Same name and key, another non-identifying option: IndexOptionsConflict.
    let m = expect_code(
        create_err(
            &db,
            "c",
            vec![doc! {"key": {"t": 1}, "name": "t_1", "expireAfterSeconds": 200}],
        )
        .await,
        85,
        "IndexOptionsConflict",
    );
    assert!(
        m.starts_with(
            "An equivalent index already exists with the same name but different options."
        ),
        "{m}"
    );
    // A conflict anywhere in the list creates nothing.
    expect_code(
        create_err(
            &db,
            "c",
            vec![
                doc! {"key": {"z": 1}, "name": "z_1"},
                doc! {"key": {"b": 1}, "name": "a_1"},
            ],
        )
        .await,
        86,
        "IndexKeySpecsConflict",
    );
    assert_eq!(index_names(&db, "c").await, ["_id_", "a_1", "t_1"]);

    // The same key with another partial filter (an identifying option) is another index, and
    // so is the opposite direction.
    let r = create(
        &db,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_partial", "partialFilterExpression": {"a": {"$gt": 1}}},
            doc! {"key": {"a": -1}, "name": "a_-1"},
        ],
    )
    .await;
    assert_doc(
        &r,
        &doc! {"numIndexesBefore": 3, "numIndexesAfter": 5, "createdCollectionAutomatically": false, "ok": 1.0},
    );
    assert_eq!(
        index_names(&db, "c").await,
        ["_id_", "a_1", "t_1", "a_partial", "a_-1"]
    );
}

/// `appendFinalIndexFieldsToResult`: when only some of the requested indexes already exist,
/// the reply says `note: "index already exists"`.
#[tokio::test]
async fn create_indexes_some_existing_notes_it() {
    let s = TestServer::start();
    let db = s.client().await.database("cm");
    create(&db, "c", vec![doc! {"key": {"a": 1}, "name": "a_1"}]).await;
    let r = create(
        &db,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_1"},
            doc! {"key": {"n": 1}, "name": "n_1"},
        ],
    )
    .await;
    assert_doc(
        &r,
        &doc! {
            "numIndexesBefore": 2,
            "numIndexesAfter": 3,
            "createdCollectionAutomatically": false,
            "note": "index already exists",
            "ok": 1.0,
        },
    );
}

/// `runCreateIndexesOnNewCollection`: asking only for the `_id` index on a missing collection
/// creates the collection, then finds nothing left to build.
#[tokio::test]
async fn create_indexes_only_id_on_missing_collection() {
    let s = TestServer::start();
    let db = s.client().await.database("cid");
    let r = create(&db, "fresh", vec![doc! {"key": {"_id": 1}, "name": "_id_"}]).await;
    assert_doc(
        &r,
        &doc! {
            "numIndexesBefore": 1,
            "numIndexesAfter": 1,
            "createdCollectionAutomatically": true,
            "note": "all indexes already exist",
            "ok": 1.0,
        },
    );
    assert_eq!(index_names(&db, "fresh").await, ["_id_"]);
}

/// Specification errors, with MongoDB's codes (`index_key_validate.cpp`, `_isSpecOk`, the
/// hashed access method), plus the index types and collations Cairn does not serve (238).
#[tokio::test]
async fn create_indexes_rejects_invalid_specs() {
    let s = TestServer::start();
    let db = s.client().await.database("bad");
    insert(&db, "c", vec![doc! {"_id": 1, "a": 1}]).await;
    let cases: Vec<(Document, i32, &str)> = vec![
        (
            doc! {"key": {"a": 0}, "name": "a_0"},
            67,
            "CannotCreateIndex",
        ),
        (doc! {"key": {}, "name": "empty"}, 67, "CannotCreateIndex"),
        (
            doc! {"key": {"a": true}, "name": "a_true"},
            67,
            "CannotCreateIndex",
        ),
        (
            doc! {"key": {"a": "nope"}, "name": "a_nope"},
            67,
            "CannotCreateIndex",
        ),
        (
            doc! {"key": {"": 1}, "name": "blank"},
            67,
            "CannotCreateIndex",
        ),
        (
            doc! {"key": {"a..b": 1}, "name": "dots"},
            67,
            "CannotCreateIndex",
        ),
        (
            doc! {"key": {"$a": 1}, "name": "dollar"},
            67,
            "CannotCreateIndex",
        ),
        (doc! {"key": {"a": 1}}, 9, "FailedToParse"),
        (
            doc! {"key": {"a": 1}, "name": "a_1", "unique": "yes"},
            14,
            "TypeMismatch",
        ),
        (
            doc! {"key": {"a": 1}, "name": "a_1", "sparse": "x"},
            14,
            "TypeMismatch",
        ),
        (
            doc! {"key": {"a": 1}, "name": "a_1", "hidden": 1},
            14,
            "TypeMismatch",
        ),
        (
            doc! {"key": {"a": 1}, "name": "a_1", "partialFilterExpression": 1},
            14,
            "TypeMismatch",
        ),
        (
            doc! {"key": {"a": 1}, "name": "a_1", "expireAfterSeconds": "x"},
            67,
            "CannotCreateIndex",
        ),
        (
            doc! {"key": {"a": 1}, "name": "a_1", "expireAfterSeconds": -1},
            67,
            "CannotCreateIndex",
        ),
        (
            doc! {"key": {"a": 1, "b": 1}, "name": "ab", "expireAfterSeconds": 10},
            67,
            "CannotCreateIndex",
        ),
        (
            doc! {"key": {"_id": 1}, "name": "_id_ttl", "expireAfterSeconds": 10},
            197,
            "InvalidIndexSpecificationOption",
        ),
        (
            doc! {"key": {"a": 1}, "name": "a_1", "v": 3},
            67,
            "CannotCreateIndex",
        ),
        (doc! {"key": {"a": 1}, "name": "*"}, 2, "BadValue"),
        (doc! {"key": {"a": 1}, "name": "_id_"}, 2, "BadValue"),
        (doc! {"key": {"a": 1}, "name": ""}, 67, "CannotCreateIndex"),
        (
            doc! {"key": {"a": 1}, "name": "a_1", "foo": 1},
            197,
            "InvalidIndexSpecificationOption",
        ),
        (
            doc! {"key": {"a": 1}, "name": "a_1", "sparse": true, "partialFilterExpression": {"a": 1}},
            67,
            "CannotCreateIndex",
        ),
        (
            doc! {"key": {"a": 1}, "name": "a_1", "partialFilterExpression": {"a": {"$regex": "x"}}},
            67,
            "CannotCreateIndex",
        ),
        (
            doc! {"key": {"a": "hashed", "b": "hashed"}, "name": "hh"},
            31303,
            "Location31303",
        ),
        (
            doc! {"key": {"a": "hashed"}, "name": "a_hashed", "unique": true},
            16764,
            "Location16764",
        ),
        // Valid for MongoDB, not served by Cairn.
        (
            doc! {"key": {"a": "text"}, "name": "a_text"},
            238,
            "NotImplemented",
        ),
        (
            doc! {"key": {"a": "2dsphere"}, "name": "a_2dsphere", "2dsphereIndexVersion": 9},
            67,
            "CannotCreateIndex",
        ),
        (
            doc! {"key": {"$**": 1}, "name": "wildcard"},
            238,
            "NotImplemented",
        ),
        (
            doc! {"key": {"a": 1}, "name": "a_fr", "collation": {"locale": "fr"}},
            238,
            "NotImplemented",
        ),
    ];
    for (spec, code, code_name) in cases {
        let got = create_err(&db, "c", vec![spec.clone()]).await;
        assert_eq!(
            (got.0, got.1.as_str()),
            (code, code_name),
            "{spec}: {}",
            got.2
        );
    }
    assert_eq!(index_names(&db, "c").await, ["_id_"]);
    assert_eq!(count(&db, "c", doc! {}).await, 1);
    // Messages of the most common ones.
    let m = expect_code(
        create_err(&db, "c", vec![doc! {"key": {"a": 0}, "name": "a_0"}]).await,
        67,
        "CannotCreateIndex",
    );
    assert_eq!(
        m,
        "Error in specification { key: { a: 0 }, name: \"a_0\" } :: caused by :: Values in the \
         index key pattern cannot be 0."
    );
    let m = expect_code(
        create_err(&db, "c", vec![doc! {"key": {"a": 1}, "name": "*"}]).await,
        2,
        "BadValue",
    );
    assert_eq!(m, "The index name '*' is not valid.");
    let (code, _, m) = create_err(
        &db,
        "c",
        vec![doc! {"key": {"a": 1}, "name": "a_1", "foo": 1}],
    )
    .await;
    assert_eq!(code, 197);
    assert_eq!(
        m,
        "Error in specification { key: { a: 1 }, name: \"a_1\", foo: 1 } :: caused by :: The \
         field 'foo' is not valid for an index specification. Specification: { key: { a: 1 }, \
         name: \"a_1\", foo: 1 }"
    );
    // The simple collation is accepted.
    create(
        &db,
        "c",
        vec![doc! {"key": {"s": 1}, "name": "s_1", "collation": {"locale": "simple"}}],
    )
    .await;
    assert_eq!(index_names(&db, "c").await, ["_id_", "s_1"]);
}

/// Code 197 has a name in `error_codes.yml`: InvalidIndexSpecificationOption.
#[tokio::test]
async fn invalid_index_specification_option_code_name() {
    let s = TestServer::start();
    let db = s.client().await.database("bad");
    expect_code(
        create_err(
            &db,
            "c",
            vec![doc! {"key": {"a": 1}, "name": "a_1", "foo": 1}],
        )
        .await,
        197,
        "InvalidIndexSpecificationOption",
    );
    expect_code(
        create_err(
            &db,
            "c",
            vec![doc! {"key": {"_id": 1}, "name": "_id_", "unique": true}],
        )
        .await,
        197,
        "InvalidIndexSpecificationOption",
    );
}

/// `validateIndexSpec`: a key pattern that is not a document is TypeMismatch ("The field
/// 'key' must be an object, but got int"), a missing one FailedToParse ("The 'key' field is
/// a required property of an index specification"), a name that is not a string TypeMismatch
/// ("The field 'name' must be a string, but got int").
#[tokio::test]
async fn create_indexes_key_and_name_shape_errors() {
    let s = TestServer::start();
    let db = s.client().await.database("bad");
    let m = expect_code(
        create_err(&db, "c", vec![doc! {"key": 1, "name": "k"}]).await,
        14,
        "TypeMismatch",
    );
    assert!(
        m.contains("The field 'key' must be an object, but got int"),
        "{m}"
    );
    let m = expect_code(
        create_err(&db, "c", vec![doc! {"name": "nokey"}]).await,
        9,
        "FailedToParse",
    );
    assert!(
        m.contains("The 'key' field is a required property of an index specification"),
        "{m}"
    );
    let m = expect_code(
        create_err(&db, "c", vec![doc! {"key": {"a": 1}, "name": 5}]).await,
        14,
        "TypeMismatch",
    );
    assert!(
        m.contains("The field 'name' must be a string, but got int"),
        "{m}"
    );
}

/// The command's own fields (`CreateIndexesCommand` IDL, strict).
#[tokio::test]
async fn create_indexes_command_errors() {
    let s = TestServer::start();
    let db = s.client().await.database("bad");
    expect_code(
        cmd_err(&db, doc! {"createIndexes": "c"}).await,
        40414,
        "Location40414",
    );
    expect_code(
        cmd_err(&db, doc! {"createIndexes": "c", "indexes": "x"}).await,
        14,
        "TypeMismatch",
    );
    expect_code(
        cmd_err(&db, doc! {"createIndexes": "c", "indexes": [1]}).await,
        14,
        "TypeMismatch",
    );
    let m = expect_code(
        cmd_err(&db, doc! {"createIndexes": "c", "indexes": []}).await,
        2,
        "BadValue",
    );
    assert_eq!(m, "Must specify at least one index to create");
    expect_code(
        cmd_err(
            &db,
            doc! {"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1"}], "bogus": 1},
        )
        .await,
        40415,
        "Location40415",
    );
}

/// `parseAndValidateIndexSpecs` runs before the collection is created: a refused
/// specification leaves no collection behind.
#[tokio::test]
async fn create_indexes_refused_spec_creates_no_collection() {
    let s = TestServer::start();
    let db = s.client().await.database("ghost");
    expect_code(
        create_err(&db, "c", vec![doc! {"key": {"a": 0}, "name": "a_0"}]).await,
        67,
        "CannotCreateIndex",
    );
    expect_code(
        cmd_err(&db, doc! {"listIndexes": "c"}).await,
        26,
        "NamespaceNotFound",
    );
    let r = cmd(&db, doc! {"listCollections": 1, "nameOnly": true}).await;
    let batch = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert!(batch.is_empty(), "{r}");
}

/// The catalog form (`IndexCatalogImpl::_fixIndexSpec`): `unique` and `hidden` are kept only
/// when true, `dropDups` is dropped, numbers count as booleans (`sparse: 1` makes a sparse
/// index, listed as `sparse: true`). A conflict on a missing collection leaves no collection
/// either (the implicit creation is rolled back).
#[tokio::test]
async fn create_indexes_catalog_form() {
    let s = TestServer::start();
    let db = s.client().await.database("cat");
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"u": 1}, "name": "u_1", "unique": 1, "sparse": 1},
            doc! {"key": {"h": 1}, "name": "h_1", "hidden": false, "unique": false, "dropDups": true},
        ],
    )
    .await;
    assert_docs(
        &specs(&db, "c").await[1..],
        &[
            doc! {"v": 2, "key": {"u": 1}, "name": "u_1", "unique": true, "sparse": true},
            doc! {"v": 2, "key": {"h": 1}, "name": "h_1"},
        ],
    );
    // Sparse: documents without `u` are not indexed and do not collide.
    let r = insert(&db, "c", vec![doc! {"_id": 1}, doc! {"_id": 2}]).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    let r = insert(
        &db,
        "c",
        vec![doc! {"_id": 3, "u": 1}, doc! {"_id": 4, "u": 1}],
    )
    .await;
    assert_eq!(write_errors(&r).len(), 1, "{r}");

    expect_code(
        create_err(&db, "ghost", vec![doc! {"key": {"_id": 1}, "name": "pk"}]).await,
        85,
        "IndexOptionsConflict",
    );
    let r = cmd(
        &db,
        doc! {"listCollections": 1, "nameOnly": true, "filter": {"name": "ghost"}},
    )
    .await;
    let batch = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert!(batch.is_empty(), "{r}");
}

/// The driver's index API: default names, several at once, listing into `IndexModel`s, drops.
#[tokio::test]
async fn driver_index_helpers() {
    let s = TestServer::start();
    let db = s.client().await.database("drv");
    let coll = db.collection::<Document>("d");
    let r = coll
        .create_index(IndexModel::builder().keys(doc! {"x": 1, "y": -1}).build())
        .await
        .unwrap();
    assert_eq!(r.index_name, "x_1_y_-1");
    let r = coll
        .create_indexes(vec![
            IndexModel::builder().keys(doc! {"h": "hashed"}).build(),
            IndexModel::builder()
                .keys(doc! {"u": 1})
                .options(
                    IndexOptions::builder()
                        .unique(true)
                        .name("uniq_u".to_string())
                        .build(),
                )
                .build(),
            IndexModel::builder()
                .keys(doc! {"at": 1})
                .options(
                    IndexOptions::builder()
                        .expire_after(Duration::from_secs(30))
                        .build(),
                )
                .build(),
        ])
        .await
        .unwrap();
    assert_eq!(r.index_names, ["h_hashed", "uniq_u", "at_1"]);
    assert_eq!(
        coll.list_index_names().await.unwrap(),
        ["_id_", "x_1_y_-1", "h_hashed", "uniq_u", "at_1"]
    );
    let mut cursor = coll.list_indexes().await.unwrap();
    let mut models = Vec::new();
    while cursor.advance().await.unwrap() {
        models.push(cursor.deserialize_current().unwrap());
    }
    assert_eq!(models.len(), 5);
    assert_eq!(models[1].keys, doc! {"x": 1, "y": -1});
    let opts = models[3].options.as_ref().unwrap();
    assert_eq!(opts.unique, Some(true));
    assert_eq!(opts.name.as_deref(), Some("uniq_u"));
    let opts = models[4].options.as_ref().unwrap();
    assert_eq!(opts.expire_after, Some(Duration::from_secs(30)));
    // The unique index holds through the typed API.
    coll.insert_one(doc! {"u": 1}).await.unwrap();
    let e = coll.insert_one(doc! {"u": 1}).await.unwrap_err();
    assert_eq!(code_of(&e), 11000);
    coll.drop_index("x_1_y_-1").await.unwrap();
    assert_eq!(code_of(&coll.drop_index("x_1_y_-1").await.unwrap_err()), 27);
    coll.drop_indexes().await.unwrap();
    assert_eq!(coll.list_index_names().await.unwrap(), ["_id_"]);
    coll.insert_one(doc! {"u": 1}).await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// listIndexes

/// Batches and getMore over the index list; a missing collection or database is 26.
#[tokio::test]
async fn list_indexes_batches_and_missing_collection() {
    let s = TestServer::start();
    let db = s.client().await.database("li");
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_1"},
            doc! {"key": {"b": 1}, "name": "b_1"},
            doc! {"key": {"c": 1}, "name": "c_1"},
        ],
    )
    .await;
    let r = cmd(&db, doc! {"listIndexes": "c", "cursor": {"batchSize": 2}}).await;
    let cursor = r.get_document("cursor").unwrap();
    let id = cursor.get_i64("id").unwrap();
    assert_ne!(id, 0);
    let ns = cursor.get_str("ns").unwrap();
    let first: Vec<&str> = cursor
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|s| s.as_document().unwrap().get_str("name").unwrap())
        .collect();
    assert_eq!(first, ["_id_", "a_1"]);
    // getMore on the namespace the cursor reports.
    let coll = ns.split_once('.').unwrap().1;
    let r = cmd(
        &db,
        doc! {"getMore": id, "collection": coll, "batchSize": 1},
    )
    .await;
    let cursor = r.get_document("cursor").unwrap();
    assert_eq!(cursor.get_i64("id").unwrap(), id);
    assert_docs(
        &cursor
            .get_array("nextBatch")
            .unwrap()
            .iter()
            .map(|d| d.as_document().unwrap().clone())
            .collect::<Vec<_>>(),
        &[doc! {"v": 2, "key": {"b": 1}, "name": "b_1"}],
    );
    let r = cmd(&db, doc! {"getMore": id, "collection": coll}).await;
    let cursor = r.get_document("cursor").unwrap();
    assert_eq!(cursor.get_i64("id").unwrap(), 0);
    assert_eq!(cursor.get_array("nextBatch").unwrap().len(), 1);
    // batchSize 0: empty first batch, everything in the getMore.
    let r = cmd(&db, doc! {"listIndexes": "c", "cursor": {"batchSize": 0}}).await;
    let cursor = r.get_document("cursor").unwrap();
    assert!(cursor.get_array("firstBatch").unwrap().is_empty());
    let id = cursor.get_i64("id").unwrap();
    let r = cmd(&db, doc! {"getMore": id, "collection": coll}).await;
    assert_eq!(
        r.get_document("cursor")
            .unwrap()
            .get_array("nextBatch")
            .unwrap()
            .len(),
        4
    );

    let m = expect_code(
        cmd_err(&db, doc! {"listIndexes": "nope"}).await,
        26,
        "NamespaceNotFound",
    );
    assert_eq!(m, "ns does not exist: li.nope");
    let other = s.client().await.database("nodb");
    expect_code(
        cmd_err(&other, doc! {"listIndexes": "c"}).await,
        26,
        "NamespaceNotFound",
    );
}

/// `listIndexes` answers with the collection's namespace as the cursor's `ns`
/// (`ListIndexesReplyCursor(id, nss, …)` with the collection's `nss`), and getMore runs on it.
#[tokio::test]
async fn list_indexes_reply_shape() {
    let s = TestServer::start();
    let db = s.client().await.database("ls");
    create(&db, "c", vec![doc! {"key": {"a": 1}, "name": "a_1"}]).await;
    let r = cmd(&db, doc! {"listIndexes": "c"}).await;
    assert_doc(
        &r,
        &doc! {
            "cursor": {
                "id": 0_i64,
                "ns": "ls.c",
                "firstBatch": [
                    {"v": 2, "key": {"_id": 1}, "name": "_id_"},
                    {"v": 2, "key": {"a": 1}, "name": "a_1"},
                ],
            },
            "ok": 1.0,
        },
    );
    let r = cmd(&db, doc! {"listIndexes": "c", "cursor": {"batchSize": 1}}).await;
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    let r = cmd(&db, doc! {"getMore": id, "collection": "c"}).await;
    assert_doc(
        &r,
        &doc! {
            "cursor": {
                "nextBatch": [{"v": 2, "key": {"a": 1}, "name": "a_1"}],
                "id": 0_i64,
                "ns": "ls.c",
            },
            "ok": 1.0,
        },
    );
}

/// Since 5.0 every `listIndexes` entry goes through the `ListIndexesReplyItem` IDL type:
/// fields come out in its declaration order (`v, key, name, background, unique, hidden,
/// partialFilterExpression, sparse, expireAfterSeconds, …`), booleans as booleans and
/// `v`/`expireAfterSeconds` as 32-bit integers, whatever the creation request said.
#[tokio::test]
async fn list_indexes_canonical_field_order_and_types() {
    let s = TestServer::start();
    let db = s.client().await.database("canon");
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_1", "sparse": true, "unique": true},
            doc! {"key": {"b": 1}, "expireAfterSeconds": 60_i64, "name": "b_1"},
            doc! {"name": "c_1", "unique": 1, "key": {"c": 1}},
            doc! {"key": {"d": 1}, "name": "d_1", "v": 2_i64, "partialFilterExpression": {"d": {"$exists": true}}, "hidden": true},
        ],
    )
    .await;
    assert_docs(
        &specs(&db, "c").await[1..],
        &[
            doc! {"v": 2, "key": {"a": 1}, "name": "a_1", "unique": true, "sparse": true},
            doc! {"v": 2, "key": {"b": 1}, "name": "b_1", "expireAfterSeconds": 60},
            doc! {"v": 2, "key": {"c": 1}, "name": "c_1", "unique": true},
            doc! {"v": 2, "key": {"d": 1}, "name": "d_1", "hidden": true, "partialFilterExpression": {"d": {"$exists": true}}},
        ],
    );
}

/// `background` stays in the stored specification (it is a `NewIndexSpec` field, echoed by
/// `listIndexes`); a simple collation is dropped from it (`validateIndexSpecCollation`).
#[tokio::test]
async fn list_indexes_background_and_simple_collation() {
    let s = TestServer::start();
    let db = s.client().await.database("bgc");
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"bg": 1}, "name": "bg_1", "background": true},
            doc! {"key": {"s": 1}, "name": "s_1", "collation": {"locale": "simple"}},
        ],
    )
    .await;
    assert_docs(
        &specs(&db, "c").await[1..],
        &[
            doc! {"v": 2, "key": {"bg": 1}, "name": "bg_1", "background": true},
            doc! {"v": 2, "key": {"s": 1}, "name": "s_1"},
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// dropIndexes

/// Drops by name, key pattern, list of names and `"*"`; `_id_` is 72, unknown names and
/// patterns are 27, and a refused list drops nothing.
#[tokio::test]
async fn drop_indexes_by_name_pattern_list_and_star() {
    let s = TestServer::start();
    let db = s.client().await.database("dr");
    insert(&db, "c", vec![doc! {"_id": 1, "u": 1}]).await;
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_1"},
            doc! {"key": {"b": -1}, "name": "b_-1"},
            doc! {"key": {"c": 1}, "name": "c_1"},
            doc! {"key": {"d": 1}, "name": "d_1"},
            doc! {"key": {"e": 1}, "name": "e_1"},
            doc! {"key": {"u": 1}, "name": "u_1", "unique": true},
        ],
    )
    .await;
    let r = cmd(&db, doc! {"dropIndexes": "c", "index": "a_1"}).await;
    assert_doc(&r, &doc! {"nIndexesWas": 7, "ok": 1.0});
    let r = cmd(&db, doc! {"dropIndexes": "c", "index": {"b": -1}}).await;
    assert_doc(&r, &doc! {"nIndexesWas": 6, "ok": 1.0});
    let r = cmd(&db, doc! {"dropIndexes": "c", "index": ["c_1", "d_1"]}).await;
    assert_doc(&r, &doc! {"nIndexesWas": 5, "ok": 1.0});
    assert_eq!(index_names(&db, "c").await, ["_id_", "e_1", "u_1"]);

    let m = expect_code(
        cmd_err(&db, doc! {"dropIndexes": "c", "index": "_id_"}).await,
        72,
        "InvalidOptions",
    );
    assert_eq!(m, "cannot drop _id index");
    expect_code(
        cmd_err(&db, doc! {"dropIndexes": "c", "index": {"_id": 1}}).await,
        72,
        "InvalidOptions",
    );
    expect_code(
        cmd_err(&db, doc! {"dropIndexes": "c", "index": ["e_1", "_id_"]}).await,
        72,
        "InvalidOptions",
    );
    let m = expect_code(
        cmd_err(&db, doc! {"dropIndexes": "c", "index": "nope"}).await,
        27,
        "IndexNotFound",
    );
    assert_eq!(m, "index not found with name [nope]");
    let m = expect_code(
        cmd_err(&db, doc! {"dropIndexes": "c", "index": {"z": 1}}).await,
        27,
        "IndexNotFound",
    );
    assert_eq!(m, "can't find index with key: { z: 1 }");
    expect_code(
        cmd_err(&db, doc! {"dropIndexes": "c", "index": ["e_1", "nope"]}).await,
        27,
        "IndexNotFound",
    );
    expect_code(
        cmd_err(&db, doc! {"dropIndexes": "c", "index": 5}).await,
        14,
        "TypeMismatch",
    );
    expect_code(
        cmd_err(&db, doc! {"dropIndexes": "c", "index": [1]}).await,
        14,
        "TypeMismatch",
    );
    expect_code(
        cmd_err(&db, doc! {"dropIndexes": "c"}).await,
        40414,
        "Location40414",
    );
    let m = expect_code(
        cmd_err(&db, doc! {"dropIndexes": "missing", "index": "a_1"}).await,
        26,
        "NamespaceNotFound",
    );
    assert_eq!(m, "ns not found dr.missing");
    // Nothing was dropped by the refused requests.
    assert_eq!(index_names(&db, "c").await, ["_id_", "e_1", "u_1"]);

    // The alias.
    let r = cmd(&db, doc! {"deleteIndexes": "c", "index": "e_1"}).await;
    assert_doc(&r, &doc! {"nIndexesWas": 3, "ok": 1.0});
    // A dropped unique index no longer constrains.
    let r = insert(&db, "c", vec![doc! {"_id": 2, "u": 1}]).await;
    assert_eq!(write_errors(&r).len(), 1);
    let r = cmd(&db, doc! {"dropIndexes": "c", "index": "*"}).await;
    assert_eq!(r.get_i32("nIndexesWas").unwrap(), 2);
    assert_eq!(index_names(&db, "c").await, ["_id_"]);
    let r = insert(&db, "c", vec![doc! {"_id": 3, "u": 1}]).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    // "*" with only the _id index left.
    let r = cmd(&db, doc! {"dropIndexes": "c", "index": "*"}).await;
    assert_eq!(r.get_i32("nIndexesWas").unwrap(), 1);
    // The _id index itself still works.
    let r = insert(&db, "c", vec![doc! {"_id": 1}]).await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 11000);
}

/// `dropIndexes "*"` answers `{nIndexesWas, msg: "non-_id indexes dropped for collection",
/// ok}` (`DropIndexesReply`, `reply->setMsg(...)` in `drop_indexes.cpp`).
#[tokio::test]
async fn drop_indexes_star_reply() {
    let s = TestServer::start();
    let db = s.client().await.database("drs");
    create(&db, "c", vec![doc! {"key": {"a": 1}, "name": "a_1"}]).await;
    let r = cmd(&db, doc! {"dropIndexes": "c", "index": "*"}).await;
    assert_doc(
        &r,
        &doc! {"nIndexesWas": 2, "msg": "non-_id indexes dropped for collection", "ok": 1.0},
    );
}

/// A key pattern shared by two indexes is AmbiguousIndexKeyPattern (181) for dropIndexes
/// (`getDescriptorByKeyPattern`).
#[tokio::test]
async fn drop_indexes_ambiguous_key_pattern() {
    let s = TestServer::start();
    let db = s.client().await.database("dra");
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_1"},
            doc! {"key": {"a": 1}, "name": "a_part", "partialFilterExpression": {"a": {"$gt": 0}}},
        ],
    )
    .await;
    expect_code(
        cmd_err(&db, doc! {"dropIndexes": "c", "index": {"a": 1}}).await,
        181,
        "AmbiguousIndexKeyPattern",
    );
    assert_eq!(index_names(&db, "c").await, ["_id_", "a_1", "a_part"]);
}

// ---------------------------------------------------------------------------------------------
// collMod

/// Hiding and unhiding (by name and by key pattern): the reply reports the change, a no-op
/// reports nothing, the spec gains and loses `hidden`, and a hidden unique index still
/// enforces uniqueness.
#[tokio::test]
async fn coll_mod_hides_and_unhides() {
    let s = TestServer::start();
    let db = s.client().await.database("cmh");
    insert(&db, "c", vec![doc! {"_id": 1, "u": 1}]).await;
    create(
        &db,
        "c",
        vec![doc! {"key": {"u": 1}, "name": "u_1", "unique": true}],
    )
    .await;
    let r = cmd(
        &db,
        doc! {"collMod": "c", "index": {"name": "u_1", "hidden": true}},
    )
    .await;
    assert_doc(
        &r,
        &doc! {"hidden_old": false, "hidden_new": true, "ok": 1.0},
    );
    assert_doc(
        &specs(&db, "c").await[1],
        &doc! {"v": 2, "key": {"u": 1}, "name": "u_1", "unique": true, "hidden": true},
    );
    let r = insert(&db, "c", vec![doc! {"_id": 2, "u": 1}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, "cmh.c", "u_1", doc! {"u": 1}, doc! {"u": 1})],
    );
    // Hiding a hidden index is a no-op with an empty reply.
    let r = cmd(
        &db,
        doc! {"collMod": "c", "index": {"name": "u_1", "hidden": true}},
    )
    .await;
    assert_doc(&r, &doc! {"ok": 1.0});
    let r = cmd(
        &db,
        doc! {"collMod": "c", "index": {"keyPattern": {"u": 1}, "hidden": false}},
    )
    .await;
    assert_doc(
        &r,
        &doc! {"hidden_old": true, "hidden_new": false, "ok": 1.0},
    );
    // (MongoDB removes the field; that is checked in coll_mod_unhide_removes_hidden_field.)
    let spec = &specs(&db, "c").await[1];
    assert_ne!(spec.get("hidden"), Some(&Bson::Boolean(true)), "{spec}");
    let r = insert(&db, "c", vec![doc! {"_id": 3, "u": 1}]).await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 11000);
    let coll = db.collection::<Document>("c");
    assert_docs(
        &find(&coll, doc! {"u": 1, "_id": 1}).await,
        &[doc! {"_id": 1, "u": 1}],
    );
}

/// Hiding then unhiding leaves no `hidden` field: `updateHiddenSetting(false)` removes it.
#[tokio::test]
async fn coll_mod_unhide_removes_hidden_field() {
    let s = TestServer::start();
    let db = s.client().await.database("cmu");
    create(&db, "c", vec![doc! {"key": {"a": 1}, "name": "a_1"}]).await;
    cmd(
        &db,
        doc! {"collMod": "c", "index": {"name": "a_1", "hidden": true}},
    )
    .await;
    cmd(
        &db,
        doc! {"collMod": "c", "index": {"name": "a_1", "hidden": false}},
    )
    .await;
    assert_doc(
        &specs(&db, "c").await[1],
        &doc! {"v": 2, "key": {"a": 1}, "name": "a_1"},
    );
}

/// Changing a TTL: the reply carries `expireAfterSeconds_old`/`_new` (64-bit integers, from
/// `boost::optional<long long>` in `processCollModIndexRequest`), and the listed spec the new
/// value (a 32-bit `safeInt` in the `listIndexes` IDL).
#[tokio::test]
async fn coll_mod_changes_expire_after_seconds() {
    let s = TestServer::start();
    let db = s.client().await.database("cmt");
    create(
        &db,
        "c",
        vec![doc! {"key": {"at": 1}, "name": "at_1", "expireAfterSeconds": 100}],
    )
    .await;
    let r = cmd(
        &db,
        doc! {"collMod": "c", "index": {"keyPattern": {"at": 1}, "expireAfterSeconds": 200}},
    )
    .await;
    assert_doc(
        &r,
        &doc! {"expireAfterSeconds_old": 100_i64, "expireAfterSeconds_new": 200_i64, "ok": 1.0},
    );
    assert_doc(
        &specs(&db, "c").await[1],
        &doc! {"v": 2, "key": {"at": 1}, "name": "at_1", "expireAfterSeconds": 200},
    );
}

/// The TTL change as far as Cairn matches it: both fields are reported, the new value is
/// stored and listed.
#[tokio::test]
async fn coll_mod_changes_expire_after_seconds_values() {
    let s = TestServer::start();
    let db = s.client().await.database("cmv");
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"at": 1}, "name": "at_1", "expireAfterSeconds": 100},
            doc! {"key": {"b": 1}, "name": "b_1", "expireAfterSeconds": 5},
        ],
    )
    .await;
    let r = cmd(
        &db,
        doc! {"collMod": "c", "index": {"name": "at_1", "expireAfterSeconds": 200}},
    )
    .await;
    let keys: Vec<&str> = r.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["expireAfterSeconds_old", "expireAfterSeconds_new", "ok"]
    );
    assert_eq!(as_i64(r.get("expireAfterSeconds_old")), 100);
    assert_eq!(as_i64(r.get("expireAfterSeconds_new")), 200);
    let spec = &specs(&db, "c").await[1];
    assert_eq!(as_i64(spec.get("expireAfterSeconds")), 200);
    // Both options at once: a no-op `hidden` is left out of the reply.
    let r = cmd(
        &db,
        doc! {"collMod": "c", "index": {"name": "b_1", "expireAfterSeconds": 10, "hidden": false}},
    )
    .await;
    let keys: Vec<&str> = r.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["expireAfterSeconds_old", "expireAfterSeconds_new", "ok"]
    );
    assert_eq!(as_i64(r.get("expireAfterSeconds_new")), 10);
}

/// Since 5.1 collMod turns a non-TTL single-field index into a TTL index (reply:
/// `expireAfterSeconds_new` only).
#[tokio::test]
async fn coll_mod_converts_index_to_ttl() {
    let s = TestServer::start();
    let db = s.client().await.database("cmc");
    create(&db, "c", vec![doc! {"key": {"at": 1}, "name": "at_1"}]).await;
    let r = cmd(
        &db,
        doc! {"collMod": "c", "index": {"name": "at_1", "expireAfterSeconds": 60}},
    )
    .await;
    assert_doc(&r, &doc! {"expireAfterSeconds_new": 60_i64, "ok": 1.0});
    assert_doc(
        &specs(&db, "c").await[1],
        &doc! {"v": 2, "key": {"at": 1}, "name": "at_1", "expireAfterSeconds": 60},
    );
}

/// collMod's index errors.
#[tokio::test]
async fn coll_mod_index_errors() {
    let s = TestServer::start();
    let db = s.client().await.database("cme");
    create(&db, "c", vec![doc! {"key": {"a": 1}, "name": "a_1"}]).await;
    let m = expect_code(
        cmd_err(
            &db,
            doc! {"collMod": "c", "index": {"name": "_id_", "hidden": true}},
        )
        .await,
        2,
        "BadValue",
    );
    assert_eq!(m, "can't hide _id index");
    let m = expect_code(
        cmd_err(
            &db,
            doc! {"collMod": "c", "index": {"name": "nope", "hidden": true}},
        )
        .await,
        27,
        "IndexNotFound",
    );
    assert_eq!(m, "cannot find index nope for ns cme.c");
    expect_code(
        cmd_err(
            &db,
            doc! {"collMod": "c", "index": {"keyPattern": {"z": 1}, "hidden": true}},
        )
        .await,
        27,
        "IndexNotFound",
    );
    expect_code(
        cmd_err(
            &db,
            doc! {"collMod": "missing", "index": {"name": "a_1", "hidden": true}},
        )
        .await,
        26,
        "NamespaceNotFound",
    );
    expect_code(
        cmd_err(
            &db,
            doc! {"collMod": "c", "index": {"name": "a_1", "hidden": "yes"}},
        )
        .await,
        14,
        "TypeMismatch",
    );
    assert_doc(
        &specs(&db, "c").await[1],
        &doc! {"v": 2, "key": {"a": 1}, "name": "a_1"},
    );
}

/// A key pattern shared by two indexes is AmbiguousIndexKeyPattern (181) for collMod too.
#[tokio::test]
async fn coll_mod_ambiguous_key_pattern() {
    let s = TestServer::start();
    let db = s.client().await.database("cma");
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_1"},
            doc! {"key": {"a": 1}, "name": "a_part", "partialFilterExpression": {"a": {"$gt": 0}}},
        ],
    )
    .await;
    expect_code(
        cmd_err(
            &db,
            doc! {"collMod": "c", "index": {"keyPattern": {"a": 1}, "hidden": true}},
        )
        .await,
        181,
        "AmbiguousIndexKeyPattern",
    );
    assert_doc(
        &specs(&db, "c").await[1],
        &doc! {"v": 2, "key": {"a": 1}, "name": "a_1"},
    );
}

/// collMod's refusals in `parseCollModRequest` order and wording: the TTL range before the
/// index lookup, no TTL on `_id` or compound indexes, name xor key pattern; and both
/// ambiguity messages, which name the first two indexes by their catalog specifications
/// (collMod: "Conflicting indexes:" without a space, dropIndexes: with one).
#[tokio::test]
async fn coll_mod_refusals_and_ambiguity_messages() {
    let s = TestServer::start();
    let db = s.client().await.database("cmr");
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"p": 1, "q": 1}, "name": "p_1_q_1"},
            doc! {"key": {"a": 1}, "name": "a_1"},
            doc! {"key": {"a": 1}, "name": "a_part", "partialFilterExpression": {"a": {"$gt": 0}}},
        ],
    )
    .await;
    let cases = [
        (
            doc! {"name": "_id_", "expireAfterSeconds": 10},
            "the _id field does not support TTL indexes",
        ),
        (
            doc! {"name": "p_1_q_1", "expireAfterSeconds": 10},
            "TTL indexes are single-field indexes, compound indexes do not support TTL",
        ),
        (
            doc! {"name": "nope", "expireAfterSeconds": -1},
            "TTL index 'expireAfterSeconds' option cannot be less than 0",
        ),
        (
            doc! {"name": "a_1", "keyPattern": {"a": 1}, "hidden": true},
            "Cannot specify both key pattern and name.",
        ),
        (
            doc! {"hidden": true},
            "Must specify either index name or key pattern.",
        ),
        (
            doc! {"name": "a_1"},
            "no expireAfterSeconds, hidden, unique, or prepareUnique field",
        ),
    ];
    for (index, message) in cases {
        let m = expect_code(
            cmd_err(&db, doc! {"collMod": "c", "index": index.clone()}).await,
            72,
            "InvalidOptions",
        );
        assert_eq!(m, message, "{index}");
    }
    let shown = "{ v: 2, key: { a: 1 }, name: \"a_1\" }, { v: 2, key: { a: 1 }, name: \"a_part\", \
                 partialFilterExpression: { a: { $gt: 0 } } }";
    let m = expect_code(
        cmd_err(
            &db,
            doc! {"collMod": "c", "index": {"keyPattern": {"a": 1}, "expireAfterSeconds": 5}},
        )
        .await,
        181,
        "AmbiguousIndexKeyPattern",
    );
    assert_eq!(
        m,
        format!(
            "index keyPattern {{ a: 1 }} matches 2 indexes, must use index name. Conflicting \
             indexes:{shown}"
        )
    );
    let m = expect_code(
        cmd_err(&db, doc! {"dropIndexes": "c", "index": {"a": 1}}).await,
        181,
        "AmbiguousIndexKeyPattern",
    );
    assert_eq!(
        m,
        format!(
            "2 indexes found for key: {{ a: 1 }}, identify by name instead. Conflicting \
             indexes: {shown}"
        )
    );
    // Nothing changed.
    assert_docs(
        &specs(&db, "c").await[1..],
        &[
            doc! {"v": 2, "key": {"p": 1, "q": 1}, "name": "p_1_q_1"},
            doc! {"v": 2, "key": {"a": 1}, "name": "a_1"},
            doc! {"v": 2, "key": {"a": 1}, "name": "a_part", "partialFilterExpression": {"a": {"$gt": 0}}},
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// unique indexes

/// A write error entry is `{index, code, errmsg, …extra info}` (`WriteError::serialize` in
/// `write_ops.cpp`): no `codeName`.
#[tokio::test]
async fn write_error_entries_have_no_code_name() {
    let s = TestServer::start();
    let db = s.client().await.database("we");
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_1", "unique": true},
            doc! {"key": {"p": 1, "q": 1}, "name": "p_1_q_1"},
        ],
    )
    .await;
    insert(&db, "c", vec![doc! {"_id": 1, "a": 1}]).await;
    let r = insert(&db, "c", vec![doc! {"_id": 2, "a": 1}]).await;
    assert_docs(
        &raw_write_errors(&r),
        &[dup_error(0, "we.c", "a_1", doc! {"a": 1}, doc! {"a": 1})],
    );
    let r = insert(&db, "c", vec![doc! {"_id": 3, "a": 3, "p": [1], "q": [2]}]).await;
    assert_docs(
        &raw_write_errors(&r),
        &[doc! {"index": 0, "code": 171, "errmsg": "cannot index parallel arrays [q] [p]"}],
    );
}

/// Duplicate inserts: the raw write error, numbers of different types comparing equal,
/// ordered and unordered batches, descending patterns.
#[tokio::test]
async fn unique_insert_duplicates() {
    let s = TestServer::start();
    let db = s.client().await.database("uq");
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_1", "unique": true},
            doc! {"key": {"d": -1}, "name": "d_-1", "unique": true, "sparse": true},
        ],
    )
    .await;
    let r = insert(&db, "c", vec![doc! {"_id": 1, "a": 1, "d": "x"}]).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    let r = insert(&db, "c", vec![doc! {"_id": 2, "a": 1}]).await;
    assert_eq!(r.get_i32("n").unwrap(), 0);
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, "uq.c", "a_1", doc! {"a": 1}, doc! {"a": 1})],
    );
    // 1, 1.0 and 1L are the same key; the reported value is the new document's.
    let r = insert(&db, "c", vec![doc! {"_id": 3, "a": 1.0}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, "uq.c", "a_1", doc! {"a": 1}, doc! {"a": 1.0})],
    );
    let r = insert(&db, "c", vec![doc! {"_id": 4, "a": 1_i64}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(
            0,
            "uq.c",
            "a_1",
            doc! {"a": 1},
            doc! {"a": 1_i64},
        )],
    );
    let r = insert(&db, "c", vec![doc! {"_id": 5, "a": 2, "d": "x"}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(
            0,
            "uq.c",
            "d_-1",
            doc! {"d": -1},
            doc! {"d": "x"},
        )],
    );
    // Ordered batches stop at the first duplicate, unordered ones go on.
    let r = cmd(
        &db,
        doc! {"insert": "c", "documents": [{"_id": 10, "a": 10}, {"_id": 11, "a": 10}, {"_id": 12, "a": 12}]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
    assert_docs(
        &write_errors(&r),
        &[dup_error(1, "uq.c", "a_1", doc! {"a": 1}, doc! {"a": 10})],
    );
    let r = cmd(
        &db,
        doc! {"insert": "c", "ordered": false, "documents": [{"_id": 13, "a": 10}, {"_id": 14, "a": 14}, {"_id": 15, "a": 14}]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
    let errs = write_errors(&r);
    let at: Vec<i32> = errs.iter().map(|e| e.get_i32("index").unwrap()).collect();
    assert_eq!(at, [0, 2]);
    let coll = db.collection::<Document>("c");
    assert_eq!(
        ids(&coll, doc! {"_id": {"$in": [1, 10, 12, 14]}}).await,
        int_ids(&[1, 10, 14])
    );
    // The driver's typed API: single and bulk inserts.
    let e = coll.insert_one(doc! {"a": 14}).await.unwrap_err();
    assert_eq!(code_of(&e), 11000);
    let e = coll
        .insert_many(vec![doc! {"a": 100}, doc! {"a": 100}])
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 11000);
}

/// Multikey unique indexes: every array element is a key; one document may repeat a value.
#[tokio::test]
async fn unique_multikey() {
    let s = TestServer::start();
    let db = s.client().await.database("um");
    create(
        &db,
        "c",
        vec![doc! {"key": {"a": 1}, "name": "a_1", "unique": true}],
    )
    .await;
    let ok = insert(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "a": [1, 2]},
            doc! {"_id": 3, "a": [4, 4]},
            doc! {"_id": 4, "a": [5, 5, 5]},
            doc! {"_id": 6, "a": [[1]]},
        ],
    )
    .await;
    assert!(write_errors(&ok).is_empty(), "{ok}");
    let r = insert(&db, "c", vec![doc! {"_id": 2, "a": [2, 3]}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, "um.c", "a_1", doc! {"a": 1}, doc! {"a": 2})],
    );
    let r = insert(&db, "c", vec![doc! {"_id": 5, "a": 4}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, "um.c", "a_1", doc! {"a": 1}, doc! {"a": 4})],
    );
    // A nested array is one key, compared as a whole.
    let r = insert(&db, "c", vec![doc! {"_id": 7, "a": [[1]]}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, "um.c", "a_1", doc! {"a": 1}, doc! {"a": [1]})],
    );
    // An update that adds a taken element fails and changes nothing.
    let r = cmd(
        &db,
        doc! {"update": "c", "updates": [{"q": {"_id": 3}, "u": {"$push": {"a": 1}}}]},
    )
    .await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, "um.c", "a_1", doc! {"a": 1}, doc! {"a": 1})],
    );
    let coll = db.collection::<Document>("c");
    assert_docs(
        &find(&coll, doc! {"_id": 3}).await,
        &[doc! {"_id": 3, "a": [4, 4]}],
    );
    // Removing an element frees it.
    cmd(
        &db,
        doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$pull": {"a": 2}}}]},
    )
    .await;
    let r = insert(&db, "c", vec![doc! {"_id": 20, "a": [2, 3]}]).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    assert_docs(
        &find(&coll, doc! {"_id": {"$in": [1, 20]}}).await,
        &[doc! {"_id": 1, "a": [1]}, doc! {"_id": 20, "a": [2, 3]}],
    );
}

/// An empty array is indexed as `undefined` (`BtreeKeyGenerator`), so two documents with
/// `a: []` collide on a unique index.
#[tokio::test]
async fn unique_multikey_empty_arrays() {
    let s = TestServer::start();
    let db = s.client().await.database("ue");
    create(
        &db,
        "c",
        vec![doc! {"key": {"a": 1}, "name": "a_1", "unique": true}],
    )
    .await;
    insert(&db, "c", vec![doc! {"_id": 1, "a": []}, doc! {"_id": 2}]).await;
    let r = insert(&db, "c", vec![doc! {"_id": 3, "a": []}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(
            0,
            "ue.c",
            "a_1",
            doc! {"a": 1},
            doc! {"a": Bson::Undefined},
        )],
    );
    // null and undefined are different keys: `{_id: 2}` (null) did not collide with `[]`.
    let r = insert(&db, "c", vec![doc! {"_id": 4, "a": null}]).await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 11000);
    let r = insert(&db, "c", vec![doc! {"_id": 5, "a": [[]]}]).await;
    assert!(write_errors(&r).is_empty(), "{r}");
}

/// unique + sparse: documents without the field are not indexed; explicit nulls are.
#[tokio::test]
async fn unique_sparse_and_missing_fields() {
    let s = TestServer::start();
    let db = s.client().await.database("us");
    create(
        &db,
        "sp",
        vec![doc! {"key": {"a": 1}, "name": "a_1", "unique": true, "sparse": true}],
    )
    .await;
    let r = insert(
        &db,
        "sp",
        vec![
            doc! {"_id": 1},
            doc! {"_id": 2},
            doc! {"_id": 3, "b": 1},
            doc! {"_id": 4, "a": null},
        ],
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 4);
    let r = insert(&db, "sp", vec![doc! {"_id": 5, "a": null}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(
            0,
            "us.sp",
            "a_1",
            doc! {"a": 1},
            doc! {"a": null},
        )],
    );
    insert(&db, "sp", vec![doc! {"_id": 6, "a": 1}]).await;
    let r = insert(&db, "sp", vec![doc! {"_id": 7, "a": 1}]).await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 11000);
    // Setting the field on an unindexed document makes it indexed.
    let r = cmd(
        &db,
        doc! {"update": "sp", "updates": [{"q": {"_id": 1}, "u": {"$set": {"a": 1}}}]},
    )
    .await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 11000);
    // Without sparse, a missing field is a null key: the second such document collides.
    create(
        &db,
        "dense",
        vec![doc! {"key": {"a": 1}, "name": "a_1", "unique": true}],
    )
    .await;
    insert(&db, "dense", vec![doc! {"_id": 1}]).await;
    let r = insert(&db, "dense", vec![doc! {"_id": 2}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(
            0,
            "us.dense",
            "a_1",
            doc! {"a": 1},
            doc! {"a": null},
        )],
    );
    let r = insert(&db, "dense", vec![doc! {"_id": 3, "a": null}]).await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 11000);
}

/// unique + partialFilterExpression: only matching documents are constrained, and an update
/// that brings a document into the filter is checked.
#[tokio::test]
async fn unique_partial() {
    let s = TestServer::start();
    let db = s.client().await.database("up");
    create(
        &db,
        "c",
        vec![doc! {
            "key": {"email": 1},
            "name": "email_1",
            "unique": true,
            "partialFilterExpression": {"active": true},
        }],
    )
    .await;
    let r = insert(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "email": "x", "active": true},
            doc! {"_id": 2, "email": "x", "active": false},
            doc! {"_id": 3, "email": "x"},
            doc! {"_id": 5, "active": true},
            doc! {"_id": 6, "active": false},
            doc! {"_id": 7, "active": false},
        ],
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 6);
    let r = insert(
        &db,
        "c",
        vec![doc! {"_id": 4, "email": "x", "active": true}],
    )
    .await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(
            0,
            "up.c",
            "email_1",
            doc! {"email": 1},
            doc! {"email": "x"},
        )],
    );
    // Two matching documents without the field collide on null.
    let r = insert(&db, "c", vec![doc! {"_id": 8, "active": true}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(
            0,
            "up.c",
            "email_1",
            doc! {"email": 1},
            doc! {"email": null},
        )],
    );
    // Entering the filter is checked; leaving it frees the key.
    let activate =
        doc! {"update": "c", "updates": [{"q": {"_id": 2}, "u": {"$set": {"active": true}}}]};
    let r = cmd(&db, activate.clone()).await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 11000);
    let coll = db.collection::<Document>("c");
    assert_docs(
        &find(&coll, doc! {"_id": 2}).await,
        &[doc! {"_id": 2, "email": "x", "active": false}],
    );
    cmd(
        &db,
        doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"active": false}}}]},
    )
    .await;
    let r = cmd(&db, activate).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    assert_eq!(
        ids(
            &coll,
            doc! {"_id": {"$in": [1, 2, 3, 5, 6, 7]}, "active": true}
        )
        .await,
        int_ids(&[2, 5])
    );
}

/// Compound unique indexes: the whole tuple must repeat; missing fields are nulls.
#[tokio::test]
async fn unique_compound() {
    let s = TestServer::start();
    let db = s.client().await.database("uc");
    create(
        &db,
        "c",
        vec![doc! {"key": {"a": 1, "b": -1}, "name": "a_1_b_-1", "unique": true}],
    )
    .await;
    let r = insert(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "a": 1, "b": 1},
            doc! {"_id": 2, "a": 1, "b": 2},
            doc! {"_id": 3, "a": 2, "b": 1},
            doc! {"_id": 5, "a": 3},
        ],
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 4);
    let pattern = doc! {"a": 1, "b": -1};
    let r = insert(&db, "c", vec![doc! {"_id": 4, "a": 1, "b": 1}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(
            0,
            "uc.c",
            "a_1_b_-1",
            pattern.clone(),
            doc! {"a": 1, "b": 1},
        )],
    );
    let r = insert(&db, "c", vec![doc! {"_id": 6, "a": 3, "b": null}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(
            0,
            "uc.c",
            "a_1_b_-1",
            pattern.clone(),
            doc! {"a": 3, "b": null},
        )],
    );
    let r = insert(&db, "c", vec![doc! {"_id": 7, "a": 1.0, "b": 2_i64}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(
            0,
            "uc.c",
            "a_1_b_-1",
            pattern,
            doc! {"a": 1.0, "b": 2_i64},
        )],
    );
    // Multikey in one field of the compound.
    let r = insert(&db, "c", vec![doc! {"_id": 8, "a": 9, "b": [1, 2]}]).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    let r = insert(&db, "c", vec![doc! {"_id": 9, "a": 9, "b": [2, 3]}]).await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 11000);
}

/// A unique build over duplicates fails with 11000 and leaves no index; the data is intact.
#[tokio::test]
async fn unique_build_over_duplicates_fails() {
    let s = TestServer::start();
    let db = s.client().await.database("ub");
    insert(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "a": 1},
            doc! {"_id": 2, "a": 1},
            doc! {"_id": 3, "a": 2},
        ],
    )
    .await;
    let m = expect_code(
        create_err(
            &db,
            "c",
            vec![doc! {"key": {"a": 1}, "name": "a_1", "unique": true}],
        )
        .await,
        11000,
        "DuplicateKey",
    );
    assert!(
        m.contains("E11000 duplicate key error collection: ub.c index: a_1 dup key: { a: 1 }"),
        "{m}"
    );
    assert_eq!(index_names(&db, "c").await, ["_id_"]);
    assert_eq!(count(&db, "c", doc! {}).await, 3);
    // Later writes are not constrained by the failed build; a non-unique build works.
    let r = insert(&db, "c", vec![doc! {"_id": 4, "a": 2}]).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    create(&db, "c", vec![doc! {"key": {"a": 1}, "name": "a_1"}]).await;
    assert_eq!(index_names(&db, "c").await, ["_id_", "a_1"]);
    // Two documents without the field are two nulls; sparse skips them.
    insert(&db, "n", vec![doc! {"_id": 1}, doc! {"_id": 2}]).await;
    let m = expect_code(
        create_err(
            &db,
            "n",
            vec![doc! {"key": {"a": 1}, "name": "a_1", "unique": true}],
        )
        .await,
        11000,
        "DuplicateKey",
    );
    assert!(m.contains("dup key: { a: null }"), "{m}");
    create(
        &db,
        "n",
        vec![doc! {"key": {"a": 1}, "name": "a_1", "unique": true, "sparse": true}],
    )
    .await;
    assert_eq!(index_names(&db, "n").await, ["_id_", "a_1"]);
    // The failed build is not half-there: unique again over distinct values succeeds.
    cmd(
        &db,
        doc! {"delete": "c", "deletes": [{"q": {"_id": {"$in": [2, 4]}}, "limit": 0}]},
    )
    .await;
    cmd(&db, doc! {"dropIndexes": "c", "index": "a_1"}).await;
    create(
        &db,
        "c",
        vec![doc! {"key": {"a": 1}, "name": "a_1", "unique": true}],
    )
    .await;
    let r = insert(&db, "c", vec![doc! {"_id": 5, "a": 2}]).await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 11000);
}

/// Updates, replacements and findAndModify that would duplicate a key fail with 11000 and
/// leave the documents as they were.
#[tokio::test]
async fn unique_updates_that_would_duplicate() {
    let s = TestServer::start();
    let db = s.client().await.database("uu");
    create(
        &db,
        "c",
        vec![doc! {"key": {"u": 1}, "name": "u_1", "unique": true}],
    )
    .await;
    insert(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "u": 1, "x": "a"},
            doc! {"_id": 2, "u": 2, "x": "b"},
        ],
    )
    .await;
    let before = find(&db.collection::<Document>("c"), doc! {}).await;
    let r = cmd(
        &db,
        doc! {"update": "c", "updates": [{"q": {"_id": 2}, "u": {"$set": {"u": 1, "x": "changed"}}}]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 0);
    assert_eq!(r.get_i32("nModified").unwrap(), 0);
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, "uu.c", "u_1", doc! {"u": 1}, doc! {"u": 1})],
    );
    // Replacement.
    let r = cmd(
        &db,
        doc! {"update": "c", "updates": [{"q": {"_id": 2}, "u": {"u": 1, "x": "r"}}]},
    )
    .await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, "uu.c", "u_1", doc! {"u": 1}, doc! {"u": 1})],
    );
    // findAndModify and the driver's typed API.
    expect_code(
        cmd_err(
            &db,
            doc! {"findAndModify": "c", "query": {"_id": 2}, "update": {"$set": {"u": 1}}},
        )
        .await,
        11000,
        "DuplicateKey",
    );
    let coll = db.collection::<Document>("c");
    let e = coll
        .update_one(doc! {"_id": 1}, doc! {"$inc": {"u": 1}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 11000);
    let e = coll
        .replace_one(doc! {"_id": 1}, doc! {"u": 2})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 11000);
    assert_docs(&find(&coll, doc! {}).await, &before);
    // Swapping through a free value works.
    coll.update_one(doc! {"_id": 1}, doc! {"$set": {"u": 3}})
        .await
        .unwrap();
    coll.update_one(doc! {"_id": 2}, doc! {"$set": {"u": 1}})
        .await
        .unwrap();
    assert_docs(
        &find(&coll, doc! {}).await,
        &[
            doc! {"_id": 1, "u": 3, "x": "a"},
            doc! {"_id": 2, "u": 1, "x": "b"},
        ],
    );
}

/// An upsert whose new document would duplicate a unique key is a write error like an insert
/// (`{n: 0, nModified: 0, writeErrors: [E11000 …]}`), and inserts nothing.
#[tokio::test]
async fn upsert_duplicating_a_unique_key() {
    let s = TestServer::start();
    let db = s.client().await.database("uups");
    create(
        &db,
        "c",
        vec![doc! {"key": {"u": 1}, "name": "u_1", "unique": true}],
    )
    .await;
    insert(&db, "c", vec![doc! {"_id": 1, "u": 1}]).await;
    let r = cmd(
        &db,
        doc! {"update": "c", "updates": [{"q": {"_id": 2}, "u": {"$set": {"u": 1}}, "upsert": true}]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 0);
    assert!(r.get("upserted").is_none(), "{r}");
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, "uups.c", "u_1", doc! {"u": 1}, doc! {"u": 1})],
    );
    let coll = db.collection::<Document>("c");
    assert_eq!(ids(&coll, doc! {}).await, int_ids(&[1]));
    let e = coll
        .update_one(doc! {"_id": 3}, doc! {"$set": {"u": 1}})
        .upsert(true)
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 11000);
}

/// An insert refused by a secondary index (duplicate key, parallel arrays, hashed array)
/// stores nothing: the document is not found, its `_id` stays free, `count` agrees with
/// `find`.
#[tokio::test]
async fn refused_inserts_store_nothing() {
    let s = TestServer::start();
    let db = s.client().await.database("orph");
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_1", "unique": true},
            doc! {"key": {"p": 1, "q": 1}, "name": "p_1_q_1"},
            doc! {"key": {"h": "hashed"}, "name": "h_hashed"},
        ],
    )
    .await;
    insert(&db, "c", vec![doc! {"_id": 1, "a": 1}]).await;
    let codes = |r: &Document| -> Vec<i32> {
        write_errors(r)
            .iter()
            .map(|e| e.get_i32("code").unwrap())
            .collect()
    };
    let r = insert(&db, "c", vec![doc! {"_id": 2, "a": 1}]).await;
    assert_eq!(codes(&r), [11000]);
    let r = insert(&db, "c", vec![doc! {"_id": 3, "a": 3, "p": [1], "q": [2]}]).await;
    assert_eq!(codes(&r), [171]);
    let r = insert(&db, "c", vec![doc! {"_id": 4, "a": 4, "h": [1]}]).await;
    assert_eq!(codes(&r), [16766]);
    let r = cmd(
        &db,
        doc! {"insert": "c", "documents": [{"_id": 5, "a": 5}, {"_id": 6, "a": 5}, {"_id": 7, "a": 7}]},
    )
    .await;
    assert_eq!(codes(&r), [11000]);
    let r = cmd(
        &db,
        doc! {"insert": "c", "ordered": false, "documents": [{"_id": 8, "a": 1}, {"_id": 9, "a": 9}]},
    )
    .await;
    assert_eq!(codes(&r), [11000]);
    // A refused multikey document leaves none of its other keys behind.
    let r = insert(&db, "c", vec![doc! {"_id": 10, "a": [10, 1]}]).await;
    assert_eq!(codes(&r), [11000]);
    let r = insert(&db, "c", vec![doc! {"_id": 11, "a": [1, 11]}]).await;
    assert_eq!(codes(&r), [11000]);
    let coll = db.collection::<Document>("c");
    assert_eq!(ids(&coll, doc! {}).await, int_ids(&[1, 5, 9]));
    assert_eq!(count(&db, "c", doc! {}).await, 3);
    assert_eq!(count(&db, "c", doc! {"a": {"$gte": 0}}).await, 3);
    let r = insert(
        &db,
        "c",
        vec![doc! {"_id": 12, "a": 10}, doc! {"_id": 13, "a": 11}],
    )
    .await;
    assert!(write_errors(&r).is_empty(), "{r}");
    let r = insert(
        &db,
        "c",
        vec![
            doc! {"_id": 2, "a": 2},
            doc! {"_id": 3, "a": 3},
            doc! {"_id": 4, "a": 4},
        ],
    )
    .await;
    assert!(write_errors(&r).is_empty(), "{r}");
}

// ---------------------------------------------------------------------------------------------
// multikey and compound key generation

/// `{a: 1, b: 1}` cannot index a document where both are arrays (171), at insert, update and
/// build; paths through one array of documents are fine.
#[tokio::test]
async fn parallel_arrays() {
    let s = TestServer::start();
    let db = s.client().await.database("pa");
    create(
        &db,
        "c",
        vec![doc! {"key": {"a": 1, "b": 1}, "name": "a_1_b_1"}],
    )
    .await;
    let r = insert(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "a": [1, 2], "b": 3},
            doc! {"_id": 2, "a": 1, "b": [1, 2]},
        ],
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 2);
    let r = insert(&db, "c", vec![doc! {"_id": 3, "a": [1, 2], "b": [3, 4]}]).await;
    assert_eq!(r.get_i32("n").unwrap(), 0);
    assert_docs(
        &write_errors(&r),
        &[doc! {"index": 0, "code": 171, "errmsg": "cannot index parallel arrays [b] [a]"}],
    );
    let r = cmd(
        &db,
        doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"b": [5, 6]}}}]},
    )
    .await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 171);
    let coll = db.collection::<Document>("c");
    assert_docs(
        &find(&coll, doc! {"_id": {"$in": [1, 2]}}).await,
        &[
            doc! {"_id": 1, "a": [1, 2], "b": 3},
            doc! {"_id": 2, "a": 1, "b": [1, 2]},
        ],
    );
    // Two paths through the same array are not parallel.
    create(
        &db,
        "same",
        vec![doc! {"key": {"x.y": 1, "x.z": 1}, "name": "x.y_1_x.z_1"}],
    )
    .await;
    let r = insert(
        &db,
        "same",
        vec![doc! {"_id": 1, "x": [{"y": 1, "z": 2}, {"y": 3, "z": 4}]}],
    )
    .await;
    assert!(write_errors(&r).is_empty(), "{r}");
    // A dotted path through one array and another array field are.
    create(
        &db,
        "mixed",
        vec![doc! {"key": {"x.y": 1, "w": 1}, "name": "x.y_1_w_1"}],
    )
    .await;
    let r = insert(
        &db,
        "mixed",
        vec![doc! {"_id": 1, "x": [{"y": 1}], "w": [1, 2]}],
    )
    .await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 171);
    // A build over such a document fails and leaves no index.
    insert(&db, "build", vec![doc! {"_id": 1, "a": [1], "b": [2]}]).await;
    let m = expect_code(
        create_err(
            &db,
            "build",
            vec![doc! {"key": {"a": 1, "b": 1}, "name": "a_1_b_1"}],
        )
        .await,
        171,
        "CannotIndexParallelArrays",
    );
    assert!(m.contains("cannot index parallel arrays [b] [a]"), "{m}");
    assert_eq!(index_names(&db, "build").await, ["_id_"]);
}

/// Dotted paths through arrays of documents, seen through a unique index: each element's
/// value is a key, an element without the field is a null key, nested arrays under the
/// last field are expanded.
#[tokio::test]
async fn dotted_paths_through_arrays() {
    let s = TestServer::start();
    let db = s.client().await.database("dp");
    create(
        &db,
        "c",
        vec![doc! {"key": {"a.b": 1}, "name": "a.b_1", "unique": true}],
    )
    .await;
    let ns = "dp.c";
    let pattern = doc! {"a.b": 1};
    let r = insert(&db, "c", vec![doc! {"_id": 1, "a": [{"b": 1}, {"b": 2}]}]).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    let r = insert(&db, "c", vec![doc! {"_id": 2, "a": {"b": 2}}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, ns, "a.b_1", pattern.clone(), doc! {"a.b": 2})],
    );
    let r = insert(&db, "c", vec![doc! {"_id": 3, "a": [{"b": 3}, {"c": 1}]}]).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    // {c: 1} above gave a null key; so does a document without `a`.
    let r = insert(&db, "c", vec![doc! {"_id": 4, "a": [{"c": 2}]}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(
            0,
            ns,
            "a.b_1",
            pattern.clone(),
            doc! {"a.b": null},
        )],
    );
    let r = insert(&db, "c", vec![doc! {"_id": 5}]).await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 11000);
    let r = insert(&db, "c", vec![doc! {"_id": 7, "a": [{"b": [8, 9]}]}]).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    let r = insert(&db, "c", vec![doc! {"_id": 8, "a": {"b": 9}}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, ns, "a.b_1", pattern, doc! {"a.b": 9})],
    );
    let r = insert(&db, "c", vec![doc! {"_id": 9, "a": {"b": [10, 10]}}]).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    let coll = db.collection::<Document>("c");
    let stored = doc! {"_id": {"$in": [1, 3, 7, 9]}};
    let mut filter = stored.clone();
    filter.insert("a.b", 9);
    assert_eq!(ids(&coll, filter).await, int_ids(&[7]));
    let mut filter = stored;
    filter.insert("a.b", Bson::Null);
    assert_eq!(ids(&coll, filter).await, int_ids(&[3]));
}

// ---------------------------------------------------------------------------------------------
// hashed indexes

/// `{a: "hashed"}`: created and listed, arrays refused (16766) at insert, update and build,
/// no uniqueness (16764), at most one hashed field (31303), compound hashed allowed.
#[tokio::test]
async fn hashed_indexes() {
    let s = TestServer::start();
    let db = s.client().await.database("hs");
    let r = create(
        &db,
        "c",
        vec![doc! {"key": {"a": "hashed"}, "name": "a_hashed"}],
    )
    .await;
    assert_doc(
        &r,
        &doc! {"numIndexesBefore": 1, "numIndexesAfter": 2, "createdCollectionAutomatically": true, "ok": 1.0},
    );
    assert_docs(
        &specs(&db, "c").await,
        &[
            doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"},
            doc! {"v": 2, "key": {"a": "hashed"}, "name": "a_hashed"},
        ],
    );
    let r = insert(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "a": 1},
            doc! {"_id": 2, "a": 1},
            doc! {"_id": 3, "a": {"b": [1]}},
            doc! {"_id": 4},
            doc! {"_id": 5, "a": "text"},
        ],
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 5);
    let r = insert(&db, "c", vec![doc! {"_id": 6, "a": [1, 2]}]).await;
    assert_eq!(r.get_i32("n").unwrap(), 0);
    assert_docs(
        &write_errors(&r),
        &[doc! {
            "index": 0,
            "code": 16766,
            "errmsg": "Error: hashed indexes do not currently support array values. Found array at path: a",
        }],
    );
    let r = cmd(
        &db,
        doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"a": []}}}]},
    )
    .await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 16766);
    let coll = db.collection::<Document>("c");
    assert_docs(
        &find(&coll, doc! {"_id": 1}).await,
        &[doc! {"_id": 1, "a": 1}],
    );
    assert_eq!(
        ids(&coll, doc! {"_id": {"$lte": 5}, "a": 1}).await,
        int_ids(&[1, 2])
    );
    // A dotted hashed path through an array.
    create(
        &db,
        "dot",
        vec![doc! {"key": {"a.b": "hashed"}, "name": "a.b_hashed"}],
    )
    .await;
    let r = insert(&db, "dot", vec![doc! {"_id": 1, "a": [{"b": 1}]}]).await;
    assert_docs(
        &write_errors(&r),
        &[doc! {
            "index": 0,
            "code": 16766,
            "errmsg": "Error: hashed indexes do not currently support array values. Found array at path: a",
        }],
    );
    // Uniqueness and two hashed fields are refused.
    let m = expect_code(
        create_err(
            &db,
            "u",
            vec![doc! {"key": {"a": "hashed"}, "name": "a_hashed", "unique": true}],
        )
        .await,
        16764,
        "Location16764",
    );
    assert_eq!(
        m,
        "Currently hashed indexes cannot guarantee uniqueness. Use a regular index."
    );
    expect_code(
        create_err(
            &db,
            "u",
            vec![doc! {"key": {"a": "hashed", "b": "hashed"}, "name": "two"}],
        )
        .await,
        31303,
        "Location31303",
    );
    // Compound hashed indexes exist since 4.4.
    create(
        &db,
        "comp",
        vec![doc! {"key": {"a": "hashed", "b": 1}, "name": "a_hashed_b_1"}],
    )
    .await;
    let r = insert(&db, "comp", vec![doc! {"_id": 1, "a": 1, "b": 2}]).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    // No field of a compound hashed index may hold an array (`getHashKeys` checks each path).
    let r = insert(&db, "comp", vec![doc! {"_id": 2, "a": [1], "b": 1}]).await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 16766);
    let r = insert(&db, "comp", vec![doc! {"_id": 3, "a": 1, "b": [1, 2]}]).await;
    assert_docs(
        &write_errors(&r),
        &[doc! {
            "index": 0,
            "code": 16766,
            "errmsg": "Error: hashed indexes do not currently support array values. Found array at path: b",
        }],
    );
    // A build over an array value fails and leaves no index.
    insert(&db, "build", vec![doc! {"_id": 1, "a": [1]}]).await;
    expect_code(
        create_err(
            &db,
            "build",
            vec![doc! {"key": {"a": "hashed"}, "name": "a_hashed"}],
        )
        .await,
        16766,
        "Location16766",
    );
    assert_eq!(index_names(&db, "build").await, ["_id_"]);
}

/// Queries over indexed fields return what a collection scan would: nulls and missing fields
/// under sparse and partial indexes, multikey and nested arrays, dotted paths, hidden indexes.
/// (Which plan runs is not checked, only the documents.)
#[tokio::test]
async fn queries_over_indexed_fields() {
    let s = TestServer::start();
    let db = s.client().await.database("qi");
    insert(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "a": 1, "b": "x", "arr": [1, 2], "s": 5, "p": {"q": 1}},
            doc! {"_id": 2, "a": 2, "arr": [], "s": null},
            doc! {"_id": 3, "a": [1, 3], "b": "y", "arr": [[1]], "p": [{"q": 2}, {"q": 3}]},
            doc! {"_id": 4, "b": "x"},
            doc! {"_id": 5, "a": null, "s": 7, "p": {"q": [4, 5]}},
            doc! {"_id": 6, "a": 1.0, "b": null},
        ],
    )
    .await;
    create(
        &db,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_1"},
            doc! {"key": {"s": 1}, "name": "s_1", "sparse": true},
            doc! {"key": {"b": 1}, "name": "b_partial", "partialFilterExpression": {"b": {"$exists": true}}},
            doc! {"key": {"arr": 1}, "name": "arr_1"},
            doc! {"key": {"p.q": 1}, "name": "p.q_1"},
            doc! {"key": {"b": -1, "a": 1}, "name": "b_-1_a_1"},
        ],
    )
    .await;
    let coll = db.collection::<Document>("c");
    let cases: Vec<(Document, Vec<i32>)> = vec![
        (doc! {"a": 1}, vec![1, 3, 6]),
        (doc! {"a": null}, vec![4, 5]),
        (doc! {"a": {"$gt": 1}}, vec![2, 3]),
        (doc! {"a": {"$in": [2, 3]}}, vec![2, 3]),
        (doc! {"a": {"$exists": false}}, vec![4]),
        (doc! {"s": null}, vec![2, 3, 4, 6]),
        (doc! {"s": {"$gte": 5}}, vec![1, 5]),
        (doc! {"s": {"$exists": true}}, vec![1, 2, 5]),
        (doc! {"b": "x"}, vec![1, 4]),
        (doc! {"b": null}, vec![2, 5, 6]),
        (doc! {"b": {"$gte": "x"}}, vec![1, 3, 4]),
        (doc! {"arr": []}, vec![2]),
        (doc! {"arr": 1}, vec![1]),
        (doc! {"arr": [1]}, vec![3]),
        (doc! {"p.q": 3}, vec![3]),
        (doc! {"p.q": 4}, vec![5]),
        (doc! {"p.q": null}, vec![2, 4, 6]),
        (doc! {"b": "x", "a": {"$exists": false}}, vec![4]),
        (doc! {"b": "y", "a": 3}, vec![3]),
        (doc! {"$or": [{"a": 2}, {"s": 7}]}, vec![2, 5]),
    ];
    let check = |hidden: bool| {
        let coll = coll.clone();
        let db = db.clone();
        let cases = cases.clone();
        async move {
            for (filter, want) in cases {
                assert_eq!(
                    ids(&coll, filter.clone()).await,
                    int_ids(&want),
                    "{filter} (hidden: {hidden})"
                );
                let n = count(&db, "c", filter.clone()).await;
                assert_eq!(n, want.len() as i64, "count {filter} (hidden: {hidden})");
            }
        }
    };
    check(false).await;
    // Sorted on an indexed field (null sorts first).
    let mut cursor = coll
        .find(doc! {"s": {"$exists": true}})
        .sort(doc! {"s": 1})
        .await
        .unwrap();
    let mut sorted = Vec::new();
    while cursor.advance().await.unwrap() {
        sorted.push(
            cursor
                .deserialize_current()
                .unwrap()
                .get("_id")
                .unwrap()
                .clone(),
        );
    }
    assert_eq!(sorted, int_ids(&[2, 1, 5]));
    // Hidden indexes change nothing in the results.
    for name in ["a_1", "s_1", "b_partial", "arr_1", "p.q_1", "b_-1_a_1"] {
        cmd(
            &db,
            doc! {"collMod": "c", "index": {"name": name, "hidden": true}},
        )
        .await;
    }
    check(true).await;
}

// ---------------------------------------------------------------------------------------------
// builds over existing data, restart

/// Indexes built over 20,000 existing documents: queries still answer correctly, uniqueness
/// holds, and the indexes (created and dropped) survive a clean restart.
#[tokio::test]
async fn build_over_existing_data_and_restart() {
    const N: i32 = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let expected_specs;
    {
        let mut s = TestServer::start_in(dir.path(), &[]);
        let db = s.client().await.database("big");
        let docs: Vec<Document> = (0..N)
            .map(|i| {
                doc! {
                    "_id": i,
                    "k": i,
                    "g": i % 10,
                    "s": format!("s{:05}", N - 1 - i),
                    "arr": [i, i + 1],
                }
            })
            .collect();
        db.collection::<Document>("c")
            .insert_many(docs)
            .await
            .unwrap();
        let r = create(
            &db,
            "c",
            vec![
                doc! {"key": {"k": 1}, "name": "k_1", "unique": true},
                doc! {"key": {"g": 1, "s": -1}, "name": "g_1_s_-1"},
                doc! {"key": {"arr": 1}, "name": "arr_1"},
                doc! {"key": {"s": 1}, "name": "s_1", "unique": true},
            ],
        )
        .await;
        assert_doc(
            &r,
            &doc! {"numIndexesBefore": 1, "numIndexesAfter": 5, "createdCollectionAutomatically": false, "ok": 1.0},
        );
        let coll = db.collection::<Document>("c");
        assert_eq!(
            ids(&coll, doc! {"k": {"$gte": 100, "$lt": 105}}).await,
            int_ids(&[100, 101, 102, 103, 104])
        );
        assert_eq!(count(&db, "c", doc! {"g": 3}).await, 2000);
        assert_eq!(ids(&coll, doc! {"arr": 7}).await, int_ids(&[6, 7]));
        assert_eq!(
            ids(&coll, doc! {"g": 1, "s": {"$lt": "s00100"}}).await,
            int_ids(&[
                19901, 19911, 19921, 19931, 19941, 19951, 19961, 19971, 19981, 19991
            ])
        );
        let r = insert(&db, "c", vec![doc! {"_id": N, "k": 5, "s": "new"}]).await;
        assert_docs(
            &write_errors(&r),
            &[dup_error(0, "big.c", "k_1", doc! {"k": 1}, doc! {"k": 5})],
        );
        cmd(&db, doc! {"dropIndexes": "c", "index": "s_1"}).await;
        expected_specs = specs(&db, "c").await;
        assert_eq!(
            index_names(&db, "c").await,
            ["_id_", "k_1", "g_1_s_-1", "arr_1"]
        );
        s.signal("TERM");
        assert_eq!(s.wait_exit(Duration::from_secs(20)), Some(0));
    }
    let s = TestServer::start_in(dir.path(), &[]);
    let db = s.client().await.database("big");
    assert_docs(&specs(&db, "c").await, &expected_specs);
    let r = insert(&db, "c", vec![doc! {"_id": N + 1, "k": 5, "s": "s00001"}]).await;
    assert_docs(
        &write_errors(&r),
        &[dup_error(0, "big.c", "k_1", doc! {"k": 1}, doc! {"k": 5})],
    );
    // The dropped unique index on s is gone for good.
    let r = insert(
        &db,
        "c",
        vec![doc! {"_id": N + 2, "k": N + 2, "s": "s00001"}],
    )
    .await;
    assert!(write_errors(&r).is_empty(), "{r}");
    assert_eq!(count(&db, "c", doc! {"g": 3}).await, 2000);
    let coll = db.collection::<Document>("c");
    assert_eq!(
        ids(&coll, doc! {"s": "s00001", "_id": {"$ne": N + 1}}).await,
        int_ids(&[19998, N + 2])
    );
    assert_eq!(
        ids(&coll, doc! {"k": {"$gte": 19_998, "$lt": N}}).await,
        int_ids(&[19998, 19999])
    );
}

// ---------------------------------------------------------------------------------------------
// TTL

fn ms_ago(now: DateTime, ms: i64) -> DateTime {
    DateTime::from_millis(now.timestamp_millis() - ms)
}

/// The TTL monitor (every second here): dates older than `expireAfterSeconds` go, on
/// ascending, descending and partial TTL indexes; arrays expire by their earliest date;
/// non-dates and missing fields never expire. Its counters and parameters.
#[tokio::test]
async fn ttl_monitor_expires_documents() {
    let s = TestServer::start_with(&["--ttl-monitor-sleep-secs", "1"]);
    let client = s.client().await;
    let admin = client.database("admin");
    let r = cmd(&admin, doc! {"getParameter": 1, "ttlMonitorSleepSecs": 1}).await;
    assert_doc(&r, &doc! {"ttlMonitorSleepSecs": 1, "ok": 1.0});
    let r = cmd(&admin, doc! {"getParameter": 1, "ttlMonitorEnabled": 1}).await;
    assert_doc(&r, &doc! {"ttlMonitorEnabled": true, "ok": 1.0});
    let ttl_metrics = || async {
        let r = cmd(&admin, doc! {"serverStatus": 1}).await;
        let ttl = r
            .get_document("metrics")
            .unwrap()
            .get_document("ttl")
            .unwrap()
            .clone();
        (
            as_i64(ttl.get("deletedDocuments")),
            as_i64(ttl.get("passes")),
        )
    };
    let (deleted0, passes0) = ttl_metrics().await;

    let db = client.database("ttl");
    let now = DateTime::now();
    let past = ms_ago(now, 3_600_000);
    let future = ms_ago(now, -3_600_000);
    insert(
        &db,
        "asc",
        vec![
            doc! {"_id": 1, "at": past},
            doc! {"_id": 2, "at": future},
            doc! {"_id": 3, "at": "yesterday"},
            doc! {"_id": 4, "at": [future, past]},
            doc! {"_id": 5},
            doc! {"_id": 6, "at": [future, future]},
            doc! {"_id": 7, "at": 12345},
            doc! {"_id": 8, "at": null},
            doc! {"_id": 9, "at": DateTime::from_millis(-86_400_000 * 365)},
            doc! {"_id": 10, "at": {"d": past}},
            doc! {"_id": 11, "at": Timestamp { time: 1, increment: 1 }},
            doc! {"_id": 12, "at": [1, "x", past]},
        ],
    )
    .await;
    create(
        &db,
        "asc",
        vec![doc! {"key": {"at": 1}, "name": "at_1", "expireAfterSeconds": 0}],
    )
    .await;
    create(
        &db,
        "desc",
        vec![doc! {"key": {"at": -1}, "name": "at_-1", "expireAfterSeconds": 0}],
    )
    .await;
    insert(
        &db,
        "desc",
        vec![
            doc! {"_id": 1, "at": past},
            doc! {"_id": 2, "at": future},
            doc! {"_id": 3, "at": [past]},
        ],
    )
    .await;
    create(
        &db,
        "hour",
        vec![doc! {"key": {"at": 1}, "name": "at_1", "expireAfterSeconds": 3600}],
    )
    .await;
    insert(
        &db,
        "hour",
        vec![
            doc! {"_id": 1, "at": ms_ago(now, 1_800_000)},
            doc! {"_id": 2, "at": ms_ago(now, 7_200_000)},
        ],
    )
    .await;
    create(
        &db,
        "partial",
        vec![doc! {
            "key": {"at": 1},
            "name": "at_1",
            "expireAfterSeconds": 0,
            "partialFilterExpression": {"kind": "temp"},
        }],
    )
    .await;
    insert(
        &db,
        "partial",
        vec![
            doc! {"_id": 1, "at": past, "kind": "temp"},
            doc! {"_id": 2, "at": past, "kind": "keep"},
            doc! {"_id": 3, "at": future, "kind": "temp"},
        ],
    )
    .await;

    let expected: [(&str, Vec<Bson>); 4] = [
        ("asc", int_ids(&[2, 3, 5, 6, 7, 8, 10, 11])),
        ("desc", int_ids(&[2])),
        ("hour", int_ids(&[1])),
        ("partial", int_ids(&[2, 3])),
    ];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut all = Vec::new();
        for (name, _) in &expected {
            all.push(ids(&db.collection::<Document>(name), doc! {}).await);
        }
        let want: Vec<Vec<Bson>> = expected.iter().map(|(_, v)| v.clone()).collect();
        if all == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "TTL monitor did not expire the documents in 20 s: {all:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (deleted, passes) = ttl_metrics().await;
    assert_eq!(deleted - deleted0, 4 + 2 + 1 + 1);
    assert!(passes > passes0, "passes {passes0} -> {passes}");
    // Another pass deletes nothing more.
    let deadline = Instant::now() + Duration::from_secs(10);
    while ttl_metrics().await.1 < passes + 2 {
        assert!(Instant::now() < deadline, "no more TTL passes");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(ttl_metrics().await.0, deleted);
    assert_eq!(
        ids(&db.collection::<Document>("asc"), doc! {}).await,
        expected[0].1
    );
}

/// Without the flag the monitor runs every 60 s, as MongoDB's default.
#[tokio::test]
async fn ttl_parameters_default() {
    let s = TestServer::start();
    let admin = s.client().await.database("admin");
    let r = cmd(
        &admin,
        doc! {"getParameter": 1, "ttlMonitorSleepSecs": 1, "ttlMonitorEnabled": 1},
    )
    .await;
    assert_eq!(r.get_i32("ttlMonitorSleepSecs").unwrap(), 60);
    assert!(r.get_bool("ttlMonitorEnabled").unwrap());
}
