//! A router as a table image: [`Router::to_image`] writes the whole matching state (index,
//! programs, routes in routing order) as one flat, position-independent image
//! (`crate::image`); [`ImageRouter`] matches in place from it, with the same results as the
//! router that wrote it.
//!
//! Sections (kinds below): the head; the index (`index/image.rs`: nodes, leaf entries, key
//! bytes); the routes, one record each in routing order (id, priority, program); the field
//! table (each field's type and name, in the order the image numbers them); the programs
//! (`compile/program_image.rs`: instructions, literal bytes, sets, regex sources); the key
//! fields of two-phase matching (by the field table's numbers); each route's expression text
//! (a span per route in routing order, and the texts' bytes), which explaining reads.
//!
//! Invariants:
//! - An image is refused whole or opened whole: [`ImageRouter::open`] checks the container
//!   (checksum, versions, the schema fingerprint as its tag), every section's shape, and every
//!   program ([`program_image::check`]) before the first request; after that, reads stay
//!   bounds-checked and a word that cannot be read ends its branch, never the process.
//! - Field ids are this process's: the image names its fields and the reader registers those
//!   names in its schema (holding them for as long as it lives), so an image built in another
//!   process, whose wildcard names got other ids, matches the same.
//! - A route's rank (its place in routing order) is its number everywhere in the image: leaf
//!   entries are ranks, and the candidates of a request are tried in ascending rank.

use std::ops::Range;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::read_side::{self, Table, WalkBufs};
use super::{Router, NEXT_INSTANCE};
use crate::compile::program_image::{
    self, ImageCode, ProgramArenas, ProgramWriter, RegexSlots, INSTR_WORDS,
};
use crate::error::Error;
use crate::image::{Image, ImageError, ImageWriter, Words};
use crate::index::Order;
use crate::index::{image::FieldNumbers, image::ImageIndex, image_write::Numbering};
use crate::limits::Limits;
use crate::router::context::Context;
use crate::schema::names::{type_code, type_of_code, Holds};
use crate::schema::values::Values;
use crate::schema::{FieldId, FieldMask, Schema};

const HEAD: u32 = 1;
const NODES: u32 = 2;
const ENTRIES: u32 = 3;
const INDEX_BYTES: u32 = 4;
const ROUTES: u32 = 5;
const FIELDS: u32 = 6;
const FIELD_NAMES: u32 = 7;
const CODE: u32 = 8;
const LITERALS: u32 = 9;
const SETS: u32 = 10;
const REGEXES: u32 = 11;
const KEY_FIELDS: u32 = 12;
const TEXT_SPANS: u32 = 13;
const TEXTS: u32 = 14;

/// The version an image router's cached candidates are tagged with (an image never changes;
/// its `uid` tells image routers and routers apart).
const IMAGE_VERSION: u64 = u64::MAX;

/// Words of a route record: id (4), priority (2), first instruction, instruction count.
const ROUTE_WORDS: usize = 8;
/// Words of the head: index root, route count, regex size limit (2), image kind.
const HEAD_WORDS: usize = 5;
/// The head's kind word: a whole table (what `ImageRouter` reads).
const KIND_TABLE: u32 = 1;

/// The tag an image of `schema`'s tables carries: its fingerprint, so that an image opens only
/// with a schema that gives its field names the same types.
fn tag(schema: &Schema) -> u64 {
    schema.fingerprint()
}

fn too_big() -> Error {
    Error::Limit("the table is too large for an image (an offset past 32 bits)".to_owned())
}

impl Router {
    /// The table as an image: the bytes an [`ImageRouter`] matches from, in this process or
    /// any other with a schema of the same fields (see `docs/architecture.md`, "Table
    /// images"). Also returns nothing about the router's changes since: an image is a snapshot.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use atc_router::{Context, ImageRouter, Router, Schema, Type, Uuid};
    /// let mut s = Schema::new();
    /// s.add_field("http.path", Type::String).unwrap();
    /// let s = Arc::new(s);
    /// let mut r = Router::new(s.clone());
    /// r.add(Uuid::from_u128(1), 1, r#"http.path ^= "/api""#).unwrap();
    ///
    /// let image = ImageRouter::from_bytes(s.clone(), r.to_image().unwrap()).unwrap();
    /// let mut ctx = Context::new(s);
    /// ctx.add_value("http.path", "/api/users").unwrap();
    /// assert!(image.execute(&mut ctx));
    /// assert_eq!(ctx.result().unwrap().id(), Uuid::from_u128(1));
    /// ```
    pub fn to_image(&self) -> Result<Vec<u8>, Error> {
        Ok(self.write_image()?.0)
    }

    /// [`Router::to_image`], and how many index splits were written as the leaf of all their
    /// routes (kinds without a flat form).
    pub(crate) fn write_image(&self) -> Result<(Vec<u8>, usize), Error> {
        if self.broken {
            return Err(Error::Broken);
        }
        let word = |n: usize| u32::try_from(n).map_err(|_| too_big());
        // Fields are numbered as the programs name them; the index's fields are a subset.
        let mut numbers: FxHashMap<FieldId, u32> = FxHashMap::default();
        let mut fields: Vec<FieldId> = Vec::new();
        let mut programs = ProgramWriter::default();
        let order: Vec<(Order, u32)> = self.slots_in_order().collect();
        let mut routes: Vec<u32> = Vec::with_capacity(order.len() * ROUTE_WORDS);
        let mut rank_of: FxHashMap<u32, u32> = FxHashMap::default();
        let mut text_spans: Vec<u32> = Vec::with_capacity(order.len() * 2);
        let mut texts: Vec<u8> = Vec::new();
        for (rank, (order, slot)) in order.iter().enumerate() {
            rank_of.insert(*slot, word(rank)?);
            let text = self.text_of(*slot);
            text_spans.extend([word(texts.len())?, word(text.len())?]);
            texts.extend_from_slice(text.as_bytes());
            let mut number = |f: FieldId| {
                *numbers.entry(f).or_insert_with(|| {
                    fields.push(f);
                    fields.len() as u32 - 1
                })
            };
            let (start, len) = programs
                .program(self.programs.code(*slot), &mut number)
                .ok_or_else(too_big)?;
            let id = order.id().as_u128();
            let priority = order.priority();
            routes.extend([
                id as u32,
                (id >> 32) as u32,
                (id >> 64) as u32,
                (id >> 96) as u32,
                priority as u32,
                (priority >> 32) as u32,
                start,
                len,
            ]);
        }
        let rank = |slot: u32| rank_of.get(&slot).copied().unwrap_or(u32::MAX);
        let field = |f: FieldId| numbers.get(&f).copied().unwrap_or(u32::MAX);
        let index = self
            .index
            .write_image(&Numbering {
                rank: &rank,
                field: &field,
            })
            .ok_or_else(too_big)?;
        let mut field_words = Vec::with_capacity(fields.len() * 3);
        let mut names = Vec::new();
        for f in &fields {
            let (name, ty) = self
                .schema
                .field(*f)
                .ok_or_else(|| Error::UnknownField(format!("field id {}", f.to_raw())))?;
            field_words.extend([type_code(ty), word(names.len())?, word(name.len())?]);
            names.extend_from_slice(name.as_bytes());
        }
        let size_limit = self.limits.regex_size_limit as u64;
        let head = [
            index.root,
            word(order.len())?,
            size_limit as u32,
            (size_limit >> 32) as u32,
            KIND_TABLE,
        ];
        let mut w = ImageWriter::new(tag(&self.schema));
        let image_err = |e: ImageError| Error::Image(e);
        for (kind, words) in [
            (HEAD, &head[..]),
            (NODES, &index.nodes[..]),
            (ENTRIES, &index.entries[..]),
            (ROUTES, &routes[..]),
            (FIELDS, &field_words[..]),
            (CODE, &programs.code[..]),
            (SETS, &programs.sets[..]),
            (REGEXES, &programs.regexes[..]),
            (KEY_FIELDS, &index.key_fields[..]),
            (TEXT_SPANS, &text_spans[..]),
        ] {
            w.words(kind, words).map_err(image_err)?;
        }
        w.section(INDEX_BYTES, index.bytes).map_err(image_err)?;
        w.section(FIELD_NAMES, names).map_err(image_err)?;
        w.section(LITERALS, programs.bytes).map_err(image_err)?;
        w.section(TEXTS, texts).map_err(image_err)?;
        Ok((w.finish(), index.leaves_in_place_of_splits))
    }
}

/// Where each section is, found once when the image is opened.
#[derive(Debug, Clone)]
struct Layout {
    root: u32,
    routes: usize,
    nodes: Range<usize>,
    entries: Range<usize>,
    index_bytes: Range<usize>,
    route_records: Range<usize>,
    code: Range<usize>,
    literals: Range<usize>,
    sets: Range<usize>,
    regexes: Range<usize>,
    text_spans: Range<usize>,
    texts: Range<usize>,
}

/// The parts of an image a request reads (see [`ImageRouter::view`]).
struct View<'a> {
    index: ImageIndex<'a>,
    arenas: ProgramArenas<'a>,
    routes: Words<'a>,
}

/// A route's record.
struct RouteRecord {
    id: uuid::Uuid,
    priority: u64,
    /// First instruction and instruction count.
    program: (u32, u32),
}

impl View<'_> {
    /// The record of the route of rank `rank`, read with one bounds check.
    #[inline]
    fn route(&self, rank: usize) -> Option<RouteRecord> {
        let at = rank.checked_mul(ROUTE_WORDS)?;
        let raw = self.routes.raw(at..at.checked_add(ROUTE_WORDS)?)?;
        let w = |i: usize| {
            u32::from_le_bytes([raw[4 * i], raw[4 * i + 1], raw[4 * i + 2], raw[4 * i + 3]])
        };
        let id = u128::from(w(0))
            | u128::from(w(1)) << 32
            | u128::from(w(2)) << 64
            | u128::from(w(3)) << 96;
        Some(RouteRecord {
            id: uuid::Uuid::from_u128(id),
            priority: u64::from(w(4)) | u64::from(w(5)) << 32,
            program: (w(6), w(7)),
        })
    }
}

/// The bytes an [`ImageRouter`] reads: an image in memory, or a file mapped by the caller.
pub type ImageBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// A router that matches in place from a table image written by [`Router::to_image`] (in this
/// process or another): what many workers of one node share, mapped read-only, instead of each
/// building and holding its own table. Same results as the router that wrote the image.
///
/// Read-only: a changed table is a new image. Regexes are compiled in this process, each by
/// the first request that evaluates it, unless taken from another image router of the process
/// ([`ImageRouter::reuse_regexes`]) or compiled all at once ([`ImageRouter::compile_regexes`]).
pub struct ImageRouter {
    schema: Arc<Schema>,
    opened: Opened,
    /// The fields some split of the index looks values up in, by this schema's ids.
    key_fields: FieldMask,
    /// The image's wildcard names, registered in the schema while this router lives.
    _holds: Holds,
    uid: u64,
}

/// What an image router owns and its view borrows from.
struct Owned {
    bytes: ImageBytes,
    layout: Layout,
    /// The image's field numbers to this schema's ids.
    fields: FieldNumbers,
    regexes: RegexSlots,
}

self_cell::self_cell!(
    /// The owned parts and the view of the sections, found once when the image is opened (a
    /// request then reads the view as it is, instead of slicing every section again).
    struct Opened {
        owner: Owned,
        #[covariant]
        dependent: View,
    }
);

impl std::fmt::Debug for ImageRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageRouter")
            .field("routes", &self.layout().routes)
            .field("bytes", &self.image_len())
            .finish()
    }
}

fn section_range(image: &Image<'_>, kind: u32, words: bool) -> Result<Range<usize>, ImageError> {
    let bytes = image.section(kind).ok_or(ImageError::Section {
        kind,
        why: "missing",
    })?;
    if words && !bytes.len().is_multiple_of(4) {
        return Err(ImageError::Section {
            kind,
            why: "not a whole number of 32-bit words",
        });
    }
    let start = bytes.as_ptr() as usize - image.bytes().as_ptr() as usize;
    Ok(start..start + bytes.len())
}

/// The sections of `o`'s bytes, as its layout places them (checked when it was made).
fn view_of(o: &Owned) -> View<'_> {
    let all: &[u8] = (*o.bytes).as_ref();
    let part = |r: &Range<usize>| all.get(r.clone()).unwrap_or_default();
    let words = |r: &Range<usize>| Words::new(part(r)).unwrap_or(Words::EMPTY);
    let l = &o.layout;
    View {
        index: ImageIndex::new(
            words(&l.nodes),
            words(&l.entries),
            part(&l.index_bytes),
            &o.fields,
        ),
        arenas: ProgramArenas {
            code: words(&l.code),
            bytes: part(&l.literals),
            sets: words(&l.sets),
            regex_sources: words(&l.regexes),
            regexes: &o.regexes,
            fields: &o.fields,
        },
        routes: words(&l.route_records),
    }
}

impl ImageRouter {
    /// Opens an image held in memory (see [`ImageRouter::open`]).
    pub fn from_bytes(schema: Arc<Schema>, bytes: Vec<u8>) -> Result<ImageRouter, Error> {
        ImageRouter::open(schema, Arc::new(bytes))
    }

    /// Checks `bytes` whole (see the module docs) and opens them for requests of `schema`'s
    /// contexts. Refused, with nothing changed, when they are not an image of this library
    /// version, are corrupt or truncated, were built for a schema with other fields, or name a
    /// field `schema` cannot register (its wildcard-name limit).
    pub fn open(schema: Arc<Schema>, bytes: ImageBytes) -> Result<ImageRouter, Error> {
        let image = Image::open((*bytes).as_ref(), tag(&schema)).map_err(Error::Image)?;
        let bad = |kind, why| Error::Image(ImageError::Section { kind, why });
        let head = image.words(HEAD).map_err(Error::Image)?;
        if head.len() != HEAD_WORDS || head.get(4) != Some(KIND_TABLE) {
            return Err(bad(HEAD, "not the head of a table image"));
        }
        let get = |i| head.get(i).unwrap_or(0);
        let routes = get(1) as usize;
        let size_limit = u64::from(get(2)) | u64::from(get(3)) << 32;
        let size_limit = usize::try_from(size_limit).unwrap_or(usize::MAX);
        let range = |kind, words| section_range(&image, kind, words).map_err(Error::Image);
        let layout = Layout {
            root: get(0),
            routes,
            nodes: range(NODES, true)?,
            entries: range(ENTRIES, true)?,
            index_bytes: range(INDEX_BYTES, false)?,
            route_records: range(ROUTES, true)?,
            code: range(CODE, true)?,
            literals: range(LITERALS, false)?,
            sets: range(SETS, true)?,
            regexes: range(REGEXES, true)?,
            text_spans: range(TEXT_SPANS, true)?,
            texts: range(TEXTS, false)?,
        };
        if layout.route_records.len() != routes * ROUTE_WORDS * 4 {
            return Err(bad(ROUTES, "not one record per route"));
        }
        if layout.text_spans.len() != routes * 2 * 4 {
            return Err(bad(TEXT_SPANS, "not one text per route"));
        }
        if !layout.code.len().is_multiple_of(INSTR_WORDS * 4) {
            return Err(bad(CODE, "not whole instructions"));
        }
        // The fields, registered in this schema.
        let field_words = image.words(FIELDS).map_err(Error::Image)?;
        let names = image.section(FIELD_NAMES).unwrap_or_default();
        if !field_words.len().is_multiple_of(3) {
            return Err(bad(FIELDS, "not whole field records"));
        }
        let mut holds = Holds::new(schema.clone());
        let mut fields = Vec::with_capacity(field_words.len() / 3);
        for i in 0..field_words.len() / 3 {
            let w = |j| field_words.get(3 * i + j).unwrap_or(u32::MAX);
            let (ty, at, len) = (w(0), w(1) as usize, w(2) as usize);
            let name = at
                .checked_add(len)
                .and_then(|end| names.get(at..end))
                .and_then(|n| std::str::from_utf8(n).ok())
                .ok_or(bad(
                    FIELD_NAMES,
                    "a field name outside the section or not UTF-8",
                ))?;
            let (id, found) = holds.acquire(name)?;
            if type_of_code(ty) != Some(found) {
                return Err(bad(FIELDS, "a field of another type than the schema's"));
            }
            fields.push(id);
        }
        let mut key_fields: FieldMask = 0;
        for n in image.words(KEY_FIELDS).map_err(Error::Image)?.iter() {
            let id = fields
                .get(n as usize)
                .ok_or(bad(KEY_FIELDS, "a key field the field table does not have"))?;
            key_fields |= id.bit();
        }
        let regex_count = image.words(REGEXES).map_err(Error::Image)?.len() / 2;
        let owned = Owned {
            bytes: bytes.clone(),
            layout,
            fields: FieldNumbers::new(fields.into_boxed_slice()),
            regexes: RegexSlots::new(regex_count, size_limit),
        };
        let router = ImageRouter {
            schema,
            opened: Opened::new(owned, view_of),
            key_fields,
            _holds: holds,
            uid: NEXT_INSTANCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        };
        router.check_programs()?;
        Ok(router)
    }

    /// Every route's program is inside the code and well formed (see the module docs).
    fn check_programs(&self) -> Result<(), Error> {
        let arenas = self.arenas();
        let max_depth = Limits::HARD_MAX_DEPTH;
        for rank in 0..self.layout().routes {
            let (start, len) = self.program_of(rank).unwrap_or((u32::MAX, u32::MAX));
            let why = match arenas.program(start, len) {
                None => "a route's program outside the code",
                Some(code) => match program_image::check(&code, max_depth) {
                    Ok(()) => continue,
                    Err(why) => why,
                },
            };
            return Err(Error::Image(ImageError::Section { kind: CODE, why }));
        }
        Ok(())
    }

    /// The expression text of the route of rank `rank` (its place in routing order), as it was
    /// added; None past the last route, or for a text the image does not hold whole (a changed
    /// image: the text is only read to explain, never to match).
    pub fn route_text(&self, rank: usize) -> Option<&str> {
        let owner = self.opened.borrow_owner();
        let all: &[u8] = (*owner.bytes).as_ref();
        let spans = Words::new(all.get(owner.layout.text_spans.clone())?)?;
        let at = spans.get(rank.checked_mul(2)?)? as usize;
        let len = spans.get(rank * 2 + 1)? as usize;
        let texts = all.get(owner.layout.texts.clone())?;
        std::str::from_utf8(texts.get(at..at.checked_add(len)?)?).ok()
    }

    /// The expression text of the route with id `id`, as it was added: a walk of the image's
    /// routes (for diagnostics, not the request path: it reads every route record).
    pub fn route_text_by_id(&self, id: uuid::Uuid) -> Option<&str> {
        (0..self.len())
            .find(|&rank| self.route_id(rank).is_some_and(|(i, _)| i == id))
            .and_then(|rank| self.route_text(rank))
    }

    /// The id and priority of the route of rank `rank`.
    pub(crate) fn route_id(&self, rank: usize) -> Option<(uuid::Uuid, u64)> {
        self.view().route(rank).map(|r| (r.id, r.priority))
    }

    /// The image's parts a request reads.
    #[inline]
    fn view(&self) -> &View<'_> {
        self.opened.borrow_dependent()
    }

    fn layout(&self) -> &Layout {
        &self.opened.borrow_owner().layout
    }

    fn arenas(&self) -> ProgramArenas<'_> {
        self.view().arenas
    }

    #[cfg(feature = "diagnostics")]
    pub(crate) fn id_and_priority(&self, rank: usize) -> Option<(uuid::Uuid, u64)> {
        self.view().route(rank).map(|r| (r.id, r.priority))
    }

    fn program_of(&self, rank: usize) -> Option<(u32, u32)> {
        self.view().route(rank).map(|r| r.program)
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.layout().routes
    }

    /// Whether the table has no route.
    pub fn is_empty(&self) -> bool {
        self.layout().routes == 0
    }

    /// The image's size in bytes.
    pub fn image_len(&self) -> usize {
        (*self.opened.borrow_owner().bytes).as_ref().len()
    }

    /// Takes, for each regex of the image not compiled here yet, the compiled regex another
    /// image router of this process holds for the same source (the table in force, when this
    /// is its next version), compiling nothing; returns how many are compiled now.
    ///
    /// An image router compiles each regex the first time a request evaluates it (tens of
    /// microseconds for the patterns route tables hold). Without this, the next version of a
    /// table would start with none compiled, and its requests would compile again every regex
    /// the version in force had compiled. The C ABI's `atc_image_open_start` calls it on its
    /// opening thread: after a push, requests compile only regexes this process never
    /// compiled. [`ImageRouter::compile_regexes`] compiles the rest too.
    pub fn reuse_regexes(&self) -> usize {
        let arenas = self.arenas();
        arenas.regexes.reuse_all(arenas.regex_sources, arenas.bytes)
    }

    /// Compiles every regex of the image that is not compiled yet (taking, as
    /// [`ImageRouter::reuse_regexes`] does, those another image router of this process holds);
    /// returns how many are compiled now. After it no request compiles a regex, at the cost of
    /// holding every regex of the table compiled (about a kilobyte each) where requests would
    /// compile only those they reach. A regex that does not compile stays uncompiled, and its
    /// predicates false (only a corrupt image has one: the builder compiled them all).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use atc_router::{ImageRouter, Router, Schema, Type, Uuid};
    ///
    /// let mut schema = Schema::new();
    /// schema.add_field("http.path", Type::String).unwrap();
    /// let schema = Arc::new(schema);
    /// let mut router = Router::new(schema.clone());
    /// router.add(Uuid::from_u128(1), 1, r#"http.path ~ "^/users/(?<id>\\d+)$""#).unwrap();
    /// let image = ImageRouter::from_bytes(schema, router.to_image().unwrap()).unwrap();
    /// assert_eq!(image.regexes(), (1, 0));
    /// assert_eq!(image.compile_regexes(), 1);
    /// assert_eq!(image.regexes(), (1, 1));
    /// ```
    pub fn compile_regexes(&self) -> usize {
        let arenas = self.arenas();
        arenas
            .regexes
            .compile_all(arenas.regex_sources, arenas.bytes)
    }

    /// How many of the image's distinct regexes there are, and how many this process has
    /// compiled so far ([`ImageRouter::compile_regexes`], or the first request that needed
    /// each).
    pub fn regexes(&self) -> (usize, usize) {
        (
            self.regexes_len(),
            self.opened.borrow_owner().regexes.compiled(),
        )
    }

    fn regexes_len(&self) -> usize {
        self.layout().regexes.len() / 8
    }

    /// The names of the fields its routes use, sorted (the fields a request is read for).
    pub fn fields(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .opened
            .borrow_owner()
            .fields
            .iter()
            .filter_map(|id| self.schema.field(*id).map(|f| f.0))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The schema its contexts are made from.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// [`Router::execute`] from the image: the first route in routing order whose expression
    /// holds, its result left in the context. A context of another schema never matches.
    pub fn execute(&self, ctx: &mut Context) -> bool {
        self.try_execute(ctx).unwrap_or(false)
    }

    /// [`ImageRouter::execute`], with [`Error::SchemaMismatch`] for a context of another
    /// schema. The context's previous result is cleared either way.
    pub fn try_execute(&self, ctx: &mut Context) -> Result<bool, Error> {
        read_side::execute(self, ctx)
    }

    /// [`Router::key_fields`] of the router that wrote the image: phase 1 of a [two-phase
    /// match](crate#two-phase-matching) adds every value of these fields.
    pub fn key_fields(&self) -> FieldMask {
        self.key_fields
    }

    /// [`Router::needed_fields`] from the image: with every value of the
    /// [key fields](ImageRouter::key_fields) in `ctx`, the fields of the routes the request can
    /// still match. Adding those fields' values and executing gives the result that adding
    /// every field gives. All fields for a context of another schema.
    pub fn needed_fields(&self, ctx: &mut Context) -> FieldMask {
        read_side::needed_fields(self, ctx)
    }

    /// The routes a request has to consider at most (the image index's candidates).
    pub fn candidate_count(&self, ctx: &Context) -> usize {
        read_side::candidate_count(self, ctx)
    }

    /// A number no other router or image router of the process has.
    #[doc(hidden)]
    pub fn uid(&self) -> u64 {
        self.uid
    }
}

impl Table for ImageRouter {
    type Code<'t> = ImageCode<'t>;

    #[inline]
    fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    #[inline]
    fn ready(&self) -> Result<(), Error> {
        Ok(())
    }

    #[inline]
    fn tag(&self) -> (u64, u64) {
        (self.uid, IMAGE_VERSION)
    }

    #[inline]
    fn key_fields(&self) -> FieldMask {
        self.key_fields
    }

    /// Ranks, sorted and distinct: a rank is a route's place in routing order.
    #[inline]
    fn visit_candidates(
        &self,
        values: &Values,
        b: &mut WalkBufs,
        mut visit: impl FnMut(u32) -> bool,
    ) -> Option<u32> {
        b.ranks.clear();
        self.view().index.candidates(
            self.layout().root,
            values,
            &mut b.image_levels,
            &mut b.ranks,
        );
        if b.ranks.len() > 1 {
            b.ranks.sort_unstable();
            b.ranks.dedup();
        }
        b.ranks.iter().copied().find(|&r| visit(r))
    }

    #[inline]
    fn program(&self, rank: u32) -> Option<ImageCode<'_>> {
        let view = self.view();
        let (start, len) = view.route(rank as usize)?.program;
        view.arenas.program(start, len)
    }

    #[inline]
    fn route(&self, rank: u32) -> Option<(uuid::Uuid, u64)> {
        self.view().route(rank as usize).map(|r| (r.id, r.priority))
    }

    #[inline]
    fn text(&self, rank: u32) -> Option<&str> {
        self.route_text(rank as usize)
    }

    /// All fields for a route the image cannot give the program of (never, once checked).
    #[inline]
    fn needs(&self, rank: u32) -> FieldMask {
        Table::program(self, rank).map_or(FieldMask::MAX, |code| code.field_mask())
    }
}

#[cfg(test)]
mod tests;
