//! Building a router's next table off the request path.
//!
//! A [`Builder`] owns one thread, started the first time a list is submitted (never before:
//! a router made before a process forks, as nginx's master makes it, builds in each worker
//! with a thread of that worker's own). The caller submits a whole desired list with a version
//! ([`Builder::submit`]); the thread reads it (a list in text is parsed there), prepares and
//! builds the new table, and leaves it ready; the caller, between two requests, takes it
//! ([`Builder::take`]) and swaps it for its current router in O(1), then hands the old one
//! back ([`Builder::recycle`]). Matching never waits for any of it.
//!
//! **A push costs what changed.** The thread keeps a copy of the current table (its *shadow*):
//! a list that changes a few routes is applied to the shadow route by route, and the shadow
//! becomes the new table. The router the caller hands back is then brought to the same list
//! in the background and becomes the next shadow. When most routes change (or there is no
//! shadow: the first build, or the caller changed its router directly), a fresh router is
//! built from the list instead.
//!
//! Invariants (a reader must not break them):
//! - **Order.** Versions become ready in the order they were submitted. A list submitted while
//!   another waits to start replaces it (the replaced one is never built); a list being built
//!   is finished. A result not yet taken when a newer one is ready is dropped: a version is
//!   never ready after a newer one.
//! - **Consistency.** A result is a whole router holding exactly its list (or, in
//!   apply-valid mode, its valid routes and the current version of known routes whose new
//!   version is invalid); the caller's router is never touched by the thread.
//! - **Memory.** The thread holds at most one table besides the caller's current one: the
//!   shadow, or the table being built (a fresh build drops the shadow first), or a result not
//!   yet taken (which a newer build takes over as its shadow).
//! - **Faults.** A panic while building is caught: the result reports it, the shadow is
//!   dropped (it may be half-changed), the caller's router keeps serving. Dropping the
//!   [`Builder`] stops the thread between two routes and joins it.
//!
//! ```
//! use std::sync::Arc;
//! use atc_router::{Builder, Outcome, OwnedRoute, RouteInput, Router, Schema, SyncMode, Type, Uuid};
//!
//! let mut schema = Schema::new();
//! schema.add_field("http.path", Type::String).unwrap();
//! let schema = Arc::new(schema);
//! let mut current = Router::new(schema.clone());
//! let mut builder = Builder::new(schema, Default::default());
//!
//! let list = vec![OwnedRoute { id: Uuid::from_u128(1), priority: 1, expression: r#"http.path ^= "/a""#.into() }];
//! builder.submit(7, RouteInput::routes(list), SyncMode::AllOrNothing);
//! // ... `current` answers requests meanwhile; between two of them:
//! while !builder.is_ready() {
//!     std::thread::sleep(std::time::Duration::from_millis(1));
//! }
//! if let Some(Outcome::Built { version, router, .. }) = builder.take() {
//!     let old = current.replace_with(*router); // keeps `current`'s stats
//!     builder.recycle(old);
//!     assert_eq!((version, current.len()), (7, 1));
//! }
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::sync::Stopped;
use super::{RouteSpec, Router, SyncMode, SyncReport};
use crate::error::Error;
use crate::limits::Limits;
use crate::route_list::{Problem, RouteList};
use crate::schema::Schema;

/// A route of a list already read by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRoute {
    /// The route's id.
    pub id: Uuid,
    /// Its priority.
    pub priority: u64,
    /// Its expression text.
    pub expression: String,
}

/// A desired route list, as the caller hands it over.
pub enum RouteInput {
    /// Routes read by the caller, with the routes it could not read (bad ids, text that is not
    /// UTF-8: their `line` is their position in the caller's list, from 1).
    Routes {
        /// The routes read, in list order.
        routes: Vec<OwnedRoute>,
        /// Their positions in the caller's list, from 1 (the same length as `routes`).
        lines: Vec<usize>,
        /// The routes that could not be read.
        problems: Vec<Problem>,
    },
    /// A list in text (TSV or JSON, see [`crate::route_list`]), read on the builder's thread:
    /// the caller decodes nothing.
    Text(Box<dyn AsRef<[u8]> + Send>),
}

impl std::fmt::Debug for RouteInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouteInput::Routes { routes, .. } => write!(f, "Routes({} routes)", routes.len()),
            RouteInput::Text(t) => write!(f, "Text({} bytes)", t.as_ref().as_ref().len()),
        }
    }
}

impl RouteInput {
    /// Routes read by the caller, all readable.
    pub fn routes(routes: Vec<OwnedRoute>) -> RouteInput {
        let lines = (1..=routes.len()).collect();
        RouteInput::Routes {
            routes,
            lines,
            problems: Vec::new(),
        }
    }
}

/// Why a route of a list was left out, or made the list refused.
#[derive(Debug, Clone)]
pub enum ListError {
    /// The route could not be read (see [`crate::route_list::ProblemKind`]).
    Unreadable(Problem),
    /// The route was read and the router refused it (syntax, validation, limits).
    Invalid {
        /// Its line in the text, or its position in the caller's list (from 1).
        line: usize,
        /// Its id.
        id: Uuid,
        /// Why.
        error: Error,
    },
}

impl ListError {
    /// The route's line in the text, or its position in the list (from 1).
    pub fn line(&self) -> usize {
        match self {
            ListError::Unreadable(p) => p.line,
            ListError::Invalid { line, .. } => *line,
        }
    }

    /// The route's id, when it could be read.
    pub fn id(&self) -> Option<Uuid> {
        match self {
            ListError::Unreadable(p) => p.id,
            ListError::Invalid { id, .. } => Some(*id),
        }
    }
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::Unreadable(p) => write!(f, "route at line {}: {}", p.line, p.message),
            ListError::Invalid { line, id, error } => {
                write!(f, "route {id} at line {line}: {error}")
            }
        }
    }
}

/// What a build came to.
#[derive(Debug)]
pub enum Outcome {
    /// The new table, ready to swap in.
    Built {
        /// The version submitted with its list.
        version: u64,
        /// The new table.
        router: Box<Router>,
        /// What changed from the table it was built from (the shadow, or nothing for a fresh
        /// build), and the routes apply-valid left out.
        report: SyncReport,
        /// Apply-valid: the routes left out or kept at their current version, with why.
        errors: Vec<ListError>,
        /// See [`Outcome::build_time`].
        build_time: Duration,
    },
    /// The list was refused (all or nothing: some route invalid; or a text that is not a
    /// route list at all): the current table stays.
    Refused {
        /// The version submitted with it.
        version: u64,
        /// Every invalid route (empty when the text as a whole could not be read).
        errors: Vec<ListError>,
        /// What was wrong, in one line.
        message: String,
        /// See [`Outcome::build_time`].
        build_time: Duration,
    },
    /// The build panicked (a bug): the current table stays.
    Panicked {
        /// The version being built.
        version: u64,
        /// The panic's message.
        message: String,
        /// See [`Outcome::build_time`].
        build_time: Duration,
    },
}

impl Outcome {
    /// The version the outcome is for.
    pub fn version(&self) -> u64 {
        match self {
            Outcome::Built { version, .. }
            | Outcome::Refused { version, .. }
            | Outcome::Panicked { version, .. } => *version,
        }
    }

    /// How long the builder's thread took from taking up the list to the outcome (wall clock:
    /// reading, preparing and building; not the time the list waited in the queue). What a
    /// caller records as the update's build time ([`Router::record_update`]).
    pub fn build_time(&self) -> Duration {
        match self {
            Outcome::Built { build_time, .. }
            | Outcome::Refused { build_time, .. }
            | Outcome::Panicked { build_time, .. } => *build_time,
        }
    }

    /// The outcome with its build time, which `Worker::run` measures around the build.
    fn timed(mut self, took: Duration) -> Outcome {
        match &mut self {
            Outcome::Built { build_time, .. }
            | Outcome::Refused { build_time, .. }
            | Outcome::Panicked { build_time, .. } => *build_time = took,
        }
        self
    }
}

/// Where the builder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildState {
    /// Nothing submitted that is not taken.
    Idle,
    /// A version is queued or being built (the newest submitted).
    Building(u64),
    /// An outcome waits to be taken (and no newer version is submitted).
    Ready(u64),
}

/// A job for the thread.
#[derive(Debug)]
struct Job {
    version: u64,
    input: RouteInput,
    mode: SyncMode,
}

/// What the caller and the thread share.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// An outcome waits in `state.result`: what a caller checks on every request, without the
    /// lock.
    ready: AtomicBool,
    /// Set when the builder is dropped: the thread stops between two routes.
    stop: AtomicBool,
    /// A job waits in `state.queued`: a shadow being built gives way to it.
    queued: AtomicBool,
    /// The thread is working (a build, or keeping its shadow), not waiting for work.
    busy: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    queued: Option<Job>,
    /// An outcome the caller never took, superseded by a newer submission before it was:
    /// its router is the best base for that submission.
    base: Option<Box<Router>>,
    /// The version the thread is building, if any.
    building: Option<u64>,
    result: Option<Outcome>,
    /// Routers the caller replaced, to become the shadow or be freed here.
    recycled: Vec<Router>,
    /// The caller changed its router directly: the shadow no longer mirrors it, and this is
    /// what the router holds now.
    rebased: Option<Vec<OwnedRoute>>,
}

/// Builds a router's next tables on a thread of its own (see the module docs).
#[derive(Debug)]
pub struct Builder {
    schema: Arc<Schema>,
    limits: Limits,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// The process the thread was started in: after a fork, the child has the handle but not
    /// the thread.
    pid: u32,
    /// The newest version submitted.
    submitted: Option<u64>,
    /// Run first on the thread (see [`Builder::on_thread_start`]).
    on_start: Option<fn()>,
}

/// Longest TSV line a list in text may have: the longest expression and room for the rest.
const LIST_LINE_SLACK: usize = 256;

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // The thread catches panics around builds, so a poisoned lock only means a panic while
    // the lock was held by code that leaves the state consistent (a field assignment).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Builder {
    /// A builder for routers of `schema` with `limits`. No thread yet.
    pub fn new(schema: Arc<Schema>, limits: Limits) -> Builder {
        Builder {
            schema,
            limits,
            shared: Arc::default(),
            thread: None,
            pid: std::process::id(),
            submitted: None,
            on_start: None,
        }
    }

    /// Has the thread run `hook` first, before any build, in the process that starts it: for
    /// what only the thread itself can set, such as its scheduling priority (the C library
    /// lowers it, so that a build takes the CPU the requests leave rather than competing with
    /// them). Takes effect for a thread not yet started.
    pub fn on_thread_start(&mut self, hook: fn()) {
        self.on_start = Some(hook);
    }

    /// Forgets a thread and state inherited through a fork: the thread does not exist in this
    /// process, and its lock may have been held at the fork.
    fn check_process(&mut self) {
        let pid = std::process::id();
        if pid == self.pid {
            return;
        }
        self.pid = pid;
        // Neither joined nor dropped: the thread is not ours, and the state may be locked.
        if let Some(t) = self.thread.take() {
            std::mem::forget(t);
        }
        std::mem::forget(std::mem::take(&mut self.shared));
        self.submitted = None;
    }

    /// Submits `input` as version `version`: it replaces a list queued and not yet started.
    /// Returns the version it replaced, if any. Starts the thread on first use.
    pub fn submit(&mut self, version: u64, input: RouteInput, mode: SyncMode) -> Option<u64> {
        self.check_process();
        if self.thread.is_none() {
            self.thread = Some(self.spawn());
        }
        self.submitted = Some(version);
        let replaced = {
            let mut st = lock(&self.shared.state);
            // An outcome not taken is older than this submission: never to be taken now.
            if let Some(old) = st.result.take() {
                self.shared.ready.store(false, Ordering::Release);
                if let Outcome::Built { router, .. } = old {
                    st.base = Some(router);
                }
            }
            let replaced = st.queued.replace(Job {
                version,
                input,
                mode,
            });
            self.shared.queued.store(true, Ordering::Release);
            replaced.map(|j| j.version)
        };
        self.shared.wake.notify_one();
        replaced
    }

    /// Whether an outcome waits to be taken: one atomic load, for a check on every request.
    #[inline]
    pub fn is_ready(&self) -> bool {
        self.shared.ready.load(Ordering::Acquire)
    }

    /// Whether the thread has work in hand: a build, or bringing its copy of the current table
    /// up to date (which makes the next small change cheap). For tests and benchmarks that
    /// want to measure a push from a settled builder.
    pub fn is_busy(&mut self) -> bool {
        self.check_process();
        if self.thread.is_none() {
            return false;
        }
        let st = lock(&self.shared.state);
        st.queued.is_some() || !st.recycled.is_empty() || self.shared.busy.load(Ordering::Acquire)
    }

    /// Where the builder is.
    pub fn state(&mut self) -> BuildState {
        self.check_process();
        let st = lock(&self.shared.state);
        if let Some(j) = &st.queued {
            return BuildState::Building(j.version);
        }
        if let Some(v) = st.building {
            return BuildState::Building(v);
        }
        match &st.result {
            Some(o) => BuildState::Ready(o.version()),
            None => BuildState::Idle,
        }
    }

    /// Takes the outcome that waits, if any.
    pub fn take(&mut self) -> Option<Outcome> {
        self.check_process();
        let mut st = lock(&self.shared.state);
        let out = st.result.take();
        self.shared.ready.store(false, Ordering::Release);
        out
    }

    /// Hands back a router a built one replaced: it becomes the next shadow, or is freed, on
    /// the builder's thread (freeing a large table costs milliseconds).
    pub fn recycle(&mut self, old: Router) {
        self.check_process();
        if self.thread.is_none() {
            // Nothing built here yet (or a fork lost the thread): free it now.
            return;
        }
        lock(&self.shared.state).recycled.push(old);
        self.shared.wake.notify_one();
    }

    /// Tells the builder what the caller's router holds after the caller changed it directly
    /// (an add, a remove, a synchronous sync): its copy no longer mirrors it and is dropped,
    /// and the next build counts against, and keeps current versions from, `current`. Copies
    /// the routes' ids, priorities and texts (O(routes)): call it once before the next
    /// submission, not after every direct change.
    pub fn rebase(&mut self, current: &Router) {
        self.check_process();
        let held = held_routes(current);
        lock(&self.shared.state).rebased = Some(held);
    }

    fn spawn(&self) -> JoinHandle<()> {
        let shared = self.shared.clone();
        let schema = self.schema.clone();
        let limits = self.limits;
        let on_start = self.on_start;
        std::thread::Builder::new()
            .name("atc-router-builder".into())
            .stack_size(4 << 20)
            .spawn(move || {
                if let Some(hook) = on_start {
                    hook();
                }
                Worker::new(shared, schema, limits).run()
            })
            .expect("spawning the builder thread")
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        self.check_process();
        if let Some(t) = self.thread.take() {
            {
                // Under the lock: the thread checks `stop` under it before it waits, so the
                // wake-up cannot fall between its check and its wait.
                let _st = lock(&self.shared.state);
                self.shared.stop.store(true, Ordering::Release);
            }
            self.shared.wake.notify_one();
            let _ = t.join();
        }
    }
}

/// The thread's side.
struct Worker {
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
    fn new(shared: Arc<Shared>, schema: Arc<Schema>, limits: Limits) -> Worker {
        Worker {
            shared,
            schema,
            limits,
            shadow: None,
            last: None,
            want_shadow: false,
        }
    }

    fn run(mut self) {
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
                        Ok(Some(outcome)) => outcome.timed(build_time),
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
fn held_routes(router: &Router) -> Vec<OwnedRoute> {
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
        RouteInput::Routes {
            routes,
            lines,
            problems,
        } => Ok((routes, lines, problems)),
        RouteInput::Text(text) => {
            let max_line = limits.max_expression_len.saturating_add(LIST_LINE_SLACK);
            let list = RouteList::read((*text).as_ref(), max_line)?;
            let lines = list.entries.iter().map(|e| e.line).collect();
            let routes = list
                .entries
                .into_iter()
                .map(|e| OwnedRoute {
                    id: e.id,
                    priority: e.priority,
                    expression: e.expression,
                })
                .collect();
            Ok((routes, lines, list.problems))
        }
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
