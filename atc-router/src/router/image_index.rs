//! The index in image form, for tests and diagnostics until a router reads images: written
//! from a router into a checked image (`crate::image`), and walked from the image to compare
//! its candidates with the in-process index's.

use uuid::Uuid;

use super::Router;
use crate::image::{Image, ImageError, ImageWriter};
use crate::index::image::{ImageIndex, LevelBuf};
use crate::router::context::Context;

/// Section kinds of an index image.
const HEAD: u32 = 1;
const NODES: u32 = 2;
const ENTRIES: u32 = 3;
const BYTES: u32 = 4;
const IDS: u32 = 5;

/// The tag of an index image (no schema fingerprint yet: the tests use one schema).
const TAG: u64 = 0x1de7;

impl Router {
    /// The router's index as a checked image, with the route ids in routing order; and how
    /// many splits it wrote as the leaf of all their routes (kinds without a flat form yet).
    #[doc(hidden)]
    pub fn index_image(&self) -> (Vec<u8>, usize) {
        let rank_of: rustc_hash::FxHashMap<u32, u32> = self
            .order
            .values()
            .enumerate()
            .map(|(i, slot)| (*slot, i as u32))
            .collect();
        let written = self
            .index
            .write_image(&|slot| rank_of.get(&slot).copied().unwrap_or(u32::MAX))
            .expect("an index of fewer than 2^32 words");
        let mut w = ImageWriter::new(TAG);
        let sections = [
            (HEAD, vec![written.root, rank_of.len() as u32]),
            (NODES, written.nodes),
            (ENTRIES, written.entries),
        ];
        for (kind, words) in sections {
            w.words(kind, &words).expect("distinct kinds");
        }
        w.section(BYTES, written.bytes).expect("distinct kinds");
        let ids: Vec<u8> = self
            .order
            .keys()
            .flat_map(|o| o.id().into_bytes())
            .collect();
        w.section(IDS, ids).expect("distinct kinds");
        (w.finish(), written.leaves_in_place_of_splits)
    }

    /// The ids of the routes an index image gives the request in `ctx` as candidates, in
    /// routing order (distinct).
    #[doc(hidden)]
    pub fn image_candidates(image: &[u8], ctx: &Context) -> Result<Vec<Uuid>, ImageError> {
        let image = IndexImage::open(image)?;
        let mut ranks = Vec::new();
        image.candidates(ctx, &mut IndexImageBufs::default(), &mut ranks);
        Ok(ranks
            .into_iter()
            .filter_map(|r| {
                let at = r as usize * 16;
                let bytes: [u8; 16] = image.ids.get(at..at + 16)?.try_into().ok()?;
                Some(Uuid::from_bytes(bytes))
            })
            .collect())
    }

    /// The ids of the in-process index's candidates for the request in `ctx`, in routing order.
    #[doc(hidden)]
    pub fn candidate_ids(&self, ctx: &mut Context) -> Vec<Uuid> {
        let mut out = Vec::new();
        self.index
            .candidates(&ctx.values, &mut Vec::new(), &mut out);
        out.sort_unstable();
        out.dedup();
        out.into_iter().map(|(o, _)| o.id()).collect()
    }
}

/// An index image opened once (checked), for walks in a loop (`atc-bench hot --image`).
#[doc(hidden)]
#[derive(Debug)]
pub struct IndexImage<'a> {
    root: u32,
    index: ImageIndex<'a>,
    ids: &'a [u8],
}

/// A walk's scratch buffers, reused across requests.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct IndexImageBufs(Vec<LevelBuf>);

impl<'a> IndexImage<'a> {
    /// Checks `image` and opens it.
    pub fn open(image: &'a [u8]) -> Result<IndexImage<'a>, ImageError> {
        let image = Image::open(image, TAG)?;
        let head = image.words(HEAD)?;
        Ok(IndexImage {
            root: head.get(0).unwrap_or(0),
            index: ImageIndex::new(
                image.words(NODES)?,
                image.words(ENTRIES)?,
                image.section(BYTES).unwrap_or_default(),
            ),
            ids: image.section(IDS).unwrap_or_default(),
        })
    }

    /// The route numbers (routing order) of the request's candidates, sorted and distinct, in
    /// `out` (cleared first).
    pub fn candidates(&self, ctx: &Context, bufs: &mut IndexImageBufs, out: &mut Vec<u32>) {
        out.clear();
        self.index
            .candidates(self.root, &ctx.values, &mut bufs.0, out);
        if out.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
    }
}
