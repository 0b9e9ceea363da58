//! MongoDB error codes and the single place where errors become error replies.
//!
//! Invariants:
//! - every error that reaches a client is a [`CommandError`], built here or from another
//!   crate's error type by a `From` impl in this module (the only place that knows how a
//!   wire or storage error maps to a MongoDB code);
//! - an error reply has a router's shape: `ok: 0.0, errmsg, code, codeName[, extra info
//!   fields][, $clusterTime, operationTime][, topologyVersion][, errorLabels]`;
//! - which labels an error carries depends on the request, not on where the error came from:
//!   `TransientTransactionError` is decided in [`crate::session::finish`] for requests inside
//!   a transaction, and nowhere else;
//! - codes without a name in MongoDB's `error_codes.yml` report `codeName: "Location<code>"`;
//!   named codes without their own variant take their name from [`crate::error_names`].

use std::borrow::Cow;
use std::fmt;

use bson::raw::{CStr, cstr};
use bson::{RawArrayBuf, RawDocument, RawDocumentBuf, rawdoc};
use cairn_storage::StorageError;
use cairn_wire::WireError;

macro_rules! error_codes {
    ($($name:ident = $code:expr),* $(,)?) => {
        /// A MongoDB error code with its `codeName`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ErrorCode {
            $(
                #[doc = concat!("MongoDB code ", stringify!($code), ".")]
                $name,
            )*
            /// A code MongoDB raises by number only (`codeName: "Location<n>"`).
            Location(i32),
        }

        impl ErrorCode {
            /// The numeric code.
            pub fn code(self) -> i32 {
                match self {
                    $(ErrorCode::$name => $code,)*
                    ErrorCode::Location(n) => n,
                }
            }

            /// The named code for a number, or `Location(n)` when MongoDB gives it no name.
            pub fn from_code(n: i32) -> ErrorCode {
                $(if n == $code { return ErrorCode::$name; })*
                ErrorCode::Location(n)
            }

            /// The `codeName`.
            pub fn name(self) -> Cow<'static, str> {
                match self {
                    $(ErrorCode::$name => Cow::Borrowed(stringify!($name)),)*
                    ErrorCode::Location(n) => match crate::error_names::name(n) {
                        Some(name) => Cow::Borrowed(name),
                        None => Cow::Owned(format!("Location{n}")),
                    },
                }
            }
        }
    };
}

error_codes! {
    InternalError = 1,
    BadValue = 2,
    FailedToParse = 9,
    Unauthorized = 13,
    TypeMismatch = 14,
    Overflow = 15,
    ProtocolError = 17,
    IllegalOperation = 20,
    InvalidBSON = 22,
    NamespaceNotFound = 26,
    IndexNotFound = 27,
    CannotCreateIndex = 67,
    IndexOptionsConflict = 85,
    IndexKeySpecsConflict = 86,
    CannotIndexParallelArrays = 171,
    AmbiguousIndexKeyPattern = 181,
    InvalidIndexSpecificationOption = 197,
    CursorNotFound = 43,
    NamespaceExists = 48,
    DollarPrefixedFieldName = 52,
    InvalidIdField = 53,
    InvalidLength = 16,
    UnsatisfiableWriteConcern = 100,
    CommandNotSupported = 115,
    CursorInUse = 143,
    InvalidPipelineOperator = 168,
    QueryPlanKilled = 175,
    DatabaseDifferCase = 13297,
    DuplicateKey = 11000,
    KeyTooLong = 17280,
    QueryExceededMemoryLimitNoDiskUseAllowed = 292,
    MaxTimeMSExpired = 50,
    PathNotViable = 28,
    ConflictingUpdateOperators = 40,
    ImmutableField = 66,
    NoSuchKey = 4,
    CannotBackfillArray = 34,
    NotSingleValueField = 54,
    InvalidDBRef = 55,
    EmptyFieldName = 56,
    NotExactValueField = 111,
    NoMatchingDocument = 47,
    CommandNotFound = 59,
    InvalidOptions = 72,
    InvalidNamespace = 73,
    ShutdownInProgress = 91,
    OperationFailed = 96,
    WriteConflict = 112,
    ClientMetadataCannotBeMutated = 186,
    IllegalOpMsgFlag = 223,
    TooManyDocumentSequences = 233,
    NotImplemented = 238,
    ChecksumMismatch = 288,
    APIVersionError = 322,
    APIStrictError = 323,
    UnsupportedOpQueryCommand = 352,
    BSONObjectTooLarge = 10334,
    NoSuchSession = 206,
    TransactionTooOld = 225,
    SnapshotTooOld = 239,
    NoSuchTransaction = 251,
    IncompleteTransactionHistory = 217,
    TransactionCommitted = 256,
    TransactionTooLarge = 257,
    OperationNotSupportedInTransaction = 263,
    ConflictingOperationInProgress = 117,
    Interrupted = 11601,
    ExceededTimeLimit = 262,
    InvalidUUID = 207,
    GraphContainsCycle = 5,
    OptionNotSupportedOnView = 167,
    ViewDepthLimitExceeded = 165,
    CommandNotSupportedOnView = 166,
    FailPointSetFailed = 266,
    DocumentValidationFailure = 121,
    CappedPositionLost = 136,
    ChangeStreamFatalError = 280,
    ChangeStreamHistoryLost = 286,
}

/// An error to be sent to the client as an error reply.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandError {
    /// The code.
    pub code: ErrorCode,
    /// `errmsg`.
    pub message: String,
    /// `errorLabels` (e.g. `TransientTransactionError`).
    pub labels: Vec<&'static str>,
    /// Fields placed after the cluster-time gossip, before the labels (e.g.
    /// `topologyVersion` on ShutdownInProgress).
    pub prefix: Option<RawDocumentBuf>,
    /// Extra info placed after `codeName`.
    pub extra: Option<RawDocumentBuf>,
}

impl CommandError {
    /// An error with a code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> CommandError {
        CommandError {
            code,
            message: message.into(),
            labels: Vec::new(),
            prefix: None,
            extra: None,
        }
    }

    /// BadValue (2).
    pub fn bad_value(message: impl Into<String>) -> CommandError {
        CommandError::new(ErrorCode::BadValue, message)
    }

    /// TypeMismatch (14) in IDL wording: "BSON field '<cmd>.<field>' is the wrong type
    /// '<actual>', expected type '<expected>'".
    pub fn wrong_type(field: &str, actual: &str, expected: &str) -> CommandError {
        CommandError::new(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field '{field}' is the wrong type '{actual}', expected type '{expected}'"
            ),
        )
    }

    /// IDLUnknownField (40415): "BSON field '<cmd>.<field>' is an unknown field."
    pub fn unknown_field(command: &str, field: &str) -> CommandError {
        CommandError::new(
            ErrorCode::Location(40415),
            format!("BSON field '{command}.{field}' is an unknown field."),
        )
    }

    /// IDLFailedToParse missing field (40414).
    pub fn missing_field(field: &str) -> CommandError {
        CommandError::new(
            ErrorCode::Location(40414),
            format!("BSON field '{field}' is missing but a required field"),
        )
    }

    /// Adds an error label.
    pub fn with_label(mut self, label: &'static str) -> CommandError {
        self.labels.push(label);
        self
    }

    /// Sets fields placed before `ok`.
    pub fn with_prefix(mut self, prefix: RawDocumentBuf) -> CommandError {
        self.prefix = Some(prefix);
        self
    }

    /// Sets extra info placed after `codeName`.
    pub fn with_extra(mut self, extra: RawDocumentBuf) -> CommandError {
        self.extra = Some(extra);
        self
    }

    /// Renders the error reply document.
    pub fn to_reply(&self) -> RawDocumentBuf {
        self.to_reply_with(None)
    }

    /// Renders the error reply in a router's field order: `ok, errmsg, code, codeName,
    /// extra info, [gossip ($clusterTime, operationTime)], [prefix fields such as
    /// topologyVersion], [errorLabels]`.
    pub fn to_reply_with(&self, gossip: Option<&RawDocument>) -> RawDocumentBuf {
        let mut out = RawDocumentBuf::new();
        out.append(cstr!("ok"), 0.0);
        out.append(cstr!("errmsg"), self.message.as_str());
        out.append(cstr!("code"), self.code.code());
        out.append(cstr!("codeName"), self.code.name().as_ref());
        if let Some(e) = &self.extra {
            append_all(&mut out, e);
        }
        if let Some(g) = gossip {
            append_all(&mut out, g);
        }
        if let Some(p) = &self.prefix {
            append_all(&mut out, p);
        }
        if !self.labels.is_empty() {
            let mut labels = RawArrayBuf::new();
            for l in &self.labels {
                labels.push(*l);
            }
            out.append(cstr!("errorLabels"), labels);
        }
        out
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code.name(),
            self.code.code(),
            self.message
        )
    }
}

impl std::error::Error for CommandError {}

/// A field name for a runtime string. Names taken from validated BSON or from the server's
/// own constants never contain NUL; should one ever do, it becomes a BadValue error.
pub fn key(s: &str) -> Result<&CStr, CommandError> {
    <&CStr>::try_from(s)
        .map_err(|_| CommandError::bad_value(format!("field name contains a NUL byte: {s:?}")))
}

/// Appends every element of `from` to `out` (skipping malformed ones, which validated
/// documents never contain).
pub fn append_all(out: &mut RawDocumentBuf, from: &RawDocument) {
    for (k, v) in from.iter().flatten() {
        out.append(k, v);
    }
}

impl From<WireError> for CommandError {
    fn from(e: WireError) -> CommandError {
        let code = match &e {
            WireError::MessageTooShort(_) | WireError::MessageTooLarge { .. } => {
                ErrorCode::ProtocolError
            }
            WireError::UnknownOpcode(_) => ErrorCode::IllegalOperation,
            WireError::LegacyOpcode(op) => ErrorCode::Location(match op {
                2001 => 5745705,
                2002 => 5745706,
                2006 => 5745704,
                _ => 5745707,
            }),
            WireError::Truncated(_) | WireError::TrailingBytes(_) => ErrorCode::Overflow,
            WireError::UnknownRequiredFlags(_) => ErrorCode::IllegalOpMsgFlag,
            WireError::ChecksumMismatch => ErrorCode::ChecksumMismatch,
            WireError::ChecksumTooShort => ErrorCode::Location(51252),
            WireError::TooManySequences => ErrorCode::TooManyDocumentSequences,
            WireError::MissingBody => ErrorCode::Location(40587),
            WireError::MultipleBodies => ErrorCode::Location(40430),
            WireError::UnknownSectionKind(_) => ErrorCode::Location(40432),
            WireError::BadSectionSize(_) | WireError::BadCString(_) => ErrorCode::Overflow,
            WireError::DuplicateSequence(_) => ErrorCode::Location(40431),
            WireError::SequenceConflictsWithBody(_) => ErrorCode::Location(40433),
            WireError::InvalidBson(_) | WireError::BsonTooLarge { .. } => ErrorCode::InvalidBSON,
            WireError::BsonTooDeep(_) => ErrorCode::Overflow,
            WireError::OpQueryNotCommand(_) => ErrorCode::Location(5739101),
            WireError::UnknownCompressor(_) => ErrorCode::InternalError,
            WireError::BadOriginalOpcode(_) | WireError::Decompression(_) => ErrorCode::BadValue,
            WireError::Compression(_) => ErrorCode::InternalError,
        };
        CommandError::new(code, e.to_string())
    }
}

impl From<StorageError> for CommandError {
    fn from(e: StorageError) -> CommandError {
        use cairn_storage::engine::EngineError;
        let code = match &e {
            StorageError::Engine(EngineError::Conflict) => ErrorCode::WriteConflict,
            StorageError::Engine(EngineError::NoSuchSpace(_)) => ErrorCode::QueryPlanKilled,
            StorageError::Engine(EngineError::KeyTooLong { .. }) => ErrorCode::KeyTooLong,
            StorageError::Engine(EngineError::Io(_)) => ErrorCode::InternalError,
            StorageError::DuplicateKey { .. } => ErrorCode::DuplicateKey,
            StorageError::NamespaceExists(_) => ErrorCode::NamespaceExists,
            StorageError::DatabaseDifferCase(_) => ErrorCode::DatabaseDifferCase,
            StorageError::NamespaceNotFound(_) => ErrorCode::NamespaceNotFound,
            StorageError::InvalidNamespace(_) => ErrorCode::InvalidNamespace,
            StorageError::InvalidIdField(_) => ErrorCode::InvalidIdField,
            StorageError::DocumentTooLarge { .. } => ErrorCode::BadValue,
            StorageError::TooDeep(_) => ErrorCode::Overflow,
            StorageError::KeyTooLong(_) => ErrorCode::KeyTooLong,
            StorageError::BadValue(_) => ErrorCode::BadValue,
            StorageError::InvalidOptions(_) => ErrorCode::InvalidOptions,
            StorageError::IndexConflict { code, .. } => ErrorCode::from_code(*code),
            StorageError::IndexNotFound(_) => ErrorCode::IndexNotFound,
            StorageError::NotImplemented(_) => ErrorCode::NotImplemented,
            StorageError::Corrupt(_) => ErrorCode::InternalError,
            StorageError::SnapshotTooOld(_) => ErrorCode::SnapshotTooOld,
            StorageError::SnapshotInFuture(_) => ErrorCode::InvalidOptions,
            StorageError::TransactionAborted(_) => ErrorCode::NoSuchTransaction,
            StorageError::DocumentValidationFailure(_) => ErrorCode::DocumentValidationFailure,
        };
        let message = match &e {
            StorageError::Engine(EngineError::Conflict) => {
                "WriteConflict error: this operation conflicted with another operation. Please retry your operation or multi-document transaction.".to_string()
            }
            other => other.to_string(),
        };
        let mut err = CommandError::new(code, message);
        match &e {
            StorageError::DuplicateKey {
                key_pattern,
                key_value,
                ..
            } => {
                err.extra = Some(
                    rawdoc! {"keyPattern": key_pattern.clone(), "keyValue": key_value.clone()},
                );
            }
            StorageError::DocumentValidationFailure(info) => {
                err.extra = Some(rawdoc! {"errInfo": info.clone()});
            }
            _ => {}
        }
        err
    }
}

impl cairn_storage::TxError for CommandError {
    fn retryable(&self) -> bool {
        // WriteConflict comes only from storage conflicts, QueryPlanKilled from a space that
        // vanished under a concurrent drop or rename (see StorageError's mapping above).
        matches!(
            self.code,
            ErrorCode::WriteConflict | ErrorCode::QueryPlanKilled
        )
    }
}

impl From<cairn_storage::engine::EngineError> for CommandError {
    fn from(e: cairn_storage::engine::EngineError) -> CommandError {
        CommandError::from(StorageError::from(e))
    }
}

impl From<cairn_query::QueryError> for CommandError {
    fn from(e: cairn_query::QueryError) -> CommandError {
        use cairn_query::QueryError as Q;
        let code = match &e {
            Q::Storage(s) => return CommandError::from(s.clone()),
            Q::BadValue(_) => ErrorCode::BadValue,
            Q::FailedToParse(_) => ErrorCode::FailedToParse,
            Q::TypeMismatch(_) => ErrorCode::TypeMismatch,
            Q::DollarPrefixedFieldName(_) => ErrorCode::DollarPrefixedFieldName,
            Q::InvalidIdField(_) => ErrorCode::InvalidIdField,
            Q::NotImplemented(_) => ErrorCode::NotImplemented,
            Q::Location(n, _) => ErrorCode::from_code(*n),
        };
        CommandError::new(code, e.to_string())
    }
}

/// An empty success reply: `{ok: 1.0}`.
pub fn ok() -> RawDocumentBuf {
    rawdoc! {"ok": 1.0}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names() {
        assert_eq!(ErrorCode::CommandNotFound.code(), 59);
        assert_eq!(ErrorCode::CommandNotFound.name(), "CommandNotFound");
        assert_eq!(ErrorCode::Location(40571).name(), "Location40571");
        assert_eq!(
            ErrorCode::from_code(292).name(),
            "QueryExceededMemoryLimitNoDiskUseAllowed"
        );
        assert_eq!(ErrorCode::from_code(15), ErrorCode::Overflow);
        assert_eq!(ErrorCode::from_code(40415), ErrorCode::Location(40415));
        assert_eq!(ErrorCode::WriteConflict.code(), 112);
        assert_eq!(
            ErrorCode::from_code(197).name(),
            "InvalidIndexSpecificationOption"
        );
        assert_eq!(ErrorCode::from_code(181).name(), "AmbiguousIndexKeyPattern");
    }

    #[test]
    fn error_reply_shape() {
        let e = CommandError::new(ErrorCode::WriteConflict, "conflict")
            .with_label("TransientTransactionError");
        let r = e.to_reply();
        let keys: Vec<_> = r.iter().map(|x| x.unwrap().0.as_str().to_owned()).collect();
        assert_eq!(keys, ["ok", "errmsg", "code", "codeName", "errorLabels"]);
        assert_eq!(r.get_f64("ok").unwrap(), 0.0);
        assert_eq!(r.get_i32("code").unwrap(), 112);
        assert_eq!(r.get_str("codeName").unwrap(), "WriteConflict");
    }

    #[test]
    fn wire_errors_map_to_mongodb_codes() {
        let c = |e: WireError| CommandError::from(e).code.code();
        assert_eq!(c(WireError::MultipleBodies), 40430);
        assert_eq!(c(WireError::MissingBody), 40587);
        assert_eq!(c(WireError::UnknownSectionKind(3)), 40432);
        assert_eq!(c(WireError::DuplicateSequence("d".into())), 40431);
        assert_eq!(c(WireError::SequenceConflictsWithBody("d".into())), 40433);
        assert_eq!(c(WireError::ChecksumMismatch), 288);
        assert_eq!(c(WireError::UnknownRequiredFlags(4)), 223);
        assert_eq!(c(WireError::InvalidBson("x".into())), 22);
        assert_eq!(c(WireError::MessageTooShort(3)), 17);
    }
}
