//! `validate`: check a collection's documents, index entries and statistics
//! ([`crate::validate`]).
//!
//! `{validate: <coll>, full: <bool>, repair: <bool>, metadata: <bool>, checkBSONConformance:
//! <bool>, background: <bool>}`. `full` (and `checkBSONConformance`) also decode every nested
//! element of every document. `repair` is refused as on a replica set or router (InvalidOptions
//! 72): problems are reported, never silently changed. `metadata: true` checks only the index
//! specifications (they are validated when created, so it reports them valid). A missing
//! collection is NamespaceNotFound (26). Reply: MongoDB's shape — `ns, uuid,
//! nInvalidDocuments, nNonCompliantDocuments, nrecords, nIndexes, keysPerIndex, indexDetails,
//! valid, repaired, warnings, errors, extraIndexEntries, missingIndexEntries, corruptRecords`
//! and, when invalid, `advice`.

use bson::rawdoc;

use super::{CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, opt_bool};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};

/// `validate`.
pub static COMMAND: Command = Command {
    name: "validate",
    aliases: &[],
    help: "Validate contents of a namespace by scanning its data structures for correctness.\nThis is a slow operation.\n\tAdd {full: true} option to do a more thorough check.\n\tAdd {background: true} to validate in the background.\n\tAdd {repair: true} to run repair mode.\nCannot specify both {full: true, background: true}.",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&[
        "full",
        "repair",
        "metadata",
        "checkBSONConformance",
        "background",
        "enforceFastCount",
        "scandata",
    ]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Ns(&[super::ActionType::Validate]),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let coll = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        let flag = |f: &str| opt_bool(body, "validate", f).map(|b| b.unwrap_or(false));
        let full = flag("full")?;
        let background = flag("background")?;
        let metadata = flag("metadata")?;
        let bson_conformance = flag("checkBSONConformance")?;
        if flag("repair")? {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "Running the validate command with { repair: true } can only be performed on a standalone mongod.",
            ));
        }
        if full && background {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "Running the validate command with both { background: true } and { full: true } is not supported.",
            ));
        }
        if metadata && (full || background || bson_conformance) {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "Running the validate command with { metadata: true } is not supported with any other options",
            ));
        }
        let ns = format!("{db}.{coll}");
        let meta = inv.server.store.collection(&db, &coll).ok_or_else(|| {
            CommandError::new(
                ErrorCode::NamespaceNotFound,
                format!("Collection '{ns}' does not exist to validate."),
            )
        })?;
        if metadata {
            // Index specifications are validated when created; there is nothing else to check.
            let mut d = rawdoc! {"ns": ns.as_str()};
            crate::error::append_all(
                &mut d,
                &rawdoc! {"valid": true, "repaired": false, "warnings": [], "errors": []},
            );
            return Ok(d.into());
        }
        let server = inv.server.clone();
        let (report, meta) = blocking::run(move || {
            let keygen = cairn_query::index::QueryKeyGen::new();
            let r =
                crate::validate::validate(&server.store, &keygen, &meta, full || bson_conformance)?;
            Ok((r, meta))
        })
        .await?;
        tracing::info!(id = 20327, namespace = %ns, valid = report.valid(), "Validation complete");
        let out = crate::validate::reply(&report, &ns, meta.uuid);
        Ok(out.into())
    })
}
