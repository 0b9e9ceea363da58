//! Operators with named arguments (`{$op: {name: expr, …}}`) and the date operators:
//! `$dateToString $dateFromString $dateToParts $dateFromParts $dateAdd $dateSubtract
//! $dateDiff $dateTrunc`, the date-part operators (`$year` … `$isoDayOfWeek`, which take an
//! expression or `{date, timezone}`), `$regexFind $regexFindAll $regexMatch`, `$trim $ltrim
//! $rtrim`, `$replaceOne $replaceAll`, `$getField $setField $unsetField`, `$zip` and
//! `$sortArray` (each operator's `parse` and `evaluate` in expression.cpp).
//!
//! Each operator's arguments are held in a fixed order ([`Named::arg_names`]); an argument that
//! was not given is `None`, which differs from one that evaluates to missing (`timezone:
//! "$$REMOVE"` gives null, no `timezone` means UTC).
//!
//! Invariants: evaluation never panics; the order in which arguments are evaluated, and so
//! which error wins, follows MongoDB's `evaluate`.

use bson::{DateTime, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::datetime::{self, Tz, Unit};
use super::eval::{Cx, elements, eval, make_array};
use super::parse::Node;
use super::value::{Num, Value, compare};
use crate::error::{QueryError, Result};

fn loc(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::Location(code, msg.into())
}

fn show(v: &Value<'_>) -> String {
    v.get()
        .map(cairn_storage::display::value)
        .unwrap_or_else(|| "missing".into())
}

/// The date-part operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DatePart {
    Year,
    Month,
    DayOfMonth,
    Hour,
    Minute,
    Second,
    Millisecond,
    DayOfYear,
    DayOfWeek,
    Week,
    IsoWeek,
    IsoWeekYear,
    IsoDayOfWeek,
}

impl DatePart {
    pub(crate) fn by_name(name: &str) -> Option<DatePart> {
        Some(match name {
            "$year" => DatePart::Year,
            "$month" => DatePart::Month,
            "$dayOfMonth" => DatePart::DayOfMonth,
            "$hour" => DatePart::Hour,
            "$minute" => DatePart::Minute,
            "$second" => DatePart::Second,
            "$millisecond" => DatePart::Millisecond,
            "$dayOfYear" => DatePart::DayOfYear,
            "$dayOfWeek" => DatePart::DayOfWeek,
            "$week" => DatePart::Week,
            "$isoWeek" => DatePart::IsoWeek,
            "$isoWeekYear" => DatePart::IsoWeekYear,
            "$isoDayOfWeek" => DatePart::IsoDayOfWeek,
            _ => return None,
        })
    }

    fn extract(self, tz: &Tz, millis: i64) -> Value<'static> {
        let p = tz.parts(millis);
        let v = match self {
            DatePart::Year => p.year,
            DatePart::Month => p.month,
            DatePart::DayOfMonth => p.day,
            DatePart::Hour => p.hour,
            DatePart::Minute => p.minute,
            DatePart::Second => p.second,
            DatePart::Millisecond => p.millisecond,
            DatePart::DayOfYear => p.day_of_year(),
            DatePart::DayOfWeek => p.day_of_week(),
            DatePart::Week => p.week(),
            DatePart::IsoWeek => p.iso_week(),
            DatePart::IsoWeekYear => {
                // `TimeZone::isoYear` returns a long long, the others an int.
                return Value::Owned(RawBson::Int64(p.iso_year()));
            }
            DatePart::IsoDayOfWeek => p.iso_day_of_week(),
        };
        Value::Owned(RawBson::Int32(i32::try_from(v).unwrap_or(i32::MAX)))
    }
}

/// The operators parsed into [`Node::Named`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Named {
    DatePart(DatePart),
    DateToString,
    DateFromString,
    DateToParts,
    DateFromParts,
    DateAdd,
    DateSubtract,
    DateDiff,
    DateTrunc,
    RegexFind,
    RegexFindAll,
    RegexMatch,
    Trim,
    LTrim,
    RTrim,
    ReplaceOne,
    ReplaceAll,
    GetField,
    SetField,
    UnsetField,
    /// `$zip`: the first `inputs` arguments are the input arrays, the rest the defaults.
    Zip {
        longest: bool,
        inputs: usize,
    },
}

/// Parse-time errors of a generic named-argument operator.
pub(crate) struct Spec {
    pub(crate) names: &'static [&'static str],
    /// (argument index, code, message) for required arguments, checked in this order.
    pub(crate) required: &'static [(usize, i32, &'static str)],
}

impl Named {
    /// The operators parsed by the generic named-argument parser.
    pub(crate) fn by_name(name: &str) -> Option<Named> {
        Some(match name {
            "$dateToString" => Named::DateToString,
            "$dateFromString" => Named::DateFromString,
            "$dateToParts" => Named::DateToParts,
            "$dateAdd" => Named::DateAdd,
            "$dateSubtract" => Named::DateSubtract,
            "$dateDiff" => Named::DateDiff,
            "$dateTrunc" => Named::DateTrunc,
            "$regexFind" => Named::RegexFind,
            "$regexFindAll" => Named::RegexFindAll,
            "$regexMatch" => Named::RegexMatch,
            "$trim" => Named::Trim,
            "$ltrim" => Named::LTrim,
            "$rtrim" => Named::RTrim,
            "$replaceOne" => Named::ReplaceOne,
            "$replaceAll" => Named::ReplaceAll,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Named::DatePart(_) => "$datePart",
            Named::DateToString => "$dateToString",
            Named::DateFromString => "$dateFromString",
            Named::DateToParts => "$dateToParts",
            Named::DateFromParts => "$dateFromParts",
            Named::DateAdd => "$dateAdd",
            Named::DateSubtract => "$dateSubtract",
            Named::DateDiff => "$dateDiff",
            Named::DateTrunc => "$dateTrunc",
            Named::RegexFind => "$regexFind",
            Named::RegexFindAll => "$regexFindAll",
            Named::RegexMatch => "$regexMatch",
            Named::Trim => "$trim",
            Named::LTrim => "$ltrim",
            Named::RTrim => "$rtrim",
            Named::ReplaceOne => "$replaceOne",
            Named::ReplaceAll => "$replaceAll",
            Named::GetField => "$getField",
            Named::SetField => "$setField",
            Named::UnsetField => "$unsetField",
            Named::Zip { .. } => "$zip",
        }
    }

    /// The argument names of the generic operators, in evaluation order.
    pub(crate) fn spec(self) -> Spec {
        match self {
            Named::DateToString => Spec {
                names: &["date", "format", "timezone", "onNull"],
                required: &[(0, 18628, "Missing 'date' parameter to $dateToString")],
            },
            Named::DateFromString => Spec {
                names: &["dateString", "format", "timezone", "onError", "onNull"],
                required: &[(
                    0,
                    40542,
                    "Missing 'dateString' parameter to $dateFromString",
                )],
            },
            Named::DateToParts => Spec {
                names: &["date", "timezone", "iso8601"],
                required: &[(0, 40522, "Missing 'date' parameter to $dateToParts")],
            },
            Named::DateAdd | Named::DateSubtract => Spec {
                names: &["startDate", "unit", "amount", "timezone"],
                required: &[],
            },
            Named::DateDiff => Spec {
                names: &["startDate", "endDate", "unit", "timezone", "startOfWeek"],
                required: &[
                    (0, 5166303, "Missing 'startDate' parameter to $dateDiff"),
                    (1, 5166304, "Missing 'endDate' parameter to $dateDiff"),
                    (2, 5166305, "Missing 'unit' parameter to $dateDiff"),
                ],
            },
            Named::DateTrunc => Spec {
                names: &["date", "unit", "binSize", "timezone", "startOfWeek"],
                required: &[
                    (0, 5439007, "Missing 'date' parameter to $dateTrunc"),
                    (1, 5439008, "Missing 'unit' parameter to $dateTrunc"),
                ],
            },
            Named::RegexFind | Named::RegexFindAll | Named::RegexMatch => Spec {
                names: &["input", "regex", "options"],
                required: &[],
            },
            Named::Trim | Named::LTrim | Named::RTrim => Spec {
                names: &["input", "chars"],
                required: &[],
            },
            Named::ReplaceOne | Named::ReplaceAll => Spec {
                names: &["input", "find", "replacement"],
                required: &[],
            },
            _ => Spec {
                names: &[],
                required: &[],
            },
        }
    }

    /// The error for a non-object argument.
    pub(crate) fn not_object(self, found: &str) -> QueryError {
        let n = self.name();
        match self {
            Named::DateToString => loc(
                18629,
                "$dateToString only supports an object as its argument",
            ),
            Named::DateFromString => loc(
                40540,
                format!("$dateFromString only supports an object as an argument, found: {found}"),
            ),
            Named::DateToParts => loc(
                40524,
                "$dateToParts only supports an object as its argument",
            ),
            Named::DateAdd | Named::DateSubtract => {
                loc(5166400, format!("{n} expects an object as its argument"))
            }
            Named::DateDiff => loc(5166301, "$dateDiff only supports an object as its argument"),
            Named::DateTrunc => loc(
                5439007,
                "$dateTrunc only supports an object as its argument",
            ),
            Named::RegexFind | Named::RegexFindAll | Named::RegexMatch => loc(
                51103,
                format!("{n} expects an object of named arguments but found: {found}"),
            ),
            Named::Trim | Named::LTrim | Named::RTrim => loc(
                50696,
                format!("{n} only supports an object as an argument, found {found}"),
            ),
            Named::ReplaceOne | Named::ReplaceAll => loc(
                51751,
                format!("{n} requires an object as an argument, found: {found}"),
            ),
            _ => loc(10065, "invalid parameter: expected an object"),
        }
    }

    /// The error for an unknown argument.
    pub(crate) fn unknown(self, field: &str) -> QueryError {
        let n = self.name();
        match self {
            Named::DateToString => loc(
                18534,
                format!("Unrecognized argument to $dateToString: {field}"),
            ),
            Named::DateFromString => loc(
                40541,
                format!("Unrecognized argument to $dateFromString: {field}"),
            ),
            Named::DateToParts => loc(
                40520,
                format!("Unrecognized argument to $dateToParts: {field}"),
            ),
            Named::DateAdd | Named::DateSubtract => {
                loc(5166401, format!("Unrecognized argument to {n}: {field}"))
            }
            Named::DateDiff => loc(
                5166302,
                format!("Unrecognized argument to $dateDiff: {field}"),
            ),
            Named::DateTrunc => loc(
                5439008,
                format!("Unrecognized argument to $dateTrunc: {field}"),
            ),
            Named::RegexFind | Named::RegexFindAll | Named::RegexMatch => {
                loc(31024, format!("{n} found an unknown argument: {field}"))
            }
            Named::Trim | Named::LTrim | Named::RTrim => {
                loc(50694, format!("{n} found an unknown argument: {field}"))
            }
            Named::ReplaceOne | Named::ReplaceAll => {
                loc(51750, format!("{n} found an unknown argument: {field}"))
            }
            _ => loc(10065, format!("unknown argument: {field}")),
        }
    }

    /// Checks after all arguments are collected (beyond the required ones).
    pub(crate) fn check(self, given: &[bool]) -> Result<()> {
        let n = self.name();
        let has = |i: usize| given.get(i).copied().unwrap_or(false);
        match self {
            Named::DateAdd | Named::DateSubtract if !(has(0) && has(1) && has(2)) => Err(loc(
                5166402,
                format!("{n} requires startDate, unit, and amount to be present"),
            )),
            Named::RegexFind | Named::RegexFindAll | Named::RegexMatch => {
                if !has(0) {
                    return Err(loc(31022, format!("{n} requires 'input' parameter")));
                }
                if !has(1) {
                    return Err(loc(31023, format!("{n} requires 'regex' parameter")));
                }
                Ok(())
            }
            Named::Trim | Named::LTrim | Named::RTrim if !has(0) => {
                Err(loc(50695, format!("{n} requires an 'input' field")))
            }
            Named::ReplaceOne | Named::ReplaceAll => {
                if !has(0) {
                    return Err(loc(51749, format!("{n} requires 'input' to be specified")));
                }
                if !has(1) {
                    return Err(loc(51748, format!("{n} requires 'find' to be specified")));
                }
                if !has(2) {
                    return Err(loc(
                        51747,
                        format!("{n} requires 'replacement' to be specified"),
                    ));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// `$sortArray`'s `sortBy`: the whole value, or a sort pattern on the elements' fields.
#[derive(Clone, Debug)]
pub(crate) enum SortBy {
    Whole { descending: bool },
    Pattern(crate::sort::SortSpec),
}

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------

fn opt(args: &[Option<Node>], i: usize) -> Option<&Node> {
    args.get(i).and_then(Option::as_ref)
}

fn eval_opt<'a>(args: &'a [Option<Node>], i: usize, cx: &mut Cx<'a>) -> Result<Option<Value<'a>>> {
    match opt(args, i) {
        Some(n) => eval(n, cx).map(Some),
        None => Ok(None),
    }
}

/// Evaluates a present argument; a missing one is missing.
fn eval_or_missing<'a>(args: &'a [Option<Node>], i: usize, cx: &mut Cx<'a>) -> Result<Value<'a>> {
    Ok(eval_opt(args, i, cx)?.unwrap_or(Value::Missing))
}

/// `makeTimeZone`: UTC without the argument, `None` (null result) when it is nullish.
fn time_zone<'a>(args: &'a [Option<Node>], i: usize, cx: &mut Cx<'a>) -> Result<Option<Tz>> {
    let Some(v) = eval_opt(args, i, cx)? else {
        return Ok(Some(Tz::Utc));
    };
    if v.nullish() {
        return Ok(None);
    }
    let Some(RawBsonRef::String(s)) = v.get() else {
        return Err(loc(
            40517,
            format!(
                "timezone must evaluate to a string, found {}",
                v.type_name()
            ),
        ));
    };
    Tz::parse(s).map(Some)
}

/// `Value::coercibleToDate`.
fn coercible_to_date(v: &Value<'_>) -> bool {
    matches!(
        v.get(),
        Some(RawBsonRef::DateTime(_) | RawBsonRef::Timestamp(_) | RawBsonRef::ObjectId(_))
    )
}

/// `Value::coerceToDate`: 16006 for other types.
pub(crate) fn coerce_to_date(v: &Value<'_>) -> Result<i64> {
    match v.get() {
        Some(RawBsonRef::DateTime(d)) => Ok(d.timestamp_millis()),
        Some(RawBsonRef::Timestamp(ts)) => Ok(i64::from(ts.time) * 1000),
        Some(RawBsonRef::ObjectId(o)) => Ok(i64::from(u32::from_be_bytes(
            o.bytes()[..4].try_into().unwrap_or([0; 4]),
        )) * 1000),
        _ => Err(loc(
            16006,
            format!("can't convert from BSON type {} to Date", v.type_name()),
        )),
    }
}

fn date_value(millis: i64) -> Value<'static> {
    Value::Owned(RawBson::DateTime(DateTime::from_millis(millis)))
}

/// `parseTimeUnit(Value, expressionName)`.
fn time_unit(v: &Value<'_>, op: &str) -> Result<Unit> {
    let Some(RawBsonRef::String(s)) = v.get() else {
        return Err(loc(
            5439013,
            format!(
                "{op} requires 'unit' to be a string, but got {}",
                v.type_name()
            ),
        ));
    };
    Unit::parse(s).ok_or_else(|| {
        loc(
            5439014,
            format!("{op} parameter 'unit' value cannot be recognized as a time unit: {s}"),
        )
    })
}

/// `parseDayOfWeek(Value, expressionName, parameterName)`.
fn day_of_week(v: &Value<'_>, op: &str) -> Result<i64> {
    let Some(RawBsonRef::String(s)) = v.get() else {
        return Err(loc(
            5439015,
            format!(
                "{op} requires 'startOfWeek' to be a string, but got {}",
                v.type_name()
            ),
        ));
    };
    datetime::parse_day_of_week(s).ok_or_else(|| {
        loc(
            5439016,
            format!(
                "{op} parameter 'startOfWeek' value cannot be recognized as a day of a week: {s}"
            ),
        )
    })
}

/// Adds context to a time zone error as `addContextToAssertionException` does.
fn with_context<T>(r: Result<T>, context: &str) -> Result<T> {
    r.map_err(|e| match e {
        QueryError::Location(code, msg) => {
            QueryError::Location(code, format!("{context} :: caused by :: {msg}"))
        }
        other => other,
    })
}

pub(crate) fn eval_named<'a>(
    op: Named,
    args: &'a [Option<Node>],
    cx: &mut Cx<'a>,
) -> Result<Value<'a>> {
    match op {
        Named::DatePart(part) => date_part(part, args, cx),
        Named::DateToString => date_to_string(args, cx),
        Named::DateFromString => date_from_string(args, cx),
        Named::DateToParts => date_to_parts(args, cx),
        Named::DateFromParts => date_from_parts(args, cx),
        Named::DateAdd | Named::DateSubtract => date_add(op, args, cx),
        Named::DateDiff => date_diff(args, cx),
        Named::DateTrunc => date_trunc(args, cx),
        Named::RegexFind | Named::RegexFindAll | Named::RegexMatch => {
            super::strings::regex_op(op, args, cx)
        }
        Named::Trim | Named::LTrim | Named::RTrim => super::strings::trim(op, args, cx),
        Named::ReplaceOne | Named::ReplaceAll => super::strings::replace(op, args, cx),
        Named::GetField => get_field(args, cx),
        Named::SetField | Named::UnsetField => set_field(op, args, cx),
        Named::Zip { longest, inputs } => zip(longest, inputs, args, cx),
    }
}

#[inline(never)]
fn date_part<'a>(part: DatePart, args: &'a [Option<Node>], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let date = eval_or_missing(args, 0, cx)?;
    if date.nullish() {
        return Ok(Value::null());
    }
    let millis = coerce_to_date(&date)?;
    let Some(tz) = time_zone(args, 1, cx)? else {
        return Ok(Value::null());
    };
    Ok(part.extract(&tz, millis))
}

#[inline(never)]
fn date_to_string<'a>(args: &'a [Option<Node>], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let date = eval_or_missing(args, 0, cx)?;
    let format = eval_opt(args, 1, cx)?;
    if let Some(f) = &format
        && !f.nullish()
    {
        let Some(RawBsonRef::String(s)) = f.get() else {
            return Err(loc(
                18533,
                format!(
                    "$dateToString requires that 'format' be a string, found: {} with value {}",
                    f.type_name(),
                    show(f)
                ),
            ));
        };
        datetime::validate_to_string_format(s)?;
    }
    let tz = time_zone(args, 2, cx)?;
    if date.nullish() {
        return match opt(args, 3) {
            Some(n) => eval(n, cx),
            None => Ok(Value::null()),
        };
    }
    let Some(tz) = tz else {
        return Ok(Value::null());
    };
    let fmt = match &format {
        Some(f) => match f.get() {
            Some(RawBsonRef::String(s)) => s.to_string(),
            _ => return Ok(Value::null()),
        },
        None => datetime::ISO_FORMAT.to_string(),
    };
    let millis = coerce_to_date(&date)?;
    Ok(Value::string(datetime::format(&tz, &fmt, millis)?))
}

#[inline(never)]
fn date_from_string<'a>(args: &'a [Option<Node>], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let input = eval_or_missing(args, 0, cx)?;
    let format = eval_opt(args, 1, cx)?;
    if let Some(f) = &format
        && !f.nullish()
    {
        let Some(RawBsonRef::String(s)) = f.get() else {
            return Err(loc(
                40684,
                format!(
                    "$dateFromString requires that 'format' be a string, found: {} with value {}",
                    f.type_name(),
                    show(f)
                ),
            ));
        };
        datetime::validate_from_string_format(s)?;
    }
    let tz = time_zone(args, 2, cx)?;
    if input.nullish() {
        return match opt(args, 4) {
            Some(n) => eval(n, cx),
            None => Ok(Value::null()),
        };
    }
    let result = (|| -> Result<Option<i64>> {
        let Some(RawBsonRef::String(s)) = input.get() else {
            return Err(loc(
                datetime::CONVERSION_FAILURE,
                format!(
                    "$dateFromString requires that 'dateString' be a string, found: {} with \
                     value {}",
                    input.type_name(),
                    show(&input)
                ),
            ));
        };
        let Some(tz) = &tz else {
            return Ok(None);
        };
        match &format {
            Some(f) => match f.get() {
                Some(RawBsonRef::String(fs)) => datetime::parse_with_format(s, fs, tz).map(Some),
                _ => Ok(None),
            },
            None => datetime::parse_free(s, tz).map(Some),
        }
    })();
    match result {
        Ok(Some(ms)) => Ok(date_value(ms)),
        Ok(None) => Ok(Value::null()),
        Err(QueryError::Location(datetime::CONVERSION_FAILURE, _)) if opt(args, 3).is_some() => {
            match opt(args, 3) {
                Some(n) => eval(n, cx),
                None => Ok(Value::null()),
            }
        }
        Err(e) => Err(e),
    }
}

#[inline(never)]
fn date_to_parts<'a>(args: &'a [Option<Node>], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let date = eval_or_missing(args, 0, cx)?;
    let Some(tz) = time_zone(args, 1, cx)? else {
        return Ok(Value::null());
    };
    let iso = match eval_opt(args, 2, cx)? {
        None => false,
        Some(v) if v.nullish() => return Ok(Value::null()),
        Some(v) => match v.get() {
            Some(RawBsonRef::Boolean(b)) => b,
            _ => {
                return Err(loc(
                    40521,
                    format!("iso8601 must evaluate to a bool, found {}", v.type_name()),
                ));
            }
        },
    };
    if date.nullish() {
        return Ok(Value::null());
    }
    let millis = coerce_to_date(&date)?;
    let p = tz.parts(millis);
    let int = |v: i64| RawBson::Int32(i32::try_from(v).unwrap_or(i32::MAX));
    let mut out = RawDocumentBuf::new();
    if iso {
        out.append(bson::raw::cstr!("isoWeekYear"), int(p.iso_year()));
        out.append(bson::raw::cstr!("isoWeek"), int(p.iso_week()));
        out.append(bson::raw::cstr!("isoDayOfWeek"), int(p.iso_day_of_week()));
    } else {
        out.append(bson::raw::cstr!("year"), int(p.year));
        out.append(bson::raw::cstr!("month"), int(p.month));
        out.append(bson::raw::cstr!("day"), int(p.day));
    }
    out.append(bson::raw::cstr!("hour"), int(p.hour));
    out.append(bson::raw::cstr!("minute"), int(p.minute));
    out.append(bson::raw::cstr!("second"), int(p.second));
    out.append(bson::raw::cstr!("millisecond"), int(p.millisecond));
    Ok(Value::Owned(RawBson::Document(out)))
}

/// Names of `$dateFromParts`' arguments, in [`Node::Named`] order.
pub(crate) const DATE_FROM_PARTS_ARGS: &[&str] = &[
    "year",
    "month",
    "day",
    "hour",
    "minute",
    "second",
    "millisecond",
    "isoWeekYear",
    "isoWeek",
    "isoDayOfWeek",
    "timezone",
];

/// `evaluateNumberWithDefault[AndBounds]`: `Ok(None)` for a nullish value.
fn part_number<'a>(
    args: &'a [Option<Node>],
    i: usize,
    default: i64,
    bounded: bool,
    cx: &mut Cx<'a>,
) -> Result<Option<i64>> {
    let name = DATE_FROM_PARTS_ARGS.get(i).copied().unwrap_or("");
    let Some(v) = eval_opt(args, i, cx)? else {
        return Ok(Some(default));
    };
    if v.nullish() {
        return Ok(None);
    }
    let Some(n) = v.num().and_then(Num::exact_i64) else {
        return Err(loc(
            40515,
            format!(
                "'{name}' must evaluate to an integer, found {} with value {}",
                v.type_name(),
                show(&v)
            ),
        ));
    };
    if bounded && !(-32768..=32767).contains(&n) {
        return Err(loc(
            31034,
            format!(
                "'{name}' must evaluate to a value in the range [-32768, 32767]; value {n} is not \
                 in range"
            ),
        ));
    }
    Ok(Some(n))
}

#[inline(never)]
fn date_from_parts<'a>(args: &'a [Option<Node>], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let (Some(hour), Some(minute), Some(second), Some(ms)) = (
        part_number(args, 3, 0, true, cx)?,
        part_number(args, 4, 0, true, cx)?,
        part_number(args, 5, 0, false, cx)?,
        part_number(args, 6, 0, false, cx)?,
    ) else {
        return Ok(Value::null());
    };
    let Some(tz) = time_zone(args, 10, cx)? else {
        return Ok(Value::null());
    };
    if opt(args, 0).is_some() {
        let (Some(year), Some(month), Some(day)) = (
            part_number(args, 0, 1970, false, cx)?,
            part_number(args, 1, 1, true, cx)?,
            part_number(args, 2, 1, true, cx)?,
        ) else {
            return Ok(Value::null());
        };
        if !(1..=9999).contains(&year) {
            return Err(loc(
                40523,
                format!("'year' must evaluate to an integer in the range 1 to 9999, found {year}"),
            ));
        }
        return Ok(date_value(
            tz.local_to_date(year, month, day, hour, minute, second, ms),
        ));
    }
    let (Some(iy), Some(iw), Some(id)) = (
        part_number(args, 7, 1970, false, cx)?,
        part_number(args, 8, 1, true, cx)?,
        part_number(args, 9, 1, true, cx)?,
    ) else {
        return Ok(Value::null());
    };
    if !(1..=9999).contains(&iy) {
        return Err(loc(
            31095,
            format!("'isoWeekYear' must evaluate to an integer in the range 1 to 9999, found {iy}"),
        ));
    }
    let days = datetime::days_from_iso(iy, iw, id);
    let (y, m, d) = datetime::civil_from_days(days);
    Ok(date_value(
        tz.local_to_date(y, m, d, hour, minute, second, ms),
    ))
}

#[inline(never)]
fn date_add<'a>(op: Named, args: &'a [Option<Node>], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let name = op.name();
    let start = eval_or_missing(args, 0, cx)?;
    if start.nullish() {
        return Ok(Value::null());
    }
    let unit_v = eval_or_missing(args, 1, cx)?;
    if unit_v.nullish() {
        return Ok(Value::null());
    }
    let unit = time_unit(&unit_v, name)?;
    let amount_v = eval_or_missing(args, 2, cx)?;
    if amount_v.nullish() {
        return Ok(Value::null());
    }
    let Some(tz) = time_zone(args, 3, cx)? else {
        return Ok(Value::null());
    };
    if !coercible_to_date(&start) {
        return Err(loc(
            5166403,
            format!("{name} requires startDate to be convertible to a date"),
        ));
    }
    let Some(amount) = amount_v.num().and_then(Num::exact_i64) else {
        return Err(loc(
            5166405,
            format!("{name} expects integer amount of time units"),
        ));
    };
    let date = coerce_to_date(&start)?;
    let amount = if op == Named::DateSubtract {
        if amount == i64::MIN {
            return Err(loc(
                6045000,
                format!("invalid $dateSubtract 'amount' parameter value: {amount}"),
            ));
        }
        -amount
    } else {
        amount
    };
    Ok(date_value(datetime::date_add(date, unit, amount, &tz)?))
}

fn convert_date(v: &Value<'_>, op: &str, param: &str) -> Result<i64> {
    if !coercible_to_date(v) {
        return Err(loc(
            5166307,
            format!(
                "{op} requires '{param}' to be a date, but got {}",
                v.type_name()
            ),
        ));
    }
    coerce_to_date(v)
}

#[inline(never)]
fn date_diff<'a>(args: &'a [Option<Node>], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let start = eval_or_missing(args, 0, cx)?;
    if start.nullish() {
        return Ok(Value::null());
    }
    let end = eval_or_missing(args, 1, cx)?;
    if end.nullish() {
        return Ok(Value::null());
    }
    let unit_v = eval_or_missing(args, 2, cx)?;
    if unit_v.nullish() {
        return Ok(Value::null());
    }
    let unit = time_unit(&unit_v, "$dateDiff")?;
    let mut start_of_week = datetime::SUNDAY;
    if unit == Unit::Week
        && let Some(v) = eval_opt(args, 4, cx)?
    {
        if v.nullish() {
            return Ok(Value::null());
        }
        start_of_week = day_of_week(&v, "$dateDiff")?;
    }
    let tz = with_context(
        time_zone(args, 3, cx),
        "$dateDiff parameter 'timezone' value parsing failed",
    )?;
    let Some(tz) = tz else {
        return Ok(Value::null());
    };
    let s = convert_date(&start, "$dateDiff", "startDate")?;
    let e = convert_date(&end, "$dateDiff", "endDate")?;
    Ok(Value::Owned(RawBson::Int64(datetime::date_diff(
        s,
        e,
        unit,
        &tz,
        start_of_week,
    )?)))
}

#[inline(never)]
fn date_trunc<'a>(args: &'a [Option<Node>], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let date = eval_or_missing(args, 0, cx)?;
    if date.nullish() {
        return Ok(Value::null());
    }
    let mut bin = 1i64;
    if let Some(v) = eval_opt(args, 2, cx)? {
        if v.nullish() {
            return Ok(Value::null());
        }
        let Some(n) = v.num().and_then(Num::exact_i64) else {
            return Err(loc(
                5439017,
                format!(
                    "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '{}' of \
                     type {}",
                    show(&v),
                    v.type_name()
                ),
            ));
        };
        if n <= 0 {
            return Err(loc(
                5439018,
                format!("$dateTrunc requires 'binSize' to be greater than 0, but got value {n}"),
            ));
        }
        bin = n;
    }
    let unit_v = eval_or_missing(args, 1, cx)?;
    if unit_v.nullish() {
        return Ok(Value::null());
    }
    let unit = time_unit(&unit_v, "$dateTrunc")?;
    let mut start_of_week = datetime::SUNDAY;
    if unit == Unit::Week
        && let Some(v) = eval_opt(args, 4, cx)?
    {
        if v.nullish() {
            return Ok(Value::null());
        }
        start_of_week = day_of_week(&v, "$dateTrunc")?;
    }
    let tz = with_context(
        time_zone(args, 3, cx),
        "$dateTrunc parameter 'timezone' value parsing failed",
    )?;
    let Some(tz) = tz else {
        return Ok(Value::null());
    };
    let d = convert_date(&date, "$dateTrunc", "date")?;
    Ok(date_value(datetime::date_trunc(
        d,
        unit,
        bin,
        &tz,
        start_of_week,
    )?))
}

// ---------------------------------------------------------------------------------------------
// Fields
// ---------------------------------------------------------------------------------------------

#[inline(never)]
fn get_field<'a>(args: &'a [Option<Node>], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let field = eval_or_missing(args, 0, cx)?;
    let input = eval_or_missing(args, 1, cx)?;
    if input.nullish() {
        return Ok(if matches!(input, Value::Missing) {
            Value::Missing
        } else {
            Value::null()
        });
    }
    let Some(RawBsonRef::Document(d)) = input.get() else {
        // Not an object: missing.
        return Ok(Value::Missing);
    };
    let Some(RawBsonRef::String(name)) = field.get() else {
        return Ok(Value::Missing);
    };
    let found = d
        .iter()
        .map_while(|e| e.ok())
        .find(|(k, _)| k.as_str() == name)
        .map(|(_, v)| Value::Owned(RawBson::from(v)));
    Ok(found.unwrap_or(Value::Missing))
}

#[inline(never)]
fn set_field<'a>(op: Named, args: &'a [Option<Node>], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let name = op.name();
    let field = eval_or_missing(args, 0, cx)?;
    let input = eval_or_missing(args, 1, cx)?;
    if input.nullish() {
        return Ok(Value::null());
    }
    let Some(RawBsonRef::Document(d)) = input.get() else {
        return Err(loc(
            4161105,
            format!(
                "{name} requires 'input' to evaluate to type Object, but got {}",
                input.type_name()
            ),
        ));
    };
    let Some(RawBsonRef::String(target)) = field.get() else {
        return Ok(input);
    };
    let value = if op == Named::UnsetField {
        Value::Missing
    } else {
        eval_or_missing(args, 2, cx)?
    };
    let key = super::eval::key(target)?;
    let mut out = RawDocumentBuf::new();
    let mut placed = false;
    for el in d.iter() {
        let Ok((k, v)) = el else { break };
        if k.as_str() == target {
            placed = true;
            if let Some(nv) = value.get() {
                out.append(key, nv);
            }
        } else {
            out.append(k, v);
        }
    }
    if !placed && let Some(nv) = value.get() {
        out.append(key, nv);
    }
    Ok(Value::Owned(RawBson::Document(out)))
}

#[inline(never)]
fn zip<'a>(
    longest: bool,
    inputs: usize,
    args: &'a [Option<Node>],
    cx: &mut Cx<'a>,
) -> Result<Value<'a>> {
    let mut arrays: Vec<Vec<Value<'a>>> = Vec::with_capacity(inputs);
    for i in 0..inputs {
        let v = eval_or_missing(args, i, cx)?;
        if v.nullish() {
            return Ok(Value::null());
        }
        if !v.is_array() {
            return Err(loc(
                34468,
                format!("$zip found a non-array expression in input: {}", show(&v)),
            ));
        }
        arrays.push(elements(&v).into_iter().map(Value::into_static).collect());
    }
    let min = arrays.iter().map(Vec::len).min().unwrap_or(0);
    let max = arrays.iter().map(Vec::len).max().unwrap_or(0);
    let mut defaults: Vec<Value<'a>> = vec![Value::null(); inputs];
    if min != max {
        for (i, slot) in defaults.iter_mut().enumerate() {
            if let Some(n) = opt(args, inputs + i) {
                *slot = eval(n, cx)?.into_static();
            }
        }
    }
    let len = if longest { max } else { min };
    let mut out = RawArrayBuf::new();
    for row in 0..len {
        let mut inner = RawArrayBuf::new();
        for (i, a) in arrays.iter().enumerate() {
            let v = a.get(row).or_else(|| defaults.get(i));
            match v.and_then(Value::get) {
                Some(r) => inner.push(r),
                None => inner.push(RawBsonRef::Null),
            }
        }
        out.push(RawBson::Array(inner));
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

/// `$sortArray`.
#[inline(never)]
pub(crate) fn sort_array<'a>(
    input: &'a Node,
    by: &'a SortBy,
    cx: &mut Cx<'a>,
) -> Result<Value<'a>> {
    let v = eval(input, cx)?;
    if v.nullish() {
        return Ok(Value::null());
    }
    if !v.is_array() {
        return Err(loc(
            2942504,
            format!(
                "The input argument to $sortArray must be an array, but was of type: {}",
                v.type_name()
            ),
        ));
    }
    let mut items = elements(&v);
    if items.len() < 2 {
        return Ok(v);
    }
    match by {
        SortBy::Whole { descending } => {
            items.sort_by(|a, b| {
                let o = compare(a, b);
                if *descending { o.reverse() } else { o }
            });
        }
        SortBy::Pattern(spec) => {
            let empty = RawDocumentBuf::new();
            let mut keyed: Vec<(crate::sort::SortKey, Value<'a>)> = Vec::with_capacity(items.len());
            for item in items {
                let doc: &RawDocument = match item.get() {
                    Some(RawBsonRef::Document(d)) => d,
                    _ => &empty,
                };
                let key = spec.key(doc)?;
                keyed.push((key, item.clone()));
            }
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            items = keyed.into_iter().map(|(_, v)| v).collect();
        }
    }
    Ok(make_array(items))
}
