//! The index of a table image, for tests and diagnostics: its candidates for a request,
//! compared with the in-process index's (`tests/table_image.rs`) and walked in a loop
//! (`atc-bench hot --image`).

use std::sync::Arc;

use uuid::Uuid;

use super::Router;
use crate::error::Error;
use crate::router::context::Context;
use crate::router::read_side::{Table, WalkBufs};
use crate::router::table_image::ImageRouter;
use crate::schema::Schema;

impl Router {
    /// The router as a table image, and how many index splits it wrote as the leaf of all their
    /// routes (kinds without a flat form yet).
    #[doc(hidden)]
    pub fn index_image(&self) -> (Vec<u8>, usize) {
        self.write_image().expect("a table that fits an image")
    }

    /// The ids of the routes an image's index gives the request in `ctx` as candidates, in
    /// routing order (distinct).
    #[doc(hidden)]
    pub fn image_candidates(image: &[u8], ctx: &Context) -> Result<Vec<Uuid>, Error> {
        let image = IndexImage::open(ctx.schema().clone(), image.to_vec())?;
        let mut ranks = Vec::new();
        image.candidates(ctx, &mut IndexImageBufs::default(), &mut ranks);
        Ok(ranks
            .into_iter()
            .filter_map(|r| image.0.id_and_priority(r as usize).map(|(id, _)| id))
            .collect())
    }

    /// The ids of the in-process index's candidates for the request in `ctx`, in routing order.
    #[doc(hidden)]
    pub fn candidate_ids(&self, ctx: &mut Context) -> Vec<Uuid> {
        let mut out = Vec::new();
        self.index
            .candidates(&ctx.values, &mut Vec::new(), &mut out);
        self.put_in_routing_order(&mut out, &mut Vec::new());
        out.into_iter()
            .map(|s| self.programs.order(s).id())
            .collect()
    }
}

/// A table image opened once (checked), for index walks in a loop.
#[doc(hidden)]
#[derive(Debug)]
pub struct IndexImage(ImageRouter);

/// A walk's scratch buffers, reused across requests.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct IndexImageBufs(WalkBufs);

impl IndexImage {
    /// Checks `image` and opens it.
    pub fn open(schema: Arc<Schema>, image: Vec<u8>) -> Result<IndexImage, Error> {
        ImageRouter::from_bytes(schema, image).map(IndexImage)
    }

    /// The route numbers (routing order) of the request's candidates, sorted and distinct, in
    /// `out` (cleared first).
    pub fn candidates(&self, ctx: &Context, bufs: &mut IndexImageBufs, out: &mut Vec<u32>) {
        out.clear();
        self.0.visit_candidates(&ctx.values, &mut bufs.0, |rank| {
            out.push(rank);
            false
        });
    }
}
