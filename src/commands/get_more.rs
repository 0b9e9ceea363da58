//! `getMore`: the next batch of a cursor.
//!
//! `{getMore: <Int64 id>, collection, batchSize}` — the id must be an Int64 (14), the
//! collection must be the cursor's (13), the cursor must belong to the caller's session.
//! Without `batchSize` a batch is bounded only by 16 MiB. An exhausted cursor is closed and
//! reported with id 0. Reply: `{cursor: {nextBatch, id, ns}, ok}`.

use bson::{RawArrayBuf, RawBsonRef, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, opt_count, type_name};
use crate::blocking;
use crate::cursor::{next_batch, session_in};
use crate::error::CommandError;

/// `getMore`.
pub static COMMAND: Command = Command {
    name: "getMore",
    aliases: &[],
    help: "retrieve more results from an existing cursor",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Strict(&[
        "collection",
        "batchSize",
        "term",
        "lastKnownCommittedOpTime",
        "includeQueryStatsMetrics",
    ]),
    counter: Counter::GetMore,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::get_more),
    run,
};

/// A `getMore` on an awaitData cursor (a change stream): when no data is ready, waits for
/// commits until `wait` has passed, then answers with an empty batch and the same cursor.
/// `killOp` ends the wait (Interrupted, the cursor closed).
async fn await_batch(
    server: &std::sync::Arc<crate::state::ServerState>,
    cursor: Box<crate::cursor::Cursor>,
    batch: usize,
    wait: std::time::Duration,
    ns: String,
) -> super::CmdResult {
    let until = tokio::time::Instant::now() + wait;
    let mut commits = server.watch_commits();
    let mut cursor = cursor;
    let id = cursor.id;
    loop {
        commits.borrow_and_update();
        let s = server.clone();
        let (back, r) = blocking::run(move || {
            let r = next_batch(&s.store, &mut cursor, batch);
            Ok((cursor, r))
        })
        .await?;
        cursor = back;
        let (docs, exhausted) = match r {
            Ok(v) => v,
            Err(e) => {
                server.cursors.check_in(cursor, true);
                return Err(e);
            }
        };
        let now = tokio::time::Instant::now();
        if !docs.is_empty() || exhausted || now >= until || server.is_shutting_down() {
            let pbrt = cursor.post_batch_resume_token();
            server.cursors.check_in(cursor, exhausted);
            let mut arr = RawArrayBuf::new();
            for d in docs {
                arr.push(d);
            }
            let mut out =
                rawdoc! {"id": if exhausted { 0 } else { id }, "ns": ns, "nextBatch": arr};
            if let Some(t) = pbrt {
                out.append(bson::raw::cstr!("postBatchResumeToken"), t);
            }
            if exhausted {
                out.append(bson::raw::cstr!("invalidated"), true);
            }
            return Ok(rawdoc! {"cursor": out}.into());
        }
        // Wake at least every 100 ms to notice killOp while no commit arrives.
        let slice = until.min(now + std::time::Duration::from_millis(100));
        let _ = tokio::time::timeout_at(slice, commits.changed()).await;
        if let Err(e) = crate::deadline::check() {
            server.cursors.check_in(cursor, true);
            return Err(e);
        }
    }
}

/// A change stream's getMore errors carry `ResumableChangeStreamError` where a driver may
/// resume (MongoDB labels them by the cursor's originating command).
fn resumable(mut e: CommandError, change_stream: bool) -> CommandError {
    if change_stream {
        crate::session::label_resumable_change_stream_error(&mut e);
    }
    e
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let id = match body.get("getMore") {
            Ok(Some(RawBsonRef::Int64(i))) => i,
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "getMore.getMore",
                    type_name(&other),
                    "long",
                ));
            }
            _ => return Err(CommandError::missing_field("getMore.getMore")),
        };
        let coll = match body.get("collection") {
            Ok(Some(RawBsonRef::String(c))) => c,
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "getMore.collection",
                    type_name(&other),
                    "string",
                ));
            }
            _ => return Err(CommandError::missing_field("getMore.collection")),
        };
        if coll != "$cmd.aggregate" {
            cairn_storage::namespace::check_collection_name(coll)?;
        }
        let batch = opt_count(body, "getMore", "batchSize")?
            .filter(|b| *b > 0)
            .map_or(usize::MAX, |b| usize::try_from(b).unwrap_or(usize::MAX));
        let ns = cairn_query::plan::namespace(inv.req.db, coll);
        let mut cursor = inv.server.cursors.check_out(
            id,
            &ns,
            session_in(inv.parsed.find("lsid")).as_deref(),
            inv.op.txn_number(),
        )?;
        let change_stream = cursor.is_change_stream();
        if let Some(e) = crate::failpoint::get_more_after_checkout(&ns, inv.client) {
            inv.server.cursors.check_in(cursor, true);
            return Err(resumable(e, change_stream));
        }
        let await_data = cursor.awaits_data();
        if body.get("maxTimeMS").ok().flatten().is_some() && !await_data {
            inv.server.cursors.check_in(cursor, false);
            // Only tailable awaitData cursors take a per-getMore wait.
            return Err(CommandError::bad_value(
                "cannot set maxTimeMS on getMore command for a non-awaitData cursor",
            ));
        }
        if await_data {
            // maxTimeMS is how long to wait for new data (1 s by default), not a deadline.
            let wait = match crate::deadline::parse(body) {
                Ok(Some(d)) => d.saturating_duration_since(std::time::Instant::now()),
                Ok(None) => std::time::Duration::from_secs(1),
                Err(e) => {
                    inv.server.cursors.check_in(cursor, false);
                    return Err(e);
                }
            };
            return crate::deadline::scope(None, await_batch(inv.server, cursor, batch, wait, ns))
                .await
                .map_err(|e| resumable(e, change_stream));
        }
        let at_cluster_time = match &cursor.target {
            crate::session::target::Target::Snapshot(_, t) => Some(*t),
            _ => None,
        };
        let server = inv.server.clone();
        let started = std::time::Instant::now();
        let deadline = cursor.time_budget.map(|b| started + b);
        let result = crate::deadline::scope(
            deadline,
            blocking::run(move || {
                let mut seen = (0, 0);
                if let crate::cursor::Source::Plan { exec, .. } = &cursor.source {
                    seen = (exec.stats.keys_examined, exec.stats.docs_examined);
                }
                let r = next_batch(&server.store, &mut cursor, batch);
                crate::ops::record_source_work(&cursor.source, &mut seen);
                if let Some(b) = &mut cursor.time_budget {
                    *b = b.saturating_sub(started.elapsed());
                }
                match r {
                    Ok((docs, exhausted)) => {
                        server.cursors.check_in(cursor, exhausted);
                        Ok((docs, exhausted))
                    }
                    Err(e) => {
                        // A failed getMore leaves the cursor open, except when its collection is
                        // gone or its time limit ran out.
                        let dead = matches!(
                            e.code,
                            crate::error::ErrorCode::QueryPlanKilled
                                | crate::error::ErrorCode::MaxTimeMSExpired
                                | crate::error::ErrorCode::CappedPositionLost
                        );
                        server.cursors.check_in(cursor, dead);
                        Err(e)
                    }
                }
            }),
        )
        .await?;
        let (docs, exhausted) = result;
        let id = if exhausted { 0 } else { id };
        Ok(crate::cursor::batch_reply_counted(
            "nextBatch",
            &docs,
            None,
            id,
            &ns,
            at_cluster_time,
        ))
    })
}
