//! `createIndexes`: `{createIndexes: coll, indexes: [{key, name, unique, sparse,
//! partialFilterExpression, expireAfterSeconds, hidden, …}], commitQuorum}`.
//!
//! Each specification is validated (key pattern and options, by the query layer's key
//! generator) and checked against the existing indexes: an identical one is skipped (the
//! reply then says `note: "all indexes already exist"`), a same-name/other-key one is
//! IndexKeySpecsConflict (86), a same-key/other-name or same-name/other-options one is
//! IndexOptionsConflict (85). New indexes are registered as building, then built from the
//! existing documents without stopping other operations; the command returns once they are
//! ready (MongoDB's behaviour). Progress is visible in `currentOp`. A unique build over
//! duplicates fails with 11000 and leaves no index.
//!
//! Reply: `{numIndexesBefore, numIndexesAfter, createdCollectionAutomatically, ok}`.

use bson::raw::cstr;
use bson::{RawBsonRef, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation, collection_arg, type_name};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};

/// `createIndexes`.
pub static COMMAND: Command = Command {
    name: "createIndexes",
    aliases: &[],
    help: "Create indexes on a collection",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(&[
        "indexes",
        "commitQuorum",
        "ignoreUnknownIndexOptions",
        "isTimeseriesNamespace",
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
        let specs = match body.get("indexes") {
            Ok(Some(RawBsonRef::Array(a))) => a,
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "createIndexes.indexes",
                    type_name(&other),
                    "array",
                ));
            }
            _ => return Err(CommandError::missing_field("createIndexes.indexes")),
        };
        let mut list = Vec::new();
        for (i, el) in specs.into_iter().enumerate() {
            let el = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let RawBsonRef::Document(d) = el else {
                return Err(CommandError::wrong_type(
                    &format!("createIndexes.indexes.{i}"),
                    type_name(&el),
                    "object",
                ));
            };
            list.push(d.to_owned());
        }
        if list.is_empty() {
            return Err(CommandError::bad_value(
                "Must specify at least one index to create",
            ));
        }
        let store = inv.server.store.clone();
        let (db2, coll2) = (db.clone(), coll.clone());
        let created = blocking::run(move || Ok(store.create_indexes(&db2, &coll2, &list)?)).await?;
        for name in &created.new {
            crate::index_builds::run(inv.server, &db, &coll, name, body.to_owned()).await?;
        }
        let mut out = RawDocumentBuf::new();
        out.append(cstr!("numIndexesBefore"), created.before as i32);
        out.append(cstr!("numIndexesAfter"), created.after as i32);
        if created.new.is_empty() {
            out.append(cstr!("note"), "all indexes already exist");
        } else {
            out.append(
                cstr!("createdCollectionAutomatically"),
                created.created_collection,
            );
        }
        Ok(out.into())
    })
}
