//! Shared test generators of atc-router, the harness that runs what they generate through a
//! router, and the home of its property tests over the whole language and its differential
//! tests against Kong's `atc-router` 1.7.1 (`tests/`).
//!
//! [`gen`] is the one generator of expressions: it describes a schema, a route table, requests
//! and changes to the table as small structured values that a proptest strategy or a fuzz
//! target's bytes produce alike, and renders them to expression text and request values.
//! [`check`] runs a rendered case through a router, checking it against a model and the
//! reference evaluator after every change (the `matcher` fuzz target and `tests/equivalence.rs`).
//! [`tables`] describes gateway-shaped route tables (shared hosts, methods, ports, tenants, path
//! parameters; and at scale: a field per route, deep nesting, large sets, Unicode regexes) and
//! changes to them, for the index's tests, and [`table_check`] runs them against the reference
//! evaluator (`tests/index_equivalence.rs` and the `tables` fuzz target). Kong's library is a dev-dependency
//! only: nothing in this library refers to it, and nothing shipped depends on this crate.

pub mod check;
pub mod gen;
pub mod open_loop;
pub mod table_check;
pub mod tables;

pub use gen::{case_strategy, Case, Rendered, RenderedRequest, RenderedRoute};
