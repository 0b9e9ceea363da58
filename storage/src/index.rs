//! Secondary indexes: metadata, entry layout, and the key-generation seam.
//!
//! Each secondary index has its own space. An entry's key is
//! ```text
//! K1 K2 … Kn E(_id)
//! ```
//! where `Ki` is `E(vi)` (see [`crate::keys`]) for an ascending component and its
//! byte-inverted form for a descending one, so a byte-order scan of the space walks the index
//! in key-pattern order; `E(_id)` makes entries unique and tells which document they point
//! to. The value holds the entry's original values as a BSON document `{"0": v1, …}` so a
//! covered query can return them with their types (the key has lost `1` vs `1.0`). The
//! `_id_` index is the document space itself (documents are keyed by `E(_id)`), so it has no
//! space of its own.
//!
//! Which keys a document produces (dotted paths through arrays, one entry per array element,
//! the product for compound indexes, null for missing fields, sparse and partial indexes,
//! hashed components) is MongoDB query semantics, so the query layer computes them through
//! the [`IndexKeyGen`] trait the store is given at open. Invariants: entries are written and
//! removed in the same transaction as their document; an index in state
//! [`IndexState::Building`] is maintained by writers but not used to answer queries until
//! its build completes.
//!
//! Specifications are kept as MongoDB's catalog keeps them ([`IndexMeta::spec`]) and reported
//! by `listIndexes` in the canonical form of its reply type ([`list_spec`]: MongoDB 7.0's
//! `ListIndexesReplyItem` field order and types).

use bson::raw::cstr;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::engine::SpaceId;
use crate::error::{Result, StorageError};

/// The state of an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexState {
    /// Complete: maintained and usable by queries.
    Ready,
    /// Being built from the existing documents: maintained by writers, not yet usable.
    Building,
}

/// The options of a specification a query planner reads of every index on every query,
/// from one walk of it ([`IndexMeta::options`]); each field answers what its accessor
/// answers alone.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SpecOptions<'a> {
    /// [`IndexMeta::key_pattern`].
    pub key_pattern: Option<&'a RawDocument>,
    /// [`IndexMeta::is_hidden`].
    pub hidden: bool,
    /// [`IndexMeta::is_sparse`].
    pub sparse: bool,
    /// [`IndexMeta::partial_filter`].
    pub partial_filter: Option<&'a RawDocument>,
}

/// One index of a collection.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexMeta {
    /// Its name.
    pub name: String,
    /// The specification as MongoDB's catalog holds it (the index's `infoObj`, shown in error
    /// messages): `{v, [unique: true], [hidden: true], [prepareUnique: true], key, name,
    /// …other options}` (see `crate::index_ops`). `listIndexes` shows
    /// [`IndexMeta::list_spec`].
    pub spec: RawDocumentBuf,
    /// Its space (0 for `_id_`, which is the document space).
    pub space: SpaceId,
    /// Ready or building.
    pub state: IndexState,
    /// Whether some document produced more than one entry (an array on an indexed path).
    pub multikey: bool,
}

/// Whether a Decimal128 is below zero (negative and not a zero or NaN), as a key-pattern
/// direction reads it.
fn decimal_is_negative(d: bson::Decimal128) -> bool {
    let s = d.to_string();
    let Some(mag) = s.strip_prefix('-') else {
        return false;
    };
    let mantissa = mag.split(['E', 'e']).next().unwrap_or("");
    mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b))
}

impl IndexMeta {
    /// The `_id_` index.
    pub fn id_index() -> IndexMeta {
        IndexMeta {
            name: "_id_".into(),
            spec: rawdoc! {"v": 2, "key": {"_id": 1}, "name": "_id_"},
            space: 0,
            state: IndexState::Ready,
            multikey: false,
        }
    }

    /// True for `_id_`.
    pub fn is_id(&self) -> bool {
        self.name == "_id_"
    }

    /// The key pattern (`{a: 1, b: -1}`); every stored spec has one.
    pub fn key_pattern(&self) -> Option<&RawDocument> {
        self.spec.get_document("key").ok()
    }

    /// The key pattern's fields and whether each is descending (`-1`) — hashed and other
    /// string-valued components count as ascending.
    pub fn fields(&self) -> Vec<(String, bool)> {
        self.key_pattern()
            .into_iter()
            .flat_map(|p| p.iter().flatten())
            .map(|(k, v)| {
                let desc = match v {
                    RawBsonRef::Int32(i) => i < 0,
                    RawBsonRef::Int64(i) => i < 0,
                    RawBsonRef::Double(d) => d < 0.0,
                    RawBsonRef::Decimal128(d) => decimal_is_negative(d),
                    _ => false,
                };
                (k.as_str().to_string(), desc)
            })
            .collect()
    }

    /// A boolean option as MongoDB reads it (`BSONElement::trueValue`: `sparse: 1` is set).
    fn flag(&self, name: &str) -> bool {
        // Most specifications have none of the flags: one scan of the names says so (writers
        // ask `is_unique` of every index on every write).
        crate::doc::may_have_field(self.spec.as_bytes(), name.as_bytes())
            && self.spec.get(name).ok().flatten().is_some_and(true_value)
    }

    /// `unique: true` (always true for `_id_`).
    pub fn is_unique(&self) -> bool {
        self.is_id() || self.flag("unique")
    }

    /// `sparse: true`.
    pub fn is_sparse(&self) -> bool {
        self.flag("sparse")
    }

    /// `hidden: true`.
    pub fn is_hidden(&self) -> bool {
        self.flag("hidden")
    }

    /// [`IndexMeta::key_pattern`], [`IndexMeta::is_hidden`], [`IndexMeta::is_sparse`] and
    /// [`IndexMeta::partial_filter`] from one walk of the specification (each accessor walks
    /// it up to its own field, the flags of absent options to the end). Same answers: the
    /// first field of each name decides, and nothing past a malformed element is read (where
    /// `RawDocument::get` errs).
    pub fn options(&self) -> SpecOptions<'_> {
        self.plain_options()
            .unwrap_or_else(|| self.walked_options())
    }

    /// [`IndexMeta::options`] of the usual specification — `v`, `key`, `name` and other
    /// numbers, strings and documents, none of `hidden`, `sparse`, `partialFilterExpression` —
    /// by the light element walk ([`crate::elements`]), checking what `RawDocument::get`
    /// checks on its way (UTF-8 keys, value lengths, framed documents) without building each
    /// value. `None` for anything else, which [`IndexMeta::walked_options`] answers.
    fn plain_options(&self) -> Option<SpecOptions<'_>> {
        use crate::elements::{Elements, Step};
        let mut key_pattern = None;
        let mut walk = Elements::new(self.spec.as_bytes());
        loop {
            let e = match walk.step() {
                Step::Element(e) => e,
                Step::End => {
                    return Some(SpecOptions {
                        key_pattern: key_pattern.flatten(),
                        ..SpecOptions::default()
                    });
                }
                Step::Unsure => return None,
            };
            match e.key {
                b"hidden" | b"sparse" | b"partialFilterExpression" => return None,
                _ => {
                    std::str::from_utf8(e.key).ok()?;
                }
            }
            match e.kind {
                // Double, int32, int64.
                0x01 | 0x10 | 0x12 => {}
                // A string (its bytes are not read, as `RawDocument::get` does not read them
                // on its way past): a length prefix and at least the NUL.
                0x02 if e.value.len() >= 5 => {}
                0x03 => {
                    if e.key == b"key" && key_pattern.is_none() {
                        key_pattern = Some(Some(RawDocument::from_bytes(e.value).ok()?));
                    }
                }
                _ => return None,
            }
            if e.key == b"key" && key_pattern.is_none() {
                // The first `key` is not a document: no key pattern.
                key_pattern = Some(None);
            }
        }
    }

    /// [`IndexMeta::options`] by the bson crate's iterator (any specification).
    fn walked_options(&self) -> SpecOptions<'_> {
        let mut o = SpecOptions::default();
        // Which of key, hidden, sparse, partialFilterExpression were met.
        let mut seen = [false; 4];
        for el in self.spec.iter() {
            let Ok((k, v)) = el else { break };
            let at = match k.as_str() {
                "key" => 0,
                "hidden" => 1,
                "sparse" => 2,
                "partialFilterExpression" => 3,
                _ => continue,
            };
            if std::mem::replace(&mut seen[at], true) {
                continue;
            }
            let doc = match v {
                RawBsonRef::Document(d) => Some(d),
                _ => None,
            };
            match at {
                0 => o.key_pattern = doc,
                1 => o.hidden = true_value(v),
                2 => o.sparse = true_value(v),
                _ => o.partial_filter = doc,
            }
        }
        o
    }

    /// The `partialFilterExpression`, if any.
    pub fn partial_filter(&self) -> Option<&RawDocument> {
        self.spec.get_document("partialFilterExpression").ok()
    }

    /// `expireAfterSeconds` (`safeNumberLong` of any number), if this is a TTL index.
    pub fn expire_after_seconds(&self) -> Option<i64> {
        match self.spec.get("expireAfterSeconds") {
            Ok(Some(RawBsonRef::Int32(i))) => Some(i64::from(i)),
            Ok(Some(RawBsonRef::Int64(i))) => Some(i),
            Ok(Some(v)) => number_f64(v).map(|d| if d.is_nan() { 0 } else { d as i64 }),
            _ => None,
        }
    }

    /// The specification as `listIndexes` reports it; see [`list_spec`].
    pub fn list_spec(&self) -> RawDocumentBuf {
        list_spec(&self.spec)
    }

    /// Encodes the catalog form `{spec, space, state, multikey}`.
    pub fn to_bson(&self) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        d.append(cstr!("spec"), self.spec.clone());
        d.append(cstr!("space"), self.space as i64);
        d.append(
            cstr!("state"),
            match self.state {
                IndexState::Ready => "ready",
                IndexState::Building => "building",
            },
        );
        d.append(cstr!("multikey"), self.multikey);
        d
    }

    /// Decodes [`IndexMeta::to_bson`]; a bare spec (schema version 1 records) is `_id_`.
    pub fn from_bson(d: &RawDocument) -> Result<IndexMeta> {
        let bad = |w: &str| StorageError::Corrupt(format!("index record: {w}"));
        let Ok(spec) = d.get_document("spec") else {
            // version 1 stored only the _id_ spec
            return Ok(IndexMeta::id_index());
        };
        let name = spec.get_str("name").map_err(|_| bad("name"))?.to_string();
        Ok(IndexMeta {
            name,
            spec: spec.to_owned(),
            space: u64::try_from(d.get_i64("space").map_err(|_| bad("space"))?)
                .map_err(|_| bad("space"))?,
            state: match d.get_str("state").map_err(|_| bad("state"))? {
                "ready" => IndexState::Ready,
                "building" => IndexState::Building,
                _ => return Err(bad("state")),
            },
            multikey: d.get_bool("multikey").unwrap_or(false),
        })
    }
}

/// How `listIndexes` writes one field of a specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListField {
    /// As stored (objects, strings).
    Keep,
    /// IDL `safeInt`: an int32 (`BSONElement::safeNumberInt`).
    Int,
    /// IDL `safeBool`: a boolean (`BSONElement::trueValue`).
    Bool,
    /// IDL `safeDouble`: a double.
    Double,
}

/// The fields of MongoDB 7.0's `ListIndexesReplyItem` (`list_indexes.idl`) in declaration
/// order, which is the order `listIndexes` writes them in, with their IDL types.
const LIST_FIELDS: &[(&str, ListField)] = &[
    ("v", ListField::Int),
    ("key", ListField::Keep),
    ("name", ListField::Keep),
    ("background", ListField::Bool),
    ("unique", ListField::Bool),
    ("hidden", ListField::Bool),
    ("partialFilterExpression", ListField::Keep),
    ("sparse", ListField::Bool),
    ("expireAfterSeconds", ListField::Int),
    ("storageEngine", ListField::Keep),
    ("weights", ListField::Keep),
    ("default_language", ListField::Keep),
    ("language_override", ListField::Keep),
    ("textIndexVersion", ListField::Int),
    ("2dsphereIndexVersion", ListField::Int),
    ("bits", ListField::Int),
    ("min", ListField::Double),
    ("max", ListField::Double),
    ("bucketSize", ListField::Double),
    ("collation", ListField::Keep),
    ("wildcardProjection", ListField::Keep),
    ("columnstoreProjection", ListField::Keep),
    ("coarsestIndexedLevel", ListField::Int),
    ("finestIndexedLevel", ListField::Int),
    ("dropDups", ListField::Bool),
    ("originalSpec", ListField::Keep),
    ("clustered", ListField::Bool),
    ("prepareUnique", ListField::Bool),
];

/// A specification as `listIndexes` reports it: MongoDB 7.0 re-serialises each catalog entry
/// through the `ListIndexesReplyItem` IDL type (`list_indexes.cpp`), so the fields come out
/// in the IDL's declaration order, `safeBool` fields as booleans, `safeInt` fields (`v`,
/// `expireAfterSeconds`, …) as int32 and `safeDouble` fields as doubles; fields the IDL does
/// not know (`ns`, `_id`, …) are left out (`repairIndexSpec`). An `expireAfterSeconds` that
/// is not a valid TTL (not a number, NaN, negative, over int32) reads as `i32::MAX`
/// (`kExpireAfterSecondsForInactiveTTLIndex`, as `repairIndexSpec` does). `unique`, `hidden`
/// and `prepareUnique` are listed only when true: MongoDB's catalog never holds them false
/// (`_fixIndexSpec`, `updateHiddenSetting`), catalogs written by older Cairn versions may.
pub fn list_spec(spec: &RawDocument) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    for &(name, kind) in LIST_FIELDS {
        let Some(v) = spec.get(name).ok().flatten() else {
            continue;
        };
        let Ok(field) = <&bson::raw::CStr>::try_from(name) else {
            continue;
        };
        match kind {
            ListField::Keep => out.append(field, v),
            ListField::Bool => {
                let b = true_value(v);
                if b || !matches!(name, "unique" | "hidden" | "prepareUnique") {
                    out.append(field, b);
                }
            }
            ListField::Int if name == "expireAfterSeconds" => {
                let valid = number_f64(v).is_some_and(|n| (0.0..=f64::from(i32::MAX)).contains(&n));
                out.append(field, if valid { safe_number_int(v) } else { i32::MAX });
            }
            ListField::Int => out.append(field, safe_number_int(v)),
            ListField::Double => out.append(field, number_f64(v).unwrap_or(0.0)),
        }
    }
    out
}

/// A number's value as a double (None for non-numbers; Decimal128 through its text form).
pub(crate) fn number_f64(v: RawBsonRef<'_>) -> Option<f64> {
    match v {
        RawBsonRef::Int32(i) => Some(f64::from(i)),
        RawBsonRef::Int64(i) => Some(i as f64),
        RawBsonRef::Double(d) => Some(d),
        RawBsonRef::Decimal128(d) => Some(d.to_string().parse().unwrap_or(f64::NAN)),
        _ => None,
    }
}

/// `BSONElement::trueValue`: false for `false`, null, undefined and numeric zeros; true for
/// everything else.
pub(crate) fn true_value(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Boolean(b) => b,
        RawBsonRef::Null | RawBsonRef::Undefined => false,
        other => number_f64(other).is_none_or(|n| n != 0.0),
    }
}

/// `BSONElement::safeNumberInt`: numbers truncated toward zero and clamped to int32 (NaN and
/// non-numbers are 0).
pub(crate) fn safe_number_int(v: RawBsonRef<'_>) -> i32 {
    match v {
        RawBsonRef::Int32(i) => i,
        RawBsonRef::Int64(i) => i.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
        other => match number_f64(other) {
            Some(n) if !n.is_nan() => n.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32,
            _ => 0,
        },
    }
}

/// One index entry a document produces: the encoded key components (directions applied,
/// without `E(_id)`) and the original values, in key-pattern order.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexEntry {
    /// `K1 … Kn`.
    pub key: Vec<u8>,
    /// `{"0": v1, …}`: the values the key encodes, as stored in the document (an array
    /// element for a multikey component, null for a missing field).
    pub values: RawDocumentBuf,
}

/// The entries of one document in one index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexKeys {
    /// Distinct entries (empty when the document is not indexed: sparse, partial filter).
    pub entries: Vec<IndexEntry>,
    /// Whether an indexed path went through an array.
    pub multikey: bool,
}

/// Computes index entries (implemented by the query layer).
pub trait IndexKeyGen: Send + Sync {
    /// Validates a new index specification (key pattern, options) as `createIndexes`
    /// requires; the error is the client's.
    fn validate(&self, spec: &RawDocument) -> Result<()>;

    /// The entries of `doc` in `index`. Errors are the document's (e.g. parallel arrays in a
    /// compound index, 171).
    fn keys(&self, index: &IndexMeta, doc: &RawDocument) -> Result<IndexKeys>;
}

/// A key generator for top-level, non-array fields only — enough for storage's own tests.
#[derive(Debug, Default)]
pub struct TopLevelKeys;

impl IndexKeyGen for TopLevelKeys {
    fn validate(&self, _spec: &RawDocument) -> Result<()> {
        Ok(())
    }

    fn keys(&self, index: &IndexMeta, doc: &RawDocument) -> Result<IndexKeys> {
        let mut key = Vec::new();
        let mut values = RawDocumentBuf::new();
        for (i, (field, desc)) in index.fields().iter().enumerate() {
            let v = doc.get(field).ok().flatten().unwrap_or(RawBsonRef::Null);
            crate::keys::encode_value(&mut key, v, *desc)
                .map_err(|e| StorageError::BadValue(e.to_string()))?;
            if let Ok(k) = <&bson::raw::CStr>::try_from(i.to_string().as_str()) {
                values.append(k, v);
            }
        }
        Ok(IndexKeys {
            entries: vec![IndexEntry { key, values }],
            multikey: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn record_round_trips() {
        let m = IndexMeta {
            name: "a_1_b_-1".into(),
            spec: rawdoc! {"v": 2, "key": {"a": 1, "b": -1}, "name": "a_1_b_-1", "unique": true},
            space: 9,
            state: IndexState::Building,
            multikey: true,
        };
        assert_eq!(IndexMeta::from_bson(&m.to_bson()).unwrap(), m);
        assert_eq!(
            m.fields(),
            vec![("a".to_string(), false), ("b".to_string(), true)]
        );
        assert!(m.is_unique() && !m.is_sparse());
        let d = |s: &str| bson::Decimal128::from_str(s).unwrap();
        let dec = IndexMeta {
            spec: rawdoc! {"key": {"a": d("-1"), "b": d("-0"), "c": d("-0E+3"), "e": d("1")}},
            ..m.clone()
        };
        assert_eq!(
            dec.fields().iter().map(|f| f.1).collect::<Vec<_>>(),
            [true, false, false, false]
        );
        assert_eq!(
            IndexMeta::from_bson(&rawdoc! {"v": 2, "key": {"_id": 1}, "name": "_id_"}).unwrap(),
            IndexMeta::id_index()
        );
    }

    #[test]
    fn list_spec_is_the_idl_form() {
        let stored = rawdoc! {
            "v": 2_i64,
            "unique": true,
            "key": {"a": 1},
            "name": "a_1",
            "ns": "db.c",
            "sparse": 1,
            "expireAfterSeconds": 60_i64,
            "partialFilterExpression": {"a": {"$gt": 1}},
            "background": 0.0,
            "hidden": false,
            "bits": 26.7,
            "min": -10,
        };
        let listed = list_spec(&stored);
        assert_eq!(
            listed,
            rawdoc! {
                "v": 2,
                "key": {"a": 1},
                "name": "a_1",
                "background": false,
                "unique": true,
                "partialFilterExpression": {"a": {"$gt": 1}},
                "sparse": true,
                "expireAfterSeconds": 60,
                "bits": 26,
                "min": -10.0,
            }
        );
        assert_eq!(list_spec(&listed), listed, "idempotent");
        // An unusable TTL reads as the inactive-TTL value.
        let bad = rawdoc! {"v": 2, "key": {"t": 1}, "name": "t_1", "expireAfterSeconds": -5};
        assert_eq!(
            list_spec(&bad).get_i32("expireAfterSeconds").unwrap(),
            i32::MAX
        );
        // Truthy option values count as set.
        let m = IndexMeta {
            name: "s".into(),
            spec: rawdoc! {"v": 2, "key": {"s": 1}, "name": "s", "sparse": 1, "hidden": 1.0},
            space: 3,
            state: IndexState::Ready,
            multikey: false,
        };
        assert!(m.is_sparse() && m.is_hidden() && !m.is_unique());
    }

    #[test]
    fn options_answer_as_the_accessors() {
        let m = |spec: RawDocumentBuf| IndexMeta {
            name: "i".into(),
            spec,
            space: 3,
            state: IndexState::Ready,
            multikey: false,
        };
        let mut specs = vec![
            rawdoc! {"v": 2, "key": {"a": 1}, "name": "a_1"},
            rawdoc! {"v": 2, "key": {"a": 1}, "name": "a_1", "sparse": 1, "hidden": 1.0},
            rawdoc! {"v": 2, "key": {"a": 1}, "name": "a_1", "sparse": 0, "hidden": false},
            rawdoc! {"v": 2, "key": {"a": 1}, "partialFilterExpression": {"a": {"$gt": 1}}},
            // The first field of a name decides, even when it is not a document.
            rawdoc! {"key": 1, "key": {"a": 1}, "sparse": false, "sparse": true},
            rawdoc! {"partialFilterExpression": "x", "partialFilterExpression": {"a": 1}},
            rawdoc! {},
            // Specifications the light walk reads (or leaves to the iterator).
            rawdoc! {"v": 2_i64, "key": {"a": 1, "b": -1.0}, "name": "a_1_b_-1", "unique": true},
            rawdoc! {"name": "x", "key": "a", "key": {"a": 1}},
            rawdoc! {"v": 2, "collation": {"locale": "fr"}, "key": {"a": "text"}, "w": 1.5},
            rawdoc! {"v": 2, "key": {"a": 1}, "expireAfterSeconds": bson::RawBson::Null},
        ];
        // A malformed element ends the walk: only the fields before it are read.
        let mut bytes = rawdoc! {"key": {"a": 1}, "s": "x", "hidden": true}.into_bytes();
        let at = bytes.len() - 16; // the string's length prefix
        assert_eq!(bytes[at], 2);
        bytes[at] = 100;
        specs.push(RawDocumentBuf::from_bytes(bytes).unwrap());
        // An invalid UTF-8 key before `key` ends the walk; a string's bytes are not read.
        for (mut bytes, at) in [
            (rawdoc! {"nome": "é", "key": {"a": 1}}.into_bytes(), 6),
            (rawdoc! {"name": "é", "key": {"a": 1}}.into_bytes(), 14),
        ] {
            assert!(bytes[at] == b'o' || bytes[at] == 0xC3, "{bytes:?}");
            bytes[at] = 0xFF;
            specs.push(RawDocumentBuf::from_bytes(bytes).unwrap());
        }
        for spec in specs {
            let m = m(spec);
            assert_eq!(
                m.options(),
                SpecOptions {
                    key_pattern: m.key_pattern(),
                    hidden: m.is_hidden(),
                    sparse: m.is_sparse(),
                    partial_filter: m.partial_filter(),
                },
                "{:?}",
                m.spec
            );
        }
    }
}
