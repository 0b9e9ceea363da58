//! MongoDB's jstests/core/null_query_semantics.js (pre-8.0 version: `null` also matches
//! `undefined`), ported: every query and its expected `_id`s, on the same documents.

mod common;

use bson::Bson;
use common::*;

fn undef() -> Bson {
    Bson::Undefined
}

fn doc(id: &str, a: Option<Bson>) -> Bson {
    match a {
        Some(v) => d(vec![("_id", s(id)), ("a", v)]),
        None => d(vec![("_id", s(id))]),
    }
}

/// The first batch: no arrays.
fn scalar_docs() -> Vec<Bson> {
    vec![
        doc("a_empty_subobject", Some(d(vec![]))),
        doc("a_null", Some(null())),
        doc("a_number", Some(i(4))),
        doc("a_subobject_b_not_null", Some(d(vec![("b", s("hi"))]))),
        doc("a_subobject_b_null", Some(d(vec![("b", null())]))),
        doc("a_subobject_b_undefined", Some(d(vec![("b", undef())]))),
        doc("a_undefined", Some(undef())),
        doc("no_a", None),
    ]
}

/// The second batch: arrays.
fn array_docs() -> Vec<Bson> {
    vec![
        doc("a_double_array", Some(a(vec![a(vec![])]))),
        doc("a_empty_array", Some(a(vec![]))),
        doc(
            "a_object_array_all_b_nulls",
            Some(a(vec![
                d(vec![("b", null())]),
                d(vec![("b", undef())]),
                d(vec![("b", null())]),
                d(vec![]),
            ])),
        ),
        doc(
            "a_object_array_no_b_nulls",
            Some(a(vec![
                d(vec![("b", i(1))]),
                d(vec![("b", i(3))]),
                d(vec![("b", s("string"))]),
            ])),
        ),
        doc(
            "a_object_array_some_b_nulls",
            Some(a(vec![
                d(vec![("b", null())]),
                d(vec![("b", i(3))]),
                d(vec![("b", null())]),
            ])),
        ),
        doc(
            "a_object_array_some_b_undefined",
            Some(a(vec![d(vec![("b", undef())]), d(vec![("b", i(3))])])),
        ),
        doc(
            "a_object_array_some_b_missing",
            Some(a(vec![d(vec![("b", i(3))]), d(vec![])])),
        ),
        doc("a_value_array_all_nulls", Some(a(vec![null(), null()]))),
        doc(
            "a_value_array_no_nulls",
            Some(a(vec![i(1), s("string"), i(4)])),
        ),
        doc(
            "a_value_array_with_null",
            Some(a(vec![i(1), s("string"), null(), i(4)])),
        ),
        doc(
            "a_value_array_with_undefined",
            Some(a(vec![i(1), s("string"), undef(), i(4)])),
        ),
    ]
}

fn check(docs: &[Bson], filter: Bson, want: &[&str]) {
    let raws: Vec<_> = docs.iter().map(raw).collect();
    let f = parse(&filter).unwrap_or_else(|e| panic!("{filter}: {e:?}"));
    let got = select(&f, &raws);
    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(got, want, "filter {filter}");
}

#[test]
fn without_arrays() {
    let docs = scalar_docs();
    check(
        &docs,
        d(vec![("a", d(vec![("$eq", null())]))]),
        &["a_null", "a_undefined", "no_a"],
    );
    check(
        &docs,
        d(vec![("a", d(vec![("$ne", null())]))]),
        &[
            "a_empty_subobject",
            "a_number",
            "a_subobject_b_not_null",
            "a_subobject_b_null",
            "a_subobject_b_undefined",
        ],
    );
    check(
        &docs,
        d(vec![("a", d(vec![("$in", a(vec![null(), i(4)]))]))]),
        &["a_null", "a_number", "a_undefined", "no_a"],
    );
    check(
        &docs,
        d(vec![(
            "$or",
            a(vec![d(vec![("a", null())]), d(vec![("a", i(4))])]),
        )]),
        &["a_null", "a_number", "a_undefined", "no_a"],
    );
    check(
        &docs,
        d(vec![("a", d(vec![("$nin", a(vec![null(), i(4)]))]))]),
        &[
            "a_empty_subobject",
            "a_subobject_b_not_null",
            "a_subobject_b_null",
            "a_subobject_b_undefined",
        ],
    );
    check(
        &docs,
        d(vec![(
            "a",
            d(vec![("$nin", a(vec![null(), re("^hi.*", "")]))]),
        )]),
        &[
            "a_empty_subobject",
            "a_number",
            "a_subobject_b_not_null",
            "a_subobject_b_null",
            "a_subobject_b_undefined",
        ],
    );
    check(
        &docs,
        d(vec![("a", d(vec![("$exists", b(false))]))]),
        &["no_a"],
    );
    check(
        &docs,
        d(vec![("a.b", d(vec![("$eq", null())]))]),
        &[
            "a_empty_subobject",
            "a_null",
            "a_number",
            "a_subobject_b_null",
            "a_subobject_b_undefined",
            "a_undefined",
            "no_a",
        ],
    );
    check(
        &docs,
        d(vec![("a.b", d(vec![("$ne", null())]))]),
        &["a_subobject_b_not_null"],
    );
    check(
        &docs,
        d(vec![("a.b", d(vec![("$exists", b(false))]))]),
        &[
            "no_a",
            "a_empty_subobject",
            "a_null",
            "a_number",
            "a_undefined",
        ],
    );
    for q in [
        d(vec![(
            "a",
            d(vec![("$elemMatch", d(vec![("$eq", null())]))]),
        )]),
        d(vec![(
            "a",
            d(vec![("$elemMatch", d(vec![("$ne", null())]))]),
        )]),
        d(vec![(
            "a.b",
            d(vec![("$elemMatch", d(vec![("$eq", null())]))]),
        )]),
        d(vec![(
            "a.b",
            d(vec![("$elemMatch", d(vec![("$ne", null())]))]),
        )]),
        d(vec![(
            "a",
            d(vec![(
                "$elemMatch",
                d(vec![("b", d(vec![("$eq", null())]))]),
            )]),
        )]),
        d(vec![(
            "a",
            d(vec![(
                "$elemMatch",
                d(vec![("b", d(vec![("$ne", null())]))]),
            )]),
        )]),
    ] {
        check(&docs, q, &[]);
    }
}

#[test]
fn with_arrays() {
    let mut docs = scalar_docs();
    docs.extend(array_docs());
    check(
        &docs,
        d(vec![("a", d(vec![("$eq", null())]))]),
        &[
            "a_null",
            "a_undefined",
            "a_value_array_all_nulls",
            "a_value_array_with_null",
            "a_value_array_with_undefined",
            "no_a",
        ],
    );
    let not_null = [
        "a_double_array",
        "a_empty_array",
        "a_empty_subobject",
        "a_number",
        "a_object_array_all_b_nulls",
        "a_object_array_no_b_nulls",
        "a_object_array_some_b_nulls",
        "a_object_array_some_b_undefined",
        "a_object_array_some_b_missing",
        "a_subobject_b_not_null",
        "a_subobject_b_null",
        "a_subobject_b_undefined",
        "a_value_array_no_nulls",
    ];
    check(&docs, d(vec![("a", d(vec![("$ne", null())]))]), &not_null);
    check(
        &docs,
        d(vec![("a", d(vec![("$not", d(vec![("$gte", null())]))]))]),
        &not_null,
    );
    let null_or_75 = [
        "a_null",
        "a_undefined",
        "no_a",
        "a_value_array_all_nulls",
        "a_value_array_with_null",
        "a_value_array_with_undefined",
    ];
    check(
        &docs,
        d(vec![("a", d(vec![("$in", a(vec![null(), i(75)]))]))]),
        &null_or_75,
    );
    check(
        &docs,
        d(vec![(
            "$or",
            a(vec![d(vec![("a", null())]), d(vec![("a", i(75))])]),
        )]),
        &null_or_75,
    );
    check(
        &docs,
        d(vec![("a", d(vec![("$nin", a(vec![null(), i(75)]))]))]),
        &not_null,
    );
    check(
        &docs,
        d(vec![(
            "a",
            d(vec![("$nin", a(vec![null(), re("^str.*", "")]))]),
        )]),
        &not_null[..not_null.len() - 1],
    );
    check(
        &docs,
        d(vec![(
            "a",
            d(vec![("$elemMatch", d(vec![("$eq", null())]))]),
        )]),
        &[
            "a_value_array_all_nulls",
            "a_value_array_with_null",
            "a_value_array_with_undefined",
        ],
    );
    check(
        &docs,
        d(vec![(
            "a",
            d(vec![("$elemMatch", d(vec![("$ne", null())]))]),
        )]),
        &[
            "a_double_array",
            "a_object_array_all_b_nulls",
            "a_object_array_no_b_nulls",
            "a_object_array_some_b_nulls",
            "a_object_array_some_b_undefined",
            "a_object_array_some_b_missing",
            "a_value_array_no_nulls",
            "a_value_array_with_undefined",
            "a_value_array_with_null",
        ],
    );
    let dotted_null = [
        "a_empty_subobject",
        "a_null",
        "a_number",
        "a_subobject_b_null",
        "a_subobject_b_undefined",
        "a_undefined",
        "no_a",
        "a_object_array_all_b_nulls",
        "a_object_array_some_b_nulls",
        "a_object_array_some_b_undefined",
        "a_object_array_some_b_missing",
    ];
    check(
        &docs,
        d(vec![("a.b", d(vec![("$eq", null())]))]),
        &dotted_null,
    );
    let dotted_not_null = [
        "a_subobject_b_not_null",
        "a_double_array",
        "a_empty_array",
        "a_object_array_no_b_nulls",
        "a_value_array_all_nulls",
        "a_value_array_no_nulls",
        "a_value_array_with_null",
        "a_value_array_with_undefined",
    ];
    check(
        &docs,
        d(vec![("a.b", d(vec![("$ne", null())]))]),
        &dotted_not_null,
    );
    check(
        &docs,
        d(vec![("a.b", d(vec![("$in", a(vec![null(), i(75)]))]))]),
        &dotted_null,
    );
    check(
        &docs,
        d(vec![(
            "$or",
            a(vec![d(vec![("a.b", null())]), d(vec![("a.b", i(75))])]),
        )]),
        &dotted_null,
    );
    check(
        &docs,
        d(vec![("a.b", d(vec![("$nin", a(vec![null(), i(75)]))]))]),
        &dotted_not_null,
    );
    check(
        &docs,
        d(vec![(
            "a.b",
            d(vec![("$nin", a(vec![null(), re("^str.*", "")]))]),
        )]),
        &[
            "a_subobject_b_not_null",
            "a_double_array",
            "a_empty_array",
            "a_value_array_all_nulls",
            "a_value_array_no_nulls",
            "a_value_array_with_null",
            "a_value_array_with_undefined",
        ],
    );
    check(
        &docs,
        d(vec![(
            "a.b",
            d(vec![("$elemMatch", d(vec![("$eq", null())]))]),
        )]),
        &[],
    );
    check(
        &docs,
        d(vec![(
            "a.b",
            d(vec![("$elemMatch", d(vec![("$ne", null())]))]),
        )]),
        &[],
    );
    check(
        &docs,
        d(vec![(
            "a",
            d(vec![(
                "$elemMatch",
                d(vec![("b", d(vec![("$eq", null())]))]),
            )]),
        )]),
        &[
            "a_double_array",
            "a_object_array_all_b_nulls",
            "a_object_array_some_b_nulls",
            "a_object_array_some_b_undefined",
            "a_object_array_some_b_missing",
        ],
    );
    check(
        &docs,
        d(vec![(
            "a",
            d(vec![(
                "$elemMatch",
                d(vec![("b", d(vec![("$ne", null())]))]),
            )]),
        )]),
        &[
            "a_object_array_no_b_nulls",
            "a_object_array_some_b_nulls",
            "a_object_array_some_b_undefined",
            "a_object_array_some_b_missing",
        ],
    );
}
