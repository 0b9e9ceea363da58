//! Update operators: the MongoDB manual's examples (each operator page), FerretDB's recorded
//! MongoDB results and errors, field order, no-op detection and numeric rules.

#[path = "update_support.rs"]
mod support;

use bson::{Bson, DateTime, Decimal128, Document, Timestamp, doc};
use cairn_query::update::{Update, UpdateKind};
use support::*;

fn dec(s: &str) -> Bson {
    Bson::Decimal128(s.parse::<Decimal128>().expect("decimal"))
}

fn date() -> Bson {
    Bson::DateTime(now().0)
}

fn ts() -> Bson {
    Bson::Timestamp(now().1)
}

// ------------------------------------------------------------------------------------------
// $set / $unset
// ------------------------------------------------------------------------------------------

fn product() -> Document {
    doc! {
        "_id": 100, "quantity": 250, "instock": true, "reorder": false,
        "details": {"model": "14QQ", "make": "Clothes Corp"},
        "tags": ["apparel", "clothing"],
        "ratings": [{"by": "Customer007", "rating": 4}]
    }
}

#[test]
fn set_manual() {
    check(
        product(),
        doc! {"$set": {"quantity": 500, "details": {"model": "2600", "make": "Fashionaires"},
        "tags": ["coats", "outerwear", "clothing"]}},
        doc! {
            "_id": 100, "quantity": 500, "instock": true, "reorder": false,
            "details": {"model": "2600", "make": "Fashionaires"},
            "tags": ["coats", "outerwear", "clothing"],
            "ratings": [{"by": "Customer007", "rating": 4}]
        },
    );
    let mut want = product();
    want.insert("details", doc! {"model": "14QQ", "make": "Kustom Kidz"});
    check(
        product(),
        doc! {"$set": {"details.make": "Kustom Kidz"}},
        want,
    );
    let mut want = product();
    want.insert("tags", vec![Bson::from("apparel"), Bson::from("rain gear")]);
    want.insert(
        "ratings",
        vec![Bson::from(doc! {"by": "Customer007", "rating": 2})],
    );
    check(
        product(),
        doc! {"$set": {"tags.1": "rain gear", "ratings.0.rating": 2}},
        want,
    );
}

#[test]
fn set_creates_paths_and_pads_arrays() {
    check(
        doc! {"_id": 1},
        doc! {"$set": {"a.b.c": 1}},
        doc! {"_id": 1, "a": {"b": {"c": 1}}},
    );
    check(
        doc! {"_id": 1, "a": [1]},
        doc! {"$set": {"a.3": 4}},
        doc! {"_id": 1, "a": [1, Bson::Null, Bson::Null, 4]},
    );
    check(
        doc! {"_id": 1, "a": []},
        doc! {"$set": {"a.1.b": 4}},
        doc! {"_id": 1, "a": [Bson::Null, {"b": 4}]},
    );
    // Numeric components of documents are field names.
    check(
        doc! {"_id": 1, "a": {}},
        doc! {"$set": {"a.0": 1}},
        doc! {"_id": 1, "a": {"0": 1}},
    );
    check(
        doc! {"_id": 1},
        doc! {"$set": {"a.0": 1}},
        doc! {"_id": 1, "a": {"0": 1}},
    );
    // Through an existing array element.
    check(
        doc! {"_id": 1, "a": [{"b": 1}, {"b": 2}]},
        doc! {"$set": {"a.1.c": 3}},
        doc! {"_id": 1, "a": [{"b": 1}, {"b": 2, "c": 3}]},
    );
    // `$`-prefixed names below the top level are allowed (5.0+).
    check(
        doc! {"_id": 1},
        doc! {"$set": {"a": {"$x": 1}}},
        doc! {"_id": 1, "a": {"$x": 1}},
    );
    check(
        doc! {"_id": 1},
        doc! {"$set": {"a.$x": 1}},
        doc! {"_id": 1, "a": {"$x": 1}},
    );
}

#[test]
fn set_errors() {
    check_err(
        doc! {"_id": 1, "a": 1},
        doc! {"$set": {"a.b": 1}},
        28,
        "Cannot create field 'b' in element {a: 1}",
    );
    check_err(
        doc! {"_id": "x", "v": [42, "foo", Bson::Null]},
        doc! {"$set": {"v.foo": 1}},
        28,
        "Cannot create field 'foo' in element {v: [ 42, \"foo\", null ]}",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$set": {"v.": 1}},
        56,
        "The update path 'v.' contains an empty field name, which is not allowed.",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$set": {"": 1}},
        56,
        "An empty update path is not valid.",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$set": {"$x": 1}},
        52,
        "The dollar ($) prefixed field '$x' in '$x' is not allowed in the context of an update's \
         replacement document. Consider using an aggregation pipeline with $replaceWith.",
    );
    check_err(
        doc! {"_id": 1, "a": []},
        doc! {"$set": {"a.2000000": 1}},
        34,
        "can't backfill more than 1500000 elements",
    );
}

#[test]
fn set_no_ops() {
    check_mod(
        doc! {"_id": 1, "v": 42},
        doc! {"$set": {"v": 42}},
        doc! {"_id": 1, "v": 42},
        false,
    );
    // A different numeric type is a change.
    check_mod(
        doc! {"_id": 1, "v": 42},
        doc! {"$set": {"v": 42.0}},
        doc! {"_id": 1, "v": 42.0},
        true,
    );
    check_mod(
        doc! {"_id": 1, "v": {"a": [1, 2]}},
        doc! {"$set": {"v": {"a": [1, 2]}}},
        doc! {"_id": 1, "v": {"a": [1, 2]}},
        false,
    );
    // An empty operator document is allowed and does nothing.
    check_mod(doc! {"_id": 1}, doc! {"$set": {}}, doc! {"_id": 1}, false);
    check_mod(
        doc! {"_id": "string", "v": Bson::Array(vec![])},
        doc! {"$set": {"v": [Bson::Null]}},
        doc! {"_id": "string", "v": [Bson::Null]},
        true,
    );
}

#[test]
fn unset() {
    let mut want = product();
    want.remove("quantity");
    want.remove("instock");
    check(
        product(),
        doc! {"$unset": {"quantity": "", "instock": ""}},
        want,
    );
    // Array elements become null.
    check(
        doc! {"_id": 1, "a": [1, 2, 3]},
        doc! {"$unset": {"a.1": 1}},
        doc! {"_id": 1, "a": [1, Bson::Null, 3]},
    );
    check_mod(
        doc! {"_id": 1},
        doc! {"$unset": {"x": 1}},
        doc! {"_id": 1},
        false,
    );
    // Non-viable paths are simply no-ops for $unset.
    check_mod(
        doc! {"_id": 1, "a": 1},
        doc! {"$unset": {"a.b": 1}},
        doc! {"_id": 1, "a": 1},
        false,
    );
    check(
        doc! {"_id": 1, "a": {"b": 1, "c": 2}},
        doc! {"$unset": {"a.b": 1}},
        doc! {"_id": 1, "a": {"c": 2}},
    );
}

// ------------------------------------------------------------------------------------------
// Field order (MongoDB 5.0+: lexicographic, numeric names numerically)
// ------------------------------------------------------------------------------------------

#[test]
fn new_fields_are_appended_in_path_order() {
    check(
        doc! {"_id": 1},
        doc! {"$set": {"b": 1, "a": 1}},
        doc! {"_id": 1, "a": 1, "b": 1},
    );
    check(
        doc! {"_id": 1, "z": 0},
        doc! {"$set": {"y": 1}, "$inc": {"x": 1}, "$min": {"w": 1}},
        doc! {"_id": 1, "z": 0, "w": 1, "x": 1, "y": 1},
    );
    // Numeric names in numeric order: "10" after "9", and "a.2" before "a.10".
    check(
        doc! {"_id": 1, "a": {}},
        doc! {"$set": {"a.10": 1, "a.9": 1, "a.b": 1, "a.09": 1}},
        doc! {"_id": 1, "a": {"09": 1, "9": 1, "10": 1, "b": 1}},
    );
    check(
        doc! {"_id": 1, "a": []},
        doc! {"$set": {"a.2": "x", "a.10": "y"}},
        doc! {"_id": 1, "a": [Bson::Null, Bson::Null, "x", Bson::Null, Bson::Null, Bson::Null,
        Bson::Null, Bson::Null, Bson::Null, Bson::Null, "y"]},
    );
    // Nested new documents are built in path order too.
    check(
        doc! {"_id": 1},
        doc! {"$set": {"c.z": 1, "c.a": 2, "b": 3}},
        doc! {"_id": 1, "b": 3, "c": {"a": 2, "z": 1}},
    );
    // Existing fields keep their place.
    check(
        doc! {"_id": 1, "b": 1, "a": 1},
        doc! {"$set": {"a": 2, "b": 2, "c": 2}},
        doc! {"_id": 1, "b": 2, "a": 2, "c": 2},
    );
    // Upper case sorts before lower case (byte order).
    check(
        doc! {"_id": 1},
        doc! {"$set": {"b": 1, "B": 1, "_": 1}},
        doc! {"_id": 1, "B": 1, "_": 1, "b": 1},
    );
}

// ------------------------------------------------------------------------------------------
// $inc / $mul
// ------------------------------------------------------------------------------------------

#[test]
fn inc_manual() {
    check(
        doc! {"_id": 1, "sku": "abc123", "quantity": 10, "metrics": {"orders": 2, "ratings": 3.5}},
        doc! {"$inc": {"quantity": -2, "metrics.orders": 1}},
        doc! {"_id": 1, "sku": "abc123", "quantity": 8, "metrics": {"orders": 3, "ratings": 3.5}},
    );
}

#[test]
fn inc_types() {
    check(
        doc! {"_id": 1},
        doc! {"$inc": {"a": 5i64}},
        doc! {"_id": 1, "a": 5i64},
    );
    check(
        doc! {"_id": 1, "a": i32::MAX},
        doc! {"$inc": {"a": 1}},
        doc! {"_id": 1, "a": 2_147_483_648i64},
    );
    check(
        doc! {"_id": 1, "a": 1},
        doc! {"$inc": {"a": 1i64}},
        doc! {"_id": 1, "a": 2i64},
    );
    check(
        doc! {"_id": 1, "a": 1},
        doc! {"$inc": {"a": 0.5}},
        doc! {"_id": 1, "a": 1.5},
    );
    check(
        doc! {"_id": 1, "a": 1.5},
        doc! {"$inc": {"a": 1}},
        doc! {"_id": 1, "a": 2.5},
    );
    check(
        doc! {"_id": 1, "a": dec("1.1")},
        doc! {"$inc": {"a": 1}},
        doc! {"_id": 1, "a": dec("2.1")},
    );
    check(
        doc! {"_id": 1, "a": 1},
        doc! {"$inc": {"a": dec("0.25")}},
        doc! {"_id": 1, "a": dec("1.25")},
    );
    check(
        doc! {"_id": 1, "a": dec("1")},
        doc! {"$inc": {"a": 0.5}},
        doc! {"_id": 1, "a": dec("1.500000000000000")},
    );
    check_mod(
        doc! {"_id": 1, "a": 3},
        doc! {"$inc": {"a": 0}},
        doc! {"_id": 1, "a": 3},
        false,
    );
    check_mod(
        doc! {"_id": 1, "a": 3.0},
        doc! {"$inc": {"a": 0}},
        doc! {"_id": 1, "a": 3.0},
        false,
    );
    check_mod(
        doc! {"_id": 1, "a": 3},
        doc! {"$inc": {"a": 0i64}},
        doc! {"_id": 1, "a": 3i64},
        true,
    );
}

#[test]
fn inc_errors() {
    check_err(
        doc! {"_id": "string", "v": "foo"},
        doc! {"$inc": {"v": 1}},
        14,
        "Cannot apply $inc to a value of non-numeric type. {_id: \"string\"} has the field 'v' of \
         non-numeric type string",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$inc": {"v": "bad value"}},
        14,
        "Cannot increment with non-numeric argument: {v: \"bad value\"}",
    );
    check_err(
        doc! {"_id": "int64-max", "v": i64::MAX},
        doc! {"$inc": {"v": i64::MAX}},
        2,
        "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) for \
         document {_id: \"int64-max\"}",
    );
    check_err(
        doc! {"_id": "int64-min", "v": i64::MIN},
        doc! {"$inc": {"v": -1}},
        2,
        "Failed to apply $inc operations to current value ((NumberLong)-9223372036854775808) for \
         document {_id: \"int64-min\"}",
    );
    check_err(
        doc! {"_id": "document-null", "foo": {"bar": Bson::Null}},
        doc! {"$inc": {"foo.bar": 1}},
        14,
        "Cannot apply $inc to a value of non-numeric type. {_id: \"document-null\"} has the field \
         'bar' of non-numeric type null",
    );
}

#[test]
fn mul_manual() {
    check(
        doc! {"_id": 1, "item": "Hats", "price": dec("10.99"), "quantity": 25},
        doc! {"$mul": {"price": dec("1.25"), "quantity": 2}},
        doc! {"_id": 1, "item": "Hats", "price": dec("13.7375"), "quantity": 50},
    );
    check(
        doc! {"_id": 2, "item": "Unknown"},
        doc! {"$mul": {"price": 100i64}},
        doc! {"_id": 2, "item": "Unknown", "price": 0i64},
    );
    check(
        doc! {"_id": 3, "item": "Scarf", "price": 10i64},
        doc! {"$mul": {"price": 5}},
        doc! {"_id": 3, "item": "Scarf", "price": 50i64},
    );
    check(
        doc! {"_id": 1},
        doc! {"$mul": {"p": 2.5}},
        doc! {"_id": 1, "p": 0.0},
    );
    check(
        doc! {"_id": 1},
        doc! {"$mul": {"p": dec("2.50")}},
        doc! {"_id": 1, "p": dec("0.00")},
    );
    check(
        doc! {"_id": 1, "p": 1 << 20},
        doc! {"$mul": {"p": 1 << 20}},
        doc! {"_id": 1, "p": 1i64 << 40},
    );
}

#[test]
fn mul_errors() {
    check_err(
        doc! {"_id": "int32_maxInt64", "value": 2},
        doc! {"$mul": {"value": i64::MAX}},
        2,
        "Failed to apply $mul operations to current value ((NumberInt)2) for document \
         {_id: \"int32_maxInt64\"}",
    );
    check_err(
        doc! {"_id": "tst_1", "value": {}},
        doc! {"$mul": {"value": 2}},
        14,
        "Cannot apply $mul to a value of non-numeric type. {_id: \"tst_1\"} has the field 'value' \
         of non-numeric type object",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$mul": {"value": []}},
        14,
        "Cannot multiply with non-numeric argument: {value: []}",
    );
}

// ------------------------------------------------------------------------------------------
// $min / $max / $currentDate / $setOnInsert
// ------------------------------------------------------------------------------------------

#[test]
fn min_max_manual() {
    let scores = || doc! {"_id": 1, "highScore": 800, "lowScore": 200};
    check(
        scores(),
        doc! {"$min": {"lowScore": 150}},
        doc! {"_id": 1, "highScore": 800, "lowScore": 150},
    );
    check_mod(scores(), doc! {"$min": {"lowScore": 250}}, scores(), false);
    check(
        scores(),
        doc! {"$max": {"highScore": 950}},
        doc! {"_id": 1, "highScore": 950, "lowScore": 200},
    );
    let high = || doc! {"_id": 1, "highScore": 950, "lowScore": 200};
    check_mod(high(), doc! {"$max": {"highScore": 870}}, high(), false);
    let d1 = Bson::DateTime(DateTime::from_millis(1_380_603_600_000));
    let d2 = Bson::DateTime(DateTime::from_millis(1_380_067_200_000));
    check(
        doc! {"_id": 1, "desc": "crafts", "dateEntered": d1.clone()},
        doc! {"$min": {"dateEntered": d2.clone()}},
        doc! {"_id": 1, "desc": "crafts", "dateEntered": d2},
    );
    // Missing fields are created; comparison is across types by BSON order.
    check(
        doc! {"_id": 1},
        doc! {"$max": {"a": 1}},
        doc! {"_id": 1, "a": 1},
    );
    check(
        doc! {"_id": 1, "a": "x"},
        doc! {"$max": {"a": 5}},
        doc! {"_id": 1, "a": "x"},
    );
    check(
        doc! {"_id": 1, "a": "x"},
        doc! {"$min": {"a": 5}},
        doc! {"_id": 1, "a": 5},
    );
    check(
        doc! {"_id": 1, "a": Bson::Null},
        doc! {"$max": {"a": false}},
        doc! {"_id": 1, "a": false},
    );
    // Equal values of another numeric type are a no-op.
    check_mod(
        doc! {"_id": 1, "a": 1},
        doc! {"$min": {"a": 1.0}},
        doc! {"_id": 1, "a": 1},
        false,
    );
}

#[test]
fn current_date_manual() {
    let d0 = Bson::DateTime(DateTime::from_millis(1_380_676_278_965));
    check(
        doc! {"_id": 1, "status": "a", "lastModified": d0},
        doc! {
            "$currentDate": {"lastModified": true, "cancellation.date": {"$type": "timestamp"}},
            "$set": {"cancellation.reason": "user request", "status": "D"}
        },
        doc! {"_id": 1, "status": "D", "lastModified": date(),
        "cancellation": {"date": ts(), "reason": "user request"}},
    );
    check(
        doc! {"_id": 1},
        doc! {"$currentDate": {"d": {"$type": "date"}}},
        doc! {"_id": 1, "d": date()},
    );
}

#[test]
fn current_date_errors() {
    check_err(
        doc! {"_id": 1},
        doc! {"$currentDate": {"v": 1}},
        2,
        "int is not valid type for $currentDate. Please use a boolean ('true') or a $type \
         expression ({$type: 'timestamp/date'}).",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$currentDate": {"v": {"$type": "foo"}}},
        2,
        "The '$type' string field is required to be 'date' or 'timestamp': \
         {$currentDate: {field : {$type: 'date'}}}",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$currentDate": {"v": {"array": 1}}},
        2,
        "Unrecognized $currentDate option: array",
    );
}

#[test]
fn set_on_insert_is_ignored_on_updates() {
    check_mod(
        doc! {"_id": 1},
        doc! {"$setOnInsert": {"a": 1}},
        doc! {"_id": 1},
        false,
    );
    check(
        doc! {"_id": 1},
        doc! {"$setOnInsert": {"a": 1}, "$set": {"b": 2}},
        doc! {"_id": 1, "b": 2},
    );
}

// ------------------------------------------------------------------------------------------
// $rename
// ------------------------------------------------------------------------------------------

fn washington() -> Document {
    doc! {
        "_id": 1, "alias": ["The American Cincinnatus", "The American Fabius"],
        "mobile": "555-555-5555", "nmae": {"first": "george", "last": "washington"}
    }
}

#[test]
fn rename_manual() {
    check(
        washington(),
        doc! {"$rename": {"nmae": "name"}},
        doc! {"_id": 1, "alias": ["The American Cincinnatus", "The American Fabius"],
        "mobile": "555-555-5555", "name": {"first": "george", "last": "washington"}},
    );
    check(
        doc! {"_id": 1, "name": {"first": "george", "last": "washington"}},
        doc! {"$rename": {"name.first": "name.fname"}},
        doc! {"_id": 1, "name": {"last": "washington", "fname": "george"}},
    );
    check_mod(
        washington(),
        doc! {"$rename": {"wife": "spouse"}},
        washington(),
        false,
    );
    // Overwrites an existing target in place.
    check(
        doc! {"_id": 1, "a": 1, "b": 2, "c": 3},
        doc! {"$rename": {"c": "a"}},
        doc! {"_id": 1, "a": 3, "b": 2},
    );
    check(
        doc! {"_id": 1, "a": 1},
        doc! {"$rename": {"a": "x.y"}},
        doc! {"_id": 1, "x": {"y": 1}},
    );
}

#[test]
fn rename_errors() {
    let nested = || {
        doc! {"_id": "array-documents-nested",
        "v": [{"foo": [{"bar": "hello"}, {"bar": "world"}]}]}
    };
    check_err(
        nested(),
        doc! {"$rename": {"v.-1": "f"}},
        28,
        "cannot use the part (v of v.-1) to traverse the element ({v: [ { foo: [ { bar: \"hello\" \
         }, { bar: \"world\" } ] } ]})",
    );
    check_err(
        nested(),
        doc! {"$rename": {"v.0.foo.0.bar.z": "f"}},
        28,
        "cannot use the part (bar of v.0.foo.0.bar.z) to traverse the element ({bar: \"hello\"})",
    );
    check_err(
        nested(),
        doc! {"$rename": {"v.0.foo": "f"}},
        2,
        "The source field cannot be an array element, 'v.0.foo' in doc with _id: \
         \"array-documents-nested\" has an array field called 'v'",
    );
    check_err(
        doc! {"_id": 1, "a": 1, "v": [1]},
        doc! {"$rename": {"a": "v.0"}},
        2,
        "The destination field cannot be an array element, 'v.0' in doc with _id: 1 has an array \
         field called 'v'",
    );
    for (v, shown) in [
        (Bson::Int32(1), "1"),
        (Bson::Null, "null"),
        (Bson::Array(vec![]), "[]"),
        (Bson::Document(doc! {}), "{}"),
        (Bson::Double(f64::NAN), "nan.0"),
    ] {
        check_err(
            doc! {"_id": 1},
            doc! {"$rename": {"name": v}},
            2,
            &format!("The 'to' field for $rename must be a string: name: {shown}"),
        );
    }
    check_err(
        doc! {"_id": 1},
        doc! {"$rename": {"a": "a"}},
        2,
        "The source and target field for $rename must differ: a: \"a\"",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$rename": {"a": "a.b"}},
        2,
        "The source and target field for $rename must not be on the same path: a: \"a.b\"",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$rename": {"a.$": "b"}},
        2,
        "The source field for $rename may not be dynamic: a.$",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$rename": {"a": "b"}, "$set": {"b": 1}},
        40,
        "Updating the path 'b' would create a conflict at 'b'",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$rename": {"a": "b"}, "$set": {"a.x": 1}},
        40,
        "Updating the path 'a.x' would create a conflict at 'a'",
    );
    check_err(
        doc! {"_id": 1, "a": 1},
        doc! {"$rename": {"_id": "a"}},
        66,
        "Performing an update on the path '_id' would modify the immutable field '_id'",
    );
}

// ------------------------------------------------------------------------------------------
// Arrays: $push $addToSet $pop $pull $pullAll
// ------------------------------------------------------------------------------------------

#[test]
fn push_manual() {
    check(
        doc! {"_id": 1, "scores": [44, 78, 38, 80]},
        doc! {"$push": {"scores": 89}},
        doc! {"_id": 1, "scores": [44, 78, 38, 80, 89]},
    );
    check(
        doc! {"_id": 1, "scores": [44]},
        doc! {"$push": {"scores": {"$each": [90, 92, 85]}}},
        doc! {"_id": 1, "scores": [44, 90, 92, 85]},
    );
    check(
        doc! {"_id": 5, "quizzes": [{"wk": 1, "score": 10}, {"wk": 2, "score": 8},
        {"wk": 3, "score": 5}, {"wk": 4, "score": 6}]},
        doc! {"$push": {"quizzes": {
        "$each": [{"wk": 5, "score": 8}, {"wk": 6, "score": 7}, {"wk": 7, "score": 6}],
        "$sort": {"score": -1}, "$slice": 3}}},
        doc! {"_id": 5, "quizzes": [{"wk": 1, "score": 10}, {"wk": 2, "score": 8},
        {"wk": 5, "score": 8}]},
    );
    check(
        doc! {"_id": 1},
        doc! {"$push": {"a": 1}},
        doc! {"_id": 1, "a": [1]},
    );
    // A document without $each is pushed as is.
    check(
        doc! {"_id": 1, "a": []},
        doc! {"$push": {"a": {"b": 1}}},
        doc! {"_id": 1, "a": [{"b": 1}]},
    );
}

#[test]
fn push_position_slice_sort_manual() {
    check(
        doc! {"_id": 1, "scores": [100]},
        doc! {"$push": {"scores": {"$each": [50, 60, 70], "$position": 0}}},
        doc! {"_id": 1, "scores": [50, 60, 70, 100]},
    );
    check(
        doc! {"_id": 1, "scores": [50, 60, 70, 100]},
        doc! {"$push": {"scores": {"$each": [20, 30], "$position": 2}}},
        doc! {"_id": 1, "scores": [50, 60, 20, 30, 70, 100]},
    );
    check(
        doc! {"_id": 1, "scores": [50, 60, 20, 30, 70, 100]},
        doc! {"$push": {"scores": {"$each": [90, 80], "$position": -2}}},
        doc! {"_id": 1, "scores": [50, 60, 20, 30, 90, 80, 70, 100]},
    );
    check(
        doc! {"_id": 1, "scores": [40, 50, 60]},
        doc! {"$push": {"scores": {"$each": [80, 78, 86], "$slice": -5}}},
        doc! {"_id": 1, "scores": [50, 60, 80, 78, 86]},
    );
    check(
        doc! {"_id": 2, "scores": [89, 90]},
        doc! {"$push": {"scores": {"$each": [100, 20], "$slice": 3}}},
        doc! {"_id": 2, "scores": [89, 90, 100]},
    );
    check(
        doc! {"_id": 3, "scores": [89, 70, 100, 20]},
        doc! {"$push": {"scores": {"$each": [], "$slice": -3}}},
        doc! {"_id": 3, "scores": [70, 100, 20]},
    );
    check(
        doc! {"_id": 1, "quizzes": [{"id": 1, "score": 6}, {"id": 2, "score": 9}]},
        doc! {"$push": {"quizzes": {"$each": [{"id": 3, "score": 8}, {"id": 4, "score": 7},
        {"id": 5, "score": 6}], "$sort": {"score": 1}}}},
        doc! {"_id": 1, "quizzes": [{"id": 1, "score": 6}, {"id": 5, "score": 6},
        {"id": 4, "score": 7}, {"id": 3, "score": 8},
        {"id": 2, "score": 9}]},
    );
    check(
        doc! {"_id": 2, "tests": [89, 70, 89, 50]},
        doc! {"$push": {"tests": {"$each": [40, 60], "$sort": 1}}},
        doc! {"_id": 2, "tests": [40, 50, 60, 70, 89, 89]},
    );
    check(
        doc! {"_id": 3, "tests": [40, 50, 60, 70, 89, 89]},
        doc! {"$push": {"tests": {"$each": [], "$sort": -1}}},
        doc! {"_id": 3, "tests": [89, 89, 70, 60, 50, 40]},
    );
    // Empty $each alone is a no-op; with $sort it always counts as a change.
    check_mod(
        doc! {"_id": 1, "a": [1]},
        doc! {"$push": {"a": {"$each": []}}},
        doc! {"_id": 1, "a": [1]},
        false,
    );
    check_mod(
        doc! {"_id": 1, "a": [1, 2]},
        doc! {"$push": {"a": {"$each": [], "$sort": 1}}},
        doc! {"_id": 1, "a": [1, 2]},
        true,
    );
}

#[test]
fn push_errors() {
    check_err(
        doc! {"_id": 1, "a": 1},
        doc! {"$push": {"a": 2}},
        2,
        "The field 'a' must be an array but is of type int in document {_id: 1}",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$push": {"a": {"$each": 1}}},
        2,
        "The argument to $each in $push must be an array but it was of type: int",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$push": {"a": {"$each": [], "$x": 1}}},
        2,
        "Unrecognized clause in $push: $x",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$push": {"a": {"$each": [], "$slice": "x"}}},
        2,
        "The value for $slice must be an integer value but was given type: string",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$push": {"a": {"$each": [], "$sort": 2}}},
        2,
        "The $sort element value must be either 1 or -1",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$push": {"a": {"$each": [], "$sort": {}}}},
        2,
        "The $sort pattern is empty when it should be a set of fields.",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$push": {"a": {"$each": [], "$position": 1.5}}},
        2,
        "The value for $position must be an integer value, not of type: double",
    );
}

#[test]
fn add_to_set_manual() {
    check(
        doc! {"_id": 1, "letters": ["a", "b"]},
        doc! {"$addToSet": {"letters": ["c", "d"]}},
        doc! {"_id": 1, "letters": ["a", "b", ["c", "d"]]},
    );
    let inv = || doc! {"_id": 1, "item": "polarizing_filter", "tags": ["electronics", "camera"]};
    check(
        inv(),
        doc! {"$addToSet": {"tags": "accessories"}},
        doc! {"_id": 1, "item": "polarizing_filter", "tags": ["electronics", "camera", "accessories"]},
    );
    check_mod(inv(), doc! {"$addToSet": {"tags": "camera"}}, inv(), false);
    check(
        doc! {"_id": 2, "item": "cable", "tags": ["electronics", "supplies"]},
        doc! {"$addToSet": {"tags": {"$each": ["camera", "electronics", "accessories"]}}},
        doc! {"_id": 2, "item": "cable", "tags": ["electronics", "supplies", "camera", "accessories"]},
    );
    check(
        doc! {"_id": 1},
        doc! {"$addToSet": {"a": {"$each": [1, 1.0, 2]}}},
        doc! {"_id": 1, "a": [1, 2]},
    );
    // Presence is by value (1.0 == 1) against the stored elements; a document with its
    // fields in another order is another value.
    check(
        doc! {"_id": 1, "a": [1, 2.0, {"x": 1, "y": 2}]},
        doc! {"$addToSet": {"a": {"$each": [1.0, 2_i64, 3, {"y": 2, "x": 1}, {"x": 1, "y": 2}]}}},
        doc! {"_id": 1, "a": [1, 2.0, {"x": 1, "y": 2}, 3, {"y": 2, "x": 1}]},
    );
    check_mod(
        doc! {"_id": 1, "a": [1, "b", [2]]},
        doc! {"$addToSet": {"a": {"$each": [1.0, "b", [2]]}}},
        doc! {"_id": 1, "a": [1, "b", [2]]},
        false,
    );
    // A string is present as a string or a symbol with the same text, found among elements
    // of other types (binary and regex ones included), and never equal to a longer or
    // shorter string, or to a number or array.
    let mixed = || {
        doc! {"_id": 1, "a": [
            bson::Bson::Symbol("sym".into()), 7, ["b"], "bb", "", "b\u{e9}",
            bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0x62] },
            bson::Regex { pattern: "b".to_string().try_into().unwrap(), options: String::new().try_into().unwrap() },
        ]}
    };
    check_mod(
        mixed(),
        doc! {"$addToSet": {"a": {"$each": ["sym", "", "b\u{e9}", "bb"]}}},
        mixed(),
        false,
    );
    let mut grown = mixed();
    if let Some(bson::Bson::Array(a)) = grown.get_mut("a") {
        a.extend(["b".into(), "7".into(), "b\u{e9}\u{e9}".into()]);
    }
    check(
        mixed(),
        doc! {"$addToSet": {"a": {"$each": ["b", "7", "b\u{e9}\u{e9}"]}}},
        grown,
    );
    let plain = || doc! {"_id": 1, "a": ["x", bson::Bson::Symbol("y".into()), "z"]};
    check_mod(plain(), doc! {"$addToSet": {"a": "y"}}, plain(), false);
    check(
        plain(),
        doc! {"$addToSet": {"a": "yy"}},
        doc! {"_id": 1, "a": ["x", bson::Bson::Symbol("y".into()), "z", "yy"]},
    );
    check_err(
        doc! {"_id": 1, "colors": "blue, green, red"},
        doc! {"$addToSet": {"colors": "mauve"}},
        2,
        "Cannot apply $addToSet to non-array field. Field named 'colors' has non-array type string",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$addToSet": {"a": {"$each": 1}}},
        14,
        "The argument to $each in $addToSet must be an array but it was of type int",
    );
}

#[test]
fn pop_manual() {
    check(
        doc! {"_id": 1, "scores": [8, 9, 10]},
        doc! {"$pop": {"scores": -1}},
        doc! {"_id": 1, "scores": [9, 10]},
    );
    check(
        doc! {"_id": 10, "scores": [9, 10]},
        doc! {"$pop": {"scores": 1}},
        doc! {"_id": 10, "scores": [9]},
    );
    check_mod(
        doc! {"_id": 1, "a": []},
        doc! {"$pop": {"a": 1}},
        doc! {"_id": 1, "a": []},
        false,
    );
    check_mod(
        doc! {"_id": 1},
        doc! {"$pop": {"a": 1}},
        doc! {"_id": 1},
        false,
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$pop": {"v": "foo"}},
        9,
        "Expected a number in: v: \"foo\"",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$pop": {"v": 42}},
        9,
        "$pop expects 1 or -1, found: 42",
    );
    check_err(
        doc! {"_id": 1, "v": 42},
        doc! {"$pop": {"v": 1}},
        14,
        "Path 'v' contains an element of non-array type 'int'",
    );
    check_err(
        doc! {"_id": 1, "a": "foo"},
        doc! {"$pop": {"a.b": 1}},
        28,
        "Cannot use the part (b) of (a.b) to traverse the element ({a: \"foo\"})",
    );
}

#[test]
fn pull_manual() {
    check(
        doc! {"_id": 1, "fruits": ["apples", "pears", "oranges", "grapes", "bananas"],
        "vegetables": ["carrots", "celery", "squash", "carrots"]},
        doc! {"$pull": {"fruits": {"$in": ["apples", "oranges"]}, "vegetables": "carrots"}},
        doc! {"_id": 1, "fruits": ["pears", "grapes", "bananas"], "vegetables": ["celery", "squash"]},
    );
    check(
        doc! {"_id": 1, "votes": [3, 5, 6, 7, 7, 8]},
        doc! {"$pull": {"votes": {"$gte": 6}}},
        doc! {"_id": 1, "votes": [3, 5]},
    );
    let survey = |id: i32, results: Vec<Bson>| doc! {"_id": id, "results": results};
    check(
        survey(
            1,
            vec![
                doc! {"item": "A", "score": 5}.into(),
                doc! {"item": "B", "score": 8}.into(),
            ],
        ),
        doc! {"$pull": {"results": {"score": 8, "item": "B"}}},
        survey(1, vec![doc! {"item": "A", "score": 5}.into()]),
    );
    check_mod(
        survey(
            2,
            vec![
                doc! {"item": "C", "score": 8}.into(),
                doc! {"item": "B", "score": 4}.into(),
            ],
        ),
        doc! {"$pull": {"results": {"score": 8, "item": "B"}}},
        survey(
            2,
            vec![
                doc! {"item": "C", "score": 8}.into(),
                doc! {"item": "B", "score": 4}.into(),
            ],
        ),
        false,
    );
    check(
        doc! {"_id": 1, "results": [
        {"item": "A", "score": 5, "answers": [{"q": 1, "a": 4}, {"q": 2, "a": 6}]},
        {"item": "B", "score": 8, "answers": [{"q": 1, "a": 8}, {"q": 2, "a": 9}]}]},
        doc! {"$pull": {"results": {"answers": {"$elemMatch": {"q": 2, "a": {"$gte": 8}}}}}},
        doc! {"_id": 1, "results": [
        {"item": "A", "score": 5, "answers": [{"q": 1, "a": 4}, {"q": 2, "a": 6}]}]},
    );
    // Equality compares values across numeric types; arrays are matched whole.
    check(
        doc! {"_id": 1, "a": [1, 1.0, 2, [1]]},
        doc! {"$pull": {"a": 1}},
        doc! {"_id": 1, "a": [2, [1]]},
    );
    check(
        doc! {"_id": 1, "a": [[1], [2]]},
        doc! {"$pull": {"a": [1]}},
        doc! {"_id": 1, "a": [[2]]},
    );
    // A regex matches strings.
    check(
        doc! {"_id": 1, "a": ["abc", "xyz", 1]},
        doc! {"$pull": {"a": bson::Regex { pattern: "^a".try_into().unwrap(), options: "".try_into().unwrap() }}},
        doc! {"_id": 1, "a": ["xyz", 1]},
    );
    // {} matches every document element.
    check(
        doc! {"_id": 1, "a": [{"x": 1}, 2]},
        doc! {"$pull": {"a": {}}},
        doc! {"_id": 1, "a": [2]},
    );
    check_mod(
        doc! {"_id": 1},
        doc! {"$pull": {"a": 1}},
        doc! {"_id": 1},
        false,
    );
    check_err(
        doc! {"_id": 1, "a": 1},
        doc! {"$pull": {"a": 1}},
        2,
        "Cannot apply $pull to a non-array value",
    );
}

#[test]
fn pull_all_manual() {
    check(
        doc! {"_id": 1, "scores": [0, 2, 5, 5, 1, 0]},
        doc! {"$pullAll": {"scores": [0, 5]}},
        doc! {"_id": 1, "scores": [2, 1]},
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$pullAll": {"scores": 1}},
        2,
        "$pullAll requires an array argument but was given a int",
    );
}

#[test]
fn bit_manual() {
    check(
        doc! {"_id": 1, "expdata": 13},
        doc! {"$bit": {"expdata": {"and": 10}}},
        doc! {"_id": 1, "expdata": 8},
    );
    check(
        doc! {"_id": 2, "expdata": 3i64},
        doc! {"$bit": {"expdata": {"or": 5}}},
        doc! {"_id": 2, "expdata": 7i64},
    );
    check(
        doc! {"_id": 3, "expdata": 1i64},
        doc! {"$bit": {"expdata": {"xor": 5}}},
        doc! {"_id": 3, "expdata": 4i64},
    );
    check(
        doc! {"_id": 1},
        doc! {"$bit": {"a": {"or": 5}}},
        doc! {"_id": 1, "a": 5},
    );
    check(
        doc! {"_id": 1},
        doc! {"$bit": {"a": {"and": 5i64}}},
        doc! {"_id": 1, "a": 0i64},
    );
    check(
        doc! {"_id": 1, "a": 5},
        doc! {"$bit": {"a": {"and": 1, "or": 8}}},
        doc! {"_id": 1, "a": 9},
    );
    check_mod(
        doc! {"_id": 1, "a": 5},
        doc! {"$bit": {"a": {"or": 1}}},
        doc! {"_id": 1, "a": 5},
        false,
    );
    check_err(
        doc! {"_id": "x", "a": 1.0},
        doc! {"$bit": {"a": {"or": 1}}},
        2,
        "Cannot apply $bit to a value of non-integral type._id: \"x\" has the field a of \
         non-integer type double",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$bit": {"a": {"not": 1}}},
        2,
        "The $bit modifier only supports 'and', 'or', and 'xor', not 'not' which is an unknown \
         operator: {not: 1}",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$bit": {"a": {"and": "x"}}},
        2,
        "The $bit modifier field must be an Integer(32/64 bit); a 'string' is not supported here: \
         {and: \"x\"}",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$bit": {"a": {}}},
        2,
        "You must pass in at least one bitwise operation. The format is: {$bit: {field: \
         {and/or/xor: #}}",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$bit": {"a": "x"}},
        2,
        "The $bit modifier is not compatible with a string. You must pass in an embedded \
         document: {$bit: {field: {and/or/xor: #}}",
    );
}

// ------------------------------------------------------------------------------------------
// Parsing, conflicts, immutability, limits
// ------------------------------------------------------------------------------------------

#[test]
fn parse_errors() {
    check_err(
        doc! {"_id": 1},
        doc! {"$foo": {"a": 1}},
        9,
        "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update \
         specified as an array",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$set": {"a": 1}, "b": 2},
        9,
        "Unknown modifier: b. Expected a valid update modifier or pipeline-style update specified \
         as an array",
    );
    for (v, t, shown) in [
        (Bson::Int32(1), "int", "1"),
        (Bson::Array(vec![]), "array", "[]"),
        (Bson::Null, "null", "null"),
        (Bson::String("x".into()), "string", "\"x\""),
        (Bson::Double(43.13), "double", "43.13"),
    ] {
        check_err(
            doc! {"_id": 1},
            doc! {"$set": v},
            9,
            &format!(
                "Modifiers operate on fields but we found type {t} instead. For example: \
                 {{$mod: {{<field>: ...}}}} not {{$set: {shown}}}"
            ),
        );
    }
    check_err(
        doc! {"_id": 1},
        doc! {"$set": {"foo": 1}, "$inc": {"foo": 1}},
        40,
        "Updating the path 'foo' would create a conflict at 'foo'",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$set": {"v": 1}, "$inc": {"v.foo": 1}},
        40,
        "Updating the path 'v.foo' would create a conflict at 'v'",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$set": {"v.foo": 1}, "$inc": {"v": 1}},
        40,
        "Updating the path 'v' would create a conflict at 'v'",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$set": {"a.$.b.$": 1}},
        2,
        "Too many positional (i.e. '$') elements found in path 'a.$.b.$'",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$set": {"$.a": 1}},
        2,
        "Cannot have positional (i.e. '$') element in the first position in path '$.a'",
    );
    let spec = bson::RawDocumentBuf::new();
    let _ = spec;
    // Non-document and pipeline specifications.
    assert_eq!(
        Update::parse(bson::RawBsonRef::Int32(1), None, false)
            .map(|_| ())
            .unwrap_err()
            .to_string(),
        "Update argument must be either an object or an array"
    );
    let arr = bson::rawdoc! {"p": [{"$set": {"a": 1}}]};
    let Ok(Some(p)) = arr.get("p") else { panic!() };
    assert_eq!(
        Update::parse(p, None, false).unwrap().kind(),
        cairn_query::update::UpdateKind::Pipeline
    );
}

#[test]
fn id_is_immutable() {
    check_err(
        doc! {"_id": "array-documents-nested"},
        doc! {"$set": {"_id": "another-id"}},
        66,
        "Performing an update on the path '_id' would modify the immutable field '_id'",
    );
    check_mod(
        doc! {"_id": 1, "a": 1},
        doc! {"$set": {"_id": 1}},
        doc! {"_id": 1, "a": 1},
        false,
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$inc": {"_id": 1}},
        66,
        "Performing an update on the path '_id' would modify the immutable field '_id'",
    );
    check_err(
        doc! {"_id": {"a": 1}},
        doc! {"$set": {"_id.a": 2}},
        66,
        "Performing an update on the path '_id.a' would modify the immutable field '_id'",
    );
    check_err(
        doc! {"_id": {"a": 1}},
        doc! {"$set": {"_id.b": 2}},
        66,
        "Updating the path '_id' to _id: { a: 1, b: 2 } would modify the immutable field '_id'",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$unset": {"_id": 1}},
        66,
        "Performing an update on the path '_id' would modify the immutable field '_id'",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$set": {"_id.x": 1}},
        28,
        "Cannot create field 'x' in element {_id: 1}",
    );
}

#[test]
fn nesting_and_size_limits() {
    // 180 levels are fine, 181 are not.
    let mut deep = Bson::Int32(1);
    for _ in 0..179 {
        deep = Bson::Document(doc! {"x": deep});
    }
    check(
        doc! {"_id": 1},
        doc! {"$set": {"a": deep.clone()}},
        doc! {"_id": 1, "a": deep.clone()},
    );
    check_err(
        doc! {"_id": 1},
        doc! {"$set": {"a": {"b": deep}}},
        15,
        "Document exceeds maximum nesting depth of 180",
    );
    let path = vec!["p"; 181].join(".");
    check_err(
        doc! {"_id": 1},
        doc! {"$set": {path: 1}},
        15,
        "Document exceeds maximum nesting depth of 180",
    );
    let big = "x".repeat(9 * 1024 * 1024);
    check_err(
        doc! {"_id": 1, "a": big.clone()},
        doc! {"$set": {"b": big}},
        17419,
        "Resulting document after update is larger than 16777216",
    );
}

// ------------------------------------------------------------------------------------------
// Replacements
// ------------------------------------------------------------------------------------------

#[test]
fn replacements() {
    let u = parse(&doc! {"a": 2}, None).unwrap();
    assert_eq!(u.kind(), UpdateKind::Replacement);
    assert_eq!(u.touched_top_level_fields(), None);
    check(
        doc! {"_id": 1, "a": 1, "b": 2},
        doc! {"a": 2},
        doc! {"_id": 1, "a": 2},
    );
    check(doc! {"_id": 1, "a": 1}, doc! {}, doc! {"_id": 1});
    check(
        doc! {"_id": 1, "a": 1},
        doc! {"_id": 1, "c": 1},
        doc! {"_id": 1, "c": 1},
    );
    check_mod(
        doc! {"_id": 1, "a": 1},
        doc! {"a": 1},
        doc! {"_id": 1, "a": 1},
        false,
    );
    check(
        doc! {"_id": 1},
        doc! {"t": Timestamp { time: 0, increment: 0 }},
        doc! {"_id": 1, "t": ts()},
    );
    check_err(
        doc! {"_id": 1, "a": 1},
        doc! {"_id": 2, "a": 1},
        66,
        "After applying the update, the (immutable) field '_id' was found to have been altered to \
         _id: 2",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"a": 1, "$x": 1},
        52,
        "The dollar ($) prefixed field '$x' in '$x' is not allowed in the context of an update's \
         replacement document. Consider using an aggregation pipeline with $replaceWith.",
    );
    check(
        doc! {"_id": 1},
        doc! {"a": {"$x": 1}},
        doc! {"_id": 1, "a": {"$x": 1}},
    );
    check(
        doc! {"_id": 1},
        doc! {"r": 1, "$ref": "c", "$id": 1},
        doc! {"_id": 1, "r": 1, "$ref": "c", "$id": 1},
    );
    check_err(
        doc! {"_id": 1},
        doc! {"a": 1, "$id": 1},
        55,
        "Found $id field without a $ref before it, which is invalid.",
    );
    check_err(
        doc! {"_id": 1},
        doc! {"_id": [1]},
        53,
        "The '_id' value cannot be of type array",
    );
}

#[test]
fn changed_top_level_fields() {
    let a = apply(
        &doc! {"_id": 1, "a": 1, "b": {"c": 1}, "d": 1},
        &doc! {
            "$set": {"a": 1, "b.c": 2}, "$unset": {"d": 1, "zz": 1}, "$rename": {"e": "f"}
        },
    )
    .unwrap();
    assert_eq!(a.changed_top_level, vec!["b", "d"]);
    let a = apply(&doc! {"_id": 1, "e": 1}, &doc! {"$rename": {"e": "f"}}).unwrap();
    assert_eq!(a.changed_top_level, vec!["e", "f"]);
    let u = parse(
        &doc! {"$set": {"x.y": 1, "a": 1}, "$rename": {"q": "r.s"}},
        None,
    )
    .unwrap();
    assert_eq!(
        u.touched_top_level_fields(),
        Some(vec!["a".into(), "q".into(), "r".into(), "x".into()])
    );
}
