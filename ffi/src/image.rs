//! Tables shared by the processes of a node: a router's builder puts every table it builds in
//! an image, sealed in memory (or written as a file), and every process maps it read-only and
//! routes from it: an opened image ([`AtcImage`]) is attached to a router, which from then on
//! answers every read (execute, key and needed fields, explain, matches, len, fields) from it.
//! Images are opened and retired here; routing is the router's, whichever table it reads
//! (`router.rs`), and publishing is its builder's (`publish.rs`). See `docs/gateway.md`, "One
//! table per node".
//!
//! - `atc_image_open` maps and checks an image; `atc_image_open_start` does the same on a
//!   thread of its own, so that a worker switching tables is held only for the swap
//!   (`atc_image_open_ready`, `atc_image_open_finish`). `atc_image_share_path` names a sealed
//!   image this process holds, for another process to open.
//! - `atc_router_attach_image` (`router.rs`) makes a router route from an image;
//!   `atc_image_retire` lets go of an image off the calling thread.
//! - `atc_image_remove_if_unused` and `atc_image_sweep` remove image files no process reads.
//!
//! Invariants: a refused image (corrupt, truncated, foreign, of another library version or
//! schema, unsealed) changes nothing for the caller; nothing done to an image after it was
//! checked reaches a reader (`image_file.rs`).

use std::ffi::c_char;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use atc_router::{ImageRouter, Schema};

use crate::image_file::{self, Mapped};
use crate::schema::AtcSchema;
use crate::{
    guard, guard_ptr, guard_status, handle, str_arg, write_text, Fail, Res, ATC_ERR_IMAGE,
    ATC_ERR_NOT_FOUND, ATC_OK,
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
