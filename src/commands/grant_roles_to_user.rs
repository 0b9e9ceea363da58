//! `grantRolesToUser` and the shared body of `revokeRolesFromUser`: adds roles to (or
//! removes roles from) a user's `roles`, keeping the order of the roles it keeps.
//!
//! Errors as MongoDB: an empty `roles` (BadValue), a missing user (11), a missing role (31).
//! Revoking a role the user does not hold changes nothing.

use bson::RawDocumentBuf;

use super::args::command_string;
use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::{RoleName, UserName, users};
use crate::error::{CommandError, ErrorCode};

/// `grantRolesToUser`.
pub static COMMAND: Command = Command {
    name: "grantRolesToUser",
    aliases: &[],
    help: "Grants roles to a user.",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&["roles"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::grant_roles_to_user),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(change_roles(inv, "grantRolesToUser", true))
}

/// Grants (`grant`) or revokes the command's `roles`.
pub async fn change_roles(inv: Invocation<'_>, cmd: &'static str, grant: bool) -> super::CmdResult {
    let req = inv.req;
    let name = command_string(&req, cmd)?;
    let Some(v) = req.body.get("roles").ok().flatten() else {
        return Err(CommandError::missing_field(&format!("{cmd}.roles")));
    };
    let roles = users::parse_roles(&format!("{cmd}.roles"), v, req.db)?;
    if roles.is_empty() {
        return Err(CommandError::bad_value(format!(
            "{cmd} command requires a non-empty \"roles\" array"
        )));
    }
    let user = UserName {
        user: name.to_string(),
        db: req.db.to_string(),
    };
    let store = inv.server.store.clone();
    crate::blocking::run(move || {
        if users::get(&store, &user)?.is_none() {
            return Err(CommandError::new(
                ErrorCode::Location(11),
                format!(
                    "Could not find user \"{}\" for db \"{}\"",
                    user.user, user.db
                ),
            ));
        }
        users::check_roles_exist(&store, &roles)?;
        users::update(&store, &user, &mut |old| {
            let mut current: Vec<RoleName> = users::roles_of(old);
            if grant {
                for r in &roles {
                    if !current.contains(r) {
                        current.push(r.clone());
                    }
                }
            } else {
                current.retain(|r| !roles.contains(r));
            }
            let mut out = RawDocumentBuf::new();
            for (k, v) in old.iter().flatten() {
                if k.as_str() == "roles" {
                    out.append(k, users::roles_array(&current));
                } else {
                    out.append(k, v);
                }
            }
            Ok(out)
        })
    })
    .await?;
    Ok(RawDocumentBuf::new().into())
}
