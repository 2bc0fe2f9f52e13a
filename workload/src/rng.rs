//! A tiny deterministic PRNG (splitmix64). Not cryptographic; only reproducibility matters.

/// splitmix64 generator. The same seed always yields the same stream, on every platform.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

/// splitmix64's finaliser, also used to derive independent streams and fresh tokens.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a over bytes, to fold a string into a seed.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
thread_local! {
    /// Draws made on this thread (tests count the generator's work with it).
    pub(crate) static DRAWS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Rng {
    /// A generator for `seed`, on a stream named by `stream` (so that, e.g., route generation and
    /// priority assignment do not share draws).
    pub(crate) fn new(seed: u64, stream: u64) -> Rng {
        Rng(mix64(
            seed ^ mix64(stream.wrapping_add(0x9E37_79B9_7F4A_7C15)),
        ))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        #[cfg(test)]
        DRAWS.with(|d| d.set(d.get() + 1));
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-high (bias below 2^-64 * n, irrelevant here).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        let span = hi - lo;
        if span == u64::MAX {
            return self.next_u64();
        }
        lo + ((u128::from(self.next_u64()) * (u128::from(span) + 1)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub(crate) fn pick_str<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }

    /// A random numeric id of 1 to 6 digits.
    pub(crate) fn id_digits(&mut self) -> String {
        let len = 1 + self.below(6);
        self.digits(len)
    }

    /// A decimal number with `len` digits (first digit non-zero).
    pub(crate) fn digits(&mut self, len: usize) -> String {
        let mut s = String::with_capacity(len);
        for k in 0..len {
            let d = if k == 0 {
                1 + self.below(9)
            } else {
                self.below(10)
            };
            s.push(char::from(b'0' + d as u8));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = Rng::new(7, 1);
        let mut b = Rng::new(7, 1);
        let mut c = Rng::new(7, 2);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        for _ in 0..1000 {
            assert!(a.below(3) < 3);
            let r = a.range(5, 9);
            assert!((5..=9).contains(&r));
            let f = a.f64();
            assert!((0.0..1.0).contains(&f));
        }
        assert_eq!(a.digits(5).len(), 5);
    }
}
