//! `$expr` in query filters (through `Filter::parse_with(doc, &ExprExtensions)`) and
//! aggregation expressions in `find` projections. Document sets and expected matches are the
//! MongoDB manual's `$expr` examples plus edge cases of truthiness and error reporting.

use bson::{Bson, Decimal128, Document, RawDocumentBuf, bson, doc};
use cairn_query::QueryError;
use cairn_query::expr::{ExprExtensions, Variables};
use cairn_query::filter::Filter;
use cairn_query::projection::Projection;

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("encodable")
}

fn dec(s: &str) -> Bson {
    Bson::Decimal128(s.parse::<Decimal128>().expect("decimal"))
}

fn code(e: &QueryError) -> i32 {
    match e {
        QueryError::BadValue(_) => 2,
        QueryError::FailedToParse(_) => 9,
        QueryError::TypeMismatch(_) => 14,
        QueryError::NotImplemented(_) => 238,
        QueryError::Location(c, _) => *c,
        _ => -1,
    }
}

/// The `_id`s of `docs` matching `filter`; panics on an evaluation error.
#[track_caller]
fn matching(filter: Document, docs: &[Document]) -> Vec<Bson> {
    let ext = ExprExtensions::new();
    let f = Filter::parse_with(&raw(&filter), &ext).unwrap_or_else(|e| panic!("{filter}: {e:?}"));
    let mut out = Vec::new();
    for d in docs {
        match f.try_matches(&raw(d)) {
            Ok(true) => out.push(d.get("_id").cloned().unwrap_or(Bson::Null)),
            Ok(false) => {}
            Err(e) => panic!("{filter} on {d}: {e:?}"),
        }
    }
    out
}

fn monthly_budget() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "category": "food", "budget": 400, "spent": 450},
        doc! {"_id": 2, "category": "drinks", "budget": 100, "spent": 150},
        doc! {"_id": 3, "category": "clothes", "budget": 100, "spent": 50},
        doc! {"_id": 4, "category": "misc", "budget": 500, "spent": 300},
        doc! {"_id": 5, "category": "travel", "budget": 200, "spent": 650},
    ]
}

#[test]
fn manual_compare_two_fields() {
    assert_eq!(
        matching(
            doc! {"$expr": {"$gt": ["$spent", "$budget"]}},
            &monthly_budget()
        ),
        vec![bson!(1), bson!(2), bson!(5)]
    );
}

#[test]
fn manual_conditional() {
    let supplies = vec![
        doc! {"_id": 1, "item": "binder", "qty": 100, "price": dec("12")},
        doc! {"_id": 2, "item": "notebook", "qty": 200, "price": dec("8")},
        doc! {"_id": 3, "item": "pencil", "qty": 50, "price": dec("6")},
        doc! {"_id": 4, "item": "eraser", "qty": 150, "price": dec("3")},
        doc! {"_id": 5, "item": "legal pad", "qty": 42, "price": dec("10")},
    ];
    let discounted = bson!({"$cond": {
        "if": {"$gte": ["$qty", 100]},
        "then": {"$multiply": ["$price", dec("0.50")]},
        "else": {"$multiply": ["$price", dec("0.75")]},
    }});
    assert_eq!(
        matching(doc! {"$expr": {"$lt": [discounted, dec("5")]}}, &supplies),
        vec![bson!(2), bson!(3), bson!(4)]
    );
}

#[test]
fn combined_with_ordinary_predicates() {
    let docs = monthly_budget();
    assert_eq!(
        matching(
            doc! {"category": {"$ne": "food"}, "$expr": {"$gt": ["$spent", "$budget"]}},
            &docs
        ),
        vec![bson!(2), bson!(5)]
    );
    assert_eq!(
        matching(
            doc! {"$or": [{"_id": 3}, {"$expr": {"$gte": ["$spent", {"$multiply": ["$budget", 3]}]}}]},
            &docs
        ),
        vec![bson!(3), bson!(5)]
    );
    assert_eq!(
        matching(
            doc! {"$and": [{"$expr": {"$lt": ["$budget", 300]}}, {"$expr": {"$lt": ["$spent", 100]}}]},
            &docs
        ),
        vec![bson!(3)]
    );
    assert_eq!(
        matching(doc! {"$nor": [{"$expr": {"$lt": ["$budget", 300]}}]}, &docs),
        vec![bson!(1), bson!(4)]
    );
}

#[test]
fn truthiness_of_the_operand() {
    let docs = vec![
        doc! {"_id": 1, "v": 0},
        doc! {"_id": 2, "v": 1},
        doc! {"_id": 3, "v": null},
        doc! {"_id": 4},
        doc! {"_id": 5, "v": ""},
        doc! {"_id": 6, "v": []},
        doc! {"_id": 7, "v": false},
        doc! {"_id": 8, "v": dec("0.00")},
        doc! {"_id": 9, "v": f64::NAN},
        doc! {"_id": 10, "v": Bson::Undefined},
    ];
    assert_eq!(
        matching(doc! {"$expr": "$v"}, &docs),
        vec![bson!(2), bson!(5), bson!(6), bson!(9)]
    );
    assert_eq!(matching(doc! {"$expr": true}, &docs).len(), docs.len());
    assert!(matching(doc! {"$expr": 0}, &docs).is_empty());
    // An array operand is an array expression: always truthy.
    assert_eq!(matching(doc! {"$expr": ["$nope"]}, &docs).len(), docs.len());
    // Missing is not null in expressions, unlike {v: null}.
    assert_eq!(
        matching(doc! {"$expr": {"$eq": ["$v", null]}}, &docs),
        vec![bson!(3)]
    );
    assert_eq!(
        matching(doc! {"v": null}, &docs),
        vec![bson!(3), bson!(4), bson!(10)]
    );
}

#[test]
fn array_fields_are_values_not_traversed() {
    let docs = vec![
        doc! {"_id": 1, "a": [1, 2, 3]},
        doc! {"_id": 2, "a": 2},
        doc! {"_id": 3, "a": [{"b": 5}, {"b": 1}]},
    ];
    // Unlike {a: 2}, $eq compares the whole array.
    assert_eq!(
        matching(doc! {"$expr": {"$eq": ["$a", 2]}}, &docs),
        vec![bson!(2)]
    );
    assert_eq!(
        matching(
            doc! {"$expr": {"$in": [2, {"$ifNull": [{"$cond": [{"$isArray": "$a"}, "$a", ["$a"]]}, []]}]}},
            &docs
        ),
        vec![bson!(1), bson!(2)]
    );
    assert_eq!(
        matching(doc! {"$expr": {"$eq": ["$a.b", [5, 1]]}}, &docs),
        vec![bson!(3)]
    );
}

#[test]
fn evaluation_errors_fail_the_match() {
    let ext = ExprExtensions::new();
    let f =
        Filter::parse_with(&raw(&doc! {"$expr": {"$divide": [1, "$a"]}}), &ext).expect("parses");
    assert_eq!(f.try_matches(&raw(&doc! {"a": 2})), Ok(true));
    let e = f.try_matches(&raw(&doc! {"a": 0})).expect_err("fails");
    assert_eq!(
        (code(&e), e.to_string()),
        (2, "can't $divide by zero".to_string())
    );
    let e = f.try_matches(&raw(&doc! {"a": "x"})).expect_err("fails");
    assert_eq!(code(&e), 14);
    // The infallible form counts an error as no match.
    assert!(!f.matches(&raw(&doc! {"a": 0})));
    // Errors propagate through $or, $nor and $not; a short-circuit skips them.
    let f = Filter::parse_with(
        &raw(&doc! {"$or": [{"a": 0}, {"$expr": {"$divide": [1, "$a"]}}]}),
        &ext,
    )
    .expect("parses");
    assert_eq!(f.try_matches(&raw(&doc! {"a": 0})), Ok(true));
    assert!(f.try_matches(&raw(&doc! {"a": "x"})).is_err());
    // A predicate also answers directly.
    let p = ext
        .parse_predicate(bson::RawBsonRef::Document(&raw(&doc! {"$add": ["$a", 1]})))
        .expect("parses");
    assert_eq!(p.try_matches(&raw(&doc! {"a": -1})), Ok(false));
    assert_eq!(
        p.try_matches(&raw(&doc! {"a": "x"})).map_err(|e| code(&e)),
        Err(14)
    );
}

#[test]
fn parse_errors_fail_the_filter() {
    let parse = |f: Document| Filter::parse_with(&raw(&f), &ExprExtensions::new()).map(|_| ());
    assert_eq!(
        parse(doc! {"$expr": {"$foo": 1}}).map_err(|e| code(&e)),
        Err(168)
    );
    assert_eq!(
        parse(doc! {"$expr": {"$divide": [1, 0]}}).map_err(|e| code(&e)),
        Err(2)
    );
    assert_eq!(
        parse(doc! {"$expr": "$$nope"}).map_err(|e| code(&e)),
        Err(17276)
    );
    // $expr is top-level only (the filter parser's rule).
    assert_eq!(
        parse(doc! {"a": {"$elemMatch": {"$expr": {"$eq": [1, 1]}}}}).map_err(|e| code(&e)),
        Err(2)
    );
    // Other extensions stay NotImplemented.
    assert_eq!(parse(doc! {"$where": "1"}).map_err(|e| code(&e)), Err(238));
}

#[test]
fn command_variables() {
    let mut vars = Variables::new();
    vars.set("limit", bson::RawBson::Int32(200)).expect("valid");
    let ext = ExprExtensions::with_variables(vars);
    let f = Filter::parse_with(&raw(&doc! {"$expr": {"$gt": ["$spent", "$$limit"]}}), &ext)
        .expect("parses");
    let ids: Vec<_> = monthly_budget()
        .iter()
        .filter(|d| f.try_matches(&raw(d)).expect("evaluates"))
        .map(|d| d.get("_id").cloned())
        .collect();
    assert_eq!(ids, vec![Some(bson!(1)), Some(bson!(4)), Some(bson!(5))]);
}

#[track_caller]
fn project(spec: Document, input: Document, want: Document) {
    let ext = ExprExtensions::new();
    let p = Projection::parse_with(&raw(&spec), &ext).unwrap_or_else(|e| panic!("{spec}: {e:?}"));
    let got = p
        .apply(&raw(&input), None)
        .unwrap_or_else(|e| panic!("{spec}: {e:?}"));
    let want = raw(&want);
    assert_eq!(
        cairn_query::storage::display::document(&got),
        cairn_query::storage::display::document(&want),
        "{spec} on {input}"
    );
    assert_eq!(got.as_bytes(), want.as_bytes(), "{spec} on {input}");
}

#[test]
fn projections_with_expressions() {
    let d = doc! {"_id": 1, "x": 2, "b": "hi", "arr": [{"v": 1}, {"v": 2}]};
    project(
        doc! {"a": {"$add": ["$x", 1]}},
        d.clone(),
        doc! {"_id": 1, "a": 3},
    );
    project(doc! {"a": "$b"}, d.clone(), doc! {"_id": 1, "a": "hi"});
    project(doc! {"a": "$nope"}, d.clone(), doc! {"_id": 1});
    project(
        doc! {"a": "$$REMOVE", "x": 1},
        d.clone(),
        doc! {"_id": 1, "x": 2},
    );
    project(
        doc! {"a": ["$x", "$nope"]},
        d.clone(),
        doc! {"_id": 1, "a": [2, null]},
    );
    project(
        doc! {"vs": "$arr.v", "_id": 0},
        d.clone(),
        doc! {"vs": [1, 2]},
    );
    project(
        doc! {"s": {"$concat": ["$b", "!"]}, "x": 1},
        d.clone(),
        doc! {"_id": 1, "x": 2, "s": "hi!"},
    );
    project(
        doc! {"c": {"$cond": [{"$gt": ["$x", 1]}, "big", "small"]}},
        d.clone(),
        doc! {"_id": 1, "c": "big"},
    );
    // String and number literals keep find's meaning.
    project(
        doc! {"a": "lit", "x": 1},
        d.clone(),
        doc! {"_id": 1, "x": 2, "a": "lit"},
    );
    // Evaluation errors surface from apply.
    let ext = ExprExtensions::new();
    let p =
        Projection::parse_with(&raw(&doc! {"a": {"$divide": [1, "$x"]}}), &ext).expect("parses");
    let e = p
        .apply(&raw(&doc! {"x": 0}), None)
        .expect_err("division by zero");
    assert_eq!(code(&e), 2);
    let e = Projection::parse_with(&raw(&doc! {"a": {"$foo": 1}}), &ext).expect_err("unknown");
    assert_eq!(code(&e), 31325);
    // Accumulators in expression form sum arrays.
    let p = Projection::parse_with(&raw(&doc! {"_id": 0, "a": {"$sum": "$x"}}), &ext)
        .expect("accumulator expression");
    assert_eq!(
        p.apply(&raw(&doc! {"x": [1, 2, 3]}), None)
            .expect("applies"),
        raw(&doc! {"a": 6})
    );
}
