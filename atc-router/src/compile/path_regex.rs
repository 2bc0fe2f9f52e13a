//! Regexes that are exactly a path of literal segments and one-segment parameters
//! (`^/repos/(?<owner>[^/]+)/(?<repo>[^/]+)/issues/(?<n>\d+)$`, what REST routes are), matched
//! segment by segment instead of by an automaton: split the path at `/`, compare the literal
//! segments, check each parameter's bytes against its class, and the captures are the segments
//! themselves. For such a regex the match is unique (a class without `/` can only take one
//! whole segment), so this gives exactly the regex's answer, groups included, in a few
//! comparisons over the path's bytes, where the automaton walks cold states at 100,000 routes.
//!
//! Invariant: [`PathRegex::from_hir`] accepts only regexes for which [`PathRegex::captures`]
//! gives what the regex gives on every text; where it cannot tell (a segment with non-ASCII
//! bytes under a class that takes only some non-ASCII characters, such as Unicode `\d`), it
//! answers `None` and the caller runs the regex. `tests/long_texts.rs`-style property tests in
//! this module's tests compare it with the `regex` crate.

use super::path_pattern::{has_ascii, next_slash};
use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// A class of one segment's bytes: ASCII bytes exactly; non-ASCII characters all or none
/// (anything else is not exact and not accepted by [`PathRegex::from_hir`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SegClass {
    ascii: u128,
    /// Some non-ASCII characters are in the class; with `all_non_ascii`, every one.
    non_ascii: bool,
    all_non_ascii: bool,
    empty: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Lit(Box<[u8]>),
    /// A parameter, and the group that captures it (if any).
    Param {
        class: SegClass,
        group: Option<u32>,
    },
}

/// See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathRegex {
    segs: Box<[Seg]>,
}

impl PathRegex {
    /// The segment form of a regex, when it is exactly one (see the module docs).
    pub(crate) fn from_hir(hir: &Hir) -> Option<PathRegex> {
        let HirKind::Concat(parts) = hir.kind() else {
            return None;
        };
        let (first, rest) = parts.split_first()?;
        let (last, middle) = rest.split_last()?;
        if !matches!(first.kind(), HirKind::Look(Look::Start))
            || !matches!(last.kind(), HirKind::Look(Look::End))
        {
            return None;
        }
        // Tokens: bytes and parameters.
        enum Tok {
            Byte(u8),
            Param(SegClass, Option<u32>),
        }
        let mut toks = Vec::new();
        for p in middle {
            match p.kind() {
                HirKind::Literal(l) => toks.extend(l.0.iter().map(|&b| Tok::Byte(b))),
                HirKind::Repetition(_) => toks.push(Tok::Param(param(p)?, None)),
                HirKind::Capture(c) => toks.push(Tok::Param(param(&c.sub)?, Some(c.index))),
                _ => return None,
            }
        }
        let Some(Tok::Byte(b'/')) = toks.first() else {
            return None;
        };
        let mut segs = Vec::new();
        let mut cur: Vec<&Tok> = Vec::new();
        let flush = |cur: &mut Vec<&Tok>, segs: &mut Vec<Seg>| -> Option<()> {
            let seg = match cur[..] {
                [Tok::Param(class, group)] => Seg::Param {
                    class: *class,
                    group: *group,
                },
                _ => {
                    let mut text = Vec::new();
                    for t in cur.iter() {
                        match t {
                            Tok::Byte(b) => text.push(*b),
                            // A parameter sharing its segment with literals: not exact.
                            Tok::Param(..) => return None,
                        }
                    }
                    Seg::Lit(crate::fitted::fitted(text))
                }
            };
            segs.push(seg);
            cur.clear();
            Some(())
        };
        for t in &toks[1..] {
            match t {
                Tok::Byte(b'/') => flush(&mut cur, &mut segs)?,
                t => cur.push(t),
            }
        }
        flush(&mut cur, &mut segs)?;
        Some(PathRegex {
            segs: crate::fitted::fitted(segs),
        })
    }

    /// Matches `text`: `None` when this form cannot tell (run the regex), `Some(false)` on no
    /// match, `Some(true)` after calling `f(group, text)` for group 0 (the whole text) and every
    /// parameter's group, in group order.
    ///
    /// One pass over the path: the parameters' segments are kept (up to [`KEPT_GROUPS`]) while
    /// it is checked, and handed to `f` only once the whole path matched. A pattern with more
    /// capturing parameters walks the path a second time for the rest.
    #[inline]
    pub(crate) fn captures(&self, text: &str, mut f: impl FnMut(usize, &str)) -> Option<bool> {
        let Some(rest) = text.strip_prefix('/') else {
            return Some(false);
        };
        let mut kept = [(0u32, ""); KEPT_GROUPS];
        let mut n_kept = 0;
        let mut at = rest;
        for (i, seg) in self.segs.iter().enumerate() {
            // `/` is ASCII, so a byte search finds it at a character boundary.
            let (s, after) = match next_slash(at.as_bytes()) {
                Some(k) => (&at[..k], Some(&at[k + 1..])),
                None => (at, None),
            };
            let last = i + 1 == self.segs.len();
            if last != after.is_none() {
                return Some(false);
            }
            match seg {
                Seg::Lit(l) => {
                    if !crate::short_eq::eq(s.as_bytes(), l) {
                        return Some(false);
                    }
                }
                Seg::Param { class, group } => {
                    if !class.accepts(s.as_bytes())? {
                        return Some(false);
                    }
                    if let Some(g) = group {
                        if n_kept < KEPT_GROUPS {
                            kept[n_kept] = (*g, s);
                        }
                        n_kept += 1;
                    }
                }
            }
            if let Some(after) = after {
                at = after;
            }
        }
        // The groups, in order (parameters are in group order: a capture's index follows the
        // pattern's left-to-right order).
        f(0, text);
        for &(g, s) in &kept[..n_kept.min(KEPT_GROUPS)] {
            f(g as usize, s);
        }
        if n_kept > KEPT_GROUPS {
            let mut rest = rest;
            let mut seen = 0;
            for seg in self.segs.iter() {
                let (s, after) = match next_slash(rest.as_bytes()) {
                    Some(k) => (&rest[..k], &rest[k + 1..]),
                    None => (rest, ""),
                };
                if let Seg::Param { group: Some(g), .. } = seg {
                    if seen >= KEPT_GROUPS {
                        f(*g as usize, s);
                    }
                    seen += 1;
                }
                rest = after;
            }
        }
        Some(true)
    }
}

/// Capturing parameters whose segments one pass keeps (REST paths have a handful).
const KEPT_GROUPS: usize = 8;

impl SegClass {
    /// Whether the segment (no `/`) is in the class; `None` when this form cannot tell. A
    /// class of every character but `/` (`[^/]+`) takes any segment without reading it.
    #[inline]
    fn accepts(&self, seg: &[u8]) -> Option<bool> {
        if seg.is_empty() {
            return Some(self.empty);
        }
        if self.all_non_ascii && self.ascii == !(1u128 << b'/') {
            return Some(true);
        }
        for &b in seg {
            if b < 0x80 {
                if !has_ascii(self.ascii, b) {
                    return Some(false);
                }
            } else if !self.non_ascii {
                return Some(false);
            } else if !self.all_non_ascii {
                return None;
            }
        }
        Some(true)
    }
}

/// The class of a parameter: a repetition (`+` or `*`, unbounded, greedy or not) of a class
/// without `/`.
fn param(h: &Hir) -> Option<SegClass> {
    let HirKind::Repetition(r) = h.kind() else {
        return None;
    };
    if r.max.is_some() || r.min > 1 {
        return None;
    }
    let HirKind::Class(c) = r.sub.kind() else {
        return None;
    };
    let mut ascii = 0u128;
    let mut non_ascii_ranges: Vec<(u32, u32)> = Vec::new();
    let mut add = |lo: u32, hi: u32| {
        for b in lo..=hi.min(0x7f) {
            ascii |= 1u128 << b;
        }
        if hi >= 0x80 {
            non_ascii_ranges.push((lo.max(0x80), hi));
        }
    };
    match c {
        Class::Unicode(u) => u
            .ranges()
            .iter()
            .for_each(|r| add(r.start() as u32, r.end() as u32)),
        // A byte class can split a character: not a class of whole characters.
        Class::Bytes(b) => {
            if b.ranges().iter().any(|r| r.end() >= 0x80) {
                return None;
            }
            b.ranges()
                .iter()
                .for_each(|r| add(u32::from(r.start()), u32::from(r.end())));
        }
    }
    if ascii & (1u128 << b'/') != 0 {
        return None;
    }
    // Every non-ASCII character: one range from U+0080 to U+10FFFF, less the surrogates
    // (which no `char` is).
    let covered: u64 = non_ascii_ranges
        .iter()
        .map(|(lo, hi)| u64::from(hi - lo + 1))
        .sum();
    let all_non_ascii = covered == 0x10FFFF - 0x80 + 1 - 0x800;
    Some(SegClass {
        ascii,
        non_ascii: !non_ascii_ranges.is_empty(),
        all_non_ascii,
        empty: r.min == 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn form(re: &str) -> Option<PathRegex> {
        PathRegex::from_hir(&regex_syntax::Parser::new().parse(re).unwrap())
    }

    /// What the `regex` crate says: the groups that took part, by index.
    fn regex_groups(re: &regex::Regex, text: &str) -> Option<Vec<(usize, String)>> {
        let caps = re.captures(text)?;
        Some(
            (0..caps.len())
                .filter_map(|i| caps.get(i).map(|m| (i, m.as_str().to_owned())))
                .collect(),
        )
    }

    fn ours(p: &PathRegex, text: &str) -> Option<Option<Vec<(usize, String)>>> {
        let mut groups = Vec::new();
        let matched = p.captures(text, |i, s| groups.push((i, s.to_owned())))?;
        groups.sort();
        Some(matched.then_some(groups))
    }

    #[test]
    fn rest_routes_have_the_form_and_other_regexes_do_not() {
        for re in [
            r"^/repos/(?<owner>[^/]+)/(?<repo>[^/]+)/issues/(?<n>\d+)$",
            r"^/users/([0-9]+)$",
            r"^/a/[^/]*/b$",
            r"^/$",
        ] {
            assert!(form(re).is_some(), "{re}");
        }
        for re in [
            r"^/v(\d+)/x$",
            r"^/a/.*$",
            r"/a/(\d+)$",
            r"^/a/(\d+)",
            r"^/a/(\d{1,3})$",
            r"^/(a|b)/c$",
            r"(?i)^/a/(\d+)$",
            r"^/a/((\d+))$",
        ] {
            assert!(form(re).is_none(), "{re}");
        }
    }

    const PATTERNS: &[&str] = &[
        r"^/repos/(?<owner>[^/]+)/(?<repo>[^/]+)/issues/(?<n>\d+)$",
        r"^/users/([0-9]+)/x$",
        r"^/a/[^/]*/(?<b>[a-z0-9-]+)$",
        r"^/u/(\w+)$",
        r"^/é/(?<x>[^/]+)$",
        r"^/$",
        r"^/d/(\d*)$",
    ];
    const PIECES: &[&str] = &[
        "/", "repos", "o", "r-1", "issues", "42", "users", "12", "x", "a", "", "b-9", "u", "é",
        "٣", "ß", "Ab", "d", "//",
    ];

    proptest! {
        #[test]
        fn the_segment_form_gives_what_the_regex_gives(
            pieces in prop::collection::vec(prop::sample::select(PIECES), 0..12),
        ) {
            let text: String = pieces.concat();
            for re in PATTERNS {
                let p = form(re).unwrap();
                let regex = regex::Regex::new(re).unwrap();
                if let Some(got) = ours(&p, &text) {
                    prop_assert_eq!(got, regex_groups(&regex, &text), "{} on {:?}", re, text);
                }
            }
        }
    }

    #[test]
    fn built_paths_match_with_their_segments_as_groups() {
        let p = form(r"^/repos/(?<owner>[^/]+)/(?<repo>[^/]+)/issues/(?<n>\d+)$").unwrap();
        assert_eq!(
            ours(&p, "/repos/me/x/issues/7").unwrap().unwrap(),
            vec![
                (0, "/repos/me/x/issues/7".to_owned()),
                (1, "me".to_owned()),
                (2, "x".to_owned()),
                (3, "7".to_owned())
            ]
        );
        assert_eq!(ours(&p, "/repos/me/x/issues/7/").unwrap(), None);
        assert_eq!(ours(&p, "/repos/me/issues/7").unwrap(), None);
        // Unicode \d takes some non-ASCII digits: this form cannot tell.
        assert_eq!(ours(&p, "/repos/me/x/issues/٣"), None);
    }

    #[test]
    fn more_parameters_than_one_pass_keeps_come_in_group_order() {
        let re = format!("^/m{}/end$", "/([^/]+)".repeat(KEPT_GROUPS + 3));
        let p = form(&re).unwrap();
        let regex = regex::Regex::new(&re).unwrap();
        let text: String = format!(
            "/m{}/end",
            (1..=KEPT_GROUPS + 3)
                .map(|i| format!("/v{i}"))
                .collect::<String>()
        );
        let got = ours(&p, &text).unwrap();
        assert_eq!(got, regex_groups(&regex, &text));
        assert_eq!(got.unwrap().len(), KEPT_GROUPS + 4);
    }
}
