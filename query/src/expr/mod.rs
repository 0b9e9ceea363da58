//! Aggregation expressions (MongoDB 7.0's `Expression`, src/mongo/db/pipeline/expression.cpp):
//! parsing, parse-time optimization and evaluation against raw documents. Used by the `$expr`
//! query operator ([`ExprExtensions`] plugs into [`Filter::parse_with`]) and by computed
//! fields in `find` projections ([`ExprExtensions`] is also a projection
//! [`ExpressionParser`]); the aggregation pipeline builds on [`Expression`].
//!
//! # Language
//! - Operands: `"$a.b"` field paths (arrays along the path map the rest of the path over their
//!   document elements, see [`eval`]), literals, `{$literal: v}`, object expressions
//!   `{k: expr}` (missing values drop their field) and array expressions `[expr, …]` (missing
//!   elements become null). A path's top-level field is read by [`field`], a walk over the
//!   raw bytes that answers exactly as [`crate::path::field`].
//! - Variables: `$$ROOT`, `$$CURRENT` (rebindable with `$let`), `$$REMOVE` (missing), `$$NOW`,
//!   `$$CLUSTER_TIME` (from [`Variables::set_cluster_time`]; without it error 51144, as on a
//!   standalone `mongod`), `$$SEARCH_META` (missing: there is no `$search`), `$$DESCEND`,
//!   `$$PRUNE`, `$$KEEP` (the strings `$redact` compares with; MongoDB defines them only inside
//!   `$redact`, Cairn everywhere), user variables of the [`ParseContext`] and locals of `$let`,
//!   `$map`, `$filter`, `$reduce`.
//! - Operators: every MongoDB 7.0 expression operator. The accumulators' expression forms
//!   (`$sum $avg $min $max $stdDevPop $stdDevSamp $mergeObjects $firstN $lastN $maxN $minN
//!   $median $percentile`, see [`accum`]) are computed by the aggregation accumulators; the
//!   window-only names (`$top $topN $bottom $bottomN $count $covariancePop $covarianceSamp
//!   $rank $denseRank $documentNumber $shift $derivative $integral $expMovingAvg $locf
//!   $linearFill`) are NotImplemented (238) in expressions and belong to `$setWindowFields`;
//!   unknown names are 168 "Unrecognized expression '$foo'". Groups: comparison (MongoDB's full BSON order,
//!   missing below null); arithmetic and rounding ([`arith`]); trigonometry (`trig`); logic
//!   and conditionals; arrays, sets (`ops`) and `$sortArray`/`$zip`; strings, `$regexFind*`
//!   on [`crate::regex`], `$trim`, `$replace*`, `$indexOf*` (`strings`); objects
//!   (`$getField $setField $unsetField $mergeObjects $objectToArray $arrayToObject`); types and
//!   `$convert` (`convert`); dates with IANA time zones and UTC offsets (`datetime`,
//!   `named`); bitwise, `$bsonSize $binarySize $tsSecond $tsIncrement $toHashedIndexKey
//!   $rand $meta` (missing: no text-search or other metadata) and `$function` (error 31264:
//!   no server-side JavaScript, as with `--noscripting`).
//! - Truthiness (`$and`, `$cond`, `$expr` …): false, null, missing, undefined and numeric
//!   zeros are false; everything else (NaN, empty strings, empty arrays) is true.
//!
//! # Errors
//! Parse errors and evaluation errors carry MongoDB's codes: arity 16020 / 28667, operator
//! documents with several fields 15983, undefined variables 17276, bad variable names
//! FailedToParse (9), `$divide` by zero BadValue (2) "can't $divide by zero", `$add` of a
//! string TypeMismatch (14) "$add only supports numeric or date types, not string", `$switch`
//! without a match 40066, etc. Codes without a [`QueryError`] variant are
//! [`QueryError::Location`]. Constant sub-expressions are evaluated at parse time, as MongoDB
//! does, so their errors are parse errors (see [`optimize`]).
//!
//! In `$expr`, an evaluation error fails the query as MongoDB does: `Filter::try_matches`
//! (through [`DocumentPredicate::try_matches`], here [`ExprPredicate::try_matches`]) returns
//! it; the infallible [`DocumentPredicate::matches`] counts it as no match.
//!
//! # Invariants
//! - Parsing and evaluation never panic on any input (malformed BSON included); nesting is
//!   bounded by [`MAX_DEPTH`].
//! - A parsed [`Expression`] is immutable, `Send + Sync`, and can be evaluated any number of
//!   times, concurrently, against any documents.
//! - Results are exact MongoDB types (int stays int unless it overflows, and so on).
//!   Decimal128 results are IEEE 754-2008 decimal128 values computed with libdecnumber
//!   ([`cairn_storage::decimal`]); transcendental ones (`$exp $ln $log $log10 $pow`,
//!   trigonometry) are correctly rounded to 34 digits, where MongoDB's Intel library is, in
//!   rare cases, one unit off in the last digit.

mod accum;
mod arith;
mod convert;
mod datetime;
mod deps;
mod eval;
pub(crate) mod field;
mod named;
mod ops;
mod optimize;
mod parse;
mod strings;
mod trig;
mod value;

use std::sync::Arc;

use bson::{DateTime, RawBson, RawBsonRef, RawDocument, Timestamp};

use crate::error::{QueryError, Result};
use crate::filter::{DocumentPredicate, ExtensionKind, Extensions};
use crate::projection::{ExpressionParser, ProjectionExpression};

#[cfg(doc)]
use crate::filter::Filter;

pub use parse::MAX_DEPTH;
pub(crate) use value::Value;

/// A uniformly distributed double in [0, 1) (the generator behind `$rand`).
pub fn random_unit() -> f64 {
    ops::random_unit()
}

/// What a parser needs to know beyond the expression: the user variables in scope (a
/// command's `let`). `$$ROOT`, `$$CURRENT`, `$$REMOVE` and `$$NOW` are always defined.
#[derive(Clone, Debug, Default)]
pub struct ParseContext {
    user: Vec<String>,
    /// Parsing a collection validator: `$function` (4660800) and `$_internalJsEmit`
    /// (4660801) are refused, as MongoDB's `isParsingCollectionValidator` does, and the
    /// expression is not optimized.
    pub(crate) validator: bool,
}

impl ParseContext {
    /// A context without user variables.
    pub fn new() -> ParseContext {
        ParseContext::default()
    }

    /// The context for expressions evaluated with `vars`: its user variables are defined.
    pub fn for_variables(vars: &Variables) -> ParseContext {
        ParseContext {
            user: vars.user.iter().map(|(k, _)| k.clone()).collect(),
            validator: false,
        }
    }

    /// Marks the context as parsing a collection validator (see the `validator` field).
    pub fn for_validator(mut self) -> ParseContext {
        self.validator = true;
        self
    }

    /// Defines a user variable.
    pub fn define(&mut self, name: &str) {
        if !self.defines(name) {
            self.user.push(name.to_string());
        }
    }

    fn defines(&self, name: &str) -> bool {
        self.user.iter().any(|n| n == name)
    }
}

/// The values of variables during evaluation: `$$NOW` (fixed for a whole command) and the
/// user variables.
#[derive(Clone, Debug)]
pub struct Variables {
    now: DateTime,
    cluster_time: Option<Timestamp>,
    user: Vec<(String, RawBson)>,
}

impl Default for Variables {
    fn default() -> Variables {
        Variables::new()
    }
}

impl Variables {
    /// No user variables; `$$NOW` is the current time.
    pub fn new() -> Variables {
        Variables::with_now(DateTime::now())
    }

    /// No user variables; `$$NOW` is `now`.
    pub fn with_now(now: DateTime) -> Variables {
        Variables {
            now,
            cluster_time: None,
            user: Vec::new(),
        }
    }

    /// Sets `$$CLUSTER_TIME` (the server's logical time for the command). Without it,
    /// `$$CLUSTER_TIME` is error 51144, as on a standalone `mongod` whose logical clock is not
    /// running.
    pub fn set_cluster_time(&mut self, ts: Timestamp) {
        self.cluster_time = Some(ts);
    }

    /// `$$CLUSTER_TIME`, when the command has one.
    pub fn cluster_time(&self) -> Option<Timestamp> {
        self.cluster_time
    }

    /// Defines (or redefines) a user variable, checking the name as MongoDB checks `let`
    /// names (FailedToParse for names that are empty, start with anything but a lowercase
    /// letter or a non-ASCII character, or contain characters other than letters, digits and
    /// `_`).
    pub fn set(&mut self, name: &str, value: RawBson) -> Result<()> {
        if name != "CURRENT" {
            let mut chars = name.chars();
            match chars.next() {
                None => {
                    return Err(QueryError::FailedToParse(
                        "empty variable names are not allowed".into(),
                    ));
                }
                Some(c) if !c.is_ascii_lowercase() && c.is_ascii() => {
                    return Err(QueryError::FailedToParse(format!(
                        "'{name}' starts with an invalid character for a user variable name"
                    )));
                }
                _ => {}
            }
            if let Some(c) =
                chars.find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || !c.is_ascii()))
            {
                return Err(QueryError::FailedToParse(format!(
                    "'{name}' contains an invalid character for a variable name: '{c}'"
                )));
            }
        }
        match self.user.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = value,
            None => self.user.push((name.to_string(), value)),
        }
        Ok(())
    }

    /// Defines a constant (an update's `c`), checking the name as MongoDB checks names read
    /// by expressions (`validateNameForUserRead`: 16866 empty, 16867 first character not a
    /// letter, 16868 other characters than letters, digits and `_`).
    pub fn set_constant(&mut self, name: &str, value: RawBson) -> Result<()> {
        let mut chars = name.chars();
        match chars.next() {
            None => {
                return Err(QueryError::Location(
                    16866,
                    "empty variable names are not allowed".into(),
                ));
            }
            Some(c) if c.is_ascii() && !c.is_ascii_alphabetic() => {
                return Err(QueryError::Location(
                    16867,
                    format!("'{name}' starts with an invalid character for a user variable name"),
                ));
            }
            _ => {}
        }
        if let Some(c) = chars.find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || !c.is_ascii()))
        {
            return Err(QueryError::Location(
                16868,
                format!("'{name}' contains an invalid character for a variable name: '{c}'"),
            ));
        }
        match self.user.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = value,
            None => self.user.push((name.to_string(), value)),
        }
        Ok(())
    }

    /// `$$NOW`.
    pub fn now(&self) -> DateTime {
        self.now
    }

    /// A user variable's value.
    pub fn get(&self, name: &str) -> Option<&RawBson> {
        self.user.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}

/// A parsed (and optimized) aggregation expression.
#[derive(Clone, Debug)]
pub struct Expression {
    root: parse::Node,
    slots: usize,
}

impl Expression {
    /// Parses an operand (`Expression::parseOperand` followed by `optimize`): a `$` string
    /// is a field path or variable, a document is an operator or object expression, an array
    /// is an array expression, anything else is a constant.
    pub fn parse(v: RawBsonRef<'_>, ctx: &ParseContext) -> Result<Expression> {
        let parsed = parse::parse(v, ctx)?;
        // A collection validator is never optimized (MongoDB does not normalize it), so its
        // constant sub-expressions fail when evaluated, not when the validator is set.
        if ctx.validator {
            return Ok(Expression {
                root: parsed.root,
                slots: parsed.slots,
            });
        }
        let root = optimize::optimize(parsed.root, parsed.slots)?;
        Ok(Expression {
            root,
            slots: parsed.slots,
        })
    }

    /// The value for the document `root`; `None` is *missing* (not null).
    pub fn evaluate(&self, root: &RawDocument, vars: &Variables) -> Result<Option<RawBson>> {
        let mut cx = eval::Cx {
            root,
            vars,
            locals: vec![value::Value::Missing; self.slots],
        };
        Ok(eval::eval(&self.root, &mut cx)?.to_bson())
    }

    /// Evaluates and hands the value to `f` borrowed (`None` is missing): a field path's
    /// value is read in place, without the copy [`Expression::evaluate`] makes.
    pub fn with_value<R>(
        &self,
        root: &RawDocument,
        vars: &Variables,
        f: impl FnOnce(Option<RawBsonRef<'_>>) -> R,
    ) -> Result<R> {
        let mut cx = eval::Cx {
            root,
            vars,
            locals: vec![value::Value::Missing; self.slots],
        };
        let v = eval::eval(&self.root, &mut cx)?;
        Ok(f(v.get()))
    }

    /// The fields of the expression when it is a field path of the document (`$a.b`: `[a,
    /// b]`), for a caller that reads the path's value itself, as the evaluator reads it
    /// ([`field::Paths`]).
    pub(crate) fn root_path(&self) -> Option<&[String]> {
        match &self.root {
            parse::Node::Path(parse::Var::Root, parts) if !parts.is_empty() => Some(parts),
            _ => None,
        }
    }

    /// The value coerced to a boolean as `$expr`, `$cond` and `$and` do.
    pub fn evaluate_truthy(&self, root: &RawDocument, vars: &Variables) -> Result<bool> {
        let mut cx = eval::Cx {
            root,
            vars,
            locals: vec![value::Value::Missing; self.slots],
        };
        Ok(eval::eval(&self.root, &mut cx)?.truthy())
    }

    /// The value when the expression is a constant after optimization (`Some(None)` for a
    /// constant missing value such as `$$REMOVE`).
    pub fn constant(&self) -> Option<Option<&RawBson>> {
        self.root.constant().map(Option::as_ref)
    }
}

/// The `$expr` predicate: the operand's value coerced to a boolean.
#[derive(Debug)]
pub struct ExprPredicate {
    expr: Expression,
    vars: Arc<Variables>,
}

impl ExprPredicate {
    /// Whether `doc` matches, or the evaluation error.
    pub fn try_matches(&self, doc: &RawDocument) -> Result<bool> {
        self.expr.evaluate_truthy(doc, &self.vars)
    }

    /// The parsed operand.
    pub fn expression(&self) -> &Expression {
        &self.expr
    }
}

impl DocumentPredicate for ExprPredicate {
    /// False on an evaluation error (use [`DocumentPredicate::try_matches`] to see it).
    fn matches(&self, doc: &RawDocument) -> bool {
        ExprPredicate::try_matches(self, doc).unwrap_or(false)
    }

    fn try_matches(&self, doc: &RawDocument) -> Result<bool> {
        ExprPredicate::try_matches(self, doc)
    }
}

/// The expression language for one command: parses `$expr` (as a filter [`Extensions`]) and
/// computed projection fields (as an [`ExpressionParser`]) with the command's variables.
///
/// Use one per command: parse the filter and projection with it, and match with
/// `Filter::try_matches` (MongoDB fails the whole query on the first evaluation error).
#[derive(Clone, Debug)]
pub struct ExprExtensions {
    vars: Arc<Variables>,
    ctx: ParseContext,
}

impl Default for ExprExtensions {
    fn default() -> ExprExtensions {
        ExprExtensions::new()
    }
}

impl ExprExtensions {
    /// No user variables; `$$NOW` is the current time.
    pub fn new() -> ExprExtensions {
        ExprExtensions::with_variables(Variables::new())
    }

    /// With the command's variables (`let`, `$$NOW`).
    pub fn with_variables(vars: Variables) -> ExprExtensions {
        ExprExtensions {
            ctx: ParseContext::for_variables(&vars),
            vars: Arc::new(vars),
        }
    }

    /// The variables expressions are evaluated with.
    pub fn variables(&self) -> &Variables {
        &self.vars
    }

    /// Parses an expression with this command's variables in scope.
    pub fn parse_expression(&self, v: RawBsonRef<'_>) -> Result<Expression> {
        Expression::parse(v, &self.ctx)
    }

    /// The same language for a collection validator: `$function` and `$_internalJsEmit` are
    /// refused with MongoDB's validator codes.
    pub fn for_validator(mut self) -> ExprExtensions {
        self.ctx = self.ctx.for_validator();
        self
    }

    /// Parses the operand of `$expr`.
    pub fn parse_predicate(&self, operand: RawBsonRef<'_>) -> Result<ExprPredicate> {
        Ok(ExprPredicate {
            expr: self.parse_expression(operand)?,
            vars: Arc::clone(&self.vars),
        })
    }
}

impl Extensions for ExprExtensions {
    fn parse(
        &self,
        kind: ExtensionKind,
        operand: RawBsonRef<'_>,
    ) -> Result<Arc<dyn DocumentPredicate>> {
        match kind {
            ExtensionKind::Expr => Ok(Arc::new(self.parse_predicate(operand)?)),
            other => Err(QueryError::NotImplemented(format!(
                "{} is not supported yet",
                other.operator()
            ))),
        }
    }
}

/// A computed projection field.
#[derive(Debug)]
struct ProjectedExpression {
    expr: Expression,
    vars: Arc<Variables>,
}

impl ProjectionExpression for ProjectedExpression {
    fn evaluate(&self, root: &RawDocument) -> Result<Option<RawBson>> {
        self.expr.evaluate(root, &self.vars)
    }
}

impl ExpressionParser for ExprExtensions {
    fn parse(&self, expr: RawBsonRef<'_>) -> Result<Arc<dyn ProjectionExpression>> {
        Ok(Arc::new(ProjectedExpression {
            expr: self.parse_expression(expr)?,
            vars: Arc::clone(&self.vars),
        }))
    }
}

/// A binary arithmetic operator with the expression language's semantics, for the window
/// functions that compute on values (`$derivative`, `$integral`, `$covariance*`,
/// `$linearFill`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithOp {
    /// `$add` (numbers, or one date and numbers).
    Add,
    /// `$subtract` (numbers, dates, date minus number).
    Subtract,
    /// `$multiply`.
    Multiply,
    /// `$divide` (BadValue on division by zero).
    Divide,
}

/// `a <op> b` as the expression operator computes it (`None` = missing operand; a nullish
/// operand gives null).
pub fn arith(op: ArithOp, a: Option<RawBsonRef<'_>>, b: Option<RawBsonRef<'_>>) -> Result<RawBson> {
    let to_v = |x: Option<RawBsonRef<'_>>| match x {
        Some(r) => value::Value::Owned(RawBson::from(r)),
        None => value::Value::Missing,
    };
    let (l, r) = (to_v(a), to_v(b));
    let out = match op {
        ArithOp::Add | ArithOp::Multiply => {
            if l.nullish() || r.nullish() {
                return Ok(RawBson::Null);
            }
            let (Some(x), Some(y)) = (l.get(), r.get()) else {
                return Ok(RawBson::Null);
            };
            if op == ArithOp::Add {
                let mut st = arith::AddState::new();
                st.push(x)?;
                st.push(y)?;
                st.finish()?
            } else {
                let mut st = arith::MultiplyState::new();
                st.push(x)?;
                st.push(y)?;
                st.finish()
            }
        }
        ArithOp::Subtract => arith::subtract(&l, &r)?,
        ArithOp::Divide => arith::divide(&l, &r)?,
    };
    Ok(out.to_bson().unwrap_or(RawBson::Null))
}

/// `dateAdd(millis, unit, amount)` in UTC (`unit` a MongoDB time unit name), for time-range
/// windows and `$densify`. FailedToParse for an unknown unit.
pub fn date_add_utc(millis: i64, unit: &str, amount: i64) -> Result<i64> {
    let Some(u) = datetime::Unit::parse(unit) else {
        return Err(QueryError::FailedToParse(format!(
            "unknown time unit value: {unit}"
        )));
    };
    datetime::date_add(millis, u, amount, &datetime::Tz::Utc)
}

/// Whether `unit` names a MongoDB time unit (`year` … `millisecond`).
pub fn is_time_unit(unit: &str) -> bool {
    datetime::Unit::parse(unit).is_some()
}
