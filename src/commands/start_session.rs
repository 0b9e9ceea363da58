//! `startSession`: create a logical session on the server and return its id.
//!
//! Reply: `{id: {id: UUID}, timeoutMinutes: 30, ok}` (MongoDB's `LogicalSessionToClient`).

use bson::{Binary, rawdoc, spec::BinarySubtype};

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready};
use crate::commands::hello::LOGICAL_SESSION_TIMEOUT_MINUTES;

/// `startSession`.
pub static COMMAND: Command = Command {
    name: "startSession",
    aliases: &[],
    help: "start a logical session",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    let id = bson::Uuid::new().bytes();
    inv.server.sessions.get_or_create(id);
    ready(Ok(rawdoc! {
        "id": {"id": Binary { subtype: BinarySubtype::Uuid, bytes: id.to_vec() }},
        "timeoutMinutes": LOGICAL_SESSION_TIMEOUT_MINUTES,
    }
    .into()))
}
