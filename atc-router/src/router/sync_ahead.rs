//! Preparing a list's entries ahead of placing them: what of an entry does not depend on the
//! entries before it (parsing, compiling, the index's requirements) is done on any thread, in
//! any order, and handed to the building thread, which places entries in list order
//! (`sync.rs`, `Router::place`).
//!
//! Invariants: the building thread places exactly what one thread preparing everything itself
//! would; no helper runs more than a few pieces ahead of placing (memory stays a few thousand
//! prepared routes, not the table); a helper that unwinds marks the pipe abandoned, so no
//! thread waits for a piece that will never come.

use std::sync::{Condvar, Mutex, MutexGuard};

use uuid::Uuid;

use super::desired::Desired;
use super::entry_errors::EntryError;
use super::sync_classify::Status;
use super::sync_plan::{Stopped, SyncPlan};
use super::{Prepared, Router};
use crate::compile::regex_cache::{RegexSource, SharedRegexes};
use crate::compile::resolve::{resolve, Fields};
use crate::error::Error;
use crate::language::Parsed;
use crate::route_list::Item;
use crate::schema::names::Holds;
use crate::threads::Helpers;

/// What another thread prepared of an entry before the building thread places it (see
/// [`Router::prepare_on_threads`]).
#[derive(Debug)]
pub(super) enum Ahead {
    /// Nothing: the building thread prepares what the entry needs.
    Nothing,
    /// The route the entry places (its own, or the version a fresh router copies), prepared
    /// but not numbered, or why it is invalid.
    Done(Result<Prepared, Error>),
    /// That route parsed and validated: resolving it registers wildcard names, which the
    /// building thread does in list order.
    Parsed(Box<Parsed>),
}

/// The pieces of a list being prepared on several threads, between them and the thread that
/// places them (see [`Router::prepare_on_threads`]).
struct Pipe {
    state: Mutex<PipeState>,
    /// A piece is ready or placed, or the build stopped.
    changed: Condvar,
}

struct PipeState {
    /// Prepared pieces not yet placed, by piece.
    ready: Vec<Option<Vec<Ahead>>>,
    /// Pieces taken so far (pieces are taken in order).
    claimed: usize,
    /// Pieces placed so far.
    placed: usize,
    /// Most pieces taken and not yet placed.
    ahead_max: usize,
    pieces: usize,
    /// The build gave up: every thread stops.
    stopped: bool,
    /// A thread panicked: the others stop, and the build's scope passes the panic on.
    abandoned: bool,
}

impl PipeState {
    /// The next piece to prepare, if one is left and not too far ahead of placing.
    fn claim(&mut self) -> Option<usize> {
        let k = self.claimed;
        (k < self.pieces && k < self.placed + self.ahead_max && !self.halted()).then(|| {
            self.claimed += 1;
            k
        })
    }

    fn halted(&self) -> bool {
        self.stopped || self.abandoned
    }
}

impl Pipe {
    fn lock(&self) -> MutexGuard<'_, PipeState> {
        // Nothing panics while holding it (field assignments only).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, PipeState>) -> MutexGuard<'a, PipeState> {
        self.changed.wait(g).unwrap_or_else(|e| e.into_inner())
    }

    /// For another thread: the next piece to prepare, waiting while it would run too far
    /// ahead; `None` once every piece is taken or the build stopped.
    fn claim_or_wait(&self) -> Option<usize> {
        let mut st = self.lock();
        loop {
            if let Some(k) = st.claim() {
                return Some(k);
            }
            if st.claimed >= st.pieces || st.halted() {
                return None;
            }
            st = self.wait(st);
        }
    }

    fn ready(&self, k: usize, out: Vec<Ahead>) {
        self.lock().ready[k] = Some(out);
        self.changed.notify_all();
    }

    fn placed(&self, n: usize) {
        self.lock().placed = n;
        self.changed.notify_all();
    }

    fn stop(&self) {
        self.lock().stopped = true;
        self.changed.notify_all();
    }

    /// For the building thread: piece `k` prepared, preparing pieces itself while it is not
    /// ready; `None` when the build stops (or another thread panicked).
    fn next_to_place(
        &self,
        k: usize,
        stop: &(dyn Fn() -> bool + Sync),
        prepare: &dyn Fn(usize) -> Vec<Ahead>,
    ) -> Option<Vec<Ahead>> {
        let mut st = self.lock();
        loop {
            if st.halted() {
                return None;
            }
            if let Some(items) = st.ready[k].take() {
                return Some(items);
            }
            if let Some(j) = st.claim() {
                drop(st);
                if stop() {
                    self.stop();
                    return None;
                }
                let out = prepare(j);
                st = self.lock();
                st.ready[j] = Some(out);
                self.changed.notify_all();
                continue;
            }
            st = self.wait(st);
        }
    }
}

/// Marks the pipe abandoned if its thread unwinds, so that no other thread waits for a piece
/// that will never come.
struct Abandon<'a>(&'a Pipe);

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.lock().abandoned = true;
            self.0.changed.notify_all();
        }
    }
}

impl Router {
    /// [`Router::prepare_entries`] of a fresh router on several threads (see `threads.rs`).
    ///
    /// The list is cut into pieces of `piece` entries. Any thread, the building one included,
    /// takes the next piece and prepares what of it does not depend on the entries before it
    /// ([`Router::ahead`]); the building thread places the pieces in list order
    /// ([`Router::place`]), finishing what could not be prepared ahead, exactly as one thread
    /// would, and prepares pieces itself whenever the next one to place is not ready. No
    /// thread runs more than a few pieces ahead of placing, so the routes prepared and not yet
    /// placed stay a few thousand, not the table.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prepare_on_threads<D: Desired + Sync>(
        &self,
        desired: &[D],
        status: &[Status],
        plan: &mut SyncPlan,
        fresh: &mut Router,
        shared: &mut SharedRegexes<'_>,
        errors: &mut Vec<EntryError>,
        stop: &(dyn Fn() -> bool + Sync),
        helpers: Helpers<'_>,
    ) -> Result<(), Stopped> {
        let piece = helpers.threads.piece;
        let pieces = desired.len().div_ceil(piece);
        let pipe = Pipe {
            state: Mutex::new(PipeState {
                ready: (0..pieces).map(|_| None).collect(),
                claimed: 0,
                placed: 0,
                ahead_max: 4 * helpers.threads.count,
                pieces,
                stopped: false,
                abandoned: false,
            }),
            changed: Condvar::new(),
        };
        let shared = &*shared;
        let prepare = |k: usize| -> Vec<Ahead> {
            let mut regexes = shared;
            let end = desired.len().min((k + 1) * piece);
            (k * piece..end)
                .map(|i| self.ahead(desired, i, status[i], &mut regexes))
                .collect()
        };
        // Another thread's loop: take the next piece, prepare it, hand it over; until every
        // piece is taken, or the build stops.
        let helper = || {
            let _abandon = Abandon(&pipe);
            loop {
                let Some(k) = pipe.claim_or_wait() else {
                    return;
                };
                if stop() {
                    pipe.stop();
                    return;
                }
                let out = prepare(k);
                pipe.ready(k, out);
            }
        };
        std::thread::scope(|scope| {
            let _abandon = Abandon(&pipe);
            crate::threads::start(scope, helpers.threads.count - 1, helpers.on_start, &helper);
            let mut regexes = shared;
            for k in 0..pieces {
                let Some(items) = pipe.next_to_place(k, stop, &prepare) else {
                    return Err(Stopped::Cancelled);
                };
                for (offset, ahead) in items.into_iter().enumerate() {
                    let index = k * piece + offset;
                    if index.is_multiple_of(64) && stop() {
                        pipe.stop();
                        return Err(Stopped::Cancelled);
                    }
                    let st = status[index];
                    let fresh = Some(&mut *fresh);
                    self.place(desired, index, st, ahead, plan, fresh, &mut regexes, errors);
                }
                pipe.placed(k + 1);
            }
            Ok(())
        })
    }

    /// What of entry `index` can be prepared on any thread, in any order (see `threads.rs`):
    /// the route to parse and compile (its own, or the current version a fresh router copies),
    /// unless its resolution needs a wildcard name registered, which depends on the routes
    /// before it.
    pub(super) fn ahead<D: Desired>(
        &self,
        desired: &[D],
        index: usize,
        st: Status,
        regexes: &mut dyn RegexSource,
    ) -> Ahead {
        let entry = desired[index].entry(index);
        match (entry.item, st) {
            (
                Item::Route {
                    id,
                    priority,
                    expression,
                },
                Status::Added | Status::Changed(_),
            ) => self.prepare_declared(id, priority, expression, regexes),
            (Item::Route { .. }, Status::Unchanged(slot))
            | (Item::Unreadable { .. }, Status::Unreadable(Some(slot))) => match self.row(slot) {
                Some(row) => {
                    let text = self.catalog.text(slot as usize);
                    self.prepare_declared(row.id, row.priority, text, regexes)
                }
                None => Ahead::Nothing,
            },
            _ => Ahead::Nothing,
        }
    }

    /// A route prepared as [`Router::prepare_unnumbered`] would, registering nothing: a route
    /// that uses a wildcard name is only parsed (see [`Fields::Declared`]).
    pub(super) fn prepare_declared(
        &self,
        id: Uuid,
        priority: u64,
        expression: &str,
        regexes: &mut dyn RegexSource,
    ) -> Ahead {
        let parsed = match self.parse_route(expression) {
            Ok(parsed) => parsed,
            Err(e) => return Ahead::Done(Err(e)),
        };
        let mut wildcard = false;
        let fields = Fields::Declared(&self.schema, &mut wildcard);
        match resolve(expression, &parsed, fields, &self.limits, regexes) {
            Ok(node) => {
                let holds = Holds::new(self.schema.clone());
                let mut p = self.prepared(id, priority, expression, node, holds);
                // Derived from the program alone: one thing less for the building thread.
                p.reqs = Some(crate::index::requirements(&p.program.view()));
                Ahead::Done(Ok(p))
            }
            Err(_) if wildcard => Ahead::Parsed(Box::new(parsed)),
            Err(e) => Ahead::Done(Err(e.into())),
        }
    }

    /// A route prepared, from what was prepared of it ahead; its version not yet numbered.
    pub(super) fn finish(
        &self,
        id: Uuid,
        priority: u64,
        expression: &str,
        ahead: Ahead,
        regexes: &mut dyn RegexSource,
    ) -> Result<Prepared, Error> {
        match ahead {
            Ahead::Done(prepared) => prepared,
            Ahead::Parsed(parsed) => self.resolve_route(id, priority, expression, &parsed, regexes),
            Ahead::Nothing => self.prepare_unnumbered(id, priority, expression, regexes),
        }
    }

    /// A route kept as it is, into a fresh router: parsed again, as the fresh router holds its
    /// own copy of every route, but the same version (`Route::instance`).
    pub(super) fn copy(
        &self,
        slot: u32,
        ahead: Ahead,
        regexes: &mut dyn RegexSource,
    ) -> Option<Prepared> {
        let row = self.row(slot)?;
        let text = self.catalog.text(slot as usize);
        let mut p = self
            .finish(row.id, row.priority, text, ahead, regexes)
            .ok()?;
        p.instance = row.instance;
        Some(p)
    }
}
