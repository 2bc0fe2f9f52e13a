//! Explaining a request routed from a table image ([`ImageRouter::explain_with`]): the image's
//! index gives the request's candidates, and their texts (which the image carries) are added to
//! a router of those routes alone, which explains every one of them as any router explains its
//! candidates.
//!
//! Invariants:
//! - The candidates explained are the image's own for the request (what `execute` on the image
//!   tries), each with the id, priority and text the image holds, so the winner named is the
//!   one the image routes to: a router of a table's routes routes a request as the table does
//!   when it holds every route the request can match.
//! - It costs what the candidates cost (a parse and compile of each), never the table; so
//!   routes ruled out by the index are not read: with [`ExplainOptions::ruled_out`] they are
//!   only counted, in [`Explanation::ruled_out_omitted`].

use super::{ExplainOptions, Explanation, RouteMatch};
use crate::error::Error;
use crate::router::context::Context;
use crate::router::read_side;
use crate::router::table_image::ImageRouter;
use crate::router::Router;

impl ImageRouter {
    /// Why the request goes where it goes, as [`Router::explain`] says it, from the image.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use atc_router::{Context, ImageRouter, Router, Schema, Type, Uuid};
    /// let mut s = Schema::new();
    /// s.add_field("http.path", Type::String).unwrap();
    /// let s = Arc::new(s);
    /// let mut r = Router::new(s.clone());
    /// r.add(Uuid::from_u128(1), 1, r#"http.path ^= "/api" && http.path != "/api/x""#).unwrap();
    /// let image = ImageRouter::from_bytes(s.clone(), r.to_image().unwrap()).unwrap();
    ///
    /// let mut ctx = Context::new(s);
    /// ctx.add_value("http.path", "/api/x").unwrap();
    /// let why = image.explain(&mut ctx).unwrap();
    /// assert_eq!(why.winner, None);
    /// assert_eq!(why.candidates[0].predicates[0].text, r#"http.path != "/api/x""#);
    /// ```
    pub fn explain(&self, ctx: &mut Context) -> Result<Explanation, Error> {
        self.explain_with(ctx, ExplainOptions::default())
    }

    /// Every route of the image whose expression holds for the request, in routing order, as
    /// [`Router::matches`] gives them.
    pub fn matches(&self, ctx: &mut Context) -> Result<Vec<RouteMatch>, Error> {
        super::evaluate::matches(self, ctx)
    }

    /// [`ImageRouter::explain`] with options (ruled-out routes are counted, not listed: see the
    /// module doc).
    pub fn explain_with(
        &self,
        ctx: &mut Context,
        options: ExplainOptions,
    ) -> Result<Explanation, Error> {
        let ranks = read_side::candidates(self, ctx)?;
        let mut of_candidates = Router::new(self.schema().clone());
        for &rank in &ranks {
            let rank = rank as usize;
            let (Some((id, priority)), Some(text)) = (self.route_id(rank), self.route_text(rank))
            else {
                return Err(Error::Image(crate::image::ImageError::Section {
                    kind: 0,
                    why: "a candidate without its record or text",
                }));
            };
            of_candidates.add(id, priority, text)?;
        }
        // Every route of it is a candidate (not only those its own index would leave).
        let slots: Vec<u32> = of_candidates.slots_in_order().map(|(_, s)| s).collect();
        let asked_ruled_out = options.ruled_out;
        let mut why = of_candidates.explain_slots(
            ctx,
            &slots,
            ExplainOptions {
                ruled_out: false,
                ..options
            },
        );
        why.routes = self.len();
        if asked_ruled_out {
            why.ruled_out_omitted = self.len() - ranks.len();
        }
        Ok(why)
    }
}
