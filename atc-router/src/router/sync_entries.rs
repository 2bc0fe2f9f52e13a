//! What a caller hands [`Router::sync_entries`](super::Router::sync_entries) and what it gets
//! back for each entry: the entries as read (some perhaps unreadable), and why an entry is
//! invalid. The rules that decide it are in `sync.rs`.
//!
//! Invariant: an entry is named by its index in the caller's list, so a caller maps every
//! error back to its own input without ids (which an unreadable entry may lack).

use uuid::Uuid;

use super::sync::RouteSpec;
use crate::error::Error;

/// One entry of a desired list as a caller read it (see
/// [`Router::sync_entries`](crate::Router::sync_entries)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncEntry<'a> {
    /// A route read whole.
    Route(RouteSpec<'a>),
    /// An entry the caller could not read (text that is not UTF-8, a missing part): invalid,
    /// with its error kept by the caller. With its `id` when that could be read: the id is then
    /// taken (a later entry with it is a duplicate), and a route of the router with that id
    /// keeps its current version in [`SyncMode::ApplyValid`](crate::SyncMode::ApplyValid).
    Unreadable {
        /// The entry's id, when it could be read.
        id: Option<Uuid>,
    },
}

/// Why an entry of a desired list is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryFault {
    /// Its id is the id of an earlier entry, at index `first` of the list.
    Duplicate {
        /// The index of the first entry with the id.
        first: usize,
    },
    /// Its route is refused: the expression does not parse or validate, or exceeds a limit.
    Invalid(Error),
    /// The caller could not read it ([`SyncEntry::Unreadable`]); the caller holds why.
    Unreadable,
}

/// An invalid entry of a desired list, by its place in the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryError {
    /// Its index in the list.
    pub index: usize,
    /// Its id, when it has one.
    pub id: Option<Uuid>,
    /// Why it is invalid.
    pub fault: EntryFault,
}

impl EntryError {
    /// The error by id, as [`SyncReport::errors`](crate::SyncReport::errors) lists it: `None`
    /// for an unreadable entry.
    pub(super) fn by_id(&self) -> Option<(Uuid, Error)> {
        let id = self.id?;
        match &self.fault {
            EntryFault::Duplicate { .. } => Some((id, Error::DuplicateRoute(id))),
            EntryFault::Invalid(e) => Some((id, e.clone())),
            EntryFault::Unreadable => None,
        }
    }
}

/// The entries of a desired list: routes ([`RouteSpec`]) or entries as a caller read them
/// ([`SyncEntry`]). Generic rather than converted, so that a list of routes is not copied.
pub(crate) trait Desired {
    /// The entry.
    fn entry(&self) -> SyncEntry<'_>;
}

impl Desired for RouteSpec<'_> {
    fn entry(&self) -> SyncEntry<'_> {
        SyncEntry::Route(*self)
    }
}

impl Desired for SyncEntry<'_> {
    fn entry(&self) -> SyncEntry<'_> {
        *self
    }
}
