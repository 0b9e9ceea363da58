//! `dbStats`: totals over a database's collections, shaped like a mongos reply.
//!
//! Counts are Int32 when they fit; sizes are doubles divided by `scale`. `fsUsedSize` and
//! `fsTotalSize` describe the filesystem holding the data directory (`statvfs`).

use bson::raw::cstr;
use bson::rawdoc;

use super::args::{append_number, parse_scale};
use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::blocking;

/// `dbStats`.
pub static COMMAND: Command = Command {
    name: "dbStats",
    aliases: &["dbstats"],
    help: "Get stats on a database. Not instantaneous. Slower for databases with large .ns files.\nExample: { dbStats:1, scale:1 }",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Db(&[super::ActionType::DbStats]),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let scale = parse_scale(inv.req.body, "dbStats")?;
        let db = inv.req.db.to_string();
        let store = inv.server.store.clone();
        let data_dir = inv.server.config.data_dir.clone();
        let out = blocking::run(move || {
            let cat = store.catalog();
            let (mut colls, mut objects, mut data, mut storage) = (0i64, 0i64, 0i64, 0i64);
            for m in cat.in_database(&db) {
                colls += 1;
                let s = store.stats(m)?;
                objects += s.count;
                data += s.size;
                storage += i64::try_from(store.storage_size(m)).unwrap_or(i64::MAX);
            }
            let views = i64::try_from(cat.views_in(&db).count()).unwrap_or(i64::MAX);
            let (fs_used, fs_total) = crate::sysinfo::filesystem_usage(&data_dir).unwrap_or((0, 0));
            let sc = scale as f64;
            let mut d = rawdoc! {"db": db.as_str()};
            append_number(&mut d, cstr!("collections"), colls);
            append_number(&mut d, cstr!("views"), views);
            append_number(&mut d, cstr!("objects"), objects);
            d.append(
                cstr!("avgObjSize"),
                if objects > 0 {
                    data as f64 / objects as f64
                } else {
                    0.0
                },
            );
            d.append(cstr!("dataSize"), data as f64 / sc);
            d.append(cstr!("storageSize"), storage as f64 / sc);
            d.append(cstr!("totalSize"), storage as f64 / sc);
            append_number(&mut d, cstr!("indexes"), colls);
            d.append(cstr!("indexSize"), 0.0);
            append_number(&mut d, cstr!("scaleFactor"), scale);
            d.append(cstr!("fsUsedSize"), fs_used as f64 / sc);
            d.append(cstr!("fsTotalSize"), fs_total as f64 / sc);
            Ok(d)
        })
        .await?;
        Ok(out.into())
    })
}
