//! Payloads keyed by network (`net.src.ip in 10.12.0.0/16`, or one address for `==`): a
//! lookup with an address visits every stored network that contains it.
//!
//! One hash map per prefix length in use: an address is masked to each length and looked up,
//! so a lookup costs one probe per distinct length (a handful in any real table), whatever the
//! number of networks. Invariant: no map is empty, and lengths are kept in ascending order.

use std::net::IpAddr;

use rustc_hash::FxHashMap;

use crate::value::IpCidr;

#[derive(Debug)]
pub(crate) struct CidrMap<T> {
    v4: Vec<(u8, FxHashMap<u32, T>)>,
    v6: Vec<(u8, FxHashMap<u128, T>)>,
    len: usize,
}

impl<T> Default for CidrMap<T> {
    fn default() -> Self {
        CidrMap {
            v4: Vec::new(),
            v6: Vec::new(),
            len: 0,
        }
    }
}

fn mask4(a: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        a & (u32::MAX << (32 - u32::from(len)))
    }
}

fn mask6(a: u128, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        a & (u128::MAX << (128 - u32::from(len)))
    }
}

/// The map of one length, created in order if missing.
fn by_len<K, T>(maps: &mut Vec<(u8, FxHashMap<K, T>)>, len: u8) -> &mut FxHashMap<K, T> {
    let i = match maps.binary_search_by_key(&len, |(l, _)| *l) {
        Ok(i) => i,
        Err(i) => {
            maps.insert(i, (len, FxHashMap::default()));
            i
        }
    };
    &mut maps[i].1
}

/// A network as an image's exact-table key: the family (4 or 6), the prefix length and the
/// masked address's bytes, big-endian. Lookups mask an address to each length in use and look
/// this up, as [`CidrMap::walk`] does with its maps.
pub(crate) fn flat_key(addr: &IpAddr, len: u8) -> Vec<u8> {
    match addr {
        IpAddr::V4(a) => {
            let mut k = vec![4, len];
            k.extend(mask4((*a).into(), len).to_be_bytes());
            k
        }
        IpAddr::V6(a) => {
            let mut k = vec![6, len];
            k.extend(mask6((*a).into(), len).to_be_bytes());
            k
        }
    }
}

impl<T> CidrMap<T> {
    /// Every network with its payload, as `(family, length, image key, payload)`, lengths
    /// ascending within a family (see [`flat_key`]).
    pub(crate) fn for_each_flat<'a>(&'a self, mut visit: impl FnMut(u8, u8, Vec<u8>, &'a T)) {
        for (len, map) in &self.v4 {
            for (k, v) in map {
                let a = IpAddr::V4((*k).into());
                visit(4, *len, flat_key(&a, *len), v);
            }
        }
        for (len, map) in &self.v6 {
            for (k, v) in map {
                let a = IpAddr::V6((*k).into());
                visit(6, *len, flat_key(&a, *len), v);
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn get_or_insert_with(&mut self, net: IpCidr, make: impl FnOnce() -> T) -> &mut T {
        let len = net.network_length();
        let (slot, new) = match net.first_address() {
            IpAddr::V4(a) => {
                let map = by_len(&mut self.v4, len);
                let key = mask4(a.into(), len);
                let new = !map.contains_key(&key);
                (map.entry(key).or_insert_with(make), new)
            }
            IpAddr::V6(a) => {
                let map = by_len(&mut self.v6, len);
                let key = mask6(a.into(), len);
                let new = !map.contains_key(&key);
                (map.entry(key).or_insert_with(make), new)
            }
        };
        self.len += usize::from(new);
        slot
    }

    pub(crate) fn get_mut(&mut self, net: IpCidr) -> Option<&mut T> {
        let len = net.network_length();
        match net.first_address() {
            IpAddr::V4(a) => {
                let i = self.v4.binary_search_by_key(&len, |(l, _)| *l).ok()?;
                self.v4[i].1.get_mut(&mask4(a.into(), len))
            }
            IpAddr::V6(a) => {
                let i = self.v6.binary_search_by_key(&len, |(l, _)| *l).ok()?;
                self.v6[i].1.get_mut(&mask6(a.into(), len))
            }
        }
    }

    pub(crate) fn remove(&mut self, net: IpCidr) -> Option<T> {
        let len = net.network_length();
        let out = match net.first_address() {
            IpAddr::V4(a) => {
                let i = self.v4.binary_search_by_key(&len, |(l, _)| *l).ok()?;
                let out = self.v4[i].1.remove(&mask4(a.into(), len));
                if self.v4[i].1.is_empty() {
                    self.v4.remove(i);
                }
                out
            }
            IpAddr::V6(a) => {
                let i = self.v6.binary_search_by_key(&len, |(l, _)| *l).ok()?;
                let out = self.v6[i].1.remove(&mask6(a.into(), len));
                if self.v6[i].1.is_empty() {
                    self.v6.remove(i);
                }
                out
            }
        };
        if out.is_some() {
            self.len -= 1;
        }
        out
    }

    /// Visits every stored network that contains `addr`, widest first.
    #[inline]
    pub(crate) fn walk<'a>(&'a self, addr: &IpAddr, mut visit: impl FnMut(&'a T)) {
        match addr {
            IpAddr::V4(a) => {
                let a = u32::from(*a);
                for (len, map) in &self.v4 {
                    if let Some(v) = map.get(&mask4(a, *len)) {
                        visit(v);
                    }
                }
            }
            IpAddr::V6(a) => {
                let a = u128::from(*a);
                for (len, map) in &self.v6 {
                    if let Some(v) = map.get(&mask6(a, *len)) {
                        visit(v);
                    }
                }
            }
        }
    }

    pub(crate) fn for_each(&self, mut visit: impl FnMut(&T)) {
        self.v4
            .iter()
            .flat_map(|(_, m)| m.values())
            .for_each(&mut visit);
        self.v6
            .iter()
            .flat_map(|(_, m)| m.values())
            .for_each(&mut visit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_meets_every_network_that_contains_it_and_no_other() {
        let nets = [
            "10.0.0.0/8",
            "10.12.0.0/16",
            "10.12.3.4/32",
            "0.0.0.0/0",
            "192.168.0.0/16",
            "::/0",
            "2001:db8::/32",
        ];
        let mut m = CidrMap::default();
        for (i, n) in nets.iter().enumerate() {
            *m.get_or_insert_with(n.parse().unwrap(), || 0) = i;
        }
        assert_eq!(m.len(), nets.len());
        let hits = |addr: &str| {
            let mut out = Vec::new();
            m.walk(&addr.parse().unwrap(), |v| out.push(*v));
            out.sort();
            out
        };
        assert_eq!(hits("10.12.3.4"), [0, 1, 2, 3]);
        assert_eq!(hits("10.13.0.1"), [0, 3]);
        assert_eq!(hits("8.8.8.8"), [3]);
        assert_eq!(hits("2001:db8::1"), [5, 6]);
        assert_eq!(hits("::ffff:10.0.0.1"), [5], "no IPv4-mapped normalisation");
        for n in nets {
            assert!(m.remove(n.parse().unwrap()).is_some());
        }
        assert_eq!(m.len(), 0);
        assert!(m.v4.is_empty() && m.v6.is_empty());
    }
}
