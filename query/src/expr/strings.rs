//! String operators with their own evaluation rules: `$regexFind $regexFindAll $regexMatch`
//! (on [`crate::regex::Regex`], PCRE-compatible), `$trim $ltrim $rtrim`, `$replaceOne
//! $replaceAll`, `$indexOfBytes $indexOfCP` (expression.cpp's `RegexExecutionState`,
//! `ExpressionTrim`, `ExpressionReplaceBase`, `ExpressionIndexOfBytes/CP`).
//!
//! Positions MongoDB reports in code points (`idx` of `$regexFind`, `$indexOfCP`) are counted
//! in Unicode scalar values of the UTF-8 input.
//!
//! Invariants: nothing here panics; all slicing is on char boundaries computed from the
//! string itself.

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf};

use super::eval::{Cx, eval};
use super::named::Named;
use super::parse::Node;
use super::value::{Num, Value};
use crate::error::{QueryError, Result};
use crate::regex::Regex;

fn loc(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::Location(code, msg.into())
}

fn show(v: &Value<'_>) -> String {
    v.get()
        .map(cairn_storage::display::value)
        .unwrap_or_else(|| "missing".into())
}

fn arg<'a>(args: &'a [Option<Node>], i: usize, cx: &mut Cx<'a>) -> Result<Value<'a>> {
    match args.get(i).and_then(Option::as_ref) {
        Some(n) => eval(n, cx),
        None => Ok(Value::Missing),
    }
}

// ---------------------------------------------------------------------------------------------
// Regular expressions
// ---------------------------------------------------------------------------------------------

/// The compiled pattern of a regex operator, or `None` when the input or regex is nullish.
fn compile<'a>(
    op: Named,
    args: &'a [Option<Node>],
    cx: &mut Cx<'a>,
) -> Result<Option<(Regex, String)>> {
    let name = op.name();
    let input = arg(args, 0, cx)?;
    let regex = arg(args, 1, cx)?;
    let options = arg(args, 2, cx)?;
    let text = match input.get() {
        None | Some(RawBsonRef::Null | RawBsonRef::Undefined) => None,
        Some(RawBsonRef::String(s)) => Some(s.to_string()),
        Some(_) => {
            return Err(loc(
                51104,
                format!("{name} needs 'input' to be of type string"),
            ));
        }
    };
    let (pattern, mut flags) = match regex.get() {
        None | Some(RawBsonRef::Null | RawBsonRef::Undefined) => (None, String::new()),
        Some(RawBsonRef::String(s)) => (Some(s.to_string()), String::new()),
        Some(RawBsonRef::RegularExpression(r)) => (
            Some(r.pattern.as_str().to_string()),
            r.options.as_str().to_string(),
        ),
        Some(_) => {
            return Err(loc(
                51105,
                format!("{name} needs 'regex' to be of type string or regex"),
            ));
        }
    };
    match options.get() {
        None | Some(RawBsonRef::Null | RawBsonRef::Undefined) => {}
        Some(RawBsonRef::String(o)) => {
            if !flags.is_empty() && !o.is_empty() {
                return Err(loc(
                    51107,
                    format!(
                        "{name}: found regex option(s) specified in both 'regex' and 'option' \
                         fields"
                    ),
                ));
            }
            if flags.is_empty() {
                flags = o.to_string();
            }
        }
        Some(_) => {
            return Err(loc(
                51106,
                format!("{name} needs 'options' to be of type string"),
            ));
        }
    }
    let Some(pattern) = pattern else {
        return Ok(None);
    };
    if pattern.contains('\0') {
        return Err(loc(
            51109,
            format!("{name}: regular expression cannot contain an embedded null byte"),
        ));
    }
    if flags.contains('\0') {
        return Err(loc(
            51110,
            format!("{name}: regular expression options cannot contain an embedded null byte"),
        ));
    }
    if let Some(bad) = flags.chars().find(|c| !"imsxu".contains(*c)) {
        return Err(loc(
            51108,
            format!("{name} invalid flag in regex options: {bad}"),
        ));
    }
    let compiled = Regex::new(&pattern, &flags).map_err(|e| {
        let reason = match e {
            QueryError::Location(_, m) => m
                .strip_prefix("Regular expression is invalid: ")
                .unwrap_or(&m)
                .to_string(),
            other => other.to_string(),
        };
        loc(51111, format!("Invalid Regex in {name}: {reason}"))
    })?;
    Ok(text.map(|t| (compiled, t)))
}

/// The `{match, idx, captures}` document of one match.
fn match_doc(text: &str, caps: &crate::regex::Captures) -> RawBson {
    let (s, e) = caps.whole;
    let idx = text.get(..s).map_or(0, |p| p.chars().count());
    let mut captures = RawArrayBuf::new();
    for g in &caps.groups {
        match g.and_then(|(a, b)| text.get(a..b)) {
            Some(t) => captures.push(t),
            None => captures.push(RawBsonRef::Null),
        }
    }
    let mut d = RawDocumentBuf::new();
    d.append(bson::raw::cstr!("match"), text.get(s..e).unwrap_or(""));
    d.append(
        bson::raw::cstr!("idx"),
        RawBson::Int32(i32::try_from(idx).unwrap_or(i32::MAX)),
    );
    d.append(bson::raw::cstr!("captures"), RawBson::Array(captures));
    RawBson::Document(d)
}

#[inline(never)]
pub(crate) fn regex_op<'a>(
    op: Named,
    args: &'a [Option<Node>],
    cx: &mut Cx<'a>,
) -> Result<Value<'a>> {
    let compiled = compile(op, args, cx)?;
    let Some((re, text)) = compiled else {
        return Ok(match op {
            Named::RegexMatch => Value::bool(false),
            Named::RegexFindAll => Value::Owned(RawBson::Array(RawArrayBuf::new())),
            _ => Value::null(),
        });
    };
    match op {
        Named::RegexMatch => Ok(Value::bool(re.captures_at(&text, 0).is_some())),
        Named::RegexFind => Ok(match re.captures_at(&text, 0) {
            Some(c) => Value::Owned(match_doc(&text, &c)),
            None => Value::null(),
        }),
        _ => {
            let mut out = RawArrayBuf::new();
            let mut pos = 0usize;
            let mut total = 0usize;
            while pos <= text.len() {
                let Some(c) = re.captures_at(&text, pos) else {
                    break;
                };
                let doc = match_doc(&text, &c);
                total += doc
                    .as_raw_bson_ref()
                    .as_document()
                    .map_or(0, |d| d.as_bytes().len());
                if total > 64 * 1024 * 1024 {
                    return Err(loc(
                        51151,
                        "$regexFindAll: the size of buffer to store output exceeded the 64MB \
                         limit",
                    ));
                }
                out.push(doc);
                let (s, e) = c.whole;
                pos = if e > s {
                    e
                } else {
                    // An empty match: continue after the next character.
                    match text.get(s..).and_then(|r| r.chars().next()) {
                        Some(ch) => s + ch.len_utf8(),
                        None => break,
                    }
                };
            }
            Ok(Value::Owned(RawBson::Array(out)))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Trimming and replacing
// ---------------------------------------------------------------------------------------------

/// `kDefaultTrimWhitespaceChars`.
const DEFAULT_TRIM: &[char] = &[
    '\0', ' ', '\t', '\n', '\x0B', '\x0C', '\r', '\u{00A0}', '\u{1680}', '\u{2000}', '\u{2001}',
    '\u{2002}', '\u{2003}', '\u{2004}', '\u{2005}', '\u{2006}', '\u{2007}', '\u{2008}', '\u{2009}',
    '\u{200A}',
];

#[inline(never)]
pub(crate) fn trim<'a>(op: Named, args: &'a [Option<Node>], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let name = op.name();
    let input = arg(args, 0, cx)?;
    if input.nullish() {
        return Ok(Value::null());
    }
    let Some(RawBsonRef::String(s)) = input.get() else {
        return Err(loc(
            50699,
            format!(
                "{name} requires its input to be a string, got {} (of type {}) instead.",
                show(&input),
                input.type_name()
            ),
        ));
    };
    let s = s.to_string();
    let chars: Vec<char> = match args.get(1).and_then(Option::as_ref) {
        None => DEFAULT_TRIM.to_vec(),
        Some(n) => {
            let c = eval(n, cx)?;
            if c.nullish() {
                return Ok(Value::null());
            }
            let Some(RawBsonRef::String(cs)) = c.get() else {
                return Err(loc(
                    50700,
                    format!(
                        "{name} requires 'chars' to be a string, got {} (of type {}) instead.",
                        show(&c),
                        c.type_name()
                    ),
                ));
            };
            cs.chars().collect()
        }
    };
    let set = |c: char| chars.contains(&c);
    let out = match op {
        Named::LTrim => s.trim_start_matches(set),
        Named::RTrim => s.trim_end_matches(set),
        _ => s.trim_matches(set),
    };
    Ok(Value::string(out))
}

#[inline(never)]
pub(crate) fn replace<'a>(
    op: Named,
    args: &'a [Option<Node>],
    cx: &mut Cx<'a>,
) -> Result<Value<'a>> {
    let name = op.name();
    let mut parts = Vec::with_capacity(3);
    let mut null = false;
    for (i, what) in ["input", "find", "replacement"].iter().enumerate() {
        let v = arg(args, i, cx)?;
        if v.nullish() {
            null = true;
            parts.push(String::new());
            continue;
        }
        let Some(RawBsonRef::String(s)) = v.get() else {
            return Err(loc(
                51746,
                format!(
                    "{name} requires that '{what}' be a string, found: {}",
                    show(&v)
                ),
            ));
        };
        parts.push(s.to_string());
    }
    if null {
        return Ok(Value::null());
    }
    let (input, find, replacement) = (&parts[0], &parts[1], &parts[2]);
    let out = if op == Named::ReplaceAll {
        input.replace(find.as_str(), replacement)
    } else {
        input.replacen(find.as_str(), replacement, 1)
    };
    Ok(Value::string(out))
}

// ---------------------------------------------------------------------------------------------
// $indexOfBytes, $indexOfCP
// ---------------------------------------------------------------------------------------------

/// `uassertIfNotIntegralAndNonNegative`.
fn index_arg(v: &Value<'_>, op: &str, what: &str) -> Result<usize> {
    let Some(i) = v.num().and_then(Num::exact_i32) else {
        return Err(loc(
            40096,
            format!(
                "{op}requires an integral {what}, found a value of type: {}, with value: {}",
                v.type_name(),
                show(v)
            ),
        ));
    };
    if i < 0 {
        return Err(loc(
            40097,
            format!("{op} requires a nonnegative {what}, found: {}", show(v)),
        ));
    }
    Ok(usize::try_from(i).unwrap_or(0))
}

fn find_bytes(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() {
        return (from <= hay.len()).then_some(from);
    }
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

#[inline(never)]
pub(crate) fn index_of<'a>(cp: bool, args: &'a [Node], cx: &mut Cx<'a>) -> Result<Value<'a>> {
    let name = if cp { "$indexOfCP" } else { "$indexOfBytes" };
    let (c1, c2) = if cp { (40093, 40094) } else { (40091, 40092) };
    let get = |i: usize| args.get(i);
    let input = match get(0) {
        Some(n) => eval(n, cx)?,
        None => Value::Missing,
    };
    if input.nullish() {
        return Ok(Value::null());
    }
    let Some(RawBsonRef::String(s)) = input.get() else {
        return Err(loc(
            c1,
            format!(
                "{name} requires a string as the first argument, found: {}",
                input.type_name()
            ),
        ));
    };
    let s = s.to_string();
    let token = match get(1) {
        Some(n) => eval(n, cx)?,
        None => Value::Missing,
    };
    let Some(RawBsonRef::String(t)) = token.get() else {
        return Err(loc(
            c2,
            format!(
                "{name} requires a string as the second argument, found: {}",
                token.type_name()
            ),
        ));
    };
    let t = t.to_string();
    let mut start = 0usize;
    if let Some(n) = get(2) {
        start = index_arg(&eval(n, cx)?, name, "starting index")?;
    }
    let mut end = usize::MAX;
    if let Some(n) = get(3) {
        end = index_arg(&eval(n, cx)?, name, "ending index")?;
    }
    if !cp {
        let end = end.min(s.len());
        if start > s.len() || end < start {
            return Ok(Value::int(-1));
        }
        let hay = s.as_bytes().get(..end).unwrap_or(&[]);
        return Ok(Value::int(
            find_bytes(hay, t.as_bytes(), start)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(-1),
        ));
    }
    let chars: Vec<char> = s.chars().collect();
    let needle: Vec<char> = t.chars().collect();
    let end = end.min(chars.len());
    if start > chars.len() || end < start {
        return Ok(Value::int(-1));
    }
    let window = chars.get(..end).unwrap_or(&[]);
    let found = if needle.is_empty() {
        Some(start)
    } else {
        window
            .get(start..)
            .unwrap_or(&[])
            .windows(needle.len())
            .position(|w| w == needle.as_slice())
            .map(|p| p + start)
    };
    Ok(Value::int(
        found.and_then(|p| i32::try_from(p).ok()).unwrap_or(-1),
    ))
}
