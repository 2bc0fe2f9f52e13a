//! Literals of a program image read in place without the program around them: set literals
//! (sorted strings, integers, or networks, searched by halving) and addresses and networks.
//! Shared by the program image's reader (`program_image.rs`) and the evaluator's view of a
//! literal (`code_view.rs`), which is why it stands apart from both.
//!
//! Invariant: every read is bounds-checked and a record it cannot read is no element (a set
//! holds nothing it cannot read; an address that cannot be read is `None`): an image is trusted
//! no further than its checksum.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::image::Words;
use crate::value::IpCidr;

/// A set of strings: per element its offset and length in the bytes, sorted by bytes.
pub(crate) const L_SET_STR: u32 = 6;
/// A set of integers: per element its low and high words, ascending.
pub(crate) const L_SET_INT: u32 = 7;
/// A set of networks: per element the offset of its address record.
pub(crate) const L_SET_NET: u32 = 8;

pub(crate) fn read_addr(bytes: &[u8], at: u32) -> Option<(IpAddr, Option<u8>)> {
    let at = at as usize;
    let rec = bytes.get(at..at.checked_add(17)?)?;
    let addr = match rec[0] {
        4 => IpAddr::V4(Ipv4Addr::new(rec[1], rec[2], rec[3], rec[4])),
        6 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&rec[1..17]).ok()?)),
        _ => return None,
    };
    Some((addr, bytes.get(at + 17).copied()))
}

pub(crate) fn read_cidr(bytes: &[u8], at: u32) -> Option<IpCidr> {
    let (addr, len) = read_addr(bytes, at)?;
    IpCidr::new(addr, len?).ok()
}

/// A set literal read in place (see the module docs for its elements' layout).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImageSet<'a> {
    pub(crate) kind: u32,
    pub(crate) words: Words<'a>,
    pub(crate) bytes: &'a [u8],
}

impl<'a> ImageSet<'a> {
    fn count(&self) -> usize {
        match self.kind {
            L_SET_NET => self.words.len(),
            _ => self.words.len() / 2,
        }
    }

    pub(crate) fn has_str(&self, s: &str) -> bool {
        if self.kind != L_SET_STR {
            return false;
        }
        let element = |i: usize| -> &'a [u8] {
            let (at, len) = (self.words.get(2 * i), self.words.get(2 * i + 1));
            at.zip(len)
                .and_then(|(at, len)| {
                    self.bytes
                        .get(at as usize..(at as usize).checked_add(len as usize)?)
                })
                .unwrap_or_default()
        };
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match element(mid).cmp(s.as_bytes()) {
                std::cmp::Ordering::Equal => return true,
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        false
    }

    pub(crate) fn has_int(&self, v: i64) -> bool {
        if self.kind != L_SET_INT {
            return false;
        }
        let element = |i: usize| {
            let (a, b) = (self.words.get(2 * i), self.words.get(2 * i + 1));
            a.zip(b)
                .map(|(a, b)| (u64::from(b) << 32 | u64::from(a)) as i64)
        };
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match element(mid).map(|e| e.cmp(&v)) {
                Some(std::cmp::Ordering::Equal) => return true,
                Some(std::cmp::Ordering::Less) => lo = mid + 1,
                _ => hi = mid,
            }
        }
        false
    }

    pub(crate) fn nets(&self) -> impl Iterator<Item = IpCidr> + 'a {
        let (words, bytes) = (self.words, self.bytes);
        let n = if self.kind == L_SET_NET {
            words.len()
        } else {
            0
        };
        (0..n).filter_map(move |i| read_cidr(bytes, words.get(i)?))
    }
}
