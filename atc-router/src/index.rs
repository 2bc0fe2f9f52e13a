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

use std::collections::{BTreeMap, HashMap};

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
    id: u128,
}

impl Order {
    pub(crate) fn new(priority: u64, id: Uuid) -> Order {
        Order {
            priority: !priority,
            id: !id.as_u128(),
        }
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
    /// Some value equals one of these strings.
    Exact(Vec<Box<str>>),
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
        let bytes = |v: &[Box<str>]| -> Vec<Box<[u8]>> {
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
                (Op::Equals, Lit::Str(s)) => Kind::Exact(vec![Box::from(&**s)]),
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

/// Routes sorted by [`Order`].
#[derive(Debug, Default)]
struct Bucket(Vec<Entry>);

impl Bucket {
    fn insert(&mut self, e: Entry) {
        if let Err(i) = self.0.binary_search(&e) {
            self.0.insert(i, e);
        }
    }

    fn remove(&mut self, e: Entry) {
        if let Ok(i) = self.0.binary_search(&e) {
            self.0.remove(i);
        }
    }
}

/// A byte trie whose nodes hold the routes whose literal ends there.
#[derive(Debug, Default)]
struct Trie {
    nodes: Vec<TrieNode>,
    free: Vec<u32>,
}

#[derive(Debug, Default)]
struct TrieNode {
    /// Sorted by byte.
    children: Vec<(u8, u32)>,
    bucket: Bucket,
}

impl Trie {
    fn root(&mut self) -> u32 {
        if self.nodes.is_empty() {
            self.nodes.push(TrieNode::default());
        }
        0
    }

    fn insert(&mut self, key: impl Iterator<Item = u8>, e: Entry) {
        let mut n = self.root();
        for b in key {
            let children = &self.nodes[n as usize].children;
            n = match children.binary_search_by_key(&b, |c| c.0) {
                Ok(i) => children[i].1,
                Err(i) => {
                    let new = match self.free.pop() {
                        Some(f) => f,
                        None => {
                            self.nodes.push(TrieNode::default());
                            (self.nodes.len() - 1) as u32
                        }
                    };
                    self.nodes[n as usize].children.insert(i, (b, new));
                    new
                }
            };
        }
        self.nodes[n as usize].bucket.insert(e);
    }

    /// Removes the entry and prunes nodes left with neither routes nor children.
    fn remove(&mut self, key: impl Iterator<Item = u8>, e: Entry) {
        if self.nodes.is_empty() {
            return;
        }
        let mut path: Vec<(u32, u8)> = Vec::new();
        let mut n = 0u32;
        for b in key {
            let children = &self.nodes[n as usize].children;
            match children.binary_search_by_key(&b, |c| c.0) {
                Ok(i) => {
                    path.push((n, b));
                    n = children[i].1;
                }
                Err(_) => return,
            }
        }
        self.nodes[n as usize].bucket.remove(e);
        while let Some((parent, b)) = path.pop() {
            let node = &self.nodes[n as usize];
            if !node.bucket.0.is_empty() || !node.children.is_empty() {
                break;
            }
            let siblings = &mut self.nodes[parent as usize].children;
            if let Ok(i) = siblings.binary_search_by_key(&b, |c| c.0) {
                siblings.remove(i);
            }
            self.nodes[n as usize] = TrieNode::default();
            self.free.push(n);
            n = parent;
        }
    }

    /// Calls `f` with the bucket of every node along `key` (every stored literal that is a
    /// prefix of `key`).
    fn walk(&self, key: impl Iterator<Item = u8>, out: &mut Vec<Entry>) {
        let Some(mut node) = self.nodes.first() else {
            return;
        };
        out.extend_from_slice(&node.bucket.0);
        for b in key {
            match node.children.binary_search_by_key(&b, |c| c.0) {
                Ok(i) => node = &self.nodes[node.children[i].1 as usize],
                Err(_) => return,
            }
            out.extend_from_slice(&node.bucket.0);
        }
    }
}

#[derive(Debug)]
enum Structure {
    Exact(HashMap<Box<str>, Bucket>),
    ExactInt(HashMap<i64, Bucket>),
    Prefix(Trie),
    Suffix(Trie),
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
            && matches!(
                (&self.structure, &r.kind),
                (Structure::Exact(_), Kind::Exact(_))
                    | (Structure::ExactInt(_), Kind::ExactInt(_))
                    | (Structure::Prefix(_), Kind::Prefix(_))
                    | (Structure::Suffix(_), Kind::Suffix(_))
            )
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
                    structure: match req.kind {
                        Kind::Exact(_) => Structure::Exact(HashMap::new()),
                        Kind::ExactInt(_) => Structure::ExactInt(HashMap::new()),
                        Kind::Prefix(_) => Structure::Prefix(Trie::default()),
                        Kind::Suffix(_) => Structure::Suffix(Trie::default()),
                    },
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
                    m.entry(k.clone()).or_default().insert(e);
                }
            }
            (Structure::ExactInt(m), Kind::ExactInt(keys)) => {
                for k in keys {
                    m.entry(*k).or_default().insert(e);
                }
            }
            (Structure::Prefix(t), Kind::Prefix(keys)) => {
                for k in keys {
                    t.insert(k.iter().copied(), e);
                }
            }
            (Structure::Suffix(t), Kind::Suffix(keys)) => {
                for k in keys {
                    t.insert(k.iter().rev().copied(), e);
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
                    if let Some(b) = m.get_mut(k) {
                        b.remove(e);
                        if b.0.is_empty() {
                            m.remove(k);
                        }
                    }
                }
            }
            (Structure::ExactInt(m), Kind::ExactInt(keys)) => {
                for k in keys {
                    if let Some(b) = m.get_mut(k) {
                        b.remove(e);
                        if b.0.is_empty() {
                            m.remove(k);
                        }
                    }
                }
            }
            (Structure::Prefix(t), Kind::Prefix(keys)) => {
                for k in keys {
                    t.remove(k.iter().copied(), e);
                }
            }
            (Structure::Suffix(t), Kind::Suffix(keys)) => {
                for k in keys {
                    t.remove(k.iter().rev().copied(), e);
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
    /// `lowered` is scratch space for lowercasing values without allocating.
    pub(crate) fn candidates(&self, ctx: &Context, lowered: &mut String, out: &mut Vec<Entry>) {
        for fi in &self.fields {
            for v in ctx.values_by_id(fi.field) {
                match (&fi.structure, v) {
                    (Structure::Exact(m), Value::String(s)) => {
                        let s = crate::matcher::lowercase_if(fi.lower, s, lowered);
                        if let Some(b) = m.get(s) {
                            out.extend_from_slice(&b.0);
                        }
                    }
                    (Structure::ExactInt(m), Value::Int(i)) => {
                        if let Some(b) = m.get(i) {
                            out.extend_from_slice(&b.0);
                        }
                    }
                    (Structure::Prefix(t), Value::String(s)) => {
                        let s = crate::matcher::lowercase_if(fi.lower, s, lowered);
                        t.walk(s.bytes(), out);
                    }
                    (Structure::Suffix(t), Value::String(s)) => {
                        let s = crate::matcher::lowercase_if(fi.lower, s, lowered);
                        t.walk(s.bytes().rev(), out);
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

    pub(crate) fn fallback_len(&self) -> usize {
        self.fallback.len()
    }
}
