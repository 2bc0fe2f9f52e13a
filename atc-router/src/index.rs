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

/// The key under which an exact value or a dot-suffix is stored: a 32-bit hash of its bytes.
/// Tables keep the hash, not the string, so a lookup touches no memory outside the table. Two
/// strings with the same key share a bucket, which only adds candidates: every candidate is
/// evaluated against the request, and the route's own predicate compares the real text. (At
/// 100,000 keys a given lookup meets a foreign key about once in 40,000 requests.)
fn key_hash(bytes: &[u8]) -> u32 {
    use std::hash::BuildHasher;
    let h = rustc_hash::FxBuildHasher.hash_one(bytes);
    // Fx leaves its best bits where hashbrown wants them, not at the top, where the table takes
    // its home position from: mix all 64 bits into the top 32 once more.
    ((h ^ (h >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32
}

/// A hash table from [`key_hash`]es to buckets of routes, laid out so that a lookup reads one
/// cache line: a route's entry lives in the cell itself, next to its key (a general map keeps
/// control bytes and slots in separate arrays, two lines per hit).
///
/// Open addressing with linear probing in Robin Hood order: a key's home cell is given by the
/// top bits of its hash (`tag >> (32 - bits)`), and along the probe sequence cells are ordered by
/// their distance from home, so a lookup stops at the first cell closer to its home than the
/// key would be, or at an empty cell.
///
/// Invariants:
/// - `cells.len()` is 0 or a power of two from 8 to 2^32, and at most 3/4 of the cells are
///   used (so probe runs stay short).
/// - Every key has exactly one cell; no empty cell lies between a key's home and its cell, and
///   distances from home never drop by more than one from a cell to the next (Robin Hood).
///   Removal shifts the following run back by one instead of leaving a tombstone, which keeps
///   both true.
/// - A cell holds one route ([`Cell::One`]) or the index of a sorted list of two or more in
///   `many` ([`Cell::Many`]); a list of one is turned back into a single cell.
#[derive(Debug, Default)]
struct HashedMap {
    cells: Vec<Cell>,
    /// `32 - log2(cells.len())`: a tag's top bits are its home.
    shift: u32,
    used: usize,
    many: Vec<Vec<Entry>>,
    many_free: Vec<u32>,
}

/// 32 bytes, aligned: two cells per cache line, never one across two.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
struct Cell {
    /// The route's order; for a `Many` cell, `order.id_low` is the index in `many`.
    order: Order,
    /// The route's slot, or [`EMPTY`] or [`MANY`].
    slot: u32,
    tag: u32,
}

const EMPTY: u32 = u32::MAX;
const MANY: u32 = u32::MAX - 1;

impl Cell {
    const VACANT: Cell = Cell {
        order: Order {
            priority: 0,
            id_high: 0,
            id_low: 0,
        },
        slot: EMPTY,
        tag: 0,
    };

    fn one(tag: u32, e: Entry) -> Cell {
        debug_assert!(e.1 < MANY, "router slots stay below the markers");
        Cell {
            order: e.0,
            slot: e.1,
            tag,
        }
    }

    fn many(tag: u32, list: u32) -> Cell {
        Cell {
            order: Order {
                priority: 0,
                id_high: 0,
                id_low: u64::from(list),
            },
            slot: MANY,
            tag,
        }
    }
}

impl HashedMap {
    fn len(&self) -> usize {
        self.used
    }

    #[inline]
    fn home(&self, tag: u32) -> usize {
        (tag >> self.shift) as usize
    }

    #[inline]
    fn distance(&self, i: usize, tag: u32) -> usize {
        i.wrapping_sub(self.home(tag)) & (self.cells.len() - 1)
    }

    /// The cell holding `tag`, if any.
    #[inline]
    fn find(&self, tag: u32) -> Option<usize> {
        if self.cells.is_empty() {
            return None;
        }
        let mask = self.cells.len() - 1;
        let mut i = self.home(tag);
        let mut d = 0;
        loop {
            let c = &self.cells[i];
            if c.slot == EMPTY {
                return None;
            }
            if c.tag == tag {
                return Some(i);
            }
            if self.distance(i, c.tag) < d {
                return None;
            }
            i = (i + 1) & mask;
            d += 1;
        }
    }

    /// Appends the routes stored under `tag`.
    #[inline]
    fn get(&self, tag: u32, out: &mut Vec<Entry>) {
        if let Some(i) = self.find(tag) {
            let c = &self.cells[i];
            if c.slot == MANY {
                out.extend_from_slice(&self.many[c.order.id_low as usize]);
            } else {
                out.push((c.order, c.slot));
            }
        }
    }

    fn insert(&mut self, tag: u32, e: Entry) {
        if let Some(i) = self.find(tag) {
            let c = self.cells[i];
            if c.slot == MANY {
                let list = &mut self.many[c.order.id_low as usize];
                if let Err(at) = list.binary_search(&e) {
                    list.insert(at, e);
                }
            } else if (c.order, c.slot) != e {
                let (a, b) = if (c.order, c.slot) < e {
                    ((c.order, c.slot), e)
                } else {
                    (e, (c.order, c.slot))
                };
                let list = match self.many_free.pop() {
                    Some(l) => {
                        self.many[l as usize] = vec![a, b];
                        l
                    }
                    None => {
                        self.many.push(vec![a, b]);
                        (self.many.len() - 1) as u32
                    }
                };
                self.cells[i] = Cell::many(tag, list);
            }
            return;
        }
        if (self.used + 1) * 4 > self.cells.len() * 3 {
            self.grow();
        }
        self.place(Cell::one(tag, e));
        self.used += 1;
    }

    /// Puts a cell for a key not in the table yet, displacing cells nearer their home.
    fn place(&mut self, mut cell: Cell) {
        let mask = self.cells.len() - 1;
        let mut i = self.home(cell.tag);
        let mut d = 0;
        loop {
            let c = self.cells[i];
            if c.slot == EMPTY {
                self.cells[i] = cell;
                return;
            }
            let cd = self.distance(i, c.tag);
            if cd < d {
                self.cells[i] = cell;
                cell = c;
                d = cd;
            }
            i = (i + 1) & mask;
            d += 1;
        }
    }

    fn grow(&mut self) {
        let size = (self.cells.len() * 2).max(8);
        let old = std::mem::replace(&mut self.cells, vec![Cell::VACANT; size]);
        self.shift = 32 - size.trailing_zeros();
        for c in old {
            if c.slot != EMPTY {
                self.place(c);
            }
        }
    }

    fn remove(&mut self, tag: u32, e: Entry) {
        let Some(i) = self.find(tag) else {
            return;
        };
        let c = self.cells[i];
        if c.slot == MANY {
            let l = c.order.id_low as usize;
            let list = &mut self.many[l];
            if let Ok(at) = list.binary_search(&e) {
                list.remove(at);
            }
            if let [only] = list[..] {
                self.many[l] = Vec::new();
                self.many_free.push(l as u32);
                self.cells[i] = Cell::one(tag, only);
            }
            return;
        }
        if (c.order, c.slot) != e {
            return;
        }
        // Shift the rest of the run back by one: each moved cell gets one step closer home.
        let mask = self.cells.len() - 1;
        let mut hole = i;
        loop {
            let next = (hole + 1) & mask;
            let n = self.cells[next];
            if n.slot == EMPTY || self.distance(next, n.tag) == 0 {
                break;
            }
            self.cells[hole] = n;
            hole = next;
        }
        self.cells[hole] = Cell::VACANT;
        self.used -= 1;
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

/// One cache-line-aligned node: a walk reads the label and the routes of every node it passes,
/// and they share the first line (`repr(C)` keeps that order); the children of a node with few
/// of them fill the second line. At 100,000 routes a walk through nodes no request visited
/// lately costs those two adjacent lines per node, not also a separately allocated label and
/// child list.
#[derive(Debug, Default)]
#[repr(C, align(64))]
struct TrieNode {
    /// The bytes on the edge from the parent (empty for the root).
    label: Label,
    bucket: Bucket,
    /// Children by the first byte of their label.
    children: Children,
}

/// Most children a node keeps in place: 11 fill the second line, and cover a decimal digit
/// (ids in paths branch ten ways, level after level).
const INLINE_CHILDREN: usize = 11;

/// A node's children, sorted by the first byte of their label: in place when there are few
/// (most nodes), else on the heap. Invariant: `Inline` while there are at most
/// `INLINE_CHILDREN`, `Heap` once a node has had more (it does not move back: a node that
/// branched widely tends to again).
#[derive(Debug, Clone)]
enum Children {
    Inline {
        len: u8,
        bytes: [u8; INLINE_CHILDREN],
        nodes: [u32; INLINE_CHILDREN],
    },
    Heap(Vec<(u8, u32)>),
}

impl Default for Children {
    fn default() -> Children {
        Children::Inline {
            len: 0,
            bytes: [0; INLINE_CHILDREN],
            nodes: [0; INLINE_CHILDREN],
        }
    }
}

impl Children {
    fn one(b: u8, node: u32) -> Children {
        let mut c = Children::default();
        c.insert(0, b, node);
        c
    }

    fn len(&self) -> usize {
        match self {
            Children::Inline { len, .. } => usize::from(*len),
            Children::Heap(v) => v.len(),
        }
    }

    /// The node of child `i`.
    fn node(&self, i: usize) -> u32 {
        match self {
            Children::Inline { nodes, .. } => nodes[i],
            Children::Heap(v) => v[i].1,
        }
    }

    fn set_node(&mut self, i: usize, n: u32) {
        match self {
            Children::Inline { nodes, .. } => nodes[i] = n,
            Children::Heap(v) => v[i].1 = n,
        }
    }

    /// Where the child whose label starts with `b` is, or where it would go.
    fn search(&self, b: u8) -> Result<usize, usize> {
        match self {
            Children::Inline { len, bytes, .. } => bytes[..usize::from(*len)].binary_search(&b),
            Children::Heap(v) => v.binary_search_by_key(&b, |c| c.0),
        }
    }

    /// The node of the child whose label starts with `b`: the request path's lookup.
    #[inline]
    fn find(&self, b: u8) -> Option<u32> {
        match self {
            // A few bytes in one line: a scan beats a binary search's branches.
            Children::Inline { len, bytes, nodes } => bytes[..usize::from(*len)]
                .iter()
                .position(|&x| x == b)
                .map(|i| nodes[i]),
            Children::Heap(v) => v.binary_search_by_key(&b, |c| c.0).ok().map(|i| v[i].1),
        }
    }

    fn insert(&mut self, i: usize, b: u8, n: u32) {
        match self {
            Children::Inline { len, bytes, nodes } if usize::from(*len) < INLINE_CHILDREN => {
                let l = usize::from(*len);
                bytes.copy_within(i..l, i + 1);
                nodes.copy_within(i..l, i + 1);
                bytes[i] = b;
                nodes[i] = n;
                *len += 1;
            }
            Children::Inline { bytes, nodes, .. } => {
                let mut v: Vec<(u8, u32)> =
                    bytes.iter().copied().zip(nodes.iter().copied()).collect();
                v.insert(i, (b, n));
                *self = Children::Heap(v);
            }
            Children::Heap(v) => v.insert(i, (b, n)),
        }
    }

    fn remove(&mut self, i: usize) {
        match self {
            Children::Inline { len, bytes, nodes } => {
                let l = usize::from(*len);
                bytes.copy_within(i + 1..l, i);
                nodes.copy_within(i + 1..l, i);
                *len -= 1;
            }
            Children::Heap(v) => {
                v.remove(i);
            }
        }
    }
}

/// Longest label stored in its node; chosen so that label and bucket fill one cache line.
const INLINE_LABEL: usize = 22;

/// A trie edge's bytes: in place when short (most are), else on the heap.
#[derive(Debug, Clone)]
enum Label {
    Inline { len: u8, bytes: [u8; INLINE_LABEL] },
    Heap(Box<[u8]>),
}

impl Default for Label {
    fn default() -> Label {
        Label::from(&[][..])
    }
}

impl From<&[u8]> for Label {
    fn from(s: &[u8]) -> Label {
        if s.len() <= INLINE_LABEL {
            let mut bytes = [0; INLINE_LABEL];
            bytes[..s.len()].copy_from_slice(s);
            Label::Inline {
                len: s.len() as u8,
                bytes,
            }
        } else {
            Label::Heap(s.into())
        }
    }
}

impl std::ops::Deref for Label {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Label::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Label::Heap(b) => b,
        }
    }
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
        self.nodes[n as usize].children.search(b)
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
                    self.nodes[n as usize].children.insert(i, b, leaf);
                    n = leaf;
                    break;
                }
            };
            let c = self.nodes[n as usize].children.node(i);
            let label = &self.nodes[c as usize].label;
            let common = label.iter().zip(rest).take_while(|(x, y)| x == y).count();
            if common < label.len() {
                // Split the edge: a new node for the shared part, the old child below it.
                let (shared, tail) = label.split_at(common);
                let (shared, tail) = (Label::from(shared), Label::from(tail));
                let tail_first = tail[0];
                self.nodes[c as usize].label = tail;
                let mid = self.new_node(TrieNode {
                    label: shared,
                    children: Children::one(tail_first, c),
                    bucket: Bucket::default(),
                });
                self.nodes[n as usize].children.set_node(i, mid);
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
            let c = self.nodes[n as usize].children.node(i);
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
        let child = self.nodes[n as usize].children.node(0);
        let mut label = self.nodes[n as usize].label.to_vec();
        label.extend_from_slice(&self.nodes[child as usize].label);
        self.nodes[child as usize].label = Label::from(&label[..]);
        self.nodes[parent as usize].children.set_node(i, child);
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
            let Some(child) = node.children.find(b) else {
                return;
            };
            node = &self.nodes[child as usize];
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
        Kind::Exact(_) => Structure::Exact(HashedMap::default()),
        Kind::ExactInt(_) => Structure::ExactInt(HashMap::default()),
        Kind::Prefix(_) => Structure::Prefix(Trie::default()),
        Kind::Suffix(keys) if keys.iter().all(|k| k.first() == Some(&b'.')) => {
            Structure::DotSuffix(HashedMap::default())
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
                    m.insert(key_hash(k.as_bytes()), e);
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
                    m.insert(key_hash(k), e);
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
                    m.remove(key_hash(k.as_bytes()), e);
                }
            }
            (Structure::ExactInt(m), Kind::ExactInt(keys)) => {
                for k in keys {
                    if let Some(b) = m.get_mut(k) {
                        b.remove(e);
                        if b.is_empty() {
                            m.remove(k);
                        }
                    }
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
                    m.remove(key_hash(k), e);
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
                        m.get(key_hash(s.as_bytes()), out);
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
                            m.get(key_hash(&bytes[i..]), out);
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
                fi.field.to_raw(),
                fi.lower,
                fi.routes
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
    fn a_walk_reads_one_line_per_node() {
        assert_eq!(
            std::mem::size_of::<Label>() + std::mem::size_of::<Bucket>(),
            64
        );
        assert_eq!(std::mem::offset_of!(TrieNode, children), 64);
        assert_eq!(
            std::mem::size_of::<TrieNode>(),
            128,
            "children fill the second line"
        );
        let long = [b'x'; 40];
        for key in [&b""[..], b"/a", &long[..INLINE_LABEL], &long[..]] {
            assert_eq!(&*Label::from(key), key);
        }
    }

    #[test]
    fn a_node_with_many_children_keeps_them_sorted_past_the_inline_ones() {
        let keys: Vec<String> = (0..20u8)
            .rev()
            .map(|i| format!("/{}x", (b'a' + i) as char))
            .collect();
        let mut t = Trie::default();
        for (i, k) in keys.iter().enumerate() {
            t.insert(k.as_bytes(), entry(i as u64));
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(walk(&t, &format!("{k}/more")), [i as u32], "{k}");
        }
        assert!(walk(&t, "/zx").is_empty());
        for (i, k) in keys.iter().enumerate() {
            t.remove(k.as_bytes(), entry(i as u64));
            if let Some(rest) = keys.get(i + 1) {
                assert_eq!(walk(&t, rest), [i as u32 + 1]);
            }
        }
        assert_eq!(t.size(), 1, "only the root is left");
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

    /// Checks the table's invariants and returns its contents.
    fn contents(m: &HashedMap) -> std::collections::BTreeMap<u32, Vec<Entry>> {
        let mut out = std::collections::BTreeMap::new();
        let n = m.cells.len();
        for (i, c) in m.cells.iter().enumerate() {
            if c.slot == EMPTY {
                continue;
            }
            // Every cell from the key's home to its own is occupied.
            let d = m.distance(i, c.tag);
            for back in 1..=d {
                assert_ne!(m.cells[(i + n - back) % n].slot, EMPTY, "gap before {i}");
            }
            // Robin Hood order: homes never decrease along a run.
            let next = &m.cells[(i + 1) % n];
            if next.slot != EMPTY {
                assert!(m.distance((i + 1) % n, next.tag) <= d + 1, "order at {i}");
            }
            let mut v = Vec::new();
            m.get(c.tag, &mut v);
            assert!(out.insert(c.tag, v).is_none(), "one cell per key");
        }
        assert_eq!(out.len(), m.len());
        assert!(m.len() * 4 <= n * 3);
        out
    }

    #[test]
    fn hashed_map_agrees_with_a_plain_map_through_inserts_and_removals() {
        // Few distinct tags with shared top bits: long runs, wraparound, shared buckets.
        let mut seed = 7u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut m = HashedMap::default();
        let mut model: std::collections::BTreeMap<u32, Vec<Entry>> = Default::default();
        for step in 0..20_000 {
            let r = next();
            let tag = match r % 3 {
                0 => (r >> 8) as u32 % 64,
                1 => u32::MAX - (r >> 8) as u32 % 64,
                _ => (r >> 8) as u32,
            };
            let e = entry((r >> 40) % 4);
            if (r >> 20) % 5 < 3 {
                m.insert(tag, e);
                let v = model.entry(tag).or_default();
                if let Err(i) = v.binary_search(&e) {
                    v.insert(i, e);
                }
            } else {
                m.remove(tag, e);
                if let Some(v) = model.get_mut(&tag) {
                    v.retain(|x| *x != e);
                    if v.is_empty() {
                        model.remove(&tag);
                    }
                }
            }
            if step % 97 == 0 {
                assert_eq!(contents(&m), model, "step {step}");
            }
            let probe = (next() >> 8) as u32 % 64;
            let mut got = Vec::new();
            m.get(probe, &mut got);
            assert_eq!(
                &got,
                model.get(&probe).unwrap_or(&Vec::new()),
                "step {step}"
            );
        }
        assert_eq!(contents(&m), model);
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
