//! The explain and matches reports, as the C ABI writes them and as `atc-router check --format
//! json` embeds them, against the one schema of docs/explain.schema.json; and the two writers
//! give the same report for the same table and request (the core serializes both).
//!
//! The schema is checked structurally by a small validator of the JSON Schema keywords the file
//! uses (`type`, `const`, `enum`, `properties`, `required`, `additionalProperties: false`,
//! `items`, `minItems`, `maxItems`, `minimum`, `oneOf`, `$ref` into `$defs`); a keyword it does
//! not know fails the test, so that the file cannot grow a rule nothing checks.

use std::ffi::c_char;
use std::process::Command;
use std::ptr::null_mut;

use atc_router_ffi::*;
use serde_json::{Map, Value};

const API_TSV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/api.tsv");
const REQUEST: &str = "GET api.example.com /repos/a/b/c x-tenant:acme";

fn schema() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/explain.schema.json");
    let text = std::fs::read_to_string(path).expect("docs/explain.schema.json");
    serde_json::from_str(&text).expect("the schema is JSON")
}

/// The errors of `v` against `s` (a schema object of `root`), each with its JSON path.
fn validate(root: &Value, s: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    let s = s.as_object().expect("a schema is an object");
    for (k, rule) in s {
        match k.as_str() {
            "$ref" => {
                let name = rule
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .expect("refs point into $defs");
                validate(root, &root["$defs"][name], v, at, errors);
            }
            "type" => {
                let types: Vec<&str> = match rule {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => panic!("bad type rule at {at}"),
                };
                let ok = types.iter().any(|t| match *t {
                    "object" => v.is_object(),
                    "array" => v.is_array(),
                    "string" => v.is_string(),
                    "integer" => v.is_i64() || v.is_u64(),
                    "boolean" => v.is_boolean(),
                    "null" => v.is_null(),
                    other => panic!("unknown type {other}"),
                });
                if !ok {
                    errors.push(format!("{at}: {v} is not of type {rule}"));
                }
            }
            "const" if v != rule => errors.push(format!("{at}: {v} is not {rule}")),
            "enum" if !rule.as_array().unwrap().contains(v) => {
                errors.push(format!("{at}: {v} is not one of {rule}"))
            }
            "minimum" => {
                if let (Some(n), Some(min)) = (v.as_f64(), rule.as_f64()) {
                    if v.is_number() && n < min {
                        errors.push(format!("{at}: {v} < {min}"));
                    }
                }
            }
            "required" => {
                for name in rule.as_array().unwrap() {
                    let name = name.as_str().unwrap();
                    if v.as_object().is_some_and(|o| !o.contains_key(name)) {
                        errors.push(format!("{at}: `{name}` is missing"));
                    }
                }
            }
            "properties" => {
                let props = rule.as_object().unwrap();
                if let Some(o) = v.as_object() {
                    for (name, value) in o {
                        if let Some(p) = props.get(name) {
                            validate(root, p, value, &format!("{at}.{name}"), errors);
                        }
                    }
                }
            }
            "additionalProperties" => {
                assert_eq!(rule, &Value::Bool(false), "only `false` is used");
                let empty = Map::new();
                let props = s
                    .get("properties")
                    .and_then(Value::as_object)
                    .unwrap_or(&empty);
                if let Some(o) = v.as_object() {
                    for name in o.keys().filter(|n| !props.contains_key(*n)) {
                        errors.push(format!("{at}: `{name}` is not in the schema"));
                    }
                }
            }
            "items" => {
                for (i, item) in v.as_array().into_iter().flatten().enumerate() {
                    validate(root, rule, item, &format!("{at}[{i}]"), errors);
                }
            }
            "minItems" | "maxItems" => {
                let n = rule.as_u64().unwrap() as usize;
                if let Some(a) = v.as_array() {
                    if (k == "minItems" && a.len() < n) || (k == "maxItems" && a.len() > n) {
                        errors.push(format!("{at}: {} items ({k} {n})", a.len()));
                    }
                }
            }
            "oneOf" => {
                let passing = rule
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|alt| {
                        let mut e = Vec::new();
                        validate(root, alt, v, at, &mut e);
                        e.is_empty()
                    })
                    .count();
                if passing != 1 {
                    errors.push(format!("{at}: {passing} alternatives of oneOf match"));
                }
            }
            // Annotations.
            "$schema" | "$id" | "$defs" | "title" | "description" | "format" | "const" | "enum" => {
            }
            other => panic!("the validator does not know the keyword `{other}` ({at})"),
        }
    }
}

fn check(def: &str, v: &Value) {
    let root = schema();
    let mut errors = Vec::new();
    validate(&root, &root["$defs"][def], v, "$", &mut errors);
    assert!(errors.is_empty(), "{def}: {errors:#?}\n{v:#}");
    // And as the schema's root (one of its two documents).
    validate(&root, &root, v, "$", &mut errors);
    assert!(errors.is_empty(), "root: {errors:#?}");
}

#[test]
fn the_validator_refuses_what_the_schema_does_not_allow() {
    let root = schema();
    let good = serde_json::json!({"version": 2, "matches": []});
    let mut errors = Vec::new();
    validate(&root, &root, &good, "$", &mut errors);
    assert!(errors.is_empty(), "{errors:?}");
    for bad in [
        serde_json::json!({"version": 1, "matches": []}),
        serde_json::json!({"version": 2}),
        serde_json::json!({"version": 2, "matches": [], "extra": 1}),
        serde_json::json!({"version": 2, "matches": [{"id": "x", "priority": -1, "expression": "",
                                                      "matched_values": [], "captures": []}]}),
    ] {
        let mut errors = Vec::new();
        validate(&root, &root, &bad, "$", &mut errors);
        assert!(!errors.is_empty(), "{bad} passed");
    }
}

// The C ABI.

fn p(s: &str) -> *const c_char {
    s.as_ptr().cast()
}

/// A report the C ABI writes with `call(buf, len)`, sized first.
fn report(call: impl Fn(*mut c_char, *mut usize) -> i32) -> Value {
    let mut len = 0;
    assert_eq!(call(null_mut(), &mut len), ATC_ERR_BUFFER);
    let mut buf = vec![0u8; len];
    assert_eq!(call(buf.as_mut_ptr().cast(), &mut len), ATC_OK);
    serde_json::from_slice(&buf[..len]).expect("the report is JSON")
}

/// The routes of tests/data/api.tsv in a router of the C ABI, the request of [`REQUEST`] in a
/// context; the explain report (with ruled-out routes) and the matches report.
fn c_abi_reports() -> (Value, Value) {
    let text = std::fs::read_to_string(API_TSV).unwrap();
    unsafe {
        let s = atc_schema_new();
        for name in ["http.method", "http.host", "http.path", "http.headers.*"] {
            let rc = atc_schema_add_field(
                s,
                p(name),
                name.len(),
                ATC_TYPE_STRING,
                null_mut(),
                null_mut(),
            );
            assert_eq!(rc, ATC_OK, "{name}");
        }
        let r = atc_router_new(s, null_mut(), null_mut());
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let [prio, id, expr] = line.split('\t').collect::<Vec<_>>()[..] else {
                panic!("{line}")
            };
            let rc = atc_router_add(
                r,
                prio.parse().unwrap(),
                p(id),
                id.len(),
                p(expr),
                expr.len(),
                null_mut(),
                null_mut(),
            );
            assert_eq!(rc, ATC_OK, "{expr}");
        }
        let c = atc_context_new(s, null_mut(), null_mut());
        for (name, value) in [
            ("http.method", "GET"),
            ("http.host", "api.example.com"),
            ("http.path", "/repos/a/b/c"),
            ("http.headers.x_tenant", "acme"),
        ] {
            let mut id = 0;
            let rc = atc_context_field_id(
                c,
                p(name),
                name.len(),
                &mut id,
                null_mut(),
                null_mut(),
                null_mut(),
            );
            assert_eq!(rc, ATC_OK, "{name}");
            let rc = atc_context_add_str(c, id, p(value), value.len(), null_mut(), null_mut());
            assert_eq!(rc, ATC_OK, "{name}");
        }
        let explain = report(|buf, len| {
            atc_router_explain(
                r,
                c,
                ATC_EXPLAIN_RULED_OUT,
                buf,
                len,
                null_mut(),
                null_mut(),
            )
        });
        let matches = report(|buf, len| atc_router_matches(r, c, buf, len, null_mut(), null_mut()));
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
        (explain, matches)
    }
}

// The command.

fn cli_explain(file: &str, request: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_atc-router"))
        .args([
            "check",
            file,
            "--format",
            "json",
            "--explain",
            request,
            "--ruled-out",
        ])
        .output()
        .expect("the command runs");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    doc["explain"].clone()
}

#[test]
fn the_c_abi_reports_follow_the_schema() {
    let (explain, matches) = c_abi_reports();
    check("explain", &explain);
    check("matches", &matches);
    // The tables exercise what the schema allows: a winner, a failed candidate, a ruled-out
    // route, named captures.
    assert!(explain["winner"].is_string());
    assert_eq!(explain["ruled_out"].as_array().unwrap().len(), 1);
    assert!(!matches["matches"].as_array().unwrap().is_empty());
}

#[test]
fn the_command_embeds_the_same_report() {
    let cli = cli_explain(API_TSV, REQUEST);
    check("explain", &cli);
    assert!(cli["fields"].is_array() && cli["candidates"][0]["line"].is_u64());

    // What only a report about a file has, taken out: the C ABI's report, member for member.
    let mut stripped = cli.clone();
    let o = stripped.as_object_mut().unwrap();
    o.remove("request");
    o.remove("fields");
    for list in ["candidates", "ruled_out"] {
        for route in o[list].as_array_mut().unwrap() {
            let route = route.as_object_mut().unwrap();
            route.remove("name");
            route.remove("line");
        }
    }
    let (c_abi, _) = c_abi_reports();
    assert_eq!(stripped, c_abi);
}

#[test]
fn route_names_of_kong_documents_follow_the_schema() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/kong.yml");
    let cli = cli_explain(file, "GET - /users/42");
    assert!(cli["candidates"][0]["name"].is_string(), "{cli:#}");
    check("explain", &cli);
}
