//! `$jsonSchema` parse errors: MongoDB's codes (2 BadValue, 9 FailedToParse, 14 TypeMismatch,
//! IDL and Location codes) and the messages of json_schema_parser.cpp.

mod jsonschema_common;

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, bson};
use cairn_query::jsonschema::JsonSchema;
use jsonschema_common::*;

#[test]
fn unknown_and_unsupported_keywords() {
    for kw in ["$ref", "$schema", "default", "definitions", "format", "id"] {
        let mut d = bson::Document::new();
        d.insert(kw, "x");
        err(
            Bson::Document(d),
            9,
            &format!("$jsonSchema keyword '{kw}' is not currently supported"),
        );
    }
    err(
        bson!({"properties": {"a": {"$ref": "#/definitions/positiveInt"}}}),
        9,
        "$jsonSchema keyword '$ref' is not currently supported",
    );
    err(
        bson!({"invalid": {}}),
        9,
        "Unknown $jsonSchema keyword: invalid",
    );
    err(
        bson!({"properties": {"foo": {"allOf": [{"invalid": "0"}]}}}),
        9,
        "Unknown $jsonSchema keyword: invalid",
    );
    err(
        bson!({"f": {"type": ["number", "objectId"]}}),
        9,
        "Unknown $jsonSchema keyword: f",
    );
    err(
        bson!({"Type": "object"}),
        9,
        "Unknown $jsonSchema keyword: Type",
    );
    {
        // bson! would merge the keys: build the document by hand.
        let mut dup = bson::RawDocumentBuf::new();
        dup.append(bson::raw::cstr!("minimum"), 1);
        dup.append(bson::raw::cstr!("minimum"), 2);
        let e = JsonSchema::parse(&dup).unwrap_err();
        assert_eq!(
            (code(&e), e.to_string().as_str()),
            (9, "Duplicate $jsonSchema keyword: minimum")
        );
    }
    // The first offending keyword in document order wins.
    err(
        bson!({"foo": 1, "$ref": "x"}),
        9,
        "Unknown $jsonSchema keyword: foo",
    );
}

#[test]
fn metadata() {
    err(
        bson!({"description": 1}),
        14,
        "$jsonSchema keyword 'description' must be of type string",
    );
    err(
        bson!({"title": {}}),
        14,
        "$jsonSchema keyword 'title' must be of type string",
    );
    err(
        bson!({"properties": {"a": {"title": 1}}}),
        14,
        "$jsonSchema keyword 'title' must be of type string",
    );
}

#[test]
fn types() {
    err(
        bson!({"type": 3}),
        14,
        "$jsonSchema keyword 'type' must be either a string or an array of strings",
    );
    err(
        bson!({"type": {}}),
        14,
        "$jsonSchema keyword 'type' must be either a string or an array of strings",
    );
    err(
        bson!({"bsonType": 2}),
        14,
        "$jsonSchema keyword 'bsonType' must be either a string or an array of strings",
    );
    err(
        bson!({"type": "integer"}),
        9,
        "$jsonSchema type 'integer' is not currently supported.",
    );
    err(
        bson!({"properties": {"num": {"bsonType": "integer"}}}),
        9,
        "$jsonSchema type 'integer' is not currently supported.",
    );
    err(
        bson!({"type": ["string", "integer"]}),
        9,
        "$jsonSchema type 'integer' is not currently supported.",
    );
    err(
        bson!({"type": ["number", 2]}),
        14,
        "$jsonSchema keyword 'type' array elements must be strings",
    );
    err(
        bson!({"bsonType": ["number", 2]}),
        14,
        "$jsonSchema keyword 'bsonType' array elements must be strings",
    );
    err(
        bson!({"type": ["number", "string", "number"]}),
        9,
        "$jsonSchema keyword 'type' has duplicate value: number",
    );
    err(
        bson!({"bsonType": ["number", "string", "number"]}),
        9,
        "$jsonSchema keyword 'bsonType' has duplicate value: number",
    );
    err(
        bson!({"type": []}),
        9,
        "$jsonSchema keyword 'type' must name at least one type",
    );
    err(
        bson!({"bsonType": []}),
        9,
        "$jsonSchema keyword 'bsonType' must name at least one type",
    );
    for alias in [
        "double",
        "int",
        "long",
        "decimal",
        "binData",
        "objectId",
        "date",
        "bool",
        "regex",
        "undefined",
        "timestamp",
        "minKey",
        "maxKey",
        "javascript",
        "javascriptWithScope",
        "symbol",
        "dbPointer",
        "unknown",
    ] {
        err(
            bson!({"properties": {"f": {"type": alias}}}),
            2,
            &format!("Unknown type name alias: {alias}"),
        );
    }
    err(
        bson!({"properties": {"b": {"bsonType": "boolean"}}}),
        2,
        "Unknown type name alias: boolean",
    );
    err(
        bson!({"properties": {"f": {"bsonType": "unknown"}}}),
        2,
        "Unknown type name alias: unknown",
    );
    // Aliases are checked in sorted order.
    err(
        bson!({"bsonType": ["zzz", "aaa"]}),
        2,
        "Unknown type name alias: aaa",
    );
    err(
        bson!({"bsonType": "missing"}),
        2,
        "'missing' is not a legal type name. To query for non-existence of a field, use {$exists:false}.",
    );
    err(
        bson!({"bsonType": "string", "type": "string"}),
        9,
        "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'",
    );
    err(
        bson!({"properties": {"a": {"bsonType": "string", "type": "string"}}}),
        9,
        "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'",
    );
}

#[test]
fn scalar_keywords() {
    err(
        bson!({"properties": {"num": {"maximum": "0"}}}),
        14,
        "$jsonSchema keyword 'maximum' must be a number",
    );
    err(
        bson!({"properties": {"num": {"maximum": {}}}}),
        14,
        "$jsonSchema keyword 'maximum' must be a number",
    );
    err(
        bson!({"minimum": "0"}),
        14,
        "$jsonSchema keyword 'minimum' must be a number",
    );
    err(
        bson!({"maximum": 0, "exclusiveMaximum": 1}),
        14,
        "$jsonSchema keyword 'exclusiveMaximum' must be a boolean",
    );
    err(
        bson!({"minimum": "x", "exclusiveMinimum": 1}),
        14,
        "$jsonSchema keyword 'exclusiveMinimum' must be a boolean",
    );
    err(
        bson!({"exclusiveMaximum": true}),
        9,
        "$jsonSchema keyword 'maximum' must be a present if exclusiveMaximum is present",
    );
    err(
        bson!({"exclusiveMinimum": false}),
        9,
        "$jsonSchema keyword 'minimum' must be a present if exclusiveMinimum is present",
    );
    err(
        bson!({"properties": {"num": {"maxLength": "0"}}}),
        9,
        "Expected a number in: maxLength: \"0\"",
    );
    err(
        bson!({"properties": {"num": {"maxLength": {}}}}),
        9,
        "Expected a number in: maxLength: {}",
    );
    err(
        bson!({"properties": {"num": {"minLength": "0"}}}),
        9,
        "Expected a number in: minLength: \"0\"",
    );
    err(
        bson!({"minLength": -1}),
        9,
        "Expected a non-negative number in: minLength: -1",
    );
    err(
        bson!({"maxLength": 1.5}),
        9,
        "Expected an integer: maxLength: 1.5",
    );
    expect_err(bson!({"maxLength": f64::NAN}), 9);
    expect_err(bson!({"maxLength": 1e30}), 9);
    expect_err(
        bson!({"maxLength": Bson::Decimal128("1.5".parse().unwrap())}),
        9,
    );
    err(
        bson!({"properties": {"num": {"pattern": 0}}}),
        14,
        "$jsonSchema keyword 'pattern' must be a string",
    );
    err(
        bson!({"properties": {"num": {"pattern": {}}}}),
        14,
        "$jsonSchema keyword 'pattern' must be a string",
    );
    expect_err(bson!({"properties": {"num": {"pattern": "("}}}), 51091);
    err(
        bson!({"multipleOf": "1"}),
        14,
        "$jsonSchema keyword 'multipleOf' must be a number",
    );
    for bad in [
        bson!(0),
        bson!(-1),
        bson!(-0.5),
        bson!(0.0),
        bson!(-0.0),
        bson!(f64::NEG_INFINITY),
    ] {
        err(
            bson!({"properties": {"a": {"multipleOf": bad}}}),
            9,
            "$jsonSchema keyword 'multipleOf' must have a positive value",
        );
    }
    err(
        bson!({"properties": {"a": {"multipleOf": f64::NAN}}}),
        2,
        "divisor cannot be NaN",
    );
    err(
        bson!({"properties": {"a": {"multipleOf": f64::INFINITY}}}),
        2,
        "divisor cannot be infinite",
    );
    // At the top level the divisor is never used.
    schema(&bson!({"multipleOf": f64::NAN}));
}

#[test]
fn array_keywords() {
    for kw in ["minItems", "maxItems"] {
        let mut d = bson::Document::new();
        d.insert(kw, "blah");
        err(
            Bson::Document(d.clone()),
            9,
            &format!("Expected a number in: {kw}: \"blah\""),
        );
        d.insert(kw, -1);
        err(
            Bson::Document(d.clone()),
            9,
            &format!("Expected a non-negative number in: {kw}: -1"),
        );
        d.insert(kw, 12.5);
        err(
            Bson::Document(d),
            9,
            &format!("Expected an integer: {kw}: 12.5"),
        );
    }
    for v in [bson!(1), bson!(1.0), bson!("true")] {
        err(
            bson!({"uniqueItems": v.clone()}),
            14,
            "$jsonSchema keyword 'uniqueItems' must be a boolean",
        );
        expect_err(bson!({"items": v.clone()}), 14);
        expect_err(bson!({"additionalItems": v}), 14);
    }
    err(
        bson!({"items": 1}),
        14,
        "$jsonSchema keyword 'items' must be an array or an object, not int",
    );
    err(
        bson!({"items": "true"}),
        14,
        "$jsonSchema keyword 'items' must be an array or an object, not string",
    );
    err(
        bson!({"items": [{}, 1]}),
        14,
        "$jsonSchema keyword 'items' requires that each element of the array is an object, but found a int",
    );
    err(
        bson!({"additionalItems": 1.0}),
        14,
        "$jsonSchema keyword 'additionalItems' must be either an object or a boolean, but got a double",
    );
    // Nested schemas are parsed even where they have no effect (the top level).
    err(
        bson!({"items": {"foo": 1}}),
        9,
        "Unknown $jsonSchema keyword: foo",
    );
    err(
        bson!({"additionalItems": {"minimum": "x"}}),
        14,
        "$jsonSchema keyword 'minimum' must be a number",
    );
}

#[test]
fn object_keywords() {
    err(
        bson!({"properties": 3}),
        14,
        "$jsonSchema keyword 'properties' must be an object",
    );
    err(
        bson!({"properties": []}),
        14,
        "$jsonSchema keyword 'properties' must be an object",
    );
    err(
        bson!({"properties": {"num": "number"}}),
        14,
        "Nested schema for $jsonSchema property 'num' must be an object",
    );
    err(
        bson!({"required": "a"}),
        14,
        "$jsonSchema keyword 'required' must be an array, but found an element of type string",
    );
    err(
        bson!({"required": [1]}),
        14,
        "$jsonSchema keyword 'required' must be an array of strings, but found an element of type: int",
    );
    err(
        bson!({"required": []}),
        9,
        "$jsonSchema keyword 'required' cannot be an empty array",
    );
    err(
        bson!({"required": ["a", "a"]}),
        9,
        "$jsonSchema keyword 'required' array cannot contain duplicate values",
    );
    err(
        bson!({"patternProperties": 1}),
        14,
        "$jsonSchema keyword 'patternProperties' must be an object",
    );
    err(
        bson!({"patternProperties": {"^a": 1}}),
        14,
        "$jsonSchema keyword 'patternProperties' has property '^a' which is not an object",
    );
    expect_err(bson!({"patternProperties": {"(": {}}}), 2);
    assert!(
        expect_err(bson!({"patternProperties": {"[": {}}}), 2)
            .starts_with("Invalid regular expression: ")
    );
    err(
        bson!({"additionalProperties": 1}),
        14,
        "$jsonSchema keyword 'additionalProperties' must be an object or a boolean",
    );
    err(
        bson!({"additionalProperties": "false"}),
        14,
        "$jsonSchema keyword 'additionalProperties' must be an object or a boolean",
    );
    err(
        bson!({"minProperties": -1}),
        9,
        "Expected a non-negative number in: minProperties: -1",
    );
    err(
        bson!({"maxProperties": "1"}),
        9,
        "Expected a number in: maxProperties: \"1\"",
    );
    err(
        bson!({"dependencies": 1}),
        14,
        "$jsonSchema keyword 'dependencies' must be an object",
    );
    err(
        bson!({"dependencies": {"a": 1}}),
        14,
        "property 'a' in $jsonSchema keyword 'dependencies' must be either an object or an array",
    );
    err(
        bson!({"dependencies": {"a": "b"}}),
        14,
        "property 'a' in $jsonSchema keyword 'dependencies' must be either an object or an array",
    );
    err(
        bson!({"dependencies": {"a": []}}),
        9,
        "property 'a' in $jsonSchema keyword 'dependencies' cannot be an empty array",
    );
    err(
        bson!({"dependencies": {"a": ["b", 1]}}),
        14,
        "array 'a' in $jsonSchema keyword 'dependencies' can only contain strings, but found element of type: int",
    );
    err(
        bson!({"dependencies": {"a": ["b", "b"]}}),
        9,
        "array 'a' in $jsonSchema keyword 'dependencies' contains duplicate element: b",
    );
    err(
        bson!({"dependencies": {"a": {"foo": 1}}}),
        9,
        "Unknown $jsonSchema keyword: foo",
    );
}

#[test]
fn logical_keywords() {
    for kw in ["allOf", "anyOf", "oneOf"] {
        let mut inner = bson::Document::new();
        inner.insert(kw, bson!({"maximum": "0"}));
        err(
            bson!({"properties": {"foo": inner.clone()}}),
            14,
            &format!("$jsonSchema keyword '{kw}' must be an array"),
        );
        inner.insert(kw, bson!([0]));
        err(
            bson!({"properties": {"foo": inner.clone()}}),
            14,
            &format!(
                "$jsonSchema keyword '{kw}' must be an array of objects, but found an element of type int"
            ),
        );
        inner.insert(kw, bson!([]));
        err(
            bson!({"properties": {"foo": inner}}),
            2,
            &format!("$jsonSchema keyword '{kw}' must be a non-empty array"),
        );
    }
    err(
        bson!({"properties": {"foo": {"not": {"maximum": "0"}}}}),
        14,
        "$jsonSchema keyword 'maximum' must be a number",
    );
    err(
        bson!({"properties": {"foo": {"not": [0]}}}),
        14,
        "$jsonSchema keyword 'not' must be an object, but found an element of type array",
    );
    err(
        bson!({"properties": {"foo": {"not": [{}]}}}),
        14,
        "$jsonSchema keyword 'not' must be an object, but found an element of type array",
    );
    err(
        bson!({"enum": 1}),
        14,
        "$jsonSchema keyword 'enum' must be an array, but found an element of type int",
    );
    err(
        bson!({"enum": []}),
        9,
        "$jsonSchema keyword 'enum' cannot be an empty array",
    );
    err(
        bson!({"enum": [1, 1.0]}),
        9,
        "$jsonSchema keyword 'enum' array cannot contain duplicate values.",
    );
    err(
        bson!({"enum": [{"a": 1, "b": 2}, {"b": 2, "a": 1}]}),
        9,
        "$jsonSchema keyword 'enum' array cannot contain duplicate values.",
    );
    schema(&bson!({"enum": [{"a": 1, "b": 2}, {"b": 2, "a": 2}, [1, 2], [2, 1], "A", "a"]}));
}

#[test]
fn encrypt_keywords() {
    err(
        bson!({"properties": {"bin": {"encrypt": {}, "type": "object"}}}),
        9,
        "$jsonSchema keyword 'encrypt' cannot be used in conjunction with 'type', 'encrypt' implies type 'bsonType::BinData'",
    );
    err(
        bson!({"properties": {"bin": {"encrypt": {}, "bsonType": "object"}}}),
        9,
        "$jsonSchema keyword 'encrypt' cannot be used in conjunction with 'bsonType', 'encrypt' implies type 'bsonType::BinData'",
    );
    err(
        bson!({"encrypt": 1}),
        14,
        "$jsonSchema keyword 'encrypt' must be an object ",
    );
    err(
        bson!({"encrypt": {}, "encryptMetadata": {"keyId": "/a"}}),
        9,
        "Cannot specify both $jsonSchema keywords 'encrypt' and 'encryptMetadata'",
    );
    err(
        bson!({"encryptMetadata": 1}),
        14,
        "$jsonSchema keyword 'encryptMetadata' must be an object ",
    );
    err(
        bson!({"encryptMetadata": {}}),
        9,
        "$jsonSchema keyword 'encryptMetadata' cannot be an empty object ",
    );
    err(
        bson!({"encrypt": {"foo": 1}}),
        40415,
        "BSON field 'encrypt.foo' is an unknown field.",
    );
    err(
        bson!({"encryptMetadata": {"bsonType": "int"}}),
        40415,
        "BSON field 'encryptMetadata.bsonType' is an unknown field.",
    );
    {
        let mut inner = bson::RawDocumentBuf::new();
        inner.append(bson::raw::cstr!("keyId"), "/a");
        inner.append(bson::raw::cstr!("keyId"), "/b");
        let mut dup = bson::RawDocumentBuf::new();
        dup.append(bson::raw::cstr!("encrypt"), inner);
        let e = JsonSchema::parse(&dup).unwrap_err();
        assert_eq!(
            (code(&e), e.to_string().as_str()),
            (40413, "BSON field 'encrypt.keyId' is a duplicate field")
        );
    }
    err(
        bson!({"encrypt": {"algorithm": 1}}),
        14,
        "BSON field 'encrypt.algorithm' is the wrong type 'int', expected type 'string'",
    );
    err(
        bson!({"encrypt": {"algorithm": "rot13"}}),
        2,
        "Enumeration value 'rot13' for field 'encrypt.algorithm' is not a valid value.",
    );
    err(
        bson!({"encrypt": {"bsonType": "integer"}}),
        9,
        "$jsonSchema type 'integer' is not currently supported.",
    );
    err(
        bson!({"encrypt": {"bsonType": "nope"}}),
        2,
        "Unknown type name alias: nope",
    );
    err(
        bson!({"encrypt": {"keyId": 1}}),
        51085,
        "Expected either string or array of UUID for EncryptSchemaKeyId, found int",
    );
    err(
        bson!({"encrypt": {"keyId": [1]}}),
        51088,
        "Array elements must have type BinData, found int",
    );
    let generic = Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes: vec![0; 16],
    });
    expect_err(bson!({"encrypt": {"keyId": [generic]}}), 51084);
    err(
        bson!({"encrypt": {"keyId": ""}}),
        51064,
        "Empty JSONPointers are not supported",
    );
    err(
        bson!({"encrypt": {"keyId": "a"}}),
        51065,
        "JSONPointer must start with a '/'",
    );
    err(
        bson!({"encrypt": {"keyId": "/a~2"}}),
        51063,
        "JSONPointer cannot contain unescaped ~ character",
    );
    schema(
        &bson!({"encrypt": {"keyId": "/a~0b~1c", "algorithm": "AEAD_AES_256_CBC_HMAC_SHA_512-Random", "bsonType": ["string", "int"]}}),
    );
}

/// Errors are reported in MongoDB's order of keyword groups, not document order.
#[test]
fn error_precedence() {
    // Metadata before types.
    err(
        bson!({"type": 1, "title": 1}),
        14,
        "$jsonSchema keyword 'title' must be of type string",
    );
    // Types before scalar keywords.
    err(
        bson!({"minimum": "x", "type": "integer"}),
        9,
        "$jsonSchema type 'integer' is not currently supported.",
    );
    // Scalar before array keywords.
    err(
        bson!({"minItems": -1, "pattern": 1}),
        14,
        "$jsonSchema keyword 'pattern' must be a string",
    );
    // Array before object keywords.
    err(
        bson!({"required": [], "maxItems": "x"}),
        9,
        "Expected a number in: maxItems: \"x\"",
    );
    // Object before logical keywords.
    err(
        bson!({"enum": [], "required": []}),
        9,
        "$jsonSchema keyword 'required' cannot be an empty array",
    );
}

#[test]
fn depth_limit() {
    let mut s = bson!({});
    for _ in 0..150 {
        s = bson!({"properties": {"a": s}});
    }
    let msg = expect_err(s, 2);
    assert!(msg.contains("nested deeper"), "{msg}");
    let mut ok = bson!({"type": "object"});
    for _ in 0..90 {
        ok = bson!({"anyOf": [ok]});
    }
    schema(&ok);
}

#[test]
fn filter_level_errors() {
    use cairn_query::filter::Filter;
    use cairn_query::jsonschema::JsonSchemaExtensions;
    let parse = |f: Bson| Filter::parse_with(&raw(&f), &JsonSchemaExtensions).map(|_| ());
    let e = parse(bson!({"$jsonSchema": "foo"})).unwrap_err();
    assert_eq!(
        (code(&e), e.to_string().as_str()),
        (14, "$jsonSchema must be an object")
    );
    let e = parse(bson!({"$jsonSchema": []})).unwrap_err();
    assert_eq!(code(&e), 14);
    let e = parse(bson!({"$jsonSchema": {"invalid": {}}})).unwrap_err();
    assert_eq!(code(&e), 9);
    // Without the extension, $jsonSchema is NotImplemented.
    let e = Filter::parse(&raw(&bson!({"$jsonSchema": {}}))).unwrap_err();
    assert_eq!(code(&e), 238);
    // The extension does not claim other operators.
    let e = parse(bson!({"$expr": {"$eq": [1, 1]}})).unwrap_err();
    assert_eq!(code(&e), 238);
}
