//! Edge cases of MongoDB's matching semantics: numbers, type bracketing, paths through arrays,
//! `$elemMatch` against implicit traversal, match details, and the tree the planner sees.

mod common;

use std::sync::Arc;

use bson::{Bson, RawBsonRef, RawDocument, bson};
use cairn_query::filter::{
    CmpOp, DocumentPredicate, Expr, ExtensionKind, Extensions, Filter, PathExpr, Predicate,
};
use cairn_query::{QueryError, Result};
use common::*;

fn docs_v(values: Vec<(&str, Bson)>) -> Vec<Bson> {
    values
        .into_iter()
        .map(|(id, v)| bson!({"_id": id, "v": v}))
        .collect()
}

#[test]
fn numbers_compare_across_types() {
    let docs = docs_v(vec![
        ("int", i(1)),
        ("long", l(1)),
        ("double", f(1.0)),
        ("dec", dec("1.00")),
        ("neg-zero", f(-0.0)),
        ("zero", i(0)),
        ("dec-zero", dec("-0E+3")),
        ("string", s("1")),
        ("bool", b(true)),
    ]);
    let ones = ["int", "long", "double", "dec"];
    for one in [i(1), l(1), f(1.0), dec("1"), dec("1.000000")] {
        expect(&docs, bson!({"v": (one.clone())}), &ones);
        expect(&docs, bson!({"v": {"$in": [(one.clone())]}}), &ones);
    }
    let zeros = ["neg-zero", "zero", "dec-zero"];
    expect(&docs, bson!({"v": 0.0}), &zeros);
    expect(&docs, bson!({"v": -0.0}), &zeros);
    expect(&docs, bson!({"v": {"$lt": 0.5}}), &zeros);
    expect(&docs, bson!({"v": {"$gte": (dec("0.5"))}}), &ones);
    // Type bracketing: a number never matches strings or bools, nor the reverse.
    expect(
        &docs,
        bson!({"v": {"$gte": 0}}),
        &[
            "int", "long", "double", "dec", "neg-zero", "zero", "dec-zero",
        ],
    );
    expect(&docs, bson!({"v": {"$gte": ""}}), &["string"]);
    expect(&docs, bson!({"v": {"$lte": true}}), &["bool"]);
}

#[test]
fn large_integers_are_exact() {
    let two53 = 1i64 << 53;
    let docs = docs_v(vec![
        ("long-2^53", l(two53)),
        ("long-2^53+1", l(two53 + 1)),
        ("double-2^53", f(two53 as f64)),
        ("long-max", l(i64::MAX)),
        ("double-2^63", f(9_223_372_036_854_775_808.0)),
    ]);
    expect(&docs, bson!({"v": (l(two53 + 1))}), &["long-2^53+1"]);
    expect(
        &docs,
        bson!({"v": (f(two53 as f64))}),
        &["long-2^53", "double-2^53"],
    );
    expect(
        &docs,
        bson!({"v": {"$gt": (f(two53 as f64))}}),
        &["long-2^53+1", "long-max", "double-2^63"],
    );
    expect(
        &docs,
        bson!({"v": {"$lt": (f(9_223_372_036_854_775_808.0))}}),
        &["long-2^53", "long-2^53+1", "double-2^53", "long-max"],
    );
    expect(&docs, bson!({"v": (l(i64::MAX))}), &["long-max"]);
    // A double is compared exactly with a decimal: 0.1 (double) is above Decimal128("0.1").
    let tenth = docs_v(vec![("double", f(0.1)), ("dec", dec("0.1"))]);
    expect(&tenth, bson!({"v": (dec("0.1"))}), &["dec"]);
    expect(&tenth, bson!({"v": {"$gt": (dec("0.1"))}}), &["double"]);
}

#[test]
fn nan() {
    let docs = docs_v(vec![
        ("nan", f(f64::NAN)),
        ("dec-nan", dec("NaN")),
        ("neg-inf", f(f64::NEG_INFINITY)),
        ("one", i(1)),
        ("array", a(vec![f(f64::NAN), i(5)])),
    ]);
    let nans = ["nan", "dec-nan", "array"];
    expect(&docs, bson!({"v": (f64::NAN)}), &nans);
    expect(&docs, bson!({"v": (dec("NaN"))}), &nans);
    expect(&docs, bson!({"v": {"$in": [(f64::NAN)]}}), &nans);
    expect(&docs, bson!({"v": {"$gte": (f64::NAN)}}), &nans);
    expect(&docs, bson!({"v": {"$lte": (f64::NAN)}}), &nans);
    expect(&docs, bson!({"v": {"$gt": (f64::NAN)}}), &[]);
    expect(&docs, bson!({"v": {"$lt": (f64::NAN)}}), &[]);
    // NaN is neither below nor above other numbers (although it sorts first).
    expect(&docs, bson!({"v": {"$lt": 2}}), &["neg-inf", "one"]);
    expect(
        &docs,
        bson!({"v": {"$gte": (f64::NEG_INFINITY)}}),
        &["neg-inf", "one", "array"],
    );
    expect(
        &docs,
        bson!({"v": {"$ne": (f64::NAN)}}),
        &["neg-inf", "one"],
    );
}

#[test]
fn min_and_max_key_bounds_admit_every_type() {
    let docs = docs_v(vec![
        ("min", Bson::MinKey),
        ("max", Bson::MaxKey),
        ("null", null()),
        ("num", i(3)),
        ("str", s("x")),
        ("obj", d(vec![])),
    ]);
    let mut with_missing = docs.clone();
    with_missing.push(bson!({"_id": "missing"}));
    expect(
        &with_missing,
        bson!({"v": {"$gt": (Bson::MinKey)}}),
        &["max", "null", "num", "str", "obj", "missing"],
    );
    expect(
        &with_missing,
        bson!({"v": {"$gte": (Bson::MinKey)}}),
        &["min", "max", "null", "num", "str", "obj", "missing"],
    );
    expect(
        &with_missing,
        bson!({"v": {"$lt": (Bson::MaxKey)}}),
        &["min", "null", "num", "str", "obj", "missing"],
    );
    expect(&with_missing, bson!({"v": (Bson::MinKey)}), &["min"]);
    expect(&with_missing, bson!({"v": {"$lt": (Bson::MinKey)}}), &[]);
    // Ordinary bounds stay within their type.
    expect(&with_missing, bson!({"v": {"$gt": null}}), &[]);
    expect(
        &with_missing,
        bson!({"v": {"$gte": null}}),
        &["null", "missing"],
    );
    expect(&with_missing, bson!({"v": {"$lt": {}}}), &[]);
}

#[test]
fn other_types_order_within_their_class() {
    let docs = docs_v(vec![
        ("d1", dt(1_000)),
        ("d2", dt(-5)),
        ("t1", ts(1, 2)),
        ("t2", ts(1, 3)),
        ("o1", oid([1; 12])),
        ("o2", oid([2; 12])),
        ("b1", bin(0, &[1, 2])),
        ("b2", bin(0, &[9])),
        ("sym", Bson::Symbol("abc".into())),
        ("str", s("abc")),
    ]);
    expect(&docs, bson!({"v": {"$gt": (dt(0))}}), &["d1"]);
    expect(&docs, bson!({"v": {"$lt": (ts(1, 3))}}), &["t1"]);
    expect(&docs, bson!({"v": {"$gte": (oid([2; 12]))}}), &["o2"]);
    // BinData orders by length first.
    expect(&docs, bson!({"v": {"$gt": (bin(0, &[200]))}}), &["b1"]);
    // Symbols compare as strings.
    expect(&docs, bson!({"v": "abc"}), &["sym", "str"]);
    expect(&docs, bson!({"v": (re("^ab", ""))}), &["sym", "str"]);
}

#[test]
fn documents_compare_whole_and_in_order() {
    let docs = docs_v(vec![
        ("ab", d(vec![("a", i(1)), ("b", i(2))])),
        ("ba", d(vec![("b", i(2)), ("a", i(1))])),
        ("a", d(vec![("a", i(1))])),
        ("a-long", d(vec![("a", l(1))])),
    ]);
    expect(&docs, bson!({"v": {"a": 1, "b": 2}}), &["ab"]);
    expect(&docs, bson!({"v": {"b": 2, "a": 1}}), &["ba"]);
    expect(&docs, bson!({"v": {"a": 1}}), &["a", "a-long"]);
    expect(&docs, bson!({"v.a": 1}), &["ab", "ba", "a", "a-long"]);
    expect(&docs, bson!({"v": {"$gt": {"a": 1}}}), &["ab", "ba"]);
    // A document value whose first key is not an operator is an equality, even with `$` keys
    // later; a DBRef is an equality too.
    let refs = docs_v(vec![("ref", d(vec![("$ref", s("c")), ("$id", i(1))]))]);
    expect(&refs, bson!({"v": {"$ref": "c", "$id": 1}}), &["ref"]);
    expect(&refs, bson!({"v.$id": 1}), &["ref"]);
}

#[test]
fn arrays_match_whole_or_by_element_one_level() {
    let docs = docs_v(vec![
        ("flat", a(vec![i(1), i(2)])),
        ("nested", a(vec![a(vec![i(1), i(2)])])),
        ("deep", a(vec![a(vec![a(vec![i(1), i(2)])])])),
        ("scalar", i(1)),
        ("empty", a(vec![])),
        ("empty-nested", a(vec![a(vec![])])),
    ]);
    expect(&docs, bson!({"v": 1}), &["flat", "scalar"]);
    expect(&docs, bson!({"v": [1, 2]}), &["flat", "nested"]);
    expect(&docs, bson!({"v": [[1, 2]]}), &["nested", "deep"]);
    expect(&docs, bson!({"v": []}), &["empty", "empty-nested"]);
    expect(&docs, bson!({"v": {"$gt": 1}}), &["flat"]);
    // Arrays compare with arrays element by element (an array element sorts above a number).
    expect(
        &docs,
        bson!({"v": {"$gt": [1]}}),
        &["flat", "nested", "deep", "empty-nested"],
    );
    expect(
        &docs,
        bson!({"v": {"$lt": [1]}}),
        &["empty", "empty-nested"],
    );
    expect(
        &docs,
        bson!({"v": {"$ne": 1}}),
        &["nested", "deep", "empty", "empty-nested"],
    );
    expect(&docs, bson!({"v": {"$nin": [1, []]}}), &["nested", "deep"]);
    expect(
        &docs,
        bson!({"v": {"$exists": true}}),
        &["flat", "nested", "deep", "scalar", "empty", "empty-nested"],
    );
    expect(
        &docs,
        bson!({"v": {"$size": 1}}),
        &["nested", "deep", "empty-nested"],
    );
}

#[test]
fn array_indexes_in_paths() {
    let docs = vec![
        bson!({"_id": "arr", "a": [10, 20]}),
        bson!({"_id": "obj0", "a": {"0": 10}}),
        bson!({"_id": "objs", "a": [{"b": 1}, {"b": 2}]}),
        bson!({"_id": "arr-of-arr", "a": [[{"b": 1}]]}),
        bson!({"_id": "obj-with-0", "a": [{"0": 10}]}),
    ];
    expect(&docs, bson!({"a.0": 10}), &["arr", "obj0", "obj-with-0"]);
    expect(&docs, bson!({"a.1": 20}), &["arr"]);
    expect(&docs, bson!({"a.1": {"$exists": true}}), &["arr", "objs"]);
    expect(&docs, bson!({"a.1.b": 2}), &["objs"]);
    expect(&docs, bson!({"a.0.b": 1}), &["objs", "arr-of-arr"]);
    // Implicit traversal goes one array deep only.
    expect(&docs, bson!({"a.b": 1}), &["objs"]);
    expect(&docs, bson!({"a.0.0.b": 1}), &["arr-of-arr"]);
    // MongoDB quirk: each element document is also searched for a field called "5" (missing,
    // so null matches); arrays of scalars or of arrays yield nothing at all.
    expect(
        &docs,
        bson!({"a.5.b": null}),
        &["objs", "obj-with-0", "obj0"],
    );
    expect(&docs, bson!({"a.01": 20}), &[]);
}

#[test]
fn odd_paths() {
    let docs = vec![
        bson!({"_id": "empty-key", "": 1}),
        bson!({"_id": "nested-empty", "a": {"": {"b": 1}}}),
        bson!({"_id": "trailing", "a": {"": 2}}),
        bson!({"_id": "dotted-key", "a.b": 3}),
    ];
    expect(&docs, bson!({"": 1}), &["empty-key"]);
    expect(&docs, bson!({"a..b": 1}), &["nested-empty"]);
    expect(&docs, bson!({"a.": 2}), &["trailing"]);
    // A field whose name contains a dot cannot be reached by a path.
    expect(&docs, bson!({"a.b": 3}), &[]);
}

#[test]
fn duplicate_fields_use_the_first() {
    let mut raw_doc = bson::RawDocumentBuf::new();
    raw_doc.append(bson::raw::cstr!("a"), 1);
    raw_doc.append(bson::raw::cstr!("a"), 2);
    let f1 = parse(&bson!({"a": 1})).unwrap();
    let f2 = parse(&bson!({"a": 2})).unwrap();
    assert!(f1.matches(&raw_doc));
    assert!(!f2.matches(&raw_doc));
}

#[test]
fn elem_match_versus_implicit() {
    let docs = vec![
        bson!({"_id": "same", "a": [{"b": 1, "c": 2}]}),
        bson!({"_id": "split", "a": [{"b": 1, "c": 3}, {"b": 0, "c": 2}]}),
        bson!({"_id": "nums", "a": [1, 6]}),
        bson!({"_id": "nested", "a": [[1, 2], [7]]}),
        bson!({"_id": "not-array", "a": {"b": 1, "c": 2}}),
    ];
    expect(
        &docs,
        bson!({"a.b": 1, "a.c": 2}),
        &["same", "split", "not-array"],
    );
    expect(
        &docs,
        bson!({"a": {"$elemMatch": {"b": 1, "c": 2}}}),
        &["same"],
    );
    expect(&docs, bson!({"a": {"$gt": 2, "$lt": 5}}), &["nums"]);
    expect(
        &docs,
        bson!({"a": {"$elemMatch": {"$gt": 2, "$lt": 5}}}),
        &[],
    );
    // Nested arrays: value form sees inner arrays whole; object form treats them as documents.
    expect(
        &docs,
        bson!({"a": {"$elemMatch": {"$elemMatch": {"$gt": 6}}}}),
        &["nested"],
    );
    expect(
        &docs,
        bson!({"a": {"$elemMatch": {"$size": 2}}}),
        &["nested"],
    );
    expect(&docs, bson!({"a": {"$elemMatch": {"0": 7}}}), &["nested"]);
    // Documents and arrays are never $gt a number, so their negation holds.
    expect(
        &docs,
        bson!({"a": {"$elemMatch": {"$not": {"$gt": 3}}}}),
        &["nums", "nested", "same", "split"],
    );
    expect(
        &docs,
        bson!({"a": {"$elemMatch": {"$in": [6]}, "$size": 2}}),
        &["nums"],
    );
    // $elemMatch on a path through an array of documents.
    let deep = vec![
        bson!({"_id": 1, "x": [{"y": [1, 5]}, {"y": [9]}]}),
        bson!({"_id": 2, "x": [{"y": 5}]}),
    ];
    expect(
        &deep,
        bson!({"x.y": {"$elemMatch": {"$gt": 4, "$lt": 6}}}),
        &["1"],
    );
    expect(&deep, bson!({"x.y": {"$size": 1}}), &["1"]);
    expect(&deep, bson!({"x.y": 5}), &["1", "2"]);
}

fn position(filter: Bson, doc: Bson) -> Option<usize> {
    parse(&filter).unwrap().matches_array_position(&raw(&doc))
}

#[test]
fn match_details_record_the_array_position() {
    let doc = bson!({"a": [{"b": 1}, {"b": 2}, {"b": 3}], "c": [7, 8], "n": 5});
    assert_eq!(position(bson!({"a.b": 2}), doc.clone()), Some(1));
    assert_eq!(position(bson!({"a.b": {"$gte": 2}}), doc.clone()), Some(1));
    assert_eq!(
        position(bson!({"a": {"$elemMatch": {"b": 3}}}), doc.clone()),
        Some(2)
    );
    assert_eq!(position(bson!({"c": 8}), doc.clone()), Some(1));
    // The last array predicate of the conjunction in MongoDB's canonical order (match type,
    // then path) wins, whatever the written order.
    assert_eq!(position(bson!({"a.b": 1, "c": 8}), doc.clone()), Some(1));
    assert_eq!(position(bson!({"c": 8, "a.b": 1}), doc.clone()), Some(1));
    assert_eq!(
        position(bson!({"c": {"$gt": 6}, "a.b": 1}), doc.clone()),
        Some(0)
    );
    // The manual's $ example: {activity_ids: 1, grades: 95, deans_list: 2021} takes grades'.
    assert_eq!(
        position(
            bson!({"activity_ids": 1, "grades": 95, "deans_list": 2021}),
            bson!({"activity_ids": [1, 2], "grades": [90, 95], "deans_list": [2021, 2020]})
        ),
        Some(1)
    );
    assert_eq!(position(bson!({"c": 8, "n": 5}), doc.clone()), Some(1));
    // Whole-array and scalar matches record nothing; neither do $or and negations.
    assert_eq!(position(bson!({"c": [7, 8]}), doc.clone()), None);
    assert_eq!(position(bson!({"n": 5}), doc.clone()), None);
    assert_eq!(position(bson!({"$or": [{"c": 8}]}), doc.clone()), None);
    assert_eq!(position(bson!({"c": {"$ne": 9}}), doc.clone()), None);
    // No match, no position.
    assert_eq!(position(bson!({"a.b": 9}), doc.clone()), None);
    // The outermost array's position: {a: [{b: [4, 5]}]} with "a.b": 5 is position 0 of a.
    assert_eq!(
        position(bson!({"a.b": 5}), bson!({"a": [{"b": [4]}, {"b": [4, 5]}]})),
        Some(1)
    );
    let f = parse(&bson!({"n": 5})).unwrap();
    assert_eq!(
        f.match_details(&raw(&doc)).map(|d| d.elem_match_key),
        Some(None)
    );
}

#[test]
fn id_equality_and_equality_fields() {
    let id = |f: Bson| parse(&f).unwrap().id_equality();
    assert_eq!(id(bson!({"_id": 5})), Some(bson::RawBson::Int32(5)));
    assert_eq!(
        id(bson!({"_id": {"$eq": "x"}})),
        Some(bson::RawBson::String("x".into()))
    );
    assert_eq!(
        id(bson!({"_id": 5, "$comment": "hi"})),
        Some(bson::RawBson::Int32(5))
    );
    assert_eq!(id(bson!({"_id": 5, "a": 1})), None);
    assert_eq!(id(bson!({"_id": {"$gt": 5}})), None);
    assert_eq!(id(bson!({"_id": (re("x", ""))})), None);
    assert_eq!(id(bson!({"_id": {"$in": [5]}})), None);
    assert_eq!(id(bson!({"a._id": 5})), None);

    let f = parse(&bson!({
        "a": 1,
        "b": {"$gt": 2},
        "$and": [{"c": 3}, {"d.e": {"$eq": 4}}, {"$and": [{"g": {"x": 1}}]}],
        "$or": [{"f": 5}],
        "h": {"$ne": 6}
    }))
    .unwrap();
    let fields: Vec<(String, String)> = f
        .equality_fields()
        .into_iter()
        .map(|(p, v)| {
            (
                p.to_string(),
                cairn_query::storage::display::value(v.as_raw_bson_ref()),
            )
        })
        .collect();
    assert_eq!(
        fields,
        vec![
            ("a".into(), "1".into()),
            ("c".into(), "3".into()),
            ("d.e".into(), "4".into()),
            ("g".into(), "{ x: 1 }".into()),
        ]
    );
}

#[test]
fn tree_shape() {
    assert!(parse(&bson!({})).unwrap().is_empty());
    assert!(parse(&bson!({"$comment": "x"})).unwrap().is_empty());
    assert!(!parse(&bson!({"a": 1})).unwrap().is_empty());
    let f = parse(&bson!({"a": {"$ne": 1}})).unwrap();
    match f.expr() {
        Expr::Not(inner) => match inner.as_ref() {
            Expr::Path(PathExpr {
                path,
                pred: Predicate::Cmp(CmpOp::Eq, _),
            }) => {
                assert_eq!(path.as_str(), "a")
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    let f = parse(&bson!({"a": {"$in": [3, 1, 2, 1.0]}})).unwrap();
    match f.expr() {
        Expr::Path(PathExpr {
            pred: Predicate::In(list),
            ..
        }) => {
            let vals: Vec<_> = list.values().map(|v| v.as_i32()).collect();
            assert_eq!(vals, vec![Some(1), Some(2), Some(3)]);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(parse(&bson!({"a": 1, "b": 2})).unwrap().expr(), Expr::And(c) if c.len() == 2)
    );
    assert!(matches!(
        parse(&bson!({"a": {"$all": []}})).unwrap().expr(),
        Expr::AlwaysFalse
    ));
    assert!(matches!(
        parse(&bson!({"$alwaysTrue": 1})).unwrap().expr(),
        Expr::AlwaysTrue
    ));
    assert!(matches!(
        parse(&bson!({"a": {"$elemMatch": {"$gt": 1}}}))
            .unwrap()
            .expr(),
        Expr::Path(PathExpr {
            pred: Predicate::ElemMatchValue(_),
            ..
        })
    ));
    let everything = vec![bson!({"_id": 1}), bson!({"_id": 2, "a": 1})];
    expect(&everything, bson!({"$alwaysTrue": 1}), &["1", "2"]);
    expect(&everything, bson!({"$alwaysFalse": 1}), &[]);
    expect(&everything, bson!({"$alwaysFalse": 1.0, "a": 1}), &[]);
}

/// A stand-in for the `$expr` evaluator: matches documents whose field `flag` is true.
#[derive(Debug)]
struct FlagIsTrue;

impl DocumentPredicate for FlagIsTrue {
    fn matches(&self, doc: &RawDocument) -> bool {
        matches!(doc.get("flag"), Ok(Some(RawBsonRef::Boolean(true))))
    }
}

struct TestExtensions;

impl Extensions for TestExtensions {
    fn parse(
        &self,
        kind: ExtensionKind,
        operand: RawBsonRef<'_>,
    ) -> Result<Arc<dyn DocumentPredicate>> {
        match (kind, operand) {
            (ExtensionKind::Expr, RawBsonRef::String("$flag")) => Ok(Arc::new(FlagIsTrue)),
            _ => Err(QueryError::Location(168, "Unrecognized expression".into())),
        }
    }
}

#[test]
fn extensions_plug_in() {
    let parse_ext = |f: Bson| Filter::parse_with(&raw(&f), &TestExtensions);
    let f = parse_ext(bson!({"$expr": "$flag", "a": 1})).unwrap();
    assert!(f.matches(&raw(&bson!({"a": 1, "flag": true}))));
    assert!(!f.matches(&raw(&bson!({"a": 1, "flag": false}))));
    let f = parse_ext(bson!({"$or": [{"$expr": "$flag"}, {"a": 2}]})).unwrap();
    assert!(f.matches(&raw(&bson!({"a": 2}))));
    assert!(matches!(
        parse_ext(bson!({"$expr": 1})),
        Err(QueryError::Location(168, _))
    ));
    // Still refused below the top level, before the extension is asked.
    assert!(matches!(
        parse_ext(bson!({"a": {"$elemMatch": {"$expr": "$flag"}}})),
        Err(QueryError::BadValue(_))
    ));
    assert!(matches!(
        parse_ext(bson!({"$where": "1"})),
        Err(QueryError::Location(168, _))
    ));
}

#[test]
fn regex_values_and_unicode() {
    let docs = docs_v(vec![
        ("accent", s("Élan")),
        ("plain", s("elan")),
        ("digits", s("١٢٣")),
        ("ascii-digits", s("123")),
        ("multi", s("line1\nline2")),
    ]);
    expect(&docs, bson!({"v": (re("^élan$", "i"))}), &["accent"]);
    expect(&docs, bson!({"v": (re("^\\d+$", ""))}), &["ascii-digits"]);
    expect(&docs, bson!({"v": (re("^line2$", ""))}), &[]);
    expect(&docs, bson!({"v": (re("^line2$", "m"))}), &["multi"]);
    expect(&docs, bson!({"v": (re("line1$", ""))}), &[]);
    expect(&docs, bson!({"v": (re("(?<=line)1", ""))}), &["multi"]);
    expect(&docs, bson!({"v": (re("(l)ine\\d\\n\\1", ""))}), &["multi"]);
}

#[test]
fn bits_on_binary_and_decimals() {
    let docs = docs_v(vec![
        ("bin", bin(0, &[0b0000_0001, 0b1000_0000])),
        ("empty-bin", bin(0, &[])),
        ("dec", dec("6")),
        ("dec-frac", dec("6.5")),
        ("long", l(1 << 40)),
    ]);
    expect(&docs, bson!({"v": {"$bitsAllSet": [0, 15]}}), &["bin"]);
    expect(&docs, bson!({"v": {"$bitsAnySet": [40]}}), &["long"]);
    expect(
        &docs,
        bson!({"v": {"$bitsAllClear": [100]}}),
        &["bin", "empty-bin", "dec", "dec-frac", "long"],
    );
    expect(
        &docs,
        bson!({"v": {"$bitsAllSet": [1, 2]}}),
        &["dec", "dec-frac"],
    );
    expect(
        &docs,
        bson!({"v": {"$bitsAnyClear": (bin(0, &[0, 0x80]))}}),
        &["empty-bin", "dec", "dec-frac", "long"],
    );
    expect(
        &docs,
        bson!({"v": {"$bitsAllSet": []}}),
        &["bin", "empty-bin", "dec", "dec-frac", "long"],
    );
    expect(&docs, bson!({"v": {"$bitsAnySet": []}}), &[]);
}

#[test]
fn mod_edge_values() {
    let docs = docs_v(vec![
        ("min", l(i64::MIN)),
        ("dec", dec("10.9")),
        ("dec-neg", dec("-10.9")),
        ("inf", f(f64::INFINITY)),
        ("str", s("10")),
    ]);
    expect(
        &docs,
        bson!({"v": {"$mod": [-1, 0]}}),
        &["min", "dec", "dec-neg"],
    );
    expect(&docs, bson!({"v": {"$mod": [3, 1]}}), &["dec"]);
    expect(&docs, bson!({"v": {"$mod": [3, -1]}}), &["dec-neg"]);
    expect(
        &docs,
        bson!({"v": {"$mod": [(dec("3.7")), (dec("1.2"))]}}),
        &["dec"],
    );
}

#[test]
fn type_matches() {
    let docs = docs_v(vec![
        ("undef", Bson::Undefined),
        ("null", null()),
        ("dec", dec("1")),
        ("arr", a(vec![s("x")])),
        ("empty", a(vec![])),
        ("obj", d(vec![])),
        ("ts", ts(1, 1)),
    ]);
    expect(&docs, bson!({"v": {"$type": "undefined"}}), &["undef"]);
    expect(&docs, bson!({"v": {"$type": "null"}}), &["null"]);
    expect(&docs, bson!({"v": {"$type": "decimal"}}), &["dec"]);
    expect(&docs, bson!({"v": {"$type": "number"}}), &["dec"]);
    expect(&docs, bson!({"v": {"$type": "string"}}), &["arr"]);
    expect(&docs, bson!({"v": {"$type": "array"}}), &["arr", "empty"]);
    expect(&docs, bson!({"v": {"$type": "object"}}), &["obj"]);
    expect(
        &docs,
        bson!({"v": {"$type": ["timestamp", 3]}}),
        &["ts", "obj"],
    );
    expect(&docs, bson!({"v": null}), &["undef", "null"]);
}

#[test]
fn filters_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + Clone + std::fmt::Debug>() {}
    assert_send_sync::<Filter>();
    assert_send_sync::<Expr>();
}
