//! Property tests: arbitrary and mutated byte strings thrown at every parser must produce
//! values or errors, never a panic, and a frame that passes phase one never claims more
//! bytes than the limit.

use bson::rawdoc;
use cairn_wire::compression::{Compressor, compress_message};
use cairn_wire::{MAX_MESSAGE_SIZE, bson_check, decode, header, op_msg, op_query};
use proptest::prelude::*;

fn seeds() -> Vec<Vec<u8>> {
    let body = rawdoc! {"insert": "c", "$db": "test", "ordered": true};
    let docs = vec![
        rawdoc! {"_id": 1, "a": [1, 2, {"b": "x"}]},
        rawdoc! {"_id": 2},
    ];
    let msg = op_msg::encode_with_sequences(1, 0, &body, &[("documents", docs)]);
    let mut out = vec![
        msg.clone(),
        op_msg::encode(2, 0, 0, &body, true),
        op_query::encode_query(3, "admin.$cmd", &rawdoc! {"isMaster": 1, "helloOk": true}),
    ];
    for c in [Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
        out.push(compress_message(&msg, c).unwrap());
    }
    out
}

fn set_len(m: &mut [u8]) {
    let len = (m.len() as i32).to_le_bytes();
    if m.len() >= 4 {
        m[..4].copy_from_slice(&len);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_frames_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..512),
                                 op in prop::sample::select(vec![1i32, 2004, 2005, 2012, 2013, 2002, 77])) {
        if bytes.len() >= 16 {
            bytes[12..16].copy_from_slice(&op.to_le_bytes());
            set_len(&mut bytes);
        }
        let _ = decode(&bytes, MAX_MESSAGE_SIZE);
        let _ = bson_check::validate(&bytes, 200);
        if let Ok(Some(n)) = header::check_frame(&bytes, MAX_MESSAGE_SIZE) {
            prop_assert!((16..=MAX_MESSAGE_SIZE).contains(&n));
        }
    }

    #[test]
    fn mutated_messages_never_panic(seed in 0usize..6,
                                    edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
                                    cut in any::<usize>(), fix_len in any::<bool>()) {
        let mut m = seeds()[seed].clone();
        for (pos, val) in edits {
            let i = pos % m.len();
            m[i] = val;
        }
        let keep = 16 + cut % (m.len() - 15);
        m.truncate(keep);
        if fix_len {
            set_len(&mut m);
        }
        if let Ok(incoming) = decode(&m, MAX_MESSAGE_SIZE) {
            // whatever parsed must be usable without panics too
            if let cairn_wire::Body::Msg(msg) = incoming.body {
                let _ = msg.into_command();
            } else if let cairn_wire::Body::Query(q) = incoming.body {
                let _ = q.command();
            }
        }
    }
}

#[test]
fn seeds_decode() {
    for s in seeds() {
        decode(&s, MAX_MESSAGE_SIZE).unwrap();
    }
}
