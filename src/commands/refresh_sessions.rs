//! `refreshSessions`: keep logical sessions alive (their last use becomes now).
//!
//! `{refreshSessions: [{id: UUID}, …]}`; unknown sessions are created, as MongoDB adds them
//! to its session cache.

use std::time::{Instant, SystemTime};

use bson::RawDocumentBuf;

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready};

/// `refreshSessions`.
pub static COMMAND: Command = Command {
    name: "refreshSessions",
    aliases: &[],
    help: "renew a set of logical sessions",
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
        inv.req.body.get("refreshSessions").ok().flatten(),
        "refreshSessions.refreshSessionsFromClient",
    )
    .map(|ids| {
        for id in ids {
            let s = inv.server.sessions.get_or_create(id);
            let mut st = s.state.lock().unwrap_or_else(|p| p.into_inner());
            st.last_use = SystemTime::now();
            st.last_use_instant = Instant::now();
        }
        RawDocumentBuf::new().into()
    });
    ready(r)
}
