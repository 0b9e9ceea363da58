//! Update descriptions: what an update changed, as change streams report it
//! (`updateDescription: {updatedFields, removedFields, truncatedArrays}`).
//!
//! MongoDB derives them from the update's oplog diff. [`describe`] computes the same from the
//! old and new values of the top-level fields an update changed, following how MongoDB's
//! update operators log their changes:
//! - a field that is new, or whose type changes, is reported whole at its path
//!   (`{$set: {a: {b: 1}}}` creating `a` gives `updatedFields: {a: {b: 1}}`);
//! - a removed field is in `removedFields`;
//! - in objects present on both sides the description descends, so a `$set`/`$inc` of an
//!   existing nested field gives its dotted path (`"a.b"`);
//! - an array whose existing elements keep their values and that only grew is reported by
//!   the new elements' paths (`"arr.3"`: `$push` appending to a non-empty array); one of the
//!   same length is reported element by element (`{$set: {"arr.1": v}}` gives `"arr.1"`,
//!   descending into documents); any other array change (`$pull`, `$pop`, `$push` with
//!   `$position`/`$sort`/`$slice`, growing an empty array) is reported as the whole array.
//!
//! Known difference: MongoDB's `$addToSet` logs the whole array where this reports the
//! appended element's path (both describe the same new document). Pipeline-style updates
//! (`generic` mode) report array shrinkage as `truncatedArrays`, as MongoDB's generic diff does.

use bson::raw::CStr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

/// How array changes are described.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// As update operators log them (see the module doc).
    Operators,
    /// As MongoDB's generic document diff describes them (pipeline updates): arrays are
    /// compared element by element, shrinkage is `truncatedArrays`.
    Generic,
}

/// An update description being built.
#[derive(Debug, Default)]
pub struct Description {
    updated: Vec<(String, RawBson)>,
    removed: Vec<String>,
    truncated: Vec<(String, u32)>,
}

impl Description {
    /// `{updatedFields, removedFields, truncatedArrays}`.
    pub fn to_document(&self) -> RawDocumentBuf {
        let mut updated = RawDocumentBuf::new();
        for (k, v) in &self.updated {
            if let Ok(k) = <&CStr>::try_from(k.as_str()) {
                updated.append(k, v.clone());
            }
        }
        let mut removed = RawArrayBuf::new();
        for k in &self.removed {
            removed.push(k.as_str());
        }
        let mut truncated = RawArrayBuf::new();
        for (k, n) in &self.truncated {
            truncated.push(bson::rawdoc! {"field": k.as_str(), "newSize": i32::try_from(*n).unwrap_or(i32::MAX)});
        }
        bson::rawdoc! {
            "updatedFields": updated,
            "removedFields": removed,
            "truncatedArrays": truncated,
        }
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.updated.is_empty() && self.removed.is_empty() && self.truncated.is_empty()
    }
}

fn path(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

fn same(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> bool {
    a.element_type() == b.element_type() && RawBson::from(a) == RawBson::from(b)
}

/// Adds the change of one field at `at` from `old` (`None`: absent) to `new` (`None`:
/// removed).
pub fn describe(
    out: &mut Description,
    at: &str,
    old: Option<RawBsonRef<'_>>,
    new: Option<RawBsonRef<'_>>,
    mode: Mode,
) {
    match (old, new) {
        (None, None) => {}
        (Some(_), None) => out.removed.push(at.to_string()),
        (None, Some(n)) => out.updated.push((at.to_string(), n.into())),
        (Some(o), Some(n)) => match (o, n) {
            (RawBsonRef::Document(a), RawBsonRef::Document(b)) => objects(out, at, a, b, mode),
            (RawBsonRef::Array(a), RawBsonRef::Array(b)) => {
                let a: Vec<RawBsonRef<'_>> = a.into_iter().flatten().collect();
                let b: Vec<RawBsonRef<'_>> = b.into_iter().flatten().collect();
                arrays(out, at, &a, &b, n, mode)
            }
            _ if same(o, n) => {}
            _ => out.updated.push((at.to_string(), n.into())),
        },
    }
}

fn objects(out: &mut Description, at: &str, a: &RawDocument, b: &RawDocument, mode: Mode) {
    for (k, v) in a.iter().flatten() {
        if b.get(k.as_str()).ok().flatten().is_none() {
            let _ = v;
            out.removed.push(path(at, k.as_str()));
        }
    }
    for (k, v) in b.iter().flatten() {
        let old = a.get(k.as_str()).ok().flatten();
        describe(out, &path(at, k.as_str()), old, Some(v), mode);
    }
}

fn arrays(
    out: &mut Description,
    at: &str,
    a: &[RawBsonRef<'_>],
    b: &[RawBsonRef<'_>],
    whole: RawBsonRef<'_>,
    mode: Mode,
) {
    let common = a.len().min(b.len());
    let prefix_kept = a.iter().zip(b).take(common).all(|(x, y)| same(*x, *y));
    let element_wise = match mode {
        Mode::Generic => true,
        Mode::Operators => {
            !a.is_empty() && ((b.len() > a.len() && prefix_kept) || b.len() == a.len())
        }
    };
    if !element_wise {
        if !(a.len() == b.len() && prefix_kept) {
            out.updated.push((at.to_string(), whole.into()));
        }
        return;
    }
    if b.len() < a.len() {
        out.truncated
            .push((at.to_string(), u32::try_from(b.len()).unwrap_or(u32::MAX)));
    }
    for (i, y) in b.iter().enumerate() {
        let p = path(at, &i.to_string());
        match a.get(i) {
            Some(x) => describe(out, &p, Some(*x), Some(*y), mode),
            None => out.updated.push((p, (*y).into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use bson::{Bson, doc};

    use super::*;

    fn run(old: Bson, new: Bson, mode: Mode) -> bson::Document {
        let o = RawBson::try_from(old).unwrap();
        let n = RawBson::try_from(new).unwrap();
        let mut d = Description::default();
        describe(
            &mut d,
            "f",
            Some(o.as_raw_bson_ref()),
            Some(n.as_raw_bson_ref()),
            mode,
        );
        bson::Document::try_from(d.to_document().as_ref()).unwrap()
    }

    fn desc(
        updated: bson::Document,
        removed: Vec<&str>,
        truncated: Vec<bson::Document>,
    ) -> bson::Document {
        doc! {"updatedFields": updated, "removedFields": removed, "truncatedArrays": truncated}
    }

    #[test]
    fn operators() {
        let m = Mode::Operators;
        // $inc of a nested field
        assert_eq!(
            run(
                Bson::Document(doc! {"b": 1, "c": 2}),
                Bson::Document(doc! {"b": 2, "c": 2}),
                m
            ),
            desc(doc! {"f.b": 2}, vec![], vec![])
        );
        // $unset of a nested field, $set creating one
        assert_eq!(
            run(
                Bson::Document(doc! {"b": 1}),
                Bson::Document(doc! {"c": {"d": 1}}),
                m
            ),
            desc(doc! {"f.c": {"d": 1}}, vec!["f.b"], vec![])
        );
        // $push appending
        assert_eq!(
            run(
                Bson::Array(vec![1.into()]),
                Bson::Array(vec![1.into(), 2.into(), 3.into()]),
                m
            ),
            desc(doc! {"f.1": 2, "f.2": 3}, vec![], vec![])
        );
        // $push onto an empty array, $pull, $position: the whole array
        assert_eq!(
            run(Bson::Array(vec![]), Bson::Array(vec![1.into()]), m),
            desc(doc! {"f": [1]}, vec![], vec![])
        );
        assert_eq!(
            run(
                Bson::Array(vec![1.into(), 2.into()]),
                Bson::Array(vec![1.into()]),
                m
            ),
            desc(doc! {"f": [1]}, vec![], vec![])
        );
        assert_eq!(
            run(
                Bson::Array(vec![1.into(), 2.into()]),
                Bson::Array(vec![0.into(), 1.into(), 2.into()]),
                m
            ),
            desc(doc! {"f": [0, 1, 2]}, vec![], vec![])
        );
        // $set of one element
        assert_eq!(
            run(
                Bson::Array(vec![1.into(), 2.into()]),
                Bson::Array(vec![1.into(), 5.into()]),
                m
            ),
            desc(doc! {"f.1": 5}, vec![], vec![])
        );
        // type changes are whole values; 1 → 1.0 is a change
        assert_eq!(
            run(Bson::Int32(1), Bson::Double(1.0), m),
            desc(doc! {"f": 1.0}, vec![], vec![])
        );
        assert_eq!(
            run(Bson::Int32(1), Bson::Int32(1), m),
            desc(doc! {}, vec![], vec![])
        );
    }

    #[test]
    fn generic_truncates() {
        assert_eq!(
            run(
                Bson::Array(vec![1.into(), 2.into(), 3.into()]),
                Bson::Array(vec![1.into(), 2.into()]),
                Mode::Generic
            ),
            desc(doc! {}, vec![], vec![doc! {"field": "f", "newSize": 2}])
        );
    }
}
