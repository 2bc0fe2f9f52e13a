//! Resource limits. Every limit turns an oversized input into a clear error instead of a crash,
//! a stack overflow or unbounded memory; the defaults are generous for real route tables.

/// Limits applied when parsing expressions and filling contexts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest expression text, in bytes. Default 64 KiB.
    pub max_expression_len: usize,
    /// Deepest nesting of parentheses (groups, `!( … )` and transformations together).
    /// Default 64; values above [`Limits::HARD_MAX_DEPTH`] are treated as that, because this is
    /// also what keeps the recursive-descent parser inside its stack.
    pub max_depth: usize,
    /// Most predicates in one expression. Default 4,096.
    pub max_predicates: usize,
    /// Most regexes (`~` predicates) in one expression. Default 64.
    pub max_regexes: usize,
    /// Largest compiled size of one regex, in bytes (the `regex` crate's `size_limit`).
    /// Default 1 MiB.
    pub regex_size_limit: usize,
    /// Most values one context field may hold (a header repeated this often is an attack).
    /// Default 1,024.
    pub max_values_per_field: usize,
    /// Most distinct field names one schema resolves through `prefix.*` wildcards.
    /// Default 65,536.
    pub max_wildcard_fields: usize,
}

impl Limits {
    /// The nesting depth that is never exceeded, whatever `max_depth` says.
    pub const HARD_MAX_DEPTH: usize = 256;

    pub(crate) fn depth(&self) -> usize {
        self.max_depth.min(Self::HARD_MAX_DEPTH)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_expression_len: 64 * 1024,
            max_depth: 64,
            max_predicates: 4096,
            max_regexes: 64,
            regex_size_limit: 1024 * 1024,
            max_values_per_field: 1024,
            max_wildcard_fields: 65_536,
        }
    }
}
