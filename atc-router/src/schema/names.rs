//! Schemas: field names and their types (docs/language.md "Schemas and field names"), and the small
//! integers ([`FieldId`]) that routers and contexts use instead of names on the request path.
//!
//! Two kinds of names have ids:
//! - **declared fields** ([`Schema::add_field`]) get one for the life of the schema;
//! - **wildcard names** (`http.headers.x_tenant` under `http.headers.*`) get one only while a
//!   route uses them. Routes register the names they use ([`Schema::acquire`], counted per
//!   name) and release them when they go; the last release frees the id for another name.
//!
//! Invariants (a reader must not break them):
//! - **Requests never register.** Only configuration (routes being added or prepared) calls
//!   `acquire`; a context that is given a value for a name no route uses gets
//!   [`FieldId::unused`] and ignores the value ([`Schema::resolve`]). So request traffic cannot
//!   grow the schema, exhaust its limits or size a context's memory.
//! - **An id is never handed out twice.** A [`FieldId`] is an index (the place a context keeps
//!   the field's values in) and a generation. Reusing a freed index bumps its generation, and an
//!   index whose generation would wrap is retired instead of reused. An id that was freed
//!   therefore never names another field: a context still holding values under it (added before
//!   the routes changed) is simply not read, and values added under it are ignored.
//! - **Counts balance.** Every `acquire` and `retain` is matched by one `release`; callers hold
//!   registrations in a [`Holds`] or a router's field counts, both of which release on drop.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, RwLock};

// Fx hashing: names are inserted only by configuration; a request only looks names up, which
// cannot build the collision chains SipHash guards against.
use rustc_hash::FxHashMap;

use crate::error::{excerpt, Error};
use crate::limits::Limits;
use crate::schema::field_name::{check_declared_name, is_identifier, NameRule};
use crate::value::Type;

/// A field resolved against a schema. Only meaningful with the schema that produced it.
///
/// The raw value (what the C ABI hands out) packs an index, [`FieldId::index`], into its low
/// 20 bits and a generation into the high 12.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldId(u32);

/// A set of fields: bit `min(index, 63)` for the field of that index ([`FieldId::bit`]). Fields
/// past the 63rd share the last bit, so a mask may name more fields than meant, never fewer.
pub type FieldMask = u64;

const INDEX_BITS: u32 = FieldId::INDEX_BITS;
const INDEX_MASK: u32 = FieldId::INDEX_MASK;
/// The index of [`FieldId::unused`] ids; never given to a field.
const UNUSED_INDEX: u32 = INDEX_MASK;
/// Generations an index goes through before it is retired.
const GENERATIONS: u32 = 1 << (32 - INDEX_BITS);

impl FieldId {
    /// How many low bits of a raw id ([`FieldId::to_raw`]) are the field's index
    /// ([`FieldId::index`]); the bits above are a generation. The layout's one definition: the
    /// C header exports the mask as `ATC_FIELD_INDEX_MASK`, which the Lua binding reads.
    pub const INDEX_BITS: u32 = 20;
    /// The mask of the index bits of a raw id: `raw & INDEX_MASK` is [`FieldId::index`].
    pub const INDEX_MASK: u32 = (1 << Self::INDEX_BITS) - 1;

    /// The place of the field's values in a context (and its bit in a [`FieldMask`]): below
    /// 2^20, and dense — indices are reused lowest first.
    pub fn index(self) -> usize {
        (self.0 & INDEX_MASK) as usize
    }

    /// The field's bit in a [`FieldMask`] (the masks of two-phase matching,
    /// `Router::key_fields` and `Router::needed_fields`): its index, or 63 past the 63rd.
    #[inline]
    pub fn bit(self) -> FieldMask {
        1 << self.index().min(63)
    }

    /// The id as one integer (the C ABI's `uint32_t` field ids).
    pub fn to_raw(self) -> u32 {
        self.0
    }

    /// The id of a raw integer from [`FieldId::to_raw`]. Any integer is accepted: one that no
    /// schema handed out is refused where it is used.
    pub fn from_raw(raw: u32) -> FieldId {
        FieldId(raw)
    }

    /// The id a request gets for a valid name of type `ty` that no route uses (see
    /// [`Schema::resolve`]): values added under it are checked against `ty` and ignored.
    pub fn unused(ty: Type) -> FieldId {
        Self::pack(UNUSED_INDEX, type_code(ty))
    }

    /// The type of an [`FieldId::unused`] id; `None` for every other id.
    pub fn unused_type(self) -> Option<Type> {
        if self.0 & INDEX_MASK != UNUSED_INDEX {
            return None;
        }
        type_of_code(self.generation())
    }

    fn pack(index: u32, generation: u32) -> FieldId {
        FieldId(index | (generation << INDEX_BITS))
    }

    fn generation(self) -> u32 {
        self.0 >> INDEX_BITS
    }
}

/// A type's number: in an unused id's generation bits, and in a table image's field table.
pub(crate) fn type_code(ty: Type) -> u32 {
    match ty {
        Type::String => 0,
        Type::Int => 1,
        Type::IpAddr => 2,
        Type::IpCidr => 3,
    }
}

/// The type of a [`type_code`].
pub(crate) fn type_of_code(code: u32) -> Option<Type> {
    Some(match code {
        0 => Type::String,
        1 => Type::Int,
        2 => Type::IpAddr,
        3 => Type::IpCidr,
        _ => return None,
    })
}

/// What a [`FieldId`] stands for now (see [`Schema::id_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdState {
    /// A declared field, or a wildcard name a route uses: values added under it are kept.
    Live(Type),
    /// A [`FieldId::unused`] id: values are checked against the type and ignored.
    Unused(Type),
    /// The id of a wildcard name that routes used when it was handed out and no longer use:
    /// values are ignored.
    Released,
    /// Not an id of this schema.
    Unknown,
}

/// Field names and types.
///
/// ```
/// use atc_router::{Schema, Type};
/// let mut s = Schema::new();
/// s.add_field("http.host", Type::String).unwrap();
/// s.add_field("http.headers.*", Type::String).unwrap();
/// assert_eq!(s.field_type("http.headers.x_foo"), Some(Type::String));
/// assert_eq!(s.field_type("http.headers.a.b"), None); // one segment only
/// assert!(s.add_field("http.host", Type::Int).is_err());
/// // A name no route uses resolves to an id whose values are ignored: requests never register.
/// let (id, ty) = s.resolve("http.headers.x_foo").unwrap();
/// assert_eq!(id.unused_type(), Some(ty));
/// assert_eq!(s.names_in_use(), 0);
/// ```
#[derive(Debug, Default)]
pub struct Schema {
    exact: FxHashMap<String, FieldId>,
    /// Wildcard prefix including its trailing dot (`"http.headers."`) → type.
    wildcards: FxHashMap<String, Type>,
    /// Declared fields by index (`None` at indices of wildcard names).
    fields: Vec<Option<(String, Type)>>,
    names: RwLock<Names>,
    limits: Limits,
}

/// The wildcard names routes use, and the index allocator both kinds draw from.
#[derive(Debug, Default)]
struct Names {
    /// The next index never used.
    next: u32,
    by_name: FxHashMap<Box<str>, FieldId>,
    /// By index: the registration of a wildcard name, or the generation last used there.
    slots: Vec<NameSlot>,
    /// Freed indices, lowest first, so that live indices stay dense.
    free: BinaryHeap<Reverse<u32>>,
}

#[derive(Debug, Default)]
struct NameSlot {
    generation: u32,
    /// The name while registered (`refs > 0`).
    name: Option<Box<str>>,
    ty: Option<Type>,
    refs: u32,
}

impl Schema {
    /// An empty schema with the default [`Limits`].
    pub fn new() -> Schema {
        Schema::default()
    }

    /// A schema with non-default limits, which govern everything made from it: the names
    /// its routes use (`max_wildcard_fields`), the values of its contexts
    /// (`max_values_per_field`), and the expressions of routers made with [`Router::new`] or
    /// checked with [`Router::validate`] (the other limits). [`Router::with_limits`] overrides
    /// the expression limits of one router.
    ///
    /// [`Router::new`]: crate::Router::new
    /// [`Router::validate`]: crate::Router::validate
    /// [`Router::with_limits`]: crate::Router::with_limits
    pub fn with_limits(limits: Limits) -> Schema {
        Schema {
            limits,
            ..Schema::default()
        }
    }

    /// The limits of the schema (see [`Schema::with_limits`]).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Replaces the limits (see [`Schema::with_limits`]). It takes `&mut self`, so it can only
    /// happen before the schema is shared: routers and contexts never see its limits change
    /// under them. A lower `max_wildcard_fields` than the names in use now refuses new names
    /// only.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Adds a field, or a wildcard `prefix.*` standing for `prefix.<one segment>`. Names are
    /// held to Kong's grammar ([`NameRule::Grammar`]).
    pub fn add_field(&mut self, name: &str, ty: Type) -> Result<(), Error> {
        check_declared_name(name, NameRule::Grammar)?;
        if let Some(prefix) = name.strip_suffix(".*") {
            let key = format!("{prefix}.");
            if self.wildcards.contains_key(&key) {
                return Err(Error::DuplicateField(excerpt(name)));
            }
            self.wildcards.insert(key, ty);
            return Ok(());
        }
        let names = self.names.get_mut().unwrap_or_else(|e| e.into_inner());
        if self.exact.contains_key(name) || names.by_name.contains_key(name) {
            // A wildcard name in use has an id that routes hold: its type cannot change.
            return Err(Error::DuplicateField(excerpt(name)));
        }
        if names.next >= UNUSED_INDEX {
            return Err(ids_exhausted());
        }
        let id = FieldId::pack(names.next, 0);
        names.next += 1;
        self.exact.insert(name.to_owned(), id);
        if self.fields.len() <= id.index() {
            self.fields.resize(id.index() + 1, None);
        }
        self.fields[id.index()] = Some((name.to_owned(), ty));
        Ok(())
    }

    /// The type of a field, exact names first, then wildcards. Does not assign an id.
    pub fn field_type(&self, name: &str) -> Option<Type> {
        match self.exact.get(name) {
            Some(id) => self.declared(*id).map(|f| f.1),
            None => self.wildcard_type(name),
        }
    }

    /// The type given by the declaration as written (`"http.headers.*"` included).
    pub fn declared_type(&self, name: &str) -> Option<Type> {
        match name.strip_suffix(".*") {
            Some(prefix) => self.wildcards.get(&format!("{prefix}.")).copied(),
            None => self
                .field_type(name)
                .filter(|_| self.exact.contains_key(name)),
        }
    }

    fn wildcard_type(&self, name: &str) -> Option<Type> {
        let dot = name.rfind('.')?;
        if !is_identifier(name) {
            return None;
        }
        self.wildcards.get(&name[..=dot]).copied()
    }

    fn declared(&self, id: FieldId) -> Option<&(String, Type)> {
        if id.generation() != 0 {
            return None;
        }
        self.fields.get(id.index())?.as_ref()
    }

    /// The id a request adds values of `name` under, and the field's type: the field's own id
    /// when it is declared or a route uses it, [`FieldId::unused`] when it is a valid wildcard
    /// name that no route uses (values under it are ignored: no route could read them).
    /// Never registers anything; unknown names are an error.
    ///
    /// Ids of declared fields are permanent. The id of a wildcard name is valid while a route
    /// uses the name: a caller that keeps ids across route changes resolves such names again.
    pub fn resolve(&self, name: &str) -> Result<(FieldId, Type), Error> {
        if let Some(id) = self.exact.get(name) {
            return Ok((*id, self.declared(*id).expect("declared").1));
        }
        let ty = self
            .wildcard_type(name)
            .ok_or_else(|| Error::UnknownField(excerpt(name)))?;
        let id = self.names_read().by_name.get(name).copied();
        Ok((id.unwrap_or(FieldId::unused(ty)), ty))
    }

    /// The id of a declared field or a wildcard name in use (never assigns).
    pub fn lookup(&self, name: &str) -> Option<FieldId> {
        match self.exact.get(name) {
            Some(id) => Some(*id),
            None => self.names_read().by_name.get(name).copied(),
        }
    }

    /// The id and type of a declared field (never a wildcard name: those are registered).
    pub(crate) fn declared_field(&self, name: &str) -> Option<(FieldId, Type)> {
        let id = *self.exact.get(name)?;
        Some((id, self.declared(id)?.1))
    }

    /// Registers one more use of `name` by configuration and returns its id and type (for a
    /// declared field, just its id). Pair it with [`Schema::release`] — through a [`Holds`].
    pub(crate) fn acquire(&self, name: &str) -> Result<(FieldId, Type), Error> {
        if let Some(id) = self.exact.get(name) {
            return Ok((*id, self.declared(*id).expect("declared").1));
        }
        let ty = self
            .wildcard_type(name)
            .ok_or_else(|| Error::UnknownField(excerpt(name)))?;
        let mut names = self.names_write();
        if let Some(&id) = names.by_name.get(name) {
            names.slots[id.index()].refs += 1;
            return Ok((id, ty));
        }
        if names.by_name.len() >= self.limits.max_wildcard_fields {
            return Err(Error::Limit(format!(
                "too many distinct wildcard field names in use by routes (limit: {}): \
                 `{}` would be one more",
                self.limits.max_wildcard_fields,
                excerpt(name)
            )));
        }
        let index = match names.free.pop() {
            Some(Reverse(i)) => i,
            None if names.next < UNUSED_INDEX => {
                names.next += 1;
                names.next - 1
            }
            None => return Err(ids_exhausted()),
        };
        // Every allocation happens before the first write, so a failure leaves the table as it
        // was (see `names_write`).
        let key: Box<str> = name.into();
        let stored: Box<str> = name.into();
        if names.slots.len() <= index as usize {
            names
                .slots
                .resize_with(index as usize + 1, NameSlot::default);
        }
        names.by_name.reserve(1);
        let slot = &mut names.slots[index as usize];
        // A fresh index starts at generation 0; a freed one moved on when it was released.
        let generation = slot.generation;
        slot.name = Some(stored);
        slot.ty = Some(ty);
        slot.refs = 1;
        let id = FieldId::pack(index, generation);
        names.by_name.insert(key, id);
        Ok((id, ty))
    }

    /// One more use of an id that is already registered (a router taking over a route's
    /// registration). Declared fields need none.
    pub(crate) fn retain(&self, id: FieldId) {
        if self.declared(id).is_some() {
            return;
        }
        let mut names = self.names_write();
        if let Some(slot) = names.slots.get_mut(id.index()) {
            if slot.generation == id.generation() && slot.refs > 0 {
                slot.refs += 1;
            }
        }
    }

    /// One use fewer; the last frees the name and its index (see the module invariants).
    pub(crate) fn release(&self, id: FieldId) {
        if self.declared(id).is_some() {
            return;
        }
        let mut names = self.names_write();
        let Some(slot) = names.slots.get_mut(id.index()) else {
            return;
        };
        if slot.generation != id.generation() || slot.refs == 0 {
            return;
        }
        slot.refs -= 1;
        if slot.refs > 0 {
            return;
        }
        let name = slot.name.take();
        slot.ty = None;
        slot.generation += 1;
        let retire = slot.generation >= GENERATIONS;
        if let Some(name) = name {
            names.by_name.remove(&name);
        }
        if !retire {
            names.free.push(Reverse(id.0 & INDEX_MASK));
        }
    }

    /// Number of wildcard names routes use now (each registered once, however many routes use
    /// it). Requests never change it.
    pub fn names_in_use(&self) -> usize {
        self.names_read().by_name.len()
    }

    /// What `id` stands for now: a field whose values are kept, an id whose values are
    /// ignored, or nothing of this schema.
    pub fn id_state(&self, id: FieldId) -> IdState {
        if let Some(f) = self.declared(id) {
            return IdState::Live(f.1);
        }
        if let Some(ty) = id.unused_type() {
            return IdState::Unused(ty);
        }
        let names = self.names_read();
        if id.index() >= names.next as usize
            || self.fields.get(id.index()).is_some_and(Option::is_some)
        {
            return IdState::Unknown;
        }
        match names.slots.get(id.index()) {
            Some(s) if s.generation == id.generation() && s.refs > 0 => {
                IdState::Live(s.ty.expect("a registered name has a type"))
            }
            // A generation the index went through: the name it stood for is no longer used.
            Some(s) if id.generation() < s.generation => IdState::Released,
            _ => IdState::Unknown,
        }
    }

    /// Name and type of a declared field or a wildcard name in use.
    pub fn field(&self, id: FieldId) -> Option<(String, Type)> {
        if let Some(f) = self.declared(id) {
            return Some(f.clone());
        }
        let names = self.names_read();
        let slot = names.slots.get(id.index())?;
        if slot.generation != id.generation() || slot.refs == 0 {
            return None;
        }
        Some((slot.name.as_deref()?.to_owned(), slot.ty?))
    }

    /// A 64-bit digest of the declared fields (names, types, ids) and wildcard patterns: two
    /// schemas with the same digest give every declared name the same id and type, and accept
    /// the same wildcard names. Table images carry it (see `router/table_image.rs`).
    pub(crate) fn fingerprint(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes.iter().chain(&[0xff]) {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        };
        for (i, f) in self.fields.iter().enumerate() {
            if let Some((name, ty)) = f {
                eat(&(i as u64).to_le_bytes());
                eat(name.as_bytes());
                eat(&[type_code(*ty) as u8]);
            }
        }
        let mut wildcards: Vec<(&String, &Type)> = self.wildcards.iter().collect();
        wildcards.sort_by(|a, b| a.0.cmp(b.0));
        for (prefix, ty) in wildcards {
            eat(b"*");
            eat(prefix.as_bytes());
            eat(&[type_code(*ty) as u8]);
        }
        h
    }

    /// The type of a declared field or a wildcard name in use.
    pub fn type_of(&self, id: FieldId) -> Option<Type> {
        match self.id_state(id) {
            IdState::Live(ty) => Some(ty),
            _ => None,
        }
    }

    fn names_read(&self) -> std::sync::RwLockReadGuard<'_, Names> {
        // Writers allocate everything they need before their first write, so a panic (or an
        // allocation failure, which aborts) cannot leave the table half-changed: a poisoned
        // lock still guards a consistent table.
        self.names.read().unwrap_or_else(|e| e.into_inner())
    }

    fn names_write(&self) -> std::sync::RwLockWriteGuard<'_, Names> {
        // See `names_read`.
        self.names.write().unwrap_or_else(|e| e.into_inner())
    }
}

fn ids_exhausted() -> Error {
    Error::Limit(format!(
        "this schema has used all of its {UNUSED_INDEX} field ids (declared fields, wildcard \
         names in use and retired ids together)"
    ))
}

/// Registrations held on behalf of a route that is not (or not yet) in a router: released
/// when dropped. See the module invariants.
#[derive(Debug)]
pub(crate) struct Holds {
    schema: Arc<Schema>,
    ids: Vec<FieldId>,
}

impl Holds {
    pub(crate) fn new(schema: Arc<Schema>) -> Holds {
        Holds {
            schema,
            ids: Vec::new(),
        }
    }

    /// [`Schema::acquire`], released when `self` is dropped.
    pub(crate) fn acquire(&mut self, name: &str) -> Result<(FieldId, Type), Error> {
        let (id, ty) = self.schema.acquire(name)?;
        if self.schema.declared(id).is_none() {
            self.ids.push(id);
        }
        Ok((id, ty))
    }
}

impl Drop for Holds {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            self.schema.release(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wildcard_schema() -> Arc<Schema> {
        let mut s = Schema::new();
        s.add_field("a", Type::Int).unwrap();
        s.add_field("h.*", Type::String).unwrap();
        s.add_field("q.*", Type::Int).unwrap();
        Arc::new(s)
    }

    #[test]
    fn exact_name_wins_over_wildcard() {
        let mut s = Schema::new();
        s.add_field("http.headers.*", Type::String).unwrap();
        s.add_field("http.headers.count", Type::Int).unwrap();
        assert_eq!(s.field_type("http.headers.count"), Some(Type::Int));
        assert_eq!(s.field_type("http.headers.x"), Some(Type::String));
    }

    #[test]
    fn names_in_use_get_stable_ids_and_requests_register_nothing() {
        let s = wildcard_schema();
        assert_eq!(
            s.resolve("h.x").unwrap(),
            (FieldId::unused(Type::String), Type::String)
        );
        assert_eq!(s.names_in_use(), 0);
        let (x, _) = s.acquire("h.x").unwrap();
        let (y, _) = s.acquire("h.y").unwrap();
        assert_ne!(x, y);
        assert_eq!(s.acquire("h.x").unwrap().0, x);
        assert_eq!(s.resolve("h.x").unwrap().0, x);
        assert_eq!(s.field(x), Some(("h.x".into(), Type::String)));
        assert!(matches!(s.resolve("h"), Err(Error::UnknownField(_))));
        assert!(matches!(s.resolve("h.x.y"), Err(Error::UnknownField(_))));
        assert_eq!(s.names_in_use(), 2);
    }

    #[test]
    fn the_last_release_frees_a_name_and_its_index_comes_back_with_a_new_generation() {
        let s = wildcard_schema();
        let (x, _) = s.acquire("h.x").unwrap();
        s.acquire("h.x").unwrap();
        s.release(x);
        assert_eq!(s.id_state(x), IdState::Live(Type::String));
        s.release(x);
        assert_eq!(s.names_in_use(), 0);
        assert_eq!(s.lookup("h.x"), None);
        assert_eq!(s.id_state(x), IdState::Released);
        let (q, ty) = s.acquire("q.n").unwrap();
        assert_eq!(
            (q.index(), ty),
            (x.index(), Type::Int),
            "lowest free index first"
        );
        assert_ne!(q, x, "a new generation");
        assert_eq!(s.id_state(q), IdState::Live(Type::Int));
        assert_eq!(s.field(x), None);
    }

    #[test]
    fn an_index_is_retired_before_its_generation_would_wrap() {
        let s = wildcard_schema();
        let mut seen = std::collections::HashSet::new();
        for i in 0..GENERATIONS + 10 {
            let (id, _) = s.acquire(&format!("h.n{i}")).unwrap();
            assert!(seen.insert(id), "id {id:?} handed out twice");
            s.release(id);
        }
        assert_eq!(s.names_in_use(), 0);
        let names = s.names_read();
        assert_eq!(names.next, 3, "one index retired, the next one in use");
    }

    #[test]
    fn fields_added_after_a_wildcard_name_was_registered_get_their_own_id() {
        let mut s = Schema::new();
        s.add_field("h.*", Type::String).unwrap();
        let (wild, _) = s.acquire("h.x").unwrap();
        s.add_field("port", Type::Int).unwrap();
        let (port, ty) = s.resolve("port").unwrap();
        assert_ne!(wild.index(), port.index());
        assert_eq!(ty, Type::Int);
        assert_eq!(s.type_of(wild), Some(Type::String));
        assert_eq!(s.field(port), Some(("port".into(), Type::Int)));
        assert!(matches!(
            s.add_field("h.x", Type::Int),
            Err(Error::DuplicateField(_))
        ));
    }

    #[test]
    fn names_in_use_are_bounded() {
        let limits = Limits {
            max_wildcard_fields: 2,
            ..Limits::default()
        };
        let mut s = Schema::with_limits(limits);
        s.add_field("h.*", Type::String).unwrap();
        s.acquire("h.a").unwrap();
        let (b, _) = s.acquire("h.b").unwrap();
        s.acquire("h.a").unwrap();
        let e = s.acquire("h.c").unwrap_err();
        assert!(e
            .to_string()
            .contains("too many distinct wildcard field names"));
        s.release(b);
        s.acquire("h.c").unwrap();
    }

    #[test]
    fn unknown_ids_are_told_apart_from_ignored_ones() {
        let s = wildcard_schema();
        assert_eq!(s.id_state(FieldId::from_raw(12345)), IdState::Unknown);
        assert_eq!(
            s.id_state(FieldId::unused(Type::Int)),
            IdState::Unused(Type::Int)
        );
        assert_eq!(s.id_state(s.lookup("a").unwrap()), IdState::Live(Type::Int));
    }

    #[test]
    fn holds_release_on_drop() {
        let s = wildcard_schema();
        let mut h = Holds::new(s.clone());
        h.acquire("h.x").unwrap();
        h.acquire("a").unwrap();
        assert_eq!(s.names_in_use(), 1);
        drop(h);
        assert_eq!(s.names_in_use(), 0);
    }

    #[test]
    fn bad_names_are_rejected() {
        let mut s = Schema::new();
        for bad in ["", "1a", "a-b", ".*", "a.*.*", "é"] {
            assert!(
                matches!(s.add_field(bad, Type::Int), Err(Error::InvalidFieldName(_))),
                "{bad}"
            );
        }
    }
}
