//! Property tests of the syntax layer (spec §3 "printing an expression and parsing the print gives
//! the same tree", §8 "nothing a caller passes may crash"):
//! - random trees print and re-parse to the same tree, and so does any other spelling of them
//!   (other whitespace, number bases, escapes, raw strings, IPv6 forms, redundant parentheses);
//! - random bytes, token soups and damaged prints never make the parser panic, every error they
//!   give is well-formed, and whatever parses also round-trips.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use atc_router::{
    parse, parse_with_limits, Expr, ExprError, IpCidr, Lhs, Limits, Op, Predicate, Transform, Value,
};
use proptest::prelude::*;
use proptest::sample::select;

// ---------------------------------------------------------------------------------------------
// Trees.

const FIELDS: &[&str] = &[
    "a",
    "f",
    "http.path",
    "http.headers.x_foo",
    "net.src.ip",
    "Z9_.",
    "x..y",
    // Words of the language are ordinary field names.
    "in",
    "not",
    "contains",
    "lower",
    "any",
    "r",
];

/// Characters that stress the string printer and the nesting pre-scan.
const NASTY: &[char] = &[
    '"', '\\', '\n', '\r', '\t', '#', 'r', '(', ')', '!', '&', '|', ' ', '\0', 'é', '🦀',
    '\u{feff}', '\u{7f}', '\u{2028}',
];

fn string_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        prop::collection::vec(prop_oneof![3 => select(NASTY), 1 => any::<char>()], 0..12)
            .prop_map(String::from_iter),
        select(vec!["", "\"#", "r#\"", "\\", "\"", "((((", "a\\d"]).prop_map(String::from),
    ]
}

fn int_value() -> impl Strategy<Value = i64> {
    // Never i64::MIN: its magnitude does not fit in an i64, so the language cannot write it.
    prop_oneof![
        (i64::MIN + 1)..=i64::MAX,
        -20i64..20,
        Just(i64::MAX),
        Just(i64::MIN + 1),
    ]
}

fn ipv4() -> impl Strategy<Value = Ipv4Addr> {
    prop_oneof![
        any::<u32>().prop_map(Ipv4Addr::from),
        select(vec![0u32, u32::MAX, 0x7f00_0001]).prop_map(Ipv4Addr::from),
    ]
}

fn ipv6() -> impl Strategy<Value = Ipv6Addr> {
    // Zero groups are common, so every position and length of `::` comes up, as do
    // IPv4-mapped (`::ffff:…`) and IPv4-compatible addresses.
    prop::array::uniform8(prop_oneof![
        3 => Just(0u16),
        1 => Just(0xffffu16),
        4 => any::<u16>(),
    ])
    .prop_map(Ipv6Addr::from)
}

fn ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![ipv4().prop_map(IpAddr::V4), ipv6().prop_map(IpAddr::V6)]
}

/// A network with its host bits zeroed.
fn cidr() -> impl Strategy<Value = IpCidr> {
    prop_oneof![
        (ipv4(), 0u8..=32).prop_map(|(a, len)| {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpCidr::new(IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask)), len).unwrap()
        }),
        (ipv6(), 0u8..=128).prop_map(|(a, len)| {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpCidr::new(IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask)), len).unwrap()
        }),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        string_value().prop_map(Value::String),
        int_value().prop_map(Value::Int),
        ip().prop_map(Value::IpAddr),
        cidr().prop_map(Value::IpCidr),
    ]
}

fn predicate() -> impl Strategy<Value = Predicate> {
    (
        select(FIELDS),
        prop::collection::vec(select(vec![Transform::Lower, Transform::Any]), 0..=3),
        select(Op::ALL.to_vec()),
        value(),
    )
        .prop_map(|(field, transforms, op, rhs)| Predicate {
            lhs: Lhs {
                field: field.to_owned(),
                transforms,
            },
            op,
            rhs,
        })
}

/// Any tree the parser can produce: n-ary `&&`/`||` with at least two children, `!`, predicates.
/// (The parser does not type-check, so any operator goes with any literal.)
fn expr() -> impl Strategy<Value = Expr> {
    predicate()
        .prop_map(Expr::Predicate)
        .prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 2..5).prop_map(Expr::And),
                prop::collection::vec(inner.clone(), 2..5).prop_map(Expr::Or),
                inner.prop_map(|e| Expr::Not(Box::new(e))),
            ]
        })
}

// ---------------------------------------------------------------------------------------------
// Another spelling of a tree: the same tokens with other whitespace, number bases, escapes,
// raw strings, IPv6 forms and redundant parentheses. Choices come from a byte tape.

struct Tape<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Tape<'_> {
    fn next(&mut self) -> u8 {
        let b = self.bytes[self.at % self.bytes.len()];
        self.at += 1;
        b
    }

    fn chance(&mut self, in_256: u8) -> bool {
        self.next() < in_256
    }

    /// Optional whitespace between two tokens.
    fn ws(&mut self) -> &'static str {
        ["", "", "", " ", " ", "\t", "\n", "\r\n", " \t ", "\r"][usize::from(self.next()) % 10]
    }

    /// Whitespace that must not be empty.
    fn ws1(&mut self) -> &'static str {
        [" ", " ", "\t", "\n", "\r\n", "  \n\t"][usize::from(self.next()) % 6]
    }
}

fn spell(e: &Expr, t: &mut Tape<'_>, out: &mut String) {
    let redundant = t.chance(40);
    if redundant {
        out.push('(');
        out.push_str(t.ws());
    }
    match e {
        Expr::And(children) | Expr::Or(children) => {
            let sep = if matches!(e, Expr::And(_)) {
                "&&"
            } else {
                "||"
            };
            for (i, child) in children.iter().enumerate() {
                if i > 0 {
                    out.push_str(t.ws());
                    out.push_str(sep);
                    out.push_str(t.ws());
                }
                if matches!(child, Expr::And(_) | Expr::Or(_)) {
                    out.push('(');
                    out.push_str(t.ws());
                    spell(child, t, out);
                    out.push_str(t.ws());
                    out.push(')');
                } else {
                    spell(child, t, out);
                }
            }
        }
        Expr::Not(inner) => {
            out.push('!');
            out.push_str(t.ws());
            out.push('(');
            out.push_str(t.ws());
            spell(inner, t, out);
            out.push_str(t.ws());
            out.push(')');
        }
        Expr::Predicate(p) => spell_predicate(p, t, out),
    }
    if redundant {
        out.push_str(t.ws());
        out.push(')');
    }
}

fn spell_predicate(p: &Predicate, t: &mut Tape<'_>, out: &mut String) {
    for tr in &p.lhs.transforms {
        out.push_str(tr.name());
        out.push_str(t.ws());
        out.push('(');
        out.push_str(t.ws());
    }
    out.push_str(&p.lhs.field);
    for _ in &p.lhs.transforms {
        out.push_str(t.ws());
        out.push(')');
    }
    let wordy = matches!(p.op, Op::In | Op::NotIn | Op::Contains);
    // A field name runs into a following word operator unless something separates them.
    out.push_str(if wordy && p.lhs.transforms.is_empty() {
        t.ws1()
    } else {
        t.ws()
    });
    match p.op {
        Op::NotIn => {
            out.push_str("not");
            out.push_str(t.ws1());
            out.push_str("in");
        }
        op => out.push_str(op.symbol()),
    }
    out.push_str(t.ws());
    spell_value(&p.rhs, t, out);
}

fn spell_value(v: &Value, t: &mut Tape<'_>, out: &mut String) {
    match v {
        Value::String(s) => {
            if !s.contains("\"#") && t.chance(80) {
                out.push_str("r#\"");
                out.push_str(s);
                out.push_str("\"#");
                return;
            }
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    // Line breaks and tabs may be written raw or escaped.
                    '\n' if t.chance(128) => out.push_str("\\n"),
                    '\r' if t.chance(128) => out.push_str("\\r"),
                    '\t' if t.chance(128) => out.push_str("\\t"),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        Value::Int(i) => {
            if *i < 0 {
                out.push('-');
            }
            let m = i.unsigned_abs();
            match t.next() % 4 {
                0 => out.push_str(&format!("0{m:o}")),
                1 => out.push_str(&format!("0x{m:x}")),
                2 => out.push_str(&format!("0x{m:X}")),
                _ => out.push_str(&m.to_string()),
            }
        }
        Value::IpAddr(a) => spell_ip(*a, t, out),
        Value::IpCidr(c) => {
            spell_ip(c.first_address(), t, out);
            out.push('/');
            out.push_str(&c.network_length().to_string());
        }
    }
}

fn spell_ip(a: IpAddr, t: &mut Tape<'_>, out: &mut String) {
    match a {
        IpAddr::V6(a6) if t.chance(128) => {
            // The full form: eight groups, with or without zero padding, in either case.
            let upper = t.chance(128);
            let groups: Vec<String> = a6
                .segments()
                .iter()
                .map(|g| {
                    let g = if t.chance(128) {
                        format!("{g:04x}")
                    } else {
                        format!("{g:x}")
                    };
                    if upper {
                        g.to_uppercase()
                    } else {
                        g
                    }
                })
                .collect();
            out.push_str(&groups.join(":"));
        }
        a => out.push_str(&Value::IpAddr(a).to_string()),
    }
}

// ---------------------------------------------------------------------------------------------
// Checks shared by the properties.

fn rule_names() -> &'static regex::Regex {
    static NAMES: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        regex::Regex::new(
        r"\b(EOI|SOI|WHITESPACE|ASCII_\w+|matcher|term|not_group|lparen|rparen|lhs|rhs|ident|op_\w+|str_\w+|raw_str_\w+|cidr_lit|ip_lit|ipv[46]_text|int_\w+|logic_op|and_op|or_op|Rule|positives)\b",
        )
        .unwrap()
    })
}

/// What every outcome of `parse` must satisfy: an error is well-formed, a tree round-trips.
fn check_outcome(src: &str, names: &regex::Regex) -> Result<(), TestCaseError> {
    match parse_with_limits(src, &Limits::default()) {
        Ok(parsed) => {
            prop_assert_eq!(parsed.spans.len(), parsed.expr.predicates().len());
            let printed = parsed.expr.to_string();
            let again = parse(&printed);
            prop_assert_eq!(again.as_ref(), Ok(&parsed.expr), "printed as {:?}", printed);
        }
        Err(e) => check_error(src, &e, names)?,
    }
    Ok(())
}

fn check_error(src: &str, e: &ExprError, names: &regex::Regex) -> Result<(), TestCaseError> {
    prop_assert!(e.span.start <= e.span.end && e.span.end <= src.len());
    prop_assert!(src.is_char_boundary(e.span.start) && src.is_char_boundary(e.span.end));
    let before = &src[..e.span.start];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap().chars().count() + 1;
    prop_assert_eq!((e.line, e.column), (line, column));
    prop_assert!(!names.is_match(&e.message), "rule name in {:?}", e.message);
    let shown = e.to_string();
    let head = format!("line {line}, column {column}: ");
    prop_assert!(shown.starts_with(&head), "{}", shown);
    prop_assert_eq!(shown.lines().count(), 4, "{}", shown);
    Ok(())
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Tokens of the language, good ones and near misses, for token soups.
const TOKENS: &[&str] = &[
    "a",
    "http.path",
    "lower",
    "any",
    "Lower",
    "in",
    "not",
    "contains",
    "r",
    "(",
    ")",
    "!",
    "!(",
    "&&",
    "||",
    "&",
    "|",
    "==",
    "!=",
    "~",
    "^=",
    "=^",
    ">",
    ">=",
    "<",
    "<=",
    "not in",
    "=",
    "\"x\"",
    "\"a\\\"b\"",
    "\"\\d\"",
    "\"",
    "\\",
    "r#\"q\"#",
    "r#\"",
    "\"#",
    "r##\"x\"##",
    "1",
    "-1",
    "010",
    "019",
    "0x1F",
    "0X1F",
    "-",
    "9223372036854775808",
    "1.5",
    "10.0.0.0/8",
    "10.0.0.1/8",
    "::1",
    "::/0",
    "::ffff:1.2.3.4",
    "fe80::1%eth0",
    "1.2.3.4",
    "256.0.0.1",
    "/33",
    ":",
    ".",
    " ",
    " ",
    "\t",
    "\n",
    "\r\n",
    "#",
    "é",
    "\u{0}",
];

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn printing_then_parsing_gives_the_same_tree(e in expr()) {
        let printed = e.to_string();
        let parsed = parse(&printed);
        prop_assert_eq!(parsed.as_ref(), Ok(&e), "printed as {:?}", printed);
        // And the print of the re-parsed tree is the same text.
        prop_assert_eq!(parsed.unwrap().to_string(), printed);
    }

    #[test]
    fn every_spelling_of_a_tree_parses_to_that_tree(
        e in expr(),
        tape in prop::collection::vec(any::<u8>(), 1..64),
    ) {
        let mut text = String::new();
        spell(&e, &mut Tape { bytes: &tape, at: 0 }, &mut text);
        let parsed = parse(&text);
        prop_assert_eq!(parsed.as_ref(), Ok(&e), "spelled as {:?}", text);
    }

}

// Cheap inputs: more cases.
proptest! {
    #![proptest_config(config(2048))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let src = String::from_utf8_lossy(&bytes);
        check_outcome(&src, rule_names())?;
    }

    #[test]
    fn random_text_never_panics(src in any::<String>()) {
        check_outcome(&src, rule_names())?;
    }

    #[test]
    fn token_soups_never_panic(tokens in prop::collection::vec(select(TOKENS), 0..40)) {
        check_outcome(&tokens.concat(), rule_names())?;
    }

    #[test]
    fn damaged_prints_never_panic(
        e in expr(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, select(TOKENS)), 1..4),
    ) {
        let mut text = e.to_string();
        for (at, kind, token) in edits {
            let cuts: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
            let i = cuts[at.index(cuts.len())];
            let next = text[i..].chars().next().map_or(0, char::len_utf8);
            match kind {
                0 => text.replace_range(i..i + next, ""),
                1 => text.insert_str(i, token),
                _ => text.replace_range(i..i + next, token),
            }
        }
        check_outcome(&text, rule_names())?;
    }
}
