//! The n-value accumulators (accumulator_multi.cpp): `$firstN`, `$lastN`, `$maxN`, `$minN`,
//! `$topN`, `$bottomN`, `$top`, `$bottom`.
//!
//! - `$firstN`/`$lastN` keep the first/last `n` inputs, missing ones as null;
//! - `$maxN`/`$minN` keep the `n` largest/smallest non-null inputs, largest/smallest first;
//! - `$topN`/`$bottomN` order inputs by their `sortBy` key (computed from the document, see
//!   [`super::AccumulatorSpec::input`]) and keep the first/last `n` in that order, ties in
//!   arrival order; `$top`/`$bottom` are the same with `n = 1`, returning the value itself.
//!
//! Invariant: memory is bounded by `n` values plus their keys (checked against 100 MiB).

use std::cmp::Ordering;
use std::collections::VecDeque;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf};
use cairn_storage::compare::compare_values;

use super::basic::MAX_ARRAY_BYTES;
use super::{Accumulator, bson_size};
use crate::error::{QueryError, Result};
use crate::sort::{SortKey, SortSpec};

/// Which n-accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NKind {
    /// `$firstN`.
    First,
    /// `$lastN`.
    Last,
    /// `$maxN`.
    Max,
    /// `$minN`.
    Min,
}

impl NKind {
    /// The operator name.
    pub fn name(self) -> &'static str {
        match self {
            NKind::First => "$firstN",
            NKind::Last => "$lastN",
            NKind::Max => "$maxN",
            NKind::Min => "$minN",
        }
    }
}

fn too_big(name: &str) -> QueryError {
    QueryError::Location(
        146,
        format!(
            "{name} used too much memory and cannot spill to disk. Memory limit: {MAX_ARRAY_BYTES} bytes"
        ),
    )
}

fn bad_partial(name: &str) -> QueryError {
    QueryError::BadValue(format!("invalid partial {name} state"))
}

/// `$firstN`, `$lastN`, `$maxN`, `$minN`.
#[derive(Debug, Clone)]
pub struct MultiN {
    kind: NKind,
    n: usize,
    items: VecDeque<RawBson>,
    bytes: usize,
}

impl MultiN {
    /// An accumulator keeping `n` values.
    pub fn new(kind: NKind, n: usize) -> MultiN {
        MultiN {
            kind,
            n,
            items: VecDeque::new(),
            bytes: 0,
        }
    }

    fn add(&mut self, v: Option<RawBsonRef<'_>>) -> Result<()> {
        match self.kind {
            NKind::First => {
                if self.items.len() < self.n {
                    let v = v.map_or(RawBson::Null, RawBson::from);
                    self.bytes += bson_size(&v);
                    self.items.push_back(v);
                }
            }
            NKind::Last => {
                let v = v.map_or(RawBson::Null, RawBson::from);
                self.bytes += bson_size(&v);
                self.items.push_back(v);
                while self.items.len() > self.n {
                    if let Some(old) = self.items.pop_front() {
                        self.bytes = self.bytes.saturating_sub(bson_size(&old));
                    }
                }
            }
            NKind::Max | NKind::Min => {
                let Some(v) = v else { return Ok(()) };
                if matches!(v, RawBsonRef::Null | RawBsonRef::Undefined) {
                    return Ok(());
                }
                let want = if self.kind == NKind::Max {
                    Ordering::Greater
                } else {
                    Ordering::Less
                };
                // Keep `items` ordered best first; equal values keep arrival order.
                let pos = self
                    .items
                    .iter()
                    .position(|x| compare_values(v, x.as_raw_bson_ref()) == want)
                    .unwrap_or(self.items.len());
                if pos >= self.n {
                    return Ok(());
                }
                let v = RawBson::from(v);
                self.bytes += bson_size(&v);
                self.items.insert(pos, v);
                while self.items.len() > self.n {
                    if let Some(old) = self.items.pop_back() {
                        self.bytes = self.bytes.saturating_sub(bson_size(&old));
                    }
                }
            }
        }
        if self.bytes > MAX_ARRAY_BYTES {
            return Err(too_big(self.kind.name()));
        }
        Ok(())
    }
}

impl Accumulator for MultiN {
    fn process(&mut self, v: Option<RawBsonRef<'_>>, merging: bool) -> Result<()> {
        if merging {
            let Some(RawBsonRef::Array(a)) = v else {
                return Err(bad_partial(self.kind.name()));
            };
            for e in a {
                self.add(Some(e.map_err(|_| bad_partial(self.kind.name()))?))?;
            }
            return Ok(());
        }
        self.add(v)
    }

    fn value(&self) -> Result<Option<RawBson>> {
        let mut a = RawArrayBuf::new();
        for v in &self.items {
            a.push(v.clone());
        }
        Ok(Some(RawBson::Array(a)))
    }

    fn partial(&self) -> Result<RawBson> {
        Ok(self.value()?.unwrap_or(RawBson::Null))
    }

    fn memory(&self) -> usize {
        64 + self.bytes
    }
}

/// `$topN`, `$bottomN`, `$top`, `$bottom`: inputs are `{k: [sort key values], o: output}`.
#[derive(Debug, Clone)]
pub struct TopBottom {
    name: &'static str,
    spec: SortSpec,
    bottom: bool,
    /// `None` for `$top`/`$bottom` (one value, not an array).
    n: Option<usize>,
    /// Ordered by key (best first for top, worst first for bottom), with arrival numbers.
    items: Vec<(SortKey, u64, RawBson)>,
    seq: u64,
    bytes: usize,
}

impl TopBottom {
    /// A `$topN`/`$bottomN` (`n: Some`) or `$top`/`$bottom` (`n: None`).
    pub fn new(name: &'static str, spec: SortSpec, bottom: bool, n: Option<usize>) -> TopBottom {
        TopBottom {
            name,
            spec,
            bottom,
            n,
            items: Vec::new(),
            seq: 0,
            bytes: 0,
        }
    }

    fn limit(&self) -> usize {
        self.n.unwrap_or(1)
    }

    fn add(&mut self, v: RawBsonRef<'_>) -> Result<()> {
        let RawBsonRef::Document(d) = v else {
            return Err(bad_partial(self.name));
        };
        let key_vals: Vec<RawBson> = match d.get("k") {
            Ok(Some(RawBsonRef::Array(a))) => a.into_iter().flatten().map(RawBson::from).collect(),
            _ => return Err(bad_partial(self.name)),
        };
        let out = match d.get("o") {
            Ok(Some(o)) => RawBson::from(o),
            _ => RawBson::Null,
        };
        let key = SortKey::from_parts(key_vals, &self.spec);
        let seq = self.seq;
        self.seq += 1;
        // Position in the kept order: for top, ascending (key, seq); for bottom the kept ones
        // are the last n in that order, stored ascending as well.
        let pos = self
            .items
            .iter()
            .position(|(k, s, _)| (k.cmp(&key).then(s.cmp(&seq))) == Ordering::Greater)
            .unwrap_or(self.items.len());
        let size = bson_size(&out) + key.approximate_size();
        self.items.insert(pos, (key, seq, out));
        self.bytes += size;
        while self.items.len() > self.limit() {
            let removed = if self.bottom {
                self.items.remove(0)
            } else {
                match self.items.pop() {
                    Some(r) => r,
                    None => break,
                }
            };
            self.bytes = self
                .bytes
                .saturating_sub(bson_size(&removed.2) + removed.0.approximate_size());
        }
        if self.bytes > MAX_ARRAY_BYTES {
            return Err(too_big(self.name));
        }
        Ok(())
    }
}

impl Accumulator for TopBottom {
    fn process(&mut self, v: Option<RawBsonRef<'_>>, merging: bool) -> Result<()> {
        if merging {
            let Some(RawBsonRef::Array(a)) = v else {
                return Err(bad_partial(self.name));
            };
            for e in a {
                self.add(e.map_err(|_| bad_partial(self.name))?)?;
            }
            return Ok(());
        }
        match v {
            Some(v) => self.add(v),
            None => Ok(()),
        }
    }

    fn value(&self) -> Result<Option<RawBson>> {
        match self.n {
            None => Ok(Some(
                self.items
                    .first()
                    .map_or(RawBson::Null, |(_, _, v)| v.clone()),
            )),
            Some(_) => {
                let mut a = RawArrayBuf::new();
                for (_, _, v) in &self.items {
                    a.push(v.clone());
                }
                Ok(Some(RawBson::Array(a)))
            }
        }
    }

    fn partial(&self) -> Result<RawBson> {
        let mut a = RawArrayBuf::new();
        for (k, _, v) in &self.items {
            let mut keys = RawArrayBuf::new();
            for kv in k.values() {
                keys.push(kv.clone());
            }
            let mut d = RawDocumentBuf::new();
            d.append(bson::raw::cstr!("k"), keys);
            d.append(bson::raw::cstr!("o"), v.clone());
            a.push(d);
        }
        Ok(RawBson::Array(a))
    }

    fn memory(&self) -> usize {
        64 + self.bytes
    }
}
