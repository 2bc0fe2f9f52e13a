//! # atc-router
//!
//! A route-matching engine for API gateways. Routes are expressions in the route language
//! (`http.host == "a.com" && http.path ^= "/api"`, see `docs/language.md`) with a priority; a
//! [`Router`] finds, for a request's field values in a [`Context`], the highest-priority route
//! whose expression holds, without evaluating the routes an index rules out.
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
//!
//! ## From text to a match
//!
//! A route goes through five stages, one folder of the crate each (`lint/` and the reference
//! evaluator sit beside them):
//!
//! 1. **language**: [`parse`] turns text into an [`Expr`] tree, with the span of every
//!    predicate ([`Parsed`]); printing a tree and parsing it again gives the same tree.
//! 2. **schema**: the [`Schema`] types every field; validation checks each predicate's
//!    operator and literal against its field's type. The same folder holds a request's values
//!    by field (what the index and programs read). Values and types themselves ([`Value`],
//!    [`Type`]) are a leaf below the language.
//! 3. **compile**: the checked tree becomes a program: a flat array of instructions with
//!    regexes compiled once per router and shared by every route that uses them.
//! 4. **index**: the requirements every request a route matches must meet (an exact host, a
//!    path prefix, a method, a network) place it in a decision tree, which leaves each request
//!    only the few routes its own values select.
//! 5. **router**: the [`Router`] holds the routes in routing order (priority descending, then
//!    id descending) and updates every structure incrementally: [`Router::add`],
//!    [`Router::remove`] and [`Router::sync`] cost what changed (a sync that changes or
//!    removes more than half of the routes, or adds more than the router holds, builds a fresh
//!    router from the whole list instead). A [`SharedRouter`] serves matching threads while a
//!    sync is prepared beside it, and swaps the change in at once. The [`Context`] a request's
//!    values go in is the router's: it holds the values, and after an execute the
//!    [`MatchResult`].
//!
//! No stage imports a later one (`tests/layering.rs` checks every source file).
//!
//! ## Guarantees
//!
//! - Same answers as the reference evaluator (`Router::execute_reference` with the
//!   `diagnostics` feature, a plain walk over every route in routing order) on every table and
//!   request; tested by property tests and
//!   fuzzing, and against Kong's own library outside the documented differences
//!   (`docs/kong-differences.md`).
//! - Bad input changes nothing: a route that fails to parse or validate, or exceeds the
//!   router's [`Limits`], is refused with an [`Error`] that quotes where; a sync with a bad
//!   route changes nothing ([`SyncMode::AllOrNothing`]) or leaves just that route out
//!   ([`SyncMode::ApplyValid`]).
//! - Requests never change a schema: a [`Context`] holds only values, and fields the schema
//!   does not declare are refused.
//! - A panic in the middle of a change marks the router broken ([`Router::is_broken`]) rather
//!   than letting it answer wrongly; a full [`Router::sync`] rebuilds it.
//! - No heap allocation per request in steady state on [`Router::execute`].
//!
//! ## Two-phase matching
//!
//! Reading a request field costs a gateway more than matching does, and a large table uses
//! many fields while one request can only match the few routes its index keys select. So a
//! caller can read fields in two phases:
//!
//! 1. add every value of the *key fields* ([`Router::key_fields`]: the fields the index looks
//!    values up in);
//! 2. ask [`Router::needed_fields`] for the fields of the routes the request can still match,
//!    add those, and execute.
//!
//! The result is the one the request gets with every field present. Fields are bits of a
//! [`FieldMask`] ([`FieldId::bit`]); fields past the 63rd share the last bit, so a caller may
//! read more than needed, never less.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

// pest's generated parser names `alloc` when pest is built without `std` (see Cargo.toml).
extern crate alloc;

mod compile;
pub mod error;
mod failpoint;
mod fitted;
/// The container of a table image (in progress: the checked file format; the table's flat
/// sections come with the image itself). Public for the loader's fuzz target.
#[doc(hidden)]
pub mod image;
mod index;
mod language;
mod limits;
mod lint;
#[cfg(feature = "diagnostics")]
mod reference;
pub mod request;
pub mod route_list;
mod router;
mod schema;
mod short_eq;
mod stack;
mod threads;
mod value;
mod work;

pub use compile::record::{CaptureKey, MatchedValue};
pub use error::{Error, ErrorCode, ExprError, ExprErrorKind, Location, NameError, NameFault};
pub use language::{
    parse, parse_with_limits, Expr, Lhs, Op, Parsed, Predicate, PredicateSpans, Rhs, Transform,
};
pub use limits::Limits;
pub use lint::{Finding, FindingKind, LintOptions, Linter};
#[cfg(feature = "diagnostics")]
#[doc(hidden)]
pub use router::image_index::{IndexImage, IndexImageBufs};
pub use router::shared::{ReadGuard, SharedRouter};
pub use router::{
    BackgroundRouter, BuildState, Builder, CandidateReport, Change, Context, EntryError,
    EntryFault, ExplainJson, ExplainOptions, Explanation, Lane, MatchResult, MatchesJson, Outcome,
    PredicateOutcome, Publish, Published, Route, RouteInput, RouteMatch, RouteNote, RouteSpec,
    Router, RouterStats, RuledOut, SyncError, SyncMode, SyncPlan, SyncReport, REPORT_JSON_VERSION,
};
pub use router::{ImageBytes, ImageRouter, TableRef};
pub use schema::{
    check_declared_name, check_field_name, FieldId, FieldMask, IdState, NameRule, Schema,
    ValueTextError,
};
pub use threads::MAX_BUILD_THREADS;
pub use uuid::Uuid;
pub use value::{IpCidr, Type, Value};
#[cfg(feature = "diagnostics")]
#[doc(hidden)]
pub use work::diagnostic_steps;

/// Test support: makes the `n`-th step of router changes on this thread panic (see
/// `failpoint.rs`). Only with the `failpoints` feature, which nothing shipped enables.
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub use failpoint::panic_at as panic_at_failpoint;

/// Test support: makes the next build of a version by any background builder panic (see
/// `failpoint.rs`).
/// Only with the `failpoints` feature, which nothing shipped enables.
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub use failpoint::panic_next_build as panic_next_build_failpoint;
