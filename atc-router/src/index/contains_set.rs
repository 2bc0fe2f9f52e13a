//! Payloads keyed by literals that a value must contain (`http.path contains "/export/"`, or a
//! literal every match of an unanchored regex holds): multi-literal automata (Aho-Corasick)
//! find, in one pass over a request value, every stored literal it contains. A few literals
//! (the common case: a handful of `contains` routes beside a table keyed by host or prefix,
//! visited by every request) are each searched with their own substring finder instead: an
//! overlapping automaton search steps through every byte of the value, several times the work
//! of [`FEW`] vectorised substring searches over a path.
//!
//! The searchers are built when the set is sealed ([`ContainsSet::seal`], which the index calls
//! after every change), never by a request: a request after a change costs what any other
//! does. So that a change costs what changed rather than the set, literals are searched by two
//! searchers: a large one over the older literals and a small one over those added since, of at
//! most about four times the square root of the set's size. A seal rebuilds the small one, and
//! the large one only when the small one has outgrown that bound (or removals have left half
//! the slots empty): a route added costs O(√n) literals built, amortised, and a request two
//! searches.
//!
//! Invariants: slot `i` of the large searcher is `slots[i]` for `i < big_len`; slot `i` of the
//! small one is `slots[big_len + i]`, up to `sealed_len`; a removed literal leaves its slot
//! empty (`None`, skipped by a walk) until a full rebuild compacts the slots; `place` maps every
//! live literal to its slot. A walk of an unsealed set (never made by the index) visits every
//! payload, which is sound.

use aho_corasick::{AhoCorasick, MatchKind};
use memchr::memmem::Finder;
use rustc_hash::FxHashMap;

/// Sets of up to this many literals search for each one alone.
const FEW: usize = 4;

/// A literal and its payload, or `None` once removed.
type Slot<T> = Option<(Box<[u8]>, T)>;

#[derive(Debug)]
pub(crate) struct ContainsSet<T> {
    slots: Vec<Slot<T>>,
    /// The slot of each live literal.
    place: FxHashMap<Box<[u8]>, u32>,
    big: Searcher,
    big_len: usize,
    small: Searcher,
    /// Slots the searchers cover; those after it were added since the last seal.
    sealed_len: usize,
}

/// A searcher over a run of slots, reporting slots by their place in the run.
#[derive(Debug, Default)]
enum Searcher {
    #[default]
    Empty,
    Few(Box<[Finder<'static>]>),
    Many(AhoCorasick),
    /// The automaton could not be built: every slot of the run is visited.
    All(usize),
}

impl Searcher {
    fn build<'a>(lits: impl ExactSizeIterator<Item = &'a [u8]>) -> Searcher {
        let n = lits.len();
        if n == 0 {
            return Searcher::Empty;
        }
        if n <= FEW {
            return Searcher::Few(lits.map(|l| Finder::new(l).into_owned()).collect());
        }
        AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(lits)
            .map_or(Searcher::All(n), Searcher::Many)
    }

    /// Calls `hit` with the place of every literal `text` contains (some more than once).
    #[inline]
    fn walk(&self, text: &[u8], mut hit: impl FnMut(usize)) {
        match self {
            Searcher::Empty => {}
            Searcher::Few(finders) => {
                for (i, f) in finders.iter().enumerate() {
                    if f.find(text).is_some() {
                        hit(i);
                    }
                }
            }
            Searcher::Many(ac) => {
                for m in ac.find_overlapping_iter(text) {
                    hit(m.pattern().as_usize());
                }
            }
            Searcher::All(n) => (0..*n).for_each(hit),
        }
    }
}

impl<T> Default for ContainsSet<T> {
    fn default() -> Self {
        ContainsSet {
            slots: Vec::new(),
            place: FxHashMap::default(),
            big: Searcher::Empty,
            big_len: 0,
            small: Searcher::Empty,
            sealed_len: 0,
        }
    }
}

/// Most literals of the small searcher over a large one of `big` (see the module docs).
fn small_max(big: usize) -> usize {
    (4 * big.isqrt()).max(32)
}

/// The literals of a run of slots (an empty one for an empty slot: it finds nothing the walk
/// does not skip anyway).
fn literals<T>(slots: &[Slot<T>]) -> impl ExactSizeIterator<Item = &[u8]> {
    slots
        .iter()
        .map(|s| s.as_ref().map_or(&b"\xff\xfe\xfd"[..], |(l, _)| &l[..]))
}

impl<T> ContainsSet<T> {
    pub(crate) fn len(&self) -> usize {
        self.place.len()
    }

    pub(crate) fn get_or_insert_with(&mut self, lit: &[u8], make: impl FnOnce() -> T) -> &mut T {
        let i = match self.place.get(lit) {
            Some(&i) => i as usize,
            None => {
                self.slots.push(Some((lit.into(), make())));
                self.place.insert(lit.into(), self.slots.len() as u32 - 1);
                self.slots.len() - 1
            }
        };
        &mut self.slots[i].as_mut().expect("a placed slot is full").1
    }

    pub(crate) fn get_mut(&mut self, lit: &[u8]) -> Option<&mut T> {
        let i = *self.place.get(lit)? as usize;
        self.slots[i].as_mut().map(|(_, v)| v)
    }

    pub(crate) fn remove(&mut self, lit: &[u8]) -> Option<T> {
        let i = self.place.remove(lit)? as usize;
        self.slots[i].take().map(|(_, v)| v)
    }

    /// Brings the searchers up to date with the literals (see the module docs).
    pub(crate) fn seal(&mut self) {
        let empty = self.slots.len() - self.place.len();
        if empty > 0 && empty * 2 >= self.slots.len() {
            // Half the slots are empty: compact them, and search all from one automaton.
            self.slots.retain(Option::is_some);
            self.place.clear();
            for (i, s) in self.slots.iter().enumerate() {
                let (lit, _) = s.as_ref().expect("retained");
                self.place.insert(lit.clone(), i as u32);
            }
            self.rebuild_big();
        } else if self.slots.len() > self.sealed_len {
            if self.slots.len() - self.big_len > small_max(self.big_len) {
                self.rebuild_big();
            } else {
                self.small = Searcher::build(literals(&self.slots[self.big_len..]));
            }
        }
        self.sealed_len = self.slots.len();
    }

    fn rebuild_big(&mut self) {
        self.big = Searcher::build(literals(&self.slots));
        self.big_len = self.slots.len();
        self.small = Searcher::Empty;
    }

    /// Visits the payload of every stored literal `text` contains (a literal found at several
    /// places may be visited more than once).
    #[inline]
    pub(crate) fn walk<'a>(&'a self, text: &[u8], mut visit: impl FnMut(&'a T)) {
        if self.sealed_len != self.slots.len() {
            return self.for_each(visit);
        }
        let (old, new) = self.slots.split_at(self.big_len);
        self.big.walk(text, |i| {
            if let Some((_, v)) = &old[i] {
                visit(v);
            }
        });
        self.small.walk(text, |i| {
            if let Some((_, v)) = &new[i] {
                visit(v);
            }
        });
    }

    /// Every live literal and its payload (in no particular order).
    pub(crate) fn for_each_literal<'a>(&'a self, mut visit: impl FnMut(&'a [u8], &'a T)) {
        for (lit, v) in self.slots.iter().flatten() {
            visit(lit, v);
        }
    }

    pub(crate) fn for_each<'a>(&'a self, mut visit: impl FnMut(&'a T)) {
        for (_, v) in self.slots.iter().flatten() {
            visit(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(s: &ContainsSet<usize>, t: &str) -> Vec<usize> {
        let mut out = Vec::new();
        s.walk(t.as_bytes(), |v| out.push(*v));
        out.sort();
        out.dedup();
        out
    }

    #[test]
    fn a_value_meets_every_literal_it_contains() {
        let mut s = ContainsSet::default();
        for (i, l) in ["/export/", "/svc1/", "/svc12/", "json", "ex"]
            .iter()
            .enumerate()
        {
            *s.get_or_insert_with(l.as_bytes(), || 0) = i;
        }
        s.seal();
        assert_eq!(hits(&s, "/a/export/b.json"), [0, 3, 4]);
        assert_eq!(hits(&s, "/svc12/x"), [2]);
        assert_eq!(hits(&s, "/svc1/x"), [1]);
        assert_eq!(s.remove(b"ex"), Some(4));
        s.seal();
        assert_eq!(hits(&s, "/a/export/b.json"), [0, 3]);
        assert_eq!(hits(&s, "/svc12/x"), [2]);
        assert_eq!(hits(&s, "/svc/x"), [0usize; 0]);
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn agrees_with_a_list_through_adds_and_removes_at_every_size() {
        let mut s = ContainsSet::default();
        let mut list: Vec<(String, usize)> = Vec::new();
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        for step in 0..3000 {
            if next() % 3 == 0 && !list.is_empty() {
                let (lit, v) = list.swap_remove(next() % list.len());
                assert_eq!(s.remove(lit.as_bytes()), Some(v));
            } else {
                let lit = format!("/k{}/", next() % 5000);
                if !list.iter().any(|(l, _)| *l == lit) {
                    *s.get_or_insert_with(lit.as_bytes(), || 0) = step;
                    list.push((lit, step));
                }
            }
            s.seal();
            if step % 50 == 0 {
                let text = format!("/a/k{}/b/k{}/", next() % 5000, next() % 5000);
                let mut want: Vec<usize> = list
                    .iter()
                    .filter(|(l, _)| text.contains(l.as_str()))
                    .map(|(_, v)| *v)
                    .collect();
                want.sort();
                assert_eq!(hits(&s, &text), want, "{text}");
                assert_eq!(s.len(), list.len());
            }
        }
    }
}
