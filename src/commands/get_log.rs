//! `getLog`: the server's recent log lines (admin only).
//!
//! `{getLog: "*"}` lists the log names; `{getLog: "global" | "startupWarnings"}` returns
//! `totalLinesWritten` and the retained lines (MongoDB structured JSON, oldest first) of that
//! in-memory log, which [`crate::logging`] fills as the server runs.

use bson::{RawArrayBuf, RawBsonRef, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready, type_name};
use crate::error::{CommandError, ErrorCode};
use crate::logging::RamLogs;

/// `getLog`.
pub static COMMAND: Command = Command {
    name: "getLog",
    aliases: &[],
    help: "{ getLog : '*' }  OR { getLog : 'global' }",
    requires_auth: true,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Cluster(&[super::ActionType::GetLog]),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| {
        let v = inv
            .req
            .body
            .get("getLog")
            .ok()
            .flatten()
            .unwrap_or(RawBsonRef::Null);
        let name = match v {
            RawBsonRef::String(s) => s,
            RawBsonRef::Null | RawBsonRef::Undefined => {
                return Err(CommandError::missing_field("getLog.getLog"));
            }
            other => {
                return Err(CommandError::wrong_type(
                    "getLog.getLog",
                    type_name(&other),
                    "string",
                ));
            }
        };
        if name == "*" {
            let mut names = RawArrayBuf::new();
            for n in RamLogs::NAMES {
                names.push(n);
            }
            return Ok(rawdoc! {"names": names}.into());
        }
        let log = inv.server.logs.get(name).ok_or_else(|| {
            CommandError::new(ErrorCode::OperationFailed, format!("No log named '{name}'"))
        })?;
        let mut lines = RawArrayBuf::new();
        for l in log.lines() {
            lines.push(l.as_str());
        }
        let total = log.total_lines_written();
        let mut out = bson::RawDocumentBuf::new();
        if total < (1 << 30) {
            out.append(bson::raw::cstr!("totalLinesWritten"), total as i32);
        } else {
            out.append(bson::raw::cstr!("totalLinesWritten"), total);
        }
        out.append(bson::raw::cstr!("log"), lines);
        Ok(out.into())
    })())
}
