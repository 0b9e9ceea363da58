//! Document validation: collection validators (`validator`, `validationLevel`,
//! `validationAction`) as MongoDB 7.0 applies them.
//!
//! - [`Validator::parse`] parses a `validator` as `CollectionImpl::parseValidator` does: the
//!   query language with `$expr` and `$jsonSchema`, without `$where`, `$text` (BadValue "… is
//!   not allowed in this context"), `$near`/`$nearSphere`/`$geoNear` (5626500) or
//!   `$function` in `$expr` (4660800); errors keep their code and read
//!   `Parsing of collection validator failed :: caused by :: …`.
//! - [`Validator::check`] decides a document. A document fails when the validator does not
//!   match it or its evaluation fails (an `$expr` that throws); the failure carries MongoDB's
//!   `errInfo` — `{failingDocumentId, details}` — from [`explain`], which explains which rule
//!   failed exactly as `doc_validation_error.cpp` does, on the annotated trees of `tree`
//!   and [`crate::jsonschema`].
//! - [`CollectionValidators`] is the storage hook ([`cairn_storage::validation`]): it keeps
//!   each collection's parsed validator (reparsed when its options change) and applies the
//!   level and action: `off` checks nothing; `strict` checks every insert and update;
//!   `moderate` refuses an update only when the old document passed and the new one fails;
//!   `warn` lets the write through and reports it to the [`Hooks::warn`] sink (the server
//!   logs id 20294 "Document would fail validation").
//!
//! Invariant: checking never panics; a validator that no longer parses (it was accepted when
//! set) refuses writes with its parse error rather than letting them through.

pub mod explain;
pub(crate) mod tree;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::StorageError;
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::validation::DocumentValidator;

use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Variables};
use crate::filter::{DocumentPredicate, ExtensionKind, Extensions, Filter};
use crate::jsonschema::JsonSchemaExtensions;

/// `validationLevel`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Level {
    /// No validation.
    Off,
    /// Every insert and update (the default).
    #[default]
    Strict,
    /// Inserts, and updates of documents that passed.
    Moderate,
}

impl Level {
    /// Parses `validationLevel`'s value (MongoDB's IDL enum).
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "off" => Level::Off,
            "strict" => Level::Strict,
            "moderate" => Level::Moderate,
            _ => return None,
        })
    }
}

/// `validationAction`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Action {
    /// Refuse the write (the default).
    #[default]
    Error,
    /// Allow it and log a warning.
    Warn,
}

impl Action {
    /// Parses `validationAction`'s value (MongoDB's IDL enum).
    pub fn parse(s: &str) -> Option<Action> {
        Some(match s {
            "error" => Action::Error,
            "warn" => Action::Warn,
            _ => return None,
        })
    }
}

/// The extension operators a validator may use: `$expr` (without `$function`) and
/// `$jsonSchema`; `$where` and `$text` are refused.
struct ValidatorExtensions {
    expr: ExprExtensions,
}

impl Extensions for ValidatorExtensions {
    fn parse(
        &self,
        kind: ExtensionKind,
        operand: RawBsonRef<'_>,
    ) -> Result<Arc<dyn DocumentPredicate>> {
        match kind {
            ExtensionKind::Expr => self.expr.parse(kind, operand),
            ExtensionKind::JsonSchema => JsonSchemaExtensions.parse(kind, operand),
            ExtensionKind::Where | ExtensionKind::Text => Err(QueryError::BadValue(format!(
                "{} is not allowed in this context",
                kind.operator()
            ))),
        }
    }

    fn geo_near_allowed(&self) -> bool {
        false
    }
}

/// A parsed collection validator.
#[derive(Debug, Clone)]
pub struct Validator {
    tree: tree::VNode,
}

/// `status.withContext(context)`: the same error, its message prefixed.
fn with_context(e: QueryError, context: &str) -> QueryError {
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

impl Validator {
    /// Parses a `validator` document (see the module doc for what is refused). Errors read
    /// "Parsing of collection validator failed :: caused by :: …".
    pub fn parse(validator: &RawDocument) -> Result<Validator> {
        Validator::parse_inner(validator)
            .map_err(|e| with_context(e, "Parsing of collection validator failed"))
    }

    fn parse_inner(validator: &RawDocument) -> Result<Validator> {
        let expr = ExprExtensions::new().for_validator();
        Filter::parse_with(validator, &ValidatorExtensions { expr: expr.clone() })?;
        Ok(Validator {
            tree: tree::build(validator, &expr)?,
        })
    }

    /// Checks `doc` (whose first field is `_id`): `Ok(())` when it passes, otherwise its
    /// `errInfo`. `$expr` sees `$$NOW` as the time of the call; `code_name` names the codes of
    /// evaluation errors reported in the explanation.
    pub fn check(
        &self,
        doc: &RawDocument,
        code_name: explain::CodeNamer<'_>,
    ) -> std::result::Result<(), RawDocumentBuf> {
        let vars = Variables::new();
        if self.passes(doc, &vars) {
            return Ok(());
        }
        Err(explain::error_info(&self.tree, doc, &vars, code_name))
    }

    /// Whether `doc` passes (an evaluation error fails it).
    fn passes(&self, doc: &RawDocument, vars: &Variables) -> bool {
        matches!(self.tree.try_matches(doc, vars), Ok(true))
    }
}

/// A collection's validation settings, from its options.
#[derive(Debug, Clone)]
pub struct CollectionValidator {
    /// The parsed `validator` (`None` when absent or empty).
    pub validator: Option<Validator>,
    /// `validationLevel`.
    pub level: Level,
    /// `validationAction`.
    pub action: Action,
}

impl CollectionValidator {
    /// Reads a collection's options (`validator`, `validationLevel`, `validationAction`).
    pub fn from_options(options: &RawDocument) -> Result<CollectionValidator> {
        let validator = match options.get("validator") {
            Ok(Some(RawBsonRef::Document(v))) if !v.is_empty() => Some(Validator::parse(v)?),
            _ => None,
        };
        let level = match options.get("validationLevel") {
            Ok(Some(RawBsonRef::String(s))) => Level::parse(s).unwrap_or_default(),
            _ => Level::default(),
        };
        let action = match options.get("validationAction") {
            Ok(Some(RawBsonRef::String(s))) => Action::parse(s).unwrap_or_default(),
            _ => Action::default(),
        };
        Ok(CollectionValidator {
            validator,
            level,
            action,
        })
    }
}

/// Reports a write that failed validation but went through (`validationAction: warn`):
/// namespace, document, `errInfo`.
pub type WarnSink = Box<dyn Fn(&str, &RawDocument, &RawDocument) + Send + Sync>;

/// What the server supplies to [`CollectionValidators`].
pub struct Hooks {
    /// Where `warn` failures go.
    pub warn: WarnSink,
    /// Names an error code (`codeName`).
    pub code_name: Box<dyn Fn(i32) -> String + Send + Sync>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hooks")
    }
}

/// Entries kept before the cache of parsed validators is cleared.
const CACHE_LIMIT: usize = 4096;

type Cached = (
    Vec<u8>,
    Arc<std::result::Result<CollectionValidator, QueryError>>,
);

/// The storage hook: every collection's validator, parsed once per options version.
#[derive(Debug)]
pub struct CollectionValidators {
    hooks: Hooks,
    cache: RwLock<HashMap<[u8; 16], Cached>>,
}

impl CollectionValidators {
    /// The hook with the server's `hooks`.
    pub fn new(hooks: Hooks) -> CollectionValidators {
        CollectionValidators {
            hooks,
            cache: RwLock::new(HashMap::new()),
        }
    }

    /// The collection's settings, parsed on first use and whenever its options change.
    fn settings(
        &self,
        coll: &CollectionMeta,
    ) -> Arc<std::result::Result<CollectionValidator, QueryError>> {
        let bytes = coll.options.as_bytes();
        if let Ok(c) = self.cache.read()
            && let Some((b, v)) = c.get(&coll.uuid)
            && b.as_slice() == bytes
        {
            return v.clone();
        }
        let parsed = Arc::new(CollectionValidator::from_options(&coll.options));
        if let Ok(mut c) = self.cache.write() {
            if c.len() >= CACHE_LIMIT {
                c.clear();
            }
            c.insert(coll.uuid, (bytes.to_vec(), parsed.clone()));
        }
        parsed
    }

    /// `checkValidationAndParseResult`: `Ok(true)` passes, `Ok(false)` failed but `warn`
    /// let it through (logged), `Err` refuses.
    fn check_one(
        &self,
        coll: &CollectionMeta,
        settings: &CollectionValidator,
        validator: &Validator,
        doc: &RawDocument,
    ) -> std::result::Result<bool, RawDocumentBuf> {
        match validator.check(doc, &*self.hooks.code_name) {
            Ok(()) => Ok(true),
            Err(info) if settings.action == Action::Warn => {
                (self.hooks.warn)(&coll.namespace(), doc, &info);
                Ok(false)
            }
            Err(info) => Err(info),
        }
    }
}

impl DocumentValidator for CollectionValidators {
    fn applies(&self, coll: &CollectionMeta) -> bool {
        if !matches!(coll.options.get("validator"), Ok(Some(RawBsonRef::Document(v))) if !v.is_empty())
        {
            return false;
        }
        !matches!(
            coll.options.get("validationLevel"),
            Ok(Some(RawBsonRef::String("off")))
        )
    }

    fn check(
        &self,
        coll: &CollectionMeta,
        old: Option<&RawDocument>,
        new: &RawDocument,
    ) -> cairn_storage::Result<()> {
        let settings = self.settings(coll);
        let settings = match &*settings {
            Ok(s) => s,
            Err(e) => return Err(StorageError::BadValue(e.to_string())),
        };
        let Some(validator) = &settings.validator else {
            return Ok(());
        };
        if settings.level == Level::Off {
            return Ok(());
        }
        let refused = match self.check_one(coll, settings, validator, new) {
            Ok(_) => return Ok(()),
            Err(info) => info,
        };
        if let (Level::Moderate, Some(old)) = (settings.level, old) {
            // Moderate: a document that already failed may stay invalid.
            if !validator.passes(old, &Variables::new()) {
                return Ok(());
            }
        }
        Err(StorageError::DocumentValidationFailure(refused))
    }
}
