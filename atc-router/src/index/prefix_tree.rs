//! A radix tree over byte strings: what a prefix index stores its keys in (and a suffix index,
//! over reversed bytes). A walk with a request value visits the payload of every stored key that
//! is a prefix of the value, shortest first.
//!
//! Invariants: every node but the root has a non-empty label, and the labels of a node's
//! children start with distinct bytes (kept sorted by that byte); a node other than the root
//! with no payload has at least two children (removal merges or prunes what it leaves behind),
//! so a walk reads at most one node per distinct stored prefix of the value.

use super::small_key::SmallKey;

#[derive(Debug)]
pub(crate) struct PrefixTree<T> {
    root: TreeNode<T>,
    len: usize,
}

#[derive(Debug)]
struct TreeNode<T> {
    label: SmallKey,
    value: Option<T>,
    /// The first byte of each child's label, in the children's (ascending) order: searched
    /// without touching the children themselves.
    firsts: Vec<u8>,
    children: Vec<TreeNode<T>>,
}

impl<T> Default for PrefixTree<T> {
    fn default() -> Self {
        PrefixTree {
            root: TreeNode::new(SmallKey::new(b""), None),
            len: 0,
        }
    }
}

impl<T> TreeNode<T> {
    fn new(label: SmallKey, value: Option<T>) -> Self {
        TreeNode {
            label,
            value,
            firsts: Vec::new(),
            children: Vec::new(),
        }
    }

    #[inline]
    fn child(&self, b: u8) -> Result<usize, usize> {
        self.firsts.binary_search(&b)
    }

    fn insert_child(&mut self, at: usize, c: TreeNode<T>) {
        self.firsts.insert(at, c.label[0]);
        self.children.insert(at, c);
    }

    fn remove_child(&mut self, at: usize) -> TreeNode<T> {
        self.firsts.remove(at);
        self.children.remove(at)
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
                    node.insert_child(at, TreeNode::new(SmallKey::new(rest), Some(make())));
                    return node.children[at].value.as_mut().expect("just set");
                }
                Ok(i) => {
                    let shared = common_prefix(&node.children[i].label, rest);
                    if shared < node.children[i].label.len() {
                        // Split the child's label: a new node for the shared part, holding
                        // the old child under the rest of its label.
                        let old = &mut node.children[i];
                        let tail = SmallKey::new(&old.label[shared..]);
                        let head = SmallKey::new(&old.label[..shared]);
                        let mut moved = std::mem::replace(old, TreeNode::new(head, None));
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
                    only.label = SmallKey::new(&label);
                    *child = only;
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
            let Ok(i) = node.child(b) else { return };
            let child = &node.children[i];
            if !rest.starts_with(&child.label) {
                return;
            }
            rest = &rest[child.label.len()..];
            node = child;
        }
    }

    /// Every payload with its key.
    pub(crate) fn for_each(&self, mut visit: impl FnMut(&[u8], &T)) {
        fn go<T>(n: &TreeNode<T>, key: &mut Vec<u8>, visit: &mut impl FnMut(&[u8], &T)) {
            key.extend_from_slice(&n.label);
            if let Some(v) = &n.value {
                visit(key, v);
            }
            for c in &n.children {
                go(c, key, visit);
            }
            key.truncate(key.len() - n.label.len());
        }
        go(&self.root, &mut Vec::new(), &mut visit);
    }

    /// The same tree with every payload mapped.
    pub(crate) fn map<U>(self, mut f: impl FnMut(T) -> U) -> PrefixTree<U> {
        fn go<T, U>(n: TreeNode<T>, f: &mut impl FnMut(T) -> U) -> TreeNode<U> {
            TreeNode {
                label: n.label,
                value: n.value.map(&mut *f),
                firsts: n.firsts,
                children: n.children.into_iter().map(|c| go(c, f)).collect(),
            }
        }
        PrefixTree {
            root: go(self.root, &mut f),
            len: self.len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(t: &PrefixTree<u32>, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        t.walk(text.as_bytes(), |v| out.push(*v));
        out
    }

    #[test]
    fn a_walk_visits_every_stored_prefix_shortest_first() {
        let keys = ["/a", "/ab", "/abc", "/b", "/abd", "/a/x", "/", "x", ""];
        let mut t = PrefixTree::default();
        for (i, k) in keys.iter().enumerate() {
            *t.get_or_insert_with(k.as_bytes(), || 0) = i as u32;
        }
        assert_eq!(t.len(), keys.len());
        for text in [
            "/abcd", "/abd", "/a/x/y", "/b", "", "/", "xy", "/ac", "/abz",
        ] {
            let want: Vec<u32> = {
                let mut v: Vec<(usize, u32)> = keys
                    .iter()
                    .enumerate()
                    .filter(|(_, k)| text.starts_with(*k))
                    .map(|(i, k)| (k.len(), i as u32))
                    .collect();
                v.sort();
                v.into_iter().map(|(_, i)| i).collect()
            };
            assert_eq!(walk(&t, text), want, "{text}");
        }
    }

    #[test]
    fn removal_merges_nodes_back_and_empties_the_tree() {
        let mut t = PrefixTree::default();
        for (i, k) in ["/api/v1", "/api/v2", "/api", "/b"].iter().enumerate() {
            *t.get_or_insert_with(k.as_bytes(), || 0) = i as u32;
        }
        assert_eq!(t.remove(b"/api/v2"), Some(1));
        assert_eq!(t.remove(b"/api/v2"), None);
        assert_eq!(walk(&t, "/api/v1/x"), [2, 0]);
        assert_eq!(t.remove(b"/api"), Some(2));
        assert_eq!(walk(&t, "/api/v1/x"), [0]);
        assert_eq!(*t.get_mut(b"/api/v1").unwrap(), 0);
        assert!(t.get_mut(b"/api").is_none());
        t.remove(b"/api/v1");
        t.remove(b"/b");
        assert_eq!(t.len(), 0);
        assert!(
            t.root.children.is_empty() && t.root.value.is_none(),
            "only the root is left"
        );
    }

    #[test]
    fn agrees_with_a_list_through_random_inserts_and_removals() {
        let mut seed = 11u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let alphabet = b"/ab";
        let mut t: PrefixTree<u64> = PrefixTree::default();
        let mut model: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
        for step in 0..5000 {
            let r = next();
            let key: Vec<u8> = (0..(r % 6))
                .map(|i| alphabet[((r >> (8 + 2 * i)) % 3) as usize])
                .collect();
            if (r >> 40) % 3 < 2 {
                *t.get_or_insert_with(&key, || 0) = step;
                model.insert(key, step);
            } else {
                assert_eq!(t.remove(&key), model.remove(&key));
            }
            let text: Vec<u8> = (0..8)
                .map(|i| alphabet[((r >> (20 + 2 * i)) % 3) as usize])
                .collect();
            let mut got = Vec::new();
            t.walk(&text, |v| got.push(*v));
            let want: Vec<u64> = model
                .iter()
                .filter(|(k, _)| text.starts_with(k))
                .map(|(_, v)| *v)
                .collect();
            assert_eq!(got, want, "step {step}");
            assert_eq!(t.len(), model.len());
        }
    }
}
