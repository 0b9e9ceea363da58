//! `cairn-query`: MongoDB's query, update and document semantics on top of `cairn-storage`.
//!
//! So far: [`insert::prepare`], which turns a client document into the document that is
//! stored (`_id` first, empty timestamps filled, illegal `_id`s refused); [`filter`], query
//! filters (match expressions) over [`path`], MongoDB's dotted-path resolution, and
//! [`regex`], PCRE-compatible regular expressions. Projections, sorting, updates and the
//! planner build on this crate (issues 4 and 5); [`agg`] is the aggregation framework
//! (pipelines, stages, accumulators) on top of [`expr`] and [`plan`].
//!
//! Invariants: the query layer reaches data only through `cairn-storage`'s API and never
//! panics on client input; every error is a [`error::QueryError`].

pub mod agg;
pub mod error;
pub mod expr;
pub mod filter;
pub mod index;
pub mod insert;
pub mod jsonschema;
pub mod path;
pub mod plan;
pub mod projection;
pub mod regex;
pub mod sort;
pub mod update;

pub use cairn_storage as storage;
pub use error::{QueryError, Result};
