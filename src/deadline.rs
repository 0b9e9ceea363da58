//! Interruption: `maxTimeMS` deadlines and `killOp`, checked cooperatively.
//!
//! The dispatcher validates `maxTimeMS` and runs the command inside [`scope_with`], giving it
//! an [`Interrupt`]: the deadline and the running operation ([`crate::ops::Operation`], which
//! `killOp` marks killed). The context travels as a task-local through the async part and,
//! via [`crate::blocking::run`], as a thread-local through the storage work, where scan loops
//! call [`check`] between batches. [`check`] fails with Interrupted (11601) once the operation
//! was killed, and with MaxTimeMSExpired (50) past the deadline (or at once, while the
//! `maxTimeAlwaysTimeOut` fail point is on, for an operation that has a deadline), as
//! MongoDB's interrupt checks do; [`sleep`] waits and checks. Invariant: a command without
//! `maxTimeMS` (or with 0) has no deadline, and checking costs one thread-local read and one
//! atomic load.

use std::cell::RefCell;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::RawBsonRef;

use crate::error::{CommandError, ErrorCode};
use crate::ops::Operation;

/// What can interrupt the running command.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    /// The `maxTimeMS` deadline.
    pub deadline: Option<Instant>,
    /// The operation, which `killOp` can mark killed.
    pub op: Option<Arc<Operation>>,
}

tokio::task_local! {
    static CONTEXT: Interrupt;
}

thread_local! {
    static CURRENT: RefCell<Option<Interrupt>> = const { RefCell::new(None) };
}

/// Parses the generic `maxTimeMS` argument: absent or 0 means no limit.
pub fn parse<'a>(body: impl crate::commands::Args<'a>) -> Result<Option<Instant>, CommandError> {
    let ms = match body.arg("maxTimeMS") {
        Ok(None) | Ok(Some(RawBsonRef::Null)) => return Ok(None),
        Ok(Some(RawBsonRef::Int32(i))) => i64::from(i),
        Ok(Some(RawBsonRef::Int64(i))) => i,
        Ok(Some(RawBsonRef::Double(d))) => {
            if d.fract() != 0.0 {
                return Err(CommandError::bad_value("maxTimeMS has non-integral value"));
            }
            d as i64
        }
        Ok(Some(RawBsonRef::Decimal128(d))) => {
            let f: f64 = d.to_string().parse().unwrap_or(f64::NAN);
            if f.fract() != 0.0 {
                return Err(CommandError::bad_value("maxTimeMS has non-integral value"));
            }
            f as i64
        }
        Ok(Some(_)) => return Err(CommandError::bad_value("maxTimeMS must be a number")),
        Err(e) => return Err(e),
    };
    if !(0..=i64::from(i32::MAX)).contains(&ms) {
        return Err(CommandError::bad_value(format!(
            "{ms} value for maxTimeMS is out of range [0, 2147483647]"
        )));
    }
    Ok((ms > 0).then(|| Instant::now() + Duration::from_millis(ms as u64)))
}

/// Runs `fut` with `ctx` in force.
pub async fn scope_with<F: Future>(ctx: Interrupt, fut: F) -> F::Output {
    CONTEXT.scope(ctx, fut).await
}

/// Runs `fut` with `deadline` in force, in the enclosing operation (which `killOp` can still
/// interrupt).
pub async fn scope<F: Future>(deadline: Option<Instant>, fut: F) -> F::Output {
    let op = context().op;
    CONTEXT.scope(Interrupt { deadline, op }, fut).await
}

/// The deadline of the running command, from the async side.
pub fn current() -> Option<Instant> {
    CONTEXT.try_with(|c| c.deadline).ok().flatten()
}

/// The running command's interruption context (thread-local inside storage work, else the
/// task's).
pub fn context() -> Interrupt {
    CURRENT
        .with(|c| c.borrow().clone())
        .or_else(|| CONTEXT.try_with(Interrupt::clone).ok())
        .unwrap_or_default()
}

/// Sets the thread's context for the duration of `f` (used by the blocking bridge).
pub fn with_thread_context<T>(ctx: Interrupt, f: impl FnOnce() -> T) -> T {
    let previous = CURRENT.with(|c| c.replace(Some(ctx)));
    let out = f();
    CURRENT.with(|c| *c.borrow_mut() = previous);
    out
}

/// Sets the thread's deadline for the duration of `f`, in the current operation.
pub fn with_thread_deadline<T>(deadline: Option<Instant>, f: impl FnOnce() -> T) -> T {
    let op = context().op;
    with_thread_context(Interrupt { deadline, op }, f)
}

fn evaluate(ctx: &Interrupt) -> Result<(), CommandError> {
    if let Some(op) = &ctx.op
        && op.is_killed()
    {
        return Err(CommandError::new(
            ErrorCode::Interrupted,
            "operation was interrupted",
        ));
    }
    if let Some(d) = ctx.deadline
        && (Instant::now() >= d
            || crate::failpoint::get("maxTimeAlwaysTimeOut")
                .is_some_and(|fp| fp.evaluate(|_| true).is_some()))
    {
        return Err(CommandError::new(
            ErrorCode::MaxTimeMSExpired,
            "operation exceeded time limit",
        ));
    }
    Ok(())
}

/// Fails with Interrupted when the running operation was killed, with MaxTimeMSExpired when
/// its deadline has passed.
pub fn check() -> Result<(), CommandError> {
    let on_thread = CURRENT.with(|c| c.borrow().as_ref().map(evaluate));
    match on_thread {
        Some(r) => r,
        None => CONTEXT.try_with(evaluate).unwrap_or(Ok(())),
    }
}

/// Sleeps for `d` unless the operation is interrupted first (then fails as [`check`] does).
pub async fn sleep(d: Duration) -> Result<(), CommandError> {
    let end = Instant::now() + d;
    loop {
        check()?;
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        let mut step = (end - now).min(Duration::from_millis(20));
        if let Some(deadline) = current() {
            step = step.min(deadline.saturating_duration_since(now));
        }
        tokio::time::sleep(step).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn parsing() {
        assert_eq!(parse(&rawdoc! {}).unwrap(), None);
        assert_eq!(parse(&rawdoc! {"maxTimeMS": 0}).unwrap(), None);
        assert!(parse(&rawdoc! {"maxTimeMS": 10}).unwrap().is_some());
        assert_eq!(
            parse(&rawdoc! {"maxTimeMS": -1}).unwrap_err().code.code(),
            2
        );
        assert_eq!(
            parse(&rawdoc! {"maxTimeMS": 1.5}).unwrap_err().code.code(),
            2
        );
        assert_eq!(
            parse(&rawdoc! {"maxTimeMS": 3_000_000_000_i64})
                .unwrap_err()
                .code
                .code(),
            2
        );
    }

    #[test]
    fn thread_deadline_expires() {
        with_thread_deadline(Some(Instant::now()), || {
            assert_eq!(check().unwrap_err().code.code(), 50);
        });
        assert!(check().is_ok());
    }
}
