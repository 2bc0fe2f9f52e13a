//! Table image files: published whole and private, mapped read-only, removed only once no one
//! maps them (`ffi/src/image_file.rs`).

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use atc_router::image::{Image, ImageWriter};
use atc_router_ffi::image_file::{publish, remove_if_unused, sweep, Mapped};

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
fn a_mapped_image_reads_in_place_and_checks() {
    let d = dir("map");
    let path = publish(&d, "v1.atcimg", &image(4096)).unwrap();
    let mapped = Mapped::open(&path).unwrap();
    let img = Image::open(mapped.bytes(), 7).unwrap();
    let words = img.words(1).unwrap();
    assert_eq!(words.len(), 4096);
    assert_eq!(words.get(4095), Some(4095));
    // The mapping is shared with other threads as immutable bytes.
    std::thread::scope(|s| {
        s.spawn(|| assert!(Image::open(mapped.bytes(), 7).is_ok()));
    });
    drop(mapped);
    // A file that is not an image maps, and the container refuses it.
    let junk = d.join("junk.atcimg");
    std::fs::write(&junk, b"not an image").unwrap();
    let mapped = Mapped::open(&junk).unwrap();
    assert!(Image::open(mapped.bytes(), 7).is_err());
    drop(mapped);
    std::fs::write(&junk, b"").unwrap();
    assert!(
        Mapped::open(&junk).is_err(),
        "an empty file cannot be mapped"
    );
    assert!(Mapped::open(&d.join("missing.atcimg")).is_err());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_image_is_removed_only_once_no_one_maps_it() {
    let d = dir("remove");
    let path = publish(&d, "v1.atcimg", &image(10)).unwrap();
    let a = Mapped::open(&path).unwrap();
    let b = Mapped::open(&path).unwrap();
    assert!(!remove_if_unused(&path).unwrap());
    drop(a);
    assert!(!remove_if_unused(&path).unwrap(), "one mapping is left");
    drop(b);
    assert!(remove_if_unused(&path).unwrap());
    assert!(!path.exists());
    assert!(
        remove_if_unused(&path).unwrap(),
        "a missing file counts as removed"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_sweep_keeps_the_current_image_and_every_mapped_one() {
    let d = dir("sweep");
    for v in 1..=4 {
        publish(&d, &format!("v{v}.atcimg"), &image(v)).unwrap();
    }
    std::fs::write(d.join("notes.txt"), b"not ours").unwrap();
    let old = Mapped::open(&d.join("v2.atcimg")).unwrap();
    assert_eq!(sweep(&d, "v4.atcimg").unwrap(), ["v1.atcimg", "v3.atcimg"]);
    let mut left: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["notes.txt", "v2.atcimg", "v4.atcimg"]);
    // The mapping of a swept-later file stays valid until it is dropped.
    assert!(Image::open(old.bytes(), 7).is_ok());
    drop(old);
    assert_eq!(sweep(&d, "v4.atcimg").unwrap(), ["v2.atcimg"]);
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
