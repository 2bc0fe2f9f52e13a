//! A route as callers see it: a view of one slot of a router.

use uuid::Uuid;

use super::catalog::CatalogRow;
use super::{fields, Router};
use crate::index::requirements;
use crate::language::parse_with_limits;
use crate::language::Expr;
use crate::schema::names::FieldId;

/// One route of a router, as [`Router::get`] and [`Router::routes`] show it.
#[derive(Debug, Clone, Copy)]
pub struct Route<'a> {
    pub(super) router: &'a Router,
    pub(super) slot: u32,
    pub(super) row: CatalogRow,
}

impl<'a> Route<'a> {
    /// The route's id.
    pub fn id(&self) -> Uuid {
        self.row.id
    }

    /// The route's priority: higher routes are tried first.
    pub fn priority(&self) -> u64 {
        self.row.priority
    }

    /// The expression text as it was added.
    pub fn source(&self) -> &'a str {
        self.router.catalog.text(self.slot as usize)
    }

    /// The syntax tree (parsed again from the source: routers keep only the resolved form).
    pub fn expr(&self) -> Expr {
        // The router's own limits: the ones the source passed when it was added.
        parse_with_limits(self.source(), &self.router.limits)
            .expect("a route's source parsed with these limits when it was added")
            .expr
    }

    /// Fields the expression uses, in order of first use (resolved again from the source:
    /// routers keep only the compiled form).
    pub fn field_ids(&self) -> Vec<FieldId> {
        fields(&self.router.resolve_again(self.slot))
    }

    /// Whether the index can rule the route out for some requests (`false`: every request
    /// considers it).
    pub fn is_indexed(&self) -> bool {
        !requirements(&self.router.programs.code(self.slot)).is_empty()
    }

    /// Identifies this version of the route: the same while syncs leave the route unchanged
    /// (also when a sync rebuilds the table), different once it is changed or removed and
    /// added again. Unique among the routes of every router of the process.
    pub fn instance(&self) -> u64 {
        self.row.instance
    }
}
