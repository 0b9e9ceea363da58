//! Parsing aggregation expressions into a [`Node`] tree (src/mongo/db/pipeline/expression.cpp:
//! `parseOperand`, `parseObject`, `parseExpression`, each operator's `parse`, the arity
//! checks of `ExpressionFixedArity` / `ExpressionRangedArity`, and variable_validation.cpp).
//!
//! - A string starting with `$` is a field path (`$a.b`) or a variable (`$$name.path`); a
//!   document whose first field starts with `$` is an operator document that must have exactly
//!   one field (15983); any other document is an object expression; an array is an array
//!   expression; anything else is a constant.
//! - Unknown operators are 168 "Unrecognized expression '$foo'"; MongoDB 7.0's accumulator-only
//!   and window-only names are NotImplemented (238) naming the operator (the aggregation stages
//!   evaluate them).
//! - Operators with named arguments (`{$op: {name: expr}}`) become [`Node::Named`] with their
//!   arguments in a fixed order ([`Named`]); `$sortArray` keeps its parsed `sortBy`.
//! - Variables: `ROOT`, `CURRENT` (rebindable with `$let`), `REMOVE` and `SEARCH_META`
//!   (missing), `NOW`, `CLUSTER_TIME`, `DESCEND`/`PRUNE`/`KEEP` (constant strings), user
//!   variables supplied by the [`ParseContext`] (a command's `let`), and locals bound by `$let`,
//!   `$map`, `$filter`, `$reduce`, each given a slot number at parse time.
//!
//! Invariants: parsing never panics; nesting is bounded by [`MAX_DEPTH`] (error 15 Overflow
//! beyond it); every local variable reference names a slot below [`Parsed::slots`].

use bson::{RawArray, RawBson, RawBsonRef, RawDocument};

use super::ParseContext;
use super::named::{DatePart, Named, SortBy};
use super::value::element_type_name;
use crate::error::{QueryError, Result};
use crate::sort::validate_field_path;

/// Deepest nesting of expressions accepted.
pub const MAX_DEPTH: usize = 150;

/// A variable a field path starts from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Var {
    /// `$$ROOT`, and `$$CURRENT` while it is not rebound.
    Root,
    /// `$$NOW`.
    Now,
    /// `$$CLUSTER_TIME` (the caller's [`super::Variables::set_cluster_time`]).
    ClusterTime,
    /// A variable of the [`ParseContext`].
    User(String),
    /// A local bound by `$let`, `$map`, `$filter` or `$reduce`.
    Local(usize),
}

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpKind {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    Cmp,
}

/// Operators with positional arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Subtract,
    Multiply,
    Divide,
    Mod,
    Abs,
    Ceil,
    Floor,
    Round,
    Trunc,
    Sqrt,
    Pow,
    Exp,
    Ln,
    Log,
    Log10,
    And,
    Or,
    Not,
    Compare(CmpKind),
    Cond,
    IfNull,
    In,
    Size,
    ArrayElemAt,
    First,
    Last,
    ConcatArrays,
    ReverseArray,
    IsArray,
    Slice,
    IndexOfArray,
    Range,
    AllElementsTrue,
    AnyElementTrue,
    Concat,
    ToLower,
    ToUpper,
    StrLenCP,
    StrLenBytes,
    SubstrCP,
    SubstrBytes,
    Strcasecmp,
    Split,
    Type,
    IsNumber,
    /// `$convert` and its shortcuts: children are `input`, `to`, `onError`?, `onNull`?.
    Convert {
        on_error: bool,
        on_null: bool,
    },
    CoerceToBool,
    SetEquals,
    SetIntersection,
    SetUnion,
    SetDifference,
    SetIsSubset,
    IndexOfBytes,
    IndexOfCP,
    ObjectToArray,
    ArrayToObject,
    MergeObjects,
    BitAnd,
    BitOr,
    BitXor,
    BitNot,
    BsonSize,
    BinarySize,
    TsSecond,
    TsIncrement,
    ToHashedIndexKey,
    Trig(super::trig::Trig),
    Atan2,
    /// `$rand` (never folded).
    Rand,
    /// `$meta` with its (validated) name.
    Meta,
    /// `$function`: evaluation fails, server-side JavaScript is not available.
    Function,
}

impl Op {
    /// The operator's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Add => "$add",
            Op::Subtract => "$subtract",
            Op::Multiply => "$multiply",
            Op::Divide => "$divide",
            Op::Mod => "$mod",
            Op::Abs => "$abs",
            Op::Ceil => "$ceil",
            Op::Floor => "$floor",
            Op::Round => "$round",
            Op::Trunc => "$trunc",
            Op::Sqrt => "$sqrt",
            Op::Pow => "$pow",
            Op::Exp => "$exp",
            Op::Ln => "$ln",
            Op::Log => "$log",
            Op::Log10 => "$log10",
            Op::And => "$and",
            Op::Or => "$or",
            Op::Not => "$not",
            Op::Compare(k) => match k {
                CmpKind::Eq => "$eq",
                CmpKind::Ne => "$ne",
                CmpKind::Gt => "$gt",
                CmpKind::Gte => "$gte",
                CmpKind::Lt => "$lt",
                CmpKind::Lte => "$lte",
                CmpKind::Cmp => "$cmp",
            },
            Op::Cond => "$cond",
            Op::IfNull => "$ifNull",
            Op::In => "$in",
            Op::Size => "$size",
            Op::ArrayElemAt => "$arrayElemAt",
            Op::First => "$first",
            Op::Last => "$last",
            Op::ConcatArrays => "$concatArrays",
            Op::ReverseArray => "$reverseArray",
            Op::IsArray => "$isArray",
            Op::Slice => "$slice",
            Op::IndexOfArray => "$indexOfArray",
            Op::Range => "$range",
            Op::AllElementsTrue => "$allElementsTrue",
            Op::AnyElementTrue => "$anyElementTrue",
            Op::Concat => "$concat",
            Op::ToLower => "$toLower",
            Op::ToUpper => "$toUpper",
            Op::StrLenCP => "$strLenCP",
            Op::StrLenBytes => "$strLenBytes",
            Op::SubstrCP => "$substrCP",
            Op::SubstrBytes => "$substrBytes",
            Op::Strcasecmp => "$strcasecmp",
            Op::Split => "$split",
            Op::Type => "$type",
            Op::IsNumber => "$isNumber",
            Op::Convert { .. } => "$convert",
            Op::CoerceToBool => "$coerceToBool",
            Op::SetEquals => "$setEquals",
            Op::SetIntersection => "$setIntersection",
            Op::SetUnion => "$setUnion",
            Op::SetDifference => "$setDifference",
            Op::SetIsSubset => "$setIsSubset",
            Op::IndexOfBytes => "$indexOfBytes",
            Op::IndexOfCP => "$indexOfCP",
            Op::ObjectToArray => "$objectToArray",
            Op::ArrayToObject => "$arrayToObject",
            Op::MergeObjects => "$mergeObjects",
            Op::BitAnd => "$bitAnd",
            Op::BitOr => "$bitOr",
            Op::BitXor => "$bitXor",
            Op::BitNot => "$bitNot",
            Op::BsonSize => "$bsonSize",
            Op::BinarySize => "$binarySize",
            Op::TsSecond => "$tsSecond",
            Op::TsIncrement => "$tsIncrement",
            Op::ToHashedIndexKey => "$toHashedIndexKey",
            Op::Trig(t) => t.name(),
            Op::Atan2 => "$atan2",
            Op::Rand => "$rand",
            Op::Meta => "$meta",
            Op::Function => "$function",
        }
    }

    /// `ExpressionNary::getAssociativity() == kFull` and `isCommutative()`.
    pub(crate) fn associative_commutative(self) -> (bool, bool) {
        match self {
            Op::Add | Op::Multiply | Op::And | Op::Or => (true, true),
            Op::BitAnd | Op::BitOr | Op::BitXor => (true, true),
            Op::Concat | Op::ConcatArrays => (true, false),
            _ => (false, false),
        }
    }
}

/// A parsed expression.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// A constant; `None` is missing (`$$REMOVE`).
    Constant(Option<RawBson>),
    /// A field path from a variable: `$a.b` is `(CURRENT, [a, b])`, `$$ROOT` is `(Root, [])`.
    Path(Var, Vec<String>),
    /// `[e, …]`: missing elements become null.
    Array(Vec<Node>),
    /// `{k: e, …}`: missing values drop their field.
    Object(Vec<(String, Node)>),
    /// An operator with positional arguments.
    Op(Op, Vec<Node>),
    /// `$switch`.
    Switch {
        branches: Vec<(Node, Node)>,
        default: Option<Box<Node>>,
    },
    /// `$let`.
    Let {
        vars: Vec<(usize, Node)>,
        body: Box<Node>,
    },
    /// `$map`.
    Map {
        input: Box<Node>,
        slot: usize,
        body: Box<Node>,
    },
    /// `$filter`.
    Filter {
        input: Box<Node>,
        slot: usize,
        cond: Box<Node>,
        limit: Option<Box<Node>>,
    },
    /// An operator with named or optional arguments (see [`Named`]); `None` is an argument that
    /// was not given.
    Named(Named, Vec<Option<Node>>),
    /// `$sortArray` with its parsed `sortBy`.
    SortArray {
        input: Box<Node>,
        by: super::named::SortBy,
    },
    /// `$reduce`.
    Reduce {
        input: Box<Node>,
        initial: Box<Node>,
        this_slot: usize,
        value_slot: usize,
        body: Box<Node>,
    },
    /// An accumulator's expression form (`{$sum: [..]}`, `{$firstN: {n, input}}`, …).
    Accum(Box<super::accum::AccumForm>),
}

impl Node {
    pub(crate) fn constant(&self) -> Option<&Option<RawBson>> {
        match self {
            Node::Constant(c) => Some(c),
            _ => None,
        }
    }
}

/// The result of parsing: the tree and the number of local variable slots it uses.
pub(crate) struct Parsed {
    pub(crate) root: Node,
    pub(crate) slots: usize,
}

/// Parses an operand (`Expression::parseOperand`).
pub(crate) fn parse(v: RawBsonRef<'_>, ctx: &ParseContext) -> Result<Parsed> {
    let mut p = Parser {
        ctx,
        scopes: Vec::new(),
        slots: 0,
        depth: 0,
    };
    let root = p.operand(v)?;
    Ok(Parsed {
        root,
        slots: p.slots,
    })
}

fn malformed(e: impl std::fmt::Display) -> QueryError {
    QueryError::BadValue(format!("invalid BSON in expression: {e}"))
}

fn loc(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::Location(code, msg.into())
}

/// Operators of MongoDB 7.0 that only exist as accumulators or window functions (evaluated by
/// the aggregation stages, not here): NotImplemented in expression position.
#[rustfmt::skip]
const NOT_IMPLEMENTED: &[&str] = &[
    "$avg", "$bottom", "$bottomN", "$count", "$covariancePop", "$covarianceSamp", "$denseRank",
    "$derivative", "$documentNumber", "$expMovingAvg", "$firstN", "$integral", "$lastN",
    "$linearFill", "$locf", "$max", "$maxN", "$median", "$min", "$minN", "$percentile", "$rank",
    "$shift", "$stdDevPop", "$stdDevSamp", "$sum", "$top", "$topN",
];

/// How many arguments an operator takes.
#[derive(Clone, Copy)]
enum Arity {
    Exactly(usize),
    Range(usize, usize),
    Any,
}

fn op_by_name(name: &str) -> Option<(Op, Arity)> {
    use Arity::*;
    let cmp = |k| Some((Op::Compare(k), Exactly(2)));
    match name {
        "$add" => Some((Op::Add, Any)),
        "$subtract" => Some((Op::Subtract, Exactly(2))),
        "$multiply" => Some((Op::Multiply, Any)),
        "$divide" => Some((Op::Divide, Exactly(2))),
        "$mod" => Some((Op::Mod, Exactly(2))),
        "$abs" => Some((Op::Abs, Exactly(1))),
        "$ceil" => Some((Op::Ceil, Exactly(1))),
        "$floor" => Some((Op::Floor, Exactly(1))),
        "$round" => Some((Op::Round, Range(1, 2))),
        "$trunc" => Some((Op::Trunc, Range(1, 2))),
        "$sqrt" => Some((Op::Sqrt, Exactly(1))),
        "$pow" => Some((Op::Pow, Exactly(2))),
        "$exp" => Some((Op::Exp, Exactly(1))),
        "$ln" => Some((Op::Ln, Exactly(1))),
        "$log" => Some((Op::Log, Exactly(2))),
        "$log10" => Some((Op::Log10, Exactly(1))),
        "$and" => Some((Op::And, Any)),
        "$or" => Some((Op::Or, Any)),
        "$not" => Some((Op::Not, Exactly(1))),
        "$eq" => cmp(CmpKind::Eq),
        "$ne" => cmp(CmpKind::Ne),
        "$gt" => cmp(CmpKind::Gt),
        "$gte" => cmp(CmpKind::Gte),
        "$lt" => cmp(CmpKind::Lt),
        "$lte" => cmp(CmpKind::Lte),
        "$cmp" => cmp(CmpKind::Cmp),
        "$cond" => Some((Op::Cond, Exactly(3))),
        "$ifNull" => Some((Op::IfNull, Any)),
        "$in" => Some((Op::In, Exactly(2))),
        "$size" => Some((Op::Size, Exactly(1))),
        "$arrayElemAt" => Some((Op::ArrayElemAt, Exactly(2))),
        "$first" => Some((Op::First, Exactly(1))),
        "$last" => Some((Op::Last, Exactly(1))),
        "$concatArrays" => Some((Op::ConcatArrays, Any)),
        "$reverseArray" => Some((Op::ReverseArray, Exactly(1))),
        "$isArray" => Some((Op::IsArray, Exactly(1))),
        "$slice" => Some((Op::Slice, Range(2, 3))),
        "$indexOfArray" => Some((Op::IndexOfArray, Range(2, 4))),
        "$range" => Some((Op::Range, Range(2, 3))),
        "$allElementsTrue" => Some((Op::AllElementsTrue, Exactly(1))),
        "$anyElementTrue" => Some((Op::AnyElementTrue, Exactly(1))),
        "$concat" => Some((Op::Concat, Any)),
        "$toLower" => Some((Op::ToLower, Exactly(1))),
        "$toUpper" => Some((Op::ToUpper, Exactly(1))),
        "$strLenCP" => Some((Op::StrLenCP, Exactly(1))),
        "$strLenBytes" => Some((Op::StrLenBytes, Exactly(1))),
        "$substrCP" => Some((Op::SubstrCP, Exactly(3))),
        "$substrBytes" | "$substr" => Some((Op::SubstrBytes, Exactly(3))),
        "$strcasecmp" => Some((Op::Strcasecmp, Exactly(2))),
        "$split" => Some((Op::Split, Exactly(2))),
        "$type" => Some((Op::Type, Exactly(1))),
        "$isNumber" => Some((Op::IsNumber, Exactly(1))),
        "$setEquals" => Some((Op::SetEquals, Any)),
        "$setIntersection" => Some((Op::SetIntersection, Any)),
        "$setUnion" => Some((Op::SetUnion, Any)),
        "$setDifference" => Some((Op::SetDifference, Exactly(2))),
        "$setIsSubset" => Some((Op::SetIsSubset, Exactly(2))),
        "$indexOfBytes" => Some((Op::IndexOfBytes, Range(2, 4))),
        "$indexOfCP" => Some((Op::IndexOfCP, Range(2, 4))),
        "$objectToArray" => Some((Op::ObjectToArray, Exactly(1))),
        "$arrayToObject" => Some((Op::ArrayToObject, Exactly(1))),
        "$mergeObjects" => Some((Op::MergeObjects, Any)),
        "$bitAnd" => Some((Op::BitAnd, Any)),
        "$bitOr" => Some((Op::BitOr, Any)),
        "$bitXor" => Some((Op::BitXor, Any)),
        "$bitNot" => Some((Op::BitNot, Exactly(1))),
        "$bsonSize" => Some((Op::BsonSize, Exactly(1))),
        "$binarySize" => Some((Op::BinarySize, Exactly(1))),
        "$tsSecond" => Some((Op::TsSecond, Exactly(1))),
        "$tsIncrement" => Some((Op::TsIncrement, Exactly(1))),
        "$toHashedIndexKey" => Some((Op::ToHashedIndexKey, Exactly(1))),
        "$atan2" => Some((Op::Atan2, Exactly(2))),
        other => super::trig::Trig::by_name(other).map(|t| (Op::Trig(t), Exactly(1))),
    }
}

/// The values of `$$DESCEND`, `$$PRUNE` and `$$KEEP`.
fn redact_word(name: &str) -> Option<&'static str> {
    match name {
        "DESCEND" => Some("descend"),
        "PRUNE" => Some("prune"),
        "KEEP" => Some("keep"),
        _ => None,
    }
}

/// The target type names of the `$convert` shortcuts.
fn conversion_alias(name: &str) -> Option<&'static str> {
    Some(match name {
        "$toString" => "string",
        "$toInt" => "int",
        "$toLong" => "long",
        "$toDouble" => "double",
        "$toDecimal" => "decimal",
        "$toBool" => "bool",
        "$toDate" => "date",
        "$toObjectId" => "objectId",
        _ => return None,
    })
}

/// The errors about an object's fields that print the object.
#[inline(never)]
fn object_error(code: i32, d: &RawDocument) -> QueryError {
    let shown = cairn_storage::display::document(d);
    if code == 15983 {
        loc(
            code,
            format!("An object representing an expression must have exactly one field: {shown}"),
        )
    } else {
        loc(
            code,
            format!("duplicate field name specified in object literal: {shown}"),
        )
    }
}

/// 238 for MongoDB operators Cairn lacks, 168 for unknown names.
#[inline(never)]
fn unknown_operator(name: &str) -> QueryError {
    if NOT_IMPLEMENTED.contains(&name) {
        return QueryError::NotImplemented(format!(
            "the aggregation expression {name} is not supported yet"
        ));
    }
    loc(168, format!("Unrecognized expression '{name}'"))
}

/// `ExpressionFixedArity` / `ExpressionRangedArity` / `$ifNull`'s argument count checks.
#[inline(never)]
fn check_arity(name: &str, op: Op, arity: Arity, n: usize) -> Result<()> {
    match arity {
        Arity::Exactly(k) if n != k => {
            return Err(loc(
                16020,
                format!("Expression {name} takes exactly {k} arguments. {n} were passed in."),
            ));
        }
        Arity::Range(lo, hi) if !(lo..=hi).contains(&n) => {
            return Err(loc(
                28667,
                format!(
                    "Expression {name} takes at least {lo} arguments, and at most {hi}, but {n} \
                     were passed in."
                ),
            ));
        }
        _ => {}
    }
    if op == Op::IfNull && n < 2 {
        return Err(loc(
            1257300,
            format!("$ifNull needs at least two arguments, had: {n}"),
        ));
    }
    Ok(())
}

struct Parser<'c> {
    ctx: &'c ParseContext,
    /// Bound local names, innermost last.
    scopes: Vec<(String, usize)>,
    slots: usize,
    depth: usize,
}

/// `variableValidation::validateNameForUserWrite`.
fn validate_write_name(name: &str) -> Result<()> {
    if name == "CURRENT" {
        return Ok(());
    }
    validate_name(name, |c| c.is_ascii_lowercase() || !c.is_ascii())
}

/// `variableValidation::validateNameForUserRead`.
fn validate_read_name(name: &str) -> Result<()> {
    validate_name(name, |c| c.is_ascii_alphabetic() || !c.is_ascii())
}

fn validate_name(name: &str, first_ok: impl Fn(char) -> bool) -> Result<()> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Err(QueryError::FailedToParse(
            "empty variable names are not allowed".into(),
        ));
    };
    if !first_ok(first) {
        return Err(QueryError::FailedToParse(format!(
            "'{name}' starts with an invalid character for a user variable name"
        )));
    }
    for c in chars {
        if !(c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii()) {
            return Err(QueryError::FailedToParse(format!(
                "'{name}' contains an invalid character for a variable name: '{c}'"
            )));
        }
    }
    Ok(())
}

impl Parser<'_> {
    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(loc(15, "expression nested too deeply"));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// `Expression::parseOperand`.
    fn operand(&mut self, v: RawBsonRef<'_>) -> Result<Node> {
        self.enter()?;
        let r = match v {
            RawBsonRef::String(s) if s.starts_with('$') => self.field_path(s),
            RawBsonRef::Document(d) => self.object(d),
            RawBsonRef::Array(a) => self.array_items(a).map(Node::Array),
            other => Ok(Node::Constant(Some(RawBson::from(other)))),
        };
        self.leave();
        r
    }

    /// `ExpressionFieldPath::parse`.
    #[inline(never)]
    fn field_path(&mut self, raw: &str) -> Result<Node> {
        if raw.contains('\0') {
            return Err(loc(
                16419,
                "field path must not contain embedded null characters",
            ));
        }
        let Some(rest) = raw.strip_prefix('$') else {
            return Err(loc(
                16873,
                format!("FieldPath '{raw}' doesn't start with $"),
            ));
        };
        if rest.is_empty() {
            return Err(loc(16872, "'$' by itself is not a valid FieldPath"));
        }
        if let Some(var_path) = rest.strip_prefix('$') {
            let (name, tail) = match var_path.split_once('.') {
                Some((n, t)) => (n, Some(t)),
                None => (var_path, None),
            };
            validate_read_name(name)?;
            // The whole "$$name.tail" is a FieldPath, so every component is checked.
            validate_field_path(var_path)?;
            let path: Vec<String> = tail
                .map(|t| t.split('.').map(str::to_string).collect())
                .unwrap_or_default();
            if name == "REMOVE" || (name == "SEARCH_META" && !self.is_local(name)) {
                // `$$REMOVE` (and any path below it) is missing; so is `$$SEARCH_META` without
                // a `$search` stage to set it.
                return Ok(Node::Constant(None));
            }
            if let Some(word) = redact_word(name)
                && !self.is_local(name)
            {
                // `$$DESCEND`, `$$PRUNE`, `$$KEEP` are the strings `$redact` compares with.
                return Ok(Node::Constant(
                    path.is_empty().then(|| RawBson::String(word.to_string())),
                ));
            }
            let var = self.variable(name)?;
            return Ok(Node::Path(var, path));
        }
        let parts = validate_field_path(rest)?;
        let path = parts.into_iter().map(str::to_string).collect();
        Ok(Node::Path(self.variable("CURRENT")?, path))
    }

    /// `VariablesParseState::getVariable`.
    fn variable(&self, name: &str) -> Result<Var> {
        if let Some((_, slot)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return Ok(Var::Local(*slot));
        }
        match name {
            "ROOT" | "CURRENT" => return Ok(Var::Root),
            "NOW" => return Ok(Var::Now),
            "CLUSTER_TIME" => return Ok(Var::ClusterTime),
            "USER_ROLES" | "JS_SCOPE" | "IS_MR" => {
                return Err(QueryError::NotImplemented(format!(
                    "the variable $${name} is not supported yet"
                )));
            }
            _ => {}
        }
        if self.ctx.defines(name) {
            return Ok(Var::User(name.to_string()));
        }
        Err(loc(17276, format!("Use of undefined variable: {name}")))
    }

    fn is_local(&self, name: &str) -> bool {
        self.scopes.iter().any(|(n, _)| n == name) || self.ctx.defines(name)
    }

    fn new_slot(&mut self) -> usize {
        self.slots += 1;
        self.slots - 1
    }

    /// `Expression::parseObject`.
    fn object(&mut self, d: &RawDocument) -> Result<Node> {
        let mut it = d.iter();
        let Some(first) = it.next() else {
            return Ok(Node::Object(Vec::new()));
        };
        let (k, v) = first.map_err(malformed)?;
        if k.as_str().starts_with('$') {
            if it.next().is_some() {
                return Err(object_error(15983, d));
            }
            return self.expression(k.as_str(), v);
        }
        self.object_literal(d)
    }

    /// `ExpressionObject::parse`.
    #[inline(never)]
    fn object_literal(&mut self, d: &RawDocument) -> Result<Node> {
        let mut out: Vec<(String, Node)> = Vec::new();
        for el in d.iter() {
            let (k, v) = el.map_err(malformed)?;
            let k = k.as_str();
            crate::sort::validate_field_name(k)?;
            if k.contains('.') {
                return Err(loc(16412, "FieldPath field names may not contain '.'."));
            }
            if out.iter().any(|(name, _)| name == k) {
                return Err(object_error(16406, d));
            }
            let node = self.operand(v)?;
            out.push((k.to_string(), node));
        }
        Ok(Node::Object(out))
    }

    /// `ExpressionNary::parseArguments`.
    fn arguments(&mut self, arg: RawBsonRef<'_>) -> Result<Vec<Node>> {
        match arg {
            RawBsonRef::Array(a) => self.array_items(a),
            other => Ok(vec![self.operand(other)?]),
        }
    }

    fn array_items(&mut self, a: &RawArray) -> Result<Vec<Node>> {
        let mut out = Vec::new();
        for el in a {
            out.push(self.operand(el.map_err(malformed)?)?);
        }
        Ok(out)
    }

    /// `Expression::parseExpression`: `{$name: arg}`.
    fn expression(&mut self, name: &str, arg: RawBsonRef<'_>) -> Result<Node> {
        if self.ctx.validator {
            match name {
                "$function" => {
                    return Err(loc(4660800, "$function cannot be used inside a validator."));
                }
                "$_internalJsEmit" => {
                    return Err(loc(
                        4660801,
                        "$_internalJsEmit cannot be used inside a validator.",
                    ));
                }
                _ => {}
            }
        }
        match name {
            "$literal" | "$const" => Ok(Node::Constant(Some(RawBson::from(arg)))),
            "$cond" if matches!(arg, RawBsonRef::Document(_)) => self.cond_object(arg),
            "$switch" => self.switch(arg),
            "$let" => self.let_(arg),
            "$map" => self.map(arg),
            "$filter" => self.filter(arg),
            "$reduce" => self.reduce(arg),
            "$convert" => self.convert(arg),
            n if super::accum::op_for(n).is_some() => self.accumulator(n, arg),
            "$sortArray" => self.sort_array(arg),
            "$rand" => self.rand(arg),
            "$meta" => self.meta(arg),
            "$function" => self.function(arg),
            "$getField" => self.get_field(arg),
            "$zip" => self.zip(arg),
            "$setField" | "$unsetField" => self.set_field(name, arg),
            "$dateFromParts" => self.date_from_parts(arg),
            _ if super::named::DatePart::by_name(name).is_some() => self.date_part(name, arg),
            _ if super::named::Named::by_name(name).is_some() => self.named(name, arg),
            _ => match conversion_alias(name) {
                Some(target) => self.conversion_alias(name, target, arg),
                None => self.positional(name, arg),
            },
        }
    }

    /// `$toInt` and friends: `$convert` without `onError`/`onNull`.
    #[inline(never)]
    fn conversion_alias(
        &mut self,
        name: &str,
        target: &'static str,
        arg: RawBsonRef<'_>,
    ) -> Result<Node> {
        let mut args = self.arguments(arg)?;
        if args.len() != 1 {
            return Err(loc(
                50723,
                format!("{name} requires a single argument, got {}", args.len()),
            ));
        }
        args.push(Node::Constant(Some(RawBson::String(target.to_string()))));
        Ok(Node::Op(
            Op::Convert {
                on_error: false,
                on_null: false,
            },
            args,
        ))
    }

    /// An operator with positional arguments, arity checked.
    #[inline(never)]
    fn positional(&mut self, name: &str, arg: RawBsonRef<'_>) -> Result<Node> {
        let Some((op, arity)) = op_by_name(name) else {
            return Err(unknown_operator(name));
        };
        let args = self.arguments(arg)?;
        check_arity(name, op, arity, args.len())?;
        Ok(Node::Op(op, args))
    }

    /// An accumulator's expression form (see [`super::accum`]).
    #[inline(never)]
    fn accumulator(&mut self, name: &str, arg: RawBsonRef<'_>) -> Result<Node> {
        use super::accum::{AccumForm, check_method, op_for, percentiles};
        use crate::agg::accumulators::AccOp;
        let Some(op) = op_for(name) else {
            return Err(unknown_operator(name));
        };
        let quantile = matches!(op, AccOp::Median | AccOp::Percentile);
        let form = match op {
            AccOp::FirstN
            | AccOp::LastN
            | AccOp::MaxN
            | AccOp::MinN
            | AccOp::Median
            | AccOp::Percentile => {
                let RawBsonRef::Document(d) = arg else {
                    return Err(loc(
                        if quantile { 7436100 } else { 5787900 },
                        format!(
                            "specification must be an object; found {name}: {}",
                            cairn_storage::display::value(arg)
                        ),
                    ));
                };
                let named = AccumForm::named_arguments(op, d)?;
                let get = |k: &str| named.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
                if quantile {
                    let input = get("input").ok_or_else(|| {
                        loc(
                            40414,
                            format!("BSON field '{name}.input' is missing but a required field"),
                        )
                    })?;
                    check_method(name, get("method"))?;
                    let ps = if op == AccOp::Median {
                        vec![0.5]
                    } else {
                        let p = get("p").ok_or_else(|| {
                            loc(
                                40414,
                                format!("BSON field '{name}.p' is missing but a required field"),
                            )
                        })?;
                        percentiles(p)?
                    };
                    AccumForm::Quantile {
                        op,
                        input: self.operand(input)?,
                        ps,
                    }
                } else {
                    let n = get("n").ok_or_else(|| loc(5787906, "Missing value for 'n'"))?;
                    let input =
                        get("input").ok_or_else(|| loc(5787907, "Missing value for 'input'"))?;
                    AccumForm::N {
                        op,
                        n: self.operand(n)?,
                        input: self.operand(input)?,
                    }
                }
            }
            _ => AccumForm::Fold {
                op,
                args: self.arguments(arg)?,
            },
        };
        Ok(Node::Accum(Box::new(form)))
    }

    /// The named-argument form of `$cond`.
    fn cond_object(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::Document(d) = arg else {
            return Err(loc(17080, "Missing 'if' parameter to $cond"));
        };
        let (mut i, mut t, mut e) = (None, None, None);
        for el in d.iter() {
            let (k, v) = el.map_err(malformed)?;
            match k.as_str() {
                "if" => i = Some(self.operand(v)?),
                "then" => t = Some(self.operand(v)?),
                "else" => e = Some(self.operand(v)?),
                other => {
                    return Err(loc(
                        17083,
                        format!("Unrecognized parameter to $cond: {other}"),
                    ));
                }
            }
        }
        let i = i.ok_or_else(|| loc(17080, "Missing 'if' parameter to $cond"))?;
        let t = t.ok_or_else(|| loc(17081, "Missing 'then' parameter to $cond"))?;
        let e = e.ok_or_else(|| loc(17082, "Missing 'else' parameter to $cond"))?;
        Ok(Node::Op(Op::Cond, vec![i, t, e]))
    }

    fn switch(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::Document(d) = arg else {
            return Err(loc(
                40060,
                format!(
                    "$switch requires an object as an argument, found: {}",
                    element_type_name(arg.element_type())
                ),
            ));
        };
        let mut branches = Vec::new();
        let mut default = None;
        for el in d.iter() {
            let (k, v) = el.map_err(malformed)?;
            match k.as_str() {
                "branches" => {
                    let RawBsonRef::Array(arr) = v else {
                        return Err(loc(
                            40061,
                            format!(
                                "$switch expected an array for 'branches', found: {}",
                                element_type_name(v.element_type())
                            ),
                        ));
                    };
                    for b in arr {
                        let b = b.map_err(malformed)?;
                        let RawBsonRef::Document(bd) = b else {
                            return Err(loc(
                                40062,
                                format!(
                                    "$switch expected each branch to be an object, found: {}",
                                    element_type_name(b.element_type())
                                ),
                            ));
                        };
                        let (mut case, mut then) = (None, None);
                        for be in bd.iter() {
                            let (bk, bv) = be.map_err(malformed)?;
                            match bk.as_str() {
                                "case" => case = Some(self.operand(bv)?),
                                "then" => then = Some(self.operand(bv)?),
                                other => {
                                    return Err(loc(
                                        40063,
                                        format!(
                                            "$switch found an unknown argument to a branch: \
                                             {other}"
                                        ),
                                    ));
                                }
                            }
                        }
                        let case = case.ok_or_else(|| {
                            loc(
                                40064,
                                "$switch requires each branch have a 'case' expression",
                            )
                        })?;
                        let then = then.ok_or_else(|| {
                            loc(
                                40065,
                                "$switch requires each branch have a 'then' expression.",
                            )
                        })?;
                        branches.push((case, then));
                    }
                }
                "default" => default = Some(Box::new(self.operand(v)?)),
                other => {
                    return Err(loc(
                        40067,
                        format!("$switch found an unknown argument: {other}"),
                    ));
                }
            }
        }
        if branches.is_empty() {
            return Err(loc(40068, "$switch requires at least one branch."));
        }
        Ok(Node::Switch { branches, default })
    }

    fn let_(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::Document(d) = arg else {
            return Err(loc(16874, "$let only supports an object as its argument"));
        };
        let (mut vars_el, mut in_el) = (None, None);
        for el in d.iter() {
            let (k, v) = el.map_err(malformed)?;
            match k.as_str() {
                "vars" => vars_el = Some(v),
                "in" => in_el = Some(v),
                other => {
                    return Err(loc(
                        16875,
                        format!("Unrecognized parameter to $let: {other}"),
                    ));
                }
            }
        }
        let vars_el = vars_el.ok_or_else(|| loc(16876, "Missing 'vars' parameter to $let"))?;
        let in_el = in_el.ok_or_else(|| loc(16877, "Missing 'in' parameter to $let"))?;
        let RawBsonRef::Document(vars_doc) = vars_el else {
            return Err(loc(10065, "invalid parameter: expected an object (vars)"));
        };
        // Values see only the outer variables.
        let mut values = Vec::new();
        for el in vars_doc.iter() {
            let (k, v) = el.map_err(malformed)?;
            values.push((k.as_str(), self.operand(v)?));
        }
        let mark = self.scopes.len();
        let mut vars = Vec::new();
        for (name, node) in values {
            validate_write_name(name)?;
            let slot = self.new_slot();
            self.scopes.push((name.to_string(), slot));
            vars.push((slot, node));
        }
        let body = self.operand(in_el);
        self.scopes.truncate(mark);
        Ok(Node::Let {
            vars,
            body: Box::new(body?),
        })
    }

    /// Binds `name` for the duration of `f`.
    fn with_binding<T>(
        &mut self,
        name: &str,
        slot: usize,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        self.scopes.push((name.to_string(), slot));
        let r = f(self);
        self.scopes.pop();
        r
    }

    fn map(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::Document(d) = arg else {
            return Err(loc(16878, "$map only supports an object as its argument"));
        };
        let (mut input, mut as_, mut in_) = (None, None, None);
        for el in d.iter() {
            let (k, v) = el.map_err(malformed)?;
            match k.as_str() {
                "input" => input = Some(v),
                "as" => as_ = Some(v),
                "in" => in_ = Some(v),
                other => {
                    return Err(loc(
                        16879,
                        format!("Unrecognized parameter to $map: {other}"),
                    ));
                }
            }
        }
        let input = input.ok_or_else(|| loc(16880, "Missing 'input' parameter to $map"))?;
        let in_ = in_.ok_or_else(|| loc(16882, "Missing 'in' parameter to $map"))?;
        let input = self.operand(input)?;
        let name = var_name_of(as_);
        validate_write_name(&name)?;
        let slot = self.new_slot();
        let body = self.with_binding(&name, slot, |p| p.operand(in_))?;
        Ok(Node::Map {
            input: Box::new(input),
            slot,
            body: Box::new(body),
        })
    }

    fn filter(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::Document(d) = arg else {
            return Err(loc(
                28646,
                "$filter only supports an object as its argument",
            ));
        };
        let (mut input, mut as_, mut cond, mut limit) = (None, None, None, None);
        for el in d.iter() {
            let (k, v) = el.map_err(malformed)?;
            match k.as_str() {
                "input" => input = Some(v),
                "as" => as_ = Some(v),
                "cond" => cond = Some(v),
                "limit" => limit = Some(v),
                other => {
                    return Err(loc(
                        28647,
                        format!("Unrecognized parameter to $filter: {other}"),
                    ));
                }
            }
        }
        let input = input.ok_or_else(|| loc(28648, "Missing 'input' parameter to $filter"))?;
        let cond = cond.ok_or_else(|| loc(28650, "Missing 'cond' parameter to $filter"))?;
        let input = self.operand(input)?;
        let name = var_name_of(as_);
        validate_write_name(&name)?;
        let slot = self.new_slot();
        let cond = self.with_binding(&name, slot, |p| p.operand(cond))?;
        let limit = match limit {
            Some(l) => Some(Box::new(self.operand(l)?)),
            None => None,
        };
        Ok(Node::Filter {
            input: Box::new(input),
            slot,
            cond: Box::new(cond),
            limit,
        })
    }

    fn reduce(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::Document(d) = arg else {
            return Err(loc(
                40075,
                format!(
                    "$reduce requires an object as an argument, found: {}",
                    element_type_name(arg.element_type())
                ),
            ));
        };
        let this_slot = self.new_slot();
        let value_slot = self.new_slot();
        let (mut input, mut initial, mut body) = (None, None, None);
        for el in d.iter() {
            let (k, v) = el.map_err(malformed)?;
            match k.as_str() {
                "input" => input = Some(self.operand(v)?),
                "initialValue" => initial = Some(self.operand(v)?),
                "in" => {
                    self.scopes.push(("this".into(), this_slot));
                    self.scopes.push(("value".into(), value_slot));
                    let r = self.operand(v);
                    self.scopes.truncate(self.scopes.len().saturating_sub(2));
                    body = Some(r?);
                }
                other => {
                    return Err(loc(
                        40076,
                        format!("$reduce found an unknown argument: {other}"),
                    ));
                }
            }
        }
        let input = input.ok_or_else(|| loc(40077, "$reduce requires 'input' to be specified"))?;
        let initial =
            initial.ok_or_else(|| loc(40078, "$reduce requires 'initialValue' to be specified"))?;
        let body = body.ok_or_else(|| loc(40079, "$reduce requires 'in' to be specified"))?;
        Ok(Node::Reduce {
            input: Box::new(input),
            initial: Box::new(initial),
            this_slot,
            value_slot,
            body: Box::new(body),
        })
    }

    fn convert(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::Document(d) = arg else {
            return Err(QueryError::FailedToParse(format!(
                "$convert expects an object of named arguments but found: {}",
                element_type_name(arg.element_type())
            )));
        };
        let (mut input, mut to, mut on_error, mut on_null) = (None, None, None, None);
        for el in d.iter() {
            let (k, v) = el.map_err(malformed)?;
            match k.as_str() {
                "input" => input = Some(self.operand(v)?),
                "to" => to = Some(self.operand(v)?),
                "onError" => on_error = Some(self.operand(v)?),
                "onNull" => on_null = Some(self.operand(v)?),
                other => {
                    return Err(QueryError::FailedToParse(format!(
                        "$convert found an unknown argument: {other}"
                    )));
                }
            }
        }
        let input = input.ok_or_else(|| {
            QueryError::FailedToParse("Missing 'input' parameter to $convert".into())
        })?;
        let to = to.ok_or_else(|| {
            QueryError::FailedToParse("Missing 'to' parameter to $convert".into())
        })?;
        let op = Op::Convert {
            on_error: on_error.is_some(),
            on_null: on_null.is_some(),
        };
        let mut args = vec![input, to];
        args.extend(on_error);
        args.extend(on_null);
        Ok(Node::Op(op, args))
    }
}

/// The `as` name of `$map`/`$filter` (`this` by default; a non-string is `""`, as
/// `BSONElement::str` gives).
fn var_name_of(v: Option<RawBsonRef<'_>>) -> String {
    match v {
        None => "this".into(),
        Some(RawBsonRef::String(s)) => s.to_string(),
        Some(_) => String::new(),
    }
}

/// Parsers of the operators with named arguments (see [`super::named`]).
impl Parser<'_> {
    /// Collects the fields of a named-argument object: later duplicates win, unknown names
    /// are `unknown`'s error.
    fn collect<'d>(
        &self,
        d: &'d RawDocument,
        names: &[&str],
        unknown: impl Fn(&str) -> QueryError,
    ) -> Result<Vec<Option<RawBsonRef<'d>>>> {
        let mut out = vec![None; names.len()];
        for el in d.iter() {
            let (k, v) = el.map_err(malformed)?;
            match names.iter().position(|n| *n == k.as_str()) {
                Some(i) => out[i] = Some(v),
                None => return Err(unknown(k.as_str())),
            }
        }
        Ok(out)
    }

    fn operands(&mut self, raw: Vec<Option<RawBsonRef<'_>>>) -> Result<Vec<Option<Node>>> {
        raw.into_iter()
            .map(|r| r.map(|v| self.operand(v)).transpose())
            .collect()
    }

    /// The generic named-argument operators ([`Named::by_name`]).
    fn named(&mut self, name: &str, arg: RawBsonRef<'_>) -> Result<Node> {
        let Some(op) = Named::by_name(name) else {
            return Err(unknown_operator(name));
        };
        let RawBsonRef::Document(d) = arg else {
            return Err(op.not_object(element_type_name(arg.element_type())));
        };
        let spec = op.spec();
        let raw = self.collect(d, spec.names, |f| op.unknown(f))?;
        for (i, code, msg) in spec.required {
            if raw.get(*i).is_none_or(Option::is_none) {
                return Err(loc(*code, *msg));
            }
        }
        let given: Vec<bool> = raw.iter().map(Option::is_some).collect();
        op.check(&given)?;
        let args = self.operands(raw)?;
        Ok(Node::Named(op, args))
    }

    /// `$year` … `$isoDayOfWeek`: an expression, `[expression]` or `{date, timezone}`.
    fn date_part(&mut self, name: &str, arg: RawBsonRef<'_>) -> Result<Node> {
        let Some(part) = DatePart::by_name(name) else {
            return Err(unknown_operator(name));
        };
        let op = Named::DatePart(part);
        if let RawBsonRef::Document(d) = arg {
            let first_is_operator = d
                .iter()
                .next()
                .and_then(|e| e.ok())
                .is_some_and(|(k, _)| k.as_str().starts_with('$'));
            if !first_is_operator {
                let raw = self.collect(d, &["date", "timezone"], |f| {
                    loc(40535, format!("unrecognized option to {name}: \"{f}\""))
                })?;
                if raw.first().is_none_or(Option::is_none) {
                    return Err(loc(
                        40539,
                        format!(
                            "missing 'date' argument to {name}, provided: {}",
                            cairn_storage::display::document(d)
                        ),
                    ));
                }
                let args = self.operands(raw)?;
                return Ok(Node::Named(op, args));
            }
        }
        let operand = match arg {
            RawBsonRef::Array(a) => {
                let items: Vec<_> = a
                    .into_iter()
                    .collect::<std::result::Result<_, _>>()
                    .map_err(malformed)?;
                if items.len() != 1 {
                    return Err(loc(
                        40536,
                        format!(
                            "{name} accepts exactly one argument if given an array, but was given \
                             {}",
                            items.len()
                        ),
                    ));
                }
                items[0]
            }
            other => other,
        };
        let date = self.operand(operand)?;
        Ok(Node::Named(op, vec![Some(date), None]))
    }

    fn date_from_parts(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::Document(d) = arg else {
            return Err(loc(
                40519,
                "$dateFromParts only supports an object as its argument",
            ));
        };
        let raw = self.collect(d, super::named::DATE_FROM_PARTS_ARGS, |f| {
            loc(
                40518,
                format!("Unrecognized argument to $dateFromParts: {f}"),
            )
        })?;
        let has = |i: usize| raw.get(i).is_some_and(Option::is_some);
        if !has(0) && !has(7) {
            return Err(loc(
                40516,
                "$dateFromParts requires either 'year' or 'isoWeekYear' to be present",
            ));
        }
        if has(0) && (has(7) || has(8) || has(9)) {
            return Err(loc(
                40489,
                "$dateFromParts does not allow mixing natural dates with ISO dates",
            ));
        }
        if has(7) && (has(0) || has(1) || has(2)) {
            return Err(loc(
                40525,
                "$dateFromParts does not allow mixing ISO dates with natural dates",
            ));
        }
        let args = self.operands(raw)?;
        Ok(Node::Named(Named::DateFromParts, args))
    }

    fn sort_array(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::Document(d) = arg else {
            return Err(loc(
                2942500,
                format!(
                    "$sortArray requires an object as an argument, found: {}",
                    element_type_name(arg.element_type())
                ),
            ));
        };
        let raw = self.collect(d, &["input", "sortBy"], |f| {
            loc(
                2942501,
                format!("$sortArray found an unknown argument: {f}"),
            )
        })?;
        let Some(input) = raw.first().copied().flatten() else {
            return Err(loc(2942502, "$sortArray requires 'input' to be specified"));
        };
        let Some(by) = raw.get(1).copied().flatten() else {
            return Err(loc(2942503, "$sortArray requires 'sortBy' to be specified"));
        };
        let invalid = || {
            loc(
                2942507,
                "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to \
                 sort embedded fields",
            )
        };
        let by = match by {
            RawBsonRef::Document(spec) => {
                if spec.iter().next().is_none() {
                    return Err(invalid());
                }
                for el in spec.iter() {
                    let (_, v) = el.map_err(malformed)?;
                    match crate::sort::safe_number_long(v) {
                        Some(1 | -1) => {}
                        Some(_) | None if super::value::Num::of(v).is_some() => {
                            return Err(loc(
                                2942506,
                                "The $sort element value must be either 1 or -1",
                            ));
                        }
                        _ => return Err(invalid()),
                    }
                }
                SortBy::Pattern(crate::sort::SortSpec::parse(spec)?)
            }
            other if super::value::Num::of(other).is_some() => {
                match crate::sort::safe_number_long(other) {
                    Some(1) => SortBy::Whole { descending: false },
                    Some(-1) => SortBy::Whole { descending: true },
                    _ => {
                        return Err(loc(
                            2942506,
                            "The $sort element value must be either 1 or -1",
                        ));
                    }
                }
            }
            _ => return Err(invalid()),
        };
        let input = self.operand(input)?;
        Ok(Node::SortArray {
            input: Box::new(input),
            by,
        })
    }

    fn rand(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::Document(d) = arg else {
            return Err(loc(10065, "invalid parameter: expected an object ($rand)"));
        };
        if d.iter().next().is_some() {
            return Err(loc(3040501, "$rand does not currently accept arguments"));
        }
        Ok(Node::Op(Op::Rand, Vec::new()))
    }

    fn meta(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::String(name) = arg else {
            return Err(loc(17307, "$meta only supports string arguments"));
        };
        if !super::ops::meta_name_valid(name) {
            return Err(loc(17308, format!("Unsupported argument to $meta: {name}")));
        }
        // Metadata MongoDB supplies in some pipelines (after `$sample`, `$sort`, `$geoNear`,
        // an index scan) but Cairn does not carry: refused rather than silently missing.
        if matches!(
            name,
            "randVal" | "indexKey" | "recordId" | "sortKey" | "geoNearDistance" | "geoNearPoint"
        ) {
            return Err(QueryError::NotImplemented(format!(
                "{{$meta: \"{name}\"}} is not supported yet"
            )));
        }
        Ok(Node::Op(
            Op::Meta,
            vec![Node::Constant(Some(RawBson::String(name.to_string())))],
        ))
    }

    /// `$function`: validated as MongoDB does, then every evaluation fails (no JavaScript).
    fn function(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::Document(d) = arg else {
            return Err(loc(
                31260,
                format!(
                    "$function requires an object as an argument, found: {}",
                    element_type_name(arg.element_type())
                ),
            ));
        };
        let raw = self.collect(d, &["body", "args", "lang"], |f| {
            loc(31260, format!("$function found an unknown argument: {f}"))
        })?;
        let Some(body) = raw.first().copied().flatten() else {
            return Err(loc(31261, "The body function must be specified."));
        };
        if !matches!(
            body,
            RawBsonRef::String(_)
                | RawBsonRef::JavaScriptCode(_)
                | RawBsonRef::JavaScriptCodeWithScope(_)
        ) {
            return Err(loc(
                31262,
                "The body function must evaluate to type string or code",
            ));
        }
        let Some(args) = raw.get(1).copied().flatten() else {
            return Err(loc(31263, "The args field must be specified."));
        };
        let RawBsonRef::Array(items) = args else {
            return Err(loc(31266, "The args field must be of type array"));
        };
        let Some(lang) = raw.get(2).copied().flatten() else {
            return Err(loc(31418, "The lang field must be specified."));
        };
        if !matches!(lang, RawBsonRef::String("js")) {
            return Err(loc(
                31419,
                "Currently the only supported language specifier is 'js'.",
            ));
        }
        let args = self.array_items(items)?;
        Ok(Node::Op(Op::Function, args))
    }

    /// The constant string `field` of `$getField`/`$setField`/`$unsetField`.
    fn field_argument(&mut self, op: &str, v: RawBsonRef<'_>, codes: [i32; 3]) -> Result<Node> {
        if let RawBsonRef::String(s) = v
            && s.starts_with('$')
        {
            return Err(loc(
                codes[2],
                format!(
                    "A field path reference which is not allowed in this context. Did you mean \
                     {{$literal: '{s}'}}?"
                ),
            ));
        }
        let node = super::optimize::optimize(self.operand(v)?, self.slots)?;
        let Node::Constant(c) = &node else {
            return Err(loc(
                codes[0],
                format!(
                    "{op} requires 'field' to evaluate to a constant, but got a non-constant \
                     argument"
                ),
            ));
        };
        if !matches!(c, Some(RawBson::String(_))) {
            let t = c
                .as_ref()
                .map_or("missing", |b| super::value::type_name(b.as_raw_bson_ref()));
            return Err(loc(
                codes[1],
                format!("{op} requires 'field' to evaluate to type String, but got {t}"),
            ));
        }
        Ok(node)
    }

    fn get_field(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        const CODES: [i32; 3] = [5654600, 5654601, 5654602];
        let current = || Node::Path(Var::Root, Vec::new());
        let (field, input) = match arg {
            RawBsonRef::Document(d) => {
                let first_is_operator = d
                    .iter()
                    .next()
                    .and_then(|e| e.ok())
                    .is_some_and(|(k, _)| k.as_str().starts_with('$'));
                if first_is_operator {
                    (self.field_argument("$getField", arg, CODES)?, current())
                } else {
                    let raw = self.collect(d, &["field", "input"], |f| {
                        loc(3041701, format!("$getField found an unknown argument: {f}"))
                    })?;
                    let Some(f) = raw.first().copied().flatten() else {
                        return Err(loc(3041702, "$getField requires 'field' to be specified"));
                    };
                    let Some(i) = raw.get(1).copied().flatten() else {
                        return Err(loc(3041703, "$getField requires 'input' to be specified"));
                    };
                    let field = self.field_argument("$getField", f, CODES)?;
                    (field, self.operand(i)?)
                }
            }
            other => (self.field_argument("$getField", other, CODES)?, current()),
        };
        Ok(Node::Named(Named::GetField, vec![Some(field), Some(input)]))
    }

    fn set_field(&mut self, name: &str, arg: RawBsonRef<'_>) -> Result<Node> {
        const CODES: [i32; 3] = [4161106, 4161107, 4161108];
        let unset = name == "$unsetField";
        let RawBsonRef::Document(d) = arg else {
            return Err(loc(
                4161100,
                format!("{name} only supports an object as its argument"),
            ));
        };
        let names: &[&str] = if unset {
            &["field", "input"]
        } else {
            &["field", "input", "value"]
        };
        let raw = self.collect(d, names, |f| {
            loc(4161101, format!("{name} found an unknown argument: {f}"))
        })?;
        let Some(f) = raw.first().copied().flatten() else {
            return Err(loc(
                4161102,
                format!("{name} requires 'field' to be specified"),
            ));
        };
        if !unset && raw.get(2).is_none_or(Option::is_none) {
            return Err(loc(
                4161103,
                format!("{name} requires 'value' to be specified"),
            ));
        }
        let Some(i) = raw.get(1).copied().flatten() else {
            return Err(loc(
                4161109,
                format!("{name} requires 'input' to be specified"),
            ));
        };
        let field = self.field_argument(name, f, CODES)?;
        let input = self.operand(i)?;
        let mut args = vec![Some(field), Some(input)];
        if let Some(v) = raw.get(2).copied().flatten() {
            args.push(Some(self.operand(v)?));
        }
        let op = if unset {
            Named::UnsetField
        } else {
            Named::SetField
        };
        Ok(Node::Named(op, args))
    }

    fn zip(&mut self, arg: RawBsonRef<'_>) -> Result<Node> {
        let RawBsonRef::Document(d) = arg else {
            return Err(loc(
                34460,
                format!(
                    "$zip only supports an object as an argument, found {}",
                    element_type_name(arg.element_type())
                ),
            ));
        };
        let raw = self.collect(d, &["inputs", "useLongestLength", "defaults"], |f| {
            loc(34464, format!("$zip found an unknown argument: {f}"))
        })?;
        let mut longest = false;
        if let Some(v) = raw.get(1).copied().flatten() {
            let RawBsonRef::Boolean(b) = v else {
                return Err(loc(
                    34463,
                    format!(
                        "useLongestLength must be a bool, found {}",
                        element_type_name(v.element_type())
                    ),
                ));
            };
            longest = b;
        }
        let mut inputs = Vec::new();
        if let Some(v) = raw.first().copied().flatten() {
            let RawBsonRef::Array(a) = v else {
                return Err(loc(
                    34461,
                    format!(
                        "inputs must be an array of expressions, found {}",
                        element_type_name(v.element_type())
                    ),
                ));
            };
            inputs = self.array_items(a)?;
        }
        let mut defaults = Vec::new();
        if let Some(v) = raw.get(2).copied().flatten() {
            let RawBsonRef::Array(a) = v else {
                return Err(loc(
                    34462,
                    format!(
                        "defaults must be an array of expressions, found {}",
                        element_type_name(v.element_type())
                    ),
                ));
            };
            defaults = self.array_items(a)?;
        }
        if inputs.is_empty() {
            return Err(loc(34465, "$zip requires at least one input array"));
        }
        if !defaults.is_empty() && !longest {
            return Err(loc(
                34466,
                "cannot specify defaults unless useLongestLength is true",
            ));
        }
        if !defaults.is_empty() && defaults.len() != inputs.len() {
            return Err(loc(34467, "defaults and inputs must have the same length"));
        }
        let n = inputs.len();
        let mut args: Vec<Option<Node>> = inputs.into_iter().map(Some).collect();
        args.extend(defaults.into_iter().map(Some));
        Ok(Node::Named(Named::Zip { longest, inputs: n }, args))
    }
}
