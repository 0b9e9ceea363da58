//! `collMod`: change a collection's options. Supported: `index: {name | keyPattern, hidden,
//! expireAfterSeconds}` — hide/unhide an index from the planner (it stays maintained) or
//! change a TTL. Reply: `{hidden_old, hidden_new, expireAfterSeconds_old,
//! expireAfterSeconds_new, ok}` for the fields that changed. Collection-level options
//! (validators, change-stream images, …) are NotImplemented (238), like at `create`.

use bson::raw::cstr;
use bson::{RawBson, RawBsonRef, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation, collection_arg, type_name};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};

/// `collMod`.
pub static COMMAND: Command = Command {
    name: "collMod",
    aliases: &[],
    help: "Sets collection options.",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(&[
        "index",
        "validator",
        "validationLevel",
        "validationAction",
        "viewOn",
        "pipeline",
        "expireAfterSeconds",
        "changeStreamPreAndPostImages",
        "timeseries",
        "dryRun",
    ]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let coll = collection_arg(&inv.req)?.to_string();
        let db = inv.req.db.to_string();
        for (i, el) in body.iter().enumerate() {
            let (k, _) =
                el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            if i > 0 && k.as_str() != "index" && !super::GENERIC_ARGUMENTS.contains(&k.as_str()) {
                return Err(CommandError::new(
                    ErrorCode::NotImplemented,
                    format!(
                        "collMod option '{}' is not supported by Cairn yet",
                        k.as_str()
                    ),
                ));
            }
        }
        let meta = inv.server.store.collection(&db, &coll).ok_or_else(|| {
            CommandError::new(
                ErrorCode::NamespaceNotFound,
                format!("ns does not exist: {db}.{coll}"),
            )
        })?;
        let Some(spec) = body.get("index").ok().flatten() else {
            return Ok(RawDocumentBuf::new().into());
        };
        let RawBsonRef::Document(spec) = spec else {
            return Err(CommandError::wrong_type(
                "collMod.index",
                type_name(&spec),
                "object",
            ));
        };
        let name = match (spec.get("name"), spec.get("keyPattern")) {
            (Ok(Some(RawBsonRef::String(n))), Ok(None)) => n.to_string(),
            (Ok(None), Ok(Some(RawBsonRef::Document(p)))) => meta
                .indexes
                .iter()
                .find(|i| i.key_pattern().map(|k| k.as_bytes()) == Some(p.as_bytes()))
                .map(|i| i.name.clone())
                .ok_or_else(|| {
                    CommandError::new(
                        ErrorCode::IndexNotFound,
                        format!(
                            "cannot find index {} for ns {db}.{coll}",
                            cairn_storage::display::document(p)
                        ),
                    )
                })?,
            _ => {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    "must specify either index name or key pattern",
                ));
            }
        };
        let mut set: Vec<(String, RawBson)> = Vec::new();
        if let Ok(Some(v)) = spec.get("hidden") {
            let RawBsonRef::Boolean(h) = v else {
                return Err(CommandError::wrong_type(
                    "collMod.index.hidden",
                    type_name(&v),
                    "bool",
                ));
            };
            if name == "_id_" {
                return Err(CommandError::new(
                    ErrorCode::BadValue,
                    "can't hide _id index",
                ));
            }
            set.push(("hidden".into(), RawBson::Boolean(h)));
        }
        if let Ok(Some(v)) = spec.get("expireAfterSeconds") {
            let n = match v {
                RawBsonRef::Int32(i) => i64::from(i),
                RawBsonRef::Int64(i) => i,
                RawBsonRef::Double(d) if d.fract() == 0.0 => d as i64,
                other => {
                    return Err(CommandError::wrong_type(
                        "collMod.index.expireAfterSeconds",
                        type_name(&other),
                        "long",
                    ));
                }
            };
            if !(0..=i64::from(i32::MAX)).contains(&n) {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    "TTL index 'expireAfterSeconds' option must be within an acceptable range",
                ));
            }
            let is_ttl = meta
                .index(&name)
                .and_then(|i| i.expire_after_seconds())
                .is_some();
            if !is_ttl {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    "no expireAfterSeconds field to update",
                ));
            }
            set.push(("expireAfterSeconds".into(), RawBson::Int64(n)));
        }
        if set.is_empty() {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "no expireAfterSeconds or hidden field",
            ));
        }
        let store = inv.server.store.clone();
        let set2 = set.clone();
        let old = blocking::run(move || Ok(store.modify_index(&db, &coll, &name, &set2)?)).await?;
        let mut out = RawDocumentBuf::new();
        for (field, new) in &set {
            let prev = old
                .iter()
                .find(|(f, _)| f == field)
                .and_then(|(_, v)| v.clone());
            match field.as_str() {
                "hidden" => {
                    let prev = matches!(prev, Some(RawBson::Boolean(true)));
                    let new = matches!(new, RawBson::Boolean(true));
                    if prev != new {
                        out.append(cstr!("hidden_old"), prev);
                        out.append(cstr!("hidden_new"), new);
                    }
                }
                _ => {
                    if let Some(p) = prev {
                        out.append(cstr!("expireAfterSeconds_old"), p);
                    }
                    out.append(cstr!("expireAfterSeconds_new"), new.clone());
                }
            }
        }
        Ok(out.into())
    })
}
