//! OP_MSG (opcode 2013): parsing, merging document sequences, encoding.
//!
//! Layout after the 16-byte header:
//! ```text
//! uint32 flagBits
//!        bit 0  checksumPresent  a CRC-32C of the whole message (header included, checksum
//!                                excluded) follows the last section
//!        bit 1  moreToCome       the sender will not wait for a reply to this message
//!        bits 2-15               required: unknown ones make the message invalid
//!        bit 16 exhaustAllowed   the client accepts a stream of moreToCome replies
//!        bits 17-31              optional: ignored when unknown
//! Sections, until the checksum or the end:
//!   kind 0 (body):     one BSON document                          (exactly one per message)
//!   kind 1 (sequence): int32 size (includes itself), cstring identifier, BSON documents
//!                      filling the rest of the size exactly
//! optional uint32 checksum
//! ```
//! Invariants: a parsed [`OpMsg`] has exactly one validated body, sequences with distinct
//! identifiers, and every document validated by [`crate::bson_check`]. The body is borrowed
//! from the frame (not copied); [`OpMsg::into_owned`] copies it when the frame goes away.

use std::borrow::Cow;

use bson::{RawDocument, RawDocumentBuf};
use nom::bytes::complete::take;
use nom::number::complete::{le_i32, le_u8, le_u32};
use nom::{IResult, Parser};

use crate::bson_check;
use crate::doc_writer;
use crate::error::{Result, WireError};
use crate::header::{Header, OpCode};
use crate::{BSON_OBJECT_INTERNAL_SLACK, HEADER_LEN, MAX_BSON_DEPTH, MAX_BSON_OBJECT_SIZE};

/// `checksumPresent` flag bit.
pub const CHECKSUM_PRESENT: u32 = 1 << 0;
/// `moreToCome` flag bit.
pub const MORE_TO_COME: u32 = 1 << 1;
/// `exhaustAllowed` flag bit.
pub const EXHAUST_ALLOWED: u32 = 1 << 16;
/// The required bits (0-15) this server understands.
const KNOWN_REQUIRED: u32 = CHECKSUM_PRESENT | MORE_TO_COME;
/// Mask of the required bits.
const REQUIRED_MASK: u32 = 0xFFFF;
/// MongoDB accepts at most two document sequences per message.
pub const MAX_SEQUENCES: usize = 2;

/// One kind-1 section: a named sequence of documents.
///
/// The documents are kept as they arrived, back to back in one buffer (one allocation per
/// sequence, not per document), each validated.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentSequence {
    /// The identifier, i.e. the command field the documents belong to (`documents`, ...).
    pub identifier: String,
    /// The documents' bytes, concatenated.
    bytes: Vec<u8>,
    /// The end offset of each document in `bytes`.
    ends: Vec<usize>,
}

impl DocumentSequence {
    /// The documents, in order.
    pub fn documents(&self) -> impl Iterator<Item = &RawDocument> + '_ {
        let mut start = 0;
        self.ends.iter().filter_map(move |&end| {
            let d = self.bytes.get(start..end)?;
            start = end;
            RawDocument::from_bytes(d).ok()
        })
    }

    /// How many documents the sequence holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the sequence holds no document.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// A parsed OP_MSG.
#[derive(Debug, Clone, PartialEq)]
pub struct OpMsg<'a> {
    /// The raw flag bits.
    pub flags: u32,
    /// The kind-0 body, borrowed from the frame.
    pub body: Cow<'a, RawDocument>,
    /// The kind-1 sections in message order.
    pub sequences: Vec<DocumentSequence>,
}

type PResult<'a, T> = IResult<&'a [u8], T, nom::error::Error<&'a [u8]>>;

fn truncated(what: &'static str) -> impl Fn(nom::Err<nom::error::Error<&[u8]>>) -> WireError {
    move |_| WireError::Truncated(what)
}

/// Reads one BSON document off the front of `input` (its own length prefix), validates it
/// and checks it against the size limit; returns it (borrowed) and what follows.
fn bson_document(input: &[u8], max_size: usize) -> Result<(&[u8], &RawDocument)> {
    let (rest, bytes) = bson_document_bytes(input, max_size)?;
    let doc = RawDocument::from_bytes(bytes).map_err(|e| WireError::InvalidBson(e.to_string()))?;
    Ok((rest, doc))
}

/// The validated document's bytes and what follows (see [`bson_document`]).
fn bson_document_bytes(input: &[u8], max_size: usize) -> Result<(&[u8], &[u8])> {
    let (_, len) =
        le_i32::<_, nom::error::Error<&[u8]>>(input).map_err(truncated("document length"))?;
    if len < 5 {
        return Err(WireError::InvalidBson(format!(
            "document length {len} below 5"
        )));
    }
    let len = len as usize;
    if len > max_size {
        return Err(WireError::BsonTooLarge { len, max: max_size });
    }
    let (rest, bytes): (&[u8], &[u8]) = take::<_, _, nom::error::Error<&[u8]>>(len)
        .parse(input)
        .map_err(|_| WireError::BadSectionSize("document extends past the end of its section"))?;
    bson_check::validate(bytes, MAX_BSON_DEPTH)?;
    Ok((rest, bytes))
}

fn cstring(input: &[u8]) -> PResult<'_, &[u8]> {
    let (rest, s) = nom::bytes::complete::take_till(|b| b == 0).parse(input)?;
    let (rest, _) = le_u8(rest)?;
    Ok((rest, s))
}

impl<'a> OpMsg<'a> {
    /// Parses an OP_MSG whose complete frame (header included) is `frame`.
    pub fn parse(frame: &'a [u8]) -> Result<OpMsg<'a>> {
        let payload = frame
            .get(HEADER_LEN..)
            .ok_or(WireError::Truncated("OP_MSG header"))?;
        let (rest, flags) = le_u32::<_, nom::error::Error<&[u8]>>(payload)
            .map_err(truncated("OP_MSG flag bits"))?;
        let unknown = flags & REQUIRED_MASK & !KNOWN_REQUIRED;
        if unknown != 0 {
            return Err(WireError::UnknownRequiredFlags(unknown));
        }
        let mut sections = rest;
        let mut checksum: Option<(&[u8], u32)> = None;
        if flags & CHECKSUM_PRESENT != 0 {
            // The flag bits plus the checksum itself need more than 8 bytes after the header.
            let split = frame
                .len()
                .checked_sub(4)
                .filter(|&s| s > HEADER_LEN + 4)
                .ok_or(WireError::ChecksumTooShort)?;
            let (covered, sum) = frame.split_at(split);
            let expected = match sum {
                &[a, b, c, d] => u32::from_le_bytes([a, b, c, d]),
                _ => return Err(WireError::ChecksumTooShort),
            };
            checksum = Some((covered, expected));
            sections = rest
                .get(..rest.len().saturating_sub(4))
                .ok_or(WireError::ChecksumTooShort)?;
        }
        let max_doc = MAX_BSON_OBJECT_SIZE + BSON_OBJECT_INTERNAL_SLACK;
        let mut body: Option<&'a RawDocument> = None;
        let mut sequences: Vec<DocumentSequence> = Vec::new();
        while !sections.is_empty() {
            let (rest, kind) = le_u8::<_, nom::error::Error<&[u8]>>(sections)
                .map_err(truncated("section kind"))?;
            match kind {
                0 => {
                    if body.is_some() {
                        return Err(WireError::MultipleBodies);
                    }
                    let (rest, doc) = bson_document(rest, max_doc)?;
                    body = Some(doc);
                    sections = rest;
                }
                1 => {
                    let (_, size) = le_i32::<_, nom::error::Error<&[u8]>>(rest)
                        .map_err(truncated("document sequence size"))?;
                    if size < 5 {
                        return Err(WireError::BadSectionSize(
                            "document sequence size below the minimum",
                        ));
                    }
                    let (after, section) = take::<_, _, nom::error::Error<&[u8]>>(size as usize)
                        .parse(rest)
                        .map_err(|_| {
                            WireError::BadSectionSize("document sequence extends past the message")
                        })?;
                    let inner = section.get(4..).unwrap_or_default();
                    let (mut docs_bytes, ident) = cstring(inner)
                        .map_err(|_| WireError::BadCString("document sequence identifier"))?;
                    let identifier = std::str::from_utf8(ident)
                        .map_err(|_| WireError::BadCString("document sequence identifier"))?
                        .to_string();
                    if sequences.len() >= MAX_SEQUENCES {
                        return Err(WireError::TooManySequences);
                    }
                    if sequences.iter().any(|s| s.identifier == identifier) {
                        return Err(WireError::DuplicateSequence(identifier));
                    }
                    let all = docs_bytes;
                    let mut ends = Vec::new();
                    while !docs_bytes.is_empty() {
                        let (r, _) = bson_document_bytes(docs_bytes, max_doc)?;
                        ends.push(all.len() - r.len());
                        docs_bytes = r;
                    }
                    sequences.push(DocumentSequence {
                        identifier,
                        bytes: all.to_vec(),
                        ends,
                    });
                    sections = after;
                }
                other => return Err(WireError::UnknownSectionKind(other)),
            }
        }
        let body = body.ok_or(WireError::MissingBody)?;
        for s in &sequences {
            if body
                .get(&s.identifier)
                .map_err(|e| WireError::InvalidBson(e.to_string()))?
                .is_some()
            {
                return Err(WireError::SequenceConflictsWithBody(s.identifier.clone()));
            }
        }
        // Like MongoDB, the checksum is verified after the sections parsed.
        if let Some((covered, expected)) = checksum
            && crc32c::crc32c(covered) != expected
        {
            return Err(WireError::ChecksumMismatch);
        }
        Ok(OpMsg {
            flags,
            body: Cow::Borrowed(body),
            sequences,
        })
    }

    /// The message with its body copied out of the frame.
    pub fn into_owned(self) -> OpMsg<'static> {
        OpMsg {
            flags: self.flags,
            body: Cow::Owned(self.body.into_owned()),
            sequences: self.sequences,
        }
    }

    /// True when `checksumPresent` is set.
    pub fn checksum_present(&self) -> bool {
        self.flags & CHECKSUM_PRESENT != 0
    }

    /// True when `moreToCome` is set (no reply expected).
    pub fn more_to_come(&self) -> bool {
        self.flags & MORE_TO_COME != 0
    }

    /// True when `exhaustAllowed` is set.
    pub fn exhaust_allowed(&self) -> bool {
        self.flags & EXHAUST_ALLOWED != 0
    }

    /// The command document: the body, with every document sequence appended as an array
    /// field named by its identifier. Without sequences the body is returned as is.
    ///
    /// The command is written into one buffer of its exact size: each document is copied
    /// once, after its array element's type and index name.
    pub fn into_command(self) -> Result<Cow<'a, RawDocument>> {
        if self.sequences.is_empty() {
            return Ok(self.body);
        }
        let body = self.body.as_bytes();
        let mut size = body.len();
        for s in &self.sequences {
            size += doc_writer::document_array_len(s.identifier.len(), s.ends.len(), s.bytes.len());
        }
        i32::try_from(size).map_err(|_| WireError::BsonTooLarge {
            len: size,
            max: i32::MAX as usize,
        })?;
        let mut out = Vec::with_capacity(size);
        // The body without its terminator (its length prefix is rewritten by `close`).
        out.extend_from_slice(body.get(..body.len().saturating_sub(1)).unwrap_or_default());
        for s in &self.sequences {
            // An identifier with NUL is refused by `document_array` (`BadCString`).
            let mut start = 0;
            let docs = s.ends.iter().map(|&end| {
                let d = s.bytes.get(start..end).unwrap_or_default();
                start = end;
                d
            });
            doc_writer::document_array(&mut out, s.identifier.as_bytes(), docs)?;
        }
        doc_writer::close(&mut out, 0)?;
        RawDocumentBuf::from_bytes(out)
            .map(Cow::Owned)
            .map_err(|e| WireError::InvalidBson(e.to_string()))
    }
}

/// Encodes an OP_MSG with a single body section. With `checksum` the CRC-32C is appended and
/// `checksumPresent` set.
pub fn encode(
    request_id: i32,
    response_to: i32,
    flags: u32,
    body: &RawDocument,
    checksum: bool,
) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(&mut out, request_id, response_to, flags, body, checksum);
    out
}

/// [`encode`] into `out`, which is cleared first (so a caller can reuse one buffer for every
/// reply).
pub fn encode_into(
    out: &mut Vec<u8>,
    request_id: i32,
    response_to: i32,
    mut flags: u32,
    body: &RawDocument,
    checksum: bool,
) {
    let body = body.as_bytes();
    if checksum {
        flags |= CHECKSUM_PRESENT;
    } else {
        flags &= !CHECKSUM_PRESENT;
    }
    let len = HEADER_LEN + 4 + 1 + body.len() + if checksum { 4 } else { 0 };
    out.clear();
    out.reserve(len);
    Header {
        message_length: i32::try_from(len).unwrap_or(i32::MAX),
        request_id,
        response_to,
        op_code: OpCode::Msg,
    }
    .write(out);
    out.extend_from_slice(&flags.to_le_bytes());
    out.push(0);
    out.extend_from_slice(body);
    if checksum {
        let sum = crc32c::crc32c(out);
        out.extend_from_slice(&sum.to_le_bytes());
    }
}

/// Encodes an OP_MSG with a body and document sequences (used by tests and clients).
pub fn encode_with_sequences(
    request_id: i32,
    flags: u32,
    body: &RawDocument,
    sequences: &[(&str, Vec<RawDocumentBuf>)],
) -> Vec<u8> {
    let mut out = Vec::new();
    Header {
        message_length: 0,
        request_id,
        response_to: 0,
        op_code: OpCode::Msg,
    }
    .write(&mut out);
    out.extend_from_slice(&(flags & !CHECKSUM_PRESENT).to_le_bytes());
    out.push(0);
    out.extend_from_slice(body.as_bytes());
    for (ident, docs) in sequences {
        out.push(1);
        let size: usize =
            4 + ident.len() + 1 + docs.iter().map(|d| d.as_bytes().len()).sum::<usize>();
        out.extend_from_slice(&i32::try_from(size).unwrap_or(i32::MAX).to_le_bytes());
        out.extend_from_slice(ident.as_bytes());
        out.push(0);
        for d in docs {
            out.extend_from_slice(d.as_bytes());
        }
    }
    let len = i32::try_from(out.len()).unwrap_or(i32::MAX).to_le_bytes();
    if let Some(head) = out.get_mut(..4) {
        head.copy_from_slice(&len);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn ping() -> RawDocumentBuf {
        rawdoc! {"ping": 1, "$db": "admin"}
    }

    fn set_len(msg: &mut [u8]) {
        let len = (msg.len() as i32).to_le_bytes();
        msg[..4].copy_from_slice(&len);
    }

    #[test]
    fn parses_a_body() {
        let m = encode(1, 0, 0, &ping(), false);
        let p = OpMsg::parse(&m).unwrap();
        assert_eq!(p.body.as_bytes(), ping().as_bytes());
        assert!(matches!(p.body, Cow::Borrowed(_)), "the body is not copied");
        assert!(p.sequences.is_empty());
        assert!(!p.checksum_present() && !p.more_to_come() && !p.exhaust_allowed());
    }

    #[test]
    fn checksum_verified_and_emitted() {
        let m = encode(1, 0, 0, &ping(), true);
        let p = OpMsg::parse(&m).unwrap();
        assert!(p.checksum_present());
        let mut bad = m.clone();
        let n = bad.len();
        bad[n - 1] ^= 0xff;
        assert_eq!(OpMsg::parse(&bad), Err(WireError::ChecksumMismatch));
        // flipping a body byte also breaks the checksum
        let mut bad = m.clone();
        bad[HEADER_LEN + 8] ^= 1;
        assert!(OpMsg::parse(&bad).is_err());
    }

    #[test]
    fn encode_into_reuses_a_dirty_buffer() {
        let mut out = vec![7u8; 300];
        for checksum in [false, true] {
            encode_into(&mut out, 9, 4, MORE_TO_COME, &ping(), checksum);
            assert_eq!(out, encode(9, 4, MORE_TO_COME, &ping(), checksum));
        }
    }

    #[test]
    fn checksum_flag_on_too_short_message() {
        let mut m = Vec::new();
        Header {
            message_length: 0,
            request_id: 1,
            response_to: 0,
            op_code: OpCode::Msg,
        }
        .write(&mut m);
        m.extend_from_slice(&CHECKSUM_PRESENT.to_le_bytes());
        set_len(&mut m);
        assert_eq!(OpMsg::parse(&m), Err(WireError::ChecksumTooShort));
    }

    #[test]
    fn flag_bits() {
        let m = encode(1, 0, MORE_TO_COME | EXHAUST_ALLOWED, &ping(), false);
        let p = OpMsg::parse(&m).unwrap();
        assert!(p.more_to_come() && p.exhaust_allowed());
        // unknown required bit 2 is rejected
        let m = encode(1, 0, 1 << 2, &ping(), false);
        assert_eq!(OpMsg::parse(&m), Err(WireError::UnknownRequiredFlags(4)));
        // unknown optional bit 20 is ignored
        let m = encode(1, 0, 1 << 20, &ping(), false);
        assert!(OpMsg::parse(&m).is_ok());
    }

    #[test]
    fn two_bodies_rejected() {
        let mut m = encode(1, 0, 0, &ping(), false);
        m.push(0);
        m.extend_from_slice(ping().as_bytes());
        set_len(&mut m);
        assert_eq!(OpMsg::parse(&m), Err(WireError::MultipleBodies));
    }

    #[test]
    fn missing_body_rejected() {
        let m = encode_with_sequences(1, 0, &ping(), &[("documents", vec![rawdoc! {"a": 1}])]);
        // strip the body: rebuild with only the sequence
        let body_len = ping().as_bytes().len();
        let mut only_seq = m[..HEADER_LEN + 4].to_vec();
        only_seq.extend_from_slice(&m[HEADER_LEN + 4 + 1 + body_len..]);
        set_len(&mut only_seq);
        assert_eq!(OpMsg::parse(&only_seq), Err(WireError::MissingBody));
        let mut empty = m[..HEADER_LEN + 4].to_vec();
        set_len(&mut empty);
        assert_eq!(OpMsg::parse(&empty), Err(WireError::MissingBody));
    }

    #[test]
    fn unknown_section_kind_rejected() {
        let mut m = encode(1, 0, 0, &ping(), false);
        m.push(2);
        m.extend_from_slice(ping().as_bytes());
        set_len(&mut m);
        assert_eq!(OpMsg::parse(&m), Err(WireError::UnknownSectionKind(2)));
    }

    #[test]
    fn sequences_merge_into_the_command() {
        let body = rawdoc! {"insert": "c", "$db": "test"};
        let docs = vec![rawdoc! {"_id": 1}, rawdoc! {"_id": 2, "x": "y"}];
        let m = encode_with_sequences(5, 0, &body, &[("documents", docs.clone())]);
        let p = OpMsg::parse(&m).unwrap();
        assert_eq!(p.sequences.len(), 1);
        assert_eq!(p.sequences[0].len(), 2);
        let got: Vec<RawDocumentBuf> = p.sequences[0].documents().map(|d| d.to_owned()).collect();
        assert_eq!(got, docs);
        let cmd = p.into_command().unwrap();
        let expected =
            rawdoc! {"insert": "c", "$db": "test", "documents": [{"_id": 1}, {"_id": 2, "x": "y"}]};
        assert_eq!(cmd.as_bytes(), expected.as_bytes());
    }

    /// The command written in one buffer is byte for byte what appending the body's elements
    /// and one array per sequence gives (multi-digit indexes, two sequences).
    #[test]
    fn merged_command_matches_appended_arrays() {
        let body = rawdoc! {"update": "c", "ordered": false, "$db": "test"};
        let docs: Vec<RawDocumentBuf> = (0..23).map(|i| rawdoc! {"_id": i, "s": "x"}).collect();
        let more = vec![rawdoc! {"q": {}}, rawdoc! {"q": {"a": [1, 2]}}];
        let m = encode_with_sequences(
            5,
            0,
            &body,
            &[("documents", docs.clone()), ("updates", more.clone())],
        );
        let cmd = OpMsg::parse(&m).unwrap().into_command().unwrap();
        let mut want = body.clone();
        for (name, list) in [("documents", &docs), ("updates", &more)] {
            let mut arr = bson::RawArrayBuf::new();
            for d in list {
                arr.push(d.clone());
            }
            want.append(<&bson::raw::CStr>::try_from(name).unwrap(), arr);
        }
        assert_eq!(cmd.as_bytes(), want.as_bytes());
    }

    #[test]
    fn empty_sequence_is_an_empty_array() {
        let body = rawdoc! {"insert": "c", "$db": "test"};
        let m = encode_with_sequences(5, 0, &body, &[("documents", vec![])]);
        let cmd = OpMsg::parse(&m).unwrap().into_command().unwrap();
        assert_eq!(cmd.get_array("documents").unwrap().into_iter().count(), 0);
    }

    #[test]
    fn duplicate_sequence_rejected() {
        let body = rawdoc! {"insert": "c", "$db": "test"};
        let m = encode_with_sequences(
            5,
            0,
            &body,
            &[
                ("documents", vec![rawdoc! {"a": 1}]),
                ("documents", vec![rawdoc! {"a": 2}]),
            ],
        );
        assert_eq!(
            OpMsg::parse(&m),
            Err(WireError::DuplicateSequence("documents".into()))
        );
    }

    #[test]
    fn third_sequence_rejected() {
        let body = rawdoc! {"x": 1, "$db": "test"};
        let one = vec![rawdoc! {"a": 1}];
        let m = encode_with_sequences(
            5,
            0,
            &body,
            &[("a", one.clone()), ("b", one.clone()), ("c", one)],
        );
        let e = OpMsg::parse(&m).unwrap_err();
        assert_eq!(e, WireError::TooManySequences);
        assert!(e.is_fatal());
    }

    #[test]
    fn sequence_conflicting_with_body_rejected() {
        let body = rawdoc! {"insert": "c", "documents": [], "$db": "test"};
        let m = encode_with_sequences(5, 0, &body, &[("documents", vec![rawdoc! {"a": 1}])]);
        assert_eq!(
            OpMsg::parse(&m),
            Err(WireError::SequenceConflictsWithBody("documents".into()))
        );
    }

    #[test]
    fn nested_length_lies_rejected() {
        let body = rawdoc! {"insert": "c", "$db": "test"};
        let good = encode_with_sequences(5, 0, &body, &[("documents", vec![rawdoc! {"a": 1}])]);
        let seq_at = HEADER_LEN + 4 + 1 + body.as_bytes().len() + 1;
        // sequence size larger than the message
        let mut m = good.clone();
        m[seq_at..seq_at + 4].copy_from_slice(&1000i32.to_le_bytes());
        assert!(matches!(
            OpMsg::parse(&m),
            Err(WireError::BadSectionSize(_))
        ));
        // sequence size too small to hold its identifier
        let mut m = good.clone();
        m[seq_at..seq_at + 4].copy_from_slice(&6i32.to_le_bytes());
        assert!(OpMsg::parse(&m).is_err());
        // negative
        let mut m = good.clone();
        m[seq_at..seq_at + 4].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(OpMsg::parse(&m).is_err());
        // body length larger than what is there
        let mut m = good.clone();
        let b = HEADER_LEN + 5;
        m[b..b + 4].copy_from_slice(&10_000i32.to_le_bytes());
        assert!(OpMsg::parse(&m).is_err());
        // a document inside the sequence lying about its length
        let mut m = good.clone();
        let d = seq_at + 4 + "documents".len() + 1;
        m[d..d + 4].copy_from_slice(&100i32.to_le_bytes());
        assert!(OpMsg::parse(&m).is_err());
        // body claiming more than the BSON size limit
        let mut m = good;
        m[b..b + 4].copy_from_slice(&(100_000_000i32).to_le_bytes());
        assert!(matches!(
            OpMsg::parse(&m),
            Err(WireError::BsonTooLarge { .. })
        ));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let body = rawdoc! {"insert": "c", "$db": "test"};
        let good = encode_with_sequences(5, 0, &body, &[("documents", vec![rawdoc! {"a": 1}])]);
        let body_end = HEADER_LEN + 4 + 1 + body.as_bytes().len();
        for n in HEADER_LEN..good.len() {
            let mut m = good[..n].to_vec();
            set_len(&mut m);
            if n == body_end {
                // a message cut right after its body is a valid body-only message
                assert!(OpMsg::parse(&m).unwrap().sequences.is_empty());
            } else {
                assert!(OpMsg::parse(&m).is_err(), "truncated at {n}");
            }
        }
    }
}
