//! What a lint reports: a [`Finding`] of a [`FindingKind`], and the [`LintOptions`] that bound
//! how many are reported and how many routes each names.
//!
//! Invariant: a finding's `routes` name its subject first; `at_least` marks a count a cap cut.

use std::fmt;

use uuid::Uuid;

use crate::error::Location;
#[cfg(doc)]
use crate::{lint::Linter, router::Router};

/// What a [`Finding`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FindingKind {
    /// A route that can never win: routes before it in routing order each match every request
    /// it matches. `routes` is `[the route that never wins, the routes that take its requests
    /// (the first ones in routing order)]`.
    NeverWins,
    /// Routes of equal priority that all match one request (the witness request of one of
    /// them): which one wins it depends only on their ids. `routes` holds them in routing
    /// order (the first ones).
    EqualPriorityOverlap,
    /// Routes whose expressions are the same once parsed (spacing, parentheses and literal
    /// spellings aside). `routes` holds them in routing order (the first ones).
    DuplicateExpression,
    /// Regexes on `http.path` that are not anchored at the start (`~ "/users/\d+"` also matches
    /// `/admin/users/1`). `routes` holds the route; `location` points at the first such regex.
    UnanchoredPathRegex,
}

impl FindingKind {
    /// A short stable name: `never-wins`, `equal-priority-overlap`, `duplicate-expression`,
    /// `unanchored-path-regex`.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::NeverWins => "never-wins",
            FindingKind::EqualPriorityOverlap => "equal-priority-overlap",
            FindingKind::DuplicateExpression => "duplicate-expression",
            FindingKind::UnanchoredPathRegex => "unanchored-path-regex",
        }
    }

    pub(super) const ALL: [FindingKind; 4] = [
        FindingKind::NeverWins,
        FindingKind::EqualPriorityOverlap,
        FindingKind::DuplicateExpression,
        FindingKind::UnanchoredPathRegex,
    ];
}

/// One lint finding: about one route, or a group of routes of which it names the first few.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What it is about.
    pub kind: FindingKind,
    /// The routes involved, at most [`LintOptions::max_named`] besides the first (see
    /// [`FindingKind`] for their order).
    pub routes: Vec<Uuid>,
    /// How many more routes the finding is about than `routes` names.
    pub more: usize,
    /// Whether `more` is only a lower bound: the linter stopped comparing at one of its caps
    /// ([`Linter::MAX_EXPRESSIONS_PER_WITNESS`], [`Linter::MAX_COVERING_COMPARED`]).
    pub at_least: bool,
    /// One line saying why.
    pub message: String,
    /// The place in the first route's text it is about, when it is about one predicate.
    pub location: Option<Location>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.message)?;
        if let Some(l) = &self.location {
            write!(f, "\n{l}")?;
        }
        Ok(())
    }
}

/// How much a lint reports (see [`Linter::with_options`]).
///
/// ```
/// use atc_router::LintOptions;
///
/// let opts = LintOptions { max_per_kind: 50, ..LintOptions::default() };
/// assert_eq!(opts.max_named, LintOptions::DEFAULT_MAX_NAMED);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LintOptions {
    /// Most findings of each kind reported by [`Linter::findings`] and [`Router::lint_with`]:
    /// the first ones in the order of the findings (by the routing order of their routes); the
    /// others are kept, counted by [`Linter::omitted`], and not reported. Default
    /// [`LintOptions::DEFAULT_MAX_PER_KIND`].
    pub max_per_kind: usize,
    /// Most routes a finding names besides the one it is about (for a group, besides its
    /// first); the others are counted in [`Finding::more`]. Default
    /// [`LintOptions::DEFAULT_MAX_NAMED`].
    pub max_named: usize,
}

impl LintOptions {
    /// Default of [`LintOptions::max_per_kind`].
    pub const DEFAULT_MAX_PER_KIND: usize = 1000;
    /// Default of [`LintOptions::max_named`].
    pub const DEFAULT_MAX_NAMED: usize = 8;
}

impl Default for LintOptions {
    fn default() -> Self {
        LintOptions {
            max_per_kind: Self::DEFAULT_MAX_PER_KIND,
            max_named: Self::DEFAULT_MAX_NAMED,
        }
    }
}
