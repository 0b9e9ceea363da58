//! Index bounds: filters × indexes → explain strings (MongoDB's `indexBounds` format),
//! exactness, byte ranges, and index-provided sorts.

use std::ops::Bound;

use bson::{RawDocumentBuf, rawdoc};
use cairn_query::filter::Filter;
use cairn_query::index::bounds::{KeyRange, MAX_RANGES, implies, index_sort_direction};
use cairn_query::index::{IndexBounds, bounds_for, bounds_for_index};
use cairn_query::sort::SortSpec;
use cairn_storage::display;
use cairn_storage::index::{IndexMeta, IndexState};
use cairn_storage::keys::encode_value;

fn fields(spec: &[(&str, bool)]) -> Vec<(String, bool)> {
    spec.iter().map(|(p, d)| (p.to_string(), *d)).collect()
}

fn bounds(filter: RawDocumentBuf, f: &[(&str, bool)], multikey: bool) -> IndexBounds {
    let parsed = Filter::parse(&filter).unwrap();
    bounds_for(parsed.expr(), &fields(f), multikey)
}

fn explain(filter: RawDocumentBuf, f: &[(&str, bool)], multikey: bool) -> String {
    display::document(&bounds(filter, f, multikey).explain())
}

#[test]
fn single_field_explain() {
    let a = &[("a", false)];
    let d = |ms: i64| bson::DateTime::from_millis(ms);
    let cases: Vec<(RawDocumentBuf, &str)> = vec![
        (rawdoc! {"a": 5}, r#"{ a: [ "[5, 5]" ] }"#),
        (rawdoc! {"a": 5.5}, r#"{ a: [ "[5.5, 5.5]" ] }"#),
        (rawdoc! {"a": {"$gt": 5}}, r#"{ a: [ "(5, inf.0]" ] }"#),
        (rawdoc! {"a": {"$gte": 5}}, r#"{ a: [ "[5, inf.0]" ] }"#),
        (rawdoc! {"a": {"$lt": 5}}, r#"{ a: [ "[-inf.0, 5)" ] }"#),
        (rawdoc! {"a": {"$lte": 5}}, r#"{ a: [ "[-inf.0, 5]" ] }"#),
        (
            rawdoc! {"a": {"$gt": 5, "$lt": 10}},
            r#"{ a: [ "(5, 10)" ] }"#,
        ),
        (rawdoc! {"a": {"$gt": 10, "$lt": 5}}, r#"{ a: [] }"#),
        (rawdoc! {"a": {"$lt": "b"}}, r#"{ a: [ "["", "b")" ] }"#),
        (rawdoc! {"a": {"$gt": "b"}}, r#"{ a: [ "("b", {})" ] }"#),
        (
            rawdoc! {"a": {"$in": [3, 1, "x", 2]}},
            r#"{ a: [ "[1, 1]", "[2, 2]", "[3, 3]", "["x", "x"]" ] }"#,
        ),
        (
            rawdoc! {"a": null},
            r#"{ a: [ "[undefined, undefined]", "[null, null]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$gte": null}},
            r#"{ a: [ "[undefined, undefined]", "[null, null]" ] }"#,
        ),
        (rawdoc! {"a": {"$lt": null}}, r#"{ a: [] }"#),
        (
            rawdoc! {"a": {"$exists": true}},
            r#"{ a: [ "[MinKey, MaxKey]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$exists": false}},
            r#"{ a: [ "[null, null]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$regex": "^abc"}},
            r#"{ a: [ "["abc", "abd")", "[/^abc/, /^abc/]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$regex": "^ab.c"}},
            r#"{ a: [ "["ab", "ac")", "[/^ab.c/, /^ab.c/]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$regex": "abc"}},
            r#"{ a: [ "["", {})", "[/abc/, /abc/]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$regex": "^abc", "$options": "i"}},
            r#"{ a: [ "["", {})", "[/^abc/i, /^abc/i]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$ne": 5}},
            r#"{ a: [ "[MinKey, 5)", "(5, MaxKey]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$ne": null}},
            r#"{ a: [ "[MinKey, undefined)", "(undefined, null)", "(null, MaxKey]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$nin": [1, 2]}},
            r#"{ a: [ "[MinKey, 1)", "(1, 2)", "(2, MaxKey]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$not": {"$gt": 5}}},
            r#"{ a: [ "[MinKey, 5]", "(inf.0, MaxKey]" ] }"#,
        ),
        (
            rawdoc! {"a": [1, 2]},
            r#"{ a: [ "[1, 1]", "[[ 1, 2 ], [ 1, 2 ]]" ] }"#,
        ),
        (
            rawdoc! {"a": []},
            r#"{ a: [ "[undefined, undefined]", "[[], []]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$gt": d(5)}},
            r#"{ a: [ "(new Date(5), new Date(9223372036854775807)]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$lt": true}},
            r#"{ a: [ "[false, true)" ] }"#,
        ),
        (
            rawdoc! {"a": {"$gt": {"b": 1}}},
            r#"{ a: [ "({ b: 1 }, [])" ] }"#,
        ),
        (rawdoc! {"a": {"$gt": [1]}}, r#"{ a: [ "[1, MaxKey]" ] }"#),
        (
            rawdoc! {"a": {"$lt": [5]}},
            r#"{ a: [ "[MinKey, [ 5 ]]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$type": "string"}},
            r#"{ a: [ "["", {})" ] }"#,
        ),
        (
            rawdoc! {"a": {"$type": "number"}},
            r#"{ a: [ "[nan.0, inf.0]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$mod": [2, 0]}},
            r#"{ a: [ "[nan.0, inf.0]" ] }"#,
        ),
        (rawdoc! {"a": {"$lt": f64::NAN}}, r#"{ a: [] }"#),
        (
            rawdoc! {"a": {"$gte": f64::NAN}},
            r#"{ a: [ "[nan.0, nan.0]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$gt": bson::RawBson::MinKey}},
            r#"{ a: [ "(MinKey, MaxKey]" ] }"#,
        ),
        (
            rawdoc! {"a": {"$lt": bson::RawBson::MaxKey}},
            r#"{ a: [ "[MinKey, MaxKey)" ] }"#,
        ),
        (
            rawdoc! {"$or": [{"a": 1}, {"a": {"$gt": 10}}]},
            r#"{ a: [ "[1, 1]", "(10, inf.0]" ] }"#,
        ),
        (rawdoc! {"$alwaysFalse": 1}, r#"{ a: [] }"#),
        (rawdoc! {"b": 1}, r#"{ a: [ "[MinKey, MaxKey]" ] }"#),
        (
            rawdoc! {"a": {"$size": 1}},
            r#"{ a: [ "[MinKey, MaxKey]" ] }"#,
        ),
        (
            rawdoc! {"$and": [{"a": {"$gte": 1}}, {"a": {"$lte": 3}}]},
            r#"{ a: [ "[1, 3]" ] }"#,
        ),
    ];
    for (filter, want) in cases {
        assert_eq!(explain(filter.clone(), a, false), want, "{filter:?}");
    }
}

#[test]
fn descending_compound_and_multikey_explain() {
    assert_eq!(
        explain(rawdoc! {"a": {"$gt": 5}}, &[("a", true)], false),
        r#"{ a: [ "[inf.0, 5)" ] }"#
    );
    assert_eq!(
        explain(rawdoc! {"a": {"$in": [1, 2]}}, &[("a", true)], false),
        r#"{ a: [ "[2, 2]", "[1, 1]" ] }"#
    );
    assert_eq!(
        explain(
            rawdoc! {"a": 1, "b": {"$gt": 2}},
            &[("a", false), ("b", true)],
            false
        ),
        r#"{ a: [ "[1, 1]" ], b: [ "[inf.0, 2)" ] }"#
    );
    // Multikey: no intersection; the first predicate wins.
    assert_eq!(
        explain(rawdoc! {"a": {"$gt": 1, "$lt": 5}}, &[("a", false)], true),
        r#"{ a: [ "(1, inf.0]" ] }"#
    );
    // $elemMatch always intersects.
    assert_eq!(
        explain(
            rawdoc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}},
            &[("a", false)],
            true
        ),
        r#"{ a: [ "(1, 5)" ] }"#
    );
    // Fields under one array: only the first is bounded.
    assert_eq!(
        explain(
            rawdoc! {"a.b": 1, "a.c": 2},
            &[("a.b", false), ("a.c", false)],
            true
        ),
        r#"{ a.b: [ "[1, 1]" ], a.c: [ "[MinKey, MaxKey]" ] }"#
    );
    assert_eq!(
        explain(
            rawdoc! {"a": 1, "b": 2},
            &[("a", false), ("b", false)],
            true
        ),
        r#"{ a: [ "[1, 1]" ], b: [ "[2, 2]" ] }"#
    );
    // $elemMatch objects lend their predicates to dotted fields.
    assert_eq!(
        explain(
            rawdoc! {"a": {"$elemMatch": {"b": {"$gte": 3}, "c": null}}},
            &[("a.b", false)],
            true
        ),
        r#"{ a.b: [ "[3, inf.0]" ] }"#
    );
    // Negations on multikey indexes: not when null or undefined is involved.
    assert_eq!(
        explain(rawdoc! {"a": {"$ne": null}}, &[("a", false)], true),
        r#"{ a: [ "[MinKey, MaxKey]" ] }"#
    );
    assert_eq!(
        explain(rawdoc! {"a": {"$ne": 3}}, &[("a", false)], true),
        r#"{ a: [ "[MinKey, 3)", "(3, MaxKey]" ] }"#
    );
    assert_eq!(
        explain(
            rawdoc! {"a": {"$gt": bson::RawBson::MinKey}},
            &[("a", false)],
            true
        ),
        r#"{ a: [ "[MinKey, MaxKey]" ] }"#
    );
}

fn meta(spec: RawDocumentBuf, multikey: bool) -> IndexMeta {
    IndexMeta {
        name: spec.get_str("name").unwrap().to_string(),
        spec,
        space: 3,
        state: IndexState::Ready,
        multikey,
    }
}

#[test]
fn hashed_sparse_partial() {
    let h = meta(rawdoc! {"v": 2, "key": {"a": "hashed"}, "name": "h"}, false);
    let f = Filter::parse(&rawdoc! {"a": {"$in": [1, 1.0, 2]}}).unwrap();
    let b = bounds_for_index(f.expr(), &h).unwrap();
    let one = cairn_query::index::hashed_value(bson::RawBsonRef::Int32(1));
    let two = cairn_query::index::hashed_value(bson::RawBsonRef::Int32(2));
    let mut want = [one, two];
    want.sort();
    assert_eq!(
        display::document(&b.explain()),
        format!(
            r#"{{ a: [ "[{0}, {0}]", "[{1}, {1}]" ] }}"#,
            want[0], want[1]
        )
    );
    assert!(!b.is_exact_for(f.expr()));
    let gt = Filter::parse(&rawdoc! {"a": {"$gt": 1}}).unwrap();
    assert_eq!(
        display::document(&bounds_for_index(gt.expr(), &h).unwrap().explain()),
        r#"{ a: [ "[MinKey, MaxKey]" ] }"#
    );

    let s = meta(
        rawdoc! {"v": 2, "key": {"a": 1}, "name": "s", "sparse": true},
        false,
    );
    for (filter, usable) in [
        (rawdoc! {"a": 1}, true),
        (rawdoc! {"a": {"$gt": 1}}, true),
        (rawdoc! {"a": {"$exists": true}}, true),
        (rawdoc! {"a": null}, false),
        (rawdoc! {"a": {"$in": [1, null]}}, false),
        (rawdoc! {"a": {"$ne": 1}}, false),
        (rawdoc! {"a": {"$exists": false}}, false),
        (rawdoc! {"b": 1}, false),
        (rawdoc! {}, false),
    ] {
        let f = Filter::parse(&filter).unwrap();
        assert_eq!(
            bounds_for_index(f.expr(), &s).is_some(),
            usable,
            "{filter:?}"
        );
    }

    let p = meta(
        rawdoc! {"v": 2, "key": {"a": 1}, "name": "p",
        "partialFilterExpression": {"a": {"$gt": 5}, "b": {"$exists": true}}},
        false,
    );
    for (filter, usable) in [
        (rawdoc! {"a": 7, "b": 1}, true),
        (rawdoc! {"a": {"$gt": 6}, "b": "x"}, true),
        (rawdoc! {"a": {"$gte": 5}, "b": "x"}, false),
        (rawdoc! {"a": 7}, false),
        (rawdoc! {"a": 7, "b": null}, false),
        (rawdoc! {"a": {"$in": [6, 7]}, "b": {"$gt": 0}}, true),
        (rawdoc! {"a": {"$in": [5, 7]}, "b": {"$gt": 0}}, false),
        (rawdoc! {"a": "x", "b": 1}, false),
    ] {
        let f = Filter::parse(&filter).unwrap();
        assert_eq!(
            bounds_for_index(f.expr(), &p).is_some(),
            usable,
            "{filter:?}"
        );
    }
    let q = Filter::parse(&rawdoc! {"$or": [{"a": 1}, {"a": 2}]}).unwrap();
    let pf = Filter::parse(&rawdoc! {"a": {"$lte": 2}}).unwrap();
    assert!(implies(q.expr(), pf.expr()));
}

#[test]
fn exactness() {
    let a = &[("a", false)];
    let ab = &[("a", false), ("b", false)];
    type Case<'a> = (RawDocumentBuf, &'a [(&'a str, bool)], bool, bool);
    let cases: Vec<Case> = vec![
        (rawdoc! {"a": 5}, a, false, true),
        (rawdoc! {}, a, false, true),
        (rawdoc! {"a": {"$gt": 5, "$lte": 9}}, a, false, true),
        (rawdoc! {"a": {"$in": [1, 2]}}, a, false, true),
        (rawdoc! {"a": {"$ne": 5}}, a, false, true),
        (rawdoc! {"a": {"$ne": null}}, a, false, true),
        (rawdoc! {"a": {"$regex": "^abc"}}, a, false, true),
        (rawdoc! {"a": {"$regex": "^abc."}}, a, false, false),
        (rawdoc! {"a": {"$regex": "abc"}}, a, false, false),
        (rawdoc! {"a": null}, a, false, false),
        (rawdoc! {"a": {"$exists": true}}, a, false, false),
        (rawdoc! {"a": [1]}, a, false, false),
        (rawdoc! {"a": {"b": 1}}, a, false, false),
        (rawdoc! {"a": 5}, a, true, false),
        (rawdoc! {"a": 5, "b": 1}, a, false, false),
        (rawdoc! {"a": 1, "b": {"$gt": 5}}, ab, false, true),
        (rawdoc! {"a": {"$in": [1, 2]}, "b": 3}, ab, false, true),
        (rawdoc! {"a": {"$gt": 1}, "b": 5}, ab, false, false),
        (rawdoc! {"a": {"$gt": 1}}, ab, false, true),
        (rawdoc! {"$alwaysFalse": 1}, a, true, true),
    ];
    for (filter, f, multikey, want) in cases {
        let parsed = Filter::parse(&filter).unwrap();
        let b = bounds_for(parsed.expr(), &fields(f), multikey);
        assert_eq!(
            b.is_exact_for(parsed.expr()),
            want,
            "{filter:?} {f:?} {multikey}"
        );
        assert_eq!(
            b.ranges_and_exactness(),
            (b.key_ranges(), want),
            "{filter:?} {f:?} {multikey}"
        );
    }
}

fn enc(v: bson::RawBsonRef<'_>, desc: bool) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(&mut out, v, desc).unwrap();
    out
}

fn in_range(r: &KeyRange, key: &[u8]) -> bool {
    let lo = match &r.0 {
        Bound::Included(l) => key >= l.as_slice(),
        Bound::Excluded(l) => key > l.as_slice(),
        Bound::Unbounded => true,
    };
    let hi = match &r.1 {
        Bound::Included(h) => key <= h.as_slice(),
        Bound::Excluded(h) => key < h.as_slice(),
        Bound::Unbounded => true,
    };
    lo && hi
}

#[test]
fn key_ranges_shapes() {
    use bson::RawBsonRef as R;
    let id = enc(R::Int32(77), false);
    // A point: one range holding exactly the keys with that first component.
    let b = bounds(rawdoc! {"a": 5}, &[("a", false)], false);
    let r = b.key_ranges();
    assert_eq!(r.len(), 1);
    let k5 = [enc(R::Int32(5), false), id.clone()].concat();
    let k6 = [enc(R::Int32(6), false), id.clone()].concat();
    let k5d = [enc(R::Double(5.0), false), id.clone()].concat();
    assert!(in_range(&r[0], &k5) && in_range(&r[0], &k5d) && !in_range(&r[0], &k6));
    // Descending: (5, inf] becomes one byte range over inverted encodings.
    let b = bounds(rawdoc! {"a": {"$gt": 5}}, &[("a", true)], false);
    let r = b.key_ranges();
    assert_eq!(r.len(), 1);
    assert!(in_range(
        &r[0],
        &[enc(R::Int32(6), true), id.clone()].concat()
    ));
    assert!(in_range(
        &r[0],
        &[enc(R::Double(f64::INFINITY), true), id.clone()].concat()
    ));
    assert!(!in_range(
        &r[0],
        &[enc(R::Int32(5), true), id.clone()].concat()
    ));
    assert!(!in_range(
        &r[0],
        &[enc(R::String("x"), true), id.clone()].concat()
    ));
    // Compound: points × range.
    let b = bounds(
        rawdoc! {"a": {"$in": [1, 2]}, "b": {"$lt": 3}},
        &[("a", false), ("b", false)],
        false,
    );
    let r = b.key_ranges();
    assert_eq!(r.len(), 2);
    let key =
        |a: i32, b: i32| [enc(R::Int32(a), false), enc(R::Int32(b), false), id.clone()].concat();
    assert!(r.iter().any(|x| in_range(x, &key(1, 2))));
    assert!(r.iter().any(|x| in_range(x, &key(2, -5))));
    assert!(!r.iter().any(|x| in_range(x, &key(2, 3))));
    assert!(!r.iter().any(|x| in_range(x, &key(3, 0))));
    // Open: everything.
    let b = bounds(rawdoc! {}, &[("a", false)], false);
    assert_eq!(b.key_ranges(), vec![(Bound::Unbounded, Bound::Unbounded)]);
    // Nothing.
    let b = bounds(rawdoc! {"a": {"$in": []}}, &[("a", false)], false);
    assert!(b.key_ranges().is_empty());
    // Adjacent ranges merge: [1, 2) and [2, 3] are one.
    let b = bounds(
        rawdoc! {"$or": [{"a": {"$gte": 1, "$lt": 2}}, {"a": {"$gte": 2, "$lte": 3}}]},
        &[("a", false)],
        false,
    );
    assert_eq!(b.key_ranges().len(), 1);
}

#[test]
fn range_cap_widens_soundly() {
    use bson::RawBsonRef as R;
    let mut arr = bson::RawArrayBuf::new();
    for i in 0..5000 {
        arr.push(i * 2);
    }
    let mut inner = RawDocumentBuf::new();
    inner.append(bson::raw::cstr!("$in"), arr);
    let mut filter = RawDocumentBuf::new();
    filter.append(bson::raw::cstr!("a"), inner);
    let parsed = Filter::parse(&filter).unwrap();
    let b = bounds_for(parsed.expr(), &fields(&[("a", false), ("b", false)]), false);
    let r = b.key_ranges();
    assert!(r.len() <= MAX_RANGES, "{}", r.len());
    for i in [0, 2, 1234, 9998] {
        let k = [enc(R::Int32(i), false), enc(R::Null, false)].concat();
        assert!(r.iter().any(|x| in_range(x, &k)), "{i}");
    }
    assert!(!b.is_exact_for(parsed.expr()));
    // Within the cap, exact.
    let small = Filter::parse(&rawdoc! {"a": {"$in": [1, 3]}}).unwrap();
    let b = bounds_for(small.expr(), &fields(&[("a", false)]), false);
    assert_eq!(b.key_ranges().len(), 2);
    assert!(b.is_exact_for(small.expr()));
}

#[test]
fn contains_values_and_sort() {
    let b = bounds(
        rawdoc! {"a": {"$gt": 1}, "b": 5},
        &[("a", false), ("b", false)],
        false,
    );
    assert!(b.contains_values(&rawdoc! {"0": 2, "1": 5}));
    assert!(!b.contains_values(&rawdoc! {"0": 2, "1": 6}));
    assert!(!b.contains_values(&rawdoc! {"0": 1, "1": 5}));

    let sort = |s: RawDocumentBuf| SortSpec::parse(&s).unwrap();
    let b = bounds(
        rawdoc! {"a": 1},
        &[("a", false), ("b", true), ("c", false)],
        false,
    );
    let fields_of = |s: &SortSpec| s.fields().to_vec();
    assert_eq!(
        index_sort_direction(&b, &fields_of(&sort(rawdoc! {"b": -1}))),
        Some(false)
    );
    assert_eq!(
        index_sort_direction(&b, &fields_of(&sort(rawdoc! {"b": 1, "c": -1}))),
        Some(true)
    );
    assert_eq!(
        index_sort_direction(&b, &fields_of(&sort(rawdoc! {"b": 1, "c": 1}))),
        None
    );
    assert_eq!(
        index_sort_direction(&b, &fields_of(&sort(rawdoc! {"c": 1}))),
        None
    );
    assert_eq!(
        index_sort_direction(&b, &fields_of(&sort(rawdoc! {"a": -1, "b": 1}))),
        Some(true)
    );
    let multi = bounds(rawdoc! {}, &[("a", false)], true);
    assert_eq!(
        index_sort_direction(&multi, &fields_of(&sort(rawdoc! {"a": 1}))),
        None
    );
}
