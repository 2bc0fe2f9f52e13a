//! Path patterns and the tree that indexes them by segment, the way REST routes are written:
//! `/repos/{owner}/{repo}/issues/{n}` is the segments `repos`, a parameter, a parameter,
//! `issues`, a digit parameter. A request's path is split at `/` once and walks the tree:
//! literal segments by lookup, parameter edges by their class. So thousands of routes behind
//! one host cost one walk, not one regex each.
//!
//! A [`PathPattern`] is a *necessary condition* on a path, never more: every path that the
//! route's predicate accepts is accepted by its pattern (a route found by the tree is still
//! evaluated in full). Where a regex is not exactly a sequence of literal segments and
//! one-segment classes, its pattern says less (a segment it cannot describe becomes a
//! parameter that takes any segment, a tail it cannot follow makes the pattern open), never
//! something false.
//!
//! Invariants of the tree: a pattern's payload sits at the node its segments lead to, in the
//! node's `exact` slot (the path has exactly these segments) or its `open` slot (the path
//! starts with these segments; anything may follow). A walk visits every payload whose pattern
//! accepts the path. Literal children are sorted by segment; parameter children have distinct
//! classes.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

use super::exact_map::ExactMap;

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
    #[inline]
    pub(crate) fn accepts(&self, seg: &[u8]) -> bool {
        if !self.empty && seg.is_empty() {
            return false;
        }
        let ok = |b: &u8| {
            if *b < 0x80 {
                self.ascii & (1u128 << *b) != 0
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
            segs: rest
                .split(|&b| b == b'/')
                .map(|s| Seg::Lit(s.into()))
                .collect(),
            open: false,
        })
    }

    /// The pattern of `path ^= literal`: the segments the literal completes (each followed by
    /// a `/` in it), then anything.
    pub(crate) fn prefix(literal: &[u8]) -> Option<PathPattern> {
        let rest = literal.strip_prefix(b"/")?;
        let mut segs: Vec<Seg> = rest
            .split(|&b| b == b'/')
            .map(|s| Seg::Lit(s.into()))
            .collect();
        // The last piece is not followed by a `/`: the path's segment only starts with it.
        segs.pop();
        Some(PathPattern {
            segs: segs.into(),
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
            let (text, after) = match memchr::memchr(b'/', rest) {
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
        segs: segs.into(),
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
        return Seg::Lit(text.into());
    }
    match tokens {
        [Token::Run(c)] => Seg::Param(*c),
        _ => Seg::Param(ParamClass::ANY),
    }
}

/// Payloads indexed by path pattern (see the module docs).
#[derive(Debug)]
pub(crate) struct PathTree<T> {
    root: PathNode<T>,
    len: usize,
}

#[derive(Debug)]
struct PathNode<T> {
    /// Literal children by segment: a REST table's root has one per resource or tenant, a
    /// mixed table's thousands.
    lits: ExactMap<PathNode<T>>,
    params: Vec<(ParamClass, PathNode<T>)>,
    /// The payloads of the patterns that end here: boxed, since most nodes are on the way to
    /// a pattern's end rather than at one (and a node is an entry of its parent's map).
    ends: Option<Box<Ends<T>>>,
}

#[derive(Debug)]
struct Ends<T> {
    exact: Option<T>,
    open: Option<T>,
}

impl<T> Default for PathNode<T> {
    fn default() -> Self {
        PathNode {
            lits: ExactMap::default(),
            params: Vec::new(),
            ends: None,
        }
    }
}

impl<T> Default for PathTree<T> {
    fn default() -> Self {
        PathTree {
            root: PathNode::default(),
            len: 0,
        }
    }
}

impl<T> PathNode<T> {
    fn is_empty(&self) -> bool {
        self.lits.is_empty() && self.params.is_empty() && self.ends.is_none()
    }

    fn slot(&mut self, open: bool) -> &mut Option<T> {
        let ends = self.ends.get_or_insert_with(|| {
            Box::new(Ends {
                exact: None,
                open: None,
            })
        });
        if open {
            &mut ends.open
        } else {
            &mut ends.exact
        }
    }

    /// Takes the payload of a pattern ending here, dropping the ends when both are gone.
    fn take(&mut self, open: bool) -> Option<T> {
        let out = self.slot(open).take();
        if self
            .ends
            .as_ref()
            .is_some_and(|e| e.exact.is_none() && e.open.is_none())
        {
            self.ends = None;
        }
        out
    }

    #[inline]
    fn open(&self) -> Option<&T> {
        self.ends.as_ref()?.open.as_ref()
    }

    #[inline]
    fn exact(&self) -> Option<&T> {
        self.ends.as_ref()?.exact.as_ref()
    }
}

impl<T> PathTree<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn get_or_insert_with(
        &mut self,
        p: &PathPattern,
        make: impl FnOnce() -> T,
    ) -> &mut T {
        let mut node = &mut self.root;
        for s in p.segs.iter() {
            node = match s {
                Seg::Lit(l) => node.lits.get_or_insert_with(l, PathNode::default),
                Seg::Param(c) => {
                    let i = match node.params.iter().position(|(k, _)| k == c) {
                        Some(i) => i,
                        None => {
                            node.params.push((*c, PathNode::default()));
                            node.params.len() - 1
                        }
                    };
                    &mut node.params[i].1
                }
            };
        }
        let slot = node.slot(p.open);
        if slot.is_none() {
            self.len += 1;
            *slot = Some(make());
        }
        slot.as_mut().expect("just set")
    }

    pub(crate) fn get_mut(&mut self, p: &PathPattern) -> Option<&mut T> {
        let mut node = &mut self.root;
        for s in p.segs.iter() {
            node = match s {
                Seg::Lit(l) => node.lits.get_mut(l)?,
                Seg::Param(c) => {
                    let i = node.params.iter().position(|(k, _)| k == c)?;
                    &mut node.params[i].1
                }
            };
        }
        let ends = node.ends.as_mut()?;
        if p.open {
            ends.open.as_mut()
        } else {
            ends.exact.as_mut()
        }
    }

    pub(crate) fn remove(&mut self, p: &PathPattern) -> Option<T> {
        let out = Self::remove_in(&mut self.root, &p.segs, p.open);
        if out.is_some() {
            self.len -= 1;
        }
        out
    }

    fn remove_in(node: &mut PathNode<T>, segs: &[Seg], open: bool) -> Option<T> {
        let Some((s, rest)) = segs.split_first() else {
            return node.take(open);
        };
        match s {
            Seg::Lit(l) => {
                let child = node.lits.get_mut(l)?;
                let out = Self::remove_in(child, rest, open)?;
                if child.is_empty() {
                    node.lits.remove(l);
                }
                Some(out)
            }
            Seg::Param(c) => {
                let i = node.params.iter().position(|(k, _)| k == c)?;
                let out = Self::remove_in(&mut node.params[i].1, rest, open)?;
                if node.params[i].1.is_empty() {
                    node.params.swap_remove(i);
                }
                Some(out)
            }
        }
    }

    /// Visits the payload of every pattern that accepts `path`.
    #[inline]
    pub(crate) fn walk<'a>(&'a self, path: &[u8], mut visit: impl FnMut(&'a T)) {
        if let Some(rest) = path.strip_prefix(b"/") {
            Self::walk_in(&self.root, rest, &mut visit);
        }
    }

    fn walk_in<'a>(node: &'a PathNode<T>, rest: &[u8], visit: &mut impl FnMut(&'a T)) {
        if let Some(v) = node.open() {
            visit(v);
        }
        // `rest` is what follows the `/` that ends the segments walked so far: the next segment
        // and, after another `/`, the rest of the path.
        let (seg, after) = match memchr::memchr(b'/', rest) {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let mut next = |child: &'a PathNode<T>| match after {
            Some(after) => Self::walk_in(child, after, visit),
            None => {
                if let Some(v) = child.open() {
                    visit(v);
                }
                if let Some(v) = child.exact() {
                    visit(v);
                }
            }
        };
        if let Some(child) = node.lits.get(seg) {
            next(child);
        }
        for (class, child) in &node.params {
            if class.accepts(seg) {
                next(child);
            }
        }
    }

    /// Every payload (in no particular order).
    pub(crate) fn for_each(&self, mut visit: impl FnMut(&T)) {
        let mut stack = vec![&self.root];
        while let Some(n) = stack.pop() {
            n.exact().into_iter().chain(n.open()).for_each(&mut visit);
            stack.extend(n.lits.values());
            stack.extend(n.params.iter().map(|(_, c)| c));
        }
    }
}

impl<T> Drop for PathTree<T> {
    /// Drops node by node from a list, so that no payload (a subtree of the index) is dropped
    /// with this tree's depth on the stack.
    fn drop(&mut self) {
        let mut pending: Vec<PathNode<T>> = self.root.lits.drain_values().collect();
        pending.extend(self.root.params.drain(..).map(|(_, c)| c));
        while let Some(mut n) = pending.pop() {
            pending.extend(n.lits.drain_values());
            pending.extend(n.params.drain(..).map(|(_, c)| c));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(re: &str) -> PathPattern {
        let hir = regex_syntax::Parser::new().parse(re).unwrap();
        PathPattern::from_regex(&hir).unwrap_or_else(|| panic!("{re}: no pattern"))
    }

    fn lit(s: &str) -> Seg {
        Seg::Lit(s.as_bytes().into())
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
        assert!(any.accepts(b"o-1.x") && !any.accepts(b"a/b"));
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

    fn walk(t: &PathTree<u32>, path: &str) -> Vec<u32> {
        let mut out = Vec::new();
        t.walk(path.as_bytes(), |v| out.push(*v));
        out.sort();
        out
    }

    #[test]
    fn a_walk_finds_every_pattern_that_accepts_the_path() {
        let res = [
            r"^/repos/([^/]+)/([^/]+)$",
            r"^/repos/([^/]+)/([^/]+)/issues$",
            r"^/repos/([^/]+)/([^/]+)/issues/(\d+)$",
            r"^/repos/me/x$",
            r"^/repos/",
            r"^/users/(\d+)$",
            r"^/$",
        ];
        let mut t = PathTree::default();
        for (i, r) in res.iter().enumerate() {
            *t.get_or_insert_with(&pattern(r), || 0) = i as u32;
        }
        assert_eq!(walk(&t, "/repos/a/b"), [0, 4]);
        assert_eq!(walk(&t, "/repos/me/x"), [0, 3, 4]);
        assert_eq!(walk(&t, "/repos/a/b/issues/7"), [2, 4]);
        assert_eq!(walk(&t, "/repos/a/b/issues/x"), [4]);
        assert_eq!(walk(&t, "/users/12"), [5]);
        assert_eq!(walk(&t, "/users/ab"), Vec::<u32>::new());
        assert_eq!(walk(&t, "/"), [6]);
        assert_eq!(walk(&t, "users/12"), Vec::<u32>::new());
        for r in res {
            t.remove(&pattern(r)).unwrap();
        }
        assert_eq!(t.len(), 0);
        assert!(t.root.is_empty());
    }

    #[test]
    fn every_path_a_regex_accepts_its_pattern_accepts() {
        let res = [
            r"^/repos/(?<o>[^/]+)/(?<r>[^/]+)/issues/(?<n>\d+)$",
            r"^/v(\d+)/items$",
            r"^/a[a-z]*z$",
            r"^/files/.*$",
            r"^/(a|b)/c$",
            r"^/x/[a-z0-9-]+/y",
            r"^/é/[^/]*$",
            r"^/u/\w+/\bz\b$",
        ];
        let paths = [
            "/repos/a/b/issues/1",
            "/v2/items",
            "/abcz",
            "/files/a/b/c",
            "/a/c",
            "/x/ab-1/y/z",
            "/é/",
            "/é/ü",
            "/u/ün/z",
            "/",
            "/repos//b/issues/1",
        ];
        for re in res {
            let regex = regex::Regex::new(re).unwrap();
            let mut t = PathTree::default();
            *t.get_or_insert_with(&pattern(re), || 0) = 1u32;
            for path in paths {
                if regex.is_match(path) {
                    assert_eq!(walk(&t, path), [1], "{re} matches {path}");
                }
            }
        }
    }
}
