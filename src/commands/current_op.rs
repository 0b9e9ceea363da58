//! `currentOp` (admin only): operations in progress. Cairn reports its index builds with
//! MongoDB's fields (`type`, `opid`, `active`, `secs_running`, `op`, `ns`, `command`, `msg`,
//! `progress: {done, total}`); filter fields in the command select among them (equality on
//! the reported fields).

use std::sync::atomic::Ordering::Relaxed;

use bson::{RawArrayBuf, rawdoc};
use cairn_query::filter::Filter;

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready};
use crate::error::CommandError;

/// `currentOp`.
pub static COMMAND: Command = Command {
    name: "currentOp",
    aliases: &[],
    help: "report operations in progress",
    requires_auth: true,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: false,
    run,
};

/// The index builds in progress, as `currentOp` (and `$currentOp`) report them.
pub fn index_build_ops(server: &crate::state::ServerState) -> Vec<bson::RawDocumentBuf> {
    let mut ops = Vec::new();
    for b in server.index_builds.list() {
        let done = b.done.load(Relaxed);
        let pct = (done * 100).checked_div(b.total).unwrap_or(0);
        let elapsed = b.started.elapsed();
        ops.push(rawdoc! {
            "type": "op",
            "host": server.host.as_str(),
            "desc": "IndexBuildsCoordinator",
            "active": true,
            "opid": i64::try_from(b.opid).unwrap_or(i64::MAX),
            "secs_running": i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX),
            "microsecs_running": i64::try_from(elapsed.as_micros()).unwrap_or(i64::MAX),
            "op": "command",
            "ns": b.ns.as_str(),
            "command": b.command.clone(),
            "msg": format!("Index Build: scanning collection Index Build: scanning collection: {done}/{} {pct}%", b.total),
            "progress": {"done": i64::try_from(done).unwrap_or(i64::MAX), "total": i64::try_from(b.total).unwrap_or(i64::MAX)},
            "indexName": b.index.as_str(),
        });
    }
    ops
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| {
        // Fields other than the command name, $all/$ownOps and generic arguments form a filter.
        let mut filter = bson::RawDocumentBuf::new();
        for (i, el) in inv.req.body.iter().enumerate() {
            let (k, v) = el.map_err(|e| {
                CommandError::new(crate::error::ErrorCode::InvalidBSON, e.to_string())
            })?;
            if i == 0
                || matches!(k.as_str(), "$all" | "$ownOps")
                || super::GENERIC_ARGUMENTS.contains(&k.as_str())
            {
                continue;
            }
            filter.append(k, v);
        }
        let filter = Filter::parse(&filter)?;
        let mut ops = RawArrayBuf::new();
        for op in index_build_ops(inv.server) {
            if filter.matches(&op) {
                ops.push(op);
            }
        }
        Ok(rawdoc! {"inprog": ops}.into())
    })())
}
