//! `cairn-storage`: order-preserving keys, materialized-path documents, the catalog and
//! transactions, on fjall.
//!
//! Layers, bottom up:
//! - [`engine`]: the narrow seam — spaces of ordered keys and serializable transactions —
//!   with the fjall engine and an in-memory one for tests. Only this module imports fjall.
//! - [`keys`] and [`compare`]: `E(v)`, the byte encoding of BSON values whose byte order is
//!   MongoDB's comparison order, and that comparison itself.
//! - [`doc`]: a document as one key-value pair per node (materialized paths).
//! - [`elements`]: a light walk over raw BSON elements (type, key and value bytes) for fast
//!   paths that fall back to the bson crate at anything unusual.
//! - [`catalog`], [`namespace`]: which collections exist and which names are legal.
//! - [`store`]: collections of documents — DDL, writes in transactions with conflict
//!   retries and group commit, snapshot reads and resumable scans, statistics; and sessions'
//!   multi-statement transactions ([`store::TxnState`]), held open between commands and
//!   committed or aborted as a whole, with the collections and indexes they create.
//! - [`fetch`]: batched document reads for index hits (one snapshot, key order, a range walk
//!   while the hits are dense, point reads once they are sparse).
//! - [`clock`] and [`history`]: the cluster clock whose ticks are commits, and the snapshots
//!   retained by cluster time for `readConcern: snapshot` reads.
//! - [`sessions`]: the durable records of retryable writes and committed transactions.
//! - [`validation`]: the hook through which every document write is checked against its
//!   collection's validator.
//!
//! Invariants: every read of a document comes from one snapshot (never torn); every write
//! is one serializable transaction, and every commit that writes takes the next cluster time
//! under one commit lock; errors are [`error::StorageError`], never panics.

pub mod capped;
pub mod catalog;
pub mod changelog;
pub mod clock;
pub mod compare;
pub mod decimal;
pub mod diff;
pub mod display;
pub mod doc;
pub mod elements;
pub mod engine;
pub mod error;
pub mod fetch;
pub mod history;
pub mod index;
pub mod index_ops;
pub mod keys;
pub mod namespace;
pub mod sessions;
pub mod store;
pub mod validation;
pub mod views;

pub use error::{Result, StorageError};
pub use store::{
    Durability, ReadTxn, ScanBatch, ScanLimits, Store, StoreOptions, TxError, TxnState, WriteTxn,
};
