//! `profile`: read or change a database's profiler settings ([`crate::profiler`]).
//!
//! `{profile: <level>, slowms: <ms>, sampleRate: <0..1>, filter: <query> | "unset"}` on the
//! database to profile. Level 0 turns profiling off, 1 profiles operations slower than
//! `slowms` (sampled at `sampleRate`), 2 profiles every operation; any other level (e.g. -1)
//! only reads the settings. `slowms` and `sampleRate` are server-wide (they also drive the
//! "Slow query" log); `filter` is per database and, when set, replaces both rules for level 1
//! and for the log.
//! Changing settings so that the database profiles creates `<db>.system.profile` capped at
//! 1 MiB when missing, and fails with NamespaceExists (48), leaving the settings alone, when
//! a non-capped `system.profile` exists ([`crate::profiler::create_collection`]). Reply: the
//! settings as they were: `{was, slowms, sampleRate[, filter][, note]}`.

use std::sync::Arc;

use bson::{RawBsonRef, rawdoc};
use cairn_query::filter::Filter;

use super::{CmdFuture, Command, Counter, Fields, Invocation, type_name};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};
use crate::profiler::ProfileFilter;

/// `profile`.
pub static COMMAND: Command = Command {
    name: "profile",
    aliases: &[],
    help: "controls the behaviour of the performance profiler, the fraction of eligible operations which are sampled for logging/profiling, and the threshold duration at which ops become eligible. See http://docs.mongodb.org/manual/reference/command/profile",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&["slowms", "sampleRate", "filter"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::profile),
    run,
};

fn integer(v: RawBsonRef<'_>, field: &str) -> Result<i64, CommandError> {
    match v {
        RawBsonRef::Int32(i) => Ok(i64::from(i)),
        RawBsonRef::Int64(i) => Ok(i),
        RawBsonRef::Double(d) if d.is_finite() && d.fract() == 0.0 => Ok(d as i64),
        RawBsonRef::Decimal128(d) => d
            .to_string()
            .parse::<f64>()
            .ok()
            .filter(|f| f.fract() == 0.0)
            .map(|f| f as i64)
            .ok_or_else(|| CommandError::bad_value(format!("profile.{field} must be an integer"))),
        RawBsonRef::Double(_) => Err(CommandError::bad_value(format!(
            "BSON field 'profile.{field}' is not an integer"
        ))),
        other => Err(CommandError::new(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field 'profile.{field}' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                type_name(&other)
            ),
        )),
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let db = inv.req.db.to_string();
        let get = |f: &str| body.get(f).ok().flatten();
        let level = integer(
            get("profile").ok_or_else(|| CommandError::missing_field("profile.profile"))?,
            "profile",
        )?;
        let slowms = get("slowms").map(|v| integer(v, "slowms")).transpose()?;
        let sample_rate = match get("sampleRate") {
            None => None,
            Some(v @ (RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_))) => {
                let r = match v {
                    RawBsonRef::Int32(i) => f64::from(i),
                    RawBsonRef::Int64(i) => i as f64,
                    RawBsonRef::Double(d) => d,
                    _ => f64::NAN,
                };
                if !(0.0..=1.0).contains(&r) {
                    return Err(CommandError::bad_value(
                        "'sampleRate' must be between 0.0 and 1.0 inclusive",
                    ));
                }
                Some(r)
            }
            Some(other) => {
                return Err(CommandError::new(
                    ErrorCode::TypeMismatch,
                    format!(
                        "BSON field 'profile.sampleRate' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                        type_name(&other)
                    ),
                ));
            }
        };
        let filter = match get("filter") {
            None => None,
            Some(RawBsonRef::String("unset")) => Some(None),
            Some(RawBsonRef::Document(d)) => Some(Some(Arc::new(ProfileFilter {
                doc: d.to_owned(),
                filter: Filter::parse(d)?,
            }))),
            Some(_) => {
                return Err(CommandError::bad_value(
                    "Expected an object, or the string 'unset'.",
                ));
            }
        };
        let new_level = (0..=2).contains(&level).then_some(level as u8);
        let profiler = &inv.server.profiler;
        let current = profiler.settings(&db);
        let same = new_level.is_none_or(|l| l == current.level)
            && match &filter {
                None => true,
                Some(None) => current.filter.is_none(),
                Some(Some(f)) => current
                    .filter
                    .as_ref()
                    .is_some_and(|c| c.doc.as_bytes() == f.doc.as_bytes()),
            };
        let effective = new_level.unwrap_or(current.level);
        if effective > 0 && !same {
            // As mongod: settings that profile need a capped system.profile (created here when
            // missing); when that fails the settings stay as they were.
            cairn_storage::namespace::check_db_name(&db)?;
            let store = inv.server.store.clone();
            let d = db.clone();
            blocking::run(move || crate::profiler::create_collection(&store, &d)).await?;
        }
        let old_slowms = profiler.slow_ms();
        let old_rate = profiler.sample_rate();
        let changes = new_level.is_some() || filter.is_some();
        let has_new_filter = matches!(filter, Some(Some(_)));
        let old = if changes {
            profiler.set(&db, new_level, filter)
        } else {
            profiler.settings(&db)
        };
        if let Some(ms) = slowms {
            profiler.set_slow_ms(ms);
        }
        if let Some(r) = sample_rate {
            profiler.set_sample_rate(r);
        }
        let mut out = rawdoc! {
            "was": i32::from(old.level),
            "slowms": i32::try_from(old_slowms).unwrap_or(i32::MAX),
            "sampleRate": old_rate,
        };
        if let Some(f) = &old.filter {
            out.append(bson::raw::cstr!("filter"), f.doc.clone());
        }
        if old.filter.is_some() || has_new_filter {
            out.append(
                bson::raw::cstr!("note"),
                "When a filter expression is set, slowms and sampleRate are not used for profiling and slow-query log lines.",
            );
        }
        if changes || slowms.is_some() || sample_rate.is_some() {
            let now = profiler.settings(&db);
            tracing::info!(id = 48742, db = %db, fromLevel = old.level, toLevel = now.level,
                           slowms = profiler.slow_ms(), sampleRate = profiler.sample_rate(),
                           "Profiler settings changed");
        }
        Ok(out.into())
    })
}
