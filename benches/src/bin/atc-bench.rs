//! `atc-bench`: the diagnosis commands next to the criterion benchmarks, on the same docs/workload.md
//! tables and requests (see `docs/performance.md`).
//!
//! ```sh
//! cargo run --release -p atc-benches --bin atc-bench -- help
//! cargo run --release -p atc-benches --bin atc-bench -- candidates --routes 10000
//! cargo run --release -p atc-benches --bin atc-bench -- hot --routes 10000 --family mixed --mix realistic --plain
//! ```
//!
//! Invariants a change must keep:
//!
//! * Tables, requests and the timed call come from the `atc_benches` library, exactly as the
//!   benchmarks get them: `candidates` prints what the bench's `candidates` lines print, and
//!   `hot` loops over the requests the `match/<family>/<n>/ours/<mix>[+captures]` benchmark
//!   rotates through, timing the same call.
//! * The counting allocator is installed for the whole binary, as in the `router` bench, so
//!   that `memory` can count and `build` / `sync` pay what the `update/` and `sync/` benchmarks
//!   pay. No request allocates, so `hot` is unaffected.
//! * Results go to stdout, one table or line per command; a bad command line prints the usage
//!   to stderr and exits with status 2. `benches/tests/atc_bench.rs` runs every subcommand.

use std::hint::black_box;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use atc_benches::args::{self, Opt, Parsed};
use atc_benches::{
    build, candidate_stats, contexts, execute_reading_captures, live_bytes, schema, specs,
    split_by_captures, split_by_regex, CountingAlloc, MatchitTable, TABLE_SEED,
};
use atc_router::{
    parse, Context, ExplainOptions, FieldId, Linter, Router, Schema, SyncMode, Value,
};
use atc_workload::{Family, Mix, Table};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

struct Command {
    name: &'static str,
    synopsis: &'static str,
    about: &'static str,
    opts: &'static [Opt],
    run: fn(&Parsed) -> Result<(), String>,
}

const ROUTES_10K: Opt = Opt {
    name: "--routes",
    value: Some("N"),
    help: "routes in the table (default 10000)",
};

const ROUNDS: Opt = Opt {
    name: "--rounds",
    value: Some("R"),
    help: "rounds; medians are printed (default 5)",
};

const COMMANDS: &[Command] = &[
    Command {
        name: "candidates",
        synopsis: "[--routes N] [--family F] [--classes]",
        about: "candidates per request (mean / max) of every gateway family and mix; \
                with one family (stress families too), also the index summary",
        opts: &[
            ROUTES_10K,
            Opt {
                name: "--classes",
                value: None,
                help: "columns per request class (realistic, hit-regex, hit-wildcard, \
                       miss-keys, miss) instead of per mix",
            },
            Opt {
                name: "--family",
                value: Some("F"),
                help: "only this family (docs/workload.md name, `mixed`, or a stress family: \
                       field-per-route, unanchored-regex, alternations, unicode-classes); \
                       prints the index summary",
            },
        ],
        run: candidates,
    },
    Command {
        name: "memory",
        synopsis: "[--routes N] [--family F]",
        about: "live heap bytes per route of the mixed table (or a family's): all, non-regex \
                and regex routes",
        opts: &[
            Opt {
                name: "--routes",
                value: Some("N"),
                help: "routes in the table (default 100000)",
            },
            Opt {
                name: "--family",
                value: Some("F"),
                help: "the table's family (default `mixed`)",
            },
        ],
        run: memory,
    },
    Command {
        name: "hot",
        synopsis: "--routes N --family F --mix M [--plain|--captures] [--iters K] \
                   [--requests R] [--tree] [--candidates-only|--image|--image-router|--whole|--matchit]",
        about: "a tight request loop for perf and callgrind; prints ns per request",
        opts: &[
            Opt {
                name: "--routes",
                value: Some("N"),
                help: "routes in the table",
            },
            Opt {
                name: "--family",
                value: Some("F"),
                help: "the table's family (`mixed` for the mixed table; stress families too)",
            },
            Opt {
                name: "--mix",
                value: Some("M"),
                help: "hit-first, hit-middle, hit-last, miss-keys, miss or realistic",
            },
            Opt {
                name: "--plain",
                value: None,
                help: "only requests whose winner records no regex group (the bench's `<mix>`)",
            },
            Opt {
                name: "--captures",
                value: None,
                help: "only requests whose winner records groups (the bench's `<mix>+captures`)",
            },
            Opt {
                name: "--iters",
                value: Some("K"),
                help: "requests executed in all (default 5000000)",
            },
            Opt {
                name: "--requests",
                value: Some("R"),
                help: "distinct requests in rotation (default 256, as the bench)",
            },
            Opt {
                name: "--tree",
                value: None,
                help: "match from the index's tree alone, without its flat form (what a table \
                       below Router::FLAT_INDEX_MIN_ROUTES, 1,024, routes does)",
            },
            Opt {
                name: "--candidates-only",
                value: None,
                help: "only collect candidates (the index's part of a request), no evaluation",
            },
            Opt {
                name: "--image",
                value: None,
                help: "only collect candidates, from the table's index written as an image \
                       (checked once) and walked in place",
            },
            Opt {
                name: "--image-router",
                value: None,
                help: "execute, captures read, from the table written as an image and opened \
                       by an ImageRouter with its regexes compiled (what a worker sharing a \
                       node's table runs)",
            },
            Opt {
                name: "--whole",
                value: None,
                help: "the whole request, as the `request/` bench: reset, the table's fields \
                       added by id, execute, captures read",
            },
            Opt {
                name: "--matchit",
                value: None,
                help: "the same requests through the matchit path router, as the `request/` \
                       bench times it (path looked up, method picked, parameters read): the \
                       figure `--whole` is compared with (tables of method + path routes)",
            },
        ],
        run: hot,
    },
    Command {
        name: "operators",
        synopsis: "[--sizes N,N,...]",
        about: "one table per operator (each route its own literal): candidates per request \
                and ns per whole execute at each size; a form the index cannot key says so",
        opts: &[Opt {
            name: "--sizes",
            value: Some("N,N,..."),
            help: "table sizes (default 100,10000,100000)",
        }],
        run: operators,
    },
    Command {
        name: "build",
        synopsis: "[--routes N] [--rounds R] [--family F] [--threads T]",
        about: "build of the mixed table (all, non-regex and regex routes) route by route and \
                by one sync, its drop, and parse / validate alone",
        opts: &[
            ROUTES_10K,
            ROUNDS,
            Opt {
                name: "--family",
                value: Some("F"),
                help: "one family's table instead of the mixed one",
            },
            Opt {
                name: "--threads",
                value: Some("T"),
                help: "threads the one sync may use (Router::set_build_threads; default 1)",
            },
        ],
        run: build_times,
    },
    Command {
        name: "lint",
        synopsis: "[--routes N] [--rounds R]",
        about: "lint of the mixed table at once, lint after one route changes, and one explain \
                of each request of the realistic mix",
        opts: &[ROUTES_10K, ROUNDS],
        run: lint_times,
    },
    Command {
        name: "sync",
        synopsis: "[--routes N] [--rounds R]",
        about: "sync of the mixed table with none, one, 1% and all routes changed: \
                prepare (no lock needed) and apply",
        opts: &[ROUTES_10K, ROUNDS],
        run: sync_times,
    },
];

fn usage() -> String {
    let mut s = String::from(
        "usage: atc-bench <command> [options]   (atc-bench <command> --help for its options)\n\n",
    );
    for c in COMMANDS {
        s.push_str(&format!("  {} {}\n      {}\n", c.name, c.synopsis, c.about));
    }
    s.push_str(
        "\nTables and requests are those of the criterion benchmarks; see docs/performance.md.\n",
    );
    s
}

fn command_help(c: &Command) -> String {
    format!(
        "usage: atc-bench {} {}\n{}\n\n{}",
        c.name,
        c.synopsis,
        c.about,
        args::options_help(c.opts)
    )
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(name) = argv.first() else {
        eprint!("{}", usage());
        return ExitCode::from(2);
    };
    if matches!(name.as_str(), "help" | "--help" | "-h") {
        print!("{}", usage());
        return ExitCode::SUCCESS;
    }
    let Some(command) = COMMANDS.iter().find(|c| c.name == name) else {
        eprint!("atc-bench: unknown command `{name}`\n\n{}", usage());
        return ExitCode::from(2);
    };
    let rest = &argv[1..];
    if rest.iter().any(|a| a == "--help" || a == "-h") {
        print!("{}", command_help(command));
        return ExitCode::SUCCESS;
    }
    let result = args::parse(rest, command.opts).and_then(|parsed| (command.run)(&parsed));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprint!("atc-bench {name}: {e}\n\n{}", command_help(command));
            ExitCode::from(2)
        }
    }
}

// ---- candidates ----

/// Requests per mix: those of the bench's `candidates` lines.
const CANDIDATE_REQUESTS: usize = 512;

fn candidates(a: &Parsed) -> Result<(), String> {
    let n = a.count("--routes", Some(10_000))?;
    let only = a
        .value("--family")
        .map(|_| a.family("--family", None))
        .transpose()?;
    let mixes: Vec<Mix> = if a.switch("--classes") {
        Mix::classes().to_vec()
    } else {
        Mix::all().to_vec()
    };
    let schema = schema();
    println!(
        "candidates per request, mean / max, {n}-route tables, {CANDIDATE_REQUESTS} requests per mix"
    );
    let mut header = format!("{:<16}", "family");
    for mix in &mixes {
        header.push_str(&format!(" {:>11}", mix.name()));
    }
    println!("{header}");
    let mut summary = None;
    // The gateway families; a stress family only when asked for by name.
    let stress = only.filter(Family::is_stress);
    for family in Family::all().into_iter().chain(stress) {
        if only.is_some_and(|f| f != family) {
            continue;
        }
        let table = Table::family(family, n, TABLE_SEED);
        let router = build(&table, &schema);
        let mut line = format!("{:<16}", family.name());
        for &mix in &mixes {
            let mut ctxs = contexts(&table, &schema, mix, CANDIDATE_REQUESTS);
            let (mean, max) = candidate_stats(&router, &mut ctxs);
            line.push_str(&format!(" {:>11}", format!("{mean:.1} / {max}")));
        }
        println!("{line}");
        if only.is_some() {
            summary = Some(router.index_summary());
        }
    }
    if let Some(s) = summary {
        println!("\nindex summary:\n{}", s.trim_end());
    }
    Ok(())
}

// ---- operators ----

fn operators(a: &Parsed) -> Result<(), String> {
    let sizes: Vec<usize> = match a.value("--sizes") {
        Some(list) => list
            .split(',')
            .map(|n| match n.trim().parse() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("`--sizes` takes positive integers, got `{n}`")),
            })
            .collect::<Result<_, _>>()?,
        None => vec![100, 10_000, 100_000],
    };
    let schema = schema();
    println!("operator          routes  candidates mean / max   ns/request  hits  keyed");
    for family in atc_benches::operators::FAMILIES {
        for &n in &sizes {
            let row = family.measure(&schema, n, 64, Duration::from_millis(300));
            println!(
                "{:<16} {:>8}  {:>21}  {:>11.0}  {:>4.2}  {}",
                family.name,
                n,
                format!("{:.1} / {}", row.candidates.0, row.candidates.1),
                row.ns,
                row.hits,
                if family.keyed { "yes" } else { "no" }
            );
        }
    }
    Ok(())
}

// ---- memory ----

fn memory(a: &Parsed) -> Result<(), String> {
    let n = a.count("--routes", Some(100_000))?;
    let family = a.family("--family", Some(Family::Mixed))?;
    let schema = schema();
    // A thread keeps some of what its first builds allocate (the regex compiler's caches, the
    // matcher's scratch buffers) for life: a small table built and dropped first pays for them,
    // so that the first part counted is not charged for them.
    drop(build(&Table::generate(200, TABLE_SEED, false), &schema));
    let table = Table::family(family, n, TABLE_SEED);
    println!(
        "live heap bytes per route, {} table of {n} routes, each part built alone, \
         added route by route and by one sync into an empty router",
        family.name()
    );
    println!(
        "{:<10} {:>8} {:>8} {:>12} {:>12} {:>12}",
        "routes", "count", "regexes", "by add", "by sync", "total (add)"
    );
    for (name, part) in split_by_regex(&table) {
        let before = live_bytes();
        let router = build(&part, &schema);
        let added = live_bytes().saturating_sub(before);
        let (len, regexes) = (router.len(), router.regex_count());
        drop(router);
        let before = live_bytes();
        let mut router = Router::new(schema.clone());
        router
            .sync(&specs(&part), SyncMode::AllOrNothing)
            .map_err(|e| e.to_string())?;
        let synced = live_bytes().saturating_sub(before);
        drop(router);
        let per = |bytes: usize| bytes as f64 / len.max(1) as f64;
        println!(
            "{name:<10} {len:>8} {regexes:>8} {:>12.0} {:>12.0} {:>12}",
            per(added),
            per(synced),
            mib(added)
        );
    }
    Ok(())
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

// ---- hot ----

fn hot(a: &Parsed) -> Result<(), String> {
    let n = a.count("--routes", None)?;
    let family = a.family("--family", None)?;
    let mix = a.mix("--mix")?;
    let (plain, captures) = (a.switch("--plain"), a.switch("--captures"));
    if plain && captures {
        return Err("`--plain` and `--captures` exclude each other".into());
    }
    let iters = a.count("--iters", Some(5_000_000))?.max(1);
    let count = a.count("--requests", Some(256))?.max(1);
    let candidates_only = a.switch("--candidates-only");
    let image = a.switch("--image");
    let whole = a.switch("--whole");
    let image_router = a.switch("--image-router");
    let matchit = a.switch("--matchit");
    if [candidates_only, image, whole, image_router, matchit]
        .iter()
        .filter(|s| **s)
        .count()
        > 1
    {
        return Err(
            "`--candidates-only`, `--image`, `--image-router`, `--whole` and `--matchit` exclude \
             each other"
                .into(),
        );
    }

    let schema = schema();
    let table = Table::family(family, n, TABLE_SEED);
    let mut router = build(&table, &schema);
    if a.switch("--tree") {
        router.set_flat_policy(usize::MAX, usize::MAX);
    }
    let router = router;
    // As the bench: twice the requests, split by the winner, the first `count` of the side asked.
    let (mut ctxs, kind) = if plain || captures {
        let (p, c) = split_by_captures(&router, contexts(&table, &schema, mix, 2 * count));
        let mut side = if plain { p } else { c };
        side.truncate(count);
        (side, if plain { " (plain)" } else { "+captures" })
    } else {
        (contexts(&table, &schema, mix, count), " (all requests)")
    };
    if ctxs.is_empty() {
        let winner = if plain { "without" } else { "with" };
        return Err(format!(
            "no request of `{}` on this table wins a route {winner} regex groups",
            mix.name()
        ));
    }
    let what = if candidates_only {
        "candidate_count"
    } else if image {
        "the candidates of the index image"
    } else if whole {
        "reset, fields added, execute, captures read"
    } else if image_router {
        "execute from the table image, captures read"
    } else if matchit {
        "matchit's path lookup, method picked, parameters read"
    } else {
        "execute, captures read"
    };
    println!(
        "hot: {} {n} routes, {}{kind}: {} requests in rotation, {iters} iterations of {what}",
        family.name(),
        mix.name(),
        ctxs.len()
    );
    // One pass untimed (and outside `hot_loop`): contexts and caches warm, as after
    // criterion's warm-up.
    for ctx in ctxs.iter_mut() {
        black_box(execute_reading_captures(&router, ctx));
    }
    let (start, total) = if whole {
        // What a gateway adds per request: the table's fields, ids resolved once.
        let fields: Vec<Vec<(FieldId, Value)>> = ctxs
            .iter()
            .map(|ctx| {
                let mut fs = Vec::new();
                for name in router.fields() {
                    let id = schema
                        .lookup(name.as_str())
                        .expect("a routed field is in the schema");
                    fs.extend(ctx.values(name.as_str()).iter().map(|v| (id, v.clone())));
                }
                fs
            })
            .collect();
        let mut ctx = Context::new(schema.clone());
        let start = Instant::now();
        (start, whole_loop(&router, &mut ctx, &fields, iters))
    } else if matchit {
        let mtable = MatchitTable::new(&table);
        let text = |ctx: &Context, field: &str| match ctx.values(field).first() {
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        };
        let lookups: Vec<(String, String)> = ctxs
            .iter()
            .map(|ctx| (text(ctx, "http.method"), text(ctx, "http.path")))
            .collect();
        let routed = lookups.iter().filter(|(m, p)| mtable.request(m, p)).count();
        let mut ours = 0;
        for ctx in ctxs.iter_mut() {
            ours += usize::from(execute_reading_captures(&router, ctx));
        }
        if routed != ours {
            return Err(format!(
                "matchit routes {routed} of these {} requests and ours {ours}: not the same \
                 table (matchit reads only method and path)",
                ctxs.len()
            ));
        }
        let start = Instant::now();
        (start, matchit_loop(&mtable, &lookups, iters))
    } else if image_router {
        let bytes = router.to_image().map_err(|e| e.to_string())?;
        println!(
            "table image: {} bytes ({:.0} per route)",
            bytes.len(),
            bytes.len() as f64 / router.len().max(1) as f64
        );
        let table = atc_router::ImageRouter::from_bytes(router.schema().clone(), bytes)
            .map_err(|e| e.to_string())?;
        // As a gateway worker's opening thread does: no timed request compiles a regex, as
        // none does in process (the router compiled them when the routes were added).
        let (t, before) = (Instant::now(), live_bytes());
        let compiled = table.compile_regexes();
        let (took, held) = (t.elapsed(), live_bytes().saturating_sub(before));
        println!(
            "{compiled} regexes compiled when opened, in {took:.1?}, holding {held} heap bytes \
             ({:.0} per regex)",
            held as f64 / compiled.max(1) as f64
        );
        let start = Instant::now();
        (start, image_router_loop(&table, &mut ctxs, iters))
    } else if image {
        let (bytes, leaves) = router.index_image();
        println!(
            "index image: {} bytes ({:.0} per route), {leaves} splits written as leaves",
            bytes.len(),
            bytes.len() as f64 / router.len().max(1) as f64
        );
        let index = atc_router::IndexImage::open(router.schema().clone(), bytes)
            .map_err(|e| e.to_string())?;
        let start = Instant::now();
        (start, image_loop(&index, &ctxs, iters))
    } else {
        let start = Instant::now();
        (start, hot_loop(&router, &mut ctxs, iters, candidates_only))
    };
    let elapsed = start.elapsed();
    let per = elapsed.as_nanos() as f64 / iters as f64;
    if candidates_only || image {
        println!(
            "{per:.1} ns per request, {:.2} candidates per request",
            total as f64 / iters as f64
        );
    } else {
        println!("{per:.1} ns per request, {total} of {iters} routed");
    }
    Ok(())
}

/// The timed loop of `hot`: `iters` requests in rotation. Called once and not inlined, so that
/// `valgrind --toggle-collect=atc_bench::hot_loop` counts exactly the timed requests (building
/// the table, splitting the requests and the warm-up execute too). Returns the requests routed,
/// or the candidates counted.
#[inline(never)]
fn hot_loop(router: &Router, ctxs: &mut [Context], iters: usize, candidates_only: bool) -> usize {
    let (mut total, mut k) = (0, 0);
    for _ in 0..iters {
        let ctx = &mut ctxs[k];
        total += if candidates_only {
            router.candidate_count(ctx)
        } else {
            usize::from(execute_reading_captures(router, ctx))
        };
        k += 1;
        if k == ctxs.len() {
            k = 0;
        }
    }
    black_box(total)
}

/// The timed loop of `hot --image-router`: as [`hot_loop`], from the table image. Returns the
/// requests routed.
#[inline(never)]
fn image_router_loop(table: &atc_router::ImageRouter, ctxs: &mut [Context], iters: usize) -> usize {
    let (mut total, mut k) = (0, 0);
    for _ in 0..iters {
        let ctx = &mut ctxs[k];
        let hit = table.execute(ctx);
        if let Some(m) = ctx.result() {
            for c in m.captures() {
                black_box(c);
            }
        }
        total += usize::from(hit);
        k += 1;
        if k == ctxs.len() {
            k = 0;
        }
    }
    black_box(total)
}

/// The timed loop of `hot --image`: the candidates of each request from the index image (as
/// `hot_loop` with `--candidates-only` from the in-process index). Returns the candidates.
#[inline(never)]
fn image_loop(index: &atc_router::IndexImage, ctxs: &[Context], iters: usize) -> usize {
    let (mut total, mut k) = (0, 0);
    let mut bufs = atc_router::IndexImageBufs::default();
    let mut out = Vec::new();
    for _ in 0..iters {
        index.candidates(&ctxs[k], &mut bufs, &mut out);
        total += out.len();
        k += 1;
        if k == ctxs.len() {
            k = 0;
        }
    }
    black_box(total)
}

/// The timed loop of `hot --matchit`: the same requests through matchit, as the `request/`
/// bench times them. Not inlined, for the same reason as [`hot_loop`].
#[inline(never)]
fn matchit_loop(table: &MatchitTable, lookups: &[(String, String)], iters: usize) -> usize {
    let (mut total, mut k) = (0, 0);
    for _ in 0..iters {
        let (method, path) = &lookups[k];
        total += usize::from(table.request(method, path));
        k += 1;
        if k == lookups.len() {
            k = 0;
        }
    }
    black_box(total)
}

/// The timed loop of `hot --whole`: the whole request in rotation, as the `request/` bench
/// times it (one reused context). Not inlined, for the same reason as [`hot_loop`].
#[inline(never)]
fn whole_loop(
    router: &Router,
    ctx: &mut Context,
    fields: &[Vec<(FieldId, Value)>],
    iters: usize,
) -> usize {
    let (mut total, mut k) = (0, 0);
    for _ in 0..iters {
        ctx.reset();
        for (id, v) in &fields[k] {
            let added = match v {
                Value::String(s) => ctx.add_str(*id, s),
                other => ctx.add_value_by_id(*id, other.clone()),
            };
            added.expect("a request value fits its field");
        }
        total += usize::from(execute_reading_captures(router, ctx));
        k += 1;
        if k == fields.len() {
            k = 0;
        }
    }
    black_box(total)
}

// ---- build ----

fn build_times(a: &Parsed) -> Result<(), String> {
    let n = a.count("--routes", Some(10_000))?;
    let rounds = a.count("--rounds", Some(5))?.max(1);
    let threads = a.count("--threads", Some(1))?;
    let schema = schema();
    let (table, name) = match a.value("--family") {
        Some(_) => {
            let f = a.family("--family", None)?;
            (Table::family(f, n, TABLE_SEED), f.name())
        }
        None => (Table::generate(n, TABLE_SEED, false), "mixed"),
    };
    println!(
        "build of the {name} table of {n} routes, each part alone; medians of {rounds} rounds; \
         one sync on {threads} thread(s)"
    );
    println!(
        "{:<10} {:>7} {:>8} {:>11} {:>10} {:>11} {:>10} {:>10} {:>10}",
        "routes",
        "count",
        "regexes",
        "one by one",
        "per route",
        "one sync",
        "drop",
        "parse",
        "validate"
    );
    for (name, part) in split_by_regex(&table) {
        let desired = specs(&part);
        let [mut added, mut synced, mut dropped, mut parsed, mut validated] =
            [(); 5].map(|_| Vec::with_capacity(rounds));
        let mut regexes = 0;
        for _ in 0..rounds {
            let t = Instant::now();
            let router = black_box(build(&part, &schema));
            added.push(t.elapsed());
            regexes = router.regex_count();
            let t = Instant::now();
            drop(router);
            dropped.push(t.elapsed());

            let t = Instant::now();
            let mut router = Router::new(schema.clone());
            router
                .set_build_threads(threads)
                .map_err(|e| e.to_string())?;
            router
                .sync(&desired, SyncMode::AllOrNothing)
                .map_err(|e| format!("sync refused: {:?}", e.errors.first()))?;
            synced.push(t.elapsed());
            drop(black_box(router));

            parsed.push(time_each(&part, |e| {
                black_box(parse(e).expect("workload routes parse"));
            }));
            validated.push(time_each(&part, |e| {
                black_box(Router::validate(&schema, e).expect("workload routes are valid"));
            }));
        }
        let add = median(&mut added);
        println!(
            "{name:<10} {:>7} {regexes:>8} {:>11} {:>10} {:>11} {:>10} {:>10} {:>10}",
            part.routes.len(),
            fmt(add),
            fmt(add / part.routes.len().max(1) as u32),
            fmt(median(&mut synced)),
            fmt(median(&mut dropped)),
            fmt(median(&mut parsed)),
            fmt(median(&mut validated)),
        );
    }
    println!(
        "(one by one: Router::add per route; one sync: Router::sync of the whole list into an \
         empty router; validate: parse, check, compile and drop, per route)"
    );
    Ok(())
}

/// Time of `f` on every expression of `table`.
fn time_each(table: &Table, mut f: impl FnMut(&str)) -> Duration {
    let t = Instant::now();
    for r in &table.routes {
        f(&r.expression);
    }
    t.elapsed()
}

// ---- sync ----

fn sync_times(a: &Parsed) -> Result<(), String> {
    let n = a.count("--routes", Some(10_000))?;
    let rounds = a.count("--rounds", Some(5))?.max(1);
    let schema: Arc<Schema> = schema();
    let table = Table::generate(n, TABLE_SEED, false);
    let mut router = build(&table, &schema);
    println!(
        "sync of the mixed table of {n} routes to a copy with routes changed and back; \
         medians of {rounds} syncs"
    );
    println!(
        "{:<6} {:>8} {:>11} {:>11} {:>11}",
        "case", "changed", "prepare", "apply", "total"
    );
    let base = specs(&table);
    for (name, changed) in [("none", 0), ("one", 1.min(n)), ("1%", n / 100), ("all", n)] {
        let other_table = table.with_changes(changed, 9);
        let other = specs(&other_table);
        router
            .sync(&base, SyncMode::AllOrNothing)
            .map_err(|e| format!("sync refused: {:?}", e.errors.first()))?;
        let [mut prepared, mut applied, mut total] = [(); 3].map(|_| Vec::with_capacity(rounds));
        for round in 0..rounds {
            let target = if round % 2 == 0 { &other } else { &base };
            let t = Instant::now();
            let plan = router
                .prepare_sync(target, SyncMode::AllOrNothing)
                .map_err(|e| format!("sync refused: {:?}", e.errors.first()))?;
            let p = t.elapsed();
            let report = router.apply(plan);
            let all = t.elapsed();
            if report.changed != changed || report.stale {
                return Err(format!(
                    "sync `{name}` changed {} routes, not {changed}",
                    report.changed
                ));
            }
            prepared.push(p);
            applied.push(all - p);
            total.push(all);
        }
        println!(
            "{name:<6} {changed:>8} {:>11} {:>11} {:>11}",
            fmt(median(&mut prepared)),
            fmt(median(&mut applied)),
            fmt(median(&mut total)),
        );
    }
    println!(
        "(prepare: diff, parse, compile, under a read lock in SharedRouter; apply: index \
         updates, including freeing what was replaced)"
    );
    Ok(())
}

// ---- lint and explain ----

/// Routes changed one at a time for the incremental lint (spread over the table).
const LINT_CHANGES: usize = 100;

fn lint_times(a: &Parsed) -> Result<(), String> {
    let n = a.count("--routes", Some(10_000))?;
    let rounds = a.count("--rounds", Some(5))?.max(1);
    let schema = schema();
    let table = Table::generate(n, TABLE_SEED, false);
    let mut router = build(&table, &schema);
    println!("lint and explain on the mixed table of {n} routes; medians of {rounds} rounds");

    let mut full = Vec::with_capacity(rounds);
    let mut lint = Linter::new(&router);
    for _ in 0..rounds {
        let t = Instant::now();
        lint = black_box(Linter::new(&router));
        full.push(t.elapsed());
    }
    let mut kinds = std::collections::BTreeMap::new();
    for f in lint.findings() {
        *kinds.entry(f.kind.name()).or_insert(0usize) += 1;
    }
    println!(
        "full lint       {:>10}   findings: {kinds:?}",
        fmt(median(&mut full))
    );

    // One route changed (removed and added again under its id), then `Linter::update`.
    let step = (n / LINT_CHANGES).max(1);
    let mut updates = Vec::new();
    for r in table.routes.iter().step_by(step).take(LINT_CHANGES) {
        let id = atc_router::Uuid::from_bytes(r.id);
        router.remove(id);
        router
            .add(id, r.priority, &r.expression)
            .map_err(|e| e.to_string())?;
        let t = Instant::now();
        lint.update(&router, &[id]);
        updates.push(t.elapsed());
    }
    let count = updates.len();
    let max = updates.iter().max().copied().unwrap_or_default();
    println!(
        "one route       {:>10}   median of {count} changed routes (max {})",
        fmt(median(&mut updates)),
        fmt(max)
    );

    let mut ctxs = contexts(&table, &schema, Mix::Realistic, 256);
    let mut explains = Vec::with_capacity(ctxs.len());
    for ctx in &mut ctxs {
        let t = Instant::now();
        black_box(
            router
                .explain_with(ctx, ExplainOptions::default())
                .map_err(|e| e.to_string())?,
        );
        explains.push(t.elapsed());
    }
    let mut ruled = Vec::new();
    for ctx in ctxs.iter_mut().take(8) {
        let t = Instant::now();
        black_box(
            router
                .explain_with(
                    ctx,
                    ExplainOptions {
                        ruled_out: true,
                        ..ExplainOptions::default()
                    },
                )
                .map_err(|e| e.to_string())?,
        );
        ruled.push(t.elapsed());
    }
    println!(
        "explain         {:>10}   median of {} requests; with ruled-out routes {}",
        fmt(median(&mut explains)),
        explains.len(),
        fmt(median(&mut ruled))
    );
    println!(
        "(full lint: Linter::new; one route: Linter::update after the route was removed and \
         added again; explain: Router::explain_with, realistic mix)"
    );
    Ok(())
}

// ---- numbers ----

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Three significant figures in the unit that suits.
fn fmt(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    let (v, unit) = if ns >= 1e9 {
        (ns / 1e9, "s")
    } else if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else if ns >= 1e3 {
        (ns / 1e3, "µs")
    } else {
        (ns, "ns")
    };
    if v >= 100.0 {
        format!("{v:.0} {unit}")
    } else if v >= 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.2} {unit}")
    }
}
