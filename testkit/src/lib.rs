//! Shared test generators of atc-router, and the home of its differential tests against Kong's
//! `atc-router` 1.7.1 (`tests/`).
//!
//! [`gen`] describes a schema, a route table and requests as small structured values that a
//! proptest strategy or a fuzz target's bytes produce alike, and renders them to expression
//! text and request values. [`tables`] describes gateway-shaped route tables (shared hosts,
//! methods, ports, tenants, path parameters) and changes to them, for the index's tests. Kong's library is a dev-dependency only: nothing in this library
//! refers to it, and nothing shipped depends on this crate.

pub mod gen;
pub mod tables;

pub use gen::{case_strategy, Case, Rendered, RenderedRequest, RenderedRoute};
