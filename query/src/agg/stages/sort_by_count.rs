//! `$sortByCount: <expr>`: `$group: {_id: <expr>, count: {$sum: 1}}` followed by
//! `$sort: {count: -1}`. The argument must be a `$`-path or an operator object (40147/40148).

use std::sync::Arc;

use bson::{RawBsonRef, rawdoc};

use super::group::Group;
use super::sort::Sort;
use crate::agg::accumulators::AccumulatorSpec;
use crate::agg::{ParseCx, Stage, loc};
use crate::error::Result;

/// Parses `{$sortByCount: …}` into its `$group` and `$sort`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    match arg {
        RawBsonRef::String(s) if s.starts_with('$') => {}
        RawBsonRef::Document(d)
            if d.iter()
                .next()
                .is_some_and(|e| e.is_ok_and(|(k, _)| k.as_str().starts_with('$'))) => {}
        RawBsonRef::Document(_) => {
            return Err(loc(
                40147,
                "the sortByCount field must be defined as a $-prefixed path or an expression \
                 object",
            ));
        }
        _ => {
            return Err(loc(
                40148,
                "the sortByCount field must be defined as a $-prefixed path or an expression",
            ));
        }
    }
    let one = rawdoc! {"$sum": 1};
    let count = AccumulatorSpec::parse_statement("count", RawBsonRef::Document(&one), &cx.ext)?;
    let group = Group::new(arg, vec![count], &cx.ext)?;
    let sort = Sort::from_doc(&rawdoc! {"count": -1})?;
    Ok(vec![Arc::new(group), Arc::new(sort)])
}
