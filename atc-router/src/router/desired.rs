//! What a desired list's entries are, whoever gives them: routes ([`RouteSpec`]), changes
//! ([`Change`]) or entries as a caller read them (`route_list::Entry`), all read as entries
//! through [`Desired`], so that a list is never copied to be synced.
//!
//! Invariant: an entry's position is its own when it carries one, else its place in the
//! caller's slice, from 1.

use uuid::Uuid;

use crate::route_list::{Entry, Item, Position};

/// One route of a desired route list (see [`Router::sync`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSpec<'a> {
    /// The route's id: unique in the list.
    pub id: Uuid,
    /// Its priority.
    pub priority: u64,
    /// Its expression text.
    pub expression: &'a str,
}

/// One change of a table: a route put in (or in place of the route with its id), or the
/// route with an id taken out (see [`Router::update`](super::Router::update)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change<'a> {
    /// Add the route, or replace the route with its id.
    Upsert(RouteSpec<'a>),
    /// Take out the route with this id (nothing happens when there is none).
    Remove(Uuid),
}

/// The entries of a desired list: routes ([`RouteSpec`]), changes ([`Change`]) or entries as
/// a caller read them ([`Entry`]). Generic rather than converted, so that a list is not
/// copied; `index` is the entry's place in the slice, which names it when the entry carries
/// no position of its own.
pub(crate) trait Desired {
    /// The entry.
    fn entry(&self, index: usize) -> Entry<'_>;
}

impl Desired for RouteSpec<'_> {
    fn entry(&self, index: usize) -> Entry<'_> {
        Entry {
            at: Position::Item(index + 1),
            item: Item::Route {
                id: self.id,
                priority: self.priority,
                expression: self.expression,
            },
        }
    }
}

impl Desired for Change<'_> {
    fn entry(&self, index: usize) -> Entry<'_> {
        match self {
            Change::Upsert(spec) => spec.entry(index),
            Change::Remove(id) => Entry {
                at: Position::Item(index + 1),
                item: Item::Remove(*id),
            },
        }
    }
}

impl Desired for Entry<'_> {
    fn entry(&self, _: usize) -> Entry<'_> {
        *self
    }
}
