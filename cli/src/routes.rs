//! Route files: TSV (`priority<TAB>id<TAB>expression` per line) or JSON (an array of
//! `{"id", "priority", "expression"}` objects, or `{"routes": [...]}`).
//!
//! Reading keeps going past a bad route: each one is a [`Problem`] with its line, and the
//! others are returned. Only a file that cannot be read as a whole (unreadable, JSON that does
//! not parse or is not an array of routes) is an error.

use std::collections::HashMap;

use atc_router::error::excerpt;
use atc_router::Uuid;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::input;

/// A route read from the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its line in the file (for JSON, the line its object starts on).
    pub line: usize,
    pub id: Uuid,
    pub priority: u64,
    pub expression: String,
}

/// What is wrong with a route before its expression is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// Not a route: not three tab-separated parts, not an object, a part missing.
    Malformed,
    /// An id that is not a UUID.
    BadId,
    /// A priority that is not an integer from 0 to 2^64 - 1.
    BadPriority,
    /// An id an earlier route has (`first_line` says where).
    DuplicateId,
}

/// A route that could not be read, or repeats an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: usize,
    pub kind: ProblemKind,
    /// The route's id, when it could be read.
    pub id: Option<Uuid>,
    pub message: String,
    /// For a duplicate id: the line of the first route with it.
    pub first_line: Option<usize>,
}

/// The format of a route file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Tsv,
    Json,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Tsv => "tsv",
            Format::Json => "json",
        }
    }
}

/// A route file, read.
#[derive(Debug)]
pub struct RouteFile {
    pub format: Format,
    /// How many routes the file has (lines that are neither blank nor comments; elements of
    /// the JSON array), good or bad.
    pub count: usize,
    /// The routes read, without those of a duplicate id after the first.
    pub entries: Vec<Entry>,
    /// The routes that could not be read, in file order.
    pub problems: Vec<Problem>,
}

/// Reads the route file at `path` (`-`: standard input).
pub fn load(path: &str) -> Result<RouteFile, String> {
    let bytes = input::read(path)?;
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    let mut file = if input::is_json(path, &head) {
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| format!("{}: not UTF-8 text: {e}", display_name(path)))?;
        read_json(text).map_err(|e| format!("{}: {e}", display_name(path)))?
    } else {
        read_tsv(&bytes)
    };
    file.drop_duplicates();
    Ok(file)
}

/// How a path is shown in messages.
pub fn display_name(path: &str) -> &str {
    if path == "-" {
        "<stdin>"
    } else {
        path
    }
}

/// A route as read, before the duplicate check: its id is known even when the rest is bad.
enum Read {
    Good(Entry),
    Bad(Problem),
}

fn problem(line: usize, kind: ProblemKind, id: Option<Uuid>, message: String) -> Read {
    Read::Bad(Problem {
        line,
        kind,
        id,
        message,
        first_line: None,
    })
}

fn read_tsv(bytes: &[u8]) -> RouteFile {
    let mut reads = Vec::new();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let Ok(text) = std::str::from_utf8(raw) else {
            reads.push(problem(
                line,
                ProblemKind::Malformed,
                None,
                "malformed line: not UTF-8 text".into(),
            ));
            continue;
        };
        let trimmed = text.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        reads.push(tsv_line(line, text));
    }
    RouteFile::from_reads(Format::Tsv, reads)
}

fn tsv_line(line: usize, text: &str) -> Read {
    let parts: Vec<&str> = text.split('\t').collect();
    let [priority, id, expression] = parts[..] else {
        return problem(
            line,
            ProblemKind::Malformed,
            None,
            format!(
                "malformed line: expected 3 tab-separated parts (priority, id, expression), \
                 found {}",
                parts.len()
            ),
        );
    };
    let id = match parse_id(id.trim()) {
        Ok(id) => id,
        Err(m) => return problem(line, ProblemKind::BadId, None, m),
    };
    let priority = match priority.trim().parse::<u64>() {
        Ok(p) => p,
        Err(_) => {
            return problem(
                line,
                ProblemKind::BadPriority,
                Some(id),
                bad_priority(priority),
            )
        }
    };
    Read::Good(Entry {
        line,
        id,
        priority,
        expression: expression.to_owned(),
    })
}

fn parse_id(text: &str) -> Result<Uuid, String> {
    Uuid::try_parse(text).map_err(|_| format!("bad id `{}`: not a UUID", excerpt(text)))
}

fn bad_priority(text: &str) -> String {
    format!(
        "bad priority `{}`: expected an integer from 0 to {}",
        excerpt(text.trim()),
        u64::MAX
    )
}

/// `{"routes": [...]}`; other keys are ignored.
#[derive(Deserialize)]
struct Wrapped<'a> {
    #[serde(borrow)]
    routes: Vec<&'a RawValue>,
}

fn read_json(text: &str) -> Result<RouteFile, String> {
    let elements: Vec<&RawValue> = match text.trim_start().chars().next() {
        Some('[') => {
            serde_json::from_str(text).map_err(|e| format!("not a JSON array of routes: {e}"))?
        }
        Some('{') => {
            serde_json::from_str::<Wrapped>(text)
                .map_err(|e| format!("not a JSON object with a `routes` array: {e}"))?
                .routes
        }
        _ => return Err("expected a JSON array of routes, or an object with `routes`".into()),
    };
    // Each element's text is a slice of `text`: its offset gives its line. Elements come in
    // order, so lines are counted once over the whole file.
    let base = text.as_ptr() as usize;
    let (mut counted_to, mut line) = (0, 1);
    let mut reads = Vec::with_capacity(elements.len());
    for raw in elements {
        let at = raw.get().as_ptr() as usize - base;
        line += text[counted_to..at].matches('\n').count();
        counted_to = at;
        reads.push(json_route(line, raw.get()));
    }
    Ok(RouteFile::from_reads(Format::Json, reads))
}

fn json_route(line: usize, text: &str) -> Read {
    let malformed = |m: String| problem(line, ProblemKind::Malformed, None, m);
    let Ok(mut object) = serde_json::from_str::<Map<String, Value>>(text) else {
        return malformed(
            "malformed route: expected an object with `id`, `priority` and `expression`".into(),
        );
    };
    let id = match object.remove("id") {
        Some(Value::String(s)) => match parse_id(&s) {
            Ok(id) => id,
            Err(m) => return problem(line, ProblemKind::BadId, None, m),
        },
        Some(other) => {
            return problem(
                line,
                ProblemKind::BadId,
                None,
                format!(
                    "bad id {}: expected a UUID string",
                    excerpt(&other.to_string())
                ),
            )
        }
        None => return malformed("malformed route: no `id`".into()),
    };
    let priority = match object.remove("priority") {
        Some(Value::Number(n)) => match n.as_u64() {
            Some(p) => p,
            None => {
                return problem(
                    line,
                    ProblemKind::BadPriority,
                    Some(id),
                    bad_priority(&n.to_string()),
                )
            }
        },
        Some(other) => {
            return problem(
                line,
                ProblemKind::BadPriority,
                Some(id),
                bad_priority(&other.to_string()),
            )
        }
        None => {
            return problem(
                line,
                ProblemKind::Malformed,
                Some(id),
                "malformed route: no `priority`".into(),
            )
        }
    };
    let expression = match object.remove("expression") {
        Some(Value::String(s)) => s,
        Some(_) => {
            return problem(
                line,
                ProblemKind::Malformed,
                Some(id),
                "malformed route: `expression` is not a string".into(),
            )
        }
        None => {
            return problem(
                line,
                ProblemKind::Malformed,
                Some(id),
                "malformed route: no `expression`".into(),
            )
        }
    };
    Read::Good(Entry {
        line,
        id,
        priority,
        expression,
    })
}

impl RouteFile {
    fn from_reads(format: Format, reads: Vec<Read>) -> RouteFile {
        let mut file = RouteFile {
            format,
            count: reads.len(),
            entries: Vec::new(),
            problems: Vec::new(),
        };
        for r in reads {
            match r {
                Read::Good(e) => file.entries.push(e),
                Read::Bad(p) => file.problems.push(p),
            }
        }
        file
    }

    /// Turns every route whose id an earlier route (good or bad) has into a problem.
    fn drop_duplicates(&mut self) {
        let mut first: HashMap<Uuid, usize> = HashMap::new();
        for p in &self.problems {
            if let Some(id) = p.id {
                first.entry(id).or_insert(p.line);
            }
        }
        for e in &self.entries {
            let line = first.entry(e.id).or_insert(e.line);
            if *line > e.line {
                *line = e.line;
            }
        }
        let mut duplicates = Vec::new();
        self.entries.retain(|e| {
            let at = first[&e.id];
            if at == e.line {
                return true;
            }
            duplicates.push(Problem {
                line: e.line,
                kind: ProblemKind::DuplicateId,
                id: Some(e.id),
                message: format!("duplicate id {}: line {at} has it already", e.id),
                first_line: Some(at),
            });
            false
        });
        self.problems.extend(duplicates);
        self.problems.sort_by_key(|p| p.line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "00000000-0000-4000-8000-00000000000a";
    const B: &str = "00000000-0000-4000-8000-00000000000b";

    #[test]
    fn tsv_lines_and_their_problems() {
        let text = format!(
            "# comment\n\n10\t{A}\thttp.path == \"/a\"\r\nx\t{B}\ttrue\n5\tnope\te\n1\t2\n3\t{A}\te\n"
        );
        let f = read_tsv(text.as_bytes());
        let mut f = f;
        f.drop_duplicates();
        assert_eq!(f.count, 5);
        assert_eq!(f.entries.len(), 1);
        assert_eq!(f.entries[0].line, 3);
        assert_eq!(f.entries[0].expression, "http.path == \"/a\"");
        let kinds: Vec<(usize, ProblemKind)> =
            f.problems.iter().map(|p| (p.line, p.kind)).collect();
        assert_eq!(
            kinds,
            [
                (4, ProblemKind::BadPriority),
                (5, ProblemKind::BadId),
                (6, ProblemKind::Malformed),
                (7, ProblemKind::DuplicateId),
            ]
        );
        assert_eq!(f.problems[3].first_line, Some(3));
    }

    #[test]
    fn json_elements_know_their_lines() {
        let text = format!(
            "{{\"routes\": [\n  {{\"id\": \"{A}\", \"priority\": 1, \"expression\": \"a\"}},\n\n  \
             {{\"id\": \"{B}\",\n \"priority\": -1, \"expression\": \"b\"}},\n 7\n]}}"
        );
        let f = read_json(&text).unwrap();
        assert_eq!(f.count, 3);
        assert_eq!(f.entries[0].line, 2);
        assert_eq!(
            (f.problems[0].line, f.problems[0].kind),
            (4, ProblemKind::BadPriority)
        );
        assert_eq!(
            (f.problems[1].line, f.problems[1].kind),
            (6, ProblemKind::Malformed)
        );
        assert!(read_json("[1,").is_err());
        assert!(read_json("{\"rules\": []}").is_err());
    }
}
