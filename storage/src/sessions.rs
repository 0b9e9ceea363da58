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
//! A session record is `{txnNumber: Int64, committed: bool, lastUse: Date, stmts?: [Int32]}`:
//! the highest transaction number that wrote for the session, whether it was a
//! multi-document transaction that committed, and — when every statement record of that
//! number was written through [`WriteTxn::record_stmts`] and there are at most
//! [`MAX_LISTED`] of them — the first statement ids of those records, i.e. their keys.
//! Transaction numbers are non-negative, so their big-endian bytes sort numerically and
//! `'U' lsid u64be(n)` is the exact prefix of one transaction's statements. Moving to a new
//! number deletes the old number's statement keys: by the `stmts` list when the record has
//! one (point deletes), otherwise by a scan of that prefix (records written before the list
//! existed, after a multi-document commit, or with more records than the list holds).
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

/// The most statement-record keys a session record lists (see the module doc).
pub const MAX_LISTED: usize = 64;

/// A session record with its listed statement keys (`None`: not listed, scan).
struct FullRecord {
    rec: SessionRecord,
    listed: Option<Vec<i32>>,
}

fn parse_full(b: &[u8]) -> Result<FullRecord> {
    let d = RawDocument::from_bytes(b).map_err(|e| StorageError::Corrupt(e.to_string()))?;
    let (mut txn_number, mut committed, mut last_use_ms, mut listed) = (None, false, 0, None);
    for el in d {
        match el.map_err(|e| StorageError::Corrupt(e.to_string()))? {
            (k, RawBsonRef::Int64(n)) if k == "txnNumber" && txn_number.is_none() => {
                txn_number = Some(n)
            }
            (k, RawBsonRef::Boolean(c)) if k == "committed" => committed = c,
            (k, RawBsonRef::DateTime(t)) if k == "lastUse" => last_use_ms = t.timestamp_millis(),
            (k, RawBsonRef::Array(a)) if k == "stmts" => {
                let mut ids = Vec::new();
                for v in a {
                    match v.map_err(|e| StorageError::Corrupt(e.to_string()))? {
                        RawBsonRef::Int32(i) => ids.push(i),
                        _ => return Err(StorageError::Corrupt("session record stmts".into())),
                    }
                }
                listed = Some(ids);
            }
            _ => {}
        }
    }
    let Some(txn_number) = txn_number else {
        return Err(StorageError::Corrupt(
            "session record without txnNumber".into(),
        ));
    };
    Ok(FullRecord {
        rec: SessionRecord {
            txn_number,
            committed,
            last_use_ms,
        },
        listed,
    })
}

fn parse_record(b: &[u8]) -> Result<SessionRecord> {
    parse_full(b).map(|f| f.rec)
}

/// `ids` as a BSON array of Int32.
fn int32_array(ids: &[i32]) -> bson::RawArrayBuf {
    let mut a = bson::RawArrayBuf::new();
    for i in ids {
        a.push(*i);
    }
    a
}

fn read_full(r: &dyn Read, lsid: &Lsid) -> Result<Option<FullRecord>> {
    match r.get(CATALOG_SPACE, &session_key(lsid))? {
        Some(b) => parse_full(&b).map(Some),
        None => Ok(None),
    }
}

/// The session record of `lsid` as `r` sees it.
pub fn read_record(r: &dyn Read, lsid: &Lsid) -> Result<Option<SessionRecord>> {
    Ok(read_full(r, lsid)?.map(|f| f.rec))
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
        let before = read_full(&*self.tx, lsid)?;
        let rec = before.as_ref().map(|b| b.rec);
        self.advance_session_record(lsid, before, txn, committed, None)?;
        Ok(rec)
    }

    /// Deletes the statement records of transaction `txn` (of every number when `None`) by a
    /// scan of their prefix. Only the recorded number has live statements (each advance
    /// deletes the previous ones), so callers name it: a prefix over the whole session would
    /// wade through the tombstones of every earlier statement.
    fn delete_statements(&mut self, lsid: &Lsid, txn: Option<i64>) -> Result<()> {
        let keys: Vec<Vec<u8>> = self
            .tx
            .prefix(CATALOG_SPACE, &txn_prefix(lsid, txn))?
            .map(|kv| kv.map(|(k, _)| k.to_vec()))
            .collect::<std::result::Result<_, _>>()?;
        for k in keys {
            self.tx.delete(CATALOG_SPACE, &k)?;
        }
        Ok(())
    }

    /// Deletes the statement keys of `before`'s transaction number when `txn` is another
    /// one, then writes the session record `{txn, committed, listed}`.
    fn advance_session_record(
        &mut self,
        lsid: &Lsid,
        before: Option<FullRecord>,
        txn: i64,
        committed: bool,
        listed: Option<&[i32]>,
    ) -> Result<()> {
        if let Some(b) = before
            && b.rec.txn_number != txn
        {
            match b.listed {
                Some(firsts) => {
                    for first in firsts {
                        self.tx
                            .delete(CATALOG_SPACE, &stmt_key(lsid, b.rec.txn_number, first))?;
                    }
                }
                None => self.delete_statements(lsid, Some(b.rec.txn_number))?,
            }
        }
        self.write_session_record(lsid, txn, committed, listed)
    }

    /// Writes the session record `{txnNumber: txn, committed, lastUse: now, stmts?: listed}`.
    fn write_session_record(
        &mut self,
        lsid: &Lsid,
        txn: i64,
        committed: bool,
        listed: Option<&[i32]>,
    ) -> Result<()> {
        let mut rec = RawDocumentBuf::new();
        rec.append(cstr!("txnNumber"), txn);
        rec.append(cstr!("committed"), committed);
        rec.append(cstr!("lastUse"), bson::DateTime::now());
        if let Some(firsts) = listed {
            rec.append(cstr!("stmts"), int32_array(firsts));
        }
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
        let before = read_full(&*self.tx, lsid)?;
        let key = stmt_key(lsid, txn, *first);
        match before {
            Some(b) if b.rec.txn_number == txn && !b.rec.committed => {
                // Another record of the same number: list its key too, unless the list was
                // already given up (then the next advance scans).
                if let Some(mut listed) = b.listed {
                    listed.push(*first);
                    let listed = (listed.len() <= MAX_LISTED).then_some(listed);
                    self.write_session_record(lsid, txn, false, listed.as_deref())?;
                }
            }
            before => self.advance_session_record(lsid, before, txn, false, Some(&[*first]))?,
        }
        let mut rec = RawDocumentBuf::new();
        rec.append(cstr!("s"), int32_array(stmts));
        rec.append(cstr!("r"), result.to_owned());
        self.tx.put(CATALOG_SPACE, &key, rec.as_bytes())?;
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
            tx.delete_statements(lsid, number)?;
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

    /// Statement keys of the whole session, in key order.
    fn stmt_keys(s: &Store, lsid: &Lsid) -> Vec<Vec<u8>> {
        let r = s.read().unwrap();
        r.snapshot()
            .prefix(CATALOG_SPACE, &txn_prefix(lsid, None))
            .unwrap()
            .map(|kv| kv.unwrap().0.to_vec())
            .collect()
    }

    #[test]
    fn listed_and_scanned_statements_are_both_superseded() {
        // Each shape of session record before an advance: listed keys (one record, several,
        // one more than the list holds), a record without a list (an older data directory,
        // written here as one), and a committed transaction's record.
        for records in [1usize, 3, MAX_LISTED, MAX_LISTED + 1] {
            let s = store();
            let lsid = [9u8; 16];
            s.write(Durability::Buffered, |tx| -> Result<()> {
                for r in 0..records {
                    tx.record_stmts(
                        &lsid,
                        5,
                        &[2 * r as i32, 2 * r as i32 + 1],
                        &bson::rawdoc! {},
                    )?;
                }
                Ok(())
            })
            .unwrap();
            assert_eq!(stmt_keys(&s, &lsid).len(), records);
            let r = s.read().unwrap();
            let listed = read_full(r.snapshot(), &lsid).unwrap().unwrap().listed;
            drop(r);
            let expect =
                (records <= MAX_LISTED).then(|| (0..records as i32).map(|r| 2 * r).collect());
            assert_eq!(listed, expect, "{records}");
            assert_eq!(s.executed_stmts(&lsid, 5).unwrap().len(), 2 * records);
            s.write(Durability::Buffered, |tx| -> Result<()> {
                tx.record_stmts(&lsid, 6, &[0], &bson::rawdoc! {"n": 1})
            })
            .unwrap();
            assert_eq!(
                stmt_keys(&s, &lsid),
                vec![stmt_key(&lsid, 6, 0)],
                "{records}"
            );
        }
        let s = store();
        let lsid = [10u8; 16];
        s.write(Durability::Buffered, |tx| -> Result<()> {
            tx.record_stmts(&lsid, 1, &[0], &bson::rawdoc! {})?;
            tx.record_stmts(&lsid, 1, &[1], &bson::rawdoc! {})?;
            // The record as an older data directory has it: no list.
            let mut rec = RawDocumentBuf::new();
            rec.append(cstr!("txnNumber"), 1i64);
            rec.append(cstr!("committed"), false);
            rec.append(cstr!("lastUse"), bson::DateTime::now());
            tx.tx
                .put(CATALOG_SPACE, &session_key(&lsid), rec.as_bytes())?;
            tx.record_stmts(&lsid, 1, &[2], &bson::rawdoc! {})
        })
        .unwrap();
        assert_eq!(stmt_keys(&s, &lsid).len(), 3);
        s.write(Durability::Buffered, |tx| -> Result<()> {
            tx.record_stmts(&lsid, 2, &[0], &bson::rawdoc! {})?;
            tx.set_session_record(&lsid, 3, true)?;
            Ok(())
        })
        .unwrap();
        assert!(stmt_keys(&s, &lsid).is_empty());
        s.write(Durability::Buffered, |tx| -> Result<()> {
            tx.record_stmts(&lsid, 4, &[7], &bson::rawdoc! {})
        })
        .unwrap();
        assert_eq!(stmt_keys(&s, &lsid), vec![stmt_key(&lsid, 4, 7)]);
    }
}
