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
//! assert!(shared.execute(&mut ctx));
//! ```

use std::sync::{Mutex, RwLock, RwLockReadGuard};

use crate::context::Context;
use crate::router::{RouteSpec, Router, SyncError, SyncMode, SyncReport};

/// A [`Router`] behind a reader-writer lock, updated by diff (see the module docs).
#[derive(Debug)]
pub struct SharedRouter {
    router: RwLock<Router>,
    updater: Mutex<()>,
}

impl SharedRouter {
    pub fn new(router: Router) -> SharedRouter {
        SharedRouter {
            router: RwLock::new(router),
            updater: Mutex::new(()),
        }
    }

    /// The current version of the table, for as long as the guard lives.
    pub fn read(&self) -> RwLockReadGuard<'_, Router> {
        // A panic while holding the lock cannot leave the router half-updated: `apply` does not
        // fail part-way. So a poisoned lock is still a consistent router.
        self.router.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Matches a request against the current version.
    pub fn execute(&self, ctx: &mut Context) -> bool {
        self.read().execute(ctx)
    }

    /// Brings the table to `desired` (see [`Router::sync`]); matching continues while the
    /// change is prepared and waits only while it is applied.
    pub fn sync(&self, desired: &[RouteSpec<'_>], mode: SyncMode) -> Result<SyncReport, SyncError> {
        let _updater = self.updater.lock().unwrap_or_else(|e| e.into_inner());
        let plan = self.read().prepare_sync(desired, mode)?;
        let mut router = self.router.write().unwrap_or_else(|e| e.into_inner());
        let (report, replaced) = router.apply_keeping_old(plan);
        drop(router);
        // A rebuild's old router is freed after readers are let back in.
        drop(replaced);
        Ok(report)
    }

    /// Any other change, with the table locked for its whole duration.
    pub fn update<T>(&self, change: impl FnOnce(&mut Router) -> T) -> T {
        let _updater = self.updater.lock().unwrap_or_else(|e| e.into_inner());
        let mut router = self.router.write().unwrap_or_else(|e| e.into_inner());
        change(&mut router)
    }
}
