//! `updateRole`: replaces a user-defined role's privileges, roles and/or authentication
//! restrictions (each given field replaces the stored one).
//!
//! At least one of `privileges`, `roles`, `authenticationRestrictions` is required
//! (BadValue otherwise); a built-in role cannot change (InvalidRoleModification); a missing
//! role is RoleNotFound; new roles and privileges pass the checks `createRole` applies.

use bson::RawDocumentBuf;

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::roles;
use crate::error::CommandError;

/// `updateRole`.
pub static COMMAND: Command = Command {
    name: "updateRole",
    aliases: &[],
    help: "Used to update a role",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&["privileges", "roles", "authenticationRestrictions"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::update_role),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        const CMD: &str = "updateRole";
        let (body, db) = (inv.req.body, inv.req.db);
        let name = roles::command_role(body, CMD, db)?;
        let privileges = roles::privileges_arg(body, CMD, false)?;
        let inherits = roles::roles_arg(body, CMD, db, false)?;
        let restrictions = roles::restrictions_arg(body, CMD)?;
        if privileges.is_none() && inherits.is_none() && restrictions.is_none() {
            return Err(CommandError::bad_value(
                "Must specify at least one field to update in updateRole",
            ));
        }
        let server = inv.server.clone();
        roles::refuse_builtin(&name)?;
        crate::blocking::run(move || {
            roles::modify_role(&server, &name, |catalog, role| {
                if let Some(rs) = &inherits {
                    catalog.check_grant_roles(&name, rs)?;
                    role.roles.clear();
                    role.add_roles(rs);
                }
                if let Some(ps) = &privileges {
                    roles::check_grant_privileges(&name, ps)?;
                    role.privileges = Default::default();
                    role.privileges.add_all(ps);
                }
                if let Some(r) = &restrictions {
                    role.restrictions = r.clone();
                }
                Ok(())
            })
        })
        .await?;
        Ok(RawDocumentBuf::new().into())
    })
}
