//! A mutable view of a document for the update engine (MongoDB's `mutablebson::Document`).
//!
//! A [`Value`] is either a borrowed raw value (from the stored document or the parsed update),
//! an owned computed value, or an *expanded* container whose children are themselves
//! [`Value`]s. Containers are expanded lazily, only along the paths an update walks, so an
//! update copies nothing it does not touch; [`Value::write_document`] serializes the result.
//!
//! Appending to a stored array (`$push` without `$sort`/`$slice`/`$position` effects,
//! `$addToSet`) need not expand it: [`append_elements`] copies the array's bytes and writes
//! the new elements after them with the next index keys, which is what expanding and
//! serializing writes whenever the stored keys are the canonical `"0"`, `"1"`, …
//! ([`canonical_len`]; otherwise the caller expands, and serializing renumbers them). The
//! result is a [`Value::Held`].
//!
//! Invariants:
//! - expanding a container never changes what it serializes to;
//! - field order is kept exactly (new fields are appended, removed ones leave no gap);
//! - malformed BSON met while expanding is an error, never a panic;
//! - recursion (serialization, depth checks) only follows expanded containers, whose depth is
//!   bounded by the update's path lengths (see [`super::tree::MAX_PATH_PARTS`]).

use std::borrow::Cow;

use bson::raw::CStr;
use bson::{RawArray, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::display;
pub(crate) use cairn_storage::display::type_name as raw_type_name;
use cairn_storage::elements::value_len;

use crate::error::{QueryError, Result};

/// A value inside a document being updated.
#[derive(Debug, Clone)]
pub(crate) enum Value<'a> {
    /// A value borrowed from the original document or the update (containers not expanded).
    Raw(RawBsonRef<'a>),
    /// A computed value.
    Owned(RawBson),
    /// An expanded document.
    Doc(Vec<(Cow<'a, str>, Value<'a>)>),
    /// An expanded array.
    Arr(Vec<Value<'a>>),
    /// A computed value held as the one field of the document `{"": value}` (built on bytes
    /// by [`append_elements`]; bson has no owned array made from bytes without a walk).
    Held(RawDocumentBuf),
}

/// The value a [`Value::Held`] holder holds.
fn held(holder: &RawDocument) -> Result<RawBsonRef<'_>> {
    match holder.iter().next() {
        Some(el) => Ok(el.map_err(malformed)?.1),
        None => Err(malformed("empty value holder")),
    }
}

pub(crate) fn malformed(e: impl std::fmt::Display) -> QueryError {
    QueryError::BadValue(format!("invalid BSON in document: {e}"))
}

fn cstr(name: &str) -> Result<&CStr> {
    <&CStr>::try_from(name)
        .map_err(|_| QueryError::BadValue(format!("field name contains a null byte: {name:?}")))
}

/// Expands a raw document into its fields.
pub(crate) fn expand_doc<'a>(d: &'a RawDocument) -> Result<Vec<(Cow<'a, str>, Value<'a>)>> {
    let mut out = Vec::new();
    for el in d.iter() {
        let (k, v) = el.map_err(malformed)?;
        out.push((Cow::Borrowed(k.as_str()), Value::Raw(v)));
    }
    Ok(out)
}

fn expand_owned_doc<'a>(d: &RawDocument) -> Result<Vec<(Cow<'a, str>, Value<'a>)>> {
    let mut out = Vec::new();
    for el in d.iter() {
        let (k, v) = el.map_err(malformed)?;
        out.push((
            Cow::Owned(k.as_str().to_string()),
            Value::Owned(RawBson::from(v)),
        ));
    }
    Ok(out)
}

impl<'a> Value<'a> {
    /// True for documents (expanded or not).
    pub(crate) fn is_doc(&self) -> bool {
        match self {
            Value::Doc(_) => true,
            Value::Arr(_) => false,
            Value::Raw(r) => matches!(r, RawBsonRef::Document(_)),
            Value::Owned(o) => matches!(o, RawBson::Document(_)),
            Value::Held(h) => matches!(held(h), Ok(RawBsonRef::Document(_))),
        }
    }

    /// True for arrays (expanded or not).
    pub(crate) fn is_array(&self) -> bool {
        match self {
            Value::Arr(_) => true,
            Value::Doc(_) => false,
            Value::Raw(r) => matches!(r, RawBsonRef::Array(_)),
            Value::Owned(o) => matches!(o, RawBson::Array(_)),
            Value::Held(h) => matches!(held(h), Ok(RawBsonRef::Array(_))),
        }
    }

    /// The scalar this value holds, if it is not an expanded container.
    pub(crate) fn scalar(&self) -> Option<RawBsonRef<'_>> {
        match self {
            Value::Raw(r) => Some(*r),
            Value::Owned(o) => Some(o.as_raw_bson_ref()),
            Value::Held(h) => held(h).ok(),
            _ => None,
        }
    }

    /// Turns a container into its expanded form (no-op for scalars and expanded containers).
    pub(crate) fn expand(&mut self) -> Result<()> {
        let new = match self {
            Value::Raw(RawBsonRef::Document(d)) => Value::Doc(expand_doc(d)?),
            Value::Raw(RawBsonRef::Array(a)) => {
                let arr: &RawArray = a;
                let mut out = Vec::new();
                for el in arr {
                    out.push(Value::Raw(el.map_err(malformed)?));
                }
                Value::Arr(out)
            }
            Value::Owned(RawBson::Document(d)) => Value::Doc(expand_owned_doc(d)?),
            Value::Owned(RawBson::Array(a)) => {
                let arr: &RawArray = a;
                let mut out = Vec::new();
                for el in arr {
                    out.push(Value::Owned(RawBson::from(el.map_err(malformed)?)));
                }
                Value::Arr(out)
            }
            Value::Held(h) => match held(h)? {
                RawBsonRef::Document(d) => Value::Doc(expand_owned_doc(d)?),
                RawBsonRef::Array(a) => {
                    let mut out = Vec::new();
                    for el in a {
                        out.push(Value::Owned(RawBson::from(el.map_err(malformed)?)));
                    }
                    Value::Arr(out)
                }
                _ => return Ok(()),
            },
            _ => return Ok(()),
        };
        *self = new;
        Ok(())
    }

    /// The child named `name`: the first field of that name in a document, the element at
    /// that position in an array (any all-digit name, as MongoDB's
    /// `parseUnsignedBase10Integer`). Expands `self` when it is a container.
    pub(crate) fn child_mut(&mut self, name: &str) -> Result<Option<&mut Value<'a>>> {
        self.expand()?;
        Ok(match self {
            Value::Doc(fields) => fields.iter_mut().find(|(k, _)| k == name).map(|(_, v)| v),
            Value::Arr(items) => match parse_index(name) {
                Some(i) => items.get_mut(i),
                None => None,
            },
            _ => None,
        })
    }

    /// Whether a child named `name` exists (see [`Value::child_mut`]).
    pub(crate) fn has_child(&mut self, name: &str) -> Result<bool> {
        Ok(self.child_mut(name)?.is_some())
    }

    /// Number of children of a container (0 for scalars).
    pub(crate) fn len(&mut self) -> Result<usize> {
        self.expand()?;
        Ok(match self {
            Value::Doc(f) => f.len(),
            Value::Arr(a) => a.len(),
            _ => 0,
        })
    }

    /// Serializes into an owned value.
    pub(crate) fn to_raw(&self) -> Result<RawBson> {
        Ok(match self {
            Value::Raw(r) => RawBson::from(*r),
            Value::Owned(o) => o.clone(),
            Value::Held(h) => RawBson::from(held(h)?),
            Value::Doc(fields) => RawBson::Document(write_fields(fields)?),
            Value::Arr(items) => RawBson::Array(write_items(items)?),
        })
    }

    /// Calls `f` with a borrowed view of the value, serializing expanded containers first.
    pub(crate) fn with_ref<R>(&self, f: impl FnOnce(RawBsonRef<'_>) -> R) -> Result<R> {
        match self {
            Value::Raw(r) => Ok(f(*r)),
            Value::Owned(o) => Ok(f(o.as_raw_bson_ref())),
            Value::Held(h) => Ok(f(held(h)?)),
            _ => {
                let owned = self.to_raw()?;
                Ok(f(owned.as_raw_bson_ref()))
            }
        }
    }

    /// The value as MongoDB prints it.
    pub(crate) fn display(&self) -> String {
        self.with_ref(display::value)
            .unwrap_or_else(|_| "<invalid>".to_string())
    }

    /// Serializes an expanded (or raw) document value into a buffer.
    pub(crate) fn write_document(&self) -> Result<RawDocumentBuf> {
        match self {
            Value::Doc(fields) => write_fields(fields),
            Value::Raw(RawBsonRef::Document(d)) => Ok((*d).to_owned()),
            Value::Owned(RawBson::Document(d)) => Ok(d.clone()),
            Value::Held(h) => match held(h)? {
                RawBsonRef::Document(d) => Ok(d.to_owned()),
                _ => Err(QueryError::BadValue("not a document".into())),
            },
            _ => Err(QueryError::BadValue("not a document".into())),
        }
    }
}

/// `name: value`, as MongoDB prints a BSON element.
pub(crate) fn element_string(name: &str, v: &Value<'_>) -> String {
    format!("{name}: {}", v.display())
}

/// All-digit names as array positions (leading zeros allowed, as
/// `str::parseUnsignedBase10Integer`).
pub(crate) fn parse_index(name: &str) -> Option<usize> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

fn append(out: &mut RawDocumentBuf, name: &str, v: &Value<'_>) -> Result<()> {
    let key = cstr(name)?;
    match v {
        Value::Raw(r) => out.append(key, *r),
        Value::Owned(o) => out.append(key, o.as_raw_bson_ref()),
        Value::Held(h) => out.append(key, held(h)?),
        Value::Doc(fields) => {
            let d = write_fields(fields)?;
            out.append(key, RawBsonRef::Document(&d));
        }
        Value::Arr(items) => {
            let holder = array_holder(items)?;
            match holder.get("") {
                Ok(Some(a @ RawBsonRef::Array(_))) => out.append(key, a),
                _ => return Err(malformed("array element")),
            }
        }
    }
    Ok(())
}

pub(crate) fn write_fields(fields: &[(Cow<'_, str>, Value<'_>)]) -> Result<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    for (k, v) in fields {
        append(&mut out, k, v)?;
    }
    Ok(out)
}

/// What [`walk_array`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ArrayWalk {
    /// Whether the walk stopped at an element (the callback returned true).
    pub(crate) stopped: bool,
    /// Elements walked (all of them unless `stopped`).
    pub(crate) len: usize,
    /// Whether the walked elements' keys are exactly `"0"`, `"1"`, … in order (as
    /// serializing an expanded array writes them).
    pub(crate) canonical: bool,
}

/// Walks the elements of `arr` in order, giving `stop` each one's type byte and value bytes
/// (a string's length prefix and NUL included) until it returns true; `None` when a value is
/// of a type the light walk does not size ([`value_len`]) or the framing is bad (the caller
/// then reads the array with the bson crate).
pub(crate) fn walk_array(
    arr: &RawArray,
    mut stop: impl FnMut(u8, &[u8]) -> bool,
) -> Option<ArrayWalk> {
    let b = arr.as_bytes();
    let end = b.len().checked_sub(1)?;
    if b.get(end) != Some(&0) {
        return None;
    }
    // The expected key as ASCII digits, most significant first, in `key[start..]`.
    let mut key = [b'0'; 20];
    let mut start = key.len() - 1;
    let mut canonical = true;
    let mut n = 0usize;
    let mut off = 4usize;
    while off < end {
        let kind = *b.get(off)?;
        let want = key.get(start..)?;
        let mut key_end = off + 1 + want.len();
        // Byte by byte: the keys are a few digits, shorter than a memcmp call.
        if canonical {
            for (i, d) in want.iter().enumerate() {
                if b.get(off + 1 + i) != Some(d) {
                    canonical = false;
                    break;
                }
            }
            canonical = canonical && b.get(key_end) == Some(&0);
        }
        if !canonical {
            key_end = off + 1 + b.get(off + 1..end)?.iter().position(|&c| c == 0)?;
        }
        let v = key_end + 1;
        let value = b.get(v..end)?;
        let len = value_len(kind, value)?;
        if stop(kind, value.get(..len)?) {
            return Some(ArrayWalk {
                stopped: true,
                len: n,
                canonical,
            });
        }
        off = v + len;
        n += 1;
        if canonical {
            // Next key: add one to the decimal digits.
            let mut i = key.len();
            loop {
                i = i.checked_sub(1)?;
                let d = key.get_mut(i)?;
                if *d == b'9' {
                    *d = b'0';
                } else {
                    *d += 1;
                    break;
                }
            }
            start = start.min(i);
        }
    }
    (off == end).then_some(ArrayWalk {
        stopped: false,
        len: n,
        canonical,
    })
}

/// The number of elements of `arr` when its keys are canonical (see [`ArrayWalk`]); `None`
/// when they are not or [`walk_array`] is unsure of the array.
pub(crate) fn canonical_len(arr: &RawArray) -> Option<usize> {
    let w = walk_array(arr, |_, _| false)?;
    w.canonical.then_some(w.len)
}

/// `arr` (whose [`canonical_len`] is `len`) with `values` appended, as a [`Value::Held`]:
/// its bytes copied once and each new element written after them under the next index key —
/// byte for byte what expanding `arr`, appending `values` and serializing writes.
pub(crate) fn append_elements<'v>(
    arr: &RawArray,
    len: usize,
    values: impl IntoIterator<Item = RawBsonRef<'v>>,
) -> Result<Value<'static>> {
    let mut tail = RawDocumentBuf::new();
    let mut digits = itoa::Buffer::new();
    for (i, v) in values.into_iter().enumerate() {
        tail.append(cstr(digits.format(len + i))?, v);
    }
    let old = arr.as_bytes();
    // Elements only: without the length prefix and the terminator.
    let (Some(old_elements), Some(new_elements)) = (
        old.get(4..old.len().saturating_sub(1)),
        tail.as_bytes()
            .get(4..tail.as_bytes().len().saturating_sub(1)),
    ) else {
        return Err(malformed("array framing"));
    };
    let array_len = old_elements.len() + new_elements.len() + 5;
    let holder_len = i32::try_from(array_len + 7).map_err(|_| malformed("array too large"))?;
    let mut holder = Vec::with_capacity(array_len + 7);
    // holder: length, type 0x04, the empty name's NUL, the array, the terminator
    holder.extend_from_slice(&holder_len.to_le_bytes());
    holder.extend_from_slice(&[0x04, 0x00]);
    holder.extend_from_slice(&((array_len as i32).to_le_bytes()));
    holder.extend_from_slice(old_elements);
    holder.extend_from_slice(new_elements);
    holder.extend_from_slice(&[0, 0]);
    Ok(Value::Held(
        RawDocumentBuf::from_bytes(holder).map_err(malformed)?,
    ))
}

/// An expanded array written as the one-field document `{"": [items…]}`, from which its
/// `RawBsonRef::Array` is read back. (bson's `RawArrayBuf::push` formats and allocates each
/// element's index key; here the keys come from one `itoa` buffer and the elements are
/// written once.)
fn array_holder(items: &[Value<'_>]) -> Result<RawDocumentBuf> {
    let mut elements = RawDocumentBuf::new();
    let mut digits = itoa::Buffer::new();
    for (i, v) in items.iter().enumerate() {
        append(&mut elements, digits.format(i), v)?;
    }
    let array = elements.as_bytes();
    let len = i32::try_from(array.len() + 7).map_err(|_| malformed("array too large"))?;
    // length, type 0x04, the empty name's NUL, the array, the terminator
    let mut holder = Vec::with_capacity(array.len() + 7);
    holder.extend_from_slice(&len.to_le_bytes());
    holder.extend_from_slice(&[0x04, 0x00]);
    holder.extend_from_slice(array);
    holder.push(0);
    RawDocumentBuf::from_bytes(holder).map_err(malformed)
}

fn write_items(items: &[Value<'_>]) -> Result<RawArrayBuf> {
    let mut out = RawArrayBuf::new();
    for v in items {
        match v {
            Value::Raw(r) => out.push(*r),
            Value::Owned(o) => out.push(o.as_raw_bson_ref()),
            Value::Held(h) => out.push(held(h)?),
            Value::Doc(fields) => {
                let d = write_fields(fields)?;
                out.push(RawBsonRef::Document(&d));
            }
            Value::Arr(inner) => {
                let a = write_items(inner)?;
                out.push(RawBsonRef::Array(&a));
            }
        }
    }
    Ok(out)
}

/// Resolves `path` from `root` (documents by field name, arrays by position), expanding
/// containers on the way. `None` when a component is missing or a scalar is in the way.
pub(crate) fn resolve_mut<'s, 'a>(
    root: &'s mut Value<'a>,
    path: &[String],
) -> Result<Option<&'s mut Value<'a>>> {
    let mut cur = root;
    for part in path {
        match cur.child_mut(part)? {
            Some(next) => cur = next,
            None => return Ok(None),
        }
    }
    Ok(Some(cur))
}

/// Like [`resolve_mut`], but a missing path is an internal error.
pub(crate) fn resolve_existing<'s, 'a>(
    root: &'s mut Value<'a>,
    path: &[String],
) -> Result<&'s mut Value<'a>> {
    resolve_mut(root, path)?.ok_or_else(|| {
        QueryError::Location(
            1,
            format!("internal error: update path '{}' vanished", path.join(".")),
        )
    })
}

/// The MongoDB type name of a value (`typeName`).
pub(crate) fn type_name(v: &Value<'_>) -> &'static str {
    match v {
        Value::Doc(_) => "object",
        Value::Arr(_) => "array",
        Value::Raw(r) => raw_type_name(*r),
        Value::Owned(o) => raw_type_name(o.as_raw_bson_ref()),
        Value::Held(h) => held(h).map_or("invalid", raw_type_name),
    }
}
