//! `find`: query a collection, returning the first batch and a cursor for the rest.
//!
//! 1. Arguments are validated as MongoDB's IDL does (types 14, negative counts 51024,
//!    unknown fields 40415).
//! 2. The filter is parsed by [`cairn_query::filter::Filter`]; `{_id: <value>}` is a point
//!    read of one document's keys, anything else a scan in `_id` order (descending for
//!    `sort: {_id: -1}` / `{$natural: -1}`) that keeps matching documents.
//! 3. The first batch holds `batchSize` documents (101 by default) within 16 MiB; if more
//!    may follow, a cursor remembers where to resume (no snapshot is pinned).
//!
//! Reply: `{cursor: {firstBatch, id, ns}, ok}` (MongoDB's field order for find).
//! Ordering: no sort, `$natural` or `{_id: ±1}` is the scan order itself; any other sort
//! collects the matching documents into a [`Sorter`] (top-k when there is a `limit`; beyond
//! 100 MB it spills to temporary files under `<data-dir>/_tmp`, or fails with 292 when
//! `allowDiskUse` is false — MongoDB 7.0's default `allowDiskUseByDefault` is true).
//! `skip`/`limit` apply after ordering, the projection last.
//! Not yet supported (NotImplemented): collations other than simple, aggregation
//! expressions in projections; tailable cursors need capped collections (BadValue as in
//! MongoDB).

use std::sync::Arc;

use std::time::Instant;

use bson::{RawArrayBuf, RawBsonRef, RawDocument, rawdoc};
use cairn_query::sort::{SortSpec, Sorter};

use super::{
    CmdFuture, Command, Counter, Fields, Invocation, collection_arg, opt_bool, opt_count,
    opt_document, opt_strict_bool, type_name,
};
use crate::blocking;
use crate::cursor::{Cursor, Output, Source, executor_error, next_batch, session_of};
use crate::error::{CommandError, ErrorCode};

/// Default first batch size.
pub const DEFAULT_BATCH: usize = 101;

const FIELDS: &[&str] = &[
    "allowDiskUse",
    "allowPartialResults",
    "awaitData",
    "batchSize",
    "collation",
    "filter",
    "hint",
    "let",
    "limit",
    "max",
    "min",
    "noCursorTimeout",
    "oplogReplay",
    "projection",
    "readOnce",
    "returnKey",
    "showRecordId",
    "singleBatch",
    "skip",
    "sort",
    "tailable",
];

/// `find`.
pub static COMMAND: Command = Command {
    name: "find",
    aliases: &[],
    help: "query for documents",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Strict(FIELDS),
    counter: Counter::Query,
    kill_on_disconnect: false,
    run,
};

fn not_implemented(what: &str) -> CommandError {
    CommandError::new(
        ErrorCode::NotImplemented,
        format!("{what} is not supported by Cairn yet"),
    )
}

/// How the documents are ordered.
enum Order {
    /// `_id` order, ascending or (with `true`) descending: the scan itself.
    Scan(bool),
    /// Sorted by a [`SortSpec`] after the scan.
    Sort(SortSpec),
}

/// Chooses the order: no sort, a `$natural` sort or a sort on `_id` alone is served by the
/// scan direction; anything else needs a sort.
fn order(sort: Option<&RawDocument>) -> Result<Order, CommandError> {
    let Some(sort) = sort else {
        return Ok(Order::Scan(false));
    };
    let spec = SortSpec::parse(sort)?;
    if let Some(forward) = spec.natural() {
        return Ok(Order::Scan(!forward));
    }
    match spec.fields() {
        [] => Ok(Order::Scan(false)),
        [f] if f.path == "_id" => Ok(Order::Scan(!f.ascending)),
        _ => Ok(Order::Sort(spec)),
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let coll = collection_arg(&inv.req)?.to_string();
        let db = inv.req.db.to_string();
        let ns = format!("{db}.{coll}");
        let filter_doc = opt_document(body, "find", "filter")?;
        let sort = opt_document(body, "find", "sort")?;
        let projection = opt_document(body, "find", "projection")?;
        let skip = opt_count(body, "find", "skip")?.unwrap_or(0);
        let limit = opt_count(body, "find", "limit")?.filter(|l| *l > 0);
        let batch_size = opt_count(body, "find", "batchSize")?;
        let single_batch = opt_strict_bool(body, "find", "singleBatch")?.unwrap_or(false);
        let no_timeout = opt_bool(body, "find", "noCursorTimeout")?.unwrap_or(false);
        if opt_bool(body, "find", "tailable")?.unwrap_or(false) {
            return Err(CommandError::bad_value(
                "error processing query: tailable cursor requested on non capped collection",
            ));
        }
        let lang = crate::lang::Lang::for_command(body, "find")?;
        let projection = match projection {
            Some(p) if !p.is_empty() => Some(lang.projection(p)?),
            _ => None,
        };
        let allow_disk_use = opt_strict_bool(body, "find", "allowDiskUse")?
            .unwrap_or(inv.server.config.allow_disk_use_by_default);
        if let Some(c) = opt_document(body, "find", "collation")?
            && !matches!(c.get("locale"), Ok(Some(RawBsonRef::String("simple"))))
        {
            return Err(not_implemented("collations other than simple"));
        }
        for field in ["min", "max"] {
            if opt_document(body, "find", field)?.is_some() {
                return Err(not_implemented(&format!("find.{field}")));
            }
        }
        if let Ok(Some(h)) = body.get("hint") {
            let natural = match h {
                RawBsonRef::String(s) => s == "_id_",
                RawBsonRef::Document(d) => {
                    d.get("_id").ok().flatten().is_some()
                        || d.get("$natural").ok().flatten().is_some()
                }
                other => {
                    return Err(CommandError::wrong_type(
                        "find.hint",
                        type_name(&other),
                        "object",
                    ));
                }
            };
            if !natural {
                return Err(CommandError::bad_value(
                    "hint provided does not correspond to an existing index",
                ));
            }
        }
        let order = order(sort)?;
        let filter = Arc::new(lang.filter(filter_doc)?);
        let output = projection.map(|p| {
            Arc::new(Output {
                projection: p,
                filter: Some(filter.clone()),
            })
        });
        let spill_dir = inv.server.config.data_dir.join(crate::cursor::SPILL_DIR);
        let first_max =
            batch_size.map_or(DEFAULT_BATCH, |b| usize::try_from(b).unwrap_or(usize::MAX));
        let lsid = session_of(body);
        let server = inv.server.clone();
        let deadline = crate::deadline::current();
        let (docs, id) = blocking::run(move || {
            let store = &server.store;
            let Some(meta) = store.collection(&db, &coll) else {
                return Ok((Vec::new(), 0));
            };
            let remaining = limit.map(|l| l as u64);
            let source = match order {
                // A point read needs no cursor.
                Order::Scan(_) if filter.id_equality().is_some() => {
                    let id = filter.id_equality().unwrap_or(bson::RawBson::Null);
                    let read = store.read()?;
                    let doc = read.get(&meta, id.as_raw_bson_ref())?;
                    let mut docs = Vec::new();
                    for d in doc
                        .into_iter()
                        .skip(usize::try_from(skip).unwrap_or(usize::MAX))
                        .take(limit.map_or(usize::MAX, |l| l as usize))
                    {
                        docs.push(match &output {
                            Some(o) => o.apply(&d)?,
                            None => d,
                        });
                    }
                    return Ok((docs, 0));
                }
                Order::Scan(reverse) => Source::Scan {
                    db: db.clone(),
                    coll: coll.clone(),
                    space: meta.id,
                    resume: None,
                    reverse,
                    filter: (!filter.is_empty()).then(|| filter.clone()),
                    skip: skip as u64,
                },
                Order::Sort(spec) => {
                    let top_k = limit.map(|l| (l as usize).saturating_add(skip as usize));
                    let mut sorter = Sorter::new(
                        spec,
                        top_k,
                        usize::try_from(server.config.sort_memory_limit_bytes)
                            .unwrap_or(usize::MAX),
                        allow_disk_use,
                        Some(spill_dir),
                    );
                    crate::exec::scan_matching(store, &db, &coll, &filter, |doc| {
                        sorter
                            .push(doc)
                            .map(|_| true)
                            .map_err(|e| executor_error(CommandError::from(e)))
                    })?;
                    let mut sorted = sorter
                        .finish()
                        .map_err(|e| executor_error(CommandError::from(e)))?;
                    for _ in 0..skip {
                        match sorted.next() {
                            Some(Ok(_)) => {}
                            Some(Err(e)) => return Err(executor_error(CommandError::from(e))),
                            None => break,
                        }
                    }
                    Source::Sorted(sorted)
                }
            };
            let mut cursor = Cursor {
                id: 0,
                ns: format!("{db}.{coll}"),
                source,
                remaining,
                output,
                time_budget: None,
                lsid,
                no_timeout,
                last_used: Instant::now(),
            };
            if first_max == 0 {
                cursor.id = server.cursors.new_id();
                let id = cursor.id;
                server.cursors.insert(cursor);
                return Ok((Vec::new(), id));
            }
            let (docs, exhausted) = next_batch(store, &mut cursor, first_max)?;
            if exhausted || single_batch {
                return Ok((docs, 0));
            }
            cursor.time_budget = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            cursor.id = server.cursors.new_id();
            let id = cursor.id;
            server.cursors.insert(cursor);
            Ok((docs, id))
        })
        .await?;
        let mut batch = RawArrayBuf::new();
        for d in docs {
            batch.push(d);
        }
        Ok(rawdoc! {"cursor": {"firstBatch": batch, "id": id, "ns": ns}}.into())
    })
}
