//! The evaluator of the indexed path: runs a route's [`Program`] with the same semantics as
//! [`crate::reference`] has on the route's resolved tree, and costs no heap allocation per
//! request once its buffers have grown.
//!
//! Where it differs from the reference, and why that is still the same result:
//! - `lower()` of an ASCII value is written into a reused buffer (the reference allocates a new
//!   `String`); for ASCII text both give the same bytes. Non-ASCII values use
//!   `str::to_lowercase`, exactly as the reference does.
//! - `~` runs on the memory-lean engines of [`crate::regex_cache`] (string operations for
//!   literal patterns, NFA simulations otherwise) where the reference runs the `regex` crate;
//!   both find the same leftmost-first match.
//!
//! Invariant: this file and `reference.rs` must keep the same semantics. The property tests in
//! `testkit/tests/equivalence.rs` compare them on random tables and requests.

use std::cell::{Cell, RefCell};

use crate::compile::code_view::{CodeView, LitRef, PredRef, SetRef, Step};
use crate::compile::program::{Code, Pred};
use crate::compile::record::MatchRecord;
use crate::compile::regex::CompiledRegex;
use crate::compile::resolve as resolved;
use crate::language::Op;
use crate::schema::values::Values;
use crate::value::cidr_contains;
use crate::value::Value;

/// `s`, lowercased into `buf` when `lower` is set.
#[inline(always)]
pub(crate) fn lowercase_if<'a>(lower: bool, s: &'a str, buf: &'a mut String) -> &'a str {
    if lower {
        lowercase_into(s, buf)
    } else {
        s
    }
}

#[inline(never)]
fn lowercase_into<'a>(s: &str, buf: &'a mut String) -> &'a str {
    buf.clear();
    if s.is_ascii() {
        buf.push_str(s);
        buf.make_ascii_lowercase();
    } else {
        // Unicode lowercasing depends on context (final sigma): leave it to the standard library.
        buf.push_str(&s.to_lowercase());
    }
    buf
}

/// Evaluates a route's program (see [`crate::program`]) against the request.
#[inline]
pub(crate) fn eval(
    code: Code<'_>,
    ctx: &Values,
    lowered: &mut String,
    w: &mut MatchRecord,
) -> bool {
    eval_code(code, ctx, lowered, w)
}

/// Evaluates a program in either form (see `code_view.rs`). Inlined where a request runs it:
/// left to the compiler, whether it is depends on how unrelated modules are cut into
/// code-generation units, and a call here costs about 2% of a request.
#[inline]
pub(crate) fn eval_code<'a>(
    code: impl CodeView<'a>,
    ctx: &Values,
    lowered: &mut String,
    w: &mut MatchRecord,
) -> bool {
    eval_watched(code, ctx, lowered, w, Unwatched)
}

/// [`eval`], recording each predicate it runs in `t` (for explaining it): the same walk, so it
/// follows `eval`'s order and short-circuits by construction.
pub(crate) fn eval_traced(
    code: Code<'_>,
    ctx: &Values,
    lowered: &mut String,
    w: &mut MatchRecord,
    t: &Trace,
) -> bool {
    eval_watched(code, ctx, lowered, w, t)
}

/// Who watches an evaluation. The walk below is the only evaluator; what a request runs is it
/// with [`Unwatched`], a zero-sized `Copy` value whose methods do nothing, so that it compiles
/// to the walk without a watcher (an observer passed as `&mut` would be one more argument
/// through every recursion: about 2% of a request). A watcher that records (a [`Trace`]) is
/// therefore a shared reference to interior mutability.
pub(crate) trait Watcher: Copy {
    /// A point that [`Watcher::rollback`] returns to.
    fn mark(self) -> usize;
    /// Forgets what was recorded since `mark`: the predicates of a false sub-expression, as
    /// their matched values are forgotten.
    fn rollback(self, mark: usize);
    /// Predicate `at` (an instruction position) evaluated to `r`.
    fn saw(self, at: usize, r: bool);
}

/// The request path's watcher: records nothing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unwatched;

impl Watcher for Unwatched {
    #[inline(always)]
    fn mark(self) -> usize {
        0
    }
    #[inline(always)]
    fn rollback(self, _: usize) {}
    #[inline(always)]
    fn saw(self, _: usize, _: bool) {}
}

/// A predicate evaluated: its instruction position and outcome.
pub(crate) type Seen = (usize, bool);

/// The predicates one evaluation ran, for explaining it (see `router/explain.rs`). Indexes are
/// instruction positions in the program's code.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    /// The last predicate evaluated, with its outcome.
    last: Cell<Option<Seen>>,
    /// Those of them that decided the result: what a false sub-expression evaluated is taken
    /// out again, as its matched values are.
    decisive: RefCell<Vec<Seen>>,
}

impl Trace {
    /// The last predicate evaluated, and the decisive ones.
    pub(crate) fn into_parts(self) -> (Option<Seen>, Vec<Seen>) {
        (self.last.into_inner(), self.decisive.into_inner())
    }
}

impl Watcher for &Trace {
    fn mark(self) -> usize {
        self.decisive.borrow().len()
    }
    fn rollback(self, mark: usize) {
        self.decisive.borrow_mut().truncate(mark);
    }
    fn saw(self, at: usize, r: bool) {
        self.last.set(Some((at, r)));
        self.decisive.borrow_mut().push((at, r));
    }
}

#[inline]
fn eval_watched<'a>(
    code: impl CodeView<'a>,
    ctx: &Values,
    lowered: &mut String,
    w: &mut MatchRecord,
    o: impl Watcher,
) -> bool {
    // Every program is a conjunction of its top-level runs (see `crate::program`).
    let (mark, kept) = (w.mark(), o.mark());
    for c in code.runs() {
        if !instr(code, c, ctx, lowered, w, o) {
            w.rollback(mark);
            o.rollback(kept);
            return false;
        }
    }
    true
}

/// Whether every instruction run in `start..end` is true: an `And`'s children.
fn all<'a>(
    p: impl CodeView<'a>,
    start: usize,
    end: usize,
    ctx: &Values,
    lowered: &mut String,
    w: &mut MatchRecord,
    o: impl Watcher,
) -> bool {
    let (mark, kept) = (w.mark(), o.mark());
    let mut c = start;
    while c < end {
        if !instr(p, c, ctx, lowered, w, o) {
            w.rollback(mark);
            o.rollback(kept);
            return false;
        }
        c = p.end(c);
    }
    true
}

fn instr<'a>(
    p: impl CodeView<'a>,
    i: usize,
    ctx: &Values,
    lowered: &mut String,
    w: &mut MatchRecord,
    o: impl Watcher,
) -> bool {
    // Recursion only into nested `&&`, `||` and `!`, always to a later instruction: as deep as
    // the expression's nesting (bounded by the parser, `Limits::HARD_MAX_DEPTH`, and checked
    // again when an image is opened).
    match p.step(i) {
        Step::And(end) => all(p, i + 1, end, ctx, lowered, w, o),
        Step::Or(end) => {
            let mut c = i + 1;
            while c < end {
                let (mark, kept) = (w.mark(), o.mark());
                if instr(p, c, ctx, lowered, w, o) {
                    return true;
                }
                w.rollback(mark);
                o.rollback(kept);
                c = p.end(c);
            }
            false
        }
        Step::Not => {
            let mark = w.mark();
            // What the negated part evaluated decided the `!`: it stays with the watcher.
            let r = instr(p, i + 1, ctx, lowered, w, o);
            w.rollback(mark);
            !r
        }
        Step::Pred(pred) => {
            let r = predicate(&pred, ctx, lowered, w);
            o.saw(i, r);
            r
        }
        Step::Unreadable => false,
        // Slot markers, never part of the code a view hands out (see `crate::program`).
        Step::End => true,
    }
}

fn predicate(pred: &PredRef<'_>, ctx: &Values, lowered: &mut String, w: &mut MatchRecord) -> bool {
    match ctx.values_by_id(pred.field) {
        [] => false,
        // One value (the common case): "all" and "any" agree, and a false test records
        // nothing, so no mark or rollback is needed.
        [v] => test_value_ref(pred, v, lowered, Some(w)),
        values => multi_valued(pred, values, lowered, w),
    }
}

#[inline(never)]
fn multi_valued(
    pred: &PredRef<'_>,
    values: &[Value],
    lowered: &mut String,
    w: &mut MatchRecord,
) -> bool {
    let mark = w.mark();
    // Every satisfying value records (see `crate::reference`): in the default mode the last
    // value's match wins and captures merge.
    for v in values {
        let ok = test_value_ref(pred, v, lowered, Some(&mut *w));
        if ok && pred.any {
            return true;
        }
        if !ok && !pred.any {
            w.rollback(mark);
            return false;
        }
    }
    !pred.any
}

/// Whether value `v` satisfies predicate `pred` of program `p` (recording into `w` if given).
#[inline]
pub(crate) fn test_value(
    p: &Code<'_>,
    pred: &Pred,
    v: &Value,
    lowered: &mut String,
    w: Option<&mut MatchRecord>,
) -> bool {
    test_value_ref(&p.pred_ref(pred), v, lowered, w)
}

#[inline]
fn test_value_ref(
    pred: &PredRef<'_>,
    v: &Value,
    lowered: &mut String,
    w: Option<&mut MatchRecord>,
) -> bool {
    match v {
        Value::String(s) => {
            let s = lowercase_if(pred.lower, s, lowered);
            test_str(pred, s, w)
        }
        v => test_other(pred, v, w),
    }
}

#[inline]
fn test_str(pred: &PredRef<'_>, s: &str, w: Option<&mut MatchRecord>) -> bool {
    let lit = match pred.lit {
        LitRef::Str(lit) => lit,
        LitRef::Regex(re) => return regex(re, pred, s, w),
        LitRef::Set(set) => return str_in_set(&set, pred, s, w),
        _ => return false,
    };
    let b = s.as_bytes();
    // Byte comparisons: both sides are whole UTF-8 strings, so byte and character equality,
    // prefix and suffix agree.
    let (ok, record_literal) = match pred.op {
        Op::Equals => (crate::short_eq::eq(b, lit), true),
        Op::NotEquals => (!crate::short_eq::eq(b, lit), false),
        Op::Prefix => (b.starts_with(lit), true),
        Op::Postfix => (b.ends_with(lit), true),
        Op::Contains => (contains(s, lit), false),
        // Not byte comparisons: regexes, integer comparisons and sets have instructions of
        // their own, and validation keeps these operators off string literals.
        Op::Regex
        | Op::Greater
        | Op::GreaterOrEqual
        | Op::Less
        | Op::LessOrEqual
        | Op::In
        | Op::NotIn => (false, false),
    };
    if ok && record_literal {
        if let Some(w) = w {
            // The matched part of the value is the literal's text.
            let text = match pred.op {
                Op::Postfix => &s[s.len() - lit.len()..],
                _ => &s[..lit.len()],
            };
            w.text(pred.field, text);
        }
    }
    ok
}

/// `in` / `not in` a set of strings: `in` records the value, which equals the element.
#[inline(never)]
fn str_in_set(set: &SetRef<'_>, pred: &PredRef<'_>, s: &str, w: Option<&mut MatchRecord>) -> bool {
    let found = set.has_str(s);
    match pred.op {
        Op::In if found => {
            if let Some(w) = w {
                w.text(pred.field, s);
            }
            true
        }
        Op::NotIn => !found,
        _ => false,
    }
}

#[inline(never)]
fn contains(s: &str, lit: &[u8]) -> bool {
    std::str::from_utf8(lit).is_ok_and(|lit| s.contains(lit))
}

#[inline(never)]
fn regex(re: &CompiledRegex, pred: &PredRef<'_>, s: &str, w: Option<&mut MatchRecord>) -> bool {
    let Some(w) = w else {
        return re.is_match(s);
    };
    // The whole match (group 0, which comes first) is both the field's matched value and
    // capture 0: one copy, and every other group lies inside it, so it is recorded as a
    // range of that copy. `whole` is the address and length of group 0's text in `s` and
    // where its copy starts.
    let mut whole: Option<(usize, usize, usize)> = None;
    re.captures(s, |i, text| {
        let name = re.names[i].as_deref();
        let addr = text.as_ptr() as usize;
        match whole {
            None if i == 0 => {
                let at = w.text_and_whole_match(pred.field, text);
                whole = Some((addr, text.len(), at));
            }
            Some((base, len, at)) if addr >= base && addr - base + text.len() <= len => {
                let start = at + (addr - base);
                w.capture_within(i, name, start..start + text.len());
            }
            _ => w.capture_copy(i, name, text),
        }
    })
}

#[inline(never)]
fn test_other(pred: &PredRef<'_>, v: &Value, w: Option<&mut MatchRecord>) -> bool {
    let ok = match (pred.op, v, &pred.lit) {
        (Op::Equals | Op::NotEquals, v, lit) => {
            let eq = match (v, lit) {
                (Value::Int(a), LitRef::Int(b)) => a == b,
                (Value::IpAddr(a), LitRef::IpAddr(b)) => a == b,
                (Value::IpCidr(a), LitRef::IpCidr(b)) => a == b,
                _ => false,
            };
            eq == (pred.op == Op::Equals)
        }
        (Op::Greater, Value::Int(a), LitRef::Int(b)) => a > b,
        (Op::GreaterOrEqual, Value::Int(a), LitRef::Int(b)) => a >= b,
        (Op::Less, Value::Int(a), LitRef::Int(b)) => a < b,
        (Op::LessOrEqual, Value::Int(a), LitRef::Int(b)) => a <= b,
        (Op::In, Value::IpAddr(a), LitRef::IpCidr(c)) => cidr_contains(c, a),
        (Op::NotIn, Value::IpAddr(a), LitRef::IpCidr(c)) => !cidr_contains(c, a),
        (Op::In | Op::NotIn, v, LitRef::Set(set)) => {
            let found = match v {
                Value::Int(i) => set.has_int(*i),
                Value::IpAddr(a) => set.has_addr(a),
                _ => false,
            };
            if found && pred.op == Op::In {
                if let (Some(w), Value::Int(i)) = (w, v) {
                    // The element equal to the value; an address records nothing, as `in` a
                    // network does.
                    w.literal(pred.field, &resolved::Lit::Int(*i));
                }
                return true;
            }
            return !found && pred.op == Op::NotIn;
        }
        _ => false,
    };
    if ok && pred.op == Op::Equals {
        if let Some(w) = w {
            // Records the literal, which equals the value: the same record either way.
            let lit = match pred.lit {
                LitRef::Int(i) => resolved::Lit::Int(i),
                LitRef::IpAddr(a) => resolved::Lit::IpAddr(a),
                LitRef::IpCidr(c) => resolved::Lit::IpCidr(c),
                _ => return ok,
            };
            w.literal(pred.field, &lit);
        }
    }
    ok
}
