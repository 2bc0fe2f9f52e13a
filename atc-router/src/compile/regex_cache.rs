//! One compiled regex per source text and router.
//!
//! Invariants:
//! - The routes of a router that use a source all hold an `Arc` to the same [`CompiledRegex`];
//!   the cache holds only a `Weak` to it, so a regex lives exactly as long as something that
//!   uses it (a route, a prepared plan) and is freed with the last of them.
//! - Changes are prepared against an [`PreparedRegexes`], which reads the cache and keeps what it
//!   compiles to itself: preparing a change never touches the router, and dropping a prepared
//!   change leaves nothing behind.
//! - The threads of one build ([`SharedRegexes`]) share one map of what they compiled: a source
//!   two of them compile at once is kept once (the first stored), so the routes of a table still
//!   hold one regex per source. Compiling depends on the source and the size limit alone, so
//!   which thread compiles a source changes nothing.
//! - An entry whose regex is gone is dead: lookups treat it as missing, and it is taken out when
//!   the last route using the source is released, or by a later sweep if a prepared plan still
//!   held the regex then (see [`RegexCache::release`]).

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use rustc_hash::FxHashMap as HashMap;

use crate::compile::regex::{CompiledRegex, RegexError};

/// Where resolving an expression gets its compiled regexes from.
pub(crate) trait RegexSource {
    fn regex(&mut self, source: &str, size_limit: usize) -> Result<Arc<CompiledRegex>, RegexError>;
}

/// A read-only view of a router's cache plus the regexes compiled since: lets a change be
/// prepared without touching the router, and dropped without leaving anything behind.
///
/// For a router built to replace its base ([`PreparedRegexes::for_new_router`]), the base's
/// regexes it hands out are recorded too, so that `into_compiled` is every regex the new
/// routes use.
#[derive(Debug)]
pub(crate) struct PreparedRegexes<'a> {
    base: &'a RegexCache,
    new: HashMap<String, Arc<CompiledRegex>>,
    records_all: bool,
}

impl<'a> PreparedRegexes<'a> {
    pub(crate) fn new(base: &'a RegexCache) -> PreparedRegexes<'a> {
        PreparedRegexes {
            base,
            new: HashMap::default(),
            records_all: false,
        }
    }

    pub(crate) fn for_new_router(base: &'a RegexCache) -> PreparedRegexes<'a> {
        PreparedRegexes {
            records_all: true,
            ..PreparedRegexes::new(base)
        }
    }

    pub(crate) fn into_compiled(self) -> HashMap<String, Arc<CompiledRegex>> {
        self.new
    }

    /// What it holds, for the threads of a build to share; [`PreparedRegexes::unshare`] takes
    /// it back.
    pub(crate) fn share(&mut self) -> SharedRegexes<'a> {
        SharedRegexes {
            base: self.base,
            new: Mutex::new(std::mem::take(&mut self.new)),
            records_all: self.records_all,
        }
    }

    /// Takes back what [`PreparedRegexes::share`] lent, with what was compiled meanwhile.
    pub(crate) fn unshare(&mut self, shared: SharedRegexes<'a>) {
        self.new = shared.new.into_inner().unwrap_or_else(|e| e.into_inner());
    }
}

/// A [`PreparedRegexes`] the threads of one build share (see the module invariants).
#[derive(Debug)]
pub(crate) struct SharedRegexes<'a> {
    base: &'a RegexCache,
    new: Mutex<HashMap<String, Arc<CompiledRegex>>>,
    records_all: bool,
}

impl SharedRegexes<'_> {
    fn compiled(&self) -> MutexGuard<'_, HashMap<String, Arc<CompiledRegex>>> {
        // Only inserts and lookups happen under the lock: a panic cannot leave the map
        // half-changed.
        self.new.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RegexSource for &SharedRegexes<'_> {
    fn regex(&mut self, source: &str, size_limit: usize) -> Result<Arc<CompiledRegex>, RegexError> {
        if let Some(r) = self.compiled().get(source) {
            return Ok(r.clone());
        }
        let r = match self.base.get(source) {
            Some(r) if !self.records_all => return Ok(r),
            Some(r) => r,
            // Compiled without the lock, so that threads compile side by side; if another
            // thread stored the source meanwhile, its regex is the one every route gets.
            None => CompiledRegex::new(source, size_limit)?.shared(),
        };
        Ok(self
            .compiled()
            .entry(source.to_owned())
            .or_insert(r)
            .clone())
    }
}

impl RegexSource for PreparedRegexes<'_> {
    fn regex(&mut self, source: &str, size_limit: usize) -> Result<Arc<CompiledRegex>, RegexError> {
        if let Some(r) = self.new.get(source) {
            return Ok(r.clone());
        }
        let r = match self.base.get(source) {
            Some(r) if !self.records_all => return Ok(r),
            Some(r) => r,
            None => CompiledRegex::new(source, size_limit)?.shared(),
        };
        self.new.insert(source.to_owned(), r.clone());
        Ok(r)
    }
}

/// The regexes of a router's routes, by source.
#[derive(Debug, Default)]
pub(crate) struct RegexCache {
    by_source: HashMap<String, Weak<CompiledRegex>>,
    /// Releases since dead entries were last swept out.
    releases: usize,
}

impl RegexCache {
    fn get(&self, source: &str) -> Option<Arc<CompiledRegex>> {
        self.by_source.get(source).and_then(Weak::upgrade)
    }

    /// Takes in the regexes a [`PreparedRegexes`] handed out, while the routes using them are
    /// alive: a regex no route holds (its route was invalid for another reason) is left out, as
    /// `release` would never be called for it.
    pub(crate) fn register_in_use(&mut self, new: HashMap<String, Arc<CompiledRegex>>) {
        for (source, r) in new {
            if Arc::strong_count(&r) > 1 {
                self.by_source.insert(source, Arc::downgrade(&r));
            }
        }
    }

    /// Called after a route holding the regex `source` was dropped: forgets the regex if
    /// nothing holds it any more.
    ///
    /// A regex that a prepared plan held when its last route went is dead only once the plan
    /// is dropped, with no call here to notice; such entries are swept out once there have
    /// been as many releases as entries, so they never outnumber the live ones for long and
    /// the sweep costs O(1) per release, amortised.
    pub(crate) fn release(&mut self, source: &str) {
        if self
            .by_source
            .get(source)
            .is_some_and(|r| r.strong_count() == 0)
        {
            self.by_source.remove(source);
        }
        self.releases += 1;
        if self.releases > self.by_source.len().max(64) {
            self.by_source.retain(|_, r| r.strong_count() > 0);
            self.releases = 0;
        }
    }

    /// Number of regexes alive: held by a route, or by a change prepared against this router.
    #[cfg(feature = "diagnostics")]
    pub(crate) fn len(&self) -> usize {
        self.by_source
            .values()
            .filter(|r| r.strong_count() > 0)
            .count()
    }
}
