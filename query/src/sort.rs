//! Sort specifications and MongoDB 7.0's sort-key semantics (`find`'s `sort`, `$sort`).
//!
//! Parsing follows src/mongo/db/query/sort_pattern.cpp (7.0): each field is either a number
//! whose `safeNumberLong` value is 1 or -1 (so `1.5` and `-1.9` are accepted, `0`, `2`, `42.1`
//! are 15975), or a `{$meta: …}` document; anything else is 15974 `Illegal key in $sort
//! specification: <elem>`. Field names must be valid `FieldPath`s (40352, 40353, 15998, 16410).
//! Duplicate fields are accepted (7.0; 7.1 added 7472500). At most 32 fields (13103, from
//! `Ordering::make`). A `$natural` field anywhere makes the whole sort a `$natural` hint
//! (canonical_query.cpp), reported by [`SortSpec::natural`]. `$meta` sorts are validated
//! (17312, FailedToParse, 17307, 17308, 31138) and then NotImplemented.
//!
//! Sort keys follow src/mongo/db/index/sort_key_generator.cpp: a document sorts as an index
//! over the sort pattern would order it, i.e. by the *smallest* of the keys
//! `BtreeKeyGenerator` (btree_key_generator.cpp) produces for it, under the pattern's
//! directions:
//! - a missing field (or a scalar met before the path ends) gives `null`, so missing and
//!   `null` tie; a BSON `undefined` value stays `undefined`, which sorts *below* `null`;
//! - an array met along the path is expanded one level: one key per element, documents
//!   entered with the rest of the path, non-document elements giving `null` for the rest of
//!   the path (so `a.b` over `[{b: 5}, 7]` has keys `5` and `null`);
//! - an array at the end of the path gives one key per element, the elements themselves
//!   (nested arrays are *not* expanded further: `[[1, 2], [0]]` has keys `[1, 2]` and `[0]`);
//! - an empty array gives `undefined` when it ends the path (so `[]` sorts before `null` and
//!   missing) and `null` for the rest of the path otherwise;
//! - ascending takes the smallest key, descending the largest; with several fields the key
//!   is the smallest *tuple* under the per-field directions, not a per-field extremum;
//! - two fields that expand two different arrays are "parallel arrays": BadValue "cannot sort
//!   with keys that are parallel arrays"; a numeric component that names both an array
//!   position and a field of an element is 16746 (ambiguous field name).
//!
//! Keys compare with [`cairn_storage::compare::compare_values`] (MongoDB's `woCompare`).
//! [`SortSpec::key`] extracts a [`SortKey`] once per document so that sorting `n` documents
//! costs `n` extractions; [`Sorter`] (in [`sorter`]) sorts documents with a memory limit,
//! top-k and external spilling.
//!
//! Invariants: never panics on any input (malformed BSON ends the container it is in);
//! key extraction recursion is bounded by the number of path components (at most
//! [`MAX_PATH_COMPONENTS`]); [`SortKey`]'s order is total and consistent with its equality.

pub mod sorter;

use std::cmp::Ordering;

use bson::raw::{RawArray, RawBson, RawBsonRef, RawDocument};
use cairn_storage::compare::compare_values;
use cairn_storage::decimal::Decimal;
use cairn_storage::display;

use crate::error::{QueryError, Result};
use crate::path;

pub use sorter::{DEFAULT_MEMORY_LIMIT_BYTES, SortStats, SortedDocs, Sorter};

/// The most fields a sort pattern may have (MongoDB's `Ordering` holds 32 direction bits).
pub const MAX_SORT_FIELDS: usize = 32;

/// The most components a field path may have (`BSONDepth::getMaxAllowableDepth()`).
pub const MAX_PATH_COMPONENTS: usize = 200;

/// `$meta` names MongoDB 7.0's `ExpressionMeta` knows.
pub(crate) const META_NAMES: &[&str] = &[
    "textScore",
    "randVal",
    "searchScore",
    "searchHighlights",
    "geoNearDistance",
    "geoNearPoint",
    "recordId",
    "indexKey",
    "sortKey",
    "searchScoreDetails",
    "timeseriesBucketMinTime",
    "timeseriesBucketMaxTime",
    "vectorSearchScore",
];

/// `$meta` names a sort may use.
const META_SORT_NAMES: &[&str] = &["textScore", "randVal", "searchScore", "vectorSearchScore"];

/// One field of a sort pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortField {
    /// The dotted path as written.
    pub path: String,
    /// True for 1, false for -1.
    pub ascending: bool,
}

/// A parsed sort pattern.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SortSpec {
    fields: Vec<SortField>,
    /// Bit `i` set when field `i` is descending.
    desc: u32,
    /// True when some field's path is dotted (not a top-level name).
    dotted: bool,
    natural: Option<bool>,
}

impl SortSpec {
    /// Parses a sort document (`find`'s `sort`, `$sort`'s argument).
    pub fn parse(spec: &RawDocument) -> Result<SortSpec> {
        let mut elems = Vec::new();
        for el in spec.iter() {
            let (k, v) = el.map_err(|e| QueryError::BadValue(format!("invalid sort: {e}")))?;
            elems.push((k.as_str(), v));
        }
        // canonical_query.cpp: a $natural field turns the whole sort into a hint.
        if let Some((_, v)) = elems.iter().find(|(k, _)| *k == "$natural") {
            let forward = safe_number_long(*v).is_none_or(|n| n >= 0);
            return Ok(SortSpec {
                fields: Vec::new(),
                desc: 0,
                dotted: false,
                natural: Some(forward),
            });
        }
        let mut fields = Vec::with_capacity(elems.len());
        for (name, v) in elems {
            if let RawBsonRef::Document(meta) = v {
                parse_meta_sort(meta)?;
                // parse_meta_sort always errors (NotImplemented at the end).
                continue;
            }
            let Some(direction) = safe_number_long(v) else {
                return Err(QueryError::Location(
                    15974,
                    format!(
                        "Illegal key in $sort specification: {name}: {}",
                        display::value(v)
                    ),
                ));
            };
            if direction != 1 && direction != -1 {
                return Err(QueryError::Location(
                    15975,
                    "$sort key ordering must be 1 (for ascending) or -1 (for descending)".into(),
                ));
            }
            validate_field_path(name)?;
            if fields.len() >= MAX_SORT_FIELDS {
                return Err(QueryError::Location(13103, "too many compound keys".into()));
            }
            fields.push(SortField {
                path: name.to_string(),
                ascending: direction > 0,
            });
        }
        Ok(SortSpec::of(fields))
    }

    /// A spec from fields (for callers that build sorts themselves, e.g. `$sort` after
    /// `$group`). Fails like [`SortSpec::parse`] on invalid paths or too many fields.
    pub fn from_fields(fields: Vec<SortField>) -> Result<SortSpec> {
        if fields.len() > MAX_SORT_FIELDS {
            return Err(QueryError::Location(13103, "too many compound keys".into()));
        }
        for f in &fields {
            validate_field_path(&f.path)?;
        }
        Ok(SortSpec::of(fields))
    }

    /// The spec of validated `fields` (at most [`MAX_SORT_FIELDS`]), with what is derived from
    /// them: the descending bits and whether a path is dotted.
    fn of(fields: Vec<SortField>) -> SortSpec {
        let desc = fields
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.ascending)
            .fold(0u32, |d, (i, _)| d | 1 << i);
        let dotted = fields.iter().any(|f| f.path.contains('.'));
        SortSpec {
            fields,
            desc,
            dotted,
            natural: None,
        }
    }

    /// The fields, in order.
    pub fn fields(&self) -> &[SortField] {
        &self.fields
    }

    /// True when there is nothing to sort by (`{}`, or a `$natural` sort).
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// `Some(forward)` when the sort was a `$natural` sort: MongoDB then clears the sort and
    /// uses the spec as a `$natural` hint (forward for a non-negative value).
    pub fn natural(&self) -> Option<bool> {
        self.natural
    }

    /// The sort key of `doc` (see the module docs). Errors: parallel arrays (BadValue),
    /// ambiguous numeric field names (16746).
    pub fn key(&self, doc: &RawDocument) -> Result<SortKey> {
        let n = self.fields.len();
        if n == 0 {
            return Ok(SortKey {
                values: Vec::new(),
                desc: 0,
            });
        }
        // Top-level fields holding no arrays: the key is their values (missing: null),
        // read in place without the general walk's bookkeeping.
        if let Some(values) = self.top_level_key(doc) {
            return Ok(SortKey {
                values,
                desc: self.desc,
            });
        }
        let mut keygen = KeyGen {
            desc: self.desc,
            best: None,
        };
        let mut names: Vec<&str> = self.fields.iter().map(|f| f.path.as_str()).collect();
        let mut fixed = vec![RawBsonRef::Null; n];
        let pos = vec![PosInfo::default(); n];
        keygen.keys_with_array(&mut names, &mut fixed, Cont::Doc(doc), &pos, 0)?;
        let best = keygen.best.unwrap_or(fixed);
        Ok(SortKey {
            values: best.into_iter().map(RawBson::from).collect(),
            desc: self.desc,
        })
    }

    /// The key when every field is a top-level name whose value is not an array (`None`
    /// otherwise: the general walk handles paths and arrays).
    fn top_level_key(&self, doc: &RawDocument) -> Option<Vec<RawBson>> {
        let mut values = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            values.push(RawBson::from(top_level_value(doc, &f.path)?));
        }
        Some(values)
    }

    /// How `doc`'s sort key compares with `key`, read in place without building the key —
    /// `None` unless every sort field is a top-level name whose value in `doc` is not an
    /// array (then [`SortSpec::key`] would take its general walk, or fail on parallel
    /// arrays). Each field is read by [`crate::expr::field::field`], a walk over the raw
    /// bytes; every field is read before answering, so that an array anywhere still sends
    /// the document to the general walk (and its errors) — except the last field once the
    /// earlier ones (none an array) have decided: an array there alone raises no error
    /// (parallel arrays need two) and only changes the key's last component, which the
    /// comparison never reaches.
    pub(crate) fn compare_with_key(&self, doc: &RawDocument, key: &SortKey) -> Option<Ordering> {
        let mut result = Ordering::Equal;
        let last = self.fields.len().saturating_sub(1);
        if self.dotted {
            return None;
        }
        for (i, (f, kv)) in self.fields.iter().zip(&key.values).enumerate() {
            if i == last && result != Ordering::Equal {
                break;
            }
            let v = match crate::expr::field::field(doc, &f.path) {
                Some(RawBsonRef::Array(_)) => return None,
                Some(v) => v,
                None => RawBsonRef::Null,
            };
            if result == Ordering::Equal {
                result = directed(self.desc, i, compare_key_value(v, kv));
            }
        }
        Some(result.then(self.fields.len().cmp(&key.values.len())))
    }

    /// Compares two documents by their sort keys. A document whose key cannot be computed
    /// (parallel arrays) sorts as if every key field were null; use [`SortSpec::try_compare`]
    /// or [`SortSpec::key`] to surface that error.
    pub fn compare(&self, a: &RawDocument, b: &RawDocument) -> Ordering {
        let null_key = || SortKey {
            values: vec![RawBson::Null; self.fields.len()],
            desc: self.desc,
        };
        let ka = self.key(a).unwrap_or_else(|_| null_key());
        let kb = self.key(b).unwrap_or_else(|_| null_key());
        ka.cmp(&kb)
    }

    /// Compares two documents by their sort keys, failing when a key cannot be computed.
    pub fn try_compare(&self, a: &RawDocument, b: &RawDocument) -> Result<Ordering> {
        Ok(self.key(a)?.cmp(&self.key(b)?))
    }
}

/// [`compare_values`] of `v` and the key value `kv`, with two int32s or two int64s compared
/// directly (what `compare_values` answers for them: same type, numeric order).
fn compare_key_value(v: RawBsonRef<'_>, kv: &RawBson) -> Ordering {
    match (v, kv) {
        (RawBsonRef::Int32(a), RawBson::Int32(b)) => a.cmp(b),
        (RawBsonRef::Int64(a), RawBson::Int64(b)) => a.cmp(b),
        _ => compare_values(v, kv.as_raw_bson_ref()),
    }
}

/// A document's precomputed sort key: one value per sort field, compared field by field with
/// MongoDB's value order, each field reversed when descending.
#[derive(Clone, Debug)]
pub struct SortKey {
    values: Vec<RawBson>,
    desc: u32,
}

impl SortKey {
    /// The key's values, one per sort field (`null` for missing, `undefined` for `[]`).
    pub fn values(&self) -> &[RawBson] {
        &self.values
    }

    /// Rebuilds a key from values and the spec it belongs to (used when reading spilled runs).
    pub(crate) fn from_parts(values: Vec<RawBson>, spec: &SortSpec) -> SortKey {
        SortKey {
            values,
            desc: spec.desc,
        }
    }

    /// Approximate heap bytes held by the key (for memory accounting).
    pub fn approximate_size(&self) -> usize {
        self.values
            .iter()
            .map(|v| std::mem::size_of::<RawBson>() + heap_size(v))
            .sum::<usize>()
            + std::mem::size_of::<SortKey>()
    }
}

fn heap_size(v: &RawBson) -> usize {
    match v {
        RawBson::String(s) | RawBson::Symbol(s) | RawBson::JavaScriptCode(s) => s.len(),
        RawBson::Document(d) => d.as_bytes().len(),
        RawBson::Array(a) => a.as_bytes().len(),
        RawBson::Binary(b) => b.bytes.len(),
        RawBson::RegularExpression(r) => r.pattern.as_str().len() + r.options.as_str().len(),
        RawBson::JavaScriptCodeWithScope(c) => c.code.len() + c.scope.as_bytes().len(),
        RawBson::DbPointer(_) => 32,
        _ => 0,
    }
}

impl PartialEq for SortKey {
    fn eq(&self, other: &SortKey) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for SortKey {}

impl PartialOrd for SortKey {
    fn partial_cmp(&self, other: &SortKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SortKey {
    fn cmp(&self, other: &SortKey) -> Ordering {
        for (i, (a, b)) in self.values.iter().zip(other.values.iter()).enumerate() {
            let c = directed(
                self.desc,
                i,
                compare_values(a.as_raw_bson_ref(), b.as_raw_bson_ref()),
            );
            if c != Ordering::Equal {
                return c;
            }
        }
        self.values.len().cmp(&other.values.len())
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing helpers
// ---------------------------------------------------------------------------------------------

/// `SortPattern`'s `$meta` branch: validates like MongoDB, then NotImplemented.
fn parse_meta_sort(meta: &RawDocument) -> Result<()> {
    let mut it = meta.iter();
    let first = it.next().and_then(|e| e.ok());
    let Some((k, v)) = first.filter(|(k, _)| k.as_str() == "$meta") else {
        return Err(QueryError::Location(
            17312,
            "$meta is the only expression supported by $sort right now".into(),
        ));
    };
    if it.next().is_some() {
        return Err(QueryError::FailedToParse(
            "Cannot have additional keys in a $meta sort specification".into(),
        ));
    }
    let RawBsonRef::String(name) = v else {
        return Err(QueryError::Location(
            17307,
            "$meta only supports string arguments".into(),
        ));
    };
    if !META_NAMES.contains(&name) {
        return Err(QueryError::Location(
            17308,
            format!("Unsupported argument to $meta: {name}"),
        ));
    }
    if !META_SORT_NAMES.contains(&name) {
        return Err(QueryError::Location(
            31138,
            format!("Illegal $meta sort: {}: {}", k.as_str(), display::value(v)),
        ));
    }
    Err(QueryError::NotImplemented(format!(
        "sorting by {{$meta: \"{name}\"}} is not supported yet"
    )))
}

/// MongoDB's `FieldPath` constructor checks, returning the components.
pub(crate) fn validate_field_path(path: &str) -> Result<Vec<&str>> {
    if path.is_empty() {
        return Err(QueryError::Location(
            40352,
            "FieldPath cannot be constructed with empty string".into(),
        ));
    }
    if path.ends_with('.') {
        return Err(QueryError::Location(
            40353,
            "FieldPath must not end with a '.'.".into(),
        ));
    }
    let parts: Vec<&str> = path.split('.').collect();
    if parts.len() > MAX_PATH_COMPONENTS {
        return Err(QueryError::Location(15, "FieldPath is too long".into()));
    }
    for p in &parts {
        validate_field_name(p)?;
    }
    Ok(parts)
}

/// `FieldPath::uassertValidFieldName`.
pub(crate) fn validate_field_name(name: &str) -> Result<()> {
    const ALLOWED_DOLLAR: &[&str] = &[
        "$id",
        "$ref",
        "$db",
        "$sortKey",
        "$recordId",
        "$searchSortValues",
        "$searchScore",
    ];
    if name.is_empty() {
        return Err(QueryError::Location(
            15998,
            "FieldPath field names may not be empty strings.".into(),
        ));
    }
    if name.starts_with('$') && !ALLOWED_DOLLAR.contains(&name) {
        return Err(QueryError::Location(
            16410,
            "FieldPath field names may not start with '$'. Consider using $getField or $setField."
                .into(),
        ));
    }
    if name.contains('\0') {
        return Err(QueryError::Location(
            16411,
            "FieldPath field names may not contain '\0'.".into(),
        ));
    }
    Ok(())
}

/// `BSONElement::safeNumberLong`: `None` for non-numbers; doubles truncate (NaN → 0,
/// saturating); decimals round half to even (NaN → 0, saturating).
pub(crate) fn safe_number_long(v: RawBsonRef<'_>) -> Option<i64> {
    match v {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        // `as` saturates and maps NaN to 0, which is safeNumberLong's clamping.
        RawBsonRef::Double(d) => Some(d as i64),
        RawBsonRef::Decimal128(d) => Some(decimal_to_i64_saturating(Decimal::from_decimal128(d))),
        _ => None,
    }
}

/// A decimal rounded half to even and clamped to `i64` (NaN → 0, ±∞ → the bounds).
pub(crate) fn decimal_to_i64_saturating(d: Decimal) -> i64 {
    match d {
        Decimal::NaN => 0,
        Decimal::Infinite { negative } => {
            if negative {
                i64::MIN
            } else {
                i64::MAX
            }
        }
        Decimal::Finite {
            negative,
            coefficient,
            exponent,
        } => {
            let magnitude: u128 = if coefficient == 0 {
                0
            } else if exponent >= 0 {
                u32::try_from(exponent)
                    .ok()
                    .and_then(|e| 10u128.checked_pow(e))
                    .and_then(|p| coefficient.checked_mul(p))
                    .unwrap_or(u128::MAX)
            } else {
                match 10u128.checked_pow(exponent.unsigned_abs()) {
                    None => 0,
                    Some(p) => {
                        let (q, r) = (coefficient / p, coefficient % p);
                        // r < p <= 10^38 < u128::MAX / 2, so 2r cannot overflow.
                        let twice = r.saturating_mul(2);
                        if twice > p || (twice == p && q % 2 == 1) {
                            q + 1
                        } else {
                            q
                        }
                    }
                }
            };
            if negative {
                if magnitude > i64::MAX as u128 + 1 {
                    i64::MIN
                } else {
                    (magnitude as i128).wrapping_neg() as i64
                }
            } else if magnitude > i64::MAX as u128 {
                i64::MAX
            } else {
                magnitude as i64
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Key generation (BtreeKeyGenerator::_getKeysWithArray, keeping only the smallest key)
// ---------------------------------------------------------------------------------------------

/// A container a path component is looked up in (`BSONObj`, where an array is an object
/// with fields "0", "1", …).
#[derive(Clone, Copy)]
enum Cont<'a> {
    Doc(&'a RawDocument),
    Arr(&'a RawArray),
    Empty,
}

impl<'a> Cont<'a> {
    fn get(self, name: &str) -> Option<RawBsonRef<'a>> {
        match self {
            Cont::Doc(d) => path::field(d, name),
            Cont::Arr(a) => path::array_element(a, name),
            Cont::Empty => None,
        }
    }
}

/// `PositionalPathInfo`: the element a numeric path component selects in the array being
/// expanded, and where that path leads inside it.
#[derive(Clone, Copy, Default)]
struct PosInfo<'a, 'p> {
    /// `positionallyIndexedElt`.
    indexed: Option<RawBsonRef<'a>>,
    /// The array it was found in (for the ambiguity message).
    array: Option<&'a RawArray>,
    /// The path left after `dotted`.
    remaining: &'p str,
    /// `dottedElt`.
    dotted: Option<RawBsonRef<'a>>,
}

fn first_component(path: &str) -> &str {
    path.split('.').next().unwrap_or(path)
}

/// `dotted_path_support::extractElementAtPathOrArrayAlongPath`: the value at `path`, stopping
/// at the first array (whose remaining path is returned with it).
fn extract_at_path_or_array<'a, 'p>(
    mut obj: Cont<'a>,
    mut path: &'p str,
) -> (Option<RawBsonRef<'a>>, &'p str) {
    loop {
        let (first, rest) = match path.split_once('.') {
            Some((f, r)) => (f, r),
            None => (path, ""),
        };
        path = rest;
        match obj.get(first) {
            None => return (None, path),
            Some(v @ RawBsonRef::Array(_)) => return (Some(v), path),
            Some(v) if path.is_empty() => return (Some(v), path),
            Some(RawBsonRef::Document(d)) => obj = Cont::Doc(d),
            Some(_) => return (None, path),
        }
    }
}

fn ambiguous(pos: &PosInfo<'_, '_>, field: &str) -> QueryError {
    let arr = pos.array.map(array_as_object_string).unwrap_or_default();
    QueryError::Location(
        16746,
        format!(
            "Ambiguous field name found in array (do not use numeric field names in embedded \
             elements in an array), field: '{field}' for array: {arr}"
        ),
    )
}

/// An array printed as the object MongoDB sees (`{ 0: …, 1: … }`), cut like MongoDB does.
fn array_as_object_string(a: &RawArray) -> String {
    let mut s = String::from("{");
    let mut first = true;
    for (i, el) in a.into_iter().enumerate() {
        let Ok(v) = el else { break };
        s.push_str(if first { " " } else { ", " });
        first = false;
        s.push_str(&format!("{i}: {}", display::value(v)));
    }
    s.push_str(if first { "}" } else { " }" });
    const MAX: usize = 1024;
    if s.len() < MAX {
        return s;
    }
    let head: String = s.chars().take(MAX / 3).collect();
    let tail: Vec<char> = s.chars().rev().take(MAX / 3).collect();
    let tail: String = tail.into_iter().rev().collect();
    format!("{head} .......... {tail}")
}

/// `c`, the comparison of the `i`-th key values, turned around when that field sorts
/// descending (bit `i` of `desc`).
fn directed(desc: u32, i: usize, c: Ordering) -> Ordering {
    if i < 32 && desc & (1 << i) != 0 {
        c.reverse()
    } else {
        c
    }
}

/// The value a top-level, non-array sort field takes in `doc` (missing: null), read in place;
/// `None` for a dotted path or an array value (the general walk handles those).
fn top_level_value<'a>(doc: &'a RawDocument, path: &str) -> Option<RawBsonRef<'a>> {
    if path.contains('.') {
        return None;
    }
    match doc.get(path) {
        Ok(Some(RawBsonRef::Array(_))) | Err(_) => None,
        Ok(Some(v)) => Some(v),
        Ok(None) => Some(RawBsonRef::Null),
    }
}

fn same_array(a: &RawArray, b: &RawArray) -> bool {
    std::ptr::eq(a.as_bytes().as_ptr(), b.as_bytes().as_ptr())
}

struct KeyGen<'a> {
    desc: u32,
    best: Option<Vec<RawBsonRef<'a>>>,
}

impl<'a> KeyGen<'a> {
    fn cmp_keys(&self, a: &[RawBsonRef<'_>], b: &[RawBsonRef<'_>]) -> Ordering {
        for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
            let c = directed(self.desc, i, compare_values(*x, *y));
            if c != Ordering::Equal {
                return c;
            }
        }
        Ordering::Equal
    }

    fn emit(&mut self, key: &[RawBsonRef<'a>]) {
        let better = match &self.best {
            None => true,
            Some(b) => self.cmp_keys(key, b) == Ordering::Less,
        };
        if better {
            self.best = Some(key.to_vec());
        }
    }

    /// `_extractNextElement`.
    fn extract_next<'p>(
        obj: Cont<'a>,
        pos: &PosInfo<'a, 'p>,
        field: &mut &'p str,
    ) -> Result<(Option<RawBsonRef<'a>>, bool)> {
        let first = first_component(field);
        let have_obj_field = obj.get(first).is_some();
        if have_obj_field && pos.indexed.is_some() {
            return Err(ambiguous(pos, first));
        }
        if have_obj_field {
            let (e, rest) = extract_at_path_or_array(obj, field);
            *field = rest;
            return Ok((e, false));
        }
        if let Some(ix) = pos.indexed {
            let nested = matches!(ix, RawBsonRef::Array(_));
            *field = pos.remaining;
            return Ok((pos.dotted, nested));
        }
        Ok((None, false))
    }

    /// `_getKeysWithArray`.
    fn keys_with_array<'p>(
        &mut self,
        names: &mut [&'p str],
        fixed: &mut [RawBsonRef<'a>],
        obj: Cont<'a>,
        pos: &[PosInfo<'a, 'p>],
        depth: usize,
    ) -> Result<()> {
        if depth > MAX_PATH_COMPONENTS + 1 {
            // Unreachable for valid paths (each level consumes a component); stay safe.
            self.emit(fixed);
            return Ok(());
        }
        let mut arr: Option<&'a RawArray> = None;
        let mut arr_idxs: Vec<usize> = Vec::new();
        let mut may_expand = true;
        for i in 0..names.len() {
            let Some(name) = names.get(i).copied() else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            let p = pos.get(i).copied().unwrap_or_default();
            let mut field = name;
            let (e, nested) = Self::extract_next(obj, &p, &mut field)?;
            if let Some(slot) = names.get_mut(i) {
                *slot = field;
            }
            match e {
                None => {
                    if let Some(f) = fixed.get_mut(i) {
                        *f = RawBsonRef::Null;
                    }
                    if let Some(slot) = names.get_mut(i) {
                        *slot = "";
                    }
                }
                Some(RawBsonRef::Array(a)) => {
                    arr_idxs.push(i);
                    match arr {
                        None => arr = Some(a),
                        Some(prev) if !same_array(prev, a) => {
                            return Err(QueryError::BadValue(
                                "cannot sort with keys that are parallel arrays".into(),
                            ));
                        }
                        Some(_) => {}
                    }
                    if nested {
                        may_expand = false;
                    }
                }
                Some(v) => {
                    if let Some(f) = fixed.get_mut(i) {
                        *f = v;
                    }
                }
            }
        }

        let Some(arr) = arr else {
            self.emit(fixed);
            return Ok(());
        };
        let empty_pos = vec![PosInfo::default(); names.len()];
        if arr.is_empty() || arr.into_iter().next().is_none_or(|e| e.is_err()) {
            // An empty array: matching fields become undefined.
            return self.arr_elt_fixed(
                names,
                fixed,
                RawBsonRef::Undefined,
                arr,
                &arr_idxs,
                true,
                &empty_pos,
                depth,
            );
        }
        let mut sub_pos = empty_pos;
        for i in 0..names.len() {
            let Some(name) = names.get(i).copied() else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            let part = first_component(name);
            let Some(ix) = path::array_element(arr, part) else {
                continue;
            };
            let (dotted, remaining) = extract_at_path_or_array(Cont::Arr(arr), name);
            if let Some(slot) = sub_pos.get_mut(i) {
                *slot = PosInfo {
                    indexed: Some(ix),
                    array: Some(arr),
                    remaining,
                    dotted,
                };
            }
        }
        for el in arr {
            let Ok(el) = el else { break };
            self.arr_elt_fixed(
                names, fixed, el, arr, &arr_idxs, may_expand, &sub_pos, depth,
            )?;
        }
        Ok(())
    }

    /// `_getKeysArrEltFixed`.
    #[allow(clippy::too_many_arguments)]
    fn arr_elt_fixed<'p>(
        &mut self,
        names: &[&'p str],
        fixed: &[RawBsonRef<'a>],
        entry: RawBsonRef<'a>,
        whole: &'a RawArray,
        arr_idxs: &[usize],
        may_expand: bool,
        pos: &[PosInfo<'a, 'p>],
        depth: usize,
    ) -> Result<()> {
        let mut names = names.to_vec();
        let mut fixed = fixed.to_vec();
        for &idx in arr_idxs {
            if names.get(idx).is_some_and(|n| n.is_empty())
                && let Some(f) = fixed.get_mut(idx)
            {
                *f = if may_expand {
                    entry
                } else {
                    RawBsonRef::Array(whole)
                };
            }
        }
        let obj = match entry {
            RawBsonRef::Document(d) => Cont::Doc(d),
            _ => Cont::Empty,
        };
        self.keys_with_array(&mut names, &mut fixed, obj, pos, depth + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn key_strings(spec: &SortSpec, doc: &RawDocument) -> Vec<String> {
        spec.key(doc)
            .unwrap()
            .values()
            .iter()
            .map(|v| display::value(v.as_raw_bson_ref()))
            .collect()
    }

    /// `compare_with_key`'s answers are exactly the built keys' order, and a document it
    /// answers for has a key (no parallel-arrays error skipped).
    #[test]
    fn compare_with_key_matches_built_keys() {
        let docs = [
            rawdoc! {"a": 1, "b": 2, "c": 3},
            rawdoc! {"a": 1, "b": 3},
            rawdoc! {"a": 2_i64, "b": [5, 1], "c": 0},
            rawdoc! {"a": 1.5, "b": [], "c": [1]},
            rawdoc! {"a": [0, 9], "b": 1},
            rawdoc! {"b": 2, "c": [4, 2]},
            rawdoc! {"a": i32::MIN, "b": i64::MAX, "c": "x"},
            rawdoc! {"a": i32::MAX, "b": i64::MIN, "c": null},
            rawdoc! {"a": 1_i64, "b": 2_i64, "c": [3, [1]]},
            rawdoc! {"a": "s", "b": [1, 2], "c": [3, 4]},
            rawdoc! {"a": 2, "b": 2.0, "c": 2_i64},
            rawdoc! {"a": 2, "b": {"x": [1, 2]}},
        ];
        let specs = [
            rawdoc! {"a": 1},
            rawdoc! {"a": -1},
            rawdoc! {"a": 1, "b": 1},
            rawdoc! {"a": -1, "b": 1},
            rawdoc! {"b": 1, "c": -1},
            rawdoc! {"a": 1, "b": -1, "c": 1},
            rawdoc! {"c": -1, "a": 1, "b": 1},
            rawdoc! {"a": 1, "b.x": 1},
        ];
        let mut answered = 0;
        for spec in &specs {
            let spec = SortSpec::parse(spec).unwrap();
            for other in &docs {
                let Ok(key) = spec.key(other) else { continue };
                for doc in &docs {
                    if let Some(c) = spec.compare_with_key(doc, &key) {
                        answered += 1;
                        let built = spec.key(doc).unwrap();
                        assert_eq!(c, built.cmp(&key), "{spec:?} {doc:?} vs {other:?}");
                    }
                }
            }
        }
        assert!(answered > 200, "{answered}");
    }

    /// `compare_key_value` answers as `compare_values`.
    #[test]
    fn compare_key_value_matches_compare_values() {
        let values = [
            RawBson::Int32(i32::MIN),
            RawBson::Int32(-1),
            RawBson::Int32(0),
            RawBson::Int32(7),
            RawBson::Int32(i32::MAX),
            RawBson::Int64(i64::MIN),
            RawBson::Int64(-1),
            RawBson::Int64(7),
            RawBson::Int64(i64::MAX),
            RawBson::Double(7.0),
            RawBson::Double(f64::NAN),
            RawBson::Null,
            RawBson::String("7".into()),
        ];
        for a in &values {
            for b in &values {
                let expected = compare_values(a.as_raw_bson_ref(), b.as_raw_bson_ref());
                assert_eq!(
                    compare_key_value(a.as_raw_bson_ref(), b),
                    expected,
                    "{a:?} {b:?}"
                );
            }
        }
    }

    #[test]
    fn keys_follow_btree_key_generation() {
        let asc = SortSpec::parse(&rawdoc! {"a": 1}).unwrap();
        let desc = SortSpec::parse(&rawdoc! {"a": -1}).unwrap();
        let d = rawdoc! {"a": [3, 1, [0], "x"]};
        assert_eq!(key_strings(&asc, &d), ["1"]);
        assert_eq!(key_strings(&desc, &d), ["[ 0 ]"]);
        let empty = rawdoc! {"a": []};
        assert_eq!(key_strings(&asc, &empty), ["undefined"]);
        let ab = SortSpec::parse(&rawdoc! {"a.b": 1}).unwrap();
        assert_eq!(key_strings(&ab, &empty), ["null"]);
        let mixed = rawdoc! {"a": [{"b": 5}, 7]};
        assert_eq!(key_strings(&ab, &mixed), ["null"]);
        let ab_desc = SortSpec::parse(&rawdoc! {"a.b": -1}).unwrap();
        assert_eq!(key_strings(&ab_desc, &mixed), ["5"]);
    }

    #[test]
    fn decimal_rounding() {
        let d = |s: &str| Decimal::from_decimal128(s.parse::<bson::Decimal128>().unwrap());
        assert_eq!(decimal_to_i64_saturating(d("1.5")), 2);
        assert_eq!(decimal_to_i64_saturating(d("2.5")), 2);
        assert_eq!(decimal_to_i64_saturating(d("-0.6")), -1);
        assert_eq!(decimal_to_i64_saturating(d("1E+30")), i64::MAX);
        assert_eq!(decimal_to_i64_saturating(d("-1E+30")), i64::MIN);
        assert_eq!(decimal_to_i64_saturating(d("NaN")), 0);
    }
}
