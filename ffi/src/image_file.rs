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
//! - Only a regular file of this process's user that no one else can write is opened as an
//!   image, without following a symbolic link and without blocking; the directory is checked
//!   the same way when a builder is set up ([`own_dir`]).
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
        let file = open_image(path)?;
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

/// Opens `path` for reading as an image file: never a symbolic link, and never blocking (a
/// FIFO or a device named as an image would hold the caller until a writer came); anything but
/// a regular file of this process's user, unwritable by others, is refused.
fn open_image(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::MetadataExt;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let euid = effective_uid();
    if meta.uid() != euid || meta.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "owned by uid {} with mode {:o}: an image is this process's user's ({euid}) and \
                 writable by it alone",
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(file)
}

/// This process's effective user id.
fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}

/// Makes `dir` the directory of a node's image files, or says why it cannot be: created (with
/// its missing parents) with mode 0700 if missing; then it must be a directory (not a symbolic
/// link) of this process's user that no one else can write, in a parent no one else can
/// write but for its sticky bit (as `/tmp`'s), so that no other user can plant, replace or
/// pre-empt a file in it.
pub fn own_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.file_type().is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a directory (a symbolic link is not followed)",
        ));
    }
    let euid = effective_uid();
    if meta.uid() != euid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "owned by uid {}, not by this process's user ({euid}): chown it to the workers' \
                 user, or choose another share_dir",
                meta.uid()
            ),
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "mode {:o} lets others write to it: the image directory must be writable by its \
                 owner alone (chmod 700)",
                meta.mode() & 0o7777
            ),
        ));
    }
    let parent = dir
        .canonicalize()?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let pm = std::fs::metadata(&parent)?;
    if pm.mode() & 0o022 != 0 && pm.mode() & 0o1000 == 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "its parent {} (mode {:o}) lets others replace it: a parent writable by others \
                 needs the sticky bit",
                parent.display(),
                pm.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Removes the image file at `path` if no process maps it; whether it was removed (a missing
/// file counts as removed).
pub fn remove_if_unused(path: &Path) -> io::Result<bool> {
    let file = match open_image(path) {
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
    let (a, b) = match (file.metadata(), std::fs::symlink_metadata(path)) {
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
        // A file that is no image of ours (not a regular file, another user's) is left.
        if let Ok(true) = remove_if_unused(&dir.join(name)) {
            removed.push(name.to_owned());
        }
    }
    removed.sort();
    Ok(removed)
}
