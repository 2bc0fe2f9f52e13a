//! Payloads keyed by literals that a value must contain (`http.path contains "/export/"`, or
//! the literal every match of an unanchored regex starts with): one multi-literal automaton
//! (Aho-Corasick) finds, in one pass over a request value, every stored literal it contains.
//! A set of a few literals (the common case: a handful of `contains` routes beside a table
//! keyed by host or prefix, visited by every request) searches for each literal with its own
//! substring searcher instead: an overlapping automaton search steps through every byte of the
//! value, several times the work of [`FEW`] vectorised substring searches over a path.
//!
//! The searcher is built from the literal list by the first walk after the list changed (not
//! when a payload does), so a change costs a build over this set's literals only, once.
//! Invariants: the automaton's pattern `i` and the `i`-th finder are `lits[i]`; a change of the
//! list drops the searcher.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};
use memchr::memmem::Finder;
use rustc_hash::FxHashMap;

/// Sets of up to this many literals search for each one alone.
const FEW: usize = 4;

#[derive(Debug)]
pub(crate) struct ContainsSet<T> {
    lits: Vec<(Box<[u8]>, T)>,
    /// The place of each literal in `lits`: a set of thousands is updated without a scan.
    place: FxHashMap<Box<[u8]>, usize>,
    searcher: OnceLock<Searcher>,
}

#[derive(Debug)]
enum Searcher {
    Few(Box<[Finder<'static>]>),
    Many(AhoCorasick),
    /// The automaton could not be built: every literal's payload is visited.
    All,
}

impl<T> Default for ContainsSet<T> {
    fn default() -> Self {
        ContainsSet {
            lits: Vec::new(),
            place: FxHashMap::default(),
            searcher: OnceLock::new(),
        }
    }
}

impl<T> ContainsSet<T> {
    pub(crate) fn len(&self) -> usize {
        self.lits.len()
    }

    fn rebuild(&mut self) {
        self.searcher = OnceLock::new();
    }

    fn searcher(&self) -> &Searcher {
        self.searcher.get_or_init(|| {
            if self.lits.len() <= FEW {
                let finders = self.lits.iter().map(|(l, _)| Finder::new(l).into_owned());
                return Searcher::Few(finders.collect());
            }
            AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .build(self.lits.iter().map(|(l, _)| l))
                .map_or(Searcher::All, Searcher::Many)
        })
    }

    pub(crate) fn get_or_insert_with(&mut self, lit: &[u8], make: impl FnOnce() -> T) -> &mut T {
        let i = match self.place.get(lit) {
            Some(&i) => i,
            None => {
                self.lits.push((lit.into(), make()));
                self.place.insert(lit.into(), self.lits.len() - 1);
                self.rebuild();
                self.lits.len() - 1
            }
        };
        &mut self.lits[i].1
    }

    pub(crate) fn get_mut(&mut self, lit: &[u8]) -> Option<&mut T> {
        let i = *self.place.get(lit)?;
        Some(&mut self.lits[i].1)
    }

    pub(crate) fn remove(&mut self, lit: &[u8]) -> Option<T> {
        let i = self.place.remove(lit)?;
        let (_, v) = self.lits.swap_remove(i);
        if let Some((moved, _)) = self.lits.get(i) {
            self.place.insert(moved.clone(), i);
        }
        self.rebuild();
        Some(v)
    }

    /// Visits the payload of every stored literal `text` contains (a literal found at several
    /// places may be visited more than once).
    #[inline]
    pub(crate) fn walk<'a>(&'a self, text: &[u8], mut visit: impl FnMut(&'a T)) {
        match self.searcher() {
            Searcher::Few(finders) => {
                for (f, (_, v)) in finders.iter().zip(&self.lits) {
                    if f.find(text).is_some() {
                        visit(v);
                    }
                }
            }
            Searcher::Many(ac) => {
                for m in ac.find_overlapping_iter(text) {
                    visit(&self.lits[m.pattern().as_usize()].1);
                }
            }
            Searcher::All => self.lits.iter().for_each(|(_, v)| visit(v)),
        }
    }

    pub(crate) fn for_each(&self, visit: impl FnMut(&T)) {
        self.lits.iter().map(|(_, v)| v).for_each(visit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_meets_every_literal_it_contains() {
        let mut s = ContainsSet::default();
        for (i, l) in ["/export/", "/svc1/", "/svc12/", "json", "ex"]
            .iter()
            .enumerate()
        {
            *s.get_or_insert_with(l.as_bytes(), || 0) = i;
        }
        let hits = |s: &ContainsSet<usize>, t: &str| {
            let mut out = Vec::new();
            s.walk(t.as_bytes(), |v| out.push(*v));
            out.sort();
            out.dedup();
            out
        };
        // Five literals: one automaton.
        assert_eq!(hits(&s, "/a/export/b.json"), [0, 3, 4]);
        assert!(matches!(s.searcher(), Searcher::Many(_)));
        assert_eq!(hits(&s, "/svc12/x"), [2]);
        assert_eq!(hits(&s, "/svc1/x"), [1]);
        // Four: a finder each, with the same answers.
        assert_eq!(s.remove(b"ex"), Some(4));
        assert_eq!(hits(&s, "/a/export/b.json"), [0, 3]);
        assert!(matches!(s.searcher(), Searcher::Few(_)));
        assert_eq!(hits(&s, "/svc12/x"), [2]);
        assert_eq!(hits(&s, "/svc1/x"), [1]);
        assert_eq!(hits(&s, "/svc/x"), [0usize; 0]);
        assert_eq!(s.len(), 4);
    }
}
