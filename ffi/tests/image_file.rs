//! Table images (`ffi/src/image_file.rs`): sealed in memory, mapped read-only, unchangeable by
//! anyone and named so that a reused descriptor is never taken for them; image files published
//! whole and private, and copied when opened, so that nothing done to a file later reaches a
//! reader.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use atc_router::image::{Image, ImageWriter};
use atc_router_ffi::image_file::{own_dir, publish, remove_if_unused, seal, sweep, Mapped};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("atc-image-file-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn image(n: u32) -> Vec<u8> {
    let mut w = ImageWriter::new(7);
    w.words(1, &(0..n).collect::<Vec<_>>()).unwrap();
    w.finish()
}

#[test]
fn a_published_image_is_private_complete_and_alone() {
    let d = dir("publish");
    let bytes = image(1000);
    let path = publish(&d, "v1.atcimg", &bytes).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["v1.atcimg"]);
    // Names that could leave the directory or hide are refused.
    for bad in ["../v2.atcimg", "v2.img", ".v2.atcimg"] {
        assert!(publish(&d, bad, &bytes).is_err(), "{bad}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_image_file_is_read_once_and_nothing_done_to_it_later_reaches_the_reader() {
    let d = dir("map");
    let bytes = image(4096);
    let path = publish(&d, "v1.atcimg", &bytes).unwrap();
    let read = Mapped::open(&path).unwrap();
    assert_eq!(
        read.share_path(),
        None,
        "a file's image is named by its file"
    );
    // Truncated, rewritten in place, replaced, removed: the reader keeps what it read.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    std::fs::write(&path, b"rewritten").unwrap();
    publish(&d, "v1.atcimg", &image(3)).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(read.bytes(), &bytes[..]);
    let img = Image::open(read.bytes(), 7).unwrap();
    let words = img.words(1).unwrap();
    assert_eq!(words.len(), 4096);
    assert_eq!(words.get(4095), Some(4095));
    // Shared with other threads as immutable bytes.
    std::thread::scope(|s| {
        s.spawn(|| assert!(Image::open(read.bytes(), 7).is_ok()));
    });
    drop(read);
    // A file that is not an image is read, and the container refuses it.
    let junk = d.join("junk.atcimg");
    std::fs::write(&junk, b"not an image").unwrap();
    let read = Mapped::open(&junk).unwrap();
    assert!(Image::open(read.bytes(), 7).is_err());
    std::fs::write(&junk, b"").unwrap();
    assert!(Mapped::open(&junk).is_err(), "an empty file is no image");
    assert!(Mapped::open(&d.join("missing.atcimg")).is_err());
    // Nothing holds a file once it is read.
    assert!(remove_if_unused(&junk).unwrap());
    assert!(!junk.exists());
    assert!(
        remove_if_unused(&junk).unwrap(),
        "a missing file counts as removed"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_sealed_image_maps_in_place_and_no_one_can_change_it() {
    use std::io::Write;
    let bytes = image(4096);
    let (file, path) = seal(7, &bytes).unwrap();
    let at = path.split('#').next().unwrap().to_owned();
    let name = path.split('#').nth(1).unwrap();
    assert!(
        name.starts_with(&format!("atc-{}-7-", std::process::id())),
        "{path}"
    );
    let mapped = Mapped::open(Path::new(&path)).unwrap();
    assert_eq!(mapped.bytes(), &bytes[..]);
    let shared = mapped.share_path().unwrap();
    assert_ne!(shared, path, "named by the mapping's own descriptor");
    assert!(shared.ends_with(&format!("#{name}")), "{shared}");
    // Opened for writing through /proc (as any process of the user, or root, can): every
    // change is refused by the kernel, and the mapping reads what it read.
    let mut w = std::fs::OpenOptions::new().write(true).open(&at).unwrap();
    assert!(w.set_len(0).is_err(), "truncated");
    assert!(w.set_len(1 << 20).is_err(), "grown");
    assert!(w.write_all(b"junk").is_err(), "written");
    // SAFETY: fcntl(2) on a descriptor `file` owns.
    let sealed_more = unsafe {
        libc::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            libc::F_ADD_SEALS,
            libc::F_SEAL_WRITE,
        )
    };
    assert_eq!(sealed_more, -1, "the seals themselves are sealed");
    assert_eq!(mapped.bytes(), &bytes[..]);
    assert!(Image::open(mapped.bytes(), 7).is_ok());
    // The publisher lets it go: its path no longer opens; the mapping's does, while it lives.
    drop(w);
    drop(file);
    let e = Mapped::open(Path::new(&path)).unwrap_err().to_string();
    assert!(e.contains("no longer holds"), "{e}");
    let again = Mapped::open(Path::new(&shared)).unwrap();
    drop(mapped);
    assert_eq!(again.bytes(), &bytes[..]);
    let e = Mapped::open(Path::new(&shared)).unwrap_err().to_string();
    assert!(e.contains("no longer holds"), "{e}");
}

/// A path names the memfd it was made for: a descriptor number since reused for another image
/// (or for anything else) is refused, without opening what it is now; an unsealed memfd of the
/// right name is refused.
#[test]
fn a_sealed_path_opens_only_the_image_it_names() {
    let (a, path_a) = seal(1, &image(10)).unwrap();
    let fd_a = std::os::fd::AsRawFd::as_raw_fd(&a);
    drop(a);
    // The lowest free descriptor: most likely a's number again.
    let (b, path_b) = seal(2, &image(20)).unwrap();
    if std::os::fd::AsRawFd::as_raw_fd(&b) == fd_a {
        assert_eq!(path_a.split('#').next(), path_b.split('#').next());
    }
    let e = Mapped::open(Path::new(&path_a)).unwrap_err().to_string();
    assert!(e.contains("no longer holds"), "{e}");
    assert_eq!(
        Mapped::open(Path::new(&path_b)).unwrap().bytes(),
        &image(20)[..]
    );
    // A pipe's descriptor under an image's name: refused, and never waited on.
    let mut fds = [0; 2];
    // SAFETY: pipe(2) writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let pipe = format!("/proc/{}/fd/{}#atc-1-1-1", std::process::id(), fds[0]);
    let e = Mapped::open(Path::new(&pipe)).unwrap_err().to_string();
    assert!(e.contains("no longer holds"), "{e}");
    // SAFETY: closing the descriptors pipe(2) made here.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    // An unsealed memfd named as an image: refused.
    let name = std::ffi::CString::new("atc-unsealed").unwrap();
    // SAFETY: memfd_create(2) with a NUL-terminated name.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a descriptor just made, owned by nothing else.
    let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    std::io::Write::write_all(&mut f, &image(10)).unwrap();
    let unsealed = format!("/proc/{}/fd/{fd}#atc-unsealed", std::process::id());
    let e = Mapped::open(Path::new(&unsealed)).unwrap_err().to_string();
    assert!(e.contains("not sealed"), "{e}");
    drop(b);
}

#[test]
fn a_sweep_keeps_the_current_image_and_its_readers_keep_theirs() {
    let d = dir("sweep");
    for v in 1..=4 {
        publish(&d, &format!("v{v}.atcimg"), &image(v)).unwrap();
    }
    std::fs::write(d.join("notes.txt"), b"not ours").unwrap();
    let old = Mapped::open(&d.join("v2.atcimg")).unwrap();
    assert_eq!(
        sweep(&d, "v4.atcimg").unwrap(),
        ["v1.atcimg", "v2.atcimg", "v3.atcimg"]
    );
    let mut left: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["notes.txt", "v4.atcimg"]);
    // What a reader read stays valid after its file is swept.
    assert!(Image::open(old.bytes(), 7).is_ok());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_process_that_dies_leaves_no_lock_behind() {
    let d = dir("crash");
    let path = publish(&d, "v1.atcimg", &image(10)).unwrap();
    // Another process holds the shared lock a mapping holds (util-linux's flock(1) takes the
    // same flock(2) lock), then is killed.
    // `--no-fork`: flock(1) becomes the command, so killing it kills the lock's only holder.
    let mut holder = std::process::Command::new("flock")
        .args(["--shared", "--no-fork"])
        .arg(&path)
        .args(["sleep", "60"])
        .spawn()
        .expect("flock(1) from util-linux");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // Wait until it holds the lock: until an exclusive lock can no longer be taken.
    let exclusive_free = || {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(&path).unwrap();
        // SAFETY: flock(2) on a descriptor `f` owns; closing `f` releases what it takes.
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
    };
    while exclusive_free() {
        assert!(
            std::time::Instant::now() < deadline,
            "flock(1) never took the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!remove_if_unused(&path).unwrap());
    assert!(path.exists());
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(remove_if_unused(&path).unwrap());
    std::fs::remove_dir_all(&d).unwrap();
}

/// What only a writer of the directory could plant under an image's name is refused, and
/// never blocks: a FIFO (whose open would wait for a writer), a symbolic link, a file others
/// can write.
#[test]
fn only_a_regular_file_of_our_own_is_opened_and_never_blocks() {
    let d = dir("kinds");
    let real = publish(&d, "v1.atcimg", &image(10)).unwrap();
    let fifo = d.join("fifo.atcimg");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let link = d.join("link.atcimg");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let open_to_all = d.join("shared.atcimg");
    std::fs::write(&open_to_all, image(10)).unwrap();
    std::fs::set_permissions(&open_to_all, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let paths = [fifo.clone(), link.clone(), open_to_all.clone()];
    std::thread::spawn(move || {
        for p in &paths {
            let refused = Mapped::open(p).err().map(|e| e.to_string());
            let kept = remove_if_unused(p).is_err();
            tx.send((p.clone(), refused, kept)).unwrap();
        }
    });
    for _ in 0..3 {
        let (p, refused, kept) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("opening a planted file returns at once");
        assert!(refused.is_some(), "{} was opened", p.display());
        assert!(kept, "{} is not ours to remove", p.display());
    }
    assert!(
        std::fs::read_dir(&d).unwrap().count() == 4,
        "nothing was removed"
    );
    // A sweep passes them by, and still removes what it may.
    let real_name = real.file_name().unwrap().to_str().unwrap().to_owned();
    publish(&d, "v0.atcimg", &image(3)).unwrap();
    let swept = sweep(&d, &real_name).unwrap();
    assert_eq!(swept, ["v0.atcimg"]);
    assert!(Mapped::open(&real).is_ok());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_image_directory_is_ours_alone() {
    let d = dir("own");
    // Missing: created, with its parents, mode 0700.
    let made = d.join("a/b");
    own_dir(&made).unwrap();
    let mode = std::fs::metadata(&made).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    // Writable by others, with or without the sticky bit: refused, saying why.
    for m in [0o777, 0o1777, 0o775] {
        std::fs::set_permissions(&made, std::fs::Permissions::from_mode(m)).unwrap();
        let e = own_dir(&made).unwrap_err().to_string();
        assert!(e.contains("lets others write"), "{m:o}: {e}");
    }
    std::fs::set_permissions(&made, std::fs::Permissions::from_mode(0o755)).unwrap();
    own_dir(&made).unwrap();
    // A symbolic link is not followed; a file is no directory.
    let link = d.join("link");
    std::os::unix::fs::symlink(&made, &link).unwrap();
    assert!(own_dir(&link).is_err());
    std::fs::write(d.join("file"), b"").unwrap();
    assert!(own_dir(&d.join("file")).is_err());
    // In a parent others can write: only with the sticky bit (as /tmp).
    let open_parent = d.join("open");
    std::fs::create_dir(&open_parent).unwrap();
    std::fs::create_dir(open_parent.join("images")).unwrap();
    std::fs::set_permissions(&open_parent, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = own_dir(&open_parent.join("images"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("sticky"), "{e}");
    std::fs::set_permissions(&open_parent, std::fs::Permissions::from_mode(0o1777)).unwrap();
    own_dir(&open_parent.join("images")).unwrap();
    // Another user's directory (when the tests can make one: as root).
    if unsafe { libc::geteuid() } == 0 {
        let theirs = d.join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
        let e = own_dir(&theirs).unwrap_err().to_string();
        assert!(e.contains("owned by uid 65534"), "{e}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// `atc_router_published` with a buffer too small for the path: `ATC_ERR_BUFFER` and the
/// length needed, as every call with an output buffer answers; nothing cut.
#[test]
fn where_a_table_was_published_is_never_cut_short() {
    use atc_router_ffi::publish::{atc_router_publish_images, atc_router_published};
    use atc_router_ffi::*;
    use std::ffi::c_char;
    use std::ptr::null_mut;
    let d = dir("published");
    let p = |s: &str| s.as_ptr().cast::<c_char>();
    unsafe {
        let s = atc_schema_new();
        let name = "http.path";
        let rc = atc_schema_add_field(
            s,
            p(name),
            name.len(),
            ATC_TYPE_STRING,
            null_mut(),
            null_mut(),
        );
        assert_eq!(rc, ATC_OK);
        let r = atc_router_new(s, null_mut(), null_mut());
        let dir = d.to_str().unwrap();
        let rc = atc_router_publish_images(r, p(dir), dir.len(), 0, null_mut(), null_mut());
        assert_eq!(rc, ATC_OK);
        let text = "1\ta8f2c1e4-0000-4000-8000-000000000001\thttp.path ^= \"/a\"\n";
        let rc = atc_router_sync_start_text(
            r,
            1,
            p(text),
            text.len(),
            ATC_TEXT_COPY,
            ATC_SYNC_ALL_OR_NOTHING,
            null_mut(),
            null_mut(),
        );
        assert_eq!(rc, ATC_OK);
        let started = std::time::Instant::now();
        while atc_router_sync_ready(r) != 1 {
            assert!(started.elapsed() < std::time::Duration::from_secs(60));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut version = 0u64;
        let mut report = std::mem::zeroed::<AtcSyncReport>();
        let rc = atc_router_sync_apply(
            r,
            &mut version,
            &mut report,
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
        );
        assert_eq!(rc, ATC_OK);
        let mut small = [0 as c_char; 8];
        let mut len = small.len();
        let rc = atc_router_published(r, &mut version, small.as_mut_ptr(), &mut len);
        assert_eq!(rc, ATC_ERR_BUFFER);
        assert!(len > 8, "the length needed: {len}");
        assert_eq!(small, [0; 8], "nothing written");
        let mut buf = vec![0 as c_char; len];
        let mut got = buf.len();
        let rc = atc_router_published(r, &mut version, buf.as_mut_ptr(), &mut got);
        assert_eq!(rc, ATC_OK);
        assert_eq!(got, len);
        let path = String::from_utf8(buf.iter().map(|&c| c as u8).collect()).unwrap();
        assert!(path.starts_with(dir) && path.ends_with(".atcimg"), "{path}");
        assert_eq!(version, 1);
        routes_from_the_image(s, &path);
        atc_router_free(r);
        atc_schema_free(s);
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// The image at `path`, opened and attached to a router of `s`: that router answers from it,
/// counts its executes, refuses an image of another schema handle (which stays the caller's),
/// and hands the image back when detached.
///
/// # Safety
/// `s` is a live schema handle with the field `http.path`.
unsafe fn routes_from_the_image(s: *mut atc_router_ffi::AtcSchema, path: &str) {
    use atc_router_ffi::image::{atc_image_free, atc_image_open};
    use atc_router_ffi::router::atc_router_attach_image;
    use atc_router_ffi::*;
    use std::ptr::null_mut;
    let img = atc_image_open(s, path.as_ptr().cast(), path.len(), null_mut(), null_mut());
    assert!(!img.is_null());
    // Another schema handle with the same field: the attach is refused, nothing changes.
    let other = atc_schema_new();
    let name = "http.path";
    let rc = atc_schema_add_field(
        other,
        name.as_ptr().cast(),
        name.len(),
        ATC_TYPE_STRING,
        null_mut(),
        null_mut(),
    );
    assert_eq!(rc, ATC_OK);
    let stranger = atc_router_new(other, null_mut(), null_mut());
    let mut previous = null_mut();
    let rc = atc_router_attach_image(stranger, img, &mut previous);
    assert_eq!(rc, ATC_ERR_SCHEMA_MISMATCH);
    atc_router_free(stranger);
    atc_schema_free(other);

    let reader = atc_router_new(s, null_mut(), null_mut());
    let rc = atc_router_attach_image(reader, img, &mut previous);
    assert_eq!(rc, ATC_OK);
    assert!(previous.is_null(), "no image before");
    let mut n = 0usize;
    assert_eq!(atc_router_len(reader, &mut n), ATC_OK);
    assert_eq!(n, 1, "the image's routes");
    let ctx = atc_context_new(s, null_mut(), null_mut());
    let (mut id, mut ty) = (0u32, 0i32);
    let rc = atc_context_field_id(
        ctx,
        name.as_ptr().cast(),
        name.len(),
        &mut id,
        &mut ty,
        null_mut(),
        null_mut(),
    );
    assert_eq!(rc, ATC_OK);
    for (value, want) in [("/a/1", 1), ("/b", 0)] {
        assert_eq!(atc_context_reset(ctx), ATC_OK);
        let rc = atc_context_add_str(
            ctx,
            id,
            value.as_ptr().cast(),
            value.len(),
            null_mut(),
            null_mut(),
        );
        assert_eq!(rc, ATC_OK);
        assert_eq!(atc_router_execute(reader, ctx), want, "{value}");
    }
    let mut stats = std::mem::zeroed::<AtcStats>();
    stats.size = std::mem::size_of::<AtcStats>();
    assert_eq!(atc_router_stats(reader, &mut stats), ATC_OK);
    assert_eq!(
        (stats.routed, stats.not_found),
        (1, 1),
        "counted by the reader"
    );

    // Detached: its own (empty) table answers again, and the image comes back.
    let rc = atc_router_attach_image(reader, null_mut(), &mut previous);
    assert_eq!(rc, ATC_OK);
    assert_eq!(previous, img);
    assert_eq!(atc_router_len(reader, &mut n), ATC_OK);
    assert_eq!(n, 0);
    atc_image_free(previous);
    atc_context_free(ctx);
    atc_router_free(reader);
}
