//! Wire-protocol edge cases sent as raw bytes: every malformed message gets MongoDB's
//! answer (an error reply, or a closed connection where MongoDB closes it), and the server
//! keeps serving every other connection.

use std::time::Duration;

use bson::{RawDocumentBuf, rawdoc};
use cairn_compat_tests::{RawConn, TestServer};
use cairn_wire::compression::{Compressor, compress_message};
use cairn_wire::op_msg::{self, CHECKSUM_PRESENT, MORE_TO_COME};
use cairn_wire::op_query::{self, REPLY_AWAIT_CAPABLE, REPLY_QUERY_FAILURE};
use cairn_wire::{HEADER_LEN, OpCode};

fn ping() -> RawDocumentBuf {
    rawdoc! {"ping": 1, "$db": "admin"}
}

fn set_len(m: &mut [u8]) {
    let len = (m.len() as i32).to_le_bytes();
    m[..4].copy_from_slice(&len);
}

fn code(d: &RawDocumentBuf) -> i32 {
    d.get_i32("code").expect("code")
}

async fn expect_error_reply(conn: &mut RawConn, bytes: &[u8], expected: i32) {
    conn.send(bytes).await;
    let r = conn
        .recv()
        .await
        .expect("an error reply, not a closed connection");
    let body = r.body();
    assert_eq!(body.get_f64("ok").unwrap(), 0.0, "{body:?}");
    assert_eq!(code(&body), expected, "{body:?}");
    assert!(
        conn.ping_ok().await,
        "connection still usable after error {expected}"
    );
}

async fn expect_closed(conn: &mut RawConn, bytes: &[u8]) {
    if !conn.send_until_closed(bytes).await {
        return;
    }
    assert!(
        conn.is_closed_within(Duration::from_secs(5)).await,
        "server should close the connection"
    );
}

#[tokio::test]
async fn ping_round_trip_and_response_to() {
    let s = TestServer::start();
    let mut c = s.raw().await;
    let id = c.send_command(&ping(), 0).await;
    let r = c.recv().await.unwrap();
    assert_eq!(r.header.response_to, id);
    assert_eq!(r.header.op_code, OpCode::Msg);
    assert_eq!(
        cairn_compat_tests::strip_raw(&r.body()),
        rawdoc! {"ok": 1.0}
    );
}

#[tokio::test]
async fn db_is_required() {
    let s = TestServer::start();
    let mut c = s.raw().await;
    let r = c.command(rawdoc! {"ping": 1}).await;
    assert_eq!(code(&r), 40571);
    assert_eq!(r.get_str("codeName").unwrap(), "Location40571");
    let r = c.command(rawdoc! {}).await;
    assert_eq!(code(&r), 40571);
    let r = c.command(rawdoc! {"ping": 1, "$db": 5}).await;
    assert_eq!(code(&r), 13111);
}

#[tokio::test]
async fn checksums_are_verified_and_echoed() {
    let s = TestServer::start();
    let mut c = s.raw().await;
    let m = op_msg::encode(7, 0, 0, &ping(), true);
    c.send(&m).await;
    let r = c.recv().await.unwrap();
    let reply = r.msg();
    assert!(
        reply.checksum_present(),
        "reply carries a checksum when the request did"
    );
    assert_eq!(reply.body.get_f64("ok").unwrap(), 1.0);
    // a wrong checksum closes the connection (ChecksumMismatch is connection-fatal)
    let mut bad = op_msg::encode(8, 0, 0, &ping(), true);
    let n = bad.len();
    bad[n - 1] ^= 0x55;
    expect_closed(&mut c, &bad).await;
    // checksum flag on a message too short to hold one → error reply 51252
    let mut c = s.raw().await;
    let mut m = op_msg::encode(9, 0, 0, &ping(), false)[..HEADER_LEN].to_vec();
    m.extend_from_slice(&CHECKSUM_PRESENT.to_le_bytes());
    set_len(&mut m);
    expect_error_reply(&mut c, &m, 51252).await;
}

#[tokio::test]
async fn section_errors_get_replies() {
    let s = TestServer::start();
    let mut c = s.raw().await;
    // two bodies
    let mut m = op_msg::encode(1, 0, 0, &ping(), false);
    m.push(0);
    m.extend_from_slice(ping().as_bytes());
    set_len(&mut m);
    expect_error_reply(&mut c, &m, 40430).await;
    // unknown section kind
    let mut m = op_msg::encode(2, 0, 0, &ping(), false);
    m.push(7);
    m.extend_from_slice(ping().as_bytes());
    set_len(&mut m);
    expect_error_reply(&mut c, &m, 40432).await;
    // no body
    let mut m = op_msg::encode(3, 0, 0, &ping(), false)[..HEADER_LEN + 4].to_vec();
    set_len(&mut m);
    expect_error_reply(&mut c, &m, 40587).await;
    // duplicate sequence
    let body = rawdoc! {"insert": "c", "$db": "test"};
    let m = op_msg::encode_with_sequences(
        4,
        0,
        &body,
        &[("documents", vec![rawdoc! {"a": 1}]), ("documents", vec![])],
    );
    expect_error_reply(&mut c, &m, 40431).await;
    // sequence duplicating a body field
    let body = rawdoc! {"insert": "c", "documents": [], "$db": "test"};
    let m = op_msg::encode_with_sequences(5, 0, &body, &[("documents", vec![])]);
    expect_error_reply(&mut c, &m, 40433).await;
    // a sequence whose size lies past the end of the message
    let body = rawdoc! {"insert": "c", "$db": "test"};
    let mut m =
        op_msg::encode_with_sequences(6, 0, &body, &[("documents", vec![rawdoc! {"a": 1}])]);
    let at = HEADER_LEN + 4 + 1 + body.as_bytes().len() + 1;
    m[at..at + 4].copy_from_slice(&5000i32.to_le_bytes());
    expect_error_reply(&mut c, &m, 15).await;
    // invalid BSON inside the body (bad element type)
    let mut m = op_msg::encode(7, 0, 0, &rawdoc! {"ping": 1, "$db": "admin"}, false);
    m[HEADER_LEN + 4 + 1 + 4] = 0x42;
    expect_error_reply(&mut c, &m, 22).await;
}

#[tokio::test]
async fn fatal_flags_and_lengths_close_the_connection() {
    let s = TestServer::start();
    // unknown required flag bit
    let mut c = s.raw().await;
    expect_closed(&mut c, &op_msg::encode(1, 0, 1 << 5, &ping(), false)).await;
    // a third document sequence
    let mut c = s.raw().await;
    let body = rawdoc! {"x": 1, "$db": "test"};
    let m =
        op_msg::encode_with_sequences(2, 0, &body, &[("a", vec![]), ("b", vec![]), ("c", vec![])]);
    expect_closed(&mut c, &m).await;
    // length below 16
    let mut c = s.raw().await;
    expect_closed(&mut c, &8i32.to_le_bytes()).await;
    // length above 48 MB: rejected from the first four bytes, before allocating
    let mut c = s.raw().await;
    let mut huge = 1_000_000_000i32.to_le_bytes().to_vec();
    huge.extend_from_slice(&[0; 12]);
    expect_closed(&mut c, &huge).await;
    // negative length
    let mut c = s.raw().await;
    expect_closed(&mut c, &(-1i32).to_le_bytes()).await;
    // removed legacy opcode (OP_INSERT) and unknown opcodes
    for op in [2002i32, 2010, 1, 9999] {
        let mut c = s.raw().await;
        let mut m = op_msg::encode(3, 0, 0, &ping(), false);
        m[12..16].copy_from_slice(&op.to_le_bytes());
        expect_closed(&mut c, &m).await;
    }
    // the server is fine
    assert!(s.raw().await.ping_ok().await);
}

#[tokio::test]
async fn op_query_handshake_and_refusals() {
    let s = TestServer::start();
    let mut c = s.raw().await;
    let id = c.next_id();
    c.send(&op_query::encode_query(
        id,
        "admin.$cmd",
        &rawdoc! {"isMaster": 1, "helloOk": true},
    ))
    .await;
    let r = c.recv().await.unwrap();
    assert_eq!(r.header.op_code, OpCode::Reply);
    assert_eq!(r.header.response_to, id);
    let reply = cairn_wire::op_query::parse_reply(&r.frame).unwrap();
    assert_eq!(reply.flags, REPLY_AWAIT_CAPABLE);
    let d = &reply.documents[0];
    assert!(d.get_bool("ismaster").unwrap());
    assert!(d.get_bool("helloOk").unwrap());

    // legacy wrapped form
    let qid = c.next_id();
    c.send(&op_query::encode_query(
        qid,
        "test.$cmd",
        &rawdoc! {"$query": {"hello": 1}, "$readPreference": {"mode": "primary"}},
    ))
    .await;
    let d = c.recv().await.unwrap().reply_doc();
    assert!(d.get_bool("isWritablePrimary").unwrap());

    // commands other than the handshake set → 352
    let qid = c.next_id();
    c.send(&op_query::encode_query(
        qid,
        "admin.$cmd",
        &rawdoc! {"ping": 1},
    ))
    .await;
    let d = c.recv().await.unwrap().reply_doc();
    assert_eq!(code(&d), 352);
    assert_eq!(d.get_str("codeName").unwrap(), "UnsupportedOpQueryCommand");

    // OP_QUERY on a collection → $err 5739101 with QueryFailure
    let qid = c.next_id();
    c.send(&op_query::encode_query(qid, "test.coll", &rawdoc! {"a": 1}))
        .await;
    let r = c.recv().await.unwrap();
    let reply = cairn_wire::op_query::parse_reply(&r.frame).unwrap();
    assert_eq!(reply.flags, REPLY_QUERY_FAILURE);
    assert_eq!(code(&reply.documents[0]), 5739101);
    assert!(reply.documents[0].get_str("$err").is_ok());

    // legacy OP_GET_MORE → $err as well
    let qid = c.next_id();
    let mut m = op_query::encode_query(qid, "test.coll", &rawdoc! {"a": 1});
    m[12..16].copy_from_slice(&2005i32.to_le_bytes());
    c.send(&m).await;
    let r = c.recv().await.unwrap();
    assert_eq!(
        code(
            &cairn_wire::op_query::parse_reply(&r.frame)
                .unwrap()
                .documents[0]
        ),
        5739101
    );

    // the handshake then continues over OP_MSG on the same connection
    assert!(c.ping_ok().await);
}

#[tokio::test]
async fn compressed_requests_get_compressed_replies() {
    let s = TestServer::start();
    let mut c = s.raw().await;
    // negotiate (the server accepts any compressor it enables, as MongoDB 7.0 does)
    let h = c
        .command(
            rawdoc! {"hello": 1, "compression": ["zstd", "lz4", "snappy", "zlib"], "$db": "admin"},
        )
        .await;
    let agreed: Vec<&str> = h
        .get_array("compression")
        .unwrap()
        .into_iter()
        .map(|v| v.unwrap().as_str().unwrap())
        .collect();
    assert_eq!(
        agreed,
        ["zstd", "snappy", "zlib"],
        "client order, server-supported only"
    );
    for comp in [
        Compressor::Snappy,
        Compressor::Zlib,
        Compressor::Zstd,
        Compressor::Noop,
    ] {
        let id = c.next_id();
        let m = op_msg::encode(id, 0, 0, &ping(), false);
        c.send(&compress_message(&m, comp).unwrap()).await;
        let r = c.recv().await.unwrap();
        assert_eq!(r.header.op_code, OpCode::Compressed, "{comp:?}");
        assert_eq!(r.frame[24], comp.id(), "same compressor as the request");
        let inner =
            cairn_wire::compression::decompress(&r.frame, cairn_wire::MAX_MESSAGE_SIZE).unwrap();
        let reply = cairn_wire::OpMsg::parse(&inner.frame).unwrap();
        assert_eq!(reply.body.get_f64("ok").unwrap(), 1.0);
        assert_eq!(inner.frame[8..12], id.to_le_bytes(), "responseTo");
    }
    // an uncompressed request is answered uncompressed
    let id = c.send_command(&ping(), 0).await;
    let r = c.recv().await.unwrap();
    assert_eq!(r.header.op_code, OpCode::Msg);
    assert_eq!(r.header.response_to, id);
    // a hello without `compression` echoes what was negotiated
    let h = c.command(rawdoc! {"hello": 1, "$db": "admin"}).await;
    assert_eq!(h.get_array("compression").unwrap().into_iter().count(), 3);
    // an empty list clears it
    let h = c
        .command(rawdoc! {"hello": 1, "compression": [], "$db": "admin"})
        .await;
    assert!(h.get("compression").unwrap().is_none());
}

#[tokio::test]
async fn broken_compression_closes_the_connection() {
    let s = TestServer::start();
    let m = op_msg::encode(1, 0, 0, &ping(), false);
    let z = compress_message(&m, Compressor::Zlib).unwrap();
    // uncompressedSize lies
    let mut c = s.raw().await;
    let mut bad = z.clone();
    bad[20..24].copy_from_slice(&4000i32.to_le_bytes());
    expect_closed(&mut c, &bad).await;
    // unknown compressor id
    let mut c = s.raw().await;
    let mut bad = z.clone();
    bad[24] = 77;
    expect_closed(&mut c, &bad).await;
    // a decompression bomb claiming more than 48 MB is refused before inflating
    let mut c = s.raw().await;
    let mut bad = z;
    bad[20..24].copy_from_slice(&60_000_000i32.to_le_bytes());
    expect_closed(&mut c, &bad).await;
    assert!(s.raw().await.ping_ok().await);
}

#[tokio::test]
async fn more_to_come_requests_get_no_reply() {
    let s = TestServer::start();
    let mut c = s.raw().await;
    let m = op_msg::encode(50, 0, MORE_TO_COME, &ping(), false);
    c.send(&m).await;
    // the next reply on the wire answers the following request, not the moreToCome one
    let id = c.send_command(&ping(), 0).await;
    let r = c.recv().await.unwrap();
    assert_eq!(r.header.response_to, id);
}

#[tokio::test]
async fn document_sequences_merge_into_commands() {
    let s = TestServer::start();
    let mut c = s.raw().await;
    // ping with a document sequence: strict ping rejects the merged field, proving the merge
    let m = op_msg::encode_with_sequences(
        9,
        0,
        &ping(),
        &[("documents", vec![rawdoc! {"a": 1}, rawdoc! {"b": 2}])],
    );
    c.send(&m).await;
    let r = c.recv().await.unwrap().body();
    assert_eq!(code(&r), 40415);
    assert!(r.get_str("errmsg").unwrap().contains("ping.documents"));
}

#[tokio::test]
async fn garbage_on_one_connection_leaves_others_working() {
    let s = TestServer::start();
    let client = s.client().await;
    let mut good = s.raw().await;
    let mut handles = Vec::new();
    for seed in 0u64..40 {
        let port = s.port;
        handles.push(tokio::spawn(async move {
            let mut c = RawConn::connect(port).await;
            // deterministic pseudo-random bytes with a plausible header
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut bytes = Vec::new();
            for _ in 0..200 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                bytes.push(x as u8);
            }
            let len = 16 + (seed as i32 % 150);
            bytes[..4].copy_from_slice(&len.to_le_bytes());
            bytes[12..16].copy_from_slice(&[2013i32, 2004, 2012][seed as usize % 3].to_le_bytes());
            let _ = tokio::io::AsyncWriteExt::write_all(&mut c.stream, &bytes).await;
            let _ = c.is_closed_within(Duration::from_millis(500)).await;
        }));
        assert!(good.ping_ok().await);
        client
            .database("admin")
            .run_command(bson::doc! {"ping": 1})
            .await
            .unwrap();
    }
    for h in handles {
        h.await.unwrap();
    }
    assert!(good.ping_ok().await);
    assert!(s.raw().await.ping_ok().await);
}

#[tokio::test]
async fn large_command_arrives_in_pieces() {
    let s = TestServer::start();
    let mut c = s.raw().await;
    // A 10 MB message written in small chunks is framed correctly.
    let big = "y".repeat(10 * 1024 * 1024);
    let body = rawdoc! {"ping": 1, "$db": "admin", "comment": big};
    let id = c.next_id();
    let m = op_msg::encode(id, 0, 0, &body, false);
    for chunk in m.chunks(64 * 1024) {
        c.send(chunk).await;
    }
    let r = c.recv().await.unwrap();
    assert_eq!(r.header.response_to, id);
    assert_eq!(r.body().get_f64("ok").unwrap(), 1.0);
    // A body above 16 MiB + 16 KiB is refused with InvalidBSON but the connection survives.
    let huge = "z".repeat(17 * 1024 * 1024);
    let m = op_msg::encode(
        c.next_id(),
        0,
        0,
        &rawdoc! {"ping": 1, "$db": "admin", "comment": huge},
        false,
    );
    expect_error_reply(&mut c, &m, 22).await;
}
