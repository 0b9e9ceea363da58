//! `dropAllRolesFromDatabase`: deletes every user-defined role of the database, removing
//! them from the users and roles that held them; replies `{n: <roles deleted>}`.

use std::collections::HashSet;

use bson::rawdoc;

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::roles;

/// `dropAllRolesFromDatabase`.
pub static COMMAND: Command = Command {
    name: "dropAllRolesFromDatabase",
    aliases: &[],
    help: "Drops all roles from the given database.  Before deleting the roles completely it must remove them from any users or other roles that reference them.  If any errors occur in the middle of that process it's possible to be left in a state where the roles have been removed from some user/roles but otherwise still exist.",
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
        let db = inv.req.db.to_string();
        let server = inv.server.clone();
        let n = crate::blocking::run(move || {
            roles::modify_roles(&server, |t| {
                let gone: HashSet<_> = t.catalog.on_db(&db).map(|r| r.name.clone()).collect();
                t.drop_roles(&gone)
            })
        })
        .await?;
        Ok(rawdoc! {"n": i32::try_from(n).unwrap_or(i32::MAX)}.into())
    })
}
