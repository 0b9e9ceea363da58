//! The query language of one command: its `let` variables, and its filters and projections
//! parsed with the document-level operators (`$expr`, `$jsonSchema`) and computed projection
//! fields.
//!
//! A command builds one [`Lang`] ([`Lang::for_command`] reads `let`, and fixes `$$NOW` for
//! the whole command) and parses every filter and projection through it, so `$expr` sees the
//! same variables everywhere. Evaluation errors (`$expr` dividing by zero) fail the query:
//! executors match with `Filter::try_matches`, never the infallible `matches`, wherever a
//! filter may contain extensions.

use bson::{RawBsonRef, RawDocument, rawdoc};
use cairn_query::expr::{ExprExtensions, Variables};
use cairn_query::filter::Filter;
use cairn_query::jsonschema::WithJsonSchema;
use cairn_query::projection::Projection;

use crate::commands::type_name;
use crate::error::CommandError;

/// The cluster time a command's `$$CLUSTER_TIME` reads (the server's latest).
pub fn cluster_time(server: &crate::state::ServerState) -> bson::Timestamp {
    server.store.clock.last()
}

/// Parses filters and projections for one command.
#[derive(Debug, Clone)]
pub struct Lang {
    expr: ExprExtensions,
}

impl Default for Lang {
    fn default() -> Lang {
        Lang {
            expr: ExprExtensions::new(),
        }
    }
}

impl Lang {
    /// The language of command `cmd` (for error messages), with the variables of its `let`
    /// field (each value is an expression evaluated once, without a document) and
    /// `$$CLUSTER_TIME` = `cluster_time`, the server's cluster time when the command started.
    pub fn for_command<'a>(
        body: impl crate::commands::Args<'a>,
        cmd: &str,
        cluster_time: bson::Timestamp,
    ) -> Result<Lang, CommandError> {
        let mut vars = Variables::new();
        vars.set_cluster_time(cluster_time);
        match body.arg("let") {
            Ok(None) => {}
            Ok(Some(RawBsonRef::Document(d))) => {
                let empty = rawdoc! {};
                for el in d.iter() {
                    let (name, v) = el.map_err(|e| {
                        CommandError::new(crate::error::ErrorCode::InvalidBSON, e.to_string())
                    })?;
                    // Earlier variables are visible to later ones, as in MongoDB.
                    let ext = ExprExtensions::with_variables(vars.clone());
                    let value = ext.parse_expression(v)?.evaluate(&empty, ext.variables())?;
                    vars.set(name.as_str(), value.unwrap_or(bson::RawBson::Undefined))?;
                }
            }
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    &format!("{cmd}.let"),
                    type_name(&other),
                    "object",
                ));
            }
            Err(e) => return Err(e),
        }
        Ok(Lang {
            expr: ExprExtensions::with_variables(vars),
        })
    }

    /// The expression language (variables included), for aggregation pipelines.
    pub fn expr(&self) -> &ExprExtensions {
        &self.expr
    }

    /// Parses a filter (`None` is `{}`).
    pub fn filter(&self, doc: Option<&RawDocument>) -> Result<Filter, CommandError> {
        let ext = WithJsonSchema(&self.expr);
        Ok(match doc {
            Some(doc) => Filter::parse_with(doc, &ext)?,
            None => Filter::parse_with(&rawdoc! {}, &ext)?,
        })
    }

    /// Parses a projection, computed fields included.
    pub fn projection(&self, doc: &RawDocument) -> Result<Projection, CommandError> {
        Ok(Projection::parse_with(doc, &self.expr)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TS: bson::Timestamp = bson::Timestamp {
        time: 1,
        increment: 1,
    };

    #[test]
    fn let_variables_reach_expr() {
        let lang = Lang::for_command(
            &rawdoc! {"find": "c", "let": {"x": 2, "y": {"$add": ["$$x", 1]}}},
            "find",
            bson::Timestamp {
                time: 1,
                increment: 1,
            },
        )
        .unwrap();
        let f = lang
            .filter(Some(&rawdoc! {"$expr": {"$eq": ["$a", "$$y"]}}))
            .unwrap();
        assert_eq!(f.try_matches(&rawdoc! {"a": 3}), Ok(true));
        assert_eq!(f.try_matches(&rawdoc! {"a": 2}), Ok(false));
        let e = Lang::for_command(&rawdoc! {"find": "c", "let": 1}, "find", TS).unwrap_err();
        assert_eq!(e.code.code(), 14);
        let e =
            Lang::for_command(&rawdoc! {"find": "c", "let": {"Bad": 1}}, "find", TS).unwrap_err();
        assert_eq!(e.code.code(), 9);
    }

    #[test]
    fn json_schema_and_expr_together() {
        let lang = Lang::default();
        let f = lang
            .filter(Some(&rawdoc! {
                "$jsonSchema": {"required": ["a"]},
                "$expr": {"$gt": ["$a", 1]},
            }))
            .unwrap();
        assert_eq!(f.try_matches(&rawdoc! {"a": 3}), Ok(true));
        assert_eq!(f.try_matches(&rawdoc! {"b": 3}), Ok(false));
    }
}
