//! What reading an expression gives: its tree and where each predicate is in the text.
//!
//! Invariant: predicates are numbered in textual order, and [`Parsed::spans`] is indexed by
//! that number, whichever reader read the text.

use std::ops::Range;

use crate::language::Expr;

/// Where each predicate's parts are in the source, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PredicateSpans {
    /// The whole predicate.
    pub predicate: Range<usize>,
    /// The left side: field and transformations.
    pub lhs: Range<usize>,
    /// The field name.
    pub field: Range<usize>,
    /// The operator.
    pub op: Range<usize>,
    /// The right side: the literal, or the whole set `[…]`.
    pub rhs: Range<usize>,
    /// Each element of a set literal, in order; empty when the right side is one literal.
    pub elements: Vec<Range<usize>>,
}

impl PredicateSpans {
    /// How much the predicate counts toward
    /// [`Limits::max_predicates`](crate::limits::Limits::max_predicates): one, or one per
    /// element of its set.
    pub(crate) fn weight(&self) -> usize {
        self.elements.len().max(1)
    }
}

/// A parsed expression and the positions of its predicates (in textual order).
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The syntax tree.
    pub expr: Expr,
    /// Where each predicate is in the text, in the order the printer visits them.
    pub spans: Vec<PredicateSpans>,
}
