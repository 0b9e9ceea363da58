//! The project's one Decimal128 implementation: decoding ([`Decimal`]), normalisation of every
//! numeric type to one decimal form and exact cross-type magnitude comparison (used by the key
//! encoding and [`crate::compare`]), and IEEE 754-2008 decimal128 arithmetic on libdecnumber
//! (the `arith` submodule, re-exported here: `add`, `div`, `quantize`, `exp`, `ln`, `pow`, the
//! trigonometric functions … used by the query layer's expressions and update operators).
//!
//! Invariants:
//! - [`Decimal::from_bid`] decodes any 16 bytes (IEEE 754-2008 decimal128, binary integer
//!   decimal encoding) without panicking. Non-canonical coefficients (above 10^34 − 1, which
//!   includes every value in the "large coefficient" combination form) decode as zero, as
//!   IEEE 754 and MongoDB's Intel library treat them. Signalling and quiet NaNs, with either
//!   sign, are all just [`Decimal::NaN`].
//! - [`Normalized`] is canonical: two numbers (int32, int64, double, Decimal128 in any mix)
//!   that are numerically equal normalise to equal [`Normalized`] values, and numerically
//!   different ones to different values. Exact values keep every significant digit
//!   (at most 34 for Decimal128, 19 for int64). A double whose exact decimal expansion has more
//!   than 34 significant digits keeps its first 34 digits (truncated toward zero) plus a
//!   `sticky` flag meaning "strictly more than these digits"; no value with at most 34
//!   significant digits lies strictly between a double and its truncation, and two distinct
//!   doubles always differ within their first 18 digits, so the flag keeps the order exact.
//! - All comparisons here are exact (no rounding through `f64`), matching MongoDB's
//!   `compare_numbers.h`, whose mixed comparisons are all exact (see `compare.rs`).
//! - Nothing here panics on any input; big-number work is bounded by the finite exponent
//!   ranges of the types (at most a few thousand bits).

use std::cmp::Ordering;

mod arith;

pub use arith::*;

/// Maximum number of significant decimal digits kept by [`Significand`] (Decimal128's precision).
pub const MAX_DIGITS: usize = 34;

/// Largest canonical Decimal128 coefficient, 10^34 − 1.
const MAX_COEFFICIENT: u128 = 9_999_999_999_999_999_999_999_999_999_999_999;

/// Decimal128 exponent bias: stored exponent − 6176 = q in `coefficient × 10^q`.
const EXPONENT_BIAS: i32 = 6176;

/// A decoded IEEE 754-2008 decimal128 value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decimal {
    /// Any NaN (quiet or signalling, either sign).
    NaN,
    /// ±Infinity.
    Infinite {
        /// Sign bit.
        negative: bool,
    },
    /// `(-1)^negative × coefficient × 10^exponent`; `coefficient` is at most 10^34 − 1 and is
    /// zero for every zero (including non-canonical encodings).
    Finite {
        /// Sign bit (a zero may be negative; it still equals zero).
        negative: bool,
        /// Coefficient, `0 ..= 10^34 − 1`.
        coefficient: u128,
        /// Exponent q, `-6176 ..= 6111`.
        exponent: i32,
    },
}

impl Decimal {
    /// Decodes the 16 little-endian BSON bytes of a Decimal128 (BID encoding).
    pub fn from_bid(bytes: [u8; 16]) -> Decimal {
        let bits = u128::from_le_bytes(bytes);
        let negative = bits >> 127 == 1;
        let combination5 = (bits >> 122) & 0x1F;
        if combination5 == 0x1F {
            return Decimal::NaN;
        }
        if combination5 == 0x1E {
            return Decimal::Infinite { negative };
        }
        let (biased, coefficient) = if (bits >> 125) & 0b11 == 0b11 {
            // "Large coefficient" form: implicit 0b100 prefix on a 111-bit field, so the
            // coefficient is at least 2^113 > 10^34 − 1: always non-canonical, i.e. zero.
            (((bits >> 111) & 0x3FFF) as i32, 0u128)
        } else {
            let c = bits & ((1u128 << 113) - 1);
            (
                ((bits >> 113) & 0x3FFF) as i32,
                if c > MAX_COEFFICIENT { 0 } else { c },
            )
        };
        Decimal::Finite {
            negative,
            coefficient,
            exponent: biased - EXPONENT_BIAS,
        }
    }

    /// Decodes a [`bson::Decimal128`].
    pub fn from_decimal128(d: bson::Decimal128) -> Decimal {
        Decimal::from_bid(d.bytes())
    }
}

/// Significant digits of a finite nonzero magnitude: value = 0.d1 d2 … dn × 10^exponent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Significand {
    exponent: i32,
    digits: [u8; MAX_DIGITS],
    len: u8,
    sticky: bool,
}

impl Significand {
    /// The exponent E in `0.d1…dn × 10^E`.
    pub fn exponent(&self) -> i32 {
        self.exponent
    }

    /// The digits d1…dn, each 0..=9, with d1 != 0 and dn != 0 (no trailing zeros unless
    /// [`Self::is_exact`] is false, in which case exactly 34 digits are kept).
    pub fn digits(&self) -> &[u8] {
        &self.digits[..usize::from(self.len)]
    }

    /// False when the true value is strictly greater than `0.d1…d34 × 10^E` (a double with more
    /// than 34 significant digits, truncated).
    pub fn is_exact(&self) -> bool {
        !self.sticky
    }

    /// Builds from a most-significant-first digit slice `ds` (ds\[0\] != 0) scaled by 10^q:
    /// value = ds × 10^q.
    fn from_digit_slice(ds: &[u8], q: i32) -> Significand {
        let n = ds.len();
        let exponent = q.saturating_add(i32::try_from(n).unwrap_or(i32::MAX));
        let mut end = n;
        while end > 0 && ds[end - 1] == 0 {
            end -= 1;
        }
        let sticky = end > MAX_DIGITS;
        let keep = end.min(MAX_DIGITS);
        let mut digits = [0u8; MAX_DIGITS];
        digits[..keep].copy_from_slice(&ds[..keep]);
        Significand {
            exponent,
            digits,
            len: keep as u8,
            sticky,
        }
    }

    /// [`Significand::from_digit_slice`] of `ds` followed by more digits, `lower_nonzero`
    /// saying whether any of those is nonzero: `q` scales `ds` as if it were the whole
    /// (value = (ds + a fraction below its last digit) × 10^q). When the lower digits are
    /// nonzero, `ds` must hold at least [`MAX_DIGITS`] digits: the value is then `ds`'s first
    /// 34 digits and sticky, as [`Significand::from_digit_slice`] of all the digits gives.
    fn below_digits(ds: &[u8], q: i32, lower_nonzero: bool) -> Significand {
        if !lower_nonzero || ds.len() < MAX_DIGITS {
            return Significand::from_digit_slice(ds, q);
        }
        let mut digits = [0u8; MAX_DIGITS];
        digits.copy_from_slice(&ds[..MAX_DIGITS]);
        Significand {
            exponent: q.saturating_add(i32::try_from(ds.len()).unwrap_or(i32::MAX)),
            digits,
            len: MAX_DIGITS as u8,
            sticky: true,
        }
    }

    /// Builds from `c × 10^q`, `c > 0`.
    fn from_u128(c: u128, q: i32) -> Significand {
        match u64::try_from(c) {
            Ok(small) => Significand::from_u64(small, q),
            Err(_) => Significand::from_u128_digits(c, q),
        }
    }

    /// [`Significand::from_u128`] by 128-bit division (the definition).
    fn from_u128_digits(c: u128, q: i32) -> Significand {
        let mut buf = [0u8; 40];
        let i = write_digits(c, &mut buf);
        Significand::from_digit_slice(&buf[i..], q)
    }

    /// [`Significand::from_u128`] of a coefficient that fits a u64 (native division instead
    /// of the 128-bit one).
    fn from_u64(c: u64, q: i32) -> Significand {
        let mut buf = [0u8; 20];
        let i = write_digits(c, &mut buf);
        Significand::from_digit_slice(&buf[i..], q)
    }
}

/// Writes the decimal digits of `v` (one per byte, most significant first) at the end of
/// `buf`; returns where they start. Generic so that a u64 divides natively.
fn write_digits<T>(mut v: T, buf: &mut [u8]) -> usize
where
    T: Copy + PartialOrd + From<u8> + std::ops::Rem<Output = T> + std::ops::DivAssign,
    T: TryInto<u8>,
{
    let (zero, ten) = (T::from(0), T::from(10));
    let mut i = buf.len();
    while v > zero && i > 0 {
        i -= 1;
        buf[i] = (v % ten).try_into().unwrap_or(0);
        v /= ten;
    }
    i
}

/// A number in canonical form; see the module invariants. The variant order is the numeric
/// order (NaN lowest), and within `Negative`/`Positive` the significands order by magnitude.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Normalized {
    /// Any NaN (double or decimal).
    NaN,
    /// −Infinity.
    NegInfinity,
    /// A finite negative value (its magnitude).
    Negative(Significand),
    /// ±0 of any type.
    Zero,
    /// A finite positive value.
    Positive(Significand),
    /// +Infinity.
    PosInfinity,
}

impl Normalized {
    /// Normalises an int32/int64.
    pub fn from_i64(v: i64) -> Normalized {
        match v.cmp(&0) {
            Ordering::Equal => Normalized::Zero,
            Ordering::Greater => {
                Normalized::Positive(Significand::from_u128(u128::from(v.unsigned_abs()), 0))
            }
            Ordering::Less => {
                Normalized::Negative(Significand::from_u128(u128::from(v.unsigned_abs()), 0))
            }
        }
    }

    /// Normalises a double exactly (see the module invariants for > 34 digits).
    pub fn from_f64(x: f64) -> Normalized {
        if x.is_nan() {
            return Normalized::NaN;
        }
        if x.is_infinite() {
            return if x > 0.0 {
                Normalized::PosInfinity
            } else {
                Normalized::NegInfinity
            };
        }
        let Some((negative, m, e)) = decompose_f64(x) else {
            return Normalized::Zero;
        };
        let sig = f64_significand(m, e);
        if negative {
            Normalized::Negative(sig)
        } else {
            Normalized::Positive(sig)
        }
    }

    /// Normalises a decoded Decimal128.
    pub fn from_decimal(d: Decimal) -> Normalized {
        match d {
            Decimal::NaN => Normalized::NaN,
            Decimal::Infinite { negative: true } => Normalized::NegInfinity,
            Decimal::Infinite { negative: false } => Normalized::PosInfinity,
            Decimal::Finite { coefficient: 0, .. } => Normalized::Zero,
            Decimal::Finite {
                negative,
                coefficient,
                exponent,
            } => {
                let sig = Significand::from_u128(coefficient, exponent);
                if negative {
                    Normalized::Negative(sig)
                } else {
                    Normalized::Positive(sig)
                }
            }
        }
    }
}

/// Splits a finite nonzero double into `(negative, m, e)` with |x| = m × 2^e and m odd.
/// Returns `None` for ±0 (and for non-finite input, which callers handle first).
pub fn decompose_f64(x: f64) -> Option<(bool, u64, i32)> {
    if !x.is_finite() || x == 0.0 {
        return None;
    }
    let bits = x.to_bits();
    let negative = bits >> 63 == 1;
    let biased = ((bits >> 52) & 0x7FF) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (m, e) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u64 << 52), biased - 1075)
    };
    if m == 0 {
        return None;
    }
    let tz = m.trailing_zeros();
    Some((negative, m >> tz, e + tz as i32))
}

/// Exact significand of m × 2^e (m > 0).
fn f64_significand(m: u64, e: i32) -> Significand {
    let bitlen = 64 - m.leading_zeros() as i32;
    if e >= 0 {
        if bitlen + e <= 127 {
            return Significand::from_u128(u128::from(m) << e, 0);
        }
        let mut n = BigUint::from_u128(u128::from(m));
        n.shl(e.unsigned_abs());
        return Significand::from_digit_slice(&n.to_decimal(), 0);
    }
    // m × 2^e = m × 5^k × 10^-k with k = -e.
    let k = e.unsigned_abs();
    if k <= 27 {
        // m < 2^53 and 5^27 < 2^63, so the product fits in u128.
        let p = u128::from(m) * 5u128.pow(k);
        return Significand::from_u128(p, e);
    }
    if let Some(sig) = pow5_significand_fixed(m, k) {
        return sig;
    }
    pow5_significand_big(m, k)
}

/// The exact significand of `m × 5^k × 10^-k` through [`BigUint`] (the definition).
fn pow5_significand_big(m: u64, k: u32) -> Significand {
    let mut n = BigUint::from_u128(u128::from(m));
    n.mul_pow5(k);
    Significand::from_digit_slice(&n.to_decimal(), -(k as i32))
}

/// Limbs (base 2^32) of the fixed-width product in [`pow5_significand_fixed`]: 256 bits.
const FIXED_LIMBS: usize = 8;

/// [`pow5_significand_big`] without allocating, when `m × 5^k` fits 256 bits (every `k` up
/// to 87 for a double's 53-bit `m`: ordinary doubles with a fraction); `None` otherwise. The
/// same arithmetic on a fixed array: multiply by powers of 5 in base 2^32, then peel base-10^9
/// chunks off by short division.
fn pow5_significand_fixed(m: u64, k: u32) -> Option<Significand> {
    const FIVE_13: u64 = 1_220_703_125; // 5^13
    let mut limbs = [0u32; FIXED_LIMBS];
    limbs[0] = m as u32;
    limbs[1] = (m >> 32) as u32;
    let mut used = if limbs[1] != 0 { 2 } else { 1 };
    let mut rest = k;
    while rest > 0 {
        let step = rest.min(13);
        let factor = if step == 13 { FIVE_13 } else { 5u64.pow(step) };
        rest -= step;
        let mut carry = 0u64;
        for limb in limbs.iter_mut().take(used) {
            let p = u64::from(*limb) * factor + carry;
            *limb = p as u32;
            carry = p >> 32;
        }
        if carry > 0 {
            *limbs.get_mut(used)? = carry as u32;
            used += 1;
        }
    }
    // Base-10^9 chunks, least significant first; 256 bits have at most 78 digits.
    let mut chunks = [0u32; 9];
    let mut n_chunks = 0;
    while used > 0 {
        let mut rem = 0u64;
        for limb in limbs.iter_mut().take(used).rev() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / 1_000_000_000) as u32;
            rem = cur % 1_000_000_000;
        }
        while used > 0 && limbs[used - 1] == 0 {
            used -= 1;
        }
        *chunks.get_mut(n_chunks)? = rem as u32;
        n_chunks += 1;
    }
    // Digits, most significant first: whole chunks from the top until at least MAX_DIGITS
    // are out; the chunks below those only count as zero or not (digits past the first
    // MAX_DIGITS are never kept, see `Significand::below_digits`).
    let chunks = chunks.get(..n_chunks)?;
    let (&top, mut lower) = chunks.split_last()?;
    if top == 0 {
        return None;
    }
    let first = 9 - top_digits(top);
    let mut digits = [0u8; 9 + MAX_DIGITS + 9];
    put_nine_digits(top, digits.get_mut(..9)?);
    let mut len = 9;
    while len - first < MAX_DIGITS
        && let Some((&c, rest)) = lower.split_last()
    {
        put_nine_digits(c, digits.get_mut(len..len + 9)?);
        len += 9;
        lower = rest;
    }
    let q = (9 * lower.len() as i32).checked_sub(k as i32)?;
    Some(Significand::below_digits(
        digits.get(first..len)?,
        q,
        lower.iter().any(|&c| c != 0),
    ))
}

/// The two decimal digits of each number below 100.
const DIGIT_PAIRS: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [(i / 10) as u8, (i % 10) as u8];
        i += 1;
    }
    t
};

/// The nine decimal digits of `c < 10^9` (leading zeros included) into `out` (9 bytes), two
/// at a time.
fn put_nine_digits(mut c: u32, out: &mut [u8]) {
    let mut i = out.len();
    while i >= 2 {
        if let (Some(pair), Some(digits)) =
            (out.get_mut(i - 2..i), DIGIT_PAIRS.get((c % 100) as usize))
        {
            pair.copy_from_slice(digits);
        }
        c /= 100;
        i -= 2;
    }
    if let Some(d) = out.get_mut(..i).and_then(|s| s.first_mut()) {
        *d = (c % 10) as u8;
    }
}

/// Number of decimal digits of a nonzero `c < 10^9`.
fn top_digits(c: u32) -> usize {
    c.checked_ilog10().map_or(0, |l| l as usize + 1)
}

/// Number of decimal digits of `c` (0 for 0).
pub fn decimal_digits(mut c: u128) -> i32 {
    let mut n = 0;
    while c > 0 {
        c /= 10;
        n += 1;
    }
    n
}

/// Compares the magnitudes `c1 × 10^q1` and `c2 × 10^q2` (coefficients at most 10^34 − 1).
pub fn cmp_decimal_magnitudes(c1: u128, q1: i32, c2: u128, q2: i32) -> Ordering {
    match (c1 == 0, c2 == 0) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        (false, false) => {}
    }
    let (d1, d2) = (decimal_digits(c1), decimal_digits(c2));
    // Adjusted exponents: value lies in [10^(a-1), 10^a).
    let (a1, a2) = (q1 + d1, q2 + d2);
    if a1 != a2 {
        return a1.cmp(&a2);
    }
    // Same decade: scale both coefficients to 34 digits (fits: 10^34 < 2^113).
    let s1 = c1 * 10u128.pow((MAX_DIGITS as i32 - d1).max(0) as u32);
    let s2 = c2 * 10u128.pow((MAX_DIGITS as i32 - d2).max(0) as u32);
    s1.cmp(&s2)
}

/// Compares the magnitudes `c × 10^q` (c at most 10^34 − 1) and `m × 2^e` (a finite double's
/// magnitude), exactly.
pub fn cmp_decimal_double_magnitudes(c: u128, q: i32, m: u64, e: i32) -> Ordering {
    match (c == 0, m == 0) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        (false, false) => {}
    }
    let adjusted = q + decimal_digits(c);
    // Any finite double is < 1.8e308 < 10^309; the decimal is >= 10^(adjusted-1).
    if adjusted > 309 {
        return Ordering::Greater;
    }
    // Any nonzero double is >= 4.9e-324 > 10^-324; the decimal is < 10^adjusted.
    if adjusted <= -324 {
        return Ordering::Less;
    }
    // Cross-multiply into integers: c × 10^q  vs  m × 2^e.
    let mut lhs = BigUint::from_u128(c);
    let mut rhs = BigUint::from_u128(u128::from(m));
    if q >= 0 {
        lhs.mul_pow10(q.unsigned_abs());
    } else {
        rhs.mul_pow10(q.unsigned_abs());
    }
    if e >= 0 {
        rhs.shl(e.unsigned_abs());
    } else {
        lhs.shl(e.unsigned_abs());
    }
    lhs.cmp(&rhs)
}

/// A minimal unsigned big integer (little-endian base-2^32 limbs, no high zero limbs).
#[derive(Clone, Debug, PartialEq, Eq)]
struct BigUint {
    limbs: Vec<u32>,
}

impl BigUint {
    fn from_u128(mut v: u128) -> BigUint {
        let mut limbs = Vec::with_capacity(4);
        while v > 0 {
            limbs.push(v as u32);
            v >>= 32;
        }
        BigUint { limbs }
    }

    fn is_zero(&self) -> bool {
        self.limbs.is_empty()
    }

    fn mul_small(&mut self, factor: u32) {
        let mut carry = 0u64;
        for limb in &mut self.limbs {
            let p = u64::from(*limb) * u64::from(factor) + carry;
            *limb = p as u32;
            carry = p >> 32;
        }
        if carry > 0 {
            self.limbs.push(carry as u32);
        }
        if factor == 0 {
            self.limbs.clear();
        }
    }

    fn mul_pow5(&mut self, mut k: u32) {
        const FIVE_13: u32 = 1_220_703_125; // 5^13, the largest power of 5 in a u32
        while k >= 13 {
            self.mul_small(FIVE_13);
            k -= 13;
        }
        if k > 0 {
            self.mul_small(5u32.pow(k));
        }
    }

    fn mul_pow10(&mut self, k: u32) {
        self.mul_pow5(k);
        self.shl(k);
    }

    fn shl(&mut self, bits: u32) {
        if self.is_zero() {
            return;
        }
        let words = (bits / 32) as usize;
        let rem = bits % 32;
        if rem > 0 {
            let mut carry = 0u32;
            for limb in &mut self.limbs {
                let next = *limb >> (32 - rem);
                *limb = (*limb << rem) | carry;
                carry = next;
            }
            if carry > 0 {
                self.limbs.push(carry);
            }
        }
        if words > 0 {
            self.limbs.splice(0..0, std::iter::repeat_n(0u32, words));
        }
    }

    /// Divides in place by `d` (> 0) and returns the remainder.
    fn div_rem_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for limb in self.limbs.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / u64::from(d)) as u32;
            rem = cur % u64::from(d);
        }
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
        rem as u32
    }

    /// Decimal digits, most significant first, without leading zeros (empty for zero).
    fn to_decimal(&self) -> Vec<u8> {
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.div_rem_small(1_000_000_000));
        }
        let mut out = Vec::with_capacity(chunks.len() * 9);
        for chunk in chunks.iter().rev() {
            let mut c = *chunk;
            let mut buf = [0u8; 9];
            for slot in buf.iter_mut().rev() {
                *slot = (c % 10) as u8;
                c /= 10;
            }
            out.extend_from_slice(&buf);
        }
        let first = out.iter().position(|&d| d != 0).unwrap_or(out.len());
        out.drain(..first);
        out
    }
}

impl PartialOrd for BigUint {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for BigUint {
    fn cmp(&self, other: &Self) -> Ordering {
        self.limbs
            .len()
            .cmp(&other.limbs.len())
            .then_with(|| self.limbs.iter().rev().cmp(other.limbs.iter().rev()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn dec(s: &str) -> Decimal {
        Decimal::from_decimal128(bson::Decimal128::from_str(s).unwrap())
    }

    fn digits_str(n: Normalized) -> String {
        match n {
            Normalized::Positive(s) | Normalized::Negative(s) => format!(
                "{}0.{}e{}{}",
                if matches!(n, Normalized::Negative(_)) {
                    "-"
                } else {
                    ""
                },
                s.digits()
                    .iter()
                    .map(|d| char::from(b'0' + d))
                    .collect::<String>(),
                s.exponent(),
                if s.is_exact() { "" } else { "+" }
            ),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn bid_decoding() {
        assert_eq!(
            dec("1.00"),
            Decimal::Finite {
                negative: false,
                coefficient: 100,
                exponent: -2
            }
        );
        assert_eq!(dec("NaN"), Decimal::NaN);
        assert_eq!(dec("-Infinity"), Decimal::Infinite { negative: true });
        assert_eq!(
            dec("-0"),
            Decimal::Finite {
                negative: true,
                coefficient: 0,
                exponent: 0
            }
        );
        // sNaN and negative NaN bit patterns.
        assert_eq!(
            Decimal::from_bid((0x7E00u128 << 112).to_le_bytes()),
            Decimal::NaN
        );
        assert_eq!(
            Decimal::from_bid((0xFC00u128 << 112).to_le_bytes()),
            Decimal::NaN
        );
        // Non-canonical: coefficient 10^34 is treated as zero.
        let bits = (6176u128 << 113) | (MAX_COEFFICIENT + 1);
        assert_eq!(
            Decimal::from_bid(bits.to_le_bytes()),
            Decimal::Finite {
                negative: false,
                coefficient: 0,
                exponent: 0
            }
        );
        // Large-coefficient form (bits 126..125 == 11) is always non-canonical.
        let bits = (0b11u128 << 125) | (6176u128 << 111) | 5;
        assert_eq!(
            Decimal::from_bid(bits.to_le_bytes()),
            Decimal::Finite {
                negative: false,
                coefficient: 0,
                exponent: 0
            }
        );
    }

    #[test]
    fn normalisation() {
        let one = Normalized::from_i64(1);
        assert_eq!(one, Normalized::from_f64(1.0));
        assert_eq!(one, Normalized::from_decimal(dec("1.00")));
        assert_eq!(one, Normalized::from_decimal(dec("1E0")));
        assert_eq!(one, Normalized::from_decimal(dec("0.001E3")));
        assert_eq!(digits_str(one), "0.1e1");
        assert_eq!(digits_str(Normalized::from_i64(-120)), "-0.12e3");
        assert_eq!(
            digits_str(Normalized::from_i64(i64::MIN)),
            "-0.9223372036854775808e19"
        );
        assert_eq!(digits_str(Normalized::from_f64(0.5)), "0.5e0");
        assert_eq!(
            digits_str(Normalized::from_f64(0.1)),
            "0.1000000000000000055511151231257827e0+"
        );
        assert_eq!(
            digits_str(Normalized::from_f64(5e-324)),
            "0.4940656458412465441765687928682213e-323+"
        );
        assert_eq!(
            digits_str(Normalized::from_f64(f64::MAX)),
            "0.1797693134862315708145274237317043e309+"
        );
        assert_eq!(
            digits_str(Normalized::from_f64(2f64.powi(100))),
            "0.1267650600228229401496703205376e31"
        );
        assert_eq!(Normalized::from_f64(-0.0), Normalized::Zero);
        assert_eq!(Normalized::from_decimal(dec("-0E-20")), Normalized::Zero);
        assert_eq!(
            Normalized::from_decimal(dec("9007199254740993")),
            Normalized::from_i64(9_007_199_254_740_993)
        );
    }

    #[test]
    fn bigint_digits() {
        let mut n = BigUint::from_u128(1);
        n.mul_pow10(40);
        let d = n.to_decimal();
        assert_eq!(d.len(), 41);
        assert_eq!(d[0], 1);
        assert!(d[1..].iter().all(|&x| x == 0));
        let mut m = BigUint::from_u128(3);
        m.shl(100);
        assert_eq!(
            m.to_decimal()
                .iter()
                .map(|d| char::from(b'0' + d))
                .collect::<String>(),
            "3802951800684688204490109616128"
        );
    }

    #[test]
    fn decimal_double_magnitudes() {
        let (_, m, e) = decompose_f64(0.1).unwrap();
        assert_eq!(cmp_decimal_double_magnitudes(1, -1, m, e), Ordering::Less);
        assert_eq!(
            cmp_decimal_double_magnitudes(1_000_000_000_000_000_055_511_151_231_257_827, -34, m, e),
            Ordering::Less
        );
        assert_eq!(
            cmp_decimal_double_magnitudes(1_000_000_000_000_000_055_511_151_231_257_828, -34, m, e),
            Ordering::Greater
        );
        let (_, m, e) = decompose_f64(1.0).unwrap();
        assert_eq!(
            cmp_decimal_double_magnitudes(100, -2, m, e),
            Ordering::Equal
        );
        assert_eq!(
            cmp_decimal_double_magnitudes(1, 6111, m, e),
            Ordering::Greater
        );
        assert_eq!(
            cmp_decimal_double_magnitudes(1, -6176, m, e),
            Ordering::Less
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// The fixed-width product gives the big-integer path's significand wherever it
        /// answers, and answers for every double-sized `m` up to `k = 87`.
        #[test]
        fn fixed_pow5_matches_bigint(m in 1u64..(1u64 << 53), k in 1u32..=1074) {
            let m = m | 1;
            let fixed = pow5_significand_fixed(m, k);
            if k <= 87 {
                proptest::prop_assert!(fixed.is_some());
            }
            if let Some(sig) = fixed {
                proptest::prop_assert_eq!(sig, pow5_significand_big(m, k));
            }
        }

        /// The same for any `m` (even ones give products ending in zeros, whole zero
        /// chunks below the kept digits included), with `k` where the fixed width answers.
        #[test]
        fn fixed_pow5_matches_bigint_any_m(m in 1u64..(1u64 << 53), shift in 0u32..53, k in 1u32..=87) {
            let m = (m << shift) & ((1u64 << 53) - 1);
            if m != 0 {
                proptest::prop_assert_eq!(pow5_significand_fixed(m, k), Some(pow5_significand_big(m, k)));
            }
        }

        /// Every double's significand through the fast paths equals the big-integer one.
        #[test]
        fn f64_significand_matches_bigint(bits in proptest::prelude::any::<u64>()) {
            let x = f64::from_bits(bits);
            if let Some((_, m, e)) = decompose_f64(x) && e < 0 {
                proptest::prop_assert_eq!(f64_significand(m, e), pow5_significand_big(m, e.unsigned_abs()));
            }
        }

        /// u64 coefficients give the 128-bit division's digits.
        #[test]
        fn u64_digits_match_u128(c in 1u64.., q in -400i32..400) {
            proptest::prop_assert_eq!(
                Significand::from_u64(c, q),
                Significand::from_u128_digits(u128::from(c), q)
            );
        }
    }

    #[test]
    fn fixed_pow5_edges() {
        // The largest double-sized m at the bound, and the smallest subnormal's k.
        let m = (1u64 << 53) - 1;
        for k in [1, 13, 26, 27, 28, 86, 87] {
            assert_eq!(
                pow5_significand_fixed(m, k),
                Some(pow5_significand_big(m, k))
            );
        }
        assert_eq!(pow5_significand_fixed(1, 1074), None);
        // 10^52: one digit, then only zero chunks; 2^52 + 1 times 5^52: 34 digits and more
        // below, a zero run inside the kept digits; and the bench's kind of score.
        for (m, k) in [
            (1u64 << 52, 52),
            ((1u64 << 52) + 1, 52),
            (1 << 40, 87),
            (3, 87),
        ] {
            assert_eq!(
                pow5_significand_fixed(m, k),
                Some(pow5_significand_big(m, k)),
                "{m} {k}"
            );
        }
        for x in [0.1, 0.5, 123.456, 999.999_999_999_999_9, 1e-10, 1.0 / 3.0] {
            let (_, m, e) = decompose_f64(x).unwrap();
            assert_eq!(
                f64_significand(m, e),
                pow5_significand_big(m, e.unsigned_abs()),
                "{x}"
            );
        }
        assert_eq!(
            Significand::from_u64(u64::MAX, 0),
            Significand::from_u128_digits(u128::from(u64::MAX), 0)
        );
    }
}
