//! `$group`: one output document per distinct `_id` value, `{_id, <field>: <accumulator>…}`.
//!
//! `_id` is any expression (missing groups as null); group keys compare as MongoDB compares
//! values (`1`, `1.0` and `NumberLong(1)` are one group, whose `_id` is the first seen). The
//! accumulators are [`crate::agg::accumulators`]; a missing result is output as null.
//! Output order: first-seen group order, or key order after spilling.
//!
//! Reading a document: the `_id` and accumulator operands that are field paths (`$g`,
//! `$c.region`) are read together, one walk per document level ([`Paths`]: the top-level
//! fields once, a sub-document only when a path enters it), each value as the evaluator
//! gives it and borrowed from the document (documents of a [`DocStream::stored`] input, the
//! `$cursor` stage's, without checking their strings again); an accumulator input that is
//! the same for every document (`$sum: 1`, `$count`) is fed as it is
//! ([`AccumulatorSpec::constant_input`]); other operands are evaluated.
//! A group is found by its `_id`'s encoded key ([`value_key_into`]); a string `_id` seen
//! before is found by its bytes, without encoding it.
//!
//! Memory: keys plus accumulator states are counted against [`Options::memory_limit`];
//! beyond it the stage fails with 292 unless `allowDiskUse`, in which case the groups are
//! sorted by key and spilled as partial states to a temporary file, and the runs are merged
//! at the end (partial states merge through [`Accumulator::process`] with `merging`).
//!
//! Errors: 15947 not an object, 15948 `_id` twice, 15955 no `_id`, and the accumulator
//! statement errors (40234 …, 15952).

use std::any::Any;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::agg::accumulators::{Accumulator, AccumulatorSpec, bson_size, value_key_into};
use crate::agg::doc::key;
use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};
use crate::expr::field::Paths;
use crate::expr::{ExprExtensions, Expression, Value};
use cairn_storage::StorageError;
use cairn_storage::engine::EngineError;

/// A parsed `$group`.
#[derive(Debug)]
pub struct Group {
    /// The `_id` expression.
    pub id: Expression,
    id_raw: RawBson,
    /// The accumulated fields.
    pub accumulators: Vec<AccumulatorSpec>,
    ext: ExprExtensions,
    reads: Reads,
}

/// Most distinct field paths read in one walk per document (more: every operand is
/// evaluated).
const READ_AT_ONCE: usize = 8;

/// How one operand (`_id`, an accumulator's input) gets its value per document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Operand {
    /// The value of [`Reads::paths`]' slot.
    Path(usize),
    /// The same for every document: [`AccumulatorSpec::constant_input`].
    Constant,
    /// Evaluated.
    #[default]
    Eval,
}

/// Where `$group`'s operands take their values from (see the module docs).
#[derive(Debug, Default)]
struct Reads {
    /// The field-path operands' paths, read in one walk per document.
    paths: Paths,
    /// `_id`'s read (never [`Operand::Constant`]: a constant `_id` is evaluated).
    id: Operand,
    /// Each accumulator's.
    accs: Vec<Operand>,
}

impl Reads {
    fn new(id: &Expression, accs: &[AccumulatorSpec]) -> Reads {
        let mut paths: Vec<&[String]> = Vec::new();
        let id_path = id.root_path();
        paths.extend(id_path);
        paths.extend(accs.iter().filter_map(AccumulatorSpec::input_path));
        let (tree, slots) = match Paths::new(&paths) {
            Some((t, s)) if t.slots() <= READ_AT_ONCE => (t, s),
            _ => (Paths::default(), Vec::new()),
        };
        let mut slots = slots.into_iter();
        let mut next = |has_path: bool| match has_path {
            true => slots.next().map_or(Operand::Eval, Operand::Path),
            false => Operand::Eval,
        };
        let id = next(id_path.is_some());
        let accs = accs
            .iter()
            .map(|a| match (a.input_path(), a.constant_input()) {
                (Some(_), _) => next(true),
                (None, Some(_)) => Operand::Constant,
                (None, None) => Operand::Eval,
            })
            .collect();
        Reads {
            paths: tree,
            id,
            accs,
        }
    }
}

impl Group {
    /// A `$group` from its parts (used by stages that desugar to `$group`).
    pub(crate) fn new(
        id_raw: RawBsonRef<'_>,
        accumulators: Vec<AccumulatorSpec>,
        ext: &ExprExtensions,
    ) -> Result<Group> {
        let id = ext.parse_expression(id_raw)?;
        let reads = Reads::new(&id, &accumulators);
        Ok(Group {
            id,
            id_raw: RawBson::from(id_raw),
            accumulators,
            ext: ext.clone(),
            reads,
        })
    }
}

/// Parses `{$group: {_id: …, field: {$acc: …}, …}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            15947,
            "a group's fields must be specified in an object",
        ));
    };
    Ok(vec![Arc::new(parse_group(d, &cx.ext)?)])
}

/// Parses a `$group` specification.
pub(crate) fn parse_group(d: &RawDocument, ext: &ExprExtensions) -> Result<Group> {
    let mut id = None;
    let mut accs = Vec::new();
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        if k.as_str() == "_id" {
            if id.is_some() {
                return Err(loc(15948, "a group's _id may only be specified once"));
            }
            id = Some(v);
            continue;
        }
        let spec = AccumulatorSpec::parse_statement(k.as_str(), v, ext)?;
        if accs.iter().any(|a: &AccumulatorSpec| a.field == spec.field) {
            return Err(loc(
                16406,
                format!(
                    "duplicate field name specified in object literal: {}",
                    cairn_storage::display::document(d)
                ),
            ));
        }
        accs.push(spec);
    }
    let Some(id) = id else {
        return Err(loc(15955, "a group specification must include an _id"));
    };
    Group::new(id, accs, ext)
}

impl Stage for Group {
    fn name(&self) -> &'static str {
        "$group"
    }

    fn serialize(&self) -> RawBson {
        let mut d = rawdoc! {};
        d.append(bson::raw::cstr!("_id"), self.id_raw.clone());
        for a in &self.accumulators {
            if let Ok(k) = key(&a.field) {
                d.append(k, a.serialize());
            }
        }
        RawBson::Document(d)
    }

    fn deps(&self, deps: &mut Deps) -> DepsState {
        deps.add_expr(&self.id);
        for a in &self.accumulators {
            a.deps(deps);
        }
        DepsState::Exhaustive
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(GroupStream {
            stage: self,
            opts: opts.clone(),
            input: Some(input),
            out: Out::Pending,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One group being accumulated.
struct Entry {
    key: Vec<u8>,
    id: RawBson,
    accs: Vec<Box<dyn Accumulator>>,
}

enum Out {
    Pending,
    Memory(std::vec::IntoIter<Entry>),
    Merge(Merger),
}

struct GroupStream {
    stage: Arc<Group>,
    opts: Arc<Options>,
    input: Option<Box<dyn DocStream>>,
    out: Out,
}

const ENTRY_OVERHEAD: usize = 96;
/// What an entry of [`Table::strings`] costs besides the string's bytes.
const STRING_ENTRY_OVERHEAD: usize = 32;

/// The in-memory groups and the spilled runs.
#[derive(Default)]
struct Table {
    /// Group key → its position in `groups` (foldhash: a key is hashed once per document).
    index: HashMap<Vec<u8>, usize, foldhash::fast::RandomState>,
    /// The groups found for string `_id` values, by the string itself: a string's key is a
    /// function of its bytes alone, so a string seen before finds its group here without
    /// encoding its key ([`Table::group_of`]).
    strings: HashMap<Box<str>, usize, foldhash::fast::RandomState>,
    groups: Vec<Entry>,
    mem: usize,
    runs: Vec<File>,
}

fn io_err(what: &str, e: std::io::Error) -> QueryError {
    QueryError::Storage(StorageError::Engine(EngineError::Io(format!(
        "{what}: {e}"
    ))))
}

impl Table {
    /// The position of the group whose `_id` is `v` (missing: null), or the `_id` of the new
    /// group it starts, its key then in `kbuf`. A string found before is looked up by its
    /// bytes in `strings`; any other value by its encoded key in `index`, which is what
    /// decides: `strings` only remembers what `index` answered for a string.
    fn group_of(
        &mut self,
        kbuf: &mut Vec<u8>,
        v: Option<RawBsonRef<'_>>,
    ) -> std::result::Result<usize, RawBson> {
        let v = v.unwrap_or(RawBsonRef::Null);
        if let RawBsonRef::String(s) = v
            && let Some(i) = self.strings.get(s)
        {
            return Ok(*i);
        }
        value_key_into(kbuf, v);
        match self.index.get(kbuf.as_slice()) {
            Some(&i) => {
                self.remember_string(v, i);
                Ok(i)
            }
            None => Err(RawBson::from(v)),
        }
    }

    /// Adds the group whose key is `key`, its `_id` and accumulators, and returns its position.
    fn add(&mut self, key: &[u8], id: RawBson, accs: Vec<Box<dyn Accumulator>>) -> usize {
        self.mem += 2 * key.len() + bson_size(&id) + ENTRY_OVERHEAD;
        self.mem += accs.iter().map(|a| a.memory()).sum::<usize>();
        let gi = self.groups.len();
        self.index.insert(key.to_vec(), gi);
        self.remember_string(id.as_raw_bson_ref(), gi);
        self.groups.push(Entry {
            key: key.to_vec(),
            id,
            accs,
        });
        gi
    }

    /// Remembers that the string `v` (when it is one) belongs to group `i`, counting the copy
    /// of its bytes.
    fn remember_string(&mut self, v: RawBsonRef<'_>, i: usize) {
        if let RawBsonRef::String(s) = v {
            self.mem += s.len() + STRING_ENTRY_OVERHEAD;
            self.strings.insert(s.into(), i);
        }
    }

    fn spill(&mut self, opts: &Options) -> Result<()> {
        let mut groups = std::mem::take(&mut self.groups);
        self.index.clear();
        self.strings.clear();
        self.mem = 0;
        groups.sort_by(|a, b| a.key.cmp(&b.key));
        let dir = opts.spill_dir.clone().unwrap_or_else(std::env::temp_dir);
        let file = tempfile::tempfile_in(&dir)
            .map_err(|e| io_err("could not create a $group spill file", e))?;
        let mut w = BufWriter::new(file);
        for g in groups {
            let mut parts = RawArrayBuf::new();
            for a in &g.accs {
                parts.push(a.partial()?);
            }
            let mut d = RawDocumentBuf::new();
            d.append(
                bson::raw::cstr!("k"),
                bson::RawBson::Binary(bson::Binary {
                    subtype: bson::spec::BinarySubtype::Generic,
                    bytes: g.key,
                }),
            );
            d.append(bson::raw::cstr!("i"), g.id);
            d.append(bson::raw::cstr!("p"), parts);
            w.write_all(d.as_bytes())
                .map_err(|e| io_err("error writing a $group spill file", e))?;
        }
        let mut file = w
            .into_inner()
            .map_err(|e| io_err("error writing a $group spill file", e.into_error()))?;
        file.seek(SeekFrom::Start(0))
            .map_err(|e| io_err("error rewinding a $group spill file", e))?;
        self.runs.push(file);
        Ok(())
    }
}

impl GroupStream {
    fn consume(&mut self, mut input: Box<dyn DocStream>, cx: &ExecCx<'_>) -> Result<()> {
        let stage = &self.stage;
        let vars = stage.ext.variables();
        let mut t = Table::default();
        let mut n = 0u32;
        let mut kbuf = Vec::new();
        let opts = &self.opts;
        let stored = input.stored();
        input.drain(cx, &mut |doc| {
            n = n.wrapping_add(1);
            if n.is_multiple_of(1024) {
                cx.host.check_interrupt()?;
            }
            let reads = &stage.reads;
            let mut values: [Value<'_>; READ_AT_ONCE] = std::array::from_fn(|_| Value::Missing);
            let values = values.get_mut(..reads.paths.slots()).unwrap_or_default();
            reads.paths.read(doc, values, stored);
            let value = |slot: usize| values.get(slot).and_then(Value::get);
            // The key is encoded into one reused buffer and looked up by slice (a string
            // seen before by its bytes): a document of a known group allocates nothing here.
            let mut group_of = |v: Option<RawBsonRef<'_>>| t.group_of(&mut kbuf, v);
            let found = match reads.id {
                Operand::Path(slot) => group_of(value(slot)),
                _ => stage.id.with_value(doc, vars, &mut group_of)?,
            };
            let gi = match found {
                Ok(i) => i,
                Err(id) => {
                    let mut accs = Vec::with_capacity(stage.accumulators.len());
                    for a in &stage.accumulators {
                        accs.push(a.create(id.as_raw_bson_ref())?);
                    }
                    t.add(&kbuf, id, accs)
                }
            };
            let Some(g) = t.groups.get_mut(gi) else {
                return Ok(());
            };
            for ((spec, acc), read) in stage
                .accumulators
                .iter()
                .zip(g.accs.iter_mut())
                .zip(&reads.accs)
            {
                let grows = !spec.op.fixed_memory();
                let before = if grows { acc.memory() } else { 0 };
                match read {
                    Operand::Path(slot) => acc.process(value(*slot), false)?,
                    Operand::Constant => acc.process(
                        spec.constant_input()
                            .flatten()
                            .map(RawBson::as_raw_bson_ref),
                        false,
                    )?,
                    Operand::Eval => spec.accumulate(doc, acc.as_mut())?,
                }
                if grows {
                    t.mem = (t.mem + acc.memory()).saturating_sub(before);
                }
            }
            if t.mem > opts.memory_limit {
                if !opts.allow_disk_use {
                    return Err(QueryError::Location(
                        292,
                        "Exceeded memory limit for $group, but didn't allow external sort. Pass \
                         allowDiskUse:true to opt in."
                            .into(),
                    ));
                }
                t.spill(opts)?;
            }
            Ok(())
        })?;
        if t.runs.is_empty() {
            self.out = Out::Memory(t.groups.into_iter());
            return Ok(());
        }
        if !t.groups.is_empty() {
            t.spill(&self.opts)?;
        }
        let mut m = Merger {
            readers: t.runs.into_iter().map(BufReader::new).collect(),
            heads: BinaryHeap::new(),
        };
        for i in 0..m.readers.len() {
            m.advance(i)?;
        }
        self.out = Out::Merge(m);
        Ok(())
    }

    fn output(&self, id: RawBson, accs: &[Box<dyn Accumulator>]) -> Result<RawDocumentBuf> {
        let mut d = cairn_storage::doc::document_with_capacity(
            5 + OUTPUT_FIELD
                + bson_size(&id)
                + self
                    .stage
                    .accumulators
                    .iter()
                    .map(|a| a.field.len() + OUTPUT_FIELD)
                    .sum::<usize>(),
        );
        d.append(bson::raw::cstr!("_id"), id);
        for (spec, acc) in self.stage.accumulators.iter().zip(accs) {
            d.append(key(&spec.field)?, acc.value()?.unwrap_or(RawBson::Null));
        }
        Ok(d)
    }
}

/// The room an output field takes besides its name and value: its type, the name's NUL, and
/// the typical numeric value (a sum, an average).
const OUTPUT_FIELD: usize = 12;

/// A spilled record at the head of a run: (key, run, the record).
type Head = (Vec<u8>, usize, Vec<u8>);

/// A merged group: its `_id` and accumulators.
type Merged = (RawBson, Vec<Box<dyn Accumulator>>);

/// A k-way merge of spilled runs (sorted by key), combining equal keys.
struct Merger {
    readers: Vec<BufReader<File>>,
    /// Smallest key first, earlier runs first among equals.
    heads: BinaryHeap<Reverse<Head>>,
}

/// Largest spilled record read back (a corruption guard).
const MAX_RECORD: usize = 256 * 1024 * 1024;

fn read_record(r: &mut impl Read) -> Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(io_err("error reading a $group spill file", e)),
    }
    let n = u32::from_le_bytes(len) as usize;
    if !(5..=MAX_RECORD).contains(&n) {
        return Err(QueryError::Storage(StorageError::Corrupt(
            "bad $group spill record".into(),
        )));
    }
    let mut buf = vec![0u8; n];
    buf[..4].copy_from_slice(&len);
    r.read_exact(&mut buf[4..])
        .map_err(|e| io_err("error reading a $group spill file", e))?;
    Ok(Some(buf))
}

fn corrupt() -> QueryError {
    QueryError::Storage(StorageError::Corrupt("bad $group spill record".into()))
}

impl Merger {
    fn advance(&mut self, run: usize) -> Result<()> {
        let Some(r) = self.readers.get_mut(run) else {
            return Ok(());
        };
        if let Some(rec) = read_record(r)? {
            let d = RawDocument::from_bytes(&rec).map_err(|_| corrupt())?;
            let k = d.get_binary("k").map_err(|_| corrupt())?.bytes.to_vec();
            self.heads.push(Reverse((k, run, rec)));
        }
        Ok(())
    }

    fn next_group(&mut self, stage: &Group) -> Result<Option<Merged>> {
        let Some(Reverse((k, run, rec))) = self.heads.pop() else {
            return Ok(None);
        };
        self.advance(run)?;
        let d = RawDocument::from_bytes(&rec).map_err(|_| corrupt())?;
        let id = RawBson::from(d.get("i").ok().flatten().ok_or_else(corrupt)?);
        let mut accs = Vec::new();
        for a in &stage.accumulators {
            accs.push(a.create(id.as_raw_bson_ref())?);
        }
        let mut merge = |rec: &[u8]| -> Result<()> {
            let d = RawDocument::from_bytes(rec).map_err(|_| corrupt())?;
            let parts = d.get_array("p").map_err(|_| corrupt())?;
            for (acc, p) in accs.iter_mut().zip(parts) {
                acc.process(Some(p.map_err(|_| corrupt())?), true)?;
            }
            Ok(())
        };
        merge(&rec)?;
        while self
            .heads
            .peek()
            .is_some_and(|Reverse((k2, _, _))| *k2 == k)
        {
            if let Some(Reverse((_, run2, rec2))) = self.heads.pop() {
                self.advance(run2)?;
                merge(&rec2)?;
            }
        }
        Ok(Some((id, accs)))
    }
}

impl DocStream for GroupStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if let Some(input) = self.input.take() {
            self.consume(input, cx)?;
        }
        let next = match &mut self.out {
            Out::Pending => None,
            Out::Memory(it) => it.next().map(|e| (e.id, e.accs)),
            Out::Merge(m) => m.next_group(&self.stage)?,
        };
        match next {
            Some((id, accs)) => Ok(Some(self.output(id, &accs)?)),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use bson::{Bson, RawDocumentBuf, doc, rawdoc};

    use super::*;

    /// Documents with the operands' fields missing, duplicated (the first counts), nested,
    /// behind arrays, as arrays, and after keys and values the light walk does not read.
    fn docs() -> Vec<RawDocumentBuf> {
        let bin = Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: vec![1, 2],
        });
        let mut out: Vec<RawDocumentBuf> = [
            doc! {},
            doc! {"a": 1, "c": 2, "d": {"e": 3}},
            doc! {"a": {"b": 1}, "c": "x"},
            doc! {"a": {"b": {"c": 4}}, "d": [{"e": 1}, {"f": 1}, 5, {"e": [2]}]},
            doc! {"a": [{"b": 1}, {"c": 2}, 5, {"b": [2, 3]}], "c": [1, 2]},
            doc! {"a": [[{"b": 1}]], "c": null, "d": {"e": null}},
            doc! {"é": 1, "a": 2.5, "c": 3_i64},
            doc! {"x": bin.clone(), "a": 7, "d": {"e": bin}},
            doc! {"c": {"$numberDecimal": 1}, "a": {"b": [{"c": 1}, {"c": [2]}]}},
            doc! {"a": Bson::RegularExpression(bson::Regex {
                pattern: "p".to_string().try_into().unwrap(),
                options: "i".to_string().try_into().unwrap(),
            }), "c": true},
        ]
        .iter()
        .map(|d| RawDocumentBuf::try_from(d).unwrap())
        .collect();
        let mut dup = rawdoc! {"a": {"b": 1}, "c": 1};
        dup.append(bson::raw::cstr!("a"), 99);
        dup.append(bson::raw::cstr!("c"), 2);
        out.push(dup);
        let mut dup = rawdoc! {"d": 1};
        dup.append(bson::raw::cstr!("d"), rawdoc! {"e": 2});
        out.push(dup);
        out
    }

    /// The one-walk reads give every field-path operand (of `_id` and of each accumulator)
    /// what the expression evaluator gives it: the accumulators fed either way end equal,
    /// and the key read either way is the same value (and read as a stored document too).
    #[test]
    fn one_walk_reads_equal_the_evaluator() {
        let ext = ExprExtensions::default();
        let specs = [
            rawdoc! {"_id": "$a.b", "p": {"$push": "$a"}, "q": {"$push": "$c"},
            "r": {"$push": "$a.b.c"}, "s": {"$push": "$d.e"}, "t": {"$sum": "$c"},
            "u": {"$push": "$missing"}, "v": {"$push": {"$ifNull": ["$c", "none"]}},
            "w": {"$max": "$a.b"}, "n": {"$count": {}}},
            rawdoc! {"_id": "$c", "p": {"$push": "$d"}, "q": {"$first": "$a"},
            "r": {"$avg": "$a"}, "s": {"$addToSet": "$d.e"}},
            rawdoc! {"_id": {"k": "$a"}, "p": {"$push": "$a.b"}},
            rawdoc! {"_id": "$d.e", "p": {"$last": "$c"}},
        ];
        let vars = ext.variables();
        let mut checked = 0;
        for spec in specs {
            let g = parse_group(&spec, &ext).unwrap();
            let reads = &g.reads;
            assert!(reads.paths.slots() > 0);
            for doc in docs() {
                let mut values = vec![Value::Ref(RawBsonRef::MaxKey); reads.paths.slots()];
                reads.paths.read(&doc, &mut values, false);
                // A stored document (every one here is well-formed) reads the same.
                let mut stored = vec![Value::Ref(RawBsonRef::MaxKey); reads.paths.slots()];
                reads.paths.read(&doc, &mut stored, true);
                assert!(bson::Document::try_from(doc.as_ref()).is_ok());
                let as_bson = |v: &[Value<'_>]| -> Vec<Option<RawBson>> {
                    v.iter().map(|v| v.get().map(RawBson::from)).collect()
                };
                assert_eq!(as_bson(&stored), as_bson(&values), "{doc:?}");
                let value = |slot: usize| values[slot].get();
                if let Operand::Path(slot) = reads.id {
                    assert_eq!(
                        value(slot).map(RawBson::from),
                        g.id.evaluate(&doc, vars).unwrap(),
                        "_id of {doc:?}"
                    );
                    checked += 1;
                }
                for (a, read) in g.accumulators.iter().zip(&reads.accs) {
                    let mut want = a.create(RawBsonRef::Null).unwrap();
                    a.accumulate(&doc, want.as_mut()).unwrap();
                    let mut got = a.create(RawBsonRef::Null).unwrap();
                    match read {
                        Operand::Path(slot) => {
                            got.process(value(*slot), false).unwrap();
                            checked += 1;
                        }
                        Operand::Constant => {
                            let c = a.constant_input().unwrap();
                            got.process(c.map(RawBson::as_raw_bson_ref), false).unwrap();
                            checked += 1;
                        }
                        Operand::Eval => a.accumulate(&doc, got.as_mut()).unwrap(),
                    }
                    assert_eq!(
                        got.value().unwrap(),
                        want.value().unwrap(),
                        "{} of {doc:?}",
                        a.field
                    );
                }
            }
        }
        assert!(checked > 100, "{checked}");
    }

    /// Documents passed one by one, said to be stored or not.
    struct Docs(std::collections::VecDeque<RawDocumentBuf>, bool);

    impl DocStream for Docs {
        fn next(&mut self, _: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
            Ok(self.0.pop_front())
        }

        fn stored(&self) -> bool {
            self.1
        }
    }

    /// The stage's output over `docs`, read as stored documents or not.
    fn run(spec: &RawDocument, docs: &[RawDocumentBuf], stored: bool) -> Vec<bson::Document> {
        let ext = ExprExtensions::default();
        let g = Arc::new(parse_group(spec, &ext).unwrap());
        let opts = Arc::new(Options::default());
        let input = Box::new(Docs(docs.iter().cloned().collect(), stored));
        let mut s = g.open(input, &opts).unwrap();
        let cx = ExecCx {
            source: &crate::agg::NoData,
            catalog: &crate::agg::NoData,
            host: &crate::agg::NoHost,
        };
        let mut out = Vec::new();
        while let Some(d) = s.next(&cx).unwrap() {
            out.push(bson::Document::try_from(d.as_ref()).unwrap());
        }
        out
    }

    /// A stored input (read without re-checking strings) groups exactly as any other, with
    /// MongoDB's result types: `$sum` of int32s an int32 (a long once it overflows, a double
    /// with a double or once longs overflow, a decimal with a decimal), `$avg` a double (a
    /// decimal with decimals); groups keyed by a nested path with missing, null, array,
    /// deeper and duplicated parents, after strings, booleans and sub-documents the walk
    /// steps over.
    #[test]
    fn stored_input_groups_as_any_input() {
        let dec = |s: &str| Bson::Decimal128(s.parse().unwrap());
        let docs: Vec<RawDocumentBuf> = [
            doc! {"_id": 1, "s": "x", "b": true, "a": {"c": "Oslo", "z": 1}, "v": 1, "w": 2_i64},
            doc! {"_id": 2, "s": "ü", "a": {"c": "Oslo"}, "v": 2, "w": i64::MAX},
            doc! {"_id": 3, "a": {"c": "Bergen"}, "v": 2, "w": 1},
            doc! {"_id": 4, "a": {"c": "Bergen"}, "v": dec("1.5"), "w": dec("2")},
            doc! {"_id": 5, "a": null, "v": i32::MAX},
            doc! {"_id": 6, "v": i32::MAX},
            doc! {"_id": 7, "a": [{"c": "Oslo"}, {"c": "Tromsø"}], "v": i32::MAX, "w": "no"},
            doc! {"_id": 8, "a": {"b": {"c": 1}}, "s": {"t": "u"}, "v": [1, 2]},
            doc! {"_id": 12, "a": {"c": "Oslo"}, "v": 0.5, "w": null},
            doc! {"_id": 9, "a": {"c": "Tromsø"}, "v": 1_i64},
            doc! {"_id": 10, "a": {"c": "Tromsø"}, "v": 2},
        ]
        .iter()
        .map(|d| RawDocumentBuf::try_from(d).unwrap())
        .collect();
        let mut dup = rawdoc! {"_id": 11, "a": {"c": "Oslo"}, "v": 4};
        dup.append(bson::raw::cstr!("a"), rawdoc! {"c": "Bergen"});
        dup.append(bson::raw::cstr!("v"), 100);
        let mut docs = docs;
        docs.push(dup);
        let spec = rawdoc! {"_id": "$a.c", "n": {"$sum": 1}, "sum": {"$sum": "$v"},
        "avg": {"$avg": "$v"}, "w": {"$sum": "$w"}, "s": {"$first": "$s"}};
        let got = run(&spec, &docs, true);
        assert_eq!(got, run(&spec, &docs, false));
        let want = vec![
            doc! {"_id": "Oslo", "n": 4, "sum": 7.5, "avg": 7.5 / 4.0,
            "w": 2.0 + i64::MAX as f64, "s": "x"},
            doc! {"_id": "Bergen", "n": 2, "sum": dec("3.5"), "avg": dec("1.75"), "w": dec("3"),
            "s": Bson::Null},
            doc! {"_id": Bson::Null, "n": 3, "sum": 2 * i64::from(i32::MAX),
            "avg": f64::from(i32::MAX), "w": 0, "s": Bson::Null},
            doc! {"_id": ["Oslo", "Tromsø"], "n": 1, "sum": i32::MAX, "avg": f64::from(i32::MAX),
            "w": 0, "s": Bson::Null},
            doc! {"_id": "Tromsø", "n": 2, "sum": 3_i64, "avg": 1.5, "w": 0, "s": Bson::Null},
        ];
        assert_eq!(got, want);
    }

    /// Finding groups by a string's bytes agrees with finding them by encoded keys alone:
    /// strings, symbols of the same text (one group with them), other types, empty and
    /// NUL-free near-misses, before and after a spill clears the table.
    #[test]
    fn string_lookup_equals_key_lookup() {
        let values: Vec<RawBson> = vec![
            RawBson::String("Oslo".into()),
            RawBson::Symbol("Bergen".into()),
            RawBson::String("Bergen".into()),
            RawBson::String("Oslo".into()),
            RawBson::String("".into()),
            RawBson::Int32(1),
            RawBson::Double(1.0),
            RawBson::String("1".into()),
            RawBson::Null,
            RawBson::String("Oslo ".into()),
            RawBson::String("oslo".into()),
            RawBson::Symbol("oslo".into()),
            RawBson::String("Bergen".into()),
            RawBson::String("ü日本".into()),
            RawBson::Symbol("ü日本".into()),
        ];
        let mut t = Table::default();
        let mut kbuf = Vec::new();
        for round in 0..3 {
            // The general rule: equal encoded keys, one group, the first seen.
            let mut want: HashMap<Vec<u8>, usize> = HashMap::new();
            for v in values.iter().chain(values.iter().rev()) {
                let mut key = Vec::new();
                value_key_into(&mut key, v.as_raw_bson_ref());
                let got = match t.group_of(&mut kbuf, Some(v.as_raw_bson_ref())) {
                    Ok(i) => i,
                    Err(id) => {
                        assert_eq!(kbuf, key, "{v:?}");
                        assert!(!want.contains_key(&key), "{v:?} round {round}");
                        t.add(&kbuf, id, Vec::new())
                    }
                };
                // The group found is the one whose first `_id` has this value's key.
                let mut id_key = Vec::new();
                value_key_into(&mut id_key, t.groups[got].id.as_raw_bson_ref());
                assert_eq!(id_key, key, "{v:?}");
                let expect = *want.entry(key).or_insert(got);
                assert_eq!(got, expect, "{v:?} round {round}");
            }
            assert_eq!(t.groups.len(), want.len());
            assert!(!t.strings.is_empty());
            // What a spill leaves: an empty table.
            t.groups.clear();
            t.index.clear();
            t.strings.clear();
        }
    }

    /// Operands that are not field paths of the document are evaluated, not read.
    #[test]
    fn only_field_paths_are_read() {
        let ext = ExprExtensions::default();
        let g = parse_group(
            &rawdoc! {"_id": {"$toUpper": "$a"}, "n": {"$count": {}}, "s": {"$sum": 1},
            "r": {"$push": "$$ROOT"}, "t": {"$top": {"sortBy": {"a": 1}, "output": "$a"}},
            "m": {"$max": "$b"}},
            &ext,
        )
        .unwrap();
        assert_eq!(g.reads.id, Operand::Eval);
        assert_eq!(
            g.reads.accs,
            [
                Operand::Constant,
                Operand::Constant,
                Operand::Eval,
                Operand::Eval,
                Operand::Path(0)
            ]
        );
        assert_eq!(g.reads.paths.slots(), 1);
    }
}
