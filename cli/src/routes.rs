//! Route files: read within the command's caps, then parsed by the core's route-list reader
//! (`atc_router::route_list`, the same one a gateway's background sync uses).

use atc_router::route_list::{LongLine, RouteList};
pub use atc_router::route_list::{Problem, ProblemKind, RouteList as RouteFile};

use crate::input;

/// Reads the route file at `path` (`-`: standard input) within `caps`.
pub fn load(path: &str, caps: &input::Caps) -> Result<RouteFile, String> {
    let name = display_name(path);
    let file = input::read(path, caps)?;
    if file.json {
        RouteList::read_json(&file.bytes).map_err(|e| format!("{name}: {e}"))
    } else {
        let long: Vec<LongLine> = file
            .long_lines
            .iter()
            .map(|l| LongLine {
                line: l.line,
                len: usize::try_from(l.len).unwrap_or(usize::MAX),
            })
            .collect();
        let mut list = RouteList::read_tsv(&file.bytes, caps.max_line, &long);
        // Say which option sets the cap.
        for p in &mut list.problems {
            if long.iter().any(|l| l.line == p.line) {
                if let Some(head) = p.message.strip_suffix(" bytes)") {
                    p.message = format!(
                        "{head} bytes, --max-line-size; an expression may have {} bytes)",
                        input::MAX_EXPRESSION
                    );
                }
            }
        }
        Ok(list)
    }
}

/// How a path is shown in messages.
pub fn display_name(path: &str) -> &str {
    if path == "-" {
        "<stdin>"
    } else {
        path
    }
}
