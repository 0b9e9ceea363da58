//! `$jsonSchema` inside filters: `Filter::parse_with(&doc, &JsonSchemaExtensions)` combined
//! with ordinary predicates, logical operators and `$elemMatch`, and the extension
//! combinators (`Chain`, `WithJsonSchema`).

mod jsonschema_common;

use std::sync::Arc;

use bson::{Bson, RawBsonRef, RawDocument, bson};
use cairn_query::QueryError;
use cairn_query::filter::{DocumentPredicate, ExtensionKind, Extensions, Filter, NoExtensions};
use cairn_query::jsonschema::{Chain, JsonSchemaExtensions, WithJsonSchema};
use jsonschema_common::*;

fn ids(filter: Bson, ext: &dyn Extensions, docs: &[Bson]) -> Vec<i32> {
    let f = Filter::parse_with(&raw(&filter), ext).unwrap_or_else(|e| panic!("{filter}: {e:?}"));
    docs.iter()
        .filter(|d| f.matches(&raw(d)))
        .map(|d| match d {
            Bson::Document(d) => d.get_i32("_id").expect("_id"),
            _ => unreachable!(),
        })
        .collect()
}

#[test]
fn combined_with_predicates() {
    let docs = [
        bson!({"_id": 1, "a": 1, "b": 1}),
        bson!({"_id": 2, "a": 2, "b": 2}),
        bson!({"_id": 3, "a": "x", "b": 3}),
        bson!({"_id": 4, "b": 4}),
    ];
    let e = &JsonSchemaExtensions;
    assert_eq!(
        ids(
            bson!({"$jsonSchema": {"properties": {"a": {"type": "number"}}, "required": ["a"]}, "b": 1}),
            e,
            &docs
        ),
        [1]
    );
    assert_eq!(
        ids(
            bson!({"$jsonSchema": {"properties": {"a": {"type": "number"}}}, "a": {"$gt": 1}}),
            e,
            &docs
        ),
        [2]
    );
    assert_eq!(
        ids(
            bson!({"a": {"$gt": 1}, "$jsonSchema": {"required": ["a"]}}),
            e,
            &docs
        ),
        [2]
    );
    assert_eq!(
        ids(
            bson!({"$or": [{"$jsonSchema": {}, "a": 1}, {"b": 1}]}),
            e,
            &docs
        ),
        [1]
    );
    assert_eq!(
        ids(
            bson!({"$and": [{"$jsonSchema": {}, "a": 1}, {"b": 1}]}),
            e,
            &docs
        ),
        [1]
    );
    assert_eq!(
        ids(
            bson!({"$or": [{"$jsonSchema": {"properties": {"a": {"minimum": 2}}}}, {"b": 2}]}),
            e,
            &docs
        ),
        [2, 3, 4]
    );
    assert_eq!(
        ids(
            bson!({"$nor": [{"$jsonSchema": {"required": ["a"]}}]}),
            e,
            &docs
        ),
        [4]
    );
    assert_eq!(
        ids(
            bson!({"$jsonSchema": {"required": ["a"]}, "$comment": "x"}),
            e,
            &docs
        ),
        [1, 2, 3]
    );
    assert_eq!(
        ids(
            bson!({"$jsonSchema": {"minProperties": 3}, "$alwaysTrue": 1}),
            e,
            &docs
        ),
        [1, 2, 3]
    );
    assert_eq!(
        ids(bson!({"$jsonSchema": {}, "$alwaysFalse": 1}), e, &docs),
        Vec::<i32>::new()
    );
    // json_schema.js: $or of a path predicate and a schema.
    let objs = [
        bson!({"_id": 0, "obj": 3}),
        bson!({"_id": 1, "obj": {"f1": {"f3": "str"}, "f2": "str"}}),
        bson!({"_id": 2, "obj": {"f1": "str", "f2": "str"}}),
        bson!({"_id": 3, "obj": {"f1": 1, "f2": "str"}}),
    ];
    let schema = bson!({"properties": {"obj": {"properties": {
        "f1": {"type": "object", "properties": {"f3": {"type": "string"}}},
        "f2": {"type": "string"}
    }}}});
    assert_eq!(
        ids(
            bson!({"$or": [{"obj.f1": "str"}, {"$jsonSchema": schema}]}),
            e,
            &objs
        ),
        [0, 1, 2]
    );
    // The filter reads the whole document.
    let f = Filter::parse_with(&raw(&bson!({"$jsonSchema": {}, "a": 1})), e).expect("parses");
    assert_eq!(f.top_level_fields(), None);
}

#[test]
fn inside_elem_match() {
    // A schema in an $elemMatch object applies to each array element that is a document.
    let docs = [
        bson!({"_id": 1, "arr": [{"x": 1}, {"x": "s"}]}),
        bson!({"_id": 2, "arr": [{"x": "s"}]}),
        bson!({"_id": 3, "arr": [1, 2]}),
    ];
    let e = &JsonSchemaExtensions;
    assert_eq!(
        ids(
            bson!({"arr": {"$elemMatch": {"$jsonSchema": {"properties": {"x": {"bsonType": "int"}}, "required": ["x"]}}}}),
            e,
            &docs
        ),
        [1]
    );
    assert_eq!(
        ids(
            bson!({"arr": {"$elemMatch": {"$jsonSchema": {}, "x": "s"}}}),
            e,
            &docs
        ),
        [1, 2]
    );
}

/// Stands in for the `$expr` extension: accepts `$expr: true`/`false` literally.
#[derive(Debug)]
struct Literal(bool);

impl DocumentPredicate for Literal {
    fn matches(&self, _: &RawDocument) -> bool {
        self.0
    }
}

struct FakeExpr;

impl Extensions for FakeExpr {
    fn parse(
        &self,
        kind: ExtensionKind,
        operand: RawBsonRef<'_>,
    ) -> cairn_query::Result<Arc<dyn DocumentPredicate>> {
        match (kind, operand) {
            (ExtensionKind::Expr, RawBsonRef::Boolean(b)) => Ok(Arc::new(Literal(b))),
            (ExtensionKind::Expr, _) => Err(QueryError::NotImplemented(
                "$expr operand not supported yet: fake".into(),
            )),
            _ => NoExtensions.parse(kind, operand),
        }
    }
}

#[test]
fn combinators() {
    let docs = [bson!({"_id": 1, "a": 1}), bson!({"_id": 2, "a": "x"})];
    let schema = bson!({"properties": {"a": {"type": "number"}}});
    for ext in [
        &Chain(&FakeExpr, &JsonSchemaExtensions) as &dyn Extensions,
        &Chain(&JsonSchemaExtensions, &FakeExpr),
        &WithJsonSchema(&FakeExpr),
    ] {
        assert_eq!(
            ids(
                bson!({"$jsonSchema": schema.clone(), "$expr": true}),
                ext,
                &docs
            ),
            [1]
        );
        assert_eq!(
            ids(
                bson!({"$jsonSchema": schema.clone(), "$expr": false}),
                ext,
                &docs
            ),
            Vec::<i32>::new()
        );
        assert_eq!(
            ids(
                bson!({"$or": [{"$jsonSchema": schema.clone()}, {"$expr": false}]}),
                ext,
                &docs
            ),
            [1]
        );
        // Parse errors of either side are final.
        let e = Filter::parse_with(
            &raw(&bson!({"$jsonSchema": {"bad": 1}, "$expr": true})),
            ext,
        )
        .unwrap_err();
        assert_eq!(code(&e), 9);
        // Operators neither supports stay NotImplemented.
        let e = Filter::parse_with(&raw(&bson!({"$where": "x"})), ext).unwrap_err();
        assert_eq!(code(&e), 238);
    }
    // When both decline, the first one's error is kept (put the detailed one first).
    let e = Filter::parse_with(
        &raw(&bson!({"$expr": 1})),
        &Chain(&FakeExpr, &JsonSchemaExtensions),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "$expr operand not supported yet: fake");
    let e = Filter::parse_with(&raw(&bson!({"$expr": 1})), &WithJsonSchema(&FakeExpr)).unwrap_err();
    assert_eq!(e.to_string(), "$expr operand not supported yet: fake");
    // Nested chains.
    let nested = Chain(&NoExtensions, &Chain(&FakeExpr, &JsonSchemaExtensions));
    assert_eq!(
        ids(
            bson!({"$jsonSchema": schema, "$expr": true}),
            &nested,
            &docs
        ),
        [1]
    );
}

#[test]
fn predicate_is_shareable() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    let f = Filter::parse_with(
        &raw(&bson!({"$jsonSchema": {"required": ["a"]}})),
        &JsonSchemaExtensions,
    )
    .expect("parses");
    assert_send_sync(&f);
    let g = f.clone();
    let h = std::thread::spawn(move || g.matches(&raw(&bson!({"a": 1}))))
        .join()
        .expect("thread");
    assert!(h);
}

#[test]
fn with_the_expr_extension() {
    use cairn_query::expr::ExprExtensions;
    let docs = [
        bson!({"_id": 1, "a": 1, "b": 5}),
        bson!({"_id": 2, "a": 7, "b": 5}),
        bson!({"_id": 3, "a": "x", "b": 5}),
    ];
    let expr = ExprExtensions::new();
    let filter = bson!({
        "$jsonSchema": {"required": ["a"], "properties": {"a": {"bsonType": "number"}}},
        "$expr": {"$lt": ["$a", "$b"]},
    });
    assert_eq!(
        ids(filter.clone(), &Chain(&expr, &JsonSchemaExtensions), &docs),
        [1]
    );
    assert_eq!(
        ids(filter.clone(), &Chain(&JsonSchemaExtensions, &expr), &docs),
        [1]
    );
    assert_eq!(ids(filter, &WithJsonSchema(&expr), &docs), [1]);
    // Each side's parse errors come through the combinators.
    let e = Filter::parse_with(
        &raw(&bson!({"$jsonSchema": {}, "$expr": {"$nope": 1}})),
        &Chain(&expr, &JsonSchemaExtensions),
    )
    .unwrap_err();
    assert_ne!(code(&e), 238, "{e:?}");
}
