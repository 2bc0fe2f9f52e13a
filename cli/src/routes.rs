//! Route files: read within the command's caps, then parsed by the core's route-list reader
//! (`atc_router::route_list`, the same one a gateway's background sync uses) for TSV and JSON
//! route lists, or turned into the same entries from Kong's own documents (`crate::kong`).

use std::collections::HashMap;
use std::path::Path;

pub use atc_router::route_list::EntryList as RouteFile;
use atc_router::route_list::{sniff, EntryList, Format, LineCap, LongLine};
use atc_router::Uuid;
use clap::ValueEnum;

use crate::input;
use crate::kong;

/// What the route file is (`--input`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InputFormat {
    /// By the file: `.yml`/`.yaml` are Kong's YAML; JSON with `_format_version` is Kong's
    /// declarative configuration, with `data` an Admin API listing, otherwise a route list;
    /// text starting like Kong's YAML (`_format_version:`, `services:`, `routes:`, `---`) is
    /// Kong's; anything else is TSV.
    Auto,
    /// `priority<TAB>id<TAB>expression` lines.
    Tsv,
    /// A JSON route list: `[{"id", "priority", "expression"}, ...]` or `{"routes": [...]}`.
    Json,
    /// Kong's declarative configuration (kong.yml, or its JSON form).
    Kong,
    /// The Admin API's listing of routes (`GET /routes`: `{"data": [...]}`).
    KongAdmin,
}

/// A route file, read.
pub struct Loaded {
    pub file: RouteFile,
    /// How it was read, for reports: `tsv`, `json`, `kong-yaml`, `kong-json`, `kong-admin`.
    pub format: &'static str,
    /// Route names (Kong's documents), for reports.
    pub names: HashMap<Uuid, String>,
    /// What was left out and why (Kong's documents), for standard error.
    pub notes: Vec<String>,
    /// Whether it is one of Kong's documents (its routes test `net.protocol`).
    pub kong: bool,
}

impl Loaded {
    fn list(file: RouteFile) -> Loaded {
        let format = file.format().map_or("tsv", |f| f.name());
        Loaded {
            file,
            format,
            names: HashMap::new(),
            notes: Vec::new(),
            kong: false,
        }
    }
}

/// Reads the route file at `path` (`-`: standard input) within `caps`; Kong's routes are taken
/// as `options` say.
pub fn load(
    path: &str,
    caps: &input::Caps,
    format: InputFormat,
    options: kong::Options,
) -> Result<Loaded, String> {
    let name = display_name(path);
    let from_kong = |bytes: &[u8], kind, format| {
        let routes = kong::read(bytes, kind, options).map_err(|e| format!("{name}: {e}"))?;
        Ok(Loaded {
            file: routes.list,
            format,
            names: routes.names,
            notes: routes.notes,
            kong: true,
        })
    };
    let kong_format = |bytes: &[u8]| match sniff(bytes) {
        Format::Json => "kong-json",
        Format::Tsv => "kong-yaml",
    };
    let yaml_extension = Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yml") || e.eq_ignore_ascii_case("yaml"));
    match format {
        InputFormat::Kong | InputFormat::KongAdmin => {
            let bytes = input::read_whole(path, caps)?;
            if format == InputFormat::KongAdmin {
                from_kong(&bytes, kong::Kind::Admin, "kong-admin")
            } else {
                from_kong(&bytes, kong::Kind::Declarative, kong_format(&bytes))
            }
        }
        InputFormat::Auto if yaml_extension => {
            let bytes = input::read_whole(path, caps)?;
            from_kong(&bytes, kong::Kind::Declarative, kong_format(&bytes))
        }
        InputFormat::Json => {
            let bytes = input::read_whole(path, caps)?;
            let list = EntryList::read_json(&bytes).map_err(|e| format!("{name}: {e}"))?;
            Ok(Loaded::list(list))
        }
        InputFormat::Tsv | InputFormat::Auto => {
            let file = input::read(path, caps)?;
            if format == InputFormat::Auto && file.json {
                return match kong::sniff_json(&file.bytes) {
                    Some(kong::Kind::Declarative) => {
                        from_kong(&file.bytes, kong::Kind::Declarative, "kong-json")
                    }
                    Some(kong::Kind::Admin) => {
                        from_kong(&file.bytes, kong::Kind::Admin, "kong-admin")
                    }
                    None => {
                        let list = EntryList::read_json(&file.bytes)
                            .map_err(|e| format!("{name}: {e}"))?;
                        Ok(Loaded::list(list))
                    }
                };
            }
            if format == InputFormat::Auto && kong::looks_like_yaml(&file.bytes) {
                if let Some(l) = file.long_lines.first() {
                    return Err(format!(
                        "{name}: line {} ({} bytes) is longer than --max-line-size; a YAML file \
                         is read whole with --input kong or a .yml/.yaml name",
                        l.line, l.len
                    ));
                }
                return from_kong(&file.bytes, kong::Kind::Declarative, "kong-yaml");
            }
            Ok(Loaded::list(read_tsv(&file, caps)))
        }
    }
}

/// A TSV route list.
fn read_tsv(file: &input::Input, caps: &input::Caps) -> RouteFile {
    let long: Vec<LongLine> = file
        .long_lines
        .iter()
        .map(|l| LongLine {
            line: l.line,
            len: usize::try_from(l.len).unwrap_or(usize::MAX),
        })
        .collect();
    let named = format!(
        ", --max-line-size; an expression may have {} bytes",
        input::MAX_EXPRESSION
    );
    let cap = LineCap {
        bytes: caps.max_line,
        named: &named,
    };
    EntryList::read_tsv(&file.bytes, cap, &long)
}

/// How a path is shown in messages.
pub fn display_name(path: &str) -> &str {
    if path == "-" {
        "<stdin>"
    } else {
        path
    }
}
