//! Property tests for index keys and bounds.
//!
//! Soundness (the property everything else rests on): for random documents, random filters
//! (comparisons, `$in`, `$exists`, null, negations, `$elemMatch`, regex prefixes, `$or`) and
//! random single/compound indexes (ascending, descending, sparse, hashed), every document
//! matching the filter has an entry whose full key (`K1…Kn E(_id)`) lies inside
//! `key_ranges()`. When the bounds claim exactness, no other document has one. Parsing,
//! key generation and bounds never panic.

use std::ops::Bound;

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_query::filter::Filter;
use cairn_query::index::bounds::{KeyRange, may_bound};
use cairn_query::index::keys::generate;
use cairn_query::index::{bounds_for, bounds_for_index, key_components, validate_spec};
use cairn_storage::index::{IndexKeys, IndexMeta, IndexState};
use cairn_storage::keys::encode_value;
use proptest::prelude::*;

fn scalar() -> impl Strategy<Value = RawBson> {
    prop_oneof![
        (-2i32..4).prop_map(RawBson::Int32),
        (-2i64..4).prop_map(RawBson::Int64),
        prop_oneof![
            Just(1.5f64),
            Just(-0.0),
            Just(2.0),
            Just(f64::NAN),
            Just(f64::INFINITY)
        ]
        .prop_map(RawBson::Double),
        prop_oneof![Just(""), Just("a"), Just("ab"), Just("b")]
            .prop_map(|s| RawBson::String(s.into())),
        Just(RawBson::Null),
        Just(RawBson::Undefined),
        any::<bool>().prop_map(RawBson::Boolean),
        Just(RawBson::MinKey),
        Just(RawBson::MaxKey),
    ]
}

fn array(items: Vec<RawBson>) -> RawBson {
    let mut a = RawArrayBuf::new();
    for i in items {
        a.push(i);
    }
    RawBson::Array(a)
}

fn sub_doc(c: Option<RawBson>) -> RawBson {
    let mut d = RawDocumentBuf::new();
    if let Some(c) = c {
        d.append(cstr!("c"), c);
    }
    RawBson::Document(d)
}

fn value() -> impl Strategy<Value = RawBson> {
    let leaf = scalar();
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(array),
            prop::option::of(inner.clone()).prop_map(sub_doc),
            prop::collection::vec(prop::option::of(inner).prop_map(sub_doc), 0..3).prop_map(array),
        ]
    })
}

fn document() -> impl Strategy<Value = RawDocumentBuf> {
    (prop::option::of(value()), prop::option::of(value())).prop_map(|(a, b)| {
        let mut d = RawDocumentBuf::new();
        if let Some(a) = a {
            d.append(cstr!("a"), a);
        }
        if let Some(b) = b {
            d.append(cstr!("b"), b);
        }
        d
    })
}

const PATHS: &[&str] = &["a", "b", "a.c", "a.0"];

fn path() -> impl Strategy<Value = &'static str> {
    prop::sample::select(PATHS)
}

fn op_doc(op: &str, v: RawBson) -> RawBson {
    let mut d = RawDocumentBuf::new();
    if let Ok(k) = <&bson::raw::CStr>::try_from(op) {
        d.append(k, v);
    }
    RawBson::Document(d)
}

/// One predicate `{path: …}` as a filter document element.
fn predicate() -> impl Strategy<Value = (String, RawBson)> {
    let cmp = prop::sample::select(&["$eq", "$gt", "$gte", "$lt", "$lte", "$ne"][..]);
    prop_oneof![
        4 => (path(), cmp, scalar()).prop_map(|(p, op, v)| (p.to_string(), op_doc(op, v))),
        1 => (path(), value()).prop_map(|(p, v)| (p.to_string(), op_doc("$eq", v))),
        2 => (path(), prop::collection::vec(scalar(), 0..4), any::<bool>()).prop_map(|(p, vs, nin)| {
            (p.to_string(), op_doc(if nin { "$nin" } else { "$in" }, array(vs)))
        }),
        1 => (path(), any::<bool>()).prop_map(|(p, e)| (p.to_string(), op_doc("$exists", RawBson::Boolean(e)))),
        1 => path().prop_map(|p| (p.to_string(), RawBson::Null)),
        1 => (path(), scalar()).prop_map(|(p, v)| (p.to_string(), op_doc("$not", op_doc("$gt", v)))),
        1 => (path(), scalar(), scalar()).prop_map(|(p, lo, hi)| {
            let mut inner = RawDocumentBuf::new();
            inner.append(cstr!("$gte"), lo);
            inner.append(cstr!("$lt"), hi);
            (p.to_string(), op_doc("$elemMatch", RawBson::Document(inner)))
        }),
        1 => (path(), prop::sample::select(&["^a", "^ab", "b", "^a.", "^$"][..]))
            .prop_map(|(p, r)| (p.to_string(), op_doc("$regex", RawBson::String(r.into())))),
        1 => (scalar(), prop::sample::select(&["$eq", "$gte", "$lt", "$ne"][..])).prop_map(|(x, op)| {
            let mut m = RawDocumentBuf::new();
            m.append(cstr!("c"), op_doc(op, x));
            ("a".to_string(), op_doc("$elemMatch", RawBson::Document(m)))
        }),
    ]
}

fn filter() -> impl Strategy<Value = RawDocumentBuf> {
    (
        prop::collection::vec(predicate(), 1..4),
        prop::option::of((path(), scalar(), scalar())),
    )
        .prop_map(|(preds, or)| {
            let mut d = RawDocumentBuf::new();
            let mut and = RawArrayBuf::new();
            for (p, v) in preds {
                let mut one = RawDocumentBuf::new();
                if let Ok(k) = <&bson::raw::CStr>::try_from(p.as_str()) {
                    one.append(k, v);
                }
                and.push(one);
            }
            if let Some((p, x, y)) = or {
                let mut branches = RawArrayBuf::new();
                for v in [x, y] {
                    let mut one = RawDocumentBuf::new();
                    if let Ok(k) = <&bson::raw::CStr>::try_from(p) {
                        one.append(k, v);
                    }
                    branches.push(one);
                }
                let mut o = RawDocumentBuf::new();
                o.append(cstr!("$or"), branches);
                and.push(o);
            }
            d.append(cstr!("$and"), and);
            d
        })
}

#[derive(Debug, Clone)]
struct IndexShape {
    fields: Vec<(&'static str, i32)>,
    sparse: bool,
    /// Index into [`PARTIAL_FILTERS`] (only when not sparse).
    partial: Option<usize>,
}

const PARTIAL_FILTERS: &[&str] = &["a_gt_0", "b_exists", "a_in", "a_lte_2_b_str"];

fn partial_filter(i: usize) -> RawDocumentBuf {
    match i {
        0 => bson::rawdoc! {"a": {"$gt": 0}},
        1 => bson::rawdoc! {"b": {"$exists": true}},
        2 => bson::rawdoc! {"a": {"$in": [1, 2, "a"]}},
        _ => bson::rawdoc! {"a": {"$lte": 2}, "b": {"$type": "string"}},
    }
}

fn index() -> impl Strategy<Value = IndexShape> {
    (
        prop::sample::subsequence(PATHS, 1..=2),
        prop::collection::vec(prop::sample::select(&[1, -1, 0][..]), 2),
        any::<bool>(),
        prop::option::of(0..PARTIAL_FILTERS.len()),
    )
        .prop_map(|(paths, dirs, sparse, partial)| {
            let fields = paths
                .into_iter()
                .zip(dirs)
                .enumerate()
                // 0 stands for "hashed" on the first field only.
                .map(|(i, (p, d))| (p, if d == 0 && i > 0 { 1 } else { d }))
                .collect();
            IndexShape {
                fields,
                sparse,
                partial: partial.filter(|_| !sparse),
            }
        })
}

fn spec_of(shape: &IndexShape) -> RawDocumentBuf {
    let mut key = RawDocumentBuf::new();
    for (p, d) in &shape.fields {
        if let Ok(k) = <&bson::raw::CStr>::try_from(*p) {
            if *d == 0 {
                key.append(k, "hashed");
            } else {
                key.append(k, *d);
            }
        }
    }
    let mut spec = RawDocumentBuf::new();
    spec.append(cstr!("v"), 2);
    spec.append(cstr!("key"), key);
    spec.append(cstr!("name"), "ix");
    if shape.sparse {
        spec.append(cstr!("sparse"), true);
    }
    if let Some(i) = shape.partial {
        spec.append(cstr!("partialFilterExpression"), partial_filter(i));
    }
    spec
}

fn in_ranges(ranges: &[KeyRange], key: &[u8]) -> bool {
    ranges.iter().any(|(lo, hi)| {
        let above = match lo {
            Bound::Included(l) => key >= l.as_slice(),
            Bound::Excluded(l) => key > l.as_slice(),
            Bound::Unbounded => true,
        };
        let below = match hi {
            Bound::Included(h) => key <= h.as_slice(),
            Bound::Excluded(h) => key < h.as_slice(),
            Bound::Unbounded => true,
        };
        above && below
    })
}

fn full_key(entry_key: &[u8], id: i32) -> Vec<u8> {
    let mut k = entry_key.to_vec();
    encode_value(&mut k, RawBsonRef::Int32(id), false).unwrap();
    k
}

fn check(
    docs: &[RawDocumentBuf],
    filter_doc: &RawDocument,
    shape: &IndexShape,
) -> Result<(), TestCaseError> {
    let Ok(filter) = Filter::parse(filter_doc) else {
        return Ok(());
    };
    let spec = spec_of(shape);
    prop_assert!(validate_spec(&spec).is_ok(), "{spec:?}");
    let comps = key_components(spec.get_document("key").unwrap());
    let mut indexed: Vec<(usize, IndexKeys)> = Vec::new();
    let mut multikey = false;
    let partial = shape
        .partial
        .map(|i| Filter::parse(&partial_filter(i)).unwrap());
    for (i, d) in docs.iter().enumerate() {
        if partial.as_ref().is_some_and(|p| !p.matches(d)) {
            indexed.push((i, IndexKeys::default()));
            continue;
        }
        // Documents whose keys fail (parallel arrays, arrays under a hashed field) could not
        // have been inserted.
        if let Ok(k) = generate(&comps, shape.sparse, d) {
            multikey |= k.multikey;
            indexed.push((i, k));
        }
    }
    let meta = IndexMeta {
        name: "ix".into(),
        spec: spec.clone(),
        space: 1,
        state: IndexState::Ready,
        multikey,
    };
    let hashed = shape.fields.iter().any(|(_, d)| *d == 0);
    let bounds = if hashed || shape.sparse || shape.partial.is_some() {
        match bounds_for_index(filter.expr(), &meta) {
            Some(b) => b,
            None => return Ok(()),
        }
    } else {
        let fields: Vec<(String, bool)> = shape
            .fields
            .iter()
            .map(|(p, d)| (p.to_string(), *d < 0))
            .collect();
        let b = bounds_for(filter.expr(), &fields, multikey);
        // Same bounds through the index metadata.
        let via_meta = bounds_for_index(filter.expr(), &meta);
        prop_assert_eq!(via_meta.as_ref(), Some(&b));
        b
    };
    let ranges = bounds.key_ranges();
    let exact = bounds.is_exact_for(filter.expr());
    // The planner's one-pass form agrees.
    prop_assert_eq!(bounds.ranges_and_exactness(), (ranges.clone(), exact));
    // A leading field the filter cannot bound (the planner skips such indexes) is full.
    if let Some(lead) = bounds.fields.first()
        && !may_bound(filter.expr(), &lead.path)
    {
        prop_assert!(
            matches!(lead.intervals.as_slice(), [only] if only.is_full()),
            "may_bound says {:?} cannot bound {}",
            filter_doc,
            lead.path
        );
    }
    let _ = bounds.explain();
    // Ranges the planner reads without checking entries hold only entries inside the bounds.
    let (_, _, unchecked) = bounds.planned_ranges();
    if unchecked {
        for (i, keys) in &indexed {
            let id = i32::try_from(*i).unwrap();
            for e in &keys.entries {
                if in_ranges(&ranges, &full_key(&e.key, id)) {
                    prop_assert!(
                        bounds.contains_values(&e.values),
                        "entry {:?} of {:?} is in the ranges but outside bounds {:?}",
                        e.values,
                        docs[*i],
                        cairn_storage::display::document(&bounds.explain())
                    );
                }
            }
        }
    }
    for (i, keys) in &indexed {
        let doc = &docs[*i];
        let id = i32::try_from(*i).unwrap();
        let hit = keys
            .entries
            .iter()
            .any(|e| in_ranges(&ranges, &full_key(&e.key, id)));
        if filter.matches(doc) {
            prop_assert!(
                hit,
                "matching document {:?} has no entry in ranges; filter {:?} index {:?} multikey \
                 {} bounds {:?} entries {:?}",
                doc,
                filter_doc,
                spec,
                multikey,
                cairn_storage::display::document(&bounds.explain()),
                keys.entries
            );
            prop_assert!(
                keys.entries
                    .iter()
                    .any(|e| bounds.contains_values(&e.values)),
                "contains_values rejects every entry of a matching document {doc:?}"
            );
        } else if exact {
            prop_assert!(
                !hit,
                "bounds claim exactness but non-matching {:?} has an entry inside; filter {:?} \
                 index {:?} bounds {:?}",
                doc,
                filter_doc,
                spec,
                cairn_storage::display::document(&bounds.explain())
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn bounds_are_sound(
        docs in prop::collection::vec(document(), 1..12),
        filter_doc in filter(),
        shape in index(),
    ) {
        check(&docs, &filter_doc, &shape)?;
    }

    #[test]
    fn key_generation_never_panics(doc in document(), shape in index()) {
        let spec = spec_of(&shape);
        let comps = key_components(spec.get_document("key").unwrap());
        let _ = generate(&comps, shape.sparse, &doc);
    }

    #[test]
    fn spec_validation_never_panics(
        key in prop::collection::vec((prop::sample::select(&["a", "", "$x", "a.b", "a..b", "_id", "$**"][..]), value()), 0..3),
        extra in prop::option::of((prop::sample::select(&["unique", "sparse", "expireAfterSeconds", "partialFilterExpression", "hidden", "v", "collation", "bogus"][..]), value())),
    ) {
        let mut k = RawDocumentBuf::new();
        for (p, v) in key {
            if let Ok(c) = <&bson::raw::CStr>::try_from(p) {
                k.append(c, v);
            }
        }
        let mut spec = RawDocumentBuf::new();
        spec.append(cstr!("key"), k);
        spec.append(cstr!("name"), "x");
        if let Some((f, v)) = extra
            && let Ok(c) = <&bson::raw::CStr>::try_from(f)
        {
            spec.append(c, v);
        }
        let _ = validate_spec(&spec);
    }
}

/// Found by `bounds_are_sound`: an empty array at the position of `a.0` is keyed undefined on
/// a non-multikey index, so `$nin: [null]` must not leave undefined out of the bounds.
#[test]
fn empty_array_at_a_position_stays_in_negated_null_bounds() {
    let docs = [bson::rawdoc! {"a": [[]]}, bson::rawdoc! {"a": [null]}];
    let filter = bson::rawdoc! {"$and": [{"a.0": {"$nin": [null]}}]};
    let shape = IndexShape {
        fields: vec![("a.0", 1)],
        sparse: false,
        partial: None,
    };
    check(&docs, &filter, &shape).unwrap();
}
