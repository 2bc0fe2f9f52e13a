//! What a router counts for its operators: requests routed, not found and refused as bad
//! input, updates applied and refused, what the last update cost (docs/gateway.md, "Metrics").
//!
//! Invariants:
//! - The match path pays one relaxed atomic increment and allocates nothing. The counts of
//!   [`Router::execute`](super::Router::execute) live in stripes, one cache line pair each; a
//!   context picks its stripe when it is made. Threads matching on one shared router with their
//!   own contexts thus write lines of their own, where one counter for all would be written by
//!   every request of every thread and bounce between their caches.
//! - Counts are kept per router as its owner holds it, not per table: a sync that builds a fresh
//!   table, and a table a [`Builder`](super::Builder) built swapped in with
//!   [`Router::replace_with`](super::Router::replace_with), carry the counts over.
//! - Counters only grow (wrapping at 2^64, which no process reaches).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

/// A router's counts and the cost of its last update, as [`Router::stats`](super::Router::stats)
/// reads them: for graphs and alerts. A plain copy; fields may be added in later versions
/// (hence `#[non_exhaustive]`), never changed in meaning.
///
/// ```
/// use std::sync::Arc;
/// use atc_router::{Context, Router, Schema, Type, Uuid};
///
/// let mut schema = Schema::new();
/// schema.add_field("http.path", Type::String).unwrap();
/// let schema = Arc::new(schema);
/// let mut router = Router::new(schema.clone());
/// router.add(Uuid::from_u128(1), 1, r#"http.path ^= "/api""#).unwrap();
/// assert!(router.add(Uuid::from_u128(2), 1, "http.path ==").is_err());
///
/// let mut ctx = Context::new(schema);
/// ctx.add_value("http.path", "/api/x").unwrap();
/// router.execute(&mut ctx);
/// ctx.reset();
/// ctx.add_value("http.path", "/other").unwrap();
/// router.execute(&mut ctx);
///
/// let stats = router.stats();
/// assert_eq!((stats.routed, stats.not_found), (1, 1));
/// assert_eq!((stats.updates_applied, stats.updates_refused), (1, 1));
/// assert_eq!(stats.routes, 1);
/// assert!(!stats.broken);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RouterStats {
    /// Executes that found a route.
    pub routed: u64,
    /// Executes that found none. Executes that gave no answer (a
    /// [broken](super::Router::is_broken) router, a context of another schema) count in
    /// neither.
    pub not_found: u64,
    /// Requests the caller could not put in a context (invalid UTF-8, too many values) and
    /// counted with [`Router::count_bad_request`](super::Router::count_bad_request): the router
    /// never sees them.
    pub bad_requests: u64,
    /// Updates that changed the router, or could have (one that found nothing to change
    /// counts): [`Router::add`](super::Router::add), [`Router::remove`](super::Router::remove)
    /// of a route that was there, [`Router::sync`](super::Router::sync) and
    /// [`Router::apply`](super::Router::apply) that did not refuse, and tables built elsewhere
    /// recorded with [`Router::record_update`](super::Router::record_update).
    pub updates_applied: u64,
    /// Updates that changed nothing because they were refused: an invalid route added, a
    /// route removed that was not there, an all-or-nothing sync with an invalid route, a stale
    /// plan, a background build refused or panicked (recorded by the caller). An update
    /// interrupted by a panic is in neither count: [`broken`](Self::broken) says it.
    pub updates_refused: u64,
    /// How long the last update, applied or refused, kept the router from answering: the whole
    /// call for a change made in place (add, remove, sync, apply: the calling thread is the
    /// one that would route); the apply under the write lock for
    /// [`SharedRouter::sync`](crate::SharedRouter::sync) (its readers wait for nothing else);
    /// the swap for a table built by a [`Builder`](super::Builder) (as recorded).
    pub last_update_hold: Duration,
    /// What the last update's table took to prepare and build: the same as
    /// [`last_update_hold`](Self::last_update_hold) for add, remove and sync; the preparation
    /// and the apply for [`Router::apply`](super::Router::apply) of a plan and for
    /// `SharedRouter::sync`; the builder thread's time for a background build
    /// ([`Outcome::build_time`](super::Outcome::build_time)).
    pub last_build: Duration,
    /// Routes the router holds now ([`Router::len`](super::Router::len)).
    pub routes: usize,
    /// Whether a panic interrupted a change part-way ([`Router::is_broken`](super::Router::is_broken)).
    pub broken: bool,
}

/// Stripes of the execute counts: enough that a few threads rarely share one.
pub(crate) const STRIPES: usize = 8;

/// The stripe the next context takes (round-robin).
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

/// A stripe for a new context (see the module invariants).
pub(crate) fn next_stripe() -> u8 {
    (NEXT_STRIPE.fetch_add(1, Relaxed) % STRIPES) as u8
}

/// The execute counts of the contexts of one stripe: `[not found, routed]`. Aligned to two
/// cache lines, as the adjacent-line prefetcher moves lines in pairs.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe {
    executes: [AtomicU64; 2],
}

/// A router's counters (boxed in the router: moving them from a replaced table is a pointer
/// swap).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    stripes: [Stripe; STRIPES],
    bad_requests: AtomicU64,
    applied: AtomicU64,
    refused: AtomicU64,
    /// In nanoseconds.
    last_hold: AtomicU64,
    /// In nanoseconds.
    last_build: AtomicU64,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Counters {
    /// Counts an execute that gave an answer.
    #[inline]
    pub(crate) fn executed(&self, stripe: u8, found: bool) {
        // The mask keeps the index in bounds without a check.
        self.stripes[usize::from(stripe) & (STRIPES - 1)].executes[usize::from(found)]
            .fetch_add(1, Relaxed);
    }

    pub(crate) fn bad_request(&self) {
        self.bad_requests.fetch_add(1, Relaxed);
    }

    pub(crate) fn update(&self, applied: bool, hold: Duration, build: Duration) {
        let count = if applied {
            &self.applied
        } else {
            &self.refused
        };
        count.fetch_add(1, Relaxed);
        self.last_hold.store(nanos(hold), Relaxed);
        self.last_build.store(nanos(build), Relaxed);
    }

    /// The counts, with `routes` and `broken` left to the router.
    pub(crate) fn read(&self) -> RouterStats {
        let (mut routed, mut not_found) = (0u64, 0u64);
        for s in &self.stripes {
            not_found = not_found.wrapping_add(s.executes[0].load(Relaxed));
            routed = routed.wrapping_add(s.executes[1].load(Relaxed));
        }
        RouterStats {
            routed,
            not_found,
            bad_requests: self.bad_requests.load(Relaxed),
            updates_applied: self.applied.load(Relaxed),
            updates_refused: self.refused.load(Relaxed),
            last_update_hold: Duration::from_nanos(self.last_hold.load(Relaxed)),
            last_build: Duration::from_nanos(self.last_build.load(Relaxed)),
            routes: 0,
            broken: false,
        }
    }
}
