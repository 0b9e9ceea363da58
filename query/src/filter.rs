//! Query filters: MongoDB 7.0 match expressions, parsed into an inspectable tree ([`Expr`])
//! and evaluated against raw documents.
//!
//! Parsing follows src/mongo/db/matcher/expression_parser.cpp: a top-level field whose value
//! is a document starting with a `$` key (and not a DBRef) is a set of operators on that path;
//! a regex value is a regex match; anything else is an equality. Errors carry MongoDB's codes
//! and messages (BadValue 2, FailedToParse 9, TypeMismatch 14, 51074/51075/51091/51108 as
//! `Location`). Operators Cairn does not evaluate yet (`$where`, `$text`, `$expr`,
//! `$jsonSchema` without an [`Extensions`] that supplies them) are NotImplemented (238);
//! `$geoWithin`/`$within`/`$geoIntersects` and `$near`/`$nearSphere` (parsed whole when first
//! in their operator document; one per filter, in the top-level conjunction) are
//! [`crate::geo`]'s. `$sampleRate: r` is MongoDB's rewrite: false for 0, true for 1,
//! otherwise `$expr: {$lt: [{$rand: {}}, r]}` (a fresh draw per document).
//!
//! Evaluation follows expression_leaf.cpp / expression_array.cpp / path.cpp:
//! - a path predicate matches when *any* value the path reaches ([`crate::path::visit`])
//!   satisfies it: array elements one level deep, then the array itself; a missing field is
//!   seen once as "missing" (which `null`, `$exists` and `$type: 0` can match);
//! - comparisons are type-bracketed by canonical type class ([`TypeClass`]), except that
//!   null matches missing and undefined (for `$eq`, `$lte`, `$gte`, `$in`) and a MinKey/MaxKey
//!   bound admits every type; numbers compare exactly across int/long/double/decimal, `-0 == 0`,
//!   and NaN equals only NaN and is neither below nor above anything;
//! - `$ne`, `$nin`, `$not`, `$exists: false` negate the whole path predicate (so `$ne: 1`
//!   rejects an array containing 1);
//! - `$size` and `$elemMatch` look only at arrays found at the path (no element traversal);
//!   `$elemMatch` records which element matched.
//!
//! Invariants: parsing and matching never panic on any input (malformed BSON included);
//! parse recursion is bounded by [`MAX_NESTING`]; a parsed [`Filter`] is immutable, cheap to
//! clone and `Send + Sync`.

use std::cmp::Ordering;
use std::fmt;
use std::ops::ControlFlow;
use std::sync::Arc;

use bson::spec::ElementType;
use bson::{RawArray, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::compare::{TypeClass, compare_values};
use cairn_storage::decimal::Decimal;
use cairn_storage::display;
use cairn_storage::display::format_g;

use crate::error::{QueryError, Result};
use crate::geo::GeoMatch;
use crate::geo::near::NearQuery;
use crate::path::{self, FieldPath, LeafArrays};
use crate::regex::Regex;

/// Deepest nesting of filter and operator documents (`$and` inside `$or` inside `$elemMatch`
/// …) accepted: MongoDB's historical `kMaximumTreeDepth`. It also bounds the stack used by
/// parsing and matching.
pub const MAX_NESTING: usize = 100;

/// A parsed filter.
#[derive(Debug, Clone)]
pub struct Filter {
    root: Expr,
}

/// A node of a parsed filter (MongoDB's `MatchExpression`).
#[derive(Debug, Clone)]
pub enum Expr {
    /// All children match (an empty `And` matches everything).
    And(Vec<Expr>),
    /// Some child matches.
    Or(Vec<Expr>),
    /// No child matches.
    Nor(Vec<Expr>),
    /// The child does not match (`$ne`, `$nin`, `$not`, `$exists: false`).
    Not(Box<Expr>),
    /// `$alwaysTrue: 1`.
    AlwaysTrue,
    /// `$alwaysFalse: 1`, and `$all: []`.
    AlwaysFalse,
    /// A predicate on the values reached by a path.
    Path(PathExpr),
    /// A document-level operator supplied by an [`Extensions`] (`$expr`, `$jsonSchema` …).
    Extension(Extension),
}

/// A predicate applied to the values a path reaches.
#[derive(Debug, Clone)]
pub struct PathExpr {
    /// The dotted path. Inside the value form of `$elemMatch` (`{$elemMatch: {$gt: 1}}`)
    /// children apply to each array element directly and their path is empty (`""`).
    pub path: FieldPath,
    /// The predicate.
    pub pred: Predicate,
}

/// The comparison of `$eq`, `$lt`, `$lte`, `$gt`, `$gte`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    /// `$eq` (and implicit equality).
    Eq,
    /// `$lt`.
    Lt,
    /// `$lte`.
    Lte,
    /// `$gt`.
    Gt,
    /// `$gte`.
    Gte,
}

/// A single-value predicate (MongoDB's leaf and array match expressions).
#[derive(Debug, Clone)]
pub enum Predicate {
    /// A comparison with a value (never Undefined).
    Cmp(CmpOp, RawBson),
    /// `$in`.
    In(InList),
    /// `$regex`, `/re/`.
    Regex(Regex),
    /// `$exists: true`.
    Exists,
    /// `$type`.
    Type(TypeSet),
    /// `$mod: [divisor, remainder]` (divisor never 0).
    Mod {
        /// The divisor, truncated to an integer.
        divisor: i64,
        /// The remainder, truncated to an integer.
        remainder: i64,
    },
    /// `$bitsAllSet`, `$bitsAllClear`, `$bitsAnySet`, `$bitsAnyClear`.
    Bits(BitTest),
    /// `$size` (non-negative).
    Size(i64),
    /// `$elemMatch` with a filter applied to each element that is a document (or array).
    ElemMatchObject(Box<Expr>),
    /// `$elemMatch` with operators applied to each element (children have empty paths).
    ElemMatchValue(Vec<Expr>),
    /// `$geoWithin` / `$within` / `$geoIntersects`.
    Geo(Arc<GeoMatch>),
    /// `$near` / `$nearSphere` / `$geoNear` (at most one, in the top-level conjunction): the
    /// value's distance is within the bounds; `find` orders by it.
    Near(Arc<NearQuery>),
}

/// The operand of `$in`/`$nin`. The values are kept compact — each as a one-element BSON
/// document `{"": v}` in one buffer, found by its offset — about 11 bytes per value beside
/// its own bytes, where a `RawBson` each took 56 (a 1M-element `$in` is held once per
/// command, so this is most of its working memory).
#[derive(Debug, Clone)]
pub struct InList {
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    regexes: Vec<Regex>,
    has_null: bool,
}

impl InList {
    /// The non-regex values, sorted in MongoDB's order and without duplicates.
    pub fn values(&self) -> impl ExactSizeIterator<Item = RawBsonRef<'_>> + Clone + '_ {
        (0..self.offsets.len()).map(|i| self.value(i))
    }

    /// The `i`-th value (the buffer holds only documents [`InList::from_values`] wrote).
    fn value(&self, i: usize) -> RawBsonRef<'_> {
        let start = self.offsets[i] as usize;
        let end = self
            .offsets
            .get(i + 1)
            .map_or(self.bytes.len(), |&e| e as usize);
        RawDocument::from_bytes(&self.bytes[start..end])
            .ok()
            .and_then(|d| d.iter().next())
            .and_then(|e| e.ok())
            .map_or(RawBsonRef::Null, |(_, v)| v)
    }

    /// Packs sorted, deduplicated values; `None` when they exceed the buffer's 4 GiB of
    /// offsets (a command is at most 48 MB, so never in practice).
    fn from_values(values: &[RawBsonRef<'_>], regexes: Vec<Regex>) -> Option<InList> {
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(values.len());
        for v in values {
            offsets.push(u32::try_from(bytes.len()).ok()?);
            let mut one = RawDocumentBuf::new();
            one.append(bson::raw::cstr!(""), *v);
            bytes.extend_from_slice(one.as_bytes());
        }
        Some(InList {
            has_null: values.iter().any(|v| matches!(v, RawBsonRef::Null)),
            bytes,
            offsets,
            regexes,
        })
    }

    /// The number of non-regex values.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether there are no non-regex values.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The regular expressions.
    pub fn regexes(&self) -> &[Regex] {
        &self.regexes
    }

    fn contains(&self, v: RawBsonRef<'_>) -> bool {
        let (mut lo, mut hi) = (0, self.offsets.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match compare_values(self.value(mid), v) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return true,
            }
        }
        false
    }
}

/// The operand of `$type`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeSet {
    /// The alias `"number"`: any numeric type.
    pub all_numbers: bool,
    /// BSON type codes (`-1` MinKey … `127` MaxKey; `0` matches a missing field).
    pub codes: Vec<i32>,
}

impl TypeSet {
    fn matches(&self, v: Option<RawBsonRef<'_>>) -> bool {
        let code = match v {
            None => 0,
            Some(v) => type_code(v.element_type()),
        };
        (self.all_numbers && v.is_some_and(|v| TypeClass::of(v) == TypeClass::Number))
            || self.codes.contains(&code)
    }
}

/// Which bit test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    /// `$bitsAllSet`.
    AllSet,
    /// `$bitsAllClear`.
    AllClear,
    /// `$bitsAnySet`.
    AnySet,
    /// `$bitsAnyClear`.
    AnyClear,
}

/// How the bits to test were given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BitMask {
    /// A list of bit positions.
    Positions(Vec<u32>),
    /// A non-negative integer bitmask.
    Number(i64),
    /// A BinData bitmask (byte 0 holds bits 0–7).
    Binary(Vec<u8>),
}

/// A bitwise test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitTest {
    /// The test.
    pub op: BitOp,
    /// The bits.
    pub mask: BitMask,
    /// The bits as a 64-bit mask for numbers (positions above 63 test the sign bit).
    mask64: u64,
}

/// Which document-level operator an [`Extension`] implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtensionKind {
    /// `$expr`.
    Expr,
    /// `$jsonSchema`.
    JsonSchema,
    /// `$where`.
    Where,
    /// `$text`.
    Text,
}

impl ExtensionKind {
    /// The operator's name, e.g. `$expr`.
    pub fn operator(self) -> &'static str {
        match self {
            ExtensionKind::Expr => "$expr",
            ExtensionKind::JsonSchema => "$jsonSchema",
            ExtensionKind::Where => "$where",
            ExtensionKind::Text => "$text",
        }
    }
}

/// A predicate on a whole document, produced by an [`Extensions`].
pub trait DocumentPredicate: fmt::Debug + Send + Sync {
    /// Whether `doc` (the document at the level the operator appeared, i.e. the root) matches.
    fn matches(&self, doc: &RawDocument) -> bool;

    /// Whether `doc` matches, or the evaluation error that fails the whole query (e.g. `$expr`
    /// dividing by zero). The default never fails.
    fn try_matches(&self, doc: &RawDocument) -> Result<bool> {
        Ok(self.matches(doc))
    }
}

/// A document-level operator in a filter.
#[derive(Debug, Clone)]
pub struct Extension {
    /// Which operator.
    pub kind: ExtensionKind,
    /// Its evaluator.
    pub predicate: Arc<dyn DocumentPredicate>,
}

/// Parsers for the document-level operators the filter module does not evaluate itself. The
/// expression evaluator (`$expr`), schema validation, `$where` and text search plug in here.
pub trait Extensions {
    /// Parses the operand of `kind` (already checked to appear at the top level).
    fn parse(
        &self,
        kind: ExtensionKind,
        operand: RawBsonRef<'_>,
    ) -> Result<Arc<dyn DocumentPredicate>>;

    /// Whether `$near`, `$nearSphere` and `$geoNear` may appear (collection validators refuse
    /// them with 5626500 before parsing their operands).
    fn geo_near_allowed(&self) -> bool {
        true
    }
}

/// The default [`Extensions`]: every extension operator is NotImplemented.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoExtensions;

impl Extensions for NoExtensions {
    fn parse(&self, kind: ExtensionKind, _: RawBsonRef<'_>) -> Result<Arc<dyn DocumentPredicate>> {
        Err(QueryError::NotImplemented(format!(
            "{} is not supported yet",
            kind.operator()
        )))
    }
}

/// What a successful match recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatchDetails {
    /// The position, in the first array traversed, of the element that satisfied the last
    /// array-traversing predicate of the top-level conjunction (MongoDB's `elemMatchKey`, used
    /// by the positional `$` operator). Not recorded under `$or`, `$nor` or negations.
    pub elem_match_key: Option<usize>,
}

impl Filter {
    /// Parses a filter document; extension operators are NotImplemented.
    pub fn parse(doc: &RawDocument) -> Result<Filter> {
        Filter::parse_with(doc, &NoExtensions)
    }

    /// Parses a filter document, handing `$expr`, `$jsonSchema`, `$where` and `$text` to `ext`.
    pub fn parse_with(doc: &RawDocument, ext: &dyn Extensions) -> Result<Filter> {
        let mut p = Parser { ext, depth: 0 };
        let root = p.parse_doc(doc, Level::PredicateTop)?;
        check_near_placement(&root)?;
        Ok(Filter { root })
    }

    /// The `$near`/`$nearSphere` of the filter, with its path.
    pub fn near(&self) -> Option<(&FieldPath, &Arc<NearQuery>)> {
        let top: &[Expr] = match &self.root {
            Expr::And(cs) => cs,
            e => std::slice::from_ref(e),
        };
        top.iter().find_map(|e| match e {
            Expr::Path(PathExpr {
                path,
                pred: Predicate::Near(n),
            }) => Some((path, n)),
            _ => None,
        })
    }

    /// The distance a `$near` filter orders `doc` by: the nearest of the values its path
    /// reaches (`None` without a `$near`, or when no value is a location).
    pub fn near_distance(&self, doc: &RawDocument) -> Option<f64> {
        let (path, near) = self.near()?;
        near.nearest(doc, path).map(|(d, _)| d)
    }

    /// A filter for an already-built tree.
    pub fn from_expr(root: Expr) -> Filter {
        Filter { root }
    }

    /// The parsed tree (a lone predicate is the root itself, several form an `And`).
    pub fn expr(&self) -> &Expr {
        &self.root
    }

    /// True when the filter matches every document (`{}` or only `$comment`).
    pub fn is_empty(&self) -> bool {
        matches!(&self.root, Expr::And(c) if c.is_empty())
    }

    /// The top-level fields the filter reads, or `None` when it needs the whole document
    /// (`$expr`, `$where`…). A document holding only these fields (plus `_id`) matches exactly
    /// when the whole document does, so a targeted update can read just these subtrees.
    pub fn top_level_fields(&self) -> Option<Vec<String>> {
        fn walk(e: &Expr, out: &mut Vec<String>) -> bool {
            match e {
                Expr::And(v) | Expr::Or(v) | Expr::Nor(v) => v.iter().all(|c| walk(c, out)),
                Expr::Not(c) => walk(c, out),
                Expr::AlwaysTrue | Expr::AlwaysFalse => true,
                Expr::Path(p) => {
                    let head = p.path.head().to_string();
                    if !out.contains(&head) {
                        out.push(head);
                    }
                    true
                }
                Expr::Extension(_) => false,
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out).then_some(out)
    }

    /// Whether `doc` matches (an evaluation error counts as no match; see
    /// [`Filter::try_matches`]).
    pub fn matches(&self, doc: &RawDocument) -> bool {
        self.root.eval(doc, None).unwrap_or(false)
    }

    /// Whether `doc` matches, or the evaluation error (from an extension such as `$expr`)
    /// that fails the query, as MongoDB does.
    pub fn try_matches(&self, doc: &RawDocument) -> Result<bool> {
        self.root.eval(doc, None)
    }

    /// `Some` with what was recorded when `doc` matches, `None` otherwise.
    pub fn match_details(&self, doc: &RawDocument) -> Option<MatchDetails> {
        self.try_match_details(doc).unwrap_or(None)
    }

    /// [`Filter::match_details`], or the evaluation error that fails the query.
    pub fn try_match_details(&self, doc: &RawDocument) -> Result<Option<MatchDetails>> {
        let mut key = None;
        Ok(self
            .root
            .eval(doc, Some(&mut key))?
            .then_some(MatchDetails {
                elem_match_key: key,
            }))
    }

    /// The array position the positional `$` operator refers to: `Some` when `doc` matches
    /// and an array traversal recorded a position (see [`MatchDetails::elem_match_key`]).
    pub fn matches_array_position(&self, doc: &RawDocument) -> Option<usize> {
        self.match_details(doc).and_then(|d| d.elem_match_key)
    }

    /// If the filter is exactly one equality on `_id` (`{_id: v}` or `{_id: {$eq: v}}`,
    /// `$comment` aside), that value.
    pub fn id_equality(&self) -> Option<RawBson> {
        match &self.root {
            Expr::Path(PathExpr {
                path,
                pred: Predicate::Cmp(CmpOp::Eq, v),
            }) if path.as_str() == "_id" => Some(v.clone()),
            _ => None,
        }
    }

    /// The equality predicates of the top-level conjunction (nested `$and`s included), in
    /// filter order: what an upsert copies into the document it inserts.
    pub fn equality_fields(&self) -> Vec<(FieldPath, RawBson)> {
        fn walk(e: &Expr, out: &mut Vec<(FieldPath, RawBson)>) {
            match e {
                Expr::And(cs) => cs.iter().for_each(|c| walk(c, out)),
                Expr::Path(PathExpr {
                    path,
                    pred: Predicate::Cmp(CmpOp::Eq, v),
                }) => out.push((path.clone(), v.clone())),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------

impl Expr {
    /// Whether `doc` matches this expression (an evaluation error counts as no match).
    pub fn matches(&self, doc: &RawDocument) -> bool {
        self.eval(doc, None).unwrap_or(false)
    }

    /// Whether a single value matches (MongoDB's `matchesSingleElement`): how the children of
    /// `$elemMatch`'s value form see each array element. `None` is a missing value.
    pub fn matches_value(&self, v: Option<RawBsonRef<'_>>) -> bool {
        match self {
            Expr::And(cs) => cs.iter().all(|c| c.matches_value(v)),
            Expr::Or(cs) => cs.iter().any(|c| c.matches_value(v)),
            Expr::Nor(cs) => !cs.iter().any(|c| c.matches_value(v)),
            Expr::Not(c) => !c.matches_value(v),
            Expr::AlwaysTrue => true,
            Expr::AlwaysFalse => false,
            Expr::Path(p) => p.pred.matches_single(v, &mut None),
            Expr::Extension(_) => false,
        }
    }

    fn eval(&self, doc: &RawDocument, key: Option<&mut Option<usize>>) -> Result<bool> {
        match self {
            Expr::And(cs) => {
                let mut key = key;
                // The array position comes from the last clause that records one, in
                // MongoDB's canonical clause order (it sorts the tree before matching).
                let ordered: Vec<&Expr> = if key.is_some() && cs.len() > 1 {
                    let mut v: Vec<&Expr> = cs.iter().collect();
                    v.sort_by(|a, b| canonical_cmp(a, b));
                    v
                } else {
                    cs.iter().collect()
                };
                for c in ordered {
                    if !c.eval(doc, key.as_deref_mut())? {
                        if let Some(k) = key {
                            *k = None;
                        }
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Expr::Or(cs) => {
                for c in cs {
                    if c.eval(doc, None)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            Expr::Nor(cs) => {
                for c in cs {
                    if c.eval(doc, None)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Expr::Not(c) => Ok(!c.eval(doc, None)?),
            Expr::AlwaysTrue => Ok(true),
            Expr::AlwaysFalse => Ok(false),
            Expr::Path(p) => Ok(p.eval(doc, key)),
            Expr::Extension(e) => e.predicate.try_matches(doc),
        }
    }
}

/// MongoDB's `MatchType` rank of a node (the declaration order of the enum in
/// `matcher/expression.h`), the first key of its canonical sort.
fn match_type_rank(e: &Expr) -> u8 {
    match e {
        Expr::And(_) => 0,
        Expr::Or(_) => 1,
        Expr::Path(p) => match &p.pred {
            Predicate::ElemMatchObject(_) => 2,
            Predicate::ElemMatchValue(_) => 3,
            Predicate::Size(_) => 4,
            Predicate::Cmp(CmpOp::Eq, _) => 5,
            Predicate::Cmp(CmpOp::Lte, _) => 6,
            Predicate::Cmp(CmpOp::Lt, _) => 7,
            Predicate::Cmp(CmpOp::Gt, _) => 8,
            Predicate::Cmp(CmpOp::Gte, _) => 9,
            Predicate::Regex(_) => 10,
            Predicate::Mod { .. } => 11,
            Predicate::Exists => 12,
            Predicate::In(_) => 13,
            Predicate::Bits(b) => match b.op {
                BitOp::AllSet => 14,
                BitOp::AllClear => 15,
                BitOp::AnySet => 16,
                BitOp::AnyClear => 17,
            },
            Predicate::Type(_) => 21,
            Predicate::Geo(_) => 22,
            Predicate::Near(_) => 27,
        },
        Expr::Not(_) => 19,
        Expr::Nor(_) => 20,
        Expr::Extension(x) => match x.kind {
            ExtensionKind::Where => 23,
            ExtensionKind::Expr => 24,
            ExtensionKind::Text => 28,
            ExtensionKind::JsonSchema => 40,
        },
        Expr::AlwaysFalse => 25,
        Expr::AlwaysTrue => 26,
    }
}

/// MongoDB's canonical order of match expressions (`matchExpressionComparator`): by match
/// type, then path (bytewise), then children pairwise, then number of children.
fn canonical_cmp(a: &Expr, b: &Expr) -> std::cmp::Ordering {
    fn path(e: &Expr) -> &str {
        match e {
            Expr::Path(p) => p.path.as_str(),
            _ => "",
        }
    }
    fn children(e: &Expr) -> Vec<&Expr> {
        match e {
            Expr::And(v) | Expr::Or(v) | Expr::Nor(v) => v.iter().collect(),
            Expr::Not(c) => vec![&**c],
            Expr::Path(PathExpr {
                pred: Predicate::ElemMatchObject(c),
                ..
            }) => vec![&**c],
            Expr::Path(PathExpr {
                pred: Predicate::ElemMatchValue(v),
                ..
            }) => v.iter().collect(),
            _ => Vec::new(),
        }
    }
    match_type_rank(a)
        .cmp(&match_type_rank(b))
        .then_with(|| path(a).as_bytes().cmp(path(b).as_bytes()))
        .then_with(|| {
            let (ca, cb) = (children(a), children(b));
            ca.iter()
                .zip(cb.iter())
                .map(|(x, y)| canonical_cmp(x, y))
                .find(|o| o.is_ne())
                .unwrap_or_else(|| ca.len().cmp(&cb.len()))
        })
}

impl PathExpr {
    fn eval(&self, doc: &RawDocument, key: Option<&mut Option<usize>>) -> bool {
        let mut hit: Option<Option<usize>> = None;
        path::visit(doc, &self.path, self.pred.leaf_arrays(), |pv| {
            let mut inner = None;
            if self.pred.matches_single(pv.value, &mut inner) {
                hit = Some(pv.array_index.or(inner));
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        match hit {
            Some(k) => {
                if let (Some(key), Some(k)) = (key, k) {
                    *key = Some(k);
                }
                true
            }
            None => false,
        }
    }
}

impl Predicate {
    /// How arrays at the end of the path are presented to this predicate.
    pub fn leaf_arrays(&self) -> LeafArrays {
        match self {
            Predicate::Size(_) | Predicate::ElemMatchObject(_) | Predicate::ElemMatchValue(_) => {
                LeafArrays::Whole
            }
            _ => LeafArrays::Traverse,
        }
    }

    /// Whether one value (or a missing one) satisfies the predicate; `$elemMatch` stores the
    /// matching element's position in `key`.
    pub fn matches_single(&self, v: Option<RawBsonRef<'_>>, key: &mut Option<usize>) -> bool {
        match self {
            Predicate::Cmp(op, rhs) => compare(*op, v, rhs.as_raw_bson_ref()),
            Predicate::In(list) => {
                if list.has_null && matches!(v, None | Some(RawBsonRef::Undefined)) {
                    return true;
                }
                let Some(v) = v else { return false };
                list.contains(v) || list.regexes.iter().any(|r| regex_matches(r, v))
            }
            Predicate::Regex(r) => v.is_some_and(|v| regex_matches(r, v)),
            Predicate::Exists => v.is_some(),
            Predicate::Type(t) => t.matches(v),
            Predicate::Mod { divisor, remainder } => v
                .and_then(mod_dividend)
                .is_some_and(|d| d.checked_rem(*divisor).unwrap_or(0) == *remainder),
            Predicate::Bits(t) => v.is_some_and(|v| t.matches(v)),
            Predicate::Geo(g) => v.is_some_and(|v| g.matches(v)),
            Predicate::Near(n) => v.is_some_and(|v| n.matches(v)),
            Predicate::Size(n) => match v {
                Some(RawBsonRef::Array(a)) => array_len(a) == *n,
                _ => false,
            },
            Predicate::ElemMatchObject(sub) => {
                let Some(RawBsonRef::Array(a)) = v else {
                    return false;
                };
                for (idx, el) in a.into_iter().enumerate() {
                    let Ok(el) = el else { break };
                    let d = match el {
                        RawBsonRef::Document(d) => d,
                        RawBsonRef::Array(inner) => match RawDocument::from_bytes(inner.as_bytes())
                        {
                            Ok(d) => d,
                            Err(_) => continue,
                        },
                        _ => continue,
                    };
                    if sub.eval(d, None).unwrap_or(false) {
                        *key = Some(idx);
                        return true;
                    }
                }
                false
            }
            Predicate::ElemMatchValue(subs) => {
                let Some(RawBsonRef::Array(a)) = v else {
                    return false;
                };
                for (idx, el) in a.into_iter().enumerate() {
                    let Ok(el) = el else { break };
                    if subs.iter().all(|s| s.matches_value(Some(el))) {
                        *key = Some(idx);
                        return true;
                    }
                }
                false
            }
        }
    }
}

fn array_len(a: &RawArray) -> i64 {
    let mut n = 0i64;
    for el in a {
        if el.is_err() {
            break;
        }
        n += 1;
    }
    n
}

/// MongoDB's `ComparisonMatchExpressionBase::compare`.
fn compare(op: CmpOp, v: Option<RawBsonRef<'_>>, rhs: RawBsonRef<'_>) -> bool {
    let lc = v.map_or(TypeClass::Missing, TypeClass::of);
    let rc = TypeClass::of(rhs);
    let inclusive = matches!(op, CmpOp::Eq | CmpOp::Lte | CmpOp::Gte);
    if lc != rc {
        // Null and missing/undefined are the same for comparisons.
        if matches!(
            (lc, rc),
            (TypeClass::Missing, TypeClass::Null) | (TypeClass::Null, TypeClass::Missing)
        ) {
            return inclusive;
        }
        return matches!(
            (rhs, op),
            (RawBsonRef::MaxKey, CmpOp::Lt | CmpOp::Lte)
                | (RawBsonRef::MinKey, CmpOp::Gt | CmpOp::Gte)
        );
    }
    let Some(v) = v else { return inclusive };
    if lc == TypeClass::Number {
        let (a, b) = (is_nan(v), is_nan(rhs));
        if a || b {
            return a && b && inclusive;
        }
    }
    let ord = compare_values(v, rhs);
    match op {
        CmpOp::Eq => ord == Ordering::Equal,
        CmpOp::Lt => ord == Ordering::Less,
        CmpOp::Lte => ord != Ordering::Greater,
        CmpOp::Gt => ord == Ordering::Greater,
        CmpOp::Gte => ord != Ordering::Less,
    }
}

fn is_nan(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Double(d) => d.is_nan(),
        RawBsonRef::Decimal128(d) => Decimal::from_decimal128(d) == Decimal::NaN,
        _ => false,
    }
}

fn regex_matches(r: &Regex, v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::String(s) | RawBsonRef::Symbol(s) => r.is_match(s),
        RawBsonRef::RegularExpression(x) => {
            x.pattern.as_str() == r.pattern() && x.options.as_str() == r.options()
        }
        _ => false,
    }
}

/// 2^63 as a double.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// The integer a `$mod` dividend stands for (`ModMatchExpression`): doubles and decimals
/// truncate; non-finite or out-of-range values match nothing.
fn mod_dividend(v: RawBsonRef<'_>) -> Option<i64> {
    match v {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        RawBsonRef::Double(d) => {
            if !d.is_finite() || !(-TWO_POW_63..TWO_POW_63).contains(&d) {
                None
            } else {
                Some(d.trunc() as i64)
            }
        }
        RawBsonRef::Decimal128(d) => {
            decimal_to_i64(Decimal::from_decimal128(d), Rounding::Truncate)
        }
        _ => None,
    }
}

impl BitTest {
    fn matches(&self, v: RawBsonRef<'_>) -> bool {
        if let RawBsonRef::Binary(b) = v {
            return self.test_binary(&bin_data(&b));
        }
        let Some(x) = bits_value(v) else { return false };
        let x = x as u64;
        let m = self.mask64;
        match self.op {
            BitOp::AllSet => x & m == m,
            BitOp::AllClear => !x & m == m,
            BitOp::AnySet => x & m != 0,
            BitOp::AnyClear => !x & m != 0,
        }
    }

    /// `performBitTest` on BinData: bits beyond the data are clear.
    fn test_binary(&self, data: &[u8]) -> bool {
        let is_set = |p: u64| -> bool {
            let byte = usize::try_from(p / 8).ok().and_then(|i| data.get(i));
            byte.is_some_and(|b| b & (1u8 << (p % 8)) != 0)
        };
        // Whether one bit decides the answer early: a clear bit for ALL_SET, a set bit for
        // ALL_CLEAR, and the opposite for the ANY tests.
        let decisive = |set: bool| -> bool {
            match self.op {
                BitOp::AllSet => !set,
                BitOp::AllClear => set,
                BitOp::AnySet => set,
                BitOp::AnyClear => !set,
            }
        };
        let any = matches!(self.op, BitOp::AnySet | BitOp::AnyClear);
        let mut check = |p: u64| decisive(is_set(p));
        let decided = match &self.mask {
            BitMask::Positions(ps) => ps.iter().any(|&p| check(u64::from(p))),
            BitMask::Number(n) => (0..64u64)
                .filter(|i| (*n as u64) >> i & 1 == 1)
                .any(&mut check),
            BitMask::Binary(bytes) => bytes.iter().enumerate().any(|(i, b)| {
                (0..8u64)
                    .filter(|j| b >> j & 1 == 1)
                    .any(|j| check(i as u64 * 8 + j))
            }),
        };
        // Decided early: ANY succeeded / ALL failed. Otherwise the reverse.
        decided == any
    }
}

/// The bytes MongoDB's `BSONElement::binData` exposes: for the old binary subtype 2 they
/// include the inner 4-byte length that the bson crate strips.
fn bin_data<'a>(b: &bson::RawBinaryRef<'a>) -> std::borrow::Cow<'a, [u8]> {
    if b.subtype == bson::spec::BinarySubtype::BinaryOld {
        let len = i32::try_from(b.bytes.len()).unwrap_or(i32::MAX);
        let mut v = len.to_le_bytes().to_vec();
        v.extend_from_slice(b.bytes);
        std::borrow::Cow::Owned(v)
    } else {
        std::borrow::Cow::Borrowed(b.bytes)
    }
}

/// The 64-bit two's-complement value of a number for bit tests (`BitTestMatchExpression`):
/// doubles must be integral and in range; decimals round half-even (an unrepresentable
/// decimal is LLONG_MIN, as MongoDB's conversion returns).
fn bits_value(v: RawBsonRef<'_>) -> Option<i64> {
    match v {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        RawBsonRef::Double(d) => {
            if d.is_nan() || !(-TWO_POW_63..TWO_POW_63).contains(&d) || d.fract() != 0.0 {
                None
            } else {
                Some(d as i64)
            }
        }
        RawBsonRef::Decimal128(d) => Some(
            decimal_to_i64(Decimal::from_decimal128(d), Rounding::HalfEven).unwrap_or(i64::MIN),
        ),
        _ => None,
    }
}

/// How a decimal becomes an integer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rounding {
    Truncate,
    HalfEven,
    Exact,
}

/// A Decimal128 as an i64, or `None` when NaN, infinite, out of range, or inexact under
/// [`Rounding::Exact`].
fn decimal_to_i64(d: Decimal, mode: Rounding) -> Option<i64> {
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
    let magnitude: u128 = if exponent >= 0 {
        let scale = 10u128.checked_pow(u32::try_from(exponent).ok()?)?;
        coefficient.checked_mul(scale)?
    } else {
        let k = exponent.unsigned_abs();
        match 10u128.checked_pow(k) {
            // 10^k exceeds every coefficient: the value is below 1 (and below 1/2).
            None => match mode {
                Rounding::Exact => return None,
                _ => 0,
            },
            Some(p) => {
                let (q, r) = (coefficient / p, coefficient % p);
                match mode {
                    Rounding::Truncate => q,
                    Rounding::Exact if r != 0 => return None,
                    Rounding::Exact => q,
                    Rounding::HalfEven => {
                        let twice = r.checked_mul(2)?;
                        if twice > p || (twice == p && q % 2 == 1) {
                            q + 1
                        } else {
                            q
                        }
                    }
                }
            }
        }
    };
    if negative {
        if magnitude > 1u128 << 63 {
            return None;
        }
        Some(
            i128::try_from(magnitude)
                .ok()
                .map(|m| -m)?
                .try_into()
                .ok()?,
        )
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// The BSON type code of an element type (MinKey −1, MaxKey 127).
fn type_code(t: ElementType) -> i32 {
    i32::from(t as u8 as i8)
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// MongoDB's canonical-query checks for `$near`: at most one, and only in the top-level
/// conjunction.
fn check_near_placement(root: &Expr) -> Result<()> {
    fn count(e: &Expr) -> usize {
        match e {
            Expr::And(cs) | Expr::Or(cs) | Expr::Nor(cs) => cs.iter().map(count).sum(),
            Expr::Not(c) => count(c),
            Expr::Path(PathExpr { pred, .. }) => match pred {
                Predicate::Near(_) => 1,
                Predicate::ElemMatchObject(c) => count(c),
                Predicate::ElemMatchValue(cs) => cs.iter().map(count).sum(),
                _ => 0,
            },
            _ => 0,
        }
    }
    let total = count(root);
    if total == 0 {
        return Ok(());
    }
    if total > 1 {
        return Err(bad("Too many geoNear expressions"));
    }
    let top = match root {
        Expr::And(cs) => cs
            .iter()
            .filter(|c| {
                matches!(
                    c,
                    Expr::Path(PathExpr {
                        pred: Predicate::Near(_),
                        ..
                    })
                )
            })
            .count(),
        Expr::Path(PathExpr {
            pred: Predicate::Near(_),
            ..
        }) => 1,
        _ => 0,
    };
    if top != 1 {
        return Err(bad("geoNear must be top-level expr"));
    }
    Ok(())
}

/// Where the parser is (MongoDB's `DocumentParseLevel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    /// The filter document itself.
    PredicateTop,
    /// Children of top-level `$and`/`$or`/`$nor` and path operators: still the whole document.
    UserDocTop,
    /// Inside `$elemMatch`: array elements.
    SubDocument,
}

struct Parser<'e> {
    ext: &'e dyn Extensions,
    depth: usize,
}

/// Path-accepting operators (MongoDB's `parsePathAcceptingKeyword` table, public part).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keyword {
    Cmp(CmpOp),
    Ne,
    In,
    Nin,
    Size,
    All,
    Exists,
    Mod,
    Type,
    Regex,
    Options,
    ElemMatch,
    GeoNear,
    GeoShape,
    Bits(BitOp),
}

fn keyword(name: &str) -> Option<Keyword> {
    Some(match name {
        "$lt" => Keyword::Cmp(CmpOp::Lt),
        "$lte" => Keyword::Cmp(CmpOp::Lte),
        "$gt" => Keyword::Cmp(CmpOp::Gt),
        "$gte" => Keyword::Cmp(CmpOp::Gte),
        "$eq" => Keyword::Cmp(CmpOp::Eq),
        "$ne" => Keyword::Ne,
        "$in" => Keyword::In,
        "$nin" => Keyword::Nin,
        "$size" => Keyword::Size,
        "$all" => Keyword::All,
        "$exists" => Keyword::Exists,
        "$mod" => Keyword::Mod,
        "$type" => Keyword::Type,
        "$regex" => Keyword::Regex,
        "$options" => Keyword::Options,
        "$elemMatch" => Keyword::ElemMatch,
        "$near" | "$geoNear" | "$nearSphere" => Keyword::GeoNear,
        "$within" | "$geoWithin" | "$geoIntersects" => Keyword::GeoShape,
        "$bitsAllSet" => Keyword::Bits(BitOp::AllSet),
        "$bitsAllClear" => Keyword::Bits(BitOp::AllClear),
        "$bitsAnySet" => Keyword::Bits(BitOp::AnySet),
        "$bitsAnyClear" => Keyword::Bits(BitOp::AnyClear),
        _ => return None,
    })
}

/// Names (without `$`) handled by the top-level ("pathless") parser.
fn is_pathless(name: &str) -> bool {
    matches!(
        name,
        "and"
            | "or"
            | "nor"
            | "comment"
            | "alwaysTrue"
            | "alwaysFalse"
            | "expr"
            | "jsonSchema"
            | "where"
            | "text"
            | "sampleRate"
            | "id"
            | "ref"
            | "db"
    )
}

/// MongoDB's `isDBRefDocument`.
fn is_dbref(d: &RawDocument, allow_incomplete: bool) -> bool {
    let (mut r, mut i, mut db) = (false, false, false);
    for el in d.iter() {
        let Ok((k, _)) = el else { break };
        match k.as_str() {
            "$ref" => r = true,
            "$id" => i = true,
            "$db" => db = true,
            _ => {}
        }
        if r && i {
            break;
        }
    }
    if allow_incomplete {
        r || i || db
    } else {
        r && i
    }
}

/// The first key of a document, if any.
fn first_key(d: &RawDocument) -> Option<&str> {
    d.iter()
        .next()
        .and_then(|e| e.ok())
        .map(|(k, _)| k.as_str())
}

/// MongoDB's `isExpressionDocument`: a non-empty document whose first key starts with `$`
/// and that is not a DBRef.
fn expression_document(v: RawBsonRef<'_>, allow_incomplete_dbref: bool) -> Option<&RawDocument> {
    let RawBsonRef::Document(d) = v else {
        return None;
    };
    let first = first_key(d)?;
    (first.starts_with('$') && !is_dbref(d, allow_incomplete_dbref)).then_some(d)
}

fn bad(msg: impl Into<String>) -> QueryError {
    QueryError::BadValue(msg.into())
}

fn malformed(e: impl fmt::Display) -> QueryError {
    QueryError::BadValue(format!("invalid BSON in filter: {e}"))
}

/// `name: value` as MongoDB prints a BSON element.
fn element(name: &str, v: RawBsonRef<'_>) -> String {
    format!("{name}: {}", display::value(v))
}

fn collapse(mut children: Vec<Expr>) -> Expr {
    if children.len() == 1
        && let Some(only) = children.pop()
    {
        return only;
    }
    Expr::And(children)
}

fn path_expr(path: &str, pred: Predicate) -> Expr {
    Expr::Path(PathExpr {
        path: FieldPath::new(path),
        pred,
    })
}

impl Parser<'_> {
    fn enter(&mut self, at: &RawDocument) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(bad(format!(
                "exceeded maximum query tree depth of {MAX_NESTING} at {}",
                display::document(at)
            )));
        }
        Ok(())
    }

    /// MongoDB's `parse`: a filter document (top level, `$and` entries, `$elemMatch` objects).
    fn parse_doc(&mut self, doc: &RawDocument, level: Level) -> Result<Expr> {
        self.enter(doc)?;
        let next_level = if level == Level::PredicateTop {
            Level::UserDocTop
        } else {
            level
        };
        let mut children = Vec::new();
        for el in doc.iter() {
            let (k, v) = el.map_err(malformed)?;
            let name = k.as_str();
            if let Some(op) = name.strip_prefix('$') {
                if let Some(e) = self.parse_pathless(name, op, v, level)? {
                    children.push(e);
                }
                continue;
            }
            if let Some(sub) = expression_document(v, false) {
                self.parse_sub(name, sub, &mut children, next_level)?;
                continue;
            }
            if let RawBsonRef::RegularExpression(re) = v {
                let r = Regex::new(re.pattern.as_str(), re.options.as_str())?;
                children.push(path_expr(name, Predicate::Regex(r)));
                continue;
            }
            children.push(comparison(name, CmpOp::Eq, v)?);
        }
        self.depth -= 1;
        Ok(collapse(children))
    }

    fn parse_pathless(
        &mut self,
        full: &str,
        op: &str,
        v: RawBsonRef<'_>,
        level: Level,
    ) -> Result<Option<Expr>> {
        let top_only = |what: &str| -> Result<()> {
            if level == Level::SubDocument {
                Err(bad(format!(
                    "{what} can only be applied to the top-level document"
                )))
            } else {
                Ok(())
            }
        };
        let e = match op {
            "and" | "or" | "nor" => self.parse_tree(full, op, v, level)?,
            "comment" => return Ok(None),
            "alwaysTrue" | "alwaysFalse" => {
                let n = integer_to_long(full, v).map_err(QueryError::FailedToParse)?;
                if n != 1 {
                    return Err(QueryError::FailedToParse(format!(
                        "{full} must be an integer value of 1"
                    )));
                }
                if op == "alwaysTrue" {
                    Expr::AlwaysTrue
                } else {
                    Expr::AlwaysFalse
                }
            }
            "expr" => {
                top_only("$expr")?;
                self.extension(ExtensionKind::Expr, v)?
            }
            "where" => {
                top_only("$where")?;
                self.extension(ExtensionKind::Where, v)?
            }
            "text" => {
                top_only("$text")?;
                self.extension(ExtensionKind::Text, v)?
            }
            "jsonSchema" => {
                if !matches!(v, RawBsonRef::Document(_)) {
                    return Err(QueryError::TypeMismatch(
                        "$jsonSchema must be an object".into(),
                    ));
                }
                self.extension(ExtensionKind::JsonSchema, v)?
            }
            "sampleRate" => sample_rate(v)?,
            // DBRef fields in an `$elemMatch` object: plain equality on the `$`-named field.
            "id" | "ref" | "db" => {
                if matches!(v, RawBsonRef::Undefined) {
                    return Err(bad("cannot compare to undefined"));
                }
                path_expr(full, Predicate::Cmp(CmpOp::Eq, v.into()))
            }
            _ => {
                return Err(bad(format!(
                    "unknown top level operator: {full}. If you have a field name that starts \
                     with a '$' symbol, consider using $getField or $setField."
                )));
            }
        };
        Ok(Some(e))
    }

    fn extension(&mut self, kind: ExtensionKind, v: RawBsonRef<'_>) -> Result<Expr> {
        let predicate = self.ext.parse(kind, v)?;
        Ok(Expr::Extension(Extension { kind, predicate }))
    }

    /// `$and`, `$or`, `$nor`.
    fn parse_tree(
        &mut self,
        full: &str,
        op: &str,
        v: RawBsonRef<'_>,
        level: Level,
    ) -> Result<Expr> {
        let RawBsonRef::Array(arr) = v else {
            return Err(bad(format!("{full} must be an array")));
        };
        let mut children = Vec::new();
        for el in arr {
            let el = el.map_err(malformed)?;
            let RawBsonRef::Document(d) = el else {
                return Err(bad("$or/$and/$nor entries need to be full objects"));
            };
            children.push(self.parse_doc(d, level)?);
        }
        if children.is_empty() {
            return Err(bad("$and/$or/$nor must be a nonempty array"));
        }
        Ok(match op {
            "and" => Expr::And(children),
            "or" => Expr::Or(children),
            _ => Expr::Nor(children),
        })
    }

    /// MongoDB's `parseSub`: the operators of `{path: {$op: …, …}}`.
    fn parse_sub(
        &mut self,
        path: &str,
        sub: &RawDocument,
        out: &mut Vec<Expr>,
        level: Level,
    ) -> Result<()> {
        self.enter(sub)?;
        // MongoDB hands a leading `$near` the whole document; where it is not allowed, that
        // is refused first.
        if let Some(first) = first_key(sub)
            && matches!(first, "$near" | "$nearSphere" | "$geoNear")
            && !self.ext.geo_near_allowed()
        {
            return Err(QueryError::Location(
                5626500,
                "$geoNear, $near, and $nearSphere are not allowed in this context".into(),
            ));
        }
        if let Some(first) = first_key(sub)
            && matches!(first, "$near" | "$nearSphere" | "$geoNear")
        {
            let q = NearQuery::parse(sub).map_err(|(code, m)| {
                if code == 2 {
                    QueryError::BadValue(m)
                } else {
                    QueryError::Location(code, m)
                }
            })?;
            out.push(path_expr(path, Predicate::Near(Arc::new(q))));
            self.depth -= 1;
            return Ok(());
        }
        for el in sub.iter() {
            let (k, v) = el.map_err(malformed)?;
            if let Some(e) = self.parse_sub_field(sub, path, k.as_str(), v, level)? {
                out.push(e);
            }
        }
        self.depth -= 1;
        Ok(())
    }

    fn parse_sub_field(
        &mut self,
        context: &RawDocument,
        path: &str,
        name: &str,
        v: RawBsonRef<'_>,
        level: Level,
    ) -> Result<Option<Expr>> {
        if name == "$not" {
            return self.parse_not(path, v, level).map(Some);
        }
        let Some(kw) = keyword(name) else {
            if name == "$where" {
                return Err(bad("$where cannot be applied to a field"));
            }
            return Err(bad(format!("unknown operator: {name}")));
        };
        let e = match kw {
            Keyword::Cmp(op) => comparison(path, op, v)?,
            Keyword::Ne => {
                if matches!(v, RawBsonRef::RegularExpression(_)) {
                    return Err(bad("Can't have regex as arg to $ne."));
                }
                Expr::Not(Box::new(comparison(path, CmpOp::Eq, v)?))
            }
            Keyword::In => path_expr(path, Predicate::In(parse_in(v, "$in")?)),
            Keyword::Nin => Expr::Not(Box::new(path_expr(
                path,
                Predicate::In(parse_in(v, "$nin")?),
            ))),
            Keyword::Size => path_expr(path, Predicate::Size(parse_size(v)?)),
            Keyword::Exists => {
                let e = path_expr(path, Predicate::Exists);
                if true_value(v) {
                    e
                } else {
                    Expr::Not(Box::new(e))
                }
            }
            Keyword::Type => path_expr(path, Predicate::Type(parse_type(path, v)?)),
            Keyword::Mod => path_expr(path, parse_mod(v)?),
            Keyword::Options => {
                if context
                    .iter()
                    .flatten()
                    .any(|(k, _)| k.as_str() == "$regex")
                {
                    return Ok(None);
                }
                return Err(bad("$options needs a $regex"));
            }
            Keyword::Regex => path_expr(path, Predicate::Regex(parse_regex_document(context)?)),
            Keyword::ElemMatch => self.parse_elem_match(path, v)?,
            Keyword::All => self.parse_all(path, v)?,
            Keyword::GeoNear => {
                return Err(bad(format!(
                    "near must be first in: {}",
                    display::document(context)
                )));
            }
            Keyword::GeoShape => {
                let wrapped = format!("{{ {} }}", element(name, v));
                let g = GeoMatch::parse(name, v, &wrapped).map_err(QueryError::BadValue)?;
                path_expr(path, Predicate::Geo(Arc::new(g)))
            }
            Keyword::Bits(op) => path_expr(path, Predicate::Bits(parse_bits(path, name, op, v)?)),
        };
        Ok(Some(e))
    }

    fn parse_not(&mut self, path: &str, v: RawBsonRef<'_>, level: Level) -> Result<Expr> {
        if let RawBsonRef::RegularExpression(re) = v {
            let r = Regex::new(re.pattern.as_str(), re.options.as_str())?;
            return Ok(Expr::Not(Box::new(path_expr(path, Predicate::Regex(r)))));
        }
        let RawBsonRef::Document(d) = v else {
            return Err(bad("$not needs a regex or a document"));
        };
        if d.is_empty() {
            return Err(bad("$not cannot be empty"));
        }
        let mut children = Vec::new();
        self.parse_sub(path, d, &mut children, level)?;
        Ok(Expr::Not(Box::new(Expr::And(children))))
    }

    fn parse_elem_match(&mut self, path: &str, v: RawBsonRef<'_>) -> Result<Expr> {
        let RawBsonRef::Document(obj) = v else {
            return Err(bad("$elemMatch needs an Object"));
        };
        let value_form = expression_document(v, true)
            .and_then(first_key)
            .and_then(|k| k.strip_prefix('$'))
            .is_some_and(|k| !is_pathless(k));
        let pred = if value_form {
            let mut children = Vec::new();
            self.parse_sub("", obj, &mut children, Level::SubDocument)?;
            Predicate::ElemMatchValue(children)
        } else {
            Predicate::ElemMatchObject(Box::new(self.parse_doc(obj, Level::SubDocument)?))
        };
        Ok(path_expr(path, pred))
    }

    fn parse_all(&mut self, path: &str, v: RawBsonRef<'_>) -> Result<Expr> {
        let RawBsonRef::Array(arr) = v else {
            return Err(bad("$all needs an array"));
        };
        let mut children = Vec::new();
        let first = arr.into_iter().next().and_then(|e| e.ok());
        if first.and_then(elem_match_operand).is_some() {
            for el in arr {
                let el = el.map_err(malformed)?;
                let Some(inner) = elem_match_operand(el) else {
                    return Err(bad("$all/$elemMatch has to be consistent"));
                };
                children.push(self.parse_elem_match(path, inner)?);
            }
            return Ok(Expr::And(children));
        }
        for el in arr {
            let el = el.map_err(malformed)?;
            match el {
                RawBsonRef::RegularExpression(re) => {
                    let r = Regex::new(re.pattern.as_str(), re.options.as_str())?;
                    children.push(path_expr(path, Predicate::Regex(r)));
                }
                RawBsonRef::Document(d) if first_key(d).and_then(keyword).is_some() => {
                    return Err(bad("no $ expressions in $all"));
                }
                _ => {
                    if matches!(el, RawBsonRef::Undefined) {
                        return Err(bad("cannot compare to undefined"));
                    }
                    children.push(path_expr(path, Predicate::Cmp(CmpOp::Eq, el.into())));
                }
            }
        }
        if children.is_empty() {
            return Ok(Expr::AlwaysFalse);
        }
        Ok(Expr::And(children))
    }
}

/// The operand of `{$elemMatch: operand}` when `e` is such a document.
fn elem_match_operand<'a>(e: RawBsonRef<'a>) -> Option<RawBsonRef<'a>> {
    let RawBsonRef::Document(d) = e else {
        return None;
    };
    let (k, inner) = d.iter().next()?.ok()?;
    (k.as_str() == "$elemMatch").then_some(inner)
}

/// An equality or ordering comparison (`parseComparison` plus the constructor's checks).
fn comparison(path: &str, op: CmpOp, v: RawBsonRef<'_>) -> Result<Expr> {
    if matches!(v, RawBsonRef::Undefined) {
        return Err(bad("cannot compare to undefined"));
    }
    if op != CmpOp::Eq && matches!(v, RawBsonRef::RegularExpression(_)) {
        return Err(bad(format!(
            "Can't have RegEx as arg to predicate over field '{path}'."
        )));
    }
    Ok(path_expr(path, Predicate::Cmp(op, v.into())))
}

fn parse_in(v: RawBsonRef<'_>, op: &str) -> Result<InList> {
    let RawBsonRef::Array(arr) = v else {
        return Err(bad(format!("{op} needs an array")));
    };
    let mut values: Vec<RawBsonRef<'_>> = Vec::new();
    let mut regexes = Vec::new();
    for el in arr {
        let el = el.map_err(malformed)?;
        if expression_document(el, false).is_some() {
            return Err(bad("cannot nest $ under $in"));
        }
        if let RawBsonRef::RegularExpression(re) = el {
            regexes.push(Regex::new(re.pattern.as_str(), re.options.as_str())?);
        } else {
            values.push(el);
        }
    }
    if values.iter().any(|v| matches!(v, RawBsonRef::Undefined)) {
        return Err(bad("InMatchExpression equality cannot be undefined"));
    }
    values.sort_by(|a, b| compare_values(*a, *b));
    values.dedup_by(|a, b| compare_values(*a, *b).is_eq());
    InList::from_values(&values, regexes).ok_or_else(|| bad(format!("{op} array is too large")))
}

fn parse_size(v: RawBsonRef<'_>) -> Result<i64> {
    let n = match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => {
            if i32::try_from(i).is_err() {
                return Err(bad("$size must be representable as a 32-bit integer"));
            }
            i
        }
        RawBsonRef::Double(d) => {
            // `numberInt() == numberDouble()`, with x86's conversion of out-of-range values.
            let i = if d.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&d) {
                i32::MIN
            } else {
                d as i32
            };
            if f64::from(i) != d {
                return Err(bad("$size must be a whole number"));
            }
            i64::from(i)
        }
        _ => return Err(bad("$size needs a number")),
    };
    if n < 0 {
        return Err(bad("$size may not be negative"));
    }
    Ok(n)
}

/// `BSONElement::trueValue`.
fn true_value(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Boolean(b) => b,
        RawBsonRef::Int32(i) => i != 0,
        RawBsonRef::Int64(i) => i != 0,
        RawBsonRef::Double(d) => d != 0.0,
        RawBsonRef::Decimal128(d) => !matches!(
            Decimal::from_decimal128(d),
            Decimal::Finite { coefficient: 0, .. }
        ),
        RawBsonRef::Null | RawBsonRef::Undefined => false,
        _ => true,
    }
}

fn as_f64(v: RawBsonRef<'_>) -> f64 {
    match v {
        RawBsonRef::Int32(i) => f64::from(i),
        RawBsonRef::Int64(i) => i as f64,
        RawBsonRef::Double(d) => d,
        RawBsonRef::Decimal128(d) => d.to_string().parse().unwrap_or(f64::NAN),
        _ => 0.0,
    }
}

/// `parseIntegerElementToLong`: the error is the message (FailedToParse in MongoDB).
fn integer_to_long(name: &str, v: RawBsonRef<'_>) -> std::result::Result<i64, String> {
    match v {
        RawBsonRef::Int32(i) => Ok(i64::from(i)),
        RawBsonRef::Int64(i) => Ok(i),
        RawBsonRef::Double(d) => {
            if d.is_nan() {
                Err(format!(
                    "Expected an integer, but found NaN in: {}",
                    element(name, v)
                ))
            } else if !(-TWO_POW_63..TWO_POW_63).contains(&d) {
                Err(format!(
                    "Cannot represent as a 64-bit integer: {}",
                    element(name, v)
                ))
            } else if d.fract() != 0.0 {
                Err(format!("Expected an integer: {}", element(name, v)))
            } else {
                Ok(d as i64)
            }
        }
        RawBsonRef::Decimal128(d) => decimal_to_i64(Decimal::from_decimal128(d), Rounding::Exact)
            .ok_or_else(|| format!("Cannot represent as a 64-bit integer: {}", element(name, v))),
        _ => Err(format!("Expected a number in: {}", element(name, v))),
    }
}

/// `parseIntegerElementToNonNegativeLong`.
fn integer_to_non_negative(name: &str, v: RawBsonRef<'_>) -> std::result::Result<i64, String> {
    let n = integer_to_long(name, v)?;
    if n < 0 {
        return Err(format!(
            "Expected a non-negative number in: {}",
            element(name, v)
        ));
    }
    Ok(n)
}

fn type_alias(name: &str) -> Option<i32> {
    Some(match name {
        "double" => 1,
        "string" => 2,
        "object" => 3,
        "array" => 4,
        "binData" => 5,
        "undefined" => 6,
        "objectId" => 7,
        "bool" => 8,
        "date" => 9,
        "null" => 10,
        "regex" => 11,
        "dbPointer" => 12,
        "javascript" => 13,
        "symbol" => 14,
        "javascriptWithScope" => 15,
        "int" => 16,
        "timestamp" => 17,
        "long" => 18,
        "decimal" => 19,
        "minKey" => -1,
        "maxKey" => 127,
        _ => return None,
    })
}

fn parse_type(path: &str, v: RawBsonRef<'_>) -> Result<TypeSet> {
    let mut set = TypeSet::default();
    match v {
        RawBsonRef::Array(arr) => {
            for el in arr {
                add_type(&mut set, el.map_err(malformed)?)?;
            }
        }
        _ => add_type(&mut set, v)?,
    }
    if !set.all_numbers && set.codes.is_empty() {
        return Err(QueryError::FailedToParse(format!(
            "{path} must match at least one type"
        )));
    }
    Ok(set)
}

fn add_type(set: &mut TypeSet, v: RawBsonRef<'_>) -> Result<()> {
    match v {
        RawBsonRef::String(s) => {
            if s == "number" {
                set.all_numbers = true;
            } else if let Some(code) = type_alias(s) {
                set.codes.push(code);
            } else if s == "missing" {
                return Err(bad(
                    "'missing' is not a legal type name. To query for non-existence of a field, \
                     use {$exists:false}.",
                ));
            } else {
                return Err(bad(format!("Unknown type name alias: {s}")));
            }
        }
        RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => {
            let code = integer_to_long("", v)
                .ok()
                .and_then(|n| i32::try_from(n).ok())
                .filter(|c| matches!(c, -1..=19 | 127));
            match code {
                Some(c) => set.codes.push(c),
                None => {
                    return Err(bad(format!(
                        "Invalid numerical type code: {}",
                        format_g(as_f64(v))
                    )));
                }
            }
        }
        _ => {
            return Err(QueryError::TypeMismatch(
                "type must be represented as a number or a string".into(),
            ));
        }
    }
    Ok(())
}

/// `BSONElement::tryCoerce<long long>` for a `$mod` operand.
fn coerce_mod_operand(v: RawBsonRef<'_>) -> std::result::Result<i64, &'static str> {
    const NAN_INF: &str = "Unable to coerce NaN/Inf to integral type";
    const BOUNDS: &str = "Out of bounds coercing to integral value";
    match v {
        RawBsonRef::Int32(i) => Ok(i64::from(i)),
        RawBsonRef::Int64(i) => Ok(i),
        RawBsonRef::Double(d) => {
            if !d.is_finite() {
                Err(NAN_INF)
            } else if !(-TWO_POW_63..=TWO_POW_63).contains(&d) {
                Err(BOUNDS)
            } else if d >= TWO_POW_63 {
                // Exactly 2^63 passes the bounds check; the x86 conversion yields LLONG_MIN.
                Ok(i64::MIN)
            } else {
                Ok(d.trunc() as i64)
            }
        }
        RawBsonRef::Decimal128(d) => {
            let dec = Decimal::from_decimal128(d);
            if !matches!(dec, Decimal::Finite { .. }) {
                return Err(NAN_INF);
            }
            decimal_to_i64(dec, Rounding::Truncate).ok_or(BOUNDS)
        }
        _ => Err(BOUNDS),
    }
}

fn is_number(v: RawBsonRef<'_>) -> bool {
    matches!(
        v,
        RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_)
    )
}

fn parse_mod(v: RawBsonRef<'_>) -> Result<Predicate> {
    let RawBsonRef::Array(arr) = v else {
        return Err(bad("malformed mod, needs to be an array"));
    };
    let mut it = arr.into_iter();
    let mut next = || it.next().transpose().map_err(malformed);
    let Some(d) = next()? else {
        return Err(bad("malformed mod, not enough elements"));
    };
    if !is_number(d) {
        return Err(bad("malformed mod, divisor not a number"));
    }
    let Some(r) = next()? else {
        return Err(bad("malformed mod, not enough elements"));
    };
    if !is_number(r) {
        return Err(bad("malformed mod, remainder not a number"));
    }
    if next()?.is_some() {
        return Err(bad("malformed mod, too many elements"));
    }
    let divisor = coerce_mod_operand(d).map_err(|m| {
        bad(format!(
            "malformed mod, divisor value is invalid :: caused by :: {m}"
        ))
    })?;
    let remainder = coerce_mod_operand(r).map_err(|m| {
        bad(format!(
            "malformed mod, remainder value is invalid :: caused by :: {m}"
        ))
    })?;
    if divisor == 0 {
        return Err(bad("divisor cannot be 0"));
    }
    Ok(Predicate::Mod { divisor, remainder })
}

/// MongoDB's `parseRegexDocument`: `$regex` and `$options` anywhere in the operator document.
fn parse_regex_document(context: &RawDocument) -> Result<Regex> {
    let mut pattern = "";
    let mut options = "";
    for el in context.iter() {
        let (k, v) = el.map_err(malformed)?;
        match k.as_str() {
            "$regex" => match v {
                RawBsonRef::String(s) => pattern = s,
                RawBsonRef::RegularExpression(re) => {
                    pattern = re.pattern.as_str();
                    if !re.options.as_str().is_empty() {
                        if !options.is_empty() {
                            return Err(QueryError::Location(
                                51074,
                                "options set in both $regex and $options".into(),
                            ));
                        }
                        options = re.options.as_str();
                    }
                }
                _ => return Err(bad("$regex has to be a string")),
            },
            "$options" => {
                let RawBsonRef::String(s) = v else {
                    return Err(bad("$options has to be a string"));
                };
                if !options.is_empty() {
                    return Err(QueryError::Location(
                        51075,
                        "options set in both $regex and $options".into(),
                    ));
                }
                options = s;
            }
            _ => {}
        }
    }
    Regex::new(pattern, options)
}

fn parse_bits(path: &str, name: &str, op: BitOp, v: RawBsonRef<'_>) -> Result<BitTest> {
    let clamp = |p: u64| 1u64 << p.min(63);
    let (mask, mask64) = match v {
        RawBsonRef::Array(arr) => {
            let mut positions = Vec::new();
            for (i, el) in arr.into_iter().enumerate() {
                let el = el.map_err(malformed)?;
                let p = integer_to_non_negative(&i.to_string(), el)
                    .and_then(|n| {
                        u32::try_from(n)
                            .ok()
                            .filter(|n| i32::try_from(*n).is_ok())
                            .ok_or_else(|| {
                                format!(
                                    "Cannot represent {} in an int",
                                    element(&i.to_string(), el)
                                )
                            })
                    })
                    .map_err(|m| bad(format!("Failed to parse bit position. {m}")))?;
                positions.push(p);
            }
            let m = positions.iter().fold(0u64, |m, &p| m | clamp(u64::from(p)));
            (BitMask::Positions(positions), m)
        }
        RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => {
            let n = integer_to_non_negative(name, v).map_err(QueryError::FailedToParse)?;
            (BitMask::Number(n), n as u64)
        }
        RawBsonRef::Binary(b) => {
            let bytes = bin_data(&b);
            let mut m = 0u64;
            for (i, byte) in bytes.iter().enumerate() {
                for j in 0..8u64 {
                    if byte >> j & 1 == 1 {
                        m |= clamp(i as u64 * 8 + j);
                    }
                }
            }
            (BitMask::Binary(bytes.into_owned()), m)
        }
        _ => {
            return Err(bad(format!(
                "{path} takes an Array, a number, or a BinData but received: {}",
                element(name, v)
            )));
        }
    };
    Ok(BitTest { op, mask, mask64 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_format() {
        assert_eq!(format_g(42.0), "42");
        assert_eq!(format_g(-1.123), "-1.123");
        assert_eq!(format_g(123456789.0), "1.23457e+08");
        assert_eq!(format_g(0.0001), "0.0001");
        assert_eq!(format_g(0.00001), "1e-05");
        assert_eq!(format_g(f64::INFINITY), "inf");
    }

    #[test]
    fn decimals() {
        let d = |s: &str| Decimal::from_decimal128(s.parse::<bson::Decimal128>().unwrap());
        assert_eq!(decimal_to_i64(d("42.5"), Rounding::HalfEven), Some(42));
        assert_eq!(decimal_to_i64(d("43.5"), Rounding::HalfEven), Some(44));
        assert_eq!(decimal_to_i64(d("-42.9"), Rounding::Truncate), Some(-42));
        assert_eq!(decimal_to_i64(d("42.1"), Rounding::Exact), None);
        assert_eq!(decimal_to_i64(d("4.2E1"), Rounding::Exact), Some(42));
        assert_eq!(
            decimal_to_i64(d("-9223372036854775808"), Rounding::Exact),
            Some(i64::MIN)
        );
        assert_eq!(
            decimal_to_i64(d("9223372036854775808"), Rounding::Exact),
            None
        );
        assert_eq!(decimal_to_i64(d("1E-40"), Rounding::HalfEven), Some(0));
        assert_eq!(decimal_to_i64(d("NaN"), Rounding::HalfEven), None);
    }

    #[test]
    fn in_list_is_sorted_deduplicated_and_compact() {
        let doc = bson::rawdoc! {"v": [3_i64, "b", 1.0, null, 1_i32, {"x": 1}, "a", 3.0]};
        let Ok(Some(v)) = doc.get("v") else {
            panic!("no v");
        };
        let list = parse_in(v, "$in").expect("parses");
        let got: Vec<RawBson> = list.values().map(RawBson::from).collect();
        assert_eq!(
            got,
            vec![
                RawBson::Null,
                RawBson::Double(1.0),
                RawBson::Int64(3),
                RawBson::String("a".into()),
                RawBson::String("b".into()),
                RawBson::Document(bson::rawdoc! {"x": 1}),
            ]
        );
        assert!(list.has_null);
        for (probe, want) in [
            (RawBsonRef::Int32(3), true),
            (
                RawBsonRef::Decimal128(bson::Decimal128::from_bytes([0; 16])),
                false,
            ),
            (RawBsonRef::String("a"), true),
            (RawBsonRef::String("c"), false),
            (RawBsonRef::Null, true),
            (RawBsonRef::Int64(2), false),
        ] {
            assert_eq!(list.contains(probe), want, "{probe:?}");
        }
        // One int64 costs its 15-byte document plus a 4-byte offset (a RawBson was 56).
        let mut ints = bson::RawArrayBuf::new();
        for i in 0..1000_i64 {
            ints.push(i);
        }
        let arr = bson::rawdoc! {"v": ints};
        let Ok(Some(v)) = arr.get("v") else {
            panic!("no v");
        };
        let list = parse_in(v, "$in").expect("parses");
        assert_eq!(list.len(), 1000);
        assert_eq!(list.bytes.len() + 4 * list.offsets.len(), 19 * 1000);
    }
}

/// `$sampleRate` (expression_parser.cpp `parseSampleRate`).
fn sample_rate(v: RawBsonRef<'_>) -> Result<Expr> {
    let x = match v {
        RawBsonRef::Int32(i) => f64::from(i),
        RawBsonRef::Int64(i) => i as f64,
        RawBsonRef::Double(d) => d,
        RawBsonRef::Decimal128(d) => cairn_storage::decimal::to_f64(Decimal::from_decimal128(d)),
        _ => {
            return Err(QueryError::TypeMismatch(
                "argument to $sampleRate must be a numeric type".into(),
            ));
        }
    };
    if !(0.0..=1.0).contains(&x) {
        return Err(bad("numeric argument to $sampleRate must be in [0, 1]"));
    }
    if x == 0.0 {
        return Ok(Expr::AlwaysFalse);
    }
    if x == 1.0 {
        return Ok(Expr::AlwaysTrue);
    }
    Ok(Expr::Extension(Extension {
        kind: ExtensionKind::Expr,
        predicate: Arc::new(SampleRate(x)),
    }))
}

/// `{$lt: [{$rand: {}}, rate]}`.
#[derive(Debug)]
struct SampleRate(f64);

impl DocumentPredicate for SampleRate {
    fn matches(&self, _doc: &RawDocument) -> bool {
        crate::expr::random_unit() < self.0
    }
}
