//! Secondary indexes, query side: which entries a document produces ([`keys`]), whether an
//! index specification is valid ([`spec`]), and which parts of an index a filter needs
//! ([`bounds`]).
//!
//! The storage layer owns the entry layout (`K1 … Kn E(_id)`, see
//! `cairn_storage::index`) and calls back into [`QueryKeyGen`] (its `IndexKeyGen`) to validate
//! specifications and compute entries. The planner uses [`bounds::bounds_for`] /
//! [`bounds::bounds_for_index`] to turn a filter into byte ranges over that layout.
//!
//! Sources: MongoDB 7.0 `btree_key_generator.cpp`, `expression_keys_private.cpp`,
//! `hasher.cpp`, `index_key_validate.cpp`, `index_catalog_impl.cpp`,
//! `index_bounds_builder.cpp`, `interval.cpp`, `index_bounds.cpp`, `planner_ixselect.cpp`.
//!
//! Invariants: nothing here panics on any input (malformed BSON, hostile filters, huge
//! arrays); every error carries MongoDB's code ([`IndexError`]); the ranges produced by
//! [`bounds::IndexBounds::key_ranges`] contain the entry of every document that matches the
//! filter the bounds were built from (soundness), whatever the index's contents.

pub mod bounds;
pub mod geo_bounds;
pub mod geo_keys;
pub(crate) mod hash;
pub mod keys;
pub mod spec;

use std::fmt;

use bson::{RawBsonRef, RawDocument};
use cairn_storage::StorageError;

pub use bounds::{
    FieldBounds, IndexBounds, Interval, bounds_for, bounds_for_index, bounds_for_index_with,
    index_sort_direction,
};
pub use keys::QueryKeyGen;
pub use spec::validate_spec;

/// The hashed-index key of a value (MongoDB's `convertShardKeyToHashed`): MD5-based, numbers
/// hash by their 64-bit integer value.
pub fn hashed_value(v: RawBsonRef<'_>) -> i64 {
    hash::hash64(v)
}

/// An index error with MongoDB's code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexError {
    /// MongoDB's error code (67 CannotCreateIndex, 171 CannotIndexParallelArrays, …).
    pub code: i32,
    /// MongoDB's message.
    pub message: String,
}

/// Codes used here.
pub mod code {
    /// BadValue.
    pub const BAD_VALUE: i32 = 2;
    /// FailedToParse.
    pub const FAILED_TO_PARSE: i32 = 9;
    /// TypeMismatch.
    pub const TYPE_MISMATCH: i32 = 14;
    /// CannotCreateIndex.
    pub const CANNOT_CREATE_INDEX: i32 = 67;
    /// CannotIndexParallelArrays.
    pub const PARALLEL_ARRAYS: i32 = 171;
    /// InvalidIndexSpecificationOption.
    pub const INVALID_INDEX_SPEC_OPTION: i32 = 197;
    /// QueryFeatureNotAllowed.
    pub const QUERY_FEATURE_NOT_ALLOWED: i32 = 224;
    /// NotImplemented.
    pub const NOT_IMPLEMENTED: i32 = 238;
    /// Ambiguous field name in an array (positional key patterns).
    pub const AMBIGUOUS_FIELD: i32 = 16746;
    /// Hashed index component met an array.
    pub const HASHED_ARRAY: i32 = 16766;
    /// `unique` on a hashed index.
    pub const HASHED_UNIQUE: i32 = 16764;
    /// More than one hashed component.
    pub const HASHED_TWICE: i32 = 31303;
}

impl IndexError {
    /// An error with `code` and `message`.
    pub fn new(code: i32, message: impl Into<String>) -> IndexError {
        IndexError {
            code,
            message: message.into(),
        }
    }

    /// The nearest existing [`StorageError`] variant (the code is lost except through the
    /// variant: BadValue 2, InvalidOptions 72, NotImplemented 238). Until storage grows a
    /// variant carrying the code, CannotCreateIndex (67), InvalidIndexSpecificationOption
    /// (197), 31303 and 16764 surface as InvalidOptions, and the document errors (171, 16746,
    /// 16766) as BadValue.
    pub fn to_storage(&self) -> StorageError {
        let m = self.message.clone();
        match self.code {
            code::NOT_IMPLEMENTED => StorageError::NotImplemented(m),
            code => StorageError::IndexConflict { code, message: m },
        }
    }
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for IndexError {}

impl From<IndexError> for StorageError {
    fn from(e: IndexError) -> StorageError {
        e.to_storage()
    }
}

/// How one key-pattern component orders or transforms its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// `1` (any number `>= 0`, and string values other than `"hashed"`).
    Ascending,
    /// `-1` (any negative number, Decimal128 included).
    Descending,
    /// `"hashed"`.
    Hashed,
}

/// One component of a key pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyComponent {
    /// The dotted path.
    pub path: String,
    /// Its kind.
    pub kind: KeyKind,
}

impl KeyComponent {
    /// True for a descending component (`-1`).
    pub fn descending(&self) -> bool {
        self.kind == KeyKind::Descending
    }
}

/// The components of a key pattern, in order. Directions follow MongoDB's `Ordering`
/// (`number() >= 0` is ascending), so `NumberDecimal("-1")` is descending.
pub fn key_components(pattern: &RawDocument) -> Vec<KeyComponent> {
    pattern
        .iter()
        .map_while(Result::ok)
        .map(|(k, v)| KeyComponent {
            path: k.as_str().to_string(),
            kind: match v {
                RawBsonRef::String("hashed") => KeyKind::Hashed,
                v if number(v).is_some_and(|n| n < 0.0) => KeyKind::Descending,
                _ => KeyKind::Ascending,
            },
        })
        .collect()
}

/// A BSON number as a double (`BSONElement::number()`), `None` for other types.
pub(crate) fn number(v: RawBsonRef<'_>) -> Option<f64> {
    match v {
        RawBsonRef::Int32(i) => Some(f64::from(i)),
        RawBsonRef::Int64(i) => Some(i as f64),
        RawBsonRef::Double(d) => Some(d),
        RawBsonRef::Decimal128(d) => Some(decimal_to_f64(d)),
        _ => None,
    }
}

fn decimal_to_f64(d: bson::Decimal128) -> f64 {
    use cairn_storage::decimal::Decimal;
    match Decimal::from_decimal128(d) {
        Decimal::NaN => f64::NAN,
        Decimal::Infinite { negative } => {
            if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        Decimal::Finite {
            negative,
            coefficient,
            exponent,
        } => {
            let s = format!(
                "{}{coefficient}e{exponent}",
                if negative { "-" } else { "" }
            );
            s.parse().unwrap_or(f64::NAN)
        }
    }
}
