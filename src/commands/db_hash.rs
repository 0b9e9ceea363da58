//! `dbHash`: an MD5 digest of each collection's documents and of the whole database.
//!
//! `{dbHash: 1, collections: [names]}` hashes every (or every named) collection of the
//! database: a collection's hash is the MD5 of its documents' BSON in `_id` order — the bytes
//! MongoDB hashes, so equal data gives MongoDB's digests — and `md5` is the MD5 of the
//! collections' hex digests in name order. `system.*` collections are left out except
//! `system.js` and `system.views`, as in MongoDB. Reply: `{host, collections: {name: hex},
//! capped: [], uuids: {name: UUID}, md5, timeMillis, fromCache: []}`. The walk reads one
//! snapshot and checks for interruption between batches.

use bson::{RawArrayBuf, RawBsonRef, RawDocumentBuf, rawdoc};
use cairn_storage::ScanLimits;
use md5::{Digest, Md5};

use super::host_info::pretty_host_name;
use super::{CmdFuture, Command, Counter, Fields, Invocation, type_name};
use crate::blocking;
use crate::error::{CommandError, ErrorCode, key};

/// `dbHash`.
pub static COMMAND: Command = Command {
    name: "dbHash",
    aliases: &["dbhash"],
    help: "Returns an md5 hash of the database's collections",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&["collections", "includeViews"]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Db(&[super::ActionType::DbHash]),
    run,
};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hashed(name: &str) -> bool {
    !name.starts_with("system.") || matches!(name, "system.js" | "system.views")
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let db = inv.req.db.to_string();
        let wanted: Option<Vec<String>> = match body.get("collections") {
            Ok(None) => None,
            Ok(Some(RawBsonRef::Array(a))) => {
                let mut v = Vec::new();
                for el in a {
                    match el {
                        Ok(RawBsonRef::String(s)) => {
                            cairn_storage::namespace::check_collection_name(s).map_err(|_| {
                                CommandError::new(
                                    ErrorCode::InvalidNamespace,
                                    format!("Invalid namespace specified '{db}.{s}'"),
                                )
                            })?;
                            v.push(s.to_string());
                        }
                        Ok(other) => {
                            return Err(CommandError::wrong_type(
                                "dbHash.collections",
                                type_name(&other),
                                "string",
                            ));
                        }
                        Err(e) => {
                            return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string()));
                        }
                    }
                }
                Some(v)
            }
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "dbHash.collections",
                    type_name(&other),
                    "array",
                ));
            }
            Err(e) => return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
        };
        let started = std::time::Instant::now();
        let server = inv.server.clone();
        let d = db.clone();
        let hashes = blocking::run(move || {
            let catalog = server.store.catalog();
            let mut metas: Vec<_> = catalog
                .in_database(&d)
                .filter(|m| hashed(&m.name))
                .filter(|m| wanted.as_ref().is_none_or(|w| w.contains(&m.name)))
                .cloned()
                .collect();
            metas.sort_by(|a, b| a.name.cmp(&b.name));
            let snap = server.store.read()?;
            let mut out = Vec::with_capacity(metas.len());
            for meta in metas {
                let mut h = Md5::new();
                let mut resume: Option<Vec<u8>> = None;
                loop {
                    crate::deadline::check()?;
                    let batch = snap.scan_where(
                        &meta,
                        resume.as_deref(),
                        false,
                        ScanLimits::docs(1000),
                        &mut |_| true,
                    )?;
                    for doc in &batch.docs {
                        h.update(doc.as_bytes());
                    }
                    match batch.resume {
                        Some(r) => resume = Some(r),
                        None => break,
                    }
                }
                out.push((meta.name.clone(), meta.uuid, hex(&h.finalize())));
            }
            Ok(out)
        })
        .await?;
        let mut collections = RawDocumentBuf::new();
        let mut uuids = RawDocumentBuf::new();
        let mut all = Md5::new();
        for (name, uuid, digest) in &hashes {
            collections.append(key(name)?, digest.as_str());
            uuids.append(
                key(name)?,
                bson::Binary {
                    subtype: bson::spec::BinarySubtype::Uuid,
                    bytes: uuid.to_vec(),
                },
            );
            all.update(digest.as_bytes());
        }
        let millis = i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX);
        Ok(rawdoc! {
            "host": pretty_host_name(&inv.server.host, inv.client.local.port()),
            "collections": collections,
            "capped": RawArrayBuf::new(),
            "uuids": uuids,
            "md5": hex(&all.finalize()),
            "timeMillis": millis,
            "fromCache": RawArrayBuf::new(),
        }
        .into())
    })
}
