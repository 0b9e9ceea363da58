//! Server parameters (`getParameter` / `setParameter` / `--setParameter`): one sorted table
//! with MongoDB's names, each parameter's current value and, for those settable at runtime,
//! how to change it with MongoDB's validation.
//!
//! At startup, `--setParameter name=value` goes through [`apply_startup`]: parameters kept in
//! the [`Config`] are set there (before anything reads them); parameters kept in live server
//! state are checked and applied once the state exists ([`apply_startup_state`]), through
//! the same setters `setParameter` uses. Unknown names and runtime-only parameters stop the
//! server with MongoDB's messages.

use std::sync::atomic::Ordering;

use bson::{RawBson, RawBsonRef, rawdoc};

use crate::commands::type_name;
use crate::config::Config;
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

/// How `--setParameter` sets a parameter at startup.
#[derive(Clone, Copy)]
pub enum Startup {
    /// Not settable at startup.
    No,
    /// It lives in the configuration: parse the text into it.
    Config(fn(&mut Config, &str) -> Result<(), String>),
    /// It lives in server state: the text becomes a BSON value (a number or a boolean when
    /// it reads as one) given to the runtime setter once the state exists.
    State,
}

/// A parameter: its name, how it is set at startup, and how to read it.
pub struct Parameter {
    /// MongoDB's name.
    pub name: &'static str,
    /// How `--setParameter` sets it.
    pub startup: Startup,
    /// Its current value.
    pub value: fn(&ServerState) -> RawBson,
    /// How `setParameter` changes it at runtime (`None`: not settable at runtime).
    pub set: Option<Setter>,
}

impl Parameter {
    /// Whether `--setParameter` can set it.
    pub fn settable_at_startup(&self) -> bool {
        !matches!(self.startup, Startup::No)
    }
}

/// A boolean as `--setParameter` takes it (`true`/`false`/`1`/`0`).
fn parse_bool(name: &str, text: &str) -> Result<bool, String> {
    match text {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!(
            "Bad value for parameter \"{name}\": Invalid boolean value: {text}"
        )),
    }
}

/// A non-negative integer as `--setParameter` takes it.
fn parse_u64(name: &str, text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .map_err(|_| format!("Bad value for parameter \"{name}\": Failed to parse number '{text}'"))
}

/// The text of a `--setParameter` value as the BSON a runtime setter takes.
fn text_value(text: &str) -> RawBson {
    if let Ok(i) = text.parse::<i64>() {
        RawBson::Int64(i)
    } else if let Ok(d) = text.parse::<f64>() {
        RawBson::Double(d)
    } else if let Ok(b) = parse_bool("", text) {
        RawBson::Boolean(b)
    } else {
        RawBson::String(text.to_string())
    }
}

/// Splits `name=value` as mongod does, or says why it cannot.
fn split_assignment(arg: &str) -> Result<(&str, &str), String> {
    arg.split_once('=').ok_or_else(|| {
        format!("Illegal option assignment: \"{arg}\" (expected --setParameter <name>=<value>)")
    })
}

/// Applies the `--setParameter` values that live in the configuration, and checks the rest
/// (unknown names, runtime-only parameters), in command-line order.
pub fn apply_startup(config: &mut Config) -> Result<(), String> {
    for arg in config.set_parameter.clone() {
        let (name, text) = split_assignment(&arg)?;
        let p = find(name).ok_or_else(|| format!("Unknown --setParameter '{name}'"))?;
        match p.startup {
            Startup::No => {
                return Err(format!(
                    "Cannot use --setParameter to set \"{name}\" at startup"
                ));
            }
            Startup::Config(set) => set(config, text)?,
            Startup::State => {}
        }
    }
    Ok(())
}

/// Applies the `--setParameter` values that live in server state (after [`apply_startup`]
/// accepted them).
pub fn apply_startup_state(state: &ServerState) -> Result<(), String> {
    for arg in &state.config.set_parameter {
        let (name, text) = split_assignment(arg)?;
        if let Some(p) = find(name)
            && let (Startup::State, Some(set)) = (p.startup, p.set)
        {
            let v = text_value(text);
            set(state, v.as_raw_bson_ref()).map_err(|e| e.message)?;
        }
    }
    Ok(())
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
        startup: Startup::Config(|c, t| {
            c.allow_disk_use_by_default = parse_bool("allowDiskUseByDefault", t)?;
            Ok(())
        }),
        value: |s| RawBson::Boolean(s.config.allow_disk_use_by_default),
        set: None,
    },
    Parameter {
        name: "authFailedDelayMs",
        startup: Startup::State,
        value: |s| {
            RawBson::Int32(
                i32::try_from(s.auth.failed_delay_ms.load(Ordering::Relaxed)).unwrap_or(i32::MAX),
            )
        },
        set: Some(|s, v| {
            let n = int_at_least("authFailedDelayMs", v, 0)?;
            if n > 5000 {
                return Err(CommandError::bad_value(format!(
                    "Invalid value for parameter authFailedDelayMs: {n} is not less than or equal to 5000"
                )));
            }
            s.auth.failed_delay_ms.store(n, Ordering::Relaxed);
            Ok(())
        }),
    },
    Parameter {
        name: "cursorTimeoutMillis",
        startup: Startup::Config(|c, t| {
            c.cursor_timeout_ms = parse_u64("cursorTimeoutMillis", t)?;
            Ok(())
        }),
        value: |s| RawBson::Int64(i64::try_from(s.config.cursor_timeout_ms).unwrap_or(i64::MAX)),
        set: None,
    },
    Parameter {
        name: "enableLocalhostAuthBypass",
        startup: Startup::State,
        value: |s| RawBson::Boolean(s.auth.localhost_bypass.load(Ordering::Relaxed)),
        set: Some(|s, v| {
            let b = match v {
                RawBsonRef::Boolean(b) => b,
                RawBsonRef::Int32(i) => i != 0,
                RawBsonRef::Int64(i) => i != 0,
                _ => {
                    return Err(CommandError::bad_value(format!(
                        "Invalid value for parameter enableLocalhostAuthBypass: {} is not a boolean",
                        type_name(&v)
                    )));
                }
            };
            s.auth.localhost_bypass.store(b, Ordering::Relaxed);
            Ok(())
        }),
    },
    Parameter {
        name: "enableTestCommands",
        startup: Startup::Config(|c, t| {
            c.enable_test_commands = parse_bool("enableTestCommands", t)?;
            Ok(())
        }),
        value: |s| RawBson::Boolean(s.config.enable_test_commands),
        set: None,
    },
    Parameter {
        name: "featureCompatibilityVersion",
        startup: Startup::No,
        value: |_| RawBson::Document(rawdoc! {"version": "7.0"}),
        set: None,
    },
    Parameter {
        name: "internalQueryMaxBlockingSortMemoryUsageBytes",
        startup: Startup::Config(|c, t| {
            c.sort_memory_limit_bytes =
                parse_u64("internalQueryMaxBlockingSortMemoryUsageBytes", t)?;
            Ok(())
        }),
        value: |s| {
            RawBson::Int64(i64::try_from(s.config.sort_memory_limit_bytes).unwrap_or(i64::MAX))
        },
        set: None,
    },
    Parameter {
        name: "localLogicalSessionTimeoutMinutes",
        startup: Startup::No,
        value: |s| RawBson::Int32((s.sessions.timeout.as_secs() / 60) as i32),
        set: None,
    },
    Parameter {
        name: "logComponentVerbosity",
        startup: Startup::No,
        value: log_component_verbosity,
        set: None,
    },
    Parameter {
        name: "logLevel",
        startup: Startup::Config(|c, t| {
            c.log_level = match parse_u64("logLevel", t)? {
                0 => "info",
                1 => "debug",
                _ => "trace",
            }
            .to_string();
            Ok(())
        }),
        value: log_level,
        set: None,
    },
    Parameter {
        name: "maxBSONDepth",
        startup: Startup::No,
        value: |_| RawBson::Int32(cairn_wire::MAX_BSON_DEPTH as i32),
        set: None,
    },
    Parameter {
        name: "minSnapshotHistoryWindowInSeconds",
        startup: Startup::State,
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
        name: "scramIterationCount",
        startup: Startup::State,
        value: |s| RawBson::Int32(s.auth.iterations().0 as i32),
        set: Some(|s, v| {
            let n = int_at_least("scramIterationCount", v, 5000)?;
            let n = u32::try_from(n).unwrap_or(u32::MAX).min(i32::MAX as u32);
            s.auth.sha1_iterations.store(n, Ordering::Relaxed);
            Ok(())
        }),
    },
    Parameter {
        name: "scramSHA256IterationCount",
        startup: Startup::State,
        value: |s| RawBson::Int32(s.auth.iterations().1 as i32),
        set: Some(|s, v| {
            let n = int_at_least("scramSHA256IterationCount", v, 5000)?;
            let n = u32::try_from(n).unwrap_or(u32::MAX).min(i32::MAX as u32);
            s.auth.sha256_iterations.store(n, Ordering::Relaxed);
            Ok(())
        }),
    },
    Parameter {
        name: "transactionLifetimeLimitSeconds",
        startup: Startup::State,
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
        startup: Startup::Config(|c, t| {
            if !parse_bool("ttlMonitorEnabled", t)? {
                c.ttl_monitor_sleep_secs = 0;
            }
            Ok(())
        }),
        value: |s| RawBson::Boolean(s.config.ttl_monitor_sleep_secs > 0),
        set: None,
    },
    Parameter {
        name: "ttlMonitorSleepSecs",
        startup: Startup::Config(|c, t| {
            c.ttl_monitor_sleep_secs = parse_u64("ttlMonitorSleepSecs", t)?;
            Ok(())
        }),
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
    fn startup_values() {
        let mut c = Config::for_tests(std::path::PathBuf::from("/nonexistent"));
        c.set_parameter = vec![
            "enableTestCommands=1".into(),
            "cursorTimeoutMillis=1234".into(),
            "transactionLifetimeLimitSeconds=5".into(),
        ];
        apply_startup(&mut c).unwrap();
        assert!(c.enable_test_commands);
        assert_eq!(c.cursor_timeout_ms, 1234);
        for (arg, msg) in [
            ("noSuchThing=1", "Unknown --setParameter 'noSuchThing'"),
            (
                "maxBSONDepth=3",
                "Cannot use --setParameter to set \"maxBSONDepth\" at startup",
            ),
            ("enableTestCommands", "Illegal option assignment"),
            ("enableTestCommands=yes", "Invalid boolean value"),
        ] {
            c.set_parameter = vec![arg.into()];
            let e = apply_startup(&mut c).unwrap_err();
            assert!(e.contains(msg), "{arg}: {e}");
        }
        assert_eq!(text_value("12"), RawBson::Int64(12));
        assert_eq!(text_value("true"), RawBson::Boolean(true));
    }

    #[test]
    fn parameters_sorted() {
        let names: Vec<_> = PARAMETERS.iter().map(|p| p.name).collect();
        let mut s = names.clone();
        s.sort_unstable();
        assert_eq!(names, s);
    }
}
