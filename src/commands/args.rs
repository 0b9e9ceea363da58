//! Argument parsing shared by the commands, in the manner of MongoDB's IDL: each function
//! reads one field of a command body with the type rules, conversions, range checks and error
//! messages the generated parsers give (TypeMismatch 14 for a wrong type, 51024 for a value
//! outside a declared range, InvalidBSON 22 for an unreadable body). Command files call these
//! instead of each other, so one rule has one implementation.
//!
//! Map: [`type_name`], [`truthy`] (BSON helpers); [`collection_arg`],
//! [`collection_arg_parsed`] (the command's namespace); [`opt_count`], [`opt_safe_int64`],
//! [`opt_document`], [`opt_strict_bool`], [`opt_bool`] (optional typed fields);
//! [`check_range`], [`check_below`] (IDL validators); [`append_number`], [`number_bson`]
//! (numbers stored as int when they fit, as MongoDB's `appendNumber`); [`capped_limits`],
//! [`capped_size`], [`round_capped_size`], [`capped_max`] (capped limits, for `create`,
//! `collMod`, `convertToCapped`, `cloneCollectionAsCapped`);
//! [`pre_and_post_images`], [`check_images_allowed`] (`changeStreamPreAndPostImages`);
//! [`hint_value`], [`parse_hint`] (`hint`); [`parse_scale`] (`scale` of the statistics
//! commands); [`check_batch_size`] with [`MAX_BATCH`] (write batches); [`command_string`],
//! [`opt_string`], [`opt_string_array`] (string parameters, e.g. of the user commands).
//!
//! The optional-field readers take [`Args`]: the raw body, or its [`super::Parsed`] fields
//! when a command reads many of them (one walk of the body instead of one per field).

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use cairn_query::plan::Hint;

use super::{Args, Request};
use crate::error::{CommandError, ErrorCode};

/// The BSON type name MongoDB uses in error messages.
pub fn type_name(v: &RawBsonRef<'_>) -> &'static str {
    cairn_storage::display::type_name(*v)
}

/// MongoDB's truthiness for flag fields: numbers are true unless zero, booleans as is,
/// null/undefined false, anything else true.
pub fn truthy(v: &RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Boolean(b) => *b,
        RawBsonRef::Int32(i) => *i != 0,
        RawBsonRef::Int64(i) => *i != 0,
        RawBsonRef::Double(d) => *d != 0.0,
        RawBsonRef::Null | RawBsonRef::Undefined => false,
        _ => true,
    }
}

/// The collection name a command names in its first field (`{find: "coll"}`), checked as
/// MongoDB checks it (73 for a non-string or invalid name).
pub fn collection_arg<'a>(req: &Request<'a>) -> Result<&'a str, CommandError> {
    let first = req
        .body
        .iter()
        .next()
        .map(|f| f.map(|(k, v)| (k.as_str(), v)));
    collection_name(req.db, first.map(|f| f.map_err(|_| ())))
}

/// [`collection_arg`] from the body's [`super::Parsed`] table (its first field is already
/// read).
pub fn collection_arg_parsed<'a>(
    req: &Request<'a>,
    parsed: &super::Parsed<'a>,
) -> Result<&'a str, CommandError> {
    collection_name(req.db, parsed.first().map(|f| f.map_err(|_| ())))
}

/// The rule of [`collection_arg`] over the body's first field (`Err` when unreadable).
fn collection_name<'a>(
    db: &str,
    first: Option<Result<(&'a str, RawBsonRef<'a>), ()>>,
) -> Result<&'a str, CommandError> {
    match first {
        Some(Ok((_, RawBsonRef::String(name)))) => {
            cairn_storage::namespace::check_collection_name(name).map_err(|_| {
                CommandError::new(
                    ErrorCode::InvalidNamespace,
                    format!("Invalid namespace specified '{db}.{name}'"),
                )
            })?;
            Ok(name)
        }
        Some(Ok((_, other))) => Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("collection name has invalid type {}", type_name(&other)),
        )),
        _ => Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            "no collection name",
        )),
    }
}

/// An optional non-negative integer field (`batchSize`, `limit`, `skip`): numbers are
/// truncated; negatives are 51024; other types 14.
#[inline]
pub fn opt_count<'a>(
    body: impl Args<'a>,
    cmd: &str,
    field: &str,
) -> Result<Option<i64>, CommandError> {
    let v = match body.arg(field)? {
        None | Some(RawBsonRef::Null) => return Ok(None),
        Some(v) => v,
    };
    let n = safe_int64(cmd, field, v)?;
    check_range(field, n, Some(0), None)?;
    Ok(Some(n))
}

/// An optional document field (14 when present with another type).
#[inline]
pub fn opt_document<'a>(
    body: impl Args<'a>,
    cmd: &str,
    field: &str,
) -> Result<Option<&'a RawDocument>, CommandError> {
    match body.arg(field)? {
        None => Ok(None),
        Some(RawBsonRef::Document(d)) => Ok(Some(d)),
        Some(other) => Err(CommandError::wrong_type(
            &format!("{cmd}.{field}"),
            type_name(&other),
            "object",
        )),
    }
}

/// An optional strictly boolean field (`ordered`, `singleBatch`...).
#[inline]
pub fn opt_strict_bool<'a>(
    body: impl Args<'a>,
    cmd: &str,
    field: &str,
) -> Result<Option<bool>, CommandError> {
    match body.arg(field)? {
        None => Ok(None),
        Some(RawBsonRef::Boolean(b)) => Ok(Some(b)),
        Some(other) => Err(CommandError::wrong_type(
            &format!("{cmd}.{field}"),
            type_name(&other),
            "bool",
        )),
    }
}

/// Reads an optional boolean-ish IDL field (`safeBool`: bool or number).
#[inline]
pub fn opt_bool<'a>(
    body: impl Args<'a>,
    cmd: &str,
    field: &str,
) -> Result<Option<bool>, CommandError> {
    match body.arg(field)? {
        None => Ok(None),
        Some(
            v @ (RawBsonRef::Boolean(_)
            | RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_)),
        ) => Ok(Some(truthy(&v))),
        Some(v) => Err(CommandError::wrong_type(
            &format!("{cmd}.{field}"),
            type_name(&v),
            "bool",
        )),
    }
}

/// The IDL's type error for a `safeInt64` field.
fn not_a_number(cmd: &str, field: &str, v: &RawBsonRef<'_>) -> CommandError {
    CommandError::new(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field '{cmd}.{field}' is the wrong type '{}', expected types '[long, int, decimal, double']",
            type_name(v)
        ),
    )
}

/// A `safeInt64` value: any number, truncated toward zero (14 otherwise).
pub fn safe_int64(cmd: &str, field: &str, v: RawBsonRef<'_>) -> Result<i64, CommandError> {
    Ok(match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) if d.is_nan() => 0,
        RawBsonRef::Double(d) => d as i64,
        RawBsonRef::Decimal128(d) => d.to_string().parse::<f64>().map(|f| f as i64).unwrap_or(0),
        other => return Err(not_a_number(cmd, field, &other)),
    })
}

/// An optional `safeInt64` field.
pub fn opt_safe_int64<'a>(
    body: impl Args<'a>,
    cmd: &str,
    field: &str,
) -> Result<Option<i64>, CommandError> {
    match body.arg(field)? {
        None => Ok(None),
        Some(v) => safe_int64(cmd, field, v).map(Some),
    }
}

/// The IDL's `gte`/`lte` validators (51024).
pub fn check_range(
    field: &str,
    n: i64,
    min: Option<i64>,
    max: Option<i64>,
) -> Result<(), CommandError> {
    let fail = |op: &str, limit: i64| {
        Err(CommandError::new(
            ErrorCode::Location(51024),
            format!("BSON field '{field}' value must be {op} {limit}, actual value '{n}'"),
        ))
    };
    match (min, max) {
        (Some(lo), _) if n < lo => fail(">=", lo),
        (_, Some(hi)) if n > hi => fail("<=", hi),
        _ => Ok(()),
    }
}

/// The IDL's `lt` validator (51024).
pub fn check_below(field: &str, n: i64, limit: i64) -> Result<(), CommandError> {
    if n < limit {
        return Ok(());
    }
    Err(CommandError::new(
        ErrorCode::Location(51024),
        format!("BSON field '{field}' value must be < {limit}, actual value '{n}'"),
    ))
}

/// Appends `n` as an int when it fits in ±2^30, else as a long (MongoDB's `appendNumber`).
pub fn append_number(d: &mut RawDocumentBuf, key: &bson::raw::CStr, n: i64) {
    d.append(key, number_bson(n));
}

/// `n` as MongoDB's `appendNumber` stores it: an int within ±2^30, a long beyond.
pub fn number_bson(n: i64) -> RawBson {
    if n.abs() < (1 << 30) {
        RawBson::Int32(n as i32)
    } else {
        RawBson::Int64(n)
    }
}

/// The largest capped collection: 1 PB.
pub const ONE_PB: i64 = 1 << 50;

/// A capped collection's size as MongoDB stores it: at least 4096, else rounded up to a
/// multiple of 256 (`CollectionOptions::checkAndAdjustCappedSize`).
pub fn round_capped_size(size: i64) -> i64 {
    if size <= 4096 {
        4096
    } else {
        (size.saturating_add(0xff)) & !0xff
    }
}

/// `size` of a capped collection at `create`/`convertToCapped`: a number, at least 1 (51024),
/// at most 1 PB (2), rounded as stored.
pub fn capped_size(cmd: &str, v: RawBsonRef<'_>) -> Result<i64, CommandError> {
    let size = safe_int64(cmd, "size", v)?;
    check_range("size", size, Some(1), None)?;
    if size > ONE_PB {
        return Err(CommandError::bad_value("size cannot exceed 1 PB"));
    }
    Ok(round_capped_size(size))
}

/// `max` of a capped collection: below 2^31 (2); 0 or negative means no limit (`None`).
pub fn capped_max(cmd: &str, v: RawBsonRef<'_>) -> Result<Option<i64>, CommandError> {
    let m = safe_int64(cmd, "max", v)?;
    if m >= 1 << 31 {
        return Err(CommandError::bad_value(
            "max in a capped collection has to be < 2^31 or not set",
        ));
    }
    Ok(Some(m).filter(|m| *m > 0))
}

/// A capped collection's `size` and `max` as stored ([`capped_size`], [`capped_max`]).
pub fn capped_limits(
    cmd: &str,
    size: RawBsonRef<'_>,
    max: Option<RawBsonRef<'_>>,
) -> Result<(i64, Option<i64>), CommandError> {
    let size = capped_size(cmd, size)?;
    let max = match max {
        Some(v) => capped_max(cmd, v)?,
        None => None,
    };
    Ok((size, max))
}

/// `changeStreamPreAndPostImages: {enabled: <bool>}` (the IDL struct: `enabled` required and
/// strictly boolean, no other field), as `create` and `collMod` parse it.
pub fn pre_and_post_images(v: RawBsonRef<'_>, cmd: &str) -> Result<bool, CommandError> {
    let RawBsonRef::Document(d) = v else {
        return Err(CommandError::wrong_type(
            &format!("{cmd}.changeStreamPreAndPostImages"),
            type_name(&v),
            "object",
        ));
    };
    // The generated parser walks the fields in order: a wrong type or an unknown field fails
    // where it stands; a missing `enabled` fails at the end.
    let mut enabled = None;
    for (k, val) in d.iter().flatten() {
        match (k.as_str(), val) {
            ("enabled", RawBsonRef::Boolean(b)) => enabled = Some(b),
            ("enabled", other) => {
                return Err(CommandError::wrong_type(
                    "changeStreamPreAndPostImages.enabled",
                    type_name(&other),
                    "bool",
                ));
            }
            (other, _) => {
                return Err(CommandError::unknown_field(
                    "changeStreamPreAndPostImages",
                    other,
                ));
            }
        }
    }
    enabled.ok_or_else(|| CommandError::missing_field("changeStreamPreAndPostImages.enabled"))
}

/// Pre- and post-images cannot be enabled in `admin`, `local` or `config` (72).
pub fn check_images_allowed(db: &str) -> Result<(), CommandError> {
    if matches!(db, "admin" | "local" | "config") {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            format!(
                "changeStreamPreAndPostImages collection option is not supported on the {db} database"
            ),
        ));
    }
    Ok(())
}

/// Parses a `hint` value given as `field` (e.g. `find.hint`): a string or an object.
pub fn hint_value(v: RawBsonRef<'_>, field: &str) -> Result<Hint, CommandError> {
    match v {
        RawBsonRef::String(_) | RawBsonRef::Document(_) => Ok(Hint::parse(Some(v))?),
        other => Err(CommandError::wrong_type(field, type_name(&other), "object")),
    }
}

/// Parses the `hint` field of a command (none when absent).
pub fn parse_hint<'a>(body: impl Args<'a>, cmd: &str) -> Result<Hint, CommandError> {
    match body.arg("hint") {
        Ok(Some(v)) => hint_value(v, &format!("{cmd}.hint")),
        _ => Ok(Hint::None),
    }
}

/// Parses `scale` as MongoDB does: numbers truncated, < 1 is 51024, null means 1.
pub fn parse_scale(body: &bson::RawDocument, cmd: &str) -> Result<i64, CommandError> {
    let n = match body.get("scale") {
        Ok(None) | Ok(Some(RawBsonRef::Null)) => return Ok(1),
        Ok(Some(RawBsonRef::Int32(i))) => i64::from(i),
        Ok(Some(RawBsonRef::Int64(i))) => i,
        Ok(Some(RawBsonRef::Double(d))) => {
            if d >= i32::MAX as f64 {
                i64::from(i32::MAX)
            } else {
                d as i64
            }
        }
        Ok(Some(other)) => {
            return Err(CommandError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field '{cmd}.scale' is the wrong type '{}', expected types '[long, int, decimal, double']",
                    type_name(&other)
                ),
            ));
        }
        Err(e) => return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    };
    if n < 1 {
        return Err(CommandError::new(
            ErrorCode::Location(51024),
            format!("BSON field 'scale' value must be >= 1, actual value '{n}'"),
        ));
    }
    Ok(n.min(i64::from(i32::MAX)))
}

/// MongoDB's maxWriteBatchSize.
pub const MAX_BATCH: usize = 100_000;

/// InvalidLength (16) unless a write batch holds 1 to [`MAX_BATCH`] statements.
pub fn check_batch_size(count: usize) -> Result<(), CommandError> {
    if count == 0 || count > MAX_BATCH {
        return Err(CommandError::new(
            ErrorCode::InvalidLength,
            format!("Write batch sizes must be between 1 and {MAX_BATCH}. Got {count} operations."),
        ));
    }
    Ok(())
}

/// The command's own parameter as a string (`{createUser: "name"}`), 14 otherwise.
pub fn command_string<'a>(req: &Request<'a>, cmd: &str) -> Result<&'a str, CommandError> {
    match req.body.iter().next() {
        Some(Ok((_, RawBsonRef::String(s)))) => Ok(s),
        Some(Ok((_, other))) => Err(CommandError::wrong_type(
            &format!("{cmd}.{cmd}"),
            type_name(&other),
            "string",
        )),
        _ => Err(CommandError::missing_field(&format!("{cmd}.{cmd}"))),
    }
}

/// An optional string field (14 when present with another type).
pub fn opt_string<'a>(
    body: &'a RawDocument,
    cmd: &str,
    field: &str,
) -> Result<Option<&'a str>, CommandError> {
    match body.get(field) {
        Ok(None) => Ok(None),
        Ok(Some(RawBsonRef::String(s))) => Ok(Some(s)),
        Ok(Some(other)) => Err(CommandError::wrong_type(
            &format!("{cmd}.{field}"),
            type_name(&other),
            "string",
        )),
        Err(e) => Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    }
}

/// An optional array of strings (14 for the array or an element of another type).
pub fn opt_string_array<'a>(
    body: &'a RawDocument,
    cmd: &str,
    field: &str,
) -> Result<Option<Vec<&'a str>>, CommandError> {
    let arr = match body.get(field) {
        Ok(None) => return Ok(None),
        Ok(Some(RawBsonRef::Array(a))) => a,
        Ok(Some(other)) => {
            return Err(CommandError::wrong_type(
                &format!("{cmd}.{field}"),
                type_name(&other),
                "array",
            ));
        }
        Err(e) => return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    };
    let mut out = Vec::new();
    for (i, el) in arr.into_iter().enumerate() {
        match el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))? {
            RawBsonRef::String(s) => out.push(s),
            other => {
                return Err(CommandError::wrong_type(
                    &format!("{cmd}.{field}.{i}"),
                    type_name(&other),
                    "string",
                ));
            }
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn collection_from_the_parsed_table_as_from_the_body() {
        let mut bad = rawdoc! {"find": "c"}.into_bytes();
        bad[4] = 0x77; // not an element type
        let bodies = [
            rawdoc! {"find": "c", "$db": "d"},
            rawdoc! {"find": "", "$db": "d"},
            rawdoc! {"find": ".c"},
            rawdoc! {"find": 1},
            rawdoc! {},
            RawDocumentBuf::from_bytes(bad).unwrap(),
        ];
        for body in &bodies {
            let req = Request {
                name: "find",
                db: "d",
                body,
                exhaust_allowed: false,
            };
            let parsed = super::super::Parsed::parse(body);
            let (a, b) = (collection_arg(&req), collection_arg_parsed(&req, &parsed));
            match (a, b) {
                (Ok(a), Ok(b)) => assert_eq!(a, b),
                (Err(a), Err(b)) => {
                    assert_eq!((a.code.code(), a.message), (b.code.code(), b.message))
                }
                (a, b) => panic!("{body:?}: {a:?} vs {b:?}"),
            }
        }
    }

    #[test]
    fn capped_sizes_round_as_mongodb_stores_them() {
        for (given, stored) in [
            (1, 4096),
            (4096, 4096),
            (4097, 4352),
            (5000, 5120),
            (5120, 5120),
        ] {
            assert_eq!(round_capped_size(given), stored, "{given}");
        }
        assert_eq!(
            capped_size("create", RawBsonRef::Double(4097.9)).unwrap(),
            4352
        );
        assert_eq!(
            capped_size("create", RawBsonRef::Int32(0))
                .unwrap_err()
                .code
                .code(),
            51024
        );
        assert_eq!(
            capped_size("create", RawBsonRef::Int64(ONE_PB + 1))
                .unwrap_err()
                .code
                .code(),
            2
        );
        assert_eq!(
            capped_size("create", RawBsonRef::String("x"))
                .unwrap_err()
                .code
                .code(),
            14
        );
    }

    #[test]
    fn capped_max_zero_means_none() {
        assert_eq!(capped_max("create", RawBsonRef::Int32(0)).unwrap(), None);
        assert_eq!(capped_max("create", RawBsonRef::Int32(-3)).unwrap(), None);
        assert_eq!(capped_max("create", RawBsonRef::Int32(7)).unwrap(), Some(7));
        assert_eq!(
            capped_max("create", RawBsonRef::Int64(1 << 31))
                .unwrap_err()
                .code
                .code(),
            2
        );
    }

    #[test]
    fn idl_range_messages() {
        let e = check_range("cappedSize", 0, Some(1), Some(ONE_PB)).unwrap_err();
        assert_eq!(e.code.code(), 51024);
        assert_eq!(
            e.message,
            "BSON field 'cappedSize' value must be >= 1, actual value '0'"
        );
        let e = check_below("cappedMax", 1 << 31, 1 << 31).unwrap_err();
        assert_eq!(
            e.message,
            "BSON field 'cappedMax' value must be < 2147483648, actual value '2147483648'"
        );
    }

    #[test]
    fn numbers_stored_as_int_when_they_fit() {
        assert_eq!(number_bson(5), RawBson::Int32(5));
        assert_eq!(number_bson(1 << 30), RawBson::Int64(1 << 30));
        assert_eq!(number_bson(-(1 << 30) + 1), RawBson::Int32(-(1 << 30) + 1));
    }

    #[test]
    fn images_option_shape() {
        let d = rawdoc! {"v": {"enabled": true}};
        assert!(pre_and_post_images(d.get("v").unwrap().unwrap(), "collMod").unwrap());
        for (bad, code) in [
            (rawdoc! {"v": {}}, 40414),
            (rawdoc! {"v": {"enabled": 1}}, 14),
            (rawdoc! {"v": {"enabled": true, "x": 1}}, 40415),
            (rawdoc! {"v": {"x": 1, "enabled": 1}}, 40415),
            (rawdoc! {"v": {"enabled": 1, "x": 1}}, 14),
            (rawdoc! {"v": true}, 14),
        ] {
            let e = pre_and_post_images(bad.get("v").unwrap().unwrap(), "collMod").unwrap_err();
            assert_eq!(e.code.code(), code, "{bad:?}");
        }
        assert_eq!(check_images_allowed("local").unwrap_err().code.code(), 72);
        assert!(check_images_allowed("app").is_ok());
    }
}
