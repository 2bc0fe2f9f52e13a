//! Syntax errors in plain words: pest's error (an expected-rules list at a position) becomes a
//! message about the text, with a sharper hint for the mistakes people make (unterminated
//! strings, numbers and addresses the language does not have, `!` without a group).
//!
//! Invariant: no grammar rule name ever reaches a message; every rule has words in
//! [`describe_rule`], and a quoted piece of the source is at most `QUOTED_CHARS` characters.

use std::net::{IpAddr, Ipv6Addr};
use std::ops::Range;
use std::sync::LazyLock;

use super::grammar::Rule;
use super::operator::Op;
use crate::error::{excerpt, ExprError, ExprErrorKind, QUOTED_CHARS};
use crate::value::Value;

pub(super) fn syntax_error(source: &str, e: pest::error::Error<Rule>) -> ExprError {
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

/// "an operator (==, !=, ...)": every operator, from [`Op::ALL`].
static AN_OPERATOR: LazyLock<String> = LazyLock::new(|| {
    let symbols: Vec<&str> = Op::ALL.iter().map(|op| op.symbol()).collect();
    format!("an operator ({})", symbols.join(", "))
});

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
        | Rule::op_contains => AN_OPERATOR.as_str(),
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
