//! Command-line and environment configuration.
//!
//! Every flag can also be given as a `CAIRN_*` environment variable; a flag on the command
//! line wins over a `--config` file ([`crate::config_file`]), which wins over the environment,
//! which wins over the default. [`Config::explicit`] records
//! which options the operator actually set, which `getCmdLineOpts` reports as `parsed`.

use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches, Parser, Subcommand, ValueEnum};

/// How logs are written to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Human,
    /// MongoDB's structured JSON log lines (`{"t":…,"s":…,"c":…,"id":…,"ctx":…,"msg":…}`).
    Json,
}

/// The server's configuration.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Addresses to listen on (comma-separated IPs or host names).
    #[arg(
        long = "bind",
        env = "CAIRN_BIND",
        value_delimiter = ',',
        default_value = "127.0.0.1"
    )]
    pub bind: Vec<String>,

    /// TCP port to listen on (0 picks a free port, reported in the log).
    #[arg(long, env = "CAIRN_PORT", default_value_t = 27017)]
    pub port: u16,

    /// Directory holding the database files (MongoDB's `--dbpath`).
    #[arg(
        long = "data-dir",
        alias = "dbpath",
        env = "CAIRN_DATA_DIR",
        default_value = "./data"
    )]
    pub data_dir: PathBuf,

    /// Maximum number of simultaneous client connections.
    #[arg(long = "max-connections", env = "CAIRN_MAX_CONNECTIONS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,

    /// Log format on stdout.
    #[arg(long = "log-format", env = "CAIRN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,

    /// Log filter (tracing `EnvFilter` syntax, e.g. `info` or `cairn=debug`).
    #[arg(long = "log-level", env = "CAIRN_LOG", default_value = "info")]
    pub log_level: String,

    /// Also write the log (MongoDB's JSON lines) to this file (MongoDB's `--logpath`);
    /// `logRotate` and SIGUSR1 rotate it.
    #[arg(long = "log-path", alias = "logpath", env = "CAIRN_LOG_PATH")]
    pub log_path: Option<PathBuf>,

    /// Append to an existing log file instead of truncating it (MongoDB's `--logappend`).
    #[arg(long = "log-append", alias = "logappend", env = "CAIRN_LOG_APPEND")]
    pub log_append: bool,

    /// How `logRotate` rotates the log file: `rename` it aside with a timestamp, or `reopen`
    /// the path (MongoDB's `--logRotate`).
    #[arg(long = "log-rotate", env = "CAIRN_LOG_ROTATE", value_enum,
          default_value_t = crate::logging::RotateMode::Rename)]
    pub log_rotate: crate::logging::RotateMode,

    /// Commands slower than this many milliseconds are logged as slow ("Slow query") and,
    /// at profiling level 1, profiled (MongoDB's `--slowms`).
    #[arg(
        long = "slow-ms",
        alias = "slowms",
        env = "CAIRN_SLOW_MS",
        default_value_t = 100
    )]
    pub slow_ms: u64,

    /// The fraction of slow operations logged and profiled (MongoDB's `--slowOpSampleRate`).
    #[arg(long = "slow-op-sample-rate", alias = "slowOpSampleRate",
          env = "CAIRN_SLOW_OP_SAMPLE_RATE", default_value_t = 1.0,
          value_parser = parse_rate)]
    pub slow_op_sample_rate: f64,

    /// The database profiler's level for every database (MongoDB's `--profile`): 0 off,
    /// 1 slow operations, 2 all operations. `profile` changes it per database at runtime.
    #[arg(long, env = "CAIRN_PROFILE", default_value_t = 0,
          value_parser = clap::value_parser!(u8).range(0..=2))]
    pub profile: u8,

    /// Require authentication and enforce roles (MongoDB's `--auth`,
    /// `security.authorization: enabled`): until a connection authenticates it may run only
    /// the pre-authentication commands.
    #[arg(long, env = "CAIRN_AUTH")]
    pub auth: bool,

    /// TLS mode (MongoDB's `net.tls.mode`): `disabled`, `allowTLS` or `preferTLS` (plain and
    /// TLS clients on the same port), `requireTLS` (TLS clients only).
    #[arg(long = "tls-mode", alias = "tlsMode", env = "CAIRN_TLS_MODE", value_enum,
          default_value_t = crate::tls::TlsMode::Disabled)]
    pub tls_mode: crate::tls::TlsMode,

    /// PEM file with the server's certificate chain and its private key (MongoDB's
    /// `net.tls.certificateKeyFile`); re-read by `rotateCertificates` and SIGHUP.
    #[arg(
        long = "tls-certificate-key-file",
        alias = "tlsCertificateKeyFile",
        env = "CAIRN_TLS_CERTIFICATE_KEY_FILE",
        value_name = "FILE"
    )]
    pub tls_certificate_key_file: Option<PathBuf>,

    /// Password of the key file's PKCS#8 `ENCRYPTED PRIVATE KEY` (MongoDB's
    /// `net.tls.certificateKeyFilePassword`); `getCmdLineOpts` shows it as `<password>`.
    #[arg(
        long = "tls-certificate-key-file-password",
        alias = "tlsCertificateKeyFilePassword",
        env = "CAIRN_TLS_CERTIFICATE_KEY_FILE_PASSWORD",
        hide_env_values = true
    )]
    pub tls_certificate_key_file_password: Option<String>,

    /// PEM file of the certificate authorities that client certificates must chain to
    /// (MongoDB's `net.tls.CAFile`); required when TLS is on.
    #[arg(
        long = "tls-ca-file",
        alias = "tlsCAFile",
        env = "CAIRN_TLS_CA_FILE",
        value_name = "FILE"
    )]
    pub tls_ca_file: Option<PathBuf>,

    /// Accept TLS clients that present no certificate (a certificate that is presented must
    /// still verify): MongoDB's `net.tls.allowConnectionsWithoutCertificates`.
    #[arg(
        long = "tls-allow-connections-without-certificates",
        alias = "tlsAllowConnectionsWithoutCertificates",
        env = "CAIRN_TLS_ALLOW_CONNECTIONS_WITHOUT_CERTIFICATES"
    )]
    pub tls_allow_connections_without_certificates: bool,

    /// Accept client certificates that do not verify, with a warning (MongoDB's
    /// `net.tls.allowInvalidCertificates`); such a certificate never names a user.
    #[arg(
        long = "tls-allow-invalid-certificates",
        alias = "tlsAllowInvalidCertificates",
        env = "CAIRN_TLS_ALLOW_INVALID_CERTIFICATES"
    )]
    pub tls_allow_invalid_certificates: bool,

    /// TLS protocols to refuse, comma-separated: `TLS1_0`, `TLS1_1`, `TLS1_2`, `TLS1_3`
    /// or `none` (MongoDB's `net.tls.disabledProtocols`). Cairn speaks only TLS 1.2 and 1.3.
    #[arg(
        long = "tls-disabled-protocols",
        alias = "tlsDisabledProtocols",
        env = "CAIRN_TLS_DISABLED_PROTOCOLS",
        value_delimiter = ','
    )]
    pub tls_disabled_protocols: Vec<String>,

    /// Enable the test commands (`configureFailPoint`, `sleep`, `waitForFailPoint`), as
    /// mongod's `--setParameter enableTestCommands=1`. Never in production.
    #[arg(long = "enable-test-commands", env = "CAIRN_ENABLE_TEST_COMMANDS")]
    pub enable_test_commands: bool,

    /// Set a server parameter at startup, as `name=value` (MongoDB's `--setParameter`);
    /// repeatable.
    #[arg(
        long = "setParameter",
        alias = "set-parameter",
        value_name = "NAME=VALUE"
    )]
    pub set_parameter: Vec<String>,

    /// Serve Prometheus metrics over HTTP on this port (`GET /metrics`), on the addresses of
    /// `--bind`. Off when not given.
    #[arg(long = "metrics-port", env = "CAIRN_METRICS_PORT")]
    pub metrics_port: Option<u16>,

    /// Wire compressors offered to clients, in preference order (`disabled` for none).
    #[arg(
        long,
        env = "CAIRN_COMPRESSORS",
        value_delimiter = ',',
        default_value = "snappy,zstd,zlib"
    )]
    pub compressors: Vec<String>,

    /// Cache memory of the storage engine, in MiB: a quarter for the row cache, the rest for
    /// the block cache.
    #[arg(
        long = "cache-size-mb",
        env = "CAIRN_CACHE_SIZE_MB",
        default_value_t = 256
    )]
    pub cache_size_mb: u64,

    /// Upper bound of the storage journal in MiB (at least 64): when the journal outgrows
    /// it, the write buffers it still protects are flushed so it can be truncated. Restart
    /// after a crash replays at most about this much, so it bounds recovery time.
    #[arg(
        long = "journal-size-mb",
        env = "CAIRN_JOURNAL_SIZE_MB",
        default_value_t = 64,
        value_parser = clap::value_parser!(u64).range(64..=65_536)
    )]
    pub journal_size_mb: u64,

    /// A collection's or index's write buffer (memtable) that has had no write for this many
    /// milliseconds (and holds at least 1 MiB) is flushed to the storage files, so data that
    /// is only read is read from compact blocks and a restart after a crash need not replay
    /// it; 0 flushes only for size and the journal bound.
    #[arg(
        long = "idle-flush-ms",
        env = "CAIRN_IDLE_FLUSH_MS",
        default_value_t = cairn_storage::engine::fjall::IDLE_FLUSH_PERIOD.as_millis() as u64
    )]
    pub idle_flush_ms: u64,

    /// Make every write durable (fsync, shared by concurrent writers) before acknowledging
    /// it, as if every write concern had `j: true`.
    #[arg(long, env = "CAIRN_SYNC")]
    pub sync: bool,

    /// Containers (documents, embedded documents, arrays) of at most this many BSON bytes are
    /// stored packed in one key-value pair instead of one pair per node, in collections
    /// created from now on (existing collections keep the threshold they were created
    /// with); 0 stores one key per node. At most 65536.
    #[arg(
        long = "pack-threshold",
        env = "CAIRN_PACK_THRESHOLD",
        default_value_t = cairn_storage::doc::DEFAULT_PACK_THRESHOLD,
        value_parser = clap::value_parser!(u32).range(0..=i64::from(cairn_storage::doc::MAX_PACK_THRESHOLD))
    )]
    pub pack_threshold: u32,

    /// Idle cursors are closed after this many milliseconds (MongoDB's cursorTimeoutMillis).
    #[arg(
        long = "cursor-timeout-ms",
        env = "CAIRN_CURSOR_TIMEOUT_MS",
        default_value_t = 600_000
    )]
    pub cursor_timeout_ms: u64,

    /// Whether queries may spill to disk when `allowDiskUse` is not given (MongoDB's
    /// `allowDiskUseByDefault`, true by default since 6.0).
    #[arg(long = "allow-disk-use-by-default", env = "CAIRN_ALLOW_DISK_USE_BY_DEFAULT",
          default_value_t = true, action = clap::ArgAction::Set)]
    pub allow_disk_use_by_default: bool,

    /// Memory a blocking sort may use before it spills (or fails without allowDiskUse):
    /// MongoDB's `internalQueryMaxBlockingSortMemoryUsageBytes`.
    #[arg(
        long = "sort-memory-limit-bytes",
        env = "CAIRN_SORT_MEMORY_LIMIT_BYTES",
        default_value_t = 104_857_600
    )]
    pub sort_memory_limit_bytes: u64,

    /// Memory `$setWindowFields` may hold (its partition cache and window functions) before it
    /// spills (or fails with 5414201 without allowDiskUse): MongoDB's
    /// `internalDocumentSourceSetWindowFieldsMaxMemoryBytes`.
    #[arg(
        long = "window-memory-limit-bytes",
        env = "CAIRN_WINDOW_MEMORY_LIMIT_BYTES",
        default_value_t = 104_857_600
    )]
    pub window_memory_limit_bytes: u64,

    /// Seconds between passes of the TTL monitor, which deletes documents whose TTL index
    /// date has expired (MongoDB's `ttlMonitorSleepSecs`); 0 disables it
    /// (`ttlMonitorEnabled: false`).
    #[arg(
        long = "ttl-monitor-sleep-secs",
        env = "CAIRN_TTL_MONITOR_SLEEP_SECS",
        default_value_t = 60
    )]
    pub ttl_monitor_sleep_secs: u64,

    /// Size budget of the change log in megabytes (MongoDB's `oplogSizeMB`): the oldest
    /// changes beyond it are removed in the background, and change streams can no longer
    /// resume before them (ChangeStreamHistoryLost).
    #[arg(
        long = "oplog-size-mb",
        env = "CAIRN_OPLOG_SIZE_MB",
        default_value_t = 1024
    )]
    pub oplog_size_mb: u64,

    /// Minimum age in hours of the changes kept in the change log (MongoDB's
    /// `oplogMinRetentionHours`): younger changes are kept even beyond `--oplog-size-mb`.
    #[arg(
        long = "oplog-min-retention-hours",
        env = "CAIRN_OPLOG_MIN_RETENTION_HOURS",
        default_value_t = 0.0,
        value_parser = retention_hours
    )]
    pub oplog_min_retention_hours: f64,

    /// Seconds to let in-flight commands finish after SIGINT/SIGTERM before closing.
    #[arg(
        long = "shutdown-timeout-secs",
        env = "CAIRN_SHUTDOWN_TIMEOUT_SECS",
        default_value_t = 15
    )]
    pub shutdown_timeout_secs: u64,

    /// A mongod-style YAML configuration file ([`crate::config_file`]); options on the
    /// command line win over it.
    #[arg(long = "config", short = 'f', value_name = "FILE")]
    pub config_file: Option<PathBuf>,

    /// Options that were set explicitly (command line or environment), as (name, value).
    #[arg(skip)]
    pub explicit: Vec<(String, String)>,
}

/// Subcommands besides running the server.
#[derive(Debug, Clone, Subcommand)]
pub enum Cmd {
    /// Connect to a running server and send `ping`; exit 0 when it answers `ok: 1`.
    Healthcheck {
        /// Host to connect to.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// Port to connect to.
        #[arg(long, env = "CAIRN_PORT", default_value_t = 27017)]
        port: u16,
        /// Seconds to wait for the answer.
        #[arg(long, default_value_t = 5)]
        timeout_secs: u64,
    },
}

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about = "A MongoDB-wire-compatible document database",
    args_override_self = true
)]
pub struct Cli {
    /// Server options.
    #[command(flatten)]
    pub config: Config,
    /// An optional subcommand.
    #[command(subcommand)]
    pub command: Option<Cmd>,
}

impl Cli {
    /// Parses `args`, recording which server options were set explicitly.
    pub fn parse_from_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::CommandFactory;
        let mut args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        // A configuration file's options go before the real arguments, which override them.
        if let Some(path) = crate::config_file::config_path(&args) {
            let from_file = crate::config_file::flags_from_file(std::path::Path::new(&path))
                .map_err(|msg| Cli::command().error(clap::error::ErrorKind::InvalidValue, msg))?;
            let rest = args.split_off(1.min(args.len()));
            args.extend(from_file);
            args.extend(rest);
        }
        let matches = Cli::command().try_get_matches_from(args)?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        cli.config.explicit = explicit_options(&matches);
        crate::params::apply_startup(&mut cli.config)
            .map_err(|msg| Cli::command().error(clap::error::ErrorKind::ValueValidation, msg))?;
        crate::tls::check_options(&cli.config)
            .map_err(|msg| Cli::command().error(clap::error::ErrorKind::ArgumentConflict, msg))?;
        Ok(cli)
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("'{s}' is not a number between 0 and 1")),
    }
}

fn explicit_options(m: &ArgMatches) -> Vec<(String, String)> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let args: Vec<String> = cmd
        .get_arguments()
        .map(|a| a.get_id().as_str().to_string())
        .collect();
    let mut out = Vec::new();
    for id in m.ids() {
        let name = id.as_str();
        // Argument groups (the flattened `Config` struct) are not options.
        if !args.iter().any(|a| a == name) {
            continue;
        }
        if matches!(
            m.value_source(name),
            Some(ValueSource::CommandLine) | Some(ValueSource::EnvVariable)
        ) && let Ok(Some(raw)) = m.try_get_raw(name)
        {
            let vals: Vec<String> = raw.map(|v| v.to_string_lossy().into_owned()).collect();
            out.push((name.to_string(), vals.join(",")));
        }
    }
    out
}

impl Config {
    /// A configuration with every default, listening on an ephemeral port (tests).
    pub fn for_tests(data_dir: PathBuf) -> Config {
        let mut cli = Cli::parse_from_args(["cairn", "--port", "0"]).unwrap_or_else(|e| e.exit());
        cli.config.data_dir = data_dir;
        cli.config
    }
}

/// `--oplog-min-retention-hours`: a finite, non-negative number of hours.
fn retention_hours(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(h) if h.is_finite() && h >= 0.0 => Ok(h),
        _ => Err(format!(
            "expected a non-negative number of hours, got {s:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let c = Cli::parse_from_args(["cairn"]).unwrap().config;
        assert_eq!(c.port, 27017);
        assert_eq!(c.bind, ["127.0.0.1"]);
        assert_eq!(c.data_dir, PathBuf::from("./data"));
        assert_eq!(c.compressors, ["snappy", "zstd", "zlib"]);
        assert_eq!(c.journal_size_mb, 64);
        assert_eq!(c.idle_flush_ms, 1000);
        assert!(c.explicit.is_empty());
    }

    #[test]
    fn dbpath_names_the_data_directory_as_in_mongod() {
        let c = Cli::parse_from_args(["cairn", "--dbpath", "/srv/db"])
            .unwrap()
            .config;
        assert_eq!(c.data_dir, PathBuf::from("/srv/db"));
    }

    #[test]
    fn journal_size_has_fjalls_minimum() {
        let c = Cli::parse_from_args(["cairn", "--journal-size-mb", "512"])
            .unwrap()
            .config;
        assert_eq!(c.journal_size_mb, 512);
        let e = Cli::parse_from_args(["cairn", "--journal-size-mb", "63"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn flags_are_recorded_as_explicit() {
        let c = Cli::parse_from_args(["cairn", "--port", "0", "--bind", "0.0.0.0,::1"])
            .unwrap()
            .config;
        assert_eq!(c.port, 0);
        assert_eq!(c.bind, ["0.0.0.0", "::1"]);
        assert!(c.explicit.contains(&("port".into(), "0".into())));
        assert!(c.explicit.contains(&("bind".into(), "0.0.0.0,::1".into())));
        assert_eq!(c.explicit.len(), 2, "{:?}", c.explicit);
    }

    #[test]
    fn set_parameter_and_test_commands() {
        let c = Cli::parse_from_args(["cairn", "--setParameter", "enableTestCommands=1"])
            .unwrap()
            .config;
        assert!(c.enable_test_commands);
        assert!(
            !Cli::parse_from_args(["cairn"])
                .unwrap()
                .config
                .enable_test_commands
        );
        assert!(
            Cli::parse_from_args(["cairn", "--enable-test-commands"])
                .unwrap()
                .config
                .enable_test_commands
        );
        let e = Cli::parse_from_args(["cairn", "--setParameter", "bogus=1"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("Unknown --setParameter 'bogus'"),
            "{e}"
        );
        let c = Cli::parse_from_args(["cairn", "--profile", "2", "--slowms", "5"])
            .unwrap()
            .config;
        assert_eq!((c.profile, c.slow_ms), (2, 5));
        assert!(Cli::parse_from_args(["cairn", "--profile", "3"]).is_err());
    }

    #[test]
    fn healthcheck_subcommand() {
        let cli = Cli::parse_from_args(["cairn", "healthcheck", "--port", "1234"]).unwrap();
        assert!(matches!(
            cli.command,
            Some(Cmd::Healthcheck { port: 1234, .. })
        ));
    }
}
