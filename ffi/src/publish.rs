//! Publishing a router's tables as images for the other processes of its node: the hook its
//! builder thread runs on every table it builds (`atc_router_publish_images`), and where the
//! table applied last went (`atc_router_published`). The images themselves are
//! `image_file.rs`'s; opening them is `image.rs`'s.
//!
//! Invariant: a sealed image's path names a descriptor of this process; the descriptor is kept
//! with the table (the core's `Published::keep`) for as long as that table is in force, so a
//! path `atc_router_published` gave stays good until the next table is applied.

use std::ffi::c_char;
use std::path::PathBuf;

use atc_router::Published;

use crate::image_file;
use crate::router::AtcRouter;
use crate::{
    guard, guard_status, handle, handle_mut, str_arg, write_text, Fail, ATC_ERR_IMAGE,
    ATC_ERR_INVALID, ATC_ERR_NOT_FOUND, ATC_OK,
};

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
        if !r.table.publish_with(publisher(dir), keep) {
            return Err(Fail::new(
                ATC_ERR_INVALID,
                "images are published by a builder set up before the first background sync",
            ));
        }
        Ok(ATC_OK)
    })
}

/// `atc_router_publish_images`: the router does not keep the tables it publishes. Applying a
/// published table leaves the router empty (its process matches from the image, through an
/// image router); the builder thread keeps the table as its copy for the next build, so the
/// process holds it once. A table that could not be written is applied as usual.
pub const ATC_PUBLISH_DROP_TABLES: i32 = 1;

/// The hook a publishing router's builder runs on each table: images written in `dir`, or
/// sealed, their descriptor kept with the table (`Published::keep`) so that the path, which
/// names this process's descriptor, stays good while the table is in force.
fn publisher(dir: Option<PathBuf>) -> atc_router::Publish {
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
                return Ok(Published {
                    path,
                    keep: Some(Box::new(file)),
                });
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
        Ok(Published::at(path))
    })
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
        let Some((v, published)) = r.table.published() else {
            return Err(Fail::new(ATC_ERR_NOT_FOUND, ""));
        };
        if !version.is_null() {
            // SAFETY: non-NULL and writable (the caller's contract).
            unsafe { *version = v };
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
