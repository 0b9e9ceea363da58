//! The one error type of `cairn-storage`.
//!
//! Variants say what went wrong in storage terms; the server maps them to MongoDB codes in
//! one place. [`StorageError::is_transient`] marks errors a retry can fix (write conflicts).

use bson::RawDocumentBuf;

use crate::engine::EngineError;

/// Everything storage can fail with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StorageError {
    /// An engine error (conflict, missing space, I/O, key too long).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A unique index already holds the key.
    #[error(
        "E11000 duplicate key error collection: {namespace} index: {index} dup key: {key_display}"
    )]
    DuplicateKey {
        /// `db.coll`.
        namespace: String,
        /// Index name (`_id_`).
        index: String,
        /// The index key pattern, e.g. `{_id: 1}`.
        key_pattern: RawDocumentBuf,
        /// The duplicate key, e.g. `{_id: 5}`.
        key_value: RawDocumentBuf,
        /// The key as MongoDB prints it in the message: `{ _id: 5 }`.
        key_display: String,
    },
    /// The collection (or view) already exists.
    #[error("Collection {0} already exists.")]
    NamespaceExists(String),
    /// A database whose name differs only in case from an existing one.
    #[error("{0}")]
    DatabaseDifferCase(String),
    /// The collection does not exist.
    #[error("{0}")]
    NamespaceNotFound(String),
    /// An invalid database or collection name.
    #[error("{0}")]
    InvalidNamespace(String),
    /// An `_id` value that may not be stored (array, regex, undefined, `$`-fields).
    #[error("{0}")]
    InvalidIdField(String),
    /// A document over the 16 MiB limit.
    #[error("object to insert too large. size in bytes: {size}, max size: {max}")]
    DocumentTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A document nested deeper than MongoDB allows for storage.
    #[error("{0}")]
    TooDeep(String),
    /// A key (E(_id) plus path) too long for the engine.
    #[error("{0}")]
    KeyTooLong(String),
    /// A document or request that is malformed.
    #[error("{0}")]
    BadValue(String),
    /// An index conflicting with an existing one (85 IndexOptionsConflict,
    /// 86 IndexKeySpecsConflict) or otherwise refused with a MongoDB code (67).
    #[error("{message}")]
    IndexConflict {
        /// The MongoDB code.
        code: i32,
        /// The message.
        message: String,
    },
    /// No index with that name or key pattern.
    #[error("{0}")]
    IndexNotFound(String),
    /// Invalid options.
    #[error("{0}")]
    InvalidOptions(String),
    /// A feature accepted by MongoDB that Cairn does not implement yet.
    #[error("{0}")]
    NotImplemented(String),
    /// Stored bytes that do not decode (a bug or on-disk damage).
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// A snapshot read at a time older than the retained history (SnapshotTooOld, 239).
    #[error("{0}")]
    SnapshotTooOld(String),
    /// The multi-document transaction a statement belongs to is no longer open (aborted,
    /// e.g. by expiry, while the statement waited) — NoSuchTransaction (251).
    #[error("{0}")]
    TransactionAborted(String),
    /// A snapshot read at a time later than the cluster time (InvalidOptions, 72).
    #[error("{0}")]
    SnapshotInFuture(String),
    /// A document refused by its collection's validator (DocumentValidationFailure, 121),
    /// with MongoDB's `errInfo` (`{failingDocumentId, details}`).
    #[error("Document failed validation")]
    DocumentValidationFailure(RawDocumentBuf),
}

impl StorageError {
    /// True for errors a retry of the whole operation can fix.
    pub fn is_transient(&self) -> bool {
        matches!(self, StorageError::Engine(e) if e.is_transient())
    }
}

/// Result alias for storage calls.
pub type Result<T> = std::result::Result<T, StorageError>;
