//! Who a connection is: authentication (SCRAM), the user and role catalog, and authorization.
//!
//! Map:
//! - this module: the identity types every part shares — [`UserName`], [`RoleName`] and a
//!   connection's [`AuthState`] (the users it has authenticated as, held in
//!   [`crate::client::Client::auth`]).
//!
//! Invariants: with authentication off ([`crate::config::Config::auth`] false) nothing here
//! restricts a command; a connection's [`AuthState`] belongs to its task and changes only
//! through authentication commands (`saslStart`/`saslContinue`/`authenticate`/`logout`).

use std::fmt;

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
