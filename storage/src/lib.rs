//! Cairn's storage layer: order-preserving keys, materialized-path documents, catalog and
//! transactions on fjall.

pub mod compare;
pub mod decimal;
pub mod engine;
pub mod keys;
