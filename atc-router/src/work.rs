//! A count of the work lint and explain do, so that tests can fail when one of their costs
//! turns quadratic again: they compare the count with the size of what went in and came out,
//! never a time (`tests/lint.rs`, `tests/explain.rs`).
//!
//! One step is a bounded amount of work: a byte of an expression scanned (to parse it or to
//! place a predicate in it), an instruction evaluated or traced, a candidate visited, a pair of
//! predicates compared. Counted per thread, and only with the `diagnostics` feature: without
//! it [`add`] is empty and nothing is kept.

#[cfg(feature = "diagnostics")]
thread_local! {
    static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts `n` steps.
#[inline(always)]
pub(crate) fn add(n: usize) {
    #[cfg(feature = "diagnostics")]
    STEPS.with(|s| s.set(s.get().saturating_add(n as u64)));
    #[cfg(not(feature = "diagnostics"))]
    let _ = n;
}

/// The steps of work lint and explain did on this thread so far (see the module docs of
/// `work.rs`): for tests, which compare its growth with the size of the input.
#[cfg(feature = "diagnostics")]
pub fn diagnostic_steps() -> u64 {
    STEPS.with(|s| s.get())
}
