//! State shared by every connection: identity, topology version, counters, logs, shutdown.
//!
//! Invariants:
//! - `process_id` is generated once per process and never changes; together with the
//!   topology `counter` it is the `topologyVersion` drivers use for awaitable `hello`;
//! - the counter only increases, and only when the server's state as seen by drivers changes
//!   (today: entering shutdown), which wakes every waiting `hello`;
//! - counters are plain atomics: reading statistics never blocks a request.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use bson::oid::ObjectId;
use cairn_storage::Store;
use cairn_wire::Compressor;
use tokio::sync::watch;

use crate::config::Config;
use crate::cursor::CursorManager;
use crate::logging::RamLogs;

/// `topologyVersion` as drivers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopologyVersion {
    /// Stable for the life of the process.
    pub process_id: ObjectId,
    /// Increases when the server's observable state changes.
    pub counter: i64,
}

/// Request counters reported by `serverStatus.opcounters`.
#[derive(Debug, Default)]
pub struct OpCounters {
    /// Insert operations (one per document).
    pub insert: AtomicI64,
    /// Queries (`find`).
    pub query: AtomicI64,
    /// Update operations (one per statement).
    pub update: AtomicI64,
    /// Delete operations (one per statement).
    pub delete: AtomicI64,
    /// `getMore` commands.
    pub getmore: AtomicI64,
    /// All other commands.
    pub command: AtomicI64,
}

/// Network counters reported by `serverStatus.network`.
#[derive(Debug, Default)]
pub struct NetworkCounters {
    /// Logical bytes received (after decompression).
    pub bytes_in: AtomicI64,
    /// Logical bytes sent (before compression).
    pub bytes_out: AtomicI64,
    /// Bytes received on the socket.
    pub physical_bytes_in: AtomicI64,
    /// Bytes sent on the socket.
    pub physical_bytes_out: AtomicI64,
    /// Messages received.
    pub num_requests: AtomicI64,
}

/// Connection counters reported by `serverStatus.connections`.
#[derive(Debug, Default)]
pub struct ConnectionCounters {
    /// Open connections.
    pub current: AtomicI64,
    /// Connections accepted since start.
    pub total_created: AtomicI64,
    /// Connections refused because the limit was reached.
    pub rejected: AtomicI64,
    /// Connections currently running a command.
    pub active: AtomicI64,
    /// Connections in an exhaust `hello` stream.
    pub exhaust_hello: AtomicI64,
    /// Connections in an exhaust `isMaster` stream.
    pub exhaust_is_master: AtomicI64,
    /// `hello` requests waiting for a topology change.
    pub awaiting_topology_changes: AtomicI64,
}

/// Everything shared between connections.
#[derive(Debug)]
pub struct ServerState {
    /// The configuration the server started with.
    pub config: Config,
    /// The process arguments (for `getCmdLineOpts`).
    pub argv: Vec<String>,
    /// Monotonic start time (uptime).
    pub started: Instant,
    /// Wall-clock start time.
    pub started_at: SystemTime,
    /// Compressors the server offers, in preference order.
    pub compressors: Vec<Compressor>,
    /// Request counters.
    pub opcounters: OpCounters,
    /// Network counters.
    pub network: NetworkCounters,
    /// Connection counters.
    pub connections: ConnectionCounters,
    /// The in-memory logs served by `getLog`.
    pub logs: Arc<RamLogs>,
    /// Host name reported by `hello`-adjacent diagnostics.
    pub host: String,
    /// The data.
    pub store: Arc<Store>,
    /// Open cursors.
    pub cursors: CursorManager,
    /// Logical sessions and their transactions.
    pub sessions: crate::session::Sessions,
    /// Running index builds.
    pub index_builds: crate::index_builds::IndexBuilds,
    /// Winning plans by query shape.
    pub plan_cache: cairn_query::plan::PlanCache,
    /// TTL monitor counters.
    pub ttl: crate::ttl::TtlCounters,
    /// Operation latencies per collection (`$collStats` `latencyStats`).
    pub latency: crate::latency::LatencyStats,
    /// Running operations and open connections (`currentOp`, `killOp`).
    pub ops: crate::ops::Ops,
    /// The database profiler's settings.
    pub profiler: crate::profiler::Profiler,
    /// Operation latencies and document, query and cursor counters.
    pub metrics: crate::metrics::Metrics,
    /// TLS, when `--tls-mode` is not `disabled` (set by the binary after reading the files).
    pub tls: Option<crate::tls::Tls>,
    /// Resolved privileges of authenticated users ([`crate::auth::invalidate`] drops them).
    pub authz: crate::auth::roles::AuthzCache,
    /// Authentication settings and the localhost exception's state.
    pub auth: crate::auth::AuthSettings,
    topology: watch::Sender<TopologyVersion>,
    shutdown: watch::Sender<bool>,
    /// Ticks after every commit that wrote (awaitData cursors wait on it).
    commits: Arc<watch::Sender<u64>>,
    next_connection_id: AtomicU64,
}

impl ServerState {
    /// Builds the shared state for `config`.
    pub fn new(
        config: Config,
        argv: Vec<String>,
        logs: Arc<RamLogs>,
        store: Arc<Store>,
    ) -> ServerState {
        let compressors = config
            .compressors
            .iter()
            .filter_map(|c| Compressor::from_name(c.trim()))
            .filter(|c| *c != Compressor::Noop)
            .collect();
        let (topology, _) = watch::channel(TopologyVersion {
            process_id: ObjectId::new(),
            counter: 0,
        });
        let (shutdown, _) = watch::channel(false);
        let commits = Arc::new(watch::channel(0u64).0);
        {
            let tx = commits.clone();
            store.set_on_commit(Arc::new(move || {
                tx.send_modify(|n| *n = n.wrapping_add(1));
            }));
        }
        crate::validation::install(&store);
        let host = crate::sysinfo::hostname();
        let cursor_timeout = config.cursor_timeout_ms;
        let profiler = crate::profiler::Profiler::new(
            config.profile,
            config.slow_ms,
            config.slow_op_sample_rate,
        );
        ServerState {
            config,
            argv,
            started: Instant::now(),
            started_at: SystemTime::now(),
            compressors,
            opcounters: OpCounters::default(),
            network: NetworkCounters::default(),
            connections: ConnectionCounters::default(),
            logs,
            host,
            store,
            cursors: CursorManager::new(std::time::Duration::from_millis(cursor_timeout)),
            sessions: crate::session::Sessions::new(std::time::Duration::from_secs(
                60 * crate::commands::hello::LOGICAL_SESSION_TIMEOUT_MINUTES as u64,
            )),
            index_builds: crate::index_builds::IndexBuilds::default(),
            plan_cache: cairn_query::plan::PlanCache::default(),
            ttl: crate::ttl::TtlCounters::default(),
            latency: crate::latency::LatencyStats::default(),
            ops: crate::ops::Ops::default(),
            profiler,
            metrics: crate::metrics::Metrics::default(),
            tls: None,
            authz: crate::auth::roles::AuthzCache::default(),
            auth: crate::auth::AuthSettings::default(),
            topology,
            shutdown,
            commits,
            next_connection_id: AtomicU64::new(1),
        }
    }

    /// The current topology version.
    pub fn topology_version(&self) -> TopologyVersion {
        *self.topology.borrow()
    }

    /// A receiver that observes topology changes.
    pub fn watch_topology(&self) -> watch::Receiver<TopologyVersion> {
        self.topology.subscribe()
    }

    /// A receiver that changes after every commit that wrote.
    pub fn watch_commits(&self) -> watch::Receiver<u64> {
        self.commits.subscribe()
    }

    /// A receiver that becomes `true` when shutdown starts.
    pub fn watch_shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// True once shutdown has started.
    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Starts shutdown: bumps the topology version (waking awaitable `hello`s, which then
    /// answer ShutdownInProgress) and tells every connection to finish.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
        self.topology.send_modify(|t| t.counter += 1);
    }

    /// Allocates the next connection id (starting at 1).
    pub fn next_connection_id(&self) -> u64 {
        self.next_connection_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Seconds since start.
    pub fn uptime(&self) -> std::time::Duration {
        self.started.elapsed()
    }
}
