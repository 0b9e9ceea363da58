//! Logging: `tracing` events rendered as MongoDB structured log lines.
//!
//! One layer, [`MongoLogLayer`], renders every event as the JSON line MongoDB 7.0 writes
//! (`{"t":{"$date":…},"s":"I",  "c":"NETWORK",  "id":23016,   "ctx":"listener","msg":…,
//! "attr":{…}}`, with MongoDB's column padding) and keeps it in the in-memory [`RamLogs`] that
//! `getLog` serves. With `--log-format json` the same lines go to stdout; with the default
//! human format a conventional `tracing_subscriber::fmt` layer writes to stdout instead.
//!
//! Conventions for events: the message is the MongoDB `msg`; an `id` field is the numeric
//! log id (MongoDB's own id where the event mirrors one of its messages); a field
//! `startup_warning = true` tags the line `startupWarnings` and also stores it in that log;
//! a field `x.json = %text` becomes the attribute `x` holding the JSON value `text` (how
//! documents are logged); every other field becomes an `attr`. The `ctx` is the `name` field of the innermost
//! enclosing span called `ctx` (e.g. `conn12`, `listener`).
//!
//! Invariants: the ring buffers are bounded (oldest lines dropped) and their mutex is only
//! held to push or copy lines, never across an `.await`.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogFormat;

/// Lines kept per in-memory log (MongoDB's RamLog keeps about this many).
pub const RAM_LOG_LINES: usize = 1024;

/// A bounded in-memory log.
#[derive(Debug, Default)]
pub struct RamLog {
    lines: Mutex<VecDeque<String>>,
    total: AtomicI64,
}

impl RamLog {
    /// Appends a line, dropping the oldest beyond [`RAM_LOG_LINES`].
    pub fn push(&self, line: String) {
        self.total.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut l) = self.lines.lock() {
            if l.len() >= RAM_LOG_LINES {
                l.pop_front();
            }
            l.push_back(line);
        }
    }

    /// The retained lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Lines written since start (including dropped ones).
    pub fn total_lines_written(&self) -> i64 {
        self.total.load(Ordering::Relaxed)
    }
}

/// The logs `getLog` knows, by name.
#[derive(Debug, Default)]
pub struct RamLogs {
    /// `global`: every line.
    pub global: RamLog,
    /// `startupWarnings`: warnings raised while starting.
    pub startup_warnings: RamLog,
}

impl RamLogs {
    /// The log names, sorted as MongoDB lists them.
    pub const NAMES: [&'static str; 2] = ["global", "startupWarnings"];

    /// The log with this name.
    pub fn get(&self, name: &str) -> Option<&RamLog> {
        match name {
            "global" => Some(&self.global),
            "startupWarnings" => Some(&self.startup_warnings),
            _ => None,
        }
    }
}

/// The tracing layer producing MongoDB log lines.
pub struct MongoLogLayer {
    logs: Arc<RamLogs>,
    to_stdout: bool,
}

struct CtxName(String);

#[derive(Default)]
struct Fields {
    message: String,
    id: Option<i64>,
    startup_warning: bool,
    name: Option<String>,
    attr: Map<String, Value>,
}

impl Visit for Fields {
    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "id" {
            self.id = Some(value);
        } else {
            self.attr
                .insert(field.name().to_string(), Value::from(value));
        }
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "id" {
            self.id = i64::try_from(value).ok();
        } else {
            self.attr
                .insert(field.name().to_string(), Value::from(value));
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.attr
            .insert(field.name().to_string(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "startup_warning" {
            self.startup_warning = value;
        } else {
            self.attr
                .insert(field.name().to_string(), Value::from(value));
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_string(),
            "name" => self.name = Some(value.to_string()),
            n => {
                self.attr.insert(n.to_string(), Value::from(value));
            }
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let s = format!("{value:?}");
        match field.name() {
            "message" => self.message = s,
            "name" => self.name = Some(s),
            n => {
                // `x.json = %text`: the attribute `x` is the JSON value `text`.
                if let Some(base) = n.strip_suffix(".json")
                    && let Ok(v) = serde_json::from_str::<Value>(&s)
                {
                    self.attr.insert(base.to_string(), v);
                    return;
                }
                self.attr.insert(n.to_string(), Value::from(s));
            }
        }
    }
}

fn component(target: &str) -> &'static str {
    if target.starts_with("cairn::server") || target.starts_with("cairn::connection") {
        "NETWORK"
    } else if target.starts_with("cairn::commands") {
        "COMMAND"
    } else if target.starts_with("cairn_storage") || target.starts_with("cairn::storage") {
        "STORAGE"
    } else if target.starts_with("cairn_query") {
        "QUERY"
    } else if target.starts_with("cairn") {
        "CONTROL"
    } else {
        "-"
    }
}

fn severity(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "E",
        Level::WARN => "W",
        Level::INFO => "I",
        Level::DEBUG => "D1",
        Level::TRACE => "D2",
    }
}

/// The current time as MongoDB prints it: ISO-8601 with milliseconds and a `+00:00` offset.
pub fn timestamp_now() -> String {
    let s = bson::DateTime::now()
        .try_to_rfc3339_string()
        .unwrap_or_default();
    match s.strip_suffix('Z') {
        Some(base) => format!("{base}+00:00"),
        None => s,
    }
}

/// Renders one log line in MongoDB's format.
pub fn render_line(
    sev: &str,
    comp: &str,
    id: i64,
    ctx: &str,
    msg: &str,
    attr: &Map<String, Value>,
    startup_warning: bool,
) -> String {
    let mut line = String::with_capacity(160);
    let q = |s: &str| Value::from(s).to_string();
    let _ = write!(line, "{{\"t\":{{\"$date\":{}}},", q(&timestamp_now()));
    let _ = write!(
        line,
        "\"s\":{},{}",
        q(sev),
        " ".repeat(3usize.saturating_sub(sev.len()))
    );
    let _ = write!(
        line,
        "\"c\":{},{}",
        q(comp),
        " ".repeat(9usize.saturating_sub(comp.len()))
    );
    let digits = id.to_string();
    let _ = write!(
        line,
        "\"id\":{digits},{}",
        " ".repeat(8usize.saturating_sub(digits.len()))
    );
    let _ = write!(line, "\"ctx\":{},\"msg\":{}", q(ctx), q(msg));
    if !attr.is_empty() {
        let _ = write!(line, ",\"attr\":{}", Value::Object(attr.clone()));
    }
    if startup_warning {
        line.push_str(",\"tags\":[\"startupWarnings\"]");
    }
    line.push('}');
    line
}

impl<S> Layer<S> for MongoLogLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "ctx" {
            return;
        }
        let mut f = Fields::default();
        attrs.record(&mut f);
        if let (Some(name), Some(span)) = (f.name, ctx.span(id)) {
            span.extensions_mut().insert(CtxName(name));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        let mut ctx_name = String::from("-");
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope {
                if let Some(CtxName(n)) = span.extensions().get::<CtxName>() {
                    ctx_name = n.clone();
                    break;
                }
            }
        }
        let meta = event.metadata();
        let line = render_line(
            severity(meta.level()),
            component(meta.target()),
            f.id.unwrap_or(0),
            &ctx_name,
            &f.message,
            &f.attr,
            f.startup_warning,
        );
        if self.to_stdout {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
        }
        if f.startup_warning {
            self.logs.startup_warnings.push(line.clone());
        }
        self.logs.global.push(line);
    }
}

/// Installs the global subscriber; returns the in-memory logs it feeds.
pub fn init(format: LogFormat, filter: &str) -> Arc<RamLogs> {
    let logs = Arc::new(RamLogs::default());
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let mongo = MongoLogLayer {
        logs: logs.clone(),
        to_stdout: format == LogFormat::Json,
    };
    let registry = tracing_subscriber::registry().with(filter).with(mongo);
    let result = match format {
        LogFormat::Json => registry.try_init(),
        LogFormat::Human => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_target(false)
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout())),
            )
            .try_init(),
    };
    if let Err(e) = result {
        eprintln!("logging already initialised: {e}");
    }
    logs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_matches_mongodb_layout() {
        let mut attr = Map::new();
        attr.insert("port".into(), Value::from(27017));
        let line = render_line(
            "I",
            "NETWORK",
            23016,
            "listener",
            "Waiting for connections",
            &attr,
            false,
        );
        let rest = line.split_once("},").unwrap().1;
        assert_eq!(
            rest,
            "\"s\":\"I\",  \"c\":\"NETWORK\",  \"id\":23016,   \"ctx\":\"listener\",\"msg\":\"Waiting for connections\",\"attr\":{\"port\":27017}}"
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        assert!(v["t"]["$date"].as_str().unwrap().ends_with("+00:00"));
    }

    #[test]
    fn startup_warning_tag() {
        let line = render_line(
            "W",
            "CONTROL",
            22120,
            "initandlisten",
            "x",
            &Map::new(),
            true,
        );
        assert!(line.ends_with(",\"tags\":[\"startupWarnings\"]}"));
        serde_json::from_str::<Value>(&line).unwrap();
    }

    #[test]
    fn ram_log_is_bounded() {
        let log = RamLog::default();
        for i in 0..(RAM_LOG_LINES + 10) {
            log.push(i.to_string());
        }
        let lines = log.lines();
        assert_eq!(lines.len(), RAM_LOG_LINES);
        assert_eq!(lines[0], "10");
        assert_eq!(log.total_lines_written(), (RAM_LOG_LINES + 10) as i64);
    }
}
