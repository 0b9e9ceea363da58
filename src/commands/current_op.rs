//! `currentOp` (admin only): the operations in progress.
//!
//! Every running command ([`crate::ops`]: `opid`, `client`, `appName`, `lsid`, `command`,
//! `secs_running`, `planSummary`, `killPending`…) and every index build, in MongoDB's shape.
//! `$all: true` adds the idle connections (`active: false`); `$ownOps: true` keeps the
//! caller's own operations — with access control off every operation belongs to the same
//! (absent) user, so it keeps them all, as in MongoDB. Any other field (besides generic
//! arguments) is a query filter on the reported documents, e.g. `{"command.find": "c"}` or
//! `{secs_running: {$gte: 5}}`. Reply: `{inprog: [...]}`.
//!
//! [`operations`] produces the same documents for the aggregation stage `$currentOp`
//! (`idleConnections` there is `$all` here).

use std::sync::atomic::Ordering::Relaxed;

use bson::{RawArrayBuf, RawBsonRef, RawDocumentBuf, rawdoc};
use cairn_query::filter::Filter;

use super::host_info::pretty_host_name;
use super::{CmdFuture, Command, Counter, Fields, Invocation, ready, truthy};
use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;

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
    authz: super::Authz::Custom(crate::auth::authorize::current_op),
    run,
};

/// The operations in progress as `currentOp` and `$currentOp` report them, before filtering:
/// running commands and index builds, plus idle connections with `all`. With access control
/// off every operation belongs to the caller, so `$ownOps`/`allUsers` select nothing away.
pub fn operations(server: &ServerState, host: &str, all: bool) -> Vec<RawDocumentBuf> {
    let mut out = server.ops.report(host, all, None);
    out.extend(index_builds_at(server, host));
    out
}

/// The index builds in progress, as `currentOp` (and `$currentOp`) report them.
pub fn index_build_ops(server: &ServerState) -> Vec<RawDocumentBuf> {
    index_builds_at(server, &server.host)
}

fn index_builds_at(server: &ServerState, host: &str) -> Vec<RawDocumentBuf> {
    let mut out = Vec::new();
    for b in server.index_builds.list() {
        let done = b.done.load(Relaxed);
        let pct = (done * 100).checked_div(b.total).unwrap_or(0);
        let elapsed = b.started.elapsed();
        out.push(rawdoc! {
            "type": "op",
            "host": host,
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
    out
}

fn flag(body: &bson::RawDocument, name: &str) -> Result<bool, CommandError> {
    match body.get(name) {
        Ok(None) => Ok(false),
        Ok(Some(
            v @ (RawBsonRef::Boolean(_)
            | RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)),
        )) => Ok(truthy(&v)),
        Ok(Some(other)) => Err(CommandError::wrong_type(
            &format!("currentOp.{name}"),
            super::type_name(&other),
            "bool",
        )),
        Err(e) => Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| {
        let body = inv.req.body;
        let all = flag(body, "$all")?;
        // Validated; with access control off every operation is the caller's own.
        flag(body, "$ownOps")?;
        // Fields other than the command name, $all/$ownOps and generic arguments form a filter.
        let mut filter = RawDocumentBuf::new();
        for (i, el) in body.iter().enumerate() {
            let (k, v) =
                el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
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
        let host = pretty_host_name(&inv.server.host, inv.client.local.port());
        for op in operations(inv.server, &host, all) {
            if filter.matches(&op) {
                ops.push(op);
            }
        }
        Ok(rawdoc! {"inprog": ops}.into())
    })())
}
