//! docs/architecture.md, "Where a change belongs", kept true. The compiler lists the Rust code a
//! new operator needs (every `match` on `Op` is exhaustive, and `Op::ALL` is declared with the
//! enum); what it cannot see is the lists written as text. Each is checked here against the one
//! list it restates: [`Op::ALL`] for the operators, [`HTTP_FIELDS`] for Kong's request fields.
//! (The generator is checked by `testkit/tests/roundtrip.rs`, the benchmark families by
//! `benches/src/operators.rs`, a new C call by `ffi/tests/header.rs`.)

use std::path::{Path, PathBuf};

use atc_router::request::{PathField, HTTP_FIELDS};
use atc_router::{Op, Type};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The lines of `doc` from the heading that starts with `heading` to the next heading of its
/// level or above (its subsections included).
fn section(doc: &str, heading: &str) -> Vec<String> {
    let level = |l: &str| l.chars().take_while(|c| *c == '#').count();
    let text = read(doc);
    let mut lines = text.lines().skip_while(|l| !l.starts_with(heading));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("{doc} has no heading {heading:?}"));
    std::iter::once(first)
        .chain(lines.take_while(|l| !(1..=level(heading)).contains(&level(l))))
        .map(String::from)
        .collect()
}

/// The rows of the table of `lines` whose header row starts with `header`.
fn table(lines: &[String], header: &str) -> Vec<String> {
    let rows: Vec<String> = lines
        .iter()
        .skip_while(|l| !l.starts_with(header))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .cloned()
        .collect();
    assert!(!rows.is_empty(), "no table `{header} ...`");
    rows
}

/// The values of a libFuzzer dictionary (`name="value"` lines), unescaped enough for words.
fn dictionary_values() -> Vec<String> {
    read("fuzz/route.dict")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            l.split_once('=')
                .map(|(_, v)| v.trim_matches('"').to_owned())
        })
        .collect()
}

/// The pieces of `s` written between backquotes.
fn quoted(s: &str) -> Vec<&str> {
    s.split('`').skip(1).step_by(2).collect()
}

/// A field name as docs and the dictionary write it: `http.headers.*` as `http.headers.`.
fn stem(name: &str) -> &str {
    name.trim_end_matches('*')
}

mod a_new_operator {
    use super::*;

    #[test]
    fn is_in_the_fuzz_dictionary() {
        let values = dictionary_values();
        for op in Op::ALL {
            assert!(
                values.iter().any(|v| v.trim() == op.symbol()),
                "fuzz/route.dict has no entry for `{op}`"
            );
        }
    }

    #[test]
    fn is_in_the_token_table_of_the_language_reference() {
        let tokens = table(&section("docs/language.md", "## 1."), "| token | rule |");
        let row = tokens
            .iter()
            .find(|l| l.starts_with("| operators |"))
            .expect("docs/language.md's token table has a row `operators`");
        for op in Op::ALL {
            assert!(
                quoted(row).contains(&op.symbol()),
                "docs/language.md's token `operators` does not list `{op}`"
            );
        }
    }

    /// docs/language.md, "Types and operators": the rows naming an operator give exactly the
    /// field types [`Op::applies_to`] allows.
    #[test]
    fn has_rows_in_types_and_operators_for_the_types_it_applies_to() {
        let lines = section("docs/language.md", "## 3.");
        let rows: Vec<(Vec<String>, String)> = table(&lines, "| operator | field type |")
            .into_iter()
            .map(|l| {
                let cells: Vec<&str> = l.split(" | ").collect();
                let ops = quoted(cells[0]).into_iter().map(String::from).collect();
                (ops, cells[1].to_owned())
            })
            .collect();
        for op in Op::ALL {
            let named_in = |t: &Type| {
                rows.iter().any(|(ops, types)| {
                    ops.iter().any(|o| o == op.symbol())
                        && (types == "any" || types.contains(t.name()))
                })
            };
            let documented: Vec<Type> = Type::ALL.into_iter().filter(named_in).collect();
            let allowed: Vec<Type> = Type::ALL
                .into_iter()
                .filter(|t| op.applies_to(*t))
                .collect();
            assert_eq!(
                documented, allowed,
                "docs/language.md, Types and operators: the field types of `{op}`"
            );
        }
    }

    /// The error for a missing operator lists every operator, and docs/kong-differences.md
    /// quotes it as it is.
    #[test]
    fn is_named_by_the_error_that_expects_an_operator() {
        let symbols: Vec<&str> = Op::ALL.iter().map(|op| op.symbol()).collect();
        let want = format!("expected an operator ({})", symbols.join(", "));
        let e = atc_router::parse(r#"http.host = "a.com""#).expect_err("`=` is no operator");
        assert!(e.to_string().contains(&want), "{e}");
        assert!(
            read("docs/kong-differences.md").contains(&want),
            "docs/kong-differences.md quotes an old list of operators (want {want:?})"
        );
    }
}

mod a_new_request_field {
    use super::*;

    /// The row of `rows` whose first cell names `field`: in full, or for a wildcard one name
    /// it stands for (`http.headers.NAME` for `http.headers.*`).
    fn row<'a>(rows: &'a [String], field: &str) -> Option<&'a String> {
        let names = |q: &&str| *q == field || field.ends_with('*') && q.starts_with(stem(field));
        rows.iter().find(|l| {
            quoted(l.split(" | ").next().unwrap_or(""))
                .iter()
                .any(names)
        })
    }

    #[test]
    fn is_in_the_schemas_of_the_check_command_with_its_type() {
        let rows = table(&section("docs/cli.md", "## Schemas"), "| field | type |");
        for (field, ty) in HTTP_FIELDS {
            let row = row(&rows, field)
                .unwrap_or_else(|| panic!("docs/cli.md, Schemas: no row for `{field}`"));
            assert!(
                row.contains(ty.name()),
                "docs/cli.md: `{field}` is {ty}: {row}"
            );
        }
    }

    #[test]
    fn is_in_the_schema_of_the_workload_with_its_type() {
        let rows = table(
            &section("docs/workload.md", "## Schema"),
            "| field | type |",
        );
        for (field, ty) in HTTP_FIELDS {
            let row = row(&rows, field)
                .unwrap_or_else(|| panic!("docs/workload.md, Schema: no row for `{field}`"));
            assert!(
                row.contains(ty.name()),
                "docs/workload.md: `{field}` is {ty}: {row}"
            );
        }
    }

    /// docs/gateway.md says where the gateway reads each field from.
    #[test]
    fn says_where_the_gateway_reads_it() {
        let lines: Vec<String> = read("docs/gateway.md").lines().map(String::from).collect();
        let rows = table(&lines, "| field | from |");
        for (field, _) in HTTP_FIELDS {
            assert!(
                row(&rows, field).is_some(),
                "docs/gateway.md, `| field | from |`: no row for `{field}`"
            );
        }
    }

    /// The gateway reads every field: a field derived from the path through the core
    /// (`atc_context_add_path`), or one lua/resty/router/gateway/request.lua names.
    #[test]
    fn is_read_by_the_gateway() {
        let lua = read("lua/resty/router/gateway/request.lua");
        for (field, _) in HTTP_FIELDS {
            let derived = PathField::of(&field.replace('*', "0")).is_some();
            // As a key (`["net.src.ip"]`) or a Lua pattern (`"^http%.headers%."`).
            let named = lua.contains(&format!("\"{}", stem(field)))
                || lua.contains(&format!("\"^{}", stem(field).replace('.', "%.")));
            assert!(
                derived || named,
                "lua/resty/router/gateway/request.lua never reads `{field}`"
            );
        }
    }

    #[test]
    fn is_in_the_fuzz_dictionary() {
        let values = dictionary_values();
        for (field, _) in HTTP_FIELDS {
            assert!(
                values.iter().any(|v| v.starts_with(stem(field))),
                "fuzz/route.dict has no entry for `{field}`"
            );
        }
    }
}

/// Every file the change map names exists: a map that names a moved or deleted file is not
/// true any more.
#[test]
fn every_file_the_change_map_names_exists() {
    let lines = section("docs/architecture.md", "## Where a change belongs");
    let mut named = 0;
    for line in &lines {
        for q in quoted(line) {
            let looks_like_a_path = q.contains('/')
                && !q.contains(' ')
                && q.rsplit('/').next().is_some_and(|f| f.contains('.'));
            if !looks_like_a_path {
                continue;
            }
            named += 1;
            let found = [repo(), repo().join("atc-router/src")]
                .iter()
                .any(|base| base.join(q).exists());
            assert!(
                found,
                "docs/architecture.md's change map names `{q}`, which does not exist"
            );
        }
    }
    assert!(named > 20, "only {named} paths found in the change map");
}
