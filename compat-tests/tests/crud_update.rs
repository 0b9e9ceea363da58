//! Updates through the Rust driver, following the MongoDB 7.0 manual's pages for the update
//! operators (field, array, bitwise, positional), upserts, replacement and the `update`
//! command's reply (`n`, `nModified`, `upserted`, per-statement `writeErrors`).
//!
//! Documents are compared byte for byte (field order and numeric types matter). Since 5.0,
//! update operators process fields with string names in lexicographic order and numeric names
//! in numeric order, so fields created by one update are appended in that order.

use bson::{Bson, DateTime, Decimal128, Document, Timestamp, doc};
use cairn_compat_tests::{TestServer, assert_docs, cmd, code_of, collect};
use mongodb::{Collection, Database};

// ---------------------------------------------------------------------------------------------
// helpers

fn dec(s: &str) -> Decimal128 {
    s.parse().unwrap()
}

async fn setup(db: &Database, name: &str, docs: Vec<Document>) -> Collection<Document> {
    let coll = db.collection::<Document>(name);
    if !docs.is_empty() {
        coll.insert_many(docs).await.unwrap();
    }
    coll
}

async fn all(coll: &Collection<Document>) -> Vec<Document> {
    collect(coll.find(doc! {}).sort(doc! {"_id": 1}).await.unwrap()).await
}

async fn one(coll: &Collection<Document>, id: impl Into<Bson>) -> Document {
    coll.find_one(doc! {"_id": id.into()})
        .await
        .unwrap()
        .expect("document")
}

/// `updateOne` returning (matched, modified).
async fn upd(coll: &Collection<Document>, filter: Document, update: Document) -> (u64, u64) {
    let r = coll
        .update_one(filter.clone(), update.clone())
        .await
        .unwrap_or_else(|e| panic!("update {update} on {filter}: {e}"));
    (r.matched_count, r.modified_count)
}

async fn upd_many(coll: &Collection<Document>, filter: Document, update: Document) -> (u64, u64) {
    let r = coll
        .update_many(filter.clone(), update.clone())
        .await
        .unwrap_or_else(|e| panic!("update {update} on {filter}: {e}"));
    (r.matched_count, r.modified_count)
}

/// The error code of an `updateOne` that must fail.
async fn upd_err(coll: &Collection<Document>, filter: Document, update: Document) -> i32 {
    match coll.update_one(filter, update.clone()).await {
        Err(e) => code_of(&e),
        Ok(r) => panic!("update {update} succeeded: {r:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// field operators

/// The $set page.
#[tokio::test]
async fn set_manual_examples_and_field_order() {
    let s = TestServer::start();
    let db = s.client().await.database("uset");
    let p = setup(
        &db,
        "products",
        vec![
            doc! {"_id": 100, "quantity": 250, "instock": true, "reorder": false,
            "details": {"model": "14QQ", "make": "Clothes Corp"},
            "tags": ["apparel", "clothing"],
            "ratings": [{"by": "Customer007", "rating": 4}]},
        ],
    )
    .await;
    // top-level fields keep their positions
    assert_eq!(
        upd(
            &p,
            doc! {"_id": 100},
            doc! {"$set": {"quantity": 500, "details": {"model": "2600", "make": "Fashionaires"},
            "tags": ["coats", "outerwear", "clothing"]}}
        )
        .await,
        (1, 1)
    );
    assert_docs(
        &[one(&p, 100).await],
        &[
            doc! {"_id": 100, "quantity": 500, "instock": true, "reorder": false,
            "details": {"model": "2600", "make": "Fashionaires"},
            "tags": ["coats", "outerwear", "clothing"],
            "ratings": [{"by": "Customer007", "rating": 4}]},
        ],
    );
    // embedded fields
    upd(
        &p,
        doc! {"_id": 100},
        doc! {"$set": {"details.make": "Kustom Kidz"}},
    )
    .await;
    // array elements by index
    upd(
        &p,
        doc! {"_id": 100},
        doc! {"$set": {"tags.1": "rain gear", "ratings.0.rating": 2}},
    )
    .await;
    assert_docs(
        &[one(&p, 100).await],
        &[
            doc! {"_id": 100, "quantity": 500, "instock": true, "reorder": false,
            "details": {"model": "2600", "make": "Kustom Kidz"},
            "tags": ["coats", "rain gear", "clothing"],
            "ratings": [{"by": "Customer007", "rating": 2}]},
        ],
    );

    // new fields are appended in lexicographic order; numeric names in numeric order
    let c = setup(&db, "order", vec![doc! {"_id": 1, "m": {"z": 0}}]).await;
    upd(
        &c,
        doc! {"_id": 1},
        doc! {"$set": {"zeta": 1, "alpha": 2, "m.b": 1, "m.a": 2, "n.10": 1, "n.9": 2, "Beta": 3}},
    )
    .await;
    assert_docs(
        &[one(&c, 1).await],
        &[
            doc! {"_id": 1, "m": {"z": 0, "a": 2, "b": 1}, "Beta": 3, "alpha": 2,
            "n": {"9": 2, "10": 1}, "zeta": 1},
        ],
    );
    // deep creation, padding arrays with nulls
    let c = setup(&db, "deep", vec![doc! {"_id": 1, "arr": [1]}]).await;
    upd(&c, doc! {"_id": 1}, doc! {"$set": {"x.y.z": 1, "arr.3": 4}}).await;
    assert_docs(
        &[one(&c, 1).await],
        &[doc! {"_id": 1, "arr": [1, null, null, 4], "x": {"y": {"z": 1}}}],
    );
    // setting an identical value is a no-op (nModified 0), as is an empty $set (5.0+)
    assert_eq!(
        upd(&c, doc! {"_id": 1}, doc! {"$set": {"x.y.z": 1}}).await,
        (1, 0)
    );
    assert_eq!(upd(&c, doc! {"_id": 1}, doc! {"$set": {}}).await, (1, 0));
    assert_eq!(
        upd(&c, doc! {"_id": 1}, doc! {"$unset": {"nope": ""}}).await,
        (1, 0)
    );
}

/// The $unset page and a few $unset details.
#[tokio::test]
async fn unset_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("uunset");
    let c = setup(
        &db,
        "products",
        vec![
            doc! {"_id": 1, "item": "chisel", "sku": "C001", "quantity": 4, "instock": true},
            doc! {"_id": 2, "item": "hammer", "sku": "unknown", "quantity": 3, "instock": true},
            doc! {"_id": 3, "item": "nails", "sku": "unknown", "quantity": 100, "instock": true},
        ],
    )
    .await;
    assert_eq!(
        upd(
            &c,
            doc! {"sku": "unknown"},
            doc! {"$unset": {"quantity": "", "instock": ""}}
        )
        .await,
        (1, 1)
    );
    assert_docs(
        &all(&c).await,
        &[
            doc! {"_id": 1, "item": "chisel", "sku": "C001", "quantity": 4, "instock": true},
            doc! {"_id": 2, "item": "hammer", "sku": "unknown"},
            doc! {"_id": 3, "item": "nails", "sku": "unknown", "quantity": 100, "instock": true},
        ],
    );
    // unsetting an array element leaves null in its place; unsetting through a missing path
    // is a no-op
    let a = setup(
        &db,
        "arr",
        vec![doc! {"_id": 1, "a": [1, 2, 3], "d": {"x": 1, "y": 2}}],
    )
    .await;
    assert_eq!(
        upd(
            &a,
            doc! {"_id": 1},
            doc! {"$unset": {"a.1": 1, "d.x": true, "q.r": ""}}
        )
        .await,
        (1, 1)
    );
    assert_docs(
        &[one(&a, 1).await],
        &[doc! {"_id": 1, "a": [1, null, 3], "d": {"y": 2}}],
    );
}

/// The $inc page plus numeric type promotion.
#[tokio::test]
async fn inc_manual_examples_and_numeric_types() {
    let s = TestServer::start();
    let db = s.client().await.database("uinc");
    let c = setup(
        &db,
        "products",
        vec![doc! {"_id": 1, "sku": "abc123", "quantity": 10, "metrics": {"orders": 2, "ratings": 3.5}}],
    )
    .await;
    upd(
        &c,
        doc! {"sku": "abc123"},
        doc! {"$inc": {"quantity": -2, "metrics.orders": 1}},
    )
    .await;
    assert_docs(
        &[one(&c, 1).await],
        &[
            doc! {"_id": 1, "sku": "abc123", "quantity": 8, "metrics": {"orders": 3, "ratings": 3.5}},
        ],
    );

    let n = setup(
        &db,
        "nums",
        vec![doc! {"_id": 1, "i": i32::MAX, "l": 5_i64, "d": 1.5, "k": dec("1.1"), "j": 1, "m": 2}],
    )
    .await;
    upd(
        &n,
        doc! {"_id": 1},
        doc! {"$inc": {"i": 1, "l": 1, "d": 1, "k": 1, "j": 0.5, "m": 3_i64, "new_i": 5, "new_d": 2.5}},
    )
    .await;
    assert_docs(
        &[one(&n, 1).await],
        &[
            doc! {"_id": 1, "i": 2_147_483_648_i64, "l": 6_i64, "d": 2.5, "k": dec("2.1"),
            "j": 1.5, "m": 5_i64, "new_d": 2.5, "new_i": 5},
        ],
    );
    // incrementing by zero changes nothing
    assert_eq!(
        upd(&n, doc! {"_id": 1}, doc! {"$inc": {"l": 0}}).await,
        (1, 0)
    );

    // errors
    let e = setup(
        &db,
        "errs",
        vec![doc! {"_id": 1, "s": "x", "big": i64::MAX, "a": 5}],
    )
    .await;
    assert_eq!(
        upd_err(&e, doc! {"_id": 1}, doc! {"$inc": {"a": "1"}}).await,
        14
    );
    assert_eq!(
        upd_err(&e, doc! {"_id": 1}, doc! {"$inc": {"a": null}}).await,
        14
    );
    assert_eq!(
        upd_err(&e, doc! {"_id": 1}, doc! {"$inc": {"s": 1}}).await,
        14
    );
    assert_eq!(
        upd_err(&e, doc! {"_id": 1}, doc! {"$inc": {"big": 1}}).await,
        2
    );
    assert_eq!(
        upd_err(&e, doc! {"_id": 1}, doc! {"$inc": {"a.b": 1}}).await,
        28
    );
}

/// The $mul page.
#[tokio::test]
async fn mul_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("umul");
    let c = setup(
        &db,
        "products",
        vec![
            doc! {"_id": 1, "item": "Hats", "price": dec("10.99"), "quantity": 25},
            doc! {"_id": 2, "item": "Unknown"},
            doc! {"_id": 3, "item": "Scarf", "price": 10_i64},
            doc! {"_id": 4, "item": "Big", "qty": 100_000},
        ],
    )
    .await;
    upd(
        &c,
        doc! {"_id": 1},
        doc! {"$mul": {"price": dec("1.25"), "quantity": 2}},
    )
    .await;
    // a missing field is set to zero of the multiplier's type
    upd(&c, doc! {"_id": 2}, doc! {"$mul": {"price": 100_i64}}).await;
    // mixed types: long * int = long
    upd(&c, doc! {"_id": 3}, doc! {"$mul": {"price": 5}}).await;
    // int * int overflowing 32 bits becomes a long; int * double is a double
    upd(
        &c,
        doc! {"_id": 4},
        doc! {"$mul": {"qty": 100_000, "half": 0.5}},
    )
    .await;
    assert_docs(
        &all(&c).await,
        &[
            doc! {"_id": 1, "item": "Hats", "price": dec("13.7375"), "quantity": 50},
            doc! {"_id": 2, "item": "Unknown", "price": 0_i64},
            doc! {"_id": 3, "item": "Scarf", "price": 50_i64},
            doc! {"_id": 4, "item": "Big", "qty": 10_000_000_000_i64, "half": 0.0},
        ],
    );
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$mul": {"item": 2}}).await,
        14
    );
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$mul": {"quantity": "2"}}).await,
        14
    );
}

/// The $min and $max pages.
#[tokio::test]
async fn min_max_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("uminmax");
    let scores = setup(
        &db,
        "scores",
        vec![doc! {"_id": 1, "highScore": 800, "lowScore": 200}],
    )
    .await;
    assert_eq!(
        upd(&scores, doc! {"_id": 1}, doc! {"$min": {"lowScore": 150}}).await,
        (1, 1)
    );
    assert_eq!(
        upd(&scores, doc! {"_id": 1}, doc! {"$min": {"lowScore": 250}}).await,
        (1, 0)
    );
    assert_eq!(
        upd(&scores, doc! {"_id": 1}, doc! {"$max": {"highScore": 950}}).await,
        (1, 1)
    );
    assert_eq!(
        upd(&scores, doc! {"_id": 1}, doc! {"$max": {"highScore": 870}}).await,
        (1, 0)
    );
    assert_docs(
        &[one(&scores, 1).await],
        &[doc! {"_id": 1, "highScore": 950, "lowScore": 150}],
    );

    // dates
    let entered = DateTime::from_millis(1_380_603_600_000); // 2013-10-01T05:00:00Z
    let expired = DateTime::from_millis(1_380_645_496_163); // 2013-10-01T16:38:16.163Z
    let sep25 = DateTime::from_millis(1_380_067_200_000); // 2013-09-25
    let sep30 = DateTime::from_millis(1_380_499_200_000); // 2013-09-30
    let tags = setup(
        &db,
        "tags",
        vec![doc! {"_id": 1, "desc": "crafts", "dateEntered": entered, "dateExpired": expired}],
    )
    .await;
    upd(
        &tags,
        doc! {"_id": 1},
        doc! {"$min": {"dateEntered": sep25}},
    )
    .await;
    assert_eq!(
        upd(
            &tags,
            doc! {"_id": 1},
            doc! {"$max": {"dateExpired": sep30}}
        )
        .await,
        (1, 0)
    );
    assert_docs(
        &[one(&tags, 1).await],
        &[doc! {"_id": 1, "desc": "crafts", "dateEntered": sep25, "dateExpired": expired}],
    );

    // comparisons follow the BSON order across types; equal values of another numeric type
    // change nothing; missing fields are created
    let x = setup(
        &db,
        "x",
        vec![doc! {"_id": 1, "a": 5, "b": 5, "c": 1, "d": 1}],
    )
    .await;
    upd(
        &x,
        doc! {"_id": 1},
        doc! {"$min": {"a": null, "c": 1.0, "e": 7}, "$max": {"b": "str", "d": 1_i64}},
    )
    .await;
    assert_docs(
        &[one(&x, 1).await],
        &[doc! {"_id": 1, "a": null, "b": "str", "c": 1, "d": 1, "e": 7}],
    );
    assert_eq!(
        upd(
            &x,
            doc! {"_id": 1},
            doc! {"$min": {"c": 1.0}, "$max": {"d": dec("1")}}
        )
        .await,
        (1, 0)
    );
}

/// The $currentDate page.
#[tokio::test]
async fn current_date_manual_example() {
    let s = TestServer::start();
    let db = s.client().await.database("ucd");
    let before = DateTime::now().timestamp_millis();
    let c = setup(
        &db,
        "customers",
        vec![doc! {"_id": 1, "status": "a", "lastModified": DateTime::from_millis(1_380_676_278_965)}],
    )
    .await;
    upd(
        &c,
        doc! {"_id": 1},
        doc! {
            "$currentDate": {"lastModified": true, "cancellation.date": {"$type": "timestamp"}},
            "$set": {"cancellation.reason": "user request", "status": "D"},
        },
    )
    .await;
    let d = one(&c, 1).await;
    let keys: Vec<&String> = d.keys().collect();
    assert_eq!(keys, ["_id", "status", "lastModified", "cancellation"]);
    assert_eq!(d.get_str("status").unwrap(), "D");
    let lm = d.get_datetime("lastModified").unwrap().timestamp_millis();
    assert!(
        lm >= before - 1000 && lm <= DateTime::now().timestamp_millis() + 1000,
        "{d}"
    );
    let canc = d.get_document("cancellation").unwrap();
    let keys: Vec<&String> = canc.keys().collect();
    assert_eq!(keys, ["date", "reason"]);
    let ts: Timestamp = canc.get_timestamp("date").unwrap();
    assert!(ts.time as i64 >= before / 1000 - 1, "{ts:?}");
    assert_eq!(canc.get_str("reason").unwrap(), "user request");
    // {$type: "date"} is the same as true
    upd(
        &c,
        doc! {"_id": 1},
        doc! {"$currentDate": {"other": {"$type": "date"}}},
    )
    .await;
    assert!(one(&c, 1).await.get_datetime("other").is_ok());
    // bad specifications
    for bad in [
        doc! {"$currentDate": {"x": "yes"}},
        doc! {"$currentDate": {"x": {"$type": "string"}}},
        doc! {"$currentDate": {"x": {"$type": "date", "other": 1}}},
    ] {
        assert_eq!(upd_err(&c, doc! {"_id": 1}, bad.clone()).await, 2, "{bad}");
    }
}

/// The $rename page.
#[tokio::test]
async fn rename_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("urename");
    let st = setup(
        &db,
        "students",
        vec![
            doc! {"_id": 1, "alias": ["The American Cincinnatus", "The American Fabius"],
            "mobile": "555-555-5555", "nmae": {"first": "george", "last": "washington"}},
            doc! {"_id": 2, "alias": ["My dearest friend"], "mobile": "222-222-2222",
            "nmae": {"first": "abigail", "last": "adams"}},
            doc! {"_id": 3, "alias": ["Amazing grace"], "mobile": "111-111-1111",
            "nmae": {"first": "grace", "last": "hopper"}},
        ],
    )
    .await;
    assert_eq!(
        upd_many(
            &st,
            doc! {"nmae": {"$ne": null}},
            doc! {"$rename": {"nmae": "name"}}
        )
        .await,
        (3, 3)
    );
    // rename a field in an embedded document: the renamed field moves to the end
    upd(
        &st,
        doc! {"_id": 1},
        doc! {"$rename": {"name.first": "name.fname"}},
    )
    .await;
    // renaming a field that does not exist does nothing
    assert_eq!(
        upd(&st, doc! {"_id": 1}, doc! {"$rename": {"wife": "spouse"}}).await,
        (1, 0)
    );
    // move a field out of an embedded document
    upd(
        &st,
        doc! {"_id": 2},
        doc! {"$rename": {"name.last": "lastName"}},
    )
    .await;
    assert_docs(
        &all(&st).await,
        &[
            doc! {"_id": 1, "alias": ["The American Cincinnatus", "The American Fabius"],
            "mobile": "555-555-5555", "name": {"last": "washington", "fname": "george"}},
            doc! {"_id": 2, "alias": ["My dearest friend"], "mobile": "222-222-2222",
            "name": {"first": "abigail"}, "lastName": "adams"},
            doc! {"_id": 3, "alias": ["Amazing grace"], "mobile": "111-111-1111",
            "name": {"first": "grace", "last": "hopper"}},
        ],
    );
    // renaming onto an existing field overwrites it where it stands (RenameNode applies a
    // SetElementNode to the existing destination, then unsets the source)
    let c = setup(
        &db,
        "c",
        vec![doc! {"_id": 1, "a": 1, "b": 2, "c": 3, "arr": [{"x": 1}]}],
    )
    .await;
    upd(&c, doc! {"_id": 1}, doc! {"$rename": {"a": "c"}}).await;
    assert_docs(
        &[one(&c, 1).await],
        &[doc! {"_id": 1, "b": 2, "c": 1, "arr": [{"x": 1}]}],
    );
    // errors
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$rename": {"b": "b"}}).await,
        2
    );
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$rename": {"b": 1}}).await,
        2
    );
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$rename": {"b": "b.c"}}).await,
        2
    );
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$rename": {"b.$": "z"}}).await,
        2
    );
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$rename": {"arr.x": "z"}}).await,
        28
    );
    // through an array by index: "The source field cannot be an array element"
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$rename": {"arr.0.x": "z"}}).await,
        2
    );
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$rename": {"b": "arr.0.y"}}).await,
        2
    );
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$rename": {"": "z"}}).await,
        56
    );
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$rename": {"_id": "z"}}).await,
        66
    );
}

/// The $setOnInsert page.
#[tokio::test]
async fn set_on_insert_manual_example() {
    let s = TestServer::start();
    let db = s.client().await.database("usoi");
    let p = db.collection::<Document>("products");
    let r = p
        .update_one(
            doc! {"_id": 1},
            doc! {"$set": {"item": "apple"}, "$setOnInsert": {"defaultQty": 100}},
        )
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(r.matched_count, 0);
    assert_eq!(r.modified_count, 0);
    assert_eq!(r.upserted_id, Some(Bson::Int32(1)));
    // fields created by one update are applied in lexicographic order
    assert_docs(
        &[one(&p, 1).await],
        &[doc! {"_id": 1, "defaultQty": 100, "item": "apple"}],
    );
    // on a matched document $setOnInsert does nothing
    let r = p
        .update_one(
            doc! {"_id": 1},
            doc! {"$set": {"item": "pear"}, "$setOnInsert": {"defaultQty": 5, "other": 1}},
        )
        .upsert(true)
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    assert_eq!(r.upserted_id, None);
    assert_docs(
        &[one(&p, 1).await],
        &[doc! {"_id": 1, "defaultQty": 100, "item": "pear"}],
    );
    // only $setOnInsert on a match: nothing to modify
    let r = p
        .update_one(doc! {"_id": 1}, doc! {"$setOnInsert": {"x": 1}})
        .upsert(true)
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 0));
}

// ---------------------------------------------------------------------------------------------
// array operators

/// The $push, $each, $slice, $sort and $position pages.
#[tokio::test]
async fn push_with_modifiers_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("upush");
    let st = setup(
        &db,
        "students",
        vec![
            doc! {"_id": 1, "scores": [44, 78, 38, 80]},
            doc! {"_id": 5, "quizzes": [{"wk": 1, "score": 10}, {"wk": 2, "score": 8}, {"wk": 3, "score": 5}, {"wk": 4, "score": 6}]},
        ],
    )
    .await;
    upd(&st, doc! {"_id": 1}, doc! {"$push": {"scores": 89}}).await;
    upd(
        &st,
        doc! {"_id": 1},
        doc! {"$push": {"scores": {"$each": [90, 92, 85]}}},
    )
    .await;
    upd(
        &st,
        doc! {"_id": 5},
        doc! {"$push": {"quizzes": {
            "$each": [{"wk": 5, "score": 8}, {"wk": 6, "score": 7}, {"wk": 7, "score": 6}],
            "$sort": {"score": -1},
            "$slice": 3,
        }}},
    )
    .await;
    // pushing to a missing field creates the array; an array value is one element
    upd(&st, doc! {"_id": 1}, doc! {"$push": {"fresh": [1, 2]}}).await;
    assert_docs(
        &all(&st).await,
        &[
            doc! {"_id": 1, "scores": [44, 78, 38, 80, 89, 90, 92, 85], "fresh": [[1, 2]]},
            doc! {"_id": 5, "quizzes": [{"wk": 1, "score": 10}, {"wk": 2, "score": 8}, {"wk": 5, "score": 8}]},
        ],
    );

    // $position
    let pos = setup(
        &db,
        "position",
        vec![
            doc! {"_id": 1, "scores": [100]},
            doc! {"_id": 2, "scores": [50, 60, 70, 100]},
            doc! {"_id": 3, "scores": [50, 60, 20, 30, 70, 100]},
            doc! {"_id": 4, "scores": [1, 2]},
        ],
    )
    .await;
    upd(
        &pos,
        doc! {"_id": 1},
        doc! {"$push": {"scores": {"$each": [50, 60, 70], "$position": 0}}},
    )
    .await;
    upd(
        &pos,
        doc! {"_id": 2},
        doc! {"$push": {"scores": {"$each": [20, 30], "$position": 2}}},
    )
    .await;
    upd(
        &pos,
        doc! {"_id": 3},
        doc! {"$push": {"scores": {"$each": [90, 80], "$position": -2}}},
    )
    .await;
    // positions beyond either end clamp
    upd(
        &pos,
        doc! {"_id": 4},
        doc! {"$push": {"scores": {"$each": [9], "$position": 10}}},
    )
    .await;
    upd(
        &pos,
        doc! {"_id": 4},
        doc! {"$push": {"scores": {"$each": [0], "$position": -10}}},
    )
    .await;
    assert_docs(
        &all(&pos).await,
        &[
            doc! {"_id": 1, "scores": [50, 60, 70, 100]},
            doc! {"_id": 2, "scores": [50, 60, 20, 30, 70, 100]},
            doc! {"_id": 3, "scores": [50, 60, 20, 30, 90, 80, 70, 100]},
            doc! {"_id": 4, "scores": [0, 1, 2, 9]},
        ],
    );

    // $slice
    let sl = setup(
        &db,
        "slice",
        vec![
            doc! {"_id": 1, "scores": [40, 50, 60]},
            doc! {"_id": 2, "scores": [89, 90]},
            doc! {"_id": 3, "scores": [89, 70, 100, 20]},
            doc! {"_id": 4, "scores": [1, 2, 3]},
        ],
    )
    .await;
    upd(
        &sl,
        doc! {"_id": 1},
        doc! {"$push": {"scores": {"$each": [80, 78, 86], "$slice": -5}}},
    )
    .await;
    upd(
        &sl,
        doc! {"_id": 2},
        doc! {"$push": {"scores": {"$each": [100, 20], "$slice": 3}}},
    )
    .await;
    upd(
        &sl,
        doc! {"_id": 3},
        doc! {"$push": {"scores": {"$each": [], "$slice": -3}}},
    )
    .await;
    upd(
        &sl,
        doc! {"_id": 4},
        doc! {"$push": {"scores": {"$each": [4], "$slice": 0}}},
    )
    .await;
    assert_docs(
        &all(&sl).await,
        &[
            doc! {"_id": 1, "scores": [50, 60, 80, 78, 86]},
            doc! {"_id": 2, "scores": [89, 90, 100]},
            doc! {"_id": 3, "scores": [70, 100, 20]},
            doc! {"_id": 4, "scores": []},
        ],
    );

    // $sort
    let so = setup(
        &db,
        "sort",
        vec![
            doc! {"_id": 1, "quizzes": [{"id": 1, "score": 6}, {"id": 2, "score": 9}]},
            doc! {"_id": 2, "tests": [89, 70, 89, 50]},
            doc! {"_id": 3, "tests": [89, 70, 100, 20]},
            doc! {"_id": 4, "mixed": [{"a": {"b": 2}}, {"a": {"b": 1}}, 3]},
        ],
    )
    .await;
    upd(
        &so,
        doc! {"_id": 1},
        doc! {"$push": {"quizzes": {"$each": [{"id": 3, "score": 8}, {"id": 4, "score": 7}, {"id": 5, "score": 6}], "$sort": {"score": 1}}}},
    )
    .await;
    upd(
        &so,
        doc! {"_id": 2},
        doc! {"$push": {"tests": {"$each": [40, 60], "$sort": 1}}},
    )
    .await;
    upd(
        &so,
        doc! {"_id": 3},
        doc! {"$push": {"tests": {"$each": [], "$sort": -1}}},
    )
    .await;
    // sorting by an embedded path; an element without it sorts as null
    upd(
        &so,
        doc! {"_id": 4},
        doc! {"$push": {"mixed": {"$each": [], "$sort": {"a.b": 1}}}},
    )
    .await;
    assert_docs(
        &all(&so).await,
        &[
            doc! {"_id": 1, "quizzes": [{"id": 1, "score": 6}, {"id": 5, "score": 6}, {"id": 4, "score": 7}, {"id": 3, "score": 8}, {"id": 2, "score": 9}]},
            doc! {"_id": 2, "tests": [40, 50, 60, 70, 89, 89]},
            doc! {"_id": 3, "tests": [100, 89, 70, 20]},
            doc! {"_id": 4, "mixed": [3, {"a": {"b": 1}}, {"a": {"b": 2}}]},
        ],
    );

    // errors
    let e = setup(&db, "errs", vec![doc! {"_id": 1, "n": 5, "a": [1]}]).await;
    for (update, code) in [
        (doc! {"$push": {"n": 1}}, 2),
        (doc! {"$push": {"a": {"$each": 1}}}, 2),
        (doc! {"$push": {"a": {"$each": [1], "$slice": "x"}}}, 2),
        (doc! {"$push": {"a": {"$each": [1], "$position": 1.5}}}, 2),
        (doc! {"$push": {"a": {"$each": [1], "$sort": 2}}}, 2),
        (doc! {"$push": {"a": {"$each": [1], "$sort": {}}}}, 2),
        (doc! {"$push": {"a": {"$each": [1], "$bogus": 1}}}, 2),
    ] {
        assert_eq!(
            upd_err(&e, doc! {"_id": 1}, update.clone()).await,
            code,
            "{update}"
        );
    }
}

/// The $addToSet page.
#[tokio::test]
async fn add_to_set_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("uats");
    let c = setup(
        &db,
        "pigments",
        vec![
            doc! {"_id": 1, "letters": ["a", "b"]},
            doc! {"_id": 2, "item": "polarizing_filter", "tags": ["electronics", "camera"]},
            doc! {"_id": 3, "item": "cable", "tags": ["electronics", "supplies"]},
            doc! {"_id": 4, "colors": "blue, green, red"},
            doc! {"_id": 5, "docs": [{"x": 1, "y": 2}], "nums": [1, 2]},
        ],
    )
    .await;
    // an array value is added as a single element
    upd(
        &c,
        doc! {"_id": 1},
        doc! {"$addToSet": {"letters": ["c", "d"]}},
    )
    .await;
    assert_eq!(
        upd(
            &c,
            doc! {"_id": 2},
            doc! {"$addToSet": {"tags": "accessories"}}
        )
        .await,
        (1, 1)
    );
    assert_eq!(
        upd(&c, doc! {"_id": 2}, doc! {"$addToSet": {"tags": "camera"}}).await,
        (1, 0)
    );
    upd(
        &c,
        doc! {"_id": 3},
        doc! {"$addToSet": {"tags": {"$each": ["camera", "electronics", "accessories", "camera"]}}},
    )
    .await;
    // documents compare with field order; numbers compare across types
    upd(
        &c,
        doc! {"_id": 5},
        doc! {"$addToSet": {"docs": {"$each": [{"y": 2, "x": 1}, {"x": 1, "y": 2}]}, "nums": {"$each": [2.0, 3_i64]}}},
    )
    .await;
    // a missing field becomes an array
    upd(
        &c,
        doc! {"_id": 4},
        doc! {"$addToSet": {"other": {"$each": ["x", "x"]}}},
    )
    .await;
    assert_docs(
        &all(&c).await,
        &[
            doc! {"_id": 1, "letters": ["a", "b", ["c", "d"]]},
            doc! {"_id": 2, "item": "polarizing_filter", "tags": ["electronics", "camera", "accessories"]},
            doc! {"_id": 3, "item": "cable", "tags": ["electronics", "supplies", "camera", "accessories"]},
            doc! {"_id": 4, "colors": "blue, green, red", "other": ["x"]},
            doc! {"_id": 5, "docs": [{"x": 1, "y": 2}, {"y": 2, "x": 1}], "nums": [1, 2, 3_i64]},
        ],
    );
    // $each must be an array (TypeMismatch, unlike $push's BadValue) and must stand alone
    assert_eq!(
        upd_err(
            &c,
            doc! {"_id": 1},
            doc! {"$addToSet": {"letters": {"$each": "z"}}}
        )
        .await,
        14
    );
    assert_eq!(
        upd_err(
            &c,
            doc! {"_id": 1},
            doc! {"$addToSet": {"letters": {"$each": ["z"], "$slice": 1}}}
        )
        .await,
        2
    );
}

/// "If you use $addToSet on a field that is not an array, the operation will fail": MongoDB's
/// AddToSetNode raises BadValue ("Cannot apply $addToSet to non-array field. Field named
/// 'colors' has non-array type string").
#[tokio::test]
async fn add_to_set_on_a_non_array_field_is_bad_value() {
    let s = TestServer::start();
    let db = s.client().await.database("uatsna");
    let c = setup(
        &db,
        "pigments",
        vec![doc! {"_id": 1, "colors": "blue, green, red"}],
    )
    .await;
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$addToSet": {"colors": "mauve"}}).await,
        2
    );
    assert_eq!(
        upd_err(
            &c,
            doc! {"_id": 1},
            doc! {"$addToSet": {"colors": {"$each": ["mauve"]}}}
        )
        .await,
        2
    );
}

/// The $pull and $pullAll pages.
#[tokio::test]
async fn pull_and_pull_all_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("upull");
    let stores = setup(
        &db,
        "stores",
        vec![
            doc! {"_id": 1, "fruits": ["apples", "pears", "oranges", "grapes", "bananas"], "vegetables": ["carrots", "celery", "squash", "carrots"]},
            doc! {"_id": 2, "fruits": ["plums", "kiwis", "oranges", "bananas", "apples"], "vegetables": ["broccoli", "zucchini", "carrots", "onions"]},
        ],
    )
    .await;
    assert_eq!(
        upd_many(
            &stores,
            doc! {},
            doc! {"$pull": {"fruits": {"$in": ["apples", "oranges"]}, "vegetables": "carrots"}}
        )
        .await,
        (2, 2)
    );
    assert_docs(
        &all(&stores).await,
        &[
            doc! {"_id": 1, "fruits": ["pears", "grapes", "bananas"], "vegetables": ["celery", "squash"]},
            doc! {"_id": 2, "fruits": ["plums", "kiwis", "bananas"], "vegetables": ["broccoli", "zucchini", "onions"]},
        ],
    );

    let profiles = setup(
        &db,
        "profiles",
        vec![doc! {"_id": 1, "votes": [3, 5, 6, 7, 7, 8]}],
    )
    .await;
    upd(
        &profiles,
        doc! {"_id": 1},
        doc! {"$pull": {"votes": {"$gte": 6}}},
    )
    .await;
    assert_docs(
        &[one(&profiles, 1).await],
        &[doc! {"_id": 1, "votes": [3, 5]}],
    );

    // a document condition is a query on each element (not an exact match)
    let survey = setup(
        &db,
        "survey",
        vec![
            doc! {"_id": 1, "results": [{"item": "A", "score": 5}, {"item": "B", "score": 8}]},
            doc! {"_id": 2, "results": [{"item": "C", "score": 8}, {"item": "B", "score": 4}]},
        ],
    )
    .await;
    upd_many(
        &survey,
        doc! {},
        doc! {"$pull": {"results": {"score": 8, "item": "B"}}},
    )
    .await;
    assert_docs(
        &all(&survey).await,
        &[
            doc! {"_id": 1, "results": [{"item": "A", "score": 5}]},
            doc! {"_id": 2, "results": [{"item": "C", "score": 8}, {"item": "B", "score": 4}]},
        ],
    );

    // nested arrays with $elemMatch
    let s2 = setup(
        &db,
        "survey2",
        vec![
            doc! {"_id": 1, "results": [
            {"item": "A", "score": 5, "answers": [{"q": 1, "a": 4}, {"q": 2, "a": 6}]},
            {"item": "B", "score": 8, "answers": [{"q": 1, "a": 8}, {"q": 2, "a": 9}]}]},
            doc! {"_id": 2, "results": [
            {"item": "C", "score": 8, "answers": [{"q": 1, "a": 8}, {"q": 2, "a": 7}]},
            {"item": "B", "score": 4, "answers": [{"q": 1, "a": 0}, {"q": 2, "a": 8}]}]},
        ],
    )
    .await;
    upd_many(
        &s2,
        doc! {},
        doc! {"$pull": {"results": {"answers": {"$elemMatch": {"q": 2, "a": {"$gte": 8}}}}}},
    )
    .await;
    assert_docs(
        &all(&s2).await,
        &[
            doc! {"_id": 1, "results": [{"item": "A", "score": 5, "answers": [{"q": 1, "a": 4}, {"q": 2, "a": 6}]}]},
            doc! {"_id": 2, "results": [{"item": "C", "score": 8, "answers": [{"q": 1, "a": 8}, {"q": 2, "a": 7}]}]},
        ],
    );

    // $pullAll removes every instance of each value; numbers compare across types
    let pa = setup(
        &db,
        "pullall",
        vec![doc! {"_id": 0, "scores": [0, 2, 5, 5, 1, 0]}],
    )
    .await;
    upd(
        &pa,
        doc! {"_id": 0},
        doc! {"$pullAll": {"scores": [0, 5.0]}},
    )
    .await;
    assert_docs(&[one(&pa, 0).await], &[doc! {"_id": 0, "scores": [2, 1]}]);
    // $pull of a whole document value is an exact match for non-document elements
    let m = setup(
        &db,
        "mixed",
        vec![doc! {"_id": 1, "a": [1, [1, 2], {"b": 1}, {"b": 1, "c": 2}]}],
    )
    .await;
    upd(&m, doc! {"_id": 1}, doc! {"$pull": {"a": [1, 2]}}).await;
    upd(&m, doc! {"_id": 1}, doc! {"$pullAll": {"a": [{"b": 1}]}}).await;
    assert_docs(
        &[one(&m, 1).await],
        &[doc! {"_id": 1, "a": [1, {"b": 1, "c": 2}]}],
    );
    // nothing to pull / missing field: no-op
    assert_eq!(
        upd(&m, doc! {"_id": 1}, doc! {"$pull": {"a": 99, "zz": 1}}).await,
        (1, 0)
    );
    // errors
    assert_eq!(
        upd_err(&pa, doc! {"_id": 0}, doc! {"$pullAll": {"scores": 1}}).await,
        2
    );
    let n = setup(&db, "notarr", vec![doc! {"_id": 1, "v": 5}]).await;
    assert_eq!(
        upd_err(&n, doc! {"_id": 1}, doc! {"$pull": {"v": 5}}).await,
        2
    );
    assert_eq!(
        upd_err(&n, doc! {"_id": 1}, doc! {"$pullAll": {"v": [5]}}).await,
        2
    );
}

/// The $pop page.
#[tokio::test]
async fn pop_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("upop");
    let c = setup(
        &db,
        "students",
        vec![
            doc! {"_id": 1, "scores": [8, 9, 10]},
            doc! {"_id": 10, "scores": [9, 10]},
            doc! {"_id": 11, "scores": [], "n": 5},
        ],
    )
    .await;
    upd(&c, doc! {"_id": 1}, doc! {"$pop": {"scores": -1}}).await;
    upd(&c, doc! {"_id": 10}, doc! {"$pop": {"scores": 1}}).await;
    // empty array or missing field: no-op
    assert_eq!(
        upd(
            &c,
            doc! {"_id": 11},
            doc! {"$pop": {"scores": 1, "missing": -1}}
        )
        .await,
        (1, 0)
    );
    assert_docs(
        &all(&c).await,
        &[
            doc! {"_id": 1, "scores": [9, 10]},
            doc! {"_id": 10, "scores": [9]},
            doc! {"_id": 11, "scores": [], "n": 5},
        ],
    );
    assert_eq!(
        upd_err(&c, doc! {"_id": 11}, doc! {"$pop": {"scores": 2}}).await,
        9
    );
    assert_eq!(
        upd_err(&c, doc! {"_id": 11}, doc! {"$pop": {"scores": "x"}}).await,
        9
    );
    assert_eq!(
        upd_err(&c, doc! {"_id": 11}, doc! {"$pop": {"n": 1}}).await,
        14
    );
}

/// The $bit page.
#[tokio::test]
async fn bit_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("ubit");
    let c = setup(
        &db,
        "switches",
        vec![
            doc! {"_id": 1, "expdata": 13_i32},
            doc! {"_id": 2, "expdata": 3_i64},
            doc! {"_id": 3, "expdata": 1_i64},
            doc! {"_id": 4, "expdata": 13_i32, "d": 1.5},
        ],
    )
    .await;
    upd(
        &c,
        doc! {"_id": 1},
        doc! {"$bit": {"expdata": {"and": 10_i32}}},
    )
    .await;
    upd(
        &c,
        doc! {"_id": 2},
        doc! {"$bit": {"expdata": {"or": 5_i32}}},
    )
    .await;
    upd(
        &c,
        doc! {"_id": 3},
        doc! {"$bit": {"expdata": {"xor": 5_i32}}},
    )
    .await;
    // several operations apply in order; a missing field starts from 0
    upd(
        &c,
        doc! {"_id": 4},
        doc! {"$bit": {"expdata": {"and": 12, "or": 1}, "fresh": {"or": 5}}},
    )
    .await;
    assert_docs(
        &all(&c).await,
        &[
            doc! {"_id": 1, "expdata": 8_i32},
            doc! {"_id": 2, "expdata": 7_i64},
            doc! {"_id": 3, "expdata": 4_i64},
            doc! {"_id": 4, "expdata": 13_i32, "d": 1.5, "fresh": 5_i32},
        ],
    );
    for bad in [
        doc! {"$bit": {"expdata": {"not": 1}}},
        doc! {"$bit": {"expdata": {}}},
        doc! {"$bit": {"expdata": {"and": 1.5}}},
        doc! {"$bit": {"d": {"and": 1}}},
        doc! {"$bit": {"expdata": "and"}},
    ] {
        assert_eq!(upd_err(&c, doc! {"_id": 4}, bad.clone()).await, 2, "{bad}");
    }
}

// ---------------------------------------------------------------------------------------------
// positional operators

/// The `$` update page.
#[tokio::test]
async fn positional_update_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("upos");
    let st = setup(
        &db,
        "students",
        vec![
            doc! {"_id": 1, "grades": [85, 80, 80]},
            doc! {"_id": 2, "grades": [88, 90, 92]},
            doc! {"_id": 3, "grades": [85, 100, 90]},
            doc! {"_id": 4, "grades": [{"grade": 80, "mean": 75, "std": 8}, {"grade": 85, "mean": 90, "std": 5}, {"grade": 85, "mean": 85, "std": 8}]},
            doc! {"_id": 5, "grades": [{"grade": 80, "mean": 75, "std": 8}, {"grade": 85, "mean": 90, "std": 5}, {"grade": 90, "mean": 85, "std": 3}]},
        ],
    )
    .await;
    upd(
        &st,
        doc! {"_id": 1, "grades": 80},
        doc! {"$set": {"grades.$": 82}},
    )
    .await;
    upd(
        &st,
        doc! {"_id": 4, "grades.grade": 85},
        doc! {"$set": {"grades.$.std": 6}},
    )
    .await;
    upd(
        &st,
        doc! {"_id": 5, "grades": {"$elemMatch": {"grade": {"$lte": 90}, "mean": {"$gt": 80}}}},
        doc! {"$set": {"grades.$.std": 6}},
    )
    .await;
    // the first matching element of a range condition
    upd(
        &st,
        doc! {"_id": 3, "grades": {"$gt": 86}},
        doc! {"$inc": {"grades.$": 1}},
    )
    .await;
    assert_docs(
        &all(&st).await,
        &[
            doc! {"_id": 1, "grades": [85, 82, 80]},
            doc! {"_id": 2, "grades": [88, 90, 92]},
            doc! {"_id": 3, "grades": [85, 101, 90]},
            doc! {"_id": 4, "grades": [{"grade": 80, "mean": 75, "std": 8}, {"grade": 85, "mean": 90, "std": 6}, {"grade": 85, "mean": 85, "std": 8}]},
            doc! {"_id": 5, "grades": [{"grade": 80, "mean": 75, "std": 8}, {"grade": 85, "mean": 90, "std": 6}, {"grade": 90, "mean": 85, "std": 3}]},
        ],
    );
    // $ with updateMany updates the matched element of each document
    upd_many(&st, doc! {"grades": 90}, doc! {"$set": {"grades.$": 91}}).await;
    assert_eq!(
        one(&st, 2).await.get_array("grades").unwrap(),
        &vec![Bson::Int32(88), Bson::Int32(91), Bson::Int32(92)]
    );
    assert_eq!(
        one(&st, 3).await.get_array("grades").unwrap(),
        &vec![Bson::Int32(85), Bson::Int32(101), Bson::Int32(91)]
    );
    // without the array in the query: BadValue
    assert_eq!(
        upd_err(&st, doc! {"_id": 1}, doc! {"$set": {"grades.$": 1}}).await,
        2
    );
    // upsert cannot use the positional operator
    let e = st
        .update_one(
            doc! {"_id": 99, "grades": 5},
            doc! {"$set": {"grades.$": 1}},
        )
        .upsert(true)
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 2);
    // two positional operators
    assert_eq!(
        upd_err(
            &st,
            doc! {"_id": 4, "grades.grade": 85},
            doc! {"$set": {"grades.$.x.$": 1}}
        )
        .await,
        2
    );
}

/// The `$[]` page.
#[tokio::test]
async fn all_positional_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("uposall");
    let st = setup(
        &db,
        "students",
        vec![
            doc! {"_id": 1, "grades": [85, 82, 80]},
            doc! {"_id": 2, "grades": [88, 90, 92]},
            doc! {"_id": 3, "grades": [85, 100, 90]},
        ],
    )
    .await;
    assert_eq!(
        upd_many(&st, doc! {}, doc! {"$inc": {"grades.$[]": 10}}).await,
        (3, 3)
    );
    assert_docs(
        &all(&st).await,
        &[
            doc! {"_id": 1, "grades": [95, 92, 90]},
            doc! {"_id": 2, "grades": [98, 100, 102]},
            doc! {"_id": 3, "grades": [95, 110, 100]},
        ],
    );
    let st2 = setup(
        &db,
        "students2",
        vec![
            doc! {"_id": 1, "grades": [{"grade": 80, "mean": 75, "std": 8}, {"grade": 85, "mean": 90, "std": 6}, {"grade": 85, "mean": 85, "std": 8}]},
            doc! {"_id": 2, "grades": [{"grade": 90, "mean": 75, "std": 8}, {"grade": 87, "mean": 90, "std": 5}, {"grade": 85, "mean": 85, "std": 6}]},
        ],
    )
    .await;
    upd_many(&st2, doc! {}, doc! {"$inc": {"grades.$[].std": -2}}).await;
    assert_docs(
        &all(&st2).await,
        &[
            doc! {"_id": 1, "grades": [{"grade": 80, "mean": 75, "std": 6}, {"grade": 85, "mean": 90, "std": 4}, {"grade": 85, "mean": 85, "std": 6}]},
            doc! {"_id": 2, "grades": [{"grade": 90, "mean": 75, "std": 6}, {"grade": 87, "mean": 90, "std": 3}, {"grade": 85, "mean": 85, "std": 4}]},
        ],
    );
    // upsert: the array comes from the query's equality
    let up = db.collection::<Document>("upsert");
    let r = up
        .update_one(doc! {"myArray": [5, 8]}, doc! {"$set": {"myArray.$[]": 10}})
        .upsert(true)
        .await
        .unwrap();
    assert!(r.upserted_id.is_some());
    let d = up
        .find_one(doc! {})
        .projection(doc! {"_id": 0})
        .await
        .unwrap()
        .unwrap();
    assert_docs(&[d], &[doc! {"myArray": [10, 10]}]);
    // upsert without the array in the query: BadValue
    let e = up
        .update_one(doc! {"nope": 1}, doc! {"$set": {"otherArray.$[]": 10}})
        .upsert(true)
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 2);
    // nested: $[] combined with $[<identifier>]
    let nested = setup(
        &db,
        "nested",
        vec![doc! {"_id": 1, "grades": [
        {"type": "quiz", "questions": [10, 8, 5]},
        {"type": "quiz", "questions": [8, 9, 6]},
        {"type": "hw", "questions": [5, 4, 3]},
        {"type": "exam", "questions": [25, 10, 23, 0]}]}],
    )
    .await;
    nested
        .update_many(doc! {}, doc! {"$inc": {"grades.$[].questions.$[score]": 2}})
        .array_filters(vec![doc! {"score": {"$gte": 8}}])
        .await
        .unwrap();
    assert_docs(
        &[one(&nested, 1).await],
        &[doc! {"_id": 1, "grades": [
        {"type": "quiz", "questions": [12, 10, 5]},
        {"type": "quiz", "questions": [10, 11, 6]},
        {"type": "hw", "questions": [5, 4, 3]},
        {"type": "exam", "questions": [27, 12, 25, 0]}]}],
    );
    // $[] on a non-array
    let n = setup(&db, "notarr", vec![doc! {"_id": 1, "a": 5}]).await;
    assert_eq!(
        upd_err(&n, doc! {"_id": 1}, doc! {"$set": {"a.$[]": 1}}).await,
        2
    );
}

/// The `$[<identifier>]` page.
#[tokio::test]
async fn filtered_positional_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("uposf");
    let st = setup(
        &db,
        "students",
        vec![
            doc! {"_id": 1, "grades": [95, 92, 90]},
            doc! {"_id": 2, "grades": [98, 100, 102]},
            doc! {"_id": 3, "grades": [95, 110, 100]},
        ],
    )
    .await;
    let r = st
        .update_many(doc! {}, doc! {"$set": {"grades.$[element]": 100}})
        .array_filters(vec![doc! {"element": {"$gte": 100}}])
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (3, 2));
    assert_docs(
        &all(&st).await,
        &[
            doc! {"_id": 1, "grades": [95, 92, 90]},
            doc! {"_id": 2, "grades": [98, 100, 100]},
            doc! {"_id": 3, "grades": [95, 100, 100]},
        ],
    );
    let st2 = setup(
        &db,
        "students2",
        vec![
            doc! {"_id": 1, "grades": [{"grade": 80, "mean": 75, "std": 6}, {"grade": 85, "mean": 90, "std": 4}, {"grade": 85, "mean": 85, "std": 6}]},
            doc! {"_id": 2, "grades": [{"grade": 90, "mean": 75, "std": 6}, {"grade": 87, "mean": 90, "std": 3}, {"grade": 85, "mean": 85, "std": 4}]},
        ],
    )
    .await;
    st2.update_many(doc! {}, doc! {"$set": {"grades.$[elem].mean": 100}})
        .array_filters(vec![doc! {"elem.grade": {"$gte": 85}}])
        .await
        .unwrap();
    assert_docs(
        &all(&st2).await,
        &[
            doc! {"_id": 1, "grades": [{"grade": 80, "mean": 75, "std": 6}, {"grade": 85, "mean": 100, "std": 4}, {"grade": 85, "mean": 100, "std": 6}]},
            doc! {"_id": 2, "grades": [{"grade": 90, "mean": 100, "std": 6}, {"grade": 87, "mean": 100, "std": 3}, {"grade": 85, "mean": 100, "std": 4}]},
        ],
    );
    // several conditions in one filter
    st2.update_many(doc! {}, doc! {"$inc": {"grades.$[elem].std": -1}})
        .array_filters(vec![
            doc! {"elem.grade": {"$gte": 80}, "elem.std": {"$gt": 5}},
        ])
        .await
        .unwrap();
    assert_docs(
        &all(&st2).await,
        &[
            doc! {"_id": 1, "grades": [{"grade": 80, "mean": 75, "std": 5}, {"grade": 85, "mean": 100, "std": 4}, {"grade": 85, "mean": 100, "std": 5}]},
            doc! {"_id": 2, "grades": [{"grade": 90, "mean": 100, "std": 5}, {"grade": 87, "mean": 100, "std": 3}, {"grade": 85, "mean": 100, "std": 4}]},
        ],
    );
    // negation
    let alumni = setup(
        &db,
        "alumni",
        vec![
            doc! {"_id": 1, "name": "Christine Franklin", "degrees": [{"level": "Master"}, {"level": "Bachelor"}]},
            doc! {"_id": 2, "name": "Reyansh Sengupta", "degrees": [{"level": "Bachelor"}]},
        ],
    )
    .await;
    let r = alumni
        .update_many(
            doc! {},
            doc! {"$set": {"degrees.$[degree].gradcampaign": 1}},
        )
        .array_filters(vec![doc! {"degree.level": {"$ne": "Bachelor"}}])
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (2, 1));
    assert_docs(
        &all(&alumni).await,
        &[
            doc! {"_id": 1, "name": "Christine Franklin", "degrees": [{"level": "Master", "gradcampaign": 1}, {"level": "Bachelor"}]},
            doc! {"_id": 2, "name": "Reyansh Sengupta", "degrees": [{"level": "Bachelor"}]},
        ],
    );
    // nested identifiers
    let nested = setup(
        &db,
        "nested",
        vec![doc! {"_id": 1, "grades": [
        {"type": "quiz", "questions": [10, 8, 5]},
        {"type": "quiz", "questions": [8, 9, 6]},
        {"type": "hw", "questions": [5, 4, 3]},
        {"type": "exam", "questions": [25, 10, 23, 0]}]}],
    )
    .await;
    nested
        .update_many(
            doc! {},
            doc! {"$inc": {"grades.$[t].questions.$[score]": 2}},
        )
        .array_filters(vec![doc! {"t.type": "quiz"}, doc! {"score": {"$gte": 8}}])
        .await
        .unwrap();
    assert_docs(
        &[one(&nested, 1).await],
        &[doc! {"_id": 1, "grades": [
        {"type": "quiz", "questions": [12, 10, 5]},
        {"type": "quiz", "questions": [10, 11, 6]},
        {"type": "hw", "questions": [5, 4, 3]},
        {"type": "exam", "questions": [25, 10, 23, 0]}]}],
    );
    // arrayFilters errors
    let cases: Vec<(Document, Vec<Document>, i32)> = vec![
        // identifier without a filter
        (doc! {"$set": {"grades.$[x]": 1}}, vec![], 2),
        // filter never used
        (
            doc! {"$set": {"grades.$[x]": 1}},
            vec![doc! {"x": 1}, doc! {"y": 1}],
            9,
        ),
        // two filters for one identifier
        (
            doc! {"$set": {"grades.$[x]": 1}},
            vec![doc! {"x": 1}, doc! {"x": 2}],
            9,
        ),
        // identifiers must start with a lowercase letter
        (doc! {"$set": {"grades.$[X]": 1}}, vec![doc! {"X": 1}], 2),
    ];
    for (update, filters, code) in cases {
        let e = st
            .update_one(doc! {"_id": 1}, update.clone())
            .array_filters(filters.clone())
            .await
            .unwrap_err();
        assert_eq!(code_of(&e), code, "{update} {filters:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// upserts, replacement, replies

#[tokio::test]
async fn upserts_build_documents_from_the_query() {
    let s = TestServer::start();
    let db = s.client().await.database("uups");
    let c = db.collection::<Document>("c");
    // equality fields (dotted paths, $eq, $and) are copied; other operators are not
    let r = c
        .update_one(
            doc! {"_id": 5, "b.c": 2, "a": {"$eq": 1}, "x": {"$gt": 5}, "$and": [{"z": 9}]},
            doc! {"$set": {"d": 1}},
        )
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(r.upserted_id, Some(Bson::Int32(5)));
    let d = one(&c, 5).await;
    assert_eq!(d.len(), 5, "{d}");
    assert_eq!(d.get_i32("a").unwrap(), 1);
    assert_eq!(d.get_document("b").unwrap(), &doc! {"c": 2});
    assert_eq!(d.get_i32("z").unwrap(), 9);
    assert_eq!(d.get_i32("d").unwrap(), 1);
    assert!(d.get("x").is_none());
    // the _id is generated (ObjectId) and placed first
    let r = c
        .update_one(
            doc! {"name": "Gus", "state": "active", "rating": 100},
            doc! {"$inc": {"score": 1}},
        )
        .upsert(true)
        .await
        .unwrap();
    let id = r.upserted_id.expect("upserted id");
    assert!(matches!(id, Bson::ObjectId(_)));
    let d = one(&c, id.clone()).await;
    assert_eq!(d.keys().next().map(String::as_str), Some("_id"));
    assert_eq!(d.keys().last().map(String::as_str), Some("score"));
    assert_eq!(d.len(), 5, "{d}");
    // replacement upserts take only the _id from the query
    let r = c
        .replace_one(doc! {"_id": 7, "k": 1}, doc! {"v": 2})
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(r.upserted_id, Some(Bson::Int32(7)));
    assert_docs(&[one(&c, 7).await], &[doc! {"_id": 7, "v": 2}]);
    let r = c
        .replace_one(doc! {"k": 3}, doc! {"v": 3})
        .upsert(true)
        .await
        .unwrap();
    let id = r.upserted_id.unwrap();
    assert_docs(&[one(&c, id.clone()).await], &[doc! {"_id": id, "v": 3}]);
    // an upsert with multi inserts one document
    let r = c
        .update_many(doc! {"group": "new"}, doc! {"$set": {"m": 1}})
        .upsert(true)
        .await
        .unwrap();
    assert!(r.upserted_id.is_some());
    assert_eq!(
        collect(c.find(doc! {"group": "new"}).await.unwrap())
            .await
            .len(),
        1
    );
}

/// The upsert document is built from the query's equality predicates, which MongoDB collects
/// in a std::map keyed by path (pathsupport::EqualityMatches) and so creates in path order;
/// the update's own fields follow. (_id sorts before lowercase names.)
#[tokio::test]
async fn upsert_creates_query_equality_fields_in_path_order() {
    let s = TestServer::start();
    let db = s.client().await.database("uupsord");
    let c = db.collection::<Document>("c");
    c.update_one(
        doc! {"_id": 5, "b.c": 2, "a": {"$eq": 1}, "x": {"$gt": 5}, "$and": [{"z": 9}]},
        doc! {"$set": {"d": 1}},
    )
    .upsert(true)
    .await
    .unwrap();
    assert_docs(
        &[one(&c, 5).await],
        &[doc! {"_id": 5, "a": 1, "b": {"c": 2}, "z": 9, "d": 1}],
    );
    // the findAndModify page's upsert example
    let r = c
        .update_one(
            doc! {"name": "Gus", "state": "active", "rating": 100},
            doc! {"$inc": {"score": 1}},
        )
        .upsert(true)
        .await
        .unwrap();
    let id = r.upserted_id.unwrap();
    assert_docs(
        &[one(&c, id.clone()).await],
        &[doc! {"_id": id, "name": "Gus", "rating": 100, "state": "active", "score": 1}],
    );
}

#[tokio::test]
async fn update_command_replies() {
    let s = TestServer::start();
    let db = s.client().await.database("ureply");
    setup(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "a": 1},
            doc! {"_id": 2, "a": 1},
            doc! {"_id": 3, "a": 2},
        ],
    )
    .await;
    let r = db
        .run_command(doc! {"update": "c", "updates": [
            {"q": {"_id": 10}, "u": {"$set": {"x": 1}}, "upsert": true},
            {"q": {"a": 1}, "u": {"$set": {"a": 1}}, "multi": true},
            {"q": {"a": 1}, "u": {"$set": {"b": 1}}, "multi": true},
            {"q": {"nothing": true}, "u": {"$set": {"y": 1}}, "upsert": true},
            {"q": {"nothing": true}, "u": {"$set": {"y": 1}}},
            {"q": {"_id": 3}, "u": {"a": 2}},
        ]})
        .await
        .unwrap();
    // n counts matched plus upserted documents (statement 4 matches the document statement 3
    // inserted); nModified excludes no-ops
    assert_eq!(r.get_i32("n").unwrap(), 1 + 2 + 2 + 1 + 1 + 1);
    assert_eq!(r.get_i32("nModified").unwrap(), 2);
    let ups = r.get_array("upserted").unwrap();
    assert_eq!(ups.len(), 2);
    let u0 = ups[0].as_document().unwrap();
    assert_eq!(u0.get_i32("index").unwrap(), 0);
    assert_eq!(u0.get("_id"), Some(&Bson::Int32(10)));
    let u1 = ups[1].as_document().unwrap();
    assert_eq!(u1.get_i32("index").unwrap(), 3);
    assert!(matches!(u1.get("_id"), Some(Bson::ObjectId(_))));
    assert!(r.get("writeErrors").is_none());
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);

    // no upserts: no upserted field
    let r = db
        .run_command(doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"a": 1}}}]})
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 1);
    assert_eq!(r.get_i32("nModified").unwrap(), 1);
    assert!(r.get("upserted").is_none());

    // the Halloween problem: a multi update that moves documents within the scanned range
    // still updates each document once
    let h = setup(
        &db,
        "halloween",
        (0..200).map(|i: i32| doc! {"_id": i, "v": i}).collect(),
    )
    .await;
    assert_eq!(
        upd_many(&h, doc! {"v": {"$gte": 0}}, doc! {"$inc": {"v": 1000}}).await,
        (200, 200)
    );
    let vs: Vec<i32> = all(&h)
        .await
        .iter()
        .map(|d| d.get_i32("v").unwrap())
        .collect();
    assert_eq!(vs, (1000..1200).collect::<Vec<_>>());
}

#[tokio::test]
async fn ordered_and_unordered_update_write_errors() {
    let s = TestServer::start();
    let db = s.client().await.database("uerrs");
    setup(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "n": 1, "s": "x"},
            doc! {"_id": 2, "n": 1, "s": "x"},
            doc! {"_id": 3, "n": 1, "s": "x"},
        ],
    )
    .await;
    let updates = vec![
        doc! {"q": {"_id": 1}, "u": {"$inc": {"n": 1}}},
        doc! {"q": {"_id": 2}, "u": {"$inc": {"s": 1}}},
        doc! {"q": {"_id": 3}, "u": {"$inc": {"n": 1}}},
        doc! {"q": {"_id": 3}, "u": {"$set": {"_id": 4}}},
        doc! {"q": {"_id": 3}, "u": {"$bogus": {"n": 1}}},
    ];
    // ordered (the default): stops at the first error
    let r = db
        .run_command(doc! {"update": "c", "updates": updates.clone()})
        .await
        .unwrap();
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    assert_eq!(r.get_i32("n").unwrap(), 1);
    assert_eq!(r.get_i32("nModified").unwrap(), 1);
    let we = r.get_array("writeErrors").unwrap();
    assert_eq!(we.len(), 1);
    let e0 = we[0].as_document().unwrap();
    assert_eq!(e0.get_i32("index").unwrap(), 1);
    assert_eq!(e0.get_i32("code").unwrap(), 14);
    assert!(e0.get_str("errmsg").is_ok());
    // unordered: every statement runs, each error reported with its index
    let r = db
        .run_command(doc! {"update": "c", "updates": updates, "ordered": false})
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 2);
    assert_eq!(r.get_i32("nModified").unwrap(), 2);
    let we = r.get_array("writeErrors").unwrap();
    let got: Vec<(i32, i32)> = we
        .iter()
        .map(|e| {
            let e = e.as_document().unwrap();
            (e.get_i32("index").unwrap(), e.get_i32("code").unwrap())
        })
        .collect();
    assert_eq!(got, [(1, 14), (3, 66), (4, 9)]);
    let c = db.collection::<Document>("c");
    assert_docs(
        &all(&c).await,
        &[
            doc! {"_id": 1, "n": 3, "s": "x"},
            doc! {"_id": 2, "n": 1, "s": "x"},
            doc! {"_id": 3, "n": 2, "s": "x"},
        ],
    );
}

/// Statement-level parse errors are per-statement write errors (the update is parsed when the
/// statement runs): replacement with multi, operators mixed with plain fields, bad
/// arrayFilters.
#[tokio::test]
async fn update_statement_parse_errors_are_write_errors() {
    let s = TestServer::start();
    let db = s.client().await.database("uparse");
    setup(&db, "c", vec![doc! {"_id": 1, "a": [1, 2]}]).await;
    let r = db
        .run_command(doc! {"update": "c", "ordered": false, "updates": [
            {"q": {"_id": 1}, "u": {"b": 1}, "multi": true},
            {"q": {"_id": 1}, "u": {"$set": {"a": 1}, "b": 2}},
            {"q": {"_id": 1}, "u": {"a": 1, "$set": {"b": 2}}},
            {"q": {"_id": 1}, "u": {"$set": {"a.$[x]": 0}}, "arrayFilters": [{"x": 1, "y": 1}]},
            {"q": {"_id": 1}, "u": {"$set": {"a.$[x]": 0}}, "arrayFilters": ["bad"]},
            {"q": {"_id": 1}, "u": {"$set": {"a.$[x]": 0}}, "arrayFilters": [{"x": {"$bogus": 1}}]},
            {"q": {"_id": 1}, "u": {"$set": {"a.$[x]": 0}}, "arrayFilters": [{"x": 2}]},
        ]})
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 1);
    assert_eq!(r.get_i32("nModified").unwrap(), 1);
    let got: Vec<(i32, i32)> = r
        .get_array("writeErrors")
        .unwrap()
        .iter()
        .map(|e| {
            let e = e.as_document().unwrap();
            (e.get_i32("index").unwrap(), e.get_i32("code").unwrap())
        })
        .collect();
    // FailedToParse for multi replacement, unknown modifier "b" and a multi-field array
    // filter; DollarPrefixedFieldName for $set inside a replacement; TypeMismatch for a
    // non-object filter; BadValue for an unknown operator in a filter
    assert_eq!(got, [(0, 9), (1, 9), (2, 52), (3, 9), (4, 14), (5, 2)]);
    assert_docs(
        &[one(&db.collection("c"), 1).await],
        &[doc! {"_id": 1, "a": [1, 0]}],
    );
}

#[tokio::test]
async fn update_operator_errors() {
    let s = TestServer::start();
    let db = s.client().await.database("uopserr");
    let c = setup(
        &db,
        "c",
        vec![doc! {"_id": 1, "a": 5, "d": {"x": 1}, "arr": [{"b": 1}, {"b": 2}]}],
    )
    .await;
    let f = doc! {"_id": 1};
    for (update, code) in [
        // conflicting paths
        (doc! {"$set": {"a": 1}, "$inc": {"a": 1}}, 40),
        (doc! {"$set": {"d.x": 1}, "$unset": {"d": 1}}, 40),
        (doc! {"$set": {"d": 1, "d.y": 2}}, 40),
        (doc! {"$rename": {"a": "q"}, "$set": {"q": 1}}, 40),
        // _id is immutable
        (doc! {"$set": {"_id": 2}}, 66),
        (doc! {"$unset": {"_id": 1}}, 66),
        (doc! {"$inc": {"_id": 1}}, 66),
        // cannot create a field inside a scalar / through an array without an index
        (doc! {"$set": {"a.b": 1}}, 28),
        (doc! {"$set": {"arr.b": 1}}, 28),
        // unknown modifier; modifiers need objects
        (doc! {"$foo": {"a": 1}}, 9),
        (doc! {"$set": 5}, 9),
        // empty field names
        (doc! {"$set": {"": 1}}, 56),
        (doc! {"$set": {"d..x": 1}}, 56),
        (doc! {"$set": {"d.": 1}}, 56),
    ] {
        assert_eq!(
            upd_err(&c, f.clone(), update.clone()).await,
            code,
            "{update}"
        );
    }
    // setting _id to its current value is allowed
    assert_eq!(upd(&c, f.clone(), doc! {"$set": {"_id": 1}}).await, (1, 0));
    // the document is unchanged by the failed updates
    assert_docs(
        &[one(&c, 1).await],
        &[doc! {"_id": 1, "a": 5, "d": {"x": 1}, "arr": [{"b": 1}, {"b": 2}]}],
    );
}

/// "The _id field is always the first field in the document" (manual, Update Documents ›
/// Field Order): a replacement that names _id elsewhere is stored with _id first (as 6.0/7.0
/// do; see SERVER-91730, where only the oplog entry keeps the client's order).
#[tokio::test]
async fn replacement_stores_id_first() {
    let s = TestServer::start();
    let db = s.client().await.database("ureplid");
    let c = setup(
        &db,
        "c",
        vec![doc! {"_id": 2, "item": "planner", "qty": 75}],
    )
    .await;
    c.replace_one(
        doc! {"_id": 2},
        doc! {"item": "planner", "_id": 2, "qty": 70},
    )
    .await
    .unwrap();
    assert_docs(
        &[one(&c, 2).await],
        &[doc! {"_id": 2, "item": "planner", "qty": 70}],
    );
    // the same through findAndModify and an upsert
    db.run_command(
        doc! {"findAndModify": "c", "query": {"_id": 2}, "update": {"qty": 1, "_id": 2}},
    )
    .await
    .unwrap();
    assert_docs(&[one(&c, 2).await], &[doc! {"_id": 2, "qty": 1}]);
    c.replace_one(doc! {"_id": 3}, doc! {"v": 1, "_id": 3})
        .upsert(true)
        .await
        .unwrap();
    assert_docs(&[one(&c, 3).await], &[doc! {"_id": 3, "v": 1}]);
}

/// replaceOne: the replacement keeps _id, an _id change fails.
#[tokio::test]
async fn replacement_documents() {
    let s = TestServer::start();
    let db = s.client().await.database("urepl");
    let c = setup(
        &db,
        "inventory",
        vec![
            doc! {"_id": 1, "item": "paper", "qty": 100, "size": {"h": 8.5, "w": 11, "uom": "in"}, "status": "D"},
            doc! {"_id": 2, "item": "planner", "qty": 75},
        ],
    )
    .await;
    let r = c
        .replace_one(
            doc! {"item": "paper"},
            doc! {"item": "paper", "instock": [{"warehouse": "A", "qty": 60}, {"warehouse": "B", "qty": 40}]},
        )
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    assert_docs(
        &[one(&c, 1).await],
        &[
            doc! {"_id": 1, "item": "paper", "instock": [{"warehouse": "A", "qty": 60}, {"warehouse": "B", "qty": 40}]},
        ],
    );
    // a replacement without _id keeps the document's _id
    c.replace_one(doc! {"_id": 2}, doc! {"item": "planner", "qty": 70})
        .await
        .unwrap();
    assert_docs(
        &[one(&c, 2).await],
        &[doc! {"_id": 2, "item": "planner", "qty": 70}],
    );
    // an identical replacement is a no-op
    let r = c
        .replace_one(
            doc! {"_id": 2},
            doc! {"_id": 2, "item": "planner", "qty": 70},
        )
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 0));
    // changing _id fails
    let e = c
        .replace_one(doc! {"_id": 2}, doc! {"_id": 3, "item": "x"})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 66);
    // an empty replacement keeps only _id
    db.run_command(doc! {"update": "inventory", "updates": [{"q": {"_id": 2}, "u": {}}]})
        .await
        .unwrap();
    assert_docs(&[one(&c, 2).await], &[doc! {"_id": 2}]);
}

/// Smaller $set/$unset/$rename details: creating through missing array indexes, numeric field
/// names of objects, renames into new embedded documents, positional $unset/$pull/$push.
#[tokio::test]
async fn path_details() {
    let s = TestServer::start();
    let db = s.client().await.database("upaths");
    let c = setup(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "a": [1], "o": {"0": 1}, "r": 1, "nil": null},
            doc! {"_id": 2, "g": [{"k": 1, "l": [1, 2, 3]}, {"k": 2, "l": [4, 5]}]},
        ],
    )
    .await;
    upd(
        &c,
        doc! {"_id": 1},
        doc! {"$set": {"a.2.b": 1, "o.0": 5, "o.1": 6}, "$rename": {"r": "x.y"}},
    )
    .await;
    assert_docs(
        &[one(&c, 1).await],
        &[
            doc! {"_id": 1, "a": [1, null, {"b": 1}], "o": {"0": 5, "1": 6}, "nil": null, "x": {"y": 1}},
        ],
    );
    // cannot create a field inside null
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$set": {"nil.b": 1}}).await,
        28
    );
    // positional $unset leaves null; positional $pull/$push work on the matched element
    upd(&c, doc! {"_id": 2, "g.k": 2}, doc! {"$pull": {"g.$.l": 4}}).await;
    upd(&c, doc! {"_id": 2, "g.k": 1}, doc! {"$push": {"g.$.l": 9}}).await;
    upd(&c, doc! {"_id": 2, "g.l": 2}, doc! {"$unset": {"g.$": 1}}).await;
    assert_docs(
        &[one(&c, 2).await],
        &[doc! {"_id": 2, "g": [null, {"k": 2, "l": [5]}]}],
    );
    // $min/$max/$mul/$currentDate through array indexes
    let d = setup(&db, "d", vec![doc! {"_id": 1, "v": [5, 5, 5, {"t": 1}]}]).await;
    upd(
        &d,
        doc! {"_id": 1},
        doc! {"$min": {"v.0": 1}, "$max": {"v.1": 9}, "$mul": {"v.2": 3}, "$currentDate": {"v.3.t": true}},
    )
    .await;
    let v = one(&d, 1).await;
    let arr = v.get_array("v").unwrap();
    assert_eq!(arr[..3], [Bson::Int32(1), Bson::Int32(9), Bson::Int32(15)]);
    assert!(arr[3].as_document().unwrap().get_datetime("t").is_ok());
}

/// More numeric combinations and array-modifier corners.
#[tokio::test]
async fn arithmetic_and_array_corners() {
    let s = TestServer::start();
    let db = s.client().await.database("ucorners");
    let c = setup(
        &db,
        "c",
        vec![doc! {"_id": 1, "d": dec("1.5"), "l": 3_i64, "big": i64::MAX, "f": 2.5, "i": 7}],
    )
    .await;
    upd(
        &c,
        doc! {"_id": 1},
        doc! {"$inc": {"d": 0.5, "l": 0.5}, "$mul": {"f": dec("2"), "i": 2_i64}},
    )
    .await;
    // a double meets a decimal as Decimal128(double) rounded to 15 significant digits, as
    // MongoDB converts it: 0.5 -> 0.500000000000000, 2.5 -> 2.50000000000000
    assert_docs(
        &[one(&c, 1).await],
        &[
            doc! {"_id": 1, "d": dec("2.000000000000000"), "l": 3.5, "big": i64::MAX,
            "f": dec("5.00000000000000"), "i": 14_i64},
        ],
    );
    // int64 overflow of $mul is an error
    assert_eq!(
        upd_err(&c, doc! {"_id": 1}, doc! {"$mul": {"big": 2}}).await,
        2
    );
    // $setOnInsert conflicts like any other operator
    assert_eq!(
        upd_err(
            &c,
            doc! {"_id": 1},
            doc! {"$setOnInsert": {"x": 1}, "$inc": {"x": 1}}
        )
        .await,
        40
    );

    let a = setup(
        &db,
        "arr",
        vec![doc! {"_id": 1, "tags": ["apple", "avocado", "banana", "Apricot"], "people": [{"n": "a", "age": 3}, {"n": "b"}, {"n": "c", "age": 9}]}],
    )
    .await;
    upd(
        &a,
        doc! {"_id": 1},
        doc! {"$pull": {"tags": bson::Regex { pattern: "^a".to_string().try_into().unwrap(), options: "".to_string().try_into().unwrap() }, "people": {"age": {"$exists": false}}}},
    )
    .await;
    // $push with $sort onto a missing field; $slice together with $position
    upd(
        &a,
        doc! {"_id": 1},
        doc! {"$push": {
            "fresh": {"$each": [3, 1, 2], "$sort": 1},
            "tags": {"$each": ["x", "y"], "$position": 0, "$slice": -2},
        }},
    )
    .await;
    assert_docs(
        &[one(&a, 1).await],
        &[
            doc! {"_id": 1, "tags": ["banana", "Apricot"], "people": [{"n": "a", "age": 3}, {"n": "c", "age": 9}], "fresh": [1, 2, 3]},
        ],
    );
    // $pullAll of documents is exact equality
    upd(
        &a,
        doc! {"_id": 1},
        doc! {"$pullAll": {"people": [{"n": "a"}, {"n": "c", "age": 9}]}},
    )
    .await;
    assert_eq!(
        one(&a, 1).await.get_array("people").unwrap(),
        &vec![Bson::Document(doc! {"n": "a", "age": 3})]
    );
}

// ---------------------------------------------------------------------------------------------
// pipeline-style updates

/// The manual's "Updates with Aggregation Pipeline" examples (`updateOne`/`updateMany` with
/// `$set`, `$replaceRoot`, `$unset`, `$$NOW`, and `let`).
#[tokio::test]
async fn pipeline_updates_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("upipe");
    let jan5 = DateTime::parse_rfc3339_str("2020-01-05T00:00:00Z").unwrap();
    let jan4 = DateTime::parse_rfc3339_str("2020-01-04T00:00:00Z").unwrap();
    let students = setup(
        &db,
        "students",
        vec![
            doc! {"_id": 1, "test1": 95, "test2": 92, "test3": 90, "modified": jan5},
            doc! {"_id": 2, "test1": 98, "test2": 100, "test3": 102, "modified": jan5},
            doc! {"_id": 3, "test1": 95, "test2": 110, "modified": jan4},
        ],
    )
    .await;
    let before = DateTime::now();
    let r = students
        .update_one(
            doc! {"_id": 3},
            vec![doc! {"$set": {"test3": 98, "modified": "$$NOW"}}],
        )
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    let d = one(&students, 3).await;
    let m = d.get_datetime("modified").unwrap();
    assert!(*m >= before && *m <= DateTime::now(), "{d}");
    assert_docs(
        std::slice::from_ref(&d),
        &[doc! {"_id": 3, "test1": 95, "test2": 110, "modified": *m, "test3": 98}],
    );

    let students2 = setup(
        &db,
        "students2",
        vec![
            doc! {"_id": 1, "quiz1": 8, "test2": 100, "quiz2": 9, "modified": jan5},
            doc! {"_id": 2, "quiz2": 5, "test1": 80, "test2": 89, "modified": jan5},
        ],
    )
    .await;
    let r = students2
        .update_many(
            doc! {},
            vec![
                doc! {"$replaceRoot": {"newRoot": {"$mergeObjects": [
                {"quiz1": 0, "quiz2": 0, "test1": 0, "test2": 0}, "$$ROOT"]}}},
                doc! {"$set": {"modified": "$$NOW"}},
            ],
        )
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (2, 2));
    let got = all(&students2).await;
    // One $$NOW for the whole command.
    let now = *got[0].get_datetime("modified").unwrap();
    assert_docs(
        &got,
        &[
            doc! {"_id": 1, "quiz1": 8, "quiz2": 9, "test1": 0, "test2": 100, "modified": now},
            doc! {"_id": 2, "quiz1": 0, "quiz2": 5, "test1": 80, "test2": 89, "modified": now},
        ],
    );

    let students3 = setup(
        &db,
        "students3",
        vec![
            doc! {"_id": 1, "tests": [95, 92, 90], "modified": jan5},
            doc! {"_id": 2, "tests": [94, 88, 90], "modified": jan5},
            doc! {"_id": 3, "tests": [70, 75, 82], "modified": jan5},
        ],
    )
    .await;
    students3
        .update_many(
            doc! {},
            vec![
                doc! {"$set": {"average": {"$trunc": [{"$avg": "$tests"}, 0]}}},
                doc! {"$set": {"grade": {"$switch": {
                "branches": [
                    {"case": {"$gte": ["$average", 90]}, "then": "A"},
                    {"case": {"$gte": ["$average", 80]}, "then": "B"},
                    {"case": {"$gte": ["$average", 70]}, "then": "C"},
                    {"case": {"$gte": ["$average", 60]}, "then": "D"},
                ],
                "default": "F"}}}},
                doc! {"$unset": "modified"},
            ],
        )
        .await
        .unwrap();
    assert_docs(
        &all(&students3).await,
        &[
            doc! {"_id": 1, "tests": [95, 92, 90], "average": 92.0, "grade": "A"},
            doc! {"_id": 2, "tests": [94, 88, 90], "average": 90.0, "grade": "A"},
            doc! {"_id": 3, "tests": [70, 75, 82], "average": 75.0, "grade": "C"},
        ],
    );

    let temps = setup(
        &db,
        "temperatures",
        vec![
            doc! {"_id": 1, "date": jan4, "tempsC": [4, 12, 17]},
            doc! {"_id": 2, "date": jan5, "tempsC": [5, 8, 10]},
        ],
    )
    .await;
    temps
        .update_many(
            doc! {},
            vec![doc! {"$addFields": {"tempsF": {"$map": {
            "input": "$tempsC", "as": "celsius",
            "in": {"$add": [{"$multiply": ["$$celsius", 9.0 / 5.0]}, 32]}}}}}],
        )
        .await
        .unwrap();
    assert_docs(
        &all(&temps).await,
        &[
            doc! {"_id": 1, "date": jan4, "tempsC": [4, 12, 17], "tempsF": [39.2, 53.6, 62.6]},
            doc! {"_id": 2, "date": jan5, "tempsC": [5, 8, 10], "tempsF": [41.0, 46.4, 50.0]},
        ],
    );

    // `let` variables in the filter and the pipeline.
    let cakes = setup(
        &db,
        "cakeFlavors",
        vec![
            doc! {"_id": 1, "flavor": "chocolate"},
            doc! {"_id": 2, "flavor": "strawberry"},
            doc! {"_id": 3, "flavor": "cherry"},
        ],
    )
    .await;
    cakes
        .update_one(
            doc! {"$expr": {"$eq": ["$flavor", "$$targetFlavor"]}},
            vec![doc! {"$set": {"flavor": "$$newFlavor"}}],
        )
        .let_vars(doc! {"targetFlavor": "cherry", "newFlavor": "orange"})
        .await
        .unwrap();
    assert_docs(
        &all(&cakes).await,
        &[
            doc! {"_id": 1, "flavor": "chocolate"},
            doc! {"_id": 2, "flavor": "strawberry"},
            doc! {"_id": 3, "flavor": "orange"},
        ],
    );
}

/// Upserts, no-ops, findAndModify, constants and the errors of pipeline updates.
#[tokio::test]
async fn pipeline_updates_upserts_and_errors() {
    let s = TestServer::start();
    let db = s.client().await.database("upipe2");
    let c = setup(&db, "c", vec![doc! {"_id": 1, "a": 1, "b": {"x": 1}}]).await;
    // A no-op pipeline matches but does not modify.
    let r = c
        .update_one(doc! {"_id": 1}, vec![doc! {"$set": {"a": 1}}])
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 0));
    // Upsert: seeded from the filter's equalities, then the pipeline.
    let r = c
        .update_one(
            doc! {"_id": 7, "k": "v", "n": {"$gt": 1}},
            vec![doc! {"$set": {"k2": {"$concat": ["$k", "!"]}}}],
        )
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(r.upserted_id, Some(Bson::Int32(7)));
    assert_docs(
        &[one(&c, 7).await],
        &[doc! {"_id": 7, "k": "v", "k2": "v!"}],
    );
    // findAndModify with a pipeline, returning the new document.
    let got = c
        .find_one_and_update(
            doc! {"_id": 1},
            vec![
                doc! {"$set": {"a": {"$multiply": ["$a", 10]}}},
                doc! {"$unset": "b"},
            ],
        )
        .return_document(mongodb::options::ReturnDocument::After)
        .await
        .unwrap();
    assert_docs(&[got.unwrap()], &[doc! {"_id": 1, "a": 10}]);
    // findAndModify upsert with a pipeline.
    let got = c
        .find_one_and_update(doc! {"_id": 8}, vec![doc! {"$set": {"made": true}}])
        .upsert(true)
        .return_document(mongodb::options::ReturnDocument::After)
        .await
        .unwrap();
    assert_docs(&[got.unwrap()], &[doc! {"_id": 8, "made": true}]);
    // Constants (`c`) are variables of the pipeline; with other updates they are 51198.
    let r = cmd(
        &db,
        doc! {"update": "c", "updates": [
            {"q": {"_id": 8}, "u": [{"$set": {"k": "$$Konst"}}], "c": {"Konst": 42}},
            {"q": {"_id": 8}, "u": {"$set": {"k": 1}}, "c": {"Konst": 42}},
        ], "ordered": false},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 1, "{r}");
    let we = r.get_array("writeErrors").unwrap();
    assert_eq!(we.len(), 1, "{r}");
    let e0 = we[0].as_document().unwrap();
    assert_eq!(e0.get_i32("index").unwrap(), 1);
    assert_eq!(e0.get_i32("code").unwrap(), 51198);
    assert_docs(
        &[one(&c, 8).await],
        &[doc! {"_id": 8, "made": true, "k": 42}],
    );

    // Errors: stages outside the update set (72), unknown stages, _id changes, arrayFilters.
    for (pipeline, code) in [
        (vec![doc! {"$match": {"a": 1}}], 72),
        (vec![doc! {"$set": {"z": 1}}, doc! {"$sort": {"a": 1}}], 72),
        (
            vec![doc! {"$lookup": {"from": "c", "as": "x", "pipeline": []}}],
            72,
        ),
        (vec![doc! {"$bogus": 1}], 40324),
        (vec![doc! {"$set": {"_id": 99}}], 66),
        (vec![doc! {"$set": {"y": {"$divide": [1, 0]}}}], 2),
    ] {
        match c.update_one(doc! {"_id": 1}, pipeline.clone()).await {
            Err(e) => assert_eq!(code_of(&e), code, "{pipeline:?}: {e}"),
            Ok(r) => panic!("{pipeline:?} succeeded: {r:?}"),
        }
    }
    let e = c
        .update_one(doc! {"_id": 1}, vec![doc! {"$set": {"a": 1}}])
        .array_filters(vec![doc! {"x": 1}])
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 9);
    assert!(
        e.to_string()
            .contains("arrayFilters may not be specified for pipeline-style updates"),
        "{e}"
    );
    let e = c
        .find_one_and_update(doc! {"_id": 1}, vec![doc! {"$match": {}}])
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 72);
    // Nothing changed by the failures.
    assert_docs(&[one(&c, 1).await], &[doc! {"_id": 1, "a": 10}]);
}
