//! The arithmetic operators with MongoDB 7.0's type rules (expression.cpp `AddState`,
//! `MultiplyState`, `ExpressionSubtract::apply`, `ExpressionDivide::apply`,
//! `ExpressionMod::apply`, the single-numeric-argument operators, `$pow`, `$log`, and
//! `evaluateRoundOrTrunc`).
//!
//! Type rules in short: int op int gives int, widened to long when the result does not fit
//! an int; a long overflow turns the result into a double; any double (and no decimal) gives
//! a double; any decimal gives a decimal; null or missing operands give null (checked before
//! the type of later operands, left to right); one date may be added to numbers.
//!
//! Invariants: nothing here panics (all integer arithmetic is checked); errors carry
//! MongoDB's codes and messages.

use bson::{DateTime, RawBson, RawBsonRef};
use cairn_storage::decimal::Decimal;

use super::value::{Num, NumKind, TWO_POW_63, Value, format_g, int_or_long};
use crate::error::{QueryError, Result};
use cairn_storage::decimal::{self, Rounding};

fn loc(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::Location(code, msg.into())
}

/// `Value::getWidestNumeric`.
fn widest(a: NumKind, b: NumKind) -> NumKind {
    a.max(b)
}

/// The running state of `$add` (`AddState`).
pub(crate) struct AddState {
    long_total: i64,
    double_total: f64,
    dec_total: Decimal,
    widest: NumKind,
    is_date: bool,
}

impl AddState {
    pub(crate) fn new() -> AddState {
        AddState {
            long_total: 0,
            double_total: 0.0,
            dec_total: decimal::ZERO,
            widest: NumKind::Int,
            is_date: false,
        }
    }

    /// Adds a non-nullish operand; TypeMismatch for anything but numbers and one date.
    pub(crate) fn push(&mut self, v: RawBsonRef<'_>) -> Result<()> {
        let old = self.widest;
        let val = match v {
            RawBsonRef::DateTime(d) => {
                if self.is_date {
                    return Err(loc(16612, "only one date allowed in an $add expression"));
                }
                self.is_date = true;
                Num::Long(d.timestamp_millis())
            }
            other => {
                let Some(n) = Num::of(other) else {
                    return Err(QueryError::TypeMismatch(format!(
                        "$add only supports numeric or date types, not {}",
                        super::value::type_name(other)
                    )));
                };
                self.widest = widest(self.widest, n.kind());
                n
            }
        };
        if old != self.widest {
            match self.widest {
                NumKind::Int | NumKind::Long => {}
                NumKind::Double => self.double_total = self.long_total as f64,
                NumKind::Decimal => {
                    self.dec_total = match old {
                        NumKind::Double => decimal::from_f64(self.double_total, 34),
                        _ => decimal::from_i64(self.long_total),
                    };
                }
            }
        }
        match self.widest {
            NumKind::Int | NumKind::Long => {
                let add = val.to_long()?;
                match self.long_total.checked_add(add) {
                    Some(s) => self.long_total = s,
                    None => {
                        self.widest = NumKind::Double;
                        self.double_total = self.long_total as f64 + val.to_f64();
                    }
                }
            }
            NumKind::Double => self.double_total += val.to_f64(),
            NumKind::Decimal => self.dec_total = decimal::add(self.dec_total, val.to_dec()),
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<Value<'static>> {
        if self.is_date {
            let millis = match self.widest {
                NumKind::Int | NumKind::Long => self.long_total,
                NumKind::Double => {
                    let d = self.double_total;
                    if !(-TWO_POW_63..TWO_POW_63).contains(&d) {
                        return Err(loc(15, "date overflow in $add"));
                    }
                    d.round() as i64
                }
                // Decimal dates are not checked for overflow (Intel's invalid result).
                NumKind::Decimal => {
                    decimal::to_i64(self.dec_total, Rounding::HalfEven).unwrap_or(i64::MIN)
                }
            };
            return Ok(Value::Owned(RawBson::DateTime(DateTime::from_millis(
                millis,
            ))));
        }
        Ok(match self.widest {
            NumKind::Int => int_or_long(self.long_total),
            NumKind::Long => Num::Long(self.long_total),
            NumKind::Double => Num::Double(self.double_total),
            NumKind::Decimal => Num::Dec(self.dec_total),
        }
        .into_value())
    }
}

/// The running state of `$multiply` (`MultiplyState`).
pub(crate) struct MultiplyState {
    double_product: f64,
    long_product: i64,
    dec_product: Decimal,
    kind: NumKind,
}

impl MultiplyState {
    pub(crate) fn new() -> MultiplyState {
        MultiplyState {
            double_product: 1.0,
            long_product: 1,
            dec_product: decimal::from_i64(1),
            kind: NumKind::Int,
        }
    }

    /// Multiplies by a non-nullish operand; TypeMismatch for non-numbers.
    pub(crate) fn push(&mut self, v: RawBsonRef<'_>) -> Result<()> {
        let Some(n) = Num::of(v) else {
            return Err(QueryError::TypeMismatch(format!(
                "$multiply only supports numeric types, not {}",
                super::value::type_name(v)
            )));
        };
        let old = self.kind;
        self.kind = widest(self.kind, n.kind());
        if self.kind == NumKind::Decimal {
            if old != NumKind::Decimal {
                self.dec_product = if old == NumKind::Double {
                    decimal::from_f64(self.double_product, 15)
                } else {
                    decimal::from_i64(self.long_product)
                };
            }
            self.dec_product = decimal::mul(self.dec_product, n.to_dec());
        } else {
            self.double_product *= n.to_f64();
            if self.kind != NumKind::Double {
                match self.long_product.checked_mul(n.to_long()?) {
                    Some(p) => self.long_product = p,
                    None => self.kind = NumKind::Double,
                }
            }
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Value<'static> {
        match self.kind {
            NumKind::Double => Num::Double(self.double_product),
            NumKind::Long => Num::Long(self.long_product),
            NumKind::Int => int_or_long(self.long_product),
            NumKind::Decimal => Num::Dec(self.dec_product),
        }
        .into_value()
    }
}

/// `ExpressionSubtract::apply`.
pub(crate) fn subtract(l: &Value<'_>, r: &Value<'_>) -> Result<Value<'static>> {
    if let (Some(a), Some(b)) = (l.num(), r.num()) {
        return Ok(match widest(a.kind(), b.kind()) {
            NumKind::Decimal => Num::Dec(decimal::sub(a.to_dec(), b.to_dec())),
            NumKind::Double => Num::Double(a.to_f64() - b.to_f64()),
            NumKind::Long => match a.to_long()?.checked_sub(b.to_long()?) {
                Some(d) => Num::Long(d),
                None => Num::Double(a.to_f64() - b.to_f64()),
            },
            NumKind::Int => int_or_long(a.to_long()? - b.to_long()?),
        }
        .into_value());
    }
    if l.nullish() || r.nullish() {
        return Ok(Value::null());
    }
    if let Some(RawBsonRef::DateTime(ld)) = l.get() {
        return match (r.get(), r.num()) {
            (Some(RawBsonRef::DateTime(rd)), _) => Ok(Value::Owned(RawBson::Int64(
                ld.timestamp_millis().wrapping_sub(rd.timestamp_millis()),
            ))),
            (_, Some(n)) => Ok(Value::Owned(RawBson::DateTime(DateTime::from_millis(
                ld.timestamp_millis().wrapping_sub(n.to_long()?),
            )))),
            _ => Err(QueryError::TypeMismatch(format!(
                "can't $subtract {} from Date",
                r.type_name()
            ))),
        };
    }
    Err(QueryError::TypeMismatch(format!(
        "can't $subtract {} from {}",
        r.type_name(),
        l.type_name()
    )))
}

/// `ExpressionDivide::apply`.
pub(crate) fn divide(l: &Value<'_>, r: &Value<'_>) -> Result<Value<'static>> {
    if let (Some(a), Some(b)) = (l.num(), r.num()) {
        if a.kind() == NumKind::Decimal || b.kind() == NumKind::Decimal {
            let denom = b.to_dec();
            if decimal::is_zero(denom) {
                return Err(QueryError::BadValue("can't $divide by zero".into()));
            }
            return Ok(Num::Dec(decimal::div(a.to_dec(), denom)).into_value());
        }
        let denom = b.to_f64();
        if denom == 0.0 {
            return Err(QueryError::BadValue("can't $divide by zero".into()));
        }
        return Ok(Num::Double(a.to_f64() / denom).into_value());
    }
    if l.nullish() || r.nullish() {
        return Ok(Value::null());
    }
    Err(QueryError::TypeMismatch(format!(
        "$divide only supports numeric types, not {} and {}",
        l.type_name(),
        r.type_name()
    )))
}

/// `ExpressionMod::apply`.
pub(crate) fn modulo(l: &Value<'_>, r: &Value<'_>) -> Result<Value<'static>> {
    if let (Some(a), Some(b)) = (l.num(), r.num()) {
        if a.kind() == NumKind::Decimal || b.kind() == NumKind::Decimal {
            let right = b.to_dec();
            if decimal::is_zero(right) {
                return Err(loc(5733415, "can't $mod by zero"));
            }
            return Ok(Num::Dec(decimal::fmod(a.to_dec(), right)).into_value());
        }
        let right = b.to_f64();
        if right == 0.0 {
            return Err(loc(16610, "can't $mod by zero"));
        }
        if a.kind() == NumKind::Double || (b.kind() == NumKind::Double && b.exact_i32().is_none()) {
            return Ok(Num::Double(a.to_f64() % right).into_value());
        }
        if a.kind() == NumKind::Long || b.kind() == NumKind::Long {
            let (x, y) = (a.to_long()?, b.to_long()?);
            // `overflow::safeMod`: LLONG_MIN % -1 is 0.
            return Ok(Num::Long(x.checked_rem(y).unwrap_or(0)).into_value());
        }
        let (x, y) = (a.to_int()?, b.to_int()?);
        return Ok(Num::Int(x.checked_rem(y).unwrap_or(0)).into_value());
    }
    if l.nullish() || r.nullish() {
        return Ok(Value::null());
    }
    Err(loc(
        16611,
        format!(
            "$mod only supports numeric types, not {} and {}",
            l.type_name(),
            r.type_name()
        ),
    ))
}

/// The single-numeric-argument operators (`ExpressionSingleNumericArg::evaluate`): null
/// for nullish input, 28765 for non-numbers, then the operator.
pub(crate) fn single_numeric(
    name: &str,
    v: &Value<'_>,
    f: impl FnOnce(Num) -> Result<Num>,
) -> Result<Value<'static>> {
    if v.nullish() {
        return Ok(Value::null());
    }
    let Some(n) = v.num() else {
        return Err(loc(
            28765,
            format!("{name} only supports numeric types, not {}", v.type_name()),
        ));
    };
    Ok(f(n)?.into_value())
}

pub(crate) fn abs(n: Num) -> Result<Num> {
    Ok(match n {
        Num::Double(d) => Num::Double(d.abs()),
        Num::Dec(d) => Num::Dec(decimal::abs(d)),
        Num::Int(i) => int_or_long(i64::from(i).abs()),
        Num::Long(i) => {
            if i == i64::MIN {
                return Err(loc(28680, "can't take $abs of long long min"));
            }
            Num::Long(i.abs())
        }
    })
}

pub(crate) fn ceil(n: Num) -> Result<Num> {
    Ok(match n {
        Num::Double(d) => Num::Double(d.ceil()),
        Num::Dec(d) => Num::Dec(decimal::quantize(d, 0, Rounding::Up)),
        other => other,
    })
}

pub(crate) fn floor(n: Num) -> Result<Num> {
    Ok(match n {
        Num::Double(d) => Num::Double(d.floor()),
        Num::Dec(d) => Num::Dec(decimal::quantize(d, 0, Rounding::Down)),
        other => other,
    })
}

pub(crate) fn sqrt(n: Num) -> Result<Num> {
    let err = || loc(28714, "$sqrt's argument must be greater than or equal to 0");
    if let Num::Dec(d) = n {
        if decimal::is_negative(d) {
            return Err(err());
        }
        return Ok(Num::Dec(decimal::sqrt(d)));
    }
    let x = n.to_f64();
    if x < 0.0 {
        return Err(err());
    }
    Ok(Num::Double(x.sqrt()))
}

pub(crate) fn exp(n: Num) -> Result<Num> {
    Ok(match n {
        Num::Dec(d) => Num::Dec(decimal::exp(d)),
        other => Num::Double(other.to_f64().exp()),
    })
}

/// Whether a decimal is > 0.
fn dec_positive(d: Decimal) -> bool {
    decimal::cmp(d, decimal::ZERO) == Some(std::cmp::Ordering::Greater)
}

pub(crate) fn ln(n: Num) -> Result<Num> {
    if let Num::Dec(d) = n
        && dec_positive(d)
    {
        return Ok(Num::Dec(decimal::ln(d)));
    }
    let x = n.to_f64();
    if !(x > 0.0 || x.is_nan()) {
        return Err(loc(
            28766,
            format!(
                "$ln's argument must be a positive number, but is {}",
                format_g(x)
            ),
        ));
    }
    Ok(Num::Double(x.ln()))
}

pub(crate) fn log10(n: Num) -> Result<Num> {
    if let Num::Dec(d) = n
        && dec_positive(d)
    {
        return Ok(Num::Dec(decimal::log10(d)));
    }
    let x = n.to_f64();
    if !(x > 0.0 || x.is_nan()) {
        return Err(loc(
            28761,
            format!(
                "$log10's argument must be a positive number, but is {}",
                format_g(x)
            ),
        ));
    }
    Ok(Num::Double(x.log10()))
}

/// `log_base(d)` for positive decimals: base 10 and base 2 use the dedicated logarithms
/// (`Decimal128::logarithm(other)` special-cases them); other bases divide natural
/// logarithms, each rounded to 34 digits (`log(x).divide(log(base))`).
fn dec_log(d: Decimal, base: Decimal) -> Decimal {
    let eq = |k: i64| decimal::cmp(base, decimal::from_i64(k)) == Some(std::cmp::Ordering::Equal);
    if eq(10) {
        return decimal::log10(d);
    }
    if eq(2) {
        return decimal::log2(d);
    }
    decimal::div(decimal::ln(d), decimal::ln(base))
}

/// `$log`.
pub(crate) fn log(arg: &Value<'_>, base: &Value<'_>) -> Result<Value<'static>> {
    if arg.nullish() || base.nullish() {
        return Ok(Value::null());
    }
    let Some(a) = arg.num() else {
        return Err(loc(
            28756,
            format!("$log's argument must be numeric, not {}", arg.type_name()),
        ));
    };
    let Some(b) = base.num() else {
        return Err(loc(
            28757,
            format!("$log's base must be numeric, not {}", base.type_name()),
        ));
    };
    if a.kind() == NumKind::Decimal || b.kind() == NumKind::Decimal {
        let (ad, bd) = (a.to_dec(), b.to_dec());
        if dec_positive(ad)
            && dec_positive(bd)
            && decimal::cmp(bd, decimal::from_i64(1)) != Some(std::cmp::Ordering::Equal)
        {
            return Ok(Num::Dec(dec_log(ad, bd)).into_value());
        }
    }
    let (x, y) = (a.to_f64(), b.to_f64());
    if !(x > 0.0 || x.is_nan()) {
        return Err(loc(
            28758,
            format!(
                "$log's argument must be a positive number, but is {}",
                format_g(x)
            ),
        ));
    }
    if !((y > 0.0 && y != 1.0) || y.is_nan()) {
        return Err(loc(
            28759,
            format!(
                "$log's base must be a positive number not equal to 1, but is {}",
                format_g(y)
            ),
        ));
    }
    Ok(Num::Double(x.ln() / y.ln()).into_value())
}

/// The largest |base| whose power `exp` (0–63) fits a long (`representableAsLong`).
const BASE_LIMITS: [(i64, i64); 64] = [
    (i64::MIN, i64::MAX),
    (i64::MIN, i64::MAX),
    (-3037000499, 3037000499),
    (-2097152, 2097151),
    (-55108, 55108),
    (-6208, 6208),
    (-1448, 1448),
    (-512, 511),
    (-234, 234),
    (-128, 127),
    (-78, 78),
    (-52, 52),
    (-38, 38),
    (-28, 28),
    (-22, 22),
    (-18, 18),
    (-15, 15),
    (-13, 13),
    (-11, 11),
    (-9, 9),
    (-8, 8),
    (-8, 7),
    (-7, 7),
    (-6, 6),
    (-6, 6),
    (-5, 5),
    (-5, 5),
    (-5, 5),
    (-4, 4),
    (-4, 4),
    (-4, 4),
    (-4, 4),
    (-3, 3),
    (-3, 3),
    (-3, 3),
    (-3, 3),
    (-3, 3),
    (-3, 3),
    (-3, 3),
    (-3, 3),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 2),
    (-2, 1),
];

/// `$pow`.
pub(crate) fn pow(base: &Value<'_>, exponent: &Value<'_>) -> Result<Value<'static>> {
    if base.nullish() || exponent.nullish() {
        return Ok(Value::null());
    }
    let Some(b) = base.num() else {
        return Err(loc(
            28762,
            format!("$pow's base must be numeric, not {}", base.type_name()),
        ));
    };
    let Some(e) = exponent.num() else {
        return Err(loc(
            28763,
            format!(
                "$pow's exponent must be numeric, not {}",
                exponent.type_name()
            ),
        ));
    };
    let zero_neg = || {
        loc(
            28764,
            "$pow cannot take a base of 0 and a negative exponent",
        )
    };
    if b.kind() == NumKind::Decimal || e.kind() == NumKind::Decimal {
        let (bd, ed) = (b.to_dec(), e.to_dec());
        if decimal::is_zero(bd) && decimal::is_negative(ed) {
            return Err(zero_neg());
        }
        return Ok(Num::Dec(decimal::pow(bd, ed)).into_value());
    }
    let (bf, ef) = (b.to_f64(), e.to_f64());
    if bf == 0.0 && ef < 0.0 {
        return Err(zero_neg());
    }
    if b.kind() == NumKind::Double || e.kind() == NumKind::Double {
        return Ok(Num::Double(bf.powf(ef)).into_value());
    }
    let long_result = b.kind() == NumKind::Long || e.kind() == NumKind::Long;
    let format = |r: i64| {
        if long_result {
            Num::Long(r)
        } else {
            int_or_long(r)
        }
        .into_value()
    };
    let (bl, el) = (b.to_long()?, e.to_long()?);
    let as_double = || Num::Double((bl as f64).powf(el as f64)).into_value();
    match bl {
        0 => return Ok(format(if el == 0 { 1 } else { 0 })),
        1 => return Ok(format(1)),
        -1 => return Ok(format(if el % 2 == 0 { 1 } else { -1 })),
        _ => {}
    }
    let Some(&(lo, hi)) = usize::try_from(el).ok().and_then(|i| BASE_LIMITS.get(i)) else {
        return Ok(as_double());
    };
    if bl < lo || bl > hi {
        return Ok(as_double());
    }
    let mut result: i64 = 1;
    let mut b = bl;
    let mut k = el;
    while k > 1 {
        if k % 2 == 1 {
            result = result.wrapping_mul(b);
            k -= 1;
        }
        b = b.wrapping_mul(b);
        k /= 2;
    }
    if k == 1 {
        result = result.wrapping_mul(b);
    }
    Ok(format(result))
}

/// `evaluateRoundOrTrunc` after the nullish checks: `precision` in [-20, 100].
pub(crate) fn round_or_trunc(
    name: &str,
    v: &Value<'_>,
    precision: Option<&Value<'_>>,
    mode: Rounding,
) -> Result<Value<'static>> {
    if v.nullish() {
        return Ok(Value::null());
    }
    let Some(n) = v.num() else {
        return Err(loc(
            51081,
            format!("{name} only supports numeric types, not {}", v.type_name()),
        ));
    };
    let mut p: i64 = 0;
    if let Some(pv) = precision {
        if pv.nullish() {
            return Ok(Value::null());
        }
        let pn = pv.num();
        p = match pn {
            Some(x) => x.to_long()?,
            None => {
                return Err(loc(
                    16004,
                    format!("can't convert from BSON type {} to long", pv.type_name()),
                ));
            }
        };
        if !pn.is_some_and(Num::integral32) {
            return Err(loc(
                51082,
                format!("precision argument to  {name} must be a integral value"),
            ));
        }
        if !(-20..=100).contains(&p) {
            return Err(loc(
                51083,
                format!("cannot apply {name} with precision value {p} value must be in [-20, 100]"),
            ));
        }
    }
    let exp = -(p as i32);
    Ok(match n {
        Num::Dec(d) => {
            if matches!(d, Decimal::Infinite { .. }) {
                return Ok(n.into_value());
            }
            Num::Dec(decimal::quantize(d, exp, mode))
        }
        Num::Double(x) => {
            let d = decimal::from_f64(x, 34);
            if matches!(d, Decimal::Infinite { .. }) {
                return Ok(n.into_value());
            }
            Num::Double(decimal::to_f64(decimal::quantize(d, exp, mode)))
        }
        Num::Int(_) | Num::Long(_) => {
            if p >= 0 {
                return Ok(n.into_value());
            }
            let i = n.to_long()?;
            let q = decimal::quantize(decimal::from_i64(i), exp, mode);
            let Some(out) = decimal::to_i64(q, Rounding::HalfEven) else {
                return Err(loc(
                    51080,
                    format!(
                        "invalid conversion from Decimal128 result in {name} resulting from \
                         arguments: [{i}, {p}]"
                    ),
                ));
            };
            if n.kind() == NumKind::Long || out > i64::from(i32::MAX) {
                Num::Long(out)
            } else {
                Num::Int(out as i32)
            }
        }
    }
    .into_value())
}
