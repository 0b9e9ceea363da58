//! Running storage work without blocking the async runtime.
//!
//! Storage calls block (disk I/O, fsync, lock waits), so every one goes through [`run`].
//! On the multi-threaded runtime it uses `tokio::task::block_in_place`: the calling worker
//! hands its queue of other tasks to another thread and then runs the storage call itself,
//! so the runtime keeps serving other connections while this request pays no thread
//! hand-off (measured: a blocking-pool hop cost ~100 µs per point read on a 2-core VM,
//! mostly wakeups). Elsewhere (a current-thread runtime, e.g. in some tests) it falls back
//! to the blocking pool. Invariant: no storage call runs on a worker that still owns other
//! tasks, and no lock is held across the `.await` here.

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
