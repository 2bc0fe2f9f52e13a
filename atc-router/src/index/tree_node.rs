//! The index's decision tree as data: its nodes (a leaf of routes, a split by a key, a split by
//! which fields routes need), what they count, and where a node sits ([`Level`]). How a tree
//! is built whole is `tree_build.rs`'s, how a route goes in and out `tree.rs`'s, how a request
//! walks it `lookup.rs`'s; the invariants all of them keep are in `tree.rs`.
//!
//! Invariant: a node is 16 bytes (a leaf of one route keeps its slot in place), since a node is
//! paid once per entry of its parent's structure.

use rustc_hash::FxHashMap;

use crate::schema::FieldId;
use crate::schema::FieldMask;

use super::keyed::Keyed;
use super::requirement::{Disc, Requirement};
use super::{Entry, Order};

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
    pub(super) fn new(sorted: Vec<Entry>, retry_at: u32) -> Leaf {
        Leaf {
            entries: Entries::from_sorted(
                sorted.into_iter().map(|(_, slot)| slot).collect(),
                retry_at,
            ),
        }
    }

    /// An unsplittable leaf is tried again at this size (0: at the next insert).
    pub(super) fn retry_at(&self) -> u32 {
        match &self.entries {
            Entries::Many(m) => m.retry_at,
            _ => 0,
        }
    }

    pub(super) fn set_retry_at(&mut self, r: u32) {
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
    pub(super) list: Vec<u32>,
    pub(super) retry_at: u32,
}

impl Entries {
    pub(super) fn from_sorted(v: Vec<u32>, retry_at: u32) -> Entries {
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

    pub(super) fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Adds route `e` in routing order (once: a route met again, under a second key that
    /// leads to the same leaf, is there already).
    pub(super) fn insert(&mut self, e: Entry, all: &dyn Requirements) {
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
    pub(super) fn remove(&mut self, slot: u32) -> bool {
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
    pub(super) routes: u32,
    /// `routes` when the split was chosen: it is chosen again (the subtree rebuilt) once the
    /// subtree has grown [`REKEY_GROWTH`] times, up to [`REKEY_MAX`] routes.
    pub(super) built_at: u32,
}

/// A split by field: each route sits under one field it needs a value of (see
/// [`super::choose::place`]); a request visits the children of the fields it has values for,
/// and always `rest` (the routes without requirements).
#[derive(Debug)]
pub(crate) struct FieldSplit {
    pub(super) children: FxHashMap<FieldId, Node>,
    pub(super) rest: Node,
    /// As [`Split::routes`] and [`Split::built_at`].
    pub(super) routes: u32,
    pub(super) built_at: u32,
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
pub(super) const REKEY_GROWTH: u32 = 4;

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
    pub(super) fn key_added(&mut self, field: FieldId) {
        let bit = field.bit();
        let i = bit.trailing_zeros() as usize;
        if self.per_bit.len() <= i {
            self.per_bit.resize(i + 1, 0);
        }
        self.per_bit[i] += 1;
        self.key_mask |= bit;
    }

    pub(super) fn key_gone(&mut self, field: FieldId) {
        let bit = field.bit();
        if let Some(n) = self.per_bit.get_mut(bit.trailing_zeros() as usize) {
            *n -= 1;
            if *n == 0 {
                self.key_mask &= !bit;
            }
        }
    }

    pub(super) fn level_used(&mut self, depth: usize) {
        self.max_depth = self.max_depth.max(depth + 1);
    }

    /// Adds the counts of a subtree built apart (on another thread).
    pub(super) fn merge(&mut self, other: Stats) {
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
    pub(super) fn routes(&self) -> usize {
        match self {
            Node::Leaf(l) => l.entries.len(),
            Node::Split(s) => s.routes as usize,
            Node::Fields(s) => s.routes as usize,
        }
    }

    /// Whether a split made from `built_at` routes, now holding `routes`, is to be chosen
    /// again before a route is added (see [`REKEY_GROWTH`]).
    pub(super) fn due_for_rekey(routes: u32, built_at: u32) -> bool {
        routes < REKEY_MAX && routes + 1 >= REKEY_GROWTH * built_at
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
    pub(super) depth: usize,
    pub(super) filtered: bool,
}

impl Level {
    pub(crate) const ROOT: Level = Level {
        depth: 0,
        filtered: false,
    };

    pub(super) fn keyed(self) -> Level {
        Level {
            depth: self.depth + 1,
            filtered: true,
        }
    }

    pub(super) fn rest(self) -> Level {
        Level {
            depth: self.depth + 1,
            ..self
        }
    }

    pub(super) fn leaf_max(self) -> usize {
        if self.filtered {
            LEAF_MAX
        } else {
            0
        }
    }
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
