//! Views: what a view name means to the commands (MongoDB's view catalog and view
//! resolution).
//!
//! Definitions live in the storage catalog ([`cairn_storage::views`]); this module
//! - validates a definition before `create`/`collMod` store it ([`validate`]): the pipeline
//!   must parse without free variables, may not write (`$out`/`$merge`: 157), and the view
//!   graph — `viewOn` plus the namespaces its `$lookup`, `$graphLookup`, `$unionWith` and
//!   `$facet` stages read — may not cycle (GraphContainsCycle, 5) or chain more than
//!   [`MAX_DEPTH`] views (ViewDepthLimitExceeded, 165);
//! - resolves a namespace read by `find`, `count`, `distinct` and `aggregate` ([`resolve`]):
//!   a view becomes its base collection and the concatenation of the pipelines along its
//!   `viewOn` chain (innermost first), read through the command's session target;
//!   `system.views` reads as the view definitions (`{_id: "db.view", viewOn, pipeline}`),
//!   served by a `$documents` source;
//! - serves sub-pipelines: `$lookup`, `$graphLookup` and `$unionWith` whose `from`/`coll` is a
//!   view read it through the aggregation catalog, which answers with [`resolve`]; `$out` and
//!   `$merge` into a view fail with 166;
//! - turns `find` options into stages the way MongoDB's view resolution does ([`find_stages`]);
//! - words the refusals: writes and index commands on a view are CommandNotSupportedOnView
//!   ([`not_a_collection`], 166).
//!
//! Invariant: a view never reaches storage as a collection; commands that only work on
//! collections check [`is_view`] first.

use std::collections::HashMap;

use bson::{RawArray, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use cairn_query::agg::{ParseCx, Pipeline};
use cairn_query::expr::ExprExtensions;

use crate::error::{CommandError, ErrorCode};
use crate::session::target::{ReadView, Target};
use crate::state::ServerState;

/// The longest chain of views a read may go through.
pub const MAX_DEPTH: usize = 20;

/// The name whose documents are the database's view definitions.
pub const SYSTEM_VIEWS: &str = "system.views";

/// A view resolved to what it reads.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The base collection (`None`: `system.views`, read from a `$documents` source).
    pub base: Option<String>,
    /// The stages to run before the command's own.
    pub stages: RawArrayBuf,
}

/// CommandNotSupportedOnView (166) for `db.name`.
pub fn not_a_collection(db: &str, name: &str) -> CommandError {
    CommandError::new(
        ErrorCode::CommandNotSupportedOnView,
        format!("Namespace {db}.{name} is a view, not a collection"),
    )
}

/// Whether `db.name` is a view (committed catalog: views are never created inside
/// transactions).
pub fn is_view(server: &ServerState, db: &str, name: &str) -> bool {
    server.store.view(db, name).is_some()
}

/// Fails with 166 when `db.name` is a view.
pub fn check_not_view(server: &ServerState, db: &str, name: &str) -> Result<(), CommandError> {
    if is_view(server, db, name) {
        return Err(not_a_collection(db, name));
    }
    Ok(())
}

fn depth_error() -> CommandError {
    CommandError::new(
        ErrorCode::ViewDepthLimitExceeded,
        format!("View depth too deep or view cycle detected. Maximum depth is {MAX_DEPTH}"),
    )
}

/// The documents of `db.system.views`, in name order.
pub fn system_views_documents(view: &ReadView<'_, '_>, db: &str) -> Vec<RawDocumentBuf> {
    view.views_in(db)
        .iter()
        .map(|v| {
            rawdoc! {
                "_id": v.namespace(),
                "viewOn": v.view_on.as_str(),
                "pipeline": v.pipeline.clone(),
            }
        })
        .collect()
}

/// What `db.name` reads, when it is a view (or `system.views` of a database with views);
/// `None` for anything else.
pub fn resolve(
    view: &ReadView<'_, '_>,
    db: &str,
    name: &str,
) -> Result<Option<Resolved>, CommandError> {
    if name == SYSTEM_VIEWS {
        let docs = system_views_documents(view, db);
        if docs.is_empty() {
            return Ok(None);
        }
        let mut arr = RawArrayBuf::new();
        for d in docs {
            arr.push(d);
        }
        let mut stages = RawArrayBuf::new();
        // `$literal`: the definitions' `$` keys are data, not expressions.
        stages.push(rawdoc! {"$documents": {"$literal": arr}});
        return Ok(Some(Resolved { base: None, stages }));
    }
    let Some(mut v) = view.view(db, name)? else {
        return Ok(None);
    };
    // Outermost first; reversed below.
    let mut pipelines = vec![v.pipeline.clone()];
    let mut depth = 1;
    while let Some(next) = view.view(db, &v.view_on)? {
        depth += 1;
        if depth > MAX_DEPTH {
            return Err(depth_error());
        }
        pipelines.push(next.pipeline.clone());
        v = next;
    }
    let mut stages = RawArrayBuf::new();
    let mut base = Some(v.view_on.clone());
    // A view on `system.views` reads the definitions, as a read of it does.
    if v.view_on == SYSTEM_VIEWS
        && let Some(defs) = resolve(view, db, SYSTEM_VIEWS)?
    {
        for s in &defs.stages {
            let s = s.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            stages.push(RawBson::from(s));
        }
        base = None;
    }
    for p in pipelines.iter().rev() {
        for s in p {
            let s = s.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            stages.push(RawBson::from(s));
        }
    }
    Ok(Some(Resolved { base, stages }))
}

/// Whether `db.name` may be a view (or `system.views` with definitions) by the committed
/// catalog: a cheap test before [`resolve_in`]. Views are never created or dropped inside a
/// transaction.
pub fn may_be_view(server: &ServerState, db: &str, name: &str) -> bool {
    if name == SYSTEM_VIEWS {
        return server.store.catalog().views_in(db).next().is_some();
    }
    is_view(server, db, name)
}

/// [`resolve`] through a command's session target (the transaction's view of the catalog
/// inside one).
pub fn resolve_in(
    server: &ServerState,
    target: &Target,
    db: &str,
    name: &str,
) -> Result<Option<Resolved>, CommandError> {
    if !may_be_view(server, db, name) && !target.in_txn() {
        return Ok(None);
    }
    target.read(&server.store, |view| resolve(view, db, name))
}

/// `stages` followed by `rest`.
pub fn concat(stages: &RawArray, rest: &RawArray) -> Result<RawArrayBuf, CommandError> {
    let mut out = RawArrayBuf::new();
    for s in stages.into_iter().chain(rest) {
        let s = s.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        out.push(RawBson::from(s));
    }
    Ok(out)
}

/// The stages of a `find` on a view, in MongoDB's order: `$match` (a non-empty filter),
/// `$sort`, `$skip`, `$limit`, `$project`.
pub fn find_stages(
    filter: &RawDocument,
    sort: Option<&RawDocument>,
    skip: i64,
    limit: Option<i64>,
    projection: Option<&RawDocument>,
) -> RawArrayBuf {
    let mut out = RawArrayBuf::new();
    if !filter.is_empty() {
        out.push(rawdoc! {"$match": filter.to_owned()});
    }
    if let Some(s) = sort.filter(|s| !s.is_empty()) {
        out.push(rawdoc! {"$sort": s.to_owned()});
    }
    if skip > 0 {
        out.push(rawdoc! {"$skip": skip});
    }
    if let Some(l) = limit {
        out.push(rawdoc! {"$limit": l});
    }
    if let Some(p) = projection.filter(|p| !p.is_empty()) {
        out.push(rawdoc! {"$project": p.to_owned()});
    }
    out
}

/// The stages of a `count` on a view: `$match` (a non-empty query), `$skip`, `$limit`,
/// `$count`.
pub fn count_stages(query: Option<&RawDocument>, skip: i64, limit: u64) -> RawArrayBuf {
    let mut own = RawArrayBuf::new();
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        own.push(rawdoc! {"$match": q.to_owned()});
    }
    if skip > 0 {
        own.push(rawdoc! {"$skip": skip});
    }
    if limit > 0 {
        own.push(rawdoc! {"$limit": i64::try_from(limit).unwrap_or(i64::MAX)});
    }
    own.push(rawdoc! {"$count": "count"});
    own
}

/// The stages MongoDB explains for a `distinct` on a view: `$match` (a non-empty query), then
/// the key's values unwound and gathered into one set.
pub fn distinct_stages(query: Option<&RawDocument>, key: &str) -> RawArrayBuf {
    let mut own = RawArrayBuf::new();
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        own.push(rawdoc! {"$match": q.to_owned()});
    }
    let path = format!("${key}");
    own.push(rawdoc! {"$unwind": {"path": path.as_str(), "preserveNullAndEmptyArrays": true}});
    own.push(rawdoc! {"$group": {"_id": RawBson::Null, "distinct": {"$addToSet": path.as_str()}}});
    own
}

/// The collections a pipeline reads besides its input: `$lookup`/`$graphLookup` `from`,
/// `$unionWith`, recursively through sub-pipelines and `$facet`.
fn involved(pipeline: &RawArray, out: &mut Vec<String>) {
    for stage in pipeline.into_iter().flatten() {
        let RawBsonRef::Document(stage) = stage else {
            continue;
        };
        for (name, arg) in stage.iter().flatten() {
            match (name.as_str(), arg) {
                ("$lookup" | "$graphLookup", RawBsonRef::Document(d)) => {
                    if let Ok(Some(RawBsonRef::String(f))) = d.get("from") {
                        out.push(f.to_string());
                    }
                    if let Ok(Some(RawBsonRef::Array(p))) = d.get("pipeline") {
                        involved(p, out);
                    }
                }
                ("$unionWith", RawBsonRef::String(c)) => out.push(c.to_string()),
                ("$unionWith", RawBsonRef::Document(d)) => {
                    if let Ok(Some(RawBsonRef::String(c))) = d.get("coll") {
                        out.push(c.to_string());
                    }
                    if let Ok(Some(RawBsonRef::Array(p))) = d.get("pipeline") {
                        involved(p, out);
                    }
                }
                ("$facet", RawBsonRef::Document(d)) => {
                    for (_, sub) in d.iter().flatten() {
                        if let RawBsonRef::Array(p) = sub {
                            involved(p, out);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// Checks a view definition `db.name = viewOn + pipeline` before it is stored (see the module
/// docs).
pub fn validate(
    server: &ServerState,
    db: &str,
    name: &str,
    view_on: &str,
    pipeline: &RawArray,
) -> Result<(), CommandError> {
    let cx = ParseCx::new(db, Some(view_on), ExprExtensions::new());
    // Malformed stages and unknown stage names fail as they are (MongoDB's lite parse runs
    // first); everything else the full parse finds is reported "for view".
    let lite_ok = pipeline.into_iter().all(|s| {
        matches!(s, Ok(RawBsonRef::Document(d))
            if d.iter().count() == 1
                && d.iter().flatten().all(|(k, _)| cairn_query::agg::stages::lookup(k.as_str()).is_some()))
    });
    let in_view = |e: CommandError| CommandError {
        message: format!(
            "Invalid pipeline for view {db}.{name} :: caused by :: {}",
            e.message
        ),
        ..e
    };
    let parsed = match Pipeline::parse(pipeline, &cx) {
        Ok(p) => p,
        Err(e) if lite_ok => return Err(in_view(e.into())),
        Err(e) => return Err(e.into()),
    };
    if let Some((i, s)) = parsed
        .stages()
        .iter()
        .enumerate()
        .find(|(_, s)| s.constraints().writes)
    {
        return Err(in_view(CommandError::new(
            ErrorCode::OptionNotSupportedOnView,
            format!(
                "The aggregation stage {} in location {i} of the pipeline cannot be used in the \
                 view definition of {db}.{name} because it writes to disk",
                s.name()
            ),
        )));
    }
    if let Some(s) = parsed
        .stages()
        .iter()
        .find(|s| s.constraints().collectionless)
    {
        return Err(in_view(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("'{}' cannot be used in a view definition", s.name()),
        )));
    }
    // The view graph with this definition in place: view -> what it reads.
    let cat = server.store.catalog();
    let mut edges: HashMap<String, Vec<String>> = HashMap::new();
    for v in cat.views_in(db) {
        let mut reads = vec![v.view_on.clone()];
        involved(&v.pipeline, &mut reads);
        edges.insert(v.name.clone(), reads);
    }
    let mut reads = vec![view_on.to_string()];
    involved(pipeline, &mut reads);
    edges.insert(name.to_string(), reads);
    // A cycle through the new definition.
    let mut path = vec![name.to_string()];
    if let Some(cycle) = find_cycle(&edges, name, &mut path, &mut HashMap::new()) {
        // MongoDB prints the traversal backwards, starting with the repeated view.
        let mut shown = vec![format!("{db}.{name}")];
        shown.extend(cycle.iter().rev().map(|n| format!("{db}.{n}")));
        return Err(CommandError::new(
            ErrorCode::GraphContainsCycle,
            format!("View cycle detected: {}", shown.join(" => ")),
        ));
    }
    // The longest chain of views through it.
    let down = longest(&edges, name, &mut HashMap::new());
    let mut reverse: HashMap<String, Vec<String>> = HashMap::new();
    for (from, tos) in &edges {
        for to in tos {
            reverse.entry(to.clone()).or_default().push(from.clone());
        }
    }
    let up = longest(&reverse, name, &mut HashMap::new());
    if up + down - 1 > MAX_DEPTH {
        return Err(CommandError::new(
            ErrorCode::ViewDepthLimitExceeded,
            format!("View depth limit exceeded; maximum depth is {MAX_DEPTH}"),
        ));
    }
    Ok(())
}

/// A path back to `target` from `node` (depth-first; `done` memoizes nodes without one).
fn find_cycle(
    edges: &HashMap<String, Vec<String>>,
    target: &str,
    path: &mut Vec<String>,
    done: &mut HashMap<String, ()>,
) -> Option<Vec<String>> {
    let node = path.last()?.clone();
    for next in edges.get(&node).into_iter().flatten() {
        if next == target {
            let mut cycle = path.clone();
            cycle.push(next.clone());
            return Some(cycle);
        }
        if done.contains_key(next) || path.contains(next) || !edges.contains_key(next) {
            continue;
        }
        path.push(next.clone());
        if let Some(c) = find_cycle(edges, target, path, done) {
            return Some(c);
        }
        path.pop();
        done.insert(next.clone(), ());
    }
    None
}

/// The most views on a path starting at `node` (itself included), following `edges` through
/// views only (names absent from the graph's keys are collections in one direction; in the
/// reverse graph every name with incoming views counts).
fn longest(
    edges: &HashMap<String, Vec<String>>,
    node: &str,
    memo: &mut HashMap<String, usize>,
) -> usize {
    if let Some(n) = memo.get(node) {
        return *n;
    }
    // Guard against cycles among pre-existing definitions.
    memo.insert(node.to_string(), 1);
    let mut best = 0;
    for next in edges.get(node).into_iter().flatten() {
        if edges.contains_key(next) {
            best = best.max(longest(edges, next, memo));
        }
    }
    let n = 1 + best;
    memo.insert(node.to_string(), n);
    n
}
