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
use bson::{RawArray, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::elements::Elements;

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

/// Whether two values are the same value of the same type. (`RawBsonRef`'s equality compares
/// exactly what the owned `RawBson`s would, without copying either side.)
fn same(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> bool {
    a == b
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
                if mode == Mode::Operators && appended(out, at, a, b) {
                    return;
                }
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

/// The common case of `$push` and `$addToSet`, described without reading both arrays
/// through the bson crate: `b` is the non-empty `a` with elements appended (its elements begin
/// with all of `a`'s, byte for byte). Reports the new elements at their paths, as [`arrays`]
/// does for this case, and returns `true`; returns `false` having reported nothing when the
/// case does not apply or the light walk ([`crate::elements`]) is unsure of `a`.
fn appended(out: &mut Description, at: &str, a: &RawArray, b: &RawArray) -> bool {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let (Some(a_body), Some(b_body)) = (
        ab.get(4..ab.len().saturating_sub(1)),
        bb.get(4..bb.len().saturating_sub(1)),
    ) else {
        return false;
    };
    if a_body.is_empty() || b_body.len() <= a_body.len() || !b_body.starts_with(a_body) {
        return false;
    }
    let Some(kept) = Elements::new(ab).count() else {
        return false;
    };
    // The appended elements, read (and checked) by the bson crate from a document framing
    // just them.
    let tail = b_body.get(a_body.len()..).unwrap_or_default();
    let Ok(len) = i32::try_from(tail.len() + 5) else {
        return false;
    };
    let mut framed = Vec::with_capacity(tail.len() + 5);
    framed.extend_from_slice(&len.to_le_bytes());
    framed.extend_from_slice(tail);
    framed.push(0);
    let Ok(added) = RawDocument::from_bytes(&framed) else {
        return false;
    };
    let mut values = Vec::new();
    for el in added.iter() {
        match el {
            Ok((_, v)) => values.push(v),
            Err(_) => return false,
        }
    }
    let mut digits = itoa::Buffer::new();
    for (i, v) in values.into_iter().enumerate() {
        out.updated
            .push((path(at, digits.format(kept + i)), v.into()));
    }
    true
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
    let mut digits = itoa::Buffer::new();
    for (i, y) in b.iter().enumerate() {
        let x = a.get(i).copied();
        if x.is_some_and(|x| same(x, *y)) {
            continue;
        }
        let p = path(at, digits.format(i));
        match x {
            Some(x) => describe(out, &p, Some(x), Some(*y), mode),
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

    /// Appending to an array (the fast path over bytes) describes exactly what the
    /// element-by-element comparison describes, for every kind of kept and appended
    /// element, including kinds the light walk does not size (then the general path runs).
    #[test]
    fn appended_elements_match_the_general_path() {
        let kinds: Vec<Bson> = vec![
            1.into(),
            2.5.into(),
            "s".into(),
            "".into(),
            Bson::Symbol("y".into()),
            doc! {"x": [1, {"y": 2}]}.into(),
            Bson::Array(vec![1.into(), "z".into()]),
            Bson::Null,
            Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: vec![1, 2],
            }),
            Bson::Int64(7),
        ];
        for kept in 0..kinds.len() {
            for added in 1..4 {
                let a: Vec<Bson> = kinds
                    .iter()
                    .cycle()
                    .skip(kept)
                    .take(kept + 1)
                    .cloned()
                    .collect();
                let mut b = a.clone();
                b.extend(kinds.iter().cycle().skip(kept * 3).take(added).cloned());
                let o = RawBson::try_from(Bson::Array(a)).unwrap();
                let n = RawBson::try_from(Bson::Array(b)).unwrap();
                let (RawBsonRef::Array(ra), RawBsonRef::Array(rb)) =
                    (o.as_raw_bson_ref(), n.as_raw_bson_ref())
                else {
                    unreachable!()
                };
                let mut fast = Description::default();
                describe(
                    &mut fast,
                    "f",
                    Some(o.as_raw_bson_ref()),
                    Some(n.as_raw_bson_ref()),
                    Mode::Operators,
                );
                let mut general = Description::default();
                let va: Vec<RawBsonRef<'_>> = ra.into_iter().flatten().collect();
                let vb: Vec<RawBsonRef<'_>> = rb.into_iter().flatten().collect();
                arrays(
                    &mut general,
                    "f",
                    &va,
                    &vb,
                    n.as_raw_bson_ref(),
                    Mode::Operators,
                );
                assert_eq!(
                    fast.to_document(),
                    general.to_document(),
                    "{kept} kept, {added} added"
                );
                assert!(!fast.is_empty());
            }
        }
        // Not an append: an element changed, or the old array was empty.
        let mut d = Description::default();
        let o = RawBson::try_from(Bson::Array(vec![1.into(), 2.into()])).unwrap();
        let n = RawBson::try_from(Bson::Array(vec![1.into(), 3.into(), 4.into()])).unwrap();
        describe(
            &mut d,
            "f",
            Some(o.as_raw_bson_ref()),
            Some(n.as_raw_bson_ref()),
            Mode::Operators,
        );
        assert_eq!(
            bson::Document::try_from(d.to_document().as_ref()).unwrap(),
            desc(doc! {"f": [1, 3, 4]}, vec![], vec![])
        );
    }
}
