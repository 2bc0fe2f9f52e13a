//! `atc-router`: the route engine's command for configuration pipelines (`docs/cli.md`).
//!
//! `atc-router check ROUTES` reads a route file, reports every route with an error (by line)
//! and the lint findings of the valid ones, and with `--explain` why a request goes where it
//! goes. Exit status: 0 clean, 1 when a route has an error (or, with `--strict`, there is a
//! finding), 2 for a bad command line or a file that cannot be read as a whole.

#![forbid(unsafe_code)]

mod check;
mod input;
mod report;
mod request;
mod routes;
mod schema;

use std::io::Write;
use std::process::ExitCode;

use atc_router::ExplainOptions;
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "atc-router",
    version,
    about = "Route tables for API gateways: check route files, explain requests"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a route file: every route's errors by line, then lint findings of the valid routes.
    ///
    /// Exit status: 0 clean, 1 when a route has an error (or, with --strict, a finding), 2 for a
    /// bad command line or a file that cannot be read as a whole.
    Check(CheckArgs),
}

#[derive(clap::Args)]
struct CheckArgs {
    /// The route file: TSV (`priority<TAB>id<TAB>expression` per line) or JSON (an array of
    /// {"id", "priority", "expression"} objects, or {"routes": [...]}); `-` reads standard input.
    #[arg(value_name = "ROUTES")]
    routes: String,

    /// The fields routes may use: `http` or `stream` (Kong's fields), or a schema file
    /// (`name TYPE` lines, or a JSON object of names to types).
    #[arg(long, value_name = "http|stream|FILE", default_value = "http")]
    schema: String,

    /// The report's format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,

    /// Exit with status 1 on lint findings too.
    #[arg(long)]
    strict: bool,

    /// Explain a request: 'METHOD HOST PATH [name:value ...]' (`-` leaves a part out; a name
    /// without a dot is a header, a dotted one a field: 'GET a.example /v1 X-Tenant:acme
    /// net.dst.port:443').
    #[arg(long, value_name = "REQUEST", allow_hyphen_values = true)]
    explain: Option<String>,

    /// With --explain: also list the routes the index ruled out, each with the key that did.
    #[arg(long, requires = "explain")]
    ruled_out: bool,

    /// The most a route or schema file may hold (bytes, or with K, M, G): beyond it the file
    /// is refused (exit status 2).
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = input::parse_size)]
    max_file_size: u64,

    /// The longest line of a TSV route file or a schema file (bytes, or with K, M, G): a longer
    /// line is an error of its own. Default: 1 MiB (the longest expression) + 256 bytes.
    #[arg(long, value_name = "SIZE", value_parser = input::parse_size)]
    max_line_size: Option<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => match run_check(&args) {
            Ok(code) => code,
            Err(message) => {
                eprintln!("atc-router check: {message}");
                ExitCode::from(2)
            }
        },
    }
}

/// Runs `check`; an `Err` is a whole-file or command-line error (status 2).
fn run_check(args: &CheckArgs) -> Result<ExitCode, String> {
    let caps = input::Caps {
        max_file: args.max_file_size,
        max_line: args.max_line_size.map_or(input::DEFAULT_MAX_LINE, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        }),
    };
    let schema = schema::load(&args.schema, &caps)?;
    let file = routes::load(&args.routes, &caps)?;
    let checked = check::check(file, schema);
    let explained = match &args.explain {
        Some(text) => {
            let fields =
                request::parse(text, &checked.router).map_err(|e| format!("--explain: {e}"))?;
            let mut ctx = request::context(&checked.router, &fields)
                .map_err(|e| format!("--explain: {e}"))?;
            let explanation = checked
                .router
                .explain_with(
                    &mut ctx,
                    ExplainOptions {
                        ruled_out: args.ruled_out,
                        ..ExplainOptions::default()
                    },
                )
                .map_err(|e| format!("--explain: {e}"))?;
            Some(report::Explained {
                request: text.split_whitespace().collect::<Vec<_>>().join(" "),
                fields,
                explanation,
            })
        }
        None => None,
    };
    let cx = report::Context {
        file: routes::display_name(&args.routes),
        schema: &args.schema,
        explained,
    };
    let out = match args.format {
        Format::Text => report::text(&checked, &cx),
        Format::Json => report::json(&checked, &cx),
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error of the check.
    let _ = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush());
    let failed = !checked.errors.is_empty() || (args.strict && !checked.findings.is_empty());
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
