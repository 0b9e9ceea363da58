//! `listCollections`: the collections of a database, as a cursor.
//!
//! Entries are `{name, type: "collection", options, info: {readOnly: false, uuid},
//! idIndex: {v: 2, key: {_id: 1}, name: "_id_"}}` in name order, then the views as
//! `{name, type: "view", options: {viewOn, pipeline}, info: {readOnly: true}}` in name order
//! (MongoDB lists a database's views after its collections; the `system.views` collection
//! that creating a view makes is an ordinary entry); `nameOnly: true` returns `{name, type}`. `filter` is a query on the entries as returned. The reply is
//! `{cursor: {id, ns: "<db>.$cmd.listCollections", firstBatch}, ok}`; with
//! `cursor.batchSize` smaller than the result the rest is served by `getMore`. With
//! authorization, `authorizedCollections: true, nameOnly: true` from a user without the
//! `listCollections` action lists only the collections the user holds some privilege on.

use std::collections::VecDeque;
use std::time::Instant;

use bson::spec::BinarySubtype;
use bson::{RawArrayBuf, RawDocumentBuf, rawdoc};
use cairn_query::filter::Filter;

use super::{CmdFuture, Command, Counter, Fields, Invocation, opt_bool, opt_count, opt_document};
use crate::cursor::{Cursor, Source, session_of};
use crate::error::CommandError;

/// `listCollections`.
pub static COMMAND: Command = Command {
    name: "listCollections",
    aliases: &[],
    help: "list collections for this db",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Strict(&[
        "filter",
        "nameOnly",
        "authorizedCollections",
        "cursor",
        "includePendingDrops",
    ]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::list_collections),
    run,
};

/// Builds a cursor reply `{cursor: {id, ns, firstBatch|nextBatch}}` in the field order of
/// MongoDB's `CursorResponse::toBSON` (id, ns, batch), used by listing commands.
pub fn listing_reply(id: i64, ns: &str, docs: Vec<RawDocumentBuf>) -> RawDocumentBuf {
    let mut batch = RawArrayBuf::new();
    for d in docs {
        batch.push(d);
    }
    rawdoc! {"cursor": {"id": id, "ns": ns, "firstBatch": batch}}
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let db = inv.req.db;
        let name_only = opt_bool(body, "listCollections", "nameOnly")?.unwrap_or(false);
        let _ = opt_bool(body, "listCollections", "authorizedCollections")?;
        let visible =
            crate::auth::authorize::collection_filter(inv.server, inv.client, &inv.req).await?;
        let hidden = |name: &str| {
            visible
                .as_ref()
                .is_some_and(|a| !crate::auth::authorize::may_see_collection(a, db, name))
        };
        let filter = match opt_document(body, "listCollections", "filter")? {
            Some(f) => Some(Filter::parse(f)?),
            None => None,
        };
        let batch_size = match opt_document(body, "listCollections", "cursor")? {
            Some(c) => opt_count(c, "listCollections.cursor", "batchSize")?,
            None => None,
        };
        let ns = format!("{db}.$cmd.listCollections");
        let mut entries = VecDeque::new();
        for m in inv.server.store.catalog().in_database(db) {
            if hidden(&m.name) {
                continue;
            }
            let entry = if name_only {
                rawdoc! {"name": m.name.as_str(), "type": "collection"}
            } else {
                rawdoc! {
                    "name": m.name.as_str(),
                    "type": "collection",
                    "options": m.options.clone(),
                    "info": {
                        "readOnly": false,
                        "uuid": bson::Binary { subtype: BinarySubtype::Uuid, bytes: m.uuid.to_vec() },
                    },
                    "idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"},
                }
            };
            if filter.as_ref().is_none_or(|f| f.matches(&entry)) {
                entries.push_back(entry);
            }
        }
        for v in inv.server.store.catalog().views_in(db) {
            if hidden(&v.name) {
                continue;
            }
            let entry = if name_only {
                rawdoc! {"name": v.name.as_str(), "type": "view"}
            } else {
                rawdoc! {
                    "name": v.name.as_str(),
                    "type": "view",
                    "options": {"viewOn": v.view_on.as_str(), "pipeline": v.pipeline.clone()},
                    "info": {"readOnly": true},
                }
            };
            if filter.as_ref().is_none_or(|f| f.matches(&entry)) {
                entries.push_back(entry);
            }
        }
        let first: Vec<RawDocumentBuf> = match batch_size {
            Some(n) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX).min(entries.len());
                entries.drain(..n).collect()
            }
            None => entries.drain(..).collect(),
        };
        let id = if entries.is_empty() {
            0
        } else {
            let id = inv.server.cursors.new_id();
            inv.server.cursors.insert(Cursor {
                id,
                ns: ns.clone(),
                source: Source::Buffered(entries),
                remaining: None,
                output: None,
                time_budget: None,
                lsid: session_of(body),
                txn_number: None,
                target: Default::default(),
                no_timeout: false,
                last_used: Instant::now(),
            });
            id
        };
        Ok::<_, CommandError>(listing_reply(id, &ns, first).into())
    })
}
