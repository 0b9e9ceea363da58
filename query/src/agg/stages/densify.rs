//! `$densify: {field, partitionByFields, range: {step, unit, bounds}}`: inserts documents so
//! that `field` takes every value of a step grid (MongoDB's `document_source_densify.cpp`).
//!
//! Desugared, as MongoDB does, into a `$sort` (on the partition fields then `field`; on
//! `field` alone for `bounds: "full"`) and `$_internalDensify`, which streams:
//! - documents whose `field` is null or missing pass through;
//! - the grid starts at the lower bound (`[lo, hi]`: `lo`; `"full"`: the smallest value of the
//!   whole input; `"partition"`: each partition's smallest value) and advances by `step`
//!   (`$add` for numbers, `dateAdd` with `unit` for dates, in UTC);
//! - before each document, the grid values its partition has not reached yet and that are
//!   below the document's value (and below `hi` for explicit bounds) are generated as
//!   documents holding the partition fields and `field`; a document on the grid is not
//!   generated again;
//! - at the end, explicit bounds complete every partition up to `hi` (exclusive), `"full"`
//!   completes every partition up to the largest value seen (inclusive when it is on the
//!   grid).
//!
//! Errors: FailedToParse for a non-object; 40414/40415/TypeMismatch as MongoDB's IDL parser
//! words them; step 5733401/6586400; bounds 5733402–5733410, 5946800, 5946802; field paths
//! 16410…; `"partition"` without partition fields 5733408; values that are neither numbers
//! nor dates 5733201, or of the other kind than `unit` says 6053600; more generated documents
//! than [`Options::densify_max_docs`] 5897900.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::compare::compare_values;

use crate::agg::accumulators::value_key;
use crate::agg::doc::{get_nested, key, set_nested};
use crate::agg::{DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};
use crate::expr::{ArithOp, arith};
use crate::sort::validate_field_path;

use super::sort;

/// `range.bounds`.
#[derive(Debug, Clone)]
enum Bounds {
    Full,
    Partition,
    Explicit(RawBson, RawBson),
}

/// The parsed `$_internalDensify`.
#[derive(Debug)]
pub struct Densify {
    field: String,
    path: Vec<String>,
    partitions: Vec<String>,
    step: RawBson,
    unit: Option<String>,
    bounds: Bounds,
}

fn type_mismatch(field: &str, v: RawBsonRef<'_>, expected: &str) -> QueryError {
    QueryError::TypeMismatch(format!(
        "BSON field '$densify.{field}' is the wrong type '{}', expected {expected}",
        cairn_storage::display::type_name(v)
    ))
}

fn is_number(v: RawBsonRef<'_>) -> bool {
    matches!(
        v,
        RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_)
    )
}

fn positive(v: RawBsonRef<'_>) -> bool {
    compare_values(v, RawBsonRef::Int32(0)) == std::cmp::Ordering::Greater
        && !matches!(v, RawBsonRef::Double(d) if d.is_nan())
}

fn integral64(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Int32(_) | RawBsonRef::Int64(_) => true,
        RawBsonRef::Double(d) => d.fract() == 0.0 && d.abs() < 9.2e18,
        RawBsonRef::Decimal128(d) => {
            let x = cairn_storage::decimal::Decimal::from_decimal128(d);
            cairn_storage::decimal::to_i64(x, cairn_storage::decimal::Rounding::TowardZero)
                .is_some_and(|i| {
                    cairn_storage::decimal::cmp(cairn_storage::decimal::from_i64(i), x)
                        == Some(std::cmp::Ordering::Equal)
                })
        }
        _ => false,
    }
}

fn as_i64(v: &RawBson) -> i64 {
    match v {
        RawBson::Int32(i) => i64::from(*i),
        RawBson::Int64(l) => *l,
        RawBson::Double(d) => *d as i64,
        RawBson::Decimal128(d) => cairn_storage::decimal::to_i64(
            cairn_storage::decimal::Decimal::from_decimal128(*d),
            cairn_storage::decimal::Rounding::TowardZero,
        )
        .unwrap_or(0),
        _ => 0,
    }
}

fn parse_range(r: &RawDocument) -> Result<(RawBson, Option<String>, Bounds)> {
    let (mut step, mut unit, mut bounds) = (None, None, None);
    for el in r.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "step" => {
                if !is_number(v) {
                    return Err(type_mismatch(
                        "range.step",
                        v,
                        "types '[int, decimal, double, long']",
                    ));
                }
                step = Some(v);
            }
            "unit" => match v {
                RawBsonRef::String(s) => unit = Some(s.to_string()),
                other => return Err(type_mismatch("range.unit", other, "type 'string'")),
            },
            "bounds" => bounds = Some(v),
            other => {
                return Err(loc(
                    40415,
                    format!("BSON field '$densify.range.{other}' is an unknown field."),
                ));
            }
        }
    }
    let missing = |f: &str| {
        loc(
            40414,
            format!("BSON field '$densify.range.{f}' is missing but a required field"),
        )
    };
    let step = step.ok_or_else(|| missing("step"))?;
    let bounds = bounds.ok_or_else(|| missing("bounds"))?;
    if !positive(step) {
        return Err(loc(
            5733401,
            "The step parameter in a range statement must be a strictly positive numeric value",
        ));
    }
    if let Some(u) = &unit {
        if !integral64(step) {
            return Err(loc(
                6586400,
                "The step parameter in a range statement must be a whole number when densifying \
                 a date range",
            ));
        }
        if !crate::expr::is_time_unit(u) {
            return Err(QueryError::FailedToParse(format!(
                "unknown time unit value: {u}"
            )));
        }
    }
    let bounds = match bounds {
        RawBsonRef::Array(a) => {
            let items: Vec<RawBsonRef<'_>> = a.into_iter().flatten().collect();
            let [lo, hi] = items.as_slice() else {
                return Err(loc(
                    5733403,
                    "A bounding array in a range statement must have exactly two elements",
                ));
            };
            if compare_values(*lo, *hi) == std::cmp::Ordering::Greater {
                return Err(loc(
                    5733402,
                    "A bounding array must be an ascending array of either two dates or two \
                     numbers",
                ));
            }
            if is_number(*lo) {
                if unit.is_some() {
                    return Err(loc(5733409, "Numeric bounds may not have unit parameter"));
                }
                if !is_number(*hi) {
                    return Err(loc(
                        5733406,
                        "A bounding array must contain either both dates or both numeric types",
                    ));
                }
            } else if let RawBsonRef::DateTime(_) = lo {
                if !matches!(hi, RawBsonRef::DateTime(_)) {
                    return Err(loc(
                        5733405,
                        "A bounding array must contain either both dates or both numeric types",
                    ));
                }
                if unit.is_none() {
                    return Err(loc(
                        5733410,
                        "A bounding array of dates must specify a unit",
                    ));
                }
            } else {
                return Err(loc(5946800, "Explicit bounds must be numeric or dates"));
            }
            Bounds::Explicit(RawBson::from(*lo), RawBson::from(*hi))
        }
        RawBsonRef::String("full") => Bounds::Full,
        RawBsonRef::String("partition") => Bounds::Partition,
        RawBsonRef::String(_) => {
            return Err(loc(
                5946802,
                "Bounds string must either be 'full' or 'partition'",
            ));
        }
        _ => {
            return Err(loc(
                5733404,
                "The bounds in a range statement must be the string 'full', 'partition', or an \
                 ascending array of two numbers or two dates",
            ));
        }
    };
    Ok((RawBson::from(step), unit, bounds))
}

/// Parses `{$densify: {…}}` into `$sort` + `$_internalDensify`.
pub fn parse(arg: RawBsonRef<'_>, _cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(QueryError::FailedToParse(format!(
            "The $densify stage specification must be an object, found {}",
            cairn_storage::display::type_name(arg)
        )));
    };
    let (mut field, mut partitions, mut range) = (None, Vec::new(), None);
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "field" => match v {
                RawBsonRef::String(s) => field = Some(s.to_string()),
                other => return Err(type_mismatch("field", other, "type 'string'")),
            },
            "partitionByFields" => {
                let RawBsonRef::Array(a) = v else {
                    return Err(type_mismatch("partitionByFields", v, "type 'array'"));
                };
                for (i, e) in a.into_iter().enumerate() {
                    let e = e.map_err(|e| QueryError::BadValue(e.to_string()))?;
                    match e {
                        RawBsonRef::String(s) => partitions.push(s.to_string()),
                        other => {
                            return Err(type_mismatch(
                                &format!("partitionByFields.{i}"),
                                other,
                                "type 'string'",
                            ));
                        }
                    }
                }
            }
            "range" => match v {
                RawBsonRef::Document(r) => range = Some(r),
                other => return Err(type_mismatch("range", other, "type 'object'")),
            },
            other => {
                return Err(loc(
                    40415,
                    format!("BSON field '$densify.{other}' is an unknown field."),
                ));
            }
        }
    }
    let Some(field) = field else {
        return Err(loc(
            40414,
            "BSON field '$densify.field' is missing but a required field",
        ));
    };
    let Some(range) = range else {
        return Err(loc(
            40414,
            "BSON field '$densify.range' is missing but a required field",
        ));
    };
    let (step, unit, bounds) = parse_range(range)?;
    for p in &partitions {
        validate_field_path(p)?;
    }
    let path: Vec<String> = validate_field_path(&field)?
        .into_iter()
        .map(str::to_string)
        .collect();
    if matches!(bounds, Bounds::Partition) && partitions.is_empty() {
        return Err(loc(
            5733408,
            "One cannot specify the bounds as 'partition' without specifying a non-empty array of \
             partitionByFields. You may have meant to specify 'full' bounds.",
        ));
    }
    let mut sort_doc = RawDocumentBuf::new();
    if !matches!(bounds, Bounds::Full) {
        for p in &partitions {
            sort_doc.append(key(p)?, 1);
        }
    }
    sort_doc.append(key(&field)?, 1);
    Ok(vec![
        Arc::new(sort::Sort::from_doc(&sort_doc)?),
        Arc::new(Densify {
            field,
            path,
            partitions,
            step,
            unit,
            bounds,
        }),
    ])
}

impl Stage for Densify {
    fn name(&self) -> &'static str {
        "$_internalDensify"
    }

    fn serialize(&self) -> RawBson {
        let mut range = RawDocumentBuf::new();
        range.append(bson::raw::cstr!("step"), self.step.clone());
        match &self.bounds {
            Bounds::Full => range.append(bson::raw::cstr!("bounds"), "full"),
            Bounds::Partition => range.append(bson::raw::cstr!("bounds"), "partition"),
            Bounds::Explicit(lo, hi) => {
                let mut a = RawArrayBuf::new();
                a.push(lo.clone());
                a.push(hi.clone());
                range.append(bson::raw::cstr!("bounds"), a);
            }
        }
        if let Some(u) = &self.unit {
            range.append(bson::raw::cstr!("unit"), u.as_str());
        }
        let mut parts = RawArrayBuf::new();
        for p in &self.partitions {
            parts.push(p.as_str());
        }
        let mut d = RawDocumentBuf::new();
        d.append(bson::raw::cstr!("field"), self.field.as_str());
        d.append(bson::raw::cstr!("partitionByFields"), parts);
        d.append(bson::raw::cstr!("range"), range);
        RawBson::Document(d)
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(DensifyStream {
            stage: self,
            input,
            max_docs: opts.densify_max_docs,
            out: VecDeque::new(),
            parts: Vec::new(),
            anchor: None,
            global_max: None,
            generated: 0,
            done: false,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One partition's progress: its fields (copied into generated documents) and the last grid
/// value it reached.
struct Part {
    key: Vec<u8>,
    include: RawDocumentBuf,
    current: Option<RawBson>,
}

struct DensifyStream {
    stage: Arc<Densify>,
    input: Box<dyn DocStream>,
    max_docs: usize,
    out: VecDeque<RawDocumentBuf>,
    /// Partitions in first-seen order.
    parts: Vec<Part>,
    /// The grid start of `"full"` (the first value seen).
    anchor: Option<RawBson>,
    global_max: Option<RawBson>,
    generated: usize,
    done: bool,
}

fn cmp(a: &RawBson, b: &RawBson) -> std::cmp::Ordering {
    compare_values(a.as_raw_bson_ref(), b.as_raw_bson_ref())
}

impl DensifyStream {
    fn step(&self, v: &RawBson) -> Result<RawBson> {
        match (v, &self.stage.unit) {
            (RawBson::DateTime(d), Some(u)) => {
                let ms =
                    crate::expr::date_add_utc(d.timestamp_millis(), u, as_i64(&self.stage.step))?;
                Ok(RawBson::DateTime(bson::DateTime::from_millis(ms)))
            }
            _ => arith(
                ArithOp::Add,
                Some(v.as_raw_bson_ref()),
                Some(self.stage.step.as_raw_bson_ref()),
            ),
        }
    }

    fn check(&self, v: RawBsonRef<'_>) -> Result<()> {
        let date = matches!(v, RawBsonRef::DateTime(_));
        if !date && !is_number(v) {
            return Err(loc(5733201, "Densify field type must be numeric or a date"));
        }
        match (date, self.stage.unit.is_some()) {
            (false, true) => Err(loc(
                6053600,
                "Encountered non-date value in collection when step has a date unit.",
            )),
            (true, false) => Err(loc(
                6053600,
                "Encountered date value in collection when step does not have a date unit.",
            )),
            _ => Ok(()),
        }
    }

    /// The partition fields of `doc` (as `{p: "$p", …}` evaluates).
    fn include_of(&self, doc: &RawDocument) -> Result<RawDocumentBuf> {
        let mut inc = RawDocumentBuf::new();
        for p in &self.stage.partitions {
            let parts: Vec<&str> = p.split('.').collect();
            if let Some(v) = get_nested(doc, &parts) {
                inc = set_nested(&inc, &parts, Some(v))?;
            }
        }
        Ok(inc)
    }

    fn part_index(&mut self, doc: &RawDocument) -> Result<usize> {
        let include = self.include_of(doc)?;
        let k = value_key(RawBsonRef::Document(&include));
        if let Some(i) = self.parts.iter().position(|p| p.key == k) {
            return Ok(i);
        }
        self.parts.push(Part {
            key: k,
            include,
            current: None,
        });
        Ok(self.parts.len() - 1)
    }

    fn generate(&mut self, part: usize, value: &RawBson) -> Result<()> {
        self.generated += 1;
        if self.generated > self.max_docs {
            return Err(loc(
                5897900,
                format!(
                    "Generated {} documents in $densify, which is over the limit of {}. Increase \
                     the 'internalQueryMaxAllowedDensifyDocs' parameter to allow more generated \
                     documents",
                    self.generated, self.max_docs
                ),
            ));
        }
        let include = self
            .parts
            .get(part)
            .map(|p| p.include.clone())
            .unwrap_or_default();
        for (i, prefix) in self.stage.path.iter().enumerate() {
            match get_nested(&include, &self.stage.path[..=i]) {
                Some(RawBsonRef::Array(_)) => {
                    return Err(loc(
                        5733307,
                        "$densify cannot generate fields nested inside arrays",
                    ));
                }
                Some(RawBsonRef::Document(_)) | None => {}
                Some(_) if i + 1 < self.stage.path.len() => {
                    let _ = prefix;
                    return Err(loc(
                        5733308,
                        "$densify cannot overwrite non-object values with objects",
                    ));
                }
                Some(_) => {}
            }
        }
        let d = set_nested(&include, &self.stage.path, Some(value.as_raw_bson_ref()))?;
        self.out.push_back(d);
        Ok(())
    }

    /// Generates the grid values of partition `part` from `from` while `keep(value)`.
    fn fill(&mut self, part: usize, from: RawBson, keep: &dyn Fn(&RawBson) -> bool) -> Result<()> {
        let mut g = from;
        while keep(&g) {
            self.generate(part, &g)?;
            if let Some(p) = self.parts.get_mut(part) {
                p.current = Some(g.clone());
            }
            g = self.step(&g)?;
        }
        Ok(())
    }

    fn process(&mut self, doc: RawDocumentBuf) -> Result<()> {
        let v = match get_nested(&doc, &self.stage.path) {
            None | Some(RawBsonRef::Null | RawBsonRef::Undefined) => {
                self.out.push_back(doc);
                return Ok(());
            }
            Some(v) => v,
        };
        self.check(v)?;
        let val = RawBson::from(v);
        let part = self.part_index(&doc)?;
        let current = self.parts.get(part).and_then(|p| p.current.clone());
        match self.stage.bounds.clone() {
            Bounds::Full | Bounds::Partition => {
                let full = matches!(self.stage.bounds, Bounds::Full);
                if full {
                    if self.anchor.is_none() {
                        self.anchor = Some(val.clone());
                    }
                    self.global_max = Some(val.clone());
                }
                let next = match (&current, full) {
                    (Some(c), _) => Some(self.step(c)?),
                    (None, true) => self.anchor.clone(),
                    (None, false) => None,
                };
                match next {
                    None => {
                        // A partition's first value starts its grid.
                        if let Some(p) = self.parts.get_mut(part) {
                            p.current = Some(val.clone());
                        }
                    }
                    Some(n) => {
                        let upto = val.clone();
                        self.fill(part, n, &|g| cmp(g, &upto) == std::cmp::Ordering::Less)?;
                        self.settle(part, &val)?;
                    }
                }
            }
            Bounds::Explicit(lo, hi) => {
                if cmp(&val, &lo) == std::cmp::Ordering::Less {
                    self.out.push_back(doc);
                    return Ok(());
                }
                let next = match &current {
                    Some(c) => self.step(c)?,
                    None => lo.clone(),
                };
                let upto = if cmp(&val, &hi) == std::cmp::Ordering::Less {
                    val.clone()
                } else {
                    hi.clone()
                };
                self.fill(part, next, &|g| cmp(g, &upto) == std::cmp::Ordering::Less)?;
                self.settle(part, &val)?;
            }
        }
        self.out.push_back(doc);
        Ok(())
    }

    /// After generating up to a document's value: the value itself is on the grid when it is
    /// the next grid value (it is then not generated later).
    fn settle(&mut self, part: usize, val: &RawBson) -> Result<()> {
        let current = self.parts.get(part).and_then(|p| p.current.clone());
        let on_grid = match &current {
            Some(c) => cmp(&self.step(c)?, val) == std::cmp::Ordering::Equal,
            None => match &self.stage.bounds {
                Bounds::Explicit(lo, _) => cmp(lo, val) == std::cmp::Ordering::Equal,
                Bounds::Full => self
                    .anchor
                    .as_ref()
                    .is_some_and(|a| cmp(a, val) == std::cmp::Ordering::Equal),
                Bounds::Partition => false,
            },
        };
        if on_grid && let Some(p) = self.parts.get_mut(part) {
            p.current = Some(val.clone());
        }
        Ok(())
    }

    /// What the end of the input adds.
    fn finish(&mut self) -> Result<()> {
        match self.stage.bounds.clone() {
            Bounds::Partition => {}
            Bounds::Full => {
                let Some(max) = self.global_max.clone() else {
                    return Ok(());
                };
                if self.stage.partitions.is_empty() {
                    return Ok(());
                }
                for i in 0..self.parts.len() {
                    let Some(c) = self.parts.get(i).and_then(|p| p.current.clone()) else {
                        continue;
                    };
                    let next = self.step(&c)?;
                    self.fill(i, next, &|g| cmp(g, &max) != std::cmp::Ordering::Greater)?;
                }
            }
            Bounds::Explicit(lo, hi) => {
                if self.parts.is_empty() {
                    if !self.stage.partitions.is_empty() {
                        return Ok(());
                    }
                    self.parts.push(Part {
                        key: Vec::new(),
                        include: RawDocumentBuf::new(),
                        current: None,
                    });
                }
                for i in 0..self.parts.len() {
                    let next = match self.parts.get(i).and_then(|p| p.current.clone()) {
                        Some(c) => {
                            let n = self.step(&c)?;
                            if cmp(&n, &lo) == std::cmp::Ordering::Less {
                                lo.clone()
                            } else {
                                n
                            }
                        }
                        None => lo.clone(),
                    };
                    self.fill(i, next, &|g| cmp(g, &hi) == std::cmp::Ordering::Less)?;
                }
            }
        }
        Ok(())
    }
}

impl DocStream for DensifyStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        loop {
            if let Some(d) = self.out.pop_front() {
                return Ok(Some(d));
            }
            if self.done {
                return Ok(None);
            }
            match self.input.next(cx)? {
                Some(doc) => self.process(doc)?,
                None => {
                    self.done = true;
                    self.finish()?;
                }
            }
        }
    }
}
