//! One table per node, in a real nginx with 4 workers started as root with unprivileged
//! workers (when the tests run as root): `resty.router.gateway` with `share = "atc_share"`
//! (lua/t/share.lua). Every worker must answer from the shared image (never from a table of its
//! own), and answer right; exactly one worker builds; the image is sealed memory, which no one
//! can truncate or rewrite, and no file; a push (and a burst of them) reaches every worker and
//! leaves one image on the node; a corrupt image announced as a new version is refused by every
//! worker, which builds its own table of it; when the builder is killed, the next version is
//! built by another worker once the dead one's claim expires; a worker that respawns maps the
//! image from another worker when its builder is gone, and builds its own when no worker's
//! image can be reached.
//!
//! Needs nginx with the lua module; without it the test prints a notice and passes, unless
//! `ATC_REQUIRE_NGINX=1` (see `common/nginx.rs`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::nginx::{self, free_port, send, Nginx, Response, Running};

const ROUTES: usize = 3_000;
const DEADLINE: Duration = Duration::from_secs(300);

fn write_config(n: &Nginx, dir: &Path, port: u16) -> std::path::PathBuf {
    write_config_with(n, dir, port, "")
}

/// `write_config` with more arguments to the workers' `share.init_worker`.
fn write_config_with(n: &Nginx, dir: &Path, port: u16, more: &str) -> std::path::PathBuf {
    let lua = common::repo_root().join("lua");
    let conf = format!(
        r#"{head}

    lua_package_path "{lua}/?.lua;{lua}/t/?.lua;{share}/?.lua;;";
    lua_package_cpath "{dir}/?.so;;";
    lua_shared_dict atc_share 1m;
    lua_shared_dict atc_test 64k;

    init_worker_by_lua_block {{ require("share").init_worker("{dir}", "routes1.tsv"{more}) }}

    server {{
        # reuseport: a socket per worker, so that new connections reach every worker.
        listen 127.0.0.1:{port} reuseport;
        location = /__share {{ content_by_lua_block {{ require("share").status() }} }}
        location = /__push {{ content_by_lua_block {{ require("share").push() }} }}
        location = /__corrupt {{ content_by_lua_block {{ require("share").corrupt() }} }}
        location = /__forget {{ content_by_lua_block {{ require("share").forget() }} }}
        location = /__metrics {{ content_by_lua_block {{ require("share").metrics() }} }}
        location / {{
            access_by_lua_block {{ require("share").access() }}
        }}
    }}
}}
"#,
        dir = dir.display(),
        more = more,
        head = nginx::conf_head(n, dir, 4, "info"),
        lua = lua.display(),
        share = n.lua_share.display(),
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    path
}

fn uuid(i: usize) -> String {
    format!("a8f2c1e4-0000-4000-8000-{i:012x}")
}

/// The tenant header route `i` also requires, if any: a field no split of the index keys on,
/// read only for requests whose candidates need it (two-phase matching from the image).
fn tenant(i: usize) -> Option<String> {
    (!i.is_multiple_of(10) && i % 7 == 3).then(|| format!("t{}", i % 5))
}

/// Version 1: route `i` is host `h<i % 50>.test` and prefix `/p<i>/`; every 10th also a
/// capturing regex; some also a tenant header (`tenant`). Version 2 moves every third route to
/// `/q<i>/`.
fn routes(version: u32) -> String {
    let mut out = String::new();
    for i in 0..ROUTES {
        let prefix = if version == 2 && i % 3 == 0 { "q" } else { "p" };
        let expr = if let Some(t) = tenant(i) {
            format!(
                r#"http.host == "h{}.test" && http.path ^= "/{prefix}{i}/" && http.headers.x_tenant == "{t}""#,
                i % 50
            )
        } else if i % 10 == 0 {
            format!(
                r##"http.host == "h{}.test" && http.path ~ r#"^/{prefix}{i}/(?<id>\d+)$"#"##,
                i % 50
            )
        } else {
            format!(
                r#"http.host == "h{}.test" && http.path ^= "/{prefix}{i}/""#,
                i % 50
            )
        };
        out.push_str(&format!("{}\t{}\t{expr}\n", i + 1, uuid(i)));
    }
    out
}

fn get(port: u16, host: &str, path: &str) -> Response {
    get_with(port, host, path, "")
}

/// `get` with `extra` header lines (each ending in CRLF).
fn get_with(port: u16, host: &str, path: &str, extra: &str) -> Response {
    let raw = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n{extra}\r\n");
    send(port, raw.as_bytes()).unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// Sends requests until every one of `workers` worker pids has answered version `version`
/// from the shared image (or the deadline passes); returns the pids seen.
fn wait_for_version(port: u16, version: &str, running: &mut Running) -> BTreeSet<String> {
    let started = Instant::now();
    loop {
        let mut at: BTreeMap<String, bool> = BTreeMap::new();
        for k in 0..64 {
            let r = get(port, "h1.test", &format!("/p1/{k}"));
            let ok = r.header("x-version") == version && r.header("x-shared") == "1";
            *at.entry(r.header("x-pid").to_owned()).or_insert(true) &= ok;
        }
        if at.len() == 4 && at.values().all(|ok| *ok) {
            return at.into_keys().collect();
        }
        if let Ok(Some(code)) = running.child.try_wait() {
            panic!("nginx exited with {code}:\n{}", running.logs());
        }
        assert!(
            started.elapsed() < DEADLINE,
            "not every worker reached version {version} from the image: {at:?}\n{}",
            running.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every route answers its requests from every worker that gets them (many connections).
fn check_routing(port: u16, version: u32) {
    for i in (0..ROUTES).step_by(37) {
        let moved = version == 2 && i % 3 == 0;
        let prefix = if moved { "q" } else { "p" };
        let host = format!("h{}.test", i % 50);
        let path = format!("/{prefix}{i}/42");
        let extra = match tenant(i) {
            Some(t) => {
                // Without its tenant, or with another, the route does not match.
                let r = get(port, &host, &path);
                assert_eq!(r.status, 404, "route {i} v{version} without its tenant");
                let r = get_with(port, &host, &path, "X-Tenant: other\r\n");
                assert_eq!(r.status, 404, "route {i} v{version} with another tenant");
                format!("X-Tenant: {t}\r\n")
            }
            None => String::new(),
        };
        let r = get_with(port, &host, &path, &extra);
        assert_eq!(r.status, 200, "route {i} v{version}");
        assert_eq!(r.header("x-route"), uuid(i), "route {i} v{version}");
        assert_eq!(r.header("x-shared"), "1");
        let capture = if i % 10 == 0 { "42" } else { "-" };
        assert_eq!(r.header("x-capture"), capture, "route {i} v{version}");
        if moved {
            // The old path is gone in version 2 (a 404 on the busy host).
            let r = get(port, &host, &format!("/p{i}/42"));
            assert_eq!(r.status, 404, "route {i} still at its old path");
        }
    }
}

/// Image files under `dir` (a shared table leaves none).
fn images(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".atcimg") && n != "corrupt.atcimg")
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The sealed images the workers `pids` hold: (descriptor path, inode) of every descriptor
/// that is one.
fn sealed_images(pids: &BTreeSet<String>) -> Vec<(String, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.filter_map(|e| e.ok()) {
            let link = std::fs::read_link(fd.path()).unwrap_or_default();
            if link.to_string_lossy().starts_with("/memfd:atc-") {
                if let Ok(m) = std::fs::metadata(fd.path()) {
                    out.push((fd.path().display().to_string(), m.ino()));
                }
            }
        }
    }
    out
}

/// How many distinct images the workers hold, waiting (up to 30 s) for it to come down to
/// `n`: each worker lets the replaced image go when it switches. Requests keep going to every
/// worker meanwhile, as on a gateway in service: a worker that serves nothing has no turn to
/// let go of what it replaced.
fn settle_to(port: u16, pids: &BTreeSet<String>, n: usize) -> usize {
    let distinct = || {
        sealed_images(pids)
            .into_iter()
            .map(|(_, ino)| ino)
            .collect::<BTreeSet<_>>()
            .len()
    };
    let until = Instant::now() + Duration::from_secs(30);
    while distinct() != n && Instant::now() < until {
        statuses(port);
        std::thread::sleep(Duration::from_millis(50));
    }
    distinct()
}

/// The log once it holds `n` lines with `what` (waiting up to 10 s: a worker logs as it
/// gets to it, not before the others answer).
fn logs_with(running: &Running, what: &str, n: usize) -> String {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let logs = running.logs();
        if logs.matches(what).count() >= n || Instant::now() >= until {
            return logs;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn statuses(port: u16) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for _ in 0..64 {
        let r = get(port, "h1.test", "/__share");
        let body = String::from_utf8_lossy(&r.body).into_owned();
        let pid = body.split_whitespace().nth(1).unwrap_or("?").to_owned();
        out.insert(pid, body.trim().to_owned());
    }
    out
}

#[test]
fn four_workers_route_from_one_shared_table() {
    let Some(nginx) = nginx::required_or_skip("four_workers_route_from_one_shared_table") else {
        return;
    };
    let dir = common::cpath_dir("nginx-share");
    std::fs::write(dir.join("routes1.tsv"), routes(1)).unwrap();
    std::fs::write(dir.join("routes2.tsv"), routes(2)).unwrap();
    let port = free_port();
    let conf = write_config(&nginx, &dir, port);
    let mut running = Running::start(&nginx, &dir, &conf);

    // Version 1, built once, answered from the image by all four workers.
    wait_for_an_answer(port, &running);
    let pids = wait_for_version(port, "1", &mut running);
    check_routing(port, 1);
    if effective_uid() == 0 {
        for pid in &pids {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            assert!(
                !status.contains("Uid:\t0\t"),
                "the workers run unprivileged: {status}"
            );
        }
    }
    // One worker builds; no worker holds a table of its own (the builder's copy is its
    // builder thread's, for the next build).
    let builders = |port| {
        let s = statuses(port);
        assert!(
            s.values().all(|s| s.contains(" own_routes 0 ")),
            "a worker holds its own table: {s:?}"
        );
        s.values().filter(|s| s.contains(" builder 1 ")).count()
    };
    assert_eq!(builders(port), 1, "one worker builds: {:?}", statuses(port));
    // The workers' stats see the shared table and count the requests routed from it.
    let s = statuses(port);
    assert!(
        s.values()
            .all(|s| s.contains(&format!(" routes {ROUTES} "))),
        "{s:?}"
    );
    let routed: u64 = s.values().map(|s| count(s, "routed")).sum();
    let not_found: u64 = s.values().map(|s| count(s, "not_found")).sum();
    assert!(routed > 0 && not_found > 0, "counted: {s:?}");
    // Every worker reports the node's counts: the sum of all four (reported every second).
    std::thread::sleep(Duration::from_millis(1500));
    let s = statuses(port);
    let routed: u64 = s.values().map(|s| count(s, "routed")).sum();
    for status in s.values() {
        assert_eq!(count(status, "node_workers"), 4, "{s:?}");
        assert_eq!(count(status, "node_routed"), routed, "{s:?}");
    }
    let r = get(port, "h1.test", "/__metrics");
    let text = String::from_utf8_lossy(&r.body);
    let node_routed = text
        .lines()
        .find(|l| l.starts_with("atc_router_node_requests_total{") && l.contains("\"routed\""))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse::<u64>().ok());
    assert_eq!(node_routed, Some(routed), "{text}");
    assert!(text.contains("atc_router_node_workers{"), "{text}");
    // Every worker explains from the shared table: the winner it routes to, and for a 404 on
    // a busy host the candidates and the predicate that failed each.
    for _ in 0..16 {
        let r = get_with(port, "h1.test", "/p1/42", "X-Explain: 1\r\n");
        assert_eq!(r.header("x-explain-error"), "", "{:?}", r.headers);
        assert_eq!(r.header("x-explain-winner"), r.header("x-route"));
        let r = get_with(port, "h1.test", "/p1x", "X-Explain: 1\r\n");
        assert_eq!(r.status, 404);
        assert_eq!(r.header("x-explain-winner"), "none", "{:?}", r.headers);
    }
    let r = get_with(port, "h1.test", "/p51/7", "X-Explain: 1\r\n");
    assert_eq!(r.header("x-explain-winner"), uuid(51), "{:?}", r.headers);
    // One image on the node, held by every worker, sealed in memory: no file anywhere.
    let held = sealed_images(&pids);
    assert!(held.len() >= 4, "every worker holds the image: {held:?}");
    assert_eq!(settle_to(port, &pids, 1), 1, "one image: {held:?}");
    assert_eq!(images(&dir), Vec::<String>::new());
    assert!(!running.logs().contains("Permission denied"));

    // No one can change it: truncating, rewriting or growing any worker's image is refused
    // by the kernel (as root too), and every worker goes on routing.
    for (path, _) in &held {
        let f = std::fs::OpenOptions::new().write(true).open(path);
        let Ok(mut f) = f else { continue };
        assert!(f.set_len(0).is_err(), "{path} truncated");
        assert!(f.set_len(1 << 30).is_err(), "{path} grown");
        assert!(
            std::io::Write::write_all(&mut f, b"junk").is_err(),
            "{path} written"
        );
    }
    check_routing(port, 1);
    assert_eq!(
        wait_for_version(port, "1", &mut running),
        pids,
        "no worker restarted"
    );

    // A push reaches every worker; the old image goes once every worker has switched.
    let r = get(port, "h1.test", "/__push?v=2&file=routes2.tsv");
    assert_eq!(r.status, 200);
    assert_eq!(
        wait_for_version(port, "2", &mut running),
        pids,
        "the same workers"
    );
    check_routing(port, 2);
    assert_eq!(builders(port), 1, "still one builder: {:?}", statuses(port));
    assert_eq!(settle_to(port, &pids, 1), 1, "the replaced image freed");

    // A burst of pushes: versions superseded before a worker mapped them are skipped
    // quietly, and the node is left with one image.
    for v in 10..20 {
        let file = if v % 2 == 0 {
            "routes1.tsv"
        } else {
            "routes2.tsv"
        };
        let r = get(port, "h1.test", &format!("/__push?v={v}&file={file}"));
        assert_eq!(r.status, 200);
        std::thread::sleep(Duration::from_millis(15));
    }
    assert_eq!(wait_for_version(port, "19", &mut running), pids);
    check_routing(port, 2);
    assert_eq!(
        settle_to(port, &pids, 1),
        1,
        "superseded images freed; held: {:?}\n{}",
        sealed_images(&pids),
        running.logs()
    );
    let logs = running.logs();
    assert!(!logs.contains("refused"), "{logs}");
    assert!(!logs.contains("builds its own"), "{logs}");

    // A corrupt image announced as version 20: refused everywhere, and every worker builds
    // its own table of it rather than go without.
    let r = get(port, "h1.test", "/__corrupt?v=20");
    assert_eq!(r.status, 200);
    assert_eq!(wait_for_version(port, "20", &mut running), pids);
    let logs = logs_with(&running, "builds its own table", 4);
    assert_eq!(
        logs.matches("table image of version 20 refused").count(),
        4,
        "every worker refuses the corrupt image:\n{logs}"
    );
    assert!(logs.contains("corrupt"), "{logs}");
    assert_eq!(logs.matches("builds its own table").count(), 4, "{logs}");
    check_routing(port, 2);
    let s = statuses(port);
    assert!(
        s.values().all(|s| count(s, "own_builds") == 1),
        "counted: {s:?}"
    );
    // The next version is shared again.
    let r = get(port, "h1.test", "/__push?v=21&file=routes1.tsv");
    assert_eq!(r.status, 200);
    assert_eq!(wait_for_version(port, "21", &mut running), pids);
    check_routing(port, 1);

    // The builder dies. nginx starts another worker in its place; the next version is built
    // by another worker once the dead one's claim expires, and reaches all four.
    let builder = the_builder(port);
    kill(&builder);
    let r = get(port, "h1.test", "/__push?v=22&file=routes2.tsv");
    assert_eq!(r.status, 200);
    let now = wait_for_version(port, "22", &mut running);
    assert!(!now.contains(&builder), "the dead builder answers: {now:?}");
    assert_eq!(now.intersection(&pids).count(), 3, "{now:?} {pids:?}");
    check_routing(port, 2);
    assert_eq!(builders(port), 1, "a new builder: {:?}", statuses(port));

    // The new builder dies too: the worker started in its place maps the image from one of
    // the others (the builder's mapping is gone with it), building nothing.
    let second = the_builder(port);
    kill(&second);
    let after = wait_for_version(port, "22", &mut running);
    assert!(!after.contains(&second), "{after:?}");
    let respawned: Vec<String> = after.difference(&now).cloned().collect();
    assert_eq!(respawned.len(), 1, "{after:?} {now:?}");
    check_routing(port, 2);
    let s = statuses(port);
    assert_eq!(count(&s[&respawned[0]], "own_builds"), 0, "{s:?}");

    // No worker's image can be reached any more (the dict names nothing): a worker that
    // starts now builds its own table, says so, and routes right.
    let r = get(port, "h1.test", "/__forget");
    assert_eq!(r.status, 200);
    let third = respawned[0].clone();
    kill(&third);
    let last = wait_for_version(port, "22", &mut running);
    let fresh: Vec<String> = last.difference(&after).cloned().collect();
    assert_eq!(fresh.len(), 1, "{last:?} {after:?}");
    check_routing(port, 2);
    let s = statuses(port);
    assert_eq!(count(&s[&fresh[0]], "own_builds"), 1, "{s:?}");
    let logs = running.logs();
    assert_eq!(logs.matches("builds its own table").count(), 5, "{logs}");

    println!("{:#?}", statuses(port));
    running.stop();
    // The crashes are the workers killed here.
    let killed = [builder, second, third];
    let logs: String = running
        .logs()
        .lines()
        .filter(|l| {
            !killed
                .iter()
                .any(|k| l.contains(&format!("{k} exited on signal 9")))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    nginx::assert_clean_logs(&logs);
    // The corrupt file lua/t/share.lua wrote for the workers.
    for e in std::fs::read_dir("/tmp").into_iter().flatten().flatten() {
        if e.file_name()
            .to_string_lossy()
            .starts_with("atc-share-test-corrupt-")
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
    if std::env::var_os("ATC_KEEP_TEST_DIR").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The number after `name` in a status line.
fn count(status: &str, name: &str) -> u64 {
    let mut words = status.split_whitespace();
    words.find(|w| *w == name);
    words.next().and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// The pid of the worker that holds the node's builder claim.
fn the_builder(port: u16) -> String {
    statuses(port)
        .into_iter()
        .find(|(_, s)| s.contains(" builder 1 "))
        .map(|(pid, _)| pid)
        .expect("a builder")
}

fn kill(pid: &str) {
    let killed = std::process::Command::new("kill")
        .args(["-9", pid])
        .status()
        .unwrap();
    assert!(killed.success());
}

/// The effective user id, read from /proc (no `unsafe` call to geteuid).
fn effective_uid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|u| u.parse().ok())
        .unwrap_or(u32::MAX)
}

/// Waits until a worker answers (the first table is in force), failing with the logs.
fn wait_for_an_answer(port: u16, running: &Running) {
    let started = Instant::now();
    while get_ok(port).is_none() {
        assert!(
            started.elapsed() < DEADLINE,
            "no answer:\n{}",
            running.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn get_ok(port: u16) -> Option<Response> {
    let raw = b"GET /__share HTTP/1.0\r\nHost: h1.test\r\n\r\n";
    send(port, raw).ok().filter(|r| r.status == 200)
}
