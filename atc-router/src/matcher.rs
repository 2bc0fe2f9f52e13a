//! The evaluator of the indexed path: the same semantics as [`crate::reference`], written to
//! cost no heap allocation per request once its buffers have grown.
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
//! `tests/equivalence.rs` compare them on random tables and requests.

use crate::ast::Op;
use crate::context::{Context, Witnesses};
use crate::reference::cidr_contains;
use crate::resolved::{Lit, Node, Pred};
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

pub(crate) fn eval(node: &Node, ctx: &Context, lowered: &mut String, w: &mut Witnesses) -> bool {
    match node {
        Node::And(children) => {
            let mark = w.mark();
            for c in children.iter() {
                if !eval(c, ctx, lowered, w) {
                    w.rollback(mark);
                    return false;
                }
            }
            true
        }
        Node::Or(children) => {
            for c in children.iter() {
                let mark = w.mark();
                if eval(c, ctx, lowered, w) {
                    return true;
                }
                w.rollback(mark);
            }
            false
        }
        Node::Not(inner) => {
            let mark = w.mark();
            let r = eval(inner, ctx, lowered, w);
            w.rollback(mark);
            !r
        }
        Node::Pred(p) => predicate(p, ctx, lowered, w),
    }
}

fn predicate(p: &Pred, ctx: &Context, lowered: &mut String, w: &mut Witnesses) -> bool {
    match ctx.values_by_id(p.field) {
        [] => false,
        // One value (the common case): "all" and "any" agree, and a false test records
        // nothing, so no mark or rollback is needed.
        [v] => test_value(p, v, lowered, Some(w)),
        values => multi_valued(p, values, lowered, w),
    }
}

#[inline(never)]
fn multi_valued(p: &Pred, values: &[Value], lowered: &mut String, w: &mut Witnesses) -> bool {
    let mark = w.mark();
    let mut recorded = false;
    for v in values {
        let record = if recorded { None } else { Some(&mut *w) };
        let ok = test_value(p, v, lowered, record);
        recorded |= ok;
        if ok && p.any {
            return true;
        }
        if !ok && !p.any {
            w.rollback(mark);
            return false;
        }
    }
    !p.any
}

#[inline]
fn test_value(p: &Pred, v: &Value, lowered: &mut String, w: Option<&mut Witnesses>) -> bool {
    match v {
        Value::String(s) => {
            let s = lowercase_if(p.lower, s, lowered);
            test_str(p, s, w)
        }
        v => test_other(p, v, w),
    }
}

#[inline]
fn test_str(p: &Pred, s: &str, w: Option<&mut Witnesses>) -> bool {
    let lit = match &p.lit {
        Lit::Str(l) => &**l,
        _ => return false,
    };
    let (ok, record_literal) = match p.op {
        Op::Equals => (s == lit, true),
        Op::NotEquals => (s != lit, false),
        Op::Prefix => (s.starts_with(lit), true),
        Op::Postfix => (s.ends_with(lit), true),
        Op::Contains => (s.contains(lit), false),
        Op::Regex => return regex(p, s, w),
        _ => (false, false),
    };
    if ok && record_literal {
        if let Some(w) = w {
            w.literal(p.field, &p.lit);
        }
    }
    ok
}

#[inline(never)]
fn regex(p: &Pred, s: &str, w: Option<&mut Witnesses>) -> bool {
    let re = p.regex.as_ref().expect("a `~` predicate has a regex");
    let Some(w) = w else {
        return re.is_match(s);
    };
    re.captures(s, |i, text| {
        if i == 0 {
            w.text(p.field, text);
        }
        w.capture_index(i, text);
        if let Some(name) = &re.names[i] {
            w.capture_name(name, text);
        }
    })
}

#[inline(never)]
fn test_other(p: &Pred, v: &Value, w: Option<&mut Witnesses>) -> bool {
    let ok = match (p.op, v, &p.lit) {
        (Op::Equals | Op::NotEquals, v, lit) => {
            let eq = match (v, lit) {
                (Value::Int(a), Lit::Int(b)) => a == b,
                (Value::IpAddr(a), Lit::IpAddr(b)) => a == b,
                (Value::IpCidr(a), Lit::IpCidr(b)) => a == b,
                _ => false,
            };
            eq == (p.op == Op::Equals)
        }
        (Op::Greater, Value::Int(a), Lit::Int(b)) => a > b,
        (Op::GreaterOrEqual, Value::Int(a), Lit::Int(b)) => a >= b,
        (Op::Less, Value::Int(a), Lit::Int(b)) => a < b,
        (Op::LessOrEqual, Value::Int(a), Lit::Int(b)) => a <= b,
        (Op::In, Value::IpAddr(a), Lit::IpCidr(c)) => cidr_contains(c, a),
        (Op::NotIn, Value::IpAddr(a), Lit::IpCidr(c)) => !cidr_contains(c, a),
        _ => false,
    };
    if ok && p.op == Op::Equals {
        if let Some(w) = w {
            w.literal(p.field, &p.lit);
        }
    }
    ok
}
