//! Writes an atc-workload route table and request mix as tab-separated files for the Lua
//! benchmark (lua/bench/bench.lua), and times the same request loop natively in Rust, so the
//! binding's own cost can be read off as the difference.
//!
//! ```sh
//! cargo run --release -p atc-router-ffi --example workload_dump -- OUT_DIR [ROUTES] [REQUESTS] [FAMILY] [MIX]
//! ```
//!
//! FAMILY defaults to `mixed`, MIX to `realistic`. Files: `schema.tsv` (name, type),
//! `routes.tsv` (priority, uuid, expression) and `requests.tsv`, one request per line, each
//! value a `name=T:value` cell (T is `s` for a String, `i` for an Int, `a` for an address).
//! When every route is one lua-resty-radixtree can express (hosts, methods, exact paths,
//! prefixes as `/p*`, path parameters as `:name`), also `radixtree.tsv` for
//! `lua/bench/radixtree.lua`: uuid, priority, hosts, methods and paths, lists joined by `,`
//! (`-` for none). A parameter becomes `:name`, which takes any segment where the route's
//! regex may take only digits: the same for the requests, all built for a route.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use atc_router::{Context, Router, Uuid};
use atc_workload::{requests, Cond, Family, Mix, Part, PathMatch, Route, Table, Value};

/// The route as lua-resty-radixtree writes it (see the module docs), if it can.
fn radixtree_line(r: &Route) -> Option<String> {
    let (mut hosts, mut methods, mut paths) = (Vec::new(), Vec::new(), Vec::new());
    for c in &r.shape.conds {
        match c {
            Cond::Host(h) => hosts.push(h.clone()),
            Cond::Methods(ms) => methods.extend(ms.iter().cloned()),
            Cond::Path(alts) => {
                for m in alts {
                    paths.push(match m {
                        PathMatch::Prefix(p) => format!("{p}*"),
                        PathMatch::Exact(p) => p.clone(),
                        PathMatch::Regex(re) if !re.open => {
                            let mut out = String::new();
                            for part in &re.parts {
                                match part {
                                    Part::Lit(l) => out.push_str(l),
                                    Part::Param { name, .. } => {
                                        out.push(':');
                                        out.push_str(name);
                                    }
                                    // no radixtree form within a segment
                                    Part::Any | Part::OneOf { .. } => return None,
                                }
                            }
                            out
                        }
                        _ => return None,
                    });
                }
            }
            _ => return None,
        }
    }
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(",")
        }
    };
    (!paths.is_empty()).then(|| {
        format!(
            "{}\t{}\t{}\t{}\t{}\n",
            r.id_string(),
            r.priority,
            list(&hosts),
            list(&methods),
            list(&paths)
        )
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: workload_dump OUT_DIR [ROUTES] [REQUESTS] [FAMILY] [MIX]";
    let out = PathBuf::from(args.next().expect(usage));
    let n: usize = args.next().map_or(10_000, |a| a.parse().expect("ROUTES"));
    let count: usize = args.next().map_or(10_000, |a| a.parse().expect("REQUESTS"));
    let family = args.next().map_or(Family::Mixed, |f| {
        Family::from_name(&f).expect("a family name")
    });
    let mix = args
        .next()
        .map_or(Mix::Realistic, |m| Mix::from_name(&m).expect("a mix name"));
    let seed = 42;
    std::fs::create_dir_all(&out).unwrap();

    let table = Table::family(family, n, seed);
    let mut tsv = String::new();
    for (name, ty) in atc_router::request::HTTP_FIELDS {
        tsv.push_str(&format!("{name}\t{}\n", ty.name()));
    }
    std::fs::write(out.join("schema.tsv"), tsv).unwrap();
    let schema = Arc::new(atc_router::request::http_schema());
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
    let radix: Option<String> = table.routes.iter().map(radixtree_line).collect();
    let radix_path = out.join("radixtree.tsv");
    match radix {
        Some(lines) => std::fs::write(&radix_path, lines).unwrap(),
        None => {
            let _ = std::fs::remove_file(&radix_path);
        }
    }

    let mut reqs: Vec<Vec<(String, atc_router::Value)>> = Vec::new();
    let mut tsv = String::new();
    for req in requests(&table, mix, count, seed) {
        let cells: Vec<String> = req
            .fields
            .iter()
            .map(|(f, v)| match v {
                Value::Str(s) => format!("{f}=s:{s}"),
                Value::Int(i) => format!("{f}=i:{i}"),
                Value::Ip(a) => format!("{f}=a:{a}"),
            })
            .collect();
        if cells.iter().any(|c| c.contains(['\t', '\n'])) {
            continue;
        }
        tsv.push_str(&cells.join("\t"));
        tsv.push('\n');
        reqs.push(
            req.fields
                .iter()
                .map(|(f, v)| {
                    let v = match v {
                        Value::Str(s) => atc_router::Value::String(s.clone()),
                        Value::Int(i) => atc_router::Value::Int(*i),
                        Value::Ip(a) => atc_router::Value::IpAddr(*a),
                    };
                    (f.clone(), v)
                })
                .collect(),
        );
    }
    std::fs::write(out.join("requests.tsv"), tsv).unwrap();

    // The benchmark's loop, natively: by name, as the Lua binding adds values.
    let mut ctx = Context::new(schema.clone());
    let mut hits = 0usize;
    let mut samples = Vec::new();
    for round in 0..11 {
        let t = Instant::now();
        for req in &reqs {
            ctx.reset();
            for (f, v) in req {
                ctx.add_value(f, v.clone()).unwrap();
            }
            if router.execute(&mut ctx) {
                let r = ctx.result().unwrap();
                std::hint::black_box((r.id(), r.matched_value("http.path")));
                if round == 0 {
                    hits += 1;
                }
            }
        }
        samples.push(t.elapsed().as_nanos() as f64 / reqs.len() as f64);
    }
    samples.sort_by(f64::total_cmp);
    println!(
        "{} {}: wrote {} routes and {} requests to {}; native Rust loop: median {:.0} ns/request ({} of {} matched)",
        family.name(),
        mix.name(),
        table.routes.len(),
        reqs.len(),
        out.display(),
        samples[samples.len() / 2],
        hits,
        reqs.len()
    );
}
