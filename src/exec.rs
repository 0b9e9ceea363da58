//! Executing write statements that act on matching documents (update, delete,
//! findAndModify).
//!
//! [`for_each_match`] finds the documents a filter matches and hands each to a callback
//! *inside a storage write transaction*, so the document the callback sees is the one it
//! changes (serializable: a concurrent change to it makes the transaction conflict and
//! rerun). A filter that is exactly `{_id: v}` is a point read; anything else is a scan in
//! `_id` order. A multi-document statement runs as several transactions of up to
//! [`CHUNK`] documents, each document changing atomically, as MongoDB does outside
//! multi-document transactions. Because the scan goes in `_id` order and `_id` never
//! changes, no document is visited twice (no Halloween problem).
//!
//! Invariant: runs on a blocking thread (see [`crate::blocking`]).

use std::sync::Arc;

use bson::{RawDocument, RawDocumentBuf};
use cairn_query::error::QueryError;
use cairn_query::filter::Filter;
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::store::id_key;
use cairn_storage::{Durability, ScanLimits, StorageError, Store, WriteTxn};

use crate::error::CommandError;

/// A scan predicate for `filter`: whether `doc` matches; the first evaluation error (e.g.
/// `$expr` dividing by zero) goes to `failed`, and nothing matches after it, so the caller
/// can fail the statement once the scan returns.
pub fn try_match(filter: &Filter, doc: &RawDocument, failed: &mut Option<QueryError>) -> bool {
    if failed.is_some() {
        return false;
    }
    match filter.try_matches(doc) {
        Ok(m) => m,
        Err(e) => {
            *failed = Some(e);
            false
        }
    }
}

/// Documents per transaction for multi-document statements.
pub const CHUNK: usize = 100;

/// What the callback decides for a matched document.
pub enum Step {
    /// Keep going.
    Continue,
    /// Stop after this document.
    Stop,
}

/// Calls `f` for each document of `db.coll` matching `filter` (at most one when
/// `just_one`), each inside a write transaction. Returns how many documents were visited.
/// `f` gets the transaction, the collection, the document key and the document; its
/// effects in one chunk commit together. A missing collection matches nothing.
pub fn for_each_match<F>(
    store: &Store,
    db: &str,
    coll: &str,
    filter: &Filter,
    durability: Durability,
    just_one: bool,
    mut f: F,
) -> Result<usize, CommandError>
where
    F: FnMut(
        &mut WriteTxn<'_>,
        &Arc<CollectionMeta>,
        &[u8],
        &RawDocument,
    ) -> Result<Step, CommandError>,
{
    if let Some(id) = filter.id_equality() {
        let n = store.write(durability, |tx| -> Result<usize, CommandError> {
            let Some(meta) = tx.collection(db, coll)? else {
                return Ok(0);
            };
            let key = id_key(id.as_raw_bson_ref())?;
            let Some(doc) = tx.get_by_key(&meta, &key)? else {
                return Ok(0);
            };
            f(tx, &meta, &key, &doc)?;
            Ok(1)
        })?;
        return Ok(n);
    }
    let mut resume: Option<Vec<u8>> = None;
    let mut total = 0usize;
    loop {
        crate::deadline::check()?;
        let (visited, next, stop) = store.write(durability, |tx| -> Result<_, CommandError> {
            let Some(meta) = tx.collection(db, coll)? else {
                return Ok((0, None, true));
            };
            let limits = ScanLimits {
                max_docs: if just_one { 1 } else { CHUNK },
                max_bytes: usize::MAX,
                max_examined: 10_000,
                first_may_exceed: true,
            };
            let mut failed = None;
            let batch = tx.scan_where(&meta, resume.as_deref(), false, limits, &mut |d| {
                try_match(filter, d, &mut failed)
            })?;
            if let Some(e) = failed {
                return Err(e.into());
            }
            let mut visited = 0;
            let mut stop = false;
            for doc in &batch.docs {
                let key =
                    id_key(doc.get("_id").ok().flatten().ok_or_else(|| {
                        StorageError::Corrupt("stored document without _id".into())
                    })?)?;
                visited += 1;
                if let Step::Stop = f(tx, &meta, &key, doc)? {
                    stop = true;
                    break;
                }
            }
            Ok((visited, batch.resume, stop))
        })?;
        total += visited;
        if stop || (just_one && total > 0) {
            return Ok(total);
        }
        match next {
            Some(r) => resume = Some(r),
            None => return Ok(total),
        }
    }
}

/// Reads every document of `db.coll` matching `filter` in `_id` order (a snapshot scan),
/// passing each to `f` until it returns false.
pub fn scan_matching(
    store: &Store,
    db: &str,
    coll: &str,
    filter: &Filter,
    mut f: impl FnMut(RawDocumentBuf) -> Result<bool, CommandError>,
) -> Result<(), CommandError> {
    let Some(meta) = store.collection(db, coll) else {
        return Ok(());
    };
    if let Some(id) = filter.id_equality() {
        if let Some(doc) = store.read()?.get(&meta, id.as_raw_bson_ref())? {
            f(doc)?;
        }
        return Ok(());
    }
    let read = store.read()?;
    let mut resume: Option<Vec<u8>> = None;
    loop {
        crate::deadline::check()?;
        let limits = ScanLimits {
            max_docs: 1000,
            max_bytes: 16 * 1024 * 1024,
            max_examined: 10_000,
            first_may_exceed: true,
        };
        let mut failed = None;
        let batch = read.scan_where(&meta, resume.as_deref(), false, limits, &mut |d| {
            try_match(filter, d, &mut failed)
        })?;
        if let Some(e) = failed {
            return Err(e.into());
        }
        for doc in batch.docs {
            if !f(doc)? {
                return Ok(());
            }
        }
        match batch.resume {
            Some(r) => resume = Some(r),
            None => return Ok(()),
        }
    }
}
