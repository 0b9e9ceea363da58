//! The hash join behind the equality form of `$lookup`: the foreign collection read once,
//! from one snapshot, into a table keyed by the index key encoding of its values
//! ([`cairn_storage::keys`]: equal bytes ⇔ equal under MongoDB's comparison, so `1`, `1.0`
//! and `NumberLong(1)` share a key), then probed once per input document.
//!
//! Map:
//! - [`order_of`] decides from the foreign collection's indexes whether a table can give the
//!   `as` array in exactly the order the planned per-document query gives it
//!   ([`Order::Natural`]: no index could answer the equality, so the query is a collection
//!   scan and its matches come in `_id` order; [`Order::Index`]: one plain single-field index
//!   on the foreign field, scanned in key order, `_id` order within a key), or not
//!   ([`Order::Planned`]: the per-document query stays).
//! - [`Table::build`] reads the collection in `_id` (natural) order; each document goes into
//!   the bucket of every value its foreign path reaches (array elements and the arrays
//!   themselves, as an equality predicate sees them: [`crate::path::visit`] with
//!   [`LeafArrays::Traverse`]; a one-field path to a non-array value is read with
//!   [`crate::expr::field::field`], which reaches the same single value) and into the null bucket when the path reaches a missing,
//!   null or undefined value (what `{$eq: null}` matches). It gives up, leaving the table
//!   unbuilt, past a document count or the stage memory limit.
//! - [`Table::positions`] answers one input document's values with the matching documents
//!   ([`Hits`], read with [`Table::doc`]), or says it cannot (`None`) when the
//!   per-document query would behave differently from a
//!   table lookup: an undefined value (an error there), `$`-prefixed documents among several
//!   values (an error in `$in`), and under [`Order::Index`] null, missing, array and regex
//!   values (whose index bounds span several keys, so their order is the planner's).
//!
//! Invariant: for every input document a probe answers, the documents and their order are
//! exactly those of the planned query `{foreignField: {$eq: v}}` / `{$in: [...]}` over the
//! snapshot the table was read from.

use std::collections::HashMap;
use std::ops::{Bound, ControlFlow};

use bson::{RawBson, RawBsonRef, RawDocumentBuf};
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::index::IndexState;
use cairn_storage::keys::{encode_to_vec, encode_value};
use cairn_storage::store::ScanLimits;

use crate::agg::ExecCx;
use crate::error::Result;
use crate::path::{FieldPath, LeafArrays, visit};

/// The order the planned per-document query returns its matches in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Order {
    /// A collection scan: `_id` order.
    Natural,
    /// One single-field index on the foreign field, ascending or (`true`) descending.
    Index(bool),
    /// Something a table cannot reproduce: keep the planned query.
    Planned,
}

/// How the planner could read `foreign` in `meta`, as far as the order of an equality
/// query's results goes.
pub(super) fn order_of(meta: &CollectionMeta, foreign: &str) -> Order {
    if meta.natural.is_some() || foreign == "_id" || foreign.starts_with("_id.") {
        // Capped collections scan in insertion order; `_id` equality is a point read.
        return Order::Planned;
    }
    let related = |field: &str| {
        field == foreign
            || field.contains("$**")
            || field
                .strip_prefix(foreign)
                .is_some_and(|r| r.starts_with('.'))
            || foreign
                .strip_prefix(field)
                .is_some_and(|r| r.starts_with('.'))
    };
    let mut found = None;
    for idx in meta.secondary_indexes() {
        let fields = idx.fields();
        if !fields.iter().any(|(f, _)| related(f)) {
            continue;
        }
        if found.is_some() {
            return Order::Planned;
        }
        found = Some(idx);
    }
    let Some(idx) = found else {
        return Order::Natural;
    };
    let plain_direction = idx.key_pattern().and_then(|p| {
        let mut it = p.iter();
        let (k, v) = it.next()?.ok()?;
        if it.next().is_some() || k.as_str() != foreign {
            return None;
        }
        match v {
            RawBsonRef::Int32(i) if i != 0 => Some(i < 0),
            RawBsonRef::Int64(i) if i != 0 => Some(i < 0),
            RawBsonRef::Double(d) if d != 0.0 && !d.is_nan() => Some(d < 0.0),
            _ => None,
        }
    });
    match plain_direction {
        Some(desc)
            if idx.state == IndexState::Ready
                && !idx.is_hidden()
                && !idx.is_sparse()
                && idx.partial_filter().is_none()
                && idx.spec.get("collation").ok().flatten().is_none() =>
        {
            Order::Index(desc)
        }
        _ => Order::Planned,
    }
}

/// Why a table was not built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NotBuilt {
    /// More documents than allowed this time (a later, larger attempt may fit).
    TooMany,
    /// Over the memory limit, or a value with no key: never.
    Never,
}

/// Positions (into [`Table::docs`]) of the documents in one bucket, ascending.
type Bucket = Vec<u32>;

/// The foreign collection, read once, by foreign-field key.
pub(super) struct Table {
    docs: Vec<RawDocumentBuf>,
    /// Key → its bucket in `lists` (foldhash: keys are hashed once per input document).
    buckets: HashMap<Vec<u8>, u32, foldhash::fast::RandomState>,
    lists: Vec<Bucket>,
    nulls: Bucket,
    order: Order,
    /// Bytes held (documents, keys and an estimate of the bookkeeping).
    bytes: usize,
}

/// The result of probing a table with one input document's values (tests).
#[cfg(test)]
pub(super) enum Probe<'t> {
    /// The matching documents, in order.
    Docs(Vec<&'t RawDocumentBuf>),
    /// The planned per-document query must answer this one.
    Planned,
}

/// Documents read per storage call while building.
const BUILD_BATCH: usize = 1024;

/// Bytes a table entry costs beyond its document and key bytes (map slot, vectors).
const ENTRY_OVERHEAD: usize = 64;

impl Table {
    /// Reads `meta` (a plain collection) through `cx`'s snapshot. `Err(NotBuilt)` inside
    /// `Ok` when it has more than `max_docs` documents or needs more than `memory_limit`
    /// bytes.
    pub(super) fn build(
        meta: &CollectionMeta,
        foreign: &FieldPath,
        order: Order,
        max_docs: usize,
        memory_limit: usize,
        cx: &ExecCx<'_>,
    ) -> Result<std::result::Result<Table, NotBuilt>> {
        let mut t = Table::new(order);
        let mut resume: Option<Vec<u8>> = None;
        loop {
            cx.host.check_interrupt()?;
            let batch = cx.source.scan_range(
                meta,
                (Bound::Unbounded, Bound::Unbounded),
                resume.as_deref(),
                false,
                ScanLimits {
                    max_docs: BUILD_BATCH,
                    max_bytes: usize::MAX,
                    max_examined: usize::MAX,
                    first_may_exceed: true,
                },
                &mut |_| true,
            )?;
            for doc in batch.docs {
                if let Err(e) = t.add(doc, foreign, max_docs, memory_limit) {
                    return Ok(Err(e));
                }
            }
            match batch.resume {
                Some(r) => resume = Some(r),
                None => return Ok(Ok(t)),
            }
        }
    }

    /// An empty table.
    fn new(order: Order) -> Table {
        Table {
            docs: Vec::new(),
            buckets: HashMap::default(),
            lists: Vec::new(),
            nulls: Vec::new(),
            order,
            bytes: 0,
        }
    }

    /// Adds the next document in natural order.
    fn add(
        &mut self,
        doc: RawDocumentBuf,
        foreign: &FieldPath,
        max_docs: usize,
        memory_limit: usize,
    ) -> std::result::Result<(), NotBuilt> {
        if self.docs.len() >= max_docs {
            return Err(NotBuilt::TooMany);
        }
        let pos = u32::try_from(self.docs.len()).map_err(|_| NotBuilt::Never)?;
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut null = false;
        let mut bad = false;
        // A one-field path to a value that is not an array reaches that value alone (or
        // nothing): read it with the light walk instead of the general one.
        let top = match foreign.parts() {
            [name] => match crate::expr::field::field(&doc, name) {
                Some(RawBsonRef::Array(_)) => None,
                v => Some(v),
            },
            _ => None,
        };
        let mut each = |pv: crate::path::PathValue<'_>| {
            match pv.value {
                None | Some(RawBsonRef::Null | RawBsonRef::Undefined) => null = true,
                Some(v) => match encode_to_vec(v, false) {
                    Ok(k) => keys.push(k),
                    Err(_) => {
                        bad = true;
                        return ControlFlow::Break(());
                    }
                },
            }
            ControlFlow::Continue(())
        };
        match top {
            Some(value) => {
                let _ = each(crate::path::PathValue {
                    value,
                    array_index: None,
                });
            }
            None => {
                visit(&doc, foreign, LeafArrays::Traverse, each);
            }
        }
        if bad {
            return Err(NotBuilt::Never);
        }
        keys.sort_unstable();
        keys.dedup();
        self.bytes = self
            .bytes
            .saturating_add(doc.as_bytes().len())
            .saturating_add(ENTRY_OVERHEAD);
        if null {
            self.nulls.push(pos);
        }
        let lists = &mut self.lists;
        for k in keys {
            self.bytes = self.bytes.saturating_add(k.len() + ENTRY_OVERHEAD);
            let id = *self.buckets.entry(k).or_insert_with(|| {
                lists.push(Bucket::new());
                u32::try_from(lists.len() - 1).unwrap_or(u32::MAX)
            });
            if let Some(b) = lists.get_mut(id as usize) {
                b.push(pos);
            }
        }
        if self.bytes > memory_limit {
            return Err(NotBuilt::Never);
        }
        self.docs.push(doc);
        Ok(())
    }

    /// The documents [`Table::positions`] gives for `values`.
    #[cfg(test)]
    pub(super) fn probe(&self, values: &[RawBson]) -> Probe<'_> {
        match self.positions(values, &mut Vec::new()) {
            Some(h) => Probe::Docs((0..).map_while(|i| self.doc(&h, i)).collect()),
            None => Probe::Planned,
        }
    }

    /// The `i`-th document of `hits` (from [`Table::positions`]).
    pub(super) fn doc(&self, hits: &Hits, i: usize) -> Option<&RawDocumentBuf> {
        let p = match hits {
            Hits::Bucket(id) => self.lists.get(*id as usize)?.get(i)?,
            Hits::Nulls => self.nulls.get(i)?,
            Hits::List(l) => l.get(i)?,
        };
        self.docs.get(*p as usize)
    }

    /// The documents matching `values` (the input document's values at `localField`, arrays
    /// flattened; empty means null), in order; `None` when the planned query must answer
    /// (see the module docs). `kbuf` is scratch space for a key. One value (the common
    /// case) is answered by its stored bucket, without building a list.
    pub(super) fn positions(&self, values: &[RawBson], kbuf: &mut Vec<u8>) -> Option<Hits> {
        let index_order = match self.order {
            Order::Natural => None,
            Order::Index(desc) => Some(desc),
            Order::Planned => return None,
        };
        let null_value = RawBson::Null;
        let values: &[RawBson] = if values.is_empty() {
            std::slice::from_ref(&null_value)
        } else {
            values
        };
        if let [v] = values {
            return match v {
                RawBson::Undefined => None,
                RawBson::Null | RawBson::Array(_) | RawBson::RegularExpression(_)
                    if index_order.is_some() =>
                {
                    None
                }
                RawBson::Null => Some(Hits::Nulls),
                other => {
                    kbuf.clear();
                    encode_value(kbuf, other.as_raw_bson_ref(), false).ok()?;
                    Some(match self.buckets.get(kbuf.as_slice()) {
                        Some(id) => Hits::Bucket(*id),
                        None => Hits::List(Vec::new()),
                    })
                }
            };
        }
        let mut null = false;
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(values.len());
        for v in values {
            match v {
                RawBson::Undefined => return None,
                RawBson::Document(d)
                    if values.len() > 1
                        && d.iter()
                            .next()
                            .and_then(|e| e.ok())
                            .is_some_and(|(k, _)| k.as_str().starts_with('$')) =>
                {
                    return None;
                }
                RawBson::Null | RawBson::Array(_) | RawBson::RegularExpression(_)
                    if index_order.is_some() =>
                {
                    return None;
                }
                RawBson::Null => null = true,
                other => match encode_to_vec(other.as_raw_bson_ref(), false) {
                    Ok(k) => keys.push(k),
                    Err(_) => return None,
                },
            }
        }
        keys.sort_unstable();
        keys.dedup();
        let empty = Bucket::new();
        let bucket = |k: &Vec<u8>| {
            self.buckets
                .get(k)
                .and_then(|id| self.lists.get(*id as usize))
                .unwrap_or(&empty)
        };
        let positions: Vec<u32> = match (index_order, keys.as_slice(), null) {
            (_, [], true) => self.nulls.clone(),
            (_, [k], false) => bucket(k).clone(),
            (None, _, _) => {
                // A collection scan: every match once, in `_id` order.
                let mut all: Vec<u32> = keys
                    .iter()
                    .flat_map(|k| bucket(k).iter().copied())
                    .collect();
                if null {
                    all.extend_from_slice(&self.nulls);
                }
                all.sort_unstable();
                all.dedup();
                all
            }
            (Some(desc), _, _) => {
                // An index scan over the keys in index order; a document reached again
                // under a later key is skipped.
                if desc {
                    keys.reverse();
                }
                let mut seen = std::collections::HashSet::new();
                let mut out = Vec::new();
                for k in &keys {
                    for &p in bucket(k) {
                        if seen.insert(p) {
                            out.push(p);
                        }
                    }
                }
                out
            }
        };
        Some(Hits::List(positions))
    }
}

/// The documents one probe matched (see [`Table::doc`]).
pub(super) enum Hits {
    /// A stored bucket (by its position in [`Table`]'s lists).
    Bucket(u32),
    /// The null bucket.
    Nulls,
    /// Positions gathered for this probe.
    List(Vec<u32>),
}

#[cfg(test)]
mod tests {
    use bson::{Bson, RawDocumentBuf, doc};

    use super::super::{equality_filter, values_along};
    use super::*;
    use crate::filter::Filter;

    fn re(pattern: &str, options: &str) -> bson::Regex {
        bson::Regex {
            pattern: pattern.to_string().try_into().unwrap(),
            options: options.to_string().try_into().unwrap(),
        }
    }

    /// Foreign documents (in `_id` order) with every kind of value at `k` and `k.a`.
    fn foreign() -> Vec<RawDocumentBuf> {
        let values: Vec<Option<Bson>> = vec![
            Some(Bson::Int32(1)),
            Some(Bson::Int64(1)),
            Some(Bson::Double(1.0)),
            Some(Bson::Double(-0.0)),
            Some(Bson::Int32(0)),
            Some(Bson::Double(f64::NAN)),
            Some(Bson::Decimal128("1.00".parse().unwrap())),
            Some(Bson::String("x".into())),
            Some(Bson::Symbol("x".into())),
            Some(Bson::Null),
            Some(Bson::Undefined),
            None,
            Some(Bson::Array(vec![])),
            Some(Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)])),
            Some(Bson::Array(vec![Bson::Int32(2), Bson::Int32(2)])),
            Some(Bson::Array(vec![Bson::Array(vec![
                Bson::Int32(1),
                Bson::Int32(2),
            ])])),
            Some(Bson::Array(vec![Bson::Null, Bson::String("x".into())])),
            Some(Bson::Document(doc! {"a": 1})),
            Some(Bson::Document(doc! {"a": [1, 3]})),
            Some(Bson::Document(doc! {"b": 1})),
            Some(Bson::Array(vec![
                Bson::Document(doc! {"a": 2}),
                Bson::Document(doc! {"b": 2}),
                Bson::Int32(5),
            ])),
            Some(Bson::RegularExpression(re("^x", "i"))),
            Some(Bson::Boolean(true)),
            Some(Bson::MinKey),
            Some(Bson::MaxKey),
        ];
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let mut d = doc! {"_id": i as i32};
                if let Some(v) = v {
                    d.insert("k", v);
                }
                RawDocumentBuf::try_from(&d).unwrap()
            })
            .collect()
    }

    /// Local values: every foreign value, and arrays of several.
    fn locals() -> Vec<RawDocumentBuf> {
        let mut out: Vec<RawDocumentBuf> = foreign()
            .into_iter()
            .map(|d| {
                let mut l = RawDocumentBuf::new();
                if let Some(v) = d.get("k").unwrap() {
                    l.append(bson::raw::cstr!("v"), RawBson::from(v));
                }
                l
            })
            .collect();
        for extra in [
            doc! {"v": [1, "x"]},
            doc! {"v": [2, null]},
            doc! {"v": [[1, 2], 5]},
            doc! {"v": [{"a": 1}, {"a": 2}]},
            doc! {"v": {"a": [1, 2]}},
            doc! {"v": [re("^x", "i"), 1]},
            doc! {"v": [3, 4]},
            doc! {"v": [[]]},
        ] {
            out.push(RawDocumentBuf::try_from(&extra).unwrap());
        }
        out
    }

    /// The table answers exactly what the equality filter of the planned query matches, in
    /// `_id` order, for every local value the table answers (and it answers all but
    /// undefined under natural order).
    #[test]
    fn natural_order_table_matches_the_filter() {
        for (foreign_path, local_path) in [("k", "v"), ("k.a", "v"), ("k", "v.a")] {
            let fp = FieldPath::new(foreign_path);
            let mut t = Table::new(Order::Natural);
            for d in foreign() {
                t.add(d, &fp, usize::MAX, usize::MAX).unwrap();
            }
            let local: Vec<String> = local_path.split('.').map(str::to_string).collect();
            let mut answered = 0;
            for l in locals() {
                let mut vals = Vec::new();
                values_along(&l, &local, &mut vals);
                let probe = t.probe(&vals);
                let Probe::Docs(got) = probe else {
                    assert!(
                        vals.iter().any(|v| matches!(v, RawBson::Undefined)),
                        "{l:?}: only undefined is left to the planned query"
                    );
                    continue;
                };
                answered += 1;
                let f = Filter::parse(&equality_filter(foreign_path, vals).unwrap()).unwrap();
                let want: Vec<&RawDocumentBuf> = t.docs.iter().filter(|d| f.matches(d)).collect();
                assert_eq!(got, want, "{foreign_path} / {local_path}: {l:?}");
            }
            assert!(answered > 30, "{answered}");
        }
    }

    /// Under an index order, several values come key by key (descending for a descending
    /// index), each document once; null, arrays and regexes are left to the planned query.
    #[test]
    fn index_order_goes_key_by_key() {
        let fp = FieldPath::new("k");
        let docs = [
            doc! {"_id": 0, "k": [3, 1]},
            doc! {"_id": 1, "k": 1},
            doc! {"_id": 2, "k": 2},
            doc! {"_id": 3, "k": [2, 3]},
            doc! {"_id": 4},
        ];
        for (desc, want) in [(false, vec![0, 1, 3]), (true, vec![0, 3, 1])] {
            let mut t = Table::new(Order::Index(desc));
            for d in &docs {
                t.add(RawDocumentBuf::try_from(d).unwrap(), &fp, 10, usize::MAX)
                    .unwrap();
            }
            let Probe::Docs(got) = t.probe(&[RawBson::Int32(3), RawBson::Double(1.0)]) else {
                panic!("answered");
            };
            let ids: Vec<i32> = got.iter().map(|d| d.get_i32("_id").unwrap()).collect();
            assert_eq!(ids, want, "descending: {desc}");
            for v in [
                RawBson::Null,
                RawBson::Array(bson::RawArrayBuf::new()),
                RawBson::RegularExpression(re("a", "")),
            ] {
                assert!(matches!(t.probe(&[v]), Probe::Planned));
            }
            assert!(matches!(t.probe(&[]), Probe::Planned), "missing is null");
        }
    }

    /// Limits: more documents than allowed may be retried; over the memory limit never.
    #[test]
    fn limits() {
        let fp = FieldPath::new("k");
        let mut t = Table::new(Order::Natural);
        let d = || RawDocumentBuf::try_from(&doc! {"k": 1}).unwrap();
        t.add(d(), &fp, 1, usize::MAX).unwrap();
        assert_eq!(t.add(d(), &fp, 1, usize::MAX), Err(NotBuilt::TooMany));
        let mut t = Table::new(Order::Natural);
        assert_eq!(t.add(d(), &fp, 10, 20), Err(NotBuilt::Never));
    }
}
