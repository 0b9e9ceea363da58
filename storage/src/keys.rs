//! Order-preserving key encoding `E(v)` of BSON values (DESIGN.md §3).
//!
//! Invariants:
//! - **Order**: for any two encodable values, `E(a).cmp(&E(b)) == compare_values(a, b)`
//!   ([`crate::compare`], MongoDB's woCompare under the simple collation), and
//!   `E(a) == E(b)` exactly when they compare equal — so `1`, `NumberLong(1)`, `1.0` and
//!   `Decimal128("1.00")` encode to identical bytes, as do a String and a Symbol with the same
//!   text, and a missing field and Undefined.
//! - **Prefix-free**: no encoding is a proper prefix of another. Hence concatenations
//!   `E(a1) E(a2) …` (compound keys, `E(_id)` followed by path components) compare component
//!   by component, whatever bytes follow, and a descending component — every byte of `E(v)`
//!   inverted (`!b`) — sorts in exactly the reverse order.
//! - **Total**: encoding never panics. It fails with [`KeyError`] on malformed BSON, on
//!   nesting deeper than the depth limit (default [`DEFAULT_MAX_DEPTH`]), or on an oversized
//!   BinData; on error the output buffer is left as it was.
//!
//! # Byte layout (ascending)
//!
//! Every value is one **type tag** byte followed by a body. Tags lie in `0x01..=0xFE` and are
//! spaced by MongoDB's canonical type class (`canonicalizeBSONType`):
//!
//! | tag    | class                     | body                                          |
//! |--------|---------------------------|-----------------------------------------------|
//! | `0x0A` | MinKey                    | none                                          |
//! | `0x14` | missing field, Undefined  | none (MongoDB: canonical type 0, both equal)  |
//! | `0x1E` | Null                      | none                                          |
//! | `0x28` | int32/int64/double/dec128 | number, below                                 |
//! | `0x32` | String, Symbol            | escaped string                                |
//! | `0x3C` | Object                    | elements, then `0x00`                         |
//! | `0x46` | Array                     | elements without names, then `0x00`           |
//! | `0x50` | BinData                   | u32 BE length, subtype byte, raw bytes        |
//! | `0x5A` | ObjectId                  | the 12 bytes                                  |
//! | `0x64` | Bool                      | `0x00` false, `0x01` true                     |
//! | `0x6E` | Date                      | i64 ms with the sign bit flipped, BE          |
//! | `0x78` | Timestamp                 | time u32 BE, increment u32 BE                 |
//! | `0x82` | Regex                     | pattern, `0x00`, flags, `0x00`                |
//! | `0x8C` | DBPointer                 | u32 BE namespace length, namespace, 12-byte id|
//! | `0x96` | JavaScript code           | escaped string                                |
//! | `0xA0` | code with scope           | escaped code string, then the scope's elements and `0x00` |
//! | `0xF0` | MaxKey                    | none                                          |
//!
//! **Numbers.** A sub-tag byte orders the kinds: `0x10` NaN (every NaN, double or decimal),
//! `0x20` −Infinity, `0x30` negative finite, `0x40` zero (±0 of every type), `0x50` positive
//! finite, `0x60` +Infinity. A finite nonzero magnitude is normalised
//! ([`crate::decimal::Normalized`]) to `0.d1 d2 … dn × 10^E` with `d1 != 0`, no trailing zeros
//! and `n <= 34`; its body is `E + 0x8000` as a big-endian u16, then the digits packed two per
//! byte as nibbles `d + 1` (`0x1..=0xA`), then a `0x0` terminator nibble, then a `0x0` pad nibble
//! if needed to fill the last byte. A negative number's body is the body of its magnitude with
//! every byte inverted. int32/int64 and Decimal128 are exact. A double is exact too: its full
//! decimal expansion is used when it has at most 34 significant digits; otherwise its first 34
//! digits (truncated toward zero) are followed by a **sticky nibble `0xB`** before the
//! terminator, meaning "strictly greater than these 34 digits". This is needed because MongoDB
//! compares double with Decimal128 exactly (`compareDecimalToDouble` converts the decimal to
//! double rounding toward −∞ and checks the inexact flag), so `0.1` (double) is greater than
//! `Decimal128("0.1")` and also greater than `Decimal128("0.1000000000000000055511151231257827")`
//! (its 34-digit truncation), yet below that decimal's successor. No value with at most 34
//! digits lies strictly between a double and its truncation, and distinct doubles differ
//! within their first 18 digits, so the sticky nibble keeps every comparison exact.
//!
//! **Strings** (String, Symbol, Code, CodeWithScope code): the UTF-8 bytes with each `0x00`
//! written as `0x00 0xFF`, then the terminator `0x00 0x01`. The brief's first design used a
//! lone `0x00` terminator; that is not prefix-free (`E("a") = … 61 00` is a prefix of
//! `E("a\0") = … 61 00 FF 00`), so inverting it for a descending key would sort `"a"` before
//! `"a\0"` in both directions. With `00 01` the terminator sorts below an escaped NUL
//! (`00 FF`) and below every other byte, so shorter strings come first, as in MongoDB.
//!
//! **Objects**: each element as (type tag of its value, field name bytes, `0x00`, value body),
//! then `0x00` (below every tag, so a proper prefix sorts first). Field names, regex patterns
//! and flags are BSON cstrings, which cannot contain `0x00`, so a single `0x00` ends them.
//! This follows woCompare: canonical type first, then field name, then value.
//! **Arrays**: each element as (type tag, value body), then `0x00`.
//!
//! **BinData**: MongoDB orders by length, then subtype, then bytes. For the old binary subtype
//! `0x02` the bson crate hides the inner 4-byte length, which MongoDB counts; the encoded
//! length is then the payload length + 4 (the inner length itself is implied).
//!
//! **Descending**: every byte of the ascending encoding inverted.
//!
//! **Missing fields.** [`encode_missing`] writes the Undefined tag, matching woCompare where a
//! missing value (EOO) equals Undefined and sorts below Null. MongoDB's *indexes* instead
//! store a missing field as Null; an index builder wanting that must encode `Null` itself.

use bson::raw::{RawArray, RawBsonRef, RawDocument};
use thiserror::Error;

use crate::compare::{TypeClass, binary_parts, db_pointer_parts};
use crate::decimal::{Decimal, Normalized, Significand};

/// Default bound on container nesting (objects, arrays, code-with-scope scopes) in a key.
pub const DEFAULT_MAX_DEPTH: usize = 200;

/// Type tags (first byte of an ascending encoding).
pub mod tag {
    /// MinKey.
    pub const MIN_KEY: u8 = 0x0A;
    /// A missing field, and BSON Undefined (equal in MongoDB's order).
    pub const MISSING: u8 = 0x14;
    /// Null.
    pub const NULL: u8 = 0x1E;
    /// All numbers.
    pub const NUMBER: u8 = 0x28;
    /// String and Symbol.
    pub const STRING: u8 = 0x32;
    /// Embedded document.
    pub const OBJECT: u8 = 0x3C;
    /// Array.
    pub const ARRAY: u8 = 0x46;
    /// Binary data.
    pub const BINARY: u8 = 0x50;
    /// ObjectId.
    pub const OBJECT_ID: u8 = 0x5A;
    /// Boolean.
    pub const BOOL: u8 = 0x64;
    /// UTC datetime.
    pub const DATE: u8 = 0x6E;
    /// Timestamp.
    pub const TIMESTAMP: u8 = 0x78;
    /// Regular expression.
    pub const REGEX: u8 = 0x82;
    /// DBPointer.
    pub const DB_POINTER: u8 = 0x8C;
    /// JavaScript code.
    pub const CODE: u8 = 0x96;
    /// JavaScript code with scope.
    pub const CODE_WITH_SCOPE: u8 = 0xA0;
    /// MaxKey.
    pub const MAX_KEY: u8 = 0xF0;
}

/// Number sub-tags (second byte of a number's encoding).
pub mod number_tag {
    /// NaN.
    pub const NAN: u8 = 0x10;
    /// −Infinity.
    pub const NEG_INFINITY: u8 = 0x20;
    /// Negative finite.
    pub const NEGATIVE: u8 = 0x30;
    /// Zero.
    pub const ZERO: u8 = 0x40;
    /// Positive finite.
    pub const POSITIVE: u8 = 0x50;
    /// +Infinity.
    pub const POS_INFINITY: u8 = 0x60;
}

/// Nibble following 34 truncated digits of a double that has more nonzero digits.
const STICKY_NIBBLE: u8 = 0xB;

/// Why a value could not be encoded as a key.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Containers nested deeper than the limit.
    #[error("BSON value nested deeper than {limit} levels cannot be used in a key")]
    DepthExceeded {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// The BSON bytes could not be parsed.
    #[error("malformed BSON in key: {0}")]
    Malformed(String),
    /// A BinData too long for the u32 length field.
    #[error("BinData of {len} bytes is too large for a key")]
    TooLarge {
        /// Its length in bytes.
        len: u64,
    },
}

/// The ascending type tag of a type class.
pub fn class_tag(class: TypeClass) -> u8 {
    match class {
        TypeClass::MinKey => tag::MIN_KEY,
        TypeClass::Missing => tag::MISSING,
        TypeClass::Null => tag::NULL,
        TypeClass::Number => tag::NUMBER,
        TypeClass::String => tag::STRING,
        TypeClass::Object => tag::OBJECT,
        TypeClass::Array => tag::ARRAY,
        TypeClass::BinData => tag::BINARY,
        TypeClass::ObjectId => tag::OBJECT_ID,
        TypeClass::Bool => tag::BOOL,
        TypeClass::Date => tag::DATE,
        TypeClass::Timestamp => tag::TIMESTAMP,
        TypeClass::Regex => tag::REGEX,
        TypeClass::DbPointer => tag::DB_POINTER,
        TypeClass::Code => tag::CODE,
        TypeClass::CodeWithScope => tag::CODE_WITH_SCOPE,
        TypeClass::MaxKey => tag::MAX_KEY,
    }
}

/// Appends `E(v)` (or its inversion when `descending`) to `out`, with the default depth limit.
pub fn encode_value(
    out: &mut Vec<u8>,
    v: RawBsonRef<'_>,
    descending: bool,
) -> Result<(), KeyError> {
    encode_value_with_max_depth(out, v, descending, DEFAULT_MAX_DEPTH)
}

/// Appends `E(v)` with an explicit bound on container nesting: a top-level document or array
/// is at depth 1, its sub-documents at depth 2, and so on; deeper than `max_depth` is an error.
pub fn encode_value_with_max_depth(
    out: &mut Vec<u8>,
    v: RawBsonRef<'_>,
    descending: bool,
    max_depth: usize,
) -> Result<(), KeyError> {
    let start = out.len();
    let result = Encoder { out, max_depth }.value(v, 0);
    match result {
        Ok(()) => {
            if descending {
                invert(&mut out[start..]);
            }
            Ok(())
        }
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

/// Appends the encoding of a whole document, identical to encoding it as an embedded-document
/// value; byte order matches [`crate::compare::compare_documents`].
pub fn encode_document(
    out: &mut Vec<u8>,
    doc: &RawDocument,
    descending: bool,
) -> Result<(), KeyError> {
    encode_value(out, RawBsonRef::Document(doc), descending)
}

/// Appends the encoding of a missing field (equal to Undefined, below Null).
pub fn encode_missing(out: &mut Vec<u8>, descending: bool) {
    out.push(if descending {
        !tag::MISSING
    } else {
        tag::MISSING
    });
}

/// `E(v)` as a new vector.
pub fn encode_to_vec(v: RawBsonRef<'_>, descending: bool) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::new();
    encode_value(&mut out, v, descending)?;
    Ok(out)
}

fn invert(bytes: &mut [u8]) {
    for b in bytes {
        *b = !*b;
    }
}

fn malformed(e: impl std::fmt::Display) -> KeyError {
    KeyError::Malformed(e.to_string())
}

struct Encoder<'o> {
    out: &'o mut Vec<u8>,
    max_depth: usize,
}

impl Encoder<'_> {
    /// Tag and body; `depth` is the nesting of the enclosing container (0 at top level).
    fn value(&mut self, v: RawBsonRef<'_>, depth: usize) -> Result<(), KeyError> {
        self.out.push(class_tag(TypeClass::of(v)));
        self.body(v, depth)
    }

    fn body(&mut self, v: RawBsonRef<'_>, depth: usize) -> Result<(), KeyError> {
        use RawBsonRef as V;
        match v {
            V::MinKey | V::MaxKey | V::Null | V::Undefined => {}
            V::Int32(i) => self.number(Normalized::from_i64(i64::from(i))),
            V::Int64(i) => self.number(Normalized::from_i64(i)),
            V::Double(d) => self.number(Normalized::from_f64(d)),
            V::Decimal128(d) => self.number(Normalized::from_decimal(Decimal::from_decimal128(d))),
            V::String(s) | V::Symbol(s) | V::JavaScriptCode(s) => self.string(s.as_bytes()),
            V::Document(d) => self.document(d, depth + 1)?,
            V::Array(a) => self.array(a, depth + 1)?,
            V::Binary(b) => {
                let (len, subtype) = binary_parts(&b);
                let len32 = u32::try_from(len).map_err(|_| KeyError::TooLarge { len })?;
                self.out.extend_from_slice(&len32.to_be_bytes());
                self.out.push(subtype);
                self.out.extend_from_slice(b.bytes);
            }
            V::ObjectId(oid) => self.out.extend_from_slice(&oid.bytes()),
            V::Boolean(b) => self.out.push(u8::from(b)),
            V::DateTime(dt) => {
                let flipped = (dt.timestamp_millis() as u64) ^ (1 << 63);
                self.out.extend_from_slice(&flipped.to_be_bytes());
            }
            V::Timestamp(ts) => {
                self.out.extend_from_slice(&ts.time.to_be_bytes());
                self.out.extend_from_slice(&ts.increment.to_be_bytes());
            }
            V::RegularExpression(re) => {
                self.cstr(re.pattern.as_str().as_bytes());
                self.cstr(re.options.as_str().as_bytes());
            }
            V::DbPointer(p) => {
                let (ns, oid) =
                    db_pointer_parts(p).ok_or_else(|| malformed("unreadable DBPointer"))?;
                let len = u32::try_from(ns.len()).map_err(|_| KeyError::TooLarge {
                    len: ns.len() as u64,
                })?;
                self.out.extend_from_slice(&len.to_be_bytes());
                self.out.extend_from_slice(&ns);
                self.out.extend_from_slice(&oid);
            }
            V::JavaScriptCodeWithScope(cws) => {
                self.string(cws.code.as_bytes());
                self.document(cws.scope, depth + 1)?;
            }
        }
        Ok(())
    }

    /// Elements of a document then `0x00`; `depth` is this document's own nesting.
    fn document(&mut self, d: &RawDocument, depth: usize) -> Result<(), KeyError> {
        if depth > self.max_depth {
            return Err(KeyError::DepthExceeded {
                limit: self.max_depth,
            });
        }
        for item in d.iter() {
            let (key, v) = item.map_err(malformed)?;
            self.out.push(class_tag(TypeClass::of(v)));
            self.cstr(key.as_str().as_bytes());
            self.body(v, depth)?;
        }
        self.out.push(0x00);
        Ok(())
    }

    fn array(&mut self, a: &RawArray, depth: usize) -> Result<(), KeyError> {
        if depth > self.max_depth {
            return Err(KeyError::DepthExceeded {
                limit: self.max_depth,
            });
        }
        for item in a {
            self.value(item.map_err(malformed)?, depth)?;
        }
        self.out.push(0x00);
        Ok(())
    }

    /// A NUL-free byte string followed by `0x00`.
    fn cstr(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
        self.out.push(0x00);
    }

    /// Arbitrary bytes: `0x00` escaped as `0x00 0xFF`, terminated by `0x00 0x01`.
    fn string(&mut self, bytes: &[u8]) {
        for chunk in bytes.split_inclusive(|&b| b == 0) {
            self.out.extend_from_slice(chunk);
            if chunk.last() == Some(&0) {
                self.out.push(0xFF);
            }
        }
        self.out.extend_from_slice(&[0x00, 0x01]);
    }

    fn number(&mut self, n: Normalized) {
        match n {
            Normalized::NaN => self.out.push(number_tag::NAN),
            Normalized::NegInfinity => self.out.push(number_tag::NEG_INFINITY),
            Normalized::Zero => self.out.push(number_tag::ZERO),
            Normalized::PosInfinity => self.out.push(number_tag::POS_INFINITY),
            Normalized::Positive(s) => {
                self.out.push(number_tag::POSITIVE);
                put_significand(self.out, &s);
            }
            Normalized::Negative(s) => {
                self.out.push(number_tag::NEGATIVE);
                let start = self.out.len();
                put_significand(self.out, &s);
                invert(&mut self.out[start..]);
            }
        }
    }
}

/// Exponent (u16 BE, biased by 0x8000), digit nibbles, optional sticky nibble, terminator.
fn put_significand(out: &mut Vec<u8>, s: &Significand) {
    // |E| <= 6176 + 34 for every BSON number, far inside the i16 range; the clamp only
    // keeps the conversion total.
    let biased = (s.exponent() + 0x8000).clamp(0, 0xFFFF) as u16;
    out.extend_from_slice(&biased.to_be_bytes());
    let sticky = (!s.is_exact()).then_some(STICKY_NIBBLE);
    let mut stream = s
        .digits()
        .iter()
        .map(|d| d + 1)
        .chain(sticky)
        .chain(std::iter::once(0u8));
    while let Some(high) = stream.next() {
        let low = stream.next().unwrap_or(0);
        out.push((high << 4) | low);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{Decimal128, RawBson, rawdoc};
    use std::str::FromStr;

    fn enc(v: RawBson) -> Vec<u8> {
        encode_to_vec(v.as_raw_bson_ref(), false).unwrap()
    }

    #[test]
    fn byte_layouts() {
        assert_eq!(enc(RawBson::MinKey), [tag::MIN_KEY]);
        assert_eq!(enc(RawBson::Undefined), [tag::MISSING]);
        assert_eq!(enc(RawBson::Int32(0)), [tag::NUMBER, number_tag::ZERO]);
        // 1 = 0.1 × 10^1: exponent 0x8001, nibbles 2,0 -> 0x20.
        assert_eq!(
            enc(RawBson::Int32(1)),
            [tag::NUMBER, 0x50, 0x80, 0x01, 0x20]
        );
        // 12 = 0.12 × 10^2: nibbles 2,3,0,pad -> 0x23 0x00.
        assert_eq!(
            enc(RawBson::Int64(12)),
            [tag::NUMBER, 0x50, 0x80, 0x02, 0x23, 0x00]
        );
        // -1: body inverted.
        assert_eq!(
            enc(RawBson::Double(-1.0)),
            [tag::NUMBER, 0x30, 0x7F, 0xFE, 0xDF]
        );
        assert_eq!(
            enc(RawBson::Decimal128(Decimal128::from_str("1.00").unwrap())),
            enc(RawBson::Int32(1))
        );
        assert_eq!(
            enc(RawBson::String("a\0".into())),
            [tag::STRING, b'a', 0x00, 0xFF, 0x00, 0x01]
        );
        assert_eq!(
            enc(RawBson::Document(rawdoc! { "a": true })),
            [tag::OBJECT, tag::BOOL, b'a', 0x00, 0x01, 0x00]
        );
        assert_eq!(
            enc(RawBson::Array(
                bson::rawbson!([null]).as_array().unwrap().to_owned()
            )),
            [tag::ARRAY, tag::NULL, 0x00]
        );
        assert_eq!(
            enc(RawBson::DateTime(bson::DateTime::from_millis(-1))),
            [tag::DATE, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        );
        // 0.1 as a double: 34 digits then the sticky nibble.
        let e = enc(RawBson::Double(0.1));
        assert_eq!(&e[..4], &[tag::NUMBER, 0x50, 0x80, 0x00]);
        assert_eq!(e.len(), 4 + 18);
        assert_eq!(e[e.len() - 1], 0xB0);
    }

    #[test]
    fn descending_is_inverted_and_errors_restore_buffer() {
        let mut out = vec![0xAA];
        encode_value(&mut out, RawBsonRef::Int32(1), true).unwrap();
        assert_eq!(out, [0xAA, !tag::NUMBER, !0x50, !0x80, !0x01, !0x20]);
        let mut deep = rawdoc! {};
        for _ in 0..5 {
            deep = rawdoc! { "a": deep };
        }
        let mut out = vec![1, 2, 3];
        let err = encode_value_with_max_depth(&mut out, RawBsonRef::Document(&deep), false, 5);
        assert_eq!(err, Err(KeyError::DepthExceeded { limit: 5 }));
        assert_eq!(out, [1, 2, 3]);
        assert!(
            encode_value_with_max_depth(&mut out, RawBsonRef::Document(&deep), false, 6).is_ok()
        );
    }
}
