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
//!   no key improves is tried again only once it has doubled. A split whose subtree shrinks to
//!   [`LEAF_MAX`] / 2 routes becomes a leaf again.
//! - **Changes are local.** An add or a remove follows the route's own path down the tree and
//!   changes what it meets there: a leaf split or a split collapsed costs the routes of that
//!   node, never the table.
//! - A split's `routes` counts the distinct routes in its subtree (a route under two keys counts
//!   once there, once in each child).

use rustc_hash::FxHashMap;

use crate::schema::context::Context;
use crate::schema::value::Value;
use crate::schema::FieldId;

use super::keyed::{sample, Keyed, Probe, WalkBufs};
use super::requirement::{Disc, KeyKind, Requirement};
use super::Entry;

/// Most routes a leaf holds when a key could tell them apart.
pub(crate) const LEAF_MAX: usize = 1;

/// Where the tree gets the requirements of routes it already holds (when a leaf is split).
pub(crate) trait Requirements {
    fn of(&self, slot: u32) -> Vec<Requirement>;
}

#[derive(Debug)]
pub(crate) enum Node {
    Leaf(Leaf),
    Split(Box<Split>),
}

impl Default for Node {
    fn default() -> Node {
        Node::Leaf(Leaf::default())
    }
}

#[derive(Debug, Default)]
pub(crate) struct Leaf {
    entries: Entries,
    /// An unsplittable leaf is tried again at this size.
    retry_at: u32,
}

/// A leaf's routes, sorted by routing order. Most leaves hold one: it is kept in place, so a
/// lookup reads it from the leaf itself rather than following a pointer to a list.
#[derive(Debug, Default)]
enum Entries {
    #[default]
    Empty,
    One(Entry),
    Many(Vec<Entry>),
}

impl Entries {
    fn from_sorted(v: Vec<Entry>) -> Entries {
        match v[..] {
            [] => Entries::Empty,
            [one] => Entries::One(one),
            _ => Entries::Many(v),
        }
    }

    #[inline]
    fn as_slice(&self) -> &[Entry] {
        match self {
            Entries::Empty => &[],
            Entries::One(e) => std::slice::from_ref(e),
            Entries::Many(v) => v,
        }
    }

    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn is_empty(&self) -> bool {
        matches!(self, Entries::Empty)
    }

    fn insert(&mut self, e: Entry) {
        let mut v = match std::mem::take(self) {
            Entries::Empty => {
                *self = Entries::One(e);
                return;
            }
            Entries::One(x) => vec![x],
            Entries::Many(v) => v,
        };
        if let Err(i) = v.binary_search(&e) {
            v.insert(i, e);
        }
        *self = Entries::from_sorted(v);
    }

    /// Whether `e` was there.
    fn remove(&mut self, e: Entry) -> bool {
        match self {
            Entries::One(x) if *x == e => {
                *self = Entries::Empty;
                true
            }
            Entries::Many(v) => match v.binary_search(&e) {
                Ok(i) => {
                    v.remove(i);
                    let v = std::mem::take(v);
                    *self = Entries::from_sorted(v);
                    true
                }
                Err(_) => false,
            },
            _ => false,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Split {
    disc: Disc,
    keyed: Keyed<Node>,
    rest: Node,
    routes: u32,
    /// `routes` when the split was chosen: it is chosen again (the subtree rebuilt) once the
    /// subtree has grown [`REKEY_GROWTH`] times, up to [`REKEY_MAX`] routes.
    built_at: u32,
}

/// Subtrees of up to this many routes are rebuilt each time they grow [`REKEY_GROWTH`] times,
/// so that a split made when a leaf first overflowed (chosen from two routes) is chosen again
/// from many; past it, a split keeps its key (its parts are still re-keyed as they grow), which
/// bounds what one add can cost.
pub(crate) const REKEY_MAX: u32 = 2048;

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
    pub(crate) fields: FxHashMap<FieldId, u32>,
    /// The bits of `fields` (see `crate::needs`), kept with them.
    pub(crate) key_mask: crate::router::needs::FieldMask,
    pub(crate) max_depth: usize,
}

impl Stats {
    fn split_made(&mut self, disc: Disc, depth: usize) {
        *self.fields.entry(disc.field).or_insert(0) += 1;
        self.key_mask |= crate::router::needs::field_bit(disc.field);
        self.max_depth = self.max_depth.max(depth + 1);
    }

    fn split_gone(&mut self, disc: Disc) {
        if let Some(n) = self.fields.get_mut(&disc.field) {
            *n -= 1;
            if *n == 0 {
                self.fields.remove(&disc.field);
                self.key_mask = self
                    .fields
                    .keys()
                    .fold(0, |m, f| m | crate::router::needs::field_bit(*f));
            }
        }
    }
}

/// Scratch space for one level of a lookup.
#[derive(Debug, Default)]
pub(crate) struct LevelBufs {
    lowered: String,
    walk: WalkBufs,
}

fn requirement<'r>(reqs: &'r [Requirement], disc: &Disc) -> Option<&'r Requirement> {
    reqs.iter().find(|r| r.disc == *disc)
}

impl Node {
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Node::Leaf(l) => l.entries.is_empty(),
            Node::Split(s) => s.routes == 0,
        }
    }

    /// Adds route `e`, whose requirements are `reqs`, below this node at `depth`; `filtered`
    /// says whether the way here passed a key (see [`build`]).
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
                l.entries.insert(e);
                let n = l.entries.len();
                if n > at.leaf_max() && n >= l.retry_at as usize {
                    let table: Vec<(Entry, Vec<Requirement>)> = l
                        .entries
                        .as_slice()
                        .iter()
                        .map(|e| (*e, all.of(e.1)))
                        .collect();
                    match build(&table, (0..n as u32).collect(), at, st) {
                        node @ Node::Split(_) => *self = node,
                        Node::Leaf(built) => l.retry_at = built.retry_at,
                    }
                }
            }
            Node::Split(s) => {
                if s.routes < REKEY_MAX && s.routes + 1 >= REKEY_GROWTH * s.built_at {
                    // Chosen from half as many routes: choose again from all of them.
                    let mut entries = Vec::with_capacity(s.routes as usize + 1);
                    self.copy_entries(&mut entries);
                    entries.push(e);
                    entries.sort_unstable();
                    entries.dedup();
                    self.forget_splits(st);
                    let table: Vec<(Entry, Vec<Requirement>)> =
                        entries.iter().map(|x| (*x, all.of(x.1))).collect();
                    *self = build(&table, (0..table.len() as u32).collect(), at, st);
                    return;
                }
                s.routes += 1;
                match requirement(reqs, &s.disc) {
                    Some(r) => {
                        for k in r.keys.iter() {
                            s.keyed
                                .entry(k, Node::default)
                                .insert(at.keyed(), e, reqs, all, st);
                        }
                    }
                    None => s.rest.insert(at.rest(), e, reqs, all, st),
                }
            }
        }
    }

    /// Takes route `e` out; returns whether it was there.
    pub(crate) fn remove(&mut self, e: Entry, reqs: &[Requirement], st: &mut Stats) -> bool {
        let found = match self {
            Node::Leaf(l) => {
                let found = l.entries.remove(e);
                if l.entries.len() * 2 < l.retry_at as usize {
                    l.retry_at = 0;
                }
                return found;
            }
            Node::Split(s) => {
                let found = match requirement(reqs, &s.disc) {
                    Some(r) => {
                        let mut found = false;
                        for k in r.keys.iter() {
                            if let Some(child) = s.keyed.get_mut(k) {
                                found |= child.remove(e, reqs, st);
                                if child.is_empty() {
                                    s.keyed.remove(k);
                                }
                            }
                        }
                        found
                    }
                    None => s.rest.remove(e, reqs, st),
                };
                if found {
                    s.routes -= 1;
                }
                found
            }
        };
        if let Node::Split(s) = self {
            if s.keyed.len() == 0 {
                // No route has the key any more: the split only stands in front of its rest.
                st.split_gone(s.disc);
                let rest = std::mem::take(&mut s.rest);
                *self = rest;
                return found;
            }
            if s.routes as usize <= LEAF_MAX / 2 {
                let mut entries = Vec::with_capacity(2 * s.routes as usize);
                self.copy_entries(&mut entries);
                self.forget_splits(st);
                entries.sort_unstable();
                entries.dedup();
                *self = Node::Leaf(Leaf {
                    entries: Entries::from_sorted(entries),
                    retry_at: 0,
                });
            }
        }
        found
    }

    /// Copies every entry below this node into `out` (with repeats).
    fn copy_entries(&self, out: &mut Vec<Entry>) {
        match self {
            Node::Leaf(l) => out.extend_from_slice(l.entries.as_slice()),
            Node::Split(s) => {
                s.keyed.for_each(|c| c.copy_entries(out));
                s.rest.copy_entries(out);
            }
        }
    }

    /// Reports every split below this node gone (before the subtree is dropped).
    fn forget_splits(&self, st: &mut Stats) {
        if let Node::Split(s) = self {
            st.split_gone(s.disc);
            s.keyed.for_each(|c| c.forget_splits(st));
            s.rest.forget_splits(st);
        }
    }

    /// Appends to `out` every route below this node that the request can match (unsorted,
    /// with repeats). `bufs` holds one [`LevelBufs`] per level below this one.
    #[inline]
    pub(crate) fn collect(&self, ctx: &Context, bufs: &mut [LevelBufs], out: &mut Vec<Entry>) {
        match self {
            Node::Leaf(l) => out.extend_from_slice(l.entries.as_slice()),
            Node::Split(s) => {
                s.collect_keyed(ctx, bufs, out);
                s.rest.collect(ctx, bufs, out);
            }
        }
    }

    /// Visits every node, with its depth (for diagnostics).
    #[cfg(feature = "diagnostics")]
    pub(crate) fn visit(&self, depth: usize, f: &mut dyn FnMut(&Node, usize)) {
        f(self, depth);
        if let Node::Split(s) = self {
            s.keyed.for_each(|c| c.visit(depth + 1, f));
            s.rest.visit(depth + 1, f);
        }
    }

    /// What this node is, for diagnostics: a leaf's size, or a split's key and width.
    #[cfg(feature = "diagnostics")]
    pub(crate) fn describe(&self) -> NodeInfo {
        match self {
            Node::Leaf(l) => NodeInfo::Leaf(l.entries.len()),
            Node::Split(s) => NodeInfo::Split {
                disc: s.disc,
                keys: s.keyed.len(),
            },
        }
    }
}

/// See [`Node::describe`].
#[cfg(feature = "diagnostics")]
#[derive(Debug)]
pub(crate) enum NodeInfo {
    Leaf(usize),
    Split { disc: Disc, keys: usize },
}

impl Split {
    #[inline]
    fn collect_keyed(&self, ctx: &Context, bufs: &mut [LevelBufs], out: &mut Vec<Entry>) {
        let values = ctx.values_by_id(self.disc.field);
        if values.is_empty() {
            return;
        }
        let mut fresh = LevelBufs::default();
        let (here, deeper) = match bufs.split_first_mut() {
            Some((here, deeper)) => (here, deeper),
            // Only when the caller's buffers are too few (they are sized to the tree's depth).
            None => (&mut fresh, &mut [][..]),
        };
        for v in values {
            let probe = match (self.disc.kind, v) {
                (KeyKind::Int, Value::Int(i)) => Probe::Int(*i),
                (KeyKind::Cidr, Value::IpAddr(a)) => Probe::Addr(*a),
                (_, Value::String(s)) => {
                    let s =
                        crate::compile::eval::lowercase_if(self.disc.lower, s, &mut here.lowered);
                    Probe::Text(s.as_bytes())
                }
                _ => continue,
            };
            self.keyed.walk(probe, &mut here.walk, |child| {
                child.collect(ctx, deeper, out)
            });
        }
    }
}

/// Where a node sits: its depth, and whether the way to it from the root passed a key (went
/// down a keyed edge rather than only `rest` edges).
///
/// A node no key has filtered yet holds routes that every request reaching it meets, whatever
/// its values; there, a split that only sets apart the routes of one key (a request that does
/// not have the key skips them, one that has it meets as many as before) is worth making, down
/// to a single route. Below a key, a split must leave every request fewer routes, and leaves of
/// [`LEAF_MAX`] routes stay leaves. Either way every part is smaller than the node, so building
/// ends.
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

/// Builds the subtree of routes `idx` of `table` (entries with their requirements), at level
/// `at`: a leaf, or a split by the best key with its parts built the same way.
pub(crate) fn build(
    table: &[(Entry, Vec<Requirement>)],
    idx: Vec<u32>,
    at: Level,
    st: &mut Stats,
) -> Node {
    let leaf = |idx: &[u32], retry_at: u32| {
        let mut entries: Vec<Entry> = idx.iter().map(|&i| table[i as usize].0).collect();
        entries.sort_unstable();
        entries.dedup();
        Node::Leaf(Leaf {
            entries: Entries::from_sorted(entries),
            retry_at,
        })
    };
    if idx.len() <= at.leaf_max() {
        return leaf(&idx, 0);
    }
    let Some(disc) = choose(table, &idx, at.filtered) else {
        return leaf(&idx, 2 * idx.len() as u32);
    };
    let mut keyed: Keyed<Vec<u32>> = Keyed::new(disc.kind);
    let mut rest = Vec::new();
    for &i in &idx {
        match requirement(&table[i as usize].1, &disc) {
            Some(r) => {
                for k in r.keys.iter() {
                    keyed.entry(k, Vec::new).push(i);
                }
            }
            None => rest.push(i),
        }
    }
    st.split_made(disc, at.depth);
    let rest = build(table, rest, at.rest(), st);
    let keyed = keyed.map(|group| build(table, group, at.keyed(), st));
    Node::Split(Box::new(Split {
        disc,
        keyed,
        rest,
        routes: idx.len() as u32,
        built_at: idx.len() as u32,
    }))
}

/// The key kind to split routes `idx` by: the one whose worst case leaves a request the fewest
/// routes (those without the key, plus the most that share what one request finds), if that
/// is fewer than all of them.
fn choose(table: &[(Entry, Vec<Requirement>)], idx: &[u32], filtered: bool) -> Option<Disc> {
    // The routes of each disc, in one pass (a table can have as many discs as routes: one
    // header field each).
    let mut by_disc: FxHashMap<Disc, Vec<u32>> = FxHashMap::default();
    for &i in idx {
        for r in &table[i as usize].1 {
            by_disc.entry(r.disc).or_default().push(i);
        }
    }
    let mut discs: Vec<(Disc, Vec<u32>)> = by_disc.into_iter().collect();
    // Most covered first (the likeliest winners make the bound tight early), then the cheaper
    // kinds of lookup, which ties keep.
    discs.sort_unstable_by(|a, b| {
        (b.1.len(), a.0.kind, a.0.field, a.0.lower).cmp(&(
            a.1.len(),
            b.0.kind,
            b.0.field,
            b.0.lower,
        ))
    });
    let n = idx.len();
    // A split must leave a request fewer routes than `n`; where no key has filtered the routes
    // yet, as many is enough (see `Level`).
    let limit = if filtered { n } else { n + 1 };
    // The best so far: its worst case, then (between equal worst cases) the mean over the
    // routes' own requests, which prefers the key that leaves less to split further.
    let mut best: Option<(usize, f64, Disc)> = None;
    for (disc, covered) in discs {
        let rest = n - covered.len();
        // At most `bound` routes (equal to the best so far), or fewer than `limit`.
        let bound = best.map_or(limit - 1, |b| b.0);
        if rest > bound {
            // Sorted by coverage: every disc after this one leaves as many or more.
            break;
        }
        let Some((worst, mean)) = worst_case(table, &covered, disc, bound - rest) else {
            continue;
        };
        let (score, avg) = (rest + worst, rest as f64 + mean);
        if best.is_none_or(|(s, a, _)| score < s || (score == s && avg < a)) {
            best = Some((score, avg, disc));
        }
    }
    best.map(|(_, _, d)| d)
}

/// The most routes among `covered` that a request like one of them finds through a structure
/// keyed by `disc` (counting a route once per key it is found under), and the mean; `None` as
/// soon as the most passes `bound` (the caller only needs to know it is not as good).
fn worst_case(
    table: &[(Entry, Vec<Requirement>)],
    covered: &[u32],
    disc: Disc,
    bound: usize,
) -> Option<(usize, f64)> {
    let mut counts: Keyed<usize> = Keyed::new(disc.kind);
    let reqs = |i: u32| requirement(&table[i as usize].1, &disc).expect("covered");
    for &i in covered {
        for k in reqs(i).keys.iter() {
            *counts.entry(k, || 0) += 1;
        }
    }
    if disc.kind == KeyKind::Regex {
        // No sample text matches a regex key as such: assume a request matches one pattern
        // (the automaton is the last kind a split is made by, see `KeyKind`).
        let (mut worst, mut total, mut groups) = (0, 0, 0);
        counts.for_each(|c| {
            worst = worst.max(*c);
            total += c * c;
            groups += c;
        });
        return (worst <= bound).then(|| (worst, total as f64 / groups.max(1) as f64));
    }
    let (mut worst, mut total, mut probes) = (0, 0, 0);
    let mut bufs = WalkBufs::default();
    for &i in covered {
        for k in reqs(i).keys.iter() {
            let (probe, owned) = sample(k);
            let probe = match &owned {
                Some(path) => Probe::Text(path),
                None => probe,
            };
            let mut found = 0;
            counts.walk(probe, &mut bufs, |c| found += *c);
            worst = worst.max(found);
            if worst > bound {
                return None;
            }
            total += found;
            probes += 1;
        }
    }
    Some((worst, total as f64 / probes.max(1) as f64))
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
