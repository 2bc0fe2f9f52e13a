//! Injected failures, for the tests that prove a change interrupted by a panic is never served
//! half-applied. Compiled in only for this crate's own tests and with the `failpoints` feature
//! (which nothing shipped enables); otherwise [`hit`] is an empty inline function.
//!
//! A failpoint sits between two steps of a change of a router's structures (after each route
//! placed or taken out), the places where a panic would leave the most damage.

#[cfg(any(test, feature = "failpoints"))]
mod armed {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A builder thread's next build of this version panics (process-wide, as the thread is
    /// not the test's; by version, so that tests running side by side do not hit each
    /// other's). 0: none.
    static BUILDER: AtomicU64 = AtomicU64::new(0);

    /// Makes the next build of `version` (not 0) by any builder thread panic.
    pub fn panic_next_build(version: u64) {
        BUILDER.store(version, Ordering::SeqCst);
    }

    pub(crate) fn build_hit(version: u64) {
        if version != 0
            && BUILDER
                .compare_exchange(version, 0, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            panic!("injected failure in a background build (failpoint)");
        }
    }

    thread_local! {
        static COUNTDOWN: Cell<u64> = const { Cell::new(0) };
    }

    /// Makes the `n`-th failpoint this thread reaches from now on panic (`n` ≥ 1); 0 disarms.
    pub fn panic_at(n: u64) {
        COUNTDOWN.with(|c| c.set(n));
    }

    pub(crate) fn hit() {
        COUNTDOWN.with(|c| match c.get() {
            0 => {}
            1 => {
                c.set(0);
                panic!("injected failure (failpoint)");
            }
            n => c.set(n - 1),
        });
    }
}

#[cfg(any(test, feature = "failpoints"))]
pub(crate) use armed::{build_hit, hit};
#[cfg(any(test, feature = "failpoints"))]
pub use armed::{panic_at, panic_next_build};

#[cfg(not(any(test, feature = "failpoints")))]
#[inline(always)]
pub(crate) fn hit() {}

#[cfg(not(any(test, feature = "failpoints")))]
#[inline(always)]
pub(crate) fn build_hit(_version: u64) {}
