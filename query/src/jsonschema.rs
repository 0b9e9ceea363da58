//! `$jsonSchema`: MongoDB 7.0's JSON Schema (draft 4 subset plus `bsonType` and `encrypt`)
//! as a query predicate and document validator.
//!
//! Parsing follows src/mongo/db/matcher/schema/json_schema_parser.cpp keyword for keyword: a
//! schema becomes a tree of MongoDB's internal schema match expressions (`Node`) which is
//! then evaluated against raw documents. Errors carry MongoDB's codes and messages, checked in
//! the server's order (keyword collection, `description`/`title`, `type`/`bsonType`/`encrypt`
//! conflicts, `type`, then the scalar, array, encryption, object and logical keywords):
//! - FailedToParse (9): unknown keywords (`Unknown $jsonSchema keyword: x`), the unsupported
//!   draft-4 keywords `$ref`, `$schema`, `default`, `definitions`, `format`, `id`
//!   (`$jsonSchema keyword '$ref' is not currently supported`), duplicate keywords, `type:
//!   "integer"`, `type` with `bsonType`, empty `enum`/`required`, duplicate `enum`/`required`
//!   values, non-integral or negative lengths and counts, `exclusiveMaximum` without
//!   `maximum`, a non-positive `multipleOf`;
//! - TypeMismatch (14): a keyword whose value has the wrong BSON type;
//! - BadValue (2): unknown type aliases, empty `allOf`/`anyOf`/`oneOf`, invalid
//!   `patternProperties` regexes, a NaN or infinite nested `multipleOf`, schemas nested deeper
//!   than [`MAX_SCHEMA_DEPTH`] (a Cairn limit);
//! - 51091: an invalid `pattern` (as [`crate::regex::Regex`] reports it; an over-long one is
//!   BadValue);
//! - IDL codes for the contents of `encrypt` / `encryptMetadata` (40413 duplicate field, 40415
//!   unknown field, 14 wrong type, 2 bad enum value, 51063/51064/51065 JSON pointers,
//!   51084/51085/51088 key ids).
//!
//! Semantics (JSON Schema restrictions apply only to values of their type):
//! - a restriction keyword (`minimum`, `maxLength`, `pattern`, `minItems`, `properties` …)
//!   accepts values of other types and missing fields; when the schema states a single type
//!   (`type`/`bsonType`), restrictions for other types are dropped (`makeRestriction`);
//! - `type`/`bsonType` test the value itself, never array elements (`$_internalSchemaType`);
//!   `type` takes the JSON Schema names (`object`, `array`, `number`, `boolean`, `string`,
//!   `null`; `integer` is refused), `bsonType` takes `$type`'s aliases plus `number`;
//! - at the top level every document is an object: scalar and array keywords have no effect,
//!   a stated type without `object` matches nothing, `enum` compares whole documents
//!   (non-object members are ignored);
//! - property names are dotted paths (as MongoDB's `FieldRef`), so `properties: {"a.b": …}`
//!   and `required: ["a.b"]` reach into subdocuments and traverse arrays; a property named
//!   `""` has an empty path, which MongoDB's parser treats as a top-level schema (its keywords
//!   apply to the enclosing object);
//! - `enum` and `uniqueItems` compare values with field order in objects ignored, numbers by
//!   value across types and strings by bytes (no collation);
//! - `minLength`/`maxLength` count Unicode code points; `multipleOf` converts both sides to
//!   Decimal128 as MongoDB does (doubles rounded to 15 significant digits, so `0.3` is a
//!   multiple of `0.1`) and tests exact divisibility;
//! - `items` (object form) applies to every element, (array form) to the element at each
//!   position; `additionalItems` applies past the positions of an array-form `items` only;
//!   `patternProperties` regexes search field names unanchored and apply even to names listed
//!   in `properties`; `additionalProperties` covers the names neither lists;
//! - `dependencies` are conditionals: when the named field exists, the listed fields must
//!   exist (array form) or the subschema must match (object form);
//! - `encrypt` matches BinData of subtype 6 (and, with `encrypt.bsonType`, whose FLE header
//!   names one of those types).
//!
//! Invariants: parsing and matching never panic on any input (malformed BSON included);
//! recursion is bounded by [`MAX_SCHEMA_DEPTH`] nested schemas while parsing, and matching
//! descends no deeper than the parsed tree plus [`cairn_storage::compare::MAX_COMPARE_DEPTH`]
//! levels of value comparison; a parsed [`JsonSchema`] is immutable, cheap to clone and
//! `Send + Sync`.
//!
//! [`JsonSchemaExtensions`] plugs `$jsonSchema` into [`crate::filter::Filter::parse_with`];
//! [`Chain`] and [`WithJsonSchema`] combine it with other [`Extensions`] (e.g. `$expr`).
//!
//! For a collection validator, `JsonSchema::parse_annotated` builds the same tree with
//! MongoDB's error annotations (`json_schema_parser.cpp`'s `createAnnotation` calls: each
//! keyword's node tagged with the keyword and `specifiedAs`, subschemas `_subschema` with
//! their `title`/`description`, properties `_property`, the restriction wrappers ignored but
//! descended), which [`crate::validation::explain`] walks to explain a failure.

use std::cmp::Ordering;
use std::ops::ControlFlow;
use std::sync::Arc;

use bson::spec::{BinarySubtype, ElementType};
use bson::{RawArray, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::compare::{MAX_COMPARE_DEPTH, TypeClass, compare_values};
use cairn_storage::decimal::Decimal;
use cairn_storage::display;
use cairn_storage::display::type_name;

use crate::error::{QueryError, Result};
use crate::filter::{CmpOp, DocumentPredicate, ExtensionKind, Extensions, NoExtensions, Predicate};
use crate::path::{self, FieldPath, LeafArrays};
use crate::regex::Regex;
use crate::validation::tree::{Annotation, Mode};

/// Deepest nesting of schemas (`properties` inside `items` inside `anyOf` …) accepted. Each
/// level is at least two BSON levels, so this is beyond what MongoDB's own BSON depth limit
/// lets through; it bounds the stack used by parsing and matching.
pub const MAX_SCHEMA_DEPTH: usize = 100;

/// Parser options (MongoDB server parameters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JsonSchemaOptions {
    /// `internalQueryIgnoreUnknownJSONSchemaKeywords`: skip unknown keywords instead of failing
    /// (the explicitly unsupported ones still fail).
    pub ignore_unknown_keywords: bool,
}

/// A parsed `$jsonSchema`.
#[derive(Clone, Debug)]
pub struct JsonSchema {
    source: Arc<RawDocumentBuf>,
    root: Arc<Node>,
}

impl JsonSchema {
    /// Parses the operand of `$jsonSchema` (the schema document).
    pub fn parse(schema: &RawDocument) -> Result<JsonSchema> {
        JsonSchema::parse_with_options(schema, JsonSchemaOptions::default())
    }

    /// Parses a schema with non-default options.
    pub fn parse_with_options(schema: &RawDocument, options: JsonSchemaOptions) -> Result<Self> {
        let mut p = Parser {
            options,
            depth: 0,
            annotate: false,
        };
        let root = p.schema(None, schema).map_err(|e| *e)?;
        Ok(JsonSchema {
            source: Arc::new(schema.to_owned()),
            root: Arc::new(root),
        })
    }

    /// Parses a schema of a collection validator: the tree carries MongoDB's error annotations
    /// (see [`crate::validation`]), the root tagged `$jsonSchema`.
    pub(crate) fn parse_annotated(
        schema: &RawDocument,
        options: JsonSchemaOptions,
    ) -> Result<Self> {
        let mut p = Parser {
            options,
            depth: 0,
            annotate: true,
        };
        let root = p.schema(None, schema).map_err(|e| *e)?;
        // `JSONSchemaParser::parse` retags the top-level node, keeping its annotation.
        let root = match root {
            Node::Annotated(b) => {
                let (ann, inner) = *b;
                Node::Annotated(Box::new((
                    Annotation::generate("$jsonSchema", ann.spec).with_schema(schema),
                    inner,
                )))
            }
            other => other,
        };
        Ok(JsonSchema {
            source: Arc::new(schema.to_owned()),
            root: Arc::new(root),
        })
    }

    /// The translated tree (annotated when parsed by [`JsonSchema::parse_annotated`]).
    pub(crate) fn root(&self) -> &Node {
        &self.root
    }

    /// Whether `doc` satisfies the schema.
    pub fn matches(&self, doc: &RawDocument) -> bool {
        self.root.eval(Scope::Doc(doc))
    }

    /// The schema document as given.
    pub fn source(&self) -> &RawDocument {
        &self.source
    }
}

impl DocumentPredicate for JsonSchema {
    fn matches(&self, doc: &RawDocument) -> bool {
        JsonSchema::matches(self, doc)
    }
}

// ---------------------------------------------------------------------------------------------
// Extensions
// ---------------------------------------------------------------------------------------------

/// The [`Extensions`] that parses `$jsonSchema`; every other extension operator is
/// NotImplemented, exactly as [`NoExtensions`] answers.
///
/// `Filter::parse_with(&filter, &JsonSchemaExtensions)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonSchemaExtensions;

impl Extensions for JsonSchemaExtensions {
    fn parse(
        &self,
        kind: ExtensionKind,
        operand: RawBsonRef<'_>,
    ) -> Result<Arc<dyn DocumentPredicate>> {
        if kind != ExtensionKind::JsonSchema {
            return NoExtensions.parse(kind, operand);
        }
        let RawBsonRef::Document(schema) = operand else {
            return Err(QueryError::TypeMismatch(
                "$jsonSchema must be an object".into(),
            ));
        };
        Ok(Arc::new(JsonSchema::parse(schema)?))
    }
}

/// Two [`Extensions`] tried in order: the first parses every operator it supports; an operator
/// it answers NotImplemented (238) for — the convention for "not mine", as [`NoExtensions`]
/// and [`JsonSchemaExtensions`] answer — goes to the second. When both answer NotImplemented,
/// the first one's error is returned, so put the extension whose refusals carry detail first:
/// `Chain(&ExprExtensions, &JsonSchemaExtensions)`. Any other result (success or a parse
/// error) is final. Chains nest: `Chain(&a, &Chain(&b, &c))`.
#[derive(Clone, Copy)]
pub struct Chain<'a>(pub &'a dyn Extensions, pub &'a dyn Extensions);

impl Extensions for Chain<'_> {
    fn parse(
        &self,
        kind: ExtensionKind,
        operand: RawBsonRef<'_>,
    ) -> Result<Arc<dyn DocumentPredicate>> {
        match self.0.parse(kind, operand) {
            Err(QueryError::NotImplemented(first)) => match self.1.parse(kind, operand) {
                Err(QueryError::NotImplemented(_)) => Err(QueryError::NotImplemented(first)),
                other => other,
            },
            other => other,
        }
    }
}

/// Routes by kind: `$jsonSchema` to [`JsonSchemaExtensions`], every other operator to the
/// wrapped [`Extensions`] (whatever it answers, errors included).
#[derive(Clone, Copy)]
pub struct WithJsonSchema<'a>(pub &'a dyn Extensions);

impl Extensions for WithJsonSchema<'_> {
    fn parse(
        &self,
        kind: ExtensionKind,
        operand: RawBsonRef<'_>,
    ) -> Result<Arc<dyn DocumentPredicate>> {
        if kind == ExtensionKind::JsonSchema {
            JsonSchemaExtensions.parse(kind, operand)
        } else {
            self.0.parse(kind, operand)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The parsed tree
// ---------------------------------------------------------------------------------------------

/// What a value test applies to, relative to the scope it is evaluated in.
#[derive(Clone, Debug)]
pub(crate) enum Subject {
    /// A (dotted) field of the object in scope: a property of the enclosing schema.
    Field(FieldPath),
    /// The value in scope itself (MongoDB's `ExpressionWithPlaceholder` "i": array elements
    /// for `items`/`additionalItems`, field values for `patternProperties` /
    /// `additionalProperties`).
    Placeholder,
}

/// A node of a translated schema (MongoDB's match expressions, internal schema ones included).
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// A node with its error annotation (only in validators' trees; see
    /// [`JsonSchema::parse_annotated`]). Unannotated nodes are ignored by error generation.
    Annotated(Box<(Annotation, Node)>),
    True,
    False,
    And(Vec<Node>),
    Or(Vec<Node>),
    /// `oneOf`: exactly one child matches.
    Xor(Vec<Node>),
    Not(Box<Node>),
    /// `dependencies`: when `cond` matches, `then` must too.
    Cond {
        cond: Box<Node>,
        then: Box<Node>,
    },
    /// A test of the values a subject reaches (any one satisfying it suffices). Boxed to keep
    /// nodes small (and the parser's stack frames with them).
    Value(Box<ValueTest>),
    /// `$_internalSchemaAllowedProperties` on the object in scope.
    AllowedProperties(Box<AllowedProperties>),
    /// `$_internalSchemaMinProperties` on the object in scope.
    MinProperties(u64),
    /// `$_internalSchemaMaxProperties` on the object in scope.
    MaxProperties(u64),
    /// `$_internalSchemaRootDocEq`: the object in scope equals this one, field order aside.
    RootDocEq(RawDocumentBuf),
}

#[derive(Clone, Debug)]
pub(crate) struct ValueTest {
    pub(crate) at: Subject,
    pub(crate) test: Test,
}

fn value(at: Subject, test: Test) -> Node {
    Node::Value(Box::new(ValueTest { at, test }))
}

#[derive(Clone, Debug)]
pub(crate) struct AllowedProperties {
    /// Names listed in `properties`, sorted, without duplicates.
    pub(crate) properties: Vec<String>,
    /// `patternProperties`: each regex (as written, compiled) with the schema its matching
    /// fields' values must match.
    pub(crate) patterns: Vec<(String, Regex, Node)>,
    /// `additionalProperties`: for the fields neither list covers.
    pub(crate) otherwise: Node,
}

/// A test of one value.
#[derive(Clone, Debug)]
pub(crate) enum Test {
    /// `$_internalSchemaType`: the value's own BSON type (arrays are not traversed).
    Type(Types),
    /// A MongoDB leaf predicate (`$lt`/`$lte`/`$gt`/`$gte` for minimum/maximum, `$regex` for
    /// `pattern`, `$exists` for `required`/`dependencies`), which traverses arrays.
    Leaf(Predicate),
    /// `$_internalSchemaEq` (`enum`): equal, field order aside; no array traversal.
    Eq(RawBson),
    /// `$_internalSchemaFmod` with remainder 0 (`multipleOf`).
    MultipleOf(Dec),
    /// `$_internalSchemaMinLength`, in code points.
    MinLength(u64),
    /// `$_internalSchemaMaxLength`, in code points.
    MaxLength(u64),
    /// `$_internalSchemaMinItems`.
    MinItems(u64),
    /// `$_internalSchemaMaxItems`.
    MaxItems(u64),
    /// `$_internalSchemaUniqueItems`.
    UniqueItems,
    /// `$_internalSchemaMatchArrayIndex`: the element at this position (if any) matches.
    ItemAt(usize, Box<Node>),
    /// `$_internalSchemaAllElemMatchFromIndex`: every element from this position matches.
    ItemsFrom(usize, Box<Node>),
    /// `$_internalSchemaObjectMatch`: the value is an object that matches.
    Object(Box<Node>),
    /// `$_internalSchemaBinDataSubType` 6 (`encrypt`).
    Encrypted,
    /// `$_internalSchemaBinDataEncryptedType` (`encrypt.bsonType`).
    EncryptedType(Types),
}

impl Test {
    pub(crate) fn leaf_arrays(&self) -> LeafArrays {
        match self {
            Test::Leaf(_)
            | Test::MultipleOf(_)
            | Test::MinLength(_)
            | Test::MaxLength(_)
            | Test::Encrypted
            | Test::EncryptedType(_) => LeafArrays::Traverse,
            Test::Type(_)
            | Test::Eq(_)
            | Test::MinItems(_)
            | Test::MaxItems(_)
            | Test::UniqueItems
            | Test::ItemAt(..)
            | Test::ItemsFrom(..)
            | Test::Object(_) => LeafArrays::Whole,
        }
    }
}

/// A set of BSON types (MongoDB's `MatcherTypeSet`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Types {
    /// `"number"`: int, long, double and decimal.
    all_numbers: bool,
    types: Vec<ElementType>,
}

impl Types {
    fn one(t: ElementType) -> Types {
        Types {
            all_numbers: false,
            types: vec![t],
        }
    }

    fn numbers() -> Types {
        Types {
            all_numbers: true,
            types: Vec::new(),
        }
    }

    pub(crate) fn has(&self, t: ElementType) -> bool {
        (self.all_numbers && is_numeric_type(t)) || self.types.contains(&t)
    }

    fn is_empty(&self) -> bool {
        !self.all_numbers && self.types.is_empty()
    }

    /// The one type of a single-type set (`"number"` stands as int), as `makeRestriction`
    /// sees a stated type.
    fn single(&self) -> Option<ElementType> {
        match (self.all_numbers, self.types.as_slice()) {
            (true, []) => Some(ElementType::Int32),
            (false, [t]) => Some(*t),
            _ => None,
        }
    }
}

fn is_numeric_type(t: ElementType) -> bool {
    matches!(
        t,
        ElementType::Int32 | ElementType::Int64 | ElementType::Double | ElementType::Decimal128
    )
}

/// A positive finite decimal `coefficient × 10^exponent` (`multipleOf`'s divisor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dec {
    coefficient: u128,
    exponent: i32,
}

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------

/// What a node is evaluated against: an object whose fields [`Subject::Field`] names, or a
/// single value that [`Subject::Placeholder`] names. The parser only ever puts field subjects
/// under object scopes and placeholder subjects under value scopes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Scope<'a> {
    Doc(&'a RawDocument),
    Elem(RawBsonRef<'a>),
}

impl<'a> Scope<'a> {
    /// The object in scope, for the object-level expressions (MongoDB's `matchesSingleElement`
    /// of them accepts only objects).
    pub(crate) fn object(self) -> Option<&'a RawDocument> {
        match self {
            Scope::Doc(d) | Scope::Elem(RawBsonRef::Document(d)) => Some(d),
            Scope::Elem(_) => None,
        }
    }
}

impl Node {
    pub(crate) fn eval(&self, scope: Scope<'_>) -> bool {
        match self {
            Node::Annotated(b) => b.1.eval(scope),
            Node::True => true,
            Node::False => false,
            Node::And(cs) => cs.iter().all(|c| c.eval(scope)),
            Node::Or(cs) => cs.iter().any(|c| c.eval(scope)),
            Node::Xor(cs) => {
                let mut found = false;
                for c in cs {
                    if c.eval(scope) {
                        if found {
                            return false;
                        }
                        found = true;
                    }
                }
                found
            }
            Node::Not(c) => !c.eval(scope),
            Node::Cond { cond, then } => !cond.eval(scope) || then.eval(scope),
            Node::Value(v) => eval_value(&v.at, &v.test, scope),
            Node::AllowedProperties(ap) => scope.object().is_some_and(|d| ap.matches(d)),
            Node::MinProperties(n) => scope.object().is_some_and(|d| field_count(d) >= *n),
            Node::MaxProperties(n) => scope.object().is_some_and(|d| field_count(d) <= *n),
            Node::RootDocEq(rhs) => scope.object().is_some_and(|d| {
                unordered_cmp(RawBsonRef::Document(d), RawBsonRef::Document(rhs), 0).is_eq()
            }),
        }
    }
}

pub(crate) fn eval_value(at: &Subject, test: &Test, scope: Scope<'_>) -> bool {
    match (at, scope) {
        (Subject::Field(p), Scope::Doc(d)) => path::visit(d, p, test.leaf_arrays(), |pv| {
            if test.matches(pv.value) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }),
        (Subject::Placeholder, Scope::Elem(v)) => {
            if test.leaf_arrays() == LeafArrays::Traverse
                && let RawBsonRef::Array(a) = v
            {
                for el in a {
                    let Ok(el) = el else { break };
                    if test.matches(Some(el)) {
                        return true;
                    }
                }
            }
            test.matches(Some(v))
        }
        // Not produced by the parser (see `Scope`).
        (Subject::Field(_), Scope::Elem(_)) | (Subject::Placeholder, Scope::Doc(_)) => false,
    }
}

impl Test {
    pub(crate) fn matches(&self, v: Option<RawBsonRef<'_>>) -> bool {
        match self {
            Test::Type(t) => v.is_some_and(|v| t.has(v.element_type())),
            Test::Leaf(p) => p.matches_single(v, &mut None),
            Test::Eq(rhs) => v.is_some_and(|v| unordered_cmp(v, rhs.as_raw_bson_ref(), 0).is_eq()),
            Test::MultipleOf(d) => v
                .and_then(number_magnitude)
                .is_some_and(|(c, e)| is_multiple(c, e, *d)),
            Test::MinLength(n) => {
                matches!(v, Some(RawBsonRef::String(s)) if code_points(s) >= *n)
            }
            Test::MaxLength(n) => {
                matches!(v, Some(RawBsonRef::String(s)) if code_points(s) <= *n)
            }
            Test::MinItems(n) => matches!(v, Some(RawBsonRef::Array(a)) if array_len(a) >= *n),
            Test::MaxItems(n) => matches!(v, Some(RawBsonRef::Array(a)) if array_len(a) <= *n),
            Test::UniqueItems => matches!(v, Some(RawBsonRef::Array(a)) if all_unique(a)),
            Test::ItemAt(idx, schema) => match v {
                Some(RawBsonRef::Array(a)) => match a.into_iter().nth(*idx) {
                    Some(Ok(el)) => schema.eval(Scope::Elem(el)),
                    // Too short (a malformed element ends the array).
                    Some(Err(_)) | None => true,
                },
                _ => false,
            },
            Test::ItemsFrom(idx, schema) => match v {
                Some(RawBsonRef::Array(a)) => a
                    .into_iter()
                    .skip(*idx)
                    .map_while(|el| el.ok())
                    .all(|el| schema.eval(Scope::Elem(el))),
                _ => false,
            },
            Test::Object(schema) => match v {
                Some(RawBsonRef::Document(d)) => schema.eval(Scope::Doc(d)),
                _ => false,
            },
            Test::Encrypted => matches!(
                v,
                Some(RawBsonRef::Binary(b)) if b.subtype == BinarySubtype::Encrypted
            ),
            Test::EncryptedType(t) => match v {
                Some(RawBsonRef::Binary(b)) if b.subtype == BinarySubtype::Encrypted => {
                    encrypted_original_type(b.bytes).is_some_and(|ty| t.has(ty))
                }
                _ => false,
            },
        }
    }
}

impl AllowedProperties {
    /// `InternalSchemaAllowedPropertiesMatchExpression::_matchesBSONObj`.
    pub(crate) fn matches(&self, obj: &RawDocument) -> bool {
        for el in obj.iter() {
            let Ok((name, value)) = el else { break };
            let name = name.as_str();
            let mut check_otherwise = true;
            for (_, re, schema) in &self.patterns {
                if re.is_match(name) {
                    check_otherwise = false;
                    if !schema.eval(Scope::Elem(value)) {
                        return false;
                    }
                }
            }
            if check_otherwise
                && self
                    .properties
                    .binary_search_by(|p| p.as_str().cmp(name))
                    .is_ok()
            {
                check_otherwise = false;
            }
            if check_otherwise && !self.otherwise.eval(Scope::Elem(value)) {
                return false;
            }
        }
        true
    }
}

/// The original BSON type recorded in an encrypted BinData's FLE header: byte 0 is the blob
/// subtype, bytes 1–16 the key UUID, byte 17 the type. Only the encrypted-value subtypes
/// (FLE 1 deterministic 1 / random 2; FLE 2 unindexed 6, equality 7, range 9) carry one.
fn encrypted_original_type(bytes: &[u8]) -> Option<ElementType> {
    let subtype = *bytes.first()?;
    if !matches!(subtype, 1 | 2 | 6 | 7 | 9) {
        return None;
    }
    ElementType::from(*bytes.get(17)?)
}

pub(crate) fn field_count(d: &RawDocument) -> u64 {
    let mut n = 0u64;
    for el in d.iter() {
        if el.is_err() {
            break;
        }
        n += 1;
    }
    n
}

fn array_len(a: &RawArray) -> u64 {
    let mut n = 0u64;
    for el in a {
        if el.is_err() {
            break;
        }
        n += 1;
    }
    n
}

fn code_points(s: &str) -> u64 {
    u64::try_from(s.chars().count()).unwrap_or(u64::MAX)
}

fn all_unique(a: &RawArray) -> bool {
    let mut items: Vec<RawBsonRef<'_>> = a.into_iter().map_while(|el| el.ok()).collect();
    items.sort_by(|x, y| unordered_cmp(*x, *y, 0));
    !items
        .windows(2)
        .any(|w| matches!(w, [x, y] if unordered_cmp(*x, *y, 0).is_eq()))
}

/// MongoDB's comparison with `kIgnoreFieldOrder` (`UnorderedFieldsBSONElementComparator`):
/// canonical type class first; objects compare their fields sorted by name (type class, name,
/// value), arrays element by element, both recursively under the same rule; everything else as
/// [`compare_values`]. A total order whose equality is the one `enum` and `uniqueItems` use.
pub(crate) fn unordered_cmp(a: RawBsonRef<'_>, b: RawBsonRef<'_>, depth: usize) -> Ordering {
    let (ca, cb) = (TypeClass::of(a), TypeClass::of(b));
    if ca != cb {
        return ca.cmp(&cb);
    }
    if depth >= MAX_COMPARE_DEPTH {
        return compare_values(a, b);
    }
    match (a, b) {
        (RawBsonRef::Document(x), RawBsonRef::Document(y)) => {
            let (fx, fy) = (sorted_fields(x), sorted_fields(y));
            for ((nx, vx), (ny, vy)) in fx.iter().zip(fy.iter()) {
                let ord = TypeClass::of(*vx)
                    .cmp(&TypeClass::of(*vy))
                    .then_with(|| nx.as_bytes().cmp(ny.as_bytes()))
                    .then_with(|| unordered_cmp(*vx, *vy, depth + 1));
                if ord.is_ne() {
                    return ord;
                }
            }
            fx.len().cmp(&fy.len())
        }
        (RawBsonRef::Array(x), RawBsonRef::Array(y)) => {
            let mut ix = x.into_iter().map_while(|e| e.ok());
            let mut iy = y.into_iter().map_while(|e| e.ok());
            loop {
                match (ix.next(), iy.next()) {
                    (None, None) => return Ordering::Equal,
                    (None, Some(_)) => return Ordering::Less,
                    (Some(_), None) => return Ordering::Greater,
                    (Some(vx), Some(vy)) => {
                        let ord = unordered_cmp(vx, vy, depth + 1);
                        if ord.is_ne() {
                            return ord;
                        }
                    }
                }
            }
        }
        _ => compare_values(a, b),
    }
}

/// The fields of `d` sorted by name (stable; a malformed element ends the document).
fn sorted_fields(d: &RawDocument) -> Vec<(&str, RawBsonRef<'_>)> {
    let mut v: Vec<(&str, RawBsonRef<'_>)> = d
        .iter()
        .map_while(|el| el.ok())
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    v.sort_by(|x, y| x.0.as_bytes().cmp(y.0.as_bytes()));
    v
}

/// `|v|` as a decimal `coefficient × 10^exponent`, as MongoDB's `numberDecimal()` converts it
/// (doubles rounded to 15 significant digits); `None` for non-numbers, NaN and infinities
/// (whose `fmod` signals and so never matches).
fn number_magnitude(v: RawBsonRef<'_>) -> Option<(u128, i32)> {
    match v {
        RawBsonRef::Int32(i) => Some((u128::from(i.unsigned_abs()), 0)),
        RawBsonRef::Int64(i) => Some((u128::from(i.unsigned_abs()), 0)),
        RawBsonRef::Double(x) => double_to_decimal15(x),
        RawBsonRef::Decimal128(d) => match Decimal::from_decimal128(d) {
            Decimal::Finite {
                coefficient,
                exponent,
                ..
            } => Some((coefficient, exponent)),
            Decimal::NaN | Decimal::Infinite { .. } => None,
        },
        _ => None,
    }
}

/// `Decimal128(double, kRoundTo15Digits)` for a finite double: `|x|` rounded to 15
/// significant digits.
fn double_to_decimal15(x: f64) -> Option<(u128, i32)> {
    if !x.is_finite() {
        return None;
    }
    if x == 0.0 {
        return Some((0, 0));
    }
    let s = format!("{:.14e}", x.abs());
    let (mantissa, exp) = s.split_once('e')?;
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let coefficient: u128 = digits.parse().ok()?;
    let exp: i32 = exp.parse().ok()?;
    Some((coefficient, exp.checked_sub(14)?))
}

/// Whether `ca × 10^ea` is an exact multiple of `d` (Decimal128 `fmod` gives exactly 0).
fn is_multiple(ca: u128, ea: i32, d: Dec) -> bool {
    if ca == 0 {
        return true;
    }
    let (cb, eb) = (d.coefficient, d.exponent);
    if cb == 0 {
        return false;
    }
    if ea >= eb {
        // (ca × 10^k) mod cb == 0.
        let Ok(k) = u32::try_from(i64::from(ea) - i64::from(eb)) else {
            return false;
        };
        mul_mod(ca % cb, pow_mod(10, k, cb), cb) == 0
    } else {
        // ca mod (cb × 10^k) == 0; a modulus beyond u128 exceeds every coefficient.
        let Ok(k) = u32::try_from(i64::from(eb) - i64::from(ea)) else {
            return false;
        };
        match 10u128.checked_pow(k).and_then(|p| cb.checked_mul(p)) {
            Some(m) => ca.is_multiple_of(m),
            None => false,
        }
    }
}

/// `a × b mod m` for `a, b < m < 2^126` without overflow (shift and add).
fn mul_mod(a: u128, b: u128, m: u128) -> u128 {
    if m <= 1 {
        return 0;
    }
    let (mut a, mut b, mut r) = (a % m, b % m, 0u128);
    while b > 0 {
        if b & 1 == 1 {
            r = (r + a) % m;
        }
        a = (a << 1) % m;
        b >>= 1;
    }
    r
}

/// `base^exp mod m`.
fn pow_mod(base: u128, mut exp: u32, m: u128) -> u128 {
    if m <= 1 {
        return 0;
    }
    let (mut b, mut r) = (base % m, 1u128);
    while exp > 0 {
        if exp & 1 == 1 {
            r = mul_mod(r, b, m);
        }
        b = mul_mod(b, b, m);
        exp >>= 1;
    }
    r
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// The keywords MongoDB knows (`keywordMap` in `_parse`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kw {
    AdditionalItems,
    AdditionalProperties,
    AllOf,
    AnyOf,
    BsonType,
    Dependencies,
    Description,
    Encrypt,
    EncryptMetadata,
    Enum,
    ExclusiveMaximum,
    ExclusiveMinimum,
    Items,
    MaxItems,
    MaxLength,
    MaxProperties,
    Maximum,
    MinItems,
    MinLength,
    MinProperties,
    Minimum,
    MultipleOf,
    Not,
    OneOf,
    Pattern,
    PatternProperties,
    Properties,
    Required,
    Title,
    Type,
    UniqueItems,
}

const KW_COUNT: usize = 31;

fn keyword(name: &str) -> Option<Kw> {
    Some(match name {
        "additionalItems" => Kw::AdditionalItems,
        "additionalProperties" => Kw::AdditionalProperties,
        "allOf" => Kw::AllOf,
        "anyOf" => Kw::AnyOf,
        "bsonType" => Kw::BsonType,
        "dependencies" => Kw::Dependencies,
        "description" => Kw::Description,
        "encrypt" => Kw::Encrypt,
        "encryptMetadata" => Kw::EncryptMetadata,
        "enum" => Kw::Enum,
        "exclusiveMaximum" => Kw::ExclusiveMaximum,
        "exclusiveMinimum" => Kw::ExclusiveMinimum,
        "items" => Kw::Items,
        "maxItems" => Kw::MaxItems,
        "maxLength" => Kw::MaxLength,
        "maxProperties" => Kw::MaxProperties,
        "maximum" => Kw::Maximum,
        "minItems" => Kw::MinItems,
        "minLength" => Kw::MinLength,
        "minProperties" => Kw::MinProperties,
        "minimum" => Kw::Minimum,
        "multipleOf" => Kw::MultipleOf,
        "not" => Kw::Not,
        "oneOf" => Kw::OneOf,
        "pattern" => Kw::Pattern,
        "patternProperties" => Kw::PatternProperties,
        "properties" => Kw::Properties,
        "required" => Kw::Required,
        "title" => Kw::Title,
        "type" => Kw::Type,
        "uniqueItems" => Kw::UniqueItems,
        _ => return None,
    })
}

/// Draft-4 keywords MongoDB refuses explicitly.
const UNSUPPORTED: &[&str] = &["$ref", "$schema", "default", "definitions", "format", "id"];

/// The keywords of one schema document.
struct Keywords<'a>([Option<RawBsonRef<'a>>; KW_COUNT]);

impl<'a> Keywords<'a> {
    fn get(&self, kw: Kw) -> Option<RawBsonRef<'a>> {
        self.0.get(kw as usize).copied().flatten()
    }
}

/// Which type a restriction keyword applies to.
#[derive(Clone, Copy)]
enum Restrict {
    Number,
    String,
    Array,
    Object,
}

impl Restrict {
    fn types(self) -> Types {
        match self {
            Restrict::Number => Types::numbers(),
            Restrict::String => Types::one(ElementType::String),
            Restrict::Array => Types::one(ElementType::Array),
            Restrict::Object => Types::one(ElementType::EmbeddedDocument),
        }
    }
}

fn exists(name: &str) -> Node {
    value(
        Subject::Field(FieldPath::new(name)),
        Test::Leaf(Predicate::Exists),
    )
}

/// `makeDependencyExistsClause`.
fn exists_clause(at: Option<&Subject>, name: &str) -> Node {
    match at {
        None => exists(name),
        Some(at) => value(at.clone(), Test::Object(Box::new(exists(name)))),
    }
}

/// The parser's result: errors are boxed, which keeps the frames of the recursive parser
/// small (a `QueryError` is over 100 bytes and every `?` copies it).
type PResult<T> = std::result::Result<T, Box<QueryError>>;

fn bad(msg: impl Into<String>) -> Box<QueryError> {
    Box::new(QueryError::BadValue(msg.into()))
}

fn failed(msg: impl Into<String>) -> Box<QueryError> {
    Box::new(QueryError::FailedToParse(msg.into()))
}

fn mismatch(msg: impl Into<String>) -> Box<QueryError> {
    Box::new(QueryError::TypeMismatch(msg.into()))
}

fn loc(code: i32, msg: impl Into<String>) -> Box<QueryError> {
    Box::new(QueryError::Location(code, msg.into()))
}

fn malformed(e: impl std::fmt::Display) -> Box<QueryError> {
    Box::new(QueryError::BadValue(format!(
        "invalid BSON in $jsonSchema: {e}"
    )))
}

/// `bsonType` aliases (`$type`'s, `findBSONTypeAlias`).
fn bson_type_alias(name: &str) -> Option<ElementType> {
    Some(match name {
        "double" => ElementType::Double,
        "string" => ElementType::String,
        "object" => ElementType::EmbeddedDocument,
        "array" => ElementType::Array,
        "binData" => ElementType::Binary,
        "undefined" => ElementType::Undefined,
        "objectId" => ElementType::ObjectId,
        "bool" => ElementType::Boolean,
        "date" => ElementType::DateTime,
        "null" => ElementType::Null,
        "regex" => ElementType::RegularExpression,
        "dbPointer" => ElementType::DbPointer,
        "javascript" => ElementType::JavaScriptCode,
        "symbol" => ElementType::Symbol,
        "javascriptWithScope" => ElementType::JavaScriptCodeWithScope,
        "int" => ElementType::Int32,
        "timestamp" => ElementType::Timestamp,
        "long" => ElementType::Int64,
        "decimal" => ElementType::Decimal128,
        "minKey" => ElementType::MinKey,
        "maxKey" => ElementType::MaxKey,
        _ => return None,
    })
}

/// JSON Schema `type` names (`findJsonSchemaTypeAlias`; `number` is handled apart).
fn json_type_alias(name: &str) -> Option<ElementType> {
    Some(match name {
        "array" => ElementType::Array,
        "boolean" => ElementType::Boolean,
        "null" => ElementType::Null,
        "object" => ElementType::EmbeddedDocument,
        "string" => ElementType::String,
        _ => return None,
    })
}

fn is_number(v: RawBsonRef<'_>) -> bool {
    is_numeric_type(v.element_type())
}

fn element(name: &str, v: RawBsonRef<'_>) -> String {
    format!("{name}: {}", display::value(v))
}

/// 2^63 as a double.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// `BSONElement::parseIntegerElementToNonNegativeLong` (FailedToParse).
fn non_negative(name: &str, v: RawBsonRef<'_>) -> PResult<u64> {
    let n = match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) => {
            if d.is_nan() {
                return Err(failed(format!(
                    "Expected an integer, but found NaN in: {}",
                    element(name, v)
                )));
            }
            if !(-TWO_POW_63..TWO_POW_63).contains(&d) {
                return Err(failed(format!(
                    "Cannot represent as a 64-bit integer: {}",
                    element(name, v)
                )));
            }
            if d.fract() != 0.0 {
                return Err(failed(format!("Expected an integer: {}", element(name, v))));
            }
            d as i64
        }
        RawBsonRef::Decimal128(d) => {
            decimal_to_i64_exact(Decimal::from_decimal128(d)).ok_or_else(|| {
                failed(format!(
                    "Cannot represent as a 64-bit integer: {}",
                    element(name, v)
                ))
            })?
        }
        _ => {
            return Err(failed(format!(
                "Expected a number in: {}",
                element(name, v)
            )));
        }
    };
    u64::try_from(n).map_err(|_| {
        failed(format!(
            "Expected a non-negative number in: {}",
            element(name, v)
        ))
    })
}

/// A Decimal128 as an i64 when it is one exactly (`toLongExact` without flags).
fn decimal_to_i64_exact(d: Decimal) -> Option<i64> {
    let Decimal::Finite {
        negative,
        coefficient,
        exponent,
    } = d
    else {
        return None;
    };
    if coefficient == 0 {
        return Some(0);
    }
    let magnitude = if exponent >= 0 {
        coefficient.checked_mul(10u128.checked_pow(u32::try_from(exponent).ok()?)?)?
    } else {
        let p = 10u128.checked_pow(exponent.unsigned_abs())?;
        if !coefficient.is_multiple_of(p) {
            return None;
        }
        coefficient / p
    };
    let signed = i128::try_from(magnitude).ok()?;
    i64::try_from(if negative { -signed } else { signed }).ok()
}

/// A `multipleOf` operand as MongoDB's `numberDecimal()`: sign bit, and the value.
fn to_decimal(v: RawBsonRef<'_>) -> Option<(bool, Decimal)> {
    match v {
        RawBsonRef::Int32(i) => Some((
            i < 0,
            Decimal::Finite {
                negative: i < 0,
                coefficient: u128::from(i.unsigned_abs()),
                exponent: 0,
            },
        )),
        RawBsonRef::Int64(i) => Some((
            i < 0,
            Decimal::Finite {
                negative: i < 0,
                coefficient: u128::from(i.unsigned_abs()),
                exponent: 0,
            },
        )),
        RawBsonRef::Double(x) => {
            if x.is_nan() {
                // MongoDB converts every NaN double to positive NaN.
                return Some((false, Decimal::NaN));
            }
            let negative = x.is_sign_negative();
            if x.is_infinite() {
                return Some((negative, Decimal::Infinite { negative }));
            }
            let (coefficient, exponent) = double_to_decimal15(x)?;
            Some((
                negative,
                Decimal::Finite {
                    negative,
                    coefficient,
                    exponent,
                },
            ))
        }
        RawBsonRef::Decimal128(d) => {
            let negative = d.bytes().get(15).is_some_and(|b| b & 0x80 != 0);
            Some((negative, Decimal::from_decimal128(d)))
        }
        _ => None,
    }
}

struct Parser {
    options: JsonSchemaOptions,
    depth: usize,
    /// Build the error annotations of a collection validator (`Node::Annotated`).
    annotate: bool,
}

/// `{name: v}`: a keyword as written, MongoDB's `BSONElement::wrap`.
fn wrap(name: &str, v: RawBsonRef<'_>) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    if let Ok(k) = <&bson::raw::CStr>::try_from(name) {
        d.append(k, v);
    }
    d
}

impl Parser {
    /// `node` with `ann` when building a validator's tree.
    fn ann(&self, node: Node, ann: impl FnOnce() -> Annotation) -> Node {
        if self.annotate {
            Node::Annotated(Box::new((ann(), node)))
        } else {
            node
        }
    }

    /// `node` tagged as a keyword: `tag` with `specifiedAs` `{keyword: v}`.
    fn keyword_node(&self, node: Node, tag: &'static str, v: RawBsonRef<'_>) -> Node {
        self.ann(node, || Annotation::generate(tag, wrap(tag, v)))
    }

    /// `node` that generates no error itself but whose children may
    /// (`kIgnoreButDescend`).
    fn descend(&self, node: Node) -> Node {
        self.ann(node, || Annotation::mode(Mode::IgnoreButDescend))
    }

    /// `makeRestriction`: `expr` applies only to values of the restriction's type.
    fn restrict(&self, kind: Restrict, at: &Subject, expr: Node, stated: Option<&Types>) -> Node {
        let types = kind.types();
        if let Some(stated) = stated.and_then(Types::single) {
            return if types.has(stated) { expr } else { Node::True };
        }
        self.descend(Node::Or(vec![
            Node::Not(Box::new(value(at.clone(), Test::Type(types)))),
            expr,
        ]))
    }

    /// A restriction on the object at `at` (`InternalSchemaObjectMatch` under
    /// `makeRestriction`), or `e` itself at the top level.
    fn object_restriction(&self, at: Option<&Subject>, e: Node, stated: Option<&Types>) -> Node {
        match at {
            None => e,
            Some(at) => {
                let object = self.descend(value(at.clone(), Test::Object(Box::new(e))));
                self.restrict(Restrict::Object, at, object, stated)
            }
        }
    }

    /// `{$exists: name}` reporting the name as missing (`_propertyExists`).
    fn property_exists(&self, name: &str) -> Node {
        self.ann(exists(name), || {
            Annotation::generate("_propertyExists", RawDocumentBuf::new())
        })
    }

    /// `makeDependencyExistsClause` (annotated like the `then` branch of a property
    /// dependency).
    fn exists_clause(&self, at: Option<&Subject>, name: &str) -> Node {
        let e = self.property_exists(name);
        match at {
            None => e,
            Some(at) => self.descend(value(at.clone(), Test::Object(Box::new(e)))),
        }
    }

    /// `_parse`: one (sub)schema whose values are at `at` (`None`: the top level, where the
    /// scope is the document itself).
    fn schema(&mut self, at: Option<&Subject>, schema: &RawDocument) -> PResult<Node> {
        self.depth += 1;
        if self.depth > MAX_SCHEMA_DEPTH {
            return Err(bad(format!(
                "$jsonSchema is nested deeper than {MAX_SCHEMA_DEPTH} schemas"
            )));
        }
        let r = self.schema_inner(at, schema);
        self.depth -= 1;
        r
    }

    fn schema_inner(&mut self, at: Option<&Subject>, schema: &RawDocument) -> PResult<Node> {
        let kws = self.keywords(schema)?;

        for (kw, name) in [(Kw::Description, "description"), (Kw::Title, "title")] {
            if let Some(v) = kws.get(kw)
                && !matches!(v, RawBsonRef::String(_))
            {
                return Err(mismatch(format!(
                    "$jsonSchema keyword '{name}' must be of type string"
                )));
            }
        }

        let (ty, bson_ty, encrypt) = (
            kws.get(Kw::Type),
            kws.get(Kw::BsonType),
            kws.get(Kw::Encrypt),
        );
        if ty.is_some() && bson_ty.is_some() {
            return Err(failed(
                "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'",
            ));
        }
        for (present, name) in [(ty.is_some(), "type"), (bson_ty.is_some(), "bsonType")] {
            if present && encrypt.is_some() {
                return Err(failed(format!(
                    "$jsonSchema keyword 'encrypt' cannot be used in conjunction with '{name}', \
                     'encrypt' implies type 'bsonType::BinData'"
                )));
            }
        }
        let stated = if let Some(v) = ty {
            Some(parse_type("type", v, json_type_alias)?)
        } else if let Some(v) = bson_ty {
            Some(parse_type("bsonType", v, bson_type_alias)?)
        } else if encrypt.is_some() {
            Some(Types::one(ElementType::Binary))
        } else {
            None
        };
        let stated_ref = stated.as_ref();

        let mut and = Vec::new();
        self.scalar_keywords(&kws, at, stated_ref, &mut and)?;
        self.array_keywords(&kws, at, stated_ref, &mut and)?;
        encryption_keywords(&kws, at, &mut and, self.annotate)?;
        self.object_keywords(&kws, at, stated_ref, &mut and)?;
        self.logical_keywords(&kws, at, &mut and)?;

        match (at, stated) {
            // A top-level schema stating a type other than object matches nothing.
            (None, Some(t)) if !t.has(ElementType::EmbeddedDocument) => {
                let mut spec = RawDocumentBuf::new();
                spec.append(bson::raw::cstr!("$jsonSchema"), schema.to_owned());
                return Ok(self.ann(Node::False, || Annotation::generate("$jsonSchema", spec)));
            }
            (Some(at), Some(t)) => {
                let node = value(at.clone(), Test::Type(t));
                and.push(match (ty, bson_ty) {
                    (Some(v), _) => self.keyword_node(node, "type", v),
                    (None, Some(v)) => self.keyword_node(node, "bsonType", v),
                    // Implied by `encrypt`: reported by the encryption nodes.
                    (None, None) => node,
                });
            }
            _ => {}
        }
        Ok(self.ann(Node::And(and), || {
            Annotation::generate("_subschema", RawDocumentBuf::new()).with_schema(schema)
        }))
    }

    /// The keywords of `schema` (boxed: the parser recurses through the caller's frame).
    fn keywords<'a>(&self, schema: &'a RawDocument) -> PResult<Box<Keywords<'a>>> {
        let mut kws = Box::new(Keywords([None; KW_COUNT]));
        for el in schema.iter() {
            let (name, v) = el.map_err(malformed)?;
            let name = name.as_str();
            match keyword(name) {
                Some(kw) => {
                    let Some(slot) = kws.0.get_mut(kw as usize) else {
                        continue;
                    };
                    if slot.is_some() {
                        return Err(failed(format!("Duplicate $jsonSchema keyword: {name}")));
                    }
                    *slot = Some(v);
                }
                None if UNSUPPORTED.contains(&name) => {
                    return Err(failed(format!(
                        "$jsonSchema keyword '{name}' is not currently supported"
                    )));
                }
                None if !self.options.ignore_unknown_keywords => {
                    return Err(failed(format!("Unknown $jsonSchema keyword: {name}")));
                }
                None => {}
            }
        }
        Ok(kws)
    }

    /// `translateScalarKeywords`: pattern, maxLength, minLength, multipleOf, maximum
    /// (+ exclusiveMaximum), minimum (+ exclusiveMinimum).
    fn scalar_keywords(
        &mut self,
        kws: &Keywords<'_>,
        at: Option<&Subject>,
        stated: Option<&Types>,
        and: &mut Vec<Node>,
    ) -> PResult<()> {
        if let Some(v) = kws.get(Kw::Pattern) {
            let RawBsonRef::String(p) = v else {
                return Err(mismatch("$jsonSchema keyword 'pattern' must be a string"));
            };
            if let Some(at) = at {
                let re = Regex::new(p, "")?;
                let node = value(at.clone(), Test::Leaf(Predicate::Regex(re)));
                let node = self.keyword_node(node, "pattern", v);
                and.push(self.restrict(Restrict::String, at, node, stated));
            }
        }
        for (kw, name, max) in [
            (Kw::MaxLength, "maxLength", true),
            (Kw::MinLength, "minLength", false),
        ] {
            if let Some(v) = kws.get(kw) {
                let n = non_negative(name, v)?;
                if let Some(at) = at {
                    let test = if max {
                        Test::MaxLength(n)
                    } else {
                        Test::MinLength(n)
                    };
                    let node = self.keyword_node(value(at.clone(), test), name, v);
                    and.push(self.restrict(Restrict::String, at, node, stated));
                }
            }
        }
        if let Some(v) = kws.get(Kw::MultipleOf) {
            let Some((negative, d)) = to_decimal(v) else {
                return Err(mismatch(
                    "$jsonSchema keyword 'multipleOf' must be a number",
                ));
            };
            let zero = matches!(d, Decimal::Finite { coefficient: 0, .. });
            if negative || zero {
                return Err(failed(
                    "$jsonSchema keyword 'multipleOf' must have a positive value",
                ));
            }
            if let Some(at) = at {
                let divisor = match d {
                    Decimal::NaN => return Err(bad("divisor cannot be NaN")),
                    Decimal::Infinite { .. } => return Err(bad("divisor cannot be infinite")),
                    Decimal::Finite {
                        coefficient,
                        exponent,
                        ..
                    } => Dec {
                        coefficient,
                        exponent,
                    },
                };
                let node = value(at.clone(), Test::MultipleOf(divisor));
                let node = self.keyword_node(node, "multipleOf", v);
                and.push(self.restrict(Restrict::Number, at, node, stated));
            }
        }
        for (bound, exclusive, name, ex_name, upper) in [
            (
                Kw::Maximum,
                Kw::ExclusiveMaximum,
                "maximum",
                "exclusiveMaximum",
                true,
            ),
            (
                Kw::Minimum,
                Kw::ExclusiveMinimum,
                "minimum",
                "exclusiveMinimum",
                false,
            ),
        ] {
            let Some(v) = kws.get(bound) else {
                if kws.get(exclusive).is_some() {
                    return Err(failed(format!(
                        "$jsonSchema keyword '{name}' must be a present if {ex_name} is present"
                    )));
                }
                continue;
            };
            let is_exclusive = match kws.get(exclusive) {
                None => false,
                Some(RawBsonRef::Boolean(b)) => b,
                Some(_) => {
                    return Err(mismatch(format!(
                        "$jsonSchema keyword '{ex_name}' must be a boolean"
                    )));
                }
            };
            if !is_number(v) {
                return Err(mismatch(format!(
                    "$jsonSchema keyword '{name}' must be a number"
                )));
            }
            if let Some(at) = at {
                let op = match (upper, is_exclusive) {
                    (true, true) => CmpOp::Lt,
                    (true, false) => CmpOp::Lte,
                    (false, true) => CmpOp::Gt,
                    (false, false) => CmpOp::Gte,
                };
                let node = value(at.clone(), Test::Leaf(Predicate::Cmp(op, v.into())));
                let node = self.ann(node, || {
                    let mut spec = wrap(name, v);
                    if is_exclusive && let Ok(k) = <&bson::raw::CStr>::try_from(ex_name) {
                        spec.append(k, true);
                    }
                    Annotation::generate(name, spec)
                });
                and.push(self.restrict(Restrict::Number, at, node, stated));
            }
        }
        Ok(())
    }

    /// `translateArrayKeywords`: minItems, maxItems, uniqueItems, items, additionalItems.
    fn array_keywords(
        &mut self,
        kws: &Keywords<'_>,
        at: Option<&Subject>,
        stated: Option<&Types>,
        and: &mut Vec<Node>,
    ) -> PResult<()> {
        for (kw, name, max) in [
            (Kw::MinItems, "minItems", false),
            (Kw::MaxItems, "maxItems", true),
        ] {
            if let Some(v) = kws.get(kw) {
                let n = non_negative(name, v)?;
                if let Some(at) = at {
                    let test = if max {
                        Test::MaxItems(n)
                    } else {
                        Test::MinItems(n)
                    };
                    let node = self.keyword_node(value(at.clone(), test), name, v);
                    and.push(self.restrict(Restrict::Array, at, node, stated));
                }
            }
        }
        if let Some(v) = kws.get(Kw::UniqueItems) {
            let RawBsonRef::Boolean(unique) = v else {
                return Err(mismatch(
                    "$jsonSchema keyword 'uniqueItems' must be a boolean",
                ));
            };
            if let Some(at) = at
                && unique
            {
                let node = value(at.clone(), Test::UniqueItems);
                let node = self.keyword_node(node, "uniqueItems", v);
                and.push(self.restrict(Restrict::Array, at, node, stated));
            }
        }

        let mut additional_from = None;
        if let Some(v) = kws.get(Kw::Items) {
            match v {
                RawBsonRef::Array(arr) => {
                    let mut schemas = Vec::new();
                    for el in arr {
                        let el = el.map_err(malformed)?;
                        let RawBsonRef::Document(sub) = el else {
                            return Err(mismatch(format!(
                                "$jsonSchema keyword 'items' requires that each element of the \
                                 array is an object, but found a {}",
                                type_name(el)
                            )));
                        };
                        schemas.push(self.schema(Some(&Subject::Placeholder), sub)?);
                    }
                    additional_from = Some(schemas.len());
                    if let Some(at) = at {
                        let positions = schemas
                            .into_iter()
                            .enumerate()
                            .map(|(idx, schema)| {
                                // `items` carries the operator name, not the positions.
                                self.ann(
                                    value(at.clone(), Test::ItemAt(idx, Box::new(schema))),
                                    || Annotation::generate("", RawDocumentBuf::new()),
                                )
                            })
                            .collect();
                        let node = self.keyword_node(Node::And(positions), "items", v);
                        and.push(self.restrict(Restrict::Array, at, node, stated));
                    }
                }
                RawBsonRef::Document(sub) => {
                    let schema = self.schema(Some(&Subject::Placeholder), sub)?;
                    if let Some(at) = at {
                        let node = value(at.clone(), Test::ItemsFrom(0, Box::new(schema)));
                        let node = self.keyword_node(node, "items", v);
                        and.push(self.restrict(Restrict::Array, at, node, stated));
                    }
                }
                _ => {
                    return Err(mismatch(format!(
                        "$jsonSchema keyword 'items' must be an array or an object, not {}",
                        type_name(v)
                    )));
                }
            }
        }
        if let Some(v) = kws.get(Kw::AdditionalItems) {
            let otherwise = match v {
                RawBsonRef::Boolean(true) => Node::True,
                RawBsonRef::Boolean(false) => Node::False,
                RawBsonRef::Document(sub) => self.schema(Some(&Subject::Placeholder), sub)?,
                _ => {
                    return Err(mismatch(format!(
                        "$jsonSchema keyword 'additionalItems' must be either an object or a \
                         boolean, but got a {}",
                        type_name(v)
                    )));
                }
            };
            if let (Some(from), Some(at)) = (additional_from, at) {
                let node = value(at.clone(), Test::ItemsFrom(from, Box::new(otherwise)));
                let node = self.keyword_node(node, "additionalItems", v);
                and.push(self.restrict(Restrict::Array, at, node, stated));
            }
        }
        Ok(())
    }

    /// `translateObjectKeywords`: required, properties, patternProperties +
    /// additionalProperties, minProperties, maxProperties, dependencies.
    fn object_keywords(
        &mut self,
        kws: &Keywords<'_>,
        at: Option<&Subject>,
        stated: Option<&Types>,
        and: &mut Vec<Node>,
    ) -> PResult<()> {
        let required = match kws.get(Kw::Required) {
            Some(v) => parse_required(v)?,
            None => Vec::new(),
        };
        let properties = kws.get(Kw::Properties);
        if let Some(v) = properties {
            and.push(self.properties(at, v, stated, &required)?);
        }
        let (patterns, additional) = (
            kws.get(Kw::PatternProperties),
            kws.get(Kw::AdditionalProperties),
        );
        if patterns.is_some() || additional.is_some() {
            let e = self.allowed_properties(properties, patterns, additional)?;
            let e = self.ann(e, || {
                Annotation::generate(
                    "",
                    additional
                        .map_or_else(RawDocumentBuf::new, |v| wrap("additionalProperties", v)),
                )
            });
            and.push(self.object_restriction(at, e, stated));
        }
        if let (false, Some(v)) = (required.is_empty(), kws.get(Kw::Required)) {
            let e = Node::And(required.iter().map(|n| self.property_exists(n)).collect());
            let e = self.keyword_node(e, "required", v);
            and.push(self.object_restriction(at, e, stated));
        }
        for (kw, name, max) in [
            (Kw::MinProperties, "minProperties", false),
            (Kw::MaxProperties, "maxProperties", true),
        ] {
            if let Some(v) = kws.get(kw) {
                let n = non_negative(name, v)?;
                let e = if max {
                    Node::MaxProperties(n)
                } else {
                    Node::MinProperties(n)
                };
                let e = self.keyword_node(e, name, v);
                and.push(self.object_restriction(at, e, stated));
            }
        }
        if let Some(v) = kws.get(Kw::Dependencies) {
            and.push(self.dependencies(at, v)?);
        }
        Ok(())
    }

    /// `parseProperties`.
    fn properties(
        &mut self,
        at: Option<&Subject>,
        v: RawBsonRef<'_>,
        stated: Option<&Types>,
        required: &[String],
    ) -> PResult<Node> {
        let RawBsonRef::Document(obj) = v else {
            return Err(mismatch(
                "$jsonSchema keyword 'properties' must be an object",
            ));
        };
        let mut and = Vec::new();
        for el in obj.iter() {
            let (name, sub) = el.map_err(malformed)?;
            let name = name.as_str();
            let RawBsonRef::Document(sub) = sub else {
                return Err(mismatch(format!(
                    "Nested schema for $jsonSchema property '{name}' must be an object"
                )));
            };
            // An empty name is an empty path, which MongoDB parses as a top-level schema.
            let sub_at = (!name.is_empty()).then(|| Subject::Field(FieldPath::new(name)));
            let nested = self.schema(sub_at.as_ref(), sub)?;
            // The subschema is retagged as the property's.
            let nested = match nested {
                Node::Annotated(b) => b.1,
                other => other,
            };
            let nested = self.ann(nested, || {
                let mut spec = RawDocumentBuf::new();
                spec.append(bson::raw::cstr!("propertyName"), name);
                Annotation::generate("_property", spec).with_schema(sub)
            });
            if required.binary_search_by(|r| r.as_str().cmp(name)).is_ok() {
                and.push(nested);
            } else {
                and.push(self.descend(Node::Or(vec![Node::Not(Box::new(exists(name))), nested])));
            }
        }
        let e = self.ann(Node::And(and), || {
            Annotation::generate("properties", RawDocumentBuf::new())
        });
        Ok(self.object_restriction(at, e, stated))
    }

    /// `parseAllowedProperties` (without the object wrapper).
    fn allowed_properties(
        &mut self,
        properties: Option<RawBsonRef<'_>>,
        patterns: Option<RawBsonRef<'_>>,
        additional: Option<RawBsonRef<'_>>,
    ) -> PResult<Node> {
        let mut names = Vec::new();
        if let Some(RawBsonRef::Document(obj)) = properties {
            for el in obj.iter() {
                let (name, _) = el.map_err(malformed)?;
                names.push(name.as_str().to_string());
            }
        }
        names.sort();
        names.dedup();

        let mut raw_patterns = Vec::new();
        if let Some(v) = patterns {
            let RawBsonRef::Document(obj) = v else {
                return Err(mismatch(
                    "$jsonSchema keyword 'patternProperties' must be an object",
                ));
            };
            for el in obj.iter() {
                let (name, sub) = el.map_err(malformed)?;
                let RawBsonRef::Document(sub) = sub else {
                    return Err(mismatch(format!(
                        "$jsonSchema keyword 'patternProperties' has property '{}' which is not \
                         an object",
                        name.as_str()
                    )));
                };
                let schema = self.schema(Some(&Subject::Placeholder), sub)?;
                raw_patterns.push((name.as_str(), schema));
            }
        }
        let otherwise = match additional {
            None | Some(RawBsonRef::Boolean(true)) => Node::True,
            Some(RawBsonRef::Boolean(false)) => Node::False,
            Some(RawBsonRef::Document(sub)) => self.schema(Some(&Subject::Placeholder), sub)?,
            Some(_) => {
                return Err(mismatch(
                    "$jsonSchema keyword 'additionalProperties' must be an object or a boolean",
                ));
            }
        };
        let mut compiled = Vec::new();
        for (pattern, schema) in raw_patterns {
            let re = Regex::new(pattern, "")
                .map_err(|e| bad(format!("Invalid regular expression: {e}")))?;
            compiled.push((pattern.to_string(), re, schema));
        }
        Ok(Node::AllowedProperties(Box::new(AllowedProperties {
            properties: names,
            patterns: compiled,
            otherwise,
        })))
    }

    /// `parseDependencies`.
    fn dependencies(&mut self, at: Option<&Subject>, v: RawBsonRef<'_>) -> PResult<Node> {
        let RawBsonRef::Document(obj) = v else {
            return Err(mismatch(
                "$jsonSchema keyword 'dependencies' must be an object",
            ));
        };
        let mut and = Vec::new();
        for el in obj.iter() {
            let (name, dep) = el.map_err(malformed)?;
            let name = name.as_str();
            let then = match dep {
                RawBsonRef::Document(sub) => self.schema(at, sub)?,
                RawBsonRef::Array(arr) => {
                    let mut seen: Vec<&str> = Vec::new();
                    let mut clauses = Vec::new();
                    for el in arr {
                        let el = el.map_err(malformed)?;
                        let RawBsonRef::String(s) = el else {
                            return Err(mismatch(format!(
                                "array '{name}' in $jsonSchema keyword 'dependencies' can only \
                                 contain strings, but found element of type: {}",
                                type_name(el)
                            )));
                        };
                        if seen.contains(&s) {
                            return Err(failed(format!(
                                "array '{name}' in $jsonSchema keyword 'dependencies' contains \
                                 duplicate element: {s}"
                            )));
                        }
                        seen.push(s);
                        clauses.push(self.exists_clause(at, s));
                    }
                    if clauses.is_empty() {
                        return Err(failed(format!(
                            "property '{name}' in $jsonSchema keyword 'dependencies' cannot be \
                             an empty array"
                        )));
                    }
                    self.ann(Node::And(clauses), || {
                        Annotation::generate("_propertiesExistList", wrap(name, dep))
                    })
                }
                // Annotations are allowed among the dependencies.
                RawBsonRef::String(_) if name == "title" || name == "description" => continue,
                _ => {
                    return Err(mismatch(format!(
                        "property '{name}' in $jsonSchema keyword 'dependencies' must be either \
                         an object or an array"
                    )));
                }
            };
            let tag = if matches!(dep, RawBsonRef::Document(_)) {
                "_schemaDependency"
            } else {
                "_propertyDependency"
            };
            // The condition never contributes to an error: it is left unannotated.
            let cond = Node::Cond {
                cond: Box::new(exists_clause(at, name)),
                then: Box::new(then),
            };
            and.push(self.ann(cond, || Annotation::generate(tag, wrap(name, dep))));
        }
        Ok(self.ann(Node::And(and), || {
            Annotation::generate("dependencies", RawDocumentBuf::new()).with_schema(obj)
        }))
    }

    /// `translateLogicalKeywords`: allOf, anyOf, oneOf, not, enum.
    fn logical_keywords(
        &mut self,
        kws: &Keywords<'_>,
        at: Option<&Subject>,
        and: &mut Vec<Node>,
    ) -> PResult<()> {
        let logical = |tag: &'static str| move || Annotation::generate(tag, RawDocumentBuf::new());
        if let Some(v) = kws.get(Kw::AllOf) {
            let node = Node::And(self.schema_list("allOf", at, v)?);
            and.push(self.ann(node, logical("allOf")));
        }
        if let Some(v) = kws.get(Kw::AnyOf) {
            let node = Node::Or(self.schema_list("anyOf", at, v)?);
            and.push(self.ann(node, logical("anyOf")));
        }
        if let Some(v) = kws.get(Kw::OneOf) {
            let node = Node::Xor(self.schema_list("oneOf", at, v)?);
            and.push(self.ann(node, logical("oneOf")));
        }
        if let Some(v) = kws.get(Kw::Not) {
            let RawBsonRef::Document(sub) = v else {
                return Err(mismatch(format!(
                    "$jsonSchema keyword 'not' must be an object, but found an element of type {}",
                    type_name(v)
                )));
            };
            let node = Node::Not(Box::new(self.schema(at, sub)?));
            and.push(self.ann(node, logical("not")));
        }
        if let Some(v) = kws.get(Kw::Enum) {
            let node = parse_enum(at, v)?;
            and.push(self.keyword_node(node, "enum", v));
        }
        Ok(())
    }

    /// `parseLogicalKeyword`.
    fn schema_list(
        &mut self,
        name: &str,
        at: Option<&Subject>,
        v: RawBsonRef<'_>,
    ) -> PResult<Vec<Node>> {
        let RawBsonRef::Array(arr) = v else {
            return Err(mismatch(format!(
                "$jsonSchema keyword '{name}' must be an array"
            )));
        };
        let mut out = Vec::new();
        for el in arr {
            let el = el.map_err(malformed)?;
            let RawBsonRef::Document(sub) = el else {
                return Err(mismatch(format!(
                    "$jsonSchema keyword '{name}' must be an array of objects, but found an \
                     element of type {}",
                    type_name(el)
                )));
            };
            out.push(self.schema(at, sub)?);
        }
        if out.is_empty() {
            return Err(bad(format!(
                "$jsonSchema keyword '{name}' must be a non-empty array"
            )));
        }
        Ok(out)
    }
}

/// `parseType` / `JSONSchemaParser::parseTypeSet`.
fn parse_type(
    keyword: &str,
    v: RawBsonRef<'_>,
    alias: fn(&str) -> Option<ElementType>,
) -> PResult<Types> {
    let t = parse_type_set(keyword, v, alias)?;
    if t.is_empty() {
        return Err(failed(format!(
            "$jsonSchema keyword '{keyword}' must name at least one type"
        )));
    }
    Ok(t)
}

fn parse_type_set(
    keyword: &str,
    v: RawBsonRef<'_>,
    alias: fn(&str) -> Option<ElementType>,
) -> PResult<Types> {
    const INTEGER: &str = "$jsonSchema type 'integer' is not currently supported.";
    let mut names: Vec<&str> = Vec::new();
    match v {
        RawBsonRef::String(s) => {
            if s == "integer" {
                return Err(failed(INTEGER));
            }
            names.push(s);
        }
        RawBsonRef::Array(arr) => {
            for el in arr {
                let el = el.map_err(malformed)?;
                let RawBsonRef::String(s) = el else {
                    return Err(mismatch(format!(
                        "$jsonSchema keyword '{keyword}' array elements must be strings"
                    )));
                };
                if s == "integer" {
                    return Err(failed(INTEGER));
                }
                if names.contains(&s) {
                    return Err(failed(format!(
                        "$jsonSchema keyword '{keyword}' has duplicate value: {s}"
                    )));
                }
                names.push(s);
            }
        }
        _ => {
            return Err(mismatch(format!(
                "$jsonSchema keyword '{keyword}' must be either a string or an array of strings"
            )));
        }
    }
    // MongoDB walks the aliases as a sorted set.
    names.sort_unstable();
    let mut t = Types::default();
    for name in names {
        if name == "number" {
            t.all_numbers = true;
        } else if let Some(ty) = alias(name) {
            if !t.types.contains(&ty) {
                t.types.push(ty);
            }
        } else if name == "missing" {
            return Err(bad(
                "'missing' is not a legal type name. To query for non-existence of a field, use \
                 {$exists:false}.",
            ));
        } else {
            return Err(bad(format!("Unknown type name alias: {name}")));
        }
    }
    Ok(t)
}

/// `parseRequired`: the required names, sorted.
fn parse_required(v: RawBsonRef<'_>) -> PResult<Vec<String>> {
    let RawBsonRef::Array(arr) = v else {
        return Err(mismatch(format!(
            "$jsonSchema keyword 'required' must be an array, but found an element of type {}",
            type_name(v)
        )));
    };
    let mut names: Vec<String> = Vec::new();
    for el in arr {
        let el = el.map_err(malformed)?;
        let RawBsonRef::String(s) = el else {
            return Err(mismatch(format!(
                "$jsonSchema keyword 'required' must be an array of strings, but found an \
                 element of type: {}",
                type_name(el)
            )));
        };
        if names.iter().any(|n| n == s) {
            return Err(failed(
                "$jsonSchema keyword 'required' array cannot contain duplicate values",
            ));
        }
        names.push(s.to_string());
    }
    if names.is_empty() {
        return Err(failed(
            "$jsonSchema keyword 'required' cannot be an empty array",
        ));
    }
    names.sort();
    Ok(names)
}

/// `parseEnum`.
fn parse_enum(at: Option<&Subject>, v: RawBsonRef<'_>) -> PResult<Node> {
    let RawBsonRef::Array(arr) = v else {
        return Err(mismatch(format!(
            "$jsonSchema keyword 'enum' must be an array, but found an element of type {}",
            type_name(v)
        )));
    };
    let mut values = Vec::new();
    for el in arr {
        values.push(el.map_err(malformed)?);
    }
    if values.is_empty() {
        return Err(failed(
            "$jsonSchema keyword 'enum' cannot be an empty array",
        ));
    }
    let mut sorted = values.clone();
    sorted.sort_by(|x, y| unordered_cmp(*x, *y, 0));
    if sorted
        .windows(2)
        .any(|w| matches!(w, [x, y] if unordered_cmp(*x, *y, 0).is_eq()))
    {
        return Err(failed(
            "$jsonSchema keyword 'enum' array cannot contain duplicate values.",
        ));
    }
    let children: Vec<Node> = match at {
        // At the top level only objects can equal the (object) document.
        None => values
            .into_iter()
            .filter_map(|v| match v {
                RawBsonRef::Document(d) => Some(Node::RootDocEq(d.to_owned())),
                _ => None,
            })
            .collect(),
        Some(at) => values
            .into_iter()
            .map(|v| value(at.clone(), Test::Eq(v.into())))
            .collect(),
    };
    if children.is_empty() {
        return Ok(Node::False);
    }
    Ok(Node::Or(children))
}

/// `translateEncryptionKeywords`: `encrypt` and `encryptMetadata`.
fn encryption_keywords(
    kws: &Keywords<'_>,
    at: Option<&Subject>,
    and: &mut Vec<Node>,
    annotate: bool,
) -> PResult<()> {
    let (encrypt, metadata) = (kws.get(Kw::Encrypt), kws.get(Kw::EncryptMetadata));
    if encrypt.is_some() && metadata.is_some() {
        return Err(failed(
            "Cannot specify both $jsonSchema keywords 'encrypt' and 'encryptMetadata'",
        ));
    }
    if let Some(v) = metadata {
        let RawBsonRef::Document(obj) = v else {
            return Err(mismatch(
                "$jsonSchema keyword 'encryptMetadata' must be an object ",
            ));
        };
        if obj.is_empty() {
            return Err(failed(
                "$jsonSchema keyword 'encryptMetadata' cannot be an empty object ",
            ));
        }
        parse_encryption_info("encryptMetadata", obj, false)?;
    }
    if let Some(v) = encrypt {
        let RawBsonRef::Document(obj) = v else {
            return Err(mismatch("$jsonSchema keyword 'encrypt' must be an object "));
        };
        let types = parse_encryption_info("encrypt", obj, true)?;
        if let Some(at) = at {
            let encrypt = |node: Node| {
                if annotate {
                    let ann = Annotation::generate("encrypt", RawDocumentBuf::new());
                    Node::Annotated(Box::new((ann, node)))
                } else {
                    node
                }
            };
            and.push(encrypt(value(at.clone(), Test::Encrypted)));
            if let Some(types) = types {
                and.push(encrypt(value(at.clone(), Test::EncryptedType(types))));
            }
        }
    }
    Ok(())
}

/// The IDL structs `EncryptionInfo` (`encrypt`: bsonType, algorithm, keyId) and
/// `EncryptionMetadata` (`encryptMetadata`: algorithm, keyId). Returns `encrypt.bsonType`.
fn parse_encryption_info(
    context: &str,
    obj: &RawDocument,
    allow_bson_type: bool,
) -> PResult<Option<Types>> {
    let mut seen: Vec<&str> = Vec::new();
    let mut types = None;
    for el in obj.iter() {
        let (name, v) = el.map_err(malformed)?;
        let name = name.as_str();
        let known =
            matches!(name, "algorithm" | "keyId") || (allow_bson_type && name == "bsonType");
        if !known {
            return Err(loc(
                40415,
                format!("BSON field '{context}.{name}' is an unknown field."),
            ));
        }
        if seen.contains(&name) {
            return Err(loc(
                40413,
                format!("BSON field '{context}.{name}' is a duplicate field"),
            ));
        }
        seen.push(name);
        match name {
            "bsonType" => types = Some(parse_type_set("bsonType", v, bson_type_alias)?),
            "algorithm" => {
                let RawBsonRef::String(s) = v else {
                    return Err(mismatch(format!(
                        "BSON field '{context}.algorithm' is the wrong type '{}', expected type \
                         'string'",
                        type_name(v)
                    )));
                };
                if !matches!(
                    s,
                    "AEAD_AES_256_CBC_HMAC_SHA_512-Deterministic"
                        | "AEAD_AES_256_CBC_HMAC_SHA_512-Random"
                ) {
                    return Err(bad(format!(
                        "Enumeration value '{s}' for field '{context}.algorithm' is not a valid \
                         value."
                    )));
                }
            }
            _ => parse_key_id(v)?,
        }
    }
    Ok(types)
}

/// `EncryptSchemaKeyId::parseFromBSON`: a JSON pointer, or an array of UUIDs.
fn parse_key_id(v: RawBsonRef<'_>) -> PResult<()> {
    match v {
        RawBsonRef::String(pointer) => {
            if pointer.is_empty() {
                return Err(loc(51064, "Empty JSONPointers are not supported"));
            }
            if !pointer.starts_with('/') {
                return Err(loc(51065, "JSONPointer must start with a '/'"));
            }
            let bytes = pointer.as_bytes();
            for (i, b) in bytes.iter().enumerate() {
                if *b == b'~' && !matches!(bytes.get(i + 1), Some(b'0' | b'1')) {
                    return Err(loc(
                        51063,
                        "JSONPointer cannot contain unescaped ~ character",
                    ));
                }
            }
            Ok(())
        }
        RawBsonRef::Array(arr) => {
            for el in arr {
                let el = el.map_err(malformed)?;
                let RawBsonRef::Binary(b) = el else {
                    return Err(loc(
                        51088,
                        format!(
                            "Array elements must have type BinData, found {}",
                            type_name(el)
                        ),
                    ));
                };
                if b.subtype != BinarySubtype::Uuid {
                    return Err(loc(
                        51084,
                        format!(
                            "Array elements must have bindata type UUID, found {}",
                            u8::from(b.subtype)
                        ),
                    ));
                }
                if b.bytes.len() != 16 {
                    return Err(loc(207, "Invalid UUID"));
                }
            }
            Ok(())
        }
        _ => Err(loc(
            51085,
            format!(
                "Expected either string or array of UUID for EncryptSchemaKeyId, found {}",
                type_name(v)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifteen_digits() {
        assert_eq!(double_to_decimal15(0.3), Some((300_000_000_000_000, -15)));
        assert_eq!(double_to_decimal15(-2.5), Some((250_000_000_000_000, -14)));
        assert_eq!(double_to_decimal15(0.0), Some((0, 0)));
        assert_eq!(double_to_decimal15(f64::NAN), None);
        assert_eq!(double_to_decimal15(1e300), Some((100_000_000_000_000, 286)));
    }

    #[test]
    fn divisibility() {
        let d = |c: u128, e: i32| Dec {
            coefficient: c,
            exponent: e,
        };
        assert!(is_multiple(6, 0, d(3, 0)));
        assert!(!is_multiple(7, 0, d(3, 0)));
        assert!(is_multiple(3, -1, d(1, -1)));
        assert!(is_multiple(1, 10, d(7, 0)) == 10_000_000_000u128.is_multiple_of(7));
        assert!(is_multiple(1, 6000, d(5, 0)));
        assert!(!is_multiple(1, 6000, d(3, 0)));
        assert!(!is_multiple(1, -6000, d(1, 0)));
        assert!(is_multiple(0, 0, d(7, 3)));
        assert!(is_multiple(
            9_999_999_999_999_999_999_999_999_999_999_999,
            0,
            d(9_999_999_999_999_999_999_999_999_999_999_999, 0)
        ));
        assert_eq!(mul_mod(u128::MAX >> 15, u128::MAX >> 15, (1 << 113) - 1), {
            // (2^113 - 1) ≡ 0, and u128::MAX >> 15 = 2^113 - 1.
            0
        });
    }

    #[test]
    fn unordered() {
        let a = bson::rawdoc! {"x": 1, "y": {"p": 1, "q": [1, {"m": 1, "n": 2}]}};
        let b = bson::rawdoc! {"y": {"q": [1.0, {"n": 2_i64, "m": 1}], "p": 1}, "x": 1};
        let c = bson::rawdoc! {"y": {"q": [{"n": 2_i64, "m": 1}, 1.0], "p": 1}, "x": 1};
        let (a, b, c) = (
            RawBsonRef::Document(&a),
            RawBsonRef::Document(&b),
            RawBsonRef::Document(&c),
        );
        assert!(unordered_cmp(a, b, 0).is_eq());
        assert!(unordered_cmp(a, c, 0).is_ne());
        assert_eq!(unordered_cmp(a, c, 0), unordered_cmp(c, a, 0).reverse());
    }
}
