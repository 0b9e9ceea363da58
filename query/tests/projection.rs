//! `find` projections: MongoDB 7.0 behaviour pinned with table tests (sources: the manual's
//! projection pages, FerretDB's integration tests recorded against MongoDB, and
//! projection_parser.cpp / projection_node.cpp / projection_executor_utils.cpp).

use std::sync::Arc;

use bson::{Bson, Document, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, doc, rawdoc};
use cairn_query::QueryError;
use cairn_query::filter::{Filter, MatchDetails};
use cairn_query::projection::{ExpressionParser, Projection, ProjectionExpression, ProjectionKind};
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

fn parse(spec: &Document) -> Projection {
    Projection::parse(&raw(spec)).unwrap_or_else(|e| panic!("{spec}: {e:?}"))
}

/// Applies `spec` to `doc` (no filter) and compares the exact bytes (types and order).
#[track_caller]
fn check(spec: Document, input: Document, want: Document) {
    let got = parse(&spec)
        .apply(&raw(&input), None)
        .unwrap_or_else(|e| panic!("{spec}: {e:?}"));
    let want = raw(&want);
    assert_eq!(
        display::document(&got),
        display::document(&want),
        "projection {spec} on {input}"
    );
    assert_eq!(
        got.as_bytes(),
        want.as_bytes(),
        "projection {spec} on {input}"
    );
}

/// Applies `spec` to `doc` with the match details of `filter`.
#[track_caller]
fn check_with_filter(spec: Document, filter: Document, input: Document, want: Document) {
    let got = apply_with_filter(&spec, &filter, &input).unwrap_or_else(|e| panic!("{spec}: {e:?}"));
    let want = raw(&want);
    assert_eq!(
        display::document(&got),
        display::document(&want),
        "projection {spec}"
    );
    assert_eq!(got.as_bytes(), want.as_bytes());
}

fn apply_with_filter(
    spec: &Document,
    filter: &Document,
    input: &Document,
) -> Result<RawDocumentBuf, QueryError> {
    let f = Filter::parse(&raw(filter)).expect("filter");
    let d = raw(input);
    let details = f
        .match_details(&d)
        .expect("the filter matches the document");
    Projection::parse(&raw(spec))?.apply(&d, Some(&details))
}

#[track_caller]
fn parse_err(spec: Document) -> (i32, String) {
    match Projection::parse(&raw(&spec)) {
        Ok(p) => panic!("{spec}: parsed as {p:?}"),
        Err(e) => (code(&e), e.to_string()),
    }
}

#[track_caller]
fn apply_err(spec: Document, input: Document, details: Option<MatchDetails>) -> (i32, String) {
    match parse(&spec).apply(&raw(&input), details.as_ref()) {
        Ok(d) => panic!("{spec}: applied as {}", display::document(&d)),
        Err(e) => (code(&e), e.to_string()),
    }
}

fn sample() -> Document {
    doc! {"_id": 1, "a": 1, "b": 2, "c": {"d": 3, "e": 4}}
}

// ---------------------------------------------------------------------------------------------
// Inclusion, exclusion, _id, order
// ---------------------------------------------------------------------------------------------

#[test]
fn inclusion_and_exclusion_basics() {
    check(doc! {"a": 1}, sample(), doc! {"_id": 1, "a": 1});
    check(doc! {"a": 1, "_id": 0}, sample(), doc! {"a": 1});
    check(doc! {"_id": 0, "a": 1}, sample(), doc! {"a": 1});
    check(
        doc! {"a": 0},
        sample(),
        doc! {"_id": 1, "b": 2, "c": {"d": 3, "e": 4}},
    );
    check(
        doc! {"_id": 0},
        sample(),
        doc! {"a": 1, "b": 2, "c": {"d": 3, "e": 4}},
    );
    check(doc! {"_id": 1}, sample(), doc! {"_id": 1});
    check(
        doc! {"_id": 1, "a": 0},
        sample(),
        doc! {"_id": 1, "b": 2, "c": {"d": 3, "e": 4}},
    );
    check(
        doc! {"_id": 0, "a": 0},
        sample(),
        doc! {"b": 2, "c": {"d": 3, "e": 4}},
    );
    check(doc! {"x": 1}, sample(), doc! {"_id": 1});
    check(doc! {"x": 0}, sample(), sample());
    // Every number and boolean type; non-zero (NaN too) includes, zero excludes.
    check(
        doc! {"a": true, "b": 2.5, "c": 7i64},
        sample(),
        doc! {"_id": 1, "a": 1, "b": 2, "c": {"d": 3, "e": 4}},
    );
    check(doc! {"a": f64::NAN}, sample(), doc! {"_id": 1, "a": 1});
    check(
        doc! {"a": Bson::Decimal128("-0.0".parse().unwrap())},
        sample(),
        doc! {"_id": 1, "b": 2, "c": {"d": 3, "e": 4}},
    );
    check(
        doc! {"a": Bson::Decimal128("1E-10".parse().unwrap())},
        sample(),
        doc! {"_id": 1, "a": 1},
    );
    // -1 includes.
    check(doc! {"b": -1i64}, sample(), doc! {"_id": 1, "b": 2});
}

#[test]
fn empty_projection_returns_the_document() {
    let p = parse(&doc! {});
    assert!(p.is_empty());
    assert_eq!(p.kind(), ProjectionKind::Exclusion);
    check(doc! {}, sample(), sample());
    assert_eq!(p.required_top_level_fields(), None);
}

#[test]
fn output_keeps_document_order() {
    // Included fields come in the document's order, not the projection's.
    check(
        doc! {"c": 1, "a": 1},
        sample(),
        doc! {"_id": 1, "a": 1, "c": {"d": 3, "e": 4}},
    );
    check(
        doc! {"c.e": 1, "c.d": 1},
        sample(),
        doc! {"_id": 1, "c": {"d": 3, "e": 4}},
    );
    // _id stays where the document has it.
    check(
        doc! {"a": 1},
        doc! {"a": 1, "_id": 5, "b": 2},
        doc! {"a": 1, "_id": 5},
    );
    // FerretDB Include2FieldsReverse.
    check(
        doc! {"bar": true, "foo": 1.24},
        doc! {"_id": "int32-two", "foo": 1, "bar": 2},
        doc! {"_id": "int32-two", "foo": 1, "bar": 2},
    );
}

#[test]
fn mixing_inclusion_and_exclusion() {
    // FerretDB TestQueryProjectionErrors ExcludeInclude / IncludeExclude.
    assert_eq!(
        parse_err(doc! {"foo": false, "bar": true}),
        (
            31253,
            "Cannot do inclusion on field bar in exclusion projection".into()
        )
    );
    assert_eq!(
        parse_err(doc! {"foo": true, "bar": false}),
        (
            31254,
            "Cannot do exclusion on field bar in inclusion projection".into()
        )
    );
    assert_eq!(parse_err(doc! {"a.b": 0, "c": 1}).0, 31253);
    assert_eq!(parse_err(doc! {"c": 1, "a": {"b": 0}}).0, 31254);
    assert_eq!(
        parse_err(doc! {"b": 0, "a": "x"}),
        (
            31310,
            r#"Cannot use an expression a: "x" in an exclusion projection"#.into()
        )
    );
    assert_eq!(parse_err(doc! {"a": "x", "b": 0}).0, 31254);
    assert_eq!(
        parse_err(doc! {"b": 0, "a": {"$add": [1, 2]}}),
        (
            31252,
            "Cannot use expression other than $meta in exclusion projection".into()
        )
    );
    // _id may go either way.
    assert_eq!(
        parse(&doc! {"a": 1, "_id": 0}).kind(),
        ProjectionKind::Inclusion
    );
    assert_eq!(
        parse(&doc! {"a": 0, "_id": 1}).kind(),
        ProjectionKind::Exclusion
    );
    assert_eq!(parse(&doc! {"_id": 1}).kind(), ProjectionKind::Inclusion);
    assert_eq!(parse(&doc! {"_id": 0}).kind(), ProjectionKind::Exclusion);
}

#[test]
fn field_path_errors() {
    // FerretDB TestQueryProjectionErrors.
    assert_eq!(
        parse_err(doc! {"": true}),
        (
            40352,
            "FieldPath cannot be constructed with empty string".into()
        )
    );
    assert_eq!(
        parse_err(doc! {"v..d": true}),
        (
            15998,
            "FieldPath field names may not be empty strings.".into()
        )
    );
    let dollar =
        "FieldPath field names may not start with '$'. Consider using $getField or $setField.";
    for key in ["$", "$v", "$.foo", "v.$foo", "$.foo.$"] {
        assert_eq!(parse_err(doc! {key: true}), (16410, dollar.into()), "{key}");
    }
    assert_eq!(
        parse_err(doc! {"v..$": true}),
        (40353, "FieldPath must not end with a '.'.".into())
    );
    assert_eq!(parse_err(doc! {"a.": 1}).0, 40353);
    assert_eq!(parse_err(doc! {"a": {"b..c": 1}}).0, 15998);
    // Empty sub-projection.
    assert_eq!(
        parse_err(doc! {"a": {}}),
        (
            51270,
            "An empty sub-projection is not a valid value. Found empty object at path".into()
        )
    );
    // A lone $-key that is no expression.
    assert_eq!(
        parse_err(doc! {"a": {"$foo": 1}}),
        (31325, "Unknown expression $foo".into())
    );
    // With more keys it is a sub-projection with an invalid name.
    assert_eq!(parse_err(doc! {"a": {"$foo": 1, "b": 1}}).0, 16410);
    // DBRef names are valid field names.
    check(
        doc! {"a": {"$id": 1}},
        doc! {"_id": 1, "a": {"$ref": "c", "$id": 2}},
        doc! {"_id": 1, "a": {"$id": 2}},
    );
}

#[test]
fn path_collisions() {
    assert_eq!(
        parse_err(doc! {"a": 1, "a.b": 1}),
        (31249, "Path collision at a.b remaining portion b".into())
    );
    assert_eq!(
        parse_err(doc! {"a.b": 1, "a": 1}),
        (31250, "Path collision at a".into())
    );
    assert_eq!(
        parse_err(doc! {"a.b": 1, "a.b.c": 1}),
        (
            31249,
            "Path collision at a.b.c remaining portion b.c".into()
        )
    );
    assert_eq!(
        parse_err(doc! {"a": {"b": 1}, "a.b": 1}),
        (31250, "Path collision at a.b".into())
    );
    // The sub-object is merged into the existing node; the collision is reported relative.
    assert_eq!(
        parse_err(doc! {"a.b": 1, "a": {"b": 1}}),
        (31250, "Path collision at b".into())
    );
    assert_eq!(
        parse_err_raw(rawdoc! {"a": 0, "a": 0}),
        (31250, "Path collision at a".into())
    );
    // A collision inside the find() $slice parse falls back to the $slice expression, whose
    // arity error wins (MongoDB's parseSubObjectAsExpression catches every find() error).
    let (c, m) = parse_err(doc! {"a.b": 1, "a": {"$slice": 1}});
    assert_eq!(c, 28667);
    assert!(
        m.contains("because :: Location31250: Path collision at a :: "),
        "{m}"
    );
    // Merging sub-objects is fine.
    check(
        doc! {"c.d": 1, "c": {"e": 1}},
        sample(),
        doc! {"_id": 1, "c": {"d": 3, "e": 4}},
    );
}

fn parse_err_raw(spec: RawDocumentBuf) -> (i32, String) {
    match Projection::parse(&spec) {
        Ok(p) => panic!("parsed as {p:?}"),
        Err(e) => (code(&e), e.to_string()),
    }
}

// ---------------------------------------------------------------------------------------------
// Dotted paths and arrays
// ---------------------------------------------------------------------------------------------

#[test]
fn dotted_paths_through_arrays() {
    let input =
        doc! {"_id": 1, "a": [{"b": 1, "c": 2}, 3, {"c": 1}, [{"b": 2, "c": 3}, 4]], "z": 0};
    // Inclusion: scalars vanish, documents without b stay as {}, nested arrays are entered.
    check(
        doc! {"a.b": 1},
        input.clone(),
        doc! {"_id": 1, "a": [{"b": 1}, {}, [{"b": 2}]]},
    );
    check(
        doc! {"a": {"b": 1}},
        input.clone(),
        doc! {"_id": 1, "a": [{"b": 1}, {}, [{"b": 2}]]},
    );
    // Exclusion: everything else is kept as is.
    check(
        doc! {"a.b": 0},
        input.clone(),
        doc! {"_id": 1, "a": [{"c": 2}, 3, {"c": 1}, [{"c": 3}, 4]], "z": 0},
    );
    // A scalar where a document was expected.
    check(doc! {"a.b": 1}, doc! {"_id": 1, "a": 5}, doc! {"_id": 1});
    check(
        doc! {"a.b": 0},
        doc! {"_id": 1, "a": 5},
        doc! {"_id": 1, "a": 5},
    );
    check(
        doc! {"a.b": 1},
        doc! {"_id": 1, "a": {"c": 5}},
        doc! {"_id": 1, "a": {}},
    );
    check(doc! {"a.b": 1}, doc! {"_id": 1}, doc! {"_id": 1});
    // Numeric components are field names, not positions.
    check(
        doc! {"a.0": 1},
        doc! {"_id": 1, "a": [1, 2]},
        doc! {"_id": 1, "a": []},
    );
    check(
        doc! {"a.0": 1},
        doc! {"_id": 1, "a": {"0": 1, "1": 2}},
        doc! {"_id": 1, "a": {"0": 1}},
    );
    check(
        doc! {"a.0": 0},
        doc! {"_id": 1, "a": [1, 2]},
        doc! {"_id": 1, "a": [1, 2]},
    );
    // Deep paths and several fields under one parent (document order).
    check(
        doc! {"a.b.c.d": 1},
        doc! {"_id": 1, "a": {"b": {"c": {"d": 1, "e": 2}, "x": 1}, "y": 1}},
        doc! {"_id": 1, "a": {"b": {"c": {"d": 1}}}},
    );
    check(
        doc! {"a.z": 1, "a.x": 1},
        doc! {"_id": 1, "a": {"x": 1, "y": 2, "z": 3}},
        doc! {"_id": 1, "a": {"x": 1, "z": 3}},
    );
    check(
        doc! {"a.x": 0, "a.z": 0},
        doc! {"_id": 1, "a": {"x": 1, "y": 2, "z": 3}},
        doc! {"_id": 1, "a": {"y": 2}},
    );
    // Manual "Project Specific Array Elements in the Returned Array" style nested docs.
    check(
        doc! {"item": 1, "status": 1, "instock.qty": 1},
        doc! {
            "_id": 5, "item": "postcard", "status": "A",
            "size": {"h": 10, "w": 15.25, "uom": "cm"},
            "instock": [{"warehouse": "B", "qty": 15}, {"warehouse": "C", "qty": 35}]
        },
        doc! {"_id": 5, "item": "postcard", "status": "A", "instock": [{"qty": 15}, {"qty": 35}]},
    );
    check(
        doc! {"status": 0, "instock": 0},
        doc! {"_id": 5, "item": "postcard", "status": "A", "instock": [{"qty": 15}]},
        doc! {"_id": 5, "item": "postcard"},
    );
    check(
        doc! {"item": 1, "status": 1, "size.uom": 1},
        doc! {"_id": 5, "item": "postcard", "status": "A", "size": {"h": 10, "w": 15.25, "uom": "cm"}},
        doc! {"_id": 5, "item": "postcard", "status": "A", "size": {"uom": "cm"}},
    );
    check(
        doc! {"size.uom": 0},
        doc! {"_id": 5, "item": "postcard", "size": {"h": 10, "w": 15.25, "uom": "cm"}},
        doc! {"_id": 5, "item": "postcard", "size": {"h": 10, "w": 15.25}},
    );
}

// ---------------------------------------------------------------------------------------------
// Literals and expressions
// ---------------------------------------------------------------------------------------------

#[test]
fn literals_are_computed_fields() {
    check(doc! {"x": "lit"}, sample(), doc! {"_id": 1, "x": "lit"});
    check(
        doc! {"x": Bson::Null},
        sample(),
        doc! {"_id": 1, "x": Bson::Null},
    );
    check(
        doc! {"x": [1, "two"]},
        sample(),
        doc! {"_id": 1, "x": [1, "two"]},
    );
    check(
        doc! {"x": {"$literal": "$notapath"}},
        sample(),
        doc! {"_id": 1, "x": "$notapath"},
    );
    check(
        doc! {"x": {"$literal": 0}},
        sample(),
        doc! {"_id": 1, "x": 0},
    );
    // Computed fields come after the included ones, in projection order (a computed _id too).
    check(
        doc! {"b": "x", "a": 1},
        sample(),
        doc! {"_id": 1, "a": 1, "b": "x"},
    );
    check(
        doc! {"z": "z", "y": "y", "a": 1},
        sample(),
        doc! {"_id": 1, "a": 1, "z": "z", "y": "y"},
    );
    check(
        doc! {"_id": "new", "a": 1},
        sample(),
        doc! {"a": 1, "_id": "new"},
    );
    // Under a path: scalars (and dropped array slots) become documents.
    check(
        doc! {"a.b": "x"},
        doc! {"_id": 1, "a": [1, {"c": 1}, {"b": 0}]},
        doc! {"_id": 1, "a": [{"b": "x"}, {"b": "x"}, {"b": "x"}]},
    );
    check(
        doc! {"a.b": "x"},
        doc! {"_id": 1, "a": 1},
        doc! {"_id": 1, "a": {"b": "x"}},
    );
    check(
        doc! {"a.b": "x"},
        doc! {"_id": 1},
        doc! {"_id": 1, "a": {"b": "x"}},
    );
    check(
        doc! {"a.b": "x", "a.c": 1},
        doc! {"_id": 1, "a": {"c": 2, "d": 3}},
        doc! {"_id": 1, "a": {"c": 2, "b": "x"}},
    );
    // FerretDB Assign* cases: dates, regexes, binary values as literals.
    check(
        doc! {"_id": false, "foo": Bson::RegularExpression(bson::Regex { pattern: "^fo".try_into().unwrap(), options: "".try_into().unwrap() })},
        sample(),
        doc! {"foo": Bson::RegularExpression(bson::Regex { pattern: "^fo".try_into().unwrap(), options: "".try_into().unwrap() })},
    );
    check(
        doc! {"_id": true, "foo": Bson::Null, "bar": "qux"},
        sample(),
        doc! {"_id": 1, "foo": Bson::Null, "bar": "qux"},
    );
}

#[test]
fn aggregation_expressions_need_a_parser() {
    for spec in [
        doc! {"x": "$a"},
        doc! {"x": {"$add": [1, 2]}},
        doc! {"x": ["$a"]},
        doc! {"x": [{"y": 1}]},
        doc! {"x": {"$type": "$v"}},
        doc! {"x": {"$sum": "$v"}},
    ] {
        assert_eq!(parse_err(spec.clone()).0, 238, "{spec}");
    }
}

#[derive(Debug)]
struct Const(RawBson);

impl ProjectionExpression for Const {
    fn evaluate(&self, _root: &RawDocument) -> Result<Option<RawBson>, QueryError> {
        Ok(Some(self.0.clone()))
    }
}

struct ConstParser;

impl ExpressionParser for ConstParser {
    fn parse(&self, expr: RawBsonRef<'_>) -> Result<Arc<dyn ProjectionExpression>, QueryError> {
        Ok(Arc::new(Const(RawBson::String(display::value(expr)))))
    }
}

#[test]
fn expressions_go_through_the_parser() {
    let p =
        Projection::parse_with(&raw(&doc! {"x": {"$add": [1, 2]}, "a": 1}), &ConstParser).unwrap();
    let got = p.apply(&raw(&sample()), None).unwrap();
    assert_eq!(
        display::document(&got),
        r#"{ _id: 1, a: 1, x: "{ $add: [ 1, 2 ] }" }"#
    );
    assert_eq!(p.required_top_level_fields(), None);
    let p = Projection::parse_with(&raw(&doc! {"x": "$a"}), &ConstParser).unwrap();
    let got = p.apply(&raw(&sample()), None).unwrap();
    assert_eq!(display::document(&got), r#"{ _id: 1, x: ""$a"" }"#);
}

// ---------------------------------------------------------------------------------------------
// $slice
// ---------------------------------------------------------------------------------------------

fn slice_of(arg: Bson) -> Result<Bson, QueryError> {
    let p = Projection::parse(&raw(&doc! {"value": {"$slice": arg}}))?;
    let got = p.apply(&raw(&doc! {"_id": "array", "value": [1, 2, 3, 4]}), None)?;
    let d = Document::try_from(got.as_ref()).unwrap();
    Ok(d.get("value").cloned().unwrap_or(Bson::Null))
}

#[test]
fn slice_values() {
    // FerretDB TestQueryProjectionSlice (recorded against MongoDB).
    let arr = |v: &[i32]| Bson::Array(v.iter().map(|i| Bson::Int32(*i)).collect());
    let cases: Vec<(Bson, Bson)> = vec![
        (Bson::Int64(2), arr(&[1, 2])),
        (Bson::Int32(2), arr(&[1, 2])),
        (Bson::Int32(-2), arr(&[3, 4])),
        (Bson::Double(1.4), arr(&[1])),
        (
            Bson::Array(vec![Bson::Double(-2.5), Bson::Int32(2)]),
            arr(&[3, 4]),
        ),
        (
            Bson::Array(vec![Bson::Int32(1), Bson::Double(2.8)]),
            arr(&[2, 3]),
        ),
        (
            Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)]),
            arr(&[2, 3]),
        ),
        (
            Bson::Array(vec![Bson::Int32(-3), Bson::Int32(2)]),
            arr(&[2, 3]),
        ),
        (Bson::Double(f64::NAN), arr(&[])),
        (Bson::Double(f64::INFINITY), arr(&[1, 2, 3, 4])),
        // Derived from sliceArray.
        (Bson::Int32(0), arr(&[])),
        (Bson::Int32(10), arr(&[1, 2, 3, 4])),
        (Bson::Int32(-10), arr(&[1, 2, 3, 4])),
        (
            Bson::Array(vec![Bson::Int32(-10), Bson::Int32(2)]),
            arr(&[1, 2]),
        ),
        (Bson::Array(vec![Bson::Int32(10), Bson::Int32(2)]), arr(&[])),
        (Bson::Array(vec![Bson::Int32(3), Bson::Int32(5)]), arr(&[4])),
        (Bson::Decimal128("2.5".parse().unwrap()), arr(&[1, 2])),
        (Bson::Decimal128("3.5".parse().unwrap()), arr(&[1, 2, 3, 4])),
    ];
    for (arg, want) in cases {
        assert_eq!(slice_of(arg.clone()).unwrap(), want, "$slice: {arg}");
    }
}

#[test]
fn slice_keeps_other_fields_unless_inclusion() {
    let input = doc! {"_id": 1, "a": [1, 2, 3], "b": 2, "c": {"d": [4, 5, 6], "e": 1}};
    check(
        doc! {"a": {"$slice": 1}},
        input.clone(),
        doc! {"_id": 1, "a": [1], "b": 2, "c": {"d": [4, 5, 6], "e": 1}},
    );
    check(
        doc! {"a": {"$slice": 1}, "b": 1},
        input.clone(),
        doc! {"_id": 1, "a": [1], "b": 2},
    );
    check(
        doc! {"a": {"$slice": 1}, "_id": 0},
        input.clone(),
        doc! {"a": [1], "b": 2, "c": {"d": [4, 5, 6], "e": 1}},
    );
    check(
        doc! {"a": {"$slice": 1}, "_id": 1},
        input.clone(),
        doc! {"_id": 1, "a": [1]},
    );
    check(
        doc! {"a": {"$slice": 1}, "b": 0},
        input.clone(),
        doc! {"_id": 1, "a": [1], "c": {"d": [4, 5, 6], "e": 1}},
    );
    // Manual: the embedded document keeps only the sliced field in an inclusion (4.4+).
    check(
        doc! {"b": 1, "c.d": {"$slice": -1}},
        input.clone(),
        doc! {"_id": 1, "b": 2, "c": {"d": [6]}},
    );
    check(
        doc! {"c.d": {"$slice": -1}},
        input.clone(),
        doc! {"_id": 1, "a": [1, 2, 3], "b": 2, "c": {"d": [6], "e": 1}},
    );
    // A non-array is left alone (FerretDB ProjectionSliceNonArrayField).
    check(
        doc! {"_id": {"$slice": 1}},
        doc! {"_id": "document", "value": {"foo": 42}},
        doc! {"_id": "document", "value": {"foo": 42}},
    );
    // Through arrays of documents.
    check(
        doc! {"a.b": {"$slice": 1}},
        doc! {"_id": 1, "a": [{"b": [1, 2], "c": 1}, {"b": [3]}, 5, [{"b": [7, 8]}]]},
        doc! {"_id": 1, "a": [{"b": [1], "c": 1}, {"b": [3]}, 5, [{"b": [7, 8]}]]},
    );
    check(
        doc! {"a": {"$slice": 1}},
        doc! {"_id": 1, "a": [[1, 2], [3]]},
        doc! {"_id": 1, "a": [[1, 2]]},
    );
}

#[test]
fn slice_syntax_errors() {
    // FerretDB TestQueryProjectionSlice error cases (recorded against MongoDB).
    let cases: Vec<(Bson, &str)> = vec![
        (
            Bson::String("string".into()),
            r#"Invalid $slice syntax. The given syntax { $slice: "string" } did not match the find() syntax because :: Location31273: $slice only supports numbers and [skip, limit] arrays :: The given syntax did not match the expression $slice syntax. :: caused by :: Expression $slice takes at least 2 arguments, and at most 3, but 1 were passed in."#,
        ),
        (
            Bson::Document(doc! {"a": {"b": 3}, "b": "abcd"}),
            r#"Invalid $slice syntax. The given syntax { $slice: { a: { b: 3 }, b: "abcd" } } did not match the find() syntax because :: Location31273: $slice only supports numbers and [skip, limit] arrays :: The given syntax did not match the expression $slice syntax. :: caused by :: Expression $slice takes at least 2 arguments, and at most 3, but 1 were passed in."#,
        ),
        (
            Bson::Array(vec![]),
            "Invalid $slice syntax. The given syntax { $slice: [] } did not match the find() syntax because :: Location31272: $slice array argument should be of form [skip, limit] :: The given syntax did not match the expression $slice syntax. :: caused by :: Expression $slice takes at least 2 arguments, and at most 3, but 0 were passed in.",
        ),
        (
            Bson::Array(vec![
                Bson::Int32(1),
                Bson::Int32(2),
                Bson::Int32(3),
                Bson::Int32(4),
            ]),
            "Invalid $slice syntax. The given syntax { $slice: [ 1, 2, 3, 4 ] } did not match the find() syntax because :: Location31272: $slice array argument should be of form [skip, limit] :: The given syntax did not match the expression $slice syntax. :: caused by :: Expression $slice takes at least 2 arguments, and at most 3, but 4 were passed in.",
        ),
        (
            Bson::Null,
            "Invalid $slice syntax. The given syntax { $slice: null } did not match the find() syntax because :: Location31273: $slice only supports numbers and [skip, limit] arrays :: The given syntax did not match the expression $slice syntax. :: caused by :: Expression $slice takes at least 2 arguments, and at most 3, but 1 were passed in.",
        ),
        (
            Bson::Array(vec![Bson::Null]),
            "Invalid $slice syntax. The given syntax { $slice: [ null ] } did not match the find() syntax because :: Location31272: $slice array argument should be of form [skip, limit] :: The given syntax did not match the expression $slice syntax. :: caused by :: Expression $slice takes at least 2 arguments, and at most 3, but 1 were passed in.",
        ),
    ];
    for (arg, msg) in cases {
        let e = slice_of(arg.clone()).unwrap_err();
        assert_eq!(
            (code(&e), e.to_string().as_str()),
            (28667, msg),
            "$slice: {arg}"
        );
    }
    // Shapes the find syntax rejects but the $slice expression accepts are aggregation
    // expressions (MongoDB then fails at run time with 28724 for these constants).
    for arg in [
        Bson::Array(vec![Bson::String("string".into()), Bson::Int32(5)]),
        Bson::Array(vec![Bson::Int32(2), Bson::String("string".into())]),
        Bson::Array(vec![Bson::Int32(3), Bson::Int32(-2)]),
        Bson::Array(vec![Bson::Int32(1), Bson::Int32(0)]),
        Bson::Array(vec![
            Bson::String("string".into()),
            Bson::Int32(2),
            Bson::Int32(3),
        ]),
        Bson::Array(vec![Bson::Int32(2), Bson::Null]),
    ] {
        assert_eq!(
            code(&slice_of(arg.clone()).unwrap_err()),
            238,
            "$slice: {arg}"
        );
    }
    // The expression fallback keeps its own code, with the find() reason as context.
    assert_eq!(
        parse_err(doc! {"b": 0, "a": {"$slice": ["x", 1]}}),
        (
            31252,
            r#"Invalid $slice syntax. The given syntax { $slice: [ "x", 1 ] } did not match the find() syntax because :: Location31257: $slice expects the skip argument to be a number, got string :: The given syntax did not match the expression $slice syntax. :: caused by :: Cannot use expression other than $meta in exclusion projection"#.into()
        )
    );
    assert!(
        parse_err(doc! {"b": 0, "a": {"$slice": [1, 0]}})
            .1
            .contains("Location31259: $slice limit must be positive, got 0")
    );
    assert!(
        parse_err(doc! {"b": 0, "a": {"$slice": [1, "x"]}})
            .1
            .contains(
                "Location31258: $slice expects the limit argument to be a number, got string"
            )
    );
}

// ---------------------------------------------------------------------------------------------
// $elemMatch
// ---------------------------------------------------------------------------------------------

fn composite_2() -> Document {
    doc! {"_id": "document-composite-2", "value": [
        {"field": 40}, {"field": 41}, {"field": 42}, {"field": {"field": 43}}, {"field": [44]},
    ]}
}

fn composite_3() -> Document {
    doc! {"_id": "document-composite-3", "value": [
        {"field": 10}, {"field": {"field": 11}}, {"field": {"field": 12}},
    ]}
}

#[test]
fn elem_match_ferretdb_cases() {
    // FerretDB TestQueryProjectionElemMatch (recorded against MongoDB).
    let c2 = |v: Option<Bson>| match v {
        Some(v) => doc! {"_id": "document-composite-2", "value": [v]},
        None => doc! {"_id": "document-composite-2"},
    };
    let c3 = |v: Option<Bson>| match v {
        Some(v) => doc! {"_id": "document-composite-3", "value": [v]},
        None => doc! {"_id": "document-composite-3"},
    };
    let f = |v: Bson| Some(Bson::Document(doc! {"field": v}));
    let cases: Vec<(Document, Option<Bson>, Option<Bson>)> = vec![
        (doc! {"$eq": 42}, f(42.into()), None),
        (doc! {"$eq": [42]}, None, None),
        (doc! {"$eq": [44]}, f(Bson::Array(vec![44.into()])), None),
        (doc! {"$ne": 42}, f(40.into()), f(10.into())),
        (doc! {"$gt": 13}, f(40.into()), None),
        (doc! {"$gte": 13}, f(40.into()), None),
        (doc! {"$lt": 10}, None, None),
        (doc! {"$lte": 10}, None, f(10.into())),
        (doc! {"$in": [41]}, f(41.into()), None),
        (doc! {"$nin": [40]}, f(41.into()), f(10.into())),
    ];
    for (cond, want2, want3) in cases {
        let spec = doc! {"value": {"$elemMatch": {"field": cond.clone()}}};
        check(spec.clone(), composite_2(), c2(want2));
        check(spec, composite_3(), c3(want3));
    }
    assert_eq!(
        parse_err(doc! {"value": {"$elemMatch": {"field": {"$in": 41}}}}),
        (2, "$in needs an array".into())
    );
    assert_eq!(
        parse_err(doc! {"value": {"$elemMatch": {"field": {"$nin": 40}}}}),
        (2, "$nin needs an array".into())
    );
    assert_eq!(
        parse_err(doc! {"value": {"$elemMatch": ["field", "$eq", 42]}}),
        (
            31274,
            "elemMatch: Invalid argument, object required, but got array".into()
        )
    );
    assert_eq!(
        parse_err(doc! {"value": {"field": {"$elemMatch": ""}}}),
        (
            31274,
            "elemMatch: Invalid argument, object required, but got string".into()
        )
    );
    assert_eq!(
        parse_err(doc! {"value": {"field": {"field": {"$elemMatch": {"$eq": 42}}}}}),
        (
            31275,
            "Cannot use $elemMatch projection on a nested field.".into()
        )
    );
    assert_eq!(
        parse_err(doc! {"a.b": {"$elemMatch": {"$eq": 42}}}).0,
        31275
    );
}

#[test]
fn elem_match_placement_and_type() {
    // Manual ($elemMatch projection, 4.4+): the field comes after the other inclusions.
    let player = doc! {
        "_id": 3, "name": "player1",
        "games": [{"game": "abc", "score": 8}, {"game": "xyz", "score": 5}],
        "joined": bson::DateTime::from_millis(1_577_836_800_000i64),
        "lastLogin": bson::DateTime::from_millis(1_588_291_200_000i64),
    };
    check(
        doc! {"games": {"$elemMatch": {"score": {"$gt": 5}}}, "joined": 1, "lastLogin": 1},
        player.clone(),
        doc! {
            "_id": 3,
            "joined": bson::DateTime::from_millis(1_577_836_800_000i64),
            "lastLogin": bson::DateTime::from_millis(1_588_291_200_000i64),
            "games": [{"game": "abc", "score": 8}],
        },
    );
    // Manual schools example: only the first match; absent when nothing matches.
    let school =
        |id: i32, students: Bson| doc! {"_id": id, "zipcode": "63109", "students": students};
    check(
        doc! {"students": {"$elemMatch": {"school": 102}}},
        school(
            1,
            Bson::Array(vec![
                Bson::Document(doc! {"name": "john", "school": 102, "age": 10}),
                Bson::Document(doc! {"name": "jess", "school": 102, "age": 11}),
                Bson::Document(doc! {"name": "jeff", "school": 108, "age": 15}),
            ]),
        ),
        doc! {"_id": 1, "students": [{"name": "john", "school": 102, "age": 10}]},
    );
    check(
        doc! {"students": {"$elemMatch": {"school": 102}}},
        school(
            2,
            Bson::Array(vec![Bson::Document(
                doc! {"name": "ajax", "school": 100, "age": 7},
            )]),
        ),
        doc! {"_id": 2},
    );
    check(
        doc! {"students": {"$elemMatch": {"school": 102, "age": {"$gt": 10}}}},
        school(
            1,
            Bson::Array(vec![
                Bson::Document(doc! {"name": "john", "school": 102, "age": 10}),
                Bson::Document(doc! {"name": "jess", "school": 102, "age": 11}),
            ]),
        ),
        doc! {"_id": 1, "students": [{"name": "jess", "school": 102, "age": 11}]},
    );
    // $elemMatch alone is an inclusion; with _id: 0 too.
    let p = parse(&doc! {"students": {"$elemMatch": {"school": 102}}, "_id": 0});
    assert_eq!(p.kind(), ProjectionKind::Inclusion);
    // Scalar arrays and non-arrays.
    check(
        doc! {"a": {"$elemMatch": {"$gt": 1}}},
        doc! {"_id": 1, "a": [1, 5, 7]},
        doc! {"_id": 1, "a": [5]},
    );
    check(
        doc! {"a": {"$elemMatch": {"$gt": 1}}},
        doc! {"_id": 1, "a": 5},
        doc! {"_id": 1},
    );
    // In an exclusion the matched element replaces the field in place; no match removes it.
    check(
        doc! {"b": 0, "a": {"$elemMatch": {"$gt": 1}}},
        doc! {"_id": 1, "a": [1, 5], "b": 2, "c": 3},
        doc! {"_id": 1, "a": [5], "c": 3},
    );
    check(
        doc! {"b": 0, "a": {"$elemMatch": {"$gt": 10}}},
        doc! {"_id": 1, "a": [1, 5], "b": 2, "c": 3},
        doc! {"_id": 1, "c": 3},
    );
}

// ---------------------------------------------------------------------------------------------
// Positional $
// ---------------------------------------------------------------------------------------------

#[test]
fn positional_parse_errors() {
    let mid = "As of 4.4, it's illegal to specify positional operator in the middle of a path.Positional projection may only be used at the end, for example: a.b.$. If the query previously used a form like a.b.$.d, remove the parts following the '$' and the results will be equivalent.";
    for key in ["v.$.foo", "v.$.foo.$", "$.v.$.foo"] {
        assert_eq!(parse_err(doc! {key: true}), (31394, mid.into()), "{key}");
    }
    assert_eq!(
        parse_err(doc! {"v.$": false}),
        (
            31395,
            "positional projection cannot be used with exclusion".into()
        )
    );
    assert_eq!(
        parse_err(doc! {"v.$": "x"}),
        (
            31308,
            "positional projection cannot be used with a literal".into()
        )
    );
    assert_eq!(
        parse_err(doc! {"v.$": {"a": 1}}),
        (
            31271,
            "positional projection cannot be used with an expression or sub object".into()
        )
    );
    assert_eq!(
        parse_err(doc! {"a.$": 1, "b.$": 1}),
        (
            31276,
            "Cannot specify more than one positional projection per query.".into()
        )
    );
    assert_eq!(
        parse_err(doc! {"a.$": 1, "b": {"$elemMatch": {"$gt": 1}}}),
        (
            31255,
            "Cannot specify positional operator and $elemMatch.".into()
        )
    );
    assert_eq!(
        parse_err(doc! {"b": {"$elemMatch": {"$gt": 1}}, "a.$": 1}),
        (
            31256,
            "Cannot specify positional operator and $elemMatch.".into()
        )
    );
    assert_eq!(parse_err(doc! {"a": 0, "b.$": 1}).0, 31253);
    assert_eq!(parse_err(doc! {"b.$": 1, "a": 0}).0, 31254);
    assert_eq!(parse_err(doc! {"a": 1, "a.$": 1}).0, 31250);
    // Names that merely contain '$' are plain fields (FerretDB DollarEndingKey etc.).
    check(
        doc! {"v$": 1},
        doc! {"_id": 1, "v$": 2, "v": 3},
        doc! {"_id": 1, "v$": 2},
    );
    check(
        doc! {"v.foo$": 1},
        doc! {"_id": 1, "v": {"foo$": 2}},
        doc! {"_id": 1, "v": {"foo$": 2}},
    );
    assert!(parse(&doc! {"a.$": 1}).has_positional());
}

#[test]
fn positional_projection() {
    // Manual ($ projection): students with grades.
    check_with_filter(
        doc! {"grades.$": 1},
        doc! {"semester": 1, "grades": {"$gte": 85}},
        doc! {"_id": 1, "semester": 1, "grades": [70, 87, 90]},
        doc! {"_id": 1, "grades": [87]},
    );
    check_with_filter(
        doc! {"grades.$": 1},
        doc! {"semester": 1, "grades": {"$gte": 85}},
        doc! {"_id": 3, "semester": 1, "grades": [85, 100, 90]},
        doc! {"_id": 3, "grades": [85]},
    );
    // Array of documents.
    check_with_filter(
        doc! {"grades.$": 1},
        doc! {"grades.mean": {"$gt": 70}},
        doc! {"_id": 7, "grades": [{"grade": 80, "mean": 75, "std": 8}, {"grade": 85, "mean": 90, "std": 5}]},
        doc! {"_id": 7, "grades": [{"grade": 80, "mean": 75, "std": 8}]},
    );
    check_with_filter(
        doc! {"grades.$": 1, "_id": 0, "semester": 1},
        doc! {"grades.mean": {"$gt": 80}},
        doc! {"_id": 7, "semester": 2, "grades": [{"grade": 80, "mean": 75}, {"grade": 85, "mean": 90}]},
        doc! {"semester": 2, "grades": [{"grade": 85, "mean": 90}]},
    );
    // a.b.$: the array found on the path (a) is the one replaced; the element comes from the
    // projected document.
    check_with_filter(
        doc! {"a.b.$": 1},
        doc! {"a.b": 2},
        doc! {"_id": 1, "a": [{"b": 1, "c": 2}, {"b": 2, "c": 3}]},
        doc! {"_id": 1, "a": [{"b": 2}]},
    );
    // No array on the path: nothing to replace (FerretDB Implicit on scalars).
    check_with_filter(
        doc! {"v.$": 1},
        doc! {"v": 42},
        doc! {"_id": "int32", "v": 42},
        doc! {"_id": "int32", "v": 42},
    );
    check_with_filter(
        doc! {"v.$": true},
        doc! {"v": {"$gt": 42}},
        doc! {"_id": "array-three", "v": [42, "foo", 43.5]},
        doc! {"_id": "array-three", "v": [43.5]},
    );
}

#[test]
fn positional_execution_errors() {
    let no_match = "positional operator '.$' couldn't find a matching element in the array";
    // FerretDB PositionalOperatorEmptyFilter / FilterMissingPath: the filter records no key.
    assert_eq!(
        apply_err(doc! {"v.$": true}, doc! {"_id": "array", "v": [42]}, None),
        (51246, no_match.into())
    );
    let e = apply_with_filter(
        &doc! {"v.$": true},
        &doc! {"_id": "array"},
        &doc! {"_id": "array", "v": [42]},
    )
    .unwrap_err();
    assert_eq!((code(&e), e.to_string()), (51246, no_match.into()));
    let e = apply_with_filter(
        &doc! {"v.$": true},
        &doc! {},
        &doc! {"_id": "array-empty", "v": []},
    )
    .unwrap_err();
    assert_eq!(code(&e), 51246);
    // FerretDB PositionalOperatorMismatch: the projected array lost its scalar elements.
    let e = apply_with_filter(
        &doc! {"v.foo.$": true},
        &doc! {"v": 42},
        &doc! {"_id": "array", "v": [42, 43]},
    )
    .unwrap_err();
    assert_eq!(
        (code(&e), e.to_string()),
        (51247, "positional operator '.$' element mismatch".into())
    );
    // A key past the end of the array.
    assert_eq!(
        apply_err(
            doc! {"v.$": 1},
            doc! {"_id": 1, "v": [1, 2]},
            Some(MatchDetails {
                elem_match_key: Some(5)
            })
        )
        .0,
        51247
    );
}

// ---------------------------------------------------------------------------------------------
// $meta
// ---------------------------------------------------------------------------------------------

#[test]
fn meta_projections() {
    assert_eq!(
        parse_err(doc! {"score": {"$meta": "textScore"}}),
        (
            40218,
            "query requires text score metadata, but it is not available".into()
        )
    );
    assert_eq!(
        parse_err(doc! {"score": {"$meta": "bogus"}}),
        (17308, "Unsupported argument to $meta: bogus".into())
    );
    assert_eq!(
        parse_err(doc! {"score": {"$meta": 1}}),
        (17307, "$meta only supports string arguments".into())
    );
    for name in ["searchScore", "indexKey", "recordId", "sortKey", "randVal"] {
        assert_eq!(parse_err(doc! {"m": {"$meta": name}}).0, 238, "{name}");
    }
    // $meta is allowed in an exclusion (the check comes first).
    assert_eq!(
        parse_err(doc! {"a": 0, "m": {"$meta": "textScore"}}).0,
        40218
    );
}

// ---------------------------------------------------------------------------------------------
// Required fields
// ---------------------------------------------------------------------------------------------

#[test]
fn required_top_level_fields() {
    let req = |spec: Document| parse(&spec).required_top_level_fields();
    let s = |v: &[&str]| Some(v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
    assert_eq!(req(doc! {"a": 1, "b.c": 1}), s(&["a", "b", "_id"]));
    assert_eq!(req(doc! {"_id": 0, "a": 1}), s(&["a"]));
    assert_eq!(req(doc! {"_id": 1}), s(&["_id"]));
    assert_eq!(
        req(doc! {"a": {"$elemMatch": {"$gt": 1}}, "x": "lit"}),
        s(&["a", "_id"])
    );
    assert_eq!(req(doc! {"a.$": 1}), s(&["a", "_id"]));
    assert_eq!(req(doc! {"a": {"$slice": 1}, "_id": 1}), s(&["a", "_id"]));
    assert_eq!(req(doc! {"a.b": "lit"}), s(&["a", "_id"]));
    assert_eq!(req(doc! {"a": 0}), None);
    assert_eq!(req(doc! {"a": {"$slice": 1}}), None);
    assert_eq!(req(doc! {}), None);
    // Projecting only the required fields gives the same result.
    let spec = doc! {"b": 1, "c.d": 1, "x": "lit"};
    let p = parse(&spec);
    let fields = p.required_top_level_fields().unwrap();
    let full = raw(&sample());
    let mut partial = Document::new();
    for (k, v) in sample() {
        if fields.contains(&k) {
            partial.insert(k, v);
        }
    }
    assert_eq!(
        p.apply(&full, None).unwrap().as_bytes(),
        p.apply(&raw(&partial), None).unwrap().as_bytes()
    );
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

fn leaf() -> impl Strategy<Value = Bson> {
    prop_oneof![
        (-3i32..3).prop_map(Bson::Int32),
        "[xy]{0,2}".prop_map(Bson::String),
        Just(Bson::Null),
    ]
}

fn value() -> impl Strategy<Value = Bson> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
            prop::collection::vec((prop_oneof![Just("a"), Just("b"), Just("c")], inner), 0..3)
                .prop_map(|kv| {
                    let mut d = Document::new();
                    for (k, v) in kv {
                        d.insert(k, v);
                    }
                    Bson::Document(d)
                }),
        ]
    })
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![Just("a"), Just("b"), Just("c"), Just("_id"), Just("0")],
        1..4,
    )
    .prop_map(|p| p.join("."))
}

fn spec_value() -> impl Strategy<Value = Bson> {
    prop_oneof![
        4 => Just(Bson::Int32(1)),
        4 => Just(Bson::Int32(0)),
        1 => Just(Bson::Boolean(true)),
        1 => Just(Bson::String("lit".into())),
        1 => (-3i32..3).prop_map(|n| Bson::Document(doc! {"$slice": n})),
        1 => Just(Bson::Document(doc! {"$elemMatch": {"$gt": 0}})),
        1 => Just(Bson::Document(doc! {"$elemMatch": {"a": 1}})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    /// Parsing and applying never panic, and results are well-formed BSON; exclusions never
    /// invent fields and inclusions only return named top-level fields.
    #[test]
    fn projections_never_panic(
        fields in prop::collection::vec(("[abc_]", value()), 0..4),
        spec in prop::collection::vec((path(), spec_value()), 0..4),
        key in prop::option::of(0usize..4),
    ) {
        let mut d = doc! {"_id": 1};
        for (k, v) in fields {
            d.insert(k, v);
        }
        let mut s = Document::new();
        for (k, v) in spec {
            s.insert(k, v);
        }
        let doc = raw(&d);
        if let Ok(p) = Projection::parse(&raw(&s)) {
            let details = MatchDetails { elem_match_key: key };
            if let Ok(out) = p.apply(&doc, Some(&details)) {
                let out_doc = Document::try_from(out.as_ref());
                prop_assert!(out_doc.is_ok());
                let out_doc = out_doc.unwrap();
                if let Some(req) = p.required_top_level_fields() {
                    for k in out_doc.keys() {
                        prop_assert!(req.contains(k) || s.contains_key(k), "{} not required", k);
                    }
                }
                if p.kind() == ProjectionKind::Exclusion && !s.values().any(|v| matches!(v, Bson::Document(_))) {
                    for k in out_doc.keys() {
                        prop_assert!(d.contains_key(k));
                    }
                }
            }
        }
    }
}

#[test]
fn projection_is_send_sync_and_clone() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Projection>();
}
