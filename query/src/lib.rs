//! `cairn-query`: MongoDB's query, update and document semantics on top of `cairn-storage`.
//!
//! The map:
//! - documents: [`insert::prepare`] (the stored form of a client document), [`path`]
//!   (dotted-path resolution through documents and arrays);
//! - matching: [`filter`] (match expressions), [`geo`] (GeoJSON, legacy shapes, spherical and
//!   planar predicates), [`regex`], [`jsonschema`] (`$jsonSchema`, also
//!   the collection validator), [`expr`] (aggregation expressions, `$expr`);
//! - shaping: [`projection`], [`sort`] (sort keys, external sorting), [`update`] (update
//!   documents and pipelines as pure functions over documents);
//! - access: [`index`] (index keys, specifications, bounds), [`plan`] (planner, plan
//!   cache, execution, explain);
//! - [`agg`]: aggregation pipelines, their stages and accumulators, change streams;
//! - [`validation`]: document validation (collection validators, their levels and actions,
//!   and MongoDB's explanation of a failure), installed into storage as its write hook.
//!
//! [`plan`]'s module doc walks one `find` end to end, [`agg`]'s one `aggregate`.
//!
//! Invariants: the query layer reaches data only through `cairn-storage`'s API and never
//! panics on client input; every error is a [`error::QueryError`].

pub mod agg;
pub mod error;
pub mod expr;
pub mod filter;
pub mod geo;
pub mod index;
pub mod insert;
pub mod jsonschema;
pub mod path;
pub mod plan;
pub mod projection;
pub mod regex;
pub mod sort;
pub mod update;
pub mod validation;

pub use cairn_storage as storage;
pub use error::{QueryError, Result};
