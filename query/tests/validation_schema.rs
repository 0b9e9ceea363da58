//! Document-validation errors of `$jsonSchema` validators: table-driven, transcribed from
//! MongoDB's doc_validation_error_json_schema_test.cpp (integers int32, `_id: 1` appended when
//! the document has none), jstests/core/doc_validation/doc_validation_error.js (shell numbers
//! are doubles) and the manual's schema-validation pages. Each case is (name, validator,
//! document, expected `errInfo.details`), compared byte for byte.

mod validation_common;

use bson::{Bson, bson};
use validation_common::*;

#[test]
fn properties_and_scalar_keywords() {
    check_details(&[
        (
            "BasicProperties",
            bson!({"$jsonSchema": {"properties": {"a": {"minimum": 1}}}}),
            bson!({"a": 0}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "minimum", "specifiedAs": {"minimum": 1},
                         "reason": "comparison failed", "consideredValue": 0}]}]}]}),
        ),
        (
            "ExclusiveMinimum",
            bson!({"$jsonSchema": {"properties": {"a": {"minimum": 1, "exclusiveMinimum": true}}}}),
            bson!({"a": 1}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "minimum", "specifiedAs": {"minimum": 1, "exclusiveMinimum": true},
                         "reason": "comparison failed", "consideredValue": 1}]}]}]}),
        ),
        (
            "NestedPropertiesMultipleFailingClauses",
            bson!({"$jsonSchema": {"properties": {"a": {"properties": {"b": {"minimum": 10, "maximum": -10}}}}}}),
            bson!({"a": {"b": 5}}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "properties", "propertiesNotSatisfied": [
                            {"propertyName": "b", "details": [
                                {"operatorName": "maximum", "specifiedAs": {"maximum": -10},
                                 "reason": "comparison failed", "consideredValue": 5},
                                {"operatorName": "minimum", "specifiedAs": {"minimum": 10},
                                 "reason": "comparison failed", "consideredValue": 5}]}]}]}]}]}),
        ),
        (
            "PropertiesObjectTypeMismatch",
            bson!({"$jsonSchema": {"properties": {"a": {"type": "object", "properties": {"b": {"minimum": 10}}}}}}),
            bson!({"a": "eleven"}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "type", "specifiedAs": {"type": "object"},
                         "reason": "type did not match", "consideredValue": "eleven",
                         "consideredType": "string"}]}]}]}),
        ),
        (
            "NoTopLevelObjectTypeRejectsAllDocuments",
            bson!({"$jsonSchema": {"type": "number", "properties": {"a": {"properties": {"b": {"minimum": 1}}}}}}),
            bson!({"a": {"b": 1}}),
            bson!({"operatorName": "$jsonSchema",
                   "specifiedAs": {"$jsonSchema": {"type": "number", "properties": {"a": {"properties": {"b": {"minimum": 1}}}}}},
                   "reason": "expression always evaluates to false"}),
        ),
        (
            "MultipleTypeFailuresWithAnnotations",
            bson!({"$jsonSchema": {"properties": {"a": {"type": "string"}, "b": {"type": "number"},
                   "c": {"type": "object", "title": "property c", "description": "c is a string"}}}}),
            bson!({"a": {"b": 1}, "b": 4, "c": "foo"}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "type", "specifiedAs": {"type": "string"},
                         "reason": "type did not match", "consideredValue": {"b": 1}, "consideredType": "object"}]},
                    {"propertyName": "c", "title": "property c", "description": "c is a string", "details": [
                        {"operatorName": "type", "specifiedAs": {"type": "object"},
                         "reason": "type did not match", "consideredValue": "foo", "consideredType": "string"}]}]}]}),
        ),
        (
            "BSONTypeNoImplicitArrayTraversal",
            bson!({"$jsonSchema": {"properties": {"a": {"bsonType": "string"}}}}),
            bson!({"a": ["Mihai", "was", "here"]}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "bsonType", "specifiedAs": {"bsonType": "string"},
                         "reason": "type did not match", "consideredValue": ["Mihai", "was", "here"],
                         "consideredType": "array"}]}]}]}),
        ),
        (
            "MinLengthNonString",
            bson!({"$jsonSchema": {"properties": {"a": {"type": "string", "minLength": 4}}}}),
            bson!({"a": 1}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "type", "specifiedAs": {"type": "string"},
                         "reason": "type did not match", "consideredValue": 1, "consideredType": "int"}]}]}]}),
        ),
        (
            "MinLengthRequiredNoTypeMissingProperty",
            bson!({"$jsonSchema": {"required": ["a"], "properties": {"a": {"minLength": 1}}}}),
            bson!({}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "required", "specifiedAs": {"required": ["a"]}, "missingProperties": ["a"]}]}),
        ),
        (
            "BasicMaxLength",
            bson!({"$jsonSchema": {"properties": {"a": {"type": "string", "maxLength": 4}}}}),
            bson!({"a": "foo, bar, baz"}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "maxLength", "specifiedAs": {"maxLength": 4},
                         "reason": "specified string length was not satisfied",
                         "consideredValue": "foo, bar, baz"}]}]}]}),
        ),
        (
            "BasicPattern",
            bson!({"$jsonSchema": {"properties": {"a": {"type": "string", "pattern": "^S"}}}}),
            bson!({"a": "slow"}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "pattern", "specifiedAs": {"pattern": "^S"},
                         "reason": "regular expression did not match", "consideredValue": "slow"}]}]}]}),
        ),
        (
            "BasicMultipleOf",
            bson!({"$jsonSchema": {"properties": {"a": {"type": "number", "multipleOf": 2.1}}}}),
            bson!({"a": 1.1}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "multipleOf", "specifiedAs": {"multipleOf": 2.1},
                         "reason": "considered value is not a multiple of the specified value",
                         "consideredValue": 1.1}]}]}]}),
        ),
        (
            "MinimumAtTopLevelHasNoEffect",
            bson!({"$nor": [{"$jsonSchema": {"minimum": 1}}]}),
            bson!({"a": 2}),
            bson!({"operatorName": "$nor", "clausesSatisfied": [
                {"index": 0, "details": {"operatorName": "$jsonSchema", "reason": "schema matched"}}]}),
        ),
        (
            "BasicEncrypt",
            bson!({"$jsonSchema": {"bsonType": "object", "properties": {"a": {"encrypt": {}}}}}),
            bson!({"a": Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: b"abc".to_vec() })}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "encrypt", "reason": "value was not encrypted"}]}]}]}),
        ),
    ]);
}

#[test]
fn logical_keywords() {
    check_details(&[
        (
            "TopLevelAllOf",
            bson!({"$jsonSchema": {"allOf": [{"properties": {"a": {"minimum": 1}}}, {"properties": {"b": {"minimum": 2}}}]}}),
            bson!({"a": 1, "b": 0}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "allOf", "schemasNotSatisfied": [
                    {"index": 1, "details": [
                        {"operatorName": "properties", "propertiesNotSatisfied": [
                            {"propertyName": "b", "details": [
                                {"operatorName": "minimum", "specifiedAs": {"minimum": 2},
                                 "reason": "comparison failed", "consideredValue": 0}]}]}]}]}]}),
        ),
        (
            "NestedAnyOf",
            bson!({"$jsonSchema": {"properties": {"a": {"anyOf": [{"type": "string"}, {"maximum": 3}]}}}}),
            bson!({"a": 4}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "anyOf", "schemasNotSatisfied": [
                            {"index": 0, "details": [
                                {"operatorName": "type", "specifiedAs": {"type": "string"},
                                 "reason": "type did not match", "consideredValue": 4, "consideredType": "int"}]},
                            {"index": 1, "details": [
                                {"operatorName": "maximum", "specifiedAs": {"maximum": 3},
                                 "reason": "comparison failed", "consideredValue": 4}]}]}]}]}]}),
        ),
        (
            "OneOfMoreThanOneMatchingClause",
            bson!({"$jsonSchema": {"properties": {"a": {"oneOf": [{"minimum": 1}, {"maximum": 3}]}}}}),
            bson!({"a": 2}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "oneOf", "reason": "more than one subschema matched",
                         "matchingSchemaIndexes": [0, 1]}]}]}]}),
        ),
        (
            "OneOfAllFailingClauses",
            bson!({"$jsonSchema": {"properties": {"a": {"oneOf": [{"minimum": 4}, {"maximum": 1}, {"bsonType": "int"}]}}}}),
            bson!({"a": 2.1}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "oneOf", "schemasNotSatisfied": [
                            {"index": 0, "details": [{"operatorName": "minimum", "specifiedAs": {"minimum": 4},
                                "reason": "comparison failed", "consideredValue": 2.1}]},
                            {"index": 1, "details": [{"operatorName": "maximum", "specifiedAs": {"maximum": 1},
                                "reason": "comparison failed", "consideredValue": 2.1}]},
                            {"index": 2, "details": [{"operatorName": "bsonType", "specifiedAs": {"bsonType": "int"},
                                "reason": "type did not match", "consideredValue": 2.1,
                                "consideredType": "double"}]}]}]}]}]}),
        ),
        (
            "BasicNot",
            bson!({"$jsonSchema": {"not": {"properties": {"a": {"minimum": 3}}}}}),
            bson!({"a": 6}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "not", "reason": "child expression matched"}]}),
        ),
        (
            "BasicEnum",
            bson!({"$jsonSchema": {"properties": {"a": {"enum": [1, 2, 3]}}}}),
            bson!({"a": 0}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "enum", "specifiedAs": {"enum": [1, 2, 3]},
                         "reason": "value was not found in enum", "consideredValue": 0}]}]}]}),
        ),
        (
            "TopLevelEnum",
            bson!({"$jsonSchema": {"enum": [{"a": 1, "b": 1}, {"a": 0, "b": {"c": [1, 2, 3]}}]}}),
            bson!({"a": 0, "b": 1, "_id": 1}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "enum", "specifiedAs": {"enum": [{"a": 1, "b": 1}, {"a": 0, "b": {"c": [1, 2, 3]}}]},
                 "reason": "value was not found in enum", "consideredValue": {"a": 0, "b": 1, "_id": 1}}]}),
        ),
        (
            "CombineLogicalKeywords",
            bson!({"$jsonSchema": {"properties": {"a": {"allOf": [{"bsonType": "int"},
                   {"oneOf": [{"minimum": 1}, {"enum": [6, 7, 8]}]}]}}}}),
            bson!({"a": 0}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "allOf", "schemasNotSatisfied": [
                            {"index": 1, "details": [{"operatorName": "oneOf", "schemasNotSatisfied": [
                                {"index": 0, "details": [{"operatorName": "minimum", "specifiedAs": {"minimum": 1},
                                    "reason": "comparison failed", "consideredValue": 0}]},
                                {"index": 1, "details": [{"operatorName": "enum", "specifiedAs": {"enum": [6, 7, 8]},
                                    "reason": "value was not found in enum", "consideredValue": 0}]}]}]}]}]}]}]}),
        ),
    ]);
}

#[test]
fn array_keywords() {
    check_details(&[
        (
            "ArrayMinItems",
            bson!({"$jsonSchema": {"properties": {"a": {"minItems": 2}}}}),
            bson!({"a": [1]}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "minItems", "specifiedAs": {"minItems": 2},
                         "reason": "array did not match specified length", "consideredValue": [1],
                         "numberOfItems": 1}]}]}]}),
        ),
        (
            "ArrayUniqueItems",
            bson!({"$jsonSchema": {"properties": {"a": {"uniqueItems": true}}}}),
            bson!({"a": [1, 2, 3, 3, 4, 4]}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "uniqueItems", "specifiedAs": {"uniqueItems": true},
                         "reason": "found a duplicate item", "consideredValue": [1, 2, 3, 3, 4, 4],
                         "duplicatedValue": 3}]}]}]}),
        ),
        (
            "ArrayItemsSingleSchema",
            bson!({"$jsonSchema": {"properties": {"a": {"items": {"type": "string", "description": "elements must be of string type"}}}}}),
            bson!({"a": [1, "A", {}]}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "items", "description": "elements must be of string type",
                         "reason": "At least one item did not match the sub-schema", "itemIndex": 0, "details": [
                            {"operatorName": "type", "specifiedAs": {"type": "string"},
                             "reason": "type did not match", "consideredValue": 1, "consideredType": "int"}]}]}]}]}),
        ),
        (
            "ArrayItemsSingleSchema2DArray",
            bson!({"$jsonSchema": {"properties": {"a": {"items": {"items": {"minimum": 0}}}}}}),
            bson!({"a": [[1], [], [2, 4], [-1]]}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "items", "reason": "At least one item did not match the sub-schema",
                         "itemIndex": 3, "details": [
                            {"operatorName": "items", "reason": "At least one item did not match the sub-schema",
                             "itemIndex": 0, "details": [
                                {"operatorName": "minimum", "specifiedAs": {"minimum": 0},
                                 "reason": "comparison failed", "consideredValue": -1}]}]}]}]}]}),
        ),
        (
            "ArrayItemsSingleSchemaNestedRequiredMissingProperty",
            bson!({"$jsonSchema": {"properties": {"a": {"items": {"required": ["b"], "properties": {"b": {"minItems": 2}}}}}}}),
            bson!({"a": [{}]}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "items", "reason": "At least one item did not match the sub-schema",
                         "itemIndex": 0, "details": [
                            {"operatorName": "required", "specifiedAs": {"required": ["b"]},
                             "missingProperties": ["b"]}]}]}]}]}),
        ),
        (
            "ArrayItemsSchemaArray",
            bson!({"$jsonSchema": {"properties": {"a": {"items": [{"type": "number"}, {"type": "string"}]}}}}),
            bson!({"a": [1, 2]}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "items", "details": [
                            {"itemIndex": 1_i64, "details": [
                                {"operatorName": "type", "specifiedAs": {"type": "string"},
                                 "reason": "type did not match", "consideredValue": 2, "consideredType": "int"}]}]}]}]}]}),
        ),
        (
            "ArrayAdditionalItemsSchemaItemsAndItemsSchemaFail",
            bson!({"$jsonSchema": {"properties": {"a": {"type": "array", "items": [{"type": "number"}, {"type": "string"}],
                   "additionalItems": {"type": "object"}}}}}),
            bson!({"a": ["1", 2, {}, {"b": 1}, "Fail"]}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "items", "details": [
                            {"itemIndex": 0_i64, "details": [
                                {"operatorName": "type", "specifiedAs": {"type": "number"},
                                 "reason": "type did not match", "consideredValue": "1", "consideredType": "string"}]},
                            {"itemIndex": 1_i64, "details": [
                                {"operatorName": "type", "specifiedAs": {"type": "string"},
                                 "reason": "type did not match", "consideredValue": 2, "consideredType": "int"}]}]},
                        {"operatorName": "additionalItems",
                         "reason": "At least one additional item did not match the sub-schema", "itemIndex": 4, "details": [
                            {"operatorName": "type", "specifiedAs": {"type": "object"},
                             "reason": "type did not match", "consideredValue": "Fail", "consideredType": "string"}]}]}]}]}),
        ),
        (
            "ArrayAdditionalItemsFalse",
            bson!({"$jsonSchema": {"properties": {"a": {"items": [{"type": "number"}, {"type": "string"}], "additionalItems": false}}}}),
            bson!({"a": [1, "First", "Extra element"]}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "additionalItems", "specifiedAs": {"additionalItems": false},
                         "reason": "found additional items", "additionalItems": ["Extra element"]}]}]}]}),
        ),
    ]);
}

#[test]
fn object_keywords() {
    check_details(&[
        (
            "BasicMinProperties",
            bson!({"$jsonSchema": {"minProperties": 10}}),
            bson!({"_id": 1, "a": 1, "b": 2, "c": 3}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "minProperties", "specifiedAs": {"minProperties": 10},
                 "reason": "specified number of properties was not satisfied", "numberOfProperties": 4}]}),
        ),
        (
            "NestedMaxProperties",
            bson!({"$jsonSchema": {"properties": {"a": {"maxProperties": 1}}}}),
            bson!({"a": {"b": 1, "c": 2}}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "maxProperties", "specifiedAs": {"maxProperties": 1},
                         "reason": "specified number of properties was not satisfied",
                         "numberOfProperties": 2}]}]}]}),
        ),
        (
            "BasicPropertyDependency",
            bson!({"$jsonSchema": {"dependencies": {"a": ["b", "c"], "title": "a needs b and c"}}}),
            bson!({"a": 1, "b": 2}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "dependencies", "title": "a needs b and c", "failingDependencies": [
                    {"conditionalProperty": "a", "missingProperties": ["c"]}]}]}),
        ),
        (
            "PropertyDependencyManyFailingDependencies",
            bson!({"$jsonSchema": {"dependencies": {"a": ["b", "c", "d"], "b": ["c", "d"], "e": ["c", "d"]}}}),
            bson!({"a": 1, "b": 2, "e": 3}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "dependencies", "failingDependencies": [
                    {"conditionalProperty": "a", "missingProperties": ["c", "d"]},
                    {"conditionalProperty": "b", "missingProperties": ["c", "d"]},
                    {"conditionalProperty": "e", "missingProperties": ["c", "d"]}]}]}),
        ),
        (
            "SchemaDependencyAndPropertyDependency",
            bson!({"$jsonSchema": {"dependencies": {"a": {"properties": {"b": {"type": "number"}}}, "b": ["a", "c"]}}}),
            bson!({"a": [0, 1, 2, 3], "b": "foo"}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "dependencies", "failingDependencies": [
                    {"conditionalProperty": "a", "details": [
                        {"operatorName": "properties", "propertiesNotSatisfied": [
                            {"propertyName": "b", "details": [
                                {"operatorName": "type", "specifiedAs": {"type": "number"},
                                 "reason": "type did not match", "consideredValue": "foo",
                                 "consideredType": "string"}]}]}]},
                    {"conditionalProperty": "b", "missingProperties": ["c"]}]}]}),
        ),
        (
            "BasicAdditionalPropertiesFalse",
            bson!({"$jsonSchema": {"properties": {"b": {"type": "number"}}, "additionalProperties": false}}),
            bson!({"_id": 0, "a": 1, "b": 2}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "additionalProperties", "specifiedAs": {"additionalProperties": false},
                 "additionalProperties": ["_id", "a"]}]}),
        ),
        (
            "BasicAdditionalPropertiesFalseNestedMultiLevel",
            bson!({"$jsonSchema": {"additionalProperties": false, "properties": {"_id": {},
                   "a": {"type": "object", "additionalProperties": false}}}}),
            bson!({"_id": 1, "a": {"b": 1}, "c": 1}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "a", "details": [
                        {"operatorName": "additionalProperties", "specifiedAs": {"additionalProperties": false},
                         "additionalProperties": ["b"]}]}]},
                {"operatorName": "additionalProperties", "specifiedAs": {"additionalProperties": false},
                 "additionalProperties": ["c"]}]}),
        ),
        (
            "BasicAdditionalPropertiesSchemaRequiredMissingProperty",
            bson!({"$jsonSchema": {"required": ["a", "b"], "properties": {"a": {"type": "number"}},
                   "additionalProperties": {"type": "string"}}}),
            bson!({"a": 1, "c": "not this one, but the next one", "d": 1}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "additionalProperties",
                 "reason": "at least one additional property did not match the subschema",
                 "failingProperty": "d", "details": [
                    {"operatorName": "type", "specifiedAs": {"type": "string"},
                     "reason": "type did not match", "consideredValue": 1, "consideredType": "int"}]},
                {"operatorName": "required", "specifiedAs": {"required": ["a", "b"]},
                 "missingProperties": ["b"]}]}),
        ),
        (
            "PatternPropertiesOneElementFailsMultiplePatternSchemas",
            bson!({"$jsonSchema": {"patternProperties": {"^a": {"minimum": 3}, "b$": {"maximum": 1}}}}),
            bson!({"a": 45, "b": 0, "ab": 2}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "patternProperties", "details": [
                    {"propertyName": "ab", "regexMatched": "^a", "details": [
                        {"operatorName": "minimum", "specifiedAs": {"minimum": 3},
                         "reason": "comparison failed", "consideredValue": 2}]},
                    {"propertyName": "ab", "regexMatched": "b$", "details": [
                        {"operatorName": "maximum", "specifiedAs": {"maximum": 1},
                         "reason": "comparison failed", "consideredValue": 2}]}]}]}),
        ),
        (
            "PatternPropertiesAndAdditionalPropertiesSchema",
            bson!({"$jsonSchema": {"patternProperties": {"^S": {"type": "number", "title": "properties starting with S",
                   "description": "property should be of integer type"}},
                   "additionalProperties": {"type": "string", "title": "additional properties",
                   "description": "additional properties are strings"}}}),
            bson!({"Super": 1, "Slow": "oh no a string", "b": 1}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "additionalProperties", "title": "additional properties",
                 "description": "additional properties are strings",
                 "reason": "at least one additional property did not match the subschema",
                 "failingProperty": "b", "details": [
                    {"operatorName": "type", "specifiedAs": {"type": "string"},
                     "reason": "type did not match", "consideredValue": 1, "consideredType": "int"}]},
                {"operatorName": "patternProperties", "details": [
                    {"propertyName": "Slow", "title": "properties starting with S",
                     "description": "property should be of integer type", "regexMatched": "^S", "details": [
                        {"operatorName": "type", "specifiedAs": {"type": "number"},
                         "reason": "type did not match", "consideredValue": "oh no a string",
                         "consideredType": "string"}]}]}]}),
        ),
    ]);
}

/// jstests/core/doc_validation/doc_validation_error.js and the manual (shell numbers are
/// doubles).
#[test]
fn jstests_and_manual() {
    check_details(&[
        (
            "Node structure validation",
            bson!({"$jsonSchema": {"bsonType": "object", "required": ["_id"], "properties": {
                "parent": {"bsonType": ["string", "null"], "description": "must be a string"},
                "children": {"bsonType": ["array"], "items": {"bsonType": ["string"]}, "minItems": 0.0,
                             "maxItems": 2.0, "description": "must be an array of string and max is 2"}}}}),
            bson!({"_id": "Languages", "children": 2.0, "parent": "Programming"}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "children", "description": "must be an array of string and max is 2", "details": [
                        {"operatorName": "bsonType", "specifiedAs": {"bsonType": ["array"]},
                         "reason": "type did not match", "consideredValue": 2.0, "consideredType": "double"}]}]}]}),
        ),
        (
            "array of enums",
            bson!({"$jsonSchema": {"properties": {"values": {"bsonType": "array",
                "items": {"bsonType": "string", "enum": ["one", "two", "three"]}, "minItems": 1.0, "uniqueItems": true}}}}),
            bson!({"values": ["two", "two"]}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "values", "details": [
                        {"operatorName": "uniqueItems", "specifiedAs": {"uniqueItems": true},
                         "reason": "found a duplicate item", "consideredValue": ["two", "two"],
                         "duplicatedValue": "two"}]}]}]}),
        ),
        (
            "Students collection",
            bson!({"$jsonSchema": {"bsonType": "object", "required": ["name", "year", "major", "address"], "properties": {
                "name": {"bsonType": "string", "description": "must be a string and is required"},
                "year": {"bsonType": "int", "minimum": 2017.0, "maximum": 3017.0,
                         "description": "must be an integer in [ 2017, 3017 ] and is required"},
                "major": {"enum": ["Math", "English", "Computer Science", "History", Bson::Null],
                          "description": "can only be one of the enum values and is required"},
                "gpa": {"bsonType": ["double"], "description": "must be a double if the field exists"},
                "address": {"bsonType": "object", "required": ["city"], "properties": {
                    "street": {"bsonType": "string", "description": "must be a string if the field exists"},
                    "city": {"bsonType": "string", "description": "must be a string and is required"}}}}}}),
            bson!({"year": 2020, "major": "Software Engineering", "gpa": 5.0, "address": {"city": "NYC", "street": 5}}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "major", "description": "can only be one of the enum values and is required", "details": [
                        {"operatorName": "enum", "specifiedAs": {"enum": ["Math", "English", "Computer Science", "History", Bson::Null]},
                         "reason": "value was not found in enum", "consideredValue": "Software Engineering"}]},
                    {"propertyName": "address", "details": [
                        {"operatorName": "properties", "propertiesNotSatisfied": [
                            {"propertyName": "street", "description": "must be a string if the field exists", "details": [
                                {"operatorName": "bsonType", "specifiedAs": {"bsonType": "string"},
                                 "reason": "type did not match", "consideredValue": 5, "consideredType": "int"}]}]}]}]},
                {"operatorName": "required", "specifiedAs": {"required": ["name", "year", "major", "address"]},
                 "missingProperties": ["name"]}]}),
        ),
        (
            "Handle invalid documents (manual)",
            bson!({"$jsonSchema": {"bsonType": "object", "required": ["phone"], "properties": {
                "phone": {"bsonType": "string", "description": "must be a string and is required"},
                "email": {"bsonType": "string", "pattern": "@mongodb\\.com$",
                          "description": "must be a string and match the regular expression pattern"},
                "status": {"enum": ["Unknown", "Incomplete"], "description": "can only be one of the enum values"}}}}),
            bson!({"name": "Amanda", "status": "Updated"}),
            bson!({"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "status", "description": "can only be one of the enum values", "details": [
                        {"operatorName": "enum", "specifiedAs": {"enum": ["Unknown", "Incomplete"]},
                         "reason": "value was not found in enum", "consideredValue": "Updated"}]}]},
                {"operatorName": "required", "specifiedAs": {"required": ["phone"]}, "missingProperties": ["phone"]}]}),
        ),
        (
            "Specify JSON Schema Validation (manual)",
            bson!({"$jsonSchema": {"bsonType": "object", "title": "Student Object Validation",
                "required": ["address", "major", "name", "year"], "properties": {
                "name": {"bsonType": "string", "description": "'name' must be a string and is required"},
                "year": {"bsonType": "int", "minimum": 2017.0, "maximum": 3017.0,
                         "description": "'year' must be an integer in [ 2017, 3017 ] and is required"},
                "gpa": {"bsonType": ["double"], "description": "'gpa' must be a double if the field exists"}}}}),
            bson!({"name": "Alice", "year": 2019, "major": "History", "gpa": 3,
                   "address": {"city": "NYC", "street": "33rd Street"}}),
            bson!({"operatorName": "$jsonSchema", "title": "Student Object Validation", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "gpa", "description": "'gpa' must be a double if the field exists", "details": [
                        {"operatorName": "bsonType", "specifiedAs": {"bsonType": ["double"]},
                         "reason": "type did not match", "consideredValue": 3, "consideredType": "int"}]}]}]}),
        ),
        (
            "Query expression rules (manual)",
            bson!({"$expr": {"$eq": ["$totalWithVAT", {"$multiply": ["$total", {"$sum": [1.0, "$VAT"]}]}]}}),
            bson!({"total": Bson::Decimal128("141".parse().unwrap()), "VAT": Bson::Decimal128("0.20".parse().unwrap()),
                   "totalWithVAT": Bson::Decimal128("169".parse().unwrap())}),
            bson!({"operatorName": "$expr",
                   "specifiedAs": {"$expr": {"$eq": ["$totalWithVAT", {"$multiply": ["$total", {"$sum": [1.0, "$VAT"]}]}]}},
                   "reason": "expression did not match", "expressionResult": false}),
        ),
    ]);
    // The valid versions pass.
    let vat = bson!({"$expr": {"$eq": ["$totalWithVAT", {"$multiply": ["$total", {"$sum": [1.0, "$VAT"]}]}]}});
    assert!(passes(
        &vat,
        &bson!({"total": Bson::Decimal128("141".parse().unwrap()), "VAT": Bson::Decimal128("0.20".parse().unwrap()),
                "totalWithVAT": Bson::Decimal128("169.2".parse().unwrap())})
    ));
}
