//! Decimal128 arithmetic for the expression evaluator (IEEE 754-2008 decimal128 as MongoDB's
//! `Decimal128` wraps the Intel library): addition, multiplication, division, `fmod`,
//! `quantize`, square root, conversions to and from integers, doubles and strings.
//!
//! Invariants:
//! - every finite result is correctly rounded to 34 significant digits (round half to even
//!   unless a rounding mode is given) with the exponent clamped to `-6176 ..= 6111`, overflow
//!   giving ±Infinity; exact results keep IEEE's preferred exponent (e.g. `1.50 + 1 = 2.50`,
//!   `1 / 4 = 0.25`, `sqrt(2.25) = 1.5`);
//! - nothing here panics: digit vectors are bounded (alignment beyond [`MAX_ALIGN`] digits is
//!   replaced by a sticky digit, which cannot change a correctly rounded result) and all
//!   indexing is checked;
//! - the transcendental functions (`exp`, `ln`, `log`, `pow` with a non-integral exponent) are
//!   *not* computed to 34 digits: they go through `f64` and keep 15 significant digits (see
//!   [`via_f64`]); MongoDB returns the Intel library's 34-digit results there.

use bson::Decimal128;
use cairn_storage::decimal::Decimal;

/// Significant digits of a Decimal128.
pub(crate) const PRECISION: usize = 34;
const MAX_EXP: i32 = 6111;
const MIN_EXP: i32 = -6176;
/// Farthest alignment (in decimal digits) done exactly when adding.
const MAX_ALIGN: i32 = 80;

/// Decimal digits, most significant first, no leading zeros (empty = 0).
type Digits = Vec<u8>;

/// IEEE rounding directions used by MongoDB's expressions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rounding {
    /// Round half to even (the default).
    HalfEven,
    /// Toward zero (`$trunc`, conversions to integers).
    TowardZero,
    /// Toward +∞ (`$ceil`).
    Up,
    /// Toward −∞ (`$floor`).
    Down,
}

/// Zero with exponent 0.
pub(crate) const ZERO: Decimal = Decimal::Finite {
    negative: false,
    coefficient: 0,
    exponent: 0,
};

/// Encodes a decoded decimal into BID bytes (finite coefficients must be below 10^34).
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

/// `Decimal128::toString` (the bson crate implements the same specification).
pub(crate) fn to_string(d: Decimal) -> String {
    encode(d).to_string()
}

/// True for ±0.
pub(crate) fn is_zero(d: Decimal) -> bool {
    matches!(d, Decimal::Finite { coefficient: 0, .. })
}

/// True for values below zero (−0 and NaN are not).
pub(crate) fn is_negative(d: Decimal) -> bool {
    match d {
        Decimal::Finite {
            negative,
            coefficient,
            ..
        } => negative && coefficient != 0,
        Decimal::Infinite { negative } => negative,
        Decimal::NaN => false,
    }
}

/// The sign bit (NaN: false).
fn sign(d: Decimal) -> bool {
    match d {
        Decimal::Finite { negative, .. } | Decimal::Infinite { negative } => negative,
        Decimal::NaN => false,
    }
}

/// `-d`.
pub(crate) fn negate(d: Decimal) -> Decimal {
    match d {
        Decimal::NaN => Decimal::NaN,
        Decimal::Infinite { negative } => Decimal::Infinite {
            negative: !negative,
        },
        Decimal::Finite {
            negative,
            coefficient,
            exponent,
        } => Decimal::Finite {
            negative: !negative,
            coefficient,
            exponent,
        },
    }
}

/// `|d|`.
pub(crate) fn abs(d: Decimal) -> Decimal {
    match d {
        Decimal::Infinite { .. } => Decimal::Infinite { negative: false },
        Decimal::Finite {
            coefficient,
            exponent,
            ..
        } => Decimal::Finite {
            negative: false,
            coefficient,
            exponent,
        },
        Decimal::NaN => Decimal::NaN,
    }
}

// ---------------------------------------------------------------------------------------------
// Digit vectors
// ---------------------------------------------------------------------------------------------

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

/// Drops the last `drop` digits of `d` (a value of sign `negative`), rounding by `mode`;
/// `sticky` says that nonzero digits were already dropped below these. Returns the kept
/// digits and whether anything nonzero was dropped.
fn round_drop(
    negative: bool,
    d: &[u8],
    drop: usize,
    sticky: bool,
    mode: Rounding,
) -> (Digits, bool) {
    let keep_len = d.len().saturating_sub(drop);
    let kept = d.get(..keep_len).unwrap_or(&[]).to_vec();
    let dropped = d.get(keep_len..).unwrap_or(&[]);
    // With drop > len, the first dropped digit is a virtual leading zero.
    let (first, rest_nonzero) = if drop > d.len() {
        (0, dropped.iter().any(|&x| x != 0) || sticky)
    } else {
        (
            dropped.first().copied().unwrap_or(0),
            dropped.get(1..).unwrap_or(&[]).iter().any(|&x| x != 0) || sticky,
        )
    };
    let inexact = first != 0 || rest_nonzero;
    let up = match mode {
        Rounding::HalfEven => {
            let last_odd = kept.last().is_some_and(|&x| x % 2 == 1);
            first > 5 || (first == 5 && (rest_nonzero || last_odd))
        }
        Rounding::TowardZero => false,
        Rounding::Up => inexact && !negative,
        Rounding::Down => inexact && negative,
    };
    let kept = if up { add_mag(&kept, &[1]) } else { trim(kept) };
    (kept, inexact)
}

/// Rounds `±digits × 10^exp` (plus a sticky "something nonzero below") to a Decimal128:
/// 34 digits half to even, exponent range, overflow to ±Infinity.
fn finish_sticky(negative: bool, digits: Digits, mut exp: i32, sticky: bool) -> Decimal {
    let mut digits = trim(digits);
    let mut sticky = sticky;
    if digits.len() > PRECISION {
        let drop = digits.len() - PRECISION;
        let (d, inexact) = round_drop(negative, &digits, drop, sticky, Rounding::HalfEven);
        digits = d;
        sticky = inexact;
        exp = exp.saturating_add(drop as i32);
        if digits.len() > PRECISION {
            let (d, _) = round_drop(negative, &digits, 1, false, Rounding::HalfEven);
            digits = d;
            exp = exp.saturating_add(1);
        }
    } else if sticky && digits.len() < PRECISION {
        // Only reachable for callers that computed too few digits; keep what we have.
    }
    if exp < MIN_EXP {
        let drop = (i64::from(MIN_EXP) - i64::from(exp)) as usize;
        let (d, _) = round_drop(negative, &digits, drop, sticky, Rounding::HalfEven);
        digits = d;
        exp = MIN_EXP;
    }
    if exp > MAX_EXP {
        if digits.is_empty() {
            exp = MAX_EXP;
        } else {
            let pad = (i64::from(exp) - i64::from(MAX_EXP)) as usize;
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

fn finish(negative: bool, digits: Digits, exp: i32) -> Decimal {
    finish_sticky(negative, digits, exp, false)
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

/// Removes trailing zeros of an exact result while its exponent is below `preferred`.
fn toward_preferred(d: Decimal, preferred: i32) -> Decimal {
    let Decimal::Finite {
        negative,
        mut coefficient,
        mut exponent,
    } = d
    else {
        return d;
    };
    if coefficient == 0 {
        return Decimal::Finite {
            negative,
            coefficient,
            exponent: preferred.clamp(MIN_EXP, MAX_EXP),
        };
    }
    while exponent < preferred && coefficient % 10 == 0 {
        coefficient /= 10;
        exponent += 1;
    }
    Decimal::Finite {
        negative,
        coefficient,
        exponent,
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------------------------

/// `Decimal128(long long)`: exact.
pub(crate) fn from_i64(i: i64) -> Decimal {
    Decimal::Finite {
        negative: i < 0,
        coefficient: u128::from(i.unsigned_abs()),
        exponent: 0,
    }
}

/// `Decimal128(double, kRoundTo34Digits)` when `digits` is 34, `Decimal128(double)` (the
/// default, `kRoundTo15Digits`: first correctly rounded to 34 digits, then quantized to 15
/// significant digits, re-quantized once when rounding carries) when it is 15.
pub(crate) fn from_f64(x: f64, digits: usize) -> Decimal {
    if x.is_nan() {
        return Decimal::NaN;
    }
    if x.is_infinite() {
        return Decimal::Infinite { negative: x < 0.0 };
    }
    let negative = x.is_sign_negative();
    if x == 0.0 {
        return Decimal::Finite {
            negative,
            coefficient: 0,
            exponent: 0,
        };
    }
    // Rust's `{:.33e}` is the exact decimal expansion correctly rounded (half to even) to 34
    // significant digits.
    let s = format!("{:.33e}", x.abs());
    let (mantissa, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut d: Digits = mantissa
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect();
    // d has 34 digits: value = d × 10^(exp - 33).
    let mut e = exp - 33;
    if digits < PRECISION {
        let drop = d.len().saturating_sub(digits);
        let (r, _) = round_drop(negative, &d, drop, false, Rounding::HalfEven);
        e += drop as i32;
        d = r;
        if d.len() > digits {
            let (r, _) = round_drop(negative, &d, 1, false, Rounding::HalfEven);
            d = r;
            e += 1;
        }
    }
    finish(negative, d, e)
}

/// `Decimal128::toDouble` (round half to even).
pub(crate) fn to_f64(d: Decimal) -> f64 {
    match d {
        Decimal::NaN => f64::NAN,
        Decimal::Infinite { negative } => {
            if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        Decimal::Finite {
            negative,
            coefficient,
            exponent,
        } => {
            let v: f64 = format!("{coefficient}e{exponent}")
                .parse()
                .unwrap_or(f64::NAN);
            if negative { -v } else { v }
        }
    }
}

/// The integer `d` rounds to under `mode`, or `None` for NaN, ±∞ and values outside `i64`
/// (Intel's "invalid" flag).
pub(crate) fn to_i64(d: Decimal, mode: Rounding) -> Option<i64> {
    let q = quantize(d, 0, mode);
    let Decimal::Finite {
        negative,
        coefficient,
        ..
    } = q
    else {
        return None;
    };
    if negative {
        if coefficient > 1u128 << 63 {
            return None;
        }
        i64::try_from(-(i128::try_from(coefficient).ok()?)).ok()
    } else {
        i64::try_from(coefficient).ok()
    }
}

/// True when `d` is an integer that fits an `i32` (`toIntExact` without flags).
pub(crate) fn exact_i32(d: Decimal) -> Option<i32> {
    let i = to_i64(d, Rounding::TowardZero)?;
    let back = from_i64(i);
    if cmp(back, d) != Some(std::cmp::Ordering::Equal) {
        return None;
    }
    i32::try_from(i).ok()
}

/// Numeric comparison (`None` when either is NaN).
pub(crate) fn cmp(a: Decimal, b: Decimal) -> Option<std::cmp::Ordering> {
    if matches!(a, Decimal::NaN) || matches!(b, Decimal::NaN) {
        return None;
    }
    Some(cairn_storage::compare::compare_values(
        bson::RawBsonRef::Decimal128(encode(a)),
        bson::RawBsonRef::Decimal128(encode(b)),
    ))
}

// ---------------------------------------------------------------------------------------------
// Arithmetic
// ---------------------------------------------------------------------------------------------

/// `a + b`.
pub(crate) fn add(a: Decimal, b: Decimal) -> Decimal {
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
        // 0 + 0: negative only when both are.
        (true, true) => return finish(na && nb, Vec::new(), emin),
        (true, false) => return with_preferred_exp(nb, db, eb, emin),
        (false, true) => return with_preferred_exp(na, da, ea, emin),
        _ => {}
    }
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
        let shift = (e - preferred).min(room).max(0);
        d.extend(std::iter::repeat_n(0u8, shift as usize));
        return finish(negative, d, e - shift);
    }
    finish(negative, d, e)
}

/// `a - b`.
pub(crate) fn sub(a: Decimal, b: Decimal) -> Decimal {
    add(a, negate(b))
}

/// `a × b`.
pub(crate) fn mul(a: Decimal, b: Decimal) -> Decimal {
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

/// `a / b`; the caller rejects a zero divisor (division by zero gives ±∞ here, 0/0 NaN).
pub(crate) fn div(a: Decimal, b: Decimal) -> Decimal {
    let negative = sign(a) != sign(b);
    match (a, b) {
        (Decimal::NaN, _) | (_, Decimal::NaN) => return Decimal::NaN,
        (Decimal::Infinite { .. }, Decimal::Infinite { .. }) => return Decimal::NaN,
        (Decimal::Infinite { .. }, _) => return Decimal::Infinite { negative },
        (_, Decimal::Infinite { .. }) => {
            return Decimal::Finite {
                negative,
                coefficient: 0,
                exponent: MIN_EXP,
            };
        }
        _ => {}
    }
    let (
        Decimal::Finite {
            coefficient: ca,
            exponent: ea,
            ..
        },
        Decimal::Finite {
            coefficient: cb,
            exponent: eb,
            ..
        },
    ) = (a, b)
    else {
        return Decimal::NaN;
    };
    if cb == 0 {
        return if ca == 0 {
            Decimal::NaN
        } else {
            Decimal::Infinite { negative }
        };
    }
    let preferred = ea.saturating_sub(eb);
    if ca == 0 {
        return finish(negative, Vec::new(), preferred);
    }
    // Long division of ca × 10^s by cb, producing at least 35 quotient digits.
    let la = digits_of(ca).len() as i32;
    let lb = digits_of(cb).len() as i32;
    let s = (PRECISION as i32 + 1 + lb - la).max(0);
    let mut dividend = digits_of(ca);
    dividend.extend(std::iter::repeat_n(0u8, s as usize));
    let mut rem: u128 = 0;
    let mut q = Vec::with_capacity(dividend.len());
    for d in dividend {
        rem = rem * 10 + u128::from(d);
        q.push((rem / cb) as u8);
        rem %= cb;
    }
    let exact = rem == 0;
    let r = finish_sticky(negative, q, preferred.saturating_sub(s), !exact);
    if exact {
        toward_preferred(r, preferred)
    } else {
        r
    }
}

/// `fmod(a, b)`: `a - trunc(a / b) × b`, exactly, with the sign of `a` (`Decimal128::modulo`).
pub(crate) fn fmod(a: Decimal, b: Decimal) -> Decimal {
    match (a, b) {
        (Decimal::NaN, _) | (_, Decimal::NaN) | (Decimal::Infinite { .. }, _) => {
            return Decimal::NaN;
        }
        (_, Decimal::Infinite { .. }) => return a,
        _ => {}
    }
    let (
        Decimal::Finite {
            negative,
            coefficient: ca,
            exponent: ea,
        },
        Decimal::Finite {
            coefficient: cb,
            exponent: eb,
            ..
        },
    ) = (a, b)
    else {
        return Decimal::NaN;
    };
    if cb == 0 {
        return Decimal::NaN;
    }
    let e = ea.min(eb);
    if ea <= eb && cmp(abs(a), abs(b)) == Some(std::cmp::Ordering::Less) {
        // |a| < |b| and a has the smaller exponent: a itself.
        return a;
    }
    // Now |b| <= |a|; when eb > ea, cb × 10^(eb - ea) <= ca < 10^34, so it fits.
    let mut divisor = digits_of(cb);
    divisor.extend(std::iter::repeat_n(
        0u8,
        usize::try_from(eb - e).unwrap_or(0).min(40),
    ));
    let div = to_u128(&divisor);
    if div == 0 || divisor.len() > 36 {
        return Decimal::NaN;
    }
    // Stream a's digits (with its scale) through the remainder.
    let mut rem: u128 = 0;
    let zeros = usize::try_from(ea - e).unwrap_or(0);
    for d in digits_of(ca)
        .into_iter()
        .chain(std::iter::repeat_n(0u8, zeros))
    {
        rem = (rem * 10 + u128::from(d)) % div;
    }
    finish(negative, digits_of(rem), e)
}

/// IEEE `quantize(d, 1E<exp>)` with a rounding mode: NaN when the result would need more
/// than 34 digits or `d` is infinite (MongoDB's `quantize` keeps Intel's invalid-operation
/// NaN).
pub(crate) fn quantize(d: Decimal, exp: i32, mode: Rounding) -> Decimal {
    let Some((negative, digits, e)) = parts(d) else {
        return Decimal::NaN;
    };
    if e == exp {
        return d;
    }
    if e < exp {
        let drop = usize::try_from(i64::from(exp) - i64::from(e)).unwrap_or(usize::MAX);
        let (kept, _) = round_drop(negative, &digits, drop.min(100_000), false, mode);
        if kept.len() > PRECISION {
            return Decimal::NaN;
        }
        return Decimal::Finite {
            negative,
            coefficient: to_u128(&kept),
            exponent: exp,
        };
    }
    let pad = usize::try_from(i64::from(e) - i64::from(exp)).unwrap_or(usize::MAX);
    if !digits.is_empty() && digits.len().saturating_add(pad) > PRECISION {
        return Decimal::NaN;
    }
    let mut padded = digits;
    if !padded.is_empty() {
        padded.extend(std::iter::repeat_n(0u8, pad));
    }
    Decimal::Finite {
        negative,
        coefficient: to_u128(&padded),
        exponent: exp,
    }
}

/// Square root, correctly rounded (IEEE `squareRoot`): NaN for negative nonzero values.
pub(crate) fn sqrt(d: Decimal) -> Decimal {
    let (negative, coefficient, exponent) = match d {
        Decimal::NaN => return Decimal::NaN,
        Decimal::Infinite { negative: false } => return d,
        Decimal::Infinite { negative: true } => return Decimal::NaN,
        Decimal::Finite {
            negative,
            coefficient,
            exponent,
        } => (negative, coefficient, exponent),
    };
    let preferred = exponent.div_euclid(2);
    if coefficient == 0 {
        return Decimal::Finite {
            negative,
            coefficient: 0,
            exponent: preferred,
        };
    }
    if negative {
        return Decimal::NaN;
    }
    let mut c = digits_of(coefficient);
    let mut q = exponent;
    if q.rem_euclid(2) == 1 {
        c.push(0);
        q -= 1;
    }
    // Scale by 10^(2m) so that the root has at least 35 digits.
    let m = (72usize.saturating_sub(c.len())).div_ceil(2);
    c.extend(std::iter::repeat_n(0u8, 2 * m));
    let (root, exact) = isqrt(&c);
    let r = finish_sticky(false, root, q / 2 - m as i32, !exact);
    if exact {
        toward_preferred(r, preferred)
    } else {
        r
    }
}

/// Integer square root of a digit vector (long-hand method) and whether it is exact.
fn isqrt(n: &[u8]) -> (Digits, bool) {
    let mut n = n.to_vec();
    if n.len() % 2 == 1 {
        n.insert(0, 0);
    }
    let mut rem: Digits = Vec::new();
    let mut p: Digits = Vec::new();
    for pair in n.chunks(2) {
        let mut r = rem.clone();
        r.extend_from_slice(pair);
        rem = trim(r);
        let base = mul_small(&p, 20);
        let mut chosen = 0u8;
        for d in (0..=9u8).rev() {
            let cand = mul_small(&add_mag(&base, &[d]), u32::from(d));
            if cmp_mag(&cand, &rem) != std::cmp::Ordering::Greater {
                rem = sub_mag(&rem, &cand);
                chosen = d;
                break;
            }
        }
        p.push(chosen);
        p = trim(p);
    }
    (p, rem.is_empty())
}

/// `base ^ n` for an integer `n` by repeated squaring (each step correctly rounded), with
/// `1 / base^|n|` for negative `n`.
pub(crate) fn powi(base: Decimal, n: i64) -> Decimal {
    let one = from_i64(1);
    let mut result = one;
    let mut b = base;
    let mut k = n.unsigned_abs();
    while k > 0 {
        if k & 1 == 1 {
            result = mul(result, b);
        }
        k >>= 1;
        if k > 0 {
            b = mul(b, b);
        }
    }
    if n < 0 { div(one, result) } else { result }
}

/// A transcendental function computed in `f64` and converted back with 15 significant
/// digits (a documented approximation of Intel's 34-digit results).
pub(crate) fn via_f64(d: Decimal, f: impl Fn(f64) -> f64) -> Decimal {
    from_f64(f(to_f64(d)), 15)
}

/// True for NaN.
pub(crate) fn is_nan(d: Decimal) -> bool {
    matches!(d, Decimal::NaN)
}

macro_rules! via_f64_fns {
    ($($name:ident => $f:expr),* $(,)?) => {
        $(pub(crate) fn $name(d: Decimal) -> Decimal {
            from_f64(($f)(to_f64(d)), 34)
        })*
    };
}

via_f64_fns! {
    sin => f64::sin,
    cos => f64::cos,
    tan => f64::tan,
    asin => f64::asin,
    acos => f64::acos,
    atan => f64::atan,
    sinh => f64::sinh,
    cosh => f64::cosh,
    tanh => f64::tanh,
    asinh => f64::asinh,
    acosh => f64::acosh,
    atanh => f64::atanh,
}

/// `atan2(y, x)`.
pub(crate) fn atan2(y: Decimal, x: Decimal) -> Decimal {
    from_f64(to_f64(y).atan2(to_f64(x)), 34)
}

/// π / 180.
pub(crate) fn pi_over_180() -> Decimal {
    Decimal::from_decimal128(
        "0.01745329251994329576923690768488613"
            .parse::<Decimal128>()
            .unwrap_or(Decimal128::from_bytes([0; 16])),
    )
}

/// 180 / π.
pub(crate) fn one_80_over_pi() -> Decimal {
    Decimal::from_decimal128(
        "57.29577951308232087679815481410517"
            .parse::<Decimal128>()
            .unwrap_or(Decimal128::from_bytes([0; 16])),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Decimal {
        Decimal::from_decimal128(s.parse::<Decimal128>().unwrap())
    }

    fn show(d: Decimal) -> String {
        to_string(d)
    }

    #[test]
    fn arithmetic() {
        assert_eq!(show(add(dec("1.5"), dec("2.25"))), "3.75");
        assert_eq!(show(add(dec("1.50"), dec("1"))), "2.50");
        assert_eq!(show(sub(dec("1"), dec("1"))), "0");
        assert_eq!(show(mul(dec("2.50"), dec("0"))), "0.00");
        assert_eq!(show(div(dec("1"), dec("4"))), "0.25");
        assert_eq!(show(div(dec("10"), dec("4"))), "2.5");
        assert_eq!(show(div(dec("100"), dec("10"))), "10");
        assert_eq!(
            show(div(dec("1"), dec("3"))),
            "0.3333333333333333333333333333333333"
        );
        assert_eq!(
            show(div(dec("2"), dec("3"))),
            "0.6666666666666666666666666666666667"
        );
        assert_eq!(show(div(dec("6E+3"), dec("2"))), "3E+3");
        assert_eq!(show(fmod(dec("10"), dec("3"))), "1");
        assert_eq!(show(fmod(dec("-10.5"), dec("3"))), "-1.5");
        assert_eq!(show(fmod(dec("1E+40"), dec("7"))), "4");
    }

    #[test]
    fn rounding() {
        assert_eq!(show(quantize(dec("2.5"), 0, Rounding::HalfEven)), "2");
        assert_eq!(show(quantize(dec("3.5"), 0, Rounding::HalfEven)), "4");
        assert_eq!(show(quantize(dec("-2.1"), 0, Rounding::Up)), "-2");
        assert_eq!(show(quantize(dec("-2.1"), 0, Rounding::Down)), "-3");
        assert_eq!(
            show(quantize(dec("1.234"), -2, Rounding::TowardZero)),
            "1.23"
        );
        assert_eq!(show(quantize(dec("5"), -2, Rounding::HalfEven)), "5.00");
        assert_eq!(show(quantize(dec("1E+40"), 0, Rounding::HalfEven)), "NaN");
        assert_eq!(show(quantize(dec("0.4"), 0, Rounding::Up)), "1");
        assert_eq!(
            to_i64(dec("-9223372036854775808"), Rounding::HalfEven),
            Some(i64::MIN)
        );
        assert_eq!(to_i64(dec("9223372036854775808"), Rounding::HalfEven), None);
        assert_eq!(exact_i32(dec("4.0")), Some(4));
        assert_eq!(exact_i32(dec("4.5")), None);
    }

    #[test]
    fn conversions() {
        assert_eq!(show(from_f64(0.5, 15)), "0.500000000000000");
        assert_eq!(show(from_f64(0.1, 15)), "0.100000000000000");
        assert_eq!(
            show(from_f64(0.1, 34)),
            "0.1000000000000000055511151231257827"
        );
        assert_eq!(show(from_f64(-2.0, 15)), "-2.00000000000000");
        assert!((to_f64(dec("0.1")) - 0.1).abs() < f64::EPSILON);
        assert_eq!(to_f64(dec("-1E+400")), f64::NEG_INFINITY);
    }

    #[test]
    fn roots() {
        assert_eq!(show(sqrt(dec("4"))), "2");
        assert_eq!(show(sqrt(dec("2.25"))), "1.5");
        assert_eq!(show(sqrt(dec("100"))), "10");
        assert_eq!(show(sqrt(dec("2"))), "1.414213562373095048801688724209698");
        assert_eq!(show(sqrt(dec("-1"))), "NaN");
        assert_eq!(show(powi(dec("1.5"), 2)), "2.25");
        assert_eq!(show(powi(dec("2"), -2)), "0.25");
    }
}
