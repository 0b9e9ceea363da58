//! Document-validation errors of query-operator validators: table-driven, transcribed from
//! MongoDB's doc_validation_error_test.cpp (C++ `BSON()`/`fromjson` integers are int32) and
//! jstests/core/doc_validation (shell numbers are doubles). Each case is (name, validator,
//! document, expected `errInfo.details`), compared byte for byte.

mod validation_common;

use bson::{Bson, bson};
use validation_common::*;

fn re(pattern: &str) -> Bson {
    Bson::RegularExpression(bson::Regex {
        pattern: pattern.try_into().expect("pattern"),
        options: "".try_into().expect("options"),
    })
}

#[test]
fn comparisons() {
    check_details(&[
        (
            "BasicEq",
            bson!({"a": {"$eq": 2}}),
            bson!({"a": 1}),
            bson!({"operatorName": "$eq", "specifiedAs": {"a": {"$eq": 2}},
                   "reason": "comparison failed", "consideredValue": 1}),
        ),
        (
            "EqMissingPath",
            bson!({"a": {"$eq": 2}}),
            bson!({"b": 1}),
            bson!({"operatorName": "$eq", "specifiedAs": {"a": {"$eq": 2}},
                   "reason": "field was missing"}),
        ),
        (
            "EqImplicitArrayTraversal",
            bson!({"a": {"$eq": 2}}),
            bson!({"a": [3, 4, 5]}),
            bson!({"operatorName": "$eq", "specifiedAs": {"a": {"$eq": 2}},
                   "reason": "comparison failed", "consideredValues": [3, 4, 5]}),
        ),
        (
            "EqImplicitArrayTraversalNestedDocumentSingleElement",
            bson!({"a.b": {"$eq": 2}}),
            bson!({"a": [{"b": 3}]}),
            bson!({"operatorName": "$eq", "specifiedAs": {"a.b": {"$eq": 2}},
                   "reason": "comparison failed", "consideredValue": 3}),
        ),
        (
            "EqImplicitArrayTraversalNestedArrays",
            bson!({"a.b": {"$eq": 0}}),
            bson!({"a": [{"b": [1, 2]}, {"b": [3, 4]}]}),
            bson!({"operatorName": "$eq", "specifiedAs": {"a.b": {"$eq": 0}},
                   "reason": "comparison failed", "consideredValues": [1, 2, 3, 4]}),
        ),
        (
            "EqEmptyArray",
            bson!({"a": {"$eq": [1, 2]}}),
            bson!({"a": []}),
            bson!({"operatorName": "$eq", "specifiedAs": {"a": {"$eq": [1, 2]}},
                   "reason": "comparison failed", "consideredValues": []}),
        ),
        (
            "EqNoOperator",
            bson!({"a": 2}),
            bson!({"a": 1}),
            bson!({"operatorName": "$eq", "specifiedAs": {"a": 2},
                   "reason": "comparison failed", "consideredValue": 1}),
        ),
        (
            "BasicNe",
            bson!({"a": {"$ne": 2}}),
            bson!({"a": 2}),
            bson!({"operatorName": "$ne", "specifiedAs": {"a": {"$ne": 2}},
                   "reason": "comparison succeeded", "consideredValue": 2}),
        ),
        (
            "NeImplicitArrayTraversal",
            bson!({"a": {"$ne": 2}}),
            bson!({"a": [1, 2, 3]}),
            bson!({"operatorName": "$ne", "specifiedAs": {"a": {"$ne": 2}},
                   "reason": "comparison succeeded", "consideredValues": [1, 2, 3]}),
        ),
        (
            "BasicLt",
            bson!({"a": {"$lt": 0}}),
            bson!({"a": 1}),
            bson!({"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 0}},
                   "reason": "comparison failed", "consideredValue": 1}),
        ),
        (
            "LteMissingPath",
            bson!({"a": {"$lte": 0}}),
            bson!({"b": 1}),
            bson!({"operatorName": "$lte", "specifiedAs": {"a": {"$lte": 0}},
                   "reason": "field was missing"}),
        ),
        (
            "GtImplicitArrayTraversal",
            bson!({"a": {"$gt": 3}}),
            bson!({"a": [0, 1, 2]}),
            bson!({"operatorName": "$gt", "specifiedAs": {"a": {"$gt": 3}},
                   "reason": "comparison failed", "consideredValues": [0, 1, 2]}),
        ),
        (
            "GteImplicitArrayTraversalEmptyArray",
            bson!({"a": {"$gte": 3}}),
            bson!({"a": []}),
            bson!({"operatorName": "$gte", "specifiedAs": {"a": {"$gte": 3}},
                   "reason": "comparison failed", "consideredValues": []}),
        ),
        (
            "BasicIn",
            bson!({"a": {"$in": [1, 2, 3]}}),
            bson!({"a": 4}),
            bson!({"operatorName": "$in", "specifiedAs": {"a": {"$in": [1, 2, 3]}},
                   "reason": "no matching value found in array", "consideredValue": 4}),
        ),
        (
            "InNestedDocumentsAndArrays",
            bson!({"a.b": {"$in": [5, 6, 7, [2, 3, 4]]}}),
            bson!({"a": [{"b": [1, 2]}, {"b": [3, 4]}]}),
            bson!({"operatorName": "$in", "specifiedAs": {"a.b": {"$in": [5, 6, 7, [2, 3, 4]]}},
                   "reason": "no matching value found in array", "consideredValues": [1, 2, 3, 4]}),
        ),
        (
            "BasicNin",
            bson!({"a": {"$nin": [1, 2, 3]}}),
            bson!({"a": 3}),
            bson!({"operatorName": "$nin", "specifiedAs": {"a": {"$nin": [1, 2, 3]}},
                   "reason": "matching value found in array", "consideredValue": 3}),
        ),
        (
            "InAcceptsRegex",
            bson!({"a": {"$in": [re("^v"), re("^b"), re("^c")]}}),
            bson!({"a": "Validation"}),
            bson!({"operatorName": "$in", "specifiedAs": {"a": {"$in": [re("^v"), re("^b"), re("^c")]}},
                   "reason": "no matching value found in array", "consideredValue": "Validation"}),
        ),
        (
            "NinAcceptsRegex",
            bson!({"a": {"$nin": [re("^v"), re("^b"), re("^c")]}}),
            bson!({"a": "berry"}),
            bson!({"operatorName": "$nin", "specifiedAs": {"a": {"$nin": [re("^v"), re("^b"), re("^c")]}},
                   "reason": "matching value found in array", "consideredValue": "berry"}),
        ),
    ]);
}

#[test]
fn logical() {
    check_details(&[
        (
            "BasicAnd",
            bson!({"$and": [{"b": {"$gt": 0}}, {"a": {"$lt": 10}}]}),
            bson!({"a": 11, "b": 2}),
            bson!({"operatorName": "$and", "clausesNotSatisfied": [
                {"index": 1, "details": {"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 10}},
                                          "reason": "comparison failed", "consideredValue": 11}}]}),
        ),
        (
            "ImplicitAnd",
            bson!({"a": {"$gt": 0, "$lt": 10}}),
            bson!({"a": 11}),
            bson!({"operatorName": "$and", "clausesNotSatisfied": [
                {"index": 1, "details": {"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 10}},
                                          "reason": "comparison failed", "consideredValue": 11}}]}),
        ),
        (
            "NestedAndDoesNotReportErrorDetailsIfItMatches",
            bson!({"$and": [{"$and": [{"a": 1}]}, {"$and": [{"b": 1}]}]}),
            bson!({"a": 1, "b": 2}),
            bson!({"operatorName": "$and", "clausesNotSatisfied": [{"index": 1, "details": {
                "operatorName": "$and", "clausesNotSatisfied": [{"index": 0, "details": {
                    "operatorName": "$eq", "specifiedAs": {"b": 1},
                    "reason": "comparison failed", "consideredValue": 2}}]}}]}),
        ),
        (
            "OrMultipleFailingClauses",
            bson!({"$or": [{"a": {"$lt": 10}}, {"a": {"$gt": 20}}]}),
            bson!({"a": 15}),
            bson!({"operatorName": "$or", "clausesNotSatisfied": [
                {"index": 0, "details": {"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 10}},
                                          "reason": "comparison failed", "consideredValue": 15}},
                {"index": 1, "details": {"operatorName": "$gt", "specifiedAs": {"a": {"$gt": 20}},
                                          "reason": "comparison failed", "consideredValue": 15}}]}),
        ),
        (
            "BasicNor",
            bson!({"$nor": [{"a": {"$gt": 10}}, {"b": {"$lt": 10}}]}),
            bson!({"a": 9, "b": 9}),
            bson!({"operatorName": "$nor", "clausesSatisfied": [
                {"index": 1, "details": {"operatorName": "$lt", "specifiedAs": {"b": {"$lt": 10}},
                                          "reason": "comparison succeeded", "consideredValue": 9}}]}),
        ),
        (
            "BasicNot",
            bson!({"a": {"$not": {"$lt": 10}}}),
            bson!({"a": 9}),
            bson!({"operatorName": "$not", "details": {"operatorName": "$lt",
                   "specifiedAs": {"a": {"$lt": 10}}, "reason": "comparison succeeded",
                   "consideredValue": 9}}),
        ),
        (
            "NotOverImplicitAnd",
            bson!({"a": {"$not": {"$lt": 20, "$gt": 5}}}),
            bson!({"a": 10}),
            bson!({"operatorName": "$not", "details": {"operatorName": "$and", "clausesSatisfied": [
                {"index": 0, "details": {"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 20}},
                                          "reason": "comparison succeeded", "consideredValue": 10}},
                {"index": 1, "details": {"operatorName": "$gt", "specifiedAs": {"a": {"$gt": 5}},
                                          "reason": "comparison succeeded", "consideredValue": 10}}]}}),
        ),
        (
            "NestedNot",
            bson!({"a": {"$not": {"$not": {"$lt": 10}}}}),
            bson!({"a": 11}),
            bson!({"operatorName": "$not", "details": {"operatorName": "$not", "details": {
                "operatorName": "$lt", "specifiedAs": {"a": {"$lt": 10}},
                "reason": "comparison failed", "consideredValue": 11}}}),
        ),
        (
            "NestedAndOr",
            bson!({"$and": [{"$or": [{"price": {"$gt": 50}}, {"price": {"$lt": 20}}]},
                            {"qty": {"$gt": 0}}, {"qty": {"$lt": 10}}]}),
            bson!({"price": 30, "qty": 30}),
            bson!({"operatorName": "$and", "clausesNotSatisfied": [
                {"index": 0, "details": {"operatorName": "$or", "clausesNotSatisfied": [
                    {"index": 0, "details": {"operatorName": "$gt", "specifiedAs": {"price": {"$gt": 50}},
                                              "reason": "comparison failed", "consideredValue": 30}},
                    {"index": 1, "details": {"operatorName": "$lt", "specifiedAs": {"price": {"$lt": 20}},
                                              "reason": "comparison failed", "consideredValue": 30}}]}},
                {"index": 2, "details": {"operatorName": "$lt", "specifiedAs": {"qty": {"$lt": 10}},
                                          "reason": "comparison failed", "consideredValue": 30}}]}),
        ),
        (
            "NestedAndOrNorNotOneFailingClause",
            bson!({"$and": [{"$or": [{"price": {"$lt": 20}}]},
                            {"$nor": [{"qty": {"$gt": 30}}, {"qty": {"$not": {"$lt": 20}}}]}]}),
            bson!({"price": 10, "qty": 25}),
            bson!({"operatorName": "$and", "clausesNotSatisfied": [
                {"index": 1, "details": {"operatorName": "$nor", "clausesSatisfied": [
                    {"index": 1, "details": {"operatorName": "$not", "details": {
                        "operatorName": "$lt", "specifiedAs": {"qty": {"$lt": 20}},
                        "reason": "comparison failed", "consideredValue": 25}}}]}}]}),
        ),
        (
            // jstests/core/doc_validation/doc_validation_error.js, the manual's "Contacts".
            "Contacts",
            bson!({"$or": [{"phone": {"$type": "string"}}, {"email": {"$regex": re("@mongodb\\.com$")}},
                           {"status": {"$in": ["Unknown", "Incomplete"]}}]}),
            bson!({"email": "info@mongodb.co"}),
            bson!({"operatorName": "$or", "clausesNotSatisfied": [
                {"index": 0, "details": {"operatorName": "$type",
                    "specifiedAs": {"phone": {"$type": "string"}}, "reason": "field was missing"}},
                {"index": 1, "details": {"operatorName": "$regex",
                    "specifiedAs": {"email": {"$regex": re("@mongodb\\.com$")}},
                    "reason": "regular expression did not match", "consideredValue": "info@mongodb.co"}},
                {"index": 2, "details": {"operatorName": "$in",
                    "specifiedAs": {"status": {"$in": ["Unknown", "Incomplete"]}},
                    "reason": "field was missing"}}]}),
        ),
    ]);
}

#[test]
fn miscellaneous() {
    check_details(&[
        (
            "BasicExists",
            bson!({"a": {"$exists": true}}),
            bson!({"b": 1}),
            bson!({"operatorName": "$exists", "specifiedAs": {"a": {"$exists": true}},
                   "reason": "path does not exist"}),
        ),
        (
            "NotExists",
            bson!({"a": {"$exists": false}}),
            bson!({"a": 1}),
            bson!({"operatorName": "$exists", "specifiedAs": {"a": {"$exists": false}},
                   "reason": "path does exist"}),
        ),
        (
            "BasicType",
            bson!({"a": {"$type": "int"}}),
            bson!({"a": "one"}),
            bson!({"operatorName": "$type", "specifiedAs": {"a": {"$type": "int"}},
                   "reason": "type did not match", "consideredValue": "one", "consideredType": "string"}),
        ),
        (
            "NotType",
            bson!({"a": {"$not": {"$type": "string"}}}),
            bson!({"a": "words"}),
            bson!({"operatorName": "$not", "details": {"operatorName": "$type",
                   "specifiedAs": {"a": {"$type": "string"}}, "reason": "type did match",
                   "consideredValue": "words", "consideredType": "string"}}),
        ),
        (
            "TypeImplicitArrayTraversal",
            bson!({"a": {"$type": "double"}}),
            bson!({"a": ["x", "y", "z"]}),
            bson!({"operatorName": "$type", "specifiedAs": {"a": {"$type": "double"}},
                   "reason": "type did not match", "consideredValues": ["x", "y", "z"],
                   "consideredType": "string"}),
        ),
        (
            "TypeImplicitArrayTraversalEmptyArray",
            bson!({"a": {"$type": "double"}}),
            bson!({"a": []}),
            bson!({"operatorName": "$type", "specifiedAs": {"a": {"$type": "double"}},
                   "reason": "type did not match", "consideredValues": []}),
        ),
        (
            "BasicExpr",
            bson!({"$expr": {"$eq": ["$a", "$b"]}}),
            bson!({"a": 1, "b": 2}),
            bson!({"operatorName": "$expr", "specifiedAs": {"$expr": {"$eq": ["$a", "$b"]}},
                   "reason": "expression did not match", "expressionResult": false}),
        ),
        (
            "NorExpr",
            bson!({"$nor": [{"$expr": {"$eq": ["$a", "$b"]}}]}),
            bson!({"a": 1, "b": 1}),
            bson!({"operatorName": "$nor", "clausesSatisfied": [{"index": 0, "details": {
                "operatorName": "$expr", "specifiedAs": {"$expr": {"$eq": ["$a", "$b"]}},
                "reason": "expression did match", "expressionResult": true}}]}),
        ),
        (
            "ExprWhichThrowsGeneratesError",
            bson!({"$expr": {"$divide": [10, 0]}}),
            bson!({}),
            bson!({"operatorName": "$expr", "specifiedAs": {"$expr": {"$divide": [10, 0]}},
                   "reason": "failed to evaluate aggregation expression",
                   "details": {"code": 2, "codeName": "BadValue", "errmsg": "can't $divide by zero"}}),
        ),
        (
            "OneExprThrowsAmongMultiple",
            bson!({"$and": [{"$expr": {"$concat": ["$a", "$b"]}}, {"$expr": {"$divide": [10, 0]}}]}),
            bson!({"a": "field b IS a string", "b": "This will concat and not throw"}),
            bson!({"operatorName": "$and", "clausesNotSatisfied": [{"index": 1, "details": {
                "operatorName": "$expr", "specifiedAs": {"$expr": {"$divide": [10, 0]}},
                "reason": "failed to evaluate aggregation expression",
                "details": {"code": 2, "codeName": "BadValue", "errmsg": "can't $divide by zero"}}}]}),
        ),
        (
            "MultipleExprsWhichThrow",
            bson!({"$and": [{"$expr": {"$concat": ["$a", "$b"]}}, {"$expr": {"$divide": [10, 0]}}]}),
            bson!({"a": "field b is not a string", "b": 1}),
            bson!({"operatorName": "$and", "clausesNotSatisfied": [
                {"index": 0, "details": {"operatorName": "$expr",
                    "specifiedAs": {"$expr": {"$concat": ["$a", "$b"]}},
                    "reason": "failed to evaluate aggregation expression",
                    "details": {"code": 16702, "codeName": "Location16702",
                                "errmsg": "$concat only supports strings, not int"}}},
                {"index": 1, "details": {"operatorName": "$expr",
                    "specifiedAs": {"$expr": {"$divide": [10, 0]}},
                    "reason": "failed to evaluate aggregation expression",
                    "details": {"code": 2, "codeName": "BadValue", "errmsg": "can't $divide by zero"}}}]}),
        ),
        (
            "SampleRateAlwaysFalse",
            bson!({"$sampleRate": 0}),
            bson!({"will this always fail?": "yes!"}),
            bson!({"operatorName": "$sampleRate", "specifiedAs": {"$sampleRate": 0},
                   "reason": "expression did not match", "expressionResult": false}),
        ),
        (
            "SampleRateAlwaysTrue",
            bson!({"$nor": [{"$sampleRate": 1}]}),
            bson!({"x": 1}),
            bson!({"operatorName": "$nor", "clausesSatisfied": [{"index": 0, "details": {
                "operatorName": "$sampleRate", "specifiedAs": {"$sampleRate": 1},
                "reason": "expression did match", "expressionResult": true}}]}),
        ),
        (
            "ExprExpressionResultNumeric",
            bson!({"$expr": 0}),
            bson!({"a": 1}),
            bson!({"operatorName": "$expr", "specifiedAs": {"$expr": 0},
                   "reason": "expression did not match", "expressionResult": 0}),
        ),
        (
            "NorExprExpressionResultObject",
            bson!({"$nor": [{"$expr": {"$literal": {"b": 1}}}]}),
            bson!({"a": 1}),
            bson!({"operatorName": "$nor", "clausesSatisfied": [{"index": 0, "details": {
                "operatorName": "$expr", "specifiedAs": {"$expr": {"$literal": {"b": 1}}},
                "reason": "expression did match", "expressionResult": {"b": 1}}}]}),
        ),
        (
            "BasicMod",
            bson!({"a": {"$mod": [2, 1]}}),
            bson!({"a": 2}),
            bson!({"operatorName": "$mod", "specifiedAs": {"a": {"$mod": [2, 1]}},
                   "reason": "$mod did not evaluate to expected remainder", "consideredValue": 2}),
        ),
        (
            "ModNonNumeric",
            bson!({"a": {"$mod": [2, 1]}}),
            bson!({"a": "two"}),
            bson!({"operatorName": "$mod", "specifiedAs": {"a": {"$mod": [2, 1]}},
                   "reason": "type did not match", "consideredType": "string",
                   "expectedTypes": ["decimal", "double", "int", "long"], "consideredValue": "two"}),
        ),
        (
            "ModImplicitArrayTraversalMixedTypes",
            bson!({"a": {"$mod": [2, 1]}}),
            bson!({"a": [0, "two", "four"]}),
            bson!({"operatorName": "$mod", "specifiedAs": {"a": {"$mod": [2, 1]}},
                   "reason": "$mod did not evaluate to expected remainder",
                   "consideredValues": [0, "two", "four"]}),
        ),
        (
            "BasicRegex",
            bson!({"a": {"$regex": re("/myRegex/"), "$options": ""}}),
            bson!({"a": "one"}),
            bson!({"operatorName": "$regex", "specifiedAs": {"a": {"$regex": re("/myRegex/"), "$options": ""}},
                   "reason": "regular expression did not match", "consideredValue": "one"}),
        ),
        (
            "NotRegex",
            bson!({"a": {"$not": {"$regex": re("myRegex"), "$options": ""}}}),
            bson!({"a": "myRegex"}),
            bson!({"operatorName": "$not", "details": {"operatorName": "$regex",
                   "specifiedAs": {"a": {"$regex": re("myRegex"), "$options": ""}},
                   "reason": "regular expression did match", "consideredValue": "myRegex"}}),
        ),
        (
            "RegexNonString",
            bson!({"a": {"$regex": re("/myRegex/"), "$options": ""}}),
            bson!({"a": 1}),
            bson!({"operatorName": "$regex", "specifiedAs": {"a": {"$regex": re("/myRegex/"), "$options": ""}},
                   "reason": "type did not match", "consideredType": "int",
                   "expectedTypes": ["regex", "string", "symbol"], "consideredValue": 1}),
        ),
        (
            "RegexImplicitArrayTraversalMixedTypes",
            bson!({"a": {"$regex": re("/myRegex/"), "$options": ""}}),
            bson!({"a": ["x", 1, 2]}),
            bson!({"operatorName": "$regex", "specifiedAs": {"a": {"$regex": re("/myRegex/"), "$options": ""}},
                   "reason": "regular expression did not match", "consideredValues": ["x", 1, 2]}),
        ),
        (
            "RegexNoExplicitOperator",
            bson!({"a": re("^S")}),
            bson!({"a": "so sorry; not capitalized"}),
            bson!({"operatorName": "$regex", "specifiedAs": {"a": re("^S")},
                   "reason": "regular expression did not match",
                   "consideredValue": "so sorry; not capitalized"}),
        ),
        (
            "NotOverRegexNoExplicitOperator",
            bson!({"a": {"$not": re("^S")}}),
            bson!({"a": "S"}),
            bson!({"operatorName": "$not", "details": {"operatorName": "$regex",
                   "specifiedAs": {"a": re("^S")}, "reason": "regular expression did match",
                   "consideredValue": "S"}}),
        ),
        (
            "BitsAllClearNumericOnValueMatch",
            bson!({"a": {"$not": {"$bitsAllClear": 2}}}),
            bson!({"a": 5}),
            bson!({"operatorName": "$not", "details": {"operatorName": "$bitsAllClear",
                   "specifiedAs": {"a": {"$bitsAllClear": 2}},
                   "reason": "bitwise operator matched successfully", "consideredValue": 5}}),
        ),
        (
            "BitsAnyClearOnTypeMismatch",
            bson!({"a": {"$bitsAnyClear": 3}}),
            bson!({"a": "someString"}),
            bson!({"operatorName": "$bitsAnyClear", "specifiedAs": {"a": {"$bitsAnyClear": 3}},
                   "reason": "type did not match", "consideredType": "string",
                   "expectedTypes": ["binData", "decimal", "double", "int", "long"],
                   "consideredValue": "someString"}),
        ),
        (
            "BitsAllClearOnValueArray",
            bson!({"a": {"$bitsAllClear": 2}}),
            bson!({"a": [7, 3]}),
            bson!({"operatorName": "$bitsAllClear", "specifiedAs": {"a": {"$bitsAllClear": 2}},
                   "reason": "bitwise operator failed to match", "consideredValues": [7, 3]}),
        ),
    ]);
}

#[test]
fn arrays() {
    check_details(&[
        (
            "BasicSize",
            bson!({"a": {"$size": 2}}),
            bson!({"a": [1, 2, 3]}),
            bson!({"operatorName": "$size", "specifiedAs": {"a": {"$size": 2}},
                   "reason": "array length was not equal to given size", "consideredValue": [1, 2, 3]}),
        ),
        (
            "SizeNonArray",
            bson!({"a": {"$size": 2}}),
            bson!({"a": 3}),
            bson!({"operatorName": "$size", "specifiedAs": {"a": {"$size": 2}},
                   "reason": "type did not match", "consideredType": "int", "expectedType": "array",
                   "consideredValue": 3}),
        ),
        (
            "NotOverSize",
            bson!({"a": {"$not": {"$size": 2}}}),
            bson!({"a": [1, 2]}),
            bson!({"operatorName": "$not", "details": {"operatorName": "$size",
                   "specifiedAs": {"a": {"$size": 2}}, "reason": "array length was equal to given size",
                   "consideredValue": [1, 2]}}),
        ),
        (
            "BasicAll",
            bson!({"a": {"$all": [1, 2, 3]}}),
            bson!({"a": [1, 2, 4]}),
            bson!({"operatorName": "$all", "specifiedAs": {"a": {"$all": [1, 2, 3]}},
                   "reason": "array did not contain all specified values", "consideredValue": [1, 2, 4]}),
        ),
        (
            "AllMissingPath",
            bson!({"a": {"$all": [1, 2, 3]}}),
            bson!({"b": [1, 2, 3]}),
            bson!({"operatorName": "$all", "specifiedAs": {"a": {"$all": [1, 2, 3]}},
                   "reason": "field was missing"}),
        ),
        (
            "AllNoValues",
            bson!({"a": {"$all": []}}),
            bson!({"a": [1, 2, 3]}),
            bson!({"operatorName": "$all", "specifiedAs": {"a": {"$all": []}},
                   "reason": "expression always evaluates to false"}),
        ),
        (
            "NotOverAll",
            bson!({"a": {"$not": {"$all": [1, 2, 3]}}}),
            bson!({"a": [1, 2, 3]}),
            bson!({"operatorName": "$not", "details": {"operatorName": "$all",
                   "specifiedAs": {"a": {"$all": [1, 2, 3]}},
                   "reason": "array did contain all specified values", "consideredValue": [1, 2, 3]}}),
        ),
        (
            "BasicElemMatchValue",
            bson!({"a": {"$elemMatch": {"$gt": 0, "$lt": 10}}}),
            bson!({"a": [10, 11, 12]}),
            bson!({"operatorName": "$elemMatch", "specifiedAs": {"a": {"$elemMatch": {"$gt": 0, "$lt": 10}}},
                   "reason": "array did not satisfy the child predicate", "consideredValue": [10, 11, 12]}),
        ),
        (
            "ElemMatchObjectNonArray",
            bson!({"a": {"$elemMatch": {"b": {"$gt": 0}, "c": {"$lt": 0}}}}),
            bson!({"a": "foo"}),
            bson!({"operatorName": "$elemMatch",
                   "specifiedAs": {"a": {"$elemMatch": {"b": {"$gt": 0}, "c": {"$lt": 0}}}},
                   "reason": "type did not match", "consideredType": "string",
                   "expectedType": "array", "consideredValue": "foo"}),
        ),
        (
            "AllOverElemMatch",
            bson!({"a": {"$all": [{"$elemMatch": {"b": {"$gte": 0}}}, {"$elemMatch": {"c": {"$lt": 0}}}]}}),
            bson!({"a": [{"b": 0, "c": 0}, {"b": 1, "c": 1}]}),
            bson!({"operatorName": "$all",
                   "specifiedAs": {"a": {"$all": [{"$elemMatch": {"b": {"$gte": 0}}}, {"$elemMatch": {"c": {"$lt": 0}}}]}},
                   "reason": "array did not contain all specified values",
                   "consideredValue": [{"b": 0, "c": 0}, {"b": 1, "c": 1}]}),
        ),
    ]);
}

#[test]
fn considered_values_are_capped() {
    let values: Vec<i32> = (0..1000).collect();
    let first: Vec<i32> = (0..10).collect();
    check_details(&[(
        "TruncatedConsideredValuesArray",
        bson!({"a": {"$lt": 0}}),
        bson!({"a": values}),
        bson!({"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 0}},
               "reason": "comparison failed", "consideredValues": first,
               "consideredValuesTruncated": true}),
    )]);
    // Exactly the limit is not truncated.
    let ten: Vec<i32> = (0..10).collect();
    let info = err_info(&bson!({"a": {"$lt": 0}}), &bson!({"a": ten}));
    let details = info.get_document("details").expect("details");
    assert!(
        details
            .get("consideredValuesTruncated")
            .ok()
            .flatten()
            .is_none()
    );
}

#[test]
fn failing_document_id_and_notes() {
    let info = err_info(&bson!({"a": {"$eq": 2}}), &bson!({"a": 1, "_id": 10}));
    let keys: Vec<&str> = info.iter().flatten().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["failingDocumentId", "details"]);
    assert_eq!(info.get_i32("failingDocumentId").ok(), Some(10));
    // Operators without annotation: no details, a note.
    let info = err_info(&bson!({"$alwaysFalse": 1}), &bson!({"a": 1}));
    assert_eq!(
        info.get_str("note").ok(),
        Some("failed to generate document validation error")
    );
    assert_eq!(
        info.get_document("details")
            .ok()
            .and_then(|d| d.get_i32("code").ok()),
        Some(4994600)
    );
}

#[test]
fn pass_and_fail_agree_with_the_query_language() {
    let cases = [
        (bson!({"a": {"$gt": 1}}), bson!({"a": 2}), true),
        (bson!({"a": {"$gt": 1}}), bson!({"a": [0, 5]}), true),
        (bson!({"a": {"$ne": null}}), bson!({}), false),
        (bson!({"$or": [{"a": 1}, {"b": 1}]}), bson!({"b": 1}), true),
        (
            bson!({"$nor": [{"$expr": {"$divide": [1, 0]}}]}),
            bson!({}),
            false,
        ),
        (
            bson!({"$expr": {"$lt": ["$$NOW", {"$toDate": 4102444800000_i64}]}}),
            bson!({}),
            true,
        ),
        (bson!({}), bson!({"anything": 1}), true),
    ];
    for (validator, doc, expected) in cases {
        assert_eq!(passes(&validator, &doc), expected, "{validator} on {doc}");
    }
}

#[test]
fn refused_validators() {
    use cairn_query::QueryError;
    use cairn_query::validation::Validator;
    let code = |e: &QueryError| match e {
        QueryError::BadValue(_) => 2,
        QueryError::FailedToParse(_) => 9,
        QueryError::TypeMismatch(_) => 14,
        QueryError::Location(c, _) => *c,
        QueryError::NotImplemented(_) => 238,
        _ => -1,
    };
    let cases = [
        (
            bson!({"$where": "this.a == this.b"}),
            2,
            "Parsing of collection validator failed :: caused by :: $where is not allowed in this context",
        ),
        (
            bson!({"$text": {"$search": "bob"}}),
            2,
            "Parsing of collection validator failed :: caused by :: $text is not allowed in this context",
        ),
        (
            bson!({"a": {"$near": [0, 0]}}),
            5626500,
            "Parsing of collection validator failed :: caused by :: $geoNear, $near, and $nearSphere are not allowed in this context",
        ),
        (
            bson!({"a": {"$nearSphere": [0, 0]}}),
            5626500,
            "Parsing of collection validator failed :: caused by :: $geoNear, $near, and $nearSphere are not allowed in this context",
        ),
        (
            bson!({"$expr": {"$function": {"body": "function(age) { return age >= 21; }", "args": ["$age"], "lang": "js"}}}),
            4660800,
            "Parsing of collection validator failed :: caused by :: $function cannot be used inside a validator.",
        ),
        (
            bson!({"$expr": {"$_internalJsEmit": {"eval": "function() {}", "this": {}}}}),
            4660801,
            "Parsing of collection validator failed :: caused by :: $_internalJsEmit cannot be used inside a validator.",
        ),
        (
            bson!({"$expr": {"$eq": ["$a", "$$unbound"]}}),
            17276,
            "Parsing of collection validator failed :: caused by :: Use of undefined variable: unbound",
        ),
        (
            bson!({"$jsonSchema": {"invalid": 1}}),
            9,
            "Parsing of collection validator failed :: caused by :: Unknown $jsonSchema keyword: invalid",
        ),
        (
            bson!({"a": {"$bad": 1}}),
            2,
            "Parsing of collection validator failed :: caused by :: unknown operator: $bad",
        ),
    ];
    for (validator, want_code, want_msg) in cases {
        let e = Validator::parse(&raw(&validator)).expect_err("refused");
        assert_eq!(code(&e), want_code, "{validator}: {e:?}");
        assert_eq!(e.to_string(), want_msg, "{validator}");
    }
}
