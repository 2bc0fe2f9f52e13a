//! `atc-router check`, run as a user runs it: the built binary on the route files of
//! `tests/data/`, its output and exit status (docs/cli.md).

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn data(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs `atc-router ARGS`, with `stdin` as standard input when given.
fn run_with(args: &[&str], stdin: Option<&str>) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_atc-router"))
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("atc-router runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().expect("an exit status"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn run(args: &[&str]) -> Run {
    run_with(args, None)
}

/// `check FILE ARGS`, expecting `code`.
fn check(file: &str, args: &[&str], code: i32) -> Run {
    let path = data(file);
    let mut all = vec!["check", path.as_str()];
    all.extend_from_slice(args);
    let r = run(&all);
    assert_eq!(
        r.code, code,
        "{all:?}\nstdout:\n{}\nstderr:\n{}",
        r.stdout, r.stderr
    );
    r
}

/// `check FILE --format json ARGS`, expecting `code`: the parsed document.
fn check_json(file: &str, args: &[&str], code: i32) -> Value {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let r = check(file, &all, code);
    let doc: Value = serde_json::from_str(&r.stdout).expect("one JSON document");
    assert_eq!(doc["version"], 3);
    doc
}

/// The lines of the errors of a JSON report, with their kinds.
fn error_kinds(doc: &Value) -> Vec<(u64, String)> {
    doc["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["line"].as_u64().unwrap(),
                e["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

const API_01: &str = "1f4b6d8a-0c2e-4a7b-9d1f-3e5a7c9b0d01";
const API_02: &str = "1f4b6d8a-0c2e-4a7b-9d1f-3e5a7c9b0d02";
const API_04: &str = "1f4b6d8a-0c2e-4a7b-9d1f-3e5a7c9b0d04";

#[test]
fn a_clean_file_exits_0() {
    let r = check("clean.tsv", &[], 0);
    assert!(
        r.stdout
            .ends_with("clean.tsv: 3 routes, 3 valid, 0 errors, 0 findings\n"),
        "{}",
        r.stdout
    );
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
    assert!(r.stderr.is_empty());
    // Nothing to object to under --strict either.
    check("clean.tsv", &["--strict"], 0);
    let doc = check_json("clean.tsv", &[], 0);
    assert_eq!(
        (doc["routes"].as_u64(), doc["valid"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(doc["errors"], serde_json::json!([]));
    assert_eq!(doc["findings"], serde_json::json!([]));
    assert_eq!(doc["explain"], Value::Null);
    assert_eq!(
        (doc["format"].as_str(), doc["schema"].as_str()),
        (Some("tsv"), Some("http"))
    );
}

#[test]
fn errors_are_reported_by_line_and_the_rest_is_still_checked() {
    let r = check("errors.tsv", &[], 1);
    let path = data("errors.tsv");
    let lines: Vec<&str> = r.stdout.lines().collect();
    let at = |n: usize| format!("{path}:{n}: error: ");
    assert!(lines[0].starts_with(&at(4)), "{}", r.stdout);
    assert!(lines[0].contains("expected 3 tab-separated parts"));
    assert!(lines[1].starts_with(&at(5)) && lines[1].contains("bad priority `high`"));
    assert!(lines[2].starts_with(&at(6)) && lines[2].contains("bad id `not-a-uuid`"));
    // The expression error: file and line, then the error's own rendering, indented.
    assert_eq!(
        lines[3],
        format!(
            "{}route 0b7e4a52-93c1-4d2e-8f60-5a1c3e9d7b04: invalid expression",
            at(7)
        )
    );
    assert_eq!(
        &lines[4..8],
        [
            "  line 1, column 22: unknown field `http.port`: it is not in the schema",
            "    |",
            "  1 | http.path ^= \"/a\" && http.port == 80",
            "    |                      ^^^^^^^^^",
        ]
    );
    // A route after the errors is still added and linted: line 9 never wins against line 2.
    let warning = lines
        .iter()
        .position(|l| l.starts_with(&format!("{path}:9: warning: never-wins: ")))
        .expect("the never-wins finding");
    assert!(lines[warning + 1].starts_with(&format!("  {path}:9: route ")));
    assert!(lines[warning + 2].starts_with(&format!("  {path}:2: route ")));
    assert!(r
        .stdout
        .ends_with("errors.tsv: 7 routes, 2 valid, 5 errors, 1 finding\n"));
}

#[test]
fn duplicate_ids_name_the_first_line() {
    let r = check("errors.tsv", &[], 1);
    assert!(r.stdout.contains(&format!(
        "{}:8: error: duplicate id: route at line 2 has it already",
        data("errors.tsv")
    )));
    let doc = check_json("errors.tsv", &[], 1);
    let dup = &doc["errors"][4];
    assert_eq!(dup["kind"], "duplicate-id");
    assert_eq!(
        (dup["line"].as_u64(), dup["first_line"].as_u64()),
        (Some(8), Some(2))
    );
    // The route on line 2 is the one in the router: the finding names it.
    assert_eq!(doc["findings"][0]["routes"][1]["line"], 2);

    // An id repeated after a route whose expression is bad is a duplicate all the same.
    let id = "9d8c7b6a-5f4e-4d3c-8b2a-190807060504";
    let text = format!("2\t{id}\thttp.path ==\n1\t{id}\thttp.path == \"/\"\n");
    let r = run_with(&["check", "-"], Some(&text));
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("<stdin>:1: error: route"), "{}", r.stdout);
    assert!(
        r.stdout.contains("<stdin>:2: error: duplicate id"),
        "{}",
        r.stdout
    );
}

#[test]
fn the_json_report_has_every_error_and_finding() {
    let doc = check_json("errors.tsv", &[], 1);
    assert_eq!(
        (doc["routes"].as_u64(), doc["valid"].as_u64()),
        (Some(7), Some(2))
    );
    assert_eq!(
        error_kinds(&doc),
        [
            (4, "malformed".to_owned()),
            (5, "bad-priority".to_owned()),
            (6, "bad-id".to_owned()),
            (7, "expression".to_owned()),
            (8, "duplicate-id".to_owned()),
        ]
    );
    let expr = &doc["errors"][3];
    assert_eq!(expr["id"], "0b7e4a52-93c1-4d2e-8f60-5a1c3e9d7b04");
    assert_eq!(
        expr["message"],
        "unknown field `http.port`: it is not in the schema"
    );
    let x = &expr["expression_error"];
    assert_eq!(
        (x["kind"].as_str(), x["line"].as_u64(), x["column"].as_u64()),
        (Some("semantic"), Some(1), Some(22))
    );
    assert_eq!(x["span"], serde_json::json!([21, 30]));
    assert!(x["rendered"]
        .as_str()
        .unwrap()
        .ends_with("|                      ^^^^^^^^^"));
    let f = &doc["findings"][0];
    assert_eq!(f["kind"], "never-wins");
    assert_eq!(f["routes"][0]["line"], 9);
    assert_eq!(f["routes"][0]["priority"], 100);
    assert_eq!(f["location"], Value::Null);
}

#[test]
fn strict_fails_on_findings() {
    let text = "\
        20\t2a000000-0000-4000-8000-000000000001\thttp.path ^= \"/api\"\n\
        10\t2a000000-0000-4000-8000-000000000002\thttp.path ^= \"/api/v2\"\n";
    let r = run_with(&["check", "-"], Some(text));
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(
        r.stdout.contains("<stdin>:2: warning: never-wins:"),
        "{}",
        r.stdout
    );
    let r = run_with(&["check", "--strict", "-"], Some(text));
    assert_eq!(r.code, 1, "{}", r.stdout);
    let r = run_with(&["check", "--strict", "--format", "json", "-"], Some(text));
    assert_eq!(r.code, 1);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["file"], "<stdin>");
    assert_eq!(doc["findings"][0]["kind"], "never-wins");
}

#[test]
fn a_schema_file_gives_the_fields() {
    check("gateway.tsv", &["--schema", &data("gateway.schema")], 0);
    check(
        "gateway.tsv",
        &["--schema", &data("gateway-schema.json")],
        0,
    );
    // Against Kong's HTTP fields, `port` and `client` are unknown.
    let doc = check_json("gateway.tsv", &[], 1);
    assert_eq!(
        doc["errors"][0]["message"],
        "unknown field `port`: it is not in the schema"
    );
    // Kong's stream fields have no http.* field.
    let doc = check_json("gateway.tsv", &["--schema", "stream"], 1);
    assert_eq!(error_kinds(&doc).len(), 2);
    // A bad schema file is a whole-file error.
    let r = check("gateway.tsv", &["--schema", &data("gateway.tsv")], 2);
    assert!(
        r.stderr.contains("line 1: expected `name TYPE`"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty());
}

#[test]
fn json_route_files_report_lines() {
    let r = check("routes.json", &[], 1);
    let path = data("routes.json");
    assert!(
        r.stdout.contains(&format!(
            "{path}:8: error: route 5c3e7a10-2b4d-4f6e-8a9c-1d2e3f4a5b02: invalid expression\n  \
         line 2, column 39: expected an operator"
        )),
        "{}",
        r.stdout
    );
    assert!(r
        .stdout
        .contains(&format!("{path}:13: error: bad priority `-1`")));
    assert!(r
        .stdout
        .contains(&format!("{path}:18: warning: unanchored-path-regex: ")));
    let doc = check_json("routes.json", &[], 1);
    assert_eq!(doc["format"], "json");
    assert_eq!(
        error_kinds(&doc),
        [
            (8, "expression".to_owned()),
            (13, "bad-priority".to_owned())
        ]
    );
    let x = &doc["errors"][0]["expression_error"];
    assert_eq!(
        (x["kind"].as_str(), x["line"].as_u64(), x["column"].as_u64()),
        (Some("syntax"), Some(2), Some(39))
    );
    let f = &doc["findings"][0];
    assert_eq!(f["kind"], "unanchored-path-regex");
    assert_eq!(f["routes"][0]["line"], 18);
    assert_eq!(f["location"]["column"], 1);

    // A plain array, read from standard input, with an element that is not a route.
    let text = std::fs::read_to_string(data("broken-route.json")).unwrap();
    let r = run_with(
        &[
            "check",
            "--schema",
            &data("gateway-schema.json"),
            "--format",
            "json",
            "-",
        ],
        Some(&text),
    );
    assert_eq!(r.code, 1, "{}", r.stdout);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        (doc["routes"].as_u64(), doc["valid"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(error_kinds(&doc), [(4, "malformed".to_owned())]);

    // JSON that does not parse is a whole-file error.
    let r = check("truncated.json", &[], 2);
    assert!(
        r.stderr
            .contains("truncated.json: not a JSON array of routes"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty());
}

#[test]
fn explain_in_text() {
    let r = check(
        "api.tsv",
        &["--explain", "GET api.example.com /repos/a/b"],
        0,
    );
    let explain = r
        .stdout
        .split("\nexplain GET api.example.com /repos/a/b:\n")
        .nth(1)
        .unwrap();
    assert!(
        explain.starts_with(&format!("matched route {API_01}\n")),
        "{explain}"
    );
    assert!(explain.contains(&format!("- {API_01} (priority 300): matched (winner)")));

    // A request the first route fails: the predicate that decided it, with its column.
    let r = check(
        "api.tsv",
        &[
            "--explain",
            "POST api.example.com /repos/a/b/c",
            "--ruled-out",
        ],
        0,
    );
    assert!(
        r.stdout.contains(&format!("matched route {API_02}\n")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "- {API_01} (priority 300): failed\n  line 1, column 35: http.path ~ "
        )),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "- {API_04} ruled out by the index: http.host == \"www.example.com\""
        )),
        "{}",
        r.stdout
    );
}

#[test]
fn explain_in_json() {
    let doc = check_json(
        "api.tsv",
        &[
            "--explain",
            "GET api.example.com /repos/a/b/c x-tenant:acme",
            "--ruled-out",
        ],
        0,
    );
    let x = &doc["explain"];
    assert_eq!(
        x["request"],
        "GET api.example.com /repos/a/b/c x-tenant:acme"
    );
    assert_eq!(x["winner"], "1f4b6d8a-0c2e-4a7b-9d1f-3e5a7c9b0d03");
    assert_eq!(x["routes"], 4);
    assert!(x["fields"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!({"name": "http.headers.x_tenant", "value": "acme"})));
    let first = &x["candidates"][0];
    assert_eq!(first["id"], API_01);
    assert_eq!(
        (first["line"].as_u64(), first["priority"].as_u64()),
        (Some(2), Some(300))
    );
    assert_eq!(first["matched"], false);
    let failed = &first["predicates"][0];
    assert_eq!(failed["holds"], false);
    assert_eq!(failed["negated"], false);
    assert_eq!(failed["index"], 1);
    assert!(failed["text"].as_str().unwrap().starts_with("http.path ~ "));
    // The core's report (docs/explain.md): the place of a predicate is flat, as the C ABI
    // writes it, with the source line and the caret.
    assert_eq!(x["version"], 2);
    assert_eq!(failed["line"], 1);
    assert_eq!(failed["column"], 35);
    assert!(failed["caret"].as_str().unwrap().ends_with('^'));
    let winner = x["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == x["winner"])
        .unwrap();
    assert_eq!(winner["matched"], true);
    assert_eq!(winner["predicates"].as_array().unwrap().len(), 2);
    assert_eq!(x["ruled_out"][0]["id"], API_04);
    assert_eq!(x["ruled_out"][0]["line"], 5);
    assert_eq!(x["ruled_out"][0]["key"], "http.host == \"www.example.com\"");
    // Nothing was left out, and the report says so.
    assert_eq!(
        (
            x["candidates_omitted"].as_u64(),
            x["ruled_out_omitted"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert_eq!(first["expression_truncated"], false);
    assert_eq!(first["predicates_omitted"], 0);
    assert_eq!(failed["text_truncated"], false);

    // Without --ruled-out, the list is empty.
    let doc = check_json("api.tsv", &["--explain", "GET www.example.com /"], 0);
    assert_eq!(doc["explain"]["winner"], API_04);
    assert_eq!(doc["explain"]["ruled_out"], serde_json::json!([]));
}

#[test]
fn explain_takes_typed_fields_and_leaves_parts_out() {
    let stream = "10\t4b000000-0000-4000-8000-000000000001\tnet.dst.port == 443 && tls.sni == \"db.example\"\n";
    let r = run_with(
        &[
            "check",
            "--schema",
            "stream",
            "--explain",
            "- - - net.dst.port:443 tls.sni:db.example",
            "-",
        ],
        Some(stream),
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r
        .stdout
        .contains("matched route 4b000000-0000-4000-8000-000000000001"));
    // An Int field given text, a field the schema lacks: usage errors.
    for bad in ["- - - net.dst.port:https", "GET a.example /"] {
        let r = run_with(
            &["check", "--schema", "stream", "--explain", bad, "-"],
            Some(stream),
        );
        assert_eq!(r.code, 2, "{bad}: {}", r.stdout);
        assert!(
            r.stderr.starts_with("atc-router check: --explain: "),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn usage_and_unreadable_files_exit_2() {
    for args in [
        &["check"][..],
        &["check", "x.tsv", "--format", "yaml"],
        &["check", "x.tsv", "--ruled-out"],
        &["frobnicate"],
    ] {
        let r = run(args);
        assert_eq!(r.code, 2, "{args:?}");
        assert!(r.stdout.is_empty());
    }
    let r = check("no-such-file.tsv", &[], 2);
    assert!(r.stderr.contains("cannot read"), "{}", r.stderr);
    let r = check("clean.tsv", &["--schema", "no-such-schema"], 2);
    assert!(
        r.stderr.contains("cannot read no-such-schema"),
        "{}",
        r.stderr
    );
    assert_eq!(run(&["--help"]).code, 0);
    assert_eq!(run(&["check", "--help"]).code, 0);
}

/// A file under the system's temporary directory, for the cases no data file has.
fn temp_file(name: &str, content: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("atc-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path.to_str().unwrap().to_owned()
}

const ID_A: &str = "00000000-0000-4000-8000-00000000000a";
const ID_B: &str = "00000000-0000-4000-8000-00000000000b";

#[test]
fn priorities_are_decimal_digits_only() {
    let mut tsv = String::new();
    for (i, p) in [
        "+5",
        " 7 ",
        "7 ",
        "0x10",
        "-0",
        "",
        "18446744073709551616",
        "5",
        "007",
    ]
    .iter()
    .enumerate()
    {
        tsv.push_str(&format!(
            "{p}\t00000000-0000-4000-8000-{i:012}\thttp.path == \"/{i}\"\n"
        ));
    }
    let r = run_with(&["check", "-", "--format", "json"], Some(&tsv));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    let lines: Vec<u64> = doc["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["kind"], "bad-priority", "{e}");
            e["line"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(lines, [1, 2, 3, 4, 5, 6, 7], "`5` and `007` are priorities");
    assert_eq!(
        doc["errors"][0]["message"],
        "bad priority `+5`: not written in decimal digits only (no sign, spaces, fraction or \
         exponent); expected an integer from 0 to 18446744073709551615"
    );
    assert!(doc["errors"][1]["message"]
        .as_str()
        .unwrap()
        .starts_with("bad priority ` 7 `: not written in decimal digits only"));
    // 2^64 is quoted as written (not as the float JSON numbers become), in TSV and JSON.
    assert!(doc["errors"][6]["message"]
        .as_str()
        .unwrap()
        .starts_with("bad priority `18446744073709551616`: larger than the largest priority"));
    let json = format!(
        r#"[{{"id": "{ID_A}", "priority": 18446744073709551616, "expression": "http.path == \"/a\""}},
{{"id": "{ID_B}", "priority": 1e2, "expression": "http.path == \"/b\""}}]"#
    );
    let r = run_with(&["check", "-"], Some(&json));
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains(
            "<stdin>:1: error: bad priority `18446744073709551616`: larger than the largest \
             priority; expected an integer from 0 to 18446744073709551615"
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("<stdin>:2: error: bad priority `1e2`: not written in decimal"),
        "{}",
        r.stdout
    );
}

#[test]
fn field_names_with_an_empty_segment_are_refused() {
    // In a schema file (lines or JSON): a whole-file error.
    for (name, content) in [
        (
            "empty-last.schema",
            "http.path String\nhttp.headers. String\n",
        ),
        ("double-dot.schema", "a..b String\n"),
        ("double-dot.json", r#"{"a..b": "String"}"#),
    ] {
        let schema = temp_file(name, content.as_bytes());
        let r = check("clean.tsv", &["--schema", &schema], 2);
        assert!(r.stderr.contains("invalid field name `"), "{}", r.stderr);
        assert!(r.stdout.is_empty());
    }
    let schema = temp_file("line.schema", b"http.path String\nhttp.headers. String\n");
    let r = check("clean.tsv", &["--schema", &schema], 2);
    assert!(
        r.stderr.contains(
            "line 2: invalid field name `http.headers.`: it ends with `.` (the name after the \
             last `.` is empty)"
        ),
        "{}",
        r.stderr
    );
    // In an expression, where the wildcard `http.headers.*` lets the core take it (as Kong's
    // library does).
    let tsv = format!(
        "1\t{ID_A}\thttp.headers. == \"x\"\n2\t{ID_B}\thttp.headers.x == \"y\" && http.path == \"/\"\n"
    );
    let r = run_with(&["check", "-", "--format", "json"], Some(&tsv));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(error_kinds(&doc), [(1, "bad-field".to_owned())]);
    assert_eq!(doc["errors"][0]["id"], ID_A);
    assert_eq!(doc["valid"], 1);
    // In an --explain request: a header without a name, a dotted name with `..`.
    for word in [":v", "http.headers.:v", "http.queries.a..b:v"] {
        let r = check("clean.tsv", &["--explain", &format!("GET a /x {word}")], 2);
        assert!(
            r.stderr.contains("invalid field name `"),
            "{word}: {}",
            r.stderr
        );
    }
}

#[test]
fn reading_is_capped_per_file_and_per_line() {
    // An endless file stops at the file cap, with a clear error (and little memory).
    let r = run(&["check", "/dev/zero", "--max-file-size", "1M"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("/dev/zero: larger than 1048576 bytes, the cap on a file (--max-file-size)"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty());
    let big = "#".repeat(5000);
    let r = run_with(&["check", "-", "--max-file-size", "4K"], Some(&big));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("standard input: larger than 4096 bytes"),
        "{}",
        r.stderr
    );
    // A line over the line cap is an error of its own; the other routes are still checked.
    let tsv = format!(
        "1\t{ID_A}\thttp.path == \"/{}\"\n2\t{ID_B}\thttp.path == \"/b\"\n",
        "a".repeat(2000)
    );
    let r = run_with(&["check", "-", "--max-line-size", "1K"], Some(&tsv));
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains(
            "<stdin>:1: error: malformed line: 2055 bytes, longer than the cap on a line (1024 \
             bytes, --max-line-size; an expression may have 1048576 bytes)"
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("2 routes, 1 valid, 1 error"),
        "{}",
        r.stdout
    );
    // By default a line holds an expression as long as the router takes, with its priority
    // and id: the expression's own limit speaks.
    let tsv = format!("1\t{ID_A}\thttp.path == \"/{}\"\n", "a".repeat(1024 * 1024));
    let r = run_with(&["check", "-"], Some(&tsv));
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("expression is too long"), "{}", r.stdout);
    // A schema file too.
    let schema = temp_file(
        "long.schema",
        format!("a{} String\n", "b".repeat(100)).as_bytes(),
    );
    let r = check(
        "clean.tsv",
        &["--schema", &schema, "--max-line-size", "64"],
        2,
    );
    assert!(
        r.stderr
            .contains("line 1: 108 bytes, longer than the cap on a line (64 bytes"),
        "{}",
        r.stderr
    );
    for bad in ["0", "1.5M", "lots"] {
        let r = check("clean.tsv", &["--max-file-size", bad], 2);
        assert!(r.stderr.contains("--max-file-size"), "{}", r.stderr);
    }
}
#[test]
fn findings_about_many_routes_are_groups_and_their_number_is_bounded() {
    // 1,200 identical routes: in version 1, 1,438,801 findings about pairs.
    let n = 1_200;
    let file: String = (1..=n)
        .map(|i| format!("1\t00000000-0000-4000-8000-{i:012}\thttp.path ^= \"/api\"\n"))
        .collect();
    let r = run_with(&["check", "-"], Some(&file));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let last = r.stdout.lines().last().unwrap();
    assert_eq!(
        last,
        format!("<stdin>: {n} routes, {n} valid, 0 errors, 1002 findings (199 more not shown)")
    );
    assert!(r.stdout.contains("  … and 1191 more route(s)\n"), "{last}");

    let r = run_with(&["check", "--format", "json", "-"], Some(&file));
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["version"], 3);
    assert_eq!(doc["findings_omitted"], 199);
    let dup = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "duplicate-expression")
        .unwrap();
    assert_eq!(dup["routes"].as_array().unwrap().len(), 9);
    assert_eq!(
        dup["routes"][0]["line"], n,
        "routing order: the highest id first"
    );
    assert_eq!(
        (dup["more"].as_u64(), dup["at_least"].as_bool()),
        (Some(1191), Some(false))
    );
}

// Kong's documents: tests/data/kong.yml, the same configuration as JSON (kong.json), and the
// Admin API's listing of the routes a Kong loaded with it holds (kong-admin.json, one line).

/// The ids Kong's declarative loader gives these named routes: UUID v5 of the name in
/// v5(fd02801f-0957-4a15-a55a-c8d9606f30b5, "routes"), computed with another implementation
/// (Python's uuid.uuid5).
const KONG_USERS_GET: &str = "3f46dfe1-11cb-5d77-9b26-06acabbd28ae";
const KONG_USERS_LIST: &str = "ecf99b16-dd67-542d-9308-a9138e7e1af2";
const KONG_ORDERS: &str = "3c6a1f9e-7d2b-4e58-9a41-0f3b6c8d2e71"; // given in the file
const KONG_ORDERS_V2: &str = "6f2308b5-2804-5e7c-ad4f-47b1b5c0f6f2";
const KONG_ORDERS_TYPO: &str = "2d4a440d-1da0-517d-903f-12b8affe12dd";
const KONG_HEALTH: &str = "544b4b1c-ef62-5e59-9045-09068ca86ecd";

/// (id, name) of every route an error or a finding of a JSON report names, sorted.
fn routes_of(doc: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = doc["errors"]
        .as_array()
        .unwrap()
        .iter()
        .chain(
            doc["findings"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|f| f["routes"].as_array().unwrap().iter()),
        )
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_owned(),
                r["name"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[test]
fn kong_yml_is_checked_as_kong_takes_it() {
    let r = check("kong.yml", &[], 1);
    let path = data("kong.yml");
    let lines: Vec<&str> = r.stdout.lines().collect();
    // The misspelt field, at the route's line, with its name; the expression as Kong's router
    // builds it (the protocol test appended).
    assert_eq!(
        lines[0],
        format!("{path}:28: error: route {KONG_ORDERS_TYPO} `orders-typo`: invalid expression"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains(
        r#"http.host == "shop.example" && http.paht ^= "/cart" && net.protocol in ["http", "https"]"#
    ));
    // orders (priority 100, /orders) takes every request of orders-v2 (priority 50,
    // /orders/v2): the linter says so, with names and lines.
    assert!(
        r.stdout.contains(&format!(
            "{path}:25: warning: never-wins: route {KONG_ORDERS_V2} can never win"
        )),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains(&format!(
        "  {path}:21: route {KONG_ORDERS} `orders` (priority 100)"
    )));
    assert!(r
        .stdout
        .ends_with(&format!("{path}: 6 routes, 5 valid, 1 error, 1 finding\n")));
    // The stream route and the traditional one are left out, and said so.
    assert!(
        r.stderr
            .contains("note: 1 stream route(s) left out (line(s) 35)")
            && r.stderr.contains("--schema stream")
            && r.stderr
                .contains("note: 1 route(s) without `expression` left out (line(s) 43)"),
        "{}",
        r.stderr
    );

    let doc = check_json("kong.yml", &[], 1);
    assert_eq!(doc["format"], "kong-yaml");
    assert_eq!(
        (doc["routes"].as_u64(), doc["valid"].as_u64()),
        (Some(6), Some(5))
    );
    assert_eq!(doc["errors"][0]["name"], "orders-typo");
    assert_eq!(doc["errors"][0]["id"], KONG_ORDERS_TYPO);
    assert_eq!(doc["findings"][0]["routes"][1]["name"], "orders");
}

#[test]
fn kong_routes_get_kongs_ids_and_priorities() {
    // A request no route takes lists every valid route as a candidate or ruled out, with
    // its id, name and priority.
    let doc = check_json(
        "kong.yml",
        &[
            "--explain",
            "DELETE nowhere.example /nothing",
            "--ruled-out",
        ],
        1,
    );
    let e = &doc["explain"];
    let mut got: Vec<(String, String, u64)> = e["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .chain(e["ruled_out"].as_array().unwrap().iter())
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["name"].as_str().unwrap().to_owned(),
                c["priority"].as_u64().unwrap(),
            )
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, String, u64)> = [
        (KONG_USERS_GET, "users-get", 200),
        (KONG_USERS_LIST, "users-list", 100),
        (KONG_ORDERS, "orders", 100),
        (KONG_ORDERS_V2, "orders-v2", 50),
        (KONG_HEALTH, "health", 1000),
    ]
    .map(|(id, name, p)| (id.to_owned(), name.to_owned(), p))
    .to_vec();
    want.sort();
    assert_eq!(got, want);
    // orders-typo has no priority: Kong's default, 0 (its error names it).
    assert_eq!(routes_of(&doc)[0].0, KONG_ORDERS_TYPO);
}

#[test]
fn kong_json_and_the_admin_listing_say_the_same() {
    let yaml = check_json("kong.yml", &[], 1);
    let json = check_json("kong.json", &[], 1);
    assert_eq!(json["format"], "kong-json");
    let admin = check_json("kong-admin.json", &[], 1);
    assert_eq!(admin["format"], "kong-admin");
    for doc in [&json, &admin] {
        assert_eq!(routes_of(doc), routes_of(&yaml));
        assert_eq!(doc["valid"], yaml["valid"]);
        assert_eq!(doc["findings"].as_array().unwrap().len(), 1);
    }
    // kong.json is pretty-printed: a route's line is its object's.
    assert_eq!(json["errors"][0]["line"], 37);
    // The Admin API's listing is one line.
    assert_eq!(admin["errors"][0]["line"], 1);

    // From standard input: told by its content, or by --input.
    let listing = std::fs::read_to_string(data("kong-admin.json")).unwrap();
    let r = run_with(&["check", "-", "--format", "json"], Some(&listing));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["format"], "kong-admin");
    let yml = std::fs::read_to_string(data("kong.yml")).unwrap();
    for args in [&["check", "-"][..], &["check", "--input", "kong", "-"]] {
        let r = run_with(args, Some(&yml));
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(r
            .stdout
            .ends_with("<stdin>: 6 routes, 5 valid, 1 error, 1 finding\n"));
    }
    // --input tsv takes the file as TSV, whatever it looks like.
    let r = check("kong.yml", &["--input", "tsv"], 1);
    assert!(r.stdout.contains("malformed line"), "{}", r.stdout);
}

#[test]
fn kong_explain_routes_a_plain_http_request() {
    // net.protocol is http unless the request says otherwise (Kong's routes test it).
    let r = check(
        "kong.yml",
        &["--explain", "GET shop.example /orders/v2/7"],
        1,
    );
    assert!(
        r.stdout.contains(&format!("matched route {KONG_ORDERS}")),
        "{}",
        r.stdout
    );
    let doc = check_json(
        "kong.yml",
        &["--explain", "GET shop.example /users/42 net.protocol:https"],
        1,
    );
    assert_eq!(doc["explain"]["winner"], KONG_USERS_GET);
    let protocols: Vec<&Value> = doc["explain"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["name"] == "net.protocol")
        .collect();
    assert_eq!(protocols.len(), 1);
    assert_eq!(protocols[0]["value"], "https");
}

#[test]
fn kong_stream_routes_with_the_stream_schema() {
    let r = check("kong.yml", &["--schema", "stream"], 0);
    assert!(r
        .stdout
        .ends_with(": 1 route, 1 valid, 0 errors, 0 findings\n"));
    assert!(
        r.stderr.contains("7 HTTP route(s) left out"),
        "{}",
        r.stderr
    );
}

#[test]
fn kong_documents_that_cannot_be_read_exit_2() {
    for (name, text, message) in [
        ("bad.yml", "routes: [\n", "not YAML or JSON: line"),
        ("list.yml", "- a\n", "expected a mapping"),
        ("routes.yaml", "routes: 3\n", "`routes` is not a list"),
    ] {
        let path = temp_file(name, text.as_bytes());
        let r = run(&["check", &path]);
        assert_eq!(r.code, 2, "{name}: {}", r.stdout);
        assert!(r.stdout.is_empty());
        assert!(r.stderr.contains(message), "{name}: {}", r.stderr);
    }
    // A route with neither id nor name: an error of its own, the rest is checked.
    let path = temp_file(
        "anonymous.yml",
        b"_format_version: \"3.0\"\nroutes:\n  - expression: http.path == \"/\"\n  - name: ok\n    expression: http.path == \"/ok\"\n",
    );
    let r = run(&["check", &path]);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout
            .contains(":3: error: malformed route: neither `id` nor `name`"),
        "{}",
        r.stdout
    );
    assert!(r
        .stdout
        .ends_with(": 2 routes, 1 valid, 1 error, 0 findings\n"));
}

#[test]
fn help_has_examples() {
    let r = run(&["check", "--help"]);
    assert_eq!(r.code, 0);
    for text in [
        "Examples:",
        "atc-router check kong.yml",
        "--input kong-admin -",
        "--explain",
        "kong-admin",
    ] {
        assert!(r.stdout.contains(text), "{text}:\n{}", r.stdout);
    }
}
