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
use serde_json::Value;

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

/// Reads the route file at `path` (`-`: standard input) within `caps`.
pub fn load(path: &str, caps: &input::Caps) -> Result<RouteFile, String> {
    let name = display_name(path);
    let file = input::read(path, caps)?;
    let mut file = if file.json {
        let text =
            std::str::from_utf8(&file.bytes).map_err(|e| format!("{name}: not UTF-8 text: {e}"))?;
        read_json(text).map_err(|e| format!("{name}: {e}"))?
    } else {
        read_tsv(&file.bytes, &file.long_lines, caps.max_line)
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

/// The routes of a TSV file; `long` are its lines longer than `max_line` (left out of
/// `bytes`: each is a malformed route).
fn read_tsv(bytes: &[u8], long: &[input::LongLine], max_line: usize) -> RouteFile {
    let mut reads = Vec::new();
    let mut long = long.iter().peekable();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        if let Some(l) = long.next_if(|l| l.line == line) {
            reads.push(problem(
                line,
                ProblemKind::Malformed,
                None,
                format!(
                    "malformed line: {} bytes, longer than the cap on a line ({max_line} bytes, \
                     --max-line-size; an expression may have {} bytes)",
                    l.len,
                    input::MAX_EXPRESSION
                ),
            ));
            continue;
        }
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
    let priority = match parse_priority(priority) {
        Some(p) => p,
        None => {
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

/// A priority as written: decimal digits only (no sign, no spaces, no fraction or
/// exponent), at most 2^64 - 1.
fn parse_priority(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The error of a priority, quoting it as written.
fn bad_priority(text: &str) -> String {
    let why = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        "larger than the largest priority"
    } else {
        "not written in decimal digits only (no sign, spaces, fraction or exponent)"
    };
    format!(
        "bad priority `{}`: {why}; expected an integer from 0 to {}",
        excerpt(text),
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
    // Each member as written: a priority is judged (and quoted) as its text, not as the float
    // a number too large for u64 would become.
    let Ok(mut object) = serde_json::from_str::<HashMap<String, &RawValue>>(text) else {
        return malformed(
            "malformed route: expected an object with `id`, `priority` and `expression`".into(),
        );
    };
    let member = |raw: &RawValue| serde_json::from_str::<Value>(raw.get()).ok();
    let id = match object.remove("id").map(|raw| (member(raw), raw)) {
        Some((Some(Value::String(s)), _)) => match parse_id(&s) {
            Ok(id) => id,
            Err(m) => return problem(line, ProblemKind::BadId, None, m),
        },
        Some((_, raw)) => {
            return problem(
                line,
                ProblemKind::BadId,
                None,
                format!("bad id {}: expected a UUID string", excerpt(raw.get())),
            )
        }
        None => return malformed("malformed route: no `id`".into()),
    };
    let priority = match object.remove("priority") {
        Some(raw) => match parse_priority(raw.get()) {
            Some(p) => p,
            None => {
                return problem(
                    line,
                    ProblemKind::BadPriority,
                    Some(id),
                    bad_priority(raw.get()),
                )
            }
        },
        None => {
            return problem(
                line,
                ProblemKind::Malformed,
                Some(id),
                "malformed route: no `priority`".into(),
            )
        }
    };
    let expression = match object.remove("expression").map(member) {
        Some(Some(Value::String(s))) => s,
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
        let f = read_tsv(text.as_bytes(), &[], 1000);
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
