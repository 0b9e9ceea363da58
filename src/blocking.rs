//! Running storage work without blocking the async runtime.
//!
//! Storage calls block (disk I/O, fsync, lock waits), so every one goes through [`run`] —
//! or, when it is known to be a handful of key reads, [`run_short`].
//!
//! [`run`]: on the multi-threaded runtime it uses `tokio::task::block_in_place`: the calling
//! worker hands its queue of other tasks to another thread and then runs the storage call
//! itself, so the runtime keeps serving other connections while this request pays no
//! thread hop to the blocking pool (measured: a blocking-pool hop cost ~100 µs per point
//! read on a 2-core VM, mostly wakeups). Elsewhere (a current-thread runtime, e.g. in some
//! tests) it falls back to the blocking pool.
//!
//! [`run_short`]: the hand-over itself wakes a thread and moves the scheduler to it (in a
//! `perf` profile of `find` by `_id`, futex waits/wakes and the blocking pool's thread loop
//! were ~20 % and ~17 % of the server's samples). For work bounded to a few key reads — a
//! point read by `_id` is one `get` on the LSM — that costs more than the work, so
//! `run_short` runs it inline on the worker. Measured on the shared 2-core VM (load ~11 from
//! other tenants, 100k documents, warm cache): server CPU per `find` by `_id` 90–110 µs
//! inline vs 120–152 µs through `block_in_place` with 1 client, 68–73 vs 89–93 µs with 16.
//! (With 16 clients the inline server then had fewer runnable threads and got a smaller
//! share of the contended CPUs, so its throughput there was lower; on an idle machine the
//! CPU per operation is what bounds it.)
//!
//! Single-document writes by `_id` (an update, delete or findAndModify by `_id`, an insert of
//! one document) are short too when [`short_write`] holds: the collection exists (creating
//! one is DDL) and the write concern does not wait for the journal's fsync — what remains is
//! the document's keys, its index entries, one change-log entry, a retryable-write record, and
//! the journal append under the commit lock. Measured like the reads (`$inc` by `_id`, 8
//! clients, together with parsing each command once): server CPU per operation 216 → 156 µs,
//! context switches per operation 3.5 → 0.45. A write with `j: true` (or under `--sync`)
//! waits for a group fsync and keeps using `run`.
//!
//! Invariant: only work with a small, fixed bound (a few keys, no scans, no fsync waits) goes
//! through `run_short`, or work that calls [`escalate`] before any unbounded part, or work
//! under a [`ReadBudget`] ([`run_budgeted`]); everything else uses `run`. Inline work runs
//! inside `cairn_storage::store::run_inline`, so a write conflict's rerun yields the worker
//! instead of sleeping on it. No lock is held across the `.await` in `run`.
//!
//! [`escalate`]: work that starts short and may turn out long — a `find` with a small
//! `limit` whose plan is only known once chosen — starts inline through [`run_short`] and,
//! once it knows the rest is unbounded (a residual filter, a blocking sort, a plan race), runs
//! that rest through `escalate`: `block_in_place` on a runtime worker, so the worker's other
//! tasks move to another thread before the long part starts, exactly as [`run`] would have
//! done up front; on a thread that is not a runtime worker it just runs it.
//!
//! [`run_budgeted`]: work whose size is known only as it runs — an aggregate, whose `$group`
//! drains its whole input on the first pull — starts inline with its reads counted against a
//! [`ReadBudget`] of [`INLINE_READS`] index entries and documents (each read goes through
//! [`ReadBudget::source`], which bounds every storage call by what is left and never lends the
//! snapshot to a read-ahead thread). Small work finishes inline; work that reaches the budget
//! fails its next read, its outcome is thrown away whatever it was, and it reruns from the
//! start through [`escalate`]. The work wasted is bounded by the budget; the attempt must
//! have no effect visible outside itself until it knows the budget held (no writes, no cursor
//! registered, the work it reports to the operation held back). The rerun reads the same
//! data the attempt would have: a snapshot read or a transaction rereads its own snapshot; a
//! plain read takes a fresh one (the attempt returned nothing, so the command is simply
//! answered as of the later snapshot). CPU that is not bounded by reads — stages that make
//! documents without reading, sub-pipelines, writes — is kept out by the caller (see
//! `crate::commands::aggregate`'s stage list). Measured on the shared 2-core VM (`$match` on
//! an indexed field, 100 documents, then `$group`; 100k documents, 8 clients; seven to eight
//! runs each, medians): server CPU per aggregate 157 → 139 µs, context switches per aggregate
//! 2.4–3.2 → 0.5–0.95; user-space instructions are unchanged (callgrind, ~553k → ~557k: the
//! hand-off's cost is in the kernel). An aggregate over all 100k documents, which trips the
//! budget, used 49–50 ms of CPU against 52–53 ms before.

use std::ops::Bound;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bson::{RawDocument, RawDocumentBuf};
use cairn_query::plan::Source;
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::engine::EngineError;
use cairn_storage::index::IndexMeta;
use cairn_storage::index_ops::{IndexHit, KeyRange};
use cairn_storage::{Durability, ScanBatch, ScanLimits, StorageError, Store};
use tokio::runtime::{Handle, RuntimeFlavor};

use crate::error::{CommandError, ErrorCode};

/// Runs `f` off the async scheduler and returns its result.
pub async fn run<T, F>(f: F) -> Result<T, CommandError>
where
    F: FnOnce() -> Result<T, CommandError> + Send + 'static,
    T: Send + 'static,
{
    let ctx = crate::deadline::context();
    let f = move || crate::deadline::with_thread_context(ctx, f);
    if Handle::current().runtime_flavor() == RuntimeFlavor::MultiThread {
        return tokio::task::block_in_place(f);
    }
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(CommandError::new(
            ErrorCode::InternalError,
            format!("storage task failed: {e}"),
        )),
    }
}

/// Runs `f` — the long remainder of work that began inline through [`run_short`] — off the
/// async scheduler: through `block_in_place` when called on a multi-threaded runtime's
/// worker (no longer inline there: a write conflict's rerun may sleep again,
/// `cairn_storage::store::run_blocking`), directly elsewhere (a blocking thread, a
/// current-thread runtime, no runtime).
pub fn escalate<R>(f: impl FnOnce() -> R) -> R {
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| cairn_storage::store::run_blocking(f))
        }
        _ => f(),
    }
}

/// Whether a write to one document of `db.coll` may run inline through [`run_short`]: the
/// collection exists (creating one is DDL that writes files) and the write concern does not
/// wait for the journal's fsync ([`Store::waits_for_sync`]); what is left is a few keys read
/// and written and one journal append.
pub fn short_write(store: &Store, db: &str, coll: &str, durability: Durability) -> bool {
    !store.waits_for_sync(durability) && store.collection(db, coll).is_some()
}

/// Runs `f`, storage work bounded to a few key reads, inline when `short` (see the module
/// docs), else as [`run`] does.
pub async fn run_short<T, F>(short: bool, f: F) -> Result<T, CommandError>
where
    F: FnOnce() -> Result<T, CommandError> + Send + 'static,
    T: Send + 'static,
{
    if short {
        let ctx = crate::deadline::context();
        return cairn_storage::store::run_inline(|| crate::deadline::with_thread_context(ctx, f));
    }
    run(f).await
}

/// Storage reads (index entries plus documents) work started through [`run_budgeted`] may
/// make on the runtime worker before it moves off: room for a default first batch (101
/// results, each an index entry and a document) with margin for entries a filter rejects.
/// `$match` on an indexed field matching 100 documents then `$group` reads 200 and stays
/// inline. The cost of a trip is the attempt's reads done twice: measured with the budget set
/// to 150 (that aggregate then trips after its index scan), server CPU per aggregate was
/// within the noise of moving off the worker up front (207–214 vs 169–213 µs, against
/// 140–163 µs inline); the worst case, an aggregate just over the budget, pays its first
/// 512 reads twice (roughly doubling its cost), one over 100k documents ~0.5 %.
pub const INLINE_READS: usize = 512;

/// The inline read budget: [`INLINE_READS`], or `CAIRN_INLINE_READS` when set (an
/// undocumented override for tests, read once).
pub fn inline_reads() -> usize {
    static READS: OnceLock<usize> = OnceLock::new();
    *READS.get_or_init(|| {
        std::env::var("CAIRN_INLINE_READS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(INLINE_READS)
    })
}

/// A budget of storage reads for an inline attempt ([`run_budgeted`]). Reads through
/// [`ReadBudget::source`] count against it; the read that would exceed it fails instead (and
/// so does every later one), and the budget stays *tripped*: the attempt's outcome, whatever
/// it is, is then thrown away and the work reruns off the worker.
#[derive(Debug)]
pub struct ReadBudget {
    left: AtomicUsize,
    tripped: AtomicBool,
}

impl ReadBudget {
    /// A budget of `reads` index entries and documents.
    pub fn new(reads: usize) -> ReadBudget {
        ReadBudget {
            left: AtomicUsize::new(reads),
            tripped: AtomicBool::new(false),
        }
    }

    /// Whether a read went over the budget.
    pub fn tripped(&self) -> bool {
        self.tripped.load(Ordering::Relaxed)
    }

    /// The error every read fails with once the budget is tripped (never seen by a client:
    /// the attempt is rerun).
    pub fn error() -> StorageError {
        StorageError::Engine(EngineError::Io("inline read budget exhausted".into()))
    }

    /// How many more reads a call may make: what is left plus one, so a call that reads up
    /// to its bound certainly goes over it (a bounded call is never cut short by the
    /// budget without tripping it).
    fn bound(&self) -> Result<usize, StorageError> {
        if self.tripped() {
            return Err(Self::error());
        }
        Ok(self.left.load(Ordering::Relaxed).saturating_add(1))
    }

    /// Counts `n` reads; trips (and fails) when that is more than what is left.
    fn take(&self, n: usize) -> Result<(), StorageError> {
        let left = self.left.load(Ordering::Relaxed);
        if self.tripped() || n > left {
            self.tripped.store(true, Ordering::Relaxed);
            return Err(Self::error());
        }
        self.left.store(left - n, Ordering::Relaxed);
        Ok(())
    }

    /// `inner` with its reads counted against this budget. It is never shared with a
    /// read-ahead thread ([`Source::shared`] is `None`): every read happens on this thread,
    /// and counts.
    pub fn source<'a>(&'a self, inner: &'a dyn Source) -> Budgeted<'a> {
        Budgeted {
            inner,
            budget: self,
        }
    }
}

/// A [`Source`] whose reads count against a [`ReadBudget`]: each call is bounded by what is
/// left (a scan's `max_examined`, an index scan's `limit`), and fails once over it.
pub struct Budgeted<'a> {
    inner: &'a dyn Source,
    budget: &'a ReadBudget,
}

impl Source for Budgeted<'_> {
    fn scan_range(
        &self,
        coll: &CollectionMeta,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        resume: Option<&[u8]>,
        reverse: bool,
        limits: ScanLimits,
        pred: &mut dyn FnMut(&RawDocument) -> bool,
    ) -> Result<ScanBatch, StorageError> {
        let bound = self.budget.bound()?;
        let limits = ScanLimits {
            max_examined: limits.max_examined.min(bound),
            ..limits
        };
        let batch = self
            .inner
            .scan_range(coll, range, resume, reverse, limits, pred)?;
        self.budget.take(batch.examined.max(batch.docs.len()))?;
        Ok(batch)
    }

    fn index_scan(
        &self,
        idx: &IndexMeta,
        ranges: &[KeyRange],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StorageError> {
        let limit = limit.min(self.budget.bound()?);
        let hits = self.inner.index_scan(idx, ranges, reverse, limit)?;
        self.budget.take(hits.len())?;
        Ok(hits)
    }

    fn get_by_key(
        &self,
        coll: &CollectionMeta,
        key: &[u8],
    ) -> Result<Option<RawDocumentBuf>, StorageError> {
        self.budget.take(1)?;
        self.inner.get_by_key(coll, key)
    }

    fn get_many_by_key(
        &self,
        coll: &CollectionMeta,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<RawDocumentBuf>>, StorageError> {
        self.budget.take(keys.len())?;
        self.inner.get_many_by_key(coll, keys)
    }
}

/// Runs `f`, work whose size is known only as it runs, inline on the worker under a
/// [`ReadBudget`] of [`inline_reads`]: `f(Some(budget))` must read only through
/// [`ReadBudget::source`] and make no change visible outside itself (no write, no cursor
/// registered, no operation statistics) until it has checked the budget is not tripped.
/// When the budget trips — whatever `f` returned, so an error swallowed on the way cannot
/// yield a wrong result — `f(None)` reruns the work through [`escalate`].
pub async fn run_budgeted<T, F>(mut f: F) -> Result<T, CommandError>
where
    F: FnMut(Option<&ReadBudget>) -> Result<T, CommandError> + Send + 'static,
    T: Send + 'static,
{
    run_short(true, move || {
        let budget = ReadBudget::new(inline_reads());
        let out = f(Some(&budget));
        if !budget.tripped() {
            return out;
        }
        drop(out);
        escalate(|| f(None))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call may read one more than what is left (so reaching its bound trips the budget);
    /// the read past the budget fails and every later one too.
    #[test]
    fn budget_bounds_calls_and_stays_tripped() {
        let b = ReadBudget::new(3);
        assert_eq!(b.bound().unwrap(), 4);
        b.take(2).unwrap();
        assert_eq!(b.bound().unwrap(), 2);
        b.take(1).unwrap();
        assert_eq!(b.bound().unwrap(), 1);
        assert!(!b.tripped());
        assert!(b.take(1).is_err());
        assert!(b.tripped());
        assert!(b.bound().is_err());
        assert!(b.take(0).is_err());
        let b = ReadBudget::new(0);
        assert!(b.take(0).is_ok());
        assert!(b.take(1).is_err() && b.tripped());
    }
}
