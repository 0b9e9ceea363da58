//! `dropRole`: deletes a user-defined role and removes it from every user and role that
//! held it.
//!
//! A built-in role is InvalidRoleModification; a missing role is RoleNotFound.

use std::collections::HashSet;

use bson::RawDocumentBuf;

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::roles;

/// `dropRole`.
pub static COMMAND: Command = Command {
    name: "dropRole",
    aliases: &[],
    help: "Drops a single role.  Before deleting the role completely it must remove it from any users or roles that reference it.  If any errors occur in the middle of that process it's possible to be left in a state where the role has been removed from some user/roles but otherwise still exists.",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Db(&[super::ActionType::DropRole]),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let name = roles::command_role(inv.req.body, "dropRole", inv.req.db)?;
        let server = inv.server.clone();
        crate::blocking::run(move || {
            roles::modify_roles(&server, |t| {
                roles::refuse_builtin(&name)?;
                if t.catalog.get(&name).is_none() {
                    return Err(roles::role_not_found(&name));
                }
                t.drop_roles(&HashSet::from([name.clone()]))
            })
        })
        .await?;
        Ok(RawDocumentBuf::new().into())
    })
}
