//! The listener: accept connections under a limit, shut down gracefully.
//!
//! [`Server::bind`] opens one listener per `--bind` address (all on the same port; with
//! `--port 0` the first listener's ephemeral port is reused for the others) and logs
//! "Waiting for connections" with the real port. [`Server::run`] accepts until the shutdown
//! future completes:
//! - each accepted socket must take a permit from a semaphore sized `--max-connections`;
//!   when none is left the socket is closed at once (MongoDB refuses excess connections the
//!   same way rather than making clients hang), and `connections.rejected` counts it;
//! - each connection runs in its own task inside a `ctx` span named `conn<id>`; its TLS
//!   sniffing and handshake run there too, so a slow client never holds up accepting.
//!
//! Shutdown, on the future completing (SIGINT/SIGTERM in the binary): stop accepting, mark
//! the server as shutting down (awaitable `hello`s wake and answer ShutdownInProgress),
//! let every connection finish the command it is running (idle connections close at once),
//! and wait for them up to `--shutdown-timeout-secs`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::{Instrument, info, info_span, warn};

use crate::client::Client;
use crate::connection;
use crate::state::ServerState;

/// A bound, not yet running server.
pub struct Server {
    state: Arc<ServerState>,
    listeners: Vec<TcpListener>,
}

impl Server {
    /// Binds every configured address.
    pub async fn bind(state: Arc<ServerState>) -> std::io::Result<Server> {
        let mut listeners = Vec::new();
        let mut port = state.config.port;
        for host in &state.config.bind {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
                .await?
                .collect();
            let mut bound = None;
            let mut last_err = None;
            for addr in addrs {
                match TcpListener::bind(addr).await {
                    Ok(l) => {
                        bound = Some(l);
                        break;
                    }
                    Err(e) => last_err = Some(e),
                }
            }
            let listener = match bound {
                Some(l) => l,
                None => {
                    return Err(last_err.unwrap_or_else(|| {
                        std::io::Error::new(
                            std::io::ErrorKind::AddrNotAvailable,
                            format!("no address for {host}"),
                        )
                    }));
                }
            };
            port = listener.local_addr()?.port();
            listeners.push(listener);
        }
        Ok(Server { state, listeners })
    }

    /// The addresses actually bound.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// The shared state.
    pub fn state(&self) -> &Arc<ServerState> {
        &self.state
    }

    /// Accepts connections until `shutdown` completes, then drains them.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let state = self.state;
        let limit = Arc::new(Semaphore::new(state.config.max_connections as usize));
        let mut accepting = JoinSet::new();
        let (conn_tx, mut conn_rx) = tokio::sync::mpsc::unbounded_channel::<TcpStream>();
        for listener in self.listeners {
            let addr = listener.local_addr().ok();
            info!(id = 23016, port = addr.map(|a| a.port()).unwrap_or(0),
                  address = %addr.map(|a| a.to_string()).unwrap_or_default(),
                  "Waiting for connections");
            let tx = conn_tx.clone();
            accepting.spawn(
                async move {
                    loop {
                        match listener.accept().await {
                            Ok((stream, _)) => {
                                if tx.send(stream).is_err() {
                                    break;
                                }
                            }
                            Err(e) => {
                                // Resource exhaustion (EMFILE…) must not spin the loop.
                                warn!(id = 22990, error = %e, "Error accepting new connection");
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                        }
                    }
                }
                .instrument(info_span!("ctx", name = "listener")),
            );
        }
        drop(conn_tx);

        let mut connections = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                Some(stream) = conn_rx.recv() => {
                    accept(&state, &limit, &mut connections, stream);
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }

        info!(
            id = 4784901,
            "Shutting down: no longer accepting connections"
        );
        accepting.abort_all();
        state.begin_shutdown();
        let timeout = Duration::from_secs(state.config.shutdown_timeout_secs);
        let drained = tokio::time::timeout(timeout, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            warn!(
                remaining = connections.len(),
                "shutdown timeout reached; closing remaining connections"
            );
            connections.abort_all();
        }
        info!(id = 23138, "Shutting down: all connections closed");
    }
}

fn accept(
    state: &Arc<ServerState>,
    limit: &Arc<Semaphore>,
    connections: &mut JoinSet<()>,
    stream: TcpStream,
) {
    let peer = stream.peer_addr();
    let local = stream.local_addr();
    let (Ok(peer), Ok(local)) = (peer, local) else {
        return;
    };
    let Ok(permit) = limit.clone().try_acquire_owned() else {
        state.connections.rejected.fetch_add(1, Relaxed);
        info!(id = 22942, remote = %peer,
              connectionCount = state.connections.current.load(Relaxed),
              "Connection refused because there are too many open connections");
        return;
    };
    let id = state.next_connection_id();
    let count = state.connections.current.fetch_add(1, Relaxed) + 1;
    state.connections.total_created.fetch_add(1, Relaxed);
    let span = info_span!("ctx", name = %format!("conn{id}"));
    span.in_scope(|| {
        info!(id = 22943, remote = %peer, connectionId = id, connectionCount = count,
              "Connection accepted");
    });
    let state = state.clone();
    let shutdown = state.watch_shutdown();
    connections.spawn(
        async move {
            let client = Client::new(id, peer, local);
            connection::serve(state.clone(), stream, client, shutdown).await;
            let count = state.connections.current.fetch_sub(1, Relaxed) - 1;
            info!(id = 22944, remote = %peer, connectionId = id, connectionCount = count,
                  "Connection ended");
            drop(permit);
        }
        .instrument(span),
    );
}
