//! The builder's threads: take the oldest submitted list, build its table (patching the shadow
//! when few routes change, a fresh router otherwise), leave the outcome for the caller, and
//! bring tables the caller hands back level with the newest one to serve as the next shadow.
//! The caller's side, and the invariants both keep, are in `builder.rs`.
//!
//! Both lanes (see [`Lane`]) run `build_lanes.rs`'s loop over the [`Worker`] and the
//! [`State`] it shares with the caller. The background lane gives a task up when the boosted
//! lane takes the turn: every task it can give up is one that has changed nothing yet
//! (preparing a plan, building a fresh router), so the boosted lane redoes it from the start.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::build_io::{Done, EntryError, Lane, Outcome, PublishHook, RouteInput, LIST_LINE_SLACK};
use super::entry_errors::refusal_message;
use super::held::{Held, HeldCopy};
use super::sync_classify::ListKind;
use super::sync_plan::Stopped;
use super::{EntryFault, Router, SyncMode, SyncReport};
use crate::limits::Limits;
use crate::route_list::{Entry, EntryList};
use crate::schema::Schema;
use crate::threads::{BuildThreads, Helpers};

/// A job for the thread.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) version: u64,
    pub(super) input: RouteInput,
    pub(super) mode: SyncMode,
    /// When it was submitted: how long it has waited decides a boost.
    pub(super) submitted: Instant,
    /// A whole list submitted later took its place before it was started.
    pub(super) superseded_by: Option<u64>,
}

/// What the caller and the threads share.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// Wakes the threads (work, a recycled table, a boost, a stop).
    pub(super) wake: Condvar,
    /// An outcome waits in `state.results`: what a caller checks on every request, without
    /// the lock.
    pub(super) ready: AtomicBool,
    /// Set when the builder is dropped: the threads stop between two routes.
    pub(super) stop: AtomicBool,
    /// The boosted lane has the work (mirrors `state.boosted`, for the background lane's
    /// checks between two routes).
    pub(super) boosted: AtomicBool,
    /// A thread is working (a build, or keeping its shadow), not waiting for work.
    pub(super) busy: AtomicBool,
    /// A version waits in `state.queue`: a shadow being built for later gives way to it.
    pub(super) queued: AtomicBool,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) queue: VecDeque<Job>,
    /// Outcomes not yet taken, in version order; only a built one carries a table.
    pub(super) results: VecDeque<Done>,
    /// Tables the caller replaced, to become the shadow or be freed here.
    pub(super) recycled: Vec<Router>,
    /// The caller changed its router directly: the shadow no longer mirrors it, and these are
    /// the routes it holds now, as the caller copied them. A lane indexes the copy without
    /// the lock (`rebasing` meanwhile) into `rebased_held`, which the next task takes; a newer
    /// copy arriving meanwhile supersedes it.
    pub(super) rebased: Option<HeldCopy>,
    pub(super) rebasing: bool,
    pub(super) rebased_held: Option<Held>,
    /// Keep no shadow ([`Builder::keep_shadow`]).
    pub(super) drop_shadow: bool,
    /// The version a thread is building, if any, and when it was submitted.
    pub(super) building: Option<u64>,
    pub(super) building_since: Option<Instant>,
    /// The thread side, while no lane works with it.
    pub(super) worker: Option<Worker>,
    /// The boosted lane has the work.
    pub(super) boosted: bool,
    /// How long a version may wait before the boosted lane takes over (`None`: no such lane).
    pub(super) boost_after: Option<Duration>,
}

impl State {
    /// When the oldest version without an outcome was submitted (the one being built, or the
    /// first queued).
    pub(super) fn waiting_since(&self) -> Option<Instant> {
        self.building_since
            .or_else(|| self.queue.front().map(|j| j.submitted))
    }
}

pub(super) fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // The threads catch panics around builds, so a poisoned lock only means a panic while
    // the lock was held by code that leaves the state consistent (a field assignment).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The thread side of a builder: its copy of the table and what it knows of the caller's.
#[derive(Debug)]
pub(super) struct Worker {
    schema: std::sync::Arc<Schema>,
    limits: Limits,
    publish: Option<PublishHook>,
    /// A copy of the newest table built (see the module docs of `builder.rs`).
    shadow: Option<Box<Router>>,
    /// The newest table built is with the caller: the table it replaced comes back (recycled),
    /// and these changes bring it level (`None`: a fresh build, which nothing brings a table
    /// level with).
    out: Option<Option<EntryList>>,
    /// The routes of the newest table; `None` when the thread does not know them (nothing
    /// built yet, or a panic lost them).
    last: Option<Held>,
    /// Whether the thread knows what the caller's table holds (its routes are `last`, or it
    /// is empty because nothing was built): a list of changes needs it.
    known: bool,
    /// No shadow mirrors the newest table: build one from `last` when nothing else waits.
    want_shadow: bool,
    /// The threads a fresh build may use ([`crate::Builder::build_threads`]).
    threads: BuildThreads,
    /// The builder's helper hook, run first on each helper thread of a build.
    on_helper: Option<fn(Lane)>,
    /// The lane working with the worker now (its helpers run the hook as that lane).
    pub(super) lane: Lane,
    /// Keep no shadow (`State::drop_shadow`, read with each task).
    drop_shadow: bool,
}

/// What a lane takes up next.
pub(super) enum Task {
    Build(Job),
    Converge(Box<Router>),
    /// Build a shadow from `last` (nothing else to do).
    Shadow,
}

/// What a task asks of the shared state once it is done.
#[derive(Default)]
pub(super) struct Effects {
    pub(super) done: Option<Done>,
    /// A job given up (the boosted lane took the turn): it goes back to the front.
    pub(super) requeue: Option<Job>,
    /// A recycled table whose bringing level was given up: it goes back too.
    pub(super) recycle: Option<Box<Router>>,
}

impl Worker {
    pub(super) fn new(
        schema: std::sync::Arc<Schema>,
        limits: Limits,
        publish: Option<PublishHook>,
        threads: BuildThreads,
        on_helper: Option<fn(Lane)>,
    ) -> Worker {
        Worker {
            schema,
            limits,
            publish,
            shadow: None,
            out: None,
            last: None,
            known: true,
            want_shadow: false,
            threads,
            on_helper,
            lane: Lane::Background,
            drop_shadow: false,
        }
    }

    /// What each helper thread of a build runs first: the builder's helper hook, with the
    /// lane it helps.
    fn helper_start(&self) -> impl Fn() + Sync {
        let (hook, lane) = (self.on_helper, self.lane);
        move || {
            if let Some(hook) = hook {
                hook(lane);
            }
        }
    }

    /// Whether the thread side has work of its own left (a shadow to build).
    pub(super) fn has_work(&self) -> bool {
        !self.drop_shadow
            && self.want_shadow
            && self.shadow.is_none()
            && self.out.is_none()
            && self.last.is_some()
    }

    fn empty(&self) -> Box<Router> {
        Box::new(Router::with_limits(self.schema.clone(), self.limits))
    }

    /// The next task for `lane`, taken from the shared state (under its lock). The boosted
    /// lane takes only what a waiting version needs.
    pub(super) fn next_task(&mut self, st: &mut State, lane: Lane) -> Option<Task> {
        self.drop_shadow = st.drop_shadow;
        if self.drop_shadow {
            self.shadow = None;
        }
        if let Some(held) = st.rebased_held.take() {
            self.shadow = None;
            self.last = Some(held);
            self.out = None;
            self.known = true;
            self.want_shadow = true;
        }
        if let Some(old) = st.recycled.pop() {
            return Some(Task::Converge(Box::new(old)));
        }
        while let Some(by) = st.queue.front().and_then(|j| j.superseded_by) {
            let job = st.queue.pop_front().expect("a front job");
            st.results.push_back(Done {
                outcome: Outcome::Superseded {
                    version: job.version,
                    by,
                },
                table: None,
                keep: None,
            });
        }
        if !st.queue.is_empty() {
            if self.out.is_some() {
                // The newest table is with the caller: its replaced table comes back first.
                return None;
            }
            let job = st.queue.pop_front().expect("a front job");
            st.building = Some(job.version);
            st.building_since = Some(job.submitted);
            return Some(Task::Build(job));
        }
        if lane == Lane::Background && self.has_work() {
            return Some(Task::Shadow);
        }
        None
    }

    /// Runs `task`; `stop` says when to give it up, and `queued` whether a version waits (a
    /// shadow built for later gives way to it: the version's build decides whether it needs one,
    /// and a whole list that is mostly new does not).
    pub(super) fn run(
        &mut self,
        task: Task,
        stop: &(dyn Fn() -> bool + Sync),
        queued: &(dyn Fn() -> bool + Sync),
    ) -> Effects {
        match task {
            Task::Converge(old) => self.converge(old, stop),
            Task::Shadow => {
                self.build_shadow(&|| stop() || queued());
                Effects::default()
            }
            Task::Build(mut job) => {
                let version = job.version;
                let started = Instant::now();
                let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.build(&mut job, stop)
                }));
                let build_time = started.elapsed();
                match built {
                    Ok(Some(mut done)) => {
                        set_build_time(&mut done.outcome, build_time);
                        Effects {
                            done: Some(done),
                            ..Effects::default()
                        }
                    }
                    // Given up (stopped, or the boosted lane took the turn).
                    Ok(None) => Effects {
                        requeue: Some(job),
                        ..Effects::default()
                    },
                    Err(panic) => {
                        self.shadow = None;
                        self.last = None;
                        self.out = None;
                        self.known = false;
                        self.want_shadow = false;
                        Effects {
                            done: Some(Done {
                                outcome: Outcome::Panicked {
                                    version,
                                    message: panic_message(&panic),
                                    build_time,
                                },
                                table: None,
                                keep: None,
                            }),
                            ..Effects::default()
                        }
                    }
                }
            }
        }
    }

    /// Builds `job`; `None` when it was given up (nothing changed: the job can start again).
    fn build(&mut self, job: &mut Job, stop: &(dyn Fn() -> bool + Sync)) -> Option<Done> {
        let version = job.version;
        crate::failpoint::build_hit(version);
        if let RouteInput::Text(text) = &job.input {
            let max_line = self
                .limits
                .max_expression_len
                .saturating_add(LIST_LINE_SLACK);
            match EntryList::read((**text).as_ref(), max_line) {
                // Kept read: a job given up and started again does not read it twice.
                Ok(list) => job.input = RouteInput::List(list),
                Err(why) => {
                    return Some(refused(
                        version,
                        Vec::new(),
                        format!("the list was refused, nothing changed: {why}"),
                    ))
                }
            }
        }
        if matches!(job.input, RouteInput::Lent { .. }) {
            let placeholder = RouteInput::List(EntryList::new());
            let RouteInput::Lent {
                mut list,
                changes,
                read,
            } = std::mem::replace(&mut job.input, placeholder)
            else {
                unreachable!("matched above")
            };
            // Read once: a job given up and started again builds from the copy.
            read(&mut list);
            job.input = match changes {
                true => RouteInput::Changes(list),
                false => RouteInput::List(list),
            };
        }
        let (list, kind) = match &job.input {
            RouteInput::List(l) => (l, ListKind::Whole),
            RouteInput::Changes(l) => (l, ListKind::Changes),
            RouteInput::Text(_) | RouteInput::Lent { .. } => unreachable!("read above"),
        };
        let entries = list.entries();
        let mode = job.mode;
        match kind {
            ListKind::Changes => self.build_changes(version, &entries, mode, stop),
            ListKind::Whole => self.build_whole(version, &entries, mode, stop),
        }
    }

    /// The table a build applies its list to: the shadow, or one built from the routes the
    /// thread knows, or an empty one when nothing was built yet. `Err(None)`: given up;
    /// `Err(Some(why))`: the thread does not know the caller's table.
    fn base(&mut self, stop: &(dyn Fn() -> bool + Sync)) -> Result<Box<Router>, Option<String>> {
        if let Some(s) = self.shadow.take() {
            return Ok(s);
        }
        if self.last.is_some() {
            if !self.build_shadow(stop) {
                return Err(None);
            }
            if let Some(s) = self.shadow.take() {
                return Ok(s);
            }
        }
        if self.known {
            return Ok(self.empty());
        }
        Err(Some(
            "the builder does not know the table in force (a build panicked): a list of \
             changes needs a whole list first"
                .to_owned(),
        ))
    }

    fn build_changes(
        &mut self,
        version: u64,
        entries: &[Entry<'_>],
        mode: SyncMode,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Option<Done> {
        let mut base = match self.base(stop) {
            Ok(b) => b,
            Err(None) => return None,
            Err(Some(why)) => return Some(refused(version, Vec::new(), why)),
        };
        match base.prepare_sync_with(entries, ListKind::Changes, mode, stop, false, Helpers::NONE) {
            Ok(plan) => {
                let changes = plan.changes();
                let report = base.apply(plan);
                base.settle_if_due();
                Some(self.built(version, base, changes, report))
            }
            Err(Stopped::Cancelled) => {
                self.shadow = Some(base);
                None
            }
            Err(Stopped::Refused(e)) => {
                self.shadow = Some(base);
                Some(refused(version, e.errors, String::new()))
            }
            Err(Stopped::Rebuild(_)) => unreachable!("a list of changes is never rebuilt"),
        }
    }

    fn build_whole(
        &mut self,
        version: u64,
        entries: &[Entry<'_>],
        mode: SyncMode,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Option<Done> {
        // Without a shadow, a list that is mostly new is built fresh at once, without making a
        // shadow first only to drop it.
        let mut counts = None;
        if self.shadow.is_none() {
            if let Some(last) = &self.last {
                let c = last.diff(entries);
                if (c.changed + c.removed) * 2 > last.len() || c.added > last.len() {
                    counts = Some(c);
                }
            }
        }
        if counts.is_none() && (self.shadow.is_some() || self.last.is_some()) {
            let mut base = match self.base(stop) {
                Ok(b) => b,
                Err(_) => return None,
            };
            match base.prepare_sync_with(entries, ListKind::Whole, mode, stop, false, Helpers::NONE)
            {
                Ok(plan) => {
                    let changes = plan.changes();
                    let report = base.apply(plan);
                    base.settle_if_due();
                    return Some(self.built(version, base, changes, report));
                }
                Err(Stopped::Rebuild(c)) => {
                    // Most routes change: the shadow goes first, never three tables at once.
                    drop(base);
                    self.want_shadow = true;
                    counts = Some(c);
                }
                Err(Stopped::Cancelled) => {
                    self.shadow = Some(base);
                    return None;
                }
                Err(Stopped::Refused(e)) => {
                    self.shadow = Some(base);
                    return Some(refused(version, e.errors, String::new()));
                }
            }
        }
        self.build_fresh(version, entries, mode, counts, stop)
    }

    /// A fresh router from the whole list; `counts` is what the list is to the caller's table
    /// (`None` when the thread knows no table: an empty one, or one a panic lost).
    fn build_fresh(
        &mut self,
        version: u64,
        entries: &[Entry<'_>],
        mode: SyncMode,
        counts: Option<SyncReport>,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Option<Done> {
        let mut fresh = self.empty();
        let hook = self.helper_start();
        let helpers = Helpers {
            threads: self.threads,
            on_start: &hook,
        };
        let plan =
            match fresh.prepare_sync_with(entries, ListKind::Whole, mode, stop, true, helpers) {
                Ok(plan) => plan,
                Err(Stopped::Cancelled) => return None,
                Err(Stopped::Refused(e)) => return Some(refused(version, e.errors, String::new())),
                Err(Stopped::Rebuild(_)) => unreachable!("a rebuild was allowed"),
            };
        let mut report = fresh.apply(plan);
        // What the list is to the caller's table, not to the empty router: counted before
        // parsing, so an invalid route counts as added or changed there; it is neither (a
        // known one keeps its current version, which the fresh router is given here).
        if let Some(c) = &counts {
            report.added = c.added;
            report.removed = c.removed;
            report.changed = c.changed;
            report.unchanged = c.unchanged;
        }
        if let Some(last) = &self.last {
            for e in &report.errors {
                let Some(id) = e.id else { continue };
                let invalid = match &e.fault {
                    EntryFault::Duplicate { .. } => continue,
                    EntryFault::Invalid(_) => true,
                    EntryFault::Unreadable { .. } => false,
                };
                match last.get(id) {
                    Some((priority, text)) => {
                        if invalid && counts.is_some() {
                            report.changed = report.changed.saturating_sub(1);
                        }
                        let _ = fresh.add(id, priority, text);
                    }
                    None if invalid && counts.is_some() => {
                        report.added = report.added.saturating_sub(1)
                    }
                    None => {}
                }
            }
        }
        Some(self.built(version, fresh, None, report))
    }

    /// The outcome of a table built, published if the builder publishes; `changes` is what it
    /// changed from the table it replaces (`None` for a fresh build).
    fn built(
        &mut self,
        version: u64,
        table: Box<Router>,
        changes: Option<EntryList>,
        report: SyncReport,
    ) -> Done {
        match (&mut self.last, &changes) {
            (Some(last), Some(c)) => last.apply(c),
            _ => self.last = Some(Held::of(&table)),
        }
        self.known = true;
        let (published, keep) = match self.publish.as_ref().map(|hook| {
            let mut hook = hook.0.lock().unwrap_or_else(|e| e.into_inner());
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (hook)(version, &table)))
                .unwrap_or_else(|p| Err(panic_message(&p)))
        }) {
            Some(Ok(p)) => (Some(Ok(p.path)), p.keep),
            Some(Err(why)) => (Some(Err(why)), None),
            None => (None, None),
        };
        let keeps = self.publish.as_ref().is_some_and(|h| !h.1);
        let out = if keeps && matches!(published, Some(Ok(_))) {
            // The caller matches from what was published: the thread keeps the table.
            self.shadow = Some(table);
            self.want_shadow = false;
            self.empty()
        } else {
            self.out = Some(changes);
            table
        };
        Done {
            outcome: Outcome::Built {
                version,
                report,
                build_time: Duration::ZERO, // set by `Worker::run`
                published,
            },
            table: Some(out),
            keep,
        }
    }

    /// Brings a table the caller replaced level with the newest one, to be the next shadow;
    /// or frees it, when nothing brings it level (a fresh build: the shadow is built from the
    /// routes instead) or the thread has its shadow already.
    fn converge(&mut self, mut old: Box<Router>, stop: &(dyn Fn() -> bool + Sync)) -> Effects {
        let Some(changes) = self.out.take() else {
            return Effects::default();
        };
        if self.drop_shadow {
            // Freed here, not kept level.
            drop(old);
            return Effects::default();
        }
        let Some(list) = changes else {
            drop(old);
            self.want_shadow = true;
            return Effects::default();
        };
        let entries = list.entries();
        let plan = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            old.prepare_sync_with(
                &entries,
                ListKind::Changes,
                SyncMode::AllOrNothing,
                stop,
                false,
                Helpers::NONE,
            )
        }));
        match plan {
            Ok(Ok(plan)) => {
                drop(entries);
                let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    old.apply(plan);
                    old
                }));
                match applied {
                    Ok(old) => {
                        self.shadow = Some(old);
                        self.want_shadow = false;
                    }
                    Err(_) => self.want_shadow = true,
                }
                Effects::default()
            }
            Ok(Err(Stopped::Cancelled)) => {
                drop(entries);
                self.out = Some(Some(list));
                Effects {
                    recycle: Some(old),
                    ..Effects::default()
                }
            }
            _ => {
                self.want_shadow = true;
                Effects::default()
            }
        }
    }

    /// Builds a shadow from the routes of the newest table (fresh: O(routes)); `false` when
    /// given up. Routes that do not build again (a panic) are forgotten: the table is unknown.
    fn build_shadow(&mut self, stop: &(dyn Fn() -> bool + Sync)) -> bool {
        let hook = self.helper_start();
        let helpers = Helpers {
            threads: self.threads,
            on_start: &hook,
        };
        let Some(last) = &self.last else {
            return true;
        };
        let specs = last.specs();
        let fresh = Router::with_limits(self.schema.clone(), self.limits);
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            match fresh.prepare_sync_with(
                &specs,
                ListKind::Whole,
                SyncMode::AllOrNothing,
                stop,
                true,
                helpers,
            ) {
                Ok(plan) => {
                    let mut fresh = Box::new(fresh);
                    fresh.apply(plan);
                    Some(fresh)
                }
                Err(_) => None,
            }
        }));
        match built {
            Ok(Some(shadow)) => {
                self.shadow = Some(shadow);
                self.want_shadow = false;
                true
            }
            _ if stop() => false,
            _ => {
                self.last = None;
                self.known = false;
                self.want_shadow = false;
                true
            }
        }
    }
}

/// A refusal; `message` empty: the one message of a refused list, from `errors`.
fn refused(version: u64, errors: Vec<EntryError>, message: String) -> Done {
    let message = if message.is_empty() {
        refusal_message(&errors)
    } else {
        message
    };
    Done {
        outcome: Outcome::Refused {
            version,
            errors,
            message,
            build_time: Duration::ZERO, // set by `Worker::run`
        },
        table: None,
        keep: None,
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

fn set_build_time(outcome: &mut Outcome, took: Duration) {
    match outcome {
        Outcome::Built { build_time, .. }
        | Outcome::Refused { build_time, .. }
        | Outcome::Panicked { build_time, .. } => *build_time = took,
        Outcome::Superseded { .. } => {}
    }
}
