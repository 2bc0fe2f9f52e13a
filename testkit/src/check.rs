//! Runs a rendered case ([`Rendered`]) through a [`Router`] and checks every answer against a
//! model of what the router should hold and against the reference evaluator. It is the harness
//! of the `matcher` fuzz target and of the equivalence property tests (`tests/equivalence.rs`).
//!
//! The case's routes are added one by one (route `i` at slot `i`), then its steps are applied.
//! After the routes are in, and again after every step:
//! - the router holds exactly the routes the model says, in routing order (priority descending,
//!   then id bytes descending), each with its text; the fields in use are those its routes use,
//!   and the names registered under wildcards are exactly the ones its routes use (requests
//!   never register one, and the last route using a name releases it);
//! - the indexed matcher ([`Router::execute`]) and the reference evaluator
//!   ([`Router::execute_reference`]) give every request the same answer: matched or not, route,
//!   priority, matched values and captures, in recording order ([`Outcome`]); and so does the
//!   router written as a table image ([`Router::to_image`]) and opened by an [`ImageRouter`]
//!   over a schema of its own, as another process would open it;
//! - [`Router::explain`] names that winner, and for every candidate that does not match, a
//!   predicate whose contribution is false; [`Router::matches`] lists exactly the candidates
//!   explain found matching, the winner first, with the winner's matched values and captures;
//!   every route the index ruled out has a requirement the request does not meet; and none of
//!   them changes the context's result.
//!
//! At the end every route is removed, and the router must be empty: no field, no regex, no
//! wildcard name.
//!
//! Each change has its own checks: an added route's tree prints and re-parses to itself; a
//! failed add changes nothing, and validation refuses that text too; a sync reports exactly what
//! the model predicts (added, removed, changed, unchanged, invalid), or is refused as a whole in
//! all-or-nothing mode, and leaves a router that answers like one built from scratch from the
//! model; a stale sync plan is refused; a context of another schema matches nothing.
//!
//! Invariants a change must keep:
//! - Every check panics with what differs (a fuzz target finds panics; proptest catches and
//!   shrinks them), and nothing but the case decides what runs, so a failure reproduces from the
//!   case alone.
//! - The model follows the documented rules of [`Router::add`], [`Router::remove`] and
//!   [`Router::prepare_sync`], never the router's own state: it is the specification the router
//!   is held to.

use std::sync::Arc;

use atc_router::route_list::{EntryList, Position};
use atc_router::{
    parse_with_limits, Builder, CaptureKey, Change, Context, Error, ExplainOptions, ExprError,
    ImageRouter, Limits, MatchedValue, Outcome as BuiltOutcome, RouteInput, RouteSpec, Router,
    Schema, SyncMode, Uuid, Value,
};

use crate::gen::{Desired, Edit, Rendered, RenderedRequest, Step};

/// What a run did, for tests that check the generator keeps the comparison meaningful and for
/// choosing fuzz seeds.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    /// Routes added (at first and by steps).
    pub added: usize,
    /// Adds refused for their text (not as duplicates).
    pub refused: usize,
    /// Routes held once the case's routes are in, and how many of them an index holds.
    pub loaded: usize,
    pub indexed: usize,
    /// Requests run (after the load and after every step), matched, and won by an indexed route.
    pub requests: usize,
    pub matched: usize,
    pub indexed_wins: usize,
    /// Syncs applied (not refused).
    pub synced: usize,
}

/// Everything a result says: id, priority, the matched value of every field that recorded one
/// (field name and value, in recording order), and the captures in recording order.
pub type Outcome = (Uuid, u64, Vec<(String, String)>, Vec<(String, String)>);

/// What a route slot holds in the model: its priority and the case's route whose text it has.
type Held = Option<(u64, usize)>;

/// Runs `case` and checks it (see the module's docs); panics on any difference.
pub fn run(case: &Rendered) -> Stats {
    run_with(case, false)
}

/// [`run`], with every sync made in the background: the list submitted to a [`Builder`], its
/// outcome waited for and swapped in, the replaced router handed back (so later syncs start
/// from the builder's shadow; after direct adds and removes the builder is told what the router
/// holds first). The same checks hold after every swap, the report included.
pub fn run_in_background(case: &Rendered) -> Stats {
    run_with(case, true)
}

fn run_with(case: &Rendered, background: bool) -> Stats {
    let mut run = Run::new(case);
    if background {
        run.builder = Some(Builder::new(run.router.schema().clone(), case.limits));
    }
    for i in 0..case.routes.len() {
        run.add(i, i, case.routes[i].priority);
    }
    run.stats.loaded = run.router.len();
    run.stats.indexed = run.router.routes().filter(|r| r.is_indexed()).count();
    run.check("once the routes are in");
    for (n, step) in case.steps.iter().enumerate() {
        run.step(step);
        run.check(&format!("after step {n}: {step:?}"));
    }
    run.remove_all();
    run.stats
}

/// The schema a rendered case describes.
pub fn schema(case: &Rendered) -> Arc<Schema> {
    let mut s = Schema::new();
    for (name, ty) in &case.schema {
        s.add_field(name, *ty).expect("generated schemas are valid");
    }
    Arc::new(s)
}

struct Run<'c> {
    case: &'c Rendered,
    router: Router,
    /// Per slot of [`Rendered::slots`].
    model: Vec<Held>,
    ctx: Context,
    stats: Stats,
    /// Syncs go through it (see [`run_in_background`]).
    builder: Option<Builder>,
    /// A direct change happened since the builder last learned what the router holds.
    diverged: bool,
}

impl<'c> Run<'c> {
    fn new(case: &'c Rendered) -> Run<'c> {
        let schema = schema(case);
        Run {
            case,
            router: Router::with_limits(schema.clone(), case.limits),
            model: vec![None; case.slots.len()],
            ctx: Context::new(schema),
            stats: Stats::default(),
            builder: None,
            diverged: false,
        }
    }

    fn text(&self, route: usize) -> &'c str {
        &self.case.routes[route].text
    }

    fn step(&mut self, step: &Step) {
        match step {
            Step::Add {
                slot,
                route,
                priority,
            } => self.add(*slot, *route, *priority),
            Step::Remove { slot } => {
                let removed = self.router.remove(self.case.slots[*slot]);
                assert_eq!(removed, self.model[*slot].take().is_some(), "remove");
                self.changed_directly();
            }
            Step::Sync { mode, edits, extra } => self.sync(*mode, edits, extra),
            Step::Update {
                mode,
                upserts,
                removals,
            } => self.update(*mode, upserts, removals),
            Step::StaleSync {
                edits,
                extra,
                remove,
            } => {
                let desired = self.desired(edits, extra);
                let specs = self.specs(&desired);
                let plan = self
                    .router
                    .prepare_sync(&specs, SyncMode::ApplyValid)
                    .expect("apply-valid plans are never refused");
                let removed = self.router.remove(self.case.slots[*remove]);
                assert_eq!(removed, self.model[*remove].take().is_some(), "remove");
                let report = self.router.apply(plan);
                assert!(report.stale, "a plan older than a change was applied");
            }
            Step::ForeignContext => {
                let mut foreign = Context::new(schema(self.case));
                for (field, value) in self.case.requests.iter().flat_map(|r| &r.values) {
                    let _ = foreign.add_value(field, value.clone());
                }
                assert!(
                    !self.router.execute(&mut foreign),
                    "a foreign context matched"
                );
                assert!(foreign.result().is_none());
                assert!(!self.router.execute_reference(&mut foreign));
                assert!(foreign.result().is_none());
            }
        }
    }

    fn add(&mut self, slot: usize, route: usize, priority: u64) {
        let id = self.case.slots[slot];
        let text = self.text(route);
        match self.router.add(id, priority, text) {
            Ok(()) => {
                assert!(self.model[slot].is_none(), "a duplicate id was accepted");
                self.model[slot] = Some((priority, route));
                self.stats.added += 1;
                self.changed_directly();
                let held = self.router.get(id).expect("an added route is held");
                assert_eq!(held.source(), text);
                // A route's tree is its text parsed again: its print parses to the same tree.
                let tree = held.expr();
                let printed = tree.to_string();
                let again = parse_with_limits(&printed, &reparse_limits()).unwrap_or_else(|e| {
                    panic!("the print of {text:?} does not parse: {printed:?}\n{e}")
                });
                assert_eq!(
                    again.expr, tree,
                    "print and re-parse of {text:?} as {printed:?}"
                );
            }
            Err(Error::DuplicateRoute(d)) => {
                assert_eq!(d, id);
                assert!(self.model[slot].is_some(), "a duplicate of nothing");
            }
            Err(e) => {
                self.stats.refused += 1;
                if let Error::Expr(ee) = &e {
                    check_expr_error(text, ee);
                }
                let _ = e.to_string();
                let valid =
                    Router::validate_with_limits(self.router.schema(), text, &self.case.limits);
                assert!(
                    valid.is_err(),
                    "add refused what validation accepts: {text:?}\n{e}"
                );
            }
        }
    }

    /// The desired list of a sync: the routes held, edited, then the extra entries, as (slot,
    /// priority, route); `None` is an empty text.
    fn desired(&self, edits: &[Edit], extra: &[Desired]) -> Vec<(usize, u64, Option<usize>)> {
        let slots = self.model.len();
        let mut out = Vec::new();
        let held = self
            .model
            .iter()
            .enumerate()
            .filter_map(|(s, h)| Some((s, (*h)?)));
        for (i, (slot, (priority, route))) in held.enumerate() {
            let edit = if edits.is_empty() {
                Edit::Keep
            } else {
                edits[i % edits.len()]
            };
            out.extend(match edit {
                Edit::Keep => Some((slot, priority, Some(route))),
                Edit::Drop => None,
                Edit::Reprioritise => Some((slot, priority + 1, Some(route))),
                Edit::Move(by) => Some(((slot + 1 + by) % slots, priority, Some(route))),
                Edit::Replace(other) => Some((slot, priority, Some(other))),
            });
        }
        for d in extra {
            let current = self.model[d.slot].map(|(_, r)| r);
            out.push((d.slot, d.priority, d.route.or(current)));
        }
        out
    }

    fn specs(&self, desired: &[(usize, u64, Option<usize>)]) -> Vec<RouteSpec<'c>> {
        desired
            .iter()
            .map(|(slot, priority, route)| RouteSpec {
                id: self.case.slots[*slot],
                priority: *priority,
                expression: route.map_or("", |r| self.text(r)),
            })
            .collect()
    }

    /// Syncs the router and the model (by the rules of `Router::prepare_sync`), checks the
    /// report against the model's, and the router against one built from the model.
    fn sync(&mut self, mode: SyncMode, edits: &[Edit], extra: &[Desired]) {
        let desired = self.desired(edits, extra);
        let specs = self.specs(&desired);
        let mut next: Vec<Held> = vec![None; self.model.len()];
        let mut listed = vec![false; self.model.len()];
        let (mut added, mut changed, mut unchanged, mut errors) = (0, 0, 0, 0);
        for (spec, (slot, priority, route)) in specs.iter().zip(&desired) {
            if std::mem::replace(&mut listed[*slot], true) {
                errors += 1; // an id listed again: the first entry counts
                continue;
            }
            let current = self.model[*slot];
            if current.is_some_and(|(p, r)| p == *priority && self.text(r) == spec.expression) {
                unchanged += 1;
                next[*slot] = current;
                continue;
            }
            let valid = Router::validate_with_limits(
                self.router.schema(),
                spec.expression,
                &self.case.limits,
            )
            .is_ok();
            match (valid, route) {
                (true, Some(route)) => {
                    if current.is_some() {
                        changed += 1;
                    } else {
                        added += 1;
                    }
                    next[*slot] = Some((*priority, *route));
                }
                _ => {
                    errors += 1;
                    // A known route whose new version is invalid keeps its current version.
                    next[*slot] = current;
                }
            }
        }
        let removed = (0..self.model.len())
            .filter(|s| self.model[*s].is_some() && !listed[*s])
            .count();
        let result = match self.builder.is_some() {
            true => self.sync_in_background(&specs, mode),
            false => self.router.sync(&specs, mode),
        };
        match result {
            Ok(report) => {
                assert!(
                    errors == 0 || mode == SyncMode::ApplyValid,
                    "{errors} invalid routes accepted"
                );
                assert!(!report.stale);
                assert_eq!(
                    (
                        report.added,
                        report.removed,
                        report.changed,
                        report.unchanged,
                        report.errors.len()
                    ),
                    (added, removed, changed, unchanged, errors),
                    "sync report (added, removed, changed, unchanged, errors) of {desired:?}"
                );
                for e in &report.errors {
                    let _ = e.to_string();
                }
                self.model = next;
                self.stats.added += added + changed;
                self.stats.synced += 1;
                self.check_model();
                self.compare_with_fresh();
            }
            Err(e) => {
                assert_eq!(mode, SyncMode::AllOrNothing, "{e}");
                assert_eq!(e.errors.len(), errors, "{e}");
                assert!(errors > 0, "a valid list refused: {e}");
                let _ = e.to_string();
            }
        }
    }

    /// A list of changes, to the router and the model (by the rules of `Router::update`: the
    /// first entry with an id has it, an invalid upsert keeps the route's current version, a
    /// removal of an id not held does nothing); checks the report against the model's, and the
    /// router against one built from the model.
    fn update(&mut self, mode: SyncMode, upserts: &[Desired], removals: &[usize]) {
        let mut next = self.model.clone();
        let mut seen = vec![false; self.model.len()];
        let (mut added, mut changed, mut removed, mut errors) = (0, 0, 0, 0);
        let mut changes = Vec::new();
        for d in upserts {
            let current = self.model[d.slot];
            let route = d.route.or(current.map(|(_, r)| r));
            let text = route.map_or("", |r| self.text(r));
            changes.push(Change::Upsert(RouteSpec {
                id: self.case.slots[d.slot],
                priority: d.priority,
                expression: text,
            }));
            if std::mem::replace(&mut seen[d.slot], true) {
                errors += 1;
                continue;
            }
            if current.is_some_and(|(p, r)| p == d.priority && self.text(r) == text) {
                continue;
            }
            let valid =
                Router::validate_with_limits(self.router.schema(), text, &self.case.limits).is_ok();
            match (valid, route) {
                (true, Some(route)) => {
                    if current.is_some() {
                        changed += 1;
                    } else {
                        added += 1;
                    }
                    next[d.slot] = Some((d.priority, route));
                }
                _ => errors += 1,
            }
        }
        for &slot in removals {
            changes.push(Change::Remove(self.case.slots[slot]));
            if std::mem::replace(&mut seen[slot], true) {
                errors += 1;
                continue;
            }
            if self.model[slot].is_some() {
                removed += 1;
                next[slot] = None;
            }
        }
        let held = self.model.iter().filter(|h| h.is_some()).count();
        let result = match self.builder.is_some() {
            true => self.update_in_background(&changes, mode),
            false => self.router.update(&changes, mode),
        };
        match result {
            Ok(report) => {
                assert!(
                    errors == 0 || mode == SyncMode::ApplyValid,
                    "{errors} invalid changes accepted"
                );
                assert_eq!(
                    (
                        report.added,
                        report.removed,
                        report.changed,
                        report.unchanged,
                        report.errors.len()
                    ),
                    (added, removed, changed, held - changed - removed, errors),
                    "update report (added, removed, changed, unchanged, errors) of {changes:?}"
                );
                self.model = next;
                self.stats.added += added + changed;
                self.stats.synced += 1;
                self.check_model();
                self.compare_with_fresh();
            }
            Err(e) => {
                assert_eq!(mode, SyncMode::AllOrNothing, "{e}");
                assert_eq!(e.errors.len(), errors, "{e}");
                assert!(errors > 0, "valid changes refused: {e}");
            }
        }
    }

    /// A direct change of the router: the builder's copy no longer mirrors it.
    fn changed_directly(&mut self) {
        self.diverged = self.builder.is_some();
    }

    /// Submits `input` to the builder, waits for its outcome and takes it in (the old router
    /// handed back); the outcome as `Router::sync` gives it.
    fn in_background(
        &mut self,
        input: RouteInput,
        mode: SyncMode,
    ) -> Result<atc_router::SyncReport, atc_router::SyncError> {
        let b = self.builder.as_mut().expect("background");
        if std::mem::take(&mut self.diverged) {
            b.rebase(&self.router);
        }
        b.submit(0, input, mode);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        while !b.is_ready() {
            assert!(
                std::time::Instant::now() < deadline,
                "no background outcome"
            );
            std::thread::yield_now();
        }
        match b.apply_to(&mut self.router).expect("ready") {
            BuiltOutcome::Built { report, .. } => Ok(report),
            BuiltOutcome::Refused { errors, .. } => Err(atc_router::SyncError { errors }),
            other => panic!("the builder gave {other:?}"),
        }
    }

    /// A sync made by the builder (see [`run_in_background`]).
    fn sync_in_background(
        &mut self,
        specs: &[RouteSpec<'_>],
        mode: SyncMode,
    ) -> Result<atc_router::SyncReport, atc_router::SyncError> {
        self.in_background(RouteInput::routes(specs), mode)
    }

    /// A list of changes applied by the builder.
    fn update_in_background(
        &mut self,
        changes: &[Change<'_>],
        mode: SyncMode,
    ) -> Result<atc_router::SyncReport, atc_router::SyncError> {
        let mut list = EntryList::new();
        for (i, c) in changes.iter().enumerate() {
            let at = Position::Item(i + 1);
            match c {
                Change::Upsert(s) => list.push_route(at, s.id, s.priority, s.expression),
                Change::Remove(id) => list.push_removal(at, *id),
            }
        }
        self.in_background(RouteInput::Changes(list), mode)
    }

    /// The router answers like one built from scratch from the model: same routes, fields and
    /// regexes, and the same outcome for every request.
    fn compare_with_fresh(&mut self) {
        let fresh_schema = schema(self.case);
        let mut fresh = Router::with_limits(fresh_schema.clone(), self.case.limits);
        for (slot, held) in self.model.iter().enumerate() {
            if let Some((priority, route)) = held {
                fresh
                    .add(self.case.slots[slot], *priority, self.text(*route))
                    .expect("the model holds valid routes only");
            }
        }
        let listing = |r: &Router| -> Vec<(Uuid, u64, String)> {
            r.routes()
                .map(|r| (r.id(), r.priority(), r.source().to_owned()))
                .collect()
        };
        assert_eq!(
            listing(&self.router),
            listing(&fresh),
            "routes after a sync"
        );
        assert_eq!(self.router.fields(), fresh.fields(), "fields after a sync");
        self.check_regex_count(fresh.regex_count(), "after a sync");
        let mut fresh_ctx = Context::new(fresh_schema);
        for (n, request) in self.case.requests.iter().enumerate() {
            fill(&mut self.ctx, request);
            fill(&mut fresh_ctx, request);
            self.router.execute(&mut self.ctx);
            fresh.execute(&mut fresh_ctx);
            assert_eq!(
                outcome(&self.ctx),
                outcome(&fresh_ctx),
                "request {n} after a sync, against a router built from scratch"
            );
        }
    }

    /// The router holds `want` compiled regexes (a stale plan, dropped, pins none).
    fn check_regex_count(&self, want: usize, when: &str) {
        assert_eq!(self.router.regex_count(), want, "regexes {when}");
    }

    fn check(&mut self, when: &str) {
        self.check_model();
        self.check_requests(when);
    }

    fn check_model(&self) {
        let mut want: Vec<(u64, Uuid)> = self
            .model
            .iter()
            .enumerate()
            .filter_map(|(slot, h)| h.map(|(p, _)| (p, self.case.slots[slot])))
            .collect();
        // Routing order: priority descending, then id bytes descending.
        want.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.as_bytes().cmp(a.1.as_bytes())));
        let got: Vec<(u64, Uuid)> = self
            .router
            .routes()
            .map(|r| (r.priority(), r.id()))
            .collect();
        assert_eq!(got, want, "routes or their order differ from the model");
        assert_eq!(self.router.len(), want.len());
        for (slot, held) in self.model.iter().enumerate() {
            if let Some((_, route)) = held {
                let r = self
                    .router
                    .get(self.case.slots[slot])
                    .expect("a modelled route");
                assert_eq!(r.source(), self.text(*route), "text of slot {slot}");
            }
        }
        let schema = self.router.schema();
        let mut fields: Vec<String> = self
            .router
            .routes()
            .flat_map(|r| r.field_ids())
            .map(|f| schema.field(f).expect("a route's field resolves").0)
            .collect();
        fields.sort();
        fields.dedup();
        assert_eq!(self.router.fields(), fields, "fields in use");
        // Wildcard names are registered by the routes that use them, and by nothing else.
        let under_wildcards = fields
            .iter()
            .filter(|f| !self.case.schema.iter().any(|(n, _)| n == *f))
            .count();
        if self.builder.is_some() {
            // The builder's copy of the table registers the names its routes use, too (checked
            // exact once the builder is gone, at the end).
            assert!(
                schema.names_in_use() >= under_wildcards,
                "wildcard names registered"
            );
        } else {
            assert_eq!(
                schema.names_in_use(),
                under_wildcards,
                "wildcard names registered"
            );
        }
    }

    fn check_requests(&mut self, when: &str) {
        // The router as a table image, opened with a schema of its own (as another process
        // opens it: no wildcard name registered, ids handed out in another order).
        let image = (!self.router.is_broken()).then(|| {
            let bytes = self.router.to_image().expect("a router writes its image");
            ImageRouter::from_bytes(schema(self.case), bytes).expect("an image the router wrote")
        });
        let mut image_ctx = image.as_ref().map(|i| Context::new(i.schema().clone()));
        for (n, request) in self.case.requests.iter().enumerate() {
            fill(&mut self.ctx, request);
            let fast = self.router.execute(&mut self.ctx);
            let fast_out = outcome(&self.ctx);
            assert_eq!(fast, fast_out.is_some());
            let slow = self.router.execute_reference(&mut self.ctx);
            let slow_out = outcome(&self.ctx);
            assert_eq!(
                fast_out,
                slow_out,
                "the indexed matcher and the reference disagree {when}, on request {n}\n\
                 request: {request:?}\nroutes: {:#?}",
                self.router
                    .routes()
                    .map(|r| (r.priority(), r.id(), r.source().to_owned()))
                    .collect::<Vec<_>>()
            );
            assert_eq!(fast, slow);
            if let (Some(image), Some(ctx)) = (&image, &mut image_ctx) {
                fill(ctx, request);
                let found = image.execute(ctx);
                let image_out = outcome(ctx);
                assert_eq!(found, image_out.is_some());
                assert_eq!(
                    image_out, fast_out,
                    "the table image and the router disagree {when}, on request {n}\n\
                     request: {request:?}"
                );
            }
            self.check_explain(&fast_out, when, n);
            self.stats.requests += 1;
            if let Some((id, ..)) = fast_out {
                self.stats.matched += 1;
                let winner = self.router.get(id).expect("the winner is held");
                self.stats.indexed_wins += usize::from(winner.is_indexed());
            }
        }
    }

    /// Explain and all-matches agree with the execute whose outcome is `winner` (see the
    /// module docs), and leave the context's result alone.
    fn check_explain(&mut self, winner: &Option<Outcome>, when: &str, n: usize) {
        let why = self
            .router
            .explain_with(
                &mut self.ctx,
                ExplainOptions {
                    ruled_out: true,
                    ..ExplainOptions::UNBOUNDED
                },
            )
            .expect("explain on the router's own schema");
        assert_eq!(outcome(&self.ctx), *winner, "explain changed the result");
        assert_eq!(
            why.winner,
            winner.as_ref().map(|w| w.0),
            "explain's winner {when}, request {n}"
        );
        assert_eq!(
            why.candidates.len() + why.ruled_out.len(),
            self.router.len()
        );
        for c in &why.candidates {
            if c.matched {
                assert!(c
                    .predicates
                    .iter()
                    .all(|p| p.location.span.end <= c.expression.len()));
            } else {
                assert_eq!(c.predicates.len(), 1, "one deciding predicate: {c:?}");
                assert!(!c.predicates[0].effective(), "{when}, request {n}: {c:?}");
                assert_eq!(
                    &c.expression[c.predicates[0].location.span.clone()],
                    c.predicates[0].text
                );
            }
        }
        for r in &why.ruled_out {
            assert!(r.key.is_some(), "a route ruled out without a reason: {r:?}");
        }
        let all = self
            .router
            .matches(&mut self.ctx)
            .expect("matches on the router's own schema");
        assert_eq!(outcome(&self.ctx), *winner, "matches changed the result");
        let matched: Vec<Uuid> = why
            .candidates
            .iter()
            .filter(|c| c.matched)
            .map(|c| c.id)
            .collect();
        assert_eq!(all.iter().map(|m| m.id).collect::<Vec<_>>(), matched);
        if let (Some(first), Some(w)) = (all.first(), winner) {
            let got_values: Vec<(String, String)> = first
                .matched_values
                .iter()
                .map(|(f, v)| {
                    let shown = match v {
                        Value::String(s) => format!("s:{s}"),
                        Value::Int(i) => format!("i:{i}"),
                        Value::IpAddr(a) => format!("a:{a}"),
                        Value::IpCidr(c) => format!("c:{c}"),
                    };
                    (f.clone(), shown)
                })
                .collect();
            assert_eq!(got_values, w.2, "the first match's values");
            // `Outcome` lists captures as recorded (a key may repeat; the last one counts) and
            // numbers groups `#i`; `RouteMatch` has each key once, where it was first recorded.
            let mut want_caps: Vec<(String, String)> = Vec::new();
            for (k, v) in &w.3 {
                let k = k.strip_prefix('#').unwrap_or(k).to_owned();
                match want_caps.iter_mut().find(|(g, _)| *g == k) {
                    Some(slot) => slot.1 = v.clone(),
                    None => want_caps.push((k, v.clone())),
                }
            }
            assert_eq!(first.captures, want_caps, "the first match's captures");
        }
    }

    fn remove_all(&mut self) {
        // The builder's copy of the table holds names of its own: gone with the builder.
        self.builder = None;
        for slot in 0..self.model.len() {
            if self.model[slot].take().is_some() {
                assert!(
                    self.router.remove(self.case.slots[slot]),
                    "slot {slot} lost"
                );
            }
        }
        assert!(self.router.is_empty());
        self.check_regex_count(0, "once every route is removed");
        assert!(self.router.fields().is_empty(), "fields left behind");
        assert_eq!(
            self.router.schema().names_in_use(),
            0,
            "wildcard names left"
        );
        self.check_requests("once every route is removed");
    }
}

/// Resets the context and adds the request's values, the values it must refuse in the middle
/// (each refused without changing anything).
pub fn fill(ctx: &mut Context, request: &RenderedRequest) {
    ctx.reset();
    let bad_at = request.values.len() / 2;
    for (i, (field, value)) in request.values.iter().enumerate() {
        if i == bad_at {
            add_bad_values(ctx, request);
        }
        ctx.add_value(field, value.clone())
            .unwrap_or_else(|e| panic!("generated value {value:?} for {field} refused: {e}"));
    }
    if request.values.is_empty() {
        add_bad_values(ctx, request);
    }
}

fn add_bad_values(ctx: &mut Context, request: &RenderedRequest) {
    for (field, value) in &request.bad_values {
        let before = ctx.values(field).to_vec();
        assert!(
            ctx.add_value(field, value.clone()).is_err(),
            "{value:?} for field {field} was accepted"
        );
        assert_eq!(
            ctx.values(field),
            &before[..],
            "a refused value changed {field}"
        );
    }
}

/// What the context's last execute says (see [`Outcome`]).
pub fn outcome(ctx: &Context) -> Option<Outcome> {
    let m = ctx.result()?;
    let matched = m
        .matched_fields()
        .into_iter()
        .map(|f| {
            let name = ctx.schema().field(f).expect("a matched field resolves").0;
            let v = m
                .matched_value_by_id(f)
                .expect("a matched field has a value");
            let shown = match v {
                MatchedValue::String(s) => format!("s:{s}"),
                MatchedValue::Int(i) => format!("i:{i}"),
                MatchedValue::IpAddr(a) => format!("a:{a}"),
                MatchedValue::IpCidr(c) => format!("c:{c}"),
            };
            (name, shown)
        })
        .collect();
    let captures = m
        .captures()
        .map(|(k, v)| {
            let key = match k {
                CaptureKey::Index(i) => format!("#{i}"),
                CaptureKey::Name(n) => n.to_owned(),
            };
            // Every recorded capture can be read back by its key (the last one wins).
            assert!(m.capture(k).is_some());
            (key, v.to_owned())
        })
        .collect();
    Some((m.id(), m.priority(), matched, captures))
}

/// Limits loose enough that re-parsing a printed tree is never refused: printing adds
/// parentheses (`a && b || c` prints as `a && (b || c)`) and spaces, so a tree that parsed
/// within the default limits may print longer and deeper. The depth stays under the hard cap.
pub fn reparse_limits() -> Limits {
    Limits {
        max_expression_len: usize::MAX,
        max_predicates: usize::MAX,
        max_depth: Limits::HARD_MAX_DEPTH,
        ..Limits::default()
    }
}

/// Checks what every expression error promises (docs/language.md "Errors"): a position inside the
/// source on a character boundary, a 1-based line and column, a non-empty message, and a rendering
/// that does not panic. (Wording is the syntax test suite's business: messages quote user text, so
/// a fuzzer cannot tell a leaked grammar rule name from a field that happens to be named so.)
pub fn check_expr_error(source: &str, e: &ExprError) {
    assert!(e.span.start <= e.span.end, "span {:?}", e.span);
    assert!(e.span.end <= source.len(), "span {:?} past the end", e.span);
    assert!(source.is_char_boundary(e.span.start) && source.is_char_boundary(e.span.end));
    assert!(e.line >= 1 && e.column >= 1);
    assert!(!e.message.is_empty());
    let shown = e.to_string();
    assert!(shown.contains(&e.message));
}
