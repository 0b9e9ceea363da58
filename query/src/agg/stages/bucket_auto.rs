//! `$bucketAuto: {groupBy, buckets, output, granularity}`: sorts the input by `groupBy` and
//! cuts it into `buckets` buckets of about equal size (DocumentSourceBucketAuto): each bucket
//! takes ⌊n / buckets⌉ documents, plus any following ones with the same value; its `_id` is
//! `{min, max}` where `max` is the next bucket's `min` (the last bucket's own largest value).
//! With `granularity` the boundaries are rounded to a preferred-number series (`R5 R10 R20
//! R40 1-2-5 E6 E12 E24 E48 POWERSOF2`; the first `min` rounded down, each `max` up, and
//! documents below a rounded boundary absorbed). Without `output` each bucket counts its
//! documents. The sort spills to disk with `allowDiskUse` (292 otherwise).
//!
//! Errors: 40240 not an object, 40244 unknown option, 40246 missing `groupBy`/`buckets`,
//! 40239 bad `groupBy`, 40241 non-positive `buckets`, 40242 not a 32-bit integer, 40243 not
//! a number, 40245 `output` not an object, 40261 bad `granularity`, 40257/40258 values not
//! numeric or negative with a granularity, 238 the series Cairn lacks (`R80 E96 E192`).

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

/// A preferred-number series (values in [1, 10)), or powers of two.
#[derive(Debug, Clone)]
enum Granularity {
    Series(&'static str, &'static [f64]),
    PowersOf2,
}

const R5: &[f64] = &[1.0, 1.6, 2.5, 4.0, 6.3];
const R10: &[f64] = &[1.0, 1.25, 1.6, 2.0, 2.5, 3.15, 4.0, 5.0, 6.3, 8.0];
const R20: &[f64] = &[
    1.0, 1.12, 1.25, 1.4, 1.6, 1.8, 2.0, 2.24, 2.5, 2.8, 3.15, 3.55, 4.0, 4.5, 5.0, 5.6, 6.3, 7.1,
    8.0, 9.0,
];
const R40: &[f64] = &[
    1.0, 1.06, 1.12, 1.18, 1.25, 1.32, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.12, 2.24, 2.36, 2.5,
    2.65, 2.8, 3.0, 3.15, 3.35, 3.55, 3.75, 4.0, 4.25, 4.5, 4.75, 5.0, 5.3, 5.6, 6.0, 6.3, 6.7,
    7.1, 7.5, 8.0, 8.5, 9.0, 9.5,
];
const ONE_TWO_FIVE: &[f64] = &[1.0, 2.0, 5.0];
const E6: &[f64] = &[1.0, 1.5, 2.2, 3.3, 4.7, 6.8];
const E12: &[f64] = &[1.0, 1.2, 1.5, 1.8, 2.2, 2.7, 3.3, 3.9, 4.7, 5.6, 6.8, 8.2];
const E24: &[f64] = &[
    1.0, 1.1, 1.2, 1.3, 1.5, 1.6, 1.8, 2.0, 2.2, 2.4, 2.7, 3.0, 3.3, 3.6, 3.9, 4.3, 4.7, 5.1, 5.6,
    6.2, 6.8, 7.5, 8.2, 9.1,
];
const E48: &[f64] = &[
    1.0, 1.05, 1.1, 1.15, 1.21, 1.27, 1.33, 1.4, 1.47, 1.54, 1.62, 1.69, 1.78, 1.87, 1.96, 2.05,
    2.15, 2.26, 2.37, 2.49, 2.61, 2.74, 2.87, 3.01, 3.16, 3.32, 3.48, 3.65, 3.83, 4.02, 4.22, 4.42,
    4.64, 4.87, 5.11, 5.36, 5.62, 5.9, 6.19, 6.49, 6.81, 7.15, 7.5, 7.87, 8.25, 8.66, 9.09, 9.53,
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
            "R80" | "E96" | "E192" => {
                return Err(QueryError::NotImplemented(format!(
                    "the {name} granularity of $bucketAuto is not supported by Cairn yet"
                )));
            }
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
        let x = self.number(v)?;
        if x == 0.0 {
            return Ok(RawBson::from(v));
        }
        Ok(match self {
            Granularity::PowersOf2 => {
                let exp = if x >= 1.0 && x.fract() == 0.0 && (x as u64).is_power_of_two() {
                    (x as u64).trailing_zeros() as i32 + 1
                } else {
                    x.log2().floor() as i32 + 1
                };
                pow2(exp)
            }
            Granularity::Series(_, s) => {
                let mut mag = 10f64.powi(x.log10().floor() as i32);
                loop {
                    if let Some(c) = s.iter().map(|b| b * mag).find(|c| *c > x) {
                        break RawBson::Double(c);
                    }
                    mag *= 10.0;
                }
            }
        })
    }

    /// The largest series value strictly less than `v` (0 stays as it is).
    fn round_down(&self, v: RawBsonRef<'_>) -> Result<RawBson> {
        let x = self.number(v)?;
        if x == 0.0 {
            return Ok(RawBson::from(v));
        }
        Ok(match self {
            Granularity::PowersOf2 => {
                let exp = if x >= 1.0 && x.fract() == 0.0 && (x as u64).is_power_of_two() {
                    (x as u64).trailing_zeros() as i32 - 1
                } else {
                    x.log2().floor() as i32
                };
                pow2(exp)
            }
            Granularity::Series(_, s) => {
                let mut mag = 10f64.powi(x.log10().floor() as i32);
                loop {
                    if let Some(c) = s.iter().rev().map(|b| b * mag).find(|c| *c < x) {
                        break RawBson::Double(c);
                    }
                    mag /= 10.0;
                }
            }
        })
    }
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
