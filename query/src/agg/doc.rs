//! Small document edits the stages share: reading a nested field without entering arrays
//! (MongoDB's `Document::getNestedField`) and setting or removing one, creating (or
//! replacing non-document values with) sub-documents along the way
//! (`MutableDocument::setNestedField`). Field order is kept; a new field goes last.
//! [`with_top_level`] does the top-level case of setting one field in one pass over the raw
//! bytes: the other elements are copied as they are, byte for byte, and the new value is
//! written straight into the output (a document, or an array of documents), never built
//! apart first. Its elements come from [`RawElements`], which reads them with the light walk
//! of [`cairn_storage::elements`] and hands over to the bson crate's iterator at anything that
//! walk does not read plainly.
//!
//! Invariant: never panics; recursion is bounded by the path length.

use bson::raw::CStr;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::elements::{Elements, Step};

use crate::error::{QueryError, Result};

/// A value [`with_top_level`] writes.
pub(crate) enum NewValue<'a, I: Iterator<Item = &'a RawDocument>> {
    /// A document.
    Doc(&'a RawDocument),
    /// An array of these documents.
    Docs(I),
    /// Any value as its element type byte and value bytes ([`RawElements`] gives them).
    Raw(u8, &'a [u8]),
}

/// The elements of a document or array as `(key, element type byte, value bytes)`, read from
/// the raw bytes (malformed input: an error item, then the end).
///
/// The elements are read by the light walk ([`cairn_storage::elements`]) while it reads them
/// plainly: an ASCII key, a value it sizes, and for a string (code, symbol) the length of at
/// least one and the NUL the bson crate's element iterator checks — so each element is the one
/// that iterator gives. At anything else the walk hands over to that iterator, which skips the
/// elements already given and reports what it finds.
pub(crate) struct RawElements<'a> {
    doc: &'a RawDocument,
    /// The light walk, until it hands over.
    light: Option<Elements<'a>>,
    /// Elements the light walk gave.
    given: usize,
    /// The generic walk, once the light one handed over.
    iter: Option<bson::raw::RawIter<'a>>,
    off: usize,
}

impl<'a> RawElements<'a> {
    /// The elements of `doc`.
    pub(crate) fn new(doc: &'a RawDocument) -> RawElements<'a> {
        RawElements {
            doc,
            light: Some(Elements::new(doc.as_bytes())),
            given: 0,
            iter: None,
            off: 4,
        }
    }

    /// The elements of `doc` read by the generic walk alone.
    #[cfg(test)]
    fn generic(doc: &'a RawDocument) -> RawElements<'a> {
        RawElements {
            doc,
            light: None,
            given: 0,
            iter: Some(doc.iter_elements()),
            off: 4,
        }
    }

    /// The next element as the light walk reads it: `Some(None)` at the end, `None` once it
    /// has handed over to the generic walk.
    fn light_next(&mut self) -> Option<Option<RawElement<'a>>> {
        let w = self.light.as_mut()?;
        let start = w.offset();
        match w.step_ascii() {
            Step::End => return Some(None),
            Step::Element(e) if e.string_framed() => {
                if let (Ok(key), Some(raw)) = (
                    std::str::from_utf8(e.key),
                    self.doc.as_bytes().get(start..w.offset()),
                ) {
                    self.given += 1;
                    return Some(Some(RawElement {
                        key,
                        raw,
                        value_at: 2 + key.len(),
                    }));
                }
            }
            _ => {}
        }
        self.light = None;
        self.off = start;
        let mut iter = self.doc.iter_elements();
        for _ in 0..self.given {
            iter.next();
        }
        self.iter = Some(iter);
        None
    }
}

/// One raw element: its key, the whole element's bytes, and where its value starts in them.
pub(crate) struct RawElement<'a> {
    /// The key.
    pub key: &'a str,
    /// Type byte, key, NUL and value.
    pub raw: &'a [u8],
    /// The value's offset in `raw`.
    pub value_at: usize,
}

impl<'a> RawElement<'a> {
    /// The element type byte.
    pub(crate) fn kind(&self) -> u8 {
        self.raw.first().copied().unwrap_or(0)
    }

    /// The value bytes.
    pub(crate) fn value_bytes(&self) -> &'a [u8] {
        self.raw.get(self.value_at..).unwrap_or_default()
    }
}

impl<'a> Iterator for RawElements<'a> {
    type Item = Result<RawElement<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(el) = self.light_next() {
            return el.map(Ok);
        }
        let el = match self.iter.as_mut()?.next()? {
            Ok(el) => el,
            Err(e) => return Some(Err(QueryError::BadValue(e.to_string()))),
        };
        let k = el.key().as_str();
        let value_at = 2 + k.len();
        let len = value_at + el.size();
        let Some(raw) = self.doc.as_bytes().get(self.off..self.off + len) else {
            return Some(Err(QueryError::BadValue("malformed document".into())));
        };
        self.off += len;
        Some(Ok(RawElement {
            key: k,
            raw,
            value_at,
        }))
    }
}

/// `doc` with its top-level field `name` (its first occurrence, or a new last field) set to
/// `value`, keeping only the other fields `keep` accepts — what [`set_nested`] gives for a
/// one-component path, built by copying raw elements. Errors: malformed `doc` (BadValue), an
/// invalid field name, or a result over `i32::MAX` bytes.
pub(crate) fn with_top_level<'a, I: Iterator<Item = &'a RawDocument>>(
    doc: &RawDocument,
    name: &str,
    value: NewValue<'a, I>,
    keep: impl Fn(&str) -> bool,
) -> Result<RawDocumentBuf> {
    let mut out: Vec<u8> = Vec::with_capacity(doc.as_bytes().len() + 64);
    write_top_level(&mut out, doc, name, value, keep)?;
    RawDocumentBuf::from_bytes(out).map_err(|e| QueryError::BadValue(e.to_string()))
}

/// [`with_top_level`] written into `out` (cleared first), a whole document.
pub(crate) fn write_top_level<'a, I: Iterator<Item = &'a RawDocument>>(
    out: &mut Vec<u8>,
    doc: &RawDocument,
    name: &str,
    value: NewValue<'a, I>,
    keep: impl Fn(&str) -> bool,
) -> Result<()> {
    let name_key = key(name)?;
    out.clear();
    out.extend_from_slice(&[0; 4]);
    let mut value = Some(value);
    for el in RawElements::new(doc) {
        let el = el?;
        if el.key == name
            && let Some(v) = value.take()
        {
            write_value(out, name_key.as_str(), v)?;
        } else if keep(el.key) {
            out.extend_from_slice(el.raw);
        }
    }
    if let Some(v) = value.take() {
        write_value(out, name_key.as_str(), v)?;
    }
    out.push(0);
    set_length(out, 0)
}

/// Writes the element `name: value`.
fn write_value<'a, I: Iterator<Item = &'a RawDocument>>(
    out: &mut Vec<u8>,
    name: &str,
    value: NewValue<'a, I>,
) -> Result<()> {
    match value {
        NewValue::Raw(kind, bytes) => {
            out.push(kind);
            out.extend_from_slice(name.as_bytes());
            out.push(0);
            out.extend_from_slice(bytes);
        }
        NewValue::Doc(d) => {
            out.push(0x03);
            out.extend_from_slice(name.as_bytes());
            out.push(0);
            out.extend_from_slice(d.as_bytes());
        }
        NewValue::Docs(items) => {
            out.push(0x04);
            out.extend_from_slice(name.as_bytes());
            out.push(0);
            let start = out.len();
            out.extend_from_slice(&[0; 4]);
            let mut index = itoa::Buffer::new();
            for (i, d) in items.enumerate() {
                out.push(0x03);
                out.extend_from_slice(index.format(i).as_bytes());
                out.push(0);
                out.extend_from_slice(d.as_bytes());
            }
            out.push(0);
            set_length(out, start)?;
        }
    }
    Ok(())
}

fn too_big() -> QueryError {
    QueryError::BadValue("document too large".into())
}

/// Writes the length of the document that starts at `start` and ends `out`.
fn set_length(out: &mut [u8], start: usize) -> Result<()> {
    let len = i32::try_from(out.len() - start).map_err(|_| too_big())?;
    if let Some(slot) = out.get_mut(start..start + 4) {
        slot.copy_from_slice(&len.to_le_bytes());
    }
    Ok(())
}

/// A field name as a BSON key.
pub(crate) fn key(name: &str) -> Result<&CStr> {
    <&CStr>::try_from(name).map_err(|e| QueryError::BadValue(format!("invalid field name: {e}")))
}

/// The value at `path`, entering documents only (an array on the way gives `None`).
pub(crate) fn get_nested<'a, S: AsRef<str>>(
    doc: &'a RawDocument,
    path: &[S],
) -> Option<RawBsonRef<'a>> {
    let (first, rest) = path.split_first()?;
    let v = crate::expr::field::field(doc, first.as_ref())?;
    if rest.is_empty() {
        return Some(v);
    }
    match v {
        RawBsonRef::Document(d) => get_nested(d, rest),
        _ => None,
    }
}

/// `doc` with the value at `path` set to `value` (removed when `None`).
pub(crate) fn set_nested<S: AsRef<str>>(
    doc: &RawDocument,
    path: &[S],
    value: Option<RawBsonRef<'_>>,
) -> Result<RawDocumentBuf> {
    let Some((first, rest)) = path.split_first() else {
        return Ok(doc.to_owned());
    };
    let first = first.as_ref();
    let mut out = RawDocumentBuf::new();
    let mut found = false;
    for el in doc.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        if k.as_str() != first || found {
            out.append(k, v);
            continue;
        }
        found = true;
        if rest.is_empty() {
            if let Some(nv) = value {
                out.append(k, nv);
            }
            continue;
        }
        let sub = match v {
            RawBsonRef::Document(d) => set_nested(d, rest, value)?,
            _ => match value {
                Some(_) => set_nested(&RawDocumentBuf::new(), rest, value)?,
                None => {
                    out.append(k, v);
                    continue;
                }
            },
        };
        out.append(k, sub);
    }
    if !found && value.is_some() {
        let k = key(first)?;
        if rest.is_empty() {
            if let Some(nv) = value {
                out.append(k, nv);
            }
        } else {
            out.append(k, set_nested(&RawDocumentBuf::new(), rest, value)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use bson::{RawArrayBuf, RawBson, rawdoc};

    use super::*;

    /// One element as owned parts (key, bytes, value offset), or the error's text.
    type Item = std::result::Result<(String, Vec<u8>, usize), String>;

    /// What a walk gives, comparable: each element's key, bytes and value offset, or the
    /// error.
    fn items(it: RawElements<'_>) -> Vec<Item> {
        it.map(|r| {
            r.map(|e| (e.key.to_string(), e.raw.to_vec(), e.value_at))
                .map_err(|e| format!("{e:?}"))
        })
        .collect()
    }

    /// The light walk gives the elements (and errors) the generic walk gives: every type,
    /// non-ASCII keys and strings, and every one-byte corruption of a small document.
    #[test]
    fn raw_elements_read_lightly_equal_the_generic_walk() {
        let full = bson::doc! {"a": 1, "b": 2_i64, "c": 2.5, "d": "str", "e": true, "f": null,
        "g": {"x": 1}, "h": [1, "y"], "i": bson::oid::ObjectId::new(), "s": "",
        "j": bson::DateTime::from_millis(5), "k": bson::Decimal128::from_bytes([1; 16]),
        "l": bson::Timestamp { time: 1, increment: 2 }, "m": bson::Bson::MinKey,
        "n": bson::Bson::MaxKey, "o": bson::Bson::Undefined, "u": "ü",
        "r": bson::Bson::Symbol("s".into()), "t": bson::Bson::JavaScriptCode("c".into()),
        "q": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2] },
        "é": 1, "z": "last"};
        let full = RawDocumentBuf::try_from(&full).unwrap();
        let plain = rawdoc! {"a": 1, "s": "xy", "b": true, "d": {"e": [1]}, "n": null, "z": 3};
        assert_eq!(items(RawElements::new(&plain)).len(), 6);
        let mut docs = vec![rawdoc! {}, full, plain.clone()];
        for i in 4..plain.as_bytes().len() {
            for byte in [0u8, 1, 4, 5, 0x80, 0xFF, 0x7F, 0x02, 0x03, 0x10] {
                let mut b = plain.as_bytes().to_vec();
                if let Some(x) = b.get_mut(i) {
                    *x = byte;
                }
                if let Ok(d) = RawDocumentBuf::from_bytes(b) {
                    docs.push(d);
                }
            }
        }
        for d in &docs {
            assert_eq!(
                items(RawElements::new(d)),
                items(RawElements::generic(d)),
                "{:?}",
                d.as_bytes()
            );
        }
    }

    /// The raw builder gives what `set_nested` gives: the field replaced in place (its first
    /// occurrence) or appended, other fields copied byte for byte, arrays indexed "0", "1", …
    #[test]
    fn with_top_level_is_set_nested() {
        let m1 = rawdoc! {"x": 1, "s": "str"};
        let m2 = rawdoc! {"y": [1, {"z": null}]};
        let docs = [
            rawdoc! {},
            rawdoc! {"a": 1},
            rawdoc! {"_id": 1, "c": "old", "d": {"e": [1, 2]}, "c": 2.5},
            rawdoc! {"_id": 1, "b": true, "s": "x", "o": bson::oid::ObjectId::new(), "n": null},
        ];
        for doc in &docs {
            for n in [0usize, 1, 2, 11] {
                let items: Vec<&RawDocument> = (0..n)
                    .map(|i| if i % 2 == 0 { &*m1 } else { &*m2 })
                    .collect();
                let mut arr = RawArrayBuf::new();
                for d in &items {
                    arr.push(*d);
                }
                let want =
                    set_nested(doc, &["c"], Some(RawBson::Array(arr).as_raw_bson_ref())).unwrap();
                let got =
                    with_top_level(doc, "c", NewValue::Docs(items.into_iter()), |_| true).unwrap();
                assert_eq!(got.as_bytes(), want.as_bytes(), "{doc:?} {n}");
            }
            let want = set_nested(doc, &["c"], Some(RawBsonRef::Document(&m2))).unwrap();
            let got = with_top_level(
                doc,
                "c",
                NewValue::<std::iter::Empty<&RawDocument>>::Doc(&m2),
                |_| true,
            )
            .unwrap();
            assert_eq!(got.as_bytes(), want.as_bytes(), "{doc:?}");
            let got = with_top_level(
                doc,
                "c",
                NewValue::<std::iter::Empty<&RawDocument>>::Doc(&m2),
                |k| k == "_id",
            )
            .unwrap();
            for el in got.iter() {
                let (k, _) = el.unwrap();
                assert!(k.as_str() == "_id" || k.as_str() == "c", "{got:?}");
            }
        }
    }
}
