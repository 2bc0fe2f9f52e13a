//! Building a router's next tables off the request path.
//!
//! A [`Builder`] owns a thread, started the first time a list is submitted (never before: a
//! router made before a process forks, as nginx's master makes it, builds in each worker with
//! a thread of that worker's own). The caller submits a whole desired list, or a list of
//! changes, with a version ([`Builder::submit`]); the thread reads it (a list in text is parsed
//! there), prepares and builds the new table, and leaves the outcome; the caller, between two
//! requests, takes it with [`Builder::apply_to`], which swaps the new table for the caller's in
//! O(1) and hands the replaced one back to the thread. Matching never waits for any of it.
//!
//! **A push costs what changed.** The thread keeps a copy of the current table (its *shadow*):
//! a whole list that changes a few routes, or a list of changes, is applied to the shadow route
//! by route, and the shadow becomes the new table. The table the caller hands back is then
//! brought level with it by the same changes (what the build changed, never the whole list)
//! and becomes the next shadow. When most routes of a whole list change (or there is no
//! shadow: the first build, or the caller changed its router directly), a fresh router is built
//! from the list instead.
//!
//! **Who builds, and when.** The thread that builds runs at the priority its start hook gives
//! it ([`Builder::on_thread_start`]: the C library puts it under `SCHED_IDLE`, so that it takes
//! only the CPU requests leave). A builder that may only take idle CPU cannot finish while
//! requests take every CPU; with [`Builder::boost_after`], a second thread, started at the
//! caller's priority, takes the work over once the oldest version without an outcome has waited
//! that long: the first thread gives the build up at its next check (between two routes; what
//! it had prepared is dropped, nothing was changed yet) and the second one builds it, and every
//! version after it, until nothing waits. With [`Builder::build_threads`], a fresh build also
//! runs on helper threads that the lane building it starts for that build and joins before it
//! ends (see `threads.rs`): none exists between builds.
//!
//! Invariants (a reader must not break them):
//! - **Order.** Every version submitted gets exactly one outcome, in the order submitted. A
//!   whole list supersedes the versions queued before it and not yet started (their outcome is
//!   [`Outcome::Superseded`]: never built); a list of changes supersedes nothing, since each
//!   change must reach the table. A version being built is finished.
//! - **Consistency.** A built table holds exactly its list applied to the table of the version
//!   before it (or, in apply-valid mode, its valid routes, and the current version of known
//!   routes whose new version is invalid); the caller's router is never touched by the thread.
//!   A build starts from the shadow only: while the newest table is with the caller and the
//!   table it replaced has not come back, the next build waits for it.
//! - **Memory.** The thread holds at most one table besides the caller's current one: the
//!   shadow, or the table being built (a fresh build drops the shadow first), or a built table
//!   not yet taken. It also keeps the routes of the newest table (ids, priorities, texts), to
//!   build a shadow when it has none and to keep a known route's version in apply-valid mode.
//! - **Faults.** A panic while building is caught: the outcome reports it, the shadow and the
//!   routes it kept are dropped (they may be half-changed), the caller's router keeps serving;
//!   a list of changes is refused until the thread knows the table again (a whole list, or
//!   [`Builder::rebase`]). Dropping the [`Builder`] stops its threads between two routes and
//!   joins them.
//!
//! ```
//! use std::sync::Arc;
//! use atc_router::{Builder, Outcome, RouteInput, RouteSpec, Router, Schema, SyncMode, Type, Uuid};
//!
//! let mut schema = Schema::new();
//! schema.add_field("http.path", Type::String).unwrap();
//! let schema = Arc::new(schema);
//! let mut current = Router::new(schema.clone());
//! let mut builder = Builder::new(schema, Default::default());
//!
//! let list = [RouteSpec { id: Uuid::from_u128(1), priority: 1, expression: r#"http.path ^= "/a""# }];
//! builder.submit(7, RouteInput::routes(&list), SyncMode::AllOrNothing);
//! // ... `current` answers requests meanwhile; between two of them:
//! while !builder.is_ready() {
//!     std::thread::sleep(std::time::Duration::from_millis(1));
//! }
//! match builder.apply_to(&mut current) {
//!     Some(Outcome::Built { version, .. }) => assert_eq!((version, current.len()), (7, 1)),
//!     other => panic!("{other:?}"),
//! }
//! ```

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::build_io::{BuildState, Keep, Lane, Outcome, Publish, PublishHook, RouteInput};
use super::build_worker::{lock, Job, Shared, Worker};
use super::held::HeldCopy;
use super::{Router, SyncMode};
use crate::limits::Limits;
use crate::schema::Schema;
use crate::threads::BuildThreads;

/// Builds a router's next tables on a thread of its own (see the module docs).
#[derive(Debug)]
pub struct Builder {
    schema: Arc<Schema>,
    limits: Limits,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// The process the threads were started in: after a fork, the child has the handles but
    /// not the threads.
    pid: u32,
    /// Run first on each thread (see [`Builder::on_thread_start`]).
    on_start: Option<fn(Lane)>,
    /// Run first on each helper thread of a build (see [`Builder::on_helper_start`]).
    on_helper: Option<fn(Lane)>,
    /// Run on the thread after each build (see [`Builder::publish_with`]).
    publish: Option<PublishHook>,
    boost_after: Option<Duration>,
    /// The threads a fresh build may use (see [`Builder::build_threads`]).
    build_threads: BuildThreads,
}

impl Builder {
    /// A builder for routers of `schema` with `limits`. No thread yet.
    pub fn new(schema: Arc<Schema>, limits: Limits) -> Builder {
        Builder {
            schema,
            limits,
            shared: Arc::default(),
            threads: Vec::new(),
            pid: std::process::id(),
            on_start: None,
            on_helper: None,
            publish: None,
            boost_after: None,
            build_threads: BuildThreads::ONE,
        }
    }

    /// Has the thread pass every table it builds to `hook` before the table is ready, and
    /// report what the hook returned in [`Outcome::Built`]'s `published`: for work on the new
    /// table that must not hold the caller, such as writing it as a table image
    /// ([`Router::to_image`]) for other processes. A panic in the hook is caught and reported
    /// as its error. Takes effect for threads not yet started.
    ///
    /// `keep_tables: false` is for a caller that matches from what the hook published (the
    /// processes of a node sharing one table image): a table the hook published is then kept
    /// by the thread alone, as its copy for the next build, and the caller gets an empty router
    /// in its place, so that the caller's process holds the table once, not twice. A table the
    /// hook failed to publish is handed over as usual.
    pub fn publish_with(&mut self, hook: Publish, keep_tables: bool) {
        self.publish = Some(PublishHook(Arc::new(Mutex::new(hook)), keep_tables));
    }

    /// Has each thread run `hook` first, before any build, in the process that starts it, with
    /// the lane it serves: for what only a thread itself can set, such as its scheduling
    /// policy (the C library puts the background lane under `SCHED_IDLE`). Takes effect for
    /// threads not yet started.
    pub fn on_thread_start(&mut self, hook: fn(Lane)) {
        self.on_start = Some(hook);
    }

    /// Has each helper thread a build starts ([`Builder::build_threads`]) run `hook` first,
    /// with the lane it helps. A helper is started by that lane's thread, after the lane's
    /// start hook ran there, and inherits what the system passes on to a new thread (on Linux,
    /// the scheduling policy and the nice value): this hook is for what is not inherited, or
    /// to set again as an absolute value. It is not [`Builder::on_thread_start`]'s hook run a
    /// second time, since a hook that lowers a thread's priority by a step would then put a
    /// helper a step below its lane. Takes effect for threads not yet started.
    pub fn on_helper_start(&mut self, hook: fn(Lane)) {
        self.on_helper = Some(hook);
    }

    /// How many threads (1, the default, to [`crate::MAX_BUILD_THREADS`]) a build of a fresh
    /// table (a whole list most of which is new, a first load above all) may use: the lane's
    /// own and up to `threads - 1` helpers, started for that build and joined before it ends,
    /// each running the helper hook first ([`Builder::on_helper_start`]). The table is exactly
    /// the one one thread builds; a build given up stops its helpers at their next piece of
    /// routes to prepare (a few hundred; an index build under way ends first, as on one
    /// thread). Builds that change a table route by route use one thread. Out of
    /// range: an error, nothing changed. Takes effect for threads not yet started.
    pub fn build_threads(&mut self, threads: usize) -> Result<(), crate::error::Error> {
        self.build_threads = self.build_threads.with_count(threads)?;
        Ok(())
    }

    /// With `Some(wait)`, a second thread (the [`Lane::Boosted`] lane, started with the first
    /// one, at the starting thread's priority) takes the work over once the oldest version
    /// without an outcome has waited `wait` (see the module docs); `None` (the default): one
    /// thread does everything. Takes effect for threads not yet started.
    pub fn boost_after(&mut self, wait: Option<Duration>) {
        self.boost_after = wait;
    }

    /// Whether the thread keeps a shadow of the newest table between builds (the default):
    /// a push of a few changes then costs what changed, for a second table's memory on the
    /// thread. Without, every build is a fresh one from the routes the thread knows, and the
    /// table a caller hands back is freed: for a caller that changes its router directly
    /// between background builds (each such build starts over anyway). Takes effect from the
    /// thread's next task; a shadow held is dropped then.
    pub fn keep_shadow(&mut self, keep: bool) {
        self.check_process();
        lock(&self.shared.state).drop_shadow = !keep;
        self.shared.wake.notify_all();
    }

    /// Forgets threads and state inherited through a fork: the threads do not exist in this
    /// process, and their lock may have been held at the fork.
    fn check_process(&mut self) {
        let pid = std::process::id();
        if pid == self.pid {
            return;
        }
        self.pid = pid;
        // Neither joined nor dropped: the threads are not ours, and the state may be locked.
        for t in self.threads.drain(..) {
            std::mem::forget(t);
        }
        std::mem::forget(std::mem::take(&mut self.shared));
    }

    /// Submits `input` as version `version`. A whole list supersedes the versions queued and
    /// not yet started; a list of changes is queued behind them. Starts the threads on first
    /// use.
    pub fn submit(&mut self, version: u64, input: RouteInput, mode: SyncMode) {
        self.check_process();
        if self.threads.is_empty() {
            self.spawn();
        }
        {
            let mut st = lock(&self.shared.state);
            if !input.is_changes() {
                for j in st.queue.iter_mut() {
                    j.superseded_by.get_or_insert(version);
                }
            }
            st.queue.push_back(Job {
                version,
                input,
                mode,
                submitted: Instant::now(),
                superseded_by: None,
            });
            self.shared.queued.store(true, Ordering::Release);
        }
        self.shared.wake.notify_all();
    }

    /// Whether an outcome waits to be taken: one atomic load, for a check on every request.
    #[inline]
    pub fn is_ready(&self) -> bool {
        self.shared.ready.load(Ordering::Acquire)
    }

    /// Whether the threads have work in hand: a build, or bringing their copy of the current
    /// table up to date (which makes the next small change cheap). For tests and benchmarks
    /// that want to measure a push from a settled builder.
    pub fn is_busy(&mut self) -> bool {
        self.check_process();
        if self.threads.is_empty() {
            return false;
        }
        let st = lock(&self.shared.state);
        !st.queue.is_empty()
            || !st.recycled.is_empty()
            || st.worker.as_ref().is_some_and(Worker::has_work)
            || self.shared.busy.load(Ordering::Acquire)
    }

    /// Where the builder is.
    pub fn state(&mut self) -> BuildState {
        self.check_process();
        let st = lock(&self.shared.state);
        if let Some(j) = st.queue.back() {
            return BuildState::Building(j.version);
        }
        if let Some(v) = st.building {
            return BuildState::Building(v);
        }
        match st.results.back() {
            Some(d) => BuildState::Ready(d.outcome.version()),
            None => BuildState::Idle,
        }
    }

    /// Takes the next outcome, if one waits. A built table is swapped into `current` (keeping
    /// `current`'s stats: [`Router::replace_with`]), and the table it replaces goes back to the
    /// thread, to be brought level and become the next shadow, or to be freed there (freeing a
    /// large table costs milliseconds). Outcomes come one per version, in the order submitted.
    pub fn apply_to(&mut self, current: &mut Router) -> Option<Outcome> {
        self.apply_keeping(current).map(|(outcome, _keep)| outcome)
    }

    /// [`Builder::apply_to`], and what the publish hook asked to keep alive with the table.
    pub(crate) fn apply_keeping(
        &mut self,
        current: &mut Router,
    ) -> Option<(Outcome, Option<Keep>)> {
        self.check_process();
        let mut st = lock(&self.shared.state);
        let done = st.results.pop_front()?;
        if st.results.is_empty() {
            self.shared.ready.store(false, Ordering::Release);
        }
        if let Some(table) = done.table {
            let old = current.replace_with(*table);
            st.recycled.push(old);
            drop(st);
            self.shared.wake.notify_all();
        }
        Some((done.outcome, done.keep))
    }

    /// Tells the builder what the caller's router holds after the caller changed it directly
    /// (an add, a remove, a synchronous sync): its copy no longer mirrors it and is dropped,
    /// and the next build applies to, and keeps current versions from, `current`. Copies the
    /// routes' ids, priorities and texts (O(routes), into one buffer; the thread indexes them):
    /// call it once before the next submission, not after every direct change.
    pub fn rebase(&mut self, current: &Router) {
        self.check_process();
        let copy = HeldCopy::of(current);
        lock(&self.shared.state).rebased = Some(copy);
    }

    fn spawn(&mut self) {
        {
            let mut st = lock(&self.shared.state);
            st.worker = Some(Worker::new(
                self.schema.clone(),
                self.limits,
                self.publish.clone(),
                self.build_threads,
                self.on_helper,
            ));
            st.boost_after = self.boost_after;
        }
        let lanes: &[Lane] = match self.boost_after {
            Some(_) => &[Lane::Background, Lane::Boosted],
            None => &[Lane::Background],
        };
        for &lane in lanes {
            let shared = self.shared.clone();
            let on_start = self.on_start;
            let name = match lane {
                Lane::Background => "atc-router-builder",
                Lane::Boosted => "atc-router-boost",
            };
            self.threads.push(
                std::thread::Builder::new()
                    .name(name.into())
                    .stack_size(4 << 20)
                    .spawn(move || {
                        if let Some(hook) = on_start {
                            hook(lane);
                        }
                        super::build_lanes::run_lane(&shared, lane)
                    })
                    .expect("spawning a builder thread"),
            );
        }
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        self.check_process();
        if self.threads.is_empty() {
            return;
        }
        {
            // Under the lock: the threads check `stop` under it before they wait, so the
            // wake-up cannot fall between a check and a wait.
            let _st = lock(&self.shared.state);
            self.shared.stop.store(true, Ordering::Release);
        }
        self.shared.wake.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
