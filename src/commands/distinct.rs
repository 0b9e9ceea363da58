//! `distinct`: the distinct values of a field among matching documents.
//!
//! `{distinct: coll, key, query}` → `{values: [...], ok}`. Values are gathered along the
//! dotted `key` with MongoDB's path rules (arrays of documents traversed); an array value
//! contributes its elements (one level), not itself. Duplicates are removed by MongoDB's
//! comparison (so `1`, `NumberLong(1)` and `1.0` are one value, the first seen kept), and the
//! values come back in BSON comparison order. More than 16 MiB of values is error 17217.
//!
//! On a view the documents come from an aggregation — the view's pipeline, then `$match` (a
//! non-empty query) — and their values are gathered the same way.

use bson::{RawArrayBuf, RawBson, RawBsonRef, rawdoc};
use cairn_query::path::{FieldPath, LeafArrays, values};
use cairn_storage::compare::compare_values;

use super::{
    CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, opt_document, type_name,
};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};
use crate::exec::scan_matching;

/// `distinct`.
pub static COMMAND: Command = Command {
    name: "distinct",
    aliases: &[],
    help: "{ distinct : 'collection name' , key : 'a.b' , query : {} }",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&["key", "query", "collation"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Ns(&[super::ActionType::Find]),
    run,
};

fn insert_sorted(set: &mut Vec<RawBson>, v: RawBsonRef<'_>, bytes: &mut usize) {
    match set.binary_search_by(|x| compare_values(x.as_raw_bson_ref(), v)) {
        Ok(_) => {}
        Err(pos) => {
            let owned = RawBson::from(v);
            *bytes += std::mem::size_of_val(&owned) + 16;
            set.insert(pos, owned);
        }
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let coll = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        let key = match body.get("key") {
            Ok(Some(RawBsonRef::String(k))) => k.to_string(),
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "distinct.key",
                    type_name(&other),
                    "string",
                ));
            }
            _ => return Err(CommandError::missing_field("distinct.key")),
        };
        if key.is_empty() {
            return Err(CommandError::bad_value(
                "FieldPath cannot be constructed with empty string",
            ));
        }
        let filter = std::sync::Arc::new(
            crate::lang::Lang::for_command(
                body,
                "distinct",
                crate::lang::cluster_time(inv.server),
            )?
            .filter(opt_document(body, "distinct", "query")?)?,
        );
        // `hint` is a 7.1 addition: MongoDB 7.0 refuses it as an unknown field.
        let hint = cairn_query::plan::Hint::None;
        let server = inv.server.clone();
        let target = inv.op.target.clone();
        let lang = crate::lang::Lang::for_command(
            body,
            "distinct",
            crate::lang::cluster_time(inv.server),
        )?;
        let mut own = RawArrayBuf::new();
        if let Some(q) = opt_document(body, "distinct", "query")?.filter(|q| !q.is_empty()) {
            own.push(rawdoc! {"$match": q.to_owned()});
        }
        let set = blocking::run(move || {
            let path = FieldPath::new(&key);
            let mut set: Vec<RawBson> = Vec::new();
            let mut bytes = 0usize;
            let mut gather = |doc: &bson::RawDocument| {
                for pv in values(doc, &path, LeafArrays::Whole) {
                    match pv.value {
                        Some(RawBsonRef::Array(a)) => {
                            for el in a.into_iter().flatten() {
                                insert_sorted(&mut set, el, &mut bytes);
                            }
                        }
                        Some(v) => insert_sorted(&mut set, v, &mut bytes),
                        None => {}
                    }
                }
                bytes < 16 * 1024 * 1024
            };
            if let Some(resolved) = crate::views::resolve_in(&server, &target, &db, &coll)? {
                let r = super::aggregate::AggRequest::for_view(
                    &server, &db, &coll, resolved, &own, lang, hint,
                )?;
                r.drain(&server, &target, |d| Ok(gather(&d)))?;
            } else {
                scan_matching(&server, &target, &db, &coll, &filter, &hint, |doc| {
                    Ok(gather(&doc))
                })?;
            }
            if bytes >= 16 * 1024 * 1024 {
                return Err(CommandError::new(
                    ErrorCode::Location(17217),
                    "distinct too big, 16mb cap",
                ));
            }
            Ok(set)
        })
        .await?;
        let mut arr = RawArrayBuf::new();
        for v in set {
            arr.push(v);
        }
        let mut out = rawdoc! {"values": arr};
        if let Some(t) = inv.op.at_cluster_time {
            out.append(bson::raw::cstr!("atClusterTime"), t);
        }
        Ok(out.into())
    })
}
