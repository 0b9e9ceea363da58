//! Window function statements of `$setWindowFields`' `output` (`field: {$fn: arg, window:
//! {...}}`), parsed as MongoDB's `window_function::Expression::parse` and the parsers of
//! each function do (window_function_expression.{h,cpp}, window_function_shift.cpp,
//! accumulator_rank.cpp, …), with their FailedToParse messages and numbered codes.
//!
//! The functions, sorted: `$addToSet $avg $bottom $bottomN $count $covariancePop
//! $covarianceSamp $denseRank $derivative $documentNumber $expMovingAvg $first $firstN
//! $integral $last $lastN $linearFill $locf $max $maxN $median $min $minN $percentile $push
//! $rank $shift $stdDevPop $stdDevSamp $sum $top $topN` (MongoDB 7.0's list: `$mergeObjects`
//! is not a window function there).

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::decimal::{self, Decimal};

use super::bounds::{Bounds, DocBound, unit_millis};
use super::state::RankKind;
use crate::agg::accumulators::AccumulatorSpec;
use crate::agg::doc::key;
use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Expression};
use crate::sort::SortSpec;

/// Every window function name, sorted.
pub const WINDOW_FUNCTIONS: &[&str] = &[
    "$addToSet",
    "$avg",
    "$bottom",
    "$bottomN",
    "$count",
    "$covariancePop",
    "$covarianceSamp",
    "$denseRank",
    "$derivative",
    "$documentNumber",
    "$expMovingAvg",
    "$first",
    "$firstN",
    "$integral",
    "$last",
    "$lastN",
    "$linearFill",
    "$locf",
    "$max",
    "$maxN",
    "$median",
    "$min",
    "$minN",
    "$percentile",
    "$push",
    "$rank",
    "$shift",
    "$stdDevPop",
    "$stdDevSamp",
    "$sum",
    "$top",
    "$topN",
];

fn is_function(name: &str) -> bool {
    WINDOW_FUNCTIONS.binary_search(&name).is_ok()
}

/// What a statement computes.
pub enum Func {
    /// A `$group` accumulator (`$sum $avg $min $max $push $addToSet $count $stdDev* $firstN
    /// $lastN $minN $maxN $top* $bottom* $median $percentile`).
    Acc(AccumulatorSpec),
    /// `$first`: the input at the window's first document.
    First(Expression),
    /// `$last`: the input at the window's last document.
    Last(Expression),
    /// `$shift`: `output` at the document `by` positions away, else `default`.
    Shift {
        /// The expression.
        output: Expression,
        /// The offset.
        by: i64,
        /// The value outside the partition (null when not given).
        default: RawBson,
    },
    /// `$rank`, `$denseRank`, `$documentNumber`.
    Rank(RankKind),
    /// `$expMovingAvg` with its weight.
    ExpMovingAvg {
        /// The input.
        input: Expression,
        /// The weight of the newest value.
        alpha: Decimal,
    },
    /// `$covariancePop` / `$covarianceSamp` over `[x, y]`.
    Covariance {
        /// The input (an array expression).
        input: Expression,
        /// Sample covariance.
        sample: bool,
    },
    /// `$derivative` (rise over run, per `unit`).
    Derivative {
        /// The input.
        input: Expression,
        /// Milliseconds per unit.
        unit: Option<i64>,
    },
    /// `$integral` (trapezoidal rule, per `unit`).
    Integral {
        /// The input.
        input: Expression,
        /// Milliseconds per unit.
        unit: Option<i64>,
    },
    /// `$locf`: last observation carried forward.
    Locf(Expression),
    /// `$linearFill`: nulls interpolated from their neighbours.
    LinearFill(Expression),
}

/// One `output` field.
pub struct Statement {
    /// The output path as written (`a.b`).
    pub field: String,
    /// The function.
    pub func: Func,
    /// Its window.
    pub bounds: Bounds,
    /// The statement as explain shows it.
    pub serialized: RawDocumentBuf,
}

fn fail(msg: impl Into<String>) -> QueryError {
    QueryError::FailedToParse(msg.into())
}

fn one(name: &str, arg: RawBson) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    if let Ok(k) = key(name) {
        d.append(k, arg);
    }
    d
}

fn with_window(name: &str, arg: RawBson, bounds: &Bounds) -> RawDocumentBuf {
    let mut d = one(name, arg);
    d.append(bson::raw::cstr!("window"), bounds.serialize());
    d
}

impl Statement {
    /// Parses `field: <spec>` (`sort` is the stage's `sortBy`).
    pub fn parse(
        field: &str,
        v: RawBsonRef<'_>,
        sort: Option<&SortSpec>,
        ext: &ExprExtensions,
    ) -> Result<Statement> {
        let RawBsonRef::Document(obj) = v else {
            return Err(fail(format!("The field '{field}' must be an object")));
        };
        let mut first_key = None;
        for el in obj.iter() {
            let (k, _) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
            let k = k.as_str();
            if first_key.is_none() {
                first_key = Some(k.to_string());
            }
            if !k.starts_with('$') {
                continue;
            }
            if !is_function(k) {
                return Err(fail(format!("Unrecognized window function, {k}")));
            }
            let (func, bounds, serialized) = parse_function(k, obj, sort, ext, field)?;
            return Ok(Statement {
                field: field.to_string(),
                func,
                bounds,
                serialized,
            });
        }
        Err(fail(match first_key {
            Some(k) if !k.is_empty() => format!("Expected a $-prefixed window function, {k}"),
            _ => "Expected a $-prefixed window function".to_string(),
        }))
    }
}

type Parsed = (Func, Bounds, RawDocumentBuf);

fn parse_function(
    name: &str,
    obj: &RawDocument,
    sort: Option<&SortSpec>,
    ext: &ExprExtensions,
    field: &str,
) -> Result<Parsed> {
    match name {
        "$first" | "$last" => first_last(name, obj, sort, ext),
        "$firstN" | "$lastN" | "$minN" | "$maxN" | "$top" | "$topN" | "$bottom" | "$bottomN" => {
            n_function(name, obj, sort, ext, field)
        }
        "$median" | "$percentile" => quantile(name, obj, sort, ext, field),
        "$shift" => shift(obj, sort, ext),
        "$rank" | "$denseRank" | "$documentNumber" => rank(name, obj, sort),
        "$expMovingAvg" => exp_moving_avg(obj, sort, ext),
        "$derivative" | "$integral" => with_unit(name, obj, sort, ext),
        "$linearFill" | "$locf" => implicit_window(name, obj, sort, ext),
        _ => removable(obj, sort, ext, field),
    }
}

/// `ExpressionRemovable::parse` / `ExpressionFromAccumulator::parse`: one function and an
/// optional `window`.
fn removable(
    obj: &RawDocument,
    sort: Option<&SortSpec>,
    ext: &ExprExtensions,
    field: &str,
) -> Result<Parsed> {
    let mut bounds = Bounds::unbounded();
    let mut func: Option<(String, RawBsonRef<'_>)> = None;
    for el in obj.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        let k = k.as_str();
        if k == "window" {
            bounds = Bounds::parse(v, sort, ext)?;
        } else if is_function(k) {
            if func.is_some() {
                return Err(fail("Cannot specify two functions in window function spec"));
            }
            func = Some((k.to_string(), v));
        } else {
            return Err(fail(format!(
                "Window function found an unknown argument: {k}"
            )));
        }
    }
    let Some((name, arg)) = func else {
        return Err(fail("Must specify a window function in output field"));
    };
    match name.as_str() {
        "$covariancePop" | "$covarianceSamp" => {
            let input = ext.parse_expression(arg)?;
            let ser = with_window(&name, RawBson::from(arg), &bounds);
            Ok((
                Func::Covariance {
                    input,
                    sample: name == "$covarianceSamp",
                },
                bounds,
                ser,
            ))
        }
        "$count" => {
            if !matches!(arg, RawBsonRef::Document(d) if d.is_empty()) {
                return Err(fail("$count only accepts an empty object as input"));
            }
            let spec = AccumulatorSpec::parse_op(field, "$count", arg, ext)?;
            let ser = with_window(
                "$sum",
                RawBson::Document(bson::rawdoc! {"$const": 1}),
                &bounds,
            );
            Ok((Func::Acc(spec), bounds, ser))
        }
        _ => {
            let spec = AccumulatorSpec::parse_op(field, &name, arg, ext)?;
            let ser = with_window(&name, RawBson::from(arg), &bounds);
            Ok((Func::Acc(spec), bounds, ser))
        }
    }
}

fn first_last(
    name: &str,
    obj: &RawDocument,
    sort: Option<&SortSpec>,
    ext: &ExprExtensions,
) -> Result<Parsed> {
    let mut bounds = None;
    let mut input = None;
    let mut raw = RawBson::Null;
    for el in obj.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "window" => {
                if bounds.is_some() {
                    return Err(fail(format!(
                        "saw multiple 'window' fields in '{name}' expression"
                    )));
                }
                bounds = Some(Bounds::parse(v, sort, ext)?);
            }
            k if k == name => {
                input = Some(ext.parse_expression(v)?);
                raw = RawBson::from(v);
            }
            other => {
                return Err(fail(format!("{name} got unexpected argument: {other}")));
            }
        }
    }
    let bounds = bounds.unwrap_or_else(Bounds::unbounded);
    let Some(input) = input else {
        return Err(fail(format!("{name} parser called with no {name} key")));
    };
    let ser = with_window(name, raw, &bounds);
    let func = if name == "$first" {
        Func::First(input)
    } else {
        Func::Last(input)
    };
    Ok((func, bounds, ser))
}

/// `ExpressionN::parse`: `$firstN $lastN $minN $maxN $top $topN $bottom $bottomN`.
fn n_function(
    name: &str,
    obj: &RawDocument,
    sort: Option<&SortSpec>,
    ext: &ExprExtensions,
    field: &str,
) -> Result<Parsed> {
    let mut spec = None;
    let mut raw = RawBson::Null;
    let mut bounds = None;
    for el in obj.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            k if k == name => {
                if spec.is_some() {
                    return Err(fail(format!(
                        "saw multiple specifications for '{name}' expression"
                    )));
                }
                spec = Some(AccumulatorSpec::parse_op(field, name, v, ext)?);
                raw = RawBson::from(v);
            }
            "window" => {
                if bounds.is_some() {
                    return Err(fail(format!(
                        "saw multiple 'window' fields in '{name}' expression"
                    )));
                }
                bounds = Some(Bounds::parse(v, sort, ext)?);
            }
            other => {
                return Err(fail(format!("{name} got unexpected argument: {other}")));
            }
        }
    }
    let bounds = bounds.unwrap_or_else(Bounds::unbounded);
    let Some(spec) = spec else {
        return Err(QueryError::Location(
            5788403,
            format!("missing accumulator specification for {name}"),
        ));
    };
    let ser = with_window(name, raw, &bounds);
    Ok((Func::Acc(spec), bounds, ser))
}

fn quantile(
    name: &str,
    obj: &RawDocument,
    sort: Option<&SortSpec>,
    ext: &ExprExtensions,
    field: &str,
) -> Result<Parsed> {
    let mut spec = None;
    let mut raw = RawBson::Null;
    let mut bounds = Bounds::unbounded();
    for el in obj.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            k if k == name => {
                if spec.is_some() {
                    return Err(fail(format!(
                        "saw multiple specifications for '{name}expression "
                    )));
                }
                spec = Some(AccumulatorSpec::parse_op(field, name, v, ext)?);
                raw = RawBson::from(v);
            }
            "window" => bounds = Bounds::parse(v, sort, ext)?,
            other => {
                return Err(fail(format!("{name} got unexpected argument: {other}")));
            }
        }
    }
    let Some(spec) = spec else {
        return Err(QueryError::Location(
            7455900,
            format!("Missing or incomplete accumulator specification for {name}"),
        ));
    };
    let ser = with_window(name, raw, &bounds);
    Ok((Func::Acc(spec), bounds, ser))
}

/// `parseIntegerElementToInt`: a number with an integral value that fits 32 bits.
fn to_int(v: RawBsonRef<'_>) -> Option<i64> {
    let f = match v {
        RawBsonRef::Int32(i) => return Some(i64::from(i)),
        RawBsonRef::Int64(i) => return i32::try_from(i).ok().map(i64::from),
        RawBsonRef::Double(d) => d,
        RawBsonRef::Decimal128(d) => decimal::to_f64(Decimal::from_decimal128(d)),
        _ => return None,
    };
    (f.fract() == 0.0 && f >= f64::from(i32::MIN) && f <= f64::from(i32::MAX)).then_some(f as i64)
}

fn shift(obj: &RawDocument, sort: Option<&SortSpec>, ext: &ExprExtensions) -> Result<Parsed> {
    let mut parsed = None;
    for el in obj.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        let k = k.as_str();
        if k == "window" {
            return Err(fail("$shift does not accept a 'window' field"));
        } else if is_function(k) {
            if parsed.is_some() {
                return Err(fail(
                    "Cannot specify multiple functions in window function spec",
                ));
            }
            let RawBsonRef::Document(args) = v else {
                return Err(fail("Argument to $shift must be an object"));
            };
            parsed = Some(shift_args(args, k, ext)?);
        } else {
            return Err(fail(format!(
                "Window function found an unknown argument: {k}"
            )));
        }
    }
    let Some((output, by, default, raw_output)) = parsed else {
        return Err(fail("Must specify a window function in output field"));
    };
    if sort.is_none() {
        return Err(fail("'$shift' requires a sortBy"));
    }
    let mut args = RawDocumentBuf::new();
    args.append(bson::raw::cstr!("by"), RawBson::Int32(by as i32));
    args.append(bson::raw::cstr!("output"), raw_output);
    args.append(bson::raw::cstr!("default"), default.clone());
    let ser = one("$shift", RawBson::Document(args));
    Ok((
        Func::Shift {
            output,
            by,
            default,
        },
        Bounds::Documents(DocBound::At(by), DocBound::At(by)),
        ser,
    ))
}

fn shift_args(
    args: &RawDocument,
    name: &str,
    ext: &ExprExtensions,
) -> Result<(Expression, i64, RawBson, RawBson)> {
    let (mut output, mut by, mut default) = (None, None, None);
    for el in args.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "output" => output = Some((ext.parse_expression(v)?, RawBson::from(v))),
            "default" => {
                let e = ext.parse_expression(v)?;
                let Some(c) = e.constant() else {
                    return Err(fail(
                        "'$shift:default' expression must yield a constant value.",
                    ));
                };
                default = Some(c.cloned().unwrap_or(RawBson::Null));
            }
            "by" => {
                let Some(n) = to_int(v) else {
                    return Err(fail(format!(
                        "'$shift:by' field must be an integer, but found  by: {}",
                        cairn_storage::display::value(v)
                    )));
                };
                by = Some(n);
            }
            _ => return Err(fail(format!("Unknown argument in {name}"))),
        }
    }
    let Some((output, raw)) = output else {
        return Err(fail(format!("{name} requires an 'output' expression.")));
    };
    let Some(by) = by else {
        return Err(fail(format!("{name} requires 'by' as an integer value.")));
    };
    Ok((output, by, default.unwrap_or(RawBson::Null), raw))
}

fn rank(name: &str, obj: &RawDocument, sort: Option<&SortSpec>) -> Result<Parsed> {
    if obj.iter().count() != 1 {
        return Err(QueryError::Location(
            5371601,
            "Rank style window functions take no other arguments".into(),
        ));
    }
    let empty = matches!(obj.get(name), Ok(Some(RawBsonRef::Document(d))) if d.is_empty());
    if !empty {
        return Err(QueryError::Location(
            5371603,
            format!("{name} must be specified with '{{}}' as the value"),
        ));
    }
    if sort.is_none_or(|s| s.fields().len() != 1) {
        return Err(QueryError::Location(
            5371602,
            format!(
                "{name} must be specified with a top level sortBy expression with exactly one \
                 element"
            ),
        ));
    }
    let kind = match name {
        "$rank" => RankKind::Rank,
        "$denseRank" => RankKind::DenseRank,
        _ => RankKind::DocumentNumber,
    };
    Ok((
        Func::Rank(kind),
        Bounds::running(),
        one(name, RawBson::Document(RawDocumentBuf::new())),
    ))
}

fn exp_moving_avg(
    obj: &RawDocument,
    sort: Option<&SortSpec>,
    ext: &ExprExtensions,
) -> Result<Parsed> {
    let sub = match obj.get("$expMovingAvg") {
        Ok(Some(RawBsonRef::Document(d))) if obj.iter().count() == 1 => d,
        _ => {
            return Err(fail(
                "$expMovingAvg must have exactly one argument that is an object",
            ));
        }
    };
    let shape = "$expMovingAvg sub object must have exactly two fields: An 'input' field, and \
                 either an 'N' field or an 'alpha' field";
    let input = match sub.get("input") {
        Ok(Some(v)) if sub.iter().count() == 2 => v,
        _ => return Err(fail(shape)),
    };
    if sort.is_none() {
        return Err(fail("$expMovingAvg requires an explicit 'sortBy'"));
    }
    let input_expr = ext.parse_expression(input)?;
    let mut args = RawDocumentBuf::new();
    let alpha = if let Ok(Some(n)) = sub.get("N") {
        let f = match n {
            RawBsonRef::Int32(i) => f64::from(i),
            RawBsonRef::Int64(l) => l as f64,
            RawBsonRef::Double(d) => d,
            RawBsonRef::Decimal128(d) => decimal::to_f64(Decimal::from_decimal128(d)),
            other => {
                return Err(fail(format!(
                    "'N' field must be an integer, but found type {}",
                    cairn_storage::display::type_name(other)
                )));
            }
        };
        if f.floor() != f {
            return Err(fail(format!(
                "'N' field must be an integer, but found  N: {}. To use a non-integer, use the \
                 'alpha' argument instead",
                cairn_storage::display::value(n)
            )));
        }
        let n = if f >= 9.2e18 {
            i64::MAX
        } else if f <= -9.2e18 {
            i64::MIN
        } else {
            f as i64
        };
        if n <= 0 {
            return Err(fail(format!("'N' must be greater than zero. Got {n}")));
        }
        args.append(bson::raw::cstr!("N"), RawBson::Int64(n));
        decimal::div(
            decimal::from_i64(2),
            decimal::add(decimal::from_i64(n), decimal::from_i64(1)),
        )
    } else if let Ok(Some(a)) = sub.get("alpha") {
        let d = match a {
            RawBsonRef::Int32(i) => decimal::from_i64(i64::from(i)),
            RawBsonRef::Int64(l) => decimal::from_i64(l),
            RawBsonRef::Double(x) => decimal::from_f64(x, 15),
            RawBsonRef::Decimal128(d) => Decimal::from_decimal128(d),
            _ => return Err(fail("'alpha' must be a number")),
        };
        let zero = decimal::from_i64(0);
        let one = decimal::from_i64(1);
        let ok = decimal::cmp(d, zero) == Some(std::cmp::Ordering::Greater)
            && decimal::cmp(d, one) == Some(std::cmp::Ordering::Less);
        if !ok {
            return Err(fail(format!(
                "'alpha' must be between 0 and 1 (exclusive), found alpha: {}",
                cairn_storage::display::value(a)
            )));
        }
        args.append(bson::raw::cstr!("alpha"), RawBson::from(a));
        d
    } else {
        return Err(fail(format!(
            "Got unrecognized field in $expMovingAvg{shape}"
        )));
    };
    args.append(bson::raw::cstr!("input"), RawBson::from(input));
    Ok((
        Func::ExpMovingAvg {
            input: input_expr,
            alpha,
        },
        Bounds::running(),
        one("$expMovingAvg", RawBson::Document(args)),
    ))
}

/// `$derivative` / `$integral`: `{$fn: {input, unit}, window}` with a one-field `sortBy`.
fn with_unit(
    name: &str,
    obj: &RawDocument,
    sort: Option<&SortSpec>,
    ext: &ExprExtensions,
) -> Result<Parsed> {
    match sort {
        None => return Err(fail(format!("{name} requires a sortBy"))),
        Some(s) if s.fields().len() != 1 => {
            return Err(fail(format!("{name} requires a non-compound sortBy")));
        }
        _ => {}
    }
    let integral = name == "$integral";
    let mut bounds = None;
    let mut args = None;
    for el in obj.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "window" => {
                if integral && bounds.is_some() {
                    return Err(fail("There can be only one 'window' field for $integral"));
                }
                bounds = Some(Bounds::parse(v, sort, ext)?);
            }
            k if k == name => args = Some(v),
            other => {
                return Err(fail(format!("{name} got unexpected argument: {other}")));
            }
        }
    }
    let Some(args) = args else {
        return Err(fail(format!(
            "{name} parser called on object with no {name} key"
        )));
    };
    let RawBsonRef::Document(a) = args else {
        return Err(fail(format!(
            "{name} expects an object, but got a {}: {name}: {}",
            cairn_storage::display::type_name(args),
            cairn_storage::display::value(args)
        )));
    };
    let mut input = None;
    let mut unit: Option<(String, i64)> = None;
    for el in a.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "input" => input = Some(ext.parse_expression(v)?),
            "unit" => {
                if integral && unit.is_some() {
                    return Err(fail("There can be only one 'unit' field for $integral"));
                }
                unit = Some(unit_millis(v)?);
            }
            other => {
                return Err(fail(format!("{name} got unexpected argument: {other}")));
            }
        }
    }
    let Some(input) = input else {
        return Err(fail(format!("{name} requires an 'input' expression")));
    };
    let bounds = match bounds {
        Some(b) => b,
        None if integral => Bounds::unbounded(),
        None => return Err(fail("$derivative requires explicit window bounds")),
    };
    let ser = with_window(name, RawBson::from(args), &bounds);
    let unit = unit.map(|(_, ms)| ms);
    let func = if integral {
        Func::Integral { input, unit }
    } else {
        Func::Derivative { input, unit }
    };
    Ok((func, bounds, ser))
}

/// `$locf` and `$linearFill`: an expression, no `window`.
fn implicit_window(
    name: &str,
    obj: &RawDocument,
    sort: Option<&SortSpec>,
    ext: &ExprExtensions,
) -> Result<Parsed> {
    let mut func: Option<(String, RawBsonRef<'_>)> = None;
    let mut window = false;
    for el in obj.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        let k = k.as_str();
        if k == "window" {
            window = true;
        } else if is_function(k) {
            if func.is_some() {
                return Err(fail("Cannot specify two functions in window function spec"));
            }
            func = Some((k.to_string(), v));
        } else {
            return Err(fail(format!(
                "Window function found an unknown argument: {k}"
            )));
        }
    }
    let Some((fname, arg)) = func else {
        return Err(fail("Must specify a window function in output field"));
    };
    if window {
        return Err(fail(format!("'window' field is not allowed in {fname}")));
    }
    let input = ext.parse_expression(arg)?;
    let ser = one(&fname, RawBson::from(arg));
    if name == "$linearFill" {
        if sort.is_none_or(|s| s.fields().len() != 1) {
            return Err(QueryError::Location(
                605001,
                format!(
                    "{fname} must be specified with a top level sortBy expression with exactly \
                     one element"
                ),
            ));
        }
        return Ok((Func::LinearFill(input), Bounds::unbounded(), ser));
    }
    Ok((Func::Locf(input), Bounds::running(), ser))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sorted() {
        let mut v = WINDOW_FUNCTIONS.to_vec();
        v.sort_unstable();
        assert_eq!(v, WINDOW_FUNCTIONS);
    }
}
