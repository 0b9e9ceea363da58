//! `waitForFailPoint` (test command, admin only): wait until a fail point has fired a number
//! of times.
//!
//! `{waitForFailPoint: <name>, timesEntered: <n>, maxTimeMS: <ms>}` returns once the point's
//! count of entries reaches `n` (counted since the server started, as `configureFailPoint`'s
//! `count` reports it); `maxTimeMS` and `killOp` end the wait with their errors.

use bson::{RawBsonRef, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation, type_name};
use crate::error::{CommandError, ErrorCode};

/// `waitForFailPoint`.
pub static COMMAND: Command = Command {
    name: "waitForFailPoint",
    aliases: &[],
    help: "wait for a fail point to be entered a certain number of times",
    requires_auth: false,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&["timesEntered"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let name = match body.get("waitForFailPoint") {
            Ok(Some(RawBsonRef::String(s))) => s,
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "waitForFailPoint.waitForFailPoint",
                    type_name(&other),
                    "string",
                ));
            }
            _ => {
                return Err(CommandError::missing_field(
                    "waitForFailPoint.waitForFailPoint",
                ));
            }
        };
        let target = match body.get("timesEntered") {
            Ok(Some(RawBsonRef::Int32(i))) => i64::from(i),
            Ok(Some(RawBsonRef::Int64(i))) => i,
            Ok(Some(RawBsonRef::Double(d))) if d.fract() == 0.0 && d.is_finite() => d as i64,
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "waitForFailPoint.timesEntered",
                    type_name(&other),
                    "long",
                ));
            }
            _ => return Err(CommandError::missing_field("waitForFailPoint.timesEntered")),
        };
        let fp = crate::failpoint::get(name).ok_or_else(|| {
            CommandError::new(ErrorCode::FailPointSetFailed, format!("{name} not found"))
        })?;
        let target = u64::try_from(target).unwrap_or(0);
        loop {
            crate::deadline::check()?;
            if fp.times_entered() >= target {
                return Ok(RawDocumentBuf::new().into());
            }
            let wait = fp.wait_for(target);
            // Wake at least every 20 ms to notice maxTimeMS and killOp.
            let _ = tokio::time::timeout(std::time::Duration::from_millis(20), wait).await;
        }
    })
}
