//! A real gateway: Debian's nginx with the lua module loads the binding, builds a 10,000-route
//! router (atc-workload's table) in `init_worker_by_lua`, and routes requests in
//! `access_by_lua` through `resty.router.gateway` (lua/t/gateway.lua). Real HTTP requests over
//! 127.0.0.1 must reach the route that the core's reference evaluator picks for the same values;
//! bad requests (invalid UTF-8, huge or repeated headers) must get a clean 4xx, and the worker
//! must survive all of it. Then the table is updated through the gateway (changed, removed and
//! added routes; the same version again; a refused version; apply-valid), each version checked
//! the same way, and requests sent while versions alternate must each be answered wholly by the
//! old table or wholly by the new one. The gateway's debug header (X-Atc-Explain) must carry the
//! summary of the core's explanation when asked from 127.0.0.1, and be absent otherwise. The
//! gateway's Prometheus endpoint (/metrics) must count what was sent: routed, not found and bad
//! requests, updates applied and refused, the routes of the table in force. Lazy captures
//! (`captures = "lazy"`) must read as the default table on every request, and raise when read
//! after another request was routed.
//!
//! Needs nginx with the lua module; without it the test prints a notice and passes, unless
//! `ATC_REQUIRE_NGINX=1` (see `common/nginx.rs`).

mod common;

use std::collections::BTreeMap;
use std::collections::HashSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use atc_router::{Context, Explanation, RouteSpec, Router, SyncMode, Type, Uuid, Value};
use atc_workload::{requests, Mix, Route, Table};
use common::nginx::{self, free_port, send, Nginx, Response, Running};

const ROUTES: usize = 10_000;
const SEED: u64 = 0x5eed_1234;
const PER_MIX: usize = 40;
/// How long nginx may take to build the table and answer (about 15 s in a debug build): only a
/// guard against a start that failed without nginx exiting. Nothing else is timed: each request
/// has its socket timeouts, and a slow machine is not a failure.
const START_DEADLINE: Duration = Duration::from_secs(600);

fn write_config(n: &Nginx, dir: &Path, libdir: &Path, port: u16) -> PathBuf {
    let lua = common::repo_root().join("lua");
    let conf = format!(
        r#"{head}
    large_client_header_buffers 4 64k;
    merge_slashes off;
    set_real_ip_from 127.0.0.1;
    real_ip_header X-Real-IP;

    lua_package_path "{lua}/?.lua;{lua}/t/?.lua;{share}/?.lua;;";
    lua_package_cpath "{libdir}/?.so;;";

    init_worker_by_lua_block {{
        require("gateway").init_worker("{dir}/schema.tsv", "{dir}/routes.tsv")
    }}

    server {{
        listen 127.0.0.1:{port};
        location = /__status {{
            content_by_lua_block {{ require("gateway").status() }}
        }}
        location = /__update {{
            content_by_lua_block {{ require("gateway").update() }}
        }}
        location = /metrics {{
            content_by_lua_block {{ require("gateway").metrics() }}
        }}
        location /__lazy/ {{
            content_by_lua_block {{ require("gateway").lazy_probe() }}
        }}
        location / {{
            access_by_lua_block {{ require("gateway").access() }}
            content_by_lua_block {{ ngx.exit(404) }}
        }}
    }}
}}
"#,
        dir = dir.display(),
        head = nginx::conf_head(n, dir, 1, "info"),
        lua = lua.display(),
        share = n.lua_share.display(),
        libdir = libdir.display(),
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    path
}

/// A request as it goes on the wire; `header` values are raw bytes so that invalid UTF-8 can
/// be sent.
#[derive(Clone, Debug, Default)]
struct HttpReq {
    method: String,
    host: Vec<u8>,
    /// The decoded path (what nginx's `$uri` gives back).
    path: Vec<u8>,
    query: Vec<(String, String)>,
    headers: Vec<(String, Vec<u8>)>,
    /// The port nginx listens on (`net.dst.port` without a test header).
    server_port: u16,
}

fn percent_encode(bytes: &[u8], keep_slash: bool) -> String {
    let mut out = String::new();
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl HttpReq {
    fn from_workload(fields: &[(String, atc_workload::Value)], server_port: u16) -> HttpReq {
        let mut r = HttpReq {
            server_port,
            ..HttpReq::default()
        };
        for (name, value) in fields {
            let text = match value {
                atc_workload::Value::Str(s) => s.clone(),
                atc_workload::Value::Int(i) => i.to_string(),
                atc_workload::Value::Ip(a) => a.to_string(),
            };
            let test_header = |h: &str| (format!("X-Test-{h}"), text.clone().into_bytes());
            match name.as_str() {
                "http.method" => r.method = text,
                "http.host" => r.host = text.into_bytes(),
                "http.path" => r.path = text.into_bytes(),
                "net.src.ip" => r.headers.push(("X-Real-IP".into(), text.into_bytes())),
                "net.dst.port" => r.headers.push(test_header("Dst-Port")),
                "net.src.port" => r.headers.push(test_header("Src-Port")),
                "net.dst.ip" => r.headers.push(test_header("Dst-Ip")),
                "net.protocol" => r.headers.push(test_header("Protocol")),
                "tls.sni" => r.headers.push(test_header("Tls-Sni")),
                n if n.starts_with("http.path.segments.") => {} // derived from the path
                n => {
                    if let Some(h) = n.strip_prefix("http.headers.") {
                        r.headers.push((h.replace('_', "-"), text.into_bytes()));
                    } else if let Some(q) = n.strip_prefix("http.queries.") {
                        r.query.push((q.to_owned(), text));
                    } else {
                        panic!("the test does not know how to send field {n}");
                    }
                }
            }
        }
        if r.method.is_empty() {
            r.method = "GET".into();
        }
        r
    }

    /// Paths that nginx would normalise (dot segments) cannot arrive as they were built.
    fn survives_nginx(&self) -> bool {
        self.path.starts_with(b"/")
            && !self
                .path
                .split(|&b| b == b'/')
                .any(|s| s == b"." || s == b"..")
            && !self.path.contains(&0)
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut target = percent_encode(&self.path, true);
        if !self.query.is_empty() {
            let q: Vec<String> = self
                .query
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}={}",
                        percent_encode(k.as_bytes(), false),
                        percent_encode(v.as_bytes(), false)
                    )
                })
                .collect();
            target = format!("{target}?{}", q.join("&"));
        }
        let mut out = format!("{} {target} HTTP/1.0\r\n", self.method).into_bytes();
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(&self.host);
        out.extend_from_slice(b"\r\n");
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        if self.method != "GET" && self.method != "HEAD" {
            out.extend_from_slice(b"Content-Length: 0\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out
    }

    fn header_values(&self, name: &str) -> Vec<&[u8]> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
            .collect()
    }

    fn test_header(&self, name: &str) -> Option<&[u8]> {
        self.header_values(&format!("x-test-{name}"))
            .first()
            .copied()
    }

    /// The values lua/t/gateway.lua adds for `field` (its `derive`, mirrored). `Err` for bytes
    /// that are not UTF-8 or text that does not parse, which the gateway answers with 400.
    fn derive(&self, field: &str, ty: Type) -> Result<Vec<Value>, ()> {
        let raw: Vec<Vec<u8>> = match field {
            "http.method" => vec![self.method.clone().into_bytes()],
            "http.host" => {
                // $host: without port and trailing dot, lowercased.
                let mut h = self.host.clone();
                if let Some(colon) = h.iter().rposition(|&b| b == b':') {
                    h.truncate(colon);
                }
                while h.last() == Some(&b'.') {
                    h.pop();
                }
                h.make_ascii_lowercase();
                vec![h]
            }
            "http.path" => vec![self.path.clone()],
            "net.src.ip" => vec![self
                .header_values("x-real-ip")
                .first()
                .map_or(b"127.0.0.1".to_vec(), |v| v.to_vec())],
            "net.dst.port" => vec![self
                .test_header("dst-port")
                .map_or(self.server_port.to_string().into_bytes(), <[u8]>::to_vec)],
            "tls.sni" => self
                .test_header("tls-sni")
                .map(<[u8]>::to_vec)
                .into_iter()
                .collect(),
            "net.src.port" | "net.dst.ip" | "net.protocol" => {
                let h = field.rsplit('.').next().unwrap();
                let name = match h {
                    "port" => "src-port",
                    "ip" => "dst-ip",
                    _ => "protocol",
                };
                self.test_header(name)
                    .map(<[u8]>::to_vec)
                    .into_iter()
                    .collect()
            }
            f => {
                if let Some(h) = f.strip_prefix("http.headers.") {
                    self.header_values(&h.replace('_', "-"))
                        .into_iter()
                        .map(<[u8]>::to_vec)
                        .collect()
                } else if let Some(q) = f.strip_prefix("http.queries.") {
                    self.query
                        .iter()
                        .filter(|(k, _)| k == q)
                        .map(|(_, v)| v.clone().into_bytes())
                        .collect()
                } else if let Some(n) = f.strip_prefix("http.path.segments.") {
                    let n: usize = n.parse().map_err(|_| ())?;
                    let start = self
                        .path
                        .iter()
                        .position(|&b| b != b'/')
                        .unwrap_or(self.path.len());
                    self.path[start..]
                        .split(|&b| b == b'/')
                        .nth(n)
                        .map(<[u8]>::to_vec)
                        .into_iter()
                        .collect()
                } else {
                    vec![]
                }
            }
        };
        raw.into_iter()
            .map(|bytes| {
                let text = String::from_utf8(bytes).map_err(|_| ())?;
                Ok(match ty {
                    Type::String => Value::String(text),
                    Type::Int => Value::Int(text.parse().map_err(|_| ())?),
                    Type::IpAddr => Value::IpAddr(text.parse::<IpAddr>().map_err(|_| ())?),
                    Type::IpCidr => Value::IpCidr(text.parse().map_err(|_| ())?),
                })
            })
            .collect()
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Expected {
    Route { id: Uuid, body: String },
    NotFound,
    BadRequest,
}

fn ns(out: &mut String, s: &str) {
    out.push_str(&format!("{}:{s},", s.len()));
}

/// The values of the fields in use whose bit is (`key`) or is not (`!key`) in `keys` and is in
/// `wanted`, into `ctx`; `false` when one is malformed (the gateway's 400).
fn add_fields(
    router: &Router,
    req: &HttpReq,
    ctx: &mut Context,
    keys: u64,
    key: bool,
    wanted: u64,
) -> bool {
    let schema = router.schema().clone();
    for field in router.fields() {
        let (id, ty) = schema
            .resolve(&field)
            .expect("router fields are in the schema");
        let bit = id.bit();
        if (keys & bit != 0) != key || wanted & bit == 0 {
            continue;
        }
        let Ok(values) = req.derive(&field, ty) else {
            return false;
        };
        for v in values {
            if ctx.add_value(&field, v).is_err() {
                return false;
            }
        }
    }
    true
}

/// The fields the gateway's two-phase routing reads for `req`: the key fields, then those the
/// candidates need (`None`: a key field is malformed).
fn needed(router: &Router, req: &HttpReq) -> Option<u64> {
    let mut ctx = Context::new(router.schema().clone());
    let keys = router.key_fields();
    add_fields(router, req, &mut ctx, keys, true, u64::MAX).then(|| router.needed_fields(&mut ctx))
}

/// What the gateway must answer, by the reference evaluator over the values its two-phase
/// routing reads: the key fields, then the fields the candidate routes use. (lua/t/gateway.lua
/// checks that this answers what reading every field answers, but for malformed values that
/// are not read.)
fn expected(router: &Router, req: &HttpReq) -> Expected {
    let mut ctx = Context::new(router.schema().clone());
    let keys = router.key_fields();
    if !add_fields(router, req, &mut ctx, keys, true, u64::MAX) {
        return Expected::BadRequest;
    }
    let wanted = router.needed_fields(&mut ctx);
    if !add_fields(router, req, &mut ctx, keys, false, wanted) {
        return Expected::BadRequest;
    }
    if !router.execute_reference(&mut ctx) {
        return Expected::NotFound;
    }
    let m = ctx.result().unwrap();
    let mut body = format!("{}\n", m.id());
    let matched = m
        .matched_value("http.path")
        .map(|v| v.to_string())
        .unwrap_or_default();
    ns(&mut body, &matched);
    let caps: BTreeMap<String, String> = m.captures_map().into_iter().collect();
    for (k, v) in caps {
        ns(&mut body, &k);
        ns(&mut body, &v);
    }
    Expected::Route { id: m.id(), body }
}

fn route_header(got: &Response) -> Option<String> {
    got.headers
        .iter()
        .find(|(k, _)| k == "x-route")
        .map(|(_, v)| v.clone())
}

/// Whether the gateway's answer is the expected one.
fn answers(want: &Expected, got: &Response, req: &HttpReq) -> bool {
    match want {
        Expected::Route { id, body } => {
            got.status == 200
                && route_header(got).as_deref() == Some(id.to_string().as_str())
                && (req.method == "HEAD" || got.body == body.as_bytes())
        }
        Expected::NotFound => got.status == 404,
        Expected::BadRequest => got.status == 400,
    }
}

fn check(port: u16, router: &Router, req: &HttpReq, what: &str) -> Result<Expected, String> {
    let want = expected(router, req);
    let got = send(port, &req.to_bytes())?;
    let route_header = route_header(&got);
    if let Some(x) = explain_header(&got) {
        return Err(format!("{what}: an explanation nobody asked for: {x}"));
    }
    if !answers(&want, &got, req) {
        return Err(format!(
            "{what}: {} {:?}\n  want {want:?}\n  got {} {route_header:?} {:?}",
            req.method,
            String::from_utf8_lossy(&req.path),
            got.status,
            String::from_utf8_lossy(&got.body)
        ));
    }
    Ok(want)
}

// ---- The debug header (X-Atc-Explain) ----

fn explain_header(got: &Response) -> Option<String> {
    got.headers
        .iter()
        .find(|(k, _)| k == "x-atc-explain")
        .map(|(_, v)| v.clone())
}

/// The explanation the gateway takes for `req`: over the values its two-phase routing reads
/// (`None`: a bad request, which is not explained).
fn explanation(router: &Router, req: &HttpReq) -> Option<Explanation> {
    let mut ctx = Context::new(router.schema().clone());
    let keys = router.key_fields();
    if !add_fields(router, req, &mut ctx, keys, true, u64::MAX) {
        return None;
    }
    let wanted = router.needed_fields(&mut ctx);
    if !add_fields(router, req, &mut ctx, keys, false, wanted) {
        return None;
    }
    Some(
        router
            .explain(&mut ctx)
            .expect("the reference router explains"),
    )
}

/// Runs of control characters become one space (`one_line` of resty.router.gateway.explain).
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_run = false;
    for c in s.chars() {
        if c < ' ' || c == '\x7f' {
            if !in_run {
                out.push(' ');
            }
            in_run = true;
        } else {
            out.push(c);
            in_run = false;
        }
    }
    out
}

/// `gateway.explain_summary(why)` (resty.router.gateway.explain), mirrored, with its default
/// length limit.
fn summary(e: &Explanation) -> String {
    const MAX: usize = 2048;
    let winner = e.winner.map_or("none".to_owned(), |id| id.to_string());
    let mut out = format!(
        "winner={winner} candidates={} routes={}",
        e.candidates.len(),
        e.routes
    );
    let failed: Vec<_> = e.candidates.iter().filter(|c| !c.matched).collect();
    for (i, c) in failed.iter().enumerate() {
        let part = match c.predicates.first() {
            Some(p) => {
                let text = if p.negated {
                    format!("!({})", p.text)
                } else {
                    p.text.clone()
                };
                format!(
                    "; {} failed at {}:{} {}",
                    c.id,
                    p.location.line,
                    p.location.column,
                    one_line(&text)
                )
            }
            None => format!("; {} failed", c.id),
        };
        let rest = failed.len() - i - 1;
        let reserve = if rest > 0 {
            format!("; +{rest} more failed").len()
        } else {
            0
        };
        if out.len() + part.len() + reserve > MAX {
            let more = format!("; +{} more failed", failed.len() - i);
            if out.len() + more.len() <= MAX {
                out.push_str(&more);
            }
            break;
        }
        out.push_str(&part);
    }
    out
}

/// The debug header: explained (exactly as the core explains the same values) when asked from
/// 127.0.0.1, on a routed request and on a 404; ignored when asked by another client
/// (X-Real-IP sets the client address); absent when not asked (`check` makes sure of it for
/// every other request of the test).
fn check_explain_header(port: u16, router: &Router, base: &HttpReq) -> Vec<String> {
    let mut failures = Vec::new();
    let mut local = base.clone();
    local
        .headers
        .retain(|(n, _)| !n.eq_ignore_ascii_case("x-real-ip"));
    local.headers.push(("X-Atc-Explain".into(), b"1".to_vec()));
    let mut missing = local.clone();
    missing.host = b"nowhere.invalid".to_vec();
    missing.path = b"/nothing/here".to_vec();
    let mut remote = local.clone();
    remote
        .headers
        .push(("X-Real-IP".into(), b"192.0.2.7".to_vec()));

    for (what, req, want_status) in [("routed", &local, 200), ("not found", &missing, 404)] {
        let why = explanation(router, req).expect("a good request");
        let want = summary(&why);
        match send(port, &req.to_bytes()) {
            Ok(got) => {
                let header = explain_header(&got);
                if got.status != want_status || header.as_deref() != Some(want.as_str()) {
                    failures.push(format!(
                        "explain header, {what}: got {} {header:?}\n  want {want_status} \
                         {want:?}",
                        got.status
                    ));
                }
                if want_status == 200 && route_header(&got) != why.winner.map(|w| w.to_string()) {
                    failures.push(format!(
                        "explain header, {what}: X-Route {:?} is not the winner {:?}",
                        route_header(&got),
                        why.winner
                    ));
                }
            }
            Err(e) => failures.push(format!("explain header, {what}: {e}")),
        }
    }
    match send(port, &remote.to_bytes()) {
        Ok(got) => {
            if let Some(x) = explain_header(&got) {
                failures.push(format!("explain header from 192.0.2.7 answered: {x}"));
            }
        }
        Err(e) => failures.push(format!("explain header from 192.0.2.7: {e}")),
    }
    failures
}

fn status_page(port: u16) -> Result<String, String> {
    let r = send(port, b"GET /__status HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    if r.status != 200 {
        return Err(format!("status page: {}", r.status));
    }
    Ok(String::from_utf8_lossy(&r.body).into_owned())
}

/// The gateway's Prometheus text (`/metrics`) as `name{labels}` → value, after checking that it
/// is served as Prometheus' text format and that every sample follows its metric's TYPE line.
fn metrics(port: u16) -> BTreeMap<String, f64> {
    let r = send(port, b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("metrics");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let content_type = r.headers.iter().find(|(k, _)| k == "content-type");
    assert!(
        content_type.is_some_and(|(_, v)| v.starts_with("text/plain; version=0.0.4")),
        "{content_type:?}"
    );
    let text = String::from_utf8(r.body).expect("UTF-8");
    let mut typed = HashSet::new();
    let mut samples = BTreeMap::new();
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("# TYPE ") {
            typed.insert(t.split(' ').next().unwrap().to_owned());
        } else if !line.starts_with('#') {
            let (key, value) = line.rsplit_once(' ').expect("a sample line");
            let name = key.split('{').next().unwrap();
            assert!(typed.contains(name), "no TYPE line before {line:?}");
            samples.insert(key.to_owned(), value.parse::<f64>().expect("a number"));
        }
    }
    samples
}

/// A sample of [`metrics`], of the worker's gateway (`worker="0"`), with more labels or none.
fn sample(m: &BTreeMap<String, f64>, name: &str, labels: &str) -> f64 {
    let sep = if labels.is_empty() { "" } else { "," };
    let key = format!("{name}{{worker=\"0\"{sep}{labels}}}");
    *m.get(&key)
        .unwrap_or_else(|| panic!("no {key} in {:?}", m.keys().collect::<Vec<_>>()))
}

/// Requests answered by result (routed, not found, bad request) and updates (applied, refused).
fn counts(m: &BTreeMap<String, f64>) -> [f64; 5] {
    let req = |r: &str| sample(m, "atc_router_requests_total", &format!("result=\"{r}\""));
    let upd = |r: &str| sample(m, "atc_router_updates_total", &format!("result=\"{r}\""));
    [
        req("routed"),
        req("not_found"),
        req("bad_request"),
        upd("applied"),
        upd("refused"),
    ]
}

fn delta(after: [f64; 5], before: [f64; 5]) -> [f64; 5] {
    std::array::from_fn(|i| after[i] - before[i])
}

fn worker_pid(status: &str) -> String {
    status
        .split_whitespace()
        .skip_while(|w| *w != "pid")
        .nth(1)
        .unwrap_or("?")
        .to_owned()
}

#[test]
fn nginx_routes_like_the_reference() {
    let Some(nginx) = nginx::required_or_skip("nginx_routes_like_the_reference") else {
        return;
    };
    let started = Instant::now();

    // The table, as files for the Lua side and as a reference router here.
    let table = Table::generate(ROUTES, SEED, false);
    let dir = common::cpath_dir("nginx");
    let mut schema_tsv = String::new();
    for (name, ty) in atc_router::request::HTTP_FIELDS {
        schema_tsv.push_str(&format!("{name}\t{}\n", ty.name()));
    }
    let schema = Arc::new(atc_router::request::http_schema());
    let mut router = Router::new(schema.clone());
    let mut routes_tsv = String::new();
    for r in &table.routes {
        assert!(
            !r.expression.contains(['\n', '\t']),
            "expressions are written one per line: {:?}",
            r.expression
        );
        routes_tsv.push_str(&format!(
            "{}\t{}\t{}\n",
            r.priority,
            r.id_string(),
            r.expression
        ));
        router
            .add(Uuid::from_bytes(r.id), r.priority, &r.expression)
            .unwrap_or_else(|e| panic!("the core rejects a workload route: {e}"));
    }
    std::fs::write(dir.join("schema.tsv"), schema_tsv).unwrap();
    std::fs::write(dir.join("routes.tsv"), routes_tsv).unwrap();

    let port = free_port();
    let conf = write_config(&nginx, &dir, &dir, port);
    let mut running = Running::start(&nginx, &dir, &conf);

    // Ready once the worker answers (init_worker has then finished building the router).
    let status = loop {
        if let Ok(s) = status_page(port) {
            break s;
        }
        if let Ok(Some(code)) = running.child.try_wait() {
            panic!("nginx exited with {code} during start:\n{}", running.logs());
        }
        assert!(
            started.elapsed() < START_DEADLINE,
            "nginx did not answer in time:\n{}",
            running.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.starts_with(&format!("loaded {} ", table.routes.len())),
        "routes not all loaded: {status}\n{}",
        running.logs()
    );
    // The gateway reads requests through lua-nginx-module's FFI functions on the versions
    // whose functions were reviewed (resty.router.gateway.sources; Debian 12 has 0.10.23), and
    // through the plain ngx API otherwise: the comparison of the two in lua/t/gateway.lua only
    // means something with the native one.
    if !status.contains(" is not one reviewed ") {
        assert!(
            status.contains(" source native "),
            "the gateway does not read requests natively: {status}"
        );
    }
    let pid = worker_pid(&status);
    println!(
        "nginx up with {} routes after {:.1?}",
        table.routes.len(),
        started.elapsed()
    );
    // The metrics of a fresh worker: the table built in init_worker, one update applied.
    let m0 = metrics(port);
    assert_eq!(counts(&m0), [0.0, 0.0, 0.0, 1.0, 0.0], "{m0:?}");
    assert_eq!(
        sample(&m0, "atc_router_routes", ""),
        table.routes.len() as f64
    );
    assert_eq!(sample(&m0, "atc_router_broken", ""), 0.0);
    assert!(sample(&m0, "atc_router_last_build_seconds", "") > 0.0);
    let info = r#"version="initial",request_source="#;
    assert!(
        m0.keys()
            .any(|k| k.starts_with("atc_router_gateway_info{") && k.contains(info)),
        "{m0:?}"
    );

    // Requests of every mix: each must reach the reference's route.
    let mut failures = Vec::new();
    let (mut routed, mut not_found, mut skipped, mut off_target) = (0, 0, 0, 0);
    let mut bad = 0;
    for (k, mix) in Mix::all().into_iter().enumerate() {
        for (i, wreq) in requests(&table, mix, PER_MIX, SEED + k as u64)
            .iter()
            .enumerate()
        {
            let req = HttpReq::from_workload(&wreq.fields, port);
            if !req.survives_nginx() {
                skipped += 1;
                continue;
            }
            match check(port, &router, &req, &format!("{} #{i}", mix.name())) {
                Ok(Expected::Route { id, .. }) => {
                    routed += 1;
                    if wreq.target.map(|t| Uuid::from_bytes(table.routes[t].id)) != Some(id) {
                        off_target += 1;
                    }
                }
                Ok(Expected::NotFound) => not_found += 1,
                Ok(Expected::BadRequest) => bad += 1,
                Err(e) => failures.push(e),
            }
        }
    }
    println!(
        "workload requests: {routed} routed, {not_found} not found, {skipped} skipped (dot \
         segments), {off_target} routed elsewhere than their target, {} wrong",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        routed >= 4 * PER_MIX * 9 / 10,
        "too few requests were routed ({routed}): the HTTP mapping loses values"
    );
    // The metrics counted exactly what was sent, and no update.
    let m1 = metrics(port);
    assert_eq!(
        delta(counts(&m1), counts(&m0)),
        [routed as f64, not_found as f64, bad as f64, 0.0, 0.0],
        "requests counted by /metrics (routed, not found, bad, updates)"
    );

    // Bad and odd requests: a clean 4xx (or the reference's answer), and the worker lives on.
    let base = HttpReq::from_workload(&requests(&table, Mix::HitFirst, 1, SEED)[0].fields, port);
    // A path that is not UTF-8 once decoded: refused by the gateway before matching, and
    // counted as a bad request.
    let mut bad_path = base.clone();
    bad_path.path = b"/caf\xe9".to_vec();
    for _ in 0..5 {
        let r = send(port, &bad_path.to_bytes()).expect("bad path");
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    }
    assert_eq!(
        delta(counts(&metrics(port)), counts(&m1)),
        [0.0, 0.0, 5.0, 0.0, 0.0],
        "bad requests counted by /metrics"
    );
    let header_field = table
        .routes
        .iter()
        .find_map(|r| {
            r.expression
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
                .find(|w| w.starts_with("http.headers."))
                .map(str::to_owned)
        })
        .expect("the table routes on some header");
    let header = header_field["http.headers.".len()..].replace('_', "-");
    let with_header = |values: Vec<Vec<u8>>| {
        let mut r = base.clone();
        r.headers
            .extend(values.into_iter().map(|v| (header.clone(), v)));
        r
    };
    // A request whose candidate routes use the header: a malformed value of it is read, and
    // rejected. (In `base` it may not be read at all: see `expected`.)
    let header_bit = schema.resolve(&header_field).unwrap().0.bit();
    let needs_header = requests(&table, Mix::Realistic, 5000, SEED + 1)
        .into_iter()
        .map(|r| HttpReq::from_workload(&r.fields, port))
        .find(|r| needed(&router, r).is_some_and(|m| m & header_bit != 0))
        .expect("some request needs the header");
    let mut bad_needed_header = needs_header.clone();
    bad_needed_header
        .headers
        .push((header.clone(), b"v\xff\xfe".to_vec()));
    let odd: Vec<(&str, HttpReq, Option<u16>)> = vec![
        (
            "invalid UTF-8 header a candidate uses",
            bad_needed_header,
            Some(400),
        ),
        (
            "invalid UTF-8 header",
            with_header(vec![b"v\xff\xfe".to_vec()]),
            None,
        ),
        (
            "invalid UTF-8 path",
            {
                let mut r = base.clone();
                r.path = b"/caf\xe9".to_vec();
                r
            },
            Some(400),
        ),
        (
            "invalid UTF-8 host",
            {
                let mut r = base.clone();
                r.host = b"h\xc3.example.com".to_vec();
                r
            },
            None,
        ),
        (
            "large header value",
            with_header(vec![vec![b'a'; 60_000]]),
            None,
        ),
        (
            "multi-valued header",
            with_header(vec![b"v1".to_vec(), b"V2".to_vec(), b"v2".to_vec()]),
            None,
        ),
        (
            "1,100 values of one header",
            with_header(vec![b"x".to_vec(); 1100]),
            None,
        ),
        (
            "1,100 values of a header a candidate uses",
            {
                let mut r = needs_header.clone();
                r.headers
                    .extend(std::iter::repeat_n((header.clone(), b"x".to_vec()), 1100));
                r
            },
            Some(400),
        ),
    ];
    // Expected answers come from the reference unless fixed above.
    let mut bad_failures = Vec::new();
    for (what, req, fixed) in odd {
        let result = match fixed {
            Some(code) => send(port, &req.to_bytes()).and_then(|r| {
                if r.status == code {
                    Ok(())
                } else {
                    Err(format!(
                        "{what}: got {} {:?}, want {code}",
                        r.status,
                        String::from_utf8_lossy(&r.body)
                    ))
                }
            }),
            None => check(port, &router, &req, what).map(|_| ()),
        };
        if let Err(e) = result {
            bad_failures.push(e);
        }
    }
    // Requests nginx itself refuses: still a clean 4xx.
    let mut huge = base.clone();
    huge.headers.push((header.clone(), vec![b'a'; 300_000]));
    match send(port, &huge.to_bytes()) {
        Ok(r) if (400..500).contains(&r.status) => {}
        Ok(r) => bad_failures.push(format!("huge header: got {}", r.status)),
        Err(e) => bad_failures.push(format!("huge header: {e}")),
    }
    let mut nul = base.to_bytes();
    let at = nul.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    nul.splice(at..at, b"X-Nul: a\0b\r\n".iter().copied());
    match send(port, &nul) {
        Ok(r) if (400..500).contains(&r.status) => {}
        Ok(r) => bad_failures.push(format!("NUL in a header: got {}", r.status)),
        Err(e) => bad_failures.push(format!("NUL in a header: {e}")),
    }
    // Shapes the workload does not send, where the gateway's two request sources could part:
    // lua/t/gateway.lua answers 500 when they give different values (any other status is the
    // router's business, checked above).
    let shapes: [&[u8]; 6] = [
        b"GET /a/b/c?debug&debug=&debug=1&preview=%20x&trace=a+b&Debug=2 HTTP/1.1\r\n",
        b"GET //a//b/?=&&x HTTP/1.1\r\n",
        b"GET / HTTP/1.1\r\n",
        b"GET /caf%C3%A9/%2F/x? HTTP/1.1\r\n",
        b"PATCHY /v2/items/7 HTTP/1.1\r\n",
        b"GET /x HTTP/1.1\r\nX-Version:\r\nx-VERSION: V2\r\nX-Env: a\r\nX-Canary: 1\r\n\
          X-Env: b\r\n",
    ];
    let mut source_failures = Vec::new();
    for shape in shapes {
        let mut raw = shape.to_vec();
        raw.extend_from_slice(b"Host: Svc-1.Example.com:8443\r\nConnection: close\r\n\r\n");
        match send(port, &raw) {
            Ok(r) if r.status != 500 => {}
            Ok(r) => source_failures.push(format!(
                "{:?}: {}",
                String::from_utf8_lossy(shape),
                String::from_utf8_lossy(&r.body)
            )),
            Err(e) => source_failures.push(format!("{:?}: {e}", String::from_utf8_lossy(shape))),
        }
    }
    assert!(source_failures.is_empty(), "{}", source_failures.join("\n"));

    let explain_failures = check_explain_header(port, &router, &base);
    assert!(
        explain_failures.is_empty(),
        "{}",
        explain_failures.join("\n")
    );

    // Lazy captures (captures = "lazy") read by a request after another request was routed
    // (here its subrequest, a request of its own to nginx) raise: never the other's values.
    let r = send(port, b"GET /__lazy/42 HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let body = String::from_utf8_lossy(&r.body);
    assert_eq!(r.status, 200, "{body}");
    assert!(
        body.starts_with("own 42\nsubrequest 7\nstale read raised: ")
            && body.contains("captures read after the gateway routed another request"),
        "{body}"
    );

    // Still the same worker, still routing.
    let status = status_page(port).expect("nginx still answers");
    assert_eq!(
        worker_pid(&status),
        pid,
        "the worker was replaced (it crashed)"
    );
    check(port, &router, &base, "after the bad requests").unwrap();

    let before_updates = counts(&metrics(port));
    let held = check_updates(port, &dir, &table, &mut router);
    // Updates counted: version 3 refused once; 2, 3 (apply-valid) and a3 to b8 applied, and of
    // the burst a9 to b12 those the builder did not supersede (at least the last).
    let m = metrics(port);
    let [.., applied, refused] = delta(counts(&m), before_updates);
    assert_eq!(refused, 1.0, "{m:?}");
    assert!(
        (9.0..=12.0).contains(&applied),
        "{applied} updates applied: {m:?}"
    );
    assert_eq!(sample(&m, "atc_router_routes", ""), held as f64);
    assert_eq!(sample(&m, "atc_router_last_update_failed", ""), 0.0);
    assert_eq!(sample(&m, "atc_router_update_pending", ""), 0.0);
    assert!(sample(&m, "atc_router_last_build_seconds", "") > 0.0);
    assert!(m
        .keys()
        .any(|k| k.starts_with("atc_router_gateway_info{") && k.contains(r#"version="b12""#)));
    let status = status_page(port).expect("nginx still answers");
    assert_eq!(
        worker_pid(&status),
        pid,
        "the worker was replaced during the updates (it crashed)"
    );

    running.stop();
    nginx::assert_clean_logs(&running.logs());
    println!("nginx test done in {:.1?}", started.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- Updates through resty.router.gateway ----

fn write_routes(path: &Path, routes: &[Route]) {
    let tsv: String = routes
        .iter()
        .map(|r| format!("{}\t{}\t{}\n", r.priority, r.id_string(), r.expression))
        .collect();
    std::fs::write(path, tsv).unwrap();
}

fn specs(routes: &[Route]) -> Vec<RouteSpec<'_>> {
    routes
        .iter()
        .map(|r| RouteSpec {
            id: Uuid::from_bytes(r.id),
            priority: r.priority,
            expression: &r.expression,
        })
        .collect()
}

/// Asks the worker to apply the routes of `file` as `version`; the answer's status and text.
fn post_update(port: u16, version: &str, file: &Path, mode: &str) -> (u16, String) {
    let target = format!(
        "/__update?version={}&file={}&mode={mode}",
        percent_encode(version.as_bytes(), false),
        percent_encode(file.to_str().unwrap().as_bytes(), false)
    );
    let raw = format!("POST {target} HTTP/1.0\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
    let r = send(port, raw.as_bytes()).expect("update request");
    (r.status, String::from_utf8_lossy(&r.body).into_owned())
}

/// Requests built for `routes` (a sub-table: they target those routes), that nginx can carry.
fn requests_for(routes: &[Route], count: usize, seed: u64, port: u16) -> Vec<HttpReq> {
    if routes.is_empty() {
        return Vec::new();
    }
    let sub = Table {
        routes: routes.to_vec(),
        catch_all: false,
    };
    requests(&sub, Mix::Realistic, count, seed)
        .iter()
        .map(|r| HttpReq::from_workload(&r.fields, port))
        .filter(HttpReq::survives_nginx)
        .collect()
}

fn applied_line(version: &str, report: &atc_router::SyncReport) -> String {
    format!(
        "applied version {version} added {} removed {} changed {} unchanged {} errors {}\n",
        report.added,
        report.removed,
        report.changed,
        report.unchanged,
        report.errors.len()
    )
}

/// The routes of `new` whose id is not in `old` with the same priority and expression.
fn differing(old: &[Route], new: &[Route]) -> Vec<Route> {
    let before: HashSet<&Route> = old.iter().collect();
    new.iter()
        .filter(|r| !before.contains(r))
        .cloned()
        .collect()
}

fn check_all(port: u16, router: &Router, reqs: &[HttpReq], what: &str) {
    let failures: Vec<String> = reqs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| check(port, router, r, &format!("{what} #{i}")).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Returns how many routes the gateway holds at the end.
fn check_updates(port: u16, dir: &Path, table: &Table, router: &mut Router) -> usize {
    let t = Instant::now();
    // Version 2: 200 routes changed, 100 removed, 50 added.
    let mut v2 = table.with_changes(200, SEED ^ 2);
    v2.routes.drain(..100);
    let mut ids: HashSet<[u8; 16]> = table.routes.iter().map(|r| r.id).collect();
    for k in 0..50 {
        let extra = table.extra_route(SEED + k);
        if ids.insert(extra.id) {
            v2.routes.push(extra);
        }
    }
    let file2 = dir.join("routes-v2.tsv");
    write_routes(&file2, &v2.routes);
    let want = router
        .sync(&specs(&v2.routes), SyncMode::AllOrNothing)
        .expect("the reference takes version 2");
    assert!(want.changed > 100 && want.removed == 100 && want.added == 50);
    let (status, body) = post_update(port, "2", &file2, "all_or_nothing");
    assert_eq!((status, body), (200, applied_line("2", &want)));

    // Every mix over the new table, requests for the new and changed routes, and requests for
    // the routes as they were (now changed or gone): all as the reference says now.
    for (k, mix) in Mix::all().into_iter().enumerate() {
        let reqs: Vec<HttpReq> = requests(&v2, mix, 10, SEED + 100 + k as u64)
            .iter()
            .map(|r| HttpReq::from_workload(&r.fields, port))
            .filter(HttpReq::survives_nginx)
            .collect();
        check_all(port, router, &reqs, &format!("v2 {}", mix.name()));
    }
    let new_routes = differing(&table.routes, &v2.routes);
    let old_routes = differing(&v2.routes, &table.routes);
    let to_new = requests_for(&new_routes, 60, SEED + 200, port);
    let to_old = requests_for(&old_routes, 60, SEED + 201, port);
    let routed_new = to_new
        .iter()
        .filter(|r| matches!(expected(router, r), Expected::Route { .. }))
        .count();
    assert!(
        routed_new * 10 >= to_new.len() * 9,
        "requests for new routes mostly route"
    );
    check_all(port, router, &to_new, "v2 new or changed route");
    check_all(port, router, &to_old, "v2 old version of a route");

    // The same version again: nothing to do.
    let (status, body) = post_update(port, "2", &file2, "all_or_nothing");
    assert_eq!((status, body.as_str()), (200, "unchanged version 2\n"));

    // A version with an invalid route: refused, version 2 stays in force.
    let mut v3 = v2.clone();
    v3.routes[10].expression = "http.path ^= ".into();
    let bad_id = v3.routes[10].id_string();
    let file3 = dir.join("routes-v3.tsv");
    write_routes(&file3, &v3.routes);
    let (status, body) = post_update(port, "3", &file3, "all_or_nothing");
    assert_eq!(status, 400, "{body}");
    assert!(
        body.starts_with(&format!(
            "refused: 1 invalid route(s), nothing changed; route #11 ({bad_id}): line 1"
        )),
        "{body}"
    );
    assert!(
        body.contains(&format!("error 11 {bad_id}: line 1")),
        "{body}"
    );
    assert!(status_page(port).unwrap().contains(" version 2"));
    check_all(
        port,
        router,
        &to_new[..10.min(to_new.len())],
        "after a refused version",
    );

    // The same list in apply-valid mode: the rest applies, the bad route keeps its version 2.
    v3.routes[20].expression =
        format!("({}) && http.method != \"X-NEW\"", v3.routes[20].expression);
    write_routes(&file3, &v3.routes);
    let want = router
        .sync(&specs(&v3.routes), SyncMode::ApplyValid)
        .unwrap();
    assert_eq!((want.changed, want.errors.len()), (1, 1));
    let (status, body) = post_update(port, "3", &file3, "apply_valid");
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with(&applied_line("3", &want)), "{body}");
    check_all(
        port,
        router,
        &to_new[..10.min(to_new.len())],
        "after apply-valid",
    );

    // Versions alternating between two tables while another connection keeps routing: every
    // answer is the old table's or the new table's.
    let a = v3.routes.clone();
    let mut b = Table {
        routes: a.clone(),
        catch_all: false,
    }
    .with_changes(300, SEED ^ 4)
    .routes;
    b.truncate(b.len() - 20); // some removals too
    let (file_a, file_b) = (dir.join("routes-a.tsv"), dir.join("routes-b.tsv"));
    write_routes(&file_a, &a);
    write_routes(&file_b, &b);
    let schema = router.schema().clone();
    let reference = |routes: &[Route]| {
        let mut r = Router::new(schema.clone());
        r.sync(&specs(routes), SyncMode::ApplyValid).unwrap();
        r
    };
    let (ra, rb) = (reference(&a), reference(&b));
    let mut reqs = requests_for(&differing(&a, &b), 40, SEED + 300, port);
    reqs.extend(requests_for(&differing(&b, &a), 40, SEED + 301, port));
    let cases: Vec<(HttpReq, Expected, Expected)> = reqs
        .into_iter()
        .map(|r| {
            let (ea, eb) = (expected(&ra, &r), expected(&rb, &r));
            (r, ea, eb)
        })
        .collect();
    assert!(
        cases.iter().filter(|(_, ea, eb)| ea != eb).count() >= cases.len() / 2,
        "most requests tell the tables apart"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let cases = Arc::new(cases);
    // Answers the prober got that only table a (`seen[0]`) or only table b (`seen[1]`) gives.
    let seen = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let prober = {
        let (stop, cases, seen) = (stop.clone(), cases.clone(), seen.clone());
        std::thread::spawn(move || {
            let mut wrong = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) || i < cases.len() {
                let (req, ea, eb) = &cases[i % cases.len()];
                i += 1;
                let got = match send(port, &req.to_bytes()) {
                    Ok(g) => g,
                    Err(e) => {
                        wrong.push(format!("send: {e}"));
                        continue;
                    }
                };
                // The version that routed the request ("3" and the a-versions hold table a,
                // the b-versions table b): the answer is that version's, wholly.
                let by = got
                    .headers
                    .iter()
                    .find(|(k, _)| k == "x-gw-version")
                    .map(|(_, v)| usize::from(v.starts_with('b')));
                if let Some(t) = by {
                    if !answers([ea, eb][t], &got, req) {
                        wrong.push(format!(
                            "{:?}: routed by table {} (X-Gw-Version) but answered {} {:?}",
                            String::from_utf8_lossy(&req.path),
                            ["a", "b"][t],
                            got.status,
                            route_header(&got)
                        ));
                    }
                }
                match (answers(ea, &got, req), answers(eb, &got, req)) {
                    (true, false) => seen[0].fetch_add(1, Ordering::SeqCst),
                    (false, true) => seen[1].fetch_add(1, Ordering::SeqCst),
                    (true, true) => 0,
                    (false, false) => {
                        wrong.push(format!(
                            "{:?}: got {} {:?}, want {ea:?} or {eb:?}",
                            String::from_utf8_lossy(&req.path),
                            got.status,
                            route_header(&got)
                        ));
                        0
                    }
                };
            }
            wrong
        })
    };
    // Waits until the prober has had an answer only table `t` gives, after `before` of them:
    // the prober does route by that table now. (No sleeping in the hope that it did: the
    // deadline only keeps a broken prober from hanging the test.)
    let wait_for = |t: usize, before: usize, what: &str| {
        let until = Instant::now() + Duration::from_secs(120);
        while seen[t].load(Ordering::SeqCst) <= before {
            assert!(
                !prober.is_finished() && Instant::now() < until,
                "{what}: the prober got no answer of table {} in 120 s",
                ["a", "b"][t]
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    // Version 3 (table a) is in force: the prober is routing by it before the first update.
    wait_for(0, 0, "before the updates");
    // "a3" is a new version with the routes the worker already has: nothing changes but the
    // version. Then b, a, b, a, b: each a real change of 300 routes, each applied while the
    // prober routes, and the next one only once the prober has seen it in force.
    for (k, (version, file, t)) in [
        ("a3", &file_a, 0),
        ("b4", &file_b, 1),
        ("a5", &file_a, 0),
        ("b6", &file_b, 1),
        ("a7", &file_a, 0),
        ("b8", &file_b, 1),
    ]
    .into_iter()
    .enumerate()
    {
        let (status, body) = post_update(port, version, file, "apply_valid");
        assert_eq!(status, 200, "{version}: {body}");
        assert!(
            body.starts_with(&format!("applied version {version} ")),
            "{body}"
        );
        if k == 0 {
            assert!(body.contains(" added 0 removed 0 changed 0 "), "{body}");
        }
        // An answer counted now may have been routed before the update; the next one is not.
        wait_for(t, seen[t].load(Ordering::SeqCst) + 1, version);
    }
    // A burst: versions handed over back to back without waiting (each supersedes what the
    // builder has not applied yet), then the last one waited for. The prober keeps routing.
    for version in ["a9", "b10", "a11", "b12"] {
        let target = format!(
            "/__update?version={version}&file={}&mode=apply_valid&nowait=1",
            percent_encode(
                if version.starts_with('a') {
                    &file_a
                } else {
                    &file_b
                }
                .to_str()
                .unwrap()
                .as_bytes(),
                false
            )
        );
        let raw = format!("POST {target} HTTP/1.0\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
        let r = send(port, raw.as_bytes()).expect("update request");
        let body = String::from_utf8_lossy(&r.body);
        assert_eq!(r.status, 200, "{version}: {body}");
        assert!(
            body.starts_with(&format!("started version {version} ")),
            "{body}"
        );
    }
    let (status, body) = post_update(port, "b12", &file_b, "apply_valid");
    assert_eq!(status, 200, "b12: {body}");
    assert!(
        body.starts_with("applied version b12 ") || body == "unchanged version b12\n",
        "{body}"
    );
    wait_for(1, seen[1].load(Ordering::SeqCst) + 1, "b12");
    stop.store(true, Ordering::SeqCst);
    let wrong = prober.join().unwrap();
    let (as_a, as_b) = (
        seen[0].load(Ordering::SeqCst),
        seen[1].load(Ordering::SeqCst),
    );
    println!(
        "alternating versions: {as_a} answers by table a, {as_b} by table b, {} neither",
        wrong.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(as_a > 0 && as_b > 0, "the prober saw both tables");
    // The last version applied is b.
    let final_reqs: Vec<HttpReq> = cases.iter().map(|(r, _, _)| r.clone()).collect();
    check_all(port, &rb, &final_reqs, "after the alternation (table b)");
    // What the gateway holds: table b, and a route whose new version is invalid at the version
    // it had before (apply-valid keeps it), which `router`, brought through the same versions,
    // holds too and `rb`, built from nothing, does not.
    router.sync(&specs(&b), SyncMode::ApplyValid).unwrap();
    let held = router.len();
    *router = rb;
    println!("updates checked in {:.1?}", t.elapsed());
    held
}

/// A gateway made in `init_by_lua` (nginx's master, before it forks 2 workers): each worker
/// routes by the table applied in init, then builds the later versions on a builder thread of
/// its own (the first one started after the fork) and swaps them in.
#[test]
fn gateway_made_before_the_fork_builds_in_every_worker() {
    let Some(nginx) =
        nginx::required_or_skip("gateway_made_before_the_fork_builds_in_every_worker")
    else {
        return;
    };
    let dir = common::cpath_dir("nginx-fork");
    let lua = common::repo_root().join("lua");
    let u = |i: u32| format!("a8f2c1e4-0000-4000-8000-{i:012}");
    // Version 1: /one; version 2: /two (every id new); version 3: /three and /one again.
    let tables = [
        ("1", vec![(u(1), "/one")]),
        ("2", vec![(u(2), "/two")]),
        ("3", vec![(u(3), "/three"), (u(1), "/one")]),
    ];
    for (v, routes) in &tables {
        let tsv: String = routes
            .iter()
            .map(|(id, p)| format!("10\t{id}\thttp.path ^= \"{p}\"\n"))
            .collect();
        std::fs::write(dir.join(format!("routes-{v}.tsv")), tsv).unwrap();
    }
    let port = free_port();
    let conf = format!(
        r#"{head}
    lua_package_path "{lua}/?.lua;{lua}/t/?.lua;{share}/?.lua;;";
    lua_package_cpath "{dir}/?.so;;";
    lua_shared_dict versions 1m;
    init_by_lua_block {{ require("gateway_init").init("{dir}") }}
    init_worker_by_lua_block {{ require("gateway_init").init_worker() }}
    server {{
        listen 127.0.0.1:{port} reuseport;
        location = /set {{ content_by_lua_block {{ require("gateway_init").set() }} }}
        location / {{ content_by_lua_block {{ require("gateway_init").route() }} }}
    }}
}}
"#,
        dir = dir.display(),
        head = nginx::conf_head(&nginx, &dir, 2, "info"),
        lua = lua.display(),
        share = nginx.lua_share.display(),
    );
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let mut running = Running::start(&nginx, &dir, &conf_path);
    let get = |path: &str| -> Result<String, String> {
        let raw = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
        send(port, raw.as_bytes()).map(|r| String::from_utf8_lossy(&r.body).into_owned())
    };
    let started = Instant::now();
    while get("/one").is_err() {
        assert!(
            started.elapsed() < START_DEADLINE,
            "nginx did not answer:\n{}",
            running.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Until every worker answers `path` by `version` with `want`: each has built it itself.
    let until_all = |version: &str, path: &str, want: &str| {
        let until = Instant::now() + Duration::from_secs(120);
        let mut pids = std::collections::BTreeMap::new();
        loop {
            let body = get(path).expect("request");
            let parts: Vec<&str> = body.split_whitespace().collect();
            assert_eq!(parts.len(), 3, "{body}");
            if parts[1] == version {
                assert_eq!(
                    parts[2], want,
                    "version {version} answers {path} with its table"
                );
            }
            pids.insert(parts[0].to_string(), parts[1].to_string());
            if pids.len() >= 2 && pids.values().all(|v| v == version) {
                return pids;
            }
            assert!(
                Instant::now() < until,
                "not every worker reached version {version}: {pids:?}\n{}",
                running.logs()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    let before = until_all("1", "/one", &u(1));
    assert_eq!(before.len(), 2, "two workers answered");
    for (v, path, want) in [("2", "/two", u(2)), ("3", "/three", u(3))] {
        assert_eq!(
            get(&format!("/set?version={v}")).unwrap(),
            format!("version {v}\n")
        );
        let pids = until_all(v, path, &want);
        assert_eq!(
            pids.keys().collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>(),
            "the same workers (none crashed)"
        );
    }
    assert!(
        get("/two").unwrap().ends_with(" 3 -\n"),
        "version 3 has no /two"
    );
    running.stop();
    let logs = running.logs();
    nginx::assert_clean_logs(&logs);
    assert!(!logs.contains("gateway_init: version"), "{logs}");
    let _ = std::fs::remove_dir_all(&dir);
}
