//! Why a request went where it went: [`Router::explain`] and [`Router::matches`].
//!
//! Both are for operators and tests, never on the request path: they take the same index
//! candidates as [`Router::execute`] and evaluate every one of them with the evaluator
//! `execute` runs, watched by a trace (`compile::eval::eval_traced`); the request path's
//! watcher is a zero-sized no-op, so `execute` carries no cost for them.
//!
//! The parts, one job each:
//! - this file: what a report is ([`Explanation`], [`RouteMatch`]) and its caps
//!   ([`ExplainOptions`]);
//! - `evaluate.rs`: producing them, from the index's candidates of a request;
//! - `predicates.rs`: naming a candidate's deciding predicates by their place in its text;
//! - `spans.rs`: finding those places with a scan of the text's tokens;
//! - `display.rs`: the report for people; `json.rs`: the report for programs (the one JSON
//!   shape of the C ABI, the Lua binding and the `atc-router` command, docs/explain.md).
//!
//! Invariants (checked by `tests/explain.rs` against the reference evaluator):
//! - The winner an explanation names is the route `execute` chooses, and the matches listed by
//!   [`Router::matches`] are exactly the routes whose expression holds, in routing order.
//! - For a candidate that does not match, the predicate named as deciding is the last one its
//!   evaluation ran: with short-circuit `&&` and `||`, the value of an expression is the value
//!   of the last predicate evaluated, flipped by each `!` around it. So that predicate's
//!   [`PredicateOutcome::effective`] value is false.
//! - A route ruled out by the index has a requirement (an index key) that no value of the
//!   request meets; an explanation names the first such requirement.
//! - Neither call changes the context's result.
//! - An explanation is bounded ([`ExplainOptions`]' caps: candidates, ruled-out routes,
//!   predicates per candidate, bytes of text), and every cut is marked in it.
//! - The cost is linear in what an explanation evaluates and reports: each reported route's
//!   text is scanned once for its predicates' places (a scan of its tokens, not a parse) and
//!   each predicate is placed through one `Locator` over it, never by scanning the text per
//!   predicate (`tests/explain.rs` counts the work, with the `diagnostics` feature).

mod display;
mod evaluate;
mod image;
mod json;
mod predicates;
mod spans;

pub use json::{ExplainJson, MatchesJson, RouteNote, REPORT_JSON_VERSION};

use uuid::Uuid;

#[cfg(doc)]
use super::Router;
use crate::error::Location;
use crate::value::Value;

/// What to include in an [`Explanation`], and how much of it.
///
/// The caps bound the report whatever the table: at most `max_candidates + 1` candidates
/// (the winner is reported even when it comes later), `max_ruled_out` ruled-out routes, and
/// for each candidate `max_predicates` predicates and `max_text_bytes` bytes of expression and
/// of each predicate's text (a predicate's place is shown as a line of at most
/// [`crate::error::SHOWN_CHARS`] characters). What a cap leaves out is counted or marked in
/// the report: [`Explanation::candidates_omitted`], [`Explanation::ruled_out_omitted`],
/// [`CandidateReport::predicates_omitted`], [`CandidateReport::expression_truncated`],
/// [`PredicateOutcome::text_truncated`], and [`Explanation::is_truncated`] for any of them.
///
/// ```
/// use atc_router::ExplainOptions;
///
/// let opts = ExplainOptions { ruled_out: true, max_candidates: 10, ..ExplainOptions::default() };
/// assert_eq!(opts.max_predicates, ExplainOptions::DEFAULT_MAX_PREDICATES);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExplainOptions {
    /// Also list the routes the index ruled out, each with the key that ruled it out. This
    /// visits every route of the table. Default `false`.
    pub ruled_out: bool,
    /// Most candidates reported, the first ones in routing order; the winner is reported too
    /// when it comes after them. Default [`ExplainOptions::DEFAULT_MAX_CANDIDATES`].
    pub max_candidates: usize,
    /// Most ruled-out routes listed, the first ones in routing order. Default
    /// [`ExplainOptions::DEFAULT_MAX_RULED_OUT`].
    pub max_ruled_out: usize,
    /// Most predicates reported for one candidate, the first ones in evaluation order. Default
    /// [`ExplainOptions::DEFAULT_MAX_PREDICATES`].
    pub max_predicates: usize,
    /// Longest expression, predicate text or ruled-out key reported, in bytes; a longer one is
    /// cut at a character boundary and ends with `…`. Default
    /// [`ExplainOptions::DEFAULT_MAX_TEXT_BYTES`].
    pub max_text_bytes: usize,
}

impl ExplainOptions {
    /// Default of [`ExplainOptions::max_candidates`].
    pub const DEFAULT_MAX_CANDIDATES: usize = 50;
    /// Default of [`ExplainOptions::max_ruled_out`].
    pub const DEFAULT_MAX_RULED_OUT: usize = 1000;
    /// Default of [`ExplainOptions::max_predicates`].
    pub const DEFAULT_MAX_PREDICATES: usize = 32;
    /// Default of [`ExplainOptions::max_text_bytes`].
    pub const DEFAULT_MAX_TEXT_BYTES: usize = 1024;

    /// No cap: every candidate, ruled-out route (when asked for), deciding predicate and byte
    /// of text, as tests want. A report can then grow with the table and the routes' texts.
    pub const UNBOUNDED: ExplainOptions = ExplainOptions {
        ruled_out: false,
        max_candidates: usize::MAX,
        max_ruled_out: usize::MAX,
        max_predicates: usize::MAX,
        max_text_bytes: usize::MAX,
    };
}

impl Default for ExplainOptions {
    fn default() -> Self {
        ExplainOptions {
            ruled_out: false,
            max_candidates: Self::DEFAULT_MAX_CANDIDATES,
            max_ruled_out: Self::DEFAULT_MAX_RULED_OUT,
            max_predicates: Self::DEFAULT_MAX_PREDICATES,
            max_text_bytes: Self::DEFAULT_MAX_TEXT_BYTES,
        }
    }
}

/// Why a request matched the route it matched (see [`Router::explain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The route `execute` chooses, if any.
    pub winner: Option<Uuid>,
    /// The routes the index left for the request, in routing order, evaluated (also those
    /// after the winner, which `execute` does not reach): the first
    /// [`ExplainOptions::max_candidates`], and the winner if it comes after them.
    pub candidates: Vec<CandidateReport>,
    /// Candidates not reported, because of [`ExplainOptions::max_candidates`].
    pub candidates_omitted: usize,
    /// With [`ExplainOptions::ruled_out`]: the other routes, in routing order (the first
    /// [`ExplainOptions::max_ruled_out`]).
    pub ruled_out: Vec<RuledOut>,
    /// Ruled-out routes not listed, because of [`ExplainOptions::max_ruled_out`].
    pub ruled_out_omitted: usize,
    /// How many routes the router holds.
    pub routes: usize,
}

impl Explanation {
    /// Whether a cap of [`ExplainOptions`] left something out of the report: candidates,
    /// ruled-out routes, predicates, or part of a text.
    pub fn is_truncated(&self) -> bool {
        self.candidates_omitted > 0
            || self.ruled_out_omitted > 0
            || self.candidates.iter().any(|c| {
                c.predicates_omitted > 0
                    || c.expression_truncated
                    || c.predicates.iter().any(|p| p.text_truncated)
            })
    }
}

/// One candidate of an explained request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateReport {
    /// The route's id.
    pub id: Uuid,
    /// The route's priority.
    pub priority: u64,
    /// Whether its expression holds for the request.
    pub matched: bool,
    /// For a route that matches, the predicates that decided it, in evaluation order (those
    /// of alternatives that failed are left out); for one that does not, the one predicate
    /// that decided it (see the module docs). At most [`ExplainOptions::max_predicates`].
    pub predicates: Vec<PredicateOutcome>,
    /// Deciding predicates not reported, because of [`ExplainOptions::max_predicates`].
    pub predicates_omitted: usize,
    /// The route's expression text, as it was added (cut to
    /// [`ExplainOptions::max_text_bytes`], and then ending with `…`).
    pub expression: String,
    /// Whether `expression` was cut.
    pub expression_truncated: bool,
}

/// One predicate of a route and what it gave for the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PredicateOutcome {
    /// Position of the predicate in the expression's text, counting from 0.
    pub index: usize,
    /// The predicate's text (cut to [`ExplainOptions::max_text_bytes`], and then ending
    /// with `…`).
    pub text: String,
    /// Whether `text` was cut.
    pub text_truncated: bool,
    /// Whether the predicate itself holds.
    pub holds: bool,
    /// Whether it stands under an odd number of `!`, so that what it contributes is the
    /// opposite of `holds`.
    pub negated: bool,
    /// Where it is in the route's text.
    pub location: Location,
}

impl PredicateOutcome {
    /// What the predicate contributes to its route: `holds`, flipped when it is negated.
    pub fn effective(&self) -> bool {
        self.holds != self.negated
    }
}

/// A route the index ruled out for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuledOut {
    /// The route's id.
    pub id: Uuid,
    /// The route's priority.
    pub priority: u64,
    /// The route's requirement that no value of the request meets, written as a condition
    /// (`http.host == "a.example"`, `http.path follows /users/{[0-9]+}`), cut to
    /// [`ExplainOptions::max_text_bytes`]; `None` only if the index's reason cannot be named,
    /// which would be a bug.
    pub key: Option<String>,
}

/// A route whose expression holds for a request (see [`Router::matches`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMatch {
    /// The route's id.
    pub id: Uuid,
    /// The route's priority.
    pub priority: u64,
    /// The route's expression text, as it was added.
    pub expression: String,
    /// The value recorded for each field, as [`crate::MatchResult::matched_value`] gives it
    /// for the winner: each field once, in the order first recorded.
    pub matched_values: Vec<(String, Value)>,
    /// The captures, as [`crate::MatchResult::captures`] gives them for the winner, each key
    /// once (the last recorded value), in the order first recorded.
    pub captures: Vec<(String, String)>,
}
