//! `$percentile` and `$median` (accumulator_percentile.cpp): the numeric inputs are kept and,
//! for each requested `p`, the value of rank ⌈p·n⌉ (1-based) in ascending order is returned as
//! a double — the result MongoDB's `approximate` method gives on the data sets it answers
//! exactly. Non-numeric inputs are ignored; without numeric inputs the result is null.
//!
//! Invariant: memory grows with the number of numeric inputs and is checked against the
//! stage's 100 MiB limit by `$group`.

use bson::{RawArrayBuf, RawBson, RawBsonRef};

use super::Accumulator;
use crate::error::{QueryError, Result};

/// `$percentile` (`median: false`) or `$median`.
#[derive(Debug, Clone)]
pub struct Percentile {
    ps: Vec<f64>,
    median: bool,
    values: Vec<f64>,
    sorted: bool,
}

impl Percentile {
    /// Percentiles `ps` (each in `[0, 1]`); `median` returns one value, not an array.
    pub fn new(ps: Vec<f64>, median: bool) -> Percentile {
        Percentile {
            ps,
            median,
            values: Vec::new(),
            sorted: true,
        }
    }

    fn add(&mut self, v: RawBsonRef<'_>) {
        let x = match v {
            RawBsonRef::Int32(i) => f64::from(i),
            RawBsonRef::Int64(i) => i as f64,
            RawBsonRef::Double(d) => d,
            RawBsonRef::Decimal128(d) => {
                cairn_storage::decimal::to_f64(cairn_storage::decimal::Decimal::from_decimal128(d))
            }
            _ => return,
        };
        if x.is_nan() {
            return;
        }
        self.sorted = false;
        self.values.push(x);
    }

    /// The value at percentile `p` of `sorted` (non-empty, ascending).
    fn at(sorted: &[f64], p: f64) -> f64 {
        let n = sorted.len();
        let rank = (p * n as f64).ceil() as usize;
        let idx = rank.saturating_sub(1).min(n - 1);
        sorted.get(idx).copied().unwrap_or(f64::NAN)
    }

    /// The results for a list of values (the expression forms).
    pub fn compute(&self) -> RawBson {
        let mut v = self.values.clone();
        if !self.sorted {
            v.sort_by(f64::total_cmp);
        }
        if v.is_empty() {
            return RawBson::Null;
        }
        if self.median {
            return RawBson::Double(Self::at(&v, 0.5));
        }
        let mut a = RawArrayBuf::new();
        for p in &self.ps {
            a.push(RawBson::Double(Self::at(&v, *p)));
        }
        RawBson::Array(a)
    }
}

impl Accumulator for Percentile {
    fn process(&mut self, v: Option<RawBsonRef<'_>>, merging: bool) -> Result<()> {
        if merging {
            let Some(RawBsonRef::Array(a)) = v else {
                return Err(QueryError::BadValue(
                    "invalid partial $percentile state".into(),
                ));
            };
            for e in a.into_iter().flatten() {
                self.add(e);
            }
            return Ok(());
        }
        if let Some(v) = v {
            self.add(v);
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        Ok(Some(self.compute()))
    }

    fn partial(&self) -> Result<RawBson> {
        let mut a = RawArrayBuf::new();
        for x in &self.values {
            a.push(RawBson::Double(*x));
        }
        Ok(RawBson::Array(a))
    }

    fn memory(&self) -> usize {
        64 + self.values.len() * 8
    }
}
