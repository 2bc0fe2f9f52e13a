//! The first step of a sync ([`Router::classify`]): what each entry of a list is to the
//! router (unchanged, changed, added, removed, a duplicate, unreadable) and what the list is to
//! it, counted, before any route is parsed; and whether the plan then builds a fresh router
//! ([`Classified::rebuild`]).
//!
//! Invariant: the id rule of `sync.rs`'s module docs is applied here and nowhere else: the
//! first entry with an id has it, every later one is a duplicate.

use rustc_hash::FxHashMap as HashMap;
use uuid::Uuid;

use super::desired::Desired;
use super::id_map::SlotIds;
use super::sync_plan::{Stopped, SyncReport};
use super::Router;
use crate::route_list::{Item, Position};

/// What a desired entry is to the router (first pass of [`Router::prepare_sync`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Status {
    /// Repeats the id of the entry at this position.
    Duplicate(Position),
    Unchanged(u32),
    Changed(u32),
    Added,
    /// A removal (a list of changes), with the slot it takes out, if the router has the id.
    Remove(Option<u32>),
    /// A removal in a whole list, where it has no meaning.
    Misplaced,
    /// Unreadable, with the slot of the route that keeps its current version, if any.
    Unreadable(Option<u32>),
}

/// Whether a list is the whole table wanted or changes to the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// The table wanted: routes it does not name are removed.
    Whole,
    /// Changes: routes it does not name stay.
    Changes,
}

/// The first step's answer: what each entry is, and what the list is to the router, counted
/// before any route is parsed.
pub(super) struct Classified {
    pub(super) kind: ListKind,
    pub(super) status: Vec<Status>,
    /// Per slot of the router: whether an entry has its id (in a whole list, routes not seen
    /// are removed).
    pub(super) seen: Vec<bool>,
    pub(super) counts: SyncReport,
}

impl Classified {
    /// Whether the plan builds a fresh router rather than changing this one route by route.
    ///
    /// When most routes go or change, building the whole desired list into a fresh router
    /// costs what a build does, while taking routes out one index entry at a time and putting
    /// their new versions in would cost more (and touch every structure twice). So when most
    /// of the desired list is new (a first load above all): the index is then built once from
    /// every route's requirements, where adding routes one by one would split and re-key its
    /// nodes again each time they grow. A broken router is always rebuilt. A list of changes
    /// is always applied route by route: it does not say what the rest of the table is.
    pub(super) fn rebuild(&self, router: &Router) -> bool {
        let c = &self.counts;
        self.kind == ListKind::Whole
            && (router.broken
                || (c.changed + c.removed) * 2 > router.len()
                || c.added > router.len())
    }
}

impl Router {
    /// First step, no parsing: what each entry of `desired` is to the router (the id rule of
    /// the module docs), and what the list is to it, counted (an invalid route counts as added
    /// or changed; an unreadable entry as neither).
    pub(super) fn classify<D: Desired>(
        &self,
        desired: &[D],
        kind: ListKind,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<Classified, Stopped> {
        // Per slot, the position of the first entry with its id; per new id, the same.
        let mut first_at: Vec<Option<Position>> = vec![None; self.catalog.len()];
        let mut new_ids: HashMap<Uuid, Option<Position>> = HashMap::default();
        let mut status = Vec::with_capacity(desired.len());
        let mut counts = SyncReport::default();
        for (i, d) in desired.iter().enumerate() {
            if i % 1024 == 1023 && stop() {
                return Err(Stopped::Cancelled);
            }
            let entry = d.entry(i);
            let Some(id) = entry.item.id() else {
                status.push(Status::Unreadable(None));
                continue;
            };
            // A list sent again in the same order meets its routes in slot order: try slot `i`
            // before the id map, turning random memory accesses into a sequential scan.
            let current = match self.slot_ids().id(i as u32) {
                // A broken router's structures cannot be trusted: every route is built anew.
                _ if self.broken => None,
                Some(slot_id) if slot_id == id => Some(i as u32),
                _ => self.slot_of(id),
            };
            let first = match current {
                Some(slot) => &mut first_at[slot as usize],
                None => new_ids.entry(id).or_insert(None),
            };
            if let Some(at) = *first {
                status.push(Status::Duplicate(at));
                continue;
            }
            *first = Some(entry.at);
            status.push(match (entry.item, current) {
                (Item::Unreadable { .. }, slot) => Status::Unreadable(slot),
                (Item::Remove(_), _) if kind == ListKind::Whole => Status::Misplaced,
                (Item::Remove(_), slot) => {
                    counts.removed += usize::from(slot.is_some());
                    Status::Remove(slot)
                }
                (
                    Item::Route {
                        priority,
                        expression,
                        ..
                    },
                    Some(slot),
                ) if self.programs.order(slot).priority() == priority
                    && self.catalog.same_text(slot, expression) =>
                {
                    counts.unchanged += 1;
                    Status::Unchanged(slot)
                }
                (Item::Route { .. }, Some(slot)) => {
                    counts.changed += 1;
                    Status::Changed(slot)
                }
                (Item::Route { .. }, None) => {
                    counts.added += 1;
                    Status::Added
                }
            });
        }
        let seen: Vec<bool> = first_at.iter().map(Option::is_some).collect();
        if kind == ListKind::Whole {
            counts.removed = seen
                .iter()
                .zip(self.catalog.instances())
                .filter(|(seen, r)| r.is_some() && !**seen)
                .count();
        }
        Ok(Classified {
            kind,
            status,
            seen,
            counts,
        })
    }
}
