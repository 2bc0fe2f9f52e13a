//! A radix tree over byte strings: what a prefix index stores its keys in (and a suffix index,
//! over reversed bytes). A walk with a request value visits the payload of every stored key that
//! is a prefix of the value, shortest first.
//!
//! Invariants: every node but the root has a non-empty label, and the labels of a node's
//! children start with distinct bytes (kept sorted by that byte); a node other than the root
//! with no payload has at least two children (removal merges or prunes what it leaves behind),
//! so a walk reads at most one node per distinct stored prefix of the value.
//!
//! Depth: a tree is as deep as its keys are long at worst (`a`, `aa`, `aaa`, …; the index
//! bounds them, see `requirement::MAX_AFFIX_BYTES`). Walks, visits and drops go down in loops,
//! never by recursion, so that payloads (which hold subtrees of the index) are never reached
//! with the tree's depth already on the stack; only removal recurses, once per node on the key's
//! way.

use super::exact_map::ExactMap;
use super::small_key::SmallKey;
use crate::compile::path_pattern::next_slash;

#[derive(Debug)]
pub(crate) struct PrefixTree<T> {
    root: TreeNode<T>,
    len: usize,
}

#[derive(Debug)]
struct TreeNode<T> {
    label: Short,
    value: Option<T>,
    /// The first byte of each child's label, in the children's (ascending) order: searched
    /// without touching the children themselves. Kept in place up to 14 children (most
    /// nodes), so finding the child costs no read beyond the node.
    firsts: Short,
    /// Sized exactly (a node is 8 bytes smaller than with a `Vec`'s capacity, and most nodes
    /// are leaves): a child inserted or removed reallocates, as the node's `firsts` does.
    children: Box<[Line<TreeNode<T>>]>,
}

/// A child node on a cache line of its own: a node whose payload is an index node (16 bytes)
/// is 64 bytes (`a_node_is_one_cache_line`), so a level of a walk reads one line, where at the
/// allocator's 16-byte alignment three nodes in four would straddle two.
/// (Only children are aligned: the root sits in its tree, which sits in the index's splits,
/// and aligning it would pad every split.)
#[derive(Debug)]
#[repr(align(64))]
struct Line<N>(N);

impl<N> std::ops::Deref for Line<N> {
    type Target = N;

    #[inline]
    fn deref(&self) -> &N {
        &self.0
    }
}

impl<N> std::ops::DerefMut for Line<N> {
    #[inline]
    fn deref_mut(&mut self) -> &mut N {
        &mut self.0
    }
}

/// A node's label, and its children's first bytes: in place up to 14 bytes, behind one pointer
/// beyond that. 16 bytes, where a [`SmallKey`] takes 24, so that a node (label, payload, first
/// bytes, children) is 64: one cache line in its parent's children (see [`Line`]). Most labels
/// are short (a path's segment, a host's label); a longer one costs a read beside its node.
#[derive(Debug)]
enum Short {
    Inline { len: u8, bytes: [u8; SHORT_INLINE] },
    Heap(Box<Box<[u8]>>),
}

const SHORT_INLINE: usize = 14;

impl Short {
    fn new(b: &[u8]) -> Short {
        if b.len() <= SHORT_INLINE {
            let mut bytes = [0; SHORT_INLINE];
            bytes[..b.len()].copy_from_slice(b);
            Short::Inline {
                len: b.len() as u8,
                bytes,
            }
        } else {
            Short::Heap(Box::new(b.into()))
        }
    }
}

impl std::ops::Deref for Short {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Short::Inline { len, bytes } => &bytes[..*len as usize],
            Short::Heap(b) => b,
        }
    }
}

impl<T> Default for PrefixTree<T> {
    fn default() -> Self {
        PrefixTree {
            root: TreeNode::new(Short::new(b""), None),
            len: 0,
        }
    }
}

impl<T> TreeNode<T> {
    fn new(label: Short, value: Option<T>) -> Self {
        TreeNode {
            label,
            value,
            firsts: Short::new(b""),
            children: Box::default(),
        }
    }

    #[inline]
    fn child(&self, b: u8) -> Result<usize, usize> {
        self.firsts.binary_search(&b)
    }

    /// [`TreeNode::child`] for a walk, which needs no insertion point: most nodes have a few
    /// children, found by a plain scan in fewer steps than a search's chain of unpredictable
    /// branches; a node with many is scanned with vector instructions.
    #[inline]
    fn find_child(&self, b: u8) -> Option<usize> {
        match self.firsts.len() {
            0..=16 => self.firsts.iter().position(|&x| x == b),
            _ => memchr::memchr(b, &self.firsts),
        }
    }

    fn insert_child(&mut self, at: usize, c: TreeNode<T>) {
        let mut firsts = self.firsts.to_vec();
        firsts.insert(at, c.label[0]);
        self.firsts = Short::new(&firsts);
        let mut children = std::mem::take(&mut self.children).into_vec();
        children.reserve_exact(1);
        children.insert(at, Line(c));
        self.children = children.into_boxed_slice();
    }

    fn remove_child(&mut self, at: usize) -> TreeNode<T> {
        let mut firsts = self.firsts.to_vec();
        firsts.remove(at);
        self.firsts = Short::new(&firsts);
        let mut children = std::mem::take(&mut self.children).into_vec();
        let out = children.remove(at).0;
        self.children = crate::fitted::fitted(children);
        out
    }
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl<T> PrefixTree<T> {
    /// Number of stored keys.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The payload of `key`, inserted with `make` if the key is new.
    pub(crate) fn get_or_insert_with(&mut self, key: &[u8], make: impl FnOnce() -> T) -> &mut T {
        let mut node = &mut self.root;
        let mut rest = key;
        loop {
            if rest.is_empty() {
                if node.value.is_none() {
                    self.len += 1;
                    node.value = Some(make());
                }
                return node.value.as_mut().expect("just set");
            }
            match node.child(rest[0]) {
                Err(at) => {
                    self.len += 1;
                    node.insert_child(at, TreeNode::new(Short::new(rest), Some(make())));
                    return node.children[at].value.as_mut().expect("just set");
                }
                Ok(i) => {
                    let shared = common_prefix(&node.children[i].label, rest);
                    if shared < node.children[i].label.len() {
                        // Split the child's label: a new node for the shared part, holding
                        // the old child under the rest of its label.
                        let old = &mut node.children[i];
                        let tail = Short::new(&old.label[shared..]);
                        let head = Short::new(&old.label[..shared]);
                        let mut moved = std::mem::replace(&mut old.0, TreeNode::new(head, None));
                        moved.label = tail;
                        old.insert_child(0, moved);
                    }
                    node = &mut node.children[i];
                    rest = &rest[shared..];
                }
            }
        }
    }

    /// The payload of `key`, if stored.
    pub(crate) fn get_mut(&mut self, key: &[u8]) -> Option<&mut T> {
        let mut node = &mut self.root;
        let mut rest = key;
        while !rest.is_empty() {
            let i = node.child(rest[0]).ok()?;
            let label_len = node.children[i].label.len();
            if !rest.starts_with(&node.children[i].label) {
                return None;
            }
            node = &mut node.children[i];
            rest = &rest[label_len..];
        }
        node.value.as_mut()
    }

    /// Takes `key` out, returning its payload; nodes left without a purpose are merged away.
    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<T> {
        let out = Self::remove_in(&mut self.root, key);
        if out.is_some() {
            self.len -= 1;
        }
        out
    }

    fn remove_in(node: &mut TreeNode<T>, rest: &[u8]) -> Option<T> {
        if rest.is_empty() {
            return node.value.take();
        }
        let i = node.child(rest[0]).ok()?;
        let child = &mut node.children[i];
        if !rest.starts_with(&child.label) {
            return None;
        }
        let label_len = child.label.len();
        let out = Self::remove_in(child, &rest[label_len..])?;
        if child.value.is_none() {
            match child.children.len() {
                0 => {
                    node.remove_child(i);
                }
                1 => {
                    // Merge the child into its only child (same first byte: `firsts` holds).
                    let mut only = child.remove_child(0);
                    let mut label = child.label.to_vec();
                    label.extend_from_slice(&only.label);
                    only.label = Short::new(&label);
                    **child = only;
                }
                _ => {}
            }
        }
        Some(out)
    }

    /// Visits the payload of every stored key that is a prefix of `text`, shortest first.
    #[inline]
    pub(crate) fn walk<'a>(&'a self, text: &[u8], mut visit: impl FnMut(&'a T)) {
        let mut node = &self.root;
        let mut rest = text;
        loop {
            if let Some(v) = &node.value {
                visit(v);
            }
            let Some(&b) = rest.first() else { return };
            let Some(i) = node.find_child(b) else { return };
            let child = &node.children[i];
            if !rest.starts_with(&child.label) {
                return;
            }
            rest = &rest[child.label.len()..];
            node = child;
        }
    }

    /// Every payload with its key (in no particular order).
    pub(crate) fn for_each<'a>(&'a self, mut visit: impl FnMut(&[u8], &'a T)) {
        // Each entry: a node and the length of its key (the labels on the way to it).
        let mut stack: Vec<(&'a TreeNode<T>, usize)> = vec![(&self.root, 0)];
        let mut key: Vec<u8> = Vec::new();
        while let Some((n, depth)) = stack.pop() {
            key.truncate(depth);
            key.extend_from_slice(&n.label);
            if let Some(v) = &n.value {
                visit(&key, v);
            }
            let len = key.len();
            stack.extend(n.children.iter().rev().map(|c| (&c.0, len)));
        }
    }
}

impl<T> Drop for PrefixTree<T> {
    /// Drops node by node from a list, so that no payload is dropped with the tree's depth on
    /// the stack (see the module docs).
    fn drop(&mut self) {
        let mut pending = std::mem::take(&mut self.root.children).into_vec();
        while let Some(mut n) = pending.pop() {
            pending.extend(std::mem::take(&mut n.children));
        }
    }
}

/// A prefix index of path-like keys: keys are cut after each `/` into complete segments
/// (`/`, `catalog/`) and a tail without `/` (`items`); a walk follows the request's own
/// segments by one hash probe each and, at every node it reaches, tries the tails stored there
/// (one kept alone, more in a small radix tree: [`Tails`]). So a table of 100,000 prefixes costs a probe per segment of the
/// request instead of a node per byte run of one large tree.
///
/// Invariants: a key whose complete segments are `s1 … sk` and tail `t` is stored in the tails
/// of the node reached by `s1 … sk` from the root, under `t`. A key is a prefix of a value
/// exactly when the value starts with the key's complete segments and continues with its tail
/// (a tail has no `/`), so a walk visits exactly the stored prefixes of the value. No node but
/// the root is empty (removal prunes).
#[derive(Debug)]
pub(crate) struct SegmentedPrefixTree<T> {
    root: SegNode<T>,
    len: usize,
}

#[derive(Debug)]
struct SegNode<T> {
    tails: Tails<T>,
    next: ExactMap<SegNode<T>>,
}

impl<T> Default for SegNode<T> {
    fn default() -> Self {
        SegNode {
            tails: Tails::Empty,
            next: ExactMap::default(),
        }
    }
}

/// The tails stored at a segment node. Most nodes lead on and hold none; of those that hold
/// any, most hold one (a prefix that ends in this node's segment, or one route's last word),
/// kept with its key in one small box rather than in a radix tree of one node (72 bytes
/// against 120).
///
/// Invariant: `Many` holds at least two tails.
#[derive(Debug)]
enum Tails<T> {
    Empty,
    One(Box<(SmallKey, T)>),
    Many(Box<PrefixTree<T>>),
}

impl<T> Tails<T> {
    fn is_empty(&self) -> bool {
        matches!(self, Tails::Empty)
    }

    #[inline]
    fn walk<'a>(&'a self, text: &[u8], visit: &mut impl FnMut(&'a T)) {
        match self {
            Tails::Empty => {}
            Tails::One(one) => {
                if text.starts_with(&one.0) {
                    visit(&one.1);
                }
            }
            Tails::Many(tree) => tree.walk(text, visit),
        }
    }

    fn get_mut(&mut self, key: &[u8]) -> Option<&mut T> {
        match self {
            Tails::Empty => None,
            Tails::One(one) => (*one.0 == *key).then_some(&mut one.1),
            Tails::Many(tree) => tree.get_mut(key),
        }
    }

    fn get_or_insert_with(&mut self, key: &[u8], make: impl FnOnce() -> T) -> &mut T {
        match std::mem::replace(self, Tails::Empty) {
            Tails::Empty => *self = Tails::One(Box::new((SmallKey::new(key), make()))),
            Tails::One(one) if *one.0 == *key => *self = Tails::One(one),
            Tails::One(one) => {
                let (old_key, old) = *one;
                let mut tree = Box::<PrefixTree<T>>::default();
                tree.get_or_insert_with(&old_key, || old);
                tree.get_or_insert_with(key, make);
                *self = Tails::Many(tree);
            }
            Tails::Many(mut tree) => {
                tree.get_or_insert_with(key, make);
                *self = Tails::Many(tree);
            }
        }
        self.get_mut(key).expect("just stored")
    }

    fn remove(&mut self, key: &[u8]) -> Option<T> {
        match std::mem::replace(self, Tails::Empty) {
            Tails::Empty => None,
            Tails::One(one) if *one.0 == *key => Some(one.1),
            Tails::One(one) => {
                *self = Tails::One(one);
                None
            }
            Tails::Many(mut tree) => {
                let out = tree.remove(key);
                if tree.len() == 1 {
                    // Back to one tail (changes that add and remove a second keep no tree).
                    let mut last = Vec::new();
                    tree.for_each(|k, _| last = k.to_vec());
                    let value = tree.remove(&last).expect("the tree's one key");
                    *self = Tails::One(Box::new((SmallKey::new(&last), value)));
                } else {
                    *self = Tails::Many(tree);
                }
                out
            }
        }
    }

    fn for_each<'a>(&'a self, mut visit: impl FnMut(&[u8], &'a T)) {
        match self {
            Tails::Empty => {}
            Tails::One(one) => visit(&one.0, &one.1),
            Tails::Many(tree) => tree.for_each(visit),
        }
    }
}

impl<T> Default for SegmentedPrefixTree<T> {
    fn default() -> Self {
        SegmentedPrefixTree {
            root: SegNode::default(),
            len: 0,
        }
    }
}

/// The first complete segment of `b` (up to and including its first `/`) and the rest.
#[inline]
fn segment(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = next_slash(b)? + 1;
    Some((&b[..end], &b[end..]))
}

impl<T> SegNode<T> {
    fn is_empty(&self) -> bool {
        self.tails.is_empty() && self.next.is_empty()
    }

    fn remove(&mut self, key: &[u8]) -> Option<T> {
        match segment(key) {
            None => self.tails.remove(key),
            Some((seg, rest)) => {
                let child = self.next.get_mut(seg)?;
                let out = child.remove(rest);
                if child.is_empty() {
                    self.next.remove(seg);
                }
                out
            }
        }
    }
}

impl<T> Drop for SegmentedPrefixTree<T> {
    /// As [`PrefixTree`]'s drop: node by node from a list.
    fn drop(&mut self) {
        let mut pending: Vec<SegNode<T>> = self.root.next.drain_values().collect();
        while let Some(mut n) = pending.pop() {
            pending.extend(n.next.drain_values());
        }
    }
}

impl<T> SegmentedPrefixTree<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn get_or_insert_with(&mut self, key: &[u8], make: impl FnOnce() -> T) -> &mut T {
        if self.get_mut(key).is_none() {
            self.len += 1;
        }
        let mut node = &mut self.root;
        let mut tail = key;
        while let Some((seg, rest)) = segment(tail) {
            node = node.next.get_or_insert_with(seg, SegNode::default);
            tail = rest;
        }
        node.tails.get_or_insert_with(tail, make)
    }

    pub(crate) fn get_mut(&mut self, mut key: &[u8]) -> Option<&mut T> {
        let mut node = &mut self.root;
        while let Some((seg, rest)) = segment(key) {
            node = node.next.get_mut(seg)?;
            key = rest;
        }
        node.tails.get_mut(key)
    }

    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<T> {
        let out = self.root.remove(key);
        if out.is_some() {
            self.len -= 1;
        }
        out
    }

    /// Visits the payload of every stored key that is a prefix of `text`.
    #[inline]
    pub(crate) fn walk<'a>(&'a self, text: &[u8], mut visit: impl FnMut(&'a T)) {
        let mut node = &self.root;
        let mut text = text;
        loop {
            node.tails.walk(text, &mut visit);
            let Some((seg, rest)) = segment(text) else {
                return;
            };
            let Some(child) = node.next.get(seg) else {
                return;
            };
            node = child;
            text = rest;
        }
    }

    /// Every stored key with its payload (in no particular order).
    // The image writer's (index/image_write.rs), which only diagnostics builds call so far.
    pub(crate) fn for_each_key<'a>(&'a self, mut visit: impl FnMut(&[u8], &'a T)) {
        // Each entry: a node and the length of the segments on the way to it.
        let mut stack: Vec<(&'a SegNode<T>, &'a [u8], usize)> = vec![(&self.root, b"", 0)];
        let mut key: Vec<u8> = Vec::new();
        while let Some((n, seg, depth)) = stack.pop() {
            key.truncate(depth);
            key.extend_from_slice(seg);
            let len = key.len();
            n.tails.for_each(|tail, v| {
                key.truncate(len);
                key.extend_from_slice(tail);
                visit(&key, v);
            });
            stack.extend(n.next.entries().map(|(s, c)| (c, s, len)));
        }
    }

    /// Every payload (in no particular order).
    pub(crate) fn for_each(&self, mut visit: impl FnMut(&T)) {
        let mut stack = vec![&self.root];
        while let Some(n) = stack.pop() {
            n.tails.for_each(|_, v| visit(v));
            stack.extend(n.next.values());
        }
    }
}

#[cfg(test)]
mod tests;
