//! Validation of index specifications as MongoDB 7.0's `createIndexes` performs it.
//!
//! Order and messages follow the server: the TTL rules first (`validateIndexSpecTTL`, on the
//! spec as given), then `validateIndexSpec` (allowed field names, option types, the key
//! pattern's `validateKeyPattern`, the partial filter's parse) whose errors read
//! `Error in specification <spec> :: caused by :: <reason>`, then the `_id`-index and
//! reserved-name checks, then the catalog's `_isSpecOk` (sparse with partial, operators allowed
//! in a partial filter, empty names) whose errors read the same way with the spec as
//! normalised (`v: 2` appended when absent), then the access method's hashed rules.
//! The geo plugins' own checks: `2dsphereIndexVersion` 1–3, a `2d` component first and alone,
//! `bits` 1–32, `min < max`. Valid MongoDB specifications Cairn cannot serve (text, wildcard,
//! columnstore, clustered, non-simple collations) are NotImplemented (238).
//!
//! Invariant: never panics; an `Ok` spec has a key pattern of 1/-1 numbers and at most one
//! `"hashed"`, a string name, and (if present) a partial filter that parses with
//! [`crate::filter::Filter`] and uses only operators MongoDB allows there.

use std::sync::Arc;

use bson::{RawBsonRef, RawDocument};
use cairn_storage::compare::TypeClass;
use cairn_storage::display;
pub(crate) use cairn_storage::display::type_name;

use super::{IndexError, code, number};
use crate::error::QueryError;
use crate::filter::{
    CmpOp, DocumentPredicate, Expr, ExtensionKind, Extensions, Filter, PathExpr, Predicate,
};

/// Top-level fields allowed in an index specification (`index_key_validate.h`).
const ALLOWED_FIELDS: &[&str] = &[
    "bits",
    "max",
    "min",
    "coarsestIndexedLevel",
    "finestIndexedLevel",
    "2dsphereIndexVersion",
    "background",
    "collation",
    "default_language",
    "dropDups",
    "expireAfterSeconds",
    "hidden",
    "name",
    "v",
    "key",
    "language_override",
    "ns",
    "partialFilterExpression",
    "wildcardProjection",
    "columnstoreProjection",
    "sparse",
    "storageEngine",
    "textIndexVersion",
    "unique",
    "weights",
    "originalSpec",
    "prepareUnique",
    "_id",
];

/// Fields allowed in an `_id` index specification.
const ALLOWED_ID_FIELDS: &[&str] = &["collation", "name", "v", "key", "ns", "_id"];

/// `internalPartialFilterExpressionMaxDepth`.
const PARTIAL_FILTER_MAX_DEPTH: usize = 4;

/// Plugins (index types) MongoDB knows (`IndexNames::isKnownName`).
const KNOWN_PLUGINS: &[&str] = &[
    "",
    "2d",
    "2dsphere",
    "2dsphere_bucket",
    "text",
    "hashed",
    "wildcard",
    "columnstore",
    "geoHaystack",
];

fn is_number(v: RawBsonRef<'_>) -> bool {
    TypeClass::of(v) == TypeClass::Number
}

/// `BSONElement::trueValue`.
fn true_value(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Boolean(b) => b,
        RawBsonRef::Null | RawBsonRef::Undefined => false,
        v => number(v).is_none_or(|n| n != 0.0),
    }
}

/// `BSONElement::safeNumberLong` for the TTL checks.
fn safe_number_long(v: RawBsonRef<'_>) -> i64 {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        other => {
            let d = number(other).unwrap_or(0.0);
            if d.is_nan() {
                0
            } else if d >= TWO_POW_63 {
                i64::MAX
            } else if d < -TWO_POW_63 {
                i64::MIN
            } else {
                d as i64
            }
        }
    }
}

fn err(code: i32, message: impl Into<String>) -> IndexError {
    IndexError::new(code, message)
}

fn cannot_create(message: impl Into<String>) -> IndexError {
    err(code::CANNOT_CREATE_INDEX, message)
}

fn in_specification(e: IndexError, spec: &str) -> IndexError {
    IndexError::new(
        e.code,
        format!(
            "Error in specification {spec} :: caused by :: {}",
            e.message
        ),
    )
}

/// The MongoDB code of a query error.
pub(crate) fn query_error(e: QueryError) -> IndexError {
    let (c, m) = match e {
        QueryError::BadValue(m) => (code::BAD_VALUE, m),
        QueryError::FailedToParse(m) => (code::FAILED_TO_PARSE, m),
        QueryError::TypeMismatch(m) => (code::TYPE_MISMATCH, m),
        QueryError::DollarPrefixedFieldName(m) => (52, m),
        QueryError::InvalidIdField(m) => (53, m),
        QueryError::NotImplemented(m) => (code::NOT_IMPLEMENTED, m),
        QueryError::Location(c, m) => (c, m),
        QueryError::Storage(s) => (code::BAD_VALUE, s.to_string()),
    };
    IndexError::new(c, m)
}

/// Extensions for partial filters: MongoDB parses them with `kBanAllSpecialFeatures`.
struct BanAll;

impl Extensions for BanAll {
    fn parse(
        &self,
        kind: ExtensionKind,
        _: RawBsonRef<'_>,
    ) -> crate::error::Result<Arc<dyn DocumentPredicate>> {
        Err(QueryError::Location(
            code::QUERY_FEATURE_NOT_ALLOWED,
            format!("{} is not allowed in this context", kind.operator()),
        ))
    }
}

/// Parses a `partialFilterExpression` as index creation does.
pub fn parse_partial_filter(raw: &RawDocument) -> Result<Filter, IndexError> {
    Filter::parse_with(raw, &BanAll).map_err(query_error)
}

/// Validates an index specification (the `createIndexes` rules); `Ok` when the index can be
/// created by Cairn.
pub fn validate_spec(spec: &RawDocument) -> Result<(), IndexError> {
    let spec_str = display::document(spec);
    if spec.get("clustered").ok().flatten().is_some() {
        return Err(err(
            code::NOT_IMPLEMENTED,
            "clustered indexes are not supported yet",
        ));
    }
    validate_ttl(spec, &spec_str)?;
    let info = validate_index_spec(spec, &spec_str).map_err(|e| in_specification(e, &spec_str))?;
    let normalised = if info.has_version {
        spec_str.clone()
    } else {
        let mut s = spec.to_owned();
        s.append(bson::raw::cstr!("v"), 2i32);
        display::document(&s)
    };
    if is_id_index_pattern(info.key) {
        validate_id_spec(spec, info.key, &normalised)?;
    } else {
        if info.name == "_id_" {
            return Err(err(
                code::BAD_VALUE,
                format!(
                    "The index name '_id_' is reserved for the _id index, which must have key \
                     pattern {{_id: 1}}, found key: {}",
                    display::document(info.key)
                ),
            ));
        }
        if info.name == "*" {
            return Err(err(code::BAD_VALUE, "The index name '*' is not valid."));
        }
    }
    is_spec_ok(spec, &info).map_err(|e| in_specification(e, &normalised))?;
    access_method_checks(spec, &info)?;
    // `Ordering::make`: an index key orders at most 32 fields.
    if info.key.iter().count() > MAX_KEY_FIELDS {
        return Err(err(13103, "too many compound keys"));
    }
    Ok(())
}

/// Most fields in a key pattern (MongoDB's `Ordering` holds one direction bit per field).
pub const MAX_KEY_FIELDS: usize = 32;

/// What `validateIndexSpec` learned.
struct SpecInfo<'a> {
    key: &'a RawDocument,
    name: &'a str,
    plugin: String,
    has_version: bool,
}

/// `validateIndexSpecTTL`.
fn validate_ttl(spec: &RawDocument, spec_str: &str) -> Result<(), IndexError> {
    let Some(v) = spec.get("expireAfterSeconds").ok().flatten() else {
        return Ok(());
    };
    let reason = if !is_number(v) {
        Some(format!(
            "TTL index 'expireAfterSeconds' option must be numeric, but received a type of '{}'",
            type_name(v)
        ))
    } else if number(v).is_some_and(f64::is_nan) {
        Some("TTL index 'expireAfterSeconds' option must not be NaN".to_string())
    } else {
        let long = safe_number_long(v);
        let int = long.clamp(i64::from(i32::MIN), i64::from(i32::MAX));
        if int != long {
            Some(
                "TTL index 'expireAfterSeconds' must be within the range of a 32-bit integer"
                    .to_string(),
            )
        } else if long < 0 {
            Some("TTL index 'expireAfterSeconds' option cannot be less than 0".to_string())
        } else {
            None
        }
    };
    if let Some(reason) = reason {
        return Err(cannot_create(format!(
            ". Index spec: {spec_str} :: caused by :: {reason}"
        )));
    }
    let fields = spec
        .get_document("key")
        .map(|k| k.iter().count())
        .unwrap_or(0);
    if fields != 1 {
        return Err(cannot_create(format!(
            "TTL indexes are single-field indexes, compound indexes do not support TTL. Index \
             spec: {spec_str}"
        )));
    }
    Ok(())
}

/// `IndexNames::findPluginName`.
fn plugin_name(key: &RawDocument) -> String {
    for (k, v) in key.iter().map_while(Result::ok) {
        if let RawBsonRef::String(s) = v {
            return s.to_string();
        }
        let name = k.as_str();
        if name == "$**" || name.ends_with(".$**") {
            return "wildcard".to_string();
        }
    }
    String::new()
}

/// `validateKeyPattern` (index version 2).
fn validate_key_pattern(key: &RawDocument) -> Result<(), IndexError> {
    if key.as_bytes().len() > 2048 {
        return Err(cannot_create("Index key pattern too large."));
    }
    if key.is_empty() {
        return Err(cannot_create("Index keys cannot be empty."));
    }
    let plugin = plugin_name(key);
    if !plugin.is_empty() {
        if plugin == "geoHaystack" {
            return Err(cannot_create(
                "GeoHaystack indexes cannot be created in version 5.0 and above",
            ));
        }
        if !KNOWN_PLUGINS.contains(&plugin.as_str()) {
            return Err(cannot_create(format!("Unknown index plugin '{plugin}'")));
        }
    }
    for el in key.iter() {
        let (k, v) = el.map_err(|e| err(code::BAD_VALUE, e.to_string()))?;
        let field = k.as_str();
        if let Some(n) = number(v) {
            if n.is_nan() {
                return Err(cannot_create(
                    "Values in the index key pattern cannot be NaN.",
                ));
            }
            if n == 0.0 {
                return Err(cannot_create(
                    "Values in the index key pattern cannot be 0.",
                ));
            }
        } else if !matches!(v, RawBsonRef::String(_)) {
            return Err(cannot_create(format!(
                "Values in v:2 index key pattern cannot be of type {}. Only numbers > 0, numbers \
                 < 0, and strings are allowed.",
                type_name(v)
            )));
        }
        if let RawBsonRef::String(s) = v {
            if s != plugin {
                return Err(cannot_create(
                    "Can't use more than one index plugin for a single index.",
                ));
            }
            if s == "wildcard" {
                return Err(cannot_create(
                    "The key pattern value for an 'wildcard' index must be a non-zero number, \
                     not a string.",
                ));
            }
        }
        if plugin == "columnstore" {
            if key.iter().count() != 1 {
                return Err(cannot_create(
                    "columnstore indexes do not allow compounding",
                ));
            }
            if field != "$**" && !field.ends_with(".$**") {
                return Err(cannot_create("Invalid key name for columnstore indexes"));
            }
        }
        if field.is_empty() {
            return Err(cannot_create("Index keys cannot be an empty field."));
        }
        if field == "$**"
            && (number(v).is_some() || matches!(v, RawBsonRef::String("text" | "columnstore")))
        {
            continue;
        }
        if field == "_fts" && !matches!(v, RawBsonRef::String("text")) {
            return Err(cannot_create(
                "Index key contains an illegal field name: '_fts'",
            ));
        }
        let parts: Vec<&str> = field.split('.').collect();
        let last = parts.len().saturating_sub(1);
        for (i, part) in parts.iter().enumerate() {
            if part.is_empty() {
                return Err(cannot_create("Index keys cannot contain an empty field."));
            }
            if !part.starts_with('$') {
                continue;
            }
            let dbref = i != 0 && matches!(*part, "$db" | "$id" | "$ref");
            let wildcard = i == last
                && *part == "$**"
                && matches!(plugin.as_str(), "wildcard" | "columnstore");
            if !dbref && !wildcard {
                return Err(cannot_create(
                    "Index key contains an illegal field name: field name starts with '$'.",
                ));
            }
        }
    }
    Ok(())
}

/// `validateIndexSpec` (errors unwrapped).
fn validate_index_spec<'a>(
    spec: &'a RawDocument,
    spec_str: &str,
) -> Result<SpecInfo<'a>, IndexError> {
    for el in spec.iter() {
        let (k, _) = el.map_err(|e| err(code::BAD_VALUE, e.to_string()))?;
        if !ALLOWED_FIELDS.contains(&k.as_str()) {
            return Err(err(
                code::INVALID_INDEX_SPEC_OPTION,
                format!(
                    "The field '{}' is not valid for an index specification. Specification: \
                     {spec_str}",
                    k.as_str()
                ),
            ));
        }
    }
    let mut key: Option<&RawDocument> = None;
    let mut name: Option<&str> = None;
    let mut plugin = String::new();
    let mut version: Option<i32> = None;
    let mut has_collation = false;
    let mut has_weights = false;
    let (mut unique, mut prepare_unique) = (false, false);
    let must_be = |field: &str, what: &str, v: RawBsonRef<'_>| {
        err(
            code::TYPE_MISMATCH,
            format!(
                "The field '{field}' must be {what}, but got {}",
                type_name(v)
            ),
        )
    };
    for el in spec.iter() {
        let (k, v) = el.map_err(|e| err(code::BAD_VALUE, e.to_string()))?;
        let field = k.as_str();
        match field {
            "key" => {
                let RawBsonRef::Document(kp) = v else {
                    return Err(must_be("key", "an object", v));
                };
                let mut seen: Vec<&str> = Vec::new();
                for (f, _) in kp.iter().map_while(Result::ok) {
                    if seen.contains(&f.as_str()) {
                        return Err(err(
                            code::BAD_VALUE,
                            format!(
                                "The field '{}' appears multiple times in the index key pattern \
                                 {}",
                                f.as_str(),
                                display::document(kp)
                            ),
                        ));
                    }
                    seen.push(f.as_str());
                }
                plugin = plugin_name(kp);
                validate_key_pattern(kp)?;
                for (_, kv) in kp.iter().map_while(Result::ok) {
                    if matches!(kv, RawBsonRef::String("")) {
                        return Err(cannot_create(
                            "Values in the index key pattern cannot be empty strings",
                        ));
                    }
                }
                if plugin == "wildcard"
                    && kp.iter().count() > 1
                    && kp.get("$**").ok().flatten().is_some()
                    && spec.get("wildcardProjection").ok().flatten().is_none()
                {
                    return Err(cannot_create(
                        "Compound wildcard indexes on all fields must also specify \
                         'wildcardProjection' option",
                    ));
                }
                key = Some(kp);
            }
            "name" => {
                let RawBsonRef::String(s) = v else {
                    return Err(must_be("name", "a string", v));
                };
                name = Some(s);
            }
            // MongoDB names the wrong field in this message.
            "hidden" if !matches!(v, RawBsonRef::Boolean(_)) => {
                return Err(must_be("name", "a bool", v));
            }
            "v" => {
                let Some(n) = number(v) else {
                    return Err(must_be("v", "a number", v));
                };
                let as_int =
                    if n.fract() == 0.0 && n >= f64::from(i32::MIN) && n <= f64::from(i32::MAX) {
                        Some(n as i32)
                    } else {
                        None
                    };
                let Some(iv) = as_int else {
                    return Err(err(
                        code::BAD_VALUE,
                        format!(
                            "Index version must be representable as a 32-bit integer, but got {}",
                            display::value(v)
                        ),
                    ));
                };
                if !matches!(iv, 1 | 2) {
                    return Err(cannot_create(format!(
                        "Invalid index specification {spec_str}; cannot create an index with \
                         v={iv}"
                    )));
                }
                version = Some(iv);
            }
            "originalSpec" => {
                let RawBsonRef::Document(d) = v else {
                    return Err(must_be("originalSpec", "an object", v));
                };
                if d.is_empty() {
                    return Err(err(
                        code::BAD_VALUE,
                        "The field 'originalSpec' cannot be an empty object.",
                    ));
                }
            }
            "collation" => {
                let RawBsonRef::Document(d) = v else {
                    return Err(must_be("collation", "an object", v));
                };
                if d.is_empty() {
                    return Err(err(
                        code::BAD_VALUE,
                        "The field 'collation' cannot be an empty object.",
                    ));
                }
                has_collation = true;
            }
            "partialFilterExpression" => {
                let RawBsonRef::Document(d) = v else {
                    return Err(must_be("partialFilterExpression", "an object", v));
                };
                parse_partial_filter(d)?;
            }
            "wildcardProjection" | "columnstoreProjection" => {
                let wildcard = field == "wildcardProjection";
                let wanted = if wildcard { "wildcard" } else { "columnstore" };
                let kp_plugin = spec
                    .get_document("key")
                    .map(plugin_name)
                    .unwrap_or_default();
                if kp_plugin != wanted {
                    return Err(err(
                        if wildcard {
                            code::BAD_VALUE
                        } else {
                            code::INVALID_INDEX_SPEC_OPTION
                        },
                        format!("The field '{field}' is only allowed in '{wanted}' indexes"),
                    ));
                }
                if !matches!(v, RawBsonRef::Document(_)) {
                    return Err(must_be(field, "a non-empty object", v));
                }
            }
            "weights" => {
                if !matches!(
                    v,
                    RawBsonRef::Document(_) | RawBsonRef::Array(_) | RawBsonRef::String(_)
                ) {
                    return Err(must_be("weights", "an object", v));
                }
                has_weights = true;
            }
            "background" | "unique" | "sparse" | "dropDups" | "prepareUnique" => {
                if !is_number(v) && !matches!(v, RawBsonRef::Boolean(_)) {
                    return Err(err(
                        code::TYPE_MISMATCH,
                        format!(
                            "The field '{field} has value {field}: {}, which is not convertible \
                             to bool",
                            display::value(v)
                        ),
                    ));
                }
                if field == "unique" {
                    unique = true_value(v);
                }
                if field == "prepareUnique" {
                    prepare_unique = true_value(v);
                }
            }
            "default_language" | "language_override" if !matches!(v, RawBsonRef::String(_)) => {
                return Err(must_be(field, "a string", v));
            }
            "2dsphereIndexVersion"
            | "textIndexVersion"
            | "bits"
            | "min"
            | "max"
            | "coarsestIndexedLevel"
            | "finestIndexedLevel"
                if !is_number(v) =>
            {
                return Err(must_be(field, "a number", v));
            }
            _ => {}
        }
    }
    let Some(key) = key else {
        return Err(err(
            code::FAILED_TO_PARSE,
            "The 'key' field is a required property of an index specification",
        ));
    };
    let Some(name) = name else {
        return Err(err(
            code::FAILED_TO_PARSE,
            "The 'name' field is a required property of an index specification",
        ));
    };
    if has_collation && version.is_some_and(|v| v < 2) {
        return Err(cannot_create(format!(
            "Invalid index specification {spec_str}; cannot create an index with the \
             'collation' option and v=1"
        )));
    }
    if plugin != "text" && has_weights {
        return Err(cannot_create(format!(
            "Invalid index specification {spec_str}; the field 'weights' can only be specified \
             with text indexes"
        )));
    }
    if unique && prepare_unique {
        return Err(cannot_create(format!(
            "Invalid index specification {spec_str}; cannot create an index with the 'unique' \
             option and the 'prepareUnique' option"
        )));
    }
    Ok(SpecInfo {
        key,
        name,
        plugin,
        has_version: version.is_some(),
    })
}

/// `IndexDescriptor::isIdIndexPattern`: `{_id: 1}` or `{_id: -1}`.
fn is_id_index_pattern(key: &RawDocument) -> bool {
    let mut it = key.iter().map_while(Result::ok);
    let Some((k, v)) = it.next() else {
        return false;
    };
    if k.as_str() != "_id" || it.next().is_some() {
        return false;
    }
    let n = number(v).map(|n| n.trunc()).unwrap_or(0.0);
    n == 1.0 || n == -1.0
}

/// `validateIdIndexSpec`.
fn validate_id_spec(
    spec: &RawDocument,
    key: &RawDocument,
    normalised: &str,
) -> Result<(), IndexError> {
    for (k, _) in spec.iter().map_while(Result::ok) {
        if !ALLOWED_ID_FIELDS.contains(&k.as_str()) {
            return Err(err(
                code::INVALID_INDEX_SPEC_OPTION,
                format!(
                    "The field '{}' is not valid for an _id index specification. Specification: \
                     {normalised}",
                    k.as_str()
                ),
            ));
        }
    }
    let is_one = key
        .get("_id")
        .ok()
        .flatten()
        .and_then(number)
        .is_some_and(|n| n == 1.0);
    if !is_one {
        return Err(err(
            code::BAD_VALUE,
            format!(
                "The field 'key' for an _id index must be {{_id: 1}}, but got {}",
                display::document(key)
            ),
        ));
    }
    Ok(())
}

/// `IndexCatalogImpl::_isSpecOk` (errors unwrapped).
fn is_spec_ok(spec: &RawDocument, info: &SpecInfo<'_>) -> Result<(), IndexError> {
    if info.name.contains('\0') {
        return Err(cannot_create("index name cannot contain NUL bytes"));
    }
    if info.name.is_empty() {
        return Err(cannot_create("index name cannot be empty"));
    }
    if let Ok(Some(RawBsonRef::Document(c))) = spec.get("collation") {
        let simple = matches!(c.get("locale"), Ok(Some(RawBsonRef::String("simple"))))
            && c.iter().count() == 1;
        if !simple {
            return Err(err(
                code::NOT_IMPLEMENTED,
                "collations other than simple are not supported yet",
            ));
        }
    }
    let sparse = spec.get("sparse").ok().flatten().is_some_and(true_value);
    if let Some(pf) = spec.get("partialFilterExpression").ok().flatten() {
        if sparse {
            return Err(cannot_create(
                "cannot mix \"partialFilterExpression\" and \"sparse\" options",
            ));
        }
        let RawBsonRef::Document(d) = pf else {
            return Err(cannot_create(
                "\"partialFilterExpression\" for an index must be a document",
            ));
        };
        let filter = parse_partial_filter(d)?;
        check_partial_expr(filter.expr(), 0)?;
    }
    if let Some(se) = spec.get("storageEngine").ok().flatten() {
        let RawBsonRef::Document(d) = se else {
            return Err(cannot_create(
                "\"storageEngine\" options must be a document if present",
            ));
        };
        if d.is_empty() {
            return Err(cannot_create(
                "Empty \"storageEngine\" options are invalid. Please remove the field or include \
                 valid options.",
            ));
        }
    }
    Ok(())
}

/// `_checkValidFilterExpressions` with the time-series metric indexes feature (on in 7.0):
/// `$and`, `$or`, `$in`, comparisons, `$exists` and `$type`, at most 4 levels deep.
fn check_partial_expr(e: &Expr, level: usize) -> Result<(), IndexError> {
    if level + 1 > PARTIAL_FILTER_MAX_DEPTH {
        return Err(cannot_create(format!(
            "partialFilterExpression depth may not exceed {PARTIAL_FILTER_MAX_DEPTH}"
        )));
    }
    let unsupported = || {
        cannot_create(format!(
            "Expression not supported in partial index: {}",
            debug_string(e, 0)
        ))
    };
    match e {
        Expr::And(cs) | Expr::Or(cs) => {
            for c in cs {
                check_partial_expr(c, level + 1)?;
            }
            Ok(())
        }
        Expr::Path(p) => match &p.pred {
            Predicate::Cmp(..) | Predicate::Exists | Predicate::Type(_) | Predicate::In(_) => {
                Ok(())
            }
            _ => Err(unsupported()),
        },
        _ => Err(unsupported()),
    }
}

/// An approximation of MongoDB's `MatchExpression::debugString` (four spaces per level).
pub(crate) fn debug_string(e: &Expr, indent: usize) -> String {
    let pad = "    ".repeat(indent);
    match e {
        Expr::And(cs) | Expr::Or(cs) | Expr::Nor(cs) => {
            let name = match e {
                Expr::And(_) => "$and",
                Expr::Or(_) => "$or",
                _ => "$nor",
            };
            let mut s = format!("{pad}{name}\n");
            for c in cs {
                s.push_str(&debug_string(c, indent + 1));
            }
            s
        }
        Expr::Not(c) => format!("{pad}$not\n{}", debug_string(c, indent + 1)),
        Expr::AlwaysTrue => format!("{pad}$alwaysTrue\n"),
        Expr::AlwaysFalse => format!("{pad}$alwaysFalse\n"),
        Expr::Extension(x) => format!("{pad}{}\n", x.kind.operator()),
        Expr::Path(PathExpr { path, pred }) => {
            let body = match pred {
                Predicate::Cmp(op, v) => {
                    let name = match op {
                        CmpOp::Eq => "$eq",
                        CmpOp::Lt => "$lt",
                        CmpOp::Lte => "$lte",
                        CmpOp::Gt => "$gt",
                        CmpOp::Gte => "$gte",
                    };
                    format!("{path} {name} {}", display::value(v.as_raw_bson_ref()))
                }
                Predicate::In(list) => {
                    let mut s = format!("{path} $in [ ");
                    for v in list.values() {
                        s.push_str(&display::value(v));
                        s.push(' ');
                    }
                    for r in list.regexes() {
                        s.push_str(&format!("/{}/{} ", r.pattern(), r.options()));
                    }
                    s.push(']');
                    s
                }
                Predicate::Regex(r) => format!("{path} regex /{}/{}", r.pattern(), r.options()),
                Predicate::Exists => format!("{path} exists"),
                Predicate::Type(t) => format!("{path} type: {:?}", t.codes),
                Predicate::Mod { divisor, remainder } => {
                    format!("{path} mod {divisor} % x == {remainder}")
                }
                Predicate::Bits(b) => format!("{path} {:?}: {:?}", b.op, b.mask),
                Predicate::Size(n) => format!("{path} $size : {n}"),
                Predicate::Geo(_) => format!("{path} GEO"),
                Predicate::Near(_) => format!("{path} GEONEAR"),
                Predicate::ElemMatchObject(sub) => {
                    return format!(
                        "{pad}{path} $elemMatch (obj)\n{}",
                        debug_string(sub, indent + 1)
                    );
                }
                Predicate::ElemMatchValue(subs) => {
                    let mut s = format!("{pad}{path} $elemMatch (value)\n");
                    for c in subs {
                        s.push_str(&debug_string(c, indent + 1));
                    }
                    return s;
                }
            };
            format!("{pad}{body}\n")
        }
    }
}

/// The access methods' own checks (hashed), then what Cairn does not implement.
fn access_method_checks(spec: &RawDocument, info: &SpecInfo<'_>) -> Result<(), IndexError> {
    if info.plugin == "hashed" {
        let unique = spec.get("unique").ok().flatten().is_some_and(true_value);
        if unique {
            return Err(err(
                code::HASHED_UNIQUE,
                "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
            ));
        }
        let hashed = info
            .key
            .iter()
            .map_while(Result::ok)
            .filter(|(_, v)| matches!(v, RawBsonRef::String(_)))
            .count();
        if hashed != 1 {
            return Err(err(
                code::HASHED_TWICE,
                format!(
                    "A maximum of one index field is allowed to be hashed but found {hashed} for \
                     'key' {}",
                    display::document(info.key)
                ),
            ));
        }
    }
    if info.plugin == "2dsphere"
        && let Some(v) = spec.get("2dsphereIndexVersion").ok().flatten()
    {
        let n = number(v).unwrap_or(0.0);
        if !(n == 1.0 || n == 2.0 || n == 3.0) {
            return Err(err(
                code::CANNOT_CREATE_INDEX,
                format!(
                    "unsupported geo index version {{ 2dsphereIndexVersion : {} }}, only \
                     support versions: [1,2,3]",
                    display::value(v)
                ),
            ));
        }
    }
    if info.plugin == "2d" {
        let mut fields = info.key.iter().map_while(Result::ok);
        if !fields
            .next()
            .is_some_and(|(_, v)| matches!(v, RawBsonRef::String("2d")))
        {
            return Err(err(16801, "2d has to be first in index"));
        }
        if fields.any(|(_, v)| matches!(v, RawBsonRef::String("2d"))) {
            return Err(err(16800, "can't have 2 geo fields"));
        }
        if let Some(b) = spec.get("bits").ok().flatten().and_then(number)
            && !(1.0..=32.0).contains(&b)
        {
            return Err(err(
                13028,
                format!("bits in geo index must be between 1 and 32, but {b} was specified"),
            ));
        }
        let (_, min, max) = super::geo_keys::two_d_params(spec);
        if min >= max {
            return Err(err(13027, "need a max value > min value"));
        }
    }
    match info.plugin.as_str() {
        "" | "hashed" | "2d" | "2dsphere" => Ok(()),
        other => Err(err(
            code::NOT_IMPLEMENTED,
            format!("{other} indexes are not supported yet"),
        )),
    }
}
