//! The index: what narrows a request down to the few routes that can match it.
//!
//! Every route has *requirements* ([`requirement`]): facts that hold for every request it
//! matches, one per field and kind of key ("some value of `http.host` equals `a.com`", "some
//! value of `http.path` follows `/repos/{p}/{p}/issues/{digits}`"). The routes form a decision
//! tree ([`tree`]): a node too large to scan is split by the key that leaves a request the
//! fewest routes, chosen from the routes it holds, into a structure of that kind of key
//! ([`keyed`]: a map for exact strings ([`exact_map`]), a hash map for integers, a radix tree
//! for prefixes and suffixes, a segment tree for paths, an Aho-Corasick automaton for
//! `contains`, per-length maps for networks), and each part is split again as it grows. A
//! request visits only the parts its values select, plus the routes without the key at each
//! level.
//!
//! Invariant (soundness): the candidates of a request include every route that matches it;
//! each structure and the tree keep it (see their module docs). Candidates are evaluated in
//! routing order ([`Order`]) and the first true one wins, so the result is the linear scan's.

mod choose;
mod cidr_map;
mod contains_set;
mod exact_map;
pub(crate) mod image;
pub(crate) mod image_write;
pub(crate) mod keyed;
mod lookup;
pub(crate) mod path_tree;
mod prefix_tree;
mod probe_map;
pub(crate) mod requirement;
mod small_key;
pub(crate) mod tree;
mod tree_build;
mod tree_node;

use uuid::Uuid;

use crate::schema::values::Values;
use crate::schema::FieldMask;

pub(crate) use lookup::LevelBufs;
pub(crate) use requirement::{requirements, Requirement};
pub(crate) use tree::Requirements;
use tree::{Node, Stats};

/// Routing order as one sortable key: ascending `Order` is priority descending, then id bytes
/// descending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
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

/// A route with its place in routing order: what the index is built from and given on an
/// insert (its leaves keep only the slot, see `tree::Entries`).
pub(crate) type Entry = (Order, u32);

/// All routes of a router, in one decision tree.
#[derive(Debug, Default)]
pub(crate) struct Index {
    root: Node,
    stats: Stats,
    /// Routes without any requirement: every request meets them.
    unindexed: usize,
}

impl Index {
    /// Builds the index of `routes` at once (a table loaded whole), choosing every split from
    /// all the routes it will hold; large subtrees are built on `helpers`' threads too (the
    /// same tree).
    pub(crate) fn build(
        routes: Vec<(Entry, Vec<Requirement>)>,
        helpers: crate::threads::Helpers<'_>,
    ) -> Index {
        let mut stats = Stats::default();
        let unindexed = routes.iter().filter(|(_, r)| r.is_empty()).count();
        let idx = (0..routes.len() as u32).collect();
        let par = (helpers.threads.count > 1).then(|| tree::Par::new(helpers));
        let root = tree::build(&routes, idx, tree::Level::ROOT, &mut stats, par.as_ref());
        Index {
            root,
            stats,
            unindexed,
        }
    }

    /// Adds a route with requirements `reqs`; `all` gives those of routes already in.
    pub(crate) fn insert(&mut self, e: Entry, reqs: &[Requirement], all: &dyn Requirements) {
        self.unindexed += usize::from(reqs.is_empty());
        self.root
            .insert(tree::Level::ROOT, e, reqs, all, &mut self.stats);
    }

    /// Takes the route in `slot` out (`reqs` as it was inserted with).
    pub(crate) fn remove(&mut self, slot: u32, reqs: &[Requirement], all: &dyn Requirements) {
        if self.root.remove(slot, reqs, all, &mut self.stats) {
            self.unindexed -= usize::from(reqs.is_empty());
        }
    }

    /// Appends to `out` the slot of every route the request may match (unsorted, with
    /// repeats). `bufs` is scratch space, grown to the tree's depth here (so a lookup allocates
    /// nothing once it has grown).
    #[inline]
    pub(crate) fn candidates(&self, ctx: &Values, bufs: &mut Vec<LevelBufs>, out: &mut Vec<u32>) {
        if bufs.len() < self.stats.max_depth {
            bufs.resize_with(self.stats.max_depth, LevelBufs::default);
        }
        self.root.collect(ctx, bufs, out);
    }

    /// The index in image form (see `image.rs`).
    pub(crate) fn write_image(
        &self,
        num: &image_write::Numbering<'_>,
    ) -> Option<image_write::Written> {
        image_write::write(&self.root, num)
    }

    /// The routes (slots) of a tree that is one leaf (no key tells its routes apart: a small
    /// table, or routes without requirements), in routing order: every request's candidates,
    /// with nothing to collect.
    #[inline]
    pub(crate) fn only_leaf(&self) -> Option<&[u32]> {
        self.root.leaf_entries()
    }

    /// The fields some split looks values up in (the key fields of two-phase matching).
    #[inline]
    pub(crate) fn key_fields(&self) -> FieldMask {
        self.stats.key_mask
    }

    /// Routes without any requirement.
    #[cfg(feature = "diagnostics")]
    pub(crate) fn unindexed(&self) -> usize {
        self.unindexed
    }

    /// The tree's shape, for diagnostics: per depth, leaves and the routes in them, and the
    /// splits by key.
    #[cfg(feature = "diagnostics")]
    pub(crate) fn summary(&self) -> String {
        use rustc_hash::FxHashMap;
        use tree::NodeInfo;

        let mut leaves: Vec<(usize, usize, usize)> = Vec::new();
        let mut splits: FxHashMap<String, (usize, usize)> = FxHashMap::default();
        self.root.visit(0, &mut |n, depth| match n.describe() {
            NodeInfo::Leaf(size) => {
                if leaves.len() <= depth {
                    leaves.resize(depth + 1, (0, 0, 0));
                }
                let l = &mut leaves[depth];
                l.0 += 1;
                l.1 += size;
                l.2 = l.2.max(size);
            }
            NodeInfo::Split { disc, keys } => {
                let s = splits.entry(disc).or_default();
                s.0 += 1;
                s.1 += keys;
            }
        });
        let mut out = String::new();
        for (depth, (n, routes, max)) in leaves.iter().enumerate() {
            if *n > 0 {
                out.push_str(&format!(
                    "depth {depth}: {n} leaves, {routes} entries, largest {max}\n"
                ));
            }
        }
        let mut splits: Vec<_> = splits.into_iter().collect();
        splits.sort();
        for (disc, (n, keys)) in splits {
            out.push_str(&format!("split by {disc}: {n} splits, {keys} keys\n"));
        }
        out.push_str(&format!("without requirements: {}\n", self.unindexed));
        out
    }
}
