//! A transaction's reads of its own writes and its commit, on fjall (whose write buffer keeps
//! writes in a log until a range read needs a skiplist, vendor/README.md) against the memory
//! engine's model: random interleavings of puts, deletes, point reads and range reads over
//! committed data in two spaces, every answer and the committed contents compared; and the
//! conflict set a commit publishes, whichever form the buffer was in.

use std::ops::Bound;
use std::sync::{LazyLock, Mutex};

use cairn_storage::engine::fjall::{FjallEngine, FjallOptions};
use cairn_storage::engine::memory::MemoryEngine;
use cairn_storage::engine::{Engine, EngineError, Read, SpaceId};
use proptest::prelude::*;

const SPACES: [SpaceId; 2] = [1, 2];

/// One fjall engine for every case (opening one, or a space, is slow); each case empties the
/// spaces first.
static FJALL: LazyLock<Mutex<(tempfile::TempDir, FjallEngine)>> = LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap();
    let e = FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap();
    Mutex::new((dir, e))
});

#[derive(Debug, Clone)]
enum Op {
    Put(usize, u8, u8),
    Delete(usize, u8),
    Get(usize, u8),
    Range(usize, u8, u8, bool),
}

/// A short key: different lengths, shared prefixes.
fn key(k: u8) -> Vec<u8> {
    let mut v = vec![b'k', k % 4];
    v.resize(2 + usize::from(k / 4), k);
    v
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u8..16;
    prop_oneof![
        4 => (0..2usize, k.clone(), any::<u8>()).prop_map(|(s, k, v)| Op::Put(s, k, v)),
        2 => (0..2usize, k.clone()).prop_map(|(s, k)| Op::Delete(s, k)),
        3 => (0..2usize, k.clone()).prop_map(|(s, k)| Op::Get(s, k)),
        1 => (0..2usize, k.clone(), k, any::<bool>()).prop_map(|(s, a, b, r)| Op::Range(s, a, b, r)),
    ]
}

type Rows = Vec<(Vec<u8>, Vec<u8>)>;

fn all(r: &dyn Read, space: SpaceId) -> Rows {
    r.range(space, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

/// Runs `base` (committed first) and then `ops` in one transaction on `e`; returns every
/// read's answer and the spaces' contents after the commit.
fn run(e: &dyn Engine, base: &[(usize, u8, u8)], ops: &[Op]) -> (Vec<Rows>, Vec<Rows>) {
    let spaces = SPACES;
    for s in spaces {
        e.open_space(s).unwrap();
    }
    let mut tx = e.begin().unwrap();
    for s in spaces {
        for (k, _) in all(&*tx, s) {
            tx.delete(s, &k).unwrap();
        }
    }
    tx.commit().unwrap();
    let mut tx = e.begin().unwrap();
    for &(s, k, v) in base {
        tx.put(spaces[s], &key(k), &[v]).unwrap();
    }
    tx.commit().unwrap();
    let mut tx = e.begin().unwrap();
    let mut answers = Vec::new();
    for op in ops {
        match *op {
            Op::Put(s, k, v) => tx.put(spaces[s], &key(k), &[v, k]).unwrap(),
            Op::Delete(s, k) => tx.delete(spaces[s], &key(k)).unwrap(),
            Op::Get(s, k) => answers.push(
                tx.get(spaces[s], &key(k))
                    .unwrap()
                    .map(|v| vec![(key(k), v.to_vec())])
                    .unwrap_or_default(),
            ),
            Op::Range(s, a, b, reverse) => {
                let (lo, hi) = (key(a.min(b)), key(a.max(b)));
                answers.push(
                    tx.range(
                        spaces[s],
                        Bound::Included(&lo),
                        Bound::Excluded(&hi),
                        reverse,
                    )
                    .unwrap()
                    .map(|kv| {
                        let (k, v) = kv.unwrap();
                        (k.to_vec(), v.to_vec())
                    })
                    .collect(),
                );
            }
        }
    }
    tx.commit().unwrap();
    let snap = e.snapshot().unwrap();
    let contents = spaces.iter().map(|&s| all(&*snap, s)).collect();
    (answers, contents)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn own_writes_read_and_commit_as_the_model(
        base in proptest::collection::vec((0..2usize, 0u8..16, any::<u8>()), 0..12),
        ops in proptest::collection::vec(op(), 0..40),
    ) {
        let fjall = FJALL.lock().unwrap();
        let model = MemoryEngine::new();
        prop_assert_eq!(run(&fjall.1, &base, &ops), run(&model, &base, &ops));
    }
}

/// A transaction that read a key another one wrote and committed after its snapshot
/// conflicts, whether the writer's buffer was a log (point reads only) or a skiplist (after a
/// range read), and for overwritten and deleted keys alike; one that read other keys does not.
#[test]
fn the_commit_publishes_every_written_key() {
    let dir = tempfile::tempdir().unwrap();
    let e = FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap();
    e.open_space(1).unwrap();
    for ranged in [false, true] {
        for (i, read) in [&b"a"[..], b"b", b"c", b"d", b"zz"].into_iter().enumerate() {
            let mut reader = e.begin().unwrap();
            reader.get(1, read).unwrap();
            reader
                .put(1, format!("r{ranged}{i}").as_bytes(), b"x")
                .unwrap();
            let mut writer = e.begin().unwrap();
            writer.put(1, b"b", b"1").unwrap();
            writer.get(1, b"b").unwrap();
            writer.put(1, b"a", b"2").unwrap();
            if ranged {
                let _ = writer
                    .range(1, Bound::Unbounded, Bound::Unbounded, false)
                    .unwrap()
                    .count();
            }
            writer.put(1, b"b", b"3").unwrap();
            writer.delete(1, b"c").unwrap();
            writer.put(1, b"d", b"4").unwrap();
            writer.delete(1, b"d").unwrap();
            writer.commit().unwrap();
            let result = reader.commit();
            if read == b"zz" {
                assert_eq!(result, Ok(()), "{ranged} {read:?}");
            } else {
                assert_eq!(result, Err(EngineError::Conflict), "{ranged} {read:?}");
            }
        }
    }
}

/// A commit whose journal batch spans several of the journal writer's runs (64 KiB each,
/// vendor/README.md) is replayed whole after a reopen: its checksum, computed over the runs,
/// matches the one recovery computes item by item.
#[test]
fn a_batch_of_several_journal_runs_replays_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let value = vec![7u8; 1000];
    {
        let e = FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap();
        e.open_space(1).unwrap();
        let mut tx = e.begin().unwrap();
        for i in 0..300u32 {
            tx.put(1, &i.to_be_bytes(), &value).unwrap();
        }
        tx.commit().unwrap();
        let mut tx = e.begin().unwrap();
        tx.put(1, b"after", b"x").unwrap();
        tx.commit().unwrap();
    }
    let e = FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap();
    e.open_space(1).unwrap();
    let rows = all(&*e.snapshot().unwrap(), 1);
    assert_eq!(rows.len(), 301);
    assert!(rows.iter().all(|(k, v)| k == b"after" || *v == value));
}
