//! `$bucketAuto: {groupBy, buckets, output, granularity}`: sorts the input by `groupBy` and
//! cuts it into `buckets` buckets of about equal size (DocumentSourceBucketAuto): each bucket
//! takes ⌊n / buckets⌉ documents, plus any following ones with the same value; its `_id` is
//! `{min, max}` where `max` is the next bucket's `min` (the last bucket's own largest value).
//! With `granularity` the boundaries are rounded to a preferred-number series (`R5 R10 R20
//! R40 R80 1-2-5 E6 E12 E24 E48 E96 E192 POWERSOF2`, MongoDB's tables and arithmetic: doubles
//! for numbers, decimal arithmetic for Decimal128 values; the first `min` rounded down, each `max` up, and
//! documents below a rounded boundary absorbed). Without `output` each bucket counts its
//! documents. The sort spills to disk with `allowDiskUse` (292 otherwise).
//!
//! Errors: 40240 not an object, 40244 unknown option, 40246 missing `groupBy`/`buckets`,
//! 40239 bad `groupBy`, 40241 non-positive `buckets`, 40242 not a 32-bit integer, 40243 not
//! a number, 40245 `output` not an object, 40261 bad `granularity`, 40257/40258 values not
//! numeric or negative with a granularity.
//! An infinite value rounds to itself (MongoDB's rounding loop does not end on one).

use std::any::Any;
use std::cmp::Ordering;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use cairn_storage::compare::compare_values;
use cairn_storage::display;

use super::bucket::{output_specs, valid_group_by};
use crate::agg::accumulators::{Accumulator, AccumulatorSpec};
use crate::agg::doc::key;
use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Expression};
use crate::sort::{SortSpec, SortedDocs, Sorter};

/// A preferred-number series (MongoDB's integer tables, see [`R5`]), or powers of two.
#[derive(Debug, Clone)]
enum Granularity {
    Series(&'static str, &'static [f64]),
    PowersOf2,
}

// MongoDB's preferred-number tables (granularity_rounder_preferred_numbers.cpp), as
// integers scaled by a power of ten from 1: the rounding multiplies them by a multiplier
// reached from 1 by repeated ×10 or ÷10, so the doubles it returns are exactly MongoDB's
// (`112 × 1`, not `1.12 × 100 = 112.00000000000001`). The tables are MongoDB's own, not the
// textbook series: its R40 has no 335 and its R80 lists forty values between the R40 ones.
const R5: &[f64] = &[10.0, 16.0, 25.0, 40.0, 63.0];
const R10: &[f64] = &[
    100.0, 125.0, 160.0, 200.0, 250.0, 315.0, 400.0, 500.0, 630.0, 800.0,
];
const R20: &[f64] = &[
    100.0, 112.0, 125.0, 140.0, 160.0, 180.0, 200.0, 224.0, 250.0, 280.0, 315.0, 355.0, 400.0,
    450.0, 500.0, 560.0, 630.0, 710.0, 800.0, 900.0,
];
const R40: &[f64] = &[
    100.0, 106.0, 112.0, 118.0, 125.0, 132.0, 140.0, 150.0, 160.0, 170.0, 180.0, 190.0, 200.0,
    212.0, 224.0, 236.0, 250.0, 265.0, 280.0, 300.0, 315.0, 355.0, 375.0, 400.0, 425.0, 450.0,
    475.0, 500.0, 530.0, 560.0, 600.0, 630.0, 670.0, 710.0, 750.0, 800.0, 850.0, 900.0, 950.0,
];
const R80: &[f64] = &[
    103.0, 109.0, 115.0, 122.0, 128.0, 136.0, 145.0, 155.0, 165.0, 175.0, 185.0, 195.0, 206.0,
    218.0, 230.0, 243.0, 258.0, 272.0, 290.0, 307.0, 325.0, 345.0, 365.0, 387.0, 412.0, 437.0,
    462.0, 487.0, 515.0, 545.0, 575.0, 615.0, 650.0, 690.0, 730.0, 775.0, 825.0, 875.0, 925.0,
    975.0,
];
const ONE_TWO_FIVE: &[f64] = &[10.0, 20.0, 50.0];
const E6: &[f64] = &[10.0, 15.0, 22.0, 33.0, 47.0, 68.0];
const E12: &[f64] = &[
    10.0, 12.0, 15.0, 18.0, 22.0, 27.0, 33.0, 39.0, 47.0, 56.0, 68.0, 82.0,
];
const E24: &[f64] = &[
    10.0, 11.0, 12.0, 13.0, 15.0, 16.0, 18.0, 20.0, 22.0, 24.0, 27.0, 30.0, 33.0, 36.0, 39.0, 43.0,
    47.0, 51.0, 56.0, 62.0, 68.0, 75.0, 82.0, 91.0,
];
const E48: &[f64] = &[
    100.0, 105.0, 110.0, 115.0, 121.0, 127.0, 133.0, 140.0, 147.0, 154.0, 162.0, 169.0, 178.0,
    187.0, 196.0, 205.0, 215.0, 226.0, 237.0, 249.0, 261.0, 274.0, 287.0, 301.0, 316.0, 332.0,
    348.0, 365.0, 383.0, 402.0, 422.0, 442.0, 464.0, 487.0, 511.0, 536.0, 562.0, 590.0, 619.0,
    649.0, 681.0, 715.0, 750.0, 787.0, 825.0, 866.0, 909.0, 953.0,
];
const E96: &[f64] = &[
    100.0, 102.0, 105.0, 107.0, 110.0, 113.0, 115.0, 118.0, 121.0, 124.0, 127.0, 130.0, 133.0,
    137.0, 140.0, 143.0, 147.0, 150.0, 154.0, 158.0, 162.0, 165.0, 169.0, 174.0, 178.0, 182.0,
    187.0, 191.0, 196.0, 200.0, 205.0, 210.0, 215.0, 221.0, 226.0, 232.0, 237.0, 243.0, 249.0,
    255.0, 261.0, 267.0, 274.0, 280.0, 287.0, 294.0, 301.0, 309.0, 316.0, 324.0, 332.0, 340.0,
    348.0, 357.0, 365.0, 374.0, 383.0, 392.0, 402.0, 412.0, 422.0, 432.0, 442.0, 453.0, 464.0,
    475.0, 487.0, 499.0, 511.0, 523.0, 536.0, 549.0, 562.0, 576.0, 590.0, 604.0, 619.0, 634.0,
    649.0, 665.0, 681.0, 698.0, 715.0, 732.0, 750.0, 768.0, 787.0, 806.0, 825.0, 845.0, 866.0,
    887.0, 909.0, 931.0, 953.0, 976.0,
];
const E192: &[f64] = &[
    100.0, 101.0, 102.0, 104.0, 105.0, 106.0, 107.0, 109.0, 110.0, 111.0, 113.0, 114.0, 115.0,
    117.0, 118.0, 120.0, 121.0, 123.0, 124.0, 126.0, 127.0, 129.0, 130.0, 132.0, 133.0, 135.0,
    137.0, 138.0, 140.0, 142.0, 143.0, 145.0, 147.0, 149.0, 150.0, 152.0, 154.0, 156.0, 158.0,
    160.0, 162.0, 164.0, 165.0, 167.0, 169.0, 172.0, 174.0, 176.0, 178.0, 180.0, 182.0, 184.0,
    187.0, 189.0, 191.0, 193.0, 196.0, 198.0, 200.0, 203.0, 205.0, 208.0, 210.0, 213.0, 215.0,
    218.0, 221.0, 223.0, 226.0, 229.0, 232.0, 234.0, 237.0, 240.0, 243.0, 246.0, 249.0, 252.0,
    255.0, 258.0, 261.0, 264.0, 267.0, 271.0, 274.0, 277.0, 280.0, 284.0, 287.0, 291.0, 294.0,
    298.0, 301.0, 305.0, 309.0, 312.0, 316.0, 320.0, 324.0, 328.0, 332.0, 336.0, 340.0, 344.0,
    348.0, 352.0, 357.0, 361.0, 365.0, 370.0, 374.0, 379.0, 383.0, 388.0, 392.0, 397.0, 402.0,
    407.0, 412.0, 417.0, 422.0, 427.0, 432.0, 437.0, 442.0, 448.0, 453.0, 459.0, 464.0, 470.0,
    475.0, 481.0, 487.0, 493.0, 499.0, 505.0, 511.0, 517.0, 523.0, 530.0, 536.0, 542.0, 549.0,
    556.0, 562.0, 569.0, 576.0, 583.0, 590.0, 597.0, 604.0, 612.0, 619.0, 626.0, 634.0, 642.0,
    649.0, 657.0, 665.0, 673.0, 681.0, 690.0, 698.0, 706.0, 715.0, 723.0, 732.0, 741.0, 750.0,
    759.0, 768.0, 777.0, 787.0, 796.0, 806.0, 816.0, 825.0, 835.0, 845.0, 856.0, 866.0, 876.0,
    887.0, 898.0, 909.0, 920.0, 931.0, 942.0, 953.0, 965.0, 976.0, 988.0,
];

impl Granularity {
    fn parse(name: &str) -> Result<Granularity> {
        Ok(match name {
            "R5" => Granularity::Series("R5", R5),
            "R10" => Granularity::Series("R10", R10),
            "R20" => Granularity::Series("R20", R20),
            "R40" => Granularity::Series("R40", R40),
            "1-2-5" => Granularity::Series("1-2-5", ONE_TWO_FIVE),
            "E6" => Granularity::Series("E6", E6),
            "E12" => Granularity::Series("E12", E12),
            "E24" => Granularity::Series("E24", E24),
            "E48" => Granularity::Series("E48", E48),
            "POWERSOF2" => Granularity::PowersOf2,
            "R80" => Granularity::Series("R80", R80),
            "E96" => Granularity::Series("E96", E96),
            "E192" => Granularity::Series("E192", E192),
            other => {
                return Err(loc(
                    40257,
                    format!("Unknown rounding granularity '{other}'"),
                ));
            }
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Granularity::Series(n, _) => n,
            Granularity::PowersOf2 => "POWERSOF2",
        }
    }

    /// The numeric value, checked as MongoDB checks it.
    fn number(&self, v: RawBsonRef<'_>) -> Result<f64> {
        let x = match v {
            RawBsonRef::Int32(i) => f64::from(i),
            RawBsonRef::Int64(i) => i as f64,
            RawBsonRef::Double(d) => d,
            RawBsonRef::Decimal128(d) => {
                cairn_storage::decimal::to_f64(cairn_storage::decimal::Decimal::from_decimal128(d))
            }
            other => {
                return Err(loc(
                    40258,
                    format!(
                        "$bucketAuto can specify a 'granularity' with numeric boundaries only, \
                         but found a value with type: {}",
                        display::type_name(other)
                    ),
                ));
            }
        };
        if x < 0.0 || x.is_nan() {
            return Err(loc(
                40260,
                format!(
                    "A granularity of {} cannot be used with a negative or NaN value: {}",
                    self.name(),
                    display::value(v)
                ),
            ));
        }
        Ok(x)
    }

    /// The smallest series value strictly greater than `v` (0 stays as it is). Powers of
    /// two are integers (MongoDB computes them with `$pow: [2, n]`), series values doubles.
    fn round_up(&self, v: RawBsonRef<'_>) -> Result<RawBson> {
        self.round(v, Direction::Up)
    }

    /// The largest series value strictly less than `v` (0 stays as it is).
    fn round_down(&self, v: RawBsonRef<'_>) -> Result<RawBson> {
        self.round(v, Direction::Down)
    }

    /// [`Granularity::round_up`] or [`Granularity::round_down`].
    fn round(&self, v: RawBsonRef<'_>, dir: Direction) -> Result<RawBson> {
        let x = self.number(v)?;
        if x == 0.0 || x.is_infinite() {
            return Ok(RawBson::from(v));
        }
        Ok(match self {
            Granularity::PowersOf2 => {
                // The exponent of the power of two at or below `x`, and whether it is `x`.
                let (floor, exact) = if x >= 1.0 && x.fract() == 0.0 && (x as u64).is_power_of_two()
                {
                    ((x as u64).trailing_zeros() as i32, true)
                } else {
                    (x.log2().floor() as i32, false)
                };
                pow2(match (dir, exact) {
                    (Direction::Up, _) => floor + 1,
                    (Direction::Down, true) => floor - 1,
                    (Direction::Down, false) => floor,
                })
            }
            Granularity::Series(_, s) => match v {
                RawBsonRef::Decimal128(d) => decimal_round(s, d, dir),
                _ => RawBson::Double(match dir {
                    Direction::Up => series_up(s, x),
                    Direction::Down => series_down(s, x),
                }),
            },
        })
    }
}

/// Which way [`decimal_round`] rounds.
#[derive(Clone, Copy)]
enum Direction {
    Up,
    Down,
}

/// The smallest `s[i] × m` strictly above `x`, `m` a power of ten reached from 1 by ×10 or
/// ÷10 steps, as MongoDB's `GranularityRounderPreferredNumbers::roundUp` computes it (`x`
/// positive and finite).
fn series_up(s: &[f64], x: f64) -> f64 {
    let (first, last) = (s[0], s[s.len() - 1]);
    let mut m = 1.0;
    while x >= last * m {
        m *= 10.0;
    }
    while x < first * m {
        let previous_min = first * m;
        m /= 10.0;
        if x >= last * m {
            return previous_min;
        }
    }
    s.iter().map(|b| b * m).find(|c| x < *c).unwrap_or(last * m)
}

/// The largest `s[i] × m` strictly below `x` (`roundDown`; `x` positive and finite).
fn series_down(s: &[f64], x: f64) -> f64 {
    let (first, last) = (s[0], s[s.len() - 1]);
    let mut m = 1.0;
    while x <= first * m {
        m /= 10.0;
    }
    while x > last * m {
        let previous_max = last * m;
        m *= 10.0;
        if x <= first * m {
            return previous_max;
        }
    }
    s.iter()
        .rev()
        .map(|b| b * m)
        .find(|c| *c < x)
        .unwrap_or(first * m)
}

/// The series rounding of a Decimal128, in decimal arithmetic as MongoDB does it (so `1.6`
/// comes back as the Decimal128 `1.6`, with the exponent the multiplications give it).
fn decimal_round(s: &[f64], d: bson::Decimal128, dir: Direction) -> RawBson {
    use cairn_storage::decimal::{self as dec, Decimal};
    let x = Decimal::from_decimal128(d);
    if !matches!(x, Decimal::Finite { .. }) || dec::is_zero(x) {
        return RawBson::Decimal128(d);
    }
    let series: Vec<Decimal> = s.iter().map(|b| dec::from_i64(*b as i64)).collect();
    let (first, last) = (series[0], series[series.len() - 1]);
    let ten = dec::from_i64(10);
    let lt = |a: Decimal, b: Decimal| dec::cmp(a, b) == Some(Ordering::Less);
    let le =
        |a: Decimal, b: Decimal| matches!(dec::cmp(a, b), Some(Ordering::Less | Ordering::Equal));
    let mut m = dec::from_i64(1);
    let out = match dir {
        Direction::Up => 'up: {
            while le(dec::mul(last, m), x) {
                m = dec::mul(m, ten);
            }
            while lt(x, dec::mul(first, m)) {
                let previous_min = dec::mul(first, m);
                m = dec::div(m, ten);
                if le(dec::mul(last, m), x) {
                    break 'up previous_min;
                }
            }
            series
                .iter()
                .map(|b| dec::mul(*b, m))
                .find(|c| lt(x, *c))
                .unwrap_or(dec::mul(last, m))
        }
        Direction::Down => 'down: {
            while le(x, dec::mul(first, m)) {
                m = dec::div(m, ten);
            }
            while lt(dec::mul(last, m), x) {
                let previous_max = dec::mul(last, m);
                m = dec::mul(m, ten);
                if le(x, dec::mul(first, m)) {
                    break 'down previous_max;
                }
            }
            series
                .iter()
                .rev()
                .map(|b| dec::mul(*b, m))
                .find(|c| lt(*c, x))
                .unwrap_or(dec::mul(first, m))
        }
    };
    RawBson::Decimal128(dec::encode(out))
}

/// `2^exp` as `$pow` gives it: an int, a long past 2^31, a double for negative exponents.
fn pow2(exp: i32) -> RawBson {
    if exp < 0 {
        return RawBson::Double(2f64.powi(exp));
    }
    if exp < 31 {
        return RawBson::Int32(1 << exp);
    }
    if exp < 63 {
        return RawBson::Int64(1i64 << exp);
    }
    RawBson::Double(2f64.powi(exp))
}

/// A parsed `$bucketAuto`.
#[derive(Debug)]
pub struct BucketAuto {
    group_by_raw: RawBson,
    group_by: Expression,
    buckets: usize,
    accs: Vec<AccumulatorSpec>,
    output_raw: Option<RawBson>,
    granularity: Option<Granularity>,
    ext: ExprExtensions,
}

/// Parses `{$bucketAuto: {…}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            40240,
            format!(
                "The argument to $bucketAuto must be an object, but found type: {}.",
                display::type_name(arg)
            ),
        ));
    };
    let (mut group_by, mut buckets, mut output, mut granularity) = (None, None, None, None);
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "groupBy" => {
                if !valid_group_by(v) {
                    return Err(loc(
                        40239,
                        format!(
                            "The $bucketAuto 'groupBy' field must be defined as a $-prefixed \
                             path or an expression object, but found: {}.",
                            display::value(v)
                        ),
                    ));
                }
                group_by = Some(v);
            }
            "buckets" => {
                let n = match v {
                    RawBsonRef::Int32(i) => f64::from(i),
                    RawBsonRef::Int64(i) => i as f64,
                    RawBsonRef::Double(f) => f,
                    RawBsonRef::Decimal128(dd) => cairn_storage::decimal::to_f64(
                        cairn_storage::decimal::Decimal::from_decimal128(dd),
                    ),
                    other => {
                        return Err(loc(
                            40241,
                            format!(
                                "The $bucketAuto 'buckets' field must be a numeric value, but \
                                 found type: {}.",
                                display::type_name(other)
                            ),
                        ));
                    }
                };
                if n.fract() != 0.0 || !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&n) {
                    return Err(loc(
                        40242,
                        format!(
                            "The $bucketAuto 'buckets' field must be representable as a 32-bit \
                             integer, but found {}.",
                            display::value(v)
                        ),
                    ));
                }
                if n <= 0.0 {
                    return Err(loc(
                        40243,
                        format!(
                            "The $bucketAuto 'buckets' field must be greater than 0, but found: \
                             {}.",
                            n as i64
                        ),
                    ));
                }
                buckets = Some(n as usize);
            }
            "output" => output = Some(v),
            "granularity" => {
                let RawBsonRef::String(g) = v else {
                    return Err(loc(
                        40261,
                        format!(
                            "The $bucketAuto 'granularity' field must be a string, but found \
                             type: {}.",
                            display::type_name(v)
                        ),
                    ));
                };
                granularity = Some(Granularity::parse(g)?);
            }
            other => {
                return Err(loc(
                    40245,
                    format!("Unrecognized option to $bucketAuto: {other}."),
                ));
            }
        }
    }
    let (Some(group_by), Some(buckets)) = (group_by, buckets) else {
        return Err(loc(
            40246,
            "$bucketAuto requires 'groupBy' and 'buckets' to be specified",
        ));
    };
    let accs = output_specs("$bucketAuto", 40244, output, cx)?;
    Ok(vec![Arc::new(BucketAuto {
        group_by_raw: RawBson::from(group_by),
        group_by: cx.ext.parse_expression(group_by)?,
        buckets,
        accs,
        output_raw: output.map(RawBson::from),
        granularity,
        ext: cx.ext.clone(),
    })])
}

impl Stage for BucketAuto {
    fn name(&self) -> &'static str {
        "$bucketAuto"
    }

    fn serialize(&self) -> RawBson {
        let mut d = rawdoc! {};
        d.append(bson::raw::cstr!("groupBy"), self.group_by_raw.clone());
        d.append(bson::raw::cstr!("buckets"), self.buckets as i32);
        if let Some(o) = &self.output_raw {
            d.append(bson::raw::cstr!("output"), o.clone());
        }
        if let Some(g) = &self.granularity {
            d.append(bson::raw::cstr!("granularity"), g.name());
        }
        RawBson::Document(d)
    }

    fn deps(&self, deps: &mut Deps) -> DepsState {
        deps.add_expr(&self.group_by);
        for a in &self.accs {
            a.deps(deps);
        }
        DepsState::Exhaustive
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(AutoStream {
            stage: self,
            opts: opts.clone(),
            input: Some(input),
            out: std::collections::VecDeque::new(),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct AutoStream {
    stage: Arc<BucketAuto>,
    opts: Arc<Options>,
    input: Option<Box<dyn DocStream>>,
    out: std::collections::VecDeque<RawDocumentBuf>,
}

struct Bucket {
    min: RawBson,
    max: RawBson,
    /// The maximum is a rounded boundary already.
    rounded: bool,
    accs: Vec<Box<dyn Accumulator>>,
}

/// The sorted `(value, document)` pairs (wrapped as `{k: {v}, d}` for the sorter).
struct Entries {
    docs: SortedDocs,
}

impl Entries {
    fn next(&mut self) -> Result<Option<(RawBson, RawDocumentBuf)>> {
        match self.docs.next() {
            None => Ok(None),
            Some(r) => {
                let w = r?;
                let k = w
                    .get_document("k")
                    .ok()
                    .and_then(|k| k.get("v").ok().flatten())
                    .map_or(RawBson::Null, RawBson::from);
                let d = w
                    .get_document("d")
                    .map(RawDocument::to_owned)
                    .unwrap_or_default();
                Ok(Some((k, d)))
            }
        }
    }
}

impl AutoStream {
    fn add(&self, b: &mut Bucket, value: &RawBson, d: &RawDocument) -> Result<()> {
        if compare_values(value.as_raw_bson_ref(), b.max.as_raw_bson_ref()) == Ordering::Greater {
            b.max = value.clone();
        }
        for (spec, acc) in self.stage.accs.iter().zip(b.accs.iter_mut()) {
            let v = spec.input(d)?;
            acc.process(v.as_ref().map(RawBson::as_raw_bson_ref), false)?;
        }
        Ok(())
    }

    fn new_bucket(&self, value: &RawBson) -> Result<Bucket> {
        let id = rawdoc! {"min": value.clone(), "max": value.clone()};
        let mut accs = Vec::new();
        for a in &self.stage.accs {
            accs.push(a.create(RawBsonRef::Document(&id))?);
        }
        Ok(Bucket {
            min: value.clone(),
            max: value.clone(),
            rounded: false,
            accs,
        })
    }

    fn compute(&mut self, mut input: Box<dyn DocStream>, cx: &ExecCx<'_>) -> Result<()> {
        let st = Arc::clone(&self.stage);
        let spec = SortSpec::parse(&rawdoc! {"k": 1})?;
        let mut sorter = Sorter::new(
            spec,
            None,
            self.opts.memory_limit,
            self.opts.allow_disk_use,
            self.opts.spill_dir.clone(),
        );
        let mut n = 0usize;
        while let Some(d) = input.next(cx)? {
            let v = st
                .group_by
                .evaluate(&d, st.ext.variables())?
                .unwrap_or(RawBson::Null);
            if let Some(g) = &st.granularity {
                g.number(v.as_raw_bson_ref())?;
            }
            let mut w = RawDocumentBuf::new();
            w.append(bson::raw::cstr!("k"), rawdoc! {"v": v});
            w.append(bson::raw::cstr!("d"), d);
            sorter.push(w)?;
            n += 1;
            if n.is_multiple_of(1024) {
                cx.host.check_interrupt()?;
            }
        }
        let mut entries = Entries {
            docs: sorter.finish()?,
        };
        let approx = ((n as f64) / (st.buckets as f64)).round().max(1.0) as usize;
        let mut buckets: Vec<Bucket> = Vec::new();
        let mut carry: Option<(RawBson, RawDocumentBuf)> = None;
        for i in 0..st.buckets {
            let last = i + 1 == st.buckets;
            let first = match carry.take() {
                Some(c) => c,
                None => match entries.next()? {
                    Some(c) => c,
                    None => break,
                },
            };
            let mut b = self.new_bucket(&first.0)?;
            self.add(&mut b, &first.0, &first.1)?;
            let mut count = 1usize;
            if last {
                while let Some((v, d)) = entries.next()? {
                    self.add(&mut b, &v, &d)?;
                }
            } else {
                while count < approx {
                    match entries.next()? {
                        Some((v, d)) => {
                            self.add(&mut b, &v, &d)?;
                            count += 1;
                        }
                        None => break,
                    }
                }
                let mut next = entries.next()?;
                if let Some(g) = &st.granularity {
                    if next.is_some() {
                        let mut bound = g.round_up(b.max.as_raw_bson_ref())?;
                        while let Some((v, d)) = next.take() {
                            if compare_values(v.as_raw_bson_ref(), bound.as_raw_bson_ref())
                                == Ordering::Less
                            {
                                self.add(&mut b, &v, &d)?;
                                next = entries.next()?;
                            } else {
                                next = Some((v, d));
                                break;
                            }
                        }
                        if let Some((v, _)) = &next
                            && g.number(bound.as_raw_bson_ref())? == 0.0
                            && g.number(b.min.as_raw_bson_ref())? == 0.0
                        {
                            bound = g.round_down(v.as_raw_bson_ref())?;
                        }
                        b.max = bound;
                        b.rounded = true;
                    }
                } else {
                    while let Some((v, d)) = next.take() {
                        if compare_values(v.as_raw_bson_ref(), b.max.as_raw_bson_ref())
                            == Ordering::Equal
                        {
                            self.add(&mut b, &v, &d)?;
                            next = entries.next()?;
                        } else {
                            next = Some((v, d));
                            break;
                        }
                    }
                    if let Some((v, _)) = &next {
                        b.max = v.clone();
                    }
                }
                carry = next;
            }
            buckets.push(b);
        }
        if let Some(g) = &st.granularity {
            // The first minimum rounded down, each minimum the previous maximum, the last
            // maximum rounded up.
            let mut prev: Option<RawBson> = None;
            let len = buckets.len();
            for (i, b) in buckets.iter_mut().enumerate() {
                b.min = match prev.take() {
                    Some(m) => m,
                    None => g.round_down(b.min.as_raw_bson_ref())?,
                };
                if i + 1 == len && !b.rounded {
                    b.max = g.round_up(b.max.as_raw_bson_ref())?;
                }
                prev = Some(b.max.clone());
            }
        }
        for b in buckets {
            let mut d = RawDocumentBuf::new();
            d.append(
                bson::raw::cstr!("_id"),
                rawdoc! {"min": b.min, "max": b.max},
            );
            for (spec, acc) in st.accs.iter().zip(&b.accs) {
                d.append(key(&spec.field)?, acc.value()?.unwrap_or(RawBson::Null));
            }
            self.out.push_back(d);
        }
        Ok(())
    }
}

impl DocStream for AutoStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if let Some(input) = self.input.take() {
            self.compute(input, cx)?;
        }
        Ok(self.out.pop_front())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> bson::Decimal128 {
        s.parse().expect("decimal")
    }

    #[test]
    fn tables_are_mongodbs() {
        for (name, s) in [
            ("R5", R5),
            ("R10", R10),
            ("R20", R20),
            ("R40", R40),
            ("R80", R80),
            ("1-2-5", ONE_TWO_FIVE),
            ("E6", E6),
            ("E12", E12),
            ("E24", E24),
            ("E48", E48),
            ("E96", E96),
            ("E192", E192),
        ] {
            assert!(s.windows(2).all(|w| w[0] < w[1]), "{name} sorted");
            assert!(s.iter().all(|v| v.fract() == 0.0), "{name} integers");
            assert!(matches!(
                Granularity::parse(name),
                Ok(Granularity::Series(n, _)) if n == name
            ));
        }
        assert_eq!(
            (R40.len(), R80.len(), E96.len(), E192.len()),
            (39, 40, 96, 192)
        );
        assert!(!R40.contains(&335.0), "MongoDB's R40 has no 335");
    }

    #[test]
    fn doubles_round_with_mongodbs_arithmetic() {
        // Inside the table's own decade: exact integers.
        assert_eq!(series_up(R20, 112.0), 125.0);
        assert_eq!(series_down(R20, 112.0), 100.0);
        // A decade down: the table times 0.01 (reached by two ÷10 steps), not 1.12 × 1.
        // (112 × 0.01 is 1.12 itself, so up goes to the next value.)
        assert_eq!(series_up(R20, 1.12), 125.0 * (1.0 / 10.0 / 10.0));
        assert_eq!(series_down(R20, 1.13), 112.0 * (1.0 / 10.0 / 10.0));
        assert_eq!(series_up(R10, 0.3), 315.0 * (1.0 / 10.0 / 10.0 / 10.0));
        // The textbook product would give 112.00000000000001.
        assert_eq!(series_up(R20, 111.0), 112.0);
        assert_ne!(1.12 * 100.0, 112.0);
        // Between one decade's largest and the next one's smallest.
        assert_eq!(series_up(R80, 100.0), 103.0);
        assert_eq!(series_down(R80, 100.0), 97.5);
        assert_eq!(series_up(E6, 0.8), 1.0);
        assert_eq!(series_down(E6, 0.8), 0.68);
        assert_eq!(series_up(E192, 988.0), 1000.0);
        assert_eq!(series_up(E192, 987.5), 988.0);
        // 976 × 0.1, as MongoDB computes it.
        assert_eq!(series_down(E96, 100.0), 97.600_000_000_000_01);
        // Tiny and huge values end.
        assert!(series_up(E12, 5e-324) > 0.0);
        assert!(series_down(E12, f64::MAX) < f64::MAX);
    }

    #[test]
    fn decimals_round_in_decimal_arithmetic() {
        let up = |s, v: &str| decimal_round(s, dec(v), Direction::Up);
        let down = |s, v: &str| decimal_round(s, dec(v), Direction::Down);
        assert_eq!(up(E6, "1.5"), RawBson::Decimal128(dec("2.2")));
        assert_eq!(down(E6, "1.5"), RawBson::Decimal128(dec("1.0")));
        assert_eq!(up(R80, "100"), RawBson::Decimal128(dec("103")));
        assert_eq!(down(R80, "100"), RawBson::Decimal128(dec("97.5")));
        assert_eq!(up(R20, "1.12"), RawBson::Decimal128(dec("1.25")));
        // Zero and infinity come back as they are; extreme exponents end.
        assert_eq!(up(E6, "0"), RawBson::Decimal128(dec("0")));
        assert_eq!(up(E6, "Infinity"), RawBson::Decimal128(dec("Infinity")));
        assert!(matches!(up(E6, "1E-6176"), RawBson::Decimal128(_)));
        assert!(matches!(
            down(E6, "9.999999999999999999999999999999999E+6144"),
            RawBson::Decimal128(_)
        ));
    }

    #[test]
    fn infinity_is_its_own_rounding() {
        let g = Granularity::parse("E6").expect("E6");
        let inf = RawBsonRef::Double(f64::INFINITY);
        assert_eq!(g.round_up(inf).expect("up"), RawBson::Double(f64::INFINITY));
        assert_eq!(
            g.round_down(inf).expect("down"),
            RawBson::Double(f64::INFINITY)
        );
    }
}
