//! Route id to slot: a hash table that stores no ids. The router already holds every live
//! slot's id (in its program's record), so a table entry is the slot and a 32-bit tag of the
//! id's hash in one word, and a lookup confirms a tag match against the router's. Eight bytes a word, the table between three
//! eighths and three quarters full: 11 to 21 bytes a route (21 at 50,000 routes), where a
//! `HashMap<Uuid, u32>` took 27 to 33.
//!
//! As the index's `ProbeMap`, it probes linearly and closes the gap
//! a removal leaves by shifting the entries after it back, so a route changed in place (an id
//! removed and inserted again) never leaves tombstones that would make some later insert
//! rebuild the whole table.
//!
//! Invariants (a reader must not break them):
//! - `words.len()` is a power of two, at least [`MIN_WORDS`], and at most three quarters of the
//!   words are full, so every probe ends at an empty word.
//! - A full word is the id's tag (the top 32 bits of [`hash`]) above its slot + 1; an empty
//!   word is 0. An entry's home is the top `bits` bits of its tag.
//! - Between an entry's home and its word there is no empty word (cyclically).
//! - The map holds exactly the router's live ids, each once, and `id_of(slot)` (the router's)
//!   gives the id of every slot it holds: every call passes the same `id_of`.

use uuid::Uuid;

const MIN_WORDS: usize = 16;

#[derive(Debug)]
pub(super) struct IdMap {
    words: Box<[u64]>,
    /// `words.len() == 1 << bits`.
    bits: u32,
    len: usize,
}

impl Default for IdMap {
    fn default() -> Self {
        IdMap {
            words: vec![0; MIN_WORDS].into_boxed_slice(),
            bits: MIN_WORDS.trailing_zeros(),
            len: 0,
        }
    }
}

/// A mix of both halves of the id: ids are often random, but a configuration may number
/// them (`00000000-…-0001`, `…-0002`), which must spread as well.
fn hash(id: Uuid) -> u64 {
    let (high, low) = id.as_u64_pair();
    let x = high.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ low;
    let x = (x ^ (x >> 31)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    x ^ (x >> 32)
}

fn tag_of(word: u64) -> u32 {
    (word >> 32) as u32
}

fn slot_of(word: u64) -> u32 {
    (word as u32) - 1
}

impl IdMap {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn mask(&self) -> usize {
        self.words.len() - 1
    }

    fn home(&self, tag: u32) -> usize {
        (tag >> (32 - self.bits)) as usize
    }

    /// The word holding `id`, if the map has it.
    fn find(&self, id: Uuid, id_of: impl Fn(u32) -> Option<Uuid>) -> Option<usize> {
        let tag = (hash(id) >> 32) as u32;
        let mut i = self.home(tag);
        loop {
            let w = self.words[i];
            if w == 0 {
                return None;
            }
            if tag_of(w) == tag && id_of(slot_of(w)) == Some(id) {
                return Some(i);
            }
            i = (i + 1) & self.mask();
        }
    }

    /// The slot of `id`.
    pub(super) fn get(&self, id: Uuid, id_of: impl Fn(u32) -> Option<Uuid>) -> Option<u32> {
        self.find(id, id_of).map(|i| slot_of(self.words[i]))
    }

    /// Records `id` in `slot`; the map must not hold `id` already.
    pub(super) fn insert(&mut self, id: Uuid, slot: u32) {
        assert!(slot < u32::MAX, "more slots than an id map holds");
        self.reserve(self.len + 1);
        let tag = (hash(id) >> 32) as u32;
        self.put((u64::from(tag) << 32) | u64::from(slot + 1));
        self.len += 1;
    }

    /// Writes an entry into the first empty word from its home.
    fn put(&mut self, word: u64) {
        let mut i = self.home(tag_of(word));
        while self.words[i] != 0 {
            i = (i + 1) & self.mask();
        }
        self.words[i] = word;
    }

    /// Takes `id` out, returning its slot.
    pub(super) fn remove(&mut self, id: Uuid, id_of: impl Fn(u32) -> Option<Uuid>) -> Option<u32> {
        let mut hole = self.find(id, id_of)?;
        let slot = slot_of(self.words[hole]);
        // Up to the end of the run, move into the hole every entry whose home is not between
        // the hole and itself (it would stay reachable from its home); its word is the new
        // hole. So no empty word is left between any entry and its home.
        let mut next = hole;
        loop {
            next = (next + 1) & self.mask();
            let w = self.words[next];
            if w == 0 {
                break;
            }
            let home = self.home(tag_of(w));
            let home_after_hole = (home.wrapping_sub(hole + 1) & self.mask())
                < (next.wrapping_sub(hole) & self.mask());
            if !home_after_hole {
                self.words[hole] = w;
                hole = next;
            }
        }
        self.words[hole] = 0;
        self.len -= 1;
        if self.words.len() > MIN_WORDS && self.len * 8 < self.words.len() {
            self.resize(self.words.len() / 2);
        }
        Some(slot)
    }

    /// Room for `n` ids without growing.
    pub(super) fn reserve(&mut self, n: usize) {
        if n * 4 > self.words.len() * 3 {
            let words = (n * 4 / 3 + 1).next_power_of_two().max(MIN_WORDS);
            self.resize(words);
        }
    }

    /// Moves every entry into a table of `words` words, by the tags it keeps (no id is read).
    fn resize(&mut self, words: usize) {
        let old = std::mem::replace(&mut self.words, vec![0; words].into_boxed_slice());
        self.bits = words.trailing_zeros();
        for w in old.iter().copied().filter(|w| *w != 0) {
            self.put(w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// A catalog stand-in: slot -> id.
    fn id_of(ids: &HashMap<u32, Uuid>) -> impl Fn(u32) -> Option<Uuid> + '_ {
        |s| ids.get(&s).copied()
    }

    #[test]
    fn numbered_ids_are_found_removed_and_found_again() {
        let mut map = IdMap::default();
        let mut catalog = HashMap::new();
        for n in 0..10_000u32 {
            let id = Uuid::from_u128(u128::from(n) + 1);
            catalog.insert(n, id);
            map.insert(id, n);
        }
        assert_eq!(map.len(), 10_000);
        assert!(map.words.len() <= 16_384, "{}", map.words.len());
        for n in (0..10_000u32).step_by(2) {
            let id = Uuid::from_u128(u128::from(n) + 1);
            assert_eq!(map.remove(id, id_of(&catalog)), Some(n));
            catalog.remove(&n);
        }
        for n in 0..10_000u32 {
            let id = Uuid::from_u128(u128::from(n) + 1);
            let want = (n % 2 == 1).then_some(n);
            assert_eq!(map.get(id, id_of(&catalog)), want, "{n}");
        }
        assert_eq!(map.get(Uuid::nil(), id_of(&catalog)), None);
    }

    #[test]
    fn a_map_emptied_shrinks_back() {
        let mut map = IdMap::default();
        let mut catalog = HashMap::new();
        for n in 0..5_000u32 {
            let id = Uuid::from_u128(u128::from(n) << 64);
            catalog.insert(n, id);
            map.insert(id, n);
        }
        for n in 0..5_000u32 {
            assert_eq!(map.remove(catalog[&n], id_of(&catalog)), Some(n));
        }
        assert_eq!(map.len(), 0);
        assert_eq!(map.words.len(), MIN_WORDS);
    }

    proptest! {
        /// Random inserts and removals (ids drawn from a small set, so the same id comes and
        /// goes) agree with a std map after every step, and every probe run stays unbroken.
        #[test]
        fn churn_agrees_with_a_std_map(ops in prop::collection::vec((any::<bool>(), 0u8..64), 1..400)) {
            let mut map = IdMap::default();
            let mut catalog: HashMap<u32, Uuid> = HashMap::new();
            let mut model: HashMap<Uuid, u32> = HashMap::new();
            let mut next_slot = 0u32;
            for (add, n) in ops {
                // Ids sharing their low half, and some sharing their high half.
                let id = Uuid::from_u64_pair(u64::from(n % 8), u64::from(n / 8));
                if add && !model.contains_key(&id) {
                    catalog.insert(next_slot, id);
                    map.insert(id, next_slot);
                    model.insert(id, next_slot);
                    next_slot += 1;
                } else if !add {
                    let got = map.remove(id, id_of(&catalog));
                    let want = model.remove(&id);
                    prop_assert_eq!(got, want);
                    if let Some(s) = want {
                        catalog.remove(&s);
                    }
                }
                prop_assert_eq!(map.len(), model.len());
                for (id, slot) in &model {
                    prop_assert_eq!(map.get(*id, id_of(&catalog)), Some(*slot));
                }
            }
        }
    }
}
