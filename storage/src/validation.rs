//! The document-validation hook: every document write checks the collection's validator here.
//!
//! Storage does not know what a validator means (that is the query language's business); it
//! only guarantees that no write path can skip the check. The layer that parses validators
//! installs a [`DocumentValidator`] with [`crate::Store::set_validator`], and
//! [`crate::WriteTxn::insert`], [`crate::WriteTxn::write_fields`] and
//! [`crate::WriteTxn::replace`] — the only calls that store a document — ask it before
//! writing anything:
//! - an insert (including an upsert and `$out`/`$merge` inserts) as `check(coll, None, new)`;
//! - an update or replacement as `check(coll, Some(old), new)` with the whole stored document
//!   and the whole document it becomes (moderate validation compares the two).
//!
//! A refused write is [`crate::StorageError::DocumentValidationFailure`] carrying MongoDB's
//! `errInfo`, and nothing of that document is written. A transaction whose writer set
//! [`crate::WriteTxn::set_bypass_validation`] (`bypassDocumentValidation: true`) skips the
//! check; the flag lives only as long as the [`crate::WriteTxn`] (a session's transaction
//! starts every command without it).
//!
//! Invariant: [`DocumentValidator::applies`] is called on every write and must be cheap; the
//! whole old document is read only when it says the collection is validated.

use bson::RawDocument;

use crate::catalog::CollectionMeta;
use crate::error::Result;

/// Checks documents written to a collection against its validator.
pub trait DocumentValidator: Send + Sync {
    /// Whether writes to `coll` are checked at all (it has a validator and validation is not
    /// `off`). Called on every write.
    fn applies(&self, coll: &CollectionMeta) -> bool;

    /// Checks `new`, replacing `old` for an update (`None` for an insert): `Ok` lets the write
    /// proceed (a `warn` action logs and proceeds), an error refuses it.
    fn check(
        &self,
        coll: &CollectionMeta,
        old: Option<&RawDocument>,
        new: &RawDocument,
    ) -> Result<()>;
}
