//! Applying an update tree to a document (MongoDB's `UpdateObjectNode::apply`,
//! `UpdateArrayNode::apply`, `ModifierNode::apply`, `RenameNode::apply`,
//! `storage_validation.cpp`).
//!
//! The walk keeps MongoDB's two paths: `taken` (components that exist in the document, which
//! resolve to the current element) and `to_create` (components below it that do not exist
//! yet). Elements are always re-resolved from the root by `taken`, so no borrow outlives a
//! step.
//!
//! Invariants:
//! - children are applied in [`super::tree::FieldKey`] order, the positional `$` child at the
//!   place of its matched position (by byte order, as MongoDB compares `matchedField`);
//! - `_id` is immutable: any update that changes it (or a path under it) fails with
//!   ImmutableField (66) with MongoDB's messages; updates that leave it unchanged are no-ops;
//! - with storage validation on, an updated or created element deeper than
//!   [`MAX_STORAGE_DEPTH`] is Overflow (15) and a new top-level `$`-prefixed field (other than
//!   a well-formed DBRef) is DollarPrefixedFieldName (52);
//! - a "modified" result means some operator did not report a no-op (`nModified`).

use std::borrow::Cow;
use std::collections::BTreeSet;

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::compare::compare_values;
use cairn_storage::elements::value_len;

use super::doc::{Value, element_string, malformed, parse_index, resolve_existing, type_name};
use super::ops::{Ctx, Op, new_value, update_existing};
use super::tree::{ArrayFilters, ArrayNode, ObjectNode, UNode, merge_nodes};
use super::{
    CANNOT_BACKFILL_ARRAY, IMMUTABLE_FIELD, INVALID_DBREF, NOT_SINGLE_VALUE_FIELD, Now, OVERFLOW,
    PATH_NOT_VIABLE,
};
use crate::error::{QueryError, Result};

/// `BSONDepth::getMaxDepthForUserStorage()`.
pub const MAX_STORAGE_DEPTH: usize = 180;

/// Most nulls an update pads an array with (`pathsupport::kMaxPaddingAllowed`).
const MAX_PADDING: usize = 1_500_000;

pub(crate) struct Engine<'a, 'c> {
    pub(crate) root: Value<'a>,
    pub(crate) matched: Option<String>,
    pub(crate) insert: bool,
    pub(crate) validate: bool,
    pub(crate) id: Option<String>,
    pub(crate) now: &'c Now<'c>,
    pub(crate) filters: &'c ArrayFilters,
    pub(crate) changed_top: BTreeSet<String>,
}

fn immutable(msg: String) -> QueryError {
    QueryError::Location(IMMUTABLE_FIELD, msg)
}

fn overflow() -> QueryError {
    QueryError::Location(
        OVERFLOW,
        format!("Document exceeds maximum nesting depth of {MAX_STORAGE_DEPTH}"),
    )
}

/// `_id: <value>` of a document, if it has one.
pub(crate) fn id_string(doc: &RawDocument) -> Option<String> {
    doc.get("_id")
        .ok()
        .flatten()
        .map(|v| format!("_id: {}", cairn_storage::display::value(v)))
}

impl<'a> Engine<'a, '_> {
    pub(crate) fn new_doc(doc: &'a RawDocument) -> Result<Value<'a>> {
        Ok(Value::Doc(super::doc::expand_doc(doc)?))
    }

    fn ctx<'s>(&'s self, path: &'s [String]) -> Ctx<'s> {
        Ctx {
            id: self.id.as_deref(),
            path,
            now: self.now,
        }
    }

    pub(crate) fn apply_node(
        &mut self,
        node: &UNode,
        taken: &mut Vec<String>,
        to_create: &mut Vec<String>,
    ) -> Result<bool> {
        match node {
            UNode::Object(o) => self.apply_object(o, taken, to_create),
            UNode::Array(a) => self.apply_array(a, taken, to_create),
            UNode::Leaf(op) => self.apply_leaf(op, taken, to_create),
        }
    }

    fn apply_object(
        &mut self,
        node: &ObjectNode,
        taken: &mut Vec<String>,
        to_create: &mut Vec<String>,
    ) -> Result<bool> {
        let positional = match &node.positional {
            Some(p) => Some((
                p,
                self.matched.clone().ok_or_else(|| {
                    QueryError::BadValue(
                        "The positional operator did not find the match needed from the query."
                            .into(),
                    )
                })?,
            )),
            None => None,
        };
        let mut pending = positional;
        let mut modified = false;
        for (key, child) in &node.children {
            if let Some((p, matched)) = &pending {
                if *matched == key.0 {
                    let mut at = taken.clone();
                    at.extend(to_create.iter().cloned());
                    at.push(matched.clone());
                    let merged = merge_nodes(p, child, &mut at)?;
                    modified |= self.apply_child(&merged, &key.0, taken, to_create)?;
                    pending = None;
                    continue;
                }
                if matched.as_bytes() < key.0.as_bytes() {
                    let (p, matched) = (*p, matched.clone());
                    modified |= self.apply_child(p, &matched, taken, to_create)?;
                    pending = None;
                }
            }
            modified |= self.apply_child(child, &key.0, taken, to_create)?;
        }
        if let Some((p, matched)) = pending {
            modified |= self.apply_child(p, &matched, taken, to_create)?;
        }
        Ok(modified)
    }

    /// MongoDB's `applyChild`: descend into `field`, apply `child`, and afterwards advance
    /// `taken` over anything the child created.
    fn apply_child(
        &mut self,
        child: &UNode,
        field: &str,
        taken: &mut Vec<String>,
        to_create: &mut Vec<String>,
    ) -> Result<bool> {
        let top = taken.is_empty() && to_create.is_empty();
        let before = taken.len();
        if !to_create.is_empty() {
            to_create.push(field.to_string());
        } else if resolve_existing(&mut self.root, taken)?.has_child(field)? {
            taken.push(field.to_string());
        } else {
            to_create.push(field.to_string());
        }
        let modified = self.apply_node(child, taken, to_create)?;
        if to_create.is_empty() {
            taken.pop();
        } else {
            to_create.pop();
        }
        if taken.len() <= before
            && let Some(first) = to_create.first().cloned()
            && resolve_existing(&mut self.root, taken)?.has_child(&first)?
        {
            taken.append(to_create);
        }
        if top && modified {
            self.changed_top.insert(field.to_string());
        }
        Ok(modified)
    }

    fn apply_array(
        &mut self,
        node: &ArrayNode,
        taken: &mut Vec<String>,
        to_create: &mut [String],
    ) -> Result<bool> {
        if !to_create.is_empty() {
            let mut all = taken.clone();
            all.extend(to_create.iter().cloned());
            return Err(QueryError::BadValue(format!(
                "The path '{}' must exist in the document in order to apply array updates.",
                all.join(".")
            )));
        }
        let name = taken.last().cloned().unwrap_or_default();
        let elem = resolve_existing(&mut self.root, taken)?;
        if !elem.is_array() {
            return Err(QueryError::BadValue(format!(
                "Cannot apply array updates to non-array element {}",
                element_string(&name, elem)
            )));
        }
        elem.expand()?;
        let Value::Arr(items) = elem else {
            return Ok(false);
        };
        // Which children apply to which element, decided before anything changes.
        let mut matches: Vec<Vec<&UNode>> = Vec::with_capacity(items.len());
        for item in items.iter() {
            let raw = item.to_raw()?;
            let mut m = Vec::new();
            for (id, child) in &node.children {
                if id.0.is_empty() {
                    m.push(child);
                    continue;
                }
                let Some(filter) = self.filters.get(&id.0) else {
                    continue;
                };
                let mut wrapper = RawDocumentBuf::new();
                let key = <&bson::raw::CStr>::try_from(id.0.as_str())
                    .map_err(|e| QueryError::BadValue(e.to_string()))?;
                wrapper.append(key, raw.as_raw_bson_ref());
                if filter.matches(&wrapper) {
                    m.push(child);
                }
            }
            matches.push(m);
        }
        let mut modified = false;
        let mut no_create = Vec::new();
        for (i, m) in matches.into_iter().enumerate() {
            let Some((first, rest)) = m.split_first() else {
                continue;
            };
            let index = i.to_string();
            let merged_owned;
            let node: &UNode = if rest.is_empty() {
                first
            } else {
                let mut at = taken.clone();
                at.push(index.clone());
                let mut acc = (*first).clone();
                for r in rest {
                    acc = merge_nodes(&acc, r, &mut at)?;
                }
                merged_owned = acc;
                &merged_owned
            };
            taken.push(index);
            let r = self.apply_node(node, taken, &mut no_create);
            taken.pop();
            modified |= r?;
        }
        Ok(modified)
    }

    fn apply_leaf(
        &mut self,
        op: &Op,
        taken: &mut [String],
        to_create: &mut [String],
    ) -> Result<bool> {
        if matches!(op, Op::SetOnInsert(_)) && !self.insert {
            return Ok(false);
        }
        if let Op::Rename { from, to } = op {
            return self.apply_rename(from, to, taken, to_create);
        }
        let traits = op.traits();
        if !to_create.is_empty() {
            if traits.creates {
                let value = new_value(op, &self.ctx(taken))?;
                return self.create(value, taken, to_create);
            }
            if !traits.non_viable_ok {
                self.check_viability(taken, to_create)?;
            }
            return Ok(false);
        }
        if matches!(op, Op::Unset) {
            return self.unset(taken);
        }
        let ctx_path = taken.to_vec();
        let id = self.id.clone();
        let now = self.now;
        let elem = resolve_existing(&mut self.root, taken)?;
        let ctx = Ctx {
            id: id.as_deref(),
            path: &ctx_path,
            now,
        };
        if !update_existing(op, elem, &ctx)? {
            return Ok(false);
        }
        self.after_existing_update(taken)?;
        Ok(true)
    }

    /// Immutable-path checks and storage validation after an existing element changed. With
    /// `_id` as the only immutable path, MongoDB's "compare with the original" branch (taken
    /// path a *strict* prefix of an immutable path) never applies.
    fn after_existing_update(&mut self, taken: &[String]) -> Result<()> {
        if taken.first().is_some_and(|f| f == "_id") {
            return Err(immutable(format!(
                "Performing an update on the path '{}' would modify the immutable field '_id'",
                taken.join(".")
            )));
        }
        if self.validate {
            self.validate_element(taken)?;
        }
        Ok(())
    }

    /// `scanDocument` on the element at `path` (its recursion level is the path length).
    fn validate_element(&mut self, path: &[String]) -> Result<()> {
        let level = path.len();
        let in_array = match path.split_last() {
            Some((_, parent)) => resolve_existing(&mut self.root, parent)?.is_array(),
            None => false,
        };
        let elem = resolve_existing(&mut self.root, path)?;
        if exceeds_depth(elem, level)? {
            return Err(overflow());
        }
        if level == 1
            && !in_array
            && let Some(name) = path.first()
            && name.starts_with('$')
        {
            let Value::Doc(fields) = &self.root else {
                return Ok(());
            };
            let idx = fields.iter().position(|(k, _)| k == name).unwrap_or(0);
            check_dollar_field(fields, idx, name)?;
        }
        Ok(())
    }

    fn check_viability(&mut self, taken: &[String], to_create: &[String]) -> Result<()> {
        let elem = resolve_existing(&mut self.root, taken)?;
        let first = to_create.first().map(String::as_str).unwrap_or("");
        if elem.is_doc() || (elem.is_array() && parse_index(first).is_some()) {
            return Ok(());
        }
        Err(QueryError::Location(
            PATH_NOT_VIABLE,
            format!(
                "Cannot use the part ({first}) of ({}.{}) to traverse the element ({{{}}})",
                taken.join("."),
                to_create.join("."),
                element_string(taken.last().map(String::as_str).unwrap_or(""), elem)
            ),
        ))
    }

    /// `ModifierNode::applyToNonexistentElement` with `pathsupport::createPathAt`.
    fn create(&mut self, value: Value<'a>, taken: &[String], to_create: &[String]) -> Result<bool> {
        let validate = self.validate;
        let elem = resolve_existing(&mut self.root, taken)?;
        let first = to_create.first().cloned().unwrap_or_default();
        let name = taken.last().map(String::as_str).unwrap_or("");
        let not_viable = |elem: &Value<'_>| {
            QueryError::Location(
                PATH_NOT_VIABLE,
                format!(
                    "Cannot create field '{first}' in element {{{}}}",
                    element_string(name, elem)
                ),
            )
        };
        let index = if elem.is_array() {
            match parse_index(&first) {
                Some(i) => Some(i),
                None => return Err(not_viable(elem)),
            }
        } else if elem.is_doc() {
            None
        } else {
            return Err(not_viable(elem));
        };
        let len = elem.len()?;
        if let Some(i) = index
            && i > len
            && i - len > MAX_PADDING
        {
            return Err(QueryError::Location(
                CANNOT_BACKFILL_ARRAY,
                format!("can't backfill more than {MAX_PADDING} elements"),
            ));
        }
        if validate {
            // The new element sits at level taken+1; what it nests goes deeper still.
            let level = taken.len() + to_create.len();
            if level > MAX_STORAGE_DEPTH || exceeds_depth(&value, level)? {
                return Err(overflow());
            }
        }
        let mut v = value;
        for part in to_create.iter().skip(1).rev() {
            v = Value::Doc(vec![(Cow::Owned(part.clone()), v)]);
        }
        elem.expand()?;
        match (elem, index) {
            (Value::Arr(items), Some(i)) => {
                while items.len() < i {
                    items.push(Value::Raw(RawBsonRef::Null));
                }
                items.push(v);
            }
            (Value::Doc(fields), _) => fields.push((Cow::Owned(first.clone()), v)),
            _ => {}
        }
        if validate
            && taken.is_empty()
            && first.starts_with('$')
            && let Value::Doc(fields) = &self.root
        {
            let idx = fields.len().saturating_sub(1);
            check_dollar_field(fields, idx, &first)?;
        }
        if taken.first().is_some_and(|f| f == "_id") {
            let elem = resolve_existing(&mut self.root, taken)?;
            return Err(immutable(format!(
                "Updating the path '{}' to {} would modify the immutable field '_id'",
                taken.join("."),
                element_string(name, elem)
            )));
        }
        Ok(true)
    }

    fn unset(&mut self, taken: &[String]) -> Result<bool> {
        let Some((last, parent_path)) = taken.split_last() else {
            return Ok(false);
        };
        let parent = resolve_existing(&mut self.root, parent_path)?;
        parent.expand()?;
        match parent {
            Value::Arr(items) => {
                if let Some(slot) = parse_index(last).and_then(|i| items.get_mut(i)) {
                    *slot = Value::Raw(RawBsonRef::Null);
                }
            }
            Value::Doc(fields) => {
                if let Some(i) = fields.iter().position(|(k, _)| k == last) {
                    fields.remove(i);
                }
            }
            _ => return Ok(false),
        }
        if taken.first().is_some_and(|f| f == "_id") {
            return Err(immutable(format!(
                "Performing an update on the path '{}' would modify the immutable field '_id'",
                taken.join(".")
            )));
        }
        Ok(true)
    }

    fn apply_rename(
        &mut self,
        from: &[String],
        to: &[String],
        taken: &[String],
        to_create: &[String],
    ) -> Result<bool> {
        let id = self.id.clone().unwrap_or_else(|| "no id".to_string());
        // pathsupport::findLongestPrefix on the source.
        let mut cur: &mut Value<'a> = &mut self.root;
        let mut arrays: Vec<String> = Vec::new();
        for (i, part) in from.iter().enumerate() {
            let prev_name = if i == 0 {
                ""
            } else {
                from.get(i - 1).map(String::as_str).unwrap_or("")
            };
            let viable = cur.is_doc() || (cur.is_array() && parse_index(part).is_some());
            if !viable {
                return Err(QueryError::Location(
                    PATH_NOT_VIABLE,
                    format!(
                        "cannot use the part ({prev_name} of {}) to traverse the element ({{{}}})",
                        from.join("."),
                        element_string(prev_name, cur)
                    ),
                ));
            }
            if cur.is_array() {
                arrays.push(prev_name.to_string());
            }
            match cur.child_mut(part)? {
                Some(next) => cur = next,
                None => return Ok(false),
            }
        }
        if let Some(name) = arrays.last() {
            return Err(QueryError::BadValue(format!(
                "The source field cannot be an array element, '{}' in doc with {id} has an array \
                 field called '{name}'",
                from.join(".")
            )));
        }
        let value = Value::Owned(cur.to_raw()?);
        // The destination may not go through an array either.
        let dest_path: &[String] = if to_create.is_empty() {
            taken.split_last().map(|(_, p)| p).unwrap_or(&[])
        } else {
            taken
        };
        for n in (1..=dest_path.len()).rev() {
            let prefix = dest_path.get(..n).unwrap_or(&[]);
            if resolve_existing(&mut self.root, prefix)?.is_array() {
                return Err(QueryError::BadValue(format!(
                    "The destination field cannot be an array element, '{}' in doc with {id} has \
                     an array field called '{}'",
                    to.join("."),
                    prefix.last().map(String::as_str).unwrap_or("")
                )));
            }
        }
        if to_create.is_empty() {
            let elem = resolve_existing(&mut self.root, taken)?;
            *elem = value;
            self.after_existing_update(taken)?;
        } else {
            self.create(value, taken, to_create)?;
        }
        let removed = self.unset(from)?;
        if removed && let Some(f) = from.first() {
            self.changed_top.insert(f.clone());
        }
        Ok(true)
    }
}

/// True when `v`, an element at recursion level `level`, or anything it nests is deeper than
/// [`MAX_STORAGE_DEPTH`].
pub(crate) fn exceeds_depth(v: &Value<'_>, level: usize) -> Result<bool> {
    if level > MAX_STORAGE_DEPTH {
        return Ok(true);
    }
    match v {
        Value::Doc(fields) => {
            for (_, c) in fields {
                if exceeds_depth(c, level + 1)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Value::Arr(items) => {
            for c in items {
                if exceeds_depth(c, level + 1)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Value::Raw(r) => raw_exceeds_depth(*r, level),
        Value::Owned(o) => raw_exceeds_depth(o.as_raw_bson_ref(), level),
        Value::Held(_) => match v.scalar() {
            Some(r) => raw_exceeds_depth(r, level),
            None => Err(malformed("value holder")),
        },
    }
}

fn raw_exceeds_depth(v: RawBsonRef<'_>, level: usize) -> Result<bool> {
    if level > MAX_STORAGE_DEPTH {
        return Ok(true);
    }
    let framed = match v {
        RawBsonRef::Document(d) => d.as_bytes(),
        RawBsonRef::Array(a) => a.as_bytes(),
        _ => return Ok(false),
    };
    if let Some(answer) = framed_exceeds_depth(framed, level) {
        return Ok(answer);
    }
    raw_exceeds_depth_parsed(v, level)
}

/// [`raw_exceeds_depth`] of the document or array `framed` at `level`, on a light walk of its
/// elements (sized by [`value_len`], names not checked): `None` when it meets a value it
/// does not size or bad framing (the bson crate's iterator then decides).
fn framed_exceeds_depth(framed: &[u8], level: usize) -> Option<bool> {
    let end = framed.len().checked_sub(1)?;
    if framed.get(end) != Some(&0) {
        return None;
    }
    let mut off = 4usize;
    while off < end {
        let kind = *framed.get(off)?;
        let name_len = framed.get(off + 1..end)?.iter().position(|&c| c == 0)?;
        let v = off + 2 + name_len;
        let len = value_len(kind, framed.get(v..end)?)?;
        if level + 1 > MAX_STORAGE_DEPTH {
            return Some(true);
        }
        if matches!(kind, 0x03 | 0x04) && framed_exceeds_depth(framed.get(v..v + len)?, level + 1)?
        {
            return Some(true);
        }
        off = v + len;
    }
    (off == end).then_some(false)
}

/// [`raw_exceeds_depth`] on the bson crate's validating iterator (the definition).
fn raw_exceeds_depth_parsed(v: RawBsonRef<'_>, level: usize) -> Result<bool> {
    if level > MAX_STORAGE_DEPTH {
        return Ok(true);
    }
    match v {
        RawBsonRef::Document(d) => {
            for el in d.iter() {
                let (_, c) = el.map_err(malformed)?;
                if raw_exceeds_depth_parsed(c, level + 1)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        RawBsonRef::Array(a) => {
            for el in a {
                if raw_exceeds_depth_parsed(el.map_err(malformed)?, level + 1)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        _ => Ok(false),
    }
}

fn dbref(msg: impl Into<String>) -> QueryError {
    QueryError::Location(INVALID_DBREF, msg.into())
}

/// `validateDollarPrefixElement`: a top-level `$`-prefixed field is only allowed as part of a
/// well-formed DBRef (`$ref`, `$id`, optional `$db`, in that order).
pub(crate) fn check_dollar_field(
    fields: &[(Cow<'_, str>, Value<'_>)],
    idx: usize,
    full_name: &str,
) -> Result<()> {
    let name_at = |i: usize| fields.get(i).map(|(k, _)| k.as_ref());
    let is_string = |i: usize| {
        fields
            .get(i)
            .and_then(|(_, v)| v.scalar())
            .is_some_and(|s| matches!(s, RawBsonRef::String(_)))
    };
    let type_at = |i: usize| {
        fields
            .get(i)
            .map(|(_, v)| type_name(v))
            .unwrap_or("missing")
    };
    let name = name_at(idx).unwrap_or("");
    let mut cur = idx;
    let mut cur_name = name;
    if cur_name == "$db" {
        if !is_string(cur) {
            return Err(dbref(format!(
                "The DBRef $db field must be a String, not a {}",
                type_at(cur)
            )));
        }
        if cur == 0 || name_at(cur - 1) != Some("$id") {
            return Err(dbref(
                "Found $db field without a $id before it, which is invalid.",
            ));
        }
        cur -= 1;
        cur_name = "$id";
    }
    if cur_name == "$id" {
        if cur == 0 || name_at(cur - 1) != Some("$ref") {
            return Err(dbref(
                "Found $id field without a $ref before it, which is invalid.",
            ));
        }
        cur -= 1;
        cur_name = "$ref";
    }
    if cur_name == "$ref" {
        if !is_string(cur) {
            return Err(dbref(format!(
                "The DBRef $ref field must be a String, not a {}",
                type_at(cur)
            )));
        }
        if name_at(cur + 1) != Some("$id") {
            return Err(dbref(
                "The DBRef $ref field must be followed by a $id field",
            ));
        }
        return Ok(());
    }
    Err(QueryError::DollarPrefixedFieldName(format!(
        "The dollar ($) prefixed field '{name}' in '{full_name}' is not allowed in the context of \
         an update's replacement document. Consider using an aggregation pipeline with \
         $replaceWith."
    )))
}

/// `storage_validation::scanDocument` over a whole document (replacements and upserts).
/// `allow_top_dollar`: whether top-level `$`-prefixed fields are allowed (upserts).
pub(crate) fn validate_document(doc: &RawDocument, allow_top_dollar: bool) -> Result<()> {
    let fields = super::doc::expand_doc(doc)?;
    for (i, (name, v)) in fields.iter().enumerate() {
        if name == "_id" {
            match v.scalar() {
                Some(RawBsonRef::Document(d)) => {
                    let inner = super::doc::expand_doc(d)?;
                    for (j, (n, c)) in inner.iter().enumerate() {
                        if exceeds_depth(c, 1)? {
                            return Err(overflow());
                        }
                        if n.starts_with('$') {
                            check_dollar_field(&inner, j, &format!("_id.{n}"))?;
                        }
                    }
                }
                Some(id) => check_id_type(id)?,
                None => {}
            }
            continue;
        }
        if exceeds_depth(v, 1)? {
            return Err(overflow());
        }
        if !allow_top_dollar && name.starts_with('$') {
            check_dollar_field(&fields, i, name)?;
        }
    }
    Ok(())
}

/// `storageValidIdField` for non-object `_id`s.
pub(crate) fn check_id_type(id: RawBsonRef<'_>) -> Result<()> {
    let t = match id {
        RawBsonRef::RegularExpression(_) => "regex",
        RawBsonRef::Array(_) => "array",
        RawBsonRef::Undefined => "undefined",
        _ => return Ok(()),
    };
    Err(QueryError::InvalidIdField(format!(
        "The '_id' value cannot be of type {t}"
    )))
}

/// `ObjectReplaceExecutor::applyReplacementUpdate`: the replacement's fields, keeping the
/// original `_id` when the replacement has none; zero timestamps (other than `_id`) filled.
pub(crate) fn replace(
    original: &RawDocument,
    replacement: &RawDocument,
    now: &Now<'_>,
    validate: bool,
) -> Result<RawDocumentBuf> {
    replace_impl(original, replacement, Some(now), validate, false)
}

/// The document a pipeline update leaves: its output as a replacement (the stored `_id` kept
/// when the output has none), where top-level `$`-prefixed fields are allowed and empty
/// timestamps stay empty.
pub(crate) fn replace_with_pipeline_output(
    original: &RawDocument,
    output: &RawDocument,
) -> Result<RawDocumentBuf> {
    replace_impl(original, output, None, true, true)
}

fn replace_impl(
    original: &RawDocument,
    replacement: &RawDocument,
    now: Option<&Now<'_>>,
    validate: bool,
    allow_top_dollar: bool,
) -> Result<RawDocumentBuf> {
    // `_id` always comes first (the replacement's own, else the original's), wherever the
    // replacement placed it (MongoDB 6.0+).
    let mut out = RawDocumentBuf::new();
    let original_id = original.get("_id").map_err(malformed)?;
    match replacement.get("_id").map_err(malformed)? {
        Some(id) => out.append(bson::raw::cstr!("_id"), id),
        None => {
            if let Some(id) = original_id {
                out.append(bson::raw::cstr!("_id"), id);
            }
        }
    }
    let mut id_seen = false;
    for el in replacement.iter() {
        let (k, v) = el.map_err(malformed)?;
        if k.as_str() == "_id" && !id_seen {
            id_seen = true;
            continue;
        }
        match (v, now) {
            (RawBsonRef::Timestamp(t), Some(now))
                if t.time == 0 && t.increment == 0 && k.as_str() != "_id" =>
            {
                out.append(k, RawBson::Timestamp(now().1));
            }
            _ => out.append(k, v),
        }
    }
    if validate {
        validate_document(&out, allow_top_dollar)?;
    }
    let new_id = out.get("_id").map_err(malformed)?;
    if let Some(RawBsonRef::Array(_)) = new_id {
        return Err(QueryError::Location(
            NOT_SINGLE_VALUE_FIELD,
            "After applying the update to the document, the (immutable) field '_id' was found to \
             be an array or array descendant."
                .into(),
        ));
    }
    if let (Some(new_id), Some(old_id)) = (new_id, original_id)
        && compare_values(new_id, old_id) != std::cmp::Ordering::Equal
    {
        return Err(immutable(format!(
            "After applying the update, the (immutable) field '_id' was found to have been \
             altered to _id: {}",
            cairn_storage::display::value(new_id)
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use bson::{RawArrayBuf, RawBson, RawDocumentBuf, rawdoc};

    use super::*;

    /// Containers nested `n` deep alternating documents and arrays, with a leaf inside.
    fn nested(n: usize, leaf: RawBson) -> RawBson {
        let mut v = leaf;
        for i in 0..n {
            v = if i % 2 == 0 {
                let mut a = RawArrayBuf::new();
                a.push("pad");
                a.push(v);
                RawBson::Array(a)
            } else {
                let mut d = RawDocumentBuf::new();
                d.append(bson::raw::cstr!("k"), v);
                RawBson::Document(d)
            };
        }
        v
    }

    /// The light walk answers as the bson crate's walk at every depth around the limit, for
    /// empty and non-empty innermost containers and for values it cannot size.
    #[test]
    fn framed_depth_matches_the_parsed_walk() {
        let bin = RawBson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: vec![1],
        });
        for leaf in [
            RawBson::Int32(1),
            RawBson::Document(rawdoc! {}),
            RawBson::Array(RawArrayBuf::new()),
            bin,
        ] {
            for n in [0, 1, 2, 170, 177, 178, 179, 180, 181, 182] {
                let v = nested(n, leaf.clone());
                for level in [1, 2, 3] {
                    let r = v.as_raw_bson_ref();
                    assert_eq!(
                        raw_exceeds_depth(r, level).unwrap(),
                        raw_exceeds_depth_parsed(r, level).unwrap(),
                        "depth {n} level {level} leaf {leaf:?}"
                    );
                }
            }
        }
        let v = nested(200, RawBson::Int32(1));
        assert!(raw_exceeds_depth(v.as_raw_bson_ref(), 1).unwrap());
        let v = nested(10, RawBson::Int32(1));
        assert!(!raw_exceeds_depth(v.as_raw_bson_ref(), 1).unwrap());
    }
}
