//! `dropUser`: removes a user of the command's database (11 `User 'name@db' not found` when
//! there is none).

use bson::RawDocumentBuf;

use super::args::command_string;
use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::users;
use crate::error::{CommandError, ErrorCode};

/// `dropUser`.
pub static COMMAND: Command = Command {
    name: "dropUser",
    aliases: &[],
    help: "Drops a single user.",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Db(&[super::ActionType::DropUser]),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let req = inv.req;
        let name = command_string(&req, "dropUser")?.to_string();
        let db = req.db.to_string();
        let store = inv.server.store.clone();
        let (user, udb) = (name.clone(), db.clone());
        let n = crate::blocking::run(move || {
            users::remove(&store, &mut |d| {
                d.get_str("user").ok() == Some(user.as_str())
                    && d.get_str("db").ok() == Some(udb.as_str())
            })
        })
        .await?;
        inv.server.auth.users_removed();
        if n == 0 {
            return Err(CommandError::new(
                ErrorCode::Location(11),
                format!("User '{name}@{db}' not found"),
            ));
        }
        Ok(RawDocumentBuf::new().into())
    })
}
