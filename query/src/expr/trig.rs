//! Trigonometric operators (`ExpressionTrigonometric*`, expression_trigonometric.h): `$sin
//! $cos $tan $asin $acos $atan $atan2 $sinh $cosh $tanh $asinh $acosh $atanh
//! $degreesToRadians $radiansToDegrees`.
//!
//! Integers and doubles give doubles; Decimal128 inputs give Decimal128 results computed to 34
//! digits (see [`cairn_storage::decimal`]). Inputs outside a function's domain are error 50989
//! "cannot apply $acos to 2, value must be in [-1,1]"; NaN is in every domain (NaN results).
//!
//! Invariants: nothing here panics.

use cairn_storage::decimal::{self as dec, Decimal};

use super::value::{Num, Value, format_g};
use crate::error::{QueryError, Result};

/// The single-argument trigonometric operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trig {
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    DegreesToRadians,
    RadiansToDegrees,
}

/// A domain: lower and upper bounds and whether each is included.
struct Bounds {
    lo: f64,
    lo_in: bool,
    hi: f64,
    hi_in: bool,
}

impl Trig {
    pub(crate) fn by_name(name: &str) -> Option<Trig> {
        Some(match name {
            "$sin" => Trig::Sin,
            "$cos" => Trig::Cos,
            "$tan" => Trig::Tan,
            "$asin" => Trig::Asin,
            "$acos" => Trig::Acos,
            "$atan" => Trig::Atan,
            "$sinh" => Trig::Sinh,
            "$cosh" => Trig::Cosh,
            "$tanh" => Trig::Tanh,
            "$asinh" => Trig::Asinh,
            "$acosh" => Trig::Acosh,
            "$atanh" => Trig::Atanh,
            "$degreesToRadians" => Trig::DegreesToRadians,
            "$radiansToDegrees" => Trig::RadiansToDegrees,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Trig::Sin => "$sin",
            Trig::Cos => "$cos",
            Trig::Tan => "$tan",
            Trig::Asin => "$asin",
            Trig::Acos => "$acos",
            Trig::Atan => "$atan",
            Trig::Sinh => "$sinh",
            Trig::Cosh => "$cosh",
            Trig::Tanh => "$tanh",
            Trig::Asinh => "$asinh",
            Trig::Acosh => "$acosh",
            Trig::Atanh => "$atanh",
            Trig::DegreesToRadians => "$degreesToRadians",
            Trig::RadiansToDegrees => "$radiansToDegrees",
        }
    }

    fn bounds(self) -> Option<Bounds> {
        let b = |lo, lo_in, hi, hi_in| {
            Some(Bounds {
                lo,
                lo_in,
                hi,
                hi_in,
            })
        };
        match self {
            Trig::Sin | Trig::Cos | Trig::Tan => b(f64::NEG_INFINITY, false, f64::INFINITY, false),
            Trig::Asin | Trig::Acos | Trig::Atanh => b(-1.0, true, 1.0, true),
            Trig::Acosh => b(1.0, true, f64::INFINITY, true),
            _ => None,
        }
    }

    fn apply_f64(self, x: f64) -> f64 {
        match self {
            Trig::Sin => x.sin(),
            Trig::Cos => x.cos(),
            Trig::Tan => x.tan(),
            Trig::Asin => x.asin(),
            Trig::Acos => x.acos(),
            Trig::Atan => x.atan(),
            Trig::Sinh => x.sinh(),
            Trig::Cosh => x.cosh(),
            Trig::Tanh => x.tanh(),
            Trig::Asinh => x.asinh(),
            Trig::Acosh => x.acosh(),
            Trig::Atanh => x.atanh(),
            Trig::DegreesToRadians => x * (std::f64::consts::PI / 180.0),
            Trig::RadiansToDegrees => x * (180.0 / std::f64::consts::PI),
        }
    }

    fn apply_dec(self, x: Decimal) -> Decimal {
        match self {
            Trig::Sin => dec::sin(x),
            Trig::Cos => dec::cos(x),
            Trig::Tan => dec::tan(x),
            Trig::Asin => dec::asin(x),
            Trig::Acos => dec::acos(x),
            Trig::Atan => dec::atan(x),
            Trig::Sinh => dec::sinh(x),
            Trig::Cosh => dec::cosh(x),
            Trig::Tanh => dec::tanh(x),
            Trig::Asinh => dec::asinh(x),
            Trig::Acosh => dec::acosh(x),
            Trig::Atanh => dec::atanh(x),
            Trig::DegreesToRadians => dec::mul(x, dec::pi_over_180()),
            Trig::RadiansToDegrees => dec::mul(x, dec::one_80_over_pi()),
        }
    }
}

fn bound_text(x: f64) -> String {
    if x.is_infinite() {
        if x < 0.0 { "-inf".into() } else { "inf".into() }
    } else {
        format_g(x)
    }
}

fn domain_error(t: Trig, shown: String, b: &Bounds) -> QueryError {
    QueryError::Location(
        50989,
        format!(
            "cannot apply {} to {shown}, value must be in {}{},{}{}",
            t.name(),
            if b.lo_in { "[" } else { "(" },
            bound_text(b.lo),
            bound_text(b.hi),
            if b.hi_in { "]" } else { ")" },
        ),
    )
}

fn in_bounds(x: f64, b: &Bounds) -> bool {
    x.is_nan()
        || ((if b.lo_in { x >= b.lo } else { x > b.lo })
            && (if b.hi_in { x <= b.hi } else { x < b.hi }))
}

/// One trigonometric operator on an evaluated argument.
pub(crate) fn apply(t: Trig, v: &Value<'_>) -> Result<Value<'static>> {
    if v.nullish() {
        return Ok(Value::null());
    }
    let Some(n) = v.num() else {
        return Err(QueryError::Location(
            28765,
            format!(
                "{} only supports numeric types, not {}",
                t.name(),
                v.type_name()
            ),
        ));
    };
    if let Num::Dec(d) = n {
        if let Some(b) = t.bounds() {
            let x = dec::to_f64(d);
            // Decimal bounds are checked exactly at ±1 (to_f64 of values just outside ±1 could
            // round onto the bound).
            let exact_ok = match (b.lo_in, b.hi_in, b.lo, b.hi) {
                (true, true, lo, hi) if lo == -1.0 && hi == 1.0 => {
                    dec::cmp(dec::abs(d), dec::from_i64(1)) != Some(std::cmp::Ordering::Greater)
                }
                (true, _, 1.0, _) => {
                    dec::cmp(d, dec::from_i64(1)) != Some(std::cmp::Ordering::Less)
                }
                _ => in_bounds(x, &b),
            };
            if !(dec::is_nan(d) || exact_ok) {
                return Err(domain_error(t, dec::to_string(d), &b));
            }
        }
        return Ok(Num::Dec(t.apply_dec(d)).into_value());
    }
    let x = n.to_f64();
    if let Some(b) = t.bounds()
        && !in_bounds(x, &b)
    {
        return Err(domain_error(t, n.to_display(), &b));
    }
    Ok(Num::Double(t.apply_f64(x)).into_value())
}

/// `$atan2`.
pub(crate) fn atan2(y: &Value<'_>, x: &Value<'_>) -> Result<Value<'static>> {
    if y.nullish() || x.nullish() {
        return Ok(Value::null());
    }
    let Some(a) = y.num() else {
        return Err(QueryError::Location(
            51044,
            format!("$atan2 only supports numeric types, not {}", y.type_name()),
        ));
    };
    let Some(b) = x.num() else {
        return Err(QueryError::Location(
            51045,
            format!("$atan2 only supports numeric types, not {}", x.type_name()),
        ));
    };
    if matches!(a, Num::Dec(_)) || matches!(b, Num::Dec(_)) {
        return Ok(Num::Dec(dec::atan2(a.to_dec(), b.to_dec())).into_value());
    }
    Ok(Num::Double(a.to_f64().atan2(b.to_f64())).into_value())
}
