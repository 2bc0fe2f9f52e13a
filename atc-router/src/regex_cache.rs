//! Compiled regexes, shared by source text.
//!
//! Invariant: one router compiles a given regex source once; every route using it holds an
//! `Arc` to the same [`CompiledRegex`]. Entries no route holds any more are dropped by
//! [`RegexCache::release`], so removing routes frees their regexes.

use std::collections::HashMap;
use std::sync::Arc;

use std::sync::Mutex;

use regex::{CaptureLocations, Regex};
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::Look;

/// A regex and what capture recording needs of it.
#[derive(Debug)]
pub struct CompiledRegex {
    pub(crate) regex: Regex,
    /// Group names by group index (`None` for unnamed groups and group 0).
    pub(crate) names: Box<[Option<Arc<str>>]>,
    /// For a regex anchored at the start: literals one of which every matching text starts with.
    prefixes: Option<Box<[Box<[u8]>]>>,
    /// Capture locations to reuse, so that recording captures allocates nothing per request.
    /// A pool rather than one slot because routers are shared by threads.
    locations: Mutex<Vec<CaptureLocations>>,
}

impl CompiledRegex {
    pub(crate) fn new(source: &str, size_limit: usize) -> Result<CompiledRegex, regex::Error> {
        let regex = regex::RegexBuilder::new(source)
            .size_limit(size_limit)
            .build()?;
        let names = regex.capture_names().map(|n| n.map(Arc::from)).collect();
        Ok(CompiledRegex {
            prefixes: anchored_prefixes(source),
            regex,
            names,
            locations: Mutex::new(Vec::new()),
        })
    }

    /// Literals one of which every text this regex matches starts with; `None` when the regex
    /// is not anchored at the start of the text or has no such finite, non-empty set.
    pub(crate) fn anchored_prefixes(&self) -> Option<&[Box<[u8]>]> {
        self.prefixes.as_deref()
    }

    /// Runs `f` with capture locations of this regex taken from (and returned to) the pool.
    pub(crate) fn with_locations<T>(&self, f: impl FnOnce(&mut CaptureLocations) -> T) -> T {
        let pooled = self
            .locations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        let mut locs = pooled.unwrap_or_else(|| self.regex.capture_locations());
        let out = f(&mut locs);
        self.locations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(locs);
        out
    }

    pub fn as_str(&self) -> &str {
        self.regex.as_str()
    }
}

/// Uses regex-syntax (the parser inside `regex`, with the same default flags) to find the
/// literal prefixes. Only a start anchor that every match begins with (`^` without `(?m)`, or
/// `\A`) makes a prefix of the match a prefix of the whole text.
fn anchored_prefixes(source: &str) -> Option<Box<[Box<[u8]>]>> {
    let hir = regex_syntax::Parser::new().parse(source).ok()?;
    if !hir.properties().look_set_prefix().contains(Look::Start) {
        return None;
    }
    let seq = Extractor::new().kind(ExtractKind::Prefix).extract(&hir);
    let literals = seq.literals()?;
    if literals.is_empty() || literals.iter().any(|l| l.as_bytes().is_empty()) {
        return None;
    }
    Some(literals.iter().map(|l| Box::from(l.as_bytes())).collect())
}

#[derive(Debug, Default)]
pub(crate) struct RegexCache {
    by_source: HashMap<String, Arc<CompiledRegex>>,
}

impl RegexCache {
    pub(crate) fn get_or_compile(
        &mut self,
        source: &str,
        size_limit: usize,
    ) -> Result<Arc<CompiledRegex>, regex::Error> {
        if let Some(r) = self.by_source.get(source) {
            return Ok(r.clone());
        }
        let r = Arc::new(CompiledRegex::new(source, size_limit)?);
        self.by_source.insert(source.to_owned(), r.clone());
        Ok(r)
    }

    /// Called after a route holding the regex `source` was dropped: forgets the regex if no
    /// route holds it any more.
    pub(crate) fn release(&mut self, source: &str) {
        if self
            .by_source
            .get(source)
            .is_some_and(|r| Arc::strong_count(r) == 1)
        {
            self.by_source.remove(source);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.by_source.len()
    }
}
