//! What a pattern's tree says about it before anything is compiled: whether it is a plain
//! literal, the literals its matches start with or contain, and its ASCII-only narrowing.
//!
//! Invariant: each answer is implied by the pattern's semantics (the prefixes are prefixes of
//! every match; the narrowed tree matches exactly what the full one matches on ASCII texts).
//! The index keys routes by these answers and the matcher skips automata on them, so an
//! answer that is merely likely would lose matches.

use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::{Hir, HirKind, Look};
use std::sync::OnceLock;

/// `hir` with every Unicode class intersected with ASCII and every Unicode word boundary made
/// an ASCII one, or `None` when nothing changes.
///
/// On a text that is all ASCII both trees match the same spans with the same groups: a class
/// can only match a character of the text, all of which are ASCII, and Unicode and ASCII
/// agree on which ASCII characters are word characters (and a boundary only looks at the
/// characters around it). Group numbers and names are kept, as only leaves change.
///
/// Why: with Unicode on (the default), `\d`, `\w`, `.` and `[^/]` compile to UTF-8 automata of
/// dozens of states with transition lists on the heap; the ASCII versions are one byte-range
/// state each. A route's regex usually runs on an ASCII path, and at 100,000 routes it is one
/// no request ran lately: the NFA a search walks is then a few cache lines, not tens.
pub(crate) fn restrict_to_ascii(hir: &Hir) -> Option<Hir> {
    use regex_syntax::hir::{Capture, Class, ClassUnicode, ClassUnicodeRange, Repetition};
    let sub = |h: &Hir| restrict_to_ascii(h);
    // Rebuilds a node's children when one of them changed.
    let all = |hs: &[Hir]| -> Option<Vec<Hir>> {
        let narrowed: Vec<Option<Hir>> = hs.iter().map(sub).collect();
        narrowed.iter().any(Option::is_some).then(|| {
            narrowed
                .into_iter()
                .zip(hs)
                .map(|(n, h)| n.unwrap_or_else(|| h.clone()))
                .collect()
        })
    };
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => {
            let ascii = ClassUnicode::new([ClassUnicodeRange::new('\0', '\x7F')]);
            let mut narrow = c.clone();
            narrow.intersect(&ascii);
            (narrow != *c).then(|| Hir::class(Class::Unicode(narrow)))
        }
        HirKind::Look(look) => {
            let ascii = match look {
                Look::WordUnicode => Look::WordAscii,
                Look::WordUnicodeNegate => Look::WordAsciiNegate,
                Look::WordStartUnicode => Look::WordStartAscii,
                Look::WordEndUnicode => Look::WordEndAscii,
                Look::WordStartHalfUnicode => Look::WordStartHalfAscii,
                Look::WordEndHalfUnicode => Look::WordEndHalfAscii,
                _ => return None,
            };
            Some(Hir::look(ascii))
        }
        HirKind::Repetition(r) => sub(&r.sub).map(|narrow| {
            Hir::repetition(Repetition {
                sub: Box::new(narrow),
                ..r.clone()
            })
        }),
        HirKind::Capture(c) => sub(&c.sub).map(|narrow| {
            Hir::capture(Capture {
                sub: Box::new(narrow),
                ..c.clone()
            })
        }),
        HirKind::Concat(hs) => all(hs).map(Hir::concat),
        HirKind::Alternation(hs) => all(hs).map(Hir::alternation),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(Class::Bytes(_)) => None,
    }
}

/// The tree regex-syntax would give for `^?text$?` when `text` is made only of characters that
/// stand for themselves in every context (no flags, escapes or meta characters): such patterns
/// (`^/shop$`, `^/api/v1`) are about half of a workload's distinct regexes, and building their
/// tree directly skips a parse that costs ≈45k instructions. Anything else gives `None`.
pub(crate) fn plain_literal_hir(source: &str) -> Option<Hir> {
    let body = source.strip_prefix('^');
    let start = body.is_some();
    let body = body.unwrap_or(source);
    let text = body.strip_suffix('$');
    let end = text.is_some();
    let text = text.unwrap_or(body);
    let plain = |c: u8| c.is_ascii_alphanumeric() || b"/_-:@%,;=!".contains(&c);
    if text.is_empty() || !text.bytes().all(plain) {
        return None;
    }
    let mut parts = Vec::with_capacity(3);
    if start {
        parts.push(Hir::look(Look::Start));
    }
    parts.push(Hir::literal(text.as_bytes()));
    if end {
        parts.push(Hir::look(Look::End));
    }
    Some(Hir::concat(parts))
}

/// The tree regex-syntax would give for an anchored path template, `^...$` made only of
/// plain characters (as in [`plain_literal_hir`]), `\.`, and parameters: a bracketed class of
/// plain characters and ranges (`[^/]`, `[0-9a-f]`, `[a-z0-9_-]`) or `\d` or `\w`, optionally repeated with
/// `+`, optionally in a group, `(...)`, `(?<name>...)` or `(?P<name>...)` with a name of ASCII
/// letters, digits and `_`. That is how REST routes write path parameters
/// (`^/repos/(?<owner>[^/]+)/(?<repo>[^/]+)$`), and it skips a parse that costs more than the
/// rest of adding such a route. Anything else (any other syntax, a name used twice, a range
/// written backwards) gives `None`, and the caller parses: the subset is recognised only where
/// its tree is certain, never rejected.
pub(crate) fn path_template_hir(source: &str) -> Option<Hir> {
    use regex_syntax::hir::{Capture, Repetition};
    let body = source.strip_prefix('^')?.strip_suffix('$')?.as_bytes();
    let plain = |c: u8| c.is_ascii_alphanumeric() || b"/_-:@%,;=!".contains(&c);
    let mut parts = vec![Hir::look(Look::Start)];
    let mut text = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    let mut groups = 0u32;
    let mut at = 0;
    let flush = |text: &mut Vec<u8>, parts: &mut Vec<Hir>| {
        if !text.is_empty() {
            parts.push(Hir::literal(std::mem::take(text)));
        }
    };
    while at < body.len() {
        match body[at] {
            c if plain(c) => {
                text.push(c);
                at += 1;
            }
            b'\\' if body.get(at + 1) == Some(&b'.') => {
                text.push(b'.');
                at += 2;
            }
            b'(' | b'[' => {
                flush(&mut text, &mut parts);
                let group = body[at] == b'(';
                let mut name = None;
                if group {
                    at += 1;
                    let open = match &body[at..] {
                        [b'?', b'<', ..] => 2,
                        [b'?', b'P', b'<', ..] => 3,
                        _ => 0,
                    };
                    if open > 0 {
                        at += open;
                        let len = body[at..].iter().position(|&c| c == b'>')?;
                        let n = std::str::from_utf8(&body[at..at + len]).ok()?;
                        let ok = n.bytes().enumerate().all(|(i, c)| {
                            c == b'_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())
                        });
                        // (A template of more groups than this is parsed: the check is
                        // quadratic in them.)
                        if n.is_empty() || !ok || names.len() >= 64 || names.contains(&n) {
                            return None;
                        }
                        names.push(n);
                        name = Some(n);
                        at += len + 1;
                    }
                }
                let mut param = match body.get(at..)? {
                    [b'\\', b'd', ..] => perl_class(PerlClass::Digit, &mut at)?,
                    [b'\\', b'w', ..] => perl_class(PerlClass::Word, &mut at)?,
                    [b'[', ..] => bracketed(body, &mut at)?,
                    _ => return None,
                };
                if body.get(at) == Some(&b'+') {
                    at += 1;
                    param = Hir::repetition(Repetition {
                        min: 1,
                        max: None,
                        greedy: true,
                        sub: Box::new(param),
                    });
                }
                if group {
                    if body.get(at) != Some(&b')') {
                        return None;
                    }
                    at += 1;
                    groups += 1;
                    param = Hir::capture(Capture {
                        index: groups,
                        name: name.map(Box::from),
                        sub: Box::new(param),
                    });
                }
                parts.push(param);
            }
            _ => return None,
        }
    }
    flush(&mut text, &mut parts);
    parts.push(Hir::look(Look::End));
    Some(Hir::concat(parts))
}

/// A bracketed class of [`path_template_hir`] at `body[*at]` (its `[`), as regex-syntax builds
/// it; `at` moves past its `]`.
fn bracketed(body: &[u8], at: &mut usize) -> Option<Hir> {
    use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange};
    // Plain characters that stand for themselves inside a class (`-` only last, placed apart).
    let in_class = |c: u8| c.is_ascii_alphanumeric() || b"/_.:@%,;=!".contains(&c);
    let mut at_ = *at + 1;
    let negated = body.get(at_) == Some(&b'^');
    at_ += usize::from(negated);
    let mut ranges = Vec::new();
    loop {
        match body.get(at_..)? {
            [b'-', b']', ..] => {
                ranges.push(ClassUnicodeRange::new('-', '-'));
                at_ += 2;
                break;
            }
            [b']', ..] if !ranges.is_empty() => {
                at_ += 1;
                break;
            }
            [a, b'-', b, ..] if in_class(*a) && in_class(*b) && a <= b => {
                ranges.push(ClassUnicodeRange::new(*a as char, *b as char));
                at_ += 3;
            }
            [a, ..] if in_class(*a) => {
                ranges.push(ClassUnicodeRange::new(*a as char, *a as char));
                at_ += 1;
            }
            _ => return None,
        }
    }
    let mut class = ClassUnicode::new(ranges);
    if negated {
        class.negate();
    }
    *at = at_;
    Some(Hir::class(Class::Unicode(class)))
}

#[derive(Clone, Copy)]
enum PerlClass {
    Digit,
    Word,
}

/// The tree regex-syntax builds for `\d` or `\w` at `body[*at]` (Unicode classes from its
/// tables, parsed once per process and cloned); `at` moves past it.
fn perl_class(class: PerlClass, at: &mut usize) -> Option<Hir> {
    *at += 2;
    static DIGIT: OnceLock<Option<Hir>> = OnceLock::new();
    static WORD: OnceLock<Option<Hir>> = OnceLock::new();
    let (cell, source) = match class {
        PerlClass::Digit => (&DIGIT, r"\d"),
        PerlClass::Word => (&WORD, r"\w"),
    };
    cell.get_or_init(|| regex_syntax::Parser::new().parse(source).ok())
        .clone()
}

/// The tree of `source` when one of the direct readings above knows it
/// ([`plain_literal_hir`], [`path_template_hir`]); `None`: parse it.
pub(crate) fn direct_hir(source: &str) -> Option<Hir> {
    plain_literal_hir(source).or_else(|| path_template_hir(source))
}

/// `(text, anchored at start, anchored at end)` when the pattern is a literal with anchors.
pub(crate) fn literal(hir: &Hir) -> Option<(Box<str>, bool, bool)> {
    let parts: &[Hir] = match hir.kind() {
        HirKind::Concat(parts) => parts,
        _ => std::slice::from_ref(hir),
    };
    let mut i = 0;
    let start = matches!(
        parts.first().map(Hir::kind),
        Some(HirKind::Look(Look::Start))
    );
    i += usize::from(start);
    let text = match parts.get(i).map(Hir::kind) {
        Some(HirKind::Literal(l)) => {
            i += 1;
            std::str::from_utf8(&l.0).ok()?
        }
        Some(HirKind::Empty) => {
            i += 1;
            ""
        }
        _ => "",
    };
    let end = matches!(parts.get(i).map(Hir::kind), Some(HirKind::Look(Look::End)));
    i += usize::from(end);
    (i == parts.len()).then(|| (text.into(), start, end))
}

/// Uses regex-syntax (the parser inside `regex`, with the same default flags) to find the
/// literal prefixes. Only a start anchor that every match begins with (`^` without `(?m)`, or
/// `\A`) makes a prefix of the match a prefix of the whole text.
pub(crate) fn anchored_prefixes(hir: &Hir) -> Option<Box<[Box<[u8]>]>> {
    if !hir.properties().look_set_prefix().contains(Look::Start) {
        return None;
    }
    literal_prefixes(hir)
}

/// Literals one of which every match of `hir` starts with (regex-syntax's extractor, as the
/// `regex` crate's prefilters use it); `None` when the set is infinite or holds the empty
/// string.
pub(crate) fn literal_prefixes(hir: &Hir) -> Option<Box<[Box<[u8]>]>> {
    let seq = Extractor::new().kind(ExtractKind::Prefix).extract(hir);
    let literals = seq.literals()?;
    if literals.is_empty() || literals.iter().any(|l| l.as_bytes().is_empty()) {
        return None;
    }
    Some(literals.iter().map(|l| Box::from(l.as_bytes())).collect())
}

/// Literals one of which every match of `hir` contains, the most selective this can tell:
/// from the whole pattern (what every match starts or ends with) and from each part of a
/// top-level sequence (every match holds a match of each part, so one of the part's own
/// prefixes). `\w{30}x17` has no prefix, but every match ends with `x17`; `\d+-(a|b)c/v2`
/// contains `-`, and `ac` or `bc`, and `/v2`, of which `/v2` is kept (the longest shortest
/// literal, then the fewest). `None` when no part gives a finite set without the empty string.
pub(crate) fn required_literals(hir: &Hir) -> Option<Box<[Box<[u8]>]>> {
    let mut best: Option<Vec<&[u8]>> = None;
    let mut seqs = vec![
        Extractor::new().kind(ExtractKind::Prefix).extract(hir),
        Extractor::new().kind(ExtractKind::Suffix).extract(hir),
    ];
    let mut whole = hir;
    while let HirKind::Capture(c) = whole.kind() {
        whole = &c.sub;
    }
    if let HirKind::Concat(parts) = whole.kind() {
        for part in parts {
            seqs.push(Extractor::new().kind(ExtractKind::Prefix).extract(part));
        }
    }
    for seq in &seqs {
        let Some(literals) = seq.literals() else {
            continue;
        };
        if literals.is_empty() || literals.iter().any(|l| l.as_bytes().is_empty()) {
            continue;
        }
        let set: Vec<&[u8]> = literals.iter().map(|l| l.as_bytes()).collect();
        if best
            .as_ref()
            .is_none_or(|b| selectivity(&set) > selectivity(b))
        {
            best = Some(set);
        }
    }
    best.map(|set| set.into_iter().map(Box::from).collect())
}

/// How much a literal set narrows: its shortest literal's length, then fewer literals.
fn selectivity(set: &[&[u8]]) -> (usize, std::cmp::Reverse<usize>) {
    let shortest = set.iter().map(|l| l.len()).min().unwrap_or(0);
    (shortest, std::cmp::Reverse(set.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(p: &str) -> Option<(Box<str>, bool, bool)> {
        literal(&regex_syntax::Parser::new().parse(p).unwrap())
    }

    #[test]
    fn anchored_literals_skip_the_automaton() {
        assert_eq!(lit("^/shop$"), Some(("/shop".into(), true, true)));
        assert_eq!(lit(r"\A/shop"), Some(("/shop".into(), true, false)));
        assert_eq!(lit(r"\.com$"), Some((".com".into(), false, true)));
        assert_eq!(lit("abc"), Some(("abc".into(), false, false)));
        assert_eq!(lit("^$"), Some(("".into(), true, true)));
        assert_eq!(lit(""), Some(("".into(), false, false)));
        for not_literal in [
            "^(/shop)$",
            "(?i)^a",
            "(?m)^a$",
            "^a+$",
            "^a|b$",
            r"^a\b",
            "a$b",
        ] {
            assert_eq!(lit(not_literal), None, "{not_literal}");
        }
    }

    #[test]
    fn plain_literal_trees_are_what_regex_syntax_builds() {
        for p in [
            "^/shop$",
            "^/api/v1",
            "/x$",
            "a",
            "^a-b_c:d@e%f,g;h=i!j$",
            "^0$",
            "^/$",
        ] {
            let direct = plain_literal_hir(p).unwrap_or_else(|| panic!("{p} not plain"));
            assert_eq!(direct, regex_syntax::Parser::new().parse(p).unwrap(), "{p}");
        }
        for not_plain in [
            "", "^", "$", "^$", "^^a", "a$$", "^a.b$", r"^a\-b$", "^(a)$", "^a+$", "^a b$", "^é$",
            "^a|b$", "^a#b$", "^a&b$", "^a~b$", "(?i)a", "^a{2}$", "^[a]$",
        ] {
            assert!(plain_literal_hir(not_plain).is_none(), "{not_plain}");
        }
    }

    proptest::proptest! {
        #[test]
        fn plain_literal_trees_agree_with_regex_syntax(p in "\\^?[a-zA-Z0-9/_:@%,;=!-]{1,12}\\$?") {
            let direct = plain_literal_hir(&p).expect("generated from the plain alphabet");
            proptest::prop_assert_eq!(direct, regex_syntax::Parser::new().parse(&p).unwrap());
        }
    }

    #[test]
    fn path_template_trees_are_what_regex_syntax_builds() {
        for p in [
            "^/repos/(?<owner>[^/]+)/(?<repo>[^/]+)/issues$",
            "^/gists/(?P<gist_id>[0-9a-f]+)/star$",
            "^/a/([a-z0-9_-]+)/b$",
            "^/files/[^/.]+\\.json$",
            "^/x/(?<one>[a])$",
            "^/(?<a>[^/]+)(?<b>[0-9]+)$",
            "^/v1/(?<id>[A-Za-z0-9]+)/$",
            "^/[/]+$",
            "^/(?<_x1>[^a-z0-9]+)$",
            "^/t/(?<id>\\d+)/u/(?<w>\\w+)$",
            "^/t/(\\d)$",
        ] {
            let direct = path_template_hir(p).unwrap_or_else(|| panic!("{p} not a template"));
            assert_eq!(direct, regex_syntax::Parser::new().parse(p).unwrap(), "{p}");
        }
        for not_template in [
            "/a/([^/]+)$",
            "^/a/([^/]+)",
            "^/a/(?<x>[^/]+)/(?<x>[^/]+)$",
            "^/a/([z-a]+)$",
            "^/a/([]+)$",
            "^/a/([-a]+)$",
            "^/a/([a--b]+)$",
            "^/a/(?<1x>[a]+)$",
            "^/a/(?<>[a]+)$",
            "^/a/(?<x>[a]*)$",
            "^/a/(?:[a]+)$",
            "^/a/(?i)[a]+$",
            "^/a/(\\D+)$",
            "^/a/[^/]+?$",
            "^/a.b$",
            "^/a/([^/]+$",
            "^/a/(?<x[a]+)$",
            "^/é/([a]+)$",
            "^/a/[a&&b]$",
        ] {
            assert!(path_template_hir(not_template).is_none(), "{not_template}");
        }
    }

    proptest::proptest! {
        /// Random strings over the template's alphabet and its near misses: whenever the direct
        /// reading answers, it answers what regex-syntax answers.
        #[test]
        fn path_template_trees_agree_with_regex_syntax(
            p in "\\^(/|[a-c09_.:-]|\\\\.|\\(|\\(\\?<[a-b_1]{0,2}>|\\(\\?P<[ab]{1,2}>|\\[|\\[\\^|\\]|\\+|\\)){1,24}\\$"
        ) {
            if let Some(direct) = path_template_hir(&p) {
                let parsed = regex_syntax::Parser::new().parse(&p);
                proptest::prop_assert!(parsed.is_ok(), "{} read directly, refused by regex-syntax", p);
                proptest::prop_assert_eq!(direct, parsed.unwrap(), "{}", p);
            }
        }
    }

    proptest::proptest! {
        /// Templates as REST routes write them: each is read directly, as regex-syntax reads it.
        #[test]
        fn path_templates_are_read_directly(
            p in r"\^(/([a-c0-9_:-]{1,3}|\(\?P?<[a-c]{1,2}>\[\^?[a-c0-9/.]{1,3}(-[x-z])?-?\]\+?\)|\[\^/\]\+|\(\?<[d-e]>\\[dw]\+\)|\\\.)){1,5}\$"
        ) {
            if let Ok(parsed) = regex_syntax::Parser::new().parse(&p) {
                proptest::prop_assert_eq!(path_template_hir(&p), Some(parsed), "{}", p);
            }
        }
    }
}
