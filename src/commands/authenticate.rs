//! `authenticate`: the single-step mechanisms. MongoDB 7.0 has one, MONGODB-X509, which
//! authenticates a TLS connection as the `$external` user named by its verified client
//! certificate's subject ([`sasl::x509`]): `{dbname: "$external", user: "<subject>"}`. A
//! connection without TLS, or on another database, is a ProtocolError (17); every other
//! failure (no verified certificate, a `user` that is not the subject, no such user) and every
//! other mechanism reach the client as MongoDB shows them: AuthenticationFailed (18)
//! `Authentication failed.` (after `authFailedDelayMs`), the reason in the log.

use super::{CmdFuture, Command, Counter, Fields, Invocation, args::opt_string};
use crate::auth::sasl;
use crate::error::CommandError;
use bson::rawdoc;

/// `authenticate`.
pub static COMMAND: Command = Command {
    name: "authenticate",
    aliases: &[],
    help: "internal",
    requires_auth: false,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Strict(&["mechanism", "user"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let Some(mechanism) = opt_string(body, "authenticate", "mechanism")? else {
            return Err(CommandError::missing_field("authenticate.mechanism"));
        };
        let user = opt_string(body, "authenticate", "user")?.unwrap_or("");
        let reason = match mechanism {
            "" => "Auth mechanism not specified".to_string(),
            "MONGODB-X509" => {
                let db = inv.req.db;
                match sasl::x509(inv.server, inv.client, db, Some(user)).await? {
                    Ok(name) => {
                        return Ok(rawdoc! {"dbname": name.db, "user": name.user}.into());
                    }
                    Err(reason) => reason,
                }
            }
            other => format!("Unsupported mechanism: {other}"),
        };
        tracing::info!(id = 20249, mechanism, principalName = user,
                       authenticationDatabase = inv.req.db, remote = %inv.client.peer,
                       error = %reason, "Authentication failed");
        let ms = inv
            .server
            .auth
            .failed_delay_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        if ms > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        Err(sasl::authentication_failed())
    })
}
