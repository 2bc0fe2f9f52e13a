//! The engine for long texts: regex-automata's meta engine, built per pattern the first time a
//! text longer than [`LONG_TEXT`] meets it (see `regex.rs`'s module docs for why).
//!
//! Invariant: every live [`LongText`] is counted in [`LONG_TEXT_BYTES`] with its caches at their
//! maximum, from `build` until it is dropped, and none is built once the count has reached
//! [`LONG_TEXT_BUDGET`]: the memory long texts can make a process hold is bounded whatever the
//! requests and routes.

use std::sync::atomic::{AtomicUsize, Ordering};

use regex_automata::meta;
use regex_automata::util::primitives::NonMaxUsize;
use regex_automata::Input;

/// Texts longer than this run on the meta engine (see the module docs). Paths and header values
/// of normal requests are shorter, and for them the NFA engines, whose state is already in
/// cache, win.
pub(crate) const LONG_TEXT: usize = 256;

/// Most bytes all the long-text engines of the process hold together (about a thousand
/// patterns, each counted with its caches at their maximum).
pub(crate) const LONG_TEXT_BUDGET: usize = 256 << 20;

/// The capacity of each of a long-text engine's two lazy DFA caches (forward and reverse).
pub(crate) const LONG_TEXT_DFA_CACHE: usize = 128 << 10;

/// Bytes the live long-text engines hold.
static LONG_TEXT_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The meta engine of one pattern, with its share of [`LONG_TEXT_BUDGET`].
#[derive(Debug)]
pub(crate) struct LongText {
    regex: meta::Regex,
    bytes: usize,
}

impl LongText {
    /// The engine for `source`, or `None` when it cannot be built within the budget.
    pub(crate) fn build(source: &str, size_limit: usize) -> Option<LongText> {
        LongText::build_with(size_limit, |b| b.build(source).ok())
    }

    /// The engine for a parsed pattern (an ASCII narrowing, say), as [`LongText::build`].
    pub(crate) fn build_from_hir(
        hir: &regex_syntax::hir::Hir,
        size_limit: usize,
    ) -> Option<LongText> {
        LongText::build_with(size_limit, |b| b.build_from_hir(hir).ok())
    }

    fn build_with(
        size_limit: usize,
        build: impl FnOnce(&meta::Builder) -> Option<meta::Regex>,
    ) -> Option<LongText> {
        if LONG_TEXT_BYTES.load(Ordering::Relaxed) >= LONG_TEXT_BUDGET {
            return None;
        }
        let config = meta::Config::new()
            // Neither the one-pass DFA (captures of short anchored matches; the largest part of
            // a meta regex) nor the bounded backtracker (short texts; its visited set would be
            // most of the search state) serves long texts.
            .onepass(false)
            .backtrack(false)
            .hybrid_cache_capacity(LONG_TEXT_DFA_CACHE)
            .nfa_size_limit(Some(size_limit));
        let regex = build(meta::Builder::new().configure(config))?;
        // The engine, and its search state at its largest: both lazy DFA caches full, and a
        // PikeVM cache, which is about the size of the NFAs.
        let bytes = 2 * regex.memory_usage() + 2 * LONG_TEXT_DFA_CACHE;
        let before = LONG_TEXT_BYTES.fetch_add(bytes, Ordering::Relaxed);
        if before + bytes > LONG_TEXT_BUDGET {
            LONG_TEXT_BYTES.fetch_sub(bytes, Ordering::Relaxed);
            return None;
        }
        Some(LongText { regex, bytes })
    }

    /// Searches `s`, recording the first `slots` group offsets in `out` (none when 0, and
    /// then the search stops at the first match it sees).
    pub(crate) fn search(&self, out: &mut Vec<Option<NonMaxUsize>>, s: &str, slots: usize) -> bool {
        if slots == 0 {
            return self
                .regex
                .search_half(&Input::new(s).earliest(true))
                .is_some();
        }
        out.clear();
        out.resize(slots, None);
        self.regex.search_slots(&Input::new(s), out).is_some()
    }
}

impl Drop for LongText {
    fn drop(&mut self) {
        LONG_TEXT_BYTES.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}
