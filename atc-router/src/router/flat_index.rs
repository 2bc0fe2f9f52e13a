//! The index a large router matches with: its decision tree written flat (the index section of
//! a table image, `index/image.rs`) and walked in place, plus a small tree of the routes
//! changed since it was written.
//!
//! Why: the tree (`crate::index::Index`) is what changes route by route, but it is a heap of
//! nodes, and on a table of tens of thousands of routes a request's walk through it reads lines
//! scattered over megabytes. The flat form holds the same decisions in a few contiguous arrays
//! of 32-bit words, so the same walk reads a fraction of the lines (docs/architecture.md,
//! "The flat index"). Writing it costs about what building the tree did, so it is not written
//! again on every change: a change goes to the *overlay* (a tree of the routes inserted since)
//! and a removal clears the route's *live* bit, and the router writes the flat form again only
//! once the changes since amount to a share of the table (`Router::settle_flat`).
//!
//! Invariants (a reader must not break them):
//! - **The candidates are a superset of the matching routes.** Every route of the router is
//!   either *in the base* (it was in the tree when the flat form was written, and its slot
//!   still maps to its rank, with its live bit set) or *in the overlay*, never both, and never
//!   neither. A base route that is removed leaves the base for good (its bit is cleared and
//!   its slot unmapped), so a slot reused by a new route is only ever found through the overlay.
//! - The flat form is only read, never patched: a rank found there whose bit is clear is a
//!   route since removed or changed, and is skipped.
//! - [`FlatIndex::key_fields`] names every field either part looks values up in, so a
//!   two-phase match that adds those fields first gives both parts what they read.

use std::cell::RefCell;

use rustc_hash::FxHashMap;

use crate::image::Words;
use crate::index::image::{FieldNumbers, ImageIndex, LevelBuf};
use crate::index::image_write::Numbering;
use crate::index::{Entry, Index, LevelBufs, Requirement, Requirements};
use crate::schema::values::Values;
use crate::schema::{FieldId, FieldMask};

/// A slot that has no rank in the flat form (added since, or never there).
const NO_RANK: u32 = u32::MAX;

/// The flat form of a router's index, and the routes changed since it was written.
#[derive(Debug)]
pub(super) struct FlatIndex {
    /// The root node's number in `nodes`.
    root: u32,
    /// The written index's sections (`index/image.rs`), as little-endian words.
    nodes: Box<[u8]>,
    entries: Box<[u8]>,
    bytes: Box<[u8]>,
    /// The fields the flat form numbers `0..`, by their ids.
    fields: FieldNumbers,
    /// The slot of each rank (routing order when written).
    slot_of_rank: Box<[u32]>,
    /// The rank of each slot still in the base, [`NO_RANK`] for any other.
    rank_of_slot: Vec<u32>,
    /// One bit per rank: set while its route is in the base.
    live: Box<[u64]>,
    /// Base routes removed since the flat form was written.
    dead: usize,
    /// The routes inserted since, in a tree of their own; the first of them alone in `single`.
    overlay: Index,
    /// The one route inserted since, while it is the only one. The tree splits its root for
    /// even one route, and choosing that split costs several microseconds, which a table whose
    /// one route keeps changing (the common push) would pay on every change: one candidate more
    /// per request costs less.
    single: Option<u32>,
    /// Routes inserted since: in `single` or in `overlay`.
    overlay_routes: usize,
    /// The fields the flat form looks values up in.
    written_key_fields: FieldMask,
}

impl FlatIndex {
    /// Writes `index`, whose routes are the slots `in_order` (routing order); `slots` is one past
    /// the highest slot the router has. `None` when a number outgrows 32 bits.
    pub(super) fn write(index: &Index, in_order: &[u32], slots: usize) -> Option<FlatIndex> {
        let mut rank_of_slot = vec![NO_RANK; slots];
        for (rank, &slot) in in_order.iter().enumerate() {
            *rank_of_slot.get_mut(slot as usize)? = u32::try_from(rank).ok()?;
        }
        let rank = |slot: u32| rank_of_slot.get(slot as usize).copied().unwrap_or(NO_RANK);
        // Fields numbered as the walk first meets them (raw ids carry a generation, so they
        // are no dense numbering).
        let fields: RefCell<(Vec<FieldId>, FxHashMap<FieldId, u32>)> = RefCell::default();
        let field = |f: FieldId| {
            let (list, numbers) = &mut *fields.borrow_mut();
            *numbers.entry(f).or_insert_with(|| {
                list.push(f);
                list.len() as u32 - 1
            })
        };
        let written = index.write_image(&Numbering {
            rank: &rank,
            field: &field,
        })?;
        let fields = FieldNumbers::new(fields.into_inner().0.into());
        let written_key_fields = written
            .key_fields
            .iter()
            .filter_map(|&n| fields.get(n as usize))
            .fold(0, |mask, f| mask | f.bit());
        let mut live = vec![0u64; in_order.len().div_ceil(64)];
        for rank in 0..in_order.len() {
            live[rank / 64] |= 1 << (rank % 64);
        }
        Some(FlatIndex {
            root: written.root,
            nodes: le_bytes(&written.nodes),
            entries: le_bytes(&written.entries),
            bytes: written.bytes.into_boxed_slice(),
            fields,
            slot_of_rank: in_order.into(),
            rank_of_slot,
            live: live.into_boxed_slice(),
            dead: 0,
            overlay: Index::default(),
            single: None,
            overlay_routes: 0,
            written_key_fields,
        })
    }

    /// Routes the flat form was written with.
    pub(super) fn written(&self) -> usize {
        self.slot_of_rank.len()
    }

    /// Bytes of the flat form and its maps (the overlay left out), per part: nodes, leaf
    /// entries, key bytes, the rank and slot maps with the live bits.
    pub(super) fn sizes(&self) -> [usize; 4] {
        [
            self.nodes.len(),
            self.entries.len(),
            self.bytes.len(),
            4 * (self.slot_of_rank.len() + self.rank_of_slot.capacity()) + 8 * self.live.len(),
        ]
    }

    /// Changes since the flat form was written: routes inserted and base routes removed.
    pub(super) fn changes(&self) -> usize {
        self.overlay_routes + self.dead
    }

    /// The fields the flat form or the overlay looks values up in.
    #[inline]
    pub(super) fn key_fields(&self) -> FieldMask {
        self.written_key_fields | self.overlay.key_fields()
    }

    /// A route put in `e`'s slot since the flat form was written.
    pub(super) fn inserted(&mut self, e: Entry, reqs: &[Requirement], all: &dyn Requirements) {
        if self.overlay_routes == 0 {
            self.single = Some(e.1);
        } else {
            if let Some(first) = self.single.take() {
                let first_reqs = all.of(first);
                self.overlay
                    .insert((all.order(first), first), &first_reqs, all);
            }
            self.overlay.insert(e, reqs, all);
        }
        self.overlay_routes += 1;
    }

    /// The route in `slot` (inserted with `reqs`) taken out.
    pub(super) fn removed(&mut self, slot: u32, reqs: &[Requirement], all: &dyn Requirements) {
        match self.rank_of_slot.get_mut(slot as usize) {
            Some(rank) if *rank != NO_RANK => {
                let r = *rank as usize;
                *rank = NO_RANK;
                self.live[r / 64] &= !(1 << (r % 64));
                self.dead += 1;
            }
            _ if self.single == Some(slot) => {
                self.single = None;
                self.overlay_routes -= 1;
            }
            _ => {
                self.overlay.remove(slot, reqs, all);
                self.overlay_routes -= 1;
            }
        }
    }

    /// Appends to `out` the slot of every route the request may match, distinct; returns whether
    /// they are in routing order (they are unless the overlay added some). `ranks` and `image`
    /// are scratch for the flat walk, `tree` for the overlay's.
    #[inline]
    pub(super) fn candidates(
        &self,
        ctx: &Values,
        image: &mut Vec<LevelBuf>,
        tree: &mut Vec<LevelBufs>,
        ranks: &mut Vec<u32>,
        out: &mut Vec<u32>,
    ) -> bool {
        ranks.clear();
        ImageIndex::new(
            words(&self.nodes),
            words(&self.entries),
            &self.bytes,
            &self.fields,
        )
        .candidates(self.root, ctx, image, ranks);
        if ranks.len() > 1 {
            ranks.sort_unstable();
            ranks.dedup();
        }
        for &rank in ranks.iter() {
            let r = rank as usize;
            let live = self.dead == 0
                || self
                    .live
                    .get(r / 64)
                    .is_some_and(|w| w >> (r % 64) & 1 != 0);
            if let (true, Some(&slot)) = (live, self.slot_of_rank.get(r)) {
                out.push(slot);
            }
        }
        if self.overlay_routes == 0 {
            return true;
        }
        if let Some(slot) = self.single {
            out.push(slot);
            return out.len() == 1;
        }
        let before = out.len();
        self.overlay.candidates(ctx, tree, out);
        out.len() == before
    }
}

/// Bytes written from whole words: always words.
fn words(b: &[u8]) -> Words<'_> {
    Words::new(b).unwrap_or(Words::EMPTY)
}

fn le_bytes(words: &[u32]) -> Box<[u8]> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use uuid::Uuid;

    use crate::router::{Context, Router};
    use crate::schema::Schema;
    use crate::value::Type;

    fn router() -> Router {
        let mut schema = Schema::new();
        schema.add_field("http.path", Type::String).unwrap();
        let mut router = Router::new(Arc::new(schema));
        // Written at two routes, and not again for the rest of a test.
        router.set_flat_policy(2, 100);
        router
    }

    fn add(router: &mut Router, id: u128, path: &str) {
        let expression = format!(r#"http.path == "{path}""#);
        router.add(Uuid::from_u128(id), 1, &expression).unwrap();
    }

    /// The candidates the flat index gives a request for `path`, and whether they came in
    /// routing order.
    fn candidates(router: &Router, path: &str) -> (Vec<u32>, bool) {
        let mut ctx = Context::new(router.schema().clone());
        ctx.add_value("http.path", path).unwrap();
        let flat = router.flat.as_ref().expect("a flat index");
        let mut out = Vec::new();
        let (mut image, mut tree, mut ranks) = (Vec::new(), Vec::new(), Vec::new());
        let ordered = flat.candidates(&ctx.values, &mut image, &mut tree, &mut ranks, &mut out);
        (out, ordered)
    }

    fn slot(router: &Router, id: u128) -> u32 {
        router.slot_of(Uuid::from_u128(id)).unwrap()
    }

    #[test]
    fn the_one_route_added_since_the_writing_is_a_candidate_of_every_request() {
        let mut r = router();
        add(&mut r, 1, "/a");
        add(&mut r, 2, "/b");
        add(&mut r, 3, "/c");
        assert_eq!(r.flat_state().map(|(changes, _)| changes), Some(1));
        assert_eq!(candidates(&r, "/c"), (vec![slot(&r, 3)], true));
        // After the written form's own: not known to be in routing order.
        assert_eq!(
            candidates(&r, "/a"),
            (vec![slot(&r, 1), slot(&r, 3)], false)
        );
    }

    #[test]
    fn routes_added_since_the_writing_are_found_in_the_overlay() {
        let mut r = router();
        add(&mut r, 1, "/a");
        add(&mut r, 2, "/b");
        add(&mut r, 3, "/c");
        add(&mut r, 4, "/d");
        assert_eq!(r.flat_state().map(|(changes, _)| changes), Some(2));
        assert_eq!(candidates(&r, "/a"), (vec![slot(&r, 1)], true));
        assert_eq!(candidates(&r, "/c"), (vec![slot(&r, 3)], false));
        assert_eq!(candidates(&r, "/d"), (vec![slot(&r, 4)], false));
        assert_eq!(candidates(&r, "/e"), (vec![], true));
        // Down to one again: still in the tree, found by its key.
        assert!(r.remove(Uuid::from_u128(3)));
        assert_eq!(candidates(&r, "/a"), (vec![slot(&r, 1)], true));
        assert_eq!(candidates(&r, "/d"), (vec![slot(&r, 4)], false));
    }

    #[test]
    fn a_written_route_removed_is_no_candidate_and_its_reused_slot_is_the_new_routes() {
        let mut r = router();
        add(&mut r, 1, "/a");
        add(&mut r, 2, "/b");
        let old = slot(&r, 1);
        assert!(r.remove(Uuid::from_u128(1)));
        assert_eq!(candidates(&r, "/a"), (vec![], true));
        // The freed slot goes to the next route, which only the overlay knows.
        add(&mut r, 3, "/c");
        add(&mut r, 4, "/d");
        assert!([slot(&r, 3), slot(&r, 4)].contains(&old));
        assert_eq!(candidates(&r, "/a"), (vec![], true));
        assert_eq!(candidates(&r, "/c"), (vec![slot(&r, 3)], false));
        // Taken out of the overlay; the written form still skips the old rank.
        assert!(r.remove(Uuid::from_u128(3)));
        assert!(r.remove(Uuid::from_u128(4)));
        assert_eq!(candidates(&r, "/c"), (vec![], true));
        assert_eq!(candidates(&r, "/a"), (vec![], true));
        assert_eq!(candidates(&r, "/b"), (vec![slot(&r, 2)], true));
    }

    #[test]
    fn settling_writes_the_changes_into_the_flat_form() {
        let mut r = router();
        add(&mut r, 1, "/a");
        add(&mut r, 2, "/b");
        add(&mut r, 3, "/c");
        assert!(r.remove(Uuid::from_u128(1)));
        assert_eq!(r.flat_state().map(|(changes, _)| changes), Some(2));
        r.settle();
        assert_eq!(r.flat_state().map(|(changes, _)| changes), Some(0));
        assert_eq!(candidates(&r, "/c"), (vec![slot(&r, 3)], true));
        assert_eq!(candidates(&r, "/a"), (vec![], true));
    }
}
