//! Positional operators added on top of the core set: set operators (`$setEquals
//! $setIntersection $setUnion $setDifference $setIsSubset`), objects (`$objectToArray
//! $arrayToObject $mergeObjects`), bitwise operators (`$bitAnd $bitOr $bitXor $bitNot`),
//! sizes (`$bsonSize $binarySize`), timestamps (`$tsSecond $tsIncrement`),
//! `$toHashedIndexKey`, `$rand`, `$meta` and `$function`.
//!
//! Sets compare with MongoDB's value order (simple collation): duplicates are removed, and
//! results are in first-appearance order for `$setUnion`/`$setIntersection`/`$setDifference`
//! (MongoDB makes no order promise; tests compare them as sets).
//!
//! Invariants: nothing here panics.

use std::cmp::Ordering;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf};

use super::eval::{Cx, elements, eval, make_array};
use super::parse::{Node, Op};
use super::value::{Value, compare};
use crate::error::{QueryError, Result};

fn loc(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::Location(code, msg.into())
}

fn show(v: &Value<'_>) -> String {
    v.get()
        .map(cairn_storage::display::value)
        .unwrap_or_else(|| "missing".into())
}

fn eval_all<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Vec<Value<'a>>> {
    args.iter().map(|a| eval(a, cx)).collect()
}

/// Removes duplicates (by MongoDB equality), keeping first appearances.
fn dedup<'a>(items: Vec<Value<'a>>) -> Vec<Value<'a>> {
    let mut out: Vec<Value<'a>> = Vec::with_capacity(items.len());
    for v in items {
        if !out.iter().any(|o| compare(o, &v) == Ordering::Equal) {
            out.push(v);
        }
    }
    out
}

fn contains(set: &[Value<'_>], v: &Value<'_>) -> bool {
    set.iter().any(|o| compare(o, v) == Ordering::Equal)
}

#[inline(never)]
pub(crate) fn set_op<'a>(op: Op, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let vals = eval_all(args, cx)?;
    match op {
        Op::SetEquals => {
            if vals.len() < 2 {
                return Err(loc(
                    17045,
                    format!(
                        "$setEquals needs at least two arguments had: {}",
                        vals.len()
                    ),
                ));
            }
            let mut sets = Vec::new();
            for v in &vals {
                if !v.is_array() {
                    return Err(loc(
                        17044,
                        format!(
                            "All operands of $setEquals must be arrays. One argument is of type: \
                             {}",
                            v.type_name()
                        ),
                    ));
                }
                sets.push(dedup(elements(v)));
            }
            let first = sets.first().cloned().unwrap_or_default();
            Ok(Value::bool(sets.iter().skip(1).all(|s| {
                s.len() == first.len() && s.iter().all(|x| contains(&first, x))
            })))
        }
        Op::SetIsSubset => {
            let (a, b) = (&vals[0], &vals[1]);
            if !a.is_array() {
                return Err(loc(
                    17046,
                    format!(
                        "both operands of $setIsSubset must be arrays. First argument is of type: \
                         {}",
                        a.type_name()
                    ),
                ));
            }
            if !b.is_array() {
                return Err(loc(
                    17042,
                    format!(
                        "both operands of $setIsSubset must be arrays. Second argument is of \
                         type: {}",
                        b.type_name()
                    ),
                ));
            }
            let sb = elements(b);
            Ok(Value::bool(elements(a).iter().all(|x| contains(&sb, x))))
        }
        Op::SetDifference => {
            let (a, b) = (&vals[0], &vals[1]);
            if a.nullish() || b.nullish() {
                return Ok(Value::null());
            }
            if !a.is_array() {
                return Err(loc(
                    17048,
                    format!(
                        "both operands of $setDifference must be arrays. First argument is of \
                         type: {}",
                        a.type_name()
                    ),
                ));
            }
            if !b.is_array() {
                return Err(loc(
                    17049,
                    format!(
                        "both operands of $setDifference must be arrays. Second argument is of \
                         type: {}",
                        b.type_name()
                    ),
                ));
            }
            let sb = elements(b);
            let out: Vec<Value<'_>> = dedup(elements(a))
                .into_iter()
                .filter(|x| !contains(&sb, x))
                .collect();
            Ok(make_array(out))
        }
        Op::SetUnion => {
            let mut all = Vec::new();
            for v in &vals {
                if v.nullish() {
                    return Ok(Value::null());
                }
                if !v.is_array() {
                    return Err(loc(
                        17043,
                        format!(
                            "All operands of $setUnion must be arrays. One argument is of type: {}",
                            v.type_name()
                        ),
                    ));
                }
                all.extend(elements(v));
            }
            Ok(make_array(dedup(all)))
        }
        _ => {
            // $setIntersection
            let mut current: Option<Vec<Value<'_>>> = None;
            for v in &vals {
                if v.nullish() {
                    return Ok(Value::null());
                }
                if !v.is_array() {
                    return Err(loc(
                        17047,
                        format!(
                            "All operands of $setIntersection must be arrays. One argument is of \
                             type: {}",
                            v.type_name()
                        ),
                    ));
                }
                let s = dedup(elements(v));
                current = Some(match current {
                    None => s,
                    Some(c) => c.into_iter().filter(|x| contains(&s, x)).collect(),
                });
            }
            Ok(make_array(current.unwrap_or_default()))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------------

fn cstr(name: &str) -> Result<&bson::raw::CStr> {
    super::eval::key(name)
}

#[inline(never)]
pub(crate) fn object_to_array<'a>(v: Value<'a>) -> Result<Value<'a>> {
    if v.nullish() {
        return Ok(Value::null());
    }
    let Some(RawBsonRef::Document(d)) = v.get() else {
        return Err(loc(
            40390,
            format!(
                "$objectToArray requires a document input, found: {}",
                v.type_name()
            ),
        ));
    };
    let mut out = RawArrayBuf::new();
    for el in d.iter() {
        let Ok((k, val)) = el else { break };
        let mut pair = RawDocumentBuf::new();
        pair.append(cstr("k")?, k.as_str());
        pair.append(cstr("v")?, val);
        out.push(RawBson::Document(pair));
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

/// Sets `key` in an ordered list of fields (an existing field keeps its position).
fn put(fields: &mut Vec<(String, RawBson)>, key: &str, v: RawBson) {
    match fields.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = v,
        None => fields.push((key.to_string(), v)),
    }
}

fn to_document(fields: Vec<(String, RawBson)>) -> Result<Value<'static>> {
    let mut out = RawDocumentBuf::new();
    for (k, v) in fields {
        out.append(cstr(&k)?, v);
    }
    Ok(Value::Owned(RawBson::Document(out)))
}

#[inline(never)]
pub(crate) fn array_to_object(v: Value<'_>) -> Result<Value<'static>> {
    if v.nullish() {
        return Ok(Value::null());
    }
    if !v.is_array() {
        return Err(loc(
            40386,
            format!(
                "$arrayToObject requires an array input, found: {}",
                v.type_name()
            ),
        ));
    }
    let items = elements(&v);
    let mut fields: Vec<(String, RawBson)> = Vec::new();
    let Some(first) = items.first() else {
        return to_document(fields);
    };
    let pairs_form = first.is_array();
    let docs_form = matches!(first.get(), Some(RawBsonRef::Document(_)));
    if !pairs_form && !docs_form {
        return Err(loc(
            40398,
            format!(
                "Unrecognised input type format for $arrayToObject: {}",
                first.type_name()
            ),
        ));
    }
    for item in &items {
        let (key, val) = if pairs_form {
            if !item.is_array() {
                return Err(loc(
                    40391,
                    format!(
                        "$arrayToObject requires a consistent input format. Elements must all be \
                         arrays or all be objects. Array was detected, now found: {}",
                        item.type_name()
                    ),
                ));
            }
            let kv = elements(item);
            if kv.len() != 2 {
                return Err(loc(
                    40396,
                    format!(
                        "$arrayToObject requires an array of size 2 arrays,found array of size: \
                         {}",
                        kv.len()
                    ),
                ));
            }
            let Some(RawBsonRef::String(k)) = kv[0].get() else {
                return Err(loc(
                    40395,
                    format!(
                        "$arrayToObject requires an array of key-value pairs, where the key must \
                         be of type string. Found key type: {}",
                        kv[0].type_name()
                    ),
                ));
            };
            (k.to_string(), kv[1].to_bson())
        } else {
            let Some(RawBsonRef::Document(d)) = item.get() else {
                return Err(loc(
                    40392,
                    format!(
                        "$arrayToObject requires a consistent input format. Elements must all be \
                         arrays or all be objects. Object was detected, now found: {}",
                        item.type_name()
                    ),
                ));
            };
            let entries: Vec<_> = d.iter().map_while(|e| e.ok()).collect();
            if entries.len() != 2 {
                return Err(loc(
                    40392,
                    format!(
                        "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect \
                         number of keys:{}",
                        entries.len()
                    ),
                ));
            }
            let k = entries
                .iter()
                .find(|(n, _)| n.as_str() == "k")
                .map(|(_, v)| *v);
            let val = entries
                .iter()
                .find(|(n, _)| n.as_str() == "v")
                .map(|(_, v)| *v);
            let (Some(k), Some(val)) = (k, val) else {
                return Err(loc(
                    40393,
                    format!(
                        "$arrayToObject requires an object with keys 'k' and 'v'. Missing either \
                         or both keys from: {}",
                        cairn_storage::display::document(d)
                    ),
                ));
            };
            let RawBsonRef::String(ks) = k else {
                return Err(loc(
                    40394,
                    format!(
                        "$arrayToObject requires an object with keys 'k' and 'v', where the value \
                         of 'k' must be of type string. Found type: {}",
                        super::value::type_name(k)
                    ),
                ));
            };
            (ks.to_string(), Some(RawBson::from(val)))
        };
        if key.contains('\0') {
            return Err(loc(
                4940400,
                "Key field cannot contain an embedded null byte",
            ));
        }
        if let Some(val) = val {
            put(&mut fields, &key, val);
        }
    }
    to_document(fields)
}

#[inline(never)]
pub(crate) fn merge_objects<'a>(args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let mut fields: Vec<(String, RawBson)> = Vec::new();
    for a in args {
        let v = eval(a, cx)?;
        if v.nullish() {
            continue;
        }
        let Some(RawBsonRef::Document(d)) = v.get() else {
            return Err(loc(
                40400,
                format!(
                    "$mergeObjects requires object inputs, but input {} is of type {}",
                    show(&v),
                    v.type_name()
                ),
            ));
        };
        for el in d.iter() {
            let Ok((k, val)) = el else { break };
            put(&mut fields, k.as_str(), RawBson::from(val));
        }
    }
    to_document(fields)
}

// ---------------------------------------------------------------------------------------------
// Bitwise operators
// ---------------------------------------------------------------------------------------------

#[inline(never)]
pub(crate) fn bitwise<'a>(op: Op, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let name = op.name();
    if op == Op::BitNot {
        let v = eval(&args[0], cx)?;
        if v.nullish() {
            return Ok(Value::null());
        }
        return match v.get() {
            Some(RawBsonRef::Int32(i)) => Ok(Value::int(!i)),
            Some(RawBsonRef::Int64(i)) => Ok(Value::Owned(RawBson::Int64(!i))),
            _ if v.num().is_some() => Err(QueryError::TypeMismatch(format!(
                "{name} only supports int and long, not: {}.",
                v.type_name()
            ))),
            _ => Err(loc(
                28765,
                format!("{name} only supports numeric types, not {}", v.type_name()),
            )),
        };
    }
    let mut acc: i64 = match op {
        Op::BitAnd => -1,
        _ => 0,
    };
    let mut long = false;
    for a in args {
        let v = eval(a, cx)?;
        if v.nullish() {
            return Ok(Value::null());
        }
        let x = match v.get() {
            Some(RawBsonRef::Int32(i)) => i64::from(i),
            Some(RawBsonRef::Int64(i)) => {
                long = true;
                i
            }
            _ => {
                return Err(QueryError::TypeMismatch(format!(
                    "{name} only supports int and long operands."
                )));
            }
        };
        acc = match op {
            Op::BitAnd => acc & x,
            Op::BitOr => acc | x,
            _ => acc ^ x,
        };
    }
    Ok(if long {
        Value::Owned(RawBson::Int64(acc))
    } else {
        Value::int(acc as i32)
    })
}

// ---------------------------------------------------------------------------------------------
// Sizes, timestamps, hashing
// ---------------------------------------------------------------------------------------------

#[inline(never)]
pub(crate) fn size_op(op: Op, v: &Value<'_>) -> Result<Value<'static>> {
    if v.nullish() {
        return Ok(Value::null());
    }
    let n = match (op, v.get()) {
        (Op::BsonSize, Some(RawBsonRef::Document(d))) => d.as_bytes().len(),
        (Op::BsonSize, _) => {
            return Err(loc(
                31393,
                format!(
                    "$bsonSize requires a document input, found: {}",
                    v.type_name()
                ),
            ));
        }
        (_, Some(RawBsonRef::String(s))) => s.len(),
        (_, Some(RawBsonRef::Binary(b))) => b.bytes.len(),
        _ => {
            return Err(loc(
                51276,
                format!(
                    "$binarySize requires a string or BinData argument, found: {}",
                    v.type_name()
                ),
            ));
        }
    };
    Ok(Value::int(i32::try_from(n).unwrap_or(i32::MAX)))
}

#[inline(never)]
pub(crate) fn ts_op(op: Op, v: &Value<'_>) -> Result<Value<'static>> {
    if v.nullish() {
        return Ok(Value::null());
    }
    let Some(RawBsonRef::Timestamp(ts)) = v.get() else {
        return Err(loc(
            if op == Op::TsSecond { 5687301 } else { 5687302 },
            format!(
                " Argument to {} must be a timestamp, but is {}",
                op.name(),
                v.type_name()
            ),
        ));
    };
    Ok(Value::Owned(RawBson::Int64(i64::from(
        if op == Op::TsSecond {
            ts.time
        } else {
            ts.increment
        },
    ))))
}

/// `$toHashedIndexKey`: the hashed index key of the value (missing hashes as null).
pub(crate) fn hashed_key(v: &Value<'_>) -> Value<'static> {
    let h = crate::index::hash::hash64(v.get().unwrap_or(RawBsonRef::Null));
    Value::Owned(RawBson::Int64(h))
}

/// `$rand`: a double in [0, 1).
pub(crate) fn rand() -> Value<'static> {
    Value::Owned(RawBson::Double(random_unit()))
}

/// A uniformly distributed double in [0, 1) from a per-thread xorshift generator seeded by the
/// OS-randomized hasher state and the clock.
pub(crate) fn random_unit() -> f64 {
    use std::cell::Cell;
    use std::hash::{BuildHasher, Hasher};
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0),
            );
            h.finish() | 1
        });
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// Whether `$meta`'s argument names metadata MongoDB 7.0 knows.
pub(crate) fn meta_name_valid(name: &str) -> bool {
    matches!(
        name,
        "textScore"
            | "randVal"
            | "searchScore"
            | "searchHighlights"
            | "geoNearDistance"
            | "geoNearPoint"
            | "recordId"
            | "indexKey"
            | "sortKey"
            | "searchScoreDetails"
            | "searchSortValues"
            | "timeseriesBucketMinTime"
            | "timeseriesBucketMaxTime"
            | "vectorSearchScore"
    )
}

/// The error every `$function` evaluation gives: Cairn has no JavaScript engine, like a
/// `mongod` started with `--noscripting`.
pub(crate) fn no_javascript() -> QueryError {
    loc(
        31264,
        "Cannot run server-side javascript without the javascript engine enabled",
    )
}
