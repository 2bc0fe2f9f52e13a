//! A hash map whose cost per change does not depend on the changes before it: the large form of
//! the index's exact-key maps ([`super::exact_map`]).
//!
//! A table of tens of thousands of routes that differ by exact path keeps one map of that many
//! keys, and a route changed in place removes one key and inserts another. A hash table that
//! marks removed slots with tombstones (as `std`'s does) fills up with them under such churn and
//! then rebuilds itself whole on some insert: milliseconds for one route change, every few
//! thousand changes. This map probes linearly and closes the gap a removal leaves by shifting
//! the entries after it back, so it holds no tombstones and rebuilds only when its size doubles
//! or falls to an eighth (and then from the hashes it keeps, without hashing a key again).
//!
//! Invariants (a reader must not break them):
//! - `slots.len()` is a power of two, at least [`MIN_SLOTS`], and at most three quarters of the
//!   slots are full, so every probe ends at an empty slot.
//! - A full slot holds its key's 32-bit hash (the *tag*) above its entry's index + 1; an empty
//!   slot is 0. The key's home slot is the tag's top `bits` bits.
//! - Between a key's home slot and the slot holding it there is no empty slot (cyclically):
//!   a lookup stops at the first empty slot.
//! - `entries` is dense, and each of its indexes is held by exactly one slot.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

use rustc_hash::FxHasher;

/// Fewest slots a map has.
const MIN_SLOTS: usize = 16;

/// A map of keys to values; see the module docs.
pub(crate) struct ProbeMap<K, V> {
    slots: Box<[u64]>,
    /// `slots.len() == 1 << bits`.
    bits: u32,
    entries: Vec<(K, V)>,
}

impl<K: std::fmt::Debug, V: std::fmt::Debug> std::fmt::Debug for ProbeMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.entries.iter().map(|(k, v)| (k, v)))
            .finish()
    }
}

/// The tag of a key: its Fx hash, spread over the top bits (which choose the home slot).
#[inline]
fn tag_of<Q: Hash + ?Sized>(q: &Q) -> u32 {
    let mut h = FxHasher::default();
    q.hash(&mut h);
    (h.finish().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
}

#[inline]
fn pack(tag: u32, index: usize) -> u64 {
    (u64::from(tag) << 32) | (index as u64 + 1)
}

#[inline]
fn tag(slot: u64) -> u32 {
    (slot >> 32) as u32
}

#[inline]
fn index(slot: u64) -> usize {
    (slot as u32 - 1) as usize
}

impl<K: Hash + Eq, V> Default for ProbeMap<K, V> {
    fn default() -> Self {
        ProbeMap::with_capacity(0)
    }
}

impl<K: Hash + Eq, V> FromIterator<(K, V)> for ProbeMap<K, V> {
    /// A map of distinct keys (a key given twice is kept twice: callers pass a map's keys).
    fn from_iter<I: IntoIterator<Item = (K, V)>>(it: I) -> Self {
        let it = it.into_iter();
        let mut m = ProbeMap::with_capacity(it.size_hint().0);
        for (k, v) in it {
            m.insert_new(k, v);
        }
        m
    }
}

impl<K: Hash + Eq, V> ProbeMap<K, V> {
    fn with_capacity(n: usize) -> Self {
        let slots = (n * 4 / 3 + 1).next_power_of_two().max(MIN_SLOTS);
        ProbeMap {
            slots: vec![0; slots].into_boxed_slice(),
            bits: slots.trailing_zeros(),
            entries: Vec::with_capacity(n),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    #[inline]
    fn home(&self, tag: u32) -> usize {
        // `bits` is at least 4 and at most 32 (a map of 2^32 slots would hold 3 * 2^30 keys).
        (tag >> (32 - self.bits)) as usize
    }

    /// The slot holding `q` and its entry's index.
    #[inline]
    fn find<Q: Hash + Eq + ?Sized>(&self, q: &Q) -> Option<(usize, usize)>
    where
        K: Borrow<Q>,
    {
        self.find_by(q, |k| k.borrow() == q)
    }

    /// [`ProbeMap::find`] with the keys compared by `is_q` (for a comparison cheaper than
    /// `Q`'s `==` on the keys a map holds; it must agree with it).
    #[inline]
    fn find_by<Q: Hash + ?Sized>(
        &self,
        q: &Q,
        is_q: impl Fn(&K) -> bool,
    ) -> Option<(usize, usize)> {
        let t = tag_of(q);
        let mask = self.mask();
        let mut i = self.home(t);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if tag(s) == t {
                let e = index(s);
                if is_q(&self.entries[e].0) {
                    return Some((i, e));
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// The value of `q` (the index looks keys up with [`ProbeMap::get_by`]).
    #[cfg(test)]
    pub(crate) fn get<Q: Hash + Eq + ?Sized>(&self, q: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.find(q).map(|(_, e)| &self.entries[e].1)
    }

    /// [`ProbeMap::get`] with the keys compared by `is_q`, which must agree with `Q`'s `==`.
    #[inline]
    pub(crate) fn get_by<Q: Hash + ?Sized>(&self, q: &Q, is_q: impl Fn(&K) -> bool) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.find_by(q, is_q).map(|(_, e)| &self.entries[e].1)
    }

    pub(crate) fn get_mut<Q: Hash + Eq + ?Sized>(&mut self, q: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.find(q).map(|(_, e)| &mut self.entries[e].1)
    }

    /// The value of `q`, inserted as `make()` under `key()` if absent.
    pub(crate) fn get_or_insert_with<Q: Hash + Eq + ?Sized>(
        &mut self,
        q: &Q,
        key: impl FnOnce() -> K,
        make: impl FnOnce() -> V,
    ) -> &mut V
    where
        K: Borrow<Q>,
    {
        let e = match self.find(q) {
            Some((_, e)) => e,
            None => self.insert_new(key(), make()),
        };
        &mut self.entries[e].1
    }

    /// Inserts a key the map does not hold; returns its entry's index.
    fn insert_new(&mut self, k: K, v: V) -> usize {
        if (self.entries.len() + 1) * 4 > self.slots.len() * 3 {
            self.resize(self.slots.len() * 2);
        }
        let t = tag_of(&k);
        let e = self.entries.len();
        self.entries.push((k, v));
        self.place(pack(t, e));
        e
    }

    /// Puts a full slot at the first empty slot from its home.
    fn place(&mut self, s: u64) {
        let mask = self.mask();
        let mut i = self.home(tag(s));
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = s;
    }

    pub(crate) fn remove<Q: Hash + Eq + ?Sized>(&mut self, q: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let (i, e) = self.find(q)?;
        self.vacate(i);
        let (_, v) = self.entries.swap_remove(e);
        if e < self.entries.len() {
            // The last entry moved to `e`: its slot still names its old index.
            let (t, old) = (tag_of(self.entries[e].0.borrow()), self.entries.len());
            let mask = self.mask();
            let mut i = self.home(t);
            while self.slots[i] != pack(t, old) {
                i = (i + 1) & mask;
            }
            self.slots[i] = pack(t, e);
        }
        if self.slots.len() > MIN_SLOTS && self.entries.len() * 8 < self.slots.len() {
            self.resize(self.slots.len() / 2);
        }
        Some(v)
    }

    /// Empties slot `i`, shifting back each later slot of the run that may move closer to its
    /// home, so that no lookup meets an empty slot before its key.
    fn vacate(&mut self, i: usize) {
        let mask = self.mask();
        let mut hole = i;
        let mut j = (i + 1) & mask;
        loop {
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let home = self.home(tag(s));
            // The hole lies between the slot's home and the slot (cyclically): it may move there.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = s;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = 0;
    }

    /// Rebuilds the slots at `n` (a power of two), from their tags: no key is hashed again.
    fn resize(&mut self, n: usize) {
        let old = std::mem::replace(&mut self.slots, vec![0; n].into_boxed_slice());
        self.bits = n.trailing_zeros();
        for s in old.iter().copied().filter(|&s| s != 0) {
            self.place(s);
        }
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// The entries, in no particular order.
    // The image writer's (index/image_write.rs), which only diagnostics builds call so far.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The entries, in no particular order.
    pub(crate) fn into_entries(self) -> Vec<(K, V)> {
        self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A small deterministic generator (the tests need no crate for it).
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    fn check(m: &ProbeMap<u64, u64>, model: &HashMap<u64, u64>) {
        assert_eq!(m.len(), model.len());
        for (k, v) in model {
            assert_eq!(m.get(k), Some(v), "key {k}");
        }
        let full = m.slots.iter().filter(|&&s| s != 0).count();
        assert_eq!(full, m.len(), "one slot per entry");
        assert!(full * 4 <= m.slots.len() * 3, "at most three quarters full");
        // Every entry is found from its home without crossing an empty slot.
        for (e, (k, _)) in m.entries.iter().enumerate() {
            assert_eq!(m.find(k).map(|(_, i)| i), Some(e));
        }
    }

    #[test]
    fn churn_at_a_steady_size_agrees_with_a_model_and_never_rebuilds() {
        let mut m: ProbeMap<u64, u64> = ProbeMap::default();
        let mut model = HashMap::new();
        let mut x = 0x2545_F491_4F6C_DD1D;
        for i in 0..5_000 {
            let k = next(&mut x) % 100_000;
            *m.get_or_insert_with(&k, || k, || 0) = i;
            model.insert(k, i);
        }
        check(&m, &model);
        let slots = m.slots.len();
        // Remove one key, insert another, many times over: the table is never rebuilt.
        for i in 0..50_000 {
            let gone = *model.keys().next().expect("not empty");
            assert_eq!(m.remove(&gone), model.remove(&gone));
            let k = next(&mut x) % 1_000_000;
            *m.get_or_insert_with(&k, || k, || 0) = i;
            model.insert(k, i);
            assert_eq!(m.slots.len(), slots, "rebuilt at change {i}");
            if i % 5_000 == 0 {
                check(&m, &model);
            }
        }
        check(&m, &model);
        assert_eq!(m.get(&u64::MAX), None);
        assert_eq!(m.remove(&u64::MAX), None);
    }

    #[test]
    fn a_map_grows_and_shrinks_keeping_every_key() {
        let mut m: ProbeMap<u64, u64> = ProbeMap::default();
        let mut model = HashMap::new();
        for k in 0..10_000u64 {
            *m.get_or_insert_with(&k, || k, || k * 2) += 1;
            model.insert(k, k * 2 + 1);
        }
        check(&m, &model);
        let grown = m.slots.len();
        for k in (0..10_000u64).filter(|k| k % 10 != 0) {
            assert_eq!(m.remove(&k), model.remove(&k));
        }
        check(&m, &model);
        assert!(
            m.slots.len() < grown,
            "shrinks with its keys: {}",
            m.slots.len()
        );
        assert_eq!(m.values().count(), model.len());
        let mut left: Vec<(u64, u64)> = m.into_entries();
        left.sort();
        let mut want: Vec<(u64, u64)> = model.into_iter().collect();
        want.sort();
        assert_eq!(left, want);
    }

    #[test]
    fn keys_sharing_a_home_slot_are_all_found_and_removed() {
        // Find keys whose tags share their top bits at the smallest size: one long run.
        let home = |k: u64| tag_of(&k) >> (32 - MIN_SLOTS.trailing_zeros());
        let same: Vec<u64> = (0..).filter(|&k| home(k) == home(0)).take(10).collect();
        let mut m: ProbeMap<u64, u64> = ProbeMap::default();
        for &k in &same {
            m.get_or_insert_with(&k, || k, || k);
        }
        for (n, &k) in same.iter().enumerate() {
            assert_eq!(m.remove(&k), Some(k));
            for &l in &same[n + 1..] {
                assert_eq!(m.get(&l), Some(&l), "{l} after removing {k}");
            }
        }
        assert_eq!(m.len(), 0);
    }
}
