//! `createIndexes`: `{createIndexes: coll, indexes: [{key, name, unique, sparse,
//! partialFilterExpression, expireAfterSeconds, hidden, …}], commitQuorum}`.
//!
//! Every specification is validated first (key pattern and options, by the query layer's key
//! generator, with `validateIndexSpec`'s codes: a `key` that is not an object or a `name` that
//! is not a string is TypeMismatch 14, a missing one FailedToParse 9, an unknown field
//! InvalidIndexSpecificationOption 197) and checked against the existing indexes: an
//! identical one is skipped, a same-name/other-key one is IndexKeySpecsConflict (86), a
//! same-key/other-name or same-name/other-options one is IndexOptionsConflict (85). Only when
//! every specification passes is a missing collection created, so a refused request creates
//! nothing. New indexes are registered as building, then built from the existing documents
//! without stopping other operations; the command returns once they are ready (MongoDB's
//! behaviour). Progress is visible in `currentOp`. A unique build over duplicates fails with
//! 11000 and leaves no index.
//!
//! Reply (`CreateIndexesReply` field order): `{numIndexesBefore, numIndexesAfter,
//! [createdCollectionAutomatically], [note], ok}`. `createdCollectionAutomatically` is true
//! whenever the collection was created (even if nothing was left to build, e.g. only `_id_`
//! was asked for), false when indexes were added to an existing one, and absent when an
//! existing collection already had them all. `note` (`appendFinalIndexFieldsToResult`) is
//! `"all indexes already exist"` when nothing was added and `"index already exists"` when
//! only some of the requested indexes were.

use bson::raw::cstr;
use bson::{RawBsonRef, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, type_name};
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
    authz: super::Authz::Ns(&[super::ActionType::CreateIndex]),
    run,
};

/// `createIndexes` inside a multi-document transaction, with MongoDB 7.0's rules: a missing
/// collection is created with its indexes; a collection this transaction created may get
/// indexes while it is empty; any other collection may not get new ones (263).
fn in_transaction(
    t: &mut cairn_storage::WriteTxn<'_>,
    db: &str,
    coll: &str,
    specs: &[RawDocumentBuf],
) -> Result<cairn_storage::index_ops::CreatedIndexes, CommandError> {
    let not_allowed = |what: &str| {
        CommandError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            format!(
                "Cannot create new indexes on {what} collection {db}.{coll} in a multi-document transaction."
            ),
        )
    };
    if coll.starts_with("system.") {
        return Err(CommandError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            format!("Cannot write to system collection {db}.{coll} within a transaction."),
        ));
    }
    if let Some(meta) = t.collection(db, coll)? {
        let new = t.indexes_to_add(&meta, specs)?;
        if !new.is_empty() {
            if !t.created_here(db, coll) {
                return Err(not_allowed("existing"));
            }
            if !t.is_empty(&meta)? {
                return Err(not_allowed("non-empty"));
            }
        }
    }
    Ok(t.create_indexes_here(db, coll, specs)?)
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let coll = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        crate::views::check_not_view(inv.server, &db, &coll)?;
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
        let requested = list.len();
        let store = inv.server.store.clone();
        let (db2, coll2) = (db.clone(), coll.clone());
        let created = if let Some(cell) = inv.op.target.txn().cloned() {
            inv.op.check_txn_ddl("createIndexes")?;
            blocking::run(move || cell.with(|t| in_transaction(t, &db2, &coll2, &list))).await?
        } else {
            let created =
                blocking::run(move || Ok(store.create_indexes(&db2, &coll2, &list)?)).await?;
            for name in &created.new {
                crate::index_builds::run(inv.server, &db, &coll, name, body.to_owned()).await?;
            }
            created
        };
        let mut out = RawDocumentBuf::new();
        out.append(cstr!("numIndexesBefore"), created.before as i32);
        out.append(cstr!("numIndexesAfter"), created.after as i32);
        if created.created_collection || !created.new.is_empty() {
            out.append(
                cstr!("createdCollectionAutomatically"),
                created.created_collection,
            );
        }
        if created.after == created.before {
            out.append(cstr!("note"), "all indexes already exist");
        } else if created.after < created.before + requested {
            out.append(cstr!("note"), "index already exists");
        }
        Ok(out.into())
    })
}
