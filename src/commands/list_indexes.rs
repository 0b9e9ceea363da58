//! `listIndexes`: the ready indexes of a collection, as a cursor of their specifications.
//!
//! Each specification is written as MongoDB 7.0 writes it, through its `ListIndexesReplyItem`
//! IDL type (`cairn_storage::index::list_spec`): fields in the IDL's order (`v, key, name,
//! background, unique, hidden, partialFilterExpression, sparse, expireAfterSeconds, …`),
//! booleans as booleans, `v` and `expireAfterSeconds` as int32, whatever the creation request
//! or a later `collMod` used. A missing collection is NamespaceNotFound (26). Reply:
//! `{cursor: {id, ns: "<db>.<coll>", firstBatch}, ok}` — the cursor belongs to the
//! collection's namespace (`ListIndexesReplyCursor(id, nss, …)`), so `getMore` names the
//! collection itself.

use std::collections::VecDeque;
use std::time::Instant;

use bson::RawDocumentBuf;
use cairn_storage::index::IndexState;

use super::list_collections::listing_reply;
use super::{
    CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, opt_count,
    opt_document, ready,
};
use crate::cursor::{Cursor, Source, session_of};
use crate::error::{CommandError, ErrorCode};

/// `listIndexes`.
pub static COMMAND: Command = Command {
    name: "listIndexes",
    aliases: &[],
    help: "list indexes for a collection",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Strict(&["cursor", "includeBuildUUIDs", "includeIndexBuildInfo"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Ns(&[super::ActionType::ListIndexes]),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| {
        let coll = collection_arg_parsed(&inv.req, inv.parsed)?;
        let db = inv.req.db;
        let batch_size = match opt_document(inv.req.body, "listIndexes", "cursor")? {
            Some(c) => opt_count(c, "listIndexes.cursor", "batchSize")?,
            None => None,
        };
        crate::views::check_not_view(inv.server, db, coll)?;
        let meta = inv.server.store.collection(db, coll).ok_or_else(|| {
            CommandError::new(
                ErrorCode::NamespaceNotFound,
                format!("ns does not exist: {db}.{coll}"),
            )
        })?;
        let mut specs: VecDeque<RawDocumentBuf> = meta
            .indexes
            .iter()
            .filter(|i| i.state == IndexState::Ready)
            .map(|i| i.list_spec())
            .collect();
        let ns = format!("{db}.{coll}");
        let first: Vec<RawDocumentBuf> = match batch_size {
            Some(n) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX).min(specs.len());
                specs.drain(..n).collect()
            }
            None => specs.drain(..).collect(),
        };
        let id = if specs.is_empty() {
            0
        } else {
            let id = inv.server.cursors.new_id();
            inv.server.cursors.insert(Cursor {
                id,
                ns: ns.clone(),
                source: Source::Buffered(specs),
                remaining: None,
                output: None,
                time_budget: None,
                lsid: session_of(inv.req.body),
                txn_number: None,
                target: Default::default(),
                no_timeout: false,
                last_used: Instant::now(),
            });
            id
        };
        Ok(listing_reply(id, &ns, first).into())
    })())
}
