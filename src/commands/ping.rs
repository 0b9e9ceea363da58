//! `ping`: answers `{ok: 1}` when the server is processing commands.
//!
//! Strict like MongoDB's IDL definition: any field besides generic arguments is rejected.

use super::{CmdFuture, Command, Counter, Fields, Invocation, empty_reply, ready};

/// `ping`.
pub static COMMAND: Command = Command {
    name: "ping",
    aliases: &[],
    help: "a way to check that the server is alive. responds immediately even if server is in a db lock.",
    requires_auth: false,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn run(_inv: Invocation<'_>) -> CmdFuture<'_> {
    ready(Ok(empty_reply().into()))
}
