//! Order tests for `E(v)` (`cairn_storage::keys`) against MongoDB's comparison
//! (`cairn_storage::compare`): a table pinning every type boundary and numeric edge case, and
//! property tests on random values.
//!
//! Invariants checked: `E(a).cmp(E(b)) == compare_values(a, b)`; the descending encoding
//! reverses it; unequal encodings are never prefixes of each other; compound keys compare
//! component-wise; `compare_values` is a total order; malformed input never panics.

use std::cmp::Ordering;
use std::str::FromStr;

use bson::oid::ObjectId;
use bson::raw::{
    CString, RawArrayBuf, RawBson, RawDocument, RawDocumentBuf, RawJavaScriptCodeWithScope,
};
use bson::spec::BinarySubtype;
use bson::{Binary, DateTime, Decimal128, Regex, Timestamp, rawdoc};
use cairn_storage::compare::{
    TypeClass, canonical_type_order, compare_documents, compare_optional, compare_values,
};
use cairn_storage::keys::{
    KeyError, encode_document, encode_missing, encode_to_vec, encode_value,
    encode_value_with_max_depth,
};
use proptest::prelude::*;
use proptest::sample::select;

// ---------------------------------------------------------------------------------------------
// Value builders

fn i32v(v: i32) -> RawBson {
    RawBson::Int32(v)
}
fn i64v(v: i64) -> RawBson {
    RawBson::Int64(v)
}
fn f64v(v: f64) -> RawBson {
    RawBson::Double(v)
}
fn dec(s: &str) -> RawBson {
    RawBson::Decimal128(Decimal128::from_str(s).unwrap_or_else(|e| panic!("{s}: {e}")))
}
fn dec_bits(bits: u128) -> RawBson {
    RawBson::Decimal128(Decimal128::from_bytes(bits.to_le_bytes()))
}
fn s(v: &str) -> RawBson {
    RawBson::String(v.to_owned())
}
fn sym(v: &str) -> RawBson {
    RawBson::Symbol(v.to_owned())
}
fn bin(subtype: u8, bytes: &[u8]) -> RawBson {
    RawBson::Binary(Binary {
        subtype: BinarySubtype::from(subtype),
        bytes: bytes.to_vec(),
    })
}
fn oid(last: u8) -> RawBson {
    let mut b = [0u8; 12];
    b[11] = last;
    b[0] = last / 2;
    RawBson::ObjectId(ObjectId::from_bytes(b))
}
fn date(ms: i64) -> RawBson {
    RawBson::DateTime(DateTime::from_millis(ms))
}
fn ts(time: u32, increment: u32) -> RawBson {
    RawBson::Timestamp(Timestamp { time, increment })
}
fn regex(pattern: &str, options: &str) -> RawBson {
    RawBson::RegularExpression(Regex {
        pattern: CString::try_from(pattern.to_owned()).unwrap(),
        options: CString::try_from(options.to_owned()).unwrap(),
    })
}
fn code(c: &str) -> RawBson {
    RawBson::JavaScriptCode(c.to_owned())
}
fn code_scope(c: &str, scope: RawDocumentBuf) -> RawBson {
    RawBson::JavaScriptCodeWithScope(RawJavaScriptCodeWithScope {
        code: c.to_owned(),
        scope,
    })
}
/// The bson crate has no public DBPointer constructor; build one from wire bytes.
fn db_pointer(ns: &str, id_last: u8) -> RawBson {
    let mut id = [0u8; 12];
    id[11] = id_last;
    let mut body = Vec::new();
    body.push(0x0C);
    body.extend_from_slice(b"v\0");
    body.extend_from_slice(&(ns.len() as i32 + 1).to_le_bytes());
    body.extend_from_slice(ns.as_bytes());
    body.push(0);
    body.extend_from_slice(&id);
    body.push(0);
    let mut bytes = ((body.len() + 4) as i32).to_le_bytes().to_vec();
    bytes.extend_from_slice(&body);
    let doc = RawDocumentBuf::from_bytes(bytes).unwrap();
    RawBson::from(doc.get("v").unwrap().unwrap())
}
fn doc(items: Vec<(&str, RawBson)>) -> RawBson {
    let mut d = RawDocumentBuf::new();
    for (k, v) in items {
        d.append(CString::try_from(k.to_owned()).unwrap(), v);
    }
    RawBson::Document(d)
}
fn arr(items: Vec<RawBson>) -> RawBson {
    let mut a = RawArrayBuf::new();
    for v in items {
        a.push(v);
    }
    RawBson::Array(a)
}

fn key(v: &RawBson, descending: bool) -> Vec<u8> {
    encode_to_vec(v.as_raw_bson_ref(), descending).unwrap_or_else(|e| panic!("{v:?}: {e}"))
}
fn cmp(a: &RawBson, b: &RawBson) -> Ordering {
    compare_values(a.as_raw_bson_ref(), b.as_raw_bson_ref())
}

// ---------------------------------------------------------------------------------------------
// The table: groups in strictly ascending order; values within a group compare equal.

fn ascending_groups() -> Vec<Vec<RawBson>> {
    let two53 = 9_007_199_254_740_992i64;
    vec![
        vec![RawBson::MinKey],
        vec![RawBson::Undefined],
        vec![RawBson::Null],
        // NaN: doubles (quiet, negative, signalling payload), decimal NaN / -NaN / sNaN.
        vec![
            f64v(f64::NAN),
            f64v(-f64::NAN),
            f64v(f64::from_bits(0x7FF0_0000_0000_0001)),
            dec("NaN"),
            dec_bits(0xFC00u128 << 112),
            dec_bits(0x7E00u128 << 112),
        ],
        vec![f64v(f64::NEG_INFINITY), dec("-Infinity")],
        vec![dec("-9999999999999999999999999999999999E6111")],
        vec![dec("-1E309")],
        vec![f64v(-f64::MAX)],
        vec![
            i64v(i64::MIN),
            f64v(-9_223_372_036_854_775_808.0),
            dec("-9223372036854775808"),
        ],
        vec![i64v(i64::MIN + 1)],
        vec![i64v(-two53 - 1), dec("-9007199254740993")],
        vec![i64v(-two53), f64v(-9_007_199_254_740_992.0)],
        vec![i32v(i32::MIN), i64v(-2_147_483_648), f64v(-2_147_483_648.0)],
        vec![f64v(-1.5), dec("-1.5"), dec("-15E-1")],
        vec![i32v(-1), i64v(-1), f64v(-1.0), dec("-1.00"), dec("-1E0")],
        // Double -0.1 is -0.1000000000000000055511151231257827021..., below decimal -0.1.
        vec![f64v(-0.1)],
        vec![dec("-0.1000000000000000055511151231257827")],
        vec![dec("-0.1")],
        vec![f64v(-5e-324)],
        vec![dec("-1E-6176")],
        vec![
            i32v(0),
            i64v(0),
            f64v(0.0),
            f64v(-0.0),
            dec("0"),
            dec("-0"),
            dec("0E-6176"),
            dec("0E+6111"),
            dec("-0.000"),
            // Non-canonical coefficient (10^34) and the large-coefficient form: zero.
            dec_bits((6176u128 << 113) | 10u128.pow(34)),
            dec_bits((0b11u128 << 125) | (6176u128 << 111) | 7),
        ],
        vec![dec("1E-6176")],
        vec![dec("4.940656458412465441765687928682213E-324")],
        vec![f64v(5e-324)],
        vec![dec("4.940656458412465441765687928682214E-324")],
        vec![f64v(f64::MIN_POSITIVE)],
        vec![dec("0.1")],
        vec![dec("0.1000000000000000055511151231257827")],
        vec![f64v(0.1)],
        vec![dec("0.1000000000000000055511151231257828")],
        vec![f64v(0.5), dec("0.5"), dec("5E-1"), dec("0.50000")],
        vec![
            i32v(1),
            i64v(1),
            f64v(1.0),
            dec("1"),
            dec("1.00"),
            dec("1E0"),
            dec("0.001E3"),
            dec("1.000000000000000000000000000000000"),
        ],
        vec![dec("1.000000000000000000000000000000001")],
        vec![f64v(1.0000000000000002)],
        vec![i32v(2), i64v(2), f64v(2.0), dec("2E0")],
        vec![i32v(i32::MAX), i64v(2_147_483_647)],
        vec![i64v(2_147_483_648), f64v(2_147_483_648.0)],
        vec![
            i64v(two53 - 1),
            f64v(9_007_199_254_740_991.0),
            dec("9007199254740991"),
        ],
        vec![
            i64v(two53),
            f64v(9_007_199_254_740_992.0),
            dec("9.007199254740992E15"),
        ],
        vec![i64v(two53 + 1), dec("9007199254740993")],
        vec![i64v(two53 + 2), f64v(9_007_199_254_740_994.0)],
        vec![i64v(i64::MAX - 1)],
        vec![i64v(i64::MAX), dec("9223372036854775807")],
        vec![
            f64v(9_223_372_036_854_775_808.0),
            dec("9223372036854775808"),
        ],
        vec![dec("1E308")],
        vec![f64v(1e308)],
        vec![f64v(f64::MAX)],
        vec![dec("1.797693134862315708145274237317044E308")],
        vec![dec("1E6144")],
        vec![dec("9999999999999999999999999999999999E6111")],
        vec![f64v(f64::INFINITY), dec("Infinity")],
        // Strings: byte-wise, shorter prefix first; Symbol equals String.
        vec![s(""), sym("")],
        vec![s("\0")],
        vec![s("\0\0")],
        vec![s("\u{1}")],
        vec![s("a"), sym("a")],
        vec![s("a\0")],
        vec![s("a\0b")],
        vec![s("a\u{1}")],
        vec![s("ab")],
        vec![s("b")],
        vec![s("\u{7f}")],
        vec![s("é")],
        vec![s("\u{FFFF}")],
        // Objects: type class before field name, then name, then value; prefix first.
        vec![doc(vec![])],
        vec![doc(vec![("b", RawBson::MinKey)])],
        vec![doc(vec![("a", RawBson::Undefined)])],
        vec![doc(vec![("a", RawBson::Null)])],
        vec![doc(vec![("a", i32v(1))]), doc(vec![("a", f64v(1.0))])],
        vec![doc(vec![("a", i32v(1)), ("b", i32v(1))])],
        vec![doc(vec![("a", i32v(2))])],
        vec![doc(vec![("aa", i32v(0))])],
        vec![doc(vec![("b", i32v(1))])],
        vec![doc(vec![("a", s("x"))])],
        vec![doc(vec![("a", doc(vec![]))])],
        vec![doc(vec![("a", arr(vec![]))])],
        // Arrays.
        vec![arr(vec![])],
        vec![arr(vec![RawBson::MinKey])],
        vec![arr(vec![RawBson::Null])],
        vec![arr(vec![i32v(1)]), arr(vec![dec("1.0")])],
        vec![arr(vec![i32v(1), i32v(2)])],
        vec![arr(vec![i32v(1), s("a")])],
        vec![arr(vec![i32v(2)])],
        vec![arr(vec![s("a")])],
        vec![arr(vec![doc(vec![])])],
        vec![arr(vec![arr(vec![])])],
        // BinData: length, then subtype, then bytes. Subtype 2 counts its inner length.
        vec![bin(0x00, &[])],
        vec![bin(0x05, &[])],
        vec![bin(0x80, &[])],
        vec![bin(0x00, &[0xFF])],
        vec![bin(0x04, &[0x00])],
        vec![bin(0x00, &[1, 2, 3, 4])],
        vec![bin(0x02, &[])],
        vec![bin(0x03, &[0, 0, 0, 0])],
        vec![bin(0x02, &[0])],
        // ObjectId, Bool.
        vec![oid(0)],
        vec![oid(1)],
        vec![oid(255)],
        vec![RawBson::Boolean(false)],
        vec![RawBson::Boolean(true)],
        // Dates: signed, pre-1970 first.
        vec![date(i64::MIN)],
        vec![date(-86_400_000)],
        vec![date(-1)],
        vec![date(0)],
        vec![date(1)],
        vec![date(i64::MAX)],
        // Timestamps: unsigned (time, increment).
        vec![ts(0, 0)],
        vec![ts(0, 1)],
        vec![ts(0, u32::MAX)],
        vec![ts(1, 0)],
        vec![ts(1 << 31, 0)],
        vec![ts(u32::MAX, 0)],
        vec![ts(u32::MAX, u32::MAX)],
        // Regex: pattern, then flags.
        vec![regex("", "")],
        vec![regex("", "i")],
        vec![regex("a", "")],
        vec![regex("a", "i")],
        vec![regex("a", "im")],
        vec![regex("ab", "")],
        // DBPointer: namespace length, namespace bytes, id.
        vec![db_pointer("", 9)],
        vec![db_pointer("z", 9)],
        vec![db_pointer("aa", 0)],
        vec![db_pointer("aa", 1)],
        vec![db_pointer("ab", 0)],
        // Code, CodeWithScope.
        vec![code("")],
        vec![code("a")],
        vec![code("b")],
        vec![code_scope("", rawdoc! {})],
        vec![code_scope("", rawdoc! { "a": 1 })],
        vec![code_scope("", rawdoc! { "a": 2 })],
        vec![code_scope("a", rawdoc! {})],
        vec![RawBson::MaxKey],
    ]
}

#[test]
fn table_orders_and_encodings_agree() {
    let groups = ascending_groups();
    let flat: Vec<(usize, &RawBson)> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, vs)| vs.iter().map(move |v| (g, v)))
        .collect();
    let keys: Vec<(Vec<u8>, Vec<u8>)> = flat
        .iter()
        .map(|(_, v)| (key(v, false), key(v, true)))
        .collect();
    for (i, (gi, a)) in flat.iter().enumerate() {
        for (j, (gj, b)) in flat.iter().enumerate() {
            let expected = gi.cmp(gj);
            assert_eq!(cmp(a, b), expected, "compare_values({a:?}, {b:?})");
            assert_eq!(keys[i].0.cmp(&keys[j].0), expected, "E({a:?}) vs E({b:?})");
            assert_eq!(
                keys[i].1.cmp(&keys[j].1),
                expected.reverse(),
                "desc {a:?} vs {b:?}"
            );
            if expected == Ordering::Equal {
                assert_eq!(keys[i].0, keys[j].0, "equal values must encode identically");
            } else {
                assert!(!keys[j].0.starts_with(&keys[i].0), "prefix: {a:?} / {b:?}");
            }
        }
    }
}

#[test]
fn type_classes_follow_mongodb() {
    let order: Vec<i32> = [
        RawBson::MinKey,
        RawBson::Undefined,
        RawBson::Null,
        i32v(0),
        s(""),
        doc(vec![]),
        arr(vec![]),
        bin(0, &[]),
        oid(0),
        RawBson::Boolean(false),
        date(0),
        ts(0, 0),
        regex("", ""),
        db_pointer("", 0),
        code(""),
        code_scope("", rawdoc! {}),
        RawBson::MaxKey,
    ]
    .iter()
    .map(|v| canonical_type_order(v.as_raw_bson_ref()))
    .collect();
    assert_eq!(
        order,
        [
            -1, 0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 47, 50, 55, 60, 65, 127
        ]
    );
    assert_eq!(TypeClass::of(sym("x").as_raw_bson_ref()), TypeClass::String);
    assert_eq!(TypeClass::of(dec("1").as_raw_bson_ref()), TypeClass::Number);
}

#[test]
fn missing_equals_undefined_and_sorts_below_null() {
    let mut missing = Vec::new();
    encode_missing(&mut missing, false);
    assert_eq!(missing, key(&RawBson::Undefined, false));
    assert!(missing < key(&RawBson::Null, false));
    assert!(missing > key(&RawBson::MinKey, false));
    let mut missing_desc = Vec::new();
    encode_missing(&mut missing_desc, true);
    assert_eq!(missing_desc, key(&RawBson::Undefined, true));

    let undefined = RawBson::Undefined;
    let null = RawBson::Null;
    assert_eq!(
        compare_optional(None, Some(undefined.as_raw_bson_ref())),
        Ordering::Equal
    );
    assert_eq!(
        compare_optional(None, Some(null.as_raw_bson_ref())),
        Ordering::Less
    );
    assert_eq!(
        compare_optional(Some(RawBson::MinKey.as_raw_bson_ref()), None),
        Ordering::Less
    );
    assert_eq!(compare_optional(None, None), Ordering::Equal);
}

#[test]
fn documents_compare_with_field_names() {
    let a = rawdoc! { "a": 1, "b": "x" };
    let b = rawdoc! { "a": 1.0, "b": "y" };
    let c = rawdoc! { "a": 1, "c": "a" };
    assert_eq!(compare_documents(&a, &b), Ordering::Less);
    assert_eq!(compare_documents(&b, &c), Ordering::Less);
    assert_eq!(
        compare_documents(&a, &rawdoc! { "a": 1i64, "b": "x" }),
        Ordering::Equal
    );
    for (x, y) in [(&a, &b), (&b, &c), (&a, &c)] {
        let (mut ex, mut ey) = (Vec::new(), Vec::new());
        encode_document(&mut ex, x, false).unwrap();
        encode_document(&mut ey, y, false).unwrap();
        assert_eq!(ex.cmp(&ey), compare_documents(x, y));
    }
}

/// Bytes of a document nested `depth` levels deep: {a: {a: … {} …}}.
fn deeply_nested(depth: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(depth * 8 + 5);
    for level in 0..depth {
        let len = 5 + 8 * (depth - level);
        bytes.extend_from_slice(&(len as i32).to_le_bytes());
        bytes.extend_from_slice(&[0x03, b'a', 0x00]);
    }
    bytes.extend_from_slice(&[5, 0, 0, 0, 0]);
    bytes.extend(std::iter::repeat_n(0u8, depth));
    bytes
}

#[test]
fn deep_nesting_is_bounded() {
    let a = deeply_nested(100_000);
    let mut b = a.clone();
    let da = RawDocument::from_bytes(&a).unwrap();
    // Same shape, differing innermost-but-one byte: a key rename deep down.
    let pos = 7 * (100_000 - 1) + 5;
    assert_eq!(b[pos], b'a');
    b[pos] = b'b';
    let db = RawDocument::from_bytes(&b).unwrap();
    assert_eq!(compare_documents(da, da), Ordering::Equal);
    assert_eq!(compare_documents(da, db), Ordering::Less);
    assert_eq!(compare_documents(db, da), Ordering::Greater);
    let mut out = vec![7];
    assert_eq!(
        encode_document(&mut out, da, false),
        Err(KeyError::DepthExceeded {
            limit: cairn_storage::keys::DEFAULT_MAX_DEPTH
        })
    );
    assert_eq!(out, [7]);
    // Exactly at the limit is fine.
    let ok = deeply_nested(cairn_storage::keys::DEFAULT_MAX_DEPTH - 1);
    encode_document(&mut out, RawDocument::from_bytes(&ok).unwrap(), false).unwrap();
    let too_deep = deeply_nested(3);
    let err = encode_value_with_max_depth(
        &mut out,
        bson::RawBsonRef::Document(RawDocument::from_bytes(&too_deep).unwrap()),
        false,
        3,
    );
    assert_eq!(err, Err(KeyError::DepthExceeded { limit: 3 }));
}

#[test]
fn malformed_nested_bson_is_an_error_not_a_panic() {
    // {a: "x"} with the string's length field corrupted.
    let good = rawdoc! { "a": "x" };
    let mut bytes = good.as_bytes().to_vec();
    bytes[7] = 0x7F;
    let bad = RawDocument::from_bytes(&bytes).unwrap();
    let mut out = Vec::new();
    assert!(matches!(
        encode_document(&mut out, bad, false),
        Err(KeyError::Malformed(_))
    ));
    assert!(out.is_empty());
    // Malformed elements sort after well-formed ones at the same position.
    assert_eq!(compare_documents(bad, &good), Ordering::Greater);
    assert_eq!(
        compare_documents(&rawdoc! { "a": RawBson::MaxKey }, bad),
        Ordering::Less
    );
    assert_eq!(compare_documents(bad, bad), Ordering::Equal);
}

// ---------------------------------------------------------------------------------------------
// Property tests

fn decimal_strategy() -> impl Strategy<Value = RawBson> {
    let canonical = (
        any::<bool>(),
        select(vec![
            0u128,
            1,
            5,
            10,
            15,
            25,
            100,
            12345,
            9_007_199_254_740_993,
            10u128.pow(33),
            10u128.pow(34) - 1,
        ]),
        select(vec![
            -6176i32, -330, -40, -34, -3, -2, -1, 0, 1, 2, 300, 6111,
        ]),
    )
        .prop_map(|(neg, c, q)| {
            dec_bits((u128::from(neg) << 127) | (((q + 6176) as u128) << 113) | c)
        });
    prop_oneof![
        6 => canonical,
        2 => select(vec![
            "NaN", "-NaN", "Infinity", "-Infinity", "0.1", "-0.1", "1E308", "5E-324",
            "0.1000000000000000055511151231257827", "9223372036854775808",
            "-9223372036854775809", "1.797693134862315708145274237317043E308",
        ])
        .prop_map(dec),
        1 => any::<[u8; 16]>().prop_map(|b| RawBson::Decimal128(Decimal128::from_bytes(b))),
    ]
}

fn number_strategy() -> impl Strategy<Value = RawBson> {
    let two53 = 9_007_199_254_740_992i64;
    prop_oneof![
        2 => select(vec![0, 1, -1, 2, 10, 100, 12345, i32::MIN, i32::MAX]).prop_map(i32v),
        1 => any::<i32>().prop_map(i32v),
        2 => select(vec![
            0, 1, -1, 2, 10, two53 - 1, two53, two53 + 1, two53 + 2, -two53 - 1, i64::MIN,
            i64::MAX, i64::MAX - 1023, 1_000_000_000_000_000_000, 9_223_372_036_854_774_784,
        ])
        .prop_map(i64v),
        1 => any::<i64>().prop_map(i64v),
        3 => select(vec![
            0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.25, 1.5, 0.1, -0.1, 2.0, 10.0, 100.0, 1e-300,
            5e-324, -5e-324, f64::MIN_POSITIVE, f64::MAX, -f64::MAX, f64::INFINITY,
            f64::NEG_INFINITY, f64::NAN, 9_007_199_254_740_992.0, 9_007_199_254_740_994.0,
            9_223_372_036_854_775_808.0, -9_223_372_036_854_775_808.0, 1e20, 1e34, 1e35,
            12345.0, 1e308,
        ])
        .prop_map(f64v),
        1 => any::<u64>().prop_map(|b| f64v(f64::from_bits(b))),
        1 => (-1000i32..1000, -3i32..3).prop_map(|(m, e)| f64v(f64::from(m) * 10f64.powi(e))),
        3 => decimal_strategy(),
    ]
}

fn leaf_strategy() -> impl Strategy<Value = RawBson> {
    let small_str = "[a\\x00b\\x01é]{0,3}";
    prop_oneof![
        1 => select(vec![RawBson::MinKey, RawBson::MaxKey, RawBson::Null, RawBson::Undefined]),
        8 => number_strategy(),
        2 => small_str.prop_map(RawBson::String),
        1 => small_str.prop_map(RawBson::Symbol),
        1 => (select(vec![0u8, 2, 4, 0x80]), prop::collection::vec(select(vec![0u8, 1, 255]), 0..5))
            .prop_map(|(st, b)| bin(st, &b)),
        1 => select(vec![0u8, 1, 255]).prop_map(oid),
        1 => any::<bool>().prop_map(RawBson::Boolean),
        1 => select(vec![i64::MIN, -86_400_000, -1, 0, 1, i64::MAX]).prop_map(date),
        1 => (select(vec![0u32, 1, 1 << 31, u32::MAX]), select(vec![0u32, 1, u32::MAX]))
            .prop_map(|(t, i)| ts(t, i)),
        1 => ("[ab]{0,2}", "[im]{0,1}").prop_map(|(p, o)| regex(&p, &o)),
        1 => ("[ab]{0,2}", select(vec![0u8, 1])).prop_map(|(ns, id)| db_pointer(&ns, id)),
        1 => "[ab\\x00]{0,2}".prop_map(RawBson::JavaScriptCode),
        1 => ("[ab]{0,1}", select(vec![0i32, 1, 2]), any::<bool>()).prop_map(|(c, v, empty)| {
            code_scope(&c, if empty { rawdoc! {} } else { rawdoc! { "a": v } })
        }),
    ]
}

fn value_strategy() -> impl Strategy<Value = RawBson> {
    leaf_strategy().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(("[ab]{1,2}", inner.clone()), 0..4).prop_map(|items| {
                let mut d = RawDocumentBuf::new();
                for (k, v) in items {
                    d.append(CString::try_from(k).unwrap(), v);
                }
                RawBson::Document(d)
            }),
            prop::collection::vec(inner, 0..4).prop_map(arr),
        ]
    })
}

/// A Decimal128 `k` units in the 34th digit away from the double `x` rounded to 34 digits.
fn decimal_near(x: f64, k: i8) -> RawBson {
    let text = format!("{:.33e}", x.abs());
    let (mantissa, exp) = text.split_once('e').unwrap();
    let digits: u128 = mantissa.replace('.', "").parse().unwrap();
    let q = exp.parse::<i32>().unwrap() - 33;
    let c = digits
        .saturating_add_signed(i128::from(k))
        .min(10u128.pow(34) - 1);
    let sign = u128::from(x.is_sign_negative()) << 127;
    dec_bits(sign | (((q + 6176) as u128) << 113) | c)
}

/// Numbers adjacent to each other across types: doubles against their 34-digit decimal
/// neighbours, int64 against the doubles around them.
fn near_pair_strategy() -> impl Strategy<Value = (RawBson, RawBson)> {
    let finite = any::<u64>()
        .prop_map(f64::from_bits)
        .prop_filter("finite", |x| x.is_finite());
    let nice = select(vec![
        0.1,
        -0.1,
        0.3,
        1.0 / 3.0,
        2.5e-320,
        1e22,
        1e23,
        123.456,
        f64::MAX,
    ]);
    prop_oneof![
        (prop_oneof![finite, nice], -1i8..=1).prop_map(|(x, k)| (f64v(x), decimal_near(x, k))),
        (any::<i64>(), -2i64..=2, any::<u8>()).prop_map(|(i, d, shift)| {
            let i = i >> (shift % 64);
            (i64v(i.saturating_add(d)), f64v(i as f64))
        }),
    ]
}

/// Pairs biased toward the same type class, where ties and near-ties happen.
fn pair_strategy() -> impl Strategy<Value = (RawBson, RawBson)> {
    prop_oneof![
        (value_strategy(), value_strategy()),
        (number_strategy(), number_strategy()),
        (leaf_strategy(), leaf_strategy()),
        near_pair_strategy(),
    ]
}

fn check_pair(a: &RawBson, b: &RawBson) -> Result<(), TestCaseError> {
    let c = cmp(a, b);
    let (ea, eb) = (key(a, false), key(b, false));
    prop_assert_eq!(
        ea.cmp(&eb),
        c,
        "E order vs compare_values for {:?} / {:?}",
        a,
        b
    );
    prop_assert_eq!(
        key(a, true).cmp(&key(b, true)),
        c.reverse(),
        "descending {:?} / {:?}",
        a,
        b
    );
    prop_assert_eq!(cmp(b, a), c.reverse(), "antisymmetry {:?} / {:?}", a, b);
    prop_assert_eq!(cmp(a, a), Ordering::Equal);
    if c != Ordering::Equal {
        prop_assert!(
            !ea.starts_with(&eb) && !eb.starts_with(&ea),
            "prefix {:?} / {:?}",
            a,
            b
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn encoding_order_matches_compare((a, b) in pair_strategy()) {
        check_pair(&a, &b)?;
    }

    #[test]
    fn number_order_matches_compare(a in number_strategy(), b in number_strategy()) {
        check_pair(&a, &b)?;
    }

    #[test]
    fn near_numbers_order_matches_compare((a, b) in near_pair_strategy()) {
        check_pair(&a, &b)?;
    }

    #[test]
    fn compare_is_transitive(a in value_strategy(), b in value_strategy(), c in value_strategy()) {
        let mut v = [a, b, c];
        v.sort_by(cmp);
        let (ab, bc, ac) = (cmp(&v[0], &v[1]), cmp(&v[1], &v[2]), cmp(&v[0], &v[2]));
        prop_assert!(ab != Ordering::Greater && bc != Ordering::Greater && ac != Ordering::Greater);
        if ab == Ordering::Equal && bc == Ordering::Equal {
            prop_assert_eq!(ac, Ordering::Equal);
        }
        if ab == Ordering::Less || bc == Ordering::Less {
            prop_assert_eq!(ac, Ordering::Less);
        }
    }

    #[test]
    fn numbers_are_transitive(a in number_strategy(), b in number_strategy(), c in number_strategy()) {
        let mut v = [a, b, c];
        v.sort_by(cmp);
        prop_assert!(cmp(&v[0], &v[2]) != Ordering::Greater);
        if cmp(&v[0], &v[1]) == Ordering::Less || cmp(&v[1], &v[2]) == Ordering::Less {
            prop_assert_eq!(cmp(&v[0], &v[2]), Ordering::Less);
        }
    }

    #[test]
    fn compound_keys_compare_componentwise(
        (a1, b1) in pair_strategy(),
        (a2, b2) in pair_strategy(),
        d1 in any::<bool>(),
        d2 in any::<bool>(),
    ) {
        let compound = |x: &RawBson, y: &RawBson| {
            let mut k = Vec::new();
            encode_value(&mut k, x.as_raw_bson_ref(), d1).unwrap();
            encode_value(&mut k, y.as_raw_bson_ref(), d2).unwrap();
            k
        };
        let dir = |o: Ordering, d: bool| if d { o.reverse() } else { o };
        let expected = dir(cmp(&a1, &b1), d1).then(dir(cmp(&a2, &b2), d2));
        prop_assert_eq!(compound(&a1, &a2).cmp(&compound(&b1, &b2)), expected);
    }

    #[test]
    fn documents_order_matches_compare(
        a in prop::collection::vec(("[ab]", value_strategy()), 0..3),
        b in prop::collection::vec(("[ab]", value_strategy()), 0..3),
    ) {
        let build = |items: Vec<(String, RawBson)>| {
            let mut d = RawDocumentBuf::new();
            for (k, v) in items {
                d.append(CString::try_from(k).unwrap(), v);
            }
            d
        };
        let (a, b) = (build(a), build(b));
        let (mut ea, mut eb) = (Vec::new(), Vec::new());
        encode_document(&mut ea, &a, false).unwrap();
        encode_document(&mut eb, &b, false).unwrap();
        prop_assert_eq!(ea.cmp(&eb), compare_documents(&a, &b));
    }

    #[test]
    fn corrupted_bson_never_panics(
        v in value_strategy(),
        other in value_strategy(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut d = RawDocumentBuf::new();
        d.append(CString::try_from("v".to_owned()).unwrap(), v);
        d.append(CString::try_from("w".to_owned()).unwrap(), other.clone());
        let mut bytes = d.as_bytes().to_vec();
        // Keep the outer header valid so that the damage is inside.
        for (i, byte) in edits {
            let n = bytes.len();
            if n > 5 {
                bytes[4 + i.index(n - 5)] = byte;
            }
        }
        if let Ok(bad) = RawDocument::from_bytes(&bytes) {
            let mut out = Vec::new();
            let _ = encode_document(&mut out, bad, false);
            let _ = encode_document(&mut out, bad, true);
            prop_assert_eq!(compare_documents(bad, bad), Ordering::Equal);
            let c = compare_documents(bad, &d);
            prop_assert_eq!(compare_documents(&d, bad), c.reverse());
            if let Ok(Some(v)) = bad.get("v") {
                let _ = compare_values(v, other.as_raw_bson_ref());
                let _ = encode_to_vec(v, false);
            }
        }
    }
}
