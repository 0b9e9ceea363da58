//! Decimal128 arithmetic (IEEE 754-2008 decimal128, as MongoDB's `Decimal128` computes it
//! with Intel's library) on libdecnumber through the `dec` crate.
//!
//! Every operation converts the decoded [`Decimal`] into a decNumber, computes in a decimal128
//! context (34 digits, exponents −6176 ..= 6111 with clamping, round half to even unless a
//! rounding mode is given) and converts back, so results are correctly rounded IEEE values
//! with IEEE's preferred exponents (`1.50 + 1 = 2.50`, `1 / 4 = 0.25`, `sqrt(2.25) = 1.5`).
//! The transcendental functions (`exp`, `ln`, `log10`, `pow`) are libdecnumber's, correctly
//! rounded to 34 digits; `pow` then presents its result with 34 significant digits as Intel's
//! `bid128_pow` does (`pow(2, 2) = 4.000000000000000000000000000000000`). The trigonometric and
//! hyperbolic functions, which libdecnumber lacks, are computed by series at 50 digits and
//! rounded to 34.
//!
//! Invariants: nothing here panics (libdecnumber signals errors through status flags, which
//! are ignored: invalid operations give NaN as IEEE specifies); conversions between
//! [`Decimal`] and decNumber are exact.

use std::cmp::Ordering;

use bson::Decimal128;
use dec::{Context, Decimal as Dn};

use super::Decimal;

/// decNumber units (3 digits each) of the series' working numbers: 120 digits.
const UNITS: usize = 40;
/// Units of the decimal128 operations: 36 digits, enough for 34.
const UNITS128: usize = 12;

type Num = Dn<UNITS>;
type Num128 = Dn<UNITS128>;

/// The decimal128 format's limits.
const PRECISION: usize = 34;
const MAX_EXP: i32 = 6111;
const MIN_EXP: i32 = -6176;

const DECNEG: u8 = 0x80;
const DECINF: u8 = 0x40;

/// IEEE rounding directions used by MongoDB's expressions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// Round half to even (the default).
    HalfEven,
    /// Toward zero (`$trunc`, conversions to integers).
    TowardZero,
    /// Toward +∞ (`$ceil`).
    Up,
    /// Toward −∞ (`$floor`).
    Down,
}

impl Rounding {
    fn to_dec(self) -> dec::Rounding {
        match self {
            Rounding::HalfEven => dec::Rounding::HalfEven,
            Rounding::TowardZero => dec::Rounding::Down,
            Rounding::Up => dec::Rounding::Ceiling,
            Rounding::Down => dec::Rounding::Floor,
        }
    }
}

/// A context with `digits` of precision and decimal128's exponent range.
fn context<const N: usize>(digits: usize, rounding: Rounding) -> Context<Dn<N>> {
    let mut cx = Context::<Dn<N>>::default();
    let _ = cx.set_precision(digits.clamp(1, N * 3));
    let _ = cx.set_max_exponent(6144);
    let _ = cx.set_min_exponent(-6143);
    cx.set_clamp(digits == PRECISION);
    cx.set_rounding(rounding.to_dec());
    cx
}

/// The decimal128 context.
fn d128() -> Context<Num128> {
    context(PRECISION, Rounding::HalfEven)
}

fn digit_count(mut c: u128) -> u32 {
    let mut n = 0;
    while c > 0 {
        c /= 10;
        n += 1;
    }
    n.max(1)
}

/// Exact conversion into a decNumber.
fn to_num<const N: usize>(d: Decimal) -> Dn<N> {
    match d {
        Decimal::NaN => Dn::<N>::nan(),
        Decimal::Infinite { negative } => {
            Dn::<N>::from_raw_parts(1, 0, DECINF | if negative { DECNEG } else { 0 }, [0; N])
        }
        Decimal::Finite {
            negative,
            coefficient,
            exponent,
        } => {
            let mut lsu = [0u16; N];
            let mut c = coefficient;
            for unit in lsu.iter_mut() {
                if c == 0 {
                    break;
                }
                *unit = (c % 1000) as u16;
                c /= 1000;
            }
            Dn::<N>::from_raw_parts(
                digit_count(coefficient),
                exponent,
                if negative { DECNEG } else { 0 },
                lsu,
            )
        }
    }
}

/// Conversion back from a decNumber of at most 38 digits (exact).
fn from_num<const N: usize>(n: &Dn<N>) -> Decimal {
    if n.is_nan() {
        return Decimal::NaN;
    }
    if n.is_infinite() {
        return Decimal::Infinite {
            negative: n.is_negative(),
        };
    }
    let (digits, exponent, bits, lsu) = n.to_raw_parts();
    let units = Dn::<N>::digits_to_lsu_elements_len(digits).min(N);
    let mut coefficient: u128 = 0;
    for unit in lsu.iter().take(units).rev() {
        coefficient = coefficient
            .saturating_mul(1000)
            .saturating_add(u128::from(*unit));
    }
    Decimal::Finite {
        negative: bits & DECNEG != 0,
        coefficient,
        exponent,
    }
}

/// Rounds a wider result to decimal128.
fn round34(mut n: Num) -> Decimal {
    let mut cx = context::<UNITS>(PRECISION, Rounding::HalfEven);
    cx.plus(&mut n);
    from_num(&n)
}

fn unary(d: Decimal, f: impl FnOnce(&mut Context<Num128>, &mut Num128)) -> Decimal {
    let mut cx = d128();
    let mut n = to_num::<UNITS128>(d);
    f(&mut cx, &mut n);
    from_num(&n)
}

fn binary(
    a: Decimal,
    b: Decimal,
    f: impl FnOnce(&mut Context<Num128>, &mut Num128, &Num128),
) -> Decimal {
    let mut cx = d128();
    let mut x = to_num::<UNITS128>(a);
    let y = to_num::<UNITS128>(b);
    f(&mut cx, &mut x, &y);
    from_num(&x)
}

/// Zero with exponent 0.
pub const ZERO: Decimal = Decimal::Finite {
    negative: false,
    coefficient: 0,
    exponent: 0,
};

/// Encodes a decoded decimal into BSON's BID bytes (finite coefficients below 10^34).
pub fn encode(d: Decimal) -> Decimal128 {
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
pub fn to_string(d: Decimal) -> String {
    encode(d).to_string()
}

/// True for ±0.
pub fn is_zero(d: Decimal) -> bool {
    matches!(d, Decimal::Finite { coefficient: 0, .. })
}

/// True for NaN.
pub fn is_nan(d: Decimal) -> bool {
    matches!(d, Decimal::NaN)
}

/// True for values below zero (−0 and NaN are not).
pub fn is_negative(d: Decimal) -> bool {
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

/// `-d` (the sign flips, zeros included).
pub fn negate(d: Decimal) -> Decimal {
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
pub fn abs(d: Decimal) -> Decimal {
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

/// `Decimal128(long long)`: exact.
pub fn from_i64(i: i64) -> Decimal {
    Decimal::Finite {
        negative: i < 0,
        coefficient: u128::from(i.unsigned_abs()),
        exponent: 0,
    }
}

/// `Decimal128(double, kRoundTo34Digits)` when `digits` is 34, `Decimal128(double)` (the
/// default `kRoundTo15Digits`: the double's exact value rounded to 15 significant digits)
/// when it is 15.
pub fn from_f64(x: f64, digits: usize) -> Decimal {
    if x.is_nan() {
        return Decimal::NaN;
    }
    if x.is_infinite() {
        return Decimal::Infinite { negative: x < 0.0 };
    }
    if x == 0.0 {
        return Decimal::Finite {
            negative: x.is_sign_negative(),
            coefficient: 0,
            exponent: 0,
        };
    }
    // Rust prints the exact binary value correctly rounded (half to even) to 34 significant
    // digits, as `binary64_to_bid128` converts; the 15-digit form then rounds that again, as
    // MongoDB's `Decimal128(double)` quantizes the 34-digit conversion.
    let s = format!("{:.33e}", x.abs());
    let (mantissa, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let coefficient = mantissa
        .bytes()
        .filter(u8::is_ascii_digit)
        .fold(0u128, |acc, b| acc * 10 + u128::from(b - b'0'));
    let exact = Decimal::Finite {
        negative: x.is_sign_negative(),
        coefficient,
        exponent: exp.parse::<i32>().unwrap_or(0) - 33,
    };
    if digits >= PRECISION {
        return exact;
    }
    let mut n = to_num::<UNITS128>(exact);
    let mut narrow = context::<UNITS128>(digits.max(1), Rounding::HalfEven);
    narrow.plus(&mut n);
    from_num(&n)
}

/// `Decimal128::toDouble` (round half to even).
pub fn to_f64(d: Decimal) -> f64 {
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

/// Numeric comparison (`None` when either is NaN).
pub fn cmp(a: Decimal, b: Decimal) -> Option<Ordering> {
    if is_nan(a) || is_nan(b) {
        return None;
    }
    Some(crate::compare::compare_values(
        bson::RawBsonRef::Decimal128(encode(a)),
        bson::RawBsonRef::Decimal128(encode(b)),
    ))
}

/// `a + b`.
pub fn add(a: Decimal, b: Decimal) -> Decimal {
    binary(a, b, |cx, x, y| cx.add(x, y))
}

/// `a - b`.
pub fn sub(a: Decimal, b: Decimal) -> Decimal {
    binary(a, b, |cx, x, y| cx.sub(x, y))
}

/// `a × b`.
pub fn mul(a: Decimal, b: Decimal) -> Decimal {
    binary(a, b, |cx, x, y| cx.mul(x, y))
}

/// `a / b` (division by zero gives ±∞, 0/0 NaN; callers reject zero divisors first).
pub fn div(a: Decimal, b: Decimal) -> Decimal {
    binary(a, b, |cx, x, y| cx.div(x, y))
}

/// `fmod(a, b)`: `a - trunc(a / b) × b`, exact, with the sign of `a` (`Decimal128::modulo`,
/// Intel's `bid128_fmod`, which unlike IEEE `remainder` has no quotient-size limit).
pub fn fmod(a: Decimal, b: Decimal) -> Decimal {
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
    if ea <= eb && cmp(abs(a), abs(b)) == Some(Ordering::Less) {
        return a;
    }
    // |b| <= |a| here; when eb > ea, cb × 10^(eb - ea) <= ca < 10^34, so it fits a u128.
    let shift = u32::try_from(eb - e).unwrap_or(0);
    let Some(divisor) = 10u128.checked_pow(shift).and_then(|p| cb.checked_mul(p)) else {
        return Decimal::NaN;
    };
    // Stream a's coefficient and its extra zeros through the remainder.
    let mut rem: u128 = ca % divisor;
    for _ in 0..usize::try_from(ea - e).unwrap_or(0) {
        rem = (rem * 10) % divisor;
    }
    Decimal::Finite {
        negative,
        coefficient: rem,
        exponent: e,
    }
}

/// IEEE `quantize(d, 1E<exp>)` with a rounding mode: NaN when the result would need more than
/// 34 digits or `d` is infinite.
pub fn quantize(d: Decimal, exp: i32, mode: Rounding) -> Decimal {
    let mut cx = context::<UNITS128>(PRECISION, mode);
    let mut n = to_num::<UNITS128>(d);
    let target = Num128::from_raw_parts(1, exp, 0, {
        let mut l = [0u16; UNITS128];
        l[0] = 1;
        l
    });
    cx.quantize(&mut n, &target);
    from_num(&n)
}

/// The integer `d` rounds to under `mode`, or `None` for NaN, ±∞ and values outside `i64`.
pub fn to_i64(d: Decimal, mode: Rounding) -> Option<i64> {
    let Decimal::Finite {
        negative,
        coefficient,
        ..
    } = quantize(d, 0, mode)
    else {
        return None;
    };
    let magnitude = i128::try_from(coefficient).ok()?;
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// The value as an `i32` when it is exactly an integer in range.
pub fn exact_i32(d: Decimal) -> Option<i32> {
    let i = to_i64(d, Rounding::TowardZero)?;
    (cmp(from_i64(i), d) == Some(Ordering::Equal)).then_some(())?;
    i32::try_from(i).ok()
}

/// Square root, correctly rounded (NaN for negative nonzero values).
pub fn sqrt(d: Decimal) -> Decimal {
    unary(d, |cx, n| cx.sqrt(n))
}

/// `e^d` (`bid128_exp`).
pub fn exp(d: Decimal) -> Decimal {
    unary(d, |cx, n| cx.exp(n))
}

/// Natural logarithm (`bid128_log`).
pub fn ln(d: Decimal) -> Decimal {
    unary(d, |cx, n| cx.ln(n))
}

/// Base-10 logarithm (`bid128_log10`; exact for powers of ten).
pub fn log10(d: Decimal) -> Decimal {
    unary(d, |cx, n| cx.log10(n))
}

/// Base-2 logarithm (`bid128_log2`): exact for powers of two, otherwise `ln(d) / ln(2)`
/// computed at 50 digits and rounded once.
pub fn log2(d: Decimal) -> Decimal {
    match d {
        Decimal::Finite {
            negative: false,
            coefficient,
            ..
        } if coefficient != 0 => {}
        _ => return unary(d, |cx, n| cx.ln(n)),
    }
    let mut cx = wcx();
    let mut l = to_num::<UNITS>(d);
    cx.ln(&mut l);
    let two = int(&mut cx, 2);
    let mut l2 = two;
    cx.ln(&mut l2);
    cx.div(&mut l, &l2);
    let r = round34(l);
    if let Some(k) = to_i64(r, Rounding::HalfEven)
        && (-20_000..20_000).contains(&k)
    {
        // An exact power of two has an exact logarithm.
        let mut p = int(&mut cx, 1);
        let mut exact = context::<UNITS>(UNITS * 3, Rounding::HalfEven);
        let base = if k >= 0 {
            two
        } else {
            to_num::<UNITS>(from_f64(0.5, 34))
        };
        for _ in 0..k.unsigned_abs().min(400) {
            exact.mul(&mut p, &base);
        }
        if k.unsigned_abs() <= 400 && cmp(round34(p), d) == Some(Ordering::Equal) {
            return from_i64(k);
        }
    }
    r
}

/// `base ^ e` (`bid128_pow`): correctly rounded, shown with 34 significant digits.
pub fn pow(base: Decimal, e: Decimal) -> Decimal {
    if is_zero(e) && !is_nan(base) {
        return from_i64(1);
    }
    let r = binary(base, e, |cx, x, y| cx.pow(x, y));
    widen(r)
}

/// Pads a finite nonzero result to 34 significant digits (lowering its exponent).
fn widen(d: Decimal) -> Decimal {
    let Decimal::Finite {
        negative,
        mut coefficient,
        mut exponent,
    } = d
    else {
        return d;
    };
    if coefficient == 0 {
        return d;
    }
    while digit_count(coefficient) < PRECISION as u32 && exponent > MIN_EXP {
        coefficient *= 10;
        exponent -= 1;
    }
    Decimal::Finite {
        negative,
        coefficient,
        exponent,
    }
}

// ---------------------------------------------------------------------------------------------
// Trigonometric and hyperbolic functions (series at 50 digits, rounded to 34)
// ---------------------------------------------------------------------------------------------

/// Working precision of the series.
const WORK: usize = 50;

const PI_TEXT: &str = "3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706798214808651";

fn wcx() -> Context<Num> {
    context(WORK, Rounding::HalfEven)
}

fn num(cx: &mut Context<Num>, s: &str) -> Num {
    cx.parse(s).unwrap_or_else(|_| Num::nan())
}

fn int(cx: &mut Context<Num>, i: i32) -> Num {
    cx.from_i32(i)
}

fn pi(cx: &mut Context<Num>) -> Num {
    let mut p = num(cx, PI_TEXT);
    cx.plus(&mut p);
    p
}

fn is_small(cx: &mut Context<Num>, term: &Num, sum: &Num) -> bool {
    if term.is_zero() {
        return true;
    }
    let mut t = *term;
    cx.abs(&mut t);
    let mut s = *sum;
    cx.abs(&mut s);
    // |term| < |sum| × 10^-(WORK+2)
    let mut limit = s;
    limit.set_exponent(s.exponent() - (WORK as i32 + 2));
    matches!(cx.partial_cmp(&t, &limit), Some(Ordering::Less))
}

/// Σ (-1)^k x^(2k+1)/(2k+1)! (sin) or, with `odd` false, Σ (-1)^k x^(2k)/(2k)! (cos);
/// `alternating` false gives sinh/cosh.
fn taylor(x: &Num, odd: bool, alternating: bool) -> Num {
    let mut cx = wcx();
    let mut x2 = *x;
    cx.mul(&mut x2, x);
    let mut term = if odd { *x } else { int(&mut cx, 1) };
    let mut sum = term;
    let mut k: i32 = if odd { 1 } else { 0 };
    for _ in 0..400 {
        // term *= x² / ((k+1)(k+2))
        cx.mul(&mut term, &x2);
        let d = int(&mut cx, (k + 1) * (k + 2));
        cx.div(&mut term, &d);
        if alternating {
            cx.minus(&mut term);
        }
        k += 2;
        cx.add(&mut sum, &term);
        if is_small(&mut cx, &term, &sum) {
            break;
        }
    }
    sum
}

/// `x` reduced into [-π, π] (x mod 2π).
fn reduce(x: &Num) -> Num {
    // Enough digits to keep WORK digits after removing the multiple of 2π.
    let mut big = context(UNITS * 3, Rounding::HalfEven);
    let mut two_pi = num(&mut big, PI_TEXT);
    let two = int(&mut big, 2);
    big.mul(&mut two_pi, &two);
    let mut q = *x;
    big.div(&mut q, &two_pi);
    let mut qi = q;
    let mut round = context(UNITS * 3, Rounding::HalfEven);
    round.round(&mut qi);
    let mut r = *x;
    let mut m = qi;
    big.mul(&mut m, &two_pi);
    big.sub(&mut r, &m);
    let mut cx = wcx();
    cx.plus(&mut r);
    r
}

fn finite_or(d: Decimal, f: impl FnOnce(Num) -> Num) -> Decimal {
    match d {
        Decimal::NaN => Decimal::NaN,
        Decimal::Infinite { .. } => Decimal::NaN,
        _ => round34(f(to_num::<UNITS>(d))),
    }
}

/// `sin(d)`.
pub fn sin(d: Decimal) -> Decimal {
    finite_or(d, |x| taylor(&reduce(&x), true, true))
}

/// `cos(d)`.
pub fn cos(d: Decimal) -> Decimal {
    finite_or(d, |x| taylor(&reduce(&x), false, true))
}

/// `tan(d)`.
pub fn tan(d: Decimal) -> Decimal {
    finite_or(d, |x| {
        let r = reduce(&x);
        let mut s = taylor(&r, true, true);
        let c = taylor(&r, false, true);
        wcx().div(&mut s, &c);
        s
    })
}

/// `atan` at working precision, any finite `x`.
fn atan_num(x: &Num) -> Num {
    let mut cx = wcx();
    let one = int(&mut cx, 1);
    let mut ax = *x;
    cx.abs(&mut ax);
    let negative = x.is_negative();
    // atan(x) = π/2 - atan(1/x) for |x| > 1.
    let invert = matches!(cx.partial_cmp(&ax, &one), Some(Ordering::Greater));
    let mut y = ax;
    if invert {
        let mut inv = one;
        cx.div(&mut inv, &ax);
        y = inv;
    }
    // Halve the argument three times: atan(y) = 2 atan(y / (1 + sqrt(1 + y²))).
    for _ in 0..3 {
        let mut y2 = y;
        cx.mul(&mut y2, &y);
        cx.add(&mut y2, &one);
        cx.sqrt(&mut y2);
        cx.add(&mut y2, &one);
        cx.div(&mut y, &y2);
    }
    // Series: y - y³/3 + y⁵/5 …
    let mut y2 = y;
    cx.mul(&mut y2, &y);
    let mut power = y;
    let mut sum = y;
    let mut k = 1i32;
    for _ in 0..2000 {
        cx.mul(&mut power, &y2);
        cx.minus(&mut power);
        k += 2;
        let mut term = power;
        let d = int(&mut cx, k);
        cx.div(&mut term, &d);
        cx.add(&mut sum, &term);
        if is_small(&mut cx, &term, &sum) {
            break;
        }
    }
    let eight = int(&mut cx, 8);
    cx.mul(&mut sum, &eight);
    if invert {
        let mut half_pi = pi(&mut cx);
        let two = int(&mut cx, 2);
        cx.div(&mut half_pi, &two);
        cx.sub(&mut half_pi, &sum);
        sum = half_pi;
    }
    if negative {
        cx.minus(&mut sum);
    }
    sum
}

/// `atan(d)`.
pub fn atan(d: Decimal) -> Decimal {
    match d {
        Decimal::NaN => Decimal::NaN,
        Decimal::Infinite { negative } => {
            let mut cx = wcx();
            let mut h = pi(&mut cx);
            let two = int(&mut cx, 2);
            cx.div(&mut h, &two);
            if negative {
                cx.minus(&mut h);
            }
            round34(h)
        }
        _ => round34(atan_num(&to_num::<UNITS>(d))),
    }
}

/// `asin(d)` for |d| <= 1 (NaN outside).
pub fn asin(d: Decimal) -> Decimal {
    finite_or(d, |x| {
        let mut cx = wcx();
        let one = int(&mut cx, 1);
        let mut x2 = x;
        cx.mul(&mut x2, &x);
        let mut root = one;
        cx.sub(&mut root, &x2);
        if root.is_zero() {
            let mut h = pi(&mut cx);
            let two = int(&mut cx, 2);
            cx.div(&mut h, &two);
            if x.is_negative() {
                cx.minus(&mut h);
            }
            return h;
        }
        cx.sqrt(&mut root);
        let mut q = x;
        cx.div(&mut q, &root);
        atan_num(&q)
    })
}

/// `acos(d)` = π/2 − asin(d).
pub fn acos(d: Decimal) -> Decimal {
    finite_or(d, |x| {
        let mut cx = wcx();
        let s = to_num::<UNITS>(asin_wide(x));
        let mut h = pi(&mut cx);
        let two = int(&mut cx, 2);
        cx.div(&mut h, &two);
        cx.sub(&mut h, &s);
        h
    })
}

/// `asin` kept at working precision (as a [`Decimal`] only when it fits).
fn asin_wide(x: Num) -> Decimal {
    let mut cx = wcx();
    let one = int(&mut cx, 1);
    let mut x2 = x;
    cx.mul(&mut x2, &x);
    let mut root = one;
    cx.sub(&mut root, &x2);
    let v = if root.is_zero() {
        let mut h = pi(&mut cx);
        let two = int(&mut cx, 2);
        cx.div(&mut h, &two);
        if x.is_negative() {
            cx.minus(&mut h);
        }
        h
    } else {
        cx.sqrt(&mut root);
        let mut q = x;
        cx.div(&mut q, &root);
        atan_num(&q)
    };
    // 36 digits survive the trip through [`Decimal`] (its coefficient is a u128).
    let mut keep = context(36, Rounding::HalfEven);
    let mut v = v;
    keep.plus(&mut v);
    from_num(&v)
}

/// `atan2(y, x)`.
pub fn atan2(y: Decimal, x: Decimal) -> Decimal {
    if is_nan(y) || is_nan(x) {
        return Decimal::NaN;
    }
    let mut cx = wcx();
    let (yn, xn) = (to_num::<UNITS>(y), to_num::<UNITS>(x));
    let p = pi(&mut cx);
    let two = int(&mut cx, 2);
    let mut half = p;
    cx.div(&mut half, &two);
    let r = if xn.is_zero() {
        if yn.is_zero() {
            if x.is_negative_sign() {
                if y.is_negative_sign() {
                    neg(&mut cx, p)
                } else {
                    p
                }
            } else {
                yn
            }
        } else if yn.is_negative() {
            neg(&mut cx, half)
        } else {
            half
        }
    } else if xn.is_infinite() || yn.is_infinite() {
        return from_f64(to_f64(y).atan2(to_f64(x)), 34);
    } else {
        let mut q = yn;
        cx.div(&mut q, &xn);
        let mut a = atan_num(&q);
        if xn.is_negative() {
            if yn.is_negative() {
                cx.sub(&mut a, &p);
            } else {
                cx.add(&mut a, &p);
            }
        }
        a
    };
    round34(r)
}

fn neg(cx: &mut Context<Num>, mut n: Num) -> Num {
    cx.minus(&mut n);
    n
}

/// `e^x` at working precision.
fn exp_num(x: &Num) -> Num {
    let mut cx = wcx();
    let mut e = *x;
    cx.exp(&mut e);
    e
}

/// `sinh(d)`.
pub fn sinh(d: Decimal) -> Decimal {
    match d {
        Decimal::NaN | Decimal::Infinite { .. } => d,
        _ => {
            let x = to_num::<UNITS>(d);
            let mut cx = wcx();
            let one = int(&mut cx, 1);
            let mut ax = x;
            cx.abs(&mut ax);
            if matches!(cx.partial_cmp(&ax, &one), Some(Ordering::Less)) {
                return round34(taylor(&x, true, false));
            }
            let mut a = exp_num(&x);
            let mut b = x;
            cx.minus(&mut b);
            let b = exp_num(&b);
            cx.sub(&mut a, &b);
            let two = int(&mut cx, 2);
            cx.div(&mut a, &two);
            round34(a)
        }
    }
}

/// `cosh(d)`.
pub fn cosh(d: Decimal) -> Decimal {
    match d {
        Decimal::NaN => d,
        Decimal::Infinite { .. } => Decimal::Infinite { negative: false },
        _ => {
            let x = to_num::<UNITS>(d);
            let mut cx = wcx();
            let mut a = exp_num(&x);
            let mut b = x;
            cx.minus(&mut b);
            let b = exp_num(&b);
            cx.add(&mut a, &b);
            let two = int(&mut cx, 2);
            cx.div(&mut a, &two);
            round34(a)
        }
    }
}

/// `tanh(d)`.
pub fn tanh(d: Decimal) -> Decimal {
    match d {
        Decimal::NaN => d,
        Decimal::Infinite { negative } => from_i64(if negative { -1 } else { 1 }),
        _ => {
            let x = to_num::<UNITS>(d);
            let mut cx = wcx();
            let mut ax = x;
            cx.abs(&mut ax);
            let limit = int(&mut cx, 100);
            if matches!(cx.partial_cmp(&ax, &limit), Some(Ordering::Greater)) {
                return from_i64(if x.is_negative() { -1 } else { 1 });
            }
            let one = int(&mut cx, 1);
            if matches!(cx.partial_cmp(&ax, &one), Some(Ordering::Less)) {
                let mut s = taylor(&x, true, false);
                let c = taylor(&x, false, false);
                cx.div(&mut s, &c);
                return round34(s);
            }
            // tanh = (e^2x - 1) / (e^2x + 1)
            let two = int(&mut cx, 2);
            let mut x2 = x;
            cx.mul(&mut x2, &two);
            let e = exp_num(&x2);
            let mut num_ = e;
            cx.sub(&mut num_, &one);
            let mut den = e;
            cx.add(&mut den, &one);
            cx.div(&mut num_, &den);
            round34(num_)
        }
    }
}

fn ln_num(x: &Num) -> Num {
    let mut cx = wcx();
    let mut l = *x;
    cx.ln(&mut l);
    l
}

/// `asinh(d)` = sign × ln(|d| + sqrt(d² + 1)).
pub fn asinh(d: Decimal) -> Decimal {
    match d {
        Decimal::NaN | Decimal::Infinite { .. } => d,
        _ => {
            let x = to_num::<UNITS>(d);
            let mut cx = context(UNITS * 3, Rounding::HalfEven);
            let mut ax = x;
            cx.abs(&mut ax);
            if ax.is_zero() {
                return d;
            }
            let mut s = ax;
            cx.mul(&mut s, &ax);
            let one = int(&mut cx, 1);
            cx.add(&mut s, &one);
            cx.sqrt(&mut s);
            cx.add(&mut s, &ax);
            cx.ln(&mut s);
            if x.is_negative() {
                cx.minus(&mut s);
            }
            round34(s)
        }
    }
}

/// `acosh(d)` = ln(d + sqrt(d² − 1)) for d >= 1.
pub fn acosh(d: Decimal) -> Decimal {
    match d {
        Decimal::NaN => d,
        Decimal::Infinite { negative: false } => d,
        Decimal::Infinite { negative: true } => Decimal::NaN,
        _ => {
            let x = to_num::<UNITS>(d);
            let mut cx = context(UNITS * 3, Rounding::HalfEven);
            let mut s = x;
            cx.mul(&mut s, &x);
            let one = int(&mut cx, 1);
            cx.sub(&mut s, &one);
            cx.sqrt(&mut s);
            cx.add(&mut s, &x);
            round34(ln_num(&s))
        }
    }
}

/// `atanh(d)` = ln((1 + d) / (1 − d)) / 2 for |d| <= 1.
pub fn atanh(d: Decimal) -> Decimal {
    finite_or(d, |x| {
        let mut cx = context(UNITS * 3, Rounding::HalfEven);
        let one = int(&mut cx, 1);
        let mut a = one;
        cx.add(&mut a, &x);
        let mut b = one;
        cx.sub(&mut b, &x);
        cx.div(&mut a, &b);
        cx.ln(&mut a);
        let two = int(&mut cx, 2);
        cx.div(&mut a, &two);
        a
    })
}

/// π / 180 (`Decimal128::kPiOver180`).
pub fn pi_over_180() -> Decimal {
    let mut cx = wcx();
    let mut p = pi(&mut cx);
    let d = int(&mut cx, 180);
    cx.div(&mut p, &d);
    round34(p)
}

/// 180 / π (`Decimal128::k180OverPi`).
pub fn one_80_over_pi() -> Decimal {
    let mut cx = wcx();
    let mut n = int(&mut cx, 180);
    let p = pi(&mut cx);
    cx.div(&mut n, &p);
    round34(n)
}

trait SignBit {
    fn is_negative_sign(&self) -> bool;
}

impl SignBit for Decimal {
    fn is_negative_sign(&self) -> bool {
        match self {
            Decimal::Finite { negative, .. } | Decimal::Infinite { negative } => *negative,
            Decimal::NaN => false,
        }
    }
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
        assert_eq!(
            show(add(dec("9999999999999999999999999999999999"), dec("1"))),
            "1.000000000000000000000000000000000E+34"
        );
        assert_eq!(show(mul(dec("1E+6111"), dec("10"))), "1.0E+6112");
        assert_eq!(show(mul(dec("1E+6144"), dec("10"))), "Infinity");
        assert_eq!(show(add(dec("Infinity"), dec("-Infinity"))), "NaN");
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
        assert_eq!(show(from_f64(1e300, 15)), "1.00000000000000E+300");
        assert_eq!(
            show(from_f64(5e-324, 34)),
            "4.940656458412465441765687928682214E-324"
        );
        assert!((to_f64(dec("0.1")) - 0.1).abs() < f64::EPSILON);
        assert_eq!(to_f64(dec("-1E+400")), f64::NEG_INFINITY);
        for s in [
            "0",
            "-0",
            "1.00",
            "9999999999999999999999999999999999E+6111",
            "1E-6176",
            "-Infinity",
            "NaN",
        ] {
            assert_eq!(
                show(from_num(&to_num::<UNITS>(dec(s)))),
                show(dec(s)),
                "{s}"
            );
        }
    }

    #[test]
    fn roots_and_transcendentals() {
        assert_eq!(show(sqrt(dec("4"))), "2");
        assert_eq!(show(sqrt(dec("2.25"))), "1.5");
        assert_eq!(show(sqrt(dec("100"))), "10");
        assert_eq!(show(sqrt(dec("2"))), "1.414213562373095048801688724209698");
        assert_eq!(show(sqrt(dec("-1"))), "NaN");
        // jstests/aggregation/bugs/server18427.js
        assert_eq!(show(exp(dec("1"))), "2.718281828459045235360287471352662");
        assert_eq!(show(exp(dec("-1"))), "0.3678794411714423215955237701614609");
        assert_eq!(
            show(ln(dec("2.718281828459045235360287471352662"))),
            "0.9999999999999999999999999999999998"
        );
        // Correctly rounded; Intel's bid128_log (and so MongoDB) answers one unit lower in the
        // last place for these three (jstests/aggregation/bugs/server18427.js).
        assert_eq!(
            show(ln(dec("0.3678794411714423215955237701614609"))),
            "-0.9999999999999999999999999999999999"
        );
        assert_eq!(show(ln(dec("1"))), "0");
        assert_eq!(show(ln(dec("2.5"))), "0.9162907318741550651835272117680111");
        assert_eq!(show(ln(dec("10"))), "2.302585092994045684017991454684364");
        assert_eq!(show(log10(dec("10"))), "1");
        assert_eq!(show(log10(dec("100"))), "2");
        assert_eq!(
            show(log10(dec("2.5"))),
            "0.3979400086720376095725222105510139"
        );
        assert_eq!(
            show(log10(dec("101"))),
            "2.004321373782642574275188178222938"
        );
        assert_eq!(
            show(pow(dec("10.0"), dec("-2"))),
            "0.01000000000000000000000000000000000"
        );
        assert_eq!(
            show(pow(dec("0.5"), dec("-1"))),
            "2.000000000000000000000000000000000"
        );
        assert_eq!(
            show(pow(dec("-2"), dec("2"))),
            "4.000000000000000000000000000000000"
        );
        assert_eq!(
            show(pow(dec("10.0"), dec("2"))),
            "100.0000000000000000000000000000000"
        );
        assert_eq!(
            show(pow(dec("5"), dec("-112"))),
            "5.192296858534827628530496329220096E-79"
        );
    }

    #[test]
    fn logarithms_and_powers() {
        assert_eq!(show(log2(dec("8"))), "3");
        assert_eq!(show(log2(dec("0.25"))), "-2");
        assert_eq!(show(log2(dec("3"))), "1.584962500721156181453738943947817");
        assert_eq!(show(log2(dec("-1"))), "NaN");
        assert_eq!(show(pow(dec("7"), dec("0"))), "1");
        assert_eq!(
            show(pow(dec("2"), dec("0.5"))),
            "1.414213562373095048801688724209698"
        );
        assert_eq!(show(pow(dec("-8"), dec("0.5"))), "NaN");
        // ln(x) / ln(base), each rounded (MongoDB's `log().divide(log())`):
        // jstests/aggregation/bugs/server18427.js, base 8.
        assert_eq!(show(div(ln(dec("1")), ln(dec("8")))), "0E+33");
        assert_eq!(show(div(ln(dec("8")), ln(dec("8")))), "1");
        assert_eq!(
            show(div(ln(dec("64")), ln(dec("8")))),
            "2.000000000000000000000000000000000"
        );
        assert_eq!(
            show(div(ln(dec("10")), ln(dec("9")))),
            "1.047951637144692302148283761010701"
        );
    }

    #[test]
    fn trigonometry() {
        assert_eq!(show(sin(dec("0"))), "0");
        assert_eq!(show(sin(dec("1"))), "0.8414709848078965066525023216302990");
        assert_eq!(show(cos(dec("1"))), "0.5403023058681397174009366074429766");
        assert_eq!(show(atan(dec("1"))), "0.7853981633974483096156608458198757");
        assert_eq!(show(asin(dec("1"))), "1.570796326794896619231321691639751");
        assert_eq!(
            show(acos(dec("0.5"))),
            "1.047197551196597746154214461093168"
        );
        assert_eq!(show(sinh(dec("1"))), "1.175201193643801456882381850595601");
        assert_eq!(
            show(tanh(dec("0.5"))),
            "0.4621171572600097585023184836436725"
        );
        assert_eq!(
            show(atanh(dec("0.5"))),
            "0.5493061443340548456976226184612629"
        );
        assert_eq!(
            show(asinh(dec("1"))),
            "0.8813735870195430252326093249797923"
        );
        assert_eq!(show(acosh(dec("2"))), "1.316957896924816708625046347307968");
        assert_eq!(show(pi_over_180()), "0.01745329251994329576923690768488613");
        assert_eq!(
            show(one_80_over_pi()),
            "57.29577951308232087679815481410517"
        );
    }
}
