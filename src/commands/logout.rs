//! `logout` (deprecated since MongoDB 5.0): ends the connection's authentication when its
//! user is defined on the command's database; otherwise it does nothing. Always `{ok: 1}`.
//! The first use logs MongoDB's deprecation warning (5626600).

use std::sync::atomic::{AtomicBool, Ordering};

use bson::RawDocumentBuf;

use super::{CmdFuture, Command, Counter, Fields, Invocation};

/// `logout`.
pub static COMMAND: Command = Command {
    name: "logout",
    aliases: &[],
    help: "de-authenticate",
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
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            id = 5626600,
            "The logout command has been deprecated, clients should end their session instead"
        );
    }
    let db = inv.req.db;
    inv.client.auth.users.retain(|u| u.db != db);
    super::ready(Ok(RawDocumentBuf::new().into()))
}
