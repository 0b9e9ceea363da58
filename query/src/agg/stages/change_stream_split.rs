//! `$changeStreamSplitLargeEvent: {}`: splits a change event too large for one BSON document
//! into fragments.
//!
//! An event whose size (plus its resume token again, as the batch's `postBatchResumeToken`)
//! exceeds [`MAX_EVENT`] becomes fragments `{_id, splitEvent: {fragment, of}, …fields}`: the
//! event's fields but `_id`, ordered by encoded size and then name, packed greedily so each
//! fragment stays within [`MAX_EVENT`] less the token's size (7182500 when one field alone is
//! too large). Fragment `i` (0-based) has the event's token followed by the fragment number
//! (see [`super::change_stream::fragment_token`]) as `_id`, and that is the stream's resume
//! point after it; a stream resumed from fragment `i` reads the event again and skips
//! fragments `0..=i` (ChangeStreamFatalError 280 when the event is no longer split as before).
//!
//! Smaller events pass unchanged. Without this stage, an event over 16 MB fails the stream
//! with BSONObjectTooLarge (10334), as every oversized result does.
//!
//! Rules: the argument must be an empty object (7182800); only in a `$changeStream` pipeline
//! (IllegalOperation 20), as its last stage (7182802), once (7183900); these are checked by
//! [`crate::agg::Pipeline::parse`].

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;

use bson::raw::{CStr, cstr};
use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::change_stream::{SharedProgress, fragment_token};
use crate::agg::{Constraints, Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};

/// The largest change event (or fragment) returned whole: 16 MB + 16 KiB less 8 KiB.
pub const MAX_EVENT: usize = 16 * 1024 * 1024 + 16 * 1024 - 8 * 1024;

/// A parsed `$changeStreamSplitLargeEvent`.
#[derive(Debug)]
pub struct SplitLargeEvent;

/// Parses `{$changeStreamSplitLargeEvent: {}}`.
pub fn parse(arg: RawBsonRef<'_>, _cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    match arg {
        RawBsonRef::Document(d) if d.is_empty() => Ok(vec![Arc::new(SplitLargeEvent)]),
        _ => Err(loc(
            7182800,
            "$changeStreamSplitLargeEvent spec should be an empty object",
        )),
    }
}

impl Stage for SplitLargeEvent {
    fn name(&self) -> &'static str {
        "$changeStreamSplitLargeEvent"
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(RawDocumentBuf::new())
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::WholeDocument
    }

    fn constraints(&self) -> Constraints {
        Constraints {
            not_in_facet: true,
            ..Constraints::default()
        }
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(SplitRun {
            input,
            progress: opts.stream.clone(),
            queue: VecDeque::new(),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct SplitRun {
    input: Box<dyn DocStream>,
    progress: SharedProgress,
    queue: VecDeque<RawDocumentBuf>,
}

impl SplitRun {
    fn pop(&mut self) -> Option<RawDocumentBuf> {
        let d = self.queue.pop_front()?;
        if let (Ok(mut p), Ok(id)) = (self.progress.lock(), d.get_document("_id")) {
            p.pbrt = Some(id.to_owned());
        }
        Some(d)
    }
}

/// The encoded size of one element `key: value`.
fn element_size(key: &str, v: RawBsonRef<'_>) -> usize {
    let mut d = RawDocumentBuf::new();
    if let Ok(k) = <&CStr>::try_from(key) {
        d.append(k, v);
    }
    d.as_bytes().len().saturating_sub(5)
}

fn fatal(msg: &str) -> QueryError {
    QueryError::Location(280, msg.into())
}

impl DocStream for SplitRun {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if let Some(d) = self.pop() {
            return Ok(Some(d));
        }
        let Some(event) = self.input.next(cx)? else {
            return Ok(None);
        };
        // The event's resume token as the change stream produced it. An event whose `_id` a
        // stage changed is left alone: the command refuses it (ChangeStreamFatalError).
        let (token, resume) = match self.progress.lock() {
            Ok(mut p) => (p.pbrt.clone(), p.resume_split.take()),
            Err(_) => (None, None),
        };
        let Some(token) = token.filter(|t| {
            event
                .get_document("_id")
                .is_ok_and(|id| id.as_bytes() == t.as_bytes())
        }) else {
            return Ok(Some(event));
        };
        let skip = match resume {
            Some((base, n)) if base.as_bytes() == token.as_bytes() => Some(n),
            _ => None,
        };
        let size = event.as_bytes().len() + element_size("_id", RawBsonRef::Document(&token));
        if size <= MAX_EVENT {
            if skip.is_some() {
                return Err(fatal(
                    "Attempted to resume from a split event fragment, but the event in the resumed stream was not large enough to be split",
                ));
            }
            return Ok(Some(event));
        }
        let fragments = split(&event, &token, MAX_EVENT - token.as_bytes().len())?;
        let first = skip.map_or(0, |n| n as usize + 1);
        if first > fragments.len() {
            return Err(fatal(
                "Attempted to resume from a split event, but the resumed stream produced a different split. Ensure that the pipeline used to resume is the same as the original",
            ));
        }
        self.queue.extend(fragments.into_iter().skip(first));
        Ok(self.pop())
    }
}

/// Splits `event` (whose token is `token`) into fragments of at most `max` bytes.
fn split(event: &RawDocument, token: &RawDocument, max: usize) -> Result<Vec<RawDocumentBuf>> {
    let mut fields: Vec<(usize, &str, RawBsonRef<'_>)> = Vec::new();
    for el in event.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        if k.as_str() != "_id" {
            fields.push((element_size(k.as_str(), v), k.as_str(), v));
        }
    }
    if fields.is_empty() {
        return Err(loc(
            7182502,
            "Cannot split an empty event or an event containing solely '_id' field",
        ));
    }
    fields.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    // Group the fields greedily; every fragment takes at least one field.
    let mut groups: Vec<Vec<(usize, &str, RawBsonRef<'_>)>> = Vec::new();
    let mut it = fields.into_iter().peekable();
    while let Some(f) = it.next() {
        let n = u32::try_from(groups.len()).unwrap_or(u32::MAX);
        let id = fragment_token(token, n).unwrap_or_default();
        let mut size = rawdoc! {"_id": id, "splitEvent": {"fragment": 0_i32, "of": 0_i32}}
            .as_bytes()
            .len()
            + f.0;
        let mut group = vec![f];
        while let Some(next) = it.peek() {
            if size + next.0 > max {
                break;
            }
            size += next.0;
            group.extend(it.next());
        }
        if size > max {
            return Err(loc(
                7182500,
                format!(
                    "Splitting change event failed: fragment size {size} is greater than maximum allowed fragment size {max}"
                ),
            ));
        }
        groups.push(group);
    }
    let of = i32::try_from(groups.len()).unwrap_or(i32::MAX);
    let mut out = Vec::with_capacity(groups.len());
    for (i, group) in groups.into_iter().enumerate() {
        let n = u32::try_from(i).unwrap_or(u32::MAX);
        let mut d = RawDocumentBuf::new();
        d.append(cstr!("_id"), fragment_token(token, n).unwrap_or_default());
        d.append(
            cstr!("splitEvent"),
            rawdoc! {"fragment": i32::try_from(i + 1).unwrap_or(i32::MAX), "of": of},
        );
        for (_, k, v) in group {
            if let Ok(k) = <&CStr>::try_from(k) {
                d.append(k, v);
            }
        }
        out.push(d);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> RawDocumentBuf {
        rawdoc! {"_data": "82AA"}
    }

    #[test]
    fn fields_are_packed_smallest_first_within_the_limit() {
        let big = "x".repeat(1000);
        let event = rawdoc! {
            "_id": token(),
            "operationType": "update",
            "fullDocument": {"s": big.clone()},
            "fullDocumentBeforeChange": {"s": big},
        };
        let frags = split(&event, &token(), 1400).unwrap();
        assert_eq!(frags.len(), 2);
        let keys = |d: &RawDocumentBuf| -> Vec<String> {
            d.iter()
                .map(|e| e.unwrap().0.as_str().to_string())
                .collect()
        };
        assert_eq!(
            keys(&frags[0]),
            ["_id", "splitEvent", "operationType", "fullDocument"]
        );
        assert_eq!(
            keys(&frags[1]),
            ["_id", "splitEvent", "fullDocumentBeforeChange"]
        );
        assert_eq!(
            frags[1].get_document("splitEvent").unwrap(),
            &*rawdoc! {"fragment": 2, "of": 2}
        );
        assert_eq!(
            frags[1]
                .get_document("_id")
                .unwrap()
                .get_str("_data")
                .unwrap(),
            "82AA4600000001"
        );
        assert!(frags.iter().all(|f| f.as_bytes().len() <= 1400));
    }

    #[test]
    fn a_field_larger_than_a_fragment_is_refused() {
        let event = rawdoc! {"_id": token(), "fullDocument": {"s": "y".repeat(2000)}};
        let e = split(&event, &token(), 1000).unwrap_err();
        assert!(matches!(e, QueryError::Location(7182500, _)));
        let only_id = rawdoc! {"_id": token()};
        assert!(matches!(
            split(&only_id, &token(), 1000).unwrap_err(),
            QueryError::Location(7182502, _)
        ));
    }
}
