//! When a router's index gets its flat form (`flat_index.rs`), and who writes it: from
//! [`Router::FLAT_INDEX_MIN_ROUTES`] routes, by [`Router::settle`] (the caller's choice, or the
//! builder's thread once the changes since reach a quarter of the table), never by a change.
//!
//! Invariant: a change costs the same every time. It may drop the flat form (a table that
//! shrank to half the size that calls for one) but writes it only under a test policy.

use super::flat_index::FlatIndex;
use super::Router;

/// When a router matches with a flat index (see [`Router::settle`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct FlatPolicy {
    pub(super) min_routes: usize,
    /// Tests only: changes after which a change writes the flat index again.
    pub(super) rewrite_after: Option<usize>,
}

impl FlatPolicy {
    /// Below 1,024 routes a tree is at most a few hundred kilobytes, read from cache: the flat
    /// form would walk no faster and cost its memory and its writing.
    pub(super) const DEFAULT: FlatPolicy = FlatPolicy {
        min_routes: Router::FLAT_INDEX_MIN_ROUTES,
        rewrite_after: None,
    };
}

/// Changes at least between two writings of [`Router::settle_if_due`]: keeps a table just past
/// 1,024 routes from being written over and over.
const REWRITE_MIN_CHANGES: usize = 256;

impl Router {
    /// After a change: drops the flat index once the table has shrunk to half the size that
    /// calls for one. Writes it again only under a test policy that asks for it
    /// ([`Router::set_flat_policy`]): writing costs the whole table, and a change costs the same
    /// every time (see [`Router::settle`] for who writes it).
    pub(super) fn settle_flat(&mut self) {
        let FlatPolicy {
            min_routes,
            rewrite_after,
        } = self.flat_policy;
        if self.pending_index.is_some() {
            return;
        }
        let due = match (&self.flat, rewrite_after) {
            (Some(_), _) if self.len() < min_routes / 2 => {
                self.flat = None;
                false
            }
            (None, Some(_)) => self.len() >= min_routes,
            (Some(f), Some(n)) => f.changes() >= n,
            (_, None) => false,
        };
        if due {
            self.write_flat();
        }
    }

    /// [`Router::settle`] when it is due: the table is large enough and has no flat index, or
    /// the changes since it was written reach a quarter of the routes it was written with (so
    /// writing costs each change a few route builds' worth, and the overlay stays small). What a
    /// caller that changes tables off the request path calls after each change (the builder's
    /// thread does).
    pub(crate) fn settle_if_due(&mut self) {
        if self.settle_due() {
            self.settle();
        }
    }

    /// Whether the flat index is due: the table has 1,024 routes or more and no flat index, or
    /// the changes since it was written reach a quarter of the routes it was written with (and
    /// at least 256). What the builder's thread settles on; a caller that changes its router
    /// route by route asks it to decide when to have the table built whole elsewhere (Kong's
    /// API in the Lua binding does, on the builder thread).
    pub fn settle_due(&self) -> bool {
        if self.broken || self.pending_index.is_some() {
            return false;
        }
        match &self.flat {
            None => self.len() >= self.flat_policy.min_routes,
            Some(f) => f.changes() >= REWRITE_MIN_CHANGES.max(f.written() / 4),
        }
    }

    pub(super) fn write_flat(&mut self) {
        // The old form goes first: the two are never held at once.
        self.flat = None;
        let in_order: Vec<u32> = self.slots_in_order().map(|(_, slot)| slot).collect();
        self.flat = FlatIndex::write(&self.index, &in_order, self.catalog.len()).map(Box::new);
    }

    /// Writes the router's flat index now, if the table has 1,024 routes or more and changed
    /// since it was last written: requests then walk it alone, without the overlay of the routes
    /// changed since (see `docs/architecture.md`, "The flat index"). It costs about a
    /// microsecond per route (a tenth of adding them).
    ///
    /// A change never writes it: a change costs the same every time. A sync that builds the
    /// table whole writes it (while preparing), and so does the [`Builder`]'s thread, off the
    /// request path, once the changes since reach a quarter of the table. A caller that
    /// changes its router itself calls this where the cost is welcome: after loading a table
    /// route by route with [`Router::add`], or between bursts of changes.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use atc_router::{Router, Schema, Type, Uuid};
    /// let mut s = Schema::new();
    /// s.add_field("http.path", Type::String).unwrap();
    /// let mut r = Router::new(Arc::new(s));
    /// for i in 0..2_000u128 {
    ///     r.add(Uuid::from_u128(i + 1), 1, &format!(r#"http.path == "/p/{i}""#)).unwrap();
    /// }
    /// r.settle();
    /// ```
    pub fn settle(&mut self) {
        let stale = match &self.flat {
            None => self.len() >= self.flat_policy.min_routes,
            Some(f) => f.changes() > 0,
        };
        if stale && !self.broken && self.pending_index.is_none() {
            self.changing(|r| r.write_flat());
        }
    }

    /// Sets when the router matches with a flat index (see `flat_index.rs`): from `min_routes`
    /// routes, written by the change that reaches them and again by every change that brings
    /// the changes since to `rewrite_after`. For tests that need the flat index and its overlay
    /// on small tables; a router otherwise never writes it on a change.
    #[doc(hidden)]
    pub fn set_flat_policy(&mut self, min_routes: usize, rewrite_after: usize) {
        self.flat_policy = FlatPolicy {
            min_routes,
            rewrite_after: Some(rewrite_after),
        };
        self.flat = None;
        self.settle_flat();
    }

    /// Whether requests walk the flat index: how many routes changed since it was written, and
    /// its bytes (nodes, leaf entries, key bytes, maps).
    #[doc(hidden)]
    pub fn flat_state(&self) -> Option<(usize, [usize; 4])> {
        self.flat.as_ref().map(|f| (f.changes(), f.sizes()))
    }
}
