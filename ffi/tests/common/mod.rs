//! Helpers shared by the integration tests: finding the freshly built shared object, and a
//! directory that presents it under the name the Lua binding looks for.
#![allow(dead_code)] // each test binary uses a different subset

pub mod nginx;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub const LIB_FILE: &str = "libatc_router_ffi.so";

/// The repository root (the workspace directory).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("ffi/ has a parent")
        .to_path_buf()
}

/// The cdylib built with this test. Cargo builds the library (all its crate types in one
/// compilation) before the integration tests, into `target/<profile>/deps/`, next to the test
/// executable; it is also copied one level up. The deps copy is preferred because it is the
/// one this very build produced; if neither exists (an unusual target layout), the library is
/// built with the same cargo.
pub fn cdylib() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(p) = std::env::var_os("ATC_FFI_CDYLIB") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().expect("test executable path");
        let deps = exe.parent().expect("executable dir").to_path_buf();
        let candidates = [deps.join(LIB_FILE), deps.join("..").join(LIB_FILE)];
        if let Some(p) = candidates.iter().find(|p| p.is_file()) {
            return p.clone();
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "atc-router-ffi", "--lib"])
            .current_dir(repo_root())
            .status()
            .expect("run cargo build");
        assert!(status.success(), "cargo build -p atc-router-ffi failed");
        let built = repo_root().join("target/debug").join(LIB_FILE);
        assert!(
            built.is_file(),
            "{LIB_FILE} not found next to {} nor in target/debug; set ATC_FFI_CDYLIB",
            exe.display()
        );
        built
    })
    .clone()
}

/// The library's SONAME, `libatc_router.so.<major>` (ffi/build.rs): the name a program linked
/// with `-latc_router` asks the dynamic loader for.
pub const SONAME: &str = concat!("libatc_router.so.", env!("CARGO_PKG_VERSION_MAJOR"));

/// A fresh directory holding `libatc_router.so` (a symlink to [`cdylib`]), for `package.cpath`
/// or nginx's `lua_package_cpath`, and [`SONAME`] (the same), for a program linked against it.
pub fn cpath_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("atc-router-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    std::os::unix::fs::symlink(cdylib(), dir.join("libatc_router.so")).expect("symlink");
    std::os::unix::fs::symlink(cdylib(), dir.join(SONAME)).expect("symlink");
    dir
}

/// A `package.cpath` that finds only the library under test.
pub fn lua_cpath(dir: &Path) -> String {
    format!("{}/?.so", dir.display())
}

/// A `package.path` that finds the binding and the Lua test helpers in this repository.
pub fn lua_path() -> String {
    let lua = repo_root().join("lua");
    format!("{0}/?.lua;{0}/t/?.lua", lua.display())
}
