//! The tree that indexes payloads by [`PathPattern`] (see `compile/path_pattern.rs`). A
//! request's path is split at `/` once and walks the tree: literal segments by lookup,
//! parameter edges by their class. So thousands of routes behind one host cost one walk, not
//! one regex each.
//!
//! Invariants of the tree: a pattern's payload sits at the node its segments lead to, in the
//! node's `exact` slot (the path has exactly these segments) or its `open` slot (the path
//! starts with these segments; anything may follow). A walk visits every payload whose pattern
//! accepts the path. Literal children are sorted by segment; parameter children have distinct
//! classes.

use super::exact_map::ExactMap;
use crate::compile::path_pattern::{next_slash, ParamClass, PathPattern, Seg};

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
                            crate::fitted::room_for_one(&mut node.params);
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
        if let Some(child) = node.lits.get(seg) {
            next(child);
        }
        for (class, child) in &node.params {
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
            stack.extend(n.lits.values().map(|c| (c, d + 1)));
            stack.extend(n.params.iter().map(|(_, c)| (c, d + 1)));
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
        for (seg, c) in n.lits.entries() {
            lits.push((seg.to_vec(), Self::write_node(c, payload, words, bytes)?));
        }
        let mut params = Vec::new();
        for (class, c) in &n.params {
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
