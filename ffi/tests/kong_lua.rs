//! Kong's own Lua test suite (`t/*.t` of Kong's `atc-router` 1.7.1 crate) against our library:
//! every Test::Nginx block that needs only the `resty.router.*` modules runs in a real nginx
//! with our `libatc_router.so` and our `lua/resty/router/*.lua` on the paths, and each of its
//! checks is compared as Test::Nginx would (status code, `response_body` exactly or
//! `response_body_like` as a regex, each `no_error_log` pattern absent from the request's log
//! lines, each `error_log` pattern present), `repeat_each` times.
//!
//! A body check that differs only in the text of error messages counts as "wording": the
//! modules are wrapped (in `init_by_lua`) so that every error string they return is marked,
//! and the check is wording when the expected body equals ours line by line once each marked
//! error may read differently (but not be absent): the lines around errors must be equal, and an
//! error may only stand for one line of Kong's, or for one of Kong's multi-line parser errors
//! (` --> line:column` and its frame), never for lines of other output. Every other failed check
//! fails this test, and so does a tally below [`MIN_PASSING`]. The tally and the wording
//! differences are printed:
//!
//! ```text
//! kong t/: 309/325 pass, 16 error wording: 01-sanity.t TEST 4 (x2), ...
//! ```
//!
//! Kong's crate is found through `cargo metadata` (it is in the workspace's graph as
//! atc-testkit's dev-dependency), or at `ATC_KONG_SRC`. Needs nginx with the lua module, like
//! `nginx.rs`; `ATC_REQUIRE_NGINX=1` makes its absence a failure.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::nginx::{self, free_port, send, Nginx, Running};

const KONG: &str = "atc-router-1.7.1";

/// Checks that pass exactly (of 325, at 309 when this was written; the other 16 differ only in
/// the wording of errors). A change that makes one of them a wording difference fails the test:
/// raise this number when more pass, never lower it.
const MIN_PASSING: usize = 309;

/// How long a request's log-phase line may take to appear in error.log after its response was
/// read (it is written before nginx closes the connection, so it is there at once; the deadline
/// only turns a lost line into a failure instead of a hang), and nginx to start.
const LOG_DEADLINE: Duration = Duration::from_secs(30);

/// The directory of Kong's crate source.
fn kong_source() -> PathBuf {
    if let Some(p) = std::env::var_os("ATC_KONG_SRC") {
        return PathBuf::from(p);
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(common::repo_root())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Registry packages live in `<name>-<version>/`: the manifest path names the version, so
    // no JSON parser is needed to pick Kong's crate out of the graph.
    let json = String::from_utf8(out.stdout).expect("UTF-8 metadata");
    let key = "\"manifest_path\":\"";
    json.match_indices(key)
        .map(|(i, _)| {
            let rest = &json[i + key.len()..];
            &rest[..rest.find('"').expect("closing quote")]
        })
        .find(|p| p.ends_with(&format!("/{KONG}/Cargo.toml")))
        .map(|p| Path::new(p).parent().expect("a directory").to_path_buf())
        .unwrap_or_else(|| panic!("{KONG} is not in the workspace's dependency graph"))
}

/// One `=== TEST` block of a Test::Nginx file.
#[derive(Debug, Default)]
struct Block {
    name: String,
    sections: BTreeMap<String, String>,
}

/// A Test::Nginx file: its `repeat_each`, the checks per block its plan declares, its blocks.
struct TestFile {
    name: String,
    repeat: usize,
    planned_per_block: Option<usize>,
    blocks: Vec<Block>,
}

/// Test::Base's default filters: line ends normalised, blank lines before and trailing
/// whitespace after the content removed (the last line keeps its newline).
fn trim(section: &str) -> String {
    let s = section.replace("\r\n", "\n");
    let start = s
        .split_inclusive('\n')
        .take_while(|l| l.trim().is_empty())
        .map(str::len)
        .sum::<usize>();
    let s = s[start..].trim_end();
    if s.is_empty() {
        String::new()
    } else {
        format!("{s}\n")
    }
}

fn parse_file(name: &str, text: &str) -> TestFile {
    let (head, data) = text.split_once("\n__DATA__\n").expect("a __DATA__ section");
    let number_after = |key: &str| -> Option<usize> {
        let rest = &head[head.find(key)? + key.len()..];
        rest.trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    let repeat = number_after("repeat_each(").unwrap_or(1);
    let planned_per_block = number_after("blocks() *");
    let mut blocks: Vec<Block> = Vec::new();
    let mut section: Option<String> = None;
    for line in data.split_inclusive('\n') {
        if let Some(title) = line.strip_prefix("=== ") {
            blocks.push(Block {
                name: title.trim().to_owned(),
                ..Block::default()
            });
            section = None;
        } else if let Some(header) = line.strip_prefix("--- ") {
            let header = header.trim();
            let (key, inline) = match header.split_once(':') {
                Some((k, v)) => (k.trim(), v.trim().to_owned()),
                None => (header, String::new()),
            };
            // `--- http_config eval: $::HttpConfig`: the name is the first word.
            let key = key.split_whitespace().next().unwrap_or(key).to_owned();
            let block = blocks.last_mut().expect("a section inside a block");
            block.sections.insert(key.clone(), inline);
            section = Some(key);
        } else if let (Some(key), Some(block)) = (&section, blocks.last_mut()) {
            block
                .sections
                .get_mut(key)
                .expect("open section")
                .push_str(line);
        }
    }
    for b in &mut blocks {
        for v in b.sections.values_mut() {
            *v = trim(v);
        }
    }
    TestFile {
        name: name.to_owned(),
        repeat,
        planned_per_block,
        blocks,
    }
}

/// Modules a block's Lua code requires.
fn required_modules(block: &Block) -> Vec<String> {
    let code = block.sections.get("config").map_or("", String::as_str);
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("require") {
        rest = &rest[i + "require".len()..];
        let t = rest.trim_start().trim_start_matches('(').trim_start();
        if let Some(q) = t.chars().next().filter(|c| *c == '"' || *c == '\'') {
            if let Some(end) = t[1..].find(q) {
                out.push(t[1..1 + end].to_owned());
            }
        }
    }
    out
}

/// `init_by_lua` code that marks every error string the modules return (`\x01…\x02`), so
/// that a check differing only in an error's text can be told from any other difference. The
/// wrapped functions return exactly as many values as before (`ngx.say` prints every one).
const MARK_ERRORS: &str = r##"
local function pack(...)
    return { n = select("#", ...), ... }
end
local function mark(mod, name)
    local f = mod[name]
    mod[name] = function(...)
        local r = pack(f(...))
        if r[1] == nil and type(r[2]) == "string" then
            r[2] = "\1" .. r[2] .. "\2"
        end
        return unpack(r, 1, r.n)
    end
end
local schema = require("resty.router.schema")
local router = require("resty.router.router")
local context = require("resty.router.context")
mark(schema, "add_field")
mark(router, "add_matcher")
mark(router, "validate")
mark(context, "add_value")
"##;

fn write_config(n: &Nginx, dir: &Path, libdir: &Path, port: u16, block: &Block) -> PathBuf {
    let lua = common::repo_root().join("lua");
    // `$::HttpConfig` of Kong's files sets the paths to Kong's modules and library; ours
    // replace it.
    let http_config = block
        .sections
        .get("http_config")
        .map_or("", String::as_str)
        .replace("$::HttpConfig", "");
    let conf = format!(
        r#"{head}
    lua_package_path "{lua}/?.lua;{share}/?.lua;;";
    lua_package_cpath "{libdir}/?.so;;";
    init_by_lua_block {{ {MARK_ERRORS} }}
    init_worker_by_lua_block {{ ngx.log(ngx.NOTICE, "{READY_MARK}") }}
    {http_config}
    server {{
        listen 127.0.0.1:{port};
        server_name localhost;
        # The last line a request logs (its log phase runs before nginx closes the connection):
        # the test reads the request's log up to it. Kong's blocks define no log phase.
        log_by_lua_block {{ ngx.log(ngx.NOTICE, "{DONE_MARK}", ngx.var.http_x_atc_seq) }}
        {config}
    }}
}}
"#,
        head = nginx::conf_head(n, dir, 1, "debug"),
        lua = lua.display(),
        share = n.lua_share.display(),
        libdir = libdir.display(),
        config = block.sections.get("config").map_or("", String::as_str),
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    path
}

/// What the worker logs once it has started.
const READY_MARK: &str = "atc kong t: worker ready";

/// What the log-phase line of request `n` says (its `X-Atc-Seq` header).
const DONE_MARK: &str = "atc kong t: request done, seq ";

/// The result of one check.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Pass,
    Wording,
    Fail(String),
}

/// Whether `expected` is `ours` (with its marked error spans) line by line, once each marked
/// span may be any non-empty text: the logical lines of both ([`our_lines`], [`kong_lines`])
/// pair up, a line without an error is equal to its partner, and a line with errors matches
/// its partner with each error standing for any text. An error thus never absorbs a line of
/// Kong's that is not part of one of its errors.
fn equal_but_error_text(ours: &str, expected: &str) -> bool {
    if !ours.contains('\u{1}') {
        return false;
    }
    let (ours, kong) = (our_lines(ours), kong_lines(expected));
    ours.len() == kong.len()
        && ours.iter().zip(&kong).all(|(o, k)| {
            if !o.contains('\u{1}') {
                return o == k;
            }
            let mut pattern = String::from("(?s)^");
            let mut rest = o.as_str();
            while let Some(open) = rest.find('\u{1}') {
                pattern.push_str(&regex::escape(&rest[..open]));
                let close = rest[open..].find('\u{2}').map_or(rest.len(), |c| open + c);
                pattern.push_str(".+?");
                rest = rest.get(close + 1..).unwrap_or("");
            }
            pattern.push_str(&regex::escape(rest));
            pattern.push('$');
            regex::Regex::new(&pattern).is_ok_and(|re| re.is_match(k))
        })
}

/// Our body in logical lines: split at the line ends outside the marked error spans (an error
/// of ours, whatever its own lines, is within one logical line).
fn our_lines(marked: &str) -> Vec<String> {
    let mut lines = vec![String::new()];
    let mut in_error = false;
    for c in marked.chars() {
        match c {
            '\u{1}' => in_error = true,
            '\u{2}' => in_error = false,
            '\n' if !in_error => {
                lines.push(String::new());
                continue;
            }
            _ => {}
        }
        lines.last_mut().expect("one line at least").push(c);
    }
    lines
}

/// Kong's body in logical lines: its lines, except that a parser error of Kong's (pest's
/// format: a line with ` --> line:column`, the frame lines `  |` / `N | source`, the note
/// `  = message`, and when the message ends with `:` its indented continuation and final
/// `error: ...` line, as a regex error has) is joined into the logical line it starts on.
fn kong_lines(expected: &str) -> Vec<String> {
    let location = regex::Regex::new(r" --> \d+:\d+$").unwrap();
    let frame = regex::Regex::new(r"^ *(\d+ *)?\|").unwrap();
    let note = regex::Regex::new(r"^ *= ").unwrap();
    let raw: Vec<&str> = expected.split('\n').collect();
    let mut lines = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        let mut line = raw[i].to_owned();
        i += 1;
        if location.is_match(&line) {
            while i < raw.len() && frame.is_match(raw[i]) {
                line = format!("{line}\n{}", raw[i]);
                i += 1;
            }
            if i < raw.len() && note.is_match(raw[i]) {
                let continued = raw[i].ends_with(':');
                line = format!("{line}\n{}", raw[i]);
                i += 1;
                while continued && i < raw.len() && raw[i].starts_with(' ') {
                    line = format!("{line}\n{}", raw[i]);
                    i += 1;
                }
                if continued && i < raw.len() && raw[i].starts_with("error: ") {
                    line = format!("{line}\n{}", raw[i]);
                    i += 1;
                }
            }
        }
        lines.push(line);
    }
    lines
}

fn body_check(block: &Block, marked: &str) -> Option<(String, Outcome)> {
    let body = marked.replace(['\u{1}', '\u{2}'], "");
    if let Some(expected) = block.sections.get("response_body") {
        let outcome = if body == *expected {
            Outcome::Pass
        } else if equal_but_error_text(marked, expected) {
            Outcome::Wording
        } else {
            Outcome::Fail(format!("body {body:?}, expected {expected:?}"))
        };
        return Some(("response_body".into(), outcome));
    }
    let pattern = block.sections.get("response_body_like")?;
    let re = regex::Regex::new(&format!("(?s){pattern}")).expect("a valid pattern");
    let outcome = if re.is_match(&body) {
        Outcome::Pass
    } else if regex::escape(pattern) == *pattern && equal_but_error_text(marked, pattern) {
        // A pattern without metacharacters is the expected text itself.
        Outcome::Wording
    } else {
        Outcome::Fail(format!("body {body:?} does not match {pattern:?}"))
    };
    Some(("response_body_like".into(), outcome))
}

/// The log of request `seq`: what error.log has from byte `from` to the end of the request's
/// log-phase line, once that line is there (polled: `None` after [`LOG_DEADLINE`]).
fn request_log(path: &Path, from: usize, seq: usize) -> Option<String> {
    let mark = format!("{DONE_MARK}{seq}");
    let until = Instant::now() + LOG_DEADLINE;
    loop {
        let log = std::fs::read(path).unwrap_or_default();
        let log = String::from_utf8_lossy(&log[from.min(log.len())..]).into_owned();
        if let Some(at) = log.find(&mark) {
            let end = log[at..].find('\n').map_or(log.len(), |n| at + n + 1);
            return Some(log[..end].to_owned());
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs one block `repeat` times; each check's name and outcome.
fn run_block(n: &Nginx, libdir: &Path, block: &Block, repeat: usize) -> Vec<(String, Outcome)> {
    let dir = std::env::temp_dir().join(format!("atc-kong-t-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let conf = write_config(n, &dir, libdir, port, block);
    let mut running = Running::start(n, &dir, &conf);
    let request = block
        .sections
        .get("request")
        .map_or("GET /t", |r| r.trim())
        .to_owned();
    let (method_path, version) = match request.rsplit_once(" HTTP/") {
        Some((mp, v)) => (mp.to_owned(), format!("HTTP/{v}")),
        None => (request.clone(), "HTTP/1.0".to_owned()),
    };
    let raw = |seq: usize| {
        format!(
            "{method_path} {version}\r\nHost: localhost\r\nConnection: close\r\n\
             X-Atc-Seq: {seq}\r\n\r\n"
        )
    };
    let want_status: u16 = block
        .sections
        .get("error_code")
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(200);
    let log_path = dir.join("error.log");
    // Ready once the worker has run init_worker (its port was bound before): no connection is
    // made before the test's, and the start-up lines are all written before the first request.
    let until = Instant::now() + LOG_DEADLINE;
    while !std::fs::read_to_string(&log_path).is_ok_and(|l| l.contains(READY_MARK)) {
        if let Ok(Some(code)) = running.child.try_wait() {
            panic!(
                "{}: nginx exited with {code}:\n{}",
                block.name,
                running.logs()
            );
        }
        assert!(
            Instant::now() < until,
            "{}: nginx did not start:\n{}",
            block.name,
            running.logs()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut checks = Vec::new();
    for seq in 0..repeat {
        // The request's log lines are what is written while it runs, up to its log-phase line
        // (start-up lines are not checked, as in Test::Nginx).
        let logged_before = std::fs::metadata(&log_path).map_or(0, |m| m.len() as usize);
        let response = send(port, raw(seq).as_bytes())
            .unwrap_or_else(|e| panic!("{}: no answer: {e}\n{}", block.name, running.logs()));
        let log = request_log(&log_path, logged_before, seq).unwrap_or_else(|| {
            panic!(
                "{}: no log-phase line for request {seq} in {LOG_DEADLINE:?}\n{}",
                block.name,
                running.logs()
            )
        });
        let status = if response.status == want_status {
            Outcome::Pass
        } else {
            Outcome::Fail(format!(
                "status {}, expected {want_status}",
                response.status
            ))
        };
        checks.push(("status code".to_owned(), status));
        let marked = String::from_utf8_lossy(&response.body).into_owned();
        checks.extend(body_check(block, &marked));
        for (section, present) in [("no_error_log", false), ("error_log", true)] {
            for pattern in block
                .sections
                .get(section)
                .map_or("", String::as_str)
                .lines()
                .filter(|l| !l.trim().is_empty())
            {
                let outcome = if log.contains(pattern) == present {
                    Outcome::Pass
                } else {
                    Outcome::Fail(format!("{section} {pattern:?} in:\n{log}"))
                };
                checks.push((format!("{section} {pattern}"), outcome));
            }
        }
    }
    running.stop();
    nginx::assert_clean_logs(&running.logs());
    let _ = std::fs::remove_dir_all(&dir);
    checks
}

#[test]
fn kongs_lua_tests_pass_against_our_library() {
    let Some(nginx) = nginx::required_or_skip("kongs_lua_tests_pass_against_our_library") else {
        return;
    };
    let src = kong_source();
    let mut files: Vec<PathBuf> = std::fs::read_dir(src.join("t"))
        .expect("Kong's t/ directory")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "t"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no t/*.t in {}", src.display());
    let libdir = common::cpath_dir("kong-t");

    let (mut total, mut passed) = (0, 0);
    let mut wording: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let file = parse_file(&name, &std::fs::read_to_string(path).unwrap());
        let mut file_checks = 0;
        for block in &file.blocks {
            let foreign: Vec<String> = required_modules(block)
                .into_iter()
                .filter(|m| !m.starts_with("resty.router."))
                .collect();
            if !foreign.is_empty() {
                skipped.push(format!(
                    "{} {} (needs {})",
                    file.name,
                    block.name,
                    foreign.join(", ")
                ));
                continue;
            }
            let test = block.name.split(':').next().unwrap_or(&block.name).trim();
            for (check, outcome) in run_block(&nginx, &libdir, block, file.repeat) {
                total += 1;
                file_checks += 1;
                match outcome {
                    Outcome::Pass => passed += 1,
                    Outcome::Wording => {
                        *wording.entry(format!("{} {test}", file.name)).or_default() += 1
                    }
                    Outcome::Fail(why) => {
                        failures.push(format!("{} {}: {check}: {why}", file.name, block.name))
                    }
                }
            }
        }
        if let Some(per_block) = file.planned_per_block {
            if skipped.iter().all(|s| !s.starts_with(&file.name)) {
                assert_eq!(
                    file_checks,
                    file.repeat * file.blocks.len() * per_block,
                    "{}: the checks counted here differ from the file's plan",
                    file.name
                );
            }
        }
    }
    let wording_n: usize = wording.values().sum();
    let listed: Vec<String> = wording
        .iter()
        .map(|(t, n)| {
            if *n > 1 {
                format!("{t} (x{n})")
            } else {
                t.clone()
            }
        })
        .collect();
    println!(
        "kong t/: {passed}/{total} pass, {wording_n} error wording: {}",
        listed.join(", ")
    );
    if !skipped.is_empty() {
        println!(
            "skipped (need more than resty.router.*): {}",
            skipped.join("; ")
        );
    }
    assert!(
        failures.is_empty(),
        "{} checks fail:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert_eq!(passed + wording_n, total);
    assert!(
        passed >= MIN_PASSING,
        "{passed} of {total} checks pass exactly, fewer than the {MIN_PASSING} that did: a check \
         that passed now differs in wording"
    );
}

#[test]
fn blocks_and_sections_are_read_as_test_nginx_reads_them() {
    let file = parse_file(
        "x.t",
        "repeat_each(2);\nplan tests => repeat_each() * blocks() * 5;\n__DATA__\n\n\
         === TEST 1: one\n--- http_config eval: $::HttpConfig\n--- config\n    location = /t {\n\
         content_by_lua_block { local r = require(\"resty.router.router\") }\n    }\n\
         --- request\nGET /t\n--- response_body\nnil\n  = x\n\n--- no_error_log\n[error]\n[warn]\n\n\n\
         === TEST 2: two\n--- config\nrequire 'other.mod'\n--- response_body_like\na.b\n",
    );
    assert_eq!((file.repeat, file.planned_per_block), (2, Some(5)));
    assert_eq!(file.blocks.len(), 2);
    let b = &file.blocks[0];
    assert_eq!(b.name, "TEST 1: one");
    assert_eq!(b.sections["http_config"], "$::HttpConfig\n");
    assert_eq!(b.sections["request"], "GET /t\n");
    assert_eq!(b.sections["response_body"], "nil\n  = x\n");
    assert_eq!(b.sections["no_error_log"], "[error]\n[warn]\n");
    assert_eq!(required_modules(b), ["resty.router.router"]);
    assert_eq!(required_modules(&file.blocks[1]), ["other.mod"]);
}

#[test]
fn only_error_text_may_differ_for_wording() {
    let ours = "nil\u{1}line 1: expected an operator\u{2}\n";
    assert!(equal_but_error_text(
        ours,
        "nil --> 1:11\n  = expected binary_operator\n"
    ));
    assert!(!equal_but_error_text(ours, "true --> 1:11\n"));
    assert!(
        !equal_but_error_text(ours, "nil\n"),
        "an error must still be there"
    );
    assert!(
        !equal_but_error_text("nil\n", "nil\n"),
        "no error, no wording"
    );
    let three = "\u{1}a\u{2}\n\u{1}b\u{2}\n\u{1}c\u{2}\n";
    assert!(equal_but_error_text(three, "x\ny\nz\n"));
    assert!(!equal_but_error_text(three, "x\ny\n"));
    // One error does not absorb several lines of Kong's, or a line of other output.
    assert!(!equal_but_error_text("\u{1}a\u{2}\n", "x\ny\n"));
    assert!(!equal_but_error_text("\u{1}a\u{2}\nb\n", "x\ny\nb\n"));
    // Our multi-line error against Kong's one-line error, and the other way round.
    let ours = "nil\n\u{1}line 1, column 21: type mismatch\n  |\n1 | x == 1\n  |      ^\u{2}\n";
    assert!(equal_but_error_text(
        ours,
        "nil\nType mismatch between the LHS and RHS\n"
    ));
    assert!(!equal_but_error_text(ours, "nil\nType mismatch\ntrue\n"));
    // Kong's parser error, with a regex error as its message: one logical line.
    let kong =
        "nil\n --> 1:20\n  |\n1 | h ~ \"([.\"\n  |     ^---^\n  |\n  = regex parse error:\n    \
                ([.\n     ^\nerror: unclosed character class\n";
    assert_eq!(kong_lines(kong).len(), 3, "{:?}", kong_lines(kong));
    assert!(equal_but_error_text(
        "nil\n\u{1}line 1, column 20: invalid regex\u{2}\n",
        kong
    ));
    // ... but what Kong prints after it is a line of its own.
    let more = format!("{kong}true\n");
    assert!(!equal_but_error_text(
        "nil\n\u{1}line 1, column 20: invalid regex\u{2}\n",
        &more
    ));
    assert!(equal_but_error_text("nil\n\u{1}e\u{2}\ntrue\n", &more));
    assert_eq!(our_lines("a\u{1}x\ny\u{2}b\nc"), ["a\u{1}x\ny\u{2}b", "c"]);
}
