//! The one error type of `cairn-wire`.
//!
//! Every variant describes *what* was wrong with the bytes; mapping to MongoDB error codes
//! happens in exactly one place, the server's `error` module. [`WireError::is_fatal`] tells
//! the connection whether the byte stream can still be trusted (framing intact: reply with an
//! error and keep reading) or not (close the connection).

use thiserror::Error;

/// Everything that can be wrong with a message received on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// `messageLength` is below the 16-byte header size.
    #[error("message length {0} is below the minimum of 16 bytes")]
    MessageTooShort(i64),
    /// `messageLength` is above `maxMessageSizeBytes`.
    #[error("message length {len} exceeds the maximum of {max} bytes")]
    MessageTooLarge {
        /// The length the header claimed.
        len: i64,
        /// The configured maximum.
        max: usize,
    },
    /// The opcode is not one this server speaks.
    #[error("unsupported opcode {0}")]
    UnknownOpcode(i32),
    /// A legacy opcode MongoDB 7.0 no longer accepts (OP_INSERT, OP_GET_MORE, ...).
    #[error("legacy opcode {0} is no longer supported")]
    LegacyOpcode(i32),
    /// A field ran past the end of its message or section.
    #[error("truncated message: {0}")]
    Truncated(&'static str),
    /// Bytes left over after the last structure of a message or section.
    #[error("{0}")]
    TrailingBytes(&'static str),
    /// An OP_MSG required flag bit (0-15) that this server does not know was set.
    #[error("unrecognized required OP_MSG flag bits {0:#x}")]
    UnknownRequiredFlags(u32),
    /// The CRC-32C checksum did not match the message.
    #[error("OP_MSG checksum does not match contents")]
    ChecksumMismatch,
    /// `checksumPresent` set on a message too short to hold a checksum.
    #[error("invalid message size for an OP_MSG containing a checksum")]
    ChecksumTooShort,
    /// More than two document sequences (MongoDB's limit).
    #[error("too many document sequences in OP_MSG")]
    TooManySequences,
    /// An OP_MSG had no kind 0 (body) section.
    #[error("OP_MSG messages must have a body")]
    MissingBody,
    /// An OP_MSG had more than one body section.
    #[error("multiple body sections in single message")]
    MultipleBodies,
    /// A section kind other than 0 or 1.
    #[error("unknown section kind {0}")]
    UnknownSectionKind(u8),
    /// A section or sequence declared a size that is impossible or lies.
    #[error("invalid section size: {0}")]
    BadSectionSize(&'static str),
    /// Two document sequences with the same identifier.
    #[error("duplicate document sequence: {0}")]
    DuplicateSequence(String),
    /// A document sequence whose identifier is also a field of the body.
    #[error("duplicate field between body and document sequence: {0}")]
    SequenceConflictsWithBody(String),
    /// A document failed BSON validation.
    #[error("invalid BSON: {0}")]
    InvalidBson(String),
    /// A BSON document nested deeper than allowed.
    #[error("BSON document nested deeper than the maximum depth of {0}")]
    BsonTooDeep(usize),
    /// A BSON document larger than allowed.
    #[error("BSON document of {len} bytes exceeds the maximum of {max} bytes")]
    BsonTooLarge {
        /// Its declared size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A C string without terminator or with invalid UTF-8.
    #[error("invalid C string: {0}")]
    BadCString(&'static str),
    /// OP_QUERY against a namespace that is not `<db>.$cmd`.
    #[error("OP_QUERY is no longer supported for {0}; only commands on <db>.$cmd are")]
    OpQueryNotCommand(String),
    /// OP_COMPRESSED naming a compressor id this server does not know.
    #[error("unknown compressor id {0}")]
    UnknownCompressor(u8),
    /// OP_COMPRESSED wrapping another OP_COMPRESSED (or a non-message opcode).
    #[error("invalid original opcode {0} inside OP_COMPRESSED")]
    BadOriginalOpcode(i32),
    /// The payload did not decompress, or not to the declared size.
    #[error("decompression failed: {0}")]
    Decompression(String),
    /// Compressing a reply failed (not expected with in-memory buffers).
    #[error("compression failed: {0}")]
    Compression(String),
}

impl WireError {
    /// True when the byte stream can no longer be trusted: the frame boundary itself is in
    /// doubt, so the connection must be closed rather than answered.
    ///
    /// Mirrors MongoDB: bad lengths, unknown or removed opcodes, illegal required flag bits,
    /// checksum mismatches, too many document sequences and every decompression failure
    /// close the connection without a reply; other parse errors are answered.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            WireError::MessageTooShort(_)
                | WireError::MessageTooLarge { .. }
                | WireError::UnknownOpcode(_)
                | WireError::LegacyOpcode(_)
                | WireError::UnknownRequiredFlags(_)
                | WireError::ChecksumMismatch
                | WireError::TooManySequences
                | WireError::UnknownCompressor(_)
                | WireError::BadOriginalOpcode(_)
                | WireError::Decompression(_)
        )
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, WireError>;
