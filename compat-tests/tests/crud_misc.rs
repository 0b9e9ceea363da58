//! delete, findAndModify, count, distinct and maxTimeMS through the Rust driver, following
//! the MongoDB 7.0 manual (command and method pages, "Delete Documents" tutorial).

use std::time::Duration;

use bson::{Bson, Document, doc, oid::ObjectId};
use cairn_compat_tests::{TestServer, assert_docs, bytes, cmd, code_of, collect};
use mongodb::error::ErrorKind;
use mongodb::options::ReturnDocument;
use mongodb::{Collection, Database};

// ---------------------------------------------------------------------------------------------
// helpers

/// Byte-for-byte equality of two BSON value lists (types matter: 1 and 1.0 differ).
#[track_caller]
fn assert_values(actual: &[Bson], expected: &[Bson]) {
    let wrap = |v: &[Bson]| bytes(&doc! {"v": v.to_vec()});
    assert!(
        wrap(actual) == wrap(expected),
        "values differ\nactual:   {actual:?}\nexpected: {expected:?}"
    );
}

fn keys(d: &Document) -> Vec<&str> {
    d.keys().map(String::as_str).collect()
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

async fn cmd_err(db: &Database, command: Document) -> i32 {
    match db.run_command(command.clone()).await {
        Err(e) => code_of(&e),
        Ok(r) => panic!("{command} succeeded: {r}"),
    }
}

// ---------------------------------------------------------------------------------------------
// delete

/// The "Delete Documents" tutorial, deleteOne/deleteMany.
#[tokio::test]
async fn delete_tutorial() {
    let s = TestServer::start();
    let db = s.client().await.database("del");
    let inv = setup(
        &db,
        "inventory",
        vec![
            doc! {"_id": 1, "item": "journal", "qty": 25, "size": {"h": 14, "w": 21, "uom": "cm"}, "status": "A"},
            doc! {"_id": 2, "item": "notebook", "qty": 50, "size": {"h": 8.5, "w": 11, "uom": "in"}, "status": "P"},
            doc! {"_id": 3, "item": "paper", "qty": 100, "size": {"h": 8.5, "w": 11, "uom": "in"}, "status": "D"},
            doc! {"_id": 4, "item": "planner", "qty": 75, "size": {"h": 22.85, "w": 30, "uom": "cm"}, "status": "D"},
            doc! {"_id": 5, "item": "postcard", "qty": 45, "size": {"h": 10, "w": 15.25, "uom": "cm"}, "status": "A"},
        ],
    )
    .await;
    let r = inv.delete_many(doc! {"status": "A"}).await.unwrap();
    assert_eq!(r.deleted_count, 2);
    let r = inv.delete_one(doc! {"status": "D"}).await.unwrap();
    assert_eq!(r.deleted_count, 1);
    let left: Vec<i32> = all(&inv)
        .await
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(left.len(), 2);
    assert!(left.contains(&2));
    // no match
    assert_eq!(
        inv.delete_many(doc! {"status": "Z"})
            .await
            .unwrap()
            .deleted_count,
        0
    );
    // dotted paths, operators
    assert_eq!(
        inv.delete_many(doc! {"size.uom": "in", "qty": {"$lt": 60}})
            .await
            .unwrap()
            .deleted_count,
        1
    );
    let r = inv.delete_many(doc! {}).await.unwrap();
    assert_eq!(r.deleted_count, 1);
    assert!(all(&inv).await.is_empty());
    // a missing collection
    let r = cmd(
        &db,
        doc! {"delete": "nope", "deletes": [{"q": {}, "limit": 0}]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 0);
}

#[tokio::test]
async fn delete_command_statements_and_write_errors() {
    let s = TestServer::start();
    let db = s.client().await.database("delcmd");
    let c = setup(
        &db,
        "c",
        (0..10).map(|i: i32| doc! {"_id": i, "g": i % 3}).collect(),
    )
    .await;
    // several statements, limit 1 and limit 0
    let r = cmd(
        &db,
        doc! {"delete": "c", "deletes": [
            {"q": {"g": 0}, "limit": 1},
            {"q": {"g": 1}, "limit": 0},
            {"q": {"g": 7}, "limit": 0},
        ]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 1 + 3);
    assert!(r.get("writeErrors").is_none());
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    let g: Vec<i32> = all(&c)
        .await
        .iter()
        .map(|d| d.get_i32("g").unwrap())
        .collect();
    assert_eq!(g.iter().filter(|&&x| x == 0).count(), 3);
    assert_eq!(g.iter().filter(|&&x| x == 1).count(), 0);
    assert_eq!(g.iter().filter(|&&x| x == 2).count(), 3);

    // a bad query is a per-statement write error; ordered stops, unordered continues
    let deletes = vec![
        doc! {"q": {"_id": 2}, "limit": 1},
        doc! {"q": {"$bogus": 1}, "limit": 0},
        doc! {"q": {"_id": 5}, "limit": 1},
        doc! {"q": {"_id": {"$in": 5}}, "limit": 1},
        doc! {"q": {"_id": 8}, "limit": 1},
    ];
    let r = cmd(&db, doc! {"delete": "c", "deletes": deletes.clone()}).await;
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    assert_eq!(r.get_i32("n").unwrap(), 1);
    let we = r.get_array("writeErrors").unwrap();
    assert_eq!(we.len(), 1);
    let e0 = we[0].as_document().unwrap();
    assert_eq!(e0.get_i32("index").unwrap(), 1);
    assert_eq!(e0.get_i32("code").unwrap(), 2);
    assert!(e0.get_str("errmsg").is_ok());
    let r = cmd(
        &db,
        doc! {"delete": "c", "deletes": deletes, "ordered": false},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 2);
    let got: Vec<(i32, i32)> = r
        .get_array("writeErrors")
        .unwrap()
        .iter()
        .map(|e| {
            let e = e.as_document().unwrap();
            (e.get_i32("index").unwrap(), e.get_i32("code").unwrap())
        })
        .collect();
    assert_eq!(got, [(1, 2), (3, 2)]);
    let ids: Vec<i32> = all(&c)
        .await
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert!(!ids.contains(&2) && !ids.contains(&5) && !ids.contains(&8));
}

/// The statements are parsed with the command (IDL `DeleteOpEntry`, `limit` of type
/// multiDeleteBool): a bad limit fails the whole command with FailedToParse, "The limit field
/// in delete objects must be 0 or 1. Got 2", and a missing one with 40414 (required field).
#[tokio::test]
async fn delete_limit_is_validated_with_the_command() {
    let s = TestServer::start();
    let db = s.client().await.database("dellimit");
    setup(&db, "c", vec![doc! {"_id": 1}]).await;
    assert_eq!(
        cmd_err(
            &db,
            doc! {"delete": "c", "deletes": [{"q": {}, "limit": 2}]}
        )
        .await,
        9
    );
    assert_eq!(
        cmd_err(
            &db,
            doc! {"delete": "c", "deletes": [{"q": {"_id": 1}, "limit": 1}, {"q": {}, "limit": 0.5}]}
        )
        .await,
        9
    );
    // nothing was deleted by the rejected batch
    assert_eq!(all(&db.collection("c")).await.len(), 1);
    assert_eq!(
        cmd_err(&db, doc! {"delete": "c", "deletes": [{"q": {}}]}).await,
        40414
    );
}

// ---------------------------------------------------------------------------------------------
// findAndModify

/// The findAndModify command page: update with sort (pre-image), upsert with new, remove.
#[tokio::test]
async fn find_and_modify_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("fam");
    let people = setup(
        &db,
        "people",
        vec![
            doc! {"_id": 1, "name": "Tom", "state": "active", "rating": 100, "score": 5},
            doc! {"_id": 2, "name": "Tom", "state": "active", "rating": 80, "score": 1},
            doc! {"_id": 3, "name": "Tom", "state": "active", "rating": 50, "score": 1},
        ],
    )
    .await;
    // update the lowest-rated match; the reply holds the document before the update
    let r = cmd(
        &db,
        doc! {"findAndModify": "people",
        "query": {"name": "Tom", "state": "active", "rating": {"$gt": 10}},
        "sort": {"rating": 1},
        "update": {"$inc": {"score": 1}}},
    )
    .await;
    assert_eq!(keys(&r)[..2], ["lastErrorObject", "value"]);
    let leo = r.get_document("lastErrorObject").unwrap();
    assert_eq!(keys(leo), ["n", "updatedExisting"]);
    assert_eq!(leo.get_i32("n").unwrap(), 1);
    assert!(leo.get_bool("updatedExisting").unwrap());
    assert_docs(
        &[r.get_document("value").unwrap().clone()],
        &[doc! {"_id": 3, "name": "Tom", "state": "active", "rating": 50, "score": 1}],
    );
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    assert_eq!(
        people
            .find_one(doc! {"_id": 3})
            .await
            .unwrap()
            .unwrap()
            .get_i32("score")
            .unwrap(),
        2
    );

    // upsert with new: the inserted document is returned
    let r = cmd(
        &db,
        doc! {"findAndModify": "people",
        "query": {"name": "Gus", "state": "active", "rating": 100},
        "sort": {"rating": 1},
        "update": {"$inc": {"score": 1}},
        "upsert": true,
        "new": true},
    )
    .await;
    let leo = r.get_document("lastErrorObject").unwrap();
    assert_eq!(keys(leo), ["n", "updatedExisting", "upserted"]);
    assert_eq!(leo.get_i32("n").unwrap(), 1);
    assert!(!leo.get_bool("updatedExisting").unwrap());
    let id = leo.get_object_id("upserted").unwrap();
    let v = r.get_document("value").unwrap();
    assert_eq!(v.get_object_id("_id").unwrap(), id);
    assert_eq!(v.get_str("name").unwrap(), "Gus");
    assert_eq!(v.get_str("state").unwrap(), "active");
    assert_eq!(v.get_i32("rating").unwrap(), 100);
    assert_eq!(v.get_i32("score").unwrap(), 1);
    assert_eq!(v.len(), 5);

    // upsert without new: value is null
    let r = cmd(
        &db,
        doc! {"findAndModify": "people", "query": {"_id": 50}, "update": {"$set": {"x": 1}}, "upsert": true},
    )
    .await;
    assert_eq!(r.get("value"), Some(&Bson::Null));
    let leo = r.get_document("lastErrorObject").unwrap();
    assert_eq!(leo.get("upserted"), Some(&Bson::Int32(50)));

    // remove the lowest-rated active person
    let r = cmd(
        &db,
        doc! {"findAndModify": "people", "query": {"state": "active"}, "sort": {"rating": 1}, "remove": true},
    )
    .await;
    let leo = r.get_document("lastErrorObject").unwrap();
    assert_eq!(keys(leo), ["n"]);
    assert_eq!(leo.get_i32("n").unwrap(), 1);
    assert_docs(
        &[r.get_document("value").unwrap().clone()],
        &[doc! {"_id": 3, "name": "Tom", "state": "active", "rating": 50, "score": 2}],
    );
    assert!(people.find_one(doc! {"_id": 3}).await.unwrap().is_none());

    // nothing matches
    let r = cmd(
        &db,
        doc! {"findAndModify": "people", "query": {"name": "Nobody"}, "update": {"$set": {"x": 1}}},
    )
    .await;
    assert_eq!(r.get("value"), Some(&Bson::Null));
    let leo = r.get_document("lastErrorObject").unwrap();
    assert_eq!(leo.get_i32("n").unwrap(), 0);
    assert!(!leo.get_bool("updatedExisting").unwrap());
    let r = cmd(
        &db,
        doc! {"findAndModify": "people", "query": {"name": "Nobody"}, "remove": true},
    )
    .await;
    assert_eq!(r.get("value"), Some(&Bson::Null));
    assert_eq!(
        r.get_document("lastErrorObject")
            .unwrap()
            .get_i32("n")
            .unwrap(),
        0
    );

    // fields projects the returned document; sort descending; new returns the post-image
    let r = cmd(
        &db,
        doc! {"findAndModify": "people", "query": {"name": "Tom"}, "sort": {"rating": -1},
            "update": {"$set": {"state": "inactive"}}, "new": true, "fields": {"_id": 0, "state": 1, "rating": 1}},
    )
    .await;
    assert_docs(
        &[r.get_document("value").unwrap().clone()],
        &[doc! {"state": "inactive", "rating": 100}],
    );
    // a replacement update
    let r = cmd(
        &db,
        doc! {"findAndModify": "people", "query": {"_id": 2}, "update": {"name": "Tom", "rating": 81}, "new": true},
    )
    .await;
    assert_docs(
        &[r.get_document("value").unwrap().clone()],
        &[doc! {"_id": 2, "name": "Tom", "rating": 81}],
    );
    // arrayFilters
    setup(&db, "arr", vec![doc! {"_id": 1, "a": [1, 5, 9]}]).await;
    let r = cmd(
        &db,
        doc! {"findAndModify": "arr", "query": {"_id": 1}, "update": {"$set": {"a.$[x]": 0}},
        "arrayFilters": [{"x": {"$gt": 4}}], "new": true},
    )
    .await;
    assert_docs(
        &[r.get_document("value").unwrap().clone()],
        &[doc! {"_id": 1, "a": [1, 0, 0]}],
    );
}

#[tokio::test]
async fn find_and_modify_errors() {
    let s = TestServer::start();
    let db = s.client().await.database("famerr");
    setup(&db, "c", vec![doc! {"_id": 1, "s": "x"}]).await;
    for (command, code) in [
        // neither update nor remove, both, remove with new/upsert/arrayFilters
        (doc! {"findAndModify": "c", "query": {}}, 9),
        (
            doc! {"findAndModify": "c", "query": {}, "remove": true, "update": {"$set": {"a": 1}}},
            9,
        ),
        (
            doc! {"findAndModify": "c", "query": {}, "remove": true, "new": true},
            9,
        ),
        (
            doc! {"findAndModify": "c", "query": {}, "remove": true, "upsert": true},
            9,
        ),
        // update failures are command errors here (not writeErrors)
        (
            doc! {"findAndModify": "c", "query": {"_id": 1}, "update": {"$inc": {"s": 1}}},
            14,
        ),
        (
            doc! {"findAndModify": "c", "query": {"_id": 1}, "update": {"$set": {"_id": 2}}},
            66,
        ),
        (
            doc! {"findAndModify": "c", "query": {"_id": 1}, "update": {"$set": {"a": 1}, "$unset": {"a": 1}}},
            40,
        ),
        (
            doc! {"findAndModify": "c", "query": {"$bogus": 1}, "update": {"$set": {"a": 1}}},
            2,
        ),
        (
            doc! {"findAndModify": "c", "query": {}, "sort": {"a": 3}, "update": {"$set": {"a": 1}}},
            15975,
        ),
        (
            doc! {"findAndModify": "c", "query": {}, "fields": {"a": 1, "b": 0}, "update": {"$set": {"a": 1}}},
            31254,
        ),
    ] {
        assert_eq!(cmd_err(&db, command.clone()).await, code, "{command}");
    }
}

/// validateFindAndModifyRequest: "Cannot specify arrayFilters and remove=true" (FailedToParse).
#[tokio::test]
async fn find_and_modify_rejects_array_filters_with_remove() {
    let s = TestServer::start();
    let db = s.client().await.database("famaf");
    setup(&db, "c", vec![doc! {"_id": 1}]).await;
    assert_eq!(
        cmd_err(
            &db,
            doc! {"findAndModify": "c", "query": {}, "remove": true, "arrayFilters": [{"x": 1}]}
        )
        .await,
        9
    );
    assert_eq!(all(&db.collection("c")).await.len(), 1);
}

/// findAndModify honours maxTimeMS like every other command.
#[tokio::test]
async fn find_and_modify_honours_max_time_ms() {
    let s = TestServer::start();
    let db = s.client().await.database("fammtm");
    let c = db.collection::<Document>("big");
    for chunk in 0..5 {
        let docs: Vec<Document> = (0..10_000)
            .map(|i: i32| doc! {"_id": chunk * 10_000 + i, "v": i, "pad": "abcdefghijklmnop"})
            .collect();
        c.insert_many(docs).await.unwrap();
    }
    for command in [
        doc! {"findAndModify": "big", "query": {"nope": 1}, "update": {"$set": {"x": 1}}, "maxTimeMS": 1},
        doc! {"findAndModify": "big", "query": {"nope": 1}, "remove": true, "maxTimeMS": 1},
        doc! {"findAndModify": "big", "query": {}, "sort": {"v": -1}, "update": {"$set": {"x": 1}}, "maxTimeMS": 1},
    ] {
        assert_eq!(cmd_err(&db, command.clone()).await, 50, "{command}");
    }
}

/// findOneAndUpdate / findOneAndReplace / findOneAndDelete through the driver.
#[tokio::test]
async fn find_one_and_modify_through_the_driver() {
    let s = TestServer::start();
    let db = s.client().await.database("famdrv");
    let c = setup(
        &db,
        "scores",
        vec![
            doc! {"_id": 1, "team": "A", "score": 10},
            doc! {"_id": 2, "team": "A", "score": 30},
            doc! {"_id": 3, "team": "B", "score": 20},
        ],
    )
    .await;
    let before = c
        .find_one_and_update(doc! {"team": "A"}, doc! {"$inc": {"score": 5}})
        .sort(doc! {"score": -1})
        .await
        .unwrap()
        .unwrap();
    assert_docs(&[before], &[doc! {"_id": 2, "team": "A", "score": 30}]);
    let after = c
        .find_one_and_update(doc! {"team": "A"}, doc! {"$inc": {"score": 5}})
        .sort(doc! {"score": 1})
        .return_document(ReturnDocument::After)
        .projection(doc! {"score": 1})
        .await
        .unwrap()
        .unwrap();
    assert_docs(&[after], &[doc! {"_id": 1, "score": 15}]);
    let none = c
        .find_one_and_update(doc! {"team": "Z"}, doc! {"$set": {"x": 1}})
        .await
        .unwrap();
    assert!(none.is_none());
    let up = c
        .find_one_and_update(doc! {"_id": 9}, doc! {"$set": {"team": "C"}})
        .upsert(true)
        .return_document(ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_docs(&[up], &[doc! {"_id": 9, "team": "C"}]);
    let replaced = c
        .find_one_and_replace(doc! {"_id": 3}, doc! {"team": "B", "score": 0})
        .return_document(ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_docs(&[replaced], &[doc! {"_id": 3, "team": "B", "score": 0}]);
    let deleted = c
        .find_one_and_delete(doc! {"team": "A"})
        .sort(doc! {"score": -1})
        .projection(doc! {"_id": 1})
        .await
        .unwrap()
        .unwrap();
    assert_docs(&[deleted], &[doc! {"_id": 2}]);
    let ids: Vec<i32> = all(&c)
        .await
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(ids, [1, 3, 9]);
}

// ---------------------------------------------------------------------------------------------
// count

#[tokio::test]
async fn count_command_query_skip_limit() {
    let s = TestServer::start();
    let db = s.client().await.database("cnt");
    let c = setup(
        &db,
        "orders",
        (0..20)
            .map(|i: i32| doc! {"_id": i, "status": if i % 4 == 0 { "D" } else { "A" }, "qty": i})
            .collect(),
    )
    .await;
    let n = |r: Document| -> Bson { r.get("n").cloned().unwrap() };
    let r = cmd(&db, doc! {"count": "orders"}).await;
    assert_eq!(keys(&r)[0], "n");
    assert_eq!(n(r), Bson::Int32(20));
    assert_eq!(
        n(cmd(&db, doc! {"count": "orders", "query": {"status": "D"}}).await),
        Bson::Int32(5)
    );
    assert_eq!(
        n(cmd(
            &db,
            doc! {"count": "orders", "query": {"qty": {"$gt": 5}}, "skip": 4}
        )
        .await),
        Bson::Int32(10)
    );
    assert_eq!(
        n(cmd(
            &db,
            doc! {"count": "orders", "query": {"qty": {"$gt": 5}}, "limit": 3}
        )
        .await),
        Bson::Int32(3)
    );
    assert_eq!(
        n(cmd(
            &db,
            doc! {"count": "orders", "query": {"qty": {"$gt": 5}}, "skip": 12, "limit": 3}
        )
        .await),
        Bson::Int32(2)
    );
    // limit 0 means no limit; a negative limit counts like its absolute value
    assert_eq!(
        n(cmd(&db, doc! {"count": "orders", "limit": 0}).await),
        Bson::Int32(20)
    );
    assert_eq!(
        n(cmd(&db, doc! {"count": "orders", "limit": -7}).await),
        Bson::Int32(7)
    );
    assert_eq!(
        n(cmd(&db, doc! {"count": "orders", "skip": 30}).await),
        Bson::Int32(0)
    );
    // a missing collection counts 0
    assert_eq!(
        n(cmd(&db, doc! {"count": "nope", "query": {"a": 1}}).await),
        Bson::Int32(0)
    );
    // bad query
    assert_eq!(
        cmd_err(&db, doc! {"count": "orders", "query": {"$bogus": 1}}).await,
        2
    );
    // estimatedDocumentCount (count without a query)
    assert_eq!(c.estimated_document_count().await.unwrap(), 20);
}

/// countDocuments is an aggregation ($match, $skip, $limit, $group) in every driver.
#[tokio::test]
async fn count_documents_through_the_driver() {
    let s = TestServer::start();
    let db = s.client().await.database("cntdrv");
    let c = setup(
        &db,
        "c",
        (0..20)
            .map(|i: i32| doc! {"_id": i, "even": i % 2 == 0})
            .collect(),
    )
    .await;
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 20);
    assert_eq!(c.count_documents(doc! {"even": true}).await.unwrap(), 10);
    assert_eq!(
        c.count_documents(doc! {"even": true})
            .skip(3)
            .limit(5)
            .await
            .unwrap(),
        5
    );
}

// ---------------------------------------------------------------------------------------------
// distinct

/// The distinct command page (the `inventory` example).
#[tokio::test]
async fn distinct_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("dist");
    let inv = setup(
        &db,
        "inventory",
        vec![
            doc! {"_id": 1, "dept": "A", "item": {"sku": "111", "color": "red"}, "sizes": ["S", "M"]},
            doc! {"_id": 2, "dept": "A", "item": {"sku": "111", "color": "blue"}, "sizes": ["M", "L"]},
            doc! {"_id": 3, "dept": "B", "item": {"sku": "222", "color": "blue"}, "sizes": "S"},
            doc! {"_id": 4, "dept": "A", "item": {"sku": "333", "color": "black"}, "sizes": ["S"]},
        ],
    )
    .await;
    let s = |v: &[&str]| {
        v.iter()
            .map(|x| Bson::String(x.to_string()))
            .collect::<Vec<_>>()
    };
    assert_values(
        &inv.distinct("dept", doc! {}).await.unwrap(),
        &s(&["A", "B"]),
    );
    assert_values(
        &inv.distinct("item.sku", doc! {}).await.unwrap(),
        &s(&["111", "222", "333"]),
    );
    // array elements are unwound
    assert_values(
        &inv.distinct("sizes", doc! {}).await.unwrap(),
        &s(&["L", "M", "S"]),
    );
    assert_values(
        &inv.distinct("item.sku", doc! {"dept": "A"}).await.unwrap(),
        &s(&["111", "333"]),
    );
    // the raw reply
    let r = cmd(
        &db,
        doc! {"distinct": "inventory", "key": "dept", "query": {"dept": "B"}},
    )
    .await;
    assert_eq!(keys(&r)[0], "values");
    assert_values(r.get_array("values").unwrap(), &s(&["B"]));
    // a missing collection or field gives no values
    assert!(
        cmd(&db, doc! {"distinct": "nope", "key": "a"})
            .await
            .get_array("values")
            .unwrap()
            .is_empty()
    );
    assert!(inv.distinct("nope", doc! {}).await.unwrap().is_empty());
    // the key must be a string
    assert_eq!(
        cmd_err(&db, doc! {"distinct": "inventory", "key": 1}).await,
        14
    );
}

/// Values come back once each, in BSON order (null < numbers < strings < objects < arrays <
/// ... < bool < date), numbers deduplicated across types, one array level unwound.
#[tokio::test]
async fn distinct_values_in_bson_order() {
    let s = TestServer::start();
    let db = s.client().await.database("distord");
    let oid = ObjectId::parse_str("000000000000000000000001").unwrap();
    let c = setup(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "v": 3},
            doc! {"_id": 2, "v": "b"},
            doc! {"_id": 3, "v": {"x": 1}},
            doc! {"_id": 4, "v": null},
            doc! {"_id": 5, "v": true},
            doc! {"_id": 6, "v": [1.5, "a", [2, 3]]},
            doc! {"_id": 7},
            doc! {"_id": 8, "v": 3_i64},
            doc! {"_id": 9, "v": 3.0},
            doc! {"_id": 10, "v": oid},
            doc! {"_id": 11, "v": bson::DateTime::from_millis(0)},
            doc! {"_id": 12, "v": []},
            doc! {"_id": 13, "v": "a"},
            doc! {"_id": 14, "v": -1},
        ],
    )
    .await;
    assert_values(
        &c.distinct("v", doc! {}).await.unwrap(),
        &[
            Bson::Null,
            Bson::Int32(-1),
            Bson::Double(1.5),
            Bson::Int32(3),
            Bson::String("a".into()),
            Bson::String("b".into()),
            Bson::Document(doc! {"x": 1}),
            Bson::Array(vec![Bson::Int32(2), Bson::Int32(3)]),
            Bson::ObjectId(oid),
            Bson::Boolean(true),
            Bson::DateTime(bson::DateTime::from_millis(0)),
        ],
    );
    // dotted keys through arrays of documents
    let d = setup(
        &db,
        "dotted",
        vec![
            doc! {"_id": 1, "a": [{"b": 2}, {"b": 1}, {"c": 5}]},
            doc! {"_id": 2, "a": {"b": [4, 2]}},
            doc! {"_id": 3, "a": [{"b": [[7]]}]},
            doc! {"_id": 4, "a": 5},
        ],
    )
    .await;
    assert_values(
        &d.distinct("a.b", doc! {}).await.unwrap(),
        &[
            Bson::Int32(1),
            Bson::Int32(2),
            Bson::Int32(4),
            Bson::Array(vec![Bson::Int32(7)]),
        ],
    );
    assert_values(
        &d.distinct("a.b", doc! {"_id": {"$lt": 2}}).await.unwrap(),
        &[Bson::Int32(1), Bson::Int32(2)],
    );
}

// ---------------------------------------------------------------------------------------------
// maxTimeMS

#[tokio::test]
async fn max_time_ms_expires_on_a_large_scan() {
    let s = TestServer::start();
    let client = s.client().await;
    let db = client.database("mtm");
    let c = db.collection::<Document>("big");
    for chunk in 0..5 {
        let docs: Vec<Document> = (0..10_000)
            .map(|i: i32| doc! {"_id": chunk * 10_000 + i, "v": i, "pad": "abcdefghijklmnop"})
            .collect();
        c.insert_many(docs).await.unwrap();
    }
    // a filter that matches nothing forces a full scan
    let e = c
        .find(doc! {"nope": 1})
        .max_time(Duration::from_millis(1))
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 50);
    if let ErrorKind::Command(ce) = &*e.kind {
        assert_eq!(ce.code_name, "MaxTimeMSExpired");
    }
    for command in [
        doc! {"find": "big", "filter": {"nope": 1}, "maxTimeMS": 1},
        doc! {"count": "big", "query": {"nope": 1}, "maxTimeMS": 1},
        doc! {"distinct": "big", "key": "v", "query": {"nope": 1}, "maxTimeMS": 1},
    ] {
        assert_eq!(cmd_err(&db, command.clone()).await, 50, "{command}");
    }
    // write commands: mongod fails the whole batch (interruptions are not per-statement
    // errors), a mongos reports the shard's failure as a write error; either carries code 50
    for command in [
        doc! {"update": "big", "updates": [{"q": {"nope": 1}, "u": {"$set": {"x": 1}}, "multi": true}], "maxTimeMS": 1},
        doc! {"delete": "big", "deletes": [{"q": {"nope": 1}, "limit": 0}], "maxTimeMS": 1},
    ] {
        let code = match db.run_command(command.clone()).await {
            Err(e) => code_of(&e),
            Ok(r) => r
                .get_array("writeErrors")
                .ok()
                .and_then(|w| w.first())
                .and_then(|e| e.as_document())
                .and_then(|e| e.get_i32("code").ok())
                .unwrap_or_else(|| panic!("{command} succeeded: {r}")),
        };
        assert_eq!(code, 50, "{command}");
    }
    // no limit, or a generous one: the same scans succeed
    assert!(
        collect(c.find(doc! {"nope": 1}).await.unwrap())
            .await
            .is_empty()
    );
    let r = cmd(
        &db,
        doc! {"count": "big", "query": {"nope": 1}, "maxTimeMS": 600_000},
    )
    .await;
    assert_eq!(r.get("n"), Some(&Bson::Int32(0)));
    let r = cmd(&db, doc! {"count": "big", "maxTimeMS": 0}).await;
    assert_eq!(r.get("n"), Some(&Bson::Int32(50_000)));
    // maxTimeMS on getMore is only for tailable awaitData cursors (BadValue otherwise)
    let r = cmd(
        &db,
        doc! {"find": "big", "batchSize": 2, "maxTimeMS": 600_000},
    )
    .await;
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_eq!(
        cmd_err(
            &db,
            doc! {"getMore": id, "collection": "big", "maxTimeMS": 1000}
        )
        .await,
        2
    );
    let r = cmd(
        &db,
        doc! {"getMore": id, "collection": "big", "batchSize": 3},
    )
    .await;
    assert_eq!(
        r.get_document("cursor")
            .unwrap()
            .get_array("nextBatch")
            .unwrap()
            .len(),
        3
    );
    // bad values
    for bad in [Bson::Int32(-1), Bson::String("1".into()), Bson::Double(1.5)] {
        assert_eq!(
            cmd_err(&db, doc! {"find": "big", "maxTimeMS": bad.clone()}).await,
            2,
            "{bad}"
        );
    }
}
