//! The `Router`'s side of the read side (`read_side.rs`): its candidates from its one leaf, flat
//! index or tree, and the public calls that route a request through them.

use std::sync::Arc;

use uuid::Uuid;

use super::read_side::{self, Table, WalkBufs};
use super::{broken_router, Router};
use crate::compile::program::Code;
use crate::error::Error;
use crate::index::Entry;
#[cfg(feature = "diagnostics")]
use crate::reference;
use crate::router::context::Context;
use crate::schema::values::Values;
use crate::schema::{FieldMask, Schema};

impl Table for Router {
    type Code<'t> = Code<'t>;

    #[inline]
    fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    #[inline]
    fn ready(&self) -> Result<(), Error> {
        if self.broken {
            Err(Error::Broken)
        } else {
            Ok(())
        }
    }

    #[inline]
    fn tag(&self) -> (u64, u64) {
        (self.uid, self.version)
    }

    #[inline]
    fn key_fields(&self) -> FieldMask {
        // The tree's and the flat index's: the first two-phase match after a change may be
        // asked of either.
        self.index.key_fields() | self.flat.as_ref().map_or(0, |f| f.key_fields())
    }

    /// From the one leaf of a table whose index has nothing to split, else from the flat index
    /// when the router has one, else from the tree; sorted into routing order only when the
    /// walk did not find them in it.
    #[inline]
    fn visit_candidates(
        &self,
        values: &Values,
        b: &mut WalkBufs,
        mut visit: impl FnMut(u32) -> bool,
    ) -> Option<u32> {
        if let Some(leaf) = self.index.only_leaf() {
            return leaf.iter().copied().find(|&s| visit(s));
        }
        b.candidates.clear();
        let in_order = match &self.flat {
            Some(flat) => flat.candidates(
                values,
                &mut b.image_levels,
                &mut b.levels,
                &mut b.ranks,
                &mut b.candidates,
            ),
            None => {
                self.index
                    .candidates(values, &mut b.levels, &mut b.candidates);
                false
            }
        };
        if in_order || b.candidates.len() <= 1 {
            b.candidates.iter().copied().find(|&s| visit(s))
        } else {
            // Visited from the sorted pairs, not copied back into `candidates`.
            self.sort_by_order(&b.candidates, &mut b.ordered);
            b.ordered.iter().map(|&(_, s)| s).find(|&s| visit(s))
        }
    }

    #[inline]
    fn program(&self, slot: u32) -> Option<Code<'_>> {
        Some(self.programs.code(slot))
    }

    #[inline]
    fn route(&self, slot: u32) -> Option<(Uuid, u64)> {
        let order = self.programs.order(slot);
        Some((order.id(), order.priority()))
    }

    #[inline]
    fn text(&self, slot: u32) -> Option<&str> {
        Some(self.catalog.text(slot as usize))
    }

    #[inline]
    fn needs(&self, slot: u32) -> FieldMask {
        self.needs.of(slot)
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

    /// One relaxed increment in the context's stripe (see `stats.rs`).
    #[inline]
    fn count(&self, ctx: &Context, found: bool) {
        self.stats.executed(ctx.stripe, found);
    }
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
        read_side::execute(self, ctx)
    }

    /// The fields the indexes look values up in: phase 1 of a
    /// [two-phase match](crate#two-phase-matching) adds every value of these before asking [`Router::needed_fields`].
    pub fn key_fields(&self) -> FieldMask {
        Table::key_fields(self)
    }

    /// Phase 2 of a [two-phase match](crate#two-phase-matching): with every value of the
    /// [key fields](Router::key_fields) in `ctx`, the fields that the routes the request can
    /// still match use. Adding those fields' values and executing gives the result that adding
    /// every field gives. All fields for a context of another schema or a broken router.
    pub fn needed_fields(&self, ctx: &mut Context) -> FieldMask {
        read_side::needed_fields(self, ctx)
    }

    /// Sorts candidate slots into routing order and drops repeats. Their orders are read from
    /// the programs' records, which evaluating them reads anyway; `ordered` is scratch space.
    #[cfg(feature = "diagnostics")]
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

    #[doc(hidden)]
    #[cfg(feature = "diagnostics")]
    pub fn index_summary(&self) -> String {
        self.index.summary()
    }

    /// How many routes a request has to consider at most (the index's candidates): the cost
    /// model of [`Router::execute`], for diagnostics and tests.
    #[cfg(feature = "diagnostics")]
    pub fn candidate_count(&self, ctx: &mut Context) -> usize {
        read_side::candidate_count(self, ctx)
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
