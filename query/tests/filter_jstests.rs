//! MongoDB jstests with explicit expected results, ported: jstests/core/bittest.js (result
//! counts) and jstests/core/nan.js.

mod common;

use bson::{Binary, Bson, bson, spec::BinarySubtype};
use common::*;

fn count(docs: &[Bson], filter: Bson) -> usize {
    let raws: Vec<_> = docs.iter().map(raw).collect();
    let f = parse(&filter).unwrap_or_else(|e| panic!("{filter}: {e:?}"));
    raws.iter().filter(|d| f.matches(d)).count()
}

fn docs_a(values: Vec<Bson>) -> Vec<Bson> {
    values.into_iter().map(|v| bson!({"a": v})).collect()
}

/// `BinData(subtype, base64)` as the shell writes it (for subtype 2 the payload starts with
/// its own length, which the bson crate adds itself).
fn bindata(subtype: u8, b64: &str) -> Bson {
    let mut b = Binary::from_base64(b64, BinarySubtype::from(subtype)).expect("base64");
    if subtype == 2 {
        b.bytes.drain(..4);
    }
    Bson::Binary(b)
}

fn check(docs: &[Bson], cases: &[(Bson, usize)]) {
    for (filter, want) in cases {
        assert_eq!(count(docs, filter.clone()), *want, "filter {filter}");
    }
}

#[test]
fn bittest_numbers() {
    let docs = docs_a(vec![i(0), i(1), i(54), i(88), i(255), f(1e18)]);
    check(
        &docs,
        &[
            (bson!({"a": {"$bitsAllSet": 0}}), 6),
            (bson!({"a": {"$bitsAllSet": 1}}), 2),
            (bson!({"a": {"$bitsAllSet": 16}}), 3),
            (bson!({"a": {"$bitsAllSet": 54}}), 2),
            (bson!({"a": {"$bitsAllSet": 55}}), 1),
            (bson!({"a": {"$bitsAllSet": 88}}), 2),
            (bson!({"a": {"$bitsAllSet": 255}}), 1),
            (bson!({"a": {"$bitsAllClear": 0}}), 6),
            (bson!({"a": {"$bitsAllClear": 1}}), 4),
            (bson!({"a": {"$bitsAllClear": 16}}), 3),
            (bson!({"a": {"$bitsAllClear": 129}}), 4),
            (bson!({"a": {"$bitsAllClear": 255}}), 2),
            (bson!({"a": {"$bitsAnySet": 0}}), 0),
            (bson!({"a": {"$bitsAnySet": 9}}), 3),
            (bson!({"a": {"$bitsAnySet": 255}}), 4),
            (bson!({"a": {"$bitsAnyClear": 0}}), 0),
            (bson!({"a": {"$bitsAnyClear": 18}}), 4),
            (bson!({"a": {"$bitsAnyClear": 24}}), 4),
            (bson!({"a": {"$bitsAnyClear": 255}}), 5),
            (bson!({"a": {"$bitsAllSet": []}}), 6),
            (bson!({"a": {"$bitsAllSet": [0]}}), 2),
            (bson!({"a": {"$bitsAllSet": [4]}}), 3),
            (bson!({"a": {"$bitsAllSet": [1, 2, 4, 5]}}), 2),
            (bson!({"a": {"$bitsAllSet": [0, 1, 2, 4, 5]}}), 1),
            (bson!({"a": {"$bitsAllSet": [3, 4, 6]}}), 2),
            (bson!({"a": {"$bitsAllSet": [0, 1, 2, 3, 4, 5, 6, 7]}}), 1),
            (bson!({"a": {"$bitsAllClear": []}}), 6),
            (bson!({"a": {"$bitsAllClear": [0]}}), 4),
            (bson!({"a": {"$bitsAllClear": [4]}}), 3),
            (bson!({"a": {"$bitsAllClear": [1, 7]}}), 4),
            (bson!({"a": {"$bitsAllClear": [0, 1, 2, 3, 4, 5, 6, 7]}}), 2),
            (bson!({"a": {"$bitsAnySet": []}}), 0),
            (bson!({"a": {"$bitsAnySet": [1, 3]}}), 3),
            (bson!({"a": {"$bitsAnySet": [0, 1, 2, 3, 4, 5, 6, 7]}}), 4),
            (bson!({"a": {"$bitsAnyClear": []}}), 0),
            (bson!({"a": {"$bitsAnyClear": [1, 4]}}), 4),
            (bson!({"a": {"$bitsAnyClear": [3, 4]}}), 4),
            (bson!({"a": {"$bitsAnyClear": [0, 1, 2, 3, 4, 5, 6, 7]}}), 5),
            (bson!({"a": {"$bitsAllSet": 54, "$bitsAllClear": 201}}), 1),
        ],
    );
}

#[test]
fn bittest_negative_numbers() {
    let docs = docs_a(vec![f(-0.0), f(-1.0), f(-54.0), f(-1e18)]);
    let all: Vec<Bson> = (0..64).map(i).collect();
    check(
        &docs,
        &[
            (bson!({"a": {"$bitsAllSet": 0}}), 4),
            (bson!({"a": {"$bitsAllSet": 2}}), 2),
            (bson!({"a": {"$bitsAllSet": 127}}), 1),
            (bson!({"a": {"$bitsAllSet": 74}}), 2),
            (bson!({"a": {"$bitsAllClear": 0}}), 4),
            (bson!({"a": {"$bitsAllClear": 53}}), 3),
            (bson!({"a": {"$bitsAllClear": 127}}), 2),
            (bson!({"a": {"$bitsAnySet": 0}}), 0),
            (bson!({"a": {"$bitsAnySet": 2}}), 2),
            (bson!({"a": {"$bitsAnySet": 127}}), 2),
            (bson!({"a": {"$bitsAnyClear": 0}}), 0),
            (bson!({"a": {"$bitsAnyClear": 53}}), 3),
            (bson!({"a": {"$bitsAnyClear": 127}}), 3),
            (bson!({"a": {"$bitsAllSet": []}}), 4),
            (bson!({"a": {"$bitsAllSet": [1]}}), 2),
            (bson!({"a": {"$bitsAllSet": (all.clone())}}), 1),
            (bson!({"a": {"$bitsAllSet": [1, 7, 6, 3, 100]}}), 2),
            (bson!({"a": {"$bitsAllClear": []}}), 4),
            (bson!({"a": {"$bitsAllClear": [5, 4, 2, 0]}}), 3),
            (bson!({"a": {"$bitsAllClear": (all.clone())}}), 1),
            (bson!({"a": {"$bitsAnySet": []}}), 0),
            (bson!({"a": {"$bitsAnySet": [1]}}), 2),
            (bson!({"a": {"$bitsAnySet": (all.clone())}}), 3),
            (bson!({"a": {"$bitsAnyClear": []}}), 0),
            (bson!({"a": {"$bitsAnyClear": [0, 2, 4, 5, 100]}}), 3),
            (bson!({"a": {"$bitsAnyClear": (all.clone())}}), 3),
            (bson!({"a": {"$bitsAllSet": 74, "$bitsAllClear": 53}}), 1),
        ],
    );
}

#[test]
fn bittest_bindata() {
    let docs = docs_a(vec![
        bindata(0, "AAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        bindata(0, "AANgAAAAAAAAAAAAAAAAAAAAAAAA"),
        bindata(0, "JANgqwetkqwklEWRbWERKKJREtbq"),
        bindata(0, "////////////////////////////"),
    ]);
    let b = |s: &str| bindata(0, s);
    check(
        &docs,
        &[
            (
                bson!({"a": {"$bitsAllSet": (b("AAAAAAAAAAAAAAAAAAAAAAAAAAAA"))}}),
                4,
            ),
            (
                bson!({"a": {"$bitsAllSet": (b("AANgAAAAAAAAAAAAAAAAAAAAAAAA"))}}),
                3,
            ),
            (
                bson!({"a": {"$bitsAllSet": (b("JANgqwetkqwklEWRbWERKKJREtbq"))}}),
                2,
            ),
            (
                bson!({"a": {"$bitsAllSet": (b("////////////////////////////"))}}),
                1,
            ),
            (
                bson!({"a": {"$bitsAllClear": (b("AAAAAAAAAAAAAAAAAAAAAAAAAAAA"))}}),
                4,
            ),
            (
                bson!({"a": {"$bitsAllClear": (b("AAyfAAAAAAAAAAAAAAAAAAAAAAAA"))}}),
                3,
            ),
            (
                bson!({"a": {"$bitsAllClear": (b("JAyfqwetkqwklEWRbWERKKJREtbq"))}}),
                2,
            ),
            (
                bson!({"a": {"$bitsAllClear": (b("////////////////////////////"))}}),
                1,
            ),
            (
                bson!({"a": {"$bitsAnySet": (b("AAAAAAAAAAAAAAAAAAAAAAAAAAAA"))}}),
                0,
            ),
            (
                bson!({"a": {"$bitsAnySet": (b("AAyfAAAAAAAAAAAAAAAAAAAAAAAA"))}}),
                1,
            ),
            (
                bson!({"a": {"$bitsAnySet": (b("JAyfqwetkqwklEWRbWERKKJREtbq"))}}),
                2,
            ),
            (
                bson!({"a": {"$bitsAnySet": (b("////////////////////////////"))}}),
                3,
            ),
            (
                bson!({"a": {"$bitsAnyClear": (b("AAAAAAAAAAAAAAAAAAAAAAAAAAAA"))}}),
                0,
            ),
            (
                bson!({"a": {"$bitsAnyClear": (b("AANgAAAAAAAAAAAAAAAAAAAAAAAA"))}}),
                1,
            ),
            (
                bson!({"a": {"$bitsAnyClear": (b("JANgqwetkqwklEWRbWERKKJREtbq"))}}),
                2,
            ),
            (
                bson!({"a": {"$bitsAnyClear": (b("////////////////////////////"))}}),
                3,
            ),
            (
                bson!({"a": {
                    "$bitsAllSet": (b("AANgAAAAAAAAAAAAAAAAAAAAAAAA")),
                    "$bitsAllClear": (b("//yf////////////////////////"))
                }}),
                1,
            ),
        ],
    );
}

#[test]
fn bittest_nan_and_non_integral() {
    let docs = docs_a(vec![
        i(0),
        i(1),
        a(vec![f(1.1), i(54)]),
        i(88),
        i(255),
        f(f64::NAN),
        f(1.1),
        f(-1.1),
        f(f64::NEG_INFINITY),
        f(f64::INFINITY),
    ]);
    check(
        &docs,
        &[
            (bson!({"a": {"$bitsAllSet": 0}}), 5),
            (bson!({"a": {"$bitsAllSet": 1}}), 2),
            (bson!({"a": {"$bitsAllSet": 16}}), 3),
            (bson!({"a": {"$bitsAllSet": 54}}), 2),
            (bson!({"a": {"$bitsAllSet": 55}}), 1),
            (bson!({"a": {"$bitsAllSet": 88}}), 2),
            (bson!({"a": {"$bitsAllSet": 255}}), 1),
            (bson!({"a": {"$bitsAllClear": 0}}), 5),
            (bson!({"a": {"$bitsAllClear": 1}}), 3),
            (bson!({"a": {"$bitsAllClear": 16}}), 2),
            (bson!({"a": {"$bitsAllClear": 129}}), 3),
            (bson!({"a": {"$bitsAllClear": 255}}), 1),
            (bson!({"a": {"$bitsAnySet": 0}}), 0),
            (bson!({"a": {"$bitsAnySet": 9}}), 3),
            (bson!({"a": {"$bitsAnySet": 255}}), 4),
            (bson!({"a": {"$bitsAnyClear": 0}}), 0),
            (bson!({"a": {"$bitsAnyClear": 18}}), 3),
            (bson!({"a": {"$bitsAnyClear": 24}}), 3),
            (bson!({"a": {"$bitsAnyClear": 255}}), 4),
        ],
    );
}

#[test]
fn bittest_variable_length_bindata() {
    let fox = "VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw==";
    let docs = docs_a(vec![
        bindata(0, "ZG9n"),
        bindata(0, "JA4A8gAxqTwciCuF5GGzAA=="),
        bindata(1, "JA4A8gAxqTwciCuF5GGzAA=="),
        bindata(0, fox),
        bindata(2, "BAAAADEyMzQ="),
    ]);
    check(
        &docs,
        &[
            (bson!({"a": {"$bitsAllSet": (bindata(0, "ZG9n"))}}), 1),
            (
                bson!({"a": {"$bitsAllSet": (bindata(0, "JA4A8gAxqTwciCuF5GGzAA=="))}}),
                2,
            ),
            (
                bson!({"a": {"$bitsAllSet": (bindata(2, "BAAAADEyMzQ="))}}),
                1,
            ),
            (bson!({"a": {"$bitsAllSet": (bindata(0, fox))}}), 1),
            (
                bson!({"a": {"$bitsAllClear": (bindata(0, "AAAAAAAAAAAAAAAAAAAAAAAAAAAA"))}}),
                5,
            ),
            (
                bson!({"a": {"$bitsAllClear": (bindata(0, "JA4A8gAxqTwciCuF5GGzAA=="))}}),
                0,
            ),
            (
                bson!({"a": {"$bitsAnySet": (bindata(0, "AAAAAAAAAAAAAAAAAAAAAAAAAAAA"))}}),
                0,
            ),
            (
                bson!({"a": {"$bitsAnySet": (bindata(0, "JA4A8gAxqTwciCuF5GGzAA=="))}}),
                5,
            ),
            (
                bson!({"a": {"$bitsAnyClear": (bindata(0, "AAAAAAAAAAAAAAAAAAAAAAAAAAAA"))}}),
                0,
            ),
            (bson!({"a": {"$bitsAnyClear": (bindata(0, fox))}}), 4),
        ],
    );
}

#[test]
fn nan_comparisons() {
    let docs = vec![
        bson!({"_id": 0, "a": (f64::NEG_INFINITY)}),
        bson!({"_id": 1, "a": -3}),
        bson!({"_id": 2, "a": 0}),
        bson!({"_id": 3, "a": 3}),
        bson!({"_id": 4, "a": (f64::INFINITY)}),
        bson!({"_id": 5, "a": (f64::NAN)}),
        bson!({"_id": 6, "a": (-f64::NAN)}),
        bson!({"_id": 7, "a": (Bson::Undefined)}),
        bson!({"_id": 8, "a": null}),
        bson!({"_id": 9, "a": []}),
        bson!({"_id": 10, "a": {"b": 1}}),
        bson!({"_id": 11, "a": {"b": 1}}),
    ];
    expect(&docs, bson!({"a": (f64::NAN)}), &["5", "6"]);
    expect(&docs, bson!({"a": {"$lt": (f64::NAN)}}), &[]);
    expect(&docs, bson!({"a": {"$lte": (f64::NAN)}}), &["5", "6"]);
    expect(&docs, bson!({"a": {"$gt": (f64::NAN)}}), &[]);
    expect(&docs, bson!({"a": {"$gte": (f64::NAN)}}), &["5", "6"]);
}
