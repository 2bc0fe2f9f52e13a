//! What only the reference evaluator reads: the routes in routing order and their resolved
//! trees. Matching, updates and syncs need neither (the index orders candidates, a program is
//! what runs), so a router makes this view on the first [`Router::execute_reference`] and
//! keeps none until then: at 50,000 routes an order map and a tree slot per route were about
//! 60 bytes a route that every router paid for a test oracle.
//!
//! Invariant: once made, the view holds exactly the router's live slots, sorted by
//! [`Order`]; every route change updates it ([`ReferenceView::insert`],
//! [`ReferenceView::remove`]), so a test that interleaves changes and reference matches
//! resolves each route's text once, not once per change.
//!
//! [`Router::execute_reference`]: super::Router::execute_reference

use std::sync::OnceLock;

use crate::compile::resolve::Node;
use crate::index::Order;

#[derive(Debug, Default)]
pub(super) struct ReferenceView {
    order: Vec<(Order, u32)>,
    /// By slot: the tree resolved from the slot's text, once evaluated.
    trees: Vec<OnceLock<Box<Node>>>,
}

impl ReferenceView {
    /// The view of these live slots (in any order).
    #[cfg(feature = "diagnostics")]
    pub(super) fn new(mut order: Vec<(Order, u32)>) -> ReferenceView {
        order.sort_unstable_by_key(|(o, _)| *o);
        let slots = order
            .iter()
            .map(|(_, s)| *s as usize + 1)
            .max()
            .unwrap_or(0);
        ReferenceView {
            order,
            trees: (0..slots).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Live slots in routing order.
    #[cfg(feature = "diagnostics")]
    pub(super) fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.order.iter().map(|(_, s)| *s)
    }

    /// The tree of `slot`, resolved by `resolve` the first time.
    #[cfg(feature = "diagnostics")]
    pub(super) fn tree(&self, slot: u32, resolve: impl FnOnce() -> Box<Node>) -> &Node {
        self.trees[slot as usize].get_or_init(resolve)
    }

    /// A route placed in `slot`.
    pub(super) fn insert(&mut self, order: Order, slot: u32) {
        let at = self.order.partition_point(|(o, _)| *o < order);
        self.order.insert(at, (order, slot));
        let slot = slot as usize;
        if self.trees.len() <= slot {
            self.trees.resize_with(slot + 1, OnceLock::new);
        }
        // A slot is reused by the next route placed: no tree of the previous one may remain.
        self.trees[slot] = OnceLock::new();
    }

    /// The route in `slot` taken out: its tree, if it was resolved.
    pub(super) fn remove(&mut self, order: Order, slot: u32) -> Option<Box<Node>> {
        if let Ok(at) = self.order.binary_search(&(order, slot)) {
            self.order.remove(at);
        }
        self.trees.get_mut(slot as usize)?.take()
    }
}
