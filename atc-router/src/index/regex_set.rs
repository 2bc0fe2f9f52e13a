//! Payloads keyed by regexes that no other key describes (an unanchored pattern without a
//! literal every match starts with, say): one multi-pattern automaton (regex-automata's meta
//! regex over every pattern of the set) says, in one search of a request value, which patterns
//! match; only their routes become candidates, where each route would otherwise run its own
//! regex. Captures are left to the winning route's own evaluation.
//!
//! The automaton is built from the pattern list by the first walk after the list changed (not
//! when a payload does), so building a set key by key, or counting with one, compiles nothing.
//! Invariants: pattern `i` of the automaton is `pats[i]`; a change of the list drops the
//! automaton; when it cannot be built (it always can for patterns that compiled one by one,
//! unless together they pass the size limit), a walk visits every payload, which is sound, only
//! slower.

use std::sync::OnceLock;

use regex_automata::meta;
use regex_automata::{Input, MatchKind, PatternSet};
use rustc_hash::FxHashMap;

#[derive(Debug)]
pub(crate) struct RegexSet<T> {
    pats: Vec<(Box<str>, T)>,
    /// The place of each pattern in `pats`.
    place: FxHashMap<Box<str>, usize>,
    automaton: OnceLock<Option<meta::Regex>>,
}

impl<T> Default for RegexSet<T> {
    fn default() -> Self {
        RegexSet {
            pats: Vec::new(),
            place: FxHashMap::default(),
            automaton: OnceLock::new(),
        }
    }
}

/// The search state of a walk: which patterns matched (grown to the largest set, then reused).
#[derive(Debug, Default)]
pub(crate) struct Matched(Option<PatternSet>);

impl<T> RegexSet<T> {
    pub(crate) fn len(&self) -> usize {
        self.pats.len()
    }

    fn rebuild(&mut self) {
        self.automaton = OnceLock::new();
    }

    fn automaton(&self) -> Option<&meta::Regex> {
        self.automaton
            .get_or_init(|| {
                meta::Builder::new()
                    .configure(meta::Config::new().match_kind(MatchKind::All))
                    .build_many(&self.pats.iter().map(|(p, _)| &**p).collect::<Vec<_>>())
                    .ok()
            })
            .as_ref()
    }

    pub(crate) fn get_or_insert_with(&mut self, pattern: &str, make: impl FnOnce() -> T) -> &mut T {
        let i = match self.place.get(pattern) {
            Some(&i) => i,
            None => {
                self.pats.push((pattern.into(), make()));
                self.place.insert(pattern.into(), self.pats.len() - 1);
                self.rebuild();
                self.pats.len() - 1
            }
        };
        &mut self.pats[i].1
    }

    pub(crate) fn get_mut(&mut self, pattern: &str) -> Option<&mut T> {
        let i = *self.place.get(pattern)?;
        Some(&mut self.pats[i].1)
    }

    pub(crate) fn remove(&mut self, pattern: &str) -> Option<T> {
        let i = self.place.remove(pattern)?;
        let (_, v) = self.pats.swap_remove(i);
        if let Some((moved, _)) = self.pats.get(i) {
            self.place.insert(moved.clone(), i);
        }
        self.rebuild();
        Some(v)
    }

    /// Visits the payload of every pattern that matches somewhere in `text`.
    #[inline]
    pub(crate) fn walk<'a>(&'a self, text: &[u8], m: &mut Matched, mut visit: impl FnMut(&'a T)) {
        let Some(re) = self.automaton() else {
            self.pats.iter().for_each(|(_, v)| visit(v));
            return;
        };
        let set = match &mut m.0 {
            Some(set) if set.capacity() >= re.pattern_len() => set,
            slot => slot.insert(PatternSet::new(re.pattern_len())),
        };
        set.clear();
        re.which_overlapping_matches(&Input::new(text), set);
        for p in set.iter() {
            if let Some((_, v)) = self.pats.get(p.as_usize()) {
                visit(v);
            }
        }
    }

    pub(crate) fn for_each(&self, visit: impl FnMut(&T)) {
        self.pats.iter().map(|(_, v)| v).for_each(visit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_meets_the_patterns_that_match_it() {
        let mut s = RegexSet::default();
        for (i, p) in [r"\d+\.json$", "(foo|bar)baz", "^/x", r"\bword\b"]
            .iter()
            .enumerate()
        {
            *s.get_or_insert_with(p, || 0) = i;
        }
        let hits = |s: &RegexSet<usize>, t: &str| {
            let mut m = Matched::default();
            let mut out = Vec::new();
            s.walk(t.as_bytes(), &mut m, |v| out.push(*v));
            out.sort();
            out
        };
        assert_eq!(hits(&s, "/x/12.json"), [0, 2]);
        assert_eq!(hits(&s, "a barbaz word"), [1, 3]);
        assert_eq!(hits(&s, "nothing"), Vec::<usize>::new());
        assert_eq!(s.remove("^/x"), Some(2));
        assert_eq!(hits(&s, "/x/12.json"), [0]);
    }
}
