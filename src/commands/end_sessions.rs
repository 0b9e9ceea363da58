//! `endSessions`: the client is done with these logical sessions.
//!
//! The argument is validated as MongoDB's IDL does (an array of `{id: UUID}` documents).
//! Unknown sessions are fine. As in MongoDB the effect is lazy: the sessions are marked
//! ended, and their open transactions and cursors go at the next session refresh
//! ([`crate::session::reap`]); a `getMore` right after `endSessions` still works.

use bson::RawDocumentBuf;

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready};

/// `endSessions`.
pub static COMMAND: Command = Command {
    name: "endSessions",
    aliases: &[],
    help: "end a set of logical sessions",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::own_sessions),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    let r = crate::session::parse_session_list(
        inv.req.body.get("endSessions").ok().flatten(),
        "endSessions.endSessions",
    )
    .map(|ids| {
        for id in ids {
            if let Some(s) = inv.server.sessions.get(&id) {
                s.state.lock().unwrap_or_else(|p| p.into_inner()).ended = true;
            }
        }
        RawDocumentBuf::new().into()
    });
    ready(r)
}
