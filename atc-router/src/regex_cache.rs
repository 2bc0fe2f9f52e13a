//! Compiled regexes, shared by source text.
//!
//! Invariant: one router compiles a given regex source once; every route using it holds an
//! `Arc` to the same [`CompiledRegex`]. Entries no route holds any more are dropped by
//! [`RegexCache::release`], so removing routes frees their regexes.

use std::collections::HashMap;
use std::sync::Arc;

use regex::Regex;

/// A regex and what capture recording needs of it.
#[derive(Debug)]
pub struct CompiledRegex {
    pub(crate) regex: Regex,
    /// Group names by group index (`None` for unnamed groups and group 0).
    pub(crate) names: Box<[Option<Arc<str>>]>,
}

impl CompiledRegex {
    pub(crate) fn new(source: &str, size_limit: usize) -> Result<CompiledRegex, regex::Error> {
        let regex = regex::RegexBuilder::new(source)
            .size_limit(size_limit)
            .build()?;
        let names = regex.capture_names().map(|n| n.map(Arc::from)).collect();
        Ok(CompiledRegex { regex, names })
    }

    pub fn as_str(&self) -> &str {
        self.regex.as_str()
    }
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
