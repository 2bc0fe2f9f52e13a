//! One version for the project: the crates (`[workspace.package] version`), the C header
//! (`ATC_VERSION_*`), the library (`atc_router_version()`), every Lua module (`_VERSION`), the
//! rockspec and the changelog. A release bumps them together; this test names what was missed.

mod common;

use std::ffi::CStr;
use std::path::{Path, PathBuf};

use mlua::{Lua, LuaOptions, StdLib};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn root() -> PathBuf {
    common::repo_root()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The value of the first `key = "value"` line of `text` (TOML and Lua alike).
fn quoted_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix(key)?.trim_start();
        let rest = rest.strip_prefix('=')?.trim_start().strip_prefix('"')?;
        rest.split('"').next()
    })
}

#[test]
fn every_crate_has_the_workspace_version() {
    let manifest = read(&root().join("Cargo.toml"));
    let workspace = manifest
        .split("[workspace.package]")
        .nth(1)
        .expect("Cargo.toml has [workspace.package]");
    assert_eq!(quoted_value(workspace, "version"), Some(VERSION));
    for member in ["atc-router", "ffi", "cli", "workload", "benches", "testkit"] {
        let toml = read(&root().join(member).join("Cargo.toml"));
        assert!(
            toml.lines().any(|l| l.trim() == "version.workspace = true"),
            "{member}/Cargo.toml must take the workspace's version (version.workspace = true)"
        );
    }
}

#[test]
fn the_header_and_the_library_say_the_crate_version() {
    let header = read(&root().join("ffi/include/atc_router.h"));
    let define = |name: &str| -> String {
        header
            .lines()
            .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("atc_router.h lacks {name}"))
            .trim()
            .to_owned()
    };
    let from_header = format!(
        "{}.{}.{}",
        define("ATC_VERSION_MAJOR"),
        define("ATC_VERSION_MINOR"),
        define("ATC_VERSION_PATCH")
    );
    assert_eq!(from_header, VERSION, "ATC_VERSION_* in atc_router.h");

    let from_library = unsafe { CStr::from_ptr(atc_router_ffi::atc_router_version()) };
    assert_eq!(
        from_library.to_str().unwrap(),
        VERSION,
        "atc_router_version()"
    );
}

/// Every `.lua` file under `lua/resty/router/`, as (module name, path).
fn lua_modules() -> Vec<(String, PathBuf)> {
    let base = root().join("lua");
    let mut found = Vec::new();
    let mut dirs = vec![base.join("resty/router")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "lua") {
                let name = path
                    .strip_prefix(&base)
                    .unwrap()
                    .with_extension("")
                    .to_string_lossy()
                    .replace('/', ".");
                found.push((name, path));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn every_lua_module_declares_the_version() {
    let modules = lua_modules();
    assert!(
        modules.len() >= 10,
        "only {} Lua modules found",
        modules.len()
    );
    for (name, path) in &modules {
        let text = read(path);
        // cdefs.lua holds the version in a local that its table and its library check use.
        let declared = quoted_value(&text, "_M._VERSION")
            .or_else(|| quoted_value(&text, "local VERSION"))
            .unwrap_or_else(|| panic!("{name} declares no _VERSION"));
        assert_eq!(declared, VERSION, "{name}'s _VERSION ({})", path.display());
    }
}

/// `make install` (and the rockspec and the .deb, which use it) copies the modules its lists
/// name: every module of the tree must be in them.
#[test]
fn make_install_lists_every_lua_module() {
    let makefile = read(&root().join("ffi/Makefile"));
    let list = |var: &str| -> Vec<String> {
        makefile
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{var} := ")))
            .unwrap_or_else(|| panic!("no {var} in ffi/Makefile"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let (top, gateway, etcd) = (
        list("LUA_MODULES"),
        list("LUA_GATEWAY_MODULES"),
        list("LUA_ETCD_MODULES"),
    );
    for (name, path) in lua_modules() {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let listed = if name.starts_with("resty.router.gateway.") {
            gateway.contains(&file)
        } else if name.starts_with("resty.router.etcd.") {
            etcd.contains(&file)
        } else {
            top.contains(&file)
        };
        assert!(
            listed,
            "{name} ({file}) is not in ffi/Makefile's install lists"
        );
    }
}

#[test]
fn the_loaded_modules_report_the_version() {
    // SAFETY: the binding needs the `ffi` and `debug` libraries, which mlua calls unsafe.
    let lua = unsafe { Lua::unsafe_new_with(StdLib::ALL, LuaOptions::new()) };
    let package: mlua::Table = lua.globals().get("package").unwrap();
    package.set("path", common::lua_path()).unwrap();
    package
        .set("cpath", common::lua_cpath(&common::cpath_dir("version")))
        .unwrap();
    // The modules an OpenResty user requires outside a request (the gateway's need `ngx`).
    for module in [
        "resty.router.cdefs",
        "resty.router.schema",
        "resty.router.router",
        "resty.router.context",
        "resty.router.json",
    ] {
        let version: String = lua
            .load(format!("return require({module:?})._VERSION"))
            .eval()
            .unwrap_or_else(|e| panic!("require {module}: {e}"));
        assert_eq!(version, VERSION, "{module}._VERSION");
    }
}

#[test]
fn the_binding_refuses_a_library_of_another_version() {
    for (stub, expected) in [
        (
            r#"{ atc_router_version = function() return "0.1.9" end }"#,
            "is 0.1.9: install the library and the modules of one release",
        ),
        ("{}", "is older than 0.2.0 (it has no atc_router_version)"),
    ] {
        // SAFETY: as above.
        let lua = unsafe { Lua::unsafe_new_with(StdLib::ALL, LuaOptions::new()) };
        let package: mlua::Table = lua.globals().get("package").unwrap();
        package.set("path", common::lua_path()).unwrap();
        package
            .set(
                "cpath",
                common::lua_cpath(&common::cpath_dir("version-stub")),
            )
            .unwrap();
        // `ffi.load` hands cdefs.lua a stand-in for a library of another release.
        let err: String = lua
            .load(format!(
                r#"
                local real = require("ffi")
                package.loaded.ffi = setmetatable({{ load = function() return {stub} end }},
                    {{ __index = real }})
                local ok, err = pcall(require, "resty.router.cdefs")
                assert(not ok, "cdefs.lua took a library of another version")
                return err
                "#
            ))
            .eval()
            .unwrap();
        assert!(
            err.contains(&format!(
                "resty.router {VERSION} needs libatc_router {VERSION}"
            )) && err.contains(expected),
            "{err}"
        );
    }
}

#[test]
fn the_rockspec_has_the_version() {
    let name = format!("atc-router-{VERSION}-1.rockspec");
    let rockspecs: Vec<String> = std::fs::read_dir(root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rockspec"))
        .collect();
    assert_eq!(
        rockspecs,
        std::slice::from_ref(&name),
        "one rockspec, for this version (`luarocks make` takes the only one)"
    );
    let text = read(&root().join(&name));
    assert_eq!(
        quoted_value(&text, "version"),
        Some(format!("{VERSION}-1").as_str())
    );
    assert_eq!(
        quoted_value(&text, "tag"),
        Some(format!("v{VERSION}").as_str())
    );
}
