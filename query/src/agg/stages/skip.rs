//! `$skip`: drops the first `n` documents (a non-negative integer; 5107200 otherwise).

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf};

use super::limit::count_arg;
use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage};
use crate::error::Result;

/// A parsed `$skip`.
#[derive(Debug)]
pub struct Skip {
    /// Documents dropped.
    pub n: u64,
}

/// Parses `{$skip: n}`.
pub fn parse(arg: RawBsonRef<'_>, _cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    Ok(vec![Arc::new(Skip {
        n: count_arg("$skip", 5107200, arg)?,
    })])
}

impl Stage for Skip {
    fn name(&self) -> &'static str {
        "$skip"
    }

    fn serialize(&self) -> RawBson {
        RawBson::Int64(i64::try_from(self.n).unwrap_or(i64::MAX))
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::SeeNext
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(SkipStream {
            left: self.n,
            input,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct SkipStream {
    left: u64,
    input: Box<dyn DocStream>,
}

impl DocStream for SkipStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        while self.left > 0 {
            if self.input.next(cx)?.is_none() {
                self.left = 0;
                return Ok(None);
            }
            self.left -= 1;
            if self.left.is_multiple_of(4096) {
                cx.host.check_interrupt()?;
            }
        }
        self.input.next(cx)
    }
}
