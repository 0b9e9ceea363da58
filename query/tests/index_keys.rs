//! Index key generation: documents × key patterns → entries, multikey flag and errors
//! (cases after MongoDB's btree_key_generator_test.cpp and the manual's multikey pages).

use bson::{RawDocument, RawDocumentBuf, rawdoc};
use cairn_query::index::keys::generate;
use cairn_query::index::{QueryKeyGen, hashed_value, key_components};
use cairn_storage::display;
use cairn_storage::index::{IndexKeyGen, IndexMeta, IndexState};
use cairn_storage::keys::encode_value;

/// Entries as displayed values, and the multikey flag.
type Shown = (Vec<Vec<String>>, bool);

/// The entries or `Err((code, message))`.
fn gen_keys(
    pattern: &RawDocument,
    doc: &RawDocument,
    sparse: bool,
) -> Result<Shown, (i32, String)> {
    let comps = key_components(pattern);
    match generate(&comps, sparse, doc) {
        Ok(k) => {
            let entries = k
                .entries
                .iter()
                .map(|e| {
                    e.values
                        .iter()
                        .map(|el| display::value(el.unwrap().1))
                        .collect()
                })
                .collect();
            Ok((entries, k.multikey))
        }
        Err(e) => Err((e.code, e.message)),
    }
}

fn v(rows: &[&[&str]]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| r.iter().map(|s| s.to_string()).collect())
        .collect()
}

#[test]
fn table() {
    type Case = (RawDocumentBuf, RawDocumentBuf, Vec<Vec<String>>, bool);
    let cases: Vec<Case> = vec![
        (rawdoc! {"a": 1}, rawdoc! {"a": 5}, v(&[&["5"]]), false),
        (rawdoc! {"a": 1}, rawdoc! {"b": 5}, v(&[&["null"]]), false),
        (
            rawdoc! {"a": 1},
            rawdoc! {"a": null},
            v(&[&["null"]]),
            false,
        ),
        (
            rawdoc! {"a": 1},
            rawdoc! {"a": [3, 1, 2]},
            v(&[&["1"], &["2"], &["3"]]),
            true,
        ),
        // A single-element array still makes the index multikey.
        (rawdoc! {"a": 1}, rawdoc! {"a": [7]}, v(&[&["7"]]), true),
        // Empty array at the end of the path: undefined.
        (
            rawdoc! {"a": 1},
            rawdoc! {"a": []},
            v(&[&["undefined"]]),
            true,
        ),
        // Nested arrays stay whole.
        (
            rawdoc! {"a": 1},
            rawdoc! {"a": [[1, 2], 3]},
            v(&[&["3"], &["[ 1, 2 ]"]]),
            true,
        ),
        // Duplicates collapse (the first value wins: int 1, not 1.0).
        (
            rawdoc! {"a": 1},
            rawdoc! {"a": [1, 1.0, 2, 1]},
            v(&[&["1"], &["2"]]),
            true,
        ),
        (
            rawdoc! {"a": 1, "b": 1},
            rawdoc! {"a": [1, 2], "b": 3},
            v(&[&["1", "3"], &["2", "3"]]),
            true,
        ),
        (
            rawdoc! {"a": 1, "b": 1},
            rawdoc! {"a": 1},
            v(&[&["1", "null"]]),
            false,
        ),
        (
            rawdoc! {"a.b": 1},
            rawdoc! {"a": {"b": 4}},
            v(&[&["4"]]),
            false,
        ),
        (rawdoc! {"a.b": 1}, rawdoc! {"a": 4}, v(&[&["null"]]), false),
        (
            rawdoc! {"a.b": 1},
            rawdoc! {"a": [{"b": 1}, {"b": 2}]},
            v(&[&["1"], &["2"]]),
            true,
        ),
        (
            rawdoc! {"a.b": 1},
            rawdoc! {"a": [{"b": 1}, {"c": 2}]},
            v(&[&["null"], &["1"]]),
            true,
        ),
        // Scalars in an array before the end of the path: null.
        (
            rawdoc! {"a.b": 1},
            rawdoc! {"a": [1, 2]},
            v(&[&["null"]]),
            true,
        ),
        (
            rawdoc! {"a.b": 1},
            rawdoc! {"a": {"b": [1, 2]}},
            v(&[&["1"], &["2"]]),
            true,
        ),
        // Empty array in the middle: the rest is missing.
        (rawdoc! {"a.b": 1}, rawdoc! {"a": []}, v(&[&["null"]]), true),
        (
            rawdoc! {"a.b": 1},
            rawdoc! {"a": [{"b": []}]},
            v(&[&["undefined"]]),
            true,
        ),
        (
            rawdoc! {"a.b.c": 1},
            rawdoc! {"a": [{"b": [{"c": 1}, {"c": 2}]}, {"b": {"c": 3}}]},
            v(&[&["1"], &["2"], &["3"]]),
            true,
        ),
        // Paths through the same array pair up element by element.
        (
            rawdoc! {"a.b": 1, "a.c": 1},
            rawdoc! {"a": [{"b": 1, "c": 2}, {"b": 3, "c": 4}]},
            v(&[&["1", "2"], &["3", "4"]]),
            true,
        ),
        (
            rawdoc! {"a": 1, "b.c": 1},
            rawdoc! {"a": [1, 2], "b": {"c": 3}},
            v(&[&["1", "3"], &["2", "3"]]),
            true,
        ),
        // Positional components select an element and are not multikey.
        (
            rawdoc! {"a.0": 1},
            rawdoc! {"a": [5, 6]},
            v(&[&["5"]]),
            false,
        ),
        (
            rawdoc! {"a.1.b": 1},
            rawdoc! {"a": [{"b": 1}, {"b": 2}]},
            v(&[&["2"]]),
            false,
        ),
        (
            rawdoc! {"a.0.b": 1},
            rawdoc! {"a": [{"b": [1, 2]}]},
            v(&[&["1"], &["2"]]),
            true,
        ),
        (
            rawdoc! {"a.5": 1},
            rawdoc! {"a": [5, 6]},
            v(&[&["null"]]),
            true,
        ),
        // An object with a numeric field name is just a field.
        (
            rawdoc! {"a.0": 1},
            rawdoc! {"a": {"0": 9}},
            v(&[&["9"]]),
            false,
        ),
        (
            rawdoc! {"a": -1},
            rawdoc! {"a": [1, 2]},
            v(&[&["2"], &["1"]]),
            true,
        ),
    ];
    for (pattern, doc, want, multikey) in cases {
        let got = gen_keys(&pattern, &doc, false);
        assert_eq!(got, Ok((want, multikey)), "{pattern:?} {doc:?}");
    }
}

#[test]
fn parallel_arrays_and_other_errors() {
    let cases: Vec<(RawDocumentBuf, RawDocumentBuf, i32, &str)> = vec![
        (
            rawdoc! {"a": 1, "b": 1},
            rawdoc! {"a": [1], "b": [2]},
            171,
            "cannot index parallel arrays [b] [a]",
        ),
        (
            rawdoc! {"a.b": 1, "a.c": 1},
            rawdoc! {"a": {"b": [1], "c": [2]}},
            171,
            "cannot index parallel arrays [c] [b]",
        ),
        (
            rawdoc! {"a.b": 1, "a.c": 1},
            rawdoc! {"a": [{"b": [1], "c": [2]}]},
            171,
            "cannot index parallel arrays [c] [b]",
        ),
        (
            rawdoc! {"a.0": 1},
            rawdoc! {"a": [{"0": 1}]},
            16746,
            "Ambiguous field name found in array (do not use numeric field names in embedded \
             elements in an array), field: '0' for array: { 0: { 0: 1 } }",
        ),
        (
            rawdoc! {"a": "hashed"},
            rawdoc! {"a": [1]},
            16766,
            "Error: hashed indexes do not currently support array values. Found array at path: a",
        ),
        (
            rawdoc! {"x": 1, "a.b": "hashed"},
            rawdoc! {"a": [{"b": 1}]},
            16766,
            "Error: hashed indexes do not currently support array values. Found array at path: a",
        ),
    ];
    for (pattern, doc, code, msg) in cases {
        let got = gen_keys(&pattern, &doc, false);
        assert_eq!(got, Err((code, msg.to_string())), "{pattern:?} {doc:?}");
    }
    // The same array reached twice is not parallel.
    assert!(
        gen_keys(
            &rawdoc! {"a": 1, "a.b": 1},
            &rawdoc! {"a": [{"b": 1}]},
            false
        )
        .is_ok()
    );
}

#[test]
fn sparse() {
    let p = rawdoc! {"a": 1};
    assert_eq!(gen_keys(&p, &rawdoc! {"b": 1}, true), Ok((vec![], false)));
    assert_eq!(
        gen_keys(&p, &rawdoc! {"a": null}, true),
        Ok((v(&[&["null"]]), false))
    );
    let c = rawdoc! {"a": 1, "b": 1};
    assert_eq!(
        gen_keys(&c, &rawdoc! {"b": 2}, true),
        Ok((v(&[&["null", "2"]]), false))
    );
    assert_eq!(gen_keys(&c, &rawdoc! {"c": 2}, true), Ok((vec![], false)));
    // Per key: the element without `b` is skipped.
    assert_eq!(
        gen_keys(
            &rawdoc! {"a.b": 1},
            &rawdoc! {"a": [{"b": 1}, {"c": 1}]},
            true
        ),
        Ok((v(&[&["1"]]), true))
    );
    // Empty arrays are indexed (undefined) even when sparse.
    assert_eq!(
        gen_keys(&p, &rawdoc! {"a": []}, true),
        Ok((v(&[&["undefined"]]), true))
    );
}

#[test]
fn key_bytes_and_directions() {
    let comps = key_components(&rawdoc! {"a": 1, "b": -1});
    let k = generate(&comps, false, &rawdoc! {"a": 1, "b": "x"}).unwrap();
    let mut want = Vec::new();
    encode_value(&mut want, bson::RawBsonRef::Int32(1), false).unwrap();
    encode_value(&mut want, bson::RawBsonRef::String("x"), true).unwrap();
    assert_eq!(k.entries[0].key, want);
    // Missing is stored as null, not as the "missing" tag.
    let k = generate(&comps, false, &rawdoc! {}).unwrap();
    let mut want = Vec::new();
    encode_value(&mut want, bson::RawBsonRef::Null, false).unwrap();
    encode_value(&mut want, bson::RawBsonRef::Null, true).unwrap();
    assert_eq!(k.entries[0].key, want);
    // Decimal -1 is descending (MongoDB's Ordering: number() < 0).
    let dec = key_components(&rawdoc! {"a": bson::Decimal128::from_bytes([
        0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0xB0
    ])});
    assert!(dec[0].descending());
}

#[test]
fn hashed_keys() {
    let p = rawdoc! {"a": "hashed"};
    let one = hashed_value(bson::RawBsonRef::Int32(1)).to_string();
    for doc in [
        rawdoc! {"a": 1},
        rawdoc! {"a": 1.0},
        rawdoc! {"a": 1i64},
        rawdoc! {"a": 1.5},
    ] {
        assert_eq!(
            gen_keys(&p, &doc, false),
            Ok((v(&[&[&one]]), false)),
            "{doc:?}"
        );
    }
    let null = hashed_value(bson::RawBsonRef::Null).to_string();
    assert_eq!(
        gen_keys(&p, &rawdoc! {}, false),
        Ok((v(&[&[&null]]), false))
    );
    assert_eq!(gen_keys(&p, &rawdoc! {}, true), Ok((vec![], false)));
    // Compound hashed: the other fields keep their values.
    let c = rawdoc! {"a": "hashed", "b": 1};
    assert_eq!(
        gen_keys(&c, &rawdoc! {"a": 1, "b": "x"}, false),
        Ok((v(&[&[&one, "\"x\""]]), false))
    );
    // MongoDB's own check value.
    assert_eq!(
        hashed_value(bson::RawBsonRef::Int32(42)),
        -944302157085130861
    );
}

fn meta(spec: RawDocumentBuf) -> IndexMeta {
    IndexMeta {
        name: spec.get_str("name").unwrap().to_string(),
        spec,
        space: 7,
        state: IndexState::Ready,
        multikey: false,
    }
}

#[test]
fn partial_filter_through_the_trait() {
    let kg = QueryKeyGen::new();
    let m = meta(rawdoc! {
        "v": 2, "key": {"a": 1}, "name": "a_1",
        "partialFilterExpression": {"a": {"$gt": 5}}
    });
    assert!(kg.keys(&m, &rawdoc! {"a": 3}).unwrap().entries.is_empty());
    assert_eq!(kg.keys(&m, &rawdoc! {"a": 7}).unwrap().entries.len(), 1);
    // Cached: a second call reuses the parsed filter and agrees.
    assert_eq!(kg.keys(&m, &rawdoc! {"a": 9}).unwrap().entries.len(), 1);
    // A different filter under the same name is not confused with the cached one.
    let m2 = meta(rawdoc! {
        "v": 2, "key": {"a": 1}, "name": "a_1",
        "partialFilterExpression": {"a": {"$lt": 5}}
    });
    assert!(kg.keys(&m2, &rawdoc! {"a": 7}).unwrap().entries.is_empty());
    assert_eq!(kg.keys(&m2, &rawdoc! {"a": 3}).unwrap().entries.len(), 1);
    // Errors surface as storage errors.
    let p = meta(rawdoc! {"v": 2, "key": {"a": 1, "b": 1}, "name": "ab"});
    let e = kg.keys(&p, &rawdoc! {"a": [1], "b": [1]}).unwrap_err();
    assert!(e.to_string().contains("parallel arrays"), "{e}");
    let s = meta(rawdoc! {"v": 2, "key": {"a": 1}, "name": "a_1", "sparse": true});
    assert!(kg.keys(&s, &rawdoc! {}).unwrap().entries.is_empty());
}

#[test]
fn prepared_indexes_follow_their_specification() {
    // The key generator prepares each specification once; a specification replaced under the
    // same name (other key, other options) is prepared afresh, never served from the cache.
    let kg = QueryKeyGen::new();
    let doc = rawdoc! {"_id": 1, "a": 5, "b": "x"};
    let a = meta(rawdoc! {"v": 2, "key": {"a": 1}, "name": "i"});
    let b = meta(rawdoc! {"v": 2, "key": {"b": -1}, "name": "i"});
    let sparse = meta(rawdoc! {"v": 2, "key": {"c": 1}, "name": "i", "sparse": true});
    let dense = meta(rawdoc! {"v": 2, "key": {"c": 1}, "name": "i"});
    for _ in 0..2 {
        let ka = kg.keys(&a, &doc).unwrap();
        assert_eq!(ka.entries[0].values, rawdoc! {"0": 5});
        let kb = kg.keys(&b, &doc).unwrap();
        assert_eq!(kb.entries[0].values, rawdoc! {"0": "x"});
        assert_ne!(ka.entries[0].key, kb.entries[0].key);
        assert!(kg.keys(&sparse, &doc).unwrap().entries.is_empty());
        assert_eq!(
            kg.keys(&dense, &doc).unwrap().entries[0].values,
            rawdoc! {"0": null}
        );
    }
    // Values documents name components "0", "1", …: a wide compound key as well.
    let mut key = RawDocumentBuf::new();
    let mut wide = RawDocumentBuf::new();
    for i in 0..32 {
        let f = format!("f{i}");
        key.append(<&bson::raw::CStr>::try_from(f.as_str()).unwrap(), 1);
        wide.append(<&bson::raw::CStr>::try_from(f.as_str()).unwrap(), i);
    }
    let w = meta(rawdoc! {"v": 2, "key": key, "name": "wide"});
    let values = &kg.keys(&w, &wide).unwrap().entries[0].values;
    assert_eq!(values.get_i32("0").unwrap(), 0);
    assert_eq!(values.get_i32("31").unwrap(), 31);
    assert_eq!(values.iter().count(), 32);
}

#[test]
fn many_elements_linear() {
    let mut arr = bson::RawArrayBuf::new();
    for i in 0..20_000 {
        arr.push(rawdoc! {"b": i, "c": i % 7});
    }
    let mut doc = RawDocumentBuf::new();
    doc.append(bson::raw::cstr!("a"), arr);
    let comps = key_components(&rawdoc! {"a.b": 1, "a.c": 1});
    let k = generate(&comps, false, &doc).unwrap();
    assert_eq!(k.entries.len(), 20_000);
    assert!(k.multikey);
}
