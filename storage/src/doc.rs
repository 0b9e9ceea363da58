//! Document codec: a BSON document stored as key-value pairs, one per node ("documents as
//! materialized paths", DESIGN.md §3), except that containers small enough are stored
//! *packed*, whole, in one value (see [Packed subtrees](#packed-subtrees)).
//!
//! Invariants:
//! - **Round trip**: for every document [`encode_document`] accepts, decoding its nodes (in
//!   key order, as a range scan returns them) with [`decode_document`] yields the input bytes
//!   exactly — field order, every numeric type, binary subtypes, regex flags, timestamps,
//!   DBPointer, code, code-with-scope, symbol, undefined, MinKey/MaxKey. The one normalization:
//!   array element names are not stored, so they come back as the canonical `"0"`, `"1"`, …
//!   (MongoDB never produces other names; [`crate::compare`] ignores them too).
//! - **Subtrees are key prefixes**: the keys of a node's descendants are exactly the keys that
//!   have the node's key as a proper prefix, and nothing else has. A document is the prefix
//!   range of its `id_key`; a projection reads the prefix range of [`node_key`] (when that
//!   range is empty the path lies inside a packed ancestor, or does not exist). In key order
//!   every node comes before its descendants (preorder) and sibling subtrees are contiguous.
//! - **Order**: object children sort by field-name bytes in the key space; an *ordinal* in each
//!   child's value restores MongoDB's insertion order on read. Array children sort by index
//!   (big-endian `u32`, so `I(9) < I(10)`).
//! - **Limits**: encoding fails cleanly (never panics) with [`DocError::TooDeep`] beyond
//!   MongoDB's storage nesting limit, [`DocError::KeyTooLong`] when a key would exceed
//!   [`MAX_KEY_LEN`] (fjall refuses keys of 64 KiB and more), [`DocError::TooLarge`] beyond
//!   16 MiB and [`DocError::Malformed`] on invalid BSON or duplicate field names.
//! - **Total decoding**: decoding and parsing never panic on any bytes. Stored bytes that break
//!   an invariant of this layout (bad varints, unknown kinds, leaf bytes that do not match their
//!   type, missing or extra nodes, counts, ordinals or sizes that disagree with the headers) give
//!   [`DocError::Corrupt`], and a document decoded by the validating functions
//!   ([`parse_value`], [`decode_document`], [`DocAssembler::new`]) is always well-formed BSON.
//!   The read paths use the *trusted* variants instead (see [Trusted reads](#trusted-reads)),
//!   whose documents are always correctly framed.
//!
//! # Keys
//!
//! The caller supplies the document's key prefix `id_key` (in practice `E(_id)` from
//! [`crate::keys`], behind the collection's own prefix). It is opaque here; the only
//! requirement is that no document's `id_key` is a proper prefix of another's, which `E(v)`
//! guarantees. A node's key is `id_key` followed by one *component* per path step:
//!
//! | component      | bytes                                                        |
//! |----------------|--------------------------------------------------------------|
//! | field `name`   | `0x46` (`'F'`), the name's UTF-8 bytes, `0x00`               |
//! | array index `i`| `0x49` (`'I'`), `i` as a big-endian `u32` (4 bytes)          |
//!
//! ```text
//! id_key                        -> root header
//! id_key 46 61 00               -> field "a" of the root
//! id_key 46 61 00 46 62 00      -> field "b" inside "a"
//! id_key 46 74 00 49 00000003   -> element 3 of the array "t"
//! id_key 46 00                  -> the empty field name ""
//! ```
//!
//! Field names are BSON cstrings and never contain `0x00`, so the terminator ends the name;
//! an index has a fixed width. The component code is therefore prefix-free: a key is a byte
//! prefix of another exactly when its path is a path prefix of the other's, which gives the
//! subtree property. `'F'` and `'I'` differ, so a field named `"0"` (`46 30 00`) never
//! collides with index 0 (`49 00 00 00 00`). Siblings sort by name bytes (`"a" < "ab"`, the
//! terminator being the smallest byte), and array elements numerically.
//!
//! # Values
//!
//! The first byte is the node's *kind*; integers after it are unsigned LEB128 varints (7 bits
//! per byte, least significant group first, high bit set on every byte but the last; at most
//! 10 bytes; the minimal encoding is required, so every value has exactly one encoding).
//!
//! | node          | bytes                                                                   |
//! |---------------|-------------------------------------------------------------------------|
//! | root header   | `0x00`, version (`1`), next ordinal, BSON size, child count             |
//! | object header | `0x03`, ordinal, next ordinal, child count                              |
//! | array header  | `0x04`, ordinal, length                                                 |
//! | leaf          | BSON element type, ordinal, the raw BSON value bytes                    |
//! | packed root   | `0x20`, the whole document's BSON (length prefix through terminator)    |
//! | packed object | `0x23`, ordinal, the embedded document's BSON                           |
//! | packed array  | `0x24`, ordinal, the array's BSON (element names `"0"`, `"1"`, …)       |
//!
//! - **version**: the format version, [`FORMAT_VERSION`]; anything else is refused.
//! - **ordinal**: the node's position among its parent's children in insertion order. Object
//!   children's ordinals are distinct and below the parent's *next ordinal*; the encoder
//!   numbers them `0, 1, …` and sets next ordinal to the child count, and later insertions
//!   (updates) take the next ordinal and increment it, so removals leave gaps but the order of
//!   the survivors is kept. **Array elements carry an ordinal too, equal to their index**, so
//!   every non-root value parses the same way without knowing its parent; the decoder checks it.
//! - **BSON size** (root only, `u32`): the byte length of the whole BSON document, for
//!   statistics and the 16 MiB check without a read. The decoder verifies it, so writers that
//!   update a document in place must keep it exact.
//! - **child count** (`u32`): the number of children (fields) present; **length** (`u32`):
//!   the number of array elements, whose indices are exactly `0..length`.
//! - **leaf**: the type byte is the BSON element type — `0x01` double, `0x02` string,
//!   `0x05` binary, `0x06` undefined, `0x07` ObjectId, `0x08` bool, `0x09` UTC datetime,
//!   `0x0A` null, `0x0B` regex, `0x0C` DBPointer, `0x0D` JavaScript code, `0x0E` symbol,
//!   `0x0F` code with scope, `0x10` int32, `0x11` timestamp, `0x12` int64, `0x13` decimal128,
//!   `0x7F` MaxKey, `0xFF` MinKey (never `0x00`, `0x03` or `0x04`, which are the header
//!   kinds). The value bytes are exactly those following the field name in the BSON element
//!   (e.g. an int32 is 4 little-endian bytes, a string is its i32 length, bytes and `0x00`),
//!   and must be exactly one well-formed value of that type: lengths consistent, strings
//!   UTF-8, booleans `0`/`1`, a code-with-scope's scope a valid document.
//! - **packed**: the BSON of the whole container, well-formed at every level, its arrays'
//!   element names canonical (the encoder rewrites others); its size is the length prefix.
//!   The packed kinds are not BSON element types, so every value's first byte tells its kind.
//!   A packed node has no descendant keys.
//!
//! Example: `{b: 1, a: {}}` under `id_key` `K` is
//! ```text
//! K             -> 00 01 02 14 02      root: version 1, next ordinal 2, 20 bytes, 2 children
//! K 46 61 00    -> 03 01 00 00         object "a": ordinal 1, next ordinal 0, 0 children
//! K 46 62 00    -> 10 00 01 00 00 00   int32 "b": ordinal 0, value 1
//! ```
//! and, packed (any threshold of 20 bytes or more), the one pair
//! ```text
//! K             -> 20 14 00 00 00 10 62 00 01 00 00 00 03 61 00 05 00 00 00 00 00
//! ```
//!
//! # Packed subtrees
//!
//! One key per node costs one key-value write per field on insert and one per node on a read,
//! and the store's cost is per key far more than per byte (raw fjall: ~35k documents/s as 15
//! keys of a 270-byte document, ~500k/s as one key). So the encoder is given a *pack
//! threshold* `T` ([`Limits::pack_threshold`], stored with each collection): a container —
//! the document itself, an embedded document or an array — whose BSON is at most `T` bytes is
//! stored *packed*, as its BSON in the one value at its own key; a larger one is *spilled*:
//! its header at its key and each child under it (leaves, packed children, spilled children),
//! as above. So a small document is one pair; a document with one big array is a root header,
//! one pair per other field (packed when a container) and one per array element — `$push`
//! onto that array still writes the element and the headers, and `$inc` of a top-level
//! number still writes one leaf. Leaves are never split; a huge string is one leaf.
//!
//! - **Threshold 0** packs nothing: the layout above, byte for byte, which is also what data
//!   written before packing existed holds. Every reader accepts both kinds everywhere.
//! - **Hysteresis**: a rewrite (a replacement, an updated field) says which keys held spilled
//!   containers before ([`spilled_keys`], [`encode_document_after`],
//!   [`encode_subtree_after`]); such a container packs again only once it shrinks to `T / 2`
//!   bytes, while a new or packed one packs up to `T`. A container near the threshold thus
//!   does not flip between the layouts on every small update.
//! - **Encoding a packed document** is one validating walk (every check of the general
//!   encoder: elements, nesting, duplicate names) and, when its arrays already carry the
//!   canonical names — as every driver writes them — one copy of its bytes behind the kind
//!   byte; otherwise the general walk rewrites the names (or reports the error).
//! - **Addressing** is unchanged: every node still has its path and its key; a path inside a
//!   packed container has no key of its own (its prefix range is empty), and is read from the
//!   packed ancestor's value.
//! - **Limits**: [`MAX_PACK_THRESHOLD`] (64 KiB) bounds a packed value well under the value
//!   limits of the engines DESIGN §6 plans for. Nesting, duplicate names and value validity
//!   are checked inside packed containers exactly as in spilled ones; the key-length limit
//!   applies to the keys that exist.
//! - **Choice of the default** ([`DEFAULT_PACK_THRESHOLD`], 2048 bytes): measured with
//!   `cairn-bench pack` (the storage layer alone, by document size and threshold) and
//!   `cairn-bench compare` (the whole server next to PostgreSQL). Packing a document turns
//!   ~20–200 keys into one: inserts and point reads of documents up to the threshold ran
//!   5–25× faster than one key per node (e.g. 300-byte documents of 23 nodes: ~4k → 20k–100k
//!   inserts/s, ~13k → 50k–130k reads/s on a loaded 2-core machine). The cost is on updates: a
//!   packed value is rewritten whole by every update of a field inside it, so `$inc` on a
//!   4–16 KB packed document fell to between half and a fifth of its one-leaf rate, while up
//!   to 2 KB the difference stayed within the noise (identical one-key rows of 300-byte
//!   documents varied from 6k to 13k `$inc`/s). 2048 keeps everyday documents (a few hundred bytes to 2 KB) as
//!   one pair and a rewrite within one or two storage blocks.
//!
//! # Decoding
//!
//! [`decode_document`] consumes the nodes of one document in key order in a single pass. It
//! keeps a stack of open containers; each node's element (type, name, value) is appended to
//! one output buffer, a container's elements following its header in place. When a container
//! closes (the next key is not below it) its children are put in ordinal order if they did not
//! arrive in that order — one copy of that container's bytes through a reusable scratch buffer
//! — and its length is patched. Arrays arrive in index order and are never moved. There is no
//! per-node allocation; a packed node's BSON is copied in as a leaf's value is, and a packed
//! root is the whole document. [`decode_subtree`] does the same for one node and its
//! descendants, and [`DocAssembler`] splits a scan over many documents at roots (the only
//! values whose first byte is `0x00` or `0x20`, see [`is_root`]).
//!
//! # Trusted reads
//!
//! Every packed value in a keyspace was written by this module's encoder, which refuses
//! malformed BSON, and the LSM tree checksums its blocks when it reads them from disk; so
//! re-validating a packed value on every read (a walk over every element with a UTF-8 check
//! of each name and string, about a tenth of an indexed aggregation's CPU) finds nothing.
//! The storage read paths ([`crate::fetch`], the store's point reads and scans) therefore use
//! [`parse_stored_value`], [`decode_stored_document`], [`decode_stored_subtree`] (a targeted
//! update's field reads) and [`DocAssembler::stored`], which
//! check everything the validating functions check (headers, counts, ordinals, sizes, leaves)
//! except the inside of packed values: only their framing (length prefix equal to the
//! value's length, final `0x00`). Were such bytes damaged anyway, the bson crate's accessors
//! check each element as they read it and return errors — nothing panics. Bytes that come
//! from outside (tests, tools, a suspect data directory) go through the validating functions.
//!
//! # Received documents
//!
//! An inserted document reached the server through the wire layer, which checked every name
//! and string for UTF-8 (or was built from Rust strings). [`encode_received_document`] (the
//! store's insert) therefore skips the UTF-8 checks when it decides that a document is stored
//! packed as it is, and makes every other check; so does the light element walk it steps
//! with ([`crate::elements`], used where it reads an element plainly). A unit test checks
//! that this decision equals the validating one on every well-formed document.
//!
//! # Nesting depth (MongoDB's rule)
//!
//! MongoDB refuses to store a document nested deeper than
//! `BSONDepth::getMaxDepthForUserStorage()` = `maxBSONDepth` (default 200) −
//! `kExtraSystemDepthLevels` (20) = **180** levels (`src/mongo/bson/bson_depth.{h,cpp}`).
//! `validateBSONDepthForUserStorage` (`src/mongo/bson/bson_validate.cpp`; earlier
//! `validateDepth` in `src/mongo/db/ops/insert.cpp`) counts the top-level document as level 1
//! and each *non-empty* embedded object or array as one more level ("Empty subdocuments do not
//! count toward the depth of a document"; releases before that exemption counted `{}`/`[]`
//! too); descending into a non-empty container from level 180 fails with `Overflow` ("… exceeds
//! 180 levels of nesting"). So 180 nested non-empty containers, counting the top-level
//! document, are accepted, and an empty `{}`/`[]` may sit inside the 180th. The manual's "100
//! levels" is not what the server enforces. Only objects and arrays count: a code-with-scope
//! is a leaf here, and its scope does not count toward this limit in MongoDB either (the
//! wire-level `validateBSON` cap of `maxBSONDepth` = 200 on all nesting, scopes included, is
//! the wire layer's business). [`MAX_NESTING`] is the limit; [`Limits`] allows another
//! (MongoDB's `maxBSONDepth` parameter).

#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

use bson::raw::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf, cstr};
use bson::spec::ElementType;
use thiserror::Error;

/// Tag of a field-name path component.
pub const TAG_FIELD: u8 = 0x46;
/// Tag of an array-index path component.
pub const TAG_INDEX: u8 = 0x49;
/// Kind byte of the root header.
pub const KIND_ROOT: u8 = 0x00;
/// Kind byte of an object header (the BSON embedded-document type).
pub const KIND_OBJECT: u8 = 0x03;
/// Kind byte of an array header (the BSON array type).
pub const KIND_ARRAY: u8 = 0x04;
/// Kind byte of a packed document (the whole document in its root value).
pub const KIND_PACKED_ROOT: u8 = 0x20;
/// Kind byte of a packed embedded document.
pub const KIND_PACKED_OBJECT: u8 = 0x23;
/// Kind byte of a packed array.
pub const KIND_PACKED_ARRAY: u8 = 0x24;
/// Format version written in root headers.
pub const FORMAT_VERSION: u64 = 1;
/// The pack threshold of new collections unless configured otherwise (see "Packed subtrees"
/// in the module docs for how it was chosen).
pub const DEFAULT_PACK_THRESHOLD: u32 = 2048;
/// Largest pack threshold: a packed value stays well under FoundationDB's 100,000-byte value
/// limit (DESIGN §6).
pub const MAX_PACK_THRESHOLD: u32 = 64 * 1024;

/// Longest key the codec produces, safely under fjall's 64 KiB key limit.
pub const MAX_KEY_LEN: usize = 60 * 1024;
/// MongoDB's nesting limit for stored documents (`getMaxDepthForUserStorage()`, 200 − 20),
/// counting the top-level document as level 1 and ignoring empty containers.
pub const MAX_NESTING: usize = 180;
/// MongoDB's maximum user document size (`BSONObjMaxUserSize`, 16 MiB).
pub const MAX_BSON_SIZE: usize = 16 * 1024 * 1024;

/// Limits applied by the encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting of non-empty containers, the top-level document being level 1.
    pub max_nesting: usize,
    /// Largest BSON document (or value, for [`encode_subtree`]) in bytes.
    pub max_bson_size: usize,
    /// Longest key.
    pub max_key_len: usize,
    /// Containers of at most this many BSON bytes are stored packed (see "Packed subtrees"
    /// in the module docs); 0 (the default here) stores one key per node.
    pub pack_threshold: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_nesting: MAX_NESTING,
            max_bson_size: MAX_BSON_SIZE,
            max_key_len: MAX_KEY_LEN,
            pack_threshold: 0,
        }
    }
}

impl Limits {
    /// The default limits with this pack threshold (capped at [`MAX_PACK_THRESHOLD`]).
    pub fn packing(pack_threshold: u32) -> Limits {
        Limits {
            pack_threshold: pack_threshold.min(MAX_PACK_THRESHOLD),
            ..Limits::default()
        }
    }
}

/// Why a document could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DocError {
    /// Non-empty containers nested deeper than the limit.
    #[error("document exceeds {limit} levels of nesting")]
    TooDeep {
        /// The nesting limit.
        limit: usize,
    },
    /// A node's key would be longer than the limit.
    #[error("key of {len} bytes exceeds the maximum of {max} bytes")]
    KeyTooLong {
        /// The key's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The document is larger than the limit.
    #[error("document of {size} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// Invalid input: malformed BSON, a duplicate field name, a field name containing NUL.
    #[error("malformed document: {0}")]
    Malformed(String),
    /// Stored bytes that violate the layout.
    #[error("corrupt document storage: {0}")]
    Corrupt(String),
}

fn corrupt(msg: impl Into<String>) -> DocError {
    DocError::Corrupt(msg.into())
}

/// A BSON-level defect, reported as [`DocError::Malformed`] when encoding and
/// [`DocError::Corrupt`] when decoding.
#[derive(Debug)]
struct Bad(String);

fn bad(msg: impl Into<String>) -> Bad {
    Bad(msg.into())
}

fn malformed(b: Bad) -> DocError {
    DocError::Malformed(b.0)
}

fn corrupted(b: Bad) -> DocError {
    DocError::Corrupt(b.0)
}

// ---------------------------------------------------------------------------------------------
// Path components
// ---------------------------------------------------------------------------------------------

/// One step of a path inside a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathPart<'a> {
    /// A field of an object.
    Field(&'a str),
    /// An element of an array.
    Index(u32),
}

impl PathPart<'_> {
    /// Appends the component's key bytes. A field name must not contain `0x00`.
    fn write(self, out: &mut Vec<u8>) {
        match self {
            PathPart::Field(name) => {
                out.push(TAG_FIELD);
                out.extend_from_slice(name.as_bytes());
                out.push(0x00);
            }
            PathPart::Index(i) => {
                out.push(TAG_INDEX);
                out.extend_from_slice(&i.to_be_bytes());
            }
        }
    }
}

/// The key of the node at `path` in the document `id_key`.
///
/// Fails with [`DocError::Malformed`] for a field name containing `0x00` (no stored field has
/// one, and its bytes would alias another path) and [`DocError::KeyTooLong`] beyond
/// [`MAX_KEY_LEN`].
pub fn node_key(id_key: &[u8], path: &[PathPart<'_>]) -> Result<Vec<u8>, DocError> {
    let mut key = Vec::with_capacity(id_key.len() + path.len() * 8);
    key.extend_from_slice(id_key);
    for part in path {
        if let PathPart::Field(name) = part
            && name.as_bytes().contains(&0)
        {
            return Err(DocError::Malformed(format!(
                "field name {name:?} contains a NUL byte"
            )));
        }
        part.write(&mut key);
    }
    check_key_len(&key, MAX_KEY_LEN)?;
    Ok(key)
}

fn check_key_len(key: &[u8], max: usize) -> Result<(), DocError> {
    if key.len() > max {
        Err(DocError::KeyTooLong {
            len: key.len(),
            max,
        })
    } else {
        Ok(())
    }
}

/// Parses one component at the start of `bytes`, returning it and its length.
fn parse_component(bytes: &[u8]) -> Result<(PathPart<'_>, usize), DocError> {
    match bytes.split_first() {
        Some((&TAG_FIELD, rest)) => {
            let (name, used) = cstring(rest).map_err(corrupted)?;
            Ok((PathPart::Field(name), 1 + used))
        }
        Some((&TAG_INDEX, rest)) => {
            let raw = rest
                .get(..4)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .ok_or_else(|| corrupt("truncated array index in key"))?;
            Ok((PathPart::Index(u32::from_be_bytes(raw)), 5))
        }
        Some((tag, _)) => Err(corrupt(format!("unknown path component tag {tag:#04x}"))),
        None => Err(corrupt("empty path component")),
    }
}

/// Parses the path of a key with its `id_key` removed (`suffix = &key[id_key.len()..]`).
pub fn parse_path(suffix: &[u8]) -> Result<Vec<PathPart<'_>>, DocError> {
    let mut parts = Vec::new();
    let mut rest = suffix;
    while !rest.is_empty() {
        let (part, used) = parse_component(rest)?;
        parts.push(part);
        rest = rest.get(used..).unwrap_or_default();
    }
    Ok(parts)
}

// ---------------------------------------------------------------------------------------------
// Varints
// ---------------------------------------------------------------------------------------------

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a minimal LEB128 `u64` at `*pos`, advancing it.
fn get_varint(bytes: &[u8], pos: &mut usize) -> Result<u64, DocError> {
    let mut result = 0u64;
    for i in 0..10u32 {
        let b = *bytes.get(*pos).ok_or_else(|| corrupt("truncated varint"))?;
        *pos += 1;
        if i == 9 && b > 1 {
            return Err(corrupt("varint overflows 64 bits"));
        }
        result |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            if b == 0 && i > 0 {
                return Err(corrupt("non-minimal varint"));
            }
            return Ok(result);
        }
    }
    Err(corrupt("varint longer than 10 bytes"))
}

fn get_varint_u32(bytes: &[u8], pos: &mut usize) -> Result<u32, DocError> {
    u32::try_from(get_varint(bytes, pos)?).map_err(|_| corrupt("count exceeds u32"))
}

// ---------------------------------------------------------------------------------------------
// Node values
// ---------------------------------------------------------------------------------------------

/// A parsed node value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node<'a> {
    /// The document's root header.
    Root {
        /// Ordinal the next top-level field will get.
        next_ordinal: u64,
        /// Byte length of the whole BSON document.
        bson_size: u32,
        /// Number of top-level fields.
        child_count: u32,
    },
    /// An embedded document's header.
    Object {
        /// Position among the parent's children.
        ordinal: u64,
        /// Ordinal the next field will get.
        next_ordinal: u64,
        /// Number of fields.
        child_count: u32,
    },
    /// An array's header.
    Array {
        /// Position among the parent's children (its index, inside an array).
        ordinal: u64,
        /// Number of elements.
        len: u32,
    },
    /// A whole document stored in its root value.
    PackedRoot {
        /// The document's BSON bytes.
        bson: &'a [u8],
    },
    /// An embedded document or array stored whole in its own value.
    Packed {
        /// Position among the parent's children (its index, inside an array).
        ordinal: u64,
        /// An array (else an embedded document).
        array: bool,
        /// The value's BSON bytes (length prefix through terminator).
        bson: &'a [u8],
    },
    /// A scalar value (anything but an object or array).
    Leaf {
        /// Position among the parent's children (its index, inside an array).
        ordinal: u64,
        /// The BSON type.
        element_type: ElementType,
        /// The raw BSON value bytes, as they follow the field name in a BSON element.
        value: &'a [u8],
    },
}

impl Node<'_> {
    /// The ordinal, or `None` for the root header.
    pub fn ordinal(&self) -> Option<u64> {
        match *self {
            Node::Root { .. } | Node::PackedRoot { .. } => None,
            Node::Object { ordinal, .. }
            | Node::Array { ordinal, .. }
            | Node::Packed { ordinal, .. }
            | Node::Leaf { ordinal, .. } => Some(ordinal),
        }
    }

    /// Whether this node is a document's root (a header or a packed document).
    pub fn is_root(&self) -> bool {
        matches!(self, Node::Root { .. } | Node::PackedRoot { .. })
    }

    /// The BSON element type this node decodes to (an embedded document for the root).
    pub fn element_type(&self) -> ElementType {
        match *self {
            Node::Root { .. } | Node::Object { .. } | Node::PackedRoot { .. } => {
                ElementType::EmbeddedDocument
            }
            Node::Array { .. } => ElementType::Array,
            Node::Packed { array, .. } => {
                if array {
                    ElementType::Array
                } else {
                    ElementType::EmbeddedDocument
                }
            }
            Node::Leaf { element_type, .. } => element_type,
        }
    }

    /// Appends the value encoding (see the module docs). For a leaf, `element_type` must not be
    /// an embedded document or array and `value` must be one well-formed value of that type,
    /// or [`parse_value`] will refuse the result.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        match *self {
            Node::Root {
                next_ordinal,
                bson_size,
                child_count,
            } => {
                out.push(KIND_ROOT);
                put_varint(out, FORMAT_VERSION);
                put_varint(out, next_ordinal);
                put_varint(out, u64::from(bson_size));
                put_varint(out, u64::from(child_count));
            }
            Node::Object {
                ordinal,
                next_ordinal,
                child_count,
            } => {
                out.push(KIND_OBJECT);
                put_varint(out, ordinal);
                put_varint(out, next_ordinal);
                put_varint(out, u64::from(child_count));
            }
            Node::Array { ordinal, len } => {
                out.push(KIND_ARRAY);
                put_varint(out, ordinal);
                put_varint(out, u64::from(len));
            }
            Node::PackedRoot { bson } => {
                out.push(KIND_PACKED_ROOT);
                out.extend_from_slice(bson);
            }
            Node::Packed {
                ordinal,
                array,
                bson,
            } => {
                out.push(if array {
                    KIND_PACKED_ARRAY
                } else {
                    KIND_PACKED_OBJECT
                });
                put_varint(out, ordinal);
                out.extend_from_slice(bson);
            }
            Node::Leaf {
                ordinal,
                element_type,
                value,
            } => {
                out.push(element_type as u8);
                put_varint(out, ordinal);
                out.extend_from_slice(value);
            }
        }
    }

    /// The value encoding as a new vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        self.write_to(&mut out);
        out
    }
}

/// Whether a stored value is a document's root (a root header or a packed document: the
/// first node of a document).
pub fn is_root(value: &[u8]) -> bool {
    matches!(value.first(), Some(&KIND_ROOT | &KIND_PACKED_ROOT))
}

/// Parses and validates a stored value.
pub fn parse_value(v: &[u8]) -> Result<Node<'_>, DocError> {
    parse_value_with(v, true)
}

/// Parses a value this store wrote (see [Trusted reads](#trusted-reads)): as [`parse_value`],
/// except that a packed node's BSON is only checked for its framing (its length prefix is
/// the rest of the value and it ends in `0x00`), not walked.
pub fn parse_stored_value(v: &[u8]) -> Result<Node<'_>, DocError> {
    parse_value_with(v, false)
}

/// Checks a packed value deeply ([`validate_packed`]) or only its framing.
fn check_packed(bson: &[u8], array: bool, deep: bool) -> Result<(), DocError> {
    if deep {
        validate_packed(bson, array).map_err(corrupted)
    } else if doc_len(bson).map_err(corrupted)? != bson.len() {
        Err(corrupt("packed value length disagrees with its buffer"))
    } else {
        Ok(())
    }
}

fn parse_value_with(v: &[u8], deep: bool) -> Result<Node<'_>, DocError> {
    let (&kind, rest) = v.split_first().ok_or_else(|| corrupt("empty value"))?;
    let mut pos = 0;
    let node = match kind {
        KIND_ROOT => {
            let version = get_varint(rest, &mut pos)?;
            if version != FORMAT_VERSION {
                return Err(corrupt(format!("unsupported format version {version}")));
            }
            let next_ordinal = get_varint(rest, &mut pos)?;
            let bson_size = get_varint_u32(rest, &mut pos)?;
            let child_count = get_varint_u32(rest, &mut pos)?;
            check_counts(next_ordinal, child_count)?;
            Node::Root {
                next_ordinal,
                bson_size,
                child_count,
            }
        }
        KIND_OBJECT => {
            let ordinal = get_varint(rest, &mut pos)?;
            let next_ordinal = get_varint(rest, &mut pos)?;
            let child_count = get_varint_u32(rest, &mut pos)?;
            check_counts(next_ordinal, child_count)?;
            Node::Object {
                ordinal,
                next_ordinal,
                child_count,
            }
        }
        KIND_ARRAY => {
            let ordinal = get_varint(rest, &mut pos)?;
            let len = get_varint_u32(rest, &mut pos)?;
            Node::Array { ordinal, len }
        }
        KIND_PACKED_ROOT => {
            check_packed(rest, false, deep)?;
            return Ok(Node::PackedRoot { bson: rest });
        }
        KIND_PACKED_OBJECT | KIND_PACKED_ARRAY => {
            let ordinal = get_varint(rest, &mut pos)?;
            let bson = rest.get(pos..).unwrap_or_default();
            let array = kind == KIND_PACKED_ARRAY;
            check_packed(bson, array, deep)?;
            return Ok(Node::Packed {
                ordinal,
                array,
                bson,
            });
        }
        ty => {
            let element_type = ElementType::from(ty)
                .ok_or_else(|| corrupt(format!("unknown node kind {ty:#04x}")))?;
            let ordinal = get_varint(rest, &mut pos)?;
            let value = rest.get(pos..).unwrap_or_default();
            validate_leaf(ty, value).map_err(corrupted)?;
            return Ok(Node::Leaf {
                ordinal,
                element_type,
                value,
            });
        }
    };
    if pos != rest.len() {
        return Err(corrupt("trailing bytes after a header"));
    }
    Ok(node)
}

fn check_counts(next_ordinal: u64, child_count: u32) -> Result<(), DocError> {
    if u64::from(child_count) > next_ordinal {
        Err(corrupt(format!(
            "{child_count} children cannot have distinct ordinals below {next_ordinal}"
        )))
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// BSON scanning (no panics, no recursion)
// ---------------------------------------------------------------------------------------------

fn read_len(bytes: &[u8], at: usize) -> Result<usize, Bad> {
    let raw = at
        .checked_add(4)
        .and_then(|end| bytes.get(at..end))
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .ok_or_else(|| bad("truncated length"))?;
    usize::try_from(i32::from_le_bytes(raw)).map_err(|_| bad("negative length"))
}

/// A cstring at the start of `bytes`: its text and its length including the `0x00`.
fn cstring(bytes: &[u8]) -> Result<(&str, usize), Bad> {
    let n = bytes
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| bad("unterminated cstring"))?;
    let text = std::str::from_utf8(bytes.get(..n).unwrap_or_default())
        .map_err(|_| bad("cstring is not UTF-8"))?;
    Ok((text, n + 1))
}

/// Length of the cstring at the start of `bytes`, including the `0x00`, its text not checked.
fn cstring_len(bytes: &[u8]) -> Result<usize, Bad> {
    crate::elements::nul_at(bytes)
        .map(|n| n + 1)
        .ok_or_else(|| bad("unterminated cstring"))
}

/// Length of the BSON string (i32 length, UTF-8 bytes, `0x00`) at the start of `bytes`; the
/// text is checked to be UTF-8 only when `UTF8`.
fn string_len_with<const UTF8: bool>(bytes: &[u8]) -> Result<usize, Bad> {
    let len = read_len(bytes, 0)?;
    if len < 1 {
        return Err(bad("string length below 1"));
    }
    let total = len.checked_add(4).ok_or_else(|| bad("string too long"))?;
    let body = bytes
        .get(4..total)
        .ok_or_else(|| bad("string overruns its buffer"))?;
    match body.split_last() {
        Some((0, text)) => {
            if UTF8 {
                std::str::from_utf8(text).map_err(|_| bad("string is not UTF-8"))?;
            }
            Ok(total)
        }
        _ => Err(bad("string not NUL-terminated")),
    }
}

/// Length of the embedded document framed at the start of `bytes`.
fn doc_len(bytes: &[u8]) -> Result<usize, Bad> {
    let len = read_len(bytes, 0)?;
    if len < 5 {
        return Err(bad("document length below 5"));
    }
    match bytes.get(..len).and_then(<[u8]>::last) {
        Some(0) => Ok(len),
        Some(_) => Err(bad("document not NUL-terminated")),
        None => Err(bad("document overruns its buffer")),
    }
}

/// Length of the value of BSON type `ty` at the start of `rest`, validated, plus the document
/// inside it still to be walked (an embedded document or array, or a code-with-scope scope;
/// its framing is checked, its contents are not).
fn value_len(ty: u8, rest: &[u8]) -> Result<(usize, Option<&[u8]>), Bad> {
    value_len_with::<true>(ty, rest)
}

/// [`value_len`], checking the text of strings and regexes is UTF-8 only when `UTF8`.
fn value_len_with<const UTF8: bool>(ty: u8, rest: &[u8]) -> Result<(usize, Option<&[u8]>), Bad> {
    let fixed = |n: usize| {
        if rest.len() >= n {
            Ok((n, None))
        } else {
            Err(bad(format!("truncated value of type {ty:#04x}")))
        }
    };
    match ty {
        0x01 | 0x09 | 0x11 | 0x12 => fixed(8),
        0x10 => fixed(4),
        0x07 => fixed(12),
        0x13 => fixed(16),
        0x06 | 0x0A | 0x7F | 0xFF => Ok((0, None)),
        0x08 => match rest.first() {
            Some(0 | 1) => Ok((1, None)),
            Some(b) => Err(bad(format!("boolean byte {b:#04x}"))),
            None => Err(bad("truncated boolean")),
        },
        0x02 | 0x0D | 0x0E => Ok((string_len_with::<UTF8>(rest)?, None)),
        0x03 | 0x04 => {
            let n = doc_len(rest)?;
            Ok((n, rest.get(..n)))
        }
        0x05 => {
            let len = read_len(rest, 0)?;
            let total = len.checked_add(5).ok_or_else(|| bad("binary too long"))?;
            if rest.len() < total {
                return Err(bad("binary overruns its buffer"));
            }
            if rest.get(4) == Some(&0x02) {
                // Old binary subtype: an inner length that must cover the rest.
                let inner = if len >= 4 {
                    read_len(rest, 5).ok()
                } else {
                    None
                };
                if inner.and_then(|i| i.checked_add(4)) != Some(len) {
                    return Err(bad("old binary subtype with a wrong inner length"));
                }
            }
            Ok((total, None))
        }
        0x0B => {
            let cstring_len = |b| {
                if UTF8 {
                    cstring(b).map(|(_, n)| n)
                } else {
                    cstring_len(b)
                }
            };
            let pattern = cstring_len(rest)?;
            let options = cstring_len(rest.get(pattern..).unwrap_or_default())?;
            Ok((pattern + options, None))
        }
        0x0C => {
            let n = string_len_with::<UTF8>(rest)?;
            let total = n + 12;
            if rest.len() < total {
                return Err(bad("truncated DBPointer"));
            }
            Ok((total, None))
        }
        0x0F => {
            let total = read_len(rest, 0)?;
            if total < 14 {
                return Err(bad("code with scope too short"));
            }
            let whole = rest
                .get(..total)
                .ok_or_else(|| bad("code with scope overruns its buffer"))?;
            let code = string_len_with::<UTF8>(whole.get(4..).unwrap_or_default())?;
            let scope = whole.get(4 + code..).unwrap_or_default();
            if doc_len(scope)? != scope.len() {
                return Err(bad("code with scope length disagrees with its parts"));
            }
            Ok((total, Some(scope)))
        }
        _ => Err(bad(format!("unknown BSON type {ty:#04x}"))),
    }
}

/// One element of a BSON document; its name as text (`N = &str`, checked as UTF-8 with the
/// element's strings) or as bytes (`N = &[u8]`, nothing checked as UTF-8).
struct Element<'d, N = &'d str> {
    ty: u8,
    name: N,
    value: &'d [u8],
    /// An embedded document or array (the value itself), or a code-with-scope's scope.
    nested: Option<&'d [u8]>,
}

/// An element whose name is read as bytes.
type RawElement<'d> = Element<'d, &'d [u8]>;

impl<'d> Element<'d> {
    /// The element with its (checked) name as bytes.
    fn into_raw(self) -> RawElement<'d> {
        Element {
            ty: self.ty,
            name: self.name.as_bytes(),
            value: self.value,
            nested: self.nested,
        }
    }
}

/// How an element's name is read: as text, checking it and the element's strings are UTF-8,
/// or as bytes, checking neither (every other check is made either way).
trait ElementName<'d>: Sized {
    /// The cstring at the start of `bytes`: its name and its length including the `0x00`.
    fn read(bytes: &'d [u8]) -> Result<(Self, usize), Bad>;
    /// [`value_len`], checking the text of strings and regexes as the name is checked.
    fn value_len(ty: u8, rest: &[u8]) -> Result<(usize, Option<&[u8]>), Bad>;
}

impl<'d> ElementName<'d> for &'d str {
    fn read(bytes: &'d [u8]) -> Result<(Self, usize), Bad> {
        cstring(bytes)
    }
    fn value_len(ty: u8, rest: &[u8]) -> Result<(usize, Option<&[u8]>), Bad> {
        value_len_with::<true>(ty, rest)
    }
}

impl<'d> ElementName<'d> for &'d [u8] {
    fn read(bytes: &'d [u8]) -> Result<(Self, usize), Bad> {
        let n = cstring_len(bytes)?;
        Ok((bytes.get(..n - 1).unwrap_or_default(), n))
    }
    fn value_len(ty: u8, rest: &[u8]) -> Result<(usize, Option<&[u8]>), Bad> {
        value_len_with::<false>(ty, rest)
    }
}

/// The element at `*pos` of the framed document `doc` (length through terminator), or `None` at
/// its terminator; advances `*pos`.
fn next_element<'d>(doc: &'d [u8], pos: &mut usize) -> Result<Option<Element<'d>>, Bad> {
    next_element_as(doc, pos)
}

/// [`next_element`], the name read as `N` says (see [`ElementName`]).
fn next_element_as<'d, N: ElementName<'d>>(
    doc: &'d [u8],
    pos: &mut usize,
) -> Result<Option<Element<'d, N>>, Bad> {
    let body_end = doc.len().saturating_sub(1);
    if *pos == body_end {
        return Ok(None);
    }
    let body = doc
        .get(*pos..body_end)
        .ok_or_else(|| bad("element overruns its document"))?;
    let (&ty, after_ty) = body
        .split_first()
        .ok_or_else(|| bad("element overruns its document"))?;
    let (name, name_len) = N::read(after_ty)?;
    let rest = after_ty.get(name_len..).unwrap_or_default();
    let (len, nested) = N::value_len(ty, rest)?;
    let value = rest
        .get(..len)
        .ok_or_else(|| bad("value overruns its document"))?;
    *pos += 1 + name_len + len;
    Ok(Some(Element {
        ty,
        name,
        value,
        nested,
    }))
}

/// [`next_element_as`] with names as bytes (no UTF-8 checks), by the light walk of
/// [`crate::elements`] where it reads the element plainly and makes every other check
/// [`next_element_as`] makes (a boolean's byte, a string's length and terminator); anything
/// else is read by [`next_element_as`].
fn next_received_element<'d>(
    doc: &'d [u8],
    pos: &mut usize,
) -> Result<Option<RawElement<'d>>, Bad> {
    let mut walk = crate::elements::Elements::at(doc, *pos);
    if let crate::elements::Step::Element(e) = walk.step_inline() {
        let plain = match e.kind {
            0x08 => matches!(e.value, [0 | 1]),
            _ => e.string_framed(),
        };
        if plain {
            *pos = walk.offset();
            return Ok(Some(Element {
                ty: e.kind,
                name: e.key,
                value: e.value,
                nested: (e.kind == KIND_OBJECT || e.kind == KIND_ARRAY).then_some(e.value),
            }));
        }
    }
    next_element_as(doc, pos)
}

/// Whether the framed document `doc` may have a top-level field called `name`: `false` only
/// when the light walk ([`crate::elements`]) reads its elements plainly to the end and none
/// has that name (names compared as bytes), so a caller may skip looking the field up.
pub(crate) fn may_have_field(doc: &[u8], name: &[u8]) -> bool {
    use crate::elements::{Elements, Step};
    let mut walk = Elements::new(doc);
    loop {
        match walk.step() {
            Step::Element(e) if e.key == name => return true,
            Step::Element(_) => {}
            Step::End => return false,
            Step::Unsure => return true,
        }
    }
}

/// The bytes of the first element of the framed document `doc` (type, name, value), when it
/// has one and that element is well-formed.
pub(crate) fn first_element(doc: &[u8]) -> Option<&[u8]> {
    let mut pos = 4;
    next_element(doc, &mut pos).ok()??;
    doc.get(4..pos)
}

/// Validates a whole framed document, iteratively (any depth, no recursion).
fn validate_document(doc: &[u8]) -> Result<(), Bad> {
    if doc_len(doc)? != doc.len() {
        return Err(bad("document length disagrees with its buffer"));
    }
    let mut stack: Vec<(&[u8], usize)> = vec![(doc, 4)];
    while let Some((d, pos)) = stack.last_mut() {
        match next_element(d, pos)? {
            None => {
                stack.pop();
            }
            Some(e) => {
                if let Some(n) = e.nested {
                    stack.push((n, 4));
                }
            }
        }
    }
    Ok(())
}

/// Validates a packed document or array (its whole buffer): well-formed at every level, and
/// array elements named `"0"`, `"1"`, … as the encoder writes them. Scopes of code-with-scope
/// values are leaves, validated as documents.
fn validate_packed(doc: &[u8], array: bool) -> Result<(), Bad> {
    if doc_len(doc)? != doc.len() {
        return Err(bad("packed value length disagrees with its buffer"));
    }
    // (document, position, is an array, next index)
    let mut stack: Vec<(&[u8], usize, bool, u32)> = vec![(doc, 4, array, 0)];
    while let Some((d, pos, is_array, index)) = stack.last_mut() {
        match next_element(d, pos)? {
            None => {
                stack.pop();
            }
            Some(e) => {
                if *is_array {
                    if !is_index_name(e.name.as_bytes(), *index) {
                        return Err(bad("packed array element with a non-canonical name"));
                    }
                    *index = index.checked_add(1).ok_or_else(|| bad("array too long"))?;
                }
                match (e.ty, e.nested) {
                    (KIND_OBJECT | KIND_ARRAY, Some(n)) => {
                        stack.push((n, 4, e.ty == KIND_ARRAY, 0));
                    }
                    (_, Some(scope)) => validate_document(scope)?,
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

/// Checks that `value` is exactly one well-formed scalar value of BSON type `ty`.
fn validate_leaf(ty: u8, value: &[u8]) -> Result<(), Bad> {
    if ty == KIND_OBJECT || ty == KIND_ARRAY {
        return Err(bad("an object or array cannot be a leaf"));
    }
    let (len, nested) = value_len(ty, value)?;
    if len != value.len() {
        return Err(bad(format!(
            "leaf of type {ty:#04x} has {} bytes, its value {len}",
            value.len()
        )));
    }
    if let Some(scope) = nested {
        validate_document(scope)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// One stored node: `(key, value)`.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// The nodes of an encoded document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedDoc {
    /// `(key, value)` pairs in **document order** (preorder, fields in insertion order), the root
    /// node first. This is not key order: sort by key if that matters (a write batch does
    /// not need it).
    pub nodes: Vec<KeyValue>,
    /// Byte length of the BSON document (also in the root node).
    pub bson_size: u32,
}

/// Whether a container node of `size` BSON bytes at `key` is stored packed (see "Packed
/// subtrees" in the module docs): at most half the threshold always, at most the threshold
/// unless it was stored spilled before (`was_spilled`), never above it.
fn packs(limits: &Limits, size: usize, key: &[u8], was_spilled: &dyn Fn(&[u8]) -> bool) -> bool {
    let t = limits.pack_threshold as usize;
    if size > t {
        false
    } else if size <= t / 2 {
        true
    } else {
        !was_spilled(key)
    }
}

/// The keys of `nodes` that hold spilled containers (root, object or array headers): what
/// the hysteresis of a rewrite needs to know about the stored layout.
pub fn spilled_keys<K: AsRef<[u8]>, V: AsRef<[u8]>>(
    nodes: &[(K, V)],
) -> std::collections::HashSet<&[u8]> {
    nodes
        .iter()
        .filter(|(_, v)| {
            matches!(
                v.as_ref().first(),
                Some(&KIND_ROOT | &KIND_OBJECT | &KIND_ARRAY)
            )
        })
        .map(|(k, _)| k.as_ref())
        .collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Root,
    Object,
    Array,
}

struct EncFrame<'d> {
    /// The container's BSON bytes (length prefix through terminator).
    doc: &'d [u8],
    /// Offset of the next element in `doc`.
    pos: usize,
    kind: Kind,
    key_len: usize,
    /// Index of the node in the output whose value this frame fills in when it closes (the
    /// header of a spilled container, the whole value of the outermost packed one).
    header: usize,
    ordinal: u64,
    count: u32,
    /// Nesting level of this container (top-level document = 1).
    depth: usize,
    /// Start of this container's names in the shared name stack.
    names_base: usize,
    /// For a packed container: where its length goes in the pack buffer, and whether it is
    /// the outermost packed one (which becomes a node).
    pack: Option<(usize, bool)>,
}

/// The encoder's shared state.
struct Encoder<'l, 'p> {
    limits: &'l Limits,
    was_spilled: &'p dyn Fn(&[u8]) -> bool,
    nodes: Vec<KeyValue>,
    /// The value of the packed node being written (kind, ordinal, BSON).
    pack: Vec<u8>,
    /// BSON size change from writing canonical array element names.
    size_adjust: i64,
    /// The child count of a spilled root, once it closes.
    root_count: Option<u32>,
}

/// Whether the document `doc`, stored packed, is stored exactly as it is: every check the
/// encoder's walk makes passes (well-formed elements and code-with-scope scopes, nesting
/// within the limit, no duplicate field name in any object) and every array's element names
/// are already the canonical `"0"`, `"1"`, … — so the walk would copy every byte unchanged.
/// `false` sends the document through the walk, which rewrites names or reports the error.
/// Without `UTF8` the names and strings are taken to be UTF-8 (see
/// [`encode_received_document`]) and only the other checks are made.
fn packs_verbatim<const UTF8: bool>(doc: &[u8], limits: &Limits) -> bool {
    struct Frame<'d> {
        doc: &'d [u8],
        pos: usize,
        array: bool,
        index: u32,
        depth: usize,
        names_base: usize,
    }
    let mut stack = Vec::with_capacity(8);
    stack.push(Frame {
        doc,
        pos: 4,
        array: false,
        index: 0,
        depth: 1,
        names_base: 0,
    });
    let mut names: Vec<&[u8]> = Vec::with_capacity(32);
    while let Some(f) = stack.last_mut() {
        let next = if UTF8 {
            next_element(f.doc, &mut f.pos).map(|e| e.map(Element::into_raw))
        } else {
            next_received_element(f.doc, &mut f.pos)
        };
        let e = match next {
            Err(_) => return false,
            Ok(Some(e)) => e,
            Ok(None) => {
                let base = f.names_base;
                if names.get_mut(base..).and_then(smallest_duplicate).is_some() {
                    return false;
                }
                names.truncate(base);
                stack.pop();
                continue;
            }
        };
        if f.array {
            if !is_index_name(e.name, f.index) {
                return false;
            }
            f.index = match f.index.checked_add(1) {
                Some(i) => i,
                None => return false,
            };
        } else {
            names.push(e.name);
        }
        let depth = f.depth;
        if e.ty == KIND_OBJECT || e.ty == KIND_ARRAY {
            if e.value.len() > 5 && depth >= limits.max_nesting {
                return false;
            }
            stack.push(Frame {
                doc: e.value,
                pos: 4,
                array: e.ty == KIND_ARRAY,
                index: 0,
                depth: depth + 1,
                names_base: names.len(),
            });
        } else if let Some(scope) = e.nested
            && validate_document(scope).is_err()
        {
            return false;
        }
    }
    true
}

/// No stored layout: a fresh encoding.
fn never_spilled(_: &[u8]) -> bool {
    false
}

/// Encodes a document under `id_key` with the default [`Limits`] (one key per node).
pub fn encode_document(id_key: &[u8], doc: &RawDocument) -> Result<EncodedDoc, DocError> {
    encode_document_with(id_key, doc, &Limits::default())
}

/// Encodes a document under `id_key`.
pub fn encode_document_with(
    id_key: &[u8],
    doc: &RawDocument,
    limits: &Limits,
) -> Result<EncodedDoc, DocError> {
    encode_document_after(id_key, doc, limits, &never_spilled)
}

/// [`encode_document_with`] for a document whose field names and strings are known to be
/// UTF-8 — one the wire layer validated on receipt (`cairn_wire::bson_check` checks every
/// name and string) or one built from Rust strings: a document stored packed as it is is not
/// checked for UTF-8 again (every other check is made). A document whose text is not UTF-8
/// is still refused when it is walked (spilled, or with array names to rewrite).
pub fn encode_received_document(
    id_key: &[u8],
    doc: &RawDocument,
    limits: &Limits,
) -> Result<EncodedDoc, DocError> {
    encode_document_impl::<false>(id_key, doc, limits, &never_spilled)
}

/// Encodes a document that replaces a stored one: `was_spilled(key)` says whether the stored
/// version held a spilled container at `key` (e.g. from [`spilled_keys`]), for the
/// threshold's hysteresis.
pub fn encode_document_after(
    id_key: &[u8],
    doc: &RawDocument,
    limits: &Limits,
    was_spilled: &dyn Fn(&[u8]) -> bool,
) -> Result<EncodedDoc, DocError> {
    encode_document_impl::<true>(id_key, doc, limits, was_spilled)
}

/// [`encode_document_after`]; the packed fast path checks names and strings are UTF-8 only
/// when `UTF8` (see [`encode_received_document`]).
fn encode_document_impl<const UTF8: bool>(
    id_key: &[u8],
    doc: &RawDocument,
    limits: &Limits,
    was_spilled: &dyn Fn(&[u8]) -> bool,
) -> Result<EncodedDoc, DocError> {
    let bytes = doc.as_bytes();
    if bytes.len() > limits.max_bson_size {
        return Err(DocError::TooLarge {
            size: bytes.len(),
            max: limits.max_bson_size,
        });
    }
    let too_large = || DocError::TooLarge {
        size: bytes.len(),
        max: limits.max_bson_size,
    };
    if doc_len(bytes).map_err(malformed)? != bytes.len() {
        return Err(DocError::Malformed(
            "document length disagrees with its buffer".into(),
        ));
    }
    check_key_len(id_key, limits.max_key_len)?;
    let packed_root = packs(limits, bytes.len(), id_key, was_spilled);
    if packed_root && packs_verbatim::<UTF8>(bytes, limits) {
        // The packed value is the kind byte and the document as it is (see
        // `packs_verbatim`): what the walk below would write, in one copy.
        let mut v = Vec::with_capacity(1 + bytes.len());
        v.push(KIND_PACKED_ROOT);
        v.extend_from_slice(bytes);
        let bson_size = u32::try_from(bytes.len()).map_err(|_| too_large())?;
        return Ok(EncodedDoc {
            nodes: vec![(id_key.to_vec(), v)],
            bson_size,
        });
    }
    let mut enc = Encoder {
        limits,
        was_spilled,
        nodes: vec![(id_key.to_vec(), Vec::new())],
        pack: Vec::new(),
        size_adjust: 0,
        root_count: None,
    };
    let pack = if packed_root {
        // The packed value is the kind byte and the document (canonical array names can
        // add a few bytes): one allocation instead of one per doubling.
        enc.pack.reserve(bytes.len() + 16);
        enc.pack.push(KIND_PACKED_ROOT);
        enc.pack.extend_from_slice(&[0; 4]);
        Some((1, true))
    } else {
        None
    };
    let top = EncFrame {
        doc: bytes,
        pos: 4,
        kind: Kind::Root,
        key_len: id_key.len(),
        header: 0,
        ordinal: 0,
        count: 0,
        depth: 1,
        names_base: 0,
        pack,
    };
    let mut key = id_key.to_vec();
    enc.run(&mut key, top)?;
    let size = usize::try_from(bytes.len() as i64 + enc.size_adjust).map_err(|_| too_large())?;
    let bson_size = u32::try_from(size).map_err(|_| too_large())?;
    if let Some(count) = enc.root_count
        && let Some((_, root)) = enc.nodes.first_mut()
    {
        *root = Node::Root {
            next_ordinal: u64::from(count),
            bson_size,
            child_count: count,
        }
        .to_bytes();
    }
    Ok(EncodedDoc {
        nodes: enc.nodes,
        bson_size,
    })
}

/// Encodes one value as the subtree at `key` (a node key, e.g. from [`node_key`]), for writers
/// that set a field or push an element: returns the value's node(s) in document order, its
/// own node first. `ordinal` is its position among its parent's children (its index in an
/// array); `depth` is the nesting level of the container that holds it (1 for a top-level
/// field), so that the document-wide nesting limit holds.
pub fn encode_subtree(
    key: &[u8],
    ordinal: u64,
    value: RawBsonRef<'_>,
    depth: usize,
    limits: &Limits,
) -> Result<Vec<KeyValue>, DocError> {
    encode_subtree_after(key, ordinal, value, depth, limits, &never_spilled)
}

/// [`encode_subtree`] for a value that replaces a stored one (see [`encode_document_after`]).
pub fn encode_subtree_after(
    key: &[u8],
    ordinal: u64,
    value: RawBsonRef<'_>,
    depth: usize,
    limits: &Limits,
    was_spilled: &dyn Fn(&[u8]) -> bool,
) -> Result<Vec<KeyValue>, DocError> {
    check_key_len(key, limits.max_key_len)?;
    let mut holder = RawDocumentBuf::new();
    holder.append(cstr!(""), value);
    let bytes = holder.as_bytes();
    let mut pos = 4;
    let e = next_element(bytes, &mut pos)
        .map_err(malformed)?
        .ok_or_else(|| DocError::Malformed("empty value".into()))?;
    if e.value.len() > limits.max_bson_size {
        return Err(DocError::TooLarge {
            size: e.value.len(),
            max: limits.max_bson_size,
        });
    }
    let mut enc = Encoder {
        limits,
        was_spilled,
        nodes: vec![(key.to_vec(), Vec::new())],
        pack: Vec::new(),
        size_adjust: 0,
        root_count: None,
    };
    let kind = match e.ty {
        KIND_OBJECT => Kind::Object,
        KIND_ARRAY => Kind::Array,
        ty => {
            if let Some(scope) = e.nested {
                validate_document(scope).map_err(malformed)?;
            }
            let mut v = Vec::with_capacity(11 + e.value.len());
            v.push(ty);
            put_varint(&mut v, ordinal);
            v.extend_from_slice(e.value);
            if let Some(slot) = enc.nodes.first_mut() {
                slot.1 = v;
            }
            return Ok(enc.nodes);
        }
    };
    if e.value.len() > 5 && depth >= limits.max_nesting {
        return Err(DocError::TooDeep {
            limit: limits.max_nesting,
        });
    }
    let pack = if packs(limits, e.value.len(), key, was_spilled) {
        enc.start_pack(kind, ordinal);
        Some((enc.pack.len() - 4, true))
    } else {
        None
    };
    let top = EncFrame {
        doc: e.value,
        pos: 4,
        kind,
        key_len: key.len(),
        header: 0,
        ordinal,
        count: 0,
        depth: depth.saturating_add(1),
        names_base: 0,
        pack,
    };
    let mut key = key.to_vec();
    enc.run(&mut key, top)?;
    Ok(enc.nodes)
}

impl Encoder<'_, '_> {
    /// Starts the value of a packed object or array node: kind, ordinal, and room for the
    /// BSON length.
    fn start_pack(&mut self, kind: Kind, ordinal: u64) {
        self.pack.clear();
        self.pack.push(if kind == Kind::Array {
            KIND_PACKED_ARRAY
        } else {
            KIND_PACKED_OBJECT
        });
        put_varint(&mut self.pack, ordinal);
        self.pack.extend_from_slice(&[0; 4]);
    }

    /// Walks the container `top` (whose node is already at `nodes[top.header]`, key in
    /// `key`), appending nodes for everything below it and filling in the headers.
    fn run<'d>(&mut self, key: &mut Vec<u8>, top: EncFrame<'d>) -> Result<(), DocError> {
        let limits = self.limits;
        let mut stack = Vec::with_capacity(8);
        stack.push(top);
        let mut names: Vec<&'d str> = Vec::with_capacity(32);
        while let Some(frame) = stack.last_mut() {
            let Some(e) = next_element(frame.doc, &mut frame.pos).map_err(malformed)? else {
                let Some(f) = stack.pop() else { break };
                self.close(&f, &mut names)?;
                continue;
            };
            let ordinal = frame.count;
            frame.count = frame
                .count
                .checked_add(1)
                .ok_or_else(|| DocError::Malformed("too many elements".into()))?;
            let depth = frame.depth;
            let is_container = e.ty == KIND_OBJECT || e.ty == KIND_ARRAY;
            if is_container && e.value.len() > 5 && depth >= limits.max_nesting {
                return Err(DocError::TooDeep {
                    limit: limits.max_nesting,
                });
            }
            if frame.kind == Kind::Array {
                self.size_adjust += decimal_len(ordinal) as i64 - e.name.len() as i64;
            } else {
                names.push(e.name);
            }
            let child_kind = if e.ty == KIND_OBJECT {
                Kind::Object
            } else {
                Kind::Array
            };
            if frame.pack.is_some() {
                // Inside a packed container: the element goes into the pack buffer.
                self.pack.push(e.ty);
                if frame.kind == Kind::Array {
                    push_decimal(&mut self.pack, ordinal);
                } else {
                    self.pack.extend_from_slice(e.name.as_bytes());
                }
                self.pack.push(0x00);
                if is_container {
                    let len_pos = self.pack.len();
                    self.pack.extend_from_slice(&[0; 4]);
                    let key_len = frame.key_len;
                    stack.push(EncFrame {
                        doc: e.value,
                        pos: 4,
                        kind: child_kind,
                        key_len,
                        header: 0,
                        ordinal: u64::from(ordinal),
                        count: 0,
                        depth: depth + 1,
                        names_base: names.len(),
                        pack: Some((len_pos, false)),
                    });
                } else {
                    if let Some(scope) = e.nested {
                        validate_document(scope).map_err(malformed)?;
                    }
                    self.pack.extend_from_slice(e.value);
                }
                continue;
            }
            key.truncate(frame.key_len);
            if frame.kind == Kind::Array {
                PathPart::Index(ordinal).write(key);
            } else {
                PathPart::Field(e.name).write(key);
            }
            check_key_len(key, limits.max_key_len)?;
            if is_container {
                let header = self.nodes.len();
                self.nodes.push((key.clone(), Vec::new()));
                let pack = if packs(limits, e.value.len(), key, self.was_spilled) {
                    self.start_pack(child_kind, u64::from(ordinal));
                    Some((self.pack.len() - 4, true))
                } else {
                    None
                };
                stack.push(EncFrame {
                    doc: e.value,
                    pos: 4,
                    kind: child_kind,
                    key_len: key.len(),
                    header,
                    ordinal: u64::from(ordinal),
                    count: 0,
                    depth: depth + 1,
                    names_base: names.len(),
                    pack,
                });
            } else {
                if let Some(scope) = e.nested {
                    validate_document(scope).map_err(malformed)?;
                }
                let mut v = Vec::with_capacity(6 + e.value.len());
                v.push(e.ty);
                put_varint(&mut v, u64::from(ordinal));
                v.extend_from_slice(e.value);
                self.nodes.push((key.clone(), v));
            }
        }
        Ok(())
    }

    /// Checks a closed container's field names for duplicates and writes its header (a
    /// spilled container) or terminates it (a packed one; the outermost becomes its node's
    /// value).
    fn close<'d>(&mut self, f: &EncFrame<'d>, names: &mut Vec<&'d str>) -> Result<(), DocError> {
        if let Some(name) = names.get_mut(f.names_base..).and_then(smallest_duplicate) {
            return Err(DocError::Malformed(format!(
                "duplicate field name {name:?}"
            )));
        }
        names.truncate(f.names_base);
        if let Some((len_pos, outer)) = f.pack {
            self.pack.push(0x00);
            let len = i32::try_from(self.pack.len() - len_pos).map_err(|_| DocError::TooLarge {
                size: self.pack.len(),
                max: self.limits.max_bson_size,
            })?;
            if let Some(slot) = self.pack.get_mut(len_pos..len_pos + 4) {
                slot.copy_from_slice(&len.to_le_bytes());
            }
            if outer && let Some(slot) = self.nodes.get_mut(f.header) {
                slot.1 = std::mem::take(&mut self.pack);
            }
            return Ok(());
        }
        let count = f.count;
        let header = match f.kind {
            // Written by the caller once the whole document (and so its size) is known.
            Kind::Root => {
                self.root_count = Some(count);
                return Ok(());
            }
            Kind::Object => Node::Object {
                ordinal: f.ordinal,
                next_ordinal: u64::from(count),
                child_count: count,
            },
            Kind::Array => Node::Array {
                ordinal: f.ordinal,
                len: count,
            },
        };
        if let Some(slot) = self.nodes.get_mut(f.header) {
            slot.1 = header.to_bytes();
        }
        Ok(())
    }
}

/// Number of decimal digits of `n`.
fn decimal_len(mut n: u32) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Container {
    Object,
    Array,
}

struct DecFrame {
    key_len: usize,
    kind: Container,
    /// Offset in the output of the container's i32 length.
    len_pos: usize,
    /// Start of this object's children in `entries`.
    entries_base: usize,
    count: u32,
    expected: u32,
    /// Children's ordinals must be below this (objects).
    ordinal_limit: u64,
    /// Whether the children so far arrived in increasing ordinal order.
    in_order: bool,
    last_ordinal: Option<u64>,
}

/// Output buffers above this are not pre-reserved from a (possibly corrupt) header.
const MAX_RESERVE: usize = MAX_BSON_SIZE + 16 * 1024;

/// Rebuilds BSON from nodes in key order. Reusable: [`Builder::begin`] resets it.
#[derive(Default)]
struct Builder {
    out: Vec<u8>,
    frames: Vec<DecFrame>,
    /// `(ordinal, element start)` of the children of every open object.
    entries: Vec<(u64, usize)>,
    spans: Vec<(u64, usize, usize)>,
    scratch: Vec<u8>,
    /// The previous node's key; every open container's key is a prefix of it.
    prev_key: Vec<u8>,
    expected_size: Option<u32>,
    /// Packed values are trusted ([`parse_stored_value`]) rather than validated.
    stored: bool,
}

impl Builder {
    /// Starts a container whose header is `node` at `key`; its BSON starts at offset 0.
    fn begin(&mut self, key: &[u8], node: Node<'_>) -> Result<(), DocError> {
        self.out = Vec::new();
        self.frames.clear();
        self.entries.clear();
        self.prev_key.clear();
        self.prev_key.extend_from_slice(key);
        self.expected_size = None;
        let (kind, expected, ordinal_limit) = match node {
            Node::Root {
                next_ordinal,
                bson_size,
                child_count,
            } => {
                self.expected_size = Some(bson_size);
                let size = usize::try_from(bson_size).unwrap_or(MAX_RESERVE);
                self.out.reserve(size.min(MAX_RESERVE));
                (Container::Object, child_count, next_ordinal)
            }
            Node::Object {
                next_ordinal,
                child_count,
                ..
            } => (Container::Object, child_count, next_ordinal),
            Node::Array { len, .. } => (Container::Array, len, u64::MAX),
            Node::PackedRoot { bson } => {
                // The whole document; nothing may follow it.
                self.out.extend_from_slice(bson);
                self.expected_size = u32::try_from(bson.len()).ok();
                return Ok(());
            }
            Node::Leaf { .. } | Node::Packed { .. } => {
                return Err(corrupt("a leaf or packed node is not a header"));
            }
        };
        self.out.extend_from_slice(&[0; 4]);
        self.frames.push(DecFrame {
            key_len: key.len(),
            kind,
            len_pos: 0,
            entries_base: 0,
            count: 0,
            expected,
            ordinal_limit,
            in_order: true,
            last_ordinal: None,
        });
        Ok(())
    }

    /// Adds the next node in key order.
    fn push(&mut self, key: &[u8], value: &[u8]) -> Result<(), DocError> {
        if key <= self.prev_key.as_slice() {
            return Err(corrupt("node keys are not strictly increasing"));
        }
        // Close the containers this key is not inside of.
        let parent_len = loop {
            let Some(top) = self.frames.last() else {
                return Err(corrupt("node outside the document"));
            };
            let k = top.key_len;
            if key.len() > k && key.get(..k) == self.prev_key.get(..k) {
                break k;
            }
            if self.frames.len() == 1 {
                return Err(corrupt("node outside the document"));
            }
            self.close_top()?;
        };
        let rest = key.get(parent_len..).unwrap_or_default();
        let (part, used) = parse_component(rest)?;
        if used != rest.len() {
            return Err(corrupt("node without its parent's header"));
        }
        let node = parse_value_with(value, !self.stored)?;
        let ordinal = node
            .ordinal()
            .ok_or_else(|| corrupt("root header inside a document"))?;
        let Some(top) = self.frames.last_mut() else {
            return Err(corrupt("node outside the document"));
        };
        if top.count >= top.expected {
            return Err(corrupt(format!(
                "container has more children than its header's {}",
                top.expected
            )));
        }
        self.out.push(node.element_type() as u8);
        let elem_start = self.out.len() - 1;
        match (top.kind, part) {
            (Container::Object, PathPart::Field(name)) => {
                if ordinal >= top.ordinal_limit {
                    return Err(corrupt(format!(
                        "ordinal {ordinal} not below the next ordinal {}",
                        top.ordinal_limit
                    )));
                }
                if top.last_ordinal.is_some_and(|last| ordinal <= last) {
                    top.in_order = false;
                }
                top.last_ordinal = Some(ordinal);
                self.out.extend_from_slice(name.as_bytes());
                self.entries.push((ordinal, elem_start));
            }
            (Container::Array, PathPart::Index(i)) => {
                if i != top.count {
                    return Err(corrupt(format!(
                        "array element {i} where element {} was expected",
                        top.count
                    )));
                }
                if ordinal != u64::from(i) {
                    return Err(corrupt(format!("array element {i} has ordinal {ordinal}")));
                }
                push_decimal(&mut self.out, i);
            }
            (kind, _) => {
                return Err(corrupt(format!(
                    "path component does not fit its parent ({kind:?})"
                )));
            }
        }
        self.out.push(0x00);
        top.count += 1;
        let child = match node {
            Node::Leaf { value, .. } | Node::Packed { bson: value, .. } => {
                self.out.extend_from_slice(value);
                None
            }
            Node::Object {
                next_ordinal,
                child_count,
                ..
            } => Some((Container::Object, child_count, next_ordinal)),
            Node::Array { len, .. } => Some((Container::Array, len, u64::MAX)),
            Node::Root { .. } | Node::PackedRoot { .. } => {
                return Err(corrupt("root header inside a document"));
            }
        };
        if let Some((kind, expected, ordinal_limit)) = child {
            let len_pos = self.out.len();
            self.out.extend_from_slice(&[0; 4]);
            self.frames.push(DecFrame {
                key_len: key.len(),
                kind,
                len_pos,
                entries_base: self.entries.len(),
                count: 0,
                expected,
                ordinal_limit,
                in_order: true,
                last_ordinal: None,
            });
        }
        self.prev_key.clear();
        self.prev_key.extend_from_slice(key);
        Ok(())
    }

    /// Closes the innermost open container: checks its count, orders its children by
    /// ordinal, terminates it and patches its length.
    fn close_top(&mut self) -> Result<(), DocError> {
        let Some(f) = self.frames.pop() else {
            return Err(corrupt("no open container"));
        };
        if f.count != f.expected {
            return Err(corrupt(format!(
                "header counts {} children, {} found",
                f.expected, f.count
            )));
        }
        if f.kind == Container::Object && !f.in_order {
            self.reorder(f.entries_base)?;
        }
        self.entries.truncate(f.entries_base);
        self.out.push(0x00);
        let len = self.out.len().saturating_sub(f.len_pos);
        let len = i32::try_from(len).map_err(|_| corrupt("container exceeds 2 GiB"))?;
        let slot = self
            .out
            .get_mut(f.len_pos..f.len_pos + 4)
            .ok_or_else(|| corrupt("container length out of range"))?;
        slot.copy_from_slice(&len.to_le_bytes());
        Ok(())
    }

    /// Rewrites the elements of the object whose entries start at `base` in ordinal order.
    fn reorder(&mut self, base: usize) -> Result<(), DocError> {
        let entries = self.entries.get(base..).unwrap_or_default();
        let Some(&(_, first)) = entries.first() else {
            return Ok(());
        };
        let end = self.out.len();
        self.spans.clear();
        for (i, &(ordinal, start)) in entries.iter().enumerate() {
            let stop = entries.get(i + 1).map_or(end, |e| e.1);
            self.spans.push((ordinal, start, stop));
        }
        self.spans.sort_unstable_by_key(|s| s.0);
        if let Some(dup) = self.spans.windows(2).find_map(|w| match w {
            [a, b] if a.0 == b.0 => Some(a.0),
            _ => None,
        }) {
            return Err(corrupt(format!("two fields share ordinal {dup}")));
        }
        self.scratch.clear();
        for &(_, start, stop) in &self.spans {
            let bytes = self
                .out
                .get(start..stop)
                .ok_or_else(|| corrupt("element out of range"))?;
            self.scratch.extend_from_slice(bytes);
        }
        self.out.truncate(first);
        self.out.extend_from_slice(&self.scratch);
        Ok(())
    }

    /// Closes every open container and returns the BSON bytes.
    fn finish(&mut self) -> Result<Vec<u8>, DocError> {
        while !self.frames.is_empty() {
            self.close_top()?;
        }
        let out = std::mem::take(&mut self.out);
        if let Some(size) = self.expected_size.take()
            && usize::try_from(size).ok() != Some(out.len())
        {
            return Err(corrupt(format!(
                "root header records {size} bytes, the document has {}",
                out.len()
            )));
        }
        Ok(out)
    }
}

/// Appends `n` in decimal (an array element's name).
fn push_decimal(out: &mut Vec<u8>, n: u32) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Whether `name` is `index` in decimal (what [`push_decimal`] writes: digits, no sign, no
/// leading zero), read digit by digit rather than by formatting `index` and comparing.
fn is_index_name(name: &[u8], index: u32) -> bool {
    // u32::MAX has 10 digits, so the value cannot overflow a u64.
    if name.is_empty() || name.len() > 10 || (name.len() > 1 && name.first() == Some(&b'0')) {
        return false;
    }
    let mut value = 0u64;
    for &b in name {
        if !b.is_ascii_digit() {
            return false;
        }
        value = value * 10 + u64::from(b - b'0');
    }
    value == u64::from(index)
}

/// Objects with at most this many fields are checked for duplicate names without sorting
/// (see [`smallest_duplicate`]); larger ones are sorted.
const UNSORTED_NAMES: usize = 16;

/// The smallest name (in byte order) that occurs more than once in `names`, if any; `names`
/// may be reordered. A short list is not sorted: a name is compared with the names before it
/// only when one of them may have its length (a bit per length, modulo 64), so names of
/// distinct lengths cost no comparison.
fn smallest_duplicate<T: Copy + Ord + AsRef<[u8]>>(names: &mut [T]) -> Option<T> {
    if names.len() <= UNSORTED_NAMES {
        let mut dup: Option<T> = None;
        let mut lengths = 0u64;
        for (i, a) in names.iter().enumerate() {
            let bit = 1u64 << (a.as_ref().len() % 64);
            if lengths & bit != 0
                && names.iter().take(i).any(|b| b.as_ref() == a.as_ref())
                && dup.is_none_or(|d| *a < d)
            {
                dup = Some(*a);
            }
            lengths |= bit;
        }
        return dup;
    }
    names.sort_unstable();
    names.windows(2).find_map(|w| match w {
        [a, b] if a == b => Some(*a),
        _ => None,
    })
}

/// An empty document whose buffer has room for `capacity` bytes, so that appending up to
/// that many does not reallocate.
pub fn document_with_capacity(capacity: usize) -> RawDocumentBuf {
    let mut v = Vec::with_capacity(capacity.max(5));
    v.extend_from_slice(&[5, 0, 0, 0, 0]);
    RawDocumentBuf::from_bytes(v).unwrap_or_else(|_| RawDocumentBuf::new())
}

fn into_document(bytes: Vec<u8>) -> Result<RawDocumentBuf, DocError> {
    RawDocumentBuf::from_bytes(bytes).map_err(|e| corrupt(e.to_string()))
}

/// Rebuilds one document from all its nodes in key order (the root header first, as a range
/// scan of `id_key` returns them). `id_key_len` is the length of the document's `id_key`, i.e.
/// of the first key. Fields come back in ordinal order at every level, arrays in index order;
/// any inconsistency is [`DocError::Corrupt`] (an empty iterator too).
pub fn decode_document<K, V>(
    id_key_len: usize,
    nodes: impl IntoIterator<Item = (K, V)>,
) -> Result<RawDocumentBuf, DocError>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    decode_document_with(id_key_len, nodes, false)
}

/// [`decode_document`] for nodes this store wrote, read back from its own keyspace: packed
/// values are checked for their framing only (see [Trusted reads](#trusted-reads)); a
/// packed document is one copy of its bytes.
pub fn decode_stored_document<K, V>(
    id_key_len: usize,
    nodes: impl IntoIterator<Item = (K, V)>,
) -> Result<RawDocumentBuf, DocError>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    decode_document_with(id_key_len, nodes, true)
}

fn decode_document_with<K, V>(
    id_key_len: usize,
    nodes: impl IntoIterator<Item = (K, V)>,
    stored: bool,
) -> Result<RawDocumentBuf, DocError>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let mut it = nodes.into_iter();
    let Some((k0, v0)) = it.next() else {
        return Err(corrupt("document has no nodes"));
    };
    let key = k0.as_ref();
    if key.len() != id_key_len {
        return Err(corrupt("first node is not the document's root"));
    }
    if stored && let Some((&KIND_PACKED_ROOT, bson)) = v0.as_ref().split_first() {
        // A stored packed document (the common read): its framing, all a trusted read
        // checks of it, is exactly what `into_document` checks of the copy, so it is not
        // parsed first.
        if it.next().is_some() {
            return Err(corrupt("node outside the document"));
        }
        return into_document(bson.to_vec());
    }
    let node = parse_value_with(v0.as_ref(), !stored)?;
    if !node.is_root() {
        return Err(corrupt("first node is not a root header"));
    }
    if let Node::PackedRoot { bson } = node {
        // The whole document: nothing may follow it.
        if it.next().is_some() {
            return Err(corrupt("node outside the document"));
        }
        return into_document(bson.to_vec());
    }
    let mut b = Builder {
        stored,
        ..Builder::default()
    };
    b.begin(key, node)?;
    for (k, v) in it {
        b.push(k.as_ref(), v.as_ref())?;
    }
    into_document(b.finish()?)
}

/// Rebuilds the value of one node from the node and its descendants in key order (a prefix
/// scan of its [`node_key`]); `prefix_len` is the length of that key. Returns `None` when
/// `nodes` is empty (no such path), a leaf's value, or the rebuilt object or array (the whole
/// document when the node is a root header).
pub fn decode_subtree<K, V>(
    prefix_len: usize,
    nodes: impl IntoIterator<Item = (K, V)>,
) -> Result<Option<RawBson>, DocError>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    decode_subtree_with(prefix_len, nodes, false)
}

/// [`decode_subtree`] for nodes this store wrote, read back from its own keyspace: packed
/// values are checked for their framing only (see [Trusted reads](#trusted-reads)).
pub fn decode_stored_subtree<K, V>(
    prefix_len: usize,
    nodes: impl IntoIterator<Item = (K, V)>,
) -> Result<Option<RawBson>, DocError>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    decode_subtree_with(prefix_len, nodes, true)
}

fn decode_subtree_with<K, V>(
    prefix_len: usize,
    nodes: impl IntoIterator<Item = (K, V)>,
    stored: bool,
) -> Result<Option<RawBson>, DocError>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let mut it = nodes.into_iter();
    let Some((k0, v0)) = it.next() else {
        return Ok(None);
    };
    let key = k0.as_ref();
    if key.len() != prefix_len {
        return Err(corrupt("first node is not the subtree's root"));
    }
    let node = parse_value_with(v0.as_ref(), !stored)?;
    match node {
        Node::Leaf {
            element_type,
            value,
            ..
        } => {
            if it.next().is_some() {
                return Err(corrupt("a leaf has descendants"));
            }
            return element_to_raw_bson(element_type as u8, value).map(Some);
        }
        Node::Packed { array, bson, .. } => {
            if it.next().is_some() {
                return Err(corrupt("a packed node has descendants"));
            }
            let ty = if array { KIND_ARRAY } else { KIND_OBJECT };
            return element_to_raw_bson(ty, bson).map(Some);
        }
        _ => {}
    }
    let mut b = Builder {
        stored,
        ..Builder::default()
    };
    b.begin(key, node)?;
    for (k, v) in it {
        b.push(k.as_ref(), v.as_ref())?;
    }
    let bytes = b.finish()?;
    match node {
        Node::Array { .. } => element_to_raw_bson(KIND_ARRAY, &bytes).map(Some),
        _ => into_document(bytes).map(|d| Some(RawBson::Document(d))),
    }
}

/// An owned copy of `v` that appends back byte for byte (`RawBson::from` would sort a
/// regular expression's flags).
pub fn owned_value(v: RawBsonRef<'_>) -> RawBson {
    match v {
        RawBsonRef::RegularExpression(re) => RawBson::RegularExpression(bson::Regex {
            pattern: re.pattern.into(),
            options: re.options.into(),
        }),
        other => RawBson::from(other),
    }
}

/// An owned value from a type byte and raw value bytes, parsed (and so validated) by the bson
/// crate; appending it to a document writes `value` back unchanged.
fn element_to_raw_bson(ty: u8, value: &[u8]) -> Result<RawBson, DocError> {
    let total = value.len() + 7;
    let len = i32::try_from(total).map_err(|_| corrupt("value exceeds 2 GiB"))?;
    let mut holder = Vec::with_capacity(total);
    holder.extend_from_slice(&len.to_le_bytes());
    holder.push(ty);
    holder.push(0x00);
    holder.extend_from_slice(value);
    holder.push(0x00);
    let doc = RawDocument::from_bytes(&holder).map_err(|e| corrupt(e.to_string()))?;
    match doc.iter().next() {
        Some(Ok((_, v))) => Ok(owned_value(v)),
        Some(Err(e)) => Err(corrupt(e.to_string())),
        None => Err(corrupt("empty value")),
    }
}

enum AsmState {
    Idle,
    Open,
    Failed(DocError),
}

/// Splits a key-ordered scan over many documents into documents.
///
/// Feed every `(key, value)` of the scan to [`push`](Self::push) in order, then call
/// [`finish`](Self::finish). A document starts at a root header ([`is_root`]) and extends to
/// the next one, which holds because documents occupy disjoint contiguous key ranges and the
/// root header is the smallest key of its range. Each document yields exactly one result, when
/// the next root header arrives (from `push`) or at `finish`: the document, or the first
/// error found in it; the scan can continue after an error. Nodes before the first root header
/// form one failed document. Buffers are reused between documents.
pub struct DocAssembler {
    builder: Builder,
    state: AsmState,
}

impl Default for DocAssembler {
    fn default() -> Self {
        Self::new()
    }
}

impl DocAssembler {
    /// An assembler with no document open.
    pub fn new() -> Self {
        DocAssembler {
            builder: Builder::default(),
            state: AsmState::Idle,
        }
    }

    /// An assembler for a scan of this store's own keyspace: packed values are checked for
    /// their framing only (see [Trusted reads](#trusted-reads)).
    pub fn stored() -> Self {
        DocAssembler {
            builder: Builder {
                stored: true,
                ..Builder::default()
            },
            state: AsmState::Idle,
        }
    }

    /// Adds the next node of the scan; returns the previous document when this node starts a
    /// new one.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<Option<RawDocumentBuf>, DocError> {
        if is_root(value) {
            let previous = self.take();
            let deep = !self.builder.stored;
            self.state =
                match parse_value_with(value, deep).and_then(|n| self.builder.begin(key, n)) {
                    Ok(()) => AsmState::Open,
                    Err(e) => AsmState::Failed(e),
                };
            return previous;
        }
        match &self.state {
            AsmState::Open => {
                if let Err(e) = self.builder.push(key, value) {
                    self.state = AsmState::Failed(e);
                }
            }
            AsmState::Failed(_) => {}
            AsmState::Idle => {
                self.state = AsmState::Failed(corrupt("node before any root header in the scan"));
            }
        }
        Ok(None)
    }

    /// Ends the scan, returning the last document if one is open.
    pub fn finish(&mut self) -> Result<Option<RawDocumentBuf>, DocError> {
        self.take()
    }

    fn take(&mut self) -> Result<Option<RawDocumentBuf>, DocError> {
        match std::mem::replace(&mut self.state, AsmState::Idle) {
            AsmState::Idle => Ok(None),
            AsmState::Open => into_document(self.builder.finish()?).map(Some),
            AsmState::Failed(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Documents of every type, nested, with canonical and other array names, a duplicate
    /// name and a code-with-scope, and each one's variants with one byte changed (some still
    /// well-formed, some not, some with text that is not UTF-8).
    fn scan_cases() -> Vec<Vec<u8>> {
        use bson::{Binary, Bson, JavaScriptCodeWithScope, Regex, Timestamp, doc, spec};
        let docs = [
            doc! {"_id": 1, "s": "héllo", "o": {"a": [1, "x", {"b": true}], "c": null}},
            doc! {
                "_id": "k", "d": 1.5, "bin": Binary { subtype: spec::BinarySubtype::Generic, bytes: vec![1, 2] },
                "old": Binary { subtype: spec::BinarySubtype::BinaryOld, bytes: vec![2, 0, 0, 0, 7, 8] },
                "u": Bson::Undefined, "oid": bson::oid::ObjectId::from_bytes([3; 12]), "t": false,
                "date": bson::DateTime::from_millis(7), "re": Regex { pattern: "a.é".try_into().unwrap(), options: "i".try_into().unwrap() },
                "code": Bson::JavaScriptCode("f()".into()), "sym": Bson::Symbol("s".into()),
                "cws": JavaScriptCodeWithScope { code: "g".into(), scope: doc! {"z": 1} },
                "i": 5_i32, "ts": Timestamp { time: 1, increment: 2 }, "l": 7_i64,
                "dec": bson::Decimal128::from_bytes([0; 16]), "min": Bson::MinKey, "max": Bson::MaxKey,
            },
        ];
        let mut cases = Vec::new();
        for d in docs {
            let b = bson::RawDocumentBuf::try_from(&d).unwrap().into_bytes();
            for i in 0..b.len() {
                for v in [0u8, 1, b'1', 0x7f, 0x80, 0xc3, 0xff] {
                    let mut c = b.clone();
                    c[i] = v;
                    cases.push(c);
                }
            }
            cases.push(b);
        }
        let mut dup = bson::RawDocumentBuf::new();
        dup.append(bson::raw::cstr!("a"), 1);
        dup.append(bson::raw::cstr!("a"), 2);
        cases.push(dup.into_bytes());
        // `{a: [1]}` with the element named "x".
        cases.push(vec![
            20, 0, 0, 0, 0x04, b'a', 0, 12, 0, 0, 0, 0x10, b'x', 0, 1, 0, 0, 0, 0, 0,
        ]);
        cases
    }

    #[test]
    fn packs_verbatim_without_utf8_checks_agrees_on_utf8_text() {
        let limits = Limits::packing(MAX_PACK_THRESHOLD);
        let (mut agreed, mut differed) = (0, 0);
        for c in scan_cases() {
            let checked = packs_verbatim::<true>(&c, &limits);
            let unchecked = packs_verbatim::<false>(&c, &limits);
            // The unchecked scan makes a subset of the checks.
            assert!(!checked || unchecked, "{c:?}");
            if validate_document(&c).is_ok() {
                // Well-formed with UTF-8 text (what the wire layer lets through): the same.
                assert_eq!(checked, unchecked, "{c:?}");
                agreed += 1;
            } else if checked != unchecked {
                differed += 1;
            }
        }
        assert!(agreed > 100 && differed > 0, "{agreed} {differed}");
    }

    #[test]
    fn received_documents_encode_as_checked_ones() {
        for threshold in [0, 64, MAX_PACK_THRESHOLD] {
            let limits = Limits::packing(threshold);
            for c in scan_cases() {
                let Ok(d) = RawDocument::from_bytes(&c) else {
                    continue;
                };
                if validate_document(&c).is_err() {
                    continue;
                }
                let a = encode_document_with(b"k", d, &limits);
                let b = encode_received_document(b"k", d, &limits);
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "{c:?}");
            }
        }
    }

    #[test]
    fn may_have_field_is_false_only_without_the_field() {
        for c in scan_cases() {
            let Ok(d) = RawDocument::from_bytes(&c) else {
                continue;
            };
            let valid = validate_document(&c).is_ok();
            for name in ["_id", "s", "o", "a", "zz", "cws", ""] {
                if !may_have_field(&c, name.as_bytes()) {
                    // Well-formed: the field is absent. Malformed: the bson crate does not
                    // find it either (it may stop at an error before).
                    if valid {
                        assert!(matches!(d.get(name), Ok(None)), "{name} {c:?}");
                    } else {
                        assert!(!matches!(d.get(name), Ok(Some(_))), "{name} {c:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn varints_round_trip_and_reject_bad_encodings() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut pos = 0;
            assert_eq!(get_varint(&out, &mut pos).unwrap(), v);
            assert_eq!(pos, out.len());
        }
        let mut pos = 0;
        assert!(get_varint(&[0x80], &mut pos).is_err(), "truncated");
        let mut pos = 0;
        assert!(get_varint(&[0x80, 0x00], &mut pos).is_err(), "non-minimal");
        let mut pos = 0;
        assert!(
            get_varint(
                &[0xFF; 9].iter().copied().chain([0x02]).collect::<Vec<_>>(),
                &mut pos
            )
            .is_err(),
            "overflow"
        );
        let mut pos = 0;
        assert!(get_varint(&[0xFF; 11], &mut pos).is_err(), "too long");
    }

    #[test]
    fn decimal_names() {
        for n in [0u32, 7, 10, 99, 1000, u32::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().into_bytes());
        }
    }

    /// `is_index_name` answers as comparing with the formatted index.
    #[test]
    fn index_names_read_as_the_formatted_index() {
        let indexes = [
            0u32,
            1,
            7,
            9,
            10,
            11,
            42,
            99,
            100,
            1000,
            4_294_967_294,
            u32::MAX,
        ];
        let mut names: Vec<Vec<u8>> = [
            "",
            "0",
            "00",
            "01",
            "1",
            "10",
            "010",
            "9",
            "42",
            "042",
            "+1",
            "-1",
            "1a",
            "a",
            " 1",
            "1 ",
            "4294967295",
            "4294967296",
            "04294967295",
            "42949672950",
            "18446744073709551615",
            "99999999999",
            "١",
        ]
        .iter()
        .map(|n| n.as_bytes().to_vec())
        .collect();
        names.push(vec![b'1', 0x80]);
        for i in indexes {
            names.push(i.to_string().into_bytes());
        }
        let mut matched = 0;
        for name in &names {
            for &i in &indexes {
                let mut want = Vec::new();
                push_decimal(&mut want, i);
                assert_eq!(is_index_name(name, i), *name == want, "{name:?} {i}");
                matched += usize::from(*name == want);
            }
        }
        assert!(matched >= indexes.len());
    }

    /// `smallest_duplicate` finds what sorting finds, for short lists (not sorted) and long
    /// ones (sorted).
    #[test]
    fn duplicates_found_pairwise_are_those_sorting_finds() {
        let long = "n".repeat(70);
        let pool = [
            "a", "b", "ab", "ba", "abc", "_id", "x", "", "aa", "zz", "é", &long, "n", "abcdef",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for len in 0..40usize {
            for _ in 0..60 {
                let mut names: Vec<&str> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        pool[(seed % pool.len() as u64) as usize]
                    })
                    .collect();
                let mut sorted = names.clone();
                sorted.sort_unstable();
                let want = sorted.windows(2).find_map(|w| match w {
                    [a, b] if a == b => Some(*a),
                    _ => None,
                });
                assert_eq!(smallest_duplicate(&mut names), want, "{names:?}");
            }
        }
    }
}
