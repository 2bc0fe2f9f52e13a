//! `atc-open-loop`: a fixed-rate (open-loop) HTTP load against one server, reported per phase
//! (see `atc_testkit::open_loop` for why wrk's closed loop hides stalls).
//!
//! ```text
//! atc-open-loop --addr 127.0.0.1:8090 --rate 4000 --requests requests.tsv \
//!     --phase steady=10 --phase pushing=10,/admin/churn?start=1 [--max-connections 512] \
//!     [--watch-header x-gw-version] [--worst 5]
//! ```
//!
//! Each `--phase NAME=SECONDS[,PATH]` follows the previous one; `PATH`, if given, is fetched
//! (GET, on a connection of its own, from another thread) when the phase starts. For each
//! phase one line of `key=value` pairs: requests, non-2xx answers, requests without an answer,
//! latency p50, p99, p99.9 and max in milliseconds from each request's due time, and how late
//! this client sent at the 99th percentile. `--worst N` also prints the N slowest requests
//! with their due times and how late each was sent. Exit status 1 when a request got no answer.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use atc_testkit::open_loop::{self, Plan, Summary};

struct Phase {
    name: String,
    secs: f64,
    path: Option<String>,
}

fn usage() -> ! {
    eprintln!(
        "usage: atc-open-loop --addr HOST:PORT --rate R --requests FILE \
         --phase NAME=SECONDS[,PATH]... [--max-connections N] [--watch-header NAME] [--worst N]"
    );
    std::process::exit(2)
}

fn get(addr: SocketAddr, path: &str) {
    let Ok(mut s) = TcpStream::connect(addr) else {
        eprintln!("atc-open-loop: cannot connect for {path}");
        return;
    };
    let _ = write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    );
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut addr, mut rate, mut file) = (None, None, None);
    let (mut phases, mut max_conns, mut watch, mut worst) = (Vec::new(), 512usize, None, 0usize);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--addr" => addr = Some(val().parse::<SocketAddr>().unwrap_or_else(|_| usage())),
            "--rate" => rate = Some(val().parse::<f64>().unwrap_or_else(|_| usage())),
            "--requests" => file = Some(val()),
            "--max-connections" => max_conns = val().parse().unwrap_or_else(|_| usage()),
            "--watch-header" => watch = Some(val().to_ascii_lowercase()),
            "--worst" => worst = val().parse().unwrap_or_else(|_| usage()),
            "--phase" => {
                let v = val();
                let (name, rest) = v.split_once('=').unwrap_or_else(|| usage());
                let (secs, path) = match rest.split_once(',') {
                    Some((s, p)) => (s, Some(p.to_owned())),
                    None => (rest, None),
                };
                phases.push(Phase {
                    name: name.to_owned(),
                    secs: secs.parse().unwrap_or_else(|_| usage()),
                    path,
                });
            }
            _ => usage(),
        }
    }
    let (Some(addr), Some(rate), Some(file)) = (addr, rate, file) else {
        usage()
    };
    if phases.is_empty() {
        usage()
    }
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        eprintln!("atc-open-loop: {file}: {e}");
        std::process::exit(2)
    });
    let requests = open_loop::read_requests_tsv(&text);
    if requests.is_empty() {
        eprintln!("atc-open-loop: no requests in {file}");
        std::process::exit(2)
    }
    let mut starts = Vec::new();
    let mut at = 0.0;
    for p in &phases {
        starts.push(Duration::from_secs_f64(at));
        at += p.secs;
    }
    let plan = Plan {
        addr,
        rate,
        duration: Duration::from_secs_f64(at),
        requests,
        max_connections: max_conns,
        drain: Duration::from_secs(10),
        watch_header: watch,
    };
    let paths: Vec<Option<String>> = phases.iter().map(|p| p.path.clone()).collect();
    let mut helpers = Vec::new();
    let run = open_loop::run_with_marks(&plan, &starts, |i| {
        if let Some(path) = paths[i].clone() {
            helpers.push(std::thread::spawn(move || get(addr, &path)));
        }
    })
    .unwrap_or_else(|e| {
        eprintln!("atc-open-loop: {e}");
        std::process::exit(2)
    });
    for h in helpers {
        let _ = h.join();
    }
    let mut failed = false;
    for (i, p) in phases.iter().enumerate() {
        let from = starts[i];
        let to = from + Duration::from_secs_f64(p.secs);
        let s = Summary::of(&run.samples, from, to);
        failed |= s.errors > 0;
        println!(
            "phase={} rate={} count={} non2xx={} errors={} p50_ms={} p99_ms={} p999_ms={} \
             max_ms={} lag_p99_ms={}",
            p.name,
            rate,
            s.count,
            s.non_2xx,
            s.errors,
            ms(s.p50),
            ms(s.p99),
            ms(s.p999),
            ms(s.max),
            ms(s.send_lag_p99)
        );
    }
    println!("connections={}", run.connections);
    if worst > 0 {
        let mut by_latency: Vec<_> = run.samples.iter().filter(|s| s.latency.is_some()).collect();
        by_latency.sort_by_key(|s| std::cmp::Reverse(s.latency));
        for s in by_latency.iter().take(worst) {
            println!(
                "slow due_ms={} latency_ms={} send_lag_ms={} status={} header={}",
                ms(s.due),
                ms(s.latency.unwrap_or_default()),
                ms(s.send_lag),
                s.status,
                s.header.as_deref().unwrap_or("-")
            );
        }
    }
    if failed {
        std::process::exit(1)
    }
}
