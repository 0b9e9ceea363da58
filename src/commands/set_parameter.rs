//! `setParameter`: change server parameters at runtime (admin only).
//!
//! `{setParameter: 1, <name>: <value>}`: the parameter must exist ([`crate::params`]) and be
//! settable at runtime; its value is validated as MongoDB validates it. Reply: `{was: <old
//! value>, ok}`. Unknown parameters are InvalidOptions (72), like parameters that can only be
//! set at startup.

use bson::RawDocumentBuf;
use bson::raw::cstr;

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready};
use crate::error::{CommandError, ErrorCode};

/// `setParameter`.
pub static COMMAND: Command = Command {
    name: "setParameter",
    aliases: &[],
    help: "set administrative option(s)\n{ setParameter:1, <param>:<value> }\nsupported:\n  transactionLifetimeLimitSeconds\n  minSnapshotHistoryWindowInSeconds",
    requires_auth: true,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Cluster(&[super::ActionType::SetParameter]),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| {
        let mut out = RawDocumentBuf::new();
        let mut set = 0;
        for (i, el) in inv.req.body.iter().enumerate() {
            let (k, v) =
                el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let name = k.as_str();
            if i == 0 || super::GENERIC_ARGUMENTS.contains(&name) {
                continue;
            }
            if set > 0 {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    "Only one parameter may be set at a time",
                ));
            }
            let Some(p) = crate::params::find(name) else {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    format!(
                        "attempted to set unrecognized parameter [{name}], use help:true to see options "
                    ),
                ));
            };
            let Some(setter) = p.set else {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    format!("not allowed to change [{name}] at runtime"),
                ));
            };
            let was = (p.value)(inv.server);
            setter(inv.server, v)?;
            out.append(cstr!("was"), was);
            set += 1;
        }
        if set == 0 {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "no option found to set, use help:true to see options ",
            ));
        }
        Ok(out.into())
    })())
}
