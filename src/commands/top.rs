//! `top` (admin only): time spent and operations per collection since the server started.
//!
//! Reply: `{totals: {note: "all times in microseconds", "<db.coll>": {total, readLock,
//! writeLock, queries, getmore, insert, update, remove, commands}}}`, each entry a
//! `{time, count}`, from [`crate::ops::Top`] (recorded by the dispatcher as commands finish).
//! Reads count under `readLock`, writes under `writeLock`. A dropped collection starts over.

use bson::{RawDocumentBuf, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready};
use crate::error::key;
use crate::ops::UsageCount;

/// `top`.
pub static COMMAND: Command = Command {
    name: "top",
    aliases: &[],
    help: "usage by collection, in micros ",
    requires_auth: true,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Cluster(&[super::ActionType::Top]),
    run,
};

fn entry(u: UsageCount) -> RawDocumentBuf {
    rawdoc! {
        "time": i64::try_from(u.time).unwrap_or(i64::MAX),
        "count": i64::try_from(u.count).unwrap_or(i64::MAX),
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| {
        let mut totals = rawdoc! {"note": "all times in microseconds"};
        for (ns, u) in inv.server.ops.top.snapshot() {
            totals.append(
                key(&ns)?,
                rawdoc! {
                    "total": entry(u.total),
                    "readLock": entry(u.read_lock),
                    "writeLock": entry(u.write_lock),
                    "queries": entry(u.queries),
                    "getmore": entry(u.getmore),
                    "insert": entry(u.insert),
                    "update": entry(u.update),
                    "remove": entry(u.remove),
                    "commands": entry(u.commands),
                },
            );
        }
        Ok(rawdoc! {"totals": totals}.into())
    })())
}
