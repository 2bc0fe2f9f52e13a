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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use uuid::Uuid;

use super::{Router, SyncMode, SyncReport};
use crate::error::Error;
use crate::limits::Limits;
use crate::route_list::Problem;
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
        /// What the builder's publish hook made of the table, if one is set
        /// ([`Builder::publish_with`]): where it published it, or why it could not.
        published: Option<Result<String, String>>,
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
    pub(super) fn timed(mut self, took: Duration) -> Outcome {
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
pub(super) struct Job {
    pub(super) version: u64,
    pub(super) input: RouteInput,
    pub(super) mode: SyncMode,
}

/// What the caller and the thread share.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    pub(super) wake: Condvar,
    /// An outcome waits in `state.result`: what a caller checks on every request, without the
    /// lock.
    pub(super) ready: AtomicBool,
    /// Set when the builder is dropped: the thread stops between two routes.
    pub(super) stop: AtomicBool,
    /// A job waits in `state.queued`: a shadow being built gives way to it.
    pub(super) queued: AtomicBool,
    /// The thread is working (a build, or keeping its shadow), not waiting for work.
    pub(super) busy: AtomicBool,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) queued: Option<Job>,
    /// An outcome the caller never took, superseded by a newer submission before it was:
    /// its router is the best base for that submission.
    pub(super) base: Option<Box<Router>>,
    /// The version the thread is building, if any.
    pub(super) building: Option<u64>,
    pub(super) result: Option<Outcome>,
    /// Routers the caller replaced, to become the shadow or be freed here.
    pub(super) recycled: Vec<Router>,
    /// The caller changed its router directly: the shadow no longer mirrors it, and this is
    /// what the router holds now.
    pub(super) rebased: Option<Vec<OwnedRoute>>,
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
    /// Run on the thread after each build (see [`Builder::publish_with`]).
    publish: Option<PublishHook>,
}

/// What a builder does with every table it builds, on its thread (see
/// [`Builder::publish_with`]): given the version and the table, where it published it, or why
/// it could not.
pub type Publish = Box<dyn FnMut(u64, &Router) -> Result<String, String> + Send>;

/// A [`Publish`] hook, shared by the threads a builder starts (one per process it runs in),
/// and whether the caller keeps the tables it publishes.
#[derive(Clone)]
pub(super) struct PublishHook(pub(super) Arc<Mutex<Publish>>, pub(super) bool);

impl std::fmt::Debug for PublishHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PublishHook")
    }
}

/// Longest TSV line a list in text may have: the longest expression and room for the rest.
pub(super) const LIST_LINE_SLACK: usize = 256;

pub(super) fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
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
            publish: None,
        }
    }

    /// Has the thread pass every table it builds to `hook` before the table is ready, and
    /// report what the hook returned in [`Outcome::Built`]'s `published`: for work on the new
    /// table that must not hold the caller, such as writing it as a table image
    /// ([`Router::to_image`]) for other processes. A panic in the hook is caught and reported
    /// as its error. Takes effect for a thread not yet started.
    ///
    /// `keep_tables: false` is for a caller that matches from what the hook published (the
    /// processes of a node sharing one table image): a table the hook published is then kept
    /// by the thread alone, as its copy for the next build, and the outcome carries an empty
    /// router in its place, so that the caller's process holds the table once, not twice. A
    /// table the hook failed to publish is handed over as usual.
    pub fn publish_with(&mut self, hook: Publish, keep_tables: bool) {
        self.publish = Some(PublishHook(Arc::new(Mutex::new(hook)), keep_tables));
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
        let held = super::build_worker::held_routes(current);
        lock(&self.shared.state).rebased = Some(held);
    }

    fn spawn(&self) -> JoinHandle<()> {
        let shared = self.shared.clone();
        let schema = self.schema.clone();
        let limits = self.limits;
        let on_start = self.on_start;
        let publish = self.publish.clone();
        std::thread::Builder::new()
            .name("atc-router-builder".into())
            .stack_size(4 << 20)
            .spawn(move || {
                if let Some(hook) = on_start {
                    hook();
                }
                super::build_worker::Worker::new(shared, schema, limits, publish).run()
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
