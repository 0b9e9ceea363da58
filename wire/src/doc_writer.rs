//! Writing a BSON document by hand into a byte buffer, for the two places that assemble one
//! from pieces they already hold as bytes: a command whose OP_MSG document sequences become
//! arrays of its body ([`crate::op_msg::OpMsg::into_command`]) and a cursor reply whose batch
//! is an array of stored documents (the server's `firstBatch`/`nextBatch`). Copying the
//! documents' bytes once into a buffer of the right size beats re-validating them through a
//! BSON builder.
//!
//! A document is written as: [`open`] (reserves the 4-byte length prefix and returns where it
//! starts), its elements ([`element`] writes an element's type byte and name, the caller its
//! value; [`document_array`] writes a whole array of documents), then [`close`] (the
//! terminating NUL, and the length patched in).
//!
//! Invariants: [`close`] refuses a document longer than `i32::MAX` (BSON lengths are `i32`)
//! with [`WireError::BsonTooLarge`] instead of writing a wrong length; an element name
//! containing NUL is refused ([`WireError::BadCString`]); nothing here panics.

use bson::spec::ElementType;

use crate::error::{Result, WireError};

/// Reserves a document's length prefix at the end of `out`; returns its start for [`close`].
pub fn open(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    start
}

/// Ends the document that [`open`] started at `start`: the terminating NUL, then its length
/// written into the prefix.
pub fn close(out: &mut Vec<u8>, start: usize) -> Result<()> {
    out.push(0);
    let len = out.len().saturating_sub(start);
    let len = i32::try_from(len).map_err(|_| WireError::BsonTooLarge {
        len,
        max: i32::MAX as usize,
    })?;
    match out.get_mut(start..start + 4) {
        Some(slot) => {
            slot.copy_from_slice(&len.to_le_bytes());
            Ok(())
        }
        None => Err(WireError::Truncated("document length prefix")),
    }
}

/// Writes an element's header: its type byte and its NUL-terminated name. The caller writes
/// the value.
pub fn element(out: &mut Vec<u8>, kind: ElementType, name: &[u8]) -> Result<()> {
    if name.contains(&0) {
        return Err(WireError::BadCString("element name"));
    }
    out.push(kind as u8);
    out.extend_from_slice(name);
    out.push(0);
    Ok(())
}

/// The bytes [`document_array`] writes for `count` documents of `doc_bytes` bytes in all
/// under a name of `name_len` bytes (for sizing the buffer up front).
pub fn document_array_len(name_len: usize, count: usize, doc_bytes: usize) -> usize {
    let mut digits = itoa::Buffer::new();
    // type, name, NUL, array length, terminator; per element: type, index name, NUL
    let names: usize = (0..count).map(|i| 2 + digits.format(i).len()).sum();
    1 + name_len + 1 + 4 + 1 + names + doc_bytes
}

/// Writes the element `name: [docs…]`, each item the bytes of one whole document, under the
/// canonical index names `"0"`, `"1"`, ….
pub fn document_array<'a>(
    out: &mut Vec<u8>,
    name: &[u8],
    docs: impl IntoIterator<Item = &'a [u8]>,
) -> Result<()> {
    element(out, ElementType::Array, name)?;
    let array = open(out);
    let mut digits = itoa::Buffer::new();
    for (i, d) in docs.into_iter().enumerate() {
        element(
            out,
            ElementType::EmbeddedDocument,
            digits.format(i).as_bytes(),
        )?;
        out.extend_from_slice(d);
    }
    close(out, array)
}

#[cfg(test)]
mod tests {
    use bson::{RawDocumentBuf, rawdoc};

    use super::*;

    #[test]
    fn writes_what_the_bson_crate_writes() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let docs = [
            rawdoc! {"a": 1},
            rawdoc! {"b": "x", "c": [1, 2]},
            rawdoc! {},
        ];
        let mut out = Vec::new();
        let start = open(&mut out);
        element(&mut out, ElementType::Int32, b"n")?;
        out.extend_from_slice(&7i32.to_le_bytes());
        let before = out.len();
        document_array(&mut out, b"batch", docs.iter().map(|d| d.as_bytes()))?;
        let bytes: usize = docs.iter().map(|d| d.as_bytes().len()).sum();
        assert_eq!(out.len() - before, document_array_len(5, docs.len(), bytes));
        close(&mut out, start)?;
        let mut batch = bson::RawArrayBuf::new();
        for d in &docs {
            batch.push(d.clone());
        }
        let mut want = RawDocumentBuf::new();
        want.append(bson::raw::cstr!("n"), 7);
        want.append(bson::raw::cstr!("batch"), batch);
        assert_eq!(out, want.as_bytes());
        Ok(())
    }

    #[test]
    fn refuses_a_name_with_nul() {
        let mut out = Vec::new();
        assert!(matches!(
            element(&mut out, ElementType::Int32, b"a\0b"),
            Err(WireError::BadCString(_))
        ));
        assert!(document_array(&mut out, b"x\0", []).is_err());
    }

    #[test]
    fn close_without_a_prefix_is_an_error_not_a_panic() {
        let mut out = vec![1u8];
        assert!(close(&mut out, 5).is_err());
    }
}
