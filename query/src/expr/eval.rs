//! Evaluation of a parsed [`Node`] against a document (each operator's `evaluate` in
//! expression.cpp).
//!
//! Field paths follow `ExpressionFieldPath::evaluatePath`: documents are entered by field
//! name; an array met before the end of the path maps the rest of the path over its elements
//! that are documents, skipping the others and the elements where the result is missing
//! (`$a.b` over `a: [{b: 1}, {c: 1}, 5, {b: [2]}]` is `[1, [2]]`); a scalar before the end
//! is missing. There is no positional array indexing in expressions (`$a.0` looks for a field
//! called `0`).
//!
//! Invariants: evaluation never panics; recursion depth is bounded by the parse depth (no
//! operator recurses on data except `$filter`/`$map`/`$reduce`, which iterate); a local slot
//! is always written before it is read (slots are bound by the construct that owns them).

use std::cmp::Ordering;

use bson::raw::CStr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::Variables;
use super::arith::{self, AddState, MultiplyState};
use super::convert;
use super::parse::{CmpKind, Node, Op, Var};
use super::value::{Num, Value, coerce_to_string, compare, format_g, int_or_long};
use crate::error::{QueryError, Result};
use cairn_storage::decimal::Rounding;

fn loc(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::Location(code, msg.into())
}

/// ExceededMemoryLimit.
const EXCEEDED_MEMORY_LIMIT: i32 = 146;
/// `internalQueryMaxRangeBytes`.
const MAX_RANGE_BYTES: i64 = 64 * 1024 * 1024;

/// The evaluation context: the document and the variables' values.
pub(crate) struct Cx<'a> {
    pub(crate) root: &'a RawDocument,
    pub(crate) vars: &'a Variables,
    pub(crate) locals: Vec<Value<'a>>,
}

impl<'a> Cx<'a> {
    fn set_local(&mut self, slot: usize, v: Value<'a>) {
        if let Some(s) = self.locals.get_mut(slot) {
            *s = v;
        }
    }
}

/// `evaluatePath` from a document.
fn path_doc<'b>(d: &'b RawDocument, parts: &[String]) -> Value<'b> {
    let Some((first, rest)) = parts.split_first() else {
        return Value::Ref(RawBsonRef::Document(d));
    };
    let Some(v) = super::field::field(d, first) else {
        return Value::Missing;
    };
    if rest.is_empty() {
        return Value::Ref(v);
    }
    path_value(v, rest)
}

/// `evaluatePath` from the value `first` of the path's first field in the document (`None`:
/// missing), `rest` the path's other fields: what [`path_doc`] gives once it has read the
/// first field.
pub(crate) fn path_from_first<'b>(first: Option<RawBsonRef<'b>>, rest: &[String]) -> Value<'b> {
    match first {
        None => Value::Missing,
        Some(v) => path_value(v, rest),
    }
}

/// The rest of a path applied to a value (documents entered, arrays mapped).
fn path_value<'b>(v: RawBsonRef<'b>, parts: &[String]) -> Value<'b> {
    if parts.is_empty() {
        return Value::Ref(v);
    }
    match v {
        RawBsonRef::Document(sub) => path_doc(sub, parts),
        RawBsonRef::Array(a) => {
            let mut out = RawArrayBuf::new();
            for el in a {
                let Ok(RawBsonRef::Document(sub)) = el else {
                    if el.is_err() {
                        break;
                    }
                    continue;
                };
                match path_doc(sub, parts) {
                    Value::Missing => {}
                    Value::Ref(r) => out.push(r),
                    Value::Owned(o) => out.push(o),
                }
            }
            Value::Owned(RawBson::Array(out))
        }
        _ => Value::Missing,
    }
}

/// The elements of an array value, borrowing when the array is borrowed.
pub(crate) fn elements<'a>(v: &Value<'a>) -> Vec<Value<'a>> {
    match v {
        Value::Ref(RawBsonRef::Array(a)) => a
            .into_iter()
            .map_while(|e| e.ok())
            .map(Value::Ref)
            .collect(),
        Value::Owned(RawBson::Array(a)) => a
            .into_iter()
            .map_while(|e| e.ok())
            .map(|e| Value::Owned(RawBson::from(e)))
            .collect(),
        _ => Vec::new(),
    }
}

fn array_len(v: &Value<'_>) -> usize {
    match v.get() {
        Some(RawBsonRef::Array(a)) => a.into_iter().map_while(|e| e.ok()).count(),
        _ => 0,
    }
}

/// Builds an array value from evaluated elements (missing elements are skipped).
pub(crate) fn make_array<'x>(items: impl IntoIterator<Item = Value<'x>>) -> Value<'static> {
    let mut out = RawArrayBuf::new();
    for v in items {
        match v {
            Value::Missing => {}
            Value::Ref(r) => out.push(r),
            Value::Owned(o) => out.push(o),
        }
    }
    Value::Owned(RawBson::Array(out))
}

pub(crate) fn key(name: &str) -> Result<&CStr> {
    <&CStr>::try_from(name).map_err(|e| QueryError::BadValue(format!("invalid field name: {e}")))
}

/// Evaluates `n`. Each kind of node is evaluated by its own function so that the frame
/// kept on the stack per nesting level stays small.
pub(crate) fn eval<'a>(n: &'a Node, cx: &mut Cx<'a>) -> Result<Value<'a>> {
    match n {
        Node::Constant(Some(c)) => Ok(Value::Ref(c.as_raw_bson_ref())),
        Node::Constant(None) => Ok(Value::Missing),
        Node::Path(var, parts) => eval_path(var, parts, cx),
        Node::Array(items) => eval_array(items, cx),
        Node::Object(fields) => eval_object(fields, cx),
        Node::Op(op, args) => eval_op(*op, args, cx),
        Node::Named(op, args) => super::named::eval_named(*op, args, cx),
        Node::SortArray { input, by } => super::named::sort_array(input, by, cx),
        Node::Switch { branches, default } => eval_switch(branches, default.as_deref(), cx),
        Node::Let { vars, body } => eval_let(vars, body, cx),
        Node::Map { input, slot, body } => eval_map(input, *slot, body, cx),
        Node::Filter {
            input,
            slot,
            cond,
            limit,
        } => eval_filter(input, *slot, cond, limit.as_deref(), cx),
        Node::Reduce {
            input,
            initial,
            this_slot,
            value_slot,
            body,
        } => eval_reduce(input, initial, (*this_slot, *value_slot), body, cx),
        Node::Accum(form) => super::accum::eval_accum(form, cx),
    }
}

#[inline(never)]
fn eval_array<'a>(items: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let mut out = RawArrayBuf::new();
    for item in items {
        match eval(item, cx)? {
            Value::Missing => out.push(RawBsonRef::Null),
            Value::Ref(r) => out.push(r),
            Value::Owned(o) => out.push(o),
        }
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

#[inline(never)]
fn eval_object<'a>(fields: &'a [(String, Node)], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let mut out = RawDocumentBuf::new();
    for (k, node) in fields {
        match eval(node, cx)? {
            Value::Missing => {}
            Value::Ref(r) => out.append(key(k)?, r),
            Value::Owned(o) => out.append(key(k)?, o),
        }
    }
    Ok(Value::Owned(RawBson::Document(out)))
}

#[inline(never)]
fn eval_switch<'a>(
    branches: &'a [(Node, Node)],
    default: Option<&'a Node>,
    cx: &mut Cx<'a>,
) -> Result<Value<'a>> {
    for (case, then) in branches {
        if eval(case, cx)?.truthy() {
            return eval(then, cx);
        }
    }
    match default {
        Some(d) => eval(d, cx),
        None => Err(loc(
            40066,
            "$switch could not find a matching branch for an input, and no default was \
             specified.",
        )),
    }
}

#[inline(never)]
fn eval_let<'a>(vars: &'a [(usize, Node)], body: &'a Node, cx: &mut Cx<'a>) -> Result<Value<'a>> {
    for (slot, node) in vars {
        let v = eval(node, cx)?;
        cx.set_local(*slot, v);
    }
    eval(body, cx)
}

#[inline(never)]
fn eval_map<'a>(
    input: &'a Node,
    slot: usize,
    body: &'a Node,
    cx: &mut Cx<'a>,
) -> Result<Value<'a>> {
    let input = eval(input, cx)?;
    if input.nullish() {
        return Ok(Value::null());
    }
    if !input.is_array() {
        return Err(loc(
            16883,
            format!("input to $map must be an array not {}", input.type_name()),
        ));
    }
    let mut out = Vec::new();
    for el in elements(&input) {
        cx.set_local(slot, el);
        match eval(body, cx)? {
            Value::Missing => out.push(Value::null()),
            v => out.push(v),
        }
    }
    Ok(make_array(out))
}

#[inline(never)]
fn eval_filter<'a>(
    input: &'a Node,
    slot: usize,
    cond: &'a Node,
    limit: Option<&'a Node>,
    cx: &mut Cx<'a>,
) -> Result<Value<'a>> {
    let input = eval(input, cx)?;
    if input.nullish() {
        return Ok(Value::null());
    }
    if !input.is_array() {
        return Err(loc(
            28651,
            format!(
                "input to $filter must be an array not {}",
                input.type_name()
            ),
        ));
    }
    let items = elements(&input);
    if items.is_empty() {
        return Ok(input);
    }
    let mut remaining: Option<i64> = None;
    if let Some(l) = limit {
        let lv = eval(l, cx)?;
        if !lv.nullish() {
            let show = lv
                .get()
                .map(cairn_storage::display::value)
                .unwrap_or_default();
            let Some(n) = lv.num().and_then(Num::exact_i32) else {
                return Err(loc(
                    327391,
                    format!(
                        "$filter: limit must be represented as a 32-bit integral value: \
                         {show}"
                    ),
                ));
            };
            if n <= 0 {
                return Err(loc(
                    327392,
                    format!("$filter: limit must be greater than 0: {show}"),
                ));
            }
            remaining = Some(i64::from(n));
        }
    }
    let mut out = Vec::new();
    for el in items {
        cx.set_local(slot, el.clone());
        if eval(cond, cx)?.truthy() {
            out.push(el);
            if let Some(r) = remaining.as_mut() {
                *r -= 1;
                if *r == 0 {
                    break;
                }
            }
        }
    }
    Ok(make_array(out))
}

#[inline(never)]
fn eval_reduce<'a>(
    input: &'a Node,
    initial: &'a Node,
    (this_slot, value_slot): (usize, usize),
    body: &'a Node,
    cx: &mut Cx<'a>,
) -> Result<Value<'a>> {
    let input = eval(input, cx)?;
    if input.nullish() {
        return Ok(Value::null());
    }
    if !input.is_array() {
        let show = input
            .get()
            .map(cairn_storage::display::value)
            .unwrap_or_default();
        return Err(loc(
            40080,
            format!("$reduce requires that 'input' be an array, found: {show}"),
        ));
    }
    let mut acc = eval(initial, cx)?;
    for el in elements(&input) {
        cx.set_local(this_slot, el);
        cx.set_local(value_slot, acc);
        acc = eval(body, cx)?;
    }
    Ok(acc)
}

fn eval_path<'a>(var: &'a Var, parts: &'a [String], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    match var {
        Var::Root => Ok(path_doc(cx.root, parts)),
        Var::Now => {
            let now = Value::Owned(RawBson::DateTime(cx.vars.now()));
            Ok(if parts.is_empty() {
                now
            } else {
                Value::Missing
            })
        }
        Var::ClusterTime => match cx.vars.cluster_time() {
            Some(ts) if parts.is_empty() => Ok(Value::Owned(RawBson::Timestamp(ts))),
            Some(_) => Ok(Value::Missing),
            None => Err(loc(
                51144,
                "Buildin variable '$$CLUSTER_TIME' is not available",
            )),
        },
        Var::User(name) => match cx.vars.get(name) {
            Some(v) => Ok(path_value(v.as_raw_bson_ref(), parts)),
            None => Err(loc(17276, format!("Use of undefined variable: {name}"))),
        },
        Var::Local(slot) => {
            let v = cx.locals.get(*slot).cloned().unwrap_or(Value::Missing);
            if parts.is_empty() {
                return Ok(v);
            }
            Ok(match v {
                Value::Missing => Value::Missing,
                Value::Ref(r) => path_value(r, parts),
                Value::Owned(o) => path_value(o.as_raw_bson_ref(), parts).into_static(),
            })
        }
    }
}

fn arg(args: &[Node], i: usize) -> Result<&Node> {
    args.get(i)
        .ok_or_else(|| QueryError::BadValue("internal error: missing expression argument".into()))
}

fn eval_arg<'a>(args: &'a [Node], i: usize, cx: &mut Cx<'a>) -> Result<Value<'a>> {
    eval(arg(args, i)?, cx)
}

fn as_static<'a>(r: Result<Value<'static>>) -> Result<Value<'a>> {
    r
}

fn eval_op<'a>(op: Op, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    match op {
        Op::Add => op_add(args, cx),
        Op::Multiply => op_multiply(args, cx),
        Op::Subtract | Op::Divide | Op::Mod | Op::Pow | Op::Log => op_binary_arith(op, args, cx),
        Op::Abs | Op::Ceil | Op::Floor | Op::Sqrt | Op::Exp | Op::Ln | Op::Log10 => {
            op_single_numeric(op, args, cx)
        }
        Op::Round | Op::Trunc => op_round(op, args, cx),
        Op::And => op_and(args, cx),
        Op::Or => op_or(args, cx),
        Op::Not => Ok(Value::bool(!eval_arg(args, 0, cx)?.truthy())),
        Op::CoerceToBool => Ok(Value::bool(eval_arg(args, 0, cx)?.truthy())),
        Op::Compare(kind) => op_compare(kind, args, cx),
        Op::Cond => op_cond(args, cx),
        Op::IfNull => op_if_null(args, cx),
        Op::In => op_in(args, cx),
        Op::Size => op_size(args, cx),
        Op::ArrayElemAt => op_array_elem_at(op, args, cx),
        Op::First | Op::Last => op_first_last(op, args, cx),
        Op::ConcatArrays => op_concat_arrays(args, cx),
        Op::ReverseArray => op_reverse_array(args, cx),
        Op::IsArray => Ok(Value::bool(eval_arg(args, 0, cx)?.is_array())),
        Op::IsNumber => Ok(Value::bool(eval_arg(args, 0, cx)?.num().is_some())),
        Op::Type => Ok(Value::string(eval_arg(args, 0, cx)?.type_name())),
        Op::Slice => slice(args, cx),
        Op::IndexOfArray => index_of_array(args, cx),
        Op::Range => range(args, cx),
        Op::AllElementsTrue | Op::AnyElementTrue => op_all_any(op, args, cx),
        Op::Concat => op_concat(args, cx),
        Op::ToLower | Op::ToUpper => op_case(op, args, cx),
        Op::StrLenCP | Op::StrLenBytes => op_str_len(op, args, cx),
        Op::SubstrCP => substr_cp(args, cx),
        Op::SubstrBytes => substr_bytes(args, cx),
        Op::Strcasecmp => op_strcasecmp(args, cx),
        Op::Split => op_split(args, cx),
        Op::Convert { on_error, on_null } => op_convert(on_error, on_null, args, cx),
        Op::SetEquals
        | Op::SetIntersection
        | Op::SetUnion
        | Op::SetDifference
        | Op::SetIsSubset => super::ops::set_op(op, args, cx),
        Op::IndexOfBytes => super::strings::index_of(false, args, cx),
        Op::IndexOfCP => super::strings::index_of(true, args, cx),
        Op::ObjectToArray => super::ops::object_to_array(eval_arg(args, 0, cx)?),
        Op::ArrayToObject => as_static(super::ops::array_to_object(eval_arg(args, 0, cx)?)),
        Op::MergeObjects => super::ops::merge_objects(args, cx),
        Op::BitAnd | Op::BitOr | Op::BitXor | Op::BitNot => super::ops::bitwise(op, args, cx),
        Op::BsonSize | Op::BinarySize => {
            as_static(super::ops::size_op(op, &eval_arg(args, 0, cx)?))
        }
        Op::TsSecond | Op::TsIncrement => as_static(super::ops::ts_op(op, &eval_arg(args, 0, cx)?)),
        Op::ToHashedIndexKey => Ok(super::ops::hashed_key(&eval_arg(args, 0, cx)?)),
        Op::Trig(t) => as_static(super::trig::apply(t, &eval_arg(args, 0, cx)?)),
        Op::Atan2 => {
            let y = eval_arg(args, 0, cx)?;
            let x = eval_arg(args, 1, cx)?;
            as_static(super::trig::atan2(&y, &x))
        }
        Op::Rand => Ok(super::ops::rand()),
        // Without text search, `$search`, `$geoNear` or `$sample` no metadata is attached.
        Op::Meta => Ok(Value::Missing),
        Op::Function => {
            for a in args {
                eval(a, cx)?;
            }
            Err(super::ops::no_javascript())
        }
    }
}

/// `arrayElemAt` (shared by `$arrayElemAt`, `$first`, `$last`).
fn array_elem_at<'a>(
    name: &str,
    arity: usize,
    array: Value<'a>,
    index: &Value<'_>,
) -> Result<Value<'a>> {
    if array.nullish() || index.nullish() {
        return Ok(Value::null());
    }
    if !array.is_array() {
        return Err(loc(
            28689,
            format!(
                "{name}'s {} must be an array, but is {}",
                if arity == 1 {
                    "argument"
                } else {
                    "first argument"
                },
                array.type_name()
            ),
        ));
    }
    let Some(n) = index.num() else {
        return Err(loc(
            28690,
            format!(
                "{name}'s second argument must be a numeric value, but is {}",
                index.type_name()
            ),
        ));
    };
    let Some(i) = n.exact_i32() else {
        return Err(loc(
            28691,
            format!(
                "{name}'s second argument must be representable as a 32-bit integer: {}",
                format_g(n.to_f64())
            ),
        ));
    };
    let items = elements(&array);
    let len = items.len() as i64;
    let mut i = i64::from(i);
    if i < 0 {
        if -i > len {
            return Ok(Value::Missing);
        }
        i += len;
    }
    Ok(usize::try_from(i)
        .ok()
        .and_then(|i| items.into_iter().nth(i))
        .unwrap_or(Value::Missing))
}

fn slice<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let array = eval_arg(args, 0, cx)?;
    let second = eval_arg(args, 1, cx)?;
    if array.nullish() || second.nullish() {
        return Ok(Value::null());
    }
    if !array.is_array() {
        return Err(loc(
            28724,
            format!(
                "First argument to $slice must be an array, but is of type: {}",
                array.type_name()
            ),
        ));
    }
    let Some(n2) = second.num() else {
        return Err(loc(
            28725,
            format!(
                "Second argument to $slice must be a numeric value, but is of type: {}",
                second.type_name()
            ),
        ));
    };
    let Some(arg2) = n2.exact_i32() else {
        return Err(loc(
            28726,
            format!(
                "Second argument to $slice can't be represented as a 32-bit integer: {}",
                format_g(n2.to_f64())
            ),
        ));
    };
    let items = elements(&array);
    let len = items.len() as i64;
    let (start, end) = if args.len() == 2 {
        let count = i64::from(arg2);
        if count >= 0 {
            (0, len.min(count))
        } else {
            ((len + count).max(0), len)
        }
    } else {
        let s = i64::from(arg2);
        let start = if s < 0 { (len + s).max(0) } else { len.min(s) };
        let count_v = eval_arg(args, 2, cx)?;
        if count_v.nullish() {
            return Ok(Value::null());
        }
        let Some(cn) = count_v.num() else {
            return Err(loc(
                28727,
                format!(
                    "Third argument to $slice must be numeric, but is of type: {}",
                    count_v.type_name()
                ),
            ));
        };
        let Some(count) = cn.exact_i32() else {
            return Err(loc(
                28728,
                format!(
                    "Third argument to $slice can't be represented as a 32-bit integer: {}",
                    format_g(cn.to_f64())
                ),
            ));
        };
        if count <= 0 {
            return Err(loc(
                28729,
                format!("Third argument to $slice must be positive: {count}"),
            ));
        }
        (start, (start + i64::from(count)).min(len))
    };
    let start = usize::try_from(start).unwrap_or(0);
    let end = usize::try_from(end).unwrap_or(0);
    Ok(make_array(
        items
            .into_iter()
            .skip(start)
            .take(end.saturating_sub(start)),
    ))
}

/// `uassertIfNotIntegralAndNonNegative`.
fn index_arg(v: &Value<'_>, op: &str, what: &str) -> Result<i32> {
    let show = v
        .get()
        .map(cairn_storage::display::value)
        .unwrap_or_default();
    let Some(i) = v.num().and_then(Num::exact_i32) else {
        return Err(loc(
            40096,
            format!(
                "{op}requires an integral {what}, found a value of type: {}, with value: {show}",
                v.type_name()
            ),
        ));
    };
    if i < 0 {
        return Err(loc(
            40097,
            format!("{op} requires a nonnegative {what}, found: {show}"),
        ));
    }
    Ok(i)
}

fn index_of_array<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let array = eval_arg(args, 0, cx)?;
    if array.nullish() {
        return Ok(Value::null());
    }
    if !array.is_array() {
        return Err(loc(
            40090,
            format!(
                "$indexOfArray requires an array as a first argument, found: {}",
                array.type_name()
            ),
        ));
    }
    let items = elements(&array);
    let mut start = 0usize;
    if args.len() > 2 {
        let v = eval_arg(args, 2, cx)?;
        start = usize::try_from(index_arg(&v, "$indexOfArray", "starting index")?).unwrap_or(0);
    }
    let mut end = items.len();
    if args.len() > 3 {
        let v = eval_arg(args, 3, cx)?;
        end =
            end.min(usize::try_from(index_arg(&v, "$indexOfArray", "ending index")?).unwrap_or(0));
    }
    let needle = eval_arg(args, 1, cx)?;
    for (i, item) in items.iter().enumerate().take(end).skip(start) {
        if compare(item, &needle) == Ordering::Equal {
            return Ok(Value::int(i32::try_from(i).unwrap_or(i32::MAX)));
        }
    }
    Ok(Value::int(-1))
}

fn range<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let start_v = eval_arg(args, 0, cx)?;
    let end_v = eval_arg(args, 1, cx)?;
    let show = |v: &Value<'_>| {
        v.get()
            .map(cairn_storage::display::value)
            .unwrap_or_default()
    };
    let Some(sn) = start_v.num() else {
        return Err(loc(
            34443,
            format!(
                "$range requires a numeric starting value, found value of type: {}",
                start_v.type_name()
            ),
        ));
    };
    let Some(start) = sn.exact_i32() else {
        return Err(loc(
            34444,
            format!(
                "$range requires a starting value that can be represented as a 32-bit integer, \
                 found value: {}",
                show(&start_v)
            ),
        ));
    };
    let Some(en) = end_v.num() else {
        return Err(loc(
            34445,
            format!(
                "$range requires a numeric ending value, found value of type: {}",
                end_v.type_name()
            ),
        ));
    };
    let Some(end) = en.exact_i32() else {
        return Err(loc(
            34446,
            format!(
                "$range requires an ending value that can be represented as a 32-bit integer, \
                 found value: {}",
                show(&end_v)
            ),
        ));
    };
    let mut step: i64 = 1;
    if args.len() == 3 {
        let step_v = eval_arg(args, 2, cx)?;
        let Some(stn) = step_v.num() else {
            return Err(loc(
                34447,
                format!(
                    "$range requires a numeric step value, found value of type:{}",
                    step_v.type_name()
                ),
            ));
        };
        let Some(s) = stn.exact_i32() else {
            return Err(loc(
                34448,
                format!(
                    "$range requires a step value that can be represented as a 32-bit integer, \
                     found value: {}",
                    show(&step_v)
                ),
            ));
        };
        if s == 0 {
            return Err(loc(34449, "$range requires a non-zero step value"));
        }
        step = i64::from(s);
    }
    let (mut cur, end) = (i64::from(start), i64::from(end));
    let steps = (end - cur) / step;
    let length = if steps >= 0 { 1 + steps } else { 0 };
    let needed = 24 + length * 16;
    if needed >= MAX_RANGE_BYTES {
        return Err(loc(
            EXCEEDED_MEMORY_LIMIT,
            format!(
                "$range would use too much memory ({needed} bytes) and cannot spill to disk. \
                 Memory limit: {MAX_RANGE_BYTES} bytes"
            ),
        ));
    }
    let mut out = RawArrayBuf::new();
    while if step > 0 { cur < end } else { cur > end } {
        out.push(cur as i32);
        cur += step;
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

fn substr_cp<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let s = coerce_to_string(&eval_arg(args, 0, cx)?)?;
    let lower = eval_arg(args, 1, cx)?;
    let length = eval_arg(args, 2, cx)?;
    let show = |v: &Value<'_>| {
        v.get()
            .map(cairn_storage::display::value)
            .unwrap_or_default()
    };
    let Some(ln) = lower.num() else {
        return Err(loc(
            34450,
            format!(
                "$substrCP: starting index must be a numeric type (is BSON type {})",
                lower.type_name()
            ),
        ));
    };
    let Some(start) = ln.exact_i32() else {
        return Err(loc(
            34451,
            format!(
                "$substrCP: starting index cannot be represented as a 32-bit integral value: {}",
                show(&lower)
            ),
        ));
    };
    let Some(lenn) = length.num() else {
        return Err(loc(
            34452,
            format!(
                "$substrCP: length must be a numeric type (is BSON type {})",
                length.type_name()
            ),
        ));
    };
    let Some(len) = lenn.exact_i32() else {
        return Err(loc(
            34453,
            format!(
                "$substrCP: length cannot be represented as a 32-bit integral value: {}",
                show(&length)
            ),
        ));
    };
    if len < 0 {
        return Err(loc(
            34454,
            "$substrCP: length must be a nonnegative integer.",
        ));
    }
    if start < 0 {
        return Err(loc(
            34455,
            "$substrCP: the starting index must be nonnegative integer.",
        ));
    }
    let out: String = s
        .chars()
        .skip(usize::try_from(start).unwrap_or(0))
        .take(usize::try_from(len).unwrap_or(0))
        .collect();
    Ok(Value::string(out))
}

fn substr_bytes<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let s = coerce_to_string(&eval_arg(args, 0, cx)?)?;
    let lower = eval_arg(args, 1, cx)?;
    let length = eval_arg(args, 2, cx)?;
    let Some(ln) = lower.num() else {
        return Err(loc(
            16034,
            format!(
                "$substrBytes:  starting index must be a numeric type (is BSON type {})",
                lower.type_name()
            ),
        ));
    };
    let Some(lenn) = length.num() else {
        return Err(loc(
            16035,
            format!(
                "$substrBytes:  length must be a numeric type (is BSON type {})",
                length.type_name()
            ),
        ));
    };
    let lower = ln.to_long()?;
    if lower < 0 {
        return Err(loc(
            50752,
            format!("$substrBytes:  starting index must be non-negative (got: {lower})"),
        ));
    }
    let lower = usize::try_from(lower).unwrap_or(usize::MAX);
    let signed_len = lenn.to_long()?;
    let bytes = s.as_bytes();
    let len = if signed_len < 0 {
        bytes.len()
    } else {
        usize::try_from(signed_len).unwrap_or(usize::MAX)
    };
    let continuation = |i: usize| bytes.get(i).is_some_and(|b| b & 0xC0 == 0x80);
    if lower < bytes.len() && continuation(lower) {
        return Err(loc(
            28656,
            "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.",
        ));
    }
    let end = lower.saturating_add(len);
    if end < bytes.len() && continuation(end) {
        return Err(loc(
            28657,
            "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 character.",
        ));
    }
    if lower >= bytes.len() {
        return Ok(Value::string(""));
    }
    let end = end.min(bytes.len());
    Ok(Value::string(s.get(lower..end).unwrap_or("")))
}

#[inline(never)]
fn op_add<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let mut st = AddState::new();
    for a in args {
        let v = eval(a, cx)?;
        match v.get() {
            None | Some(RawBsonRef::Null) | Some(RawBsonRef::Undefined) => {
                return Ok(Value::null());
            }
            Some(r) => st.push(r)?,
        }
    }
    as_static(st.finish())
}

#[inline(never)]
fn op_multiply<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let mut st = MultiplyState::new();
    for a in args {
        let v = eval(a, cx)?;
        match v.get() {
            None | Some(RawBsonRef::Null) | Some(RawBsonRef::Undefined) => {
                return Ok(Value::null());
            }
            Some(r) => st.push(r)?,
        }
    }
    Ok(st.finish())
}

#[inline(never)]
fn op_binary_arith<'a>(op: Op, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let l = eval_arg(args, 0, cx)?;
    let r = eval_arg(args, 1, cx)?;
    as_static(match op {
        Op::Subtract => arith::subtract(&l, &r),
        Op::Divide => arith::divide(&l, &r),
        Op::Mod => arith::modulo(&l, &r),
        Op::Pow => arith::pow(&l, &r),
        _ => arith::log(&l, &r),
    })
}

#[inline(never)]
fn op_single_numeric<'a>(op: Op, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let v = eval_arg(args, 0, cx)?;
    let f = match op {
        Op::Abs => arith::abs,
        Op::Ceil => arith::ceil,
        Op::Floor => arith::floor,
        Op::Sqrt => arith::sqrt,
        Op::Exp => arith::exp,
        Op::Ln => arith::ln,
        _ => arith::log10,
    };
    as_static(arith::single_numeric(op.name(), &v, f))
}

#[inline(never)]
fn op_round<'a>(op: Op, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let v = eval_arg(args, 0, cx)?;
    let mode = if op == Op::Round {
        Rounding::HalfEven
    } else {
        Rounding::TowardZero
    };
    if v.nullish() {
        return Ok(Value::null());
    }
    let p = match args.get(1) {
        Some(n) => Some(eval(n, cx)?),
        None => None,
    };
    as_static(arith::round_or_trunc(op.name(), &v, p.as_ref(), mode))
}

#[inline(never)]
fn op_and<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    for a in args {
        if !eval(a, cx)?.truthy() {
            return Ok(Value::bool(false));
        }
    }
    Ok(Value::bool(true))
}

#[inline(never)]
fn op_or<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    for a in args {
        if eval(a, cx)?.truthy() {
            return Ok(Value::bool(true));
        }
    }
    Ok(Value::bool(false))
}

#[inline(never)]
fn op_compare<'a>(kind: CmpKind, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let l = eval_arg(args, 0, cx)?;
    let r = eval_arg(args, 1, cx)?;
    let ord = compare(&l, &r);
    Ok(match kind {
        CmpKind::Cmp => Value::int(match ord {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }),
        CmpKind::Eq => Value::bool(ord == Ordering::Equal),
        CmpKind::Ne => Value::bool(ord != Ordering::Equal),
        CmpKind::Gt => Value::bool(ord == Ordering::Greater),
        CmpKind::Gte => Value::bool(ord != Ordering::Less),
        CmpKind::Lt => Value::bool(ord == Ordering::Less),
        CmpKind::Lte => Value::bool(ord != Ordering::Greater),
    })
}

#[inline(never)]
fn op_cond<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    if eval_arg(args, 0, cx)?.truthy() {
        eval_arg(args, 1, cx)
    } else {
        eval_arg(args, 2, cx)
    }
}

#[inline(never)]
fn op_if_null<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let last = args.len().saturating_sub(1);
    for (i, a) in args.iter().enumerate() {
        let v = eval(a, cx)?;
        if !v.nullish() || i == last {
            return Ok(v);
        }
    }
    Ok(Value::Missing)
}

#[inline(never)]
fn op_in<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let needle = eval_arg(args, 0, cx)?;
    let hay = eval_arg(args, 1, cx)?;
    if !hay.is_array() {
        return Err(loc(
            40081,
            format!(
                "$in requires an array as a second argument, found: {}",
                hay.type_name()
            ),
        ));
    }
    let found = elements(&hay)
        .iter()
        .any(|e| compare(&needle, e) == Ordering::Equal);
    Ok(Value::bool(found))
}

#[inline(never)]
fn op_size<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let v = eval_arg(args, 0, cx)?;
    if !v.is_array() {
        return Err(loc(
            17124,
            format!(
                "The argument to $size must be an array, but was of type: {}",
                v.type_name()
            ),
        ));
    }
    Ok(int_or_long(array_len(&v) as i64).into_value())
}

#[inline(never)]
fn op_array_elem_at<'a>(op: Op, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let a = eval_arg(args, 0, cx)?;
    let i = eval_arg(args, 1, cx)?;
    array_elem_at(op.name(), 2, a, &i)
}

#[inline(never)]
fn op_first_last<'a>(op: Op, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let a = eval_arg(args, 0, cx)?;
    let idx = Value::int(if op == Op::First { 0 } else { -1 });
    array_elem_at(op.name(), 1, a, &idx)
}

#[inline(never)]
fn op_concat_arrays<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let mut out = Vec::new();
    for a in args {
        let v = eval(a, cx)?;
        if v.nullish() {
            return Ok(Value::null());
        }
        if !v.is_array() {
            return Err(loc(
                28664,
                format!("$concatArrays only supports arrays, not {}", v.type_name()),
            ));
        }
        out.extend(elements(&v).into_iter().map(Value::into_static));
    }
    Ok(make_array(out))
}

#[inline(never)]
fn op_reverse_array<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let v = eval_arg(args, 0, cx)?;
    if v.nullish() {
        return Ok(Value::null());
    }
    if !v.is_array() {
        return Err(loc(
            34435,
            format!(
                "The argument to $reverseArray must be an array, but was of type: {}",
                v.type_name()
            ),
        ));
    }
    let mut items = elements(&v);
    if items.len() < 2 {
        return Ok(v);
    }
    items.reverse();
    Ok(make_array(items))
}

#[inline(never)]
fn op_all_any<'a>(op: Op, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let v = eval_arg(args, 0, cx)?;
    if !v.is_array() {
        return Err(loc(
            if op == Op::AllElementsTrue {
                17040
            } else {
                17041
            },
            format!(
                "{}'s argument must be an array, but is {}",
                op.name(),
                v.type_name()
            ),
        ));
    }
    let items = elements(&v);
    Ok(Value::bool(if op == Op::AllElementsTrue {
        items.iter().all(Value::truthy)
    } else {
        items.iter().any(Value::truthy)
    }))
}

#[inline(never)]
fn op_concat<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let mut out = String::new();
    for a in args {
        let v = eval(a, cx)?;
        if v.nullish() {
            return Ok(Value::null());
        }
        match v.get() {
            Some(RawBsonRef::String(s)) => out.push_str(s),
            _ => {
                return Err(loc(
                    16702,
                    format!("$concat only supports strings, not {}", v.type_name()),
                ));
            }
        }
    }
    Ok(Value::string(out))
}

#[inline(never)]
fn op_case<'a>(op: Op, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let s = coerce_to_string(&eval_arg(args, 0, cx)?)?;
    Ok(Value::string(if op == Op::ToLower {
        s.to_ascii_lowercase()
    } else {
        s.to_ascii_uppercase()
    }))
}

#[inline(never)]
fn op_str_len<'a>(op: Op, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let v = eval_arg(args, 0, cx)?;
    let Some(RawBsonRef::String(s)) = v.get() else {
        let (code, name) = if op == Op::StrLenCP {
            (34471, "$strLenCP")
        } else {
            (34473, "$strLenBytes")
        };
        return Err(loc(
            code,
            format!(
                "{name} requires a string argument, found: {}",
                v.type_name()
            ),
        ));
    };
    let n = if op == Op::StrLenCP {
        s.chars().count()
    } else {
        s.len()
    };
    let n = i32::try_from(n).map_err(|_| {
        loc(
            if op == Op::StrLenCP { 34472 } else { 34470 },
            "string length could not be represented as an int.",
        )
    })?;
    Ok(Value::int(n))
}

#[inline(never)]
fn op_strcasecmp<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let a = coerce_to_string(&eval_arg(args, 0, cx)?)?.to_ascii_uppercase();
    let b = coerce_to_string(&eval_arg(args, 1, cx)?)?.to_ascii_uppercase();
    Ok(Value::int(match a.as_bytes().cmp(b.as_bytes()) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }))
}

#[inline(never)]
fn op_split<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let input = eval_arg(args, 0, cx)?;
    let sep = eval_arg(args, 1, cx)?;
    if input.nullish() || sep.nullish() {
        return Ok(Value::null());
    }
    let Some(RawBsonRef::String(s)) = input.get() else {
        return Err(loc(
            40085,
            format!(
                "$split requires an expression that evaluates to a string as a first \
                 argument, found: {}",
                input.type_name()
            ),
        ));
    };
    let Some(RawBsonRef::String(p)) = sep.get() else {
        return Err(loc(
            40086,
            format!(
                "$split requires an expression that evaluates to a string as a second \
                 argument, found: {}",
                sep.type_name()
            ),
        ));
    };
    if p.is_empty() {
        return Err(loc(40087, "$split requires a non-empty separator"));
    }
    Ok(make_array(s.split(p).map(Value::string)))
}

#[inline(never)]
fn op_convert<'a>(
    on_error: bool,
    on_null: bool,
    args: &'a [Node],
    cx: &mut Cx<'a>,
) -> Result<Value<'a>> {
    let to = eval_arg(args, 1, cx)?;
    let input = eval_arg(args, 0, cx)?;
    let target = if to.nullish() {
        None
    } else {
        Some(convert::target_type(&to)?)
    };
    let on_error_idx = 2;
    let on_null_idx = if on_error { 3 } else { 2 };
    if input.nullish() {
        return if on_null {
            eval_arg(args, on_null_idx, cx)
        } else {
            Ok(Value::null())
        };
    }
    let Some(target) = target else {
        return Ok(Value::null());
    };
    let Some(raw) = input.get() else {
        return Ok(Value::null());
    };
    match convert::convert(raw, target) {
        Ok(v) => Ok(v),
        Err(QueryError::Location(convert::CONVERSION_FAILURE, _)) if on_error => {
            eval_arg(args, on_error_idx, cx)
        }
        Err(e) => Err(e),
    }
}
