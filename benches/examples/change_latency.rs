//! The latency of changing one route in place, ours next to Kong's library 1.7.1, as a
//! distribution (median, p99, max) rather than criterion's mean: a change that costs
//! microseconds most of the time and milliseconds once in a few thousand stalls a worker.
//!
//! ```sh
//! cargo run --release -p atc-benches --example change_latency -- [ROUTES] [CHANGES] [FAMILY,...]
//! ```
//!
//! For every workload family (or those named) and for `one-host-exact` (every route
//! `http.host == "api.example.com" && http.path == "/svc<i>/v1"`, the table where one route
//! change meets the largest map), one route in the middle of routing order is removed and added
//! again `CHANGES` times (default 20,000), flipping between two expressions of its family (its
//! paths under a token of their own, as `Table::with_changes` makes them). Ours: `Router::remove`
//! then `Router::add`, on a table settled after loading (matched from its flat index, so that
//! each change also goes through the flat index's overlay); Kong's: `remove_matcher` then `add_matcher`, what its Lua router does.
//! Each change is timed alone with `Instant` (about 20 ns of the figure).
//!
//! `change_latency -- --dump DIR [ROUTES] [FAMILY,...]` writes the same cases for the Lua
//! benchmark of both libraries (`lua/bench/kong.sh`) instead: `DIR/<table>/schema.tsv` (name,
//! type), `routes.tsv` (priority, id, expression) and `victim.tsv` (id, priority, the two
//! expressions).

use std::time::{Duration, Instant};

use atc_benches::{schema, TABLE_SEED};
use atc_router::request::HTTP_FIELDS;
use atc_router::{Router, Type, Uuid};
use atc_workload::{stress, Family, Table};

/// A table, and the route to change: its id, priority and two expressions.
struct Case {
    name: String,
    routes: Vec<(Uuid, u64, String)>,
    victim: (Uuid, u64, [String; 2]),
}

fn table_case(name: &str, table: Table) -> Option<Case> {
    let changed = table.with_changes(1, TABLE_SEED);
    let at = (0..table.routes.len())
        .find(|&i| table.routes[i].expression != changed.routes[i].expression)?;
    let r = &table.routes[at];
    Some(Case {
        name: name.to_owned(),
        routes: table
            .routes
            .iter()
            .map(|r| (Uuid::from_bytes(r.id), r.priority, r.expression.clone()))
            .collect(),
        victim: (
            Uuid::from_bytes(r.id),
            r.priority,
            [r.expression.clone(), changed.routes[at].expression.clone()],
        ),
    })
}

fn one_host_case(n: usize) -> Option<Case> {
    let shapes = (0..n).map(stress::one_host_exact_path).collect();
    table_case(
        "one-host-exact",
        Table::from_shapes(Family::HostPrefixes, shapes, TABLE_SEED),
    )
}

/// Median, p99 and max of `times`.
fn summary(mut times: Vec<Duration>) -> [Duration; 3] {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    [at(0.5), at(0.99), times[times.len() - 1]]
}

fn ours(case: &Case, changes: usize) -> [Duration; 3] {
    let mut r = Router::new(schema());
    for (id, prio, e) in &case.routes {
        r.add(*id, *prio, e).expect("a workload route compiles");
    }
    // As a loaded table is used: matched from its flat index, so that each change also goes
    // through the flat index's overlay.
    r.settle();
    let (id, prio, exprs) = &case.victim;
    let mut times = Vec::with_capacity(changes);
    for k in 0..changes {
        let t = Instant::now();
        r.remove(*id);
        r.add(*id, *prio, &exprs[(k + 1) % 2])
            .expect("a changed route compiles");
        times.push(t.elapsed());
    }
    summary(times)
}

fn kong(case: &Case, changes: usize) -> [Duration; 3] {
    let mut s = kong::schema::Schema::default();
    // The core's list of Kong's HTTP fields, in the other library's types.
    for (name, ty) in HTTP_FIELDS {
        s.add_field(
            name,
            match ty {
                Type::String => kong::ast::Type::String,
                Type::Int => kong::ast::Type::Int,
                Type::IpAddr => kong::ast::Type::IpAddr,
                Type::IpCidr => kong::ast::Type::IpCidr,
            },
        );
    }
    let mut r = kong::router::Router::new(&s);
    for (id, prio, e) in &case.routes {
        r.add_matcher(*prio as usize, *id, e)
            .expect("Kong takes a workload route");
    }
    let (id, prio, exprs) = &case.victim;
    let mut times = Vec::with_capacity(changes);
    for k in 0..changes {
        let t = Instant::now();
        r.remove_matcher(*prio as usize, *id);
        r.add_matcher(*prio as usize, *id, &exprs[(k + 1) % 2])
            .expect("Kong takes a changed route");
        times.push(t.elapsed());
    }
    summary(times)
}

/// Writes `case` for the Lua benchmark (see the module docs).
fn dump(case: &Case, dir: &std::path::Path) -> std::io::Result<()> {
    let dir = dir.join(&case.name);
    std::fs::create_dir_all(&dir)?;
    let schema: String = HTTP_FIELDS
        .iter()
        .map(|(name, ty)| format!("{name}\t{}\n", ty.name()))
        .collect();
    std::fs::write(dir.join("schema.tsv"), schema)?;
    let routes: String = case
        .routes
        .iter()
        .map(|(id, prio, e)| format!("{prio}\t{id}\t{e}\n"))
        .collect();
    std::fs::write(dir.join("routes.tsv"), routes)?;
    let (id, prio, [a, b]) = &case.victim;
    std::fs::write(dir.join("victim.tsv"), format!("{id}\t{prio}\t{a}\t{b}\n"))
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let dump_to = match args.first().map(String::as_str) {
        Some("--dump") => {
            args.remove(0);
            Some(std::path::PathBuf::from(args.remove(0)))
        }
        _ => None,
    };
    if dump_to.is_some() {
        // ROUTES [FAMILY,...]: no CHANGES.
        args.insert(1.min(args.len()), String::new());
    }
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let changes: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let wanted: Option<Vec<&str>> = args.get(2).map(|a| a.split(',').collect());
    let want = |name: &str| wanted.as_ref().is_none_or(|w| w.contains(&name));

    let mut cases: Vec<Case> = Family::all()
        .iter()
        .filter(|f| want(f.name()))
        .filter_map(|&f| table_case(f.name(), Table::family(f, n, TABLE_SEED)))
        .collect();
    if want("one-host-exact") {
        cases.extend(one_host_case(n));
    }
    if let Some(dir) = &dump_to {
        for case in &cases {
            dump(case, dir).unwrap_or_else(|e| panic!("writing {}: {e}", dir.display()));
        }
        return;
    }
    println!("one route changed in place {changes} times, tables of {n} routes");
    println!("| table | ours median / p99 / max | Kong 1.7.1 median / p99 / max |");
    println!("|---|---:|---:|");
    let us = |d: Duration| format!("{:.1} µs", d.as_nanos() as f64 / 1000.0);
    for case in &cases {
        let (o, k) = (ours(case, changes), kong(case, changes));
        println!(
            "| {} | {} / {} / {} | {} / {} / {} |",
            case.name,
            us(o[0]),
            us(o[1]),
            us(o[2]),
            us(k[0]),
            us(k[1]),
            us(k[2])
        );
    }
}
