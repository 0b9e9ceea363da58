//! `cloneCollectionAsCapped`: copy a collection into a new capped collection.
//!
//! `{cloneCollectionAsCapped: <source>, toCollection: <target>, size: <bytes>}` → `{ok}`.
//! The source must exist (26), the target must not (48); `size` is required and validated as
//! `create` validates a capped size (72 when missing or zero). Documents are copied in the
//! source's natural order; when they exceed the size, the oldest are dropped.

use bson::{RawBsonRef, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, type_name};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};

/// `cloneCollectionAsCapped`.
pub static COMMAND: Command = Command {
    name: "cloneCollectionAsCapped",
    aliases: &[],
    help: "{ cloneCollectionAsCapped:<fromName>, toCollection:<toName>, size:<sizeInBytes> }",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&["toCollection", "size", "temp"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::clone_collection_as_capped),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let from = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        crate::views::check_not_view(inv.server, &db, &from)?;
        let to = match body.get("toCollection") {
            Ok(Some(RawBsonRef::String(s))) => s.to_string(),
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "cloneCollectionAsCapped.toCollection",
                    type_name(&other),
                    "string",
                ));
            }
            _ => {
                return Err(CommandError::missing_field(
                    "cloneCollectionAsCapped.toCollection",
                ));
            }
        };
        let size = match body.get("size").ok().flatten() {
            Some(v) if !matches!(v, RawBsonRef::Int32(0) | RawBsonRef::Int64(0)) => {
                super::args::capped_limits("cloneCollectionAsCapped", v, None)?.0
            }
            _ => {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    "invalid command spec",
                ));
            }
        };
        cairn_storage::namespace::check_collection_for_create(&db, &to)?;
        let store = inv.server.store.clone();
        blocking::run(move || Ok(store.clone_as_capped(&db, &from, &to, size)?)).await?;
        Ok(RawDocumentBuf::new().into())
    })
}
