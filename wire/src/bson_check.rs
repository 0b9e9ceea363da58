//! Structural validation of BSON received on the wire.
//!
//! `bson::RawDocument::from_bytes` only checks the outer length and terminator; element
//! access later fails lazily. Untrusted documents are therefore walked once, completely, by
//! [`validate`] before the rest of the server reads them, so that code downstream may treat
//! a malformed element as impossible (while still never panicking on one).
//!
//! Invariants checked, recursively for embedded documents, arrays and code-with-scope:
//! - every length field is within the enclosing document and large enough for its type;
//! - every document ends with its 0x00 terminator exactly at its declared end;
//! - element types are known BSON types; field names and strings are terminated and valid
//!   UTF-8 (stricter than MongoDB's default, which would let invalid UTF-8 through);
//! - booleans are 0 or 1; nesting never exceeds the depth limit (checked iteratively, so a
//!   hostile document cannot overflow the stack; the enclosing documents of ordinary depth
//!   are kept without an allocation).

use smallvec::SmallVec;

use crate::error::{Result, WireError};

fn invalid(msg: &str) -> WireError {
    WireError::InvalidBson(msg.to_string())
}

fn read_i32(buf: &[u8], at: usize) -> Result<i32> {
    let end = at
        .checked_add(4)
        .ok_or_else(|| invalid("length overflow"))?;
    match buf.get(at..end) {
        Some(&[a, b, c, d]) => Ok(i32::from_le_bytes([a, b, c, d])),
        _ => Err(invalid("truncated int32")),
    }
}

/// Checks that `s` is UTF-8. Keys and most strings are ASCII, which `is_ascii` confirms
/// several bytes at a time without the general decoder's per-call setup.
fn check_utf8(s: &[u8], what: &str) -> Result<()> {
    if s.is_ascii() || std::str::from_utf8(s).is_ok() {
        Ok(())
    } else {
        Err(invalid(what))
    }
}

/// Position just past the NUL terminating the C string starting at `at` (checked UTF-8).
fn skip_cstring(buf: &[u8], at: usize, limit: usize) -> Result<usize> {
    let region = buf
        .get(at..limit)
        .ok_or_else(|| invalid("truncated C string"))?;
    // One pass finds the NUL and whether any byte before it is not ASCII (only then is the
    // text decoded).
    let mut high = 0u8;
    for (nul, &b) in region.iter().enumerate() {
        if b == 0 {
            if high >= 0x80 {
                // Not ASCII (the scan just found out): only the decoder can tell.
                std::str::from_utf8(region.get(..nul).unwrap_or_default())
                    .map_err(|_| invalid("C string is not valid UTF-8"))?;
            }
            return Ok(at + nul + 1);
        }
        high |= b;
    }
    Err(invalid("unterminated C string"))
}

/// Position just past a BSON string (int32 length incl. NUL, bytes, NUL) starting at `at`.
fn skip_string(buf: &[u8], at: usize, limit: usize) -> Result<usize> {
    let len = read_i32(buf, at)?;
    if len < 1 {
        return Err(invalid("string length must be at least 1"));
    }
    let start = at + 4;
    let end = start
        .checked_add(len as usize)
        .filter(|&e| e <= limit)
        .ok_or_else(|| invalid("string extends past its document"))?;
    let bytes = buf
        .get(start..end)
        .ok_or_else(|| invalid("truncated string"))?;
    match bytes.split_last() {
        Some((0, body)) => {
            check_utf8(body, "string is not valid UTF-8")?;
            Ok(end)
        }
        _ => Err(invalid("string is not NUL-terminated")),
    }
}

/// Validates the declared length of a document starting at `at` against `limit`; returns its
/// end offset.
fn document_end(buf: &[u8], at: usize, limit: usize) -> Result<usize> {
    let len = read_i32(buf, at)?;
    if len < 5 {
        return Err(invalid("document length below 5"));
    }
    let end = at
        .checked_add(len as usize)
        .filter(|&e| e <= limit)
        .ok_or_else(|| invalid("document extends past its container"))?;
    if buf.get(end - 1) != Some(&0) {
        return Err(invalid("document is not NUL-terminated"));
    }
    Ok(end)
}

/// How many enclosing documents' ends the walk keeps without allocating: deeper than any
/// command a driver sends (a body, its `lsid`, `$clusterTime.signature`, a filter's operators).
const INLINE_DEPTH: usize = 16;

/// Validates that `buf` is exactly one well-formed BSON document nested at most `max_depth`
/// levels deep.
pub fn validate(buf: &[u8], max_depth: usize) -> Result<()> {
    let end = document_end(buf, 0, buf.len())?;
    if end != buf.len() {
        return Err(invalid("trailing bytes after document"));
    }
    // The document being walked (position of its next element, its end) and the ends of the
    // documents around it; a child starts where its parent's element value starts, and the
    // parent resumes at the child's end.
    let (mut pos, mut doc_end) = (4, end);
    let mut parents: SmallVec<[usize; INLINE_DEPTH]> = SmallVec::new();
    loop {
        let type_byte = *buf.get(pos).ok_or_else(|| invalid("truncated element"))?;
        if type_byte == 0 {
            if pos + 1 != doc_end {
                return Err(invalid("document terminator before its declared end"));
            }
            match parents.pop() {
                Some(parent_end) => {
                    pos = doc_end;
                    doc_end = parent_end;
                    continue;
                }
                None => return Ok(()),
            }
        }
        let value = skip_cstring(buf, pos + 1, doc_end - 1)?;
        let fixed = |n: usize| -> Result<usize> {
            let e = value + n;
            if e < doc_end {
                Ok(e)
            } else {
                Err(invalid("value extends past its document"))
            }
        };
        pos = match type_byte {
            0x01 | 0x09 | 0x11 | 0x12 => fixed(8)?, // double, date, timestamp, int64
            0x10 => fixed(4)?,                      // int32
            0x13 => fixed(16)?,                     // decimal128
            0x07 => fixed(12)?,                     // ObjectId
            0x08 => {
                let e = fixed(1)?;
                match buf.get(value) {
                    Some(0) | Some(1) => e,
                    _ => return Err(invalid("boolean must be 0 or 1")),
                }
            }
            0x06 | 0x0A | 0x7F | 0xFF => value, // undefined, null, MaxKey, MinKey
            0x02 | 0x0D | 0x0E => skip_string(buf, value, doc_end - 1)?, // string, code, symbol
            0x0B => {
                let p = skip_cstring(buf, value, doc_end - 1)?;
                skip_cstring(buf, p, doc_end - 1)?
            }
            0x0C => {
                let p = skip_string(buf, value, doc_end - 1)?;
                let e = p + 12;
                if e > doc_end - 1 {
                    return Err(invalid("DBPointer extends past its document"));
                }
                e
            }
            0x05 => {
                let len = read_i32(buf, value)?;
                if len < 0 {
                    return Err(invalid("negative binary length"));
                }
                let e = fixed(5 + len as usize)?;
                let subtype = buf.get(value + 4).copied().unwrap_or_default();
                if subtype == 0x02 {
                    let inner = read_i32(buf, value + 5)?;
                    if len < 4 || i64::from(inner) != i64::from(len) - 4 {
                        return Err(invalid("old binary subtype has a wrong inner length"));
                    }
                }
                e
            }
            0x03 | 0x04 => {
                let child_end = document_end(buf, value, doc_end - 1)?;
                // The walked document and its parents, with the child, exceed the limit.
                if parents.len() + 1 >= max_depth {
                    return Err(WireError::BsonTooDeep(max_depth));
                }
                parents.push(doc_end);
                pos = value + 4;
                doc_end = child_end;
                continue;
            }
            0x0F => {
                let total = read_i32(buf, value)?;
                if total < 14 {
                    return Err(invalid("code with scope too short"));
                }
                let cws_end = value
                    .checked_add(total as usize)
                    .filter(|&e| e < doc_end)
                    .ok_or_else(|| invalid("code with scope extends past its document"))?;
                let scope = skip_string(buf, value + 4, cws_end)?;
                let scope_end = document_end(buf, scope, cws_end)?;
                if scope_end != cws_end {
                    return Err(invalid("code with scope length mismatch"));
                }
                if parents.len() + 1 >= max_depth {
                    return Err(WireError::BsonTooDeep(max_depth));
                }
                // Validate the scope as a nested document; the parent resumes at its end,
                // which is the end of the code with scope.
                parents.push(doc_end);
                pos = scope + 4;
                doc_end = scope_end;
                continue;
            }
            other => return Err(invalid(&format!("unknown element type {other:#04x}"))),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{Binary, Bson, JavaScriptCodeWithScope, Regex, Timestamp, doc, spec::BinarySubtype};

    fn bytes(d: &bson::Document) -> Vec<u8> {
        bson::RawDocumentBuf::try_from(d).unwrap().into_bytes()
    }

    #[test]
    fn accepts_every_type() {
        let d = doc! {
            "double": 1.5, "string": "héllo", "doc": {"a": {"b": 1}}, "arr": [1, "x", [2]],
            "bin": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "undef": Bson::Undefined, "oid": bson::oid::ObjectId::new(), "t": true, "f": false,
            "date": bson::DateTime::from_millis(-5), "null": Bson::Null,
            "re": Regex { pattern: "a.*".try_into().unwrap(), options: "i".try_into().unwrap() },
            "code": Bson::JavaScriptCode("x".into()),
            "cws": JavaScriptCodeWithScope { code: "y".into(), scope: doc! {"z": 1} },
            "i32": 5_i32, "ts": Timestamp { time: 1, increment: 2 }, "i64": 7_i64,
            "dec": bson::Decimal128::from_bytes([0; 16]), "min": Bson::MinKey, "max": Bson::MaxKey,
            "sym": Bson::Symbol("s".into()),
        };
        validate(&bytes(&d), 200).unwrap();
    }

    #[test]
    fn rejects_lies_and_garbage() {
        let good = bytes(&doc! {"a": "xyz", "b": {"c": 1}});
        validate(&good, 200).unwrap();
        // every truncation is rejected
        for n in 0..good.len() {
            assert!(validate(&good[..n], 200).is_err(), "prefix {n}");
        }
        // every single-byte corruption either still validates or errors; never panics
        for i in 0..good.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut b = good.clone();
                b[i] = v;
                let _ = validate(&b, 200);
            }
        }
        // trailing bytes
        let mut t = good.clone();
        t.push(0);
        assert!(validate(&t, 200).is_err());
    }

    #[test]
    fn rejects_bad_values() {
        // bool 2
        let b = [9, 0, 0, 0, 0x08, b'a', 0, 2, 0];
        assert!(validate(&b, 200).is_err());
        // unknown type 0x20
        let b = [8, 0, 0, 0, 0x20, b'a', 0, 0];
        assert!(validate(&b, 200).is_err());
        // string with negative length
        let b = [13, 0, 0, 0, 0x02, b'a', 0, 0xff, 0xff, 0xff, 0xff, 0, 0];
        assert!(validate(&b, 200).is_err());
        // invalid UTF-8 in a key
        let b = [8, 0, 0, 0, 0x0A, 0xff, 0, 0];
        assert!(validate(&b, 200).is_err());
    }

    #[test]
    fn utf8_check_agrees_with_the_decoder() {
        let texts: [&[u8]; 9] = [
            b"plain",
            "héllo wörld".as_bytes(),
            "日本語 and ascii".as_bytes(),
            b"abc\x80def",
            b"\xc3",
            b"\xc0\xaf",
            b"\xed\xa0\x80",
            b"long ascii prefix before a bad byte \xff",
            b"",
        ];
        for t in texts {
            let utf8 = std::str::from_utf8(t).is_ok();
            // As a key (of a null element).
            let mut key = vec![0, 0, 0, 0, 0x0A];
            key.extend_from_slice(t);
            key.extend_from_slice(&[0, 0]);
            let n = key.len() as i32;
            key[..4].copy_from_slice(&n.to_le_bytes());
            assert_eq!(validate(&key, 200).is_ok(), utf8, "key {t:?}");
            // As a string value.
            let mut string = vec![0, 0, 0, 0, 0x02, b'a', 0];
            string.extend_from_slice(&(t.len() as i32 + 1).to_le_bytes());
            string.extend_from_slice(t);
            string.extend_from_slice(&[0, 0]);
            let n = string.len() as i32;
            string[..4].copy_from_slice(&n.to_le_bytes());
            assert_eq!(validate(&string, 200).is_ok(), utf8, "string {t:?}");
        }
    }

    #[test]
    fn depth_limit_is_enforced_without_recursion() {
        let mut d = doc! {"x": 1};
        for _ in 0..250 {
            d = doc! {"n": d};
        }
        let b = bytes(&d);
        assert_eq!(validate(&b, 200), Err(WireError::BsonTooDeep(200)));
        validate(&b, 300).unwrap();
    }

    /// Nesting across the inline part of the parents and the vector beyond it: a document of
    /// `levels` levels (each with a field after its child, so every parent resumes after
    /// its child ends) passes exactly when `levels` is within the limit, and a wrong byte
    /// after the deepest child is still found.
    #[test]
    fn depth_across_the_inline_parents() {
        for levels in 2..(3 * INLINE_DEPTH) {
            let mut d = doc! {"x": 1};
            for _ in 1..levels {
                d = doc! {"n": d, "after": "y"};
            }
            let b = bytes(&d);
            for limit in [levels - 1, levels, levels + 1] {
                assert_eq!(
                    validate(&b, limit).is_ok(),
                    levels <= limit,
                    "{levels} {limit}"
                );
            }
            // The outermost "after" string's terminator: corrupting it is found on the way out.
            let mut bad = b.clone();
            let at = bad.len() - 2;
            bad[at] = b'z';
            assert!(validate(&bad, levels).is_err(), "{levels}");
        }
    }

    #[test]
    fn old_binary_inner_length_checked() {
        let d =
            doc! {"b": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![4,0,0,0,1,2,3,4] }};
        let b = bytes(&d);
        validate(&b, 200).unwrap();
    }
}
