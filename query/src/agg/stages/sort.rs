//! `$sort`: orders documents by a sort pattern with `find`'s sort-key semantics (arrays sort
//! by their smallest/largest element, missing equals null), ties in input order. Followed by
//! `$limit` it keeps only the top k ([`Sort::limit`], set by the optimizer). Blocking: within
//! the memory limit, or spilling to disk with `allowDiskUse` (292 otherwise). Errors: not an
//! object 15973, empty 15976, bad values 15974/15975.

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};
use crate::sort::{SortSpec, SortedDocs, Sorter};

/// A parsed `$sort`.
#[derive(Debug, Clone)]
pub struct Sort {
    /// The pattern.
    pub spec: SortSpec,
    /// The pattern as given.
    pub doc: RawDocumentBuf,
    /// Keep only the first `limit` (a coalesced `$limit`).
    pub limit: Option<u64>,
}

impl Sort {
    /// A `$sort` of `doc`.
    pub fn from_doc(doc: &RawDocument) -> Result<Sort> {
        if doc.is_empty() {
            return Err(loc(15976, "$sort stage must have at least one sort key"));
        }
        let spec = SortSpec::parse(doc)?;
        if spec.natural().is_some() {
            return Err(QueryError::Location(
                17312,
                "$natural is not a valid sort key in $sort".into(),
            ));
        }
        Ok(Sort {
            spec,
            doc: doc.to_owned(),
            limit: None,
        })
    }
}

/// Parses `{$sort: {…}}`.
pub fn parse(arg: RawBsonRef<'_>, _cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(15973, "the $sort key specification must be an object"));
    };
    Ok(vec![Arc::new(Sort::from_doc(d)?)])
}

impl Stage for Sort {
    fn name(&self) -> &'static str {
        "$sort"
    }

    fn serialize(&self) -> RawBson {
        match self.limit {
            None => RawBson::Document(self.doc.clone()),
            Some(l) => RawBson::Document(rawdoc! {
                "sortKey": self.doc.clone(),
                "limit": i64::try_from(l).unwrap_or(i64::MAX),
            }),
        }
    }

    fn deps(&self, deps: &mut Deps) -> DepsState {
        for f in self.spec.fields() {
            deps.add_path(&f.path);
        }
        DepsState::SeeNext
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(SortStream {
            stage: self,
            opts: opts.clone(),
            input: Some(input),
            sorted: None,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct SortStream {
    stage: Arc<Sort>,
    opts: Arc<Options>,
    input: Option<Box<dyn DocStream>>,
    sorted: Option<SortedDocs>,
}

/// Drains `input` into a sorter with the run's limits.
pub(crate) fn sort_all(
    spec: &SortSpec,
    limit: Option<u64>,
    opts: &Options,
    input: &mut dyn DocStream,
    cx: &ExecCx<'_>,
) -> Result<SortedDocs> {
    let mut sorter = Sorter::new(
        spec.clone(),
        limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
        opts.memory_limit,
        opts.allow_disk_use,
        opts.spill_dir.clone(),
    );
    let mut n = 0u32;
    while let Some(d) = input.next(cx)? {
        sorter.push(d)?;
        n += 1;
        if n.is_multiple_of(1024) {
            cx.host.check_interrupt()?;
        }
    }
    sorter.finish()
}

impl DocStream for SortStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if let Some(mut input) = self.input.take() {
            self.sorted = Some(sort_all(
                &self.stage.spec,
                self.stage.limit,
                &self.opts,
                &mut *input,
                cx,
            )?);
        }
        match self.sorted.as_mut().and_then(Iterator::next) {
            Some(r) => r.map(Some),
            None => Ok(None),
        }
    }
}
