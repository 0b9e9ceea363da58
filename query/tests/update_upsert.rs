//! Upserts: the inserted document seeded from the filter's equalities, then the update
//! applied as an insert.

#[path = "update_support.rs"]
mod support;

use bson::{Bson, Document, doc};
use support::*;

#[track_caller]
fn check_upsert(filter: Document, update: Document, want: Document) {
    match upsert(&filter, &update) {
        Ok(got) => assert_eq!(
            got.as_bytes(),
            raw(&want).as_bytes(),
            "\n got: {}\nwant: {want}",
            to_bson_doc(&got)
        ),
        Err(e) => panic!("{filter} / {update}: {e:?}"),
    }
}

#[track_caller]
fn check_upsert_err(filter: Document, update: Document, code_want: i32, msg: &str) {
    match upsert(&filter, &update) {
        Ok(got) => panic!("expected an error, got {}", to_bson_doc(&got)),
        Err(e) => {
            assert_eq!(code(&e), code_want, "{e:?}");
            if !msg.is_empty() {
                assert_eq!(e.to_string(), msg);
            }
        }
    }
}

#[test]
fn seeding_from_equalities() {
    check_upsert(
        doc! {"a": 1, "b.c": 2, "_id": 5, "$and": [{"d": 3}], "x": {"$gt": 1}},
        doc! {"$set": {"e": 4}},
        doc! {"_id": 5, "a": 1, "b": {"c": 2}, "d": 3, "e": 4},
    );
    check_upsert(
        doc! {"_id": 1},
        doc! {"$set": {"item": "apple"}, "$setOnInsert": {"defaultQty": 100}},
        doc! {"_id": 1, "defaultQty": 100, "item": "apple"},
    );
    check_upsert(
        doc! {"_id": 1, "a": {"$gt": 2}},
        doc! {"$inc": {"b": 1}},
        doc! {"_id": 1, "b": 1},
    );
    check_generated(
        doc! {"a": {"$eq": 1}, "b": {"$in": [2]}},
        doc! {"$set": {}},
        doc! {"a": 1, "b": 2},
    );
    check_generated(
        doc! {"$or": [{"a": 1}]},
        doc! {"$set": {"z": 1}},
        doc! {"a": 1, "z": 1},
    );
    // Two-clause $or, regexes and $in with several values seed nothing.
    check_upsert(
        doc! {"_id": 3, "$or": [{"a": 1}, {"b": 1}], "c": {"$in": [1, 2]}},
        doc! {"$set": {"z": 1}},
        doc! {"_id": 3, "z": 1},
    );
    // The update sees the seeded fields.
    check_upsert(
        doc! {"_id": 1, "n": 5},
        doc! {"$inc": {"n": 1}},
        doc! {"_id": 1, "n": 6},
    );
    check_upsert(
        doc! {"_id": 1, "a.b": 1},
        doc! {"$set": {"a.c": 2}},
        doc! {"_id": 1, "a": {"b": 1, "c": 2}},
    );
}

/// For upserts whose `_id` is generated: compares everything after it.
#[track_caller]
fn check_generated(filter: Document, update: Document, rest: Document) {
    let mut got = to_bson_doc(&upsert(&filter, &update).expect("upsert"));
    assert!(matches!(got.remove("_id"), Some(Bson::ObjectId(_))));
    assert_eq!(
        raw(&got).as_bytes(),
        raw(&rest).as_bytes(),
        "{got} vs {rest}"
    );
}

#[test]
fn generated_ids_come_first() {
    let got = to_bson_doc(&upsert(&doc! {"a": 1}, &doc! {"$set": {"b": 2}}).unwrap());
    let keys: Vec<&String> = got.keys().collect();
    assert_eq!(keys, ["_id", "a", "b"]);
    assert!(matches!(got.get("_id"), Some(Bson::ObjectId(_))));
    let got = to_bson_doc(&upsert(&doc! {"a": 1}, &doc! {"$set": {"_id": 7}}).unwrap());
    assert_eq!(got, doc! {"_id": 7, "a": 1});
    assert_eq!(got.keys().next().map(String::as_str), Some("_id"));
}

#[test]
fn replacement_upserts() {
    check_upsert(
        doc! {"_id": 5, "a": 1},
        doc! {"b": 2},
        doc! {"_id": 5, "b": 2},
    );
    check_upsert(
        doc! {"_id": 5},
        doc! {"b": 2, "_id": 5},
        doc! {"_id": 5, "b": 2},
    );
    let got = to_bson_doc(&upsert(&doc! {"a": 1}, &doc! {"b": 2}).unwrap());
    assert_eq!(got.keys().collect::<Vec<_>>(), ["_id", "b"]);
    check_upsert_err(
        doc! {"_id": 5},
        doc! {"_id": 6},
        66,
        "After applying the update, the (immutable) field '_id' was found to have been altered to _id: 6",
    );
    check_upsert_err(
        doc! {"_id.x": 5},
        doc! {"a": 1},
        111,
        "field at '_id' must be exactly specified, field at sub-path '_id.x'found",
    );
}

#[test]
fn upsert_errors() {
    check_upsert_err(
        doc! {"a": 1, "a.b": 2},
        doc! {"$set": {"z": 1}},
        54,
        "cannot infer query fields to set, both paths 'a.b' and 'a' are matched",
    );
    check_upsert_err(
        doc! {"$and": [{"a": 1}, {"a": 2}]},
        doc! {"$set": {"z": 1}},
        54,
        "cannot infer query fields to set, path 'a' is matched twice",
    );
    check_upsert_err(
        doc! {"_id": 1},
        doc! {"$set": {"_id": 2}},
        66,
        "Performing an update on the path '_id' would modify the immutable field '_id'",
    );
    check_upsert_err(
        doc! {"a": 1},
        doc! {"$set": {"x.$": 1}},
        2,
        "The positional operator did not find the match needed from the query.",
    );
    check_upsert_err(
        doc! {"a": 1},
        doc! {"$set": {"x.$[]": 1}},
        2,
        "The path 'x' must exist in the document in order to apply array updates.",
    );
    check_upsert_err(
        doc! {"a": 1},
        doc! {"$set": {"_id": [1]}},
        53,
        "The '_id' value cannot be of type array",
    );
    check_upsert_err(doc! {"a": 1}, doc! {"$pop": {"a.b": 1}}, 28, "");
}
