//! `endSessions`: the client is done with these logical sessions.
//!
//! The argument is validated as MongoDB's IDL does (an array of `{id: UUID}` documents).
//! Ending a session the server holds no state for is not an error in MongoDB, and Cairn
//! keeps no per-session state yet, so after validation there is nothing left to release.

use bson::{RawBsonRef, RawDocumentBuf, spec::BinarySubtype};

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready, type_name};
use crate::error::{CommandError, ErrorCode};

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
    run,
};

/// Validates a `[{id: UUID}, …]` session list as `endSessions`/`refreshSessions` take it.
pub fn validate_session_list(cmd: &str, v: Option<RawBsonRef<'_>>) -> Result<usize, CommandError> {
    let v = v.ok_or_else(|| CommandError::missing_field(&format!("{cmd}.{cmd}")))?;
    let RawBsonRef::Array(arr) = v else {
        return Err(CommandError::wrong_type(
            &format!("{cmd}.{cmd}"),
            type_name(&v),
            "array",
        ));
    };
    let mut n = 0;
    for el in arr {
        let el = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let RawBsonRef::Document(d) = el else {
            return Err(CommandError::wrong_type(
                &format!("{cmd}.{cmd}"),
                type_name(&el),
                "object",
            ));
        };
        for f in d.iter() {
            let (k, _) = f.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            if k.as_str() != "id" && k.as_str() != "uid" {
                return Err(CommandError::unknown_field(
                    &format!("{cmd}.{cmd}"),
                    k.as_str(),
                ));
            }
        }
        match d.get("id") {
            Ok(Some(RawBsonRef::Binary(b)))
                if b.subtype == BinarySubtype::Uuid && b.bytes.len() == 16 => {}
            Ok(Some(RawBsonRef::Binary(_))) => {
                return Err(CommandError::bad_value(format!(
                    "{cmd}.{cmd}.id must be a UUID"
                )));
            }
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    &format!("{cmd}.{cmd}.id"),
                    type_name(&other),
                    "binData",
                ));
            }
            _ => return Err(CommandError::missing_field(&format!("{cmd}.{cmd}.id"))),
        }
        n += 1;
    }
    Ok(n)
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    let r = validate_session_list(
        "endSessions",
        inv.req.body.get("endSessions").ok().flatten(),
    )
    .map(|_| RawDocumentBuf::new().into());
    ready(r)
}
