//! `cairn healthcheck`: a minimal client that sends `ping` and checks the answer.
//!
//! Used by the container's HEALTHCHECK, where no other MongoDB client is installed. It
//! speaks the real protocol through `cairn-wire`: OP_MSG `{ping: 1, $db: "admin"}`, then reads
//! and parses the reply; success means a well-formed reply with `ok: 1`.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bson::rawdoc;
use cairn_wire::{MAX_MESSAGE_SIZE, OpMsg, header, op_msg};

/// Pings `host:port`; returns a description of the failure if the server is not healthy.
pub fn ping(host: &str, port: u16, timeout: Duration) -> Result<(), String> {
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("resolve {host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("no address for {host}:{port}"))?;
    let mut s =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let msg = op_msg::encode(1, 0, 0, &rawdoc! {"ping": 1, "$db": "admin"}, false);
    s.write_all(&msg).map_err(|e| format!("send: {e}"))?;
    let mut head = [0u8; 4];
    s.read_exact(&mut head)
        .map_err(|e| format!("receive: {e}"))?;
    let len = header::check_frame(&head, MAX_MESSAGE_SIZE)
        .map_err(|e| e.to_string())?
        .ok_or("short reply")?;
    let mut frame = vec![0u8; len];
    frame[..4].copy_from_slice(&head);
    s.read_exact(&mut frame[4..])
        .map_err(|e| format!("receive: {e}"))?;
    let reply = OpMsg::parse(&frame).map_err(|e| format!("bad reply: {e}"))?;
    match reply.body.get("ok") {
        Ok(Some(v)) if v.as_f64() == Some(1.0) || v.as_i32() == Some(1) => Ok(()),
        _ => Err(format!("server answered {:?}", reply.body)),
    }
}
