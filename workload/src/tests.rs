//! The tables and requests docs/workload.md asks for, checked with the core crate (its parser,
//! validation and reference evaluator: the language's one implementation).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use atc_router::{Context, Limits, Router, Schema, Uuid};

use crate::rest::{self, ParamKind, Piece};
use crate::words::{self, ALL_ROOTS, WORDS};
use crate::*;

fn schema() -> Arc<Schema> {
    Arc::new(atc_router::request::http_schema())
}

/// The reference evaluator builds each regex with the `regex` crate under the router's
/// `regex_size_limit`, and takes a regex it cannot build for one that never matches; the
/// stress families' longest Unicode regexes come near the default 10 MiB; a larger limit keeps
/// them in reach of both.
fn limits() -> Limits {
    Limits {
        regex_size_limit: 16 << 20,
        ..Limits::default()
    }
}

fn router(table: &Table, schema: &Arc<Schema>) -> Router {
    let mut r = Router::with_limits(schema.clone(), limits());
    for route in &table.routes {
        r.add(
            Uuid::from_bytes(route.id),
            route.priority,
            &route.expression,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", route.expression));
    }
    r
}

fn context(schema: &Arc<Schema>, fields: &[(String, Value)]) -> Context {
    let mut ctx = Context::new(schema.clone());
    for (f, v) in fields {
        let v = match v {
            Value::Str(s) => atc_router::Value::String(s.clone()),
            Value::Int(i) => atc_router::Value::Int(*i),
            Value::Ip(a) => atc_router::Value::IpAddr(*a),
        };
        ctx.add_value(f, v).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
    ctx
}

/// The route the reference evaluator picks, as an index into the table.
fn winner(table: &Table, router: &Router, ctx: &mut Context) -> Option<usize> {
    if !router.execute_reference(ctx) {
        return None;
    }
    let id = ctx.result().unwrap().id();
    table
        .routes
        .iter()
        .position(|r| Uuid::from_bytes(r.id) == id)
}

const SIZES: [usize; 5] = [0, 1, 7, 150, 1500];

#[test]
fn every_expression_is_valid_and_rendered_from_its_shape() {
    let schema = schema();
    for family in Family::all() {
        for n in SIZES {
            let t = Table::family(family, n, 3);
            assert_eq!(t.routes.len(), n, "{family:?}");
            router(&t, &schema);
            for r in &t.routes {
                // kong-traditional's are written as Kong's transform writes them
                if family != Family::KongTraditional {
                    assert_eq!(r.expression, r.shape.expression());
                }
                assert!(!r.expression.contains(['\n', '\t']), "{}", r.expression);
                if family != Family::Mixed {
                    assert_eq!(r.family, family);
                }
            }
        }
    }
    let t = Table::generate(300, 4, true);
    router(&t, &schema);
}

#[test]
fn deterministic() {
    for family in [Family::Mixed, Family::RestApi, Family::TenantHeader] {
        let a = Table::family(family, 700, 42);
        let b = Table::family(family, 700, 42);
        assert_eq!(a, b);
        assert_ne!(a, Table::family(family, 700, 43));
        for mix in Mix::all() {
            assert_eq!(requests(&a, mix, 300, 9), requests(&b, mix, 300, 9));
        }
        assert_ne!(
            requests(&a, Mix::Realistic, 50, 9),
            requests(&a, Mix::Realistic, 50, 10)
        );
        assert_eq!(a.with_changes(7, 3), b.with_changes(7, 3));
        assert_eq!(a.extra_route(5), b.extra_route(5));
        assert_ne!(a.extra_route(5), a.extra_route(6));
    }
    assert_eq!(
        Table::generate(500, 8, false),
        Table::family(Family::Mixed, 500, 8)
    );
    assert_eq!(Table::generate(500, 8, true), Table::generate(500, 8, true));
}

#[test]
fn the_mixed_table_follows_the_shares() {
    let counts = Family::counts(1000);
    assert_eq!(
        counts.map(|(_, k)| k),
        [300, 200, 100, 80, 80, 80, 60, 40, 40, 20]
    );
    for n in 0..300 {
        assert_eq!(Family::counts(n).iter().map(|c| c.1).sum::<usize>(), n);
    }
    let t = Table::generate(1000, 2, true);
    let mut got: BTreeMap<Family, usize> = BTreeMap::new();
    for r in &t.routes[..1000] {
        *got.entry(r.family).or_default() += 1;
    }
    for (family, want) in counts {
        assert_eq!(got.get(&family).copied().unwrap_or(0), want, "{family:?}");
    }
    assert_eq!(t.routes[1000].expression, CATCH_ALL_EXPRESSION);
    // generation order is not family order
    assert!(t.routes[..20]
        .iter()
        .any(|r| r.family != t.routes[0].family));
}

/// Routes per exact host, and the routes naming no host at all.
fn host_stats(t: &Table) -> (BTreeMap<String, usize>, usize) {
    let mut hosts: BTreeMap<String, usize> = BTreeMap::new();
    let mut none = 0;
    for r in &t.routes {
        let mut named = false;
        for c in &r.shape.conds {
            match c {
                Cond::Host(h) => {
                    *hosts.entry(h.clone()).or_default() += 1;
                    named = true;
                }
                Cond::HostSuffix(_) => named = true,
                _ => {}
            }
        }
        if !named {
            none += 1;
        }
    }
    (hosts, none)
}

#[test]
fn hosts_of_the_mixed_10k_table_are_heavy_tailed() {
    let t = Table::generate(10_000, 1, false);
    let (hosts, none) = host_stats(&t);
    let (busiest, top) = hosts.iter().max_by_key(|h| *h.1).unwrap();
    let mut sizes: Vec<usize> = hosts.values().copied().collect();
    sizes.sort_unstable();
    let median = sizes[sizes.len() / 2];
    let few_dozen = sizes.iter().filter(|&&s| (12..=100).contains(&s)).count();
    println!(
        "mixed 10k: busiest host {busiest} {:.1}%, no host {:.1}%, {} hosts, median {median} \
         routes per host, {few_dozen} hosts with 12-100 routes",
        *top as f64 / 100.0,
        none as f64 / 100.0,
        hosts.len()
    );
    assert_eq!(busiest, API_HOST);
    assert!(*top >= 2_000, "busiest host carries {top}");
    assert!(none >= 2_500, "{none} routes name no host");
    assert!((24..=60).contains(&median), "median host carries {median}");
    assert!(
        few_dozen * 4 >= hosts.len() * 3,
        "{few_dozen} of {}",
        hosts.len()
    );
}

#[test]
fn priorities_mostly_distinct_and_ids_random() {
    let t = Table::family(Family::RestApi, 2000, 5).with_catch_all();
    let order = t.priority_order();
    let mut seen = order.clone();
    seen.sort_unstable();
    assert_eq!(seen, (0..t.routes.len()).collect::<Vec<_>>());
    for w in order.windows(2) {
        let (a, b) = (&t.routes[w[0]], &t.routes[w[1]]);
        assert!((a.priority, a.id) > (b.priority, b.id));
    }
    // exactly 10% in equal-priority pairs (the catch-all aside)
    let mut by_prio: BTreeMap<u64, usize> = BTreeMap::new();
    for r in &t.routes[..2000] {
        *by_prio.entry(r.priority).or_default() += 1;
    }
    assert!(by_prio.values().all(|&c| c <= 2));
    assert_eq!(by_prio.values().filter(|&&c| c > 1).sum::<usize>(), 200);
    assert_ne!(order[..10], (0..10).collect::<Vec<_>>()[..]);
    let ids: HashSet<[u8; 16]> = t.routes.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), t.routes.len());
    for r in &t.routes {
        assert_eq!((r.id[6] >> 4, r.id[8] >> 6), (4, 0b10));
        assert_eq!(&r.id_string()[14..15], "4");
    }
}

#[test]
fn catch_all_iff_asked() {
    for n in [0, 1, 5, 100] {
        let with = Table::generate(n, 8, true);
        let without = Table::generate(n, 8, false);
        let count = |t: &Table| {
            t.routes
                .iter()
                .filter(|r| r.expression == CATCH_ALL_EXPRESSION)
                .count()
        };
        assert_eq!((count(&with), count(&without)), (1, 0));
        assert_eq!(with.catch_all_index(), Some(n));
        assert_eq!(without.catch_all_index(), None);
        assert_eq!(*with.priority_order().last().unwrap(), n);
        assert_eq!(with.routes[n].priority, 0);
        assert!(without.routes.iter().all(|r| r.priority >= PRIORITY_STEP));
    }
}

/// For every hit request: its target alone matches it, and the table's winner is the target
/// or a route before it in routing order (which legitimately shares its keys). Miss and
/// miss-keys requests match nothing but the catch-all. Returns, per hit mix, how many requests
/// reached their target and how many an earlier route.
fn check_requests(t: &Table, count: usize) -> BTreeMap<&'static str, (usize, usize)> {
    let schema = schema();
    let r = router(t, &schema);
    let position: HashMap<usize, usize> = t
        .priority_order()
        .into_iter()
        .enumerate()
        .map(|(p, i)| (i, p))
        .collect();
    let mut alone: HashMap<usize, Router> = HashMap::new();
    let mut out = BTreeMap::new();
    for mix in Mix::all()
        .into_iter()
        .chain([Mix::HitRegex, Mix::HitWildcard])
    {
        let (mut reached, mut shadowed) = (0, 0);
        for req in requests(t, mix, count, 1234) {
            let got = winner(t, &r, &mut context(&schema, &req.fields));
            let Some(target) = req.target else {
                assert_eq!(got, t.catch_all_index(), "{mix:?} {req:?}");
                continue;
            };
            let one = alone.entry(target).or_insert_with(|| {
                router(
                    &Table {
                        routes: vec![t.routes[target].clone()],
                        catch_all: false,
                    },
                    &schema,
                )
            });
            assert!(
                one.execute_reference(&mut context(&schema, &req.fields)),
                "{mix:?}: {req:?} does not match its target {}",
                t.routes[target].expression
            );
            let got = got.expect("a request its target matches is routed");
            if got == target {
                reached += 1;
            } else {
                assert!(
                    position[&got] < position[&target],
                    "{mix:?}: {} won over its target {}",
                    t.routes[got].expression,
                    t.routes[target].expression
                );
                shadowed += 1;
            }
        }
        if mix.is_hit() {
            out.insert(mix.name(), (reached, shadowed));
        }
    }
    out
}

#[test]
fn requests_reach_their_target_and_misses_match_nothing() {
    for family in Family::all() {
        for (n, count) in [(1, 8), (7, 16), (600, 60)] {
            let t = Table::family(family, n, 6);
            let hits = check_requests(&t, count);
            let (reached, shadowed) = hits.values().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
            if n == 600 {
                println!(
                    "{:>15}: {reached} hit requests reached their target, {shadowed} an earlier \
                     route",
                    family.name()
                );
            }
            // Sharing keys shadows a route now and then, never often.
            assert!(
                shadowed * 20 <= reached + shadowed,
                "{family:?} {n}: {hits:?}"
            );
        }
    }
    let t = Table::generate(600, 7, true);
    check_requests(&t, 40);
}

#[test]
fn the_rest_api_family_reaches_every_target() {
    // no two routes of the list take the same request, whatever the priorities
    for n in [124, 500] {
        let hits = check_requests(&Table::family(Family::RestApi, n, 9), 80);
        assert!(hits.values().all(|h| h.1 == 0), "{hits:?}");
    }
}

#[test]
fn miss_keys_requests_carry_the_shared_keys() {
    let t = Table::generate(3000, 12, false);
    let keys = t.shared_keys();
    assert_eq!(keys.host.as_deref(), Some(API_HOST));
    assert_eq!(keys.method.as_deref(), Some("GET"));
    assert_eq!(keys.port, Some(8443));
    assert!(
        keys.headers.iter().any(|(h, _)| h == "x_tenant"),
        "{keys:?}"
    );
    for req in requests(&t, Mix::MissKeys, 20, 3) {
        assert_eq!(req.target, None);
        let has = |f: &str, v: &Value| req.fields.iter().any(|x| x.0 == f && &x.1 == v);
        assert!(has("http.host", &Value::Str(API_HOST.into())));
        assert!(has("net.dst.port", &Value::Int(8443)));
    }
    // each family on its own has its own busiest keys
    let rest = Table::family(Family::RestApi, 1000, 1).shared_keys();
    assert_eq!(
        (rest.host.as_deref(), rest.host_routes),
        (Some(API_HOST), 1000)
    );
    let wild = Table::family(Family::WildcardHosts, 1000, 1).shared_keys();
    assert!(wild.host.unwrap().starts_with("www.tenant-"));
    let split = Table::family(Family::MethodSplit, 1000, 1).shared_keys();
    assert_eq!((split.host, split.method.as_deref()), (None, Some("GET")));
}

#[test]
fn with_changes_changes_exactly_k() {
    let t = Table::generate(1000, 6, true);
    for k in [0, 1, 10, 1000, 5000] {
        let c = t.with_changes(k, 77);
        let changed: Vec<usize> = (0..t.routes.len())
            .filter(|&i| t.routes[i].expression != c.routes[i].expression)
            .collect();
        assert_eq!(changed.len(), k.min(1000));
        assert_eq!(c.catch_all_index(), t.catch_all_index());
        for (a, b) in t.routes.iter().zip(&c.routes) {
            assert_eq!((a.id, a.priority, a.family), (b.id, b.priority, b.family));
            assert_eq!(b.expression, b.shape.expression());
        }
    }
    // chained changes with the same seed still make fresh routes, and requests reach them
    let c2 = t.with_changes(300, 77).with_changes(300, 77);
    let exprs: HashSet<&str> = c2.routes.iter().map(|r| r.expression.as_str()).collect();
    assert_eq!(exprs.len(), c2.routes.len());
    check_requests(&c2, 60);
}

#[test]
fn extra_routes_are_fresh() {
    let t = Table::generate(500, 12, false);
    let mut t2 = t.clone();
    for s in 0..100 {
        let r = t2.extra_route(s);
        assert!(t2.routes.iter().all(|x| x.id != r.id));
        assert!(r.priority >= PRIORITY_STEP);
        assert_eq!(r.expression, r.shape.expression());
        t2.routes.push(r);
    }
    check_requests(&t2, 60);
    assert_eq!(
        Table::family(Family::Mixed, 0, 1).extra_route(1).family,
        Family::PathOnly
    );
}

#[test]
fn mix_targets() {
    let t = Table::generate(1000, 31, true);
    let order = t.priority_order();
    let pos = |i: usize| order.iter().position(|&x| x == i).unwrap();
    let ca = t.catch_all_index();
    assert!(requests(&t, Mix::HitFirst, 50, 1)
        .iter()
        .all(|r| r.target == Some(order[0])));
    for r in requests(&t, Mix::HitMiddle, 200, 1) {
        assert!((490..=510).contains(&pos(r.target.unwrap())));
    }
    for r in requests(&t, Mix::HitLast, 200, 1) {
        let p = pos(r.target.unwrap());
        assert!(p >= 950 && r.target != ca, "{p}");
    }
    for r in requests(&t, Mix::Miss, 50, 1) {
        assert_eq!(r.target, None);
        assert!(r.fields.contains(&(
            "http.host".into(),
            Value::Str("no-such-host.invalid".into())
        )));
    }
    let real = requests(&t, Mix::Realistic, 5000, 1);
    let mut per_target: HashMap<Option<usize>, usize> = HashMap::new();
    for r in &real {
        *per_target.entry(r.target).or_default() += 1;
    }
    let (busiest, top) = per_target.iter().max_by_key(|e| *e.1).unwrap();
    // Zipf 1.1: rank 1 gets ~1/H(1000,1.1) ≈ 19%; popularity is independent of priority
    assert!(*top > 500, "{top}");
    assert_ne!(*busiest, Some(order[0]));
    assert!(per_target.len() > 300, "{}", per_target.len());
    assert!(real.iter().all(|r| r.target != ca));
    // most paths are distinct (random ids), so a path cache does not help
    let paths: HashSet<&Value> = real
        .iter()
        .filter_map(|r| {
            r.fields
                .iter()
                .find(|(n, _)| n == "http.path")
                .map(|f| &f.1)
        })
        .collect();
    assert!(paths.len() > 2500, "{}", paths.len());
}

#[test]
fn segment_fields_follow_the_path() {
    let t = Table::family(Family::OtherOperators, 2000, 41);
    let mut checked = 0;
    for r in requests(&t, Mix::Realistic, 2000, 2) {
        let segs: Vec<(&String, &Value)> = r
            .fields
            .iter()
            .filter(|(n, _)| n.starts_with("http.path.segments."))
            .map(|(n, v)| (n, v))
            .collect();
        if segs.is_empty() {
            continue;
        }
        checked += 1;
        let Some((_, Value::Str(p))) = r.fields.iter().find(|(n, _)| n == "http.path") else {
            panic!("no path")
        };
        for (i, (seg, (name, value))) in p[1..].split('/').zip(&segs).enumerate() {
            assert_eq!(**name, format!("http.path.segments.{i}"));
            assert_eq!(**value, Value::Str(seg.into()));
        }
        assert_eq!(segs.len(), p[1..].split('/').count());
    }
    assert!(checked > 0);
}

#[test]
fn names_round_trip() {
    for f in Family::all() {
        assert_eq!(Family::from_name(f.name()), Some(f));
    }
    for m in Mix::all() {
        assert_eq!(Mix::from_name(m.name()), Some(m));
    }
}

fn prefix_free(words: &[&str]) -> Result<(), String> {
    for a in words {
        for b in words {
            if a != b && b.starts_with(a) {
                return Err(format!("{a:?} is a prefix of {b:?}"));
            }
        }
    }
    let unique: HashSet<&&str> = words.iter().collect();
    if unique.len() != words.len() {
        return Err("a word repeats".into());
    }
    Ok(())
}

#[test]
fn words_at_one_position_are_prefix_free() {
    prefix_free(WORDS).unwrap();
    let roots: Vec<&str> = ALL_ROOTS.iter().flat_map(|l| l.iter().copied()).collect();
    prefix_free(&roots).unwrap();
    // the REST list's roots may be prefixes of each other (its paths are anchored), not of
    // another family's
    let rest_roots: HashSet<&str> = rest::ENDPOINTS
        .iter()
        .map(|(_, p)| p.split('/').nth(1).unwrap())
        .collect();
    for r in &rest_roots {
        for o in &roots {
            assert!(!r.starts_with(o) && !o.starts_with(r), "{r} / {o}");
        }
    }
    assert!(!WORDS.iter().any(|w| w.starts_with(words::EXCLUDED)));
}

/// Whether one request path could match both endpoint paths.
fn overlap(a: &[Piece], b: &[Piece]) -> bool {
    fn takes(kind: ParamKind, s: &str) -> bool {
        match kind {
            ParamKind::Segment => true,
            ParamKind::Number => s.bytes().all(|c| c.is_ascii_digit()),
            ParamKind::Hex => s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')),
        }
    }
    a.len() == b.len()
        && a.iter().zip(b).all(|pair| match pair {
            (Piece::Static(x), Piece::Static(y)) => x == y,
            (Piece::Static(s), Piece::Param(_, k)) | (Piece::Param(_, k), Piece::Static(s)) => {
                takes(*k, s)
            }
            (Piece::Param(..), Piece::Param(..)) => true,
        })
}

#[test]
fn the_rest_list_is_unambiguous_and_names_parameters_consistently() {
    assert_eq!(rest::routes().len(), 124);
    let paths: Vec<(&str, Vec<Piece>)> = rest::ENDPOINTS
        .iter()
        .map(|&(_, p)| (p, rest::pieces(p)))
        .collect();
    let distinct: HashSet<&str> = paths.iter().map(|p| p.0).collect();
    assert_eq!(distinct.len(), paths.len(), "a path is listed twice");
    for (i, (pa, a)) in paths.iter().enumerate() {
        for (pb, b) in &paths[i + 1..] {
            assert!(!overlap(a, b), "{pa} and {pb} take the same requests");
        }
    }
    // a parameter's name depends only on the static path before it and its position
    let mut names: HashMap<String, &str> = HashMap::new();
    for (p, pieces) in &paths {
        let mut before = String::new();
        for piece in pieces {
            match piece {
                Piece::Static(s) => before = format!("{before}/{s}"),
                Piece::Param(name, _) => {
                    let seen = names.entry(before.clone()).or_insert(name);
                    assert_eq!(seen, name, "{p}");
                    before = format!("{before}/{{}}");
                }
            }
        }
    }
}

#[test]
fn the_rest_api_family_copies_the_list_under_prefixes() {
    let t = Table::family(Family::RestApi, 10_000, 1);
    let mut prefixes: BTreeMap<String, usize> = BTreeMap::new();
    for r in &t.routes {
        assert!(r.shape.conds.contains(&Cond::Host(API_HOST.into())));
        let Some(Cond::Path(alts)) = r.shape.conds.iter().find(|c| matches!(c, Cond::Path(_)))
        else {
            panic!("no path: {}", r.expression)
        };
        let path = match &alts[0] {
            PathMatch::Exact(p) => p.clone(),
            PathMatch::Regex(re) => re.template(),
            m => panic!("{m:?}"),
        };
        let first = path.split('/').nth(1).unwrap();
        let copy = if first.len() > 1
            && first[1..].bytes().all(|c| c.is_ascii_digit())
            && matches!(&first[..1], "v" | "t")
        {
            first.to_string()
        } else {
            String::new()
        };
        *prefixes.entry(copy).or_default() += 1;
    }
    // 80 whole copies of the 124 routes, and 80 routes of the 81st
    assert_eq!(prefixes.len(), 81);
    assert_eq!(prefixes[""], 124);
    assert_eq!(prefixes["v2"], 124);
    assert_eq!(prefixes["t77"], 80);
    assert!(t.routes.iter().any(|r| r.expression.contains("r#\"")));
    assert!(t
        .routes
        .iter()
        .any(|r| r.expression.contains(r#"(?<issue_number>\\d+)"#)));
}

/// Work of this thread while `f` runs: random draws, allocations and bytes allocated.
fn work<T>(f: impl FnOnce() -> T) -> (T, [u64; 3]) {
    let draws = crate::rng::DRAWS.with(std::cell::Cell::get);
    let (allocs, bytes) = counting::now();
    let out = f();
    let (allocs2, bytes2) = counting::now();
    (
        out,
        [
            crate::rng::DRAWS.with(std::cell::Cell::get) - draws,
            allocs2 - allocs,
            bytes2 - bytes,
        ],
    )
}

/// Counts the allocations of each thread (a test measures its own thread only, whatever the
/// other tests do meanwhile).
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static ALLOCS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }

    struct Counting;

    // SAFETY: every call goes to the system allocator unchanged; the count is a thread-local
    // cell with a const initializer and no destructor (no allocation, usable at any time;
    // `try_with` skips the count while the thread is being torn down).
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count(layout.size());
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count(layout.size());
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count(new_size);
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    fn count(size: usize) {
        let _ = ALLOCS.try_with(|c| {
            let (n, b) = c.get();
            c.set((n + 1, b + size as u64));
        });
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    /// Allocations and bytes allocated by this thread so far.
    pub fn now() -> (u64, u64) {
        ALLOCS.with(Cell::get)
    }
}

#[test]
fn generation_work_grows_linearly() {
    // Work, counted, not time: the same at every run, on any machine, in any build (the seeds
    // are fixed). A table of 100,000 routes and 10,000 requests against one of 10,000 and
    // 1,000: linear generation does 10 times the work; this one does 11.5 to 13 times (unique
    // names and ids are drawn again when taken, more often as the table fills, and growing
    // maps reallocate), and a quadratic step would do about 100 times. The bound of 20 leaves
    // room for the first and catches a quadratic step once it is about a tenth of the work at
    // 10,000 routes (13 + 87 x that share).
    let run = |n: usize| {
        work(|| {
            let t = Table::generate(n, 1, true);
            let reqs = requests(&t, Mix::Realistic, n / 10, 1);
            (t.routes.len(), reqs.len())
        })
    };
    let (small_sizes, small) = run(10_000);
    let start = std::time::Instant::now();
    let (sizes, big) = run(100_000);
    assert_eq!(small_sizes, (10_001, 1_000));
    assert_eq!(sizes, (100_001, 10_000));
    println!(
        "10,000 routes: {small:?}; 100,000 routes: {big:?} (draws, allocations, bytes) in {:?}",
        start.elapsed()
    );
    for (what, (s, b)) in ["draws", "allocations", "bytes"]
        .iter()
        .zip(small.iter().zip(big))
    {
        let ratio = b as f64 / *s as f64;
        assert!(
            ratio < 20.0,
            "{what}: {b} for 100,000 routes, {s} for 10,000: {ratio:.1} times"
        );
    }
}

/// The stress families: valid expressions rendered from their shapes, requests that reach their
/// own route and no other (every route of a stress table has a key or tag of its own), misses
/// that match nothing, at sizes a debug build runs in seconds.
#[test]
fn stress_families_reach_every_target() {
    let schema = schema();
    for family in Family::stress() {
        assert!(family.is_stress() && !Family::all().contains(&family));
        assert_eq!(Family::from_name(family.name()), Some(family));
        // Unicode `\w{30}` takes a debug build a tenth of a second to compile, and the
        // reference evaluator compiles it again: few routes of the regex families.
        let big = match family {
            Family::UnanchoredRegex | Family::UnicodeClasses => 16,
            _ => 60,
        };
        for n in [0, 1, 7, big] {
            let t = Table::family(family, n, 3);
            assert_eq!(t.routes.len(), n);
            router(&t, &schema);
            for r in &t.routes {
                // kong-traditional's are written as Kong's transform writes them
                if family != Family::KongTraditional {
                    assert_eq!(r.expression, r.shape.expression());
                }
                assert_eq!(r.family, family);
            }
        }
        for (n, count) in [(1, 8), (7, 12), (big, 12)] {
            let hits = check_requests(&Table::family(family, n, 6), count);
            assert!(hits.values().all(|h| h.1 == 0), "{family:?} {n}: {hits:?}");
        }
    }
    assert_eq!(Family::from_name("no-such-family"), None);
}

fn path_of(req: &Request) -> &str {
    match req.fields.iter().find(|(n, _)| n == "http.path") {
        Some((_, Value::Str(p))) => p,
        _ => panic!("no path: {req:?}"),
    }
}

#[test]
fn stress_shapes_are_what_their_names_say() {
    // field-per-route: one header name per route, names sharing prefixes
    let t = Table::family(Family::FieldPerRoute, 300, 1);
    let names: HashSet<&str> = t
        .routes
        .iter()
        .flat_map(|r| &r.shape.conds)
        .filter_map(|c| match c {
            Cond::Header(h) => Some(h.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(names.len(), 300);
    assert!(names.contains("x_tenant_1") && names.contains("x_tenant_10"));
    let exprs: String = t.routes.iter().map(|r| r.expression.clone()).collect();
    for piece in ["any(", "lower(", "http.host == "] {
        assert!(exprs.contains(piece), "{piece}");
    }
    // miss-keys requests carry some of those names, with a value no route takes
    let keys = t.shared_keys();
    assert_eq!(keys.other_headers.len(), 8);
    let miss = &requests(&t, Mix::MissKeys, 1, 1)[0];
    assert!(miss.fields.contains(&(
        "http.headers.x_tenant_0".into(),
        Value::Str(MISS_VALUE.into())
    )));

    // unanchored regexes: no anchor, no literal prefix; paths of 64 to 1,000 bytes
    let t = Table::family(Family::UnanchoredRegex, 200, 1);
    for r in &t.routes {
        assert!(
            r.expression.starts_with(r#"http.path ~ "\\w{30}x"#)
                || r.expression
                    .starts_with(r#"http.path ~ "\\d{3,}-\\w{10}/p"#),
            "{}",
            r.expression
        );
    }
    let lens: Vec<usize> = requests(&t, Mix::Realistic, 200, 1)
        .iter()
        .map(|r| path_of(r).len())
        .collect();
    assert!(lens.iter().all(|&l| (64..1100).contains(&l)), "{lens:?}");
    assert!(lens.iter().any(|&l| l >= 1000));
    assert_eq!(t.shared_keys().path_len, 1000);
    for r in requests(&t, Mix::MissKeys, 8, 1) {
        assert!(path_of(&r).len() >= 1000);
    }
    assert_eq!(
        stress::word_run(7, 250).expression(),
        r#"http.path ~ "\\w{30}x000007""#
    );
    assert_eq!(
        stress::digits_word(7, 250).expression(),
        r#"http.path ~ "\\d{3,}-\\w{10}/p000007""#
    );

    // alternations: hundreds of branches, and `||` chains
    let t = Table::family(Family::Alternations, 100, 1);
    let most = t
        .routes
        .iter()
        .map(|r| r.expression.matches('|').count())
        .max()
        .unwrap();
    assert!(most >= 200, "{most}");
    assert!(t.routes.iter().any(|r| r.expression.contains(" || ")));
    let one = stress::alternation(0, 1000, 65536);
    assert_eq!(one.expression().matches('|').count(), 999);

    // unicode classes: the classes, and non-ASCII paths
    let t = Table::family(Family::UnicodeClasses, 100, 1);
    let exprs: String = t.routes.iter().map(|r| r.expression.clone()).collect();
    for piece in [
        r"\\p{L}+",
        "[à-ÿ]{3,}",
        r"(?i)ÉTÉ-\\w{4,}",
        r"\\w{8}ö",
        "^/вики/",
    ] {
        assert!(exprs.contains(piece), "{piece}");
    }
    for r in requests(&t, Mix::Realistic, 50, 1)
        .into_iter()
        .chain(requests(&t, Mix::MissKeys, 5, 1))
    {
        assert!(!path_of(&r).is_ascii(), "{r:?}");
    }
}

#[test]
fn tables_from_shapes_get_ids_and_priorities() {
    let shapes: Vec<Shape> = (0..10).map(|i| stress::word_run(i, 250)).collect();
    let a = Table::from_shapes(Family::UnanchoredRegex, shapes.clone(), 1);
    assert_eq!(a, Table::from_shapes(Family::UnanchoredRegex, shapes, 1));
    assert_eq!(a.routes.len(), 10);
    assert_eq!(a.routes[3].shape, stress::word_run(3, 250));
    let ids: HashSet<[u8; 16]> = a.routes.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), 10);
    for r in requests(&a, Mix::HitMiddle, 20, 1) {
        assert!((250..260).contains(&path_of(&r).len()), "{r:?}");
    }
    check_requests(&a, 8);
}

#[test]
fn stress_tables_change_and_grow() {
    for family in Family::stress() {
        let t = Table::family(family, 12, 2);
        let c = t.with_changes(4, 5);
        let mut grown = c.clone();
        for s in 0..3 {
            let r = grown.extra_route(s);
            grown.routes.push(r);
        }
        // A copy keeps its original's tag or header, so the original may take its requests.
        check_requests(&grown, 8);
    }
}

/// A key space whose roots are all taken as keys of their own still hands out keys, never one
/// another's prefix (one root, one segment: the numbered fallback becomes the root).
#[test]
fn a_full_key_space_still_hands_out_prefix_free_keys() {
    let mut alloc = crate::families::PathAlloc::default();
    let mut rng = crate::rng::Rng::new(1, 1);
    let keys: Vec<String> = (0..40)
        .map(|_| alloc.alloc(&mut rng, &["a"], 1, 1))
        .collect();
    assert_eq!(keys[0], "/a");
    for a in &keys {
        for b in &keys {
            assert!(a == b || !b.starts_with(&format!("{a}/")), "{a} {b}");
        }
    }
    let distinct: std::collections::HashSet<&String> = keys.iter().collect();
    assert_eq!(distinct.len(), keys.len());
}
