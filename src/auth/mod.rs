//! Who a connection is: authentication (SCRAM), the user and role catalog, and authorization.
//!
//! Map:
//! - this module: the identity types every part shares — [`UserName`], [`RoleName`] and a
//!   connection's [`AuthState`] (the users it has authenticated as, held in
//!   [`crate::client::Client::auth`]); the server-wide [`AuthSettings`] (iteration counts,
//!   failure delay, the localhost exception); the authentication gate the dispatcher applies
//!   ([`check_authenticated`]), the localhost exception ([`localhost_bypass`]) and
//!   [`invalidate`], which every change to users or roles calls;
//! - [`scram`]: SCRAM-SHA-1/SHA-256 credentials, message grammar, server conversation;
//! - [`sasl`]: the conversations `saslStart`/`saslContinue`/`hello` run, and MongoDB's error
//!   mapping;
//! - [`users`]: the user catalog in `admin.system.users` and role-name checks;
//! - [`redact`]: what logs, `currentOp` and the profiler show of a command holding a secret;
//! - [`privilege`]: actions, resource patterns, privileges and the matching rule;
//! - [`builtin_roles`]: MongoDB's built-in roles as data;
//! - [`roles`]: user-defined roles in `admin.system.roles`, role resolution and the
//!   per-user privilege cache;
//! - [`authorize`]: what each command needs and the check the dispatcher runs.
//!
//! Invariants: with authentication off ([`crate::config::Config::auth`] false) nothing here
//! restricts a command; a connection's [`AuthState`] belongs to its task and changes only
//! through authentication commands (`saslStart`/`saslContinue`/`authenticate`/`logout`);
//! passwords exist only while a command that carries one runs — what is stored is salted
//! SCRAM keys, and what is shown of such a command has the secret replaced by `"xxx"`.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::client::Client;
use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;

pub mod redact;
pub mod sasl;
pub mod scram;
pub mod users;

pub mod authorize;
pub mod builtin_roles;
pub mod privilege;
pub mod roles;

/// Drops every cached privilege resolution: call it after any change to users or roles
/// (the next command of every connection resolves its users again).
pub fn invalidate(server: &crate::state::ServerState) {
    server.authz.invalidate();
}

/// A user: name and the database it is defined on (its authentication database).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserName {
    /// The user name.
    pub user: String,
    /// The database the user is defined on.
    pub db: String,
}

impl fmt::Display for UserName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.db, self.user)
    }
}

/// A role: name and the database it is defined on (`admin` for the cluster-wide built-ins).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoleName {
    /// The role name.
    pub role: String,
    /// The database the role is defined on.
    pub db: String,
}

impl fmt::Display for RoleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.db, self.role)
    }
}

/// The identities one connection has authenticated as (MongoDB allows one user per
/// database; drivers authenticate one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthState {
    /// Authenticated users, in the order they authenticated.
    pub users: Vec<UserName>,
    /// The catalog generation ([`AuthSettings::generation`]) at which `users` were last
    /// known to exist.
    pub checked_generation: u64,
}

impl AuthState {
    /// Whether the connection has authenticated as anyone.
    pub fn is_authenticated(&self) -> bool {
        !self.users.is_empty()
    }
}

/// Server-wide authentication settings (MongoDB's parameters of the same names).
#[derive(Debug)]
pub struct AuthSettings {
    /// `scramIterationCount`: PBKDF2 iterations of new SCRAM-SHA-1 credentials.
    pub sha1_iterations: AtomicU32,
    /// `scramSHA256IterationCount`: PBKDF2 iterations of new SCRAM-SHA-256 credentials.
    pub sha256_iterations: AtomicU32,
    /// `authFailedDelayMs`: how long a failed authentication step waits before replying.
    pub failed_delay_ms: AtomicU64,
    /// `enableLocalhostAuthBypass`.
    pub localhost_bypass: AtomicBool,
    /// Bumped whenever users are removed: connections re-check that their users still exist
    /// (a dropped user is logged out of every connection at its next command, as in mongod).
    generation: AtomicU64,
    /// Set once a user or role is known to exist (the localhost exception is then over);
    /// cleared when users are dropped, so the next check reads the catalog again.
    users_exist: AtomicBool,
}

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            sha1_iterations: AtomicU32::new(users::DEFAULT_SHA1_ITERATIONS),
            sha256_iterations: AtomicU32::new(users::DEFAULT_SHA256_ITERATIONS),
            failed_delay_ms: AtomicU64::new(0),
            localhost_bypass: AtomicBool::new(true),
            generation: AtomicU64::new(0),
            users_exist: AtomicBool::new(false),
        }
    }
}

impl AuthSettings {
    /// The iteration counts for new credentials (SHA-1, SHA-256).
    pub fn iterations(&self) -> (u32, u32) {
        (
            self.sha1_iterations.load(Ordering::Relaxed),
            self.sha256_iterations.load(Ordering::Relaxed),
        )
    }

    /// Records that a user now exists.
    pub fn user_created(&self) {
        self.users_exist.store(true, Ordering::Relaxed);
    }

    /// Records that users were removed (the catalog is read again at the next check, and
    /// every authenticated connection re-checks its user).
    pub fn users_removed(&self) {
        self.users_exist.store(false, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// The current catalog generation (see [`AuthSettings::users_removed`]).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }
}

/// Whether an address is loopback (127.0.0.0/8, ::1, or IPv4-mapped loopback).
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// The localhost exception: with auth on, a loopback connection may act before the first
/// user (or role) exists. Authorization decides what it may do then; authentication does not
/// stand in its way.
pub async fn localhost_bypass(server: &Arc<ServerState>, client: &Client) -> bool {
    let s = &server.auth;
    if !s.localhost_bypass.load(Ordering::Relaxed)
        || !is_loopback(client.peer.ip())
        || s.users_exist.load(Ordering::Relaxed)
    {
        return false;
    }
    let store = server.store.clone();
    match crate::blocking::run(move || users::any_exist(&store)).await {
        Ok(true) => {
            s.user_created();
            false
        }
        Ok(false) => {
            static LOGGED: AtomicBool = AtomicBool::new(false);
            if !LOGGED.swap(true, Ordering::Relaxed) {
                tracing::info!(
                    id = 20248,
                    "note: no users configured in admin.system.users, allowing localhost access"
                );
            }
            true
        }
        Err(_) => false,
    }
}

/// The dispatcher's authentication gate: with auth on, a command that requires
/// authentication on a connection that has not authenticated (and has no localhost
/// exception) is Unauthorized (13) `Command <name> requires authentication`.
pub async fn check_authenticated(
    server: &Arc<ServerState>,
    client: &mut Client,
    cmd: &crate::commands::Command,
) -> Result<(), CommandError> {
    if !server.config.auth {
        return Ok(());
    }
    forget_dropped_users(server, client).await;
    if !cmd.requires_auth || client.auth.is_authenticated() {
        return Ok(());
    }
    if localhost_bypass(server, client).await {
        return Ok(());
    }
    Err(CommandError::new(
        ErrorCode::Unauthorized,
        format!("Command {} requires authentication", cmd.name),
    ))
}

/// Logs the connection out of users that no longer exist (checked only after users were
/// removed somewhere).
async fn forget_dropped_users(server: &Arc<ServerState>, client: &mut Client) {
    let generation = server.auth.generation();
    if !client.auth.is_authenticated() || client.auth.checked_generation == generation {
        return;
    }
    let store = server.store.clone();
    let names = client.auth.users.clone();
    let kept = crate::blocking::run(move || {
        let mut kept = Vec::new();
        for n in names {
            if users::get(&store, &n)?.is_some() {
                kept.push(n);
            }
        }
        Ok(kept)
    })
    .await;
    if let Ok(kept) = kept {
        for gone in client.auth.users.iter().filter(|u| !kept.contains(u)) {
            tracing::info!(id = 20240, user = %gone.user, db = %gone.db,
                           "Removed deleted user from session cache");
        }
        client.auth.users = kept;
        client.auth.checked_generation = generation;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses() {
        for a in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(a.parse().unwrap()), "{a}");
        }
        for a in [
            "10.0.0.1",
            "192.168.1.1",
            "0.0.0.0",
            "::",
            "::ffff:10.0.0.1",
            "fe80::1",
        ] {
            assert!(!is_loopback(a.parse().unwrap()), "{a}");
        }
    }
}
