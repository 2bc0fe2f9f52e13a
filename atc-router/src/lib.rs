//! # atc-router
//!
//! A route-matching engine for API gateways. Routes are written in the route expression
//! language (`http.host == "a.com" && http.path ^= "/api"`), validated against a typed
//! [`Schema`], and matched against per-request [`Context`]s by a [`Router`] that picks the
//! highest-priority route whose expression holds.
//!
//! The pieces, each in a module of its own:
//! - [`parser`]: text → [`Expr`] (pest grammar, spec §2–§3), errors with positions;
//! - [`ast`]: the tree and its printer (print, re-parse: same tree);
//! - [`schema`], [`validate`]: field types and the semantic checks (spec §6);
//! - [`context`]: request values and results;
//! - [`router`]: routes in priority order, add / remove / sync / execute, over indexes that
//!   leave each request only the few routes that can match;
//! - [`shared`]: one router, many matching threads, updates that are never seen half-done;
//! - the reference evaluator (a plain tree walk) that every faster matcher is tested against.
//!
//! ```
//! use std::sync::Arc;
//! use atc_router::{Context, Router, Schema, Type};
//! use uuid::Uuid;
//!
//! let mut schema = Schema::new();
//! schema.add_field("http.path", Type::String).unwrap();
//! let schema = Arc::new(schema);
//! let mut router = Router::new(schema.clone());
//! router.add(Uuid::from_u128(7), 1, r#"http.path ^= "/api""#).unwrap();
//!
//! let mut ctx = Context::new(schema);
//! ctx.add_value("http.path", "/api/users").unwrap();
//! assert!(router.execute(&mut ctx));
//! assert_eq!(ctx.result().unwrap().id(), Uuid::from_u128(7));
//! ```

// pest's generated parser names `alloc` when pest is built without `std` (see Cargo.toml).
extern crate alloc;

mod compile;
pub mod error;
mod failpoint;
mod index;
mod language;
mod limits;
mod reference;
mod router;
mod schema;

pub use error::{Error, ExprError, ExprErrorKind};
pub use language::{
    parse, parse_with_limits, Expr, Lhs, Op, Parsed, Predicate, PredicateSpans, Transform,
};
pub use limits::Limits;
pub use router::needs::FieldMask;
pub use router::shared::{ReadGuard, SharedRouter};
pub use router::{Route, RouteSpec, Router, SyncError, SyncMode, SyncPlan, SyncReport};
pub use schema::{
    CaptureKey, Context, FieldId, IdState, IpCidr, MatchResult, MatchedValue, Schema, Type, Value,
};
pub use uuid::Uuid;

/// Test support: makes the `n`-th step of router changes on this thread panic (see
/// `failpoint.rs`). Only with the `failpoints` feature, which nothing shipped enables.
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub use failpoint::panic_at as panic_at_failpoint;
