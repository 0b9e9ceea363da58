//! Values printed the way MongoDB prints them in messages (`BSONObj::toString`), e.g. the
//! `dup key: { _id: 1.0 }` of an E11000 error: numbers keep their type (`1` vs `1.0`),
//! strings are double-quoted, ObjectIds read `ObjectId('…')`.

use std::fmt::Write as _;

use bson::spec::ElementType;
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

/// MongoDB's `typeName` of an element type (the names `$type` and error messages use).
pub fn element_type_name(t: ElementType) -> &'static str {
    match t {
        ElementType::Double => "double",
        ElementType::String => "string",
        ElementType::EmbeddedDocument => "object",
        ElementType::Array => "array",
        ElementType::Binary => "binData",
        ElementType::Undefined => "undefined",
        ElementType::ObjectId => "objectId",
        ElementType::Boolean => "bool",
        ElementType::DateTime => "date",
        ElementType::Null => "null",
        ElementType::RegularExpression => "regex",
        ElementType::DbPointer => "dbPointer",
        ElementType::JavaScriptCode => "javascript",
        ElementType::Symbol => "symbol",
        ElementType::JavaScriptCodeWithScope => "javascriptWithScope",
        ElementType::Int32 => "int",
        ElementType::Timestamp => "timestamp",
        ElementType::Int64 => "long",
        ElementType::Decimal128 => "decimal",
        ElementType::MaxKey => "maxKey",
        ElementType::MinKey => "minKey",
    }
}

/// MongoDB's `typeName` of a value.
pub fn type_name(v: RawBsonRef<'_>) -> &'static str {
    element_type_name(v.element_type())
}

/// A double as C's `%g` prints it (6 significant digits), which is how MongoDB's
/// A double as MongoDB's C++ streams render it in strings and messages (`%g`: six
/// significant digits, trailing zeros trimmed).
pub fn format_g(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{x:.5e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.unsigned_abs())
    } else {
        let decimals = usize::try_from(5 - exp).unwrap_or(0);
        trim(&format!("{x:.decimals$}"))
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
