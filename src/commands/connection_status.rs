//! `connectionStatus`: who is authenticated on this connection.
//!
//! `authInfo.authenticatedUsers` lists the connection's users (`{user, db}`),
//! `authenticatedUserRoles` the roles granted to them directly (`{role, db}`), and with
//! `showPrivileges: true` `authenticatedUserPrivileges` is every privilege those roles grant
//! (inherited ones included), merged per resource. An unauthenticated connection has empty
//! lists.

use bson::{RawDocumentBuf, raw::cstr, rawdoc};

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
        let users = &inv.client.auth.users;
        let authz = if users.is_empty() {
            Default::default()
        } else {
            crate::auth::roles::user_authz(inv.server, users).await?
        };
        let mut auth = RawDocumentBuf::new();
        auth.append(
            cstr!("authenticatedUsers"),
            crate::auth::authorize::users_bson(users),
        );
        auth.append(
            cstr!("authenticatedUserRoles"),
            crate::auth::roles::roles_bson(&authz.roles),
        );
        if show {
            auth.append(
                cstr!("authenticatedUserPrivileges"),
                authz.privileges.to_bson(),
            );
        }
        Ok(rawdoc! {"authInfo": auth}.into())
    })
}
