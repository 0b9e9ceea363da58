//! The 64-bit hash of a BSON value used by hashed indexes (MongoDB's
//! `BSONElementHasher::hash64`, src/mongo/db/hasher.cpp, seed 0, hash version 0).
//!
//! MD5 over: the seed (int32 LE), then for the value its canonical type (int32 LE,
//! `canonicalizeBSONType`), then
//! - numbers: the value as a 64-bit integer (`safeNumberLongForHash`: doubles truncate toward
//!   zero, NaN is 0, out-of-range values clamp, double 2^63 is `i64::MIN`; Decimal128 rounds
//!   half-even and clamps), so `1`, `NumberLong(1)`, `1.0` and `1.9` hash equal;
//! - objects and arrays: each element as (canonical type, field name with its NUL, value),
//!   recursively, then the end-of-object marker (canonical type 0);
//! - code with scope: the code string with its NUL, then the scope's elements as for objects;
//! - everything else: the value's BSON bytes.
//!
//! The result is the first 8 bytes of the digest read little-endian. Hashes therefore equal
//! MongoDB's (`hash64({check: 42}.check) == -944302157085130861`).
//!
//! Invariant: never panics; nesting is bounded by [`MAX_DEPTH`] (deeper values hash their raw
//! bytes instead of recursing).

use bson::raw::{RawBsonRef, RawDocument, RawDocumentBuf, cstr};
use cairn_storage::compare::TypeClass;
use cairn_storage::decimal::Decimal;
use md5::{Digest, Md5};

/// Containers nested deeper than this are hashed by their raw bytes.
const MAX_DEPTH: usize = 200;

/// 2^63 as a double.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// The hashed-index key of `v` (seed 0).
pub fn hash64(v: RawBsonRef<'_>) -> i64 {
    let mut h = Md5::new();
    h.update(0i32.to_le_bytes());
    value(&mut h, v, 0);
    let digest = h.finalize();
    let mut first = [0u8; 8];
    for (dst, src) in first.iter_mut().zip(digest.iter()) {
        *dst = *src;
    }
    i64::from_le_bytes(first)
}

fn canonical(h: &mut Md5, v: RawBsonRef<'_>) {
    h.update(TypeClass::of(v).mongo_order().to_le_bytes());
}

fn value(h: &mut Md5, v: RawBsonRef<'_>, depth: usize) {
    canonical(h, v);
    body(h, v, depth);
}

fn body(h: &mut Md5, v: RawBsonRef<'_>, depth: usize) {
    match v {
        RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => h.update(number_for_hash(v).to_le_bytes()),
        RawBsonRef::Document(d) if depth < MAX_DEPTH => elements(h, d, depth + 1),
        RawBsonRef::Array(a) if depth < MAX_DEPTH => match RawDocument::from_bytes(a.as_bytes()) {
            Ok(d) => elements(h, d, depth + 1),
            Err(_) => h.update(value_bytes(v)),
        },
        RawBsonRef::JavaScriptCodeWithScope(c) if depth < MAX_DEPTH => {
            h.update(c.code.as_bytes());
            h.update([0u8]);
            elements(h, c.scope, depth + 1);
        }
        _ => h.update(value_bytes(v)),
    }
}

/// Each element with its name, then the end marker (EOO: canonical type 0, no name, no value).
fn elements(h: &mut Md5, d: &RawDocument, depth: usize) {
    for el in d.iter() {
        let Ok((k, v)) = el else { break };
        canonical(h, v);
        h.update(k.as_str().as_bytes());
        h.update([0u8]);
        body(h, v, depth);
    }
    h.update(0i32.to_le_bytes());
}

/// The BSON bytes of a value (what `BSONElement::value()` points at): the value is written
/// under an empty name and read back between the element header and the terminator.
fn value_bytes(v: RawBsonRef<'_>) -> Vec<u8> {
    let mut doc = RawDocumentBuf::new();
    doc.append(cstr!(""), v);
    let bytes = doc.as_bytes();
    // 4 (length) + 1 (type) + 1 (the empty name's NUL) .. len - 1 (terminator).
    bytes
        .get(6..bytes.len().saturating_sub(1))
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

/// `BSONElement::safeNumberLongForHash`.
fn number_for_hash(v: RawBsonRef<'_>) -> i64 {
    match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) => {
            if d.is_nan() {
                0
            } else if d == TWO_POW_63 {
                // Kept from older versions: the overflowing cast of 2^63.
                i64::MIN
            } else if d >= TWO_POW_63 {
                i64::MAX
            } else if d < -TWO_POW_63 {
                i64::MIN
            } else {
                d as i64
            }
        }
        RawBsonRef::Decimal128(d) => decimal_to_i64(Decimal::from_decimal128(d)),
        _ => 0,
    }
}

/// `Decimal128::toLong()` (round half to even) with `safeNumberLong`'s NaN and clamping.
fn decimal_to_i64(d: Decimal) -> i64 {
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
            if coefficient == 0 {
                return 0;
            }
            let magnitude: Option<u128> = if exponent >= 0 {
                u32::try_from(exponent)
                    .ok()
                    .and_then(|e| 10u128.checked_pow(e))
                    .and_then(|p| coefficient.checked_mul(p))
            } else {
                match 10u128.checked_pow(exponent.unsigned_abs()) {
                    None => Some(0),
                    Some(p) => {
                        let (q, r) = (coefficient / p, coefficient % p);
                        let twice = r.saturating_mul(2);
                        Some(if twice > p || (twice == p && q % 2 == 1) {
                            q + 1
                        } else {
                            q
                        })
                    }
                }
            };
            let clamp = if negative { i64::MIN } else { i64::MAX };
            let Some(m) = magnitude else { return clamp };
            if negative {
                if m > 1u128 << 63 {
                    i64::MIN
                } else {
                    i64::try_from(-(m as i128)).unwrap_or(i64::MIN)
                }
            } else {
                i64::try_from(m).unwrap_or(i64::MAX)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{RawBson, rawdoc};

    #[test]
    fn mongodb_startup_check() {
        // hasher.cpp's HasherUnitTest.
        assert_eq!(hash64(RawBsonRef::Int32(42)), -944302157085130861);
    }

    #[test]
    fn numbers_hash_by_truncated_integer() {
        let one = hash64(RawBsonRef::Int32(1));
        assert_eq!(hash64(RawBsonRef::Int64(1)), one);
        assert_eq!(hash64(RawBsonRef::Double(1.0)), one);
        assert_eq!(hash64(RawBsonRef::Double(1.9)), one);
        let dec: bson::Decimal128 = "1.00".parse().unwrap();
        assert_eq!(hash64(RawBsonRef::Decimal128(dec)), one);
        assert_ne!(hash64(RawBsonRef::Int32(2)), one);
        assert_eq!(
            hash64(RawBsonRef::Double(f64::NAN)),
            hash64(RawBsonRef::Int32(0))
        );
        assert_eq!(
            hash64(RawBsonRef::Double(TWO_POW_63)),
            hash64(RawBsonRef::Int64(i64::MIN))
        );
        let s = RawBson::String("1".into());
        assert_ne!(hash64(s.as_raw_bson_ref()), one);
        let d = rawdoc! {"a": 1};
        let d2 = rawdoc! {"a": 1.0};
        assert_eq!(
            hash64(RawBsonRef::Document(&d)),
            hash64(RawBsonRef::Document(&d2))
        );
    }
}
