//! `$unwind`: one output document per element of an array field (DocumentSourceUnwind).
//!
//! `{$unwind: "$path"}` or `{$unwind: {path, includeArrayIndex, preserveNullAndEmptyArrays}}`.
//! The path is read without entering arrays (`a.b` where `a` is an array is missing). Each
//! element replaces the array in a copy of the document; `includeArrayIndex` adds the element's
//! index as a long (null when the value was not unwound). A non-array value passes through as
//! a one-element array; null, missing and empty arrays are dropped unless
//! `preserveNullAndEmptyArrays` (an empty array's field is then removed).
//!
//! When the stages after it read only some top-level fields ([`Unwind::keep`], set by the
//! optimizer from the rest of the pipeline's dependencies), each output document holds only
//! those fields and the unwound one, built straight from the input document and the element:
//! no copy of the fields nothing reads, and no owned copy of each element. The rest of the
//! pipeline cannot tell the difference (it reads only those fields), and the documents it
//! holds are smaller.
//!
//! A consuming stage that drains its whole input (`$group`, through [`DocStream::drain`])
//! gets the outputs of a top-level path without `includeArrayIndex` built one after the
//! other in one reused buffer, each element's bytes copied as they are: no allocation per
//! output; it drains its own input in turn, so a `$cursor` below may read ahead on a second
//! thread ([`crate::agg::cursor`]). A `$lookup` that absorbed this stage builds its outputs with
//! [`Unwind::lookup_output`] and [`Unwind::lookup_no_match`].
//!
//! Errors: 15981 bad specification type, 28812 no path, 28808 path not a string, 28818 path
//! without `$`, 28809 bad `preserveNullAndEmptyArrays`, 28810 bad `includeArrayIndex`, 28822
//! `includeArrayIndex` with `$`, 28811 unknown option, 16410/15998/40353 bad field paths.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::agg::doc::{
    NewValue, RawElements, get_nested, set_nested, with_top_level, write_top_level,
};
use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};
use crate::expr::field::Found;
use crate::sort::validate_field_path;

/// A parsed `$unwind`.
#[derive(Debug, Clone)]
pub struct Unwind {
    /// The path (without `$`).
    pub path: Vec<String>,
    /// `includeArrayIndex`.
    pub index: Option<Vec<String>>,
    /// `preserveNullAndEmptyArrays`.
    pub preserve: bool,
    /// The top-level fields the later stages read, when they are known (see the module
    /// docs); `None` keeps every field.
    pub keep: Option<Vec<String>>,
}

impl Unwind {
    /// This `$unwind` keeping only `fields` (top-level names) besides the unwound one.
    pub(crate) fn keeping(&self, fields: Vec<String>) -> Unwind {
        Unwind {
            path: self.path.clone(),
            index: self.index.clone(),
            preserve: self.preserve,
            keep: Some(fields),
        }
    }

    /// Whether the output keeps the top-level field `name`.
    fn keeps(&self, name: &str) -> bool {
        match &self.keep {
            None => true,
            Some(k) => self.path.first().is_some_and(|p| p == name) || k.iter().any(|f| f == name),
        }
    }
}

fn path_of(s: &str) -> Result<Vec<String>> {
    let Some(rest) = s.strip_prefix('$') else {
        return Err(loc(
            28818,
            format!("path option to $unwind stage should be prefixed with a '$': {s}"),
        ));
    };
    Ok(validate_field_path(rest)?
        .into_iter()
        .map(str::to_string)
        .collect())
}

/// Parses `$unwind`.
pub fn parse(arg: RawBsonRef<'_>, _cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let type_name = |v: RawBsonRef<'_>| cairn_storage::display::type_name(v);
    let stage = match arg {
        RawBsonRef::String(s) => {
            if s.is_empty() {
                return Err(loc(28812, "no path specified to $unwind stage"));
            }
            Unwind {
                path: path_of(s)?,
                index: None,
                preserve: false,
                keep: None,
            }
        }
        RawBsonRef::Document(d) => {
            let (mut path, mut index, mut preserve) = (None, None, false);
            for el in d.iter() {
                let (k, v) = el.map_err(|e| crate::error::QueryError::BadValue(e.to_string()))?;
                match k.as_str() {
                    "path" => {
                        let RawBsonRef::String(s) = v else {
                            return Err(loc(
                                28808,
                                format!(
                                    "expected a string as the path for $unwind stage, got {}",
                                    type_name(v)
                                ),
                            ));
                        };
                        if s.is_empty() {
                            return Err(loc(28812, "no path specified to $unwind stage"));
                        }
                        path = Some(path_of(s)?);
                    }
                    "preserveNullAndEmptyArrays" => {
                        let RawBsonRef::Boolean(b) = v else {
                            return Err(loc(
                                28809,
                                format!(
                                    "expected a boolean for the preserveNullAndEmptyArrays \
                                     option to $unwind stage, got {}",
                                    type_name(v)
                                ),
                            ));
                        };
                        preserve = b;
                    }
                    "includeArrayIndex" => {
                        let RawBsonRef::String(s) = v else {
                            return Err(loc(
                                28810,
                                format!(
                                    "expected a non-empty string for the includeArrayIndex \
                                     option to $unwind stage, got {}",
                                    type_name(v)
                                ),
                            ));
                        };
                        if s.is_empty() {
                            return Err(loc(
                                28810,
                                "expected a non-empty string for the includeArrayIndex option \
                                 to $unwind stage, got string",
                            ));
                        }
                        if s.starts_with('$') {
                            return Err(loc(
                                28822,
                                format!(
                                    "includeArrayIndex option to $unwind stage should not be \
                                     prefixed with a '$': {s}"
                                ),
                            ));
                        }
                        index = Some(
                            validate_field_path(s)?
                                .into_iter()
                                .map(str::to_string)
                                .collect(),
                        );
                    }
                    other => {
                        return Err(loc(
                            28811,
                            format!("unrecognized option to $unwind stage: {other}"),
                        ));
                    }
                }
            }
            let Some(path) = path else {
                return Err(loc(28812, "no path specified to $unwind stage"));
            };
            Unwind {
                path,
                index,
                preserve,
                keep: None,
            }
        }
        other => {
            return Err(loc(
                15981,
                format!(
                    "expected either a string or an object as specification for $unwind \
                     stage, got {}",
                    type_name(other)
                ),
            ));
        }
    };
    Ok(vec![Arc::new(stage)])
}

impl Stage for Unwind {
    fn name(&self) -> &'static str {
        "$unwind"
    }

    fn serialize(&self) -> RawBson {
        let mut d = RawDocumentBuf::new();
        d.append(
            bson::raw::cstr!("path"),
            format!("${}", self.path.join(".")),
        );
        if let Some(i) = &self.index {
            d.append(bson::raw::cstr!("includeArrayIndex"), i.join("."));
        }
        if self.preserve {
            d.append(bson::raw::cstr!("preserveNullAndEmptyArrays"), true);
        }
        RawBson::Document(d)
    }

    fn deps(&self, deps: &mut Deps) -> DepsState {
        deps.add_path(&self.path.join("."));
        DepsState::SeeNext
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(UnwindStream {
            stage: self,
            input,
            ready: VecDeque::new(),
            current: None,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct UnwindStream {
    stage: Arc<Unwind>,
    input: Box<dyn DocStream>,
    /// Output documents built ahead (all of one input document's, when they are small).
    ready: VecDeque<RawDocumentBuf>,
    /// The document being unwound element by element, its array and the next index (when
    /// building its outputs at once would take too much memory).
    current: Option<(RawDocumentBuf, Vec<RawBson>, usize)>,
}

/// Outputs of one input document built at once when they take at most this many bytes
/// (otherwise they are built one at a time).
const AHEAD_BYTES: usize = 256 * 1024;

impl UnwindStream {
    fn with_index(&self, d: RawDocumentBuf, i: Option<usize>) -> Result<RawDocumentBuf> {
        with_index(&self.stage, d, i)
    }
}

/// `d` with `includeArrayIndex` set (the position as a long, null when not unwound).
fn with_index(stage: &Unwind, d: RawDocumentBuf, i: Option<usize>) -> Result<RawDocumentBuf> {
    match &stage.index {
        None => Ok(d),
        Some(p) => {
            let v = match i {
                Some(i) => RawBson::Int64(i as i64),
                None => RawBson::Null,
            };
            set_nested(&d, p, Some(v.as_raw_bson_ref()))
        }
    }
}

/// What an input document whose path holds no elements to unwind becomes.
#[derive(Clone, Copy)]
enum Unwound {
    /// An empty array.
    EmptyArray,
    /// Missing, null or undefined.
    Nothing,
    /// Any other non-array value.
    Scalar,
}

/// The one output (or none) for `doc` whose path holds no elements: with
/// `preserveNullAndEmptyArrays` an empty array is removed and null or missing kept; a
/// non-array value always passes as it is; the index, when asked, is null.
fn without_elements(
    stage: &Unwind,
    doc: RawDocumentBuf,
    kind: Unwound,
) -> Result<Option<RawDocumentBuf>> {
    let out = match kind {
        Unwound::EmptyArray if stage.preserve => {
            trimmed(stage, set_nested(&doc, &stage.path, None)?)?
        }
        Unwound::Nothing if stage.preserve => trimmed(stage, doc)?,
        Unwound::Scalar => trimmed(stage, doc)?,
        Unwound::EmptyArray | Unwound::Nothing => return Ok(None),
    };
    with_index(stage, out, None).map(Some)
}

impl Unwind {
    /// What a `$lookup` whose `as` is this stage's path, followed by this stage, outputs for
    /// the input `doc` and `m`, the `i`-th of its matches (the `$lookup` absorbing this stage
    /// builds it directly): `doc` (kept fields) with the path set to `m`, and the index.
    pub(crate) fn lookup_output(
        &self,
        doc: &RawDocument,
        m: &RawDocument,
        i: usize,
    ) -> Result<RawDocumentBuf> {
        if let ([name], None) = (self.path.as_slice(), &self.index) {
            return with_top_level(
                doc,
                name,
                NewValue::<std::iter::Empty<&RawDocument>>::Doc(m),
                |k| self.keeps(k),
            );
        }
        let out = match &self.keep {
            None => set_nested(doc, &self.path, Some(RawBsonRef::Document(m)))?,
            Some(_) => set_nested(&kept(self, doc)?, &self.path, Some(RawBsonRef::Document(m)))?,
        };
        with_index(self, out, Some(i))
    }

    /// The same for an input document without matches: nothing, or with
    /// `preserveNullAndEmptyArrays` the document as this stage leaves an empty array (the
    /// path's parents created, the field removed, a null index).
    pub(crate) fn lookup_no_match(&self, doc: &RawDocument) -> Result<Option<RawDocumentBuf>> {
        if !self.preserve {
            return Ok(None);
        }
        let empty = bson::RawArrayBuf::new();
        let looked_up = set_nested(doc, &self.path, Some(RawBsonRef::Array(&empty)))?;
        without_elements(self, looked_up, Unwound::EmptyArray)
    }
}

/// `doc` without the fields nothing after the stage reads.
fn trimmed(stage: &Unwind, doc: RawDocumentBuf) -> Result<RawDocumentBuf> {
    if stage.keep.is_none() {
        return Ok(doc);
    }
    kept(stage, &doc)
}

/// A copy of the fields of `doc` the stage keeps.
fn kept(stage: &Unwind, doc: &RawDocument) -> Result<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    for el in doc.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        if stage.keeps(k.as_str()) {
            out.append(k, v);
        }
    }
    Ok(out)
}

/// `doc` (kept fields only) with the unwound path set to `el`.
fn one(stage: &Unwind, doc: &RawDocument, el: RawBsonRef<'_>) -> Result<RawDocumentBuf> {
    let path = &stage.path;
    if path.len() == 1 {
        // A top-level array: each kept field is copied once, the element in its place.
        let mut out = RawDocumentBuf::new();
        let mut found = false;
        for f in doc.iter() {
            let (k, v) = f.map_err(|e| QueryError::BadValue(e.to_string()))?;
            if !found && path.first().is_some_and(|p| p == k.as_str()) {
                found = true;
                out.append(k, el);
            } else if stage.keeps(k.as_str()) {
                out.append(k, v);
            }
        }
        return Ok(out);
    }
    match &stage.keep {
        None => set_nested(doc, path, Some(el)),
        Some(_) => set_nested(&kept(stage, doc)?, path, Some(el)),
    }
}

impl DocStream for UnwindStream {
    /// The outputs one by one, each built in one reused buffer when the path is a top-level
    /// field and no index is added (the common `$unwind` + `$group`); otherwise as
    /// [`DocStream::next`] builds them.
    fn drain(
        &mut self,
        cx: &ExecCx<'_>,
        f: &mut dyn FnMut(&RawDocument) -> Result<()>,
    ) -> Result<()> {
        let stage = self.stage.clone();
        let name = match (stage.path.as_slice(), &stage.index) {
            ([name], None) if self.ready.is_empty() && self.current.is_none() => name,
            _ => {
                while let Some(d) = self.next(cx)? {
                    f(&d)?;
                }
                return Ok(());
            }
        };
        let mut buf = Vec::new();
        // The input drains too, so a `$cursor` below may read ahead on a second thread.
        self.input.drain(cx, &mut |doc| {
            let found = match crate::expr::field::field_or_array(doc, name) {
                Found::Array(arr) => Ok(arr),
                Found::Value(v) => Err(v),
            };
            match found {
                Ok(arr) => {
                    let mut n = 0usize;
                    for el in RawElements::new(arr) {
                        let el = el?;
                        n += 1;
                        write_top_level(
                            &mut buf,
                            doc,
                            name,
                            NewValue::<std::iter::Empty<&RawDocument>>::Raw(
                                el.kind(),
                                el.value_bytes(),
                            ),
                            |k| stage.keeps(k),
                        )?;
                        let out = RawDocument::from_bytes(&buf)
                            .map_err(|e| QueryError::BadValue(e.to_string()))?;
                        f(out)?;
                    }
                    if n == 0
                        && let Some(out) =
                            without_elements(&stage, doc.to_owned(), Unwound::EmptyArray)?
                    {
                        f(&out)?;
                    }
                }
                Err(None | Some(RawBsonRef::Null) | Some(RawBsonRef::Undefined)) => {
                    if let Some(out) = without_elements(&stage, doc.to_owned(), Unwound::Nothing)? {
                        f(&out)?;
                    }
                }
                Err(Some(_)) => {
                    if let Some(out) = without_elements(&stage, doc.to_owned(), Unwound::Scalar)? {
                        f(&out)?;
                    }
                }
            }
            Ok(())
        })
    }

    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        loop {
            if let Some(d) = self.ready.pop_front() {
                return Ok(Some(d));
            }
            if let Some((doc, arr, i)) = &mut self.current {
                if let Some(el) = arr.get(*i) {
                    let idx = *i;
                    *i += 1;
                    let out = one(&self.stage, doc, el.as_raw_bson_ref())?;
                    return self.with_index(out, Some(idx)).map(Some);
                }
                self.current = None;
            }
            let Some(doc) = self.input.next(cx)? else {
                return Ok(None);
            };
            match get_nested(&doc, &self.stage.path) {
                Some(RawBsonRef::Array(a)) => {
                    let mut n = 0usize;
                    for el in a {
                        el.map_err(|e| QueryError::BadValue(e.to_string()))?;
                        n += 1;
                    }
                    if n == 0 {
                        match without_elements(&self.stage, doc, Unwound::EmptyArray)? {
                            Some(out) => return Ok(Some(out)),
                            None => continue,
                        }
                    }
                    if n.saturating_mul(doc.as_bytes().len()) <= AHEAD_BYTES {
                        for (i, el) in a.into_iter().enumerate() {
                            let el = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
                            let out = one(&self.stage, &doc, el)?;
                            self.ready.push_back(self.with_index(out, Some(i))?);
                        }
                        continue;
                    }
                    let items: Vec<RawBson> = a
                        .into_iter()
                        .map(|e| e.map(RawBson::from))
                        .collect::<std::result::Result<_, _>>()
                        .map_err(|e| QueryError::BadValue(e.to_string()))?;
                    self.current = Some((doc, items, 0));
                }
                None | Some(RawBsonRef::Null) | Some(RawBsonRef::Undefined) => {
                    if let Some(out) = without_elements(&self.stage, doc, Unwound::Nothing)? {
                        return Ok(Some(out));
                    }
                }
                Some(_) => {
                    return without_elements(&self.stage, doc, Unwound::Scalar);
                }
            }
        }
    }
}
