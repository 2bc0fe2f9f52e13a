//! One table per node, in a real nginx with 4 workers: `resty.router.gateway` with
//! `share = "atc_share"` (lua/t/share.lua). Every worker must answer from the shared image
//! (never from a table of its own), and answer right; exactly one worker builds; a push reaches
//! every worker; the replaced image file is removed once no worker maps it; a corrupt image
//! announced as a new version is refused by every worker, which keeps routing with the table
//! in force, and no worker crashes; when the builder is killed, the next version is built by
//! another worker once the dead one's claim expires.
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

fn header<'a>(r: &'a Response, name: &str) -> &'a str {
    r.headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

/// Sends requests until every one of `workers` worker pids has answered version `version`
/// from the shared image (or the deadline passes); returns the pids seen.
fn wait_for_version(port: u16, version: &str, running: &mut Running) -> BTreeSet<String> {
    let started = Instant::now();
    loop {
        let mut at: BTreeMap<String, bool> = BTreeMap::new();
        for k in 0..64 {
            let r = get(port, "h1.test", &format!("/p1/{k}"));
            let ok = header(&r, "x-version") == version && header(&r, "x-shared") == "1";
            *at.entry(header(&r, "x-pid").to_owned()).or_insert(true) &= ok;
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
        assert_eq!(header(&r, "x-route"), uuid(i), "route {i} v{version}");
        assert_eq!(header(&r, "x-shared"), "1");
        let capture = if i % 10 == 0 { "42" } else { "-" };
        assert_eq!(header(&r, "x-capture"), capture, "route {i} v{version}");
        if moved {
            // The old path is gone in version 2 (a 404 on the busy host).
            let r = get(port, &host, &format!("/p{i}/42"));
            assert_eq!(r.status, 404, "route {i} still at its old path");
        }
    }
}

fn images(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("images"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".atcimg"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
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
    // The image directory belongs to the workers' user (`nobody` when the tests run as root:
    // nginx's default), as a gateway's prefix does; it is theirs alone (0700).
    let images_dir = dir.join("images");
    std::fs::create_dir(&images_dir).unwrap();
    std::fs::set_permissions(
        &images_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    if effective_uid() == 0 {
        let id = |flag: &str| -> u32 {
            let out = std::process::Command::new("id")
                .args([flag, "nobody"])
                .output()
                .expect("id");
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .expect("an id")
        };
        std::os::unix::fs::chown(&images_dir, Some(id("-u")), Some(id("-g"))).unwrap();
    }
    std::fs::write(dir.join("routes1.tsv"), routes(1)).unwrap();
    std::fs::write(dir.join("routes2.tsv"), routes(2)).unwrap();
    let port = free_port();
    let conf = write_config(&nginx, &dir, port);
    let mut running = Running::start(&nginx, &dir, &conf);

    // Version 1, built once, answered from the image by all four workers.
    wait_for_an_answer(port, &running);
    let pids = wait_for_version(port, "1", &mut running);
    check_routing(port, 1);
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
    let count = |status: &str, name: &str| -> u64 {
        let mut words = status.split_whitespace();
        words.find(|w| *w == name);
        words.next().and_then(|n| n.parse().ok()).unwrap_or(0)
    };
    assert!(
        s.values()
            .all(|s| s.contains(&format!(" routes {ROUTES} "))),
        "{s:?}"
    );
    let routed: u64 = s.values().map(|s| count(s, "routed")).sum();
    let not_found: u64 = s.values().map(|s| count(s, "not_found")).sum();
    assert!(routed > 0 && not_found > 0, "counted: {s:?}");
    // Explaining needs route texts the shared table does not keep: a clear refusal.
    let r = get_with(port, "h1.test", "/p1/42", "X-Explain: 1\r\n");
    assert!(
        header(&r, "x-explain-error").contains("not available with `share`"),
        "{:?}",
        r.headers
    );
    let files = images(&dir);
    assert_eq!(files.len(), 1, "one image file: {files:?}");
    let mode = std::fs::metadata(dir.join("images").join(&files[0]))
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
        .unwrap();
    assert_eq!(mode, 0o600, "image files are private");

    // A push reaches every worker; the old file goes once no worker maps it.
    let r = get(port, "h1.test", "/__push?v=2&file=routes2.tsv");
    assert_eq!(r.status, 200);
    assert_eq!(
        wait_for_version(port, "2", &mut running),
        pids,
        "the same workers"
    );
    check_routing(port, 2);
    assert_eq!(builders(port), 1, "still one builder: {:?}", statuses(port));
    let until = Instant::now() + Duration::from_secs(30);
    while images(&dir).len() != 1 && Instant::now() < until {
        // Each worker unmaps the old image when it switches; the last one removes the file.
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        images(&dir).len(),
        1,
        "the replaced image removed: {:?}",
        images(&dir)
    );
    assert_ne!(images(&dir), files, "the file of version 2");

    // A corrupt image announced as version 3: refused everywhere, version 2 stays.
    let r = get(port, "h1.test", "/__corrupt?v=3");
    assert_eq!(r.status, 200);
    let until = Instant::now() + Duration::from_secs(30);
    while running
        .logs()
        .matches("table image of version 3 refused")
        .count()
        < 4
        && Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let logs = running.logs();
    assert_eq!(
        logs.matches("table image of version 3 refused").count(),
        4,
        "every worker refuses the corrupt image:\n{logs}"
    );
    assert!(logs.contains("corrupt"), "{logs}");
    assert_eq!(
        wait_for_version(port, "2", &mut running),
        pids,
        "no worker restarted"
    );
    check_routing(port, 2);

    // The builder cannot write the next image (its directory made read-only): logged, and
    // every worker keeps routing with version 2; once the directory is writable again, the
    // version is shared after all.
    let mode = |m: u32| {
        std::fs::set_permissions(&images_dir, std::os::unix::fs::PermissionsExt::from_mode(m))
            .unwrap()
    };
    mode(0o500);
    let r = get(port, "h1.test", "/__push?v=4&file=routes1.tsv");
    assert_eq!(r.status, 200);
    let until = Instant::now() + Duration::from_secs(30);
    while !running.logs().contains("version 4 built but not shared") && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        running.logs().contains("version 4 built but not shared"),
        "{}",
        running.logs()
    );
    // Built again after a pause that doubles (0.5, 1, 2 s...): a few attempts in 3 s.
    std::thread::sleep(Duration::from_secs(3));
    let failures = running
        .logs()
        .matches("version 4 built but not shared")
        .count();
    assert!((2..=5).contains(&failures), "{failures} attempts in 3 s");
    check_routing(port, 2);
    mode(0o700);
    assert_eq!(wait_for_version(port, "4", &mut running), pids);
    check_routing(port, 1);

    // The builder dies. nginx starts another worker in its place; the next version is built
    // by another worker once the dead one's claim expires, and reaches all four.
    let builder = statuses(port)
        .into_iter()
        .find(|(_, s)| s.contains(" builder 1 "))
        .map(|(pid, _)| pid)
        .expect("a builder");
    let killed = std::process::Command::new("kill")
        .args(["-9", &builder])
        .status()
        .unwrap();
    assert!(killed.success());
    let r = get(port, "h1.test", "/__push?v=5&file=routes2.tsv");
    assert_eq!(r.status, 200);
    let now = wait_for_version(port, "5", &mut running);
    assert!(!now.contains(&builder), "the dead builder answers: {now:?}");
    assert_eq!(now.intersection(&pids).count(), 3, "{now:?} {pids:?}");
    check_routing(port, 2);
    assert_eq!(builders(port), 1, "a new builder: {:?}", statuses(port));

    println!("{:#?}", statuses(port));
    running.stop();
    // The one crash is the worker killed here.
    let logs: String = running
        .logs()
        .lines()
        .filter(|l| !l.contains(&format!("{builder} exited on signal 9")))
        .map(|l| format!("{l}\n"))
        .collect();
    nginx::assert_clean_logs(&logs);
    if std::env::var_os("ATC_KEEP_TEST_DIR").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The default image directory works however nginx is started: as root with unprivileged
/// workers (how the tests run as root), the prefix is root's and the workers cannot write it;
/// they make their own directory, theirs alone.
#[test]
fn the_default_image_directory_works_with_a_root_master() {
    let Some(nginx) =
        nginx::required_or_skip("the_default_image_directory_works_with_a_root_master")
    else {
        return;
    };
    let dir = common::cpath_dir("nginx-share-default");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("routes1.tsv"), routes(1)).unwrap();
    let port = free_port();
    let conf = write_config_with(&nginx, &dir, port, ", false, \"default\"");
    let mut running = Running::start(&nginx, &dir, &conf);
    wait_for_an_answer(port, &running);
    wait_for_version(port, "1", &mut running);
    check_routing(port, 1);
    let logs = running.logs();
    assert!(!logs.contains("Permission denied"), "{logs}");
    running.stop();
    nginx::assert_clean_logs(&running.logs());
    if std::env::var_os("ATC_KEEP_TEST_DIR").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
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
