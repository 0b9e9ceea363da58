//! `revokePrivilegesFromRole`: removes actions from a user-defined role's privileges (a
//! privilege left with no action goes; revoking what the role lacks changes nothing).
//!
//! `privileges` must be a non-empty array; a built-in role is InvalidRoleModification, a
//! missing one RoleNotFound.

use bson::RawDocumentBuf;

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::roles;

/// `revokePrivilegesFromRole`.
pub static COMMAND: Command = Command {
    name: "revokePrivilegesFromRole",
    aliases: &[],
    help: "Revokes privileges from a role",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&["privileges"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::revoke_privileges_from_role),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        const CMD: &str = "revokePrivilegesFromRole";
        let name = roles::command_role(inv.req.body, CMD, inv.req.db)?;
        let privileges = roles::privileges_arg(inv.req.body, CMD, true)?.unwrap_or_default();
        roles::require_non_empty(&privileges, CMD, "privileges")?;
        roles::refuse_builtin(&name)?;
        let server = inv.server.clone();
        crate::blocking::run(move || {
            roles::modify_role(&server, &name, |_, role| {
                for p in &privileges {
                    role.privileges.remove(p);
                }
                Ok(())
            })
        })
        .await?;
        Ok(RawDocumentBuf::new().into())
    })
}
