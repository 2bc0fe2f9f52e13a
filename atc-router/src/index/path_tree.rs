//! The tree that indexes payloads by [`PathPattern`] (see `compile/path_pattern.rs`). A
//! request's path is split at `/` once and walks the tree: literal segments by lookup,
//! parameter edges by their class. So thousands of routes behind one host cost one walk, not
//! one regex each.
//!
//! Invariants of the tree: a pattern's payload sits at the node its segments lead to, in the
//! node's `exact` slot (the path has exactly these segments) or its `open` slot (the path
//! starts with these segments; anything may follow). A walk visits every payload whose pattern
//! accepts the path. Parameter children have distinct classes. A node boxes its children only
//! when it has some, and no node but the root is empty: a removal prunes the way back.
//!
//! Layout: most nodes are the last segment of a pattern, so a node is its ends (a payload in
//! place) and one word for its children. A pattern's last node takes 80 bytes of its parent's
//! map, where children in place and a boxed payload took 136. A busy node's hash table sits in
//! its children's box (no box of its own), so a lookup there reads no more lines than with the
//! children in place; a node of few children or a parameter edge costs one more line, the box.

use super::exact_map::{ExactMap, Unboxed};
use super::probe_map::ProbeMap;
use super::small_key::SmallKey;
use crate::compile::path_pattern::{next_slash, ParamClass, PathPattern, Seg};

/// Payloads indexed by path pattern (see the module docs).
#[derive(Debug)]
pub(crate) struct PathTree<T> {
    root: PathNode<T>,
    len: usize,
}

/// A node of the tree, as an entry of its parent's map: most nodes end a pattern and lead
/// nowhere (a route's last segment), so a node is its ends and one word for its children,
/// which only the nodes on the way to others box.
#[derive(Debug)]
struct PathNode<T> {
    /// `None` when the node has no child (never an empty box).
    kids: Option<Box<Kids<T>>>,
    ends: Ends<T>,
}

/// A node's literal children.
type Lits<T> = ExactMap<PathNode<T>, Unboxed<ProbeMap<SmallKey, PathNode<T>>>>;

/// The children of a node that has some.
#[derive(Debug)]
struct Kids<T> {
    /// Literal children by segment: a REST table's root has one per resource or tenant, a
    /// mixed table's thousands. Its hash table, when it has one, is in place: this box is the
    /// one a lookup reads on its way.
    lits: Lits<T>,
    /// Parameter children, rare beside literal ones: a slice boxed to its length.
    params: Box<[(ParamClass, PathNode<T>)]>,
}

/// The payloads of the patterns that end at a node. Most ends hold one payload of the two (an
/// exact pattern or an open one), in place; both are boxed together.
#[derive(Debug)]
enum Ends<T> {
    None,
    Exact(T),
    Open(T),
    /// `[exact, open]`.
    Both(Box<[T; 2]>),
}

impl<T> Default for PathNode<T> {
    fn default() -> Self {
        PathNode {
            kids: None,
            ends: Ends::None,
        }
    }
}

impl<T> Default for Kids<T> {
    fn default() -> Self {
        Kids {
            lits: ExactMap::default(),
            params: Box::new([]),
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
        self.kids.is_none() && matches!(self.ends, Ends::None)
    }

    /// The payload of the pattern ending here (`open` or exact), made with `make` if there is
    /// none; and whether it was made.
    fn slot_or_insert_with(&mut self, open: bool, make: impl FnOnce() -> T) -> (&mut T, bool) {
        let made = self.end(open).is_none();
        if made {
            let new = make();
            // With no end of this kind, an `Open` end means an exact one is added, and back.
            self.ends = match std::mem::replace(&mut self.ends, Ends::None) {
                Ends::Open(o) => Ends::Both(Box::new([new, o])),
                Ends::Exact(e) => Ends::Both(Box::new([e, new])),
                _ if open => Ends::Open(new),
                _ => Ends::Exact(new),
            };
        }
        let slot = self.end_mut(open).expect("just made");
        (slot, made)
    }

    /// Takes the payload of a pattern ending here.
    fn take(&mut self, open: bool) -> Option<T> {
        let (out, left) = match (std::mem::replace(&mut self.ends, Ends::None), open) {
            (Ends::Exact(e), false) => (Some(e), Ends::None),
            (Ends::Open(o), true) => (Some(o), Ends::None),
            (Ends::Both(b), _) => {
                let [e, o] = *b;
                if open {
                    (Some(o), Ends::Exact(e))
                } else {
                    (Some(e), Ends::Open(o))
                }
            }
            (other, _) => (None, other),
        };
        self.ends = left;
        out
    }

    fn end(&self, open: bool) -> Option<&T> {
        if open {
            self.open()
        } else {
            self.exact()
        }
    }

    fn end_mut(&mut self, open: bool) -> Option<&mut T> {
        match (&mut self.ends, open) {
            (Ends::Exact(e), false) | (Ends::Open(e), true) => Some(e),
            (Ends::Both(b), _) => Some(&mut b[usize::from(open)]),
            _ => None,
        }
    }

    #[inline]
    fn open(&self) -> Option<&T> {
        match &self.ends {
            Ends::Open(o) => Some(o),
            Ends::Both(b) => Some(&b[1]),
            _ => None,
        }
    }

    #[inline]
    fn exact(&self) -> Option<&T> {
        match &self.ends {
            Ends::Exact(e) => Some(e),
            Ends::Both(b) => Some(&b[0]),
            _ => None,
        }
    }

    /// The literal children, if any.
    #[inline]
    fn lits(&self) -> Option<&Lits<T>> {
        self.kids.as_deref().map(|k| &k.lits)
    }

    /// The parameter children.
    #[inline]
    fn params(&self) -> &[(ParamClass, PathNode<T>)] {
        self.kids.as_deref().map_or(&[], |k| &k.params)
    }

    /// Every child.
    fn children(&self) -> impl Iterator<Item = &PathNode<T>> {
        self.kids
            .as_deref()
            .into_iter()
            .flat_map(|k| k.lits.values().chain(k.params.iter().map(|(_, c)| c)))
    }

    /// The children, boxed if the node had none.
    fn kids_mut(&mut self) -> &mut Kids<T> {
        self.kids.get_or_insert_with(Box::default)
    }

    /// Drops the children's box once the last child is gone.
    fn drop_kids_if_none(&mut self) {
        if self
            .kids
            .as_deref()
            .is_some_and(|k| k.lits.is_empty() && k.params.is_empty())
        {
            self.kids = None;
        }
    }

    /// The literal child `seg`, made if new.
    fn lit_or_insert(&mut self, seg: &[u8]) -> &mut PathNode<T> {
        self.kids_mut()
            .lits
            .get_or_insert_with(seg, PathNode::default)
    }

    /// The parameter child of class `c`, made if new.
    fn param_or_insert(&mut self, c: ParamClass) -> &mut PathNode<T> {
        let kids = self.kids_mut();
        let i = match kids.params.iter().position(|(k, _)| *k == c) {
            Some(i) => i,
            None => {
                let mut v = std::mem::take(&mut kids.params).into_vec();
                v.reserve_exact(1);
                v.push((c, PathNode::default()));
                kids.params = v.into_boxed_slice();
                kids.params.len() - 1
            }
        };
        &mut kids.params[i].1
    }

    /// Takes every child out, leaving the node without children.
    fn drain_children(&mut self) -> impl Iterator<Item = PathNode<T>> {
        let (lits, params) = match self.kids.take() {
            Some(k) => {
                let Kids { mut lits, params } = *k;
                (lits.drain_values().collect::<Vec<_>>(), params.into_vec())
            }
            None => (Vec::new(), Vec::new()),
        };
        lits.into_iter().chain(params.into_iter().map(|(_, c)| c))
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
                Seg::Lit(l) => node.lit_or_insert(l),
                Seg::Param(c) => node.param_or_insert(*c),
            };
        }
        let (slot, made) = node.slot_or_insert_with(p.open, make);
        if made {
            self.len += 1;
        }
        slot
    }

    pub(crate) fn get_mut(&mut self, p: &PathPattern) -> Option<&mut T> {
        let mut node = &mut self.root;
        for s in p.segs.iter() {
            let kids = node.kids.as_deref_mut()?;
            node = match s {
                Seg::Lit(l) => kids.lits.get_mut(l)?,
                Seg::Param(c) => {
                    let i = kids.params.iter().position(|(k, _)| k == c)?;
                    &mut kids.params[i].1
                }
            };
        }
        node.end_mut(p.open)
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
        let kids = node.kids.as_deref_mut()?;
        let out = match s {
            Seg::Lit(l) => {
                let child = kids.lits.get_mut(l)?;
                let out = Self::remove_in(child, rest, open)?;
                if child.is_empty() {
                    kids.lits.remove(l);
                }
                out
            }
            Seg::Param(c) => {
                let i = kids.params.iter().position(|(k, _)| k == c)?;
                let out = Self::remove_in(&mut kids.params[i].1, rest, open)?;
                if kids.params[i].1.is_empty() {
                    let mut v = std::mem::take(&mut kids.params).into_vec();
                    v.swap_remove(i);
                    kids.params = crate::fitted::fitted(v);
                }
                out
            }
        };
        node.drop_kids_if_none();
        Some(out)
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
        let (seg, after) = match next_slash(rest) {
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
        let Some(kids) = node.kids.as_deref() else {
            return;
        };
        if let Some(child) = kids.lits.get(seg) {
            next(child);
        }
        for (class, child) in kids.params.iter() {
            if class.accepts(seg) {
                next(child);
            }
        }
    }

    /// How many segments the longest pattern has (the depth of a walk).
    pub(crate) fn depth(&self) -> usize {
        let mut deepest = 0;
        let mut stack = vec![(&self.root, 0usize)];
        while let Some((n, d)) = stack.pop() {
            deepest = deepest.max(d);
            stack.extend(n.children().map(|c| (c, d + 1)));
        }
        deepest
    }

    /// Writes the tree in image form into `words` (see `index/image.rs`), each payload as the
    /// number `payload` gives it; returns the root's number. Children are written before their
    /// parent, so a record names nodes already written. Recurses once per level: the caller
    /// bounds [`PathTree::depth`].
    pub(crate) fn write_flat(
        &self,
        payload: &mut dyn FnMut(&T) -> Option<u32>,
        words: &mut Vec<u32>,
        bytes: &mut Vec<u8>,
    ) -> Option<u32> {
        Self::write_node(&self.root, payload, words, bytes)
    }

    fn write_node(
        n: &PathNode<T>,
        payload: &mut dyn FnMut(&T) -> Option<u32>,
        words: &mut Vec<u32>,
        bytes: &mut Vec<u8>,
    ) -> Option<u32> {
        let mut lits: Vec<(Vec<u8>, u32)> = Vec::new();
        for (seg, c) in n.lits().into_iter().flat_map(|l| l.entries()) {
            lits.push((seg.to_vec(), Self::write_node(c, payload, words, bytes)?));
        }
        let mut params = Vec::new();
        for (class, c) in n.params() {
            params.push((
                class.to_words(),
                Self::write_node(c, payload, words, bytes)?,
            ));
        }
        let end = |v: Option<&T>, payload: &mut dyn FnMut(&T) -> Option<u32>| match v {
            Some(v) => payload(v),
            None => Some(u32::MAX),
        };
        let open = end(n.open(), payload)?;
        let exact = end(n.exact(), payload)?;
        let entries: Vec<(&[u8], u32)> = lits.iter().map(|(k, c)| (&k[..], *c)).collect();
        // No literal children: no table (a walk then looks nothing up).
        let table = if entries.is_empty() {
            Vec::new()
        } else {
            crate::image::exact_table::write(&entries, bytes)?
        };
        let at = u32::try_from(words.len()).ok()?;
        words.extend([open, exact, u32::try_from(table.len()).ok()?]);
        words.extend(table);
        words.push(u32::try_from(params.len()).ok()?);
        for (class, c) in params {
            words.extend(class);
            words.push(c);
        }
        Some(at)
    }

    /// Every payload (in no particular order).
    pub(crate) fn for_each<'a>(&'a self, mut visit: impl FnMut(&'a T)) {
        let mut stack = vec![&self.root];
        while let Some(n) = stack.pop() {
            n.exact().into_iter().chain(n.open()).for_each(&mut visit);
            stack.extend(n.children());
        }
    }
}

impl<T> Drop for PathTree<T> {
    /// Drops node by node from a list, so that no payload (a subtree of the index) is dropped
    /// with this tree's depth on the stack.
    fn drop(&mut self) {
        let mut pending: Vec<PathNode<T>> = self.root.drain_children().collect();
        while let Some(mut n) = pending.pop() {
            pending.extend(n.drain_children());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Most nodes of a path-only table are a pattern's last node: an entry of its parent's
    /// map, paid once per route.
    #[test]
    fn a_node_holding_an_index_leaf_is_32_bytes() {
        assert_eq!(
            std::mem::size_of::<PathNode<super::super::tree::Node>>(),
            32
        );
    }

    fn pattern(re: &str) -> PathPattern {
        let hir = regex_syntax::Parser::new().parse(re).unwrap();
        PathPattern::from_regex(&hir).unwrap_or_else(|| panic!("{re}: no pattern"))
    }

    /// Checks the node invariants: no node boxes an empty set of children, and only the
    /// root is empty.
    fn check_nodes(t: &PathTree<u32>) {
        let mut stack = vec![(&t.root, true)];
        while let Some((n, root)) = stack.pop() {
            if let Some(k) = n.kids.as_deref() {
                assert!(
                    !(k.lits.is_empty() && k.params.is_empty()),
                    "empty children boxed"
                );
            }
            assert!(root || !n.is_empty(), "an empty node left in its parent");
            stack.extend(n.children().map(|c| (c, false)));
        }
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
        check_nodes(&t);
        for r in res {
            t.remove(&pattern(r)).unwrap();
            check_nodes(&t);
        }
        assert_eq!(t.len(), 0);
        assert!(t.root.is_empty());
    }

    #[test]
    fn a_node_ends_an_exact_and_an_open_pattern_apart() {
        let (exact, open) = (pattern(r"^/a/b$"), pattern(r"^/a/b/"));
        for exact_first in [true, false] {
            for remove_exact_first in [true, false] {
                let mut t = PathTree::default();
                let order = if exact_first {
                    [&exact, &open]
                } else {
                    [&open, &exact]
                };
                for p in order {
                    *t.get_or_insert_with(p, || 0) = u32::from(p.open) + 1;
                }
                // Asking again finds the payload already there.
                assert_eq!(*t.get_or_insert_with(&exact, || 9), 1);
                assert_eq!(*t.get_or_insert_with(&open, || 9), 2);
                assert_eq!(t.len(), 2);
                // The open pattern ends at the same node: it takes `/a/b` too (a pattern is a
                // necessary condition, the route's own predicate decides).
                assert_eq!(walk(&t, "/a/b"), [1, 2]);
                assert_eq!(walk(&t, "/a/b/c"), [2]);
                let (first, second) = if remove_exact_first {
                    ((&exact, 1), (&open, 2))
                } else {
                    ((&open, 2), (&exact, 1))
                };
                check_nodes(&t);
                assert_eq!(t.remove(first.0), Some(first.1));
                assert_eq!(t.remove(first.0), None);
                check_nodes(&t);
                assert_eq!(t.get_mut(second.0).copied(), Some(second.1));
                assert_eq!(walk(&t, "/a/b"), [second.1]);
                assert_eq!(t.remove(second.0), Some(second.1));
                assert_eq!(t.len(), 0);
                assert!(t.root.is_empty());
            }
        }
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

    proptest::proptest! {
        /// Patterns of shared segments added and removed in any order: every path a present
        /// pattern's regex accepts walks to its payload, removed ones are never found, and no
        /// node is left empty or boxing no children.
        #[test]
        fn churn_keeps_every_pattern_reachable_and_no_node_empty(
            ops in proptest::collection::vec(
                (proptest::collection::vec(0usize..5, 0..4), proptest::bool::ANY), 1..60),
            paths in proptest::collection::vec(
                (proptest::collection::vec(0usize..5, 0..5), proptest::bool::ANY), 1..20),
        ) {
            const SEGS: [&str; 5] = ["a", "b", "c", "([^/]+)", r"(\d+)"];
            const PATH_SEGS: [&str; 5] = ["a", "b", "c", "1", "x"];
            let mut t = PathTree::default();
            let mut present: std::collections::HashMap<String, (u32, regex::Regex)> =
                Default::default();
            for (n, (segs, open)) in ops.iter().enumerate() {
                let body: Vec<&str> = segs.iter().map(|&i| SEGS[i]).collect();
                let re = if *open {
                    format!("^/{}", body.iter().map(|s| format!("{s}/")).collect::<String>())
                } else {
                    format!("^/{}$", body.join("/"))
                };
                let p = pattern(&re);
                if let Some((v, _)) = present.remove(&re) {
                    proptest::prop_assert_eq!(t.remove(&p), Some(v));
                } else {
                    *t.get_or_insert_with(&p, || 0) = n as u32;
                    let compiled = regex::Regex::new(&re).unwrap();
                    present.insert(re, (n as u32, compiled));
                }
                proptest::prop_assert_eq!(t.len(), present.len());
                check_nodes(&t);
            }
            for (segs, slash) in &paths {
                let mut path = format!("/{}", segs.iter().map(|&i| PATH_SEGS[i])
                    .collect::<Vec<_>>().join("/"));
                if *slash && !segs.is_empty() {
                    path.push('/');
                }
                let found = walk(&t, &path);
                for (re, (v, compiled)) in &present {
                    if compiled.is_match(&path) {
                        proptest::prop_assert!(found.contains(v), "{} misses {}", path, re);
                    }
                }
                for v in &found {
                    proptest::prop_assert!(present.values().any(|(p, _)| p == v), "{} found {}", path, v);
                }
            }
        }
    }
}
