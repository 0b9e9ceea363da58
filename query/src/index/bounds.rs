//! Index bounds: which values of each index field a filter needs (MongoDB's
//! `IndexBoundsBuilder`, src/mongo/db/query/index_bounds_builder.cpp, with `Interval` and
//! `OrderedIntervalList` from interval.cpp / index_bounds.cpp), and the byte ranges of the
//! index space (`K1 … Kn E(_id)`) they select.
//!
//! Bounds come from the filter's top-level conjunction (nested `$and`s flattened):
//! - `$eq`: a point; `null` gives the points undefined and null (7.0: `{a: null}` matches
//!   both); an array gives the array itself plus its first element (undefined when empty);
//! - `$lt`/`$lte`/`$gt`/`$gte` are type-bracketed (`$gt: 5` → `(5, inf.0]`, `$lt: "b"` →
//!   `["", "b")`, `$gt: "b"` → `("b", {})`), with MongoDB's cases for MinKey, MaxKey, NaN,
//!   null and arrays;
//! - `$in`: the union of its equalities and regexes; a regex is `["abc", "abd")` for a literal
//!   prefix `^abc` (else every string, `["", {})`) plus the regex itself as a point; a `$in`
//!   of more than [`MAX_RANGES`] values is bounded by hulls over runs of its sorted values
//!   (inexact), so its bounds stay small whatever its length;
//! - `$exists: true` → `[MinKey, MaxKey]`; `$exists: false` → `[null, null]`; `$type`, `$mod`
//!   → their type brackets; `$elemMatch` (value form) → the intersection of its operators;
//!   `$elemMatch` (object form) lends its children's predicates on non-numeric sub-paths to
//!   `path.sub` fields;
//! - `$ne`, `$nin`, `$not` → the complement of an exactly-translated operator; on a multikey
//!   index only when the operator's bounds hold neither null nor undefined (keys a document
//!   gets without the path reaching a value: null for a missing sub-path, undefined for an
//!   empty array), not for arrays, regexes, `$type`, `$mod` or `$elemMatch`;
//! - `$or` of predicates on one field → the union; anything else leaves a field unbounded;
//! - several predicates on one field intersect unless the index is multikey (then the first
//!   is used); on a multikey index two fields whose paths share their first component may
//!   come from different array elements, so only the first of them is bounded;
//! - hashed fields take only equalities and `$in` without regexes, as hash points;
//! - a field with a positional component (`a.0`) ignores predicates a missing value can
//!   satisfy and `$elemMatch` (the matcher also looks for a field "0" inside document
//!   elements, and an array at position 0 is indexed whole), is bounded as if multikey (an
//!   empty array there is keyed undefined on a non-multikey index), and is never exact.
//!
//! An index-provided sort reads [`IndexBounds::scan_ranges`] (of the filter's bounds, or of
//! [`IndexBounds::full`] without a filter) forward or backward as [`index_sort_direction`]
//! says.
//!
//! Invariants:
//! - **Soundness**: every document matching the filter has an entry whose key lies in
//!   [`IndexBounds::key_ranges`] (for a non-sparse, non-partial index with the given multikey
//!   flag; [`bounds_for_index`] refuses sparse and partial indexes the filter cannot use).
//! - Intervals of a field are sorted in value order (MongoDB's comparison), disjoint and
//!   non-empty; [`IndexBounds::explain`] prints them in index order (reversed for `-1`).
//! - [`IndexBounds::is_exact_for`] is conservative: true only when the ranges alone decide
//!   the filter (no multikey, every predicate translated exactly, ranges not widened).
//! - Never panics; at most [`MAX_RANGES`] byte ranges.

use std::cmp::Ordering;
use std::ops::Bound;

use bson::raw::{CStr, RawArrayBuf};
use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::compare::{TypeClass, compare_values};
use cairn_storage::display;
use cairn_storage::index::{IndexMeta, SpecOptions};
use cairn_storage::keys::encode_value;

use super::{KeyComponent, KeyKind, hash, key_components, number, spec};
use crate::filter::{CmpOp, Expr, InList, PathExpr, Predicate, TypeSet};
use crate::path::parse_position;
use crate::regex::Regex;
use crate::sort::SortField;

/// Most byte ranges [`IndexBounds::key_ranges`] returns; beyond it intervals are widened.
pub const MAX_RANGES: usize = 1000;

/// A byte range over an index space (entries are `K1 … Kn E(_id)`).
pub type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// An interval of BSON values, in ascending value order.
#[derive(Clone, Debug)]
pub struct Interval {
    /// Lower end.
    pub start: RawBson,
    /// Whether `start` is included.
    pub start_inclusive: bool,
    /// Upper end.
    pub end: RawBson,
    /// Whether `end` is included.
    pub end_inclusive: bool,
}

fn cmp(a: &RawBson, b: &RawBson) -> Ordering {
    compare_values(a.as_raw_bson_ref(), b.as_raw_bson_ref())
}

impl PartialEq for Interval {
    fn eq(&self, o: &Interval) -> bool {
        self.start_inclusive == o.start_inclusive
            && self.end_inclusive == o.end_inclusive
            && cmp(&self.start, &o.start).is_eq()
            && cmp(&self.end, &o.end).is_eq()
    }
}

impl Interval {
    /// `[start, end]` with the given inclusivity.
    pub fn new(start: RawBson, start_inclusive: bool, end: RawBson, end_inclusive: bool) -> Self {
        Interval {
            start,
            start_inclusive,
            end,
            end_inclusive,
        }
    }

    /// `[v, v]`.
    pub fn point(v: RawBson) -> Interval {
        Interval::new(v.clone(), true, v, true)
    }

    /// `[MinKey, MaxKey]`.
    pub fn all() -> Interval {
        Interval::new(RawBson::MinKey, true, RawBson::MaxKey, true)
    }

    /// True when no value lies inside.
    pub fn is_empty(&self) -> bool {
        match cmp(&self.start, &self.end) {
            Ordering::Greater => true,
            Ordering::Equal => !(self.start_inclusive && self.end_inclusive),
            Ordering::Less => false,
        }
    }

    /// True for `[v, v]`.
    pub fn is_point(&self) -> bool {
        self.start_inclusive && self.end_inclusive && cmp(&self.start, &self.end).is_eq()
    }

    /// True for `[MinKey, MaxKey]`.
    pub fn is_full(&self) -> bool {
        self.start_inclusive
            && self.end_inclusive
            && matches!(self.start, RawBson::MinKey)
            && matches!(self.end, RawBson::MaxKey)
    }

    /// Whether `v` lies inside.
    pub fn contains(&self, v: RawBsonRef<'_>) -> bool {
        let lo = compare_values(v, self.start.as_raw_bson_ref());
        let hi = compare_values(v, self.end.as_raw_bson_ref());
        (lo.is_gt() || (lo.is_eq() && self.start_inclusive))
            && (hi.is_lt() || (hi.is_eq() && self.end_inclusive))
    }

    /// MongoDB's explain form, `[1, 1]`, `(5, inf.0]`; `reversed` prints a descending
    /// field's view (`[inf.0, 5)`).
    pub fn to_explain_string(&self, reversed: bool) -> String {
        let (a, ai, b, bi) = if reversed {
            (
                &self.end,
                self.end_inclusive,
                &self.start,
                self.start_inclusive,
            )
        } else {
            (
                &self.start,
                self.start_inclusive,
                &self.end,
                self.end_inclusive,
            )
        };
        format!(
            "{}{}, {}{}",
            if ai { '[' } else { '(' },
            display::value(a.as_raw_bson_ref()),
            display::value(b.as_raw_bson_ref()),
            if bi { ']' } else { ')' }
        )
    }
}

/// Sorts, drops empty intervals and merges overlapping or touching ones (`unionize`).
pub(super) fn unionize(mut ivs: Vec<Interval>) -> Vec<Interval> {
    ivs.retain(|i| !i.is_empty());
    if ivs.len() < 2 {
        // Nothing to order or merge.
        return ivs;
    }
    ivs.sort_by(|a, b| {
        cmp(&a.start, &b.start).then_with(|| b.start_inclusive.cmp(&a.start_inclusive))
    });
    let mut out: Vec<Interval> = Vec::with_capacity(ivs.len());
    for iv in ivs {
        if let Some(cur) = out.last_mut() {
            let touch = match cmp(&iv.start, &cur.end) {
                Ordering::Less => true,
                Ordering::Equal => cur.end_inclusive || iv.start_inclusive,
                Ordering::Greater => false,
            };
            if touch {
                match cmp(&iv.end, &cur.end) {
                    Ordering::Greater => {
                        cur.end = iv.end;
                        cur.end_inclusive = iv.end_inclusive;
                    }
                    Ordering::Equal => cur.end_inclusive |= iv.end_inclusive,
                    Ordering::Less => {}
                }
                continue;
            }
        }
        out.push(iv);
    }
    out
}

/// Intersection of two normalised lists (`intersectize`).
fn intersect(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
        let (start, si) = match cmp(&x.start, &y.start) {
            Ordering::Greater => (&x.start, x.start_inclusive),
            Ordering::Less => (&y.start, y.start_inclusive),
            Ordering::Equal => (&x.start, x.start_inclusive && y.start_inclusive),
        };
        let end_order = cmp(&x.end, &y.end).then_with(|| x.end_inclusive.cmp(&y.end_inclusive));
        let (end, ei) = if end_order.is_le() {
            (&x.end, x.end_inclusive)
        } else {
            (&y.end, y.end_inclusive)
        };
        let iv = Interval::new(start.clone(), si, end.clone(), ei);
        if !iv.is_empty() {
            out.push(iv);
        }
        match end_order {
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
            Ordering::Equal => {
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// `OrderedIntervalList::complement` over `[MinKey, MaxKey]`.
fn complement(ivs: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    let mut cur = RawBson::MinKey;
    let mut cur_inclusive = false;
    for iv in ivs {
        if !cmp(&iv.start, &cur).is_eq() || (!cur_inclusive && !iv.start_inclusive) {
            out.push(Interval::new(
                cur.clone(),
                !cur_inclusive,
                iv.start.clone(),
                !iv.start_inclusive,
            ));
        }
        cur = iv.end.clone();
        cur_inclusive = iv.end_inclusive;
    }
    if !matches!(cur, RawBson::MaxKey) || !cur_inclusive {
        out.push(Interval::new(cur, !cur_inclusive, RawBson::MaxKey, true));
    }
    out.retain(|i| !i.is_empty());
    out
}

fn contains_any(ivs: &[Interval], v: RawBsonRef<'_>) -> bool {
    ivs.iter().any(|i| i.contains(v))
}

// ---------------------------------------------------------------------------------------------
// Type brackets (`appendMinForType` / `appendMaxForType`)
// ---------------------------------------------------------------------------------------------

fn empty_doc() -> RawBson {
    RawBson::Document(RawDocumentBuf::new())
}

fn empty_array() -> RawBson {
    RawBson::Array(RawArrayBuf::new())
}

fn min_binary() -> RawBson {
    RawBson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: Vec::new(),
    })
}

fn regex_value(pattern: &str, options: &str) -> RawBson {
    let mut d = RawDocumentBuf::new();
    if let (Ok(p), Ok(o)) = (
        bson::raw::CString::try_from(pattern),
        bson::raw::CString::try_from(options),
    ) {
        d.append(
            bson::raw::cstr!(""),
            RawBson::RegularExpression(bson::Regex {
                pattern: p,
                options: o,
            }),
        );
    }
    d.get("")
        .ok()
        .flatten()
        .map(RawBson::from)
        .unwrap_or(RawBson::MaxKey)
}

/// The smallest DBPointer (empty namespace, zero id), built from its wire form since the bson
/// crate has no constructor.
fn min_db_pointer() -> RawBson {
    let mut bytes: Vec<u8> = Vec::new();
    let body: Vec<u8> = [
        &[0x0Cu8, 0x00][..],
        &1i32.to_le_bytes(),
        &[0x00],
        &[0u8; 12],
        &[0x00],
    ]
    .concat();
    bytes.extend_from_slice(&i32::try_from(body.len() + 4).unwrap_or(0).to_le_bytes());
    bytes.extend_from_slice(&body);
    RawDocument::from_bytes(&bytes)
        .ok()
        .and_then(|d| d.get("").ok().flatten())
        .map(RawBson::from)
        .unwrap_or(RawBson::JavaScriptCode(String::new()))
}

fn min_for_class(c: TypeClass) -> RawBson {
    match c {
        TypeClass::MinKey => RawBson::MinKey,
        TypeClass::Missing => RawBson::Undefined,
        TypeClass::Null => RawBson::Null,
        TypeClass::Number => RawBson::Double(f64::NAN),
        TypeClass::String => RawBson::String(String::new()),
        TypeClass::Object => empty_doc(),
        TypeClass::Array => empty_array(),
        TypeClass::BinData => min_binary(),
        TypeClass::ObjectId => RawBson::ObjectId(bson::oid::ObjectId::from_bytes([0; 12])),
        TypeClass::Bool => RawBson::Boolean(false),
        TypeClass::Date => RawBson::DateTime(bson::DateTime::MIN),
        TypeClass::Timestamp => RawBson::Timestamp(bson::Timestamp {
            time: 0,
            increment: 0,
        }),
        TypeClass::Regex => regex_value("", ""),
        TypeClass::DbPointer => min_db_pointer(),
        TypeClass::Code => RawBson::JavaScriptCode(String::new()),
        TypeClass::CodeWithScope => {
            RawBson::JavaScriptCodeWithScope(bson::raw::RawJavaScriptCodeWithScope {
                code: String::new(),
                scope: RawDocumentBuf::new(),
            })
        }
        TypeClass::MaxKey => RawBson::MaxKey,
    }
}

fn max_for_class(c: TypeClass) -> RawBson {
    match c {
        TypeClass::Number => RawBson::Double(f64::INFINITY),
        TypeClass::String => min_for_class(TypeClass::Object),
        TypeClass::Object => min_for_class(TypeClass::Array),
        TypeClass::Array => min_for_class(TypeClass::BinData),
        TypeClass::BinData => min_for_class(TypeClass::ObjectId),
        TypeClass::ObjectId => RawBson::ObjectId(bson::oid::ObjectId::from_bytes([0xFF; 12])),
        TypeClass::Bool => RawBson::Boolean(true),
        TypeClass::Date => RawBson::DateTime(bson::DateTime::MAX),
        TypeClass::Timestamp => RawBson::Timestamp(bson::Timestamp {
            time: u32::MAX,
            increment: u32::MAX,
        }),
        TypeClass::Regex => min_for_class(TypeClass::DbPointer),
        TypeClass::DbPointer => min_for_class(TypeClass::Code),
        TypeClass::Code => min_for_class(TypeClass::CodeWithScope),
        TypeClass::CodeWithScope => RawBson::MaxKey,
        other => min_for_class(other),
    }
}

/// `[min, max]` of a class, the end excluded when it belongs to the next class.
fn class_bracket(c: TypeClass) -> Interval {
    let (lo, hi) = (min_for_class(c), max_for_class(c));
    let same = TypeClass::of(lo.as_raw_bson_ref()) == TypeClass::of(hi.as_raw_bson_ref());
    Interval::new(lo, true, hi, same)
}

// ---------------------------------------------------------------------------------------------
// Translation of single predicates
// ---------------------------------------------------------------------------------------------

/// Bounds for one predicate on one field.
#[derive(Clone, Debug)]
struct Tr {
    ivs: Vec<Interval>,
    /// The bounds decide the predicate for an entry (conservative; for index-only answers).
    exact: bool,
    /// Values inside the bounds are exactly the values matching (missing counting as null):
    /// the bounds may be complemented for a negation.
    negatable: bool,
}

impl Tr {
    fn new(ivs: Vec<Interval>, exact: bool, negatable: bool) -> Tr {
        Tr {
            ivs: unionize(ivs),
            exact,
            negatable,
        }
    }
}

fn hashed_point(v: RawBsonRef<'_>) -> Interval {
    Interval::point(RawBson::Int64(hash::hash64(v)))
}

/// `makeNullEqualityBounds`.
fn null_equality(hashed: bool) -> Tr {
    let ivs = if hashed {
        vec![
            hashed_point(RawBsonRef::Undefined),
            hashed_point(RawBsonRef::Null),
        ]
    } else {
        vec![
            Interval::point(RawBson::Undefined),
            Interval::point(RawBson::Null),
        ]
    };
    Tr::new(ivs, false, true)
}

/// `translateEquality`.
fn equality(v: RawBsonRef<'_>, hashed: bool) -> Tr {
    match v {
        RawBsonRef::Null => null_equality(hashed),
        _ if hashed => Tr::new(vec![hashed_point(v)], false, false),
        RawBsonRef::Array(a) => {
            let mut ivs = vec![Interval::point(RawBson::from(v))];
            match a.into_iter().next() {
                Some(Ok(first)) => ivs.push(Interval::point(RawBson::from(first))),
                _ => ivs.push(Interval::point(RawBson::Undefined)),
            }
            Tr::new(ivs, false, false)
        }
        _ => {
            let exact = exact_generating(v);
            Tr::new(vec![Interval::point(RawBson::from(v))], exact, true)
        }
    }
}

/// Values whose bounds decide a comparison for index-only answers (conservative version of
/// `Indexability::isExactBoundsGenerating`).
fn exact_generating(v: RawBsonRef<'_>) -> bool {
    !matches!(
        TypeClass::of(v),
        TypeClass::Null
            | TypeClass::Missing
            | TypeClass::Array
            | TypeClass::Object
            | TypeClass::MinKey
            | TypeClass::MaxKey
    )
}

fn is_nan(v: RawBsonRef<'_>) -> bool {
    number(v).is_some_and(f64::is_nan)
}

/// `buildBoundsForQueryElementForLT`: the interval's ends.
fn lt_ends(v: RawBsonRef<'_>) -> (RawBson, RawBson) {
    match v {
        RawBsonRef::Array(a) => {
            let end = match a.into_iter().next() {
                None => empty_array(),
                Some(Ok(first)) if TypeClass::of(first) > TypeClass::Array => RawBson::from(first),
                _ => RawBson::from(v),
            };
            (RawBson::MinKey, end)
        }
        _ if TypeClass::of(v) == TypeClass::Number => {
            (RawBson::Double(f64::NEG_INFINITY), RawBson::from(v))
        }
        _ => (min_for_class(TypeClass::of(v)), RawBson::from(v)),
    }
}

/// `buildBoundsForQueryElementForGT`: the interval's ends.
fn gt_ends(v: RawBsonRef<'_>) -> (RawBson, RawBson) {
    match v {
        RawBsonRef::Array(a) => {
            let start = match a.into_iter().next() {
                None => RawBson::MinKey,
                Some(Ok(first)) if TypeClass::of(first) < TypeClass::Array => RawBson::from(first),
                _ => RawBson::from(v),
            };
            (start, RawBson::MaxKey)
        }
        _ if TypeClass::of(v) == TypeClass::Number => {
            (RawBson::from(v), RawBson::Double(f64::INFINITY))
        }
        _ => (RawBson::from(v), max_for_class(TypeClass::of(v))),
    }
}

fn same_class(a: &RawBson, b: &RawBson) -> bool {
    TypeClass::of(a.as_raw_bson_ref()) == TypeClass::of(b.as_raw_bson_ref())
}

fn comparison(op: CmpOp, v: RawBsonRef<'_>, hashed: bool, multikey: bool) -> Option<Tr> {
    if op == CmpOp::Eq {
        return Some(equality(v, hashed));
    }
    if hashed {
        return None;
    }
    let array = matches!(v, RawBsonRef::Array(_));
    let exact = exact_generating(v);
    let negatable = !array;
    let tr = match op {
        CmpOp::Eq => return Some(equality(v, hashed)),
        CmpOp::Lte | CmpOp::Lt if matches!(v, RawBsonRef::MaxKey) => {
            let end_inclusive = op == CmpOp::Lte || multikey;
            let ivs = vec![Interval::new(
                RawBson::MinKey,
                true,
                RawBson::MaxKey,
                end_inclusive,
            )];
            let ok = op == CmpOp::Lte || !multikey;
            Tr::new(ivs, ok, ok)
        }
        CmpOp::Gte | CmpOp::Gt if matches!(v, RawBsonRef::MinKey) => {
            let start_inclusive = op == CmpOp::Gte || multikey;
            let ivs = vec![Interval::new(
                RawBson::MinKey,
                start_inclusive,
                RawBson::MaxKey,
                true,
            )];
            let ok = op == CmpOp::Gte || !multikey;
            Tr::new(ivs, ok, ok)
        }
        CmpOp::Lte | CmpOp::Gte if is_nan(v) => {
            Tr::new(vec![Interval::point(RawBson::Double(f64::NAN))], true, true)
        }
        CmpOp::Lt | CmpOp::Gt if is_nan(v) => Tr::new(Vec::new(), true, true),
        CmpOp::Lte | CmpOp::Gte if matches!(v, RawBsonRef::Null) => null_equality(false),
        CmpOp::Lte | CmpOp::Lt => {
            let (s, e) = lt_ends(v);
            let type_match = same_class(&s, &e);
            let (si, ei) = if op == CmpOp::Lte {
                (array || type_match, true)
            } else {
                (type_match || array, array)
            };
            Tr::new(vec![Interval::new(s, si, e, ei)], exact, negatable)
        }
        CmpOp::Gte | CmpOp::Gt => {
            let (s, e) = gt_ends(v);
            let type_match = same_class(&s, &e);
            let (si, ei) = if op == CmpOp::Gte {
                (true, array || type_match)
            } else {
                (array, array || type_match)
            };
            Tr::new(vec![Interval::new(s, si, e, ei)], exact, negatable)
        }
    };
    Some(tr)
}

/// `IndexBoundsBuilder::simpleRegex`: the literal prefix and whether the regex is exactly
/// "starts with the prefix".
fn simple_regex(pattern: &str, flags: &str) -> (String, bool) {
    let (rest, multiline_ok) = if let Some(r) = pattern.strip_prefix("\\A") {
        (r, true)
    } else if let Some(r) = pattern.strip_prefix('^') {
        (r, false)
    } else {
        return (String::new(), false);
    };
    if may_have_unescaped_pipe(rest) {
        return (String::new(), false);
    }
    let mut extended = false;
    for f in flags.chars() {
        match f {
            'm' if multiline_ok => {}
            's' => {}
            'x' => extended = true,
            _ => return (String::new(), false),
        }
    }
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' | '?' => {
                out.pop();
                return (out, false);
            }
            '\\' => match chars.next() {
                Some('Q') => {
                    let mut prev_backslash = false;
                    for q in chars.by_ref() {
                        if prev_backslash {
                            if q == 'E' {
                                prev_backslash = false;
                                break;
                            }
                            out.push('\\');
                            prev_backslash = false;
                        }
                        if q == '\\' {
                            prev_backslash = true;
                        } else {
                            out.push(q);
                        }
                    }
                    if prev_backslash {
                        out.push('\\');
                    }
                }
                Some(e) if e.is_ascii_alphanumeric() => return (out, false),
                None => return (out, false),
                Some(e) => out.push(e),
            },
            '^' | '$' | '.' | '[' | '(' | ')' | '+' | '{' => return (out, false),
            '#' if extended => return (out, false),
            c if extended && c.is_ascii_whitespace() => {}
            c => out.push(c),
        }
    }
    let exact = !out.is_empty();
    (out, exact)
}

/// `stringMayHaveUnescapedPipe`.
fn may_have_unescaped_pipe(s: &str) -> bool {
    let b = s.as_bytes();
    if b.first() == Some(&b'|') {
        return true;
    }
    if b.get(1) == Some(&b'|') && b.first() != Some(&b'\\') {
        return true;
    }
    for i in 2..b.len() {
        let (probe, prev, tail) = (b.get(i), b.get(i - 1), b.get(i - 2));
        if probe == Some(&b'|') && (prev != Some(&b'\\') || tail == Some(&b'\\')) {
            return true;
        }
    }
    false
}

/// The least string greater than every string starting with `prefix`, or `None` (then
/// `{}`, the end of the string bracket): the last character that has a successor, bumped.
fn prefix_successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = (u32::from(last) + 1..=0x10FFFF).find_map(char::from_u32);
        if let Some(n) = next {
            chars.push(n);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// `translateRegex`.
fn regex_bounds(r: &Regex) -> Tr {
    let (prefix, exact) = simple_regex(r.pattern(), r.options());
    let mut ivs = Vec::new();
    if prefix.is_empty() {
        ivs.push(class_bracket(TypeClass::String));
    } else {
        let end = match prefix_successor(&prefix) {
            Some(s) => RawBson::String(s),
            None => empty_doc(),
        };
        ivs.push(Interval::new(RawBson::String(prefix), true, end, false));
    }
    ivs.push(Interval::point(regex_value(r.pattern(), r.options())));
    Tr::new(ivs, exact, false)
}

fn in_bounds(list: &InList, hashed: bool) -> Option<Tr> {
    if hashed && !list.regexes().is_empty() {
        return None;
    }
    if list.len() > MAX_RANGES {
        return Some(long_in_bounds(list, hashed));
    }
    let mut ivs = Vec::new();
    let (mut exact, mut negatable) = (true, list.regexes().is_empty());
    for v in list.values() {
        let t = equality(v, hashed);
        exact &= t.exact;
        negatable &= t.negatable;
        ivs.extend(t.ivs);
    }
    for r in list.regexes() {
        let t = regex_bounds(r);
        exact &= t.exact;
        ivs.extend(t.ivs);
    }
    Some(Tr::new(ivs, exact, negatable))
}

/// Hulls a long `$in` is cut into (well below [`MAX_RANGES`], which the byte ranges would
/// be widened to anyway).
const LONG_IN_HULLS: usize = MAX_RANGES / 2;

/// The bounds of a `$in` longer than [`MAX_RANGES`]: hulls over runs of its values (sorted
/// and deduplicated once, by the parser), plus the exact bounds of its null, array and regex
/// members. Never exact nor negatable: the filter, which holds the one parsed copy of the
/// values, decides each entry, and bounds of a few hundred intervals replace a million
/// points (and the copies of them `key_ranges`, `is_exact_for` and explain would make).
fn long_in_bounds(list: &InList, hashed: bool) -> Tr {
    let mut ivs = Vec::with_capacity(LONG_IN_HULLS + 8);
    if hashed {
        let mut hs: Vec<i64> = list.values().map(hash::hash64).collect();
        if list.values().any(|v| matches!(v, RawBsonRef::Null)) {
            hs.push(hash::hash64(RawBsonRef::Undefined));
        }
        hs.sort_unstable();
        hs.dedup();
        let chunk = hs.len().div_ceil(LONG_IN_HULLS).max(1);
        for c in hs.chunks(chunk) {
            if let (Some(a), Some(b)) = (c.first(), c.last()) {
                ivs.push(Interval::new(
                    RawBson::Int64(*a),
                    true,
                    RawBson::Int64(*b),
                    true,
                ));
            }
        }
    } else {
        let (special, plain): (Vec<RawBsonRef<'_>>, Vec<RawBsonRef<'_>>) = list
            .values()
            .partition(|v| matches!(v, RawBsonRef::Null | RawBsonRef::Array(_)));
        for v in special {
            ivs.extend(equality(v, false).ivs);
        }
        let chunk = plain.len().div_ceil(LONG_IN_HULLS).max(1);
        for c in plain.chunks(chunk) {
            if let (Some(a), Some(b)) = (c.first(), c.last()) {
                ivs.push(Interval::new((*a).into(), true, (*b).into(), true));
            }
        }
        for r in list.regexes() {
            ivs.extend(regex_bounds(r).ivs);
        }
    }
    Tr::new(ivs, false, false)
}

fn type_bounds(t: &TypeSet) -> Tr {
    let mut ivs = Vec::new();
    if t.all_numbers {
        ivs.push(class_bracket(TypeClass::Number));
    }
    for &code in &t.codes {
        let class = match code {
            4 | 0 => return Tr::new(vec![Interval::all()], false, false),
            1 | 16 | 18 | 19 => TypeClass::Number,
            2 | 14 => TypeClass::String,
            3 => TypeClass::Object,
            5 => TypeClass::BinData,
            6 => TypeClass::Missing,
            7 => TypeClass::ObjectId,
            8 => TypeClass::Bool,
            9 => TypeClass::Date,
            10 => TypeClass::Null,
            11 => TypeClass::Regex,
            12 => TypeClass::DbPointer,
            13 => TypeClass::Code,
            15 => TypeClass::CodeWithScope,
            17 => TypeClass::Timestamp,
            -1 => TypeClass::MinKey,
            127 => TypeClass::MaxKey,
            _ => return Tr::new(vec![Interval::all()], false, false),
        };
        ivs.push(class_bracket(class));
    }
    Tr::new(ivs, false, false)
}

/// Bounds for a predicate on one field's values (`_translatePredicate`); `None` when the
/// predicate does not restrict the index.
fn translate(pred: &Predicate, hashed: bool, multikey: bool) -> Option<Tr> {
    match pred {
        Predicate::Cmp(op, v) => comparison(*op, v.as_raw_bson_ref(), hashed, multikey),
        Predicate::In(list) => in_bounds(list, hashed),
        _ if hashed => None,
        Predicate::Regex(r) => Some(regex_bounds(r)),
        Predicate::Exists => Some(Tr::new(vec![Interval::all()], false, false)),
        Predicate::Type(t) => Some(type_bounds(t)),
        Predicate::Mod { .. } => Some(Tr::new(
            vec![Interval::new(
                RawBson::Double(f64::NAN),
                true,
                RawBson::Double(f64::INFINITY),
                true,
            )],
            false,
            false,
        )),
        Predicate::ElemMatchValue(children) => {
            let mut acc: Option<Vec<Interval>> = None;
            for c in children {
                let t = match c {
                    Expr::Path(pe) => translate(&pe.pred, false, multikey),
                    Expr::Not(inner) => translate_not(inner, false, multikey),
                    _ => None,
                };
                if let Some(t) = t {
                    acc = Some(match acc {
                        None => t.ivs,
                        Some(a) => intersect(&a, &t.ivs),
                    });
                }
            }
            acc.map(|ivs| Tr::new(ivs, false, false))
        }
        Predicate::Size(_)
        | Predicate::Bits(_)
        | Predicate::ElemMatchObject(_)
        | Predicate::Geo(_)
        | Predicate::Near(_) => None,
    }
}

/// The single path predicate a negation wraps (`$ne`, `$nin`, `$not: {op}`, `$exists: false`).
fn negated_path(inner: &Expr) -> Option<&PathExpr> {
    match inner {
        Expr::Path(pe) => Some(pe),
        Expr::And(cs) if cs.len() == 1 => match cs.first() {
            Some(Expr::Path(pe)) => Some(pe),
            _ => None,
        },
        _ => None,
    }
}

fn translate_not(inner: &Expr, hashed: bool, multikey: bool) -> Option<Tr> {
    let pe = negated_path(inner)?;
    if hashed {
        return None;
    }
    if matches!(pe.pred, Predicate::Exists) {
        return Some(Tr::new(vec![Interval::point(RawBson::Null)], false, false));
    }
    let child = translate(&pe.pred, false, multikey)?;
    if !child.negatable {
        return None;
    }
    if multikey
        && (contains_any(&child.ivs, RawBsonRef::Null)
            || contains_any(&child.ivs, RawBsonRef::Undefined))
    {
        return None;
    }
    Some(Tr::new(complement(&child.ivs), !multikey, false))
}

// ---------------------------------------------------------------------------------------------
// Filters to bounds
// ---------------------------------------------------------------------------------------------

pub(super) fn flatten<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::And(cs) => cs.iter().for_each(|c| flatten(c, out)),
        other => out.push(other),
    }
}

/// What a conjunct says about one field.
enum Relevance {
    /// Nothing.
    Unrelated,
    /// It is about the field but gives no bounds.
    NoBounds,
    /// Bounds.
    Bounds(Tr),
}

fn single_path_of(e: &Expr) -> Option<&str> {
    match e {
        Expr::Path(pe) => Some(pe.path.as_str()),
        Expr::Not(inner) => negated_path(inner).map(|pe| pe.path.as_str()),
        Expr::And(cs) if cs.len() == 1 => cs.first().and_then(single_path_of),
        _ => None,
    }
}

fn translate_single(e: &Expr, hashed: bool, multikey: bool) -> Option<Tr> {
    match e {
        Expr::Path(pe) => translate(&pe.pred, hashed, multikey),
        Expr::Not(inner) => translate_not(inner, hashed, multikey),
        Expr::And(cs) if cs.len() == 1 => cs
            .first()
            .and_then(|c| translate_single(c, hashed, multikey)),
        _ => None,
    }
}

fn relevance(c: &Expr, path: &str, hashed: bool, multikey: bool) -> Relevance {
    match c {
        Expr::Path(pe) if pe.path.as_str() == path => match translate(&pe.pred, hashed, multikey) {
            Some(t) => Relevance::Bounds(t),
            None => Relevance::NoBounds,
        },
        Expr::Path(PathExpr {
            path: prefix,
            pred: Predicate::ElemMatchObject(sub),
        }) => elem_match_object(prefix.as_str(), sub, path, hashed, multikey),
        Expr::Not(inner) => match negated_path(inner) {
            Some(pe) if pe.path.as_str() == path => match translate_not(inner, hashed, multikey) {
                Some(t) => Relevance::Bounds(t),
                None => Relevance::NoBounds,
            },
            _ => Relevance::Unrelated,
        },
        Expr::Or(branches) => {
            if branches.is_empty() || !branches.iter().all(|b| single_path_of(b) == Some(path)) {
                return Relevance::Unrelated;
            }
            let mut ivs = Vec::new();
            let mut exact = true;
            for b in branches {
                let Some(t) = translate_single(b, hashed, multikey) else {
                    return Relevance::NoBounds;
                };
                exact &= t.exact;
                ivs.extend(t.ivs);
            }
            Relevance::Bounds(Tr::new(ivs, exact && !multikey, false))
        }
        _ => Relevance::Unrelated,
    }
}

/// Whether some conjunct of `expr` could bound the index field `path` ([`relevance`] could
/// give it bounds) or empties every field's bounds (`AlwaysFalse`). `false` means
/// [`build`] leaves the field's bounds full whatever the index, so a planner can skip an
/// index led by `path` that is not wanted for its order without building its bounds.
pub fn may_bound(expr: &Expr, path: &str) -> bool {
    match expr {
        Expr::And(cs) => cs.iter().any(|c| may_bound(c, path)),
        Expr::AlwaysFalse => true,
        Expr::Path(pe) if pe.path.as_str() == path => true,
        Expr::Path(PathExpr {
            path: prefix,
            pred: Predicate::ElemMatchObject(_),
        }) => path
            .strip_prefix(prefix.as_str())
            .is_some_and(|r| r.starts_with('.')),
        Expr::Not(inner) => negated_path(inner).is_some_and(|pe| pe.path.as_str() == path),
        Expr::Or(branches) => {
            !branches.is_empty() && branches.iter().all(|b| single_path_of(b) == Some(path))
        }
        _ => false,
    }
}

/// `{prefix: {$elemMatch: {sub: pred, …}}}` lends `pred` to the field `prefix.sub` when it
/// cannot match a missing value and `sub` has no numeric component (so the witness is a
/// document element that the dotted path also reaches). Never exact.
fn elem_match_object(
    prefix: &str,
    sub: &Expr,
    path: &str,
    hashed: bool,
    multikey: bool,
) -> Relevance {
    let Some(rest) = path.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')) else {
        return Relevance::Unrelated;
    };
    if rest
        .split('.')
        .any(|p| parse_position(p).is_some() || p.is_empty())
    {
        return Relevance::Unrelated;
    }
    let mut conj = Vec::new();
    flatten(sub, &mut conj);
    let mut found = false;
    let mut acc: Option<Vec<Interval>> = None;
    for c in conj {
        let Expr::Path(pe) = c else { continue };
        if pe.path.as_str() != rest {
            continue;
        }
        found = true;
        if pe.pred.matches_single(None, &mut None) {
            continue;
        }
        if let Some(t) = translate(&pe.pred, hashed, multikey) {
            acc = Some(match acc {
                None => t.ivs,
                // Within one element the sub-path's values could still be an array, so
                // intersecting is only safe without multikey.
                Some(a) if !multikey => intersect(&a, &t.ivs),
                Some(a) => a,
            });
        }
    }
    match (found, acc) {
        (_, Some(ivs)) => Relevance::Bounds(Tr::new(ivs, false, false)),
        (true, None) => Relevance::NoBounds,
        (false, None) => Relevance::Unrelated,
    }
}

/// Bounds of one index field.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldBounds {
    /// The field's dotted path.
    pub path: String,
    /// `-1` in the key pattern.
    pub descending: bool,
    /// `"hashed"` in the key pattern (intervals are over hash values).
    pub hashed: bool,
    /// Sorted (value order), disjoint, non-empty intervals; empty when nothing can match.
    pub intervals: Vec<Interval>,
}

impl FieldBounds {
    fn is_full(&self) -> bool {
        matches!(self.intervals.as_slice(), [only] if only.is_full())
    }

    fn component(&self) -> KeyComponent {
        KeyComponent {
            path: self.path.clone(),
            kind: if self.hashed {
                KeyKind::Hashed
            } else if self.descending {
                KeyKind::Descending
            } else {
                KeyKind::Ascending
            },
        }
    }
}

/// Per-field bounds of a filter over an index.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexBounds {
    /// One entry per key-pattern field, in order.
    pub fields: Vec<FieldBounds>,
    multikey: bool,
    exact: bool,
}

/// Bounds of `expr` over a B-tree index with these `(path, descending)` fields.
pub fn bounds_for(expr: &Expr, fields: &[(String, bool)], multikey: bool) -> IndexBounds {
    let comps: Vec<KeyComponent> = fields
        .iter()
        .map(|(p, d)| KeyComponent {
            path: p.clone(),
            kind: if *d {
                KeyKind::Descending
            } else {
                KeyKind::Ascending
            },
        })
        .collect();
    build(expr, comps, multikey)
}

/// Bounds of `expr` over `index` (hashed components included), or `None` when the index
/// cannot answer the filter: a sparse index unless some predicate on an indexed field
/// requires a value there; a partial index unless the filter implies its filter.
pub fn bounds_for_index(expr: &Expr, index: &IndexMeta) -> Option<IndexBounds> {
    bounds_for_index_with(expr, index, &index.options())
}

/// [`bounds_for_index`] given the index's [`IndexMeta::options`] already read.
pub fn bounds_for_index_with(
    expr: &Expr,
    index: &IndexMeta,
    opts: &SpecOptions<'_>,
) -> Option<IndexBounds> {
    let comps = opts.key_pattern.map(key_components).unwrap_or_default();
    if comps.is_empty() {
        return None;
    }
    if opts.sparse && !sparse_usable(expr, &comps) {
        return None;
    }
    if let Some(pf) = opts.partial_filter {
        let filter = spec::parse_partial_filter(pf).ok()?;
        if !implies(expr, filter.expr()) {
            return None;
        }
    }
    Some(build(expr, comps, index.multikey))
}

pub(super) fn build(expr: &Expr, comps: Vec<KeyComponent>, multikey: bool) -> IndexBounds {
    let mut conj = Vec::new();
    flatten(expr, &mut conj);
    let always_false = conj.iter().any(|c| matches!(c, Expr::AlwaysFalse));
    let mut consumed: Vec<bool> = conj.iter().map(|c| matches!(c, Expr::AlwaysTrue)).collect();
    let mut bounded_heads: Vec<String> = Vec::new();
    let mut fields = Vec::with_capacity(comps.len());
    for comp in comps {
        let hashed = comp.kind == KeyKind::Hashed;
        // `a.0`: the matcher also sees the missing field "0" inside each document element,
        // which has no key of its own (the key is the element at position 0).
        let positional = comp
            .path
            .split('.')
            .skip(1)
            .any(|p| parse_position(p).is_some());
        let mut acc: Option<Vec<Interval>> = None;
        if !always_false {
            for (ci, c) in conj.iter().enumerate() {
                // An element selected by position is indexed whole even when it is an array,
                // so `$elemMatch` (which looks inside it) cannot use its key either.
                let elem_match = matches!(
                    c,
                    Expr::Path(PathExpr {
                        pred: Predicate::ElemMatchValue(_) | Predicate::ElemMatchObject(_),
                        ..
                    })
                );
                if positional && (may_match_missing(c) || elem_match) {
                    continue;
                }
                // An empty array at the position is indexed as undefined without making the
                // index multikey, so such a field is bounded as a multikey one would be (no
                // complement that leaves out null or undefined).
                let Relevance::Bounds(mut t) =
                    relevance(c, &comp.path, hashed, multikey || positional)
                else {
                    continue;
                };
                if positional {
                    t.exact = false;
                }
                if multikey {
                    if acc.is_none() {
                        acc = Some(t.ivs);
                    }
                    continue;
                }
                acc = Some(match acc {
                    None => t.ivs,
                    Some(a) => intersect(&a, &t.ivs),
                });
                if t.exact
                    && let Some(flag) = consumed.get_mut(ci)
                {
                    *flag = true;
                }
            }
        }
        if multikey && acc.is_some() {
            let head = comp.path.split('.').next().unwrap_or("");
            if bounded_heads.iter().any(|h| h == head) {
                acc = None;
            } else {
                bounded_heads.push(head.to_string());
            }
        }
        let intervals = if always_false {
            Vec::new()
        } else {
            acc.unwrap_or_else(|| vec![Interval::all()])
        };
        fields.push(FieldBounds {
            descending: comp.kind == KeyKind::Descending,
            path: comp.path,
            hashed,
            intervals,
        });
    }
    let exact = always_false || (!multikey && consumed.iter().all(|c| *c));
    IndexBounds {
        fields,
        multikey,
        exact,
    }
}

/// Whether a conjunct could be satisfied by a missing value alone.
fn may_match_missing(c: &Expr) -> bool {
    match c {
        Expr::Path(pe) => pe.pred.matches_single(None, &mut None),
        Expr::Not(inner) => {
            negated_path(inner).is_none_or(|pe| !pe.pred.matches_single(None, &mut None))
        }
        Expr::Or(bs) => bs.iter().any(may_match_missing),
        Expr::And(cs) => cs.iter().all(may_match_missing),
        _ => true,
    }
}

/// A sparse index holds every document matching `expr` when some top-level predicate on an
/// indexed field cannot match a missing value.
fn sparse_usable(expr: &Expr, comps: &[KeyComponent]) -> bool {
    let mut conj = Vec::new();
    flatten(expr, &mut conj);
    if conj.iter().any(|c| matches!(c, Expr::AlwaysFalse)) {
        return true;
    }
    let on_index = |p: &str| comps.iter().any(|c| c.path == p);
    conj.iter().any(|c| match c {
        // Negations (`$ne: null`) do not count: a path that reaches nothing (`{a: [5]}` for
        // `a.b`) matches them without giving the document a key.
        Expr::Path(pe) => on_index(pe.path.as_str()) && !pe.pred.matches_single(None, &mut None),
        _ => false,
    })
}

/// Conservative implication `query ⇒ partial` (MongoDB's `expression::isSubsetOf`, simple
/// cases): each conjunct of `partial` is implied by a conjunct of `query`.
pub fn implies(query: &Expr, partial: &Expr) -> bool {
    let mut q = Vec::new();
    flatten(query, &mut q);
    if q.iter().any(|c| matches!(c, Expr::AlwaysFalse)) {
        return true;
    }
    let mut p = Vec::new();
    flatten(partial, &mut p);
    p.iter().all(|pc| conjunct_implied(&q, pc))
}

fn conjunct_implied(q: &[&Expr], pc: &Expr) -> bool {
    match pc {
        Expr::AlwaysTrue => true,
        Expr::And(cs) => cs.iter().all(|c| conjunct_implied(q, c)),
        Expr::Or(cs) => cs.iter().any(|c| conjunct_implied(q, c)),
        Expr::Path(ppe) => q.iter().any(|qc| match qc {
            Expr::Path(qpe) if qpe.path == ppe.path => path_implies(&qpe.pred, &ppe.pred),
            Expr::Or(branches) => {
                !branches.is_empty()
                    && branches.iter().all(|b| match b {
                        Expr::Path(bpe) if bpe.path == ppe.path => {
                            path_implies(&bpe.pred, &ppe.pred)
                        }
                        _ => false,
                    })
            }
            _ => false,
        }),
        _ => false,
    }
}

/// A value satisfying `q` also satisfies `p` (the same value witnesses both).
fn path_implies(q: &Predicate, p: &Predicate) -> bool {
    match p {
        Predicate::Exists => !q.matches_single(None, &mut None),
        Predicate::Type(pt) => matches!(q, Predicate::Type(qt) if qt == pt),
        Predicate::Cmp(..) | Predicate::In(_) => {
            let Some(pt) = translate(p, false, false) else {
                return false;
            };
            if !pt.negatable {
                return false;
            }
            let Some(qt) = translate(q, false, false) else {
                return false;
            };
            // Every value the query's bounds admit is one the partial filter matches.
            intersect(&qt.ivs, &pt.ivs) == qt.ivs
        }
        _ => false,
    }
}

fn encode(v: &RawBson, descending: bool) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    encode_value(&mut out, v.as_raw_bson_ref(), descending).ok()?;
    Some(out)
}

/// An interval in byte order.
#[derive(Clone, Debug)]
struct ByteInterval {
    lo: Vec<u8>,
    lo_inclusive: bool,
    hi: Vec<u8>,
    hi_inclusive: bool,
}

impl ByteInterval {
    fn is_point(&self) -> bool {
        self.lo_inclusive && self.hi_inclusive && self.lo == self.hi
    }
}

/// The byte intervals of a field's intervals, and whether they are those intervals exactly
/// (false when an end cannot be encoded, e.g. nested deeper than keys allow: the field is
/// then read whole).
fn byte_intervals(f: &FieldBounds) -> (Vec<ByteInterval>, bool) {
    let desc = f.descending;
    let mut out = Vec::with_capacity(f.intervals.len());
    for iv in &f.intervals {
        let s = encode(&iv.start, desc);
        // Both ends of a point are one value: encoded once.
        let e = if same_value(&iv.start, &iv.end) {
            s.clone()
        } else {
            encode(&iv.end, desc)
        };
        let (Some(s), Some(e)) = (s, e) else {
            let (all, _) = byte_intervals(&FieldBounds {
                intervals: vec![Interval::all()],
                ..f.clone()
            });
            return (all, false);
        };
        out.push(if desc {
            ByteInterval {
                lo: e,
                lo_inclusive: iv.end_inclusive,
                hi: s,
                hi_inclusive: iv.start_inclusive,
            }
        } else {
            ByteInterval {
                lo: s,
                lo_inclusive: iv.start_inclusive,
                hi: e,
                hi_inclusive: iv.end_inclusive,
            }
        });
    }
    if desc {
        out.reverse();
    }
    (out, true)
}

/// Whether two values are the same value of the same type with the same bytes (so they
/// encode to the same key); a double by its bits (`0.0` and `-0.0` are not the same here).
fn same_value(a: &RawBson, b: &RawBson) -> bool {
    match (a, b) {
        (RawBson::Double(x), RawBson::Double(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// The least byte string greater than every string starting with `p` (`None`: no such).
fn successor(p: &[u8]) -> Option<Vec<u8>> {
    let mut v = p.to_vec();
    while let Some(last) = v.pop() {
        if last != 0xFF {
            v.push(last + 1);
            return Some(v);
        }
    }
    None
}

/// Groups consecutive intervals into at most `budget` hulls.
fn widen(ivs: Vec<ByteInterval>, budget: usize) -> Vec<ByteInterval> {
    let budget = budget.max(1);
    let chunk = ivs.len().div_ceil(budget).max(1);
    ivs.chunks(chunk)
        .filter_map(|c| {
            let (first, last) = (c.first()?, c.last()?);
            Some(ByteInterval {
                lo: first.lo.clone(),
                lo_inclusive: first.lo_inclusive,
                hi: last.hi.clone(),
                hi_inclusive: last.hi_inclusive,
            })
        })
        .collect()
}

/// A range with an inclusive lower end and an exclusive upper end (`None`: unbounded).
type RawRange = (Option<Vec<u8>>, Option<Vec<u8>>);

fn range_for(prefix: &[u8], b: &ByteInterval) -> Option<RawRange> {
    let lo_key = [prefix, &b.lo].concat();
    let lo = if b.lo_inclusive {
        lo_key
    } else {
        successor(&lo_key)?
    };
    let hi_key = [prefix, &b.hi].concat();
    let hi = if b.hi_inclusive {
        successor(&hi_key)
    } else {
        Some(hi_key)
    };
    Some((Some(lo), hi))
}

fn merge_ranges(mut rs: Vec<RawRange>) -> Vec<RawRange> {
    rs.retain(|(lo, hi)| match (lo, hi) {
        (Some(l), Some(h)) => l < h,
        _ => true,
    });
    if rs.len() < 2 {
        // Nothing to order or merge.
        return rs;
    }
    rs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<RawRange> = Vec::with_capacity(rs.len());
    for r in rs {
        if let Some(cur) = out.last_mut() {
            let overlaps = match (&cur.1, &r.0) {
                (None, _) => true,
                (Some(h), Some(l)) => l <= h,
                (Some(_), None) => true,
            };
            if overlaps {
                cur.1 = match (cur.1.take(), r.1) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                continue;
            }
        }
        out.push(r);
    }
    out
}

fn to_bounds(r: RawRange) -> KeyRange {
    (
        r.0.map_or(Bound::Unbounded, Bound::Included),
        r.1.map_or(Bound::Unbounded, Bound::Excluded),
    )
}

impl IndexBounds {
    /// Bounds admitting every entry of an index with these components.
    pub fn full(components: &[KeyComponent]) -> IndexBounds {
        IndexBounds {
            fields: components
                .iter()
                .map(|c| FieldBounds {
                    path: c.path.clone(),
                    descending: c.kind == KeyKind::Descending,
                    hashed: c.kind == KeyKind::Hashed,
                    intervals: vec![Interval::all()],
                })
                .collect(),
            multikey: false,
            exact: false,
        }
    }

    /// True when no entry can match (some field has no interval).
    pub fn is_empty(&self) -> bool {
        self.fields.iter().any(|f| f.intervals.is_empty())
    }

    /// The multikey flag the bounds were built with.
    pub fn multikey(&self) -> bool {
        self.multikey
    }

    /// Byte ranges over the index space covering every entry inside the bounds: the points of
    /// a prefix of all-point fields (their cartesian product), then one range field, then
    /// open. Sorted, disjoint, at most [`MAX_RANGES`].
    pub fn key_ranges(&self) -> Vec<KeyRange> {
        self.ranges_and_tightness().0
    }

    /// [`IndexBounds::key_ranges`] in scan order: reversed for a backward scan (each range is
    /// then read from its upper end).
    pub fn scan_ranges(&self, reverse: bool) -> Vec<KeyRange> {
        let mut r = self.key_ranges();
        if reverse {
            r.reverse();
        }
        r
    }

    /// The ranges, and whether they hold exactly the entries inside the bounds.
    fn ranges_and_tightness(&self) -> (Vec<KeyRange>, bool) {
        let mut tight = true;
        let mut per: Vec<Vec<ByteInterval>> = self
            .fields
            .iter()
            .map(|f| {
                let (b, encoded) = byte_intervals(f);
                tight &= encoded;
                b
            })
            .collect();
        if per.iter().any(Vec::is_empty) {
            return (Vec::new(), true);
        }
        let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
        let mut i = 0;
        while let Some(f) = per.get_mut(i) {
            let all_points = f.iter().all(ByteInterval::is_point);
            if !all_points || prefixes.len().saturating_mul(f.len()) > MAX_RANGES {
                break;
            }
            // A field taken into the prefixes is not read again.
            let f = std::mem::take(f);
            prefixes = if i == 0 {
                // The only prefix is empty: each point is a prefix as it is.
                f.into_iter().map(|b| b.lo).collect()
            } else {
                prefixes
                    .iter()
                    .flat_map(|p| f.iter().map(move |b| [p.as_slice(), &b.lo].concat()))
                    .collect()
            };
            i += 1;
        }
        let mut ranges: Vec<RawRange> = Vec::new();
        let range_field = per
            .get(i)
            .filter(|_| self.fields.get(i).is_some_and(|fb| !fb.is_full()));
        let open_from = if range_field.is_some() { i + 1 } else { i };
        if self.fields.iter().skip(open_from).any(|f| !f.is_full()) {
            tight = false;
        }
        match range_field {
            Some(f) => {
                let budget = (MAX_RANGES / prefixes.len().max(1)).max(1);
                let widened;
                let f: &[ByteInterval] = if f.len() > budget {
                    tight = false;
                    widened = widen(f.clone(), budget);
                    &widened
                } else {
                    f
                };
                for p in &prefixes {
                    for b in f {
                        if let Some(r) = range_for(p, b) {
                            ranges.push(r);
                        }
                    }
                }
            }
            None => {
                for p in prefixes {
                    if p.is_empty() {
                        ranges.push((None, None));
                    } else {
                        let hi = successor(&p);
                        ranges.push((Some(p), hi));
                    }
                }
            }
        }
        let merged = merge_ranges(ranges);
        (merged.into_iter().map(to_bounds).collect(), tight)
    }

    /// True when every entry inside [`IndexBounds::key_ranges`] belongs to a document
    /// matching `expr` and vice versa, so a count or covered query needs no fetch and no
    /// residual filter. Conservative.
    pub fn is_exact_for(&self, expr: &Expr) -> bool {
        let comps: Vec<KeyComponent> = self.fields.iter().map(FieldBounds::component).collect();
        let again = build(expr, comps, self.multikey);
        again.exact
            && !self.fields.iter().any(|f| f.hashed)
            && again.fields == self.fields
            && self.ranges_and_tightness().1
    }

    /// [`IndexBounds::key_ranges`] and [`IndexBounds::is_exact_for`] the filter these bounds
    /// were built from (by [`bounds_for`] or [`bounds_for_index`]), in one pass: building
    /// them again from that filter would give these same bounds, so their own exactness
    /// decides, with the ranges' tightness.
    pub fn ranges_and_exactness(&self) -> (Vec<KeyRange>, bool) {
        let (ranges, exact, _) = self.planned_ranges();
        (ranges, exact)
    }

    /// [`IndexBounds::ranges_and_exactness`], and whether an entry inside the ranges is
    /// always inside the bounds — the ranges are tight and no field is hashed — so a scan
    /// need not check entries against the bounds: keys encode values exactly, in order and
    /// prefix-free (`cairn_storage::keys`), so a key lies in a range built from an interval
    /// exactly when its value lies in the interval.
    pub fn planned_ranges(&self) -> (Vec<KeyRange>, bool, bool) {
        let (ranges, tight) = self.ranges_and_tightness();
        let unhashed = !self.fields.iter().any(|f| f.hashed);
        let exact = self.exact && tight && unhashed;
        (ranges, exact, tight && unhashed)
    }

    /// Whether an entry's values (`{"0": v1, …}`, as stored) lie inside every field's
    /// intervals: the residual check for entries of a range that is not tight.
    pub fn contains_values(&self, values: &RawDocument) -> bool {
        let mut it = values.iter();
        self.fields.iter().all(|f| {
            let Some(Ok((_, v))) = it.next() else {
                return false;
            };
            contains_any(&f.intervals, v)
        })
    }

    /// `{field: ["[1, 1]", "(5, inf.0]"], …}` as MongoDB's explain prints `indexBounds`
    /// (descending fields in index order).
    pub fn explain(&self) -> RawDocumentBuf {
        self.explain_scan(false)
    }

    /// [`IndexBounds::explain`] for a scan in the given direction: a backward scan lists
    /// each field's intervals the other way round, as MongoDB prints them.
    pub fn explain_scan(&self, backward: bool) -> RawDocumentBuf {
        let mut doc = RawDocumentBuf::new();
        for f in &self.fields {
            let mut arr = RawArrayBuf::new();
            let strings: Vec<String> = if f.descending != backward {
                f.intervals
                    .iter()
                    .rev()
                    .map(|i| i.to_explain_string(true))
                    .collect()
            } else {
                f.intervals
                    .iter()
                    .map(|i| i.to_explain_string(false))
                    .collect()
            };
            for s in strings {
                arr.push(s);
            }
            if let Ok(name) = <&CStr>::try_from(f.path.as_str()) {
                doc.append(name, arr);
            }
        }
        doc
    }
}

/// Whether scanning `bounds`' ranges yields entries in `sort` order: `Some(false)` forward,
/// `Some(true)` backward, `None` when the index cannot provide the sort. Fields bounded to a
/// single point may be skipped; multikey and hashed indexes never provide a sort.
pub fn index_sort_direction(bounds: &IndexBounds, sort: &[SortField]) -> Option<bool> {
    if bounds.multikey || sort.is_empty() {
        return None;
    }
    let mut fields = bounds.fields.iter().peekable();
    let mut direction: Option<bool> = None;
    for s in sort {
        // Skip fields pinned to one value, unless the sort names them.
        while let Some(f) = fields.peek() {
            if f.path != s.path && matches!(f.intervals.as_slice(), [one] if one.is_point()) {
                fields.next();
            } else {
                break;
            }
        }
        let f = fields.next()?;
        if f.path != s.path || f.hashed {
            return None;
        }
        // Forward scan yields the field ascending unless it is descending.
        let reverse = f.descending == s.ascending;
        match direction {
            None => direction = Some(reverse),
            Some(d) if d != reverse => return None,
            Some(_) => {}
        }
    }
    direction
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    /// Ends that are the same value are encoded once: the bytes are those of encoding each
    /// end, for every kind of value and both directions; ends that only compare equal
    /// (`-0.0` and `0.0`, `5` and `5.0`) are encoded each.
    #[test]
    fn byte_intervals_encode_each_end_as_encoding_it() {
        let mut array = RawArrayBuf::new();
        array.push(1);
        array.push("x");
        let values = vec![
            RawBson::String("x".into()),
            RawBson::String(String::new()),
            RawBson::Int32(5),
            RawBson::Int64(5),
            RawBson::Double(5.0),
            RawBson::Double(0.0),
            RawBson::Double(-0.0),
            RawBson::Double(f64::NAN),
            RawBson::Decimal128(bson::Decimal128::from_bytes([0; 16])),
            RawBson::Null,
            RawBson::Undefined,
            RawBson::Boolean(true),
            RawBson::Document(rawdoc! {"a": 1, "b": {"c": "d"}}),
            RawBson::Array(array),
            RawBson::MinKey,
            RawBson::MaxKey,
        ];
        let mut intervals: Vec<Interval> = values.iter().cloned().map(Interval::point).collect();
        intervals.push(Interval::new(
            RawBson::Double(-0.0),
            true,
            RawBson::Double(0.0),
            true,
        ));
        intervals.push(Interval::new(
            RawBson::Int32(5),
            true,
            RawBson::Double(5.0),
            true,
        ));
        intervals.push(Interval::new(
            RawBson::Int32(1),
            true,
            RawBson::Int32(1),
            false,
        ));
        intervals.push(Interval::new(
            RawBson::Int32(1),
            false,
            RawBson::Int32(9),
            true,
        ));
        for descending in [false, true] {
            for iv in &intervals {
                let f = FieldBounds {
                    path: "a".into(),
                    descending,
                    hashed: false,
                    intervals: vec![iv.clone()],
                };
                let (b, encoded) = byte_intervals(&f);
                let s = encode(&iv.start, descending).unwrap();
                let e = encode(&iv.end, descending).unwrap();
                let (lo, hi) = if descending { (e, s) } else { (s, e) };
                assert!(encoded, "{iv:?}");
                assert_eq!(b.len(), 1, "{iv:?}");
                assert_eq!((&b[0].lo, &b[0].hi), (&lo, &hi), "{iv:?} desc {descending}");
            }
        }
    }
}
