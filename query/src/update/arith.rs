//! Number arithmetic for `$inc`, `$mul` and `$bit` (MongoDB's `SafeNum`, src/mongo/util/safe_num.cpp)
//! including Decimal128 addition and multiplication (IEEE 754-2008, round half to even).
//!
//! Type rules (`SafeNum::addInternal` / `mulInternal`):
//! - int32 op int32 → int32, widened to int64 when the result overflows;
//! - int32/int64 op int64 → int64; an int64 overflow makes the result *invalid* (the caller
//!   reports "Failed to apply $inc operations …");
//! - any double (and no decimal) → double;
//! - any decimal → decimal: integers convert exactly, doubles through `Decimal128(double)`,
//!   i.e. correctly rounded to 34 digits then quantized to 15 significant digits.
//!
//! Invariants: nothing here panics; decimal work uses bounded digit vectors (operands are
//! aligned at most [`MAX_ALIGN`] digits apart, farther operands only contribute a sticky digit,
//! which cannot change the correctly rounded result).

use bson::{Decimal128, RawBson, RawBsonRef};
use cairn_storage::decimal::{Decimal, decompose_f64};

/// Farthest alignment (in decimal digits) done exactly when adding decimals.
const MAX_ALIGN: i32 = 80;
const MAX_EXP: i32 = 6111;
const MIN_EXP: i32 = -6176;
const PRECISION: usize = 34;

/// A BSON number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Num {
    I32(i32),
    I64(i64),
    F64(f64),
    Dec(Decimal),
}

impl Num {
    /// The number a raw value holds, if it is numeric.
    pub(crate) fn from_raw(v: RawBsonRef<'_>) -> Option<Num> {
        Some(match v {
            RawBsonRef::Int32(i) => Num::I32(i),
            RawBsonRef::Int64(i) => Num::I64(i),
            RawBsonRef::Double(d) => Num::F64(d),
            RawBsonRef::Decimal128(d) => Num::Dec(Decimal::from_decimal128(d)),
            _ => return None,
        })
    }

    /// The BSON value.
    pub(crate) fn to_raw(self) -> RawBson {
        match self {
            Num::I32(i) => RawBson::Int32(i),
            Num::I64(i) => RawBson::Int64(i),
            Num::F64(d) => RawBson::Double(d),
            Num::Dec(d) => RawBson::Decimal128(encode(d)),
        }
    }

    fn as_i64(self) -> Option<i64> {
        match self {
            Num::I32(i) => Some(i64::from(i)),
            Num::I64(i) => Some(i),
            _ => None,
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::I32(i) => f64::from(i),
            Num::I64(i) => i as f64,
            Num::F64(d) => d,
            Num::Dec(_) => f64::NAN,
        }
    }

    fn as_dec(self) -> Decimal {
        match self {
            Num::I32(i) => from_i64(i64::from(i)),
            Num::I64(i) => from_i64(i),
            Num::F64(d) => from_f64(d),
            Num::Dec(d) => d,
        }
    }

    /// `SafeNum::isIdentical`: same type and same value.
    pub(crate) fn identical(self, other: Num) -> bool {
        match (self, other) {
            (Num::I32(a), Num::I32(b)) => a == b,
            (Num::I64(a), Num::I64(b)) => a == b,
            #[allow(clippy::float_cmp)]
            (Num::F64(a), Num::F64(b)) => a == b,
            (Num::Dec(a), Num::Dec(b)) => dec_equal(a, b),
            _ => false,
        }
    }

    /// `SafeNum::debugString`, e.g. `(NumberLong)9223372036854775807`.
    pub(crate) fn debug_string(self) -> String {
        match self {
            Num::I32(i) => format!("(NumberInt){i}"),
            Num::I64(i) => format!("(NumberLong){i}"),
            Num::F64(d) => format!("(NumberDouble){d}"),
            Num::Dec(d) => format!("(NumberDecimal){}", encode(d)),
        }
    }
}

/// `lhs + rhs`; `None` when an int64 result overflows.
pub(crate) fn add(lhs: Num, rhs: Num) -> Option<Num> {
    match (lhs, rhs) {
        (Num::I32(a), Num::I32(b)) => Some(match a.checked_add(b) {
            Some(s) => Num::I32(s),
            None => Num::I64(i64::from(a) + i64::from(b)),
        }),
        (Num::Dec(_), _) | (_, Num::Dec(_)) => Some(Num::Dec(dec_add(lhs.as_dec(), rhs.as_dec()))),
        (Num::F64(_), _) | (_, Num::F64(_)) => Some(Num::F64(lhs.as_f64() + rhs.as_f64())),
        _ => {
            let (a, b) = (lhs.as_i64()?, rhs.as_i64()?);
            a.checked_add(b).map(Num::I64)
        }
    }
}

/// `lhs * rhs`; `None` when an int64 result overflows.
pub(crate) fn mul(lhs: Num, rhs: Num) -> Option<Num> {
    match (lhs, rhs) {
        (Num::I32(a), Num::I32(b)) => Some(match a.checked_mul(b) {
            Some(s) => Num::I32(s),
            None => Num::I64(i64::from(a) * i64::from(b)),
        }),
        (Num::Dec(_), _) | (_, Num::Dec(_)) => Some(Num::Dec(dec_mul(lhs.as_dec(), rhs.as_dec()))),
        (Num::F64(_), _) | (_, Num::F64(_)) => Some(Num::F64(lhs.as_f64() * rhs.as_f64())),
        _ => {
            let (a, b) = (lhs.as_i64()?, rhs.as_i64()?);
            a.checked_mul(b).map(Num::I64)
        }
    }
}

/// A bitwise operation of `$bit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BitOp {
    And,
    Or,
    Xor,
}

/// `SafeNum::bitAnd/bitOr/bitXor` on integers: int32 with int32 stays int32, anything with an
/// int64 is int64. `None` for non-integers.
pub(crate) fn bit(op: BitOp, lhs: Num, rhs: Num) -> Option<Num> {
    let f = |a: i64, b: i64| match op {
        BitOp::And => a & b,
        BitOp::Or => a | b,
        BitOp::Xor => a ^ b,
    };
    match (lhs, rhs) {
        (Num::I32(a), Num::I32(b)) => {
            let r = f(i64::from(a), i64::from(b));
            Some(Num::I32(i32::try_from(r).unwrap_or(r as i32)))
        }
        _ => Some(Num::I64(f(lhs.as_i64()?, rhs.as_i64()?))),
    }
}

// ---------------------------------------------------------------------------------------------
// Decimal128
// ---------------------------------------------------------------------------------------------

/// Encodes a decoded decimal back into BID bytes (finite coefficients must be canonical).
pub(crate) fn encode(d: Decimal) -> Decimal128 {
    let bits: u128 = match d {
        Decimal::NaN => 0x7C00_0000u128 << 96,
        Decimal::Infinite { negative } => (u128::from(negative) << 127) | (0x7800_0000u128 << 96),
        Decimal::Finite {
            negative,
            coefficient,
            exponent,
        } => {
            let biased = (exponent.clamp(MIN_EXP, MAX_EXP) - MIN_EXP) as u128;
            (u128::from(negative) << 127) | (biased << 113) | (coefficient & ((1u128 << 113) - 1))
        }
    };
    Decimal128::from_bytes(bits.to_le_bytes())
}

fn dec_equal(a: Decimal, b: Decimal) -> bool {
    match (a, b) {
        (Decimal::NaN, Decimal::NaN) => false,
        (Decimal::Infinite { negative: x }, Decimal::Infinite { negative: y }) => x == y,
        (
            Decimal::Finite {
                negative: n1,
                coefficient: c1,
                exponent: e1,
            },
            Decimal::Finite {
                negative: n2,
                coefficient: c2,
                exponent: e2,
            },
        ) => {
            if c1 == 0 && c2 == 0 {
                return true;
            }
            n1 == n2
                && cairn_storage::decimal::cmp_decimal_magnitudes(c1, e1, c2, e2)
                    == std::cmp::Ordering::Equal
        }
        _ => false,
    }
}

/// Digits, most significant first, no leading zeros (empty = 0).
type Digits = Vec<u8>;

fn digits_of(mut c: u128) -> Digits {
    let mut out = Vec::new();
    while c > 0 {
        out.push((c % 10) as u8);
        c /= 10;
    }
    out.reverse();
    out
}

fn trim(mut d: Digits) -> Digits {
    let lead = d.iter().take_while(|&&x| x == 0).count();
    d.drain(..lead);
    d
}

fn to_u128(d: &[u8]) -> u128 {
    d.iter().fold(0u128, |acc, &x| {
        acc.saturating_mul(10).saturating_add(u128::from(x))
    })
}

fn cmp_mag(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn add_mag(a: &[u8], b: &[u8]) -> Digits {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let (mut i, mut j, mut carry) = (a.len(), b.len(), 0u8);
    while i > 0 || j > 0 || carry > 0 {
        let x = if i > 0 {
            i -= 1;
            a.get(i).copied().unwrap_or(0)
        } else {
            0
        };
        let y = if j > 0 {
            j -= 1;
            b.get(j).copied().unwrap_or(0)
        } else {
            0
        };
        let s = x + y + carry;
        out.push(s % 10);
        carry = s / 10;
    }
    out.reverse();
    trim(out)
}

/// `a - b` for `a >= b`.
fn sub_mag(a: &[u8], b: &[u8]) -> Digits {
    let mut out = Vec::with_capacity(a.len());
    let (mut i, mut j, mut borrow) = (a.len(), b.len(), 0i8);
    while i > 0 {
        i -= 1;
        let x = a.get(i).copied().unwrap_or(0) as i8;
        let y = if j > 0 {
            j -= 1;
            b.get(j).copied().unwrap_or(0) as i8
        } else {
            0
        };
        let mut s = x - y - borrow;
        borrow = 0;
        if s < 0 {
            s += 10;
            borrow = 1;
        }
        out.push(s as u8);
    }
    out.reverse();
    trim(out)
}

fn mul_mag(a: &[u8], b: &[u8]) -> Digits {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let mut acc = vec![0u32; a.len() + b.len()];
    for (i, &x) in a.iter().rev().enumerate() {
        for (j, &y) in b.iter().rev().enumerate() {
            if let Some(slot) = acc.get_mut(i + j) {
                *slot += u32::from(x) * u32::from(y);
            }
        }
    }
    let mut carry = 0u32;
    let mut out = Vec::with_capacity(acc.len() + 2);
    for v in acc {
        let s = v + carry;
        out.push((s % 10) as u8);
        carry = s / 10;
    }
    while carry > 0 {
        out.push((carry % 10) as u8);
        carry /= 10;
    }
    out.reverse();
    trim(out)
}

fn mul_small(a: &[u8], m: u32) -> Digits {
    let mut out = Vec::with_capacity(a.len() + 3);
    let mut carry = 0u32;
    for &x in a.iter().rev() {
        let s = u32::from(x) * m + carry;
        out.push((s % 10) as u8);
        carry = s / 10;
    }
    while carry > 0 {
        out.push((carry % 10) as u8);
        carry /= 10;
    }
    out.reverse();
    trim(out)
}

/// Drops the last `drop` digits of `d` rounding half to even; returns the rounded digits.
fn round_drop(d: &[u8], drop: usize) -> Digits {
    if drop == 0 {
        return d.to_vec();
    }
    if drop > d.len() {
        return Vec::new(); // below half a unit: rounds to zero
    }
    let keep_len = d.len() - drop;
    let kept = d.get(..keep_len).unwrap_or(&[]).to_vec();
    let first = d.get(keep_len).copied().unwrap_or(0);
    let rest_nonzero = d.get(keep_len + 1..).unwrap_or(&[]).iter().any(|&x| x != 0);
    let last_odd = kept.last().is_some_and(|&x| x % 2 == 1);
    let up = first > 5 || (first == 5 && (rest_nonzero || last_odd));
    if up { add_mag(&kept, &[1]) } else { trim(kept) }
}

/// Rounds `±digits × 10^exp` to a Decimal128 (34 digits, exponent range, overflow to ±Inf).
fn finish(negative: bool, digits: Digits, mut exp: i32) -> Decimal {
    let mut digits = trim(digits);
    if digits.len() > PRECISION {
        let drop = digits.len() - PRECISION;
        digits = round_drop(&digits, drop);
        exp = exp.saturating_add(drop as i32);
        if digits.len() > PRECISION {
            digits = round_drop(&digits, 1);
            exp = exp.saturating_add(1);
        }
    }
    if exp < MIN_EXP {
        let drop = (MIN_EXP as i64 - exp as i64) as usize;
        digits = round_drop(&digits, drop);
        exp = MIN_EXP;
    }
    if exp > MAX_EXP {
        if digits.is_empty() {
            exp = MAX_EXP;
        } else {
            let pad = (exp as i64 - MAX_EXP as i64) as usize;
            if digits.len() + pad > PRECISION {
                return Decimal::Infinite { negative };
            }
            digits.extend(std::iter::repeat_n(0u8, pad));
            exp = MAX_EXP;
        }
    }
    Decimal::Finite {
        negative,
        coefficient: to_u128(&digits),
        exponent: exp,
    }
}

fn from_i64(i: i64) -> Decimal {
    Decimal::Finite {
        negative: i < 0,
        coefficient: u128::from(i.unsigned_abs()),
        exponent: 0,
    }
}

/// `Decimal128(double)` with MongoDB's default 15-digit precision.
fn from_f64(x: f64) -> Decimal {
    if x.is_nan() {
        return Decimal::NaN;
    }
    if x.is_infinite() {
        return Decimal::Infinite { negative: x < 0.0 };
    }
    let Some((negative, m, e)) = decompose_f64(x) else {
        return Decimal::Finite {
            negative: x.is_sign_negative(),
            coefficient: 0,
            exponent: 0,
        };
    };
    // Exact value: m × 2^e.
    let (digits, exp) = if e >= 0 {
        let mut d = digits_of(u128::from(m));
        for _ in 0..e {
            d = mul_small(&d, 2);
        }
        (d, 0)
    } else {
        let mut d = digits_of(u128::from(m));
        for _ in 0..e.unsigned_abs() {
            d = mul_small(&d, 5);
        }
        (d, e)
    };
    // First the correctly rounded 34-digit conversion, then quantize to 15 digits.
    let Decimal::Finite {
        coefficient,
        exponent,
        ..
    } = finish(negative, digits, exp)
    else {
        return Decimal::NaN;
    };
    let d = digits_of(coefficient);
    if d.len() <= 15 {
        // Quantizing to 15 digits adds trailing zeros.
        let pad = 15 - d.len();
        let mut padded = d;
        padded.extend(std::iter::repeat_n(0u8, pad));
        return finish(negative, padded, exponent - pad as i32);
    }
    let drop = d.len() - 15;
    let mut rounded = round_drop(&d, drop);
    let mut exponent = exponent + drop as i32;
    if rounded.len() > 15 {
        // A carry (9.99…9 → 10.00…0): requantize once, as MongoDB does.
        rounded = round_drop(&rounded, 1);
        exponent += 1;
    }
    finish(negative, rounded, exponent)
}

fn parts(d: Decimal) -> Option<(bool, Digits, i32)> {
    match d {
        Decimal::Finite {
            negative,
            coefficient,
            exponent,
        } => Some((negative, digits_of(coefficient), exponent)),
        _ => None,
    }
}

fn dec_add(a: Decimal, b: Decimal) -> Decimal {
    match (a, b) {
        (Decimal::NaN, _) | (_, Decimal::NaN) => return Decimal::NaN,
        (Decimal::Infinite { negative: x }, Decimal::Infinite { negative: y }) => {
            return if x == y { a } else { Decimal::NaN };
        }
        (Decimal::Infinite { .. }, _) => return a,
        (_, Decimal::Infinite { .. }) => return b,
        _ => {}
    }
    let (Some((na, da, ea)), Some((nb, db, eb))) = (parts(a), parts(b)) else {
        return Decimal::NaN;
    };
    let emin = ea.min(eb);
    match (da.is_empty(), db.is_empty()) {
        (true, true) => return finish(na && nb, Vec::new(), emin),
        (true, false) => return with_preferred_exp(nb, db, eb, emin),
        (false, true) => return with_preferred_exp(na, da, ea, emin),
        _ => {}
    }
    // Order by exponent: (hi has the larger exponent).
    let ((nh, mut dh, eh), (nl, mut dl, mut el)) = if ea >= eb {
        ((na, da, ea), (nb, db, eb))
    } else {
        ((nb, db, eb), (na, da, ea))
    };
    if eh - el > MAX_ALIGN {
        // Far below the rounding digit: only its sign and non-zeroness matter.
        dl = vec![1];
        el = eh - MAX_ALIGN;
    }
    dh.extend(std::iter::repeat_n(0u8, (eh - el) as usize));
    let exp = el;
    if nh == nl {
        return finish(nh, add_mag(&dh, &dl), exp);
    }
    match cmp_mag(&dh, &dl) {
        std::cmp::Ordering::Equal => finish(false, Vec::new(), exp),
        std::cmp::Ordering::Greater => finish(nh, sub_mag(&dh, &dl), exp),
        std::cmp::Ordering::Less => finish(nl, sub_mag(&dl, &dh), exp),
    }
}

/// `x + 0`: the value of `x` with the exponent moved toward `preferred` as far as 34 digits
/// allow.
fn with_preferred_exp(negative: bool, mut d: Digits, e: i32, preferred: i32) -> Decimal {
    if e > preferred {
        let room = PRECISION.saturating_sub(d.len()) as i32;
        let shift = (e - preferred).min(room);
        d.extend(std::iter::repeat_n(0u8, shift.max(0) as usize));
        return finish(negative, d, e - shift.max(0));
    }
    finish(negative, d, e)
}

fn dec_mul(a: Decimal, b: Decimal) -> Decimal {
    let sign = |d: Decimal| match d {
        Decimal::Finite { negative, .. } | Decimal::Infinite { negative } => negative,
        Decimal::NaN => false,
    };
    let negative = sign(a) != sign(b);
    match (a, b) {
        (Decimal::NaN, _) | (_, Decimal::NaN) => Decimal::NaN,
        (Decimal::Infinite { .. }, Decimal::Finite { coefficient: 0, .. })
        | (Decimal::Finite { coefficient: 0, .. }, Decimal::Infinite { .. }) => Decimal::NaN,
        (Decimal::Infinite { .. }, _) | (_, Decimal::Infinite { .. }) => {
            Decimal::Infinite { negative }
        }
        _ => {
            let (Some((_, da, ea)), Some((_, db, eb))) = (parts(a), parts(b)) else {
                return Decimal::NaN;
            };
            finish(negative, mul_mag(&da, &db), ea.saturating_add(eb))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Num {
        Num::Dec(Decimal::from_decimal128(s.parse().unwrap()))
    }

    fn show(n: Num) -> String {
        match n.to_raw() {
            RawBson::Decimal128(d) => d.to_string(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn integer_promotion() {
        assert_eq!(
            add(Num::I32(i32::MAX), Num::I32(1)),
            Some(Num::I64(1 << 31))
        );
        assert_eq!(add(Num::I64(i64::MAX), Num::I32(1)), None);
        assert_eq!(
            mul(Num::I32(1 << 20), Num::I32(1 << 20)),
            Some(Num::I64(1 << 40))
        );
        assert_eq!(mul(Num::I64(i64::MAX), Num::I64(2)), None);
        assert_eq!(add(Num::I32(1), Num::F64(0.5)), Some(Num::F64(1.5)));
    }

    #[test]
    fn decimals() {
        assert_eq!(show(add(dec("1.5"), dec("2.25")).unwrap()), "3.75");
        assert_eq!(show(add(dec("1"), Num::I32(2)).unwrap()), "3");
        assert_eq!(show(mul(dec("2.50"), Num::I32(0)).unwrap()), "0.00");
        assert_eq!(
            show(add(dec("1"), Num::F64(0.5)).unwrap()),
            "1.500000000000000"
        );
        assert_eq!(
            show(add(dec("0.1"), Num::F64(0.1)).unwrap()),
            "0.200000000000000"
        );
        assert_eq!(
            show(add(dec("1E+6144"), dec("1E-6176")).unwrap()),
            "1.000000000000000000000000000000000E+6144"
        );
        assert_eq!(
            show(mul(dec("9.99E+6144"), Num::I32(10)).unwrap()),
            "Infinity"
        );
        assert_eq!(show(add(dec("-1"), dec("1")).unwrap()), "0");
        assert_eq!(
            show(add(dec("9999999999999999999999999999999999"), Num::I32(1)).unwrap()),
            "1.000000000000000000000000000000000E+34"
        );
    }

    #[test]
    fn bits() {
        assert_eq!(bit(BitOp::Or, Num::I32(5), Num::I32(2)), Some(Num::I32(7)));
        assert_eq!(bit(BitOp::And, Num::I32(5), Num::I64(4)), Some(Num::I64(4)));
        assert_eq!(bit(BitOp::Xor, Num::F64(1.0), Num::I32(1)), None);
    }
}
