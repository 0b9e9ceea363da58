//! `rotateCertificates` (admin only): re-read the TLS certificate key file and CA file.
//!
//! `{rotateCertificates: 1, message?: <string>}`, as mongod 5.0+: connections accepted from
//! now on handshake with the new certificate, existing ones keep theirs. A file that cannot
//! be read or used fails the command with InvalidSSLConfiguration (140) and leaves the old
//! configuration in place; one rotation runs at a time. Without TLS there is nothing to
//! rotate and the command succeeds, as mongod's does. SIGHUP runs the same [`rotate`].

use bson::{RawBsonRef, RawDocumentBuf};

use super::{CmdFuture, Command, Counter, Fields, Invocation, type_name};
use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;

/// `rotateCertificates`.
pub static COMMAND: Command = Command {
    name: "rotateCertificates",
    aliases: &[],
    help: "Rotate certificates for new SSL connections",
    requires_auth: true,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&["message"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Cluster(&[super::ActionType::RotateCertificates]),
    run,
};

/// Re-reads the certificate files (blocking file I/O: call it through
/// [`crate::blocking::run`]); `message` is logged with the outcome.
pub fn rotate(server: &ServerState, message: &str) -> Result<(), CommandError> {
    if let Some(tls) = &server.tls {
        tls.rotate().map_err(|e| {
            tracing::warn!(error = %e, reason = message, "Certificate rotation failed");
            CommandError::new(
                ErrorCode::Location(140),
                format!("Can not rotate certificates: {e}"),
            )
        })?;
    }
    tracing::info!(
        id = 4988500,
        reason = message,
        "Certificate rotation completed successfully"
    );
    Ok(())
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let message = match inv.req.body.get("message") {
            Ok(None) => String::new(),
            Ok(Some(RawBsonRef::String(m))) => m.to_string(),
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "rotateCertificates.message",
                    type_name(&other),
                    "string",
                ));
            }
            Err(e) => return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
        };
        let server = inv.server.clone();
        crate::blocking::run(move || rotate(&server, &message)).await?;
        Ok(RawDocumentBuf::new().into())
    })
}
