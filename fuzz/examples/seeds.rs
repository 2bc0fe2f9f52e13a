//! Writes the checked-in seed corpus, `fuzz/corpus-seed/<target>/`:
//!
//! ```sh
//! cd fuzz && cargo run --example seeds            # rewrites fuzz/corpus-seed/
//! ```
//!
//! - `parse`, `validate`: real expressions: ones the test suites of atc-router use (copied
//!   below), one route of every family of a docs/workload.md table (atc_workload, several seeds),
//!   and the error cases of the language spec.
//! - `matcher`, `c_abi`: structured inputs are bytes decoded by `arbitrary`; the seeds are
//!   pseudo-random byte strings (fixed PRNG, so the output is deterministic) chosen because
//!   they decode to useful runs: a case of the testkit's generator whose routes are added,
//!   whose requests match and which changes the table several times, a sync among the changes
//!   for half of them (`matcher`, run through `atc_testkit::check::run`), or the standard setup
//!   followed by calls (`c_abi`).
//! - `tables`: pseudo-random byte strings that decode (`atc_testkit::tables::decode`) to tables
//!   of at least 8 routes with 4 changes or more, each run through the check first.
//! - `kong_diff`: the expressions of Kong's own tests (its `t/*.t` and the tests in its Rust
//!   sources, read from the crate the fuzz workspace depends on), as the text routes of the
//!   input, each followed by pseudo-random bytes that decode to a case with requests. Every
//!   seed is run through the comparison first, so a seed that fails is reported here.
//!
//! - `image`: valid table images of 0 to 8 sections (the fuzz target also builds images from
//!   its input and forges headers, so these only give the raw path its accepting case), and the
//!   inputs of past crashes.
//!
//! File names are a hash of the contents, as libFuzzer names its corpus files.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use arbitrary::{Arbitrary, Unstructured};
use atc_testkit::{check, table_check, tables, Case};
use atc_workload::Table;

/// Expressions taken from atc-router's tests (syntax.rs, semantics.rs, the former
/// equivalence.rs, the doc examples) and from ffi/tests: valid and invalid ones.
const FROM_TESTS: &[&str] = &[
    r##"http.path ^= "/api""##,
    r##"http.host == "a.com" && http.path ~ "^/users/(?<id>\\d+)$""##,
    r##"http.host == "a.com" && http.path ^= "/v1" || http.path ^= "/v2""##,
    r##"http.host == "api.example.com" && http.path ~ r#"^/users/(?<id>\d+)$"#"##,
    r##"a == 1 && b == 2 || c == 3"##,
    r##"a == 1 || b == 2 && c == 3"##,
    r##"!(a == 1)"##,
    r##"!a == 1"##,
    r##"!!(a == 1)"##,
    r##"lower(http.host) == "abc""##,
    r##"lower(http.host) == "ABC""##,
    r##"any(lower(http.headers.x_foo)) ^= "bar""##,
    r##"lower(any(http.headers.accept)) contains "json""##,
    r##"net.src.ip in 10.0.0.0/8 && net.src.ip not in 10.1.0.0/16"##,
    "net.src.ip not \n\t in 10.0.0.0/8",
    r##"net.dst.port >= 8000 && net.dst.port < 0x2000 && net.dst.port != 010"##,
    r##"net.dst.port == -9223372036854775807"##,
    r##"net.dst.port == -9223372036854775808"##,
    r##"net.dst.port == 019"##,
    r##"net.dst.port == 0X1F"##,
    r##"net.dst.port == 1.5"##,
    r##"net.src.ip == ::ffff:1.2.3.4"##,
    r##"net.src.ip == fe80::1%eth0"##,
    r##"net.src.ip == 2001:db8:0:0:1:0:0:1"##,
    r##"net.src.ip in 10.0.0.1/8"##,
    r##"net.src.ip in ::/0"##,
    r##"net.src.ip in 10.0.0.0/33"##,
    r##"net.src.ip == 010.0.0.1"##,
    r##"http.path == "a\"b\\c\nd\re\tf""##,
    r##"http.path == "\d""##,
    "http.path == \"raw\nline\"",
    r##"http.path == r#"no \escapes "here"#"##,
    r###"http.path == r##"two hashes"##"###,
    "http.path == \"unterminated",
    r##"http.path == 'single'"##,
    r##"http.host = "a""##,
    r##"http.host == "a" // comment"##,
    r##"tls.sni =^ ".example.com" && http.path ~ "^/(a|b)/(?<n>[0-9]+)$""##,
    r##"http.path ~ "(""##,
    r##"http.path ~ "a{1000}{1000}""##,
    r##"http.path ~ r#"(?i)^/shop$"#"##,
    r##"http.method == "GET" || http.method == "HEAD""##,
    r##"(http.host == "a" || http.host == "b") && !(http.path ^= "/admin")"##,
    r##"unknown.field == "x""##,
    r##"upper(http.host) == "a""##,
    r##"http.headers.a.b == "x""##,
    "http.host\r\n==\t\"é🦀\"",
    "((((((((((((((((((((http.host == \"a\"))))))))))))))))))))",
    "",
    "   ",
    "(",
    "http.host ==",
];

/// Inputs on which a fuzz target crashed (see atc-router/tests/fuzz_regressions.rs), kept as
/// seeds so that every run checks them again first.
fn from_fuzzing() -> Vec<Vec<u8>> {
    vec![
        // error.rs snippet underflow: an error after the trailing CRs of a long line.
        format!("http.path == \"{}\" &&{}", "a".repeat(100), "\r".repeat(50)).into_bytes(),
        // The original artifact, crash-da1abf29f872705ed1a313cbf368dd5067015d2b.
        ARTIFACT_DA1ABF29.to_vec(),
    ]
}

const ARTIFACT_DA1ABF29: &[u8] = b"\
    \x6e\x65\x74\x2e\x73\x72\x67\x2e\x6e\x65\x74\xa4\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x65\x74\xa4\x0d\x0d\x0d\x2e\x73\x72\x67\
    \x2e\x6e\x65\x74\xa4\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x65\
    \x74\xa4\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x65\x74\xa4\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x01\x67\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x01\x67\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d";

fn write(dir: &Path, data: &[u8]) {
    // FNV-1a, 64 bits: stable names, so regenerating changes no file that did not change.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
    }
    fs::write(dir.join(format!("{h:016x}")), data).expect("write seed");
}

fn fresh(root: &Path, target: &str) -> PathBuf {
    let dir = root.join(target);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create corpus dir");
    dir
}

/// splitmix64, for reproducible pseudo-random seeds.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[path = "../../testkit/tests/vs_kong/mod.rs"]
mod vs_kong;

/// Kong's crate source, from the fuzz workspace's dependency graph.
fn kong_source() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    let json = String::from_utf8(out.stdout).expect("UTF-8 metadata");
    let key = "\"manifest_path\":\"";
    json.match_indices(key)
        .map(|(i, _)| {
            let rest = &json[i + key.len()..];
            &rest[..rest.find('"').expect("closing quote")]
        })
        .find(|p| p.ends_with("/atc-router-1.7.1/Cargo.toml"))
        .map(|p| Path::new(p).parent().expect("a directory").to_path_buf())
        .expect("Kong's atc-router 1.7.1 is a dependency of the fuzz crate")
}

/// A Lua string literal (`"…"` with escapes, or `[[…]]`) at the start of `s`.
fn lua_string(s: &str) -> Option<String> {
    if let Some(body) = s.strip_prefix("[[") {
        return Some(body[..body.find("]]")?].to_owned());
    }
    let mut chars = s.strip_prefix('"')?.chars();
    let mut out = String::new();
    loop {
        match chars.next()? {
            '"' => return Some(out),
            '\\' => out.push(match chars.next()? {
                'n' => '\n',
                't' => '\t',
                'r' => '\r',
                c => c,
            }),
            c => out.push(c),
        }
    }
}

/// A Rust string literal (`"…"` with the usual escapes, or `r#"…"#`) at the start of `s`, and
/// its length in the source.
fn rust_string(s: &str) -> Option<(String, usize)> {
    if let Some(body) = s.strip_prefix("r#\"") {
        let end = body.find("\"#")?;
        return Some((body[..end].to_owned(), end + 5));
    }
    let mut chars = s.strip_prefix('"')?.char_indices();
    let mut out = String::new();
    loop {
        match chars.next()? {
            (i, '"') => return Some((out, i + 2)),
            (_, '\\') => match chars.next()?.1 {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'u' => {
                    let hex: String = chars
                        .by_ref()
                        .map(|(_, c)| c)
                        .skip(1)
                        .take_while(|c| *c != '}')
                        .collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                c => out.push(c),
            },
            (_, c) => out.push(c),
        }
    }
}

/// The expressions of Kong's tests: the third argument of every `add_matcher(` and every
/// `local expr =` in `t/*.t`, and the string literals of the test modules of its Rust sources
/// that contain an operator.
fn kong_test_expressions() -> BTreeSet<String> {
    let src = kong_source();
    let mut out = BTreeSet::new();
    for entry in fs::read_dir(src.join("t")).expect("Kong's t/") {
        let text = fs::read_to_string(entry.expect("entry").path()).expect("a test file");
        for (i, _) in text.match_indices("add_matcher(") {
            // Skip the priority and the id: the expression follows the second comma.
            let rest = &text[i..];
            let Some(args) = rest.splitn(3, ',').nth(2) else {
                continue;
            };
            out.extend(lua_string(args.trim_start()));
        }
        for (i, _) in text.match_indices("local expr =") {
            out.extend(lua_string(text[i + "local expr =".len()..].trim_start()));
        }
    }
    const OPERATORS: [&str; 9] = [
        "==", "!=", " ~ ", "^=", "=^", " > ", " < ", " in ", "contains",
    ];
    for file in ["ast.rs", "parser.rs", "semantics.rs", "interpreter.rs"] {
        let text = fs::read_to_string(src.join("src").join(file)).expect("a source file");
        let Some(tests) = text.find("#[cfg(test)]").map(|i| &text[i..]) else {
            continue;
        };
        // Literal after literal, so that escaped quotes never start one.
        let mut at = 0;
        while let Some(i) = tests[at..].find('"').map(|i| at + i) {
            let start = if tests[..i].ends_with("r#") { i - 2 } else { i };
            let Some((s, len)) = rust_string(&tests[start..]) else {
                break;
            };
            if OPERATORS.iter().any(|op| s.contains(op)) && !s.contains("-->") {
                out.insert(s);
            }
            at = start + len;
        }
    }
    out.retain(|e| !e.contains('\n') && !e.is_empty());
    out
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus-seed");

    // One route of each family from a few docs/workload.md tables.
    let mut workload = BTreeSet::new();
    for seed in 1..=4 {
        let table = Table::generate(400, seed, true);
        let mut families = BTreeSet::new();
        for r in &table.routes {
            if families.insert(r.family) {
                workload.insert(r.expression.clone());
            }
        }
    }

    let mut n = [0usize; 4];
    for target in ["parse", "validate"] {
        let dir = fresh(&root, target);
        for e in FROM_TESTS
            .iter()
            .copied()
            .chain(workload.iter().map(String::as_str))
        {
            write(&dir, e.as_bytes());
        }
        for e in from_fuzzing() {
            write(&dir, &e);
        }
    }
    n[0] = FROM_TESTS.len() + workload.len() + from_fuzzing().len();

    // matcher: byte strings that decode to cases with several routes, matches and changes
    // (the first twelve with a sync that applied).
    let dir = fresh(&root, "matcher");
    let mut rng = Rng(0x5eed);
    let mut tries = 0;
    while n[2] < 24 && tries < 200_000 {
        tries += 1;
        let len = 256 + (rng.next() % 1024) as usize;
        let data = rng.bytes(len);
        let Ok(case) = Case::arbitrary(&mut Unstructured::new(&data)) else {
            continue;
        };
        let rendered = case.render();
        let stats = check::run(&rendered);
        let synced = stats.synced > 0 || n[2] >= 12;
        if stats.added >= 3 && stats.matched >= 2 && rendered.steps.len() >= 4 && synced {
            write(&dir, &data);
            n[2] += 1;
        }
    }

    // c_abi: a first byte that selects the standard setup (odd: `bool` takes the low bit),
    // then random calls; and a few without the setup. Its own PRNG, so that changing another
    // target's seeds leaves these alone.
    let dir = fresh(&root, "c_abi");
    let mut rng = Rng(0xc0ab1);
    for i in 0..16 {
        let len = 128 + (rng.next() % 896) as usize;
        let mut data = rng.bytes(len);
        data[0] = if i < 12 { 1 } else { 0 };
        write(&dir, &data);
        n[3] += 1;
    }
    // tables: byte strings that decode to tables of at least 8 routes with changes and
    // requests (its own PRNG).
    let dir = fresh(&root, "tables");
    let mut rng = Rng(0x7ab1e5);
    let mut tables_n = 0;
    while tables_n < 16 {
        let len = 512 + (rng.next() % 3584) as usize;
        let data = rng.bytes(len);
        let Ok(case) = tables::decode(&mut Unstructured::new(&data)) else {
            continue;
        };
        if case.table.routes.len() < 8 || case.ops.len() < 4 {
            continue;
        }
        table_check::churn(
            table_check::router(&tables::schema()),
            case.table,
            case.ops,
            &case.reqs,
        );
        write(&dir, &data);
        tables_n += 1;
    }

    // kong_diff: each expression of Kong's tests alone, and all of them together, as text
    // routes, each with a structured case (its own PRNG, so the other targets' seeds stay).
    let dir = fresh(&root, "kong_diff");
    let expressions = kong_test_expressions();
    let mut rng = Rng(0x6b6f_6e67);
    let mut groups: Vec<Vec<&str>> = expressions.iter().map(|e| vec![e.as_str()]).collect();
    let all: Vec<&str> = expressions.iter().map(String::as_str).collect();
    groups.extend(all.chunks(16).map(<[&str]>::to_vec));
    let mut kong_n = 0;
    for group in &groups {
        let mut data = group.join("\n").into_bytes();
        data.extend_from_slice(b"\n\0");
        let len = 128 + (rng.next() % 512) as usize;
        data.extend(rng.bytes(len));
        let split = data
            .windows(2)
            .position(|w| w == b"\n\0")
            .expect("separator")
            + 2;
        let mut case = Case::arbitrary(&mut Unstructured::new(&data[split..])).expect("a case");
        case.texts = group.iter().map(|e| (*e).to_owned()).collect();
        vs_kong::check(&case.render());
        write(&dir, &data);
        kong_n += 1;
    }

    // image: valid images (the loader's accepting path from the raw bytes), one per number of
    // sections up to 8, sections of pseudo-random lengths (its own PRNG).
    let dir = fresh(&root, "image");
    let mut rng = Rng(0x1a6e);
    for sections in 0..=8u32 {
        let mut writer = atc_router::image::ImageWriter::new(0x5eed);
        for kind in 0..sections {
            let len = (rng.next() % 200) as usize;
            writer
                .section(kind * 3, rng.bytes(len))
                .expect("distinct kinds");
        }
        write(&dir, &writer.finish());
    }
    // A crash found by fuzzing: an index image's network length word changed past 32
    // (atc-router/tests/table_image.rs, `changed_words_never_break_a_request`).
    write(&dir, &[0x9b, 0xff, 0xff, 0xff, 0x31, 0, 0, 0, 0, 0, 0, 0]);

    println!(
        "seeds written to {}: parse/validate {} each, matcher {} (of {tries} tried), c_abi {}, \
         tables {tables_n}, kong_diff {kong_n} (from {} expressions of Kong's tests), image 10",
        root.display(),
        n[0],
        n[2],
        n[3],
        expressions.len()
    );
}
