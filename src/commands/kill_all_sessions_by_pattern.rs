//! `killAllSessionsByPattern`: kill the sessions matching any of the patterns.
//!
//! `{killAllSessionsByPattern: [{lsid?: {id, uid?}, uid?: BinData, users?: [{user, db}],
//! roles?: [{role, db}]}, …]}`; `[]` or `[{}]` match every session. Without authentication
//! every session has the empty user's digest and no user or role, so a pattern naming users
//! or roles matches nothing.

use bson::{RawBsonRef, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready, type_name};
use crate::error::{CommandError, ErrorCode};
use crate::session::{NO_AUTH_UID, parse_lsid};

/// `killAllSessionsByPattern`.
pub static COMMAND: Command = Command {
    name: "killAllSessionsByPattern",
    aliases: &[],
    help: "kill logical sessions by pattern",
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

const CTX: &str = "KillAllSessionsByPatternCmd.killAllSessionsByPattern";

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    let r = (|| {
        let v = inv
            .req
            .body
            .get("killAllSessionsByPattern")
            .ok()
            .flatten()
            .ok_or_else(|| CommandError::missing_field(CTX))?;
        let RawBsonRef::Array(arr) = v else {
            return Err(CommandError::wrong_type(CTX, type_name(&v), "array"));
        };
        let all: Vec<_> = inv.server.sessions.all().iter().map(|s| s.lsid).collect();
        let mut kill = Vec::new();
        let mut patterns = 0;
        for el in arr {
            patterns += 1;
            let el = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let RawBsonRef::Document(d) = el else {
                return Err(CommandError::wrong_type(CTX, type_name(&el), "object"));
            };
            let mut matches_all = true;
            let mut only = None;
            for f in d.iter() {
                let (k, v) =
                    f.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                match k.as_str() {
                    "lsid" => only = Some(parse_lsid(v, &format!("{CTX}.lsid"))?),
                    "uid" => match v {
                        RawBsonRef::Binary(b) if b.bytes.len() == 32 => {
                            matches_all &= b.bytes == NO_AUTH_UID;
                        }
                        RawBsonRef::Binary(b) => {
                            return Err(CommandError::bad_value(format!(
                                "Unsupported SHA256Block hash length: {}",
                                b.bytes.len()
                            )));
                        }
                        other => {
                            return Err(CommandError::wrong_type(
                                &format!("{CTX}.uid"),
                                type_name(&other),
                                "binData",
                            ));
                        }
                    },
                    "users" => {
                        let n = super::kill_all_sessions::parse_users(v, &format!("{CTX}.users"))?;
                        matches_all &= n == 0;
                    }
                    "roles" => match v {
                        RawBsonRef::Array(a) => matches_all &= a.into_iter().next().is_none(),
                        other => {
                            return Err(CommandError::wrong_type(
                                &format!("{CTX}.roles"),
                                type_name(&other),
                                "array",
                            ));
                        }
                    },
                    other => return Err(CommandError::unknown_field(CTX, other)),
                }
            }
            if !matches_all {
                continue;
            }
            match only {
                Some(l) => kill.push(l),
                None => kill.extend(all.iter().copied()),
            }
        }
        if patterns == 0 {
            kill = all;
        }
        crate::session::kill(inv.server, &kill);
        Ok(RawDocumentBuf::new().into())
    })();
    ready(r)
}
