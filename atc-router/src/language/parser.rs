//! Text → [`Expr`], with the lexical rules of docs/language.md "Text" and the precedence of
//! docs/language.md "Grammar and precedence".
//!
//! Invariants a change must keep:
//! - Nothing recurses deeper than the nesting limit: `check_nesting` rejects deep inputs before
//!   pest (a recursive-descent parser) sees them, and `&&`/`||` chains are read as flat lists.
//! - Every error is worded for a person: pest's rule names never reach a message
//!   (see `syntax_error.rs`).
//! - Predicates are numbered in textual order; [`Parsed::spans`] is indexed by that number.
//! - A well-formed text is read by `fast`, which must give exactly what pest and `Builder`
//!   give; anything it declines, every error included, goes through pest.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;

use pest::iterators::Pair;
use pest::Parser as _;

use crate::error::{excerpt, ExprError, ExprErrorKind};
use crate::language::{Expr, Lhs, Op, Predicate, Rhs, Transform};
use crate::limits::Limits;
use crate::value::{IpCidr, Value};

#[derive(pest_derive::Parser)]
#[grammar = "language/grammar.pest"]
struct Grammar;

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
    /// How much the predicate counts toward [`Limits::max_predicates`]: one, or one per
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

/// Stack pest's rules need for an expression at [`Limits::HARD_MAX_DEPTH`], with a margin (about
/// 2 KiB per level in a release build, several times that in a debug one).
const PEST_STACK: usize = if cfg!(debug_assertions) {
    8 * 1024 * 1024
} else {
    1024 * 1024
};

/// Parses an expression with the default [`Limits`].
///
/// ```
/// use atc_router::{parse, Expr};
/// let e = parse(r#"http.host == "a.com" && http.path ^= "/v1" || http.path ^= "/v2""#).unwrap();
/// // `||` binds tighter than `&&`.
/// assert!(matches!(&e, Expr::And(c) if matches!(c[1], Expr::Or(_))));
/// assert_eq!(parse(&e.to_string()).unwrap(), e);
/// ```
pub fn parse(source: &str) -> Result<Expr, ExprError> {
    parse_with_limits(source, &Limits::default()).map(|p| p.expr)
}

/// Parses an expression, keeping predicate positions.
pub fn parse_with_limits(source: &str, limits: &Limits) -> Result<Parsed, ExprError> {
    if source.len() > limits.max_expression_len {
        return Err(ExprError::new(
            ExprErrorKind::Limit,
            source,
            limits.max_expression_len..source.len(),
            format!(
                "expression is too long: {} bytes, the limit is {} bytes",
                source.len(),
                limits.max_expression_len
            ),
        ));
    }
    check_nesting(source, limits.depth())?;
    let (expr, spans) = match super::fast_reader::parse(source) {
        Some(read) => read,
        // pest's generated rules recurse several frames per nesting level and cannot be guarded
        // level by level: room for the deepest expression the limits let through.
        None => crate::stack::with_room(PEST_STACK, || parse_with_pest(source))?,
    };
    check_predicate_count(source, &spans, limits.max_predicates)?;
    Ok(Parsed { expr, spans })
}

/// docs/language.md "Errors": at most `max` predicates, each element of a set counting as one.
/// The error points at the predicate, or the element of a set, that goes past the limit.
fn check_predicate_count(
    source: &str,
    spans: &[PredicateSpans],
    max: usize,
) -> Result<(), ExprError> {
    if spans.len() <= max && spans.iter().all(|s| s.elements.is_empty()) {
        return Ok(());
    }
    let total: usize = spans.iter().map(PredicateSpans::weight).sum();
    if total <= max {
        return Ok(());
    }
    let mut before = 0;
    let mut at = None;
    for s in spans {
        if before + s.weight() > max {
            at = Some(match s.elements.get(max - before) {
                Some(element) => element.clone(),
                None => s.predicate.clone(),
            });
            break;
        }
        before += s.weight();
    }
    let sets = if spans.iter().any(|s| !s.elements.is_empty()) {
        " (each element of a set counts as one)"
    } else {
        ""
    };
    Err(ExprError::new(
        ExprErrorKind::Limit,
        source,
        at.expect("the total is over the limit"),
        format!("too many predicates: {total}{sets}, the limit is {max}"),
    ))
}

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

/// What `\c` stands for in a string, for the escapes docs/language.md "Text" allows.
pub(super) fn escape(c: u8) -> Option<char> {
    Some(match c {
        b'"' => '"',
        b'\\' => '\\',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        _ => return None,
    })
}

/// An address as the grammar's loose shape let it through; `None` if it is not one.
pub(super) fn ip_text(text: &str) -> Option<IpAddr> {
    if text.contains(':') {
        text.parse::<Ipv6Addr>().map(IpAddr::V6).ok()
    } else {
        text.parse::<Ipv4Addr>().map(IpAddr::V4).ok()
    }
}

/// How many digits a prefix length may have: two after an IPv4 address, three after IPv6 (so
/// `/08` is 8, but `/008` is refused, as Kong's parser does).
pub(super) fn prefix_digits(addr: &IpAddr) -> usize {
    if addr.is_ipv4() {
        2
    } else {
        3
    }
}

/// An integer from its sign and digits; `None` when the magnitude does not fit in an `i64`.
pub(super) fn int_value(negative: bool, digits: &str, radix: u32) -> Option<i64> {
    let m = i64::from_str_radix(digits, radix).ok()?;
    Some(if negative { -m } else { m })
}

/// Rejects nesting deeper than `max` before the recursive parser runs. String contents are
/// skipped, so parentheses inside literals do not count.
fn check_nesting(source: &str, max: usize) -> Result<(), ExprError> {
    let b = source.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'r' if b[i..].starts_with(b"r#\"") => {
                i += 3;
                while i < b.len() && !b[i..].starts_with(b"\"#") {
                    i += 1;
                }
                i += 1;
            }
            b'(' => {
                depth += 1;
                if depth > max {
                    return Err(ExprError::new(
                        ExprErrorKind::Limit,
                        source,
                        i..i + 1,
                        format!("expression is nested too deeply: the limit is {max} levels of parentheses"),
                    ));
                }
            }
            b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
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

/// The kinds of element a set may not mix (addresses and networks are one kind).
pub(super) fn set_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Int(_) => "an integer",
        Value::IpAddr(_) | Value::IpCidr(_) => "an IP address or CIDR",
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
