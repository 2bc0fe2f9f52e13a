//! The public per-request state: a request's values and, after an execute, its result.
//!
//! Invariants: `reset` and every execute leave no result from an earlier request behind; the
//! candidates cached by `Router::needed_fields` (or `ImageRouter::needed_fields`) are used only
//! by the router and version that found them, and only while no value was added to a key field since (see
//! [`CachedCandidates`]). The values live in the schema stage ([`Values`]), what the winner
//! recorded in the compile stage ([`MatchRecord`]): the index and programs read those, never
//! this type, so that nothing before the router knows its match state.

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::compile::record::{CaptureKey, MatchRecord, MatchedValue};
use crate::error::Error;
use crate::request::{PathField, Segments};
use crate::schema::values::Values;
use crate::schema::{FieldId, IdState, Schema};
use crate::value::Value;

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
    pub(crate) values: Values,
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
/// stay right while no value is added to one of those: [`Values::added`] collects the field
/// bit of every value added since they were found, and a router uses them only when none is a
/// key field's.
#[derive(Debug, Default)]
pub(crate) struct CachedCandidates {
    /// `(router, version)` they were found by, if any.
    pub(crate) by: Option<(u64, u64)>,
    /// The table's own numbers of them (`read_side.rs`), in routing order.
    pub(crate) entries: Vec<u32>,
}

impl Context {
    /// An empty context for requests to routers of `schema`.
    pub fn new(schema: Arc<Schema>) -> Context {
        Context {
            values: Values::new(schema),
            outcome: None,
            record: MatchRecord::default(),
            candidates: CachedCandidates::default(),
            stripe: super::next_stripe(),
        }
    }

    /// The schema the context was made for.
    #[inline]
    pub fn schema(&self) -> &Arc<Schema> {
        self.values.schema()
    }

    /// Appends a value to a field (by name; wildcard names resolve through the schema).
    ///
    /// A wildcard name that no route uses (a header no route reads) is accepted and its value
    /// ignored: no route could read it, and registering it would let requests grow the schema
    /// (see [`Schema::resolve`]).
    #[inline]
    pub fn add_value(&mut self, field: &str, value: impl Into<Value>) -> Result<(), Error> {
        self.values.add_value(field, value)
    }

    /// Appends a value to a field resolved with [`Schema::resolve`].
    #[inline]
    pub fn add_value_by_id(&mut self, id: FieldId, value: Value) -> Result<(), Error> {
        self.values.add_value_by_id(id, value)
    }

    /// Appends a String value, reusing the buffer a previous request left in that place.
    #[inline]
    pub fn add_str(&mut self, id: FieldId, value: &str) -> Result<(), Error> {
        self.values.add_str(id, value)
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
        fields: impl IntoIterator<Item = (FieldId, PathField)>,
    ) -> Result<(), Error> {
        let segments = Segments::new(path);
        for (id, field) in fields {
            match field {
                PathField::Path => self.values.add_str(id, path)?,
                PathField::Len => self
                    .values
                    .add_value_by_id(id, Value::Int(segments.len() as i64))?,
                _ => {
                    if let Some(text) = segments.get(field) {
                        self.values.add_str(id, text)?;
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
    #[inline]
    pub fn id_state(&self, id: FieldId) -> IdState {
        self.values.id_state(id)
    }

    /// The values of a field, in insertion order (empty when absent or unknown).
    #[inline]
    pub fn values(&self, field: &str) -> &[Value] {
        self.values.values(field)
    }

    /// The values of a field, in the order they were added (empty when it has none).
    #[inline]
    pub fn values_by_id(&self, id: FieldId) -> &[Value] {
        self.values.values_by_id(id)
    }

    /// Forgets all values and the result; keeps the buffers for the next request.
    #[inline]
    pub fn reset(&mut self) {
        self.values.reset();
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
            .schema()
            .lookup(field)
            .and_then(|id| self.matched_value_by_id(id))
    }

    /// [`MatchResult::matched_value`] by field id.
    pub fn matched_value_by_id(&self, field: FieldId) -> Option<MatchedValue<'a>> {
        self.ctx.record.matched_value(field)
    }

    /// Fields with a recorded value, each once, in the order they were first recorded.
    pub fn matched_fields(&self) -> Vec<FieldId> {
        let mut out: Vec<FieldId> = Vec::new();
        for f in self.ctx.record.matched_fields() {
            if !out.contains(&f) {
                out.push(f);
            }
        }
        out
    }

    /// Captures in the order they were recorded: each group that took part by number (`0` is
    /// the whole match) and each named group also by name. A later one wins over an earlier
    /// one with the same key.
    pub fn captures(&self) -> impl Iterator<Item = (CaptureKey<'a>, &'a str)> + 'a {
        self.ctx.record.captures()
    }

    /// One capture by key (the last recorded with that key).
    pub fn capture(&self, key: CaptureKey<'_>) -> Option<&'a str> {
        self.ctx.record.capture(key)
    }

    /// Captures as a map from `"0"`, `"1"`, … and group names to text (allocates).
    pub fn captures_map(&self) -> HashMap<String, String> {
        self.captures()
            .map(|(k, v)| (k.to_string(), v.to_owned()))
            .collect()
    }
}
