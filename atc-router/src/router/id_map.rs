//! Route id to slot: a hash table that stores no ids and no hashes. The router already holds
//! every live slot's id (in its program's record), so a table word is the slot alone, four
//! bytes, and a probe confirms a word against the router's id. The table is between three
//! eighths and three quarters full: 5 to 11 bytes a route, where words holding a hash tag
//! beside the slot took twice that and a `HashMap<Uuid, u32>` 27 to 33.
//!
//! What that costs is on the control plane only (no request reads this map): a probe reads the
//! id of each slot it passes (one record; a probe passes about two words at the load this
//! table keeps), a removal the ids of the run it shifts, and growing re-reads every live id,
//! in slot order ([`SlotIds::live`]), so sequentially: a step of a fraction of a millisecond
//! at 50,000 routes, once per doubling. A router built for a sync reserves its size first.
//!
//! As the index's `ProbeMap`, it probes linearly and closes the gap a removal leaves by shifting
//! the entries after it back, so a route changed in place (an id removed and inserted again)
//! never leaves tombstones that would make some later insert rebuild the whole table.
//!
//! Invariants (a reader must not break them):
//! - `words.len()` is a power of two, at least [`MIN_WORDS`], and at most three quarters of the
//!   words are full, so every probe ends at an empty word.
//! - A full word is its slot + 1; an empty word is 0. An entry's home is the top `bits` bits of
//!   the 32-bit [`hash`] of its id.
//! - Between an entry's home and its word there is no empty word (cyclically).
//! - The map holds exactly the router's live ids, each once, but while a route is being put in
//!   (its slot not live yet, [`IdMap::insert`]) or taken out (its slot still live,
//!   [`IdMap::remove`]); `ids` ([`SlotIds`], the router's) gives the id of every slot the map
//!   holds: every call passes the same.

use uuid::Uuid;

const MIN_WORDS: usize = 16;

/// The ids of a router's slots: what the map confirms its words against.
pub(super) trait SlotIds {
    /// The id of the route in `slot`, `None` for a free slot.
    fn id(&self, slot: u32) -> Option<Uuid>;
    /// Every live slot and its id, in slot order.
    fn live(&self) -> impl Iterator<Item = (u32, Uuid)>;
}

#[derive(Debug)]
pub(super) struct IdMap {
    words: Box<[u32]>,
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
fn hash(id: Uuid) -> u32 {
    let (high, low) = id.as_u64_pair();
    let x = high.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ low;
    let x = (x ^ (x >> 31)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    ((x ^ (x >> 32)) >> 32) as u32
}

fn slot_of(word: u32) -> u32 {
    word - 1
}

impl IdMap {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn mask(&self) -> usize {
        self.words.len() - 1
    }

    fn home(&self, id: Uuid) -> usize {
        (hash(id) >> (32 - self.bits)) as usize
    }

    /// The word holding `id`, if the map has it.
    fn find(&self, id: Uuid, ids: &impl SlotIds) -> Option<usize> {
        let mut i = self.home(id);
        loop {
            let w = self.words[i];
            if w == 0 {
                return None;
            }
            if ids.id(slot_of(w)) == Some(id) {
                return Some(i);
            }
            i = (i + 1) & self.mask();
        }
    }

    /// The slot of `id`.
    pub(super) fn get(&self, id: Uuid, ids: &impl SlotIds) -> Option<u32> {
        self.find(id, ids).map(|i| slot_of(self.words[i]))
    }

    /// Records `id` in `slot`, before the slot is live (so that a growth, which reads every
    /// live slot, does not meet it); the map must not hold `id` already.
    pub(super) fn insert(&mut self, id: Uuid, slot: u32, ids: &impl SlotIds) {
        assert!(slot < u32::MAX, "more slots than an id map holds");
        self.reserve(self.len + 1, ids);
        self.put(self.home(id), slot);
        self.len += 1;
    }

    /// Writes `slot` into the first empty word from `home`.
    fn put(&mut self, home: usize, slot: u32) {
        let mut i = home;
        while self.words[i] != 0 {
            i = (i + 1) & self.mask();
        }
        self.words[i] = slot + 1;
    }

    /// Takes `id` out, returning its slot; the slot is still live.
    pub(super) fn remove(&mut self, id: Uuid, ids: &impl SlotIds) -> Option<u32> {
        let mut hole = self.find(id, ids)?;
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
            let home = self.home(ids.id(slot_of(w)).expect("the map holds live slots"));
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
            // Few entries are left: moved by their words (`slot` is gone from them).
            let old = std::mem::replace(&mut self.words, Box::new([]));
            self.make(self.words_for(self.len));
            for w in old.iter().copied().filter(|w| *w != 0) {
                let home = self.home(ids.id(slot_of(w)).expect("the map holds live slots"));
                self.put(home, slot_of(w));
            }
        }
        Some(slot)
    }

    /// Room for `n` ids without growing. Growing re-reads every live slot's id in slot order
    /// (a sequential read of the router's records, where moving the words would read them in
    /// hash order).
    pub(super) fn reserve(&mut self, n: usize, ids: &impl SlotIds) {
        if n * 4 > self.words.len() * 3 {
            self.make(self.words_for(n));
            for (slot, id) in ids.live() {
                self.put(self.home(id), slot);
            }
        }
    }

    /// The fewest words (a power of two) that hold `n` entries at most three quarters full.
    fn words_for(&self, n: usize) -> usize {
        (n * 4 / 3 + 1).next_power_of_two().max(MIN_WORDS)
    }

    /// An empty table of `words` words.
    fn make(&mut self, words: usize) {
        self.words = vec![0; words].into_boxed_slice();
        self.bits = words.trailing_zeros();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// A router stand-in: the ids of its live slots.
    #[derive(Default)]
    struct Slots(HashMap<u32, Uuid>);

    impl SlotIds for Slots {
        fn id(&self, slot: u32) -> Option<Uuid> {
            self.0.get(&slot).copied()
        }

        fn live(&self) -> impl Iterator<Item = (u32, Uuid)> {
            let mut v: Vec<(u32, Uuid)> = self.0.iter().map(|(s, id)| (*s, *id)).collect();
            v.sort();
            v.into_iter()
        }
    }

    /// Puts `id` in `slot` as the router does: in the map, then live.
    fn put(map: &mut IdMap, slots: &mut Slots, id: Uuid, slot: u32) {
        map.insert(id, slot, slots);
        slots.0.insert(slot, id);
    }

    /// Takes `id` out as the router does: out of the map, then free.
    fn take(map: &mut IdMap, slots: &mut Slots, id: Uuid) -> Option<u32> {
        let got = map.remove(id, slots);
        if let Some(s) = got {
            slots.0.remove(&s);
        }
        got
    }

    #[test]
    fn numbered_ids_are_found_removed_and_found_again() {
        let mut map = IdMap::default();
        let mut slots = Slots::default();
        for n in 0..10_000u32 {
            put(&mut map, &mut slots, Uuid::from_u128(u128::from(n) + 1), n);
        }
        assert_eq!(map.len(), 10_000);
        assert!(map.words.len() <= 16_384, "{}", map.words.len());
        for n in (0..10_000u32).step_by(2) {
            let id = Uuid::from_u128(u128::from(n) + 1);
            assert_eq!(take(&mut map, &mut slots, id), Some(n));
        }
        for n in 0..10_000u32 {
            let id = Uuid::from_u128(u128::from(n) + 1);
            let want = (n % 2 == 1).then_some(n);
            assert_eq!(map.get(id, &slots), want, "{n}");
        }
        assert_eq!(map.get(Uuid::nil(), &slots), None);
    }

    #[test]
    fn a_map_emptied_shrinks_back() {
        let mut map = IdMap::default();
        let mut slots = Slots::default();
        for n in 0..5_000u32 {
            put(
                &mut map,
                &mut slots,
                Uuid::from_u128(u128::from(n) << 64),
                n,
            );
        }
        for n in 0..5_000u32 {
            let id = Uuid::from_u128(u128::from(n) << 64);
            assert_eq!(take(&mut map, &mut slots, id), Some(n));
            for m in n + 1..(n + 50).min(5_000) {
                assert_eq!(
                    map.get(Uuid::from_u128(u128::from(m) << 64), &slots),
                    Some(m)
                );
            }
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
            let mut slots = Slots::default();
            let mut model: HashMap<Uuid, u32> = HashMap::new();
            let mut free: Vec<u32> = Vec::new();
            let mut next_slot = 0u32;
            for (add, n) in ops {
                // Ids sharing their low half, and some sharing their high half.
                let id = Uuid::from_u64_pair(u64::from(n % 8), u64::from(n / 8));
                if add && !model.contains_key(&id) {
                    // Freed slots are taken again first, as the router does.
                    let slot = free.pop().unwrap_or_else(|| {
                        next_slot += 1;
                        next_slot - 1
                    });
                    put(&mut map, &mut slots, id, slot);
                    model.insert(id, slot);
                } else if !add {
                    let got = take(&mut map, &mut slots, id);
                    let want = model.remove(&id);
                    prop_assert_eq!(got, want);
                    free.extend(want);
                }
                prop_assert_eq!(map.len(), model.len());
                for (id, slot) in &model {
                    prop_assert_eq!(map.get(*id, &slots), Some(*slot));
                }
                let full = map.words.iter().filter(|w| **w != 0).count();
                prop_assert_eq!(full, model.len());
                prop_assert!(full * 4 <= map.words.len() * 3);
            }
        }
    }
}
