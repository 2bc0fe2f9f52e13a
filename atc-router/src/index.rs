//! Indexes that narrow a request down to the routes that can possibly match it.
//!
//! For each route we derive *requirements*: facts that hold for every request the route matches
//! ("some value of `http.host` equals `a.com`", "some value of `http.path` starts with `/api`
//! or `/v1`", "some value of lowercased `tls.sni` ends with `.example.com`"). One requirement per
//! route (the most selective) places it in an index: a hash map for exact values, a byte trie for
//! prefixes, a trie over reversed bytes for suffixes. Routes with no requirement go to the
//! fallback list, which every request visits.
//!
//! Invariant (soundness): a requirement must hold whenever the route's expression is true, so
//! the candidates of a request always include every route that matches it. Requirements are only
//! ever taken from a predicate that is true only when the field has a value with the property
//! (`==`, `^=`, `=^`, and `~` with a regex anchored at the start), from any child of `&&`, and
//! from `||` only when every child yields one on the same field that can be merged. Nothing is
//! taken from inside `!( … )`. Breaking this makes the router miss routes; the property tests
//! compare against the reference evaluator to catch it.
//!
//! Candidates are visited in routing order (see [`Order`]) and the first true one wins, so the
//! result is the linear scan's.

use std::collections::BTreeMap;
use std::sync::Arc;

// Fx hashing: keys are route literals from the configuration, and a request can only look up,
// never insert, so it cannot build the collision chains that SipHash guards against; Fx costs
// a fraction of SipHash on every request.
use rustc_hash::FxHashMap as HashMap;

use uuid::Uuid;

use crate::ast::Op;
use crate::context::Context;
use crate::resolved::{Lit, Node};
use crate::schema::FieldId;
use crate::value::Value;

/// Routing order as one sortable key: ascending `Order` is priority descending, then id bytes
/// descending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Order {
    priority: u64,
    // Two halves rather than a u128: u128's 16-byte alignment would pad every entry.
    id_high: u64,
    id_low: u64,
}

impl Order {
    pub(crate) fn new(priority: u64, id: Uuid) -> Order {
        let (high, low) = id.as_u64_pair();
        Order {
            priority: !priority,
            id_high: !high,
            id_low: !low,
        }
    }

    pub(crate) fn priority(&self) -> u64 {
        !self.priority
    }

    pub(crate) fn id(&self) -> Uuid {
        Uuid::from_u64_pair(!self.id_high, !self.id_low)
    }
}

/// A route in an index: its order and its slot in the router.
pub(crate) type Entry = (Order, u32);

/// What every match of a route needs of one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Requirement {
    pub field: FieldId,
    pub lower: bool,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Some value equals one of these strings (shared with the route's literals).
    Exact(Vec<Arc<str>>),
    /// Some value equals one of these integers.
    ExactInt(Vec<i64>),
    /// Some value starts with one of these byte strings.
    Prefix(Vec<Box<[u8]>>),
    /// Some value ends with one of these byte strings.
    Suffix(Vec<Box<[u8]>>),
}

/// At most this many alternatives in one requirement; more is not worth indexing.
const MAX_KEYS: usize = 64;
/// At most this many requirements considered per node (bounds work on wide expressions).
const MAX_CHOICES: usize = 16;

impl Requirement {
    /// Higher is more selective.
    fn score(&self) -> i64 {
        let (base, n, min_len) = match &self.kind {
            Kind::Exact(k) => (100, k.len(), k.iter().map(|s| s.len()).min()),
            Kind::ExactInt(k) => (90, k.len(), Some(4)),
            Kind::Prefix(k) | Kind::Suffix(k) => (60, k.len(), k.iter().map(|s| s.len()).min()),
        };
        base + min_len.unwrap_or(0).min(32) as i64 - 4 * (n as i64 - 1)
    }

    /// Merges two requirements of `||` children into one that holds when either does.
    fn union(&self, other: &Requirement) -> Option<Requirement> {
        if (self.field, self.lower) != (other.field, other.lower) {
            return None;
        }
        let bytes = |v: &[Arc<str>]| -> Vec<Box<[u8]>> {
            v.iter().map(|s| Box::from(s.as_bytes())).collect()
        };
        let kind = match (&self.kind, &other.kind) {
            (Kind::Exact(a), Kind::Exact(b)) => Kind::Exact(concat(a, b)),
            (Kind::ExactInt(a), Kind::ExactInt(b)) => Kind::ExactInt(concat(a, b)),
            (Kind::Prefix(a), Kind::Prefix(b)) => Kind::Prefix(concat(a, b)),
            (Kind::Suffix(a), Kind::Suffix(b)) => Kind::Suffix(concat(a, b)),
            // An exact value is also a prefix and a suffix of itself.
            (Kind::Exact(a), Kind::Prefix(b)) | (Kind::Prefix(b), Kind::Exact(a)) => {
                Kind::Prefix(concat(&bytes(a), b))
            }
            (Kind::Exact(a), Kind::Suffix(b)) | (Kind::Suffix(b), Kind::Exact(a)) => {
                Kind::Suffix(concat(&bytes(a), b))
            }
            _ => return None,
        };
        let len = match &kind {
            Kind::Exact(k) => k.len(),
            Kind::ExactInt(k) => k.len(),
            Kind::Prefix(k) | Kind::Suffix(k) => k.len(),
        };
        (len <= MAX_KEYS).then_some(Requirement {
            field: self.field,
            lower: self.lower,
            kind,
        })
    }
}

fn concat<T: Clone + PartialEq>(a: &[T], b: &[T]) -> Vec<T> {
    let mut v = a.to_vec();
    for x in b {
        if !v.contains(x) {
            v.push(x.clone());
        }
    }
    v
}

/// The most selective requirement of an expression, if it has one.
pub(crate) fn best_requirement(node: &Node) -> Option<Requirement> {
    requirements(node).into_iter().max_by_key(|r| r.score())
}

/// Requirements that each hold whenever `node` is true.
fn requirements(node: &Node) -> Vec<Requirement> {
    match node {
        Node::Pred(p) => {
            let kind = match (p.op, &p.lit) {
                (Op::Equals, Lit::Str(s)) => Kind::Exact(vec![s.clone()]),
                (Op::Equals, Lit::Int(i)) => Kind::ExactInt(vec![*i]),
                (Op::Prefix, Lit::Str(s)) if !s.is_empty() => {
                    Kind::Prefix(vec![Box::from(s.as_bytes())])
                }
                (Op::Postfix, Lit::Str(s)) if !s.is_empty() => {
                    Kind::Suffix(vec![Box::from(s.as_bytes())])
                }
                (Op::Regex, _) => match p.regex.as_ref().and_then(|r| r.anchored_prefixes()) {
                    Some(prefixes) => Kind::Prefix(prefixes.to_vec()),
                    None => return Vec::new(),
                },
                _ => return Vec::new(),
            };
            vec![Requirement {
                field: p.field,
                lower: p.lower,
                kind,
            }]
        }
        Node::And(children) => {
            let mut all: Vec<Requirement> = children.iter().flat_map(requirements).collect();
            if all.len() > MAX_CHOICES {
                all.sort_by_key(|r| std::cmp::Reverse(r.score()));
                all.truncate(MAX_CHOICES);
            }
            all
        }
        Node::Or(children) => {
            let mut acc = requirements(&children[0]);
            for child in &children[1..] {
                let theirs = requirements(child);
                acc = acc
                    .iter()
                    .flat_map(|a| theirs.iter().filter_map(move |b| a.union(b)))
                    .take(MAX_CHOICES)
                    .collect();
                if acc.is_empty() {
                    break;
                }
            }
            acc
        }
        Node::Not(_) => Vec::new(),
    }
}

/// Routes sorted by [`Order`]. Most buckets hold one route: it is stored in place, so a lookup
/// reads the route's entry from the map's own memory instead of following a pointer to it.
#[derive(Debug, Default)]
enum Bucket {
    #[default]
    Empty,
    One(Entry),
    /// Two or more, sorted.
    Many(Vec<Entry>),
}

impl Bucket {
    fn is_empty(&self) -> bool {
        matches!(self, Bucket::Empty)
    }

    fn insert(&mut self, e: Entry) {
        match self {
            Bucket::Empty => *self = Bucket::One(e),
            Bucket::One(x) if *x == e => {}
            Bucket::One(x) => {
                let (a, b) = if *x < e { (*x, e) } else { (e, *x) };
                *self = Bucket::Many(vec![a, b]);
            }
            Bucket::Many(v) => {
                if let Err(i) = v.binary_search(&e) {
                    v.insert(i, e);
                }
            }
        }
    }

    fn remove(&mut self, e: Entry) {
        match self {
            Bucket::One(x) if *x == e => *self = Bucket::Empty,
            Bucket::Many(v) => {
                if let Ok(i) = v.binary_search(&e) {
                    v.remove(i);
                }
                if let [only] = v[..] {
                    *self = Bucket::One(only);
                }
            }
            _ => {}
        }
    }
}

/// Appends a bucket's entries; most trie nodes on a walk hold none, and skipping them saves the
/// vector's bookkeeping.
#[inline]
fn extend(out: &mut Vec<Entry>, b: &Bucket) {
    match b {
        Bucket::Empty => {}
        Bucket::One(e) => out.push(*e),
        Bucket::Many(v) => out.extend_from_slice(v),
    }
}

/// The key under which an exact value or a dot-suffix is stored: a 64-bit hash of its bytes.
/// Maps keep the hash, not the string, so a lookup touches no memory outside the map. Two
/// strings with the same hash share a bucket, which only adds candidates: every candidate is
/// evaluated against the request, and the route's own predicate compares the real text.
fn key_hash(bytes: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(bytes)
}

/// A hash map from [`key_hash`]es to buckets.
type HashedMap = HashMap<u64, Bucket>;

/// Removes `e` from the bucket under `key`, and the bucket once it is empty.
fn remove_from<K: std::hash::Hash + Eq>(m: &mut HashMap<K, Bucket>, key: K, e: Entry) {
    if let Some(b) = m.get_mut(&key) {
        b.remove(e);
        if b.is_empty() {
            m.remove(&key);
        }
    }
}

/// A path-compressed (radix) trie over bytes whose nodes hold the routes whose literal ends
/// there. Edges carry whole byte strings, so a lookup costs one step per branching point
/// instead of one per byte.
///
/// Invariants: sibling edges start with distinct bytes (children are sorted by that byte);
/// every node but the root holds routes or has at least two children (removal merges a node
/// left with one child into it), so the trie stays as small as its keys.
#[derive(Debug, Default)]
struct Trie {
    nodes: Vec<TrieNode>,
    free: Vec<u32>,
}

#[derive(Debug, Default)]
struct TrieNode {
    /// The bytes on the edge from the parent (empty for the root).
    label: Box<[u8]>,
    /// Children by the first byte of their label.
    children: Vec<(u8, u32)>,
    bucket: Bucket,
}

impl Trie {
    fn new_node(&mut self, node: TrieNode) -> u32 {
        match self.free.pop() {
            Some(f) => {
                self.nodes[f as usize] = node;
                f
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    fn child(&self, n: u32, b: u8) -> Result<usize, usize> {
        self.nodes[n as usize]
            .children
            .binary_search_by_key(&b, |c| c.0)
    }

    fn insert(&mut self, key: &[u8], e: Entry) {
        if self.nodes.is_empty() {
            self.nodes.push(TrieNode::default());
        }
        let mut n = 0u32;
        let mut rest = key;
        while let Some(&b) = rest.first() {
            let i = match self.child(n, b) {
                Ok(i) => i,
                Err(i) => {
                    let leaf = self.new_node(TrieNode {
                        label: rest.into(),
                        ..TrieNode::default()
                    });
                    self.nodes[n as usize].children.insert(i, (b, leaf));
                    n = leaf;
                    break;
                }
            };
            let c = self.nodes[n as usize].children[i].1;
            let label = &self.nodes[c as usize].label;
            let common = label.iter().zip(rest).take_while(|(x, y)| x == y).count();
            if common < label.len() {
                // Split the edge: a new node for the shared part, the old child below it.
                let (shared, tail) = label.split_at(common);
                let (shared, tail): (Box<[u8]>, Box<[u8]>) = (shared.into(), tail.into());
                let tail_first = tail[0];
                self.nodes[c as usize].label = tail;
                let mid = self.new_node(TrieNode {
                    label: shared,
                    children: vec![(tail_first, c)],
                    bucket: Bucket::default(),
                });
                self.nodes[n as usize].children[i].1 = mid;
                n = mid;
            } else {
                n = c;
            }
            rest = &rest[common..];
        }
        self.nodes[n as usize].bucket.insert(e);
    }

    /// Removes the entry, then prunes and merges so the invariants hold again.
    fn remove(&mut self, key: &[u8], e: Entry) {
        if self.nodes.is_empty() {
            return;
        }
        let mut path: Vec<(u32, usize)> = Vec::new(); // (parent, index of the child taken)
        let mut n = 0u32;
        let mut rest = key;
        while let Some(&b) = rest.first() {
            let Ok(i) = self.child(n, b) else { return };
            let c = self.nodes[n as usize].children[i].1;
            let label = &self.nodes[c as usize].label;
            if !rest.starts_with(label) {
                return;
            }
            rest = &rest[label.len()..];
            path.push((n, i));
            n = c;
        }
        self.nodes[n as usize].bucket.remove(e);
        // Walk up: drop empty leaves, merge single-child nodes into their child.
        while let Some((parent, i)) = path.pop() {
            let node = &self.nodes[n as usize];
            if !node.bucket.is_empty() {
                break;
            }
            match node.children.len() {
                0 => {
                    self.nodes[parent as usize].children.remove(i);
                    self.release(n);
                    n = parent;
                }
                1 => {
                    self.merge_into_child(parent, i, n);
                    break;
                }
                _ => break,
            }
        }
    }

    /// Replaces node `n` (child `i` of `parent`) by its only child, prepending `n`'s label.
    fn merge_into_child(&mut self, parent: u32, i: usize, n: u32) {
        let child = self.nodes[n as usize].children[0].1;
        let mut label = std::mem::take(&mut self.nodes[n as usize].label).into_vec();
        label.extend_from_slice(&self.nodes[child as usize].label);
        self.nodes[child as usize].label = label.into();
        self.nodes[parent as usize].children[i].1 = child;
        self.release(n);
    }

    fn release(&mut self, n: u32) {
        self.nodes[n as usize] = TrieNode::default();
        self.free.push(n);
    }

    /// Appends the bucket of every node whose key is a prefix of `key`.
    fn walk(&self, key: &[u8], out: &mut Vec<Entry>) {
        let Some(root) = self.nodes.first() else {
            return;
        };
        extend(out, &root.bucket);
        let mut node = root;
        let mut rest = key;
        while let Some(&b) = rest.first() {
            // Most nodes have a handful of children, where a linear scan of their first bytes
            // beats a binary search; near the root (`/` followed by every letter) there can be
            // dozens, sorted, where it does not.
            let found = if node.children.len() <= 8 {
                node.children.iter().position(|c| c.0 == b)
            } else {
                node.children.binary_search_by_key(&b, |c| c.0).ok()
            };
            let Some(i) = found else {
                return;
            };
            node = &self.nodes[node.children[i].1 as usize];
            // The first byte of the label is `b`, matched just above.
            let label = &node.label[1..];
            match rest.get(1..1 + label.len()) {
                Some(r) if r == label => rest = &rest[1 + label.len()..],
                _ => return,
            }
            extend(out, &node.bucket);
        }
    }

    /// Number of nodes in use.
    fn size(&self) -> usize {
        self.nodes.len() - self.free.len()
    }
}

#[derive(Debug)]
enum Structure {
    Exact(HashedMap),
    ExactInt(HashMap<i64, Bucket>),
    Prefix(Trie),
    Suffix(Trie),
    /// Suffixes that all start with `.` (`.tenant-9.example.com`, the usual wildcard host): a
    /// request value is looked up once per `.` it contains, which for host names is a couple of
    /// hash probes instead of a trie walk through every branching label.
    DotSuffix(HashedMap),
}

/// Which structure holds a requirement.
fn structure_for(kind: &Kind) -> Structure {
    match kind {
        Kind::Exact(_) => Structure::Exact(HashMap::default()),
        Kind::ExactInt(_) => Structure::ExactInt(HashMap::default()),
        Kind::Prefix(_) => Structure::Prefix(Trie::default()),
        Kind::Suffix(keys) if keys.iter().all(|k| k.first() == Some(&b'.')) => {
            Structure::DotSuffix(HashMap::default())
        }
        Kind::Suffix(_) => Structure::Suffix(Trie::default()),
    }
}

/// The index of one (field, lowercased?, kind of requirement).
#[derive(Debug)]
struct FieldIndex {
    field: FieldId,
    lower: bool,
    structure: Structure,
    routes: usize,
}

impl FieldIndex {
    fn matches(&self, r: &Requirement) -> bool {
        self.field == r.field
            && self.lower == r.lower
            && std::mem::discriminant(&self.structure)
                == std::mem::discriminant(&structure_for(&r.kind))
    }
}

/// All indexes of a router, and its fallback list.
#[derive(Debug, Default)]
pub(crate) struct Index {
    fields: Vec<FieldIndex>,
    fallback: BTreeMap<Order, u32>,
}

impl Index {
    pub(crate) fn insert(&mut self, req: Option<&Requirement>, e: Entry) {
        let Some(req) = req else {
            self.fallback.insert(e.0, e.1);
            return;
        };
        let pos = match self.fields.iter().position(|f| f.matches(req)) {
            Some(p) => p,
            None => {
                self.fields.push(FieldIndex {
                    field: req.field,
                    lower: req.lower,
                    structure: structure_for(&req.kind),
                    routes: 0,
                });
                self.fields.len() - 1
            }
        };
        let fi = &mut self.fields[pos];
        fi.routes += 1;
        match (&mut fi.structure, &req.kind) {
            (Structure::Exact(m), Kind::Exact(keys)) => {
                for k in keys {
                    m.entry(key_hash(k.as_bytes())).or_default().insert(e);
                }
            }
            (Structure::ExactInt(m), Kind::ExactInt(keys)) => {
                for k in keys {
                    m.entry(*k).or_default().insert(e);
                }
            }
            (Structure::Prefix(t), Kind::Prefix(keys)) => {
                for k in keys {
                    t.insert(k, e);
                }
            }
            (Structure::Suffix(t), Kind::Suffix(keys)) => {
                for k in keys {
                    let reversed: Vec<u8> = k.iter().rev().copied().collect();
                    t.insert(&reversed, e);
                }
            }
            (Structure::DotSuffix(m), Kind::Suffix(keys)) => {
                for k in keys {
                    m.entry(key_hash(k)).or_default().insert(e);
                }
            }
            _ => unreachable!("FieldIndex::matches checked the kind"),
        }
    }

    pub(crate) fn remove(&mut self, req: Option<&Requirement>, e: Entry) {
        let Some(req) = req else {
            self.fallback.remove(&e.0);
            return;
        };
        let Some(pos) = self.fields.iter().position(|f| f.matches(req)) else {
            return;
        };
        let fi = &mut self.fields[pos];
        match (&mut fi.structure, &req.kind) {
            (Structure::Exact(m), Kind::Exact(keys)) => {
                for k in keys {
                    remove_from(m, key_hash(k.as_bytes()), e);
                }
            }
            (Structure::ExactInt(m), Kind::ExactInt(keys)) => {
                for k in keys {
                    remove_from(m, *k, e);
                }
            }
            (Structure::Prefix(t), Kind::Prefix(keys)) => {
                for k in keys {
                    t.remove(k, e);
                }
            }
            (Structure::Suffix(t), Kind::Suffix(keys)) => {
                for k in keys {
                    let reversed: Vec<u8> = k.iter().rev().copied().collect();
                    t.remove(&reversed, e);
                }
            }
            (Structure::DotSuffix(m), Kind::Suffix(keys)) => {
                for k in keys {
                    remove_from(m, key_hash(k), e);
                }
            }
            _ => unreachable!("FieldIndex::matches checked the kind"),
        }
        fi.routes -= 1;
        if fi.routes == 0 {
            self.fields.swap_remove(pos);
        }
    }

    /// Appends to `out` every indexed route the request may match (unsorted, with repeats).
    /// `lowered` and `reversed` are scratch space, so that lowercasing and reversing values
    /// allocate nothing once they have grown.
    pub(crate) fn candidates(
        &self,
        ctx: &Context,
        lowered: &mut String,
        reversed: &mut Vec<u8>,
        out: &mut Vec<Entry>,
    ) {
        for fi in &self.fields {
            for v in ctx.values_by_id(fi.field) {
                match (&fi.structure, v) {
                    (Structure::Exact(m), Value::String(s)) => {
                        let s = crate::matcher::lowercase_if(fi.lower, s, lowered);
                        if let Some(b) = m.get(&key_hash(s.as_bytes())) {
                            extend(out, b);
                        }
                    }
                    (Structure::ExactInt(m), Value::Int(i)) => {
                        if let Some(b) = m.get(i) {
                            extend(out, b);
                        }
                    }
                    (Structure::Prefix(t), Value::String(s)) => {
                        let s = crate::matcher::lowercase_if(fi.lower, s, lowered);
                        t.walk(s.as_bytes(), out);
                    }
                    (Structure::Suffix(t), Value::String(s)) => {
                        let s = crate::matcher::lowercase_if(fi.lower, s, lowered);
                        reversed.clear();
                        reversed.extend_from_slice(s.as_bytes());
                        reversed.reverse();
                        t.walk(reversed, out);
                    }
                    (Structure::DotSuffix(m), Value::String(s)) => {
                        let s = crate::matcher::lowercase_if(fi.lower, s, lowered);
                        // A plain byte loop: host names are short, and `match_indices`
                        // costs more in setup than it saves in search here.
                        let bytes = s.as_bytes();
                        for (i, _) in bytes.iter().enumerate().filter(|(_, c)| **c == b'.') {
                            if let Some(b) = m.get(&key_hash(&bytes[i..])) {
                                extend(out, b);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// Routes that every request must consider, in routing order.
    pub(crate) fn fallback(&self) -> impl Iterator<Item = Entry> + '_ {
        self.fallback.iter().map(|(o, s)| (*o, *s))
    }

    pub(crate) fn summary(&self) -> String {
        let mut out = String::new();
        for fi in &self.fields {
            let (kind, size) = match &fi.structure {
                Structure::Exact(m) => ("exact", m.len()),
                Structure::ExactInt(m) => ("exact-int", m.len()),
                Structure::Prefix(t) => ("prefix", t.size()),
                Structure::Suffix(t) => ("suffix", t.size()),
                Structure::DotSuffix(m) => ("dot-suffix", m.len()),
            };
            out.push_str(&format!(
                "field #{} lower={} {kind}: {} routes, {size} keys/nodes\n",
                fi.field.0, fi.lower, fi.routes
            ));
        }
        out
    }

    pub(crate) fn fallback_len(&self) -> usize {
        self.fallback.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: u64) -> Entry {
        (Order::new(i, Uuid::from_u128(u128::from(i))), i as u32)
    }

    fn walk(t: &Trie, key: &str) -> Vec<u32> {
        let mut out = Vec::new();
        t.walk(key.as_bytes(), &mut out);
        let mut slots: Vec<u32> = out.into_iter().map(|e| e.1).collect();
        slots.sort();
        slots
    }

    #[test]
    fn trie_finds_every_stored_prefix_and_shrinks_back_when_emptied() {
        let keys = ["/a", "/ab", "/abc", "/b", "/abd", "/a/x", "/", "/abc", "x"];
        let mut t = Trie::default();
        for (i, k) in keys.iter().enumerate() {
            t.insert(k.as_bytes(), entry(i as u64));
        }
        // Every key that is a prefix of the lookup, and nothing else.
        let brute = |lookup: &str| -> Vec<u32> {
            let mut v: Vec<u32> = keys
                .iter()
                .enumerate()
                .filter(|(_, k)| lookup.starts_with(*k))
                .map(|(i, _)| i as u32)
                .collect();
            v.sort();
            v
        };
        for lookup in [
            "/abcd", "/abd", "/a/x/y", "/b", "", "/", "xy", "/ac", "/abz",
        ] {
            assert_eq!(walk(&t, lookup), brute(lookup), "{lookup}");
        }
        for (i, k) in keys.iter().enumerate().rev() {
            t.remove(k.as_bytes(), entry(i as u64));
        }
        assert_eq!(t.size(), 1, "only the root is left");
        assert!(walk(&t, "/abc").is_empty());
    }

    #[test]
    fn trie_merges_nodes_left_with_one_child() {
        let mut t = Trie::default();
        t.insert(b"/api/v1", entry(1));
        t.insert(b"/api/v2", entry(2));
        assert_eq!(t.size(), 4, "root, /api/v, 1, 2");
        t.remove(b"/api/v2", entry(2));
        assert_eq!(t.size(), 2, "root and /api/v1 again");
        assert_eq!(walk(&t, "/api/v1/x"), [1]);
    }

    #[test]
    fn reversed_keys_walk_suffixes() {
        let mut t = Trie::default();
        let rev = |s: &str| s.bytes().rev().collect::<Vec<u8>>();
        t.insert(&rev(".example.com"), entry(1));
        t.insert(&rev(".b.example.com"), entry(2));
        let mut out = Vec::new();
        t.walk(&rev("a.b.example.com"), &mut out);
        assert_eq!(out.len(), 2);
        out.clear();
        t.walk(&rev("example.com"), &mut out);
        assert!(out.is_empty());
    }
}
