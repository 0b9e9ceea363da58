//! Server parameters (`getParameter` / `setParameter`): one sorted table with MongoDB's
//! names, each parameter's current value and, for those settable at runtime, how to change
//! it with MongoDB's validation.

use std::sync::atomic::Ordering;

use bson::{RawBson, RawBsonRef, rawdoc};

use crate::commands::type_name;
use crate::error::CommandError;
use crate::state::ServerState;

/// An integer parameter value of at least `min` (MongoDB's `gte` validators).
fn int_at_least(name: &str, v: RawBsonRef<'_>, min: i64) -> Result<u64, CommandError> {
    let n = match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) if d.fract() == 0.0 && d.is_finite() => d as i64,
        other => {
            return Err(CommandError::bad_value(format!(
                "Invalid value for parameter {name}: {} is not a valid integer",
                type_name(&other)
            )));
        }
    };
    if n < min {
        return Err(CommandError::bad_value(format!(
            "Invalid value for parameter {name}: {n} is not greater than or equal to {min}"
        )));
    }
    Ok(n as u64)
}

/// How a runtime-settable parameter takes a new value.
pub type Setter = fn(&ServerState, RawBsonRef<'_>) -> Result<(), CommandError>;

/// The parameter with this name.
pub fn find(name: &str) -> Option<&'static Parameter> {
    PARAMETERS.iter().find(|p| p.name == name)
}

/// A parameter: its name, whether it can be set at startup, and how to read it.
pub struct Parameter {
    /// MongoDB's name.
    pub name: &'static str,
    /// Whether it can be set at startup.
    pub settable_at_startup: bool,
    /// Its current value.
    pub value: fn(&ServerState) -> RawBson,
    /// How `setParameter` changes it at runtime (`None`: not settable at runtime).
    pub set: Option<Setter>,
}

/// `logLevel`: 0 (info), 1 (debug) or 2 (trace), from the tracing filter.
pub fn log_level(s: &ServerState) -> RawBson {
    let l = s.config.log_level.to_ascii_lowercase();
    RawBson::Int32(if l.contains("trace") {
        2
    } else if l.contains("debug") {
        1
    } else {
        0
    })
}

/// `logComponentVerbosity`: the global verbosity; Cairn has no per-component settings, so
/// every component inherits it (-1, as MongoDB reports an unset component).
pub fn log_component_verbosity(s: &ServerState) -> RawBson {
    let level = match log_level(s) {
        RawBson::Int32(l) => l,
        _ => 0,
    };
    let mut d = rawdoc! {"verbosity": level};
    for c in ["command", "control", "network", "query", "storage"] {
        if let Ok(k) = <&bson::raw::CStr>::try_from(c) {
            d.append(k, rawdoc! {"verbosity": -1});
        }
    }
    RawBson::Document(d)
}

/// The parameters, sorted by name.
pub static PARAMETERS: &[Parameter] = &[
    Parameter {
        name: "allowDiskUseByDefault",
        settable_at_startup: true,
        value: |s| RawBson::Boolean(s.config.allow_disk_use_by_default),
        set: None,
    },
    Parameter {
        name: "cursorTimeoutMillis",
        settable_at_startup: true,
        value: |s| RawBson::Int64(i64::try_from(s.config.cursor_timeout_ms).unwrap_or(i64::MAX)),
        set: None,
    },
    Parameter {
        name: "featureCompatibilityVersion",
        settable_at_startup: false,
        value: |_| RawBson::Document(rawdoc! {"version": "7.0"}),
        set: None,
    },
    Parameter {
        name: "internalQueryMaxBlockingSortMemoryUsageBytes",
        settable_at_startup: true,
        value: |s| {
            RawBson::Int64(i64::try_from(s.config.sort_memory_limit_bytes).unwrap_or(i64::MAX))
        },
        set: None,
    },
    Parameter {
        name: "localLogicalSessionTimeoutMinutes",
        settable_at_startup: true,
        value: |s| RawBson::Int32((s.sessions.timeout.as_secs() / 60) as i32),
        set: None,
    },
    Parameter {
        name: "logComponentVerbosity",
        settable_at_startup: true,
        value: log_component_verbosity,
        set: None,
    },
    Parameter {
        name: "logLevel",
        settable_at_startup: true,
        value: log_level,
        set: None,
    },
    Parameter {
        name: "maxBSONDepth",
        settable_at_startup: false,
        value: |_| RawBson::Int32(cairn_wire::MAX_BSON_DEPTH as i32),
        set: None,
    },
    Parameter {
        name: "minSnapshotHistoryWindowInSeconds",
        settable_at_startup: true,
        value: |s| {
            RawBson::Int32(
                i32::try_from(s.store.history_window_secs.load(Ordering::Relaxed))
                    .unwrap_or(i32::MAX),
            )
        },
        set: Some(|s, v| {
            let n = int_at_least("minSnapshotHistoryWindowInSeconds", v, 0)?;
            s.store.history_window_secs.store(n, Ordering::Relaxed);
            Ok(())
        }),
    },
    Parameter {
        name: "transactionLifetimeLimitSeconds",
        settable_at_startup: true,
        value: |s| {
            RawBson::Int32(
                i32::try_from(s.sessions.txn_lifetime_secs.load(Ordering::Relaxed))
                    .unwrap_or(i32::MAX),
            )
        },
        set: Some(|s, v| {
            let n = int_at_least("transactionLifetimeLimitSeconds", v, 1)?;
            s.sessions.txn_lifetime_secs.store(n, Ordering::Relaxed);
            Ok(())
        }),
    },
    Parameter {
        name: "ttlMonitorEnabled",
        settable_at_startup: true,
        value: |s| RawBson::Boolean(s.config.ttl_monitor_sleep_secs > 0),
        set: None,
    },
    Parameter {
        name: "ttlMonitorSleepSecs",
        settable_at_startup: true,
        value: |s| {
            RawBson::Int32(i32::try_from(s.config.ttl_monitor_sleep_secs).unwrap_or(i32::MAX))
        },
        set: None,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_sorted() {
        let names: Vec<_> = PARAMETERS.iter().map(|p| p.name).collect();
        let mut s = names.clone();
        s.sort_unstable();
        assert_eq!(names, s);
    }
}
