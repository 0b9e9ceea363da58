//! `logRotate` (admin only): rotate the server's log file.
//!
//! `{logRotate: 1 | "server"}` rotates the `--log-path` file as `--log-rotate` says (rename it
//! aside with a timestamp, or reopen it); SIGUSR1 does the same. Without a log file (logging to
//! stdout only) there is nothing to rotate and the command succeeds, as mongod's does. Cairn
//! has no audit log, so `{logRotate: "audit"}` (like any other log name) is NoSuchKey (4).
//! A rotation that fails (e.g. the directory became read-only) is OperationFailed (96).

use bson::{RawBsonRef, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready, type_name};
use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;

/// `logRotate`.
pub static COMMAND: Command = Command {
    name: "logRotate",
    aliases: &[],
    help: "{logRotate: 1} to rotate the server and audit logs, or {logRotate: \"server\"} / {logRotate: \"audit\"} for one log",
    requires_auth: true,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Cluster(&[super::ActionType::LogRotate]),
    run,
};

/// Rotates the log file, if there is one.
pub fn rotate(server: &ServerState) -> Result<(), CommandError> {
    tracing::info!(id = 23166, "Log rotation initiated");
    let Some(file) = &server.logs.file else {
        return Ok(());
    };
    match file.rotate() {
        Ok(Some(old)) => {
            tracing::info!(id = 23154, renamed = %old.display(), "Log rotated");
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) => Err(CommandError::new(
            ErrorCode::OperationFailed,
            format!("Failed to rotate the log file: {e}"),
        )),
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| {
        match inv.req.body.get("logRotate").ok().flatten() {
            Some(RawBsonRef::String("server")) | None => {}
            Some(RawBsonRef::String(other)) => {
                return Err(CommandError::new(
                    ErrorCode::NoSuchKey,
                    format!("Unknown log type for rotate: {other}"),
                ));
            }
            Some(
                RawBsonRef::Int32(_)
                | RawBsonRef::Int64(_)
                | RawBsonRef::Double(_)
                | RawBsonRef::Boolean(_),
            ) => {}
            Some(other) => {
                return Err(CommandError::wrong_type(
                    "logRotate.logRotate",
                    type_name(&other),
                    "string",
                ));
            }
        }
        rotate(inv.server)?;
        Ok(RawDocumentBuf::new().into())
    })())
}
