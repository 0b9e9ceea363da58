//! Parse-time optimization (`Expression::optimize` in expression.cpp), done because it is
//! observable: MongoDB folds constant sub-expressions when the query is planned, so
//! `{$divide: [1, 0]}` fails even on an empty collection and inside a `$cond` branch that is
//! never taken, while `{$and: [{$divide: [1, "$a"]}, false]}` never divides.
//!
//! Rules reproduced:
//! - every node optimizes its children first (so errors in constant sub-expressions surface
//!   before anything else);
//! - an operator whose arguments are all constants is evaluated once (`ExpressionNary`);
//!   arrays and objects of constants become constants;
//! - `$add`, `$multiply`, `$and`, `$or` (associative and commutative) absorb nested uses of
//!   themselves and move their constant arguments to the end, folded into one; `$concat` and
//!   `$concatArrays` (associative only) fold runs of adjacent constants;
//! - `$and` whose last argument is a false constant is `false`, a true one is dropped (with
//!   two arguments, the other is coerced to a boolean); `$or` symmetrically;
//! - `$cond` with a constant `if` is the chosen branch; `$ifNull` drops nullish constants and
//!   everything after a non-nullish one; `$switch` drops constant-false branches, turns the
//!   first constant-true branch into the default, and fails with 40069 when no branch and no
//!   default remain; `$convert` folds when all its arguments are constant.
//!
//! Invariants: optimization never changes the result of a successful evaluation, only when
//! (and whether) errors are raised, exactly as MongoDB's does; it never panics.

use bson::RawDocument;

use super::Variables;
use super::eval::{Cx, eval};
use super::parse::{Node, Op};
use super::value::Value;
use crate::error::{QueryError, Result};

fn is_const(n: &Node) -> bool {
    matches!(n, Node::Constant(_))
}

/// Evaluates a node whose inputs are all constant.
fn fold(n: &Node, slots: usize) -> Result<Node> {
    let empty = bson::rawdoc! {};
    let vars = Variables::with_now(bson::DateTime::from_millis(0));
    let root: &RawDocument = &empty;
    let mut cx = Cx {
        root,
        vars: &vars,
        locals: vec![Value::Missing; slots],
    };
    let v = eval(n, &mut cx)?;
    Ok(Node::Constant(v.to_bson()))
}

/// Optimizes a parsed tree (`slots` is the number of local variable slots it uses). Each
/// kind of node has its own function so that the frame kept per nesting level stays small.
pub(crate) fn optimize(n: Node, slots: usize) -> Result<Node> {
    match n {
        Node::Constant(_) | Node::Path(..) => Ok(n),
        Node::Array(items) => optimize_array(items, slots),
        Node::Object(fields) => optimize_object(fields, slots),
        Node::Op(op, args) => optimize_op(op, args, slots),
        Node::Switch { branches, default } => optimize_switch(branches, default, slots),
        Node::Named(op, args) => optimize_named(op, args, slots),
        Node::SortArray { input, by } => {
            let input = optimize_box(input, slots)?;
            let node = Node::SortArray { input, by };
            match &node {
                Node::SortArray { input, .. } if is_const(input) => fold(&node, slots),
                _ => Ok(node),
            }
        }
        Node::Accum(form) => optimize_accum(form, slots),
        other => optimize_scoped(other, slots),
    }
}

fn optimize_all(nodes: Vec<Node>, slots: usize) -> Result<Vec<Node>> {
    nodes.into_iter().map(|n| optimize(n, slots)).collect()
}

/// Optimizes a boxed child in place (reusing the allocation).
fn optimize_box(mut n: Box<Node>, slots: usize) -> Result<Box<Node>> {
    let taken = std::mem::replace(&mut *n, Node::Constant(None));
    *n = optimize(taken, slots)?;
    Ok(n)
}

#[inline(never)]
fn optimize_array(items: Vec<Node>, slots: usize) -> Result<Node> {
    let items = optimize_all(items, slots)?;
    let all = items.iter().all(is_const);
    let node = Node::Array(items);
    if all { fold(&node, slots) } else { Ok(node) }
}

#[inline(never)]
fn optimize_object(fields: Vec<(String, Node)>, slots: usize) -> Result<Node> {
    let fields = fields
        .into_iter()
        .map(|(k, v)| Ok((k, optimize(v, slots)?)))
        .collect::<Result<Vec<_>>>()?;
    let all = fields.iter().all(|(_, v)| is_const(v));
    let node = Node::Object(fields);
    if all { fold(&node, slots) } else { Ok(node) }
}

fn truthy_constant(c: &Option<bson::RawBson>) -> bool {
    c.as_ref()
        .is_some_and(|b| super::value::truthy(b.as_raw_bson_ref()))
}

#[inline(never)]
fn optimize_switch(
    branches: Vec<(Node, Node)>,
    default: Option<Box<Node>>,
    slots: usize,
) -> Result<Node> {
    let mut default = match default {
        Some(d) => Some(optimize_box(d, slots)?),
        None => None,
    };
    let mut kept = Vec::new();
    for (case, then) in branches {
        let case = optimize(case, slots)?;
        if let Node::Constant(c) = &case {
            if truthy_constant(c) {
                default = Some(Box::new(optimize(then, slots)?));
                break;
            }
            continue;
        }
        kept.push((case, optimize(then, slots)?));
    }
    if kept.is_empty() {
        return match default {
            Some(d) => Ok(*d),
            None => Err(QueryError::Location(
                40069,
                "One cannot execute a switch statement where all the cases evaluate to false \
                 without a default."
                    .into(),
            )),
        };
    }
    Ok(Node::Switch {
        branches: kept,
        default,
    })
}

/// Named-argument operators fold when every given argument is constant
/// (`ExpressionConstant::allNullOrConstant`).
#[inline(never)]
fn optimize_named(op: super::named::Named, args: Vec<Option<Node>>, slots: usize) -> Result<Node> {
    let args = args
        .into_iter()
        .map(|a| a.map(|n| optimize(n, slots)).transpose())
        .collect::<Result<Vec<_>>>()?;
    let all = args.iter().flatten().all(is_const);
    let node = Node::Named(op, args);
    if all { fold(&node, slots) } else { Ok(node) }
}

/// `$let`, `$map`, `$filter`, `$reduce`: their parts are optimized, nothing is folded.
#[inline(never)]
fn optimize_scoped(n: Node, slots: usize) -> Result<Node> {
    Ok(match n {
        Node::Let { vars, body } => {
            let body = optimize(*body, slots)?;
            if vars.is_empty() {
                return Ok(body);
            }
            let vars = vars
                .into_iter()
                .map(|(s, v)| Ok((s, optimize(v, slots)?)))
                .collect::<Result<Vec<_>>>()?;
            Node::Let {
                vars,
                body: Box::new(body),
            }
        }
        Node::Map { input, slot, body } => Node::Map {
            input: optimize_box(input, slots)?,
            slot,
            body: optimize_box(body, slots)?,
        },
        Node::Filter {
            input,
            slot,
            cond,
            limit,
        } => Node::Filter {
            input: optimize_box(input, slots)?,
            slot,
            cond: optimize_box(cond, slots)?,
            limit: match limit {
                Some(l) => Some(optimize_box(l, slots)?),
                None => None,
            },
        },
        Node::Reduce {
            input,
            initial,
            this_slot,
            value_slot,
            body,
        } => Node::Reduce {
            input: optimize_box(input, slots)?,
            initial: optimize_box(initial, slots)?,
            this_slot,
            value_slot,
            body: optimize_box(body, slots)?,
        },
        other => other,
    })
}

/// An accumulator expression: its children are optimized; all constant, it is folded.
#[inline(never)]
fn optimize_accum(mut form: Box<super::accum::AccumForm>, slots: usize) -> Result<Node> {
    for child in form.children_mut() {
        let taken = std::mem::replace(child, Node::Constant(None));
        *child = optimize(taken, slots)?;
    }
    let all = form.children().all(is_const);
    let node = Node::Accum(form);
    if all { fold(&node, slots) } else { Ok(node) }
}

#[inline(never)]
fn optimize_op(op: Op, args: Vec<Node>, slots: usize) -> Result<Node> {
    let args = optimize_all(args, slots)?;
    finish_op(op, args, slots)
}

/// Folds an operator whose arguments are optimized.
#[inline(never)]
fn finish_op(op: Op, args: Vec<Node>, slots: usize) -> Result<Node> {
    match op {
        Op::Cond => {
            let mut it = args.into_iter();
            let (Some(i), Some(t), Some(e)) = (it.next(), it.next(), it.next()) else {
                return Err(QueryError::BadValue("internal error: $cond arity".into()));
            };
            if let Node::Constant(c) = &i {
                let truthy = c
                    .as_ref()
                    .is_some_and(|b| super::value::truthy(b.as_raw_bson_ref()));
                return Ok(if truthy { t } else { e });
            }
            return Ok(Node::Op(Op::Cond, vec![i, t, e]));
        }
        Op::IfNull => {
            if args.iter().all(is_const) {
                return fold(&Node::Op(op, args), slots);
            }
            let mut kept: Vec<Node> = Vec::new();
            let n = args.len();
            for (i, a) in args.into_iter().enumerate() {
                if i + 1 == n {
                    kept.push(a);
                    break;
                }
                match &a {
                    Node::Constant(c) => {
                        let nullish = c.as_ref().is_none_or(|b| {
                            matches!(b, bson::RawBson::Null | bson::RawBson::Undefined)
                        });
                        if !nullish {
                            kept.push(a);
                            break;
                        }
                    }
                    _ => kept.push(a),
                }
            }
            if kept.len() == 1
                && let Some(only) = kept.pop()
            {
                return Ok(only);
            }
            return Ok(Node::Op(op, kept));
        }
        _ => {}
    }
    if matches!(op, Op::Rand | Op::Meta | Op::Function) {
        // Random, per-document metadata and JavaScript are never constant.
        return Ok(Node::Op(op, args));
    }
    if args.iter().all(is_const) {
        return fold(&Node::Op(op, args), slots);
    }
    if matches!(op, Op::Convert { .. }) {
        return Ok(Node::Op(op, args));
    }
    let (assoc, comm) = op.associative_commutative();
    let mut args = args;
    if assoc {
        let mut consts: Vec<Node> = Vec::new();
        let mut out: Vec<Node> = Vec::new();
        let mut queue: std::collections::VecDeque<Node> = args.into_iter().collect();
        while let Some(a) = queue.pop_front() {
            if is_const(&a) {
                consts.push(a);
                continue;
            }
            if let Node::Op(inner, kids) = a {
                if inner == op {
                    for k in kids.into_iter().rev() {
                        queue.push_front(k);
                    }
                    continue;
                }
                flush(op, comm, &mut consts, &mut out, slots)?;
                out.push(Node::Op(inner, kids));
                continue;
            }
            flush(op, comm, &mut consts, &mut out, slots)?;
            out.push(a);
        }
        if consts.len() > 1 {
            out.push(fold(&Node::Op(op, consts), slots)?);
        } else {
            out.append(&mut consts);
        }
        args = out;
    }
    if matches!(op, Op::And | Op::Or)
        && let Some(Node::Constant(c)) = args.last()
    {
        let truthy = c
            .as_ref()
            .is_some_and(|b| super::value::truthy(b.as_raw_bson_ref()));
        let decisive = if op == Op::And { !truthy } else { truthy };
        if decisive {
            return Ok(Node::Constant(Some(bson::RawBson::Boolean(op == Op::Or))));
        }
        args.pop();
        if args.len() == 1
            && let Some(only) = args.pop()
        {
            return Ok(Node::Op(Op::CoerceToBool, vec![only]));
        }
    }
    Ok(Node::Op(op, args))
}

/// For non-commutative associative operators: folds the pending run of constants before a
/// non-constant argument.
fn flush(
    op: Op,
    commutative: bool,
    consts: &mut Vec<Node>,
    out: &mut Vec<Node>,
    slots: usize,
) -> Result<()> {
    if commutative {
        return Ok(());
    }
    if consts.len() > 1 {
        out.push(fold(&Node::Op(op, std::mem::take(consts)), slots)?);
    } else {
        out.append(consts);
    }
    Ok(())
}
