//! The threads a fresh build of a table may use besides its own ([`Router::set_build_threads`],
//! [`Builder::build_threads`]): preparing the routes (`router/sync.rs`) and building the index's
//! decision tree (`index/tree.rs`).
//!
//! Invariants (a reader must not break them):
//! - **Same table.** A build on several threads makes exactly the table a build on one makes:
//!   the same routes in the same slots, the same errors in the same order, the same index. Work
//!   goes to another thread only in pieces whose outcome depends on their input alone (parsing,
//!   validating, resolving against declared fields and compiling a route; building one subtree
//!   of the index), and whatever depends on what was done before it (registering wildcard
//!   names, numbering route versions, placing routes in slots, counting errors, the order keys
//!   enter a split) is done by the building thread, in list order.
//! - **Scoped.** Threads start inside a build and are joined before it returns: none exists
//!   before the first build (a process that forks after loading, as nginx's master does, has no
//!   thread to lose) or outlives one. Each runs the builder's helper hook first
//!   ([`Builder::on_helper_start`]), and inherits the scheduling of the thread it helps, which
//!   starts it.
//! - **Optional.** A thread that cannot be started is done without: the building thread takes
//!   every piece no other thread takes, so the build only takes longer.
//!
//! [`Router::set_build_threads`]: crate::Router::set_build_threads
//! [`Builder::build_threads`]: crate::Builder::build_threads
//! [`Builder::on_helper_start`]: crate::Builder::on_helper_start

use std::thread::Scope;

use crate::error::Error;

/// Most threads a build may use.
pub const MAX_BUILD_THREADS: usize = 64;

/// How many threads a fresh build uses, and how it splits its work between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BuildThreads {
    /// Threads in all, the building one included (1: no other).
    pub(crate) count: usize,
    /// Entries prepared as one piece (a piece is what a thread takes at a time); a list of
    /// fewer than two pieces is prepared by the building thread alone.
    pub(crate) piece: usize,
    /// Routes a subtree of the index needs for another thread to build it.
    pub(crate) min_subtree: usize,
}

impl BuildThreads {
    /// One thread: the build as it always was.
    pub(crate) const ONE: BuildThreads = BuildThreads {
        count: 1,
        // A piece is a millisecond or so of work at a few microseconds a route: large enough
        // that handing it over (a lock, a wake-up) is noise, small enough that threads finish
        // together.
        piece: 256,
        // A subtree of a few thousand routes is milliseconds of work; smaller ones are not
        // worth a thread's start.
        min_subtree: 4096,
    };

    /// `count` threads (1 to [`MAX_BUILD_THREADS`]), or why not.
    pub(crate) fn with_count(self, count: usize) -> Result<BuildThreads, Error> {
        if !(1..=MAX_BUILD_THREADS).contains(&count) {
            return Err(Error::Limit(format!(
                "build threads must be from 1 to {MAX_BUILD_THREADS}, got {count}"
            )));
        }
        Ok(BuildThreads { count, ..self })
    }
}

/// What a build's other threads run first.
pub(crate) type StartHook<'a> = &'a (dyn Fn() + Sync);

/// A start hook that does nothing: for builds made by the caller's own thread.
pub(crate) fn no_hook() {}

/// The threads of one build: how many, and what each runs first.
#[derive(Clone, Copy)]
pub(crate) struct Helpers<'a> {
    pub(crate) threads: BuildThreads,
    pub(crate) on_start: StartHook<'a>,
}

impl std::fmt::Debug for Helpers<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Helpers")
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

impl Helpers<'static> {
    /// The building thread alone.
    pub(crate) const NONE: Helpers<'static> = Helpers {
        threads: BuildThreads::ONE,
        on_start: &no_hook,
    };
}

/// Stack of a helper thread: the same as a builder thread's (the guarded walks grow their own
/// segments past it, see `stack.rs`).
const STACK: usize = 4 << 20;

/// Starts up to `n` threads in `scope`, each running `on_start` and then `work`; returns how
/// many started (a thread the system refuses is done without, see the module docs).
pub(crate) fn start<'scope, 'env, W>(
    scope: &'scope Scope<'scope, 'env>,
    n: usize,
    on_start: StartHook<'env>,
    work: &'env W,
) -> usize
where
    W: Fn() + Sync,
{
    (0..n)
        .filter(|_| {
            std::thread::Builder::new()
                .name("atc-router-help".into())
                .stack_size(STACK)
                .spawn_scoped(scope, move || {
                    on_start();
                    work();
                })
                .is_ok()
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_outside_1_to_64_is_refused() {
        assert!(BuildThreads::ONE.with_count(0).is_err());
        assert!(BuildThreads::ONE.with_count(MAX_BUILD_THREADS + 1).is_err());
        assert_eq!(BuildThreads::ONE.with_count(64).unwrap().count, 64);
    }
}
