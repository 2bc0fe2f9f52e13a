//! The stages of the crate depend one way: language -> schema -> compile -> index -> router,
//! with the leaves below them all and lint and the reference evaluator on the side
//! (docs/architecture.md, "Stages"). This test reads every source file and fails on an import
//! that goes backwards, so a cycle cannot creep in unnoticed.
//!
//! An import is any path `crate::<module>` or `super::…` that reaches the crate root, outside
//! comments. Stage code names its dependencies by their stage path (`crate::schema::Schema`),
//! not by the root's re-exports (`crate::Schema`), which would hide the stage they come from.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Modules that depend on nothing but each other and std: errors, limits, values, the stack
/// guard, the work counter, failpoints, route-list decoding, exact-size allocation, short
/// byte-string equality, the table image's container, a build's helper threads.
const LEAVES: &[&str] = &[
    "error",
    "failpoint",
    "fitted",
    "image",
    "limits",
    "route_list",
    "short_eq",
    "stack",
    "threads",
    "value",
    "work",
];

/// The stages and side modules, each after everything it may import (but see [`allowed`]).
const ORDER: &[&str] = &[
    "language",
    "schema",
    // Kong's request fields: built on the schema, used by the router's context.
    "request",
    "compile",
    // The reference evaluator walks the compiled tree; only the router and tests call it.
    "reference",
    "index",
    "router",
    // Lint is on the side: it may read every stage, and no stage reads it.
    "lint",
];

/// What each module may import besides the leaves and itself.
fn allowed(module: &str) -> Option<&'static [&'static str]> {
    Some(match module {
        m if LEAVES.contains(&m) => &[],
        "language" => &[],
        "schema" => &ORDER[..1],
        "request" => &ORDER[..2],
        // Not `request`: what a request field means is the router's business.
        "compile" => &["language", "schema"],
        "reference" | "index" => &["language", "schema", "compile"],
        "router" | "lint" => {
            let at = ORDER.iter().position(|m| *m == module).unwrap();
            &ORDER[..at]
        }
        _ => return None,
    })
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src/`: `index/tree.rs` is `[index, tree]`, `index/mod.rs`
/// is `[index]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" {
        parts.push(stem.to_owned());
    }
    parts
}

/// The text of a line without its comment (`//`, `///`, `//!`). A `//` inside a string literal
/// cuts the line short, which can only hide an import, never invent one; no stage module has
/// one on an import line.
fn code_of(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

/// The name of an inline module opened on this line (`mod tests {`).
fn inline_module(line: &str) -> Option<String> {
    let rest = line.trim_start();
    let rest = rest
        .strip_prefix("pub(crate) ")
        .or_else(|| rest.strip_prefix("pub "))
        .unwrap_or(rest);
    let name = ident_at(rest.strip_prefix("mod ")?);
    rest.trim_end().ends_with('{').then(|| name.to_owned())
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level names a line's paths reach from the crate root: `crate::x…`, the items of
/// `crate::{x, y::z}`, and `super::…` chains that climb out of the file's module.
fn root_names(code: &str, module: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = &rest[..i];
        let after = &rest[i + "crate::".len()..];
        rest = after;
        // `$crate::`, or `crate` inside a longer identifier.
        if before
            .chars()
            .last()
            .is_some_and(|c| c == '$' || c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name = ident_at(item.trim());
                if !name.is_empty() {
                    out.push(name.to_owned());
                }
            }
        } else {
            out.push(ident_at(after).to_owned());
        }
    }
    let mut rest = code;
    while let Some(i) = rest.find("super::") {
        let before_ok = rest[..i]
            .chars()
            .last()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'));
        let mut after = &rest[i..];
        let mut ups = 0;
        while let Some(a) = after.strip_prefix("super::") {
            ups += 1;
            after = a;
        }
        rest = after;
        if before_ok && ups >= module.len() {
            out.push(ident_at(after).to_owned());
        }
    }
    out
}

#[test]
fn no_stage_imports_a_later_stage() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    files.sort();
    let stages: BTreeSet<&str> = ORDER.iter().chain(LEAVES).copied().collect();

    let mut backwards = Vec::new();
    let mut checked = 0;
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        if rel == Path::new("lib.rs") {
            continue;
        }
        let module = module_path(rel);
        let own_name = module[0].clone();
        let own = own_name.as_str();
        let Some(may) = allowed(own) else {
            panic!(
                "{}: module `{own}` has no place in the stage table of this test",
                rel.display()
            );
        };
        let text = fs::read_to_string(file).unwrap();
        let mut module = module;
        for (n, line) in text.lines().enumerate() {
            // An inline module (`mod tests {`) is one level deeper for `super::`; such modules
            // close at the end of their file, so the rest of the file is taken as inside it.
            if let Some(name) = inline_module(line) {
                module.push(name);
            }
            for name in root_names(code_of(line), &module) {
                checked += 1;
                let ok =
                    name == own || LEAVES.contains(&name.as_str()) || may.contains(&name.as_str());
                if ok {
                    continue;
                }
                let why = if stages.contains(name.as_str()) {
                    format!("`{own}` may not import `{name}` (a later stage)")
                } else {
                    format!("`crate::{name}`: name the stage it comes from")
                };
                backwards.push(format!("{}:{}: {why}", rel.display(), n + 1));
            }
        }
    }
    assert!(checked > 100, "the scan found only {checked} imports");
    assert!(
        backwards.is_empty(),
        "imports against the stage order:\n{}",
        backwards.join("\n")
    );
}

#[test]
fn the_scan_sees_every_form_of_import() {
    let m = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        root_names("use crate::router::Router;", &m(&["index"])),
        ["router"]
    );
    assert_eq!(
        root_names("use crate::{Error, schema::Schema};", &m(&["index"])),
        ["Error", "schema"]
    );
    assert_eq!(
        root_names("use super::super::router::X;", &m(&["index", "tree"])),
        ["router"]
    );
    assert!(root_names("use super::keyed::Key;", &m(&["index", "tree"])).is_empty());
    assert_eq!(
        root_names("use super::keyed::Key;", &m(&["index"])),
        ["keyed"]
    );
    assert!(root_names("$crate::x!()", &m(&["index"])).is_empty());
    assert_eq!(code_of("let a = 1; // crate::router"), "let a = 1; ");
    assert_eq!(inline_module("mod tests {").as_deref(), Some("tests"));
    assert_eq!(inline_module("pub(crate) mod record;"), None);
}

/// The siblings a line of a file in `folder` names: `super::x` (from a file directly in the
/// folder, or its own `mod.rs` one level down, `super` is the folder) and `crate::<folder>::x`
/// (`crate::x` in the crate's root folder), for each `x` in `siblings`.
fn sibling_names(code: &str, folder: &str, siblings: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    let full = if folder.is_empty() {
        "crate::".to_owned()
    } else {
        format!("crate::{folder}::")
    };
    let prefixes = [full.as_str(), "super::"];
    for prefix in prefixes {
        let mut rest = code;
        while let Some(i) = rest.find(prefix) {
            let before = &rest[..i];
            let after = &rest[i + prefix.len()..];
            rest = after;
            if before
                .chars()
                .last()
                .is_some_and(|c| c == '$' || c == ':' || c.is_ascii_alphanumeric() || c == '_')
            {
                continue;
            }
            let names: Vec<&str> = match after.strip_prefix('{') {
                Some(group) => group[..group.find('}').unwrap_or(group.len())]
                    .split(',')
                    .map(|item| ident_at(item.trim()))
                    .collect(),
                None => vec![ident_at(after)],
            };
            out.extend(
                names
                    .into_iter()
                    .filter(|n| siblings.contains(*n))
                    .map(str::to_owned),
            );
        }
    }
    out
}

/// Each cycle among the modules of `dir` (its files and sub-folders, not `mod.rs`, which
/// declares them), as the path around it. `folder` is the folder's path from the crate root.
fn cycles_in(dir: &Path, folder: &str) -> Vec<String> {
    let mut modules: Vec<(String, PathBuf)> = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() && path.join("mod.rs").exists() {
            modules.push((name, path.join("mod.rs")));
        } else if path.extension().is_some_and(|e| e == "rs") && name != "mod" && name != "lib" {
            modules.push((name, path));
        }
    }
    modules.sort();
    let siblings: BTreeSet<String> = modules.iter().map(|(n, _)| n.clone()).collect();
    let mut edges = std::collections::BTreeMap::new();
    for (name, file) in &modules {
        let text = fs::read_to_string(file).unwrap();
        let mut uses = BTreeSet::new();
        // A file's tests may reach anything of their module; what the module's code reaches
        // is what ends before them.
        for line in text.lines().take_while(|l| l.trim() != "#[cfg(test)]") {
            uses.extend(sibling_names(code_of(line), folder, &siblings));
        }
        uses.remove(name);
        edges.insert(name.clone(), uses);
    }
    // A depth-first walk from each module; a cycle is a path back to where it started. Each
    // cycle is reported once, from its smallest module.
    let mut found = Vec::new();
    for start in &siblings {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for next in &edges[&at] {
                if next == start {
                    if path.iter().all(|m| m >= start) {
                        found.push(format!("{folder}: {} -> {start}", path.join(" -> ")));
                    }
                } else if next > start && seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    found
}

fn folders(dir: &Path, folder: &str, out: &mut Vec<(PathBuf, String)>) {
    out.push((dir.to_path_buf(), folder.to_owned()));
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let sub = if folder.is_empty() {
                name
            } else {
                format!("{folder}::{name}")
            };
            folders(&path, &sub, out);
        }
    }
}

/// Within a folder, no file depends on one that depends back on it (directly or around a
/// longer loop): what two files share goes to a module of its own. Checked for the core and
/// for the C ABI crate beside it (docs/architecture.md, "Stages depend one way").
#[test]
fn no_files_of_a_folder_depend_on_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    folders(&root.join("src"), "", &mut all);
    folders(&root.join("../ffi/src"), "", &mut all);
    assert!(all.len() > 8, "found only {} folders", all.len());
    let cycles: Vec<String> = all
        .iter()
        .flat_map(|(dir, folder)| cycles_in(dir, folder))
        .collect();
    assert!(cycles.is_empty(), "file cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_cycle_scan_sees_a_cycle() {
    let dir = std::env::temp_dir().join(format!("atc-cycle-scan-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("a.rs"), "use super::b::B;\n").unwrap();
    fs::write(dir.join("b.rs"), "use crate::stage::{c::C, x};\n").unwrap();
    fs::write(dir.join("c.rs"), "pub fn f() { super::a::g() }\n").unwrap();
    fs::write(
        dir.join("d.rs"),
        "use super::a::A;\n#[cfg(test)]\nuse super::d::D;\n",
    )
    .unwrap();
    let found = cycles_in(&dir, "stage");
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, ["stage: a -> b -> c -> a"]);
}
