//! The gateway reads a request as Kong's router does: awkward requests sent to a real nginx
//! (encoded slashes and letters, repeated and dot segments, trailing slashes, non-ASCII, a Host
//! header with a port and capitals, valueless, empty and repeated query arguments, repeated
//! headers, more than 100 headers or arguments, an absolute-form request line), and the values
//! the gateway read (`gw:request_values()`, from both request sources) compared with what
//! Kong's router reads for the same request.
//!
//! Kong's functions need Kong itself to load (its configuration, its modules), so the values
//! they give are written out here, each derived from the Kong code that makes it:
//! `kong.router.utils.strip_uri_args` and `kong.tools.uri.normalize(uri, true)` for
//! `http.path`; `get_http_segments` and the segment accessors of `kong.router.fields` for the
//! segments, ranges and `len`; `kong.router.transform.split_host_port` for `http.host` and for
//! `net.dst.port` (the Host header's port first, `FIELDS_FUNCS["net.dst.port"]`);
//! `ngx.req.get_headers()` / `get_uri_args()` (100 at most, `true` for a valueless argument,
//! made "" by `visit_for_context`) for headers and queries.
//!
//! Needs nginx with the lua module; without it the test prints a notice and passes, unless
//! `ATC_REQUIRE_NGINX=1`.

mod common;

use std::time::{Duration, Instant};

use common::nginx::{self, free_port, send, Running};

/// One request as sent (`target` is the request line's target, as is) and the values Kong's
/// router reads from it, besides `http.method=GET`.
struct Case {
    what: &'static str,
    target: String,
    headers: Vec<(String, String)>,
    /// `field=value` lines; `{port}` stands for the port nginx listens on.
    kong: Vec<String>,
}

fn case(what: &'static str, target: &str, headers: &[(&str, &str)], kong: &[&str]) -> Case {
    Case {
        what,
        target: target.to_owned(),
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
        kong: kong.iter().map(|l| (*l).to_owned()).collect(),
    }
}

/// The lines Kong reads from a path: the path and its segments (those the routes use: 0, 1, 2,
/// 0_1, 1_2, len).
fn path_lines(path: &str, segments: &[&str]) -> Vec<String> {
    let mut out = vec![format!("http.path={path}")];
    for (i, s) in segments.iter().enumerate().take(3) {
        out.push(format!("http.path.segments.{i}={s}"));
    }
    for (a, b) in [(0, 1), (1, 2)] {
        if b < segments.len() {
            out.push(format!(
                "http.path.segments.{a}_{b}={}/{}",
                segments[a], segments[b]
            ));
        }
    }
    out.push(format!("http.path.segments.len={}", segments.len()));
    out
}

fn cases() -> Vec<Case> {
    let host = &[("Host", "localhost")][..];
    let mut cases = Vec::new();
    let mut path = |what, target: &str, normalized: &str, segments: &[&str]| {
        let mut c = case(
            what,
            target,
            host,
            &["http.host=localhost", "net.dst.port={port}"],
        );
        c.kong.extend(path_lines(normalized, segments));
        cases.push(c);
    };
    path(
        "an encoded slash stays encoded, upper-cased",
        "/a%2fb/c",
        "/a%2Fb/c",
        &["a%2Fb", "c"],
    );
    path("%2F", "/a%2Fb", "/a%2Fb", &["a%2Fb"]);
    path(
        "unreserved characters are decoded",
        "/%41bc/%7euser",
        "/Abc/~user",
        &["Abc", "~user"],
    );
    path(
        "other reserved ones stay",
        "/a%3bb%3F%25",
        "/a%3Bb%3F%25",
        &["a%3Bb%3F%25"],
    );
    path("slashes merged", "//a///b//", "/a/b/", &["a", "b"]);
    path("dot segments", "/a/./b/../c", "/a/c", &["a", "c"]);
    // (A path that goes above the root is refused by nginx itself, before any Lua.)
    path("dot-dot segments", "/a/b/../../x", "/x", &["x"]);
    path("encoded dots", "/a/%2e%2E/b", "/b", &["b"]);
    path("a trailing slash", "/a/b/c/", "/a/b/c/", &["a", "b", "c"]);
    path(
        "non-ASCII",
        "/caf%C3%A9/%E2%9C%93",
        "/café/✓",
        &["café", "✓"],
    );
    path("the root", "/", "/", &[]);
    path("decoded once", "/%252F", "/%252F", &["%252F"]);
    // An absolute-form request line: nginx's $request_uri, which Kong reads, is its path and
    // query; the Host header stays the host.
    path(
        "absolute form",
        "http://elsewhere.example/p?q=1",
        "/p",
        &["p"],
    );

    let mut q = case(
        "valueless, empty and repeated arguments",
        "/x?debug&a=&a=1&b=%41+b&b=3",
        host,
        &[
            "http.host=localhost",
            "net.dst.port={port}",
            "http.queries.debug=",
            "http.queries.a=",
            "http.queries.a=1",
            "http.queries.b=A b",
            "http.queries.b=3",
        ],
    );
    q.kong.extend(path_lines("/x", &["x"]));
    cases.push(q);

    let mut h = case(
        "the Host header without its port, as sent; repeated headers",
        "/x",
        &[
            ("Host", "API.Example.com:8080"),
            ("X-A", "1"),
            ("x-a", "2"),
            ("X-a", "3"),
        ],
        &[
            "http.host=API.Example.com",
            "net.dst.port=8080",
            "http.headers.x_a=1",
            "http.headers.x_a=2",
            "http.headers.x_a=3",
        ],
    );
    h.kong.extend(path_lines("/x", &["x"]));
    cases.push(h);

    // 101 more headers after Host: Kong reads the first 100 header lines (Host and 99 others).
    let many: Vec<(String, String)> = (1..=101)
        .map(|i| ("X-A".to_owned(), i.to_string()))
        .collect();
    let mut m = Case {
        what: "more than 100 headers",
        target: "/x".into(),
        headers: std::iter::once(("Host".to_owned(), "localhost".to_owned()))
            .chain(many)
            .collect(),
        kong: vec!["http.host=localhost".into(), "net.dst.port={port}".into()],
    };
    m.kong
        .extend((1..=99).map(|i| format!("http.headers.x_a={i}")));
    m.kong.extend(path_lines("/x", &["x"]));
    cases.push(m);

    let args: Vec<String> = (1..=101).map(|i| format!("a={i}")).collect();
    let mut a = case(
        "more than 100 arguments",
        &format!("/x?{}", args.join("&")),
        host,
        &["http.host=localhost", "net.dst.port={port}"],
    );
    a.kong
        .extend((1..=100).map(|i| format!("http.queries.a={i}")));
    a.kong.extend(path_lines("/x", &["x"]));
    cases.push(a);
    cases
}

fn config(dir: &std::path::Path, n: &nginx::Nginx, port: u16) -> String {
    let lua = common::repo_root().join("lua");
    format!(
        r#"{head}
    lua_package_path "{lua}/?.lua;{lua}/t/?.lua;{share}/?.lua;;";
    lua_package_cpath "{dir}/?.so;;";
    init_worker_by_lua_block {{ require("kong_fields").init_worker() }}
    server {{
        listen 127.0.0.1:{port};
        location / {{ content_by_lua_block {{ require("kong_fields").content() }} }}
    }}
}}
"#,
        dir = dir.display(),
        head = nginx::conf_head(n, dir, 1, "info"),
        lua = lua.display(),
        share = n.lua_share.display(),
    )
}

fn sorted(lines: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = lines.into_iter().filter(|l| !l.is_empty()).collect();
    v.sort();
    v
}

#[test]
fn the_gateway_reads_requests_as_kongs_router_does() {
    let Some(n) = nginx::required_or_skip("the_gateway_reads_requests_as_kongs_router_does") else {
        return;
    };
    let dir = common::cpath_dir("nginx-kong-fields");
    let port = free_port();
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, config(&dir, &n, port)).unwrap();
    let mut running = Running::start(&n, &dir, &conf);
    let get = |target: &str, headers: &[(String, String)]| {
        let mut raw = format!("GET {target} HTTP/1.0\r\n");
        for (name, value) in headers {
            raw.push_str(&format!("{name}: {value}\r\n"));
        }
        raw.push_str("\r\n");
        send(port, raw.as_bytes())
            .map(|r| (r.status, String::from_utf8_lossy(&r.body).into_owned()))
    };
    let host = [("Host".to_owned(), "localhost".to_owned())];
    let started = Instant::now();
    while get("/", &host).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "nginx did not answer:\n{}",
            running.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut failures = Vec::new();
    for c in cases() {
        let (status, body) = get(&c.target, &c.headers).expect("an answer");
        assert_eq!(status, 200, "{}: {body}", c.what);
        let want = sorted(
            std::iter::once("http.method=GET".to_owned()).chain(
                c.kong
                    .iter()
                    .map(|l| l.replace("{port}", &port.to_string())),
            ),
        );
        let got = sorted(body.lines().map(str::to_owned));
        if got != want {
            let missing: Vec<_> = want.iter().filter(|l| !got.contains(l)).collect();
            let extra: Vec<_> = got.iter().filter(|l| !want.contains(l)).collect();
            failures.push(format!(
                "{} ({}): Kong reads but not ours {missing:?}; ours only {extra:?}",
                c.what, c.target
            ));
        }
    }
    // The default gateway differs only in net.dst.port: the port the connection reached.
    let (_, body) = get(
        "/x?__gateway=default",
        &[("Host".to_owned(), "localhost:8080".to_owned())],
    )
    .unwrap();
    assert!(
        body.lines().any(|l| l == format!("net.dst.port={port}")),
        "{body}"
    );
    assert!(body.lines().any(|l| l == "http.host=localhost"), "{body}");
    running.stop();
    let logs = running.logs();
    nginx::assert_clean_logs(&logs);
    assert!(
        logs.contains("more than 100 headers") && logs.contains("more than 100 args"),
        "a warning for each truncated read"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}
