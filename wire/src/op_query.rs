//! OP_QUERY (opcode 2004) and its answer OP_REPLY (opcode 1): the legacy handshake.
//!
//! Drivers (Node, Go, mongosh) open a connection with an `isMaster`/`hello` sent as OP_QUERY
//! against `<db>.$cmd`; everything after the handshake uses OP_MSG. MongoDB 7.0 accepts
//! OP_QUERY only for commands on `<db>.$cmd`, which is what this module parses.
//!
//! OP_QUERY layout after the header:
//! ```text
//! int32   flags
//! cstring fullCollectionName   "<db>.$cmd"
//! int32   numberToSkip
//! int32   numberToReturn
//! document query               the command, possibly wrapped as {$query: cmd, ...}
//! [document returnFieldsSelector]
//! ```
//! OP_REPLY layout after the header:
//! ```text
//! int32 responseFlags   bit 1 QueryFailure, bit 3 AwaitCapable
//! int64 cursorID        0 for command replies
//! int32 startingFrom    0
//! int32 numberReturned  1
//! document              the command reply
//! ```

use bson::{RawDocument, RawDocumentBuf};
use nom::Parser;
use nom::bytes::complete::take_till;
use nom::number::complete::{le_i32, le_u8};

use crate::bson_check;
use crate::error::{Result, WireError};
use crate::header::{Header, OpCode};
use crate::{BSON_OBJECT_INTERNAL_SLACK, HEADER_LEN, MAX_BSON_DEPTH, MAX_BSON_OBJECT_SIZE};

/// OP_REPLY `QueryFailure` flag.
pub const REPLY_QUERY_FAILURE: i32 = 1 << 1;
/// OP_REPLY `AwaitCapable` flag.
pub const REPLY_AWAIT_CAPABLE: i32 = 1 << 3;

/// A parsed OP_QUERY.
#[derive(Debug, Clone, PartialEq)]
pub struct OpQuery {
    /// Query flags (tailable, secondaryOk, ...), unused for commands.
    pub flags: i32,
    /// `<db>.<collection>`.
    pub full_collection_name: String,
    /// numberToSkip.
    pub number_to_skip: i32,
    /// numberToReturn.
    pub number_to_return: i32,
    /// The query document (for commands: the command).
    pub query: RawDocumentBuf,
    /// The optional field selector.
    pub return_fields: Option<RawDocumentBuf>,
}

type NomErr<'a> = nom::error::Error<&'a [u8]>;

fn document(input: &[u8]) -> Result<(&[u8], RawDocumentBuf)> {
    let (_, len) =
        le_i32::<_, NomErr<'_>>(input).map_err(|_| WireError::Truncated("OP_QUERY document"))?;
    if len < 5 {
        return Err(WireError::InvalidBson(format!(
            "document length {len} below 5"
        )));
    }
    let len = len as usize;
    let max = MAX_BSON_OBJECT_SIZE + BSON_OBJECT_INTERNAL_SLACK;
    if len > max {
        return Err(WireError::BsonTooLarge { len, max });
    }
    let bytes = input
        .get(..len)
        .ok_or(WireError::Truncated("OP_QUERY document"))?;
    bson_check::validate(bytes, MAX_BSON_DEPTH)?;
    let doc = RawDocumentBuf::from_bytes(bytes.to_vec())
        .map_err(|e| WireError::InvalidBson(e.to_string()))?;
    Ok((input.get(len..).unwrap_or_default(), doc))
}

impl OpQuery {
    /// Parses an OP_QUERY whose complete frame (header included) is `frame`.
    pub fn parse(frame: &[u8]) -> Result<OpQuery> {
        let payload = frame
            .get(HEADER_LEN..)
            .ok_or(WireError::Truncated("OP_QUERY header"))?;
        let (rest, flags) =
            le_i32::<_, NomErr<'_>>(payload).map_err(|_| WireError::Truncated("OP_QUERY flags"))?;
        let (rest, name) = take_till::<_, _, NomErr<'_>>(|b| b == 0)
            .parse(rest)
            .map_err(|_| WireError::BadCString("fullCollectionName"))?;
        let (rest, _) = le_u8::<_, NomErr<'_>>(rest)
            .map_err(|_| WireError::BadCString("fullCollectionName"))?;
        let full_collection_name = std::str::from_utf8(name)
            .map_err(|_| WireError::BadCString("fullCollectionName"))?
            .to_string();
        let (rest, number_to_skip) = le_i32::<_, NomErr<'_>>(rest)
            .map_err(|_| WireError::Truncated("OP_QUERY numberToSkip"))?;
        let (rest, number_to_return) = le_i32::<_, NomErr<'_>>(rest)
            .map_err(|_| WireError::Truncated("OP_QUERY numberToReturn"))?;
        let (rest, query) = document(rest)?;
        let (rest, return_fields) = if rest.is_empty() {
            (rest, None)
        } else {
            let (r, d) = document(rest)?;
            (r, Some(d))
        };
        if !rest.is_empty() {
            return Err(WireError::TrailingBytes("trailing bytes after OP_QUERY"));
        }
        Ok(OpQuery {
            flags,
            full_collection_name,
            number_to_skip,
            number_to_return,
            query,
            return_fields,
        })
    }

    /// For a query against `<db>.$cmd`: the database name and the command document (unwrapped
    /// from a legacy `{$query: ...}` / `{query: ...}` envelope). Any other namespace is an
    /// error: MongoDB 7.0 no longer answers OP_QUERY finds.
    pub fn command(&self) -> Result<(String, RawDocumentBuf)> {
        let db = match self.full_collection_name.strip_suffix(".$cmd") {
            Some(db) if !db.is_empty() => db.to_string(),
            _ => {
                return Err(WireError::OpQueryNotCommand(
                    self.full_collection_name.clone(),
                ));
            }
        };
        let mut cmd = self.query.clone();
        for wrapper in ["$query", "query"] {
            let is_first = cmd
                .iter()
                .next()
                .and_then(|e| e.ok())
                .map(|(k, _)| k.as_str() == wrapper)
                .unwrap_or(false);
            if is_first {
                if let Ok(inner) = cmd.get_document(wrapper) {
                    cmd = inner.to_owned();
                }
                break;
            }
        }
        Ok((db, cmd))
    }
}

/// Encodes an OP_REPLY carrying one document.
pub fn encode_reply(request_id: i32, response_to: i32, flags: i32, doc: &RawDocument) -> Vec<u8> {
    let body = doc.as_bytes();
    let len = HEADER_LEN + 4 + 8 + 4 + 4 + body.len();
    let mut out = Vec::with_capacity(len);
    Header {
        message_length: i32::try_from(len).unwrap_or(i32::MAX),
        request_id,
        response_to,
        op_code: OpCode::Reply,
    }
    .write(&mut out);
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&0i64.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&1i32.to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// Encodes an OP_QUERY (used by tests and by clients such as the healthcheck).
pub fn encode_query(request_id: i32, namespace: &str, query: &RawDocument) -> Vec<u8> {
    let mut out = Vec::new();
    Header {
        message_length: 0,
        request_id,
        response_to: 0,
        op_code: OpCode::Query,
    }
    .write(&mut out);
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(namespace.as_bytes());
    out.push(0);
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&(-1i32).to_le_bytes());
    out.extend_from_slice(query.as_bytes());
    let len = i32::try_from(out.len()).unwrap_or(i32::MAX).to_le_bytes();
    if let Some(head) = out.get_mut(..4) {
        head.copy_from_slice(&len);
    }
    out
}

/// A parsed OP_REPLY (for clients and tests).
#[derive(Debug, Clone, PartialEq)]
pub struct OpReply {
    /// responseFlags.
    pub flags: i32,
    /// cursorID.
    pub cursor_id: i64,
    /// The returned documents.
    pub documents: Vec<RawDocumentBuf>,
}

/// Parses an OP_REPLY frame.
pub fn parse_reply(frame: &[u8]) -> Result<OpReply> {
    let p = frame
        .get(HEADER_LEN..)
        .ok_or(WireError::Truncated("OP_REPLY header"))?;
    let flags = p
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map(i32::from_le_bytes)
        .ok_or(WireError::Truncated("OP_REPLY flags"))?;
    let cursor_id = p
        .get(4..12)
        .and_then(|b| b.try_into().ok())
        .map(i64::from_le_bytes)
        .ok_or(WireError::Truncated("OP_REPLY cursorID"))?;
    let mut rest = p.get(20..).ok_or(WireError::Truncated("OP_REPLY"))?;
    let mut documents = Vec::new();
    while !rest.is_empty() {
        let (r, d) = document(rest)?;
        documents.push(d);
        rest = r;
    }
    Ok(OpReply {
        flags,
        cursor_id,
        documents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn parses_the_legacy_handshake() {
        let q = rawdoc! {"isMaster": 1, "helloOk": true, "client": {"driver": {"name": "nodejs"}}};
        let m = encode_query(3, "admin.$cmd", &q);
        let p = OpQuery::parse(&m).unwrap();
        assert_eq!(p.full_collection_name, "admin.$cmd");
        assert_eq!(p.number_to_return, -1);
        let (db, cmd) = p.command().unwrap();
        assert_eq!(db, "admin");
        assert_eq!(cmd, q);
    }

    #[test]
    fn unwraps_query_envelope() {
        let q = rawdoc! {"$query": {"ismaster": 1}, "$readPreference": {"mode": "primary"}};
        let m = encode_query(3, "test.$cmd", &q);
        let (_, cmd) = OpQuery::parse(&m).unwrap().command().unwrap();
        assert_eq!(cmd, rawdoc! {"ismaster": 1});
    }

    #[test]
    fn non_command_namespace_rejected() {
        let m = encode_query(3, "test.coll", &rawdoc! {"a": 1});
        let p = OpQuery::parse(&m).unwrap();
        assert!(matches!(p.command(), Err(WireError::OpQueryNotCommand(_))));
        let m = encode_query(3, ".$cmd", &rawdoc! {"a": 1});
        assert!(OpQuery::parse(&m).unwrap().command().is_err());
    }

    #[test]
    fn every_truncation_is_an_error() {
        let m = encode_query(3, "admin.$cmd", &rawdoc! {"isMaster": 1});
        for n in HEADER_LEN..m.len() {
            assert!(OpQuery::parse(&m[..n]).is_err(), "truncated at {n}");
        }
        let mut t = m.clone();
        t.push(7);
        assert!(OpQuery::parse(&t).is_err());
    }

    #[test]
    fn reply_round_trips() {
        let d = rawdoc! {"ok": 1.0};
        let r = encode_reply(9, 3, 0, &d);
        let h = Header::parse(&r).unwrap();
        assert_eq!(h.message_length as usize, r.len());
        assert_eq!(h.response_to, 3);
        assert_eq!(h.op_code, OpCode::Reply);
        let p = parse_reply(&r).unwrap();
        assert_eq!(p.documents, vec![d]);
        assert_eq!(p.cursor_id, 0);
    }
}
