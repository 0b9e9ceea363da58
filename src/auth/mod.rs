//! Who a connection is: authentication (SCRAM), the user and role catalog, and authorization.
//!
//! Map:
//! - this module: the identity types every part shares — [`UserName`], [`RoleName`] and a
//!   connection's [`AuthState`] (the users it has authenticated as, held in
//!   [`crate::client::Client::auth`]) — and [`invalidate`], which every change to users or
//!   roles calls;
//! - [`privilege`]: actions, resource patterns, privileges and the matching rule;
//! - [`builtin_roles`]: MongoDB's built-in roles as data;
//! - [`roles`]: user-defined roles in `admin.system.roles`, role resolution and the
//!   per-user privilege cache;
//! - [`authorize`]: what each command needs and the check the dispatcher runs.
//!
//! Invariants: with authentication off ([`crate::config::Config::auth`] false) nothing here
//! restricts a command; a connection's [`AuthState`] belongs to its task and changes only
//! through authentication commands (`saslStart`/`saslContinue`/`authenticate`/`logout`).

use std::fmt;

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
}

impl AuthState {
    /// Whether the connection has authenticated as anyone.
    pub fn is_authenticated(&self) -> bool {
        !self.users.is_empty()
    }
}
