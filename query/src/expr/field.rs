//! Reading one top-level field of a raw document by walking its bytes: each element's key is
//! compared as bytes and its value skipped by its type's length, without building the
//! generic iterator's item for every element before the one wanted.
//!
//! Invariant: [`field`] returns exactly what [`crate::path::field`] returns (the first field
//! of that name, `None` when absent or when malformed BSON ends the search first): anything
//! this walk does not read plainly — a key that is not ASCII (its UTF-8 unchecked), a type
//! byte it does not size, a length that does not fit — is answered by that function instead.
//! Never panics.

use bson::{RawBsonRef, RawDocument};

/// The first field called `name` in `d` (see the module docs).
pub(crate) fn field<'a>(d: &'a RawDocument, name: &str) -> Option<RawBsonRef<'a>> {
    match walk(d.as_bytes(), name.as_bytes()) {
        Walk::Found(start, end, kind) => {
            match d.as_bytes().get(start..end).and_then(|v| value(kind, v)) {
                Some(v) => Some(v),
                None => crate::path::field(d, name),
            }
        }
        Walk::Absent => None,
        Walk::Unsure => crate::path::field(d, name),
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
    if let Walk::Found(start, end, 0x04) = walk(d.as_bytes(), name.as_bytes())
        && let Some(a) = d
            .as_bytes()
            .get(start..end)
            .and_then(|v| RawDocument::from_bytes(v).ok())
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

enum Walk {
    /// The value's bytes and its type.
    Found(usize, usize, u8),
    /// No such field, every element read plainly.
    Absent,
    /// Leave it to the generic walk.
    Unsure,
}

fn walk(b: &[u8], name: &[u8]) -> Walk {
    let Some(end) = b.len().checked_sub(1) else {
        return Walk::Unsure;
    };
    let mut off = 4usize;
    while off < end {
        let Some(&kind) = b.get(off) else {
            return Walk::Unsure;
        };
        let key_start = off + 1;
        let Some(rest) = b.get(key_start..end) else {
            return Walk::Unsure;
        };
        let Some(key_len) = rest.iter().position(|&c| c == 0) else {
            return Walk::Unsure;
        };
        let key = rest.get(..key_len).unwrap_or_default();
        if !key.is_ascii() {
            return Walk::Unsure;
        }
        let v = key_start + key_len + 1;
        let Some(len) = b.get(v..end).and_then(|r| value_len(kind, r)) else {
            return Walk::Unsure;
        };
        if key == name {
            return Walk::Found(v, v + len, kind);
        }
        // The generic walk reads every value before the one wanted, and stops at one it
        // cannot read: so must this one.
        if !readable(kind, b.get(v..v + len).unwrap_or_default()) {
            return Walk::Unsure;
        }
        off = v + len;
    }
    if off == end {
        Walk::Absent
    } else {
        Walk::Unsure
    }
}

fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    let s: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(i32::from_le_bytes(s))
}

/// The length of a value of type `kind` at the start of `r` (`None`: not sized here, or
/// longer than `r`).
fn value_len(kind: u8, r: &[u8]) -> Option<usize> {
    let len = match kind {
        0x01 | 0x09 | 0x11 | 0x12 => 8,
        0x10 => 4,
        0x08 => 1,
        0x07 => 12,
        0x13 => 16,
        0x0A | 0x06 | 0xFF | 0x7F => 0,
        0x02 | 0x0D | 0x0E => 4 + usize::try_from(i32_at(r, 0)?).ok()?,
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
        }
    }
}
