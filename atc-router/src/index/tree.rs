//! The index's decision tree: routes are split by the key that leaves a request the fewest of
//! them, chosen from the routes themselves, and a part that is still too large is split again
//! by its own best key. So a table of one host is split by path, a path shared by several
//! methods by method, a shared port by path; a low-cardinality field becomes a key only where
//! it is what tells routes apart.
//!
//! Invariants (a reader must not break them):
//! - **Every route is reachable by every request that can match it.** A route sits in a leaf
//!   under each split it passes: under the split's key(s) from its requirement of the split's
//!   [`Disc`], or under the split's `rest` when it has no such requirement. A request visits, at
//!   each split, the children of the keys its values satisfy and always `rest`.
//! - **Leaves are small when they can be.** A leaf of more than [`LEAF_MAX`] routes is split
//!   when some key would leave a request fewer routes than the leaf holds ([`choose`]); one that
//!   no key improves is tried again once it has grown by half ([`retry_size`]). A split whose
//!   subtree shrinks to [`LEAF_MAX`] / 2 routes becomes a leaf again.
//! - **Changes are local.** An add or a remove follows the route's own path down the tree and
//!   changes what it meets there: a leaf split or a split collapsed costs the routes of that
//!   node, never the table.
//! - A split's `routes` counts the distinct routes in its subtree (a route under two keys counts
//!   once there, once in each child).
//! - **The tree is at most [`MAX_DEPTH`] levels deep**, whatever the table: every walk over it
//!   (build, add, remove, lookup, drop) recurses once per level, so its stack is bounded. A
//!   table that would need more levels (no real one comes near) keeps larger leaves there.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rustc_hash::FxHashMap;

use crate::schema::FieldId;
use crate::schema::FieldMask;

use super::choose::{choose, fields_of, place, requirement, Choice};
use super::keyed::Keyed;
use super::requirement::{Disc, Key, Requirement};
use super::{Entry, Order};
use crate::threads::{Helpers, StartHook};

/// Most routes a leaf holds when a key could tell them apart.
pub(crate) const LEAF_MAX: usize = 1;

/// Deepest level a split is made at. The families of the benchmark workload need at most five;
/// a node at this depth stays a leaf, however large.
pub(crate) const MAX_DEPTH: usize = 24;

/// Where the tree gets the requirements of routes it already holds (when a leaf is split), and
/// their routing order (a leaf holds only slots).
pub(crate) trait Requirements {
    fn of(&self, slot: u32) -> Vec<Requirement>;
    fn order(&self, slot: u32) -> Order;
}

#[derive(Debug)]
pub(crate) enum Node {
    Leaf(Leaf),
    Split(Box<Split>),
    /// Routes set apart by which field they need a value of ([`Choice::Fields`]).
    Fields(Box<FieldSplit>),
}

impl Default for Node {
    fn default() -> Node {
        Node::Leaf(Leaf::default())
    }
}

#[derive(Debug, Default)]
pub(crate) struct Leaf {
    pub(super) entries: Entries,
}

impl Leaf {
    fn new(sorted: Vec<Entry>, retry_at: u32) -> Leaf {
        Leaf {
            entries: Entries::from_sorted(
                sorted.into_iter().map(|(_, slot)| slot).collect(),
                retry_at,
            ),
        }
    }

    /// An unsplittable leaf is tried again at this size (0: at the next insert).
    fn retry_at(&self) -> u32 {
        match &self.entries {
            Entries::Many(m) => m.retry_at,
            _ => 0,
        }
    }

    fn set_retry_at(&mut self, r: u32) {
        if let Entries::Many(m) = &mut self.entries {
            m.retry_at = r;
        }
    }
}

/// A leaf's routes by slot, sorted by routing order (each route's [`Order`] is the router's,
/// read through [`Requirements::order`] when a leaf changes). Most leaves hold one: it is kept
/// in place, so a lookup reads it from the leaf itself rather than following a pointer to a
/// list.
///
/// A leaf holds slots, not orders: a leaf is a node of its parent's structure (an entry of a
/// map, a radix node's payload), so the word saved is saved per node of the table, and the
/// order a request's candidates are sorted by is read from the program's record, which
/// evaluating a candidate reads anyway.
///
/// Only a leaf of several routes keeps a retry size: a leaf of one is split (if at all) at the
/// next insert, which is the size [`retry_size`] gives a leaf of one, and a leaf that shrinks
/// to one has fallen below half of any retry size. So a leaf is a slot and a tag, 16 bytes
/// with its node's tag.
#[derive(Debug, Default)]
pub(super) enum Entries {
    #[default]
    Empty,
    One(u32),
    Many(Box<Many>),
}

#[derive(Debug)]
pub(super) struct Many {
    list: Vec<u32>,
    retry_at: u32,
}

impl Entries {
    fn from_sorted(v: Vec<u32>, retry_at: u32) -> Entries {
        match v[..] {
            [] => Entries::Empty,
            [one] => Entries::One(one),
            _ => Entries::Many(Box::new(Many { list: v, retry_at })),
        }
    }

    #[inline]
    pub(super) fn as_slice(&self) -> &[u32] {
        match self {
            Entries::Empty => &[],
            Entries::One(e) => std::slice::from_ref(e),
            Entries::Many(m) => &m.list,
        }
    }

    fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Adds route `e` in routing order (once: a route met again, under a second key that
    /// leads to the same leaf, is there already).
    fn insert(&mut self, e: Entry, all: &dyn Requirements) {
        let (order, slot) = e;
        let (mut v, retry_at) = match std::mem::take(self) {
            Entries::Empty => {
                *self = Entries::One(slot);
                return;
            }
            Entries::One(x) => (vec![x], 0),
            Entries::Many(m) => (m.list, m.retry_at),
        };
        if let Err(i) = v.binary_search_by(|&s| all.order(s).cmp(&order)) {
            crate::fitted::room_for_one(&mut v);
            v.insert(i, slot);
        }
        *self = Entries::from_sorted(v, retry_at);
    }

    /// Whether `slot` was there.
    fn remove(&mut self, slot: u32) -> bool {
        match self {
            Entries::One(x) if *x == slot => {
                *self = Entries::Empty;
                true
            }
            Entries::Many(m) => match m.list.iter().position(|&s| s == slot) {
                Some(i) => {
                    m.list.remove(i);
                    let (v, r) = (std::mem::take(&mut m.list), m.retry_at);
                    *self = Entries::from_sorted(v, r);
                    true
                }
                None => false,
            },
            _ => false,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Split {
    pub(super) disc: Disc,
    pub(super) keyed: Keyed<Node>,
    pub(super) rest: Node,
    routes: u32,
    /// `routes` when the split was chosen: it is chosen again (the subtree rebuilt) once the
    /// subtree has grown [`REKEY_GROWTH`] times, up to [`REKEY_MAX`] routes.
    built_at: u32,
}

/// A split by field: each route sits under one field it needs a value of (see
/// [`super::choose::place`]); a request visits the children of the fields it has values for,
/// and always `rest` (the routes without requirements).
#[derive(Debug)]
pub(crate) struct FieldSplit {
    pub(super) children: FxHashMap<FieldId, Node>,
    pub(super) rest: Node,
    /// As [`Split::routes`] and [`Split::built_at`].
    routes: u32,
    built_at: u32,
}

/// Subtrees of up to this many routes are rebuilt each time they grow [`REKEY_GROWTH`] times,
/// so that a split made when a leaf first overflowed (chosen from two routes) is chosen again
/// from many; past it, a split keeps its key (its parts are still re-keyed as they grow), which
/// bounds what one add can cost. A rebuild costs about 17,000 instructions a route (choosing
/// the key is most of it), so the add that makes one stalls its caller: under half a
/// millisecond at this size, against 7-9 ms for the add at 1,023 routes with a limit of 2,048.
/// Keys chosen from at most 127 routes leave requests as many candidates as keys chosen from up
/// to 2,047 on every workload family at 10k and 100k routes, and fewer on header-only at 10k
/// (at most one instead of two; `atc-bench candidates`, `atc-bench operators`).
pub(crate) const REKEY_MAX: u32 = 128;

/// How much a subtree grows before its split is chosen again. Each rebuild reads the
/// requirements of every route below it again, so a route added one at a time is read about
/// `g / (g - 1)` times per level: 1.3 times with 4, twice with 2; and keys chosen from a quarter
/// of the routes proved as good as from half on every workload family (candidates per request
/// at 10k and 100k, `atc-bench candidates`).
const REKEY_GROWTH: u32 = 4;

/// What the tree reports to its owner: which fields splits look up (the key fields of
/// two-phase matching), and how deep it is (the scratch buffers a lookup needs).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Per bit of [`FieldMask`]: the splits by a field of that bit, and the children of field
    /// splits under one. Counted, so that a split gone costs a decrement, not a rescan.
    per_bit: Vec<u32>,
    /// The bits whose count is not zero.
    pub(crate) key_mask: FieldMask,
    pub(crate) max_depth: usize,
}

impl Stats {
    fn key_added(&mut self, field: FieldId) {
        let bit = field.bit();
        let i = bit.trailing_zeros() as usize;
        if self.per_bit.len() <= i {
            self.per_bit.resize(i + 1, 0);
        }
        self.per_bit[i] += 1;
        self.key_mask |= bit;
    }

    fn key_gone(&mut self, field: FieldId) {
        let bit = field.bit();
        if let Some(n) = self.per_bit.get_mut(bit.trailing_zeros() as usize) {
            *n -= 1;
            if *n == 0 {
                self.key_mask &= !bit;
            }
        }
    }

    fn level_used(&mut self, depth: usize) {
        self.max_depth = self.max_depth.max(depth + 1);
    }

    /// Adds the counts of a subtree built apart (on another thread).
    fn merge(&mut self, other: Stats) {
        if self.per_bit.len() < other.per_bit.len() {
            self.per_bit.resize(other.per_bit.len(), 0);
        }
        for (n, m) in self.per_bit.iter_mut().zip(other.per_bit) {
            *n += m;
        }
        self.key_mask |= other.key_mask;
        self.max_depth = self.max_depth.max(other.max_depth);
    }
}

impl Node {
    pub(crate) fn is_empty(&self) -> bool {
        self.routes() == 0
    }

    /// A leaf's slots (in routing order, distinct), or `None` for a split.
    #[inline]
    pub(crate) fn leaf_entries(&self) -> Option<&[u32]> {
        match self {
            Node::Leaf(l) => Some(l.entries.as_slice()),
            _ => None,
        }
    }

    /// The distinct routes below this node.
    fn routes(&self) -> usize {
        match self {
            Node::Leaf(l) => l.entries.len(),
            Node::Split(s) => s.routes as usize,
            Node::Fields(s) => s.routes as usize,
        }
    }

    /// Whether a split made from `built_at` routes, now holding `routes`, is to be chosen
    /// again before a route is added (see [`REKEY_GROWTH`]).
    fn due_for_rekey(routes: u32, built_at: u32) -> bool {
        routes < REKEY_MAX && routes + 1 >= REKEY_GROWTH * built_at
    }

    /// Adds route `e`, whose requirements are `reqs`, below this node, which sits at `at`.
    pub(crate) fn insert(
        &mut self,
        at: Level,
        e: Entry,
        reqs: &[Requirement],
        all: &dyn Requirements,
        st: &mut Stats,
    ) {
        match self {
            Node::Leaf(l) => {
                l.entries.insert(e, all);
                let n = l.entries.len();
                if n > at.leaf_max() && n >= l.retry_at() as usize && at.depth < MAX_DEPTH {
                    let table = with_requirements(l.entries.as_slice(), all);
                    match build(&table, (0..n as u32).collect(), at, st, None) {
                        Node::Leaf(built) => l.set_retry_at(built.retry_at()),
                        node => *self = node,
                    }
                }
            }
            Node::Split(s) if Node::due_for_rekey(s.routes, s.built_at) => {
                self.rebuild_with(at, e, all, st)
            }
            Node::Fields(s) if Node::due_for_rekey(s.routes, s.built_at) => {
                self.rebuild_with(at, e, all, st)
            }
            Node::Split(s) => {
                s.routes += 1;
                match requirement(reqs, &s.disc) {
                    Some(r) => {
                        for k in r.keys.iter() {
                            s.keyed
                                .entry(k, Node::default)
                                .insert(at.keyed(), e, reqs, all, st);
                        }
                        s.keyed.seal();
                    }
                    None => s.rest.insert(at.rest(), e, reqs, all, st),
                }
            }
            Node::Fields(s) => {
                s.routes += 1;
                // Under a field that has a child already if the route needs one (the fewest
                // routes first), else under a new child of its first field.
                let existing = place(reqs, |f| {
                    s.children.get(&f).map_or(usize::MAX, Node::routes)
                });
                let field = match existing {
                    Some(f) if s.children.contains_key(&f) => Some(f),
                    _ => place(reqs, |_| 0),
                };
                match field {
                    Some(f) => s
                        .children
                        .entry(f)
                        .or_insert_with(|| {
                            st.key_added(f);
                            Node::default()
                        })
                        .insert(at.keyed(), e, reqs, all, st),
                    None => s.rest.insert(at.rest(), e, reqs, all, st),
                }
            }
        }
    }

    /// Chooses this subtree's split again from all its routes and `e` (see [`REKEY_GROWTH`]).
    fn rebuild_with(&mut self, at: Level, e: Entry, all: &dyn Requirements, st: &mut Stats) {
        let mut slots = Vec::with_capacity(self.routes() + 1);
        self.copy_entries(&mut slots);
        slots.push(e.1);
        slots.sort_unstable();
        slots.dedup();
        self.forget_splits(st);
        let table = with_requirements(&slots, all);
        *self = build(&table, (0..table.len() as u32).collect(), at, st, None);
    }

    /// Takes the route in `slot` out; returns whether it was there.
    pub(crate) fn remove(
        &mut self,
        slot: u32,
        reqs: &[Requirement],
        all: &dyn Requirements,
        st: &mut Stats,
    ) -> bool {
        let found = match self {
            Node::Leaf(l) => {
                let found = l.entries.remove(slot);
                if l.entries.len() * 2 < l.retry_at() as usize {
                    l.set_retry_at(0);
                }
                return found;
            }
            Node::Split(s) => {
                let found = match requirement(reqs, &s.disc) {
                    Some(r) => {
                        let mut found = false;
                        for k in r.keys.iter() {
                            found |= remove_under(&mut s.keyed, k, slot, reqs, all, st);
                        }
                        found
                    }
                    None => s.rest.remove(slot, reqs, all, st),
                };
                if found {
                    s.routes -= 1;
                }
                found
            }
            Node::Fields(s) => {
                // The route sits under one of its fields (which one depended on the children
                // when it was added): ask each.
                let mut fields = Vec::new();
                fields_of(reqs, &mut fields);
                let mut found = false;
                for f in fields {
                    let Some(child) = s.children.get_mut(&f) else {
                        continue;
                    };
                    found = child.remove(slot, reqs, all, st);
                    if child.is_empty() {
                        s.children.remove(&f);
                        st.key_gone(f);
                    }
                    if found {
                        break;
                    }
                }
                if !found && reqs.is_empty() {
                    found = s.rest.remove(slot, reqs, all, st);
                }
                if found {
                    s.routes -= 1;
                }
                found
            }
        };
        self.shrink(all, st);
        found
    }

    /// After a removal: a split whose keys are all gone stands only in front of its rest, and
    /// a split of [`LEAF_MAX`] / 2 routes or fewer becomes a leaf.
    fn shrink(&mut self, all: &dyn Requirements, st: &mut Stats) {
        let (no_keys, routes) = match self {
            Node::Leaf(_) => return,
            Node::Split(s) => (s.keyed.len() == 0, s.routes),
            Node::Fields(s) => (s.children.is_empty(), s.routes),
        };
        if no_keys {
            let rest = match self {
                Node::Split(s) => {
                    st.key_gone(s.disc.field);
                    std::mem::take(&mut s.rest)
                }
                Node::Fields(s) => std::mem::take(&mut s.rest),
                Node::Leaf(_) => unreachable!("returned above"),
            };
            *self = rest;
        } else if routes as usize <= LEAF_MAX / 2 {
            let mut slots = Vec::with_capacity(2 * routes as usize);
            self.copy_entries(&mut slots);
            self.forget_splits(st);
            slots.sort_unstable();
            slots.dedup();
            let mut entries: Vec<Entry> = slots.iter().map(|&s| (all.order(s), s)).collect();
            entries.sort_unstable();
            *self = Node::Leaf(Leaf::new(entries, 0));
        }
    }

    /// Copies the slot of every route below this node into `out` (with repeats).
    fn copy_entries(&self, out: &mut Vec<u32>) {
        match self {
            Node::Leaf(l) => out.extend_from_slice(l.entries.as_slice()),
            Node::Split(s) => {
                s.keyed.for_each(|c| c.copy_entries(out));
                s.rest.copy_entries(out);
            }
            Node::Fields(s) => {
                s.children.values().for_each(|c| c.copy_entries(out));
                s.rest.copy_entries(out);
            }
        }
    }

    /// Reports every split below this node gone (before the subtree is dropped).
    fn forget_splits(&self, st: &mut Stats) {
        match self {
            Node::Leaf(_) => {}
            Node::Split(s) => {
                st.key_gone(s.disc.field);
                s.keyed.for_each(|c| c.forget_splits(st));
                s.rest.forget_splits(st);
            }
            Node::Fields(s) => {
                for (f, c) in &s.children {
                    st.key_gone(*f);
                    c.forget_splits(st);
                }
                s.rest.forget_splits(st);
            }
        }
    }

    /// Visits every node, with its depth (for diagnostics).
    #[cfg(feature = "diagnostics")]
    pub(crate) fn visit(&self, depth: usize, f: &mut dyn FnMut(&Node, usize)) {
        f(self, depth);
        match self {
            Node::Leaf(_) => {}
            Node::Split(s) => {
                s.keyed.for_each(|c| c.visit(depth + 1, f));
                s.rest.visit(depth + 1, f);
            }
            Node::Fields(s) => {
                s.children.values().for_each(|c| c.visit(depth + 1, f));
                s.rest.visit(depth + 1, f);
            }
        }
    }

    /// What this node is, for diagnostics: a leaf's size, or a split's key and width.
    #[cfg(feature = "diagnostics")]
    pub(crate) fn describe(&self) -> NodeInfo {
        match self {
            Node::Leaf(l) => NodeInfo::Leaf(l.entries.len()),
            Node::Split(s) => NodeInfo::Split {
                disc: s.disc.to_string(),
                keys: s.keyed.len(),
            },
            Node::Fields(s) => NodeInfo::Split {
                disc: "fields".to_owned(),
                keys: s.children.len(),
            },
        }
    }
}

/// Takes the route in `slot` out of the child under `k`, dropping the child if that empties
/// it; whether the route was there.
fn remove_under(
    keyed: &mut Keyed<Node>,
    k: Key<'_>,
    slot: u32,
    reqs: &[Requirement],
    all: &dyn Requirements,
    st: &mut Stats,
) -> bool {
    let Some(child) = keyed.get_mut(k) else {
        return false;
    };
    let found = child.remove(slot, reqs, all, st);
    if child.is_empty() {
        keyed.remove(k);
        keyed.seal();
    }
    found
}

/// See [`Node::describe`].
#[cfg(feature = "diagnostics")]
#[derive(Debug)]
pub(crate) enum NodeInfo {
    Leaf(usize),
    Split { disc: String, keys: usize },
}

/// Where a node sits: its depth, and whether the way to it from the root passed a key (went
/// down a keyed edge or a field split's child rather than only `rest` edges).
///
/// A node no key has filtered yet holds routes that every request reaching it meets, whatever
/// its values; there, a split that only sets apart the routes of one key (a request that does
/// not have the key skips them, one that has it meets as many as before) is worth making, down
/// to a single route. Below a key, a split must leave every request fewer routes, and leaves of
/// [`LEAF_MAX`] routes stay leaves. Either way every part is smaller than the node, so building
/// ends; and no node is split below [`MAX_DEPTH`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Level {
    depth: usize,
    filtered: bool,
}

impl Level {
    pub(crate) const ROOT: Level = Level {
        depth: 0,
        filtered: false,
    };

    fn keyed(self) -> Level {
        Level {
            depth: self.depth + 1,
            filtered: true,
        }
    }

    fn rest(self) -> Level {
        Level {
            depth: self.depth + 1,
            ..self
        }
    }

    fn leaf_max(self) -> usize {
        if self.filtered {
            LEAF_MAX
        } else {
            0
        }
    }
}

/// The size at which a leaf no key improved is tried again: half as large again (at least one
/// more route). Geometric, so a leaf no key will ever split costs each insert a constant
/// number of route reads on average; small steps, so that a leaf whose first routes could not
/// be told apart (a route on two hosts beside one on one) is split as soon as a third can be.
fn retry_size(routes: u32) -> u32 {
    routes + (routes / 2).max(1)
}

/// The routes in `slots` (distinct) with their order and requirements, read from `all`: the
/// table [`build`] takes.
fn with_requirements(slots: &[u32], all: &dyn Requirements) -> Vec<(Entry, Vec<Requirement>)> {
    slots
        .iter()
        .map(|&s| ((all.order(s), s), all.of(s)))
        .collect()
}

/// Builds the subtree of routes `idx` of `table` (entries with their requirements), at level
/// `at`: a leaf, or a split by the best choice with its parts built the same way (on other
/// threads too, where `par` lets it: see [`build_parts`]).
pub(crate) fn build(
    table: &[(Entry, Vec<Requirement>)],
    idx: Vec<u32>,
    at: Level,
    st: &mut Stats,
    par: Option<&Par<'_>>,
) -> Node {
    let leaf = |idx: &[u32], retry_at: u32| {
        let mut entries: Vec<Entry> = idx.iter().map(|&i| table[i as usize].0).collect();
        entries.sort_unstable();
        entries.dedup();
        Node::Leaf(Leaf::new(entries, retry_at))
    };
    if idx.len() <= at.leaf_max() || at.depth >= MAX_DEPTH {
        return leaf(&idx, 0);
    }
    let routes = idx.len() as u32;
    match choose(table, &idx, at.filtered) {
        None => leaf(&idx, retry_size(routes)),
        Some(Choice::Key(disc)) => {
            // Group the routes by stored key (each structure decides which keys are one: a
            // radix tree stores a long prefix shortened), then build each group's subtree.
            let mut groups_of: Keyed<u32> = Keyed::new(disc.kind);
            let mut groups: Vec<(Key<'_>, Vec<u32>)> = Vec::new();
            let mut rest = Vec::new();
            for &i in &idx {
                match requirement(&table[i as usize].1, &disc) {
                    Some(r) => {
                        for k in r.keys.iter() {
                            let g = *groups_of.entry(k, || {
                                groups.push((k, Vec::new()));
                                groups.len() as u32 - 1
                            });
                            groups[g as usize].1.push(i);
                        }
                    }
                    None => rest.push(i),
                }
            }
            drop(groups_of);
            st.key_added(disc.field);
            st.level_used(at.depth);
            let (keys, groups): (Vec<Key<'_>>, Vec<Vec<u32>>) = groups.into_iter().unzip();
            let parts = std::iter::once((rest, at.rest()))
                .chain(groups.into_iter().map(|g| (g, at.keyed())))
                .collect();
            let mut built = build_parts(table, parts, st, par).into_iter();
            let rest = built.next().expect("the rest is the first part");
            let mut keyed: Keyed<Node> = Keyed::new(disc.kind);
            // The keys in the order they were met, wherever their subtrees were built.
            for (k, child) in keys.into_iter().zip(built) {
                keyed.entry(k, move || child);
            }
            keyed.seal();
            Node::Split(Box::new(Split {
                disc,
                keyed,
                rest,
                routes,
                built_at: routes,
            }))
        }
        Some(Choice::Fields) => {
            let mut need: FxHashMap<FieldId, usize> = FxHashMap::default();
            let mut fields = Vec::new();
            for &i in &idx {
                fields_of(&table[i as usize].1, &mut fields);
                for f in &fields {
                    *need.entry(*f).or_default() += 1;
                }
            }
            let mut groups: FxHashMap<FieldId, Vec<u32>> = FxHashMap::default();
            let mut rest = Vec::new();
            for &i in &idx {
                match place(&table[i as usize].1, |f| need[&f]) {
                    Some(f) => groups.entry(f).or_default().push(i),
                    None => rest.push(i),
                }
            }
            st.level_used(at.depth);
            let (fields, groups): (Vec<FieldId>, Vec<Vec<u32>>) = groups.into_iter().unzip();
            fields.iter().for_each(|f| st.key_added(*f));
            let parts = std::iter::once((rest, at.rest()))
                .chain(groups.into_iter().map(|g| (g, at.keyed())))
                .collect();
            let mut built = build_parts(table, parts, st, par).into_iter();
            let rest = built.next().expect("the rest is the first part");
            let children = fields.into_iter().zip(built).collect();
            Node::Fields(Box::new(FieldSplit {
                children,
                rest,
                routes,
                built_at: routes,
            }))
        }
    }
}

/// The threads a build of the whole tree ([`super::Index::build`]) may still start for its
/// subtrees (see `threads.rs`): a subtree's build depends on its routes and level alone, and its
/// statistics are counts, so which thread builds it changes nothing.
pub(crate) struct Par<'a> {
    /// Threads that may start now: the build's count, less the building thread and the
    /// helpers at work (each gives its place back when it ends).
    free: AtomicUsize,
    /// Routes a split's parts need in all, per thread, to be shared out.
    min_subtree: usize,
    on_start: StartHook<'a>,
}

impl<'a> Par<'a> {
    pub(crate) fn new(helpers: Helpers<'a>) -> Par<'a> {
        Par {
            free: AtomicUsize::new(helpers.threads.count - 1),
            min_subtree: helpers.threads.min_subtree,
            on_start: helpers.on_start,
        }
    }

    /// Takes up to `want` places for helpers; how many it got.
    fn take(&self, want: usize) -> usize {
        let mut free = self.free.load(Ordering::Relaxed);
        loop {
            let n = free.min(want);
            if n == 0 {
                return 0;
            }
            match self.free.compare_exchange_weak(
                free,
                free - n,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return n,
                Err(now) => free = now,
            }
        }
    }

    fn give_back(&self, n: usize) {
        self.free.fetch_add(n, Ordering::AcqRel);
    }
}

/// A part of a split: its routes (indices into the table) and its level.
type Part = (Vec<u32>, Level);

/// Builds the parts of a split (its rest first, then its keyed groups), returned in that
/// order. With `par`, and enough routes for threads to share, they are built by the calling
/// thread and helpers started for them, each taking the largest part left; each part's own
/// splits may start helpers again as places come free.
fn build_parts(
    table: &[(Entry, Vec<Requirement>)],
    parts: Vec<Part>,
    st: &mut Stats,
    par: Option<&Par<'_>>,
) -> Vec<Node> {
    let total: usize = parts.iter().map(|(idx, _)| idx.len()).sum();
    let want = par.map_or(0, |p| {
        (total / p.min_subtree.max(1))
            .saturating_sub(1)
            .min(parts.len() - 1)
    });
    let (Some(par), got @ 1..) = (par, par.map_or(0, |p| p.take(want))) else {
        // Pushed, not collected: collecting `parts.into_iter().map(..)` would reuse the parts'
        // larger allocation and shrink it in place, a fragment left behind on every split an
        // add makes (see `tests/change_fragments.rs`).
        let mut built = Vec::with_capacity(parts.len());
        for (idx, at) in parts {
            built.push(build(table, idx, at, st, par));
        }
        return built;
    };
    let n = parts.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(parts[i].0.len()));
    let jobs: Vec<Mutex<Option<Part>>> = parts.into_iter().map(|p| Mutex::new(Some(p))).collect();
    let built: Vec<Mutex<Option<Node>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let stats = Mutex::new(Stats::default());
    let work = || {
        let mut own = Stats::default();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(&j) = order.get(i) else { break };
            let (idx, at) = lock(&jobs[j]).take().expect("each part is taken once");
            let node = build(table, idx, at, &mut own, Some(par));
            *lock(&built[j]) = Some(node);
        }
        lock(&stats).merge(own);
    };
    let helper = || {
        work();
        par.give_back(1);
    };
    std::thread::scope(|scope| {
        let started = crate::threads::start(scope, got, par.on_start, &helper);
        par.give_back(got - started);
        work();
    });
    st.merge(stats.into_inner().unwrap_or_else(|e| e.into_inner()));
    // Pushed, not collected in place (see above).
    let mut nodes = Vec::with_capacity(n);
    for b in built {
        let b = b.into_inner().unwrap_or_else(|e| e.into_inner());
        nodes.push(b.expect("every part is built"));
    }
    nodes
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while one is held (building a part) is passed on by the scope anyway.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl std::fmt::Display for Disc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "field #{}{} {:?}",
            self.field.index(),
            if self.lower { " lower" } else { "" },
            self.kind
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leaf is a node of its parent's structure (an entry of a map, a radix node's
    /// payload): its size is paid once per node of the table.
    #[test]
    fn an_index_node_is_16_bytes() {
        assert_eq!(std::mem::size_of::<Node>(), 16);
    }
}
