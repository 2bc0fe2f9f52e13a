//! Criterion benchmarks on the docs/workload.md tables: for every family (and the mixed table), mix
//! and size, the time per request of our indexed matcher (`ours`), of Kong's atc-router 1.7.1
//! crate on the same table (`kong`) and of our reference evaluator (`reference`), in one run;
//! our candidates per request; the matchit path router on the rest-api family's paths; and
//! the update and sync timings on the mixed table.
//!
//! Groups and ids:
//!
//! * `match/<family>/<n>/<ours|kong|reference>/<mix>[+captures]`: requests whose winning route
//!   records regex groups are timed apart, as `+captures`, with the captures read. Before a
//!   family's benchmarks run, a `candidates match/<family>/<n> <mix> mean <m> max <x>` line per
//!   mix goes to stdout (and `scripts/bench-table` puts it in the table).
//! * `paths/<n>/<ours|matchit>/<mix>`: the rest-api family's paths as path-only routes (n = 124,
//!   the REST list itself, and 10,000, its copies under version and tenant prefixes), each
//!   request's parameters read.
//! * `request/<n>/<ours|kong|matchit>/<mix>`: the whole request a gateway pays on the rest-api
//!   family (n = 124, GitHub's REST list; 9,920, its copies for 80 tenants): reset a reused
//!   context, add method, host and path by id, execute, read the captures; Kong's crate the same
//!   way; matchit a path lookup, the method picked among the path's routes, the parameters read.
//! * `change/<family>/<n>/<ours|kong>`: one route of the family's table changed in place (removed,
//!   added again with another expression of its family), at `ATC_BENCH_CHANGE_SIZES` routes
//!   (default 1,000 and 50,000); also `one-host-exact`, one host whose routes differ by exact
//!   path only.
//! * `update/<n>/…` and `sync/<n>/…`: build, replace, add / remove / change one route, sync.
//! * `stress/<case>/<ours|kong>/<what>`: the shapes of the "no route table crashes or stalls a
//!   worker" issue, ours next to Kong's library on the same routes and requests: 500 routes of
//!   `\w{30}x<i>` on 250- and 1,000-byte paths, 200 of `\d{3,}-\w{10}/p<i>` on 1,000 bytes,
//!   one anchored 1,000-way alternation on a 64 KB path (`<what>`: `hit`, a request for a route
//!   in the middle of routing order; `miss`, the table's miss-keys request, padded to the path
//!   length; for the alternation also `branch-then-64KB`, a branch's path followed by 64 KB); `stress/first-request/<case>/<impl>`, the first request after a build (a
//!   fresh router each iteration); `stress/field-per-route/<n>/…`, a header per route at 1,000
//!   and 10,000 routes: build route by route (`build-add`), by one sync (`build-sync`, ours),
//!   `hit` and `miss`. A `candidates stress/<case> <what> mean <m> max <x>` line precedes each
//!   case. Flat sampling, 10 samples: some of these take seconds per iteration.
//!
//! Kong and the reference evaluator scan every route per request: they run only on tables of at
//! most `ATC_BENCH_LINEAR_MAX` routes (default 10,000), with 10 samples from 10,000 routes up.
//!
//! `ATC_BENCH_SIZES` (default 1000,10000,100000; 100 is allowed) sets the table sizes. With
//! `--test` (CI: each benchmark once) the default is 1000 alone, `paths` runs at 124 only, and
//! the `stress` cases run on a tenth of their routes (field-per-route at 1,000 only).
//! `ATC_BENCH_FAMILIES` (names, comma-separated) sets the families of `match/`: the gateway
//! families and the mixed table by default, stress families (`unanchored-regex`...) on demand.
//! A filter (`cargo bench -p atc-benches --bench router -- 'match/rest-api/10000/'`) also skips
//! building the tables of groups it leaves out.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use atc_benches::{
    build, candidate_stats, execute_reading_captures, fill, live_bytes, method_and_path,
    records_groups, schema, specs, value, CountingAlloc, MatchitTable, REQUEST_SEED, TABLE_SEED,
};
use atc_router::request::HTTP_FIELDS;
use atc_router::{Context, RouteSpec, Router, Schema, SyncMode, Type, Uuid};
use atc_workload::{requests, stress, Cond, Family, Mix, PathMatch, Request, Shape, Table};
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkGroup, BenchmarkId, Criterion,
    SamplingMode,
};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Requests per mix, in rotation.
const PER_MIX: usize = 256;

fn test_mode() -> bool {
    std::env::args().any(|a| a == "--test")
}

fn env_list(name: &str) -> Option<Vec<usize>> {
    std::env::var(name)
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
}

fn sizes() -> Vec<usize> {
    env_list("ATC_BENCH_SIZES").unwrap_or_else(|| {
        if test_mode() {
            vec![1_000]
        } else {
            vec![1_000, 10_000, 100_000]
        }
    })
}

/// The families of `match/` (`ATC_BENCH_FAMILIES`, names; default [`Family::all`]).
fn families() -> Vec<Family> {
    match std::env::var("ATC_BENCH_FAMILIES") {
        Ok(names) => names
            .split(',')
            .map(|n| Family::from_name(n.trim()).unwrap_or_else(|| panic!("unknown family `{n}`")))
            .collect(),
        Err(_) => Family::all().to_vec(),
    }
}

fn linear_max() -> usize {
    env_list("ATC_BENCH_LINEAR_MAX")
        .and_then(|v| v.first().copied())
        .unwrap_or(10_000)
}

/// The filters given on the command line (criterion's positional arguments, regexes).
fn filters() -> Vec<regex::Regex> {
    // criterion's options that take a value: that value is not a filter
    const VALUED: &[&str] = &[
        "--save-baseline",
        "-s",
        "--baseline",
        "-b",
        "--baseline-lenient",
        "--load-baseline",
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--profile-time",
        "--color",
        "-c",
        "--format",
        "--output-format",
        "--plotting-backend",
    ];
    let mut out = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if VALUED.contains(&a.as_str()) {
            args.next();
        } else if !a.starts_with('-') {
            if let Ok(re) = regex::Regex::new(&a) {
                out.push(re);
            }
        }
    }
    out
}

/// Whether a benchmark id could run under the command line's filters (criterion matches a
/// filter anywhere in the id).
fn wanted(ids: &[String]) -> bool {
    let f = filters();
    f.is_empty() || ids.iter().any(|id| f.iter().any(|re| re.is_match(id)))
}

fn match_ids(group: &str, impls: &[&str]) -> Vec<String> {
    let mut ids = Vec::new();
    for i in impls {
        for m in Mix::all() {
            ids.push(format!("{group}/{i}/{}", m.name()));
            ids.push(format!("{group}/{i}/{}+captures", m.name()));
        }
    }
    ids
}

// ---- Kong's atc-router 1.7.1 ----

fn kong_schema() -> kong::schema::Schema {
    let mut s = kong::schema::Schema::default();
    // The core's list of Kong's HTTP fields, in the other library's types.
    for (name, ty) in HTTP_FIELDS {
        let t = match ty {
            Type::String => kong::ast::Type::String,
            Type::Int => kong::ast::Type::Int,
            Type::IpAddr => kong::ast::Type::IpAddr,
            Type::IpCidr => kong::ast::Type::IpCidr,
        };
        s.add_field(name, t);
    }
    s
}

fn kong_router<'a>(table: &Table, schema: &'a kong::schema::Schema) -> kong::router::Router<'a> {
    let mut r = kong::router::Router::new(schema);
    for route in &table.routes {
        r.add_matcher(
            route.priority as usize,
            Uuid::from_bytes(route.id),
            &route.expression,
        )
        .unwrap_or_else(|e| panic!("Kong refuses {}: {e}", route.expression));
    }
    r
}

fn kong_context<'a>(schema: &'a kong::schema::Schema, req: &Request) -> kong::context::Context<'a> {
    let mut ctx = kong::context::Context::new(schema);
    for (f, v) in &req.fields {
        ctx.add_value(
            f,
            match v {
                atc_workload::Value::Str(s) => kong::ast::Value::String(s.clone()),
                atc_workload::Value::Int(i) => kong::ast::Value::Int(*i),
                atc_workload::Value::Ip(a) => kong::ast::Value::IpAddr(*a),
            },
        );
    }
    ctx
}

// ---- match ----

/// Times one request list with criterion, rotating through it.
fn rotate<T>(
    g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: BenchmarkId,
    items: &mut [T],
    mut run: impl FnMut(&mut T) -> bool,
) {
    g.bench_function(id, |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % items.len();
            black_box(run(&mut items[i]))
        })
    });
}

fn matching(c: &mut Criterion) {
    let schema = schema();
    let kschema = kong_schema();
    let linear = linear_max();
    for n in sizes() {
        for family in families() {
            let group = format!("match/{}/{n}", family.name());
            let slow = n <= linear;
            let impls: &[&str] = if slow {
                &["ours", "kong", "reference"]
            } else {
                &["ours"]
            };
            if !wanted(&match_ids(&group, impls)) {
                continue;
            }
            let table = Table::family(family, n, TABLE_SEED);
            let before = live_bytes();
            let router = build(&table, &schema);
            let bytes = live_bytes() - before;
            eprintln!(
                "{group}: {} routes, {} unindexed, {} regexes, {:.0} bytes per route",
                router.len(),
                router.unindexed_count(),
                router.regex_count(),
                bytes as f64 / router.len().max(1) as f64
            );
            let krouter = slow.then(|| kong_router(&table, &kschema));

            let mut g = c.benchmark_group(&group);
            g.warm_up_time(Duration::from_millis(300));
            g.measurement_time(Duration::from_secs(1));
            for mix in Mix::all() {
                let reqs = requests(&table, mix, 2 * PER_MIX, REQUEST_SEED);
                let mut ctxs: Vec<Context> = reqs
                    .iter()
                    .map(|req| {
                        let mut ctx = Context::new(schema.clone());
                        fill(&mut ctx, req);
                        ctx
                    })
                    .collect();
                let (mean, max) = candidate_stats(&router, &mut ctxs);
                println!("candidates {group} {} mean {mean:.1} max {max}", mix.name());
                // Our winner tells requests with captures apart; Kong gets the same requests.
                let mut split: [(Vec<Context>, Vec<&Request>); 2] = Default::default();
                for (req, mut ctx) in reqs.iter().zip(ctxs) {
                    let k = usize::from(records_groups(&router, &mut ctx));
                    if split[k].0.len() < PER_MIX {
                        split[k].0.push(ctx);
                        split[k].1.push(req);
                    }
                }
                for ((mut ctxs, reqs), suffix) in split.into_iter().zip(["", "+captures"]) {
                    if ctxs.is_empty() {
                        continue;
                    }
                    let name = format!("{}{suffix}", mix.name());
                    g.sample_size(50);
                    rotate(&mut g, BenchmarkId::new("ours", &name), &mut ctxs, |ctx| {
                        execute_reading_captures(&router, ctx)
                    });
                    if !slow {
                        continue;
                    }
                    // Linear scans cost up to milliseconds per request: fewer samples.
                    if n >= 10_000 {
                        g.sample_size(10);
                    }
                    if let Some(kr) = &krouter {
                        let mut kctxs: Vec<_> =
                            reqs.iter().map(|r| kong_context(&kschema, r)).collect();
                        // Same answers, or the comparison would not be fair: say so if not.
                        let differ = ctxs
                            .iter()
                            .zip(kctxs.iter_mut())
                            .map(|(ours, k)| {
                                kr.execute(k);
                                ours.result().map(|m| m.id()) != k.result.as_ref().map(|m| m.uuid)
                            })
                            .filter(|&d| d)
                            .count();
                        if differ > 0 {
                            eprintln!(
                                "{group} {name}: Kong routes {differ} of {} requests elsewhere",
                                ctxs.len()
                            );
                        }
                        rotate(&mut g, BenchmarkId::new("kong", &name), &mut kctxs, |ctx| {
                            kr.execute(ctx)
                        });
                    }
                    rotate(
                        &mut g,
                        BenchmarkId::new("reference", &name),
                        &mut ctxs,
                        |ctx| router.execute_reference(ctx),
                    );
                }
            }
            g.finish();
        }
    }
}

// ---- paths: matchit on the rest-api family's paths ----

/// The rest-api table's paths as path-only routes: one per distinct path (the methods of a path
/// share it), with the first route's id and priority.
fn rest_paths(table: &Table) -> (Table, Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    let mut routes = Vec::new();
    let mut templates = Vec::new();
    for r in &table.routes {
        let Some(Cond::Path(alts)) = r.shape.conds.iter().find(|c| matches!(c, Cond::Path(_)))
        else {
            continue;
        };
        let template = match &alts[0] {
            PathMatch::Exact(p) => p.clone(),
            PathMatch::Regex(re) => re.template(),
            _ => continue,
        };
        if seen.insert(template.clone()) {
            let shape = atc_workload::Shape::new(vec![Cond::Path(alts.clone())]);
            routes.push(atc_workload::Route::new(r.id, r.priority, r.family, shape));
            templates.push(template);
        }
    }
    (
        Table {
            routes,
            catch_all: false,
        },
        templates,
    )
}

fn path_of(req: &Request) -> String {
    req.fields
        .iter()
        .find_map(|(f, v)| match v {
            atc_workload::Value::Str(s) if f == "http.path" => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn paths(c: &mut Criterion) {
    let schema = schema();
    let ns: &[usize] = if test_mode() { &[124] } else { &[124, 10_000] };
    for &n in ns {
        let group = format!("paths/{n}");
        if !wanted(&match_ids(&group, &["ours", "matchit"])) {
            continue;
        }
        let family = Table::family(Family::RestApi, n, TABLE_SEED);
        let (table, templates) = rest_paths(&family);
        let router = build(&table, &schema);
        let mut mrouter = matchit::Router::new();
        for (i, t) in templates.iter().enumerate() {
            mrouter
                .insert(t.as_str(), i)
                .unwrap_or_else(|e| panic!("matchit refuses {t}: {e}"));
        }
        eprintln!("{group}: {} path routes", templates.len());
        let mut g = c.benchmark_group(&group);
        g.warm_up_time(Duration::from_millis(300));
        g.measurement_time(Duration::from_secs(1));
        g.sample_size(50);
        for mix in Mix::all() {
            // The rest-api family's requests, by path alone.
            let ps: Vec<String> = requests(&family, mix, PER_MIX, REQUEST_SEED)
                .iter()
                .map(path_of)
                .collect();
            let mut ctxs: Vec<Context> = ps
                .iter()
                .map(|p| {
                    let mut ctx = Context::new(schema.clone());
                    ctx.add_value("http.path", p.as_str()).unwrap();
                    ctx
                })
                .collect();
            // Both routers agree on which requests route.
            let routed = ctxs
                .iter_mut()
                .map(|c| router.execute(c))
                .filter(|&hit| hit)
                .count();
            let mrouted = ps.iter().filter(|p| mrouter.at(p).is_ok()).count();
            assert_eq!(routed, mrouted, "{group} {}", mix.name());
            rotate(
                &mut g,
                BenchmarkId::new("ours", mix.name()),
                &mut ctxs,
                |ctx| execute_reading_captures(&router, ctx),
            );
            let mut ps = ps;
            rotate(
                &mut g,
                BenchmarkId::new("matchit", mix.name()),
                &mut ps,
                |p| match mrouter.at(p) {
                    Ok(m) => {
                        black_box(m.value);
                        for kv in m.params.iter() {
                            black_box(kv);
                        }
                        true
                    }
                    Err(_) => false,
                },
            );
        }
        g.finish();
    }
}

// ---- request: what a gateway pays per request, on the rest-api family ----

/// The rest-api family (GitHub's REST route list: 124 routes of method + host + path, regexes
/// for the parameterised paths; at 9,920 its copies for 80 tenants under one host), each
/// request timed whole as a gateway pays it: reset a reused context, add the fields the table
/// uses (method, host, path; ids resolved once, as a gateway does at start), execute, read the
/// winner's captures. Kong's crate does the same through its API (its `add_value` takes owned
/// values); matchit looks the path up and picks the method among the path's routes, its
/// parameters read (no host: matchit has none, and this table has one).
fn whole_requests(c: &mut Criterion) {
    use atc_router::{FieldId, Value};
    let schema = schema();
    let kschema = kong_schema();
    let ns: &[usize] = if test_mode() { &[124] } else { &[124, 9_920] };
    for &n in ns {
        let group = format!("request/{n}");
        if !wanted(&match_ids(&group, &["ours", "kong", "matchit"])) {
            continue;
        }
        let table = Table::family(Family::RestApi, n, TABLE_SEED);
        let router = build(&table, &schema);
        let krouter = kong_router(&table, &kschema);
        let used = router.fields();
        let mrouter = MatchitTable::new(&table);
        eprintln!("{group}: {} routes, fields {used:?}", router.len());
        let mut g = c.benchmark_group(&group);
        g.warm_up_time(Duration::from_millis(300));
        g.measurement_time(Duration::from_secs(1));
        g.sample_size(50);
        for mix in Mix::all() {
            let reqs = requests(&table, mix, PER_MIX, REQUEST_SEED);
            // What a gateway reads: the table's fields, with the ids it resolved at start.
            let fields: Vec<Vec<(FieldId, Value)>> = reqs
                .iter()
                .map(|r| {
                    r.fields
                        .iter()
                        .filter(|(f, _)| used.contains(f))
                        .map(|(f, v)| (schema.lookup(f).expect("a used field"), value(v)))
                        .collect()
                })
                .collect();
            let kfields: Vec<Vec<(String, kong::ast::Value)>> = reqs
                .iter()
                .map(|r| {
                    r.fields
                        .iter()
                        .filter(|(f, _)| used.contains(f))
                        .map(|(f, v)| match v {
                            atc_workload::Value::Str(s) => {
                                (f.clone(), kong::ast::Value::String(s.clone()))
                            }
                            atc_workload::Value::Int(i) => (f.clone(), kong::ast::Value::Int(*i)),
                            atc_workload::Value::Ip(a) => (f.clone(), kong::ast::Value::IpAddr(*a)),
                        })
                        .collect()
                })
                .collect();
            let lookups: Vec<(String, String)> = reqs.iter().map(method_and_path).collect();

            let mut ctx = Context::new(schema.clone());
            let mut ours = |fs: &Vec<(FieldId, Value)>| {
                ctx.reset();
                for (id, v) in fs {
                    let added = match v {
                        Value::String(s) => ctx.add_str(*id, s),
                        other => ctx.add_value_by_id(*id, other.clone()),
                    };
                    added.expect("a workload value fits its field");
                }
                execute_reading_captures(&router, &mut ctx)
            };
            let mut kctx = kong::context::Context::new(&kschema);
            let mut kong_request = |fs: &Vec<(String, kong::ast::Value)>| {
                kctx.reset();
                for (f, v) in fs {
                    kctx.add_value(f, v.clone());
                }
                let hit = krouter.execute(&mut kctx);
                if let Some(m) = &kctx.result {
                    for kv in &m.captures {
                        black_box(kv);
                    }
                }
                hit
            };
            let matchit_request = |(method, path): &(String, String)| mrouter.request(method, path);
            // The three agree on which requests route, or the comparison would not be fair.
            let hits = |f: &mut dyn FnMut(usize) -> bool| (0..reqs.len()).filter(|&i| f(i)).count();
            let (h_ours, h_kong, h_matchit) = (
                hits(&mut |i| ours(&fields[i])),
                hits(&mut |i| kong_request(&kfields[i])),
                hits(&mut |i| matchit_request(&lookups[i])),
            );
            assert_eq!(h_ours, h_kong, "{group} {}: ours and Kong's", mix.name());
            assert_eq!(
                h_ours,
                h_matchit,
                "{group} {}: ours and matchit",
                mix.name()
            );
            let mut cands: Vec<Context> = fields
                .iter()
                .map(|fs| {
                    let mut c = Context::new(schema.clone());
                    for (id, v) in fs {
                        c.add_value_by_id(*id, v.clone()).unwrap();
                    }
                    c
                })
                .collect();
            let (mean, max) = candidate_stats(&router, &mut cands);
            println!("candidates {group} {} mean {mean:.1} max {max}", mix.name());

            let mut i = 0;
            g.bench_function(BenchmarkId::new("ours", mix.name()), |b| {
                b.iter(|| {
                    i = (i + 1) % fields.len();
                    black_box(ours(&fields[i]))
                })
            });
            g.bench_function(BenchmarkId::new("matchit", mix.name()), |b| {
                b.iter(|| {
                    i = (i + 1) % lookups.len();
                    black_box(matchit_request(&lookups[i]))
                })
            });
            // Kong's scan costs milliseconds per request at thousands of routes: fewer samples.
            if n >= 5_000 {
                g.sample_size(10);
            }
            g.bench_function(BenchmarkId::new("kong", mix.name()), |b| {
                b.iter(|| {
                    i = (i + 1) % kfields.len();
                    black_box(kong_request(&kfields[i]))
                })
            });
            g.sample_size(50);
        }
        g.finish();
    }
}

// ---- change one route, every family, ours next to Kong's ----

/// One route of each family's table changed in place, ours next to Kong's library: the route
/// removed and added again with another expression of its family (its paths under a token of
/// their own, as [`Table::with_changes`] makes them), flipping between the two. Kong's library
/// has no change of its own; a gateway calls `remove_matcher` then `add_matcher` (its Lua
/// router does exactly that), and so does this bench. Ours: [`Router::remove`] then
/// [`Router::add`] (what the Lua binding's change does through the C ABI).
fn family_changes(c: &mut Criterion) {
    let schema = schema();
    let kschema = kong_schema();
    let ns = env_list("ATC_BENCH_CHANGE_SIZES").unwrap_or_else(|| {
        if test_mode() {
            vec![1_000]
        } else {
            vec![1_000, 50_000]
        }
    });
    // Every family's table, and one host whose routes differ by exact path only.
    let mut tables: Vec<(String, MakeTable)> = families()
        .into_iter()
        .map(|f| {
            let make: Box<dyn Fn(usize) -> Table> =
                Box::new(move |n| Table::family(f, n, TABLE_SEED));
            (f.name().to_owned(), make)
        })
        .collect();
    tables.push(("one-host-exact".to_owned(), Box::new(one_host_exact)));
    for (name, make) in &tables {
        for &n in &ns {
            let group = format!("change/{name}/{n}");
            if !wanted(&[format!("{group}/ours"), format!("{group}/kong")]) {
                continue;
            }
            let table = make(n);
            let changed = table.with_changes(1, TABLE_SEED);
            let Some(at) =
                (0..n).find(|&i| table.routes[i].expression != changed.routes[i].expression)
            else {
                continue;
            };
            let (before, after) = (&table.routes[at], &changed.routes[at]);
            let id = Uuid::from_bytes(before.id);
            let exprs = [before.expression.as_str(), after.expression.as_str()];
            let mut g = c.benchmark_group(&group);
            g.warm_up_time(Duration::from_millis(300));
            g.measurement_time(Duration::from_secs(1));
            g.sample_size(30);
            let mut router = build(&table, &schema);
            let mut flip = 0;
            g.bench_function("ours", |b| {
                b.iter(|| {
                    flip ^= 1;
                    router.remove(id);
                    router
                        .add(id, before.priority, exprs[flip])
                        .expect("a changed route of the family compiles");
                })
            });
            drop(router);
            let mut krouter = kong_router(&table, &kschema);
            let prio = before.priority as usize;
            g.bench_function("kong", |b| {
                b.iter(|| {
                    flip ^= 1;
                    krouter.remove_matcher(prio, id);
                    krouter
                        .add_matcher(prio, id, exprs[flip])
                        .expect("Kong takes a changed route of the family");
                })
            });
            g.finish();
        }
    }
}

/// A table of `n` routes.
type MakeTable = Box<dyn Fn(usize) -> Table>;

/// `n` routes on one host that differ by exact path only ([`stress::one_host_exact_path`]).
fn one_host_exact(n: usize) -> Table {
    let shapes = (0..n).map(stress::one_host_exact_path).collect();
    Table::from_shapes(Family::HostPrefixes, shapes, TABLE_SEED)
}

// ---- update and sync (mixed table) ----

fn updates(c: &mut Criterion) {
    let schema = schema();
    for n in sizes() {
        let ids: Vec<String> = ["build", "replace", "add-one", "remove-one", "change-one"]
            .iter()
            .map(|b| format!("update/{n}/{b}"))
            .collect();
        if !wanted(&ids) {
            continue;
        }
        let table = Table::generate(n, TABLE_SEED, false);
        let mut g = c.benchmark_group(format!("update/{n}"));
        g.warm_up_time(Duration::from_millis(500));
        g.measurement_time(Duration::from_secs(2));
        if n >= 10_000 {
            g.sample_size(10);
        }
        // The build alone: the router built is freed outside the measurement.
        g.bench_function("build", |b| {
            b.iter_with_large_drop(|| build(&table, &schema))
        });
        // What a gateway without sync does on a change: build a new router while the current
        // one serves, then drop the current one. The fair comparison for a sync in which
        // everything changed, which also frees the table it replaces.
        let mut current = build(&table, &schema);
        g.bench_function("replace", |b| {
            b.iter(|| {
                let old = std::mem::replace(&mut current, build(&table, &schema));
                drop(old);
            })
        });
        drop(current);

        let mut router = build(&table, &schema);
        // Non-regex routes of the table's mix, fresh ids.
        let extras: Vec<_> = (0..64u64)
            .map(|s| table.extra_route(s))
            .filter(|r| !r.expression.contains('~'))
            .collect();
        let add_remove = |router: &mut Router, iters: u64, time_add: bool| {
            let mut spent = Duration::ZERO;
            for i in 0..iters {
                let r = &extras[i as usize % extras.len()];
                let id = Uuid::from_bytes(r.id);
                let t = Instant::now();
                router.add(id, r.priority, &r.expression).unwrap();
                if time_add {
                    spent += t.elapsed();
                }
                let t = Instant::now();
                router.remove(id);
                if !time_add {
                    spent += t.elapsed();
                }
            }
            spent
        };
        g.bench_function("add-one", |b| {
            b.iter_custom(|iters| add_remove(&mut router, iters, true))
        });
        g.bench_function("remove-one", |b| {
            b.iter_custom(|iters| add_remove(&mut router, iters, false))
        });
        // Change: the same id gets another expression (remove + add).
        let victim = &table.routes[n / 2];
        let id = Uuid::from_bytes(victim.id);
        let mut flip = false;
        g.bench_function("change-one", |b| {
            b.iter(|| {
                flip = !flip;
                let r = &extras[usize::from(flip)];
                router.remove(id);
                router
                    .add(
                        id,
                        victim.priority,
                        if flip {
                            &r.expression
                        } else {
                            &victim.expression
                        },
                    )
                    .unwrap();
            })
        });
        g.finish();
    }
}

/// Sync of a whole desired list in which nothing, one route, 1% or all routes changed,
/// alternating between the table and its changed copy so every iteration does the same work.
/// From 10,000 routes up (with `--test`, at every size, so it never rots).
fn syncs(c: &mut Criterion) {
    let schema = schema();
    for n in sizes().into_iter().filter(|n| *n >= 10_000 || test_mode()) {
        let ids: Vec<String> = ["none", "one", "1%", "all", "build", "rebuild"]
            .iter()
            .map(|b| format!("sync/{n}/{b}"))
            .collect();
        if !wanted(&ids) {
            continue;
        }
        let table = Table::generate(n, TABLE_SEED, false);
        let mut router = build(&table, &schema);
        let mut g = c.benchmark_group(format!("sync/{n}"));
        g.warm_up_time(Duration::from_millis(500));
        g.measurement_time(Duration::from_secs(3));
        g.sample_size(10);
        for (name, changed) in [("none", 0), ("one", 1), ("1%", n / 100), ("all", n)] {
            let changed_table = table.with_changes(changed, 9);
            let (a, b) = (specs(&table), specs(&changed_table));
            // Start every case from the base table (an earlier case may have left the router on
            // its changed copy). `flip` lives outside the closure: criterion calls it again for
            // measurement after warm-up, and each call must sync to the other table.
            router.sync(&a, SyncMode::AllOrNothing).unwrap();
            let mut flip = false;
            g.bench_function(name, |bench| {
                bench.iter(|| {
                    flip = !flip;
                    let target = if flip { &b } else { &a };
                    let report = router.sync(target, SyncMode::AllOrNothing).unwrap();
                    assert_eq!(report.changed, changed);
                })
            });
            if changed == n {
                // What "all" is compared with: a fresh build of the same desired lists (the
                // changed copy's regexes differ, so its build costs a little more than the
                // table's), the router built being freed outside the measurement.
                g.bench_function("build", |bench| {
                    bench.iter_with_large_drop(|| {
                        flip = !flip;
                        let target = if flip { &b } else { &a };
                        build_specs(&schema, target)
                    })
                });
                // What a gateway without sync does on the same change: a fresh build of the
                // desired list replaces the router, and the replaced one is freed, as the sync
                // frees the routes it replaces.
                let mut current = build_specs(&schema, &a);
                g.bench_function("rebuild", |bench| {
                    bench.iter(|| {
                        flip = !flip;
                        let target = if flip { &b } else { &a };
                        drop(std::mem::replace(
                            &mut current,
                            build_specs(&schema, target),
                        ));
                    })
                });
            }
        }
        g.finish();
    }
}

/// A router built from a desired list one `add` at a time, as without sync.
fn build_specs(schema: &Arc<Schema>, specs: &[RouteSpec<'_>]) -> Router {
    let mut fresh = Router::new(schema.clone());
    for r in specs {
        fresh.add(r.id, r.priority, r.expression).unwrap();
    }
    fresh
}

// ---- stress: the shapes of the "no route table crashes or stalls a worker" issue ----

/// `n` routes, a tenth of them with `--test` (at least one).
fn scaled(n: usize) -> usize {
    if test_mode() {
        (n / 10).max(1)
    } else {
        n
    }
}

/// One fixed stress case: its table and the requests of each side (`hit`, `miss`).
struct StressCase {
    name: String,
    table: Table,
    requests: Vec<(&'static str, Vec<Request>)>,
}

/// Requests in rotation per side.
const STRESS_REQUESTS: usize = 16;

impl StressCase {
    fn new(name: String, family: Family, shapes: Vec<Shape>) -> StressCase {
        let table = Table::from_shapes(family, shapes, TABLE_SEED);
        // hit-first for a table of one route (its middle is its first)
        let hit = if table.routes.len() == 1 {
            Mix::HitFirst
        } else {
            Mix::HitMiddle
        };
        let requests = vec![
            ("hit", requests(&table, hit, STRESS_REQUESTS, REQUEST_SEED)),
            (
                "miss",
                requests(&table, Mix::MissKeys, STRESS_REQUESTS, REQUEST_SEED),
            ),
        ];
        StressCase {
            name,
            table,
            requests,
        }
    }

    /// Adds the side `name`: the `hit` requests with their paths grown to `len` bytes by a `/`
    /// and letters (a branch's path, then what makes an anchored pattern fail only at its end).
    fn with_long_hits(mut self, name: &'static str, len: usize) -> StressCase {
        let mut long = self.requests[0].1.clone();
        for req in &mut long {
            for (f, v) in &mut req.fields {
                if let (true, atc_workload::Value::Str(p)) = (f == "http.path", v) {
                    p.push('/');
                    let pad = len.saturating_sub(p.len());
                    p.extend(std::iter::repeat_n('a', pad));
                }
            }
        }
        self.requests.push((name, long));
        self
    }

    fn ids(&self) -> Vec<String> {
        let mut ids = Vec::new();
        for i in ["ours", "kong"] {
            for (what, _) in &self.requests {
                ids.push(format!("stress/{}/{i}/{what}", self.name));
            }
            ids.push(format!("stress/first-request/{}/{i}", self.name));
        }
        ids
    }
}

fn stress_group<'c>(
    c: &'c mut Criterion,
    name: &str,
) -> BenchmarkGroup<'c, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_secs(2));
    g
}

/// Times ours and Kong's on the case's requests, after printing our candidates per request and
/// saying on stderr where Kong's answers differ.
fn stress_match(c: &mut Criterion, case: &StressCase, schema: &Arc<Schema>) {
    let kschema = kong_schema();
    let router = build(&case.table, schema);
    let krouter = kong_router(&case.table, &kschema);
    let group = format!("stress/{}", case.name);
    eprintln!(
        "{group}: {} routes, {} regexes, {} unindexed",
        router.len(),
        router.regex_count(),
        router.unindexed_count()
    );
    let mut g = stress_group(c, &group);
    for (what, reqs) in &case.requests {
        let mut ctxs: Vec<Context> = reqs
            .iter()
            .map(|req| {
                let mut ctx = Context::new(schema.clone());
                fill(&mut ctx, req);
                ctx
            })
            .collect();
        let (mean, max) = candidate_stats(&router, &mut ctxs);
        println!("candidates {group} {what} mean {mean:.1} max {max}");
        let mut kctxs: Vec<_> = reqs.iter().map(|r| kong_context(&kschema, r)).collect();
        let differ = ctxs
            .iter_mut()
            .zip(kctxs.iter_mut())
            .map(|(ours, k)| {
                router.execute(ours);
                krouter.execute(k);
                ours.result().map(|m| m.id()) != k.result.as_ref().map(|m| m.uuid)
            })
            .filter(|&d| d)
            .count();
        if differ > 0 {
            eprintln!(
                "{group} {what}: Kong routes {differ} of {} requests elsewhere",
                ctxs.len()
            );
        }
        rotate(&mut g, BenchmarkId::new("ours", what), &mut ctxs, |ctx| {
            execute_reading_captures(&router, ctx)
        });
        rotate(&mut g, BenchmarkId::new("kong", what), &mut kctxs, |ctx| {
            krouter.execute(ctx)
        });
    }
    g.finish();
}

/// The first request (the case's first miss) after a build: a fresh router each iteration, its
/// build and drop outside the measurement.
fn first_request(c: &mut Criterion, case: &StressCase, schema: &Arc<Schema>) {
    let kschema = kong_schema();
    let req = &case
        .requests
        .iter()
        .find(|r| r.0 == "miss")
        .expect("a miss")
        .1[0];
    let mut g = stress_group(c, &format!("stress/first-request/{}", case.name));
    g.bench_function("ours", |b| {
        b.iter_batched(
            || {
                let mut ctx = Context::new(schema.clone());
                fill(&mut ctx, req);
                (build(&case.table, schema), ctx)
            },
            |(router, mut ctx)| {
                black_box(router.execute(&mut ctx));
                (router, ctx)
            },
            BatchSize::PerIteration,
        )
    });
    g.bench_function("kong", |b| {
        b.iter_batched(
            || {
                (
                    kong_router(&case.table, &kschema),
                    kong_context(&kschema, req),
                )
            },
            |(router, mut ctx)| {
                black_box(router.execute(&mut ctx));
                (router, ctx)
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn stress_cases() -> Vec<StressCase> {
    let fam = Family::UnanchoredRegex;
    let mut cases = Vec::new();
    for len in [250, 1000] {
        let n = scaled(500);
        cases.push(StressCase::new(
            format!("word-run-{n}/{len}B"),
            fam,
            (0..n).map(|i| stress::word_run(i, len)).collect(),
        ));
    }
    let n = scaled(200);
    cases.push(StressCase::new(
        format!("digits-word-{n}/1000B"),
        fam,
        (0..n).map(|i| stress::digits_word(i, 1000)).collect(),
    ));
    let branches = scaled(1000);
    cases.push(
        StressCase::new(
            format!("alternation-{branches}/64KB"),
            Family::Alternations,
            vec![stress::alternation(0, branches, 64 * 1024)],
        )
        .with_long_hits("branch-then-64KB", 64 * 1024),
    );
    cases.push(StressCase::new(
        "word-run-1/250B".into(),
        fam,
        vec![stress::word_run(0, 250)],
    ));
    cases
}

fn stresses(c: &mut Criterion) {
    let schema = schema();
    for case in stress_cases() {
        let ids = case.ids();
        let (first, matching): (Vec<String>, Vec<String>) =
            ids.into_iter().partition(|i| i.contains("/first-request/"));
        // `word-run-1`: the first request of one route, nothing else
        if case.name != "word-run-1/250B" && wanted(&matching) {
            stress_match(c, &case, &schema);
        }
        if case.name.starts_with("word-run") && wanted(&first) {
            first_request(c, &case, &schema);
        }
    }
    field_per_route(c, &schema);
}

/// A header per route: build route by route (ours and Kong's), by one sync (ours), and match.
fn field_per_route(c: &mut Criterion, schema: &Arc<Schema>) {
    let kschema = kong_schema();
    let ns: &[usize] = if test_mode() {
        &[1_000]
    } else {
        &[1_000, 10_000]
    };
    for &n in ns {
        let shapes = (0..n).map(stress::own_header).collect();
        let case = StressCase::new(
            format!("field-per-route/{n}"),
            Family::FieldPerRoute,
            shapes,
        );
        let group = format!("stress/{}", case.name);
        let build_ids: Vec<String> = ["ours/build-add", "kong/build-add", "ours/build-sync"]
            .iter()
            .map(|b| format!("{group}/{b}"))
            .collect();
        if wanted(&build_ids) {
            let specs = specs(&case.table);
            let mut g = stress_group(c, &group);
            g.bench_function("ours/build-add", |b| {
                b.iter_with_large_drop(|| build(&case.table, schema))
            });
            g.bench_function("kong/build-add", |b| {
                b.iter_with_large_drop(|| kong_router(&case.table, &kschema))
            });
            g.bench_function("ours/build-sync", |b| {
                b.iter_with_large_drop(|| {
                    let mut r = Router::new(schema.clone());
                    r.sync(&specs, SyncMode::AllOrNothing).unwrap();
                    r
                })
            });
            g.finish();
        }
        if wanted(&case.ids()) {
            stress_match(c, &case, schema);
        }
    }
}

criterion_group!(
    benches,
    matching,
    paths,
    whole_requests,
    family_changes,
    updates,
    syncs,
    stresses
);
criterion_main!(benches);
