//! The expression forms of the accumulators (`ExpressionFromAccumulator`, `$mergeObjects`,
//! `ExpressionFromAccumulatorN`, `ExpressionFromAccumulatorQuantile`): `$sum $avg $min $max
//! $stdDevPop $stdDevSamp` over their arguments, `$mergeObjects` over its documents, `$firstN
//! $lastN $maxN $minN` over an `input` array, `$median $percentile` over a number or an array of numbers. The arithmetic is the
//! aggregation accumulators' own ([`crate::agg::accumulators`]), so `{$sum: "$a"}` in
//! `$project` and `{$sum: "$a"}` in `$group` agree.
//!
//! With one argument that evaluates to an array, `$sum` and friends fold its elements; with
//! several arguments, each argument is one input (arrays among them are not numbers).

use bson::{RawBson, RawBsonRef, RawDocument};

use super::eval::{Cx, eval};
use super::parse::Node;
use super::value::Value;
use crate::agg::accumulators::{
    AccOp, Accumulator, basic, multi, percentile::Percentile, sum, validate_n,
};
use crate::error::{QueryError, Result};

/// A parsed accumulator expression.
#[derive(Clone, Debug)]
pub(crate) enum AccumForm {
    /// `$sum $avg $min $max $stdDevPop $stdDevSamp` with positional arguments.
    Fold { op: AccOp, args: Vec<Node> },
    /// `$firstN $lastN $maxN $minN`: `{n, input}`.
    N { op: AccOp, n: Node, input: Node },
    /// `$median $percentile`: `{input, p, method}`.
    Quantile {
        op: AccOp,
        input: Node,
        ps: Vec<f64>,
    },
}

/// The accumulator operator for an expression name handled here.
pub(crate) fn op_for(name: &str) -> Option<AccOp> {
    match name {
        "$sum" | "$avg" | "$min" | "$max" | "$stdDevPop" | "$stdDevSamp" | "$mergeObjects"
        | "$firstN" | "$lastN" | "$maxN" | "$minN" | "$median" | "$percentile" => {
            AccOp::by_name(name)
        }
        _ => None,
    }
}

fn loc(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::Location(code, msg.into())
}

impl AccumForm {
    /// The child expressions.
    pub(crate) fn children(&self) -> Box<dyn Iterator<Item = &Node> + '_> {
        match self {
            AccumForm::Fold { args, .. } => Box::new(args.iter()),
            AccumForm::N { n, input, .. } => Box::new([n, input].into_iter()),
            AccumForm::Quantile { input, .. } => Box::new(std::iter::once(input)),
        }
    }

    /// The child expressions, mutably (for optimization).
    pub(crate) fn children_mut(&mut self) -> Vec<&mut Node> {
        match self {
            AccumForm::Fold { args, .. } => args.iter_mut().collect(),
            AccumForm::N { n, input, .. } => vec![n, input],
            AccumForm::Quantile { input, .. } => vec![input],
        }
    }

    /// Names of the named arguments, in parse order, for `$firstN`-style documents.
    pub(crate) fn named_arguments(
        op: AccOp,
        d: &RawDocument,
    ) -> Result<Vec<(&'static str, RawBsonRef<'_>)>> {
        let name = op.name();
        let quantile = matches!(op, AccOp::Median | AccOp::Percentile);
        let mut out = Vec::new();
        for el in d.iter() {
            let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
            let key: &'static str = match k.as_str() {
                "input" => "input",
                "n" if !quantile => "n",
                "p" if op == AccOp::Percentile => "p",
                "method" if quantile => "method",
                other if quantile => {
                    return Err(loc(
                        40415,
                        format!("BSON field '{name}.{other}' is an unknown field."),
                    ));
                }
                other => {
                    return Err(loc(
                        5787901,
                        format!("Unknown argument for 'n' operator: {other}"),
                    ));
                }
            };
            out.push((key, v));
        }
        Ok(out)
    }
}

fn make(op: AccOp, n: usize) -> Box<dyn Accumulator> {
    match op {
        AccOp::Avg => Box::new(sum::Avg::default()),
        AccOp::Min => Box::new(basic::MinMax::new(false)),
        AccOp::Max => Box::new(basic::MinMax::new(true)),
        AccOp::StdDevPop => Box::new(basic::StdDev::new(false)),
        AccOp::StdDevSamp => Box::new(basic::StdDev::new(true)),
        AccOp::MergeObjects => Box::new(basic::MergeObjects::default()),
        AccOp::FirstN => Box::new(multi::MultiN::new(multi::NKind::First, n)),
        AccOp::LastN => Box::new(multi::MultiN::new(multi::NKind::Last, n)),
        AccOp::MaxN => Box::new(multi::MultiN::new(multi::NKind::Max, n)),
        AccOp::MinN => Box::new(multi::MultiN::new(multi::NKind::Min, n)),
        _ => Box::new(sum::Sum::default()),
    }
}

fn result<'a>(acc: &dyn Accumulator) -> Result<Value<'a>> {
    Ok(match acc.value()? {
        Some(v) => Value::Owned(v),
        None => Value::Missing,
    })
}

/// Evaluates an accumulator expression.
pub(crate) fn eval_accum<'a>(form: &'a AccumForm, cx: &mut Cx<'a>) -> Result<Value<'a>> {
    match form {
        AccumForm::Fold { op, args } => {
            let mut acc = make(*op, 1);
            if *op == AccOp::MergeObjects {
                // Every argument is one document (arrays are not spread).
                for a in args {
                    let v = eval(a, cx)?;
                    acc.process(v.get(), false)?;
                }
                return result(&*acc);
            }
            if let [only] = args.as_slice() {
                let v = eval(only, cx)?;
                match v.get() {
                    Some(RawBsonRef::Array(a)) => {
                        for e in a {
                            let e = e.map_err(|e| QueryError::BadValue(e.to_string()))?;
                            acc.process(Some(e), false)?;
                        }
                    }
                    other => acc.process(other, false)?,
                }
            } else {
                for a in args {
                    let v = eval(a, cx)?;
                    acc.process(v.get(), false)?;
                }
            }
            result(&*acc)
        }
        AccumForm::N { op, n, input } => {
            let nv = eval(n, cx)?;
            let n = validate_n(nv.get())?;
            let input = eval(input, cx)?;
            if input.nullish() {
                return Ok(Value::null());
            }
            let Some(RawBsonRef::Array(a)) = input.get() else {
                return Err(loc(5788200, "Input must be an array"));
            };
            let mut acc = make(*op, n);
            for e in a {
                let e = e.map_err(|e| QueryError::BadValue(e.to_string()))?;
                acc.process(Some(e), false)?;
            }
            result(&*acc)
        }
        AccumForm::Quantile { op, input, ps } => {
            let mut acc = Percentile::new(ps.clone(), *op == AccOp::Median);
            let v = eval(input, cx)?;
            match v.get() {
                Some(RawBsonRef::Array(a)) => {
                    for e in a {
                        let e = e.map_err(|e| QueryError::BadValue(e.to_string()))?;
                        acc.process(Some(e), false)?;
                    }
                }
                other => acc.process(other, false)?,
            }
            Ok(Value::Owned(acc.compute()))
        }
    }
}

/// `p` of `$percentile`: a literal array of numbers in `[0, 1]`.
pub(crate) fn percentiles(p: RawBsonRef<'_>) -> Result<Vec<f64>> {
    let shown = cairn_storage::display::value(p);
    let bad = || {
        loc(
            7750301,
            format!(
                "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but \
                 found: {shown}"
            ),
        )
    };
    let RawBsonRef::Array(a) = p else {
        return Err(bad());
    };
    let mut out = Vec::new();
    for e in a {
        let x = match e.map_err(|_| bad())? {
            RawBsonRef::Int32(i) => f64::from(i),
            RawBsonRef::Int64(i) => i as f64,
            RawBsonRef::Double(d) => d,
            _ => return Err(bad()),
        };
        if !(0.0..=1.0).contains(&x) {
            return Err(bad());
        }
        out.push(x);
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

/// Checks `method`: the string `approximate`.
pub(crate) fn check_method(name: &str, m: Option<RawBsonRef<'_>>) -> Result<()> {
    match m {
        None => Err(loc(
            40414,
            format!("BSON field '{name}.method' is missing but a required field"),
        )),
        Some(RawBsonRef::String("approximate")) => Ok(()),
        Some(RawBsonRef::String(_)) => Err(QueryError::BadValue(
            "Currently only 'approximate' can be used as percentile 'method'".into(),
        )),
        Some(other) => Err(QueryError::TypeMismatch(format!(
            "BSON field '{name}.method' is the wrong type '{}', expected type 'string'",
            cairn_storage::display::type_name(other)
        ))),
    }
}

/// A constant `RawBson` for folding.
#[allow(dead_code)]
pub(crate) fn constant(v: RawBson) -> Node {
    Node::Constant(Some(v))
}
