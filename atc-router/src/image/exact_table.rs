//! Byte-string keys to `u32` values in image form: a table of words and the keys' bytes, as
//! two image sections hold them, looked up in place with one hash and a short probe: the form
//! of an exact-key map (hosts, methods, header values, path segments) in an image.
//!
//! Layout, in words: the number of slots (a power of two), the number of keys, then per slot
//! four words: the key's hash, its offset in the bytes, its length ([`EMPTY`] for an empty
//! slot) and its value. A key sits in the first empty slot at or after its hash's home slot
//! (linear probing), and the table is at most half full, so a lookup reads one or two slots of
//! one or two cache lines, then compares the key's bytes once.
//!
//! Invariants: keys are distinct; the hash ([`key_hash`]) is this module's own, so that an image
//! means the same to every build of the same library version (the container refuses images of
//! another). A reader trusts nothing in the words beyond the container's checksum: every read is
//! bounds-checked, a probe stops after as many slots as there are, and a table whose slot count
//! is not a power of two or whose words are short is no table ([`ExactTable::new`]).

use super::container::Words;

/// The length word of an empty slot.
pub const EMPTY: u32 = u32::MAX;

const HEAD: usize = 2;
const SLOT: usize = 4;

/// The hash keys are placed by: this module's own (stable across builds and platforms), eight
/// bytes at a time, so that a host name costs a few multiplies rather than one per byte.
pub fn key_hash(key: &[u8]) -> u32 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |h: u64, w: u64| (h.rotate_left(23) ^ w).wrapping_mul(K);
    let mut h = (key.len() as u64).wrapping_mul(K);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        h = mix(
            h,
            u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        );
    }
    // The last 1 to 7 bytes as one word (the length, mixed in first, tells tails apart).
    let t = chunks.remainder();
    let n = t.len();
    if n >= 4 {
        let lo = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
        let hi = u32::from_le_bytes([t[n - 4], t[n - 3], t[n - 2], t[n - 1]]);
        h = mix(h, u64::from(lo) | u64::from(hi) << 32);
    } else if n > 0 {
        h = mix(
            h,
            u64::from(t[0]) | u64::from(t[n / 2]) << 8 | u64::from(t[n - 1]) << 16,
        );
    }
    (h ^ h >> 32) as u32
}

/// Writes a table of `entries` (distinct keys): its words, its keys appended to `bytes` (whose
/// offsets they take). `None` when two keys are equal or the bytes outgrow 32-bit offsets.
pub fn write(entries: &[(&[u8], u32)], bytes: &mut Vec<u8>) -> Option<Vec<u32>> {
    let slots = (entries.len() * 2).max(1).next_power_of_two();
    let mask = slots - 1;
    let mut words = vec![0u32; HEAD + SLOT * slots];
    words[0] = u32::try_from(slots).ok()?;
    words[1] = u32::try_from(entries.len()).ok()?;
    for s in 0..slots {
        words[HEAD + SLOT * s + 2] = EMPTY;
    }
    for &(key, value) in entries {
        let hash = key_hash(key);
        let mut s = hash as usize & mask;
        loop {
            let at = HEAD + SLOT * s;
            if words[at + 2] == EMPTY {
                let off = u32::try_from(bytes.len()).ok()?;
                let len = u32::try_from(key.len()).ok().filter(|&l| l != EMPTY)?;
                bytes.extend_from_slice(key);
                u32::try_from(bytes.len()).ok()?;
                words[at..at + SLOT].copy_from_slice(&[hash, off, len, value]);
                break;
            }
            let (o, l) = (words[at + 1] as usize, words[at + 2] as usize);
            if words[at] == hash && bytes.get(o..o + l) == Some(key) {
                return None;
            }
            s = (s + 1) & mask;
        }
    }
    Some(words)
}

/// A table read in place from an image's words and bytes.
#[derive(Debug, Clone, Copy)]
pub struct ExactTable<'a> {
    words: Words<'a>,
    bytes: &'a [u8],
    mask: usize,
}

impl<'a> ExactTable<'a> {
    /// The table `words` hold (its keys in `bytes`); `None` when the words cannot be one.
    pub fn new(words: Words<'a>, bytes: &'a [u8]) -> Option<ExactTable<'a>> {
        let slots = words.get(0)? as usize;
        if !slots.is_power_of_two() || words.len() != HEAD + SLOT * slots {
            return None;
        }
        Some(ExactTable {
            words,
            bytes,
            mask: slots - 1,
        })
    }

    /// Number of keys (as the table says).
    pub fn len(&self) -> usize {
        self.words.get(1).unwrap_or(0) as usize
    }

    /// Whether it has no keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `key`, if the table has it.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        let hash = key_hash(key);
        let mut s = hash as usize & self.mask;
        for _ in 0..=self.mask {
            let [h, off, len, value] = self.words.array::<SLOT>(HEAD + SLOT * s)?;
            if len == EMPTY {
                return None;
            }
            if h == hash && len as usize == key.len() {
                let off = off as usize;
                if self
                    .bytes
                    .get(off..off.checked_add(key.len())?)
                    .is_some_and(|stored| stored == key)
                {
                    return Some(value);
                }
            }
            s = (s + 1) & self.mask;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn as_bytes(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn a_table_finds_every_key_it_holds_and_no_other() {
        let keys: Vec<String> = (0..1000).map(|i| format!("host-{i}.example.com")).collect();
        let entries: Vec<(&[u8], u32)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_bytes(), i as u32 * 3))
            .collect();
        let mut bytes = b"something before".to_vec();
        let words = as_bytes(&write(&entries, &mut bytes).unwrap());
        let t = ExactTable::new(Words::new(&words).unwrap(), &bytes).unwrap();
        assert_eq!(t.len(), 1000);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(t.get(k.as_bytes()), Some(i as u32 * 3), "{k}");
        }
        for k in [
            "host-1000.example.com",
            "",
            "host-1.example.co",
            "something",
        ] {
            assert_eq!(t.get(k.as_bytes()), None, "{k}");
        }
    }

    #[test]
    fn empty_keys_and_empty_tables_work() {
        let mut bytes = Vec::new();
        let words = as_bytes(&write(&[], &mut bytes).unwrap());
        let t = ExactTable::new(Words::new(&words).unwrap(), &bytes).unwrap();
        assert!(t.is_empty());
        assert_eq!(t.get(b""), None);
        let words = as_bytes(&write(&[(b"", 7), (b"a", 8)], &mut bytes).unwrap());
        let t = ExactTable::new(Words::new(&words).unwrap(), &bytes).unwrap();
        assert_eq!(
            (t.get(b""), t.get(b"a"), t.get(b"b")),
            (Some(7), Some(8), None)
        );
    }

    #[test]
    fn equal_keys_are_refused() {
        assert!(write(&[(b"GET", 1), (b"POST", 2), (b"GET", 3)], &mut Vec::new()).is_none());
    }

    #[test]
    fn words_that_are_no_table_are_refused_or_answer_without_reading_out_of_bounds() {
        assert!(ExactTable::new(Words::new(&as_bytes(&[3, 0])).unwrap(), b"").is_none());
        assert!(ExactTable::new(Words::new(&as_bytes(&[2, 0, 0])).unwrap(), b"").is_none());
        // Full of colliding, lying slots: offsets past the bytes, no empty slot to stop at.
        let mut w = vec![4u32, 4];
        for _ in 0..4 {
            w.extend([key_hash(b"k"), 1_000_000, 1, 9]);
        }
        let words = as_bytes(&w);
        let t = ExactTable::new(Words::new(&words).unwrap(), b"k").unwrap();
        assert_eq!(t.get(b"k"), None);
        assert_eq!(t.get(b"x"), None);
    }

    proptest::proptest! {
        #[test]
        fn a_table_answers_as_a_map(
            keys in proptest::collection::btree_set(proptest::collection::vec(0u8..4, 0..6), 0..64),
            probes in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..6), 0..32),
        ) {
            let map: BTreeMap<Vec<u8>, u32> =
                keys.into_iter().enumerate().map(|(i, k)| (k, i as u32)).collect();
            let entries: Vec<(&[u8], u32)> = map.iter().map(|(k, v)| (&k[..], *v)).collect();
            let mut bytes = Vec::new();
            let words = as_bytes(&write(&entries, &mut bytes).unwrap());
            let t = ExactTable::new(Words::new(&words).unwrap(), &bytes).unwrap();
            for k in map.keys().chain(probes.iter()) {
                proptest::prop_assert_eq!(t.get(k), map.get(k).copied());
            }
        }
    }
}
