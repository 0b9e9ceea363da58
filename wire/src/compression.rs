//! OP_COMPRESSED (opcode 2012): snappy, zlib and zstd.
//!
//! Layout after the header:
//! ```text
//! int32 originalOpcode     the opcode of the wrapped message (never OP_COMPRESSED)
//! int32 uncompressedSize   size of the wrapped message without its header
//! uint8 compressorId       0 noop, 1 snappy, 2 zlib, 3 zstd
//! bytes compressedMessage  the rest of the frame
//! ```
//! Invariants: `uncompressedSize` is checked against the message size limit before anything
//! is allocated, decompression never produces more than that many bytes, and a payload that
//! decompresses to any other size is an error. The decompressed message is re-framed with
//! its original header so the rest of the crate decodes it like any other frame.

use std::io::Read;

use crate::HEADER_LEN;
use crate::error::{Result, WireError};
use crate::header::{Header, OpCode};

/// The compressors of the wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compressor {
    /// id 0: uncompressed payload (allowed on input, never chosen for output).
    Noop,
    /// id 1.
    Snappy,
    /// id 2 (with the negotiated compression level, -1 = default).
    Zlib,
    /// id 3.
    Zstd,
}

impl Compressor {
    /// The wire id.
    pub fn id(self) -> u8 {
        match self {
            Compressor::Noop => 0,
            Compressor::Snappy => 1,
            Compressor::Zlib => 2,
            Compressor::Zstd => 3,
        }
    }

    /// The compressor for a wire id.
    pub fn from_id(id: u8) -> Result<Compressor> {
        match id {
            0 => Ok(Compressor::Noop),
            1 => Ok(Compressor::Snappy),
            2 => Ok(Compressor::Zlib),
            3 => Ok(Compressor::Zstd),
            other => Err(WireError::UnknownCompressor(other)),
        }
    }

    /// The name used in `hello.compression`.
    pub fn name(self) -> &'static str {
        match self {
            Compressor::Noop => "noop",
            Compressor::Snappy => "snappy",
            Compressor::Zlib => "zlib",
            Compressor::Zstd => "zstd",
        }
    }

    /// The compressor for a `hello.compression` name.
    pub fn from_name(name: &str) -> Option<Compressor> {
        match name {
            "snappy" => Some(Compressor::Snappy),
            "zlib" => Some(Compressor::Zlib),
            "zstd" => Some(Compressor::Zstd),
            "noop" => Some(Compressor::Noop),
            _ => None,
        }
    }
}

/// A parsed OP_COMPRESSED header plus the decompressed inner frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Decompressed {
    /// Which compressor the sender used.
    pub compressor: Compressor,
    /// The inner message re-framed: a 16-byte header with the original opcode, then the
    /// decompressed payload.
    pub frame: Vec<u8>,
}

/// Decompresses the OP_COMPRESSED frame `frame` (header included). `max` is the message size
/// limit that the inner message must also respect.
pub fn decompress(frame: &[u8], max: usize) -> Result<Decompressed> {
    let header = Header::parse(frame)?;
    let p = frame
        .get(HEADER_LEN..)
        .ok_or(WireError::Truncated("OP_COMPRESSED header"))?;
    let read_i32 = |at: usize| -> Result<i32> {
        p.get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_le_bytes)
            .ok_or(WireError::Truncated("OP_COMPRESSED header"))
    };
    let original = read_i32(0)?;
    let size = read_i32(4)?;
    let id = *p
        .get(8)
        .ok_or(WireError::Truncated("OP_COMPRESSED header"))?;
    let data = p.get(9..).unwrap_or_default();
    match OpCode::from_i32(original) {
        OpCode::Msg | OpCode::Query => {}
        _ => return Err(WireError::BadOriginalOpcode(original)),
    }
    let compressor = Compressor::from_id(id)?;
    let size_usize = usize::try_from(size)
        .map_err(|_| WireError::Decompression(format!("negative uncompressedSize {size}")))?;
    if size_usize > max.saturating_sub(HEADER_LEN) {
        return Err(WireError::MessageTooLarge {
            len: i64::from(size) + HEADER_LEN as i64,
            max,
        });
    }
    let mut out = Vec::with_capacity(HEADER_LEN + size_usize);
    Header {
        message_length: i32::try_from(HEADER_LEN + size_usize).unwrap_or(i32::MAX),
        request_id: header.request_id,
        response_to: header.response_to,
        op_code: OpCode::from_i32(original),
    }
    .write(&mut out);
    match compressor {
        Compressor::Noop => out.extend_from_slice(data),
        Compressor::Snappy => {
            let claimed = snap::raw::decompress_len(data)
                .map_err(|e| WireError::Decompression(e.to_string()))?;
            if claimed != size_usize {
                return Err(WireError::Decompression(format!(
                    "snappy payload is {claimed} bytes, uncompressedSize says {size_usize}"
                )));
            }
            out.resize(HEADER_LEN + size_usize, 0);
            let n = snap::raw::Decoder::new()
                .decompress(data, out.get_mut(HEADER_LEN..).unwrap_or_default())
                .map_err(|e| WireError::Decompression(e.to_string()))?;
            out.truncate(HEADER_LEN + n);
        }
        Compressor::Zlib => {
            flate2::read::ZlibDecoder::new(data)
                .take(size_usize as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| WireError::Decompression(e.to_string()))?;
        }
        Compressor::Zstd => {
            let mut dec = zstd::stream::read::Decoder::new(data)
                .map_err(|e| WireError::Decompression(e.to_string()))?;
            (&mut dec)
                .take(size_usize as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| WireError::Decompression(e.to_string()))?;
        }
    }
    if out.len() != HEADER_LEN + size_usize {
        return Err(WireError::Decompression(format!(
            "payload decompressed to {} bytes, uncompressedSize says {size_usize}",
            out.len().saturating_sub(HEADER_LEN)
        )));
    }
    Ok(Decompressed {
        compressor,
        frame: out,
    })
}

/// Wraps the complete message `message` (header included) in OP_COMPRESSED using
/// `compressor`. The outer header keeps the inner request/response ids.
pub fn compress_message(message: &[u8], compressor: Compressor) -> Result<Vec<u8>> {
    let inner = Header::parse(message)?;
    let payload = message.get(HEADER_LEN..).unwrap_or_default();
    let compressed = match compressor {
        Compressor::Noop => payload.to_vec(),
        Compressor::Snappy => snap::raw::Encoder::new()
            .compress_vec(payload)
            .map_err(|e| WireError::Compression(e.to_string()))?,
        Compressor::Zlib => {
            use std::io::Write;
            let mut enc =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(payload)
                .map_err(|e| WireError::Compression(e.to_string()))?;
            enc.finish()
                .map_err(|e| WireError::Compression(e.to_string()))?
        }
        Compressor::Zstd => {
            zstd::bulk::compress(payload, 0).map_err(|e| WireError::Compression(e.to_string()))?
        }
    };
    let len = HEADER_LEN + 9 + compressed.len();
    let mut out = Vec::with_capacity(len);
    Header {
        message_length: i32::try_from(len).unwrap_or(i32::MAX),
        request_id: inner.request_id,
        response_to: inner.response_to,
        op_code: OpCode::Compressed,
    }
    .write(&mut out);
    out.extend_from_slice(&inner.op_code.as_i32().to_le_bytes());
    out.extend_from_slice(
        &i32::try_from(payload.len())
            .unwrap_or(i32::MAX)
            .to_le_bytes(),
    );
    out.push(compressor.id());
    out.extend_from_slice(&compressed);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_MESSAGE_SIZE;
    use crate::op_msg;
    use bson::rawdoc;

    fn sample() -> Vec<u8> {
        let body = rawdoc! {"insert": "c", "$db": "test", "documents": [{"x": "a".repeat(500)}]};
        op_msg::encode(42, 0, 0, &body, false)
    }

    #[test]
    fn round_trips_every_compressor() {
        let m = sample();
        for c in [
            Compressor::Noop,
            Compressor::Snappy,
            Compressor::Zlib,
            Compressor::Zstd,
        ] {
            let z = compress_message(&m, c).unwrap();
            if c != Compressor::Noop {
                assert!(
                    z.len() < m.len(),
                    "{c:?} should shrink a repetitive message"
                );
            }
            let h = Header::parse(&z).unwrap();
            assert_eq!(h.op_code, OpCode::Compressed);
            assert_eq!(h.request_id, 42);
            let d = decompress(&z, MAX_MESSAGE_SIZE).unwrap();
            assert_eq!(d.compressor, c);
            assert_eq!(d.frame, m);
        }
    }

    #[test]
    fn lying_sizes_are_rejected() {
        let m = sample();
        for c in [
            Compressor::Noop,
            Compressor::Snappy,
            Compressor::Zlib,
            Compressor::Zstd,
        ] {
            let z = compress_message(&m, c).unwrap();
            for delta in [-1i32, 1, 1000] {
                let mut bad = z.clone();
                let real = i32::from_le_bytes(bad[20..24].try_into().unwrap());
                bad[20..24].copy_from_slice(&(real + delta).to_le_bytes());
                assert!(
                    matches!(
                        decompress(&bad, MAX_MESSAGE_SIZE),
                        Err(WireError::Decompression(_))
                    ),
                    "{c:?} {delta}"
                );
            }
            // a huge claimed size is rejected before allocating
            let mut bad = z.clone();
            bad[20..24].copy_from_slice(&i32::MAX.to_le_bytes());
            assert!(matches!(
                decompress(&bad, MAX_MESSAGE_SIZE),
                Err(WireError::MessageTooLarge { .. })
            ));
            let mut bad = z.clone();
            bad[20..24].copy_from_slice(&(-5i32).to_le_bytes());
            assert!(decompress(&bad, MAX_MESSAGE_SIZE).is_err());
        }
    }

    #[test]
    fn unknown_compressor_and_nested_compression_rejected() {
        let z = compress_message(&sample(), Compressor::Snappy).unwrap();
        let mut bad = z.clone();
        bad[24] = 9;
        assert_eq!(
            decompress(&bad, MAX_MESSAGE_SIZE),
            Err(WireError::UnknownCompressor(9))
        );
        let mut bad = z.clone();
        bad[16..20].copy_from_slice(&2012i32.to_le_bytes());
        assert_eq!(
            decompress(&bad, MAX_MESSAGE_SIZE),
            Err(WireError::BadOriginalOpcode(2012))
        );
    }

    #[test]
    fn garbage_payload_is_an_error() {
        let mut z = compress_message(&sample(), Compressor::Zstd).unwrap();
        for b in z[25..].iter_mut() {
            *b ^= 0x5a;
        }
        assert!(decompress(&z, MAX_MESSAGE_SIZE).is_err());
        for c in [Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
            let z = compress_message(&sample(), c).unwrap();
            for n in 16..z.len() {
                let _ = decompress(&z[..n], MAX_MESSAGE_SIZE);
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for c in [Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
            assert_eq!(Compressor::from_name(c.name()), Some(c));
            assert_eq!(Compressor::from_id(c.id()), Ok(c));
        }
        assert_eq!(Compressor::from_name("lz4"), None);
    }
}
