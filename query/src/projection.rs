//! `find` projections with MongoDB 7.0's semantics.
//!
//! Parsing follows src/mongo/db/query/projection_parser.cpp (4.4–7.0) into the same AST
//! (path nodes, boolean inclusions/exclusions, `$slice`, `$elemMatch`, positional `.$`,
//! literals, expressions); execution follows src/mongo/db/exec/projection_executor_builder.cpp,
//! projection_node.cpp, inclusion/exclusion nodes and projection_executor_utils.cpp.
//!
//! Semantics reproduced:
//! - numbers and booleans include (non-zero / true; NaN counts as true) or exclude; any other
//!   scalar is a literal computed field (`{a: "x"}`, `{a: null}`) that makes the projection an
//!   inclusion. `{a: {$literal: v}}` is a literal too;
//! - the projection type is fixed by the first non-`_id` inclusion/exclusion/expression;
//!   mixing gives 31253/31254 (literals in an exclusion 31310, expressions 31252). Ambiguous
//!   projections (`{}`, `{_id: …}` only, `$slice`/`$elemMatch` only) are typed as
//!   `computeProjectionType` does: `$slice` → exclusion unless `_id: 1`; `$elemMatch` →
//!   inclusion; `{_id: 1}` → inclusion; otherwise exclusion;
//! - `_id` is included by default in inclusions (where it stands in the document, normally
//!   first) and may be excluded; `{_id: 1}` in an exclusion is dropped;
//! - inclusion output keeps the *document's* field order for included fields; computed fields
//!   (literals, `$elemMatch`) follow, in projection order (so `$elemMatch` fields come after
//!   the other included fields, as the 4.4+ manual says);
//! - dotted paths walk into subdocuments and through arrays (nested arrays included): in an
//!   inclusion, array elements that are not documents disappear and documents without the
//!   field stay as `{}` (`{"a.b": 1}` on `a: [{b: 1, c: 2}, 3, {c: 1}]` → `a: [{b: 1}, {}]`), and
//!   a non-document value where a subdocument was expected disappears; in an exclusion they
//!   are kept as they are. A computed field under a path replaces scalars (and missing array
//!   slots) with documents (`{"a.b": "x"}` on `a: [1]` → `a: [{b: "x"}]`);
//! - path collisions: 31249 "Path collision at a.b remaining portion b", 31250 "Path
//!   collision at a"; sub-objects merge with an existing sub-projection of the same field;
//! - `$slice: n | [skip, limit]` (numbers converted with `numberInt`, i.e. truncated and
//!   saturated, NaN → 0): keeps the other fields in an exclusion, includes only the path in an
//!   inclusion; applied after the inclusion/exclusion, through arrays of documents; a spec the
//!   find syntax rejects is re-parsed as the aggregation `$slice` expression, with MongoDB's
//!   28667 "Invalid $slice syntax…" messages when that fails too;
//! - `$elemMatch` (31274 non-object, 31275 nested field, 31255/31256 with positional): the
//!   first matching element of a top-level array, else the field is absent;
//! - positional `a.b.$` (31394 `$` mid-path, 31395 exclusion, 31271 object, 31308 literal,
//!   31276 twice): the path is included, then the first array on the path *of the projected
//!   document* is replaced by `[element at the filter's elemMatchKey]`; no key → 51246,
//!   no element there → 51247 (both execution errors, reported without MongoDB's
//!   "Executor error during find command :: caused by :: " prefix, which the command adds);
//! - `$meta`: 17307 non-string, 17308 unknown name, `textScore` → 40218 (Cairn has no `$text`,
//!   so no query can supply the score), other names NotImplemented;
//! - field names are checked like `FieldPath` (40352 empty, 40353 trailing dot, 15998 empty
//!   component, 16410 `$` prefix); `{a: {}}` is 51270; `{a: {$unknown: 1}}` is 31325;
//! - aggregation expressions (`{a: {$add: …}}`, `{a: "$b"}`, arrays with such values) are parsed
//!   by an [`ExpressionParser`]; the default one ([`NoExpressions`]) is NotImplemented.
//!
//! Known differences: MongoDB's `numberInt` of NaN/±∞ is platform-dependent (x86 gives
//! INT_MIN); Cairn saturates (NaN → 0, +∞ → INT_MAX), matching MongoDB on ARM (what FerretDB's
//! tests recorded). Documents with duplicate field names are projected with "first wins"
//! lookups as MongoDB's, but exclusion keeps every duplicate that is not excluded.
//!
//! Invariants: parsing and applying never panic on any input (malformed BSON ends the
//! container it is in); recursion is bounded by [`MAX_DEPTH`]; a parsed [`Projection`] is
//! immutable, cheap to clone and `Send + Sync`.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use bson::raw::{CStr, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::decimal::Decimal;
use cairn_storage::display;
pub(crate) use cairn_storage::display::type_name;

use crate::error::{QueryError, Result};
use crate::filter::{Filter, MatchDetails};
use crate::path;
use crate::sort::{
    META_NAMES, decimal_to_i64_saturating, validate_field_name, validate_field_path,
};

/// Nesting (documents and arrays) deeper than this is copied or dropped as a whole instead of
/// being projected further.
pub const MAX_DEPTH: usize = 200;

/// Whether a projection keeps only what it names or drops what it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProjectionKind {
    /// Only the named fields (and `_id`, unless excluded) are returned.
    Inclusion,
    /// Everything but the named fields is returned.
    Exclusion,
}

/// An aggregation expression used as a projection value.
pub trait ProjectionExpression: fmt::Debug + Send + Sync {
    /// The value for the document `root`; `None` means missing (the field is not output).
    fn evaluate(&self, root: &RawDocument) -> Result<Option<RawBson>>;
}

/// Parses aggregation expressions found in projections (supplied by the aggregation module).
pub trait ExpressionParser {
    /// Parses an expression: an operator document (`{$add: [1, "$a"]}`) or an operand (a
    /// `"$path"` string, an array holding expressions).
    fn parse(&self, expr: RawBsonRef<'_>) -> Result<Arc<dyn ProjectionExpression>>;
}

/// The default [`ExpressionParser`]: every aggregation expression is NotImplemented.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoExpressions;

impl ExpressionParser for NoExpressions {
    fn parse(&self, expr: RawBsonRef<'_>) -> Result<Arc<dyn ProjectionExpression>> {
        Err(QueryError::NotImplemented(format!(
            "aggregation expressions in projections are not supported yet: {}",
            display::value(expr)
        )))
    }
}

/// A parsed `find` projection.
#[derive(Clone, Debug)]
pub struct Projection {
    kind: ProjectionKind,
    empty: bool,
    root: ExecNode,
    ops: Vec<RootOp>,
    top_level: Option<Vec<String>>,
    has_positional: bool,
    simple_paths: Option<Vec<String>>,
}

impl Projection {
    /// Parses a projection document; aggregation expressions are NotImplemented.
    pub fn parse(spec: &RawDocument) -> Result<Projection> {
        Projection::parse_with(spec, &NoExpressions)
    }

    /// Parses a projection document, handing aggregation expressions to `exprs`.
    pub fn parse_with(spec: &RawDocument, exprs: &dyn ExpressionParser) -> Result<Projection> {
        let mut ctx = ParseCtx {
            kind: None,
            id_specified: false,
            has_positional: false,
            has_elem_match: false,
            has_find_slice: false,
            has_meta: false,
            id_included_entirely: false,
            id_excluded_entirely: false,
            exprs,
        };
        let mut root = AstTree::default();
        let mut empty = true;
        for el in spec.iter() {
            let (k, v) =
                el.map_err(|e| QueryError::BadValue(format!("invalid projection: {e}")))?;
            empty = false;
            let k = k.as_str();
            ctx.id_specified |= k == "_id" || k.starts_with("_id.");
            parse_element(&mut ctx, k, v, &mut root, true)?;
        }
        let kind = match ctx.kind {
            Some(k) => k,
            None => compute_projection_type(&ctx),
        };
        if !ctx.id_specified && kind == ProjectionKind::Inclusion {
            add_node_at_path(&mut root, &["_id"], "_id", Ast::Bool(true))?;
        }
        if kind == ProjectionKind::Exclusion && ctx.id_specified && ctx.id_included_entirely {
            root.children.retain(|(k, _)| k != "_id");
        }

        let mut exec = ExecNode::default();
        let mut ops = Vec::new();
        let mut has_expr = false;
        build_exec(
            &root,
            &mut Vec::new(),
            kind,
            &mut exec,
            &mut ops,
            &mut has_expr,
        );
        exec.optimize(kind);
        let top_level = (kind == ProjectionKind::Inclusion && !has_expr).then(|| {
            root.children
                .iter()
                .filter(|(_, n)| !matches!(n, Ast::Literal(_) | Ast::Bool(false)))
                .map(|(k, _)| k.clone())
                .collect()
        });
        let simple_paths = if kind == ProjectionKind::Inclusion {
            let mut paths = Vec::new();
            simple_inclusion_paths(&root, "", &mut paths).then_some(paths)
        } else {
            None
        };
        Ok(Projection {
            kind,
            empty,
            root: exec,
            ops,
            top_level,
            has_positional: ctx.has_positional,
            simple_paths,
        })
    }

    /// True for `{}`: the whole document is returned unchanged.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// Inclusion or exclusion.
    pub fn kind(&self) -> ProjectionKind {
        self.kind
    }

    /// True when the projection has a positional `.$` path, which needs the filter's
    /// [`MatchDetails`] in [`Projection::apply`].
    pub fn has_positional(&self) -> bool {
        self.has_positional
    }

    /// The top-level fields an inclusion projection reads (`_id` included unless excluded), so
    /// that storage can read only those subtrees; `None` when the whole document is needed
    /// (exclusions, the empty projection, aggregation expressions). A positional projection
    /// also needs whatever the filter reads to compute its [`MatchDetails`].
    pub fn required_top_level_fields(&self) -> Option<Vec<String>> {
        if self.empty {
            return None;
        }
        self.top_level.clone()
    }

    /// For an inclusion projection of plain fields only (no `$slice`, `$elemMatch`, positional
    /// paths, literals or expressions), the dotted paths it returns (`_id` included unless
    /// excluded): a document holding just these paths projects to the same result, so an
    /// index holding them can answer the query alone (a covered query).
    pub fn simple_inclusion_paths(&self) -> Option<&[String]> {
        if self.empty {
            return None;
        }
        self.simple_paths.as_deref()
    }

    /// Projects `doc`. `details` are the filter's [`MatchDetails`] for `doc` (needed by a
    /// positional projection; without them a positional path that meets an array is 51246).
    pub fn apply(
        &self,
        doc: &RawDocument,
        details: Option<&MatchDetails>,
    ) -> Result<RawDocumentBuf> {
        if self.empty {
            return Ok(doc.to_owned());
        }
        let mut out = match self.kind {
            ProjectionKind::Inclusion => {
                let mut out = Vec::new();
                self.root.include(doc, &mut out, 0);
                out
            }
            ProjectionKind::Exclusion => self.root.exclude(doc, 0),
        };
        if self.root.subtree_computed {
            self.root.apply_expressions(doc, &mut out, self.kind, 0)?;
        }
        for op in &self.ops {
            match op {
                RootOp::Slice { path, skip, limit } => {
                    slice_fields(&mut out, path, 0, *skip, *limit, 0)
                }
                RootOp::Positional { path } => {
                    let key = details.and_then(|d| d.elem_match_key);
                    positional(&mut out, path, key)?;
                }
            }
        }
        write_doc(&out, 0)
    }
}

// ---------------------------------------------------------------------------------------------
// AST and parsing (projection_parser.cpp)
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Ast {
    Bool(bool),
    Inner(AstTree),
    Slice { skip: Option<i32>, limit: i32 },
    ElemMatch(Arc<Filter>),
    Positional,
    Literal(RawBson),
    Expr(Arc<dyn ProjectionExpression>),
}

/// Collects the included leaf paths of `tree`; false when anything but plain inclusions and
/// exclusions of `_id` appears.
fn simple_inclusion_paths(tree: &AstTree, prefix: &str, out: &mut Vec<String>) -> bool {
    for (k, node) in &tree.children {
        let path = || {
            if prefix.is_empty() {
                k.clone()
            } else {
                let mut p = String::with_capacity(prefix.len() + 1 + k.len());
                p.push_str(prefix);
                p.push('.');
                p.push_str(k);
                p
            }
        };
        match node {
            Ast::Bool(true) => out.push(path()),
            Ast::Bool(false) => {}
            Ast::Inner(t) => {
                let path = path();
                if !simple_inclusion_paths(t, &path, out) {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

#[derive(Clone, Debug, Default)]
struct AstTree {
    children: Vec<(String, Ast)>,
}

struct ParseCtx<'e> {
    kind: Option<ProjectionKind>,
    id_specified: bool,
    has_positional: bool,
    has_elem_match: bool,
    has_find_slice: bool,
    has_meta: bool,
    id_included_entirely: bool,
    id_excluded_entirely: bool,
    exprs: &'e dyn ExpressionParser,
}

fn loc(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::Location(code, msg.into())
}

/// `computeProjectionType`.
fn compute_projection_type(ctx: &ParseCtx<'_>) -> ProjectionKind {
    use ProjectionKind::*;
    if ctx.has_find_slice {
        if ctx.id_included_entirely {
            Inclusion
        } else {
            Exclusion
        }
    } else if ctx.has_elem_match {
        Inclusion
    } else if ctx.has_meta {
        if ctx.id_excluded_entirely {
            Exclusion
        } else if ctx.id_included_entirely {
            Inclusion
        } else {
            Exclusion
        }
    } else if ctx.id_included_entirely {
        Inclusion
    } else {
        Exclusion
    }
}

/// `addNodeAtPath`: adds `node` at `parts` below `tree`, creating inner nodes; `full` is the
/// path as written (for messages).
fn add_node_at_path(tree: &mut AstTree, parts: &[&str], full: &str, node: Ast) -> Result<()> {
    let tail = parts.get(1..).unwrap_or(&[]).join(".");
    add_node_at(tree, parts, 0, full, &tail, node)
}

fn add_node_at(
    tree: &mut AstTree,
    parts: &[&str],
    idx: usize,
    full: &str,
    tail: &str,
    node: Ast,
) -> Result<()> {
    let Some(comp) = parts.get(idx).copied() else {
        return Err(loc(
            40352,
            "FieldPath cannot be constructed with empty string",
        ));
    };
    let pos = tree.children.iter().position(|(k, _)| k == comp);
    if idx + 1 == parts.len() {
        if pos.is_some() {
            return Err(loc(31250, format!("Path collision at {full}")));
        }
        tree.children.push((comp.to_string(), node));
        return Ok(());
    }
    let pos = match pos {
        Some(p) => p,
        None => {
            tree.children
                .push((comp.to_string(), Ast::Inner(AstTree::default())));
            tree.children.len() - 1
        }
    };
    match tree.children.get_mut(pos) {
        Some((_, Ast::Inner(t))) => add_node_at(t, parts, idx + 1, full, tail, node),
        _ => Err(loc(
            31249,
            format!("Path collision at {full} remaining portion {tail}"),
        )),
    }
}

/// `findLastInnerNodeOnPath`.
fn find_inner<'t>(tree: &'t mut AstTree, parts: &[&str]) -> Option<&'t mut AstTree> {
    let (first, rest) = parts.split_first()?;
    let (_, node) = tree.children.iter_mut().find(|(k, _)| k == first)?;
    match node {
        Ast::Inner(t) => {
            if rest.is_empty() {
                Some(t)
            } else {
                find_inner(t, rest)
            }
        }
        _ => None,
    }
}

fn is_number(v: RawBsonRef<'_>) -> bool {
    matches!(
        v,
        RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_)
    )
}

/// `BSONElement::trueValue` for the inclusion/exclusion types.
fn true_value(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Boolean(b) => b,
        RawBsonRef::Int32(i) => i != 0,
        RawBsonRef::Int64(i) => i != 0,
        RawBsonRef::Double(d) => d != 0.0,
        RawBsonRef::Decimal128(d) => !matches!(
            Decimal::from_decimal128(d),
            Decimal::Finite { coefficient: 0, .. }
        ),
        _ => true,
    }
}

/// `BSONElement::numberInt`: truncating, saturating (see the module docs on NaN/∞).
fn number_int(v: RawBsonRef<'_>) -> i32 {
    match v {
        RawBsonRef::Int32(i) => i,
        // C++ `(int)` of a long keeps the low 32 bits.
        RawBsonRef::Int64(i) => i as i32,
        RawBsonRef::Double(d) => d as i32,
        // Decimal128::toInt: half to even; NaN, ±∞ and out-of-range values are INT_MIN.
        RawBsonRef::Decimal128(d) => match Decimal::from_decimal128(d) {
            Decimal::NaN | Decimal::Infinite { .. } => i32::MIN,
            finite => i32::try_from(decimal_to_i64_saturating(finite)).unwrap_or(i32::MIN),
        },
        _ => 0,
    }
}

/// `Status::toString`: `<codeName>: <reason>`.
fn status_string(e: &QueryError) -> String {
    let name = match e {
        QueryError::BadValue(_) => "BadValue".to_string(),
        QueryError::FailedToParse(_) => "FailedToParse".to_string(),
        QueryError::TypeMismatch(_) => "TypeMismatch".to_string(),
        QueryError::DollarPrefixedFieldName(_) => "DollarPrefixedFieldName".to_string(),
        QueryError::InvalidIdField(_) => "InvalidIdField".to_string(),
        QueryError::NotImplemented(_) => "NotImplemented".to_string(),
        QueryError::Location(n, _) => format!("Location{n}"),
        QueryError::Storage(_) => "InternalError".to_string(),
    };
    format!("{name}: {e}")
}

/// `DBException::addContext`: same code, message `"<context> :: caused by :: <message>"`.
fn add_context(e: QueryError, context: &str) -> QueryError {
    let wrap = |m: String| format!("{context} :: caused by :: {m}");
    match e {
        QueryError::BadValue(m) => QueryError::BadValue(wrap(m)),
        QueryError::FailedToParse(m) => QueryError::FailedToParse(wrap(m)),
        QueryError::TypeMismatch(m) => QueryError::TypeMismatch(wrap(m)),
        QueryError::DollarPrefixedFieldName(m) => QueryError::DollarPrefixedFieldName(wrap(m)),
        QueryError::InvalidIdField(m) => QueryError::InvalidIdField(wrap(m)),
        QueryError::NotImplemented(m) => QueryError::NotImplemented(wrap(m)),
        QueryError::Location(n, m) => QueryError::Location(n, wrap(m)),
        other @ QueryError::Storage(_) => other,
    }
}

/// `parseElement`.
fn parse_element(
    ctx: &mut ParseCtx<'_>,
    key: &str,
    value: RawBsonRef<'_>,
    parent: &mut AstTree,
    is_root: bool,
) -> Result<()> {
    let positional = key.ends_with(".$");
    if key.contains(".$.") {
        return Err(loc(
            31394,
            "As of 4.4, it's illegal to specify positional operator in the middle of a path.\
             Positional projection may only be used at the end, for example: a.b.$. If the query \
             previously used a form like a.b.$.d, remove the parts following the '$' and the \
             results will be equivalent.",
        ));
    }
    match value {
        RawBsonRef::Document(sub) => {
            if positional {
                return Err(loc(
                    31271,
                    "positional projection cannot be used with an expression or sub object",
                ));
            }
            parse_sub_object(ctx, key, sub, parent, is_root)
        }
        v if is_number(v) || matches!(v, RawBsonRef::Boolean(_)) => {
            if true_value(v) {
                parse_inclusion(ctx, key, parent, is_root, positional)
            } else {
                if positional {
                    return Err(loc(
                        31395,
                        "positional projection cannot be used with exclusion",
                    ));
                }
                parse_exclusion(ctx, key, parent, is_root)
            }
        }
        v => {
            if positional {
                return Err(loc(
                    31308,
                    "positional projection cannot be used with a literal",
                ));
            }
            parse_literal(ctx, key, v, parent)
        }
    }
}

/// `parseInclusion`.
fn parse_inclusion(
    ctx: &mut ParseCtx<'_>,
    key: &str,
    parent: &mut AstTree,
    is_root: bool,
    positional: bool,
) -> Result<()> {
    let is_top_id = key == "_id" && is_root;
    if !positional {
        let parts = validate_field_path(key)?;
        add_node_at_path(parent, &parts, key, Ast::Bool(true))?;
        if is_top_id {
            ctx.id_included_entirely = true;
        }
    } else {
        if ctx.has_positional {
            return Err(loc(
                31276,
                "Cannot specify more than one positional projection per query.",
            ));
        }
        if ctx.has_elem_match {
            return Err(loc(
                31256,
                "Cannot specify positional operator and $elemMatch.",
            ));
        }
        let without = key.get(..key.len().saturating_sub(2)).unwrap_or("");
        let parts = validate_field_path(without)?;
        add_node_at_path(parent, &parts, without, Ast::Positional)?;
        ctx.has_positional = true;
    }
    if !is_top_id {
        if ctx.kind == Some(ProjectionKind::Exclusion) {
            return Err(loc(
                31253,
                format!("Cannot do inclusion on field {key} in exclusion projection"),
            ));
        }
        ctx.kind = Some(ProjectionKind::Inclusion);
    }
    Ok(())
}

/// `parseExclusion`.
fn parse_exclusion(
    ctx: &mut ParseCtx<'_>,
    key: &str,
    parent: &mut AstTree,
    is_root: bool,
) -> Result<()> {
    let parts = validate_field_path(key)?;
    add_node_at_path(parent, &parts, key, Ast::Bool(false))?;
    if key == "_id" && is_root {
        ctx.id_excluded_entirely = true;
    } else {
        if ctx.kind == Some(ProjectionKind::Inclusion) {
            return Err(loc(
                31254,
                format!("Cannot do exclusion on field {key} in inclusion projection"),
            ));
        }
        ctx.kind = Some(ProjectionKind::Exclusion);
    }
    Ok(())
}

/// A value `parseOperand` would turn into a constant: not a `$` string (a field path or
/// variable) and, for arrays, only such values (documents inside arrays are expressions).
fn constant(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::String(s) => !s.starts_with('$'),
        RawBsonRef::Document(_) => false,
        RawBsonRef::Array(a) => a.into_iter().all(|e| e.is_ok_and(constant)),
        _ => true,
    }
}

/// `parseLiteral`.
fn parse_literal(
    ctx: &mut ParseCtx<'_>,
    key: &str,
    value: RawBsonRef<'_>,
    parent: &mut AstTree,
) -> Result<()> {
    let parts = validate_field_path(key)?;
    if ctx.kind == Some(ProjectionKind::Exclusion) {
        return Err(loc(
            31310,
            format!(
                "Cannot use an expression {key}: {} in an exclusion projection",
                display::value(value)
            ),
        ));
    }
    let node = if constant(value) {
        Ast::Literal(RawBson::from(value))
    } else {
        Ast::Expr(ctx.exprs.parse(value)?)
    };
    add_node_at_path(parent, &parts, key, node)?;
    ctx.kind = Some(ProjectionKind::Inclusion);
    Ok(())
}

/// `parseSubObject`.
fn parse_sub_object(
    ctx: &mut ParseCtx<'_>,
    key: &str,
    sub: &RawDocument,
    parent: &mut AstTree,
    is_root: bool,
) -> Result<()> {
    let mut fields = Vec::new();
    for el in sub.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(format!("invalid projection: {e}")))?;
        fields.push((k.as_str(), v));
    }
    if fields.is_empty() {
        return Err(loc(
            51270,
            "An empty sub-projection is not a valid value. Found empty object at path",
        ));
    }
    let parts = validate_field_path(key)?;
    if let [(first, v)] = fields.as_slice()
        && first.starts_with('$')
    {
        if parse_sub_object_as_expression(ctx, key, &parts, first, *v, sub, parent, is_root)? {
            return Ok(());
        }
        if validate_field_name(first).is_err() {
            return Err(loc(31325, format!("Unknown expression {first}")));
        }
    }
    if find_inner(parent, &parts).is_none() {
        add_node_at_path(parent, &parts, key, Ast::Inner(AstTree::default()))?;
    }
    let Some(inner) = find_inner(parent, &parts) else {
        return Err(loc(31249, format!("Path collision at {key}")));
    };
    for (k, v) in fields {
        parse_element(ctx, k, v, inner, false)?;
    }
    Ok(())
}

/// `parseSubObjectAsExpression`: `$slice`, `$elemMatch`, or a generic expression.
#[allow(clippy::too_many_arguments)]
fn parse_sub_object_as_expression(
    ctx: &mut ParseCtx<'_>,
    key: &str,
    parts: &[&str],
    op: &str,
    arg: RawBsonRef<'_>,
    sub: &RawDocument,
    parent: &mut AstTree,
    is_root: bool,
) -> Result<bool> {
    match op {
        "$slice" => {
            let find_err = match parse_find_slice(ctx, key, parts, arg, parent) {
                Ok(()) => return Ok(true),
                Err(e) => e,
            };
            parse_generic_expression(ctx, key, parts, op, arg, parent).map_err(|e| {
                add_context(
                    e,
                    &format!(
                        "Invalid $slice syntax. The given syntax {} did not match the find() \
                         syntax because :: {} :: The given syntax did not match the expression \
                         $slice syntax.",
                        display::document(sub),
                        status_string(&find_err)
                    ),
                )
            })
        }
        "$elemMatch" => {
            let RawBsonRef::Document(cond) = arg else {
                return Err(loc(
                    31274,
                    format!(
                        "elemMatch: Invalid argument, object required, but got {}",
                        type_name(arg)
                    ),
                ));
            };
            if ctx.has_positional {
                return Err(loc(
                    31255,
                    "Cannot specify positional operator and $elemMatch.",
                ));
            }
            if parts.len() != 1 || !is_root {
                return Err(loc(
                    31275,
                    "Cannot use $elemMatch projection on a nested field.",
                ));
            }
            let name = <&CStr>::try_from(key)
                .map_err(|e| QueryError::BadValue(format!("invalid field name: {e}")))?;
            let mut wrapped = RawDocumentBuf::new();
            wrapped.append(bson::raw::cstr!("$elemMatch"), cond);
            let mut filter_doc = RawDocumentBuf::new();
            filter_doc.append(name, wrapped);
            let filter = Filter::parse(&filter_doc)?;
            add_node_at_path(parent, parts, key, Ast::ElemMatch(Arc::new(filter)))?;
            ctx.has_elem_match = true;
            Ok(true)
        }
        _ => parse_generic_expression(ctx, key, parts, op, arg, parent),
    }
}

/// `attemptToParseFindSlice`.
fn parse_find_slice(
    ctx: &mut ParseCtx<'_>,
    key: &str,
    parts: &[&str],
    arg: RawBsonRef<'_>,
    parent: &mut AstTree,
) -> Result<()> {
    let node = if is_number(arg) {
        Ast::Slice {
            skip: None,
            limit: number_int(arg),
        }
    } else if let RawBsonRef::Array(arr) = arg {
        let items: Vec<RawBsonRef<'_>> = arr.into_iter().map_while(|e| e.ok()).collect();
        let [skip, limit] = items.as_slice() else {
            return Err(loc(
                31272,
                "$slice array argument should be of form [skip, limit]",
            ));
        };
        if !is_number(*skip) {
            return Err(loc(
                31257,
                format!(
                    "$slice expects the skip argument to be a number, got {}",
                    type_name(*skip)
                ),
            ));
        }
        if !is_number(*limit) {
            return Err(loc(
                31258,
                format!(
                    "$slice expects the limit argument to be a number, got {}",
                    type_name(*limit)
                ),
            ));
        }
        let limit = number_int(*limit);
        if limit <= 0 {
            return Err(loc(
                31259,
                format!("$slice limit must be positive, got {limit}"),
            ));
        }
        Ast::Slice {
            skip: Some(number_int(*skip)),
            limit,
        }
    } else {
        return Err(loc(
            31273,
            "$slice only supports numbers and [skip, limit] arrays",
        ));
    };
    add_node_at_path(parent, parts, key, node)?;
    ctx.has_find_slice = true;
    Ok(())
}

/// `attemptToParseGenericExpression`; returns false when `op` is not an expression name.
fn parse_generic_expression(
    ctx: &mut ParseCtx<'_>,
    key: &str,
    parts: &[&str],
    op: &str,
    arg: RawBsonRef<'_>,
    parent: &mut AstTree,
) -> Result<bool> {
    if !EXPRESSION_NAMES.contains(&op) {
        return Ok(false);
    }
    let is_meta = op == "$meta";
    if !is_meta && ctx.kind == Some(ProjectionKind::Exclusion) {
        return Err(loc(
            31252,
            "Cannot use expression other than $meta in exclusion projection",
        ));
    }
    if !is_meta {
        ctx.kind = Some(ProjectionKind::Inclusion);
    }
    let node = match op {
        "$meta" => return Err(parse_meta(arg)),
        "$literal" => Ast::Literal(RawBson::from(arg)),
        _ => {
            if op == "$slice" {
                let n = match arg {
                    RawBsonRef::Array(a) => a.into_iter().count(),
                    _ => 1,
                };
                if !(2..=3).contains(&n) {
                    return Err(loc(
                        28667,
                        format!(
                            "Expression $slice takes at least 2 arguments, and at most 3, but {n} \
                             were passed in."
                        ),
                    ));
                }
            }
            let name = <&CStr>::try_from(op)
                .map_err(|e| QueryError::BadValue(format!("invalid expression: {e}")))?;
            let mut expr = RawDocumentBuf::new();
            expr.append(name, arg);
            Ast::Expr(ctx.exprs.parse(RawBsonRef::Document(&expr))?)
        }
    };
    add_node_at_path(parent, parts, key, node)?;
    Ok(true)
}

/// `ExpressionMeta::parse` followed by the find-time availability check.
fn parse_meta(arg: RawBsonRef<'_>) -> QueryError {
    let RawBsonRef::String(name) = arg else {
        return loc(17307, "$meta only supports string arguments");
    };
    if !META_NAMES.contains(&name) {
        return loc(17308, format!("Unsupported argument to $meta: {name}"));
    }
    if name == "textScore" {
        return loc(
            40218,
            "query requires text score metadata, but it is not available",
        );
    }
    QueryError::NotImplemented(format!(
        "{{$meta: \"{name}\"}} projections are not supported yet"
    ))
}

/// The aggregation expression operators of MongoDB 7.0 (`Expression::isExpressionName`).
#[rustfmt::skip]
const EXPRESSION_NAMES: &[&str] = &[
    "$abs", "$acos", "$acosh", "$add", "$allElementsTrue", "$and", "$anyElementTrue",
    "$arrayElemAt", "$arrayToObject", "$asin", "$asinh", "$atan", "$atan2", "$atanh", "$avg",
    "$binarySize", "$bitAnd", "$bitNot", "$bitOr", "$bitXor", "$bsonSize", "$ceil", "$cmp",
    "$concat", "$concatArrays", "$cond", "$convert", "$cos", "$cosh", "$dateAdd", "$dateDiff",
    "$dateFromParts", "$dateFromString", "$dateSubtract", "$dateToParts", "$dateToString",
    "$dateTrunc", "$dayOfMonth", "$dayOfWeek", "$dayOfYear", "$degreesToRadians", "$divide",
    "$eq", "$exp", "$filter", "$first", "$firstN", "$floor", "$function", "$getField", "$gt",
    "$gte", "$hour", "$ifNull", "$in", "$indexOfArray", "$indexOfBytes", "$indexOfCP",
    "$isArray", "$isNumber", "$isoDayOfWeek", "$isoWeek", "$isoWeekYear", "$last", "$lastN",
    "$let", "$literal", "$ln", "$log", "$log10", "$lt", "$lte", "$ltrim", "$map", "$max",
    "$maxN", "$median", "$mergeObjects", "$meta", "$millisecond", "$min", "$minN", "$minute",
    "$mod", "$month", "$multiply", "$ne", "$not", "$objectToArray", "$or", "$percentile",
    "$pow", "$radiansToDegrees", "$rand", "$range", "$reduce", "$regexFind", "$regexFindAll",
    "$regexMatch", "$replaceAll", "$replaceOne", "$reverseArray", "$round", "$rtrim", "$second",
    "$setDifference", "$setEquals", "$setField", "$setIntersection", "$setIsSubset",
    "$setUnion", "$sin", "$sinh", "$size", "$slice", "$sortArray", "$split", "$sqrt",
    "$stdDevPop", "$stdDevSamp", "$strLenBytes", "$strLenCP", "$strcasecmp", "$substr",
    "$substrBytes", "$substrCP", "$subtract", "$sum", "$switch", "$tan", "$tanh", "$toBool",
    "$toDate", "$toDecimal", "$toDouble", "$toHashedIndexKey", "$toInt", "$toLong", "$toLower",
    "$toObjectId", "$toString", "$toUpper", "$trim", "$trunc", "$tsIncrement", "$tsSecond",
    "$type", "$unsetField", "$week", "$year", "$zip",
];

// ---------------------------------------------------------------------------------------------
// Execution tree (projection_executor_builder.cpp, projection_node.cpp)
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Computed {
    Literal(RawBson),
    ElemMatch { filter: Arc<Filter>, field: String },
    Expr(Arc<dyn ProjectionExpression>),
}

#[derive(Clone, Debug)]
enum RootOp {
    Slice {
        path: Vec<String>,
        skip: Option<i32>,
        limit: i32,
    },
    Positional {
        path: Vec<String>,
    },
}

/// `ProjectionNode` (inclusion or exclusion by the projection's kind).
#[derive(Clone, Debug, Default)]
struct ExecNode {
    projected: Vec<String>,
    children: Vec<(String, ExecNode)>,
    expressions: Vec<(String, Computed)>,
    /// `_orderToProcessAdditionsAndChildren`.
    order: Vec<String>,
    subtree_computed: bool,
    /// `_maxFieldsToProject` (inclusion without computed fields).
    max_fields: Option<usize>,
}

/// Walks the AST in pre-order, as `ProjectionExecutorVisitor` does.
fn build_exec(
    tree: &AstTree,
    prefix: &mut Vec<String>,
    kind: ProjectionKind,
    root: &mut ExecNode,
    ops: &mut Vec<RootOp>,
    has_expr: &mut bool,
) {
    for (name, node) in &tree.children {
        prefix.push(name.clone());
        // The path is borrowed from `prefix`; only the root ops own a copy.
        let path = &prefix[..];
        match node {
            Ast::Inner(t) => build_exec(t, prefix, kind, root, ops, has_expr),
            Ast::Bool(v) => {
                let skip = kind == ProjectionKind::Inclusion && path == ["_id"] && !*v;
                if !skip {
                    root.add_projection(path);
                }
            }
            Ast::Positional => {
                root.add_projection(path);
                ops.push(RootOp::Positional {
                    path: path.to_vec(),
                });
            }
            Ast::Slice { skip, limit } => {
                if kind == ProjectionKind::Inclusion {
                    root.add_projection(path);
                }
                ops.push(RootOp::Slice {
                    path: path.to_vec(),
                    skip: *skip,
                    limit: *limit,
                });
            }
            Ast::ElemMatch(f) => root.add_expression(
                path,
                Computed::ElemMatch {
                    filter: Arc::clone(f),
                    field: name.clone(),
                },
            ),
            Ast::Literal(v) => root.add_expression(path, Computed::Literal(v.clone())),
            Ast::Expr(e) => {
                *has_expr = true;
                root.add_expression(path, Computed::Expr(Arc::clone(e)));
            }
        }
        prefix.pop();
    }
}

impl ExecNode {
    fn child(&self, name: &str) -> Option<&ExecNode> {
        self.children
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, c)| c)
    }

    fn add_or_get_child(&mut self, name: &str) -> Option<&mut ExecNode> {
        if !self.children.iter().any(|(k, _)| k == name) {
            self.order.push(name.to_string());
            self.children.push((name.to_string(), ExecNode::default()));
        }
        self.children
            .iter_mut()
            .find(|(k, _)| k == name)
            .map(|(_, c)| c)
    }

    fn add_projection(&mut self, path: &[String]) {
        match path {
            [] => {}
            [one] => {
                if !self.projected.iter().any(|p| p == one) {
                    self.projected.push(one.clone());
                }
            }
            [first, rest @ ..] => {
                if let Some(c) = self.add_or_get_child(first) {
                    c.add_projection(rest);
                }
            }
        }
    }

    fn add_expression(&mut self, path: &[String], expr: Computed) {
        self.subtree_computed = true;
        match path {
            [] => {}
            [one] => {
                match self.expressions.iter_mut().find(|(k, _)| k == one) {
                    Some(slot) => slot.1 = expr,
                    None => self.expressions.push((one.clone(), expr)),
                }
                self.order.push(one.clone());
            }
            [first, rest @ ..] => {
                if let Some(c) = self.add_or_get_child(first) {
                    c.add_expression(rest, expr);
                }
            }
        }
    }

    fn optimize(&mut self, kind: ProjectionKind) {
        self.max_fields = (kind == ProjectionKind::Inclusion && !self.subtree_computed)
            .then(|| self.projected.len() + self.children.len());
        for (_, c) in &mut self.children {
            c.optimize(kind);
        }
    }

    /// `InclusionNode::applyProjections` into `out`.
    fn include<'a>(&self, input: &'a RawDocument, out: &mut Fields<'a>, depth: usize) {
        let mut count = 0usize;
        for el in input.iter() {
            let Ok((k, v)) = el else { break };
            let name = k.as_str();
            if self.projected.iter().any(|p| p == name) {
                set_field(out, Cow::Borrowed(name), Val::Ref(v));
                count += 1;
            } else if let Some(child) = self.child(name) {
                let projected = child.project_value(v, ProjectionKind::Inclusion, depth + 1);
                set_field(out, Cow::Borrowed(name), projected);
                count += 1;
            }
            if self.max_fields.is_some_and(|m| count >= m) {
                break;
            }
        }
    }

    /// `ExclusionNode::applyProjections` on a copy of `input`.
    fn exclude<'a>(&self, input: &'a RawDocument, depth: usize) -> Fields<'a> {
        let mut out = Vec::new();
        for el in input.iter() {
            let Ok((k, v)) = el else { break };
            let name = k.as_str();
            if self.projected.iter().any(|p| p == name) {
                continue;
            }
            let val = match self.child(name) {
                Some(child) => child.project_value(v, ProjectionKind::Exclusion, depth + 1),
                None => Val::Ref(v),
            };
            out.push((Cow::Borrowed(name), val));
        }
        out
    }

    /// `applyProjectionsToValue`.
    fn project_value<'a>(&self, v: RawBsonRef<'a>, kind: ProjectionKind, depth: usize) -> Val<'a> {
        if depth > MAX_DEPTH {
            return skipped(kind, Val::Ref(v));
        }
        match v {
            RawBsonRef::Document(d) => Val::Doc(match kind {
                ProjectionKind::Inclusion => {
                    let mut out = Vec::new();
                    self.include(d, &mut out, depth);
                    out
                }
                ProjectionKind::Exclusion => self.exclude(d, depth),
            }),
            RawBsonRef::Array(a) => Val::Arr(
                a.into_iter()
                    .map_while(|e| e.ok())
                    .map(|e| self.project_value(e, kind, depth + 1))
                    .collect(),
            ),
            other => skipped(kind, Val::Ref(other)),
        }
    }

    /// `applyExpressions`.
    fn apply_expressions<'a>(
        &'a self,
        root: &'a RawDocument,
        out: &mut Fields<'a>,
        kind: ProjectionKind,
        depth: usize,
    ) -> Result<()> {
        for field in &self.order {
            if let Some(child) = self.child(field) {
                let current = match out.iter_mut().find(|(k, _)| k == field) {
                    Some(slot) => std::mem::replace(&mut slot.1, Val::Missing),
                    None => Val::Missing,
                };
                let v = child.apply_expressions_to_value(root, current, kind, depth + 1)?;
                set_field(out, Cow::Borrowed(field.as_str()), v);
            } else if let Some((_, expr)) = self.expressions.iter().find(|(k, _)| k == field) {
                let v = evaluate(expr, root)?;
                set_field(out, Cow::Borrowed(field.as_str()), v);
            }
        }
        Ok(())
    }

    /// `applyExpressionsToValue`.
    fn apply_expressions_to_value<'a>(
        &'a self,
        root: &'a RawDocument,
        v: Val<'a>,
        kind: ProjectionKind,
        depth: usize,
    ) -> Result<Val<'a>> {
        if depth > MAX_DEPTH {
            return Ok(v);
        }
        if v.is_doc() {
            let mut fields = v.into_fields();
            self.apply_expressions(root, &mut fields, kind, depth)?;
            return Ok(Val::Doc(fields));
        }
        if v.is_array() {
            let mut out = Vec::new();
            for e in v.into_elements() {
                out.push(self.apply_expressions_to_value(root, e, kind, depth + 1)?);
            }
            return Ok(Val::Arr(out));
        }
        if self.subtree_computed {
            let mut fields = Vec::new();
            self.apply_expressions(root, &mut fields, kind, depth)?;
            return Ok(Val::Doc(fields));
        }
        Ok(skipped(kind, v))
    }
}

fn evaluate<'a>(expr: &'a Computed, root: &'a RawDocument) -> Result<Val<'a>> {
    Ok(match expr {
        Computed::Literal(v) => Val::Ref(v.as_raw_bson_ref()),
        Computed::Expr(e) => match e.evaluate(root)? {
            Some(v) => Val::Owned(v),
            None => Val::Missing,
        },
        Computed::ElemMatch { filter, field } => {
            let Some(key) = filter.match_details(root).and_then(|d| d.elem_match_key) else {
                return Ok(Val::Missing);
            };
            match path::field(root, field) {
                Some(RawBsonRef::Array(a)) => match a.into_iter().nth(key) {
                    Some(Ok(e)) => Val::Arr(vec![Val::Ref(e)]),
                    _ => Val::Missing,
                },
                _ => Val::Missing,
            }
        }
    })
}

/// `transformSkippedValueForOutput`: inclusion drops, exclusion keeps.
fn skipped(kind: ProjectionKind, v: Val<'_>) -> Val<'_> {
    match kind {
        ProjectionKind::Inclusion => Val::Missing,
        ProjectionKind::Exclusion => v,
    }
}

// ---------------------------------------------------------------------------------------------
// Output values (a small `Document`/`Value` model with missing slots)
// ---------------------------------------------------------------------------------------------

type Fields<'a> = Vec<(Cow<'a, str>, Val<'a>)>;

/// A value being built: borrowed from the input, owned, or a rebuilt container. `Missing`
/// marks an absent field or array slot; it is skipped when the result is written.
#[derive(Clone, Debug)]
enum Val<'a> {
    Missing,
    Ref(RawBsonRef<'a>),
    Owned(RawBson),
    Doc(Fields<'a>),
    Arr(Vec<Val<'a>>),
}

impl<'a> Val<'a> {
    fn is_doc(&self) -> bool {
        matches!(
            self,
            Val::Doc(_) | Val::Ref(RawBsonRef::Document(_)) | Val::Owned(RawBson::Document(_))
        )
    }

    fn is_array(&self) -> bool {
        matches!(
            self,
            Val::Arr(_) | Val::Ref(RawBsonRef::Array(_)) | Val::Owned(RawBson::Array(_))
        )
    }

    fn is_missing(&self) -> bool {
        matches!(self, Val::Missing)
    }

    /// The fields of a document value (empty for anything else).
    fn into_fields(self) -> Fields<'a> {
        match self {
            Val::Doc(f) => f,
            Val::Ref(RawBsonRef::Document(d)) => d
                .iter()
                .map_while(|e| e.ok())
                .map(|(k, v)| (Cow::Borrowed(k.as_str()), Val::Ref(v)))
                .collect(),
            Val::Owned(RawBson::Document(d)) => d
                .iter()
                .map_while(|e| e.ok())
                .map(|(k, v)| {
                    (
                        Cow::Owned(k.as_str().to_string()),
                        Val::Owned(RawBson::from(v)),
                    )
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The elements of an array value (empty for anything else).
    fn into_elements(self) -> Vec<Val<'a>> {
        match self {
            Val::Arr(v) => v,
            Val::Ref(RawBsonRef::Array(a)) => {
                a.into_iter().map_while(|e| e.ok()).map(Val::Ref).collect()
            }
            Val::Owned(RawBson::Array(a)) => a
                .into_iter()
                .map_while(|e| e.ok())
                .map(|e| Val::Owned(RawBson::from(e)))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The element at `idx` of an array value (`Value::operator[]`).
    fn element(&self, idx: usize) -> Option<Val<'a>> {
        match self {
            Val::Arr(v) => v.get(idx).cloned(),
            Val::Ref(RawBsonRef::Array(a)) => a.into_iter().nth(idx)?.ok().map(Val::Ref),
            Val::Owned(RawBson::Array(a)) => a
                .into_iter()
                .nth(idx)?
                .ok()
                .map(|e| Val::Owned(RawBson::from(e))),
            _ => None,
        }
    }
}

/// `MutableDocument::setField`: replaces the first field of that name, else appends.
fn set_field<'a>(out: &mut Fields<'a>, name: Cow<'a, str>, v: Val<'a>) {
    match out.iter_mut().find(|(k, _)| *k == name) {
        Some(slot) => slot.1 = v,
        None => out.push((name, v)),
    }
}

/// `applyFindSliceProjectionHelper`.
fn slice_fields(
    fields: &mut Fields<'_>,
    path: &[String],
    idx: usize,
    skip: Option<i32>,
    limit: i32,
    depth: usize,
) {
    let Some(name) = path.get(idx) else { return };
    if depth > MAX_DEPTH {
        return;
    }
    let next = idx + 1;
    let at_end = next == path.len();
    let Some(slot) = fields.iter_mut().find(|(k, _)| k == name) else {
        return;
    };
    let v = std::mem::replace(&mut slot.1, Val::Missing);
    slot.1 = if v.is_array() {
        let elems = v.into_elements();
        if at_end {
            Val::Arr(slice_array(elems, skip, limit))
        } else {
            Val::Arr(
                elems
                    .into_iter()
                    .map(|e| {
                        if e.is_doc() {
                            let mut f = e.into_fields();
                            slice_fields(&mut f, path, next, skip, limit, depth + 1);
                            Val::Doc(f)
                        } else {
                            e
                        }
                    })
                    .collect(),
            )
        }
    } else if v.is_doc() && !at_end {
        let mut f = v.into_fields();
        slice_fields(&mut f, path, next, skip, limit, depth + 1);
        Val::Doc(f)
    } else {
        v
    };
}

/// `sliceArray`.
fn slice_array<T>(array: Vec<T>, skip: Option<i32>, limit: i32) -> Vec<T> {
    let len = array.len() as i64;
    let limit = i64::from(limit);
    let (start, forward) = match skip {
        None if limit < 0 => {
            let start = (len + limit).max(0);
            (start, len - start)
        }
        None => (0, len.min(limit)),
        Some(skip) => {
            let skip = i64::from(skip);
            let limit = limit.max(0);
            let start = if skip < 0 {
                (len + skip).max(0)
            } else {
                len.min(skip)
            };
            (start, (len - start).min(limit))
        }
    };
    let start = usize::try_from(start).unwrap_or(0);
    let forward = usize::try_from(forward).unwrap_or(0);
    array.into_iter().skip(start).take(forward).collect()
}

/// `applyFindPositionalProjection` on the projected document.
fn positional(out: &mut Fields<'_>, path: &[String], key: Option<usize>) -> Result<()> {
    if let Some((ind, elem)) = find_positional(out, path, 0, key, 0)? {
        let prefix = path.get(..=ind).unwrap_or(path);
        set_nested(out, prefix, Val::Arr(vec![elem]), 0);
    }
    Ok(())
}

/// Walks `path` from component `ind` in `fields`: the first array met gives
/// `(its component index, element at key)`; documents are entered; anything else is skipped
/// *without* leaving the current document (MongoDB's loop keeps `subDoc`).
fn find_positional<'a>(
    fields: &mut Fields<'a>,
    path: &[String],
    mut ind: usize,
    key: Option<usize>,
    depth: usize,
) -> Result<Option<(usize, Val<'a>)>> {
    while let Some(name) = path.get(ind) {
        let Some(slot) = fields.iter_mut().find(|(k, _)| k == name) else {
            ind += 1;
            continue;
        };
        if slot.1.is_array() {
            let Some(key) = key else {
                return Err(loc(
                    51246,
                    "positional operator '.$' couldn't find a matching element in the array",
                ));
            };
            return match slot.1.element(key) {
                Some(e) if !e.is_missing() => Ok(Some((ind, e))),
                _ => Err(loc(51247, "positional operator '.$' element mismatch")),
            };
        }
        if slot.1.is_doc() && depth < MAX_DEPTH {
            let v = std::mem::replace(&mut slot.1, Val::Missing);
            slot.1 = Val::Doc(v.into_fields());
            if let Val::Doc(inner) = &mut slot.1 {
                return find_positional(inner, path, ind + 1, key, depth + 1);
            }
        }
        ind += 1;
    }
    Ok(None)
}

/// `MutableDocument::setNestedField`: non-documents along the way become empty documents.
fn set_nested<'a>(fields: &mut Fields<'a>, path: &[String], v: Val<'a>, depth: usize) {
    match path {
        [] => {}
        [one] => set_field(fields, Cow::Owned(one.clone()), v),
        [first, rest @ ..] => {
            if depth > MAX_DEPTH {
                return;
            }
            let pos = match fields.iter().position(|(k, _)| k == first) {
                Some(p) => p,
                None => {
                    fields.push((Cow::Owned(first.clone()), Val::Doc(Vec::new())));
                    fields.len() - 1
                }
            };
            if let Some(slot) = fields.get_mut(pos) {
                let cur = std::mem::replace(&mut slot.1, Val::Missing);
                let inner = if cur.is_doc() {
                    cur.into_fields()
                } else {
                    Vec::new()
                };
                slot.1 = Val::Doc(inner);
                if let Val::Doc(inner) = &mut slot.1 {
                    set_nested(inner, rest, v, depth + 1);
                }
            }
        }
    }
}

fn key_cstr(name: &str) -> Result<&CStr> {
    <&CStr>::try_from(name).map_err(|e| QueryError::BadValue(format!("invalid field name: {e}")))
}

/// Writes a document, skipping missing fields.
fn write_doc(fields: &Fields<'_>, depth: usize) -> Result<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    for (k, v) in fields {
        let name = key_cstr(k)?;
        match v {
            Val::Missing => {}
            Val::Ref(r) => out.append(name, *r),
            Val::Owned(o) => out.append(name, o.as_raw_bson_ref()),
            Val::Doc(f) => out.append(name, write_doc(f, depth + 1)?),
            Val::Arr(a) => out.append(name, write_arr(a, depth + 1)?),
        }
    }
    Ok(out)
}

/// Writes an array, skipping missing elements (`Value::addToBsonArray`).
fn write_arr(items: &[Val<'_>], depth: usize) -> Result<RawArrayBuf> {
    let mut out = RawArrayBuf::new();
    for v in items {
        match v {
            Val::Missing => {}
            Val::Ref(r) => out.push(*r),
            Val::Owned(o) => out.push(o.as_raw_bson_ref()),
            Val::Doc(f) => out.push(write_doc(f, depth + 1)?),
            Val::Arr(a) => out.push(write_arr(a, depth + 1)?),
        }
    }
    Ok(out)
}
