//! The span of each predicate of an accepted expression, found by a scan of its tokens.
//!
//! Invariant: for every text the parser accepts, [`predicate_spans`] gives exactly the spans of
//! `parse_with_limits(text, …).spans[i].predicate` (a property test below checks it), or
//! `None`, in which case the caller asks the parser. It never builds a tree.

use std::ops::Range;

/// The span of each predicate of `text`, an expression the parser accepted, in order (what
/// `parse_with_limits(text, …).spans[i].predicate` gives): one pass over its tokens, without
/// building a tree. `None` where the text is not what the grammar (`language/grammar.pest`)
/// allows.
pub(super) fn predicate_spans(text: &str) -> Option<Vec<Range<usize>>> {
    let b = text.as_bytes();
    let mut pos = 0;
    let ws = |pos: &mut usize| {
        while b
            .get(*pos)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
        {
            *pos += 1;
        }
    };
    let ident = |pos: &mut usize| {
        let start = *pos;
        while b
            .get(*pos)
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.'))
        {
            *pos += 1;
        }
        (*pos > start).then_some(())
    };
    let eat = |pos: &mut usize, c: u8| (b.get(*pos) == Some(&c)).then(|| *pos += 1);
    let mut spans = Vec::new();
    ws(&mut pos);
    loop {
        // A term: `!(`, `(`, or a predicate.
        match b.get(pos)? {
            b'!' => {
                pos += 1;
                ws(&mut pos);
                eat(&mut pos, b'(')?;
                ws(&mut pos);
                continue;
            }
            b'(' => {
                pos += 1;
                ws(&mut pos);
                continue;
            }
            _ => {}
        }
        let start = pos;
        // `ident ["(" lhs ")"]`: a name followed by `(` is a transformation.
        ident(&mut pos)?;
        let mut depth = 0;
        loop {
            let mut at = pos;
            ws(&mut at);
            if eat(&mut at, b'(').is_none() {
                break;
            }
            ws(&mut at);
            pos = at;
            ident(&mut pos)?;
            depth += 1;
        }
        for _ in 0..depth {
            ws(&mut pos);
            eat(&mut pos, b')')?;
        }
        ws(&mut pos);
        pos += match &b[pos..] {
            [b'=' | b'!' | b'^' | b'>' | b'<', b'=', ..] | [b'=', b'^', ..] => 2,
            [b'~' | b'>' | b'<', ..] => 1,
            [b'n', b'o', b't', rest @ ..] => {
                let gap = rest
                    .iter()
                    .take_while(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
                    .count();
                rest[gap..].starts_with(b"in").then_some(3 + gap + 2)?
            }
            [b'i', b'n', ..] => 2,
            [b'c', b'o', b'n', b't', b'a', b'i', b'n', b's', ..] => 8,
            _ => return None,
        };
        ws(&mut pos);
        // The right side: a set, a string, a raw string, or an address or integer (which, in
        // accepted text, runs up to a space, a `)` or the next `&&` / `||`).
        match &b[pos..] {
            [b'[', ..] => {
                pos += 1;
                while *b.get(pos)? != b']' {
                    pos = skip_string(b, pos)?.unwrap_or(pos + 1);
                }
                pos += 1;
            }
            [b'"', ..] | [b'r', b'#', b'"', ..] => pos = skip_string(b, pos)??,
            _ => {
                let run = b[pos..]
                    .iter()
                    .take_while(|c| !matches!(c, b' ' | b'\t' | b'\r' | b'\n' | b')' | b'&' | b'|'))
                    .count();
                if run == 0 {
                    return None;
                }
                pos += run;
            }
        }
        spans.push(start..pos);
        // Closing groups, then the end or `&&` / `||` and the next term.
        ws(&mut pos);
        while eat(&mut pos, b')').is_some() {
            ws(&mut pos);
        }
        if pos == b.len() {
            return Some(spans);
        }
        match &b[pos..] {
            [b'&', b'&', ..] | [b'|', b'|', ..] => pos += 2,
            _ => return None,
        }
        ws(&mut pos);
    }
}

/// At a string literal (`"…"` with `\` escapes, or `r#"…"#`) at `pos` of `b`: where it ends
/// (`None` if it never does). Not at one: `Some(None)`.
fn skip_string(b: &[u8], pos: usize) -> Option<Option<usize>> {
    if b[pos] == b'"' {
        let mut i = pos + 1;
        loop {
            match *b.get(i)? {
                b'"' => return Some(Some(i + 1)),
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
    }
    if b[pos..].starts_with(b"r#\"") {
        let body = pos + 3;
        let end = memchr::memmem::find(&b[body..], b"\"#")?;
        return Some(Some(body + end + 2));
    }
    Some(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::parse_with_limits;
    use crate::limits::Limits;
    use proptest::prelude::*;

    fn spans_by_parser(text: &str) -> Option<Vec<Range<usize>>> {
        let parsed = parse_with_limits(text, &Limits::default()).ok()?;
        Some(parsed.spans.into_iter().map(|s| s.predicate).collect())
    }

    fn gap() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec!["", " ", " ", "  ", "\t", "\n", "\r\n "])
    }

    fn predicate() -> impl Strategy<Value = String> {
        let lhs = prop::sample::select(vec![
            "http.path",
            "a_b.c2",
            "lower(http.host)",
            "lower( any (x) )",
            "any(http.headers.x_y)",
        ]);
        let op = prop::sample::select(vec![
            "==", "!=", "~", "^=", "=^", ">=", ">", "<=", "<", "in", "not in", "not\t in",
            "not\nin", "contains",
        ]);
        let rhs = prop::sample::select(vec![
            r#""/a""#,
            r#""""#,
            r#""q\"(&&) \\""#,
            r#""é||)""#,
            r##"r#"a"b)&&|| "#"##,
            "-12",
            "0x1F",
            "017",
            "10.0.0.1",
            "10.0.0.0/8",
            "::1",
            "fe80::1/64",
            r#"["a", "]", ]"#,
            "[1,2]",
            r##"[ r#"x]"# ,10.0.0.1]"##,
        ]);
        (lhs, gap(), op, gap(), rhs).prop_map(|(l, g1, o, g2, r)| {
            // An operator made of letters needs a space before it.
            let g1 = if o.starts_with(['i', 'n', 'c']) && g1.is_empty() {
                " "
            } else {
                g1
            };
            format!("{l}{g1}{o}{g2}{r}")
        })
    }

    fn expression() -> impl Strategy<Value = String> {
        predicate().prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                (prop::collection::vec((inner.clone(), gap(), any::<bool>(), gap()), 1..4))
                    .prop_map(|terms| {
                        let mut out = String::new();
                        for (i, (t, g1, and, g2)) in terms.iter().enumerate() {
                            if i > 0 {
                                out.push_str(g1);
                                out.push_str(if *and { "&&" } else { "||" });
                                out.push_str(g2);
                            }
                            out.push_str(t);
                        }
                        out
                    }),
                (inner.clone(), gap(), gap()).prop_map(|(e, g1, g2)| format!("({g1}{e}{g2})")),
                (inner, gap(), gap()).prop_map(|(e, g1, g2)| format!("!{g1}({e}{g2})")),
            ]
        })
    }

    proptest! {
        #[test]
        fn the_token_scan_finds_the_predicates_the_parser_finds(
            e in expression(), lead in gap(), trail in gap()
        ) {
            let text = format!("{lead}{e}{trail}");
            let want = spans_by_parser(&text);
            prop_assume!(want.is_some());
            prop_assert_eq!(predicate_spans(&text), want, "{:?}", text);
        }
    }

    #[test]
    fn the_token_scan_reads_long_chains_and_refuses_what_is_not_an_expression() {
        let long = vec![r#"http.path ^= "/""#; 16_383].join(" && ");
        assert_eq!(predicate_spans(&long), spans_by_parser(&long));
        for bad in ["", "a", "a ==", "a == \"x", "(a == 1", "a == 1 &", "a ?? 1"] {
            let scanned = predicate_spans(bad);
            assert!(
                scanned.is_none() || spans_by_parser(bad).is_none(),
                "{bad:?}: {scanned:?}"
            );
        }
    }
}
