//! Injected failures, for the tests that prove a change interrupted by a panic is never served
//! half-applied. Compiled in only for this crate's own tests and with the `failpoints` feature
//! (which nothing shipped enables); otherwise [`hit`] is an empty inline function.
//!
//! A failpoint sits between two steps of a change of a router's structures (after each route
//! placed or taken out), the places where a panic would leave the most damage.

#[cfg(any(test, feature = "failpoints"))]
mod armed {
    use std::cell::Cell;

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
pub(crate) use armed::hit;
#[cfg(any(test, feature = "failpoints"))]
pub use armed::panic_at;

#[cfg(not(any(test, feature = "failpoints")))]
#[inline(always)]
pub(crate) fn hit() {}
