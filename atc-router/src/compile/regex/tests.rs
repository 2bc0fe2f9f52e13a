//! Unit tests of `regex.rs`: which engine a pattern gets, and that every engine finds what
//! the `regex` crate finds (matches, groups and spans), on the thread's shared search state
//! too. Kept apart because they are as long as the code; what the pattern's tree says
//! (literals, direct trees) is tested beside `regex_shape.rs`.

use super::*;

#[test]
fn a_path_regex_compiles_its_automaton_only_for_a_text_its_segments_cannot_tell() {
    let re = CompiledRegex::new(r"^/users/(?<name>\w+)/orders/(?<id>\d+)$", 10 << 20).unwrap();
    assert!(re.segments.is_some());
    let Engine::Nfa { full, .. } = &re.engine else {
        panic!("not a literal")
    };
    let kept = |f: &FullNfa| f.0.get().is_some();
    assert!(!kept(full));
    // The limits count the automaton all the same.
    assert!(re.compiled_size() > 1000, "{}", re.compiled_size());
    assert!(re.is_match("/users/bob/orders/42"));
    assert!(!re.is_match("/users/bob/orders/x"));
    assert!(!kept(full), "ASCII texts are the segment form's");
    let mut got = Vec::new();
    assert!(re.captures("/users/zoë/orders/42", |g, t| got.push((g, t.to_owned()))));
    assert!(full.0.get().is_some_and(Option::is_some));
    assert_eq!(
        got,
        [
            (0, "/users/zoë/orders/42".to_owned()),
            (1, "zoë".to_owned()),
            (2, "42".to_owned())
        ]
    );
    assert!(!re.is_match("/users/zoë/orders/x"));
    assert!(re.is_match("/users/zoë/orders/7"));
}

#[test]
fn regexes_sharing_the_thread_state_agree_with_the_regex_crate() {
    // Different group counts and NFA sizes, one after the other on the same state, on texts
    // short enough for the backtracker and long enough to need the PikeVM.
    let sources = [
        r"^/users/(?<id>\d+)(/(?<tab>[a-z]+))?$",
        r"(a+)(b*)c",
        r"^/x/[^/]+/(\w+)",
        r"z",
    ];
    let long = format!("/users/{}/abc", "7".repeat(300_000));
    let texts = [
        "/users/42/posts",
        "/users/42",
        "xaabbc",
        "/x/yy/zz_1",
        "nothing",
        long.as_str(),
    ];
    let compiled: Vec<CompiledRegex> = sources
        .iter()
        .map(|s| CompiledRegex::new(s, 10 << 20).unwrap())
        .collect();
    let Engine::Nfa { full, ascii } = &compiled[0].engine else {
        panic!("not a literal")
    };
    let full = compiled[0].full(full).expect("compiles");
    for e in [full, ascii.as_ref().expect("\\d narrows")] {
        assert!(
            e.backtrack.max_haystack_len() < long.len(),
            "the PikeVM runs too"
        );
    }
    for _ in 0..2 {
        agree_with_the_regex_crate(&compiled, &sources, &texts);
    }
}

/// Every pattern finds what `regex::Regex` finds in every text: match, groups and spans.
fn agree_with_the_regex_crate(compiled: &[CompiledRegex], sources: &[&str], texts: &[&str]) {
    for (re, src) in compiled.iter().zip(sources) {
        let plain = regex::Regex::new(src).unwrap();
        for text in texts {
            assert_eq!(re.is_match(text), plain.is_match(text), "{src} {text:.40}");
            let mut got = Vec::new();
            let matched = re.captures(text, |i, t| got.push((i, t.len(), t.to_owned())));
            let want: Vec<(usize, usize, String)> = plain
                .captures(text)
                .map(|c| {
                    c.iter()
                        .enumerate()
                        .filter_map(|(i, m)| m.map(|m| (i, m.len(), m.as_str().to_owned())))
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(matched, !want.is_empty(), "{src} {text:.40}");
            assert_eq!(got, want, "{src} {text:.40}");
        }
    }
}

#[test]
fn ascii_texts_run_the_narrowed_pattern_with_the_same_results() {
    // Unicode classes, negated classes, `.`, case folding (`(?i)k` also matches the Kelvin
    // sign), word boundaries of every kind, and non-ASCII literals.
    let sources = [
        r"^/users/(?<id>\d+)/orders/(?<oid>\d+)$",
        r"^/users/(?<id>\d+)/orders/(?<oid>\d+)",
        r"^/x/([^/]+)/(.*)$",
        r"(?i)^/kelvin/(\w+)",
        r"\bfoo\b",
        r"\Bo+\B",
        r"\b{start}\w+\b{end}",
        r"\b{start-half}é|ü\b{end-half}",
        r"^/\p{Greek}+/(\S+)$",
        r"^/caf[eé]/(\W)",
        r"(?-u:\w)+",
    ];
    let texts = [
        "/users/42/orders/7",
        "/users/٤٢/orders/7",
        "/x/ab/cd/ef",
        "/x/äb/cd",
        "/KELVIN/abc",
        "/\u{212A}elvin/abc",
        "a foo b",
        "a foöo b",
        "xfooy",
        "boooot",
        "hello world",
        "é ü",
        "/αβ/rest",
        "/ab/rest",
        "/cafe/!",
        "/café/ ",
        "/cafe/é",
        "",
    ];
    let compiled: Vec<CompiledRegex> = sources
        .iter()
        .map(|s| CompiledRegex::new(s, 10 << 20).unwrap())
        .collect();
    for (re, src) in compiled.iter().zip(sources) {
        let Engine::Nfa { ascii, .. } = &re.engine else {
            panic!("{src} is not a literal")
        };
        // A path regex answers ASCII texts by its segments: it needs no narrowed form.
        let path = re.segments.is_some();
        assert_eq!(path, src.ends_with(r"(?<oid>\d+)$"), "{src}");
        assert_eq!(
            ascii.is_some(),
            src != r"(?-u:\w)+" && !path,
            "{src}: narrowed only if it changes and is not a path"
        );
    }
    agree_with_the_regex_crate(&compiled, &sources, &texts);
}

#[test]
fn literal_matches_agree_with_regex() {
    for (p, hays) in [
        ("^/shop$", &["/shop", "/shop/", "x/shop"][..]),
        ("^/v1", &["/v1/x", "/v", "a/v1"]),
        (r"\.com$", &["a.com", "a.comx", ".com"]),
        ("ab", &["xxabyab", "ba", ""]),
        ("", &["", "x"]),
        ("^é$", &["é", "e"]),
    ] {
        let ours = CompiledRegex::new(p, 1 << 20).unwrap();
        assert!(matches!(ours.engine, Engine::Literal { .. }), "{p}");
        let re = regex::Regex::new(p).unwrap();
        for h in hays {
            let mut got = None;
            ours.captures(h, |_, t| got = Some(t.to_owned()));
            assert_eq!(got.as_deref(), re.find(h).map(|m| m.as_str()), "{p} on {h}");
            assert_eq!(ours.is_match(h), re.is_match(h));
        }
    }
}
