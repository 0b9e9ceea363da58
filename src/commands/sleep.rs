//! `sleep` (test command, admin only): hold an operation open for a while, interruptibly.
//!
//! `{sleep: 1, millis: <ms>, secs: <s>, lock: "r" | "w" | "ir" | "iw" | "none", w: <bool>}`:
//! sleeps `secs * 1000 + millis` milliseconds (10 seconds when neither is given), ending early
//! with an error when `maxTimeMS` passes or `killOp` kills it — which makes it the tool tests
//! use to see operations in `currentOp`. Cairn takes no global locks, so `lock`, `w` and
//! `lockTarget` are validated and otherwise have no effect.

use std::time::Duration;

use bson::{RawBsonRef, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::error::{CommandError, ErrorCode};

/// `sleep`.
pub static COMMAND: Command = Command {
    name: "sleep",
    aliases: &[],
    help: "internal testing command. Run a no-op command for an arbitrary amount of time. If neither 'secs' nor 'millis' is set, command will sleep for 10 seconds. If both are set, command will sleep for the sum of 'secs' and 'millis.'\n   w:<bool> (deprecated: use 'lock' instead) if true, takes a write lock.\n   lock: r, ir, w, iw, none. If r or w, db will block under a lock.\n   If ir or iw, db will block under an intent lock. Defaults to ir. 'lock' and 'w' may not both be set.\n   secs:<seconds> Amount of time to sleep, in seconds.\n   millis:<milliseconds> Amount of time to sleep, in ms.\n   lockTarget:<db or collection name> If provided, the lock will be taken on the provided namespace, instead of the global lock.",
    requires_auth: false,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn number(body: &bson::RawDocument, field: &str, code: i32) -> Result<Option<i64>, CommandError> {
    match body.get(field) {
        Ok(None) => Ok(None),
        Ok(Some(RawBsonRef::Int32(i))) => Ok(Some(i64::from(i))),
        Ok(Some(RawBsonRef::Int64(i))) => Ok(Some(i)),
        Ok(Some(RawBsonRef::Double(d))) => Ok(Some(d as i64)),
        Ok(Some(RawBsonRef::Decimal128(d))) => {
            Ok(Some(d.to_string().parse::<f64>().unwrap_or(0.0) as i64))
        }
        _ => Err(CommandError::new(
            ErrorCode::Location(code),
            format!("'{field}' must be a number."),
        )),
    }
}

/// How long `{sleep: …}` sleeps, or MongoDB's error for its arguments.
pub fn duration(body: &bson::RawDocument) -> Result<Duration, CommandError> {
    let get = |f: &str| body.get(f).ok().flatten();
    let ms = if get("secs").is_some() || get("seconds").is_some() || get("millis").is_some() {
        if get("secs").is_some() && get("seconds").is_some() {
            return Err(CommandError::new(
                ErrorCode::Location(51153),
                "Only one of 'secs' and 'seconds' may be specified",
            ));
        }
        let secs = match number(body, "secs", 34344)? {
            Some(s) => Some(s),
            None => number(body, "seconds", 51154)?,
        };
        let millis = number(body, "millis", 34345)?;
        secs.unwrap_or(0)
            .saturating_mul(1000)
            .saturating_add(millis.unwrap_or(0))
    } else {
        10_000
    };
    if let Some(l) = get("lock") {
        if get("w").is_some() {
            return Err(CommandError::new(
                ErrorCode::Location(34346),
                "Only one of 'w' and 'lock' may be set.",
            ));
        }
        if !matches!(l, RawBsonRef::String("r" | "ir" | "w" | "iw" | "none")) {
            return Err(CommandError::new(
                ErrorCode::Location(34347),
                "'lock' must be one of 'r', 'ir', 'w', 'iw', 'none'.",
            ));
        }
    }
    Ok(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let d = duration(inv.req.body)?;
        tracing::info!(id = 20504, "Test-only command 'sleep' invoked");
        crate::deadline::sleep(d).await?;
        crate::deadline::check()?;
        Ok(RawDocumentBuf::new().into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn durations() {
        let d = |b: bson::RawDocumentBuf| duration(&b).map_err(|e| e.code.code());
        assert_eq!(d(rawdoc! {"sleep": 1}), Ok(Duration::from_secs(10)));
        assert_eq!(
            d(rawdoc! {"sleep": 1, "secs": 1, "millis": 5}),
            Ok(Duration::from_millis(1005))
        );
        assert_eq!(d(rawdoc! {"sleep": 1, "millis": "x"}), Err(34345));
        assert_eq!(d(rawdoc! {"sleep": 1, "lock": "x"}), Err(34347));
        assert_eq!(d(rawdoc! {"sleep": 1, "lock": "r", "w": true}), Err(34346));
        assert_eq!(d(rawdoc! {"sleep": 1, "secs": 1, "seconds": 1}), Err(51153));
    }
}
