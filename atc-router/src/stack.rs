//! Room on the stack for the walks whose depth is an expression's nesting.
//!
//! The readers, the checker, the compiler, requirement derivation, traced evaluation and the
//! printer recurse once per nesting level of an expression, and expressions nest up to
//! [`crate::Limits::HARD_MAX_DEPTH`] levels: at the cap that is more stack than a small thread
//! has (a debug build spends kilobytes per level). The index never recurses with the size of a
//! table (its depth is bounded on its own, see `index/tree.rs`), so these walks are the only
//! ones whose depth an input chooses.
//!
//! Invariant: every such walk passes through [`guarded`] once per level (or, for pest's
//! generated parser, which cannot be guarded inside, through [`with_room`] for the whole walk).
//! A level that finds fewer than [`RED_ZONE`] bytes left continues on a fresh segment of
//! [`SEGMENT`] bytes, mapped for the call and unmapped after. So no expression overflows any
//! stack, and while the stack has room (an nginx worker's 8 MiB always has, for any expression
//! within the limits) a guard costs one comparison.

/// Stack a level may need before the next guard: the largest frames of one level of any guarded
/// walk, in a debug build, with a wide margin.
pub(crate) const RED_ZONE: usize = 64 * 1024;

/// Size of a fresh segment: room for many levels, so that a deep walk maps a few at most.
pub(crate) const SEGMENT: usize = 1024 * 1024;

/// Runs `f`, on a fresh segment if fewer than [`RED_ZONE`] bytes of stack are left.
#[inline]
pub(crate) fn guarded<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}

/// Runs `f`, a walk of unknown stack use per level that needs at most `need` bytes in all, on a
/// fresh segment if fewer are left.
#[inline]
pub(crate) fn with_room<R>(need: usize, f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(need, need + SEGMENT, f)
}
