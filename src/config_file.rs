//! mongod-style YAML configuration files (`--config <file>` / `-f <file>`).
//!
//! A file is read before the command line is parsed and turned into command-line flags that
//! come *before* the real arguments, so an option given on the command line wins over the
//! file (as with mongod), and the file wins over `CAIRN_*` variables and defaults. Options
//! are MongoDB's where Cairn has an equivalent:
//!
//! ```yaml
//! net: {port: 27017, bindIp: "127.0.0.1,::1", maxIncomingConnections: 1000,
//!       compression: {compressors: "snappy,zstd"},
//!       tls: {mode: requireTLS, certificateKeyFile: /etc/cairn/server.pem,
//!             CAFile: /etc/cairn/ca.pem, allowConnectionsWithoutCertificates: true,
//!             allowInvalidCertificates: false, disabledProtocols: TLS1_2}}
//! security: {authorization: enabled}
//! storage: {dbPath: /var/lib/cairn, oplogMinRetentionHours: 2}
//! systemLog: {path: /var/log/cairn.log, logAppend: true, logRotate: reopen}
//! operationProfiling: {mode: slowOp, slowOpThresholdMs: 50, slowOpSampleRate: 0.5}
//! replication: {oplogSizeMB: 2048}
//! setParameter: {enableTestCommands: 1, transactionLifetimeLimitSeconds: 30}
//! cairn: {metrics-port: 9216, cursor-timeout-ms: 600000}   # Cairn's own flags by name
//! ```
//!
//! Invariants: an option Cairn does not know is an error naming its dotted path ("Unrecognized
//! option: …", as mongod reports it), never silently ignored; values are scalars (a string,
//! number or boolean; `bindIp`/`compressors` may also be lists); the file is read whole and
//! limited to [`MAX_FILE_BYTES`].

use std::ffi::OsString;
use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

/// The largest configuration file read.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The flag a MongoDB option path becomes, and how its value is written.
fn flag_for(path: &str) -> Option<(&'static str, Kind)> {
    Some(match path {
        "net.port" => ("--port", Kind::Value),
        "security.authorization" => ("--auth", Kind::Authorization),
        "net.bindIp" => ("--bind", Kind::List),
        "net.maxIncomingConnections" => ("--max-connections", Kind::Value),
        "net.compression.compressors" => ("--compressors", Kind::List),
        "net.tls.mode" => ("--tls-mode", Kind::Value),
        "net.tls.certificateKeyFile" => ("--tls-certificate-key-file", Kind::Value),
        "net.tls.certificateKeyFilePassword" => {
            ("--tls-certificate-key-file-password", Kind::Value)
        }
        "net.tls.CAFile" => ("--tls-ca-file", Kind::Value),
        "net.tls.allowConnectionsWithoutCertificates" => {
            ("--tls-allow-connections-without-certificates", Kind::Switch)
        }
        "net.tls.allowInvalidCertificates" => ("--tls-allow-invalid-certificates", Kind::Switch),
        "net.tls.disabledProtocols" => ("--tls-disabled-protocols", Kind::List),
        "storage.dbPath" => ("--data-dir", Kind::Value),
        "storage.oplogMinRetentionHours" => ("--oplog-min-retention-hours", Kind::Value),
        "systemLog.path" => ("--log-path", Kind::Value),
        "systemLog.logAppend" => ("--log-append", Kind::Switch),
        "systemLog.logRotate" => ("--log-rotate", Kind::Value),
        "operationProfiling.mode" => ("--profile", Kind::ProfileMode),
        "operationProfiling.slowOpThresholdMs" => ("--slow-ms", Kind::Value),
        "operationProfiling.slowOpSampleRate" => ("--slow-op-sample-rate", Kind::Value),
        "replication.oplogSizeMB" => ("--oplog-size-mb", Kind::Value),
        _ => return None,
    })
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `--flag value`.
    Value,
    /// `--flag a,b` from a string or a list.
    List,
    /// `--flag` when true, nothing when false.
    Switch,
    /// `off`/`slowOp`/`all` → `--profile 0/1/2`.
    ProfileMode,
    /// `enabled` → the flag, `disabled` → nothing.
    Authorization,
}

/// Where `--config`/`-f` names a file in `args`, if it does.
pub fn config_path(args: &[OsString]) -> Option<OsString> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if s == "--" {
            return None;
        }
        if s == "--config" || s == "-f" {
            return it.next().cloned();
        }
        if let Some(v) = s.strip_prefix("--config=") {
            return Some(v.into());
        }
    }
    None
}

fn scalar(path: &str, v: &Yaml) -> Result<String, String> {
    match v {
        Yaml::String(s) | Yaml::Real(s) => Ok(s.clone()),
        Yaml::Integer(i) => Ok(i.to_string()),
        Yaml::Boolean(b) => Ok(b.to_string()),
        _ => Err(format!("Bad value for option {path}: expected a scalar")),
    }
}

fn push_option(path: &str, v: &Yaml, out: &mut Vec<OsString>) -> Result<(), String> {
    let Some((flag, kind)) = flag_for(path) else {
        return Err(format!("Unrecognized option: {path}"));
    };
    match kind {
        Kind::Value => {
            out.push(flag.into());
            out.push(scalar(path, v)?.into());
        }
        Kind::List => {
            let joined = match v {
                Yaml::Array(items) => items
                    .iter()
                    .map(|i| scalar(path, i))
                    .collect::<Result<Vec<_>, _>>()?
                    .join(","),
                other => scalar(path, other)?,
            };
            out.push(flag.into());
            out.push(joined.into());
        }
        Kind::Switch => match v {
            Yaml::Boolean(true) => out.push(flag.into()),
            Yaml::Boolean(false) => {}
            _ => return Err(format!("Bad value for option {path}: expected a boolean")),
        },
        Kind::Authorization => match scalar(path, v)?.as_str() {
            "enabled" => out.push(flag.into()),
            "disabled" => {}
            other => {
                return Err(format!(
                    "Bad value for option {path}: {other} (expected enabled or disabled)"
                ));
            }
        },
        Kind::ProfileMode => {
            let level = match scalar(path, v)?.as_str() {
                "off" => "0",
                "slowOp" => "1",
                "all" => "2",
                other => return Err(format!("Bad value for {path}: {other}")),
            };
            out.push(flag.into());
            out.push(level.into());
        }
    }
    Ok(())
}

fn walk(prefix: &str, v: &Yaml, out: &mut Vec<OsString>) -> Result<(), String> {
    let Yaml::Hash(map) = v else {
        return push_option(prefix, v, out);
    };
    for (k, v) in map {
        let Yaml::String(k) = k else {
            return Err(format!("Bad key under {prefix}: {k:?}"));
        };
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match (prefix, k.as_str()) {
            ("", "setParameter") => {
                let Yaml::Hash(params) = v else {
                    return Err("setParameter must be a map of name: value".into());
                };
                for (name, value) in params {
                    let Yaml::String(name) = name else {
                        return Err(format!("Bad setParameter name: {name:?}"));
                    };
                    out.push("--setParameter".into());
                    out.push(format!("{name}={}", scalar(&path, value)?).into());
                }
            }
            ("", "cairn") => {
                let Yaml::Hash(flags) = v else {
                    return Err("cairn must be a map of flag: value".into());
                };
                for (name, value) in flags {
                    let Yaml::String(name) = name else {
                        return Err(format!("Bad cairn option name: {name:?}"));
                    };
                    match value {
                        Yaml::Boolean(true) => out.push(format!("--{name}").into()),
                        Yaml::Boolean(false) => {}
                        other => {
                            out.push(format!("--{name}").into());
                            out.push(scalar(&format!("cairn.{name}"), other)?.into());
                        }
                    }
                }
            }
            _ => walk(&path, v, out)?,
        }
    }
    Ok(())
}

/// Translates a configuration file's text into command-line flags.
pub fn flags_from_text(text: &str) -> Result<Vec<OsString>, String> {
    let docs = YamlLoader::load_from_str(text)
        .map_err(|e| format!("Error parsing YAML config file: {e}"))?;
    let mut out = Vec::new();
    match docs.as_slice() {
        [] => {}
        [Yaml::Hash(_)] => walk("", &docs[0], &mut out)?,
        [Yaml::Null] => {}
        _ => return Err("Error parsing YAML config file: expected one map of options".into()),
    }
    Ok(out)
}

/// Reads a configuration file and translates it into command-line flags.
pub fn flags_from_file(path: &Path) -> Result<Vec<OsString>, String> {
    let err = |e: std::io::Error| format!("Error reading config file {}: {e}", path.display());
    let len = std::fs::metadata(path).map_err(err)?.len();
    if len > MAX_FILE_BYTES {
        return Err(format!(
            "Error reading config file {}: larger than {MAX_FILE_BYTES} bytes",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(err)?;
    flags_from_text(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(text: &str) -> Result<Vec<String>, String> {
        flags_from_text(text).map(|v| {
            v.into_iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect()
        })
    }

    #[test]
    fn mongod_options_become_flags() {
        let f = flags(
            "net:\n  port: 1234\n  bindIp: [127.0.0.1, '::1']\nstorage:\n  dbPath: /d\n\
             systemLog: {logAppend: true, path: /l}\noperationProfiling:\n  mode: all\n  \
             slowOpThresholdMs: 5\nsetParameter:\n  enableTestCommands: 1\n  x: true\n\
             cairn: {metrics-port: 9, enable-test-commands: false}\n",
        )
        .unwrap();
        assert_eq!(
            f,
            [
                "--port",
                "1234",
                "--bind",
                "127.0.0.1,::1",
                "--data-dir",
                "/d",
                "--log-append",
                "--log-path",
                "/l",
                "--profile",
                "2",
                "--slow-ms",
                "5",
                "--setParameter",
                "enableTestCommands=1",
                "--setParameter",
                "x=true",
                "--metrics-port",
                "9"
            ]
        );
    }

    #[test]
    fn bad_files_are_errors() {
        assert_eq!(
            flags("net: {portt: 1}").unwrap_err(),
            "Unrecognized option: net.portt"
        );
        assert!(
            flags("net: [1")
                .unwrap_err()
                .starts_with("Error parsing YAML")
        );
        assert!(flags("- 1\n- 2").is_err());
        assert!(flags("operationProfiling: {mode: sometimes}").is_err());
        assert!(flags("setParameter: 3").is_err());
        assert!(flags("net: {port: {a: 1}}").is_err());
        assert_eq!(flags("").unwrap(), Vec::<String>::new());
        assert_eq!(
            flags("net: {tls: {modes: requireTLS}}").unwrap_err(),
            "Unrecognized option: net.tls.modes"
        );
    }

    #[test]
    fn tls_options_become_flags() {
        let f = flags(
            "net:\n  tls:\n    mode: requireTLS\n    certificateKeyFile: /s.pem\n    \
             CAFile: /ca.pem\n    allowConnectionsWithoutCertificates: true\n    \
             allowInvalidCertificates: false\n    disabledProtocols: [TLS1_0, TLS1_2]\n",
        )
        .unwrap();
        assert_eq!(
            f,
            [
                "--tls-mode",
                "requireTLS",
                "--tls-certificate-key-file",
                "/s.pem",
                "--tls-ca-file",
                "/ca.pem",
                "--tls-allow-connections-without-certificates",
                "--tls-disabled-protocols",
                "TLS1_0,TLS1_2"
            ]
        );
    }
}
