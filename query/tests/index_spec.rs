//! Index specification validation: codes and messages as MongoDB 7.0's `createIndexes`
//! returns them (messages checked against replies of a real server where known).

use bson::{RawDocumentBuf, rawdoc};
use cairn_query::index::{QueryKeyGen, validate_spec};
use cairn_storage::StorageError;
use cairn_storage::index::IndexKeyGen;

fn check(spec: RawDocumentBuf) -> Result<(), (i32, String)> {
    validate_spec(&spec).map_err(|e| (e.code, e.message))
}

#[test]
fn valid_specs() {
    for spec in [
        rawdoc! {"key": {"a": 1}, "name": "a_1"},
        rawdoc! {"v": 2, "key": {"a": -1, "b.c": 1}, "name": "x"},
        rawdoc! {"key": {"a": 1.5}, "name": "x", "unique": true, "sparse": 1},
        rawdoc! {"key": {"a": 1}, "name": "x", "partialFilterExpression": {"a": {"$gt": 5}, "b": {"$exists": true}}},
        rawdoc! {"key": {"a": 1}, "name": "x", "partialFilterExpression": {"$or": [{"a": 1}, {"b": {"$in": [1, 2]}}]}},
        rawdoc! {"key": {"a": 1}, "name": "x", "partialFilterExpression": {"a": {"$type": "string"}}},
        rawdoc! {"key": {"a": 1}, "name": "x", "expireAfterSeconds": 3600},
        rawdoc! {"key": {"a": 1}, "name": "x", "expireAfterSeconds": 0},
        rawdoc! {"key": {"a": 1}, "name": "x", "expireAfterSeconds": 2147483647i64},
        rawdoc! {"key": {"a": "hashed"}, "name": "x"},
        rawdoc! {"key": {"a": "hashed", "b": 1}, "name": "x", "sparse": true},
        rawdoc! {"key": {"a": 1}, "name": "x", "hidden": false, "background": true},
        rawdoc! {"key": {"a.$id": 1}, "name": "x"},
        rawdoc! {"key": {"_id": 1}, "name": "_id_", "v": 2},
        rawdoc! {"key": {"a": 1}, "name": "x", "collation": {"locale": "simple"}},
        rawdoc! {"key": {"a": 1}, "name": "x", "ns": "db.c", "v": 1},
    ] {
        assert_eq!(check(spec.clone()), Ok(()), "{spec:?}");
    }
}

#[test]
fn invalid_specs() {
    let cases: Vec<(RawDocumentBuf, i32, &str)> = vec![
        (
            rawdoc! {"key": {"z": 0}, "name": "z_0"},
            67,
            "Error in specification { key: { z: 0 }, name: \"z_0\" } :: caused by :: Values in \
             the index key pattern cannot be 0.",
        ),
        (
            rawdoc! {"key": {"": 1}, "name": "ef"},
            67,
            "Error in specification { key: { : 1 }, name: \"ef\" } :: caused by :: Index keys \
             cannot be an empty field.",
        ),
        (
            rawdoc! {"key": {"a..b": 1}, "name": "ef"},
            67,
            "Error in specification { key: { a..b: 1 }, name: \"ef\" } :: caused by :: Index \
             keys cannot contain an empty field.",
        ),
        (
            rawdoc! {"key": {"$x": 1}, "name": "dx"},
            67,
            "Error in specification { key: { $x: 1 }, name: \"dx\" } :: caused by :: Index key \
             contains an illegal field name: field name starts with '$'.",
        ),
        (
            rawdoc! {"key": {"u": 1}, "bogus": true, "name": "u_1"},
            197,
            "Error in specification { key: { u: 1 }, bogus: true, name: \"u_1\" } :: caused by \
             :: The field 'bogus' is not valid for an index specification. Specification: { key: \
             { u: 1 }, bogus: true, name: \"u_1\" }",
        ),
        (
            rawdoc! {"key": {"n": 1}, "name": ""},
            67,
            "Error in specification { key: { n: 1 }, name: \"\", v: 2 } :: caused by :: index \
             name cannot be empty",
        ),
        (
            rawdoc! {"key": {"s": 1}, "name": "*"},
            2,
            "The index name '*' is not valid.",
        ),
        (
            rawdoc! {"key": {"_id": -1}, "name": "_id_-1"},
            2,
            "The field 'key' for an _id index must be {_id: 1}, but got { _id: -1 }",
        ),
        (
            rawdoc! {"key": {"_id": 1}, "name": "_id_", "sparse": true},
            197,
            "The field 'sparse' is not valid for an _id index specification. Specification: { \
             key: { _id: 1 }, name: \"_id_\", sparse: true, v: 2 }",
        ),
        (
            rawdoc! {"key": {"w": 1}, "expireAfterSeconds": -1, "name": "w_1"},
            67,
            ". Index spec: { key: { w: 1 }, expireAfterSeconds: -1, name: \"w_1\" } :: caused \
             by :: TTL index 'expireAfterSeconds' option cannot be less than 0",
        ),
        (
            rawdoc! {"key": {"w": 1, "a": 1}, "expireAfterSeconds": 10, "name": "w_1_a_1"},
            67,
            "TTL indexes are single-field indexes, compound indexes do not support TTL. Index \
             spec: { key: { w: 1, a: 1 }, expireAfterSeconds: 10, name: \"w_1_a_1\" }",
        ),
        (
            rawdoc! {"key": {"p": 1}, "sparse": true, "partialFilterExpression": {"a": 1}, "name": "p_1"},
            67,
            "Error in specification { key: { p: 1 }, sparse: true, partialFilterExpression: { a: \
             1 }, name: \"p_1\", v: 2 } :: caused by :: cannot mix \"partialFilterExpression\" \
             and \"sparse\" options",
        ),
        (
            rawdoc! {"key": {"a": 1}, "name": "a", "partialFilterExpression": {"a": {"$ne": 1}}},
            67,
            "Error in specification { key: { a: 1 }, name: \"a\", partialFilterExpression: { a: { \
             $ne: 1 } }, v: 2 } :: caused by :: Expression not supported in partial index: \
             $not\n    a $eq 1\n",
        ),
        (
            rawdoc! {"key": {"a": 1}, "name": "a", "partialFilterExpression": {"a": {"$foo": 1}}},
            2,
            "Error in specification { key: { a: 1 }, name: \"a\", partialFilterExpression: { a: { \
             $foo: 1 } } } :: caused by :: unknown operator: $foo",
        ),
        (
            rawdoc! {"key": {"a": 1}, "name": "a", "partialFilterExpression": 5},
            14,
            "Error in specification { key: { a: 1 }, name: \"a\", partialFilterExpression: 5 } :: \
             caused by :: The field 'partialFilterExpression' must be an object, but got int",
        ),
        (
            rawdoc! {"key": {"a": 1}, "name": "a", "partialFilterExpression": {"$expr": {"$eq": ["$a", 1]}}},
            224,
            "Error in specification { key: { a: 1 }, name: \"a\", partialFilterExpression: { \
             $expr: { $eq: [ \"$a\", 1 ] } } } :: caused by :: $expr is not allowed in this \
             context",
        ),
        (
            rawdoc! {"key": {"a": "hashed"}, "name": "h", "unique": true},
            16764,
            "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
        ),
        (
            rawdoc! {"key": {"a": "hashed", "b": "hashed"}, "name": "h"},
            31303,
            "A maximum of one index field is allowed to be hashed but found 2 for 'key' { a: \
             \"hashed\", b: \"hashed\" }",
        ),
        (
            rawdoc! {"name": "x"},
            9,
            "Error in specification { name: \"x\" } :: caused by :: The 'key' field is a required \
             property of an index specification",
        ),
        (
            rawdoc! {"key": {"a": 1}},
            9,
            "Error in specification { key: { a: 1 } } :: caused by :: The 'name' field is a \
             required property of an index specification",
        ),
        (
            rawdoc! {"key": {"a": 1}, "name": 5},
            14,
            "Error in specification { key: { a: 1 }, name: 5 } :: caused by :: The field 'name' \
             must be a string, but got int",
        ),
        (
            rawdoc! {"key": 1, "name": "x"},
            14,
            "Error in specification { key: 1, name: \"x\" } :: caused by :: The field 'key' must \
             be an object, but got int",
        ),
        (
            rawdoc! {"key": {}, "name": "x"},
            67,
            "Error in specification { key: {}, name: \"x\" } :: caused by :: Index keys cannot be \
             empty.",
        ),
        (
            rawdoc! {"key": {"a": true}, "name": "x"},
            67,
            "Error in specification { key: { a: true }, name: \"x\" } :: caused by :: Values in \
             v:2 index key pattern cannot be of type bool. Only numbers > 0, numbers < 0, and \
             strings are allowed.",
        ),
        (
            rawdoc! {"key": {"a": "foo"}, "name": "x"},
            67,
            "Error in specification { key: { a: \"foo\" }, name: \"x\" } :: caused by :: Unknown \
             index plugin 'foo'",
        ),
        (
            rawdoc! {"key": {"a": "hashed", "b": "text"}, "name": "x"},
            67,
            "Error in specification { key: { a: \"hashed\", b: \"text\" }, name: \"x\" } :: caused \
             by :: Can't use more than one index plugin for a single index.",
        ),
        (
            rawdoc! {"key": {"a": f64::NAN}, "name": "x"},
            67,
            "Error in specification { key: { a: nan.0 }, name: \"x\" } :: caused by :: Values in \
             the index key pattern cannot be NaN.",
        ),
        (
            rawdoc! {"key": {"a": 1}, "name": "x", "unique": "yes"},
            14,
            "Error in specification { key: { a: 1 }, name: \"x\", unique: \"yes\" } :: caused by \
             :: The field 'unique has value unique: \"yes\", which is not convertible to bool",
        ),
        (
            rawdoc! {"key": {"a": 1}, "name": "x", "v": 3},
            67,
            "Error in specification { key: { a: 1 }, name: \"x\", v: 3 } :: caused by :: Invalid \
             index specification { key: { a: 1 }, name: \"x\", v: 3 }; cannot create an index \
             with v=3",
        ),
        (
            rawdoc! {"key": {"a": 1}, "name": "x", "expireAfterSeconds": "1"},
            67,
            ". Index spec: { key: { a: 1 }, name: \"x\", expireAfterSeconds: \"1\" } :: caused by \
             :: TTL index 'expireAfterSeconds' option must be numeric, but received a type of \
             'string'",
        ),
        (
            rawdoc! {"key": {"a": 1}, "name": "x", "expireAfterSeconds": 2147483648i64},
            67,
            ". Index spec: { key: { a: 1 }, name: \"x\", expireAfterSeconds: 2147483648 } :: \
             caused by :: TTL index 'expireAfterSeconds' must be within the range of a 32-bit \
             integer",
        ),
        (
            rawdoc! {"key": {"_id": 1}, "name": "x", "expireAfterSeconds": 5},
            197,
            "The field 'expireAfterSeconds' is not valid for an _id index specification. \
             Specification: { key: { _id: 1 }, name: \"x\", expireAfterSeconds: 5, v: 2 }",
        ),
        (
            rawdoc! {"key": {"a": 1}, "name": "_id_"},
            2,
            "The index name '_id_' is reserved for the _id index, which must have key pattern \
             {_id: 1}, found key: { a: 1 }",
        ),
        (
            rawdoc! {"key": {"a": 1, "a": -1}, "name": "x"},
            2,
            "Error in specification { key: { a: 1, a: -1 }, name: \"x\" } :: caused by :: The \
             field 'a' appears multiple times in the index key pattern { a: 1, a: -1 }",
        ),
        (
            rawdoc! {"key": {"a": "text"}, "name": "x"},
            238,
            "text indexes are not supported yet",
        ),
        (
            rawdoc! {"key": {"$**": 1}, "name": "x"},
            238,
            "wildcard indexes are not supported yet",
        ),
        (
            rawdoc! {"key": {"a": "2dsphere"}, "name": "x", "2dsphereIndexVersion": 4},
            67,
            "unsupported geo index version { 2dsphereIndexVersion : 4 }, only support \
             versions: [1,2,3]",
        ),
        (
            rawdoc! {"key": {"a": 1, "b": "2d"}, "name": "x"},
            16801,
            "2d has to be first in index",
        ),
        (
            rawdoc! {"key": {"a": "geoHaystack"}, "name": "x"},
            67,
            "Error in specification { key: { a: \"geoHaystack\" }, name: \"x\" } :: caused by :: \
             GeoHaystack indexes cannot be created in version 5.0 and above",
        ),
    ];
    for (spec, code, msg) in cases {
        assert_eq!(
            check(spec.clone()),
            Err((code, msg.to_string())),
            "{spec:?}"
        );
    }
}

#[test]
fn partial_filter_operators() {
    let ok = |pf: RawDocumentBuf| {
        check(rawdoc! {"key": {"a": 1}, "name": "x", "partialFilterExpression": pf})
            .map_err(|e| e.0)
    };
    assert_eq!(ok(rawdoc! {}), Ok(()));
    assert_eq!(ok(rawdoc! {"a": {"$gte": 1, "$lte": 5}}), Ok(()));
    assert_eq!(ok(rawdoc! {"$and": [{"a": 1}, {"b": {"$lt": 2}}]}), Ok(()));
    assert_eq!(ok(rawdoc! {"a": {"$all": [1, 2]}}), Ok(()));
    for bad in [
        rawdoc! {"a": {"$nin": [1]}},
        rawdoc! {"a": {"$exists": false}},
        rawdoc! {"a": {"$regex": "x"}},
        rawdoc! {"a": {"$elemMatch": {"$gt": 1}}},
        rawdoc! {"a": {"$size": 1}},
        rawdoc! {"a": {"$mod": [2, 0]}},
        rawdoc! {"$nor": [{"a": 1}]},
        rawdoc! {"a": {"$not": {"$gt": 1}}},
    ] {
        assert_eq!(ok(bad.clone()), Err(67), "{bad:?}");
    }
    // Depth limit 4.
    let deep = rawdoc! {"$and": [{"$and": [{"$and": [{"$and": [{"a": 1}, {"b": 1}]}, {"c": 1}]}, {"d": 1}]}, {"e": 1}]};
    assert_eq!(
        check(rawdoc! {"key": {"a": 1}, "name": "x", "partialFilterExpression": deep}).map_err(
            |e| e
                .1
                .ends_with("partialFilterExpression depth may not exceed 4")
        ),
        Err(true)
    );
}

#[test]
fn storage_mapping() {
    let g = QueryKeyGen::new();
    assert!(matches!(
        g.validate(&rawdoc! {"key": {"a": 0}, "name": "x"}),
        Err(StorageError::IndexConflict { code: 67, .. })
    ));
    assert!(matches!(
        g.validate(&rawdoc! {"key": {"a": "text"}, "name": "x"}),
        Err(StorageError::NotImplemented(_))
    ));
    assert!(matches!(
        g.validate(&rawdoc! {"key": {"a": 1}, "name": "*"}),
        Err(StorageError::IndexConflict { code: 2, .. })
    ));
    assert!(
        g.validate(&rawdoc! {"key": {"a": 1}, "name": "a_1"})
            .is_ok()
    );
}

/// A key pattern orders at most 32 fields (MongoDB's jstest `compound_index_max_fields`):
/// 32 are accepted, a 33rd is refused with 13103.
#[test]
fn compound_key_field_limit() {
    let spec = |n: usize| {
        let mut key = RawDocumentBuf::new();
        for i in 0..n {
            let name = format!("f{i}");
            let name = <&bson::raw::CStr>::try_from(name.as_str()).unwrap();
            key.append(name, if i % 2 == 0 { 1 } else { -1 });
        }
        rawdoc! {"key": key, "name": "big"}
    };
    assert_eq!(check(spec(32)), Ok(()));
    assert_eq!(
        check(spec(33)),
        Err((13103, "too many compound keys".to_string()))
    );
}
