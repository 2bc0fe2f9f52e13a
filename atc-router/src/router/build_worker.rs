//! The builder's thread: takes the newest submitted list, builds its table (patching the
//! shadow when few routes change, a fresh router otherwise), leaves the outcome for the caller,
//! and brings routers the caller hands back to the last list to serve as the next shadow. The
//! caller's side and the invariants both keep are in `builder.rs`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::builder::{
    lock, Job, ListError, Outcome, OwnedRoute, PublishHook, RouteInput, Shared, LIST_LINE_SLACK,
};
use super::sync::Stopped;
use super::{RouteSpec, Router, SyncMode, SyncReport};
use crate::limits::Limits;
use crate::route_list::{Entry, Problem, RouteList};
use crate::schema::Schema;

/// The thread's side.
pub(super) struct Worker {
    shared: Arc<Shared>,
    schema: Arc<Schema>,
    limits: Limits,
    /// A copy of the caller's current table (see the module docs).
    shadow: Option<Box<Router>>,
    /// The list of the newest table built: what a recycled router is brought to.
    last: Option<(Vec<OwnedRoute>, SyncMode)>,
    /// No shadow mirrors the current table, and one is to be built from `last` when nothing
    /// else waits (after a fresh build, whose replaced router was unrelated to it).
    want_shadow: bool,
    publish: Option<PublishHook>,
}

/// What the thread takes up next.
enum Task {
    Build(Job),
    Recycle(Box<Router>),
    /// Build a shadow from the last list (nothing else to do).
    Shadow,
    Stop,
}

impl Worker {
    pub(super) fn new(
        shared: Arc<Shared>,
        schema: Arc<Schema>,
        limits: Limits,
        publish: Option<PublishHook>,
    ) -> Worker {
        Worker {
            shared,
            schema,
            limits,
            shadow: None,
            last: None,
            want_shadow: false,
            publish,
        }
    }

    /// Runs the publish hook, if any, on a table just built; keeps the table as the shadow
    /// when the caller does not (see `Builder::publish_with`).
    fn publish(&mut self, outcome: &mut Outcome) {
        let (
            Some(hook),
            Outcome::Built {
                version,
                router,
                published,
                ..
            },
        ) = (&self.publish, outcome)
        else {
            return;
        };
        let keep = hook.1;
        let ran = {
            let mut hook = hook.0.lock().unwrap_or_else(|e| e.into_inner());
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (hook)(*version, router)))
        };
        let ran = ran.unwrap_or_else(|p| Err(panic_message(&p)));
        if !keep && ran.is_ok() {
            let empty = Box::new(Router::with_limits(self.schema.clone(), self.limits));
            self.shadow = Some(std::mem::replace(router, empty));
            self.want_shadow = false;
        }
        *published = Some(ran);
    }

    pub(super) fn run(mut self) {
        loop {
            let task = self.next_task();
            self.shared.busy.store(true, Ordering::Release);
            match task {
                Task::Stop => return,
                Task::Recycle(old) => self.converge(old),
                Task::Shadow => self.build_shadow(),
                Task::Build(job) => {
                    let version = job.version;
                    let shadow = self.shadow.take();
                    let started = Instant::now();
                    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        self.build(job, shadow)
                    }));
                    let build_time = started.elapsed();
                    let outcome = match built {
                        Ok(Some(mut outcome)) => {
                            self.publish(&mut outcome);
                            outcome.timed(build_time)
                        }
                        // Stopped: the builder is being dropped.
                        Ok(None) => return,
                        Err(panic) => {
                            self.shadow = None;
                            self.last = None;
                            Outcome::Panicked {
                                version,
                                message: panic_message(&panic),
                                build_time,
                            }
                        }
                    };
                    let mut st = lock(&self.shared.state);
                    st.building = None;
                    if let Some(Outcome::Built { router, .. }) = st.result.replace(outcome) {
                        // Never taken, and now older than the new outcome: freed here.
                        drop(st);
                        drop(router);
                    }
                    self.shared.ready.store(true, Ordering::Release);
                }
            }
        }
    }

    /// Builds a shadow from the last list; gives way (and keeps none) when a job arrives.
    fn build_shadow(&mut self) {
        let Some((routes, mode)) = &self.last else {
            return;
        };
        let specs = specs_of(routes);
        let stop = || {
            self.shared.stop.load(Ordering::Relaxed) || self.shared.queued.load(Ordering::Relaxed)
        };
        let fresh = Router::with_limits(self.schema.clone(), self.limits);
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            match fresh.prepare_sync_with(&specs, *mode, &stop, true) {
                Ok(plan) => {
                    let mut fresh = Box::new(fresh);
                    fresh.apply(plan);
                    Some(fresh)
                }
                Err(_) => None,
            }
        }));
        if let Ok(Some(shadow)) = built {
            self.shadow = Some(shadow);
            self.want_shadow = false;
        }
    }

    /// Waits for work. A router the caller replaced comes first: brought to the last list, it
    /// is the cheapest base for the next build, and until it is the shadow or freed the thread
    /// would hold two tables.
    fn next_task(&mut self) -> Task {
        let mut st = lock(&self.shared.state);
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                return Task::Stop;
            }
            if let Some(held) = st.rebased.take() {
                self.shadow = None;
                self.last = Some((held, SyncMode::AllOrNothing));
                self.want_shadow = true;
            }
            if let Some(old) = st.recycled.pop() {
                return Task::Recycle(Box::new(old));
            }
            if let Some(job) = st.queued.take() {
                self.shared.queued.store(false, Ordering::Release);
                st.building = Some(job.version);
                // A result the caller never took was superseded by this job: its router is the
                // current table brought to the last list, the best base there is.
                if let Some(router) = st.base.take() {
                    self.shadow = None;
                    self.shadow = Some(router);
                }
                return Task::Build(job);
            }
            if self.want_shadow && self.shadow.is_none() && st.result.is_none() {
                return Task::Shadow;
            }
            self.shared.busy.store(false, Ordering::Release);
            st = self.shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Builds `job` from `shadow` (or fresh); `None` when stopped.
    fn build(&mut self, job: Job, shadow: Option<Box<Router>>) -> Option<Outcome> {
        let Job {
            version,
            input,
            mode,
        } = job;
        crate::failpoint::build_hit(version);
        let stop = || self.shared.stop.load(Ordering::Relaxed);
        let (routes, lines, problems) = match read(input, &self.limits) {
            Ok(read) => read,
            Err(message) => {
                self.shadow = shadow;
                return Some(Outcome::Refused {
                    version,
                    errors: Vec::new(),
                    message,
                    build_time: Duration::ZERO, // set by `Worker::run`
                });
            }
        };
        let mut errors: Vec<ListError> = problems.into_iter().map(ListError::Unreadable).collect();
        if mode == SyncMode::AllOrNothing && !errors.is_empty() {
            // Refused: but every route is still checked, so that all invalid ones are reported
            // at once (each on its own, nothing built).
            for (r, &line) in routes.iter().zip(&lines) {
                if stop() {
                    return None;
                }
                if let Err(error) =
                    Router::validate_with_limits(&self.schema, &r.expression, &self.limits)
                {
                    errors.push(ListError::Invalid {
                        line,
                        id: r.id,
                        error,
                    });
                }
            }
            self.shadow = shadow;
            errors.sort_by_key(ListError::line);
            return Some(refused(version, errors));
        }
        // A route of the caller's current table, as far as the thread knows it: the list of
        // the last table built (what the shadow holds too; cleared when the caller changes its
        // router directly).
        let last = self.last.take();
        // By id, made the first time an error asks (most builds have none).
        let index: std::cell::OnceCell<HashMap<Uuid, &OwnedRoute>> = std::cell::OnceCell::new();
        let previous = |id: Uuid| -> Option<OwnedRoute> {
            let list = last.as_ref().map_or(&[][..], |(list, _)| list);
            index
                .get_or_init(|| list.iter().map(|r| (r.id, r)).collect())
                .get(&id)
                .map(|r| (*r).clone())
        };
        // Apply-valid: a known route whose new version could not be read keeps its current
        // version, as a known route whose new version is invalid does.
        let mut kept: Vec<OwnedRoute> = Vec::new();
        for e in &errors {
            if let Some(route) = e.id().and_then(&previous) {
                if !routes.iter().any(|r| r.id == route.id) {
                    kept.push(route);
                }
            }
        }
        let specs: Vec<RouteSpec<'_>> = routes.iter().chain(&kept).map(spec).collect();
        // The list applied to the shadow; or a fresh router when there is none, or when most
        // routes change (the shadow is dropped first: never three tables at once).
        let mut diff = None;
        let from_shadow = match shadow {
            Some(mut s) => match s.prepare_sync_with(&specs, mode, &stop, false) {
                Ok(plan) => {
                    let report = s.apply(plan);
                    // Here, off the request path, and not on the caller's thread.
                    s.settle_if_due();
                    Some((s, Ok(report)))
                }
                Err(Stopped::Rebuild(counts)) => {
                    diff = Some(counts);
                    drop(s);
                    None
                }
                Err(Stopped::Cancelled) => return None,
                Err(Stopped::Refused(e)) => Some((s, Err(e))),
            },
            None => None,
        };
        let (router, mirrors, result) = match from_shadow {
            Some((s, result)) => (s, true, result),
            None => {
                let mut fresh = Box::new(Router::with_limits(self.schema.clone(), self.limits));
                let result = match fresh.prepare_sync_with(&specs, mode, &stop, true) {
                    Ok(plan) => {
                        let mut report = fresh.apply(plan);
                        // A known route whose new version is invalid keeps its current version
                        // (which was valid): the fresh router does not know it, the thread does.
                        // What the list is to the caller's table, not to the empty router: counted
                        // before parsing, so an invalid route counts as added or changed there;
                        // it is neither (a known one keeps its current version).
                        let counts = diff
                            .or_else(|| last.as_ref().map(|(list, _)| diff_counts(list, &specs)));
                        if let Some(c) = &counts {
                            report.added = c.added;
                            report.removed = c.removed;
                            report.changed = c.changed;
                            report.unchanged = c.unchanged;
                        }
                        for (id, error) in &report.errors {
                            if matches!(error, crate::error::Error::DuplicateRoute(_)) {
                                // Counted as no route at all already.
                                continue;
                            }
                            match previous(*id) {
                                Some(prev) => {
                                    report.changed = report.changed.saturating_sub(1);
                                    let _ = fresh.add(prev.id, prev.priority, &prev.expression);
                                }
                                None if counts.is_some() => {
                                    report.added = report.added.saturating_sub(1)
                                }
                                None => {}
                            }
                        }
                        Ok(report)
                    }
                    Err(Stopped::Cancelled) => return None,
                    Err(Stopped::Refused(e)) => Err(e),
                    Err(Stopped::Rebuild(_)) => unreachable!("a rebuild was allowed"),
                };
                (fresh, false, result)
            }
        };
        drop(specs);
        // Each route's line, for the errors (routes kept at their current version: 0).
        let mut lines_by_id: Option<HashMap<Uuid, usize>> = None;
        let mut line_of = |id: Uuid| {
            *lines_by_id
                .get_or_insert_with(|| {
                    routes
                        .iter()
                        .map(|r| r.id)
                        .zip(lines.iter().copied())
                        .collect()
                })
                .get(&id)
                .unwrap_or(&0)
        };
        match result {
            Ok(mut report) => {
                // Routes kept at their current version went in unchanged, but they are errors.
                report.unchanged = report.unchanged.saturating_sub(kept.len());
                for (id, error) in report.errors.drain(..) {
                    let line = line_of(id);
                    errors.push(ListError::Invalid { line, id, error });
                }
                errors.sort_by_key(ListError::line);
                // What the table holds (not the list: its invalid or repeated routes are not
                // in it, and apply-valid kept current versions).
                self.last = Some((held_routes(&router), mode));
                Some(Outcome::Built {
                    version,
                    router,
                    report,
                    errors,
                    build_time: Duration::ZERO, // set by `Worker::run`
                    published: None,            // set by `Worker::run`
                })
            }
            Err(refusal) => {
                // Nothing changed: a shadow is still the current table's copy.
                self.shadow = Some(router).filter(|_| mirrors);
                self.last = last;
                for (id, error) in refusal.errors {
                    let line = line_of(id);
                    errors.push(ListError::Invalid { line, id, error });
                }
                errors.sort_by_key(ListError::line);
                Some(refused(version, errors))
            }
        }
    }

    /// Brings a router the caller replaced to the last list built, to be the next shadow; or
    /// frees it, when that would be a whole rebuild, or another build already made a shadow.
    fn converge(&mut self, mut old: Box<Router>) {
        let stop = || self.shared.stop.load(Ordering::Relaxed);
        let stop = &stop;
        match (&self.shadow, &self.last) {
            (None, Some((routes, mode))) => {
                let specs = specs_of(routes);
                let converged =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        match old.prepare_sync_with(&specs, *mode, stop, false) {
                            Ok(plan) => {
                                old.apply(plan);
                                old.settle_if_due();
                                Some(old)
                            }
                            Err(_) => None,
                        }
                    }));
                self.shadow = converged.ok().flatten();
                // Unrelated to the last list (the replaced table of a fresh build): build the
                // shadow from the list itself when nothing else waits.
                self.want_shadow = self.shadow.is_none();
            }
            _ => drop(old),
        }
    }
}

fn refused(version: u64, errors: Vec<ListError>) -> Outcome {
    let message = match errors.first() {
        Some(first) => format!(
            "{} invalid route(s), the current table stays; first: {first}",
            errors.len()
        ),
        None => "the list was refused".to_owned(),
    };
    Outcome::Refused {
        version,
        errors,
        message,
        build_time: Duration::ZERO, // set by `Worker::run`
    }
}

/// The routes `router` holds, as a list.
pub(super) fn held_routes(router: &Router) -> Vec<OwnedRoute> {
    router
        .routes()
        .map(|r| OwnedRoute {
            id: r.id(),
            priority: r.priority(),
            expression: r.source().to_owned(),
        })
        .collect()
}

fn spec(r: &OwnedRoute) -> RouteSpec<'_> {
    RouteSpec {
        id: r.id,
        priority: r.priority,
        expression: &r.expression,
    }
}

fn specs_of(routes: &[OwnedRoute]) -> Vec<RouteSpec<'_>> {
    routes.iter().map(spec).collect()
}

/// What `desired` is to a table holding exactly `current`: routes added, removed, changed
/// (another priority or text) and unchanged.
fn diff_counts(current: &[OwnedRoute], desired: &[RouteSpec<'_>]) -> SyncReport {
    let by_id: HashMap<Uuid, &OwnedRoute> = current.iter().map(|r| (r.id, r)).collect();
    let mut seen = std::collections::HashSet::new();
    let mut report = SyncReport::default();
    for d in desired {
        if !seen.insert(d.id) {
            // A repeated id: an error of the list, not a route (the first one counts).
            continue;
        }
        match by_id.get(&d.id) {
            Some(c) if c.priority == d.priority && c.expression == d.expression => {
                report.unchanged += 1
            }
            Some(_) => report.changed += 1,
            None => report.added += 1,
        }
    }
    report.removed = current.len() - (report.unchanged + report.changed);
    report
}

/// The routes of `input`, their lines, and the routes that could not be read.
type Read = (Vec<OwnedRoute>, Vec<usize>, Vec<Problem>);

fn read(input: RouteInput, limits: &Limits) -> Result<Read, String> {
    match input {
        // A repeated id in a list the caller read is the sync's to refuse, as `Router::sync`
        // refuses it (`Error::DuplicateRoute`): the rule lives in the core's sync.
        RouteInput::Routes {
            routes,
            lines,
            problems,
        } => Ok((routes, lines, problems)),
        RouteInput::Text(text) => {
            let max_line = limits.max_expression_len.saturating_add(LIST_LINE_SLACK);
            let list = RouteList::read((*text).as_ref(), max_line)?;
            Ok(owned(list.entries, list.problems))
        }
    }
}

/// A list's entries as routes and their lines.
fn owned(entries: Vec<Entry>, problems: Vec<Problem>) -> Read {
    let lines = entries.iter().map(|e| e.line).collect();
    let routes = entries
        .into_iter()
        .map(|e| OwnedRoute {
            id: e.id,
            priority: e.priority,
            expression: e.expression,
        })
        .collect();
    (routes, lines, problems)
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
