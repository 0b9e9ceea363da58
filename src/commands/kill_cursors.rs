//! `killCursors`: close cursors. `{killCursors: <coll>, cursors: [Int64...]}` → the ids
//! split into `cursorsKilled`, `cursorsNotFound`, `cursorsAlive` (in use by a running
//! `getMore`) and `cursorsUnknown`.

use bson::{RawArrayBuf, RawBsonRef, rawdoc};

use super::{
    CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, ready, type_name,
};
use crate::error::{CommandError, ErrorCode};

/// `killCursors`.
pub static COMMAND: Command = Command {
    name: "killCursors",
    aliases: &[],
    help: "Kill a list of cursor ids",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Strict(&["cursors"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::kill_cursors),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| {
        collection_arg_parsed(&inv.req, inv.parsed)?;
        let ids = match inv.req.body.get("cursors") {
            Ok(Some(RawBsonRef::Array(a))) => a,
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "killCursors.cursors",
                    type_name(&other),
                    "array",
                ));
            }
            _ => return Err(CommandError::missing_field("killCursors.cursors")),
        };
        let (mut killed, mut not_found, mut alive) =
            (RawArrayBuf::new(), RawArrayBuf::new(), RawArrayBuf::new());
        for (i, el) in ids.into_iter().enumerate() {
            let el = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let RawBsonRef::Int64(id) = el else {
                return Err(CommandError::wrong_type(
                    &format!("killCursors.cursors.{i}"),
                    type_name(&el),
                    "long",
                ));
            };
            match inv.server.cursors.kill(id) {
                Some(true) => killed.push(id),
                Some(false) => alive.push(id),
                None => not_found.push(id),
            }
        }
        Ok(rawdoc! {
            "cursorsKilled": killed,
            "cursorsNotFound": not_found,
            "cursorsAlive": alive,
            "cursorsUnknown": [],
        }
        .into())
    })())
}
