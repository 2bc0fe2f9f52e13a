//! Byte-string equality without a call for the short strings a request compares most: methods,
//! hosts, path segments. `a == b` on slices calls `memcmp`, whose call and size dispatch cost
//! more than the comparison of a few bytes; here strings up to 16 bytes are compared as at most
//! two overlapping words each, inline.
//!
//! Invariant: [`eq`] answers exactly what `a == b` answers, for every pair of slices (the tests
//! below compare the two on every length up to 40 and every single differing byte).

/// Whether `a` and `b` hold the same bytes.
#[inline]
pub(crate) fn eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0 => true,
        // The first, middle and last bytes are every byte of a string of one to three.
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        // Two words that overlap in the middle cover the whole string.
        4..=7 => word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4),
        8..=16 => word8(a, 0) == word8(b, 0) && word8(a, n - 8) == word8(b, n - 8),
        _ => a == b,
    }
}

#[inline(always)]
fn word4(s: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&s[at..at + 4]);
    u32::from_ne_bytes(w)
}

#[inline(always)]
fn word8(s: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[at..at + 8]);
    u64::from_ne_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::eq;

    #[test]
    fn answers_as_slice_equality_on_every_length_and_every_differing_byte() {
        for n in 0..40usize {
            let a: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37)).collect();
            assert!(eq(&a, &a.clone()), "{n}");
            for i in 0..n {
                let mut b = a.clone();
                b[i] ^= 0x01;
                assert!(!eq(&a, &b), "{n}: byte {i}");
                assert_eq!(eq(&a, &b), a == b);
            }
            // Same bytes, one longer or shorter.
            let mut longer = a.clone();
            longer.push(0);
            assert!(!eq(&a, &longer) && !eq(&longer, &a), "{n}");
        }
    }
}
