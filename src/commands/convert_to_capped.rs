//! `convertToCapped`: turn a collection into a capped one.
//!
//! `{convertToCapped: <collection>, size: <bytes>}` → `{ok}`. As MongoDB does, the documents
//! are copied into a temporary capped collection (`tmp.convertToCapped.<name>`, oldest dropped
//! beyond the size) which then replaces the original by a rename: the collection gets a new
//! UUID and keeps only its `_id` index.

use bson::{RawBsonRef, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};

/// `convertToCapped`.
pub static COMMAND: Command = Command {
    name: "convertToCapped",
    aliases: &[],
    help: "{ convertToCapped:<fromCollectionName>, size:<sizeInBytes> }",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&["size", "temp"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Ns(&[super::ActionType::ConvertToCapped]),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let coll = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        crate::views::check_not_view(inv.server, &db, &coll)?;
        let size = match body.get("size").ok().flatten() {
            Some(v) if !matches!(v, RawBsonRef::Int32(0) | RawBsonRef::Int64(0)) => {
                super::args::capped_limits("convertToCapped", v, None)?.0
            }
            _ => {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    "invalid command spec",
                ));
            }
        };
        let store = inv.server.store.clone();
        let server = inv.server.clone();
        blocking::run(move || {
            if store.collection(&db, &coll).is_none() {
                return Err(CommandError::new(
                    ErrorCode::NamespaceNotFound,
                    format!("source collection {db}.{coll} does not exist"),
                ));
            }
            let tmp = format!("tmp.convertToCapped.{coll}");
            let _ = store.drop_collection(&db, &tmp);
            store.clone_as_capped(&db, &coll, &tmp, size)?;
            store.rename_collection((&db, &tmp), (&db, &coll), true)?;
            server.plan_cache.clear_namespace(&format!("{db}.{coll}"));
            Ok(())
        })
        .await?;
        Ok(RawDocumentBuf::new().into())
    })
}
