//! Window bounds (`window: {documents: [lo, hi]}` / `{range: [lo, hi], unit}`), parsed as
//! MongoDB's `WindowBounds::parse` does (window_bounds.cpp): `"unbounded"`, `"current"` or a
//! constant expression; document bounds are 32-bit integers, range bounds numbers (integers
//! with a `unit`); the lower bound may not exceed the upper (5339900); bounds other than
//! `[unbounded, unbounded]` need a `sortBy` (5339901), range bounds a single ascending
//! `sortBy` field (5339902, 8947401). Every other malformation is FailedToParse.

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf};

use crate::error::{QueryError, Result};
use crate::expr::ExprExtensions;
use crate::sort::SortSpec;

/// One end of a document window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocBound {
    /// The partition's first (or last) document.
    Unbounded,
    /// The current document.
    Current,
    /// An offset from the current document.
    At(i64),
}

/// One end of a range window.
#[derive(Debug, Clone, PartialEq)]
pub enum RangeBound {
    /// No limit.
    Unbounded,
    /// The current document itself.
    Current,
    /// The current document's `sortBy` value plus this number (or this many `unit`s).
    At(RawBson),
}

/// A window.
#[derive(Debug, Clone, PartialEq)]
pub enum Bounds {
    /// `documents: [lower, upper]`.
    Documents(DocBound, DocBound),
    /// `range: [lower, upper]` with an optional time `unit`.
    Range {
        /// Lower end.
        lower: RangeBound,
        /// Upper end.
        upper: RangeBound,
        /// The time unit (`sortBy` values are then dates).
        unit: Option<String>,
    },
}

fn fail(msg: impl Into<String>) -> QueryError {
    QueryError::FailedToParse(msg.into())
}

/// `Value::integral()`: a number with an integral value that fits 32 bits.
fn integral(v: RawBsonRef<'_>) -> Option<i64> {
    let f = match v {
        RawBsonRef::Int32(i) => return Some(i64::from(i)),
        RawBsonRef::Int64(i) => return i32::try_from(i).ok().map(i64::from),
        RawBsonRef::Double(d) => d,
        RawBsonRef::Decimal128(d) => {
            cairn_storage::decimal::to_f64(cairn_storage::decimal::Decimal::from_decimal128(d))
        }
        _ => return None,
    };
    if f.fract() == 0.0 && f >= f64::from(i32::MIN) && f <= f64::from(i32::MAX) {
        Some(f as i64)
    } else {
        None
    }
}

fn numeric(v: RawBsonRef<'_>) -> bool {
    matches!(
        v,
        RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_)
    )
}

/// `"unbounded"`, `"current"`, or a constant expression handed to `num`.
enum Parsed<T> {
    Unbounded,
    Current,
    At(T),
}

fn parse_bound<T>(
    v: RawBsonRef<'_>,
    ext: &ExprExtensions,
    num: impl Fn(Option<&RawBson>) -> Result<T>,
) -> Result<Parsed<T>> {
    if let RawBsonRef::String(s) = v {
        return match s {
            "unbounded" => Ok(Parsed::Unbounded),
            "current" => Ok(Parsed::Current),
            _ => Err(fail(
                "Window bounds must be 'unbounded', 'current', or a number.",
            )),
        };
    }
    let e = ext.parse_expression(v)?;
    let Some(c) = e.constant() else {
        return Err(fail("Window bounds expression must be a constant."));
    };
    Ok(Parsed::At(num(c)?))
}

fn unpack(v: RawBsonRef<'_>) -> Result<(RawBsonRef<'_>, RawBsonRef<'_>)> {
    let bad = || {
        fail(format!(
            "Window bounds must be a 2-element array: {}",
            cairn_storage::display::value(v)
        ))
    };
    let RawBsonRef::Array(a) = v else {
        return Err(bad());
    };
    let items: Vec<RawBsonRef<'_>> = a.into_iter().flatten().collect();
    match items.as_slice() {
        [lo, hi] => Ok((*lo, *hi)),
        _ => Err(bad()),
    }
}

fn backwards(lo: &str, hi: &str) -> QueryError {
    QueryError::Location(
        5339900,
        format!("Lower bound must not exceed upper bound: [{lo}, {hi}]"),
    )
}

impl Bounds {
    /// `[unbounded, unbounded]`, the default window.
    pub fn unbounded() -> Bounds {
        Bounds::Documents(DocBound::Unbounded, DocBound::Unbounded)
    }

    /// `[unbounded, current]` (the implicit window of `$rank`, `$locf`, …).
    pub fn running() -> Bounds {
        Bounds::Documents(DocBound::Unbounded, DocBound::Current)
    }

    /// Whether the lower end is unbounded (the window then only grows).
    pub fn lower_unbounded(&self) -> bool {
        match self {
            Bounds::Documents(lo, _) => *lo == DocBound::Unbounded,
            Bounds::Range { lower, .. } => *lower == RangeBound::Unbounded,
        }
    }

    /// Parses the `window` field's value.
    pub fn parse(
        v: RawBsonRef<'_>,
        sort: Option<&SortSpec>,
        ext: &ExprExtensions,
    ) -> Result<Bounds> {
        let RawBsonRef::Document(d) = v else {
            return Err(fail("'window' field must be an object"));
        };
        let get = |name: &str| d.get(name).ok().flatten();
        let (documents, range, unit) = (get("documents"), get("range"), get("unit"));
        let nfields = d.iter().count();
        if documents.is_some() && range.is_some() {
            return Err(fail(
                "Window bounds can specify either 'documents' or 'unit', not both.",
            ));
        }
        if range.is_none() && unit.is_some() {
            return Err(fail(
                "Window bounds can only specify 'unit' with range-based bounds.",
            ));
        }
        if let Some(docs) = documents {
            if nfields != 1 {
                return Err(fail(
                    "'window' field that specifies documents cannot have other fields",
                ));
            }
            let (lo, hi) = unpack(docs)?;
            let int = |c: Option<&RawBson>| {
                c.and_then(|c| integral(c.as_raw_bson_ref()))
                    .ok_or_else(|| fail("Numeric document-based bounds must be an integer"))
            };
            let conv = |p: Parsed<i64>| match p {
                Parsed::Unbounded => DocBound::Unbounded,
                Parsed::Current => DocBound::Current,
                Parsed::At(n) => DocBound::At(n),
            };
            let lower = conv(parse_bound(lo, ext, int)?);
            let upper = conv(parse_bound(hi, ext, int)?);
            let num = |b: DocBound| match b {
                DocBound::Current => Some(0),
                DocBound::At(n) => Some(n),
                DocBound::Unbounded => None,
            };
            if let (Some(l), Some(u)) = (num(lower), num(upper))
                && l > u
            {
                return Err(backwards(&l.to_string(), &u.to_string()));
            }
            let b = Bounds::Documents(lower, upper);
            if sort.is_none() && !(lower == DocBound::Unbounded && upper == DocBound::Unbounded) {
                return Err(QueryError::Location(
                    5339901,
                    "Document-based bounds require a sortBy".into(),
                ));
            }
            return Ok(b);
        }
        let Some(range) = range else {
            if nfields != 0 {
                return Err(fail(
                    "'window' field can only contain 'documents' as the only argument or 'range' \
                     with an optional 'unit' field",
                ));
            }
            return Ok(Bounds::unbounded());
        };
        let (lo, hi) = unpack(range)?;
        let (lower, upper, unit) = match unit {
            Some(u) => {
                if nfields != 2 {
                    return Err(fail(
                        "'window' field that specifies unit cannot have other fields besides \
                         'range'",
                    ));
                }
                let RawBsonRef::String(u) = u else {
                    return Err(fail("'unit' must be a string"));
                };
                let int = |c: Option<&RawBson>| match c {
                    Some(c) if integral(c.as_raw_bson_ref()).is_some() => Ok(c.clone()),
                    _ => Err(fail("With 'unit', range-based bounds must be an integer")),
                };
                let lower = parse_bound(lo, ext, int)?;
                let upper = parse_bound(hi, ext, int)?;
                check_range_forward(&lower, &upper)?;
                if !crate::expr::is_time_unit(u) {
                    return Err(fail(format!("unknown time unit value: {u}")));
                }
                (lower, upper, Some(u.to_string()))
            }
            None => {
                if nfields != 1 {
                    return Err(fail(
                        "'window' field that specifies range cannot have other fields besides \
                         'unit'",
                    ));
                }
                let number = |c: Option<&RawBson>| match c {
                    Some(c) if numeric(c.as_raw_bson_ref()) => Ok(c.clone()),
                    _ => Err(fail("Range-based bounds expression must be a number")),
                };
                let lower = parse_bound(lo, ext, number)?;
                let upper = parse_bound(hi, ext, number)?;
                check_range_forward(&lower, &upper)?;
                (lower, upper, None)
            }
        };
        let single = sort.filter(|s| s.fields().len() == 1);
        let Some(single) = single else {
            return Err(QueryError::Location(
                5339902,
                "Range-based bounds require sortBy a single field".into(),
            ));
        };
        if !single.fields().iter().all(|f| f.ascending) {
            return Err(QueryError::Location(
                8947401,
                "Range-based bounds require an ascending sortBy".into(),
            ));
        }
        let conv = |p: Parsed<RawBson>| match p {
            Parsed::Unbounded => RangeBound::Unbounded,
            Parsed::Current => RangeBound::Current,
            Parsed::At(v) => RangeBound::At(v),
        };
        Ok(Bounds::Range {
            lower: conv(lower),
            upper: conv(upper),
            unit,
        })
    }

    /// The bounds as explain shows them (`{documents: [...]}`, `{range: [...], unit}`).
    pub fn serialize(&self) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        match self {
            Bounds::Documents(lo, hi) => {
                let mut a = RawArrayBuf::new();
                for b in [lo, hi] {
                    a.push(match b {
                        DocBound::Unbounded => RawBson::String("unbounded".into()),
                        DocBound::Current => RawBson::String("current".into()),
                        DocBound::At(n) => RawBson::Int64(*n),
                    });
                }
                d.append(bson::raw::cstr!("documents"), a);
            }
            Bounds::Range { lower, upper, unit } => {
                let mut a = RawArrayBuf::new();
                for b in [lower, upper] {
                    a.push(match b {
                        RangeBound::Unbounded => RawBson::String("unbounded".into()),
                        RangeBound::Current => RawBson::String("current".into()),
                        RangeBound::At(v) => v.clone(),
                    });
                }
                d.append(bson::raw::cstr!("range"), a);
                if let Some(u) = unit {
                    d.append(bson::raw::cstr!("unit"), u.as_str());
                }
            }
        }
        d
    }
}

fn check_range_forward(lower: &Parsed<RawBson>, upper: &Parsed<RawBson>) -> Result<()> {
    let zero = RawBson::Int32(0);
    let as_num = |p: &Parsed<RawBson>| match p {
        Parsed::Current => Some(zero.clone()),
        Parsed::At(v) => Some(v.clone()),
        Parsed::Unbounded => None,
    };
    if let (Some(l), Some(u)) = (as_num(lower), as_num(upper))
        && cairn_storage::compare::compare_values(l.as_raw_bson_ref(), u.as_raw_bson_ref())
            == std::cmp::Ordering::Greater
    {
        return Err(backwards(
            &cairn_storage::display::value(l.as_raw_bson_ref()),
            &cairn_storage::display::value(u.as_raw_bson_ref()),
        ));
    }
    Ok(())
}

/// Milliseconds in one `unit` for `$derivative`/`$integral` (week or smaller: 5490710
/// otherwise; FailedToParse for unknown units).
pub fn unit_millis(arg: RawBsonRef<'_>) -> Result<(String, i64)> {
    let RawBsonRef::String(u) = arg else {
        return Err(fail(format!(
            "unit' must be a string, but got {}",
            cairn_storage::display::type_name(arg)
        )));
    };
    let ms = match u {
        "week" => 604_800_000,
        "day" => 86_400_000,
        "hour" => 3_600_000,
        "minute" => 60_000,
        "second" => 1000,
        "millisecond" => 1,
        "year" | "quarter" | "month" => {
            return Err(QueryError::Location(
                5490710,
                "unit must be 'week' or smaller".into(),
            ));
        }
        other => return Err(fail(format!("unknown time unit value: {other}"))),
    };
    Ok((u.to_string(), ms))
}
