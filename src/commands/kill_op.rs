//! `killOp` (admin only): interrupt a running operation.
//!
//! `{killOp: 1, op: <opid>}` marks the operation killed; it stops at its next interruption
//! check (the same points as `maxTimeMS`, see [`crate::deadline`]) with Interrupted (11601),
//! and `currentOp` shows it with `killPending: true` until then. As a router, Cairn also takes
//! the `"<shard>:<opid>"` form for its one shard (`cairn`). Killing an operation that does not
//! exist (or has finished) is not an error. Reply: `{info: "attempting to kill op"}`.

use bson::{RawBsonRef, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready, type_name};
use crate::error::{CommandError, ErrorCode};

/// `killOp`.
pub static COMMAND: Command = Command {
    name: "killOp",
    aliases: &[],
    help: "Kill an operation, by its opid",
    requires_auth: true,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&["op"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Cluster(&[super::ActionType::Killop]),
    run,
};

/// The opid named by `op`, as MongoDB parses it.
pub fn parse_op(v: Option<RawBsonRef<'_>>) -> Result<i64, CommandError> {
    let v =
        v.ok_or_else(|| CommandError::new(ErrorCode::NoSuchKey, "Missing expected field \"op\""))?;
    let n = match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) if d.fract() == 0.0 && d.is_finite() => d as i64,
        RawBsonRef::Double(d) => {
            return Err(CommandError::bad_value(format!(
                "Expected field \"op\" to have a value exactly representable as a 64-bit integer, but found op: {d}"
            )));
        }
        RawBsonRef::String(s) => {
            let Some((shard, id)) = s.split_once(':') else {
                return Err(CommandError::bad_value(format!(
                    "The op argument to killOp must be of the format shardid:opid but found \"{s}\""
                )));
            };
            if shard != crate::session::SHARD_ID {
                return Err(CommandError::new(
                    ErrorCode::Location(70),
                    format!("Shard {shard} not found"),
                ));
            }
            id.parse::<i64>().map_err(|_| {
                CommandError::new(
                    ErrorCode::FailedToParse,
                    format!("Failed to parse opid from \"{id}\""),
                )
            })?
        }
        other => {
            return Err(CommandError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "Expected field \"op\" to have numeric type, but found {}",
                    type_name(&other)
                ),
            ));
        }
    };
    if !(i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&n) {
        return Err(CommandError::bad_value(format!(
            "\"op\" field was {n}, which is not valid"
        )));
    }
    Ok(n)
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| {
        let opid = parse_op(inv.req.body.get("op").ok().flatten())?;
        let found = inv.server.ops.kill(opid as i32);
        tracing::info!(id = 20482, opId = opid, found, "Going to kill op");
        Ok(rawdoc! {"info": "attempting to kill op"}.into())
    })())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::RawBson;

    #[test]
    fn op_forms() {
        let p = |v: RawBson| parse_op(Some(v.as_raw_bson_ref())).map_err(|e| e.code.code());
        assert_eq!(p(RawBson::Int32(5)), Ok(5));
        assert_eq!(p(RawBson::Int64(7)), Ok(7));
        assert_eq!(p(RawBson::Double(3.0)), Ok(3));
        assert_eq!(p(RawBson::String("cairn:12".into())), Ok(12));
        assert_eq!(p(RawBson::String("other:12".into())), Err(70));
        assert_eq!(p(RawBson::String("12".into())), Err(2));
        assert_eq!(p(RawBson::Boolean(true)), Err(14));
        assert_eq!(p(RawBson::Int64(1 << 40)), Err(2));
        assert_eq!(parse_op(None).unwrap_err().code.code(), 4);
    }
}
