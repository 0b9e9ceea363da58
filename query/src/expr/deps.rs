//! Which fields of the document an expression reads (`Expression::addDependencies`), for the
//! aggregation pipeline's dependency analysis.
//!
//! Invariant: over-approximation only. A field path from `$$ROOT`/`$$CURRENT` adds its
//! dotted path; `$$ROOT` itself (the whole document), or any node kind this walk does not
//! know, means the whole document is needed.

use super::Expression;
use super::parse::{Node, Var};

impl Expression {
    /// Adds the dotted paths the expression reads to `out`; false when it needs the whole
    /// document.
    pub fn dependencies(&self, out: &mut Vec<String>) -> bool {
        walk(&self.root, out)
    }
}

fn walk(n: &Node, out: &mut Vec<String>) -> bool {
    match n {
        Node::Constant(_) => true,
        Node::Path(Var::Root, parts) => {
            if parts.is_empty() {
                return false;
            }
            out.push(parts.join("."));
            true
        }
        Node::Path(..) => true,
        Node::Array(items) => items.iter().all(|c| walk(c, out)),
        Node::Object(fields) => fields.iter().all(|(_, c)| walk(c, out)),
        Node::Op(_, args) => args.iter().all(|c| walk(c, out)),
        Node::Switch { branches, default } => {
            branches.iter().all(|(c, t)| walk(c, out) && walk(t, out))
                && default.as_deref().is_none_or(|d| walk(d, out))
        }
        Node::Let { vars, body } => vars.iter().all(|(_, v)| walk(v, out)) && walk(body, out),
        Node::Map { input, body, .. } => walk(input, out) && walk(body, out),
        Node::Filter {
            input, cond, limit, ..
        } => walk(input, out) && walk(cond, out) && limit.as_deref().is_none_or(|l| walk(l, out)),
        Node::Reduce {
            input,
            initial,
            body,
            ..
        } => walk(input, out) && walk(initial, out) && walk(body, out),
        Node::Accum(form) => form.children().all(|c| walk(c, out)),
        #[allow(unreachable_patterns)]
        _ => false,
    }
}
