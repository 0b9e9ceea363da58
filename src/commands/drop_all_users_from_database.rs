//! `dropAllUsersFromDatabase`: removes every user of the command's database; `{n: <count>}`.

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::users;

/// `dropAllUsersFromDatabase`.
pub static COMMAND: Command = Command {
    name: "dropAllUsersFromDatabase",
    aliases: &[],
    help: "Drops all users for a single database.",
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
        let db = inv.req.db.to_string();
        let store = inv.server.store.clone();
        let n = crate::blocking::run(move || {
            users::remove(&store, &mut |d| d.get_str("db").ok() == Some(db.as_str()))
        })
        .await?;
        inv.server.auth.users_removed();
        let mut out = bson::RawDocumentBuf::new();
        super::args::append_number(&mut out, bson::raw::cstr!("n"), n as i64);
        Ok(out.into())
    })
}
