//! Table image files: written once into a directory, mapped read-only by every process that
//! reads them, removed once none does. The container's checks are `atc_router::image`'s; this
//! module is the files' life.
//!
//! Invariants:
//! - A file appears under its final name only complete: it is written under a temporary name
//!   (created with mode 0600, never an existing file), synced, then renamed into place. Nothing
//!   ever writes to a file after that, so a mapping never sees its bytes change or shrink
//!   (which would be a SIGBUS on read); the directory must be the gateway's own, as the mode
//!   of its files says.
//! - A process that maps an image holds a shared `flock` on the file for as long as the mapping
//!   lives ([`Mapped`] keeps the descriptor). A file is removed only by [`remove_if_unused`],
//!   which takes the exclusive lock without waiting: it gets it only when no process holds the
//!   shared one. The kernel drops a dead process's locks with its descriptors, so a worker that
//!   crashes never pins a file.
//! - Nothing here runs before it is asked for: no thread, no file, no mapping is made when the
//!   library loads, so a process forked afterwards (an nginx worker) opens its own. A mapping
//!   inherited through `fork` stays valid and keeps the file locked until both processes drop
//!   it (the lock belongs to the shared open file).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The file name ending of table images ([`sweep`] removes only these).
pub const EXTENSION: &str = "atcimg";

/// Writes `bytes` as the image file `name` (which must end in `.atcimg` and name no directory)
/// in `dir`, replacing a file of that name; returns its path. See the module doc for how.
pub fn publish(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    if name.contains('/') || !name.ends_with(&format!(".{EXTENSION}")) || name.starts_with('.') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("image file name {name:?}: a plain name ending in .{EXTENSION}"),
        ));
    }
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    let path = dir.join(name);
    match written.and_then(|()| std::fs::rename(&tmp, &path)) {
        Ok(()) => Ok(path),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn flock(f: &File, how: libc::c_int) -> io::Result<()> {
    // SAFETY: flock(2) on a descriptor the `File` owns; it touches no memory of ours.
    if unsafe { libc::flock(f.as_raw_fd(), how) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// An image file mapped read-only, its shared lock held until drop.
#[derive(Debug)]
pub struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
    /// Held for the lock (see the module doc); closed after the mapping is gone.
    _file: File,
}

// SAFETY: the mapping is read-only and never remapped while `Mapped` lives; reading it from
// several threads is reading immutable memory.
unsafe impl Send for Mapped {}
// SAFETY: as above.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Maps the image file at `path` (locked shared first, so that no sweep removes it in
    /// between). The bytes are not checked here: `atc_router::image::Image::open` does that.
    pub fn open(path: &Path) -> io::Result<Mapped> {
        let file = OpenOptions::new().read(true).open(path)?;
        flock(&file, libc::LOCK_SH)?;
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "image too large"))?;
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "empty image file",
            ));
        }
        // SAFETY: a new private-address read-only shared mapping of `len` bytes of a file we
        // opened for reading; the kernel picks the address. Errors are MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapped {
            ptr,
            len,
            _file: file,
        })
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes until drop, and nothing writes the file (the
        // module's invariant), so they stay what they were for the borrow's life.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `open` made; no borrow of it outlives `self`.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// Removes the image file at `path` if no process maps it; whether it was removed (a missing
/// file counts as removed).
pub fn remove_if_unused(path: &Path) -> io::Result<bool> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e),
    };
    match flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
        // Another file renamed to this name since it was opened is not the one locked (names
        // are not reused by the gateway; this keeps a reuse from removing a mapped file).
        Ok(()) if !same_file(&file, path)? => Ok(false),
        Ok(()) => match std::fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
            Err(e) => Err(e),
        },
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether `path` still names the file `file` has open.
fn same_file(file: &File, path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let (a, b) = match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => (a, b),
        (_, Err(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    Ok(a.dev() == b.dev() && a.ino() == b.ino())
}

/// Removes every image file of `dir` that no process maps, but `keep`; the names removed.
/// Temporary files of writers that died part-way are left (a writer of this process may be
/// using one); they carry the writer's pid.
pub fn sweep(dir: &Path, keep: &str) -> io::Result<Vec<String>> {
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        if name == keep || name.starts_with('.') || !name.ends_with(&format!(".{EXTENSION}")) {
            continue;
        }
        if remove_if_unused(&dir.join(name))? {
            removed.push(name.to_owned());
        }
    }
    removed.sort();
    Ok(removed)
}
