//! `dropIndexes` (alias `deleteIndexes`): `{dropIndexes: coll, index: <name> | <key pattern> |
//! [names] | "*"}` → `{nIndexesWas, ok}`, and for `"*"` (which drops every index but `_id_`)
//! `{nIndexesWas, msg: "non-_id indexes dropped for collection", ok}` (`DropIndexesReply`
//! field order). `_id_` itself cannot be dropped (72). An unknown name or pattern is
//! IndexNotFound (27); a key pattern shared by several indexes (e.g. with different partial
//! filters) is AmbiguousIndexKeyPattern (181, `getDescriptorByKeyPattern`'s message, naming
//! the first two). Dropping an index that is still building stops its build. Each index goes
//! with its whole space.

use bson::{RawBsonRef, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, type_name};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};

/// `dropIndexes`.
pub static COMMAND: Command = Command {
    name: "dropIndexes",
    aliases: &["deleteIndexes"],
    help: "drop indexes for a collection",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(&["index"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Ns(&[super::ActionType::DropIndex]),
    run,
};

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let coll = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        crate::views::check_not_view(inv.server, &db, &coll)?;
        let meta = inv.server.store.collection(&db, &coll).ok_or_else(|| {
            CommandError::new(
                ErrorCode::NamespaceNotFound,
                format!("ns not found {db}.{coll}"),
            )
        })?;
        let before = meta.indexes.len();
        let all = matches!(inv.req.body.get("index"), Ok(Some(RawBsonRef::String("*"))));
        let names: Vec<String> = match inv.req.body.get("index") {
            Ok(Some(RawBsonRef::String("*"))) => {
                meta.secondary_indexes().map(|i| i.name.clone()).collect()
            }
            Ok(Some(RawBsonRef::String(n))) => vec![n.to_string()],
            Ok(Some(RawBsonRef::Array(a))) => {
                let mut v = Vec::new();
                for el in a {
                    match el {
                        Ok(RawBsonRef::String(n)) => v.push(n.to_string()),
                        Ok(other) => {
                            return Err(CommandError::wrong_type(
                                "dropIndexes.index",
                                type_name(&other),
                                "string",
                            ));
                        }
                        Err(e) => {
                            return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string()));
                        }
                    }
                }
                v
            }
            Ok(Some(RawBsonRef::Document(pattern))) => {
                let found: Vec<&cairn_storage::index::IndexMeta> = meta
                    .indexes
                    .iter()
                    .filter(|i| i.key_pattern().map(|k| k.as_bytes()) == Some(pattern.as_bytes()))
                    .collect();
                match found.as_slice() {
                    [one] => vec![one.name.clone()],
                    [] => {
                        return Err(CommandError::new(
                            ErrorCode::IndexNotFound,
                            format!(
                                "can't find index with key: {}",
                                cairn_storage::display::document(pattern)
                            ),
                        ));
                    }
                    [first, second, ..] => {
                        return Err(CommandError::new(
                            ErrorCode::AmbiguousIndexKeyPattern,
                            format!(
                                "{} indexes found for key: {}, identify by name instead. \
                                 Conflicting indexes: {}, {}",
                                found.len(),
                                cairn_storage::display::document(pattern),
                                cairn_storage::display::document(&first.spec),
                                cairn_storage::display::document(&second.spec)
                            ),
                        ));
                    }
                }
            }
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "dropIndexes.index",
                    type_name(&other),
                    "string",
                ));
            }
            _ => return Err(CommandError::missing_field("dropIndexes.index")),
        };
        for n in &names {
            if n == "_id_" {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    "cannot drop _id index",
                ));
            }
            if meta.index(n).is_none() {
                return Err(CommandError::new(
                    ErrorCode::IndexNotFound,
                    format!("index not found with name [{n}]"),
                ));
            }
        }
        let store = inv.server.store.clone();
        blocking::run(move || {
            for n in &names {
                store.drop_index(&db, &coll, n)?;
            }
            Ok(())
        })
        .await?;
        if all {
            return Ok(rawdoc! {
                "nIndexesWas": before as i32,
                "msg": "non-_id indexes dropped for collection",
            }
            .into());
        }
        Ok(rawdoc! {"nIndexesWas": before as i32}.into())
    })
}
