//! What the evaluator reads of a program, whichever form the program is in: the in-process
//! [`Code`] (instructions with their literals beside them) or a program read in place from a
//! table image (`program_image.rs`). One evaluator (`eval.rs`) runs both, so the semantics of
//! the language live in one file.
//!
//! Invariants an implementation keeps:
//! - instructions are numbered from 0 in pre-order; a group's [`Shape`] `end` is past its last
//!   descendant and greater than its own number, so walks always move forward;
//! - [`CodeView::is_last_run`] flags the head of the last top-level run (see `program.rs`);
//! - a [`PredRef`]'s string literal is a whole UTF-8 string.

use std::net::IpAddr;

use crate::compile::program::{Code, Instr, Lit, Pred, Set};
use crate::compile::regex::CompiledRegex;
use crate::language::Op;
use crate::schema::FieldId;
use crate::value::{cidr_contains, IpCidr};

/// An instruction's shape: a group and the end of its descendants, or a predicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    And(usize),
    Or(usize),
    Not(usize),
    Pred,
    /// A slot marker (`Instr::End`): true, and nothing follows.
    End,
}

/// An instruction as the evaluator runs it: [`Shape`], with the predicate read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step<'a> {
    And(usize),
    Or(usize),
    Not,
    Pred(PredRef<'a>),
    /// A slot marker, or a predicate that cannot be read (false).
    End,
    Unreadable,
}

/// A predicate as the evaluator reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PredRef<'a> {
    pub field: FieldId,
    pub lower: bool,
    pub any: bool,
    pub op: Op,
    pub lit: LitRef<'a>,
}

/// A predicate's literal, borrowed from the program.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LitRef<'a> {
    Str(&'a [u8]),
    Regex(&'a CompiledRegex),
    Int(i64),
    IpAddr(IpAddr),
    IpCidr(IpCidr),
    Set(SetRef<'a>),
    /// A literal that cannot be read (an image's regex that does not compile here): the
    /// predicate is false.
    Missing,
}

/// A set literal, for membership tests (see [`Set`] for the order of its elements).
#[derive(Debug, Clone, Copy)]
pub(crate) enum SetRef<'a> {
    Heap(&'a Set),
    Image(crate::compile::image_set::ImageSet<'a>),
}

impl SetRef<'_> {
    #[inline]
    pub(crate) fn has_str(&self, s: &str) -> bool {
        match self {
            SetRef::Heap(set) => set.has_str(s),
            SetRef::Image(set) => set.has_str(s),
        }
    }

    pub(crate) fn has_int(&self, i: i64) -> bool {
        match self {
            SetRef::Heap(set) => set.has_int(i),
            SetRef::Image(set) => set.has_int(i),
        }
    }

    pub(crate) fn has_addr(&self, a: &IpAddr) -> bool {
        match self {
            SetRef::Heap(set) => set.has_addr(a),
            SetRef::Image(set) => set.nets().any(|c| cidr_contains(&c, a)),
        }
    }
}

/// A program as the evaluator reads it (see the module docs).
pub(crate) trait CodeView<'a>: Copy {
    fn shape(&self, i: usize) -> Shape;
    fn is_last_run(&self, i: usize) -> bool;
    /// Instruction `i` as a predicate; `None` when it is not one.
    fn pred(&self, i: usize) -> Option<PredRef<'a>>;

    /// Instruction `i` as evaluation runs it, read once.
    #[inline]
    fn step(&self, i: usize) -> Step<'a> {
        match self.shape(i) {
            Shape::And(end) => Step::And(end),
            Shape::Or(end) => Step::Or(end),
            Shape::Not(_) => Step::Not,
            Shape::End => Step::End,
            Shape::Pred => match self.pred(i) {
                Some(p) => Step::Pred(p),
                None => Step::Unreadable,
            },
        }
    }

    /// Index just past instruction `i` and its descendants.
    #[inline]
    fn end(&self, i: usize) -> usize {
        match self.shape(i) {
            Shape::And(end) | Shape::Or(end) | Shape::Not(end) => end,
            Shape::Pred | Shape::End => i + 1,
        }
    }

    /// Where the program's top-level runs start, up to the one flagged last.
    #[inline]
    fn runs(self) -> Runs<Self> {
        Runs {
            code: self,
            next: Some(0),
        }
    }
}

/// See [`CodeView::runs`].
pub(crate) struct Runs<C> {
    code: C,
    next: Option<usize>,
}

impl<'a, C: CodeView<'a>> Iterator for Runs<C> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        let i = self.next?;
        self.next = (!self.code.is_last_run(i)).then(|| self.code.end(i));
        Some(i)
    }
}

impl<'a> Code<'a> {
    /// `p` (an instruction of this program) as the evaluator reads it.
    #[inline]
    pub(crate) fn pred_ref(&self, p: &'a Pred) -> PredRef<'a> {
        let lit = match &p.lit {
            Lit::Regex(re) => LitRef::Regex(re),
            Lit::Set(set) => LitRef::Set(SetRef::Heap(set)),
            &Lit::Int(i) => LitRef::Int(i),
            &Lit::IpAddr(a) => LitRef::IpAddr(a),
            &Lit::IpCidr(c) => LitRef::IpCidr(c),
            lit => match self.bytes(lit) {
                Some(b) => LitRef::Str(b),
                None => LitRef::Missing,
            },
        };
        PredRef {
            field: p.field,
            lower: p.lower,
            any: p.any,
            op: p.op,
            lit,
        }
    }
}

impl<'a> CodeView<'a> for Code<'a> {
    #[inline]
    fn shape(&self, i: usize) -> Shape {
        match self.code().get(i) {
            Some(&Instr::And { end, .. }) => Shape::And(end as usize),
            Some(&Instr::Or { end, .. }) => Shape::Or(end as usize),
            Some(&Instr::Not { end, .. }) => Shape::Not(end as usize),
            Some(Instr::Pred(_)) => Shape::Pred,
            Some(Instr::End) | None => Shape::End,
        }
    }

    #[inline]
    fn is_last_run(&self, i: usize) -> bool {
        self.code().get(i).is_none_or(Instr::is_last_run)
    }

    #[inline]
    fn pred(&self, i: usize) -> Option<PredRef<'a>> {
        match self.code().get(i) {
            Some(Instr::Pred(p)) => Some(self.pred_ref(p)),
            _ => None,
        }
    }

    #[inline(always)]
    fn step(&self, i: usize) -> Step<'a> {
        match self.code().get(i) {
            Some(&Instr::And { end, .. }) => Step::And(end as usize),
            Some(&Instr::Or { end, .. }) => Step::Or(end as usize),
            Some(Instr::Not { .. }) => Step::Not,
            Some(Instr::Pred(p)) => Step::Pred(self.pred_ref(p)),
            Some(Instr::End) | None => Step::End,
        }
    }
}
