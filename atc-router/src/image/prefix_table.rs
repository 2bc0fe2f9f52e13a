//! Byte-string keys to `u32` values in image form, walked by prefix: given a text, the values
//! of every stored key that is a prefix of it, shortest first; walked from every place of a
//! text, the values of every key it contains. The form of a prefix (over reversed bytes, a
//! suffix; walked within, a `contains`) map in an image: a radix tree whose nodes are fixed-size
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
//!
//! Invariants: children's first bytes are distinct and ascending, and a non-root label is not
//! empty; a walk visits at most one node per stored prefix of the text, and a walk within a
//! text at most a budget linear in its length before it visits every value instead. A reader trusts nothing
//! beyond the container's checksum: every read is bounds-checked, a child index must be larger
//! than its parent's (so a walk ends), and words that are no table make [`PrefixTable::new`]
//! refuse or a walk stop early.

use super::container::Words;

/// The value word of a node no key ends at.
pub const NONE: u32 = u32::MAX;

const NODE: usize = 8;
/// Bytes a record keeps in place (two words).
const IN_PLACE: usize = 8;
/// Steps a [`PrefixTable::walk_within`] may take per byte of its text before it gives up
/// walking and visits every value.
const WITHIN_BUDGET: usize = 16;

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

/// Whether `text` starts with the `len` (1 to 8) bytes held in place in `label`: one word
/// compare when the text has eight bytes to read, instead of a call to compare slices.
#[inline]
fn starts_with_placed(text: &[u8], label: u64, len: u32) -> bool {
    let len = len as usize;
    if let Some(head) = text.first_chunk::<8>() {
        let mask = u64::MAX >> (8 * (IN_PLACE - len));
        return u64::from_le_bytes(*head) & mask == label & mask;
    }
    text.len() >= len && text[..len] == label.to_le_bytes()[..len]
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

    /// `node`'s record, read with one bounds check.
    #[inline]
    fn record(&self, node: usize) -> Option<[u32; NODE]> {
        self.words
            .array::<NODE>(node.checked_mul(NODE)?.checked_add(1)?)
    }

    /// The `len` bytes placed by `place` as the two words `w` (in place or in the arena).
    #[inline]
    fn placed(&self, w: [u32; 2], len: u32) -> Option<&'a [u8]> {
        let len = len as usize;
        if len <= IN_PLACE {
            return None;
        }
        let off = w[0] as usize;
        self.bytes.get(off..off.checked_add(len)?)
    }

    /// Calls `visit` with the value of every stored key that is a prefix of `text`, shortest
    /// first.
    #[inline]
    pub fn walk(&self, text: &[u8], visit: impl FnMut(u32)) {
        if let Some(root) = self.record(0) {
            // One walk reads each byte of the text once at most: no budget needed.
            let mut unbounded = usize::MAX;
            self.walk_from(root, text, &mut unbounded, visit);
        }
    }

    /// Calls `visit` with the value of every stored key that `text` contains: the keys that
    /// are prefixes of each of its suffixes, so a key found at several places is visited once
    /// per place. Only the places whose byte starts one of the keys are walked, found with a
    /// vectorised search when the keys start with at most three distinct bytes (the common
    /// case: a handful of `contains` literals).
    ///
    /// Walks from many places can together compare a text against long keys again and again
    /// (keys `a`, `aa`, … and a text of `a`s); past a budget linear in the text's length the
    /// rest is not walked and every stored key's value is visited instead: more than the text
    /// contains, never less, at a cost bounded by the text and the table.
    pub fn walk_within(&self, text: &[u8], mut visit: impl FnMut(u32)) {
        let Some(root) = self.record(0) else {
            return;
        };
        // The empty key, contained in every text (once).
        if root[1] != NONE {
            visit(root[1]);
        }
        let [_, _, _, count, _, _, f0, f1] = root;
        let in_place = (u64::from(f1) << 32 | u64::from(f0)).to_le_bytes();
        let firsts = if count as usize <= IN_PLACE {
            &in_place[..count as usize]
        } else {
            match self.placed([f0, f1], count) {
                Some(f) => f,
                None => return,
            }
        };
        let mut root_only = root;
        root_only[1] = NONE;
        let mut budget = text
            .len()
            .saturating_mul(WITHIN_BUDGET)
            .saturating_add(4096);
        let mut walk_at = |i: usize| self.walk_from(root_only, &text[i..], &mut budget, &mut visit);
        let done = match *firsts {
            [] => true,
            [a] => memchr::memchr_iter(a, text).all(&mut walk_at),
            [a, b] => memchr::memchr2_iter(a, b, text).all(&mut walk_at),
            [a, b, c] => memchr::memchr3_iter(a, b, c, text).all(&mut walk_at),
            _ => {
                let mut starts = [false; 256];
                for &b in firsts {
                    starts[usize::from(b)] = true;
                }
                (0..text.len()).all(|i| !starts[usize::from(text[i])] || walk_at(i))
            }
        };
        if !done {
            self.for_each_value(visit);
        }
    }

    /// Calls `visit` with the value of every stored key.
    fn for_each_value(&self, mut visit: impl FnMut(u32)) {
        for node in 0..self.nodes {
            match self.record(node) {
                Some([_, value, ..]) if value != NONE => visit(value),
                _ => {}
            }
        }
    }

    /// The walk from `root` (node 0's record) along `text`; `false` when it stopped because
    /// `budget` (nodes stepped plus label bytes compared) ran out.
    #[inline]
    fn walk_from(
        &self,
        root: [u32; NODE],
        text: &[u8],
        budget: &mut usize,
        mut visit: impl FnMut(u32),
    ) -> bool {
        let mut node = 0usize;
        let mut rec = root;
        let mut rest = text;
        loop {
            // len, value, first child, children, label (2 words), first bytes (2 words).
            let [_, value, first, count, _, _, f0, f1] = rec;
            if value != NONE {
                visit(value);
            }
            let Some((&b, _)) = rest.split_first() else {
                return true;
            };
            let i = if count as usize <= IN_PLACE {
                let firsts = (u64::from(f1) << 32 | u64::from(f0)).to_le_bytes();
                firsts[..count as usize].iter().position(|&x| x == b)
            } else {
                // A vectorised search pays its set-up only on many children.
                self.placed([f0, f1], count).and_then(|f| {
                    if f.len() <= 32 {
                        f.iter().position(|&x| x == b)
                    } else {
                        memchr::memchr(b, f)
                    }
                })
            };
            let Some(i) = i else {
                return true;
            };
            let child = first as usize + i;
            // Children come after their parent, or the words are no tree (a walk must end).
            if child <= node || child >= self.nodes {
                return true;
            }
            let Some(child_rec) = self.record(child) else {
                return true;
            };
            let [len, _, _, _, l0, l1, _, _] = child_rec;
            match budget.checked_sub(1 + len as usize) {
                Some(left) => *budget = left,
                None => return false,
            }
            let matched = if len as usize <= IN_PLACE {
                len != 0 && starts_with_placed(rest, u64::from(l1) << 32 | u64::from(l0), len)
            } else {
                self.placed([l0, l1], len)
                    .is_some_and(|label| rest.starts_with(label))
            };
            if !matched {
                return true;
            }
            rest = &rest[len as usize..];
            node = child;
            rec = child_rec;
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

        #[test]
        fn a_walk_within_finds_every_key_the_text_contains_and_no_other(
            keys in proptest::collection::btree_set(proptest::collection::vec(0u8..4, 0..6), 0..40),
            texts in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..24), 1..16),
        ) {
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            let entries: Vec<(&[u8], u32)> =
                keys.iter().enumerate().map(|(i, k)| (&k[..], i as u32)).collect();
            let mut bytes = Vec::new();
            let words = as_bytes(&write(&entries, &mut bytes).unwrap());
            let t = PrefixTable::new(Words::new(&words).unwrap(), &bytes).unwrap();
            for text in &texts {
                let want: std::collections::BTreeSet<u32> = entries
                    .iter()
                    .filter(|(k, _)| k.is_empty() || text.windows(k.len()).any(|w| w == *k))
                    .map(|(_, v)| *v)
                    .collect();
                let mut got = std::collections::BTreeSet::new();
                t.walk_within(text, |v| {
                    got.insert(v);
                });
                proptest::prop_assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn a_walk_within_over_keys_that_repeat_in_the_text_stays_linear_and_misses_nothing() {
        // `a`, `aa`, ..., 300 `a`s, and `b`: a text of 20,000 `a`s holds every `a` key at
        // thousands of places. The walk gives up early and visits every value: `b` too (more
        // than the text holds, never less).
        let keys: Vec<Vec<u8>> = (1..=300)
            .map(|n| vec![b'a'; n])
            .chain([b"b".to_vec()])
            .collect();
        let entries: Vec<(&[u8], u32)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (&k[..], i as u32))
            .collect();
        let mut bytes = Vec::new();
        let words = as_bytes(&write(&entries, &mut bytes).unwrap());
        let t = PrefixTable::new(Words::new(&words).unwrap(), &bytes).unwrap();
        let mut visits = 0usize;
        let mut got = std::collections::BTreeSet::new();
        t.walk_within(&[b'a'; 20_000], |v| {
            visits += 1;
            got.insert(v);
        });
        assert_eq!(got.len(), 301);
        assert!(visits <= 16 * 20_000 + 4096 + 301, "{visits} visits");
        // A short text is walked exactly.
        let mut got = std::collections::BTreeSet::new();
        t.walk_within(b"xaax", |v| {
            got.insert(v);
        });
        assert_eq!(got, [0, 1].into());
    }
}
