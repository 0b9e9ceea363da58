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
//! A key's terminating NUL is searched for eight bytes at a time.

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
    bytes: &'a [u8],
    off: usize,
}

impl<'a> Elements<'a> {
    /// A walk from the first element of the framed document `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Elements { bytes, off: 4 }
    }

    /// A walk from the element at offset `off` of the framed document `bytes` (an offset
    /// another walk over it reached).
    pub fn at(bytes: &'a [u8], off: usize) -> Self {
        Elements { bytes, off }
    }

    /// The offset of the next element in the document's bytes.
    pub fn offset(&self) -> usize {
        self.off
    }

    /// The next element (see [`Step`]). After `End` or `Unsure` it keeps answering the same.
    pub fn step(&mut self) -> Step<'a> {
        let bytes = self.bytes;
        let off = self.off;
        // `end`: the offset of the document's last byte, which must be its terminator; the
        // elements lie in `bytes[4..end]`.
        let Some(end) = bytes.len().checked_sub(1) else {
            return Step::Unsure;
        };
        let Some(rest) = bytes.get(off..end) else {
            return Step::Unsure;
        };
        let Some((&kind, after)) = rest.split_first() else {
            return if bytes.get(end) == Some(&0) {
                Step::End
            } else {
                Step::Unsure
            };
        };
        let Some(key_len) = nul_at(after) else {
            return Step::Unsure;
        };
        let (Some(key), Some(r)) = (after.get(..key_len), after.get(key_len + 1..)) else {
            return Step::Unsure;
        };
        let Some(len) = value_len(kind, r) else {
            return Step::Unsure;
        };
        let Some(value) = r.get(..len) else {
            return Step::Unsure;
        };
        self.off = off + 1 + key_len + 1 + len;
        Step::Element(Element { kind, key, value })
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

fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    let s: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(i32::from_le_bytes(s))
}

/// The length of a value of type `kind` at the start of `r`: `None` for a type not sized
/// here (binary, regular expressions, DBPointer, code with scope, unknown bytes), a length
/// that is negative or longer than `r`, or an embedded document not ending in NUL.
#[inline]
pub fn value_len(kind: u8, r: &[u8]) -> Option<usize> {
    let len = match kind {
        0x01 | 0x09 | 0x11 | 0x12 => 8,
        0x10 => 4,
        0x08 => 1,
        0x07 => 12,
        0x13 => 16,
        0x0A | 0x06 | 0xFF | 0x7F => 0,
        0x02 | 0x0D | 0x0E => 4usize.checked_add(usize::try_from(i32_at(r, 0)?).ok()?)?,
        0x03 | 0x04 => {
            let n = usize::try_from(i32_at(r, 0)?).ok()?;
            if n < 5 || r.get(n.checked_sub(1)?) != Some(&0) {
                return None;
            }
            n
        }
        _ => return None,
    };
    (len <= r.len()).then_some(len)
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

    /// The steps of both walks over `b`, until both have answered `End` or `Unsure` twice.
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
            proptest::prop_assert_eq!(nul_at(&s), s.iter().position(|&c| c == 0));
        }
    }
}
