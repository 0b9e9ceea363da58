//! The single-value accumulators: `$first`, `$last`, `$min`, `$max`, `$push`, `$addToSet`,
//! `$mergeObjects`, `$stdDevPop`, `$stdDevSamp` (accumulator_first.cpp, accumulator_last.cpp,
//! accumulator_min_max.cpp, accumulator_push.cpp, accumulator_add_to_set.cpp,
//! accumulator_merge_objects.cpp, accumulator_std_dev.cpp).
//!
//! - `$first`/`$last` keep the first/last input, missing included (a missing result is
//!   reported as null by `$group`);
//! - `$min`/`$max` ignore null, undefined and missing, and compare in MongoDB's BSON order;
//! - `$push`/`$addToSet` skip missing inputs; `$addToSet` keeps one of each value (by BSON
//!   equality, so `1` and `1.0` are the same) in first-seen order; both fail with
//!   ExceededMemoryLimit (146) past 100 MiB, as MongoDB's `internalQueryMaxPushBytes` does;
//! - `$mergeObjects` ignores null and missing, refuses other non-documents (40400), and lets
//!   later fields overwrite earlier ones in place;
//! - `$stdDevPop`/`$stdDevSamp` use Welford's online algorithm over numeric inputs; null with
//!   no (or, for the sample, a single) input.

use std::cmp::Ordering;
use std::collections::HashSet;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf, rawdoc};
use cairn_storage::compare::compare_values;

use super::{Accumulator, bson_size, value_key};
use crate::error::{QueryError, Result};

/// `internalQueryMaxPushBytes` / `internalQueryMaxAddToSetBytes`.
pub const MAX_ARRAY_BYTES: usize = 100 * 1024 * 1024;

fn bad_partial(what: &str) -> QueryError {
    QueryError::BadValue(format!("invalid partial {what} state"))
}

/// `$first` (`last: false`) or `$last` (`last: true`).
#[derive(Debug, Clone, Default)]
pub struct FirstLast {
    last: bool,
    seen: bool,
    value: Option<RawBson>,
}

impl FirstLast {
    /// A `$first` or `$last`.
    pub fn new(last: bool) -> FirstLast {
        FirstLast {
            last,
            ..FirstLast::default()
        }
    }
}

impl Accumulator for FirstLast {
    fn process(&mut self, v: Option<RawBsonRef<'_>>, merging: bool) -> Result<()> {
        let v = if merging {
            let Some(RawBsonRef::Document(d)) = v else {
                return Err(bad_partial("$first"));
            };
            if !d.get_bool("h").map_err(|_| bad_partial("$first"))? {
                return Ok(());
            }
            d.get("v").ok().flatten()
        } else {
            v
        };
        if self.last || !self.seen {
            self.seen = true;
            self.value = v.map(RawBson::from);
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        Ok(self.value.clone())
    }

    fn partial(&self) -> Result<RawBson> {
        let mut d = rawdoc! {"h": self.seen};
        if let Some(v) = &self.value {
            d.append(bson::raw::cstr!("v"), v.clone());
        }
        Ok(RawBson::Document(d))
    }

    fn memory(&self) -> usize {
        64 + self.value.as_ref().map_or(0, bson_size)
    }
}

/// `$min` (`max: false`) or `$max` (`max: true`).
#[derive(Debug, Clone, Default)]
pub struct MinMax {
    max: bool,
    value: Option<RawBson>,
}

impl MinMax {
    /// A `$min` or `$max`.
    pub fn new(max: bool) -> MinMax {
        MinMax { max, value: None }
    }
}

impl Accumulator for MinMax {
    fn process(&mut self, v: Option<RawBsonRef<'_>>, _merging: bool) -> Result<()> {
        let Some(v) = v else { return Ok(()) };
        if matches!(v, RawBsonRef::Null | RawBsonRef::Undefined) {
            return Ok(());
        }
        let better = match &self.value {
            None => true,
            Some(cur) => {
                let c = compare_values(v, cur.as_raw_bson_ref());
                if self.max {
                    c == Ordering::Greater
                } else {
                    c == Ordering::Less
                }
            }
        };
        if better {
            self.value = Some(RawBson::from(v));
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        Ok(Some(self.value.clone().unwrap_or(RawBson::Null)))
    }

    fn partial(&self) -> Result<RawBson> {
        Ok(self.value.clone().unwrap_or(RawBson::Null))
    }

    fn memory(&self) -> usize {
        64 + self.value.as_ref().map_or(0, bson_size)
    }
}

/// `$push`.
#[derive(Debug, Clone, Default)]
pub struct Push {
    items: Vec<RawBson>,
    bytes: usize,
}

impl Accumulator for Push {
    fn process(&mut self, v: Option<RawBsonRef<'_>>, merging: bool) -> Result<()> {
        if merging {
            let Some(RawBsonRef::Array(a)) = v else {
                return Err(bad_partial("$push"));
            };
            for e in a {
                let e = e.map_err(|_| bad_partial("$push"))?;
                self.push(RawBson::from(e))?;
            }
            return Ok(());
        }
        if let Some(v) = v {
            self.push(RawBson::from(v))?;
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        let mut a = RawArrayBuf::new();
        for v in &self.items {
            a.push(v.clone());
        }
        Ok(Some(RawBson::Array(a)))
    }

    fn partial(&self) -> Result<RawBson> {
        Ok(self.value()?.unwrap_or(RawBson::Null))
    }

    fn memory(&self) -> usize {
        64 + self.bytes
    }
}

impl Push {
    fn push(&mut self, v: RawBson) -> Result<()> {
        self.bytes += bson_size(&v) + 16;
        if self.bytes > MAX_ARRAY_BYTES {
            return Err(QueryError::Location(
                146,
                format!(
                    "$push used too much memory and cannot spill to disk. Memory limit: \
                     {MAX_ARRAY_BYTES} bytes"
                ),
            ));
        }
        self.items.push(v);
        Ok(())
    }
}

/// `$addToSet`.
#[derive(Debug, Clone, Default)]
pub struct AddToSet {
    items: Vec<RawBson>,
    seen: HashSet<Vec<u8>>,
    bytes: usize,
}

impl AddToSet {
    fn add(&mut self, v: RawBsonRef<'_>) -> Result<()> {
        if !self.seen.insert(value_key(v)) {
            return Ok(());
        }
        let v = RawBson::from(v);
        self.bytes += 2 * bson_size(&v) + 32;
        if self.bytes > MAX_ARRAY_BYTES {
            return Err(QueryError::Location(
                146,
                format!(
                    "$addToSet used too much memory and cannot spill to disk. Memory limit: \
                     {MAX_ARRAY_BYTES} bytes"
                ),
            ));
        }
        self.items.push(v);
        Ok(())
    }
}

impl Accumulator for AddToSet {
    fn process(&mut self, v: Option<RawBsonRef<'_>>, merging: bool) -> Result<()> {
        if merging {
            let Some(RawBsonRef::Array(a)) = v else {
                return Err(bad_partial("$addToSet"));
            };
            for e in a {
                self.add(e.map_err(|_| bad_partial("$addToSet"))?)?;
            }
            return Ok(());
        }
        if let Some(v) = v {
            self.add(v)?;
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        let mut a = RawArrayBuf::new();
        for v in &self.items {
            a.push(v.clone());
        }
        Ok(Some(RawBson::Array(a)))
    }

    fn partial(&self) -> Result<RawBson> {
        Ok(self.value()?.unwrap_or(RawBson::Null))
    }

    fn memory(&self) -> usize {
        64 + self.bytes
    }
}

/// `$mergeObjects`.
#[derive(Debug, Clone, Default)]
pub struct MergeObjects {
    fields: Vec<(String, RawBson)>,
    bytes: usize,
}

impl Accumulator for MergeObjects {
    fn process(&mut self, v: Option<RawBsonRef<'_>>, _merging: bool) -> Result<()> {
        let d = match v {
            None | Some(RawBsonRef::Null) | Some(RawBsonRef::Undefined) => return Ok(()),
            Some(RawBsonRef::Document(d)) => d,
            Some(other) => {
                return Err(QueryError::Location(
                    40400,
                    format!(
                        "$mergeObjects requires object inputs, but input {} is of type {}",
                        cairn_storage::display::value(other),
                        cairn_storage::display::type_name(other)
                    ),
                ));
            }
        };
        for el in d.iter() {
            let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
            let v = RawBson::from(v);
            self.bytes += bson_size(&v) + k.as_str().len();
            match self.fields.iter_mut().find(|(n, _)| n == k.as_str()) {
                Some(slot) => slot.1 = v,
                None => self.fields.push((k.as_str().to_string(), v)),
            }
        }
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        let mut d = RawDocumentBuf::new();
        for (k, v) in &self.fields {
            let k = <&bson::raw::CStr>::try_from(k.as_str())
                .map_err(|e| QueryError::BadValue(e.to_string()))?;
            d.append(k, v.clone());
        }
        Ok(Some(RawBson::Document(d)))
    }

    fn partial(&self) -> Result<RawBson> {
        Ok(self.value()?.unwrap_or(RawBson::Null))
    }

    fn memory(&self) -> usize {
        64 + self.bytes
    }
}

/// `$stdDevPop` (`sample: false`) or `$stdDevSamp` (`sample: true`).
#[derive(Debug, Clone, Default)]
pub struct StdDev {
    sample: bool,
    count: i64,
    mean: f64,
    m2: f64,
}

impl StdDev {
    /// A `$stdDevPop` or `$stdDevSamp`.
    pub fn new(sample: bool) -> StdDev {
        StdDev {
            sample,
            ..StdDev::default()
        }
    }

    fn add(&mut self, x: f64) {
        self.count += 1;
        let delta = x - self.mean;
        if delta != 0.0 {
            self.mean += delta / self.count as f64;
            self.m2 += delta * (x - self.mean);
        }
    }
}

impl Accumulator for StdDev {
    fn process(&mut self, v: Option<RawBsonRef<'_>>, merging: bool) -> Result<()> {
        if merging {
            let Some(RawBsonRef::Document(d)) = v else {
                return Err(bad_partial("$stdDev"));
            };
            let n = d.get_i64("n").map_err(|_| bad_partial("$stdDev"))?;
            let mean = d.get_f64("mean").map_err(|_| bad_partial("$stdDev"))?;
            let m2 = d.get_f64("m2").map_err(|_| bad_partial("$stdDev"))?;
            if n == 0 {
                return Ok(());
            }
            let total = self.count + n;
            let delta = mean - self.mean;
            self.m2 += m2 + delta * delta * (self.count as f64) * (n as f64) / total as f64;
            self.mean += delta * n as f64 / total as f64;
            self.count = total;
            return Ok(());
        }
        let x = match v {
            Some(RawBsonRef::Int32(i)) => f64::from(i),
            Some(RawBsonRef::Int64(i)) => i as f64,
            Some(RawBsonRef::Double(d)) => d,
            Some(RawBsonRef::Decimal128(d)) => {
                cairn_storage::decimal::to_f64(cairn_storage::decimal::Decimal::from_decimal128(d))
            }
            _ => return Ok(()),
        };
        self.add(x);
        Ok(())
    }

    fn value(&self) -> Result<Option<RawBson>> {
        let n = if self.sample {
            self.count - 1
        } else {
            self.count
        };
        if n <= 0 {
            return Ok(Some(RawBson::Null));
        }
        Ok(Some(RawBson::Double((self.m2 / n as f64).sqrt())))
    }

    fn partial(&self) -> Result<RawBson> {
        Ok(RawBson::Document(
            rawdoc! {"n": self.count, "mean": self.mean, "m2": self.m2},
        ))
    }

    fn memory(&self) -> usize {
        64
    }
}
