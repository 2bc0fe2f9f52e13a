//! Text → [`Expr`], with the lexical rules of docs/language.md "Text" and the precedence of
//! docs/language.md "Grammar and precedence".
//!
//! Invariants a change must keep:
//! - Nothing recurses deeper than the nesting limit: `check_nesting` rejects deep inputs before
//!   pest (a recursive-descent parser) sees them, and `&&`/`||` chains are read as flat lists.
//! - Every error is worded for a person: pest's rule names never reach a message
//!   (see `describe_rule`).
//! - Predicates are numbered in textual order; [`Parsed::spans`] is indexed by that number.
//! - A well-formed text is read by `fast`, which must give exactly what pest and `Builder`
//!   give; anything it declines, every error included, goes through pest.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;

use pest::iterators::Pair;
use pest::Parser as _;

use crate::error::{excerpt, ExprError, ExprErrorKind, QUOTED_CHARS};
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
    let mut pairs = Grammar::parse(Rule::matcher, source).map_err(|e| syntax_error(source, e))?;
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

fn syntax_error(source: &str, e: pest::error::Error<Rule>) -> ExprError {
    let pos = match e.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((s, _)) => s,
    };
    let mut expected: Vec<&str> = Vec::new();
    if let pest::error::ErrorVariant::ParsingError { positives, .. } = &e.variant {
        for r in positives {
            let d = describe_rule(*r);
            if !expected.contains(&d) {
                expected.push(d);
            }
        }
    }
    // A term can start with many things; name them once. `(` after a field only means a
    // transformation call, which is noise next to the list of operators.
    if expected.contains(&TERM) {
        expected.retain(|d| *d == TERM || !matches!(*d, "`(`" | "a field name"));
    }
    if expected.iter().any(|d| d.starts_with("an operator")) {
        expected.retain(|d| *d != "`(`");
    }
    // "the end of the expression" reads best last, and a set's closing `]` after what else
    // could come.
    expected.sort_by_key(|d| match *d {
        "the end of the expression" => 2,
        RBRACKET => 1,
        _ => 0,
    });
    if let Some((span, message)) = lexical_hint(source, pos, &expected) {
        return ExprError::new(ExprErrorKind::Syntax, source, span, message);
    }
    // `f in 80, 443`: a `,` outside a set.
    let hint = if expected.contains(&LOGIC) && source[pos..].starts_with(',') {
        " (a set is written in brackets: `net.dst.port in [80, 443]`)"
    } else {
        ""
    };
    let expected = match expected.len() {
        0 => "a valid expression".to_owned(),
        1 => expected[0].to_owned(),
        n => format!("{} or {}", expected[..n - 1].join(", "), expected[n - 1]),
    };
    let rest = &source[pos..];
    let found = found_text(rest);
    let end = pos + found.len().max(1).min(rest.len());
    let found = if rest.is_empty() {
        "the end of the expression".to_owned()
    } else {
        format!("`{}`", printable(found))
    };
    ExprError::new(
        ExprErrorKind::Syntax,
        source,
        pos..end,
        format!("expected {expected}, found {found}{hint}"),
    )
}

/// Shows control characters as escapes (a raw newline in a message would break the layout);
/// everything else, `\` and quotes included, as itself.
/// At most [`QUOTED_CHARS`] characters are shown, `…` marking a cut.
fn printable(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(QUOTED_CHARS)
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect();
    if s.chars().nth(QUOTED_CHARS).is_some() {
        out.push('…');
    }
    out
}

/// A sharper message than "expected …, found …" for the mistakes docs/language.md "Text" calls out:
/// unterminated strings, raw strings with the wrong number of `#`, numbers and addresses the
/// language does not have (`019`, `0X1F`, `1.5`, `::ffff:1.2.3.4`, `fe80::1%eth0`), and `!` without
/// a group.
fn lexical_hint(source: &str, pos: usize, expected: &[&str]) -> Option<(Range<usize>, String)> {
    let rest = &source[pos..];
    if expected.contains(&UNCLOSED_STRING) && (rest.is_empty() || rest == "\\") {
        let open = open_string_start(&source[..pos])?;
        return Some((
            open..open + 1,
            "unterminated string: there is no closing `\"` before the end of the expression"
                .to_owned(),
        ));
    }
    if expected.contains(&VALUE) {
        if rest.starts_with("r#\"") {
            return Some((
                pos..pos + 3,
                "unterminated raw string: there is no closing `\"#` before the end of the \
                 expression"
                    .to_owned(),
            ));
        }
        if rest.starts_with("r#") || rest.starts_with("r\"") {
            let len = rest.find('"').map_or(2, |i| i + 1).min(8);
            return Some((
                pos..pos + len,
                "invalid raw string: a raw string is written r#\"…\"#, with exactly one `#`"
                    .to_owned(),
            ));
        }
    }
    if expected == [LPAREN] && source[..pos].trim_end().ends_with('!') {
        let found = match found_text(rest) {
            "" => "the end of the expression".to_owned(),
            f => format!("`{}`", printable(f)),
        };
        let end = pos + found_text(rest).len().max(1).min(rest.len());
        return Some((
            pos..end,
            format!(
                "expected `(` after `!`, found {found} (`!` negates only a parenthesised group, \
                 as in `!(http.path ^= \"/admin\")`)"
            ),
        ));
    }
    if expected.contains(&LOGIC) || expected.contains(&RBRACKET) {
        if let Some(hint) = glued_value(source, pos) {
            return Some(hint);
        }
    }
    None
}

/// `1.5`, `1.`, `1e5`, `1.5E-3`.
fn looks_like_float(s: &str) -> bool {
    let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let int = digits(s);
    let mut rest = &s[int..];
    let mut fraction = false;
    if let Some(r) = rest.strip_prefix('.') {
        rest = &r[digits(r)..];
        fraction = true;
    }
    let mut exponent = false;
    if let Some(r) = rest.strip_prefix(['e', 'E']) {
        let r = r.strip_prefix('-').unwrap_or(r);
        exponent = digits(r) > 0;
        rest = &r[digits(r)..];
    }
    int > 0 && rest.is_empty() && (fraction || exponent)
}

/// The start of the string literal still open at the end of `before`, scanning as
/// [`check_nesting`] does.
fn open_string_start(before: &str) -> Option<usize> {
    let b = before.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            if i >= b.len() {
                return Some(start);
            }
        } else if b[i..].starts_with(b"r#\"") {
            i += 3;
            while i < b.len() && !b[i..].starts_with(b"\"#") {
                i += 1;
            }
            i += 1;
        }
        i += 1;
    }
    None
}

/// A value immediately followed by more value-like characters (`019`, `0X1F`, `1.5`,
/// `::ffff:1.2.3.4`, `fe80::1%eth0`): the grammar read a valid prefix and stopped; name the
/// whole word and say why it is not a value.
fn glued_value(source: &str, pos: usize) -> Option<(Range<usize>, String)> {
    let b = source.as_bytes();
    let is_word = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b':' | b'/');
    let glued = |c: u8| is_word(c) || matches!(c, b'%' | b'-');
    let ends_value = |c: u8| c.is_ascii_alphanumeric() || c == b':';
    if pos == 0 || pos >= b.len() || !ends_value(b[pos - 1]) || !glued(b[pos]) {
        return None;
    }
    let mut start = pos;
    while start > 0 && is_word(b[start - 1]) {
        start -= 1;
    }
    if start > 0 && b[start - 1] == b'-' {
        start -= 1;
    }
    let mut end = pos;
    while end < b.len() && glued(b[end]) {
        end += 1;
    }
    // An alphabetic operator glued to its value (`a in10.0.0.0/8x`) is not part of the value.
    for op in ["in", "contains"] {
        if source[start..].starts_with(op) && start + op.len() < pos {
            start += op.len();
        }
    }
    let word = &source[start..end];
    let magnitude = word.trim_start_matches('-');
    let why = if magnitude.contains(':') {
        let (addr, prefix) = magnitude
            .split_once('/')
            .map_or((magnitude, ""), |(a, p)| (a, p));
        if magnitude.contains('%') {
            "an IPv6 address cannot have a zone (`%…`)".to_owned()
        } else if let Ok(a) = addr.parse::<Ipv6Addr>() {
            let slash = if prefix.is_empty() { "" } else { "/" };
            format!(
                "an IPv6 address cannot end in dotted IPv4 form; write it in hex: `{}{slash}{}`",
                Value::IpAddr(IpAddr::V6(a)),
                excerpt(prefix)
            )
        } else {
            "expected an IPv6 address in standard notation (no embedded IPv4, no zone)".to_owned()
        }
    } else if magnitude.starts_with("0X") {
        "a hexadecimal integer starts with a lowercase `0x`".to_owned()
    } else if magnitude.starts_with("0x") {
        "expected hexadecimal digits (0-9, a-f, A-F) after `0x`".to_owned()
    } else if magnitude.len() > 1
        && magnitude.starts_with('0')
        && magnitude.bytes().all(|c| c.is_ascii_digit())
    {
        "an integer with a leading `0` is octal, and octal digits are 0-7".to_owned()
    } else if looks_like_float(magnitude) {
        "numbers are integers; there are no floating-point numbers".to_owned()
    } else {
        "expected a \"string\", a raw string r#\"…\"#, an integer, an IP address or a CIDR"
            .to_owned()
    };
    // The word is ASCII, so any cut is on a character boundary.
    let shown = if word.len() > 48 {
        format!("{}…", &word[..48])
    } else {
        word.to_owned()
    };
    Some((start..end, format!("invalid value `{shown}`: {why}")))
}

/// The word or character at the error position, for "found …".
fn found_text(rest: &str) -> &str {
    let word = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(rest.len());
    if word > 0 {
        return &rest[..word.min(40)];
    }
    rest.chars().next().map_or("", |c| &rest[..c.len_utf8()])
}

const TERM: &str = "a predicate (such as `http.path ^= \"/\"`), `(` or `!(`";
const VALUE: &str =
    "a value (a \"string\", a raw string r#\"…\"#, an integer, an IP address or a CIDR)";
const UNCLOSED_STRING: &str = "the closing `\"` of the string";
const LOGIC: &str = "`&&`, `||`";
const LPAREN: &str = "`(`";
const RBRACKET: &str = "`]`";

/// Plain words for what a grammar rule stands for.
fn describe_rule(rule: Rule) -> &'static str {
    match rule {
        Rule::matcher
        | Rule::expression
        | Rule::term
        | Rule::predicate
        | Rule::not_group
        | Rule::group => TERM,
        Rule::lhs | Rule::ident => "a field name",
        Rule::operator
        | Rule::op_eq
        | Rule::op_ne
        | Rule::op_regex
        | Rule::op_prefix
        | Rule::op_postfix
        | Rule::op_ge
        | Rule::op_gt
        | Rule::op_le
        | Rule::op_lt
        | Rule::op_not_in
        | Rule::op_in
        | Rule::op_contains => {
            "an operator (==, !=, ~, ^=, =^, >, >=, <, <=, in, not in, contains)"
        }
        Rule::rhs
        | Rule::set_lit
        | Rule::set_elem
        | Rule::lbracket
        | Rule::str_lit
        | Rule::raw_str_lit
        | Rule::addr_lit
        | Rule::cidr_len
        | Rule::ipv4_text
        | Rule::ipv6_text
        | Rule::int_lit
        | Rule::int_neg
        | Rule::int_oct
        | Rule::int_hex
        | Rule::int_dec => VALUE,
        Rule::str_escape | Rule::str_chars => UNCLOSED_STRING,
        Rule::raw_str_body => "the closing `\"#` of the raw string",
        Rule::logic_op | Rule::and_op | Rule::or_op => LOGIC,
        Rule::EOI => "the end of the expression",
        Rule::lparen => LPAREN,
        Rule::rparen => "`)`",
        Rule::rbracket => RBRACKET,
        Rule::comma => "`,`",
        Rule::WHITESPACE => "white space",
    }
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
