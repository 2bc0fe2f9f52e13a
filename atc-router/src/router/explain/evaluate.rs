//! Producing explanations and match lists from the index's candidates of a request.
//!
//! Invariant: the candidates are those `Router::execute` takes, in the same routing order, and
//! each is evaluated with the same semantics (`eval_traced` for explain, `eval` for matches),
//! into a record of the caller's own: the context's result is never touched.

use std::collections::HashSet;

use super::predicates::cut;
use super::{CandidateReport, ExplainOptions, Explanation, RouteMatch, RuledOut};
use crate::compile::eval::{eval_code, eval_traced, Trace};
use crate::compile::record::MatchRecord;
use crate::error::Error;
use crate::index::requirements;
use crate::router::context::Context;
use crate::router::read_side::{self, Table};
use crate::router::Router;

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
        Ok(self.explain_slots(ctx, &slots, options))
    }

    /// The explanation of the candidates `slots` (in routing order) for `ctx`.
    pub(super) fn explain_slots(
        &self,
        ctx: &mut Context,
        slots: &[u32],
        options: ExplainOptions,
    ) -> Explanation {
        let mut lowered = String::new();
        let mut record = MatchRecord::default();
        let mut winner = None;
        let mut candidates = Vec::with_capacity(slots.len().min(options.max_candidates) + 1);
        for (n, &slot) in slots.iter().enumerate() {
            // Past the cap, only the winner is still looked for (and reported).
            if n >= options.max_candidates && winner.is_some() {
                break;
            }
            let trace = Trace::default();
            record.clear();
            let program = self.programs.code(slot);
            crate::work::add(program.code().len());
            let matched = eval_traced(program, &ctx.values, &mut lowered, &mut record, &trace);
            let (last, decisive) = trace.into_parts();
            let row = self.route(slot).row;
            if matched && winner.is_none() {
                winner = Some(row.id);
            } else if n >= options.max_candidates {
                continue;
            }
            let shown = if matched {
                decisive
            } else {
                last.into_iter().collect()
            };
            candidates.push(self.report(slot, matched, &shown, &options));
        }
        let candidates_omitted = slots.len() - candidates.len();
        let mut ruled_out = Vec::new();
        let mut ruled_out_omitted = 0;
        if options.ruled_out {
            let taken: HashSet<u32> = slots.iter().copied().collect();
            for (_, slot) in self.slots_in_order() {
                if taken.contains(&slot) {
                    continue;
                }
                if ruled_out.len() == options.max_ruled_out {
                    break;
                }
                let program = self.programs.code(slot);
                crate::work::add(program.code().len());
                let reqs = requirements(&program);
                // Regex keys last: testing one compiles its regex.
                let is_regex = |r: &&crate::index::Requirement| {
                    r.disc.kind == crate::index::requirement::KeyKind::Regex
                };
                let key = reqs
                    .iter()
                    .filter(|r| !is_regex(r))
                    .chain(reqs.iter().filter(is_regex))
                    .find(|r| !r.admits(&ctx.values))
                    .map(|r| cut(&r.describe(&self.schema), options.max_text_bytes).0);
                let row = self.route(slot).row;
                ruled_out.push(RuledOut {
                    id: row.id,
                    priority: row.priority,
                    key,
                });
            }
            ruled_out_omitted = self.len() - slots.len() - ruled_out.len();
        }
        Explanation {
            winner,
            candidates,
            candidates_omitted,
            ruled_out,
            ruled_out_omitted,
            routes: self.len(),
        }
    }

    /// The report of one candidate, whose evaluation gave `matched` and showed the predicates
    /// at instruction positions `shown` (see [`CandidateReport::predicates`]).
    fn report(
        &self,
        slot: u32,
        matched: bool,
        shown: &[(usize, bool)],
        options: &ExplainOptions,
    ) -> CandidateReport {
        let row = self.route(slot).row;
        let text = self.catalog.text(slot as usize);
        let kept = shown.len().min(options.max_predicates);
        let (expression, expression_truncated) = cut(text, options.max_text_bytes);
        CandidateReport {
            id: row.id,
            priority: row.priority,
            matched,
            predicates: self.outcomes(slot, &shown[..kept], options.max_text_bytes),
            predicates_omitted: shown.len() - kept,
            expression,
            expression_truncated,
        }
    }

    /// Every route whose expression holds for the request, in routing order, each with the
    /// values and captures it would give as the winner and its expression text. The first is
    /// the route [`Router::execute`] chooses; the context's result is left as it was.
    pub fn matches(&self, ctx: &mut Context) -> Result<Vec<RouteMatch>, Error> {
        matches(self, ctx)
    }

    /// The slots of the request's candidates, in routing order: those `execute` takes.
    fn candidate_slots(&self, ctx: &Context) -> Result<Vec<u32>, Error> {
        read_side::candidates(self, ctx)
    }
}

/// Every route of `t` whose expression holds for the request, in routing order (see
/// [`Router::matches`]): the candidates `execute` takes, each evaluated as `execute` evaluates
/// it, into a record of its own.
pub(crate) fn matches<T: Table>(t: &T, ctx: &Context) -> Result<Vec<RouteMatch>, Error> {
    let found = read_side::candidates(t, ctx)?;
    let mut lowered = String::new();
    let mut record = MatchRecord::default();
    let mut out = Vec::new();
    for c in found {
        record.clear();
        let Some(code) = t.program(c) else { continue };
        if !eval_code(code, &ctx.values, &mut lowered, &mut record) {
            continue;
        }
        let (Some((id, priority)), Some(text)) = (t.route(c), t.text(c)) else {
            continue;
        };
        let (values, captures) = record.to_owned_parts();
        out.push(RouteMatch {
            id,
            priority,
            expression: text.to_owned(),
            matched_values: values
                .into_iter()
                .filter_map(|(f, v)| Some((t.schema().field(f)?.0, v)))
                .collect(),
            captures,
        });
    }
    Ok(out)
}
