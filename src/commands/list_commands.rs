//! `listCommands`: every registered command with its help and flags, straight from
//! [`super::REGISTRY`] (so it can never disagree with what the dispatcher accepts).
//! Aliases are not listed, as in MongoDB.

use bson::{RawArrayBuf, RawDocumentBuf, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, REGISTRY, ready};
use crate::error::key;

/// `listCommands`.
pub static COMMAND: Command = Command {
    name: "listCommands",
    aliases: &[],
    help: "get a list of all db commands",
    requires_auth: false,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| {
        let mut commands = RawDocumentBuf::new();
        for c in REGISTRY.iter().filter(|c| super::available(inv.server, c)) {
            let mut api = RawArrayBuf::new();
            if c.api_v1 {
                api.push("1");
            }
            commands.append(
                key(c.name)?,
                rawdoc! {
                    "help": c.help,
                    "requiresAuth": c.requires_auth,
                    "secondaryOk": c.secondary_ok,
                    "adminOnly": c.admin_only,
                    "apiVersions": api,
                    "deprecatedApiVersions": [],
                },
            );
        }
        Ok(rawdoc! {"commands": commands}.into())
    })())
}
