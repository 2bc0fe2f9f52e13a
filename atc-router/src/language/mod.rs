//! The route language: text to tree. `grammar.pest` defines the syntax (`docs/language.md`
//! describes it); `fast_reader.rs` reads well-formed text in one pass, and `parser.rs` (pest)
//! reads the rest and words every error; `tree.rs` is the expression tree and its printer.
//!
//! Invariants: both readers build the same tree from the same text; printing a tree and parsing
//! the print gives the same tree; nothing recurses deeper than the nesting limit.

mod fast_reader;
mod operator;
pub(crate) mod parser;
mod syntax_error;
mod tree;

pub use operator::Op;
pub use parser::{parse, parse_with_limits, Parsed, PredicateSpans};
pub use tree::{Expr, Lhs, Predicate, Rhs, Transform};
