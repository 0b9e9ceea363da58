//! `abortTransaction`: abandon a session's multi-document transaction.
//!
//! Runs against `admin` with the session's `lsid`, `txnNumber` and `autocommit: false`.
//! Nothing the transaction wrote becomes visible; collections and indexes it created are
//! dropped; cursors opened in it close. Aborting an aborted transaction is NoSuchTransaction
//! (251), a committed one TransactionCommitted (256) — the dispatcher answers those.
//!
//! Reply: `{[writeConcernError], ok, $clusterTime, operationTime, recoveryToken}`.

use bson::RawDocumentBuf;
use bson::raw::cstr;

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::error::{CommandError, ErrorCode};
use crate::session::{Phase, abort_cell};
use crate::write_concern::WriteConcern;

/// `abortTransaction`.
pub static COMMAND: Command = Command {
    name: "abortTransaction",
    aliases: &[],
    help: "Aborts a transaction",
    requires_auth: true,
    admin_only: true,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(&["recoveryToken"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let wc = WriteConcern::from_command(inv.req.body)?;
        let (Some(session), Some(cell)) = (inv.op.session.clone(), inv.op.target.txn().cloned())
        else {
            return Err(CommandError::new(
                ErrorCode::NoSuchTransaction,
                "no known command has been sent by this router for this transaction",
            ));
        };
        let server = inv.server.clone();
        let lsid = session.lsid;
        {
            let mut st = session.state.lock().unwrap_or_else(|p| p.into_inner());
            if matches!(&st.phase, Phase::Active(c, _) if std::sync::Arc::ptr_eq(c, &cell)) {
                st.phase = Phase::Aborted;
            }
        }
        crate::blocking::run(move || {
            abort_cell(&server, lsid, &cell);
            Ok(())
        })
        .await?;
        let mut out = RawDocumentBuf::new();
        if let Some(wce) = wc.error() {
            out.append(cstr!("writeConcernError"), wce);
        }
        Ok(out.into())
    })
}
