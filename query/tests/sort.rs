//! Sort specifications, sort keys and the `Sorter`: MongoDB 7.0 behaviour pinned with table
//! tests (sources: sort_pattern.cpp, sort_key_generator.cpp, btree_key_generator.cpp,
//! FerretDB's query_test.go / sorting blog, DOCS-2760) and property tests.

use std::cmp::Ordering;

use bson::{Bson, Document, RawDocumentBuf, doc, rawdoc};
use cairn_query::QueryError;
use cairn_query::sort::{DEFAULT_MEMORY_LIMIT_BYTES, SortSpec, Sorter};
use cairn_query::storage::display;
use proptest::prelude::*;

fn code(e: &QueryError) -> i32 {
    match e {
        QueryError::BadValue(_) => 2,
        QueryError::FailedToParse(_) => 9,
        QueryError::TypeMismatch(_) => 14,
        QueryError::DollarPrefixedFieldName(_) => 52,
        QueryError::InvalidIdField(_) => 53,
        QueryError::NotImplemented(_) => 238,
        QueryError::Location(c, _) => *c,
        QueryError::Storage(_) => -1,
    }
}

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("encodable")
}

fn spec(d: Document) -> SortSpec {
    SortSpec::parse(&raw(&d)).unwrap_or_else(|e| panic!("{d}: {e:?}"))
}

fn parse_err(d: Document) -> (i32, String) {
    match SortSpec::parse(&raw(&d)) {
        Ok(s) => panic!("{d}: parsed as {s:?}"),
        Err(e) => (code(&e), e.to_string()),
    }
}

fn id_of(d: &RawDocumentBuf) -> String {
    match d.get("_id").ok().flatten() {
        Some(bson::RawBsonRef::String(s)) => s.to_string(),
        Some(v) => display::value(v),
        None => "<none>".into(),
    }
}

/// Sorts `docs` (in insertion order) with `s` through the `Sorter` and returns the `_id`s.
fn sorted_ids(s: &SortSpec, docs: &[Document]) -> Vec<String> {
    let mut sorter = Sorter::new(s.clone(), None, DEFAULT_MEMORY_LIMIT_BYTES, false, None);
    for d in docs {
        sorter.push(raw(d)).expect("push");
    }
    sorter
        .finish()
        .expect("finish")
        .map(|d| id_of(&d.expect("doc")))
        .collect()
}

fn with_ids(values: Vec<(&str, Option<Bson>)>) -> Vec<Document> {
    values
        .into_iter()
        .map(|(id, v)| {
            let mut d = doc! {"_id": id};
            if let Some(v) = v {
                d.insert("a", v);
            }
            d
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

#[test]
fn parse_errors_match_mongodb() {
    // FerretDB integration/query_test.go TestQuerySortErrors (recorded against MongoDB).
    let (c, m) = parse_err(doc! {"asc": "123"});
    assert_eq!(
        (c, m.as_str()),
        (15974, r#"Illegal key in $sort specification: asc: "123""#)
    );
    let ordering = "$sort key ordering must be 1 (for ascending) or -1 (for descending)";
    for bad in [
        doc! {"asc": 42.12},
        doc! {"asc": 12},
        doc! {"asc": i64::MAX},
        doc! {"a": 0},
        doc! {"a": 0.5},
        doc! {"a": f64::NAN},
        doc! {"a": Bson::Decimal128("1.5".parse().unwrap())},
    ] {
        assert_eq!(
            parse_err(bad.clone()),
            (15975, ordering.to_string()),
            "{bad}"
        );
    }
    assert_eq!(
        parse_err(doc! {"a": true}),
        (15974, "Illegal key in $sort specification: a: true".into())
    );
    assert_eq!(parse_err(doc! {"a": Bson::Null}).0, 15974);
    assert_eq!(parse_err(doc! {"a": [1]}).0, 15974);
    // FieldPath rules.
    assert_eq!(parse_err(doc! {"": 1}).0, 40352);
    assert_eq!(parse_err(doc! {"a.": 1}).0, 40353);
    assert_eq!(parse_err(doc! {"a..b": 1}).0, 15998);
    assert_eq!(parse_err(doc! {"$a": 1}).0, 16410);
    assert_eq!(parse_err(doc! {"a.$b": -1}).0, 16410);
    // The direction is checked before the path.
    assert_eq!(parse_err(doc! {"$a": 2}).0, 15975);
    // $meta sorts.
    assert_eq!(parse_err(doc! {"a": {"b": 1}}).0, 17312);
    assert_eq!(parse_err(doc! {"a": {}}).0, 17312);
    assert_eq!(parse_err(doc! {"a": {"$meta": "textScore", "b": 1}}).0, 9);
    assert_eq!(parse_err(doc! {"a": {"$meta": 1}}).0, 17307);
    assert_eq!(
        parse_err(doc! {"a": {"$meta": "bogus"}}),
        (17308, "Unsupported argument to $meta: bogus".into())
    );
    assert_eq!(
        parse_err(doc! {"a": {"$meta": "indexKey"}}),
        (31138, r#"Illegal $meta sort: $meta: "indexKey""#.into())
    );
    assert_eq!(parse_err(doc! {"a": {"$meta": "textScore"}}).0, 238);
    assert_eq!(parse_err(doc! {"a": {"$meta": "randVal"}}).0, 238);
    // At most 32 fields (Ordering::make).
    let mut wide = Document::new();
    for i in 0..33 {
        wide.insert(format!("f{i}"), 1);
    }
    assert_eq!(parse_err(wide.clone()).0, 13103);
    wide.remove("f32");
    assert_eq!(spec(wide).fields().len(), 32);
}

#[test]
fn parse_accepts_what_mongodb_accepts() {
    let s =
        spec(doc! {"a": 1.5, "b": -1.9, "c": 1i64, "d": Bson::Decimal128("-0.9".parse().unwrap())});
    let dirs: Vec<bool> = s.fields().iter().map(|f| f.ascending).collect();
    assert_eq!(dirs, [true, false, true, false]);
    // Duplicates are allowed in 7.0 (7.1 added error 7472500).
    let dup = SortSpec::parse(&rawdoc! {"a": 1, "a": -1}).unwrap();
    assert_eq!(dup.fields().len(), 2);
    // Allowed $-prefixed names and dotted/numeric paths.
    assert_eq!(spec(doc! {"a.$id": 1, "a.0.b": -1}).fields().len(), 2);
    assert!(spec(doc! {}).is_empty());
    // $natural turns the sort into a hint.
    let n = spec(doc! {"$natural": -1});
    assert!(n.is_empty());
    assert_eq!(n.natural(), Some(false));
    assert_eq!(spec(doc! {"a": 1, "$natural": 1}).natural(), Some(true));
    assert_eq!(spec(doc! {"a": 1}).natural(), None);
}

// ---------------------------------------------------------------------------------------------
// Sort order
// ---------------------------------------------------------------------------------------------

#[test]
fn canonical_type_order() {
    use bson::spec::BinarySubtype;
    use bson::{Binary, JavaScriptCodeWithScope, Regex, Timestamp, oid::ObjectId};
    let values: Vec<(&str, Option<Bson>)> = vec![
        ("minkey", Some(Bson::MinKey)),
        ("undefined", Some(Bson::Undefined)),
        ("null", Some(Bson::Null)),
        ("missing", None),
        ("nan", Some(Bson::Double(f64::NAN))),
        ("-inf", Some(Bson::Double(f64::NEG_INFINITY))),
        ("int-1", Some(Bson::Int32(-1))),
        ("dec0.5", Some(Bson::Decimal128("0.5".parse().unwrap()))),
        ("long1", Some(Bson::Int64(1))),
        ("double2.5", Some(Bson::Double(2.5))),
        ("str-A", Some(Bson::String("A".into()))),
        ("str-a", Some(Bson::String("a".into()))),
        ("str-ab", Some(Bson::String("ab".into()))),
        ("obj-empty", Some(Bson::Document(doc! {}))),
        ("obj-a1", Some(Bson::Document(doc! {"a": 1}))),
        ("obj-b0", Some(Bson::Document(doc! {"b": 0}))),
        (
            "arr-of-arr",
            Some(Bson::Array(vec![Bson::Array(vec![Bson::Int32(1)])])),
        ),
        (
            "bin",
            Some(Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![1],
            })),
        ),
        ("oid", Some(Bson::ObjectId(ObjectId::from_bytes([0; 12])))),
        ("false", Some(Bson::Boolean(false))),
        ("true", Some(Bson::Boolean(true))),
        (
            "date-neg",
            Some(Bson::DateTime(bson::DateTime::from_millis(-1))),
        ),
        ("date", Some(Bson::DateTime(bson::DateTime::from_millis(5)))),
        (
            "ts",
            Some(Bson::Timestamp(Timestamp {
                time: 1,
                increment: 1,
            })),
        ),
        (
            "regex",
            Some(Bson::RegularExpression(Regex {
                pattern: "a".try_into().unwrap(),
                options: "".try_into().unwrap(),
            })),
        ),
        ("code", Some(Bson::JavaScriptCode("x".into()))),
        (
            "codews",
            Some(Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
                code: "x".into(),
                scope: doc! {},
            })),
        ),
        ("maxkey", Some(Bson::MaxKey)),
    ];
    let ids: Vec<String> = values.iter().map(|(id, _)| id.to_string()).collect();
    let docs = with_ids(values);
    assert_eq!(sorted_ids(&spec(doc! {"a": 1}), &docs), ids);

    // Descending reverses, except that ties (null and missing) keep insertion order.
    let mut rev = ids.clone();
    rev.reverse();
    let null_pos = rev.iter().position(|s| s == "missing").unwrap();
    rev.swap(null_pos, null_pos + 1);
    assert_eq!(sorted_ids(&spec(doc! {"a": -1}), &docs), rev);
}

#[test]
fn missing_and_null_tie_undefined_and_empty_array_tie_below() {
    let docs = with_ids(vec![
        ("null", Some(Bson::Null)),
        ("missing", None),
        ("undef", Some(Bson::Undefined)),
        ("empty", Some(Bson::Array(vec![]))),
        ("null2", Some(Bson::Null)),
    ]);
    assert_eq!(
        sorted_ids(&spec(doc! {"a": 1}), &docs),
        ["undef", "empty", "null", "missing", "null2"]
    );
    assert_eq!(
        sorted_ids(&spec(doc! {"a": -1}), &docs),
        ["null", "missing", "null2", "undef", "empty"]
    );
}

#[test]
fn docs_2760_array_sort_semantics() {
    // jira DOCS-2760: {} {a: 1} {a: []} {a: [1]} {a: [0, 1]}.
    let docs = with_ids(vec![
        ("{}", None),
        ("1", Some(Bson::Int32(1))),
        ("[]", Some(Bson::Array(vec![]))),
        ("[1]", Some(Bson::Array(vec![Bson::Int32(1)]))),
        (
            "[0,1]",
            Some(Bson::Array(vec![Bson::Int32(0), Bson::Int32(1)])),
        ),
    ]);
    assert_eq!(
        sorted_ids(&spec(doc! {"a": 1}), &docs),
        ["[]", "{}", "[0,1]", "1", "[1]"]
    );
    assert_eq!(
        sorted_ids(&spec(doc! {"a": -1}), &docs),
        ["1", "[1]", "[0,1]", "{}", "[]"]
    );
}

#[test]
fn ferretdb_blog_scalar_sorting() {
    // blog.ferretdb.io/mongodb-sorting-scalar (outputs recorded from MongoDB).
    let docs = vec![
        doc! {"_id": 1, "name": "flip flops", "size": "M", "color": "blue"},
        doc! {"_id": 2, "name": "sandals", "size": 9, "color": Bson::Null},
        doc! {"_id": 3, "name": "boots", "size": 8, "color": "black"},
        doc! {"_id": 4, "name": "sneakers", "size": 8.5, "color": "blue"},
        doc! {"_id": 5, "name": "slippers"},
    ];
    assert_eq!(
        sorted_ids(&spec(doc! {"size": 1}), &docs),
        ["5", "3", "4", "2", "1"]
    );
    assert_eq!(
        sorted_ids(&spec(doc! {"size": -1}), &docs),
        ["1", "2", "4", "3", "5"]
    );
    assert_eq!(
        sorted_ids(&spec(doc! {"color": 1, "_id": 1}), &docs),
        ["2", "5", "3", "1", "4"]
    );
    assert_eq!(
        sorted_ids(&spec(doc! {"color": -1, "_id": -1}), &docs),
        ["4", "1", "3", "5", "2"]
    );
}

#[test]
fn numbers_compare_across_types() {
    let docs = with_ids(vec![
        ("d1.0", Some(Bson::Double(1.0))),
        ("i1", Some(Bson::Int32(1))),
        ("l0", Some(Bson::Int64(0))),
        ("dec-0", Some(Bson::Decimal128("-0".parse().unwrap()))),
        ("big", Some(Bson::Int64(9_007_199_254_740_993))),
        ("bigd", Some(Bson::Double(9_007_199_254_740_992.0))),
        ("l1", Some(Bson::Int64(1))),
    ]);
    assert_eq!(
        sorted_ids(&spec(doc! {"a": 1}), &docs),
        ["l0", "dec-0", "d1.0", "i1", "l1", "bigd", "big"]
    );
}

#[test]
fn arrays_use_smallest_or_largest_element() {
    let docs = with_ids(vec![
        (
            "[5,1]",
            Some(Bson::Array(vec![Bson::Int32(5), Bson::Int32(1)])),
        ),
        ("2", Some(Bson::Int32(2))),
        (
            "[3,'x']",
            Some(Bson::Array(vec![Bson::Int32(3), Bson::String("x".into())])),
        ),
        (
            "[[0]]",
            Some(Bson::Array(vec![Bson::Array(vec![Bson::Int32(0)])])),
        ),
        (
            "[[1,2],[0]]",
            Some(Bson::Array(vec![
                Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)]),
                Bson::Array(vec![Bson::Int32(0)]),
            ])),
        ),
        (
            "[null,4]",
            Some(Bson::Array(vec![Bson::Null, Bson::Int32(4)])),
        ),
    ]);
    // Ascending keys: 1, 2, 3, [0], [0], null.
    assert_eq!(
        sorted_ids(&spec(doc! {"a": 1}), &docs),
        ["[null,4]", "[5,1]", "2", "[3,'x']", "[[0]]", "[[1,2],[0]]"]
    );
    // Descending keys: 5, 2, 'x', [0], [1,2], 4.
    assert_eq!(
        sorted_ids(&spec(doc! {"a": -1}), &docs),
        ["[[1,2],[0]]", "[[0]]", "[3,'x']", "[5,1]", "[null,4]", "2"]
    );
}

fn key(s: &SortSpec, d: Document) -> Vec<String> {
    s.key(&raw(&d))
        .unwrap_or_else(|e| panic!("{d}: {e:?}"))
        .values()
        .iter()
        .map(|v| display::value(v.as_raw_bson_ref()))
        .collect()
}

#[test]
fn dotted_paths_through_arrays() {
    let ab = spec(doc! {"a.b": 1});
    let ab_desc = spec(doc! {"a.b": -1});
    assert_eq!(key(&ab, doc! {"a": [{"b": 3}, {"b": 1}]}), ["1"]);
    assert_eq!(key(&ab_desc, doc! {"a": [{"b": 3}, {"b": 1}]}), ["3"]);
    // Elements that are not documents (and documents without b) give null.
    assert_eq!(key(&ab, doc! {"a": [{"b": 3}, 7]}), ["null"]);
    assert_eq!(key(&ab_desc, doc! {"a": [{"b": 3}, 7]}), ["3"]);
    assert_eq!(key(&ab, doc! {"a": [{"c": 3}]}), ["null"]);
    // Arrays at the end of the path inside array elements are expanded too.
    assert_eq!(key(&ab, doc! {"a": [{"b": [4, 2]}, {"b": 3}]}), ["2"]);
    assert_eq!(key(&ab_desc, doc! {"a": [{"b": [4, 2]}, {"b": 3}]}), ["4"]);
    // An empty array mid-path gives null; at the end undefined.
    assert_eq!(key(&ab, doc! {"a": []}), ["null"]);
    assert_eq!(key(&ab, doc! {"a": [{"b": []}]}), ["undefined"]);
    // Nested arrays are not entered by a non-numeric component.
    assert_eq!(key(&ab, doc! {"a": [[{"b": 1}]]}), ["null"]);
    // Scalars mid-path are missing.
    assert_eq!(key(&ab, doc! {"a": 5}), ["null"]);
    assert_eq!(key(&ab, doc! {"a": {"b": {"c": 1}}}), ["{ c: 1 }"]);
    // Deep documents.
    assert_eq!(
        key(&spec(doc! {"a.b.c": 1}), doc! {"a": {"b": {"c": [9, 8]}}}),
        ["8"]
    );
}

#[test]
fn numeric_path_components() {
    let a0 = spec(doc! {"a.0": 1});
    assert_eq!(key(&a0, doc! {"a": [5, 2]}), ["5"]);
    // A positional component that selects an array keeps it whole.
    assert_eq!(key(&a0, doc! {"a": [[3, 1], 2]}), ["[ 3, 1 ]"]);
    assert_eq!(key(&a0, doc! {"a": {"0": 4}}), ["4"]);
    assert_eq!(key(&a0, doc! {"a": []}), ["null"]);
    let a1b = spec(doc! {"a.1.b": 1});
    assert_eq!(key(&a1b, doc! {"a": [{"b": 9}, {"b": 2}]}), ["2"]);
    // A numeric field in an element that also names a position is ambiguous (16746).
    let e = a0.key(&raw(&doc! {"a": [{"0": 7}]})).unwrap_err();
    assert_eq!(code(&e), 16746, "{e}");
    assert!(
        e.to_string()
            .contains("field: '0' for array: { 0: { 0: 7 } }"),
        "{e}"
    );
}

#[test]
fn compound_keys_pick_the_smallest_tuple() {
    let s = spec(doc! {"a.b": 1, "a.c": 1});
    // Keys (1, 2) and (0, 3): the tuple (0, 3), not per-field minima (0, 2).
    assert_eq!(
        key(&s, doc! {"a": [{"b": 1, "c": 2}, {"b": 0, "c": 3}]}),
        ["0", "3"]
    );
    let s = spec(doc! {"a": 1, "b": -1});
    assert_eq!(key(&s, doc! {"a": [2, 1], "b": 5}), ["1", "5"]);
    let s = spec(doc! {"a.b": -1, "a.c": 1});
    assert_eq!(
        key(
            &s,
            doc! {"a": [{"b": 1, "c": 2}, {"b": 1, "c": 0}, {"b": 0, "c": -5}]}
        ),
        ["1", "0"]
    );
    // Two fields over the same array are fine.
    let s = SortSpec::parse(&rawdoc! {"a": 1, "a": -1}).unwrap();
    assert_eq!(key(&s, doc! {"a": [1, 2]}), ["1", "1"]);
}

#[test]
fn parallel_arrays_are_an_error() {
    let s = spec(doc! {"a": 1, "b": 1});
    let e = s.key(&raw(&doc! {"a": [1, 2], "b": [3, 4]})).unwrap_err();
    assert_eq!(code(&e), 2);
    assert_eq!(
        e.to_string(),
        "cannot sort with keys that are parallel arrays"
    );
    // One array is fine.
    assert_eq!(key(&s, doc! {"a": [1, 2], "b": 3}), ["1", "3"]);
    // try_compare surfaces the error; compare treats the key as all-null.
    let bad = raw(&doc! {"a": [1], "b": [2]});
    let good = raw(&doc! {"a": 0, "b": 0});
    assert!(s.try_compare(&bad, &good).is_err());
    assert_eq!(s.compare(&bad, &good), Ordering::Less);
    // The Sorter reports it from push.
    let mut sorter = Sorter::new(s, None, DEFAULT_MEMORY_LIMIT_BYTES, false, None);
    assert_eq!(code(&sorter.push(bad).unwrap_err()), 2);
}

#[test]
fn multi_key_and_stability() {
    let docs: Vec<Document> = (0..30)
        .map(|i| doc! {"_id": format!("{i:02}"), "g": i % 3, "h": (i / 3) % 2})
        .collect();
    let ids = sorted_ids(&spec(doc! {"g": 1}), &docs);
    let mut want: Vec<String> = Vec::new();
    for g in 0..3 {
        for i in 0..30 {
            if i % 3 == g {
                want.push(format!("{i:02}"));
            }
        }
    }
    assert_eq!(ids, want, "ties keep insertion order");
    let ids = sorted_ids(&spec(doc! {"g": -1, "h": 1}), &docs);
    let mut want: Vec<(i32, i32, String)> = (0..30)
        .map(|i| (-(i % 3), (i / 3) % 2, format!("{i:02}")))
        .collect();
    want.sort_by_key(|a| (a.0, a.1));
    let want: Vec<String> = want.into_iter().map(|t| t.2).collect();
    assert_eq!(ids, want);
}

#[test]
fn empty_spec_keeps_order() {
    let docs = with_ids(vec![
        ("b", Some(Bson::Int32(2))),
        ("a", Some(Bson::Int32(1))),
    ]);
    assert_eq!(sorted_ids(&spec(doc! {}), &docs), ["b", "a"]);
    let s = spec(doc! {});
    assert_eq!(
        s.compare(&rawdoc! {"a": 1}, &rawdoc! {"a": 2}),
        Ordering::Equal
    );
}

// ---------------------------------------------------------------------------------------------
// Sorter: limits, memory, spilling
// ---------------------------------------------------------------------------------------------

fn numbered(n: usize, seed: u64) -> Vec<Document> {
    // A small LCG: deterministic pseudo-random keys with many ties.
    let mut x = seed;
    (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = (x >> 33) % 50;
            doc! {"_id": i as i64, "k": k as i64, "pad": "x".repeat(100)}
        })
        .collect()
}

fn run(
    s: &SortSpec,
    docs: &[Document],
    limit: Option<usize>,
    mem: usize,
    disk: bool,
    dir: Option<std::path::PathBuf>,
) -> Result<(Vec<String>, cairn_query::sort::SortStats), QueryError> {
    let mut sorter = Sorter::new(s.clone(), limit, mem, disk, dir);
    for d in docs {
        sorter.push(raw(d))?;
    }
    let out = sorter.finish()?;
    let stats = out.stats();
    let ids = out
        .map(|d| d.map(|d| id_of(&d)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((ids, stats))
}

#[test]
fn memory_limit_without_disk_use_is_292() {
    let s = spec(doc! {"k": 1});
    let docs = numbered(100, 1);
    let e = run(&s, &docs, None, 2000, false, None).unwrap_err();
    assert_eq!(code(&e), 292);
    assert_eq!(
        e.to_string(),
        "Sort exceeded memory limit of 2000 bytes, but did not opt in to external sorting."
    );
    // A top-k sort with a small k stays under the limit.
    let (ids, stats) = run(&s, &docs, Some(3), 2000, false, None).unwrap();
    assert_eq!(ids.len(), 3);
    assert!(!stats.used_disk());
    assert!(stats.peak_memory <= 2000);
}

#[test]
fn spilling_gives_the_in_memory_order() {
    let dir = tempfile::tempdir().unwrap();
    for s in [
        spec(doc! {"k": 1}),
        spec(doc! {"k": -1, "_id": 1}),
        spec(doc! {"k": -1}),
    ] {
        let docs = numbered(500, 7);
        let (want, mem_stats) =
            run(&s, &docs, None, DEFAULT_MEMORY_LIMIT_BYTES, false, None).unwrap();
        assert!(!mem_stats.used_disk());
        let (got, stats) =
            run(&s, &docs, None, 4096, true, Some(dir.path().to_path_buf())).unwrap();
        assert!(stats.spills > 10, "{stats:?}");
        assert_eq!(got, want);
        // Top-k with spills.
        for k in [1, 7, 40, 499, 500, 900] {
            let (got, _) = run(
                &s,
                &docs,
                Some(k),
                4096,
                true,
                Some(dir.path().to_path_buf()),
            )
            .unwrap();
            assert_eq!(
                got,
                want.iter().take(k).cloned().collect::<Vec<_>>(),
                "k={k}"
            );
        }
    }
    // Spill files are anonymous: nothing is left in (or ever visible in) the directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn spill_files_are_released_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(doc! {"k": 1});
    let mut sorter = Sorter::new(s, None, 2048, true, Some(dir.path().to_path_buf()));
    for d in numbered(200, 3) {
        sorter.push(raw(&d)).unwrap();
    }
    assert!(sorter.stats().spills > 0);
    let mut out = sorter.finish().unwrap();
    assert!(out.next().is_some());
    drop(out);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn sorter_types_can_move_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<Sorter>();
    assert_send::<cairn_query::sort::SortedDocs>();
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<SortSpec>();
    assert_send_sync::<cairn_query::sort::SortKey>();
}

#[test]
fn limit_zero_and_bad_spill_dir() {
    let s = spec(doc! {"k": 1});
    let docs = numbered(10, 1);
    assert!(
        run(&s, &docs, Some(0), 1000, false, None)
            .unwrap()
            .0
            .is_empty()
    );
    let e = run(
        &s,
        &docs,
        None,
        100,
        true,
        Some(std::path::PathBuf::from("/nonexistent/cairn-spill")),
    )
    .unwrap_err();
    assert!(matches!(e, QueryError::Storage(_)), "{e:?}");
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        Just(Bson::Null),
        Just(Bson::Undefined),
        (-5i32..5).prop_map(Bson::Int32),
        (-5i64..5).prop_map(Bson::Int64),
        (-5.0f64..5.0).prop_map(|f| Bson::Double((f * 2.0).round() / 2.0)),
        "[a-c]{0,2}".prop_map(Bson::String),
        any::<bool>().prop_map(Bson::Boolean),
    ]
}

fn value() -> impl Strategy<Value = Option<Bson>> {
    prop_oneof![
        3 => scalar().prop_map(Some),
        1 => Just(None),
        2 => prop::collection::vec(scalar(), 0..4).prop_map(|v| Some(Bson::Array(v))),
        1 => prop::collection::vec(
            prop_oneof![
                scalar().prop_map(|b| Bson::Document(doc! {"b": b})),
                scalar(),
                Just(Bson::Document(doc! {})),
            ],
            0..4,
        )
        .prop_map(|v| Some(Bson::Array(v))),
        1 => scalar().prop_map(|b| Some(Bson::Document(doc! {"b": b}))),
    ]
}

fn docs_strategy() -> impl Strategy<Value = Vec<Document>> {
    prop::collection::vec((value(), scalar()), 0..40).prop_map(|vs| {
        vs.into_iter()
            .enumerate()
            .map(|(i, (a, c))| {
                let mut d = doc! {"_id": i as i64};
                if let Some(a) = a {
                    d.insert("a", a);
                }
                d.insert("c", c);
                d
            })
            .collect()
    })
}

fn spec_strategy() -> impl Strategy<Value = SortSpec> {
    let field = prop_oneof![Just("a"), Just("a.b"), Just("c"), Just("_id")];
    prop::collection::vec((field, any::<bool>()), 1..3).prop_map(|fs| {
        let mut d = Document::new();
        for (f, asc) in fs {
            if !d.contains_key(f) {
                d.insert(f, if asc { 1 } else { -1 });
            }
        }
        SortSpec::parse(&raw(&d)).unwrap()
    })
}

/// The single-field model from the manual: ascending uses the smallest element, descending
/// the largest; `[]` is undefined, missing is null.
fn model_key(v: Option<&Bson>, asc: bool) -> Bson {
    match v {
        None => Bson::Null,
        Some(Bson::Array(items)) if items.is_empty() => Bson::Undefined,
        Some(Bson::Array(items)) => {
            let raws: Vec<RawDocumentBuf> =
                items.iter().map(|b| raw(&doc! {"v": b.clone()})).collect();
            let mut best = 0;
            for i in 1..raws.len() {
                let c = cairn_query::storage::compare::compare_values(
                    raws[i].get("v").unwrap().unwrap(),
                    raws[best].get("v").unwrap().unwrap(),
                );
                if (asc && c == Ordering::Less) || (!asc && c == Ordering::Greater) {
                    best = i;
                }
            }
            items[best].clone()
        }
        Some(other) => other.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn sorter_matches_stable_sort_and_top_k(docs in docs_strategy(), s in spec_strategy(), k in 0usize..45) {
        // Parallel arrays cannot happen: only `a` holds arrays.
        let raws: Vec<RawDocumentBuf> = docs.iter().map(raw).collect();
        let mut keyed: Vec<(cairn_query::sort::SortKey, String)> =
            raws.iter().map(|d| (s.key(d).unwrap(), id_of(d))).collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0)); // stable
        let want: Vec<String> = keyed.into_iter().map(|p| p.1).collect();

        let (full, _) = run(&s, &docs, None, DEFAULT_MEMORY_LIMIT_BYTES, false, None).unwrap();
        prop_assert_eq!(&full, &want);
        let (top, _) = run(&s, &docs, Some(k), DEFAULT_MEMORY_LIMIT_BYTES, false, None).unwrap();
        prop_assert_eq!(&top[..], &want[..k.min(want.len())]);
        let (spilled, _) = run(&s, &docs, None, 700, true, None).unwrap();
        prop_assert_eq!(&spilled, &want);
        let (spilled_top, _) = run(&s, &docs, Some(k), 700, true, None).unwrap();
        prop_assert_eq!(&spilled_top[..], &want[..k.min(want.len())]);
    }

    #[test]
    fn single_field_keys_match_the_manual_model(docs in docs_strategy(), asc in any::<bool>()) {
        let s = SortSpec::parse(&raw(&doc! {"a": if asc { 1 } else { -1 }})).unwrap();
        for d in &docs {
            let got = s.key(&raw(d)).unwrap();
            let want = model_key(d.get("a"), asc);
            let want_raw = raw(&doc! {"v": want.clone()});
            let c = cairn_query::storage::compare::compare_values(
                got.values()[0].as_raw_bson_ref(),
                want_raw.get("v").unwrap().unwrap(),
            );
            prop_assert_eq!(c, Ordering::Equal, "doc {} got {:?} want {}", d, got.values(), want);
        }
    }

    #[test]
    fn key_order_is_total(docs in docs_strategy(), s in spec_strategy()) {
        let keys: Vec<_> = docs.iter().map(|d| s.key(&raw(d)).unwrap()).collect();
        for a in &keys {
            for b in &keys {
                prop_assert_eq!(a.cmp(b), b.cmp(a).reverse());
                for c in keys.iter().take(8) {
                    if a <= b && b <= c {
                        prop_assert!(a <= c);
                    }
                }
            }
        }
    }
}
