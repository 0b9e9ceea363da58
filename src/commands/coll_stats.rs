//! `collStats`: a collection's document count and sizes, from live statistics.
//!
//! `count` and `size` (BSON bytes) are exact (kept transactionally with every write),
//! `storageSize` is the bytes the collection occupies on disk. The `_id` index is the
//! document store itself (documents are keyed by `_id`), so it has no separate size:
//! `totalIndexSize` and `indexSizes._id_` are 0. Sizes are divided by `scale`. A missing
//! collection reports zeros, as MongoDB 7.0 does.

use bson::raw::cstr;
use bson::{RawDocumentBuf, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed};
use crate::blocking;
use crate::error::CommandError;

/// `collStats`.
pub static COMMAND: Command = Command {
    name: "collStats",
    aliases: &[],
    help: "{ collStats:\"blog.posts\" , scale : 1 } scale divides sizes e.g. for KB use 1024\n    avgObjSize - in bytes",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Ns(&[super::ActionType::CollStats]),
    run,
};

pub use super::args::append_number;

/// The storage statistics of a collection (`collStats` after `ns`, and `$collStats`'
/// `storageStats`), sizes divided by `scale`.
pub fn storage_stats(
    store: &cairn_storage::Store,
    meta: &cairn_storage::catalog::CollectionMeta,
    scale: i64,
) -> Result<RawDocumentBuf, CommandError> {
    let stats = store.stats(meta)?;
    let storage = i64::try_from(store.storage_size(meta)).unwrap_or(i64::MAX);
    let mut d = RawDocumentBuf::new();
    append_number(&mut d, cstr!("size"), stats.size / scale);
    append_number(&mut d, cstr!("count"), stats.count);
    if stats.count > 0 {
        append_number(&mut d, cstr!("avgObjSize"), stats.size / stats.count);
    }
    append_number(&mut d, cstr!("numOrphanDocs"), 0);
    append_number(&mut d, cstr!("storageSize"), storage / scale);
    let capped = cairn_storage::capped::limits(meta);
    d.append(cstr!("capped"), capped.is_some());
    if let Some((size, max)) = capped {
        append_number(&mut d, cstr!("max"), max.unwrap_or(0));
        append_number(&mut d, cstr!("maxSize"), size / scale);
    }
    append_number(&mut d, cstr!("nindexes"), meta.indexes.len() as i64);
    d.append(cstr!("indexBuilds"), bson::RawArrayBuf::new());
    append_number(&mut d, cstr!("totalIndexSize"), 0);
    append_number(&mut d, cstr!("totalSize"), storage / scale);
    d.append(cstr!("indexSizes"), rawdoc! {"_id_": 0_i32});
    d.append(cstr!("scaleFactor"), scale as i32);
    Ok(d)
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let name = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let scale = super::args::parse_scale(inv.req.body, "collStats")?;
        let db = inv.req.db.to_string();
        let ns = format!("{db}.{name}");
        crate::views::check_not_view(inv.server, &db, &name)?;
        let store = inv.server.store.clone();
        let out = blocking::run(move || {
            let Some(meta) = store.collection(&db, &name) else {
                let mut d = rawdoc! {"ns": ns.as_str()};
                for k in [
                    cstr!("size"),
                    cstr!("count"),
                    cstr!("numOrphanDocs"),
                    cstr!("storageSize"),
                    cstr!("totalSize"),
                    cstr!("nindexes"),
                    cstr!("totalIndexSize"),
                ] {
                    d.append(k, 0_i32);
                }
                d.append(cstr!("indexDetails"), RawDocumentBuf::new());
                d.append(cstr!("indexSizes"), RawDocumentBuf::new());
                d.append(cstr!("scaleFactor"), scale as i32);
                return Ok(d);
            };
            let mut d = rawdoc! {"ns": ns.as_str()};
            crate::error::append_all(&mut d, &storage_stats(&store, &meta, scale)?);
            Ok(d)
        })
        .await?;
        Ok(out.into())
    })
}
