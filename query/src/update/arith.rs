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
//! Invariants: nothing here panics; the decimal arithmetic itself is the expression
//! evaluator's ([`cairn_storage::decimal`], on libdecnumber).

use bson::{RawBson, RawBsonRef};
use cairn_storage::decimal::Decimal;

use cairn_storage::decimal;

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
            Num::Dec(d) => RawBson::Decimal128(decimal::encode(d)),
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
            Num::I32(i) => decimal::from_i64(i64::from(i)),
            Num::I64(i) => decimal::from_i64(i),
            Num::F64(d) => decimal::from_f64(d, 15),
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
            Num::Dec(d) => format!("(NumberDecimal){}", decimal::encode(d)),
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
        (Num::Dec(_), _) | (_, Num::Dec(_)) => {
            Some(Num::Dec(decimal::add(lhs.as_dec(), rhs.as_dec())))
        }
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
        (Num::Dec(_), _) | (_, Num::Dec(_)) => {
            Some(Num::Dec(decimal::mul(lhs.as_dec(), rhs.as_dec())))
        }
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
