//! The engine for long texts: regex-automata's meta engine, built per pattern once a text
//! longer than [`LONG_TEXT`] meets it (see `regex.rs`'s module docs for why), on a thread of
//! its own ([`warm`]): building one can take tens of milliseconds, which no request waits for
//! (the text that asked, and any until the engine is ready, run on the NFA simulations).
//!
//! Invariant: every live [`LongText`] is counted in [`LONG_TEXT_BYTES`] with its caches at their
//! maximum, from `build` until it is dropped, and none is built once the count has reached
//! [`LONG_TEXT_BUDGET`]: the memory long texts can make a process hold is bounded whatever the
//! requests and routes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, Weak};

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

/// The thread that builds long-text engines, and the process it was started in (a forked child
/// has the sender but not the thread: it starts its own). A job is the regex (not kept alive
/// by the queue) and what building its engine needs.
struct Warmer {
    queue: Sender<Job>,
    pid: u32,
}

/// What asks for a long-text engine and keeps it (a compiled regex): the warming thread knows
/// it only by these two calls.
pub(crate) trait LongTextOwner: Send + Sync {
    /// Keeps the engine built for it (`None`: it could not be built).
    fn store_long_text(&self, built: Option<LongText>);
    /// Its request could not be queued: the next long text asks again.
    fn long_text_wanted_again(&self);
}

struct Job {
    re: Weak<dyn LongTextOwner>,
    source: Box<str>,
    size_limit: usize,
}

/// Jobs queued or being built (for tests that must see the regexes' own references only).
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Waits until no long-text engine is queued or being built (diagnostics: a regex is held,
/// for the moment its engine is stored, by the thread too).
#[cfg(feature = "diagnostics")]
pub(crate) fn settle() {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while PENDING.load(Ordering::Acquire) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

static WARMER: Mutex<Option<Warmer>> = Mutex::new(None);

/// Has the long-text engine of `re` (the pattern `source`, compiled under `size_limit`; `me`
/// its weak reference) built off the calling thread (see the module docs). Never blocks: if
/// the queue's lock is taken (or was at a fork), the request is dropped and a later long text
/// asks again. The queue holds no strong reference: a regex whose last route goes before its
/// turn is freed (and skipped) as usual.
pub(crate) fn warm(
    me: Weak<dyn LongTextOwner>,
    re: &dyn LongTextOwner,
    source: &str,
    size_limit: usize,
) {
    let Ok(mut w) = WARMER.try_lock() else {
        re.long_text_wanted_again();
        return;
    };
    let pid = std::process::id();
    if w.as_ref().is_none_or(|w| w.pid != pid) {
        let (queue, jobs) = channel::<Job>();
        let started = std::thread::Builder::new()
            .name("atc-router-regex".into())
            .spawn(move || {
                for job in jobs {
                    // Built without holding the regex: a route removed meanwhile frees it.
                    if job.re.strong_count() > 0 {
                        let built = LongText::build(&job.source, job.size_limit);
                        if let Some(re) = job.re.upgrade() {
                            re.store_long_text(built);
                        }
                    }
                    PENDING.fetch_sub(1, Ordering::AcqRel);
                }
            });
        if started.is_err() {
            re.long_text_wanted_again();
            return;
        }
        *w = Some(Warmer { queue, pid });
    }
    if let Some(w) = w.as_ref() {
        PENDING.fetch_add(1, Ordering::AcqRel);
        let job = Job {
            re: me,
            source: source.into(),
            size_limit,
        };
        if w.queue.send(job).is_err() {
            PENDING.fetch_sub(1, Ordering::AcqRel);
            re.long_text_wanted_again();
        }
    }
}
