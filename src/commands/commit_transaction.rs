//! `commitTransaction`: make a session's multi-document transaction durable and visible.
//!
//! Runs against `admin` with the session's `lsid`, `txnNumber` and `autocommit: false` (the
//! dispatcher checks them, see [`crate::session`]). The transaction's writes, its collection
//! and index creations, and its session record (so a retried commit is answered after a
//! restart) commit in one storage transaction, then the write concern is honoured (`j` or
//! `w: "majority"` wait for the journal fsync). Committing again with the same `txnNumber`
//! succeeds without doing anything (commit is idempotent); cursors opened in the transaction
//! close. A transaction that conflicts with one that committed since its snapshot is aborted
//! and answered WriteConflict (112) with `TransientTransactionError`, so the drivers'
//! `withTransaction` reruns it.
//!
//! Reply: `{[writeConcernError], ok, $clusterTime, operationTime, recoveryToken}`.

use bson::RawDocumentBuf;
use bson::raw::cstr;

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};
use crate::session::{Phase, abort_cell};
use crate::write_concern::WriteConcern;

/// `commitTransaction`.
pub static COMMAND: Command = Command {
    name: "commitTransaction",
    aliases: &[],
    help: "Commits a transaction",
    requires_auth: true,
    admin_only: true,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(&["commitTimestamp", "recoveryToken"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        if body.get("commitTimestamp").ok().flatten().is_some() {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "commitTimestamp is only allowed for prepared transactions, which Cairn does not have",
            ));
        }
        let wc = WriteConcern::from_command(body)?;
        let (Some(session), Some(n)) = (inv.op.session.clone(), inv.op.args.txn_number) else {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "commitTransaction can only be run within a session",
            ));
        };
        let server = inv.server.clone();
        let Some(cell) = inv.op.target.txn().cloned() else {
            // The dispatcher only lets a retried commit of a committed transaction through.
            if wc.journal {
                blocking::run(move || Ok(server.store.wait_durable()?)).await?;
            }
            return Ok(reply(&wc).into());
        };
        let lsid = session.lsid;
        let durability = wc.durability();
        let store = server.store.clone();
        let cell2 = cell.clone();
        let r = blocking::run(move || {
            let Some(state) = cell2.take() else {
                return Err(CommandError::new(
                    ErrorCode::NoSuchTransaction,
                    format!(
                        "Transaction with {{ txnNumber: {n}, txnRetryCounter: 0 }} has been aborted."
                    ),
                ));
            };
            let state = if state.writes() > 0 {
                let mut t = store.resume(state);
                let r = t.set_session_record(&lsid, n, true);
                let state = t.suspend();
                if let Err(e) = r {
                    store.abort_txn(state);
                    return Err(e.into());
                }
                state
            } else {
                state
            };
            store.commit_txn(state, durability).map_err(|e| {
                let mut e = CommandError::from(e);
                if e.code == ErrorCode::WriteConflict {
                    e.labels.push("TransientTransactionError");
                }
                e
            })
        })
        .await;
        {
            let mut st = session.state.lock().unwrap_or_else(|p| p.into_inner());
            if matches!(&st.phase, Phase::Active(c, _) if std::sync::Arc::ptr_eq(c, &cell)) {
                st.phase = if r.is_ok() {
                    Phase::Committed
                } else {
                    Phase::Aborted
                };
            }
        }
        abort_cell(&server, lsid, &cell);
        r?;
        Ok(reply(&wc).into())
    })
}

fn reply(wc: &WriteConcern) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    if let Some(wce) = wc.error() {
        out.append(cstr!("writeConcernError"), wce);
    }
    out
}
