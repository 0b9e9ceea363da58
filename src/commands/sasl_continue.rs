//! `saslContinue`: the next step of the connection's SASL conversation; see
//! [`crate::auth::sasl`].
//!
//! `{saslContinue: 1, conversationId: 1, payload}` → `{conversationId: 1, done, payload}`.

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::sasl;

/// `saslContinue`.
pub static COMMAND: Command = Command {
    name: "saslContinue",
    aliases: &[],
    help: "Subsequent steps in a SASL authentication conversation.",
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
        let out = sasl::step(inv.server, inv.client, inv.req.db, inv.req.body).await?;
        Ok(out.into())
    })
}
