//! Index entries of a document: MongoDB's B-tree key generation (`BtreeKeyGenerator`,
//! src/mongo/db/index/btree_key_generator.cpp) and hashed keys (`getHashKeys`,
//! expression_keys_private.cpp), behind storage's `IndexKeyGen` seam ([`QueryKeyGen`]).
//!
//! B-tree rules, as MongoDB's generator applies them:
//! - each indexed path is followed through embedded documents; the first array met along a
//!   path is expanded, one key per element (an element that is a document is entered with the
//!   rest of the path; any other element yields null for the rest of the path); an array at
//!   the end of a path yields its elements (nested arrays stay whole);
//! - all paths of a compound index that meet an array must meet the *same* array
//!   (error 171 "cannot index parallel arrays [b] [a]"), which keeps the key count linear;
//! - a missing field is null; an empty array at the end of a path is undefined (an empty
//!   array before the end makes the rest missing, so null);
//! - a numeric path component selects that position of an array met just before it
//!   (`a.0.b`), which does not make the index multikey; a document in such an array that also
//!   has a field with that name is error 16746;
//! - `sparse`: a key all of whose components were missing is not produced;
//! - the index is multikey for a document when an indexed path expanded an array (even one of
//!   a single element, or an empty one) or when the document produced more than one key.
//!
//! Hashed components (one per index, compound allowed): arrays anywhere along any indexed
//! path are error 16766; the component's key is [`crate::index::hashed_value`] of the value
//! (of null when missing) as an Int64; sparse keeps documents where some component exists.
//!
//! Partial indexes: a document is indexed only when it matches `partialFilterExpression`.
//!
//! Each index specification is prepared once — key pattern components, `sparse`, geo or not,
//! the parsed partial filter — and cached by the specification's bytes (a bounded cache, so a
//! specification replaced under the same name never sees a stale entry): a write costs one
//! lookup per index, not a re-read of the specification.
//!
//! A key pattern of top-level fields (no dots, not hashed) over a document whose values there
//! are not arrays — most writes — takes a direct path ([`flat_keys`]) with the same result.
//!
//! Output: entries deduplicated by key bytes (the first value set wins, as MongoDB's key set
//! keeps one of `1`/`1.0`) and sorted by key bytes. Each key is `E(v1) … E(vn)` with
//! descending components inverted; `values` is `{"0": v1, …}`.
//!
//! Invariants: never panics; recursion is bounded by the nesting of arrays along the indexed
//! paths, itself capped at [`MAX_ARRAY_NESTING`] (error, not overflow).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use bson::raw::CStr;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::Result;
use cairn_storage::display;
use cairn_storage::index::{IndexEntry, IndexKeyGen, IndexKeys, IndexMeta};
use cairn_storage::keys::encode_value;

use super::{IndexError, KeyComponent, KeyKind, code, hash, key_components, spec};
use crate::expr::field;
use crate::filter::Filter;

/// Arrays nested deeper than this along the indexed paths are refused.
pub const MAX_ARRAY_NESTING: usize = 256;

/// Prepared indexes kept at most (the cache is cleared when full).
const PREPARED_CACHE_LIMIT: usize = 4096;

/// What key generation needs of one index specification, worked out once: the key
/// pattern's components, `sparse`, whether it is a geo index, and the parsed partial filter.
#[derive(Debug)]
struct Prepared {
    components: Vec<KeyComponent>,
    sparse: bool,
    geo: bool,
    partial: Option<Filter>,
}

impl Prepared {
    fn new(index: &IndexMeta) -> std::result::Result<Prepared, IndexError> {
        let partial = match index.partial_filter() {
            Some(pf) => Some(spec::parse_partial_filter(pf)?),
            None => None,
        };
        let pattern = index.key_pattern();
        Ok(Prepared {
            components: pattern.map(key_components).unwrap_or_default(),
            sparse: index.is_sparse(),
            geo: pattern.is_some_and(|p| super::geo_keys::geo_plugin(p).is_some()),
            partial,
        })
    }
}

/// The query layer's index key generator (storage's `IndexKeyGen`).
///
/// Each index specification is prepared once ([`Prepared`]) and cached by the
/// specification's bytes (a bounded cache; a specification replaced under the same name
/// has other bytes, so it never sees a stale entry): a write then costs one hash lookup per
/// index instead of re-reading the key pattern and options and re-parsing the partial filter
/// (foldhash: the specification's bytes are hashed on every write).
#[derive(Debug, Default)]
pub struct QueryKeyGen {
    prepared: RwLock<HashMap<Vec<u8>, Arc<Prepared>, foldhash::fast::RandomState>>,
}

impl QueryKeyGen {
    /// A generator with an empty cache.
    pub fn new() -> QueryKeyGen {
        QueryKeyGen::default()
    }

    /// The prepared form of `index`, from the cache when possible.
    fn prepared(&self, index: &IndexMeta) -> std::result::Result<Arc<Prepared>, IndexError> {
        let bytes = index.spec.as_bytes();
        if let Ok(cache) = self.prepared.read()
            && let Some(p) = cache.get(bytes)
        {
            return Ok(Arc::clone(p));
        }
        let p = Arc::new(Prepared::new(index)?);
        if let Ok(mut cache) = self.prepared.write() {
            if cache.len() >= PREPARED_CACHE_LIMIT {
                cache.clear();
            }
            cache.insert(bytes.to_vec(), Arc::clone(&p));
        }
        Ok(p)
    }

    /// [`IndexKeyGen::keys`] with MongoDB's error codes.
    pub fn index_keys(
        &self,
        index: &IndexMeta,
        doc: &RawDocument,
    ) -> std::result::Result<IndexKeys, IndexError> {
        let p = self
            .prepared(index)
            .map_err(|e| IndexError::new(code::BAD_VALUE, e.to_storage().to_string()))?;
        if let Some(filter) = &p.partial
            && !filter.matches(doc)
        {
            return Ok(IndexKeys::default());
        }
        if p.geo
            && let Some(pattern) = index.key_pattern()
        {
            return super::geo_keys::generate(index, pattern, doc);
        }
        generate(&p.components, p.sparse, doc)
    }
}

impl IndexKeyGen for QueryKeyGen {
    fn validate(&self, spec: &RawDocument) -> Result<()> {
        spec::validate_spec(spec).map_err(|e| e.to_storage())
    }

    fn keys(&self, index: &IndexMeta, doc: &RawDocument) -> Result<IndexKeys> {
        self.index_keys(index, doc).map_err(|e| e.to_storage())
    }
}

/// The entries `doc` produces for an index with these components (no partial filter).
pub fn generate(
    components: &[KeyComponent],
    sparse: bool,
    doc: &RawDocument,
) -> std::result::Result<IndexKeys, IndexError> {
    if components.is_empty() {
        return Ok(IndexKeys::default());
    }
    let hashed = components.iter().any(|c| c.kind == KeyKind::Hashed);
    if !hashed && let Some(keys) = flat_keys(components, sparse, doc) {
        // One key at most, so never multikey.
        return Ok(IndexKeys {
            entries: encode_entries(components, keys)?,
            multikey: false,
        });
    }
    generate_general(components, sparse, doc)
}

/// [`generate`] without the [`flat_keys`] shortcut.
fn generate_general(
    components: &[KeyComponent],
    sparse: bool,
    doc: &RawDocument,
) -> std::result::Result<IndexKeys, IndexError> {
    if components.is_empty() {
        return Ok(IndexKeys::default());
    }
    let raw_keys = if components.iter().any(|c| c.kind == KeyKind::Hashed) {
        hash_keys(components, sparse, doc)?
            .into_iter()
            .collect::<Vec<_>>()
    } else {
        let mut g = BtreeGen {
            full_paths: components.iter().map(|c| c.path.as_str()).collect(),
            sparse,
            keys: Vec::new(),
            multikey: false,
        };
        let n = components.len();
        let mut names: Vec<&str> = g.full_paths.clone();
        let mut fixed = vec![RawBsonRef::Null; n];
        let positional = vec![Positional::default(); n];
        g.with_array(&mut names, &mut fixed, Some(doc), 0, &positional, 0)?;
        let entries = encode_entries(components, g.keys)?;
        // MongoDB counts distinct keys (its key set) for "more than one key".
        let multikey = g.multikey || entries.len() > 1;
        return Ok(IndexKeys { entries, multikey });
    };
    Ok(IndexKeys {
        entries: encode_entries(components, raw_keys)?,
        multikey: false,
    })
}

/// The common case without the general generator: every component a top-level field (no
/// dot) whose value is not an array. The key is then the fields' values, null for a missing
/// one, and none at all for a sparse index missing every field — what the general
/// generator yields for such a document. `None` (use the general generator) when a path is
/// dotted or empty or a value is an array.
fn flat_keys<'d>(
    components: &[KeyComponent],
    sparse: bool,
    doc: &'d RawDocument,
) -> Option<Vec<Vec<RawBsonRef<'d>>>> {
    let mut values = Vec::with_capacity(components.len());
    let mut missing = 0;
    for c in components {
        if c.path.is_empty() || c.path.contains('.') {
            return None;
        }
        match field_elt(doc, &c.path) {
            Some(e) if matches!(e.value, RawBsonRef::Array(_)) => return None,
            Some(e) => values.push(e.value),
            None => {
                values.push(RawBsonRef::Null);
                missing += 1;
            }
        }
    }
    if sparse && missing == components.len() {
        return Some(Vec::new());
    }
    Some(vec![values])
}

/// The field names of an entry's values document, `"0"` … `"31"` (a key pattern has at
/// most 32 components).
const VALUE_NAMES: [&str; 32] = [
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
    "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31",
];

/// An empty document with room for the values document `{"0": v1, …}` of `values`, so that
/// appending them does not reallocate.
fn values_buffer(values: &[RawBsonRef<'_>]) -> RawDocumentBuf {
    // Type byte, a name of up to two digits and its NUL, and the value.
    let size = values.iter().fold(5, |n, v| {
        n + 4
            + match v {
                RawBsonRef::String(s) => 5 + s.len(),
                RawBsonRef::Document(d) => d.as_bytes().len(),
                RawBsonRef::Array(a) => a.as_bytes().len(),
                RawBsonRef::Binary(b) => 5 + b.bytes.len(),
                _ => 16,
            }
    });
    cairn_storage::doc::document_with_capacity(size)
}

/// Encodes, deduplicates by key bytes (first wins) and sorts.
fn encode_entries(
    components: &[KeyComponent],
    keys: Vec<Vec<RawBsonRef<'_>>>,
) -> std::result::Result<Vec<IndexEntry>, IndexError> {
    let mut out: Vec<IndexEntry> = Vec::with_capacity(keys.len());
    for values in keys {
        let mut key = Vec::with_capacity(16 * values.len());
        let mut doc = values_buffer(&values);
        for (i, (v, c)) in values.iter().zip(components).enumerate() {
            encode_value(&mut key, *v, c.descending())
                .map_err(|e| IndexError::new(code::BAD_VALUE, e.to_string()))?;
            let spelled;
            let name = match VALUE_NAMES.get(i) {
                Some(n) => n,
                None => {
                    spelled = i.to_string();
                    spelled.as_str()
                }
            };
            let cname = <&CStr>::try_from(name)
                .map_err(|e| IndexError::new(code::BAD_VALUE, e.to_string()))?;
            doc.append(cname, *v);
        }
        out.push(IndexEntry { key, values: doc });
    }
    if out.len() > 1 {
        // Stable sort keeps the first of equal keys first; dedup keeps it.
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out.dedup_by(|later, earlier| later.key == earlier.key);
    }
    Ok(out)
}

/// An element found along a path: its name (for messages) and value.
#[derive(Clone, Copy, Debug)]
struct Elt<'d> {
    name: &'d str,
    value: RawBsonRef<'d>,
}

/// The first field called `name` in `d`, with its name. Only that field's value is read:
/// the fields before it are stepped over by name (a document's values were checked when it
/// was received).
///
/// The document is walked by [`field::walk`] (while every key is ASCII and every value one the
/// generic walk reads too), the found value read by [`field::value`];
/// anything else is answered by [`field_elt_generic`], so the answer is always its answer.
fn field_elt<'d>(d: &'d RawDocument, name: &str) -> Option<Elt<'d>> {
    match field::walk(d.as_bytes(), name.as_bytes()) {
        field::Walk::Found(value, kind, key) => {
            if let (Ok(name), Some(value)) = (std::str::from_utf8(key), field::value(kind, value)) {
                return Some(Elt { name, value });
            }
        }
        field::Walk::Absent => return None,
        field::Walk::Unsure => {}
    }
    field_elt_generic(d, name)
}

/// [`field_elt`] by the bson crate's iterator: each key checked as UTF-8, each element's
/// length checked, the found value read.
fn field_elt_generic<'d>(d: &'d RawDocument, name: &str) -> Option<Elt<'d>> {
    for el in d.iter_elements() {
        let el = el.ok()?;
        let k = el.key().as_str();
        if k == name {
            return Some(Elt {
                name: k,
                value: el.value().ok()?,
            });
        }
    }
    None
}

/// An array value as the document of its elements (`"0"`, `"1"`, … fields).
fn array_doc<'d>(v: RawBsonRef<'d>) -> Option<&'d RawDocument> {
    match v {
        RawBsonRef::Array(a) => RawDocument::from_bytes(a.as_bytes()).ok(),
        _ => None,
    }
}

/// `dotted_path_support::extractElementAtPathOrArrayAlongPath`: the element at `path`, or the
/// first array along it; `path` becomes the suffix after that element ("" at the end).
fn extract_path_or_array<'d>(mut obj: &'d RawDocument, path: &mut &str) -> Option<Elt<'d>> {
    loop {
        let (head, rest) = match path.split_once('.') {
            Some((h, r)) => (h, r),
            None => (*path, ""),
        };
        *path = rest;
        let sub = field_elt(obj, head)?;
        if matches!(sub.value, RawBsonRef::Array(_)) || path.is_empty() {
            return Some(sub);
        }
        match sub.value {
            RawBsonRef::Document(d) => obj = d,
            _ => return None,
        }
    }
}

/// MongoDB's `PositionalPathInfo`: an array element selected by a numeric path component.
#[derive(Clone, Copy, Debug, Default)]
struct Positional<'d, 'p> {
    /// `positionallyIndexedElt`.
    indexed: Option<Elt<'d>>,
    /// The array it was selected from (for messages).
    array: Option<&'d RawDocument>,
    /// The path left after `dotted`.
    remaining: &'p str,
    /// The element at the rest of the path, from the array (`dottedElt`).
    dotted: Option<Elt<'d>>,
}

fn same_value(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> bool {
    match (a, b) {
        (RawBsonRef::Array(x), RawBsonRef::Array(y)) => {
            std::ptr::eq(x.as_bytes().as_ptr(), y.as_bytes().as_ptr())
                && x.as_bytes().len() == y.as_bytes().len()
        }
        _ => false,
    }
}

struct BtreeGen<'p, 'd> {
    full_paths: Vec<&'p str>,
    sparse: bool,
    keys: Vec<Vec<RawBsonRef<'d>>>,
    multikey: bool,
}

impl<'p, 'd> BtreeGen<'p, 'd> {
    /// `_extractNextElement`: returns the element and whether it is an array nested in the
    /// array a positional component selected from.
    fn next_element(
        obj: Option<&'d RawDocument>,
        pos: &Positional<'d, 'p>,
        field: &mut &'p str,
    ) -> std::result::Result<(Option<Elt<'d>>, bool), IndexError> {
        let first = field.split_once('.').map_or(*field, |(h, _)| h);
        let have_obj_field = obj.and_then(|o| field_elt(o, first)).is_some();
        if have_obj_field && let Some(ix) = pos.indexed {
            let arr = pos.array.map(display::document).unwrap_or_default();
            return Err(IndexError::new(
                code::AMBIGUOUS_FIELD,
                format!(
                    "Ambiguous field name found in array (do not use numeric field names in \
                     embedded elements in an array), field: '{}' for array: {}",
                    ix.name,
                    truncate_middle(&arr)
                ),
            ));
        }
        if have_obj_field && let Some(o) = obj {
            return Ok((extract_path_or_array(o, field), false));
        }
        if let Some(ix) = pos.indexed {
            let nested = matches!(ix.value, RawBsonRef::Array(_));
            *field = pos.remaining;
            return Ok((pos.dotted, nested));
        }
        Ok((None, false))
    }

    /// `_getKeysWithArray`.
    fn with_array(
        &mut self,
        names: &mut [&'p str],
        fixed: &mut [RawBsonRef<'d>],
        obj: Option<&'d RawDocument>,
        mut not_found: usize,
        positional: &[Positional<'d, 'p>],
        depth: usize,
    ) -> std::result::Result<(), IndexError> {
        if depth > MAX_ARRAY_NESTING {
            return Err(IndexError::new(
                code::BAD_VALUE,
                format!("cannot index arrays nested more than {MAX_ARRAY_NESTING} levels deep"),
            ));
        }
        let n = names.len();
        let mut arr_elt: Option<Elt<'d>> = None;
        let mut arr_idxs: Vec<usize> = Vec::new();
        let mut may_expand = true;
        for i in 0..n {
            let Some(name) = names.get_mut(i) else { break };
            if name.is_empty() {
                continue;
            }
            let pos = positional.get(i).copied().unwrap_or_default();
            let (e, nested) = Self::next_element(obj, &pos, name)?;
            match e {
                None => {
                    if let Some(f) = fixed.get_mut(i) {
                        *f = RawBsonRef::Null;
                    }
                    *name = "";
                    not_found += 1;
                }
                Some(e) if matches!(e.value, RawBsonRef::Array(_)) => {
                    arr_idxs.push(i);
                    match arr_elt {
                        None => arr_elt = Some(e),
                        Some(a) if !same_value(a.value, e.value) => {
                            return Err(IndexError::new(
                                code::PARALLEL_ARRAYS,
                                format!("cannot index parallel arrays [{}] [{}]", e.name, a.name),
                            ));
                        }
                        Some(_) => {}
                    }
                    if nested {
                        may_expand = false;
                    }
                }
                Some(e) => {
                    if let Some(f) = fixed.get_mut(i) {
                        *f = e.value;
                    }
                }
            }
        }

        let Some(arr) = arr_elt else {
            if self.sparse && not_found == n {
                return Ok(());
            }
            self.keys.push(fixed.to_vec());
            return Ok(());
        };
        let Some(arr_obj) = array_doc(arr.value) else {
            return Ok(());
        };
        if arr_obj.is_empty() {
            if may_expand {
                self.multikey = true;
            }
            let empty = vec![Positional::default(); n];
            return self.arr_elt_fixed(
                names,
                fixed,
                RawBsonRef::Undefined,
                not_found,
                arr.value,
                &arr_idxs,
                true,
                &empty,
                depth,
            );
        }
        let mut sub: Vec<Positional<'d, 'p>> = vec![Positional::default(); n];
        for i in 0..n {
            let is_array_field = arr_idxs.contains(&i);
            let name = names.get(i).copied().unwrap_or("");
            if name.is_empty() {
                if is_array_field && may_expand {
                    self.multikey = true;
                }
                continue;
            }
            let part = name.split_once('.').map_or(name, |(h, _)| h);
            let Some(indexed) = field_elt(arr_obj, part) else {
                self.multikey = true;
                continue;
            };
            let mut remaining = name;
            let dotted = extract_path_or_array(arr_obj, &mut remaining);
            if let Some(s) = sub.get_mut(i) {
                *s = Positional {
                    indexed: Some(indexed),
                    array: Some(arr_obj),
                    remaining,
                    dotted,
                };
            }
        }
        for el in arr_obj.iter() {
            let Ok((_, v)) = el else { break };
            self.arr_elt_fixed(
                names, fixed, v, not_found, arr.value, &arr_idxs, may_expand, &sub, depth,
            )?;
        }
        Ok(())
    }

    /// `_getKeysArrEltFixed`: recurse for one array element.
    #[allow(clippy::too_many_arguments)]
    fn arr_elt_fixed(
        &mut self,
        names: &[&'p str],
        fixed: &[RawBsonRef<'d>],
        entry: RawBsonRef<'d>,
        not_found: usize,
        array: RawBsonRef<'d>,
        arr_idxs: &[usize],
        may_expand: bool,
        positional: &[Positional<'d, 'p>],
        depth: usize,
    ) -> std::result::Result<(), IndexError> {
        let mut names = names.to_vec();
        let mut fixed = fixed.to_vec();
        for &idx in arr_idxs {
            if names.get(idx).is_some_and(|s| s.is_empty())
                && let Some(f) = fixed.get_mut(idx)
            {
                *f = if may_expand { entry } else { array };
            }
        }
        let obj = match entry {
            RawBsonRef::Document(d) => Some(d),
            _ => None,
        };
        self.with_array(
            &mut names,
            &mut fixed,
            obj,
            not_found,
            positional,
            depth + 1,
        )
    }
}

/// MongoDB shortens long array renderings in the 16746 message.
fn truncate_middle(s: &str) -> String {
    const MAX: usize = 1024;
    if s.len() < MAX {
        return s.to_string();
    }
    let third = MAX / 3;
    let head: String = s.chars().take(third).collect();
    let tail: String = {
        let chars: Vec<char> = s.chars().collect();
        chars
            .get(chars.len().saturating_sub(third)..)
            .unwrap_or(&[])
            .iter()
            .collect()
    };
    format!("{head} .......... {tail}")
}

/// `getHashKeys`: one key; arrays along any indexed path are refused.
fn hash_keys<'d>(
    components: &[KeyComponent],
    sparse: bool,
    doc: &'d RawDocument,
) -> std::result::Result<Option<Vec<RawBsonRef<'d>>>, IndexError> {
    let mut any_value = false;
    let mut values = Vec::with_capacity(components.len());
    for c in components {
        let mut rest: &str = &c.path;
        let found = extract_path_or_array(doc, &mut rest);
        if let Some(e) = found
            && matches!(e.value, RawBsonRef::Array(_))
        {
            let consumed = c
                .path
                .len()
                .saturating_sub(rest.len() + usize::from(!rest.is_empty()));
            return Err(IndexError::new(
                code::HASHED_ARRAY,
                format!(
                    "Error: hashed indexes do not currently support array values. Found array \
                     at path: {}",
                    c.path.get(..consumed).unwrap_or(&c.path)
                ),
            ));
        }
        let v = match found {
            Some(e) => {
                any_value = true;
                e.value
            }
            None => RawBsonRef::Null,
        };
        values.push(match c.kind {
            KeyKind::Hashed => RawBsonRef::Int64(hash::hash64(v)),
            _ => v,
        });
    }
    if sparse && !any_value {
        return Ok(None);
    }
    Ok(Some(values))
}

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::*;

    /// The direct path for top-level fields gives exactly what the general generator gives
    /// (entries, values, multikey), and steps aside for arrays and dotted paths.
    #[test]
    fn flat_keys_agree_with_the_general_generator() {
        let patterns = [
            rawdoc! {"a": 1},
            rawdoc! {"a": -1},
            rawdoc! {"a": 1, "b": -1},
            rawdoc! {"b": 1, "a": 1},
            rawdoc! {"a.x": 1},
            rawdoc! {"a": 1, "c.d": 1},
        ];
        let docs = [
            rawdoc! {"_id": 1, "a": 5, "b": "x"},
            rawdoc! {"_id": 1, "a": 5.0, "b": {"y": 1}},
            rawdoc! {"_id": 1, "b": null},
            rawdoc! {"_id": 1},
            rawdoc! {"_id": 1, "a": [1, 2], "b": 3},
            rawdoc! {"_id": 1, "a": [], "b": 3},
            rawdoc! {"_id": 1, "a": {"x": [1, 2]}, "c": {"d": 4}},
            rawdoc! {"_id": 1, "a": {"x": 7}, "b": [[1]]},
            rawdoc! {"_id": 1, "a": bson::RawBson::Undefined, "b": bson::RawBson::MinKey},
        ];
        for pattern in &patterns {
            let components = key_components(pattern);
            for sparse in [false, true] {
                for doc in &docs {
                    assert_eq!(
                        generate(&components, sparse, doc),
                        generate_general(&components, sparse, doc),
                        "{pattern:?} sparse {sparse} on {doc:?}"
                    );
                }
            }
        }
        let a = key_components(&rawdoc! {"a": 1});
        assert!(flat_keys(&a, false, &rawdoc! {"a": [1]}).is_none());
        assert_eq!(
            flat_keys(&a, true, &rawdoc! {"b": 1}).map(|k| k.len()),
            Some(0)
        );
        let dotted = key_components(&rawdoc! {"a.b": 1});
        assert!(flat_keys(&dotted, false, &rawdoc! {"a": {"b": 1}}).is_none());
    }

    /// The light walk's [`field_elt`] answers exactly as the bson iterator's
    /// ([`field_elt_generic`]) — name and value — for present, absent, duplicate and
    /// non-ASCII names, arrays, types the light walk does not size, and every one-byte change
    /// (all 256 values at every offset) of each document that still frames.
    #[test]
    fn field_elt_answers_as_the_bson_iterator() {
        let docs = [
            rawdoc! {"_id": 1, "a": 5, "b": "x", "a": 6.5, "c": {"d": [1, "y"]}, "e": [],
            "f": true, "g": null, "h": 7_i64},
            rawdoc! {"é": 1, "a": "ü", "ключ": {"x": 1}, "b": [[1], {"c": 2}]},
            rawdoc! {"o": bson::oid::ObjectId::from_bytes([1; 12]), "t": bson::DateTime::from_millis(3),
            "bin": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0, 1] },
            "a": "after binary", "u": bson::RawBson::Undefined},
            rawdoc! {"a_long_key_of_many_bytes": "", "a": bson::Decimal128::from_bytes([2; 16])},
        ];
        let names = [
            "_id",
            "a",
            "b",
            "c",
            "e",
            "f",
            "g",
            "h",
            "é",
            "ключ",
            "o",
            "t",
            "bin",
            "u",
            "",
            "zz",
            "a_long_key_of_many_bytes",
        ];
        // As text: a corrupted double may be a NaN.
        let answer = |e: Option<Elt<'_>>| format!("{:?}", e.map(|e| (e.name, e.value)));
        let same = |d: &RawDocument| {
            for name in names {
                assert_eq!(
                    answer(field_elt(d, name)),
                    answer(field_elt_generic(d, name)),
                    "{name} in {:?}",
                    d.as_bytes()
                );
            }
        };
        let mut found = 0;
        for d in &docs {
            same(d);
            found += names.iter().filter(|n| field_elt(d, n).is_some()).count();
            let b = d.as_bytes();
            for at in 4..b.len() - 1 {
                let mut bad = b.to_vec();
                for v in 0..=255u8 {
                    bad[at] = v;
                    if let Ok(d) = RawDocument::from_bytes(&bad) {
                        same(d);
                    }
                }
            }
        }
        // Sanity: the documents answer most names (the comparison is not all `None`).
        assert_eq!(found, 19);
    }
}
