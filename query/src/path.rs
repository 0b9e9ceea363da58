//! Dotted field paths and their resolution through documents and arrays (MongoDB's
//! `FieldRef` + `ElementPath` / `BSONElementIterator`, src/mongo/db/matcher/path.cpp).
//!
//! A [`FieldPath`] is a dotted string split on `.`; every component is kept as written, so
//! empty components (`"a..b"`, `"a."`) name fields called `""`, and numeric components
//! (`"a.0"`) are field names that *also* select array positions.
//!
//! [`visit`] produces every value a path reaches, exactly in the order and with the multiplicity
//! MongoDB's matcher sees them:
//! - objects are entered by field name (the *first* field of that name, as `BSONObj::getField`);
//! - a scalar met before the path ends, or an absent field, yields one *missing* value
//!   ([`PathValue::value`] is `None`), which is how `{a: null}` and `$exists: false` see it;
//! - an array met before the path ends is traversed implicitly, one level: each element that
//!   is a document is entered with the rest of the path; if the next component is the
//!   element's position (`"0"`, `"1"`, …) the element itself is selected too (an element that
//!   is itself an array is then traversed with the rest of the path after that component).
//!   Other elements (scalars, nested arrays without a positional component) yield nothing, and
//!   an array that yields nothing at all yields no missing value either;
//! - an array at the end of the path yields, with [`LeafArrays::Traverse`], each element and
//!   then the array itself; with [`LeafArrays::Whole`], only the array (used by `$size` and
//!   `$elemMatch`); with [`LeafArrays::TraverseOmitArray`], only the elements. Elements that are arrays are not expanded further (one level only).
//!
//! Each value carries the position in the *outermost* array traversed to reach it (MongoDB's
//! `arrayOffset`, the positional `$` operator's `elemMatchKey`).
//!
//! Invariants: never panics on any input, malformed BSON included (a malformed element ends
//! its container); recursion is bounded by [`MAX_TRAVERSAL_DEPTH`] nested arrays; positions
//! are element positions (the same as MongoDB's array field names in well-formed arrays).

use std::fmt;
use std::ops::ControlFlow;

use bson::{RawArray, RawBsonRef, RawDocument};

/// Arrays nested deeper than this along one path are not traversed further.
pub const MAX_TRAVERSAL_DEPTH: usize = 256;

/// A dotted field path such as `a.b.0.c`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct FieldPath {
    dotted: String,
    parts: Vec<String>,
}

impl FieldPath {
    /// Splits `dotted` on `.`; empty components are kept (they name fields called `""`).
    pub fn new(dotted: &str) -> FieldPath {
        FieldPath {
            dotted: dotted.to_string(),
            parts: dotted.split('.').map(str::to_string).collect(),
        }
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.dotted
    }

    /// The components, at least one.
    pub fn parts(&self) -> &[String] {
        &self.parts
    }

    /// The number of components.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Always false: a path has at least one (possibly empty) component.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The first component.
    pub fn head(&self) -> &str {
        self.parts.first().map(String::as_str).unwrap_or("")
    }

    /// True when `self` is `other` or a proper prefix of it component-wise
    /// (`a.b` is a prefix of `a.b.c`, not of `a.bc`).
    pub fn is_prefix_of(&self, other: &FieldPath) -> bool {
        self.parts.len() <= other.parts.len()
            && self
                .parts
                .iter()
                .zip(other.parts.iter())
                .all(|(a, b)| a == b)
    }
}

impl fmt::Debug for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.dotted)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.dotted)
    }
}

impl From<&str> for FieldPath {
    fn from(s: &str) -> FieldPath {
        FieldPath::new(s)
    }
}

/// What to do with an array found at the end of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafArrays {
    /// Yield each element, then the array itself (MongoDB's `kTraverse`).
    Traverse,
    /// Yield only the array itself (`kNoTraversal`: `$size`, `$elemMatch`).
    Whole,
    /// Yield each element but not the array itself (`kTraverseOmitArray`: the values a
    /// document validation error reports).
    TraverseOmitArray,
}

/// One value reached by a path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathValue<'a> {
    /// The value, or `None` for a missing field.
    pub value: Option<RawBsonRef<'a>>,
    /// Position within the outermost array traversed to reach the value, if any.
    pub array_index: Option<usize>,
}

/// Calls `f` with every value `path` reaches in `doc` (see the module docs), stopping early when
/// `f` breaks. Returns `true` if `f` broke.
pub fn visit<'a, F>(doc: &'a RawDocument, path: &FieldPath, leaf: LeafArrays, mut f: F) -> bool
where
    F: FnMut(PathValue<'a>) -> ControlFlow<()>,
{
    let mut w = Walker {
        leaf,
        f: &mut f,
        depth: 0,
    };
    w.doc(doc, &path.parts, None).is_break()
}

/// Every value `path` reaches in `doc`, in order.
pub fn values<'a>(doc: &'a RawDocument, path: &FieldPath, leaf: LeafArrays) -> Vec<PathValue<'a>> {
    let mut out = Vec::new();
    visit(doc, path, leaf, |v| {
        out.push(v);
        ControlFlow::Continue(())
    });
    out
}

/// The value at `path` without implicit array traversal: documents are entered by field name
/// and arrays by a numeric component (`a.1.b`). `None` when anything along the way is missing,
/// a scalar, or an array indexed by a non-numeric component.
pub fn get_exact<'a>(doc: &'a RawDocument, path: &FieldPath) -> Option<RawBsonRef<'a>> {
    let mut cur = RawBsonRef::Document(doc);
    for part in &path.parts {
        cur = match cur {
            RawBsonRef::Document(d) => field(d, part)?,
            RawBsonRef::Array(a) => array_element(a, part)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// The first field called `name` in `d` (malformed BSON ends the search).
pub fn field<'a>(d: &'a RawDocument, name: &str) -> Option<RawBsonRef<'a>> {
    for el in d.iter() {
        let (k, v) = el.ok()?;
        if k.as_str() == name {
            return Some(v);
        }
    }
    None
}

/// The element of `a` at the position named by `part` (canonical decimal, no sign, no leading
/// zeros), if any.
pub fn array_element<'a>(a: &'a RawArray, part: &str) -> Option<RawBsonRef<'a>> {
    let idx = parse_position(part)?;
    a.into_iter().nth(idx)?.ok()
}

/// Parses an array position as MongoDB's array field names spell it: `"0"`, `"17"`, never
/// `"01"`, `"+1"` or `""`.
pub fn parse_position(part: &str) -> Option<usize> {
    let bytes = part.as_bytes();
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if bytes.len() > 1 && bytes.first() == Some(&b'0') {
        return None;
    }
    part.parse().ok()
}

/// True when `part` names position `idx` (MongoDB's `isArrayOffsetMatch`).
fn is_position(part: &str, idx: usize) -> bool {
    parse_position(part) == Some(idx)
}

struct Walker<'f, 'a> {
    leaf: LeafArrays,
    f: &'f mut dyn FnMut(PathValue<'a>) -> ControlFlow<()>,
    depth: usize,
}

impl<'a> Walker<'_, 'a> {
    fn emit(
        &mut self,
        value: Option<RawBsonRef<'a>>,
        array_index: Option<usize>,
    ) -> ControlFlow<()> {
        (self.f)(PathValue { value, array_index })
    }

    /// `getFieldDottedOrArray` followed by the BEGIN state of `BSONElementIterator::more`.
    /// `outer` is the array position inherited from an enclosing traversal.
    fn doc(
        &mut self,
        doc: &'a RawDocument,
        parts: &[String],
        outer: Option<usize>,
    ) -> ControlFlow<()> {
        let mut cur = doc;
        let mut i = 0;
        loop {
            let Some(name) = parts.get(i) else {
                // Only reachable for an empty path; treat as the field "".
                return self.emit(field(cur, ""), outer);
            };
            let last = i + 1 == parts.len();
            match field(cur, name) {
                None => return self.emit(None, outer),
                Some(RawBsonRef::Document(d)) if !last => {
                    cur = d;
                    i += 1;
                }
                Some(RawBsonRef::Array(a)) => {
                    let rest = parts.get(i + 1..).unwrap_or(&[]);
                    if rest.is_empty() {
                        return self.leaf_array(a, outer);
                    }
                    return self.array(a, rest, outer);
                }
                Some(v) if last => return self.emit(Some(v), outer),
                // A scalar before the end of the path: missing.
                Some(_) => return self.emit(None, outer),
            }
        }
    }

    /// An array at the end of the path.
    fn leaf_array(&mut self, a: &'a RawArray, outer: Option<usize>) -> ControlFlow<()> {
        if self.leaf != LeafArrays::Whole {
            for (idx, el) in a.into_iter().enumerate() {
                let Ok(el) = el else { break };
                self.emit(Some(el), outer.or(Some(idx)))?;
            }
        }
        if self.leaf == LeafArrays::TraverseOmitArray {
            return ControlFlow::Continue(());
        }
        self.emit(Some(RawBsonRef::Array(a)), outer)
    }

    /// An array met with `rest` (non-empty) still to resolve (the IN_ARRAY state).
    fn array(&mut self, a: &'a RawArray, rest: &[String], outer: Option<usize>) -> ControlFlow<()> {
        if self.depth >= MAX_TRAVERSAL_DEPTH {
            return ControlFlow::Continue(());
        }
        self.depth += 1;
        let r = self.array_inner(a, rest, outer);
        self.depth -= 1;
        r
    }

    fn array_inner(
        &mut self,
        a: &'a RawArray,
        rest: &[String],
        outer: Option<usize>,
    ) -> ControlFlow<()> {
        let Some((next, after)) = rest.split_first() else {
            return ControlFlow::Continue(());
        };
        for (idx, el) in a.into_iter().enumerate() {
            let Ok(el) = el else { break };
            let here = outer.or(Some(idx));
            match el {
                RawBsonRef::Document(d) => {
                    // The element as a subdocument, with the whole rest of the path.
                    self.doc(d, rest, here)?;
                    // Then, if the next component is this position, the element itself.
                    if is_position(next, idx) {
                        if after.is_empty() {
                            self.emit(Some(el), outer)?;
                        } else {
                            self.doc(d, after, outer)?;
                        }
                    }
                }
                _ if is_position(next, idx) => {
                    if after.is_empty() {
                        self.emit(Some(el), here)?;
                    } else if let RawBsonRef::Array(inner) = el {
                        self.array(inner, after, outer)?;
                    }
                }
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn vals(
        doc: &RawDocument,
        path: &str,
        leaf: LeafArrays,
    ) -> Vec<(Option<String>, Option<usize>)> {
        values(doc, &FieldPath::new(path), leaf)
            .into_iter()
            .map(|v| (v.value.map(cairn_storage::display::value), v.array_index))
            .collect()
    }

    fn s(v: &str, i: Option<usize>) -> (Option<String>, Option<usize>) {
        (Some(v.to_string()), i)
    }

    #[test]
    fn simple_and_missing() {
        let d = rawdoc! { "a": { "b": 1 }, "c": 2 };
        assert_eq!(vals(&d, "a.b", LeafArrays::Traverse), vec![s("1", None)]);
        assert_eq!(vals(&d, "c.d", LeafArrays::Traverse), vec![(None, None)]);
        assert_eq!(vals(&d, "x", LeafArrays::Traverse), vec![(None, None)]);
    }

    #[test]
    fn leaf_arrays() {
        let d = rawdoc! { "a": [1, [2]] };
        assert_eq!(
            vals(&d, "a", LeafArrays::Traverse),
            vec![
                s("1", Some(0)),
                s("[ 2 ]", Some(1)),
                s("[ 1, [ 2 ] ]", None)
            ]
        );
        assert_eq!(
            vals(&d, "a", LeafArrays::Whole),
            vec![s("[ 1, [ 2 ] ]", None)]
        );
    }

    #[test]
    fn array_of_documents() {
        let d = rawdoc! { "a": [{ "b": 1 }, { "c": 1 }, 5, { "b": [7] }] };
        assert_eq!(
            vals(&d, "a.b", LeafArrays::Traverse),
            vec![
                s("1", Some(0)),
                (None, Some(1)),
                s("7", Some(3)),
                s("[ 7 ]", Some(3))
            ]
        );
        let scalars = rawdoc! { "a": [1, 2] };
        assert!(vals(&scalars, "a.b", LeafArrays::Traverse).is_empty());
    }

    #[test]
    fn positional_components() {
        let d = rawdoc! { "a": [{ "b": 1 }, { "b": 2 }] };
        // Each document is first searched for a field "1" (missing), then element 1 is used.
        assert_eq!(
            vals(&d, "a.1.b", LeafArrays::Traverse),
            vec![(None, Some(0)), (None, Some(1)), s("2", None)]
        );
        let nested = rawdoc! { "a": [[5, 6]] };
        assert_eq!(
            vals(&nested, "a.0.1", LeafArrays::Traverse),
            vec![s("6", Some(1))]
        );
        assert_eq!(
            vals(&nested, "a.0", LeafArrays::Traverse),
            vec![s("[ 5, 6 ]", Some(0))]
        );
        let named = rawdoc! { "a": { "0": 3 } };
        assert_eq!(
            vals(&named, "a.0", LeafArrays::Traverse),
            vec![s("3", None)]
        );
    }

    // The cases below are MongoDB's src/mongo/db/matcher/path_test.cpp (BSONElementIterator).

    #[test]
    fn mongo_nested1() {
        let d = rawdoc! { "a": [{ "b": 5 }, 3, {}, { "b": [9, 11] }, { "b": 7 }] };
        assert_eq!(
            vals(&d, "a.b", LeafArrays::Traverse),
            vec![
                s("5", Some(0)),
                (None, Some(2)),
                s("9", Some(3)),
                s("11", Some(3)),
                s("[ 9, 11 ]", Some(3)),
                s("7", Some(4)),
            ]
        );
        assert_eq!(
            vals(&d, "a.b", LeafArrays::Whole),
            vec![
                s("5", Some(0)),
                (None, Some(2)),
                s("[ 9, 11 ]", Some(3)),
                s("7", Some(4))
            ]
        );
    }

    #[test]
    fn mongo_partial_matches() {
        assert_eq!(
            vals(&rawdoc! { "a": 4 }, "a.b", LeafArrays::Traverse),
            vec![(None, None)]
        );
        assert!(vals(&rawdoc! { "a": [4] }, "a.b", LeafArrays::Traverse).is_empty());
        assert_eq!(
            vals(&rawdoc! { "a": { "b": [] } }, "a.b", LeafArrays::Traverse),
            vec![s("[]", None)]
        );
    }

    #[test]
    fn mongo_array_index() {
        let d1 = rawdoc! { "a": [5, 7, 3] };
        assert_eq!(
            vals(&d1, "a.1", LeafArrays::Traverse),
            vec![s("7", Some(1))]
        );
        let d2 = rawdoc! { "a": [5, [2, 4], 3] };
        assert_eq!(
            vals(&d2, "a.1", LeafArrays::Traverse),
            vec![s("[ 2, 4 ]", Some(1))]
        );
        let d3 = rawdoc! { "a": [5, { "1": 4 }, 3] };
        assert_eq!(
            vals(&d3, "a.1", LeafArrays::Traverse),
            vec![s("4", Some(1)), s("{ 1: 4 }", None)]
        );
        let n1 = rawdoc! { "a": [5, { "b": 4 }, 3] };
        assert_eq!(
            vals(&n1, "a.1.b", LeafArrays::Traverse),
            vec![(None, Some(1)), s("4", None)]
        );
        let n2 = rawdoc! { "a": [5, [{ "b": 4 }], 3] };
        assert_eq!(
            vals(&n2, "a.1.b", LeafArrays::Traverse),
            vec![s("4", Some(0))]
        );
    }

    #[test]
    fn mongo_offsets() {
        let d = rawdoc! { "a": [{ "b": [2, 3] }, { "b": [4, 5] }] };
        assert_eq!(
            vals(&d, "a.b", LeafArrays::Traverse),
            vec![
                s("2", Some(0)),
                s("3", Some(0)),
                s("[ 2, 3 ]", Some(0)),
                s("4", Some(1)),
                s("5", Some(1)),
                s("[ 4, 5 ]", Some(1)),
            ]
        );
        // SERVER-14886: explicit and implicit traversal at once.
        assert_eq!(
            vals(&d, "a.0.b", LeafArrays::Traverse),
            vec![
                (None, Some(0)),
                s("2", Some(0)),
                s("3", Some(1)),
                s("[ 2, 3 ]", None),
                (None, Some(1)),
            ]
        );
    }

    #[test]
    fn long_array_without_matches() {
        // SERVER-15899: {a: [{b: []}, …]} with "a.b.x" yields nothing, quickly.
        let mut arr = bson::RawArrayBuf::new();
        for _ in 0..100_000 {
            arr.push(rawdoc! { "b": [] });
        }
        let mut d = bson::RawDocumentBuf::new();
        d.append(bson::raw::cstr!("a"), arr);
        assert!(vals(&d, "a.b.x", LeafArrays::Traverse).is_empty());
    }

    #[test]
    fn exact_and_positions() {
        let d = rawdoc! { "a": [{ "b": 1 }, { "b": 2 }] };
        let got = get_exact(&d, &FieldPath::new("a.1.b"));
        assert_eq!(got.map(cairn_storage::display::value), Some("2".into()));
        assert!(get_exact(&d, &FieldPath::new("a.b")).is_none());
        assert_eq!(parse_position("0"), Some(0));
        assert_eq!(parse_position("01"), None);
        assert_eq!(parse_position(""), None);
        assert!(FieldPath::new("a.b").is_prefix_of(&FieldPath::new("a.b.c")));
        assert!(!FieldPath::new("a.b").is_prefix_of(&FieldPath::new("a.bc")));
        assert_eq!(FieldPath::new("a..b").parts(), ["a", "", "b"]);
    }
}
