//! `getCmdLineOpts`: the process arguments and the options the operator set (admin only).
//!
//! `argv` is the real argument vector. `parsed` holds only the options that were set
//! explicitly (flag or `CAIRN_*` variable), laid out like MongoDB's option tree where a
//! MongoDB equivalent exists (`net.port`, `net.bindIp`, `storage.dbPath`, …) and under
//! `cairn.<flag>` otherwise; `--setParameter a=b` and `--enable-test-commands` appear as
//! `setParameter: {a: "b", enableTestCommands: "1"}`; a `--config` file is `config: <path>`
//! and its options appear like the same options given as flags.

use bson::{RawArrayBuf, RawBson, RawDocumentBuf, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, ready};
use crate::error::{CommandError, append_all, key};

/// `getCmdLineOpts`.
pub static COMMAND: Command = Command {
    name: "getCmdLineOpts",
    aliases: &[],
    help: "get argv",
    requires_auth: true,
    admin_only: true,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&[]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Cluster(&[super::ActionType::GetCmdLineOpts]),
    run,
};

/// Where an option lives in MongoDB's option tree, and whether its value is an integer.
fn mongo_path(flag: &str) -> (&'static str, Option<&'static str>, bool) {
    match flag {
        "port" => ("net", Some("port"), true),
        "bind" => ("net", Some("bindIp"), false),
        "max_connections" => ("net", Some("maxIncomingConnections"), true),
        "compressors" => ("net", Some("compression.compressors"), false),
        "data_dir" => ("storage", Some("dbPath"), false),
        "slow_ms" => ("operationProfiling", Some("slowOpThresholdMs"), true),
        "profile" => ("operationProfiling", Some("mode"), false),
        "slow_op_sample_rate" => ("operationProfiling", Some("slowOpSampleRate"), false),
        _ => ("cairn", None, false),
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| -> Result<_, CommandError> {
        let mut argv = RawArrayBuf::new();
        for a in &inv.server.argv {
            argv.push(a.as_str());
        }
        // Group explicit options by their top-level section, preserving first-seen order.
        let mut sections: Vec<(&'static str, RawDocumentBuf)> = Vec::new();
        let mut config_file = None;
        for (flag, value) in &inv.server.config.explicit {
            if flag == "config_file" {
                config_file = Some(value.as_str());
                continue;
            }
            // `--setParameter a=b` (repeatable) and `--enable-test-commands` appear as
            // MongoDB's `setParameter: {a: "b"}`.
            let assignments: Vec<(String, String)> = match flag.as_str() {
                "set_parameter" => inv
                    .server
                    .config
                    .set_parameter
                    .iter()
                    .filter_map(|a| a.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                "enable_test_commands" => vec![("enableTestCommands".into(), "1".into())],
                _ => Vec::new(),
            };
            if !assignments.is_empty() {
                let doc = match sections.iter_mut().find(|(s, _)| *s == "setParameter") {
                    Some((_, d)) => d,
                    None => {
                        sections.push(("setParameter", RawDocumentBuf::new()));
                        match sections.last_mut() {
                            Some((_, d)) => d,
                            None => continue,
                        }
                    }
                };
                for (k, v) in assignments {
                    if doc.get(&k).ok().flatten().is_none() {
                        doc.append(key(&k)?, v);
                    }
                }
                continue;
            }
            let (section, sub, int) = mongo_path(flag);
            let leaf = sub.unwrap_or(flag.as_str());
            let v = match (flag.as_str(), value.parse::<i32>()) {
                ("profile", Ok(level)) => RawBson::String(
                    match level {
                        1 => "slowOp",
                        2 => "all",
                        _ => "off",
                    }
                    .into(),
                ),
                ("slow_op_sample_rate", _) => value
                    .parse::<f64>()
                    .map_or_else(|_| RawBson::String(value.clone()), RawBson::Double),
                (_, Ok(n)) if int => RawBson::Int32(n),
                _ => RawBson::String(value.clone()),
            };
            let doc = match sections.iter_mut().find(|(s, _)| *s == section) {
                Some((_, d)) => d,
                None => {
                    sections.push((section, RawDocumentBuf::new()));
                    match sections.last_mut() {
                        Some((_, d)) => d,
                        None => continue,
                    }
                }
            };
            // One level of nesting for dotted MongoDB paths (net.compression.compressors).
            match leaf.split_once('.') {
                Some((outer, inner)) => {
                    let mut nested = RawDocumentBuf::new();
                    nested.append(key(inner)?, v);
                    doc.append(key(outer)?, nested);
                }
                None => doc.append(key(leaf)?, v),
            }
        }
        let mut parsed = RawDocumentBuf::new();
        if let Some(path) = config_file {
            parsed.append(bson::raw::cstr!("config"), path);
        }
        for (section, doc) in sections {
            parsed.append(key(section)?, doc);
        }
        let mut out = rawdoc! {"argv": argv};
        append_all(&mut out, &rawdoc! {"parsed": parsed});
        Ok(out.into())
    })())
}
