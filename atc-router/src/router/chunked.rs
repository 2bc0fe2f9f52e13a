//! A growing array in fixed chunks, addressed by `u32` positions: what the program arena keeps
//! its instructions and text in.
//!
//! One `Vec` that doubles (or grows by half) keeps up to half of itself spare after each growth
//! (at 50,000 host + prefix routes, 30 to 60 bytes a route of instructions nobody uses), and
//! each growth copies the whole array at the cost of the one route change that met it: a
//! move of megabytes. Here growing appends a chunk; nothing already written moves, and at most
//! one chunk is spare.
//!
//! Invariants:
//! - A position is `chunk << SHIFT | offset`; a block [`Chunked::push`] returns lies within one
//!   chunk (it never straddles two), so it is one slice.
//! - A chunk never grows past the capacity it was made with (its elements never move); a chunk
//!   holds at most `1 << SHIFT` elements, except a chunk made for a single block longer than
//!   that, which holds that block alone.
//! - The first chunk always exists (empty until used), so the empty block at position 0 is a
//!   valid slice of an array that never held anything.

#[derive(Debug)]
pub(super) struct Chunked<T, const SHIFT: u32> {
    chunks: Vec<Vec<T>>,
}

impl<T, const SHIFT: u32> Default for Chunked<T, SHIFT> {
    fn default() -> Self {
        Chunked {
            chunks: vec![Vec::new()],
        }
    }
}

impl<T, const SHIFT: u32> Chunked<T, SHIFT> {
    const CHUNK: usize = 1 << SHIFT;
    const MASK: u32 = (1 << SHIFT) - 1;

    /// The `len` elements from `at`.
    #[inline]
    pub(super) fn get(&self, at: u32, len: usize) -> &[T] {
        &self.chunks[(at >> SHIFT) as usize][(at & Self::MASK) as usize..][..len]
    }

    /// The `len` elements from `at`, to write.
    pub(super) fn get_mut(&mut self, at: u32, len: usize) -> &mut [T] {
        &mut self.chunks[(at >> SHIFT) as usize][(at & Self::MASK) as usize..][..len]
    }

    /// Appends the block `make` makes (`len` elements), in the last chunk when it fits there
    /// and in a new one otherwise. `lead` is how many `filler`s a new chunk starts with
    /// (alignment: see the program arena), given the chunk's allocation. Returns its position.
    pub(super) fn push(
        &mut self,
        len: usize,
        lead: impl Fn(&[T]) -> usize,
        filler: impl Fn() -> T,
        block: impl IntoIterator<Item = T>,
    ) -> u32 {
        let fits = |c: &Vec<T>| c.len() + len <= c.capacity().min(Self::CHUNK);
        if !fits(self.chunks.last().expect("the first chunk always exists")) {
            // A block longer than a chunk gets one of its own (lead included).
            let mut c = Vec::with_capacity(Self::CHUNK.max(len + 1));
            let skip = lead(&c);
            c.extend((0..skip).map(|_| filler()));
            if self.chunks.last().is_some_and(Vec::is_empty) {
                self.chunks.pop();
            }
            self.chunks.push(c);
            assert!(
                self.chunks.len() <= (1usize << (32 - SHIFT)),
                "more chunks than positions"
            );
        }
        let chunk = self.chunks.len() - 1;
        let c = &mut self.chunks[chunk];
        let at = c.len();
        c.extend(block);
        c.resize_with(at + len, &filler);
        ((chunk as u32) << SHIFT) | at as u32
    }

    /// Elements held (spare capacity included), for tests of the bound.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum()
    }

    /// Elements written (leads and padding included), for tests.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_never_straddle_chunks_and_never_move() {
        let mut c: Chunked<u32, 4> = Chunked::default();
        assert!(c.get(0, 0).is_empty());
        let mut placed = Vec::new();
        for n in 0..40u32 {
            let len = (n % 5) as usize + 1;
            let at = c.push(len, |_| 0, || 0, (0..len as u32).map(|i| n * 100 + i));
            placed.push((at, len, n, c.get(at, len).as_ptr()));
        }
        // One longer than a chunk.
        let big = c.push(40, |_| 1, || 7, (0..40).map(|i| 9000 + i));
        assert_eq!(c.get(big, 40)[39], 9039);
        for (at, len, n, ptr) in placed {
            let got = c.get(at, len);
            assert_eq!(got.as_ptr(), ptr, "block {n} moved");
            assert!(got
                .iter()
                .enumerate()
                .all(|(i, v)| *v == n * 100 + i as u32));
        }
        // Every chunk full but its tail: the spare is less than a chunk per chunk's tail.
        assert!(c.capacity() <= 16 * 13 + 41, "{}", c.capacity());
    }

    #[test]
    fn a_block_is_padded_with_the_filler_and_a_chunk_starts_with_its_lead() {
        let mut c: Chunked<u8, 8> = Chunked::default();
        let at = c.push(4, |_| 2, || b'.', *b"ab");
        assert_eq!(at, 2, "after the lead");
        assert_eq!(c.get(at, 4), b"ab..");
        assert_eq!(c.get(0, 2), b"..");
    }
}
