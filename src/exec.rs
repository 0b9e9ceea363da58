//! Running statements over the documents a filter matches, through the query planner
//! ([`cairn_query::plan`]): reads ([`scan_matching`], [`count_matching`]) and writes
//! ([`for_each_match`]: update, delete).
//!
//! A write statement chooses its plan on a snapshot (an update never scans an index over a
//! field it changes), then runs it in write transactions of up to [`CHUNK`] documents: each
//! chunk advances a copy of the plan's execution inside the transaction, so the document the
//! callback sees is the one it changes (a concurrent change makes the transaction conflict
//! and rerun from the same position), and the copy is kept only when the chunk commits.
//! Each document changes atomically, as MongoDB does outside multi-document transactions.
//! A filter that is exactly `{_id: v}` (and no hint) is a point read.
//!
//! Every function takes the command's [`Target`]: outside a transaction the chunks are their
//! own storage transactions as described; inside a multi-document transaction the plan is
//! chosen on the transaction's view (which sees the collections and documents the
//! transaction created) and every chunk runs in the transaction itself.
//!
//! Invariant: runs on a blocking thread (see [`crate::blocking`]); the deadline
//! (`maxTimeMS`) is checked between chunks.

use std::sync::Arc;

use bson::{RawDocument, RawDocumentBuf};
use cairn_query::filter::Filter;
use cairn_query::plan::{Execution, Hint, Modifies, Query, choose};
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::store::id_key;
use cairn_storage::{Durability, StorageError, WriteTxn};

use crate::error::CommandError;
use crate::session::target::Target;
use crate::state::ServerState;

/// Documents per transaction for multi-document statements.
pub const CHUNK: usize = 100;

/// Work (keys plus documents examined) per storage call.
const BUDGET: u64 = 10_000;

/// What the callback decides for a matched document.
pub enum Step {
    /// Keep going.
    Continue,
    /// Stop after this document.
    Stop,
}

/// Visits of [`for_each_match`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Visited {
    /// Documents handed to the callback (and committed).
    pub matched: usize,
    /// Of those, the ones the callback counted (e.g. modified).
    pub counted: usize,
}

fn ns(db: &str, coll: &str) -> String {
    cairn_query::plan::namespace(db, coll)
}

/// Calls `f` for each document of `db.coll` matching `filter` (at most one when
/// `just_one`), each inside a write transaction; `f` returns whether to go on and whether to
/// count the document. `f` gets the transaction, the collection, the document key and the
/// document; its effects in one chunk commit together, and it may run again for the same
/// documents when the chunk's transaction reruns (only committed visits are counted). A
/// missing collection matches nothing.
#[allow(clippy::too_many_arguments)]
pub fn for_each_match<F>(
    server: &ServerState,
    target: &Target,
    db: &str,
    coll: &str,
    filter: &Arc<Filter>,
    hint: &Hint,
    modifies: Option<&Modifies>,
    durability: Durability,
    just_one: bool,
    mut f: F,
) -> Result<Visited, CommandError>
where
    F: FnMut(
        &mut WriteTxn<'_>,
        &Arc<CollectionMeta>,
        &[u8],
        &RawDocument,
    ) -> Result<(Step, bool), CommandError>,
{
    let store = &server.store;
    if let (Some(id), Hint::None) = (filter.id_equality(), hint) {
        return target.write(store, durability, |tx| -> Result<Visited, CommandError> {
            let Some(meta) = tx.collection(db, coll)? else {
                return Ok(Visited::default());
            };
            let key = id_key(id.as_raw_bson_ref())?;
            crate::ops::record_plan("IDHACK".into());
            let Some(doc) = tx.get_by_key(&meta, &key)? else {
                return Ok(Visited::default());
            };
            crate::ops::record_work(1, 1);
            let (_, counted) = f(tx, &meta, &key, &doc)?;
            Ok(Visited {
                matched: 1,
                counted: usize::from(counted),
            })
        });
    }
    let plan = target.read(store, |view| {
        let Some(meta) = view.collection(db, coll)? else {
            return Ok(None);
        };
        let mut q = Query::new(filter, hint);
        q.modifies = modifies;
        Ok(Some(
            choose(
                Some(&server.plan_cache),
                &ns(db, coll),
                &meta,
                &q,
                filter,
                view.source(),
                false,
            )?
            .exec
            .plan()
            .clone(),
        ))
    })?;
    let Some(plan) = plan else {
        return Ok(Visited::default());
    };
    crate::ops::record_chosen_plan(&plan);
    let mut exec = Execution::new(plan, filter.clone(), false);
    let mut recorded = (0, 0);
    let mut record = |e: &Execution| {
        let now = (e.stats.keys_examined, e.stats.docs_examined);
        crate::ops::record_work(now.0 - recorded.0, now.1 - recorded.1);
        recorded = now;
    };
    let mut total = Visited::default();
    loop {
        crate::deadline::check()?;
        let base = &exec;
        let (next, visited, stop) =
            target.write(store, durability, |tx| -> Result<_, CommandError> {
                let Some(meta) = tx.collection(db, coll)? else {
                    return Ok((None, Visited::default(), true));
                };
                let mut e = base.clone();
                let docs = e.next(
                    tx,
                    &meta,
                    if just_one { 1 } else { CHUNK },
                    usize::MAX,
                    BUDGET,
                )?;
                let mut visited = Visited::default();
                let mut stop = false;
                for doc in &docs {
                    let key = id_key(doc.get("_id").ok().flatten().ok_or_else(|| {
                        StorageError::Corrupt("stored document without _id".into())
                    })?)?;
                    visited.matched += 1;
                    let (step, counted) = f(tx, &meta, &key, doc)?;
                    visited.counted += usize::from(counted);
                    if let Step::Stop = step {
                        stop = true;
                        break;
                    }
                }
                Ok((Some(e), visited, stop))
            })?;
        total.matched += visited.matched;
        total.counted += visited.counted;
        let Some(next) = next else {
            return Ok(total);
        };
        record(&next);
        exec = next;
        if stop || (just_one && total.matched > 0) || exec.is_exhausted() {
            return Ok(total);
        }
    }
}

/// Reads every document of `db.coll` matching `filter` in plan order (one snapshot),
/// passing each to `f` until it returns false.
pub fn scan_matching(
    server: &ServerState,
    target: &Target,
    db: &str,
    coll: &str,
    filter: &Arc<Filter>,
    hint: &Hint,
    mut f: impl FnMut(RawDocumentBuf) -> Result<bool, CommandError>,
) -> Result<(), CommandError> {
    target.read(&server.store, |view| {
        let Some(meta) = view.collection(db, coll)? else {
            return Ok(());
        };
        let read = view.source();
        let q = Query::new(filter, hint);
        let chosen = choose(
            Some(&server.plan_cache),
            &ns(db, coll),
            &meta,
            &q,
            filter,
            read,
            false,
        )?;
        for d in chosen.buffered {
            if !f(d)? {
                return Ok(());
            }
        }
        let mut exec = chosen.exec;
        crate::ops::record_chosen_plan(exec.plan());
        let result = (|| {
            while !exec.is_exhausted() {
                crate::deadline::check()?;
                for d in exec.next(read, &meta, 1000, 16 * 1024 * 1024, BUDGET)? {
                    if !f(d)? {
                        return Ok(());
                    }
                }
            }
            Ok(())
        })();
        crate::ops::record_work(exec.stats.keys_examined, exec.stats.docs_examined);
        result
    })
}

/// Counts the documents of `db.coll` matching `filter`, stopping once `cap` are found
/// (from index entries alone when the plan allows: COUNT_SCAN).
pub fn count_matching(
    server: &ServerState,
    target: &Target,
    db: &str,
    coll: &str,
    filter: &Arc<Filter>,
    hint: &Hint,
    cap: u64,
) -> Result<u64, CommandError> {
    target.read(&server.store, |view| {
        let Some(meta) = view.collection(db, coll)? else {
            return Ok(0);
        };
        let read = view.source();
        let mut q = Query::new(filter, hint);
        q.count = true;
        let chosen = choose(
            Some(&server.plan_cache),
            &ns(db, coll),
            &meta,
            &q,
            filter,
            read,
            true,
        )?;
        let mut exec = chosen.exec;
        crate::ops::record_chosen_plan(exec.plan());
        let result = (|| {
            while !exec.is_exhausted() && exec.stats.advanced < cap {
                crate::deadline::check()?;
                exec.count(read, &meta, BUDGET)?;
            }
            Ok(exec.stats.advanced.min(cap))
        })();
        crate::ops::record_work(exec.stats.keys_examined, exec.stats.docs_examined);
        result
    })
}
