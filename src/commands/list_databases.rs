//! `listDatabases` (admin only): databases that hold collections.
//!
//! Each entry is `{name, sizeOnDisk: Int64, empty: bool}` — `sizeOnDisk` is the bytes its
//! collections occupy on disk (data still in the write buffer is not on disk yet), `empty`
//! whether it holds no documents. `nameOnly: true` returns `{name}` entries and no totals.
//! `filter` is a query on the entries (applied before `nameOnly` trims them). With
//! authorization, a user without `listDatabases` on the cluster (or who asks
//! `authorizedDatabases: true`) sees only the databases they hold some privilege in
//! ([`crate::auth::authorize::database_filter`]).

use bson::{RawArrayBuf, RawDocumentBuf, rawdoc};
use cairn_query::filter::Filter;

use super::{CmdFuture, Command, Counter, Fields, Invocation, opt_bool, opt_document};
use crate::blocking;

/// `listDatabases`.
pub static COMMAND: Command = Command {
    name: "listDatabases",
    aliases: &[],
    help: "{ listDatabases:1, [filter: <filterObject>] [, nameOnly: true ] }\nlist databases on this server",
    requires_auth: true,
    admin_only: true,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Strict(&["filter", "nameOnly", "authorizedDatabases"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::None,
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let name_only = opt_bool(body, "listDatabases", "nameOnly")?.unwrap_or(false);
        let authorized = opt_bool(body, "listDatabases", "authorizedDatabases")?;
        let visible =
            crate::auth::authorize::database_filter(inv.server, inv.client, authorized).await?;
        let filter = match opt_document(body, "listDatabases", "filter")? {
            Some(f) => Some(Filter::parse(f)?),
            None => None,
        };
        let store = inv.server.store.clone();
        blocking::run(move || {
            let cat = store.catalog();
            let mut dbs = RawArrayBuf::new();
            let mut total: i64 = 0;
            for db in cat.databases() {
                if visible
                    .as_ref()
                    .is_some_and(|v| !v.privileges.any_in_db(&db))
                {
                    continue;
                }
                let mut size: i64 = 0;
                let mut docs: i64 = 0;
                for m in cat.in_database(&db) {
                    size += i64::try_from(store.storage_size(m)).unwrap_or(i64::MAX);
                    docs += store.stats(m)?.count;
                }
                let entry = rawdoc! {"name": db.as_str(), "sizeOnDisk": size, "empty": docs == 0};
                if filter.as_ref().is_some_and(|f| !f.matches(&entry)) {
                    continue;
                }
                total += size;
                if name_only {
                    dbs.push(rawdoc! {"name": db.as_str()});
                } else {
                    dbs.push(entry);
                }
            }
            let mut out = rawdoc! {"databases": dbs};
            if !name_only {
                out.append(bson::raw::cstr!("totalSize"), total);
                out.append(bson::raw::cstr!("totalSizeMb"), total / (1024 * 1024));
            }
            Ok(out)
        })
        .await
        .map(|d: RawDocumentBuf| d.into())
    })
}
