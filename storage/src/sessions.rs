//! Durable session records: what retryable writes and committed transactions leave behind so
//! that a retry — on another connection, or after a restart — is answered, not re-executed
//! (MongoDB's `config.transactions` and the oplog entries of retried statements).
//!
//! Layout in the catalog space, byte by byte:
//! ```text
//! 'T' lsid(16)                                 → session record (BSON, below)
//! 'U' lsid(16) u64be(txnNumber) u32be(stmtId)  → statement record: {s: [stmtIds], r: result}
//! ```
//! A statement record names the statements it covers (`s`, the first of which is in its key)
//! and their common result `r`: an update, delete or findAndModify records one statement with
//! its result; an insert records every document statement of one storage transaction in one
//! key (their result is empty), so a retryable `insertMany` costs one record per batch, not one
//! per document.
//! A session record is `{txnNumber: Int64, committed: bool, lastUse: Date}`: the highest
//! transaction number that wrote for the session, and whether it was a multi-document
//! transaction that committed. Transaction numbers are non-negative, so their big-endian
//! bytes sort numerically and `'U' lsid u64be(n)` is the exact prefix of one transaction's
//! statements.
//!
//! Invariants:
//! - a statement's result key is written in the same storage transaction as the statement's
//!   own writes, so a statement is recorded if and only if its effects are committed;
//! - a session record never moves back to a lower transaction number; when it moves up, the
//!   older number's statement keys are deleted in that same transaction;
//! - a committed multi-document transaction writes its record in its own commit, so a retried
//!   `commitTransaction` after a restart still finds it.

use bson::raw::cstr;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

use crate::Result;
use crate::engine::{CATALOG_SPACE, Read};
use crate::error::StorageError;
use crate::store::{Store, WriteTxn};

/// Prefix of session records.
pub const SESSION_PREFIX: u8 = b'T';
/// Prefix of recorded statement results.
pub const STMT_PREFIX: u8 = b'U';

/// The user digest of sessions when authentication is off: SHA-256 of the empty string.
pub const NO_AUTH_UID: [u8; 32] = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

/// A logical session id (`lsid.id`, a UUID).
pub type Lsid = [u8; 16];

/// What a session record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRecord {
    /// The highest transaction number that wrote.
    pub txn_number: i64,
    /// Whether that number was a multi-document transaction that committed.
    pub committed: bool,
    /// When it was last written (milliseconds since the epoch).
    pub last_use_ms: i64,
}

fn session_key(lsid: &Lsid) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(SESSION_PREFIX);
    k.extend_from_slice(lsid);
    k
}

fn txn_prefix(lsid: &Lsid, txn: Option<i64>) -> Vec<u8> {
    let mut k = Vec::with_capacity(29);
    k.push(STMT_PREFIX);
    k.extend_from_slice(lsid);
    if let Some(n) = txn {
        k.extend_from_slice(&(n.max(0) as u64).to_be_bytes());
    }
    k
}

fn stmt_key(lsid: &Lsid, txn: i64, stmt: i32) -> Vec<u8> {
    let mut k = txn_prefix(lsid, Some(txn));
    k.extend_from_slice(&(stmt.max(0) as u32).to_be_bytes());
    k
}

fn parse_record(b: &[u8]) -> Result<SessionRecord> {
    let d = RawDocument::from_bytes(b).map_err(|e| StorageError::Corrupt(e.to_string()))?;
    let txn_number = match d.get("txnNumber") {
        Ok(Some(RawBsonRef::Int64(n))) => n,
        _ => {
            return Err(StorageError::Corrupt(
                "session record without txnNumber".into(),
            ));
        }
    };
    let committed = matches!(d.get("committed"), Ok(Some(RawBsonRef::Boolean(true))));
    let last_use_ms = match d.get("lastUse") {
        Ok(Some(RawBsonRef::DateTime(t))) => t.timestamp_millis(),
        _ => 0,
    };
    Ok(SessionRecord {
        txn_number,
        committed,
        last_use_ms,
    })
}

/// The session record of `lsid` as `r` sees it.
pub fn read_record(r: &dyn Read, lsid: &Lsid) -> Result<Option<SessionRecord>> {
    match r.get(CATALOG_SPACE, &session_key(lsid))? {
        Some(b) => parse_record(&b).map(Some),
        None => Ok(None),
    }
}

impl WriteTxn<'_> {
    /// The session record of `lsid`, read inside this transaction.
    pub fn session_record(&self, lsid: &Lsid) -> Result<Option<SessionRecord>> {
        read_record(&*self.tx, lsid)
    }

    /// Moves the session record to transaction `txn` (deleting the statements of an older
    /// one) with `committed`. Returns the record that was there before.
    pub fn set_session_record(
        &mut self,
        lsid: &Lsid,
        txn: i64,
        committed: bool,
    ) -> Result<Option<SessionRecord>> {
        let before = self.session_record(lsid)?;
        self.advance_session_record(lsid, before, txn, committed)?;
        Ok(before)
    }

    /// [`WriteTxn::set_session_record`] given the record `before` already read in this
    /// transaction.
    fn advance_session_record(
        &mut self,
        lsid: &Lsid,
        before: Option<SessionRecord>,
        txn: i64,
        committed: bool,
    ) -> Result<()> {
        if let Some(b) = before
            && b.txn_number != txn
        {
            // Only the recorded transaction number has live statements (each advance deletes
            // the previous ones), so the scan covers its prefix alone: a prefix over the whole
            // session would wade through the tombstones of every earlier statement.
            let prefix = txn_prefix(lsid, Some(b.txn_number));
            let old: Vec<Vec<u8>> = self
                .tx
                .prefix(CATALOG_SPACE, &prefix)?
                .map(|kv| kv.map(|(k, _)| k.to_vec()))
                .collect::<std::result::Result<_, _>>()?;
            for k in old {
                self.tx.delete(CATALOG_SPACE, &k)?;
            }
        }
        let mut rec = RawDocumentBuf::new();
        rec.append(cstr!("txnNumber"), txn);
        rec.append(cstr!("committed"), committed);
        rec.append(cstr!("lastUse"), bson::DateTime::now());
        self.tx
            .put(CATALOG_SPACE, &session_key(lsid), rec.as_bytes())?;
        Ok(())
    }

    /// Records that statements `stmts` of retryable write `txn` executed with `result`, in this
    /// transaction (so together with the statements' writes).
    pub fn record_stmts(
        &mut self,
        lsid: &Lsid,
        txn: i64,
        stmts: &[i32],
        result: &RawDocument,
    ) -> Result<()> {
        let Some(first) = stmts.first() else {
            return Ok(());
        };
        match self.session_record(lsid)? {
            Some(r) if r.txn_number == txn && !r.committed => {}
            before => self.advance_session_record(lsid, before, txn, false)?,
        }
        let mut ids = bson::RawArrayBuf::new();
        for s in stmts {
            ids.push(*s);
        }
        let mut rec = RawDocumentBuf::new();
        rec.append(cstr!("s"), ids);
        rec.append(cstr!("r"), result.to_owned());
        self.tx
            .put(CATALOG_SPACE, &stmt_key(lsid, txn, *first), rec.as_bytes())?;
        Ok(())
    }
}

impl Store {
    /// The recorded results of every executed statement of transaction `txn`, read on one
    /// snapshot, by statement id.
    pub fn executed_stmts(
        &self,
        lsid: &Lsid,
        txn: i64,
    ) -> Result<std::collections::HashMap<i32, RawDocumentBuf>> {
        let r = self.read()?;
        let mut out = std::collections::HashMap::new();
        for kv in r
            .snapshot()
            .prefix(CATALOG_SPACE, &txn_prefix(lsid, Some(txn)))?
        {
            let (_, v) = kv?;
            let rec =
                RawDocument::from_bytes(&v).map_err(|e| StorageError::Corrupt(e.to_string()))?;
            let corrupt = || StorageError::Corrupt("statement record".into());
            let result = rec.get_document("r").map_err(|_| corrupt())?.to_owned();
            for id in rec.get_array("s").map_err(|_| corrupt())? {
                if let Ok(RawBsonRef::Int32(i)) = id {
                    out.insert(i, result.clone());
                }
            }
        }
        Ok(out)
    }

    /// The session record of `lsid` as of now.
    pub fn session_record(&self, lsid: &Lsid) -> Result<Option<SessionRecord>> {
        let r = self.read()?;
        read_record(r.snapshot(), lsid)
    }

    /// Session records last written before `cutoff_ms` (milliseconds since the epoch), for
    /// expiry.
    pub fn stale_sessions(&self, cutoff_ms: i64) -> Result<Vec<Lsid>> {
        let r = self.read()?;
        let mut out = Vec::new();
        for kv in r.snapshot().prefix(CATALOG_SPACE, &[SESSION_PREFIX])? {
            let (k, v) = kv?;
            let Ok(lsid) = <Lsid>::try_from(k.get(1..).unwrap_or_default()) else {
                continue;
            };
            if parse_record(&v)?.last_use_ms < cutoff_ms {
                out.push(lsid);
            }
        }
        Ok(out)
    }

    /// Deletes a session's record and recorded statements (the session expired or was
    /// killed).
    pub fn forget_session(&self, lsid: &Lsid) -> Result<()> {
        self.write(crate::Durability::Buffered, |tx| -> Result<()> {
            // Only the recorded number has live statements (see `set_session_record`).
            let number = tx.session_record(lsid)?.map(|r| r.txn_number);
            let prefix = txn_prefix(lsid, number);
            let keys: Vec<Vec<u8>> = tx
                .tx
                .prefix(CATALOG_SPACE, &prefix)?
                .map(|kv| kv.map(|(k, _)| k.to_vec()))
                .collect::<std::result::Result<_, _>>()?;
            for k in keys {
                tx.tx.delete(CATALOG_SPACE, &k)?;
            }
            tx.tx.delete(CATALOG_SPACE, &session_key(lsid))?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::engine::memory::MemoryEngine;
    use crate::{Durability, StoreOptions};

    fn store() -> Store {
        Store::open(
            Arc::new(MemoryEngine::new()),
            StoreOptions { sync_always: false },
        )
        .unwrap()
    }

    #[test]
    fn statements_are_recorded_and_superseded() {
        let s = store();
        let lsid = [7u8; 16];
        s.write(Durability::Buffered, |tx| -> Result<()> {
            tx.record_stmts(&lsid, 1, &[0], &bson::rawdoc! {"n": 1})?;
            tx.record_stmts(&lsid, 1, &[1, 2, 3], &bson::rawdoc! {})
        })
        .unwrap();
        let rec = s.session_record(&lsid).unwrap().unwrap();
        assert_eq!((rec.txn_number, rec.committed), (1, false));
        let done = s.executed_stmts(&lsid, 1).unwrap();
        assert_eq!(done.len(), 4);
        assert_eq!(done[&0], bson::rawdoc! {"n": 1});
        assert_eq!(done[&3], bson::rawdoc! {});
        assert!(!done.contains_key(&4));
        // A new number drops the old statements.
        s.write(Durability::Buffered, |tx| -> Result<()> {
            tx.record_stmts(&lsid, 2, &[0], &bson::rawdoc! {})
        })
        .unwrap();
        assert!(s.executed_stmts(&lsid, 1).unwrap().is_empty());
        assert_eq!(s.executed_stmts(&lsid, 2).unwrap().len(), 1);
        s.write(Durability::Buffered, |tx| -> Result<()> {
            tx.set_session_record(&lsid, 3, true)?;
            Ok(())
        })
        .unwrap();
        let rec = s.session_record(&lsid).unwrap().unwrap();
        assert_eq!((rec.txn_number, rec.committed), (3, true));
        // No statement record of any earlier number is left.
        let r = s.read().unwrap();
        let left = r
            .snapshot()
            .prefix(CATALOG_SPACE, &txn_prefix(&lsid, None))
            .unwrap()
            .count();
        assert_eq!(left, 0);
        drop(r);
        assert_eq!(s.stale_sessions(i64::MAX).unwrap(), vec![lsid]);
        assert!(s.stale_sessions(0).unwrap().is_empty());
        s.forget_session(&lsid).unwrap();
        assert!(s.session_record(&lsid).unwrap().is_none());
    }
}
