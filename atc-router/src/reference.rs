//! The reference evaluator: a plain walk of the resolved tree, one route after another in
//! priority order. It is the oracle that every faster matcher is checked against, so it stays
//! simple rather than fast: do not optimise it.
//!
//! Semantics (docs/language.md "Evaluation"): a field with no value makes every predicate on it
//! false; in the default mode every value must satisfy the predicate, under `any()` one is enough;
//! `&&` and `||` are short-circuit, left to right; only the predicates that decided the result
//! leave matched values and captures (a false sub-expression rolls back what it recorded, `!( … )`
//! keeps nothing). Within one predicate over several values, every value that satisfies it records,
//! in order (under `any()` that is only the first; in the default mode it is all of them), so the
//! last one's matched value wins and captures merge, as a map insert would (Kong's behaviour).

use std::borrow::Cow;

use crate::compile::record::MatchRecord;
use crate::compile::resolve::{Lit, Node, Pred};
use crate::language::Op;
use crate::schema::values::Values;
use crate::value::{cidr_contains, Value};

/// Evaluates one route's expression against the context's values.
pub(crate) fn eval(node: &Node, ctx: &Values, w: &mut MatchRecord) -> bool {
    match node {
        Node::And(children) => {
            let mark = w.mark();
            for c in children.iter() {
                if !crate::stack::guarded(|| eval(c, ctx, w)) {
                    w.rollback(mark);
                    return false;
                }
            }
            true
        }
        Node::Or(children) => {
            for c in children.iter() {
                let mark = w.mark();
                if crate::stack::guarded(|| eval(c, ctx, w)) {
                    return true;
                }
                w.rollback(mark);
            }
            false
        }
        Node::Not(inner) => {
            let mark = w.mark();
            let r = crate::stack::guarded(|| eval(inner, ctx, w));
            w.rollback(mark);
            !r
        }
        Node::Pred(p) => eval_predicate(p, ctx, w),
    }
}

fn eval_predicate(p: &Pred, ctx: &Values, w: &mut MatchRecord) -> bool {
    let values = ctx.values_by_id(p.field);
    if values.is_empty() {
        return false;
    }
    let mark = w.mark();
    for v in values {
        let v: Cow<'_, Value> = match v {
            Value::String(s) if p.lower => Cow::Owned(Value::String(s.to_lowercase())),
            v => Cow::Borrowed(v),
        };
        let ok = test(p, &v, Some(&mut *w));
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

/// Whether one value satisfies the predicate; records what it matched into `w` when given.
fn test(p: &Pred, v: &Value, w: Option<&mut MatchRecord>) -> bool {
    let (ok, record_literal) = match (p.op, v, &p.lit) {
        (Op::Equals, v, lit) => (equal(v, lit), true),
        (Op::NotEquals, v, lit) => (!equal(v, lit), false),
        (Op::Regex, Value::String(s), _) => {
            let re = p.regex.as_ref().expect("a `~` predicate has a regex");
            let Some(caps) = re.reference().and_then(|r| r.captures(s)) else {
                return false;
            };
            if let Some(w) = w {
                w.text(p.field, &caps[0]);
                for (i, m) in caps.iter().enumerate() {
                    if let Some(m) = m {
                        w.capture_copy(i, re.names[i].as_deref(), m.as_str());
                    }
                }
            }
            return true;
        }
        (Op::Prefix, Value::String(s), Lit::Str(l)) => (s.starts_with(&**l), true),
        (Op::Postfix, Value::String(s), Lit::Str(l)) => (s.ends_with(&**l), true),
        (Op::Contains, Value::String(s), Lit::Str(l)) => (s.contains(&**l), false),
        (Op::Greater, Value::Int(a), Lit::Int(b)) => (a > b, false),
        (Op::GreaterOrEqual, Value::Int(a), Lit::Int(b)) => (a >= b, false),
        (Op::Less, Value::Int(a), Lit::Int(b)) => (a < b, false),
        (Op::LessOrEqual, Value::Int(a), Lit::Int(b)) => (a <= b, false),
        (Op::In, Value::IpAddr(a), Lit::IpCidr(c)) => (cidr_contains(c, a), false),
        (Op::NotIn, Value::IpAddr(a), Lit::IpCidr(c)) => (!cidr_contains(c, a), false),
        (Op::In, v, Lit::Set(elements)) => {
            let Some(e) = elements.iter().find(|e| member(v, e)) else {
                return false;
            };
            // The element equal to the value, as `==` records its literal; an address records
            // nothing, as `in` a network does.
            if let (Some(w), Lit::Str(_) | Lit::Int(_)) = (w, e) {
                w.literal(p.field, e);
            }
            return true;
        }
        (Op::NotIn, v, Lit::Set(elements)) => (!elements.iter().any(|e| member(v, e)), false),
        // Validation makes every other combination impossible.
        _ => (false, false),
    };
    if ok && record_literal {
        if let Some(w) = w {
            w.literal(p.field, &p.lit);
        }
    }
    ok
}

/// Whether a value is one set element: equal to it, or an address inside a network.
fn member(v: &Value, element: &Lit) -> bool {
    match (v, element) {
        (Value::IpAddr(a), Lit::IpCidr(c)) => cidr_contains(c, a),
        _ => equal(v, element),
    }
}

fn equal(v: &Value, lit: &Lit) -> bool {
    match (v, lit) {
        (Value::String(a), Lit::Str(b)) => a.as_str() == &**b,
        (Value::Int(a), Lit::Int(b)) => a == b,
        (Value::IpAddr(a), Lit::IpAddr(b)) => a == b,
        (Value::IpCidr(a), Lit::IpCidr(b)) => a == b,
        _ => false,
    }
}
