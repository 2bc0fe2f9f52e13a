//! Routes in priority order, and matching a request against them (docs/language.md "Routers").
//!
//! Invariants:
//! - Routing order is priority descending, then id bytes descending (`index::Order`); ids are
//!   unique.
//! - Every route is in exactly one place of the `Index` (an index bucket, or the fallback list),
//!   put there by [`Router::add`] and taken out by [`Router::remove`]: updates are incremental,
//!   nothing is rebuilt.
//! - A live slot has a catalog row (version and text) and a program whose record holds the
//!   route's id and priority (its routing order); its resolved tree is not
//!   kept, but rebuilt from the text when needed (reference evaluation, taking the route out).
//!   Resolving a route's own text again gives the tree it was added with: the schema and
//!   limits do not change, and its regexes are in the cache for as long as the route lives.
//! - Regexes with the same source are compiled once per router and freed with the last route
//!   that uses them.
//! - An execute leaves either the first matching route's result in the context or no result.

mod background;
mod build_io;
mod build_lanes;
mod build_worker;
mod builder;
mod catalog;
mod chunked;
pub(crate) mod context;
mod desired;
mod entry_errors;
mod explain;
mod flat_index;
mod held;
mod id_map;
#[cfg(feature = "diagnostics")]
pub(crate) mod image_index;
mod matching;
pub(crate) mod needs;
mod placing;
mod program_arena;
pub(crate) mod read_side;
mod reference_view;
mod route;
mod settle;
pub(crate) mod shared;
mod slot_vec;
mod stats;
mod sync;
mod sync_ahead;
mod sync_classify;
mod sync_plan;
pub(crate) mod table_image;
mod table_ref;

pub use background::BackgroundRouter;
pub use build_io::{BuildState, Lane, Outcome, Publish, Published, RouteInput};
pub use builder::Builder;
pub use context::{Context, MatchResult};
pub use desired::{Change, RouteSpec};
pub use entry_errors::{EntryError, EntryFault};
pub use explain::{
    CandidateReport, ExplainJson, ExplainOptions, Explanation, MatchesJson, PredicateOutcome,
    RouteMatch, RouteNote, RuledOut, REPORT_JSON_VERSION,
};
pub use route::Route;
pub(crate) use stats::next_stripe;
pub use stats::RouterStats;
pub use sync_plan::{SyncError, SyncMode, SyncPlan, SyncReport};
pub use table_image::{ImageBytes, ImageRouter};
pub use table_ref::TableRef;

use catalog::{Catalog, CatalogRow};
use flat_index::FlatIndex;
use id_map::{IdMap, SlotIds};
use reference_view::ReferenceView;
use settle::FlatPolicy;

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

// Fx hashing for ids and field ids: keys come from the configuration, never from requests, and
// SipHash was a visible share of inserting a route.
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::compile::program::{Code, Program};
use crate::compile::regex_cache::{PreparedRegexes, RegexCache};
use crate::compile::resolve::{resolve, Fields, Node};
use crate::error::Error;
use crate::index::{requirements, Index, Order, Requirement, Requirements};
use crate::language::parse_with_limits;
use crate::limits::Limits;
use crate::router::needs::Needs;
use crate::schema::names::{FieldId, Holds, Schema};
use crate::schema::validate::validate;
use crate::threads::BuildThreads;
use program_arena::ProgramArena;

/// What a request's match needs of the route is its program (`Router::programs`); what a
/// sync compares is its catalog row. The resolved tree, the reference evaluator's input and
/// the key to the route's index entries, is rebuilt from the text on demand: kept for every
/// route it was most of a route's allocations, so most of the cost of building and freeing a
/// table and a quarter of its memory, for the benefit of removals (a re-parse, ≈1 µs) and
/// reference evaluations (cached per slot after the first).
fn fields(node: &Node) -> Vec<FieldId> {
    let mut fields = Vec::new();
    node.fields(&mut fields);
    fields
}

/// Source of [`Route::instance`] numbers: unique across every router of the process.
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// The next [`Route::instance`] number.
fn next_instance() -> u64 {
    NEXT_INSTANCE.fetch_add(1, AtomicOrdering::Relaxed)
}

/// A route parsed, validated and compiled, not yet in the router.
#[derive(Debug)]
struct Prepared {
    id: Uuid,
    priority: u64,
    instance: u64,
    node: Node,
    source: Box<str>,
    program: Program,
    /// The index requirements of `program`, when another thread of a build derived them
    /// already (see `threads.rs`); `None`: `insert` derives them.
    reqs: Option<Vec<Requirement>>,
    /// The wildcard names the route uses stay registered until a router takes them over
    /// (`Router::place`), or the route is dropped unused.
    _holds: Holds,
}

/// A set of routes over one schema.
///
/// ```
/// use std::sync::Arc;
/// use atc_router::{Context, Router, Schema, Type};
/// use uuid::Uuid;
///
/// let mut schema = Schema::new();
/// schema.add_field("http.host", Type::String).unwrap();
/// schema.add_field("http.path", Type::String).unwrap();
/// let schema = Arc::new(schema);
///
/// let mut router = Router::new(schema.clone());
/// let api = Uuid::from_u128(1);
/// router.add(api, 10, r#"http.host == "a.com" && http.path ~ "^/users/(?<id>\\d+)$""#).unwrap();
///
/// let mut ctx = Context::new(schema);
/// ctx.add_value("http.host", "a.com").unwrap();
/// ctx.add_value("http.path", "/users/42").unwrap();
/// assert!(router.execute(&mut ctx));
/// let m = ctx.result().unwrap();
/// assert_eq!(m.id(), api);
/// assert_eq!(m.matched_value("http.path").unwrap().to_string(), "/users/42");
/// assert_eq!(m.captures_map()["id"], "42");
/// ```
#[derive(Debug)]
pub struct Router {
    schema: Arc<Schema>,
    limits: Limits,
    /// Which slots are live, with what id, priority and text, densely: see [`Catalog`].
    catalog: Catalog,
    /// The program of the route in each slot, kept apart from the rest of the route so that a
    /// request reads only these (see [`crate::program`]), in one arena.
    programs: ProgramArena,
    free: Vec<u32>,
    /// Route id to slot (the ids themselves are the catalog's).
    ids: IdMap,
    index: Index,
    /// The index in the form requests walk once the table is large (see [`flat_index`]):
    /// written from `index`, with the routes changed since in an overlay.
    flat: Option<Box<FlatIndex>>,
    /// When to write `flat`: from how many routes, and after how many changes at least.
    flat_policy: FlatPolicy,
    /// The threads a sync that builds a fresh table may use ([`Router::set_build_threads`]).
    build_threads: BuildThreads,
    regexes: RegexCache,
    field_use: HashMap<FieldId, usize>,
    /// The fields of each route and of the key and fallback sets (see [`crate::needs`]).
    needs: Needs,
    /// Bumped by every change, so that a plan prepared before a change is not applied after it.
    version: u64,
    /// Unique among the routers of the process: with `version`, names the table a context's
    /// cached candidates were found in.
    uid: u64,
    /// Set while the router's structures are being changed, cleared when the change is
    /// complete: still set afterwards only if a panic interrupted a change (see
    /// [`Router::is_broken`]).
    broken: bool,
    /// For a router being built whole (a sync's rebuild): the routes placed so far, whose
    /// index is built at once when all are in (every split then chosen from all its routes).
    pending_index: Option<Vec<(crate::index::Entry, Vec<Requirement>)>>,
    /// What the router counts for its operators ([`Router::stats`]): boxed, so that a table
    /// replacing this one takes them over with a pointer swap.
    stats: Box<stats::Counters>,
    /// Routing order and resolved trees, for the reference evaluator only (see
    /// [`reference_view`]).
    reference: OnceLock<Box<ReferenceView>>,
}

/// The requirements of the routes a router holds, from their programs (for the index, when it
/// splits a leaf).
struct Programs<'a>(&'a ProgramArena);

impl Requirements for Programs<'_> {
    fn of(&self, slot: u32) -> Vec<Requirement> {
        requirements(&self.0.code(slot))
    }

    fn order(&self, slot: u32) -> Order {
        self.0.order(slot)
    }
}

/// The ids of a router's slots, for its id map (the two fields rather than the router, so that
/// the map can read them while it is borrowed mutably).
struct Ids<'a> {
    catalog: &'a Catalog,
    programs: &'a ProgramArena,
}

impl SlotIds for Ids<'_> {
    fn id(&self, slot: u32) -> Option<Uuid> {
        self.catalog
            .is_live(slot as usize)
            .then(|| self.programs.order(slot).id())
    }

    fn live(&self) -> impl Iterator<Item = (u32, Uuid)> {
        self.catalog
            .instances()
            .enumerate()
            .filter_map(|(slot, live)| live.map(|_| slot as u32))
            .map(|slot| (slot, self.programs.order(slot).id()))
    }
}

impl Router {
    /// The table size from which a settled router keeps its index's flat form beside the tree
    /// and requests walk that ([`Router::settle`]); smaller tables walk the tree.
    pub const FLAT_INDEX_MIN_ROUTES: usize = 1024;

    fn slot_ids(&self) -> Ids<'_> {
        Ids {
            catalog: &self.catalog,
            programs: &self.programs,
        }
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        // The router's registrations of the wildcard names its routes use (see `place`).
        for f in self.field_use.keys() {
            self.schema.release(*f);
        }
    }
}

#[cold]
#[inline(never)]
fn broken_router() -> ! {
    panic!(
        "this router is broken: a panic interrupted a change of its routes part-way; \
         sync the full route list to rebuild it"
    )
}

impl Router {
    /// An empty router over `schema`, with the schema's [`Limits`] ([`Schema::limits`]): one
    /// set of limits, given to the schema, governs its routers and contexts alike (this is how
    /// the C ABI and the Lua binding set them).
    pub fn new(schema: Arc<Schema>) -> Router {
        let limits = *schema.limits();
        Router::with_limits(schema, limits)
    }

    /// An empty router over `schema`; every expression added must stay within `limits`, which
    /// override the schema's for this router (the schema's still bound the wildcard names and
    /// the context values).
    pub fn with_limits(schema: Arc<Schema>, limits: Limits) -> Router {
        Router {
            schema,
            limits,
            catalog: Catalog::default(),
            programs: ProgramArena::default(),
            free: Vec::new(),
            ids: IdMap::default(),
            reference: OnceLock::new(),
            index: Index::default(),
            flat: None,
            flat_policy: FlatPolicy::DEFAULT,
            build_threads: BuildThreads::ONE,
            regexes: RegexCache::default(),
            field_use: HashMap::default(),
            needs: Needs::default(),
            version: 0,
            uid: NEXT_INSTANCE.fetch_add(1, AtomicOrdering::Relaxed),
            broken: false,
            pending_index: None,
            stats: Box::default(),
        }
    }

    /// Names this table as it is now: its instance, unique in the process, and its version,
    /// bumped by every change. Equal stamps are the same routes.
    pub(crate) fn stamp(&self) -> (u64, u64) {
        (self.uid, self.version)
    }

    /// The schema every route and context of this router uses.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// The limits every expression added is checked against.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the router holds no route.
    pub fn is_empty(&self) -> bool {
        self.ids.len() == 0
    }

    /// Parses, validates and inserts a route. Nothing changes on error. Counted in
    /// [`Router::stats`] as an update applied, or refused on error.
    pub fn add(&mut self, id: Uuid, priority: u64, expression: &str) -> Result<(), Error> {
        let started = Instant::now();
        let added = self.add_route(id, priority, expression);
        let took = started.elapsed();
        self.stats.update(added.is_ok(), took, took);
        added
    }

    fn add_route(&mut self, id: Uuid, priority: u64, expression: &str) -> Result<(), Error> {
        self.version += 1;
        if self.slot_of(id).is_some() {
            return Err(Error::DuplicateRoute(id));
        }
        let mut regexes = PreparedRegexes::new(&self.regexes);
        let route = self.prepare(id, priority, expression, &mut regexes)?;
        let compiled = regexes.into_compiled();
        self.changing(|r| {
            r.regexes.register_in_use(compiled);
            r.insert(route);
        });
        Ok(())
    }

    /// Runs a change of the router's structures, marking the router broken for as long as it
    /// runs: a panic part-way leaves the mark (see [`Router::is_broken`]).
    fn changing<T>(&mut self, change: impl FnOnce(&mut Router) -> T) -> T {
        self.broken = true;
        let out = change(self);
        self.settle_flat();
        self.broken = false;
        out
    }

    /// Whether a panic interrupted a change of this router part-way (an add, a remove, the
    /// apply of a sync), leaving its structures inconsistent. A broken router refuses to match
    /// ([`Router::execute`] panics, `SharedRouter` and the C ABI return an error) until a sync
    /// rebuilds it from the full route list.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Sets how many threads (1, the default, to [`crate::MAX_BUILD_THREADS`]) a sync that
    /// builds a fresh table ([`Router::sync`] of a list most of which is new, a first load
    /// above all) may use: its own and up to `threads - 1` it starts for the build and joins
    /// before it returns. The table is exactly the one a single thread builds (the same routes,
    /// errors and index; see `docs/performance.md`, "Building on more threads"); only the time
    /// differs, where CPUs are idle. A sync that changes the table route by route, and every
    /// other change, uses one thread. Out of range: an error, nothing changed.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use atc_router::{Router, Schema, Type};
    /// let mut s = Schema::new();
    /// s.add_field("http.path", Type::String).unwrap();
    /// let mut r = Router::new(Arc::new(s));
    /// r.set_build_threads(2).unwrap();
    /// assert!(r.set_build_threads(0).is_err());
    /// assert_eq!(r.build_threads(), 2);
    /// ```
    pub fn set_build_threads(&mut self, threads: usize) -> Result<(), Error> {
        self.build_threads = self.build_threads.with_count(threads)?;
        Ok(())
    }

    /// How many threads a fresh build may use (see [`Router::set_build_threads`]).
    pub fn build_threads(&self) -> usize {
        self.build_threads.count
    }

    /// For tests that need the work of a small table split between threads: entries per piece
    /// of the preparation, and routes a subtree of the index needs to be built on another
    /// thread (both at least 1). The table built is the same whatever they are.
    #[doc(hidden)]
    pub fn set_build_split(&mut self, piece: usize, min_subtree: usize) {
        self.build_threads.piece = piece.max(1);
        self.build_threads.min_subtree = min_subtree.max(1);
    }

    /// The reference evaluator's view of the routes, made on first use (see
    /// [`reference_view`]).
    #[cfg(feature = "diagnostics")]
    fn reference_view(&self) -> &ReferenceView {
        self.reference
            .get_or_init(|| Box::new(ReferenceView::new(self.live_slots().collect())))
    }

    /// Every live slot with its place in routing order, in slot order.
    fn live_slots(&self) -> impl Iterator<Item = (Order, u32)> + '_ {
        self.catalog
            .instances()
            .enumerate()
            .filter_map(|(slot, live)| {
                live.map(|_| (self.programs.order(slot as u32), slot as u32))
            })
    }

    /// The row of the route in `slot`, or `None` for a free slot.
    fn row(&self, slot: u32) -> Option<CatalogRow> {
        let instance = self.catalog.instance(slot as usize)?;
        let order = self.programs.order(slot);
        Some(CatalogRow {
            id: order.id(),
            priority: order.priority(),
            instance,
        })
    }

    /// The row of every slot in slot order (`None` for a free one).
    fn rows(&self) -> impl Iterator<Item = Option<CatalogRow>> + '_ {
        (0..self.catalog.len() as u32).map(|slot| self.row(slot))
    }

    /// Removes a route; `false` when there is none with that id. Counted in
    /// [`Router::stats`] as an update applied, or refused when there was none.
    pub fn remove(&mut self, id: Uuid) -> bool {
        let started = Instant::now();
        self.version += 1;
        let removed = self.changing(|r| match r.take(id, None) {
            Some(route) => {
                r.release(route);
                true
            }
            None => false,
        });
        let took = started.elapsed();
        self.stats.update(removed, took, took);
        removed
    }

    /// The router's counts and the cost of its last update (see [`RouterStats`]). Reads a few
    /// atomics: cheap, but not for every request.
    pub fn stats(&self) -> RouterStats {
        RouterStats {
            routes: self.len(),
            broken: self.broken,
            ..self.stats.read()
        }
    }

    /// Counts a request the caller could not put in a context (invalid UTF-8, too many values:
    /// [`Context::add_value`](crate::Context::add_value) failed), which the router never sees,
    /// in [`RouterStats::bad_requests`]. A gateway calls it where it refuses such a request.
    pub fn count_bad_request(&self) {
        self.stats.bad_request();
    }

    /// Counts, in [`RouterStats::routed`] or [`RouterStats::not_found`], a request of `ctx`
    /// executed for this router elsewhere: from a table image of its table
    /// ([`ImageRouter`](crate::ImageRouter)), as a gateway sharing one table per node does, so
    /// that the counters it reports see every request. One relaxed atomic increment.
    pub fn count_execute(&self, ctx: &Context, found: bool) {
        self.stats.executed(ctx.stripe, found);
    }

    /// Counts an update this router's own calls did not see, in [`RouterStats`]: a table built
    /// by a [`Builder`] and swapped in with [`Router::replace_with`] (`applied`), or a
    /// [`Builder`]'s refused or panicked outcome (not `applied`). `hold`: how long taking the
    /// outcome and swapping held the caller; `build`: the outcome's
    /// [`build_time`](Outcome::build_time). Add, remove, sync and apply count themselves.
    pub fn record_update(&self, applied: bool, hold: Duration, build: Duration) {
        self.stats.update(applied, hold, build);
    }

    /// Puts `next` (a table a [`Builder`] built) in this router's place and returns the table it
    /// replaces, in O(1). The counts of [`Router::stats`] stay with `self`: they count what the
    /// router as its owner holds it did, whatever table served (`std::mem::replace` would
    /// swap them out with the table). So does [`Router::set_build_threads`]'s setting.
    pub fn replace_with(&mut self, next: Router) -> Router {
        let mut old = std::mem::replace(self, next);
        std::mem::swap(&mut self.stats, &mut old.stats);
        // So does the caller's setting for its next fresh builds.
        std::mem::swap(&mut self.build_threads, &mut old.build_threads);
        old
    }

    /// The route with this id.
    pub fn get(&self, id: Uuid) -> Option<Route<'_>> {
        self.slot_of(id).map(|s| self.route(s))
    }

    fn route(&self, slot: u32) -> Route<'_> {
        Route {
            router: self,
            slot,
            row: self.row(slot).expect("indexes point at live slots"),
        }
    }

    /// Routes in routing order (sorted by this call: the router keeps no order of its own,
    /// the index orders what a request meets).
    pub fn routes(&self) -> impl Iterator<Item = Route<'_>> {
        self.slots_in_order().map(|(_, s)| self.route(s))
    }

    /// The slot of the route with this id (for the linter, which works on slots).
    pub(crate) fn slot_of(&self, id: Uuid) -> Option<u32> {
        self.ids.get(id, &self.slot_ids())
    }

    /// The program of the route in a live slot.
    pub(crate) fn program(&self, slot: u32) -> Code<'_> {
        self.programs.code(slot)
    }

    /// The place in routing order of the route in a live slot.
    pub(crate) fn order_of(&self, slot: u32) -> Order {
        self.programs.order(slot)
    }

    /// The text of the route in a live slot.
    pub(crate) fn text_of(&self, slot: u32) -> &str {
        self.catalog.text(slot as usize)
    }

    /// Live slots in routing order, with their place in it.
    pub(crate) fn slots_in_order(&self) -> impl Iterator<Item = (Order, u32)> {
        let mut slots: Vec<(Order, u32)> = self.live_slots().collect();
        slots.sort_unstable_by_key(|(o, _)| *o);
        slots.into_iter()
    }

    /// Fields used by at least one route, sorted by name.
    pub fn fields(&self) -> Vec<String> {
        let mut f: Vec<String> = self
            .field_use
            .keys()
            .filter_map(|id| self.schema.field(*id).map(|f| f.0))
            .collect();
        f.sort();
        f
    }

    /// Number of distinct compiled regexes held (after waiting for the long-text engines being
    /// built in the background, whose thread holds a regex for a moment).
    #[cfg(feature = "diagnostics")]
    pub fn regex_count(&self) -> usize {
        crate::compile::regex_long_text::settle();
        self.regexes.len()
    }

    /// Number of routes without any requirement the index can use (every request considers
    /// them).
    #[cfg(feature = "diagnostics")]
    pub fn unindexed_count(&self) -> usize {
        self.index.unindexed()
    }

    /// Checks an expression against a schema without adding it (regexes are compiled to check
    /// them, then dropped), within the schema's limits: it accepts exactly what
    /// [`Router::new`]'s routers accept. Returns the fields it uses, in order of first use.
    pub fn validate(schema: &Schema, expression: &str) -> Result<Vec<String>, Error> {
        Router::validate_with_limits(schema, expression, schema.limits())
    }

    /// [`Router::validate`] with other limits than the schema's (those of a router made with
    /// [`Router::with_limits`]).
    pub fn validate_with_limits(
        schema: &Schema,
        expression: &str,
        limits: &Limits,
    ) -> Result<Vec<String>, Error> {
        let parsed = parse_with_limits(expression, limits)?;
        let fields = validate(expression, &parsed, schema)?;
        let cache = RegexCache::default();
        resolve(
            expression,
            &parsed,
            Fields::Peek(schema),
            limits,
            &mut PreparedRegexes::new(&cache),
        )?;
        Ok(fields)
    }
}
