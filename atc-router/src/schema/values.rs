//! One request's values, by field: what the index looks keys up in and programs read.
//!
//! Invariants: a field's values keep their insertion order (a header may repeat); `reset`
//! leaves no value of an earlier request behind. Storage is reused across [`Values::reset`], so
//! values that serve request after request stop allocating once their buffers have grown to the
//! largest request (strings added with [`Values::add_str`] reuse their buffers too). The router
//! wraps them, with its match state, in the public [`crate::Context`].

use std::sync::Arc;

use crate::error::{excerpt, Error};
use crate::schema::names::{FieldId, FieldMask, IdState, Schema};
use crate::value::{Type, Value};

/// The values of one request, by field (see the module doc).
#[derive(Debug)]
pub(crate) struct Values {
    schema: Arc<Schema>,
    slots: Vec<Slot>,
    /// The type of the field each bound slot holds, remembered when it was bound: a wildcard
    /// name (`http.headers.*`) keeps its type behind the schema's lock, too slow to ask for
    /// every value of every request. (Apart from the slots, which hold a cache line each.)
    types: Vec<Type>,
    touched: Vec<FieldId>,
    /// The bit of every field given a value since [`Values::take_added`] (a router's cached
    /// candidates stay right while none of these is a key field's).
    added: FieldMask,
    /// Whether the schema's limits let a field hold a value at all (`max_values_per_field`
    /// above 0; a shared schema's limits never change): [`Values::add_str`]'s inline case.
    first_allowed: bool,
}

/// A field's values. The first one lives in the slot itself: a matcher reading a single-valued
/// field (most are) touches the slot's line and the string's bytes, not also a vector's
/// buffer. At 100k routes a request's context is often out of cache, and this was one miss
/// per field read.
///
/// Invariant: with `len <= 1` the value, if any, is `one`; with `len >= 2` the values are
/// `many[..len]` (a slice must be contiguous, so the first value moves there). Both places
/// keep their buffers across resets, so a context in steady state allocates nothing.
#[derive(Debug)]
#[repr(align(64))]
struct Slot {
    len: u32,
    /// The raw [`FieldId`] whose values the slot holds ([`UNBOUND`] before its first value):
    /// an index is reused for another wildcard name once no route uses the first, and a
    /// reader asking with another id must not see these values.
    id: u32,
    one: Value,
    many: Vec<Value>,
}

/// The `id` of a slot that holds no field's values (no schema hands out this id).
const UNBOUND: u32 = u32::MAX;

/// What an unused place holds (no allocation).
const VACANT: Value = Value::Int(0);

impl Default for Slot {
    fn default() -> Slot {
        Slot {
            len: 0,
            id: UNBOUND,
            one: VACANT,
            many: Vec::new(),
        }
    }
}

impl Slot {
    fn values(&self) -> &[Value] {
        match self.len {
            0 => &[],
            1 => std::slice::from_ref(&self.one),
            n => &self.many[..n as usize],
        }
    }

    /// The place of the next value (its previous content is a buffer to reuse); the caller
    /// writes it and increments `len`.
    fn next_place(&mut self) -> &mut Value {
        let i = self.len as usize;
        if i == 0 {
            return &mut self.one;
        }
        if i == 1 {
            // The first value is copied to `many[0]`, into that place's own buffer: swapping
            // buffers instead would shuffle capacities between places, and a place given a
            // smaller buffer than it needs would allocate again.
            if self.many.is_empty() {
                self.many.push(VACANT);
            }
            match (&self.one, &mut self.many[0]) {
                (Value::String(src), Value::String(dst)) => {
                    dst.clear();
                    dst.push_str(src);
                }
                (v, dst) => *dst = v.clone(),
            }
        }
        if self.many.len() <= i {
            self.many.push(VACANT);
        }
        &mut self.many[i]
    }
}

impl Values {
    /// No values yet, for requests to routers of `schema`.
    pub(crate) fn new(schema: Arc<Schema>) -> Values {
        Values {
            first_allowed: schema.limits().max_values_per_field > 0,
            schema,
            slots: Vec::new(),
            types: Vec::new(),
            touched: Vec::new(),
            added: 0,
        }
    }

    /// The schema the values are checked against.
    pub(crate) fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// Appends a value to a field (by name; wildcard names resolve through the schema).
    ///
    /// A wildcard name that no route uses (a header no route reads) is accepted and its value
    /// ignored: no route could read it, and registering it would let requests grow the schema
    /// (see [`Schema::resolve`]).
    pub(crate) fn add_value(&mut self, field: &str, value: impl Into<Value>) -> Result<(), Error> {
        let (id, _) = self.schema.resolve(field)?;
        self.add_value_by_id(id, value.into())
    }

    /// Appends a value to a field resolved with [`Schema::resolve`].
    pub(crate) fn add_value_by_id(&mut self, id: FieldId, value: Value) -> Result<(), Error> {
        if let Some(slot) = self.slot_for(id, value.ty())? {
            *slot.next_place() = value;
            slot.len += 1;
        }
        Ok(())
    }

    /// Appends a String value, reusing the buffer a previous request left in that place.
    ///
    /// The common case, a field's first value into a slot bound to it, is checked inline: it
    /// needs none of [`Values::slot_for`]'s binding, type or limit work (a field's first value is
    /// within the limit whenever the limit allows any), and a request adds a few of these before every execute.
    #[inline]
    pub(crate) fn add_str(&mut self, id: FieldId, value: &str) -> Result<(), Error> {
        let i = id.index();
        if let (Some(slot), Some(Type::String)) = (self.slots.get_mut(i), self.types.get(i)) {
            let first = slot.len == 0 && slot.id == id.to_raw() && self.first_allowed;
            if let (true, Value::String(buf)) = (first, &mut slot.one) {
                buf.clear();
                buf.push_str(value);
                slot.len = 1;
                self.added |= id.bit();
                self.touched.push(id);
                return Ok(());
            }
        }
        self.add_str_slow(id, value)
    }

    /// [`Values::add_str`] for every other case: an unbound slot, a field's second value, a
    /// type mismatch, the limit.
    #[inline(never)]
    fn add_str_slow(&mut self, id: FieldId, value: &str) -> Result<(), Error> {
        let Some(slot) = self.slot_for(id, Type::String)? else {
            return Ok(());
        };
        match slot.next_place() {
            Value::String(buf) => {
                buf.clear();
                buf.push_str(value);
            }
            other => *other = Value::String(value.to_owned()),
        }
        slot.len += 1;
        Ok(())
    }

    /// What `id` stands for in these values' schema (see [`Schema::id_state`]), answered
    /// from their own slots for the ids it holds values under. (So an id released
    /// after this context took a value under it still reads as live here: values under it are
    /// kept, where no route reads them.)
    pub(crate) fn id_state(&self, id: FieldId) -> IdState {
        match self.slots.get(id.index()) {
            Some(s) if s.id == id.to_raw() => IdState::Live(self.types[id.index()]),
            _ => self.schema.id_state(id),
        }
    }

    /// The slot that takes a value of type `ty` for `id`, bound to `id` if it was not;
    /// `Ok(None)` when values under `id` are ignored (see [`Values::add_value`]).
    fn slot_for(&mut self, id: FieldId, ty: Type) -> Result<Option<&mut Slot>, Error> {
        let i = id.index();
        let bound = matches!(self.slots.get(i), Some(s) if s.id == id.to_raw());
        if !bound {
            let field_ty = match self.schema.id_state(id) {
                IdState::Live(t) => t,
                IdState::Unused(t) if t == ty => return Ok(None),
                IdState::Unused(t) => {
                    return Err(Error::TypeMismatch {
                        field: "(a field no route uses)".to_owned(),
                        expected: t,
                        found: ty,
                    })
                }
                IdState::Released => return Ok(None),
                IdState::Unknown => {
                    return Err(Error::UnknownField(format!("#{}", id.to_raw())));
                }
            };
            if self.slots.len() <= i {
                self.slots.resize_with(i + 1, Slot::default);
                self.types.resize(i + 1, Type::String);
            }
            let slot = &mut self.slots[i];
            // Values of the field that held this index before belong to no field now; the
            // slot is in `touched` already if it holds any.
            slot.len = 0;
            slot.id = id.to_raw();
            self.types[i] = field_ty;
        }
        let slot = &self.slots[i];
        let field_ty = self.types[i];
        if field_ty != ty {
            let name = self.schema.field(id).map(|f| f.0).unwrap_or_default();
            return Err(Error::TypeMismatch {
                field: excerpt(&name),
                expected: field_ty,
                found: ty,
            });
        }
        let max = self.schema.limits().max_values_per_field;
        if slot.len as usize >= max {
            let name = self.schema.field(id).map(|f| f.0).unwrap_or_default();
            return Err(Error::Limit(format!(
                "field `{}` already holds {max} values, the most one field may hold",
                excerpt(&name)
            )));
        }
        self.added |= id.bit();
        if slot.len == 0 {
            self.touched.push(id);
        }
        Ok(Some(&mut self.slots[i]))
    }

    /// The values of a field, in insertion order (empty when absent or unknown).
    pub(crate) fn values(&self, field: &str) -> &[Value] {
        self.schema
            .lookup(field)
            .map_or(&[], |id| self.values_by_id(id))
    }

    /// The values of a field, in the order they were added (empty when it has none).
    pub(crate) fn values_by_id(&self, id: FieldId) -> &[Value] {
        match self.slots.get(id.index()) {
            Some(s) if s.id == id.to_raw() => s.values(),
            _ => &[],
        }
    }

    /// The fields given values since the last reset, in the order of their first value. An id
    /// may be listed whose slot another field has taken since (it then has no values): a reader
    /// checks [`Values::values_by_id`].
    #[inline]
    pub(crate) fn present_fields(&self) -> &[FieldId] {
        &self.touched
    }

    /// Forgets all values; keeps the buffers for the next request.
    pub(crate) fn reset(&mut self) {
        for id in self.touched.drain(..) {
            self.slots[id.index()].len = 0;
        }
    }

    /// The fields given a value since the last call.
    pub(crate) fn take_added(&mut self) -> FieldMask {
        std::mem::take(&mut self.added)
    }

    /// The fields given a value since [`Values::take_added`] was last called.
    pub(crate) fn added(&self) -> FieldMask {
        self.added
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Slot>(), 64);
    }

    #[test]
    fn the_limit_holds_for_a_fields_first_value_too() {
        for (max, first, second) in [(0, false, false), (1, true, false), (2, true, true)] {
            let mut s = Schema::with_limits(crate::limits::Limits {
                max_values_per_field: max,
                ..crate::limits::Limits::default()
            });
            s.add_field("h", Type::String).unwrap();
            let mut ctx = Values::new(Arc::new(s));
            let id = ctx.schema().lookup("h").unwrap();
            // Twice: the second request's first value takes the inline path of a bound slot.
            for _ in 0..2 {
                ctx.reset();
                assert_eq!(ctx.add_str(id, "a").is_ok(), first, "limit {max}");
                assert_eq!(ctx.add_str(id, "b").is_ok(), second, "limit {max}");
                let n = usize::from(first) + usize::from(second);
                assert_eq!(ctx.values_by_id(id).len(), n, "limit {max}");
            }
        }
    }

    #[test]
    fn values_keep_their_order_through_spills_and_resets() {
        let mut s = Schema::new();
        s.add_field("h", Type::String).unwrap();
        let mut ctx = Values::new(Arc::new(s));
        let id = ctx.schema().lookup("h").unwrap();
        for round in [
            vec!["a"],
            vec!["b", "c", "d"],
            vec![],
            vec!["e"],
            vec!["f", "g"],
        ] {
            ctx.reset();
            for (i, v) in round.iter().enumerate() {
                if i % 2 == 0 {
                    ctx.add_str(id, v).unwrap();
                } else {
                    ctx.add_value_by_id(id, Value::String((*v).to_owned()))
                        .unwrap();
                }
            }
            let got: Vec<&str> = ctx
                .values_by_id(id)
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.as_str(),
                    _ => panic!("not a string"),
                })
                .collect();
            assert_eq!(got, round);
        }
    }
}
