//! Retryable writes: statements are numbered, executed at most once, and answered from their
//! record when retried.
//!
//! A write command with `lsid` + `txnNumber` (and no `autocommit`) numbers its statements
//! `stmtIds[i]` when the client sends them, or by position (0..n) as drivers expect. Before
//! running anything the command reads which statements already executed ([`Retry::executed`]
//! — one snapshot; the session is checked out, so nothing else can execute them meanwhile);
//! those are skipped and reported in `retriedStmtIds` with their recorded results. Every
//! statement that writes records its result with [`Retry::record`] inside the storage
//! transaction of its own writes (see `cairn_storage::sessions`), so a statement is recorded
//! exactly when its effects committed, across connections and restarts. A statement that
//! failed left no record, so a retry runs it again.

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::{StorageError, Store, WriteTxn};

use super::Retry;
use crate::commands::type_name;
use crate::error::{CommandError, ErrorCode};

impl Retry {
    /// The recorded results of `stmts` (`None`: not executed yet). A transaction number the
    /// session had not used before this command has executed nothing: no read.
    pub fn executed(
        &self,
        store: &Store,
        stmts: &[i32],
    ) -> Result<Vec<Option<RawDocumentBuf>>, CommandError> {
        if self.fresh {
            return Ok(vec![None; stmts.len()]);
        }
        let mut done = store.executed_stmts(&self.lsid, self.txn_number)?;
        Ok(stmts.iter().map(|s| done.remove(s)).collect())
    }

    /// Records that `stmt` executed with `result`, in the transaction `tx` that holds its
    /// writes.
    pub fn record(
        &self,
        tx: &mut WriteTxn<'_>,
        stmt: i32,
        result: &RawDocument,
    ) -> Result<(), StorageError> {
        tx.record_stmts(&self.lsid, self.txn_number, &[stmt], result)
    }

    /// Records that the insert statements `stmts` executed, in the transaction `tx` that
    /// inserted them (one record for all).
    pub fn record_inserts(&self, tx: &mut WriteTxn<'_>, stmts: &[i32]) -> Result<(), StorageError> {
        tx.record_stmts(&self.lsid, self.txn_number, stmts, &RawDocumentBuf::new())
    }
}

/// The statement ids of a write command with `count` statements: `stmtIds` when given (one
/// per statement), else `stmtId` + position, else the positions.
pub fn stmt_ids<'a>(
    body: impl crate::commands::Args<'a>,
    cmd: &str,
    count: usize,
) -> Result<Vec<i32>, CommandError> {
    match body.arg("stmtIds") {
        Ok(Some(RawBsonRef::Array(a))) => {
            let mut ids = Vec::with_capacity(count);
            for v in a {
                match v {
                    Ok(RawBsonRef::Int32(i)) => ids.push(i),
                    Ok(other) => {
                        return Err(CommandError::wrong_type(
                            &format!("{cmd}.stmtIds"),
                            type_name(&other),
                            "int",
                        ));
                    }
                    Err(e) => return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
                }
            }
            if ids.len() != count {
                return Err(CommandError::bad_value(format!(
                    "The size of stmtIds must match the number of statements. Got {} statements but {} stmtIds",
                    count,
                    ids.len()
                )));
            }
            Ok(ids)
        }
        Ok(Some(other)) => Err(CommandError::wrong_type(
            &format!("{cmd}.stmtIds"),
            type_name(&other),
            "array",
        )),
        _ => {
            let base = match body.arg("stmtId") {
                Ok(Some(RawBsonRef::Int32(i))) => i,
                _ => 0,
            };
            Ok((0..count)
                .map(|i| base.saturating_add(i32::try_from(i).unwrap_or(i32::MAX)))
                .collect())
        }
    }
}
