//! Window functions: the machinery behind `$setWindowFields` (its stage is
//! [`crate::agg::stages::set_window_fields`]).
//!
//! - [`func`] parses the `output` statements (one window function each, with its
//!   [`bounds`]);
//! - [`partition`] reads the sorted input one partition at a time, caching documents by
//!   position, releasing those no window can reach any more, and spilling to disk beyond the
//!   memory limit with `allowDiskUse` (5414201 otherwise);
//! - [`exec`] computes each statement's value document by document, over a growing or a
//!   sliding window, from a [`state`] (the `$group` accumulators of
//!   [`crate::agg::accumulators`] for growing windows, MongoDB's removable states for sliding
//!   ones) or from the window's endpoints.
//!
//! Invariants: each document is read from the input once and evaluated once per statement
//! for growing and sliding windows; nothing here panics on any input; memory held (cache plus
//! states) is bounded by the limit or spilled.

pub mod bounds;
pub mod exec;
pub mod func;
pub mod partition;
pub mod state;

use std::collections::VecDeque;

use bson::{RawBson, RawBsonRef};

use self::exec::{EndKind, Exec, Hint, Input};
use self::func::{Func, Statement};
use self::state::{
    AccAdapter, Covariance, ExpMovingAvg, Grow, Integral, Locf, Rank, Recompute, RemovableAddToSet,
    RemovableAvg, RemovableMinMax, RemovablePush, RemovableStdDev, RemovableSum, WinState,
};
use crate::agg::accumulators::{AccOp, AccumulatorSpec};
use crate::error::Result;
use crate::expr::Expression;

fn removable_state(spec: &AccumulatorSpec) -> Result<Box<dyn WinState>> {
    Ok(match spec.op {
        AccOp::Sum | AccOp::Count => Box::new(RemovableSum::default()),
        AccOp::Avg => Box::new(RemovableAvg::default()),
        AccOp::StdDevPop => Box::new(RemovableStdDev::new(false)),
        AccOp::StdDevSamp => Box::new(RemovableStdDev::new(true)),
        AccOp::Min => Box::new(RemovableMinMax::new(false)),
        AccOp::Max => Box::new(RemovableMinMax::new(true)),
        AccOp::Push => Box::new(RemovablePush::default()),
        AccOp::AddToSet => Box::new(RemovableAddToSet::default()),
        _ => Box::new(Recompute::new(spec.clone())?),
    })
}

fn slide(input: Input, state: Box<dyn WinState>, st: &Statement) -> Result<Exec> {
    let empty = state.value()?;
    Ok(Exec::Slide {
        input,
        state,
        empty,
        bounds: st.bounds.clone(),
        queue: VecDeque::new(),
        queued: 0,
        next: 0,
        hint: Hint::default(),
    })
}

fn grow(input: Input, acc: Box<dyn state::WinAcc>, st: &Statement) -> Exec {
    Exec::Grow {
        input,
        acc,
        bounds: st.bounds.clone(),
        next: 0,
        hint: Hint::default(),
    }
}

fn endpoint(kind: EndKind, input: &Expression, st: &Statement) -> Exec {
    Exec::Endpoint {
        kind,
        input: input.clone(),
        bounds: st.bounds.clone(),
        hint: Hint::default(),
        first: None,
    }
}

/// A fresh executor for `st` (`sort` is `"$<sortBy field>"` when `sortBy` has one field).
pub fn executor(st: &Statement, sort: Option<&Expression>) -> Result<Exec> {
    let growing = st.bounds.lower_unbounded();
    let sort_expr = || -> Result<Expression> {
        sort.cloned().ok_or_else(|| {
            crate::error::QueryError::FailedToParse(
                "this window function requires a one-field sortBy".into(),
            )
        })
    };
    Ok(match &st.func {
        Func::Acc(spec) => {
            if growing {
                grow(
                    Input::Spec(spec.clone()),
                    Box::new(AccAdapter(spec.create(RawBsonRef::Null)?)),
                    st,
                )
            } else {
                slide(Input::Spec(spec.clone()), removable_state(spec)?, st)?
            }
        }
        Func::First(e) => endpoint(EndKind::First, e, st),
        Func::Last(e) => endpoint(EndKind::Last, e, st),
        Func::Shift {
            output, default, ..
        } => endpoint(EndKind::Shift(default.clone()), output, st),
        Func::Derivative { input, unit } => endpoint(EndKind::Derivative(*unit), input, st),
        Func::Rank(kind) => grow(Input::Expr(sort_expr()?), Box::new(Rank::new(*kind)), st),
        Func::ExpMovingAvg { input, alpha } => grow(
            Input::Expr(input.clone()),
            Box::new(ExpMovingAvg::new(*alpha)),
            st,
        ),
        Func::Locf(e) => grow(Input::Expr(e.clone()), Box::new(Locf::default()), st),
        Func::Covariance { input, sample } => {
            let c = Box::new(Covariance::new(*sample));
            if growing {
                grow(Input::Expr(input.clone()), Box::new(Grow(c)), st)
            } else {
                slide(Input::Expr(input.clone()), c, st)?
            }
        }
        Func::Integral { input, unit } => {
            let pair = Input::Pair(sort_expr()?, input.clone());
            if growing {
                grow(
                    pair,
                    Box::new(Grow(Box::new(Integral::new(*unit, true)))),
                    st,
                )
            } else {
                slide(pair, Box::new(Integral::new(*unit, false)), st)?
            }
        }
        Func::LinearFill(e) => Exec::LinearFill {
            input: e.clone(),
            x1y1: None,
            x2y2: None,
            last_seen: None,
        },
    })
}

/// Where each statement's value goes in the output document.
#[derive(Debug, Clone)]
pub enum OutNode {
    /// The value of statement `n`.
    Leaf(usize),
    /// Fields of a sub-document.
    Sub(Vec<(String, OutNode)>),
}

/// The output tree of the statement paths (conflicts were refused at parse time).
pub fn out_tree(fields: &[&str]) -> Vec<(String, OutNode)> {
    fn insert(tree: &mut Vec<(String, OutNode)>, parts: &[&str], idx: usize) {
        let Some((first, rest)) = parts.split_first() else {
            return;
        };
        if rest.is_empty() {
            tree.push(((*first).to_string(), OutNode::Leaf(idx)));
            return;
        }
        let pos = match tree.iter().position(|(k, _)| k == first) {
            Some(p) => p,
            None => {
                tree.push(((*first).to_string(), OutNode::Sub(Vec::new())));
                tree.len() - 1
            }
        };
        if let Some((_, OutNode::Sub(sub))) = tree.get_mut(pos) {
            insert(sub, rest, idx);
        }
    }
    let mut tree = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let parts: Vec<&str> = f.split('.').collect();
        insert(&mut tree, &parts, i);
    }
    tree
}

/// `doc` with the values set at their paths, as `$addFields` sets computed fields (through
/// arrays, replacing non-documents; a missing value removes the field).
pub fn apply_out(
    doc: &bson::RawDocument,
    tree: &[(String, OutNode)],
    vals: &[Option<RawBson>],
) -> Result<bson::RawDocumentBuf> {
    use crate::agg::doc::key;
    use crate::error::QueryError;
    let mut out = bson::RawDocumentBuf::new();
    let mut done = vec![false; tree.len()];
    for el in doc.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        let hit = tree
            .iter()
            .enumerate()
            .find(|(i, (name, _))| name == k.as_str() && !done.get(*i).copied().unwrap_or(true));
        let Some((i, (_, node))) = hit else {
            out.append(k, v);
            continue;
        };
        if let Some(d) = done.get_mut(i) {
            *d = true;
        }
        match node {
            OutNode::Leaf(n) => {
                if let Some(Some(val)) = vals.get(*n) {
                    out.append(k, val.clone());
                }
            }
            OutNode::Sub(sub) => out.append(k, apply_value(v, sub, vals)?),
        }
    }
    for (i, (name, node)) in tree.iter().enumerate() {
        if done.get(i).copied().unwrap_or(true) {
            continue;
        }
        match node {
            OutNode::Leaf(n) => {
                if let Some(Some(val)) = vals.get(*n) {
                    out.append(key(name)?, val.clone());
                }
            }
            OutNode::Sub(sub) => {
                let d = apply_out(&bson::RawDocumentBuf::new(), sub, vals)?;
                out.append(key(name)?, d);
            }
        }
    }
    Ok(out)
}

fn apply_value(
    v: RawBsonRef<'_>,
    sub: &[(String, OutNode)],
    vals: &[Option<RawBson>],
) -> Result<RawBson> {
    Ok(match v {
        RawBsonRef::Document(d) => RawBson::Document(apply_out(d, sub, vals)?),
        RawBsonRef::Array(a) => {
            let mut out = bson::RawArrayBuf::new();
            for e in a {
                let e = e.map_err(|e| crate::error::QueryError::BadValue(e.to_string()))?;
                out.push(apply_value(e, sub, vals)?);
            }
            RawBson::Array(out)
        }
        _ => RawBson::Document(apply_out(&bson::RawDocumentBuf::new(), sub, vals)?),
    })
}
