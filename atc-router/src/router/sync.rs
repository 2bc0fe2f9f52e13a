//! Making a router hold exactly a desired route list, or applying a list of changes to it,
//! touching only what differs.
//!
//! This file is the one statement of the rules every caller (the C ABI, the builder thread,
//! `SharedRouter`, the `atc-router` command) passes its entries through:
//! - **Ids**: the first entry of the list with an id has it (valid or not, as long as its id
//!   could be read); every later entry with that id is a duplicate and is refused. In a list of
//!   changes a removal counts as an entry with its id.
//! - **Invalid entries** (an expression that does not parse or validate, a duplicate, an entry
//!   the caller could not read): with [`SyncMode::AllOrNothing`] the list is refused and every
//!   one of them reported; with [`SyncMode::ApplyValid`] the valid entries are applied, an
//!   invalid one whose id the router holds keeps its current version (serving the old route
//!   beats dropping it), and an unknown one is left out.
//! - **Whole lists and changes**: a whole list ([`Router::sync`]) is the table wanted, so a
//!   route of the router no entry names is removed; a list of changes ([`Router::update`])
//!   names only what changes, each entry a route to put in (or in place of the route with its
//!   id) or an id to take out (a no-op for an id the router does not hold, so that replaying a
//!   change changes nothing).
//!
//! [`Router::prepare_sync`] goes through named steps: classifying (what each entry is to the
//! router, without parsing, and whether to go route by route or build a fresh router:
//! `sync_classify.rs`), [`Router::prepare_entries`] (parse and compile what changed; on
//! several threads, what of it can be prepared ahead: `sync_ahead.rs`), then the removals and
//! the plan's last touches. Invariant: none of them changes the router; only
//! [`Router::apply`] does, and only with a plan prepared against its current version.

use std::time::Instant;

use super::sync_ahead::Ahead;
use super::sync_classify::{ListKind, Status};
use super::Router;
use crate::compile::regex_cache::{PreparedRegexes, RegexSource};
use crate::error::Error;
use crate::index::Index;
use crate::threads::Helpers;

use super::desired::{Change, Desired, RouteSpec};
use super::entry_errors::{EntryError, EntryFault};
use super::sync_plan::{PreparedEntries, Stopped, SyncError, SyncMode, SyncPlan, SyncReport};

use crate::route_list::{Entry, Item, UnreadKind};

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
            .enumerate()
            .map(|(i, r)| match r.entry(i).item {
                Item::Route { expression, .. } => expression.len(),
                _ => 0,
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
    /// assert!(err.to_string().starts_with("1 invalid route(s), nothing changed; route #1"));
    /// assert_eq!(router.len(), 2);
    /// ```
    pub fn sync(
        &mut self,
        desired: &[RouteSpec<'_>],
        mode: SyncMode,
    ) -> Result<SyncReport, SyncError> {
        self.sync_desired(desired, ListKind::Whole, mode)
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
        let helpers = self.own_threads();
        match self.prepare_sync_with(desired, ListKind::Whole, mode, &|| false, true, helpers) {
            Ok(plan) => Ok(plan),
            Err(Stopped::Refused(e)) => Err(e),
            Err(Stopped::Rebuild(_) | Stopped::Cancelled) => {
                unreachable!("neither a rebuild refused nor a stop asked for")
            }
        }
    }

    /// [`Router::sync`] of entries as a caller read them, some perhaps unreadable (see
    /// [`crate::route_list`]): the rules of the module docs, with every invalid entry reported
    /// at its position in the caller's list. The C ABI passes its lists through this, so that
    /// its rules are the core's. A removal has no place in a whole list: it is an invalid entry.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use atc_router::route_list::{Entry, Item, Position, UnreadKind};
    /// use atc_router::{EntryFault, Router, Schema, SyncMode, Type, Uuid};
    ///
    /// let mut schema = Schema::new();
    /// schema.add_field("http.path", Type::String).unwrap();
    /// let mut router = Router::new(Arc::new(schema));
    /// let a = Uuid::from_u128(1);
    /// router.add(a, 1, r#"http.path ^= "/a""#).unwrap();
    ///
    /// let route = |n, id, expression| Entry {
    ///     at: Position::Item(n),
    ///     item: Item::Route { id, priority: 1, expression },
    /// };
    /// let entries = [
    ///     // `a` keeps its current version
    ///     Entry {
    ///         at: Position::Item(1),
    ///         item: Item::Unreadable { id: Some(a), kind: UnreadKind::NotUtf8, why: "not UTF-8" },
    ///     },
    ///     route(2, a, r#"http.path ^= "/b""#), // a duplicate of entry #1
    ///     route(3, Uuid::from_u128(2), r#"http.path ^= "/c""#),
    /// ];
    /// let report = router.sync_entries(&entries, SyncMode::ApplyValid).unwrap();
    /// assert_eq!((report.added, report.unchanged), (1, 0));
    /// assert_eq!(report.errors[1].fault, EntryFault::Duplicate { first: Position::Item(1) });
    /// assert_eq!(router.get(a).unwrap().source(), r#"http.path ^= "/a""#);
    /// ```
    pub fn sync_entries(
        &mut self,
        entries: &[Entry<'_>],
        mode: SyncMode,
    ) -> Result<SyncReport, SyncError> {
        self.sync_desired(entries, ListKind::Whole, mode)
    }

    /// Applies a list of changes: each route is put in (or in place of the route with its id),
    /// each removal takes out the route with its id (nothing happens for an id the router does
    /// not hold). Everything else stays. The rules for repeated ids and invalid routes are
    /// those of a sync (the module docs); the report counts what the changes did, and as
    /// unchanged the routes they left as they were. Its cost is the size of the changes, never
    /// a rebuild. A [broken](Router::is_broken) router cannot be changed: its list is refused
    /// until a sync of the whole list rebuilds it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use atc_router::{Change, Router, RouteSpec, Schema, SyncMode, Type, Uuid};
    ///
    /// let mut schema = Schema::new();
    /// schema.add_field("http.path", Type::String).unwrap();
    /// let mut router = Router::new(Arc::new(schema));
    /// let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
    /// router.add(a, 1, r#"http.path ^= "/a""#).unwrap();
    ///
    /// let changes = [
    ///     Change::Upsert(RouteSpec { id: b, priority: 2, expression: r#"http.path ^= "/b""# }),
    ///     Change::Remove(a),
    ///     Change::Remove(Uuid::from_u128(3)), // not there: nothing to do
    /// ];
    /// let report = router.update(&changes, SyncMode::AllOrNothing).unwrap();
    /// assert_eq!((report.added, report.removed, report.unchanged), (1, 1, 0));
    /// assert_eq!(router.len(), 1);
    /// ```
    pub fn update(
        &mut self,
        changes: &[Change<'_>],
        mode: SyncMode,
    ) -> Result<SyncReport, SyncError> {
        self.sync_desired(changes, ListKind::Changes, mode)
    }

    /// [`Router::update`] of entries as a caller read them (see [`Router::sync_entries`]).
    pub fn update_entries(
        &mut self,
        entries: &[Entry<'_>],
        mode: SyncMode,
    ) -> Result<SyncReport, SyncError> {
        self.sync_desired(entries, ListKind::Changes, mode)
    }

    /// [`Router::sync`] of any desired list.
    fn sync_desired<D: Desired + Sync>(
        &mut self,
        desired: &[D],
        kind: ListKind,
        mode: SyncMode,
    ) -> Result<SyncReport, SyncError> {
        let started = Instant::now();
        let helpers = self.own_threads();
        let synced = match self.prepare_sync_with(desired, kind, mode, &|| false, true, helpers) {
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

    /// [`Router::prepare_sync`] (or, for [`ListKind::Changes`], of [`Router::update`]) for the
    /// builder thread: it gives up when `stop` says so (asked between routes) and, unless
    /// `rebuild` allows it, before building a fresh router (the builder then drops its copy
    /// first, so that memory never holds three tables).
    pub(crate) fn prepare_sync_with<D: Desired + Sync>(
        &self,
        desired: &[D],
        kind: ListKind,
        mode: SyncMode,
        stop: &(dyn Fn() -> bool + Sync),
        rebuild_allowed: bool,
        helpers: Helpers<'_>,
    ) -> Result<SyncPlan, Stopped> {
        let started = Instant::now();
        if kind == ListKind::Changes && self.broken {
            // Changes to a table that cannot be trusted: only a whole list rebuilds it.
            let errors = (0..desired.len())
                .map(|i| {
                    let e = desired[i].entry(i);
                    EntryError {
                        at: e.at,
                        id: e.item.id(),
                        fault: EntryFault::Invalid(Error::Broken),
                    }
                })
                .take(1)
                .collect();
            return Err(Stopped::Refused(SyncError { errors }));
        }
        let classified = self.classify(desired, kind, stop)?;
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
            helpers,
        )?;
        if !errors.is_empty() && mode == SyncMode::AllOrNothing {
            return Err(Stopped::Refused(SyncError { errors }));
        }
        match kind {
            ListKind::Whole => self.take_out_unseen(&classified.seen, &mut plan, fresh.is_none()),
            ListKind::Changes => {
                // Whatever the changes did not touch stayed as it was.
                let touched = plan.report.changed + plan.report.removed;
                plan.report.unchanged = self.len().saturating_sub(touched);
            }
        }
        plan.report.errors = errors;
        match fresh {
            Some(mut f) => {
                f.index = Index::build(f.pending_index.take().unwrap_or_default(), helpers);
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

    /// The threads this router's own syncs build with ([`Router::set_build_threads`]): the
    /// caller's, and helpers that need no start hook (they run as the caller's thread does).
    fn own_threads(&self) -> Helpers<'static> {
        Helpers {
            threads: self.build_threads,
            ..Helpers::NONE
        }
    }

    /// An empty router of this one's schema and limits, sized for `desired` and building its
    /// index once at the end, to be the plan's fresh router.
    fn fresh_router<D: Desired>(&self, desired: &[D]) -> Router {
        let mut f = Router::with_limits(self.schema.clone(), self.limits);
        f.flat_policy = self.flat_policy;
        f.build_threads = self.build_threads;
        f.reserve(desired);
        f.pending_index = Some(Vec::with_capacity(desired.len()));
        f
    }

    /// Second step: parses and compiles every changed and added route, into the plan or into
    /// the fresh router (which also gets a copy of every route kept as it is, or kept at its
    /// current version), and takes out what a list of changes removes; returns the invalid
    /// entries, in list order. A fresh router of a long list is prepared on `helpers`' threads
    /// too ([`Router::prepare_on_threads`]), with the same outcome.
    #[allow(clippy::too_many_arguments)]
    fn prepare_entries<D: Desired + Sync>(
        &self,
        desired: &[D],
        status: &[Status],
        plan: &mut SyncPlan,
        fresh: Option<&mut Router>,
        regexes: &mut PreparedRegexes<'_>,
        stop: &(dyn Fn() -> bool + Sync),
        helpers: Helpers<'_>,
    ) -> Result<PreparedEntries, Stopped> {
        let threads = helpers.threads;
        let mut errors = Vec::new();
        match fresh {
            Some(f) if threads.count > 1 && desired.len() >= 2 * threads.piece => {
                let mut shared = regexes.share();
                let placed = self.prepare_on_threads(
                    desired,
                    status,
                    plan,
                    f,
                    &mut shared,
                    &mut errors,
                    stop,
                    helpers,
                );
                regexes.unshare(shared);
                placed?;
            }
            mut fresh => {
                for (index, st) in status.iter().enumerate() {
                    if index.is_multiple_of(64) && stop() {
                        return Err(Stopped::Cancelled);
                    }
                    let (fresh, ahead) = (fresh.as_deref_mut(), Ahead::Nothing);
                    self.place(
                        desired,
                        index,
                        *st,
                        ahead,
                        plan,
                        fresh,
                        regexes,
                        &mut errors,
                    );
                }
            }
        }
        Ok(errors)
    }

    /// Entry `index` of the second step (status `st`, `ahead` what was prepared of it ahead):
    /// its route into the plan or the fresh router, or its error into `errors`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn place<D: Desired>(
        &self,
        desired: &[D],
        index: usize,
        st: Status,
        ahead: Ahead,
        plan: &mut SyncPlan,
        fresh: Option<&mut Router>,
        regexes: &mut dyn RegexSource,
        errors: &mut Vec<EntryError>,
    ) {
        let entry = desired[index].entry(index);
        let (at, id) = (entry.at, entry.item.id());
        let (rid, priority, expression) = match (entry.item, st) {
            (_, Status::Duplicate(first)) => {
                let fault = EntryFault::Duplicate { first };
                errors.push(EntryError { at, id, fault });
                return;
            }
            (_, Status::Misplaced) => {
                let fault = EntryFault::Unreadable {
                    kind: UnreadKind::Malformed,
                    why: "a removal has no place in a whole list (it is a list of changes)"
                        .to_owned(),
                };
                errors.push(EntryError { at, id, fault });
                return;
            }
            (Item::Unreadable { kind, why, .. }, Status::Unreadable(slot)) => {
                let why = why.to_owned();
                errors.push(EntryError {
                    at,
                    id,
                    fault: EntryFault::Unreadable { kind, why },
                });
                // Apply-valid keeps a known route's current version when its new one is
                // invalid; a fresh router has to be given that version too.
                if let (Some(slot), Some(f)) = (slot, fresh) {
                    if let Some(old) = self.copy(slot, ahead, regexes) {
                        f.insert(old);
                    }
                }
                return;
            }
            (Item::Remove(id), Status::Remove(slot)) => {
                if let Some(slot) = slot {
                    plan.report.removed += 1;
                    plan.remove.push((id, self.resolve_again(slot)));
                }
                return;
            }
            (Item::Route { .. }, Status::Unchanged(slot)) => {
                if let Some(f) = fresh {
                    let copy = self.copy(slot, ahead, regexes);
                    f.insert(copy.expect("a live route prepares again"));
                }
                return;
            }
            (
                Item::Route {
                    id,
                    priority,
                    expression,
                },
                _,
            ) => (id, priority, expression),
            (item, st) => unreachable!("{item:?} classified as {st:?}"),
        };
        match self.finish(rid, priority, expression, ahead, regexes) {
            Ok(mut route) => {
                // Numbered here, in list order, wherever it was prepared.
                route.instance = super::next_instance();
                match st {
                    Status::Changed(slot) => {
                        plan.report.changed += 1;
                        if fresh.is_none() {
                            plan.remove.push((rid, self.resolve_again(slot)));
                        }
                    }
                    Status::Added => plan.report.added += 1,
                    _ => {}
                }
                match fresh {
                    Some(f) => f.insert(route),
                    None => plan.insert.push(route),
                }
            }
            Err(e) => {
                errors.push(EntryError {
                    at,
                    id,
                    fault: EntryFault::Invalid(e),
                });
                if let (Status::Changed(slot), Some(f)) = (st, fresh) {
                    if let Some(old) = self.copy(slot, Ahead::Nothing, regexes) {
                        f.insert(old);
                    }
                }
            }
        }
    }

    /// Third step (whole lists): the routes of the router no entry has the id of are removed
    /// (taken out of this router when the plan changes it route by route; simply left behind by
    /// a fresh one).
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
