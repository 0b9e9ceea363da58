//! `configureFailPoint` (test command, admin only): switch a fail point
//! ([`crate::failpoint`]) on or off.
//!
//! `{configureFailPoint: <name>, mode: "off" | "alwaysOn" | {times: n} | {skip: n} |
//! {activationProbability: p}, data: {…}}`. Reply: `{count: <times the point had fired>}`.
//! An unknown name is FailPointSetFailed (266); mode and data errors are MongoDB's.

use bson::{RawBsonRef, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready};
use crate::error::{CommandError, ErrorCode};

/// `configureFailPoint`.
pub static COMMAND: Command = Command {
    name: "configureFailPoint",
    aliases: &[],
    help: "modifies the settings of a fail point",
    requires_auth: false,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

/// MongoDB's `appendNumber`: an int32 below 2^30, else an int64.
pub fn number(n: u64) -> bson::RawBson {
    match i32::try_from(n) {
        Ok(i) if i < (1 << 30) => bson::RawBson::Int32(i),
        _ => bson::RawBson::Int64(i64::try_from(n).unwrap_or(i64::MAX)),
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| {
        let body = inv.req.body;
        let name = match body.iter().next() {
            Some(Ok((_, RawBsonRef::String(s)))) => s,
            _ => "",
        };
        let fp = crate::failpoint::get(name).ok_or_else(|| {
            CommandError::new(ErrorCode::FailPointSetFailed, format!("{name} not found"))
        })?;
        let (mode, data) = crate::failpoint::parse(body)?;
        let count = fp.set(mode, data);
        tracing::warn!(id = 23829, failPointName = name,
                       failPoint = %bson::Document::try_from(fp.to_document().as_ref())
                           .map(|d| d.to_string()).unwrap_or_default(),
                       "Set failpoint");
        Ok(rawdoc! {"count": number(count)}.into())
    })())
}
