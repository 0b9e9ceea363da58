//! `$addFields` and its alias `$set`: computed fields added to (or replacing fields of) each
//! document (MongoDB's `AddFieldsProjectionExecutor`).
//!
//! Dotted paths and nested objects (`{"a.b": e}`, `{a: {b: e}}`) set fields inside
//! sub-documents, keeping their other fields; through arrays each element is updated (a
//! non-document element becomes a document). Existing fields keep their position, new ones
//! are appended in specification order; a value evaluating to missing (`$$REMOVE`) removes the
//! field. Expressions see the whole input document. Errors: not an object 40272, bad field
//! names 16410/15998/40352/40353, path collisions 31249/31250, all as `Invalid $addFields ::
//! caused by :: …` (`$set` in the messages of `$set`).

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::agg::doc::key;
use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc, with_context};
use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Expression};
use crate::sort::validate_field_path;

/// A node of the computed-field tree.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Expr(Expression),
    Sub(Vec<(String, Node)>),
}

/// A parsed `$addFields` / `$set`.
#[derive(Debug)]
pub struct AddFields {
    name: &'static str,
    /// The specification as given.
    pub doc: RawDocumentBuf,
    tree: Vec<(String, Node)>,
    ext: ExprExtensions,
}

fn add_at(tree: &mut Vec<(String, Node)>, parts: &[&str], full: &str, node: Node) -> Result<()> {
    let Some((first, rest)) = parts.split_first() else {
        return Ok(());
    };
    let pos = tree.iter().position(|(k, _)| k == first);
    if rest.is_empty() {
        if pos.is_some() {
            return Err(loc(31250, format!("Path collision at {full}")));
        }
        tree.push(((*first).to_string(), node));
        return Ok(());
    }
    let pos = match pos {
        Some(p) => p,
        None => {
            tree.push(((*first).to_string(), Node::Sub(Vec::new())));
            tree.len() - 1
        }
    };
    match tree.get_mut(pos) {
        Some((_, Node::Sub(sub))) => add_at(sub, rest, full, node),
        _ => Err(loc(
            31249,
            format!(
                "Path collision at {full} remaining portion {}",
                rest.join(".")
            ),
        )),
    }
}

fn parse_into(
    tree: &mut Vec<(String, Node)>,
    spec: &RawDocument,
    prefix: &str,
    ext: &ExprExtensions,
) -> Result<()> {
    for el in spec.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        let full = if prefix.is_empty() {
            k.as_str().to_string()
        } else {
            format!("{prefix}.{}", k.as_str())
        };
        let parts = validate_field_path(&full)?;
        match v {
            RawBsonRef::Document(sub)
                if !sub.is_empty()
                    && !sub
                        .iter()
                        .next()
                        .is_some_and(|e| e.is_ok_and(|(k, _)| k.as_str().starts_with('$'))) =>
            {
                parse_into(tree, sub, &full, ext)?;
            }
            other => {
                let e = ext.parse_expression(other)?;
                add_at(tree, &parts, &full, Node::Expr(e))?;
            }
        }
    }
    Ok(())
}

impl AddFields {
    /// An `$addFields` (or `$set`, by `name`) of `spec`.
    pub fn from_doc(
        name: &'static str,
        spec: &RawDocument,
        ext: &ExprExtensions,
    ) -> Result<AddFields> {
        let mut tree = Vec::new();
        parse_into(&mut tree, spec, "", ext)
            .map_err(|e| with_context(e, &format!("Invalid {name}")))?;
        Ok(AddFields {
            name,
            doc: spec.to_owned(),
            tree,
            ext: ext.clone(),
        })
    }

    /// The top-level fields it sets.
    pub(crate) fn top_fields(&self) -> impl Iterator<Item = &str> {
        self.tree.iter().map(|(k, _)| k.as_str())
    }

    /// Applies the computed fields to `doc`.
    pub fn apply(&self, doc: &RawDocument) -> Result<RawDocumentBuf> {
        apply_doc(doc, &self.tree, doc, &self.ext)
    }
}

fn eval(e: &Expression, root: &RawDocument, ext: &ExprExtensions) -> Result<Option<RawBson>> {
    e.evaluate(root, ext.variables())
}

fn apply_doc(
    doc: &RawDocument,
    tree: &[(String, Node)],
    root: &RawDocument,
    ext: &ExprExtensions,
) -> Result<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    let mut done = vec![false; tree.len()];
    for el in doc.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        let hit = tree
            .iter()
            .enumerate()
            .find(|(i, (name, _))| name == k.as_str() && !done.get(*i).copied().unwrap_or(true));
        let Some((i, (_, node))) = hit else {
            out.append(k, v);
            continue;
        };
        if let Some(d) = done.get_mut(i) {
            *d = true;
        }
        match node {
            Node::Expr(e) => {
                if let Some(val) = eval(e, root, ext)? {
                    out.append(k, val);
                }
            }
            Node::Sub(sub) => out.append(k, apply_value(v, sub, root, ext)?),
        }
    }
    for (i, (name, node)) in tree.iter().enumerate() {
        if done.get(i).copied().unwrap_or(true) {
            continue;
        }
        match node {
            Node::Expr(e) => {
                if let Some(val) = eval(e, root, ext)? {
                    out.append(key(name)?, val);
                }
            }
            Node::Sub(sub) => {
                let d = apply_doc(&RawDocumentBuf::new(), sub, root, ext)?;
                out.append(key(name)?, d);
            }
        }
    }
    Ok(out)
}

fn apply_value(
    v: RawBsonRef<'_>,
    sub: &[(String, Node)],
    root: &RawDocument,
    ext: &ExprExtensions,
) -> Result<RawBson> {
    Ok(match v {
        RawBsonRef::Document(d) => RawBson::Document(apply_doc(d, sub, root, ext)?),
        RawBsonRef::Array(a) => {
            let mut out = bson::RawArrayBuf::new();
            for e in a {
                let e = e.map_err(|e| QueryError::BadValue(e.to_string()))?;
                out.push(apply_value(e, sub, root, ext)?);
            }
            RawBson::Array(out)
        }
        _ => RawBson::Document(apply_doc(&RawDocumentBuf::new(), sub, root, ext)?),
    })
}

fn parse_named(
    name: &'static str,
    arg: RawBsonRef<'_>,
    cx: &ParseCx,
) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            40272,
            format!(
                "{name} specification stage must be an object, got {}",
                cairn_storage::display::type_name(arg)
            ),
        ));
    };
    Ok(vec![Arc::new(AddFields::from_doc(name, d, &cx.ext)?)])
}

/// Parses `{$addFields: {…}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    parse_named("$addFields", arg, cx)
}

/// Parses `{$set: {…}}`.
pub fn parse_set(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    parse_named("$set", arg, cx)
}

fn tree_deps(tree: &[(String, Node)], deps: &mut Deps) {
    for (_, n) in tree {
        match n {
            Node::Expr(e) => deps.add_expr(e),
            Node::Sub(s) => tree_deps(s, deps),
        }
    }
}

impl Stage for AddFields {
    fn name(&self) -> &'static str {
        self.name
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(self.doc.clone())
    }

    fn deps(&self, deps: &mut Deps) -> DepsState {
        tree_deps(&self.tree, deps);
        // Sub-document updates read the documents they update.
        for (k, n) in &self.tree {
            if matches!(n, Node::Sub(_)) {
                deps.add_path(k);
            }
        }
        DepsState::SeeNext
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(AddFieldsStream { stage: self, input }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct AddFieldsStream {
    stage: Arc<AddFields>,
    input: Box<dyn DocStream>,
}

impl DocStream for AddFieldsStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        match self.input.next(cx)? {
            Some(d) => Ok(Some(self.stage.apply(&d)?)),
            None => Ok(None),
        }
    }
}
