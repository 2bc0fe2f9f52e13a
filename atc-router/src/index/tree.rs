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

use super::choose::{fields_of, place, requirement};
use super::keyed::Keyed;
use super::requirement::{Key, Requirement};
pub(crate) use super::tree_build::build;
use super::tree_build::with_requirements;
use super::Entry;

pub(crate) use super::tree_build::Par;
use super::tree_node::Leaf;
#[cfg(feature = "diagnostics")]
pub(crate) use super::tree_node::NodeInfo;
pub(crate) use super::tree_node::{
    FieldSplit, Level, Node, Requirements, Split, Stats, LEAF_MAX, MAX_DEPTH,
};

impl Node {
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
    pub(super) fn rebuild_with(
        &mut self,
        at: Level,
        e: Entry,
        all: &dyn Requirements,
        st: &mut Stats,
    ) {
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
    pub(super) fn shrink(&mut self, all: &dyn Requirements, st: &mut Stats) {
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
    pub(super) fn copy_entries(&self, out: &mut Vec<u32>) {
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
    pub(super) fn forget_splits(&self, st: &mut Stats) {
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
