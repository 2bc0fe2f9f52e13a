//! One router shared by matching threads and an updater.
//!
//! The model: matching threads hold a read lock for the duration of one match (or a batch of
//! them) and see one complete version of the route table. An update is prepared — parsed,
//! validated, regexes compiled, the diff computed — under a read lock too, so matching goes on
//! while the expensive part runs; only [`Router::apply`], which does nothing but index updates
//! for the routes that changed, takes the write lock. A reader therefore sees the table as it
//! was before an update or as it is after it, never anything in between, and waits at most for
//! one apply. Updaters are serialised by a separate mutex, so a prepared plan is never stale.
//!
//! Invariants:
//! - **Never half-applied.** If a panic interrupts an apply (or a change made through
//!   [`SharedRouter::update`]) part-way, the router is marked [broken](Router::is_broken), and
//!   every reader gets [`Error::Broken`] instead of an answer from a half-changed table, until
//!   a [`SharedRouter::sync`] rebuilds it from the full route list. A panic between two complete
//!   changes leaves a consistent router, which goes on serving. (The lock has no poisoning of
//!   its own: the router's mark says exactly what a poisoned lock would only guess.)
//! - **No re-entrant blocking.** A thread that holds a [`ReadGuard`] and calls
//!   [`SharedRouter::execute`] or [`SharedRouter::read`] again gets its read without queueing
//!   behind a waiting writer (which would wait for this very thread's guard: a deadlock).
//!   Matching through the guard itself ([`Router::execute`] via `Deref`) takes no lock at all.
//!   An update from a thread holding a guard would wait for itself and panics instead.
//!
//! ```
//! use std::sync::Arc;
//! use atc_router::{Context, Router, RouteSpec, Schema, SharedRouter, SyncMode, Type, Uuid};
//!
//! let mut schema = Schema::new();
//! schema.add_field("http.path", Type::String).unwrap();
//! let schema = Arc::new(schema);
//! let shared = Arc::new(SharedRouter::new(Router::new(schema.clone())));
//!
//! let updater = {
//!     let shared = shared.clone();
//!     std::thread::spawn(move || {
//!         let routes = [RouteSpec { id: Uuid::from_u128(1), priority: 1, expression: r#"http.path ^= "/""# }];
//!         shared.sync(&routes, SyncMode::AllOrNothing).unwrap();
//!     })
//! };
//! let mut ctx = Context::new(schema);
//! ctx.add_value("http.path", "/x").unwrap();
//! let _ = shared.execute(&mut ctx); // before or after the update, never half of it
//! updater.join().unwrap();
//! assert!(shared.execute(&mut ctx).unwrap());
//!
//! // A batch of matches under one read lock:
//! let table = shared.read().unwrap();
//! assert!(table.execute(&mut ctx));
//! ```

use std::cell::RefCell;
use std::ops::Deref;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use crate::error::Error;
use crate::router::context::Context;
use crate::router::{RouteSpec, Router, SyncError, SyncMode, SyncReport};

/// A [`Router`] behind a reader-writer lock, updated by diff (see the module docs).
#[derive(Debug)]
pub struct SharedRouter {
    router: RwLock<Router>,
    updater: Mutex<()>,
}

thread_local! {
    /// The shared routers this thread holds read guards of (by address, once per guard).
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// One complete version of the table, for as long as the guard lives: match through it with
/// [`Router::execute`] (via `Deref`), which takes no lock.
#[derive(Debug)]
pub struct ReadGuard<'a> {
    guard: RwLockReadGuard<'a, Router>,
    key: usize,
}

impl Deref for ReadGuard<'_> {
    type Target = Router;

    fn deref(&self) -> &Router {
        &self.guard
    }
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        let _ = HELD.try_with(|h| {
            let mut h = h.borrow_mut();
            if let Some(i) = h.iter().rposition(|k| *k == self.key) {
                h.swap_remove(i);
            }
        });
    }
}

impl SharedRouter {
    /// Shares `router` for matching from many threads.
    pub fn new(router: Router) -> SharedRouter {
        SharedRouter {
            router: RwLock::new(router),
            updater: Mutex::new(()),
        }
    }

    fn key(&self) -> usize {
        self as *const SharedRouter as usize
    }

    /// Whether this thread holds a read guard of this router.
    fn held_here(&self) -> bool {
        let key = self.key();
        HELD.try_with(|h| h.borrow().contains(&key))
            .unwrap_or(false)
    }

    /// The current version of the table, for as long as the guard lives; [`Error::Broken`]
    /// when a panic interrupted a change part-way (see the module docs).
    pub fn read(&self) -> Result<ReadGuard<'_>, Error> {
        let guard = if self.held_here() {
            // This thread's own guard keeps writers out; a plain read could queue behind a
            // writer that waits for that guard.
            self.router.read_recursive()
        } else {
            self.router.read()
        };
        if guard.is_broken() {
            return Err(Error::Broken);
        }
        let key = self.key();
        let _ = HELD.try_with(|h| h.borrow_mut().push(key));
        Ok(ReadGuard { guard, key })
    }

    /// Matches a request against the current version: [`Router::try_execute`] under a read
    /// lock ([`Error::SchemaMismatch`] for a context of another schema).
    pub fn execute(&self, ctx: &mut Context) -> Result<bool, Error> {
        self.read()?.try_execute(ctx)
    }

    /// Brings the table to `desired` (see [`Router::sync`]); matching continues while the
    /// change is prepared and waits only while it is applied. A broken router is rebuilt.
    /// Counted in [`Router::stats`] with the apply as its hold time (what readers waited for)
    /// and the preparation and apply as its build time.
    ///
    /// # Panics
    ///
    /// When this thread holds a [`ReadGuard`] of this router (the update would wait for it
    /// forever).
    pub fn sync(&self, desired: &[RouteSpec<'_>], mode: SyncMode) -> Result<SyncReport, SyncError> {
        self.refuse_reentrant_update();
        let _updater = self.updater.lock();
        let started = Instant::now();
        let prepared = {
            let router = self.router.read();
            let prepared = router.prepare_sync(desired, mode);
            if prepared.is_err() {
                // Refused while preparing: no reader waited for it.
                router.record_update(false, Duration::ZERO, started.elapsed());
            }
            prepared
        };
        let plan = prepared?;
        let mut router = self.router.write();
        let (report, replaced) = router.apply_keeping_old(plan);
        drop(router);
        // A rebuild's old router is freed after readers are let back in.
        drop(replaced);
        Ok(report)
    }

    /// Any other change, with the table locked for its whole duration. A panic inside `change`
    /// leaves the router serving if it happened between complete changes, and broken if it
    /// interrupted one (see the module docs).
    ///
    /// # Panics
    ///
    /// When this thread holds a [`ReadGuard`] of this router.
    pub fn update<T>(&self, change: impl FnOnce(&mut Router) -> T) -> T {
        self.refuse_reentrant_update();
        let _updater = self.updater.lock();
        let mut router = self.router.write();
        change(&mut router)
    }

    fn refuse_reentrant_update(&self) {
        assert!(
            !self.held_here(),
            "SharedRouter: an update from a thread that holds a read guard of the same router \
             would wait for that guard forever; drop the guard first"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::failpoint;
    use crate::schema::Schema;
    use crate::value::Type;
    use uuid::Uuid;

    fn setup(n: u128) -> (Arc<Schema>, SharedRouter, Vec<String>) {
        let mut s = Schema::new();
        s.add_field("http.path", Type::String).unwrap();
        s.add_field("http.headers.*", Type::String).unwrap();
        let s = Arc::new(s);
        let texts: Vec<String> = (0..n)
            .map(|i| format!(r#"http.path ^= "/r{i}/" && http.headers.x_h{i} == "v""#))
            .collect();
        let mut router = Router::new(s.clone());
        for (i, t) in texts.iter().enumerate() {
            router.add(Uuid::from_u128(i as u128), 1, t).unwrap();
        }
        (s, SharedRouter::new(router), texts)
    }

    fn request(s: &Arc<Schema>, i: usize) -> Context {
        let mut c = Context::new(s.clone());
        c.add_value("http.path", format!("/r{i}/x").as_str())
            .unwrap();
        c.add_value(&format!("http.headers.x_h{i}"), "v").unwrap();
        c
    }

    #[test]
    fn a_panic_part_way_through_an_apply_is_never_served_and_a_sync_rebuilds() {
        let (s, shared, texts) = setup(8);
        // One changed route (an incremental apply), failing after its old version was taken
        // out and before the new one is in.
        let mut desired: Vec<RouteSpec<'_>> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| RouteSpec {
                id: Uuid::from_u128(i as u128),
                priority: 1,
                expression: t,
            })
            .collect();
        let changed = r#"http.path ^= "/changed/""#;
        desired[0].expression = changed;
        failpoint::panic_at(1);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            shared.sync(&desired, SyncMode::AllOrNothing)
        }));
        failpoint::panic_at(0);
        assert!(outcome.is_err(), "the injected failure fired");
        // Readers are refused, not answered from the half-applied table.
        assert!(matches!(
            shared.execute(&mut request(&s, 3)),
            Err(Error::Broken)
        ));
        assert!(matches!(shared.read(), Err(Error::Broken)));
        // The next sync rebuilds the whole table.
        shared.sync(&desired, SyncMode::AllOrNothing).unwrap();
        for i in 1..8 {
            assert!(shared.execute(&mut request(&s, i)).unwrap(), "route {i}");
        }
        let mut c = Context::new(s.clone());
        c.add_value("http.path", "/changed/x").unwrap();
        assert!(shared.execute(&mut c).unwrap());
        assert!(!shared.execute(&mut request(&s, 0)).unwrap());
    }

    #[test]
    fn a_panic_between_complete_changes_leaves_a_serving_router() {
        let (s, shared, _) = setup(4);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            shared.update(|r| {
                r.remove(Uuid::from_u128(0));
                panic!("the caller's own failure, after a complete remove");
            })
        }));
        assert!(outcome.is_err());
        assert!(!shared.execute(&mut request(&s, 0)).unwrap());
        assert!(shared.execute(&mut request(&s, 1)).unwrap());
    }

    #[test]
    fn a_panic_inside_a_router_change_made_through_update_breaks_the_router() {
        let (s, shared, _) = setup(4);
        failpoint::panic_at(1);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            shared.update(|r| r.add(Uuid::from_u128(99), 1, r#"http.path ^= "/new/""#))
        }));
        failpoint::panic_at(0);
        assert!(outcome.is_err());
        assert!(matches!(
            shared.execute(&mut request(&s, 1)),
            Err(Error::Broken)
        ));
    }

    #[test]
    fn matching_again_while_holding_a_guard_does_not_queue_behind_a_waiting_writer() {
        let (s, shared, texts) = setup(2);
        let shared = Arc::new(shared);
        let guard = shared.read().unwrap();
        let writer = {
            let shared = shared.clone();
            let texts = texts.clone();
            std::thread::spawn(move || {
                let desired: Vec<RouteSpec<'_>> = texts
                    .iter()
                    .enumerate()
                    .map(|(i, t)| RouteSpec {
                        id: Uuid::from_u128(i as u128),
                        priority: 2,
                        expression: t,
                    })
                    .collect();
                shared.sync(&desired, SyncMode::AllOrNothing).unwrap();
            })
        };
        // Wait until the writer has queued for the write lock behind our guard: parking_lot
        // marks a writer before it waits for readers to leave, and a plain read fails from then.
        while shared.router.try_read().is_some() {
            std::thread::yield_now();
        }
        let mut c = request(&s, 1);
        assert!(
            shared.execute(&mut c).unwrap(),
            "re-entrant read does not deadlock"
        );
        assert!(guard.execute(&mut c));
        drop(guard);
        writer.join().unwrap();
        assert_eq!(
            shared
                .read()
                .unwrap()
                .get(Uuid::from_u128(1))
                .unwrap()
                .priority(),
            2
        );
    }

    #[test]
    #[should_panic(expected = "drop the guard first")]
    fn an_update_while_holding_a_guard_panics_instead_of_deadlocking() {
        let (_, shared, _) = setup(1);
        let _guard = shared.read().unwrap();
        shared.update(|r| r.remove(Uuid::from_u128(0)));
    }
}
