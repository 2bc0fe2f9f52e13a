//! Payloads by exact byte-string key: the index's maps of host names, methods, header values and
//! path segments. Most of them are small (the methods of one path, the next segments under one
//! prefix), and a request looks one up at every level it passes: a small map is a list scanned
//! in place, one allocation whose first line holds the first keys, where a hash table reads its
//! control bytes and then a bucket elsewhere, two dependent cache misses per level in a table
//! of 100,000 routes. A map that grows past [`FEW`] keys becomes a hash table (a
//! [`ProbeMap`], which no churn of keys makes rebuild itself), and one that shrinks to half of
//! that a list again, so a lookup costs a few comparisons or one hash. The
//! list keeps its keys apart from the payloads (a payload is a subtree node, several times a
//! key's size): a scan reads the keys' few lines, then the one payload it found.
//!
//! A map is an entry of its owner (a path tree node is an entry of its parent's map), so its
//! size counts once per node: a list's keys and payloads are slices boxed to their length (a
//! list holds at most [`FEW`], and an insert or a removal reallocates them) and a hash table is
//! boxed, which makes a map 32 bytes where two vectors beside a table took 56. A big map's
//! lookup reads its table's header through the box, one line that its many lookups keep warm.
//!
//! A map that is itself boxed (a path tree node's children) holds its hash table in place
//! instead ([`Unboxed`]): a lookup there reads the owner's box and then the table, where a
//! table boxed inside a box would be one more line on the way.
//!
//! Invariants: a key is stored once, whichever form the map has; keys compare as their bytes;
//! in a list, `keys[i]` is the key of `vals[i]`.

use std::ops::{Deref, DerefMut};

use super::probe_map::ProbeMap;
use super::small_key::SmallKey;

/// Most keys a map keeps as a list.
const FEW: usize = 8;

/// A map's hash table: `Box<ProbeMap<…>>` (the default) or in place, [`Unboxed`].
pub(crate) trait Table<T>:
    Deref<Target = ProbeMap<SmallKey, T>> + DerefMut + From<ProbeMap<SmallKey, T>>
{
}

impl<T, H> Table<T> for H where
    H: Deref<Target = ProbeMap<SmallKey, T>> + DerefMut + From<ProbeMap<SmallKey, T>>
{
}

/// A hash table held in place, for a map that its owner already boxes.
#[derive(Debug)]
pub(crate) struct Unboxed<P>(P);

impl<P> Deref for Unboxed<P> {
    type Target = P;
    #[inline]
    fn deref(&self) -> &P {
        &self.0
    }
}

impl<P> DerefMut for Unboxed<P> {
    #[inline]
    fn deref_mut(&mut self) -> &mut P {
        &mut self.0
    }
}

impl<P> From<P> for Unboxed<P> {
    fn from(p: P) -> Self {
        Unboxed(p)
    }
}

#[derive(Debug)]
pub(crate) enum ExactMap<T, H: Table<T> = Box<ProbeMap<SmallKey, T>>> {
    Few {
        keys: Box<[SmallKey]>,
        vals: Box<[T]>,
    },
    Many(H),
}

impl<T, H: Table<T>> Default for ExactMap<T, H> {
    fn default() -> Self {
        ExactMap::Few {
            keys: Box::default(),
            vals: Box::default(),
        }
    }
}

/// `b` with `x` appended, in an allocation of exactly its new length.
fn pushed<X>(b: &mut Box<[X]>, x: X) {
    let mut v = std::mem::take(b).into_vec();
    v.reserve_exact(1);
    v.push(x);
    *b = v.into_boxed_slice();
}

/// `b` without its element `i` (the last moved into its place), in an allocation of exactly
/// its new length.
fn swap_removed<X>(b: &mut Box<[X]>, i: usize) -> X {
    let mut v = std::mem::take(b).into_vec();
    let x = v.swap_remove(i);
    *b = crate::fitted::fitted(v);
    x
}

/// Where `key` is in a list's keys. A plain loop: `Iterator::position` was compiled out of
/// line in some builds (a call per lookup of a request's host or method), depending on how the
/// crate happened to be split for code generation.
#[inline(always)]
fn position(keys: &[SmallKey], key: &[u8]) -> Option<usize> {
    for (i, k) in keys.iter().enumerate() {
        if crate::short_eq::eq(k, key) {
            return Some(i);
        }
    }
    None
}

impl<T, H: Table<T>> ExactMap<T, H> {
    pub(crate) fn len(&self) -> usize {
        match self {
            ExactMap::Few { keys, .. } => keys.len(),
            ExactMap::Many(m) => m.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub(crate) fn get(&self, key: &[u8]) -> Option<&T> {
        match self {
            ExactMap::Few { keys, vals } => position(keys, key).map(|i| &vals[i]),
            ExactMap::Many(m) => m.get_by(key, |k| crate::short_eq::eq(k, key)),
        }
    }

    pub(crate) fn get_mut(&mut self, key: &[u8]) -> Option<&mut T> {
        match self {
            ExactMap::Few { keys, vals } => position(keys, key).map(|i| &mut vals[i]),
            ExactMap::Many(m) => m.get_mut(key),
        }
    }

    /// The payload of `key`, inserted with `make` if the key is new.
    pub(crate) fn get_or_insert_with(&mut self, key: &[u8], make: impl FnOnce() -> T) -> &mut T {
        if let ExactMap::Few { keys, vals } = self {
            if keys.len() == FEW && position(keys, key).is_none() {
                let m: ProbeMap<SmallKey, T> = std::mem::take(keys)
                    .into_vec()
                    .into_iter()
                    .zip(std::mem::take(vals).into_vec())
                    .collect();
                *self = ExactMap::Many(m.into());
            }
        }
        match self {
            ExactMap::Few { keys, vals } => {
                let i = match position(keys, key) {
                    Some(i) => i,
                    None => {
                        pushed(keys, SmallKey::new(key));
                        pushed(vals, make());
                        vals.len() - 1
                    }
                };
                &mut vals[i]
            }
            ExactMap::Many(m) => m.get_or_insert_with(key, || SmallKey::new(key), make),
        }
    }

    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<T> {
        match self {
            ExactMap::Few { keys, vals } => {
                let i = position(keys, key)?;
                swap_removed(keys, i);
                Some(swap_removed(vals, i))
            }
            ExactMap::Many(m) => {
                let x = m.remove(key)?;
                if m.len() <= FEW / 2 {
                    let (keys, vals): (Vec<_>, Vec<_>) =
                        std::mem::take(&mut **m).into_entries().into_iter().unzip();
                    *self = ExactMap::Few {
                        keys: crate::fitted::fitted(keys),
                        vals: crate::fitted::fitted(vals),
                    };
                }
                Some(x)
            }
        }
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        let (few, many) = match self {
            ExactMap::Few { vals, .. } => (Some(vals.iter()), None),
            ExactMap::Many(m) => (None, Some(m.values())),
        };
        few.into_iter().flatten().chain(many.into_iter().flatten())
    }

    /// Every key with its payload, in no particular order.
    // The image writer's (index/image_write.rs), which only diagnostics builds call so far.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&[u8], &T)> {
        let (few, many) = match self {
            ExactMap::Few { keys, vals } => (Some(keys.iter().zip(vals.iter())), None),
            ExactMap::Many(m) => (None, Some(m.entries())),
        };
        let few = few.into_iter().flatten().map(|(k, v)| (k.as_bytes(), v));
        let many = many.into_iter().flatten().map(|(k, v)| (k.as_bytes(), v));
        few.chain(many)
    }

    /// Takes every payload out, leaving the map empty.
    pub(crate) fn drain_values(&mut self) -> impl Iterator<Item = T> {
        let (few, many) = match std::mem::take(self) {
            ExactMap::Few { vals, .. } => (Some(vals.into_vec().into_iter()), None),
            ExactMap::Many(mut m) => {
                let entries = std::mem::take(&mut *m).into_entries();
                (None, Some(entries.into_iter().map(|(_, v)| v)))
            }
        };
        few.into_iter().flatten().chain(many.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: usize) -> Vec<u8> {
        format!("k{i}").into_bytes()
    }

    #[test]
    fn a_map_answers_the_same_as_a_list_and_as_a_hash_table() {
        answers_as_a_list_and_as_a_hash_table::<Box<ProbeMap<SmallKey, usize>>>();
        answers_as_a_list_and_as_a_hash_table::<Unboxed<ProbeMap<SmallKey, usize>>>();
    }

    fn answers_as_a_list_and_as_a_hash_table<H: Table<usize>>() {
        let mut m: ExactMap<usize, H> = ExactMap::default();
        for i in 0..3 * FEW {
            *m.get_or_insert_with(&key(i), || 0) += i;
            // Inserting a key again finds it.
            *m.get_or_insert_with(&key(i), || 1000) += 1;
            assert_eq!(m.len(), i + 1);
            assert_eq!(matches!(m, ExactMap::Few { .. }), i < FEW, "{i}");
            for j in 0..=i {
                assert_eq!(m.get(&key(j)), Some(&(j + 1)), "{i} {j}");
            }
            assert_eq!(m.get(&key(i + 1)), None);
            assert_eq!(m.values().count(), i + 1);
        }
        for i in (0..3 * FEW).rev() {
            assert_eq!(m.remove(&key(i)), Some(i + 1));
            assert_eq!(m.remove(&key(i)), None);
            assert_eq!(m.len(), i);
            // A hash table again becomes a list only at half the size it left it at.
            assert_eq!(matches!(m, ExactMap::Few { .. }), i <= FEW / 2, "{i}");
            for j in 0..i {
                assert_eq!(m.get_mut(&key(j)).copied(), Some(j + 1), "{i} {j}");
            }
        }
        assert!(m.is_empty());
    }

    #[test]
    fn keys_compare_as_their_bytes_short_or_long() {
        let long = [b'x'; 40];
        let mut m: ExactMap<i32> = ExactMap::default();
        *m.get_or_insert_with(&long, || 0) = 1;
        *m.get_or_insert_with(&long[..22], || 0) = 2;
        *m.get_or_insert_with(b"", || 0) = 3;
        assert_eq!(m.get(&long), Some(&1));
        assert_eq!(m.get(&long[..22]), Some(&2));
        assert_eq!(m.get(b""), Some(&3));
        assert_eq!(m.get(&long[..21]), None);
        let mut drained: Vec<i32> = m.drain_values().collect();
        drained.sort();
        assert_eq!(drained, [1, 2, 3]);
        assert!(m.is_empty());
    }
}
