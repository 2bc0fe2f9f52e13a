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
//! - An explanation is bounded ([`ExplainOptions`]' caps: candidates, ruled-out routes,
//!   predicates per candidate, bytes of text), and every cut is marked in it.
//! - The cost is linear in what an explanation evaluates and reports: each reported route's
//!   text is scanned once for its predicates' places (a scan of its tokens, not a parse) and
//!   each predicate is placed through one [`Locator`] over it, never by scanning the text per
//!   predicate (`tests/explain.rs` counts the work, with the `diagnostics` feature).

use std::collections::HashSet;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use uuid::Uuid;

use super::Router;
use crate::compile::eval::{eval_traced, Trace};
use crate::compile::program::{Code, Instr};
use crate::error::{Error, Location, Locator};
use crate::index::requirements;
use crate::language::parse_with_limits;
use crate::schema::context::{Context, MatchRecord};
use crate::schema::value::Value;

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
        let mut candidates = Vec::with_capacity(slots.len().min(options.max_candidates) + 1);
        for (n, &slot) in slots.iter().enumerate() {
            // Past the cap, only the winner is still looked for (and reported).
            if n >= options.max_candidates && winner.is_some() {
                break;
            }
            let mut trace = Trace::default();
            record.clear();
            let program = &self.programs[slot as usize];
            crate::work::add(program.view().code().len());
            let matched = eval_traced(program, ctx, &mut lowered, &mut record, &mut trace);
            let row = self.route(slot).row;
            if matched && winner.is_none() {
                winner = Some(row.id);
            } else if n >= options.max_candidates {
                continue;
            }
            let shown = if matched {
                trace.decisive
            } else {
                trace.last.into_iter().collect()
            };
            candidates.push(self.report(slot, matched, &shown, &options));
        }
        let candidates_omitted = slots.len() - candidates.len();
        let mut ruled_out = Vec::new();
        let mut ruled_out_omitted = 0;
        if options.ruled_out {
            let taken: HashSet<u32> = slots.iter().copied().collect();
            for (_, &slot) in self.order.iter() {
                if taken.contains(&slot) {
                    continue;
                }
                if ruled_out.len() == options.max_ruled_out {
                    break;
                }
                let program = self.programs[slot as usize].view();
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
                    .find(|r| !r.admits(ctx))
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
        Ok(Explanation {
            winner,
            candidates,
            candidates_omitted,
            ruled_out,
            ruled_out_omitted,
            routes: self.len(),
        })
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

    /// The outcomes of the predicates at instruction positions `at` of a route's program, their
    /// texts cut to `max_text` bytes. Linear in the route's text and in `at`.
    fn outcomes(&self, slot: u32, at: &[(usize, bool)], max_text: usize) -> Vec<PredicateOutcome> {
        if at.is_empty() {
            return Vec::new();
        }
        let code = self.programs[slot as usize].view();
        let shape = PredicateShape::of(&code);
        let text = self.catalog.text(slot as usize);
        // The route's text was accepted when it was added: its predicates are found by a scan
        // of its tokens, which costs a fraction of a parse (building the tree is most of that).
        // Should the scan ever disagree with the program, the parser decides; positions are
        // only missing if the limits the text passed ever changed.
        crate::work::add(text.len());
        let spans = match predicate_spans(text) {
            Some(spans) if spans.len() == shape.predicates => spans,
            _ => {
                crate::work::add(text.len());
                parse_with_limits(text, &self.limits)
                    .map(|p| p.spans.into_iter().map(|s| s.predicate).collect())
                    .unwrap_or_default()
            }
        };
        let spans = if spans.len() == shape.predicates {
            spans
        } else {
            Vec::new()
        };
        let locator = Locator::new(text);
        at.iter()
            .filter_map(|&(i, holds)| {
                let index = shape.ordinal.get(i).copied().flatten()?;
                let span = spans.get(index).cloned().unwrap_or(0..text.len());
                let (shown, text_truncated) = cut(text.get(span.clone()).unwrap_or(text), max_text);
                Some(PredicateOutcome {
                    index,
                    text: shown,
                    text_truncated,
                    holds,
                    negated: shape.negated[i],
                    location: locator.locate(span),
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
    /// How many predicates the program has.
    predicates: usize,
}

impl PredicateShape {
    /// One pass over the program: the `!`s around an instruction are those on a stack of the
    /// open ones (each closed at its end), so the cost does not depend on how they nest.
    fn of(code: &Code<'_>) -> PredicateShape {
        let instrs = code.code();
        crate::work::add(instrs.len());
        let mut ordinal = vec![None; instrs.len()];
        let mut negated = vec![false; instrs.len()];
        let mut open_nots: Vec<usize> = Vec::new();
        let mut next = 0;
        for (i, instr) in instrs.iter().enumerate() {
            while open_nots.last().is_some_and(|&end| end <= i) {
                open_nots.pop();
            }
            negated[i] = open_nots.len() % 2 == 1;
            match instr {
                Instr::Pred(_) => {
                    ordinal[i] = Some(next);
                    next += 1;
                }
                Instr::Not { end, .. } => open_nots.push(*end as usize),
                _ => {}
            }
        }
        PredicateShape {
            ordinal,
            negated,
            predicates: next,
        }
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
            self.candidates.len() + self.candidates_omitted,
            self.routes
        )?;
        for c in &self.candidates {
            let verdict = match (c.matched, Some(c.id) == self.winner) {
                (true, true) => "matched (winner)",
                (true, false) => "matched, after the winner",
                _ => "failed",
            };
            writeln!(f, "- {} (priority {}): {verdict}", c.id, c.priority)?;
            if c.expression_truncated {
                writeln!(f, "  expression (cut): {}", c.expression)?;
            }
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
            if c.predicates_omitted > 0 {
                writeln!(
                    f,
                    "  … and {} more predicate(s), not shown (report truncated)",
                    c.predicates_omitted
                )?;
            }
        }
        if self.candidates_omitted > 0 {
            writeln!(
                f,
                "- … and {} more candidate(s), not shown (report truncated)",
                self.candidates_omitted
            )?;
        }
        for r in &self.ruled_out {
            match &r.key {
                Some(k) => writeln!(f, "- {} ruled out by the index: {k}", r.id)?,
                None => writeln!(f, "- {} ruled out by the index", r.id)?,
            }
        }
        if self.ruled_out_omitted > 0 {
            writeln!(
                f,
                "- … and {} more route(s) ruled out by the index, not shown (report truncated)",
                self.ruled_out_omitted
            )?;
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

/// `text`, cut to at most `max` bytes (at a character boundary) followed by `…` when longer;
/// and whether it was cut.
fn cut(text: &str, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text.to_owned(), false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (format!("{}…", &text[..end]), true)
}

/// The span of each predicate of `text`, an expression the parser accepted, in order (what
/// `parse_with_limits(text, …).spans[i].predicate` gives): one pass over its tokens, without
/// building a tree. `None` where the text is not what the grammar (`language/grammar.pest`)
/// allows.
fn predicate_spans(text: &str) -> Option<Vec<Range<usize>>> {
    let b = text.as_bytes();
    let mut pos = 0;
    let ws = |pos: &mut usize| {
        while b
            .get(*pos)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
        {
            *pos += 1;
        }
    };
    let ident = |pos: &mut usize| {
        let start = *pos;
        while b
            .get(*pos)
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.'))
        {
            *pos += 1;
        }
        (*pos > start).then_some(())
    };
    let eat = |pos: &mut usize, c: u8| (b.get(*pos) == Some(&c)).then(|| *pos += 1);
    let mut spans = Vec::new();
    ws(&mut pos);
    loop {
        // A term: `!(`, `(`, or a predicate.
        match b.get(pos)? {
            b'!' => {
                pos += 1;
                ws(&mut pos);
                eat(&mut pos, b'(')?;
                ws(&mut pos);
                continue;
            }
            b'(' => {
                pos += 1;
                ws(&mut pos);
                continue;
            }
            _ => {}
        }
        let start = pos;
        // `ident ["(" lhs ")"]`: a name followed by `(` is a transformation.
        ident(&mut pos)?;
        let mut depth = 0;
        loop {
            let mut at = pos;
            ws(&mut at);
            if eat(&mut at, b'(').is_none() {
                break;
            }
            ws(&mut at);
            pos = at;
            ident(&mut pos)?;
            depth += 1;
        }
        for _ in 0..depth {
            ws(&mut pos);
            eat(&mut pos, b')')?;
        }
        ws(&mut pos);
        pos += match &b[pos..] {
            [b'=' | b'!' | b'^' | b'>' | b'<', b'=', ..] | [b'=', b'^', ..] => 2,
            [b'~' | b'>' | b'<', ..] => 1,
            [b'n', b'o', b't', rest @ ..] => {
                let gap = rest
                    .iter()
                    .take_while(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
                    .count();
                rest[gap..].starts_with(b"in").then_some(3 + gap + 2)?
            }
            [b'i', b'n', ..] => 2,
            [b'c', b'o', b'n', b't', b'a', b'i', b'n', b's', ..] => 8,
            _ => return None,
        };
        ws(&mut pos);
        // The right side: a set, a string, a raw string, or an address or integer (which, in
        // accepted text, runs up to a space, a `)` or the next `&&` / `||`).
        match &b[pos..] {
            [b'[', ..] => {
                pos += 1;
                while *b.get(pos)? != b']' {
                    pos = skip_string(b, pos)?.unwrap_or(pos + 1);
                }
                pos += 1;
            }
            [b'"', ..] | [b'r', b'#', b'"', ..] => pos = skip_string(b, pos)??,
            _ => {
                let run = b[pos..]
                    .iter()
                    .take_while(|c| !matches!(c, b' ' | b'\t' | b'\r' | b'\n' | b')' | b'&' | b'|'))
                    .count();
                if run == 0 {
                    return None;
                }
                pos += run;
            }
        }
        spans.push(start..pos);
        // Closing groups, then the end or `&&` / `||` and the next term.
        ws(&mut pos);
        while eat(&mut pos, b')').is_some() {
            ws(&mut pos);
        }
        if pos == b.len() {
            return Some(spans);
        }
        match &b[pos..] {
            [b'&', b'&', ..] | [b'|', b'|', ..] => pos += 2,
            _ => return None,
        }
        ws(&mut pos);
    }
}

/// At a string literal (`"…"` with `\` escapes, or `r#"…"#`) at `pos` of `b`: where it ends
/// (`None` if it never does). Not at one: `Some(None)`.
fn skip_string(b: &[u8], pos: usize) -> Option<Option<usize>> {
    if b[pos] == b'"' {
        let mut i = pos + 1;
        loop {
            match *b.get(i)? {
                b'"' => return Some(Some(i + 1)),
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
    }
    if b[pos..].starts_with(b"r#\"") {
        let body = pos + 3;
        let end = memchr::memmem::find(&b[body..], b"\"#")?;
        return Some(Some(body + end + 2));
    }
    Some(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Limits;
    use proptest::prelude::*;

    fn spans_by_parser(text: &str) -> Option<Vec<Range<usize>>> {
        let parsed = parse_with_limits(text, &Limits::default()).ok()?;
        Some(parsed.spans.into_iter().map(|s| s.predicate).collect())
    }

    fn gap() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec!["", " ", " ", "  ", "\t", "\n", "\r\n "])
    }

    fn predicate() -> impl Strategy<Value = String> {
        let lhs = prop::sample::select(vec![
            "http.path",
            "a_b.c2",
            "lower(http.host)",
            "lower( any (x) )",
            "any(http.headers.x_y)",
        ]);
        let op = prop::sample::select(vec![
            "==", "!=", "~", "^=", "=^", ">=", ">", "<=", "<", "in", "not in", "not\t in",
            "not\nin", "contains",
        ]);
        let rhs = prop::sample::select(vec![
            r#""/a""#,
            r#""""#,
            r#""q\"(&&) \\""#,
            r#""é||)""#,
            r##"r#"a"b)&&|| "#"##,
            "-12",
            "0x1F",
            "017",
            "10.0.0.1",
            "10.0.0.0/8",
            "::1",
            "fe80::1/64",
            r#"["a", "]", ]"#,
            "[1,2]",
            r##"[ r#"x]"# ,10.0.0.1]"##,
        ]);
        (lhs, gap(), op, gap(), rhs).prop_map(|(l, g1, o, g2, r)| {
            // An operator made of letters needs a space before it.
            let g1 = if o.starts_with(['i', 'n', 'c']) && g1.is_empty() {
                " "
            } else {
                g1
            };
            format!("{l}{g1}{o}{g2}{r}")
        })
    }

    fn expression() -> impl Strategy<Value = String> {
        predicate().prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                (prop::collection::vec((inner.clone(), gap(), any::<bool>(), gap()), 1..4))
                    .prop_map(|terms| {
                        let mut out = String::new();
                        for (i, (t, g1, and, g2)) in terms.iter().enumerate() {
                            if i > 0 {
                                out.push_str(g1);
                                out.push_str(if *and { "&&" } else { "||" });
                                out.push_str(g2);
                            }
                            out.push_str(t);
                        }
                        out
                    }),
                (inner.clone(), gap(), gap()).prop_map(|(e, g1, g2)| format!("({g1}{e}{g2})")),
                (inner, gap(), gap()).prop_map(|(e, g1, g2)| format!("!{g1}({e}{g2})")),
            ]
        })
    }

    proptest! {
        #[test]
        fn the_token_scan_finds_the_predicates_the_parser_finds(
            e in expression(), lead in gap(), trail in gap()
        ) {
            let text = format!("{lead}{e}{trail}");
            let want = spans_by_parser(&text);
            prop_assume!(want.is_some());
            prop_assert_eq!(predicate_spans(&text), want, "{:?}", text);
        }
    }

    #[test]
    fn the_token_scan_reads_long_chains_and_refuses_what_is_not_an_expression() {
        let long = vec![r#"http.path ^= "/""#; 16_383].join(" && ");
        assert_eq!(predicate_spans(&long), spans_by_parser(&long));
        for bad in ["", "a", "a ==", "a == \"x", "(a == 1", "a == 1 &", "a ?? 1"] {
            let scanned = predicate_spans(bad);
            assert!(
                scanned.is_none() || spans_by_parser(bad).is_none(),
                "{bad:?}: {scanned:?}"
            );
        }
    }
}
