//! The 16-byte standard message header and phase one of two-phase framing.
//!
//! Layout (all little-endian int32):
//! ```text
//! offset 0  messageLength  total size of the message, header included
//! offset 4  requestID      chosen by the sender
//! offset 8  responseTo     requestID this message answers (0 for requests)
//! offset 12 opCode         2013 OP_MSG, 2004 OP_QUERY, 2012 OP_COMPRESSED, 1 OP_REPLY
//! ```
//! Invariant: [`check_frame`] rejects an impossible `messageLength` from the first four bytes
//! alone, so a reader never allocates for a length it has not checked.

use crate::HEADER_LEN;
use crate::error::{Result, WireError};

/// Opcodes of the wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpCode {
    /// OP_REPLY (1): the legacy reply, sent only in answer to OP_QUERY.
    Reply,
    /// OP_QUERY (2004): legacy query; only commands on `<db>.$cmd` are accepted.
    Query,
    /// OP_COMPRESSED (2012): a compressed OP_MSG or OP_QUERY.
    Compressed,
    /// OP_MSG (2013): the modern extensible message.
    Msg,
    /// Any other value.
    Other(i32),
}

impl OpCode {
    /// The opcode for a raw int32.
    pub fn from_i32(v: i32) -> OpCode {
        match v {
            1 => OpCode::Reply,
            2004 => OpCode::Query,
            2012 => OpCode::Compressed,
            2013 => OpCode::Msg,
            other => OpCode::Other(other),
        }
    }

    /// The raw int32 value.
    pub fn as_i32(self) -> i32 {
        match self {
            OpCode::Reply => 1,
            OpCode::Query => 2004,
            OpCode::Compressed => 2012,
            OpCode::Msg => 2013,
            OpCode::Other(v) => v,
        }
    }
}

/// A parsed message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Total message length including the header.
    pub message_length: i32,
    /// The sender's id for this message.
    pub request_id: i32,
    /// The request this message answers.
    pub response_to: i32,
    /// The opcode.
    pub op_code: OpCode,
}

impl Header {
    /// Parses the first 16 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Header> {
        let b: &[u8; HEADER_LEN] = buf
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(WireError::Truncated("message header"))?;
        let [
            l0,
            l1,
            l2,
            l3,
            r0,
            r1,
            r2,
            r3,
            t0,
            t1,
            t2,
            t3,
            o0,
            o1,
            o2,
            o3,
        ] = *b;
        Ok(Header {
            message_length: i32::from_le_bytes([l0, l1, l2, l3]),
            request_id: i32::from_le_bytes([r0, r1, r2, r3]),
            response_to: i32::from_le_bytes([t0, t1, t2, t3]),
            op_code: OpCode::from_i32(i32::from_le_bytes([o0, o1, o2, o3])),
        })
    }

    /// Appends the encoded header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.message_length.to_le_bytes());
        out.extend_from_slice(&self.request_id.to_le_bytes());
        out.extend_from_slice(&self.response_to.to_le_bytes());
        out.extend_from_slice(&self.op_code.as_i32().to_le_bytes());
    }
}

/// Checks a declared message length against the limits.
pub fn check_length(len: i32, max: usize) -> Result<usize> {
    let l = i64::from(len);
    if l < HEADER_LEN as i64 {
        return Err(WireError::MessageTooShort(l));
    }
    let l = usize::try_from(len).map_err(|_| WireError::MessageTooShort(l))?;
    if l > max {
        return Err(WireError::MessageTooLarge {
            len: i64::from(len),
            max,
        });
    }
    Ok(l)
}

/// Phase one of framing: looks at the buffered bytes and answers
/// - `Ok(None)` when fewer than four bytes are buffered (need more),
/// - `Ok(Some(n))` with the validated total length `n` of the frame (which may not be fully
///   buffered yet; the caller reads until it has `n` bytes),
/// - `Err` when the declared length is out of bounds (the connection must be closed).
pub fn check_frame(buf: &[u8], max: usize) -> Result<Option<usize>> {
    match buf.get(..4) {
        None => Ok(None),
        Some(&[a, b, c, d]) => check_length(i32::from_le_bytes([a, b, c, d]), max).map(Some),
        Some(_) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_MESSAGE_SIZE;

    #[test]
    fn header_round_trips() {
        let h = Header {
            message_length: 100,
            request_id: 7,
            response_to: -3,
            op_code: OpCode::Msg,
        };
        let mut out = Vec::new();
        h.write(&mut out);
        assert_eq!(out.len(), HEADER_LEN);
        assert_eq!(Header::parse(&out), Ok(h));
    }

    #[test]
    fn truncated_header_is_an_error() {
        assert_eq!(
            Header::parse(&[1, 2, 3]),
            Err(WireError::Truncated("message header"))
        );
    }

    #[test]
    fn frame_needs_four_bytes() {
        assert_eq!(check_frame(&[], MAX_MESSAGE_SIZE), Ok(None));
        assert_eq!(check_frame(&[16, 0, 0], MAX_MESSAGE_SIZE), Ok(None));
        assert_eq!(check_frame(&[16, 0, 0, 0], MAX_MESSAGE_SIZE), Ok(Some(16)));
    }

    #[test]
    fn frame_length_bounds_are_checked_before_allocating() {
        for bad in [0i32, 15, -1, i32::MIN] {
            let e = check_frame(&bad.to_le_bytes(), MAX_MESSAGE_SIZE).unwrap_err();
            assert!(matches!(e, WireError::MessageTooShort(_)), "{bad}: {e:?}");
            assert!(e.is_fatal());
        }
        let too_big = (MAX_MESSAGE_SIZE as i32 + 1).to_le_bytes();
        let e = check_frame(&too_big, MAX_MESSAGE_SIZE).unwrap_err();
        assert!(matches!(e, WireError::MessageTooLarge { .. }));
        assert!(e.is_fatal());
        assert_eq!(
            check_frame(&(MAX_MESSAGE_SIZE as i32).to_le_bytes(), MAX_MESSAGE_SIZE),
            Ok(Some(MAX_MESSAGE_SIZE))
        );
        assert!(check_frame(&i32::MAX.to_le_bytes(), MAX_MESSAGE_SIZE).is_err());
    }

    #[test]
    fn opcodes_round_trip() {
        for v in [1, 2004, 2012, 2013, 2002, 0, -5] {
            assert_eq!(OpCode::from_i32(v).as_i32(), v);
        }
    }
}
