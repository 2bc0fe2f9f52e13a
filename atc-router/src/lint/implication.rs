//! Whether one route matches every request another matches, decided from their programs.
//!
//! Invariant (soundness): [`implies`] answers `true` only when every request that makes `r`'s
//! expression true makes `s`'s true. It may answer `false` when that holds (it understands
//! conjunctions of exact values, prefixes, suffixes, `contains`, regexes compared by source or
//! through their literal prefixes, networks, sets (`in` a set implies what holds for each of its
//! elements; `not in` a set implies `not in` a subset), and any predicate tested on `r`'s exact
//! value);
//! the linter stays silent then. A wrong `true` would be a false alarm about a route that can
//! win, which is worse than silence.
//!
//! Why it is sound: `r`'s expression is at least as strong as the conjunction of the
//! predicates of its top-level `&&` (its `||` and `!` parts are dropped, which only weakens
//! it). `s` is implied when each of its top-level parts is: an `&&` when all its children are,
//! an `||` when one is, a predicate when one of `r`'s predicates on the same field implies it
//! value by value with a mode at least as strong (a predicate over all values implies one over
//! any value, not the reverse; every predicate is false on a field without values).
//!
//! Cost: linear in the two programs for predicates `r` has word for word (a hash lookup), and
//! otherwise a comparison with each of `r`'s conjuncts on the same field, at most
//! [`MAX_COMPARISONS`] of them in all: past that the answer is `false`, which is always sound.
//! So two routes of thousands of predicates on one field cost no more than that. The walks
//! recurse only into nested `&&` and `||`, as deep as the expression's nesting, which the
//! parser bounds.

use std::net::IpAddr;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::compile::eval::test_value;
use crate::compile::program::{Code, Instr, Lit, Pred, Set};
use crate::language::Op;
use crate::schema::names::FieldId;
use crate::value::{cidr_contains, IpCidr, Value};

/// Most comparisons of two predicates one [`implies`] makes (see the module docs).
pub(crate) const MAX_COMPARISONS: usize = 1 << 16;

/// Whether every request `r` matches, `s` matches (see the module docs).
#[cfg(test)]
pub(crate) fn implies(r: &Code<'_>, s: &Code<'_>) -> bool {
    Conjuncts::of(r).imply(s)
}

/// The predicates of `r`'s top-level `&&` (its conjuncts), arranged to decide whether `r`
/// implies other programs: made once for a route compared with many.
pub(crate) struct Conjuncts<'r> {
    r: Code<'r>,
    by_field: FxHashMap<FieldId, Vec<&'r Pred>>,
    /// The conjuncts as [`key`]s.
    verbatim: FxHashSet<PredKey<'r>>,
    /// Comparisons left in the current [`Conjuncts::imply`].
    budget: usize,
}

impl<'r> Conjuncts<'r> {
    pub(crate) fn of(r: &Code<'r>) -> Conjuncts<'r> {
        let mut conjuncts = Vec::new();
        for i in r.runs() {
            conjunct_predicates(r, i, &mut conjuncts);
        }
        crate::work::add(conjuncts.len());
        let mut by_field: FxHashMap<FieldId, Vec<&Pred>> = FxHashMap::default();
        let mut verbatim = FxHashSet::default();
        for &p in &conjuncts {
            by_field.entry(p.field).or_default().push(p);
            if let Some(k) = key(r, p, p.any) {
                verbatim.insert(k);
            }
        }
        Conjuncts {
            r: *r,
            by_field,
            verbatim,
            budget: 0,
        }
    }

    /// Whether every request `r` matches, `s` matches (see the module docs).
    pub(crate) fn imply(&mut self, s: &Code<'_>) -> bool {
        crate::work::add(s.code().len());
        self.budget = MAX_COMPARISONS;
        s.runs().all(|i| part_implied(self, s, i))
    }
}

/// A predicate word for word: field, operator, lowering, mode and literal.
#[derive(PartialEq, Eq, Hash)]
struct PredKey<'a> {
    field: FieldId,
    op: Op,
    lower: bool,
    any: bool,
    lit: LitKey<'a>,
}

#[derive(PartialEq, Eq, Hash)]
enum LitKey<'a> {
    Bytes(&'a [u8]),
    Regex(&'a str),
    Int(i64),
    Addr(IpAddr),
    Cidr(IpCidr),
}

/// `p` (of `code`) as a [`PredKey`] in mode `any`; `None` for a set, which is compared instead.
fn key<'a>(code: &Code<'a>, p: &'a Pred, any: bool) -> Option<PredKey<'a>> {
    let lit = match &p.lit {
        Lit::Regex(re) => LitKey::Regex(re.as_str()),
        Lit::Int(i) => LitKey::Int(*i),
        Lit::IpAddr(a) => LitKey::Addr(*a),
        Lit::IpCidr(c) => LitKey::Cidr(*c),
        Lit::Set(_) => return None,
        Lit::Inline { .. } | Lit::Str { .. } => LitKey::Bytes(code.bytes(&p.lit)?),
    };
    Some(PredKey {
        field: p.field,
        op: p.op,
        lower: p.lower,
        any,
        lit,
    })
}

/// The predicates that must all hold for instruction `i` of `code` to hold, as far as `&&`
/// alone shows.
fn conjunct_predicates<'a>(code: &Code<'a>, i: usize, out: &mut Vec<&'a Pred>) {
    match &code.code()[i] {
        Instr::Pred(p) => out.push(p),
        &Instr::And { end, .. } => {
            let mut c = i + 1;
            while c < end as usize {
                conjunct_predicates(code, c, out);
                c = code.end(c);
            }
        }
        // An `||` or a `!( … )` does not make each of its predicates necessary.
        Instr::Or { .. } | Instr::Not { .. } | Instr::End => {}
    }
}

fn part_implied(conj: &mut Conjuncts<'_>, s: &Code<'_>, i: usize) -> bool {
    let children = |end: u32| {
        let mut c = i + 1;
        std::iter::from_fn(move || {
            (c < end as usize).then(|| {
                let at = c;
                c = s.end(c);
                at
            })
        })
    };
    match &s.code()[i] {
        &Instr::And { end, .. } => children(end).all(|c| part_implied(conj, s, c)),
        &Instr::Or { end, .. } => children(end).any(|c| part_implied(conj, s, c)),
        Instr::Pred(p) => pred_implied(conj, s, p),
        Instr::Not { .. } => false,
        Instr::End => true,
    }
}

/// Whether one of `r`'s conjuncts implies `p` (of `s`): the same predicate (over every value,
/// which implies one over any value), or one on the field that implies it.
fn pred_implied(conj: &mut Conjuncts<'_>, s: &Code<'_>, p: &Pred) -> bool {
    let same = |any| key(s, p, any).is_some_and(|k| conj.verbatim.contains(&k));
    if same(p.any) || (p.any && same(false)) {
        return true;
    }
    let Some(candidates) = conj.by_field.get(&p.field) else {
        return false;
    };
    if candidates.len() > conj.budget {
        conj.budget = 0;
        return false;
    }
    conj.budget -= candidates.len();
    crate::work::add(candidates.len());
    candidates
        .iter()
        .any(|q| predicate_implies(&conj.r, q, s, p))
}

/// Whether `rp` (of `r`) holding implies `sp` (of `s`) holding.
fn predicate_implies(r: &Code<'_>, rp: &Pred, s: &Code<'_>, sp: &Pred) -> bool {
    // `sp` over every value needs `rp` over every value too; either mode implies "any".
    if rp.field != sp.field || (rp.any && !sp.any) {
        return false;
    }
    if rp.op == sp.op && rp.lower == sp.lower && same_literal(r, &rp.lit, s, &sp.lit) {
        return true;
    }
    match rp.op {
        // Every value (lowered, if `rp` lowers) is the literal: test `sp` on it. When `rp`
        // lowers and `sp` does not, the value itself is unknown.
        Op::Equals if !rp.lower || sp.lower => match exact_value(r, &rp.lit) {
            Some(v) => test_value(s, sp, &v, &mut String::new(), None),
            None => false,
        },
        Op::Prefix | Op::Postfix | Op::Contains if rp.lower == sp.lower => {
            let (Some(x), Some(y)) = (r.bytes(&rp.lit), s.bytes(&sp.lit)) else {
                return false;
            };
            match (rp.op, sp.op) {
                (Op::Prefix, Op::Prefix) => x.starts_with(y),
                (Op::Postfix, Op::Postfix) => x.ends_with(y),
                (_, Op::Contains) => contains(x, y),
                _ => false,
            }
        }
        Op::Regex if rp.lower == sp.lower => {
            let (Lit::Regex(re), Op::Prefix | Op::Contains) = (&rp.lit, sp.op) else {
                return false;
            };
            let (Some(prefixes), Some(y)) = (re.anchored_prefixes(), s.bytes(&sp.lit)) else {
                return false;
            };
            // Every matching value starts with one of the prefixes.
            prefixes.iter().all(|p| match sp.op {
                Op::Prefix => p.starts_with(y),
                _ => contains(p, y),
            })
        }
        // Every value (lowered, if `rp` lowers) is an element: `sp` must hold for each.
        Op::In if !rp.lower || sp.lower => match &rp.lit {
            Lit::Set(set) => match &**set {
                Set::Str(v) => v
                    .iter()
                    .all(|e| holds_for(s, sp, Value::String(e.to_string()))),
                Set::Int(v) => v.iter().all(|i| holds_for(s, sp, Value::Int(*i))),
                // An address element is one value to test; a network needs `sp` to be `in`
                // networks that hold it.
                Set::Net(v) => v.iter().all(|n| {
                    let host = n.network_length() == if n.is_ipv4() { 32 } else { 128 };
                    (host && holds_for(s, sp, Value::IpAddr(n.first_address())))
                        || (sp.op == Op::In && nets(&sp.lit).is_some_and(|o| covered(&[*n], o)))
                }),
            },
            Lit::IpCidr(inner) => {
                sp.op == Op::In && nets(&sp.lit).is_some_and(|o| covered(&[*inner], o))
            }
            _ => false,
        },
        // No value is in `rp`'s set, so none is in a subset of it.
        Op::NotIn if rp.lower == sp.lower && sp.op == Op::NotIn => match (&rp.lit, &sp.lit) {
            (Lit::Set(x), Lit::Set(y)) => match (&**x, &**y) {
                (Set::Str(_), Set::Str(y)) => y.iter().all(|e| x.has_str(e)),
                (Set::Int(_), Set::Int(y)) => y.iter().all(|i| x.has_int(*i)),
                _ => matches!((nets(&rp.lit), nets(&sp.lit)), (Some(x), Some(y)) if covered(y, x)),
            },
            _ => matches!((nets(&rp.lit), nets(&sp.lit)), (Some(x), Some(y)) if covered(y, x)),
        },
        // What is left proves nothing here (no false alarm: lint then says nothing). Listed,
        // not a catch-all, so that a new operator is decided here too.
        Op::Equals
        | Op::NotEquals
        | Op::Prefix
        | Op::Postfix
        | Op::Contains
        | Op::Regex
        | Op::In
        | Op::NotIn
        | Op::Greater
        | Op::GreaterOrEqual
        | Op::Less
        | Op::LessOrEqual => false,
    }
}

/// Whether `sp` holds for a field whose only value is `v`.
fn holds_for(s: &Code<'_>, sp: &Pred, v: Value) -> bool {
    test_value(s, sp, &v, &mut String::new(), None)
}

/// The networks an `in` / `not in` literal on an IpAddr field stands for.
fn nets(lit: &Lit) -> Option<&[IpCidr]> {
    match lit {
        Lit::IpCidr(c) => Some(std::slice::from_ref(c)),
        Lit::Set(set) => match &**set {
            Set::Net(v) => Some(v),
            _ => None,
        },
        _ => None,
    }
}

/// Whether every network of `inner` lies inside one of `outer`.
fn covered(inner: &[IpCidr], outer: &[IpCidr]) -> bool {
    inner.iter().all(|i| {
        outer.iter().any(|o| {
            o.network_length() <= i.network_length() && cidr_contains(o, &i.first_address())
        })
    })
}

/// The value an `==` literal fixes.
fn exact_value(code: &Code<'_>, lit: &Lit) -> Option<Value> {
    Some(match lit {
        Lit::Int(i) => Value::Int(*i),
        Lit::IpAddr(a) => Value::IpAddr(*a),
        Lit::IpCidr(c) => Value::IpCidr(*c),
        Lit::Regex(_) | Lit::Set(_) => return None,
        Lit::Inline { .. } | Lit::Str { .. } => {
            Value::String(String::from_utf8(code.bytes(lit)?.to_vec()).ok()?)
        }
    })
}

fn same_literal(r: &Code<'_>, a: &Lit, s: &Code<'_>, b: &Lit) -> bool {
    match (a, b) {
        (Lit::Regex(x), Lit::Regex(y)) => x.as_str() == y.as_str(),
        (Lit::Int(x), Lit::Int(y)) => x == y,
        (Lit::IpAddr(x), Lit::IpAddr(y)) => x == y,
        (Lit::IpCidr(x), Lit::IpCidr(y)) => x == y,
        (Lit::Set(x), Lit::Set(y)) => x == y,
        _ => matches!((r.bytes(a), s.bytes(b)), (Some(x), Some(y)) if x == y),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::program::Program;
    use crate::compile::regex_cache::{PreparedRegexes, RegexCache};
    use crate::compile::resolve::{resolve, Fields};
    use crate::limits::Limits;
    use crate::schema::Schema;
    use crate::value::Type;

    fn program(expression: &str) -> Program {
        let mut schema = Schema::new();
        for (name, ty) in [("m", Type::String), ("p", Type::Int), ("ip", Type::IpAddr)] {
            schema.add_field(name, ty).unwrap();
        }
        let limits = Limits::default();
        let parsed = crate::language::parse_with_limits(expression, &limits).unwrap();
        let cache = RegexCache::default();
        let node = resolve(
            expression,
            &parsed,
            Fields::Peek(&schema),
            &limits,
            &mut PreparedRegexes::new(&cache),
        )
        .unwrap();
        Program::compile(&node)
    }

    fn implied(r: &str, s: &str) -> bool {
        implies(&program(r).view(), &program(s).view())
    }

    #[test]
    fn sets_imply_what_holds_for_each_element() {
        for (r, s) in [
            (r#"m in ["a", "b"]"#, r#"m in ["b", "c", "a"]"#),
            (r#"m == "a""#, r#"m in ["a", "c"]"#),
            (r#"m in ["a", "a"]"#, r#"m == "a""#),
            (r#"m in ["/x/a", "/x/b"]"#, r#"m ^= "/x/""#),
            (r#"lower(m) in ["a"]"#, r#"lower(m) in ["a", "b"]"#),
            (r#"m in ["a"]"#, r#"lower(m) in ["a", "b"]"#),
            ("p in [1, 2]", "p in [2, 1, 3]"),
            ("p in [1, 2]", "p < 3"),
            ("ip in [10.1.0.0/16, 10.0.0.1]", "ip in 10.0.0.0/8"),
            ("ip in 10.1.0.0/16", "ip in [10.0.0.0/8, ::1]"),
            ("ip in [10.0.0.1]", "ip == 10.0.0.1"),
            ("ip == 10.0.0.1", "ip in [10.0.0.0/8]"),
            (r#"m not in ["a", "b"]"#, r#"m not in ["b"]"#),
            ("p not in [1, 2, 3]", "p not in [3, 1]"),
            (
                "ip not in [10.0.0.0/8]",
                "ip not in [10.1.0.0/16, 10.0.0.1]",
            ),
        ] {
            assert!(implied(r, s), "{r} should imply {s}");
        }
    }

    #[test]
    fn sets_imply_nothing_an_element_escapes() {
        for (r, s) in [
            (r#"m in ["a", "b"]"#, r#"m in ["a"]"#),
            (r#"m in ["a", "b"]"#, r#"m == "a""#),
            (r#"lower(m) in ["a"]"#, r#"m in ["a"]"#),
            (r#"any(m) in ["a"]"#, r#"m in ["a"]"#),
            ("p in [1, 5]", "p < 3"),
            ("ip in [10.0.0.0/8]", "ip in [10.0.0.0/16]"),
            ("ip in [10.0.0.0/8]", "ip == 10.0.0.0"),
            (r#"m not in ["b"]"#, r#"m not in ["a", "b"]"#),
            (r#"m not in ["a"]"#, r#"lower(m) not in ["a"]"#),
            ("ip not in [10.1.0.0/16]", "ip not in [10.0.0.0/8]"),
            (r#"m not in ["a"]"#, r#"m in ["b"]"#),
        ] {
            assert!(!implied(r, s), "{r} should not imply {s}");
        }
    }
}
