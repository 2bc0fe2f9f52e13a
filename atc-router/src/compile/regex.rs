//! Compiled regexes, shared by source text.
//!
//! Invariants:
//! - Sharing by source is `regex_cache.rs`'s job: every route using a source holds an `Arc` to
//!   the same [`CompiledRegex`].
//! - Matching uses [`Engine`], chosen for memory and build time: a pattern that is only a literal
//!   with anchors (`^/shop$`, `^/v1`, `\.com$`) is matched with string operations, and any other
//!   pattern with regex-automata's NFA simulations: the bounded backtracker for texts short
//!   enough for it, the PikeVM otherwise. The default `regex` configuration also builds one-pass
//!   and lazy DFAs: about ten times the memory (≈93 KB instead of ≈10 KB for a two-capture path
//!   pattern, plus up to 2 MB of lazy DFA cache per thread) for a matching speed-up that a
//!   router, which runs a regex only for the few routes its indexes leave, does not need.
//!   Matching is linear in the text with both engines.
//! - A pattern whose tree has Unicode classes or word boundaries may also hold the same pattern
//!   narrowed to ASCII ([`restrict_to_ascii`]); it runs only on all-ASCII texts, where it must
//!   find exactly what the full pattern finds. Anything that breaks that equivalence (a new
//!   kind of tree node, a Unicode-dependent look-around) must be left out of the narrowing.
//! - Search state (the engines' caches, the capture slots) is one per thread, shared by every
//!   regex of every router ([`SCRATCH`]): a search must `reset` an engine cache for its own
//!   regex before using it, and must not keep offsets in it past its own return.
//! - NFAs are compiled by one [`thompson::Compiler`] per thread, kept for the thread's life
//!   (see [`COMPILER`]): a fresh compiler costs about as much to set up and drop as a typical
//!   route's pattern costs to compile, and routes are mostly added one at a time.
//! - Texts longer than [`LONG_TEXT`] bytes (an 8 KB path, a 1 MB header: what an attacker
//!   sends) run on regex-automata's meta engine instead, the `regex` crate's own: literal
//!   prefilters, searches from the end for patterns anchored there, and a lazy DFA for the
//!   rest, so such a text costs what it costs Kong's library rather than an NFA simulation per
//!   byte. It is built for a pattern the first time a long text meets it (normal traffic never
//!   builds one), with its own search state (the meta engine's caches cannot be shared between
//!   patterns of different shapes), within a process-wide memory budget
//!   (`regex_long_text.rs`); past that budget, long texts fall back to the PikeVM (slower,
//!   still linear).
//! - A pattern not anchored at the start (and not a plain literal or a path of segments) runs
//!   on the meta engine, built with the pattern (within the same budget): an unanchored search
//!   is where the NFA simulations lose most to it (a search per start position, where the meta
//!   engine finds a required literal and runs a DFA around it), and such patterns are few in a
//!   gateway's table (path regexes are anchored). It is built from the ASCII narrowing when
//!   there is one, and then serves ASCII texts only: Unicode classes make DFA states that
//!   thrash a small cache, the narrowed ones do not.
//! - What the pattern's tree says before compiling (plain literal, literal prefixes, the ASCII
//!   narrowing) is `regex_shape.rs`'s job.
//! - The reference evaluator uses a plain `regex::Regex` of the same source, compiled on first
//!   use, so that the oracle does not share these engine choices.

use regex_automata::nfa::thompson::{self, backtrack, pikevm};
use regex_automata::util::primitives::NonMaxUsize;
use regex_automata::{Input, PatternID};
use regex_syntax::hir::{Hir, HirKind};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use crate::compile::path_pattern::PathPattern;
use crate::compile::path_regex::PathRegex;
use crate::compile::regex_long_text::{self, LongText, LongTextOwner, LONG_TEXT};
use crate::compile::regex_shape::{
    anchored_prefixes, direct_hir, literal, required_literals, restrict_to_ascii,
};
use crate::compile::regex_size::nfa_size_bound;

/// A regex and what matching and capture recording need of it.
#[derive(Debug)]
pub struct CompiledRegex {
    source: Box<str>,
    engine: Engine,
    /// Group names by group index (`None` for unnamed groups and group 0).
    pub(crate) names: Box<[Option<Arc<str>>]>,
    /// For a regex anchored at the start: literals one of which every matching text starts with.
    prefixes: Option<Box<[Box<[u8]>]>>,
    /// For a regex not anchored at the start: literals one of which every matching text
    /// contains (see [`required_literals`]).
    required: Option<Box<[Box<[u8]>]>>,
    /// For a regex anchored at the start: what every matching path looks like, by segment.
    path: Option<PathPattern>,
    /// Every match starts at the start of the text (`^` without `(?m)`, or `\A`).
    anchored_start: bool,
    /// For a regex that is exactly a path of literal and parameter segments: its segment form,
    /// which matches (and captures) without an automaton (see [`crate::path_regex`]).
    segments: Option<PathRegex>,
    size_limit: usize,
    /// Bytes of the compiled engines (see [`CompiledRegex::compiled_size`]).
    compiled_size: usize,
    /// Whether `compiled_size` was measured or bounded without compiling.
    sized: Sized,
    /// The engine for long texts, built off the request path once a long text asked for it
    /// (`None`: over budget, see the module docs).
    long_text: OnceLock<Option<LongText>>,
    /// A long text asked for `long_text` (it is queued or built).
    long_text_asked: AtomicBool,
    /// The `Arc` this regex lives in (set by [`CompiledRegex::shared`]): what the thread that
    /// builds long-text engines is handed.
    me: OnceLock<Weak<CompiledRegex>>,
    /// The meta engine every text runs on (every ASCII text, when the flag says it is built
    /// from the ASCII narrowing), for a pattern not anchored at the start (see the module docs).
    unanchored: Option<(LongText, bool)>,
    #[cfg(feature = "diagnostics")]
    reference: OnceLock<Option<regex::Regex>>,
}

#[derive(Debug)]
enum Engine {
    /// The pattern is `literal` with optional `^`/`\A` and `$`/`\z` and no groups.
    Literal {
        text: Box<str>,
        start: bool,
        end: bool,
    },
    Nfa {
        full: FullNfa,
        /// The same pattern with every class and word boundary cut down to ASCII, for texts
        /// that are all ASCII (see [`restrict_to_ascii`]); `None` when that changes nothing.
        ascii: Option<NfaEngines>,
    },
}

/// The NFA simulations of the whole pattern (see [`CompiledRegex::full`]): built with the
/// pattern, except for a pattern that has a segment form ([`PathRegex`]) or an ASCII narrowing,
/// either of which answers every ASCII text. Its automaton then serves only non-ASCII texts
/// (a non-ASCII path parameter), which most tables never see, and would otherwise be most of
/// what a regex route holds (≈1.4 KB a path pattern). With an ASCII narrowing it is compiled
/// when the pattern is added (the size limits are checked, the group names read) and dropped;
/// with a segment form it is not compiled at all when `regex_size.rs` bounds its size within
/// the limit (the names are read from the tree), which is most of what adding a REST route
/// cost. The first text that needs it compiles it, from the same source under the same limit,
/// so the same automaton, which the limit is then known to accept.
#[derive(Debug)]
struct FullNfa(OnceLock<Option<NfaEngines>>);

impl FullNfa {
    fn built(engines: NfaEngines) -> FullNfa {
        FullNfa(OnceLock::from(Some(engines)))
    }

    fn on_demand() -> FullNfa {
        FullNfa(OnceLock::new())
    }
}

/// How [`CompiledRegex::compiled_size`] was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sized {
    /// Measured on the compiled engines.
    Exact,
    /// Bounded from the pattern's tree (`regex_size.rs`); the automaton is not compiled yet.
    Bound,
}

/// Group names by group index (`None` for group 0 and unnamed groups), read from the tree as
/// regex-automata numbers them: group `i` is the capture of index `i`.
fn group_names(hir: &Hir) -> Vec<Option<Arc<str>>> {
    fn walk(hir: &Hir, out: &mut Vec<Option<Arc<str>>>) {
        match hir.kind() {
            HirKind::Capture(c) => {
                if let (Some(slot), Some(name)) = (out.get_mut(c.index as usize), &c.name) {
                    *slot = Some(Arc::from(&**name));
                }
                walk(&c.sub, out);
            }
            HirKind::Repetition(r) => walk(&r.sub, out),
            HirKind::Concat(hs) | HirKind::Alternation(hs) => hs.iter().for_each(|h| walk(h, out)),
            HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => {}
        }
    }
    let mut out = vec![None; 1 + hir.properties().explicit_captures_len()];
    walk(hir, &mut out);
    out
}

/// The NFA simulations of one compiled pattern.
#[derive(Debug)]
struct NfaEngines {
    backtrack: backtrack::BoundedBacktracker,
    pikevm: pikevm::PikeVM,
}

impl NfaEngines {
    fn new(nfa: thompson::NFA) -> Result<NfaEngines, RegexError> {
        let backtrack = backtrack::BoundedBacktracker::new_from_nfa(nfa.clone())
            .map_err(|e| RegexError::Syntax(e.to_string()))?;
        let pikevm =
            pikevm::PikeVM::new_from_nfa(nfa).map_err(|e| RegexError::Syntax(e.to_string()))?;
        Ok(NfaEngines { backtrack, pikevm })
    }
}

/// Search state of the NFA engines, one per thread, shared by every regex the thread runs
/// (see [`SCRATCH`]).
#[derive(Debug, Default)]
struct Scratch {
    backtrack: Option<backtrack::Cache>,
    pikevm: Option<pikevm::Cache>,
    /// Group offsets of the last search: group `i` spans `slots[2 * i]..slots[2 * i + 1]`.
    slots: Vec<Option<NonMaxUsize>>,
}

/// Why a regex was rejected.
#[derive(Debug)]
pub(crate) enum RegexError {
    Syntax(String),
    TooBig(usize),
}

thread_local! {
    /// The compiler behind every NFA this thread builds. Its UTF-8 state cache is a
    /// 10,000-entry table (≈320 KB) that a new compiler allocates on its first Unicode class
    /// (`\d`, `\w`, `[^/]`, `.`) and frees on drop: ≈120k instructions per compile, more than
    /// a third of a workload pattern's whole compile. Kept, it costs that memory once per
    /// thread that compiles, not per router or per pattern. Each compile resets the compiler's
    /// state, so reuse cannot leak one pattern into the next.
    static COMPILER: RefCell<Option<thompson::Compiler>> = const { RefCell::new(None) };

    /// The search state every regex of this thread runs with, so that matching allocates
    /// nothing once it has grown. One per thread rather than one per regex: at 100,000 routes a
    /// request's regex is one no request ran lately, and its own caches (a pool, the visited
    /// set, the capture slots) were several cache misses per search and memory per pattern,
    /// where this state stays in cache. An engine cache is `reset` for each regex it serves,
    /// which is all regex-automata asks for sharing one between regexes.
    static SCRATCH: RefCell<Scratch> = const {
        RefCell::new(Scratch { backtrack: None, pikevm: None, slots: Vec::new() })
    };
}

/// Compiles `hir` with the thread's compiler.
fn compile_nfa(hir: &Hir, size_limit: usize) -> Result<thompson::NFA, RegexError> {
    let config = thompson::Config::new().nfa_size_limit(Some(size_limit));
    let built = COMPILER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => slot
            .get_or_insert_with(thompson::Compiler::new)
            .configure(config)
            .build_from_hir(hir)
            .map_err(Box::new),
        // Only reachable if compiling re-entered itself (it does not); stay correct anyway.
        Err(_) => thompson::Compiler::new()
            .configure(config)
            .build_from_hir(hir)
            .map_err(Box::new),
    });
    built.map_err(|e| match e.size_limit() {
        Some(limit) => RegexError::TooBig(limit),
        None => RegexError::Syntax(e.to_string()),
    })
}

impl CompiledRegex {
    pub(crate) fn new(source: &str, size_limit: usize) -> Result<CompiledRegex, RegexError> {
        let hir = match direct_hir(source) {
            Some(hir) => hir,
            // The same syntax defaults as `regex::Regex::new` (Unicode, UTF-8, nest limit).
            None => regex_syntax::Parser::new()
                .parse(source)
                .map_err(|e| RegexError::Syntax(e.to_string()))?,
        };
        let prefixes = anchored_prefixes(&hir);
        let required = match prefixes {
            Some(_) => None,
            None => required_literals(&hir),
        };
        let path = PathPattern::from_regex(&hir);
        let anchored_start = hir
            .properties()
            .look_set_prefix()
            .contains(regex_syntax::hir::Look::Start);
        let segments = PathRegex::from_hir(&hir);
        let mut sized = Sized::Exact;
        let unbuilt = segments
            .as_ref()
            .and_then(|_| nfa_size_bound(&hir))
            .filter(|&bound| bound <= size_limit);
        let (engine, names, full_size) = match literal(&hir) {
            Some((text, start, end)) => {
                let size = text.len();
                (Engine::Literal { text, start, end }, vec![None], size)
            }
            // A segment form answers every ASCII text without an automaton (see the module
            // docs): unless the limits need its real size, the automaton is compiled only for
            // the first text that needs it.
            None if unbuilt.is_some() => {
                let bound = unbuilt.unwrap_or(size_limit);
                sized = Sized::Bound;
                let full = FullNfa::on_demand();
                (Engine::Nfa { full, ascii: None }, group_names(&hir), bound)
            }
            None => {
                let nfa = compile_nfa(&hir, size_limit)?;
                let names: Vec<Option<Arc<str>>> = nfa
                    .group_info()
                    .pattern_names(PatternID::ZERO)
                    .map(|n| n.map(Arc::from))
                    .collect();
                // The slot layout `captures` reads: one pattern, group `i` at `2i` and `2i + 1`.
                debug_assert!((0..names.len()).all(
                    |i| nfa.group_info().slots(PatternID::ZERO, i) == Some((2 * i, 2 * i + 1))
                ));
                let groups = nfa.group_info().group_len(PatternID::ZERO);
                // An optimisation only: if the narrowed pattern cannot be built, or its groups
                // differ (they should not: only classes shrink), every text runs the full one,
                // and the route is never rejected for it. A path regex has none: its segment
                // form answers every ASCII text, so only non-ASCII ones reach the automaton.
                let ascii = segments
                    .is_none()
                    .then(|| restrict_to_ascii(&hir))
                    .flatten()
                    .and_then(|narrow| compile_nfa(&narrow, size_limit).ok())
                    .filter(|narrow| narrow.group_info().group_len(PatternID::ZERO) == groups)
                    .and_then(|narrow| NfaEngines::new(narrow).ok());
                let full = NfaEngines::new(nfa)?;
                let size = full.pikevm.get_nfa().memory_usage();
                let full = match (&segments, &ascii) {
                    (None, None) => FullNfa::built(full),
                    _ => FullNfa::on_demand(),
                };
                (Engine::Nfa { full, ascii }, names, size)
            }
        };
        let unanchored = match &engine {
            Engine::Nfa { ascii, .. } if !anchored_start && segments.is_none() => {
                let narrow = ascii.as_ref().and_then(|_| restrict_to_ascii(&hir));
                match &narrow {
                    Some(n) => LongText::build_from_hir(n, size_limit).map(|m| (m, true)),
                    None => LongText::build_from_hir(&hir, size_limit).map(|m| (m, false)),
                }
            }
            _ => None,
        };
        // The full automaton counts whether it is kept or compiled on demand: the limits
        // accept the same patterns either way.
        let compiled_size = match &engine {
            Engine::Literal { .. } => full_size,
            Engine::Nfa { ascii, .. } => {
                full_size
                    + ascii
                        .as_ref()
                        .map_or(0, |a| a.pikevm.get_nfa().memory_usage())
            }
        };
        Ok(CompiledRegex {
            source: source.into(),
            engine,
            names: crate::fitted::fitted(names),
            prefixes,
            required,
            path,
            anchored_start,
            segments,
            size_limit,
            compiled_size,
            sized,
            long_text: OnceLock::new(),
            long_text_asked: AtomicBool::new(false),
            me: OnceLock::new(),
            unanchored,
            #[cfg(feature = "diagnostics")]
            reference: OnceLock::new(),
        })
    }

    /// The regex in an `Arc`, knowing it (so that a long text can have its long-text engine
    /// built on another thread).
    pub(crate) fn shared(self) -> Arc<CompiledRegex> {
        let arc = Arc::new(self);
        let _ = arc.me.set(Arc::downgrade(&arc));
        arc
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The size of its compiled form, in bytes, or an upper bound of it for a pattern whose
    /// automaton was not compiled (see [`CompiledRegex::is_size_bound`]): what
    /// `Limits::regex_total_size_limit` counts.
    pub(crate) fn compiled_size(&self) -> usize {
        self.compiled_size
    }

    /// Whether [`CompiledRegex::compiled_size`] is a bound (`regex_size.rs`), which
    /// [`CompiledRegex::exact_compiled_size`] replaces when a limit is at stake.
    pub(crate) fn is_size_bound(&self) -> bool {
        self.sized == Sized::Bound
    }

    /// The size of its compiled form, in bytes, compiling the automaton if it was not (it is
    /// then kept, as the first text that needs it would compile it).
    pub(crate) fn exact_compiled_size(&self) -> usize {
        match (&self.engine, self.sized) {
            (Engine::Nfa { full, .. }, Sized::Bound) => self
                .full(full)
                .map_or(self.compiled_size, |e| e.pikevm.get_nfa().memory_usage()),
            _ => self.compiled_size,
        }
    }

    /// Literals one of which every text this regex matches starts with; `None` when the regex
    /// is not anchored at the start of the text or has no such finite, non-empty set.
    pub(crate) fn anchored_prefixes(&self) -> Option<&[Box<[u8]>]> {
        self.prefixes.as_deref()
    }

    /// For a regex not anchored at the start: literals one of which every matching text
    /// contains; `None` when there is no such finite, non-empty set.
    pub(crate) fn required_literals(&self) -> Option<&[Box<[u8]>]> {
        self.required.as_deref()
    }

    /// What every path this regex matches looks like, segment by segment (for a regex anchored
    /// at the start whose matches start with `/`).
    pub(crate) fn path_pattern(&self) -> Option<&PathPattern> {
        self.path.as_ref()
    }

    /// Whether every match starts at the start of the text.
    pub(crate) fn is_anchored_at_start(&self) -> bool {
        self.anchored_start
    }

    pub(crate) fn is_match(&self, s: &str) -> bool {
        if let Some(found) = self
            .segments
            .as_ref()
            .and_then(|p| p.captures(s, |_, _| {}))
        {
            return found;
        }
        match &self.engine {
            Engine::Literal { .. } => self.find_literal(s).is_some(),
            Engine::Nfa { full, ascii } => {
                if let Some(long) = self.long_text(s) {
                    return with_scratch(|sc| long.search(&mut sc.slots, s, 0));
                }
                let Some(e) = self.engines_for(full, ascii, s) else {
                    return false;
                };
                with_scratch(|sc| search(e, sc, &Input::new(s).earliest(true), 0))
            }
        }
    }

    /// Finds the leftmost-first match and calls `f(group, text)` for every group that took
    /// part, group 0 (the whole match) first. Returns whether there was a match.
    pub(crate) fn captures(&self, s: &str, mut f: impl FnMut(usize, &str)) -> bool {
        if let Some(found) = self.segments.as_ref().and_then(|p| p.captures(s, &mut f)) {
            return found;
        }
        let e = match &self.engine {
            Engine::Literal { .. } => {
                return match self.find_literal(s) {
                    Some(m) => {
                        f(0, m);
                        true
                    }
                    None => false,
                };
            }
            Engine::Nfa { full, ascii } => (full, ascii),
        };
        // The long-text engine first: choosing the NFA engines reads the whole text.
        let long = self.long_text(s);
        let nfa = match long {
            Some(_) => None,
            None => match self.engines_for(e.0, e.1, s) {
                Some(nfa) => Some(nfa),
                None => return false,
            },
        };
        with_scratch(|sc| {
            let slots = 2 * self.names.len();
            let found = match (long, nfa) {
                (Some(long), _) => long.search(&mut sc.slots, s, slots),
                (None, Some(nfa)) => search(nfa, sc, &Input::new(s), slots),
                (None, None) => false,
            };
            if !found {
                return false;
            }
            for i in 0..self.names.len() {
                if let (Some(start), Some(end)) = (sc.slots[2 * i], sc.slots[2 * i + 1]) {
                    f(i, &s[start.get()..end.get()]);
                }
            }
            true
        })
    }

    /// The meta engine, for a text long enough to need it (see the module docs).
    #[inline]
    fn long_text(&self, s: &str) -> Option<&LongText> {
        if let Some((meta, ascii_only)) = &self.unanchored {
            if !ascii_only || s.is_ascii() {
                return Some(meta);
            }
        }
        if s.len() <= LONG_TEXT {
            return None;
        }
        if let Some(built) = self.long_text.get() {
            return built.as_ref();
        }
        // Not built yet: this text runs on the NFA simulations, and the engine is built on the
        // warming thread (a regex outside an `Arc`, as in unit tests, builds it here).
        if !self.long_text_asked.swap(true, Ordering::AcqRel) {
            match self.me.get() {
                Some(me) => regex_long_text::warm(me.clone(), self, &self.source, self.size_limit),
                None => {
                    return self
                        .long_text
                        .get_or_init(|| LongText::build(&self.source, self.size_limit))
                        .as_ref()
                }
            }
        }
        None
    }

    /// The engines to search `text` with: the ASCII ones when the text is all ASCII and there
    /// are any, else the full ones (compiled now if they are compiled on demand and this is
    /// the first text to need them).
    #[inline]
    fn engines_for<'e>(
        &'e self,
        full: &'e FullNfa,
        ascii: &'e Option<NfaEngines>,
        text: &str,
    ) -> Option<&'e NfaEngines> {
        match ascii {
            Some(a) if text.is_ascii() => Some(a),
            _ => self.full(full),
        }
    }

    /// The full automaton, compiled now if it is compiled on demand (see [`FullNfa`]). The
    /// compile repeats one that succeeded when the pattern was added (same source, same
    /// limit), so `None` is not expected; it would make the regex match nothing rather than
    /// panic on a request.
    #[cold]
    fn full_on_demand(&self) -> Option<NfaEngines> {
        let hir = match direct_hir(&self.source) {
            Some(hir) => hir,
            None => regex_syntax::Parser::new().parse(&self.source).ok()?,
        };
        let built = compile_nfa(&hir, self.size_limit)
            .ok()
            .and_then(|nfa| NfaEngines::new(nfa).ok());
        debug_assert!(built.is_some(), "{} compiled when added", self.source);
        built
    }

    #[inline]
    fn full<'e>(&'e self, full: &'e FullNfa) -> Option<&'e NfaEngines> {
        full.0.get_or_init(|| self.full_on_demand()).as_ref()
    }

    fn find_literal<'s>(&self, s: &'s str) -> Option<&'s str> {
        let Engine::Literal { text, start, end } = &self.engine else {
            return None;
        };
        let found = match (start, end) {
            (true, true) => s == &**text,
            (true, false) => s.starts_with(&**text),
            (false, true) => s.ends_with(&**text),
            (false, false) => return s.find(&**text).map(|i| &s[i..i + text.len()]),
        };
        // Every match of a literal pattern is the literal itself; `s` holds it where it matched.
        found.then(|| {
            let at = if *end { s.len() - text.len() } else { 0 };
            &s[at..at + text.len()]
        })
    }

    /// The plain `regex` crate's view of this pattern, for the reference evaluator. Without a
    /// size limit: the limit is the router's to apply when the route is added (with its own
    /// engines, which may be smaller than the `regex` crate's), and a regex the router took
    /// must mean the same thing to the oracle.
    #[cfg(feature = "diagnostics")]
    pub(crate) fn reference(&self) -> Option<&regex::Regex> {
        self.reference
            .get_or_init(|| {
                regex::RegexBuilder::new(&self.source)
                    .size_limit(usize::MAX >> 1)
                    .build()
                    .ok()
            })
            .as_ref()
    }
}

/// Runs `run` with this thread's [`SCRATCH`] (with a fresh one if it is in use, which would
/// take a regex search nested in another, or once the thread is shutting down).
impl LongTextOwner for CompiledRegex {
    /// Stores the long-text engine the warming thread built (unless one is there).
    fn store_long_text(&self, built: Option<LongText>) {
        let _ = self.long_text.set(built);
    }

    fn long_text_wanted_again(&self) {
        self.long_text_asked.store(false, Ordering::Release);
    }
}

fn with_scratch<T>(run: impl FnOnce(&mut Scratch) -> T) -> T {
    let mut run = Some(run);
    let shared = SCRATCH.try_with(|cell| {
        let mut sc = cell.try_borrow_mut().ok()?;
        Some((run.take()?)(&mut sc))
    });
    match (shared, run) {
        (Ok(Some(out)), _) => out,
        (_, Some(run)) => run(&mut Scratch::default()),
        (_, None) => unreachable!("`run` is taken only when it runs"),
    }
}

/// Searches `input` with the bounded backtracker, or with the PikeVM when the text is too long
/// for the backtracker's bounded memory, recording the first `slots` group offsets in
/// `sc.slots`. Returns whether there is a match.
fn search(e: &NfaEngines, sc: &mut Scratch, input: &Input<'_>, slots: usize) -> bool {
    let (backtrack, pikevm) = (&e.backtrack, &e.pikevm);
    sc.slots.clear();
    sc.slots.resize(slots, None);
    let cache = sc.backtrack.get_or_insert_with(|| backtrack.create_cache());
    cache.reset(backtrack);
    match backtrack.try_search_slots(cache, input, &mut sc.slots) {
        Ok(m) => m.is_some(),
        Err(_) => {
            let cache = sc.pikevm.get_or_insert_with(|| pikevm.create_cache());
            cache.reset(pikevm);
            pikevm.search_slots(cache, input, &mut sc.slots).is_some()
        }
    }
}

#[cfg(test)]
mod tests;
