//! `getCmdLineOpts`: the process arguments and the options the operator set (admin only).
//!
//! `argv` is the real argument vector. `parsed` holds only the options that were set
//! explicitly (flag or `CAIRN_*` variable), laid out like MongoDB's option tree where a
//! MongoDB equivalent exists (`net.port`, `net.bindIp`, `storage.dbPath`, …) and under
//! `cairn.<flag>` otherwise (the TLS options as `net.tls.mode`, `net.tls.certificateKeyFile`,
//! `net.tls.CAFile`, …, switches as booleans); `--setParameter a=b` and `--enable-test-commands` appear as
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

/// Flags whose value is a secret.
const PASSWORD_FLAGS: &[&str] = &[
    "--tls-certificate-key-file-password",
    "--tlsCertificateKeyFilePassword",
];

/// What a secret is shown as.
const REDACTED: &str = "<password>";

/// How an option's value is shown.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// As given (a string).
    Text,
    /// As an int32.
    Int,
    /// As a boolean (switches).
    Bool,
    /// As `<password>`.
    Secret,
}

/// Where an option lives in MongoDB's option tree, and how its value is shown.
fn mongo_path(flag: &str) -> (&'static str, Option<&'static str>, Shown) {
    match flag {
        "port" => ("net", Some("port"), Shown::Int),
        "bind" => ("net", Some("bindIp"), Shown::Text),
        "max_connections" => ("net", Some("maxIncomingConnections"), Shown::Int),
        "compressors" => ("net", Some("compression.compressors"), Shown::Text),
        "tls_mode" => ("net", Some("tls.mode"), Shown::Text),
        "tls_certificate_key_file" => ("net", Some("tls.certificateKeyFile"), Shown::Text),
        "tls_ca_file" => ("net", Some("tls.CAFile"), Shown::Text),
        "tls_certificate_key_file_password" => {
            ("net", Some("tls.certificateKeyFilePassword"), Shown::Secret)
        }
        "tls_allow_connections_without_certificates" => (
            "net",
            Some("tls.allowConnectionsWithoutCertificates"),
            Shown::Bool,
        ),
        "tls_allow_invalid_certificates" => {
            ("net", Some("tls.allowInvalidCertificates"), Shown::Bool)
        }
        "tls_disabled_protocols" => ("net", Some("tls.disabledProtocols"), Shown::Text),
        "data_dir" => ("storage", Some("dbPath"), Shown::Text),
        "slow_ms" => ("operationProfiling", Some("slowOpThresholdMs"), Shown::Int),
        "profile" => ("operationProfiling", Some("mode"), Shown::Text),
        "slow_op_sample_rate" => ("operationProfiling", Some("slowOpSampleRate"), Shown::Text),
        _ => ("cairn", None, Shown::Text),
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    ready((|| -> Result<_, CommandError> {
        let mut argv = RawArrayBuf::new();
        let mut secret_next = false;
        for a in &inv.server.argv {
            // Passwords are shown as `<password>`, as mongod redacts them.
            if std::mem::take(&mut secret_next) {
                argv.push(REDACTED);
                continue;
            }
            match PASSWORD_FLAGS
                .iter()
                .find(|f| a == *f || a.starts_with(&format!("{f}=")))
            {
                Some(f) if a == f => {
                    secret_next = true;
                    argv.push(a.as_str());
                }
                Some(f) => argv.push(format!("{f}={REDACTED}")),
                None => argv.push(a.as_str()),
            }
        }
        // Group explicit options by their top-level section, preserving first-seen order.
        let mut sections: Vec<(&'static str, RawDocumentBuf)> = Vec::new();
        // Dotted MongoDB paths (net.tls.mode, net.compression.compressors): the inner
        // documents per (section, outer name), appended to their section at the end.
        let mut nested: Vec<(&'static str, &str, RawDocumentBuf)> = Vec::new();
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
            let (section, sub, shown) = mongo_path(flag);
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
                (_, Ok(n)) if shown == Shown::Int => RawBson::Int32(n),
                _ if shown == Shown::Bool => RawBson::Boolean(value != "false"),
                _ if shown == Shown::Secret => RawBson::String(REDACTED.into()),
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
            // One level of nesting for dotted MongoDB paths, gathered under one outer name.
            match leaf.split_once('.') {
                Some((outer, inner)) => {
                    match nested
                        .iter_mut()
                        .find(|(s, o, _)| *s == section && *o == outer)
                    {
                        Some((_, _, d)) => d.append(key(inner)?, v),
                        None => {
                            let mut d = RawDocumentBuf::new();
                            d.append(key(inner)?, v);
                            nested.push((section, outer, d));
                        }
                    }
                }
                None => doc.append(key(leaf)?, v),
            }
        }
        for (section, outer, d) in nested {
            if let Some((_, doc)) = sections.iter_mut().find(|(s, _)| *s == section) {
                doc.append(key(outer)?, d);
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
