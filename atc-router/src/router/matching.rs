//! Matching a request: index candidates, then their programs in routing order.

use std::sync::Arc;

use super::{broken_router, Router};
use crate::compile::eval as matcher;
use crate::error::Error;
use crate::index::{Entry, LevelBufs};
#[cfg(feature = "diagnostics")]
use crate::reference;
use crate::router::context::Context;
use crate::schema::values::Values;
use crate::schema::FieldMask;

/// At most this many candidates, and as many routes of the fallback list, are prefetched by
/// [`Router::needed_fields`]: an execute stops at the first route that matches, and on a table
/// with long lists, loading programs it never reaches would cost more than it saves.
const PREFETCH_MAX: usize = 16;

/// Buffers of the indexed matcher, reused across requests.
#[derive(Debug, Default)]
struct Scratch {
    candidates: Vec<u32>,
    /// Candidates with their order, while they are sorted into routing order.
    ordered: Vec<Entry>,
    lowered: String,
    /// The index lookup's buffers, one per level of its tree.
    levels: Vec<LevelBufs>,
    /// An image index walk's buffers and candidates (`table_image.rs`).
    image_levels: Vec<crate::index::image::LevelBuf>,
    ranks: Vec<u32>,
}

thread_local! {
    /// The matcher's buffers, one set per thread rather than one per context: with many
    /// contexts in use (a benchmark rotating 256 requests, a server interleaving connections)
    /// a context's own buffers were a cache line per request that was rarely in cache, and
    /// each context carried them; the thread's stay in cache. Borrowed in place (not moved
    /// out and back: a request's fixed cost is a few dozen instructions, and the move was
    /// ten of them).
    static SCRATCH: std::cell::RefCell<Scratch> = const {
        std::cell::RefCell::new(Scratch {
            candidates: Vec::new(),
            ordered: Vec::new(),
            lowered: String::new(),
            levels: Vec::new(),
            image_levels: Vec::new(),
            ranks: Vec::new(),
        })
    };
}

/// Runs `f` with the thread's buffers; with fresh ones when they are in use (an execute nested
/// in another: they then allocate as they grow) or the thread is shutting down.
#[inline]
fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    let mut f = Some(f);
    let borrowed = SCRATCH.try_with(|s| match s.try_borrow_mut() {
        Ok(mut scratch) => Some((f.take().expect("called once"))(&mut scratch)),
        Err(_) => None,
    });
    match (borrowed, f) {
        (Ok(Some(out)), _) => out,
        (_, Some(f)) => f(&mut Scratch::default()),
        (_, None) => unreachable!("the buffers were borrowed and `f` ran"),
    }
}

/// [`with_scratch`] for a walk of an image: the lowering buffer, the walk's level buffers and
/// the candidates' buffer.
#[inline]
pub(super) fn with_scratch_image<T>(
    f: impl FnOnce(&mut String, &mut Vec<crate::index::image::LevelBuf>, &mut Vec<u32>) -> T,
) -> T {
    with_scratch(|s| f(&mut s.lowered, &mut s.image_levels, &mut s.ranks))
}

impl Router {
    /// Finds the first route in routing order whose expression holds, and leaves its result in
    /// the context; returns whether one matched. Only the routes the indexes cannot rule out
    /// are evaluated. A context made from another schema never matches. Counted in
    /// [`Router::stats`] as routed or not found.
    ///
    /// # Panics
    ///
    /// On a [broken](Router::is_broken) router: its structures may not hold every route, so any
    /// answer could be wrong. [`Router::try_execute`] returns an error instead.
    pub fn execute(&self, ctx: &mut Context) -> bool {
        match self.try_execute(ctx) {
            Ok(found) => found,
            Err(Error::Broken) => broken_router(),
            Err(_) => false,
        }
    }

    /// [`Router::execute`], with the cases where it gives no answer as errors:
    /// [`Error::Broken`] for a [broken](Router::is_broken) router, [`Error::SchemaMismatch`]
    /// for a context of another schema. The context's previous result is cleared either way.
    pub fn try_execute(&self, ctx: &mut Context) -> Result<bool, Error> {
        ctx.clear_result();
        if self.broken {
            return Err(Error::Broken);
        }
        if !Arc::ptr_eq(&self.schema, ctx.schema()) {
            return Err(Error::SchemaMismatch);
        }
        // The candidates `needed_fields` found for this request, if no key field has changed.
        let cached = ctx.candidates.by == Some((self.uid, self.version))
            && ctx.values.added() & self.key_fields() == 0;
        let cache = if cached {
            std::mem::take(&mut ctx.candidates.entries)
        } else {
            Vec::new()
        };
        let (values, w) = (&ctx.values, &mut ctx.record);
        let found = with_scratch(|scratch| {
            let Scratch {
                candidates,
                ordered,
                lowered,
                levels,
                image_levels,
                ranks,
            } = scratch;
            let mut holds = |slot: &u32| {
                let found = matcher::eval(self.programs.code(*slot), values, lowered, w);
                if !found {
                    w.clear();
                }
                found
            };
            let slot = if cached {
                cache.iter().find(|s| holds(s))
            } else if let Some(leaf) = self.index.only_leaf() {
                leaf.iter().find(|s| holds(s))
            } else if let Some(flat) = &self.flat {
                candidates.clear();
                let in_order = flat.candidates(values, image_levels, levels, ranks, candidates);
                if in_order || candidates.len() <= 1 {
                    candidates.iter().find(|s| holds(s))
                } else {
                    self.sort_by_order(candidates, ordered);
                    ordered.iter().map(|(_, s)| s).find(|s| holds(s))
                }
            } else {
                candidates.clear();
                self.index.candidates(values, levels, candidates);
                if candidates.len() <= 1 {
                    candidates.iter().find(|s| holds(s))
                } else {
                    // Evaluated from the sorted pairs, not copied back into `candidates`.
                    self.sort_by_order(candidates, ordered);
                    ordered.iter().map(|(_, s)| s).find(|s| holds(s))
                }
            };
            slot.map(|&slot| {
                let order = self.programs.order(slot);
                (order.id(), order.priority())
            })
        });
        if cached {
            ctx.candidates.entries = cache;
        }
        ctx.outcome = found;
        // One relaxed increment in the context's stripe (see `stats.rs`).
        self.stats.executed(ctx.stripe, found.is_some());
        Ok(found.is_some())
    }

    /// The fields the indexes look values up in: phase 1 of a
    /// [two-phase match](crate#two-phase-matching) adds every value of these before asking [`Router::needed_fields`].
    pub fn key_fields(&self) -> FieldMask {
        // The tree's and the flat index's: the first two-phase match after a change may be
        // asked of either.
        self.index.key_fields() | self.flat.as_ref().map_or(0, |f| f.key_fields())
    }

    /// Puts the slot of every route the request may match in `out` (cleared first), distinct
    /// and in routing order: from the flat index when the router has one, else the tree.
    fn candidates_in_order(&self, values: &Values, s: &mut Scratch, out: &mut Vec<u32>) {
        out.clear();
        let in_order = match &self.flat {
            Some(flat) => flat.candidates(
                values,
                &mut s.image_levels,
                &mut s.levels,
                &mut s.ranks,
                out,
            ),
            None => {
                self.index.candidates(values, &mut s.levels, out);
                false
            }
        };
        if !in_order {
            self.put_in_routing_order(out, &mut s.ordered);
        }
    }

    /// Phase 2 of a [two-phase match](crate#two-phase-matching): with every value of the
    /// [key fields](Router::key_fields) in `ctx`, the fields that the routes the request can
    /// still match use. Adding those fields' values and executing gives the result that adding
    /// every field gives. All fields for a context of another schema or a broken router.
    pub fn needed_fields(&self, ctx: &mut Context) -> FieldMask {
        // A broken router's indexes cannot be trusted (and its execute will refuse anyway).
        if self.broken || !Arc::ptr_eq(&self.schema, ctx.schema()) {
            return FieldMask::MAX;
        }
        let mut mask = self.key_fields();
        let mut found = std::mem::take(&mut ctx.candidates.entries);
        with_scratch(|s| self.candidates_in_order(&ctx.values, s, &mut found));
        for (i, slot) in found.iter().enumerate() {
            mask |= self.needs.of(*slot);
            if i < PREFETCH_MAX {
                self.prefetch(*slot);
            }
        }
        // Kept for the execute that follows (see `Context`'s cached candidates).
        ctx.candidates.entries = found;
        ctx.candidates.by = Some((self.uid, self.version));
        ctx.values.take_added();
        mask
    }

    /// Sorts candidate slots into routing order and drops repeats. Their orders are read from
    /// the programs' records, which evaluating them reads anyway; `ordered` is scratch space.
    #[inline]
    pub(crate) fn put_in_routing_order(&self, slots: &mut Vec<u32>, ordered: &mut Vec<Entry>) {
        if slots.len() <= 1 {
            return;
        }
        self.sort_by_order(slots, ordered);
        slots.clear();
        slots.extend(ordered.iter().map(|&(_, s)| s));
    }

    /// Candidate slots with their orders, in routing order and distinct, into `ordered`.
    #[inline]
    fn sort_by_order(&self, slots: &[u32], ordered: &mut Vec<Entry>) {
        ordered.clear();
        ordered.extend(slots.iter().map(|&s| (self.programs.order(s), s)));
        ordered.sort_unstable();
        ordered.dedup();
    }

    /// Loads the lines of a route's program that evaluation reads first, so that the execute
    /// following [`Router::needed_fields`] finds them in cache. Between the two calls the
    /// caller reads request fields (a gateway: hundreds of nanoseconds), and here the loads of
    /// all candidates are independent and overlap, where the execute's evaluation, branching
    /// on what it loaded, would wait for one cache miss after another.
    #[inline]
    fn prefetch(&self, slot: u32) {
        std::hint::black_box(self.programs.code(slot).touch());
    }

    #[doc(hidden)]
    #[cfg(feature = "diagnostics")]
    pub fn index_summary(&self) -> String {
        self.index.summary()
    }

    /// How many routes a request has to consider at most (the index's candidates): the cost
    /// model of [`Router::execute`], for diagnostics and tests.
    #[cfg(feature = "diagnostics")]
    pub fn candidate_count(&self, ctx: &mut Context) -> usize {
        with_scratch(|s| {
            let mut found = std::mem::take(&mut s.candidates);
            self.candidates_in_order(&ctx.values, s, &mut found);
            let n = found.len();
            s.candidates = found;
            n
        })
    }

    /// The reference evaluator: every route in routing order, plain tree walk. The oracle that
    /// [`Router::execute`] is tested against; same results, linear cost.
    #[cfg(feature = "diagnostics")]
    pub fn execute_reference(&self, ctx: &mut Context) -> bool {
        ctx.clear_result();
        if !Arc::ptr_eq(&self.schema, ctx.schema()) {
            return false;
        }
        let mut w = std::mem::take(&mut ctx.record);
        let mut found = None;
        let view = self.reference_view();
        for slot in view.slots() {
            let tree = view.tree(slot, || self.resolve_again(slot));
            if reference::eval(tree, &ctx.values, &mut w) {
                let row = self.row(slot).expect("live slot");
                found = Some((row.id, row.priority));
                break;
            }
            w.clear();
        }
        ctx.record = w;
        ctx.outcome = found;
        found.is_some()
    }
}
