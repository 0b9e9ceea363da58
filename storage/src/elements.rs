//! A light walk over the elements of a framed BSON document or array: each element's type
//! byte, key bytes and value bytes, the value sized by its type's length — without the bson
//! crate's per-element work (no UTF-8 check of keys or strings, no value built).
//!
//! The walk sizes only the common fixed-length types, strings (also JavaScript code and
//! symbols), embedded documents and arrays ([`value_len`]). At anything else — another type,
//! a length that does not fit, a missing terminator — it stops with [`Step::Unsure`], and the
//! caller answers with the bson crate's validating iterator instead. So a caller's fast path
//! never decides anything on bytes this walk did not read plainly. Never panics.
//!
//! A key's terminating NUL is searched for eight bytes at a time ([`Elements::step_ascii`]
//! also checks in the same pass that the key is ASCII).

/// One element: its type byte, its key and its value, as bytes of the document walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Element<'a> {
    /// The BSON type byte.
    pub kind: u8,
    /// The key, without its NUL (not checked as UTF-8).
    pub key: &'a [u8],
    /// The value's bytes, exactly (a string's length prefix and NUL included).
    pub value: &'a [u8],
}

impl Element<'_> {
    /// Whether a string-typed value (string, JavaScript code, symbol) has the framing the bson
    /// crate's element iterator checks as it steps — a length of at least 1 and the closing
    /// NUL — which the walk does not check; true for every other type.
    pub fn string_framed(&self) -> bool {
        !matches!(self.kind, 0x02 | 0x0D | 0x0E)
            || (self.value.len() >= 5 && self.value.last() == Some(&0))
    }
}

/// What [`Elements::step`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// The next element.
    Element(Element<'a>),
    /// The document's terminator: every element was read plainly.
    End,
    /// Something this walk does not size: leave the document to the bson crate.
    Unsure,
}

/// A walk over the elements of one framed document (length, elements, NUL).
#[derive(Debug, Clone)]
pub struct Elements<'a> {
    /// The document without its last byte: the elements lie in `body[4..]`.
    body: &'a [u8],
    /// Whether the document's last byte is its terminator (NUL).
    terminated: bool,
    off: usize,
}

impl<'a> Elements<'a> {
    /// A walk from the first element of the framed document `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Elements::at(bytes, 4)
    }

    /// A walk from the element at offset `off` of the framed document `bytes` (an offset
    /// another walk over it reached).
    pub fn at(bytes: &'a [u8], off: usize) -> Self {
        let (body, terminated) = match bytes.split_last() {
            Some((&last, body)) => (body, last == 0),
            None => (&[][..], false),
        };
        Elements {
            body,
            terminated,
            off,
        }
    }

    /// The offset of the next element in the document's bytes.
    pub fn offset(&self) -> usize {
        self.off
    }

    /// The next element (see [`Step`]). After `End` or `Unsure` it keeps answering the same.
    pub fn step(&mut self) -> Step<'a> {
        self.step_inline()
    }

    /// [`Elements::step`], inlined into the caller: for the loops that walk every document
    /// of a query or an insert (reading a few fields), where the call and the returned
    /// [`Step`] would cost as much as the step itself.
    #[inline(always)]
    pub fn step_inline(&mut self) -> Step<'a> {
        self.step_with::<false>().0
    }

    /// [`Elements::step_inline`], with a key holding a non-ASCII byte also answered as
    /// [`Step::Unsure`] (its UTF-8 is left to the bson crate), checked while its NUL is
    /// searched for: for callers that would leave such a key to the bson crate anyway.
    #[inline(always)]
    pub fn step_ascii(&mut self) -> Step<'a> {
        self.step_with::<true>().0
    }

    /// [`Elements::step_ascii`], with the element's key as a [`key_word`] (read while its NUL
    /// is searched for; 0 when there is no element): for a caller comparing keys with a few
    /// names, one word comparison each.
    #[inline(always)]
    pub fn step_ascii_keyed(&mut self) -> (Step<'a>, u64) {
        self.step_with::<true>()
    }

    /// The step and its key's word (0 without `ASCII`); with `ASCII`, a non-ASCII key is
    /// `Unsure`.
    #[inline(always)]
    fn step_with<const ASCII: bool>(&mut self) -> (Step<'a>, u64) {
        let off = self.off;
        let Some(rest) = self.body.get(off..) else {
            return (Step::Unsure, 0);
        };
        let Some((&kind, after)) = rest.split_first() else {
            return if self.terminated {
                (Step::End, 0)
            } else {
                (Step::Unsure, 0)
            };
        };
        let (key_len, word) = if ASCII {
            match nul_at_ascii(after) {
                Some((n, true, word)) => (n, word),
                _ => return (Step::Unsure, 0),
            }
        } else {
            match nul_at(after) {
                Some(n) => (n, 0),
                None => return (Step::Unsure, 0),
            }
        };
        let Some((key, tail)) = after.split_at_checked(key_len) else {
            return (Step::Unsure, 0);
        };
        // `tail` starts with the key's NUL.
        let r = tail.get(1..).unwrap_or_default();
        let Some(value) = value_at(kind, r) else {
            return (Step::Unsure, 0);
        };
        self.off = off + 1 + key_len + 1 + value.len();
        (Step::Element(Element { kind, key, value }), word)
    }

    /// How many elements remain, or `None` if the walk meets something it does not size.
    pub fn count(mut self) -> Option<usize> {
        let mut n = 0usize;
        loop {
            match self.step() {
                Step::Element(_) => n += 1,
                Step::End => return Some(n),
                Step::Unsure => return None,
            }
        }
    }
}

/// The offset of the first NUL in `s`, eight bytes at a time: in each little-endian word,
/// `(v - 0x01..01) & !v & 0x80..80` has its lowest set bit in the first zero byte (a borrow
/// only reaches past a zero byte, so no byte before the first zero is flagged).
pub(crate) fn nul_at(s: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    let mut at = 0usize;
    let mut rest = s;
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        let v = u64::from_le_bytes(*word);
        let zeros = v.wrapping_sub(ONES) & !v & HIGHS;
        if zeros != 0 {
            return Some(at + (zeros.trailing_zeros() / 8) as usize);
        }
        at += 8;
        rest = tail;
    }
    rest.iter().position(|&c| c == 0).map(|p| at + p)
}

/// [`nul_at`], whether every byte before that NUL is ASCII, and the bytes before it as a
/// [`key_word`]: the high bits of the words read are gathered, the NUL's word masked to the
/// bits below the NUL's flag (the lowest set bit of the flags is the first zero byte's, see
/// [`nul_at`]), which for a key under eight bytes is also its word.
#[inline(always)]
fn nul_at_ascii(s: &[u8]) -> Option<(usize, bool, u64)> {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    let mut at = 0usize;
    let mut rest = s;
    let mut seen = 0u64;
    let mut first = 0u64;
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        let v = u64::from_le_bytes(*word);
        let zeros = v.wrapping_sub(ONES) & !v & HIGHS;
        if zeros != 0 {
            let below = (zeros & zeros.wrapping_neg()) - 1;
            let ascii = (seen | (v & below)) & HIGHS == 0;
            let word = if at == 0 { v & below } else { first };
            return Some((at + (zeros.trailing_zeros() / 8) as usize, ascii, word));
        }
        if at == 0 {
            first = v;
        }
        seen |= v;
        at += 8;
        rest = tail;
    }
    let p = rest.iter().position(|&c| c == 0)?;
    let key = rest.get(..p)?;
    let ascii = seen & HIGHS == 0 && key.is_ascii();
    let word = if at == 0 { key_word(key) } else { first };
    Some((at + p, ascii, word))
}

/// The first eight bytes of `key` as a little-endian word, zero-padded (what
/// [`Elements::step_ascii_keyed`] gives with each element): a key of up to eight bytes is
/// equal to a name of its length exactly when their words are.
pub fn key_word(key: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    for (d, s) in w.iter_mut().zip(key) {
        *d = *s;
    }
    u64::from_le_bytes(w)
}

/// [`CLASS`] for a type whose value starts with an int32 length (kept apart from the fixed
/// widths, which are all below it).
pub const VARIABLE: u8 = 0x80;
/// [`CLASS`] for a string (also code and symbol): the length prefix counts what follows it.
pub const STRING: u8 = VARIABLE;
/// [`CLASS`] for an embedded document or array: the length counts itself, ends in NUL.
pub const DOCUMENT: u8 = 0x81;
/// [`CLASS`] for a type not sized here.
pub const UNSIZED: u8 = 0xFF;

/// Per type byte: the fixed width of its value, or [`STRING`], [`DOCUMENT`], [`UNSIZED`] (the
/// light walks here and `cairn_query`'s field walk size values by it).
pub static CLASS: [u8; 256] = {
    let mut c = [UNSIZED; 256];
    c[0x01] = 8;
    c[0x09] = 8;
    c[0x11] = 8;
    c[0x12] = 8;
    c[0x10] = 4;
    c[0x08] = 1;
    c[0x07] = 12;
    c[0x13] = 16;
    c[0x0A] = 0;
    c[0x06] = 0;
    c[0xFF] = 0;
    c[0x7F] = 0;
    c[0x02] = STRING;
    c[0x0D] = STRING;
    c[0x0E] = STRING;
    c[0x03] = DOCUMENT;
    c[0x04] = DOCUMENT;
    c
};

/// The value of a [`STRING`] or [`DOCUMENT`] class at the start of `r` (see [`value_len`]).
#[inline]
fn sized_value(class: u8, r: &[u8]) -> Option<&[u8]> {
    let (n, _) = r.split_first_chunk::<4>()?;
    let n = usize::try_from(i32::from_le_bytes(*n)).ok()?;
    match class {
        STRING => r.get(..n.checked_add(4)?),
        DOCUMENT if n >= 5 => {
            let v = r.get(..n)?;
            (v.last() == Some(&0)).then_some(v)
        }
        _ => None,
    }
}

/// The value of type `kind` at the start of `r` (see [`value_len`]).
#[inline(always)]
fn value_at(kind: u8, r: &[u8]) -> Option<&[u8]> {
    let class = CLASS[usize::from(kind)];
    if class < VARIABLE {
        r.get(..usize::from(class))
    } else {
        sized_value(class, r)
    }
}

/// The length of a value of type `kind` at the start of `r`: `None` for a type not sized
/// here (binary, regular expressions, DBPointer, code with scope, unknown bytes), a length
/// that is negative or longer than `r`, or an embedded document not ending in NUL.
#[inline]
pub fn value_len(kind: u8, r: &[u8]) -> Option<usize> {
    value_at(kind, r).map(<[u8]>::len)
}

#[cfg(test)]
mod tests {
    use bson::{RawDocumentBuf, rawdoc};

    use super::*;

    /// An element as owned bytes: type, key, value.
    type Owned = (u8, Vec<u8>, Vec<u8>);

    fn walk(b: &[u8]) -> (Vec<Owned>, Step<'_>) {
        let mut w = Elements::new(b);
        let mut out = Vec::new();
        loop {
            match w.step() {
                Step::Element(e) => out.push((e.kind, e.key.to_vec(), e.value.to_vec())),
                other => return (out, other),
            }
        }
    }

    /// Every sized type gives the bson crate's elements, keys and value bytes.
    #[test]
    fn same_elements_as_the_bson_crate() {
        let d = rawdoc! {"a": 1, "b": 2_i64, "c": 2.5, "d": "str", "e": true, "f": null,
        "g": {"x": 1}, "h": [1, "y"], "i": bson::oid::ObjectId::new(),
        "j": bson::DateTime::from_millis(5), "k": bson::Decimal128::from_bytes([1; 16]),
        "l": bson::Timestamp { time: 1, increment: 2 }, "é": "", "": 0};
        let (got, end) = walk(d.as_bytes());
        assert_eq!(end, Step::End);
        let mut want = Vec::new();
        for el in d.iter_elements() {
            let el = el.unwrap();
            let mut one = RawDocumentBuf::new();
            one.append(el.key(), el.value().unwrap());
            // one = length, type, key, NUL, value, NUL
            let v = &one.as_bytes()[4 + 1 + el.key().len() + 1..one.as_bytes().len() - 1];
            want.push((
                el.element_type() as u8,
                el.key().as_str().as_bytes().to_vec(),
                v.to_vec(),
            ));
        }
        assert_eq!(got, want);
        assert_eq!(Elements::new(d.as_bytes()).count(), Some(14));
        assert_eq!(Elements::new(rawdoc! {}.as_bytes()).count(), Some(0));
    }

    /// Types it does not size and malformed framing stop the walk as `Unsure`, never panic.
    #[test]
    fn unsure_at_what_it_does_not_size() {
        let bin = rawdoc! {"a": 1, "b": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1] }};
        let (got, end) = walk(bin.as_bytes());
        assert_eq!(got.len(), 1);
        assert_eq!(end, Step::Unsure);
        let good = rawdoc! {"a": 1, "s": "xy"};
        let b = good.as_bytes();
        for cut in 0..b.len() {
            let _ = walk(&b[..cut]);
            let mut bad = b.to_vec();
            bad[cut] ^= 0xFF;
            let _ = walk(&bad);
            let _ = Elements::new(&bad).count();
        }
        // a string length reaching past the document
        let mut bad = b.to_vec();
        let s = b.len() - 8;
        bad[s] = 0x7F;
        assert_eq!(walk(&bad).1, Step::Unsure);
    }

    /// The walk's step before it searched keys a word at a time: the reference for
    /// `same_steps_as_the_bytewise_walk`.
    fn reference_step<'a>(bytes: &'a [u8], off: &mut usize) -> Step<'a> {
        let Some((&last, body)) = bytes.split_last() else {
            return Step::Unsure;
        };
        let Some(rest) = body.get(*off..) else {
            return Step::Unsure;
        };
        let Some((&kind, after)) = rest.split_first() else {
            return if last == 0 { Step::End } else { Step::Unsure };
        };
        let Some(key_len) = after.iter().position(|&c| c == 0) else {
            return Step::Unsure;
        };
        let Some((key, tail)) = after.split_at_checked(key_len) else {
            return Step::Unsure;
        };
        let Some(r) = tail.get(1..) else {
            return Step::Unsure;
        };
        let Some(len) = value_len(kind, r) else {
            return Step::Unsure;
        };
        let Some(value) = r.get(..len) else {
            return Step::Unsure;
        };
        *off += 1 + key_len + 1 + len;
        Step::Element(Element { kind, key, value })
    }

    /// The steps of both walks over `b`, until both have answered `End` or `Unsure` twice;
    /// and [`Elements::step_ascii`]'s: the reference's, with an element whose key is not
    /// ASCII `Unsure` (the walk staying there).
    fn assert_same_steps(b: &[u8]) {
        let mut w = Elements::new(b);
        let mut off = 4usize;
        let mut finals = 0;
        while finals < 2 {
            let (got, want) = (w.step(), reference_step(b, &mut off));
            assert_eq!(got, want, "{b:?}");
            assert_eq!(w.offset(), off);
            if !matches!(got, Step::Element(_)) {
                finals += 1;
            }
        }
        let mut w = Elements::new(b);
        let mut off = 4usize;
        let mut finals = 0;
        while finals < 2 {
            let mut next = off;
            let want = match reference_step(b, &mut next) {
                Step::Element(e) if !e.key.is_ascii() => Step::Unsure,
                other => {
                    off = next;
                    other
                }
            };
            let got = w.step_ascii();
            assert_eq!(got, want, "{b:?}");
            assert_eq!(w.offset(), off);
            if !matches!(got, Step::Element(_)) {
                finals += 1;
            }
        }
    }

    /// Every one-byte change (all 256 values at every offset) and every cut of a few
    /// documents — long and non-ASCII keys, nested documents, strings — gives the same steps
    /// as the byte-wise walk.
    #[test]
    fn same_steps_as_the_bytewise_walk() {
        let docs = [
            rawdoc! {"a": 1, "s": "xy"},
            rawdoc! {"a_rather_long_key_name": 1.5, "é": {"x": [1, 2_i64]}, "": null,
            "seven77": "s", "eight888": true, "n": bson::oid::ObjectId::from_bytes([0; 12])},
            rawdoc! {"k\u{1}\u{80}\u{ff}k": "\u{0}\u{1}", "x": {"": {"y": ""}}, "z": []},
            rawdoc! {"ascii_key_é": 1, "key_of_9é": 2, "a": 3, "seven7é": 4, "é": 5},
        ];
        for d in &docs {
            let b = d.as_bytes();
            assert_same_steps(b);
            for cut in 0..b.len() {
                assert_same_steps(&b[..cut]);
                let mut bad = b.to_vec();
                for v in 0..=255u8 {
                    bad[cut] = v;
                    assert_same_steps(&bad);
                }
            }
        }
    }

    proptest::proptest! {
        /// The word-at-a-time NUL search finds the first NUL the byte-wise one finds,
        /// over bytes near the trick's edges (0, 1, 0x7F, 0x80, 0x81, 0xFF).
        #[test]
        fn nul_at_is_the_first_nul(s in proptest::collection::vec(
            proptest::sample::select(vec![0u8, 1, 2, 0x7F, 0x80, 0x81, 0xFE, 0xFF, b'a']), 0..40)) {
            let first = s.iter().position(|&c| c == 0);
            proptest::prop_assert_eq!(nul_at(&s), first);
            let ascii = first.map(|n| (n, s[..n].is_ascii(), key_word(&s[..n])));
            proptest::prop_assert_eq!(nul_at_ascii(&s), ascii);
        }
    }
}
