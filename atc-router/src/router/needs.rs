//! Which request fields a request can need, so that a gateway reads only those.
//!
//! Reading a request field costs a gateway more than matching does (an nginx variable or header
//! lookup, a value copied into the context), and a large table uses many fields while one
//! request can only match the few routes its index keys select. So matching can run in two
//! phases:
//!
//! 1. the caller adds the values of the *key fields* ([`Router::key_fields`]: the fields some
//!    split of the index looks values up in), all of them;
//! 2. [`Router::needed_fields`] answers the fields of every route the request can still match
//!    (its index candidates); the caller adds those fields' values and executes.
//!
//! The result is the one the request gets with every field present: a route that is not a
//! candidate sits, at some split on its way down the index, under keys of that split's field
//! that no value of the field satisfies (all of them are present in phase 1), so it is false
//! whatever the other fields hold; every other route is evaluated with all its fields.
//!
//! Fields are named by bits of a [`FieldMask`]: a field of index `n` ([`FieldId::index`]) is bit
//! `min(n, 63)`, so fields past the 63rd share the last bit (a caller then reads all of them:
//! more than needed, never less).
//!
//! Updates cost what changed: adding or removing a route sets or clears its own mask; the index
//! counts the splits per field.
//!
//! [`Router::key_fields`]: crate::Router::key_fields
//! [`Router::needed_fields`]: crate::Router::needed_fields

use super::slot_vec::SlotVec;
use crate::schema::{FieldId, FieldMask};

/// The field mask of each route, by slot, kept by the router on every insert and removal.
#[derive(Debug, Default)]
pub(crate) struct Needs {
    slots: SlotVec<FieldMask, 10>,
}

impl Needs {
    pub(crate) fn insert(&mut self, slot: u32, fields: &[FieldId]) {
        let mask = fields.iter().fold(0, |m, f| m | f.bit());
        let slot = slot as usize;
        if self.slots.len() <= slot {
            self.slots.grow_to(slot + 1, 0);
        }
        self.slots[slot] = mask;
    }

    pub(crate) fn remove(&mut self, slot: u32) {
        if let Some(s) = self.slots.get_mut(slot as usize) {
            *s = 0;
        }
    }

    /// The fields of the route in `slot`.
    pub(crate) fn of(&self, slot: u32) -> FieldMask {
        self.slots
            .get(slot as usize)
            .copied()
            .unwrap_or(FieldMask::MAX)
    }
}
