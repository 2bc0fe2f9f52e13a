//! Counts the instructions of one request for a route of a family (of the mixed table): `valgrind --tool=callgrind
//! --toggle-collect=atc_router::router::Router::execute` with `EXEC=1`, or of candidate
//! collection alone without it. Args: family name, comma-separated fields to keep.
use atc_benches::{build, schema, value};
use atc_router::Context;
use atc_workload::{requests, Mix, Table};

fn main() {
    let family = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "host-prefixes".into());
    let keep = std::env::args().nth(2).unwrap_or_default();
    let schema = schema();
    let table = Table::generate(10_000, 1, false);
    let router = build(&table, &schema);
    let req = requests(&table, Mix::Realistic, 4000, 3)
        .into_iter()
        .find(|r| {
            r.target
                .is_some_and(|t| table.routes[t].family.name() == family)
        })
        .unwrap();
    let mut ctx = Context::new(schema.clone());
    for (f, v) in &req.fields {
        if keep.is_empty() || keep.split(',').any(|k| k == f) {
            ctx.add_value(f, value(v)).unwrap();
        }
    }
    eprintln!("{:?}", req.fields);
    let mut n = 0;
    let iters: usize = std::env::var("ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    for _ in 0..iters {
        n += if std::env::var("EXEC").is_ok() {
            usize::from(router.execute(&mut ctx))
        } else {
            router.candidate_count(&mut ctx)
        };
    }
    eprintln!("{n}");
}
