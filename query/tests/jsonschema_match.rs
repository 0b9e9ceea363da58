//! `$jsonSchema` matching, keyword by keyword: table-driven (schema × document → match),
//! transcribed from MongoDB's jstests/core/query/json_schema/*.js (mongo shell numbers are
//! doubles, `NumberInt`/`NumberLong` are int/long) and the manual's examples. Every document
//! is matched as stored (with `_id` first, 0 unless given), as the jstests insert them.

mod jsonschema_common;

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Timestamp, bson, oid::ObjectId};
use jsonschema_common::*;

fn dec(s: &str) -> Bson {
    Bson::Decimal128(s.parse().expect("decimal"))
}

fn bin(subtype: u8, bytes: &[u8]) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::from(subtype),
        bytes: bytes.to_vec(),
    })
}

fn re(pattern: &str) -> Bson {
    Bson::RegularExpression(bson::Regex {
        pattern: pattern.try_into().expect("pattern"),
        options: "".try_into().expect("options"),
    })
}

#[test]
fn empty_schema_and_top_level_type() {
    let docs = [
        bson!({"num": 3.0}),
        bson!({"num": 2}),
        bson!({"num": 1_i64}),
        bson!({"num": {}}),
        bson!({"num": "str"}),
        bson!({}),
    ];
    let all: Vec<(Bson, bool)> = docs.iter().map(|d| (d.clone(), true)).collect();
    let none: Vec<(Bson, bool)> = docs.iter().map(|d| (d.clone(), false)).collect();
    check(bson!({}), &all);
    check(bson!({"type": "object"}), &all);
    check(bson!({"bsonType": "object"}), &all);
    check(bson!({"type": "string"}), &none);
    check(bson!({"bsonType": "long"}), &none);
    check(bson!({"bsonType": "objectId"}), &none);
    check(bson!({"type": "number"}), &none);
    check(bson!({"bsonType": "array"}), &[(bson!({"arr": []}), false)]);
    check(bson!({"type": "array"}), &[(bson!({"arr": []}), false)]);
    check(
        bson!({"type": ["object", "string"]}),
        &[(bson!({}), true), (bson!({"foo": 1.0, "bar": 1.0}), true)],
    );
    check(
        bson!({"bsonType": ["object", "double"]}),
        &[(bson!({}), true), (bson!({"foo": 1.0}), true)],
    );
}

/// json_schema.js: the `num` collection.
#[test]
fn json_schema_js_numbers() {
    let docs = [
        bson!({"_id": 0, "num": 3.0}),
        bson!({"_id": 1, "num": -3.0}),
        bson!({"_id": 2, "num": 2}),
        bson!({"_id": 3, "num": -2}),
        bson!({"_id": 4, "num": 1_i64}),
        bson!({"_id": 5, "num": -1_i64}),
        bson!({"_id": 6, "num": {}}),
        bson!({"_id": 7, "num": "str"}),
        bson!({"_id": 8, "num": "string"}),
        bson!({"_id": 9}),
    ];
    let expect = |schema: Bson, ids: &[i32]| {
        let cases: Vec<(Bson, bool)> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| (d.clone(), ids.contains(&(i as i32))))
            .collect();
        check(schema, &cases);
    };
    expect(
        bson!({"properties": {"num": {"type": "number"}}}),
        &[0, 1, 2, 3, 4, 5, 9],
    );
    expect(
        bson!({"properties": {"num": {"type": "number", "maximum": -1}}}),
        &[1, 3, 5, 9],
    );
    expect(
        bson!({"type": "object", "properties": {"num": {"type": "number", "maximum": -1}}}),
        &[1, 3, 5, 9],
    );
    expect(
        bson!({"properties": {"num": {"bsonType": "long"}}}),
        &[4, 5, 9],
    );
    expect(
        bson!({"properties": {"num": {"bsonType": "long", "maximum": 0}}}),
        &[5, 9],
    );
    expect(
        bson!({"properties": {"num": {"maximum": 0}}}),
        &[1, 3, 5, 6, 7, 8, 9],
    );
    expect(
        bson!({"properties": {"num": {"type": "string", "maximum": 0}}}),
        &[7, 8, 9],
    );
    expect(
        bson!({"properties": {"num": {"type": "string", "maxLength": 2}}}),
        &[9],
    );
    expect(
        bson!({"properties": {"num": {"type": "string", "maxLength": 3}}}),
        &[7, 9],
    );
    expect(
        bson!({"properties": {"num": {"type": "string", "minLength": 4}}}),
        &[8, 9],
    );
    expect(
        bson!({"properties": {"num": {"type": "string", "minLength": 3}}}),
        &[7, 8, 9],
    );
    expect(
        bson!({"properties": {"num": {"type": "string", "pattern": "ing"}}}),
        &[8, 9],
    );
    expect(
        bson!({"properties": {"num": {"exclusiveMaximum": true, "maximum": -1}}}),
        &[1, 3, 6, 7, 8, 9],
    );
    expect(
        bson!({"properties": {"num": {"minimum": 2, "exclusiveMinimum": true}}}),
        &[0, 6, 7, 8, 9],
    );
    expect(
        bson!({"properties": {"num": {"minimum": 2, "exclusiveMinimum": false}}}),
        &[0, 2, 6, 7, 8, 9],
    );
    expect(
        bson!({"properties": {"num": {"bsonType": "number", "minimum": -1.5, "maximum": 2}}}),
        &[2, 4, 5, 9],
    );
}

/// json_schema.js: recursive `properties`, arrays and `type`.
#[test]
fn json_schema_js_objects_and_arrays() {
    let schema = bson!({"properties": {"obj": {"properties": {
        "f1": {"type": "object", "properties": {"f3": {"type": "string"}}},
        "f2": {"type": "string"}
    }}}});
    check(
        schema,
        &[
            (bson!({"_id": 0, "obj": 3.0}), true),
            (
                bson!({"_id": 1, "obj": {"f1": {"f3": "str"}, "f2": "str"}}),
                true,
            ),
            (bson!({"_id": 2, "obj": {"f1": "str", "f2": "str"}}), false),
            (bson!({"_id": 3, "obj": {"f1": 1.0, "f2": "str"}}), false),
        ],
    );
    let arrs = [
        bson!({"_id": 0, "arr": 3.0}),
        bson!({"_id": 1, "arr": [1.0, "foo"]}),
        bson!({"_id": 2, "arr": [{"a": 1.0}, {"b": 2.0}]}),
        bson!({"_id": 3, "arr": []}),
        bson!({"_id": 4, "arr": {"a": []}}),
    ];
    let t = |schema: Bson, ids: &[usize]| {
        let cases: Vec<_> = arrs
            .iter()
            .enumerate()
            .map(|(i, d)| (d.clone(), ids.contains(&i)))
            .collect();
        check(schema, &cases);
    };
    t(
        bson!({"properties": {"arr": {"type": "array"}}}),
        &[1, 2, 3],
    );
    t(bson!({"properties": {"arr": {"type": "number"}}}), &[0]);
    // Annotations are checked as strings but otherwise ignored.
    check(bson!({"description": "test"}), &[(bson!({}), true)]);
    check(bson!({"title": "insert title"}), &[(bson!({}), true)]);
    check(
        bson!({"properties": {"a": {"description": "test"}}}),
        &[(bson!({"a": {}}), true)],
    );
    check(
        bson!({"properties": {"a": {"title": "this is a's title"}}}),
        &[(bson!({"a": {}}), true)],
    );
}

/// bsontype.js.
#[test]
fn bson_type() {
    let p = |field: &str, ty: &str| bson!({"properties": {field: {"bsonType": ty}}});
    check(
        p("num", "double"),
        &[
            (bson!({"num": 3.0}), true),
            (bson!({"num": 3_i64}), false),
            (bson!({"num": 3}), false),
            (bson!({"num": dec("3")}), false),
            (bson!({"num": {}}), false),
            (bson!({"num": [3.0]}), false),
            (bson!({"foo": {}}), true),
        ],
    );
    check(
        p("str", "string"),
        &[
            (bson!({"str": ""}), true),
            (bson!({"str": true}), false),
            (bson!({"str": [1.0, "foo"]}), false),
        ],
    );
    check(
        bson!({"properties": {"str": {"type": "string"}}}),
        &[
            (bson!({"str": ""}), true),
            (bson!({"str": true}), false),
            (bson!({"str": [1.0, "foo"]}), false),
        ],
    );
    check(
        p("obj", "object"),
        &[
            (bson!({"obj": {}}), true),
            (bson!({"obj": true}), false),
            (bson!({"obj": [{}]}), false),
        ],
    );
    check(
        bson!({"properties": {"obj": {"type": "object"}}}),
        &[
            (bson!({"obj": {}}), true),
            (bson!({"obj": true}), false),
            (bson!({"obj": [{}]}), false),
        ],
    );
    check(
        p("arr", "array"),
        &[(bson!({"arr": []}), true), (bson!({"arr": {}}), false)],
    );
    check(
        p("bin", "binData"),
        &[
            (bson!({"bin": bin(0, &[0; 21])}), true),
            (bson!({"bin": {}}), false),
        ],
    );
    let req = |ty: Bson| bson!({"properties": {"u": ty}, "required": ["u"]});
    check(
        req(bson!({"bsonType": "undefined"})),
        &[
            (bson!({"u": Bson::Undefined}), true),
            (bson!({}), false),
            (bson!({"u": null}), false),
        ],
    );
    check(
        p("o", "objectId"),
        &[
            (bson!({"o": ObjectId::from_bytes([1; 12])}), true),
            (bson!({"o": 1.0}), false),
        ],
    );
    check(
        p("b", "bool"),
        &[
            (bson!({"b": true}), true),
            (bson!({"b": false}), true),
            (bson!({"b": 1.0}), false),
        ],
    );
    check(
        bson!({"properties": {"b": {"type": "boolean"}}}),
        &[
            (bson!({"b": true}), true),
            (bson!({"b": false}), true),
            (bson!({"b": 1.0}), false),
        ],
    );
    check(
        p("date", "date"),
        &[
            (
                bson!({"date": bson::DateTime::from_millis(1_700_000_000_000)}),
                true,
            ),
            (bson!({"date": 1.0}), false),
        ],
    );
    let nreq = |ty: Bson| bson!({"properties": {"n": ty}, "required": ["n"]});
    for ty in [bson!({"bsonType": "null"}), bson!({"type": "null"})] {
        check(
            nreq(ty),
            &[
                (bson!({"n": null}), true),
                (bson!({}), false),
                (bson!({"u": Bson::Undefined}), false),
            ],
        );
    }
    check(
        p("r", "regex"),
        &[
            (bson!({"r": re("^abc")}), true),
            (bson!({"r": "^abc"}), false),
        ],
    );
    check(
        p("code", "javascript"),
        &[
            (
                bson!({"code": Bson::JavaScriptCode("function() { return true; }".into())}),
                true,
            ),
            (bson!({"code": 1.0}), false),
        ],
    );
    check(
        p("code", "javascriptWithScope"),
        &[
            (
                bson!({"code": Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
                    code: "function() { return true; }".into(),
                    scope: bson::doc! {"scope": true},
                })}),
                true,
            ),
            (bson!({"code": 1.0}), false),
        ],
    );
    check(
        p("num", "int"),
        &[
            (bson!({"num": 3}), true),
            (bson!({"num": 3_i64}), false),
            (bson!({"num": 3.0}), false),
            (bson!({"num": dec("3")}), false),
            (bson!({"num": {}}), false),
            (bson!({"foo": {}}), true),
        ],
    );
    check(
        p("ts", "timestamp"),
        &[
            (bson!({"ts": Timestamp { time: 0, increment: 1234 }}), true),
            (bson!({"ts": bson::DateTime::from_millis(0)}), false),
        ],
    );
    check(
        p("num", "long"),
        &[
            (bson!({"num": 3_i64}), true),
            (bson!({"num": 3}), false),
            (bson!({"num": 3.0}), false),
            (bson!({"num": dec("3")}), false),
            (bson!({"num": {}}), false),
            (bson!({"foo": {}}), true),
        ],
    );
    check(
        p("num", "decimal"),
        &[
            (bson!({"num": dec("3")}), true),
            (bson!({"num": 3_i64}), false),
            (bson!({"num": 3}), false),
            (bson!({"num": 3.0}), false),
            (bson!({"num": {}}), false),
            (bson!({"foo": {}}), true),
        ],
    );
    check(
        p("k", "minKey"),
        &[
            (bson!({"k": Bson::MinKey}), true),
            (bson!({"k": Bson::MaxKey}), false),
        ],
    );
    check(
        p("k", "maxKey"),
        &[
            (bson!({"k": Bson::MaxKey}), true),
            (bson!({"k": Bson::MinKey}), false),
        ],
    );
    check(
        p("s", "symbol"),
        &[
            (bson!({"s": Bson::Symbol("x".into())}), true),
            (bson!({"s": "x"}), false),
        ],
    );
    // `bsonType: "number"` matches every numeric type.
    check(
        p("n", "number"),
        &[
            (bson!({"n": 1}), true),
            (bson!({"n": 1_i64}), true),
            (bson!({"n": 1.5}), true),
            (bson!({"n": dec("1.5")}), true),
            (bson!({"n": "1"}), false),
            (bson!({"n": [1]}), false),
            (bson!({}), true),
        ],
    );
    // "type" and "bsonType" in different subschemas.
    check(
        bson!({"type": "object", "properties": {"obj": {"bsonType": "object"}}}),
        &[(bson!({"obj": {}}), true), (bson!({"obj": []}), false)],
    );
    let s = bson!({"properties": {"a": {"bsonType": "long"}, "b": {"type": "null"}}});
    check(
        s,
        &[
            (bson!({"a": 3_i64, "b": null}), true),
            (bson!({"a": 3_i64}), true),
            (bson!({"b": null}), true),
            (bson!({"a": 3.0, "b": null}), false),
            (bson!({"a": 3_i64, "b": 3.0}), false),
        ],
    );
    // Arrays of aliases.
    check(
        bson!({"properties": {"f": {"type": ["number", "string"]}}}),
        &[
            (bson!({"f": 1.0}), true),
            (bson!({"f": "str"}), true),
            (bson!({}), true),
            (bson!({"f": ["str", 1.0]}), false),
            (bson!({"f": {}}), false),
        ],
    );
    check(
        bson!({"properties": {"f": {"bsonType": ["objectId", "double"]}}}),
        &[
            (bson!({"f": 1.0}), true),
            (bson!({"f": ObjectId::from_bytes([2; 12])}), true),
            (bson!({}), true),
            (bson!({"f": [1.0]}), false),
            (bson!({"f": 1}), false),
        ],
    );
}

/// items.js.
#[test]
fn items() {
    check(bson!({"items": {"type": "number"}}), &[(bson!({}), true)]);
    check(bson!({"items": [{"type": "number"}]}), &[(bson!({}), true)]);
    check(
        bson!({"properties": {"a": {"items": {"minimum": 0}}}}),
        &[(bson!({}), true), (bson!({"a": -1.0}), true)],
    );
    check(
        bson!({"properties": {"a": {"items": [{"minimum": 0}]}}}),
        &[(bson!({}), true), (bson!({"a": -1.0}), true)],
    );
    check(
        bson!({"properties": {"a": {"items": {"pattern": "a+b"}}}}),
        &[
            (bson!({"a": []}), true),
            (bson!({"a": [7.0]}), true),
            (bson!({"a": [null]}), true),
            (bson!({"a": ["cab"]}), true),
            (bson!({"a": ["cab", "caab"]}), true),
            (bson!({"a": ["cab", "caab", "b"]}), false),
        ],
    );
    check(
        bson!({"properties": {"a": {"items": [{"multipleOf": 2}]}}}),
        &[
            (bson!({"a": []}), true),
            (bson!({"a": [2.0]}), true),
            (bson!({"a": [2.0, 3.0]}), true),
            (bson!({"a": [3.0]}), false),
        ],
    );
    check(
        bson!({"properties": {"a": {"items": [{"maxLength": 1}, {"maxLength": 2}]}}}),
        &[
            (bson!({"a": []}), true),
            (bson!({"a": ["1"]}), true),
            (bson!({"a": ["1", "12"]}), true),
            (bson!({"a": ["1", "12", "123"]}), true),
            (bson!({"a": ["12"]}), false),
            (bson!({"a": ["1", "123"]}), false),
        ],
    );
    check(
        bson!({"properties": {"a": {"items": []}}}),
        &[
            (bson!({}), true),
            (bson!({"a": "blah"}), true),
            (bson!({"a": []}), true),
            (bson!({"a": [1.0, "foo", {}]}), true),
        ],
    );
    // Nested arrays: items see elements whole (no further traversal).
    check(
        bson!({"properties": {"a": {"items": {"type": "array", "items": {"type": "number"}}}}}),
        &[
            (bson!({"a": [[1.0], [2.0, 3.0]]}), true),
            (bson!({"a": [[1.0], ["x"]]}), false),
            (bson!({"a": [1.0]}), false),
        ],
    );
    // Required inside items applies to each element that is an object.
    check(
        bson!({"properties": {"a": {"items": {"required": ["x"]}}}}),
        &[
            (bson!({"a": [{"x": 1}, 5]}), true),
            (bson!({"a": [{"x": 1}, {"y": 1}]}), false),
        ],
    );
}

/// additional_items.js.
#[test]
fn additional_items() {
    for ai in [bson!(false), bson!(true), bson!({"type": "string"})] {
        check(
            bson!({"items": [{"type": "number"}], "additionalItems": ai}),
            &[(bson!({}), true)],
        );
    }
    for s in [
        bson!({"properties": {"a": {"additionalItems": false}}}),
        bson!({"properties": {"a": {"additionalItems": {"type": "object"}}}}),
        bson!({"properties": {"a": {"items": {}, "additionalItems": false}}}),
        bson!({"properties": {"a": {"items": {}, "additionalItems": {"type": "object"}}}}),
    ] {
        check(
            s,
            &[
                (bson!({}), true),
                (bson!({"a": "blah"}), true),
                (bson!({"a": []}), true),
                (bson!({"a": [1.0, 2.0, 3.0]}), true),
            ],
        );
    }
    check(
        bson!({"properties": {"a": {"items": [{"type": "number"}, {"type": "string"}], "additionalItems": false}}}),
        &[
            (bson!({"a": []}), true),
            (bson!({"a": [229.0]}), true),
            (bson!({"a": [229.0, "West 43rd"]}), true),
            (bson!({"a": [229.0, "West 43rd", "Street"]}), false),
        ],
    );
    check(
        bson!({"properties": {"a": {"items": [{"type": "number"}, {"type": "string"}], "additionalItems": true}}}),
        &[(bson!({"a": [229.0, "West 43rd", "Street"]}), true)],
    );
    check(
        bson!({"properties": {"a": {"items": [{"not": {}}], "additionalItems": true}}}),
        &[(bson!({"a": []}), true)],
    );
    check(
        bson!({"properties": {"a": {"items": [{"type": "number"}, {"type": "string"}], "additionalItems": {"type": "object"}}}}),
        &[
            (bson!({"a": []}), true),
            (bson!({"a": [229.0]}), true),
            (bson!({"a": [229.0, "West 43rd"]}), true),
            (bson!({"a": [229.0, "West 43rd", "Street"]}), false),
            (bson!({"a": [229.0, "West 43rd", {}]}), true),
        ],
    );
    check(
        bson!({"properties": {"a": {"items": [{"not": {}}], "additionalItems": false}}}),
        &[(bson!({"a": []}), true)],
    );
    check(
        bson!({"properties": {"a": {"items": [{"not": {}}], "additionalItems": {"not": {}}}}}),
        &[(bson!({"a": []}), true)],
    );
}

/// min_max_items.js.
#[test]
fn min_max_items() {
    check(
        bson!({"properties": {"a": {"minItems": 1}}}),
        &[
            (bson!({}), true),
            (bson!({"a": "foo"}), true),
            (bson!({"a": []}), false),
            (bson!({"a": ["x"]}), true),
            (bson!({"a": [0.0, 1.0]}), true),
        ],
    );
    check(bson!({"minItems": 2}), &[(bson!({}), true)]);
    check(
        bson!({"properties": {"a": {"maxItems": 1}}}),
        &[
            (bson!({}), true),
            (bson!({"a": "foo"}), true),
            (bson!({"a": []}), true),
            (bson!({"a": ["x"]}), true),
            (bson!({"a": [0.0, 1.0]}), false),
        ],
    );
    check(bson!({"maxItems": 2}), &[(bson!({}), true)]);
    check(
        bson!({"properties": {"a": {"minItems": dec("1.0"), "maxItems": 2.0}}}),
        &[(bson!({"a": [1]}), true), (bson!({"a": [1, 2, 3]}), false)],
    );
}

/// min_max_properties.js.
#[test]
fn min_max_properties() {
    check(
        bson!({"minProperties": 0}),
        &[
            (bson!({}), true),
            (bson!({"a": 1.0}), true),
            (bson!({"a": 1.0, "b": 2.0}), true),
        ],
    );
    check(
        bson!({"maxProperties": 0}),
        &[
            (bson!({}), false),
            (bson!({"a": 1.0}), false),
            (bson!({"a": 1.0, "b": 2.0}), false),
        ],
    );
    check(
        bson!({"minProperties": 2}),
        &[
            (bson!({"_id": 0}), false),
            (bson!({"_id": 0, "a": 1.0}), true),
            (bson!({"_id": 0, "a": 1.0, "b": 2.0}), true),
        ],
    );
    check(
        bson!({"maxProperties": 2}),
        &[
            (bson!({"_id": 0}), true),
            (bson!({"_id": 0, "a": 1.0}), true),
            (bson!({"_id": 0, "a": 1.0, "b": 2.0}), false),
        ],
    );
    check(
        bson!({"properties": {"a": {"maxProperties": 1}}}),
        &[
            (bson!({"a": 1.0}), true),
            (bson!({"a": {}}), true),
            (bson!({"a": {"b": 1.0}}), true),
            (bson!({"a": {"b": 1.0, "c": 1.0}}), false),
        ],
    );
    check(
        bson!({"properties": {"a": {"maxProperties": 0}}}),
        &[(bson!({"a": {}}), true), (bson!({"a": {"b": 1.0}}), false)],
    );
    check(
        bson!({"properties": {"a": {"minProperties": 1}}}),
        &[
            (bson!({"a": 1.0}), true),
            (bson!({"a": {}}), false),
            (bson!({"a": {"b": 1.0}}), true),
            (bson!({"a": {"b": 1.0, "c": 1.0}}), true),
        ],
    );
}

/// unique_items.js.
#[test]
fn unique_items() {
    check(bson!({"uniqueItems": true}), &[(bson!({}), true)]);
    check(bson!({"uniqueItems": false}), &[(bson!({}), true)]);
    let unique = bson!({"properties": {"a": {"uniqueItems": true}}});
    let not_unique = bson!({"properties": {"a": {"uniqueItems": false}}});
    let distinct = [
        bson!({}),
        bson!({"a": "foo"}),
        bson!({"a": {"foo": [1.0, 1.0], "bar": [2.0, 2.0]}}),
        bson!({"a": []}),
        bson!({"a": [1.0]}),
        bson!({"a": [1.0, 2.0, 3.0]}),
        bson!({"a": ["foo", "FOO"]}),
        bson!({"a": [{}, "", [], null]}),
        bson!({"a": [[1.0, 2.0], [2.0, 1.0]]}),
        bson!({"a": [null, Bson::Undefined]}),
        bson!({"a": [{"x": 1}, {"x": 1, "y": 1}]}),
    ];
    let duplicated = [
        bson!({"a": [1.0, 1.0]}),
        bson!({"a": [1_i64, 1]}),
        bson!({"a": [1, 1.0, dec("1.00")]}),
        bson!({"a": ["foo", "foo"]}),
        bson!({"a": [{"a": 1.0}, {"a": 1.0}]}),
        bson!({"a": [[1.0, 2.0], [1.0, 2.0]]}),
        bson!({"a": [null, null]}),
        bson!({"a": [{"x": 1.0, "y": 1.0}, {"y": 1.0, "x": 1.0}]}),
        bson!({"a": [{"x": [1.0, 2.0], "y": "a"}, {"y": "a", "x": [1.0, 2.0]}]}),
        bson!({"a": [f64::NAN, f64::NAN]}),
        bson!({"a": [3, "x", {"k": [{"p": 1, "q": 2}]}, 4, {"k": [{"q": 2, "p": 1}]}]}),
    ];
    let mut cases: Vec<(Bson, bool)> = distinct.iter().map(|d| (d.clone(), true)).collect();
    cases.extend(duplicated.iter().map(|d| (d.clone(), false)));
    check(unique, &cases);
    let all: Vec<(Bson, bool)> = distinct
        .iter()
        .chain(duplicated.iter())
        .map(|d| (d.clone(), true))
        .collect();
    check(not_unique, &all);
    // No collation: case matters.
    check(
        bson!({"properties": {"a": {"uniqueItems": true}}}),
        &[(bson!({"a": ["STR", "sTr"]}), true)],
    );
}

/// required.js.
#[test]
fn required() {
    check(
        bson!({"required": ["a"]}),
        &[
            (bson!({"a": 1.0}), true),
            (bson!({}), false),
            (bson!({"b": 1.0}), false),
            (bson!({"b": {"a": 1.0}}), false),
        ],
    );
    check(
        bson!({"required": ["a", "b"]}),
        &[
            (bson!({"a": 1.0, "b": 1.0, "c": 1.0}), true),
            (bson!({"a": 1.0, "c": 1.0}), false),
            (bson!({"b": 1.0, "c": 1.0}), false),
        ],
    );
    check(
        bson!({"properties": {"a": {"required": ["b"]}}}),
        &[
            (bson!({}), true),
            (bson!({"a": 1.0}), true),
            (bson!({"a": {"b": 1.0}}), true),
            (bson!({"a": {"c": 1.0}}), false),
            (bson!({"a": {}}), false),
        ],
    );
    // A null value exists.
    check(bson!({"required": ["a"]}), &[(bson!({"a": null}), true)]);
    // Required names are dotted paths that traverse arrays.
    check(
        bson!({"required": ["a.b"]}),
        &[
            (bson!({"a": {"b": 1}}), true),
            (bson!({"a": [{"c": 1}, {"b": 1}]}), true),
            (bson!({"a": {"c": 1}}), false),
            (bson!({"a": 1}), false),
        ],
    );
}

/// dependencies.js.
#[test]
fn dependencies() {
    check(
        bson!({"dependencies": {"foo": {"required": ["bar"]}}}),
        &[
            (bson!({}), true),
            (bson!({"foo": 1.0, "bar": 1.0}), true),
            (bson!({"bar": 1.0}), true),
            (bson!({"foo": 1.0}), false),
        ],
    );
    check(
        bson!({"dependencies": {"foo": {"required": ["bar"], "properties": {"baz": {"type": "string"}}}}}),
        &[
            (bson!({}), true),
            (bson!({"bar": 1.0}), true),
            (bson!({"foo": 1.0, "bar": 1.0}), true),
            (bson!({"foo": 1.0, "bar": 1.0, "baz": 1.0}), false),
            (bson!({"foo": 1.0, "bar": 1.0, "baz": "str"}), true),
        ],
    );
    check(
        bson!({"dependencies": {"foo": ["bar", "baz"]}}),
        &[
            (bson!({}), true),
            (bson!({"bar": 1.0}), true),
            (bson!({"baz": 1.0}), true),
            (bson!({"bar": 1.0, "baz": 1.0}), true),
            (bson!({"foo": 1.0}), false),
            (bson!({"foo": 1.0, "bar": 1.0}), false),
            (bson!({"foo": 1.0, "baz": 1.0}), false),
            (bson!({"foo": 1.0, "bar": 1.0, "baz": 1.0}), true),
        ],
    );
    for s in [
        bson!({"properties": {"obj": {"dependencies": {"foo": {"required": ["bar"]}}}}}),
        bson!({"properties": {"obj": {"dependencies": {"foo": ["bar"]}}}}),
    ] {
        check(
            s,
            &[
                (bson!({}), true),
                (bson!({"obj": 1.0}), true),
                (bson!({"obj": {}}), true),
                (bson!({"obj": {"bar": 1.0}}), true),
                (bson!({"obj": {"foo": 1.0}}), false),
                (bson!({"obj": {"foo": 1.0, "bar": 1.0}}), true),
            ],
        );
    }
    check(
        bson!({"properties": {"obj": {"dependencies": {"a": ["b"], "c": {"required": ["d"]}}}}}),
        &[
            (bson!({}), true),
            (bson!({"obj": 1.0}), true),
            (bson!({"obj": {}}), true),
            (bson!({"obj": {"b": 1.0, "d": 1.0}}), true),
            (bson!({"obj": {"a": 1.0, "b": 1.0, "c": 1.0}}), false),
            (bson!({"obj": {"a": 1.0, "c": 0.0, "d": 1.0}}), false),
            (bson!({"obj": {"b": 1.0, "c": 1.0, "d": 1.0}}), true),
            (bson!({"obj": {"a": 1.0, "b": 1.0, "d": 1.0}}), true),
            (
                bson!({"obj": {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}}),
                true,
            ),
        ],
    );
    check(bson!({"dependencies": {}}), &[(bson!({}), true)]);
    check(
        bson!({"properties": {"obj": {"dependencies": {}}}}),
        &[(bson!({"obj": {}}), true)],
    );
    // Annotations among the dependencies are skipped.
    check(
        bson!({"dependencies": {"title": "t", "description": "d", "foo": ["bar"]}}),
        &[
            (bson!({"foo": 1}), false),
            (bson!({"foo": 1, "bar": 1}), true),
        ],
    );
}

/// additional_properties.js.
#[test]
fn additional_properties() {
    let top = |ap: Bson| bson!({"properties": {"_id": {}, "a": {}}, "additionalProperties": ap});
    check(
        top(bson!(false)),
        &[
            (bson!({"_id": 1}), true),
            (bson!({"_id": 1, "a": 1}), true),
            (bson!({"_id": 1, "b": 1}), false),
            (bson!({"_id": 1, "a": 1, "b": 1}), false),
        ],
    );
    check(
        top(bson!(true)),
        &[
            (bson!({"_id": 1}), true),
            (bson!({"_id": 1, "a": 1}), true),
            (bson!({"_id": 1, "b": 1}), true),
            (bson!({"_id": 1, "a": 1, "b": 1}), true),
        ],
    );
    check(
        top(bson!({"type": "number"})),
        &[
            (bson!({"_id": 1}), true),
            (bson!({"_id": 1, "a": 1}), true),
            (bson!({"_id": 1, "b": 1}), true),
            (bson!({"_id": 1, "b": "str"}), false),
        ],
    );
    let with_patterns = |ap: Bson| bson!({"properties": {"_id": {}, "a": {}}, "patternProperties": {"^b": {"type": "string"}}, "additionalProperties": ap});
    check(
        with_patterns(bson!({"type": "number"})),
        &[
            (bson!({"_id": 1}), true),
            (bson!({"_id": 1, "a": 1}), true),
            (bson!({"_id": 1, "a": 1, "ba": "str"}), true),
            (bson!({"_id": 1, "a": 1, "ba": "str", "other": 1}), true),
            (
                bson!({"_id": 1, "a": 1, "ba": "str", "other": "str"}),
                false,
            ),
            (bson!({"_id": 1, "a": 1, "ba": 1, "other": 1}), false),
        ],
    );
    check(
        with_patterns(bson!(false)),
        &[
            (bson!({"_id": 1, "a": 1, "ba": "str"}), true),
            (bson!({"_id": 1, "a": 1, "ba": "str", "other": 1}), false),
        ],
    );
    let nested = |ap: Bson| bson!({"properties": {"obj": {"properties": {"a": {}}, "additionalProperties": ap}}});
    check(
        nested(bson!(false)),
        &[
            (bson!({}), true),
            (bson!({"obj": 1}), true),
            (bson!({"obj": {}}), true),
            (bson!({"obj": {"a": 1}}), true),
            (bson!({"obj": {"a": 1, "b": 1}}), false),
            (bson!({"obj": {"b": 1}}), false),
        ],
    );
    check(
        nested(bson!(true)),
        &[
            (bson!({"obj": {}}), true),
            (bson!({"obj": {"a": 1}}), true),
            (bson!({"obj": {"a": 1, "b": 1}}), true),
            (bson!({"obj": {"b": 1}}), true),
        ],
    );
    check(
        nested(bson!({"type": "number"})),
        &[
            (bson!({}), true),
            (bson!({"obj": 1}), true),
            (bson!({"obj": {}}), true),
            (bson!({"obj": {"a": 1}}), true),
            (bson!({"obj": {"a": 1, "b": 1}}), true),
            (bson!({"obj": {"a": 1, "b": "str"}}), false),
            (bson!({"obj": {"b": "str"}}), false),
        ],
    );
    check(
        bson!({"properties": {"obj": {
            "properties": {"a": {}},
            "patternProperties": {"^b": {"type": "string"}},
            "additionalProperties": {"type": "number"}
        }}}),
        &[
            (bson!({"obj": {}}), true),
            (bson!({"obj": {"a": 1, "ba": "str", "c": 1}}), true),
            (bson!({"obj": {"a": 1, "ba": 1, "c": 1}}), false),
            (bson!({"obj": {"a": 1, "ba": 1, "c": "str"}}), false),
        ],
    );
    // additionalProperties:false without _id rejects every stored document.
    check(
        bson!({"properties": {"a": {}}, "additionalProperties": false}),
        &[(bson!({"a": 1}), false)],
    );
    // The additionalProperties schema sees each value whole (arrays are not traversed).
    check(
        bson!({"additionalProperties": {"type": "number"}, "properties": {"_id": {}}}),
        &[(bson!({"x": [1, 2]}), false), (bson!({"x": 1}), true)],
    );
}

/// pattern_properties.js.
#[test]
fn pattern_properties() {
    let pp = bson!({"^a": {"type": "number"}, "^b": {"type": "string"}});
    check(
        bson!({"patternProperties": pp.clone()}),
        &[
            (bson!({}), true),
            (bson!({"c": 1}), true),
            (bson!({"ca": 1, "cb": 1}), true),
            (bson!({"a": "str", "ca": 1, "cb": 1}), false),
            (bson!({"a": 1, "b": 1, "ca": 1, "cb": 1}), false),
            (bson!({"a": 1, "b": "str", "ca": 1, "cb": 1}), true),
        ],
    );
    check(
        bson!({"properties": {"obj": {"patternProperties": pp}}}),
        &[
            (bson!({}), true),
            (bson!({"obj": 1}), true),
            (bson!({"obj": {}}), true),
            (bson!({"obj": {"ca": 1, "cb": 1}}), true),
            (bson!({"obj": {"ac": "str", "ca": 1, "cb": 1}}), false),
            (bson!({"obj": {"ac": 1, "bc": 1, "ca": 1, "cb": 1}}), false),
            (
                bson!({"obj": {"ac": 1, "bc": "str", "ca": 1, "cb": 1}}),
                true,
            ),
        ],
    );
    check(
        bson!({"properties": {"aa": {"type": "number"}}, "patternProperties": {"^a": {"type": "string"}}}),
        &[(bson!({"aa": 1}), false)],
    );
    check(
        bson!({"properties": {"obj": {"properties": {"aa": {"type": "number"}}, "patternProperties": {"^a": {"type": "string"}}}}}),
        &[(bson!({"obj": {"aa": 1}}), false)],
    );
    // Patterns search unanchored, with PCRE syntax, and several may apply to one field.
    check(
        bson!({"patternProperties": {"x": {"type": "number"}, "\\d$": {"minimum": 10}}}),
        &[
            (bson!({"axb": 1}), true),
            (bson!({"axb": "s"}), false),
            (bson!({"x1": 5}), false),
            (bson!({"x1": 50}), true),
        ],
    );
}

/// logical_keywords.js.
#[test]
fn logical_keywords() {
    check(
        bson!({"properties": {"foo": {"allOf": [{"minimum": 1}]}}}),
        &[
            (bson!({"foo": 1.0}), true),
            (bson!({"foo": 0.0}), false),
            (bson!({"foo": "string"}), true),
        ],
    );
    check(
        bson!({"properties": {"foo": {"allOf": [{}]}}}),
        &[
            (bson!({"foo": {}}), true),
            (bson!({}), true),
            (bson!({"foo": 0.0}), true),
        ],
    );
    check(
        bson!({"properties": {"foo": {"allOf": [{"type": "number"}, {"minimum": 0}]}}}),
        &[
            (bson!({"foo": 0.0}), true),
            (bson!({"foo": "string"}), false),
            (bson!({"foo": [0.0]}), false),
        ],
    );
    check(
        bson!({"allOf": [{}]}),
        &[(bson!({}), true), (bson!({"foo": 0.0}), true)],
    );
    check(
        bson!({"allOf": [{"type": "string"}]}),
        &[(bson!({}), false)],
    );
    check(
        bson!({"allOf": [{"properties": {"foo": {"type": "string"}}}]}),
        &[(bson!({"foo": "str"}), true), (bson!({"foo": 1.0}), false)],
    );
    check(
        bson!({"properties": {"foo": {"type": "number", "allOf": [{"minimum": 1}]}}}),
        &[(bson!({"foo": 1.0}), true), (bson!({"foo": "str"}), false)],
    );

    check(
        bson!({"properties": {"foo": {"anyOf": [{"type": "string"}, {"type": "number", "minimum": 1}]}}}),
        &[
            (bson!({"foo": "str"}), true),
            (bson!({"foo": 1.0}), true),
            (bson!({"foo": 0.0}), false),
        ],
    );
    check(
        bson!({"properties": {"foo": {"anyOf": [{"type": "string"}, {"type": "object"}]}}}),
        &[
            (bson!({"foo": {}}), true),
            (bson!({"foo": "str"}), true),
            (bson!({"foo": [{}]}), false),
        ],
    );
    check(
        bson!({"properties": {"foo": {"anyOf": [{}]}}}),
        &[
            (bson!({}), true),
            (bson!({"foo": {}}), true),
            (bson!({"foo": 0.0}), true),
        ],
    );
    check(
        bson!({"anyOf": [{}]}),
        &[(bson!({}), true), (bson!({"foo": 1.0}), true)],
    );
    check(
        bson!({"anyOf": [{"properties": {"foo": {"type": "string"}}}]}),
        &[
            (bson!({}), true),
            (bson!({"foo": "str"}), true),
            (bson!({"foo": 1.0}), false),
        ],
    );
    check(
        bson!({"properties": {"foo": {"type": "number", "anyOf": [{"minimum": 1}]}}}),
        &[(bson!({"foo": 1.0}), true), (bson!({"foo": "str"}), false)],
    );

    check(
        bson!({"properties": {"foo": {"oneOf": [{"minimum": 0}, {"maximum": 3}]}}}),
        &[
            (bson!({"foo": 4.0}), true),
            (bson!({"foo": 1.0}), false),
            (bson!({"foo": "str"}), false),
        ],
    );
    check(
        bson!({"properties": {"foo": {"oneOf": [{"type": "string"}, {"pattern": "ing"}]}}}),
        &[
            (bson!({"foo": "str"}), true),
            (bson!({"foo": "string"}), false),
        ],
    );
    check(
        bson!({"properties": {"foo": {"oneOf": [{}]}}}),
        &[(bson!({}), true), (bson!({"foo": 1.0}), true)],
    );
    check(
        bson!({"oneOf": [{}]}),
        &[(bson!({}), true), (bson!({"foo": 1.0}), true)],
    );
    check(
        bson!({"oneOf": [{"properties": {"foo": {"type": "string"}}}]}),
        &[
            (bson!({}), true),
            (bson!({"foo": "str"}), true),
            (bson!({"foo": 1.0}), false),
        ],
    );
    check(bson!({"oneOf": [{}, {}]}), &[(bson!({}), false)]);
    check(
        bson!({"properties": {"foo": {"type": "number", "oneOf": [{"minimum": 4}]}}}),
        &[
            (bson!({"foo": 4.0}), true),
            (bson!({}), true),
            (bson!({"foo": "str"}), false),
        ],
    );
    check(
        bson!({"oneOf": [{"required": ["a"]}, {"required": ["b"]}, {"required": ["c"]}]}),
        &[
            (bson!({"a": 1}), true),
            (bson!({"a": 1, "b": 1}), false),
            (bson!({"a": 1, "b": 1, "c": 1}), false),
            (bson!({}), false),
        ],
    );

    check(
        bson!({"properties": {"foo": {"not": {"type": "number"}}}}),
        &[
            (bson!({}), true),
            (bson!({"foo": "str"}), true),
            (bson!({"foo": 1.0}), false),
        ],
    );
    check(
        bson!({"properties": {"foo": {"not": {}}}}),
        &[(bson!({}), true), (bson!({"foo": 1.0}), false)],
    );
    check(bson!({"not": {}}), &[(bson!({}), false)]);
    check(
        bson!({"not": {"properties": {"foo": {"type": "string"}}}}),
        &[
            (bson!({"foo": 1.0}), true),
            (bson!({"foo": "str"}), false),
            (bson!({}), false),
        ],
    );
    check(
        bson!({"properties": {"foo": {"type": "string", "not": {"maxLength": 4}}}}),
        &[
            (bson!({}), true),
            (bson!({"foo": "string"}), true),
            (bson!({"foo": "str"}), false),
            (bson!({"foo": 1.0}), false),
        ],
    );
}

/// logical_keywords.js: enum.
#[test]
fn enumeration() {
    check(
        bson!({"properties": {"a": {"enum": ["str", 5.0]}}}),
        &[
            (bson!({"a": "str"}), true),
            (bson!({"a": 5.0}), true),
            (bson!({"a": 5}), true),
            (bson!({"a": dec("5.0")}), true),
            (bson!({}), true),
            (bson!({"a": ["str"]}), false),
        ],
    );
    check(
        bson!({"properties": {"a": {"enum": [null]}}}),
        &[
            (bson!({"a": null}), true),
            (bson!({"a": Bson::Undefined}), false),
            (bson!({"a": 1.0}), false),
        ],
    );
    check(
        bson!({"properties": {"a": {"enum": [null]}}, "required": ["a"]}),
        &[(bson!({}), false)],
    );
    check(
        bson!({"properties": {"a": {"enum": [[1.0, 2.0, "3"]]}}}),
        &[
            (bson!({"a": [1.0, 2.0, "3"]}), true),
            (bson!({}), true),
            (bson!({"a": [2.0, "3", 1.0]}), false),
        ],
    );
    check(
        bson!({"properties": {"a": {"enum": [[]]}}}),
        &[
            (bson!({"a": []}), true),
            (bson!({}), true),
            (bson!({"a": [1.0]}), false),
        ],
    );
    check(
        bson!({"properties": {"a": {"enum": ["str", 1.0]}}}),
        &[(bson!({"a": ["str"]}), false), (bson!({"a": [1.0]}), false)],
    );
    check(
        bson!({"properties": {"a": {"enum": [{"name": "tiny", "size": "large"}]}}}),
        &[
            (bson!({"a": {"name": "tiny", "size": "large"}}), true),
            (bson!({"a": {"size": "large", "name": "tiny"}}), true),
        ],
    );
    check(
        bson!({"properties": {"a": {"enum": [{"name": "tiny"}]}}}),
        &[(bson!({"a": {"size": "large", "name": "tiny"}}), false)],
    );
    check(bson!({"enum": [{"_id": 0}]}), &[(bson!({"_id": 0}), true)]);
    check(
        bson!({"enum": [{"_id": 0, "a": "str"}]}),
        &[
            (bson!({"_id": 0, "a": "str"}), true),
            (bson!({"a": "str", "_id": 0}), true),
        ],
    );
    check(bson!({"enum": [{}]}), &[(bson!({}), false)]);
    check(bson!({"enum": [null]}), &[(bson!({}), false)]);
    check(
        bson!({"enum": [{"_id": 0, "a": "str"}]}),
        &[(bson!({"_id": 0, "a": "str", "b": 1.0}), false)],
    );
    check(bson!({"enum": [1.0, 2.0]}), &[(bson!({}), false)]);
    // Strings compare without collation.
    check(
        bson!({"properties": {"a": {"enum": ["STR"]}}}),
        &[
            (bson!({"a": "str"}), false),
            (bson!({"a": ["STR", "sTr"]}), false),
        ],
    );
    // NaN equals NaN.
    check(
        bson!({"properties": {"a": {"enum": [f64::NAN]}}}),
        &[(bson!({"a": f64::NAN}), true), (bson!({"a": 1.0}), false)],
    );
}

#[test]
fn numeric_keywords() {
    check(
        bson!({"properties": {"n": {"multipleOf": 0.1}}}),
        &[
            (bson!({"n": 0.3}), true),
            (bson!({"n": 0.35}), false),
            (bson!({"n": 3}), true),
            (bson!({"n": dec("0.70")}), true),
            (bson!({"n": dec("0.71")}), false),
            (bson!({"n": f64::NAN}), false),
            (bson!({"n": f64::INFINITY}), false),
            (bson!({"n": "0.3"}), true),
            (bson!({"n": [0.35]}), true),
        ],
    );
    check(
        bson!({"properties": {"n": {"multipleOf": 3}}}),
        &[
            (bson!({"n": 9}), true),
            (bson!({"n": -9_i64}), true),
            (bson!({"n": 0}), true),
            (bson!({"n": 10}), false),
            (bson!({"n": 9.0}), true),
            (bson!({"n": 9.5}), false),
            (bson!({"n": i64::MAX}), false),
            (bson!({"n": 9_223_372_036_854_775_806_i64}), true),
            (bson!({"n": dec("3E+100")}), true),
            (bson!({"n": dec("1E+100")}), false),
        ],
    );
    check(
        bson!({"properties": {"n": {"multipleOf": dec("0.25")}}}),
        &[
            (bson!({"n": 0.75}), true),
            (bson!({"n": 0.7}), false),
            (bson!({"n": dec("1E-10")}), false),
            (bson!({"n": 1_i64}), true),
        ],
    );
    // Stated type int: only ints are checked, other numbers fail the type.
    check(
        bson!({"properties": {"n": {"bsonType": "int", "multipleOf": 2}}}),
        &[
            (bson!({"n": 4}), true),
            (bson!({"n": 3}), false),
            (bson!({"n": 4.0}), false),
        ],
    );
    // multipleOf at the top level has no effect.
    check(bson!({"multipleOf": 7}), &[(bson!({}), true)]);
    // NaN bounds.
    check(
        bson!({"properties": {"n": {"minimum": f64::NAN}}}),
        &[
            (bson!({"n": f64::NAN}), true),
            (bson!({"n": 1.0}), false),
            (bson!({"n": "x"}), true),
        ],
    );
    // Cross-type numeric comparison.
    check(
        bson!({"properties": {"n": {"minimum": dec("1.5"), "maximum": 9_007_199_254_740_993_i64}}}),
        &[
            (bson!({"n": 2}), true),
            (bson!({"n": 1}), false),
            (bson!({"n": 9_007_199_254_740_992.0}), true),
            (bson!({"n": 9_007_199_254_740_994_i64}), false),
        ],
    );
}

#[test]
fn string_keywords() {
    // Lengths count code points, not bytes.
    check(
        bson!({"properties": {"s": {"minLength": 2, "maxLength": 3}}}),
        &[
            (bson!({"s": "é"}), false),
            (bson!({"s": "éé"}), true),
            (bson!({"s": "日本語"}), true),
            (bson!({"s": "日本語!"}), false),
            (bson!({"s": "🎉🎉"}), true),
            (bson!({"s": ["a"]}), true),
            (bson!({"s": Bson::Symbol("a".into())}), true),
        ],
    );
    check(
        bson!({"properties": {"s": {"pattern": "^a.c$"}}}),
        &[
            (bson!({"s": "abc"}), true),
            (bson!({"s": "xabc"}), false),
            (bson!({"s": "ABC"}), false),
            (bson!({"s": 5}), true),
            (bson!({"s": ["abc", "x"]}), true),
        ],
    );
    // PCRE classes are ASCII (`\d` does not match Arabic-Indic digits).
    check(
        bson!({"properties": {"s": {"pattern": "^\\d+$"}}}),
        &[(bson!({"s": "123"}), true), (bson!({"s": "١٢٣"}), false)],
    );
    // `pattern` at the top level is not compiled and has no effect.
    check(bson!({"pattern": "("}), &[(bson!({}), true)]);
}

#[test]
fn properties_paths() {
    // Dotted property names are paths (as MongoDB's FieldRef).
    check(
        bson!({"properties": {"a.b": {"type": "string"}}}),
        &[
            (bson!({"a": {"b": "x"}}), true),
            (bson!({"a": {"b": 1}}), false),
            (bson!({"a": [{"b": "x"}, {"b": "y"}]}), true),
            (bson!({"a": [{"b": 1}, {"b": "y"}]}), true),
            (bson!({}), true),
        ],
    );
    // A stated type is checked on the value itself; missing passes unless required.
    check(
        bson!({"properties": {"a": {"bsonType": "string"}}, "required": ["a"]}),
        &[
            (bson!({"a": "x"}), true),
            (bson!({"a": ["x"]}), false),
            (bson!({}), false),
        ],
    );
    // Restrictions do not apply to other types.
    check(
        bson!({"properties": {"a": {"minimum": 5, "minLength": 2, "minItems": 2, "minProperties": 2}}}),
        &[
            (bson!({"a": 6}), true),
            (bson!({"a": 4}), false),
            (bson!({"a": "xy"}), true),
            (bson!({"a": "x"}), false),
            (bson!({"a": [1, 2]}), true),
            (bson!({"a": [1]}), false),
            (bson!({"a": {"p": 1, "q": 2}}), true),
            (bson!({"a": {"p": 1}}), false),
            (bson!({"a": true}), true),
            (bson!({"a": [10]}), false),
        ],
    );
    // With a stated single type, restrictions for other types are dropped.
    check(
        bson!({"properties": {"a": {"bsonType": "string", "minimum": 5, "minItems": 3, "minLength": 1}}}),
        &[
            (bson!({"a": "x"}), true),
            (bson!({"a": ""}), false),
            (bson!({"a": 10}), false),
        ],
    );
    // Deep nesting through objects and arrays.
    check(
        bson!({"properties": {"a": {"bsonType": "array", "items": {"bsonType": "object", "required": ["b"], "properties": {"b": {"bsonType": "array", "items": {"enum": [1, 2]}}}}}}}),
        &[
            (bson!({"a": [{"b": [1, 2, 1]}, {"b": []}]}), true),
            (bson!({"a": [{"b": [1, 3]}]}), false),
            (bson!({"a": [{"c": [1]}]}), false),
            (bson!({"a": [5]}), false),
            (bson!({"a": {"b": [1]}}), false),
        ],
    );
}

/// encrypt.js.
#[test]
fn encrypt() {
    let enc = bin(6, &[0; 21]);
    let plain = bin(0, &[0; 21]);
    check(
        bson!({"properties": {"bin": {"encrypt": {}}}}),
        &[
            (bson!({"bin": enc.clone()}), true),
            (bson!({"bin": {}}), false),
            (bson!({"bin": plain.clone()}), false),
            (bson!({"bin": [enc.clone(), enc.clone()]}), false),
            (bson!({}), true),
        ],
    );
    check(
        bson!({"properties": {"obj": {"type": "object", "properties": {"a": {"encrypt": {}}}}}}),
        &[
            (bson!({"obj": {"a": enc.clone()}}), true),
            (bson!({"obj": {"a": {}}}), false),
            (bson!({"obj": {"a": plain.clone()}}), false),
        ],
    );
    check(
        bson!({"properties": {"arr": {"type": "array", "items": {"encrypt": {}}}}}),
        &[
            (bson!({"arr": [enc.clone(), enc.clone()]}), true),
            (bson!({"arr": [{}, {}]}), false),
            (bson!({"arr": [enc.clone(), plain.clone()]}), false),
        ],
    );
    // encrypt.bsonType checks the original type byte of the FLE header.
    let mut det_string = vec![1u8];
    det_string.extend_from_slice(&[7; 16]);
    det_string.push(2);
    det_string.extend_from_slice(&[9; 8]);
    let det_string = bin(6, &det_string);
    check(
        bson!({"properties": {"s": {"encrypt": {
            "bsonType": "string",
            "algorithm": "AEAD_AES_256_CBC_HMAC_SHA_512-Deterministic",
            "keyId": [Bson::Binary(Binary { subtype: BinarySubtype::Uuid, bytes: vec![1; 16] })]
        }}}}),
        &[
            (bson!({"s": det_string.clone()}), true),
            (bson!({"s": enc.clone()}), false),
        ],
    );
    check(
        bson!({"properties": {"s": {"encrypt": {"bsonType": ["int", "long"]}}}}),
        &[(bson!({"s": det_string}), false)],
    );
    // At the top level `encrypt` states type BinData: nothing matches.
    check(bson!({"encrypt": {}}), &[(bson!({}), false)]);
    check(
        bson!({"encryptMetadata": {"keyId": "/key"}}),
        &[(bson!({}), true)],
    );
}

/// The manual's `$jsonSchema` page: query conditions on the `inventory` collection.
#[test]
fn manual_inventory() {
    let inventory = [
        (
            bson!({"item": "journal", "qty": 25, "size": {"h": 14.0, "w": 21.0, "uom": "cm"}, "instock": true}),
            true,
        ),
        (
            bson!({"item": "notebook", "qty": 50, "size": {"h": 8.5, "w": 11.0, "uom": "in"}, "instock": true}),
            true,
        ),
        (
            bson!({"item": "paper", "qty": 100, "size": {"h": 8.5, "w": 11.0, "uom": "in"}, "instock": 1.0}),
            false,
        ),
        (
            bson!({"item": "planner", "qty": 75, "size": {"h": 22.85, "w": 30.0, "uom": "cm"}, "instock": 1.0}),
            false,
        ),
        (
            bson!({"item": "postcard", "qty": 45, "size": {"h": 10.0, "w": 15.25, "uom": "cm"}, "instock": true}),
            true,
        ),
        (
            bson!({"item": "apple", "qty": 45, "status": "A", "instock": true}),
            true,
        ),
        (
            bson!({"item": "pears", "qty": 50, "status": "A", "instock": true}),
            true,
        ),
    ];
    let myschema = bson!({
        "required": ["item", "qty", "instock"],
        "properties": {
            "item": {"bsonType": "string"},
            "qty": {"bsonType": "int"},
            "size": {
                "bsonType": "object",
                "required": ["uom"],
                "properties": {
                    "uom": {"bsonType": "string"},
                    "h": {"bsonType": "double"},
                    "w": {"bsonType": "double"}
                }
            },
            "instock": {"bsonType": "bool"}
        }
    });
    check(myschema, &inventory);
}

/// The manual's validation example (the `students` collection).
#[test]
fn manual_students_validator() {
    let schema = bson!({
        "bsonType": "object",
        "title": "Student Object Validation",
        "required": ["address", "major", "name", "year"],
        "properties": {
            "name": {"bsonType": "string", "description": "'name' must be a string and is required"},
            "year": {"bsonType": "int", "minimum": 2017, "maximum": 3017, "description": "'year' must be an integer in [ 2017, 3017 ] and is required"},
            "gpa": {"bsonType": ["double"], "description": "'gpa' must be a double if the field exists"},
            "major": {"enum": ["Math", "English", "Computer Science", "History", null], "description": "'major' must be one of the listed values"},
            "address": {
                "bsonType": "object",
                "required": ["city"],
                "properties": {"street": {"bsonType": "string"}, "city": {"bsonType": "string"}}
            }
        }
    });
    check(
        schema,
        &[
            (
                bson!({"name": "Alice", "year": 2019, "major": "History", "gpa": 3.0, "address": {"city": "NYC", "street": "33rd Street"}}),
                true,
            ),
            (
                bson!({"name": "Alice", "year": 2019, "major": "History", "gpa": 3, "address": {"city": "NYC", "street": "33rd Street"}}),
                false,
            ),
            (
                bson!({"name": "Bob", "year": 2016, "major": "Math", "address": {"city": "Paris"}}),
                false,
            ),
            (
                bson!({"name": "Bob", "year": 2017, "major": null, "address": {"city": "Paris"}}),
                true,
            ),
            (
                bson!({"name": "Bob", "year": 2017, "major": "Art", "address": {"city": "Paris"}}),
                false,
            ),
            (
                bson!({"name": "Bob", "year": 2017, "major": "Math", "address": {"street": "x"}}),
                false,
            ),
            (
                bson!({"name": "Bob", "year": 2017.0, "major": "Math", "address": {"city": "Paris"}}),
                false,
            ),
        ],
    );
}

/// misc_validation.js: the `seniorCitizens` view's schema.
#[test]
fn misc_validation_view() {
    let schema = bson!({
        "required": ["name", "age"],
        "properties": {"name": {"type": "string"}, "age": {"type": "number", "minimum": 65}}
    });
    check(
        schema,
        &[
            (bson!({"name": "Peter", "age": 65.0}), true),
            (bson!({"name": "Paul", "age": 105.0}), true),
            (bson!({"name": "Mary", "age": 10.0}), false),
            (bson!({"name": "John", "age": "unknown"}), false),
            (bson!({"name": "Mark"}), false),
            (bson!({}), false),
        ],
    );
    check(
        bson!({"properties": {"a": {"type": "number", "maximum": 2}}}),
        &[
            (bson!({"a": 1.0}), true),
            (bson!({"a": 2.0}), true),
            (bson!({"a": "str"}), false),
            (bson!({"a": [3.0]}), false),
        ],
    );
}

#[test]
fn empty_property_name_is_top_level() {
    // MongoDB parses a property named "" with an empty path, i.e. as a top-level schema
    // applied to the same document.
    check(
        bson!({"properties": {"": {"required": ["a"]}}}),
        &[
            (bson!({"a": 1}), true),
            (bson!({"b": 1}), true),
            (bson!({"": 1, "b": 1}), false),
            (bson!({"": 1, "a": 1}), true),
        ],
    );
}

#[test]
fn ignore_unknown_keywords_option() {
    use cairn_query::jsonschema::{JsonSchema, JsonSchemaOptions};
    let opts = JsonSchemaOptions {
        ignore_unknown_keywords: true,
    };
    let s = JsonSchema::parse_with_options(&raw(&bson!({"foo": 1, "required": ["a"]})), opts)
        .expect("parses");
    assert!(s.matches(&raw(&bson!({"a": 1}))));
    assert!(!s.matches(&raw(&bson!({"b": 1}))));
    assert!(JsonSchema::parse_with_options(&raw(&bson!({"format": "email"})), opts).is_err());
    assert_eq!(
        s.source().to_owned(),
        raw(&bson!({"foo": 1, "required": ["a"]}))
    );
}
