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
//! Not yet supported (NotImplemented): sorts other than by `_id`, projections, collations
//! other than simple; tailable cursors need capped collections (BadValue as in MongoDB).

use std::sync::Arc;

use std::time::Instant;

use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use cairn_query::filter::Filter;

use super::{
    CmdFuture, Command, Counter, Fields, Invocation, collection_arg, opt_bool, opt_count,
    opt_document, opt_strict_bool, type_name,
};
use crate::blocking;
use crate::cursor::{Cursor, Source, next_batch, session_of};
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

/// The scan direction a sort specification asks for, if it is one the scan can serve.
fn scan_direction(sort: Option<&RawDocument>) -> Result<bool, CommandError> {
    let Some(sort) = sort else { return Ok(false) };
    let mut it = sort.iter();
    let Some(first) = it.next() else {
        return Ok(false);
    };
    let (k, v) = first.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
    if it.next().is_some() || !(k.as_str() == "_id" || k.as_str() == "$natural") {
        return Err(not_implemented("sorting on fields other than _id"));
    }
    let dir = match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) => d as i64,
        _ => 0,
    };
    match dir {
        1 => Ok(false),
        -1 => Ok(true),
        _ => Err(CommandError::bad_value(format!(
            "Illegal key in $sort specification: {}: {v:?}",
            k.as_str()
        ))),
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
        if projection.is_some_and(|p| !p.is_empty()) {
            return Err(not_implemented("projections"));
        }
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
        let reverse = scan_direction(sort)?;
        let filter = match filter_doc {
            Some(f) => Filter::parse(f)?,
            None => Filter::parse(&rawdoc! {})?,
        };
        let first_max =
            batch_size.map_or(DEFAULT_BATCH, |b| usize::try_from(b).unwrap_or(usize::MAX));
        let lsid = session_of(body);
        let server = inv.server.clone();
        let (docs, id) = blocking::run(move || {
            let store = &server.store;
            let Some(meta) = store.collection(&db, &coll) else {
                return Ok((Vec::new(), 0));
            };
            // A point read needs no cursor.
            if let Some(id) = filter.id_equality() {
                let read = store.read()?;
                let doc = read.get(&meta, id.as_raw_bson_ref())?;
                let docs: Vec<RawDocumentBuf> = doc
                    .into_iter()
                    .skip(usize::try_from(skip).unwrap_or(usize::MAX))
                    .take(limit.map_or(usize::MAX, |l| l as usize))
                    .collect();
                return Ok((docs, 0));
            }
            let mut cursor = Cursor {
                id: 0,
                ns: format!("{db}.{coll}"),
                source: Source::Scan {
                    db: db.clone(),
                    coll: coll.clone(),
                    space: meta.id,
                    resume: None,
                    reverse,
                    filter: (!filter.is_empty()).then(|| Arc::new(filter)),
                    skip: skip as u64,
                },
                remaining: limit.map(|l| l as u64),
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
