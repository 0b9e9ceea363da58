//! Reading one top-level field of a raw document by walking its bytes
//! ([`cairn_storage::elements`]): each element's key is compared as bytes and its value
//! skipped by its type's length, without building the generic iterator's item for every
//! element before the one wanted.
//!
//! [`Paths`] reads several field paths (`$a.b`, `$c`) in one walk per document level — the
//! names of a level found in one pass (`walk_fields`, which compares a key of up to eight bytes
//! with each name as one word, and steps over the elements of such short keys that are none
//! of the names in a tight loop, `skip`), a sub-document walked only when a path enters it —
//! and gives each path the value the expression evaluator gives it (a `$group` reads its
//! key's and its accumulators' paths this way). A document known to be as storage holds it
//! (well-formed, UTF-8: [`crate::agg::DocStream::stored`]) is walked without checking the
//! strings and booleans it steps over again; the values are the same. [`copy_top_level`]
//! copies the elements of some top-level fields (the `$cursor` stage's projection of
//! top-level dependencies).
//!
//! Invariant: [`field`], and each name of a `walk_fields` pass, is exactly what
//! [`crate::path::field`] returns (the first field of that name, `None` when absent or when
//! malformed BSON ends the search first): anything these walks do not read plainly — a key
//! that is not ASCII (its UTF-8 unchecked), a type byte they do not size, a length that does
//! not fit, a string that is not UTF-8 (unless the document is stored) — is answered by that
//! function instead. Never panics.

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::elements::{CLASS, DOCUMENT, Elements, STRING, Step, VARIABLE, key_word};

use super::value::Value;

/// The first field called `name` in `d` (see the module docs).
pub(crate) fn field<'a>(d: &'a RawDocument, name: &str) -> Option<RawBsonRef<'a>> {
    match walk(d.as_bytes(), name.as_bytes()) {
        Walk::Found(v, kind, _) => found(d, name, kind, v),
        Walk::Absent => None,
        Walk::Unsure => crate::path::field(d, name),
    }
}

/// Most names one `walk_fields` pass reads.
pub(crate) const MAX_FIELDS: usize = 64;

/// [`field`] for each of `names` (distinct; at most [`MAX_FIELDS`]) in one walk over `d`:
/// `out[i]` becomes exactly `field(d, names[i])`. The walk stops once every name is found;
/// from anything it does not read plainly (see [`field`]) on, the names not yet found are
/// answered by [`crate::path::field`], as [`field`] answers them. ([`Paths`] walks each
/// level with its names prepared once; this is the same walk for the tests.)
#[cfg(test)]
pub(crate) fn fields<'a>(
    d: &'a RawDocument,
    names: &[impl AsRef<str>],
    out: &mut [Option<RawBsonRef<'a>>],
    stored: bool,
) {
    if names.len() > MAX_FIELDS {
        for (name, o) in names.iter().zip(out.iter_mut()) {
            *o = field(d, name.as_ref());
        }
        return;
    }
    let words: Vec<u64> = names
        .iter()
        .map(|n| key_word(n.as_ref().as_bytes()))
        .collect();
    walk_fields(d, names, &words, name_lengths(names), out, stored);
}

/// The lengths of `names` (bit `n` for a name of `n` bytes; longer ones share bit 63): a key
/// of no such length is no name, and is not compared with each.
fn name_lengths(names: &[impl AsRef<str>]) -> u64 {
    names
        .iter()
        .fold(0u64, |m, n| m | 1 << n.as_ref().len().min(63))
}

/// `fields` with the names' [`key_word`]s and [`name_lengths`] given (`names.len()` at most
/// [`MAX_FIELDS`]), by the light walk ([`Elements::step_ascii_keyed`]: a non-ASCII key, a type it
/// does not size or a length that does not fit leaves the rest to [`crate::path::field`]). A
/// key of a length some name has is compared as a word first ([`key_word`]), so a short
/// name costs one comparison; the elements between are stepped over by [`skip`].
///
/// `stored`: `d` is known to be well-formed with UTF-8 names and strings — a document as
/// storage holds it (see `cairn_storage::doc`'s trusted reads) — so every value the walk
/// sizes is one the generic walk reads, and [`readable`] (always true then) is not asked.
/// The answer is the same either way for such a document.
fn walk_fields<'a>(
    d: &'a RawDocument,
    names: &[impl AsRef<str>],
    words: &[u64],
    lengths: u64,
    out: &mut [Option<RawBsonRef<'a>>],
    stored: bool,
) {
    let mut left: u64 = match names.len() {
        0 => return,
        n @ 1..MAX_FIELDS => (1u64 << n) - 1,
        _ => u64::MAX,
    };
    let b = d.as_bytes();
    // The offset of the document's last byte: every element lies before it.
    let last = b.len().saturating_sub(1);
    let mut off = 4usize;
    loop {
        let (kind, key, kw, v) = match skip(b, last, &mut off, words, stored) {
            Skipped::Candidate(i, kind, key, kw, v) => {
                // A short key equal to the word of `names[i]` and as long is that name (and
                // no other: the names are distinct).
                if left & (1 << i) != 0
                    && let (Some(name), Some(o)) = (names.get(i), out.get_mut(i))
                    && name.as_ref().len() == key.len()
                {
                    left &= !(1 << i);
                    *o = found(d, name.as_ref(), kind, v);
                    if left == 0 {
                        return;
                    }
                    if !stored && !readable(kind, v) {
                        break;
                    }
                    continue;
                }
                (kind, key, kw, v)
            }
            Skipped::Unreadable => break,
            Skipped::Other => {
                let mut elements = Elements::at(b, off);
                match elements.step_ascii_keyed() {
                    (Step::Element(e), kw) => {
                        off = elements.offset();
                        (e.kind, e.key, kw, e.value)
                    }
                    (Step::End, _) => {
                        for (i, o) in out.iter_mut().enumerate().take(names.len()) {
                            if left & (1 << i) != 0 {
                                *o = None;
                            }
                        }
                        return;
                    }
                    (Step::Unsure, _) => break,
                }
            }
        };
        let kl = key.len();
        if lengths & 1 << kl.min(63) != 0 {
            let mut rest = left;
            while rest != 0 {
                let i = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                let (Some(name), Some(&w)) = (names.get(i), words.get(i)) else {
                    continue;
                };
                let n = name.as_ref().as_bytes();
                let same = w == kw && n.len() == kl && (kl <= 8 || n == key);
                if same && let Some(o) = out.get_mut(i) {
                    left &= !(1 << i);
                    *o = found(d, name.as_ref(), kind, v);
                }
            }
            if left == 0 {
                return;
            }
        }
        if !stored && !readable(kind, v) {
            break;
        }
    }
    for (i, (name, o)) in names.iter().zip(out.iter_mut()).enumerate() {
        if left & (1 << i) != 0 {
            *o = crate::path::field(d, name.as_ref());
        }
    }
}

/// Where [`skip`] stopped.
enum Skipped<'a> {
    /// An element read by [`short_key_step`] whose key word is one of the names' (a
    /// candidate): the first such name's index, and the element's type, key, key word and
    /// value (the offset is past it).
    Candidate(usize, u8, &'a [u8], u64, &'a [u8]),
    /// An element [`short_key_step`] does not read, or the end, at the offset: for
    /// [`Elements::step_ascii_keyed`] to answer.
    Other,
    /// An element the generic walk does not read ([`readable`]).
    Unreadable,
}

/// Steps from `*off` over the elements of `b` ([`short_key_step`]; `last` the offset of its
/// last byte) whose key words are none of `words`, each checked [`readable`] unless `stored`
/// (see [`walk_fields`]), until one whose word is, one the generic walk does not read or one
/// [`short_key_step`] leaves. A key under eight bytes equals a name only if their words are
/// equal ([`key_word`]), so no element stepped over is one of the names.
#[inline(always)]
fn skip<'a>(b: &'a [u8], last: usize, off: &mut usize, words: &[u64], stored: bool) -> Skipped<'a> {
    let mut at = *off;
    loop {
        let Some(e) = short_key_step(b, last, at) else {
            *off = at;
            return Skipped::Other;
        };
        let candidate = words.iter().position(|&w| w == e.word);
        if candidate.is_some() || !stored {
            let (Some(key), Some(v)) = (b.get(at + 1..at + 1 + e.key_len), b.get(e.start..e.end))
            else {
                *off = at;
                return Skipped::Other;
            };
            if let Some(i) = candidate {
                *off = e.end;
                return Skipped::Candidate(i, e.kind, key, e.word, v);
            }
            if !readable(e.kind, v) {
                return Skipped::Unreadable;
            }
        }
        at = e.end;
    }
}

/// An element as [`short_key_step`] reads it, by offsets into the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Short {
    kind: u8,
    /// The key's length (under eight); the key starts after the type byte.
    key_len: usize,
    /// The key's [`key_word`].
    word: u64,
    /// The value's offsets: it is `start..end`, and the next element starts at `end`.
    start: usize,
    end: usize,
}

/// [`Elements::step_ascii_keyed`] at offset `off` of the framed document `b` (`last` its last
/// byte's offset) for the common element — a key of under eight ASCII bytes with eight
/// bytes readable from its start, a type [`CLASS`] sizes, a value that fits — read with one
/// word for the key and no [`Step`] built: exactly what that step gives, by offsets
/// (`short_steps_equal_the_light_walk`). `None` for anything else (an end, a long or
/// non-ASCII key, a value that does not fit), which the caller leaves to that step.
#[inline(always)]
fn short_key_step(b: &[u8], last: usize, off: usize) -> Option<Short> {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    let [kind, w @ ..] = *b.get(off..)?.first_chunk::<9>()?;
    let v = u64::from_le_bytes(w);
    // The first zero byte's flag is the lowest set bit (see `elements::nul_at`).
    let zeros = v.wrapping_sub(ONES) & !v & HIGHS;
    let below = (zeros & zeros.wrapping_neg()).wrapping_sub(1);
    let word = v & below;
    if zeros == 0 || word & HIGHS != 0 {
        return None;
    }
    let key_len = (zeros.trailing_zeros() / 8) as usize;
    // At most `off + 9`: within `b`.
    let start = off + 2 + key_len;
    let class = CLASS[usize::from(kind)];
    let end = if class < VARIABLE {
        start + usize::from(class)
    } else {
        let n = *b.get(start..)?.first_chunk::<4>()?;
        let n = usize::try_from(i32::from_le_bytes(n)).ok()?;
        match class {
            STRING => start.checked_add(4)?.checked_add(n)?,
            DOCUMENT if n >= 5 => {
                let end = start.checked_add(n)?;
                if b.get(end - 1) != Some(&0) {
                    return None;
                }
                end
            }
            _ => return None,
        }
    };
    if end > last {
        return None;
    }
    Some(Short {
        kind,
        key_len,
        word,
        start,
        end,
    })
}

/// The elements of `d` whose keys are among `names`, in document order (duplicates too), as
/// one document: exactly what copying them during the generic walk over `d` builds (a
/// top-level inclusion's copy). Every element is read as the generic walk reads it (see
/// [`field`]); `None` when something is not read plainly (a non-ASCII key, a type or length
/// this walk does not size, a value the generic walk would refuse), and the caller then takes
/// the generic walk, which also reports malformed bytes. The copied elements keep their bytes.
pub(crate) fn copy_top_level(d: &RawDocument, names: &[String]) -> Option<RawDocumentBuf> {
    let bytes = d.as_bytes();
    let mut out = Vec::with_capacity(bytes.len().min(256));
    out.extend_from_slice(&[0; 4]);
    let mut elements = Elements::new(bytes);
    loop {
        let start = elements.offset();
        match elements.step_ascii() {
            Step::Element(e) => {
                if !readable(e.kind, e.value) {
                    return None;
                }
                if names.iter().any(|n| n.as_bytes() == e.key) {
                    out.extend_from_slice(bytes.get(start..elements.offset())?);
                }
            }
            Step::End => break,
            Step::Unsure => return None,
        }
    }
    out.push(0);
    let len = i32::try_from(out.len()).ok()?.to_le_bytes();
    out.get_mut(..4)?.copy_from_slice(&len);
    RawDocumentBuf::from_bytes(out).ok()
}

/// Most names read at one level of a [`Paths`] (one `walk_fields` pass per document).
pub(crate) const PATHS_PER_LEVEL: usize = 8;

/// Several field paths of a document (`$a.b`, `$c`, `$a.d`) read in one walk per document
/// level: the top-level fields the paths start with in one `walk_fields` pass, and for a path that
/// goes on, the sub-document that field holds in one walk for the paths' next fields, and so
/// on. A walk stops once every name of its level is found; only sub-documents a path enters are
/// walked. Each path's value is exactly what the expression evaluator gives for it
/// (`ExpressionFieldPath::evaluatePath`, see [`super::eval`]): a document met before the end of
/// a path is entered by its first field of the next name, an array maps the rest of the path
/// over its elements (the evaluator's own code, [`super::eval::path_from_first`]), anything
/// else is missing.
#[derive(Debug, Clone, Default)]
pub(crate) struct Paths {
    top: Level,
    slots: usize,
}

/// The names read in one document of a [`Paths`] walk, and what each name leads to.
#[derive(Debug, Clone, Default)]
struct Level {
    names: Vec<String>,
    /// Each name's [`key_word`].
    words: Vec<u64>,
    /// The names' [`name_lengths`].
    lengths: u64,
    nodes: Vec<PathNode>,
}

#[derive(Debug, Clone, Default)]
struct PathNode {
    /// The slot of the path that ends here.
    slot: Option<usize>,
    /// The paths that go on (their next names).
    sub: Level,
    /// Every path that goes on: its slot and the rest of the path after this name (for a
    /// value that is an array or not a document).
    below: Vec<(usize, Vec<String>)>,
}

impl Paths {
    /// The tree of `paths` (each non-empty); the i-th distinct path gets slot i, in order of
    /// first appearance, and `slot_of[j]` is the slot of `paths[j]`. `None` when a level would
    /// read more than [`PATHS_PER_LEVEL`] names.
    pub(crate) fn new(paths: &[&[String]]) -> Option<(Paths, Vec<usize>)> {
        let mut distinct: Vec<&[String]> = Vec::new();
        let mut slot_of = Vec::with_capacity(paths.len());
        for p in paths {
            if p.is_empty() {
                return None;
            }
            let slot = match distinct.iter().position(|d| d == p) {
                Some(s) => s,
                None => {
                    distinct.push(p);
                    distinct.len() - 1
                }
            };
            slot_of.push(slot);
        }
        let mut top = Level::default();
        for (slot, p) in distinct.iter().enumerate() {
            top.add(slot, p)?;
        }
        Some((
            Paths {
                top,
                slots: distinct.len(),
            },
            slot_of,
        ))
    }

    /// How many distinct paths (the length [`Paths::read`]'s `out` must have).
    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    /// The value of each path in `d` into `out` (by slot; see the type's docs). `stored`: `d`
    /// is a document as storage holds it (well-formed, UTF-8), which the walk then does not
    /// check again (see [`walk_fields`]); the values are the same either way.
    pub(crate) fn read<'a>(&self, d: &'a RawDocument, out: &mut [Value<'a>], stored: bool) {
        self.top.read(d, out, stored);
    }
}

impl Level {
    /// Adds the path `p` ending in `slot` below this level.
    fn add(&mut self, slot: usize, p: &[String]) -> Option<()> {
        let (first, rest) = p.split_first()?;
        let i = match self.names.iter().position(|n| n == first) {
            Some(i) => i,
            None => {
                if self.names.len() == PATHS_PER_LEVEL {
                    return None;
                }
                self.names.push(first.clone());
                self.words.push(key_word(first.as_bytes()));
                self.lengths = name_lengths(&self.names);
                self.nodes.push(PathNode::default());
                self.names.len() - 1
            }
        };
        let node = self.nodes.get_mut(i)?;
        if rest.is_empty() {
            node.slot = Some(slot);
        } else {
            node.below.push((slot, rest.to_vec()));
            node.sub.add(slot, rest)?;
        }
        Some(())
    }

    fn read<'a>(&self, d: &'a RawDocument, out: &mut [Value<'a>], stored: bool) {
        let mut firsts = [None; PATHS_PER_LEVEL];
        let firsts = firsts.get_mut(..self.names.len()).unwrap_or_default();
        walk_fields(d, &self.names, &self.words, self.lengths, firsts, stored);
        for (node, v) in self.nodes.iter().zip(firsts.iter()) {
            if let Some(o) = node.slot.and_then(|s| out.get_mut(s)) {
                *o = match v {
                    Some(v) => Value::Ref(*v),
                    None => Value::Missing,
                };
            }
            if node.below.is_empty() {
                continue;
            }
            match v {
                Some(RawBsonRef::Document(sub)) => node.sub.read(sub, out, stored),
                Some(v @ RawBsonRef::Array(_)) => {
                    for (slot, rest) in &node.below {
                        if let Some(o) = out.get_mut(*slot) {
                            *o = super::eval::path_from_first(Some(*v), rest);
                        }
                    }
                }
                _ => {
                    for (slot, _) in &node.below {
                        if let Some(o) = out.get_mut(*slot) {
                            *o = Value::Missing;
                        }
                    }
                }
            }
        }
    }
}

/// What [`field_or_array`] found.
pub(crate) enum Found<'a> {
    /// An array, as the document its bytes form (keys "0", "1", …).
    Array(&'a RawDocument),
    /// Any other value, or nothing.
    Value(Option<RawBsonRef<'a>>),
}

/// [`field`], with an array given as its bytes (read by this walk without the generic one).
pub(crate) fn field_or_array<'a>(d: &'a RawDocument, name: &str) -> Found<'a> {
    if let Walk::Found(v, 0x04, _) = walk(d.as_bytes(), name.as_bytes())
        && let Ok(a) = RawDocument::from_bytes(v)
    {
        return Found::Array(a);
    }
    match field(d, name) {
        Some(RawBsonRef::Array(a)) => match RawDocument::from_bytes(a.as_bytes()) {
            Ok(a) => Found::Array(a),
            Err(_) => Found::Value(Some(RawBsonRef::Array(a))),
        },
        other => Found::Value(other),
    }
}

pub(crate) enum Walk<'a> {
    /// The value's bytes, its type and the element's key (as bytes of the document).
    Found(&'a [u8], u8, &'a [u8]),
    /// No such field, every element read plainly.
    Absent,
    /// Leave it to the generic walk.
    Unsure,
}

/// The first element called `name` in the framed document `b` by the light walk (see the
/// module docs for when it answers [`Walk::Unsure`]).
pub(crate) fn walk<'a>(b: &'a [u8], name: &[u8]) -> Walk<'a> {
    let mut elements = Elements::new(b);
    loop {
        // A key that is not ASCII is `Unsure`.
        match elements.step_ascii() {
            Step::Element(e) => {
                if e.key == name {
                    return Walk::Found(e.value, e.kind, e.key);
                }
                // The generic walk reads every value before the one wanted, and stops at one
                // it cannot read: so must this one.
                if !readable(e.kind, e.value) {
                    return Walk::Unsure;
                }
            }
            Step::End => return Walk::Absent,
            Step::Unsure => return Walk::Unsure,
        }
    }
}

/// Whether the generic walk reads the value of type `kind` in `v` without an error, for `v`
/// as [`Elements::step`] sized it: a double, an int32, an int64 or a null is then exactly its
/// width, and an embedded document exactly its declared length ending in NUL (what
/// `RawDocument::from_bytes` checks), so [`value`] would read them; a boolean's byte and a
/// string's terminator and UTF-8 are still checked.
fn readable(kind: u8, v: &[u8]) -> bool {
    match kind {
        0x08 => matches!(v, [0 | 1]),
        0x02 | 0x0D | 0x0E => string_ok(v),
        _ => true,
    }
}

/// A string value's bytes (length prefix, bytes, NUL) without the prefix and the NUL; `None`
/// when the NUL is missing.
fn string_body(v: &[u8]) -> Option<&[u8]> {
    let (nul, body) = v.get(4..)?.split_last()?;
    (*nul == 0).then_some(body)
}

/// Whether [`value`] reads the string value `v`: its NUL is there and its bytes are UTF-8
/// (ASCII, the common case, checked a word at a time without the UTF-8 validator).
fn string_ok(v: &[u8]) -> bool {
    string_body(v).is_some_and(|b| b.is_ascii() || std::str::from_utf8(b).is_ok())
}

/// The value of the element named `name` found in `d`: read from its `kind` and bytes `v`
/// when [`value`] can, else looked up by name as the general path does.
#[inline]
fn found<'a>(d: &'a RawDocument, name: &str, kind: u8, v: &'a [u8]) -> Option<RawBsonRef<'a>> {
    value(kind, v).or_else(|| crate::path::field(d, name))
}

/// The value of type `kind` in `v` (exactly its bytes); `None` for what the generic walk
/// should read.
pub(crate) fn value(kind: u8, v: &[u8]) -> Option<RawBsonRef<'_>> {
    Some(match kind {
        0x01 => RawBsonRef::Double(f64::from_le_bytes(v.try_into().ok()?)),
        0x10 => RawBsonRef::Int32(i32::from_le_bytes(v.try_into().ok()?)),
        0x12 => RawBsonRef::Int64(i64::from_le_bytes(v.try_into().ok()?)),
        0x08 => match v {
            [0] => RawBsonRef::Boolean(false),
            [1] => RawBsonRef::Boolean(true),
            _ => return None,
        },
        0x0A => RawBsonRef::Null,
        // Length (including the NUL), the bytes, the NUL.
        0x02 => RawBsonRef::String(std::str::from_utf8(string_body(v)?).ok()?),
        0x03 => RawBsonRef::Document(RawDocument::from_bytes(v).ok()?),
        // No borrowed array can be made from bytes here: the generic walk reads arrays.
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use bson::{RawDocumentBuf, rawdoc};

    use super::*;

    /// Whether the bson crate reads all of `d` (every element at every level, names and
    /// strings UTF-8): what storage guarantees of the documents it holds.
    fn well_formed(d: &RawDocument) -> bool {
        bson::Document::try_from(d).is_ok()
    }

    /// [`fields`] over every subset of `names` in a few orders (and over all of them)
    /// answers as [`field`] does name by name; and so does its `stored` walk, on a
    /// [`well_formed`] document.
    fn same_fields(d: &RawDocument, names: &[&str]) {
        let mut sets: Vec<Vec<&str>> = vec![names.to_vec(), names.iter().rev().copied().collect()];
        for w in 1..=3.min(names.len()) {
            sets.extend(names.windows(w).map(<[&str]>::to_vec));
        }
        for set in sets {
            let want: Vec<_> = set.iter().map(|n| field(d, n)).collect();
            for stored in [false, true] {
                if stored && !well_formed(d) {
                    continue;
                }
                let mut out = vec![Some(RawBsonRef::Null); set.len()];
                fields(d, &set, &mut out, stored);
                assert_eq!(out, want, "{set:?} in {:?} ({stored})", d.as_bytes());
            }
        }
    }

    /// The copy the generic walk builds: every element read, those named appended.
    fn generic_copy(d: &RawDocument, names: &[String]) -> Option<RawDocumentBuf> {
        let mut out = RawDocumentBuf::new();
        for el in d.iter() {
            let (k, v) = el.ok()?;
            if names.iter().any(|n| n == k.as_str()) {
                out.append(k, v);
            }
        }
        Some(out)
    }

    /// [`copy_top_level`] of several name sets: when it answers, the generic walk builds the
    /// same bytes; it answers for `plain` documents.
    fn same_copy(d: &RawDocument, names: &[&str], plain: bool) {
        let all: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut sets = vec![all.clone(), Vec::new()];
        sets.extend(all.chunks(2).map(<[String]>::to_vec));
        sets.extend(all.iter().map(|n| vec![n.clone(), "zz".to_string()]));
        for set in sets {
            let got = copy_top_level(d, &set);
            if plain {
                assert!(got.is_some(), "{set:?} in {:?}", d.as_bytes());
            }
            if let Some(got) = got {
                assert_eq!(
                    Some(got.as_bytes()),
                    generic_copy(d, &set).as_ref().map(|g| g.as_bytes()),
                    "{set:?} in {:?}",
                    d.as_bytes()
                );
            }
        }
    }

    /// Every kind of value, first and later fields, duplicates, absent names and malformed
    /// documents: the same answer as the generic walk.
    #[test]
    fn same_as_the_generic_walk() {
        let full = bson::doc! {"a": 1, "b": 2_i64, "c": 2.5, "d": "str", "e": true, "f": null,
        "g": {"x": 1}, "h": [1, "y"], "i": bson::oid::ObjectId::new(),
        "j": bson::DateTime::from_millis(5), "k": bson::Decimal128::from_bytes([1; 16]),
        "l": bson::Timestamp { time: 1, increment: 2 }, "m": bson::Bson::MinKey,
        "n": bson::Bson::MaxKey, "o": bson::Bson::Undefined,
        "p": bson::Regex { pattern: "a".to_string().try_into().unwrap(), options: "i".to_string().try_into().unwrap() },
        "q": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2] },
        "r": bson::Bson::Symbol("s".into()), "s": bson::Bson::JavaScriptCode("c".into()),
        "é": 1, "t": ""};
        let mut dup = RawDocumentBuf::try_from(&full).unwrap();
        dup.append(bson::raw::cstr!("a"), "dup");
        // Keys and names longer than 63 bytes, of different lengths.
        let (long, longer) = ("x".repeat(64), "x".repeat(70));
        let long_key = <&bson::raw::CStr>::try_from(longer.as_str()).unwrap();
        dup.append(long_key, 70);
        // Non-ASCII strings (and code, symbols) before the names read plainly.
        let utf8 = bson::doc! {"u": "ü日本", "s": bson::Bson::Symbol("é".into()),
        "c": bson::Bson::JavaScriptCode("ß".into()), "e": false, "v": "x", "a": 1};
        let docs = vec![
            rawdoc! {},
            RawDocumentBuf::try_from(&full).unwrap(),
            dup,
            RawDocumentBuf::try_from(&utf8).unwrap(),
        ];
        let names = [
            "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q",
            "r", "s", "é", "t", "u", "v", "zz", "", &long, &longer,
            // The same key word as "a" (and as ""), another length.
            "a\0", "\0",
        ];
        for d in &docs {
            for n in names {
                assert_eq!(field(d, n), crate::path::field(d, n), "{n} in {d:?}");
            }
            same_fields(d, &names);
            same_copy(d, &names, false);
        }
        // Documents with only the types the walk sizes are copied by it.
        for d in [&docs[0], &docs[3]] {
            same_copy(d, &["u", "s", "c", "e", "v", "a"], true);
        }
        let mut dup = rawdoc! {"a": 1, "b": {"x": [1, 2]}, "n": null, "t": 5_i64};
        dup.append(bson::raw::cstr!("a"), "again");
        same_copy(&dup, &["a", "b", "n", "t"], true);
        // Malformed: a bad length inside, a truncated string, a non-UTF-8 key, a bad type.
        let good = rawdoc! {"a": 1, "s": "xy", "b": true, "d": 2.5, "z": 3};
        let mut variants: Vec<Vec<u8>> = Vec::new();
        for i in 4..good.as_bytes().len() - 1 {
            for byte in [0u8, 0x80, 0xFF, 0x7F, 0x02, 0x10] {
                let mut b = good.as_bytes().to_vec();
                if let Some(x) = b.get_mut(i) {
                    *x = byte;
                }
                variants.push(b);
            }
        }
        for b in variants {
            let Ok(d) = RawDocumentBuf::from_bytes(b) else {
                continue;
            };
            for n in ["a", "s", "b", "d", "z", "q"] {
                assert_eq!(
                    field(&d, n),
                    crate::path::field(&d, n),
                    "{n} in {:?}",
                    d.as_bytes()
                );
            }
            same_fields(&d, &["a", "s", "b", "d", "z", "q"]);
            same_copy(&d, &["a", "s", "b", "d", "z", "q"], false);
            same_fields(&d, &["z", "a"]);
        }
    }

    /// [`short_key_step`] answers exactly as [`Elements::step_ascii_keyed`] at the same
    /// offset wherever it answers, and answers for the plain elements of short keys: every
    /// offset of documents with short, eight-byte, long and non-ASCII keys, every type the
    /// light walk sizes and some it does not, each byte replaced by values near the edges
    /// of the checks, and every cut.
    #[test]
    fn short_steps_equal_the_light_walk() {
        let bin = bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: vec![1],
        };
        let docs = [
            rawdoc! {"a": 1, "s": "xy", "b": true, "d": 2.5, "z": 3_i64, "n": null},
            rawdoc! {"seven77": {"x": [1, {"y": "é"}]}, "eight888": 1, "é": 2, "k": "ü",
            "o": bson::oid::ObjectId::from_bytes([7; 12]), "t": bson::DateTime::from_millis(9),
            "m": bson::Decimal128::from_bytes([3; 16]), "": "", "bin": bin, "after": 1},
            rawdoc! {"a_rather_long_key": 1, "x": {}, "y": [], "q": bson::Timestamp { time: 1, increment: 2 }},
        ];
        let mut answered = 0;
        let mut check = |b: &[u8]| {
            let last = b.len().saturating_sub(1);
            for off in 0..b.len() + 2 {
                let mut walk = Elements::at(b, off);
                let general = walk.step_ascii_keyed();
                if let Some(e) = short_key_step(b, last, off) {
                    let want = Step::Element(cairn_storage::elements::Element {
                        kind: e.kind,
                        key: &b[off + 1..off + 1 + e.key_len],
                        value: &b[e.start..e.end],
                    });
                    assert_eq!(general, (want, e.word), "{off} in {b:?}");
                    assert_eq!(walk.offset(), e.end, "{off} in {b:?}");
                    answered += 1;
                } else if let (Step::Element(el), _) = general {
                    // It leaves only long keys and keys without eight bytes after them.
                    assert!(el.key.len() >= 8 || off + 9 > b.len(), "{off} in {b:?}");
                }
            }
        };
        for d in &docs {
            let b = d.as_bytes();
            check(b);
            for i in 0..b.len() {
                check(&b[..i]);
                for byte in [0u8, 1, 4, 5, 0x7F, 0x80, 0xFF] {
                    let mut bad = b.to_vec();
                    bad[i] = byte;
                    check(&bad);
                }
            }
        }
        assert!(answered > 1000, "{answered}");
    }

    /// [`Paths`] gives every path what the expression evaluator gives `$path` (the general
    /// rule): documents with the paths' fields missing, null, duplicated (the first counts,
    /// at every level), behind arrays at each level and nested arrays, under scalars and
    /// other non-document intermediates, after values the walk leaves to the bson crate, and
    /// malformed.
    #[test]
    fn paths_equal_the_evaluator() {
        use bson::{Bson, doc};
        let bin = Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: vec![1, 2],
        });
        let mut docs: Vec<RawDocumentBuf> = [
            doc! {},
            doc! {"a": null, "c": null},
            doc! {"a": 1, "c": "x", "d": {"e": 3}},
            doc! {"a": {"b": 1, "c": 2}, "c": {"x": 1}},
            doc! {"a": {"b": {"c": 4, "d": [1, 2]}}, "d": [{"e": 1}, {"f": 1}, 5, {"e": [2]}]},
            doc! {"a": [{"b": 1}, {"c": 2}, 5, {"b": [2, 3]}, [{"b": 9}], {"b": {"c": 7}}], "c": [1, 2]},
            doc! {"a": [[{"b": 1}]], "c": null, "d": {"e": null}},
            doc! {"a": {"b": [{"c": 1}, {"c": [2]}, {"d": 1}, null, [{"c": 3}]]}},
            doc! {"x": bin.clone(), "a": {"y": bin, "b": 7}, "c": bson::oid::ObjectId::from_bytes([1; 12])},
            doc! {"é": 1, "a": {"é": 2, "b": "ü"}, "c": 3_i64},
            doc! {"c": Bson::Decimal128(bson::Decimal128::from_bytes([1; 16])), "a": {"b": true}},
            doc! {"longer_than_eight": 1, "a": {"longer_than_eight": {"b": 2}}, "d": "s"},
            doc! {"a": "not a document", "d": 5},
            doc! {"a": {"b": null}, "d": {"e": {"f": [1, {"g": 2}]}}},
        ]
        .iter()
        .map(|d| RawDocumentBuf::try_from(d).unwrap())
        .collect();
        // Duplicate names at the top and inside a sub-document.
        let mut dup = rawdoc! {"a": {"b": 1, "c": 5}, "c": 1};
        dup.append(bson::raw::cstr!("a"), rawdoc! {"b": 99});
        dup.append(bson::raw::cstr!("c"), 2);
        docs.push(dup);
        let mut inner = rawdoc! {"b": 1};
        inner.append(bson::raw::cstr!("b"), 2);
        docs.push(rawdoc! {"a": inner, "d": 1});
        // Malformed: every byte of a document with a sub-document replaced.
        let good = rawdoc! {"c": "xy", "a": {"b": 1, "c": "z"}, "d": true};
        for i in 4..good.as_bytes().len() - 1 {
            for byte in [0u8, 0x80, 0xFF, 0x02, 0x03, 0x04, 0x10] {
                let mut b = good.as_bytes().to_vec();
                b[i] = byte;
                if let Ok(d) = RawDocumentBuf::from_bytes(b) {
                    docs.push(d);
                }
            }
        }
        let sets: [&[&str]; 6] = [
            &["a.b", "c"],
            &["a", "a.b", "a.b.c", "a.c", "c", "d.e", "missing.x"],
            &["a.b.c", "a.b.d", "d.e.f.g", "d.e", "c.x"],
            &[
                "é",
                "a.é",
                "a.b",
                "longer_than_eight",
                "a.longer_than_eight.b",
            ],
            &["d", "a.b", "a.b"],
            &["a.b.c.d.e", "c"],
        ];
        let ext = crate::expr::ExprExtensions::default();
        let vars = ext.variables();
        let mut compared = 0;
        let mut stored_compared = 0;
        for set in sets {
            let parts: Vec<Vec<String>> = set
                .iter()
                .map(|p| p.split('.').map(str::to_string).collect())
                .collect();
            let refs: Vec<&[String]> = parts.iter().map(Vec::as_slice).collect();
            let (paths, slot_of) = Paths::new(&refs).unwrap();
            let exprs: Vec<_> = set
                .iter()
                .map(|p| {
                    ext.parse_expression(RawBsonRef::String(&format!("${p}")))
                        .unwrap()
                })
                .collect();
            for d in &docs {
                for stored in [false, true] {
                    if stored && !well_formed(d) {
                        continue;
                    }
                    let mut out = vec![Value::Ref(RawBsonRef::MaxKey); paths.slots()];
                    paths.read(d, &mut out, stored);
                    for ((p, e), slot) in set.iter().zip(&exprs).zip(&slot_of) {
                        let want = e.evaluate(d, vars).unwrap();
                        let got = out[*slot].get().map(bson::RawBson::from);
                        assert_eq!(got, want, "{p} in {:?} ({stored})", d.as_bytes());
                        compared += 1;
                        stored_compared += usize::from(stored);
                    }
                }
            }
        }
        assert!(compared > 1000, "{compared}");
        assert!(stored_compared > 500, "{stored_compared}");
        // More names at one level than one walk reads: no tree.
        let many: Vec<Vec<String>> = (0..=PATHS_PER_LEVEL)
            .map(|i| vec![format!("f{i}")])
            .collect();
        let refs: Vec<&[String]> = many.iter().map(Vec::as_slice).collect();
        assert!(Paths::new(&refs).is_none());
    }
}
