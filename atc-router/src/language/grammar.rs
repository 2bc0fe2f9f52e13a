//! The grammar of the route language as pest reads it (`grammar.pest`): the one definition
//! of the syntax, whose rules the pest reader walks and the syntax errors name.
//!
//! Invariant: a rule's name never reaches a message (`syntax_error.rs` words every error).

#[derive(pest_derive::Parser)]
#[grammar = "language/grammar.pest"]
pub(super) struct Grammar;
