//! Tables shared by the processes of a node: a router's builder puts every table it builds in
//! an image, sealed in memory (or written as a file), and every process maps it read-only and
//! routes from it: an opened image ([`AtcImage`]) is attached to a router, which from then on
//! answers every read (execute, key and needed fields, explain, matches, len, fields) from it.
//! Images are opened and retired here; routing is the router's, whichever table it reads. See
//! `docs/gateway.md`, "One table per node".
//!
//! - `atc_router_publish_images` makes a router's builder thread put each table it builds in
//!   an image (after the build, before the table is ready: the caller is never held by it);
//!   `atc_router_published` tells the path of the table last applied.
//! - `atc_image_open` maps and checks an image; `atc_image_open_start` does the same on a
//!   thread of its own, so that a worker switching tables is held only for the swap
//!   (`atc_image_open_ready`, `atc_image_open_finish`). `atc_image_share_path` names a sealed
//!   image this process holds, for another process to open.
//! - `atc_router_attach_image` makes a router route from an image (and hands back the one it
//!   routed from before); `atc_image_retire` lets go of an image off the calling thread.
//! - `atc_image_remove_if_unused` and `atc_image_sweep` remove image files no process reads.
//!
//! Invariants: a refused image (corrupt, truncated, foreign, of another library version or
//! schema, unsealed) changes nothing for the caller; nothing done to an image after it was
//! checked reaches a reader (`image_file.rs`).

use std::ffi::c_char;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use atc_router::{ImageRouter, Schema};

use crate::image_file::{self, Mapped};
use crate::router::AtcRouter;
use crate::schema::AtcSchema;
use crate::{
    guard, guard_ptr, guard_status, handle, handle_mut, out, str_arg, write_text, Fail, Res,
    ATC_ERR_IMAGE, ATC_ERR_INVALID, ATC_ERR_NOT_FOUND, ATC_ERR_SCHEMA_MISMATCH, ATC_OK,
};

/// An opened table image, read in place: routed from once attached to a router
/// (`atc_router_attach_image`). Opaque.
pub struct AtcImage {
    router: ImageRouter,
    bytes: Arc<Mapped>,
}

impl AtcImage {
    /// The image's table.
    pub(crate) fn table(&self) -> &ImageRouter {
        &self.router
    }
}

/// An image being mapped and checked on a thread (`atc_image_open_start`). Opaque.
pub struct AtcImageOpening {
    thread: Option<JoinHandle<()>>,
    result: Arc<Mutex<Option<Res<Opened>>>>,
}

/// An image router and the bytes it reads.
type Opened = (ImageRouter, Arc<Mapped>);

/// Sealed images a publishing builder made, by version, until its router applies one (and
/// holds it: `AtcRouter::held`) or a later one.
pub(crate) type SealedShelf = Arc<Mutex<Vec<(u64, File)>>>;

fn image_fail(e: impl std::fmt::Display) -> Fail {
    Fail::new(ATC_ERR_IMAGE, e)
}

/// Maps `path` and checks it as an image of `schema`'s tables.
fn open(schema: Arc<Schema>, path: &Path) -> Res<Opened> {
    let mapped = Arc::new(
        Mapped::open(path)
            .map_err(|e| image_fail(format_args!("table image {}: {e}", path.display())))?,
    );
    let router = ImageRouter::open(schema, mapped.clone())
        .map_err(|e| image_fail(format_args!("table image {}: {e}", path.display())))?;
    Ok((router, mapped))
}

/// Makes the router's builder thread put every table it builds in an image. With `dir_len` 0
/// (`dir` may be NULL) the image is sealed in memory (a `memfd` no one can change any more,
/// freed by the kernel once no process holds it), named by a path another process of this
/// user opens while this one holds it: what a node's workers share. With a directory (`dir_len`
/// bytes; created with mode 0700 if missing; it must belong to this process's user and be
/// writable by it alone, in a parent others cannot write but for a sticky bit: see
/// `image_file::own_dir`) the image is written as a file of mode 0600 named
/// `atc-<pid>-<version>-<n>.atcimg`, which readers copy. `flags`: 0 (the router applies its
/// tables as before) or `ATC_PUBLISH_DROP_TABLES`. Call it before the first background sync
/// (`ATC_ERR_INVALID` after). Where the table last applied went: `atc_router_published`.
///
/// # Safety
/// `router` is a live handle; `dir` points to `dir_len` bytes (or is NULL with `dir_len` 0);
/// `errbuf` to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_router_publish_images(
    router: *mut AtcRouter,
    dir: *const c_char,
    dir_len: usize,
    flags: i32,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `router` is NULL or a live handle nothing else uses during the call.
        let r = unsafe { handle_mut(router, "router") }?;
        let dir = if dir_len == 0 {
            None
        } else {
            // SAFETY: `dir` is NULL or points to `dir_len` readable bytes.
            Some(PathBuf::from(unsafe { str_arg(dir, dir_len, "dir") }?))
        };
        if r.builder.is_some() {
            return Err(Fail::new(
                ATC_ERR_INVALID,
                "images are published by a builder set up before the first background sync",
            ));
        }
        if let Some(dir) = &dir {
            image_file::own_dir(dir).map_err(|e| {
                Fail::new(
                    ATC_ERR_INVALID,
                    format_args!("image directory {}: {e}", dir.display()),
                )
            })?;
        }
        let keep = match flags {
            0 => true,
            ATC_PUBLISH_DROP_TABLES => false,
            _ => {
                return Err(Fail::new(
                    ATC_ERR_INVALID,
                    format_args!("{flags} is not a publish flag (0 or ATC_PUBLISH_DROP_TABLES)"),
                ))
            }
        };
        r.publish_dir = Some((dir, keep));
        Ok(ATC_OK)
    })
}

/// `atc_router_publish_images`: the router does not keep the tables it publishes. Applying a
/// published table leaves the router empty (its process matches from the image, through an
/// image router); the builder thread keeps the table as its copy for the next build, so the
/// process holds it once. A table that could not be written is applied as usual.
pub const ATC_PUBLISH_DROP_TABLES: i32 = 1;

/// The hook a publishing router's builder runs on each table (see `background::builder`):
/// images written in `dir`, or sealed and put on `shelf` for the router to hold once applied.
pub(crate) fn publisher(dir: Option<PathBuf>, shelf: SealedShelf) -> atc_router::Publish {
    let mut n = 0u64;
    Box::new(move |version, router| {
        n += 1;
        let bytes = router.to_image().map_err(|e| e.to_string())?;
        let path = match &dir {
            None => {
                let sealed = image_file::seal(version, &bytes);
                drop(bytes);
                release_freed_pages();
                let (file, path) = sealed.map_err(|e| format!("sealing table image: {e}"))?;
                shelf
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((version, file));
                path
            }
            Some(dir) => {
                let name = format!(
                    "atc-{}-{version}-{n}.{}",
                    std::process::id(),
                    image_file::EXTENSION
                );
                let written = image_file::publish(dir, &name, &bytes);
                drop(bytes);
                release_freed_pages();
                let path = written.map_err(|e| format!("writing table image {name}: {e}"))?;
                path.to_string_lossy().into_owned()
            }
        };
        Ok(path)
    })
}

/// A router applied the table of `version`: it holds that version's sealed image (so that its
/// path stays good until the next table is applied) and lets go of every earlier one.
pub(crate) fn hold_sealed(r: &mut AtcRouter, version: u64) {
    let mut shelf = r.sealed.lock().unwrap_or_else(|e| e.into_inner());
    // The very descriptor the published path names is kept (a copy would have another number).
    let (upto, later): (Vec<_>, Vec<_>) = shelf.drain(..).partition(|(v, _)| *v <= version);
    *shelf = later;
    drop(shelf);
    r.held = upto
        .into_iter()
        .find(|(v, _)| *v == version)
        .map(|(_, f)| f);
}

/// Gives the pages of memory freed on this thread back to the system. glibc keeps a thread
/// arena's freed pages resident: a build frees its scratch and the table it replaced, and
/// writing the image frees a copy of the image, so without this the builder worker went on
/// holding its peak (about as much as a worker with a table of its own). Runs on the builder
/// thread, after the image is written, so no request waits for it.
fn release_freed_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim walks glibc's own free lists; it touches no memory of ours.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Where the builder wrote the table the last `atc_router_sync_apply` applied: `ATC_OK` with
/// the path in `buf` (`*buf_len`: capacity in, bytes out, no NUL) and its version in
/// `*version` (may be NULL); `ATC_ERR_IMAGE` when writing it failed (the reason in `buf`);
/// `ATC_ERR_NOT_FOUND` when no table was applied since images are published;
/// `ATC_ERR_BUFFER` with the length needed in `*buf_len` (and `*version` set) when the text does
/// not fit.
///
/// # Safety
/// `router` is a live handle; `buf` points to `*buf_len` writable bytes; `version` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn atc_router_published(
    router: *const AtcRouter,
    version: *mut u64,
    buf: *mut c_char,
    buf_len: *mut usize,
) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle.
        let r = unsafe { handle(router, "router") }?;
        let Some((v, published)) = &r.published else {
            return Err(Fail::new(ATC_ERR_NOT_FOUND, ""));
        };
        if !version.is_null() {
            // SAFETY: non-NULL and writable (the caller's contract).
            unsafe { *version = *v };
        }
        let (text, status) = match published {
            Ok(path) => (path.as_str(), ATC_OK),
            Err(why) => (why.as_str(), ATC_ERR_IMAGE),
        };
        // SAFETY: `buf` points to `*buf_len` writable bytes (the caller's contract).
        unsafe { write_text(text, buf, buf_len) }?;
        Ok(status)
    })
}

/// The path another process of this user opens the image by (`atc_image_open`) while
/// this one holds it, in `buf` (`*buf_len`: capacity in, bytes out, no NUL; `ATC_ERR_BUFFER`
/// with the length needed when it does not fit): for a sealed image (`atc_router_publish_images`
/// without a directory). `ATC_ERR_NOT_FOUND` for an image read from a file (the file is its
/// path).
///
/// # Safety
/// `image` is a live handle; `buf` points to `*buf_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn atc_image_share_path(
    image: *const AtcImage,
    buf: *mut c_char,
    buf_len: *mut usize,
) -> i32 {
    guard_status(|| {
        // SAFETY: `image` is NULL or a live handle.
        let r = unsafe { handle(image, "image") }?;
        let Some(path) = r.bytes.share_path() else {
            return Err(Fail::new(ATC_ERR_NOT_FOUND, "an image read from a file"));
        };
        // SAFETY: `buf` points to `*buf_len` writable bytes (the caller's contract).
        unsafe { write_text(&path, buf, buf_len) }?;
        Ok(ATC_OK)
    })
}

/// Maps the image file at `path` (`path_len` bytes) and checks it whole as a table of
/// `schema`: the opened image, or NULL with the reason in `errbuf` (`ATC_ERR_IMAGE`: missing,
/// unreadable, not a regular file of this process's user that no one else can write (a
/// symbolic link is not followed, a FIFO not waited on), not an image, corrupt, truncated, of
/// another library version or another schema's fields). Holds the calling thread for the check (milliseconds at 100,000 routes):
/// a worker switching tables uses `atc_image_open_start`. Its regexes are compiled by the
/// first request that evaluates each (`atc_image_open_start` also takes those the table in
/// force compiled).
/// Attach it to a router (`atc_router_attach_image`) or free it with `atc_image_free`.
///
/// # Safety
/// `schema` is a live handle; `path` points to `path_len` bytes; `errbuf` to `*errbuf_len`
/// bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_image_open(
    schema: *const AtcSchema,
    path: *const c_char,
    path_len: usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> *mut AtcImage {
    guard_ptr(errbuf, errbuf_len, || {
        // SAFETY: `schema` is NULL or a live handle.
        let schema = unsafe { handle(schema, "schema") }?.share();
        // SAFETY: `path` is NULL or points to `path_len` readable bytes.
        let path = unsafe { str_arg(path, path_len, "path") }?;
        let (router, bytes) = open(schema, Path::new(path))?;
        Ok(Box::into_raw(Box::new(AtcImage { router, bytes })))
    })
}

/// Starts mapping and checking the image file at `path` on a thread of its own, and returns at
/// once: poll `atc_image_open_ready`, then `atc_image_open_finish` takes the image. NULL
/// (reason in `errbuf`) only for bad arguments. The thread also gives the image the compiled
/// regexes an image of this process holds for the same sources (the table in force):
/// after a push, requests compile only regexes this process never compiled (each is compiled
/// by the first request that evaluates it).
///
/// # Safety
/// As `atc_image_open`.
#[no_mangle]
pub unsafe extern "C" fn atc_image_open_start(
    schema: *const AtcSchema,
    path: *const c_char,
    path_len: usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> *mut AtcImageOpening {
    guard_ptr(errbuf, errbuf_len, || {
        // SAFETY: `schema` is NULL or a live handle.
        let schema = unsafe { handle(schema, "schema") }?.share();
        // SAFETY: `path` is NULL or points to `path_len` readable bytes.
        let path = PathBuf::from(unsafe { str_arg(path, path_len, "path") }?);
        let result: Arc<Mutex<Option<Res<Opened>>>> = Arc::default();
        let slot = result.clone();
        let thread = std::thread::Builder::new()
            .name("atc-image-open".into())
            .spawn(move || {
                let opened = std::panic::catch_unwind(|| {
                    let opened = open(schema, &path)?;
                    opened.0.reuse_regexes();
                    Ok(opened)
                })
                .unwrap_or_else(|_| Err(image_fail("opening the image panicked")));
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(opened);
            })
            .map_err(|e| image_fail(format_args!("starting the opening thread: {e}")))?;
        Ok(Box::into_raw(Box::new(AtcImageOpening {
            thread: Some(thread),
            result,
        })))
    })
}

/// Whether an opening is done (1) or still checking (0); `ATC_ERR_NULL` for NULL.
///
/// # Safety
/// `opening` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn atc_image_open_ready(opening: *const AtcImageOpening) -> i32 {
    guard_status(|| {
        // SAFETY: `opening` is NULL or a live handle.
        let o = unsafe { handle(opening, "opening") }?;
        let done = o.result.lock().unwrap_or_else(|e| e.into_inner()).is_some();
        Ok(i32::from(done))
    })
}

/// Ends an opening (waiting for it if it is not done) and frees it: the image, or NULL
/// with the reason in `errbuf`.
///
/// # Safety
/// `opening` is NULL or a handle from `atc_image_open_start`, not used again after this call;
/// `errbuf` points to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_image_open_finish(
    opening: *mut AtcImageOpening,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> *mut AtcImage {
    guard_ptr(errbuf, errbuf_len, || {
        // SAFETY: `opening` is NULL or a live handle (checked here).
        unsafe { handle(opening, "opening") }?;
        // SAFETY: it came from Box::into_raw here and is freed once (the caller's contract).
        let mut o = *unsafe { Box::from_raw(opening) };
        if let Some(t) = o.thread.take() {
            let _ = t.join();
        }
        let result = o.result.lock().unwrap_or_else(|e| e.into_inner()).take();
        let (router, bytes) =
            result.unwrap_or_else(|| Err(image_fail("the opening thread ended early")))?;
        Ok(Box::into_raw(Box::new(AtcImage { router, bytes })))
    })
}

/// Frees an image, unmapping its file (NULL is ignored). An image attached to a router is the
/// router's: it is freed with the router, or handed back by the next attach.
///
/// # Safety
/// `image` is NULL or a handle from this library's image functions, not yet freed nor
/// attached.
#[no_mangle]
pub unsafe extern "C" fn atc_image_free(image: *mut AtcImage) {
    if !image.is_null() {
        guard_status(|| {
            // SAFETY: from Box::into_raw here, freed once (the caller's contract).
            drop(unsafe { Box::from_raw(image) });
            Ok(ATC_OK)
        });
    }
}

/// Makes `router` route from `image` (NULL: from its own table again): every read of the
/// router (execute, key and needed fields, explain, matches, route expressions, len, fields)
/// answers from the image from this call on, and its executes are counted in the router's stats. The router
/// takes the image; the one it routed from before goes to `*previous` (NULL if none), for the
/// caller to retire or free. The router's own routes (add, remove, syncs) are what its builder
/// builds from, and route again once it is detached. Between two requests: O(1).
/// `ATC_ERR_SCHEMA_MISMATCH` (nothing changes) for an image opened with another schema handle
/// than the router's.
///
/// # Safety
/// `router` is a live handle nothing else uses during the call; `image` is NULL or a live
/// image handle, not attached elsewhere and not used by the caller after the call;
/// `previous` is writable.
#[no_mangle]
pub unsafe extern "C" fn atc_router_attach_image(
    router: *mut AtcRouter,
    image: *mut AtcImage,
    previous: *mut *mut AtcImage,
) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle nothing else uses during the call.
        let r = unsafe { handle_mut(router, "router") }?;
        // SAFETY: `previous` is NULL or writable.
        let previous = unsafe { out(previous, "previous") }?;
        let image = if image.is_null() {
            None
        } else {
            // SAFETY: a live handle (checked non-NULL) given up by the caller (its contract).
            let image = unsafe { Box::from_raw(image) };
            if !Arc::ptr_eq(image.router.schema(), r.router.schema()) {
                // Not taken: the caller still owns it.
                let _ = Box::into_raw(image);
                return Err(Fail::new(
                    ATC_ERR_SCHEMA_MISMATCH,
                    "the image was opened with another schema handle than the router's",
                ));
            }
            Some(image)
        };
        *previous =
            std::mem::replace(&mut r.mapped, image).map_or(std::ptr::null_mut(), Box::into_raw);
        Ok(ATC_OK)
    })
}

/// Frees an image on a thread of its own, then removes its file `path` (`path_len`
/// bytes; may be empty) if no process maps it any more: what a worker that switched to a new
/// image does with the old one, so that unmapping it and freeing what this process compiled
/// for it (regexes) never holds the worker. Returns at once; NULL is ignored.
///
/// # Safety
/// `image` is NULL or a live handle not attached to a router, not used again after this
/// call; `path` points to `path_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn atc_image_retire(
    image: *mut AtcImage,
    path: *const c_char,
    path_len: usize,
) -> i32 {
    guard_status(|| {
        if image.is_null() {
            return Ok(ATC_OK);
        }
        // SAFETY: from Box::into_raw here, given up by the caller (its contract).
        let r = unsafe { Box::from_raw(image) };
        let path = if path_len == 0 {
            None
        } else {
            // SAFETY: `path` points to `path_len` readable bytes.
            Some(PathBuf::from(unsafe { str_arg(path, path_len, "path") }?))
        };
        let retire = move || {
            drop(r);
            if let Some(p) = path {
                let _ = image_file::remove_if_unused(&p);
            }
        };
        // Without a thread to be had, the closure (the router with it) is dropped here.
        std::thread::Builder::new()
            .name("atc-image-retire".into())
            .spawn(retire)
            .map_err(|e| image_fail(format_args!("retiring an image: {e}")))?;
        Ok(ATC_OK)
    })
}

/// Removes the image file at `path` if no process maps it: 1 removed (or already gone), 0 in
/// use, or `ATC_ERR_IMAGE` (reason in `errbuf`).
///
/// # Safety
/// `path` points to `path_len` bytes; `errbuf` to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_image_remove_if_unused(
    path: *const c_char,
    path_len: usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `path` is NULL or points to `path_len` readable bytes.
        let path = unsafe { str_arg(path, path_len, "path") }?;
        let removed = image_file::remove_if_unused(Path::new(path)).map_err(image_fail)?;
        Ok(i32::from(removed))
    })
}

/// Removes every image file of `dir` that no process maps, but the one named `keep` (may be
/// empty): the number removed, or `ATC_ERR_IMAGE`.
///
/// # Safety
/// `dir` and `keep` point to their lengths in bytes; `errbuf` to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_image_sweep(
    dir: *const c_char,
    dir_len: usize,
    keep: *const c_char,
    keep_len: usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `dir` is NULL or points to `dir_len` readable bytes.
        let dir = unsafe { str_arg(dir, dir_len, "dir") }?;
        let keep = if keep_len == 0 {
            ""
        } else {
            // SAFETY: `keep` points to `keep_len` readable bytes.
            unsafe { str_arg(keep, keep_len, "keep") }?
        };
        let removed = image_file::sweep(Path::new(dir), keep).map_err(image_fail)?;
        Ok(i32::try_from(removed.len()).unwrap_or(i32::MAX))
    })
}
