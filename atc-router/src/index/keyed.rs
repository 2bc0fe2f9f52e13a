//! One structure per kind of key ([`KeyKind`]), behind one interface: payloads stored by key,
//! and a walk that, given a request value, visits the payload of every key the value satisfies.
//! The index's decision tree stores its child nodes in these; choosing a key kind estimates
//! with counts in them.

use std::net::IpAddr;

use rustc_hash::FxHashMap;

use super::cidr_map::CidrMap;
use super::contains_set::ContainsSet;
use super::exact_map::ExactMap;
use super::path_tree::PathTree;
use super::prefix_tree::{PrefixTree, SegmentedPrefixTree};
use super::requirement::{Key, KeyKind};

/// A request value as a structure looks it up (lowercased already where the key is).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Probe<'a> {
    Text(&'a [u8]),
    Int(i64),
    Addr(IpAddr),
}

#[derive(Debug)]
pub(crate) enum Keyed<T> {
    Exact(ExactMap<T>),
    Int(FxHashMap<i64, T>),
    Cidr(CidrMap<T>),
    Path(PathTree<T>),
    Prefix(SegmentedPrefixTree<T>),
    /// Keys reversed: a value's suffixes are the prefixes of its reversal.
    Suffix(PrefixTree<T>),
    Contains(ContainsSet<T>),
}

/// Scratch space of a walk, reused across requests.
#[derive(Debug, Default)]
pub(crate) struct WalkBufs {
    reversed: Vec<u8>,
}

fn reversed(b: &[u8]) -> Vec<u8> {
    b.iter().rev().copied().collect()
}

impl<T> Keyed<T> {
    pub(crate) fn new(kind: KeyKind) -> Keyed<T> {
        match kind {
            KeyKind::Exact => Keyed::Exact(ExactMap::default()),
            KeyKind::Int => Keyed::Int(FxHashMap::default()),
            KeyKind::Cidr => Keyed::Cidr(CidrMap::default()),
            KeyKind::Path => Keyed::Path(PathTree::default()),
            KeyKind::Prefix => Keyed::Prefix(SegmentedPrefixTree::default()),
            KeyKind::Suffix => Keyed::Suffix(PrefixTree::default()),
            KeyKind::Contains => Keyed::Contains(ContainsSet::default()),
            KeyKind::Regex => unreachable!("regex keys are never split by (see `KeyKind::Regex`)"),
        }
    }

    /// Number of keys stored.
    pub(crate) fn len(&self) -> usize {
        match self {
            Keyed::Exact(m) => m.len(),
            Keyed::Int(m) => m.len(),
            Keyed::Cidr(m) => m.len(),
            Keyed::Path(t) => t.len(),
            Keyed::Prefix(t) => t.len(),
            Keyed::Suffix(t) => t.len(),
            Keyed::Contains(s) => s.len(),
        }
    }

    /// The payload of `key`, inserted with `make` if new. A key of another kind than the
    /// structure's is a bug of the caller's (keys come from requirements of the same disc).
    pub(crate) fn entry(&mut self, key: Key<'_>, make: impl FnOnce() -> T) -> &mut T {
        match (self, key) {
            (Keyed::Exact(m), Key::Bytes(b)) => m.get_or_insert_with(b, make),
            (Keyed::Int(m), Key::Int(i)) => m.entry(i).or_insert_with(make),
            (Keyed::Cidr(m), Key::Cidr(c)) => m.get_or_insert_with(c, make),
            (Keyed::Path(t), Key::Path(p)) => t.get_or_insert_with(p, make),
            (Keyed::Prefix(t), Key::Bytes(b)) => t.get_or_insert_with(b, make),
            (Keyed::Suffix(t), Key::Bytes(b)) => t.get_or_insert_with(&reversed(b), make),
            (Keyed::Contains(s), Key::Bytes(b)) => s.get_or_insert_with(b, make),
            (s, k) => unreachable!("a {k:?} key for a {} structure", s.kind_name()),
        }
    }

    pub(crate) fn get_mut(&mut self, key: Key<'_>) -> Option<&mut T> {
        match (self, key) {
            (Keyed::Exact(m), Key::Bytes(b)) => m.get_mut(b),
            (Keyed::Int(m), Key::Int(i)) => m.get_mut(&i),
            (Keyed::Cidr(m), Key::Cidr(c)) => m.get_mut(c),
            (Keyed::Path(t), Key::Path(p)) => t.get_mut(p),
            (Keyed::Prefix(t), Key::Bytes(b)) => t.get_mut(b),
            (Keyed::Suffix(t), Key::Bytes(b)) => t.get_mut(&reversed(b)),
            (Keyed::Contains(s), Key::Bytes(b)) => s.get_mut(b),
            _ => None,
        }
    }

    pub(crate) fn remove(&mut self, key: Key<'_>) -> Option<T> {
        match (self, key) {
            (Keyed::Exact(m), Key::Bytes(b)) => m.remove(b),
            (Keyed::Int(m), Key::Int(i)) => m.remove(&i),
            (Keyed::Cidr(m), Key::Cidr(c)) => m.remove(c),
            (Keyed::Path(t), Key::Path(p)) => t.remove(p),
            (Keyed::Prefix(t), Key::Bytes(b)) => t.remove(b),
            (Keyed::Suffix(t), Key::Bytes(b)) => t.remove(&reversed(b)),
            (Keyed::Contains(s), Key::Bytes(b)) => s.remove(b),
            _ => None,
        }
    }

    /// Makes the structure ready for walks after keys were added or removed (builds a contains
    /// set's searchers, see `contains_set.rs`): the index seals every structure it changes
    /// before the change returns, so that no request builds anything.
    pub(crate) fn seal(&mut self) {
        if let Keyed::Contains(s) = self {
            s.seal();
        }
    }

    /// Visits the payload of every key that `probe` satisfies (some payloads of a contains
    /// structure more than once).
    #[inline]
    pub(crate) fn walk<'a>(
        &'a self,
        probe: Probe<'_>,
        bufs: &mut WalkBufs,
        mut visit: impl FnMut(&'a T),
    ) {
        match (self, probe) {
            (Keyed::Exact(m), Probe::Text(t)) => {
                if let Some(v) = m.get(t) {
                    visit(v);
                }
            }
            (Keyed::Int(m), Probe::Int(i)) => {
                if let Some(v) = m.get(&i) {
                    visit(v);
                }
            }
            (Keyed::Cidr(m), Probe::Addr(a)) => m.walk(&a, visit),
            (Keyed::Path(t), Probe::Text(p)) => t.walk(p, visit),
            (Keyed::Prefix(t), Probe::Text(p)) => t.walk(p, visit),
            (Keyed::Suffix(t), Probe::Text(p)) => {
                bufs.reversed.clear();
                bufs.reversed.extend(p.iter().rev());
                t.walk(&bufs.reversed, visit);
            }
            (Keyed::Contains(s), Probe::Text(p)) => s.walk(p, visit),
            // A value of another type than the field's keys cannot satisfy any.
            _ => {}
        }
    }

    /// Every payload.
    pub(crate) fn for_each(&self, mut visit: impl FnMut(&T)) {
        match self {
            Keyed::Exact(m) => m.values().for_each(visit),
            Keyed::Int(m) => m.values().for_each(visit),
            Keyed::Cidr(m) => m.for_each(visit),
            Keyed::Path(t) => t.for_each(visit),
            Keyed::Prefix(t) => t.for_each(visit),
            Keyed::Suffix(t) => t.for_each(|_, v| visit(v)),
            Keyed::Contains(s) => s.for_each(visit),
        }
    }

    pub(crate) fn kind_name(&self) -> &'static str {
        match self {
            Keyed::Exact(_) => "exact",
            Keyed::Int(_) => "int",
            Keyed::Cidr(_) => "cidr",
            Keyed::Path(_) => "path",
            Keyed::Prefix(_) => "prefix",
            Keyed::Suffix(_) => "suffix",
            Keyed::Contains(_) => "contains",
        }
    }
}

/// A request value that satisfies `key` (the key's own text, a path its pattern accepts, the
/// first address of a network): what a request "like" a route looks up.
pub(crate) fn sample(key: Key<'_>) -> (Probe<'_>, Option<Vec<u8>>) {
    match key {
        Key::Bytes(b) => (Probe::Text(b), None),
        Key::Int(i) => (Probe::Int(i), None),
        Key::Cidr(c) => (Probe::Addr(c.first_address()), None),
        Key::Path(p) => (Probe::Text(&[]), Some(p.sample())),
    }
}
