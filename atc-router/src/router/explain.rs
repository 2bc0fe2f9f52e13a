//! Why a request went where it went: [`Router::explain`] and [`Router::matches`].
//!
//! Both are for operators and tests, never on the request path: they take the same index
//! candidates as [`Router::execute`] and evaluate every one of them with a tracing walk of its
//! program (`compile::eval::eval_traced`), so `execute` carries no cost for them.
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

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use uuid::Uuid;

use super::Router;
use crate::compile::eval::{eval_traced, Trace};
use crate::compile::program::{Code, Instr};
use crate::error::{Error, Location};
use crate::index::requirements;
use crate::language::parse_with_limits;
use crate::schema::context::{Context, MatchRecord};
use crate::schema::value::Value;

/// What to include in an [`Explanation`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExplainOptions {
    /// Also list the routes the index ruled out, each with the key that ruled it out. This
    /// visits every route of the table.
    pub ruled_out: bool,
}

/// Why a request matched the route it matched (see [`Router::explain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The route `execute` chooses, if any.
    pub winner: Option<Uuid>,
    /// Every route the index left for the request, in routing order, evaluated (also those
    /// after the winner, which `execute` does not reach).
    pub candidates: Vec<CandidateReport>,
    /// With [`ExplainOptions::ruled_out`]: every other route, in routing order.
    pub ruled_out: Vec<RuledOut>,
    /// How many routes the router holds.
    pub routes: usize,
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
    /// that decided it (see the module docs).
    pub predicates: Vec<PredicateOutcome>,
    /// The route's expression text, as it was added.
    pub expression: String,
}

/// One predicate of a route and what it gave for the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PredicateOutcome {
    /// Position of the predicate in the expression's text, counting from 0.
    pub index: usize,
    /// The predicate's text.
    pub text: String,
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
    /// (`http.host == "a.example"`, `http.path follows /users/{[0-9]+}`); `None` only if the
    /// index's reason cannot be named, which would be a bug.
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

impl Router {
    /// Explains a request: the route [`Router::execute`] would choose, and for every candidate
    /// the index left, whether it matched and which predicates decided it, with their places
    /// in the route's text. The context's values are read; its result is left as it was.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use atc_router::{Context, Router, Schema, Type, Uuid};
    ///
    /// let mut schema = Schema::new();
    /// schema.add_field("http.host", Type::String).unwrap();
    /// schema.add_field("http.path", Type::String).unwrap();
    /// let schema = Arc::new(schema);
    /// let mut router = Router::new(schema.clone());
    /// let api = Uuid::from_u128(1);
    /// router.add(api, 10, r#"http.host == "api.example" && http.path ^= "/v2""#).unwrap();
    ///
    /// let mut ctx = Context::new(schema);
    /// ctx.add_value("http.host", "api.example").unwrap();
    /// ctx.add_value("http.path", "/v1/users").unwrap();
    /// let why = router.explain(&mut ctx).unwrap();
    /// assert_eq!(why.winner, None);
    /// let failed = &why.candidates[0].predicates[0];
    /// assert_eq!(failed.text, r#"http.path ^= "/v2""#);
    /// assert_eq!(failed.location.column, 31);
    /// ```
    pub fn explain(&self, ctx: &mut Context) -> Result<Explanation, Error> {
        self.explain_with(ctx, ExplainOptions::default())
    }

    /// [`Router::explain`] with options.
    pub fn explain_with(
        &self,
        ctx: &mut Context,
        options: ExplainOptions,
    ) -> Result<Explanation, Error> {
        let slots = self.candidate_slots(ctx)?;
        let mut lowered = String::new();
        let mut record = MatchRecord::default();
        let mut winner = None;
        let mut candidates = Vec::with_capacity(slots.len());
        for &slot in &slots {
            let mut trace = Trace::default();
            record.clear();
            let matched = eval_traced(
                &self.programs[slot as usize],
                ctx,
                &mut lowered,
                &mut record,
                &mut trace,
            );
            let row = self.route(slot).row;
            if matched && winner.is_none() {
                winner = Some(row.id);
            }
            let shown = if matched {
                trace.decisive
            } else {
                trace.evaluated.last().copied().into_iter().collect()
            };
            candidates.push(CandidateReport {
                id: row.id,
                priority: row.priority,
                matched,
                predicates: self.outcomes(slot, &shown),
                expression: self.catalog.text(slot as usize).to_owned(),
            });
        }
        let mut ruled_out = Vec::new();
        if options.ruled_out {
            let taken: HashSet<u32> = slots.iter().copied().collect();
            for (_, &slot) in self.order.iter() {
                if taken.contains(&slot) {
                    continue;
                }
                let reqs = requirements(&self.programs[slot as usize].view());
                // Regex keys last: testing one compiles its regex.
                let is_regex = |r: &&crate::index::Requirement| {
                    r.disc.kind == crate::index::requirement::KeyKind::Regex
                };
                let key = reqs
                    .iter()
                    .filter(|r| !is_regex(r))
                    .chain(reqs.iter().filter(is_regex))
                    .find(|r| !r.admits(ctx))
                    .map(|r| r.describe(&self.schema));
                let row = self.route(slot).row;
                ruled_out.push(RuledOut {
                    id: row.id,
                    priority: row.priority,
                    key,
                });
            }
        }
        Ok(Explanation {
            winner,
            candidates,
            ruled_out,
            routes: self.len(),
        })
    }

    /// Every route whose expression holds for the request, in routing order, each with the
    /// values and captures it would give as the winner and its expression text. The first is
    /// the route [`Router::execute`] chooses; the context's result is left as it was.
    pub fn matches(&self, ctx: &mut Context) -> Result<Vec<RouteMatch>, Error> {
        let slots = self.candidate_slots(ctx)?;
        let mut lowered = String::new();
        let mut record = MatchRecord::default();
        let mut out = Vec::new();
        for slot in slots {
            record.clear();
            if !crate::compile::eval::eval(
                &self.programs[slot as usize],
                ctx,
                &mut lowered,
                &mut record,
            ) {
                continue;
            }
            let row = self.route(slot).row;
            let (values, captures) = record.to_owned_parts();
            out.push(RouteMatch {
                id: row.id,
                priority: row.priority,
                expression: self.catalog.text(slot as usize).to_owned(),
                matched_values: values
                    .into_iter()
                    .filter_map(|(f, v)| Some((self.schema.field(f)?.0, v)))
                    .collect(),
                captures,
            });
        }
        Ok(out)
    }

    /// The index's candidates for the request, sorted into routing order, into `out` (with
    /// the caller's lookup buffers); `false` when the router is broken or the context is of
    /// another schema.
    pub(crate) fn candidates_into(
        &self,
        ctx: &Context,
        levels: &mut Vec<crate::index::LevelBufs>,
        out: &mut Vec<crate::index::Entry>,
    ) -> bool {
        if self.broken || !Arc::ptr_eq(&self.schema, ctx.schema()) {
            return false;
        }
        self.index.candidates(ctx, levels, out);
        out.sort_unstable();
        out.dedup();
        true
    }

    /// The slots of the index's candidates for the request, in routing order.
    fn candidate_slots(&self, ctx: &Context) -> Result<Vec<u32>, Error> {
        let mut found = Vec::new();
        if !self.candidates_into(ctx, &mut Vec::new(), &mut found) {
            return Err(if self.broken {
                Error::Broken
            } else {
                Error::SchemaMismatch
            });
        }
        Ok(found.into_iter().map(|(_, slot)| slot).collect())
    }

    /// The outcomes of the predicates at instruction positions `at` of a route's program.
    fn outcomes(&self, slot: u32, at: &[(usize, bool)]) -> Vec<PredicateOutcome> {
        let code = self.programs[slot as usize].view();
        let shape = PredicateShape::of(&code);
        let text = self.catalog.text(slot as usize);
        // The route's own text passed these limits when it was added (see the module
        // invariants of `router`); positions are only missing if that ever changed.
        let spans = parse_with_limits(text, &self.limits)
            .map(|p| p.spans)
            .unwrap_or_default();
        let spans = if spans.len() == shape.ordinal.iter().flatten().count() {
            spans
        } else {
            Vec::new()
        };
        at.iter()
            .filter_map(|&(i, holds)| {
                let index = shape.ordinal.get(i).copied().flatten()?;
                let span = spans
                    .get(index)
                    .map_or(0..text.len(), |s| s.predicate.clone());
                Some(PredicateOutcome {
                    index,
                    text: text.get(span.clone()).unwrap_or(text).to_owned(),
                    holds,
                    negated: shape.negated[i],
                    location: Location::new(text, span),
                })
            })
            .collect()
    }
}

/// Where each predicate of a program is: its position among the predicates (the order of the
/// text: programs are laid out in pre-order) and whether it stands under an odd number of `!`.
struct PredicateShape {
    ordinal: Vec<Option<usize>>,
    negated: Vec<bool>,
}

impl PredicateShape {
    fn of(code: &Code<'_>) -> PredicateShape {
        let instrs = code.code();
        let mut ordinal = vec![None; instrs.len()];
        let mut negated = vec![false; instrs.len()];
        let mut next = 0;
        for (i, instr) in instrs.iter().enumerate() {
            match instr {
                Instr::Pred(_) => {
                    ordinal[i] = Some(next);
                    next += 1;
                }
                Instr::Not { end, .. } => {
                    for n in &mut negated[i + 1..(*end as usize).min(instrs.len())] {
                        *n = !*n;
                    }
                }
                _ => {}
            }
        }
        PredicateShape { ordinal, negated }
    }
}

impl fmt::Display for Explanation {
    /// A report for people: the winner, then each candidate with its deciding predicates.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.winner {
            Some(id) => writeln!(f, "matched route {id}")?,
            None => writeln!(f, "no route matched")?,
        }
        writeln!(
            f,
            "{} candidate(s) of {} route(s), in routing order:",
            self.candidates.len(),
            self.routes
        )?;
        for c in &self.candidates {
            let verdict = match (c.matched, Some(c.id) == self.winner) {
                (true, true) => "matched (winner)",
                (true, false) => "matched, after the winner",
                _ => "failed",
            };
            writeln!(f, "- {} (priority {}): {verdict}", c.id, c.priority)?;
            for p in &c.predicates {
                let what = match (p.holds, p.negated) {
                    (true, false) => "holds",
                    (false, false) => "does not hold",
                    (true, true) => "holds, under !",
                    (false, true) => "does not hold, under !",
                };
                writeln!(
                    f,
                    "  line {}, column {}: {} {what}\n{}",
                    p.location.line,
                    p.location.column,
                    p.text,
                    indent(&p.location.to_string())
                )?;
            }
        }
        for r in &self.ruled_out {
            match &r.key {
                Some(k) => writeln!(f, "- {} ruled out by the index: {k}", r.id)?,
                None => writeln!(f, "- {} ruled out by the index", r.id)?,
            }
        }
        Ok(())
    }
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
