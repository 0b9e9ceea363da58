//! Values printed the way MongoDB prints them in messages (`BSONObj::toString`), e.g. the
//! `dup key: { _id: 1.0 }` of an E11000 error: numbers keep their type (`1` vs `1.0`),
//! strings are double-quoted, ObjectIds read `ObjectId('…')`.

use std::fmt::Write as _;

use bson::{RawBsonRef, RawDocument};

/// Renders one value.
pub fn value(v: RawBsonRef<'_>) -> String {
    let mut s = String::new();
    write_value(&mut s, v, 0);
    s
}

/// Renders a document as `{ a: 1, b: "x" }` (`{}` when empty).
pub fn document(d: &RawDocument) -> String {
    let mut s = String::new();
    write_document(&mut s, d, 0);
    s
}

const MAX_DEPTH: usize = 50;

fn write_document(s: &mut String, d: &RawDocument, depth: usize) {
    let mut first = true;
    s.push('{');
    for el in d.iter() {
        let Ok((k, v)) = el else {
            s.push_str(" <invalid>");
            break;
        };
        s.push_str(if first { " " } else { ", " });
        first = false;
        s.push_str(k.as_str());
        s.push_str(": ");
        write_value(s, v, depth + 1);
    }
    s.push_str(if first { "}" } else { " }" });
}

fn write_value(s: &mut String, v: RawBsonRef<'_>, depth: usize) {
    if depth > MAX_DEPTH {
        s.push_str("...");
        return;
    }
    match v {
        RawBsonRef::Double(d) => {
            if d.is_nan() {
                s.push_str("nan.0");
            } else if d.is_infinite() {
                s.push_str(if d > 0.0 { "inf.0" } else { "-inf.0" });
            } else if d.fract() == 0.0 && d.abs() < 1e16 {
                let _ = write!(s, "{d:.1}");
            } else {
                let _ = write!(s, "{d}");
            }
        }
        RawBsonRef::String(x) | RawBsonRef::Symbol(x) => {
            let _ = write!(s, "\"{x}\"");
        }
        RawBsonRef::Document(d) => write_document(s, d, depth),
        RawBsonRef::Array(a) => {
            let mut first = true;
            s.push('[');
            for el in a {
                let Ok(el) = el else { break };
                s.push_str(if first { " " } else { ", " });
                first = false;
                write_value(s, el, depth + 1);
            }
            s.push_str(if first { "]" } else { " ]" });
        }
        RawBsonRef::Binary(b) => {
            let _ = write!(s, "BinData({}, ", u8::from(b.subtype));
            for byte in b.bytes {
                let _ = write!(s, "{byte:02X}");
            }
            s.push(')');
        }
        RawBsonRef::Undefined => s.push_str("undefined"),
        RawBsonRef::ObjectId(o) => {
            let _ = write!(s, "ObjectId('{}')", o.to_hex());
        }
        RawBsonRef::Boolean(b) => s.push_str(if b { "true" } else { "false" }),
        RawBsonRef::DateTime(d) => {
            let _ = write!(s, "new Date({})", d.timestamp_millis());
        }
        RawBsonRef::Null => s.push_str("null"),
        RawBsonRef::RegularExpression(r) => {
            let _ = write!(s, "/{}/{}", r.pattern, r.options);
        }
        RawBsonRef::DbPointer(_) => s.push_str("DBPointer(...)"),
        RawBsonRef::JavaScriptCode(c) => s.push_str(c),
        RawBsonRef::JavaScriptCodeWithScope(c) => {
            let _ = write!(s, "CodeWScope( {}, ", c.code);
            write_document(s, c.scope, depth + 1);
            s.push(')');
        }
        RawBsonRef::Int32(i) => {
            let _ = write!(s, "{i}");
        }
        RawBsonRef::Timestamp(t) => {
            let _ = write!(s, "Timestamp({}, {})", t.time, t.increment);
        }
        RawBsonRef::Int64(i) => {
            let _ = write!(s, "{i}");
        }
        RawBsonRef::Decimal128(d) => {
            let _ = write!(s, "{d}");
        }
        RawBsonRef::MaxKey => s.push_str("MaxKey"),
        RawBsonRef::MinKey => s.push_str("MinKey"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn shell_style() {
        assert_eq!(document(&rawdoc! {"_id": 1}), "{ _id: 1 }");
        assert_eq!(document(&rawdoc! {"_id": 1.0}), "{ _id: 1.0 }");
        assert_eq!(document(&rawdoc! {"_id": "double"}), "{ _id: \"double\" }");
        assert_eq!(document(&rawdoc! {}), "{}");
        assert_eq!(
            document(&rawdoc! {"a": [1, {"b": null}], "c": true}),
            "{ a: [ 1, { b: null } ], c: true }"
        );
        assert_eq!(document(&rawdoc! {"x": 2.5}), "{ x: 2.5 }");
    }
}
