//! Byte-string keys to `u32` values in image form, walked by prefix: given a text, the values
//! of every stored key that is a prefix of it, shortest first. The form of a prefix (and,
//! over reversed bytes, a suffix) map in an image: a radix tree whose nodes are fixed-size
//! records in one array, each node's children contiguous and sorted by first byte, labels and
//! first bytes in an arena.
//!
//! Layout, in words: the number of nodes, then per node a record of eight words (32 bytes, two
//! to a cache line): its label's length, its value ([`NONE`] if no key ends there), its first
//! child's index, its number of children, then two words for the label and two for the
//! children's first bytes (one byte each, in child order): the bytes themselves when they fit
//! in eight, else their offset in the arena. Node 0 is the root, with an empty label. Built
//! whole from a sorted key list, so a node's children are adjacent, and most levels of a walk
//! read one record and nothing else (a path segment and a node's few children fit in place).

//! Invariants: children's first bytes are distinct and ascending, and a non-root label is not
//! empty; a walk visits at most one node per stored prefix of the text. A reader trusts nothing
//! beyond the container's checksum: every read is bounds-checked, a child index must be larger
//! than its parent's (so a walk ends), and words that are no table make [`PrefixTable::new`]
//! refuse or a walk stop early.

use super::container::Words;

/// The value word of a node no key ends at.
pub const NONE: u32 = u32::MAX;

const NODE: usize = 8;
/// Bytes a record keeps in place (two words).
const IN_PLACE: usize = 8;

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A node still to be written: the sorted keys `lo..hi` below it, all sharing their first
/// `end` bytes; its label is `keys[lo][start..end]`, and if `keys[lo]` is exactly `end` bytes
/// long it is the key that ends here.
#[derive(Debug, Clone, Copy)]
struct Pending {
    lo: usize,
    hi: usize,
    start: usize,
    end: usize,
}

/// The children of `n`: consecutive runs of the keys below it (the one ending at `n` left out)
/// with the same byte at `n.end`, each down to what its keys share.
fn children(keys: &[(&[u8], u32)], n: Pending, out: &mut Vec<Pending>) {
    out.clear();
    let mut i = n.lo + usize::from(keys[n.lo].0.len() == n.end);
    while i < n.hi {
        let first = keys[i].0[n.end];
        let mut j = i + 1;
        while j < n.hi && keys[j].0[n.end] == first {
            j += 1;
        }
        // Sorted keys: what the whole run shares is what its first and last share.
        let shared = common_prefix(&keys[i].0[n.end..], &keys[j - 1].0[n.end..]);
        out.push(Pending {
            lo: i,
            hi: j,
            start: n.end,
            end: n.end + shared,
        });
        i = j;
    }
}

/// Two words holding `b` in place, or its offset in `bytes`.
fn place(b: &[u8], bytes: &mut Vec<u8>) -> Option<[u32; 2]> {
    if b.len() <= IN_PLACE {
        let mut w = [0u8; IN_PLACE];
        w[..b.len()].copy_from_slice(b);
        let word = |i: usize| u32::from_le_bytes([w[i], w[i + 1], w[i + 2], w[i + 3]]);
        return Some([word(0), word(4)]);
    }
    let at = u32::try_from(bytes.len()).ok()?;
    bytes.extend_from_slice(b);
    Some([at, 0])
}

/// Writes the table of `entries` (distinct keys): its words, and its labels and first bytes
/// appended to `bytes`. `None` when two keys are equal or offsets outgrow 32 bits. Built
/// breadth first in one loop (no recursion, whatever the keys' lengths): each node's children
/// take the next free run of numbers, and nodes are written in the order they are numbered.
pub fn write(entries: &[(&[u8], u32)], bytes: &mut Vec<u8>) -> Option<Vec<u32>> {
    let mut keys = entries.to_vec();
    keys.sort_unstable_by(|a, b| a.0.cmp(b.0));
    if keys.windows(2).any(|w| w[0].0 == w[1].0) || keys.iter().any(|e| e.1 == NONE) {
        return None;
    }
    let mut queue = std::collections::VecDeque::from([Pending {
        lo: 0,
        hi: keys.len(),
        start: 0,
        end: 0,
    }]);
    let mut words = vec![0u32];
    let (mut written, mut next) = (0usize, 1usize);
    let mut kids = Vec::new();
    while let Some(n) = queue.pop_front() {
        let (label, value) = match keys.get(n.lo) {
            Some((k, v)) => (&k[n.start..n.end], if k.len() == n.end { *v } else { NONE }),
            None => (&b""[..], NONE),
        };
        if n.lo < n.hi {
            children(&keys, n, &mut kids);
        } else {
            kids.clear();
        }
        let firsts: Vec<u8> = kids.iter().map(|c| keys[c.lo].0[c.start]).collect();
        let label_words = place(label, bytes)?;
        let firsts_words = place(&firsts, bytes)?;
        words.extend([
            u32::try_from(label.len()).ok()?,
            value,
            u32::try_from(next).ok()?,
            u32::try_from(kids.len()).ok()?,
            label_words[0],
            label_words[1],
            firsts_words[0],
            firsts_words[1],
        ]);
        next += kids.len();
        queue.extend(kids.iter().copied());
        written += 1;
    }
    u32::try_from(bytes.len()).ok()?;
    words[0] = u32::try_from(written).ok()?;
    Some(words)
}

/// A table read in place from an image's words and bytes.
#[derive(Debug, Clone, Copy)]
pub struct PrefixTable<'a> {
    words: Words<'a>,
    bytes: &'a [u8],
    nodes: usize,
}

impl<'a> PrefixTable<'a> {
    /// The table `words` hold (labels in `bytes`); `None` when the words cannot be one.
    pub fn new(words: Words<'a>, bytes: &'a [u8]) -> Option<PrefixTable<'a>> {
        let nodes = words.get(0)? as usize;
        let want = nodes.checked_mul(NODE)?.checked_add(1)?;
        if nodes == 0 || words.len() != want {
            return None;
        }
        Some(PrefixTable {
            words,
            bytes,
            nodes,
        })
    }

    fn field(&self, node: usize, i: usize) -> Option<u32> {
        self.words.get(1 + node * NODE + i)
    }

    /// The `len` bytes whose place is words `i`, `i + 1` of `node`'s record.
    fn placed(&self, node: usize, i: usize, len: u32) -> Option<&'a [u8]> {
        let len = len as usize;
        let at = 1 + node * NODE + i;
        if len <= IN_PLACE {
            return self.words.raw(at..at + 2)?.get(..len);
        }
        let off = self.words.get(at)? as usize;
        self.bytes.get(off..off.checked_add(len)?)
    }

    /// Calls `visit` with the value of every stored key that is a prefix of `text`, shortest
    /// first.
    #[inline]
    pub fn walk(&self, text: &[u8], mut visit: impl FnMut(u32)) {
        let mut node = 0usize;
        let mut rest = text;
        loop {
            let Some(value) = self.field(node, 1) else {
                return;
            };
            if value != NONE {
                visit(value);
            }
            let Some((&b, _)) = rest.split_first() else {
                return;
            };
            let (Some(first), Some(count)) = (self.field(node, 2), self.field(node, 3)) else {
                return;
            };
            let Some(firsts) = self.placed(node, 6, count) else {
                return;
            };
            let Some(i) = firsts.iter().position(|&x| x == b) else {
                return;
            };
            let child = first as usize + i;
            // Children come after their parent, or the words are no tree (a walk must end).
            if child <= node || child >= self.nodes {
                return;
            }
            let Some(label) = self
                .field(child, 0)
                .and_then(|len| self.placed(child, 4, len))
            else {
                return;
            };
            if label.is_empty() || !rest.starts_with(label) {
                return;
            }
            rest = &rest[label.len()..];
            node = child;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn as_bytes(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn walked(t: &PrefixTable<'_>, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        t.walk(text.as_bytes(), |v| out.push(v));
        out
    }

    #[test]
    fn a_walk_visits_every_stored_prefix_shortest_first() {
        let keys = [
            "/",
            "/api",
            "/api/",
            "/api/v1",
            "/apix",
            "/b",
            "",
            "/api/v1/users",
        ];
        let entries: Vec<(&[u8], u32)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_bytes(), i as u32))
            .collect();
        let mut bytes = Vec::new();
        let words = as_bytes(&write(&entries, &mut bytes).unwrap());
        let t = PrefixTable::new(Words::new(&words).unwrap(), &bytes).unwrap();
        assert_eq!(walked(&t, "/api/v1/users/7"), [6, 0, 1, 2, 3, 7]);
        assert_eq!(walked(&t, "/apix"), [6, 0, 1, 4]);
        assert_eq!(walked(&t, "/ap"), [6, 0]);
        assert_eq!(walked(&t, ""), [6]);
        assert_eq!(walked(&t, "x"), [6]);
    }

    #[test]
    fn long_keys_and_deep_chains_build_and_walk_on_a_small_stack() {
        // `a`, `aa`, ... a chain of 3,000 nodes, and one key of 100,000 bytes.
        let keys: Vec<Vec<u8>> = (1..=3000)
            .map(|n| vec![b'a'; n])
            .chain([vec![b'b'; 100_000]])
            .collect();
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                let entries: Vec<(&[u8], u32)> = keys
                    .iter()
                    .enumerate()
                    .map(|(i, k)| (&k[..], i as u32))
                    .collect();
                let mut bytes = Vec::new();
                let words = as_bytes(&write(&entries, &mut bytes).unwrap());
                let t = PrefixTable::new(Words::new(&words).unwrap(), &bytes).unwrap();
                let mut n = 0;
                t.walk(&[b'a'; 5000], |_| n += 1);
                assert_eq!(n, 3000);
                assert_eq!(walked(&t, &"b".repeat(100_001)), [3000]);
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn equal_keys_and_the_reserved_value_are_refused() {
        assert!(write(&[(b"/a", 1), (b"/a", 2)], &mut Vec::new()).is_none());
        assert!(write(&[(b"/a", NONE)], &mut Vec::new()).is_none());
    }

    #[test]
    fn words_that_are_no_tree_end_the_walk() {
        // One node whose child is itself: refused as a step, not followed forever.
        let a = u32::from(b'a');
        let words = as_bytes(&[1, 0, 5, 0, 1, 0, 0, a, 0]);
        let t = PrefixTable::new(Words::new(&words).unwrap(), b"").unwrap();
        let mut n = 0;
        t.walk(b"aaaa", |_| n += 1);
        assert_eq!(n, 1);
        // A label offset past the bytes ends the walk.
        let words = as_bytes(&[2, 0, NONE, 1, 1, 0, 0, a, 0, 9, 7, 0, 0, 99, 0, 0, 0]);
        let t = PrefixTable::new(Words::new(&words).unwrap(), b"").unwrap();
        t.walk(b"aaaaaaaaaaaa", |_| panic!("no node reached"));
        assert!(PrefixTable::new(Words::new(&as_bytes(&[3, 0])).unwrap(), b"").is_none());
        assert!(PrefixTable::new(Words::new(&as_bytes(&[0])).unwrap(), b"").is_none());
    }

    proptest::proptest! {
        #[test]
        fn a_walk_finds_what_a_scan_finds(
            keys in proptest::collection::btree_set(proptest::collection::vec(0u8..3, 0..7), 0..48),
            texts in proptest::collection::vec(proptest::collection::vec(0u8..3, 0..9), 1..16),
        ) {
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            let entries: Vec<(&[u8], u32)> =
                keys.iter().enumerate().map(|(i, k)| (&k[..], i as u32)).collect();
            let mut bytes = Vec::new();
            let words = as_bytes(&write(&entries, &mut bytes).unwrap());
            let t = PrefixTable::new(Words::new(&words).unwrap(), &bytes).unwrap();
            for text in &texts {
                let mut want: Vec<(usize, u32)> = entries
                    .iter()
                    .filter(|(k, _)| text.starts_with(k))
                    .map(|(k, v)| (k.len(), *v))
                    .collect();
                want.sort();
                let mut got = Vec::new();
                t.walk(text, |v| got.push(v));
                proptest::prop_assert_eq!(got, want.into_iter().map(|(_, v)| v).collect::<Vec<_>>());
            }
        }
    }
}
