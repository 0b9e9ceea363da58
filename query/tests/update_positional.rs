//! Positional updates: `$` (from the filter's match details), `$[]` and `$[<id>]` with
//! arrayFilters — the manual's examples and MongoDB's errors.

#[path = "update_support.rs"]
mod support;

use bson::{Bson, Document, doc};
use support::*;

#[track_caller]
fn check_pos(doc: Document, update: Document, matched: Option<usize>, want: Document) {
    match apply_full(&doc, &update, None, matched) {
        Ok(a) => assert_doc(&a, &want),
        Err(e) => panic!("{update}: {e:?}"),
    }
}

#[track_caller]
fn check_af(doc: Document, update: Document, filters: Vec<Document>, want: Document) {
    match apply_full(&doc, &update, Some(filters), None) {
        Ok(a) => assert_doc(&a, &want),
        Err(e) => panic!("{update}: {e:?}"),
    }
}

#[track_caller]
fn check_af_err(
    doc: Document,
    update: Document,
    filters: Vec<Document>,
    code_want: i32,
    msg: &str,
) {
    match apply_full(&doc, &update, Some(filters), None) {
        Ok(a) => panic!("{update}: expected an error, got {:?}", a.doc),
        Err(e) => {
            assert_eq!(code(&e), code_want, "{e:?}");
            assert_eq!(e.to_string(), msg);
        }
    }
}

#[test]
fn positional_dollar_manual() {
    // db.students.updateOne({_id: 1, grades: 80}, {$set: {"grades.$": 82}})
    check_pos(
        doc! {"_id": 1, "grades": [85, 80, 80]},
        doc! {"$set": {"grades.$": 82}},
        Some(1),
        doc! {"_id": 1, "grades": [85, 82, 80]},
    );
    // {_id: 4, "grades.grade": 85}, {$set: {"grades.$.std": 6}}
    check_pos(
        doc! {"_id": 4, "grades": [{"grade": 80, "mean": 75, "std": 8},
        {"grade": 85, "mean": 90, "std": 5},
        {"grade": 85, "mean": 85, "std": 8}]},
        doc! {"$set": {"grades.$.std": 6}},
        Some(1),
        doc! {"_id": 4, "grades": [{"grade": 80, "mean": 75, "std": 8},
        {"grade": 85, "mean": 90, "std": 6},
        {"grade": 85, "mean": 85, "std": 8}]},
    );
    // The positional element is applied in its place among named siblings.
    check_pos(
        doc! {"_id": 1, "a": [{"x": 1}, {"x": 2}]},
        doc! {"$set": {"a.$.y": 1, "a.0.z": 2}},
        Some(1),
        doc! {"_id": 1, "a": [{"x": 1, "z": 2}, {"x": 2, "y": 1}]},
    );
    // Merged with a named update of the same element (different fields).
    check_pos(
        doc! {"_id": 1, "a": [{"x": 1}]},
        doc! {"$set": {"a.$.y": 1, "a.0.z": 2}},
        Some(0),
        doc! {"_id": 1, "a": [{"x": 1, "y": 1, "z": 2}]},
    );
}

#[test]
fn positional_errors() {
    let e = apply_full(
        &doc! {"_id": 1, "a": [1]},
        &doc! {"$set": {"a.$": 2}},
        None,
        None,
    )
    .unwrap_err();
    assert_eq!(code(&e), 2);
    assert_eq!(
        e.to_string(),
        "The positional operator did not find the match needed from the query."
    );
    let e = apply_full(
        &doc! {"_id": 1, "a": [1]},
        &doc! {"$set": {"a.$": 2, "a.0": 3}},
        None,
        Some(0),
    )
    .unwrap_err();
    assert_eq!(code(&e), 40);
    assert_eq!(e.to_string(), "Update created a conflict at 'a.0'");
}

#[test]
fn all_positional_manual() {
    check_af(
        doc! {"_id": 1, "grades": [85, 82, 80]},
        doc! {"$inc": {"grades.$[]": 10}},
        vec![],
        doc! {"_id": 1, "grades": [95, 92, 90]},
    );
    check_af(
        doc! {"_id": 1, "grades": [{"grade": 80, "mean": 75, "std": 8}, {"grade": 85, "mean": 90, "std": 6}]},
        doc! {"$inc": {"grades.$[].std": -2}},
        vec![],
        doc! {"_id": 1, "grades": [{"grade": 80, "mean": 75, "std": 6}, {"grade": 85, "mean": 90, "std": 4}]},
    );
    check_af_err(
        doc! {"_id": 1},
        doc! {"$set": {"grades.$[]": 1}},
        vec![],
        2,
        "The path 'grades' must exist in the document in order to apply array updates.",
    );
    check_af_err(
        doc! {"_id": 1, "a": {"b": 123}},
        doc! {"$set": {"a.b.$[]": 1}},
        vec![],
        2,
        "Cannot apply array updates to non-array element b: 123",
    );
}

#[test]
fn filtered_positional_manual() {
    check_af(
        doc! {"_id": 2, "grades": [98, 100, 102]},
        doc! {"$set": {"grades.$[element]": 100}},
        vec![doc! {"element": {"$gte": 100}}],
        doc! {"_id": 2, "grades": [98, 100, 100]},
    );
    check_af(
        doc! {"_id": 3, "grades": [{"grade": 80, "mean": 75, "std": 8},
        {"grade": 85, "mean": 90, "std": 5},
        {"grade": 85, "mean": 85, "std": 8}]},
        doc! {"$set": {"grades.$[elem].mean": 100}},
        vec![doc! {"elem.grade": {"$gte": 85}}],
        doc! {"_id": 3, "grades": [{"grade": 80, "mean": 75, "std": 8},
        {"grade": 85, "mean": 100, "std": 5},
        {"grade": 85, "mean": 100, "std": 8}]},
    );
    check_af(
        doc! {"_id": 3, "grades": [{"grade": 80, "mean": 75, "std": 8},
        {"grade": 85, "mean": 90, "std": 5},
        {"grade": 85, "mean": 85, "std": 8}]},
        doc! {"$inc": {"grades.$[elem].std": -1}},
        vec![doc! {"elem.grade": {"$gte": 80}, "elem.std": {"$gt": 5}}],
        doc! {"_id": 3, "grades": [{"grade": 80, "mean": 75, "std": 7},
        {"grade": 85, "mean": 90, "std": 5},
        {"grade": 85, "mean": 85, "std": 7}]},
    );
    // $[] and $[<id>] together.
    check_af(
        doc! {"_id": 1, "grades": [
        {"type": "quiz", "questions": [10, 8, 5]}, {"type": "quiz", "questions": [8, 9, 6]},
        {"type": "hw", "questions": [5, 4, 3]}, {"type": "exam", "questions": [25, 10, 23, 0]}]},
        doc! {"$inc": {"grades.$[].questions.$[score]": 2}},
        vec![doc! {"score": {"$gte": 8}}],
        doc! {"_id": 1, "grades": [
        {"type": "quiz", "questions": [12, 10, 5]}, {"type": "quiz", "questions": [10, 11, 6]},
        {"type": "hw", "questions": [5, 4, 3]}, {"type": "exam", "questions": [27, 12, 25, 0]}]},
    );
    // $or inside an array filter; $[<id>] that matches nothing is a no-op.
    check_af(
        doc! {"_id": 1, "a": [1, 2, 3, 4]},
        doc! {"$set": {"a.$[x]": 0}},
        vec![doc! {"$or": [{"x": 1}, {"x": 4}]}],
        doc! {"_id": 1, "a": [0, 2, 3, 0]},
    );
    let a = apply_full(
        &doc! {"_id": 1, "a": [1]},
        &doc! {"$set": {"a.$[x]": 0}},
        Some(vec![doc! {"x": 5}]),
        None,
    )
    .unwrap();
    assert!(!a.modified);
}

#[test]
fn array_filter_errors() {
    check_af_err(
        doc! {"_id": 1, "a": [1]},
        doc! {"$set": {"a.$[i]": 3}},
        vec![doc! {"j": 2}],
        2,
        "No array filter found for identifier 'i' in path 'a.$[i]'",
    );
    check_af_err(
        doc! {"_id": 1, "a": [1]},
        doc! {"$set": {"a": 1}},
        vec![doc! {"x": 2}],
        9,
        "The array filter for identifier 'x' was not used in the update { $set: { a: 1 } }",
    );
    check_af_err(
        doc! {"_id": 1, "a": [0]},
        doc! {"$set": {"a.$[i]": 2, "a.$[j]": 3}},
        vec![doc! {"i": 0}, doc! {"j": 0}],
        40,
        "Update created a conflict at 'a.0'",
    );
    check_af_err(
        doc! {"_id": 0, "a": [{"x": 0, "b": [{"y": 0, "c": 0}]}, {"x": 1, "b": [{"y": 0, "c": 0}]}]},
        doc! {"$set": {"a.$[i].b.$[k].c": 1, "a.$[j].b.$[k].c": 2}},
        vec![doc! {"i.x": 0}, doc! {"j.x": 0}, doc! {"k.y": 0}],
        40,
        "Update created a conflict at 'a.0.b.$[k].c'",
    );
    check_af_err(
        doc! {"_id": 1},
        doc! {"$set": {"a.$[I]": 1}},
        vec![doc! {"I": 0}],
        2,
        "Error parsing array filter :: caused by :: The top-level field name must be an \
         alphanumeric string beginning with a lowercase letter, found 'I'",
    );
    check_af_err(
        doc! {"_id": 1},
        doc! {"$set": {"grades": "abc"}},
        vec![doc! {"a.b": 10, "b": 12}],
        9,
        "Error parsing array filter :: caused by :: Expected a single top-level field name, found \
         'a' and 'b'",
    );
    check_af_err(
        doc! {"_id": 1},
        doc! {"$set": {"a": 1}},
        vec![doc! {}],
        9,
        "Cannot use an expression without a top-level field name in arrayFilters",
    );
    check_af_err(
        doc! {"_id": 1},
        doc! {"$set": {"a.$[x]": 1}},
        vec![doc! {"x": 1}, doc! {"x": 2}],
        9,
        "Found multiple array filters with the same top-level field name x",
    );
    check_af_err(
        doc! {"_id": 1},
        doc! {"$set": {"$[x]": 1}},
        vec![doc! {"x": 1}],
        2,
        "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in \
         path '$[x]'",
    );
    // The paths are not disjoint only when filters overlap on an element.
    check_af(
        doc! {"_id": 0, "a": [{"x": 0, "b": [{"y": 0, "c": 0}]}, {"x": 1, "b": [{"y": 0, "c": 0}]}]},
        doc! {"$set": {"a.$[i].b.$[k].c": 1, "a.$[j].b.$[k].c": 2}},
        vec![doc! {"i.x": 0}, doc! {"j.x": 1}, doc! {"k.y": 0}],
        doc! {"_id": 0, "a": [{"x": 0, "b": [{"y": 0, "c": 1}]}, {"x": 1, "b": [{"y": 0, "c": 2}]}]},
    );
    let _ = Bson::Null;
}
