//! `delete`: remove documents. `{delete: coll, deletes: [{q, limit: 0|1, collation, hint}],
//! ordered, writeConcern}` → `{n, [writeErrors], [writeConcernError], ok}`.
//!
//! Each statement's filter is parsed up front (a bad filter is that statement's write
//! error); `limit: 1` removes the first match in `_id` order, `limit: 0` every match. Each
//! document disappears atomically (all its keys in one transaction); a multi-document delete
//! runs as several transactions (see [`crate::exec`]). Ordered statements stop at the
//! first error.

use std::sync::atomic::Ordering::Relaxed;

use bson::{RawBsonRef, RawDocument};
use std::sync::Arc;

use cairn_query::filter::Filter;
use cairn_query::plan::Hint;

use super::insert::write_reply;
use super::{
    CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, opt_strict_bool,
    type_name,
};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};
use crate::exec::{Step, for_each_match};
use crate::lang::Lang;
use crate::write_concern::WriteConcern;

/// `delete`.
pub static COMMAND: Command = Command {
    name: "delete",
    aliases: &[],
    help: "delete documents",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(&[
        "deletes",
        "ordered",
        "stmtIds",
        "let",
        "bypassDocumentValidation",
    ]),
    counter: Counter::SelfCounted,
    kill_on_disconnect: false,
    authz: super::Authz::Ns(&[super::ActionType::Remove]),
    run,
};

/// One parsed delete statement.
pub(crate) struct Statement {
    /// The filter.
    pub(crate) filter: Arc<Filter>,
    /// `limit: 1`.
    pub(crate) limit_one: bool,
    /// The statement's `hint`.
    pub(crate) hint: Hint,
}

/// Parses one statement. Structural errors (field types, a missing or invalid `limit`,
/// unknown fields) fail the whole command, as MongoDB's request parser does; the filter's
/// errors belong to the statement (a `writeErrors` entry).
#[allow(clippy::type_complexity)]
pub(crate) fn parse_statement(
    lang: &Lang,
    i: usize,
    d: &RawDocument,
) -> Result<Result<Statement, CommandError>, CommandError> {
    let mut q = None;
    let mut limit = None;
    let mut hint = Hint::None;
    for el in d.iter() {
        let (k, v) = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match k.as_str() {
            "q" => match v {
                RawBsonRef::Document(f) => q = Some(f),
                other => {
                    return Err(CommandError::wrong_type(
                        "delete.deletes.q",
                        type_name(&other),
                        "object",
                    ));
                }
            },
            "limit" => {
                // Compared as a double, so 0.5 is refused rather than truncated to 0.
                let n = match v {
                    RawBsonRef::Int32(i) => f64::from(i),
                    RawBsonRef::Int64(i) => i as f64,
                    RawBsonRef::Double(f) => f,
                    other => {
                        return Err(CommandError::wrong_type(
                            "delete.deletes.limit",
                            type_name(&other),
                            "long",
                        ));
                    }
                };
                if n != 0.0 && n != 1.0 {
                    return Err(CommandError::new(
                        ErrorCode::FailedToParse,
                        format!("The limit field in delete objects must be 0 or 1. Got {n}"),
                    ));
                }
                limit = Some(n == 1.0);
            }
            "collation" => {
                if !matches!(v, RawBsonRef::Document(c) if matches!(c.get("locale"), Ok(Some(RawBsonRef::String("simple")))))
                {
                    return Err(CommandError::new(
                        ErrorCode::NotImplemented,
                        "collations other than simple are not supported by Cairn yet",
                    ));
                }
            }
            "hint" => hint = super::args::hint_value(v, "delete.deletes.hint")?,
            other => {
                return Err(CommandError::unknown_field(
                    &format!("delete.deletes.{i}"),
                    other,
                ));
            }
        }
    }
    let q = q.ok_or_else(|| CommandError::missing_field("delete.deletes.q"))?;
    let limit_one = limit.ok_or_else(|| CommandError::missing_field("delete.deletes.limit"))?;
    Ok(lang.filter(Some(q)).map(|filter| Statement {
        filter: Arc::new(filter),
        limit_one,
        hint,
    }))
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let coll = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        super::insert::check_txn_write(inv.server, inv.op, &db, &coll)?;
        cairn_storage::namespace::check_write(&db, &coll).map_err(CommandError::from)?;
        let ordered = opt_strict_bool(inv.parsed, "delete", "ordered")?.unwrap_or(true);
        let wc = WriteConcern::from_command(inv.parsed)?;
        let lang = Lang::for_command(inv.parsed, "delete", crate::lang::cluster_time(inv.server))?;
        let stmts = match inv.parsed.get("deletes") {
            Ok(Some(RawBsonRef::Array(a))) => a,
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "delete.deletes",
                    type_name(&other),
                    "array",
                ));
            }
            _ => return Err(CommandError::missing_field("delete.deletes")),
        };
        let mut parsed: Vec<Result<Statement, CommandError>> = Vec::new();
        for (i, el) in stmts.into_iter().enumerate() {
            let el = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let RawBsonRef::Document(d) = el else {
                return Err(CommandError::wrong_type(
                    &format!("delete.deletes.{i}"),
                    type_name(&el),
                    "object",
                ));
            };
            parsed.push(parse_statement(&lang, i, d)?);
        }
        super::args::check_batch_size(parsed.len())?;
        inv.server
            .opcounters
            .delete
            .fetch_add(parsed.len() as i64, Relaxed);
        let server = inv.server.clone();
        let durability = wc.durability();
        let target = inv.op.target.clone();
        let ordered = ordered || target.in_txn();
        let retry = inv.op.retry;
        let stmt_ids = crate::session::retry::stmt_ids(inv.parsed, "delete", parsed.len())?;
        // One statement by `_id` deletes one document: inline (see `blocking::short_write`).
        let point = parsed.len() == 1
            && matches!(parsed.first(), Some(Ok(st))
                if st.filter.id_equality().is_some() && matches!(st.hint, Hint::None));
        let short = point && blocking::short_write(&server.store, &db, &coll, durability);
        let (n, errors, retried) = blocking::run_short(short, move || {
            let mut n = 0usize;
            let mut errors = Vec::new();
            let mut retried = Vec::new();
            let done = match &retry {
                Some(r) => r.executed(&server.store, &stmt_ids)?,
                None => vec![None; stmt_ids.len()],
            };
            for (i, st) in parsed.into_iter().enumerate() {
                let stmt = stmt_ids.get(i).copied().unwrap_or(0);
                if let Some(Some(rec)) = done.get(i) {
                    n += usize::try_from(rec.get_i32("n").unwrap_or(0)).unwrap_or(0);
                    retried.push(stmt);
                    continue;
                }
                let r = st.and_then(|st| {
                    crate::views::check_not_view(&server, &db, &coll)?;
                    if retry.is_some() && !st.limit_one {
                        return Err(CommandError::new(
                            ErrorCode::InvalidOptions,
                            "Cannot use (or request) retryable writes with limit=0",
                        ));
                    }
                    for_each_match(
                        &server,
                        &target,
                        &db,
                        &coll,
                        &st.filter,
                        &st.hint,
                        None,
                        durability,
                        st.limit_one,
                        |tx, meta, key, _doc| {
                            let gone = tx.delete_by_key(meta, key).map_err(CommandError::from)?;
                            if gone && let Some(r) = &retry {
                                r.record(tx, stmt, &bson::rawdoc! {"n": 1})?;
                            }
                            Ok((Step::Continue, gone))
                        },
                    )
                    .map(|v| v.counted)
                });
                match r {
                    Ok(k) => n += k,
                    Err(e) => {
                        errors.push((i, e));
                        if ordered {
                            break;
                        }
                    }
                }
            }
            Ok((n, errors, retried))
        })
        .await?;
        Ok(write_reply(n, &errors, &retried, &wc).into())
    })
}
