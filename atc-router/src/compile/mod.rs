//! A checked tree to what a request runs: `resolve.rs` resolves it against the schema (field
//! ids, shared literals, regexes from the router's cache), `program.rs` flattens it into the
//! instruction array evaluation reads, `eval.rs` evaluates a program, `regex.rs` compiles
//! regexes and chooses their engines, `path_regex.rs` matches REST-shaped regexes by segment.
//!
//! Invariants: a program means what its tree means (the reference evaluator, `reference.rs`,
//! walks the tree; the property tests compare the two); every engine of a regex finds what the
//! `regex` crate finds.

pub(crate) mod code_view;
pub(crate) mod eval;
pub(crate) mod image_set;
pub(crate) mod path_pattern;
pub(crate) mod path_regex;
pub(crate) mod program;
pub(crate) mod program_image;
pub(crate) mod record;
pub(crate) mod regex;
pub(crate) mod regex_cache;
pub(crate) mod regex_long_text;
pub(crate) mod regex_shape;
pub(crate) mod regex_shelf;
pub(crate) mod regex_size;
pub(crate) mod resolve;
