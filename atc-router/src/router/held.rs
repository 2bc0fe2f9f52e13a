//! What the builder's threads know of the newest table without holding it: its routes by id
//! (ids, priorities, texts), to build a shadow when there is none, to keep a known route's
//! version in apply-valid mode, and to tell what a whole list changes ([`Held`]); and the
//! caller's copy of its router's routes for a rebase ([`HeldCopy`]).
//!
//! Invariant: a [`Held`] mirrors exactly the table it was made from, with every change applied
//! to that table applied to it (`Held::apply`), or it is dropped.

use rustc_hash::FxHashMap as HashMap;
use uuid::Uuid;

use super::catalog::TextsCopy;
use super::{RouteSpec, Router, SyncReport};
use crate::route_list::{Entry, EntryList, Item};

/// The routes of a table, by id: what the thread knows the newest table holds.
#[derive(Debug, Default)]
pub(super) struct Held {
    routes: HashMap<Uuid, (u64, Box<str>)>,
}

/// The routes of a router as the caller's thread copies them for a rebase: each route's id
/// and priority, and its text in the catalog's chunks, shared rather than copied
/// ([`Catalog::share_texts`](super::catalog::Catalog::share_texts)), so the caller pays a row
/// per route and no text; the builder's thread makes a [`Held`] of it.
#[derive(Debug, Default)]
pub(super) struct HeldCopy {
    /// Id, priority and the route's place in `texts`.
    rows: Vec<(Uuid, u64, usize)>,
    texts: TextsCopy,
}

impl HeldCopy {
    /// The routes `router` holds (O(routes)).
    pub(super) fn of(router: &Router) -> HeldCopy {
        let texts = router.catalog.share_texts();
        let rows = texts
            .slots()
            .enumerate()
            .filter_map(|(i, slot)| router.row(slot).map(|r| (r.id, r.priority, i)))
            .collect();
        HeldCopy { rows, texts }
    }
}

impl From<HeldCopy> for Held {
    fn from(copy: HeldCopy) -> Held {
        let mut routes = HashMap::default();
        routes.reserve(copy.rows.len());
        for &(id, priority, i) in &copy.rows {
            routes.insert(id, (priority, copy.texts.text(i).into()));
        }
        Held { routes }
    }
}

impl Held {
    /// The routes `router` holds (a copy of every text: O(routes)).
    pub(super) fn of(router: &Router) -> Held {
        let mut routes = HashMap::default();
        routes.reserve(router.len());
        for r in router.routes() {
            routes.insert(r.id(), (r.priority(), r.source().into()));
        }
        Held { routes }
    }

    /// Applies a list of changes (every entry valid: what a built plan changed).
    pub(super) fn apply(&mut self, changes: &EntryList) {
        for e in changes.iter() {
            match e.item {
                Item::Route {
                    id,
                    priority,
                    expression,
                } => {
                    self.routes.insert(id, (priority, expression.into()));
                }
                Item::Remove(id) => {
                    self.routes.remove(&id);
                }
                Item::Unreadable { .. } => {}
            }
        }
    }

    pub(super) fn get(&self, id: Uuid) -> Option<(u64, &str)> {
        self.routes.get(&id).map(|(p, t)| (*p, &**t))
    }

    pub(super) fn len(&self) -> usize {
        self.routes.len()
    }

    pub(super) fn specs(&self) -> Vec<RouteSpec<'_>> {
        self.routes
            .iter()
            .map(|(id, (priority, text))| RouteSpec {
                id: *id,
                priority: *priority,
                expression: text,
            })
            .collect()
    }

    /// What the whole list `desired` is to a table holding these routes: routes added,
    /// removed, changed (another priority or text) and unchanged, counted as a sync counts
    /// them before parsing (the first entry with an id has it; an unreadable entry is neither).
    pub(super) fn diff(&self, desired: &[Entry<'_>]) -> SyncReport {
        let mut seen = std::collections::HashSet::with_capacity(desired.len());
        let mut report = SyncReport::default();
        let mut named = 0;
        for e in desired {
            let Some(id) = e.item.id() else { continue };
            if !seen.insert(id) {
                continue;
            }
            let current = self.routes.get(&id);
            named += usize::from(current.is_some());
            match (e.item, current) {
                (
                    Item::Route {
                        priority,
                        expression,
                        ..
                    },
                    Some((p, t)),
                ) if *p == priority && **t == *expression => report.unchanged += 1,
                (Item::Route { .. }, Some(_)) => report.changed += 1,
                (Item::Route { .. }, None) => report.added += 1,
                _ => {}
            }
        }
        report.removed = self.len() - named;
        report
    }
}
