//! `$sum`, `$avg` and `$count` (accumulator_sum.cpp, accumulator_avg.cpp) with MongoDB's
//! numeric rules: integers are summed exactly and the result keeps the widest input type
//! (int → long when it no longer fits, long → double when it overflows); doubles are summed
//! in double-double precision (MongoDB's `DoubleDoubleSummation`, so ten `0.1`s make exactly
//! `1.0`); any Decimal128 makes the result a Decimal128; non-numeric inputs are ignored.
//! `$avg` divides by the number of numeric inputs and is null when there were none.
//!
//! Invariant: nothing here panics or overflows; partial states ([`Accumulator::partial`])
//! merge to the same result as processing every input in one accumulator.

use bson::{RawBson, RawBsonRef, rawdoc};
use cairn_storage::decimal::Decimal;

use super::Accumulator;
use crate::error::{QueryError, Result};
use cairn_storage::decimal;

/// Compensated double summation (hi + lo carry the exact sum to ~106 bits).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DoubleDouble {
    hi: f64,
    lo: f64,
}

impl DoubleDouble {
    pub(crate) fn add(&mut self, x: f64) {
        let s = self.hi + x;
        if !s.is_finite() || !x.is_finite() {
            self.hi = s;
            return;
        }
        let bp = s - self.hi;
        let e = (self.hi - (s - bp)) + (x - bp);
        self.hi = s;
        self.lo += e;
    }

    /// Adds an integer exactly (split into two doubles).
    pub(crate) fn add_i128(&mut self, x: i128) {
        let high = x as f64;
        let rest = x.saturating_sub(high as i128);
        self.add(high);
        self.add(rest as f64);
    }

    pub(crate) fn value(&self) -> f64 {
        if !self.hi.is_finite() {
            return self.hi;
        }
        self.hi + self.lo
    }
}

/// The widest numeric type seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
enum Widest {
    #[default]
    Int,
    Long,
    Double,
    Decimal,
}

/// A running sum with MongoDB's result types.
#[derive(Debug, Clone, Default)]
pub(crate) struct Summation {
    widest: Widest,
    ints: i128,
    doubles: DoubleDouble,
    dec: Option<Decimal>,
    /// Numeric inputs seen.
    pub(crate) count: i64,
}

impl Summation {
    /// Adds a value; false when it was not numeric (and so ignored).
    pub(crate) fn add(&mut self, v: RawBsonRef<'_>) -> bool {
        match v {
            RawBsonRef::Int32(i) => self.ints += i128::from(i),
            RawBsonRef::Int64(i) => {
                self.ints += i128::from(i);
                self.widest = self.widest.max(Widest::Long);
            }
            RawBsonRef::Double(d) => {
                self.doubles.add(d);
                self.widest = self.widest.max(Widest::Double);
            }
            RawBsonRef::Decimal128(d) => {
                let d = Decimal::from_decimal128(d);
                self.dec = Some(match self.dec {
                    Some(t) => decimal::add(t, d),
                    None => d,
                });
                self.widest = Widest::Decimal;
            }
            _ => return false,
        }
        self.count += 1;
        true
    }

    /// The exact double of the non-decimal inputs.
    fn double(&self) -> f64 {
        let mut dd = self.doubles;
        dd.add_i128(self.ints);
        dd.value()
    }

    fn decimal_total(&self) -> Decimal {
        let mut t = self.dec.unwrap_or(decimal::ZERO);
        if self.ints != 0 {
            let int = match i64::try_from(self.ints) {
                Ok(i) => decimal::from_i64(i),
                Err(_) => decimal::from_f64(self.ints as f64, 34),
            };
            t = decimal::add(t, int);
        }
        if self.doubles.hi != 0.0 || self.doubles.lo != 0.0 || !self.doubles.hi.is_finite() {
            t = decimal::add(t, decimal::from_f64(self.doubles.hi, 34));
            if self.doubles.hi.is_finite() && self.doubles.lo != 0.0 {
                t = decimal::add(t, decimal::from_f64(self.doubles.lo, 34));
            }
        }
        t
    }

    /// The sum with MongoDB's result type (int 0 when nothing was added).
    pub(crate) fn total(&self) -> RawBson {
        match self.widest {
            Widest::Int | Widest::Long => match i64::try_from(self.ints) {
                Ok(l) => match (self.widest, i32::try_from(l)) {
                    (Widest::Int, Ok(i)) => RawBson::Int32(i),
                    _ => RawBson::Int64(l),
                },
                Err(_) => RawBson::Double(self.double()),
            },
            Widest::Double => RawBson::Double(self.double()),
            Widest::Decimal => RawBson::Decimal128(decimal::encode(self.decimal_total())),
        }
    }

    /// The mean (double, or Decimal128 when a decimal was seen); `None` without inputs.
    pub(crate) fn mean(&self) -> Option<RawBson> {
        if self.count == 0 {
            return None;
        }
        Some(match self.widest {
            Widest::Decimal => RawBson::Decimal128(decimal::encode(decimal::div(
                self.decimal_total(),
                decimal::from_i64(self.count),
            ))),
            _ => RawBson::Double(self.double() / self.count as f64),
        })
    }

    /// A partial state ([`Summation::merge`] reads it back).
    pub(crate) fn partial(&self) -> RawBson {
        let mut d = rawdoc! {
            "w": self.widest as i32,
            "i": self.ints.to_string(),
            "h": self.doubles.hi,
            "l": self.doubles.lo,
            "n": self.count,
        };
        if let Some(dec) = self.dec {
            d.append(
                bson::raw::cstr!("d"),
                RawBson::Decimal128(decimal::encode(dec)),
            );
        }
        RawBson::Document(d)
    }

    /// Adds a partial state.
    pub(crate) fn merge(&mut self, p: RawBsonRef<'_>) -> Result<()> {
        let bad = || QueryError::BadValue("invalid partial sum".into());
        let RawBsonRef::Document(d) = p else {
            return Err(bad());
        };
        let w = d.get_i32("w").map_err(|_| bad())?;
        let w = match w {
            0 => Widest::Int,
            1 => Widest::Long,
            2 => Widest::Double,
            _ => Widest::Decimal,
        };
        self.widest = self.widest.max(w);
        let ints: i128 = d
            .get_str("i")
            .map_err(|_| bad())?
            .parse()
            .map_err(|_| bad())?;
        self.ints = self.ints.saturating_add(ints);
        self.doubles.add(d.get_f64("h").map_err(|_| bad())?);
        self.doubles.add(d.get_f64("l").map_err(|_| bad())?);
        self.count += d.get_i64("n").map_err(|_| bad())?;
        if let Ok(Some(RawBsonRef::Decimal128(dec))) = d.get("d") {
            let dec = Decimal::from_decimal128(dec);
            self.dec = Some(match self.dec {
                Some(t) => decimal::add(t, dec),
                None => dec,
            });
        }
        Ok(())
    }
}

/// `$sum` (and `$count`, which sums 1 per document).
#[derive(Debug, Clone, Default)]
pub struct Sum(pub(crate) Summation);

impl Accumulator for Sum {
    fn process(&mut self, v: Option<RawBsonRef<'_>>, merging: bool) -> Result<()> {
        match v {
            Some(p) if merging => self.0.merge(p),
            Some(v) => {
                self.0.add(v);
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn value(&self) -> Result<Option<RawBson>> {
        Ok(Some(self.0.total()))
    }

    fn partial(&self) -> Result<RawBson> {
        Ok(self.0.partial())
    }

    fn memory(&self) -> usize {
        std::mem::size_of::<Summation>()
    }
}

/// `$avg`.
#[derive(Debug, Clone, Default)]
pub struct Avg(pub(crate) Summation);

impl Accumulator for Avg {
    fn process(&mut self, v: Option<RawBsonRef<'_>>, merging: bool) -> Result<()> {
        match v {
            Some(p) if merging => self.0.merge(p),
            Some(v) => {
                self.0.add(v);
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn value(&self) -> Result<Option<RawBson>> {
        Ok(Some(self.0.mean().unwrap_or(RawBson::Null)))
    }

    fn partial(&self) -> Result<RawBson> {
        Ok(self.0.partial())
    }

    fn memory(&self) -> usize {
        std::mem::size_of::<Summation>()
    }
}
