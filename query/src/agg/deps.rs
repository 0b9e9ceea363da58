//! Dependency analysis (MongoDB's `DepsTracker`): which fields of its input a pipeline reads,
//! so that the `$cursor` stage reads only those (and an index alone can answer when it holds
//! them all).
//!
//! Each stage reports what it reads and whether its output is defined by what it read
//! ([`DepsState::Exhaustive`]: `$group`, an inclusion `$project`, `$count`, `$replaceRoot`),
//! passes the rest of the document on ([`DepsState::SeeNext`]: `$match`, `$addFields`,
//! `$unwind`, `$sort`, `$limit`, …) or needs everything ([`DepsState::WholeDocument`]). The
//! walk stops at the first exhaustive stage; if none is found the whole document is needed.
//!
//! Invariant: over-approximation only — a path is never left out if any stage may read it.

use std::collections::BTreeSet;

use bson::{RawBsonRef, RawDocument};

use crate::expr::{ExprExtensions, Expression};

/// The fields a pipeline reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deps {
    /// Dotted paths read (a path covers everything below it).
    pub fields: BTreeSet<String>,
    /// The whole document is needed.
    pub whole: bool,
}

/// What a stage says about the rest of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepsState {
    /// The stage passes fields it does not name through: later stages' reads count too.
    SeeNext,
    /// The stage's output depends only on what it added: later stages read its output.
    Exhaustive,
    /// The stage needs the whole document.
    WholeDocument,
}

impl Deps {
    /// Adds a dotted path.
    pub fn add_path(&mut self, p: &str) {
        self.fields.insert(p.to_string());
    }

    /// Adds what an expression reads.
    pub fn add_expr(&mut self, e: &Expression) {
        let mut paths = Vec::new();
        if e.dependencies(&mut paths) {
            self.fields.extend(paths);
        } else {
            self.whole = true;
        }
    }

    /// Adds what a `$match` filter document reads (`$expr` through its expression,
    /// `$jsonSchema`/`$where`/`$text` need the whole document).
    pub fn add_filter(&mut self, filter: &RawDocument, ext: &ExprExtensions) {
        for el in filter.iter() {
            let Ok((k, v)) = el else {
                self.whole = true;
                return;
            };
            match k.as_str() {
                "$and" | "$or" | "$nor" => match v {
                    RawBsonRef::Array(a) => {
                        for item in a {
                            match item {
                                Ok(RawBsonRef::Document(d)) => self.add_filter(d, ext),
                                _ => self.whole = true,
                            }
                        }
                    }
                    _ => self.whole = true,
                },
                "$comment" | "$alwaysTrue" | "$alwaysFalse" => {}
                "$expr" => match ext.parse_expression(v) {
                    Ok(e) => self.add_expr(&e),
                    Err(_) => self.whole = true,
                },
                other if other.starts_with('$') => self.whole = true,
                path => self.add_path(path),
            }
        }
    }

    /// The minimal set of paths: a path whose prefix is also needed is dropped.
    pub fn minimal_paths(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for f in &self.fields {
            let covered = out.iter().any(|p| {
                f == p || (f.starts_with(p.as_str()) && f.as_bytes().get(p.len()) == Some(&b'.'))
            });
            if !covered {
                out.retain(|p| {
                    !(p.starts_with(f.as_str()) && p.as_bytes().get(f.len()) == Some(&b'.'))
                });
                out.push(f.clone());
            }
        }
        out
    }
}
