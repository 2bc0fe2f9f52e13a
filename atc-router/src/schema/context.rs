//! Per-request values and the result of the last execute.
//!
//! Invariants: a field's values keep their insertion order (a header may repeat); `reset` and
//! every execute leave no result from an earlier request behind. Storage is reused across
//! [`Context::reset`], so a context that serves request after request stops allocating once its
//! buffers have grown to the largest request (strings added with [`Context::add_str`] reuse
//! their buffers too).

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::ops::Range;
use std::sync::Arc;

use uuid::Uuid;

use crate::compile::resolve::Lit;
use crate::error::{excerpt, Error};
use crate::schema::names::{FieldId, IdState, Schema};
use crate::schema::value::{IpCidr, Type, Value};

/// Values of one request, and after [`crate::Router::execute`], its result.
///
/// ```
/// use std::sync::Arc;
/// use atc_router::{Context, Router, Schema, Type, Uuid};
/// let mut s = Schema::new();
/// s.add_field("http.headers.*", Type::String).unwrap();
/// s.add_field("net.dst.port", Type::Int).unwrap();
/// let s = Arc::new(s);
/// let mut router = Router::new(s.clone());
/// router.add(Uuid::from_u128(1), 1, r#"any(http.headers.accept) == "b""#).unwrap();
///
/// let mut ctx = Context::new(s);
/// ctx.add_value("http.headers.accept", "a").unwrap();
/// ctx.add_value("http.headers.accept", "b").unwrap();
/// assert_eq!(ctx.values("http.headers.accept").len(), 2);
/// ctx.add_value("http.headers.x_other", "c").unwrap(); // no route reads it: ignored
/// assert!(ctx.values("http.headers.x_other").is_empty());
/// assert!(ctx.add_value("net.dst.port", "80").is_err()); // wrong type
/// assert!(ctx.add_value("nope", 1).is_err()); // unknown field
/// ```
#[derive(Debug)]
pub struct Context {
    schema: Arc<Schema>,
    slots: Vec<Slot>,
    /// The type of the field each bound slot holds, remembered when it was bound: a wildcard
    /// name (`http.headers.*`) keeps its type behind the schema's lock, too slow to ask for
    /// every value of every request. (Apart from the slots, which hold a cache line each.)
    types: Vec<Type>,
    touched: Vec<FieldId>,
    pub(crate) outcome: Option<(Uuid, u64)>,
    pub(crate) record: MatchRecord,
    /// The candidates `Router::needed_fields` found, kept for the execute that follows it.
    pub(crate) candidates: CachedCandidates,
    /// Which stripe of a router's counters an execute of this context counts in (see
    /// `router/stats.rs`): taken when the context is made, so that threads matching with
    /// contexts of their own rarely write the same cache line.
    pub(crate) stripe: u8,
}

/// Candidates found for this request by one version of one router (see
/// `Router::needed_fields`). They depend only on the values of the router's key fields, so they
/// stay right while no value is added to one of those: `added` collects the field bit of every
/// value added since they were found, and a router uses them only when none is a key field's.
#[derive(Debug, Default)]
pub(crate) struct CachedCandidates {
    /// `(router, version)` they were found by, if any.
    pub(crate) by: Option<(u64, u64)>,
    pub(crate) entries: Vec<crate::index::Entry>,
    pub(crate) added: crate::router::needs::FieldMask,
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

impl Context {
    /// An empty context for requests to routers of `schema`.
    pub fn new(schema: Arc<Schema>) -> Context {
        Context {
            schema,
            slots: Vec::new(),
            types: Vec::new(),
            touched: Vec::new(),
            outcome: None,
            record: MatchRecord::default(),
            candidates: CachedCandidates::default(),
            stripe: crate::router::next_stripe(),
        }
    }

    /// The schema the context was made for.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// Appends a value to a field (by name; wildcard names resolve through the schema).
    ///
    /// A wildcard name that no route uses (a header no route reads) is accepted and its value
    /// ignored: no route could read it, and registering it would let requests grow the schema
    /// (see [`Schema::resolve`]).
    pub fn add_value(&mut self, field: &str, value: impl Into<Value>) -> Result<(), Error> {
        let (id, _) = self.schema.resolve(field)?;
        self.add_value_by_id(id, value.into())
    }

    /// Appends a value to a field resolved with [`Schema::resolve`].
    pub fn add_value_by_id(&mut self, id: FieldId, value: Value) -> Result<(), Error> {
        if let Some(slot) = self.slot_for(id, value.ty())? {
            *slot.next_place() = value;
            slot.len += 1;
        }
        Ok(())
    }

    /// Appends a String value, reusing the buffer a previous request left in that place.
    pub fn add_str(&mut self, id: FieldId, value: &str) -> Result<(), Error> {
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

    /// Adds the values Kong derives from a request path to the fields `fields` names: for
    /// each `(id, field)`, the path itself, its number of segments (an Int), or a segment or
    /// range of segments when the path has one (see [`crate::request::Segments`]). `path` is
    /// the path as routed: [`crate::request::request_path`] makes it from a request URI.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use atc_router::request::{http_schema, PathField};
    /// use atc_router::{Context, Router, Uuid};
    ///
    /// let schema = Arc::new(http_schema());
    /// let mut router = Router::new(schema.clone());
    /// router.add(Uuid::from_u128(1), 1, r#"http.path.segments.1_2 == "repos/7""#).unwrap();
    /// let fields: Vec<_> = router
    ///     .fields()
    ///     .iter()
    ///     .filter_map(|name| Some((schema.lookup(name)?, PathField::of(name)?)))
    ///     .collect();
    /// let mut ctx = Context::new(schema);
    /// ctx.add_path("/v1/repos/7/", fields.iter().copied()).unwrap();
    /// assert!(router.execute(&mut ctx));
    /// ```
    pub fn add_path(
        &mut self,
        path: &str,
        fields: impl IntoIterator<Item = (FieldId, crate::request::PathField)>,
    ) -> Result<(), Error> {
        use crate::request::{PathField, Segments};
        let segments = Segments::new(path);
        for (id, field) in fields {
            match field {
                PathField::Path => self.add_str(id, path)?,
                PathField::Len => self.add_value_by_id(id, Value::Int(segments.len() as i64))?,
                _ => {
                    if let Some(text) = segments.get(field) {
                        self.add_str(id, text)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// What `id` stands for in this context's schema (see [`Schema::id_state`]), answered
    /// from the context's own slots for the ids it holds values under. (So an id released
    /// after this context took a value under it still reads as live here: values under it are
    /// kept, where no route reads them.)
    pub fn id_state(&self, id: FieldId) -> IdState {
        match self.slots.get(id.index()) {
            Some(s) if s.id == id.to_raw() => IdState::Live(self.types[id.index()]),
            _ => self.schema.id_state(id),
        }
    }

    /// The slot that takes a value of type `ty` for `id`, bound to `id` if it was not;
    /// `Ok(None)` when values under `id` are ignored (see [`Context::add_value`]).
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
        self.candidates.added |= crate::router::needs::field_bit(id);
        if slot.len == 0 {
            self.touched.push(id);
        }
        Ok(Some(&mut self.slots[i]))
    }

    /// The values of a field, in insertion order (empty when absent or unknown).
    pub fn values(&self, field: &str) -> &[Value] {
        self.schema
            .lookup(field)
            .map_or(&[], |id| self.values_by_id(id))
    }

    /// The values of a field, in the order they were added (empty when it has none).
    pub fn values_by_id(&self, id: FieldId) -> &[Value] {
        match self.slots.get(id.index()) {
            Some(s) if s.id == id.to_raw() => s.values(),
            _ => &[],
        }
    }

    /// The fields given values since the last reset, in the order of their first value. An id
    /// may be listed whose slot another field has taken since (it then has no values): a reader
    /// checks [`Context::values_by_id`].
    #[inline]
    pub(crate) fn present_fields(&self) -> &[FieldId] {
        &self.touched
    }

    /// Forgets all values and the result; keeps the buffers for the next request.
    pub fn reset(&mut self) {
        for id in self.touched.drain(..) {
            self.slots[id.index()].len = 0;
        }
        self.candidates.by = None;
        self.clear_result();
    }

    pub(crate) fn clear_result(&mut self) {
        self.outcome = None;
        self.record.clear();
    }

    /// The result of the last execute, if it matched.
    pub fn result(&self) -> Option<MatchResult<'_>> {
        self.outcome.map(|(id, priority)| MatchResult {
            ctx: self,
            id,
            priority,
        })
    }
}

/// The route that matched, with the values and captures of the predicates that decided it
/// (docs/language.md "Evaluation").
#[derive(Debug, Clone, Copy)]
pub struct MatchResult<'a> {
    ctx: &'a Context,
    id: Uuid,
    priority: u64,
}

impl<'a> MatchResult<'a> {
    /// The matched route's id.
    pub fn id(&self) -> Uuid {
        self.id
    }

    /// The matched route's priority.
    pub fn priority(&self) -> u64 {
        self.priority
    }

    /// The value recorded for a field (the literal of `==`, `^=`, `=^`; the whole match of `~`).
    /// When several deciding predicates record one, the last in evaluation order wins.
    pub fn matched_value(&self, field: &str) -> Option<MatchedValue<'a>> {
        self.ctx
            .schema
            .lookup(field)
            .and_then(|id| self.matched_value_by_id(id))
    }

    /// [`MatchResult::matched_value`] by field id.
    pub fn matched_value_by_id(&self, field: FieldId) -> Option<MatchedValue<'a>> {
        let w = &self.ctx.record;
        w.matched
            .iter()
            .rev()
            .find(|(f, _)| *f == field)
            .map(|(_, m)| match m {
                Matched::Int(i) => MatchedValue::Int(*i),
                Matched::IpAddr(a) => MatchedValue::IpAddr(*a),
                Matched::IpCidr(c) => MatchedValue::IpCidr(*c),
                Matched::Text(r) => MatchedValue::String(&w.text[r.clone()]),
            })
    }

    /// Fields with a recorded value, each once, in the order they were first recorded.
    pub fn matched_fields(&self) -> Vec<FieldId> {
        let mut out: Vec<FieldId> = Vec::new();
        for (f, _) in &self.ctx.record.matched {
            if !out.contains(f) {
                out.push(*f);
            }
        }
        out
    }

    /// Captures in the order they were recorded: each group that took part by number (`0` is
    /// the whole match) and each named group also by name. A later one wins over an earlier
    /// one with the same key.
    pub fn captures(&self) -> impl Iterator<Item = (CaptureKey<'a>, &'a str)> + 'a {
        let w = &self.ctx.record;
        w.captures.iter().map(move |(k, r)| {
            let key = match k {
                Key::Index(i) => CaptureKey::Index(*i),
                Key::Name(n) => CaptureKey::Name(&w.text[n.clone()]),
            };
            (key, &w.text[r.clone()])
        })
    }

    /// One capture by key (the last recorded with that key).
    pub fn capture(&self, key: CaptureKey<'_>) -> Option<&'a str> {
        let w = &self.ctx.record;
        w.captures
            .iter()
            .rev()
            .find(|(k, _)| match (k, key) {
                (Key::Index(a), CaptureKey::Index(b)) => *a == b,
                (Key::Name(a), CaptureKey::Name(b)) => w.text[a.clone()] == *b,
                _ => false,
            })
            .map(|(_, r)| &w.text[r.clone()])
    }

    /// Captures as a map from `"0"`, `"1"`, … and group names to text (allocates).
    pub fn captures_map(&self) -> HashMap<String, String> {
        self.captures()
            .map(|(k, v)| (k.to_string(), v.to_owned()))
            .collect()
    }
}

/// A matched value, borrowed from the context or the route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchedValue<'a> {
    /// A string field's value.
    String(&'a str),
    /// An integer field's value.
    Int(i64),
    /// An address field's value.
    IpAddr(IpAddr),
    /// A network field's value.
    IpCidr(IpCidr),
}

impl fmt::Display for MatchedValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchedValue::String(s) => f.write_str(s),
            MatchedValue::Int(i) => write!(f, "{i}"),
            MatchedValue::IpAddr(a) => write!(f, "{a}"),
            MatchedValue::IpCidr(c) => write!(f, "{c}"),
        }
    }
}

/// The key of a capture: group number or group name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureKey<'a> {
    /// A numbered group (`0` is the whole match).
    Index(usize),
    /// A named group.
    Name(&'a str),
}

impl fmt::Display for CaptureKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureKey::Index(i) => write!(f, "{i}"),
            CaptureKey::Name(n) => f.write_str(n),
        }
    }
}

/// What the deciding predicates recorded. Text (matched strings, captures, group names) is
/// copied into one reusable buffer and referred to by range: recording costs no allocation once
/// the buffers have grown, and no reference counting (copying a few bytes is cheaper than the
/// atomic increments and decrements of sharing the route's `Arc<str>`).
///
/// Invariant: a sub-expression that turns out false rolls back to the [`Mark`] taken before it,
/// so only deciding predicates leave anything here.
#[derive(Debug, Default)]
pub(crate) struct MatchRecord {
    matched: Vec<(FieldId, Matched)>,
    captures: Vec<(Key, Range<usize>)>,
    text: String,
}

#[derive(Debug)]
enum Matched {
    Text(Range<usize>),
    Int(i64),
    IpAddr(IpAddr),
    IpCidr(IpCidr),
}

#[derive(Debug)]
enum Key {
    Index(usize),
    Name(Range<usize>),
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark(usize, usize, usize);

/// A [`MatchRecord`]'s content, owned: each field's value, then each capture key's text.
pub(crate) type OwnedRecord = (Vec<(FieldId, Value)>, Vec<(String, String)>);

impl MatchRecord {
    pub(crate) fn mark(&self) -> Mark {
        Mark(self.matched.len(), self.captures.len(), self.text.len())
    }

    pub(crate) fn rollback(&mut self, m: Mark) {
        self.matched.truncate(m.0);
        self.captures.truncate(m.1);
        self.text.truncate(m.2);
    }

    pub(crate) fn clear(&mut self) {
        self.rollback(Mark(0, 0, 0));
    }

    #[inline]
    pub(crate) fn literal(&mut self, field: FieldId, lit: &Lit) {
        let m = match lit {
            Lit::Str(s) => Matched::Text(self.push_text(s)),
            Lit::Int(i) => Matched::Int(*i),
            Lit::IpAddr(a) => Matched::IpAddr(*a),
            Lit::IpCidr(c) => Matched::IpCidr(*c),
            // A set records the element a value equals, never itself.
            Lit::Set(_) => return,
        };
        self.matched.push((field, m));
    }

    fn push_text(&mut self, s: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(s);
        start..self.text.len()
    }

    pub(crate) fn text(&mut self, field: FieldId, s: &str) {
        let r = self.push_text(s);
        self.matched.push((field, Matched::Text(r)));
    }

    pub(crate) fn capture_index(&mut self, index: usize, s: &str) {
        let r = self.push_text(s);
        self.captures.push((Key::Index(index), r));
    }

    pub(crate) fn capture_name(&mut self, name: &str, s: &str) {
        let n = self.push_text(name);
        let r = self.push_text(s);
        self.captures.push((Key::Name(n), r));
    }

    /// What was recorded, owned: each field's last value and each capture key's last text, in
    /// the order first recorded (what [`MatchResult`] answers for the winner).
    pub(crate) fn to_owned_parts(&self) -> OwnedRecord {
        let mut values: Vec<(FieldId, Value)> = Vec::new();
        for (f, m) in &self.matched {
            let v = match m {
                Matched::Text(r) => Value::String(self.text[r.clone()].to_owned()),
                Matched::Int(i) => Value::Int(*i),
                Matched::IpAddr(a) => Value::IpAddr(*a),
                Matched::IpCidr(c) => Value::IpCidr(*c),
            };
            match values.iter_mut().find(|(g, _)| g == f) {
                Some(slot) => slot.1 = v,
                None => values.push((*f, v)),
            }
        }
        let mut captures: Vec<(String, String)> = Vec::new();
        for (k, r) in &self.captures {
            let key = match k {
                Key::Index(i) => i.to_string(),
                Key::Name(n) => self.text[n.clone()].to_owned(),
            };
            let text = self.text[r.clone()].to_owned();
            match captures.iter_mut().find(|(g, _)| *g == key) {
                Some(slot) => slot.1 = text,
                None => captures.push((key, text)),
            }
        }
        (values, captures)
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
    fn values_keep_their_order_through_spills_and_resets() {
        let mut s = Schema::new();
        s.add_field("h", Type::String).unwrap();
        let mut ctx = Context::new(Arc::new(s));
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
