//! `whatsmyuri`: the client's own address as the server sees it (`{you: "ip:port"}`).

use bson::rawdoc;

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready};

/// `whatsmyuri`.
pub static COMMAND: Command = Command {
    name: "whatsmyuri",
    aliases: &[],
    help: "{whatsmyuri:1}",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready(Ok(rawdoc! {"you": inv.client.peer.to_string()}.into()))
}
