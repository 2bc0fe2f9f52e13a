//! A vector indexed by slot, kept in fixed chunks: what the router stores one element per route
//! slot in (the catalog's rows, the program arena's rooms, the fields each route needs).
//!
//! A `Vec` that doubles holds up to half of itself spare: at 50,000 routes the three per-slot
//! arrays had room for 65,536, 22 bytes a route of memory no route uses (32 at 33,000 routes),
//! and each doubling copied megabytes at the cost of the one route change that met it. Here
//! growing appends a chunk: at most one chunk is spare, and nothing already stored moves.
//!
//! Invariants:
//! - Every chunk but the last holds exactly `1 << SHIFT` elements, so element `i` is
//!   `chunks[i >> SHIFT][i & MASK]`.
//! - Only the first chunk grows by doubling (up to `1 << SHIFT`): a table of a few routes pays
//!   for its few slots, not for a chunk. A later chunk is made at its full size.

#[derive(Debug)]
pub(crate) struct SlotVec<T, const SHIFT: u32> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T, const SHIFT: u32> Default for SlotVec<T, SHIFT> {
    fn default() -> Self {
        SlotVec {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T, const SHIFT: u32> SlotVec<T, SHIFT> {
    const CHUNK: usize = 1 << SHIFT;
    const MASK: usize = Self::CHUNK - 1;

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i >> SHIFT)?.get(i & Self::MASK)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.chunks.get_mut(i >> SHIFT)?.get_mut(i & Self::MASK)
    }

    pub(crate) fn push(&mut self, x: T) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < Self::CHUNK => {
                if c.len() == c.capacity() {
                    // The first chunk, doubling up to a chunk's size (never past it).
                    let want = (2 * c.len()).max(4).min(Self::CHUNK);
                    c.reserve_exact(want - c.len());
                }
                c.push(x);
            }
            _ => {
                let mut c = Vec::with_capacity(if self.chunks.is_empty() {
                    4.min(Self::CHUNK)
                } else {
                    Self::CHUNK
                });
                c.push(x);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }

    /// Room for `n` more elements: the chunks they will fill, made now (a router built for a
    /// sync knows its size). The first chunk is sized for what it will hold.
    pub(crate) fn reserve(&mut self, n: usize) {
        let want = self.len + n;
        if let Some(first) = self.chunks.first_mut() {
            let cap = want.min(Self::CHUNK);
            if first.capacity() < cap {
                first.reserve_exact(cap - first.len());
            }
        } else if want > 0 {
            self.chunks.push(Vec::with_capacity(want.min(Self::CHUNK)));
        }
        self.chunks
            .reserve(want.div_ceil(Self::CHUNK).saturating_sub(self.chunks.len()));
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.chunks.iter().flatten()
    }
}

impl<T: Clone, const SHIFT: u32> SlotVec<T, SHIFT> {
    /// Makes the vector `n` long if it is shorter, with copies of `x`.
    pub(crate) fn grow_to(&mut self, n: usize, x: T) {
        while self.len < n {
            self.push(x.clone());
        }
    }
}

impl<T, const SHIFT: u32> std::ops::Index<usize> for SlotVec<T, SHIFT> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> SHIFT][i & Self::MASK]
    }
}

impl<T, const SHIFT: u32> std::ops::IndexMut<usize> for SlotVec<T, SHIFT> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> SHIFT][i & Self::MASK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_are_where_a_vec_would_have_them() {
        let mut s: SlotVec<u32, 3> = SlotVec::default();
        let mut v = Vec::new();
        for i in 0..50 {
            s.push(i);
            v.push(i);
            assert_eq!(s.len(), v.len());
            for (j, x) in v.iter().enumerate() {
                assert_eq!(s[j], *x);
                assert_eq!(s.get(j), Some(x));
            }
            assert_eq!(s.get(v.len()), None);
            assert!(s.iter().eq(v.iter()));
        }
        s[17] = 1000;
        *s.get_mut(40).unwrap() += 1;
        assert_eq!((s[17], s[40]), (1000, 41));
    }

    #[test]
    fn at_most_one_chunk_is_spare_and_a_small_vector_is_small() {
        let mut s: SlotVec<u64, 4> = SlotVec::default();
        s.grow_to(3, 7);
        assert_eq!(s.chunks[0].capacity(), 4);
        s.grow_to(100, 7);
        assert_eq!(s.len(), 100);
        assert!(s.iter().all(|x| *x == 7));
        // Every chunk but the last is full, and none holds more than a chunk.
        let (last, full) = s.chunks.split_last().unwrap();
        assert!(full.iter().all(|c| c.len() == 16 && c.capacity() == 16));
        assert_eq!(last.len(), 100 % 16);
        assert_eq!(last.capacity(), 16);
    }

    #[test]
    fn a_reserved_vector_holds_what_it_was_reserved_for_without_growing() {
        let mut s: SlotVec<u8, 4> = SlotVec::default();
        s.reserve(5);
        assert_eq!(s.chunks[0].capacity(), 5);
        for i in 0..5 {
            s.push(i);
        }
        assert_eq!(s.chunks.len(), 1);
        assert_eq!(s.chunks[0].capacity(), 5);
        let mut big: SlotVec<u8, 4> = SlotVec::default();
        big.reserve(40);
        assert_eq!(big.chunks[0].capacity(), 16);
        big.grow_to(40, 0);
        assert_eq!(big.chunks.len(), 3);
        assert_eq!(big.chunks[0].capacity(), 16);
    }
}
