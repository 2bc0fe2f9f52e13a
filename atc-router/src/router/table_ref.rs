//! Routing from whichever table a caller holds: a router's own ([`Router`]) or a table image
//! mapped for it ([`ImageRouter`]). A caller that keeps both (the C library's router handle,
//! which routes from an image once one is attached) asks every request's question of a
//! [`TableRef`], and never picks the form itself.
//!
//! Invariants:
//! - Each read is the form's own read side (`read_side.rs`): a `TableRef` adds no routing of
//!   its own, only the choice of form.
//! - An execute from an image is counted in the stats of the router that holds it
//!   ([`TableRef::Mapped::counts`]), so that router's counters see every request.

use super::explain::{ExplainOptions, Explanation, RouteMatch};
use super::{Context, ImageRouter, Router};
use crate::error::Error;
use crate::schema::FieldMask;
use uuid::Uuid;

/// The table a request is routed from (see the module docs).
#[derive(Clone, Copy, Debug)]
pub enum TableRef<'a> {
    /// A router's own table.
    Built(&'a Router),
    /// A table image, with the router whose stats count its requests.
    Mapped {
        /// The image routed from.
        image: &'a ImageRouter,
        /// The router counting its executes.
        counts: &'a Router,
    },
}

impl<'a> TableRef<'a> {
    /// [`Router::try_execute`] on the table.
    pub fn try_execute(&self, ctx: &mut Context) -> Result<bool, Error> {
        match *self {
            TableRef::Built(r) => r.try_execute(ctx),
            TableRef::Mapped { image, counts } => {
                let found = image.try_execute(ctx)?;
                counts.count_execute(ctx, found);
                Ok(found)
            }
        }
    }

    /// [`Router::key_fields`] of the table.
    pub fn key_fields(&self) -> FieldMask {
        match *self {
            TableRef::Built(r) => r.key_fields(),
            TableRef::Mapped { image, .. } => image.key_fields(),
        }
    }

    /// [`Router::needed_fields`] from the table.
    pub fn needed_fields(&self, ctx: &mut Context) -> FieldMask {
        match *self {
            TableRef::Built(r) => r.needed_fields(ctx),
            TableRef::Mapped { image, .. } => image.needed_fields(ctx),
        }
    }

    /// The number of routes of the table.
    pub fn len(&self) -> usize {
        match *self {
            TableRef::Built(r) => r.len(),
            TableRef::Mapped { image, .. } => image.len(),
        }
    }

    /// The expression text of the route with id `id`, as it was added; `Err(Broken)` for a
    /// broken router. From an image, a walk of its routes (see
    /// [`ImageRouter::route_text_by_id`]).
    pub fn expression(&self, id: Uuid) -> Result<Option<&'a str>, Error> {
        match *self {
            TableRef::Built(r) if r.is_broken() => Err(Error::Broken),
            TableRef::Built(r) => Ok(r.get(id).map(|route| route.source())),
            TableRef::Mapped { image, .. } => Ok(image.route_text_by_id(id)),
        }
    }

    /// Whether the table holds no route.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fields the table's routes use, sorted.
    pub fn fields(&self) -> Vec<String> {
        match *self {
            TableRef::Built(r) => r.fields(),
            TableRef::Mapped { image, .. } => image.fields(),
        }
    }

    /// [`Router::explain_with`] from the table (from an image, ruled-out routes are counted,
    /// not listed: see [`ImageRouter::explain_with`]).
    pub fn explain_with(
        &self,
        ctx: &mut Context,
        options: ExplainOptions,
    ) -> Result<Explanation, Error> {
        match *self {
            TableRef::Built(r) => r.explain_with(ctx, options),
            TableRef::Mapped { image, .. } => image.explain_with(ctx, options),
        }
    }

    /// [`Router::matches`] from the table.
    pub fn matches(&self, ctx: &mut Context) -> Result<Vec<RouteMatch>, Error> {
        match *self {
            TableRef::Built(r) => r.matches(ctx),
            TableRef::Mapped { image, .. } => image.matches(ctx),
        }
    }
}
