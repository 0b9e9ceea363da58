//! `$convert` and its shortcuts (`$toString`, `$toInt`, `$toLong`, `$toDouble`,
//! `$toDecimal`, `$toBool`): expression.cpp's `ConversionTable`.
//!
//! Conversion failures are ConversionFailure (241), which `onError` catches; a nullish input
//! gives `onNull` (or null); a nullish `to` gives null. Conversions missing from MongoDB's
//! table (`int` → `date`, `object` → `object` …) are 241 "Unsupported conversion from X to Y
//! in $convert with no onError value".
//!
//! String → date reads the string as `$dateFromString` without `format` does (UTC).
//!
//! Invariants: nothing here panics.

use bson::oid::ObjectId;
use bson::{DateTime, RawBson, RawBsonRef};
use cairn_storage::decimal::Decimal;

use super::value::{Num, TWO_POW_63, Value, element_type_name, format_date, format_g, truthy};
use crate::error::{QueryError, Result};
use cairn_storage::decimal::{self, Rounding};

/// ConversionFailure.
pub(crate) const CONVERSION_FAILURE: i32 = 241;

fn failure(msg: impl Into<String>) -> QueryError {
    QueryError::Location(CONVERSION_FAILURE, msg.into())
}

/// A target type: a BSON type code (`0` is "missing").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Target(i32);

const DOUBLE: i32 = 1;
const STRING: i32 = 2;
const OBJECT_ID: i32 = 7;
const BOOL: i32 = 8;
const DATE: i32 = 9;
const INT: i32 = 16;
const LONG: i32 = 18;
const DECIMAL: i32 = 19;

fn code_name(code: i32) -> &'static str {
    match code {
        0 => "missing",
        1 => "double",
        2 => "string",
        3 => "object",
        4 => "array",
        5 => "binData",
        6 => "undefined",
        7 => "objectId",
        8 => "bool",
        9 => "date",
        10 => "null",
        11 => "regex",
        12 => "dbPointer",
        13 => "javascript",
        14 => "symbol",
        15 => "javascriptWithScope",
        16 => "int",
        17 => "timestamp",
        18 => "long",
        19 => "decimal",
        -1 => "minKey",
        127 => "maxKey",
        _ => "unknown",
    }
}

fn code_of_name(name: &str) -> Option<i32> {
    (-1..=127)
        .filter(|c| *c != 0)
        .find(|&c| code_name(c) == name && code_name(c) != "unknown")
}

/// `ExpressionConvert::computeTargetType`.
pub(crate) fn target_type(to: &Value<'_>) -> Result<Target> {
    match to.get() {
        Some(RawBsonRef::String(s)) => {
            if s == "missing" {
                return Ok(Target(0));
            }
            code_of_name(s)
                .map(Target)
                .ok_or_else(|| QueryError::BadValue(format!("Unknown type name: {s}")))
        }
        Some(v) if Num::of(v).is_some() => {
            let Some(code) = Num::of(v).and_then(Num::exact_i32) else {
                return Err(QueryError::FailedToParse(
                    "In $convert, numeric 'to' argument is not an integer".into(),
                ));
            };
            if matches!(code, -1..=19 | 127) {
                Ok(Target(code))
            } else {
                Err(QueryError::FailedToParse(format!(
                    "In $convert, numeric value for 'to' does not correspond to a BSON type: \
                     {code}"
                )))
            }
        }
        _ => Err(QueryError::FailedToParse(format!(
            "$convert's 'to' argument must be a string or number, but is {}",
            to.type_name()
        ))),
    }
}

fn unsupported(from: RawBsonRef<'_>, to: Target) -> QueryError {
    failure(format!(
        "Unsupported conversion from {} to {} in $convert with no onError value",
        element_type_name(from.element_type()),
        code_name(to.0)
    ))
}

fn overflow(what: &str) -> QueryError {
    failure(format!(
        "Conversion would overflow target type in $convert with no onError value: {what}"
    ))
}

fn check_finite(d: f64) -> Result<()> {
    if d.is_nan() {
        return Err(failure(
            "Attempt to convert NaN value to integer type in $convert with no onError value",
        ));
    }
    if d.is_infinite() {
        return Err(failure(
            "Attempt to convert infinity value to integer type in $convert with no onError value",
        ));
    }
    Ok(())
}

fn double_to_int(d: f64) -> Result<i32> {
    check_finite(d)?;
    if !(-2_147_483_648.0..=2_147_483_647.0).contains(&d) {
        return Err(overflow(&format_g(d)));
    }
    Ok(d as i32)
}

fn double_to_long(d: f64) -> Result<i64> {
    check_finite(d)?;
    if !(-TWO_POW_63..TWO_POW_63).contains(&d) {
        return Err(overflow(&format_g(d)));
    }
    Ok(d as i64)
}

fn decimal_to_long(d: Decimal) -> Result<i64> {
    match d {
        Decimal::NaN => check_finite(f64::NAN).map(|_| 0),
        Decimal::Infinite { .. } => check_finite(f64::INFINITY).map(|_| 0),
        finite => decimal::to_i64(finite, Rounding::TowardZero)
            .ok_or_else(|| overflow(&decimal::to_string(finite))),
    }
}

fn decimal_to_int(d: Decimal) -> Result<i32> {
    let l = decimal_to_long(d)?;
    i32::try_from(l).map_err(|_| overflow(&decimal::to_string(d)))
}

fn decimal_to_double(d: Decimal) -> Result<f64> {
    let x = decimal::to_f64(d);
    if let Decimal::Finite { coefficient, .. } = d
        && coefficient != 0
        && (x == 0.0 || x.is_infinite())
    {
        return Err(overflow(&decimal::to_string(d)));
    }
    Ok(x)
}

/// `parseStringToNumber`'s failure.
fn parse_failure(s: &str, reason: &str) -> QueryError {
    failure(format!(
        "Failed to parse number '{s}' in $convert with no onError value: {reason}"
    ))
}

fn parse_integer(s: &str) -> Result<i64> {
    if s.is_empty() {
        return Err(parse_failure(s, "No digits"));
    }
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
        return Err(parse_failure(s, "Did not consume whole string."));
    }
    s.parse::<i64>()
        .map_err(|_| parse_failure(s, "Out of range"))
}

fn parse_double(s: &str) -> Result<f64> {
    if s.is_empty() {
        return Err(parse_failure(s, "No digits"));
    }
    if s.starts_with(char::is_whitespace) {
        return Err(parse_failure(s, "Did not consume whole string."));
    }
    let v: f64 = s
        .parse()
        .map_err(|_| parse_failure(s, "Did not consume whole string."))?;
    if v.is_infinite() && !s.to_ascii_lowercase().contains("inf") {
        return Err(parse_failure(s, "Out of range"));
    }
    Ok(v)
}

/// `performConversion` of a non-nullish input.
pub(crate) fn convert(input: RawBsonRef<'_>, to: Target) -> Result<Value<'static>> {
    use RawBsonRef as R;
    let t = to.0;
    let owned = |b: RawBson| Ok(Value::Owned(b));
    if t == BOOL {
        return match input {
            R::Double(_) | R::Int32(_) | R::Int64(_) | R::Decimal128(_) | R::DateTime(_) => {
                owned(RawBson::Boolean(truthy(input)))
            }
            R::Boolean(b) => owned(RawBson::Boolean(b)),
            R::String(_)
            | R::ObjectId(_)
            | R::Document(_)
            | R::Array(_)
            | R::Binary(_)
            | R::RegularExpression(_)
            | R::DbPointer(_)
            | R::JavaScriptCode(_)
            | R::Symbol(_)
            | R::JavaScriptCodeWithScope(_)
            | R::Timestamp(_)
            | R::MinKey
            | R::MaxKey => owned(RawBson::Boolean(true)),
            _ => Err(unsupported(input, to)),
        };
    }
    match (input, t) {
        (R::Double(d), DOUBLE) => owned(RawBson::Double(d)),
        (R::Double(d), STRING) => owned(RawBson::String(if d.is_infinite() {
            if d < 0.0 { "-Infinity" } else { "Infinity" }.to_string()
        } else if d.is_nan() {
            "NaN".to_string()
        } else {
            format_g(d)
        })),
        (R::Double(d), DATE) => owned(RawBson::DateTime(DateTime::from_millis(double_to_long(d)?))),
        (R::Double(d), INT) => owned(RawBson::Int32(double_to_int(d)?)),
        (R::Double(d), LONG) => owned(RawBson::Int64(double_to_long(d)?)),
        (R::Double(d), DECIMAL) => owned(RawBson::Decimal128(decimal::encode(decimal::from_f64(
            d, 15,
        )))),

        (R::String(s), DOUBLE) => {
            if s.starts_with("0x") {
                return Err(failure(format!(
                    "Illegal hexadecimal input in $convert with no onError value: {s}"
                )));
            }
            owned(RawBson::Double(parse_double(s)?))
        }
        (R::String(s), STRING) => owned(RawBson::String(s.to_string())),
        (R::String(s), OBJECT_ID) => match ObjectId::parse_str(s) {
            Ok(oid) => owned(RawBson::ObjectId(oid)),
            Err(_) => Err(failure(format!(
                "Failed to parse objectId '{s}' in $convert with no onError value: {}",
                if s.len() != 24 {
                    format!(
                        "Invalid string length for parsing to OID, expected 24 but found {}",
                        s.len()
                    )
                } else {
                    "Invalid character found in hex string".to_string()
                }
            ))),
        },
        (R::String(s), DATE) => owned(RawBson::DateTime(DateTime::from_millis(
            super::datetime::parse_free(s, &super::datetime::Tz::Utc)?,
        ))),
        (R::String(s), INT) => {
            if s.starts_with("0x") {
                return Err(failure(format!(
                    "Illegal hexadecimal input in $convert with no onError value: {s}"
                )));
            }
            let i = parse_integer(s)?;
            let i = i32::try_from(i).map_err(|_| parse_failure(s, "Out of range"))?;
            owned(RawBson::Int32(i))
        }
        (R::String(s), LONG) => {
            if s.starts_with("0x") {
                return Err(failure(format!(
                    "Illegal hexadecimal input in $convert with no onError value: {s}"
                )));
            }
            owned(RawBson::Int64(parse_integer(s)?))
        }
        (R::String(s), DECIMAL) => {
            if s.starts_with("0x") {
                return Err(failure(format!(
                    "Illegal hexadecimal input in $convert with no onError value: {s}"
                )));
            }
            match s.parse::<bson::Decimal128>() {
                Ok(d) => owned(RawBson::Decimal128(d)),
                Err(_) => Err(parse_failure(s, "Failed to parse string to decimal")),
            }
        }

        (R::ObjectId(o), STRING) => owned(RawBson::String(o.to_hex())),
        (R::ObjectId(o), OBJECT_ID) => owned(RawBson::ObjectId(o)),
        (R::ObjectId(o), DATE) => owned(RawBson::DateTime(DateTime::from_millis(
            o.timestamp().timestamp_millis() / 1000 * 1000,
        ))),

        (R::Boolean(b), DOUBLE) => owned(RawBson::Double(if b { 1.0 } else { 0.0 })),
        (R::Boolean(b), STRING) => owned(RawBson::String(b.to_string())),
        (R::Boolean(b), INT) => owned(RawBson::Int32(i32::from(b))),
        (R::Boolean(b), LONG) => owned(RawBson::Int64(i64::from(b))),
        (R::Boolean(b), DECIMAL) => owned(RawBson::Decimal128(decimal::encode(decimal::from_i64(
            i64::from(b),
        )))),

        (R::DateTime(d), DOUBLE) => owned(RawBson::Double(d.timestamp_millis() as f64)),
        (R::DateTime(d), STRING) => owned(RawBson::String(format_date(d.timestamp_millis())?)),
        (R::DateTime(d), DATE) => owned(RawBson::DateTime(d)),
        (R::DateTime(d), LONG) => owned(RawBson::Int64(d.timestamp_millis())),
        (R::DateTime(d), DECIMAL) => owned(RawBson::Decimal128(decimal::encode(
            decimal::from_i64(d.timestamp_millis()),
        ))),

        (R::Timestamp(ts), DATE) => owned(RawBson::DateTime(DateTime::from_millis(
            i64::from(ts.time) * 1000,
        ))),

        (R::Int32(i), DOUBLE) => owned(RawBson::Double(f64::from(i))),
        (R::Int32(i), STRING) => owned(RawBson::String(i.to_string())),
        (R::Int32(i), INT) => owned(RawBson::Int32(i)),
        (R::Int32(i), LONG) => owned(RawBson::Int64(i64::from(i))),
        (R::Int32(i), DECIMAL) => owned(RawBson::Decimal128(decimal::encode(decimal::from_i64(
            i64::from(i),
        )))),

        (R::Int64(i), DOUBLE) => owned(RawBson::Double(i as f64)),
        (R::Int64(i), STRING) => owned(RawBson::String(i.to_string())),
        (R::Int64(i), DATE) => owned(RawBson::DateTime(DateTime::from_millis(i))),
        (R::Int64(i), INT) => match i32::try_from(i) {
            Ok(v) => owned(RawBson::Int32(v)),
            Err(_) => Err(overflow("")),
        },
        (R::Int64(i), LONG) => owned(RawBson::Int64(i)),
        (R::Int64(i), DECIMAL) => owned(RawBson::Decimal128(decimal::encode(decimal::from_i64(i)))),

        (R::Decimal128(d), DOUBLE) => owned(RawBson::Double(decimal_to_double(
            Decimal::from_decimal128(d),
        )?)),
        (R::Decimal128(d), STRING) => owned(RawBson::String(d.to_string())),
        (R::Decimal128(d), DATE) => owned(RawBson::DateTime(DateTime::from_millis(
            decimal_to_long(Decimal::from_decimal128(d))?,
        ))),
        (R::Decimal128(d), INT) => {
            owned(RawBson::Int32(decimal_to_int(Decimal::from_decimal128(d))?))
        }
        (R::Decimal128(d), LONG) => owned(RawBson::Int64(decimal_to_long(
            Decimal::from_decimal128(d),
        )?)),
        (R::Decimal128(d), DECIMAL) => owned(RawBson::Decimal128(d)),

        _ => Err(unsupported(input, to)),
    }
}
