//! `insert`: insert documents (from the body or an OP_MSG `documents` sequence).
//!
//! 1. The namespace must be writable (73 otherwise, a command error); the batch must hold
//!    1 to 100,000 documents (16 InvalidLength), each an object (14).
//! 2. Each document is prepared by [`cairn_query::insert::prepare`] (`_id` first or
//!    generated, empty timestamps filled, illegal `_id`s refused); a failure is that
//!    document's write error.
//! 3. The collection is created if missing; documents are written in transactions of up to
//!    [`CHUNK_DOCS`] documents / [`CHUNK_BYTES`] bytes. Each document is atomic; a duplicate
//!    `_id` is write error 11000 with `keyPattern`/`keyValue`, a document the collection's
//!    validator refuses write error 121 with `errInfo` (unless `bypassDocumentValidation`).
//!    Ordered inserts stop at the first error, unordered ones carry on. A retryable write
//!    records the statement ids a transaction inserted in one record per transaction.
//! 4. The write concern decides durability (`j`/majority → fsync via group commit) and
//!    whether a `writeConcernError` is attached.
//!
//! Reply: `{n, [writeErrors: [{index, code, errmsg, ...}]], [writeConcernError], ok}`.

use std::sync::atomic::Ordering::Relaxed;

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBsonRef, RawDocumentBuf, rawdoc};
use cairn_storage::StorageError;
use cairn_storage::engine::EngineError;

use super::{
    CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, opt_strict_bool,
    type_name,
};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};
use crate::write_concern::WriteConcern;

/// Most documents per storage transaction.
pub const CHUNK_DOCS: usize = 1000;
/// Most bytes per storage transaction.
pub const CHUNK_BYTES: usize = 16 * 1024 * 1024;

/// `insert`.
pub static COMMAND: Command = Command {
    name: "insert",
    aliases: &[],
    help: "insert documents",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(&[
        "documents",
        "ordered",
        "bypassDocumentValidation",
        "stmtIds",
    ]),
    counter: Counter::SelfCounted,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::insert),
    run,
};

/// One write error: `{index, code, errmsg, ...extra}` — `WriteError::serialize` writes no
/// `codeName` (unlike a command error reply).
pub fn write_error(index: usize, e: &CommandError) -> RawDocumentBuf {
    let mut d = rawdoc! {
        "index": i32::try_from(index).unwrap_or(i32::MAX),
        "code": e.code.code(),
        "errmsg": e.message.as_str(),
    };
    if let Some(extra) = &e.extra {
        crate::error::append_all(&mut d, extra);
    }
    d
}

/// Assembles `{n, writeErrors?, retriedStmtIds?, writeConcernError?}`.
pub fn write_reply(
    n: usize,
    errors: &[(usize, CommandError)],
    retried: &[i32],
    wc: &WriteConcern,
) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    out.append(cstr!("n"), i32::try_from(n).unwrap_or(i32::MAX));
    append_errors_and_retried(&mut out, errors, retried);
    if let Some(wce) = wc.error() {
        out.append(cstr!("writeConcernError"), wce);
    }
    out
}

/// Appends `writeErrors` and `retriedStmtIds` (each only when non-empty), in the order of
/// MongoDB's write command reply.
pub fn append_errors_and_retried(
    out: &mut RawDocumentBuf,
    errors: &[(usize, CommandError)],
    retried: &[i32],
) {
    if !errors.is_empty() {
        let mut arr = RawArrayBuf::new();
        for (i, e) in errors {
            arr.push(write_error(*i, e));
        }
        out.append(cstr!("writeErrors"), arr);
    }
    if !retried.is_empty() {
        let mut arr = RawArrayBuf::new();
        for i in retried {
            arr.push(*i);
        }
        out.append(cstr!("retriedStmtIds"), arr);
    }
}

/// Refuses writes to `system.*` collections inside a transaction (50791), as MongoDB does.
pub fn check_txn_write(
    server: &crate::state::ServerState,
    op: &crate::session::OpCtx,
    db: &str,
    coll: &str,
) -> Result<(), CommandError> {
    if !op.in_txn() {
        return Ok(());
    }
    if coll.starts_with("system.") {
        return Err(CommandError::new(
            ErrorCode::Location(50791),
            format!("Cannot write to system collection {db}.{coll} within a transaction."),
        ));
    }
    if server
        .store
        .collection(db, coll)
        .is_some_and(|m| m.is_capped())
    {
        return Err(CommandError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            format!(
                "Collection '{db}.{coll}' is a capped collection. Writes in transactions are not allowed on capped collections."
            ),
        ));
    }
    Ok(())
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let args = inv.parsed;
        let coll = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        check_txn_write(inv.server, inv.op, &db, &coll)?;
        cairn_storage::namespace::check_write(&db, &coll).map_err(CommandError::from)?;
        let ordered = opt_strict_bool(args, "insert", "ordered")?.unwrap_or(true);
        let bypass = opt_strict_bool(args, "insert", "bypassDocumentValidation")?.unwrap_or(false);
        let wc = WriteConcern::from_command(args)?;
        let docs = match args.get("documents") {
            Ok(Some(RawBsonRef::Array(a))) => a,
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "insert.documents",
                    type_name(&other),
                    "array",
                ));
            }
            _ => return Err(CommandError::missing_field("insert.documents")),
        };
        let mut prepared: Vec<(usize, RawDocumentBuf)> = Vec::new();
        let mut errors: Vec<(usize, CommandError)> = Vec::new();
        let mut count = 0usize;
        for (i, el) in docs.into_iter().enumerate() {
            count += 1;
            let el = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let RawBsonRef::Document(d) = el else {
                return Err(CommandError::wrong_type(
                    &format!("insert.documents.{i}"),
                    type_name(&el),
                    "object",
                ));
            };
            if count > super::args::MAX_BATCH {
                break;
            }
            let clock = &inv.server.store.clock;
            match cairn_query::insert::prepare(d, || clock.next()) {
                Ok(p) => prepared.push((i, p.into_owned())),
                Err(e) => errors.push((i, CommandError::from(e))),
            }
        }
        super::args::check_batch_size(count)?;
        let target = inv.op.target.clone();
        // Inside a transaction the first failure ends the statement (and aborts it).
        let ordered = ordered || target.in_txn();
        let retry = inv.op.retry;
        let stmt_ids = crate::session::retry::stmt_ids(args, "insert", count)?;
        if ordered && let Some(first_bad) = errors.first().map(|(i, _)| *i) {
            // An ordered insert stops at its first failing document.
            prepared.retain(|(i, _)| *i < first_bad);
        }
        inv.server
            .opcounters
            .insert
            .fetch_add(count as i64, Relaxed);
        let store = inv.server.store.clone();
        let durability = wc.durability();
        // One document into an existing collection: inline (see `blocking::short_write`).
        let short = prepared.len() == 1 && blocking::short_write(&store, &db, &coll, durability);
        let (n, store_errors, retried) = blocking::run_short(short, move || {
            let mut n = 0usize;
            let mut errs: Vec<(usize, CommandError)> = Vec::new();
            let mut retried: Vec<i32> = Vec::new();
            let mut prepared = prepared;
            if let Some(retry) = &retry {
                let ids: Vec<i32> = prepared
                    .iter()
                    .map(|(i, _)| stmt_ids.get(*i).copied().unwrap_or(0))
                    .collect();
                let done = retry.executed(&store, &ids)?;
                let mut keep = Vec::with_capacity(prepared.len());
                for ((i, d), (id, rec)) in prepared.into_iter().zip(ids.into_iter().zip(done)) {
                    if rec.is_some() {
                        n += 1;
                        retried.push(id);
                    } else {
                        keep.push((i, d));
                    }
                }
                prepared = keep;
            }
            if store.view(&db, &coll).is_some() {
                // A view: every statement fails (the first only, when ordered).
                let e = crate::views::not_a_collection(&db, &coll);
                for (i, _) in &prepared {
                    errs.push((*i, e.clone()));
                    if ordered {
                        break;
                    }
                }
                return Ok((n, errs, retried));
            }
            let mut rest: &[(usize, RawDocumentBuf)] = &prepared;
            'chunks: while !rest.is_empty() {
                let mut take = 0;
                let mut bytes = 0;
                while take < rest.len() && take < CHUNK_DOCS && (take == 0 || bytes < CHUNK_BYTES) {
                    bytes += rest.get(take).map_or(0, |(_, d)| d.as_bytes().len());
                    take += 1;
                }
                let (chunk, tail) = rest.split_at(take);
                rest = tail;
                let mut attempts = 0;
                let outcome = loop {
                    let meta = target.ensure_collection(&store, &db, &coll)?;
                    let r = target.write(&store, durability, |tx| {
                        tx.set_bypass_validation(bypass);
                        let Some(meta) = tx.collection(&db, &coll)?.filter(|m| m.id == meta.id)
                        else {
                            return Err(StorageError::Engine(EngineError::NoSuchSpace(meta.id)));
                        };
                        let mut results = Vec::with_capacity(chunk.len());
                        // The statement ids of the chunk's inserted documents: recorded
                        // once, in one record, when the chunk is done.
                        let mut done: Vec<i32> = Vec::new();
                        for (i, d) in chunk {
                            match tx.insert(&meta, d) {
                                Ok(()) => {
                                    if retry.is_some() {
                                        done.push(stmt_ids.get(*i).copied().unwrap_or(0));
                                    }
                                    results.push((*i, None))
                                }
                                Err(e) if e.is_transient() => return Err(e),
                                Err(e @ StorageError::Engine(EngineError::NoSuchSpace(_))) => {
                                    return Err(e);
                                }
                                Err(e) => {
                                    results.push((*i, Some(e)));
                                    if ordered {
                                        break;
                                    }
                                }
                            }
                        }
                        if let Some(retry) = &retry
                            && !done.is_empty()
                        {
                            retry.record_inserts(tx, &done)?;
                        }
                        Ok(results)
                    });
                    match r {
                        // The collection was dropped between resolving and writing: recreate.
                        Err(StorageError::Engine(EngineError::NoSuchSpace(_))) if attempts < 10 => {
                            attempts += 1;
                        }
                        other => break other,
                    }
                };
                match outcome {
                    Ok(results) => {
                        for (i, e) in results {
                            match e {
                                None => n += 1,
                                Some(e) => {
                                    errs.push((i, CommandError::from(e)));
                                    if ordered {
                                        break 'chunks;
                                    }
                                }
                            }
                        }
                    }
                    Err(e) => {
                        let e = CommandError::from(e);
                        for (i, _) in chunk {
                            errs.push((*i, e.clone()));
                            if ordered {
                                break 'chunks;
                            }
                        }
                    }
                }
            }
            Ok((n, errs, retried))
        })
        .await?;
        errors.extend(store_errors);
        errors.sort_by_key(|(i, _)| *i);
        if ordered {
            errors.truncate(1);
        }
        Ok(write_reply(n, &errors, &retried, &wc).into())
    })
}
