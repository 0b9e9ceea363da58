//! Parse errors: MongoDB's codes, and its messages where they are known exactly.

mod common;

use bson::{Bson, bson};
use common::*;

fn err(filter: Bson, code: i32, msg: &str) {
    let got = expect_err(filter.clone(), code);
    assert_eq!(got, msg, "filter {filter}");
}

#[test]
fn unknown_operators() {
    err(bson!({"a": {"$foo": 1}}), 2, "unknown operator: $foo");
    err(bson!({"a": {"$eq": 1, "b": 2}}), 2, "unknown operator: b");
    err(
        bson!({"$foo": 1}),
        2,
        "unknown top level operator: $foo. If you have a field name that starts with a '$' \
         symbol, consider using $getField or $setField.",
    );
    err(
        bson!({"$size": 2}),
        2,
        "unknown top level operator: $size. If you have a field name that starts with a '$' \
         symbol, consider using $getField or $setField.",
    );
    err(
        bson!({"a": {"$where": "x"}}),
        2,
        "$where cannot be applied to a field",
    );
    err(bson!({"v": {"$expr": 1}}), 2, "unknown operator: $expr");
    err(
        bson!({"a": {"$maxDistance": 1}}),
        2,
        "unknown operator: $maxDistance",
    );
}

#[test]
fn logical() {
    err(bson!({"$and": 1}), 2, "$and must be an array");
    err(bson!({"$or": {}}), 2, "$or must be an array");
    err(bson!({"$nor": null}), 2, "$nor must be an array");
    err(
        bson!({"$and": []}),
        2,
        "$and/$or/$nor must be a nonempty array",
    );
    err(
        bson!({"$or": []}),
        2,
        "$and/$or/$nor must be a nonempty array",
    );
    err(
        bson!({"$nor": [1]}),
        2,
        "$or/$and/$nor entries need to be full objects",
    );
    err(
        bson!({"a": {"$not": 5}}),
        2,
        "$not needs a regex or a document",
    );
    err(bson!({"a": {"$not": {}}}), 2, "$not cannot be empty");
    err(bson!({"a": {"$not": {"b": 1}}}), 2, "unknown operator: b");
    err(
        bson!({"$not": {"a": 1}}),
        2,
        "unknown top level operator: $not. If you have a field name that starts with a '$' symbol, consider using $getField or $setField.",
    );
    err(
        bson!({"$alwaysTrue": 2}),
        9,
        "$alwaysTrue must be an integer value of 1",
    );
    err(
        bson!({"$alwaysFalse": 1.5}),
        9,
        "Expected an integer: $alwaysFalse: 1.5",
    );
}

#[test]
fn comparisons() {
    err(
        bson!({"a": {"$gt": (re("x", ""))}}),
        2,
        "Can't have RegEx as arg to predicate over field 'a'.",
    );
    err(
        bson!({"a.b": {"$lte": (re("x", ""))}}),
        2,
        "Can't have RegEx as arg to predicate over field 'a.b'.",
    );
    err(
        bson!({"a": {"$ne": (re("x", ""))}}),
        2,
        "Can't have regex as arg to $ne.",
    );
    err(
        bson!({"a": (Bson::Undefined)}),
        2,
        "cannot compare to undefined",
    );
    err(
        bson!({"a": {"$lt": (Bson::Undefined)}}),
        2,
        "cannot compare to undefined",
    );
    err(bson!({"a": {"$in": 1}}), 2, "$in needs an array");
    err(bson!({"a": {"$nin": {}}}), 2, "$nin needs an array");
    err(
        bson!({"a": {"$in": [{"$gt": 1}]}}),
        2,
        "cannot nest $ under $in",
    );
    err(
        bson!({"a": {"$nin": [1, {"$exists": true}]}}),
        2,
        "cannot nest $ under $in",
    );
    err(
        bson!({"a": {"$in": [(Bson::Undefined)]}}),
        2,
        "InMatchExpression equality cannot be undefined",
    );
    // DBRefs are values, not operators.
    assert!(parse(&bson!({"a": {"$in": [{"$ref": "c", "$id": 1}]}})).is_ok());
}

#[test]
fn arrays() {
    err(bson!({"a": {"$all": 1}}), 2, "$all needs an array");
    err(
        bson!({"a": {"$all": [{"$elemMatch": {"b": 1}}, 5]}}),
        2,
        "$all/$elemMatch has to be consistent",
    );
    err(
        bson!({"a": {"$all": [{"$elemMatch": {"b": 1}}, {"b": 5}]}}),
        2,
        "$all/$elemMatch has to be consistent",
    );
    err(
        bson!({"a": {"$all": [1, {"$gt": 5}]}}),
        2,
        "no $ expressions in $all",
    );
    err(
        bson!({"a": {"$all": [(Bson::Undefined)]}}),
        2,
        "cannot compare to undefined",
    );
    err(
        bson!({"a": {"$elemMatch": 1}}),
        2,
        "$elemMatch needs an Object",
    );
    err(
        bson!({"a": {"$elemMatch": [1]}}),
        2,
        "$elemMatch needs an Object",
    );
    err(bson!({"a": {"$size": "2"}}), 2, "$size needs a number");
    err(
        bson!({"a": {"$size": {"$gt": 1}}}),
        2,
        "$size needs a number",
    );
    err(
        bson!({"a": {"$size": (dec("2"))}}),
        2,
        "$size needs a number",
    );
    err(
        bson!({"a": {"$size": 2.5}}),
        2,
        "$size must be a whole number",
    );
    err(
        bson!({"a": {"$size": (f64::NAN)}}),
        2,
        "$size must be a whole number",
    );
    err(
        bson!({"a": {"$size": (f64::INFINITY)}}),
        2,
        "$size must be a whole number",
    );
    err(bson!({"a": {"$size": -1}}), 2, "$size may not be negative");
    err(
        bson!({"a": {"$size": (l(1 << 40))}}),
        2,
        "$size must be representable as a 32-bit integer",
    );
    assert!(parse(&bson!({"a": {"$size": -0.0}})).is_ok());
    assert!(parse(&bson!({"a": {"$size": (l(3))}})).is_ok());
}

#[test]
fn element() {
    err(
        bson!({"a": {"$type": {}}}),
        14,
        "type must be represented as a number or a string",
    );
    err(
        bson!({"a": {"$type": [true]}}),
        14,
        "type must be represented as a number or a string",
    );
    err(
        bson!({"a": {"$type": []}}),
        9,
        "a must match at least one type",
    );
    err(
        bson!({"a": {"$type": "float"}}),
        2,
        "Unknown type name alias: float",
    );
    err(
        bson!({"a": {"$type": "missing"}}),
        2,
        "'missing' is not a legal type name. To query for non-existence of a field, use {$exists:false}.",
    );
    err(
        bson!({"a": {"$type": 42}}),
        2,
        "Invalid numerical type code: 42",
    );
    err(
        bson!({"a": {"$type": -123}}),
        2,
        "Invalid numerical type code: -123",
    );
    err(
        bson!({"a": {"$type": ["binData", -1.123]}}),
        2,
        "Invalid numerical type code: -1.123",
    );
    err(
        bson!({"a": {"$type": (f64::NAN)}}),
        2,
        "Invalid numerical type code: nan",
    );
    err(
        bson!({"a": {"$type": (f64::INFINITY)}}),
        2,
        "Invalid numerical type code: inf",
    );
    err(
        bson!({"a": {"$type": (f64::NEG_INFINITY)}}),
        2,
        "Invalid numerical type code: -inf",
    );
    assert!(parse(&bson!({"a": {"$type": 2.0}})).is_ok());
    assert!(parse(&bson!({"a": {"$type": (dec("19"))}})).is_ok());
}

#[test]
fn mod_errors() {
    err(
        bson!({"a": {"$mod": 1}}),
        2,
        "malformed mod, needs to be an array",
    );
    err(
        bson!({"a": {"$mod": []}}),
        2,
        "malformed mod, not enough elements",
    );
    err(
        bson!({"a": {"$mod": [1]}}),
        2,
        "malformed mod, not enough elements",
    );
    err(
        bson!({"a": {"$mod": [1, 2, 3]}}),
        2,
        "malformed mod, too many elements",
    );
    err(
        bson!({"a": {"$mod": ["1", 2]}}),
        2,
        "malformed mod, divisor not a number",
    );
    err(
        bson!({"a": {"$mod": [null, 2]}}),
        2,
        "malformed mod, divisor not a number",
    );
    err(
        bson!({"a": {"$mod": [1, "2"]}}),
        2,
        "malformed mod, remainder not a number",
    );
    err(bson!({"a": {"$mod": [0, 1]}}), 2, "divisor cannot be 0");
    err(bson!({"a": {"$mod": [-0.0, 1]}}), 2, "divisor cannot be 0");
    err(bson!({"a": {"$mod": [0.5, 1]}}), 2, "divisor cannot be 0");
    err(
        bson!({"a": {"$mod": [(f64::NAN), 1]}}),
        2,
        "malformed mod, divisor value is invalid :: caused by :: Unable to coerce NaN/Inf to integral type",
    );
    err(
        bson!({"a": {"$mod": [1, (f64::NEG_INFINITY)]}}),
        2,
        "malformed mod, remainder value is invalid :: caused by :: Unable to coerce NaN/Inf to integral type",
    );
    err(
        bson!({"a": {"$mod": [1e300, 1]}}),
        2,
        "malformed mod, divisor value is invalid :: caused by :: Out of bounds coercing to integral value",
    );
    err(
        bson!({"a": {"$mod": [(dec("1E30")), 1]}}),
        2,
        "malformed mod, divisor value is invalid :: caused by :: Out of bounds coercing to integral value",
    );
}

#[test]
fn regex_errors() {
    err(bson!({"a": {"$regex": 1}}), 2, "$regex has to be a string");
    err(
        bson!({"a": {"$regex": "x", "$options": 1}}),
        2,
        "$options has to be a string",
    );
    err(
        bson!({"a": {"$options": "i"}}),
        2,
        "$options needs a $regex",
    );
    err(
        bson!({"a": {"$options": "i", "$regex": (re("x", "m"))}}),
        51074,
        "options set in both $regex and $options",
    );
    err(
        bson!({"a": {"$regex": (re("x", "m")), "$options": "i"}}),
        51075,
        "options set in both $regex and $options",
    );
    err(
        bson!({"a": {"$regex": "x", "$options": "g"}}),
        51108,
        " invalid flag in regex options: g",
    );
    err(
        bson!({"a": (re("x", "l"))}),
        51108,
        " invalid flag in regex options: l",
    );
    err(
        bson!({"a": {"$regex": "x\u{0}y"}}),
        2,
        "Regular expression cannot contain an embedded null byte",
    );
    for bad in ["(", "[a", "*", "a{2,1}", r"\"] {
        let msg = expect_err(bson!({"a": {"$regex": bad}}), 51091);
        assert!(
            msg.starts_with("Regular expression is invalid: "),
            "{bad}: {msg}"
        );
    }
    expect_err(bson!({"a": {"$in": [(re("(", ""))]}}), 51091);
    expect_err(bson!({"a": {"$not": (re("(", ""))}}), 51091);
    expect_err(bson!({"a": {"$all": [(re("(", ""))]}}), 51091);
    // A regex value with options and an empty $options is still both.
    expect_err(
        bson!({"a": {"$regex": (re("x", "i")), "$options": ""}}),
        51075,
    );
    // Options from the regex alone, or from $options alone, are fine.
    assert!(parse(&bson!({"a": {"$options": "", "$regex": (re("x", "i"))}})).is_ok());
    assert!(parse(&bson!({"a": {"$regex": (re("x", "")), "$options": "i"}})).is_ok());
}

#[test]
fn bitwise_errors() {
    err(
        bson!({"v": {"$bitsAllClear": 1.2}}),
        9,
        "Expected an integer: $bitsAllClear: 1.2",
    );
    err(
        bson!({"v": {"$bitsAllSet": -1}}),
        9,
        "Expected a non-negative number in: $bitsAllSet: -1",
    );
    err(
        bson!({"v": {"$bitsAnySet": -1.0}}),
        9,
        "Expected a non-negative number in: $bitsAnySet: -1.0",
    );
    err(
        bson!({"v": {"$bitsAnyClear": (f64::NAN)}}),
        9,
        "Expected an integer, but found NaN in: $bitsAnyClear: nan.0",
    );
    err(
        bson!({"v": {"$bitsAllClear": "123"}}),
        2,
        "v takes an Array, a number, or a BinData but received: $bitsAllClear: \"123\"",
    );
    err(
        bson!({"v": {"$bitsAllClear": [-1]}}),
        2,
        "Failed to parse bit position. Expected a non-negative number in: 0: -1",
    );
    err(
        bson!({"v": {"$bitsAllSet": [1.2]}}),
        2,
        "Failed to parse bit position. Expected an integer: 0: 1.2",
    );
    err(
        bson!({"v": {"$bitsAnySet": [1, "123"]}}),
        2,
        "Failed to parse bit position. Expected a number in: 1: \"123\"",
    );
    assert!(parse(&bson!({"v": {"$bitsAllSet": [1.0, (l(3)), (dec("4"))]}})).is_ok());
}

#[test]
fn unsupported_and_context() {
    err(
        bson!({"$where": "this.a == 1"}),
        238,
        "$where is not supported yet",
    );
    err(
        bson!({"$expr": {"$eq": ["$a", 1]}}),
        238,
        "$expr is not supported yet",
    );
    err(
        bson!({"$text": {"$search": "x"}}),
        238,
        "$text is not supported yet",
    );
    err(
        bson!({"$jsonSchema": {}}),
        238,
        "$jsonSchema is not supported yet",
    );
    err(
        bson!({"$jsonSchema": 1}),
        14,
        "$jsonSchema must be an object",
    );
    err(
        bson!({"$sampleRate": "half"}),
        14,
        "argument to $sampleRate must be a numeric type",
    );
    err(
        bson!({"$sampleRate": 2}),
        2,
        "numeric argument to $sampleRate must be in [0, 1]",
    );
    err(
        bson!({"a": {"$near": [0, 0], "$maxDistance": -1}}),
        16896,
        "$maxDistance must be non-negative",
    );
    err(
        bson!({"$or": [{"a": {"$near": [0, 0]}}, {"b": 1}]}),
        2,
        "geoNear must be top-level expr",
    );
    err(
        bson!({"a": {"$near": [0, 0]}, "b": {"$nearSphere": [0, 0]}}),
        2,
        "Too many geoNear expressions",
    );
    err(
        bson!({"a": {"$geoWithin": {"$center": [[0, 0], -1]}}}),
        2,
        "radius must be a non-negative number",
    );
    err(
        bson!({"a": {"$geoIntersects": {}}}),
        2,
        "geo query doesn't have any geometry",
    );
    err(
        bson!({"a": {"$nearSphere": {"$geometry": {"type": "Point", "coordinates": [0, 0]}, "$foo": 1}}}),
        2,
        "invalid argument in geo near query: $foo",
    );
    // Top-level-only operators inside $elemMatch.
    err(
        bson!({"a": {"$elemMatch": {"$where": "x"}}}),
        2,
        "$where can only be applied to the top-level document",
    );
    err(
        bson!({"a": {"$elemMatch": {"$expr": 1}}}),
        2,
        "$expr can only be applied to the top-level document",
    );
    err(
        bson!({"a": {"$elemMatch": {"$text": {}}}}),
        2,
        "$text can only be applied to the top-level document",
    );
    // ... but allowed under top-level $and/$or.
    expect_err(bson!({"$or": [{"$expr": 1}]}), 238);
}

#[test]
fn nesting_limit() {
    let mut f = bson!({"a": 1});
    for _ in 0..120 {
        f = bson!({"$and": [f]});
    }
    let msg = expect_err(f, 2);
    assert!(
        msg.starts_with("exceeded maximum query tree depth of 100 at { $and: "),
        "{msg}"
    );
    let mut ok = bson!({"a": 1});
    for _ in 0..99 {
        ok = bson!({"$and": [ok]});
    }
    assert!(parse(&ok).is_ok());
}
