//! Routes in priority order, and matching a request against them (spec §7).
//!
//! Invariants:
//! - Routing order is priority descending, then id bytes descending (`index::Order`); ids are
//!   unique.
//! - Every route is in exactly one place of the `Index` (an index bucket, or the fallback list),
//!   put there by [`Router::add`] and taken out by [`Router::remove`]: updates are incremental,
//!   nothing is rebuilt.
//! - A live slot has a catalog row (id, priority, text) and a program; its resolved tree is not
//!   kept, but rebuilt from the text when needed (reference evaluation, taking the route out).
//!   Resolving a route's own text again gives the tree it was added with: the schema and
//!   limits do not change, and its regexes are in the cache for as long as the route lives.
//! - Regexes with the same source are compiled once per router and freed with the last route
//!   that uses them.
//! - An execute leaves either the first matching route's result in the context or no result.

pub(crate) mod needs;
pub(crate) mod shared;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::OnceLock;

// Fx hashing for ids and field ids: keys come from the configuration, never from requests, and
// SipHash was a visible share of inserting a route.
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;

use uuid::Uuid;

use crate::compile::eval as matcher;
use crate::compile::program::Program;
use crate::compile::regex::{Overlay, RegexCache};
use crate::compile::resolve::{resolve, Fields, Node};
use crate::error::Error;
use crate::index::{requirements, Index, LevelBufs, Order, Requirement, Requirements};
use crate::language::parse_with_limits;
use crate::language::Expr;
use crate::limits::Limits;
use crate::reference;
use crate::router::needs::{FieldMask, Needs};
use crate::schema::context::Context;
use crate::schema::names::{FieldId, Holds, Schema};
use crate::schema::validate::validate;

/// At most this many candidates, and as many routes of the fallback list, are warmed by
/// [`Router::needed_fields`]: an execute stops at the first route that matches, and on a table
/// with long lists, loading programs it never reaches would cost more than it saves.
const WARM_MAX: usize = 16;

/// Buffers of the indexed matcher, reused across requests.
#[derive(Debug, Default)]
struct Scratch {
    candidates: Vec<crate::index::Entry>,
    lowered: String,
    /// The index lookup's buffers, one per level of its tree.
    levels: Vec<LevelBufs>,
}

thread_local! {
    /// The matcher's buffers, one set per thread rather than one per context: with many
    /// contexts in use (a benchmark rotating 256 requests, a server interleaving connections)
    /// a context's own buffers were a cache line per request that was rarely in cache, and
    /// each context carried them; the thread's stay in cache. Taken out while in use.
    static SCRATCH: std::cell::Cell<Option<Scratch>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with the thread's buffers; with fresh ones when they are in use (an execute nested
/// in another: they then allocate as they grow) or the thread is shutting down.
#[inline]
fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    let mut scratch = SCRATCH
        .try_with(|s| s.take())
        .ok()
        .flatten()
        .unwrap_or_default();
    let out = f(&mut scratch);
    // Ignoring the error: a thread shutting down has no use for the buffers.
    let _ = SCRATCH.try_with(|s| s.set(Some(scratch)));
    out
}

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

/// A route parsed, validated and compiled, not yet in the router.
#[derive(Debug)]
struct Prepared {
    id: Uuid,
    priority: u64,
    instance: u64,
    node: Node,
    source: Box<str>,
    program: Program,
    /// The wildcard names the route uses stay registered until a router takes them over
    /// (`Router::place`), or the route is dropped unused.
    _holds: Holds,
}

/// One route of a router, as [`Router::get`] and [`Router::routes`] show it.
#[derive(Debug, Clone, Copy)]
pub struct Route<'a> {
    router: &'a Router,
    slot: u32,
    row: CatalogRow,
}

impl<'a> Route<'a> {
    pub fn id(&self) -> Uuid {
        self.row.id
    }

    pub fn priority(&self) -> u64 {
        self.row.priority
    }

    /// The expression text as it was added.
    pub fn source(&self) -> &'a str {
        self.router.catalog.text(self.slot as usize)
    }

    /// The syntax tree (parsed again from the source: routers keep only the resolved form).
    pub fn expr(&self) -> Expr {
        // The router's own limits: the ones the source passed when it was added.
        parse_with_limits(self.source(), &self.router.limits)
            .expect("a route's source parsed with these limits when it was added")
            .expr
    }

    /// Fields the expression uses, in order of first use.
    pub fn field_ids(&self) -> Vec<FieldId> {
        fields(self.router.tree(self.slot))
    }

    /// Whether the index can rule the route out for some requests (`false`: every request
    /// considers it).
    pub fn is_indexed(&self) -> bool {
        !requirements(&self.router.programs[self.slot as usize].view()).is_empty()
    }

    /// Identifies this version of the route: the same while syncs leave the route unchanged
    /// (also when a sync rebuilds the table), different once it is changed or removed and
    /// added again. Unique among the routes of every router of the process.
    pub fn instance(&self) -> u64 {
        self.row.instance
    }
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
    /// The resolved tree of a slot's route, once something needed it (see [`Router::tree`]).
    trees: Vec<OnceLock<Box<Node>>>,
    /// The program of the route in each slot, kept apart from the rest of the route so that a
    /// request reads only these (see [`crate::program`]).
    programs: Vec<Program>,
    free: Vec<u32>,
    ids: HashMap<Uuid, u32>,
    order: BTreeMap<Order, u32>,
    index: Index,
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
}

/// The requirements of the routes a router holds, from their programs (for the index, when it
/// splits a leaf).
struct Programs<'a>(&'a [Program]);

impl Requirements for Programs<'_> {
    fn of(&self, slot: u32) -> Vec<Requirement> {
        requirements(&self.0[slot as usize].view())
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

/// Id, priority and expression text of every live slot, stored densely in slot order, so that
/// a sync of an unchanged list reads two sequential arrays instead of chasing one pointer per
/// route into the heap (at 100,000 routes those cache misses were most of its cost).
///
/// Invariant: `rows[s]` describes the route in slot `s` (`None` for a free slot) and its text is
/// `texts[start..start + len]`, byte for byte the route's source. Texts of removed routes stay in
/// `texts` as garbage until it outweighs the live text, then the arena is rewritten in slot
/// order.
#[derive(Debug, Default)]
struct Catalog {
    rows: Vec<Option<CatalogRow>>,
    texts: String,
    garbage: usize,
}

#[derive(Debug, Clone, Copy)]
struct CatalogRow {
    id: Uuid,
    priority: u64,
    instance: u64,
    start: usize,
    len: usize,
}

impl Catalog {
    fn set(&mut self, slot: u32, id: Uuid, priority: u64, instance: u64, text: &str) {
        let slot = slot as usize;
        if self.rows.len() <= slot {
            self.rows.resize(slot + 1, None);
        }
        if self.garbage > 4096 && self.garbage > self.texts.len() / 2 {
            self.compact();
        }
        let start = self.texts.len();
        self.texts.push_str(text);
        self.rows[slot] = Some(CatalogRow {
            id,
            priority,
            instance,
            start,
            len: text.len(),
        });
    }

    fn clear(&mut self, slot: u32) {
        if let Some(row) = self.rows.get_mut(slot as usize).and_then(Option::take) {
            self.garbage += row.len;
        }
    }

    fn compact(&mut self) {
        let mut texts = String::with_capacity(self.texts.len() - self.garbage);
        for row in self.rows.iter_mut().flatten() {
            let start = texts.len();
            texts.push_str(&self.texts[row.start..row.start + row.len]);
            row.start = start;
        }
        self.texts = texts;
        self.garbage = 0;
    }

    fn text(&self, slot: usize) -> &str {
        self.rows[slot].map_or("", |r| &self.texts[r.start..r.start + r.len])
    }

    fn id(&self, slot: usize) -> Option<Uuid> {
        self.row(slot).map(|r| r.id)
    }

    fn row(&self, slot: usize) -> Option<CatalogRow> {
        self.rows.get(slot).copied().flatten()
    }

    /// Whether slot `slot` holds a route with this priority and expression text.
    fn same(&self, slot: u32, priority: u64, text: &str) -> bool {
        self.rows[slot as usize].is_some_and(|r| {
            r.priority == priority
                && self.texts.as_bytes()[r.start..r.start + r.len] == *text.as_bytes()
        })
    }
}

/// One route of a desired route list (see [`Router::sync`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSpec<'a> {
    pub id: Uuid,
    pub priority: u64,
    pub expression: &'a str,
}

/// What [`Router::sync`] does with invalid routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Any invalid route: change nothing, report them all.
    #[default]
    AllOrNothing,
    /// Apply the valid routes, report the invalid ones.
    ApplyValid,
}

/// What a sync did.
#[derive(Debug, Default)]
pub struct SyncReport {
    pub added: usize,
    pub removed: usize,
    pub changed: usize,
    pub unchanged: usize,
    /// Routes left out ([`SyncMode::ApplyValid`]), with why.
    pub errors: Vec<(Uuid, Error)>,
    /// The plan was prepared before another change and was not applied.
    pub stale: bool,
}

/// Every invalid route of a refused sync.
#[derive(Debug)]
pub struct SyncError {
    pub errors: Vec<(Uuid, Error)>,
}

impl std::fmt::Display for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} invalid route(s), nothing changed", self.errors.len())?;
        for (id, e) in &self.errors {
            write!(f, "\nroute {id}: {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SyncError {}

/// What a desired route is to the router (first pass of [`Router::prepare_sync`]).
#[derive(Debug, Clone, Copy)]
enum Status {
    Duplicate,
    Unchanged(u32),
    Changed(u32),
    Added,
}

/// A change prepared by [`Router::prepare_sync`], applied by [`Router::apply`].
#[derive(Debug, Default)]
pub struct SyncPlan {
    version: u64,
    /// Routes to take out (removed routes and the old versions of changed ones), with their
    /// trees resolved while preparing, so that applying parses nothing.
    remove: Vec<(Uuid, Box<Node>)>,
    insert: Vec<Prepared>,
    /// Set instead of `remove` and `insert` when most routes change: the whole new router.
    rebuilt: Option<Box<Router>>,
    regexes: HashMap<String, Arc<crate::compile::regex::CompiledRegex>>,
    report: SyncReport,
}

impl SyncPlan {
    /// What applying the plan will do.
    pub fn report(&self) -> &SyncReport {
        &self.report
    }
}

impl Router {
    pub fn new(schema: Arc<Schema>) -> Router {
        Router::with_limits(schema, Limits::default())
    }

    pub fn with_limits(schema: Arc<Schema>, limits: Limits) -> Router {
        Router {
            schema,
            limits,
            catalog: Catalog::default(),
            trees: Vec::new(),
            programs: Vec::new(),
            free: Vec::new(),
            ids: HashMap::default(),
            order: BTreeMap::new(),
            index: Index::default(),
            regexes: RegexCache::default(),
            field_use: HashMap::default(),
            needs: Needs::default(),
            version: 0,
            uid: NEXT_INSTANCE.fetch_add(1, AtomicOrdering::Relaxed),
            broken: false,
            pending_index: None,
        }
    }

    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// Sizes the per-route structures of an empty router for `routes`, as a fresh router
    /// built for a sync knows its size: they then never grow (and copy themselves) on the way.
    fn reserve(&mut self, routes: &[RouteSpec<'_>]) {
        let n = routes.len();
        self.trees.reserve(n);
        self.programs.reserve(n);
        self.ids.reserve(n);
        self.catalog.rows.reserve(n);
        let text: usize = routes.iter().map(|r| r.expression.len()).sum();
        self.catalog.texts.reserve(text);
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Parses, validates and inserts a route. Nothing changes on error.
    pub fn add(&mut self, id: Uuid, priority: u64, expression: &str) -> Result<(), Error> {
        self.version += 1;
        if self.ids.contains_key(&id) {
            return Err(Error::DuplicateRoute(id));
        }
        let mut overlay = Overlay::new(&self.regexes);
        let route = self.prepare(id, priority, expression, &mut overlay)?;
        let compiled = overlay.into_new();
        self.changing(|r| {
            r.regexes.absorb(compiled);
            r.insert(route);
        });
        Ok(())
    }

    /// Runs a change of the router's structures, marking the router broken for as long as it
    /// runs: a panic part-way leaves the mark (see [`Router::is_broken`]).
    fn changing<T>(&mut self, change: impl FnOnce(&mut Router) -> T) -> T {
        self.broken = true;
        let out = change(self);
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

    /// Parses, validates and resolves a route without changing the router; new regexes go to
    /// the overlay.
    fn prepare(
        &self,
        id: Uuid,
        priority: u64,
        expression: &str,
        overlay: &mut Overlay<'_>,
    ) -> Result<Prepared, Error> {
        let parsed = parse_with_limits(expression, &self.limits)?;
        validate(expression, &parsed, &self.schema)?;
        let mut holds = Holds::new(self.schema.clone());
        let node = resolve(
            expression,
            &parsed,
            Fields::Acquire(&mut holds),
            &self.limits,
            overlay,
        )?;
        Ok(Prepared {
            id,
            priority,
            instance: NEXT_INSTANCE.fetch_add(1, AtomicOrdering::Relaxed),
            program: Program::compile(&node),
            source: expression.into(),
            node,
            _holds: holds,
        })
    }

    /// The resolved tree of the route in `slot`, resolved again from its text the first time.
    fn tree(&self, slot: u32) -> &Node {
        self.trees[slot as usize].get_or_init(|| self.resolve_again(slot))
    }

    /// The tree of the route in `slot` built anew from its text (see the module invariants
    /// for why this cannot fail).
    fn resolve_again(&self, slot: u32) -> Box<Node> {
        let text = self.catalog.text(slot as usize);
        let parsed = parse_with_limits(text, &self.limits)
            .expect("a route's text parsed with these limits when it was added");
        let node = resolve(
            text,
            &parsed,
            Fields::Peek(&self.schema),
            &self.limits,
            &mut Overlay::new(&self.regexes),
        )
        .expect("a route's text resolved against this schema when it was added");
        Box::new(node)
    }

    /// Puts a prepared route in its slot, the order map and its index.
    fn insert(&mut self, p: Prepared) {
        let (order, slot) = self.place(p);
        self.order.insert(order, slot);
    }

    /// [`Router::insert`] but for the order map, whose entry it returns: a fresh router built
    /// for a sync collects them and builds the map once, from a sorted list, where one insert
    /// per route was a search through nodes no other insert touched lately.
    fn place(&mut self, p: Prepared) -> (Order, u32) {
        let fields = fields(&p.node);
        for f in &fields {
            let uses = self.field_use.entry(*f).or_insert(0);
            if *uses == 0 {
                // The router's own registration, held while any of its routes uses the name.
                self.schema.retain(*f);
            }
            *uses += 1;
        }
        crate::failpoint::hit();
        let order = Order::new(p.priority, p.id);
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.trees.push(OnceLock::new());
                self.programs.push(Program::default());
                (self.programs.len() - 1) as u32
            }
        };
        self.programs[slot as usize] = p.program;
        self.needs.insert(slot, &fields);
        let reqs = requirements(&self.programs[slot as usize].view());
        match &mut self.pending_index {
            Some(pending) => pending.push(((order, slot), reqs)),
            None => self
                .index
                .insert((order, slot), &reqs, &Programs(&self.programs)),
        }
        self.catalog
            .set(slot, p.id, p.priority, p.instance, &p.source);
        self.ids.insert(p.id, slot);
        (order, slot)
    }

    /// Takes a route out of every structure and returns its tree (`tree`, if the caller
    /// resolved it already); its regexes are still cached (see `release`).
    fn take(&mut self, id: Uuid, tree: Option<Box<Node>>) -> Option<Box<Node>> {
        let slot = *self.ids.get(&id)?;
        let row = self
            .catalog
            .row(slot as usize)
            .expect("ids point at live slots");
        let tree = match (tree, self.trees[slot as usize].take()) {
            (Some(t), _) | (None, Some(t)) => t,
            (None, None) => self.resolve_again(slot),
        };
        let order = Order::new(row.priority, row.id);
        let reqs = requirements(&self.programs[slot as usize].view());
        self.index.remove((order, slot), &reqs);
        self.ids.remove(&id);
        self.free.push(slot);
        self.catalog.clear(slot);
        self.programs[slot as usize] = Program::default();
        self.needs.remove(slot);
        self.order.remove(&order);
        for f in fields(&tree) {
            if let Some(n) = self.field_use.get_mut(&f) {
                *n -= 1;
                if *n == 0 {
                    self.field_use.remove(&f);
                    self.schema.release(f);
                }
            }
        }
        crate::failpoint::hit();
        Some(tree)
    }

    /// Drops a route taken out, and the regexes no other route uses.
    fn release(&mut self, tree: Box<Node>) {
        let mut sources = Vec::new();
        tree.regex_sources(&mut sources);
        drop(tree);
        for s in &sources {
            self.regexes.release(s);
        }
    }

    /// Removes a route; `false` when there is none with that id.
    pub fn remove(&mut self, id: Uuid) -> bool {
        self.version += 1;
        self.changing(|r| match r.take(id, None) {
            Some(route) => {
                r.release(route);
                true
            }
            None => false,
        })
    }

    /// Makes the router hold exactly `desired`, touching only what differs: see
    /// [`Router::prepare_sync`] (what is compared, the modes) and [`Router::apply`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use atc_router::{Router, RouteSpec, Schema, SyncMode, Type, Uuid};
    ///
    /// let mut schema = Schema::new();
    /// schema.add_field("http.path", Type::String).unwrap();
    /// let mut router = Router::new(Arc::new(schema));
    /// let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
    /// router.add(a, 1, r#"http.path ^= "/a""#).unwrap();
    ///
    /// let desired = [
    ///     RouteSpec { id: a, priority: 1, expression: r#"http.path ^= "/a""# },
    ///     RouteSpec { id: b, priority: 2, expression: r#"http.path ^= "/b""# },
    /// ];
    /// let report = router.sync(&desired, SyncMode::AllOrNothing).unwrap();
    /// assert_eq!((report.added, report.unchanged), (1, 1));
    ///
    /// // One bad route: nothing changes, and every bad route is reported.
    /// let bad = [RouteSpec { id: a, priority: 1, expression: "http.path ==" }];
    /// let err = router.sync(&bad, SyncMode::AllOrNothing).unwrap_err();
    /// assert_eq!(err.errors.len(), 1);
    /// assert_eq!(router.len(), 2);
    /// ```
    pub fn sync(
        &mut self,
        desired: &[RouteSpec<'_>],
        mode: SyncMode,
    ) -> Result<SyncReport, SyncError> {
        let plan = self.prepare_sync(desired, mode)?;
        Ok(self.apply(plan))
    }

    /// Computes what it takes to make the router hold exactly `desired`, and prepares it
    /// (parses, validates, compiles) without changing the router, so that matching can go on
    /// meanwhile (see [`crate::SharedRouter`]).
    ///
    /// A route whose id, priority and expression text are all the same as now is unchanged and
    /// is not parsed again. A known id with another priority or text is changed; an unknown id
    /// is added; an id missing from `desired` is removed.
    ///
    /// A [broken](Router::is_broken) router is rebuilt from `desired` as a whole: every route of
    /// the list counts as added, every route of the broken table as removed.
    ///
    /// Invalid routes (and ids repeated in `desired`): with [`SyncMode::AllOrNothing`] the plan
    /// is refused and the error lists every one of them; with [`SyncMode::ApplyValid`] they are
    /// left out and listed in [`SyncReport::errors`], and a known route whose new version is
    /// invalid keeps its current version (serving the old route beats dropping it).
    pub fn prepare_sync(
        &self,
        desired: &[RouteSpec<'_>],
        mode: SyncMode,
    ) -> Result<SyncPlan, SyncError> {
        // First pass, no parsing: what each desired route is to the router.
        let mut seen = vec![false; self.catalog.rows.len()];
        let mut new_ids: HashSet<Uuid> = HashSet::default();
        let mut status = Vec::with_capacity(desired.len());
        let mut plan = SyncPlan::default();
        for (i, spec) in desired.iter().enumerate() {
            // A list sent again in the same order meets its routes in slot order: try slot `i`
            // before the id map, turning random memory accesses into a sequential scan.
            let current = match self.catalog.id(i) {
                // A broken router's structures cannot be trusted: every route is built anew.
                _ if self.broken => None,
                Some(id) if id == spec.id => Some(i as u32),
                _ => self.ids.get(&spec.id).copied(),
            };
            let duplicate = match current {
                Some(slot) => std::mem::replace(&mut seen[slot as usize], true),
                None => !new_ids.insert(spec.id),
            };
            status.push(match current {
                _ if duplicate => Status::Duplicate,
                Some(slot) if self.catalog.same(slot, spec.priority, spec.expression) => {
                    plan.report.unchanged += 1;
                    Status::Unchanged(slot)
                }
                Some(slot) => Status::Changed(slot),
                None => Status::Added,
            });
        }
        let changed = status
            .iter()
            .filter(|s| matches!(s, Status::Changed(_)))
            .count();
        let removed = seen
            .iter()
            .zip(&self.catalog.rows)
            .filter(|(seen, r)| r.is_some() && !**seen)
            .count();
        // When most routes go or change, building the whole desired list into a fresh router
        // costs what a build does, while taking routes out one index entry at a time and
        // putting their new versions in would cost more (and touch every structure twice).
        let rebuild = self.broken || (changed + removed) * 2 > self.len();
        let mut errors = Vec::new();
        let mut overlay = match rebuild {
            true => Overlay::takeover(&self.regexes),
            false => Overlay::new(&self.regexes),
        };
        let mut fresh = rebuild.then(|| {
            let mut f = Router::with_limits(self.schema.clone(), self.limits);
            f.reserve(desired);
            f.pending_index = Some(Vec::with_capacity(desired.len()));
            f
        });
        // The fresh router's order map, built once all its routes are placed.
        let mut orders = Vec::with_capacity(if rebuild { desired.len() } else { 0 });
        // A route kept as it is, into a fresh router: parsed again, as the fresh router holds
        // its own copy of every route, but the same version (`Route::instance`).
        let copy = |slot: u32, overlay: &mut Overlay<'_>| -> Option<Prepared> {
            let row = self.catalog.row(slot as usize)?;
            let text = self.catalog.text(slot as usize);
            let mut p = self.prepare(row.id, row.priority, text, overlay).ok()?;
            p.instance = row.instance;
            Some(p)
        };
        for (spec, st) in desired.iter().zip(&status) {
            let expression = match (*st, &mut fresh) {
                (Status::Duplicate, _) => {
                    errors.push((spec.id, Error::DuplicateRoute(spec.id)));
                    continue;
                }
                (Status::Unchanged(slot), Some(f)) => {
                    orders.push(
                        f.place(copy(slot, &mut overlay).expect("a live route prepares again")),
                    );
                    continue;
                }
                (Status::Unchanged(_), None) => continue,
                (Status::Changed(_) | Status::Added, _) => spec.expression,
            };
            match self.prepare(spec.id, spec.priority, expression, &mut overlay) {
                Ok(route) => {
                    match *st {
                        Status::Changed(slot) => {
                            plan.report.changed += 1;
                            if fresh.is_none() {
                                plan.remove.push((spec.id, self.resolve_again(slot)));
                            }
                        }
                        Status::Added => plan.report.added += 1,
                        _ => {}
                    }
                    match &mut fresh {
                        Some(f) => orders.push(f.place(route)),
                        None => plan.insert.push(route),
                    }
                }
                Err(e) => {
                    errors.push((spec.id, e));
                    // Apply-valid keeps a known route's current version when its new one is
                    // invalid; a fresh router has to be given that version too.
                    if let (Status::Changed(slot), Some(f)) = (*st, &mut fresh) {
                        if let Some(old) = copy(slot, &mut overlay) {
                            orders.push(f.place(old));
                        }
                    }
                }
            }
        }
        if !errors.is_empty() && mode == SyncMode::AllOrNothing {
            return Err(SyncError { errors });
        }
        for (slot, row) in self.catalog.rows.iter().enumerate() {
            if let (Some(row), false) = (row, seen[slot]) {
                plan.report.removed += 1;
                if fresh.is_none() {
                    plan.remove.push((row.id, self.resolve_again(slot as u32)));
                }
            }
        }
        plan.report.errors = errors;
        match fresh {
            Some(mut f) => {
                f.order = orders.into_iter().collect();
                f.index = Index::build(f.pending_index.take().unwrap_or_default());
                // Every regex the fresh routes hold, compiled now or taken over from this router.
                f.regexes.absorb(overlay.into_new());
                plan.rebuilt = Some(Box::new(f));
            }
            None => plan.regexes = overlay.into_new(),
        }
        plan.version = self.version;
        Ok(plan)
    }

    /// Applies a prepared plan: only index updates, no parsing. Returns what was done.
    ///
    /// A plan prepared before another change of this router is refused (nothing is applied, and
    /// the report says `stale`): it was computed against routes that are no longer there.
    pub fn apply(&mut self, plan: SyncPlan) -> SyncReport {
        let (report, replaced) = self.apply_keeping_old(plan);
        drop(replaced);
        report
    }

    /// [`Router::apply`], handing back the router a rebuild replaced, so that a caller holding
    /// a lock can drop it after releasing the lock.
    pub(crate) fn apply_keeping_old(&mut self, plan: SyncPlan) -> (SyncReport, Option<Router>) {
        let SyncPlan {
            version,
            remove,
            insert,
            regexes,
            rebuilt,
            mut report,
        } = plan;
        if version != self.version {
            report.stale = true;
            return (report, None);
        }
        if let Some(fresh) = rebuilt {
            let version = self.version + 1;
            let old = std::mem::replace(self, *fresh);
            self.version = version;
            return (report, Some(old));
        }
        self.version += 1;
        self.changing(|r| {
            r.regexes.absorb(regexes);
            let mut taken = Vec::with_capacity(remove.len());
            for (id, tree) in remove {
                taken.extend(r.take(id, Some(tree)));
            }
            for route in insert {
                r.insert(route);
            }
            for route in taken {
                r.release(route);
            }
        });
        (report, None)
    }

    pub fn get(&self, id: Uuid) -> Option<Route<'_>> {
        self.ids.get(&id).map(|s| self.route(*s))
    }

    fn route(&self, slot: u32) -> Route<'_> {
        Route {
            router: self,
            slot,
            row: self
                .catalog
                .row(slot as usize)
                .expect("indexes point at live slots"),
        }
    }

    /// Routes in routing order.
    pub fn routes(&self) -> impl Iterator<Item = Route<'_>> {
        self.order.values().map(|s| self.route(*s))
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

    /// Number of distinct compiled regexes held.
    pub fn regex_count(&self) -> usize {
        self.regexes.len()
    }

    /// Number of routes without any requirement the index can use (every request considers
    /// them).
    pub fn unindexed_count(&self) -> usize {
        self.index.unindexed()
    }

    /// Checks an expression against a schema without adding it (regexes are compiled to check
    /// them, then dropped). Returns the fields it uses, in order of first use.
    pub fn validate(schema: &Schema, expression: &str) -> Result<Vec<String>, Error> {
        Router::validate_with_limits(schema, expression, &Limits::default())
    }

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
            &mut Overlay::new(&cache),
        )?;
        Ok(fields)
    }

    /// Finds the first route in routing order whose expression holds, and leaves its result in
    /// the context; returns whether one matched. Only the routes the indexes cannot rule out
    /// are evaluated. A context made from another schema never matches.
    ///
    /// # Panics
    ///
    /// On a [broken](Router::is_broken) router: its structures may not hold every route, so any
    /// answer could be wrong. [`Router::try_execute`] returns an error instead.
    pub fn execute(&self, ctx: &mut Context) -> bool {
        match self.try_execute(ctx) {
            Ok(found) => found,
            Err(Error::Broken) => broken_router(),
            Err(_) => false,
        }
    }

    /// [`Router::execute`], with the cases where it gives no answer as errors:
    /// [`Error::Broken`] for a [broken](Router::is_broken) router, [`Error::SchemaMismatch`]
    /// for a context of another schema. The context's previous result is cleared either way.
    pub fn try_execute(&self, ctx: &mut Context) -> Result<bool, Error> {
        ctx.clear_result();
        if self.broken {
            return Err(Error::Broken);
        }
        if !Arc::ptr_eq(&self.schema, ctx.schema()) {
            return Err(Error::SchemaMismatch);
        }
        let mut w = std::mem::take(&mut ctx.witnesses);
        // The candidates `needed_fields` found for this request, if no key field has changed.
        let cached = ctx.candidates.by == Some((self.uid, self.version))
            && ctx.candidates.added & self.index.key_fields() == 0;
        let mut cache = if cached {
            std::mem::take(&mut ctx.candidates.entries)
        } else {
            Vec::new()
        };
        let found = with_scratch(|scratch| {
            let candidates = if cached {
                &mut cache
            } else {
                let candidates = &mut scratch.candidates;
                candidates.clear();
                self.index.candidates(ctx, &mut scratch.levels, candidates);
                if candidates.len() > 1 {
                    candidates.sort_unstable();
                    candidates.dedup();
                }
                candidates
            };
            for &(order, slot) in candidates.iter() {
                let program = &self.programs[slot as usize];
                if matcher::eval(program, ctx, &mut scratch.lowered, &mut w) {
                    return Some((order.id(), order.priority()));
                }
                w.clear();
            }
            None
        });
        if cached {
            ctx.candidates.entries = cache;
        }
        ctx.witnesses = w;
        ctx.outcome = found;
        Ok(found.is_some())
    }

    /// The fields the indexes look values up in: phase 1 of a two-phase match (see
    /// [`crate::needs`]) adds every value of these before asking [`Router::needed_fields`].
    pub fn key_fields(&self) -> FieldMask {
        self.index.key_fields()
    }

    /// Phase 2 of a two-phase match (see [`crate::needs`]): with every value of the
    /// [key fields](Router::key_fields) in `ctx`, the fields that the routes the request can
    /// still match use. Adding those fields' values and executing gives the result that adding
    /// every field gives. All fields for a context of another schema or a broken router.
    pub fn needed_fields(&self, ctx: &mut Context) -> FieldMask {
        // A broken router's indexes cannot be trusted (and its execute will refuse anyway).
        if self.broken || !Arc::ptr_eq(&self.schema, ctx.schema()) {
            return FieldMask::MAX;
        }
        let mut mask = self.index.key_fields();
        let mut found = std::mem::take(&mut ctx.candidates.entries);
        found.clear();
        with_scratch(|s| self.index.candidates(ctx, &mut s.levels, &mut found));
        found.sort_unstable();
        found.dedup();
        for (i, (_, slot)) in found.iter().enumerate() {
            mask |= self.needs.of(*slot);
            if i < WARM_MAX {
                self.warm(*slot);
            }
        }
        // Kept for the execute that follows (see `Context`'s cached candidates).
        ctx.candidates.entries = found;
        ctx.candidates.by = Some((self.uid, self.version));
        ctx.candidates.added = 0;
        mask
    }

    /// Loads the lines of a route's program that evaluation reads first, so that the execute
    /// following [`Router::needed_fields`] finds them in cache. Between the two calls the
    /// caller reads request fields (a gateway: hundreds of nanoseconds), and here the loads of
    /// all candidates are independent and overlap, where the execute's evaluation, branching
    /// on what it loaded, would wait for one cache miss after another.
    #[inline]
    fn warm(&self, slot: u32) {
        std::hint::black_box(self.programs[slot as usize].touch());
    }

    #[doc(hidden)]
    pub fn index_summary(&self) -> String {
        self.index.summary()
    }

    /// How many routes a request has to consider at most (the index's candidates): the cost
    /// model of [`Router::execute`], for diagnostics and tests.
    pub fn candidate_count(&self, ctx: &mut Context) -> usize {
        with_scratch(|s| {
            s.candidates.clear();
            self.index.candidates(ctx, &mut s.levels, &mut s.candidates);
            s.candidates.sort_unstable();
            s.candidates.dedup();
            s.candidates.len()
        })
    }

    /// The reference evaluator: every route in routing order, plain tree walk. The oracle that
    /// [`Router::execute`] is tested against; same results, linear cost.
    pub fn execute_reference(&self, ctx: &mut Context) -> bool {
        ctx.clear_result();
        if !Arc::ptr_eq(&self.schema, ctx.schema()) {
            return false;
        }
        let mut w = std::mem::take(&mut ctx.witnesses);
        let mut found = None;
        for &slot in self.order.values() {
            if reference::eval(self.tree(slot), ctx, &mut w) {
                let row = self.catalog.row(slot as usize).expect("live slot");
                found = Some((row.id, row.priority));
                break;
            }
            w.clear();
        }
        ctx.witnesses = w;
        ctx.outcome = found;
        found.is_some()
    }
}
