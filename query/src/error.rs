//! The one error type of `cairn-query`.
//!
//! Each variant names the MongoDB error it stands for; the server's `error` module is the
//! single place that turns them into codes and code names.

/// Errors from parsing or evaluating queries, updates and documents.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    /// BadValue (2).
    #[error("{0}")]
    BadValue(String),
    /// FailedToParse (9).
    #[error("{0}")]
    FailedToParse(String),
    /// TypeMismatch (14).
    #[error("{0}")]
    TypeMismatch(String),
    /// DollarPrefixedFieldName (52).
    #[error("{0}")]
    DollarPrefixedFieldName(String),
    /// InvalidIdField (53).
    #[error("{0}")]
    InvalidIdField(String),
    /// NotImplemented (238): valid MongoDB input Cairn does not support yet.
    #[error("{0}")]
    NotImplemented(String),
    /// An error with a MongoDB code that has no variant of its own (`Location<code>`).
    #[error("{1}")]
    Location(i32, String),
    /// A storage error surfaced through the query layer.
    #[error(transparent)]
    Storage(#[from] cairn_storage::StorageError),
}

/// Result alias for the query layer.
pub type Result<T> = std::result::Result<T, QueryError>;
