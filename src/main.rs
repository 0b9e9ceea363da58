//! The `cairn` binary: parse flags, set up logging, run the server until SIGINT/SIGTERM
//! (SIGUSR1 rotates the log file, SIGHUP re-reads the TLS certificates). With
//! `CAIRN_INITDB_ROOT_USERNAME`/`_PASSWORD` (or the official image's `MONGO_INITDB_…`) it turns
//! access control on and creates a `root` user on `admin` when no user exists.
//! `cairn healthcheck` pings a running server instead (for container health checks).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use cairn::config::{Cli, Cmd};
use cairn::server::Server;
use cairn::state::ServerState;
use tracing::{Instrument, error, info, info_span, warn};

/// The global allocator: mimalloc (measured against the system allocator with
/// `cairn-bench compare`: the request path allocates many small buffers per command).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for this process, as MongoDB's production notes advise
/// for its own storage engine. mimalloc asks for huge pages on the arenas it reserves, so
/// with the kernel's THP in `madvise` mode khugepaged collapsed sparsely used parts of them
/// into 2 MiB pages: after loading 300k documents the server held 248 MB, growing to 289 MB
/// while idle (200 MB of it huge pages), against 188 MB flat without; `find_one` throughput
/// and CPU were the same within noise. Set before the first thread starts; a kernel without
/// the `prctl` keeps its behaviour.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

/// MongoDB's exit code for invalid options.
const EXIT_BAD_OPTIONS: u8 = 2;
/// MongoDB's exit code when global initialization fails (e.g. an unusable TLS certificate).
const EXIT_TLS_SETUP: u8 = 1;
/// MongoDB's exit code when the listener cannot be set up.
const EXIT_NET_ERROR: u8 = 48;
/// MongoDB's exit code when the data directory cannot be used (e.g. locked by another
/// process).
const EXIT_DB_PATH_IN_USE: u8 = 100;

fn open_store(config: &cairn::config::Config) -> Result<Arc<cairn_storage::Store>, String> {
    use cairn_storage::engine::fjall::{FjallEngine, FjallOptions};
    let engine = FjallEngine::open(
        &config.data_dir,
        &FjallOptions {
            idle_flush: (config.idle_flush_ms > 0)
                .then(|| std::time::Duration::from_millis(config.idle_flush_ms)),
            ..FjallOptions::with_cache(
                config.cache_size_mb.saturating_mul(1024 * 1024),
                config.journal_size_mb.saturating_mul(1024 * 1024),
            )
        },
    )
    .map_err(|e| e.to_string())?;
    let store = cairn_storage::Store::open_with(
        Arc::new(engine),
        cairn_storage::StoreOptions {
            sync_always: config.sync,
        },
        Arc::new(cairn_query::index::QueryKeyGen::new()),
    )
    .map_err(|e| e.to_string())?;
    store.set_pack_threshold(config.pack_threshold);
    Ok(Arc::new(store))
}

/// Runs periodic storage maintenance on the blocking pool and waits for it. Not
/// [`cairn::blocking::run`]: its `block_in_place` hands the calling worker's scheduler, with
/// the connections queued on it, to another thread (starting one when none is idle) — done
/// every second by the session reaper, that moved the request path between threads and
/// showed up as thread starts in `perf` profiles of point reads.
async fn maintenance(f: impl FnOnce() + Send + 'static) {
    let _ = tokio::task::spawn_blocking(f).await;
}

/// Closes idle cursors past the timeout, checking a few times per timeout period.
async fn reap_cursors(state: Arc<ServerState>) {
    let period =
        (state.cursors.idle_timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(60));
    loop {
        tokio::time::sleep(period).await;
        let n = state.cursors.reap(std::time::Instant::now());
        state
            .metrics
            .cursors_timed_out
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        if n > 0 {
            info!(id = 20528, count = n, "Cursors timed out");
        }
    }
}

/// MongoDB's `logicalSessionRefreshMillis`: ended sessions and stale session records go at
/// this period.
const SESSION_REFRESH: Duration = Duration::from_secs(300);

/// Aborts expired transactions every second and refreshes the session cache every
/// [`SESSION_REFRESH`] (see [`cairn::session::reap`]).
async fn reap_sessions(state: Arc<ServerState>) {
    let mut last_refresh = std::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let refresh = last_refresh.elapsed() >= SESSION_REFRESH;
        if refresh {
            last_refresh = std::time::Instant::now();
        }
        let s = state.clone();
        maintenance(move || cairn::session::reap(&s, refresh)).await;
    }
}

/// Keeps the change log within `--oplog-size-mb` (but never younger than
/// `--oplog-min-retention-hours`), checking every few seconds.
async fn trim_change_log(state: Arc<ServerState>) {
    let budget = state.config.oplog_size_mb.saturating_mul(1024 * 1024);
    let keep_secs = (state.config.oplog_min_retention_hours * 3600.0) as u64;
    loop {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let s = state.clone();
        maintenance(move || {
            while s
                .store
                .trim_change_log(budget, keep_secs, 10_000)
                .is_ok_and(|n| n > 0)
                && !s.is_shutting_down()
            {}
        })
        .await;
    }
}

fn main() -> ExitCode {
    disable_transparent_huge_pages();
    let argv: Vec<String> = std::env::args().collect();
    let cli = match Cli::parse_from_args(&argv) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    if let Some(Cmd::Healthcheck {
        host,
        port,
        timeout_secs,
    }) = cli.command
    {
        return match cairn::healthcheck::ping(&host, port, Duration::from_secs(timeout_secs)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("unhealthy: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let mut config = cli.config;
    let initial_root = match initial_root_from_env() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if initial_root.is_some() {
        // As the official image: the init-root variables turn access control on.
        config.auth = true;
    }
    let log_file = match &config.log_path {
        Some(path) => {
            match cairn::logging::LogFile::open(path, config.log_append, config.log_rotate) {
                Ok(f) => Some(f),
                Err(e) => {
                    eprintln!("cannot open the log file {}: {e}", path.display());
                    return ExitCode::from(EXIT_BAD_OPTIONS);
                }
            }
        }
        None => None,
    };
    let logs = cairn::logging::init(config.log_format, &config.log_level, log_file);
    let tls = match cairn::tls::Tls::load(&config) {
        Ok(t) => t,
        Err(e) => {
            error!(id = 20574, error = %format!("InvalidSSLConfiguration: {e}"),
                   "Error during global initialization");
            return ExitCode::from(EXIT_TLS_SETUP);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&config.data_dir) {
        error!(id = 20557, path = %config.data_dir.display(), error = %e,
               "cannot create the data directory");
        return ExitCode::FAILURE;
    }
    // Sort spill files are anonymous temporaries; clear any left by a crash.
    let spill = config.data_dir.join(cairn::cursor::SPILL_DIR);
    let _ = std::fs::remove_dir_all(&spill);
    if let Err(e) = std::fs::create_dir_all(&spill) {
        error!(id = 20557, path = %spill.display(), error = %e, "cannot create the spill directory");
        return ExitCode::FAILURE;
    }
    let store = match open_store(&config) {
        Ok(s) => s,
        Err(e) => {
            error!(id = 22316, path = %config.data_dir.display(), error = %e,
                   "cannot open the data directory");
            return ExitCode::from(EXIT_DB_PATH_IN_USE);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(
        async move {
            let mut state = ServerState::new(config, argv, logs, store);
            state.tls = tls;
            let state = Arc::new(state);
            if let Err(e) = cairn::params::apply_startup_state(&state) {
                error!(id = 20574, error = %e, "Error during global initialization");
                return ExitCode::from(EXIT_BAD_OPTIONS);
            }
            if let Some((user, pwd)) = initial_root {
                let s = state.clone();
                let iterations = s.auth.iterations();
                let created = cairn::blocking::run(move || {
                    cairn::auth::users::create_initial_root(&s.store, &user, &pwd, iterations)
                        .map(|c| (c, user))
                })
                .await;
                match created {
                    Ok((true, user)) => {
                        state.auth.user_created();
                        info!(id = 20323, user = %user, db = "admin", roles = "root",
                              "Created the initial root user");
                    }
                    Ok((false, _)) => {}
                    Err(e) => {
                        error!(id = 20324, error = %e.message, "cannot create the initial root user");
                        return ExitCode::FAILURE;
                    }
                }
            }
            tokio::spawn(reap_cursors(state.clone()));
            tokio::spawn(reap_sessions(state.clone()));
            tokio::spawn(rotate_on_sigusr1(state.clone()));
            tokio::spawn(rotate_certificates_on_sighup(state.clone()));
            tokio::spawn(trim_change_log(state.clone()));
            tokio::spawn(cairn::ttl::run(state.clone()));
            cairn::index_builds::resume_all(&state);
            startup_warnings(&state);
            let server = match Server::bind(state.clone()).await {
                Ok(s) => s,
                Err(e) => {
                    error!(id = 23024, error = %e, "Failed to set up listener");
                    return ExitCode::from(EXIT_NET_ERROR);
                }
            };
            if let Some(port) = state.config.metrics_port
                && let Err(e) = cairn::metrics_http::start(state.clone(), port).await
            {
                error!(id = 23024, error = %e, "Failed to set up the metrics endpoint");
                return ExitCode::from(EXIT_NET_ERROR);
            }
            info!(id = 4615611, pid = std::process::id(),
                  version = cairn::commands::build_info::MONGODB_VERSION,
                  cairnVersion = env!("CARGO_PKG_VERSION"),
                  dataDir = %state.config.data_dir.display(),
                  "Cairn starting");
            server.run(shutdown_signal()).await;
            let store = state.store.clone();
            if let Err(e) = cairn::blocking::run(move || Ok(store.engine().sync()?)).await {
                warn!(error = %e, "final fsync failed");
            }
            info!(id = 20626, "Shutdown complete");
            ExitCode::SUCCESS
        }
        .instrument(info_span!("ctx", name = "initandlisten")),
    )
}

/// The initial root user from `CAIRN_INITDB_ROOT_USERNAME`/`_PASSWORD`, or the official
/// image's `MONGO_INITDB_ROOT_USERNAME`/`_PASSWORD` (each also as `<NAME>_FILE`, a file
/// holding the value, trailing newlines removed). Both or neither of a pair must be given.
fn initial_root_from_env() -> Result<Option<(String, String)>, String> {
    fn var(name: &str) -> Result<Option<String>, String> {
        let direct = std::env::var(name).ok().filter(|v| !v.is_empty());
        let file_var = format!("{name}_FILE");
        let file = std::env::var(&file_var).ok().filter(|v| !v.is_empty());
        match (direct, file) {
            (Some(_), Some(_)) => Err(format!(
                "error: both {name} and {file_var} are set (but are exclusive)"
            )),
            (Some(v), None) => Ok(Some(v)),
            (None, Some(path)) => std::fs::read_to_string(&path)
                .map(|v| Some(v.trim_end_matches(['\n', '\r']).to_string()))
                .map_err(|e| format!("error: cannot read {file_var} ({path}): {e}")),
            (None, None) => Ok(None),
        }
    }
    for prefix in ["CAIRN", "MONGO"] {
        let user_var = format!("{prefix}_INITDB_ROOT_USERNAME");
        let pwd_var = format!("{prefix}_INITDB_ROOT_PASSWORD");
        match (var(&user_var)?, var(&pwd_var)?) {
            (Some(u), Some(p)) => return Ok(Some((u, p))),
            (None, None) => continue,
            _ => return Err(format!("error: missing '{user_var}' or '{pwd_var}'")),
        }
    }
    Ok(None)
}

fn startup_warnings(state: &ServerState) {
    if state.config.auth {
        return;
    }
    warn!(
        id = 22120,
        startup_warning = true,
        "Access control is not enabled for the database. Read and write access to data and configuration is unrestricted"
    );
    let exposed: Vec<&String> = state
        .config
        .bind
        .iter()
        .filter(|h| {
            !matches!(h.as_str(), "localhost" | "127.0.0.1" | "::1") && !h.starts_with("127.")
        })
        .collect();
    if !exposed.is_empty() {
        warn!(id = 22140, startup_warning = true, bind = ?exposed,
              "This server is bound to a non-loopback address without access control. Anyone who can reach it can read and write all data");
    }
}

/// Rotates the log file on SIGUSR1, as mongod does.
async fn rotate_on_sigusr1(state: Arc<ServerState>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut usr1) = signal(SignalKind::user_defined1()) else {
        return;
    };
    while usr1.recv().await.is_some() {
        if let Err(e) = cairn::commands::log_rotate::rotate(&state) {
            warn!(error = %e, "log rotation failed");
        }
    }
}

/// Re-reads the TLS certificate and CA files on SIGHUP (Cairn's addition: mongod rotates
/// only through `rotateCertificates`); a failure keeps the old ones and is logged.
async fn rotate_certificates_on_sighup(state: Arc<ServerState>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        info!(id = 23377, signal = "SIGHUP", "Received signal");
        let s = state.clone();
        let result = cairn::blocking::run(move || {
            cairn::commands::rotate_certificates::rotate(&s, "SIGHUP")
        })
        .await;
        if let Err(e) = result {
            warn!(error = %e, "certificate rotation on SIGHUP failed; the old certificates stay in use");
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            warn!("cannot install signal handlers; stop the server with SIGKILL");
            std::future::pending::<()>().await;
            return;
        }
    };
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    info!(id = 23377, signal = name, "Received signal");
}
