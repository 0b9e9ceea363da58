//! A mutable view of a document for the update engine (MongoDB's `mutablebson::Document`).
//!
//! A [`Value`] is either a borrowed raw value (from the stored document or the parsed update),
//! an owned computed value, or an *expanded* container whose children are themselves
//! [`Value`]s. Containers are expanded lazily, only along the paths an update walks, so an
//! update copies nothing it does not touch; [`Value::write_document`] serializes the result.
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
        }
    }

    /// True for arrays (expanded or not).
    pub(crate) fn is_array(&self) -> bool {
        match self {
            Value::Arr(_) => true,
            Value::Doc(_) => false,
            Value::Raw(r) => matches!(r, RawBsonRef::Array(_)),
            Value::Owned(o) => matches!(o, RawBson::Array(_)),
        }
    }

    /// The scalar this value holds, if it is not an expanded container.
    pub(crate) fn scalar(&self) -> Option<RawBsonRef<'_>> {
        match self {
            Value::Raw(r) => Some(*r),
            Value::Owned(o) => Some(o.as_raw_bson_ref()),
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
            Value::Doc(fields) => RawBson::Document(write_fields(fields)?),
            Value::Arr(items) => RawBson::Array(write_items(items)?),
        })
    }

    /// Calls `f` with a borrowed view of the value, serializing expanded containers first.
    pub(crate) fn with_ref<R>(&self, f: impl FnOnce(RawBsonRef<'_>) -> R) -> Result<R> {
        match self {
            Value::Raw(r) => Ok(f(*r)),
            Value::Owned(o) => Ok(f(o.as_raw_bson_ref())),
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
    }
}
