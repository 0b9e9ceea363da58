//! `killSessions`: kill logical sessions now — their open transactions are aborted (the next
//! statement gets NoSuchTransaction) and their cursors closed. The ids may be used again.

use bson::RawDocumentBuf;

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready};

/// `killSessions`.
pub static COMMAND: Command = Command {
    name: "killSessions",
    aliases: &[],
    help: "kill a logical session and its operations",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::kill_sessions),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    let r = crate::session::parse_session_list(
        inv.req.body.get("killSessions").ok().flatten(),
        "killSessions.killSessions",
    )
    .map(|ids| {
        crate::session::kill(inv.server, &ids);
        RawDocumentBuf::new().into()
    });
    ready(r)
}
