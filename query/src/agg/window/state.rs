//! The running state of one window function over one partition.
//!
//! - [`WinAcc`]: a window that only grows (lower bound `unbounded`): documents are added,
//!   never removed. Accumulators of `$group` ([`AccAdapter`] over
//!   [`crate::agg::accumulators`]) and the window-only ones that only grow (`$rank`,
//!   `$denseRank`, `$documentNumber`, `$expMovingAvg`, `$locf`) implement it.
//! - [`WinState`]: a sliding window: values enter at the top and leave at the bottom in the
//!   order they entered (MongoDB's `WindowFunctionState`). `$sum`/`$count`/`$avg` keep a
//!   removable sum whose result type narrows back once wider inputs have left the window
//!   (window_function_sum.cpp); `$stdDevPop`/`$stdDevSamp`, `$covariancePop`/
//!   `$covarianceSamp` and `$integral` update their sums incrementally; `$min`/`$max` keep an
//!   ordered multiset, `$addToSet` a counted ordered set (its result in BSON order), `$push`
//!   a queue; the others (`$firstN $lastN $minN $maxN $top $topN $bottom $bottomN $median
//!   $percentile`) recompute their accumulator over the values in the window.
//!
//! Values are `Option<RawBson>`, `None` being *missing*. Invariant: nothing here panics;
//! `memory` approximates the bytes held.

use std::collections::{BTreeMap, VecDeque};

use bson::{RawArrayBuf, RawBson, RawBsonRef};
use cairn_storage::decimal::{self, Decimal};

use crate::agg::accumulators::sum::Summation;
use crate::agg::accumulators::{Accumulator, AccumulatorSpec, bson_size, value_key};
use crate::error::{QueryError, Result};
use crate::expr::{ArithOp, arith};

/// A window that only grows.
pub trait WinAcc: Send {
    /// Adds the value of the next document.
    fn add(&mut self, v: Option<&RawBson>) -> Result<()>;
    /// The function's value over what was added (`None` = missing).
    fn value(&self) -> Result<Option<RawBson>>;
    /// Approximate bytes held.
    fn memory(&self) -> usize;
}

/// A sliding window.
pub trait WinState: Send {
    /// A value enters the window.
    fn add(&mut self, v: Option<&RawBson>) -> Result<()>;
    /// The oldest value leaves the window (`v` is that value).
    fn remove(&mut self, v: Option<&RawBson>) -> Result<()>;
    /// The function's value over the window (`None` = missing).
    fn value(&self) -> Result<Option<RawBson>>;
    /// Approximate bytes held.
    fn memory(&self) -> usize;
}

fn dec_is_inf(d: Decimal) -> bool {
    matches!(d, Decimal::Infinite { .. })
}

fn dec_inf(negative: bool) -> Decimal {
    Decimal::Infinite { negative }
}

/// The decimal as an `i64` when it is exactly an integer in range.
fn dec_exact_i64(d: Decimal) -> Option<i64> {
    let i = decimal::to_i64(d, decimal::Rounding::TowardZero)?;
    (decimal::cmp(decimal::from_i64(i), d) == Some(std::cmp::Ordering::Equal)).then_some(i)
}

fn size(v: Option<&RawBson>) -> usize {
    v.map_or(0, bson_size) + 16
}

fn nullish(v: Option<&RawBson>) -> bool {
    matches!(v, None | Some(RawBson::Null) | Some(RawBson::Undefined))
}

/// A `$group` accumulator used as a growing window function; an empty result is null.
pub struct AccAdapter(pub Box<dyn Accumulator>);

impl WinAcc for AccAdapter {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        self.0.process(v.map(RawBson::as_raw_bson_ref), false)
    }

    fn value(&self) -> Result<Option<RawBson>> {
        Ok(Some(self.0.value()?.unwrap_or(RawBson::Null)))
    }

    fn memory(&self) -> usize {
        self.0.memory()
    }
}

/// A sliding state used as a growing one (`$covariance*`, `$integral` without removals).
pub struct Grow(pub Box<dyn WinState>);

impl WinAcc for Grow {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        self.0.add(v)
    }

    fn value(&self) -> Result<Option<RawBson>> {
        self.0.value()
    }

    fn memory(&self) -> usize {
        self.0.memory()
    }
}

// ---------------------------------------------------------------------------------------------
// removable sums

/// MongoDB's `RemovableSum`: a sum of numbers added with +1 or −1, NaN and infinities counted
/// apart, and the result narrowed to the types still in the window.
#[derive(Debug, Clone, Default)]
pub struct RemovableSum {
    sum: Summation,
    pos_inf: i64,
    neg_inf: i64,
    nan: i64,
    doubles: i64,
    decimals: i64,
}

impl RemovableSum {
    fn update(&mut self, v: Option<&RawBson>, q: i64) {
        match v {
            Some(RawBson::Int32(i)) => {
                if *i == i32::MIN && q < 0 {
                    self.sum.add(RawBsonRef::Int32(i32::MAX));
                    self.sum.add(RawBsonRef::Int32(1));
                } else {
                    self.sum.add(RawBsonRef::Int32(i * q as i32));
                }
            }
            Some(RawBson::Int64(i)) => {
                if *i == i64::MIN && q < 0 {
                    self.sum.add(RawBsonRef::Int64(i64::MAX));
                    self.sum.add(RawBsonRef::Int32(1));
                } else {
                    self.sum.add(RawBsonRef::Int64(i * q));
                }
            }
            Some(RawBson::Double(d)) => {
                self.doubles += q;
                if d.is_nan() {
                    self.nan += q;
                } else if *d == f64::INFINITY {
                    self.pos_inf += q;
                } else if *d == f64::NEG_INFINITY {
                    self.neg_inf += q;
                } else {
                    self.sum.add(RawBsonRef::Double(d * q as f64));
                }
            }
            Some(RawBson::Decimal128(d)) => {
                self.decimals += q;
                let x = Decimal::from_decimal128(*d);
                if decimal::is_nan(x) {
                    self.nan += q;
                } else if dec_is_inf(x) {
                    if decimal::is_negative(x) {
                        self.neg_inf += q;
                    } else {
                        self.pos_inf += q;
                    }
                } else {
                    let x = if q < 0 { decimal::negate(x) } else { x };
                    self.sum.add(RawBsonRef::Decimal128(decimal::encode(x)));
                }
            }
            _ => {}
        }
    }

    /// The narrowed total.
    pub fn total(&self) -> RawBson {
        let special = |d: f64, dec: Decimal| {
            if self.decimals > 0 {
                RawBson::Decimal128(decimal::encode(dec))
            } else {
                RawBson::Double(d)
            }
        };
        if self.nan > 0 || (self.pos_inf > 0 && self.neg_inf > 0) {
            return special(f64::NAN, Decimal::NaN);
        }
        if self.pos_inf > 0 {
            return special(f64::INFINITY, dec_inf(false));
        }
        if self.neg_inf > 0 {
            return special(f64::NEG_INFINITY, dec_inf(true));
        }
        let v = self.sum.total();
        match v {
            RawBson::Decimal128(d) if self.decimals == 0 => {
                let x = Decimal::from_decimal128(d);
                if self.doubles > 0 {
                    return RawBson::Double(decimal::to_f64(x));
                }
                match dec_exact_i64(x) {
                    Some(l) => int_or_long(l),
                    None => RawBson::Double(decimal::to_f64(x)),
                }
            }
            RawBson::Double(d)
                if self.doubles == 0 && d > i64::MIN as f64 && d < i64::MAX as f64 =>
            {
                int_or_long(d.round() as i64)
            }
            RawBson::Int64(l) => int_or_long(l),
            other => other,
        }
    }
}

fn int_or_long(l: i64) -> RawBson {
    match i32::try_from(l) {
        Ok(i) => RawBson::Int32(i),
        Err(_) => RawBson::Int64(l),
    }
}

impl WinState for RemovableSum {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        self.update(v, 1);
        Ok(())
    }

    fn remove(&mut self, v: Option<&RawBson>) -> Result<()> {
        self.update(v, -1);
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        Ok(Some(self.total()))
    }

    fn memory(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

fn is_number(v: Option<&RawBson>) -> bool {
    matches!(
        v,
        Some(RawBson::Int32(_) | RawBson::Int64(_) | RawBson::Double(_) | RawBson::Decimal128(_))
    )
}

/// `WindowFunctionAvg`: a removable sum and count of the numeric values.
#[derive(Debug, Clone, Default)]
pub struct RemovableAvg {
    sum: RemovableSum,
    count: i64,
}

impl RemovableAvg {
    fn mean(&self) -> RawBson {
        if self.count == 0 {
            return RawBson::Null;
        }
        match self.sum.total() {
            RawBson::Int32(i) => RawBson::Double(f64::from(i) / self.count as f64),
            RawBson::Int64(l) => RawBson::Double(l as f64 / self.count as f64),
            RawBson::Double(d) if d.is_nan() || d.is_infinite() => RawBson::Double(d),
            RawBson::Double(d) => RawBson::Double(d / self.count as f64),
            RawBson::Decimal128(d) => {
                let x = Decimal::from_decimal128(d);
                if decimal::is_nan(x) || dec_is_inf(x) {
                    RawBson::Decimal128(d)
                } else {
                    RawBson::Decimal128(decimal::encode(decimal::div(
                        x,
                        decimal::from_i64(self.count),
                    )))
                }
            }
            other => other,
        }
    }
}

impl WinState for RemovableAvg {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        if is_number(v) {
            self.sum.update(v, 1);
            self.count += 1;
        }
        Ok(())
    }

    fn remove(&mut self, v: Option<&RawBson>) -> Result<()> {
        if is_number(v) {
            self.sum.update(v, -1);
            self.count -= 1;
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        Ok(Some(self.mean()))
    }

    fn memory(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

fn to_f64(v: &RawBson) -> f64 {
    match v {
        RawBson::Int32(i) => f64::from(*i),
        RawBson::Int64(l) => *l as f64,
        RawBson::Double(d) => *d,
        RawBson::Decimal128(d) => decimal::to_f64(Decimal::from_decimal128(*d)),
        _ => 0.0,
    }
}

/// `WindowFunctionStdDev`: incremental sums of values and of squared differences.
#[derive(Debug, Clone, Default)]
pub struct RemovableStdDev {
    sample: bool,
    sum: Summation,
    m2: Summation,
    count: i64,
    nonfinite: i64,
}

impl RemovableStdDev {
    /// `$stdDevSamp` when `sample`, else `$stdDevPop`.
    pub fn new(sample: bool) -> RemovableStdDev {
        RemovableStdDev {
            sample,
            ..RemovableStdDev::default()
        }
    }

    fn update(&mut self, v: Option<&RawBson>, q: i64) {
        let Some(v) = v.filter(|v| is_number(Some(v))) else {
            return;
        };
        let x = to_f64(v);
        if !x.is_finite() {
            self.nonfinite += q;
            self.count += q;
            return;
        }
        if self.count == 0 {
            self.count += 1;
            self.sum.add(RawBsonRef::Double(x));
            return;
        }
        if self.count + q == 0 {
            let sample = self.sample;
            *self = RemovableStdDev::new(sample);
            return;
        }
        let s = to_f64(&self.sum.total());
        let d = self.count as f64 * x - s;
        self.count += q;
        self.sum.add(RawBsonRef::Double(x * q as f64));
        let c = self.count as f64;
        self.m2
            .add(RawBsonRef::Double(d * d * q as f64 / (c * (c - q as f64))));
    }
}

impl WinState for RemovableStdDev {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        self.update(v, 1);
        Ok(())
    }

    fn remove(&mut self, v: Option<&RawBson>) -> Result<()> {
        self.update(v, -1);
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        if self.nonfinite > 0 {
            return Ok(Some(RawBson::Double(f64::NAN)));
        }
        let n = if self.sample {
            self.count - 1
        } else {
            self.count
        };
        if n == 0 {
            return Ok(Some(RawBson::Null));
        }
        let m2 = to_f64(&self.m2.total());
        if m2 < 0.0 || (!self.sample && self.count == 1) {
            return Ok(Some(RawBson::Int32(0)));
        }
        Ok(Some(RawBson::Double((m2 / n as f64).sqrt())))
    }

    fn memory(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

// ---------------------------------------------------------------------------------------------
// ordered collections

/// `$min`/`$max` over a sliding window: an ordered multiset of the non-null values.
#[derive(Debug, Default)]
pub struct RemovableMinMax {
    max: bool,
    values: BTreeMap<Vec<u8>, VecDeque<RawBson>>,
    bytes: usize,
}

impl RemovableMinMax {
    /// `$max` when `max`, else `$min`.
    pub fn new(max: bool) -> RemovableMinMax {
        RemovableMinMax {
            max,
            ..RemovableMinMax::default()
        }
    }
}

impl WinState for RemovableMinMax {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        if let Some(v) = v.filter(|v| !nullish(Some(v))) {
            self.bytes += bson_size(v) + 32;
            self.values
                .entry(value_key(v.as_raw_bson_ref()))
                .or_default()
                .push_back(v.clone());
        }
        Ok(())
    }

    fn remove(&mut self, v: Option<&RawBson>) -> Result<()> {
        if let Some(v) = v.filter(|v| !nullish(Some(v))) {
            let k = value_key(v.as_raw_bson_ref());
            if let Some(q) = self.values.get_mut(&k) {
                q.pop_front();
                self.bytes = self.bytes.saturating_sub(bson_size(v) + 32);
                if q.is_empty() {
                    self.values.remove(&k);
                }
            }
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        let entry = if self.max {
            self.values.iter().next_back()
        } else {
            self.values.iter().next()
        };
        Ok(Some(
            entry
                .and_then(|(_, q)| q.front().cloned())
                .unwrap_or(RawBson::Null),
        ))
    }

    fn memory(&self) -> usize {
        self.bytes + 64
    }
}

/// `$push` over a sliding window.
#[derive(Debug, Default)]
pub struct RemovablePush {
    values: VecDeque<RawBson>,
    bytes: usize,
}

impl WinState for RemovablePush {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        if let Some(v) = v {
            self.bytes += bson_size(v);
            self.values.push_back(v.clone());
        }
        Ok(())
    }

    fn remove(&mut self, v: Option<&RawBson>) -> Result<()> {
        if v.is_some()
            && let Some(old) = self.values.pop_front()
        {
            self.bytes = self.bytes.saturating_sub(bson_size(&old));
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        let mut a = RawArrayBuf::new();
        for v in &self.values {
            a.push(v.clone());
        }
        Ok(Some(RawBson::Array(a)))
    }

    fn memory(&self) -> usize {
        self.bytes + 64
    }
}

/// `$addToSet` over a sliding window: distinct values with their counts, in BSON order.
#[derive(Debug, Default)]
pub struct RemovableAddToSet {
    values: BTreeMap<Vec<u8>, (RawBson, usize)>,
    bytes: usize,
}

impl WinState for RemovableAddToSet {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        if let Some(v) = v {
            let e = self
                .values
                .entry(value_key(v.as_raw_bson_ref()))
                .or_insert_with(|| (v.clone(), 0));
            if e.1 == 0 {
                self.bytes += bson_size(v) + 32;
            }
            e.1 += 1;
        }
        Ok(())
    }

    fn remove(&mut self, v: Option<&RawBson>) -> Result<()> {
        if let Some(v) = v {
            let k = value_key(v.as_raw_bson_ref());
            if let Some(e) = self.values.get_mut(&k) {
                e.1 = e.1.saturating_sub(1);
                if e.1 == 0 {
                    self.bytes = self.bytes.saturating_sub(bson_size(v) + 32);
                    self.values.remove(&k);
                }
            }
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        let mut a = RawArrayBuf::new();
        for (v, _) in self.values.values() {
            a.push(v.clone());
        }
        Ok(Some(RawBson::Array(a)))
    }

    fn memory(&self) -> usize {
        self.bytes + 64
    }
}

/// Any accumulator over a sliding window, recomputed from the values in it.
pub struct Recompute {
    spec: AccumulatorSpec,
    values: VecDeque<Option<RawBson>>,
    bytes: usize,
}

impl Recompute {
    /// Over `spec` (its `n` evaluated without a document, as window functions do).
    pub fn new(spec: AccumulatorSpec) -> Result<Recompute> {
        // Validates `n` once up front.
        spec.create(RawBsonRef::Null)?;
        Ok(Recompute {
            spec,
            values: VecDeque::new(),
            bytes: 0,
        })
    }
}

impl WinState for Recompute {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        self.bytes += size(v);
        self.values.push_back(v.cloned());
        Ok(())
    }

    fn remove(&mut self, _v: Option<&RawBson>) -> Result<()> {
        if let Some(old) = self.values.pop_front() {
            self.bytes = self.bytes.saturating_sub(size(old.as_ref()));
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        let mut acc = self.spec.create(RawBsonRef::Null)?;
        for v in &self.values {
            acc.process(v.as_ref().map(RawBson::as_raw_bson_ref), false)?;
        }
        Ok(Some(acc.value()?.unwrap_or(RawBson::Null)))
    }

    fn memory(&self) -> usize {
        self.bytes + 64
    }
}

// ---------------------------------------------------------------------------------------------
// window-only functions

fn numbers_pair(v: Option<&RawBson>) -> Option<(RawBson, RawBson)> {
    let Some(RawBson::Array(a)) = v else {
        return None;
    };
    let items: Vec<RawBson> = a
        .into_iter()
        .flatten()
        .map(RawBson::from)
        .collect::<Vec<_>>();
    match items.as_slice() {
        [x, y] if is_number(Some(x)) && is_number(Some(y)) => Some((x.clone(), y.clone())),
        _ => None,
    }
}

fn non_finite(v: &RawBson) -> bool {
    match v {
        RawBson::Double(d) => !d.is_finite(),
        RawBson::Decimal128(d) => {
            let x = Decimal::from_decimal128(*d);
            decimal::is_nan(x) || dec_is_inf(x)
        }
        _ => false,
    }
}

fn is_nan(v: &RawBson) -> bool {
    match v {
        RawBson::Double(d) => d.is_nan(),
        RawBson::Decimal128(d) => decimal::is_nan(Decimal::from_decimal128(*d)),
        _ => false,
    }
}

/// `$covariancePop` / `$covarianceSamp` (`WindowFunctionCovariance`): online co-moment of
/// `[x, y]` pairs of numbers; other inputs are ignored.
#[derive(Debug, Default)]
pub struct Covariance {
    sample: bool,
    count: i64,
    mean_x: RemovableAvg,
    mean_y: RemovableAvg,
    cxy: RemovableSum,
}

impl Covariance {
    /// Sample covariance when `sample`.
    pub fn new(sample: bool) -> Covariance {
        Covariance {
            sample,
            ..Covariance::default()
        }
    }

    fn non_finite_value(x: &RawBson, y: &RawBson) -> RawBson {
        let (mut pos, mut neg, mut nan, mut dec) = (0, 0, 0, false);
        for v in [x, y] {
            if is_nan(v) {
                nan += 1;
            } else if let RawBson::Decimal128(d) = v {
                dec = true;
                let x = Decimal::from_decimal128(*d);
                if dec_is_inf(x) {
                    if decimal::is_negative(x) {
                        neg += 1;
                    } else {
                        pos += 1;
                    }
                }
            } else {
                let f = to_f64(v);
                if f == f64::INFINITY {
                    pos += 1;
                } else if f == f64::NEG_INFINITY {
                    neg += 1;
                }
            }
        }
        if nan > 0 || pos * neg > 0 {
            return if dec {
                RawBson::Decimal128(decimal::encode(Decimal::NaN))
            } else {
                RawBson::Double(f64::NAN)
            };
        }
        match (dec, pos > 0) {
            (true, p) => RawBson::Decimal128(decimal::encode(dec_inf(!p))),
            (false, true) => RawBson::Double(f64::INFINITY),
            (false, false) => RawBson::Double(f64::NEG_INFINITY),
        }
    }
}

fn sub(a: &RawBson, b: &RawBson) -> Result<RawBson> {
    arith(
        ArithOp::Subtract,
        Some(a.as_raw_bson_ref()),
        Some(b.as_raw_bson_ref()),
    )
}

fn mul(a: &RawBson, b: &RawBson) -> Result<RawBson> {
    arith(
        ArithOp::Multiply,
        Some(a.as_raw_bson_ref()),
        Some(b.as_raw_bson_ref()),
    )
}

impl WinState for Covariance {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        let Some((x, y)) = numbers_pair(v) else {
            return Ok(());
        };
        if non_finite(&x) || non_finite(&y) {
            let nf = Covariance::non_finite_value(&x, &y);
            self.cxy.update(Some(&nf), 1);
            return Ok(());
        }
        self.count += 1;
        let dx = sub(&x, &self.mean_x.mean())?;
        self.mean_x.add(Some(&x))?;
        self.mean_y.add(Some(&y))?;
        let dy = sub(&y, &self.mean_y.mean())?;
        let d = mul(&dx, &dy)?;
        self.cxy.update(Some(&d), 1);
        Ok(())
    }

    fn remove(&mut self, v: Option<&RawBson>) -> Result<()> {
        let Some((x, y)) = numbers_pair(v) else {
            return Ok(());
        };
        if non_finite(&x) || non_finite(&y) {
            let nf = Covariance::non_finite_value(&x, &y);
            self.cxy.update(Some(&nf), -1);
            return Ok(());
        }
        self.count -= 1;
        if self.count <= 0 {
            let sample = self.sample;
            *self = Covariance::new(sample);
            return Ok(());
        }
        self.mean_x.remove(Some(&x))?;
        let dx = sub(&x, &self.mean_x.mean())?;
        let dy = sub(&y, &self.mean_y.mean())?;
        let d = mul(&dx, &dy)?;
        self.cxy.update(Some(&d), -1);
        self.mean_y.remove(Some(&y))?;
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        if self.count == 1 && !self.sample {
            return Ok(Some(RawBson::Double(0.0)));
        }
        let adjusted = if self.sample {
            self.count - 1
        } else {
            self.count
        };
        if adjusted <= 0 {
            return Ok(Some(RawBson::Null));
        }
        let out = self.cxy.total();
        Ok(Some(match out {
            RawBson::Decimal128(_) => arith(
                ArithOp::Divide,
                Some(out.as_raw_bson_ref()),
                Some(RawBsonRef::Double(adjusted as f64)),
            )?,
            ref n if is_number(Some(n)) => RawBson::Double(to_f64(n) / adjusted as f64),
            other => other,
        }))
    }

    fn memory(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

/// `$integral` (`WindowFunctionIntegral`): the trapezoidal rule over consecutive `[x, y]`
/// points (x numbers or dates, y numbers).
pub struct Integral {
    unit_millis: Option<i64>,
    values: VecDeque<(RawBson, RawBson)>,
    integral: RemovableSum,
    nan: i64,
    /// Keeps only the last point (the window never shrinks).
    growing: bool,
}

impl Integral {
    /// With `unit_millis` the x values must be dates and the result is per unit.
    pub fn new(unit_millis: Option<i64>, growing: bool) -> Integral {
        Integral {
            unit_millis,
            values: VecDeque::new(),
            integral: RemovableSum::default(),
            nan: 0,
            growing,
        }
    }

    fn check(&self, v: Option<&RawBson>) -> Result<(RawBson, RawBson)> {
        let bad = || {
            QueryError::Location(
                5423900,
                "The input value of $integral window function must be a vector of 2 value, the \
                 first value must be numeric or date type and the second must be numeric."
                    .into(),
            )
        };
        let Some(RawBson::Array(a)) = v else {
            return Err(bad());
        };
        let items: Vec<RawBson> = a.into_iter().flatten().map(RawBson::from).collect();
        let [x, y] = items.as_slice() else {
            return Err(bad());
        };
        let x_date = matches!(x, RawBson::DateTime(_));
        if !is_number(Some(y)) || !(is_number(Some(x)) || x_date) {
            return Err(bad());
        }
        if self.unit_millis.is_some() && !x_date {
            return Err(QueryError::Location(
                5423901,
                "$integral with 'outputUnit' expects the sortBy field to be a Date".into(),
            ));
        }
        if self.unit_millis.is_none() && !is_number(Some(x)) {
            return Err(QueryError::Location(
                5423902,
                "$integral (with no 'outputUnit') expects the sortBy field to be numeric".into(),
            ));
        }
        Ok((x.clone(), y.clone()))
    }

    fn trapezoid(a: &(RawBson, RawBson), b: &(RawBson, RawBson)) -> Result<RawBson> {
        if is_nan(&a.0) || is_nan(&a.1) || is_nan(&b.0) || is_nan(&b.1) {
            return Ok(RawBson::Int32(0));
        }
        let both_dates = matches!(a.0, RawBson::DateTime(_)) && matches!(b.0, RawBson::DateTime(_));
        let both_nums = is_number(Some(&a.0)) && is_number(Some(&b.0));
        if !(both_dates || both_nums) {
            return Ok(RawBson::Int32(0));
        }
        let delta = sub(&b.0, &a.0)?;
        let sum_y = arith(
            ArithOp::Add,
            Some(b.1.as_raw_bson_ref()),
            Some(a.1.as_raw_bson_ref()),
        )?;
        let area = mul(&sum_y, &delta)?;
        arith(
            ArithOp::Divide,
            Some(area.as_raw_bson_ref()),
            Some(RawBsonRef::Double(2.0)),
        )
    }
}

impl WinState for Integral {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        let p = self.check(v)?;
        if is_nan(&p.0) || is_nan(&p.1) {
            self.nan += 1;
        }
        if let Some(last) = self.values.back() {
            let t = Integral::trapezoid(last, &p)?;
            self.integral.update(Some(&t), 1);
        }
        if self.growing {
            self.values.clear();
        }
        self.values.push_back(p);
        Ok(())
    }

    fn remove(&mut self, v: Option<&RawBson>) -> Result<()> {
        let p = self.check(v)?;
        if is_nan(&p.0) || is_nan(&p.1) {
            self.nan -= 1;
        }
        self.values.pop_front();
        if let Some(first) = self.values.front() {
            let t = Integral::trapezoid(&p, first)?;
            self.integral.update(Some(&t), -1);
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        if self.values.is_empty() {
            return Ok(Some(RawBson::Null));
        }
        if self.nan > 0 {
            return Ok(Some(RawBson::Double(f64::NAN)));
        }
        let total = self.integral.total();
        Ok(Some(match self.unit_millis {
            Some(ms) => arith(
                ArithOp::Divide,
                Some(total.as_raw_bson_ref()),
                Some(RawBsonRef::Int64(ms)),
            )?,
            None => total,
        }))
    }

    fn memory(&self) -> usize {
        self.values.len() * 48 + 64
    }
}

/// `$expMovingAvg` (`AccumulatorExpMovingAvg`): computed in Decimal128, output as a double
/// unless an input was a Decimal128.
pub struct ExpMovingAvg {
    alpha: Decimal,
    current: Option<Decimal>,
    decimal: bool,
}

impl ExpMovingAvg {
    /// With weight `alpha`.
    pub fn new(alpha: Decimal) -> ExpMovingAvg {
        ExpMovingAvg {
            alpha,
            current: None,
            decimal: false,
        }
    }
}

impl WinAcc for ExpMovingAvg {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        let x = match v {
            Some(RawBson::Decimal128(d)) => {
                self.decimal = true;
                Decimal::from_decimal128(*d)
            }
            Some(RawBson::Int32(i)) => decimal::from_i64(i64::from(*i)),
            Some(RawBson::Int64(l)) => decimal::from_i64(*l),
            Some(RawBson::Double(d)) => decimal::from_f64(*d, 34),
            _ => return Ok(()),
        };
        self.current = Some(match self.current {
            None => x,
            Some(c) => decimal::add(
                decimal::mul(x, self.alpha),
                decimal::mul(c, decimal::sub(decimal::from_i64(1), self.alpha)),
            ),
        });
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        Ok(Some(match self.current {
            None => RawBson::Null,
            Some(c) if self.decimal => RawBson::Decimal128(decimal::encode(c)),
            Some(c) => RawBson::Double(decimal::to_f64(c)),
        }))
    }

    fn memory(&self) -> usize {
        64
    }
}

/// `$locf`: the last non-null value seen (null before the first).
#[derive(Default)]
pub struct Locf {
    last: Option<RawBson>,
}

impl WinAcc for Locf {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        if !nullish(v) {
            self.last = v.cloned();
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        Ok(Some(self.last.clone().unwrap_or(RawBson::Null)))
    }

    fn memory(&self) -> usize {
        size(self.last.as_ref()) + 32
    }
}

/// Which rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankKind {
    /// `$rank`: ties share a rank, the next rank skips.
    Rank,
    /// `$denseRank`: ties share a rank, no gaps.
    DenseRank,
    /// `$documentNumber`: the position in the partition.
    DocumentNumber,
}

/// `$rank`, `$denseRank`, `$documentNumber` over the `sortBy` field's values.
pub struct Rank {
    kind: RankKind,
    last: Option<Option<RawBson>>,
    rank: i64,
    same: i64,
}

impl Rank {
    /// A fresh counter.
    pub fn new(kind: RankKind) -> Rank {
        Rank {
            kind,
            last: None,
            rank: 0,
            same: 1,
        }
    }

    fn same_value(a: Option<&RawBson>, b: Option<&RawBson>) -> bool {
        match (a, b) {
            (None, None) => true,
            (Some(x), Some(y)) => value_key(x.as_raw_bson_ref()) == value_key(y.as_raw_bson_ref()),
            _ => false,
        }
    }
}

impl WinAcc for Rank {
    fn add(&mut self, v: Option<&RawBson>) -> Result<()> {
        let same = self
            .last
            .as_ref()
            .is_some_and(|l| Rank::same_value(l.as_ref(), v));
        match self.kind {
            RankKind::DocumentNumber => self.rank += 1,
            RankKind::DenseRank => {
                if !same {
                    self.rank += 1;
                    self.last = Some(v.cloned());
                }
            }
            RankKind::Rank => {
                if same {
                    self.same += 1;
                } else {
                    self.rank += self.same;
                    self.same = 1;
                    self.last = Some(v.cloned());
                }
            }
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        Ok(Some(int_or_long(self.rank)))
    }

    fn memory(&self) -> usize {
        self.last.as_ref().map_or(0, |l| size(l.as_ref())) + 32
    }
}
