//! `$limit` and the shared parsing of `$limit`/`$skip` arguments
//! (`parseIntegerElementToNonNegativeLong`): a number with an integral value, at least 0;
//! `$limit` must also be positive (15958). Errors: 5107201 (`$limit`), 5107200 (`$skip`).

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf};

use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::Result;

/// The non-negative integer argument of `$limit` / `$skip` (`code` is the stage's error).
pub(crate) fn count_arg(name: &str, code: i32, v: RawBsonRef<'_>) -> Result<u64> {
    let shown = format!("{name}: {}", cairn_storage::display::value(v));
    let err = |why: &str| {
        loc(
            code,
            format!("invalid argument to {name} stage: {why}{shown}"),
        )
    };
    let n: f64 = match v {
        RawBsonRef::Int32(i) => f64::from(i),
        RawBsonRef::Int64(i) => {
            if i < 0 {
                return Err(err("Expected a non-negative number in: "));
            }
            return Ok(i as u64);
        }
        RawBsonRef::Double(d) => d,
        RawBsonRef::Decimal128(d) => {
            cairn_storage::decimal::to_f64(cairn_storage::decimal::Decimal::from_decimal128(d))
        }
        _ => return Err(err("Expected a number in: ")),
    };
    if n.is_nan() || n.fract() != 0.0 {
        return Err(err("Expected an integer: "));
    }
    if n < 0.0 {
        return Err(err("Expected a non-negative number in: "));
    }
    if n >= 9.223_372_036_854_776e18 {
        return Err(err("Cannot represent as a 64-bit integer: "));
    }
    Ok(n as u64)
}

/// A parsed `$limit`.
#[derive(Debug)]
pub struct Limit {
    /// Documents passed on at most.
    pub n: u64,
}

/// Parses `{$limit: n}`.
pub fn parse(arg: RawBsonRef<'_>, _cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let n = count_arg("$limit", 5107201, arg)?;
    if n == 0 {
        return Err(loc(15958, "the limit must be positive"));
    }
    Ok(vec![Arc::new(Limit { n })])
}

impl Stage for Limit {
    fn name(&self) -> &'static str {
        "$limit"
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
        Ok(Box::new(LimitStream {
            left: self.n,
            input,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct LimitStream {
    left: u64,
    input: Box<dyn DocStream>,
}

impl DocStream for LimitStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if self.left == 0 {
            return Ok(None);
        }
        match self.input.next(cx)? {
            Some(d) => {
                self.left -= 1;
                Ok(Some(d))
            }
            None => {
                self.left = 0;
                Ok(None)
            }
        }
    }
}
