//! `atc-router`: the route engine's command for configuration pipelines (`docs/cli.md`).
//!
//! `atc-router check ROUTES` reads a route file (a TSV or JSON route list, Kong's declarative
//! configuration in YAML or JSON, or the Admin API's listing of routes), reports every route
//! with an error (by line) and the lint findings of the valid ones, and with `--explain` why a
//! request goes where it goes. Exit status: 0 clean, 1 when a route has an error (or, with `--strict`, there is a
//! finding), 2 for a bad command line or a file that cannot be read as a whole.

#![forbid(unsafe_code)]

mod check;
mod input;
mod kong;
mod report;
mod request;
mod routes;
mod schema;

use std::io::Write;
use std::process::ExitCode;

use atc_router::{ExplainOptions, Type, Value};
use clap::{Parser, Subcommand, ValueEnum};

use routes::InputFormat;

const CHECK_EXAMPLES: &str = "\
Examples:
  atc-router check routes.tsv                  a route list; exit status 1 on a bad route
  atc-router check kong.yml                    Kong's declarative configuration (YAML or JSON)
  curl -s localhost:8001/routes?size=1000 | atc-router check --input kong-admin -
                                               the routes a running Kong holds (Admin API)
  atc-router check --strict --format json kong.yml > report.json
                                               fail on shadowed and ambiguous routes too
  atc-router check --schema stream kong.yml    the routes of Kong's stream router (tcp, tls, udp)
  atc-router check kong.yml --explain 'GET api.example.com /users/42 X-Tenant:acme'
                                               why a request goes where it goes

Kong's routes are taken as Kong's expressions router takes them: ids from `name` (UUID v5, as
Kong derives them) when `id` is absent, priority 0 when absent, the `net.protocol` term of
their `protocols` appended. docs/cli.md has the details.";

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
    /// Reads route lists (TSV, JSON), Kong's declarative configuration (kong.yml, or its JSON
    /// form) and the Admin API's listing of routes (GET /routes). Exit status: 0 clean, 1 when a
    /// route has an error (or, with --strict, a finding), 2 for a bad command line or a file
    /// that cannot be read as a whole.
    #[command(after_help = CHECK_EXAMPLES)]
    Check(CheckArgs),
}

#[derive(clap::Args)]
struct CheckArgs {
    /// The route file: TSV (`priority<TAB>id<TAB>expression` per line), JSON (an array of
    /// {"id", "priority", "expression"} objects, or {"routes": [...]}), Kong's kong.yml (or its
    /// JSON form) or an Admin API listing ({"data": [...]}); `-` reads standard input.
    #[arg(value_name = "ROUTES")]
    routes: String,

    /// What the route file is; `auto` tells by its name and first lines (docs/cli.md).
    #[arg(long = "input", value_enum, value_name = "FORMAT", default_value_t = InputFormat::Auto)]
    input: InputFormat,

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
    let options = kong::Options {
        subsystem: match args.schema.as_str() {
            "http" => Some(kong::Subsystem::Http),
            "stream" => Some(kong::Subsystem::Stream),
            _ => None,
        },
        protocol_term: schema.field_type("net.protocol") == Some(Type::String),
    };
    let loaded = routes::load(&args.routes, &caps, args.input, options)?;
    for note in &loaded.notes {
        eprintln!("atc-router check: note: {note}");
    }
    let checked = check::check(loaded.file, schema);
    let explained = match &args.explain {
        Some(text) => {
            let mut fields =
                request::parse(text, &checked.router).map_err(|e| format!("--explain: {e}"))?;
            // Kong's HTTP routes test the request's protocol (the term it appends): a request
            // is plain HTTP unless `net.protocol:https` says otherwise.
            if loaded.kong
                && options.protocol_term
                && options.subsystem == Some(kong::Subsystem::Http)
                && !fields.iter().any(|(name, _)| name == "net.protocol")
            {
                fields.push(("net.protocol".to_owned(), Value::String("http".to_owned())));
            }
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
        format: loaded.format,
        schema: &args.schema,
        names: &loaded.names,
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
