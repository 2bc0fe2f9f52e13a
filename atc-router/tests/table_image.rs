//! Tables as images (`Router::to_image`, `ImageRouter`) on the gateway-shaped tables of
//! docs/workload.md. For every request of every mix:
//! - the image's index gives exactly the candidates the in-process index gives;
//! - an `ImageRouter` opened over a schema of its own (as another worker opens it) gives the
//!   router's answer: route, priority, matched values, captures.
//!
//! And an image is refused whole when it is not one, is corrupt, or was built for other fields;
//! changed words that still pass the checksum never break a request.

use std::collections::BTreeMap;

use atc_router::{Context, Error, ImageRouter, Router, Schema, Type, Uuid};
use atc_workload::{requests, Family, Mix, Table};

mod common;
use common::{workload_router as router, workload_schema as schema, workload_value as value};

/// Checks the image of `table`'s index; returns the splits written as leaves.
fn check(name: &str, table: &Table, per_mix: usize) -> usize {
    let schema = schema();
    let router = router(table, &schema);
    let (image, leaves) = router.index_image();
    let mut ctx = Context::new(schema.clone());
    let mut more = 0usize;
    for mix in Mix::all() {
        for req in requests(table, mix, per_mix, 13) {
            ctx.reset();
            for (f, v) in &req.fields {
                ctx.add_value(f, value(v)).unwrap();
            }
            let in_process = router.candidate_ids(&mut ctx);
            let from_image = Router::image_candidates(&image, &ctx).unwrap();
            for id in &in_process {
                assert!(
                    from_image.contains(id),
                    "{name} {mix:?}: the image lost candidate {id} of {req:?}"
                );
            }
            if leaves == 0 {
                assert_eq!(from_image, in_process, "{name} {mix:?} {req:?}");
            }
            more += from_image.len() - in_process.len();
            // The winner is among the image's candidates.
            if router.execute(&mut ctx) {
                let id = ctx.result().unwrap().id();
                assert!(from_image.contains(&id), "{name} {mix:?}: winner {id} lost");
            }
        }
    }
    println!("{name}: {leaves} splits written as leaves, {more} candidates more in all");
    leaves
}

/// Everything a result says, with fields by name (the two schemas number them apart).
type Answer = (
    Uuid,
    u64,
    BTreeMap<String, String>,
    BTreeMap<String, String>,
);

fn answer(ctx: &Context) -> Option<Answer> {
    let m = ctx.result()?;
    let values = m
        .matched_fields()
        .into_iter()
        .map(|f| {
            let name = ctx.schema().field(f).unwrap().0;
            (name, m.matched_value_by_id(f).unwrap().to_string())
        })
        .collect();
    let captures = m.captures_map().into_iter().collect();
    Some((m.id(), m.priority(), values, captures))
}

/// The router and an `ImageRouter` of its image give every request the same answer, whether
/// the image's regexes were compiled when it was opened (`eager`) or by the requests.
fn check_answers(name: &str, table: &Table, per_mix: usize, eager: bool) {
    let schema = schema();
    let router = router(table, &schema);
    let image = ImageRouter::from_bytes(common::workload_schema(), router.to_image().unwrap())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(image.len(), router.len());
    if eager {
        let (count, _) = image.regexes();
        assert_eq!(
            image.compile_regexes(),
            count,
            "{name}: every regex compiles"
        );
    }
    let mut ctx = Context::new(schema.clone());
    let mut image_ctx = Context::new(image.schema().clone());
    let (mut routed, mut total) = (0, 0);
    for mix in Mix::all() {
        for req in requests(table, mix, per_mix, 17) {
            ctx.reset();
            image_ctx.reset();
            for (f, v) in &req.fields {
                ctx.add_value(f, value(v)).unwrap();
                image_ctx.add_value(f, value(v)).unwrap();
            }
            let found = router.execute(&mut ctx);
            assert_eq!(
                image.execute(&mut image_ctx),
                found,
                "{name} {mix:?} {req:?}"
            );
            assert_eq!(answer(&image_ctx), answer(&ctx), "{name} {mix:?} {req:?}");
            routed += usize::from(found);
            total += 1;
        }
    }
    assert!(routed * 4 >= total, "{name}: {routed} of {total} routed");
}

#[test]
fn an_image_router_answers_as_the_router_on_every_family() {
    for (i, family) in Family::all().into_iter().enumerate() {
        let table = Table::family(family, 2_000, 23);
        check_answers(family.name(), &table, 40, i % 2 == 0);
    }
    check_answers(
        "rest-api, regexes compiled",
        &Table::family(Family::RestApi, 2_000, 5),
        40,
        true,
    );
    check_answers("mixed 5k", &Table::generate(5_000, 3, true), 60, false);
    check_answers(
        "mixed 5k, regexes compiled",
        &Table::generate(5_000, 3, true),
        60,
        true,
    );
}

#[test]
fn an_image_is_refused_whole_when_it_is_not_this_tables() {
    let schema = schema();
    let router = router(&Table::generate(300, 4, false), &schema);
    let image = router.to_image().unwrap();
    let open = |bytes: Vec<u8>| ImageRouter::from_bytes(common::workload_schema(), bytes);
    assert!(open(image.clone()).is_ok());
    // Corrupt, truncated, extended, empty.
    let mut bad = image.clone();
    bad[image.len() / 2] ^= 0x10;
    assert!(matches!(open(bad), Err(Error::Image(_))));
    assert!(matches!(
        open(image[..image.len() - 8].to_vec()),
        Err(Error::Image(_))
    ));
    let mut longer = image.clone();
    longer.extend([0; 64]);
    assert!(matches!(open(longer), Err(Error::Image(_))));
    assert!(matches!(open(Vec::new()), Err(Error::Image(_))));
    // Built for other fields.
    let mut other = Schema::new();
    other.add_field("http.path", Type::String).unwrap();
    let refused = ImageRouter::from_bytes(std::sync::Arc::new(other), image).unwrap_err();
    assert!(refused.to_string().contains("built for"), "{refused}");
}

/// Wildcard names get ids in the order a process first registers them: an image built where
/// `x_a` came first opens where `x_b` did, and still reads each header's own values.
#[test]
fn an_image_maps_wildcard_names_to_the_ids_of_the_schema_that_opens_it() {
    let (builder_schema, reader_schema) = (schema(), schema());
    let mut r = Router::new(builder_schema.clone());
    r.add(Uuid::from_u128(1), 2, r#"http.headers.x_a == "1""#)
        .unwrap();
    r.add(Uuid::from_u128(2), 1, r#"http.headers.x_b == "2""#)
        .unwrap();
    let mut local = Router::new(reader_schema.clone());
    local
        .add(Uuid::from_u128(9), 1, r#"http.headers.x_b == "9""#)
        .unwrap();
    let image = ImageRouter::from_bytes(reader_schema.clone(), r.to_image().unwrap()).unwrap();
    let a = reader_schema.lookup("http.headers.x_a").unwrap();
    let b = reader_schema.lookup("http.headers.x_b").unwrap();
    assert_ne!(builder_schema.lookup("http.headers.x_b"), Some(b));
    let mut ctx = Context::new(reader_schema.clone());
    ctx.add_value("http.headers.x_b", "2").unwrap();
    assert!(image.execute(&mut ctx));
    assert_eq!(ctx.result().unwrap().id(), Uuid::from_u128(2));
    ctx.reset();
    ctx.add_value("http.headers.x_a", "2").unwrap();
    assert!(!image.execute(&mut ctx));
    // The image holds its names while it lives.
    drop(image);
    assert_eq!(reader_schema.lookup("http.headers.x_a"), None);
    assert_eq!(reader_schema.lookup("http.headers.x_b"), Some(b));
    let _ = a;
}

#[test]
fn an_image_index_finds_what_the_index_finds_on_every_family() {
    // Every kind of split has a flat form: every family gets exactly the in-process
    // candidates from its image (`check` compares them when no split is written as a leaf).
    for family in Family::all() {
        let table = Table::family(family, 2_000, 21);
        assert_eq!(
            check(family.name(), &table, 40),
            0,
            "{} wrote a split as a leaf",
            family.name()
        );
    }
}

/// `contains` splits of a few literals (each searched alone) and of many (walked from every
/// place of the value), with literals inside each other and repeated in the value: the image
/// gives exactly the in-process candidates and the router's answers.
#[test]
fn contains_splits_find_what_the_index_finds() {
    let schema = schema();
    for literals in [3usize, 400] {
        let mut r = Router::new(schema.clone());
        for i in 0..literals {
            let lit = match i % 4 {
                0 => format!("/export-{i}/"),
                1 => format!("-{i}"),
                2 => format!("x{}x", "y".repeat(i % 13)),
                _ => format!("/{i}"),
            };
            let expr = format!(r#"http.path contains "{lit}""#);
            r.add(Uuid::from_u128(i as u128 + 1), i as u64, &expr)
                .unwrap_or_else(|e| panic!("{expr}: {e}"));
        }
        let (image, leaves) = r.index_image();
        assert_eq!(leaves, 0, "contains has a flat form");
        let opened = ImageRouter::from_bytes(schema.clone(), r.to_image().unwrap()).unwrap();
        let mut ctx = Context::new(schema.clone());
        let mut found = 0;
        for i in 0..literals + 50 {
            for path in [
                format!("/api/export-{i}/all"),
                format!("/a/b-{i}/{i}/-{i}-{i}"),
                format!("/x{}x/x{}x", "y".repeat(i % 13), "y".repeat(i % 7)),
                format!("/{i}/{i}/{i}"),
                "/".repeat(i % 50),
            ] {
                ctx.reset();
                ctx.add_value("http.path", path.clone()).unwrap();
                let in_process = r.candidate_ids(&mut ctx);
                let from_image = Router::image_candidates(&image, &ctx).unwrap();
                assert_eq!(from_image, in_process, "{literals} literals, {path}");
                found += in_process.len();
                r.execute(&mut ctx);
                let want = answer(&ctx);
                opened.execute(&mut ctx);
                assert_eq!(answer(&ctx), want, "{literals} literals, {path}");
            }
        }
        assert!(found > literals, "{found} candidates in all");
    }
}

#[test]
fn an_image_index_finds_what_the_index_finds_on_a_mixed_table() {
    check("mixed 5k", &Table::generate(5_000, 3, true), 100);
}

#[test]
fn a_corrupt_image_gives_no_candidates() {
    let schema = schema();
    let router = router(&Table::generate(300, 4, false), &schema);
    let (mut image, _) = router.index_image();
    let ctx = Context::new(schema);
    let last = image.len() - 1;
    image[last] ^= 1;
    assert!(Router::image_candidates(&image, &ctx).is_err());
}

#[test]
fn network_splits_find_what_the_index_finds() {
    let schema = schema();
    let mut r = Router::new(schema.clone());
    for i in 0..600u32 {
        let expr = match i % 3 {
            0 => format!("net.src.ip in 10.{}.{}.0/24", i / 256, i % 256),
            1 => format!("net.src.ip in 2001:db8:{i:x}::/48"),
            _ => format!("net.src.ip == 192.168.{}.{}", i / 256, i % 256),
        };
        r.add(Uuid::from_u128(u128::from(i) + 1), u64::from(i), &expr)
            .unwrap_or_else(|e| panic!("{expr}: {e}"));
    }
    let (image, leaves) = r.index_image();
    assert_eq!(leaves, 0, "networks have a flat form");
    let mut ctx = Context::new(schema);
    let mut found = 0;
    for i in 0..700u32 {
        for addr in [
            format!("10.{}.{}.7", i / 256, i % 256),
            format!("2001:db8:{i:x}::1"),
            format!("192.168.{}.{}", i / 256, i % 256),
            format!("172.16.0.{}", i % 256),
        ] {
            ctx.reset();
            ctx.add_value("net.src.ip", addr.parse::<std::net::IpAddr>().unwrap())
                .unwrap();
            let in_process = r.candidate_ids(&mut ctx);
            let from_image = Router::image_candidates(&image, &ctx).unwrap();
            assert_eq!(from_image, in_process, "{addr}");
            found += in_process.len();
        }
    }
    assert!(found >= 600, "{found} candidates in all");
}

/// Any word of an image changed (and the checksum made right again, as only a bug or an
/// attacker with write access could): opening it and matching from it never panics or reads
/// out of bounds. (The `image` fuzz target found a network length past the family's width.)
#[test]
fn changed_words_never_break_a_request() {
    let schema = schema();
    let mut r = Router::new(schema.clone());
    let mut n = 0u128;
    let mut add = |e: String| {
        n += 1;
        r.add(Uuid::from_u128(n), n as u64, &e).unwrap();
    };
    for i in 0..6 {
        add(format!(
            r#"http.host == "h{i}.com" && http.path ^= "/p{i}/""#
        ));
        add(format!(r#"http.host =^ ".w{i}.net""#));
        add(format!(r##"http.path ~ r#"^/users/\d+/o{i}$"#"##));
        add(format!("net.dst.port == {}", 8000 + i));
        add(format!("net.src.ip in 10.{i}.0.0/16"));
        add(format!(
            r#"!(http.host == "x{i}") && (net.dst.port > {i} || lower(http.path) =^ "/z")"#
        ));
    }
    let (image, _) = r.index_image();
    let mut ctxs = Vec::new();
    for i in 0..6 {
        let mut c = Context::new(schema.clone());
        c.add_value("http.host", format!("h{i}.com")).unwrap();
        c.add_value("http.path", format!("/p{i}/users/7/o{i}"))
            .unwrap();
        c.add_value("net.dst.port", 8000 + i64::from(i)).unwrap();
        let ip: std::net::IpAddr = format!("10.{i}.1.1").parse().unwrap();
        c.add_value("net.src.ip", ip).unwrap();
        ctxs.push(c);
    }
    for at in (64..image.len() - 3).step_by(4) {
        for mask in [1u32, 0x80, 0xffff_ff00, u32::MAX] {
            let mut bad = image.clone();
            let w = u32::from_le_bytes(bad[at..at + 4].try_into().unwrap()) ^ mask;
            bad[at..at + 4].copy_from_slice(&w.to_le_bytes());
            atc_router::image::forge(&mut bad);
            if let Ok(image) = ImageRouter::from_bytes(schema.clone(), bad) {
                for c in &mut ctxs {
                    let _ = image.execute(c);
                }
            }
        }
    }
}

/// Two-phase matching from an image: a request given its key fields, then only the fields
/// `ImageRouter::needed_fields` names, gets the answer every field gives; and the image's masks
/// are those of the router that wrote it.
#[test]
fn two_phase_matching_from_an_image_gives_the_results_of_every_field() {
    let schema = schema();
    let bit = |f: &str| schema.resolve(f).unwrap().0.bit();
    let mut tables: Vec<(String, Table)> = Family::all()
        .into_iter()
        .map(|f| (f.name().to_owned(), Table::family(f, 1_500, 5)))
        .collect();
    tables.push(("mixed".to_owned(), Table::generate(3_000, 5, true)));
    for (name, table) in &tables {
        let mut router = router(table, &schema);
        // Its flat index written whole, as the image's is: the routes added since the router
        // last wrote it would be candidates from its overlay (a tree of its own, with other
        // splits), and so could need other fields.
        router.settle();
        let opened = ImageRouter::from_bytes(schema.clone(), router.to_image().unwrap()).unwrap();
        let keys = opened.key_fields();
        assert_eq!(keys, router.key_fields(), "{name}");
        let (mut full, mut part, mut by_router) = (
            Context::new(schema.clone()),
            Context::new(schema.clone()),
            Context::new(schema.clone()),
        );
        let (mut part_n, mut full_n) = (0, 0);
        for mix in Mix::all() {
            for req in requests(table, mix, 60, 17) {
                full.reset();
                part.reset();
                by_router.reset();
                for (f, v) in &req.fields {
                    full.add_value(f, value(v)).unwrap();
                    full_n += 1;
                    if keys & bit(f) != 0 {
                        part.add_value(f, value(v)).unwrap();
                        by_router.add_value(f, value(v)).unwrap();
                        part_n += 1;
                    }
                }
                let needed = opened.needed_fields(&mut part);
                assert_eq!(needed & keys, keys, "{name}: the key fields are needed");
                assert_eq!(
                    needed,
                    router.needed_fields(&mut by_router),
                    "{name} {req:?}"
                );
                for (f, v) in &req.fields {
                    if keys & bit(f) == 0 && needed & bit(f) != 0 {
                        part.add_value(f, value(v)).unwrap();
                        part_n += 1;
                    }
                }
                opened.execute(&mut full);
                opened.execute(&mut part);
                assert_eq!(answer(&part), answer(&full), "{name} {req:?}");
            }
        }
        assert!(part_n <= full_n, "{name}");
    }
}

/// The candidates `needed_fields` finds serve the execute that follows, unless a value of a key
/// field was added in between.
#[test]
fn an_image_router_reuses_its_candidates_only_while_the_key_fields_stay() {
    let mut s = Schema::new();
    for f in ["http.path", "http.host", "http.method"] {
        s.add_field(f, Type::String).unwrap();
    }
    let s = std::sync::Arc::new(s);
    let mut r = Router::new(s.clone());
    r.add(Uuid::from_u128(1), 9, r#"http.host == "b.com""#)
        .unwrap();
    r.add(
        Uuid::from_u128(2),
        1,
        r#"http.path ^= "/a" && http.method != "DELETE""#,
    )
    .unwrap();
    let opened = ImageRouter::from_bytes(s.clone(), r.to_image().unwrap()).unwrap();
    let (host, method) = (
        s.resolve("http.host").unwrap().0.bit(),
        s.resolve("http.method").unwrap().0.bit(),
    );
    assert_eq!(opened.key_fields() & method, 0, "no split on the method");
    assert_ne!(opened.key_fields() & host, 0, "a split on the host");
    let mut ctx = Context::new(s);
    ctx.add_value("http.path", "/a/1").unwrap();
    assert_ne!(opened.needed_fields(&mut ctx) & method, 0);
    // A field no split keys on: the cached candidates serve.
    ctx.add_value("http.method", "GET").unwrap();
    assert!(opened.execute(&mut ctx));
    assert_eq!(ctx.result().unwrap().id(), Uuid::from_u128(2));
    // A value of a key field after needed_fields: the candidates are found again (the host's
    // route, first in routing order, was no candidate without it).
    ctx.reset();
    ctx.add_value("http.path", "/a/1").unwrap();
    opened.needed_fields(&mut ctx);
    ctx.add_value("http.host", "b.com").unwrap();
    assert!(opened.execute(&mut ctx));
    assert_eq!(ctx.result().unwrap().id(), Uuid::from_u128(1));
    // The router never takes an image router's candidates.
    ctx.reset();
    ctx.add_value("http.path", "/a/1").unwrap();
    opened.needed_fields(&mut ctx);
    ctx.add_value("http.method", "GET").unwrap();
    ctx.add_value("http.host", "b.com").unwrap();
    assert!(r.execute(&mut ctx));
    assert_eq!(ctx.result().unwrap().id(), Uuid::from_u128(1));
}

/// An image explains as the router that wrote it: the same winner, and for every candidate
/// both report the same outcome and deciding predicates; the image's candidates are its own
/// (a superset of the router's where a split was written as a leaf).
#[test]
fn an_image_explains_as_the_router_that_wrote_it() {
    for (family, n) in [
        (Family::HostPrefixes, 500),
        (Family::RestApi, 124),
        (Family::Mixed, 1_000),
    ] {
        let table = Table::family(family, n, 29);
        let schema = schema();
        let router = router(&table, &schema);
        let image =
            ImageRouter::from_bytes(common::workload_schema(), router.to_image().unwrap()).unwrap();
        let mut ctx = Context::new(schema.clone());
        let mut image_ctx = Context::new(image.schema().clone());
        let mut explained = 0;
        for mix in Mix::all() {
            for req in requests(&table, mix, 15, 31) {
                ctx.reset();
                image_ctx.reset();
                for (f, v) in &req.fields {
                    ctx.add_value(f, value(v)).unwrap();
                    image_ctx.add_value(f, value(v)).unwrap();
                }
                let by_router = router.explain(&mut ctx).unwrap();
                let by_image = image.explain(&mut image_ctx).unwrap();
                assert_eq!(by_image.winner, by_router.winner, "{family:?} {req:?}");
                assert_eq!(by_image.routes, router.len());
                for c in &by_router.candidates {
                    let Some(i) = by_image.candidates.iter().find(|i| i.id == c.id) else {
                        assert!(by_image.candidates_omitted > 0, "{family:?}: {} lost", c.id);
                        continue;
                    };
                    assert_eq!(i.matched, c.matched);
                    assert_eq!(i.expression, c.expression);
                    let texts = |r: &atc_router::CandidateReport| -> Vec<String> {
                        r.predicates.iter().map(|p| p.text.clone()).collect()
                    };
                    assert_eq!(texts(i), texts(c), "{family:?} {req:?}");
                }
                explained += 1;
            }
        }
        assert!(explained > 50);
        // Ruled-out routes are counted, not listed.
        let why = image
            .explain_with(
                &mut image_ctx,
                atc_router::ExplainOptions {
                    ruled_out: true,
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(why.ruled_out.is_empty());
        assert_eq!(
            why.ruled_out_omitted + why.candidates.len() + why.candidates_omitted,
            image.len()
        );
    }
    // A context of another schema is refused.
    let table = Table::family(Family::HostPrefixes, 10, 1);
    let image = ImageRouter::from_bytes(
        common::workload_schema(),
        router(&table, &schema()).to_image().unwrap(),
    )
    .unwrap();
    let mut other = Context::new(schema());
    assert!(matches!(
        image.explain(&mut other),
        Err(Error::SchemaMismatch)
    ));
}
