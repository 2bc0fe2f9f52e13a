//! A router whose next tables are built off the caller's thread: the table in force, its
//! [`Builder`], and what the two must agree on. It is what the C library's router handle
//! holds, and what any caller needs that both changes a router directly and syncs it in the
//! background.
//!
//! ```
//! use std::sync::Arc;
//! use atc_router::{BackgroundRouter, Outcome, RouteInput, RouteSpec, Router, Schema, SyncMode, Type, Uuid};
//!
//! let mut schema = Schema::new();
//! schema.add_field("http.path", Type::String).unwrap();
//! let mut table = BackgroundRouter::new(Router::new(Arc::new(schema)));
//! // A direct change: the builder learns of it before it builds, without being told.
//! table.add(b"a8f2c1e4-0000-4000-8000-000000000001", 1, br#"http.path ^= "/a""#).unwrap();
//!
//! let list = [RouteSpec { id: Uuid::from_u128(2), priority: 1, expression: r#"http.path ^= "/b""# }];
//! table.submit(1, RouteInput::routes(&list), SyncMode::AllOrNothing);
//! let outcome = loop {
//!     if let Some(outcome) = table.apply() {
//!         break outcome;
//!     }
//!     std::thread::sleep(std::time::Duration::from_millis(1));
//! };
//! assert!(matches!(outcome, Outcome::Built { version: 1, .. }));
//! assert_eq!(table.router().len(), 1);
//! assert_eq!(table.router().stats().updates_applied, 2);
//! ```
//!
//! Invariants (a reader must not break them):
//! - **The builder knows the table in force before it builds.** A direct change of the
//!   router (through [`BackgroundRouter::add`], [`BackgroundRouter::remove`] or
//!   [`BackgroundRouter::router_mut`]: an add, a remove, a synchronous sync) is detected, not
//!   declared: the router's instance number and version, which every change bumps, are compared
//!   with those of the table the builder last learned or built, and any difference rebases the
//!   builder before the next submission. There is no flag a caller could forget to set.
//! - **Every update is counted once** in the router's stats ([`Router::stats`]): direct ones by
//!   the router, background ones when their outcome is applied, and those refused before a
//!   route could be read (an id that is not a UUID, bytes that are not UTF-8) here.
//! - **A published table stays reachable while it is in force**: what the publish hook kept
//!   with it ([`Published::keep`](super::build_io::Published::keep)) is held until the next
//!   table is applied.
//! - The builder, and with it any thread, is made by the first submission, in the process
//!   that submits: a value made before a fork builds in each child with threads of its own.

use std::time::Instant;

use uuid::Uuid;

use super::build_io::Keep;
use super::{BuildState, Builder, Outcome, Publish, RouteInput, Router, SyncMode};
use crate::error::Error;
use crate::route_list::{read_id, read_text};

/// A router and the builder of its next tables (see the module docs).
pub struct BackgroundRouter {
    router: Router,
    /// Made by the first submission (see [`BackgroundRouter::builder`]).
    builder: Option<Builder>,
    /// Run on the builder when it is made (the C library's process-wide settings).
    setup: Option<fn(&mut Builder)>,
    /// The publish hook, until the builder is made and takes it.
    publish: Option<(Publish, bool)>,
    publishes: bool,
    keep_shadow: bool,
    known: Known,
    /// What became of the image of the table applied last: its version, and where it was
    /// published or why it could not be.
    published: Option<(u64, Result<String, String>)>,
    /// What the publish hook kept with the table in force.
    kept: Option<Keep>,
}

/// What the builder knows of the table in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// Nothing: it was never told (an empty router needs no telling).
    Nothing,
    /// The table with this stamp ([`Router::stamp`]).
    Table((u64, u64)),
    /// Nothing any more: a build panicked, and what it held may be half-changed.
    Lost,
}

impl std::fmt::Debug for BackgroundRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundRouter")
            .field("routes", &self.router.len())
            .field("builder", &self.builder.is_some())
            .field("publishes", &self.publishes)
            .field("published", &self.published)
            .finish_non_exhaustive()
    }
}

impl BackgroundRouter {
    /// `router`, with a builder made when a list is first submitted.
    pub fn new(router: Router) -> BackgroundRouter {
        BackgroundRouter {
            router,
            builder: None,
            setup: None,
            publish: None,
            publishes: false,
            keep_shadow: true,
            known: Known::Nothing,
            published: None,
            kept: None,
        }
    }

    /// The table in force.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The table in force, to change directly: the builder learns of every change before
    /// its next build (see the module docs).
    pub fn router_mut(&mut self) -> &mut Router {
        &mut self.router
    }

    /// Has `setup` run on the builder when it is made (by the first submission): for settings
    /// read then, such as the C library's process-wide thread counts and priorities.
    pub fn on_builder_made(&mut self, setup: fn(&mut Builder)) {
        self.setup = Some(setup);
    }

    /// Has the builder pass every table it builds to `hook` ([`Builder::publish_with`]).
    /// Only before the first submission: `false` afterwards, and nothing changes (a builder's
    /// threads take their hook when they start).
    pub fn publish_with(&mut self, hook: Publish, keep_tables: bool) -> bool {
        if self.builder.is_some() {
            return false;
        }
        self.publish = Some((hook, keep_tables));
        self.publishes = true;
        true
    }

    /// Whether the builder keeps a copy of the table in force between builds
    /// ([`Builder::keep_shadow`]; the default).
    pub fn keep_shadow(&mut self, keep: bool) {
        self.keep_shadow = keep;
        if let Some(b) = self.builder.as_mut() {
            b.keep_shadow(keep);
        }
    }

    /// [`Router::add`] with the id (any text form of a UUID) and the expression as bytes.
    /// An id or a text that cannot be read ([`Error::BadId`], [`Error::NotUtf8`]) is refused
    /// and counted as a refused update, as the router counts the errors it finds.
    pub fn add(&mut self, id: &[u8], priority: u64, expression: &[u8]) -> Result<(), Error> {
        let started = Instant::now();
        let read = read_id(id).and_then(|id| Ok((id, read_text(expression, "expr")?)));
        let (id, expression) = read.inspect_err(|_| self.refused(started))?;
        self.router.add(id, priority, expression)
    }

    /// [`Router::remove`] with the id as bytes (refused and counted as [`BackgroundRouter::add`]
    /// refuses an id): the id read, and whether a route had it.
    pub fn remove(&mut self, id: &[u8]) -> Result<(Uuid, bool), Error> {
        let started = Instant::now();
        let id = read_id(id).inspect_err(|_| self.refused(started))?;
        Ok((id, self.router.remove(id)))
    }

    fn refused(&self, started: Instant) {
        let took = started.elapsed();
        self.router.record_update(false, took, took);
    }

    /// Submits `input` as version `version` ([`Builder::submit`]), after telling the builder
    /// what the router holds if it was changed directly since the builder last knew.
    pub fn submit(&mut self, version: u64, input: RouteInput, mode: SyncMode) {
        self.builder().submit(version, input, mode);
    }

    /// The builder, made on first use, told the table in force when it does not know it.
    fn builder(&mut self) -> &mut Builder {
        let b = self.builder.get_or_insert_with(|| {
            let mut b = Builder::new(self.router.schema().clone(), *self.router.limits());
            if let Some(setup) = self.setup {
                setup(&mut b);
            }
            if let Some((hook, keep_tables)) = self.publish.take() {
                b.publish_with(hook, keep_tables);
            }
            if !self.keep_shadow {
                b.keep_shadow(false);
            }
            b
        });
        let stamp = self.router.stamp();
        let rebase = match self.known {
            Known::Nothing => !self.router.is_empty(),
            Known::Table(known) => known != stamp,
            Known::Lost => true,
        };
        if rebase {
            b.rebase(&self.router);
            self.known = Known::Table(stamp);
        }
        b
    }

    /// Where the builder is ([`Builder::state`]; idle before the first submission).
    pub fn state(&mut self) -> BuildState {
        self.builder
            .as_mut()
            .map_or(BuildState::Idle, Builder::state)
    }

    /// Whether an outcome waits: one atomic load, for a check before every request.
    #[inline]
    pub fn is_ready(&self) -> bool {
        self.builder.as_ref().is_some_and(Builder::is_ready)
    }

    /// Applies the next outcome, if one waits ([`Builder::apply_to`]): a built table is
    /// swapped in, and the update counted in the router's stats (its hold time is this call's).
    pub fn apply(&mut self) -> Option<Outcome> {
        let started = Instant::now();
        let (outcome, keep) = self.builder.as_mut()?.apply_keeping(&mut self.router)?;
        let build_time = outcome.build_time();
        match &outcome {
            Outcome::Built {
                version, published, ..
            } => {
                if let Some(p) = published {
                    self.published = Some((*version, p.clone()));
                    self.kept = keep;
                }
                self.known = Known::Table(self.router.stamp());
                self.router
                    .record_update(true, started.elapsed(), build_time);
            }
            Outcome::Refused { .. } => {
                self.router
                    .record_update(false, started.elapsed(), build_time);
            }
            Outcome::Panicked { .. } => {
                self.known = Known::Lost;
                self.router
                    .record_update(false, started.elapsed(), build_time);
            }
            Outcome::Superseded { .. } => {}
        }
        Some(outcome)
    }

    /// Whether a publish hook is set ([`BackgroundRouter::publish_with`]).
    pub fn publishes(&self) -> bool {
        self.publishes
    }

    /// What the publish hook made of the table applied last: its version, and where it was
    /// published or why it could not be. `None` before a published table was applied.
    pub fn published(&self) -> Option<(u64, &Result<String, String>)> {
        self.published.as_ref().map(|(v, p)| (*v, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::RouteSpec;
    use crate::schema::names::Schema;
    use crate::value::Type;
    use std::sync::Arc;

    fn table() -> BackgroundRouter {
        let mut schema = Schema::new();
        schema.add_field("http.path", Type::String).unwrap();
        BackgroundRouter::new(Router::new(Arc::new(schema)))
    }

    fn applied(t: &mut BackgroundRouter) -> Outcome {
        loop {
            if let Some(o) = t.apply() {
                return o;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    fn id(n: u128) -> String {
        Uuid::from_u128(n).to_string()
    }

    fn changes(routes: &[(u128, &str)]) -> RouteInput {
        let specs: Vec<_> = routes
            .iter()
            .map(|&(n, expression)| RouteSpec {
                id: Uuid::from_u128(n),
                priority: 1,
                expression,
            })
            .collect();
        match RouteInput::routes(&specs) {
            RouteInput::List(l) => RouteInput::Changes(l),
            other => other,
        }
    }

    #[test]
    fn a_direct_change_between_two_background_ones_is_kept() {
        let mut t = table();
        t.submit(
            1,
            changes(&[(1, r#"http.path == "/1""#)]),
            SyncMode::AllOrNothing,
        );
        assert!(matches!(applied(&mut t), Outcome::Built { .. }));
        // Not declared anywhere: found from the router's stamp.
        t.add(id(2).as_bytes(), 1, br#"http.path == "/2""#).unwrap();
        t.submit(
            2,
            changes(&[(3, r#"http.path == "/3""#)]),
            SyncMode::AllOrNothing,
        );
        assert!(matches!(applied(&mut t), Outcome::Built { .. }));
        let ids: Vec<_> = t.router().routes().map(|r| r.id()).collect();
        assert_eq!(ids.len(), 3, "{ids:?}");
        assert!(ids.contains(&Uuid::from_u128(2)));
    }

    #[test]
    fn a_change_through_router_mut_is_kept_too() {
        let mut t = table();
        t.router_mut()
            .add(Uuid::from_u128(7), 1, r#"http.path == "/7""#)
            .unwrap();
        t.submit(
            1,
            changes(&[(8, r#"http.path == "/8""#)]),
            SyncMode::AllOrNothing,
        );
        applied(&mut t);
        assert!(t.router().get(Uuid::from_u128(7)).is_some());
        assert!(t.router().get(Uuid::from_u128(8)).is_some());
    }

    #[test]
    fn an_unreadable_id_or_text_is_a_refused_update() {
        let mut t = table();
        let e = t.add(b"route-1", 1, br#"http.path == "/""#).unwrap_err();
        assert!(matches!(e, Error::BadId { .. }), "{e}");
        let e = t
            .add(id(1).as_bytes(), 1, b"http.path == \"\xff\"")
            .unwrap_err();
        assert!(matches!(e, Error::NotUtf8 { what: "expr", .. }), "{e}");
        assert!(t.remove(b"\xff").is_err());
        assert_eq!(t.remove(id(9).as_bytes()), Ok((Uuid::from_u128(9), false)));
        let s = t.router().stats();
        assert_eq!((s.updates_applied, s.updates_refused), (0, 4));
        assert!(t.router().is_empty());
    }

    #[test]
    fn background_outcomes_are_counted_when_applied() {
        let mut t = table();
        t.submit(1, changes(&[(1, "http.path ==")]), SyncMode::AllOrNothing);
        assert!(matches!(applied(&mut t), Outcome::Refused { .. }));
        t.submit(
            2,
            changes(&[(1, r#"http.path == "/""#)]),
            SyncMode::AllOrNothing,
        );
        assert!(matches!(applied(&mut t), Outcome::Built { .. }));
        let s = t.router().stats();
        assert_eq!((s.updates_applied, s.updates_refused), (1, 1));
        assert_eq!(t.state(), BuildState::Idle);
    }

    #[test]
    fn a_publish_hook_is_set_before_the_first_submission_only() {
        let mut t = table();
        assert!(t.publish_with(
            Box::new(|v, _| Ok(super::super::build_io::Published::at(format!("v{v}")))),
            true
        ));
        t.submit(
            4,
            changes(&[(1, r#"http.path == "/""#)]),
            SyncMode::AllOrNothing,
        );
        applied(&mut t);
        assert_eq!(t.published(), Some((4, &Ok("v4".to_owned()))));
        assert!(!t.publish_with(Box::new(|_, _| Err("late".into())), true));
    }
}
