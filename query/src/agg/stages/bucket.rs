//! `$bucket: {groupBy, boundaries, default, output}`: documents grouped into ranges
//! `[boundaries[i], boundaries[i+1])` by the value of `groupBy`, as MongoDB does it — a
//! `$group` whose `_id` is a `$switch` over the ranges (values in no range go to `default`,
//! or fail with 40066 without one), followed by `$sort: {_id: 1}`. Without `output` each
//! bucket counts its documents (`count`); with it, only the given accumulators are computed.
//!
//! Errors: 40201 not an object, 40197 unknown option, 40198 missing `groupBy`/`boundaries`,
//! 40202 bad `groupBy`, 40192 boundaries not an array, 40191 non-constant boundary, 40192
//! fewer than two, 40193 mixed types, 40194 not ascending, 40195 non-constant default, 40199
//! default inside the range, 40196 `output` not an object.

use std::cmp::Ordering;
use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf, rawdoc};
use cairn_storage::compare::{canonical_type_order, compare_values};
use cairn_storage::display;

use super::group::Group;
use super::sort::Sort;
use crate::agg::accumulators::AccumulatorSpec;
use crate::agg::{ParseCx, Stage, loc};
use crate::error::{QueryError, Result};

/// Whether a `groupBy` is a `$`-path or an operator object.
pub(crate) fn valid_group_by(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::String(s) => s.starts_with('$'),
        RawBsonRef::Document(d) => d
            .iter()
            .next()
            .is_some_and(|e| e.is_ok_and(|(k, _)| k.as_str().starts_with('$'))),
        _ => false,
    }
}

/// The accumulators of an `output` specification (`count: {$sum: 1}` when absent).
pub(crate) fn output_specs(
    stage: &str,
    code: i32,
    output: Option<RawBsonRef<'_>>,
    cx: &ParseCx,
) -> Result<Vec<AccumulatorSpec>> {
    match output {
        None => {
            let one = rawdoc! {"$sum": 1};
            Ok(vec![AccumulatorSpec::parse_statement(
                "count",
                RawBsonRef::Document(&one),
                &cx.ext,
            )?])
        }
        Some(RawBsonRef::Document(d)) => {
            let mut out = Vec::new();
            for el in d.iter() {
                let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
                out.push(AccumulatorSpec::parse_statement(k.as_str(), v, &cx.ext)?);
            }
            Ok(out)
        }
        Some(other) => Err(loc(
            code,
            format!(
                "The {stage} 'output' field must be an object, but found type: {}.",
                display::type_name(other)
            ),
        )),
    }
}

/// Parses `$bucket` into its `$group` and `$sort`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            40201,
            format!(
                "Argument to $bucket stage must be an object, but found type: {}.",
                display::type_name(arg)
            ),
        ));
    };
    let (mut group_by, mut boundaries, mut default, mut output) = (None, None, None, None);
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "groupBy" => group_by = Some(v),
            "boundaries" => boundaries = Some(v),
            "default" => default = Some(v),
            "output" => output = Some(v),
            other => {
                return Err(loc(
                    40197,
                    format!("Unrecognized option to $bucket: {other}."),
                ));
            }
        }
    }
    let (Some(group_by), Some(boundaries)) = (group_by, boundaries) else {
        return Err(loc(
            40198,
            "$bucket requires 'groupBy' and 'boundaries' to be specified.",
        ));
    };
    if !valid_group_by(group_by) {
        return Err(loc(
            40202,
            format!(
                "The $bucket 'groupBy' field must be defined as a $-prefixed path or an \
                 expression, but found: {}.",
                display::value(group_by)
            ),
        ));
    }
    let RawBsonRef::Array(arr) = boundaries else {
        return Err(loc(
            40200,
            format!(
                "The $bucket 'boundaries' field must be an array, but found type: {}.",
                display::type_name(boundaries)
            ),
        ));
    };
    let mut bounds: Vec<RawBson> = Vec::new();
    for el in arr {
        let el = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        let e = cx.ext.parse_expression(el)?;
        let Some(Some(c)) = e.constant() else {
            return Err(loc(
                40191,
                format!(
                    "The $bucket 'boundaries' field must be an array of constant values, but \
                     found value: {}.",
                    display::value(el)
                ),
            ));
        };
        bounds.push(c.clone());
    }
    if bounds.len() < 2 {
        return Err(loc(
            40192,
            format!(
                "The $bucket 'boundaries' field must have at least 2 values, but found {} \
                 value(s).",
                bounds.len()
            ),
        ));
    }
    for w in bounds.windows(2) {
        let (a, b) = (w[0].as_raw_bson_ref(), w[1].as_raw_bson_ref());
        if canonical_type_order(a) != canonical_type_order(b) {
            return Err(loc(
                40193,
                format!(
                    "All values in the the 'boundaries' option to $bucket must have the same \
                     type. Found conflicting types {} and {}.",
                    display::type_name(a),
                    display::type_name(b)
                ),
            ));
        }
        if compare_values(a, b) != Ordering::Less {
            return Err(loc(
                40194,
                format!(
                    "The 'boundaries' option to $bucket must be sorted in ascending order, but \
                     elements {} and {} are not in ascending order ({} is not less than {}).",
                    bounds
                        .iter()
                        .position(|x| std::ptr::eq(x, &w[0]))
                        .unwrap_or(0),
                    bounds
                        .iter()
                        .position(|x| std::ptr::eq(x, &w[1]))
                        .unwrap_or(0),
                    display::value(a),
                    display::value(b)
                ),
            ));
        }
    }
    let default = match default {
        None => None,
        Some(v) => {
            let e = cx.ext.parse_expression(v)?;
            let Some(Some(c)) = e.constant() else {
                return Err(loc(
                    40195,
                    format!(
                        "The $bucket 'default' field must be a constant, but found: {}.",
                        display::value(v)
                    ),
                ));
            };
            let c = c.clone();
            let lo = bounds[0].as_raw_bson_ref();
            let hi = bounds[bounds.len() - 1].as_raw_bson_ref();
            let cv = c.as_raw_bson_ref();
            if canonical_type_order(cv) == canonical_type_order(lo)
                && compare_values(cv, lo) != Ordering::Less
                && compare_values(cv, hi) == Ordering::Less
            {
                return Err(loc(
                    40199,
                    "The $bucket 'default' field must be less than the lowest boundary or \
                     greater than or equal to the highest boundary.",
                ));
            }
            Some(c)
        }
    };
    let accs = output_specs("$bucket", 40196, output, cx)?;
    // _id: {$switch: {branches: [{case: {$and: [{$gte: [g, lo]}, {$lt: [g, hi]}]}, then: lo}…],
    // default}}.
    let mut branches = RawArrayBuf::new();
    for w in bounds.windows(2) {
        let lo = rawdoc! {"$literal": w[0].clone()};
        let hi = rawdoc! {"$literal": w[1].clone()};
        let mut gte = RawArrayBuf::new();
        gte.push(RawBson::from(group_by));
        gte.push(lo.clone());
        let mut lt = RawArrayBuf::new();
        lt.push(RawBson::from(group_by));
        lt.push(hi);
        let case = rawdoc! {"$and": [{"$gte": gte}, {"$lt": lt}]};
        branches.push(rawdoc! {"case": case, "then": lo});
    }
    let mut sw = rawdoc! {"branches": branches};
    if let Some(d) = default {
        sw.append(bson::raw::cstr!("default"), rawdoc! {"$literal": d});
    }
    let id = rawdoc! {"$switch": sw};
    let group = Group::new(RawBsonRef::Document(&id), accs, &cx.ext)?;
    let sort = Sort::from_doc(&rawdoc! {"_id": 1})?;
    let _ = RawDocumentBuf::new();
    Ok(vec![Arc::new(group), Arc::new(sort)])
}
