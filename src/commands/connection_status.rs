//! `connectionStatus`: who is authenticated on this connection.
//!
//! Cairn has no users yet, so every connection is unauthenticated and the lists are empty —
//! exactly what MongoDB reports for an unauthenticated connection. `showPrivileges: true`
//! adds `authenticatedUserPrivileges`.

use bson::{RawArrayBuf, RawDocumentBuf, raw::cstr, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, opt_bool};

/// `connectionStatus`.
pub static COMMAND: Command = Command {
    name: "connectionStatus",
    aliases: &[],
    help: "Returns connection-specific information such as logged-in users and their roles",
    requires_auth: false,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&["showPrivileges"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let show = opt_bool(inv.req.body, "connectionStatus", "showPrivileges")?.unwrap_or(false);
        let mut auth = RawDocumentBuf::new();
        auth.append(cstr!("authenticatedUsers"), RawArrayBuf::new());
        auth.append(cstr!("authenticatedUserRoles"), RawArrayBuf::new());
        if show {
            auth.append(cstr!("authenticatedUserPrivileges"), RawArrayBuf::new());
        }
        Ok(rawdoc! {"authInfo": auth}.into())
    })
}
