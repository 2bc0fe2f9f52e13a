//! The route language: text to tree. `grammar.pest` defines the syntax (`docs/language.md`
//! describes it; `grammar.rs` derives pest's reader of it); `parser.rs` is the entry (limits,
//! then a reader): `fast_reader.rs` reads well-formed text in one pass, and `pest_reader.rs`
//! reads the rest, with `syntax_error.rs` wording every error; `lexis.rs` holds the lexical
//! rules both readers share, `parsed.rs` what they give; `tree.rs` is the expression tree and
//! its printer.
//!
//! Invariants: both readers build the same tree from the same text; printing a tree and parsing
//! the print gives the same tree; nothing recurses deeper than the nesting limit.

mod fast_reader;
mod grammar;
mod lexis;
mod operator;
mod parsed;
pub(crate) mod parser;
mod pest_reader;
mod syntax_error;
mod tree;

pub use operator::Op;
pub use parser::{parse, parse_with_limits, Parsed, PredicateSpans};
pub use tree::{Expr, Lhs, Predicate, Rhs, Transform};
