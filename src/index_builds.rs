//! Index builds as server operations: run, tracked for `currentOp`, resumed at startup.
//!
//! A build runs on tokio's blocking pool (it may take minutes and must finish even if the
//! client that asked for it disconnects), chunk by chunk in the store
//! ([`cairn_storage::Store::build_index`]), updating an entry in [`IndexBuilds`] that
//! `currentOp` reports (`progress: {done, total}`). Builds left unfinished by a crash or
//! shutdown are restarted from their saved position when the server starts.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bson::RawDocumentBuf;
use tracing::{info, warn};

use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;

/// One running build.
#[derive(Debug)]
pub struct Build {
    /// Operation id (from the same sequence as every other operation, [`crate::ops::next_opid`]).
    pub opid: u64,
    /// `db.coll`.
    pub ns: String,
    /// Index name.
    pub index: String,
    /// The command that asked for it.
    pub command: RawDocumentBuf,
    /// Documents indexed so far.
    pub done: AtomicU64,
    /// Documents in the collection when the build started.
    pub total: u64,
    /// When it started.
    pub started: Instant,
}

/// Running builds by operation id.
#[derive(Debug, Default)]
pub struct IndexBuilds {
    builds: Mutex<HashMap<u64, Arc<Build>>>,
}

impl IndexBuilds {
    /// The running builds.
    pub fn list(&self) -> Vec<Arc<Build>> {
        let mut v: Vec<Arc<Build>> = self
            .builds
            .lock()
            .map(|b| b.values().cloned().collect())
            .unwrap_or_default();
        v.sort_by_key(|b| b.opid);
        v
    }

    fn start(&self, ns: String, index: String, command: RawDocumentBuf, total: u64) -> Arc<Build> {
        let opid = u64::try_from(crate::ops::next_opid()).unwrap_or(0);
        let b = Arc::new(Build {
            opid,
            ns,
            index,
            command,
            done: AtomicU64::new(0),
            total,
            started: Instant::now(),
        });
        if let Ok(mut m) = self.builds.lock() {
            m.insert(opid, b.clone());
        }
        b
    }

    fn finish(&self, opid: u64) {
        if let Ok(mut m) = self.builds.lock() {
            m.remove(&opid);
        }
    }
}

/// Builds one registered index to completion on the blocking pool.
pub async fn run(
    server: &Arc<ServerState>,
    db: &str,
    coll: &str,
    index: &str,
    command: RawDocumentBuf,
) -> Result<(), CommandError> {
    let total = server
        .store
        .collection(db, coll)
        .and_then(|m| server.store.stats(&m).ok())
        .map_or(0, |s| u64::try_from(s.count).unwrap_or(0));
    let build =
        server
            .index_builds
            .start(format!("{db}.{coll}"), index.to_string(), command, total);
    let (srv, db, coll, index) = (
        server.clone(),
        db.to_string(),
        coll.to_string(),
        index.to_string(),
    );
    let b = build.clone();
    let started = Instant::now();
    let r = tokio::task::spawn_blocking(move || {
        srv.store.build_index(&db, &coll, &index, &|n| {
            b.done.fetch_add(n, Ordering::Relaxed);
        })
    })
    .await;
    server.index_builds.finish(build.opid);
    match r {
        Ok(Ok(())) => {
            info!(id = 20663, ns = %build.ns, index = %build.index,
                  documents = build.done.load(Ordering::Relaxed),
                  durationMillis = started.elapsed().as_millis() as u64,
                  "Index build: completed");
            Ok(())
        }
        Ok(Err(e)) => {
            warn!(id = 20649, ns = %build.ns, index = %build.index, error = %e, "Index build: failed");
            Err(CommandError::from(e))
        }
        Err(e) => Err(CommandError::new(
            ErrorCode::InternalError,
            format!("index build task failed: {e}"),
        )),
    }
}

/// Restarts every build a previous run left unfinished (in the background).
pub fn resume_all(server: &Arc<ServerState>) {
    for (db, coll, index) in server.store.building_indexes() {
        let server = server.clone();
        info!(id = 20660, ns = %format!("{db}.{coll}"), index = %index, "Index build: resuming");
        tokio::spawn(async move {
            let cmd = bson::rawdoc! {"createIndexes": coll.as_str(), "resumed": true};
            let _ = run(&server, &db, &coll, &index, cmd).await;
        });
    }
}
