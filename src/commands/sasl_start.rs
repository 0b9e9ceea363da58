//! `saslStart`: begins a SASL conversation (SCRAM-SHA-1 or SCRAM-SHA-256) on the command's
//! database; see [`crate::auth::sasl`] for the conversation and its error mapping.
//!
//! `{saslStart: 1, mechanism, payload: BinData|base64 string, autoAuthorize?, options?:
//! {skipEmptyExchange: bool}}` → `{conversationId: 1, done: false, payload}`.

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::sasl;

/// `saslStart`.
pub static COMMAND: Command = Command {
    name: "saslStart",
    aliases: &[],
    help: "First step in a SASL authentication conversation.",
    requires_auth: false,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let args = sasl::parse_start("saslStart", inv.req.body)?;
        let out = sasl::start(inv.server, inv.client, inv.req.db, args).await?;
        Ok(out.into())
    })
}
