//! Property tests of the syntax layer on the routes of the one generator (`atc_testkit::gen`):
//! docs/language.md "printing an expression and parsing the print gives the same tree", SECURITY.md
//! "nothing a caller passes may crash", and limits only ever refuse:
//! - every generated route that parses prints to text that parses to the same tree, and
//!   printing that tree again gives the same text;
//! - every other spelling of a route (whitespace, number bases, escapes, raw strings, IPv6
//!   forms, redundant parentheses: `RouteDesc::respelled`) parses to the same tree;
//! - under tighter limits a route parses to the same tree, or is refused for a limit, or gets
//!   exactly the error the default limits give; validation likewise;
//! - random bytes, random text, token soups and damaged routes never make the parser panic,
//!   every error they get is well-formed, and whatever parses round-trips.
//!
//! What the trees hold comes from the generator: every operator with literals of every type
//! (the parser does not check types, so mismatches are generated on purpose too), strings of
//! the characters printers trip on, integers of every magnitude, IPv6 addresses with zero runs
//! anywhere, networks of every length, the language's words as field names, transformations
//! nested and repeated. `generated_routes_reach_the_whole_syntax` guards that.
//!
//! `PROPTEST_CASES=N` raises the number of cases for a longer run.

use std::collections::BTreeSet;
use std::net::IpAddr;

use atc_router::{
    parse, parse_with_limits, Error, Expr, ExprError, ExprErrorKind, Limits, Op, Rhs, Router, Value,
};
use atc_testkit::check;
use atc_testkit::gen::{self, Case};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;

fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Routes only: no request is rendered.
fn routes() -> impl Strategy<Value = Case> {
    gen::case_strategy(8..16, 0..1)
}

// ---------------------------------------------------------------------------------------------
// Checks shared by the properties.

fn rule_names() -> &'static regex::Regex {
    static NAMES: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        regex::Regex::new(
        r"\b(EOI|SOI|WHITESPACE|ASCII_\w+|matcher|term|not_group|lparen|rparen|lhs|rhs|ident|op_\w+|str_\w+|raw_str_\w+|cidr_lit|ip_lit|ipv[46]_text|int_\w+|set_lit|set_elem|lbracket|rbracket|comma|logic_op|and_op|or_op|Rule|positives)\b",
        )
        .unwrap()
    })
}

/// What every outcome of `parse` must satisfy: an error is well-formed, a tree round-trips.
fn check_outcome(src: &str) -> Result<(), TestCaseError> {
    match parse_with_limits(src, &Limits::default()) {
        Ok(parsed) => {
            prop_assert_eq!(parsed.spans.len(), parsed.expr.predicates().len());
            check_print(&parsed.expr)?;
        }
        Err(e) => check_error(src, &e)?,
    }
    Ok(())
}

/// The print of `tree` parses to `tree`, and printing that gives the same text.
fn check_print(tree: &Expr) -> Result<(), TestCaseError> {
    let printed = tree.to_string();
    let again = parse_with_limits(&printed, &check::reparse_limits()).map(|p| p.expr);
    prop_assert_eq!(again.as_ref(), Ok(tree), "printed as {:?}", printed);
    prop_assert_eq!(again.unwrap().to_string(), printed);
    Ok(())
}

/// docs/language.md "Errors": a position on character boundaries, the line and column it names,
/// plain words (never a grammar rule's name), and a four-line rendering with the source line and a
/// caret.
fn check_error(src: &str, e: &ExprError) -> Result<(), TestCaseError> {
    check::check_expr_error(src, e);
    let before = &src[..e.span.start];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap().chars().count() + 1;
    prop_assert_eq!((e.line, e.column), (line, column));
    prop_assert!(
        !rule_names().is_match(&e.message),
        "rule name in {:?}",
        e.message
    );
    let shown = e.to_string();
    let head = format!("line {line}, column {column}: ");
    prop_assert!(shown.starts_with(&head), "{}", shown);
    prop_assert_eq!(shown.lines().count(), 4, "{}", shown);
    Ok(())
}

fn tight() -> Limits {
    Limits {
        max_expression_len: 256,
        max_depth: 4,
        max_predicates: 8,
        max_regexes: 2,
        ..Limits::default()
    }
}

fn is_limit(e: &Error) -> bool {
    matches!(e, Error::Limit(_)) || matches!(e, Error::Expr(ee) if ee.kind == ExprErrorKind::Limit)
}

// ---------------------------------------------------------------------------------------------
// Properties.

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn printing_then_parsing_gives_the_same_tree(case in routes()) {
        for r in case.render().routes {
            match parse(&r.text) {
                Ok(tree) => check_print(&tree)?,
                Err(e) => check_error(&r.text, &e)?,
            }
        }
    }

    #[test]
    fn every_spelling_of_a_route_parses_to_the_same_tree(
        case in routes(),
        tape in prop::collection::vec(any::<u8>(), 1..64),
    ) {
        let respelled = Case {
            routes: case
                .routes
                .iter()
                .enumerate()
                .map(|(i, r)| r.respelled(&tape[i % tape.len()..]))
                .collect(),
            ..case.clone()
        };
        for (a, b) in case.render().routes.iter().zip(respelled.render().routes) {
            match (parse(&a.text), parse(&b.text)) {
                (Ok(x), Ok(y)) => prop_assert_eq!(x, y, "{:?} spelled as {:?}", a.text, b.text),
                (Err(_), Err(_)) => {}
                (x, y) => prop_assert!(false, "{:?}: {:?}\nspelled as {:?}: {:?}", a.text, x, b.text, y),
            }
        }
    }

    #[test]
    fn tighter_limits_only_refuse(case in routes()) {
        let rendered = case.render();
        let schema = check::schema(&rendered);
        for r in &rendered.routes {
            let full = parse(&r.text);
            match (parse_with_limits(&r.text, &tight()).map(|p| p.expr), &full) {
                (Ok(t), Ok(f)) => prop_assert_eq!(&t, f, "limits changed the tree of {:?}", r.text),
                (Ok(_), Err(e)) => prop_assert!(false, "tighter limits accepted {:?}: {}", r.text, e),
                (Err(e), _) if e.kind == ExprErrorKind::Limit => check_error(&r.text, &e)?,
                (Err(e), Err(f)) => prop_assert_eq!(&e, f, "another error under tighter limits"),
                (Err(e), Ok(_)) => prop_assert!(false, "{:?} refused for no limit: {}", r.text, e),
            }
            let full = Router::validate(&schema, &r.text);
            match (Router::validate_with_limits(&schema, &r.text, &tight()), &full) {
                (Ok(t), Ok(f)) => prop_assert_eq!(&t, f, "limits changed the fields of {:?}", r.text),
                (Ok(_), Err(e)) => prop_assert!(false, "tighter limits validated {:?}: {}", r.text, e),
                (Err(e), _) if is_limit(&e) => {}
                (Err(e), Err(f)) => prop_assert_eq!(&e, f, "another error under tighter limits"),
                (Err(e), Ok(_)) => prop_assert!(false, "{:?} refused for no limit: {}", r.text, e),
            }
        }
    }

    #[test]
    fn damaged_routes_never_panic(
        case in gen::case_strategy(1..2, 0..1),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, select(gen::TOKENS)), 1..4),
    ) {
        let mut text = case.render().routes[0].text.clone();
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
        check_outcome(&text)?;
    }
}

// Cheap inputs: more cases.
proptest! {
    #![proptest_config(config(2048))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        check_outcome(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn random_text_never_panics(src in any::<String>()) {
        check_outcome(&src)?;
    }

    #[test]
    fn token_soups_never_panic(tokens in prop::collection::vec(select(gen::TOKENS), 0..40)) {
        check_outcome(&tokens.concat())?;
    }
}

/// Guards the power of the properties above: generated routes mostly parse, and their trees
/// hold every operator, every literal type, the literals printers trip on, and the odd names
/// and nestings the grammar allows. If the generator lost any, round trips would pass without
/// testing it.
#[test]
fn generated_routes_reach_the_whole_syntax() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut total, mut parsed) = (0, 0);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for _ in 0..200 {
        let case = routes().new_tree(&mut runner).unwrap().current();
        for r in case.render().routes {
            total += 1;
            let Ok(tree) = parse(&r.text) else { continue };
            parsed += 1;
            for p in tree.predicates() {
                seen.insert(format!("op {:?}", p.op));
                if p.lhs.transforms.len() >= 3 {
                    seen.insert("three transformations".into());
                }
                if ["in", "not", "contains", "lower", "any", "r"].contains(&p.lhs.field.as_str()) {
                    seen.insert("a word of the language as a field".into());
                }
                if let Rhs::Set(elements) = &p.rhs {
                    seen.insert(format!("set: {:?} of {}", p.op, elements.len().min(3)));
                    let mut kinds: Vec<_> = elements.iter().map(Value::ty).collect();
                    kinds.dedup();
                    if kinds.len() > 1 {
                        seen.insert("set: addresses and networks".into());
                    }
                    if elements
                        .iter()
                        .enumerate()
                        .any(|(i, e)| elements[..i].contains(e))
                    {
                        seen.insert("set: a duplicate".into());
                    }
                }
                for v in p.rhs.values() {
                    seen.insert(match v {
                        Value::String(s) if s.contains(['"', '\\']) => {
                            "string: quote or backslash".into()
                        }
                        Value::String(s) if s.contains(['\u{feff}', '\u{2028}', '\0']) => {
                            "string: invisible characters".into()
                        }
                        Value::String(s) if s.contains(['\n', '\r', '\t']) => {
                            "string: line breaks".into()
                        }
                        Value::String(_) => "string".into(),
                        Value::Int(i) if i.unsigned_abs() > 1 << 40 => "integer: large".into(),
                        Value::Int(_) => "integer".into(),
                        Value::IpAddr(IpAddr::V6(a)) if a.to_string().contains("::") => {
                            "address: IPv6 with a zero run".into()
                        }
                        Value::IpAddr(_) => "address".into(),
                        Value::IpCidr(c) if c.network_length() % 8 != 0 => {
                            "network: odd length".into()
                        }
                        Value::IpCidr(_) => "network".into(),
                    });
                }
            }
        }
    }
    assert!(parsed * 10 >= total * 8, "{parsed} of {total} routes parse");
    let mut want: Vec<String> = Op::ALL.iter().map(|op| format!("op {op:?}")).collect();
    want.extend(
        [
            "three transformations",
            "a word of the language as a field",
            "string: quote or backslash",
            "string: invisible characters",
            "string: line breaks",
            "string",
            "integer: large",
            "integer",
            "address: IPv6 with a zero run",
            "address",
            "network: odd length",
            "network",
            "set: In of 1",
            "set: In of 3",
            "set: NotIn of 1",
            "set: NotIn of 3",
            "set: addresses and networks",
            "set: a duplicate",
        ]
        .map(String::from),
    );
    for w in want {
        assert!(seen.contains(&w), "no {w} in generated routes: {seen:?}");
    }
}
