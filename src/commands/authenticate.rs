//! `authenticate`: the single-step mechanisms. MongoDB 7.0 has one, MONGODB-X509, which
//! authenticates a TLS client certificate's subject; Cairn's connections carry no client
//! certificate, so it fails as mongod does for a client without one, and every other
//! mechanism is unsupported. Both reach the client as MongoDB shows them: AuthenticationFailed
//! (18) `Authentication failed.` (after `authFailedDelayMs`), the reason in the log.

use super::{CmdFuture, Command, Counter, Fields, Invocation, args::opt_string};
use crate::auth::sasl;
use crate::error::CommandError;

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
            "MONGODB-X509" => "No verified subject name available from client".to_string(),
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
