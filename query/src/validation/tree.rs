//! A collection validator as MongoDB's annotated match-expression tree.
//!
//! MongoDB parses a validator into match expressions whose nodes carry an *error annotation*
//! (`MatchExpression::ErrorAnnotation`, set by `doc_validation_error::createAnnotation` only
//! while parsing a validator): the operator name the node stands for (its *tag*), the
//! operator as the user wrote it (`specifiedAs`), and a mode — generate an error, ignore the
//! node, or ignore it but look at its children. [`VNode`] is that tree for the query
//! operators, built by [`build`] from a validator that [`crate::filter::Filter::parse_with`]
//! has already accepted, so parse errors (and their order) are the filter parser's:
//! - the root and every `$and`/`$or`/`$nor` entry is an implicit `$and` of its clauses
//!   (a single clause stands alone);
//! - `{path: {$op: v, …}}` gives one leaf per operator tagged `$op` with `specifiedAs`
//!   `{path: {$op: v}}` (`$regex` keeps its `$options`: `{path: {$regex, $options}}`);
//! - `$ne`, `$nin` and `$exists: false` are a `$not` that is not reported itself
//!   (`kIgnoreButDescend`) over the positive leaf, which keeps the negated tag;
//! - `{path: {$not: {…}}}` is a `$not` tagged node over an `$and` of the operators (a lone
//!   operator is not wrapped); `{path: {$not: /re/}}` a `$not` over a `$regex` leaf;
//! - `$elemMatch` and `$all` are leaves (their children never report); `$all: []` is an
//!   always-false node;
//! - `$expr` is a leaf evaluated for its `expressionResult`;
//! - `$jsonSchema` is the schema's own annotated tree ([`crate::jsonschema`]);
//! - `$alwaysTrue`, `$alwaysFalse` and a fractional `$sampleRate` have no annotation, so a
//!   validator containing them fails validation without details, as MongoDB's does;
//! - `$comment` is dropped.
//!
//! Evaluation of a node ([`VNode::try_matches`]) is the filter's on the same operators, so a
//! node's verdict during error generation is the one that decided the write.

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Expression, Variables};
use crate::filter::{Expr, Filter, NoExtensions};
use crate::jsonschema::{JsonSchema, JsonSchemaOptions};
use crate::path::FieldPath;

/// What a node does during error generation (MongoDB's `ErrorAnnotation::Mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Neither the node nor its children contribute.
    Ignore,
    /// The node does not contribute, its children may.
    IgnoreButDescend,
    /// The node contributes.
    Generate,
}

/// A node's error annotation.
#[derive(Clone, Debug)]
pub(crate) struct Annotation {
    /// The operator the node stands for (`$gt`, `properties`), or an internal name starting
    /// with `_` (`_subschema`, `_property`), or empty.
    pub(crate) tag: &'static str,
    /// The operator as written (`specifiedAs`), or fields a logical node appends.
    pub(crate) spec: RawDocumentBuf,
    /// The mode.
    pub(crate) mode: Mode,
    /// The `title` of the schema the node stands for.
    pub(crate) title: Option<String>,
    /// The `description` of the schema the node stands for.
    pub(crate) description: Option<String>,
}

impl Annotation {
    /// A node that reports as `tag`.
    pub(crate) fn generate(tag: &'static str, spec: RawDocumentBuf) -> Annotation {
        Annotation {
            tag,
            spec,
            mode: Mode::Generate,
            title: None,
            description: None,
        }
    }

    /// A node that does not report itself.
    pub(crate) fn mode(mode: Mode) -> Annotation {
        Annotation {
            tag: "",
            spec: RawDocumentBuf::new(),
            mode,
            title: None,
            description: None,
        }
    }

    /// With the `title` and `description` of `schema` (MongoDB's `SchemaAnnotations`; only
    /// string values count).
    pub(crate) fn with_schema(mut self, schema: &RawDocument) -> Annotation {
        if let Ok(Some(RawBsonRef::String(t))) = schema.get("title") {
            self.title = Some(t.to_string());
        }
        if let Ok(Some(RawBsonRef::String(d))) = schema.get("description") {
            self.description = Some(d.to_string());
        }
        self
    }

    /// The annotation of an unannotated node.
    pub(crate) fn ignore() -> &'static Annotation {
        static IGNORE: std::sync::OnceLock<Annotation> = std::sync::OnceLock::new();
        IGNORE.get_or_init(|| Annotation::mode(Mode::Ignore))
    }
}

/// How a query-operator leaf reports (which of MongoDB's visitor functions handles it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeafKind {
    /// `$eq $lt $lte $gt $gte` (and implicit equality).
    Comparison,
    /// `$in`.
    In,
    /// `$regex` (and `/re/`).
    Regex,
    /// `$exists`.
    Exists,
    /// `$type`.
    Type,
    /// `$mod`.
    Mod,
    /// `$size`.
    Size,
    /// `$elemMatch`.
    ElemMatch,
    /// `$bitsAllSet`, `$bitsAllClear`, `$bitsAnySet`, `$bitsAnyClear`.
    Bits,
    /// `$all` (non-empty).
    All,
}

/// A node of a validator's query-operator tree.
#[derive(Clone, Debug)]
pub(crate) enum VNode {
    /// `$and` (explicit or implicit), or the unreported `$and` under a `$not`.
    And(Annotation, Vec<VNode>),
    /// `$or`.
    Or(Annotation, Vec<VNode>),
    /// `$nor`.
    Nor(Annotation, Vec<VNode>),
    /// `$not`, or the unreported negation of `$ne`/`$nin`/`$exists: false`.
    Not(Annotation, Box<VNode>),
    /// A path operator.
    Leaf {
        /// The annotation (tag: the operator).
        ann: Annotation,
        /// How it reports.
        kind: LeafKind,
        /// The path.
        path: FieldPath,
        /// The operator as the filter evaluates it.
        expr: Expr,
    },
    /// `$all: []` (always false).
    AlwaysFalse(Annotation),
    /// `$expr`, or `$sampleRate` 0/1 (a constant expression).
    Expr {
        /// The annotation.
        ann: Annotation,
        /// The expression.
        expression: Expression,
    },
    /// `$jsonSchema`.
    Schema(JsonSchema),
    /// A node without annotation: error generation fails on it (`$alwaysTrue`,
    /// `$alwaysFalse`, a fractional `$sampleRate`).
    Unannotated(Expr),
}

impl VNode {
    /// Whether `doc` matches, or the evaluation error (an `$expr` that throws); `$expr`
    /// sees `vars` (`$$NOW` is the time of the write).
    pub(crate) fn try_matches(&self, doc: &RawDocument, vars: &Variables) -> Result<bool> {
        match self {
            VNode::And(_, cs) => {
                for c in cs {
                    if !c.try_matches(doc, vars)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            VNode::Or(_, cs) => {
                for c in cs {
                    if c.try_matches(doc, vars)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            VNode::Nor(_, cs) => {
                for c in cs {
                    if c.try_matches(doc, vars)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            VNode::Not(_, c) => Ok(!c.try_matches(doc, vars)?),
            VNode::Leaf { expr, .. } | VNode::Unannotated(expr) => expr_matches(expr, doc),
            VNode::AlwaysFalse(_) => Ok(false),
            VNode::Expr { expression, .. } => expression.evaluate_truthy(doc, vars),
            VNode::Schema(s) => Ok(s.matches(doc)),
        }
    }

    /// Whether the tree has a node without annotation (error generation then fails).
    pub(crate) fn has_unannotated(&self) -> bool {
        match self {
            VNode::And(_, cs) | VNode::Or(_, cs) | VNode::Nor(_, cs) => {
                cs.iter().any(VNode::has_unannotated)
            }
            VNode::Not(_, c) => c.has_unannotated(),
            VNode::Unannotated(_) => true,
            _ => false,
        }
    }
}

/// Whether `doc` matches a filter node (only `$sampleRate`'s can fail to evaluate).
fn expr_matches(expr: &Expr, doc: &RawDocument) -> Result<bool> {
    Ok(expr.matches(doc))
}

/// `{path: {op: v}}`.
fn spec(path: &str, op: &str, v: RawBsonRef<'_>) -> RawDocumentBuf {
    let mut inner = RawDocumentBuf::new();
    if let Ok(k) = <&bson::raw::CStr>::try_from(op) {
        inner.append(k, v);
    }
    let mut d = RawDocumentBuf::new();
    if let Ok(k) = <&bson::raw::CStr>::try_from(path) {
        d.append(k, inner);
    }
    d
}

/// `{name: v}`.
fn wrap(name: &str, v: impl Into<bson::RawBson>) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    if let Ok(k) = <&bson::raw::CStr>::try_from(name) {
        d.append(k, v.into());
    }
    d
}

/// The filter tree of one operator document `{path: sub}` (parsed by the filter parser, so
/// it means exactly what the query operator means).
fn leaf_expr(path: &str, sub: RawDocumentBuf) -> Result<Expr> {
    let mut d = RawDocumentBuf::new();
    let k = <&bson::raw::CStr>::try_from(path).map_err(|e| QueryError::BadValue(e.to_string()))?;
    d.append(k, sub);
    Ok(Filter::parse_with(&d, &NoExtensions)?.expr().clone())
}

/// Builds the annotated tree of a validator (already accepted by the filter parser).
pub(crate) fn build(validator: &RawDocument, ext: &ExprExtensions) -> Result<VNode> {
    let b = Builder { ext };
    b.doc(validator)
}

struct Builder<'e> {
    ext: &'e ExprExtensions,
}

impl Builder<'_> {
    /// `parse`: the implicit `$and` of a filter document's clauses.
    fn doc(&self, doc: &RawDocument) -> Result<VNode> {
        let mut children = Vec::new();
        for el in doc.iter() {
            let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
            let name = k.as_str();
            if let Some(op) = name.strip_prefix('$') {
                if let Some(n) = self.pathless(op, name, v)? {
                    children.push(n);
                }
                continue;
            }
            match v {
                RawBsonRef::Document(sub) if is_operator_document(sub) => {
                    self.sub(name, sub, &mut children)?;
                }
                RawBsonRef::RegularExpression(_) => {
                    let mut d = RawDocumentBuf::new();
                    d.append(k, v);
                    children.push(VNode::Leaf {
                        ann: Annotation::generate("$regex", d.clone()),
                        kind: LeafKind::Regex,
                        path: FieldPath::new(name),
                        expr: Filter::parse_with(&d, &NoExtensions)?.expr().clone(),
                    });
                }
                _ => {
                    let d = wrap(name, v);
                    children.push(VNode::Leaf {
                        ann: Annotation::generate("$eq", d.clone()),
                        kind: LeafKind::Comparison,
                        path: FieldPath::new(name),
                        expr: Filter::parse_with(&d, &NoExtensions)?.expr().clone(),
                    });
                }
            }
        }
        if children.len() == 1
            && let Some(only) = children.pop()
        {
            return Ok(only);
        }
        Ok(VNode::And(
            Annotation::generate("$and", RawDocumentBuf::new()),
            children,
        ))
    }

    fn pathless(&self, op: &str, full: &str, v: RawBsonRef<'_>) -> Result<Option<VNode>> {
        let tree = || -> Result<Vec<VNode>> {
            let mut out = Vec::new();
            if let RawBsonRef::Array(a) = v {
                for el in a {
                    if let Ok(RawBsonRef::Document(d)) = el {
                        out.push(self.doc(d)?);
                    }
                }
            }
            Ok(out)
        };
        Ok(Some(match op {
            "comment" => return Ok(None),
            "and" => VNode::And(Annotation::generate("$and", RawDocumentBuf::new()), tree()?),
            "or" => VNode::Or(Annotation::generate("$or", RawDocumentBuf::new()), tree()?),
            "nor" => VNode::Nor(Annotation::generate("$nor", RawDocumentBuf::new()), tree()?),
            "expr" => VNode::Expr {
                ann: Annotation::generate("$expr", wrap(full, v)),
                expression: self.ext.parse_expression(v)?,
            },
            "sampleRate" => {
                let rate = match v {
                    RawBsonRef::Double(d) => d,
                    RawBsonRef::Int32(i) => f64::from(i),
                    RawBsonRef::Int64(i) => i as f64,
                    _ => 0.5,
                };
                if rate == 0.0 || rate == 1.0 {
                    let constant = RawBsonRef::Boolean(rate == 1.0);
                    VNode::Expr {
                        ann: Annotation::generate("$sampleRate", wrap(full, v)),
                        expression: self.ext.parse_expression(constant)?,
                    }
                } else {
                    VNode::Unannotated(single(full, v)?)
                }
            }
            "jsonSchema" => {
                let RawBsonRef::Document(schema) = v else {
                    return Err(QueryError::TypeMismatch(
                        "$jsonSchema must be an object".into(),
                    ));
                };
                VNode::Schema(JsonSchema::parse_annotated(
                    schema,
                    JsonSchemaOptions::default(),
                )?)
            }
            _ => VNode::Unannotated(single(full, v)?),
        }))
    }

    /// `parseSub`: one leaf per operator of `{path: {$op: v, …}}`.
    fn sub(&self, path: &str, sub: &RawDocument, out: &mut Vec<VNode>) -> Result<()> {
        for el in sub.iter() {
            let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
            if let Some(n) = self.operator(path, sub, k.as_str(), v)? {
                out.push(n);
            }
        }
        Ok(())
    }

    fn operator(
        &self,
        path: &str,
        context: &RawDocument,
        op: &str,
        v: RawBsonRef<'_>,
    ) -> Result<Option<VNode>> {
        let leaf = |tag: &'static str, kind: LeafKind, sub: RawDocumentBuf| -> Result<VNode> {
            let mut one = RawDocumentBuf::new();
            let key = <&bson::raw::CStr>::try_from(path)
                .map_err(|e| QueryError::BadValue(e.to_string()))?;
            one.append(key, sub.clone());
            Ok(VNode::Leaf {
                ann: Annotation::generate(tag, one),
                kind,
                path: FieldPath::new(path),
                expr: leaf_expr(path, sub)?,
            })
        };
        let descend = Annotation::mode(crate::validation::tree::Mode::IgnoreButDescend);
        Ok(Some(match op {
            "$eq" | "$lt" | "$lte" | "$gt" | "$gte" => {
                leaf(static_op(op), LeafKind::Comparison, wrap_op(op, v))?
            }
            "$ne" => VNode::Not(
                descend,
                Box::new(retag(
                    leaf("$ne", LeafKind::Comparison, wrap_op("$eq", v))?,
                    spec(path, "$ne", v),
                )),
            ),
            "$in" => leaf("$in", LeafKind::In, wrap_op("$in", v))?,
            "$nin" => VNode::Not(
                descend,
                Box::new(retag(
                    leaf("$nin", LeafKind::In, wrap_op("$in", v))?,
                    spec(path, "$nin", v),
                )),
            ),
            "$exists" => {
                let positive = retag(
                    leaf(
                        "$exists",
                        LeafKind::Exists,
                        wrap_op("$exists", RawBsonRef::Boolean(true)),
                    )?,
                    spec(path, "$exists", v),
                );
                // The filter parser decides truthiness as MongoDB's `trueValue`.
                if matches!(leaf_expr(path, wrap_op("$exists", v))?, Expr::Not(_)) {
                    VNode::Not(descend, Box::new(positive))
                } else {
                    positive
                }
            }
            "$type" => leaf("$type", LeafKind::Type, wrap_op("$type", v))?,
            "$mod" => leaf("$mod", LeafKind::Mod, wrap_op("$mod", v))?,
            "$size" => leaf("$size", LeafKind::Size, wrap_op("$size", v))?,
            "$elemMatch" => leaf("$elemMatch", LeafKind::ElemMatch, wrap_op("$elemMatch", v))?,
            "$all" => {
                let empty = matches!(v, RawBsonRef::Array(a) if a.into_iter().next().is_none());
                if empty {
                    VNode::AlwaysFalse(Annotation::generate("$all", spec(path, "$all", v)))
                } else {
                    leaf("$all", LeafKind::All, wrap_op("$all", v))?
                }
            }
            "$bitsAllSet" | "$bitsAllClear" | "$bitsAnySet" | "$bitsAnyClear" => {
                leaf(static_op(op), LeafKind::Bits, wrap_op(op, v))?
            }
            "$regex" => {
                // The whole operator document is the regex's `specifiedAs`.
                let mut sub = RawDocumentBuf::new();
                for (k, x) in context.iter().flatten() {
                    if matches!(k.as_str(), "$regex" | "$options") {
                        sub.append(k, x);
                    }
                }
                retag(
                    leaf("$regex", LeafKind::Regex, sub)?,
                    wrap(path, context.to_owned()),
                )
            }
            "$options" => return Ok(None),
            "$not" => self.not(path, v)?,
            _ => VNode::Unannotated(leaf_expr(path, wrap_op(op, v))?),
        }))
    }

    /// `parseNot`.
    fn not(&self, path: &str, v: RawBsonRef<'_>) -> Result<VNode> {
        let ann = Annotation::generate("$not", RawDocumentBuf::new());
        if let RawBsonRef::RegularExpression(_) = v {
            let d = wrap(path, v);
            return Ok(VNode::Not(
                ann,
                Box::new(VNode::Leaf {
                    ann: Annotation::generate("$regex", d.clone()),
                    kind: LeafKind::Regex,
                    path: FieldPath::new(path),
                    expr: Filter::parse_with(&d, &NoExtensions)?.expr().clone(),
                }),
            ));
        }
        let RawBsonRef::Document(d) = v else {
            return Err(QueryError::BadValue(
                "$not needs a regex or a document".into(),
            ));
        };
        let mut children = Vec::new();
        self.sub(path, d, &mut children)?;
        let and_ann = if children.len() == 1 {
            Annotation::mode(Mode::IgnoreButDescend)
        } else {
            Annotation::generate("$and", RawDocumentBuf::new())
        };
        Ok(VNode::Not(ann, Box::new(VNode::And(and_ann, children))))
    }
}

/// The interned name of a comparison or bit operator.
fn static_op(op: &str) -> &'static str {
    match op {
        "$eq" => "$eq",
        "$lt" => "$lt",
        "$lte" => "$lte",
        "$gt" => "$gt",
        "$gte" => "$gte",
        "$bitsAllSet" => "$bitsAllSet",
        "$bitsAllClear" => "$bitsAllClear",
        "$bitsAnySet" => "$bitsAnySet",
        _ => "$bitsAnyClear",
    }
}

fn wrap_op(op: &str, v: RawBsonRef<'_>) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    if let Ok(k) = <&bson::raw::CStr>::try_from(op) {
        d.append(k, v);
    }
    d
}

/// A leaf with another `specifiedAs` (the operator as written when the filter evaluates an
/// equivalent one).
fn retag(node: VNode, spec: RawDocumentBuf) -> VNode {
    match node {
        VNode::Leaf {
            ann,
            kind,
            path,
            expr,
        } => VNode::Leaf {
            ann: Annotation { spec, ..ann },
            kind,
            path,
            expr,
        },
        other => other,
    }
}

/// The filter tree of `{name: v}` on its own.
fn single(name: &str, v: RawBsonRef<'_>) -> Result<Expr> {
    let d = wrap(name, v);
    Ok(Filter::parse_with(&d, &NoExtensions)?.expr().clone())
}

/// MongoDB's `isExpressionDocument` (no incomplete DBRefs).
fn is_operator_document(d: &RawDocument) -> bool {
    let Some(Ok((first, _))) = d.iter().next() else {
        return false;
    };
    if !first.as_str().starts_with('$') {
        return false;
    }
    let (mut r, mut i) = (false, false);
    for (k, _) in d.iter().flatten() {
        match k.as_str() {
            "$ref" => r = true,
            "$id" => i = true,
            _ => {}
        }
    }
    !(r && i)
}
