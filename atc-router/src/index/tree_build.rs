//! Building a decision tree whole from a table of routes: each node split by its best key
//! (`choose.rs`), its parts built the same way, on helper threads where a build may use them.
//!
//! Invariants: the tree built is the same whatever the number of threads (parts are built
//! independently and put back in their order); no node is split below [`MAX_DEPTH`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rustc_hash::FxHashMap;

use super::choose::{choose, fields_of, place, requirement, Choice};
use super::keyed::Keyed;
use super::requirement::{Key, Requirement};
use super::tree_node::{FieldSplit, Leaf, Level, Node, Requirements, Split, Stats, MAX_DEPTH};
use super::Entry;
use crate::schema::FieldId;
use crate::threads::{Helpers, StartHook};

/// The size at which a leaf no key improved is tried again: half as large again (at least one
/// more route). Geometric, so a leaf no key will ever split costs each insert a constant
/// number of route reads on average; small steps, so that a leaf whose first routes could not
/// be told apart (a route on two hosts beside one on one) is split as soon as a third can be.
pub(super) fn retry_size(routes: u32) -> u32 {
    routes + (routes / 2).max(1)
}

/// The routes in `slots` (distinct) with their order and requirements, read from `all`: the
/// table [`build`] takes.
pub(super) fn with_requirements(
    slots: &[u32],
    all: &dyn Requirements,
) -> Vec<(Entry, Vec<Requirement>)> {
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
