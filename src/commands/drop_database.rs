//! `dropDatabase`: drop every collection of the database (`{ok: 1}` even if it held none).

use bson::{RawBsonRef, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::blocking;
use crate::error::CommandError;

/// `dropDatabase`.
pub static COMMAND: Command = Command {
    name: "dropDatabase",
    aliases: &[],
    help: "drop (delete) this database",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Db(&[super::ActionType::DropDatabase]),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let one = match inv.req.body.get("dropDatabase") {
            Ok(Some(RawBsonRef::Int32(1))) | Ok(Some(RawBsonRef::Int64(1))) => true,
            Ok(Some(RawBsonRef::Double(d))) => d == 1.0,
            Ok(Some(RawBsonRef::Boolean(true))) => true,
            _ => false,
        };
        if !one {
            return Err(CommandError::bad_value(
                "Must pass 1 as the 'dropDatabase' parameter",
            ));
        }
        let db = inv.req.db.to_string();
        let store = inv.server.store.clone();
        blocking::run(move || Ok(store.drop_database(&db)?)).await?;
        Ok(RawDocumentBuf::new().into())
    })
}
