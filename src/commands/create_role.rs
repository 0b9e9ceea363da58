//! `createRole`: stores a user-defined role in `admin.system.roles`.
//!
//! `{createRole: <name>, privileges: [...], roles: [...], authenticationRestrictions?}` on
//! the role's database; both arrays are required (they may be empty). Refused, as MongoDB
//! refuses them: an empty name, the `local` and `$external` databases, a built-in role's
//! name (BadValue); inheriting itself, a role of another database from a non-admin role, or
//! a role that would close a cycle (InvalidRoleModification); a role that does not exist
//! (RoleNotFound); privileges outside its own database from a non-admin role
//! (InvalidRoleModification); an existing role (51002 `Role "<name>@<db>" already exists`).

use bson::RawDocumentBuf;

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::roles::{self, RoleDoc};
use crate::error::{CommandError, ErrorCode};

/// `createRole`.
pub static COMMAND: Command = Command {
    name: "createRole",
    aliases: &[],
    help: "Adds a role to the system",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&["privileges", "roles", "authenticationRestrictions"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::create_role),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        const CMD: &str = "createRole";
        let (body, db) = (inv.req.body, inv.req.db);
        let name = roles::command_role(body, CMD, db)?;
        let privileges = roles::privileges_arg(body, CMD, true)?.unwrap_or_default();
        let inherits = roles::roles_arg(body, CMD, db, true)?.unwrap_or_default();
        let restrictions = roles::restrictions_arg(body, CMD)?;
        if name.role.is_empty() {
            return Err(CommandError::bad_value("Role name must be non-empty"));
        }
        if db == "local" {
            return Err(CommandError::bad_value(
                "Cannot create roles in the local database",
            ));
        }
        if db == "$external" {
            return Err(CommandError::bad_value(
                "Cannot create roles in the $external database",
            ));
        }
        if crate::auth::builtin_roles::is_builtin_name(&name.role) {
            return Err(CommandError::bad_value(
                "Cannot create roles with the same name as a built-in role",
            ));
        }
        let server = inv.server.clone();
        crate::blocking::run(move || {
            roles::modify_roles(&server, |t| {
                t.catalog.check_grant_roles(&name, &inherits)?;
                roles::check_grant_privileges(&name, &privileges)?;
                if t.catalog.get(&name).is_some() {
                    return Err(CommandError::new(
                        ErrorCode::Location(51002),
                        format!("Role \"{}\" already exists", roles::at(&name)),
                    ));
                }
                let mut role = RoleDoc::new(name.clone());
                role.privileges.add_all(&privileges);
                role.add_roles(&inherits);
                if let Some(r) = &restrictions {
                    role.restrictions = r.clone();
                }
                t.put(&role)
            })
        })
        .await?;
        Ok(RawDocumentBuf::new().into())
    })
}
