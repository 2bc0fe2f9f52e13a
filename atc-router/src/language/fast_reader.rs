//! A hand-written reader for well-formed expressions, tried before pest.
//!
//! pest costs about 45k instructions per workload expression (rule bookkeeping, a token queue,
//! then a second walk over the pairs); reading the same text directly costs a few thousand,
//! which is most of a 10k-route build's parsing time.
//!
//! Invariants a change must keep:
//! - [`parse`] returns `Some` only for a text the grammar (`grammar.pest`) and the pest-driven
//!   `Builder` both accept, and then exactly the tree and spans they produce. It mirrors the
//!   grammar's ordered choices and greedy repetitions token for token; when in doubt it returns
//!   `None`.
//! - It never words an error: on `None` the caller runs pest, so every message still comes from
//!   one place. Returning `None` for a valid text is only slower, never wrong.
//! - It recurses once per `(`; the caller's nesting pre-scan has already bounded that.
//!
//! The tests at the bottom compare it with the pest path on generated token soups and on the
//! workload tables.

use std::ops::Range;

use super::lexis::{escape, int_value, ip_text, prefix_digits, set_kind};
use super::parsed::PredicateSpans;
use crate::language::{Expr, Lhs, Op, Predicate, Rhs, Transform};
use crate::value::{IpCidr, Value};

/// The tree and predicate spans of `source`, or `None` if pest should decide.
pub(super) fn parse(source: &str) -> Option<(Expr, Vec<PredicateSpans>)> {
    let mut r = Reader {
        s: source,
        b: source.as_bytes(),
        pos: 0,
        spans: Vec::new(),
    };
    r.ws();
    let expr = r.expression()?;
    r.ws();
    (r.pos == r.b.len()).then_some((expr, r.spans))
}

struct Reader<'s> {
    s: &'s str,
    b: &'s [u8],
    pos: usize,
    spans: Vec<PredicateSpans>,
}

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn rest(&self) -> &[u8] {
        &self.b[self.pos..]
    }

    /// The grammar's implicit `WHITESPACE*` between tokens.
    fn ws(&mut self) {
        while self.peek().is_some_and(is_ws) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek() == Some(c)).then(|| self.pos += 1)
    }

    fn run(&mut self, f: impl Fn(u8) -> bool) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(&f) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// `term {("&&" | "||") term}`, `||` binding tighter (as `Builder::expression`).
    fn expression(&mut self) -> Option<Expr> {
        let mut ands: Vec<Expr> = Vec::new();
        let mut ors: Vec<Expr> = vec![self.term()?];
        loop {
            let before = self.pos;
            self.ws();
            let and = match self.rest() {
                [b'&', b'&', ..] => true,
                [b'|', b'|', ..] => false,
                _ => {
                    self.pos = before;
                    break;
                }
            };
            self.pos += 2;
            self.ws();
            let term = self.term()?;
            if and {
                ands.push(join_or(std::mem::take(&mut ors)));
            }
            ors.push(term);
        }
        let last = join_or(ors);
        Some(if ands.is_empty() {
            last
        } else {
            ands.push(last);
            Expr::And(ands)
        })
    }

    fn term(&mut self) -> Option<Expr> {
        match self.peek()? {
            b'!' => {
                self.pos += 1;
                self.ws();
                self.eat(b'(')?;
                let inner = crate::stack::guarded(|| self.group_rest())?;
                Some(Expr::Not(Box::new(inner)))
            }
            b'(' => {
                self.pos += 1;
                crate::stack::guarded(|| self.group_rest())
            }
            _ => self.predicate(),
        }
    }

    /// After a `(`: `expression ")"`.
    fn group_rest(&mut self) -> Option<Expr> {
        self.ws();
        let e = self.expression()?;
        self.ws();
        self.eat(b')')?;
        Some(e)
    }

    fn predicate(&mut self) -> Option<Expr> {
        let start = self.pos;
        let mut transforms = Vec::new();
        let field = self.lhs(&mut transforms)?;
        let lhs_end = self.pos;
        self.ws();
        let op_start = self.pos;
        let op = self.operator()?;
        let op_end = self.pos;
        self.ws();
        let rhs_start = self.pos;
        let mut elements = Vec::new();
        let rhs = if self.peek() == Some(b'[') {
            if !matches!(op, Op::In | Op::NotIn) {
                return None;
            }
            Rhs::Set(self.set(&mut elements)?)
        } else {
            Rhs::Value(self.value()?)
        };
        let rhs_end = self.pos;
        self.spans.push(PredicateSpans {
            predicate: start..rhs_end,
            lhs: start..lhs_end,
            field: field.clone(),
            op: op_start..op_end,
            rhs: rhs_start..rhs_end,
            elements,
        });
        Some(Expr::Predicate(Predicate {
            lhs: Lhs {
                field: self.s[field].to_owned(),
                transforms,
            },
            op,
            rhs,
        }))
    }

    /// `ident ["(" lhs ")"]`; returns the field's span and leaves `pos` after the last token.
    fn lhs(&mut self, transforms: &mut Vec<Transform>) -> Option<Range<usize>> {
        let name = self.ident()?;
        let after_name = self.pos;
        self.ws();
        if self.peek() != Some(b'(') {
            self.pos = after_name;
            return Some(name);
        }
        transforms.push(match &self.s[name] {
            "lower" => Transform::Lower,
            "any" => Transform::Any,
            _ => return None,
        });
        self.pos += 1;
        self.ws();
        let field = self.lhs(transforms)?;
        self.ws();
        self.eat(b')')?;
        Some(field)
    }

    fn ident(&mut self) -> Option<Range<usize>> {
        let start = self.pos;
        if !self.peek()?.is_ascii_alphabetic() {
            return None;
        }
        self.pos += 1;
        self.run(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.');
        Some(start..self.pos)
    }

    /// The grammar's `operator` choice, in its order.
    fn operator(&mut self) -> Option<Op> {
        let (op, len) = match self.rest() {
            [b'=', b'=', ..] => (Op::Equals, 2),
            [b'!', b'=', ..] => (Op::NotEquals, 2),
            [b'~', ..] => (Op::Regex, 1),
            [b'^', b'=', ..] => (Op::Prefix, 2),
            [b'=', b'^', ..] => (Op::Postfix, 2),
            [b'>', b'=', ..] => (Op::GreaterOrEqual, 2),
            [b'>', ..] => (Op::Greater, 1),
            [b'<', b'=', ..] => (Op::LessOrEqual, 2),
            [b'<', ..] => (Op::Less, 1),
            [b'n', b'o', b't', rest @ ..] => {
                let gap = rest.iter().take_while(|c| is_ws(**c)).count();
                if gap == 0 || !rest[gap..].starts_with(b"in") {
                    return None;
                }
                (Op::NotIn, 3 + gap + 2)
            }
            [b'i', b'n', ..] => (Op::In, 2),
            [b'c', b'o', b'n', b't', b'a', b'i', b'n', b's', ..] => (Op::Contains, 8),
            _ => return None,
        };
        self.pos += len;
        Some(op)
    }

    /// `"[" [value {"," value} [","]] "]"`, at `[`: the elements, their spans in `spans`.
    /// Declines an empty or mixed set, which `Builder::set` refuses.
    fn set(&mut self, spans: &mut Vec<Range<usize>>) -> Option<Vec<Value>> {
        self.pos += 1;
        let mut elements: Vec<Value> = Vec::new();
        loop {
            self.ws();
            if self.eat(b']').is_some() {
                break;
            }
            let start = self.pos;
            let v = self.value()?;
            if elements
                .first()
                .is_some_and(|first| set_kind(first) != set_kind(&v))
            {
                return None;
            }
            elements.push(v);
            spans.push(start..self.pos);
            self.ws();
            if self.eat(b',').is_none() {
                self.eat(b']')?;
                break;
            }
        }
        (!elements.is_empty()).then_some(elements)
    }

    /// `str_lit | raw_str_lit | addr_lit | int_lit`.
    fn value(&mut self) -> Option<Value> {
        match self.peek()? {
            b'"' => self.string().map(Value::String),
            b'r' => self.raw_string().map(Value::String),
            _ => match self.addr() {
                Some(v) => v,
                None => self.int().map(Value::Int),
            },
        }
    }

    fn string(&mut self) -> Option<String> {
        let mut out = String::new();
        let mut i = self.pos + 1;
        let mut piece = i;
        loop {
            match *self.b.get(i)? {
                b'"' => break,
                b'\\' => {
                    out.push_str(&self.s[piece..i]);
                    out.push(escape(*self.b.get(i + 1)?)?);
                    i += 2;
                    piece = i;
                }
                _ => i += 1,
            }
        }
        out.push_str(&self.s[piece..i]);
        self.pos = i + 1;
        Some(out)
    }

    /// `r#"…"#`, ending at the first `"#`.
    fn raw_string(&mut self) -> Option<String> {
        let body = self.rest().strip_prefix(b"r#\"")?;
        let len = body.windows(2).position(|w| w == b"\"#")?;
        let start = self.pos + 3;
        self.pos = start + len + 2;
        Some(self.s[start..start + len].to_owned())
    }

    /// `(ipv6_text | ipv4_text) ["/" digits]`, then the checks of `Builder::ip` and
    /// `Builder::cidr`. The outer `None` (no address shape) leaves `pos` alone, as the grammar
    /// then falls through to `int_lit`; the inner one is an address the builder rejects.
    fn addr(&mut self) -> Option<Option<Value>> {
        let start = self.pos;
        let end = self.ipv6_text().or_else(|| self.ipv4_text())?;
        self.pos = end;
        if self.peek() == Some(b'/') {
            let slash = self.pos;
            self.pos += 1;
            if self.run(|c| c.is_ascii_digit()) == 0 {
                self.pos = slash;
            }
        }
        let text = &self.s[start..self.pos];
        Some(match text.split_once('/') {
            None => ip_text(text).map(Value::IpAddr),
            Some((addr, len)) => cidr_text(addr, len).map(Value::IpCidr),
        })
    }

    /// `HEX* (":" HEX*){2,}`: where it would end, without moving.
    fn ipv6_text(&self) -> Option<usize> {
        let b = self.b;
        let hex = |mut i: usize| {
            while b.get(i).is_some_and(u8::is_ascii_hexdigit) {
                i += 1;
            }
            i
        };
        let mut i = hex(self.pos);
        let mut colons = 0;
        while b.get(i) == Some(&b':') {
            i = hex(i + 1);
            colons += 1;
        }
        (colons >= 2).then_some(i)
    }

    /// `DIGIT+ ("." DIGIT+){3}`: where it would end, without moving.
    fn ipv4_text(&self) -> Option<usize> {
        let b = self.b;
        let digits = |i: usize| {
            let n = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            (n > 0).then_some(i + n)
        };
        let mut i = digits(self.pos)?;
        for _ in 0..3 {
            if b.get(i) != Some(&b'.') {
                return None;
            }
            i = digits(i + 1)?;
        }
        Some(i)
    }

    /// `["-"] (octal | hex | decimal)`, tried in the grammar's order.
    fn int(&mut self) -> Option<i64> {
        let negative = self.eat(b'-').is_some();
        let (skip, radix) = match self.rest() {
            [b'0', d, ..] if (b'0'..=b'7').contains(d) => (1, 8),
            [b'0', b'x', d, ..] if d.is_ascii_hexdigit() => (2, 16),
            _ => (0, 10),
        };
        self.pos += skip;
        let start = self.pos;
        let n = match radix {
            8 => self.run(|c| (b'0'..=b'7').contains(&c)),
            16 => self.run(|c| c.is_ascii_hexdigit()),
            _ => self.run(|c| c.is_ascii_digit()),
        };
        if n == 0 {
            return None;
        }
        int_value(negative, &self.s[start..self.pos], radix)
    }
}

fn cidr_text(addr: &str, len: &str) -> Option<IpCidr> {
    let addr = ip_text(addr)?;
    if len.len() > prefix_digits(&addr) {
        return None;
    }
    let len = len.parse::<u8>().ok()?;
    if len > if addr.is_ipv4() { 32 } else { 128 } {
        return None;
    }
    IpCidr::new(addr, len).ok()
}

/// One `||` group: a single term stands alone.
fn join_or(mut terms: Vec<Expr>) -> Expr {
    if terms.len() == 1 {
        terms.pop().expect("one element")
    } else {
        Expr::Or(terms)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;

    use super::*;
    use crate::language::pest_reader::parse_with_pest;

    /// Whenever the fast reader accepts, pest accepts with the same tree and spans. The
    /// converse is not needed for correctness, but it holds too (the reader covers the whole
    /// language), and checking it makes a drift between the two show up here.
    #[track_caller]
    fn agrees(src: &str) -> bool {
        match (parse(src), parse_with_pest(src)) {
            (Some(fast), Ok(slow)) => {
                assert_eq!(fast.0, slow.0, "tree of {src:?}");
                assert_eq!(fast.1, slow.1, "spans of {src:?}");
                true
            }
            (Some(_), Err(e)) => panic!("fast accepted {src:?}, pest rejected it:\n{e}"),
            (None, Ok(_)) => panic!("fast declined {src:?}, which pest accepts"),
            (None, Err(_)) => false,
        }
    }

    #[test]
    fn reads_every_operator() {
        for op in Op::ALL {
            let src = format!("a {op} 1");
            assert!(agrees(&src), "{src}");
            assert_eq!(parse(&src).unwrap().0.to_string(), src);
        }
    }

    #[test]
    fn accepts_what_pest_accepts_with_the_same_result() {
        for src in [
            r#"http.host == "a.com" && http.path ^= "/v1" || http.path ^= "/v2""#,
            r##"  a=="x"&&(b~r#"^/\d+$"#||!( c != 1 ))  "##,
            "lower( any ( f ) ) contains \"x\"",
            "a not \t\n in 10.0.0.0/8 && b in fe80::/10 && c == ::1 && d == 1.2.3.4",
            "a == 010 && b == 08 && c == 0x1F && d == -12 && e >= -0 && f < 0",
            "a == 9223372036854775807 && b == -9223372036854775807",
            r##"a == "\"\\\n\r\t é" && b == r#"x\"# && c == """##,
            "a in10.0.0.0/8 && b contains\"x\" && c~\"y\" && d.e_f.1 <= 3",
            "((a == 1) || (b == 2 && c == 3)) && !(d == 4 || e == 5)",
            r##"a in ["x", r#"y"#] && b not in[1,-2,010,] && c in [ 10.0.0.0/8 , ::1 ]"##,
            "a in[1]&&b not\tin\n[\"\\n\"]",
        ] {
            assert!(agrees(src), "fast reader declined {src:?}");
        }
    }

    #[test]
    fn declines_every_error() {
        for src in [
            "",
            "a == 019",
            "a == 0X1F",
            "a == 1.5",
            "a == 9223372036854775808",
            "a == -9223372036854775808",
            "a == 10.0.0.1/8",
            "a in 10.0.0.0/33",
            "a == ::ffff:1.2.3.4",
            "a == 1:2",
            r#"a == "\d""#,
            r#"a == "x"#,
            r##"a == r#"x"##,
            "a == r\"x\"",
            "foo(a) == 1",
            "!a == 1",
            "!!(a == 1)",
            "a == 1 &&",
            "a == 1 & b == 2",
            "(a == 1",
            "a == 1)",
            "a = 1",
            "a > = 1",
            "a notin 10.0.0.0/8",
            "a inside 10.0.0.0/8",
            "a == - 1",
            "a == 1 b",
            "1a == 1",
            "a\u{a0}== 1",
            "a in []",
            "a in [ ]",
            "a in [,]",
            "a in [1,,2]",
            "a in [1 2]",
            "a in [1, \"x\"]",
            "a in [10.0.0.0/8, 1]",
            "a in [1",
            "a in [1,",
            "a in [[1]]",
            "a == [1]",
            "a contains [\"x\"]",
            "a in [019]",
            "a in [1.5]",
        ] {
            assert!(parse(src).is_none(), "fast reader accepted {src:?}");
            assert!(parse_with_pest(src).is_err(), "pest accepted {src:?}");
        }
    }

    #[test]
    fn reads_every_workload_expression() {
        for family in atc_workload::Family::all() {
            let table = atc_workload::Table::family(family, 1_000, 7).with_catch_all();
            for r in &table.routes {
                assert!(agrees(&r.expression), "declined {:?}", r.expression);
            }
        }
    }

    /// Pieces that, glued in any order with or without white space, reach every branch of the
    /// grammar and many near misses of it.
    const TOKENS: &[&str] = &[
        "a",
        "http.path",
        "x_1",
        "lower",
        "any",
        "foo",
        "not",
        "in",
        "contains",
        "(",
        ")",
        "!",
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
        "=",
        "not in",
        "\"s\"",
        "\"\\\"\"",
        "\"\\d\"",
        "\"é\"",
        "\"",
        "r#\"x\"#",
        "r#\"",
        "r\"x\"",
        "\"#",
        "0",
        "010",
        "08",
        "019",
        "0x1F",
        "0X1F",
        "0x",
        "-",
        "-1",
        "12",
        "1.5",
        "9223372036854775808",
        "1.2.3.4",
        "1.2.3",
        "10.0.0.0/8",
        "10.0.0.1/8",
        "/8",
        "/",
        "::1",
        "fe80::",
        "[",
        "]",
        ",",
        "[1, 2]",
        "[\"a\",]",
        "::ffff:1.2.3.4",
        ":",
        "1:2",
        "ff",
        ".",
    ];

    fn soup() -> impl Strategy<Value = String> {
        let piece = (
            prop::sample::select(TOKENS),
            prop::sample::select(&["", " ", "  ", "\t", "\n", "\r\n"][..]),
        );
        prop::collection::vec(piece, 1..12)
            .prop_map(|ps| ps.into_iter().flat_map(|(t, w)| [t, w]).collect::<String>())
    }

    /// `lhs op value` joined by logic operators, with groups: valid far more often than a soup.
    fn shaped() -> impl Strategy<Value = String> {
        let lhs = prop_oneof![
            9 => prop::sample::select(&["a", "lower(a)", "any( lower (b.c) )", "x.y_1"][..]),
            1 => prop::sample::select(&["lower(x", "foo(a)", "lower ()", "1a"][..]),
        ];
        // Every operator (`not in` with a wider gap), so that one the fast reader misses fails
        // `agrees`.
        let op = prop::sample::select(
            Op::ALL
                .iter()
                .map(|op| match op {
                    Op::NotIn => "not  in",
                    op => op.symbol(),
                })
                .collect::<Vec<_>>(),
        );
        let val = prop_oneof![
            4 => prop::sample::select(
                &[
                    "\"s\"", "\"a\\\"b\\\\c\\n\"", "\"é\"", "\"\"", "r#\"x\"#", "r#\"\"#", "0",
                    "010", "08", "0x1F", "-1", "12", "9223372036854775807",
                    "-9223372036854775807", "1.2.3.4", "10.0.0.0/8", "::1", "fe80::/10", "::",
                    "0.0.0.0/0",
                ][..],
            ),
            1 => prop::sample::select(
                &[
                    "019", "0X1F", "1.5", "10.0.0.1/8", "::ffff:1.2.3.4", "\"\\d\"",
                    "9223372036854775808", "1:2", "-", "r\"x\"", "256.1.1.1", "01.2.3.4",
                    "10.0.0.0/33", "0x", "1.2.3.4/",
                ][..],
            ),
            2 => prop::sample::select(
                &[
                    "[1]", "[1, -2,]", "[\"a\", r#\"b\"#]", "[ \"a\" ,\"b\" , ]",
                    "[10.0.0.0/8, ::1, 1.2.3.4]", "[0x1F,010]",
                ][..],
            ),
            1 => prop::sample::select(
                &[
                    "[]", "[,]", "[1,,2]", "[1 2]", "[1, \"a\"]", "[::1, 2]", "[1", "[019]",
                    "[[1]]", "[\"\\d\"]",
                ][..],
            ),
        ];
        let pred = (lhs, op, val).prop_map(|(l, o, v)| format!("{l} {o} {v}"));
        let join = prop::sample::select(&[" && ", "||", " || ", "&&"][..]);
        let wrap = prop::sample::select(&["", "(", "!(", " ( "][..]);
        prop::collection::vec((pred, join, wrap), 1..5).prop_map(|parts| {
            let mut out = String::new();
            let mut open = 0;
            for (i, (p, j, w)) in parts.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(j);
                }
                out.push_str(w);
                open += usize::from(!w.trim().is_empty());
                out.push_str(&p);
            }
            out.push_str(&")".repeat(open));
            out
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn soups_agree(src in soup()) {
            agrees(&src);
        }

        #[test]
        fn shaped_expressions_agree(src in shaped()) {
            agrees(&src);
        }
    }

    /// The shaped generator is only useful if it reaches both outcomes often (soups are
    /// nearly all invalid, which is their point).
    #[test]
    fn shaped_generator_reaches_valid_and_invalid_texts() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut valid, mut invalid) = (0, 0);
        for _ in 0..2000 {
            let src = shaped().new_tree(&mut runner).unwrap().current();
            if agrees(&src) {
                valid += 1;
            } else {
                invalid += 1;
            }
        }
        assert!(
            valid > 200 && invalid > 200,
            "valid {valid}, invalid {invalid}"
        );
    }
}
