//! `renameCollection` (admin only): `{renameCollection: "db.from", to: "db.to", dropTarget}`.
//!
//! Within or across databases, a rename rewrites one catalog record: the documents stay
//! where they are, so it costs the same for any collection size. With `dropTarget` an
//! existing target is dropped in the same catalog transaction. Views are not renamed
//! (CommandNotSupportedOnView, 166), nothing is renamed onto a view (NamespaceExists, 48), and
//! `system.views` is neither source nor target (IllegalOperation, 20).

use bson::{RawBsonRef, RawDocumentBuf};
use cairn_storage::namespace::split_namespace;

use super::{CmdFuture, Command, Counter, Fields, Invocation, truthy, type_name};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};

/// `renameCollection`.
pub static COMMAND: Command = Command {
    name: "renameCollection",
    aliases: &[],
    help: " example: { renameCollection: foo.a, to: bar.b }",
    requires_auth: true,
    admin_only: true,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&["to", "dropTarget", "stayTemp", "collectionUUID"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::rename_collection),
    run,
};

fn namespace<'a>(
    body: &'a bson::RawDocument,
    field: &str,
    which: &str,
) -> Result<(&'a str, &'a str), CommandError> {
    match body.get(field) {
        Ok(Some(RawBsonRef::String(ns))) => split_namespace(ns).ok_or_else(|| {
            CommandError::new(
                ErrorCode::InvalidNamespace,
                format!("Invalid {which} namespace: {ns}"),
            )
        }),
        Ok(Some(other)) => Err(CommandError::wrong_type(
            &format!("renameCollection.{field}"),
            type_name(&other),
            "string",
        )),
        _ => Err(CommandError::missing_field(&format!(
            "renameCollection.{field}"
        ))),
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let (fdb, fcoll) = namespace(body, "renameCollection", "source")?;
        let (tdb, tcoll) = namespace(body, "to", "target")?;
        if (fdb, fcoll) == (tdb, tcoll) {
            return Err(CommandError::new(
                ErrorCode::IllegalOperation,
                "Can't rename a collection to itself",
            ));
        }
        if fcoll == crate::views::SYSTEM_VIEWS || tcoll == crate::views::SYSTEM_VIEWS {
            return Err(CommandError::new(
                ErrorCode::IllegalOperation,
                "renaming system.views collection or renaming to system.views is not allowed",
            ));
        }
        if crate::views::is_view(inv.server, fdb, fcoll) {
            return Err(CommandError::new(
                ErrorCode::CommandNotSupportedOnView,
                format!("cannot rename view: {fdb}.{fcoll}"),
            ));
        }
        if crate::views::is_view(inv.server, tdb, tcoll) {
            return Err(CommandError::new(
                ErrorCode::NamespaceExists,
                format!("a view already exists with that name: {tdb}.{tcoll}"),
            ));
        }
        cairn_storage::namespace::check_collection_for_create(tdb, tcoll).map_err(|e| {
            CommandError::new(
                ErrorCode::InvalidNamespace,
                format!("Invalid target namespace: {tdb}.{tcoll} ({e})"),
            )
        })?;
        let drop_target = match body.get("dropTarget") {
            Ok(Some(v)) => truthy(&v),
            _ => false,
        };
        let (fdb, fcoll, tdb, tcoll) = (
            fdb.to_string(),
            fcoll.to_string(),
            tdb.to_string(),
            tcoll.to_string(),
        );
        let store = inv.server.store.clone();
        blocking::run(move || {
            Ok(store.rename_collection((&fdb, &fcoll), (&tdb, &tcoll), drop_target)?)
        })
        .await?;
        Ok(RawDocumentBuf::new().into())
    })
}
