//! `killAllSessions`: kill every session of the given users (`[]`: of all users).
//!
//! `{killAllSessions: [{user, db}, …]}`. Without authentication no session belongs to a named
//! user, so a non-empty list kills nothing; `[]` kills every session (transactions aborted,
//! cursors closed).

use bson::{RawBsonRef, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready, type_name};
use crate::error::{CommandError, ErrorCode};

/// `killAllSessions`.
pub static COMMAND: Command = Command {
    name: "killAllSessions",
    aliases: &[],
    help: "kill all logical sessions, for a user, and their operations",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Cluster(&[super::ActionType::KillAnySession]),
    run,
};

/// Validates a `[{user, db}]` list (strict); returns how many users it names.
pub fn parse_users(v: RawBsonRef<'_>, ctx: &str) -> Result<usize, CommandError> {
    let RawBsonRef::Array(arr) = v else {
        return Err(CommandError::wrong_type(ctx, type_name(&v), "array"));
    };
    let mut n = 0;
    for el in arr {
        let el = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let RawBsonRef::Document(d) = el else {
            return Err(CommandError::wrong_type(ctx, type_name(&el), "object"));
        };
        for f in ["user", "db"] {
            match d.get(f) {
                Ok(Some(RawBsonRef::String(_))) => {}
                Ok(Some(other)) => {
                    return Err(CommandError::wrong_type(
                        &format!("{ctx}.{f}"),
                        type_name(&other),
                        "string",
                    ));
                }
                _ => return Err(CommandError::missing_field(&format!("{ctx}.{f}"))),
            }
        }
        for f in d.iter() {
            let (k, _) = f.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            if k.as_str() != "user" && k.as_str() != "db" {
                return Err(CommandError::unknown_field(ctx, k.as_str()));
            }
        }
        n += 1;
    }
    Ok(n)
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    let r = (|| {
        let v = inv
            .req
            .body
            .get("killAllSessions")
            .ok()
            .flatten()
            .ok_or_else(|| CommandError::missing_field("killAllSessions.killAllSessions"))?;
        if parse_users(v, "KillAllSessionsUser")? == 0 {
            let all: Vec<_> = inv.server.sessions.all().iter().map(|s| s.lsid).collect();
            crate::session::kill(inv.server, &all);
        }
        Ok(RawDocumentBuf::new().into())
    })();
    ready(r)
}
