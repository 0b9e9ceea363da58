//! Executors: one per output field and partition, computing the field's value for each
//! document in turn (MongoDB's `WindowFunctionExec*`).
//!
//! - [`Exec::Grow`]: lower bound `unbounded`; documents up to the upper bound are added to a
//!   [`WinAcc`] once each (`WindowFunctionExecNonRemovable`).
//! - [`Exec::Slide`]: bounded lower end; values enter and leave a [`WinState`]
//!   (`WindowFunctionExecRemovable*`), so each document is evaluated once.
//! - [`Exec::Endpoint`]: `$first`, `$last`, `$shift`, `$derivative` read only the window's
//!   first and last documents.
//! - [`Exec::LinearFill`]: `$linearFill`'s interpolation between the non-null neighbours.
//!
//! Window positions ([`endpoints`]) follow `PartitionIterator::getEndpoints`: document
//! windows are offsets clamped to the partition; range windows scan the (ascending) `sortBy`
//! values from the previous window's ends, counting only numbers (dates with a `unit`):
//! lower `current` is the current document itself, a numeric end is the current value plus
//! the offset (in Decimal128, or `dateAdd` with the unit), and a current document of another
//! type fails (5429413, 5429414, 5429513).

use std::collections::VecDeque;
use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf};
use cairn_storage::compare::compare_values;
use cairn_storage::decimal::{self, Decimal};

use super::bounds::{Bounds, DocBound, RangeBound};
use super::partition::Partition;
use super::state::{WinAcc, WinState};
use crate::agg::ExecCx;
use crate::agg::accumulators::AccumulatorSpec;
use crate::error::{QueryError, Result};
use crate::expr::{ArithOp, ExprExtensions, Expression, arith};

/// How a document's input value is computed.
pub enum Input {
    /// An accumulator's input (with the `$top*`/`$bottom*` sort keys).
    Spec(AccumulatorSpec),
    /// An expression.
    Expr(Expression),
    /// `[x, y]` of `$integral`: the `sortBy` value and the input.
    Pair(Expression, Expression),
}

impl Input {
    fn eval(&self, doc: &RawDocumentBuf, ext: &ExprExtensions) -> Result<Option<RawBson>> {
        match self {
            Input::Spec(s) => s.input(doc),
            Input::Expr(e) => e.evaluate(doc, ext.variables()),
            Input::Pair(x, y) => {
                let mut a = RawArrayBuf::new();
                for e in [x, y] {
                    a.push(e.evaluate(doc, ext.variables())?.unwrap_or(RawBson::Null));
                }
                Ok(Some(RawBson::Array(a)))
            }
        }
    }
}

/// The previous window's ends (range scans resume from them).
#[derive(Debug, Default, Clone, Copy)]
pub struct Hint {
    lo: usize,
    hi: usize,
    /// The lower end is `unbounded` and was found (it never moves in a partition).
    lo_fixed: bool,
}

/// Which endpoint function.
pub enum EndKind {
    /// `$first`.
    First,
    /// `$last`.
    Last,
    /// `$shift` with its default.
    Shift(RawBson),
    /// `$derivative` per `unit` milliseconds.
    Derivative(Option<i64>),
}

/// One output field's executor for the current partition.
pub enum Exec {
    /// A growing window.
    Grow {
        /// The input.
        input: Input,
        /// The function.
        acc: Box<dyn WinAcc>,
        /// The window.
        bounds: Bounds,
        /// The next position to add.
        next: usize,
        /// Range scan state.
        hint: Hint,
    },
    /// A sliding window.
    Slide {
        /// The input.
        input: Input,
        /// The function.
        state: Box<dyn WinState>,
        /// Its value over an empty window.
        empty: Option<RawBson>,
        /// The window.
        bounds: Bounds,
        /// Positions and values in the window.
        queue: VecDeque<(usize, Option<RawBson>)>,
        /// Bytes in the queue.
        queued: usize,
        /// The next position to add.
        next: usize,
        /// Range scan state.
        hint: Hint,
    },
    /// `$first`, `$last`, `$shift`, `$derivative`.
    Endpoint {
        /// Which.
        kind: EndKind,
        /// The input.
        input: Expression,
        /// The window.
        bounds: Bounds,
        /// Range scan state.
        hint: Hint,
        /// The window's first document when the lower end is `unbounded` (it never moves).
        first: Option<(usize, Arc<RawDocumentBuf>)>,
    },
    /// `$linearFill`.
    LinearFill {
        /// The input.
        input: Expression,
        /// The previous non-null point.
        x1y1: Option<(RawBson, RawBson)>,
        /// The next non-null point, once found.
        x2y2: Option<(RawBson, RawBson)>,
        /// The previous `sortBy` value.
        last_seen: Option<RawBson>,
    },
}

/// What the executors share: the `sortBy` field (as an expression) and the variables.
pub struct Shared<'s> {
    /// `"$<first sortBy field>"`.
    pub sort: Option<&'s Expression>,
    /// The stage's expression language.
    pub ext: &'s ExprExtensions,
}

impl Shared<'_> {
    fn sort_value(&self, doc: &RawDocumentBuf) -> Result<Option<RawBson>> {
        match self.sort {
            Some(e) => e.evaluate(doc, self.ext.variables()),
            None => Ok(None),
        }
    }
}

fn type_of(v: Option<&RawBson>) -> &'static str {
    v.map_or("missing", |v| {
        cairn_storage::display::type_name(v.as_raw_bson_ref())
    })
}

fn is_number(v: Option<&RawBson>) -> bool {
    matches!(
        v,
        Some(RawBson::Int32(_) | RawBson::Int64(_) | RawBson::Double(_) | RawBson::Decimal128(_))
    )
}

fn less(a: Option<&RawBson>, b: &RawBson) -> bool {
    let a = a.map_or(RawBsonRef::Undefined, RawBson::as_raw_bson_ref);
    compare_values(a, b.as_raw_bson_ref()) == std::cmp::Ordering::Less
}

fn to_dec(v: &RawBson) -> Decimal {
    match v {
        RawBson::Int32(i) => decimal::from_i64(i64::from(*i)),
        RawBson::Int64(l) => decimal::from_i64(*l),
        RawBson::Double(d) => decimal::from_f64(*d, 34),
        RawBson::Decimal128(d) => Decimal::from_decimal128(*d),
        _ => decimal::ZERO,
    }
}

fn as_i64(v: &RawBson) -> i64 {
    match v {
        RawBson::Int32(i) => i64::from(*i),
        RawBson::Int64(l) => *l,
        RawBson::Double(d) => *d as i64,
        RawBson::Decimal128(d) => {
            decimal::to_i64(Decimal::from_decimal128(*d), decimal::Rounding::HalfEven).unwrap_or(0)
        }
        _ => 0,
    }
}

/// The window of the document at `cur`, as inclusive positions; `None` when it is empty.
pub fn endpoints(
    bounds: &Bounds,
    sh: &Shared<'_>,
    part: &mut Partition,
    cur: usize,
    hint: &mut Hint,
    cx: &ExecCx<'_>,
) -> Result<Option<(usize, usize)>> {
    match bounds {
        Bounds::Documents(lower, upper) => {
            let lo = match lower {
                DocBound::Unbounded => 0,
                DocBound::Current => cur,
                DocBound::At(k) => usize::try_from(cur as i64 + k).unwrap_or(0),
            };
            let hi = match upper {
                DocBound::Unbounded => match part.last(cx)? {
                    Some(l) => l,
                    None => return Ok(None),
                },
                DocBound::Current => cur,
                DocBound::At(k) => {
                    let Ok(h) = usize::try_from(cur as i64 + k) else {
                        return Ok(None);
                    };
                    if part.get(h, cx)?.is_some() {
                        h
                    } else {
                        match part.last(cx)? {
                            Some(l) => l,
                            None => return Ok(None),
                        }
                    }
                }
            };
            Ok((lo <= hi).then_some((lo, hi)))
        }
        Bounds::Range { lower, upper, unit } => {
            range_endpoints(lower, upper, unit.as_deref(), sh, part, cur, hint, cx)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn range_endpoints(
    lower: &RangeBound,
    upper: &RangeBound,
    unit: Option<&str>,
    sh: &Shared<'_>,
    part: &mut Partition,
    cur: usize,
    hint: &mut Hint,
    cx: &ExecCx<'_>,
) -> Result<Option<(usize, usize)>> {
    let Some(doc) = part.get(cur, cx)? else {
        return Ok(None);
    };
    let base = sh.sort_value(&doc)?;
    match (unit, base.as_ref()) {
        (Some(_), Some(RawBson::DateTime(_))) => {}
        (Some(_), other) => {
            return Err(QueryError::Location(
                5429513,
                format!(
                    "Invalid range: Expected the sortBy field to be a Date, but it was {}",
                    type_of(other)
                ),
            ));
        }
        (None, Some(RawBson::DateTime(_))) => {
            return Err(QueryError::Location(
                5429413,
                "Invalid range: For windows that involve date or time ranges, a unit must be \
                 provided."
                    .into(),
            ));
        }
        (None, other) if !is_number(other) => {
            return Err(QueryError::Location(
                5429414,
                format!(
                    "Invalid range: Expected the sortBy field to be a number, but it was {}",
                    type_of(other)
                ),
            ));
        }
        _ => {}
    }
    let Some(base) = base else {
        return Ok(None);
    };
    let expected = |v: Option<&RawBson>| match unit {
        Some(_) => matches!(v, Some(RawBson::DateTime(_))),
        None => is_number(v),
    };
    let add = |delta: &RawBson| -> Result<RawBson> {
        match unit {
            Some(u) => {
                let RawBson::DateTime(d) = &base else {
                    return Ok(RawBson::Null);
                };
                let ms = crate::expr::date_add_utc(d.timestamp_millis(), u, as_i64(delta))?;
                Ok(RawBson::DateTime(bson::DateTime::from_millis(ms)))
            }
            None => Ok(RawBson::Decimal128(decimal::encode(decimal::add(
                to_dec(&base),
                to_dec(delta),
            )))),
        }
    };
    let start_lo = hint.lo.max(part.base());
    let lo = match lower {
        RangeBound::Current => cur,
        RangeBound::Unbounded if hint.lo_fixed => hint.lo,
        RangeBound::Unbounded => {
            let mut i = start_lo;
            loop {
                let Some(d) = part.get(i, cx)? else {
                    return Ok(None);
                };
                if expected(sh.sort_value(&d)?.as_ref()) {
                    break;
                }
                i += 1;
            }
            hint.lo_fixed = true;
            i
        }
        RangeBound::At(delta) => {
            let threshold = add(delta)?;
            let mut i = start_lo;
            loop {
                let Some(d) = part.get(i, cx)? else {
                    return Ok(None);
                };
                let v = sh.sort_value(&d)?;
                if !less(v.as_ref(), &threshold) {
                    if expected(v.as_ref()) {
                        break;
                    }
                    return Ok(None);
                }
                i += 1;
            }
            i
        }
    };
    let hi = match upper {
        RangeBound::Current => cur,
        RangeBound::Unbounded => {
            let mut i = cur.max(lo).max(hint.hi);
            loop {
                let Some(d) = part.get(i, cx)? else {
                    break i.checked_sub(1);
                };
                if !expected(sh.sort_value(&d)?.as_ref()) {
                    break i.checked_sub(1);
                }
                i += 1;
            }
            .unwrap_or(0)
        }
        RangeBound::At(delta) => {
            let threshold = add(delta)?;
            let mut i = lo.max(hint.hi);
            let found = loop {
                let Some(d) = part.get(i, cx)? else {
                    break i.checked_sub(1);
                };
                let v = sh.sort_value(&d)?;
                let t = threshold.as_raw_bson_ref();
                let vv = v
                    .as_ref()
                    .map_or(RawBsonRef::Undefined, RawBson::as_raw_bson_ref);
                if compare_values(t, vv) == std::cmp::Ordering::Less {
                    break i.checked_sub(1);
                }
                i += 1;
            };
            match found {
                Some(h) => h,
                None => return Ok(None),
            }
        }
    };
    hint.lo = lo;
    hint.hi = hi;
    Ok((lo <= hi).then_some((lo, hi)))
}

/// The lowest position the next document's window may read.
fn keep_from(bounds: &Bounds, hint: &Hint, next_cur: usize, first_cached: bool) -> usize {
    let mut m = next_cur;
    match bounds {
        Bounds::Documents(lo, hi) => {
            for (b, is_lower) in [(lo, true), (hi, false)] {
                if let DocBound::At(k) = b {
                    if is_lower && first_cached {
                        continue;
                    }
                    m = m.min(usize::try_from(next_cur as i64 + k).unwrap_or(0));
                }
            }
        }
        Bounds::Range { lower, upper, .. } => {
            let fixed = *lower == RangeBound::Unbounded && (hint.lo_fixed || first_cached);
            if !fixed {
                m = m.min(hint.lo);
            }
            if *upper != RangeBound::Unbounded {
                m = m.min(hint.hi);
            }
        }
    }
    m
}

impl Exec {
    /// The value of this field for the document at `cur` (`None` = missing).
    pub fn value(
        &mut self,
        sh: &Shared<'_>,
        part: &mut Partition,
        cur: usize,
        cx: &ExecCx<'_>,
    ) -> Result<Option<RawBson>> {
        match self {
            Exec::Grow {
                input,
                acc,
                bounds,
                next,
                hint,
            } => {
                if let Some((lo, hi)) = endpoints(bounds, sh, part, cur, hint, cx)? {
                    if *next < lo {
                        *next = lo;
                    }
                    while *next <= hi {
                        let Some(d) = part.get(*next, cx)? else {
                            break;
                        };
                        acc.add(input.eval(&d, sh.ext)?.as_ref())?;
                        *next += 1;
                    }
                }
                acc.value()
            }
            Exec::Slide {
                input,
                state,
                empty,
                bounds,
                queue,
                queued,
                next,
                hint,
            } => {
                let Some((lo, hi)) = endpoints(bounds, sh, part, cur, hint, cx)? else {
                    return Ok(empty.clone());
                };
                if *next < lo {
                    *next = lo;
                }
                while *next <= hi {
                    let Some(d) = part.get(*next, cx)? else {
                        break;
                    };
                    let v = input.eval(&d, sh.ext)?;
                    state.add(v.as_ref())?;
                    *queued += v.as_ref().map_or(0, crate::agg::accumulators::bson_size) + 24;
                    queue.push_back((*next, v));
                    *next += 1;
                }
                while queue.front().is_some_and(|(i, _)| *i < lo) {
                    if let Some((_, v)) = queue.pop_front() {
                        *queued = queued.saturating_sub(
                            v.as_ref().map_or(0, crate::agg::accumulators::bson_size) + 24,
                        );
                        state.remove(v.as_ref())?;
                    }
                }
                state.value()
            }
            Exec::Endpoint {
                kind,
                input,
                bounds,
                hint,
                first,
            } => {
                let default = match kind {
                    EndKind::Shift(d) => Some(d.clone()),
                    _ => Some(RawBson::Null),
                };
                let Some((lo, hi)) = endpoints(bounds, sh, part, cur, hint, cx)? else {
                    return Ok(default);
                };
                let lower_unbounded = bounds.lower_unbounded();
                let mut doc_at = |i: usize, part: &mut Partition| -> Result<Arc<RawDocumentBuf>> {
                    if let Some((fi, d)) = first.as_ref()
                        && *fi == i
                    {
                        return Ok(Arc::clone(d));
                    }
                    let d = part.get(i, cx)?.ok_or_else(|| {
                        QueryError::BadValue("$setWindowFields window outside the partition".into())
                    })?;
                    if lower_unbounded && i == lo && first.is_none() {
                        *first = Some((i, Arc::clone(&d)));
                    }
                    Ok(d)
                };
                let vars = sh.ext.variables();
                match kind {
                    EndKind::First | EndKind::Shift(_) => {
                        let d = doc_at(lo, part)?;
                        input.evaluate(&d, vars)
                    }
                    EndKind::Last => {
                        let d = doc_at(hi, part)?;
                        input.evaluate(&d, vars)
                    }
                    EndKind::Derivative(unit) => {
                        let left = doc_at(lo, part)?;
                        let right = doc_at(hi, part)?;
                        derivative(sh, input, &left, &right, *unit)
                    }
                }
            }
            Exec::LinearFill {
                input,
                x1y1,
                x2y2,
                last_seen,
            } => linear_fill(sh, input, x1y1, x2y2, last_seen, part, cur, cx),
        }
    }

    /// The lowest position this executor may read for documents after `next_cur - 1`.
    pub fn keep_from(&self, next_cur: usize) -> usize {
        match self {
            Exec::Grow {
                bounds, next, hint, ..
            }
            | Exec::Slide {
                bounds, next, hint, ..
            } => (*next).min(keep_from(bounds, hint, next_cur, false)),
            Exec::Endpoint {
                bounds,
                hint,
                first,
                ..
            } => keep_from(bounds, hint, next_cur, first.is_some()),
            Exec::LinearFill { .. } => next_cur,
        }
    }

    /// Approximate bytes held.
    pub fn memory(&self) -> usize {
        match self {
            Exec::Grow { acc, .. } => acc.memory(),
            Exec::Slide { state, queued, .. } => state.memory() + *queued,
            Exec::Endpoint { first, .. } => first.as_ref().map_or(0, |(_, d)| d.as_bytes().len()),
            Exec::LinearFill { .. } => 128,
        }
    }
}

fn derivative(
    sh: &Shared<'_>,
    input: &Expression,
    left: &RawDocumentBuf,
    right: &RawDocumentBuf,
    unit: Option<i64>,
) -> Result<Option<RawBson>> {
    let lt = sh.sort_value(left)?;
    let rt = sh.sort_value(right)?;
    let is_date = |v: &Option<RawBson>| matches!(v, Some(RawBson::DateTime(_)));
    if unit.is_some() {
        if !(is_date(&lt) && is_date(&rt)) {
            return Err(QueryError::Location(
                5624900,
                "$derivative with 'unit' expects the sortBy field to be a Date".into(),
            ));
        }
    } else {
        if is_date(&lt) || is_date(&rt) {
            return Err(QueryError::Location(
                5624901,
                "$derivative where the sortBy is a Date requires an 'unit'".into(),
            ));
        }
        if !(is_number(lt.as_ref()) && is_number(rt.as_ref())) {
            return Err(QueryError::Location(
                5624902,
                "$derivative (with no 'unit') expects the sortBy field to be numeric".into(),
            ));
        }
    }
    fn r(v: &Option<RawBson>) -> Option<RawBsonRef<'_>> {
        v.as_ref().map(RawBson::as_raw_bson_ref)
    }
    let run = arith(ArithOp::Subtract, r(&rt), r(&lt))?;
    let vars = sh.ext.variables();
    let ry = input.evaluate(right, vars)?;
    let ly = input.evaluate(left, vars)?;
    let rise = arith(ArithOp::Subtract, r(&ry), r(&ly))?;
    if matches!(rise, RawBson::Null | RawBson::Undefined) {
        return Err(QueryError::Location(
            5624903,
            "$derivative input must not be null or missing".into(),
        ));
    }
    let result = match arith(
        ArithOp::Divide,
        Some(rise.as_raw_bson_ref()),
        Some(run.as_raw_bson_ref()),
    ) {
        Err(QueryError::BadValue(_)) => return Ok(Some(RawBson::Null)),
        other => other?,
    };
    Ok(Some(match unit {
        Some(ms) => arith(
            ArithOp::Multiply,
            Some(result.as_raw_bson_ref()),
            Some(RawBsonRef::Int64(ms)),
        )?,
        None => result,
    }))
}

fn nullish(v: Option<&RawBson>) -> bool {
    matches!(v, None | Some(RawBson::Null) | Some(RawBson::Undefined))
}

fn date_like(v: Option<&RawBson>) -> bool {
    matches!(
        v,
        Some(RawBson::DateTime(_) | RawBson::Timestamp(_) | RawBson::ObjectId(_))
    )
}

#[allow(clippy::too_many_arguments)]
fn linear_fill(
    sh: &Shared<'_>,
    input: &Expression,
    x1y1: &mut Option<(RawBson, RawBson)>,
    x2y2: &mut Option<(RawBson, RawBson)>,
    last_seen: &mut Option<RawBson>,
    part: &mut Partition,
    cur: usize,
    cx: &ExecCx<'_>,
) -> Result<Option<RawBson>> {
    let Some(doc) = part.get(cur, cx)? else {
        return Ok(Some(RawBson::Null));
    };
    let vars = sh.ext.variables();
    let fill = input.evaluate(&doc, vars)?;
    if !(is_number(fill.as_ref()) || nullish(fill.as_ref())) {
        return Err(QueryError::TypeMismatch(format!(
            "Value to be filled must be numeric or nullish, but found {}",
            type_of(fill.as_ref())
        )));
    }
    let x = sh.sort_value(&doc)?;
    if !(is_number(x.as_ref()) || date_like(x.as_ref())) {
        return Err(QueryError::TypeMismatch(format!(
            "Value of the sortBy field must be numeric or a date, but found {}",
            type_of(x.as_ref())
        )));
    }
    let xv = x.clone().unwrap_or(RawBson::Null);
    if let Some(prev) = last_seen.as_ref() {
        if compare_values(prev.as_raw_bson_ref(), xv.as_raw_bson_ref()) == std::cmp::Ordering::Equal
        {
            return Err(QueryError::Location(
                6050106,
                "There can be no repeated values in the sort field".into(),
            ));
        }
        let consistent = (date_like(Some(prev)) && date_like(Some(&xv)))
            || (is_number(Some(prev)) && is_number(Some(&xv)));
        if !consistent {
            return Err(QueryError::TypeMismatch(format!(
                "Conflicting sort value types, previously received type {}, but found {}",
                type_of(Some(prev)),
                type_of(Some(&xv))
            )));
        }
    }
    *last_seen = Some(xv.clone());
    if let Some(y) = fill.filter(|f| !nullish(Some(f))) {
        *x1y1 = Some(x2y2.take().unwrap_or((xv, y.clone())));
        return Ok(Some(y));
    }
    let Some((x1, y1)) = x1y1.clone() else {
        return Ok(Some(RawBson::Null));
    };
    if x2y2.is_none() {
        let mut i = cur + 1;
        while let Some(d) = part.get(i, cx)? {
            let f = input.evaluate(&d, vars)?;
            if !nullish(f.as_ref()) {
                let s = sh.sort_value(&d)?;
                if !nullish(s.as_ref())
                    && let (Some(s), Some(f)) = (s, f)
                {
                    *x2y2 = Some((s, f));
                    break;
                }
            }
            i += 1;
        }
    }
    let Some((x2, y2)) = x2y2.clone() else {
        return Ok(Some(RawBson::Null));
    };
    let op = |o: ArithOp, a: &RawBson, b: &RawBson| {
        arith(o, Some(a.as_raw_bson_ref()), Some(b.as_raw_bson_ref()))
    };
    let dy = op(ArithOp::Subtract, &y2, &y1)?;
    let dx = op(ArithOp::Subtract, &x2, &x1)?;
    let slope = op(ArithOp::Divide, &dy, &dx)?;
    let off = op(ArithOp::Subtract, &xv, &x1)?;
    let inc = op(ArithOp::Multiply, &off, &slope)?;
    Ok(Some(op(ArithOp::Add, &y1, &inc)?))
}
