//! Making a router hold exactly a desired route list, touching only what differs.
//!
//! This file is the one statement of a sync's rules, which every caller (the C ABI's
//! `atc_router_sync`, the builder thread, `SharedRouter`) passes its entries through to:
//! - **Ids**: the first entry of the list with an id has it (valid or not, as long as its id
//!   could be read); every later entry with that id is a duplicate and is refused.
//! - **Invalid entries** (an expression that does not parse or validate, a duplicate, an entry
//!   the caller could not read): with [`SyncMode::AllOrNothing`] the list is refused and every
//!   one of them reported; with [`SyncMode::ApplyValid`] the valid entries are applied, an
//!   invalid one whose id the router holds keeps its current version (serving the old route
//!   beats dropping it), and an unknown one is left out.
//!
//! [`Router::prepare_sync`] goes through named steps: [`Router::classify`] (what each entry is
//! to the router, without parsing), [`Classified::rebuild`] (route by route, or a fresh
//! router), [`Router::prepare_entries`] (parse and compile what changed), then the removals and
//! the plan's last touches. Invariant: none of them changes the router; only
//! [`Router::apply`] does, and only with a plan prepared against its current version.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::{Prepared, Router};
use crate::compile::regex_cache::PreparedRegexes;
use crate::compile::resolve::Node;
use crate::error::Error;
use crate::index::Index;

use super::id_map::SlotIds;
pub(crate) use super::sync_entries::Desired;
pub use super::sync_entries::{EntryError, EntryFault, SyncEntry};

/// One route of a desired route list (see [`Router::sync`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSpec<'a> {
    /// The route's id: unique in the list.
    pub id: Uuid,
    /// Its priority.
    pub priority: u64,
    /// Its expression text.
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
    /// Routes new to the router.
    pub added: usize,
    /// Routes taken out.
    pub removed: usize,
    /// Routes whose priority or expression changed.
    pub changed: usize,
    /// Routes left as they were.
    pub unchanged: usize,
    /// Routes left out ([`SyncMode::ApplyValid`]), with why.
    pub errors: Vec<(Uuid, Error)>,
    /// Every invalid entry, by its index in the list (the routes of `errors`, and the
    /// unreadable entries of [`Router::sync_entries`]), in list order.
    pub entry_errors: Vec<EntryError>,
    /// The plan was prepared before another change and was not applied.
    pub stale: bool,
}

/// Every invalid route of a refused sync.
#[derive(Debug)]
pub struct SyncError {
    /// Every invalid route, with why.
    pub errors: Vec<(Uuid, Error)>,
    /// Every invalid entry, by its index in the list (see [`SyncReport::entry_errors`]).
    pub entry_errors: Vec<EntryError>,
}

impl SyncError {
    fn of(entry_errors: Vec<EntryError>) -> SyncError {
        SyncError {
            errors: entry_errors.iter().filter_map(EntryError::by_id).collect(),
            entry_errors,
        }
    }
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

/// Why [`Router::prepare_sync_with`] gave no plan.
#[derive(Debug)]
pub(crate) enum Stopped {
    /// Invalid routes (all or nothing).
    Refused(SyncError),
    /// The plan would build a fresh router, which the caller did not allow; what the list is
    /// to this router, counted before any route is parsed (an invalid route counts as added or
    /// changed).
    Rebuild(SyncReport),
    /// The caller asked it to stop.
    Cancelled,
}

/// What a desired entry is to the router (first pass of [`Router::prepare_sync`]).
#[derive(Debug, Clone, Copy)]
enum Status {
    /// Repeats the id of the entry at this index.
    Duplicate(usize),
    Unchanged(u32),
    Changed(u32),
    Added,
    /// Unreadable, with the slot of the route that keeps its current version, if any.
    Unreadable(Option<u32>),
}

/// The second step's answer: the invalid entries, in list order.
type PreparedEntries = Vec<EntryError>;

/// The first step's answer: what each entry is, and what the list is to the router, counted
/// before any route is parsed.
struct Classified {
    status: Vec<Status>,
    /// Per slot of the router: whether an entry has its id (routes not seen are removed).
    seen: Vec<bool>,
    counts: SyncReport,
}

impl Classified {
    /// Whether the plan builds a fresh router rather than changing this one route by route.
    ///
    /// When most routes go or change, building the whole desired list into a fresh router
    /// costs what a build does, while taking routes out one index entry at a time and putting
    /// their new versions in would cost more (and touch every structure twice). So when most
    /// of the desired list is new (a first load above all): the index is then built once from
    /// every route's requirements, where adding routes one by one would split and re-key its
    /// nodes again each time they grow. A broken router is always rebuilt.
    fn rebuild(&self, router: &Router) -> bool {
        let c = &self.counts;
        router.broken || (c.changed + c.removed) * 2 > router.len() || c.added > router.len()
    }
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
    /// How long preparing it took: part of the update's build time (`RouterStats::last_build`).
    prepared_in: Duration,
}

impl SyncPlan {
    /// What applying the plan will do.
    pub fn report(&self) -> &SyncReport {
        &self.report
    }
}

impl Router {
    /// Sizes the per-route structures of an empty router for `routes`, as a fresh router
    /// built for a sync knows its size: they then never grow (and copy themselves) on the way.
    fn reserve<D: Desired>(&mut self, routes: &[D]) {
        let n = routes.len();
        self.programs.reserve(n);
        let ids = super::Ids {
            catalog: &self.catalog,
            programs: &self.programs,
        };
        self.ids.reserve(n, &ids);
        self.catalog.reserve(n);
        let text: usize = routes
            .iter()
            .map(|r| match r.entry() {
                SyncEntry::Route(spec) => spec.expression.len(),
                SyncEntry::Unreadable { .. } => 0,
            })
            .sum();
        self.catalog.reserve_text(text);
    }

    /// Makes the router hold exactly `desired`, touching only what differs: see
    /// [`Router::prepare_sync`] (what is compared, the modes) and [`Router::apply`]. Counted in
    /// [`Router::stats`](super::Router::stats) as an update applied, or refused (all or nothing
    /// with an invalid route); the whole call is its hold and build time.
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
        self.sync_desired(desired, mode)
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
    /// When most current routes change or go, or most of `desired` is new (a first load), the
    /// plan holds a fresh router built from the whole list, its index built at once from every
    /// route's requirements; applying it swaps the two. Otherwise it holds the changes, which
    /// applying makes one route at a time. The report is the same either way.
    ///
    /// Invalid routes (and ids repeated in `desired`): with [`SyncMode::AllOrNothing`] the plan
    /// is refused and the error lists every one of them; with [`SyncMode::ApplyValid`] they are
    /// left out and listed in [`SyncReport::errors`], and a known route whose new version is
    /// invalid keeps its current version (serving the old route beats dropping it). These are
    /// the rules of the module docs, for every caller.
    pub fn prepare_sync(
        &self,
        desired: &[RouteSpec<'_>],
        mode: SyncMode,
    ) -> Result<SyncPlan, SyncError> {
        match self.prepare_sync_with(desired, mode, &|| false, true) {
            Ok(plan) => Ok(plan),
            Err(Stopped::Refused(e)) => Err(e),
            Err(Stopped::Rebuild(_) | Stopped::Cancelled) => {
                unreachable!("neither a rebuild refused nor a stop asked for")
            }
        }
    }

    /// [`Router::sync`] of entries as a caller read them, some perhaps unreadable (see
    /// [`SyncEntry`]): the rules of the module docs, with every invalid entry reported by its
    /// index in the list ([`SyncReport::entry_errors`], [`SyncError::entry_errors`]). The C
    /// ABI passes its lists through this, so that its rules are the core's.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use atc_router::{EntryFault, RouteSpec, Router, Schema, SyncEntry, SyncMode, Type, Uuid};
    ///
    /// let mut schema = Schema::new();
    /// schema.add_field("http.path", Type::String).unwrap();
    /// let mut router = Router::new(Arc::new(schema));
    /// let a = Uuid::from_u128(1);
    /// router.add(a, 1, r#"http.path ^= "/a""#).unwrap();
    ///
    /// let route = |id, expression| SyncEntry::Route(RouteSpec { id, priority: 1, expression });
    /// let entries = [
    ///     SyncEntry::Unreadable { id: Some(a) },          // `a` keeps its current version
    ///     route(a, r#"http.path ^= "/b""#),                // a duplicate of entry 0
    ///     route(Uuid::from_u128(2), r#"http.path ^= "/c""#),
    /// ];
    /// let report = router.sync_entries(&entries, SyncMode::ApplyValid).unwrap();
    /// assert_eq!((report.added, report.unchanged), (1, 0));
    /// assert_eq!(report.entry_errors[1].fault, EntryFault::Duplicate { first: 0 });
    /// assert_eq!(router.get(a).unwrap().source(), r#"http.path ^= "/a""#);
    /// ```
    pub fn sync_entries(
        &mut self,
        entries: &[SyncEntry<'_>],
        mode: SyncMode,
    ) -> Result<SyncReport, SyncError> {
        self.sync_desired(entries, mode)
    }

    /// [`Router::sync`] of any desired list.
    fn sync_desired<D: Desired>(
        &mut self,
        desired: &[D],
        mode: SyncMode,
    ) -> Result<SyncReport, SyncError> {
        let started = Instant::now();
        let synced = match self.prepare_sync_with(desired, mode, &|| false, true) {
            Ok(plan) => {
                let (report, replaced) = self.apply_uncounted(plan);
                drop(replaced);
                Ok(report)
            }
            Err(Stopped::Refused(e)) => Err(e),
            Err(Stopped::Rebuild(_) | Stopped::Cancelled) => {
                unreachable!("neither a rebuild refused nor a stop asked for")
            }
        };
        let took = started.elapsed();
        let applied = matches!(&synced, Ok(report) if !report.stale);
        self.stats.update(applied, took, took);
        synced
    }

    /// [`Router::prepare_sync`] for the builder thread: it gives up when `stop` says so
    /// (asked between routes) and, unless `rebuild` allows it, before building a fresh
    /// router (the builder then drops its copy first, so that memory never holds three
    /// tables).
    pub(crate) fn prepare_sync_with<D: Desired>(
        &self,
        desired: &[D],
        mode: SyncMode,
        stop: &dyn Fn() -> bool,
        rebuild_allowed: bool,
    ) -> Result<SyncPlan, Stopped> {
        let started = Instant::now();
        let classified = self.classify(desired);
        let rebuild = classified.rebuild(self);
        if rebuild && !rebuild_allowed {
            return Err(Stopped::Rebuild(classified.counts));
        }
        let mut plan = SyncPlan::default();
        plan.report.unchanged = classified.counts.unchanged;
        let mut regexes = match rebuild {
            true => PreparedRegexes::for_new_router(&self.regexes),
            false => PreparedRegexes::new(&self.regexes),
        };
        let mut fresh = rebuild.then(|| self.fresh_router(desired));
        let errors = self.prepare_entries(
            desired,
            &classified.status,
            &mut plan,
            fresh.as_mut(),
            &mut regexes,
            stop,
        )?;
        if !errors.is_empty() && mode == SyncMode::AllOrNothing {
            return Err(Stopped::Refused(SyncError::of(errors)));
        }
        self.take_out_unseen(&classified.seen, &mut plan, fresh.is_none());
        plan.report.errors = errors.iter().filter_map(EntryError::by_id).collect();
        plan.report.entry_errors = errors;
        match fresh {
            Some(mut f) => {
                f.index = Index::build(f.pending_index.take().unwrap_or_default());
                f.settle();
                // Every regex the fresh routes hold, compiled now or taken over from this router.
                f.regexes.register_in_use(regexes.into_compiled());
                plan.rebuilt = Some(Box::new(f));
            }
            None => plan.regexes = regexes.into_compiled(),
        }
        plan.version = self.version;
        plan.prepared_in = started.elapsed();
        Ok(plan)
    }

    /// First step, no parsing: what each entry of `desired` is to the router (the id rule of
    /// the module docs), and what the list is to it, counted (an invalid route counts as added
    /// or changed; an unreadable entry as neither).
    fn classify<D: Desired>(&self, desired: &[D]) -> Classified {
        // Per slot, the index of the first entry with its id; per new id, the same.
        let mut first_at: Vec<usize> = vec![usize::MAX; self.catalog.len()];
        let mut new_ids: HashMap<Uuid, usize> = HashMap::default();
        let mut status = Vec::with_capacity(desired.len());
        let mut counts = SyncReport::default();
        for (i, d) in desired.iter().enumerate() {
            let entry = d.entry();
            let id = match entry {
                SyncEntry::Route(spec) => Some(spec.id),
                SyncEntry::Unreadable { id } => id,
            };
            let Some(id) = id else {
                status.push(Status::Unreadable(None));
                continue;
            };
            // A list sent again in the same order meets its routes in slot order: try slot `i`
            // before the id map, turning random memory accesses into a sequential scan.
            let current = match self.slot_ids().id(i as u32) {
                // A broken router's structures cannot be trusted: every route is built anew.
                _ if self.broken => None,
                Some(slot_id) if slot_id == id => Some(i as u32),
                _ => self.slot_of(id),
            };
            let first = match current {
                Some(slot) => &mut first_at[slot as usize],
                None => new_ids.entry(id).or_insert(usize::MAX),
            };
            if *first != usize::MAX {
                status.push(Status::Duplicate(*first));
                continue;
            }
            *first = i;
            status.push(match (entry, current) {
                (SyncEntry::Unreadable { .. }, slot) => Status::Unreadable(slot),
                (SyncEntry::Route(spec), Some(slot))
                    if self.programs.order(slot).priority() == spec.priority
                        && self.catalog.same_text(slot, spec.expression) =>
                {
                    counts.unchanged += 1;
                    Status::Unchanged(slot)
                }
                (SyncEntry::Route(_), Some(slot)) => {
                    counts.changed += 1;
                    Status::Changed(slot)
                }
                (SyncEntry::Route(_), None) => {
                    counts.added += 1;
                    Status::Added
                }
            });
        }
        let seen: Vec<bool> = first_at.iter().map(|&at| at != usize::MAX).collect();
        counts.removed = seen
            .iter()
            .zip(self.catalog.instances())
            .filter(|(seen, r)| r.is_some() && !**seen)
            .count();
        Classified {
            status,
            seen,
            counts,
        }
    }

    /// An empty router of this one's schema and limits, sized for `desired` and building its
    /// index once at the end, to be the plan's fresh router.
    fn fresh_router<D: Desired>(&self, desired: &[D]) -> Router {
        let mut f = Router::with_limits(self.schema.clone(), self.limits);
        f.flat_policy = self.flat_policy;
        f.reserve(desired);
        f.pending_index = Some(Vec::with_capacity(desired.len()));
        f
    }

    /// Second step: parses and compiles every changed and added route, into the plan or into
    /// the fresh router (which also gets a copy of every route kept as it is, or kept at its
    /// current version); returns the fresh router's order entries and the invalid entries, in
    /// list order.
    fn prepare_entries<D: Desired>(
        &self,
        desired: &[D],
        status: &[Status],
        plan: &mut SyncPlan,
        mut fresh: Option<&mut Router>,
        regexes: &mut PreparedRegexes<'_>,
        stop: &dyn Fn() -> bool,
    ) -> Result<PreparedEntries, Stopped> {
        let mut errors = Vec::new();
        // A route kept as it is, into a fresh router: parsed again, as the fresh router holds
        // its own copy of every route, but the same version (`Route::instance`).
        let copy = |slot: u32, regexes: &mut PreparedRegexes<'_>| -> Option<Prepared> {
            let row = self.row(slot)?;
            let text = self.catalog.text(slot as usize);
            let mut p = self.prepare(row.id, row.priority, text, regexes).ok()?;
            p.instance = row.instance;
            Some(p)
        };
        for (index, (d, st)) in desired.iter().zip(status).enumerate() {
            if index % 64 == 0 && stop() {
                return Err(Stopped::Cancelled);
            }
            let spec = match (d.entry(), *st) {
                (entry, Status::Duplicate(first)) => {
                    let id = match entry {
                        SyncEntry::Route(spec) => Some(spec.id),
                        SyncEntry::Unreadable { id } => id,
                    };
                    let fault = EntryFault::Duplicate { first };
                    errors.push(EntryError { index, id, fault });
                    continue;
                }
                (SyncEntry::Unreadable { id }, Status::Unreadable(slot)) => {
                    let fault = EntryFault::Unreadable;
                    errors.push(EntryError { index, id, fault });
                    // Apply-valid keeps a known route's current version when its new one is
                    // invalid; a fresh router has to be given that version too.
                    if let (Some(slot), Some(f)) = (slot, fresh.as_deref_mut()) {
                        if let Some(old) = copy(slot, regexes) {
                            f.insert(old);
                        }
                    }
                    continue;
                }
                (SyncEntry::Route(_), Status::Unchanged(slot)) => {
                    if let Some(f) = fresh.as_deref_mut() {
                        f.insert(copy(slot, regexes).expect("a live route prepares again"));
                    }
                    continue;
                }
                (SyncEntry::Route(spec), _) => spec,
                (SyncEntry::Unreadable { .. }, _) => unreachable!("classified as unreadable"),
            };
            match self.prepare(spec.id, spec.priority, spec.expression, regexes) {
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
                    match fresh.as_deref_mut() {
                        Some(f) => f.insert(route),
                        None => plan.insert.push(route),
                    }
                }
                Err(e) => {
                    let fault = EntryFault::Invalid(e);
                    errors.push(EntryError {
                        index,
                        id: Some(spec.id),
                        fault,
                    });
                    if let (Status::Changed(slot), Some(f)) = (*st, fresh.as_deref_mut()) {
                        if let Some(old) = copy(slot, regexes) {
                            f.insert(old);
                        }
                    }
                }
            }
        }
        Ok(errors)
    }

    /// Third step: the routes of the router no entry has the id of are removed (taken out of
    /// this router when the plan changes it route by route; simply left behind by a fresh one).
    fn take_out_unseen(&self, seen: &[bool], plan: &mut SyncPlan, route_by_route: bool) {
        for (slot, row) in self.rows().enumerate() {
            if let (Some(row), false) = (row, seen[slot]) {
                plan.report.removed += 1;
                if route_by_route {
                    plan.remove.push((row.id, self.resolve_again(slot as u32)));
                }
            }
        }
    }

    /// Applies a prepared plan: only index updates, no parsing. Returns what was done.
    ///
    /// A plan prepared before another change of this router is refused (nothing is applied, and
    /// the report says `stale`): it was computed against routes that are no longer there.
    ///
    /// Counted in [`Router::stats`](super::Router::stats) as an update applied, or refused when
    /// stale; this call is its hold time, the plan's preparation and this call its build time.
    pub fn apply(&mut self, plan: SyncPlan) -> SyncReport {
        let started = Instant::now();
        let prepared = plan.prepared_in;
        let (report, replaced) = self.apply_uncounted(plan);
        drop(replaced);
        let took = started.elapsed();
        self.stats.update(!report.stale, took, prepared + took);
        report
    }

    /// [`Router::apply`], handing back the router a rebuild replaced, so that a caller holding
    /// a lock can drop it after releasing the lock (which is not counted in the hold time).
    pub(crate) fn apply_keeping_old(&mut self, plan: SyncPlan) -> (SyncReport, Option<Router>) {
        let started = Instant::now();
        let prepared = plan.prepared_in;
        let (report, replaced) = self.apply_uncounted(plan);
        let took = started.elapsed();
        self.stats.update(!report.stale, took, prepared + took);
        (report, replaced)
    }

    /// Applies a plan; the callers count it.
    fn apply_uncounted(&mut self, plan: SyncPlan) -> (SyncReport, Option<Router>) {
        let SyncPlan {
            version,
            remove,
            insert,
            regexes,
            rebuilt,
            mut report,
            prepared_in: _,
        } = plan;
        if version != self.version {
            report.stale = true;
            return (report, None);
        }
        if let Some(fresh) = rebuilt {
            let version = self.version + 1;
            // The counts stay with the router the caller holds.
            let old = self.replace_with(*fresh);
            self.version = version;
            return (report, Some(old));
        }
        self.version += 1;
        self.changing(|r| {
            r.regexes.register_in_use(regexes);
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
}
