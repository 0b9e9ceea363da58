//! `$out: "coll"` or `{db, coll}`: replaces a collection with the pipeline's results,
//! atomically. The results go into a temporary collection `tmp.agg_out.<random>` created
//! with the target's indexes; when every document is written it is renamed over the target.
//! On any failure (a duplicate `_id`, a unique index violation, an interrupt) the temporary
//! collection is dropped and the target is left as it was. Documents without `_id` get one.
//! The stage returns no documents.
//!
//! Errors: 16990 argument not a string or object, 40414 no `coll`, 40415 unknown field, 17385
//! a `system.` target, 73 an invalid name; must be the last stage (40601), not inside
//! `$facet`/`$lookup`/`$unionWith`.

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf, rawdoc};

use crate::agg::{
    Constraints, Ddl, Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, Writer, loc,
};
use crate::error::{QueryError, Result};

/// Documents written per transaction.
pub(crate) const WRITE_BATCH: usize = 500;
/// Bytes written per transaction.
pub(crate) const WRITE_BATCH_BYTES: usize = 4 * 1024 * 1024;

/// A parsed `$out`.
#[derive(Debug)]
pub struct Out {
    db: String,
    coll: String,
}

/// Checks a target collection name (`stage` names the stage in messages).
pub(crate) fn check_target(db: &str, coll: &str, stage: &str, code: i32) -> Result<()> {
    cairn_storage::namespace::check_collection_name(coll).map_err(|_| {
        QueryError::Location(73, format!("Invalid namespace specified '{db}.{coll}'"))
    })?;
    if coll.starts_with("system.") {
        return Err(loc(
            code,
            format!("Can't {stage} to special collection: {coll}"),
        ));
    }
    Ok(())
}

/// Parses `{$out: …}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let (db, coll) = match arg {
        RawBsonRef::String(s) => (cx.db.clone(), s.to_string()),
        RawBsonRef::Document(d) => {
            let (mut db, mut coll) = (None, None);
            for el in d.iter() {
                let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
                match (k.as_str(), v) {
                    ("db", RawBsonRef::String(s)) => db = Some(s.to_string()),
                    ("coll", RawBsonRef::String(s)) => coll = Some(s.to_string()),
                    ("db" | "coll", other) => {
                        return Err(QueryError::TypeMismatch(format!(
                            "BSON field '$out.{}' is the wrong type '{}', expected type 'string'",
                            k.as_str(),
                            cairn_storage::display::type_name(other)
                        )));
                    }
                    ("timeseries", _) => {
                        return Err(QueryError::NotImplemented(
                            "$out to a time-series collection is not supported by Cairn".into(),
                        ));
                    }
                    (other, _) => {
                        return Err(loc(
                            40415,
                            format!("BSON field '$out.{other}' is an unknown field."),
                        ));
                    }
                }
            }
            let Some(coll) = coll else {
                return Err(loc(
                    40414,
                    "BSON field '$out.coll' is missing but a required field",
                ));
            };
            (db.unwrap_or_else(|| cx.db.clone()), coll)
        }
        other => {
            return Err(loc(
                16990,
                format!(
                    "$out only supports a string or object argument, not {}",
                    cairn_storage::display::type_name(other)
                ),
            ));
        }
    };
    cairn_storage::namespace::check_db_name(&db)
        .map_err(|_| QueryError::Location(73, format!("Invalid database name: '{db}'")))?;
    check_target(&db, &coll, "$out", 17385)?;
    Ok(vec![Arc::new(Out { db, coll })])
}

impl Stage for Out {
    fn name(&self) -> &'static str {
        "$out"
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(rawdoc! {"db": self.db.clone(), "coll": self.coll.clone()})
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::WholeDocument
    }

    fn constraints(&self) -> Constraints {
        Constraints {
            last: true,
            writes: true,
            not_in_facet: true,
            ..Constraints::default()
        }
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(OutStream {
            stage: self,
            input: Some(input),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A document as stored: `_id` first, one generated when absent.
pub(crate) fn prepared(d: &RawDocumentBuf) -> Result<RawDocumentBuf> {
    Ok(crate::insert::prepare(d, || bson::Timestamp {
        time: 0,
        increment: 0,
    })?
    .into_owned())
}

/// Pulls the next write batch from `input`.
pub(crate) fn next_batch(
    input: &mut dyn DocStream,
    cx: &ExecCx<'_>,
) -> Result<Vec<RawDocumentBuf>> {
    let mut out = Vec::new();
    let mut bytes = 0;
    while out.len() < WRITE_BATCH && bytes < WRITE_BATCH_BYTES {
        match input.next(cx)? {
            Some(d) => {
                bytes += d.as_bytes().len();
                out.push(d);
            }
            None => break,
        }
    }
    Ok(out)
}

struct OutStream {
    stage: Arc<Out>,
    input: Option<Box<dyn DocStream>>,
}

impl OutStream {
    fn fill(&self, input: &mut dyn DocStream, temp: &str, cx: &ExecCx<'_>) -> Result<()> {
        let st = &self.stage;
        loop {
            cx.host.check_interrupt()?;
            let batch = next_batch(input, cx)?;
            if batch.is_empty() {
                return Ok(());
            }
            let docs = batch.iter().map(prepared).collect::<Result<Vec<_>>>()?;
            cx.host.write(&mut |w: &mut dyn Writer| {
                let meta = w.collection(&st.db, temp)?.ok_or_else(|| {
                    QueryError::Location(
                        26,
                        format!("temporary collection {}.{temp} was dropped", st.db),
                    )
                })?;
                for d in &docs {
                    w.insert(&meta, d)?;
                }
                Ok(())
            })?;
        }
    }
}

impl DocStream for OutStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        let Some(mut input) = self.input.take() else {
            return Ok(None);
        };
        let st = Arc::clone(&self.stage);
        let temp = format!("tmp.agg_out.{:016x}", rand::random::<u64>());
        let target = cx.catalog.collection(&st.db, &st.coll)?;
        cx.host.ddl(Ddl::CreateLike {
            db: &st.db,
            name: &temp,
            like: target.as_deref(),
        })?;
        let r = self.fill(&mut *input, &temp, cx).and_then(|()| {
            cx.host.ddl(Ddl::Replace {
                db: &st.db,
                from: &temp,
                to_db: &st.db,
                to: &st.coll,
            })
        });
        if let Err(e) = r {
            let _ = cx.host.ddl(Ddl::Drop {
                db: &st.db,
                name: &temp,
            });
            return Err(e);
        }
        Ok(None)
    }
}
