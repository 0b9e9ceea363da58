//! Golden tests of the planner: for each query over a fixed collection with a fixed set of
//! indexes, the chosen plan (printed compactly from its explain tree) and its results, which
//! must equal a collection scan's (as a multiset, or in order when the query sorts).

use std::sync::Arc;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, doc, rawdoc};
use cairn_query::filter::Filter;
use cairn_query::index::QueryKeyGen;
use cairn_query::plan::explain::{Wrap, stage_tree};
use cairn_query::plan::{Hint, PlanCache, Query, choose};
use cairn_query::projection::Projection;
use cairn_query::sort::SortSpec;
use cairn_storage::engine::memory::MemoryEngine;
use cairn_storage::{Durability, StorageError, Store, StoreOptions};

fn store() -> Store {
    let store = Store::open_with(
        Arc::new(MemoryEngine::new()),
        StoreOptions { sync_always: false },
        Arc::new(QueryKeyGen::new()),
    )
    .unwrap();
    let meta = store.ensure_collection("db", "c").unwrap();
    for chunk in (0..300).collect::<Vec<i32>>().chunks(50) {
        store
            .write(Durability::Buffered, |tx| -> Result<(), StorageError> {
                for &i in chunk {
                    let mut d = rawdoc! {
                        "_id": i,
                        "a": i % 10,
                        "b": i % 7,
                        "c": format!("s{}", i % 5),
                        "arr": [i % 3, i % 4],
                        "sub": {"x": i % 6},
                    };
                    if i % 2 == 0 {
                        d.append(bson::raw::cstr!("opt"), i % 9);
                    }
                    tx.insert(&meta, &d)?;
                }
                Ok(())
            })
            .unwrap();
    }
    let specs = [
        rawdoc! {"key": {"a": 1}, "name": "a_1"},
        rawdoc! {"key": {"b": 1, "a": -1}, "name": "b_1_a_-1"},
        rawdoc! {"key": {"arr": 1}, "name": "arr_1"},
        rawdoc! {"key": {"sub.x": 1}, "name": "sub.x_1"},
        rawdoc! {"key": {"opt": 1}, "name": "opt_1", "sparse": true},
        rawdoc! {"key": {"c": 1}, "name": "c_1", "partialFilterExpression": {"a": {"$gt": 5}}},
    ];
    let created = store.create_indexes("db", "c", &specs).unwrap();
    for name in created.new {
        store.build_index("db", "c", &name, &|_| {}).unwrap();
    }
    store
}

/// `STAGE name bounds <- child`, from an explain tree.
fn summary(d: &RawDocument) -> String {
    let mut s = d.get_str("stage").unwrap().to_string();
    if let Ok(name) = d.get_str("indexName") {
        s.push(' ');
        s.push_str(name);
        if let Ok(b) = d.get_document("indexBounds") {
            let parts: Vec<String> = b
                .iter()
                .flatten()
                .map(|(k, v)| {
                    let ivs: Vec<String> = match v {
                        RawBsonRef::Array(a) => a
                            .into_iter()
                            .flatten()
                            .filter_map(|x| x.as_str().map(str::to_string))
                            .collect(),
                        _ => Vec::new(),
                    };
                    format!("{}:{}", k.as_str(), ivs.join("|"))
                })
                .collect();
            s.push_str(&format!(" {{{}}}", parts.join(" ")));
        }
        if d.get_str("direction").ok() == Some("backward") {
            s.push_str(" backward");
        }
    }
    if let Ok(input) = d.get_document("inputStage") {
        s.push_str(" <- ");
        s.push_str(&summary(input));
    }
    if let Ok(inputs) = d.get_array("inputStages") {
        let subs: Vec<String> = inputs
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_document().map(summary))
            .collect();
        s.push_str(&format!(" [{}]", subs.join(", ")));
    }
    s
}

struct Case {
    filter: bson::Document,
    sort: Option<bson::Document>,
    projection: Option<bson::Document>,
    hint: Hint,
    limit: Option<u64>,
    count: bool,
    plan: &'static str,
}

fn case(filter: bson::Document, plan: &'static str) -> Case {
    Case {
        filter,
        sort: None,
        projection: None,
        hint: Hint::None,
        limit: None,
        count: false,
        plan,
    }
}

fn raw(d: &bson::Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).unwrap()
}

/// Runs `c` with the planner; returns the plan summary and the results.
fn run(store: &Store, cache: &PlanCache, c: &Case) -> (String, Vec<RawDocumentBuf>) {
    let meta = store.collection("db", "c").unwrap();
    let filter_doc = raw(&c.filter);
    let filter = Arc::new(Filter::parse(&filter_doc).unwrap());
    let sort = c.sort.as_ref().map(|s| SortSpec::parse(&raw(s)).unwrap());
    let projection = c
        .projection
        .as_ref()
        .map(|p| Projection::parse(&raw(p)).unwrap());
    let q = Query {
        filter: &filter,
        sort: sort.as_ref(),
        natural: None,
        projection: projection.as_ref(),
        inclusion: None,
        hint: &c.hint,
        min: None,
        max: None,
        modifies: None,
        count: c.count,
        limit: c.limit,
    };
    let read = store.read().unwrap();
    let chosen = choose(Some(cache), "db.c", &meta, &q, &filter, &read, c.count).unwrap();
    let plan = chosen.exec.plan().clone();
    let blocking = sort.is_some() && !plan.provides_sort;
    let wrap = Wrap {
        sort: blocking.then(|| (raw(c.sort.as_ref().unwrap()), c.limit)),
        limit: c.limit,
        projection: projection.as_ref().map(|_| {
            (
                if plan.covered {
                    "PROJECTION_COVERED"
                } else {
                    "PROJECTION_SIMPLE"
                },
                rawdoc! {},
            )
        }),
        root: c.count.then_some("COUNT"),
        ..Wrap::default()
    };
    let tree = stage_tree(&plan, &filter_doc, &wrap, None);
    let mut docs = chosen.buffered;
    let mut exec = chosen.exec;
    while !exec.is_exhausted() {
        docs.extend(exec.next(&read, &meta, 1000, usize::MAX, 10_000).unwrap());
    }
    if c.count {
        let n = exec.stats.advanced;
        return (summary(&tree), vec![rawdoc! {"n": n as i64}]);
    }
    if let Some(s) = &sort
        && blocking
    {
        docs.sort_by(|a, b| s.compare(a, b));
    }
    if let Some(l) = c.limit {
        docs.truncate(l as usize);
    }
    if let Some(p) = &projection {
        docs = docs.iter().map(|d| p.apply(d, None).unwrap()).collect();
    }
    (summary(&tree), docs)
}

/// The same query as a collection scan (the reference).
fn reference(store: &Store, c: &Case) -> Vec<RawDocumentBuf> {
    let natural = Case {
        filter: c.filter.clone(),
        sort: c.sort.clone(),
        projection: c.projection.clone(),
        hint: Hint::Natural { reverse: false },
        limit: c.limit,
        count: c.count,
        plan: "",
    };
    run(store, &PlanCache::default(), &natural).1
}

fn key_order(mut v: Vec<RawDocumentBuf>) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = v.drain(..).map(|d| d.as_bytes().to_vec()).collect();
    out.sort();
    out
}

#[test]
fn plans_and_results() {
    let store = store();
    let cache = PlanCache::default();
    let cases = vec![
        case(doc! {}, "COLLSCAN"),
        case(doc! {"_id": 5}, "IDHACK"),
        case(
            doc! {"_id": {"$gt": 290}},
            "FETCH <- IXSCAN _id_ {_id:(290, inf.0]}",
        ),
        case(doc! {"a": 3}, "FETCH <- IXSCAN a_1 {a:[3, 3]}"),
        case(
            doc! {"a": 3, "b": 2},
            "FETCH <- IXSCAN b_1_a_-1 {b:[2, 2] a:[3, 3]}",
        ),
        case(doc! {"arr": 2}, "FETCH <- IXSCAN arr_1 {arr:[2, 2]}"),
        case(
            doc! {"sub.x": {"$in": [1, 2]}},
            "FETCH <- IXSCAN sub.x_1 {sub.x:[1, 1]|[2, 2]}",
        ),
        case(
            doc! {"a": {"$gte": 8}, "c": {"$regex": "^s1"}},
            // The partial index holds only a > 5: fewer entries to read.
            "FETCH <- IXSCAN c_1 {c:[\"s1\", \"s2\")|[/^s1/, /^s1/]}",
        ),
        case(
            doc! {"opt": {"$gt": 6}},
            "FETCH <- IXSCAN opt_1 {opt:(6, inf.0]}",
        ),
        case(doc! {"opt": null}, "COLLSCAN"),
        case(
            doc! {"$or": [{"a": 1}, {"b": 3}]},
            "FETCH <- OR [IXSCAN a_1 {a:[1, 1]}, IXSCAN b_1_a_-1 {b:[3, 3] a:[MaxKey, MinKey]}]",
        ),
        case(doc! {"$or": [{"a": 1}, {"nope": 3}]}, "COLLSCAN"),
        Case {
            sort: Some(doc! {"a": -1}),
            limit: Some(5),
            ..case(
                doc! {},
                "LIMIT <- FETCH <- IXSCAN a_1 {a:[MaxKey, MinKey]} backward",
            )
        },
        Case {
            sort: Some(doc! {"c": 1, "_id": 1}),
            limit: Some(5),
            ..case(
                doc! {"a": 4},
                "LIMIT <- SORT <- FETCH <- IXSCAN a_1 {a:[4, 4]}",
            )
        },
        Case {
            sort: Some(doc! {"a": 1}),
            ..case(
                doc! {"b": 6},
                "FETCH <- IXSCAN b_1_a_-1 {b:[6, 6] a:[MinKey, MaxKey]} backward",
            )
        },
        Case {
            projection: Some(doc! {"_id": 0, "a": 1}),
            ..case(
                doc! {"a": {"$gt": 7}},
                "PROJECTION_COVERED <- IXSCAN a_1 {a:(7, inf.0]}",
            )
        },
        Case {
            projection: Some(doc! {"_id": 0, "a": 1}),
            ..case(
                doc! {"a": {"$gte": 0}, "b": 1},
                "PROJECTION_COVERED <- IXSCAN b_1_a_-1 {b:[1, 1] a:[inf.0, 0]}",
            )
        },
        Case {
            hint: Hint::Name("a_1".into()),
            ..case(doc! {"b": 2}, "FETCH <- IXSCAN a_1 {a:[MinKey, MaxKey]}")
        },
        Case {
            hint: Hint::Pattern(rawdoc! {"b": 1, "a": -1}),
            ..case(
                doc! {"a": 2},
                "FETCH <- IXSCAN b_1_a_-1 {b:[MinKey, MaxKey] a:[2, 2]}",
            )
        },
        Case {
            hint: Hint::Natural { reverse: true },
            ..case(doc! {"a": 2}, "COLLSCAN")
        },
        Case {
            count: true,
            ..case(doc! {"a": 3}, "COUNT <- COUNT_SCAN a_1 {a:[3, 3]}")
        },
        Case {
            count: true,
            ..case(
                doc! {"arr": 1},
                "COUNT <- FETCH <- IXSCAN arr_1 {arr:[1, 1]}",
            )
        },
    ];
    let mut failures = Vec::new();
    for c in &cases {
        let (plan, docs) = run(&store, &cache, c);
        if plan != c.plan {
            failures.push(format!(
                "{:?}: plan\n  got  {plan}\n  want {}",
                c.filter, c.plan
            ));
        }
        let want = reference(&store, c);
        let same = match &c.sort {
            // Ties may come in any order: compare the sort keys in order, and the documents
            // as sets when nothing was cut off by a limit.
            Some(s) => {
                let spec = SortSpec::parse(&raw(s)).unwrap();
                let keys = |v: &[RawDocumentBuf]| {
                    v.iter()
                        .map(|d| format!("{:?}", spec.key(d).unwrap().values()))
                        .collect::<Vec<_>>()
                };
                keys(&docs) == keys(&want)
                    && (c.limit.is_some() || key_order(docs.clone()) == key_order(want.clone()))
            }
            None => key_order(docs.clone()) == key_order(want.clone()),
        };
        if !same {
            failures.push(format!(
                "{:?}: {} results vs {} from a collection scan",
                c.filter,
                docs.len(),
                want.len()
            ));
        }
        // Cached: the same shape gives the same plan.
        let (again, _) = run(&store, &cache, c);
        if again != plan {
            failures.push(format!(
                "{:?}: cached plan {again} differs from {plan}",
                c.filter
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn bad_hints_and_min_max() {
    let store = store();
    let meta = store.collection("db", "c").unwrap();
    let filter = Arc::new(Filter::parse(&rawdoc! {}).unwrap());
    let read = store.read().unwrap();
    let code = |hint: Hint, min: Option<RawDocumentBuf>, max: Option<RawDocumentBuf>| {
        let mut q = Query::new(&filter, &hint);
        q.min = min.as_deref();
        q.max = max.as_deref();
        match choose(None, "db.c", &meta, &q, &filter, &read, false) {
            Ok(_) => 0,
            Err(cairn_query::error::QueryError::BadValue(_)) => 2,
            Err(cairn_query::error::QueryError::Location(c, _)) => c,
            Err(e) => panic!("{e:?}"),
        }
    };
    assert_eq!(code(Hint::Name("nope".into()), None, None), 2);
    assert_eq!(code(Hint::Pattern(rawdoc! {"zz": 1}), None, None), 2);
    assert_eq!(code(Hint::None, Some(rawdoc! {"a": 1}), None), 51173);
    assert_eq!(
        code(Hint::Name("a_1".into()), Some(rawdoc! {"b": 1}), None),
        51174
    );
    assert_eq!(
        code(
            Hint::Name("a_1".into()),
            Some(rawdoc! {"a": 5}),
            Some(rawdoc! {"a": 1})
        ),
        51175
    );
    // min/max select [min, max) of the hinted index.
    let hint = Hint::Name("a_1".into());
    let (lo, hi) = (rawdoc! {"a": 2}, rawdoc! {"a": 4});
    let mut q = Query::new(&filter, &hint);
    q.min = Some(&lo);
    q.max = Some(&hi);
    let mut exec = choose(None, "db.c", &meta, &q, &filter, &read, false)
        .unwrap()
        .exec;
    let mut docs = Vec::new();
    while !exec.is_exhausted() {
        docs.extend(exec.next(&read, &meta, 1000, usize::MAX, 10_000).unwrap());
    }
    assert_eq!(docs.len(), 60);
    assert!(docs.iter().all(|d| matches!(d.get_i32("a"), Ok(2 | 3))));
}

#[test]
fn updates_avoid_indexes_on_fields_they_change() {
    use cairn_query::plan::{Modifies, candidates};
    let store = store();
    let meta = store.collection("db", "c").unwrap();
    let filter = Filter::parse(&rawdoc! {"a": 3, "sub.x": 1}).unwrap();
    let hint = Hint::None;
    let keys = |m: Option<&Modifies>| {
        let mut q = Query::new(&filter, &hint);
        q.modifies = m;
        candidates(&meta, &q)
            .unwrap()
            .iter()
            .map(|p| p.key())
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(None), ["ix:a_1", "ix:sub.x_1"]);
    assert_eq!(
        keys(Some(&Modifies::Paths(vec!["a".into()]))),
        ["ix:sub.x_1"]
    );
    assert_eq!(keys(Some(&Modifies::Paths(vec!["sub".into()]))), ["ix:a_1"]);
    assert_eq!(keys(Some(&Modifies::Everything)), ["collscan"]);
}

#[test]
fn cached_plans_are_replanned_when_they_do_badly() {
    let store = Store::open_with(
        Arc::new(MemoryEngine::new()),
        StoreOptions { sync_always: false },
        Arc::new(QueryKeyGen::new()),
    )
    .unwrap();
    let meta = store.ensure_collection("db", "r").unwrap();
    store
        .write(Durability::Buffered, |tx| -> Result<(), StorageError> {
            for i in 0..2000 {
                let a = if i < 1990 { 1 } else { i };
                let b = if i >= 10 { 2 } else { i };
                tx.insert(&meta, &rawdoc! {"_id": i, "a": a, "b": b})?;
            }
            Ok(())
        })
        .unwrap();
    let specs = [
        rawdoc! {"key": {"a": 1}, "name": "a_1"},
        rawdoc! {"key": {"b": 1}, "name": "b_1"},
    ];
    for name in store.create_indexes("db", "r", &specs).unwrap().new {
        store.build_index("db", "r", &name, &|_| {}).unwrap();
    }
    let meta = store.collection("db", "r").unwrap();
    let cache = PlanCache::default();
    let hint = Hint::None;
    let pick = |filter: RawDocumentBuf| {
        let filter = Arc::new(Filter::parse(&filter).unwrap());
        let read = store.read().unwrap();
        let q = Query::new(&filter, &hint);
        let c = choose(Some(&cache), "db.r", &meta, &q, &filter, &read, false).unwrap();
        let mut exec = c.exec;
        let mut n = c.buffered.len();
        while !exec.is_exhausted() {
            n += exec
                .next(&read, &meta, 1000, usize::MAX, 10_000)
                .unwrap()
                .len();
        }
        (exec.plan().key(), c.from_cache, n)
    };
    // a is selective for 1995: a_1 wins the race and is cached.
    assert_eq!(
        pick(rawdoc! {"a": 1995, "b": 2}),
        ("ix:a_1".into(), false, 1)
    );
    assert_eq!(
        pick(rawdoc! {"a": 1996, "b": 2}),
        ("ix:a_1".into(), true, 1)
    );
    // Same shape, but a: 1 matches almost everything: the cached plan overruns its budget,
    // the race runs again and b_1 wins.
    assert_eq!(pick(rawdoc! {"a": 1, "b": 5}), ("ix:b_1".into(), false, 1));
    assert_eq!(pick(rawdoc! {"a": 1, "b": 6}), ("ix:b_1".into(), true, 1));
}
