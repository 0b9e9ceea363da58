//! `grantPrivilegesToRole`: adds privileges to a user-defined role (merged per resource).
//!
//! `privileges` must be a non-empty array; a built-in role is InvalidRoleModification, a
//! missing one RoleNotFound; a non-admin role takes privileges only on its own database.

use bson::RawDocumentBuf;

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::roles;

/// `grantPrivilegesToRole`.
pub static COMMAND: Command = Command {
    name: "grantPrivilegesToRole",
    aliases: &[],
    help: "Grants privileges to a role",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&["privileges"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::grant_privileges_to_role),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        const CMD: &str = "grantPrivilegesToRole";
        let name = roles::command_role(inv.req.body, CMD, inv.req.db)?;
        let privileges = roles::privileges_arg(inv.req.body, CMD, true)?.unwrap_or_default();
        roles::require_non_empty(&privileges, CMD, "privileges")?;
        roles::refuse_builtin(&name)?;
        roles::check_grant_privileges(&name, &privileges)?;
        let server = inv.server.clone();
        crate::blocking::run(move || {
            roles::modify_role(&server, &name, |_, role| {
                role.privileges.add_all(&privileges);
                Ok(())
            })
        })
        .await?;
        Ok(RawDocumentBuf::new().into())
    })
}
