//! `$fill: {partitionBy | partitionByFields, sortBy, output: {field: {method} | {value}}}`:
//! fills null and missing fields (MongoDB's `document_source_fill.cpp`).
//!
//! Desugared as MongoDB does: `method: "locf"` and `method: "linear"` become `$locf` and
//! `$linearFill` window functions of one `$setWindowFields` (with the stage's `sortBy`, and
//! `partitionBy`, or `partitionByFields` as `{f: "$f", …}`), and `value: <expr>` fields an
//! `$addFields` of `{field: {$ifNull: ["$field", <expr>]}}` after it.
//!
//! Errors: not an object FailedToParse; unknown fields 40415; `output` missing 40414, empty
//! 6050203; an output spec that is not an object 6050200, with both `method` and `value`
//! 6050201, an unknown method 6050202; `partitionBy` with `partitionByFields` 6050204; type
//! errors TypeMismatch; then `$setWindowFields`' own (`$linearFill` needs a one-field
//! `sortBy`: 605001).

use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::agg::doc::key;
use crate::agg::{ParseCx, Stage, loc};
use crate::error::{QueryError, Result};

use super::{add_fields, set_window_fields};

fn wrong_type(field: &str, v: RawBsonRef<'_>, expected: &str) -> QueryError {
    QueryError::TypeMismatch(format!(
        "BSON field '$fill.{field}' is the wrong type '{}', expected {expected}",
        cairn_storage::display::type_name(v)
    ))
}

/// Parses `{$fill: {…}}` into `$setWindowFields` and/or `$addFields`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(QueryError::FailedToParse(format!(
            "The $fill stage specification must be an object, found {}",
            cairn_storage::display::type_name(arg)
        )));
    };
    let (mut sort_by, mut partition_by, mut partition_fields, mut output) =
        (None, None, None, None);
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "sortBy" => match v {
                RawBsonRef::Document(s) => sort_by = Some(s),
                other => return Err(wrong_type("sortBy", other, "type 'object'")),
            },
            "partitionBy" => match v {
                RawBsonRef::String(_) | RawBsonRef::Document(_) => partition_by = Some(v),
                other => {
                    return Err(wrong_type("partitionBy", other, "types '[string, object]'"));
                }
            },
            "partitionByFields" => {
                let RawBsonRef::Array(a) = v else {
                    return Err(wrong_type("partitionByFields", v, "type 'array'"));
                };
                let mut fields = Vec::new();
                for (i, e) in a.into_iter().enumerate() {
                    match e.map_err(|e| QueryError::BadValue(e.to_string()))? {
                        RawBsonRef::String(s) => fields.push(s.to_string()),
                        other => {
                            return Err(wrong_type(
                                &format!("partitionByFields.{i}"),
                                other,
                                "type 'string'",
                            ));
                        }
                    }
                }
                partition_fields = Some(fields);
            }
            "output" => match v {
                RawBsonRef::Document(o) => output = Some(o),
                other => return Err(wrong_type("output", other, "type 'object'")),
            },
            other => {
                return Err(loc(
                    40415,
                    format!("BSON field '$fill.{other}' is an unknown field."),
                ));
            }
        }
    }
    let Some(output) = output else {
        return Err(loc(
            40414,
            "BSON field '$fill.output' is missing but a required field",
        ));
    };
    if output.is_empty() {
        return Err(loc(
            6050203,
            "The output field in '$fill' must contain an object with at least one element",
        ));
    }
    let mut window_output = RawDocumentBuf::new();
    let mut add = RawDocumentBuf::new();
    for el in output.iter() {
        let (field, spec) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        let field = field.as_str();
        let RawBsonRef::Document(spec) = spec else {
            return Err(loc(
                6050200,
                "Each fill output specification must be an object with exactly one field",
            ));
        };
        let (method, value) = parse_output_spec(spec)?;
        if let Some(m) = method {
            if value.is_some() {
                return Err(loc(
                    6050201,
                    "Each fill output specification must have exactly one of 'method' or \
                     'value' fields, not both",
                ));
            }
            let op = match m {
                "locf" => "$locf",
                "linear" => "$linearFill",
                _ => {
                    return Err(loc(6050202, "Method must be either locf or linear"));
                }
            };
            let mut f = RawDocumentBuf::new();
            f.append(key(op)?, format!("${field}"));
            window_output.append(key(field)?, f);
        }
        if let Some(v) = value {
            let mut args = RawArrayBuf::new();
            args.push(format!("${field}"));
            args.push(RawBson::from(v));
            let mut f = RawDocumentBuf::new();
            f.append(bson::raw::cstr!("$ifNull"), args);
            add.append(key(field)?, f);
        }
    }
    let mut stages: Vec<Arc<dyn Stage>> = Vec::new();
    if !window_output.is_empty() {
        let mut spec = RawDocumentBuf::new();
        spec.append(bson::raw::cstr!("output"), window_output);
        if let Some(s) = sort_by {
            spec.append(bson::raw::cstr!("sortBy"), s.to_owned());
        }
        if let Some(p) = partition_by {
            if partition_fields.is_some() {
                return Err(loc(
                    6050204,
                    "Maximum one of 'partitionBy' and 'partitionByFields can be specified in \
                     '$fill'",
                ));
            }
            spec.append(bson::raw::cstr!("partitionBy"), RawBson::from(p));
        }
        if let Some(fields) = &partition_fields {
            let mut p = RawDocumentBuf::new();
            for f in fields {
                p.append(key(f)?, format!("${f}"));
            }
            spec.append(bson::raw::cstr!("partitionBy"), p);
        }
        stages.extend(set_window_fields::parse(RawBsonRef::Document(&spec), cx)?);
    } else if partition_by.is_some() && partition_fields.is_some() {
        return Err(loc(
            6050204,
            "Maximum one of 'partitionBy' and 'partitionByFields can be specified in '$fill'",
        ));
    }
    if !add.is_empty() {
        stages.extend(add_fields::parse(RawBsonRef::Document(&add), cx)?);
    }
    Ok(stages)
}

/// `{method: <string>}` or `{value: <expr>}` (FillOutputSpec).
fn parse_output_spec(spec: &RawDocument) -> Result<(Option<&str>, Option<RawBsonRef<'_>>)> {
    let (mut method, mut value) = (None, None);
    for el in spec.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "method" => match v {
                RawBsonRef::String(s) => method = Some(s),
                other => return Err(wrong_type("method", other, "type 'string'")),
            },
            "value" => value = Some(v),
            other => {
                return Err(loc(
                    40415,
                    format!("BSON field '$fill.{other}' is an unknown field."),
                ));
            }
        }
    }
    Ok((method, value))
}
