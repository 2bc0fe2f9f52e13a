//! The header compiles as C (and as C++), and a C program linked against the freshly built
//! shared object and static library works. Skipped with a notice when no C compiler is
//! installed.

mod common;

use std::path::Path;
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
fn c_program_against_the_library() {
    if !have("cc") {
        println!("SKIPPED c_program_against_the_library: no C compiler (cc)");
        return;
    }
    let ffi = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = common::cdylib();
    let libdir = lib.parent().unwrap();
    let dir = common::cpath_dir("c");
    let smoke = ffi.join("tests/c/smoke.c");
    let include = ffi.join("include");

    // Dynamically linked, by the public name (libatc_router.so is a symlink in `dir`).
    let exe = dir.join("smoke");
    run(Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg("-I")
        .arg(&include)
        .arg(&smoke)
        .arg("-L")
        .arg(&dir)
        .arg("-latc_router")
        .arg("-o")
        .arg(&exe));
    let out = run(Command::new(&exe).env("LD_LIBRARY_PATH", &dir));
    assert_eq!(out.trim(), "ok");
    // It asked for the library by its SONAME, the major version's name.
    if have("readelf") {
        let dynamic = run(Command::new("readelf").arg("-d").arg(&exe));
        assert!(
            dynamic.contains(&format!("Shared library: [{}]", common::SONAME)),
            "smoke does not need {}:\n{dynamic}",
            common::SONAME
        );
    }

    // Statically linked.
    let staticlib = libdir.join("libatc_router_ffi.a");
    if staticlib.is_file() {
        let exe = dir.join("smoke-static");
        run(Command::new("cc")
            .args(["-std=c99", "-Wall", "-Werror"])
            .arg("-I")
            .arg(&include)
            .arg(&smoke)
            .arg(&staticlib)
            .args(["-lpthread", "-ldl", "-lm", "-o"])
            .arg(&exe));
        assert_eq!(run(&mut Command::new(&exe)).trim(), "ok");
    }

    if have("c++") {
        run(Command::new("c++")
            .args(["-fsyntax-only", "-Wall", "-Werror", "-x", "c++"])
            .arg("-I")
            .arg(&include)
            .arg(include.join("atc_router.h")));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
