//! `$count`: one document `{<field>: <number of input documents>}` (an int, a long past
//! 2^31 − 1), nothing for an empty input — MongoDB's `$group: {_id: null, f: {$sum: 1}}` plus
//! `$project: {_id: 0}`. The field must be a non-empty string (40156, 40157) without `$`
//! prefix (40158) or `.` (40160), and not `_id` (15948).

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf};

use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::Result;

/// A parsed `$count`.
#[derive(Debug)]
pub struct Count {
    /// The output field.
    pub field: String,
}

/// Parses `{$count: "<field>"}`.
pub fn parse(arg: RawBsonRef<'_>, _cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::String(f) = arg else {
        return Err(loc(40156, "the count field must be a non-empty string"));
    };
    if f.is_empty() {
        return Err(loc(40157, "the count field must be a non-empty string"));
    }
    if f.starts_with('$') {
        return Err(loc(40158, "the count field cannot be a $-prefixed path"));
    }
    if f.contains('.') {
        return Err(loc(40160, "the count field cannot contain '.'"));
    }
    if f == "_id" {
        return Err(loc(15948, "a group's _id may only be specified once"));
    }
    if f.contains('\0') {
        return Err(loc(16411, "FieldPath field names may not contain '\0'."));
    }
    Ok(vec![Arc::new(Count {
        field: f.to_string(),
    })])
}

impl Stage for Count {
    fn name(&self) -> &'static str {
        "$count"
    }

    fn serialize(&self) -> RawBson {
        RawBson::String(self.field.clone())
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::Exhaustive
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(CountStream {
            stage: self,
            input,
            done: false,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct CountStream {
    stage: Arc<Count>,
    input: Box<dyn DocStream>,
    done: bool,
}

impl DocStream for CountStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if self.done {
            return Ok(None);
        }
        self.done = true;
        let mut n: i64 = 0;
        while self.input.next(cx)?.is_some() {
            n += 1;
            if n % 4096 == 0 {
                cx.host.check_interrupt()?;
            }
        }
        if n == 0 {
            return Ok(None);
        }
        let mut d = RawDocumentBuf::new();
        let k = crate::agg::doc::key(&self.stage.field)?;
        match i32::try_from(n) {
            Ok(i) => d.append(k, i),
            Err(_) => d.append(k, n),
        }
        Ok(Some(d))
    }
}
