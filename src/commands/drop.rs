//! `drop`: drop a collection.
//!
//! The documents go with their whole storage space, so the cost does not depend on the
//! collection's size. Replies as a mongos does: `{ok: 1}` whether or not the collection
//! existed, and `{info: "database does not exist", ok: 1}` when its database has no
//! collections at all. Open cursors on the collection fail on their next `getMore`.
//! `system.profile` cannot be dropped while its database profiles (IllegalOperation).
//!
//! A view is dropped by removing its catalog record; dropping `system.views` drops every view
//! of the database with it (as in MongoDB).

use bson::{RawDocumentBuf, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed};
use crate::blocking;

/// `drop`.
pub static COMMAND: Command = Command {
    name: "drop",
    aliases: &[],
    help: "drop a collection\n{drop : <collectionName>}",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Ns(&[super::ActionType::DropCollection]),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let name = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        let store = inv.server.store.clone();
        let db_exists = store.catalog().in_database(&db).next().is_some();
        if store.collection(&db, &name).is_some() {
            inv.server.profiler.check_drop(&db, &name)?;
        }
        blocking::run(move || {
            if store.drop_view(&db, &name)? {
                return Ok(());
            }
            if name == crate::views::SYSTEM_VIEWS {
                store.drop_views(&db)?;
            }
            store.drop_collection(&db, &name)?;
            Ok(())
        })
        .await?;
        Ok(if db_exists {
            RawDocumentBuf::new()
        } else {
            rawdoc! {"info": "database does not exist"}
        }
        .into())
    })
}
