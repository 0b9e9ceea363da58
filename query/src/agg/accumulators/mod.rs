//! Accumulators, in one place for every stage that folds documents into values: `$group`,
//! `$bucket`, `$bucketAuto` and the expression forms (`{$sum: [..]}` in `$project`); a window
//! function module can reuse them through the same two pieces:
//!
//! - [`AccumulatorSpec`]: a parsed accumulator statement (`{$sum: "$qty"}`, `{$topN: {n,
//!   sortBy, output}}`, …): [`AccumulatorSpec::parse_statement`] checks a `$group` field as
//!   MongoDB does (40234 not an accumulator object, 40235 dotted name, 40236 `$` name, 40238
//!   several accumulators, 40237 array argument, 15952 unknown operator, 238 `$accumulator`),
//!   [`AccumulatorSpec::parse_op`] parses one operator with its argument;
//!   [`AccumulatorSpec::input`] computes, per document, the value the accumulator consumes, and
//!   [`AccumulatorSpec::create`] makes a fresh [`Accumulator`] for one group (evaluating `n`
//!   with the group key as the document).
//! - [`Accumulator`]: the running state. `process` consumes an input (or, with `merging`, a
//!   partial state of another accumulator of the same kind — this is how spilled groups are
//!   merged back), `value` gives the result, `partial` a mergeable state, `memory` its
//!   approximate size for the stage's memory limit.
//!
//! The operators, sorted: `$addToSet $avg $bottom $bottomN $count $first $firstN $last $lastN
//! $max $maxN $median $mergeObjects $min $minN $percentile $push $stdDevPop $stdDevSamp $sum
//! $top $topN` (see [`sum`], [`basic`], [`multi`], [`percentile`]).
//!
//! Invariants: accumulators never panic; their memory is accounted for; merging partial states
//! gives the same result as accumulating every input in one place.

pub mod basic;
pub mod multi;
pub mod percentile;
pub mod sum;

use std::fmt;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::deps::Deps;
use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Expression};
use crate::sort::SortSpec;

/// The running state of one accumulator (see the module docs).
pub trait Accumulator: Send + fmt::Debug {
    /// Consumes an input (`None` = missing); with `merging`, `v` is another accumulator's
    /// [`Accumulator::partial`] state.
    fn process(&mut self, v: Option<RawBsonRef<'_>>, merging: bool) -> Result<()>;
    /// The result (`None` = missing).
    fn value(&self) -> Result<Option<RawBson>>;
    /// A state that `process(.., true)` of a fresh accumulator of the same spec merges.
    fn partial(&self) -> Result<RawBson>;
    /// Approximate bytes held.
    fn memory(&self) -> usize;
}

/// Serialized BSON size of a value (for memory accounting).
pub(crate) fn bson_size(v: &RawBson) -> usize {
    match v {
        RawBson::String(s) | RawBson::Symbol(s) | RawBson::JavaScriptCode(s) => s.len() + 5,
        RawBson::Document(d) => d.as_bytes().len(),
        RawBson::Array(a) => a.as_bytes().len(),
        RawBson::Binary(b) => b.bytes.len() + 5,
        RawBson::Decimal128(_) => 16,
        _ => 8,
    }
}

/// A byte key equal for values MongoDB considers equal (`1`, `1.0`, `NumberLong(1)`).
pub(crate) fn value_key(v: RawBsonRef<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    value_key_into(&mut out, v);
    out
}

/// [`value_key`] written into `out` (cleared first), so a caller can reuse one buffer.
pub(crate) fn value_key_into(out: &mut Vec<u8>, v: RawBsonRef<'_>) {
    out.clear();
    if cairn_storage::keys::encode_value_with_max_depth(out, v, false, 400).is_err() {
        // Too deep to encode: fall back to the type and raw bytes (exact equality only).
        out.clear();
        out.push(0xFF);
        out.push(v.element_type() as u8);
        out.extend(format!("{v:?}").into_bytes());
    }
}

/// Which accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccOp {
    /// `$addToSet`.
    AddToSet,
    /// `$avg`.
    Avg,
    /// `$bottom`.
    Bottom,
    /// `$bottomN`.
    BottomN,
    /// `$count` (a `$sum` of 1).
    Count,
    /// `$first`.
    First,
    /// `$firstN`.
    FirstN,
    /// `$last`.
    Last,
    /// `$lastN`.
    LastN,
    /// `$max`.
    Max,
    /// `$maxN`.
    MaxN,
    /// `$median`.
    Median,
    /// `$mergeObjects`.
    MergeObjects,
    /// `$min`.
    Min,
    /// `$minN`.
    MinN,
    /// `$percentile`.
    Percentile,
    /// `$push`.
    Push,
    /// `$stdDevPop`.
    StdDevPop,
    /// `$stdDevSamp`.
    StdDevSamp,
    /// `$sum`.
    Sum,
    /// `$top`.
    Top,
    /// `$topN`.
    TopN,
}

/// Every accumulator by name, sorted (the one list of them).
pub const ACCUMULATORS: &[(&str, AccOp)] = &[
    ("$addToSet", AccOp::AddToSet),
    ("$avg", AccOp::Avg),
    ("$bottom", AccOp::Bottom),
    ("$bottomN", AccOp::BottomN),
    ("$count", AccOp::Count),
    ("$first", AccOp::First),
    ("$firstN", AccOp::FirstN),
    ("$last", AccOp::Last),
    ("$lastN", AccOp::LastN),
    ("$max", AccOp::Max),
    ("$maxN", AccOp::MaxN),
    ("$median", AccOp::Median),
    ("$mergeObjects", AccOp::MergeObjects),
    ("$min", AccOp::Min),
    ("$minN", AccOp::MinN),
    ("$percentile", AccOp::Percentile),
    ("$push", AccOp::Push),
    ("$stdDevPop", AccOp::StdDevPop),
    ("$stdDevSamp", AccOp::StdDevSamp),
    ("$sum", AccOp::Sum),
    ("$top", AccOp::Top),
    ("$topN", AccOp::TopN),
];

impl AccOp {
    /// Looks an accumulator up by name.
    pub fn by_name(name: &str) -> Option<AccOp> {
        ACCUMULATORS
            .binary_search_by(|(n, _)| n.cmp(&name))
            .ok()
            .and_then(|i| ACCUMULATORS.get(i))
            .map(|(_, op)| *op)
    }

    /// Whether an accumulator of this kind holds the same memory whatever it consumes (a
    /// running sum, count or moments): its [`Accumulator::memory`] is what it was created
    /// with, so a stage need not ask again after each input.
    pub fn fixed_memory(self) -> bool {
        matches!(
            self,
            AccOp::Sum | AccOp::Count | AccOp::Avg | AccOp::StdDevPop | AccOp::StdDevSamp
        )
    }

    /// The operator name.
    pub fn name(self) -> &'static str {
        ACCUMULATORS
            .iter()
            .find(|(_, op)| *op == self)
            .map_or("$unknown", |(n, _)| n)
    }
}

fn loc(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::Location(code, msg.into())
}

/// A parsed accumulator (see the module docs).
#[derive(Debug, Clone)]
pub struct AccumulatorSpec {
    /// The output field.
    pub field: String,
    /// The operator.
    pub op: AccOp,
    /// The per-document value (`None` for `$count`).
    input: Option<Expression>,
    /// `n` of the n-accumulators.
    n: Option<Expression>,
    /// `sortBy` of `$top*`/`$bottom*`.
    sort: Option<SortSpec>,
    /// `p` of `$percentile`.
    ps: Vec<f64>,
    /// The operator's argument as written (for explain).
    arg: RawBson,
    ext: ExprExtensions,
}

impl AccumulatorSpec {
    /// Parses a `$group`-style field `field: {$op: arg}` with MongoDB's checks.
    pub fn parse_statement(
        field: &str,
        v: RawBsonRef<'_>,
        ext: &ExprExtensions,
    ) -> Result<AccumulatorSpec> {
        // The spec's elements, read once: the first decides 40234, the second 40238.
        let mut it = match v {
            RawBsonRef::Document(d) => d.iter(),
            _ => {
                return Err(loc(
                    40234,
                    format!("The field '{field}' must be an accumulator object"),
                ));
            }
        };
        let first = it.next();
        match &first {
            Some(Ok((k, _))) if k.as_str().starts_with('$') => {}
            _ => {
                return Err(loc(
                    40234,
                    format!("The field '{field}' must be an accumulator object"),
                ));
            }
        };
        if field.contains('.') {
            return Err(loc(
                40235,
                format!("The field name '{field}' cannot contain '.'"),
            ));
        }
        if field.starts_with('$') {
            return Err(loc(
                40236,
                format!("The field name '{field}' cannot be an operator name"),
            ));
        }
        let Some(Ok((name, arg))) = first else {
            return Err(loc(
                40234,
                format!("The field '{field}' must be an accumulator object"),
            ));
        };
        if it.next().is_some() {
            return Err(loc(
                40238,
                format!("The field '{field}' must specify one accumulator"),
            ));
        }
        let name = name.as_str();
        if matches!(arg, RawBsonRef::Array(_)) {
            return Err(loc(
                40237,
                format!("The {name} accumulator is a unary operator"),
            ));
        }
        AccumulatorSpec::parse_op(field, name, arg, ext)
    }

    /// Parses one accumulator operator and its argument.
    pub fn parse_op(
        field: &str,
        name: &str,
        arg: RawBsonRef<'_>,
        ext: &ExprExtensions,
    ) -> Result<AccumulatorSpec> {
        let Some(op) = AccOp::by_name(name) else {
            if name == "$accumulator" {
                return Err(QueryError::NotImplemented(
                    "the $accumulator operator (server-side JavaScript) is not supported".into(),
                ));
            }
            return Err(loc(15952, format!("unknown group operator '{name}'")));
        };
        let mut spec = AccumulatorSpec {
            field: field.to_string(),
            op,
            input: None,
            n: None,
            sort: None,
            ps: Vec::new(),
            arg: RawBson::from(arg),
            ext: ext.clone(),
        };
        match op {
            AccOp::Count => {
                let empty = matches!(arg, RawBsonRef::Document(d) if d.is_empty());
                if !empty {
                    return Err(QueryError::TypeMismatch(
                        "$count takes no arguments, i.e. $count:{}".into(),
                    ));
                }
            }
            AccOp::FirstN | AccOp::LastN | AccOp::MaxN | AccOp::MinN => {
                let (n, input) = parse_n_input(name, arg, ext)?;
                spec.n = Some(n);
                spec.input = Some(input);
            }
            AccOp::Top | AccOp::Bottom | AccOp::TopN | AccOp::BottomN => {
                parse_top_bottom(&mut spec, name, arg, ext)?;
            }
            AccOp::Median | AccOp::Percentile => {
                let (input, ps) = parse_percentile(name, op == AccOp::Median, arg, ext)?;
                spec.input = Some(input);
                spec.ps = ps;
            }
            _ => spec.input = Some(ext.parse_expression(arg)?),
        }
        Ok(spec)
    }

    /// The operator as MongoDB serializes it (`{$sum: …}`).
    pub fn serialize(&self) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        let (name, arg) = match self.op {
            AccOp::Count => ("$sum", RawBson::Document(bson::rawdoc! {"$const": 1})),
            op => (op.name(), self.arg.clone()),
        };
        if let Ok(k) = <&bson::raw::CStr>::try_from(name) {
            d.append(k, arg);
        }
        d
    }

    /// What the accumulator reads.
    pub fn deps(&self, d: &mut Deps) {
        if let Some(e) = &self.input {
            d.add_expr(e);
        }
        if let Some(s) = &self.sort {
            for f in s.fields() {
                d.add_path(&f.path);
            }
        }
    }

    /// The value the accumulator consumes for `doc` (`None` = missing): the input
    /// expression's value; `1` for `$count`; `{k: [sort key], o: output}` for `$top*` and
    /// `$bottom*`.
    pub fn input(&self, doc: &RawDocument) -> Result<Option<RawBson>> {
        let vars = self.ext.variables();
        match self.op {
            AccOp::Count => Ok(Some(RawBson::Int32(1))),
            AccOp::Top | AccOp::Bottom | AccOp::TopN | AccOp::BottomN => {
                let out = match &self.input {
                    Some(e) => e.evaluate(doc, vars)?,
                    None => None,
                };
                let key = match &self.sort {
                    Some(s) => s.key(doc)?,
                    None => SortSpec::default().key(doc)?,
                };
                let mut keys = RawArrayBuf::new();
                for v in key.values() {
                    keys.push(v.clone());
                }
                let mut d = RawDocumentBuf::new();
                d.append(bson::raw::cstr!("k"), keys);
                d.append(bson::raw::cstr!("o"), out.unwrap_or(RawBson::Null));
                Ok(Some(RawBson::Document(d)))
            }
            _ => match &self.input {
                Some(e) => e.evaluate(doc, vars),
                None => Ok(None),
            },
        }
    }

    /// Computes `doc`'s input and feeds it to `acc` (as [`AccumulatorSpec::input`] then
    /// [`Accumulator::process`], but reading a field path's value in place).
    pub fn accumulate(&self, doc: &RawDocument, acc: &mut dyn Accumulator) -> Result<()> {
        match (self.op, &self.input) {
            (AccOp::Count | AccOp::Top | AccOp::Bottom | AccOp::TopN | AccOp::BottomN, _) => {
                let v = self.input(doc)?;
                acc.process(v.as_ref().map(RawBson::as_raw_bson_ref), false)
            }
            // A constant input (`$sum: 1`) is what evaluating it gives, without the evaluator.
            (_, Some(e)) => match e.constant() {
                Some(c) => acc.process(c.map(RawBson::as_raw_bson_ref), false),
                None => e.with_value(doc, self.ext.variables(), |v| acc.process(v, false))?,
            },
            (_, None) => acc.process(None, false),
        }
    }

    /// The input's field path (see [`crate::expr::Expression::root_path`]) when the input is
    /// a field path of the document consumed as it is: then [`AccumulatorSpec::accumulate`]
    /// feeds the accumulator that path's value, and a caller that read the value itself (as
    /// the evaluator reads it) may feed it directly (`process(value, false)`).
    pub(crate) fn input_path(&self) -> Option<&[String]> {
        match (self.op, &self.input) {
            (AccOp::Count | AccOp::Top | AccOp::Bottom | AccOp::TopN | AccOp::BottomN, _) => None,
            (_, Some(e)) => e.root_path(),
            (_, None) => None,
        }
    }

    /// The input when it is the same for every document (`$count`, `$sum: 1`, a constant
    /// folded at parse time, `$$REMOVE`: `Some(None)`): what [`AccumulatorSpec::accumulate`]
    /// feeds the accumulator whatever the document.
    pub(crate) fn constant_input(&self) -> Option<Option<&RawBson>> {
        static ONE: RawBson = RawBson::Int32(1);
        match (self.op, &self.input) {
            (AccOp::Count, _) => Some(Some(&ONE)),
            (AccOp::Top | AccOp::Bottom | AccOp::TopN | AccOp::BottomN, _) => None,
            (_, Some(e)) => e.constant(),
            (_, None) => Some(None),
        }
    }

    /// A fresh accumulator for the group whose `_id` is `id` (`n` may read the key's fields).
    pub fn create(&self, id: RawBsonRef<'_>) -> Result<Box<dyn Accumulator>> {
        let n = match &self.n {
            Some(e) => {
                // `n` is evaluated with the group key as the document (`$gameId` reads the
                // key's field of that name).
                let root = match id {
                    RawBsonRef::Document(d) => d.to_owned(),
                    _ => RawDocumentBuf::new(),
                };
                let v = e.evaluate(&root, self.ext.variables())?;
                Some(validate_n(v.as_ref().map(RawBson::as_raw_bson_ref))?)
            }
            None => None,
        };
        let n1 = n.unwrap_or(1);
        let sort = || self.sort.clone().unwrap_or_default();
        Ok(match self.op {
            AccOp::Sum | AccOp::Count => Box::new(sum::Sum::default()),
            AccOp::Avg => Box::new(sum::Avg::default()),
            AccOp::First => Box::new(basic::FirstLast::new(false)),
            AccOp::Last => Box::new(basic::FirstLast::new(true)),
            AccOp::Min => Box::new(basic::MinMax::new(false)),
            AccOp::Max => Box::new(basic::MinMax::new(true)),
            AccOp::Push => Box::new(basic::Push::default()),
            AccOp::AddToSet => Box::new(basic::AddToSet::default()),
            AccOp::MergeObjects => Box::new(basic::MergeObjects::default()),
            AccOp::StdDevPop => Box::new(basic::StdDev::new(false)),
            AccOp::StdDevSamp => Box::new(basic::StdDev::new(true)),
            AccOp::FirstN => Box::new(multi::MultiN::new(multi::NKind::First, n1)),
            AccOp::LastN => Box::new(multi::MultiN::new(multi::NKind::Last, n1)),
            AccOp::MaxN => Box::new(multi::MultiN::new(multi::NKind::Max, n1)),
            AccOp::MinN => Box::new(multi::MultiN::new(multi::NKind::Min, n1)),
            AccOp::Top => Box::new(multi::TopBottom::new("$top", sort(), false, None)),
            AccOp::Bottom => Box::new(multi::TopBottom::new("$bottom", sort(), true, None)),
            AccOp::TopN => Box::new(multi::TopBottom::new("$topN", sort(), false, Some(n1))),
            AccOp::BottomN => Box::new(multi::TopBottom::new("$bottomN", sort(), true, Some(n1))),
            AccOp::Median => Box::new(percentile::Percentile::new(vec![0.5], true)),
            AccOp::Percentile => Box::new(percentile::Percentile::new(self.ps.clone(), false)),
        })
    }
}

/// `AccumulatorN::validateN`: a positive integral number.
pub(crate) fn validate_n(v: Option<RawBsonRef<'_>>) -> Result<usize> {
    let shown = v.map_or_else(|| "missing".to_string(), cairn_storage::display::value);
    let f = match v {
        Some(RawBsonRef::Int32(i)) => f64::from(i),
        Some(RawBsonRef::Int64(i)) => i as f64,
        Some(RawBsonRef::Double(d)) => d,
        Some(RawBsonRef::Decimal128(d)) => {
            cairn_storage::decimal::to_f64(cairn_storage::decimal::Decimal::from_decimal128(d))
        }
        _ => {
            return Err(loc(
                5787902,
                format!("Value for 'n' must be of integral type, but found {shown}"),
            ));
        }
    };
    if f.fract() != 0.0 || !f.is_finite() {
        return Err(loc(
            5787903,
            format!("Value for 'n' must be of integral type, but found {shown}"),
        ));
    }
    if f <= 0.0 {
        return Err(loc(
            5787908,
            format!("'n' must be greater than 0, found {}", f as i64),
        ));
    }
    Ok(if f > 1e15 { usize::MAX } else { f as usize })
}

/// `{n, input}` of `$firstN`, `$lastN`, `$maxN`, `$minN`.
pub(crate) fn parse_n_input(
    name: &str,
    arg: RawBsonRef<'_>,
    ext: &ExprExtensions,
) -> Result<(Expression, Expression)> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            5787900,
            format!(
                "specification must be an object; found {name}: {}",
                cairn_storage::display::value(arg)
            ),
        ));
    };
    let (mut n, mut input) = (None, None);
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "n" => n = Some(ext.parse_expression(v)?),
            "input" => input = Some(ext.parse_expression(v)?),
            other => {
                return Err(loc(
                    5787901,
                    format!("Unknown argument for 'n' operator: {other}"),
                ));
            }
        }
    }
    let n = n.ok_or_else(|| loc(5787906, "Missing value for 'n'"))?;
    let input = input.ok_or_else(|| loc(5787907, "Missing value for 'input'"))?;
    if let Some(c) = n.constant() {
        validate_n(c.map(RawBson::as_raw_bson_ref))?;
    }
    Ok((n, input))
}

fn parse_top_bottom(
    spec: &mut AccumulatorSpec,
    name: &str,
    arg: RawBsonRef<'_>,
    ext: &ExprExtensions,
) -> Result<()> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            5788001,
            format!("expected object as argument to {name}"),
        ));
    };
    let with_n = matches!(spec.op, AccOp::TopN | AccOp::BottomN);
    let (mut n, mut output, mut sort) = (None, None, None);
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "n" if with_n => n = Some(ext.parse_expression(v)?),
            "output" => output = Some(ext.parse_expression(v)?),
            "sortBy" => {
                let RawBsonRef::Document(s) = v else {
                    return Err(loc(
                        5788604,
                        format!("expected object for 'sortBy' of {name}"),
                    ));
                };
                sort = Some(SortSpec::parse(s)?);
            }
            other => {
                return Err(loc(
                    5788002,
                    format!("Unknown argument to {name} '{other}'"),
                ));
            }
        }
    }
    if with_n {
        let n = n.ok_or_else(|| loc(5788003, "Missing value for 'n'"))?;
        if let Some(c) = n.constant() {
            validate_n(c.map(RawBson::as_raw_bson_ref))?;
        }
        spec.n = Some(n);
    }
    spec.input = Some(output.ok_or_else(|| loc(5788004, "Missing value for 'output'"))?);
    spec.sort = Some(sort.ok_or_else(|| loc(5788005, "Missing value for 'sortBy'"))?);
    Ok(())
}

/// `{input, p, method}` of `$percentile` (`{input, method}` of `$median`).
pub(crate) fn parse_percentile(
    name: &str,
    median: bool,
    arg: RawBsonRef<'_>,
    ext: &ExprExtensions,
) -> Result<(Expression, Vec<f64>)> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            7436100,
            format!(
                "specification must be an object; found {name}: {}",
                cairn_storage::display::value(arg)
            ),
        ));
    };
    let (mut input, mut p, mut method) = (None, None, None);
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "input" => input = Some(ext.parse_expression(v)?),
            "p" if !median => p = Some(v),
            "method" => method = Some(v),
            other => {
                return Err(loc(
                    40415,
                    format!("BSON field '{name}.{other}' is an unknown field."),
                ));
            }
        }
    }
    let input = input.ok_or_else(|| {
        loc(
            40414,
            format!("BSON field '{name}.input' is missing but a required field"),
        )
    })?;
    let method = method.ok_or_else(|| {
        loc(
            40414,
            format!("BSON field '{name}.method' is missing but a required field"),
        )
    })?;
    match method {
        RawBsonRef::String("approximate") => {}
        RawBsonRef::String(_) => {
            return Err(QueryError::BadValue(
                "Currently only 'approximate' can be used as percentile 'method'".into(),
            ));
        }
        other => {
            return Err(QueryError::TypeMismatch(format!(
                "BSON field '{name}.method' is the wrong type '{}', expected type 'string'",
                cairn_storage::display::type_name(other)
            )));
        }
    }
    let ps = if median {
        vec![0.5]
    } else {
        let p = p.ok_or_else(|| {
            loc(
                40414,
                format!("BSON field '{name}.p' is missing but a required field"),
            )
        })?;
        percentiles(p, ext)?
    };
    Ok((input, ps))
}

/// `p`: a constant array of numbers in `[0, 1]`.
fn percentiles(p: RawBsonRef<'_>, ext: &ExprExtensions) -> Result<Vec<f64>> {
    let bad = |shown: String| {
        loc(
            7750301,
            format!(
                "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but \
                 found: {shown}"
            ),
        )
    };
    let e = ext.parse_expression(p)?;
    let Some(Some(c)) = e.constant() else {
        return Err(bad(cairn_storage::display::value(p)));
    };
    let RawBson::Array(a) = c else {
        return Err(bad(cairn_storage::display::value(c.as_raw_bson_ref())));
    };
    let mut out = Vec::new();
    for el in a {
        let el = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        let x = match el {
            RawBsonRef::Int32(i) => f64::from(i),
            RawBsonRef::Int64(i) => i as f64,
            RawBsonRef::Double(d) => d,
            RawBsonRef::Decimal128(d) => {
                cairn_storage::decimal::to_f64(cairn_storage::decimal::Decimal::from_decimal128(d))
            }
            _ => return Err(bad(cairn_storage::display::value(c.as_raw_bson_ref()))),
        };
        if !(0.0..=1.0).contains(&x) {
            return Err(bad(cairn_storage::display::value(c.as_raw_bson_ref())));
        }
        out.push(x);
    }
    if out.is_empty() {
        return Err(bad(cairn_storage::display::value(c.as_raw_bson_ref())));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use bson::{RawBson, rawdoc};

    use super::*;

    /// The accumulators of [`AccOp::fixed_memory`] kinds keep the memory they were created
    /// with through inputs of every type and merges; the others grow.
    #[test]
    fn fixed_memory_accumulators_do_not_grow() {
        let ext = ExprExtensions::default();
        let inputs = [
            RawBson::Int32(1),
            RawBson::Int64(i64::MAX),
            RawBson::Double(2.5),
            RawBson::Double(f64::NAN),
            RawBson::Decimal128(bson::Decimal128::from_bytes([7; 16])),
            RawBson::String("a long string value, longer than any fixed state".into()),
            RawBson::Document(rawdoc! {"a": [1, 2, 3]}),
            RawBson::Null,
        ];
        for (name, op) in ACCUMULATORS {
            let arg = match op {
                AccOp::Count => RawBson::Document(rawdoc! {}),
                AccOp::FirstN | AccOp::LastN | AccOp::MaxN | AccOp::MinN => {
                    RawBson::Document(rawdoc! {"input": "$x", "n": 3})
                }
                AccOp::Top | AccOp::Bottom => {
                    RawBson::Document(rawdoc! {"sortBy": {"x": 1}, "output": "$x"})
                }
                AccOp::TopN | AccOp::BottomN => {
                    RawBson::Document(rawdoc! {"sortBy": {"x": 1}, "output": "$x", "n": 3})
                }
                AccOp::Median => {
                    RawBson::Document(rawdoc! {"input": "$x", "method": "approximate"})
                }
                AccOp::Percentile => {
                    RawBson::Document(rawdoc! {"input": "$x", "p": [0.5], "method": "approximate"})
                }
                _ => RawBson::String("$x".into()),
            };
            let spec = AccumulatorSpec::parse_op("f", name, arg.as_raw_bson_ref(), &ext).unwrap();
            let mut acc = spec.create(RawBsonRef::Null).unwrap();
            let created = acc.memory();
            for v in &inputs {
                // `$mergeObjects` refuses what is not a document; the others take anything.
                let r = spec.accumulate(&rawdoc! {"x": v.clone()}, acc.as_mut());
                assert!(r.is_ok() || *op == AccOp::MergeObjects, "{name} {v:?}");
            }
            let partial = acc.partial().unwrap();
            acc.process(Some(partial.as_raw_bson_ref()), true).unwrap();
            if op.fixed_memory() {
                assert_eq!(acc.memory(), created, "{name}");
            } else {
                assert!(acc.memory() > created, "{name}");
            }
        }
    }

    /// An accumulator whose input is a constant (`$sum: 1`, `$$REMOVE`, a folded expression)
    /// is fed what evaluating the input gives ([`AccumulatorSpec::input`]), per document.
    #[test]
    fn constant_inputs_feed_what_evaluation_gives() {
        let ext = ExprExtensions::default();
        let statements = [
            rawdoc! {"s": {"$sum": 1}},
            rawdoc! {"s": {"$sum": 2.5}},
            rawdoc! {"s": {"$avg": {"$add": [1, 2]}}},
            rawdoc! {"s": {"$push": "$$REMOVE"}},
            rawdoc! {"s": {"$push": {"$literal": "$x"}}},
            rawdoc! {"s": {"$first": null}},
            rawdoc! {"s": {"$addToSet": {"a": 1}}},
            rawdoc! {"s": {"$max": "$x"}},
        ];
        let docs = [rawdoc! {}, rawdoc! {"x": 3}, rawdoc! {"x": "s"}];
        let mut constants = 0;
        for st in statements {
            let (k, v) = st.iter().next().unwrap().unwrap();
            let spec = AccumulatorSpec::parse_statement(k.as_str(), v, &ext).unwrap();
            if spec.input.as_ref().is_some_and(|e| e.constant().is_some()) {
                constants += 1;
            }
            let mut got = spec.create(bson::RawBsonRef::Null).unwrap();
            let mut want = spec.create(bson::RawBsonRef::Null).unwrap();
            for d in &docs {
                spec.accumulate(d, got.as_mut()).unwrap();
                let v = spec.input(d).unwrap();
                want.process(v.as_ref().map(RawBson::as_raw_bson_ref), false)
                    .unwrap();
            }
            assert_eq!(got.value().unwrap(), want.value().unwrap(), "{st:?}");
        }
        assert_eq!(constants, 7);
    }
}
