//! What a sync prepares and how it ends: the mode ([`SyncMode`]), the report of what changed
//! ([`SyncReport`]), a refusal ([`SyncError`]), why no plan was made ([`Stopped`]), and the
//! plan itself ([`SyncPlan`]), which the steps of `sync.rs`, `sync_classify.rs` and
//! `sync_ahead.rs` fill and only [`Router::apply`](super::Router::apply) carries out.
//!
//! Invariant: a plan names the version of the router it was prepared against, and is applied
//! to that version only.

use std::sync::Arc;
use std::time::Duration;

use rustc_hash::FxHashMap as HashMap;
use uuid::Uuid;

use super::entry_errors::{refusal_message, EntryError};
use super::{Prepared, Router};
use crate::compile::resolve::Node;
use crate::route_list::{EntryList, Position};

/// What [`Router::sync`](super::Router::sync) does with invalid routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Any invalid route: change nothing, report them all.
    #[default]
    AllOrNothing,
    /// Apply the valid routes, report the invalid ones.
    ApplyValid,
}

/// What a sync did.
#[derive(Debug, Default)]
pub struct SyncReport {
    /// Routes new to the router.
    pub added: usize,
    /// Routes taken out.
    pub removed: usize,
    /// Routes whose priority or expression changed.
    pub changed: usize,
    /// Routes left as they were.
    pub unchanged: usize,
    /// Every invalid entry ([`SyncMode::ApplyValid`]: left out, or kept at its current
    /// version), in list order.
    pub errors: Vec<EntryError>,
    /// The plan was prepared before another change and was not applied.
    pub stale: bool,
}

/// Every invalid entry of a refused list. Its message is the one every caller reports a
/// refused list with: how many entries are invalid, and the first of them.
#[derive(Debug)]
pub struct SyncError {
    /// Every invalid entry, in list order.
    pub errors: Vec<EntryError>,
}

impl std::fmt::Display for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&refusal_message(&self.errors))
    }
}

impl std::error::Error for SyncError {}

/// Why [`Router::prepare_sync_with`] gave no plan.
#[derive(Debug)]
pub(crate) enum Stopped {
    /// Invalid routes (all or nothing).
    Refused(SyncError),
    /// The plan would build a fresh router, which the caller did not allow; what the list is
    /// to this router, counted before any route is parsed (an invalid route counts as added or
    /// changed).
    Rebuild(SyncReport),
    /// The caller asked it to stop.
    Cancelled,
}

/// The second step's answer: the invalid entries, in list order.
pub(super) type PreparedEntries = Vec<EntryError>;

/// A change prepared by [`Router::prepare_sync`], applied by [`Router::apply`].
#[derive(Debug, Default)]
pub struct SyncPlan {
    pub(super) version: u64,
    /// Routes to take out (removed routes and the old versions of changed ones), with their
    /// trees resolved while preparing, so that applying parses nothing.
    pub(super) remove: Vec<(Uuid, Box<Node>)>,
    pub(super) insert: Vec<Prepared>,
    /// Set instead of `remove` and `insert` when most routes change: the whole new router.
    pub(super) rebuilt: Option<Box<Router>>,
    pub(super) regexes: HashMap<String, Arc<crate::compile::regex::CompiledRegex>>,
    pub(super) report: SyncReport,
    /// How long preparing it took: part of the update's build time (`RouterStats::last_build`).
    pub(super) prepared_in: Duration,
}

impl SyncPlan {
    /// What applying the plan will do.
    pub fn report(&self) -> &SyncReport {
        &self.report
    }

    /// What the plan changes, as a list of changes: the route of every id it puts in, and every
    /// id it only takes out. Applied to another router holding what this one holds, it makes
    /// that router hold what this one will (the builder's thread brings a replaced table level
    /// with it). `None` for a plan that builds a fresh router.
    pub(crate) fn changes(&self) -> Option<EntryList> {
        if self.rebuilt.is_some() {
            return None;
        }
        let text = self.insert.iter().map(|p| p.source.len()).sum();
        let mut list = EntryList::with_capacity(self.insert.len() + self.remove.len(), text);
        let put: std::collections::HashSet<Uuid> = self.insert.iter().map(|p| p.id).collect();
        for (n, p) in self.insert.iter().enumerate() {
            list.push_route(Position::Item(n + 1), p.id, p.priority, &p.source);
        }
        for (id, _) in &self.remove {
            if !put.contains(id) {
                list.push_removal(Position::Item(list.len() + 1), *id);
            }
        }
        Some(list)
    }
}
