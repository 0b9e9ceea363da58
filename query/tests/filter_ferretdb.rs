//! FerretDB's query integration tests — tables of documents × filters → expected `_id`s or
//! error codes, each verified by FerretDB's CI against real MongoDB (5.0/6.0 for the 2022
//! tables, 7.0 for the current ones) — converted to run on Cairn's matcher.
//!
//! The data lives in `filter_data/ferretdb.rs` (generated; see its header). Cases whose filter
//! uses an operator Cairn does not implement yet (`$expr`, `$where`, `$text`, …) must fail with
//! NotImplemented (238) and are counted as skipped.

mod common;

use bson::{Bson, Document};
use common::*;

#[allow(clippy::all)]
mod data {
    use super::*;
    include!("filter_data/ferretdb.rs");
}

/// Known divergences from MongoDB, with the reason.
const KNOWN: &[(&str, &str, &str)] = &[(
    "TestQueryEvaluationRegexErrors",
    "InvalidRepeatSize",
    "PCRE refuses `(aa){3,10001}` as too large once compiled; fancy-regex compiles it",
)];

/// One converted test function.
pub struct Suite {
    /// The Go test function.
    pub name: &'static str,
    /// File and commit in FerretDB's repository.
    pub source: &'static str,
    /// The collection's documents.
    pub docs: Vec<Document>,
    /// The rows.
    pub cases: Vec<Case>,
}

/// One row of its table.
pub struct Case {
    /// The row's name.
    pub name: &'static str,
    /// The filter.
    pub filter: Bson,
    /// What MongoDB answered.
    pub expect: Expect,
}

/// The expected outcome.
pub enum Expect {
    /// Exactly these `_id`s match.
    Ids(&'static [&'static str]),
    /// Parsing fails with this code.
    Err(i32),
    /// This `_id` does not match.
    Not(&'static str),
}

/// Builds a [`Case`].
pub fn case(name: &'static str, filter: Bson, expect: Expect) -> Case {
    Case {
        name,
        filter,
        expect,
    }
}

/// The documents of some shared data sets, plus extra ones, minus some `_id`s.
pub fn docs(sets: Vec<Vec<Document>>, extra: Vec<Bson>, remove: &[&str]) -> Vec<Document> {
    let mut out: Vec<Document> = sets.into_iter().flatten().collect();
    for e in extra {
        match e {
            Bson::Document(d) => out.push(d),
            other => panic!("inserted value is not a document: {other:?}"),
        }
    }
    out.retain(|d| !remove.iter().any(|r| d.get_str("_id").ok() == Some(*r)));
    out
}

/// Operators Cairn answers with NotImplemented for now.
const UNSUPPORTED: &[&str] = &["$expr", "$where", "$text", "$jsonSchema", "$near"];

#[test]
fn ferretdb_tables() {
    let suites = data::suites();
    let (mut passed, mut skipped, mut known) = (0, 0, 0);
    let mut failures = Vec::new();
    for suite in &suites {
        let docs: Vec<_> = suite.docs.iter().map(raw_doc).collect();
        for c in &suite.cases {
            let label = format!("{} / {} ({})", suite.name, c.name, suite.source);
            if KNOWN
                .iter()
                .any(|(s, n, _)| *s == suite.name && *n == c.name)
            {
                known += 1;
                continue;
            }
            let parsed = parse(&c.filter);
            let text = c.filter.to_string();
            match (&c.expect, parsed) {
                (_, Err(e))
                    if code(&e) == 238 && UNSUPPORTED.iter().any(|op| text.contains(op)) =>
                {
                    skipped += 1;
                }
                (Expect::Err(want), Err(e)) => {
                    if code(&e) == *want {
                        passed += 1;
                    } else {
                        failures.push(format!("{label}: {text}: want code {want}, got {e:?}"));
                    }
                }
                (Expect::Err(want), Ok(_)) => {
                    failures.push(format!("{label}: {text}: want error {want}, parsed fine"));
                }
                (_, Err(e)) => failures.push(format!("{label}: {text}: unexpected error {e:?}")),
                (Expect::Ids(want), Ok(f)) => {
                    let got = select(&f, &docs);
                    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
                    want.sort();
                    if got == want {
                        passed += 1;
                    } else {
                        let missing: Vec<_> = want.iter().filter(|w| !got.contains(w)).collect();
                        let extra: Vec<_> = got.iter().filter(|g| !want.contains(g)).collect();
                        failures.push(format!(
                            "{label}: {text}: missing {missing:?}, unexpected {extra:?}"
                        ));
                    }
                }
                (Expect::Not(id), Ok(f)) => {
                    if select(&f, &docs).iter().any(|g| g == id) {
                        failures.push(format!("{label}: {text}: {id} should not match"));
                    } else {
                        passed += 1;
                    }
                }
            }
        }
    }
    for f in &failures {
        eprintln!("FAIL {f}");
    }
    eprintln!(
        "ferretdb tables: {passed} passed, {} failed, {skipped} skipped (not implemented), \
         {known} known divergences",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} FerretDB cases failed",
        failures.len()
    );
}
