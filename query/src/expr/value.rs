//! Values during evaluation (MongoDB's `Value`): a BSON value borrowed from the document or
//! the expression, an owned one, or *missing* — which is distinct from null (`$ifNull`,
//! `$type` and comparisons tell them apart; missing sorts below null and equals undefined).
//!
//! Also the coercions the operators share (`coerceToBool`, `coerceToDouble`,
//! `coerceToLong`, `coerceToDecimal`, `coerceToString`, `integral`) and MongoDB's renderings
//! of numbers and dates in strings and messages.
//!
//! Invariants: nothing here panics; conversions that MongoDB rejects return its error.

use std::cmp::Ordering;

use bson::{RawBson, RawBsonRef};
use cairn_storage::compare::compare_optional;
use cairn_storage::decimal::Decimal;
pub(crate) use cairn_storage::display::{element_type_name, format_g, type_name};

use crate::error::{QueryError, Result};
use cairn_storage::decimal::{self, Rounding};

/// A value produced by an expression.
#[derive(Clone, Debug)]
pub(crate) enum Value<'a> {
    /// No value (a missing field, `$$REMOVE`).
    Missing,
    /// A value borrowed from the input document or the expression.
    Ref(RawBsonRef<'a>),
    /// A computed value.
    Owned(RawBson),
}

impl<'a> Value<'a> {
    /// The value, `None` when missing.
    pub(crate) fn get(&self) -> Option<RawBsonRef<'_>> {
        match self {
            Value::Missing => None,
            Value::Ref(r) => Some(*r),
            Value::Owned(o) => Some(o.as_raw_bson_ref()),
        }
    }

    /// Missing, null or undefined (`Value::nullish`).
    pub(crate) fn nullish(&self) -> bool {
        matches!(
            self.get(),
            None | Some(RawBsonRef::Null) | Some(RawBsonRef::Undefined)
        )
    }

    /// `Value::coerceToBool`: false for missing, null, undefined, false and numeric zeros.
    pub(crate) fn truthy(&self) -> bool {
        self.get().is_some_and(truthy)
    }

    /// `typeName(getType())`, `"missing"` for a missing value.
    pub(crate) fn type_name(&self) -> &'static str {
        self.get().map_or("missing", type_name)
    }

    /// The number held, if numeric.
    pub(crate) fn num(&self) -> Option<Num> {
        self.get().and_then(Num::of)
    }

    pub(crate) fn is_array(&self) -> bool {
        matches!(self.get(), Some(RawBsonRef::Array(_)))
    }

    /// An owned copy, `None` when missing.
    pub(crate) fn to_bson(&self) -> Option<RawBson> {
        match self {
            Value::Missing => None,
            Value::Ref(r) => Some(RawBson::from(*r)),
            Value::Owned(o) => Some(o.clone()),
        }
    }

    /// The same value with no borrow (copies borrowed values).
    pub(crate) fn into_static(self) -> Value<'static> {
        match self {
            Value::Missing => Value::Missing,
            Value::Ref(r) => Value::Owned(RawBson::from(r)),
            Value::Owned(o) => Value::Owned(o),
        }
    }

    pub(crate) fn null() -> Value<'static> {
        Value::Owned(RawBson::Null)
    }

    pub(crate) fn bool(b: bool) -> Value<'static> {
        Value::Owned(RawBson::Boolean(b))
    }

    pub(crate) fn int(i: i32) -> Value<'static> {
        Value::Owned(RawBson::Int32(i))
    }

    pub(crate) fn string(s: impl Into<String>) -> Value<'static> {
        Value::Owned(RawBson::String(s.into()))
    }
}

/// MongoDB's comparison of two values (`ValueComparator` with the simple collation).
pub(crate) fn compare(a: &Value<'_>, b: &Value<'_>) -> Ordering {
    compare_optional(a.get(), b.get())
}

/// `coerceToBool` of a present value.
pub(crate) fn truthy(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Null | RawBsonRef::Undefined => false,
        RawBsonRef::Boolean(b) => b,
        RawBsonRef::Int32(i) => i != 0,
        RawBsonRef::Int64(i) => i != 0,
        // NaN != 0, so NaN is true.
        RawBsonRef::Double(d) => d != 0.0,
        RawBsonRef::Decimal128(d) => !decimal::is_zero(Decimal::from_decimal128(d)),
        _ => true,
    }
}

/// The numeric types, narrowest first (`Value::getWidestNumeric` order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum NumKind {
    Int,
    Long,
    Double,
    Decimal,
}

/// A BSON number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Num {
    Int(i32),
    Long(i64),
    Double(f64),
    Dec(Decimal),
}

/// 2^63 as a double.
pub(crate) const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

impl Num {
    pub(crate) fn of(v: RawBsonRef<'_>) -> Option<Num> {
        Some(match v {
            RawBsonRef::Int32(i) => Num::Int(i),
            RawBsonRef::Int64(i) => Num::Long(i),
            RawBsonRef::Double(d) => Num::Double(d),
            RawBsonRef::Decimal128(d) => Num::Dec(Decimal::from_decimal128(d)),
            _ => return None,
        })
    }

    pub(crate) fn kind(self) -> NumKind {
        match self {
            Num::Int(_) => NumKind::Int,
            Num::Long(_) => NumKind::Long,
            Num::Double(_) => NumKind::Double,
            Num::Dec(_) => NumKind::Decimal,
        }
    }

    /// `coerceToDouble`.
    pub(crate) fn to_f64(self) -> f64 {
        match self {
            Num::Int(i) => f64::from(i),
            Num::Long(i) => i as f64,
            Num::Double(d) => d,
            Num::Dec(d) => decimal::to_f64(d),
        }
    }

    /// `coerceToDecimal` (doubles keep 15 significant digits).
    pub(crate) fn to_dec(self) -> Decimal {
        match self {
            Num::Int(i) => decimal::from_i64(i64::from(i)),
            Num::Long(i) => decimal::from_i64(i),
            Num::Double(d) => decimal::from_f64(d, 15),
            Num::Dec(d) => d,
        }
    }

    /// `coerceToLong`: doubles truncate, decimals round half to even; out of range is 31109.
    pub(crate) fn to_long(self) -> Result<i64> {
        match self {
            Num::Int(i) => Ok(i64::from(i)),
            Num::Long(i) => Ok(i),
            Num::Double(d) => {
                if d.is_nan() || !(-TWO_POW_63..TWO_POW_63).contains(&d) {
                    Err(QueryError::Location(
                        31109,
                        format!("Can't coerce out of range value {} to long", format_g(d)),
                    ))
                } else {
                    Ok(d as i64)
                }
            }
            Num::Dec(d) => decimal::to_i64(d, Rounding::HalfEven).ok_or_else(|| {
                QueryError::Location(
                    31109,
                    format!(
                        "Can't coerce out of range value {} to long",
                        decimal::to_string(d)
                    ),
                )
            }),
        }
    }

    /// `coerceToInt`: out of range is 31108.
    pub(crate) fn to_int(self) -> Result<i32> {
        let err = |s: String| {
            QueryError::Location(31108, format!("Can't coerce out of range value {s} to int"))
        };
        match self {
            Num::Int(i) => Ok(i),
            // C++ `static_cast<int>` of a long keeps the low 32 bits.
            Num::Long(i) => Ok(i as i32),
            Num::Double(d) => {
                if d.is_nan() || !(-2_147_483_649.0..2_147_483_648.0).contains(&d) {
                    Err(err(format_g(d)))
                } else {
                    Ok(d as i32)
                }
            }
            Num::Dec(d) => decimal::to_i64(d, Rounding::HalfEven)
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(|| err(decimal::to_string(d))),
        }
    }

    /// `Value::integral()`: the value is an integer representable as an `i32`.
    pub(crate) fn integral32(self) -> bool {
        self.exact_i32().is_some()
    }

    /// The value as an `i32` when it is exactly one.
    pub(crate) fn exact_i32(self) -> Option<i32> {
        match self {
            Num::Int(i) => Some(i),
            Num::Long(i) => i32::try_from(i).ok(),
            Num::Double(d) => {
                if d.fract() == 0.0 && (-2_147_483_648.0..=2_147_483_647.0).contains(&d) {
                    Some(d as i32)
                } else {
                    None
                }
            }
            Num::Dec(d) => decimal::exact_i32(d),
        }
    }

    /// `Value::integral64Bit()`: the value as an `i64` when it is exactly one.
    pub(crate) fn exact_i64(self) -> Option<i64> {
        match self {
            Num::Int(i) => Some(i64::from(i)),
            Num::Long(i) => Some(i),
            Num::Double(d) => {
                if d.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&d) {
                    Some(d as i64)
                } else {
                    None
                }
            }
            Num::Dec(d) => {
                let i = decimal::to_i64(d, Rounding::TowardZero)?;
                (decimal::cmp(decimal::from_i64(i), d) == Some(Ordering::Equal)).then_some(i)
            }
        }
    }

    pub(crate) fn into_value(self) -> Value<'static> {
        Value::Owned(match self {
            Num::Int(i) => RawBson::Int32(i),
            Num::Long(i) => RawBson::Int64(i),
            Num::Double(d) => RawBson::Double(d),
            Num::Dec(d) => RawBson::Decimal128(decimal::encode(d)),
        })
    }

    /// The number as `coerceToString` / `str::stream` prints it.
    pub(crate) fn to_display(self) -> String {
        match self {
            Num::Int(i) => i.to_string(),
            Num::Long(i) => i.to_string(),
            Num::Double(d) => format_g(d),
            Num::Dec(d) => decimal::to_string(d),
        }
    }
}

/// `Value::createIntOrLong`.
pub(crate) fn int_or_long(v: i64) -> Num {
    match i32::try_from(v) {
        Ok(i) => Num::Int(i),
        Err(_) => Num::Long(v),
    }
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A date as `%Y-%m-%dT%H:%M:%S.%LZ` in UTC; MongoDB formats years 0–9999 only (18537).
pub(crate) fn format_date(millis: i64) -> Result<String> {
    let days = millis.div_euclid(86_400_000);
    let ms = millis.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return Err(QueryError::Location(
            18537,
            "Could not convert date to string: date component was outside the supported range \
             of 0-9999: "
                .to_string()
                + &y.to_string(),
        ));
    }
    let (h, rest) = (ms / 3_600_000, ms % 3_600_000);
    let (min, rest) = (rest / 60_000, rest % 60_000);
    let (s, l) = (rest / 1000, rest % 1000);
    Ok(format!(
        "{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{l:03}Z"
    ))
}

/// `Value::coerceToString` (`$concat` does not use it; `$toLower`, `$toUpper`,
/// `$substrCP`, `$strcasecmp` do): null and missing become `""`.
pub(crate) fn coerce_to_string(v: &Value<'_>) -> Result<String> {
    let Some(r) = v.get() else {
        return Ok(String::new());
    };
    Ok(match r {
        RawBsonRef::Double(_)
        | RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Decimal128(_) => Num::of(r).map(Num::to_display).unwrap_or_default(),
        RawBsonRef::String(s) | RawBsonRef::Symbol(s) | RawBsonRef::JavaScriptCode(s) => {
            s.to_string()
        }
        RawBsonRef::Timestamp(ts) => {
            let full = format_date(i64::from(ts.time) * 1000)?;
            format!("{}:{}", full.get(..19).unwrap_or(&full), ts.increment)
        }
        RawBsonRef::DateTime(d) => format_date(d.timestamp_millis()).map_err(|e| {
            QueryError::Location(
                18537,
                format!("failed while coercing date to string :: caused by :: {e}"),
            )
        })?,
        RawBsonRef::Null | RawBsonRef::Undefined => String::new(),
        other => {
            return Err(QueryError::Location(
                16007,
                format!(
                    "can't convert from BSON type {} to String",
                    type_name(other)
                ),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_format() {
        assert_eq!(format_g(42.0), "42");
        assert_eq!(format_g(2.5), "2.5");
        assert_eq!(format_g(1.0 / 3.0), "0.333333");
        assert_eq!(format_g(123456789.0), "1.23457e+08");
        assert_eq!(format_g(0.00001), "1e-05");
    }

    #[test]
    fn dates() {
        assert_eq!(format_date(0).unwrap(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_date(1_623_751_201_123).unwrap(),
            "2021-06-15T10:00:01.123Z"
        );
        assert_eq!(format_date(-1).unwrap(), "1969-12-31T23:59:59.999Z");
        assert!(format_date(i64::MAX).is_err());
    }
}
