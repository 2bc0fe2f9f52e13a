//! Runs every `atc-bench` subcommand on tiny tables (as `cargo test --workspace` builds it: a
//! debug binary), so that the tool documented in docs/performance.md never rots. It checks the
//! shape of what each prints, not the figures.

use std::process::{Command, Output};

fn atc_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_atc-bench"))
        .args(args)
        .output()
        .expect("atc-bench runs")
}

/// Stdout of a run that must succeed.
fn ok(args: &[&str]) -> String {
    let out = atc_bench(args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}:\n{stdout}\n{stderr}");
    stdout
}

/// Stderr of a run that must fail as a bad command line does (status 2).
fn refused(args: &[&str]) -> String {
    let out = atc_bench(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    String::from_utf8(out.stderr).unwrap()
}

/// The first whitespace-separated word of each line.
fn first_words(out: &str) -> Vec<&str> {
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

#[test]
fn candidates_of_every_family_and_mix() {
    let out = ok(&["candidates", "--routes", "40"]);
    let words = first_words(&out);
    for family in atc_workload::Family::all() {
        assert!(words.contains(&family.name()), "{family:?}:\n{out}");
    }
    let header = out.lines().nth(1).unwrap();
    for mix in atc_workload::Mix::all() {
        assert!(header.contains(mix.name()), "{header}");
    }
    assert!(!out.contains("index summary"));
    // Every cell is `mean / max`.
    let rest_api = out.lines().find(|l| l.starts_with("rest-api")).unwrap();
    assert_eq!(rest_api.matches(" / ").count(), 6, "{rest_api}");
}

#[test]
fn candidates_of_one_family_with_the_index_summary() {
    let out = ok(&["candidates", "--routes=40", "--family", "rest-api"]);
    assert!(out.lines().any(|l| l.starts_with("rest-api")), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("mixed")), "{out}");
    assert!(out.contains("index summary:"), "{out}");
}

#[test]
fn memory_of_each_part() {
    let out = ok(&["memory", "--routes", "60"]);
    let words = first_words(&out);
    for part in ["all", "non-regex", "regex"] {
        assert!(words.contains(&part), "{part}:\n{out}");
    }
}

#[test]
fn hot_loops_in_each_mode() {
    let base = [
        "hot", "--routes", "150", "--family", "rest-api", "--iters", "2000",
    ];
    for (extra, says) in [
        (&["--mix", "realistic"][..], "(all requests)"),
        (&["--mix", "realistic", "--plain"][..], "(plain)"),
        (&["--mix", "hit-middle", "--captures"][..], "+captures"),
        (
            &["--mix", "miss", "--candidates-only", "--requests", "8"][..],
            "candidate_count",
        ),
        (
            &["--mix", "hit-middle", "--whole"][..],
            "reset, fields added, execute, captures read",
        ),
        (
            &["--mix", "realistic", "--matchit"][..],
            "matchit's path lookup, method picked, parameters read",
        ),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let out = ok(&args);
        assert!(out.contains(says), "{args:?}:\n{out}");
        assert!(out.contains("ns per request"), "{args:?}:\n{out}");
    }
}

#[test]
fn build_by_add_and_by_sync() {
    let out = ok(&["build", "--routes", "60", "--rounds", "2"]);
    assert!(
        out.contains("one by one") && out.contains("one sync"),
        "{out}"
    );
    let words = first_words(&out);
    for part in ["all", "non-regex", "regex"] {
        assert!(words.contains(&part), "{part}:\n{out}");
    }
}

#[test]
fn sync_of_each_case() {
    let out = ok(&["sync", "--routes", "200", "--rounds", "2"]);
    let words = first_words(&out);
    for case in ["none", "one", "1%", "all"] {
        assert!(words.contains(&case), "{case}:\n{out}");
    }
}

#[test]
fn lint_and_explain() {
    let out = ok(&["lint", "--routes", "200", "--rounds", "2"]);
    let words = first_words(&out);
    for w in ["full", "one", "explain"] {
        assert!(words.contains(&w), "{w} in\n{out}");
    }
}

#[test]
fn help_and_bad_command_lines() {
    let out = ok(&["help"]);
    for command in ["candidates", "memory", "hot", "build", "sync"] {
        assert!(out.contains(&format!("  {command} ")), "{command}:\n{out}");
    }
    assert!(ok(&["hot", "--help"]).contains("--candidates-only"));
    assert!(ok(&["hot", "--help"]).contains("--matchit"));
    assert!(refused(&[]).contains("usage: atc-bench"));
    assert!(refused(&["profile"]).contains("unknown command `profile`"));
    assert!(refused(&["memory", "--rounds", "2"]).contains("unknown option `--rounds`"));
    assert!(
        refused(&["hot", "--family", "mixed", "--mix", "miss"]).contains("`--routes` is required")
    );
    assert!(refused(&["candidates", "--family", "rest"]).contains("unknown family `rest`"));
    let both = [
        "hot",
        "--routes",
        "10",
        "--family",
        "mixed",
        "--mix",
        "miss",
        "--plain",
        "--captures",
    ];
    assert!(refused(&both).contains("exclude each other"));
    // matchit reads only method and path: a table of hosts and prefixes is not one it holds.
    let hosts = [
        "hot",
        "--routes",
        "50",
        "--family",
        "host-prefixes",
        "--mix",
        "hit-middle",
        "--matchit",
    ];
    assert!(refused(&hosts).contains("not the same table"));
}

#[test]
fn stress_families_by_name() {
    let out = ok(&[
        "candidates",
        "--routes",
        "40",
        "--family",
        "field-per-route",
    ]);
    assert!(
        out.lines().any(|l| l.starts_with("field-per-route")),
        "{out}"
    );
    assert!(out.contains("index summary:"), "{out}");
    let out = ok(&[
        "hot",
        "--routes",
        "6",
        "--family",
        "alternations",
        "--mix",
        "miss-keys",
        "--iters",
        "200",
    ]);
    assert!(out.contains("ns per request"), "{out}");
    let err = refused(&["candidates", "--family", "stress"]);
    assert!(err.contains("unanchored-regex"), "{err}");
}

#[test]
fn operators_keep_one_candidate_where_keyed() {
    let out = ok(&["operators", "--sizes", "30"]);
    let rows: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(rows.len(), atc_benches::operators::FAMILIES.len());
    for row in rows {
        let keyed = row.ends_with("yes");
        // `candidates mean / max`: one route where the index keys the form, every route else.
        let cands = row
            .split("  ")
            .map(str::trim)
            .find(|c| c.contains(" / "))
            .unwrap();
        if keyed {
            assert!(cands.starts_with("1.0 / 1"), "{row}");
        } else {
            assert!(cands.starts_with("30.0 / 30"), "{row}");
        }
        assert!(
            row.contains(" 1.00 ") || !keyed,
            "every request routes: {row}"
        );
    }
    assert!(refused(&["operators", "--sizes", "0"]).contains("positive integers"));
}
