//! `revokeRolesFromRole`: removes inherited roles from a user-defined role (revoking a role
//! it does not inherit changes nothing).
//!
//! `roles` must be a non-empty array; a built-in role is InvalidRoleModification, a missing
//! one RoleNotFound.

use bson::RawDocumentBuf;

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::roles;

/// `revokeRolesFromRole`.
pub static COMMAND: Command = Command {
    name: "revokeRolesFromRole",
    aliases: &[],
    help: "Revokes roles from another role.",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&["roles"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::revoke_roles_from_role),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        const CMD: &str = "revokeRolesFromRole";
        let name = roles::command_role(inv.req.body, CMD, inv.req.db)?;
        let revoked = roles::roles_arg(inv.req.body, CMD, inv.req.db, true)?.unwrap_or_default();
        roles::require_non_empty(&revoked, CMD, "roles")?;
        roles::refuse_builtin(&name)?;
        let server = inv.server.clone();
        crate::blocking::run(move || {
            roles::modify_role(&server, &name, |_, role| {
                role.roles.retain(|r| !revoked.contains(r));
                Ok(())
            })
        })
        .await?;
        Ok(RawDocumentBuf::new().into())
    })
}
