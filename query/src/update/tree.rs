//! The parsed form of an operator update: a prefix tree of paths (MongoDB's `UpdateObjectNode`
//! / `UpdateArrayNode` / leaf nodes, built by `UpdateObjectNode::parseAndMerge`).
//!
//! Invariants:
//! - children are ordered by [`FieldKey`]'s order, MongoDB 5.0+'s `cmpPathsAndArrayIndexes`:
//!   names that look like array positions (a digit first, no leading zero unless the name is
//!   `"0"`) compare by length then bytes, everything else by bytes. This is a total order
//!   (the numeric-looking names starting `1`–`9` form one contiguous block of the byte order),
//!   and it is the order updates are applied in — which is the order new fields are appended;
//! - two operators on the same path, or on a path and its prefix, are a ConflictingUpdateOperators
//!   parse error, except paths under different array filters of one array (checked per element
//!   at apply time, as MongoDB does);
//! - a path has at most [`MAX_PATH_PARTS`] components, which bounds every recursion over the
//!   tree and over what it builds.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bson::{RawBsonRef, RawDocument};
use cairn_storage::display;

use super::doc::{malformed, raw_type_name};
use super::ops::{Modifier, Op, parse_op};
use super::{CONFLICTING_UPDATE_OPERATORS, EMPTY_FIELD_NAME};
use crate::error::{QueryError, Result};
use crate::filter::Filter;

/// Longest update path accepted (components).
pub(crate) const MAX_PATH_PARTS: usize = 1000;

/// A field name ordered as MongoDB orders update paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FieldKey(pub(crate) String);

fn numeric_like(s: &str) -> bool {
    let b = s.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii_digit() => !(*c == b'0' && b.len() > 1),
        _ => false,
    }
}

impl Ord for FieldKey {
    fn cmp(&self, other: &FieldKey) -> Ordering {
        let (a, b) = (self.0.as_str(), other.0.as_str());
        if numeric_like(a) && numeric_like(b) {
            a.len()
                .cmp(&b.len())
                .then_with(|| a.as_bytes().cmp(b.as_bytes()))
        } else {
            a.as_bytes().cmp(b.as_bytes())
        }
    }
}

impl PartialOrd for FieldKey {
    fn partial_cmp(&self, other: &FieldKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A node of the update tree.
#[derive(Debug, Clone)]
pub(crate) enum UNode {
    Object(ObjectNode),
    Array(ArrayNode),
    Leaf(Arc<Op>),
}

/// Updates to the fields of a document (or the positions of an array, by number).
#[derive(Debug, Clone, Default)]
pub(crate) struct ObjectNode {
    pub(crate) children: BTreeMap<FieldKey, UNode>,
    /// The child under the positional `$`.
    pub(crate) positional: Option<Box<UNode>>,
}

/// Updates to the elements of an array selected by `$[]` (key `""`) or `$[<id>]` (key `id`).
#[derive(Debug, Clone, Default)]
pub(crate) struct ArrayNode {
    pub(crate) children: BTreeMap<FieldKey, UNode>,
}

/// The parsed `arrayFilters`: identifier → filter on `{<identifier>: element}`.
pub(crate) type ArrayFilters = BTreeMap<String, Arc<Filter>>;

fn is_identifier(part: &str) -> bool {
    part.len() >= 3 && part.starts_with("$[") && part.ends_with(']')
}

/// Splits a dotted update path after MongoDB's `fieldchecker::isUpdatable`.
pub(crate) fn split_path(path: &str) -> Result<Vec<String>> {
    if path.is_empty() {
        return Err(QueryError::Location(
            EMPTY_FIELD_NAME,
            "An empty update path is not valid.".into(),
        ));
    }
    let parts: Vec<String> = path.split('.').map(str::to_string).collect();
    if parts.iter().any(String::is_empty) {
        return Err(QueryError::Location(
            EMPTY_FIELD_NAME,
            format!("The update path '{path}' contains an empty field name, which is not allowed."),
        ));
    }
    if parts.len() > MAX_PATH_PARTS {
        return Err(QueryError::BadValue(format!(
            "The update path '{path}' has more than {MAX_PATH_PARTS} components"
        )));
    }
    Ok(parts)
}

fn conflict(path: &str, at: &str) -> QueryError {
    QueryError::Location(
        CONFLICTING_UPDATE_OPERATORS,
        format!("Updating the path '{path}' would create a conflict at '{at}'"),
    )
}

impl UNode {
    fn child_mut(&mut self, name: &str) -> Option<&mut UNode> {
        match self {
            UNode::Object(o) => {
                if name == "$" {
                    o.positional.as_deref_mut()
                } else {
                    o.children.get_mut(&FieldKey(name.to_string()))
                }
            }
            UNode::Array(a) => a.children.get_mut(&FieldKey(name.to_string())),
            UNode::Leaf(_) => None,
        }
    }

    fn set_child(&mut self, name: String, child: UNode) {
        match self {
            UNode::Object(o) if name == "$" => o.positional = Some(Box::new(child)),
            UNode::Object(o) => {
                o.children.insert(FieldKey(name), child);
            }
            UNode::Array(a) => {
                a.children.insert(FieldKey(name), child);
            }
            UNode::Leaf(_) => {}
        }
    }
}

/// Parses an operator-style update document into a tree (MongoDB's `parseUpdateExpression`).
/// Returns the root (always an object node) and whether a positional `$` is used.
pub(crate) fn parse_operators(spec: &RawDocument, filters: &ArrayFilters) -> Result<(UNode, bool)> {
    let mut root = UNode::Object(ObjectNode::default());
    let mut positional = false;
    let mut found: BTreeSet<String> = BTreeSet::new();
    for el in spec.iter() {
        let (name, value) = el.map_err(malformed)?;
        let Some(m) = Modifier::from_name(name.as_str()) else {
            return Err(QueryError::FailedToParse(format!(
                "Unknown modifier: {}. Expected a valid update modifier or pipeline-style update \
                 specified as an array",
                name.as_str()
            )));
        };
        let RawBsonRef::Document(fields) = value else {
            return Err(QueryError::FailedToParse(format!(
                "Modifiers operate on fields but we found type {} instead. For example: \
                 {{$mod: {{<field>: ...}}}} not {{{}: {}}}",
                raw_type_name(value),
                name.as_str(),
                display::value(value)
            )));
        };
        for f in fields.iter() {
            let (path, arg) = f.map_err(malformed)?;
            let path = path.as_str();
            let pos = if m == Modifier::Rename {
                merge(
                    &mut root,
                    path,
                    Op::ConflictPlaceholder,
                    filters,
                    &mut found,
                )?;
                let RawBsonRef::String(to) = arg else {
                    return Err(QueryError::BadValue(format!(
                        "The 'to' field for $rename must be a string: {path}: {}",
                        display::value(arg)
                    )));
                };
                let op = rename_op(path, to)?;
                merge(&mut root, to, op, filters, &mut found)?
            } else {
                let parts = split_path(path)?;
                check_positional(path, &parts)?;
                let op = parse_op(m, path, arg)?;
                insert(&mut root, path, &parts, op, filters, &mut found)?
            };
            positional |= pos;
        }
    }
    for id in filters.keys() {
        if !found.contains(id) {
            return Err(QueryError::FailedToParse(format!(
                "The array filter for identifier '{id}' was not used in the update {}",
                display::document(spec)
            )));
        }
    }
    Ok((root, positional))
}

fn check_positional(path: &str, parts: &[String]) -> Result<bool> {
    let count = parts.iter().filter(|p| *p == "$").count();
    if count > 1 {
        return Err(QueryError::BadValue(format!(
            "Too many positional (i.e. '$') elements found in path '{path}'"
        )));
    }
    if parts.first().is_some_and(|p| p == "$") {
        return Err(QueryError::BadValue(format!(
            "Cannot have positional (i.e. '$') element in the first position in path '{path}'"
        )));
    }
    Ok(count == 1)
}

fn merge(
    root: &mut UNode,
    path: &str,
    op: Op,
    filters: &ArrayFilters,
    found: &mut BTreeSet<String>,
) -> Result<bool> {
    let parts = split_path(path)?;
    check_positional(path, &parts)?;
    insert(root, path, &parts, op, filters, found)
}

/// `RenameNode::init` (after the destination path passed `isUpdatable`).
fn rename_op(from: &str, to: &str) -> Result<Op> {
    let to_parts = split_path(to)?;
    check_positional(to, &to_parts)?;
    let bad = |m: String| Err(QueryError::BadValue(m));
    if to.contains('\0') {
        return bad("The 'to' field for $rename cannot contain an embedded null byte".into());
    }
    let from_parts = split_path(from)?;
    let shown = format!("{from}: \"{to}\"");
    if from_parts == to_parts {
        return bad(format!(
            "The source and target field for $rename must differ: {shown}"
        ));
    }
    let prefix = |a: &[String], b: &[String]| a.len() <= b.len() && b.starts_with(a);
    if prefix(&from_parts, &to_parts) || prefix(&to_parts, &from_parts) {
        return bad(format!(
            "The source and target field for $rename must not be on the same path: {shown}"
        ));
    }
    let dynamic = |p: &[String]| p.iter().any(|x| x == "$" || is_identifier(x));
    if dynamic(&from_parts) {
        return bad(format!(
            "The source field for $rename may not be dynamic: {from}"
        ));
    }
    if dynamic(&to_parts) {
        return bad(format!(
            "The destination field for $rename may not be dynamic: {to}"
        ));
    }
    Ok(Op::Rename {
        from: from_parts,
        to: to_parts,
    })
}

/// The tree key of a path component: the identifier for `$[<id>]` (checked against the array
/// filters), the name otherwise.
fn child_name(
    part: &str,
    i: usize,
    path: &str,
    filters: &ArrayFilters,
    found: &mut BTreeSet<String>,
) -> Result<String> {
    if !is_identifier(part) {
        return Ok(part.to_string());
    }
    if i == 0 {
        return Err(QueryError::BadValue(format!(
            "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position \
             in path '{path}'"
        )));
    }
    let id = part.get(2..part.len() - 1).unwrap_or("").to_string();
    if !id.is_empty() {
        if !filters.contains_key(&id) {
            return Err(QueryError::BadValue(format!(
                "No array filter found for identifier '{id}' in path '{path}'"
            )));
        }
        found.insert(id.clone());
    }
    Ok(id)
}

fn insert(
    root: &mut UNode,
    path: &str,
    parts: &[String],
    op: Op,
    filters: &ArrayFilters,
    found: &mut BTreeSet<String>,
) -> Result<bool> {
    let positional = parts.iter().any(|p| p == "$");
    let Some((last, inner)) = parts.split_last() else {
        return Ok(positional);
    };
    let mut current = root;
    for (i, part) in inner.iter().enumerate() {
        let name = child_name(part, i, path, filters, found)?;
        let next_is_id = parts.get(i + 1).is_some_and(|p| is_identifier(p));
        let exists = current.child_mut(&name).is_some();
        if exists {
            let ok = match current.child_mut(&name) {
                Some(UNode::Array(_)) => next_is_id,
                Some(UNode::Object(_)) => !next_is_id,
                _ => false,
            };
            if !ok {
                return Err(conflict(path, &parts.get(..=i).unwrap_or(parts).join(".")));
            }
        } else {
            let child = if next_is_id {
                UNode::Array(ArrayNode::default())
            } else {
                UNode::Object(ObjectNode::default())
            };
            current.set_child(name.clone(), child);
        }
        current = match current.child_mut(&name) {
            Some(c) => c,
            None => return Err(conflict(path, path)),
        };
    }
    let name = child_name(last, parts.len() - 1, path, filters, found)?;
    if current.child_mut(&name).is_some() {
        return Err(conflict(path, path));
    }
    current.set_child(name, UNode::Leaf(Arc::new(op)));
    Ok(positional)
}

/// `UpdateNode::createUpdateNodeByMerging`: the union of two subtrees applied to one element
/// (positional `$` meeting a named field, or several array filters matching one element).
/// `at` is the path used in the error message.
pub(crate) fn merge_nodes(left: &UNode, right: &UNode, at: &mut Vec<String>) -> Result<UNode> {
    match (left, right) {
        (UNode::Object(l), UNode::Object(r)) => {
            let children = merge_maps(&l.children, &r.children, at, false)?;
            let positional = match (&l.positional, &r.positional) {
                (Some(a), Some(b)) => {
                    at.push("$".into());
                    let m = merge_nodes(a, b, at);
                    at.pop();
                    Some(Box::new(m?))
                }
                (Some(a), None) | (None, Some(a)) => Some(a.clone()),
                (None, None) => None,
            };
            Ok(UNode::Object(ObjectNode {
                children,
                positional,
            }))
        }
        (UNode::Array(l), UNode::Array(r)) => Ok(UNode::Array(ArrayNode {
            children: merge_maps(&l.children, &r.children, at, true)?,
        })),
        _ => Err(QueryError::Location(
            CONFLICTING_UPDATE_OPERATORS,
            format!("Update created a conflict at '{}'", at.join(".")),
        )),
    }
}

fn merge_maps(
    l: &BTreeMap<FieldKey, UNode>,
    r: &BTreeMap<FieldKey, UNode>,
    at: &mut Vec<String>,
    wrap: bool,
) -> Result<BTreeMap<FieldKey, UNode>> {
    let mut out = l.clone();
    for (k, rv) in r {
        let merged = match l.get(k) {
            Some(lv) => {
                at.push(if wrap {
                    format!("$[{}]", k.0)
                } else {
                    k.0.clone()
                });
                let m = merge_nodes(lv, rv, at);
                at.pop();
                m?
            }
            None => rv.clone(),
        };
        out.insert(k.clone(), merged);
    }
    Ok(out)
}

/// The top-level field names the tree touches.
pub(crate) fn top_level_fields(root: &UNode, out: &mut Vec<String>) {
    if let UNode::Object(o) = root {
        for k in o.children.keys() {
            out.push(k.0.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order() {
        let mut v: Vec<FieldKey> = ["b", "10", "2", "a", "01", "0", "", "9x", "1a", "_"]
            .iter()
            .map(|s| FieldKey(s.to_string()))
            .collect();
        v.sort();
        let got: Vec<&str> = v.iter().map(|k| k.0.as_str()).collect();
        assert_eq!(got, ["", "0", "01", "2", "10", "1a", "9x", "_", "a", "b"]);
    }
}
