//! `fsync` (admin only): flush all pending writes to the data files.
//!
//! Every collection's buffered writes are written into its own files and the journal is
//! fsynced (a checkpoint). `numFiles` reports how many storage spaces were flushed.
//! `lock: true` (fsyncLock, blocking all writes) is not supported yet.

use bson::rawdoc;

use super::{CmdFuture, Command, Counter, Fields, Invocation, opt_bool};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};

/// `fsync`.
pub static COMMAND: Command = Command {
    name: "fsync",
    aliases: &[],
    help: "invoke fsync: flush all pending writes to the data files",
    requires_auth: true,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&["lock", "async", "fsyncLockAcquisitionTimeoutMillis"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Cluster(&[super::ActionType::Fsync]),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        if opt_bool(inv.req.body, "fsync", "lock")?.unwrap_or(false) {
            return Err(CommandError::new(
                ErrorCode::NotImplemented,
                "fsync with lock (fsyncLock) is not supported by Cairn yet",
            ));
        }
        if opt_bool(inv.req.body, "fsync", "async")?.unwrap_or(false) {
            return Err(CommandError::new(
                ErrorCode::IllegalOperation,
                "async option to fsync is not supported",
            ));
        }
        let store = inv.server.store.clone();
        let n = blocking::run(move || Ok(store.engine().checkpoint()?)).await?;
        Ok(rawdoc! {"numFiles": i32::try_from(n).unwrap_or(i32::MAX)}.into())
    })
}
