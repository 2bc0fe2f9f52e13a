//! Path patterns: what every path a route accepts looks like, by segment, the way REST routes
//! are written: `/repos/{owner}/{repo}/issues/{n}` is the segments `repos`, a parameter, a
//! parameter, `issues`, a digit parameter. Made from a literal (`==`, `^=`) or from a regex's
//! syntax tree; the index's path tree (`index/path_tree.rs`) looks them up by segment.
//!
//! Invariant: a [`PathPattern`] is a *necessary condition* on a path, never more: every path
//! that the route's predicate accepts is accepted by its pattern (a route found by the tree is
//! still evaluated in full). Where a regex is not exactly a sequence of literal segments and
//! one-segment classes, its pattern says less (a segment it cannot describe becomes a
//! parameter that takes any segment, a tail it cannot follow makes the pattern open), never
//! something false.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// One segment of a pattern.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Seg {
    /// Exactly this text.
    Lit(Box<[u8]>),
    /// Any segment of these bytes.
    Param(ParamClass),
}

/// Bytes read at each end of a long segment to tell whether a class accepts it (see
/// [`ParamClass::accepts`]).
const CLASS_CHECKED: usize = 16;

/// The bytes a parameter segment may hold. Bytes of non-ASCII characters are all let through
/// when the class has any non-ASCII character (over-approximating a Unicode class is sound).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ParamClass {
    ascii: u128,
    non_ascii: bool,
    empty: bool,
}

impl ParamClass {
    /// The class as five words (its ASCII bytes' bits, low word first, then a flags word: 1 for
    /// non-ASCII bytes, 2 for the empty segment), for the index in image form.
    pub(crate) fn to_words(self) -> [u32; 5] {
        let a = self.ascii;
        [
            a as u32,
            (a >> 32) as u32,
            (a >> 64) as u32,
            (a >> 96) as u32,
            u32::from(self.non_ascii) | u32::from(self.empty) << 1,
        ]
    }

    /// The class [`ParamClass::to_words`] wrote (any words make some class: at worst one that
    /// accepts more or fewer segments than the route's, which the image's checksum rules out).
    pub(crate) fn from_words(w: [u32; 5]) -> ParamClass {
        ParamClass {
            ascii: u128::from(w[0])
                | u128::from(w[1]) << 32
                | u128::from(w[2]) << 64
                | u128::from(w[3]) << 96,
            non_ascii: w[4] & 1 != 0,
            empty: w[4] & 2 != 0,
        }
    }

    /// Any segment at all (what a segment the analysis cannot describe becomes).
    pub(crate) const ANY: ParamClass = ParamClass {
        ascii: !(1u128 << b'/'),
        non_ascii: true,
        empty: true,
    };

    /// Whether a segment may belong to the class. A long segment is judged by its first and
    /// last [`CLASS_CHECKED`] bytes only: saying yes to more segments than the class holds is
    /// sound (the route is still evaluated), and a segment of a megabyte costs what a short one
    /// does, where reading it all would cost more than the regex it stands for.
    ///
    /// `seg` is one segment (no `/`): a class of every other byte, the `[^/]+` of most path
    /// parameters, takes it without reading it.
    #[inline]
    pub(crate) fn accepts(&self, seg: &[u8]) -> bool {
        if !self.empty && seg.is_empty() {
            return false;
        }
        if self.non_ascii && self.ascii == ParamClass::ANY.ascii {
            return true;
        }
        let ok = |b: &u8| {
            if *b < 0x80 {
                has_ascii(self.ascii, *b)
            } else {
                self.non_ascii
            }
        };
        if seg.len() <= 2 * CLASS_CHECKED {
            seg.iter().all(ok)
        } else {
            seg[..CLASS_CHECKED].iter().all(ok) && seg[seg.len() - CLASS_CHECKED..].iter().all(ok)
        }
    }

    /// A segment this class accepts (for estimating a pattern's neighbours).
    fn sample(&self) -> Vec<u8> {
        if !self.empty {
            for b in [b'1', b'a', b'x', b'-'] {
                if self.ascii & (1u128 << b) != 0 {
                    return vec![b];
                }
            }
            if let Some(b) = (0u8..0x80).find(|b| self.ascii & (1u128 << b) != 0) {
                return vec![b];
            }
        }
        Vec::new()
    }
}

/// Where the next `/` of a path is. Path segments are short, and a byte loop finds the end of
/// one in fewer instructions than `memchr` spends getting started (a tenth of a whole request
/// on the rest-api family went there); past the first bytes, `memchr` takes over, so a segment
/// of a megabyte still costs what `memchr` costs.
#[inline]
pub(crate) fn next_slash(b: &[u8]) -> Option<usize> {
    const SCANNED: usize = 16;
    let head = &b[..b.len().min(SCANNED)];
    match head.iter().position(|&c| c == b'/') {
        Some(i) => Some(i),
        None if b.len() > SCANNED => memchr::memchr(b'/', &b[SCANNED..]).map(|i| i + SCANNED),
        None => None,
    }
}

/// Whether the set of ASCII bytes `bits` (bit `b` for byte `b`) holds the ASCII byte `b`: the
/// word holding its bit, shifted, where a shift of the whole `u128` costs several instructions
/// a byte (this runs for every byte of a parameter a class must read).
#[inline]
pub(crate) fn has_ascii(bits: u128, b: u8) -> bool {
    debug_assert!(b < 0x80);
    let word = if b < 64 {
        bits as u64
    } else {
        (bits >> 64) as u64
    };
    (word >> (b & 63)) & 1 != 0
}

/// The first `n` `/`-separated pieces of `text` as literal segments, in a slice allocated at
/// its size (a collected vector shrunk to fit leaves glibc a fragment per route change).
fn lit_segs(text: &[u8], n: usize) -> Box<[Seg]> {
    let mut segs = Vec::with_capacity(n);
    segs.extend(
        text.split(|&b| b == b'/')
            .take(n)
            .map(|s| Seg::Lit(s.into())),
    );
    segs.into_boxed_slice()
}

/// What every path a route accepts looks like, by segment (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PathPattern {
    pub(crate) segs: Box<[Seg]>,
    /// Anything may follow the segments (else the path ends with them).
    pub(crate) open: bool,
}

impl PathPattern {
    /// The pattern of `path == literal`: its segments, exactly.
    pub(crate) fn exact(literal: &[u8]) -> Option<PathPattern> {
        let rest = literal.strip_prefix(b"/")?;
        Some(PathPattern {
            segs: lit_segs(rest, memchr::memchr_iter(b'/', rest).count() + 1),
            open: false,
        })
    }

    /// The pattern of `path ^= literal`: the segments the literal completes (each followed by
    /// a `/` in it), then anything.
    pub(crate) fn prefix(literal: &[u8]) -> Option<PathPattern> {
        let rest = literal.strip_prefix(b"/")?;
        // The last piece is not followed by a `/`: the path's segment only starts with it.
        Some(PathPattern {
            segs: lit_segs(rest, memchr::memchr_iter(b'/', rest).count()),
            open: true,
        })
    }

    /// The pattern of a regex anchored at the start of the text (see the module docs), or
    /// `None` when the regex is not shaped like a path.
    pub(crate) fn from_regex(hir: &Hir) -> Option<PathPattern> {
        let mut tokens = Vec::new();
        let parts: &[Hir] = match hir.kind() {
            HirKind::Concat(parts) => parts,
            _ => std::slice::from_ref(hir),
        };
        let (first, parts) = parts.split_first()?;
        if !matches!(first.kind(), HirKind::Look(Look::Start)) {
            return None;
        }
        let mut end = false;
        for (i, p) in parts.iter().enumerate() {
            if matches!(p.kind(), HirKind::Look(Look::End)) && i + 1 == parts.len() {
                end = true;
                break;
            }
            if !flatten(p, &mut tokens) {
                // A part the analysis cannot follow: what came before still holds.
                tokens.push(Token::Rest);
                break;
            }
        }
        tokens_to_pattern(&tokens, end)
    }

    /// Whether the pattern accepts `path`: what a walk of a tree holding only this pattern
    /// would find (for explaining one route; the tree answers for all patterns at once).
    pub(crate) fn accepts(&self, path: &[u8]) -> bool {
        let Some(mut rest) = path.strip_prefix(b"/") else {
            return false;
        };
        for (n, seg) in self.segs.iter().enumerate() {
            let (text, after) = match next_slash(rest) {
                Some(i) => (&rest[..i], Some(&rest[i + 1..])),
                None => (rest, None),
            };
            let ok = match seg {
                Seg::Lit(l) => **l == *text,
                Seg::Param(c) => c.accepts(text),
            };
            if !ok {
                return false;
            }
            match after {
                Some(after) => rest = after,
                // The path ends with this segment: exact and open patterns of these segments
                // both accept it.
                None => return n + 1 == self.segs.len(),
            }
        }
        self.open
    }

    /// The literal text every path the pattern accepts starts with: `/` and the literal
    /// segments before the first parameter, each followed by `/` when another segment
    /// follows it in the pattern (an open pattern also accepts a path ending with its last
    /// segment).
    pub(crate) fn literal_start(&self) -> String {
        let mut out = String::from("/");
        for (i, s) in self.segs.iter().enumerate() {
            let Seg::Lit(l) = s else { break };
            let Ok(l) = std::str::from_utf8(l) else { break };
            out.push_str(l);
            if i + 1 < self.segs.len() {
                out.push('/');
            } else {
                break;
            }
        }
        out
    }

    /// The pattern as a route author would read it: literal segments as they are, parameters
    /// as `{…}`, an open end as `/…`.
    pub(crate) fn describe(&self) -> String {
        let mut out = String::new();
        for s in self.segs.iter() {
            out.push('/');
            match s {
                Seg::Lit(l) => out.push_str(&String::from_utf8_lossy(l)),
                Seg::Param(_) => out.push_str("{…}"),
            }
        }
        if self.open {
            out.push_str("/…");
        } else if self.segs.is_empty() {
            out.push('/');
        }
        out
    }

    /// A path this pattern accepts (parameters get a sample segment): a request "like" a
    /// route, for estimating how many routes such a request meets.
    pub(crate) fn sample(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for s in self.segs.iter() {
            out.push(b'/');
            match s {
                Seg::Lit(l) => out.extend_from_slice(l),
                Seg::Param(c) => out.extend_from_slice(&c.sample()),
            }
        }
        if self.segs.is_empty() {
            out.push(b'/');
        }
        out
    }
}

#[derive(Debug)]
enum Token {
    Byte(u8),
    /// A run of bytes of a class that has no `/`.
    Run(ParamClass),
    /// Something that stays within one segment but that a class cannot describe exactly.
    Within,
    /// Anything from here on (a class with `/`, or a part the analysis cannot follow).
    Rest,
}

/// Appends the tokens of `h`; false when `h` is beyond the analysis.
fn flatten(h: &Hir, out: &mut Vec<Token>) -> bool {
    match h.kind() {
        HirKind::Empty => true,
        HirKind::Literal(l) => {
            out.extend(l.0.iter().map(|&b| Token::Byte(b)));
            true
        }
        HirKind::Capture(c) => flatten(&c.sub, out),
        HirKind::Concat(parts) => parts.iter().all(|p| flatten(p, out)),
        HirKind::Class(c) => match class_of(c) {
            Some(pc) => {
                // One character of the class: within the segment.
                let _ = pc;
                out.push(Token::Within);
                true
            }
            None => {
                out.push(Token::Rest);
                false
            }
        },
        HirKind::Repetition(r) => match r.sub.kind() {
            HirKind::Class(c) => match class_of(c) {
                Some(mut pc) => {
                    pc.empty = r.min == 0;
                    out.push(Token::Run(pc));
                    true
                }
                None => {
                    out.push(Token::Rest);
                    false
                }
            },
            _ => {
                // A repeated group: fine when it cannot contain a `/`.
                if r.sub.properties().look_set().is_empty() && !may_match_slash(&r.sub) {
                    out.push(Token::Within);
                    true
                } else {
                    out.push(Token::Rest);
                    false
                }
            }
        },
        // Word boundaries and the like only narrow what matches: leaving them out is sound.
        HirKind::Look(l) => !matches!(l, Look::End | Look::EndLF | Look::EndCRLF | Look::Start),
        HirKind::Alternation(alts) => {
            if !may_match_slash(h) {
                out.push(Token::Within);
                true
            } else {
                let _ = alts;
                out.push(Token::Rest);
                false
            }
        }
    }
}

/// Whether `h` could match a `/` anywhere.
fn may_match_slash(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => false,
        HirKind::Literal(l) => l.0.contains(&b'/'),
        HirKind::Class(c) => class_of(c).is_none(),
        HirKind::Repetition(r) => may_match_slash(&r.sub),
        HirKind::Capture(c) => may_match_slash(&c.sub),
        HirKind::Concat(hs) | HirKind::Alternation(hs) => hs.iter().any(may_match_slash),
    }
}

/// The class as a [`ParamClass`] (not yet empty-accepting), or `None` when it holds `/`.
fn class_of(c: &Class) -> Option<ParamClass> {
    let mut ascii = 0u128;
    let mut non_ascii = false;
    let mut add = |lo: u32, hi: u32| {
        for b in lo..=hi.min(0x7f) {
            ascii |= 1u128 << b;
        }
        if hi >= 0x80 {
            non_ascii = true;
        }
    };
    match c {
        Class::Unicode(u) => u
            .ranges()
            .iter()
            .for_each(|r| add(r.start() as u32, r.end() as u32)),
        Class::Bytes(b) => b
            .ranges()
            .iter()
            .for_each(|r| add(r.start() as u32, r.end() as u32)),
    }
    (ascii & (1u128 << b'/') == 0).then_some(ParamClass {
        ascii,
        non_ascii,
        empty: false,
    })
}

/// `None` unless every match starts with `/` (a pattern only ever sees such paths).
fn tokens_to_pattern(tokens: &[Token], end: bool) -> Option<PathPattern> {
    let mut segs = Vec::new();
    let mut open = !end;
    let Some(Token::Byte(b'/')) = tokens.first() else {
        return None;
    };
    let mut cur: Vec<&Token> = Vec::new();
    let mut complete = true;
    for t in &tokens[1..] {
        match t {
            Token::Byte(b'/') => {
                segs.push(segment(&cur));
                cur.clear();
            }
            Token::Rest => {
                open = true;
                complete = false;
                break;
            }
            t => cur.push(t),
        }
    }
    if complete && !open {
        segs.push(segment(&cur));
    }
    // An open pattern keeps only its complete segments: the last piece (if any) only starts
    // the path's next segment.
    Some(PathPattern {
        segs: crate::fitted::fitted(segs),
        open,
    })
}

/// The segment a run of tokens between two `/` stands for.
fn segment(tokens: &[&Token]) -> Seg {
    if tokens.iter().all(|t| matches!(t, Token::Byte(_))) {
        let text: Vec<u8> = tokens
            .iter()
            .map(|t| match t {
                Token::Byte(b) => *b,
                _ => unreachable!(),
            })
            .collect();
        return Seg::Lit(crate::fitted::fitted(text));
    }
    match tokens {
        [Token::Run(c)] => Seg::Param(*c),
        _ => Seg::Param(ParamClass::ANY),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_reads_back_from_its_words() {
        let mut classes = vec![ParamClass::ANY];
        for re in [
            r"^/(\d+)$",
            r"^/([a-z]+)$",
            r"^/(\w*)$",
            r"^/([^/]+)$",
            r"^/(é|x)$",
        ] {
            for seg in pattern(re).segs.iter() {
                if let Seg::Param(c) = seg {
                    classes.push(*c);
                }
            }
        }
        assert!(classes.len() > 3);
        for c in classes {
            assert_eq!(ParamClass::from_words(c.to_words()), c);
        }
    }

    fn pattern(re: &str) -> PathPattern {
        let hir = regex_syntax::Parser::new().parse(re).unwrap();
        PathPattern::from_regex(&hir).unwrap_or_else(|| panic!("{re}: no pattern"))
    }

    fn lit(s: &str) -> Seg {
        Seg::Lit(s.as_bytes().into())
    }

    #[test]
    fn the_next_slash_is_found_near_or_far() {
        for len in [0, 1, 15, 16, 17, 40, 100_000] {
            let mut b = vec![b'x'; len];
            assert_eq!(next_slash(&b), None, "{len}");
            b.push(b'/');
            b.extend_from_slice(b"a/b");
            assert_eq!(next_slash(&b), Some(len), "{len}");
            assert_eq!(memchr::memchr(b'/', &b), next_slash(&b));
        }
    }

    #[test]
    fn rest_routes_become_literal_and_parameter_segments() {
        let p = pattern(r"^/repos/(?<owner>[^/]+)/(?<repo>[^/]+)/issues/(?<n>\d+)$");
        assert!(!p.open);
        assert_eq!(p.segs.len(), 5);
        assert_eq!(p.segs[0], lit("repos"));
        assert_eq!(p.segs[3], lit("issues"));
        let Seg::Param(digits) = &p.segs[4] else {
            panic!()
        };
        assert!(digits.accepts(b"42") && !digits.accepts(b"4a") && !digits.accepts(b""));
        let Seg::Param(any) = &p.segs[1] else {
            panic!()
        };
        // A segment never holds `/` (every caller splits at it), so `[^/]+` takes any but the
        // empty one.
        assert!(any.accepts(b"o-1.x") && any.accepts("é".as_bytes()) && !any.accepts(b""));
    }

    #[test]
    fn what_the_analysis_cannot_describe_only_widens_the_pattern() {
        // A segment mixing literal and class: any segment.
        assert_eq!(pattern(r"^/v(\d+)/x$").segs[0], Seg::Param(ParamClass::ANY));
        // No `$`: open, with the complete segments only.
        let p = pattern(r"^/static/[a-z]+");
        assert!(p.open);
        assert_eq!(&*p.segs, &[lit("static")]);
        // A class with `/` ends the analysis.
        let p = pattern(r"^/a/.*/b$");
        assert!(p.open);
        assert_eq!(&*p.segs, &[lit("a")]);
        // Not anchored at the start, or not starting with `/`: no pattern.
        for re in ["/a/b$", "^a/b", "^(?:/a|/b)"] {
            let hir = regex_syntax::Parser::new().parse(re).unwrap();
            assert!(PathPattern::from_regex(&hir).is_none(), "{re}");
        }
    }

    #[test]
    fn literal_paths_and_prefixes() {
        assert_eq!(PathPattern::exact(b"/a/b").unwrap().segs.len(), 2);
        let p = PathPattern::prefix(b"/api/v1/").unwrap();
        assert!(p.open);
        assert_eq!(&*p.segs, &[lit("api"), lit("v1")]);
        let p = PathPattern::prefix(b"/api/v1").unwrap();
        assert_eq!(&*p.segs, &[lit("api")]);
        assert!(PathPattern::exact(b"a/b").is_none());
    }
}
