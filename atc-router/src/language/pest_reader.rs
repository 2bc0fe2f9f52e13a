//! The pest reader: the reference reading of a text by the grammar, and the only one that
//! words syntax errors. It takes everything the fast reader declines.
//!
//! Invariants: it builds exactly the tree the fast reader builds for a text both read; `&&`
//! and `||` chains are read as flat lists (no recursion per operand); the caller checked
//! length and nesting, and gives it the stack the grammar's rules need.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;

use pest::iterators::Pair;
use pest::Parser as _;

use super::grammar::{Grammar, Rule};
use super::lexis::{escape, int_value, ip_text, prefix_digits, set_kind};
use super::parsed::PredicateSpans;
use crate::error::{excerpt, ExprError, ExprErrorKind};
use crate::language::{Expr, Lhs, Op, Predicate, Rhs, Transform};
use crate::value::{IpCidr, Value};

/// The grammar and [`Builder`]: the reference reading of a text, and the only one that words
/// syntax errors. The caller has checked length and nesting.
pub(crate) fn parse_with_pest(source: &str) -> Result<(Expr, Vec<PredicateSpans>), ExprError> {
    let mut pairs = Grammar::parse(Rule::matcher, source)
        .map_err(|e| super::syntax_error::syntax_error(source, e))?;
    let matcher = pairs
        .next()
        .expect("the matcher rule always yields one pair");
    let expression = matcher
        .into_inner()
        .next()
        .expect("matcher starts with an expression");
    let mut builder = Builder {
        source,
        spans: Vec::new(),
    };
    let expr = builder.expression(expression)?;
    Ok((expr, builder.spans))
}

struct Builder<'s> {
    source: &'s str,
    spans: Vec<PredicateSpans>,
}

impl<'s> Builder<'s> {
    fn error(&self, span: Range<usize>, message: String) -> ExprError {
        ExprError::new(ExprErrorKind::Syntax, self.source, span, message)
    }

    /// `term {op term}`: split at `&&` into groups joined by `||` (so `||` binds tighter).
    fn expression(&mut self, pair: Pair<'s, Rule>) -> Result<Expr, ExprError> {
        let mut groups: Vec<Vec<Expr>> = vec![Vec::new()];
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::and_op => groups.push(Vec::new()),
                Rule::or_op => {}
                _ => {
                    let term = self.term(p)?;
                    groups.last_mut().expect("never empty").push(term);
                }
            }
        }
        let mut ors: Vec<Expr> = groups
            .into_iter()
            .map(|mut g| {
                if g.len() == 1 {
                    g.pop().expect("one element")
                } else {
                    Expr::Or(g)
                }
            })
            .collect();
        Ok(if ors.len() == 1 {
            ors.pop().expect("one element")
        } else {
            Expr::And(ors)
        })
    }

    fn term(&mut self, pair: Pair<'s, Rule>) -> Result<Expr, ExprError> {
        match pair.as_rule() {
            Rule::not_group => {
                let inner = inner_expression(pair);
                let e = crate::stack::guarded(|| self.expression(inner))?;
                Ok(Expr::Not(Box::new(e)))
            }
            Rule::group => {
                let inner = inner_expression(pair);
                crate::stack::guarded(|| self.expression(inner))
            }
            Rule::predicate => self.predicate(pair),
            r => unreachable!("grammar yields no {r:?} as a term"),
        }
    }

    fn predicate(&mut self, pair: Pair<'s, Rule>) -> Result<Expr, ExprError> {
        let whole = span(&pair);
        let mut it = pair.into_inner();
        let (lhs_pair, op_pair, rhs_pair) = (
            it.next().expect("lhs"),
            it.next().expect("op"),
            it.next().expect("rhs"),
        );
        // Reserve the predicate's number before recursing, so numbering stays textual.
        let index = self.spans.len();
        self.spans.push(PredicateSpans {
            predicate: whole,
            // pest skips the white space before trying the optional `(` of a transformation,
            // and counts it into the rule: trim it off.
            lhs: {
                let sp = span(&lhs_pair);
                sp.start..sp.start + lhs_pair.as_str().trim_end().len()
            },
            field: 0..0,
            op: span(&op_pair),
            rhs: span(&rhs_pair),
            elements: Vec::new(),
        });
        let mut transforms = Vec::new();
        let (field, field_span) = self.lhs(lhs_pair, &mut transforms)?;
        self.spans[index].field = field_span;
        let op = operator(op_pair);
        let lit = rhs_pair.into_inner().next().expect("rhs has one child");
        let rhs = if lit.as_rule() == Rule::set_lit {
            if !matches!(op, Op::In | Op::NotIn) {
                return Err(self.error(
                    span(&lit),
                    format!(
                        "a set `[…]` goes only after `in` or `not in`, not after `{op}` \
                         (such as `http.method in [\"GET\", \"HEAD\"]`)"
                    ),
                ));
            }
            let (elements, spans) = self.set(lit)?;
            self.spans[index].elements = spans;
            Rhs::Set(elements)
        } else {
            Rhs::Value(self.literal(lit)?)
        };
        Ok(Expr::Predicate(Predicate {
            lhs: Lhs { field, transforms },
            op,
            rhs,
        }))
    }

    fn lhs(
        &mut self,
        pair: Pair<'s, Rule>,
        transforms: &mut Vec<Transform>,
    ) -> Result<(String, Range<usize>), ExprError> {
        let mut it = pair.into_inner();
        let name = it.next().expect("lhs starts with a name");
        let Some(_lparen) = it.next() else {
            return Ok((name.as_str().to_owned(), span(&name)));
        };
        let t = match name.as_str() {
            "lower" => Transform::Lower,
            "any" => Transform::Any,
            other => {
                return Err(self.error(
                    span(&name),
                    format!(
                        "unknown transformation `{}`: expected `lower` or `any`",
                        excerpt(other)
                    ),
                ))
            }
        };
        transforms.push(t);
        self.lhs(it.next().expect("transformation argument"), transforms)
    }

    /// `[a, b, …]`: the elements and their spans. docs/language.md "Sets": at least one
    /// element, all of one kind.
    fn set(&self, pair: Pair<'s, Rule>) -> Result<(Vec<Value>, Vec<Range<usize>>), ExprError> {
        let whole = span(&pair);
        let mut elements: Vec<Value> = Vec::new();
        let mut spans = Vec::new();
        for p in pair.into_inner() {
            if matches!(p.as_rule(), Rule::lbracket | Rule::rbracket | Rule::comma) {
                continue;
            }
            let sp = span(&p);
            let v = self.literal(p)?;
            if let Some(first) = elements.first() {
                if set_kind(first) != set_kind(&v) {
                    return Err(self.error(
                        sp,
                        format!(
                            "mixed set: this element is {}, but the first is {}; the elements \
                             of a set are all strings, all integers, or all IP addresses and \
                             CIDRs",
                            set_kind(&v),
                            set_kind(first)
                        ),
                    ));
                }
            }
            elements.push(v);
            spans.push(sp);
        }
        if elements.is_empty() {
            return Err(self.error(
                whole,
                "empty set: a set needs at least one element".to_owned(),
            ));
        }
        Ok((elements, spans))
    }

    /// One literal: a `str_lit`, `raw_str_lit`, `addr_lit` or `int_lit` pair.
    fn literal(&self, lit: Pair<'s, Rule>) -> Result<Value, ExprError> {
        let sp = span(&lit);
        match lit.as_rule() {
            Rule::str_lit => self.string(lit).map(Value::String),
            Rule::raw_str_lit => Ok(Value::String(
                lit.into_inner()
                    .next()
                    .expect("raw string body")
                    .as_str()
                    .to_owned(),
            )),
            Rule::addr_lit if lit.as_str().contains('/') => {
                self.cidr(lit.as_str(), sp).map(Value::IpCidr)
            }
            Rule::addr_lit => self.ip(lit.as_str(), sp).map(Value::IpAddr),
            Rule::int_lit => self.int(lit).map(Value::Int),
            r => unreachable!("grammar yields no {r:?} as a value"),
        }
    }

    fn string(&self, pair: Pair<'s, Rule>) -> Result<String, ExprError> {
        let mut out = String::new();
        for piece in pair.into_inner() {
            match piece.as_rule() {
                Rule::str_chars => out.push_str(piece.as_str()),
                Rule::str_escape => match escape(piece.as_str().as_bytes()[1]) {
                    Some(c) if piece.as_str().len() == 2 => out.push(c),
                    _ => {
                        let other = &piece.as_str()[1..];
                        // A raw line break or other control character after `\` would break the
                        // message's layout if quoted; describe it instead.
                        let escape = match other {
                            "\n" | "\r" => "`\\` followed by a line break".to_owned(),
                            c if c.chars().all(char::is_control) => {
                                format!("`\\` followed by {}", c.escape_unicode())
                            }
                            c => format!("`\\{c}`"),
                        };
                        return Err(self.error(
                            span(&piece),
                            format!(
                                "unknown escape {escape} in a string: the escapes are \\\" \\\\ \\n \\r \\t \
                                 (for a regex, write `\\\\` or use a raw string r#\"…\"#)"
                            ),
                        ));
                    }
                },
                r => unreachable!("grammar yields no {r:?} in a string"),
            }
        }
        Ok(out)
    }

    fn ip(&self, text: &str, sp: Range<usize>) -> Result<IpAddr, ExprError> {
        ip_text(text).ok_or_else(|| {
            let what = if text.contains(':') {
                "an IPv6 address in standard notation (no embedded IPv4, no zone)"
            } else {
                "a dotted-quad IPv4 address (octets 0-255, no leading zeros)"
            };
            self.error(
                sp,
                format!("invalid IP address `{}`: expected {what}", excerpt(text)),
            )
        })
    }

    fn cidr(&self, text: &str, sp: Range<usize>) -> Result<IpCidr, ExprError> {
        let (addr_text, len_text) = text.split_once('/').expect("grammar puts a `/` in a CIDR");
        let addr = self.ip(addr_text, sp.start..sp.start + addr_text.len())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len_span = sp.start + addr_text.len() + 1..sp.end;
        let len = match len_text.parse::<u8>() {
            Ok(l) if l <= max && len_text.len() <= prefix_digits(&addr) => l,
            _ => {
                return Err(self.error(
                    len_span,
                    format!(
                        "invalid prefix length `/{}`: expected 0 to {max}, in at most {} \
                         digits",
                        excerpt(len_text),
                        prefix_digits(&addr)
                    ),
                ))
            }
        };
        IpCidr::new(addr, len).map_err(|_| {
            let suggestion = network_of(addr, len);
            self.error(
                sp.clone(),
                format!(
                    "invalid CIDR `{}`: the host bits must be zero (did you mean {}?)",
                    excerpt(text),
                    Value::IpCidr(suggestion)
                ),
            )
        })
    }

    fn int(&self, pair: Pair<'s, Rule>) -> Result<i64, ExprError> {
        let sp = span(&pair);
        let text = pair.as_str();
        let mut negative = false;
        let mut value = None;
        for part in pair.into_inner() {
            let (digits, radix) = match part.as_rule() {
                Rule::int_neg => {
                    negative = true;
                    continue;
                }
                Rule::int_oct => (&part.as_str()[1..], 8),
                Rule::int_hex => (&part.as_str()[2..], 16),
                Rule::int_dec => (part.as_str(), 10),
                r => unreachable!("grammar yields no {r:?} in an integer"),
            };
            value = Some(int_value(negative, digits, radix));
        }
        match value.expect("an integer has digits") {
            Some(v) => Ok(v),
            None => Err(self.error(
                sp,
                format!(
                    "integer `{}` is out of range: its magnitude must be at most {} \
                     (a signed 64-bit integer)",
                    excerpt(text),
                    i64::MAX
                ),
            )),
        }
    }
}

fn network_of(addr: IpAddr, len: u8) -> IpCidr {
    let masked = match addr {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
        }
    };
    IpCidr::new(masked, len).expect("masked address has no host bits")
}

fn inner_expression(pair: Pair<'_, Rule>) -> Pair<'_, Rule> {
    pair.into_inner()
        .find(|p| p.as_rule() == Rule::expression)
        .expect("a group holds an expression")
}

fn operator(pair: Pair<'_, Rule>) -> Op {
    match pair.into_inner().next().expect("operator").as_rule() {
        Rule::op_eq => Op::Equals,
        Rule::op_ne => Op::NotEquals,
        Rule::op_regex => Op::Regex,
        Rule::op_prefix => Op::Prefix,
        Rule::op_postfix => Op::Postfix,
        Rule::op_gt => Op::Greater,
        Rule::op_ge => Op::GreaterOrEqual,
        Rule::op_lt => Op::Less,
        Rule::op_le => Op::LessOrEqual,
        Rule::op_in => Op::In,
        Rule::op_not_in => Op::NotIn,
        Rule::op_contains => Op::Contains,
        r => unreachable!("grammar yields no {r:?} as an operator"),
    }
}

fn span(pair: &Pair<'_, Rule>) -> Range<usize> {
    let s = pair.as_span();
    s.start()..s.end()
}
