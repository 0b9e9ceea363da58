//! MongoDB's canonical comparison of BSON values (`BSONElement::woCompare` /
//! `BSONObj::woCompare` under the simple collation).
//!
//! Invariants:
//! - [`compare_values`] is a total order on well-formed values: reflexive, antisymmetric and
//!   transitive, and `Equal` exactly when [`crate::keys`] produces identical encodings.
//! - Values of different canonical type classes ([`TypeClass`]) order by class alone:
//!   MinKey < missing = Undefined < Null < numbers < String = Symbol < Object < Array < BinData
//!   < ObjectId < Bool < Date < Timestamp < Regex < DBPointer < Code < CodeWithScope < MaxKey
//!   (MongoDB `canonicalizeBSONType`, src/mongo/bson/bsontypes.h).
//! - Numbers of any type compare exactly by value; all NaNs are equal and below −Infinity;
//!   −0 equals 0 (src/mongo/base/compare_numbers.h).
//! - Objects compare element by element: type class, then field name bytes, then value; a
//!   proper prefix sorts first. Arrays compare element by element by value (their keys are
//!   "0", "1", … in well-formed BSON and are not consulted).
//! - Never panics. Malformed nested BSON is ordered deterministically: an element that fails
//!   to parse ends its container and sorts after every well-formed element (two malformed
//!   tails compare equal). Containers nested deeper than [`MAX_COMPARE_DEPTH`] compare by
//!   their raw bytes instead of recursing (no stack overflow); [`crate::keys`] refuses to
//!   encode such values, so the two never disagree on encodable values.
//!
//! MongoDB behaviours reproduced here (paths in the mongodb/mongo repository):
//! - `src/mongo/bson/bsontypes.h` `canonicalizeBSONType`: EOO (missing) and Undefined share
//!   canonical type 0, *below* Null (5); Timestamp (47) is its own class between Date (45)
//!   and Regex (50).
//! - `src/mongo/bson/bsonelement.cpp` `BSONElement::woCompare`: inside objects the canonical
//!   type is compared *before* the field name, so `{b: MinKey} < {a: null}`.
//!   `compareElements`: strings by memcmp then length (plain byte order); BinData by its
//!   int32 length, then memcmp over subtype + payload; DBPointer by value size (namespace
//!   length) then memcmp; CodeWScope by code then scope with field names; Bool by raw byte.
//! - `src/mongo/base/compare_numbers.h`: long vs double is exact (`compareLongToDouble`);
//!   decimal vs double converts the decimal to double rounding toward −∞ and treats an
//!   inexact equal result as "decimal is greater", which is an exact comparison. There is no
//!   rounding of the double to 34 digits in comparisons (`kRoundTo34Digits` appears in
//!   hashing and arithmetic only), so double `0.1` > `Decimal128("0.1")`. Index keys
//!   (`key_string.cpp`, decimal continuation markers) are exact as well.
//! - Differences: array keys are not consulted (MongoDB compares them as field names, which
//!   only matters for non-canonical arrays); strings that are not valid UTF-8 are rejected by
//!   the bson crate and so count as malformed here, where MongoDB compares their bytes.

use std::cmp::Ordering;

use bson::raw::{
    RawArray, RawBinaryRef, RawBsonRef, RawDbPointerRef, RawDocument, RawDocumentBuf, RawIter,
};
use bson::spec::{BinarySubtype, ElementType};

use crate::decimal::{self, Decimal};

/// Nesting depth (containers inside containers) beyond which comparison falls back to raw
/// bytes. Equal to [`crate::keys::DEFAULT_MAX_DEPTH`].
pub const MAX_COMPARE_DEPTH: usize = 200;

/// MongoDB's canonical type classes, in sort order. Values of different classes compare by
/// class; values of the same class compare by value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TypeClass {
    /// MinKey (below everything).
    MinKey,
    /// A missing field (BSON EOO) or BSON Undefined: MongoDB gives both canonical type 0, below
    /// Null, and they compare equal to each other.
    Missing,
    /// Null.
    Null,
    /// int32, int64, double and Decimal128.
    Number,
    /// String and Symbol.
    String,
    /// Embedded document.
    Object,
    /// Array.
    Array,
    /// Binary data.
    BinData,
    /// ObjectId.
    ObjectId,
    /// Boolean.
    Bool,
    /// UTC datetime.
    Date,
    /// Timestamp.
    Timestamp,
    /// Regular expression.
    Regex,
    /// DBPointer (deprecated).
    DbPointer,
    /// JavaScript code.
    Code,
    /// JavaScript code with scope.
    CodeWithScope,
    /// MaxKey (above everything).
    MaxKey,
}

impl TypeClass {
    /// The class of a value.
    pub fn of(v: RawBsonRef<'_>) -> TypeClass {
        TypeClass::of_element_type(v.element_type())
    }

    /// The class of a BSON element type.
    pub fn of_element_type(t: ElementType) -> TypeClass {
        match t {
            ElementType::MinKey => TypeClass::MinKey,
            ElementType::Undefined => TypeClass::Missing,
            ElementType::Null => TypeClass::Null,
            ElementType::Double
            | ElementType::Int32
            | ElementType::Int64
            | ElementType::Decimal128 => TypeClass::Number,
            ElementType::String | ElementType::Symbol => TypeClass::String,
            ElementType::EmbeddedDocument => TypeClass::Object,
            ElementType::Array => TypeClass::Array,
            ElementType::Binary => TypeClass::BinData,
            ElementType::ObjectId => TypeClass::ObjectId,
            ElementType::Boolean => TypeClass::Bool,
            ElementType::DateTime => TypeClass::Date,
            ElementType::Timestamp => TypeClass::Timestamp,
            ElementType::RegularExpression => TypeClass::Regex,
            ElementType::DbPointer => TypeClass::DbPointer,
            ElementType::JavaScriptCode => TypeClass::Code,
            ElementType::JavaScriptCodeWithScope => TypeClass::CodeWithScope,
            ElementType::MaxKey => TypeClass::MaxKey,
        }
    }

    /// MongoDB's `canonicalizeBSONType` number for this class (MinKey −1, missing/Undefined 0,
    /// Null 5, numbers 10, strings 15, Object 20, Array 25, BinData 30, ObjectId 35, Bool 40,
    /// Date 45, Timestamp 47, Regex 50, DBPointer 55, Code 60, CodeWithScope 65, MaxKey 127).
    pub fn mongo_order(self) -> i32 {
        match self {
            TypeClass::MinKey => -1,
            TypeClass::Missing => 0,
            TypeClass::Null => 5,
            TypeClass::Number => 10,
            TypeClass::String => 15,
            TypeClass::Object => 20,
            TypeClass::Array => 25,
            TypeClass::BinData => 30,
            TypeClass::ObjectId => 35,
            TypeClass::Bool => 40,
            TypeClass::Date => 45,
            TypeClass::Timestamp => 47,
            TypeClass::Regex => 50,
            TypeClass::DbPointer => 55,
            TypeClass::Code => 60,
            TypeClass::CodeWithScope => 65,
            TypeClass::MaxKey => 127,
        }
    }
}

/// MongoDB's canonical type number of a value (see [`TypeClass::mongo_order`]).
pub fn canonical_type_order(v: RawBsonRef<'_>) -> i32 {
    TypeClass::of(v).mongo_order()
}

/// Compares two values as MongoDB does (`BSONElement::woCompare` without field names).
pub fn compare_values(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> Ordering {
    cmp_value(a, b, 0)
}

/// Compares two possibly-missing values; `None` is a missing field, which sorts with
/// Undefined (below Null).
pub fn compare_optional(a: Option<RawBsonRef<'_>>, b: Option<RawBsonRef<'_>>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => compare_values(a, b),
        (None, None) => Ordering::Equal,
        (None, Some(b)) => TypeClass::Missing.cmp(&TypeClass::of(b)),
        (Some(a), None) => TypeClass::of(a).cmp(&TypeClass::Missing),
    }
}

/// Compares two documents as MongoDB's `BSONObj::woCompare` with field names considered.
/// Equals `compare_values` of the two documents wrapped as embedded-document values.
pub fn compare_documents(a: &RawDocument, b: &RawDocument) -> Ordering {
    cmp_docs(a, b, 1)
}

/// Compares two arrays element by element (as `compare_values` does for array values).
pub fn compare_arrays(a: &RawArray, b: &RawArray) -> Ordering {
    cmp_arrays(a, b, 1)
}

fn cmp_value(a: RawBsonRef<'_>, b: RawBsonRef<'_>, depth: usize) -> Ordering {
    let (ca, cb) = (TypeClass::of(a), TypeClass::of(b));
    if ca != cb {
        return ca.cmp(&cb);
    }
    cmp_same_class(a, b, depth)
}

/// Compares two values already known to share a type class.
fn cmp_same_class(a: RawBsonRef<'_>, b: RawBsonRef<'_>, depth: usize) -> Ordering {
    use RawBsonRef as V;
    match (a, b) {
        (V::String(x) | V::Symbol(x), V::String(y) | V::Symbol(y)) => {
            x.as_bytes().cmp(y.as_bytes())
        }
        (V::Document(x), V::Document(y)) => cmp_docs(x, y, depth + 1),
        (V::Array(x), V::Array(y)) => cmp_arrays(x, y, depth + 1),
        (V::Binary(x), V::Binary(y)) => cmp_binary(&x, &y),
        (V::ObjectId(x), V::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (V::Boolean(x), V::Boolean(y)) => x.cmp(&y),
        (V::DateTime(x), V::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (V::Timestamp(x), V::Timestamp(y)) => (x.time, x.increment).cmp(&(y.time, y.increment)),
        (V::RegularExpression(x), V::RegularExpression(y)) => x
            .pattern
            .as_str()
            .as_bytes()
            .cmp(y.pattern.as_str().as_bytes())
            .then_with(|| {
                x.options
                    .as_str()
                    .as_bytes()
                    .cmp(y.options.as_str().as_bytes())
            }),
        (V::DbPointer(x), V::DbPointer(y)) => cmp_db_pointers(x, y),
        (V::JavaScriptCode(x), V::JavaScriptCode(y)) => x.as_bytes().cmp(y.as_bytes()),
        (V::JavaScriptCodeWithScope(x), V::JavaScriptCodeWithScope(y)) => x
            .code
            .as_bytes()
            .cmp(y.code.as_bytes())
            .then_with(|| cmp_docs(x.scope, y.scope, depth + 1)),
        _ => match (Num::of(a), Num::of(b)) {
            (Some(x), Some(y)) => cmp_numbers(x, y),
            // MinKey, MaxKey, Null, Undefined: the class is the whole value.
            _ => Ordering::Equal,
        },
    }
}

/// One position in a container: an element, the end, or a parse failure (which ends it).
enum Item<'a> {
    End,
    Malformed,
    Elem(&'a str, RawBsonRef<'a>),
}

fn cmp_items(a: Item<'_>, b: Item<'_>, depth: usize) -> Option<Ordering> {
    match (a, b) {
        (Item::End, Item::End) | (Item::Malformed, Item::Malformed) => Some(Ordering::Equal),
        (Item::End, _) | (_, Item::Malformed) => Some(Ordering::Less),
        (_, Item::End) | (Item::Malformed, _) => Some(Ordering::Greater),
        (Item::Elem(ka, va), Item::Elem(kb, vb)) => {
            let o = TypeClass::of(va)
                .cmp(&TypeClass::of(vb))
                .then_with(|| ka.as_bytes().cmp(kb.as_bytes()))
                .then_with(|| cmp_same_class(va, vb, depth));
            if o == Ordering::Equal { None } else { Some(o) }
        }
    }
}

fn cmp_docs(a: &RawDocument, b: &RawDocument, depth: usize) -> Ordering {
    if depth > MAX_COMPARE_DEPTH {
        return a.as_bytes().cmp(b.as_bytes());
    }
    let (mut ia, mut ib) = (a.iter_elements(), b.iter_elements());
    loop {
        if let Some(o) = cmp_items(doc_item(&mut ia), doc_item(&mut ib), depth) {
            return o;
        }
    }
}

fn doc_item<'a>(it: &mut RawIter<'a>) -> Item<'a> {
    match it.next() {
        None => Item::End,
        Some(Err(_)) => Item::Malformed,
        Some(Ok(elem)) => match elem.value() {
            Ok(v) => Item::Elem(elem.key().as_str(), v),
            Err(_) => Item::Malformed,
        },
    }
}

fn array_item<'a>(it: &mut bson::raw::RawArrayIter<'a>) -> Item<'a> {
    match it.next() {
        None => Item::End,
        Some(Err(_)) => Item::Malformed,
        Some(Ok(v)) => Item::Elem("", v),
    }
}

fn cmp_arrays(a: &RawArray, b: &RawArray, depth: usize) -> Ordering {
    if depth > MAX_COMPARE_DEPTH {
        return a.as_bytes().cmp(b.as_bytes());
    }
    let (mut ia, mut ib) = (a.into_iter(), b.into_iter());
    loop {
        if let Some(o) = cmp_items(array_item(&mut ia), array_item(&mut ib), depth) {
            return o;
        }
    }
}

/// BinData order: declared length, then subtype, then bytes (`compareElements`, BinData case:
/// length compare, then memcmp over subtype + payload). For the old binary subtype 2 the bson
/// crate strips the inner 4-byte length, which MongoDB counts in the length and compares as
/// part of the payload; it is reconstructed here.
pub(crate) fn binary_parts(b: &RawBinaryRef<'_>) -> (u64, u8) {
    let subtype = u8::from(b.subtype);
    let len = b.bytes.len() as u64;
    if b.subtype == BinarySubtype::BinaryOld {
        (len + 4, subtype)
    } else {
        (len, subtype)
    }
}

fn cmp_binary(a: &RawBinaryRef<'_>, b: &RawBinaryRef<'_>) -> Ordering {
    // Payloads of equal (length, subtype) have equal inner lengths too, so comparing the
    // visible bytes afterwards is the same as MongoDB's memcmp.
    binary_parts(a)
        .cmp(&binary_parts(b))
        .then_with(|| a.bytes.cmp(b.bytes))
}

/// The namespace bytes and ObjectId of a DBPointer. The bson crate keeps these fields private,
/// so the value is re-serialised and read back from its wire form
/// (int32 length, namespace, NUL, 12-byte id).
pub(crate) fn db_pointer_parts(p: RawDbPointerRef<'_>) -> Option<(Vec<u8>, [u8; 12])> {
    let mut doc = RawDocumentBuf::new();
    let key: &bson::raw::CStr = "".try_into().ok()?;
    doc.append(key, RawBsonRef::DbPointer(p));
    let bytes = doc.as_bytes();
    // 4 (doc length) + 1 (type) + 1 (empty key's NUL) = 6.
    let len_bytes: [u8; 4] = bytes.get(6..10)?.try_into().ok()?;
    let ns_len = usize::try_from(i32::from_le_bytes(len_bytes))
        .ok()?
        .checked_sub(1)?;
    let ns = bytes.get(10..10 + ns_len)?.to_vec();
    let oid_start = 10 + ns_len + 1;
    let oid: [u8; 12] = bytes.get(oid_start..oid_start + 12)?.try_into().ok()?;
    Some((ns, oid))
}

/// DBPointer order: value size (so namespace length), then namespace bytes, then ObjectId
/// (`compareElements`, DBRef case: size compare, then memcmp).
fn cmp_db_pointers(a: RawDbPointerRef<'_>, b: RawDbPointerRef<'_>) -> Ordering {
    let key = |p| db_pointer_parts(p).map(|(ns, oid)| (ns.len(), ns, oid));
    key(a).cmp(&key(b))
}

/// A BSON number.
#[derive(Clone, Copy, Debug)]
enum Num {
    Long(i64),
    Double(f64),
    Dec(Decimal),
}

impl Num {
    fn of(v: RawBsonRef<'_>) -> Option<Num> {
        match v {
            RawBsonRef::Int32(i) => Some(Num::Long(i64::from(i))),
            RawBsonRef::Int64(i) => Some(Num::Long(i)),
            RawBsonRef::Double(d) => Some(Num::Double(d)),
            RawBsonRef::Decimal128(d) => Some(Num::Dec(Decimal::from_decimal128(d))),
            _ => None,
        }
    }

    fn is_nan(self) -> bool {
        match self {
            Num::Long(_) => false,
            Num::Double(d) => d.is_nan(),
            Num::Dec(d) => d == Decimal::NaN,
        }
    }

    /// −1 for −Infinity, 1 for +Infinity, 0 for finite (NaN excluded by the caller).
    fn infinity(self) -> i8 {
        match self {
            Num::Long(_) => 0,
            Num::Double(d) if d.is_infinite() => {
                if d > 0.0 {
                    1
                } else {
                    -1
                }
            }
            Num::Double(_) => 0,
            Num::Dec(Decimal::Infinite { negative }) => {
                if negative {
                    -1
                } else {
                    1
                }
            }
            Num::Dec(_) => 0,
        }
    }

    /// Sign of a finite value: −1, 0 (either zero) or 1.
    fn sign(self) -> i8 {
        match self {
            Num::Long(i) => i.signum() as i8,
            Num::Double(d) => {
                if d > 0.0 {
                    1
                } else if d < 0.0 {
                    -1
                } else {
                    0
                }
            }
            Num::Dec(Decimal::Finite {
                negative,
                coefficient,
                ..
            }) => {
                if coefficient == 0 {
                    0
                } else if negative {
                    -1
                } else {
                    1
                }
            }
            Num::Dec(_) => 0,
        }
    }
}

/// Exact numeric comparison with MongoDB's conventions (NaN == NaN < −Inf, −0 == 0).
fn cmp_numbers(a: Num, b: Num) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        (false, false) => {}
    }
    match (a, b) {
        (Num::Long(x), Num::Long(y)) => return x.cmp(&y),
        (Num::Double(x), Num::Double(y)) => return x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        (Num::Long(x), Num::Double(y)) => return cmp_long_double(x, y),
        (Num::Double(x), Num::Long(y)) => return cmp_long_double(y, x).reverse(),
        _ => {}
    }
    // At least one Decimal128: compare on the extended real line, exactly.
    let (ia, ib) = (a.infinity(), b.infinity());
    if ia != 0 || ib != 0 {
        return ia.cmp(&ib);
    }
    let (sa, sb) = (a.sign(), b.sign());
    if sa != sb || sa == 0 {
        return sa.cmp(&sb);
    }
    let magnitude = cmp_magnitudes(a, b);
    if sa < 0 {
        magnitude.reverse()
    } else {
        magnitude
    }
}

/// MongoDB's `compareLongToDouble`: exact, without rounding the long through a double.
fn cmp_long_double(x: i64, y: f64) -> Ordering {
    const PRECISE: i64 = 1 << 53;
    if (-PRECISE..=PRECISE).contains(&x) {
        return (x as f64).partial_cmp(&y).unwrap_or(Ordering::Equal);
    }
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if y >= TWO_63 {
        return Ordering::Less;
    }
    if y < -TWO_63 {
        return Ordering::Greater;
    }
    // |x| > 2^53 and y in [-2^63, 2^63): truncating y cannot change the outcome.
    x.cmp(&(y as i64))
}

/// Magnitude of a finite nonzero number as either `c × 10^q` or a double's `m × 2^e`.
enum Magnitude {
    Dec(u128, i32),
    Bin(u64, i32),
}

fn magnitude(n: Num) -> Magnitude {
    match n {
        Num::Long(i) => Magnitude::Dec(u128::from(i.unsigned_abs()), 0),
        Num::Double(d) => match decimal::decompose_f64(d) {
            Some((_, m, e)) => Magnitude::Bin(m, e),
            None => Magnitude::Dec(0, 0),
        },
        Num::Dec(Decimal::Finite {
            coefficient,
            exponent,
            ..
        }) => Magnitude::Dec(coefficient, exponent),
        Num::Dec(_) => Magnitude::Dec(0, 0),
    }
}

fn cmp_magnitudes(a: Num, b: Num) -> Ordering {
    match (magnitude(a), magnitude(b)) {
        (Magnitude::Dec(c1, q1), Magnitude::Dec(c2, q2)) => {
            decimal::cmp_decimal_magnitudes(c1, q1, c2, q2)
        }
        (Magnitude::Dec(c, q), Magnitude::Bin(m, e)) => {
            decimal::cmp_decimal_double_magnitudes(c, q, m, e)
        }
        (Magnitude::Bin(m, e), Magnitude::Dec(c, q)) => {
            decimal::cmp_decimal_double_magnitudes(c, q, m, e).reverse()
        }
        // Two doubles are compared directly by `cmp_numbers`; kept exact for completeness.
        (Magnitude::Bin(m1, e1), Magnitude::Bin(m2, e2)) => {
            let top = |m: u64, e: i32| 64 - m.leading_zeros() as i32 + e;
            let (t1, t2) = (top(m1, e1), top(m2, e2));
            if t1 != t2 {
                return t1.cmp(&t2);
            }
            // Same top bit and m < 2^53: the exponents differ by at most 52.
            let shift = |m: u64, by: i32| u128::from(m) << by.clamp(0, 64);
            shift(m1, e1 - e2.min(e1)).cmp(&shift(m2, e2 - e1.min(e2)))
        }
    }
}
