//! `revokeRolesFromUser`: removes roles from a user; see [`super::grant_roles_to_user`].

use super::{CmdFuture, Command, Counter, Fields, Invocation};

/// `revokeRolesFromUser`.
pub static COMMAND: Command = Command {
    name: "revokeRolesFromUser",
    aliases: &[],
    help: "Revokes roles from a user.",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&["roles"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::revoke_roles_from_user),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(super::grant_roles_to_user::change_roles(
        inv,
        "revokeRolesFromUser",
        false,
    ))
}
