//! Explaining why a document failed validation: MongoDB's `errInfo.details`
//! (src/mongo/db/matcher/doc_validation_error.cpp), generated from the annotated trees of
//! `super::tree` and [`crate::jsonschema`].
//!
//! The walk mirrors MongoDB's three visitors over the match-expression tree: every node
//! visited pushes a *frame* (its error under construction, the sub-document it applies to,
//! and whether the error is told normally or — under `$not`/`$nor` — inverted) and decides
//! from its parent whether it contributes:
//! - a node whose parent needs to know which children failed (`$and` normally, `$or` and
//!   `$nor` inverted, `oneOf`) contributes only if it fails (or matches, when inverted) —
//!   evaluated here, an evaluation error counting as failing;
//! - a node under a parent that contributes nothing, or annotated to be ignored, contributes
//!   nothing;
//! - leaves explain themselves (`reason`, `consideredValue(s)`, types); logical nodes collect
//!   their children's explanations under MongoDB's field names (`clausesNotSatisfied`,
//!   `schemaRulesNotSatisfied`, `propertiesNotSatisfied`, …);
//! - `$jsonSchema` keywords that apply only to one type stay silent when the value has
//!   another type or is missing (the `type`/`required` nodes explain that instead).
//!
//! Field order, numeric types (`index` and `itemIndex` as MongoDB appends them) and the
//! considered-values cap ([`MAX_CONSIDERED_VALUES`], then `consideredValuesTruncated`) follow
//! MongoDB. An explanation above [`MAX_ERROR_BYTES`] is regenerated without `specifiedAs` and
//! considered values (`truncated: true`), and replaced by a note if still too large.

use bson::raw::cstr;
use bson::spec::{BinarySubtype, ElementType};
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::display::element_type_name;

use super::tree::{Annotation, LeafKind, Mode, VNode};
use crate::error::QueryError;
use crate::expr::Variables;
use crate::jsonschema::{Node, Scope, Subject, Test, field_count};
use crate::path::{self, FieldPath, LeafArrays};

/// Values listed in `consideredValues` before `consideredValuesTruncated`
/// (`internalQueryMaxDocValidationErrorConsideredValues`).
pub const MAX_CONSIDERED_VALUES: usize = 10;

/// Largest explanation kept whole (`internalQueryMaxDocValidationErrorSize`).
pub const MAX_ERROR_BYTES: usize = 12 * 1024 * 1024;

/// Deepest explanation (MongoDB allows the BSON depth limit minus 10).
const MAX_ERROR_DEPTH: usize = 190;

/// Names an error code (`codeName`), for evaluation errors reported inside an explanation.
pub type CodeNamer<'a> = &'a dyn Fn(i32) -> String;

/// The `errInfo` of a document `doc` that failed `validator`: `{failingDocumentId,
/// [truncated], details}`, or a note when no explanation can be produced.
pub(crate) fn error_info(
    validator: &VNode,
    doc: &RawDocument,
    vars: &Variables,
    code_name: CodeNamer<'_>,
) -> RawDocumentBuf {
    let id = doc.get("_id").ok().flatten();
    let with_id = || {
        let mut d = RawDocumentBuf::new();
        if let Some(id) = id {
            d.append(cstr!("failingDocumentId"), id);
        }
        d
    };
    if validator.has_unannotated() {
        let mut d = with_id();
        d.append(
            cstr!("note"),
            "failed to generate document validation error",
        );
        let mut details = RawDocumentBuf::new();
        details.append(cstr!("code"), 4994600);
        details.append(cstr!("codeName"), code_name(4994600));
        details.append(
            cstr!("errmsg"),
            "Cannot generate validation error details: no annotation found for expression",
        );
        d.append(cstr!("details"), details);
        return d;
    }
    for truncate in [false, true] {
        let mut g = Gen::new(doc, vars, code_name, truncate);
        g.vnode(validator);
        let details = match g.latest {
            Latest::Obj(o) => o,
            _ => RawDocumentBuf::new(),
        };
        let mut d = with_id();
        if truncate {
            d.append(cstr!("truncated"), true);
        }
        d.append(cstr!("details"), details);
        if d.as_bytes().len() > MAX_ERROR_BYTES {
            continue;
        }
        if depth(RawBsonRef::Document(&d)) > MAX_ERROR_DEPTH {
            let mut t = RawDocumentBuf::new();
            t.append(cstr!("reason"), "generated error was too deeply nested");
            t.append(cstr!("truncated"), true);
            return t;
        }
        return d;
    }
    let mut d = with_id();
    d.append(cstr!("note"), "detailed error was too large");
    d
}

/// Nesting depth of a value (a scalar is 0).
fn depth(v: RawBsonRef<'_>) -> usize {
    let mut max = 0;
    let mut stack: Vec<(RawBsonRef<'_>, usize)> = vec![(v, 0)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        match v {
            RawBsonRef::Document(doc) => {
                for (_, c) in doc.iter().flatten() {
                    stack.push((c, d + 1));
                }
            }
            RawBsonRef::Array(a) => {
                for c in a.into_iter().flatten() {
                    stack.push((c, d + 1));
                }
            }
            _ => {}
        }
    }
    max
}

/// Whether a node contributes (MongoDB's `RuntimeState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// It contributes.
    Error,
    /// Neither it nor its children contribute.
    NoError,
    /// It contributes and its children contribute only if they fail.
    NeedChildrenInfo,
    /// It contributes; its children do not.
    IgnoreChildren,
}

/// Whether an error is told as a failure or, under a negation, as a success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Inv {
    Normal,
    Inverted,
}

struct Frame<'d> {
    obj: RawDocumentBuf,
    arr: Vec<RawBson>,
    child: usize,
    state: State,
    values_truncated: bool,
    doc: Scope<'d>,
    inv: Inv,
}

/// The last finished node's explanation.
enum Latest {
    None,
    /// A missing property's name (`required`, dependencies).
    Str(String),
    Obj(RawDocumentBuf),
    /// Several explanations for the parent to absorb (a subschema's rules).
    Arr(Vec<RawBson>),
}

/// Where a leaf's values are.
#[derive(Clone, Copy)]
enum At<'a> {
    /// A dotted path in the document in scope.
    Path(&'a FieldPath),
    /// The value in scope itself (a schema's placeholder).
    Placeholder,
    /// The whole validated document (an empty path).
    Root,
}

fn at_of(s: &Subject) -> At<'_> {
    match s {
        Subject::Field(p) => At::Path(p),
        Subject::Placeholder => At::Placeholder,
    }
}

struct Gen<'d, 'v> {
    root: &'d RawDocument,
    frames: Vec<Frame<'d>>,
    latest: Latest,
    child_input: Option<(Scope<'d>, Inv)>,
    truncate: bool,
    vars: &'v Variables,
    code_name: CodeNamer<'v>,
}

const NUMBERS: &[ElementType] = &[
    ElementType::Int64,
    ElementType::Double,
    ElementType::Decimal128,
    ElementType::Int32,
];
const STRINGS: &[ElementType] = &[
    ElementType::String,
    ElementType::Symbol,
    ElementType::RegularExpression,
];
const ARRAYS: &[ElementType] = &[ElementType::Array];
const STRING_ONLY: &[ElementType] = &[ElementType::String];
const BITS: &[ElementType] = &[
    ElementType::Int32,
    ElementType::Int64,
    ElementType::Double,
    ElementType::Decimal128,
    ElementType::Binary,
];

fn key(s: &str) -> Option<&bson::raw::CStr> {
    <&bson::raw::CStr>::try_from(s).ok()
}

/// BSON `appendNumber(long long)`: an int when it fits in 31 bits, else a long.
fn number(n: usize) -> RawBson {
    match i32::try_from(n) {
        Ok(i) if i < (1 << 30) => RawBson::Int32(i),
        _ => RawBson::Int64(i64::try_from(n).unwrap_or(i64::MAX)),
    }
}

impl<'d, 'v> Gen<'d, 'v> {
    fn new(
        root: &'d RawDocument,
        vars: &'v Variables,
        code_name: CodeNamer<'v>,
        truncate: bool,
    ) -> Gen<'d, 'v> {
        Gen {
            root,
            frames: Vec::new(),
            latest: Latest::None,
            child_input: None,
            truncate,
            vars,
            code_name,
        }
    }

    // ----------------------------------------------------------------------------------------
    // Frames
    // ----------------------------------------------------------------------------------------

    fn top(&mut self) -> &mut Frame<'d> {
        if self.frames.is_empty() {
            self.frames.push(Frame {
                obj: RawDocumentBuf::new(),
                arr: Vec::new(),
                child: 0,
                state: State::NoError,
                values_truncated: false,
                doc: Scope::Doc(self.root),
                inv: Inv::Normal,
            });
        }
        let last = self.frames.len() - 1;
        &mut self.frames[last]
    }

    fn state(&self) -> State {
        self.frames.last().map_or(State::NoError, |f| f.state)
    }

    fn scope(&self) -> Scope<'d> {
        self.frames.last().map_or(Scope::Doc(self.root), |f| f.doc)
    }

    fn inv(&self) -> Inv {
        self.frames.last().map_or(Inv::Normal, |f| f.inv)
    }

    /// `pushNewFrame`: decides from the parent whether the node contributes; `matches`
    /// evaluates the node on the sub-document it applies to.
    fn push(&mut self, ann: &Annotation, matches: &dyn Fn(Scope<'d>) -> Option<bool>) {
        self.latest = Latest::None;
        let frame = |state, doc, inv| Frame {
            obj: RawDocumentBuf::new(),
            arr: Vec::new(),
            child: 0,
            state,
            values_truncated: false,
            doc,
            inv,
        };
        let Some(parent) = self.frames.last() else {
            self.frames
                .push(frame(State::Error, Scope::Doc(self.root), Inv::Normal));
            return;
        };
        let parent_state = parent.state;
        let (doc, inv) = self.child_input.take().unwrap_or((parent.doc, parent.inv));
        if matches!(parent_state, State::NoError | State::IgnoreChildren)
            || ann.mode == Mode::Ignore
        {
            self.frames.push(frame(State::NoError, doc, inv));
            return;
        }
        if parent_state == State::NeedChildrenInfo {
            // An evaluation error counts as contributing.
            let generate = match matches(doc) {
                Some(true) => inv == Inv::Inverted,
                Some(false) => inv == Inv::Normal,
                None => true,
            };
            let state = if generate {
                State::Error
            } else {
                State::NoError
            };
            self.frames.push(frame(state, doc, inv));
            return;
        }
        self.frames.push(frame(State::Error, doc, inv));
    }

    fn set_state(&mut self, s: State) {
        let f = self.top();
        if f.state != State::NoError {
            f.state = s;
        }
    }

    fn should_generate(&self, ann: &Annotation) -> bool {
        ann.mode == Mode::Generate && self.state() != State::NoError
    }

    fn flip(&mut self) {
        let f = self.top();
        f.inv = match f.inv {
            Inv::Normal => Inv::Inverted,
            Inv::Inverted => Inv::Normal,
        };
    }

    fn have_latest(&self) -> bool {
        !matches!(self.latest, Latest::None)
    }

    /// `finishCurrentError`.
    fn finish(&mut self, ann: &Annotation) {
        if self.should_generate(ann)
            && let Some(f) = self.frames.last_mut()
        {
            self.latest = if produces_array(ann.tag) {
                Latest::Arr(std::mem::take(&mut f.arr))
            } else {
                Latest::Obj(std::mem::take(&mut f.obj))
            };
        }
        self.frames.pop();
    }

    /// Appends the last explanation to the frame's object as `details`.
    fn append_latest_details(&mut self) {
        let v: Option<RawBson> = match std::mem::replace(&mut self.latest, Latest::None) {
            Latest::Obj(o) => Some(o.into()),
            Latest::Arr(a) => Some(array(a).into()),
            Latest::Str(s) => Some(s.into()),
            Latest::None => None,
        };
        if let Some(v) = v {
            self.top().obj.append(cstr!("details"), v);
        }
    }

    /// Appends the last explanation to the frame's array (absorbing an array's elements).
    fn append_latest_to_array(&mut self) {
        match std::mem::replace(&mut self.latest, Latest::None) {
            Latest::Obj(o) => self.top().arr.push(o.into()),
            Latest::Str(s) => self.top().arr.push(s.into()),
            Latest::Arr(a) => self.top().arr.extend(a),
            Latest::None => {}
        }
    }

    /// `finishLogicalOperatorChildError`, for the child just walked.
    fn finish_child(&mut self, ann: &Annotation, child: Option<&Annotation>) {
        if self.should_generate(ann) && self.state() != State::IgnoreChildren && self.have_latest()
        {
            if matches!(
                ann.tag,
                "$and" | "$or" | "$nor" | "allOf" | "anyOf" | "oneOf"
            ) {
                let index = self.top().child;
                let mut sub = RawDocumentBuf::new();
                sub.append(cstr!("index"), number(index));
                if let Some(c) = child {
                    schema_annotations(c, &mut sub);
                }
                if let Some(v) = self.take_latest() {
                    sub.append(cstr!("details"), v);
                }
                self.top().arr.push(sub.into());
            } else {
                self.append_latest_to_array();
            }
        }
        self.top().child += 1;
    }

    fn take_latest(&mut self) -> Option<RawBson> {
        match std::mem::replace(&mut self.latest, Latest::None) {
            Latest::Obj(o) => Some(o.into()),
            Latest::Arr(a) => Some(array(a).into()),
            Latest::Str(s) => Some(s.into()),
            Latest::None => None,
        }
    }

    // ----------------------------------------------------------------------------------------
    // Appending
    // ----------------------------------------------------------------------------------------

    fn append_operator_name(&mut self, ann: &Annotation) {
        if !ann.tag.is_empty() {
            self.top().obj.append(cstr!("operatorName"), ann.tag);
        }
    }

    fn append_specified_as(&mut self, ann: &Annotation) {
        if !self.truncate {
            self.top()
                .obj
                .append(cstr!("specifiedAs"), ann.spec.clone());
        }
    }

    /// `appendErrorDetails`: `operatorName`, `specifiedAs`.
    fn append_details(&mut self, ann: &Annotation) {
        self.append_operator_name(ann);
        self.append_specified_as(ann);
    }

    fn has_reason(&mut self) -> bool {
        self.top().obj.get("reason").ok().flatten().is_some()
    }

    /// `appendErrorReason`: the reason for the current inversion, unless one is set.
    fn append_reason(&mut self, normal: &str, inverted: &str) {
        if self.has_reason() {
            return;
        }
        let r = if self.inv() == Inv::Normal {
            normal
        } else {
            inverted
        };
        self.top().obj.append(cstr!("reason"), r);
    }

    fn append_missing(&mut self, values: &Option<Vec<RawBson>>) {
        if values.is_none() {
            self.top().obj.append(cstr!("reason"), "field was missing");
        }
    }

    fn append_type_mismatch(
        &mut self,
        values: &Option<Vec<RawBson>>,
        expected: Option<&[ElementType]>,
    ) {
        let (Some(values), Some(expected)) = (values, expected) else {
            return;
        };
        if self.has_reason() {
            return;
        }
        if values
            .iter()
            .any(|v| expected.contains(&v.as_raw_bson_ref().element_type()))
        {
            return;
        }
        self.top().obj.append(cstr!("reason"), "type did not match");
        self.append_considered_types(&Some(values.clone()));
        let mut names: Vec<&str> = expected.iter().map(|t| element_type_name(*t)).collect();
        names.sort_unstable();
        names.dedup();
        if let [one] = names.as_slice() {
            self.top().obj.append(cstr!("expectedType"), *one);
        } else {
            let mut a = RawArrayBuf::new();
            for n in names {
                a.push(n);
            }
            self.top().obj.append(cstr!("expectedTypes"), a);
        }
    }

    fn append_considered_values(&mut self, values: &Option<Vec<RawBson>>) {
        let Some(values) = values else { return };
        if self.truncate {
            return;
        }
        if let [one] = values.as_slice() {
            self.top().obj.append(cstr!("consideredValue"), one.clone());
        } else {
            self.top()
                .obj
                .append(cstr!("consideredValues"), array(values.clone()));
        }
        if self.top().values_truncated {
            self.top()
                .obj
                .append(cstr!("consideredValuesTruncated"), true);
        }
    }

    fn append_considered_types(&mut self, values: &Option<Vec<RawBson>>) {
        let Some(values) = values else { return };
        if values.is_empty() {
            return;
        }
        let mut names: Vec<&str> = values
            .iter()
            .map(|v| element_type_name(v.as_raw_bson_ref().element_type()))
            .collect();
        names.sort_unstable();
        names.dedup();
        if let [one] = names.as_slice() {
            self.top().obj.append(cstr!("consideredType"), *one);
        } else {
            let mut a = RawArrayBuf::new();
            for n in names {
                a.push(n);
            }
            self.top().obj.append(cstr!("consideredTypes"), a);
        }
    }

    // ----------------------------------------------------------------------------------------
    // Values
    // ----------------------------------------------------------------------------------------

    /// `createValuesArray`: the values `at` reaches in the document in scope (stopping at the
    /// first missing one, at most [`MAX_CONSIDERED_VALUES`]), `None` when the path is missing.
    fn values(&mut self, at: At<'_>, leaf: LeafArrays) -> Option<Vec<RawBson>> {
        let mut out = Vec::new();
        let mut truncated = false;
        match (at, self.scope()) {
            (At::Root, _) => return Some(vec![self.root.to_owned().into()]),
            (At::Path(p), Scope::Doc(d)) => {
                let mut stop = false;
                path::visit(d, p, leaf, |pv| match pv.value {
                    None => std::ops::ControlFlow::Break(()),
                    Some(v) => {
                        if out.len() == MAX_CONSIDERED_VALUES {
                            truncated = true;
                            stop = true;
                            return std::ops::ControlFlow::Break(());
                        }
                        out.push(RawBson::from(v));
                        std::ops::ControlFlow::Continue(())
                    }
                });
                let _ = stop;
            }
            (At::Placeholder, Scope::Elem(v)) => {
                let mut all: Vec<RawBson> = Vec::new();
                match (v, leaf) {
                    (
                        RawBsonRef::Array(a),
                        LeafArrays::Traverse | LeafArrays::TraverseOmitArray,
                    ) => {
                        for el in a.into_iter().map_while(|e| e.ok()) {
                            all.push(el.into());
                        }
                        if leaf == LeafArrays::Traverse {
                            all.push(v.into());
                        }
                    }
                    _ => all.push(v.into()),
                }
                truncated = all.len() > MAX_CONSIDERED_VALUES;
                all.truncate(MAX_CONSIDERED_VALUES);
                out = all;
            }
            _ => return None,
        }
        if truncated {
            self.top().values_truncated = true;
        }
        if out.is_empty() && !self.path_exists(at) {
            return None;
        }
        Some(out)
    }

    /// `pathExists`: the first value the path reaches (traversing arrays) is not missing.
    fn path_exists(&self, at: At<'_>) -> bool {
        match (at, self.scope()) {
            (At::Root | At::Placeholder, _) => true,
            (At::Path(p), Scope::Doc(d)) => {
                let mut exists = false;
                path::visit(d, p, LeafArrays::Traverse, |pv| {
                    exists = pv.value.is_some();
                    std::ops::ControlFlow::Break(())
                });
                exists
            }
            (At::Path(_), Scope::Elem(_)) => false,
        }
    }

    /// `getValueAt` without any array traversal.
    fn value_at(&self, at: At<'_>) -> Option<RawBsonRef<'d>> {
        match (at, self.scope()) {
            (At::Path(p), Scope::Doc(d)) => path::get_exact(d, p),
            (At::Placeholder, Scope::Elem(v)) => Some(v),
            (At::Root, _) => Some(RawBsonRef::Document(self.root)),
            _ => None,
        }
    }

    /// `getValueForKeywordExpressionIfShouldGenerateError`: a `$jsonSchema` keyword explains
    /// itself only for a present value of one of its types, told normally.
    fn keyword_value(
        &self,
        ann: &Annotation,
        at: At<'_>,
        expected: &[ElementType],
    ) -> Option<RawBsonRef<'d>> {
        if !self.should_generate(ann) || self.inv() == Inv::Inverted {
            return None;
        }
        self.value_at(at)
            .filter(|v| expected.contains(&v.element_type()))
    }

    // ----------------------------------------------------------------------------------------
    // Leaves shared by both trees
    // ----------------------------------------------------------------------------------------

    /// `generatePathError`.
    #[allow(clippy::too_many_arguments)]
    fn path_error(
        &mut self,
        ann: &Annotation,
        matches: &dyn Fn(Scope<'d>) -> Option<bool>,
        at: At<'_>,
        normal: &str,
        inverted: &str,
        expected: Option<&[ElementType]>,
        leaf: LeafArrays,
        schema_keyword: bool,
    ) {
        self.push(ann, matches);
        if !self.should_generate(ann) {
            return;
        }
        if schema_keyword
            && self
                .keyword_value(ann, at, expected.unwrap_or(&[]))
                .is_none()
        {
            self.set_state(State::NoError);
            return;
        }
        self.append_details(ann);
        let values = self.values(at, leaf);
        self.append_missing(&values);
        self.append_type_mismatch(&values, expected);
        self.append_reason(normal, inverted);
        self.append_considered_values(&values);
    }

    /// `generateTypeError`.
    fn type_error(
        &mut self,
        ann: &Annotation,
        matches: &dyn Fn(Scope<'d>) -> Option<bool>,
        at: At<'_>,
        leaf: LeafArrays,
        schema_keyword: bool,
    ) {
        self.push(ann, matches);
        if !self.should_generate(ann) {
            return;
        }
        let values = self.values(at, leaf);
        if schema_keyword && values.is_none() {
            self.set_state(State::NoError);
            return;
        }
        self.append_details(ann);
        self.append_missing(&values);
        self.append_reason("type did not match", "type did match");
        self.append_considered_values(&values);
        self.append_considered_types(&values);
    }

    /// `generateAlwaysBooleanError`.
    fn always_boolean(&mut self, ann: &Annotation, value: bool) {
        self.push(ann, &|_| Some(value));
        if self.should_generate(ann) {
            self.append_details(ann);
            self.append_reason(
                "expression always evaluates to false",
                "expression always evaluates to true",
            );
        }
        self.finish(ann);
    }

    /// `preVisitTreeOperator`.
    fn pre_tree(&mut self, ann: &Annotation, matches: &dyn Fn(Scope<'d>) -> Option<bool>) {
        self.push(ann, matches);
        if self.should_generate(ann) {
            if !ann.tag.starts_with('_') {
                self.append_operator_name(ann);
            }
            if ann.tag == "required" {
                self.append_specified_as(ann);
            } else {
                for (k, v) in ann.spec.iter().flatten() {
                    self.top().obj.append(k, v);
                }
            }
        }
    }

    /// `postVisitTreeOperator`.
    fn post_tree(&mut self, ann: &Annotation, details: &str, last_child: Option<&Annotation>) {
        let mut annotations = RawDocumentBuf::new();
        schema_annotations(ann, &mut annotations);
        for (k, v) in annotations.iter().flatten() {
            self.top().obj.append(k, v);
        }
        self.finish_child(ann, last_child);
        if self.should_generate(ann)
            && matches!(ann.tag, "properties" | "_property")
            && self.top().arr.is_empty()
        {
            self.set_state(State::NoError);
        }
        if self.should_generate(ann) && !produces_array(ann.tag) {
            let failed = array(std::mem::take(&mut self.top().arr));
            if let Some(k) = key(details) {
                self.top().obj.append(k, failed);
            }
        }
        self.finish(ann);
    }

    // ----------------------------------------------------------------------------------------
    // Query operators
    // ----------------------------------------------------------------------------------------

    fn vnode(&mut self, n: &VNode) {
        let root = self.root;
        let vars = self.vars;
        let matches = |_: Scope<'d>| n.try_matches(root, vars).ok();
        match n {
            VNode::And(ann, cs) => {
                self.pre_tree(ann, &matches);
                if self.inv() == Inv::Normal {
                    self.set_state(State::NeedChildrenInfo);
                }
                self.children(ann, cs);
                let d = if self.inv() == Inv::Normal {
                    "clausesNotSatisfied"
                } else {
                    "clausesSatisfied"
                };
                self.post_tree(ann, if ann.tag == "$and" { d } else { "details" }, None);
            }
            VNode::Or(ann, cs) => {
                self.pre_tree(ann, &matches);
                if self.inv() == Inv::Inverted {
                    self.set_state(State::NeedChildrenInfo);
                }
                self.children(ann, cs);
                if !self.should_generate(ann) {
                    self.finish(ann);
                } else {
                    let d = if self.inv() == Inv::Normal {
                        "clausesNotSatisfied"
                    } else {
                        "clausesSatisfied"
                    };
                    self.post_tree(ann, d, None);
                }
            }
            VNode::Nor(ann, cs) => {
                self.pre_tree(ann, &matches);
                if self.inv() == Inv::Normal {
                    self.set_state(State::NeedChildrenInfo);
                }
                self.flip();
                self.children(ann, cs);
                let d = if self.inv() == Inv::Normal {
                    "clausesNotSatisfied"
                } else {
                    "clausesSatisfied"
                };
                self.post_tree(ann, d, None);
            }
            VNode::Not(ann, c) => {
                self.pre_tree(ann, &matches);
                self.flip();
                self.vnode(c);
                if self.should_generate(ann) {
                    self.append_latest_details();
                }
                self.finish(ann);
            }
            VNode::Leaf {
                ann, kind, path, ..
            } => {
                self.leaf(ann, *kind, path, &matches);
                self.finish(ann);
            }
            VNode::AlwaysFalse(ann) => self.always_boolean(ann, false),
            VNode::Expr { ann, expression } => {
                self.push(ann, &matches);
                if self.should_generate(ann) {
                    self.append_details(ann);
                    match expression.evaluate(root, vars) {
                        Ok(v) => {
                            self.append_reason("expression did not match", "expression did match");
                            if let Some(v) = v {
                                self.top().obj.append(cstr!("expressionResult"), v);
                            }
                        }
                        Err(e) => {
                            self.top().obj.append(
                                cstr!("reason"),
                                "failed to evaluate aggregation expression",
                            );
                            let code = error_code(&e);
                            let mut d = RawDocumentBuf::new();
                            d.append(cstr!("code"), code);
                            d.append(cstr!("codeName"), (self.code_name)(code));
                            d.append(cstr!("errmsg"), e.to_string());
                            self.top().obj.append(cstr!("details"), d);
                        }
                    }
                }
                self.finish(ann);
            }
            VNode::Schema(s) => self.schema(s.root()),
            VNode::Unannotated(_) => {}
        }
    }

    fn children(&mut self, ann: &Annotation, cs: &[VNode]) {
        for (i, c) in cs.iter().enumerate() {
            if i > 0 {
                self.finish_child(ann, None);
            }
            self.vnode(c);
        }
    }

    fn leaf(
        &mut self,
        ann: &Annotation,
        kind: LeafKind,
        p: &FieldPath,
        matches: &dyn Fn(Scope<'d>) -> Option<bool>,
    ) {
        let at = At::Path(p);
        let omit = LeafArrays::TraverseOmitArray;
        match kind {
            LeafKind::Comparison => self.path_error(
                ann,
                matches,
                at,
                "comparison failed",
                "comparison succeeded",
                None,
                omit,
                false,
            ),
            LeafKind::In => self.path_error(
                ann,
                matches,
                at,
                "no matching value found in array",
                "matching value found in array",
                None,
                omit,
                false,
            ),
            LeafKind::Regex => self.path_error(
                ann,
                matches,
                at,
                "regular expression did not match",
                "regular expression did match",
                Some(STRINGS),
                omit,
                false,
            ),
            LeafKind::Exists => {
                self.push(ann, matches);
                if self.should_generate(ann) {
                    self.append_details(ann);
                    self.append_reason("path does not exist", "path does exist");
                }
            }
            LeafKind::Type => self.type_error(ann, matches, at, omit, false),
            LeafKind::Mod => self.path_error(
                ann,
                matches,
                at,
                "$mod did not evaluate to expected remainder",
                "$mod did evaluate to expected remainder",
                Some(NUMBERS),
                omit,
                false,
            ),
            LeafKind::Size => self.path_error(
                ann,
                matches,
                at,
                "array length was not equal to given size",
                "array length was equal to given size",
                Some(ARRAYS),
                LeafArrays::Whole,
                false,
            ),
            LeafKind::ElemMatch => self.path_error(
                ann,
                matches,
                at,
                "array did not satisfy the child predicate",
                "array did satisfy the child predicate",
                Some(ARRAYS),
                LeafArrays::Whole,
                false,
            ),
            LeafKind::Bits => self.path_error(
                ann,
                matches,
                at,
                "bitwise operator failed to match",
                "bitwise operator matched successfully",
                Some(BITS),
                omit,
                false,
            ),
            LeafKind::All => {
                // `generateLogicalLeafError` over the `$all` conjunction.
                self.push(ann, matches);
                if self.should_generate(ann) {
                    self.append_details(ann);
                    let values = self.values(at, LeafArrays::Whole);
                    self.append_missing(&values);
                    self.append_reason(
                        "array did not contain all specified values",
                        "array did contain all specified values",
                    );
                    self.append_considered_values(&values);
                }
            }
        }
    }

    // ----------------------------------------------------------------------------------------
    // $jsonSchema
    // ----------------------------------------------------------------------------------------

    fn schema(&mut self, node: &Node) {
        let (ann, inner) = match node {
            Node::Annotated(b) => (&b.0, &b.1),
            other => (Annotation::ignore(), other),
        };
        let matches = |s: Scope<'d>| Some(node.eval(s));
        match inner {
            Node::Annotated(_) => self.schema(inner),
            Node::True => self.always_boolean(ann, true),
            Node::False => self.always_boolean(ann, false),
            Node::And(cs) if ann.tag == "items" => self.items_array(ann, cs, &matches),
            Node::And(cs) => {
                self.pre_tree(ann, &matches);
                if self.inv() == Inv::Normal {
                    self.set_state(State::NeedChildrenInfo);
                }
                let inverted_root = ann.tag == "$jsonSchema" && self.inv() == Inv::Inverted;
                if inverted_root {
                    self.set_state(State::IgnoreChildren);
                    self.append_reason("", "schema matched");
                }
                self.schema_children(ann, cs);
                if inverted_root {
                    self.finish(ann);
                    return;
                }
                let d = match ann.tag {
                    "allOf" => "schemasNotSatisfied",
                    "properties" => "propertiesNotSatisfied",
                    "$jsonSchema" => "schemaRulesNotSatisfied",
                    "dependencies" => "failingDependencies",
                    "required" => "missingProperties",
                    _ => "details",
                };
                self.post_tree(ann, d, cs.last().map(annotation_of));
            }
            Node::Or(cs) if ann.tag == "enum" => {
                // `generateLogicalLeafError`; the equalities take no part.
                self.push(ann, &matches);
                if self.should_generate(ann) {
                    self.append_details(ann);
                    let at = match cs.first() {
                        Some(Node::Value(v)) => at_of(&v.at),
                        _ => At::Root,
                    };
                    let values = self.values(at, LeafArrays::Whole);
                    if values.is_none() {
                        self.set_state(State::NoError);
                        self.frames.pop();
                        return;
                    }
                    self.append_missing(&values);
                    self.append_reason("value was not found in enum", "value was found in enum");
                    self.append_considered_values(&values);
                }
                self.finish(ann);
            }
            Node::Or(cs) => {
                self.pre_tree(ann, &matches);
                if self.inv() == Inv::Inverted {
                    self.set_state(State::NeedChildrenInfo);
                }
                self.schema_children(ann, cs);
                if !self.should_generate(ann) {
                    self.finish(ann);
                } else {
                    self.post_tree(ann, "schemasNotSatisfied", cs.last().map(annotation_of));
                }
            }
            Node::Xor(cs) => {
                self.pre_tree(ann, &matches);
                self.set_state(State::NeedChildrenInfo);
                if self.should_generate(ann) {
                    let scope = self.scope();
                    let matching: Vec<usize> = cs
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| c.eval(scope))
                        .map(|(i, _)| i)
                        .collect();
                    if !matching.is_empty() {
                        self.flip();
                        self.set_state(State::IgnoreChildren);
                        self.append_reason("", "more than one subschema matched");
                        let mut a = RawArrayBuf::new();
                        for i in matching {
                            a.push(i32::try_from(i).unwrap_or(i32::MAX));
                        }
                        self.top().obj.append(cstr!("matchingSchemaIndexes"), a);
                    }
                }
                for (i, c) in cs.iter().enumerate() {
                    if i > 0 && self.inv() == Inv::Normal {
                        self.finish_child(ann, cs.get(i - 1).map(annotation_of));
                    }
                    self.schema(c);
                }
                if self.inv() == Inv::Normal {
                    self.post_tree(ann, "schemasNotSatisfied", cs.last().map(annotation_of));
                } else {
                    self.finish(ann);
                }
            }
            Node::Not(c) => {
                self.pre_tree(ann, &matches);
                self.flip();
                if self.should_generate(ann) && ann.tag == "not" {
                    self.append_reason("", "child expression matched");
                    self.set_state(State::IgnoreChildren);
                }
                self.schema(c);
                if self.should_generate(ann) && ann.tag != "not" {
                    self.append_latest_details();
                }
                self.finish(ann);
            }
            Node::Cond { cond, then } => {
                self.push(ann, &matches);
                if self.should_generate(ann) && !cond.eval(self.scope()) {
                    self.set_state(State::NoError);
                }
                self.schema(cond);
                self.top().child += 1;
                self.schema(then);
                if self.should_generate(ann) && self.have_latest() {
                    let name = ann
                        .spec
                        .iter()
                        .flatten()
                        .next()
                        .map(|(k, _)| k.as_str().to_string())
                        .unwrap_or_default();
                    self.top().obj.append(cstr!("conditionalProperty"), name);
                    if ann.tag == "_schemaDependency" {
                        self.append_latest_details();
                    } else if let Some(v) = self.take_latest() {
                        self.top().obj.append(cstr!("missingProperties"), v);
                    }
                }
                self.finish(ann);
            }
            Node::Value(v) => self.schema_value(ann, &v.at, &v.test, &matches),
            Node::AllowedProperties(ap) => self.allowed_properties(ann, ap, &matches),
            Node::MinProperties(_) | Node::MaxProperties(_) => {
                self.push(ann, &matches);
                if self.should_generate(ann) {
                    self.append_details(ann);
                    self.append_reason("specified number of properties was not satisfied", "");
                    let n = self.scope().object().map_or(0, field_count);
                    self.top().obj.append(
                        cstr!("numberOfProperties"),
                        i32::try_from(n).unwrap_or(i32::MAX),
                    );
                }
                self.finish(ann);
            }
            // Equalities of `enum` are not visited.
            Node::RootDocEq(_) => {}
        }
    }

    fn schema_children(&mut self, ann: &Annotation, cs: &[Node]) {
        for (i, c) in cs.iter().enumerate() {
            if i > 0 {
                self.finish_child(ann, cs.get(i - 1).map(annotation_of));
            }
            self.schema(c);
        }
    }

    /// `items` as an array of schemas (`generateJSONSchemaItemsSchemaArrayError`).
    fn items_array(
        &mut self,
        ann: &Annotation,
        cs: &[Node],
        matches: &dyn Fn(Scope<'d>) -> Option<bool>,
    ) {
        self.push(ann, matches);
        if let Some(first) = cs.first() {
            let at = match first {
                Node::Annotated(b) => match &b.1 {
                    Node::Value(v) => Some(at_of(&v.at)),
                    _ => None,
                },
                Node::Value(v) => Some(at_of(&v.at)),
                _ => None,
            };
            let first_ann = annotation_of(first);
            let is_array = at.is_some_and(|at| {
                self.state() != State::NoError
                    && first_ann.mode == Mode::Generate
                    && self.inv() == Inv::Normal
                    && self
                        .value_at(at)
                        .is_some_and(|v| v.element_type() == ElementType::Array)
            });
            if is_array {
                self.append_operator_name(ann);
                self.set_state(State::NeedChildrenInfo);
            } else {
                self.set_state(State::NoError);
            }
        }
        self.schema_children(ann, cs);
        self.post_tree(ann, "details", cs.last().map(annotation_of));
    }

    fn schema_value(
        &mut self,
        ann: &Annotation,
        subject: &Subject,
        test: &Test,
        matches: &dyn Fn(Scope<'d>) -> Option<bool>,
    ) {
        let at = at_of(subject);
        let whole = LeafArrays::Whole;
        match test {
            Test::Type(_) => self.type_error(ann, matches, at, whole, true),
            Test::Leaf(crate::filter::Predicate::Exists) => {
                self.push(ann, matches);
                if self.should_generate(ann) && ann.tag == "_propertyExists" {
                    let name = match subject {
                        Subject::Field(p) => p.as_str().to_string(),
                        Subject::Placeholder => "i".to_string(),
                    };
                    self.latest = Latest::Str(name);
                    self.frames.pop();
                    return;
                }
                if self.should_generate(ann) {
                    self.append_details(ann);
                    self.append_reason("path does not exist", "path does exist");
                }
            }
            Test::Leaf(crate::filter::Predicate::Regex(_)) => self.path_error(
                ann,
                matches,
                at,
                "regular expression did not match",
                "regular expression did match",
                Some(STRINGS),
                LeafArrays::TraverseOmitArray,
                ann.tag == "pattern",
            ),
            Test::Leaf(_) => self.path_error(
                ann,
                matches,
                at,
                "comparison failed",
                "comparison succeeded",
                Some(NUMBERS),
                whole,
                true,
            ),
            // `enum` equalities are not visited.
            Test::Eq(_) => return,
            Test::MultipleOf(_) => self.path_error(
                ann,
                matches,
                at,
                "considered value is not a multiple of the specified value",
                "considered value is a multiple of the specified value",
                Some(NUMBERS),
                whole,
                true,
            ),
            Test::MinLength(_) | Test::MaxLength(_) => self.path_error(
                ann,
                matches,
                at,
                "specified string length was not satisfied",
                "specified string length was satisfied",
                Some(STRING_ONLY),
                whole,
                true,
            ),
            Test::MinItems(_) | Test::MaxItems(_) => {
                self.push(ann, matches);
                match self.keyword_value(ann, at, ARRAYS) {
                    Some(RawBsonRef::Array(a)) => {
                        self.append_details(ann);
                        self.append_reason("array did not match specified length", "");
                        self.top()
                            .obj
                            .append(cstr!("consideredValue"), a.to_owned());
                        let n = a.into_iter().map_while(|e| e.ok()).count();
                        self.top()
                            .obj
                            .append(cstr!("numberOfItems"), i32::try_from(n).unwrap_or(i32::MAX));
                    }
                    _ => self.set_state(State::NoError),
                }
            }
            Test::UniqueItems => {
                self.push(ann, matches);
                match self.keyword_value(ann, at, ARRAYS) {
                    Some(RawBsonRef::Array(a)) => {
                        self.append_details(ann);
                        self.append_reason("found a duplicate item", "");
                        self.top()
                            .obj
                            .append(cstr!("consideredValue"), a.to_owned());
                        if let Some(dup) = first_duplicate(a) {
                            self.top().obj.append(cstr!("duplicatedValue"), dup);
                        }
                    }
                    _ => self.set_state(State::NoError),
                }
            }
            Test::ItemAt(idx, schema) => {
                self.push(ann, matches);
                if self.should_generate(ann) {
                    let el = match self.value_at(at) {
                        Some(RawBsonRef::Array(a)) => a.into_iter().nth(*idx).and_then(|e| e.ok()),
                        _ => None,
                    };
                    self.top()
                        .obj
                        .append(cstr!("itemIndex"), i64::try_from(*idx).unwrap_or(i64::MAX));
                    if let Some(el) = el {
                        let inv = self.inv();
                        self.child_input = Some((Scope::Elem(el), inv));
                    }
                }
                self.schema(schema);
                if self.should_generate(ann) {
                    self.append_latest_details();
                }
            }
            Test::ItemsFrom(start, schema) => {
                self.items_from(ann, at, *start, schema, matches);
            }
            Test::Object(child) => {
                self.push(ann, matches);
                if self.state() != State::NoError {
                    let (first, more) = match (at, self.scope()) {
                        (At::Path(p), Scope::Doc(d)) => {
                            let vals = path::values(d, p, LeafArrays::Whole);
                            (vals.first().and_then(|v| v.value), vals.len() > 1)
                        }
                        (At::Placeholder, Scope::Elem(v)) => (Some(v), false),
                        _ => (None, false),
                    };
                    match first {
                        Some(RawBsonRef::Document(d)) if !more => {
                            let inv = self.inv();
                            self.child_input = Some((Scope::Doc(d), inv));
                        }
                        _ => self.set_state(State::NoError),
                    }
                }
                self.schema(child);
            }
            Test::Encrypted => {
                self.push(ann, matches);
                if self.should_generate(ann) {
                    self.append_operator_name(ann);
                    self.append_reason("value was not encrypted", "value was encrypted");
                }
            }
            Test::EncryptedType(_) => {
                self.push(ann, matches);
                if self.should_generate(ann) {
                    let encrypted = matches!(
                        self.value_at(at),
                        Some(RawBsonRef::Binary(b)) if b.subtype == BinarySubtype::Encrypted
                    );
                    if encrypted && self.inv() == Inv::Normal {
                        self.append_operator_name(ann);
                        self.append_reason("encrypted value has wrong type", "");
                    } else {
                        self.set_state(State::NoError);
                    }
                }
            }
        }
        self.finish(ann);
    }

    /// `items` (one schema) and `additionalItems`.
    fn items_from(
        &mut self,
        ann: &Annotation,
        at: At<'_>,
        start: usize,
        schema: &Node,
        matches: &dyn Fn(Scope<'d>) -> Option<bool>,
    ) {
        self.push(ann, matches);
        let additional_false = ann.tag == "additionalItems"
            && matches!(
                ann.spec.iter().flatten().next(),
                Some((_, RawBsonRef::Boolean(_)))
            );
        match self.keyword_value(ann, at, ARRAYS) {
            Some(RawBsonRef::Array(a)) if additional_false => {
                self.append_details(ann);
                self.append_reason("found additional items", "");
                let extra: Vec<RawBson> = a
                    .into_iter()
                    .map_while(|e| e.ok())
                    .skip(start)
                    .map(RawBson::from)
                    .collect();
                self.top()
                    .obj
                    .append(cstr!("additionalItems"), array(extra));
            }
            Some(RawBsonRef::Array(a)) => {
                self.append_operator_name(ann);
                let mut annotations = RawDocumentBuf::new();
                schema_annotations(annotation_of(schema), &mut annotations);
                for (k, v) in annotations.iter().flatten() {
                    self.top().obj.append(k, v);
                }
                let reason = if ann.tag == "items" {
                    "At least one item did not match the sub-schema"
                } else {
                    "At least one additional item did not match the sub-schema"
                };
                self.append_reason(reason, "");
                let failing = a
                    .into_iter()
                    .map_while(|e| e.ok())
                    .enumerate()
                    .skip(start)
                    .find(|(_, el)| !schema.eval(Scope::Elem(*el)));
                if let Some((i, el)) = failing {
                    self.top().obj.append(cstr!("itemIndex"), number(i));
                    let inv = self.inv();
                    self.child_input = Some((Scope::Elem(el), inv));
                }
            }
            _ => self.set_state(State::NoError),
        }
        self.schema(schema);
        if !additional_false && self.should_generate(ann) {
            self.append_latest_details();
        }
    }

    /// `additionalProperties` and `patternProperties`
    /// (`InternalSchemaAllowedPropertiesMatchExpression`).
    fn allowed_properties(
        &mut self,
        ann: &Annotation,
        ap: &crate::jsonschema::AllowedProperties,
        matches: &dyn Fn(Scope<'d>) -> Option<bool>,
    ) {
        self.push(ann, matches);
        self.set_state(State::IgnoreChildren);
        let kind = ann
            .spec
            .iter()
            .flatten()
            .next()
            .map(|(_, v)| v.element_type());
        let doc = self.scope().object();
        if self.should_generate(ann)
            && let Some(doc) = doc
        {
            let additional = additional_properties(doc, ap);
            match kind {
                Some(ElementType::Boolean)
                    if !ap.otherwise.eval(Scope::Doc(doc)) && !additional.is_empty() =>
                {
                    self.append_operator_name_as("additionalProperties");
                    let mut spec = RawDocumentBuf::new();
                    spec.append(cstr!("additionalProperties"), false);
                    self.top().obj.append(cstr!("specifiedAs"), spec);
                    let mut a = RawArrayBuf::new();
                    for (name, _) in &additional {
                        a.push(*name);
                    }
                    self.top().obj.append(cstr!("additionalProperties"), a);
                }
                Some(ElementType::EmbeddedDocument) => {
                    if let Some((_, v)) = additional
                        .iter()
                        .find(|(_, v)| !ap.otherwise.eval(Scope::Elem(*v)))
                    {
                        self.set_state(State::Error);
                        let inv = self.inv();
                        self.child_input = Some((Scope::Elem(*v), inv));
                    }
                }
                _ => {}
            }
        }
        self.schema(&ap.otherwise);
        for (i, (_, _, pattern_schema)) in ap.patterns.iter().enumerate() {
            if self.should_generate(ann) {
                self.allowed_properties_child_error(ann, ap, kind);
                self.set_state(State::IgnoreChildren);
                if let Some(doc) = self.scope().object()
                    && let Some((_, v)) = failing_pattern_property(doc, ap, i)
                {
                    self.set_state(State::Error);
                    let inv = self.inv();
                    self.child_input = Some((Scope::Elem(v), inv));
                }
            }
            self.top().child += 1;
            self.schema(pattern_schema);
        }
        if self.should_generate(ann) {
            self.allowed_properties_child_error(ann, ap, kind);
            let additional_error = std::mem::take(&mut self.top().obj);
            let patterns = std::mem::take(&mut self.top().arr);
            let pattern_error = (!patterns.is_empty()).then(|| {
                let mut d = RawDocumentBuf::new();
                d.append(cstr!("operatorName"), "patternProperties");
                d.append(cstr!("details"), array(patterns));
                d
            });
            self.latest = match (additional_error.is_empty(), pattern_error) {
                (true, Some(p)) => Latest::Obj(p),
                (true, None) => Latest::None,
                (false, None) => Latest::Obj(additional_error),
                (false, Some(p)) => Latest::Arr(vec![additional_error.into(), p.into()]),
            };
        }
        self.frames.pop();
    }

    fn append_operator_name_as(&mut self, name: &str) {
        self.top().obj.append(cstr!("operatorName"), name);
    }

    /// `generateAllowedPropertiesSchemaError` for the child just walked.
    fn allowed_properties_child_error(
        &mut self,
        ann: &Annotation,
        ap: &crate::jsonschema::AllowedProperties,
        kind: Option<ElementType>,
    ) {
        if !self.have_latest() {
            return;
        }
        let child = self.top().child;
        let Some(doc) = self.scope().object() else {
            return;
        };
        if child == 0 {
            if kind != Some(ElementType::EmbeddedDocument) {
                return;
            }
            let additional = additional_properties(doc, ap);
            let Some((name, _)) = additional
                .iter()
                .find(|(_, v)| !ap.otherwise.eval(Scope::Elem(*v)))
            else {
                return;
            };
            let name = name.to_string();
            self.append_operator_name_as("additionalProperties");
            let mut annotations = RawDocumentBuf::new();
            schema_annotations(annotation_of(&ap.otherwise), &mut annotations);
            for (k, v) in annotations.iter().flatten() {
                self.top().obj.append(k, v);
            }
            self.top().obj.append(
                cstr!("reason"),
                "at least one additional property did not match the subschema",
            );
            self.top().obj.append(cstr!("failingProperty"), name);
            self.append_latest_details();
        } else {
            let idx = child - 1;
            let Some((name, _)) = failing_pattern_property(doc, ap, idx) else {
                return;
            };
            if !self.should_generate(ann) {
                return;
            }
            let Some((raw, _, schema)) = ap.patterns.get(idx) else {
                return;
            };
            let mut d = RawDocumentBuf::new();
            d.append(cstr!("propertyName"), name);
            schema_annotations(annotation_of(schema), &mut d);
            d.append(cstr!("regexMatched"), raw.as_str());
            if let Some(v) = self.take_latest() {
                d.append(cstr!("details"), v);
            }
            self.top().arr.push(d.into());
        }
    }
}

/// The fields of `doc` neither `properties` nor `patternProperties` cover.
fn additional_properties<'a>(
    doc: &'a RawDocument,
    ap: &crate::jsonschema::AllowedProperties,
) -> Vec<(&'a str, RawBsonRef<'a>)> {
    let mut out = Vec::new();
    for (k, v) in doc.iter().map_while(|e| e.ok()) {
        let name = k.as_str();
        if ap
            .properties
            .binary_search_by(|p| p.as_str().cmp(name))
            .is_ok()
        {
            continue;
        }
        if ap.patterns.iter().any(|(_, re, _)| re.is_match(name)) {
            continue;
        }
        out.push((name, v));
    }
    out
}

/// The first field whose name matches pattern `idx` and whose value fails its schema.
fn failing_pattern_property<'a>(
    doc: &'a RawDocument,
    ap: &crate::jsonschema::AllowedProperties,
    idx: usize,
) -> Option<(&'a str, RawBsonRef<'a>)> {
    let (_, re, schema) = ap.patterns.get(idx)?;
    doc.iter()
        .map_while(|e| e.ok())
        .map(|(k, v)| (k.as_str(), v))
        .find(|(name, v)| re.is_match(name) && !schema.eval(Scope::Elem(*v)))
}

/// The first element equal (field order aside) to an earlier one.
fn first_duplicate(a: &bson::RawArray) -> Option<RawBson> {
    let items: Vec<RawBsonRef<'_>> = a.into_iter().map_while(|e| e.ok()).collect();
    for (i, x) in items.iter().enumerate() {
        if items
            .iter()
            .take(i)
            .any(|y| crate::jsonschema::unordered_cmp(*x, *y, 0).is_eq())
        {
            return Some((*x).into());
        }
    }
    None
}

fn annotation_of(n: &Node) -> &Annotation {
    match n {
        Node::Annotated(b) => &b.0,
        _ => Annotation::ignore(),
    }
}

/// `appendSchemaAnnotations`: `title`, `description`.
fn schema_annotations(ann: &Annotation, out: &mut RawDocumentBuf) {
    if let Some(t) = &ann.title {
        out.append(cstr!("title"), t.as_str());
    }
    if let Some(d) = &ann.description {
        out.append(cstr!("description"), d.as_str());
    }
}

/// Nodes whose explanation is an array their parent absorbs.
fn produces_array(tag: &str) -> bool {
    tag == "_subschema" || tag == "_propertiesExistList"
}

fn array(items: Vec<RawBson>) -> RawArrayBuf {
    let mut a = RawArrayBuf::new();
    for i in items {
        a.push(i);
    }
    a
}

/// The MongoDB code of a query error.
pub(crate) fn error_code(e: &QueryError) -> i32 {
    match e {
        QueryError::BadValue(_) => 2,
        QueryError::FailedToParse(_) => 9,
        QueryError::TypeMismatch(_) => 14,
        QueryError::DollarPrefixedFieldName(_) => 52,
        QueryError::InvalidIdField(_) => 53,
        QueryError::NotImplemented(_) => 238,
        QueryError::Location(n, _) => *n,
        QueryError::Storage(_) => 1,
    }
}
