//! The aggregation framework (MongoDB 7.0's `aggregate` pipelines).
//!
//! # A pipeline, end to end
//! 1. The command parses `pipeline` with [`Pipeline::parse`]: each element must be a document
//!    with one field (40323), named in the stage registry [`stages::REGISTRY`] (40324 for
//!    unknown names, NotImplemented 238 for MongoDB stages Cairn lacks); the stage's own
//!    `parse` function (one file per stage under [`stages`]) checks its argument and builds
//!    one or more [`Stage`]s. Expressions are parsed by [`crate::expr`] with the command's
//!    variables ([`ParseCx::ext`]); accumulators by [`accumulators`]. [`Pipeline::parse`] then
//!    checks stage positions (`$out`/`$merge` last: 40601, `$collStats`-like stages first:
//!    40602, writes inside `$facet`/`$lookup`: 40600/51047).
//! 2. [`Aggregation::prepare`] optimizes ([`optimize::optimize`]): adjacent `$match`es merge,
//!    a `$match` moves ahead of `$sort`, and ahead of `$project`/`$addFields`/`$set`/`$unset`
//!    when it reads nothing they change, `$skip`s add, `$limit`s take the smaller, and
//!    `$sort` + `$limit` become one top-k sort. The leading `$match`, `$sort`, `$skip` and
//!    `$limit` then move into a [`cursor::CursorStage`] (MongoDB's `$cursor`), together with a
//!    projection of the fields the rest of the pipeline needs ([`deps`]); when it needs none
//!    (`count_documents`), the stage only counts.
//! 3. [`Aggregation::open`] builds the chain of [`DocStream`]s (each stage's
//!    [`Stage::open`]), and the command pulls documents with [`Running::next`], passing an
//!    [`ExecCx`] — the read view, its catalog and the [`Host`] — to every call. The
//!    `$cursor` stage plans its query on the first call ([`crate::plan::choose`]: index bounds,
//!    covered plans, sort from an index, or a collection scan with a top-k [`Sorter`]) and then
//!    keeps only its position, so a cursor can continue on a new snapshot.
//!    Blocking stages (`$group`, `$sort`, `$bucketAuto`, `$facet`, `$count`, `$sample`, …)
//!    consume their input on their first call, within [`Options::memory_limit`] (292 unless
//!    `allowDiskUse`, in which case `$group` and `$sort` spill to temporary files).
//!    `$setWindowFields` (desugared into a `$sort` and `$_internalSetWindowFields`) streams
//!    partition by partition through [`window`], within [`Options::window_memory_limit`].
//! 4. `explain` reads the same structures back ([`Aggregation::explain`]).
//!
//! # Invariants
//! - Nothing here reads or writes storage except through [`ExecCx`] and [`Host`].
//! - Parsing and execution never panic on any input; every error has MongoDB's code.
//! - A parsed [`Pipeline`] is immutable and can be opened any number of times (`$lookup`,
//!   `$facet` and `$unionWith` open their sub-pipelines per document or per run).
//!
//! [`Sorter`]: crate::sort::Sorter

pub mod accumulators;
mod context;
pub mod cursor;
pub mod deps;
mod doc;
mod optimize;
mod pipeline;
pub mod stages;
pub mod window;

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use bson::{RawBson, RawDocument, RawDocumentBuf};

pub use context::{
    Catalog, CollStatsSpec, CurrentOpSpec, DEFAULT_WINDOW_MEMORY_LIMIT_BYTES, Ddl, ExecCx, Host,
    NoData, NoHost, Options, Writer,
};
pub use deps::{Deps, DepsState};
pub use pipeline::{Aggregation, ParseCx, Pipeline, Running, SubContext};

use crate::error::{QueryError, Result};

/// A stream of documents: one stage's output.
pub trait DocStream: Send {
    /// The next document, `None` at the end. `cx` is the data view for this call.
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>>;

    /// Passes every remaining document to `f`, in order (what a blocking stage that consumes
    /// its whole input calls). A stage may build the documents it passes in a reused buffer
    /// instead of one allocation each (`$unwind` does); the documents are the same as
    /// [`DocStream::next`] returns.
    fn drain(
        &mut self,
        cx: &ExecCx<'_>,
        f: &mut dyn FnMut(&RawDocument) -> Result<()>,
    ) -> Result<()> {
        while let Some(d) = self.next(cx)? {
            f(&d)?;
        }
        Ok(())
    }

    /// Whether every document this stream passes is as storage holds it — read from a
    /// [`crate::plan::Source`] (the store's transactions) and passed on whole, projected or
    /// copied element by element — and so well-formed with UTF-8 names and strings
    /// (`cairn_storage::doc`'s trusted reads, the wire layer's checks on insert): a reader
    /// may then skip checking that again (`$group`'s field walk does). False unless a
    /// stream knows it.
    fn stored(&self) -> bool {
        false
    }
}

/// Where a stage may appear.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Constraints {
    /// Only as the first stage (40602).
    pub first: bool,
    /// Only as the last stage (40601): `$out`, `$merge`.
    pub last: bool,
    /// Produces documents without input (may start `{aggregate: 1}`).
    pub collectionless: bool,
    /// Writes (not allowed inside `$facet`, `$lookup`, `$unionWith`).
    pub writes: bool,
    /// Not allowed inside `$facet` (40600).
    pub not_in_facet: bool,
}

/// A parsed pipeline stage.
pub trait Stage: fmt::Debug + Send + Sync + Any {
    /// The stage name (`$match`).
    fn name(&self) -> &'static str;

    /// The stage's argument as explain shows it (`{$match: <this>}`).
    fn serialize(&self) -> RawBson;

    /// Adds what the stage reads; says whether later stages' reads matter (see [`deps`]).
    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::WholeDocument
    }

    /// Where it may appear.
    fn constraints(&self) -> Constraints {
        Constraints::default()
    }

    /// The stage's running form over `input`.
    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>>;

    /// For the optimizer's downcasts.
    fn as_any(&self) -> &dyn Any;
}

/// `{name: value}`.
pub(crate) fn stage_doc(name: &str, value: RawBson) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    if let Ok(k) = <&bson::raw::CStr>::try_from(name) {
        d.append(k, value);
    }
    d
}

/// A stream of no documents.
pub(crate) struct Empty;

impl DocStream for Empty {
    fn next(&mut self, _cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        Ok(None)
    }
}

/// A stream over documents held in memory.
pub(crate) struct Buffered(pub(crate) std::collections::VecDeque<RawDocumentBuf>);

impl DocStream for Buffered {
    fn next(&mut self, _cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        Ok(self.0.pop_front())
    }
}

/// Largest document (16 MiB), the limit of `$lookup` arrays and `$facet` results.
pub(crate) const MAX_DOC_BYTES: usize = 16 * 1024 * 1024;

/// MongoDB's `addContext`: same code, message `"<context> :: caused by :: <message>"`.
pub(crate) fn with_context(e: QueryError, context: &str) -> QueryError {
    let wrap = |m: String| format!("{context} :: caused by :: {m}");
    match e {
        QueryError::BadValue(m) => QueryError::BadValue(wrap(m)),
        QueryError::FailedToParse(m) => QueryError::FailedToParse(wrap(m)),
        QueryError::TypeMismatch(m) => QueryError::TypeMismatch(wrap(m)),
        QueryError::DollarPrefixedFieldName(m) => QueryError::DollarPrefixedFieldName(wrap(m)),
        QueryError::InvalidIdField(m) => QueryError::InvalidIdField(wrap(m)),
        QueryError::NotImplemented(m) => QueryError::NotImplemented(wrap(m)),
        QueryError::Location(n, m) => QueryError::Location(n, wrap(m)),
        other @ QueryError::Storage(_) => other,
    }
}

pub(crate) fn loc(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::Location(code, msg.into())
}
