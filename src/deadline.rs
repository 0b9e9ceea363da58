//! `maxTimeMS`: a per-command deadline checked cooperatively.
//!
//! The dispatcher validates `maxTimeMS` and runs the command inside [`scope`]; the
//! deadline travels as a task-local through the async part and, via
//! [`crate::blocking::run`], as a thread-local through the storage work, where scan loops call
//! [`check`] between batches. Past the deadline, [`check`] fails with MaxTimeMSExpired (50),
//! as MongoDB's interrupt checks do. Invariant: a command without `maxTimeMS` (or with 0) has
//! no deadline, and checking costs one thread-local read.

use std::cell::Cell;
use std::future::Future;
use std::time::{Duration, Instant};

use bson::{RawBsonRef, RawDocument};

use crate::error::{CommandError, ErrorCode};

tokio::task_local! {
    static DEADLINE: Option<Instant>;
}

thread_local! {
    static CURRENT: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Parses the generic `maxTimeMS` argument: absent or 0 means no limit.
pub fn parse(body: &RawDocument) -> Result<Option<Instant>, CommandError> {
    let ms = match body.get("maxTimeMS") {
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
        Err(e) => return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    };
    if !(0..=i64::from(i32::MAX)).contains(&ms) {
        return Err(CommandError::bad_value(format!(
            "{ms} value for maxTimeMS is out of range [0, 2147483647]"
        )));
    }
    Ok((ms > 0).then(|| Instant::now() + Duration::from_millis(ms as u64)))
}

/// Runs `fut` with `deadline` in force.
pub async fn scope<F: Future>(deadline: Option<Instant>, fut: F) -> F::Output {
    DEADLINE.scope(deadline, fut).await
}

/// The deadline of the running command, from the async side.
pub fn current() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok().flatten()
}

/// Sets the thread's deadline for the duration of `f` (used by the blocking bridge).
pub fn with_thread_deadline<T>(deadline: Option<Instant>, f: impl FnOnce() -> T) -> T {
    let previous = CURRENT.with(|c| c.replace(deadline));
    let out = f();
    CURRENT.with(|c| c.set(previous));
    out
}

/// Fails with MaxTimeMSExpired when the running command's deadline has passed.
pub fn check() -> Result<(), CommandError> {
    let deadline = CURRENT.with(Cell::get).or_else(current);
    match deadline {
        Some(d) if Instant::now() >= d => Err(CommandError::new(
            ErrorCode::MaxTimeMSExpired,
            "operation exceeded time limit",
        )),
        _ => Ok(()),
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
