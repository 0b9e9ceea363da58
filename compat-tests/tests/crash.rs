//! Crash safety: SIGKILL the server while clients insert with `j: true`, restart it, and
//! check that every acknowledged document is present and intact, and that nothing
//! half-written is visible. Runs `CAIRN_CRASH_ITERATIONS` rounds (default 3) on one data
//! directory, so later rounds also recover from earlier crashes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bson::{Bson, Document, doc};
use cairn_compat_tests::TestServer;
use mongodb::options::{InsertManyOptions, WriteConcern};

/// The document for an id: its content is a pure function of the id, so any document
/// found after a crash can be checked for integrity, acknowledged or not.
fn make(id: &str, n: u64) -> Document {
    let arr: Vec<Bson> = (0..(n % 7))
        .map(|i| Bson::Int64((n * 31 + i) as i64))
        .collect();
    doc! {
        "_id": id,
        "n": n as i64,
        "text": format!("payload-{n}-").repeat((n % 13 + 1) as usize),
        "nested": {"arr": arr, "deep": {"flag": n.is_multiple_of(2), "x": n as f64 / 3.0}},
    }
}

fn id_number(d: &Document) -> u64 {
    d.get_i64("n").unwrap() as u64
}

async fn writer(port: u16, task: u32, acked: Arc<Mutex<Vec<String>>>) {
    let uri = format!(
        "mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=2000&connectTimeoutMS=1000&retryWrites=false"
    );
    let client = match mongodb::Client::with_uri_str(uri).await {
        Ok(c) => c,
        Err(e) => panic!("client: {e}"),
    };
    let coll = client.database("crash").collection::<Document>("docs");
    let journaled = InsertManyOptions::builder()
        .write_concern(WriteConcern::builder().journal(true).build())
        .ordered(true)
        .build();
    for batch in 0u64.. {
        let docs: Vec<Document> = (0..5)
            .map(|i| {
                let n = (u64::from(task) << 32) | (batch * 5 + i);
                make(&format!("{task}-{}", batch * 5 + i), n)
            })
            .collect();
        let ids: Vec<String> = docs
            .iter()
            .map(|d| d.get_str("_id").unwrap().to_string())
            .collect();
        match coll.insert_many(docs).with_options(journaled.clone()).await {
            Ok(_) => acked.lock().unwrap().extend(ids),
            Err(e) => {
                eprintln!("writer {task} stopped: {e}");
                return;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_journaled_writes_survive_sigkill() {
    let iterations: u32 = std::env::var("CAIRN_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    let mut all_acked: Vec<String> = Vec::new();
    for round in 0..iterations {
        let s = TestServer::start_in(dir.path(), &[]);
        let acked = Arc::new(Mutex::new(Vec::new()));
        let tasks: Vec<_> = (0..4)
            .map(|t| tokio::spawn(writer(s.port, round * 10 + t, acked.clone())))
            .collect();
        // let the writers run, then pull the plug at a varying moment
        tokio::time::sleep(Duration::from_millis(700 + 350 * u64::from(round % 3))).await;
        s.signal("KILL");
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(20), t).await;
        }
        let acked = acked.lock().unwrap().clone();
        assert!(
            !acked.is_empty(),
            "round {round}: writers made progress before the kill"
        );
        all_acked.extend(acked);
        drop(s);

        // restart and verify
        let s = TestServer::start_in(dir.path(), &[]);
        let c = s.client().await;
        let coll = c.database("crash").collection::<Document>("docs");
        let mut cursor = coll.find(doc! {}).await.unwrap();
        let mut present = std::collections::HashSet::new();
        while cursor.advance().await.unwrap() {
            let d: Document = cursor.deserialize_current().unwrap();
            let id = d.get_str("_id").unwrap().to_string();
            assert_eq!(
                d,
                make(&id, id_number(&d)),
                "round {round}: document {id} is intact"
            );
            present.insert(id);
        }
        for id in &all_acked {
            assert!(
                present.contains(id),
                "round {round}: acknowledged {id} lost"
            );
        }
        // statistics agree with what is there
        let st = c
            .database("crash")
            .run_command(doc! {"collStats": "docs"})
            .await
            .unwrap();
        let count = match st.get("count") {
            Some(Bson::Int32(n)) => i64::from(*n),
            Some(Bson::Int64(n)) => *n,
            other => panic!("count {other:?}"),
        };
        assert_eq!(
            count as usize,
            present.len(),
            "round {round}: count matches the data"
        );
        eprintln!(
            "round {round}: {} acknowledged so far, {} present",
            all_acked.len(),
            present.len()
        );
        drop(c);
        s.signal("TERM");
        let mut s = s;
        assert_eq!(s.wait_exit(Duration::from_secs(15)), Some(0));
    }
}
