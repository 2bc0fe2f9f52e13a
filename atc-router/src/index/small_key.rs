//! Byte strings kept in place when short: the keys of the index's maps and the labels of its
//! radix trees. Most keys (host names, path segments, methods) fit in place, so a lookup
//! compares them where the map or the tree node already is, instead of following a pointer per
//! comparison (a cache miss each in a table of 100,000 routes).
//!
//! Invariant: a key hashes and compares exactly as its bytes (`[u8]`), so maps of keys are
//! looked up with `&[u8]` (see the `Borrow` impl).

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// Longest key kept in place (the enum is 24 bytes, as a boxed slice with its length would be
/// with alignment).
const INLINE: usize = 22;

#[derive(Clone)]
pub(crate) enum SmallKey {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl SmallKey {
    pub(crate) fn new(b: &[u8]) -> SmallKey {
        if b.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..b.len()].copy_from_slice(b);
            SmallKey::Inline {
                len: b.len() as u8,
                bytes,
            }
        } else {
            SmallKey::Heap(b.into())
        }
    }

    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            SmallKey::Inline { len, bytes } => &bytes[..*len as usize],
            SmallKey::Heap(b) => b,
        }
    }
}

impl std::ops::Deref for SmallKey {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Borrow<[u8]> for SmallKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Hash for SmallKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.as_bytes().hash(h)
    }
}

impl PartialEq for SmallKey {
    fn eq(&self, other: &SmallKey) -> bool {
        crate::short_eq::eq(self.as_bytes(), other.as_bytes())
    }
}

impl Eq for SmallKey {}

impl std::fmt::Debug for SmallKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    #[test]
    fn short_and_long_keys_look_up_as_their_bytes() {
        let long = [b'x'; 40];
        let mut m: FxHashMap<SmallKey, u32> = FxHashMap::default();
        for (i, k) in [
            &b""[..],
            b"GET",
            b"api.example.com",
            &long[..INLINE],
            &long[..],
        ]
        .iter()
        .enumerate()
        {
            m.insert(SmallKey::new(k), i as u32);
            assert_eq!(&*SmallKey::new(k), *k);
        }
        assert_eq!(m.get(&b"GET"[..]), Some(&1));
        assert_eq!(m.get(&long[..]), Some(&4));
        assert_eq!(m.get(&long[..INLINE]), Some(&3));
        assert_eq!(m.get(&b"POST"[..]), None);
        assert_eq!(std::mem::size_of::<SmallKey>(), 24);
    }
}
