//! A candidate's deciding predicates, named by their place in the route's text.
//!
//! Invariant: the predicates of a program are laid out in the order of the text (programs are
//! built in pre-order), so the n-th `Pred` instruction is the n-th predicate span of the text;
//! placing them costs one scan of the text and one `Locator` over it, whatever their number.

use super::spans::predicate_spans;
use super::PredicateOutcome;
use crate::compile::program::{Code, Instr};
use crate::error::Locator;
use crate::language::parse_with_limits;
use crate::router::Router;

impl Router {
    /// The outcomes of the predicates at instruction positions `at` of a route's program, their
    /// texts cut to `max_text` bytes. Linear in the route's text and in `at`.
    pub(super) fn outcomes(
        &self,
        slot: u32,
        at: &[(usize, bool)],
        max_text: usize,
    ) -> Vec<PredicateOutcome> {
        if at.is_empty() {
            return Vec::new();
        }
        let code = self.programs.code(slot);
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

/// `text`, cut to at most `max` bytes (at a character boundary) followed by `…` when longer;
/// and whether it was cut.
pub(super) fn cut(text: &str, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text.to_owned(), false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (format!("{}…", &text[..end]), true)
}
