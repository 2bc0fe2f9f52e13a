//! Which request fields a request can need, so that a gateway reads only those.
//!
//! Reading a request field costs a gateway more than matching does (an nginx variable or header
//! lookup, a value copied into the context), and a large table uses many fields while one
//! request can only match the few routes its index keys select. So matching can run in two
//! phases:
//!
//! 1. the caller adds the values of the *key fields* ([`Router::key_fields`]: the fields the
//!    indexes look values up in), all of them;
//! 2. [`Router::needed_fields`] answers the fields of every route the request can still match
//!    (its index candidates and the routes no index holds); the caller adds those fields'
//!    values and executes.
//!
//! The result is the one the request gets with every field present: a route that is not a
//! candidate has an index requirement on a key field that no value of that field satisfies (all
//! of them are present in phase 1), so it is false whatever the other fields hold; every other
//! route is evaluated with all its fields.
//!
//! Fields are named by bits of a [`FieldMask`]: a field of index `n` ([`FieldId::index`]) is bit
//! `min(n, 63)`, so fields past the 63rd share the last bit (a caller then reads all of them:
//! more than needed, never less).
//!
//! Updates cost what changed: adding or removing a route adjusts per-bit counts for that route
//! only.
//!
//! [`Router::key_fields`]: crate::Router::key_fields
//! [`Router::needed_fields`]: crate::Router::needed_fields

use crate::schema::FieldId;

/// A set of fields: bit `min(index, 63)` for the field of that index (see [`field_bit`]).
pub type FieldMask = u64;

/// The bit of a field in a [`FieldMask`].
pub fn field_bit(id: FieldId) -> FieldMask {
    1 << id.index().min(63)
}

/// A route's share of the masks.
#[derive(Debug, Clone, Copy, Default)]
struct SlotNeeds {
    /// The fields the route uses.
    fields: FieldMask,
    /// The bit of its index requirement's field, or `None` for a route in the fallback list.
    key: Option<u8>,
}

/// Per-slot field masks and per-bit counts, kept by the router on every insert and removal.
///
/// Invariants: `keys[b]` is the number of indexed routes whose requirement's field has bit `b`;
/// `fallback[b]` the number of fallback routes using a field with bit `b`; the masks have bit
/// `b` set exactly when the count is non-zero.
#[derive(Debug)]
pub(crate) struct Needs {
    slots: Vec<SlotNeeds>,
    keys: [u32; 64],
    fallback: [u32; 64],
    key_mask: FieldMask,
    fallback_mask: FieldMask,
}

impl Default for Needs {
    fn default() -> Needs {
        Needs {
            slots: Vec::new(),
            keys: [0; 64],
            fallback: [0; 64],
            key_mask: 0,
            fallback_mask: 0,
        }
    }
}

impl Needs {
    pub(crate) fn insert(&mut self, slot: u32, fields: &[FieldId], key: Option<FieldId>) {
        let mask = fields.iter().fold(0, |m, f| m | field_bit(*f));
        let key = key.map(|k| field_bit(k).trailing_zeros() as u8);
        match key {
            Some(b) => {
                self.keys[b as usize] += 1;
                self.key_mask |= 1 << b;
            }
            None => {
                for b in Bits(mask) {
                    self.fallback[b] += 1;
                }
                self.fallback_mask |= mask;
            }
        }
        let slot = slot as usize;
        if self.slots.len() <= slot {
            self.slots.resize(slot + 1, SlotNeeds::default());
        }
        self.slots[slot] = SlotNeeds { fields: mask, key };
    }

    pub(crate) fn remove(&mut self, slot: u32) {
        let Some(s) = self.slots.get_mut(slot as usize).map(std::mem::take) else {
            return;
        };
        match s.key {
            Some(b) => {
                self.keys[b as usize] -= 1;
                if self.keys[b as usize] == 0 {
                    self.key_mask &= !(1 << b);
                }
            }
            None => {
                for b in Bits(s.fields) {
                    self.fallback[b] -= 1;
                    if self.fallback[b] == 0 {
                        self.fallback_mask &= !(1 << b);
                    }
                }
            }
        }
    }

    /// The fields the indexes look values up in.
    pub(crate) fn keys(&self) -> FieldMask {
        self.key_mask
    }

    /// What every request needs: the key fields and the fields of the fallback routes.
    pub(crate) fn base(&self) -> FieldMask {
        self.key_mask | self.fallback_mask
    }

    /// The fields of the route in `slot`.
    pub(crate) fn of(&self, slot: u32) -> FieldMask {
        self.slots
            .get(slot as usize)
            .map_or(FieldMask::MAX, |s| s.fields)
    }
}

/// The set bits of a mask, lowest first.
struct Bits(u64);

impl Iterator for Bits {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let b = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(b)
    }
}
