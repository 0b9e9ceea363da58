//! Table-driven tests of the core stages (`$match $project $addFields $set $unset $group
//! $sort $limit $skip $count $unwind`): results compared byte for byte (field order and
//! numeric types count), and the errors they raise.

mod agg_common;

use agg_common::{Db, assert_same, code};
use bson::{Bson, Document, doc};

fn sample() -> Db {
    let db = Db::new();
    db.insert(
        "c",
        &[
            doc! {"_id": 1, "a": 1, "b": {"c": 1, "d": 2}, "arr": [1, 2, 3], "s": "x"},
            doc! {"_id": 2, "a": 2, "b": {"c": 2}, "arr": [], "s": "y"},
            doc! {"_id": 3, "a": 3, "arr": "scalar"},
            doc! {"_id": 4, "a": 2.5, "b": null, "arr": [[1], {"k": 1}]},
            doc! {"_id": 5, "a": Bson::Int64(4), "arr": null, "s": "x"},
        ],
    );
    db
}

#[test]
fn stage_results() {
    let db = sample();
    let cases: Vec<(&str, Vec<Document>, Vec<Document>)> = vec![
        (
            "match + project inclusion keeps document order",
            vec![
                doc! {"$match": {"a": {"$gte": 2}}},
                doc! {"$project": {"s": 1, "a": 1}},
            ],
            vec![
                doc! {"_id": 2, "a": 2, "s": "y"},
                doc! {"_id": 3, "a": 3},
                doc! {"_id": 4, "a": 2.5},
                doc! {"_id": 5, "a": 4_i64, "s": "x"},
            ],
        ),
        (
            "project exclusion and computed",
            vec![
                doc! {"$match": {"_id": {"$lte": 2}}},
                doc! {"$project": {"_id": 0, "sum": {"$add": ["$a", 10]}, "c": "$b.c"}},
            ],
            vec![doc! {"sum": 11, "c": 1}, doc! {"sum": 12, "c": 2}],
        ),
        (
            "addFields appends and replaces in place",
            vec![
                doc! {"$match": {"_id": 1}},
                doc! {"$addFields": {"a": "new", "z": 1, "b.e": 3, "b.c": "$$REMOVE"}},
            ],
            vec![
                doc! {"_id": 1, "a": "new", "b": {"d": 2, "e": 3}, "arr": [1, 2, 3], "s": "x", "z": 1},
            ],
        ),
        (
            "set with nested object and array elements",
            vec![
                doc! {"$match": {"_id": 4}},
                doc! {"$set": {"arr": {"q": 1}}},
            ],
            vec![doc! {"_id": 4, "a": 2.5, "b": null, "arr": [[{"q": 1}], {"k": 1, "q": 1}]}],
        ),
        (
            "unset",
            vec![doc! {"$match": {"_id": 1}}, doc! {"$unset": ["b.c", "arr"]}],
            vec![doc! {"_id": 1, "a": 1, "b": {"d": 2}, "s": "x"}],
        ),
        (
            "sort desc with mixed numeric types, skip, limit",
            vec![
                doc! {"$sort": {"a": -1}},
                doc! {"$skip": 1},
                doc! {"$limit": 2},
                doc! {"$project": {"a": 1}},
            ],
            vec![doc! {"_id": 3, "a": 3}, doc! {"_id": 4, "a": 2.5}],
        ),
        (
            "sort on a missing field: missing and null tie, ties stable",
            vec![doc! {"$sort": {"b.c": 1}}, doc! {"$project": {"_id": 1}}],
            vec![
                doc! {"_id": 3},
                doc! {"_id": 4},
                doc! {"_id": 5},
                doc! {"_id": 1},
                doc! {"_id": 2},
            ],
        ),
        (
            "count",
            vec![doc! {"$match": {"s": "x"}}, doc! {"$count": "n"}],
            vec![doc! {"n": 2}],
        ),
        (
            "count of nothing is no document",
            vec![doc! {"$match": {"s": "nope"}}, doc! {"$count": "n"}],
            vec![],
        ),
        (
            "unwind drops empty, null, missing; passes scalars",
            vec![doc! {"$unwind": "$arr"}, doc! {"$project": {"arr": 1}}],
            vec![
                doc! {"_id": 1, "arr": 1},
                doc! {"_id": 1, "arr": 2},
                doc! {"_id": 1, "arr": 3},
                doc! {"_id": 3, "arr": "scalar"},
                doc! {"_id": 4, "arr": [1]},
                doc! {"_id": 4, "arr": {"k": 1}},
            ],
        ),
        (
            "unwind preserving with index",
            vec![
                doc! {"$match": {"_id": {"$in": [2, 3, 5]}}},
                doc! {"$unwind": {"path": "$arr", "includeArrayIndex": "idx.i", "preserveNullAndEmptyArrays": true}},
                doc! {"$project": {"arr": 1, "idx": 1}},
            ],
            vec![
                doc! {"_id": 2, "idx": {"i": null}},
                doc! {"_id": 3, "arr": "scalar", "idx": {"i": null}},
                doc! {"_id": 5, "arr": null, "idx": {"i": null}},
            ],
        ),
        (
            "group with numeric key equality and accumulators",
            vec![
                doc! {"$group": {"_id": {"$cond": [{"$gte": ["$a", 2]}, "hi", "lo"]}, "n": {"$sum": 1}, "total": {"$sum": "$a"}, "first": {"$first": "$s"}, "last": {"$last": "$s"}, "min": {"$min": "$b.c"}, "max": {"$max": "$a"}}},
                doc! {"$sort": {"_id": 1}},
            ],
            vec![
                doc! {"_id": "hi", "n": 4, "total": 11.5, "first": "y", "last": "x", "min": 2, "max": 4_i64},
                doc! {"_id": "lo", "n": 1, "total": 1, "first": "x", "last": "x", "min": 1, "max": 1},
            ],
        ),
        (
            "group _id equal across numeric types keeps the first seen",
            vec![
                doc! {"$match": {"_id": {"$in": [2, 5]}}},
                doc! {"$addFields": {"k": {"$cond": [{"$eq": ["$_id", 2]}, 1, 1.0]}}},
                doc! {"$group": {"_id": "$k", "ids": {"$push": "$_id"}}},
            ],
            vec![doc! {"_id": 1, "ids": [2, 5]}],
        ),
        (
            "group missing _id is null; missing accumulator values",
            vec![
                doc! {"$group": {"_id": "$nope", "f": {"$first": "$nope"}, "p": {"$push": "$nope"}, "avg": {"$avg": "$s"}}},
            ],
            vec![doc! {"_id": null, "f": null, "p": [], "avg": null}],
        ),
        (
            "match after project moves ahead only when independent",
            vec![
                doc! {"$project": {"a": 1, "x": "$s"}},
                doc! {"$match": {"a": {"$gt": 2}, "x": "x"}},
            ],
            vec![doc! {"_id": 5, "a": 4_i64, "x": "x"}],
        ),
    ];
    for (name, pipeline, expected) in cases {
        let got = db
            .run("c", &pipeline)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        eprintln!("{name}");
        assert_same(&got, &expected);
    }
}

#[test]
fn stage_errors() {
    let db = sample();
    let cases: Vec<(Document, i32)> = vec![
        (doc! {"$bogus": 1}, 40324),
        (doc! {"$match": 1}, 15959),
        (doc! {"$project": {}}, 51272),
        (doc! {"$project": 1}, 15969),
        (doc! {"$project": {"a.$": 1}}, 31324),
        (doc! {"$project": {"a": {"$elemMatch": {"x": 1}}}}, 31325),
        (doc! {"$project": {"a": 1, "b": 0}}, 31254),
        (doc! {"$addFields": 1}, 40272),
        (doc! {"$addFields": {"$a": 1}}, 16410),
        (doc! {"$addFields": {"a": 1, "a.b": 1}}, 31249),
        (doc! {"$unset": 1}, 31002),
        (doc! {"$unset": []}, 31119),
        (doc! {"$unset": [1]}, 31120),
        (doc! {"$group": 1}, 15947),
        (doc! {"$group": {"n": {"$sum": 1}}}, 15955),
        (doc! {"$group": {"_id": 1, "n": 1}}, 40234),
        (doc! {"$group": {"_id": 1, "a.b": {"$sum": 1}}}, 40235),
        (
            doc! {"$group": {"_id": 1, "n": {"$sum": 1, "$avg": 1}}},
            40238,
        ),
        (doc! {"$group": {"_id": 1, "n": {"$sum": [1]}}}, 40237),
        (doc! {"$group": {"_id": 1, "n": {"$bogus": 1}}}, 15952),
        (doc! {"$sort": 1}, 15973),
        (doc! {"$sort": {}}, 15976),
        (doc! {"$sort": {"a": 2}}, 15975),
        (doc! {"$sort": {"a": "x"}}, 15974),
        (doc! {"$limit": 0}, 15958),
        (doc! {"$limit": -1}, 5107201),
        (doc! {"$limit": "x"}, 5107201),
        (doc! {"$limit": 1.5}, 5107201),
        (doc! {"$skip": -1}, 5107200),
        (doc! {"$count": 1}, 40156),
        (doc! {"$count": ""}, 40157),
        (doc! {"$count": "$x"}, 40158),
        (doc! {"$count": "a.b"}, 40160),
        (doc! {"$count": "_id"}, 15948),
        (doc! {"$unwind": 1}, 15981),
        (doc! {"$unwind": "a"}, 28818),
        (doc! {"$unwind": {}}, 28812),
        (doc! {"$unwind": {"path": 1}}, 28808),
        (
            doc! {"$unwind": {"path": "$a", "preserveNullAndEmptyArrays": 1}},
            28809,
        ),
        (
            doc! {"$unwind": {"path": "$a", "includeArrayIndex": 1}},
            28810,
        ),
        (
            doc! {"$unwind": {"path": "$a", "includeArrayIndex": "$i"}},
            28822,
        ),
        (doc! {"$unwind": {"path": "$a", "foo": 1}}, 28811),
        (doc! {"$setWindowFields": {}}, 40414),
        (doc! {"$geoNear": {}}, 5860400),
    ];
    for (stage, want) in cases {
        let e = db
            .run("c", std::slice::from_ref(&stage))
            .expect_err(&format!("{stage} must fail"));
        assert_eq!(code(&e), want, "{stage}: {e}");
    }
    let e = db.run("c", &[doc! {}]).unwrap_err();
    assert_eq!(code(&e), 40323);
    let e = db
        .run("c", &[doc! {"$match": {}, "$limit": 1}])
        .unwrap_err();
    assert_eq!(code(&e), 40323);
    // Runtime errors.
    let e = db
        .run(
            "c",
            &[doc! {"$project": {"x": {"$divide": [1, {"$subtract": ["$a", 1]}]}}}],
        )
        .unwrap_err();
    assert_eq!(code(&e), 2);
    let e = db.run_db(&[doc! {"$match": {}}]).unwrap_err();
    assert_eq!(code(&e), 73);
}

#[test]
fn memory_limit_and_spill() {
    let mut db = Db::new();
    let docs: Vec<Document> = (0..3000)
        .map(|i| doc! {"_id": i, "g": i % 500, "pad": "x".repeat(200), "v": i})
        .collect();
    db.insert("big", &docs);
    db.options.memory_limit = 64 * 1024;
    db.options.allow_disk_use = false;
    let pipeline = [
        doc! {"$group": {"_id": "$g", "n": {"$sum": 1}, "s": {"$sum": "$v"}, "f": {"$first": "$v"}, "l": {"$last": "$v"}, "p": {"$push": "$v"}, "a": {"$avg": "$v"}}},
        doc! {"$sort": {"_id": 1}},
    ];
    let e = db.run("big", &pipeline).unwrap_err();
    assert_eq!(code(&e), 292, "{e}");
    let e = db
        .run("big", &[doc! {"$sort": {"pad": 1, "v": -1}}])
        .unwrap_err();
    assert_eq!(code(&e), 292, "{e}");
    db.options.allow_disk_use = true;
    let got = db.run("big", &pipeline).unwrap();
    assert_eq!(got.len(), 500);
    for (g, d) in got.iter().enumerate() {
        let g = g as i32;
        let vals: Vec<i32> = (0..3000).filter(|i| i % 500 == g).collect();
        assert_eq!(d.get_i32("_id").unwrap(), g);
        assert_eq!(d.get_i32("n").unwrap(), 6);
        assert_eq!(d.get_i32("s").unwrap(), vals.iter().sum::<i32>());
        assert_eq!(d.get_i32("f").unwrap(), vals[0]);
        assert_eq!(d.get_i32("l").unwrap(), *vals.last().unwrap());
        let p: Vec<i32> = d
            .get_array("p")
            .unwrap()
            .iter()
            .map(|b| b.as_i32().unwrap())
            .collect();
        assert_eq!(p, vals);
        assert_eq!(
            d.get_f64("a").unwrap(),
            vals.iter().sum::<i32>() as f64 / 6.0
        );
    }
    let sorted = db
        .run(
            "big",
            &[
                doc! {"$sort": {"pad": 1, "v": -1}},
                doc! {"$project": {"v": 1}},
            ],
        )
        .unwrap();
    assert_eq!(sorted.len(), 3000);
    assert_eq!(sorted[0].get_i32("v").unwrap(), 2999);
}

#[test]
fn pushdown_uses_indexes_and_counts() {
    let db = Db::new();
    let docs: Vec<Document> = (0..400)
        .map(|i| doc! {"_id": i, "k": i % 40, "v": i})
        .collect();
    db.insert("ix", &docs);
    db.index("ix", doc! {"key": {"k": 1}, "name": "k_1"});
    let agg = db
        .prepare(
            Some("ix"),
            &[
                doc! {"$match": {"k": 7}},
                doc! {"$group": {"_id": null, "n": {"$sum": 1}}},
            ],
            cairn_query::plan::Hint::None,
        )
        .unwrap();
    let got = db.run_prepared(&agg).unwrap();
    assert_same(&got, &[doc! {"_id": null, "n": 10}]);
    let cursor = agg.cursor.as_ref().unwrap();
    assert!(cursor.count_only);
    let report = cursor.report.lock().unwrap().clone().unwrap();
    assert_eq!(report.plan.key(), "ix:k_1");
    assert!(report.stats.docs_examined <= 10, "{:?}", report.stats);
    // Only the needed fields flow: a covered plan.
    let agg = db
        .prepare(
            Some("ix"),
            &[
                doc! {"$match": {"k": {"$lt": 3}}},
                doc! {"$group": {"_id": "$k", "n": {"$sum": 1}}},
                doc! {"$sort": {"_id": 1}},
            ],
            cairn_query::plan::Hint::None,
        )
        .unwrap();
    let got = db.run_prepared(&agg).unwrap();
    assert_same(
        &got,
        &[
            doc! {"_id": 0, "n": 10},
            doc! {"_id": 1, "n": 10},
            doc! {"_id": 2, "n": 10},
        ],
    );
    let report = agg
        .cursor
        .as_ref()
        .unwrap()
        .report
        .lock()
        .unwrap()
        .clone()
        .unwrap();
    assert!(report.plan.covered, "{:?}", report.plan);
    assert_eq!(report.stats.docs_examined, 0);
    // Sort + limit from the index, no blocking sort.
    let agg = db
        .prepare(
            Some("ix"),
            &[
                doc! {"$sort": {"k": -1}},
                doc! {"$limit": 3},
                doc! {"$project": {"_id": 0, "k": 1}},
            ],
            cairn_query::plan::Hint::None,
        )
        .unwrap();
    let got = db.run_prepared(&agg).unwrap();
    assert_same(&got, &[doc! {"k": 39}, doc! {"k": 39}, doc! {"k": 39}]);
    let report = agg
        .cursor
        .as_ref()
        .unwrap()
        .report
        .lock()
        .unwrap()
        .clone()
        .unwrap();
    assert!(!report.blocking_sort);
    assert!(report.stats.keys_examined <= 4, "{:?}", report.stats);
    // A hinted collection scan returns the same.
    let natural = db
        .prepare(
            Some("ix"),
            &[
                doc! {"$match": {"k": {"$lt": 3}}},
                doc! {"$group": {"_id": "$k", "n": {"$sum": 1}}},
                doc! {"$sort": {"_id": 1}},
            ],
            cairn_query::plan::Hint::Natural { reverse: false },
        )
        .unwrap();
    let got2 = db.run_prepared(&natural).unwrap();
    assert_same(
        &got2,
        &[
            doc! {"_id": 0, "n": 10},
            doc! {"_id": 1, "n": 10},
            doc! {"_id": 2, "n": 10},
        ],
    );
}

#[test]
fn optimizer_rewrites() {
    let db = sample();
    let names = |p: &[Document]| {
        db.prepare(Some("c"), p, cairn_query::plan::Hint::None)
            .unwrap()
            .stage_names()
    };
    assert_eq!(
        names(&[doc! {"$sort": {"a": 1}}, doc! {"$match": {"a": 1}}]),
        ["$cursor"]
    );
    assert_eq!(
        names(&[
            doc! {"$addFields": {"x": 1}},
            doc! {"$match": {"a": 1, "x": 1}}
        ]),
        ["$cursor", "$addFields", "$match"]
    );
    assert_eq!(
        names(&[
            doc! {"$unwind": "$arr"},
            doc! {"$skip": 1},
            doc! {"$skip": 2},
            doc! {"$limit": 5},
            doc! {"$limit": 3}
        ]),
        ["$cursor", "$unwind", "$skip", "$limit"]
    );
    let agg = db
        .prepare(
            Some("c"),
            &[
                doc! {"$unwind": "$arr"},
                doc! {"$sort": {"a": 1}},
                doc! {"$limit": 2},
            ],
            cairn_query::plan::Hint::None,
        )
        .unwrap();
    let s = agg.pipeline.serialize();
    let last = s.into_iter().last().unwrap().unwrap();
    assert_eq!(
        Document::try_from(last.as_document().unwrap()).unwrap(),
        doc! {"$sort": {"sortKey": {"a": 1}, "limit": 2_i64}}
    );
}

/// `$unwind` followed by stages that read only some fields builds its outputs from those
/// fields (and the unwound one) alone; what the pipeline returns is unchanged, and an
/// `$unwind` whose later stages need whole documents keeps every field.
#[test]
fn unwind_builds_only_the_fields_later_stages_read() {
    let db = sample();
    db.insert(
        "n",
        &[
            doc! {"_id": 1, "a": {"b": [1, 2], "c": 5}, "z": 9},
            doc! {"_id": 2, "a": {"b": []}, "z": 8},
            doc! {"_id": 3, "a": {"b": "one"}, "z": 7},
        ],
    );
    let cases: Vec<(&str, &str, Vec<Document>, Vec<Document>)> = vec![
        (
            "unwind + group by another field",
            "c",
            vec![
                doc! {"$unwind": "$arr"},
                doc! {"$group": {"_id": "$s", "n": {"$sum": 1}, "vals": {"$push": "$arr"}}},
                doc! {"$sort": {"_id": 1}},
            ],
            vec![
                doc! {"_id": null, "n": 3, "vals": ["scalar", [1], {"k": 1}]},
                doc! {"_id": "x", "n": 3, "vals": [1, 2, 3]},
            ],
        ),
        (
            "unwind + group by the unwound field",
            "c",
            vec![
                doc! {"$match": {"_id": {"$lte": 3}}},
                doc! {"$unwind": "$arr"},
                doc! {"$group": {"_id": "$arr", "n": {"$sum": 1}}},
                doc! {"$sort": {"n": -1, "_id": 1}},
                doc! {"$limit": 2},
            ],
            vec![doc! {"_id": 1, "n": 1}, doc! {"_id": 2, "n": 1}],
        ),
        (
            "unwind + sort + project keeps document order",
            "c",
            vec![
                doc! {"$unwind": "$arr"},
                doc! {"$sort": {"_id": -1, "arr": 1}},
                doc! {"$project": {"_id": 0, "s": 1, "arr": 1, "a": 1}},
            ],
            vec![
                doc! {"a": 2.5, "arr": [1]},
                doc! {"a": 2.5, "arr": {"k": 1}},
                doc! {"a": 3, "arr": "scalar"},
                doc! {"a": 1, "arr": 1, "s": "x"},
                doc! {"a": 1, "arr": 2, "s": "x"},
                doc! {"a": 1, "arr": 3, "s": "x"},
            ],
        ),
        (
            "nested path with an index field",
            "n",
            vec![
                doc! {"$unwind": {"path": "$a.b", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}},
                doc! {"$project": {"_id": 0, "a.b": 1, "i": 1}},
            ],
            vec![
                doc! {"a": {"b": 1}, "i": 0_i64},
                doc! {"a": {"b": 2}, "i": 1_i64},
                doc! {"a": {}, "i": null},
                doc! {"a": {"b": "one"}, "i": null},
            ],
        ),
        (
            "whole documents when nothing after it is exhaustive",
            "c",
            vec![doc! {"$unwind": "$arr"}, doc! {"$limit": 2}],
            vec![
                doc! {"_id": 1, "a": 1, "b": {"c": 1, "d": 2}, "arr": 1, "s": "x"},
                doc! {"_id": 1, "a": 1, "b": {"c": 1, "d": 2}, "arr": 2, "s": "x"},
            ],
        ),
    ];
    for (name, coll, pipeline, expected) in cases {
        let got = db
            .run(coll, &pipeline)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        eprintln!("{name}");
        assert_same(&got, &expected);
    }
    let keep = |pipeline: &[Document]| {
        let agg = db
            .prepare(Some("c"), pipeline, cairn_query::plan::Hint::None)
            .unwrap();
        agg.pipeline
            .stages()
            .iter()
            .find_map(|s| {
                s.as_any()
                    .downcast_ref::<cairn_query::agg::stages::unwind::Unwind>()
            })
            .unwrap()
            .keep
            .clone()
    };
    assert_eq!(
        keep(&[
            doc! {"$unwind": "$arr"},
            doc! {"$group": {"_id": "$s.t", "n": {"$sum": "$a"}}}
        ]),
        Some(vec!["a".to_string(), "s".to_string()]),
        "the top-level fields the $group reads"
    );
    assert_eq!(keep(&[doc! {"$unwind": "$arr"}]), None);
    assert_eq!(
        keep(&[
            doc! {"$unwind": "$arr"},
            doc! {"$group": {"_id": null, "all": {"$push": "$$ROOT"}}}
        ]),
        None
    );
}
