//! Writes a benchmark table of `workload/` (the tables of the criterion benchmarks, seed 1) as
//! a TSV route file for `atc-router check`, to time it on gateway-sized tables:
//!
//! ```sh
//! cargo run --release -p atc-router-cli --example workload-tsv -- 100000 > routes.tsv
//! cargo run --release -p atc-router-cli --example workload-tsv -- 10000 rest-api > rest.tsv
//! ```
//!
//! The family is a docs/workload.md name, `mixed` by default.

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use atc_workload::{Family, Table};

/// The seed of the benchmark tables (`atc_benches::TABLE_SEED`).
const TABLE_SEED: u64 = 1;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (n, family) = match args.as_slice() {
        [n] => (n.parse().ok(), Some(Family::Mixed)),
        [n, family] => (n.parse().ok(), Family::from_name(family)),
        _ => (None, None),
    };
    let (Some(n), Some(family)) = (n, family) else {
        eprintln!("usage: workload-tsv ROUTES [FAMILY]");
        return ExitCode::from(2);
    };
    let table = Table::family(family, n, TABLE_SEED);
    let mut out = BufWriter::new(std::io::stdout().lock());
    for r in &table.routes {
        assert!(!r.expression.contains(['\t', '\n']), "{}", r.expression);
        if writeln!(out, "{}\t{}\t{}", r.priority, r.id_string(), r.expression).is_err() {
            return ExitCode::FAILURE;
        }
    }
    if out.flush().is_err() {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
