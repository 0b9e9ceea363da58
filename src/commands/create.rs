//! `create`: create a collection explicitly.
//!
//! Options are validated as MongoDB validates them (types 14, `size` ≥ 1 51024, capped
//! rules 72, unknown fields 40415); a capped collection's `size` is rounded up as MongoDB
//! rounds it ([`capped_limits`]) and cannot be created inside a transaction (263). Options
//! Cairn cannot enforce yet are refused with NotImplemented (238) instead of being stored
//! and silently ignored: validators, non-simple collations, views, time series, clustered collections,
//! change-stream pre-images, encryption, engine-specific options. What is accepted is kept
//! verbatim in the catalog and reported by `listCollections`. Creating a collection that
//! exists with identical options succeeds (MongoDB 7.0); with other options it is
//! NamespaceExists (48).

use bson::raw::CStr;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation, collection_arg, truthy, type_name};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};

const FIELDS: &[&str] = &[
    "autoIndexId",
    "capped",
    "changeStreamPreAndPostImages",
    "clusteredIndex",
    "collation",
    "encryptedFields",
    "expireAfterSeconds",
    "flags",
    "idIndex",
    "indexOptionDefaults",
    "max",
    "pipeline",
    "size",
    "storageEngine",
    "temp",
    "timeseries",
    "validationAction",
    "validationLevel",
    "validator",
    "viewOn",
];

/// `create`.
pub static COMMAND: Command = Command {
    name: "create",
    aliases: &[],
    help: "explicitly creates a collection or view\n{ create: <string: collection|view name> [, capped: <bool>, size: <int>, max: <int>] }",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(FIELDS),
    counter: Counter::Command,
    kill_on_disconnect: false,
    run,
};

fn not_implemented(what: &str) -> CommandError {
    CommandError::new(
        ErrorCode::NotImplemented,
        format!("{what} is not supported by Cairn yet"),
    )
}

fn invalid(msg: &str) -> CommandError {
    CommandError::new(ErrorCode::InvalidOptions, msg)
}

fn number(field: &str, v: RawBsonRef<'_>) -> Result<i64, CommandError> {
    let n = match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) => d as i64,
        RawBsonRef::Decimal128(d) => d.to_string().parse::<f64>().map(|f| f as i64).unwrap_or(0),
        other => {
            return Err(CommandError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'create.{field}' is the wrong type '{}', expected types '[long, int, decimal, double']",
                    type_name(&other)
                ),
            ));
        }
    };
    Ok(n)
}

/// A capped collection's `size` (bytes, at least 4096 and rounded up to a multiple of 256,
/// at most 1 PB) and `max` (documents, below 2^31; 0 or negative means none), checked as
/// MongoDB checks them (`convertToCapped`/`cloneCollectionAsCapped` use it too).
pub fn capped_limits(
    size: RawBsonRef<'_>,
    max: Option<RawBsonRef<'_>>,
) -> Result<(i64, Option<i64>), CommandError> {
    let size = number("size", size)?;
    if size < 1 {
        return Err(CommandError::new(
            ErrorCode::Location(51024),
            format!("BSON field 'size' value must be >= 1, actual value '{size}'"),
        ));
    }
    if size > 1 << 50 {
        return Err(CommandError::bad_value("size cannot exceed 1 PB"));
    }
    let size = if size <= 4096 {
        4096
    } else {
        (size + 0xff) & !0xff
    };
    let max = match max {
        Some(v) => {
            let m = number("max", v)?;
            if m >= 1 << 31 {
                return Err(CommandError::bad_value(
                    "max in a capped collection has to be < 2^31 or not set",
                ));
            }
            Some(m).filter(|m| *m > 0)
        }
        None => None,
    };
    Ok((size, max))
}

/// Validates the options and returns the document stored in the catalog.
fn options(body: &RawDocument) -> Result<RawDocumentBuf, CommandError> {
    let get = |f: &str| body.get(f).ok().flatten();
    let mut stored = RawDocumentBuf::new();
    let capped = match get("capped") {
        None => false,
        Some(
            v @ (RawBsonRef::Boolean(_)
            | RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_)),
        ) => truthy(&v),
        Some(other) => {
            return Err(CommandError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'create.capped' is the wrong type '{}', expected types '[bool, long, int, decimal, double']",
                    type_name(&other)
                ),
            ));
        }
    };
    for field in ["size", "max"] {
        if let Some(v) = get(field) {
            let n = number(field, v)?;
            if field == "size" && n < 1 {
                return Err(CommandError::new(
                    ErrorCode::Location(51024),
                    format!("BSON field 'size' value must be >= 1, actual value '{n}'"),
                ));
            }
        }
    }
    if get("temp").is_some() {
        return Err(invalid("the 'temp' field is an invalid option"));
    }
    if capped {
        let Some(size) = get("size") else {
            return Err(invalid(
                "the 'size' field is required when 'capped' is true",
            ));
        };
        let (size, max) = capped_limits(size, get("max"))?;
        stored.append(bson::raw::cstr!("capped"), true);
        super::coll_stats::append_number(&mut stored, bson::raw::cstr!("size"), size);
        if let Some(m) = max {
            super::coll_stats::append_number(&mut stored, bson::raw::cstr!("max"), m);
        }
    } else if get("size").is_some() || get("max").is_some() {
        return Err(invalid(
            "the 'capped' field needs to be true when either the 'size' or 'max' fields are present",
        ));
    }
    if get("pipeline").is_some() && get("viewOn").is_none() {
        return Err(invalid("'pipeline' requires 'viewOn' to also be specified"));
    }
    if get("viewOn").is_some() {
        return Err(not_implemented("views"));
    }
    if get("expireAfterSeconds").is_some()
        && get("timeseries").is_none()
        && get("clusteredIndex").is_none()
    {
        return Err(invalid(
            "'expireAfterSeconds' is only supported on time-series collections or when the 'clusteredIndex' option is specified",
        ));
    }
    for (field, what) in [
        ("timeseries", "time-series collections"),
        ("clusteredIndex", "clustered collections"),
        ("encryptedFields", "queryable encryption"),
        ("validator", "document validation"),
    ] {
        if get(field).is_some() {
            return Err(not_implemented(what));
        }
    }
    if let Some(v) = get("collation") {
        let RawBsonRef::Document(c) = v else {
            return Err(CommandError::wrong_type(
                "create.collation",
                type_name(&v),
                "object",
            ));
        };
        match c.get("locale") {
            Ok(Some(RawBsonRef::String("simple"))) => {}
            Ok(Some(RawBsonRef::String(_))) => {
                return Err(not_implemented("collations other than simple"));
            }
            _ => {
                return Err(CommandError::missing_field("collation.locale"));
            }
        }
    }
    if let Some(v) = get("changeStreamPreAndPostImages") {
        match v {
            RawBsonRef::Document(d) => {
                let enabled = match (d.get("enabled"), d.iter().count()) {
                    (Ok(Some(RawBsonRef::Boolean(b))), 1) => b,
                    (Ok(Some(other)), 1) => {
                        return Err(CommandError::wrong_type(
                            "changeStreamPreAndPostImages.enabled",
                            type_name(&other),
                            "bool",
                        ));
                    }
                    (Ok(None), _) => {
                        return Err(CommandError::missing_field(
                            "changeStreamPreAndPostImages.enabled",
                        ));
                    }
                    _ => {
                        let extra = d
                            .iter()
                            .flatten()
                            .map(|(k, _)| k.as_str())
                            .find(|k| *k != "enabled")
                            .unwrap_or_default();
                        return Err(CommandError::unknown_field(
                            "changeStreamPreAndPostImages",
                            extra,
                        ));
                    }
                };
                if enabled {
                    stored.append(
                        bson::raw::cstr!("changeStreamPreAndPostImages"),
                        bson::rawdoc! {"enabled": true},
                    );
                }
            }
            other => {
                return Err(CommandError::wrong_type(
                    "create.changeStreamPreAndPostImages",
                    type_name(&other),
                    "object",
                ));
            }
        }
    }
    for field in ["storageEngine", "indexOptionDefaults"] {
        match get(field) {
            None => {}
            Some(RawBsonRef::Document(d)) if d.is_empty() => {}
            Some(RawBsonRef::Document(_)) => {
                return Err(not_implemented("storage-engine specific options"));
            }
            Some(other) => {
                return Err(CommandError::wrong_type(
                    &format!("create.{field}"),
                    type_name(&other),
                    "object",
                ));
            }
        }
    }
    if let Some(v) = get("idIndex") {
        let ok = matches!(v, RawBsonRef::Document(d)
            if d.get_document("key").ok().and_then(|k| k.get("_id").ok().flatten()).is_some());
        if !ok {
            return Err(not_implemented("an _id index other than {_id: 1}"));
        }
    }
    if let Some(v) = get("autoIndexId")
        && !truthy(&v)
    {
        return Err(not_implemented("collections without an _id index"));
    }
    for field in ["validationLevel", "validationAction"] {
        if let Some(v) = get(field) {
            let RawBsonRef::String(s) = v else {
                return Err(CommandError::wrong_type(
                    &format!("create.{field}"),
                    type_name(&v),
                    "string",
                ));
            };
            let allowed: &[&str] = if field == "validationLevel" {
                &["off", "strict", "moderate"]
            } else {
                &["error", "warn"]
            };
            if !allowed.contains(&s) {
                return Err(CommandError::bad_value(format!(
                    "Enumeration value '{s}' for field '{field}' is not a valid value."
                )));
            }
            let k: &CStr = crate::error::key(field)?;
            stored.append(k, s);
        }
    }
    Ok(stored)
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let name = collection_arg(&inv.req)?.to_string();
        let opts = options(inv.req.body)?;
        let db = inv.req.db.to_string();
        let store = inv.server.store.clone();
        if let Some(cell) = inv.op.target.txn().cloned() {
            // Inside a transaction: created in it, visible to others when it commits.
            inv.op.check_txn_ddl("create")?;
            if opts.get("capped").ok().flatten().is_some() {
                return Err(CommandError::new(
                    ErrorCode::OperationNotSupportedInTransaction,
                    format!(
                        "Cannot create a capped collection {db}.{name} in a multi-document transaction"
                    ),
                ));
            }
            blocking::run(move || {
                cell.with(|t| match t.create_collection(&db, &name, &opts) {
                    Err(cairn_storage::StorageError::NamespaceExists(_)) => Err(CommandError::new(
                        ErrorCode::NamespaceExists,
                        format!("Collection {db}.{name} already exists."),
                    )),
                    r => r.map(|_| ()).map_err(CommandError::from),
                })
            })
            .await?;
            return Ok(RawDocumentBuf::new().into());
        }
        blocking::run(move || Ok(store.create_collection(&db, &name, &opts)?)).await?;
        Ok(RawDocumentBuf::new().into())
    })
}
