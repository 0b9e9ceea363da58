//! Where a command reads and writes: [`Target`].
//!
//! - [`Target::Auto`]: outside a transaction. Each write statement (or chunk of one) is its own
//!   storage transaction, rerun on conflicts inside the server ([`Store::write`]); each read
//!   (and each cursor batch) uses a fresh snapshot.
//! - [`Target::Snapshot`]: `readConcern: {level: "snapshot"}` outside a transaction: every
//!   read, including the cursor's later batches, uses one pinned snapshot taken at a known
//!   cluster time.
//! - [`Target::Txn`]: inside a session's multi-document transaction: reads see the
//!   transaction's snapshot plus its own writes; writes go into it and become visible to others
//!   only when it commits. Nothing is rerun: a conflict fails the statement with WriteConflict
//!   (labelled TransientTransactionError) and the client retries the whole transaction.
//!
//! Invariants: [`TxnCell`]'s lock is only taken inside blocking storage work, never across an
//! `.await`; a transaction's state is never used by two commands at once (the session is
//! checked out by one command at a time, see [`super`]).

use std::sync::{Arc, Mutex};

use bson::Timestamp;
use cairn_query::plan::Source;
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::{Durability, ReadTxn, StorageError, Store, TxError, TxnState, WriteTxn};

use crate::error::CommandError;

/// A session's open transaction, shared by the session and the command running in it.
#[derive(Debug)]
pub struct TxnCell {
    store: Arc<Store>,
    /// The transaction number.
    pub number: i64,
    slot: Mutex<Option<TxnState>>,
}

impl TxnCell {
    /// Wraps an open transaction.
    pub fn new(store: Arc<Store>, number: i64, state: TxnState) -> TxnCell {
        TxnCell {
            store,
            number,
            slot: Mutex::new(Some(state)),
        }
    }

    /// Runs `f` on the transaction (blocking; call off the runtime).
    pub fn with<R, E: From<StorageError>>(
        &self,
        f: impl FnOnce(&mut WriteTxn<'_>) -> Result<R, E>,
    ) -> Result<R, E> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        let state = slot.take().ok_or_else(|| {
            E::from(StorageError::TransactionAborted(format!(
                "Transaction with {{ txnNumber: {}, txnRetryCounter: 0 }} has been aborted.",
                self.number
            )))
        })?;
        let mut t = self.store.resume(state);
        let r = f(&mut t);
        *slot = Some(t.suspend());
        r
    }

    /// Takes the transaction out for commit or abort; `None` if it is already gone.
    pub fn take(&self) -> Option<TxnState> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Keys written so far (0 once taken).
    pub fn writes(&self) -> usize {
        self.slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, TxnState::writes)
    }
}

impl Drop for TxnCell {
    fn drop(&mut self) {
        // A transaction nobody committed or aborted explicitly is abandoned here.
        if let Some(state) = self.take() {
            self.store.abort_txn(state);
        }
    }
}

/// Where a command's reads and writes go (see the module doc).
#[derive(Debug, Clone, Default)]
pub enum Target {
    /// Outside a transaction, reading the latest data.
    #[default]
    Auto,
    /// A pinned snapshot at a cluster time (`readConcern: snapshot`).
    Snapshot(ReadTxn, Timestamp),
    /// A session's multi-document transaction.
    Txn(Arc<TxnCell>),
}

impl std::fmt::Debug for ReadView<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadView::Snap(..) => write!(f, "ReadView::Snap"),
            ReadView::Txn(_) => write!(f, "ReadView::Txn"),
        }
    }
}

/// What a read sees: a snapshot with the committed catalog, or a transaction.
pub enum ReadView<'a, 's> {
    /// A snapshot; collections come from the committed catalog.
    Snap(&'a ReadTxn, &'a Store),
    /// A transaction; collections as the transaction sees them (its own creations too).
    Txn(&'a WriteTxn<'s>),
}

impl ReadView<'_, '_> {
    /// The documents and indexes to read.
    pub fn source(&self) -> &dyn Source {
        match self {
            ReadView::Snap(r, _) => *r,
            ReadView::Txn(t) => *t,
        }
    }

    /// A collection's metadata as this view sees it.
    pub fn collection(
        &self,
        db: &str,
        coll: &str,
    ) -> Result<Option<Arc<CollectionMeta>>, CommandError> {
        match self {
            ReadView::Snap(_, store) => Ok(store.collection(db, coll)),
            ReadView::Txn(t) => Ok(t.collection(db, coll)?),
        }
    }

    /// A view's definition as this view sees it.
    pub fn view(
        &self,
        db: &str,
        name: &str,
    ) -> Result<Option<Arc<cairn_storage::catalog::ViewMeta>>, CommandError> {
        match self {
            ReadView::Snap(_, store) => Ok(store.view(db, name)),
            ReadView::Txn(t) => Ok(t.view(db, name)?),
        }
    }

    /// The views of `db`, in name order.
    pub fn views_in(&self, db: &str) -> Vec<Arc<cairn_storage::catalog::ViewMeta>> {
        match self {
            ReadView::Snap(_, store) => store.catalog().views_in(db).cloned().collect(),
            ReadView::Txn(t) => t.views_in(db),
        }
    }
}

impl Target {
    /// Whether this is a multi-document transaction.
    pub fn in_txn(&self) -> bool {
        matches!(self, Target::Txn(_))
    }

    /// The transaction, if any.
    pub fn txn(&self) -> Option<&Arc<TxnCell>> {
        match self {
            Target::Txn(c) => Some(c),
            _ => None,
        }
    }

    /// Runs a read (blocking).
    pub fn read<R>(
        &self,
        store: &Store,
        f: impl FnOnce(&ReadView<'_, '_>) -> Result<R, CommandError>,
    ) -> Result<R, CommandError> {
        match self {
            Target::Auto => {
                let r = store.read()?;
                f(&ReadView::Snap(&r, store))
            }
            Target::Snapshot(r, _) => f(&ReadView::Snap(r, store)),
            Target::Txn(cell) => cell.with(|t| f(&ReadView::Txn(t))),
        }
    }

    /// Runs a write (blocking): outside a transaction as its own storage transaction with
    /// conflict reruns and `durability`; inside one, once, on the transaction.
    pub fn write<R, E: TxError>(
        &self,
        store: &Store,
        durability: Durability,
        mut f: impl FnMut(&mut WriteTxn<'_>) -> Result<R, E>,
    ) -> Result<R, E> {
        match self {
            Target::Auto => store.write(durability, f),
            Target::Snapshot(..) => Err(E::from(StorageError::InvalidOptions(
                "writes are not allowed with readConcern snapshot outside a transaction".into(),
            ))),
            Target::Txn(cell) => cell.with(|t| f(t)),
        }
    }

    /// The collection, created if it does not exist: outside a transaction as its own DDL,
    /// inside one as part of it.
    pub fn ensure_collection(
        &self,
        store: &Store,
        db: &str,
        coll: &str,
    ) -> Result<Arc<CollectionMeta>, CommandError> {
        match self {
            Target::Txn(cell) => cell.with(|t| Ok(t.ensure_collection(db, coll)?)),
            _ => Ok(store.ensure_collection(db, coll)?),
        }
    }
}
