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
//! With `--log-path` every line also goes to that file ([`LogFile`], MongoDB's `--logpath`),
//! which `logRotate` (or SIGUSR1) rotates: `rename` moves the current file aside as
//! `<path>.<UTC timestamp>` and starts a new one, `reopen` reopens the path (for an external
//! tool such as logrotate that already moved it).
//!
//! Invariants: the ring buffers are bounded (oldest lines dropped) and their mutex is only
//! held to push or copy lines, never across an `.await`; the log file's mutex is held only to
//! write one line or to swap the file.

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

/// How `logRotate` treats the log file (MongoDB's `--logRotate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RotateMode {
    /// Rename the file aside with a timestamp and start a new one.
    Rename,
    /// Close and reopen the path (an external tool moved the file).
    Reopen,
}

/// The log file (`--log-path`).
#[derive(Debug)]
pub struct LogFile {
    path: std::path::PathBuf,
    mode: RotateMode,
    file: Mutex<std::fs::File>,
}

fn open_log(path: &std::path::Path, append: bool) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.create(true);
    if append {
        o.append(true);
    } else {
        o.write(true).truncate(true);
    }
    o.open(path)
}

impl LogFile {
    /// Opens the log file (appending or truncating).
    pub fn open(
        path: &std::path::Path,
        append: bool,
        mode: RotateMode,
    ) -> std::io::Result<LogFile> {
        Ok(LogFile {
            path: path.to_path_buf(),
            mode,
            file: Mutex::new(open_log(path, append)?),
        })
    }

    fn write_line(&self, line: &str) {
        if let Ok(mut f) = self.file.lock() {
            let _ = writeln!(f, "{line}");
        }
    }

    /// Rotates the file; returns the name the old file was renamed to (`rename` mode).
    pub fn rotate(&self) -> std::io::Result<Option<std::path::PathBuf>> {
        let mut f = self
            .file
            .lock()
            .map_err(|_| std::io::Error::other("log lock poisoned"))?;
        let _ = f.flush();
        let renamed = match self.mode {
            RotateMode::Rename => {
                let stamp = timestamp_now()
                    .get(..19)
                    .unwrap_or_default()
                    .replace(':', "-");
                let mut n = 0;
                let target = loop {
                    let mut t = self.path.clone().into_os_string();
                    if n == 0 {
                        t.push(format!(".{stamp}"));
                    } else {
                        t.push(format!(".{stamp}.{n}"));
                    }
                    let t = std::path::PathBuf::from(t);
                    if !t.exists() {
                        break t;
                    }
                    n += 1;
                };
                std::fs::rename(&self.path, &target)?;
                Some(target)
            }
            RotateMode::Reopen => None,
        };
        *f = open_log(&self.path, true)?;
        Ok(renamed)
    }
}

/// The logs `getLog` knows, by name, and the log file.
#[derive(Debug, Default)]
pub struct RamLogs {
    /// `global`: every line.
    pub global: RamLog,
    /// `startupWarnings`: warnings raised while starting.
    pub startup_warnings: RamLog,
    /// The log file, when logging to one.
    pub file: Option<LogFile>,
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
        if let Some(f) = &self.logs.file {
            f.write_line(&line);
        }
        if f.startup_warning {
            self.logs.startup_warnings.push(line.clone());
        }
        self.logs.global.push(line);
    }
}

/// Installs the global subscriber; returns the in-memory logs it feeds (and the log file,
/// when one is given).
pub fn init(format: LogFormat, filter: &str, file: Option<LogFile>) -> Arc<RamLogs> {
    let logs = Arc::new(RamLogs {
        file,
        ..RamLogs::default()
    });
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
    fn log_file_rotates() {
        let dir = std::env::temp_dir().join(format!("cairn-logrot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cairn.log");
        let f = LogFile::open(&path, false, RotateMode::Rename).unwrap();
        f.write_line("one");
        let old = f.rotate().unwrap().unwrap();
        f.write_line("two");
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "one\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
        let r = LogFile::open(&path, true, RotateMode::Reopen).unwrap();
        assert!(r.rotate().unwrap().is_none());
        r.write_line("three");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\nthree\n");
        std::fs::remove_dir_all(&dir).unwrap();
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
