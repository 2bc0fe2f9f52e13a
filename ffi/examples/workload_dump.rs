//! Writes an atc-workload route table and request mix as tab-separated files for the Lua
//! benchmark (lua/bench/bench.lua), and times the same request loop natively in Rust, so the
//! binding's own cost can be read off as the difference.
//!
//! ```sh
//! cargo run --release -p atc-router-ffi --example workload_dump -- OUT_DIR [ROUTES] [REQUESTS]
//! ```
//!
//! Files: `schema.tsv` (name, type), `routes.tsv` (priority, uuid, expression) and
//! `requests.tsv` (method, host, path) from the "realistic" mix; only those three fields are
//! sent, as in the benchmark.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use atc_router::{Context, Router, Schema, Type, Uuid};
use atc_workload::{requests, Mix, Table, Value};

fn main() {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(
        args.next()
            .expect("usage: workload_dump OUT_DIR [ROUTES] [REQUESTS]"),
    );
    let n: usize = args.next().map_or(10_000, |a| a.parse().expect("ROUTES"));
    let count: usize = args.next().map_or(10_000, |a| a.parse().expect("REQUESTS"));
    let seed = 42;
    std::fs::create_dir_all(&out).unwrap();

    let table = Table::generate(n, seed, false);
    let mut schema = Schema::new();
    let mut tsv = String::new();
    for (name, ty) in atc_workload::SCHEMA {
        tsv.push_str(&format!("{name}\t{}\n", ty.name()));
        schema
            .add_field(name, Type::from_name(ty.name()).unwrap())
            .unwrap();
    }
    std::fs::write(out.join("schema.tsv"), tsv).unwrap();
    let schema = Arc::new(schema);
    let mut router = Router::new(schema.clone());
    let mut tsv = String::new();
    for r in &table.routes {
        tsv.push_str(&format!(
            "{}\t{}\t{}\n",
            r.priority,
            r.id_string(),
            r.expression
        ));
        router
            .add(Uuid::from_bytes(r.id), r.priority, &r.expression)
            .unwrap();
    }
    std::fs::write(out.join("routes.tsv"), tsv).unwrap();

    let mut reqs = Vec::new();
    for req in requests(&table, Mix::Realistic, count, seed) {
        let get = |f: &str| {
            req.fields.iter().find_map(|(k, v)| match v {
                Value::Str(s) if k == f => Some(s.clone()),
                _ => None,
            })
        };
        let (Some(m), Some(h), Some(p)) = (get("http.method"), get("http.host"), get("http.path"))
        else {
            continue;
        };
        if [&m, &h, &p].iter().any(|s| s.contains(['\t', '\n'])) {
            continue;
        }
        reqs.push((m, h, p));
    }
    let tsv: String = reqs
        .iter()
        .map(|(m, h, p)| format!("{m}\t{h}\t{p}\n"))
        .collect();
    std::fs::write(out.join("requests.tsv"), tsv).unwrap();

    // The benchmark's loop, natively.
    let id = |f: &str| schema.resolve(f).unwrap().0;
    let (fm, fh, fp) = (id("http.method"), id("http.host"), id("http.path"));
    let mut ctx = Context::new(schema.clone());
    let mut hits = 0usize;
    let mut samples = Vec::new();
    for round in 0..11 {
        let t = Instant::now();
        for (m, h, p) in &reqs {
            ctx.reset();
            ctx.add_str(fm, m).unwrap();
            ctx.add_str(fh, h).unwrap();
            ctx.add_str(fp, p).unwrap();
            if router.execute(&mut ctx) {
                let r = ctx.result().unwrap();
                std::hint::black_box((r.id(), r.matched_value_by_id(fp)));
                if round == 0 {
                    hits += 1;
                }
            }
        }
        samples.push(t.elapsed().as_nanos() as f64 / reqs.len() as f64);
    }
    samples.sort_by(f64::total_cmp);
    println!(
        "wrote {} routes and {} requests to {}; native Rust loop: median {:.0} ns/request ({} of {} matched)",
        table.routes.len(),
        reqs.len(),
        out.display(),
        samples[samples.len() / 2],
        hits,
        reqs.len()
    );
}
