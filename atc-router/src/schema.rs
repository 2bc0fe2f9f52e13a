//! Schemas: field names and their types (spec §6), and the small integers ([`FieldId`]) that
//! routers and contexts use instead of names on the request path.
//!
//! Invariant: a [`FieldId`] once handed out keeps its meaning for the life of the schema, and no
//! two fields share one. Exact fields get theirs from [`Schema::add_field`]; a name that matches a
//! `prefix.*` wildcard gets one the first time it is resolved (bounded by
//! [`Limits::max_wildcard_fields`]); both draw from the same counter, so fields added after a
//! wildcard name was resolved get fresh ids.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::sync::RwLock;

use crate::error::Error;
use crate::limits::Limits;
use crate::value::Type;

/// A field resolved against a schema. Only meaningful with the schema that produced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldId(pub u32);

impl FieldId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
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
/// ```
#[derive(Debug, Default)]
pub struct Schema {
    // Fx hashing for the declared names: looked up for every predicate of every route added,
    // and filled only by the schema's author. (`Dynamic::ids` keeps SipHash: wildcard-derived
    // names can come from requests.)
    exact: FxHashMap<String, FieldId>,
    /// Wildcard prefix including its trailing dot (`"http.headers."`) → type.
    wildcards: FxHashMap<String, Type>,
    /// Exact fields by id (`None` at ids of wildcard-derived names).
    fields: Vec<Option<(String, Type)>>,
    dynamic: RwLock<Dynamic>,
    limits: Limits,
}

#[derive(Debug, Default)]
struct Dynamic {
    /// The next id to hand out, exact or wildcard-derived.
    next: u32,
    count: usize,
    ids: HashMap<String, FieldId>,
    fields: HashMap<FieldId, (String, Type)>,
}

impl Schema {
    pub fn new() -> Schema {
        Schema::default()
    }

    /// A schema with non-default limits (only `max_wildcard_fields` applies here).
    pub fn with_limits(limits: Limits) -> Schema {
        Schema {
            limits,
            ..Schema::default()
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Adds a field, or a wildcard `prefix.*` standing for `prefix.<one segment>`.
    pub fn add_field(&mut self, name: &str, ty: Type) -> Result<(), Error> {
        if let Some(prefix) = name.strip_suffix(".*") {
            if !is_identifier(prefix) {
                return Err(Error::InvalidFieldName(name.to_owned()));
            }
            let key = format!("{prefix}.");
            if self.wildcards.contains_key(&key) {
                return Err(Error::DuplicateField(name.to_owned()));
            }
            self.wildcards.insert(key, ty);
            return Ok(());
        }
        if !is_identifier(name) {
            return Err(Error::InvalidFieldName(name.to_owned()));
        }
        if self.exact.contains_key(name) {
            return Err(Error::DuplicateField(name.to_owned()));
        }
        let dynamic = self.dynamic.get_mut().unwrap_or_else(|e| e.into_inner());
        if dynamic.ids.contains_key(name) {
            // Already resolved through a wildcard: its id is in use, so the type cannot change.
            return Err(Error::DuplicateField(name.to_owned()));
        }
        let id = FieldId(dynamic.next);
        dynamic.next += 1;
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
            Some(id) => self.type_of(*id),
            None => self.wildcard_type(name),
        }
    }

    /// The type given by the declaration as written (`"http.headers.*"` included).
    pub fn declared_type(&self, name: &str) -> Option<Type> {
        match name.strip_suffix(".*") {
            Some(prefix) => self.wildcards.get(&format!("{prefix}.")).copied(),
            None => self.type_of(*self.exact.get(name)?),
        }
    }

    fn wildcard_type(&self, name: &str) -> Option<Type> {
        let dot = name.rfind('.')?;
        if !is_identifier(name) {
            return None;
        }
        self.wildcards.get(&name[..=dot]).copied()
    }

    /// Resolves a name to its id and type, assigning an id to a new wildcard-derived name.
    pub fn resolve(&self, name: &str) -> Result<(FieldId, Type), Error> {
        if let Some(id) = self.exact.get(name) {
            let ty = self.type_of(*id).expect("exact fields have a type");
            return Ok((*id, ty));
        }
        let ty = self
            .wildcard_type(name)
            .ok_or_else(|| Error::UnknownField(name.to_owned()))?;
        if let Some(id) = self.dynamic_read().ids.get(name) {
            return Ok((*id, ty));
        }
        let mut dynamic = self.dynamic.write().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = dynamic.ids.get(name) {
            return Ok((*id, ty));
        }
        if dynamic.count >= self.limits.max_wildcard_fields {
            return Err(Error::Limit(format!(
                "too many distinct wildcard field names in this schema (limit: {}); \
                 add to a context only the fields routes use",
                self.limits.max_wildcard_fields
            )));
        }
        let id = FieldId(dynamic.next);
        dynamic.next += 1;
        dynamic.count += 1;
        dynamic.ids.insert(name.to_owned(), id);
        dynamic.fields.insert(id, (name.to_owned(), ty));
        Ok((id, ty))
    }

    /// The id of a name if it already has one (never assigns).
    pub fn lookup(&self, name: &str) -> Option<FieldId> {
        match self.exact.get(name) {
            Some(id) => Some(*id),
            None => self.dynamic_read().ids.get(name).copied(),
        }
    }

    /// Name and type of a resolved field.
    pub fn field(&self, id: FieldId) -> Option<(String, Type)> {
        match self.fields.get(id.index()) {
            Some(Some(f)) => Some(f.clone()),
            _ => self.dynamic_read().fields.get(&id).cloned(),
        }
    }

    /// The type of a resolved field.
    pub fn type_of(&self, id: FieldId) -> Option<Type> {
        match self.fields.get(id.index()) {
            Some(Some(f)) => Some(f.1),
            _ => self.dynamic_read().fields.get(&id).map(|f| f.1),
        }
    }

    fn dynamic_read(&self) -> std::sync::RwLockReadGuard<'_, Dynamic> {
        // The lock guards an append-only table; a panic elsewhere cannot leave it half-written.
        self.dynamic.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// ASCII letter, then ASCII letters, digits, `_` or `.` (spec §2).
pub fn is_identifier(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic())
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_name_wins_over_wildcard() {
        let mut s = Schema::new();
        s.add_field("http.headers.*", Type::String).unwrap();
        s.add_field("http.headers.count", Type::Int).unwrap();
        assert_eq!(s.field_type("http.headers.count"), Some(Type::Int));
        assert_eq!(s.field_type("http.headers.x"), Some(Type::String));
    }

    #[test]
    fn wildcard_names_get_stable_ids() {
        let mut s = Schema::new();
        s.add_field("a", Type::Int).unwrap();
        s.add_field("h.*", Type::String).unwrap();
        let (x, _) = s.resolve("h.x").unwrap();
        let (y, _) = s.resolve("h.y").unwrap();
        assert_ne!(x, y);
        assert_eq!(s.resolve("h.x").unwrap().0, x);
        assert_eq!(s.field(x), Some(("h.x".into(), Type::String)));
        assert!(matches!(s.resolve("h"), Err(Error::UnknownField(_))));
        assert!(matches!(s.resolve("h.x.y"), Err(Error::UnknownField(_))));
    }

    #[test]
    fn fields_added_after_a_wildcard_name_was_resolved_get_their_own_id() {
        let mut s = Schema::new();
        s.add_field("h.*", Type::String).unwrap();
        let (wild, _) = s.resolve("h.x").unwrap();
        s.add_field("port", Type::Int).unwrap();
        let (port, ty) = s.resolve("port").unwrap();
        assert_ne!(wild, port);
        assert_eq!(ty, Type::Int);
        assert_eq!(s.type_of(wild), Some(Type::String));
        assert_eq!(s.field(port), Some(("port".into(), Type::Int)));
    }

    #[test]
    fn wildcard_names_are_bounded() {
        let limits = Limits {
            max_wildcard_fields: 2,
            ..Limits::default()
        };
        let mut s = Schema::with_limits(limits);
        s.add_field("h.*", Type::String).unwrap();
        s.resolve("h.a").unwrap();
        s.resolve("h.b").unwrap();
        s.resolve("h.a").unwrap();
        let e = s.resolve("h.c").unwrap_err();
        assert!(e
            .to_string()
            .contains("too many distinct wildcard field names"));
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
