//! `grantRolesToRole`: adds inherited roles to a user-defined role.
//!
//! `roles` must be a non-empty array; a built-in role is InvalidRoleModification, a missing
//! one RoleNotFound; each granted role must exist, belong to the role's database unless the
//! role is on `admin`, and not close a cycle.

use bson::RawDocumentBuf;

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::roles;

/// `grantRolesToRole`.
pub static COMMAND: Command = Command {
    name: "grantRolesToRole",
    aliases: &[],
    help: "Grants roles to another role.",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&["roles"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::grant_roles_to_role),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        const CMD: &str = "grantRolesToRole";
        let name = roles::command_role(inv.req.body, CMD, inv.req.db)?;
        let granted = roles::roles_arg(inv.req.body, CMD, inv.req.db, true)?.unwrap_or_default();
        roles::require_non_empty(&granted, CMD, "roles")?;
        roles::refuse_builtin(&name)?;
        let server = inv.server.clone();
        crate::blocking::run(move || {
            roles::modify_role(&server, &name, |catalog, role| {
                catalog.check_grant_roles(&name, &granted)?;
                role.add_roles(&granted);
                Ok(())
            })
        })
        .await?;
        Ok(RawDocumentBuf::new().into())
    })
}
