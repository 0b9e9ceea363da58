//! A command body's top-level fields, read in one pass.
//!
//! A raw BSON document answers `get(key)` by walking its elements from the start, decoding
//! each key and value header on the way; a command's generic arguments (`$db`, `lsid`,
//! `txnNumber`, `autocommit`, `startTransaction`, `readConcern`, `writeConcern`,
//! `$clusterTime`, `maxTimeMS`, the stable-API fields …) and its own options are looked up
//! dozens of times between the dispatcher, the session layer, the deadline, the metrics and
//! the command itself — most of them absent, so each lookup walked the whole body. [`Parsed`]
//! walks it once into a table of `(key, value)` references; lookups then compare keys only.
//!
//! [`Args`] is what argument readers (see [`super::args`]) take: the raw body or its
//! [`Parsed`], with the same answers.
//!
//! The walk reads the plain element types commands carry at the top level (strings,
//! documents, numbers, booleans, null) straight from the bytes ([`plain_fields`]); a body
//! with any other element, or anything out of place, is walked by bson's iterator instead,
//! which answers every case (errors included). Both give the same table for what the direct
//! read accepts (a test mutates bodies byte by byte and compares them). The direct read takes
//! a generic argument's key text from [`super::generic_argument`] rather than decoding it.
//! The table holds a dozen fields in place and moves to the heap only beyond.
//!
//! Invariants: [`Parsed::get`] answers exactly what `RawDocument::get` answers on the same
//! body — the first field with that key, a value found before a malformed element, and an
//! `InvalidBSON` error when the walk met a malformed element before finding the key. Nothing
//! is copied: every value borrows the body.

use bson::{RawBsonRef, RawDocument};
use bytes::Bytes;

use crate::error::{CommandError, ErrorCode};

/// The top-level fields of one command body, in order (see the module doc).
#[derive(Debug, Clone)]
pub struct Parsed<'a> {
    body: &'a RawDocument,
    /// The received message the body lies in, when it was read from one
    /// ([`Parsed::parse_in`]).
    frame: Option<&'a Bytes>,
    entries: Entries<'a>,
    /// The message of the malformed element that ended the walk, if one did.
    malformed: Option<String>,
}

/// How many fields [`Entries`] holds without allocating: more than a driver's `find`, `insert`
/// or `hello` carries with its generic arguments.
const INLINE_FIELDS: usize = 12;

/// One field: its key and value.
type Entry<'a> = (&'a str, RawBsonRef<'a>);

/// The fields of a body in order: up to [`INLINE_FIELDS`] in an array, all of them in a
/// vector once there are more (so reading an ordinary command allocates nothing). Not a
/// `SmallVec`: its type is invariant in the items' lifetime, and `Parsed<'a>` must stay
/// covariant in `'a` (the dispatcher's borrows rely on it).
#[derive(Debug, Clone)]
struct Entries<'a> {
    inline: [Entry<'a>; INLINE_FIELDS],
    len: usize,
    spilled: Vec<Entry<'a>>,
}

impl<'a> Entries<'a> {
    fn new() -> Self {
        Entries {
            inline: [("", RawBsonRef::Null); INLINE_FIELDS],
            len: 0,
            spilled: Vec::new(),
        }
    }

    fn push(&mut self, e: Entry<'a>) {
        if self.spilled.is_empty()
            && let Some(slot) = self.inline.get_mut(self.len)
        {
            *slot = e;
            self.len += 1;
            return;
        }
        if self.spilled.is_empty() {
            self.spilled.reserve(2 * INLINE_FIELDS);
            self.spilled.extend_from_slice(&self.inline);
        }
        self.spilled.push(e);
    }

    #[inline]
    fn as_slice(&self) -> &[Entry<'a>] {
        if self.spilled.is_empty() {
            self.inline.get(..self.len).unwrap_or_default()
        } else {
            &self.spilled
        }
    }
}

fn invalid(message: &str) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, message.to_string())
}

impl<'a> Parsed<'a> {
    /// Walks `body` once.
    pub fn parse(body: &'a RawDocument) -> Parsed<'a> {
        let mut parsed = Parsed {
            body,
            frame: None,
            entries: Entries::new(),
            malformed: None,
        };
        if plain_fields(body, &mut parsed.entries).is_none() {
            parsed = Self::walked(body);
        }
        parsed
    }

    /// [`Parsed::parse`] by bson's iterator.
    fn walked(body: &'a RawDocument) -> Parsed<'a> {
        let mut entries = Entries::new();
        let mut malformed = None;
        for el in body.iter() {
            match el {
                Ok((k, v)) => entries.push((k.as_str(), v)),
                Err(e) => {
                    malformed = Some(e.to_string());
                    break;
                }
            }
        }
        Parsed {
            body,
            frame: None,
            entries,
            malformed,
        }
    }

    /// [`Parsed::parse`] of a body that lies in `frame`, the message it was received in:
    /// [`Parsed::shared`] then hands the body out without a copy.
    pub fn parse_in(body: &'a RawDocument, frame: &'a Bytes) -> Parsed<'a> {
        let mut parsed = Self::parse(body);
        parsed.frame = Some(frame);
        parsed
    }

    /// The body as a shared slice of the message it was received in (`None` when it was not
    /// read from one, or does not lie in it: a decompressed or merged command).
    pub fn shared(&self) -> Option<Bytes> {
        let frame = self.frame?;
        let body = self.body.as_bytes();
        let start = (body.as_ptr() as usize).checked_sub(frame.as_ptr() as usize)?;
        let end = start.checked_add(body.len())?;
        (end <= frame.len()).then(|| frame.slice(start..end))
    }

    /// The body the fields were read from.
    pub fn body(&self) -> &'a RawDocument {
        self.body
    }

    /// The first field named `key`, as `RawDocument::get` finds it.
    pub fn get(&self, key: &str) -> Result<Option<RawBsonRef<'a>>, CommandError> {
        match self.find(key) {
            Some(v) => Ok(Some(v)),
            None => match &self.malformed {
                Some(m) => Err(invalid(m)),
                None => Ok(None),
            },
        }
    }

    /// The first field named `key`; `None` when absent or unreadable (as
    /// `body.get(key).ok().flatten()`: a field read before a malformed element is found,
    /// one after it is not in the table).
    #[inline]
    pub fn find(&self, key: &str) -> Option<RawBsonRef<'a>> {
        self.entries
            .as_slice()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// Whether the walk stopped at a malformed element (then a key not found before it is an
    /// `InvalidBSON` error rather than absent).
    pub fn is_malformed(&self) -> bool {
        self.malformed.is_some()
    }

    /// The first field (the command name and its value), as `body.iter().next()` gives it.
    pub fn first(&self) -> Option<Result<(&'a str, RawBsonRef<'a>), CommandError>> {
        match (self.entries.as_slice().first(), &self.malformed) {
            (Some(e), _) => Some(Ok(*e)),
            (None, Some(m)) => Some(Err(invalid(m))),
            (None, None) => None,
        }
    }

    /// The fields read, in order (those before the malformed element, if the walk met one).
    #[inline]
    pub fn fields(&self) -> &[(&'a str, RawBsonRef<'a>)] {
        self.entries.as_slice()
    }

    /// Every field in order, then the malformed element's error if the walk met one.
    pub fn iter(
        &self,
    ) -> impl Iterator<Item = Result<(&'a str, RawBsonRef<'a>), CommandError>> + '_ {
        self.entries
            .as_slice()
            .iter()
            .map(|e| Ok(*e))
            .chain(self.malformed.iter().map(|m| Err(invalid(m))))
    }
}

/// Reads the fields of `body` straight from its bytes into `out` (empty on entry); `None`
/// when it holds an element of another type than double, string, document, boolean, null, int32 or int64, or anything
/// bson's iterator might refuse (a key or length out of place, a boolean not 0 or 1, text that
/// is not UTF-8): [`Parsed::parse`] then walks it with bson's iterator. What this accepts,
/// the iterator reads to the same keys and values (bson's `RawIter` checks, each at least as
/// strictly: a key ends before the terminator, a string has a length of at least 1 and ends
/// with NUL, an embedded document passes `RawDocument::from_bytes`, every value ends before
/// the terminator, and the last element ends exactly there). After `None`, `out` holds what
/// was read before the element that stopped the direct read.
fn plain_fields<'a>(body: &'a RawDocument, out: &mut Entries<'a>) -> Option<()> {
    let b = body.as_bytes();
    let end = b.len().checked_sub(1)?;
    if b.get(end) != Some(&0) {
        return None;
    }
    let mut at = 4;
    while at < end {
        let tag = *b.get(at)?;
        let key_at = at + 1;
        let nul = b.get(key_at..end)?.iter().position(|&c| c == 0)?;
        let key = b.get(key_at..key_at + nul)?;
        // A generic argument's text comes from the list instead of being decoded.
        let key = match super::generic_argument(key) {
            Some(k) => k,
            None => std::str::from_utf8(key).ok()?,
        };
        let v = key_at + nul + 1;
        // The `n` bytes of the value, which must end before the terminator.
        let value = |n: usize| -> Option<&[u8]> {
            let e = v.checked_add(n)?;
            if e <= end { b.get(v..e) } else { None }
        };
        let le4 = || -> Option<[u8; 4]> { value(4)?.try_into().ok() };
        let le8 = || -> Option<[u8; 8]> { value(8)?.try_into().ok() };
        let (parsed, size) = match tag {
            0x01 => (RawBsonRef::Double(f64::from_le_bytes(le8()?)), 8),
            0x02 => {
                let n = usize::try_from(i32::from_le_bytes(le4()?)).ok()?;
                let all = value(n.checked_add(4)?)?;
                let (&0, text) = all.get(4..)?.split_last()? else {
                    return None;
                };
                (RawBsonRef::String(std::str::from_utf8(text).ok()?), n + 4)
            }
            0x03 => {
                let n = usize::try_from(i32::from_le_bytes(le4()?)).ok()?;
                let d = RawDocument::from_bytes(value(n)?).ok()?;
                (RawBsonRef::Document(d), n)
            }
            0x08 => match value(1)? {
                [0] => (RawBsonRef::Boolean(false), 1),
                [1] => (RawBsonRef::Boolean(true), 1),
                _ => return None,
            },
            0x0A => (RawBsonRef::Null, 0),
            0x10 => (RawBsonRef::Int32(i32::from_le_bytes(le4()?)), 4),
            0x12 => (RawBsonRef::Int64(i64::from_le_bytes(le8()?)), 8),
            _ => return None,
        };
        out.push((key, parsed));
        at = v + size;
    }
    (at == end).then_some(())
}

/// Where argument readers find a command's fields: its raw body, or the [`Parsed`] already
/// read from it (the same answers, see the module doc).
pub trait Args<'a>: Copy {
    /// The first field named `field`, or `InvalidBSON` for a malformed body.
    fn arg(self, field: &str) -> Result<Option<RawBsonRef<'a>>, CommandError>;
}

impl<'a> Args<'a> for &'a RawDocument {
    fn arg(self, field: &str) -> Result<Option<RawBsonRef<'a>>, CommandError> {
        self.get(field)
            .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))
    }
}

impl<'a> Args<'a> for &'a bson::RawDocumentBuf {
    fn arg(self, field: &str) -> Result<Option<RawBsonRef<'a>>, CommandError> {
        self.as_ref().arg(field)
    }
}

impl<'a> Args<'a> for &Parsed<'a> {
    fn arg(self, field: &str) -> Result<Option<RawBsonRef<'a>>, CommandError> {
        self.get(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn answers_as_raw_get() {
        let body = rawdoc! {"find": "c", "filter": {"a": 1}, "limit": 1, "limit": 2, "$db": "d"};
        let f = Parsed::parse(&body);
        for key in ["find", "filter", "limit", "$db", "lsid", ""] {
            assert_eq!(
                f.get(key).unwrap(),
                body.get(key).unwrap(),
                "{key}: the first occurrence, or none"
            );
        }
        assert_eq!(f.first().unwrap().unwrap().0, "find");
        assert_eq!(f.iter().count(), 5);
        assert_eq!(f.body().as_bytes(), body.as_bytes());
    }

    /// Bodies mutated byte by byte (every position, several values) and cut short: the
    /// direct read and bson's iterator give the same table, and the direct read is taken for
    /// the plain bodies.
    #[test]
    fn direct_read_answers_as_the_iterator() {
        let bodies = [
            rawdoc! {
                "find": "coll", "filter": {"a": {"$gt": 1}}, "limit": 10_i64, "skip": 2,
                "singleBatch": true, "ratio": 0.5, "comment": bson::RawBson::Null,
                "lsid": {"id": "x"}, "$db": "db", "": "", "é": "ü",
            },
            rawdoc! {"insert": "c", "documents": [{"a": 1}], "ordered": false, "$db": "d"},
            // More fields than the table holds in place; generic arguments and near misses.
            rawdoc! {
                "update": "c", "ordered": true, "lsid": {"id": 1}, "lsidx": 1, "$d": "x",
                "txnNumber": 5_i64, "autocommit": false, "startTransaction": true,
                "maxTimeMS": 10, "comment": "c", "$db": "d", "bypassDocumentValidation": false,
                "let": {"v": 1}, "writeConcern": {"w": 1}, "$clusterTime": {"t": 1},
            },
            rawdoc! {"x": 1},
            rawdoc! {},
        ];
        fn table<'a>(p: &Parsed<'a>) -> (Vec<(&'a str, RawBsonRef<'a>)>, Option<String>) {
            (p.entries.as_slice().to_vec(), p.malformed.clone())
        }
        for body in &bodies {
            // Both reads give bson's own fields, in order (beyond the table's inline part too).
            let fields: Vec<_> = body
                .iter()
                .map(|e| e.map(|(k, v)| (k.as_str(), v)).unwrap())
                .collect();
            assert_eq!(table(&Parsed::parse(body)).0, fields);
            assert_eq!(table(&Parsed::walked(body)).0, fields);
            let plain = !body
                .iter()
                .flatten()
                .any(|(_, v)| matches!(v, RawBsonRef::Array(_) | RawBsonRef::Timestamp(_)));
            assert_eq!(
                plain_fields(body, &mut Entries::new()).is_some(),
                plain,
                "{body:?}"
            );
            let bytes = body.as_bytes();
            let mut checked = 0;
            for at in 4..bytes.len() {
                for value in [
                    0u8, 1, 2, 3, 4, 5, 8, 0x0A, 0x10, 0x12, 0x11, 0x7F, 0xC3, 0xFF,
                ] {
                    let mut m = bytes.to_vec();
                    m[at] = value;
                    if let Ok(doc) = RawDocument::from_bytes(&m) {
                        checked += 1;
                        let (fast, slow) = (Parsed::parse(doc), Parsed::walked(doc));
                        assert_eq!(table(&fast), table(&slow), "byte {at} = {value}");
                    }
                }
            }
            assert!(checked > 0);
            // Shorter bodies ending in a terminator, with their length fixed up.
            for len in 5..bytes.len() {
                let mut m = bytes[..len].to_vec();
                m[len - 1] = 0;
                m[..4].copy_from_slice(&(len as i32).to_le_bytes());
                let doc = RawDocument::from_bytes(&m).unwrap();
                let (fast, slow) = (Parsed::parse(doc), Parsed::walked(doc));
                assert_eq!(table(&fast), table(&slow), "cut at {len}");
            }
        }
    }

    /// A body lying in its frame is handed out as the frame's bytes; one that does not (a
    /// copy of it) is not.
    #[test]
    fn shared_body_is_the_frames() {
        let body = rawdoc! {"find": "c", "$db": "d"};
        let mut frame = vec![9u8; 7];
        frame.extend_from_slice(body.as_bytes());
        frame.extend_from_slice(&[1, 2, 3]);
        let frame = Bytes::from(frame);
        let inside = RawDocument::from_bytes(&frame[7..7 + body.as_bytes().len()]).unwrap();
        let p = Parsed::parse_in(inside, &frame);
        assert_eq!(p.shared().unwrap(), body.as_bytes());
        assert_eq!(p.get("find").unwrap(), body.get("find").unwrap());
        assert!(Parsed::parse_in(&body, &frame).shared().is_none());
        assert!(Parsed::parse(inside).shared().is_none());
    }

    #[test]
    fn empty_body() {
        let body = rawdoc! {};
        let f = Parsed::parse(&body);
        assert!(f.first().is_none());
        assert_eq!(f.get("x").unwrap(), None);
    }

    #[test]
    fn malformed_body_errors_like_raw_get() {
        // {a: 1, b: "x"} with the string's length claiming more bytes than there are.
        let mut bytes = rawdoc! {"a": 1, "b": "x"}.into_bytes();
        let at = bytes.len() - 7; // the string's length prefix
        bytes[at] = 100;
        let body = RawDocument::from_bytes(&bytes).unwrap();
        assert!(body.get("b").is_err());
        let f = Parsed::parse(body);
        assert_eq!(f.get("a").unwrap(), body.get("a").unwrap());
        let e = f.get("b").unwrap_err();
        assert_eq!(e.code.code(), ErrorCode::InvalidBSON.code());
        assert!(f.get("zzz").is_err());
        assert!(f.iter().last().unwrap().is_err());
    }
}
