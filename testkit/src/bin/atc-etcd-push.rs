//! `atc-etcd-push`: puts routes into etcd for the benchmarks of a gateway fed by etcd
//! (`scripts/push-bench`'s etcd case, `scripts/fleet-bench`), through etcd's JSON gateway over
//! one kept-alive HTTP/1.1 connection.
//!
//! ```text
//! atc-etcd-push --etcd 127.0.0.1:2379 --prefix /atc/routes/ load ROUTES.tsv [--batch 1000]
//! atc-etcd-push --etcd ... --prefix ... churn ROUTES.tsv --rate 50 --count 2 --seconds 10
//! atc-etcd-push --etcd ... --prefix ... revision
//! atc-etcd-push --etcd ... --prefix ... probe --nodes 127.0.0.1:8091,127.0.0.1:8092 \
//!     [--workers 2] [--probes 50] [--interval 0.2]
//! ```
//!
//! A route is the key `<prefix><uuid>` with the value `{"priority": P, "expression": "E"}`;
//! ROUTES.tsv is `PRIORITY<TAB>UUID<TAB>EXPRESSION` per line.
//! - `load` puts every route, `--batch` to a transaction; prints the revision of the last.
//! - `churn` puts `--count` routes of the table in one transaction every 1/`--rate` s for
//!   `--seconds`, each due at a fixed time (open loop: a slow put does not delay the next
//!   one's due time), each route changed as `(E) && http.method != "C<k>"` (a new expression
//!   that reaches the same requests). Prints the puts made, the first and last revision and how
//!   late the puts were sent and how long they took (median, p99, max).
//! - `revision` prints etcd's current revision (what a gateway following it is at once it has
//!   caught up).
//! - `probe` puts, one at a time every `--interval` s, a route of its own (`http.path ==
//!   "/atc-probe/<run>/<n>"`, the highest priority) and asks every worker of every node (`GET`
//!   that path on one kept-alive connection per worker, every millisecond) until each answers
//!   with the probe's id (`lua/demo/atc_demo.lua`'s probe handler answers the route id and its
//!   pid, by which the `--workers` connections to a node are told apart); then deletes it.
//!   Prints, from the put's answer to a node's last worker routing by it: per node and for the
//!   last node, median, p90, p99 and max (ms). The figures include up to 1 ms of polling.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn usage() -> ! {
    eprintln!(
        "usage: atc-etcd-push --etcd HOST:PORT --prefix PREFIX \
         (load ROUTES.tsv [--batch N] | churn ROUTES.tsv --rate R --count N --seconds S | \
         revision | probe --nodes HOST:PORT,... [--workers N] [--probes N] [--interval S])"
    );
    std::process::exit(2)
}

fn die(what: &str) -> ! {
    eprintln!("atc-etcd-push: {what}");
    std::process::exit(1)
}

/// One kept-alive HTTP/1.1 connection.
struct Http {
    addr: String,
    conn: BufReader<TcpStream>,
}

impl Http {
    fn connect(addr: &str) -> Http {
        let s = TcpStream::connect(addr).unwrap_or_else(|e| die(&format!("{addr}: {e}")));
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
        Http {
            addr: addr.to_owned(),
            conn: BufReader::new(s),
        }
    }

    /// Sends a request and reads the answer: status and body.
    fn request(&mut self, method: &str, path: &str, body: &str) -> (u16, Vec<u8>) {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let s = self.conn.get_mut();
        s.write_all(head.as_bytes())
            .and_then(|_| s.write_all(body.as_bytes()))
            .unwrap_or_else(|e| die(&format!("send to {}: {e}", self.addr)));
        self.answer()
            .unwrap_or_else(|e| die(&format!("read from {}: {e}", self.addr)))
    }

    fn answer(&mut self) -> std::io::Result<(u16, Vec<u8>)> {
        let bad =
            |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
        let mut line = String::new();
        self.conn.read_line(&mut line)?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("not an HTTP answer"))?;
        let (mut length, mut chunked) = (None, false);
        loop {
            line.clear();
            self.conn.read_line(&mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (name, value) = l.split_once(':').unwrap_or((l, ""));
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse::<usize>().ok(),
                "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.conn.read_line(&mut line)?;
                let size = usize::from_str_radix(line.trim(), 16).map_err(|_| bad("chunk size"))?;
                let mut chunk = vec![0; size + 2];
                self.conn.read_exact(&mut chunk)?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else {
            body.resize(length.ok_or_else(|| bad("no length"))?, 0);
            self.conn.read_exact(&mut body)?;
        }
        Ok((status, body))
    }
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn json_string(s: &str) -> String {
    let mut out = String::from('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The etcd of a run: its JSON gateway and the prefix routes live under.
struct Etcd {
    http: Http,
    prefix: String,
}

impl Etcd {
    /// The store's current revision.
    fn revision(&mut self) -> u64 {
        let body = format!(
            "{{\"key\":\"{}\",\"limit\":1}}",
            base64(self.prefix.as_bytes())
        );
        let (status, answer) = self.http.request("POST", "/v3/kv/range", &body);
        let text = String::from_utf8_lossy(&answer);
        if status != 200 {
            die(&format!("range: HTTP {status}: {text}"));
        }
        revision(&text).unwrap_or_else(|| die(&format!("range: no revision in {text}")))
    }

    /// One transaction of `puts` (id, priority, expression) and `deletes` (ids): its revision.
    fn txn(&mut self, puts: &[(&str, u64, &str)], deletes: &[&str]) -> u64 {
        let mut ops = Vec::new();
        for (id, priority, expression) in puts {
            let value = format!(
                "{{\"priority\": {priority}, \"expression\": {}}}",
                json_string(expression)
            );
            ops.push(format!(
                "{{\"request_put\":{{\"key\":\"{}\",\"value\":\"{}\"}}}}",
                base64(format!("{}{id}", self.prefix).as_bytes()),
                base64(value.as_bytes())
            ));
        }
        for id in deletes {
            ops.push(format!(
                "{{\"request_delete_range\":{{\"key\":\"{}\"}}}}",
                base64(format!("{}{id}", self.prefix).as_bytes())
            ));
        }
        let body = format!("{{\"success\":[{}]}}", ops.join(","));
        let (status, answer) = self.http.request("POST", "/v3/kv/txn", &body);
        let text = String::from_utf8_lossy(&answer);
        if status != 200 {
            die(&format!("txn: HTTP {status}: {text}"));
        }
        revision(&text).unwrap_or_else(|| die(&format!("txn: no revision in {text}")))
    }
}

/// The `"revision"` of an etcd answer's header (a JSON number or, from the gateway, a string).
fn revision(text: &str) -> Option<u64> {
    let at = text.find("\"revision\":")? + "\"revision\":".len();
    let digits: String = text[at..]
        .trim_start_matches([' ', '"'])
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn read_routes(file: &str) -> Vec<(String, u64, String)> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| die(&format!("{file}: {e}")));
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, '\t');
            let priority = f.next()?.parse().ok()?;
            let id = f.next()?.to_owned();
            Some((id, priority, f.next()?.to_owned()))
        })
        .collect()
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// Median, 90th and 99th percentile and max of `v` (sorted here), in ms.
fn spread(v: &mut [Duration]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.sort_unstable();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    format!(
        "median {} p90 {} p99 {} max {}",
        ms(at(0.5)),
        ms(at(0.9)),
        ms(at(0.99)),
        ms(v[v.len() - 1])
    )
}

fn load(etcd: &mut Etcd, file: &str, batch: usize) {
    let routes = read_routes(file);
    let started = Instant::now();
    let mut rev = 0;
    for part in routes.chunks(batch.max(1)) {
        let puts: Vec<(&str, u64, &str)> = part
            .iter()
            .map(|(id, p, e)| (id.as_str(), *p, e.as_str()))
            .collect();
        rev = etcd.txn(&puts, &[]);
    }
    println!(
        "loaded {} routes in {} ms, revision {rev}",
        routes.len(),
        started.elapsed().as_millis()
    );
}

fn churn(etcd: &mut Etcd, file: &str, rate: f64, count: usize, seconds: f64) {
    let routes = read_routes(file);
    if routes.is_empty() || rate <= 0.0 {
        die("churn needs routes and a positive rate");
    }
    let n = routes.len();
    let pushes = (rate * seconds).round() as usize;
    let (mut lags, mut took) = (Vec::new(), Vec::new());
    let (mut first, mut last) = (None, 0);
    let started = Instant::now();
    for k in 1..=pushes {
        let due = started + Duration::from_secs_f64((k - 1) as f64 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let sent = Instant::now();
        lags.push(sent - due);
        // Spread over the table, different each time, deterministic.
        let changed: Vec<(String, u64, String)> = (1..=count.min(n))
            .map(|j| {
                let (id, p, e) = &routes[(k * 7919 + j * 104_729) % n];
                (id.clone(), *p, format!("({e}) && http.method != \"C{k}\""))
            })
            .collect();
        let puts: Vec<(&str, u64, &str)> = changed
            .iter()
            .map(|(id, p, e)| (id.as_str(), *p, e.as_str()))
            .collect();
        last = etcd.txn(&puts, &[]);
        first.get_or_insert(last);
        took.push(sent.elapsed());
    }
    println!(
        "churn puts={pushes} routes_per_put={count} first_revision={} last_revision={last} \
         seconds={:.1}; sent late: {}; put took: {}",
        first.unwrap_or(0),
        started.elapsed().as_secs_f64(),
        spread(&mut lags),
        spread(&mut took)
    );
}

/// One kept-alive connection to each of `workers` workers of the node at `addr`, told apart by
/// the pid a probe answer ends with (connections are opened until that many were seen).
fn worker_conns(addr: &str, workers: usize) -> Vec<Http> {
    let mut conns: Vec<(String, Http)> = Vec::new();
    for _ in 0..500 {
        if conns.len() == workers {
            break;
        }
        let mut c = Http::connect(addr);
        let (_, body) = c.request("GET", "/atc-probe/hello", "");
        let body = String::from_utf8_lossy(&body).into_owned();
        let pid = body.rsplit(' ').next().unwrap_or_default().to_owned();
        if !conns.iter().any(|(p, _)| *p == pid) {
            conns.push((pid, c));
        }
    }
    if conns.len() < workers {
        die(&format!(
            "{addr}: {} workers answered, not {workers}",
            conns.len()
        ));
    }
    conns.into_iter().map(|(_, c)| c).collect()
}

fn probe(etcd: &mut Etcd, nodes: &[String], workers: usize, probes: usize, interval: f64) {
    let mut conns: Vec<Vec<Http>> = nodes.iter().map(|a| worker_conns(a, workers)).collect();
    let mut per_node: Vec<Vec<Duration>> = vec![Vec::new(); nodes.len()];
    let mut every = Vec::new();
    let run = std::process::id();
    for k in 0..probes {
        let next = Instant::now() + Duration::from_secs_f64(interval);
        let id = format!("ffffffff-{:04x}-4000-8000-{:012x}", run & 0xffff, k);
        let path = format!("/atc-probe/{run}/{k}");
        let expression = format!("http.path == \"{path}\"");
        etcd.txn(&[(&id, (1 << 53) - 1, &expression)], &[]);
        let put = Instant::now();
        // Every worker of every node polled in turn, each done once it answers with the
        // probe's id; a node's time is its last worker's.
        let mut pending: Vec<(usize, &mut Http)> = conns
            .iter_mut()
            .enumerate()
            .flat_map(|(i, node)| node.iter_mut().map(move |c| (i, c)))
            .collect();
        let mut done = vec![false; nodes.len()];
        let mut last = Duration::ZERO;
        while !pending.is_empty() {
            pending.retain_mut(|(_, c)| !c.request("GET", &path, "").1.starts_with(id.as_bytes()));
            let t = put.elapsed();
            for (i, d) in done.iter_mut().enumerate() {
                if !*d && !pending.iter().any(|(n, _)| *n == i) {
                    *d = true;
                    per_node[i].push(t);
                    last = t;
                }
            }
            if pending.is_empty() {
                break;
            }
            if t > Duration::from_secs(30) {
                die(&format!(
                    "{} did not route {path} within 30 s",
                    nodes[pending[0].0]
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        every.push(last);
        etcd.txn(&[], &[&id]);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    for (i, v) in per_node.iter_mut().enumerate() {
        println!("probe node={} put_to_routed_ms: {}", nodes[i], spread(v));
    }
    println!(
        "probe every_node probes={probes} put_to_routed_ms: {}",
        spread(&mut every)
    );
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let (mut addr, mut prefix) = (None, None);
    while let Some(a) = args.peek() {
        match a.as_str() {
            "--etcd" | "--prefix" => {
                let a = args.next().unwrap_or_else(|| usage());
                let v = args.next().unwrap_or_else(|| usage());
                if a == "--etcd" {
                    addr = Some(v);
                } else {
                    prefix = Some(v);
                }
            }
            _ => break,
        }
    }
    let (Some(addr), Some(prefix)) = (addr, prefix) else {
        usage()
    };
    let command = args.next().unwrap_or_else(|| usage());
    let file = match command.as_str() {
        "load" | "churn" => Some(args.next().unwrap_or_else(|| usage())),
        "probe" | "revision" => None,
        _ => usage(),
    };
    let (mut batch, mut rate, mut count, mut seconds) = (1000usize, 50.0, 2usize, 10.0);
    let (mut nodes, mut workers, mut probes, mut interval) = (Vec::new(), 1usize, 50usize, 0.2);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_else(|| usage());
        let num = |v: &str| v.parse::<f64>().unwrap_or_else(|_| usage());
        match a.as_str() {
            "--batch" => batch = num(&v) as usize,
            "--rate" => rate = num(&v),
            "--count" => count = num(&v) as usize,
            "--seconds" => seconds = num(&v),
            "--nodes" => nodes = v.split(',').map(str::to_owned).collect(),
            "--workers" => workers = num(&v) as usize,
            "--probes" => probes = num(&v) as usize,
            "--interval" => interval = num(&v),
            _ => usage(),
        }
    }
    let mut etcd = Etcd {
        http: Http::connect(&addr),
        prefix,
    };
    match (command.as_str(), file) {
        ("load", Some(f)) => load(&mut etcd, &f, batch),
        ("churn", Some(f)) => churn(&mut etcd, &f, rate, count, seconds),
        ("revision", None) => println!("{}", etcd.revision()),
        _ if !nodes.is_empty() => probe(&mut etcd, &nodes, workers, probes, interval),
        _ => usage(),
    }
}
