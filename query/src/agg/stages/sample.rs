//! `$sample: {size: n}`: `n` documents chosen uniformly at random from the input (reservoir
//! sampling, so memory holds `n` documents), in random order. Errors: not an object 28745,
//! size not a number 28746, negative 28747, missing 28749, unknown option 28748.

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf, rawdoc};
use rand::Rng;
use rand::seq::SliceRandom;

use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};

/// A parsed `$sample`.
#[derive(Debug)]
pub struct Sample {
    /// How many documents.
    pub size: u64,
}

/// Parses `{$sample: {size}}`.
pub fn parse(arg: RawBsonRef<'_>, _cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            28745,
            "the $sample stage specification must be an object",
        ));
    };
    let mut size = None;
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "size" => {
                let n = match v {
                    RawBsonRef::Int32(i) => i64::from(i),
                    RawBsonRef::Int64(i) => i,
                    RawBsonRef::Double(f) => f as i64,
                    RawBsonRef::Decimal128(dd) => cairn_storage::decimal::to_f64(
                        cairn_storage::decimal::Decimal::from_decimal128(dd),
                    ) as i64,
                    _ => return Err(loc(28746, "size argument to $sample must be a number")),
                };
                if n < 0 {
                    return Err(loc(28747, "size argument to $sample must not be negative"));
                }
                size = Some(n as u64);
            }
            other => {
                return Err(loc(
                    28748,
                    format!("unrecognized option to $sample: {other}"),
                ));
            }
        }
    }
    let Some(size) = size else {
        return Err(loc(28749, "$sample stage must specify a size"));
    };
    Ok(vec![Arc::new(Sample { size })])
}

impl Stage for Sample {
    fn name(&self) -> &'static str {
        "$sample"
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(rawdoc! {"size": i64::try_from(self.size).unwrap_or(i64::MAX)})
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::SeeNext
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(SampleStream {
            size: self.size,
            opts: opts.clone(),
            input: Some(input),
            out: Vec::new(),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct SampleStream {
    size: u64,
    opts: Arc<Options>,
    input: Option<Box<dyn DocStream>>,
    out: Vec<RawDocumentBuf>,
}

impl DocStream for SampleStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if let Some(mut input) = self.input.take() {
            let mut rng = rand::rng();
            let k = usize::try_from(self.size).unwrap_or(usize::MAX);
            let mut seen = 0u64;
            let mut bytes = 0usize;
            while let Some(d) = input.next(cx)? {
                seen += 1;
                if seen.is_multiple_of(1024) {
                    cx.host.check_interrupt()?;
                }
                if self.out.len() < k {
                    bytes += d.as_bytes().len();
                    self.out.push(d);
                } else {
                    let j = rng.random_range(0..seen);
                    if let Some(slot) = usize::try_from(j).ok().and_then(|j| self.out.get_mut(j)) {
                        bytes = bytes + d.as_bytes().len() - slot.as_bytes().len();
                        *slot = d;
                    }
                }
                if bytes > self.opts.memory_limit && !self.opts.allow_disk_use {
                    return Err(loc(
                        292,
                        format!(
                            "Sort exceeded memory limit of {} bytes, but did not opt in to \
                             external sorting.",
                            self.opts.memory_limit
                        ),
                    ));
                }
            }
            // Random order, then hand out from the back.
            self.out.shuffle(&mut rng);
        }
        Ok(self.out.pop())
    }
}
