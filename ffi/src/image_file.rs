//! Table images between the processes of a node: sealed in memory by the builder, mapped
//! read-only by every process that routes from them; or written as files, which readers copy.
//! The container's checks are `atc_router::image`'s; this module is the bytes' life.
//!
//! Invariants:
//! - **Nothing a reader routes from can change under it.** A shared image is a `memfd` sealed
//!   against writing, shrinking and growing before anyone else can name it ([`seal`]): the
//!   kernel refuses every later change, whoever asks (the owner, root, a process that opened
//!   it through `/proc`), so a mapping never sees its bytes change or shrink (a SIGBUS on
//!   read). An image file is read into the reader's own memory instead of mapped
//!   ([`Mapped::open`]): truncating, rewriting or replacing the file afterwards reaches no
//!   reader.
//! - **A sealed image is named by a process that holds it**: `/proc/<pid>/fd/<fd>#<name>`
//!   ([`Mapped::share_path`]). Opening checks that the descriptor reached is still the memfd of
//!   that name (names carry the creator's pid and a counter of its own, so a descriptor number
//!   reused for another image is refused, never taken for it), sealed, and this user's. The
//!   kernel frees a sealed image when its last descriptor and mapping go: no file is left, and
//!   a process that dies takes its references with it.
//! - A file appears under its final name only complete ([`publish`]): written under a
//!   temporary name (mode 0600, never an existing file), synced, then renamed into place. A
//!   reader holds a shared `flock` while it copies; [`remove_if_unused`] takes the exclusive one
//!   without waiting, so it never removes a file a reader is copying.
//! - Only a regular file of this process's user that no one else can write is read as an
//!   image, without following a symbolic link and without blocking; the directory is checked
//!   the same way when a builder is set up ([`own_dir`]).
//! - Nothing here runs before it is asked for: no thread, no file, no mapping is made when the
//!   library loads, so a process forked afterwards (an nginx worker) opens its own. A mapping
//!   inherited through `fork` stays valid; its share path names the process that asks.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Seals kept on every shared image: no write, no shrinking, no growing, no other seal.
const SEALS: libc::c_int =
    libc::F_SEAL_WRITE | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// Images sealed by this process so far: part of each name, so that no two are ever named
/// alike (see the module doc).
static SEALED: AtomicU64 = AtomicU64::new(0);

/// Puts `bytes` in a new memfd named `atc-<pid>-<version>-<n>` and seals it (see the module
/// doc): the descriptor (the image lives while it or a mapping does) and the path another
/// process of this user opens it by.
pub fn seal(version: u64, bytes: &[u8]) -> io::Result<(File, String)> {
    let n = SEALED.fetch_add(1, Ordering::Relaxed);
    let name = format!("atc-{}-{version}-{n}", std::process::id());
    let c_name = std::ffi::CString::new(name.as_str()).map_err(io::Error::other)?;
    // SAFETY: memfd_create(2) reads the NUL-terminated name; a new descriptor or -1.
    let fd =
        unsafe { libc::memfd_create(c_name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor just made here and owned by nothing else.
    let mut file = unsafe { File::from_raw_fd(fd) };
    file.write_all(bytes)?;
    // SAFETY: fcntl(2) on a descriptor `file` owns; it touches no memory of ours.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let path = format!(
        "/proc/{}/fd/{}#{name}",
        std::process::id(),
        file.as_raw_fd()
    );
    Ok((file, path))
}

/// The two parts of a sealed image's path, `/proc/<pid>/fd/<fd>` and the memfd's name, or None
/// for a path of another form.
fn sealed_parts(path: &str) -> Option<(&str, &str)> {
    let (at, name) = path.split_once('#')?;
    let rest = at.strip_prefix("/proc/")?;
    let (pid, fd) = rest.split_once("/fd/")?;
    let digits = |t: &str| !t.is_empty() && t.len() <= 10 && t.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(fd) && name.starts_with("atc-") && !name.contains('/'))
        .then_some((at, name))
}

/// An image's bytes: a sealed image mapped read-only, or a file's private copy.
#[derive(Debug)]
pub struct Mapped {
    bytes: Bytes,
}

#[derive(Debug)]
enum Bytes {
    Shared {
        ptr: *mut libc::c_void,
        len: usize,
        /// The memfd, kept open so that the process can name the image to others
        /// ([`Mapped::share_path`]); closed after the mapping is gone.
        file: File,
        name: String,
    },
    Copy(Box<[u8]>),
}

// SAFETY: the mapping is read-only and sealed, never remapped while `Mapped` lives; reading it
// from several threads is reading immutable memory.
unsafe impl Send for Mapped {}
// SAFETY: as above.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// The image at `path`: a sealed image's path ([`seal`], [`Mapped::share_path`]) is mapped;
    /// an image file is read into memory of this process (under a shared lock, so that no
    /// [`sweep`] removes it half-read). The bytes are not checked here:
    /// `atc_router::image::Image::open` does that.
    pub fn open(path: &Path) -> io::Result<Mapped> {
        if let Some((at, name)) = path.to_str().and_then(sealed_parts) {
            return open_sealed(at, name);
        }
        let mut file = open_image(path)?;
        flock(&file, libc::LOCK_SH)?;
        let mut bytes = Vec::with_capacity(file.metadata()?.len().try_into().unwrap_or(0));
        file.read_to_end(&mut bytes)?;
        if bytes.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "empty image file",
            ));
        }
        Ok(Mapped {
            bytes: Bytes::Copy(bytes.into_boxed_slice()),
        })
    }

    /// The bytes of the image.
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            // SAFETY: `ptr` maps `len` readable bytes until drop, and the memfd is sealed
            // against every change (the module's invariant), so they stay what they were for
            // the borrow's life.
            Bytes::Shared { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(ptr.cast::<u8>(), *len)
            },
            Bytes::Copy(b) => b,
        }
    }

    /// The path another process of this user opens this image by, while this one holds it;
    /// None for a file's copy (its file is its path).
    pub fn share_path(&self) -> Option<String> {
        match &self.bytes {
            Bytes::Shared { file, name, .. } => Some(format!(
                "/proc/{}/fd/{}#{name}",
                std::process::id(),
                file.as_raw_fd()
            )),
            Bytes::Copy(_) => None,
        }
    }
}

/// Maps the sealed image `name` that `/proc/<pid>/fd/<fd>` (`at`) should reach; see the
/// module doc for what is checked.
fn open_sealed(at: &str, name: &str) -> io::Result<Mapped> {
    use std::os::unix::fs::MetadataExt;
    let gone = || {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{at} no longer holds the image {name} (its holder let it go)"),
        )
    };
    let link = format!("/memfd:{name} (deleted)");
    let names_it = |p: &str| -> io::Result<bool> {
        match std::fs::read_link(p) {
            Ok(l) => Ok(l.as_os_str().as_encoded_bytes() == link.as_bytes()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    };
    // Looked at before it is opened, so that a descriptor since reused for anything else (a
    // device, a socket) is never opened; and again after, on the descriptor reached.
    if !names_it(at)? {
        return Err(gone());
    }
    // Through /proc's link to the holder's descriptor (so it is followed); never blocking.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(at)?;
    if !names_it(&format!("/proc/self/fd/{}", file.as_raw_fd()))? {
        return Err(gone());
    }
    let meta = file.metadata()?;
    let euid = effective_uid();
    if !meta.file_type().is_file() || meta.uid() != euid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{name} is not an image of this process's user ({euid})"),
        ));
    }
    // SAFETY: fcntl(2) on a descriptor `file` owns.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 || seals & SEALS != SEALS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{name} is not sealed: an image that could change is not mapped"),
        ));
    }
    let len = usize::try_from(meta.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "image too large"))?;
    if len == 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "empty image"));
    }
    // SAFETY: a new read-only shared mapping of `len` bytes of a sealed memfd opened for
    // reading (its size cannot change); the kernel picks the address. Errors are MAP_FAILED.
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
        bytes: Bytes::Shared {
            ptr,
            len,
            file,
            name: name.to_owned(),
        },
    })
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if let Bytes::Shared { ptr, len, .. } = self.bytes {
            // SAFETY: unmaps exactly the mapping `open_sealed` made; no borrow of it outlives
            // `self`.
            unsafe { libc::munmap(ptr, len) };
        }
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

/// Removes the image file at `path` unless a process is reading it; whether it was removed (a
/// missing file counts as removed).
pub fn remove_if_unused(path: &Path) -> io::Result<bool> {
    let file = match open_image(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e),
    };
    match flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
        // Another file renamed to this name since it was opened is not the one locked (names
        // are not reused by the gateway; this keeps a reuse from removing a file being read).
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

/// Removes every image file of `dir` no process is reading, but `keep`; the names removed.
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
