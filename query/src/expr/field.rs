//! Reading one top-level field of a raw document by walking its bytes
//! ([`cairn_storage::elements`]): each element's key is compared as bytes and its value
//! skipped by its type's length, without building the generic iterator's item for every
//! element before the one wanted.
//!
//! [`fields`] reads several top-level fields in one such walk (a `$group` reads its key's and
//! its accumulators' fields this way).
//!
//! Invariant: [`field`] returns exactly what [`crate::path::field`] returns (the first field
//! of that name, `None` when absent or when malformed BSON ends the search first): anything
//! this walk does not read plainly — a key that is not ASCII (its UTF-8 unchecked), a type
//! byte it does not size, a length that does not fit — is answered by that function instead.
//! Never panics.

use bson::{RawBsonRef, RawDocument};
use cairn_storage::elements::{Elements, Step};

/// The first field called `name` in `d` (see the module docs).
pub(crate) fn field<'a>(d: &'a RawDocument, name: &str) -> Option<RawBsonRef<'a>> {
    match walk(d.as_bytes(), name.as_bytes()) {
        Walk::Found(v, kind) => match value(kind, v) {
            Some(v) => Some(v),
            None => crate::path::field(d, name),
        },
        Walk::Absent => None,
        Walk::Unsure => crate::path::field(d, name),
    }
}

/// Most names [`fields`] reads in one walk.
pub(crate) const MAX_FIELDS: usize = 64;

/// [`field`] for each of `names` (distinct; at most [`MAX_FIELDS`]) in one walk over `d`:
/// `out[i]` becomes exactly `field(d, names[i])`. The walk stops once every name is found;
/// from anything it does not read plainly (see [`field`]) on, the names not yet found are
/// answered by [`crate::path::field`], as [`field`] answers them.
pub(crate) fn fields<'a>(
    d: &'a RawDocument,
    names: &[impl AsRef<str>],
    out: &mut [Option<RawBsonRef<'a>>],
) {
    let mut left: u64 = match names.len() {
        0 => return,
        n @ 1..MAX_FIELDS => (1u64 << n) - 1,
        MAX_FIELDS => u64::MAX,
        _ => {
            for (name, o) in names.iter().zip(out.iter_mut()) {
                *o = field(d, name.as_ref());
            }
            return;
        }
    };
    let mut elements = Elements::new(d.as_bytes());
    loop {
        match elements.step() {
            Step::Element(e) => {
                if !e.key.is_ascii() {
                    break;
                }
                for (i, (name, o)) in names.iter().zip(out.iter_mut()).enumerate() {
                    if left & (1 << i) != 0 && e.key == name.as_ref().as_bytes() {
                        left &= !(1 << i);
                        *o = match value(e.kind, e.value) {
                            Some(v) => Some(v),
                            None => crate::path::field(d, name.as_ref()),
                        };
                    }
                }
                if left == 0 {
                    return;
                }
                if !readable(e.kind, e.value) {
                    break;
                }
            }
            Step::End => {
                for (i, o) in out.iter_mut().enumerate().take(names.len()) {
                    if left & (1 << i) != 0 {
                        *o = None;
                    }
                }
                return;
            }
            Step::Unsure => break,
        }
    }
    for (i, (name, o)) in names.iter().zip(out.iter_mut()).enumerate() {
        if left & (1 << i) != 0 {
            *o = crate::path::field(d, name.as_ref());
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
    if let Walk::Found(v, 0x04) = walk(d.as_bytes(), name.as_bytes())
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

enum Walk<'a> {
    /// The value's bytes and its type.
    Found(&'a [u8], u8),
    /// No such field, every element read plainly.
    Absent,
    /// Leave it to the generic walk.
    Unsure,
}

fn walk<'a>(b: &'a [u8], name: &[u8]) -> Walk<'a> {
    let mut elements = Elements::new(b);
    loop {
        match elements.step() {
            Step::Element(e) => {
                if !e.key.is_ascii() {
                    return Walk::Unsure;
                }
                if e.key == name {
                    return Walk::Found(e.value, e.kind);
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

/// Whether the generic walk reads the value of type `kind` in `v` without an error.
fn readable(kind: u8, v: &[u8]) -> bool {
    match kind {
        0x01 | 0x10 | 0x12 | 0x08 | 0x0A | 0x02 | 0x03 => value(kind, v).is_some(),
        0x0D | 0x0E => value(0x02, v).is_some(),
        _ => true,
    }
}

/// The value of type `kind` in `v` (exactly its bytes); `None` for what the generic walk
/// should read.
fn value(kind: u8, v: &[u8]) -> Option<RawBsonRef<'_>> {
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
        0x02 => {
            // Length (including the NUL), the bytes, the NUL.
            let (nul, body) = v.get(4..)?.split_last()?;
            if *nul != 0 {
                return None;
            }
            RawBsonRef::String(std::str::from_utf8(body).ok()?)
        }
        0x03 => RawBsonRef::Document(RawDocument::from_bytes(v).ok()?),
        // No borrowed array can be made from bytes here: the generic walk reads arrays.
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use bson::{RawDocumentBuf, rawdoc};

    use super::*;

    /// [`fields`] over every subset of `names` in a few orders (and over all of them)
    /// answers as [`field`] does name by name.
    fn same_fields(d: &RawDocument, names: &[&str]) {
        let mut sets: Vec<Vec<&str>> = vec![names.to_vec(), names.iter().rev().copied().collect()];
        for w in 1..=3.min(names.len()) {
            sets.extend(names.windows(w).map(<[&str]>::to_vec));
        }
        for set in sets {
            let mut out = vec![Some(RawBsonRef::Null); set.len()];
            fields(d, &set, &mut out);
            let want: Vec<_> = set.iter().map(|n| field(d, n)).collect();
            assert_eq!(out, want, "{set:?} in {:?}", d.as_bytes());
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
        let docs = vec![rawdoc! {}, RawDocumentBuf::try_from(&full).unwrap(), dup];
        let names = [
            "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q",
            "r", "s", "é", "t", "zz", "",
        ];
        for d in &docs {
            for n in names {
                assert_eq!(field(d, n), crate::path::field(d, n), "{n} in {d:?}");
            }
            same_fields(d, &names);
        }
        // Malformed: a bad length inside, a truncated string, a non-UTF-8 key, a bad type.
        let good = rawdoc! {"a": 1, "s": "xy", "z": 3};
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
            for n in ["a", "s", "z", "q"] {
                assert_eq!(
                    field(&d, n),
                    crate::path::field(&d, n),
                    "{n} in {:?}",
                    d.as_bytes()
                );
            }
            same_fields(&d, &["a", "s", "z", "q"]);
            same_fields(&d, &["z", "a"]);
        }
    }
}
