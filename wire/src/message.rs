//! Phase two of framing: decoding one complete frame into a request.
//!
//! [`decode`] dispatches on the opcode, unwrapping OP_COMPRESSED first. When it fails it
//! returns a [`Rejected`] that carries everything the caller needs to answer in the client's
//! own protocol: the request id, whether to answer with OP_REPLY (the request was OP_QUERY)
//! or OP_MSG, and the compressor the client used — or, for fatal errors, that no answer is
//! possible and the connection must close.

use crate::compression::{self, Compressor};
use crate::error::WireError;
use crate::header::{Header, OpCode};
use crate::op_msg::OpMsg;
use crate::op_query::OpQuery;

/// The decoded payload of a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Body<'a> {
    /// An OP_MSG command (its body borrowed from the frame).
    Msg(OpMsg<'a>),
    /// An OP_QUERY (legacy handshake, or a removed query form the server answers with `$err`).
    Query(OpQuery),
    /// A legacy OP_GET_MORE (2005): answered with an `$err` OP_REPLY saying it was removed.
    LegacyGetMore,
}

/// A decoded request.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming<'a> {
    /// The header of the (decompressed) message; `request_id` is what replies answer.
    pub header: Header,
    /// The compressor the client used, if the message came as OP_COMPRESSED.
    pub compressor: Option<Compressor>,
    /// The payload.
    pub body: Body<'a>,
}

impl Incoming<'_> {
    /// The request with nothing borrowed from its frame.
    pub fn into_owned(self) -> Incoming<'static> {
        Incoming {
            header: self.header,
            compressor: self.compressor,
            body: match self.body {
                Body::Msg(m) => Body::Msg(m.into_owned()),
                Body::Query(q) => Body::Query(q),
                Body::LegacyGetMore => Body::LegacyGetMore,
            },
        }
    }
}

/// How a rejected message must be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyProtocol {
    /// With an OP_MSG error document.
    Msg,
    /// With an OP_REPLY carrying the error document (the request was OP_QUERY).
    Reply,
}

/// A message that could not be decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    /// What was wrong.
    pub error: WireError,
    /// The request id to answer (when the header could be read).
    pub request_id: i32,
    /// Which protocol the answer must use.
    pub protocol: ReplyProtocol,
    /// The compressor to answer with.
    pub compressor: Option<Compressor>,
}

impl Rejected {
    /// True when the connection must be closed without an answer.
    pub fn is_fatal(&self) -> bool {
        self.error.is_fatal()
    }
}

/// Decodes the complete frame `frame` (whose length [`crate::header::check_frame`] already
/// validated against `max`). An uncompressed request borrows its body from `frame`; a
/// compressed one owns what it decompressed.
pub fn decode(frame: &[u8], max: usize) -> Result<Incoming<'_>, Rejected> {
    let header = Header::parse(frame).map_err(|error| Rejected {
        error,
        request_id: 0,
        protocol: ReplyProtocol::Msg,
        compressor: None,
    })?;
    if header.op_code == OpCode::Compressed {
        let d = compression::decompress(frame, max).map_err(|error| Rejected {
            error,
            request_id: header.request_id,
            protocol: ReplyProtocol::Msg,
            compressor: None,
        })?;
        let mut inner = decode_uncompressed(&d.frame)
            .map_err(|mut r| {
                r.compressor = Some(d.compressor);
                r
            })?
            .into_owned();
        inner.compressor = Some(d.compressor);
        return Ok(inner);
    }
    decode_uncompressed(frame).map_err(|mut r| {
        r.compressor = None;
        r
    })
}

fn decode_uncompressed(frame: &[u8]) -> Result<Incoming<'_>, Rejected> {
    let header = Header::parse(frame).map_err(|error| Rejected {
        error,
        request_id: 0,
        protocol: ReplyProtocol::Msg,
        compressor: None,
    })?;
    let reject = |error: WireError, protocol: ReplyProtocol| Rejected {
        error,
        request_id: header.request_id,
        protocol,
        compressor: None,
    };
    let body = match header.op_code {
        OpCode::Msg => Body::Msg(OpMsg::parse(frame).map_err(|e| reject(e, ReplyProtocol::Msg))?),
        OpCode::Query => {
            Body::Query(OpQuery::parse(frame).map_err(|e| reject(e, ReplyProtocol::Reply))?)
        }
        OpCode::Other(2005) => Body::LegacyGetMore,
        OpCode::Other(op @ (2001 | 2002 | 2006 | 2007)) => {
            return Err(reject(WireError::LegacyOpcode(op), ReplyProtocol::Msg));
        }
        other => {
            return Err(reject(
                WireError::UnknownOpcode(other.as_i32()),
                ReplyProtocol::Msg,
            ));
        }
    };
    Ok(Incoming {
        header,
        compressor: None,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MAX_MESSAGE_SIZE, op_msg, op_query};
    use bson::rawdoc;

    #[test]
    fn decodes_each_opcode() {
        let m = op_msg::encode(1, 0, 0, &rawdoc! {"ping": 1, "$db": "a"}, false);
        let i = decode(&m, MAX_MESSAGE_SIZE).unwrap();
        assert!(matches!(i.body, Body::Msg(_)));
        assert_eq!(i.compressor, None);

        let q = op_query::encode_query(2, "admin.$cmd", &rawdoc! {"isMaster": 1});
        assert!(matches!(
            decode(&q, MAX_MESSAGE_SIZE).unwrap().body,
            Body::Query(_)
        ));

        let z = compression::compress_message(&m, Compressor::Zlib).unwrap();
        let i = decode(&z, MAX_MESSAGE_SIZE).unwrap();
        assert_eq!(i.compressor, Some(Compressor::Zlib));
        assert_eq!(i.header.request_id, 1);
        assert!(matches!(i.body, Body::Msg(_)));
    }

    #[test]
    fn rejections_say_how_to_answer() {
        // OP_QUERY with a bad document → answer with OP_REPLY
        let mut q = op_query::encode_query(7, "admin.$cmd", &rawdoc! {"isMaster": 1});
        let n = q.len();
        q[n - 1] = 5;
        let r = decode(&q, MAX_MESSAGE_SIZE).unwrap_err();
        assert_eq!(r.protocol, ReplyProtocol::Reply);
        assert_eq!(r.request_id, 7);
        assert!(!r.is_fatal());

        // compressed OP_MSG with two bodies → answer compressed, not fatal
        let mut m = op_msg::encode(9, 0, 0, &rawdoc! {"ping": 1, "$db": "a"}, false);
        m.push(0);
        m.extend_from_slice(rawdoc! {"x": 1}.as_bytes());
        let len = (m.len() as i32).to_le_bytes();
        m[..4].copy_from_slice(&len);
        let z = compression::compress_message(&m, Compressor::Snappy).unwrap();
        let r = decode(&z, MAX_MESSAGE_SIZE).unwrap_err();
        assert_eq!(r.error, WireError::MultipleBodies);
        assert_eq!(r.compressor, Some(Compressor::Snappy));
        assert_eq!(r.request_id, 9);
    }

    #[test]
    fn legacy_and_unknown_opcodes() {
        let mut m = op_msg::encode(1, 0, 0, &rawdoc! {"ping": 1}, false);
        for (op, fatal) in [
            (2002i32, true),
            (2001, true),
            (2007, true),
            (2010, true),
            (1, true),
        ] {
            m[12..16].copy_from_slice(&op.to_le_bytes());
            let r = decode(&m, MAX_MESSAGE_SIZE).unwrap_err();
            assert_eq!(r.is_fatal(), fatal, "{op}");
        }
        m[12..16].copy_from_slice(&2005i32.to_le_bytes());
        assert_eq!(
            decode(&m, MAX_MESSAGE_SIZE).unwrap().body,
            Body::LegacyGetMore
        );
    }
}
