//! Resource limits. Every limit turns an oversized input into a clear error instead of a crash,
//! a stack overflow or unbounded memory.
//!
//! The defaults take every route table a gateway generates (Kong's compatible flavour writes one
//! expression per route from all its hosts, paths and headers: thousands of terms), while
//! keeping the stack and the cost of adding one route bounded. Routes written by tenants rather
//! than by the gateway's own configuration deserve tighter limits: see SECURITY.md.
//!
//! Limits are set on the schema ([`Schema::with_limits`](crate::Schema::with_limits),
//! [`Schema::set_limits`](crate::Schema::set_limits); from C `atc_schema_set_limit`, from Lua
//! `schema:set_limits`) and govern its routers, validations and contexts;
//! [`Router::with_limits`](crate::Router::with_limits) overrides the expression limits of one
//! router.

/// Limits applied when parsing expressions and filling contexts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest expression text, in bytes. Default 1 MiB (16,384 predicates of 64 bytes).
    pub max_expression_len: usize,
    /// Deepest nesting of parentheses (groups, `!( … )` and transformations together).
    /// Default 256, which is also [`Limits::HARD_MAX_DEPTH`]: values above it are treated as
    /// it, because this is what keeps the recursive-descent parser and the tree walks inside
    /// their stacks (an expression at the cap needs about 512 KiB of stack in a release build).
    pub max_depth: usize,
    /// Most predicates in one expression. Default 16,384.
    pub max_predicates: usize,
    /// Most regexes (`~` predicates) in one expression. Default 16,384, as many as predicates:
    /// the work of compiling them is bounded by [`Limits::regex_total_size_limit`].
    pub max_regexes: usize,
    /// Largest compiled size of one regex, in bytes (the `regex` crate's `size_limit`).
    /// Default 10 MiB, the `regex` crate's own and so Kong's library's: every regex Kong
    /// takes loads here (Unicode `\w{1,64}` is over 1 MiB).
    pub regex_size_limit: usize,
    /// Largest compiled size of all the regexes of one expression together, in bytes (each
    /// occurrence counts). Default 32 MiB.
    pub regex_total_size_limit: usize,
    /// Most values one context field may hold (a header repeated this often is an attack).
    /// Default 1,024.
    pub max_values_per_field: usize,
    /// Most distinct wildcard names (`http.headers.x_tenant` under `http.headers.*`) the routes
    /// of one schema use at a time. Default 65,536. Requests never count against it: a name is
    /// registered by the routes that use it and released with the last of them.
    pub max_wildcard_fields: usize,
}

impl Limits {
    /// The nesting depth that is never exceeded, whatever `max_depth` says.
    pub const HARD_MAX_DEPTH: usize = 256;

    /// The limits' names, in the order of the fields: what the C ABI numbers (`ATC_LIMIT_*` is
    /// the position here plus one), the Lua binding and the CLI take, and SECURITY.md lists.
    pub const NAMES: [&'static str; 8] = [
        "max_expression_len",
        "max_depth",
        "max_predicates",
        "max_regexes",
        "regex_size_limit",
        "regex_total_size_limit",
        "max_values_per_field",
        "max_wildcard_fields",
    ];

    /// The limit named `name` (one of [`Limits::NAMES`]), to read or set.
    pub fn by_name_mut(&mut self, name: &str) -> Option<&mut usize> {
        let at = Self::NAMES.iter().position(|n| *n == name)?;
        // The fields in the order of NAMES: the one place that order is written.
        let [a, b, c, d, e, f, g, h] = [
            &mut self.max_expression_len,
            &mut self.max_depth,
            &mut self.max_predicates,
            &mut self.max_regexes,
            &mut self.regex_size_limit,
            &mut self.regex_total_size_limit,
            &mut self.max_values_per_field,
            &mut self.max_wildcard_fields,
        ];
        [a, b, c, d, e, f, g, h].into_iter().nth(at)
    }

    /// The limit named `name`.
    pub fn by_name(&self, name: &str) -> Option<usize> {
        let mut copy = *self;
        copy.by_name_mut(name).map(|v| *v)
    }

    pub(crate) fn depth(&self) -> usize {
        self.max_depth.min(Self::HARD_MAX_DEPTH)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_expression_len: 1024 * 1024,
            max_depth: Limits::HARD_MAX_DEPTH,
            max_predicates: 16_384,
            max_regexes: 16_384,
            regex_size_limit: 10 * 1024 * 1024,
            regex_total_size_limit: 32 * 1024 * 1024,
            max_values_per_field: 1024,
            max_wildcard_fields: 65_536,
        }
    }
}
