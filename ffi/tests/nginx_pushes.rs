//! Pushes of every form while an open-loop client routes through a real nginx worker: whole
//! lists as Lua tables (which the gateway hands over as their changes), as TSV text, lists of
//! changes, a version of the same strings, and a burst of them without waiting. The client
//! (`atc_testkit::open_loop`) sends at a fixed rate whatever the worker does, and every answer
//! carries the version that routed it: each must be exactly what that version's table answers
//! (the core's router built from the version's list), so no request is ever routed by half a
//! push, by a version older than one already answered, or not at all.
//!
//! Needs nginx with the lua module; without it the test prints a notice and passes, unless
//! `ATC_REQUIRE_NGINX=1` (see `common/nginx.rs`).

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use atc_router::{Context, RouteSpec, Router, Schema, SyncMode, Uuid, Value};
use atc_testkit::open_loop::{self, Plan, Template};
use atc_workload::{requests, Family, Mix, Route, Table};
use common::nginx::{self, free_port, send, Nginx, Running};

const SEED: u64 = 0x0b5e_55ed;
const ROUTES: usize = 3000;

fn write_config(n: &Nginx, dir: &Path, port: u16) -> std::path::PathBuf {
    let lua = common::repo_root().join("lua");
    let conf = format!(
        r#"{head}
    lua_package_path "{lua}/?.lua;{lua}/t/?.lua;{share}/?.lua;;";
    lua_package_cpath "{dir}/?.so;;";
    init_worker_by_lua_block {{ require("push_gateway").init_worker("{dir}/a.tsv") }}
    server {{
        listen 127.0.0.1:{port} backlog=1024;
        keepalive_requests 1000000;
        location = /__push {{ content_by_lua_block {{ require("push_gateway").push() }} }}
        location = /__wait {{ content_by_lua_block {{ require("push_gateway").wait() }} }}
        location = /__stats {{ content_by_lua_block {{ require("push_gateway").stats() }} }}
        location / {{ content_by_lua_block {{ require("push_gateway").access() }} }}
    }}
}}
"#,
        head = nginx::conf_head(n, dir, 1, "info"),
        dir = dir.display(),
        lua = lua.display(),
        share = n.lua_share.display(),
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    path
}

fn tsv(routes: &[Route]) -> String {
    routes
        .iter()
        .map(|r| format!("{}\t{}\t{}\n", r.priority, r.id_string(), r.expression))
        .collect()
}

/// The list of changes that makes `from` into `to`: its changed and new routes, and its
/// removals (`-<TAB>id`).
fn changes(from: &[Route], to: &[Route]) -> String {
    let before: HashMap<[u8; 16], &Route> = from.iter().map(|r| (r.id, r)).collect();
    let after: HashMap<[u8; 16], &Route> = to.iter().map(|r| (r.id, r)).collect();
    let mut out = String::new();
    for r in to {
        if before
            .get(&r.id)
            .is_none_or(|b| b.expression != r.expression)
        {
            out.push_str(&format!(
                "{}\t{}\t{}\n",
                r.priority,
                r.id_string(),
                r.expression
            ));
        }
    }
    for r in from {
        if !after.contains_key(&r.id) {
            out.push_str(&format!("-\t{}\n", r.id_string()));
        }
    }
    out
}

fn reference(schema: &Arc<Schema>, routes: &[Route]) -> Router {
    let mut r = Router::new(schema.clone());
    let specs: Vec<RouteSpec<'_>> = routes
        .iter()
        .map(|r| RouteSpec {
            id: Uuid::from_bytes(r.id),
            priority: r.priority,
            expression: &r.expression,
        })
        .collect();
    r.sync(&specs, SyncMode::AllOrNothing).unwrap();
    r
}

/// A request of the workload the gateway reads as the workload says: its method, host and a
/// plain path (nothing to decode or normalise).
struct Req {
    method: String,
    host: String,
    path: String,
}

impl Req {
    fn of(fields: &[(String, atc_workload::Value)]) -> Option<Req> {
        let get = |name: &str| {
            fields.iter().find_map(|(f, v)| match v {
                atc_workload::Value::Str(s) if f == name => Some(s.clone()),
                _ => None,
            })
        };
        let path = get("http.path")?;
        let plain = path.starts_with('/')
            && !path.contains("//")
            && path
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/-_.~".contains(&b));
        // The connection fields the workload adds are not what host-and-prefix routes test.
        let other = fields.iter().any(|(f, _)| {
            !matches!(f.as_str(), "http.method" | "http.host" | "http.path")
                && !f.starts_with("http.path.segments")
                && !f.starts_with("net.")
        });
        if !plain || other || path.contains("/./") || path.ends_with("/.") {
            return None;
        }
        Some(Req {
            method: get("http.method").unwrap_or_else(|| "GET".into()),
            host: get("http.host")?,
            path,
        })
    }

    fn template(&self) -> Template {
        Template::fixed(
            format!(
                "{} {} HTTP/1.1\r\nHost: {}\r\n\r\n",
                self.method, self.path, self.host
            )
            .as_bytes(),
        )
    }

    /// What `router` answers: the route id, or "-".
    fn answer(&self, router: &Router) -> String {
        let mut c = Context::new(router.schema().clone());
        c.add_value("http.method", self.method.as_str()).unwrap();
        c.add_value("http.host", self.host.as_str()).unwrap();
        c.add_value("http.path", self.path.as_str()).unwrap();
        let segments: Vec<&str> = self.path[1..]
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let _ = c.add_value("http.path.segments.len", Value::Int(segments.len() as i64));
        for (i, s) in segments.iter().enumerate() {
            let _ = c.add_value(&format!("http.path.segments.{i}"), *s);
        }
        match router.execute(&mut c) {
            true => c.result().unwrap().id().to_string(),
            false => "-".into(),
        }
    }
}

fn get(port: u16, target: &str) -> String {
    let raw = format!("GET {target} HTTP/1.0\r\nHost: localhost\r\n\r\n");
    let r = send(port, raw.as_bytes()).expect("a control request");
    String::from_utf8_lossy(&r.body).into_owned()
}

#[test]
fn pushes_of_every_form_under_an_open_loop_load_route_by_one_version() {
    let Some(nginx) = nginx::required_or_skip("pushes_of_every_form_under_an_open_loop_load")
    else {
        return;
    };
    let a = Table::family(Family::HostPrefixes, ROUTES, SEED);
    let mut b = a.with_changes(400, SEED ^ 1);
    b.routes.truncate(ROUTES - 100);
    let dir = common::cpath_dir("nginx-pushes");
    for (name, text) in [
        ("a.tsv", tsv(&a.routes)),
        ("b.tsv", tsv(&b.routes)),
        ("a-to-b.tsv", changes(&a.routes, &b.routes)),
        ("b-to-a.tsv", changes(&b.routes, &a.routes)),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let schema = Arc::new(atc_router::request::http_schema());
    let (ra, rb) = (reference(&schema, &a.routes), reference(&schema, &b.routes));

    // Requests for both tables: every one the two answer differently, and as many that they
    // answer alike.
    let mut all: Vec<Req> = Vec::new();
    for (k, t) in [&a, &b].into_iter().enumerate() {
        for r in requests(t, Mix::Realistic, 3000, SEED + k as u64) {
            all.extend(Req::of(&r.fields));
        }
    }
    let (mut reqs, mut answers, mut alike) = (Vec::new(), Vec::new(), 0);
    for r in all {
        let x = [r.answer(&ra), r.answer(&rb)];
        let differ = x[0] != x[1];
        if differ || alike < answers.len() {
            alike += usize::from(!differ);
            reqs.push(r);
            answers.push(x);
        }
    }
    assert!(
        reqs.len() > 1000,
        "{} requests tell the tables apart",
        reqs.len() - alike
    );

    let port = free_port();
    let conf = write_config(&nginx, &dir, port);
    let running = Running::start(&nginx, &dir, &conf);
    let started = Instant::now();
    while get_status(port).is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "nginx did not answer:\n{}",
            running.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // The client: a fixed rate for the whole run, well below what the worker takes.
    let templates: Vec<Template> = reqs.iter().map(Req::template).collect();
    let plan = Plan {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        rate: 1000.0,
        duration: Duration::from_secs(12),
        requests: templates,
        max_connections: 256,
        drain: Duration::from_secs(30),
        watch_header: Some("x-gw-answer".into()),
    };
    let client = std::thread::spawn(move || open_loop::run(&plan).expect("the open-loop run"));

    // What each version holds: 0 for table a, 1 for table b.
    let mut holds: HashMap<String, usize> = HashMap::from([("v1".to_owned(), 0)]);
    let push = |version: &str, kind: &str, file: &str| {
        let path = dir.join(file);
        let body = get(
            port,
            &format!(
                "/__push?version={version}&kind={kind}&file={}",
                path.display()
            ),
        );
        assert!(body.starts_with(&format!("started {version} ")), "{body}");
    };
    let wait = |version: &str| {
        let body = get(port, &format!("/__wait?version={version}"));
        assert_eq!(body.trim(), format!("applied {version}"));
    };
    std::thread::sleep(Duration::from_secs(1));
    // One at a time, each applied while the client routes.
    for (version, kind, file, table) in [
        ("v2", "tables", "b.tsv", 1),
        ("v3", "text", "a.tsv", 0),
        ("v4", "changes", "a-to-b.tsv", 1),
        ("v5", "tables", "b.tsv", 1), // the same strings: only the version changes
        ("v6", "tables", "a.tsv", 0),
        ("v7", "changes", "a-to-b.tsv", 1),
        ("v8", "text", "b.tsv", 1),
        ("v9", "changes", "b-to-a.tsv", 0),
    ] {
        holds.insert(version.into(), table);
        push(version, kind, file);
        wait(version);
        std::thread::sleep(Duration::from_millis(300));
    }
    // A burst, handed over back to back: lists of changes queue behind whole lists, whole lists
    // supersede what waits; whatever is applied holds its own list.
    for (version, kind, file, table) in [
        ("v10", "tables", "b.tsv", 1),
        ("v11", "changes", "b-to-a.tsv", 0),
        ("v12", "text", "b.tsv", 1),
        ("v13", "changes", "b-to-a.tsv", 0),
        ("v14", "changes", "a-to-b.tsv", 1),
    ] {
        holds.insert(version.into(), table);
        push(version, kind, file);
    }
    wait("v14");
    let run = client.join().unwrap();
    let stats = get(port, "/__stats");
    drop(running);

    let mut wrong = Vec::new();
    let mut by_version: HashMap<String, usize> = HashMap::new();
    for s in &run.samples {
        let Some(header) = &s.header else {
            wrong.push(format!(
                "request {} at {:?}: no answer ({})",
                s.request, s.due, s.status
            ));
            continue;
        };
        let (version, got) = header.split_once(' ').unwrap();
        *by_version.entry(version.to_owned()).or_default() += 1;
        let Some(&t) = holds.get(version) else {
            wrong.push(format!("an answer by an unknown version {version}"));
            continue;
        };
        let want = &answers[s.request][t];
        if got != want || s.status != if want == "-" { 404 } else { 200 } {
            wrong.push(format!(
                "{} {}{}: version {version} answered {} {got}, its table answers {want}",
                reqs[s.request].method, reqs[s.request].host, reqs[s.request].path, s.status
            ));
        }
    }
    println!(
        "{} requests, answers by version {by_version:?}, {} connections; {stats}",
        run.samples.len(),
        run.connections
    );
    assert!(
        wrong.is_empty(),
        "{} wrong answers:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(20)].join("\n")
    );
    for v in ["v2", "v3", "v4", "v6", "v9"] {
        assert!(
            by_version.contains_key(v),
            "no answer by {v}: {by_version:?}"
        );
    }
    let stat = |name: &str| -> usize {
        let mut words = stats.split_whitespace();
        words
            .position(|w| w == name)
            .and_then(|_| words.next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in the stats line {stats}"))
    };
    // The whole lists in tables after the first crossed as their changes.
    let crossed = stat("routes_handed_over");
    assert!(crossed < ROUTES * 6, "{crossed} routes crossed the FFI");
    // A hand-over gave way: requests were answered while one was in progress (with yields that
    // do not reach nginx's event loop, none would be).
    assert!(
        stat("answered_while_pushing") > 0,
        "no request was answered while a list was handed over: {stats}"
    );
}

fn get_status(port: u16) -> Option<String> {
    let raw = b"GET /__stats HTTP/1.0\r\nHost: localhost\r\n\r\n";
    send(port, raw)
        .ok()
        .filter(|r| r.status == 200)
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
}
