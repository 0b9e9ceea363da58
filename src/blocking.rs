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
//! waits for a group fsync and keeps using `run`. Invariant: only work with a small, fixed
//! bound (a few keys, no scans, no fsync waits) goes through `run_short`, or work that
//! calls [`escalate`] before any unbounded part; everything else uses `run`. Inline work runs inside `cairn_storage::store::run_inline`, so a write
//! conflict's rerun yields the worker instead of sleeping on it.
//! No lock is held across the `.await` in `run`.
//!
//! [`escalate`]: work that starts short and may turn out long — a `find` with a small
//! `limit` whose plan is only known once chosen — starts inline through [`run_short`] and,
//! once it knows the rest is unbounded (a residual filter, a blocking sort, a plan race), runs
//! that rest through `escalate`: `block_in_place` on a runtime worker, so the worker's other
//! tasks move to another thread before the long part starts, exactly as [`run`] would have
//! done up front; on a thread that is not a runtime worker it just runs it.

use cairn_storage::{Durability, Store};
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
/// worker, directly elsewhere (a blocking thread, a current-thread runtime, no runtime).
pub fn escalate<R>(f: impl FnOnce() -> R) -> R {
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
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
