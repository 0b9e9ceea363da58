//! Running storage work off the async runtime.
//!
//! Storage calls block (disk I/O, fsync, lock waits), so every one of them goes through
//! [`run`], which moves it to tokio's blocking pool. Invariant: no storage call runs on a
//! runtime worker thread, and no lock is held across the `.await` here (the closure owns
//! everything it needs).

use crate::error::{CommandError, ErrorCode};

/// Runs `f` on the blocking pool and returns its result.
pub async fn run<T, F>(f: F) -> Result<T, CommandError>
where
    F: FnOnce() -> Result<T, CommandError> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(CommandError::new(
            ErrorCode::InternalError,
            format!("storage task failed: {e}"),
        )),
    }
}
