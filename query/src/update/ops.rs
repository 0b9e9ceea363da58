//! The leaf operators of an update (MongoDB's `UpdateLeafNode` subclasses): parsing of each
//! operator's argument (`init`) with MongoDB's error codes and messages, and the value logic
//! of each operator (`updateExistingElement` / `setValueForNewElement`).
//!
//! Invariants: a parsed [`Op`] owns all its values; applying it never panics; every operator's
//! "no change" outcome is reported as `false` so `nModified` does not count it.

use std::cmp::Ordering;
use std::sync::Arc;

use bson::{RawArray, RawBson, RawBsonRef, RawDocumentBuf, rawdoc};
use cairn_storage::compare::compare_values;
use cairn_storage::display;

use super::Now;
use super::arith::{self, BitOp, Num};
use super::doc::{
    Value, append_elements, canonical_len, malformed, raw_type_name, type_name, walk_array,
};
use crate::error::{QueryError, Result};
use crate::filter::Filter;
use crate::path::{self as fpath, FieldPath};

/// `$push`'s `$sort` specification.
#[derive(Debug, Clone)]
pub(crate) enum SortSpec {
    /// Sort by the whole element; `true` = descending.
    Whole(bool),
    /// Sort by fields of the elements: (path, descending).
    Fields(Vec<(FieldPath, bool)>),
}

/// How `$pull` recognizes the elements to remove (`PullNode`'s matchers).
#[derive(Debug, Clone)]
pub(crate) enum PullMatcher {
    /// A filter on elements that are documents (`{$pull: {a: {b: 1}}}`).
    Object(Arc<Filter>),
    /// A filter on `{"": element}` (`{$pull: {a: {$gte: 6}}}`, `{$pull: {a: /re/}}`).
    Wrapped(Arc<Filter>),
    /// Equality with a value (`{$pull: {a: 5}}`).
    Equality(RawBson),
}

/// A leaf operator.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Set(RawBson),
    SetOnInsert(RawBson),
    Unset,
    Inc(Num),
    Mul(Num),
    Min(RawBson),
    Max(RawBson),
    CurrentDate {
        date: bool,
    },
    Push {
        values: Vec<RawBson>,
        slice: i64,
        sort: Option<SortSpec>,
        position: i64,
    },
    AddToSet(Vec<RawBson>),
    Pop {
        front: bool,
    },
    Pull(PullMatcher),
    PullAll(Vec<RawBson>),
    Bit(Vec<(BitOp, Num)>),
    /// `$rename` (this leaf sits at the destination path).
    Rename {
        from: Vec<String>,
        to: Vec<String>,
    },
    /// Marks `$rename`'s source path so other operators on it conflict.
    ConflictPlaceholder,
}

/// The operator names of the modifier table (MongoDB 7.0, `modifier_table.cpp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Modifier {
    AddToSet,
    Bit,
    CurrentDate,
    Inc,
    Max,
    Min,
    Mul,
    Pop,
    Pull,
    PullAll,
    Push,
    Set,
    SetOnInsert,
    Rename,
    Unset,
}

impl Modifier {
    pub(crate) fn from_name(name: &str) -> Option<Modifier> {
        Some(match name {
            "$addToSet" => Modifier::AddToSet,
            "$bit" => Modifier::Bit,
            "$currentDate" => Modifier::CurrentDate,
            "$inc" => Modifier::Inc,
            "$max" => Modifier::Max,
            "$min" => Modifier::Min,
            "$mul" => Modifier::Mul,
            "$pop" => Modifier::Pop,
            "$pull" => Modifier::Pull,
            "$pullAll" => Modifier::PullAll,
            "$push" => Modifier::Push,
            "$set" => Modifier::Set,
            "$setOnInsert" => Modifier::SetOnInsert,
            "$rename" => Modifier::Rename,
            "$unset" => Modifier::Unset,
            _ => return None,
        })
    }
}

fn bad(msg: impl Into<String>) -> QueryError {
    QueryError::BadValue(msg.into())
}

fn elem(name: &str, v: RawBsonRef<'_>) -> String {
    format!("{name}: {}", display::value(v))
}

/// `parseIntegerElementToLong` (FailedToParse with MongoDB's messages).
pub(crate) fn integer_to_long(name: &str, v: RawBsonRef<'_>) -> std::result::Result<i64, String> {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    match v {
        RawBsonRef::Int32(i) => Ok(i64::from(i)),
        RawBsonRef::Int64(i) => Ok(i),
        RawBsonRef::Double(d) => {
            if d.is_nan() {
                Err(format!(
                    "Expected an integer, but found NaN in: {}",
                    elem(name, v)
                ))
            } else if !(-TWO_POW_63..TWO_POW_63).contains(&d) {
                Err(format!(
                    "Cannot represent as a 64-bit integer: {}",
                    elem(name, v)
                ))
            } else if d.fract() != 0.0 {
                Err(format!("Expected an integer: {}", elem(name, v)))
            } else {
                Ok(d as i64)
            }
        }
        RawBsonRef::Decimal128(d) => {
            let s = d.to_string();
            match s.parse::<i64>() {
                Ok(i) => Ok(i),
                Err(_) => match s.parse::<f64>() {
                    Ok(f) if f.fract() == 0.0 && f.abs() < TWO_POW_63 => Ok(f as i64),
                    Ok(f) if f.is_finite() && f.fract() != 0.0 => {
                        Err(format!("Expected an integer: {}", elem(name, v)))
                    }
                    _ => Err(format!(
                        "Cannot represent as a 64-bit integer: {}",
                        elem(name, v)
                    )),
                },
            }
        }
        _ => Err(format!("Expected a number in: {}", elem(name, v))),
    }
}

/// MongoDB's path-accepting query keywords (`parsePathAcceptingKeyword`): a `$pull` condition
/// starting with one of these is a condition on the element itself.
fn is_path_accepting_keyword(name: &str) -> bool {
    matches!(
        name,
        "$lt"
            | "$lte"
            | "$gt"
            | "$gte"
            | "$eq"
            | "$ne"
            | "$in"
            | "$nin"
            | "$size"
            | "$all"
            | "$exists"
            | "$mod"
            | "$type"
            | "$regex"
            | "$options"
            | "$elemMatch"
            | "$not"
            | "$near"
            | "$geoNear"
            | "$nearSphere"
            | "$within"
            | "$geoWithin"
            | "$geoIntersects"
            | "$maxDistance"
            | "$minDistance"
            | "$bitsAllSet"
            | "$bitsAllClear"
            | "$bitsAnySet"
            | "$bitsAnyClear"
    ) || name.starts_with("$_internal")
        || name.starts_with("$internal")
}

fn array_values(a: &bson::RawArray) -> Result<Vec<RawBson>> {
    let mut out = Vec::new();
    for el in a {
        out.push(RawBson::from(el.map_err(malformed)?));
    }
    Ok(out)
}

fn dedup(values: Vec<RawBson>) -> Vec<RawBson> {
    let mut out: Vec<RawBson> = Vec::new();
    for v in values {
        if !out
            .iter()
            .any(|o| compare_values(o.as_raw_bson_ref(), v.as_raw_bson_ref()) == Ordering::Equal)
        {
            out.push(v);
        }
    }
    out
}

/// Parses one operator's argument (`UpdateLeafNode::init`). `name` is the field (path) the
/// argument was given for; `value` the argument.
pub(crate) fn parse_op(m: Modifier, name: &str, value: RawBsonRef<'_>) -> Result<Op> {
    Ok(match m {
        Modifier::Set => Op::Set(RawBson::from(value)),
        Modifier::SetOnInsert => Op::SetOnInsert(RawBson::from(value)),
        Modifier::Unset => Op::Unset,
        Modifier::Min => Op::Min(RawBson::from(value)),
        Modifier::Max => Op::Max(RawBson::from(value)),
        Modifier::Inc | Modifier::Mul => {
            let Some(n) = Num::from_raw(value) else {
                let verb = if m == Modifier::Inc {
                    "increment"
                } else {
                    "multiply"
                };
                return Err(QueryError::TypeMismatch(format!(
                    "Cannot {verb} with non-numeric argument: {{{}}}",
                    elem(name, value)
                )));
            };
            if m == Modifier::Inc {
                Op::Inc(n)
            } else {
                Op::Mul(n)
            }
        }
        Modifier::CurrentDate => parse_current_date(value)?,
        Modifier::Push => parse_push(value)?,
        Modifier::AddToSet => parse_add_to_set(value)?,
        Modifier::Pop => {
            let n = integer_to_long(name, value).map_err(QueryError::FailedToParse)?;
            if n != 1 && n != -1 {
                return Err(QueryError::FailedToParse(format!(
                    "$pop expects 1 or -1, found: {n}"
                )));
            }
            Op::Pop { front: n == -1 }
        }
        Modifier::Pull => Op::Pull(parse_pull(value)?),
        Modifier::PullAll => match value {
            RawBsonRef::Array(a) => Op::PullAll(array_values(a)?),
            other => {
                return Err(bad(format!(
                    "$pullAll requires an array argument but was given a {}",
                    raw_type_name(other)
                )));
            }
        },
        Modifier::Bit => parse_bit(value)?,
        // $rename is parsed by the tree builder (it needs both paths).
        Modifier::Rename => Op::ConflictPlaceholder,
    })
}

fn parse_current_date(value: RawBsonRef<'_>) -> Result<Op> {
    match value {
        RawBsonRef::Boolean(_) => Ok(Op::CurrentDate { date: true }),
        RawBsonRef::Document(d) => {
            let mut found = None;
            for el in d.iter() {
                let (k, v) = el.map_err(malformed)?;
                if k.as_str() == "$type" {
                    match v {
                        RawBsonRef::String("date") => found = Some(true),
                        RawBsonRef::String("timestamp") => found = Some(false),
                        _ => {}
                    }
                } else {
                    return Err(bad(format!(
                        "Unrecognized $currentDate option: {}",
                        k.as_str()
                    )));
                }
            }
            match found {
                Some(date) => Ok(Op::CurrentDate { date }),
                None => Err(bad(
                    "The '$type' string field is required to be 'date' or 'timestamp': \
                     {$currentDate: {field : {$type: 'date'}}}",
                )),
            }
        }
        other => Err(bad(format!(
            "{} is not valid type for $currentDate. Please use a boolean ('true') or a $type \
             expression ({{$type: 'timestamp/date'}}).",
            raw_type_name(other)
        ))),
    }
}

fn parse_sort_document(d: &bson::RawDocument) -> Result<SortSpec> {
    let mut fields = Vec::new();
    for el in d.iter() {
        let (k, v) = el.map_err(malformed)?;
        let order = match v {
            RawBsonRef::Int32(i) => f64::from(i),
            RawBsonRef::Int64(i) => i as f64,
            RawBsonRef::Double(x) => x,
            RawBsonRef::Decimal128(x) => x.to_string().parse().unwrap_or(0.0),
            _ => 0.0,
        };
        if order != 1.0 && order != -1.0 {
            return Err(bad("The $sort element value must be either 1 or -1"));
        }
        let name = k.as_str();
        if name.is_empty() {
            return Err(bad("The $sort field cannot be empty"));
        }
        if name.split('.').any(str::is_empty) {
            return Err(bad(format!(
                "The $sort field is a dotted field but has an empty part: {name}"
            )));
        }
        fields.push((FieldPath::new(name), order < 0.0));
    }
    if fields.is_empty() {
        return Err(bad(
            "The $sort pattern is empty when it should be a set of fields.",
        ));
    }
    Ok(SortSpec::Fields(fields))
}

fn parse_push(value: RawBsonRef<'_>) -> Result<Op> {
    let each_doc = match value {
        RawBsonRef::Document(d) if d.get("$each").map_err(malformed)?.is_some() => d,
        other => {
            return Ok(Op::Push {
                values: vec![RawBson::from(other)],
                slice: i64::MAX,
                sort: None,
                position: i64::MAX,
            });
        }
    };
    let mut each = None;
    let mut slice = None;
    let mut sort = None;
    let mut position = None;
    for el in each_doc.iter() {
        let (k, v) = el.map_err(malformed)?;
        let slot = match k.as_str() {
            "$each" => &mut each,
            "$slice" => &mut slice,
            "$sort" => &mut sort,
            "$position" => &mut position,
            other => return Err(bad(format!("Unrecognized clause in $push: {other}"))),
        };
        if slot.is_some() {
            return Err(bad(format!("Only one {} is supported.", k.as_str())));
        }
        *slot = Some(v);
    }
    let values = match each {
        Some(RawBsonRef::Array(a)) => array_values(a)?,
        Some(other) => {
            return Err(bad(format!(
                "The argument to $each in $push must be an array but it was of type: {}",
                raw_type_name(other)
            )));
        }
        None => Vec::new(),
    };
    let slice = match slice {
        Some(v) => integer_to_long("$slice", v).map_err(|_| {
            bad(format!(
                "The value for $slice must be an integer value but was given type: {}",
                raw_type_name(v)
            ))
        })?,
        None => i64::MAX,
    };
    let sort = match sort {
        None => None,
        Some(RawBsonRef::Document(d)) => Some(parse_sort_document(d)?),
        Some(v) => match Num::from_raw(v) {
            Some(n) => {
                let order = match n {
                    Num::I32(i) => f64::from(i),
                    Num::I64(i) => i as f64,
                    Num::F64(x) => x,
                    Num::Dec(_) => v_decimal_f64(v),
                };
                if order == 1.0 || order == -1.0 {
                    Some(SortSpec::Whole(order < 0.0))
                } else {
                    return Err(bad("The $sort element value must be either 1 or -1"));
                }
            }
            None => {
                return Err(bad(
                    "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} \
                     to sort embedded fields",
                ));
            }
        },
    };
    let position = match position {
        Some(v) => integer_to_long("$position", v).map_err(|_| {
            bad(format!(
                "The value for $position must be an integer value, not of type: {}",
                raw_type_name(v)
            ))
        })?,
        None => i64::MAX,
    };
    Ok(Op::Push {
        values,
        slice,
        sort,
        position,
    })
}

fn v_decimal_f64(v: RawBsonRef<'_>) -> f64 {
    match v {
        RawBsonRef::Decimal128(d) => d.to_string().parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

fn parse_add_to_set(value: RawBsonRef<'_>) -> Result<Op> {
    if let RawBsonRef::Document(d) = value
        && let Some(first) = d.iter().next()
    {
        let (k, v) = first.map_err(malformed)?;
        if k.as_str() == "$each" {
            let RawBsonRef::Array(a) = v else {
                return Err(QueryError::TypeMismatch(format!(
                    "The argument to $each in $addToSet must be an array but it was of type {}",
                    raw_type_name(v)
                )));
            };
            if d.iter().count() > 1 {
                return Err(bad(format!(
                    "Found unexpected fields after $each in $addToSet: {}",
                    display::document(d)
                )));
            }
            return Ok(Op::AddToSet(dedup(array_values(a)?)));
        }
    }
    Ok(Op::AddToSet(vec![RawBson::from(value)]))
}

fn parse_pull(value: RawBsonRef<'_>) -> Result<PullMatcher> {
    match value {
        RawBsonRef::Document(d) => {
            let first = match d.iter().next() {
                Some(el) => Some(el.map_err(malformed)?.0.as_str().to_string()),
                None => None,
            };
            if first.as_deref().is_some_and(is_path_accepting_keyword) {
                let wrapped = rawdoc! { "": d.to_owned() };
                Ok(PullMatcher::Wrapped(Arc::new(Filter::parse(&wrapped)?)))
            } else {
                Ok(PullMatcher::Object(Arc::new(Filter::parse(d)?)))
            }
        }
        RawBsonRef::RegularExpression(_) => {
            let mut wrapped = RawDocumentBuf::new();
            wrapped.append(bson::raw::cstr!(""), value);
            Ok(PullMatcher::Wrapped(Arc::new(Filter::parse(&wrapped)?)))
        }
        other => Ok(PullMatcher::Equality(RawBson::from(other))),
    }
}

fn parse_bit(value: RawBsonRef<'_>) -> Result<Op> {
    let RawBsonRef::Document(d) = value else {
        return Err(bad(format!(
            "The $bit modifier is not compatible with a {}. You must pass in an embedded \
             document: {{$bit: {{field: {{and/or/xor: #}}}}",
            raw_type_name(value)
        )));
    };
    let mut ops = Vec::new();
    for el in d.iter() {
        let (k, v) = el.map_err(malformed)?;
        let op = match k.as_str() {
            "and" => BitOp::And,
            "or" => BitOp::Or,
            "xor" => BitOp::Xor,
            other => {
                return Err(bad(format!(
                    "The $bit modifier only supports 'and', 'or', and 'xor', not '{other}' \
                     which is an unknown operator: {{{}}}",
                    elem(other, v)
                )));
            }
        };
        let n = match v {
            RawBsonRef::Int32(i) => Num::I32(i),
            RawBsonRef::Int64(i) => Num::I64(i),
            _ => {
                return Err(bad(format!(
                    "The $bit modifier field must be an Integer(32/64 bit); a '{}' is not \
                     supported here: {{{}}}",
                    raw_type_name(v),
                    elem(k.as_str(), v)
                )));
            }
        };
        ops.push((op, n));
    }
    if ops.is_empty() {
        return Err(bad(
            "You must pass in at least one bitwise operation. The format is: \
             {$bit: {field: {and/or/xor: #}}",
        ));
    }
    Ok(Op::Bit(ops))
}

// ---------------------------------------------------------------------------------------------
// Application
// ---------------------------------------------------------------------------------------------

/// What a leaf operator may do on a missing path (`ModifierNode` hooks).
pub(crate) struct Traits {
    /// `allowCreation`.
    pub(crate) creates: bool,
    /// `allowNonViablePath`.
    pub(crate) non_viable_ok: bool,
}

impl Op {
    pub(crate) fn traits(&self) -> Traits {
        let (creates, non_viable_ok) = match self {
            Op::Set(_)
            | Op::SetOnInsert(_)
            | Op::Min(_)
            | Op::Max(_)
            | Op::Inc(_)
            | Op::Mul(_)
            | Op::CurrentDate { .. }
            | Op::Push { .. }
            | Op::AddToSet(_)
            | Op::Bit(_)
            | Op::Rename { .. } => (true, false),
            Op::Unset | Op::ConflictPlaceholder => (false, true),
            Op::Pop { .. } | Op::Pull(_) | Op::PullAll(_) => (false, false),
        };
        Traits {
            creates,
            non_viable_ok,
        }
    }
}

/// Context for messages.
pub(crate) struct Ctx<'c> {
    /// `_id: <value>` of the document (or `None`).
    pub(crate) id: Option<&'c str>,
    /// The dotted path of the element being updated.
    pub(crate) path: &'c [String],
    /// The clock for `$currentDate`.
    pub(crate) now: &'c Now<'c>,
}

impl Ctx<'_> {
    fn field_name(&self) -> &str {
        self.path.last().map(String::as_str).unwrap_or("")
    }
    fn dotted(&self) -> String {
        self.path.join(".")
    }
    fn id_braced(&self) -> String {
        format!("{{{}}}", self.id.unwrap_or("no id"))
    }
}

fn current_date(date: bool, now: &Now<'_>) -> RawBson {
    let (d, t) = now();
    if date {
        RawBson::DateTime(d)
    } else {
        RawBson::Timestamp(t)
    }
}

fn raw_num(v: &Value<'_>) -> Option<Num> {
    v.scalar().and_then(Num::from_raw)
}

fn arith_fail(op: &str, orig: Num, ctx: &Ctx<'_>) -> QueryError {
    bad(format!(
        "Failed to apply {op} operations to current value ({}) for document {}",
        orig.debug_string(),
        ctx.id_braced()
    ))
}

/// The value a creating operator gives a missing field (`setValueForNewElement`).
pub(crate) fn new_value<'a>(op: &Op, ctx: &Ctx<'_>) -> Result<Value<'a>> {
    Ok(match op {
        Op::Set(v) | Op::SetOnInsert(v) | Op::Min(v) | Op::Max(v) => Value::Owned(v.clone()),
        Op::Inc(n) => Value::Owned(n.to_raw()),
        Op::Mul(n) => match arith::mul(*n, Num::I32(0)) {
            Some(z) => Value::Owned(z.to_raw()),
            None => return Err(arith_fail("$mul", *n, ctx)),
        },
        Op::CurrentDate { date } => Value::Owned(current_date(*date, ctx.now)),
        Op::Push { .. } => {
            let mut v = Value::Arr(Vec::new());
            push(op, &mut v, ctx)?;
            v
        }
        Op::AddToSet(values) => {
            Value::Arr(values.iter().map(|x| Value::Owned(x.clone())).collect())
        }
        Op::Bit(ops) => {
            let mut acc = Num::I32(0);
            for (b, operand) in ops {
                acc = arith::bit(*b, acc, *operand).unwrap_or(acc);
            }
            Value::Owned(acc.to_raw())
        }
        _ => Value::Raw(RawBsonRef::Null),
    })
}

/// Updates an existing element in place (`updateExistingElement`); `Ok(false)` for a no-op.
pub(crate) fn update_existing(op: &Op, v: &mut Value<'_>, ctx: &Ctx<'_>) -> Result<bool> {
    match op {
        Op::Set(new) | Op::SetOnInsert(new) => {
            let same = match v.scalar() {
                Some(cur) => binary_equal(cur, new.as_raw_bson_ref()),
                None => v.with_ref(|cur| binary_equal(cur, new.as_raw_bson_ref()))?,
            };
            if same {
                return Ok(false);
            }
            *v = Value::Owned(new.clone());
            Ok(true)
        }
        Op::Min(new) | Op::Max(new) => {
            let ord = v.with_ref(|cur| compare_values(cur, new.as_raw_bson_ref()))?;
            let keep = match op {
                Op::Max(_) => ord != Ordering::Less,
                _ => ord != Ordering::Greater,
            };
            if keep {
                return Ok(false);
            }
            *v = Value::Owned(new.clone());
            Ok(true)
        }
        Op::Inc(n) | Op::Mul(n) => {
            let name = if matches!(op, Op::Inc(_)) {
                "$inc"
            } else {
                "$mul"
            };
            let Some(cur) = raw_num(v) else {
                return Err(QueryError::TypeMismatch(format!(
                    "Cannot apply {name} to a value of non-numeric type. {} has the field '{}' \
                     of non-numeric type {}",
                    ctx.id_braced(),
                    ctx.field_name(),
                    type_name(v)
                )));
            };
            let result = if matches!(op, Op::Inc(_)) {
                arith::add(*n, cur)
            } else {
                arith::mul(*n, cur)
            };
            let Some(result) = result else {
                return Err(arith_fail(name, cur, ctx));
            };
            if result.identical(cur) {
                return Ok(false);
            }
            *v = Value::Owned(result.to_raw());
            Ok(true)
        }
        Op::CurrentDate { date } => {
            *v = Value::Owned(current_date(*date, ctx.now));
            Ok(true)
        }
        Op::Push { .. } => {
            if !v.is_array() {
                return Err(bad(format!(
                    "The field '{}' must be an array but is of type {} in document {}",
                    ctx.dotted(),
                    type_name(v),
                    ctx.id_braced()
                )));
            }
            push(op, v, ctx)
        }
        Op::AddToSet(values) => {
            if !v.is_array() {
                return Err(bad(format!(
                    "Cannot apply $addToSet to non-array field. Field named '{}' has non-array \
                     type {}",
                    ctx.field_name(),
                    type_name(v)
                )));
            }
            // A stored array is searched in place (a no-op `$addToSet` allocates nothing) and
            // appended to on bytes when its keys are canonical; else it is expanded.
            let raw = match v.scalar() {
                Some(RawBsonRef::Array(a)) => Some(a),
                _ => None,
            };
            let mut to_add = Vec::new();
            // The stored array's canonical length when a search walk read it.
            let mut walked_len = None;
            for x in values {
                let x = x.as_raw_bson_ref();
                let present = match raw {
                    Some(arr) if let Some((found, len)) = string_in_array(arr, x) => {
                        walked_len = walked_len.or(len);
                        found
                    }
                    Some(arr) => {
                        let mut found = false;
                        for el in arr {
                            let el = el.map_err(malformed)?;
                            if compare_values(el, x) == Ordering::Equal {
                                found = true;
                                break;
                            }
                        }
                        found
                    }
                    None => {
                        let Value::Arr(items) = &*v else {
                            return Ok(false);
                        };
                        let mut found = false;
                        for it in items {
                            if it.with_ref(|e| compare_values(e, x))? == Ordering::Equal {
                                found = true;
                                break;
                            }
                        }
                        found
                    }
                };
                if !present {
                    to_add.push(x);
                }
            }
            if to_add.is_empty() {
                return Ok(false);
            }
            if let Some(arr) = raw
                && let Some(len) = walked_len.or_else(|| canonical_len(arr))
            {
                *v = append_elements(arr, len, to_add)?;
                return Ok(true);
            }
            v.expand()?;
            let Value::Arr(items) = v else {
                return Ok(false);
            };
            items.extend(to_add.into_iter().map(|x| Value::Owned(RawBson::from(x))));
            Ok(true)
        }
        Op::Pop { front } => {
            if !v.is_array() {
                return Err(QueryError::TypeMismatch(format!(
                    "Path '{}' contains an element of non-array type '{}'",
                    ctx.dotted(),
                    type_name(v)
                )));
            }
            v.expand()?;
            let Value::Arr(items) = v else {
                return Ok(false);
            };
            if items.is_empty() {
                return Ok(false);
            }
            if *front {
                items.remove(0);
            } else {
                items.pop();
            }
            Ok(true)
        }
        Op::Pull(_) | Op::PullAll(_) => {
            if !v.is_array() {
                return Err(bad("Cannot apply $pull to a non-array value"));
            }
            v.expand()?;
            let Value::Arr(items) = v else {
                return Ok(false);
            };
            let before = items.len();
            let mut kept = Vec::with_capacity(before);
            for it in items.drain(..) {
                let remove = it.with_ref(|e| pull_matches(op, e))??;
                if !remove {
                    kept.push(it);
                }
            }
            *items = kept;
            Ok(items.len() != before)
        }
        Op::Bit(ops) => {
            let Some(cur) = raw_num(v).filter(|n| matches!(n, Num::I32(_) | Num::I64(_))) else {
                return Err(bad(format!(
                    "Cannot apply $bit to a value of non-integral type.{} has the field {} of \
                     non-integer type {}",
                    ctx.id.unwrap_or("no id"),
                    ctx.field_name(),
                    type_name(v)
                )));
            };
            let mut acc = cur;
            for (b, operand) in ops {
                acc = arith::bit(*b, acc, *operand).unwrap_or(acc);
            }
            if acc.identical(cur) {
                return Ok(false);
            }
            *v = Value::Owned(acc.to_raw());
            Ok(true)
        }
        Op::Unset | Op::Rename { .. } | Op::ConflictPlaceholder => Ok(false),
    }
}

/// `BSONElement::binaryEqualValues`: same type and same value bytes.
pub(crate) fn binary_equal(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> bool {
    if a.element_type() != b.element_type() {
        return false;
    }
    let (mut da, mut db) = (RawDocumentBuf::new(), RawDocumentBuf::new());
    da.append(bson::raw::cstr!(""), a);
    db.append(bson::raw::cstr!(""), b);
    da.as_bytes() == db.as_bytes()
}

fn pull_matches(op: &Op, e: RawBsonRef<'_>) -> Result<bool> {
    Ok(match op {
        Op::PullAll(values) => values
            .iter()
            .any(|x| compare_values(e, x.as_raw_bson_ref()) == Ordering::Equal),
        Op::Pull(PullMatcher::Equality(x)) => {
            compare_values(e, x.as_raw_bson_ref()) == Ordering::Equal
        }
        Op::Pull(PullMatcher::Object(f)) => match e {
            RawBsonRef::Document(d) => f.matches(d),
            _ => false,
        },
        Op::Pull(PullMatcher::Wrapped(f)) => {
            let mut w = RawDocumentBuf::new();
            w.append(bson::raw::cstr!(""), e);
            f.matches(&w)
        }
        _ => false,
    })
}

/// `PushNode::performPush`: insert at `$position`, then `$sort`, then `$slice`.
fn push<'a>(op: &Op, v: &mut Value<'a>, _ctx: &Ctx<'_>) -> Result<bool> {
    let Op::Push {
        values,
        slice,
        sort,
        position,
    } = op
    else {
        return Ok(false);
    };
    let keep = usize::try_from(slice.unsigned_abs()).unwrap_or(usize::MAX);
    // Appending to a stored array whose keys are canonical, with nothing to sort or slice
    // off: on bytes (see [`append_elements`]).
    if !values.is_empty()
        && sort.is_none()
        && let Some(RawBsonRef::Array(arr)) = v.scalar()
        && let Some(len) = canonical_len(arr)
        && push_position(len, *position) == len
        && len.saturating_add(values.len()) <= keep
    {
        *v = append_elements(arr, len, values.iter().map(RawBson::as_raw_bson_ref))?;
        return Ok(true);
    }
    v.expand()?;
    let Value::Arr(items) = v else {
        return Ok(false);
    };
    let mut modified = false;
    if !values.is_empty() {
        modified = true;
        let at = push_position(items.len(), *position);
        let new: Vec<Value<'a>> = values.iter().map(|x| Value::Owned(x.clone())).collect();
        items.splice(at..at, new);
    }
    if let Some(spec) = sort {
        modified = true;
        sort_items(items, spec)?;
    }
    if items.len() > keep {
        modified = true;
        if *slice >= 0 {
            items.truncate(keep);
        } else {
            let cut = items.len() - keep;
            items.drain(..cut);
        }
    }
    Ok(modified)
}

/// Where `$push` inserts into an array of `len` elements given its `$position`
/// (`i64::MAX` when absent): past the end, from the front, or counted from the back.
fn push_position(len: usize, position: i64) -> usize {
    let n = i64::try_from(len).unwrap_or(i64::MAX);
    let at = if n == 0 || position > n {
        n
    } else if position >= 0 {
        position
    } else if position.unsigned_abs() < n as u64 {
        n + position
    } else {
        0
    };
    usize::try_from(at).unwrap_or(len).min(len)
}

/// Sorts `$push` elements (`PatternElementCmp`); stable, as `std::stable_sort`.
fn sort_items(items: &mut Vec<Value<'_>>, spec: &SortSpec) -> Result<()> {
    let mut keyed: Vec<(Vec<RawBson>, Value<'_>)> = Vec::with_capacity(items.len());
    for it in items.drain(..) {
        let raw = it.to_raw()?;
        let key = match spec {
            SortSpec::Whole(_) => vec![raw.clone()],
            SortSpec::Fields(fields) => {
                let mut k = Vec::with_capacity(fields.len());
                for (path, _) in fields {
                    let found = match &raw {
                        RawBson::Document(d) => fpath::get_exact(d, path).map(RawBson::from),
                        // A non-document is seen as {"": value}.
                        other => {
                            let mut w = RawDocumentBuf::new();
                            w.append(bson::raw::cstr!(""), other.as_raw_bson_ref());
                            fpath::get_exact(&w, path).map(RawBson::from)
                        }
                    };
                    k.push(found.unwrap_or(RawBson::Null));
                }
                k
            }
        };
        keyed.push((key, Value::Owned(raw)));
    }
    keyed.sort_by(|(a, _), (b, _)| {
        for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
            let desc = match spec {
                SortSpec::Whole(d) => *d,
                SortSpec::Fields(f) => f.get(i).is_some_and(|(_, d)| *d),
            };
            let o = compare_values(x.as_raw_bson_ref(), y.as_raw_bson_ref());
            let o = if desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });
    items.extend(keyed.into_iter().map(|(_, v)| v));
    Ok(())
}

/// Whether the string `x` is an element of the stored array `arr`, decided on bytes
/// ([`walk_array`]): a string equals exactly the strings and symbols with the same bytes, and
/// no value of another type. With it, when it is absent, the array's [`canonical_len`] (read
/// on the same walk). `None` when `x` is not a string or the walk is unsure of the array (the
/// caller then compares element by element).
fn string_in_array(arr: &RawArray, x: RawBsonRef<'_>) -> Option<(bool, Option<usize>)> {
    let RawBsonRef::String(s) = x else {
        return None;
    };
    // The value's bytes as stored: length (with the NUL), the text, the NUL.
    let len = i32::try_from(s.len() + 1).ok()?.to_le_bytes();
    let text = s.as_bytes();
    let w = walk_array(arr, |kind, value| {
        matches!(kind, 0x02 | 0x0E)
            && value.len() == text.len() + 5
            && value.get(..4) == Some(&len[..])
            && value.get(4..4 + text.len()) == Some(text)
            && value.get(4 + text.len()) == Some(&0)
    })?;
    Some((w.stopped, (!w.stopped && w.canonical).then_some(w.len)))
}

#[cfg(test)]
mod tests {
    use bson::spec::BinarySubtype;
    use bson::{RawArrayBuf, RawBson, RawDocumentBuf, rawdoc};

    use super::*;
    use crate::update::doc::write_fields;

    /// One value of every BSON element type.
    fn every_type() -> Vec<RawBson> {
        let oid = bson::oid::ObjectId::from_bytes([7; 12]);
        vec![
            RawBson::Double(2.5),
            RawBson::String("s\u{e9}".into()),
            RawBson::Document(rawdoc! {"x": 1, "y": [1, {"z": "w"}]}),
            RawBson::Array({
                let mut a = RawArrayBuf::new();
                a.push(1);
                a.push("two");
                a
            }),
            RawBson::Binary(bson::Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![1, 2, 3],
            }),
            RawBson::Binary(bson::Binary {
                subtype: BinarySubtype::BinaryOld,
                bytes: vec![4, 5],
            }),
            RawBson::Undefined,
            RawBson::ObjectId(oid),
            RawBson::Boolean(true),
            RawBson::DateTime(bson::DateTime::from_millis(-5)),
            RawBson::Null,
            from_element(0x0B, b"a.b\0i\0"),
            from_element(
                0x0C,
                &[&5i32.to_le_bytes()[..], b"db.c\0", &[7; 12]].concat(),
            ),
            RawBson::JavaScriptCode("f()".into()),
            RawBson::Symbol("sym".into()),
            RawBson::JavaScriptCodeWithScope(bson::raw::RawJavaScriptCodeWithScope {
                code: "g()".into(),
                scope: rawdoc! {"v": 1},
            }),
            RawBson::Int32(-3),
            RawBson::Timestamp(bson::Timestamp {
                time: 1,
                increment: 2,
            }),
            RawBson::Int64(1 << 40),
            RawBson::Decimal128(bson::Decimal128::from_bytes([3; 16])),
            RawBson::MinKey,
            RawBson::MaxKey,
        ]
    }

    /// The value of BSON type `ty` whose bytes are `value`.
    fn from_element(ty: u8, value: &[u8]) -> RawBson {
        let mut bytes = ((value.len() + 8) as i32).to_le_bytes().to_vec();
        bytes.extend_from_slice(&[ty, b'v', 0]);
        bytes.extend_from_slice(value);
        bytes.push(0);
        let doc = RawDocumentBuf::from_bytes(bytes).unwrap();
        RawBson::from(doc.get("v").unwrap().unwrap())
    }

    /// `{a: <array>}` whose array has the given elements under the given keys.
    fn stored(elements: &[(String, RawBson)]) -> RawDocumentBuf {
        let mut inner = RawDocumentBuf::new();
        for (k, v) in elements {
            inner.append(bson::raw::CString::try_from(k.as_str()).unwrap(), v.clone());
        }
        // The array's bytes are a document's bytes under type 0x04.
        let mut bytes = inner.into_bytes();
        let mut holder = Vec::new();
        holder.extend_from_slice(&((bytes.len() + 8) as i32).to_le_bytes());
        holder.extend_from_slice(&[0x04, b'a', 0x00]);
        holder.append(&mut bytes);
        holder.push(0);
        RawDocumentBuf::from_bytes(holder).unwrap()
    }

    /// The document after `op` on its field `a`, and whether the byte path was taken; the
    /// general path (the array expanded first) must give the same bytes.
    fn both_paths(doc: &RawDocumentBuf, op: &Op) -> (RawDocumentBuf, bool) {
        let now = || {
            (
                bson::DateTime::from_millis(0),
                bson::Timestamp {
                    time: 0,
                    increment: 0,
                },
            )
        };
        let path = vec!["a".to_string()];
        let ctx = Ctx {
            id: None,
            path: &path,
            now: &now,
        };
        let Some(Ok(RawBsonRef::Array(arr))) = doc.get("a").transpose() else {
            panic!("no array")
        };
        let mut fast = Value::Raw(RawBsonRef::Array(arr));
        let fast_modified = update_existing(op, &mut fast, &ctx).unwrap();
        let took_bytes = matches!(fast, Value::Held(_));
        let mut general = Value::Raw(RawBsonRef::Array(arr));
        general.expand().unwrap();
        let general_modified = update_existing(op, &mut general, &ctx).unwrap();
        assert_eq!(fast_modified, general_modified);
        let fast_doc = write_fields(&[("a".into(), fast)]).unwrap();
        let general_doc = write_fields(&[("a".into(), general)]).unwrap();
        assert_eq!(fast_doc.as_bytes(), general_doc.as_bytes());
        (fast_doc, took_bytes)
    }

    fn canonical(values: &[RawBson]) -> Vec<(String, RawBson)> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v.clone()))
            .collect()
    }

    fn push_op(values: Vec<RawBson>, slice: i64, position: i64) -> Op {
        Op::Push {
            values,
            slice,
            sort: None,
            position,
        }
    }

    /// Appending on bytes writes exactly what expanding and serializing writes, for every
    /// element type stored and appended; arrays the light walk cannot size are expanded.
    #[test]
    fn byte_append_matches_the_general_path() {
        let all = every_type();
        for (i, stored_value) in all.iter().enumerate() {
            for appended in &all {
                let base = vec![RawBson::Int32(0), stored_value.clone()];
                let doc = stored(&canonical(&base));
                let sized =
                    cairn_storage::elements::Elements::new(doc.get_array("a").unwrap().as_bytes())
                        .count()
                        .is_some();
                let (out, bytes) =
                    both_paths(&doc, &push_op(vec![appended.clone()], i64::MAX, i64::MAX));
                assert_eq!(bytes, sized, "push onto {i}");
                let arr = out.get_array("a").unwrap();
                assert_eq!(arr.into_iter().count(), 3);
                assert_eq!(
                    RawBson::from(arr.get(2).unwrap().unwrap()),
                    appended.clone()
                );
                // $addToSet adds it unless equal to a stored element.
                let (_, bytes) = both_paths(&doc, &Op::AddToSet(vec![appended.clone()]));
                let present = base.iter().any(|b| {
                    compare_values(b.as_raw_bson_ref(), appended.as_raw_bson_ref())
                        == Ordering::Equal
                });
                assert_eq!(bytes, sized && !present, "addToSet onto {i}");
            }
        }
        // $each of several, onto an empty array and onto a long one.
        for len in [0usize, 1, 9, 10, 11, 150] {
            let base: Vec<RawBson> = (0..len).map(|i| RawBson::Int64(i as i64)).collect();
            let doc = stored(&canonical(&base));
            let (out, bytes) = both_paths(&doc, &push_op(all.clone(), i64::MAX, i64::MAX));
            assert!(bytes);
            assert_eq!(
                out.get_array("a").unwrap().into_iter().count(),
                len + all.len()
            );
            let (_, bytes) =
                both_paths(&doc, &Op::AddToSet(vec![RawBson::Int32(-1), "new".into()]));
            assert!(bytes);
        }
    }

    /// Keys other than "0", "1", … (the general path renumbers them) and `$push` modifiers
    /// that insert elsewhere or cut the array take the general path.
    #[test]
    fn byte_append_falls_back() {
        let odd_keys = [
            vec![
                ("0".to_string(), RawBson::Int32(1)),
                ("2".into(), RawBson::Int32(2)),
            ],
            vec![("1".to_string(), RawBson::Int32(1))],
            vec![("00".to_string(), RawBson::Int32(1))],
            vec![("x".to_string(), RawBson::Int32(1))],
        ];
        for elements in &odd_keys {
            let doc = stored(elements);
            let (out, bytes) =
                both_paths(&doc, &push_op(vec![RawBson::Int32(9)], i64::MAX, i64::MAX));
            assert!(!bytes);
            let keys: Vec<String> = out
                .get_document("a")
                .unwrap_or_else(|_| {
                    bson::RawDocument::from_bytes(out.get_array("a").unwrap().as_bytes()).unwrap()
                })
                .iter()
                .map(|e| e.unwrap().0.as_str().to_string())
                .collect();
            let want: Vec<String> = (0..keys.len()).map(|i| i.to_string()).collect();
            assert_eq!(keys, want);
            let (_, bytes) = both_paths(&doc, &Op::AddToSet(vec![RawBson::Int32(9)]));
            assert!(!bytes);
            let (_, bytes) = both_paths(&doc, &Op::AddToSet(vec!["s".into()]));
            assert!(!bytes);
        }
        let doc = stored(&canonical(&[RawBson::Int32(1), RawBson::Int32(2)]));
        for (slice, position, bytes) in [
            (i64::MAX, 2, true),
            (i64::MAX, 3, true),
            (3, i64::MAX, true),
            (-3, i64::MAX, true),
            (i64::MAX, 1, false),
            (i64::MAX, -1, false),
            (i64::MAX, 0, false),
            (2, i64::MAX, false),
            (-2, i64::MAX, false),
            (0, i64::MAX, false),
        ] {
            let (_, took) = both_paths(&doc, &push_op(vec![RawBson::Int32(3)], slice, position));
            assert_eq!(took, bytes, "slice {slice} position {position}");
        }
        let sorted = Op::Push {
            values: vec![RawBson::Int32(0)],
            slice: i64::MAX,
            sort: Some(SortSpec::Whole(false)),
            position: i64::MAX,
        };
        let (out, took) = both_paths(&doc, &sorted);
        assert!(!took);
        assert_eq!(out.get_array("a").unwrap().get_i32(0).unwrap(), 0);
    }

    /// The byte search for a string answers as comparing it with every element, and reads
    /// the canonical length when the string is absent.
    #[test]
    fn string_search_matches_comparison() {
        let mut elements = every_type();
        elements.push("v1".into());
        elements.push(from_element(0x0E, b"\x03\0\0\0v2\0"));
        elements.push("v\0x".into());
        let probes: Vec<RawBson> = ["v1", "v2", "v", "v\0x", "s\u{e9}", "sym", "f()", "", "v1 "]
            .iter()
            .map(|p| RawBson::String((*p).to_string()))
            .collect();
        let sized: Vec<RawBson> = elements
            .iter()
            .filter(|e| {
                !matches!(
                    e,
                    RawBson::Binary(_)
                        | RawBson::RegularExpression(_)
                        | RawBson::DbPointer(_)
                        | RawBson::JavaScriptCodeWithScope(_)
                )
            })
            .cloned()
            .collect();
        for keys_canonical in [true, false] {
            let mut keyed = canonical(&sized);
            if !keys_canonical {
                keyed.swap(1, 2);
            }
            let doc = stored(&keyed);
            let arr = doc.get_array("a").unwrap();
            for p in &probes {
                let x = p.as_raw_bson_ref();
                let found = sized
                    .iter()
                    .any(|e| compare_values(e.as_raw_bson_ref(), x) == Ordering::Equal);
                let len = (!found && keys_canonical).then_some(sized.len());
                assert_eq!(string_in_array(arr, x), Some((found, len)), "{p:?}");
            }
            assert_eq!(string_in_array(arr, RawBsonRef::Int32(1)), None);
        }
        // A type the walk does not size: the caller compares.
        let doc = stored(&canonical(&elements));
        assert_eq!(
            string_in_array(doc.get_array("a").unwrap(), RawBsonRef::String("v1")),
            None
        );
    }
}
