//! A real nginx for the integration tests: finding Debian's nginx with the lua module,
//! starting it on a config, plain HTTP/1.0 requests over 127.0.0.1, and the log checks.
//!
//! Needs the Debian packages `nginx`, `libnginx-mod-http-lua` and `lua-resty-core`; nothing is
//! installed here. [`required_or_skip`] makes a test pass with a notice when they are missing,
//! unless `ATC_REQUIRE_NGINX=1` (what `scripts/test` sets), which makes their absence a
//! failure. Paths can be overridden with `ATC_NGINX` (the binary) and `ATC_NGINX_MODULES`
//! (the modules directory).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Nginx {
    pub bin: PathBuf,
    pub modules: PathBuf,
    /// Where lua-resty-core's modules are (`resty/core.lua`).
    pub lua_share: PathBuf,
}

pub fn find_nginx() -> Result<Nginx, String> {
    let bin = match std::env::var_os("ATC_NGINX") {
        Some(p) => PathBuf::from(p),
        None => ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .ok_or("no nginx binary (apt-get install nginx)")?,
    };
    let modules = std::env::var_os("ATC_NGINX_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/nginx/modules"));
    for m in ["ndk_http_module.so", "ngx_http_lua_module.so"] {
        if !modules.join(m).is_file() {
            return Err(format!(
                "no {} (apt-get install libnginx-mod-http-lua)",
                modules.join(m).display()
            ));
        }
    }
    let lua_share = PathBuf::from("/usr/share/lua/5.1");
    if !lua_share.join("resty/core.lua").is_file() {
        return Err("no resty/core.lua (apt-get install lua-resty-core)".into());
    }
    Ok(Nginx {
        bin,
        modules,
        lua_share,
    })
}

/// nginx, or `None` after printing why the test `name` is skipped; panics instead when
/// `ATC_REQUIRE_NGINX=1`.
pub fn required_or_skip(name: &str) -> Option<Nginx> {
    let required = std::env::var("ATC_REQUIRE_NGINX").as_deref() == Ok("1");
    match find_nginx() {
        Ok(n) => Some(n),
        Err(why) if required => panic!("ATC_REQUIRE_NGINX=1 but nginx is not usable: {why}"),
        Err(why) => {
            println!("SKIPPED {name}: {why} (set ATC_REQUIRE_NGINX=1 to require it)");
            None
        }
    }
}

/// The `load_module` lines of the lua module, for the main context of a config.
/// The start of a test's nginx.conf: a master in the foreground with `workers` workers, its
/// pid file and error log (at `log_level`) in `dir`, the lua module loaded, and the `http`
/// block opened with access logging off and every temporary path in `dir`. The caller writes
/// the rest of the block and closes it.
pub fn conf_head(n: &Nginx, dir: &Path, workers: usize, log_level: &str) -> String {
    format!(
        r#"
worker_processes {workers};
daemon off;
master_process on;
pid {dir}/nginx.pid;
error_log {dir}/error.log {log_level};
{load_modules}
events {{ worker_connections 256; }}

http {{
    access_log off;
    client_body_temp_path {dir}/tmp_body;
    proxy_temp_path {dir}/tmp_proxy;
    fastcgi_temp_path {dir}/tmp_fastcgi;
    uwsgi_temp_path {dir}/tmp_uwsgi;
    scgi_temp_path {dir}/tmp_scgi;
"#,
        dir = dir.display(),
        load_modules = load_modules(n),
    )
}

pub fn load_modules(n: &Nginx) -> String {
    format!(
        "load_module {0}/ndk_http_module.so;\nload_module {0}/ngx_http_lua_module.so;\n",
        n.modules.display()
    )
}

/// A running nginx; stopped when dropped, whatever happened.
pub struct Running {
    pub child: Child,
    bin: PathBuf,
    dir: PathBuf,
}

impl Running {
    /// Starts nginx with prefix `dir` and the config `conf`; its stderr goes to
    /// `dir/stderr.log`.
    pub fn start(n: &Nginx, dir: &Path, conf: &Path) -> Running {
        let log = std::fs::File::create(dir.join("stderr.log")).unwrap();
        let child = Command::new(&n.bin)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(conf)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start nginx");
        Running {
            child,
            bin: n.bin.clone(),
            dir: dir.to_path_buf(),
        }
    }

    pub fn stop(&mut self) {
        let conf = self.dir.join("nginx.conf");
        let _ = Command::new(&self.bin)
            .arg("-p")
            .arg(&self.dir)
            .arg("-c")
            .arg(&conf)
            .args(["-s", "stop"])
            .stderr(Stdio::null())
            .status();
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `error.log` and `stderr.log` of the prefix directory, together.
    pub fn logs(&self) -> String {
        let mut s = std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
        s.push_str(&std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default());
        s
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Log lines that mean something went badly wrong: a worker that crashed shows as "worker
/// process N exited on signal 11" (alert).
pub const BAD_LOG_LINES: [&str; 7] = [
    "[crit]",
    "[alert]",
    "[emerg]",
    "exited on signal",
    "segfault",
    "core dumped",
    "panicked",
];

/// Panics when `logs` have a line from [`BAD_LOG_LINES`].
pub fn assert_clean_logs(logs: &str) {
    for bad in BAD_LOG_LINES {
        let hits: Vec<&str> = logs.lines().filter(|l| l.contains(bad)).collect();
        assert!(hits.is_empty(), "the logs have {bad}: {hits:?}");
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Response {
    pub status: u16,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The value of header `name` (lowercase), or "" when there is none.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }
}

/// Sends `raw` (a whole HTTP/1.0 request) and reads the answer to the end.
pub fn send(port: u16, raw: &[u8]) -> Result<Response, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
    // nginx may answer (and close) before reading a huge request to its end, so a failed
    // write is only an error if no answer can be read either.
    let written = s.write_all(raw);
    let mut buf = Vec::new();
    if let Err(e) = s.read_to_end(&mut buf) {
        if buf.is_empty() {
            return Err(format!("read: {e} (write: {written:?})"));
        }
    }
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no header end in {:?}", String::from_utf8_lossy(&buf)))?;
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect();
    Ok(Response {
        status,
        headers,
        body: buf[split + 4..].to_vec(),
    })
}
