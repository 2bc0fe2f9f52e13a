//! A gateway fed by a real etcd (`resty.router.etcd`, lua/t/etcd_gateway.lua): etcd started on
//! 127.0.0.1 with free ports in a temporary directory, nginx with 2 workers watching it
//! through a TCP relay the test can cut (etcd unreachable without stopping it) and a first
//! endpoint where nothing listens (endpoints are tried in turn).
//!
//! With `share`: 10,000 routes put in 10 transactions are loaded, and every worker routes
//! them at the revision of the last; exactly one worker watches; a put and a delete are routed
//! (every worker, at their revision); a transaction with a good put and five bad values (not
//! JSON, no priority, a key that is no UUID, an expression that does not parse, a value over
//! the size limit) applies the good put, logs every bad key with its reason, counts them, and
//! takes out the route whose new value is bad; etcd killed mid-way: the node keeps routing,
//! and once etcd is back the next put reaches it; a compaction while the watcher is cut off:
//! it reads the whole range again and converges. Without `share`: every worker watches on its
//! own and applies the same revisions. Under churn: two nodes (2 workers each, `share`)
//! through 1,000 puts and deletes at ~100 a second with etcd restarted half-way, every worker
//! at the last revision within 2 s and routing a sample as a fresh build of the prefix does.
//!
//! Needs nginx with the lua module and etcd (`apt-get install etcd-server etcd-client`);
//! without them the test prints a notice and passes, unless `ATC_REQUIRE_NGINX=1`.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::nginx::{self, free_port, send, Nginx, Response, Running};

const PREFIX: &str = "/atc/routes/";
const DEADLINE: Duration = Duration::from_secs(30);

fn uuid(i: usize) -> String {
    format!("a8f2c1e4-0000-4000-8000-{i:012x}")
}

fn b64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for k in 0..4 {
            if k <= c.len() {
                out.push(A[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn route_value(priority: u64, expression: &str) -> String {
    serde_json::json!({ "priority": priority, "expression": expression }).to_string()
}

/// etcd on 127.0.0.1 (client port `port`), its data in `dir`; killed when dropped.
struct Etcd {
    child: Option<Child>,
    dir: PathBuf,
    port: u16,
    peer: u16,
    /// With authentication enabled: the token of user root.
    token: Option<String>,
    /// With TLS: the port of the https listener (beside the plain one the test calls) and its
    /// certificate and key.
    tls: Option<(u16, PathBuf, PathBuf)>,
}

impl Etcd {
    fn start(dir: &Path) -> Etcd {
        Etcd::start_with(dir, None)
    }

    /// etcd that also listens for https on a port of its own, with `cert` and `key`.
    fn start_with(dir: &Path, tls: Option<(PathBuf, PathBuf)>) -> Etcd {
        let mut e = Etcd {
            child: None,
            dir: dir.to_path_buf(),
            port: free_port(),
            peer: free_port(),
            token: None,
            tls: tls.map(|(cert, key)| (free_port(), cert, key)),
        };
        e.spawn();
        e
    }

    fn spawn(&mut self) {
        let mut client = format!("http://127.0.0.1:{}", self.port);
        let mut tls_args = Vec::new();
        if let Some((port, cert, key)) = &self.tls {
            client = format!("{client},https://127.0.0.1:{port}");
            tls_args.extend(["--cert-file".into(), cert.clone().into_os_string()]);
            tls_args.extend(["--key-file".into(), key.clone().into_os_string()]);
        }
        let peer = format!("http://127.0.0.1:{}", self.peer);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("etcd.log"))
            .unwrap();
        let child = Command::new("etcd")
            .args(["--name", "t", "--data-dir"])
            .arg(self.dir.join("etcd-data"))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .arg(format!("--initial-cluster=t={peer}"))
            .args(&tls_args)
            .args([
                "--max-txn-ops",
                "1000",
                "--log-level",
                "warn",
                "--logger",
                "zap",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(20);
        while self.try_call("/v3/kv/range", r#"{"key":"AA=="}"#).is_err() {
            assert!(Instant::now() < until, "etcd did not start: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default()
    }

    /// POSTs `body` to etcd's JSON gateway: the answer's JSON, or why not.
    fn try_call(&self, path: &str, body: &str) -> Result<serde_json::Value, String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let auth = match &self.token {
            Some(t) => format!("Authorization: {t}\r\n"),
            None => String::new(),
        };
        let req = format!(
            "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             {auth}Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&buf);
        let (head, body) = text.split_once("\r\n\r\n").ok_or("no head")?;
        if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
            return Err(format!("{head}\n{body}"));
        }
        serde_json::from_str(body).map_err(|e| format!("{e}: {body}"))
    }

    fn call(&self, path: &str, body: &str) -> serde_json::Value {
        self.try_call(path, body)
            .unwrap_or_else(|e| panic!("etcd {path}: {e}"))
    }

    /// Puts `(key, value)` pairs in one transaction: the revision it made.
    fn txn(&self, puts: &[(String, String)], deletes: &[String]) -> u64 {
        let mut ops: Vec<serde_json::Value> = puts
            .iter()
            .map(|(k, v)| {
                serde_json::json!({ "requestPut": { "key": b64(k.as_bytes()),
                    "value": b64(v.as_bytes()) } })
            })
            .collect();
        ops.extend(
            deletes
                .iter()
                .map(|k| serde_json::json!({ "requestDeleteRange": { "key": b64(k.as_bytes()) } })),
        );
        let body = serde_json::json!({ "success": ops }).to_string();
        revision(&self.call("/v3/kv/txn", &body))
    }

    fn put(&self, key: &str, value: &str) -> u64 {
        self.txn(&[(key.to_owned(), value.to_owned())], &[])
    }

    fn delete(&self, key: &str) -> u64 {
        self.txn(&[], &[key.to_owned()])
    }

    /// Adds user root (password `pw`) and enables authentication; later calls send its token.
    fn enable_auth(&mut self) {
        for args in [
            &["user", "add", "root", "--new-user-password=pw"][..],
            &["user", "grant-role", "root", "root"][..],
            &["auth", "enable"][..],
        ] {
            let status = Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .arg(format!("--endpoints=http://127.0.0.1:{}", self.port))
                .args(args)
                .stdout(Stdio::null())
                .status()
                .expect("run etcdctl");
            assert!(status.success(), "etcdctl {args:?}");
        }
        let v = self.call(
            "/v3/auth/authenticate",
            r#"{"name":"root","password":"pw"}"#,
        );
        self.token = Some(v["token"].as_str().expect("a token").to_owned());
        // Without a token, etcd refuses.
        let anonymous = Etcd {
            child: None,
            dir: self.dir.clone(),
            port: self.port,
            peer: self.peer,
            token: None,
            tls: None,
        };
        assert!(anonymous
            .try_call("/v3/kv/range", r#"{"key":"AA=="}"#)
            .is_err());
    }

    fn compact(&self, revision: u64) {
        let status = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints=http://127.0.0.1:{}", self.port))
            .args(["compact", &revision.to_string()])
            .stdout(Stdio::null())
            .status()
            .expect("run etcdctl");
        assert!(status.success(), "etcdctl compact {revision}");
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}

fn revision(v: &serde_json::Value) -> u64 {
    v["header"]["revision"]
        .as_str()
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no revision in {v}"))
}

/// A TCP relay from a port of its own to `target`, which the test can cut: while cut, it
/// closes every connection it relays and every new one at once (etcd is unreachable).
struct Relay {
    port: u16,
    cut: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    fn start(target: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (c, cs) = (cut.clone(), conns.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if c.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                cs.lock().unwrap().push(client.try_clone().unwrap());
                cs.lock().unwrap().push(server.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(Shutdown::Both);
                        let _ = from.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Relay { port, cut, conns }
    }

    fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
        if cut {
            for s in self.conns.lock().unwrap().drain(..) {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}

/// A node's nginx.conf: 2 workers following `endpoints`; `trusted` is
/// `lua_ssl_trusted_certificate` (for https endpoints).
fn write_config(
    n: &Nginx,
    dir: &Path,
    port: u16,
    endpoints: &[String],
    share: bool,
    auth: bool,
    trusted: Option<&Path>,
) -> PathBuf {
    let lua = common::repo_root().join("lua");
    let eps: Vec<String> = endpoints.iter().map(|e| format!("{e:?}")).collect();
    let conf = format!(
        r#"{head}

    lua_package_path "{lua}/?.lua;{lua}/t/?.lua;{share_dir}/?.lua;;";
    lua_package_cpath "{dir}/?.so;;";
    lua_shared_dict atc_share 1m;
    {trust}

    init_worker_by_lua_block {{
        require("etcd_gateway").init_worker({{ {eps} }}, "{PREFIX}", {share}{auth})
    }}

    server {{
        listen 127.0.0.1:{port} reuseport;
        location = /__etcd {{ content_by_lua_block {{ require("etcd_gateway").status() }} }}
        location = /__metrics {{ content_by_lua_block {{ require("etcd_gateway").metrics() }} }}
        location / {{ access_by_lua_block {{ require("etcd_gateway").access() }} }}
    }}
}}
"#,
        head = nginx::conf_head(n, dir, 2, "info"),
        dir = dir.display(),
        lua = lua.display(),
        share_dir = n.lua_share.display(),
        eps = eps.join(", "),
        auth = if auth { r#", "root", "pw""# } else { "" },
        trust = trusted.map_or(String::new(), |p| format!(
            "lua_ssl_trusted_certificate {};\n    lua_ssl_verify_depth 2;",
            p.display()
        )),
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    path
}

fn get(port: u16, path: &str) -> Response {
    let raw = format!("GET {path} HTTP/1.0\r\nHost: gw.test\r\n\r\n");
    send(port, raw.as_bytes()).unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// Each worker's answer to `path`: pid -> (status, route, version), from enough connections
/// to reach both workers.
fn answers(port: u16, path: &str) -> BTreeMap<String, (u16, String, String)> {
    let mut at = BTreeMap::new();
    for _ in 0..32 {
        let r = get(port, path);
        at.insert(
            r.header("x-pid").to_owned(),
            (
                r.status,
                r.header("x-route").to_owned(),
                r.header("x-version").to_owned(),
            ),
        );
    }
    at
}

/// Waits until both workers answer `path` with `status` (and route `route` for a 200) at
/// revision `version` or later; returns how long it took.
fn converge(port: u16, path: &str, status: u16, route: &str, version: u64, nginx: &mut Running) {
    let started = Instant::now();
    loop {
        let at = answers(port, path);
        let ok = at.len() == 2
            && at.values().all(|(s, r, v)| {
                *s == status
                    && (status != 200 || r == route)
                    && v.parse::<u64>().is_ok_and(|v| v >= version)
            });
        if ok {
            return;
        }
        if let Ok(Some(code)) = nginx.child.try_wait() {
            panic!("nginx exited with {code}:\n{}", nginx.logs());
        }
        assert!(
            started.elapsed() < DEADLINE,
            "{path}: not {status} {route} at revision {version} on both workers: {at:?}\n{}",
            tail(&nginx.logs())
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until nginx answers on `port`.
fn wait_until_up(port: u16) {
    let started = Instant::now();
    while send(port, b"GET /__etcd HTTP/1.0\r\n\r\n").is_err() {
        assert!(started.elapsed() < DEADLINE, "nginx did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn tail(logs: &str) -> String {
    let lines: Vec<&str> = logs.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// The `/__etcd` line of each worker (pid -> line).
fn statuses(port: u16) -> BTreeMap<String, String> {
    let mut at = BTreeMap::new();
    for _ in 0..32 {
        let r = get(port, "/__etcd");
        let line = String::from_utf8_lossy(&r.body).trim().to_owned();
        let pid = line.split(' ').nth(1).unwrap_or("").to_owned();
        at.insert(pid, line);
    }
    at
}

fn field(line: &str, name: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    words
        .iter()
        .position(|w| *w == name)
        .map(|i| words[i + 1].to_owned())
        .unwrap_or_default()
}

fn tools() -> Option<Nginx> {
    let n = nginx::required_or_skip("nginx_etcd")?;
    let has_etcd = Command::new("etcd").arg("--version").output().is_ok()
        && Command::new("etcdctl").arg("version").output().is_ok();
    if !has_etcd {
        let why = "no etcd or etcdctl (apt-get install etcd-server etcd-client)";
        if std::env::var("ATC_REQUIRE_NGINX").as_deref() == Ok("1") {
            panic!("ATC_REQUIRE_NGINX=1 but {why}");
        }
        println!("SKIPPED nginx_etcd: {why} (set ATC_REQUIRE_NGINX=1 to require it)");
        return None;
    }
    Some(n)
}

const ROUTES: usize = 10_000;

fn path_of(i: usize) -> String {
    format!("/r{i}/")
}

/// Puts routes 0..n in transactions of 1,000: the last revision.
fn put_routes(etcd: &Etcd, n: usize) -> u64 {
    let mut rev = 0;
    for first in (0..n).step_by(1000) {
        let puts: Vec<(String, String)> = (first..(first + 1000).min(n))
            .map(|i| {
                (
                    format!("{PREFIX}{}", uuid(i)),
                    route_value(100, &format!(r#"http.path ^= "{}""#, path_of(i))),
                )
            })
            .collect();
        rev = etcd.txn(&puts, &[]);
    }
    rev
}

#[test]
fn a_node_with_share_follows_etcd() {
    let Some(n) = tools() else { return };
    let dir = common::cpath_dir("nginx-etcd-share");
    let mut etcd = Etcd::start(&dir);
    let relay = Relay::start(etcd.port);
    put_routes(&etcd, ROUTES);
    // Keys beside the prefix are not routes and not read (the revision they make is the one
    // the range is read at).
    let rev = etcd.put("/atc/other/x", "not a route");

    let port = free_port();
    let endpoints = [
        format!("http://127.0.0.1:{}", free_port()), // nothing listens: the next is tried
        format!("http://127.0.0.1:{}", relay.port),
    ];
    let conf = write_config(&n, &dir, port, &endpoints, true, false, None);
    let started = Instant::now();
    let mut nginx = Running::start(&n, &dir, &conf);
    wait_until_up(port);

    // The whole range, loaded: every worker routes the last route at the last revision.
    let last = ROUTES - 1;
    converge(
        port,
        &format!("{}x", path_of(last)),
        200,
        &uuid(last),
        rev,
        &mut nginx,
    );
    println!(
        "{ROUTES} routes loaded and routed by both workers {:?} after nginx started",
        started.elapsed()
    );
    for i in (0..ROUTES).step_by(997) {
        let at = answers(port, &format!("{}y", path_of(i)));
        assert!(
            at.values().all(|(s, r, _)| *s == 200 && *r == uuid(i)),
            "route {i}: {at:?}"
        );
    }
    // One worker watches for the node; both report the revision.
    let s = statuses(port);
    assert_eq!(s.len(), 2, "{s:?}");
    assert_eq!(
        s.values().filter(|l| field(l, "watching") == "1").count(),
        1,
        "{s:?}"
    );
    assert!(
        s.values().all(|l| field(l, "version") == rev.to_string()),
        "{s:?}"
    );
    assert!(
        s.values().all(|l| field(l, "routes") == ROUTES.to_string()),
        "{s:?}"
    );

    // A put, then a delete, routed by both workers at their revisions.
    let put_at = Instant::now();
    let r1 = etcd.put(
        &format!("{PREFIX}{}", uuid(100_000)),
        &route_value(200, r#"http.path ^= "/new/""#),
    );
    converge(port, "/new/x", 200, &uuid(100_000), r1, &mut nginx);
    println!("put -> routed by both workers: {:?}", put_at.elapsed());
    let r2 = etcd.delete(&format!("{PREFIX}{}", uuid(5)));
    converge(port, "/r5/x", 404, "", r2, &mut nginx);

    // One transaction: a good put and bad values. The good one applies; each bad key is
    // logged with its reason and counted; route 7, whose new value is bad, is taken out.
    let big = route_value(1, &format!(r#"http.path == "{}""#, "x".repeat(5000)));
    let bad = [
        (format!("{PREFIX}{}", uuid(200_001)), "{not json".to_owned()),
        (
            format!("{PREFIX}{}", uuid(200_002)),
            r#"{"expression":"http.path ^= \"/np/\""}"#.to_owned(),
        ),
        (
            format!("{PREFIX}not-a-uuid"),
            route_value(1, r#"http.path ^= "/nu/""#),
        ),
        (
            format!("{PREFIX}{}", uuid(7)),
            route_value(1, r#"http.path ^= "#),
        ),
        (format!("{PREFIX}{}", uuid(200_004)), big),
    ];
    let mut puts = vec![(
        format!("{PREFIX}{}", uuid(200_000)),
        route_value(1, r#"http.path ^= "/good/""#),
    )];
    puts.extend(bad.iter().cloned());
    let r3 = etcd.txn(&puts, &[]);
    converge(port, "/good/x", 200, &uuid(200_000), r3, &mut nginx);
    converge(port, "/r7/x", 404, "", r3, &mut nginx);
    let logs = nginx.logs();
    for (key, reason) in [
        (&bad[0].0, "is not JSON"),
        (&bad[1].0, "`priority` must be an integer"),
        (&bad[2].0, "is not a UUID"),
        (&bad[3].0, "the expression is invalid"),
        (&bad[4].0, "more than max_value_bytes"),
    ] {
        let line = format!("key {key} at revision {r3} left out: ");
        let hit = logs.lines().find(|l| l.contains(&line));
        assert!(
            hit.is_some_and(|l| l.contains(reason)),
            "no log line {line:?} ... {reason:?}: {hit:?}"
        );
    }
    let s = statuses(port);
    let watcher = s
        .values()
        .find(|l| field(l, "watching") == "1")
        .unwrap()
        .clone();
    assert_eq!(field(&watcher, "refused"), "5", "{watcher}");
    // The watcher's metrics (a scrape reaches either worker).
    let until = Instant::now() + DEADLINE;
    let metrics = loop {
        let text = String::from_utf8_lossy(&get(port, "/__metrics").body).into_owned();
        let watching = |l: &str| l.starts_with("atc_router_etcd_watching{") && l.ends_with(" 1");
        if text.lines().any(watching) {
            break text;
        }
        assert!(Instant::now() < until, "no scrape reached the watcher");
    };
    for want in [
        "result=\"refused\"} 5",
        "atc_router_etcd_connected{",
        "atc_router_etcd_last_apply_seconds{",
    ] {
        assert!(metrics.contains(want), "metrics lack {want:?}:\n{metrics}");
    }
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("atc_router_etcd_revision{") && l.ends_with(&format!(" {r3}"))),
        "{metrics}"
    );

    // etcd killed: the node keeps routing; back, the next put reaches it.
    etcd.kill();
    std::thread::sleep(Duration::from_millis(500));
    let at = answers(port, "/r1/x");
    assert!(
        at.values().all(|(s, r, _)| *s == 200 && *r == uuid(1)),
        "routing without etcd: {at:?}"
    );
    etcd.spawn();
    let r4 = etcd.put(
        &format!("{PREFIX}{}", uuid(300_000)),
        &route_value(1, r#"http.path ^= "/back/""#),
    );
    converge(port, "/back/x", 200, &uuid(300_000), r4, &mut nginx);
    // Nothing lost, nothing repeated: the earlier changes still hold.
    converge(port, "/r5/x", 404, "", r4, &mut nginx);
    converge(port, "/new/x", 200, &uuid(100_000), r4, &mut nginx);

    // Cut off from etcd while it changes and compacts: the watch cannot resume, so the whole
    // range is read again, and the node converges to it.
    relay.set_cut(true);
    std::thread::sleep(Duration::from_millis(300));
    let r5 = etcd.put(
        &format!("{PREFIX}{}", uuid(400_000)),
        &route_value(1, r#"http.path ^= "/compacted/""#),
    );
    let r6 = etcd.delete(&format!("{PREFIX}{}", uuid(8)));
    assert!(r6 > r5);
    etcd.compact(r6);
    relay.set_cut(false);
    converge(port, "/compacted/x", 200, &uuid(400_000), r6, &mut nginx);
    converge(port, "/r8/x", 404, "", r6, &mut nginx);
    converge(port, "/r9/x", 200, &uuid(9), r6, &mut nginx);
    let s = statuses(port);
    let watcher = s
        .values()
        .find(|l| field(l, "watching") == "1")
        .unwrap()
        .clone();
    assert!(
        field(&watcher, "loads").parse::<u32>().unwrap() >= 2,
        "{watcher}"
    );
    let logs = nginx.logs();
    assert!(logs.contains("compacted at revision"), "{}", tail(&logs));
    assert!(logs.contains(&endpoints[0]), "the first endpoint was tried");
    println!("watcher: {watcher}");

    nginx.stop();
    nginx::assert_clean_logs(&nginx.logs());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Also: etcd with authentication, the watchers logged in as user root.
#[test]
fn without_share_every_worker_watches() {
    let Some(n) = tools() else { return };
    let dir = common::cpath_dir("nginx-etcd-own");
    let mut etcd = Etcd::start(&dir);
    etcd.enable_auth();
    let rev = put_routes(&etcd, 200);
    let port = free_port();
    let endpoints = [format!("http://127.0.0.1:{}", etcd.port)];
    let conf = write_config(&n, &dir, port, &endpoints, false, true, None);
    let mut nginx = Running::start(&n, &dir, &conf);
    wait_until_up(port);
    converge(port, "/r199/x", 200, &uuid(199), rev, &mut nginx);
    let r1 = etcd.put(
        &format!("{PREFIX}{}", uuid(1)),
        &route_value(1, r#"http.path ^= "/moved/""#),
    );
    converge(port, "/moved/x", 200, &uuid(1), r1, &mut nginx);
    converge(port, "/r1/x", 404, "", r1, &mut nginx);
    // Each worker watches on its own connection and applied each event once (the 200 routes
    // loaded, the put). Waited for: a worker that lost its connection under load reconnects.
    let until = Instant::now() + DEADLINE;
    loop {
        let s = statuses(port);
        let ok = s.len() == 2
            && s.values().all(|l| {
                field(l, "watching") == "1"
                    && field(l, "connected") == "1"
                    && field(l, "applied") == "201"
            });
        if ok {
            break;
        }
        assert!(Instant::now() < until, "{s:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    nginx.stop();
    nginx::assert_clean_logs(&nginx.logs());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A self-signed certificate for 127.0.0.1 (its own issuer) and its key, made with openssl in
/// `dir` as `<name>.pem` and `<name>.key`; None without openssl.
fn self_signed(dir: &Path, name: &str) -> Option<(PathBuf, PathBuf)> {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=127.0.0.1"])
        .args(["-addext", "subjectAltName=DNS:127.0.0.1,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match made {
        Ok(s) if s.success() => Some((cert, key)),
        _ if std::env::var_os("ATC_REQUIRE_NGINX").is_some() => panic!("openssl req failed"),
        _ => None,
    }
}

/// TLS to etcd: a node whose `lua_ssl_trusted_certificate` holds etcd's certificate follows
/// it over https (verified: `ssl_verify` defaults to true); a node trusting another
/// certificate refuses the handshake, logs why, and routes nothing.
#[test]
fn a_node_follows_etcd_over_verified_tls() {
    let Some(n) = tools() else { return };
    let dir = common::cpath_dir("nginx-etcd-tls");
    let Some((cert, key)) = self_signed(&dir, "etcd") else {
        return;
    };
    let Some((other, _)) = self_signed(&dir, "other") else {
        return;
    };
    let etcd = Etcd::start_with(&dir, Some((cert.clone(), key)));
    let tls_port = etcd.tls.as_ref().unwrap().0;
    let rev = put_routes(&etcd, 100);
    let endpoints = [format!("https://127.0.0.1:{tls_port}")];

    let port = free_port();
    let conf = write_config(&n, &dir, port, &endpoints, true, false, Some(&cert));
    let mut nginx = Running::start(&n, &dir, &conf);
    wait_until_up(port);
    converge(port, "/r99/x", 200, &uuid(99), rev, &mut nginx);
    let r = etcd.put(
        &format!("{PREFIX}{}", uuid(7)),
        &route_value(7, r#"http.path ^= "/over-tls/""#),
    );
    converge(port, "/over-tls/x", 200, &uuid(7), r, &mut nginx);
    let watching = format!("on https://127.0.0.1:{tls_port} from revision");
    assert!(nginx.logs().contains(&watching), "{}", tail(&nginx.logs()));
    nginx.stop();
    nginx::assert_clean_logs(&nginx.logs());

    let dir2 = common::cpath_dir("nginx-etcd-tls-untrusted");
    let port2 = free_port();
    let conf2 = write_config(&n, &dir2, port2, &endpoints, true, false, Some(&other));
    let mut refused = Running::start(&n, &dir2, &conf2);
    let until = Instant::now() + DEADLINE;
    loop {
        let logs = refused.logs();
        if logs.contains("TLS handshake with") {
            break;
        }
        assert!(
            Instant::now() < until,
            "no handshake failure logged:\n{}",
            tail(&logs)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = get(port2, "/r99/x");
    assert_eq!((r.status, r.header("x-version")), (404, "nil"));
    refused.stop();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
}

/// Issue #49 item 6: two nodes (2 workers each, with `share`) fed by one etcd (1,000 routes
/// to start with) through 1,000
/// puts and deletes at ~100 a second (new routes, changed expressions and priorities,
/// deletes), etcd stopped and started half-way. Within 2 s of the last change every worker of
/// both nodes is at its revision, and both route a sample of requests as a router built
/// afresh from the final table (the core's `Router`, in this test) does.
#[test]
fn two_nodes_converge_on_the_last_revision_under_churn() {
    use atc_router::{Context, Router, Uuid};
    use std::collections::BTreeSet;

    const INITIAL: usize = 10_000;
    const CHANGES: usize = 1_000;
    let Some(n) = tools() else { return };
    let dirs = [
        common::cpath_dir("nginx-etcd-churn-a"),
        common::cpath_dir("nginx-etcd-churn-b"),
    ];
    let mut etcd = Etcd::start(&dirs[0]);
    let expr_of = |i: usize| format!(r#"http.path ^= "{}""#, path_of(i));
    // What the prefix holds: id -> (priority, expression), 10,000 to start with. A build of
    // one change at that size takes a debug library on two shared CPUs longer than the 10 ms
    // between two puts: the watcher keeps up by applying the answers that queued up meanwhile
    // as one change.
    let mut table: BTreeMap<usize, (u64, String)> =
        (0..INITIAL).map(|i| (i, (100, expr_of(i)))).collect();
    let mut rev = put_routes(&etcd, INITIAL);

    let endpoints = [format!("http://127.0.0.1:{}", etcd.port)];
    let ports = [free_port(), free_port()];
    let mut nodes: Vec<Running> = dirs
        .iter()
        .zip(ports)
        .map(|(dir, port)| {
            let conf = write_config(&n, dir, port, &endpoints, true, false, None);
            Running::start(&n, dir, &conf)
        })
        .collect();
    for port in ports {
        wait_until_up(port);
    }
    for (node, port) in nodes.iter_mut().zip(ports) {
        let last = INITIAL - 1;
        let path = format!("{}x", path_of(last));
        converge(port, &path, 200, &uuid(last), rev, node);
    }

    // The changes, drawn from a fixed LCG: 40% new routes, 35% changed ones, 25% deletes.
    let mut seed: u64 = 0x49_0006;
    let mut rand = move |m: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % m
    };
    let mut next_id = 50_000;
    let mut deleted: BTreeSet<usize> = BTreeSet::new();
    let new_expr = |rand: &mut dyn FnMut(usize) -> usize, next: usize| match rand(3) {
        // Onto an initial route's path: overlaps, priority decides.
        0 => format!(r#"http.path ^= "{}""#, path_of(rand(INITIAL))),
        1 => format!(r#"http.path == "{}x""#, path_of(rand(INITIAL))),
        _ => format!(r#"http.path ^= "/n{next}/""#),
    };
    let churn_started = Instant::now();
    let mut restart = Duration::ZERO;
    for k in 0..CHANGES {
        if k == CHANGES / 2 {
            let t = Instant::now();
            etcd.kill();
            std::thread::sleep(Duration::from_millis(300));
            etcd.spawn();
            restart = t.elapsed();
        }
        // ~100 a second: change k is due 10 ms after change k-1 (the restart aside).
        let due = churn_started + restart + Duration::from_millis(10 * k as u64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let kind = rand(100);
        if kind < 40 || table.is_empty() {
            let id = next_id;
            next_id += 1;
            let v = (1 + rand(300) as u64, new_expr(&mut rand, id));
            rev = etcd.put(&format!("{PREFIX}{}", uuid(id)), &route_value(v.0, &v.1));
            table.insert(id, v);
        } else {
            let ids: Vec<usize> = table.keys().copied().collect();
            let id = ids[rand(ids.len())];
            if kind < 75 {
                let v = (1 + rand(300) as u64, new_expr(&mut rand, id));
                rev = etcd.put(&format!("{PREFIX}{}", uuid(id)), &route_value(v.0, &v.1));
                table.insert(id, v);
            } else {
                rev = etcd.delete(&format!("{PREFIX}{}", uuid(id)));
                table.remove(&id);
                deleted.insert(id);
            }
        }
    }
    let last_change = Instant::now();
    println!(
        "{CHANGES} changes in {:?} (etcd restart {restart:?}), last revision {rev}, {} routes",
        churn_started.elapsed(),
        table.len()
    );

    // Every worker of both nodes at the last revision. Polled lightly (a few requests every
    // 10 ms, each worker's latest line kept: a version only grows) so as not to take the CPU
    // the workers apply with.
    let mut seen: [BTreeMap<String, String>; 2] = Default::default();
    let mut reached = [None, None];
    loop {
        for (i, port) in ports.iter().enumerate() {
            if reached[i].is_some() {
                continue;
            }
            for _ in 0..3 {
                let line = String::from_utf8_lossy(&get(*port, "/__etcd").body)
                    .trim()
                    .to_owned();
                seen[i].insert(field(&line, "pid"), line);
            }
            if seen[i].len() == 2
                && seen[i]
                    .values()
                    .all(|l| field(l, "version") == rev.to_string())
            {
                reached[i] = Some(last_change.elapsed());
            }
        }
        if reached.iter().all(Option::is_some) {
            break;
        }
        for node in nodes.iter_mut() {
            if let Ok(Some(code)) = node.child.try_wait() {
                panic!("nginx exited with {code}:\n{}", tail(&node.logs()));
            }
        }
        assert!(
            last_change.elapsed() < Duration::from_secs(2),
            "not at revision {rev} within 2 s of the last change: {seen:?}\n{}\n{}",
            tail(&nodes[0].logs()),
            tail(&nodes[1].logs())
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let watchers: Vec<String> = seen
        .iter()
        .flat_map(|s| s.values().filter(|l| field(l, "watching") == "1"))
        .map(|l| {
            let f = |k| field(l, k);
            format!(
                "max_apply {} s, {} responses in {} changes",
                f("max_apply"),
                f("responses"),
                f("changes")
            )
        })
        .collect();
    println!(
        "last change -> every worker at revision {rev}: node a {:?}, node b {:?} \
         (watchers: {watchers:?})",
        reached[0].unwrap(),
        reached[1].unwrap()
    );
    // Every worker (as many connections as it takes to reach both) agrees.
    for port in ports {
        let s = statuses(port);
        assert!(
            s.len() == 2 && s.values().all(|l| field(l, "version") == rev.to_string()),
            "{s:?}"
        );
    }

    // A fresh build of the final table, and what it answers to a sample of requests.
    let schema = Arc::new(atc_router::request::http_schema());
    let mut router = Router::new(schema.clone());
    for (id, (priority, expression)) in &table {
        router
            .add(Uuid::parse_str(&uuid(*id)).unwrap(), *priority, expression)
            .unwrap_or_else(|e| panic!("route {id} {expression:?}: {e}"));
    }
    // One request per sampled live route, one its own expression matches (it or another
    // route wins); one per sampled deleted route, on its first path.
    let step = (table.len() / 250).max(1);
    let mut owners: Vec<String> = table.keys().step_by(step).map(|id| uuid(*id)).collect();
    let mut paths: Vec<String> = table
        .values()
        .step_by(step)
        .map(|(_, e)| {
            let quoted = e.split('"').nth(1).unwrap();
            match e.contains("==") {
                true => quoted.to_owned(),
                false => format!("{quoted}x"),
            }
        })
        .collect();
    paths.extend(
        deleted
            .iter()
            .step_by((deleted.len() / 100).max(1))
            .map(|id| match *id {
                id if id < INITIAL => format!("{}y", path_of(id)),
                id => format!("/n{id}/y"),
            }),
    );
    paths.push("/nothing/".to_owned());
    owners.resize(paths.len(), String::new());
    let expected: Vec<String> = paths
        .iter()
        .map(|p| {
            let mut c = Context::new(schema.clone());
            c.add_value("http.path", p.as_str()).unwrap();
            match router.execute(&mut c) {
                true => c.result().unwrap().id().to_string(),
                false => String::new(),
            }
        })
        .collect();
    let hits = expected.iter().filter(|e| !e.is_empty()).count();
    // Requests a route other than the one they were made for wins (priority, overlaps).
    let contested = expected
        .iter()
        .zip(&owners)
        .filter(|(e, o)| !o.is_empty() && e != o)
        .count();
    assert!(contested > 10, "{contested} contested requests");
    assert!(
        hits > paths.len() / 2 && hits < paths.len(),
        "{hits} of {}",
        paths.len()
    );
    for port in ports {
        for (path, want) in paths.iter().zip(&expected) {
            let r = get(port, path);
            let got = r.header("x-route").to_lowercase();
            assert_eq!(
                (r.status, got.as_str(), r.header("x-version")),
                (
                    if want.is_empty() { 404 } else { 200 },
                    want.as_str(),
                    rev.to_string().as_str()
                ),
                "{path} on :{port}"
            );
        }
    }
    println!(
        "{} requests ({hits} routed, {contested} won by another route than the one they \
         were made for) answered by both nodes as a fresh build does",
        paths.len()
    );

    for node in nodes.iter_mut() {
        node.stop();
        nginx::assert_clean_logs(&node.logs());
    }
    drop(etcd);
    for dir in dirs {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
