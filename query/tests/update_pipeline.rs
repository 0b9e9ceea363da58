//! Pipeline-style updates: `u: [stage, …]` with the update stages, `let`/constants variables,
//! upserts seeded from the filter, and MongoDB's errors.

#[path = "update_support.rs"]
mod support;

use bson::{Bson, DateTime, Document, RawArrayBuf, RawBsonRef, doc};
use cairn_query::QueryError;
use cairn_query::expr::{ExprExtensions, Variables};
use cairn_query::filter::Filter;
use cairn_query::update::{Applied, Update, UpdateKind};
use support::*;

fn arr(stages: &[Document]) -> RawArrayBuf {
    let mut a = RawArrayBuf::new();
    for s in stages {
        a.push(raw(s));
    }
    a
}

fn ext() -> ExprExtensions {
    let mut vars = Variables::with_now(DateTime::from_millis(1_700_000_000_000));
    vars.set("target", Bson::Int32(10).try_into().unwrap())
        .unwrap();
    vars.set_cluster_time(bson::Timestamp {
        time: 7,
        increment: 1,
    });
    ExprExtensions::with_variables(vars)
}

fn parse_p(stages: &[Document]) -> Result<Update, QueryError> {
    let a = arr(stages);
    Update::parse_with(RawBsonRef::Array(&a), None, false, &ext())
}

fn run(doc: &Document, stages: &[Document]) -> Result<Applied, QueryError> {
    parse_p(stages)?.apply(&raw(doc), None, &now)
}

#[test]
fn applies_each_update_stage() {
    // (input, pipeline, output)
    let cases: Vec<(Document, Vec<Document>, Document)> = vec![
        (
            doc! {"_id": 1, "a": 1},
            vec![doc! {"$set": {"b": {"$add": ["$a", 1]}}}],
            doc! {"_id": 1, "a": 1, "b": 2},
        ),
        (
            doc! {"_id": 1, "a": 1},
            vec![doc! {"$addFields": {"a": "$$REMOVE", "c": "$$target"}}],
            doc! {"_id": 1, "c": 10},
        ),
        (
            doc! {"_id": 1, "a": 1, "b": 2, "c": 3},
            vec![doc! {"$project": {"c": 1}}],
            doc! {"_id": 1, "c": 3},
        ),
        // Excluding _id keeps the stored one.
        (
            doc! {"_id": 1, "a": 1, "b": 2},
            vec![doc! {"$project": {"_id": 0, "b": 1}}],
            doc! {"_id": 1, "b": 2},
        ),
        (
            doc! {"_id": 1, "a": 1, "b": {"x": 1, "y": 2}},
            vec![doc! {"$unset": ["a", "b.x"]}],
            doc! {"_id": 1, "b": {"y": 2}},
        ),
        (
            doc! {"_id": 1, "name": {"first": "A", "last": "B"}},
            vec![doc! {"$replaceRoot": {"newRoot": "$name"}}],
            doc! {"_id": 1, "first": "A", "last": "B"},
        ),
        (
            doc! {"_id": 1, "q": [1, 2, 3]},
            vec![
                doc! {"$replaceWith": {"$mergeObjects": [{"total": {"$sum": "$q"}}, "$$ROOT"]}},
                doc! {"$unset": "q"},
            ],
            doc! {"_id": 1, "total": 6},
        ),
        (
            doc! {"_id": 1},
            vec![doc! {"$set": {"when": "$$NOW", "ct": "$$CLUSTER_TIME"}}],
            doc! {"_id": 1, "when": DateTime::from_millis(1_700_000_000_000),
            "ct": bson::Timestamp { time: 7, increment: 1 }},
        ),
        // A top-level $-prefixed field may be produced.
        (
            doc! {"_id": 1},
            vec![
                doc! {"$replaceWith": {"$setField": {"field": {"$literal": "$x"}, "input": "$$ROOT", "value": 1}}},
            ],
            doc! {"_id": 1, "$x": 1},
        ),
    ];
    for (input, pipeline, want) in cases {
        let got = run(&input, &pipeline).unwrap_or_else(|e| panic!("{pipeline:?}: {e:?}"));
        assert!(got.modified, "{pipeline:?}");
        assert_doc(&got, &want);
    }
}

#[test]
fn kind_and_noop() {
    let u = parse_p(&[doc! {"$set": {"a": 1}}]).unwrap();
    assert_eq!(u.kind(), UpdateKind::Pipeline);
    assert!(u.touched_top_level_fields().is_none());
    // Same bytes out: not modified.
    let got = run(&doc! {"_id": 1, "a": 1}, &[doc! {"$set": {"a": 1}}]).unwrap();
    assert!(!got.modified);
    // An empty pipeline is the identity.
    let got = run(&doc! {"_id": 1, "a": 1}, &[]).unwrap();
    assert!(!got.modified);
    // 1 → 1.0 changes the type: modified.
    let got = run(&doc! {"_id": 1, "a": 1}, &[doc! {"$set": {"a": 1.0}}]).unwrap();
    assert!(got.modified);
    assert_doc(&got, &doc! {"_id": 1, "a": 1.0});
}

#[test]
fn errors() {
    // (pipeline, code)
    let cases: Vec<(Vec<Document>, i32)> = vec![
        (vec![doc! {"$match": {"a": 1}}], 72),
        (
            vec![doc! {"$set": {"a": 1}}, doc! {"$group": {"_id": null}}],
            72,
        ),
        (vec![doc! {"$limit": 1}], 72),
        (vec![doc! {"$out": "x"}], 72),
        (vec![doc! {"$nope": {}}], 40324),
        (vec![doc! {"$set": {"a": 1}, "$unset": "b"}], 40323),
        (vec![doc! {"$set": 1}], 40272),
        (vec![doc! {"$set": {"a": "$$undefinedVar"}}], 17276),
    ];
    for (p, want) in cases {
        match parse_p(&p) {
            Ok(_) => panic!("{p:?} parsed"),
            Err(e) => assert_eq!(code(&e), want, "{p:?}: {e:?}"),
        }
    }
    let e = parse_p(&[doc! {"$match": {}}]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "$match is not allowed to be used within an update"
    );
    // Changing _id.
    let e = run(&doc! {"_id": 1}, &[doc! {"$set": {"_id": 2}}]).unwrap_err();
    assert_eq!(code(&e), 66);
    // arrayFilters with a pipeline.
    let a = arr(&[doc! {"$set": {"a": 1}}]);
    let mut f = RawArrayBuf::new();
    f.push(raw(&doc! {"x": 1}));
    let e = Update::parse_with(RawBsonRef::Array(&a), Some(&f), false, &ext()).unwrap_err();
    assert_eq!(code(&e), 9);
    assert_eq!(
        e.to_string(),
        "arrayFilters may not be specified for pipeline-style updates"
    );
    // Evaluation errors fail the update.
    let e = run(
        &doc! {"_id": 1, "a": "x"},
        &[doc! {"$set": {"b": {"$add": ["$a", 1]}}}],
    )
    .unwrap_err();
    assert_eq!(code(&e), 14);
    // $replaceRoot to a non-document.
    let e = run(
        &doc! {"_id": 1, "a": 5},
        &[doc! {"$replaceRoot": {"newRoot": "$a"}}],
    )
    .unwrap_err();
    assert_eq!(code(&e), 40228);
}

#[test]
fn upserts_seed_from_the_filter_then_run_the_pipeline() {
    let cases: Vec<(Document, Vec<Document>, Option<Document>)> = vec![
        (
            doc! {"_id": 3, "a": 1},
            vec![doc! {"$set": {"b": {"$add": ["$a", 1]}}}],
            Some(doc! {"_id": 3, "a": 1, "b": 2}),
        ),
        (
            doc! {"_id": 3, "x.y": 1},
            vec![doc! {"$project": {"x": 1}}],
            Some(doc! {"_id": 3, "x": {"y": 1}}),
        ),
        // Replacing the root keeps the filter's _id.
        (
            doc! {"_id": 3, "a": 1},
            vec![doc! {"$replaceWith": {"z": "$a"}}],
            Some(doc! {"_id": 3, "z": 1}),
        ),
        // No _id: one is generated, first.
        (doc! {"a": 1}, vec![doc! {"$set": {"b": 2}}], None),
    ];
    for (filter, p, want) in cases {
        let u = parse_p(&p).unwrap();
        let f = Filter::parse(&raw(&filter)).unwrap();
        let got = u.upsert_document(&f, &now).unwrap();
        match want {
            Some(w) => assert_eq!(
                got.as_bytes(),
                raw(&w).as_bytes(),
                "{p:?}: {}",
                to_bson_doc(&got)
            ),
            None => {
                let d = to_bson_doc(&got);
                assert!(matches!(d.get("_id"), Some(Bson::ObjectId(_))), "{d}");
                assert_eq!(d.get("a"), Some(&Bson::Int32(1)));
                assert_eq!(d.get("b"), Some(&Bson::Int32(2)));
                assert_eq!(d.keys().next().map(String::as_str), Some("_id"));
            }
        }
    }
    // Changing the seeded _id is refused.
    let u = parse_p(&[doc! {"$set": {"_id": 4}}]).unwrap();
    let f = Filter::parse(&raw(&doc! {"_id": 3})).unwrap();
    assert_eq!(code(&u.upsert_document(&f, &now).unwrap_err()), 66);
}

#[test]
fn constants_are_variables() {
    let c = raw(&doc! {"Big": 5, "small": "s"});
    let e = cairn_query::update::pipeline::with_constants(&ext(), &c).unwrap();
    let a = arr(&[doc! {"$set": {"b": "$$Big", "s": "$$small", "t": "$$target"}}]);
    let u = Update::parse_with(RawBsonRef::Array(&a), None, false, &e).unwrap();
    let got = u.apply(&raw(&doc! {"_id": 1}), None, &now).unwrap();
    assert_doc(&got, &doc! {"_id": 1, "b": 5, "s": "s", "t": 10});
    for (name, want) in [("", 16866), ("1a", 16867), ("a-b", 16868)] {
        let mut c = bson::RawDocumentBuf::new();
        c.append(<&bson::raw::CStr>::try_from(name).unwrap(), 1);
        let e = cairn_query::update::pipeline::with_constants(&ext(), &c).unwrap_err();
        assert_eq!(code(&e), want, "{name}");
    }
}
