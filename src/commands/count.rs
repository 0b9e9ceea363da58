//! `count`: how many documents match. `{count: coll, query, skip, limit}` → `{n, ok}`.
//!
//! Without a query (or with `{}`) the answer comes from the collection's statistics, which
//! are kept exact transactionally (MongoDB answers from metadata the same way); otherwise
//! the matching documents are counted. `skip` applies first, then `limit` (a negative limit
//! counts as its absolute value, as in MongoDB).
//!
//! On a view the count is an aggregation, as MongoDB runs it: the view's pipeline, then
//! `$match` (a non-empty query), `$skip`, `$limit`, `$count`.

use bson::RawBsonRef;

use super::args::append_number;
use super::{
    CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, opt_document, type_name,
};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};
use crate::exec::count_matching;
use cairn_query::plan::Hint;

/// `count`.
pub static COMMAND: Command = Command {
    name: "count",
    aliases: &[],
    help: "count objects in collection",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Strict(&["query", "skip", "limit", "hint", "collation", "fields"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Ns(&[super::ActionType::Find]),
    run,
};

pub(crate) fn signed(body: &bson::RawDocument, field: &str) -> Result<i64, CommandError> {
    match body.get(field) {
        Ok(None) | Ok(Some(RawBsonRef::Null)) => Ok(0),
        Ok(Some(RawBsonRef::Int32(i))) => Ok(i64::from(i)),
        Ok(Some(RawBsonRef::Int64(i))) => Ok(i),
        Ok(Some(RawBsonRef::Double(d))) => Ok(d as i64),
        Ok(Some(other)) => Err(CommandError::new(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field 'count.{field}' is the wrong type '{}', expected types '[long, int, decimal, double']",
                type_name(&other)
            ),
        )),
        Err(e) => Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let coll = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        let query = opt_document(body, "count", "query")?;
        let filter = std::sync::Arc::new(
            crate::lang::Lang::for_command(body, "count", crate::lang::cluster_time(inv.server))?
                .filter(query)?,
        );
        let hint = super::args::parse_hint(body, "count")?;
        let skip = signed(body, "skip")?;
        if skip < 0 {
            return Err(CommandError::new(
                ErrorCode::Location(51024),
                format!("BSON field 'skip' value must be >= 0, actual value '{skip}'"),
            ));
        }
        let limit = signed(body, "limit")?.unsigned_abs();
        let server = inv.server.clone();
        let target = inv.op.target.clone();
        let lang =
            crate::lang::Lang::for_command(body, "count", crate::lang::cluster_time(inv.server))?;
        let own = crate::views::count_stages(query, skip, limit);
        let n = blocking::run(move || {
            if let Some(resolved) = crate::views::resolve_in(&server, &target, &db, &coll)? {
                let r = super::aggregate::AggRequest::for_view(
                    &server, &db, &coll, resolved, &own, lang, hint,
                )?;
                let mut n = 0u64;
                r.drain(&server, &target, |d| {
                    n = match d.get("count").ok().flatten() {
                        Some(RawBsonRef::Int32(i)) => u64::try_from(i).unwrap_or(0),
                        Some(RawBsonRef::Int64(i)) => u64::try_from(i).unwrap_or(0),
                        _ => 0,
                    };
                    Ok(true)
                })?;
                return Ok(n);
            }
            let store = &server.store;
            let total: u64 = if filter.is_empty() && hint == Hint::None {
                match store.collection(&db, &coll) {
                    Some(meta) => u64::try_from(store.stats(&meta)?.count).unwrap_or(0),
                    None => 0,
                }
            } else {
                let cap = if limit == 0 {
                    u64::MAX
                } else {
                    limit.saturating_add(skip as u64)
                };
                count_matching(&server, &target, &db, &coll, &filter, &hint, cap)?
            };
            let after_skip = total.saturating_sub(skip as u64);
            Ok(if limit == 0 {
                after_skip
            } else {
                after_skip.min(limit)
            })
        })
        .await?;
        let mut out = bson::RawDocumentBuf::new();
        append_number(
            &mut out,
            bson::raw::cstr!("n"),
            i64::try_from(n).unwrap_or(i64::MAX),
        );
        Ok(out.into())
    })
}
