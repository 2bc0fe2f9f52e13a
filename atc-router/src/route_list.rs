//! Route lists in text: TSV (`priority<TAB>id<TAB>expression` per line) or JSON (an array of
//! `{"id", "priority", "expression"}` objects, or `{"routes": [...]}`). The one reader of the
//! formats a control plane sends: the `atc-router check` command reads route files with it, and
//! a background sync ([`crate::Builder`]) reads a list handed over as one string with it, on
//! its own thread.
//!
//! Reading keeps going past a bad route: each one is a [`Problem`] with its line, and the
//! others are returned. Only a text that cannot be read as a whole (JSON that does not parse or
//! is not an array of routes) is an error. An id repeated in the list is a problem of every
//! route after the first that has it.
//!
//! ```
//! use atc_router::route_list::{RouteList, ProblemKind};
//! let text = "10\t00000000-0000-4000-8000-00000000000a\thttp.path ^= \"/a\"\n\
//!             x\t00000000-0000-4000-8000-00000000000b\thttp.path ^= \"/b\"\n";
//! let list = RouteList::read(text.as_bytes(), usize::MAX).unwrap();
//! assert_eq!(list.entries.len(), 1);
//! assert_eq!(list.problems[0].kind, ProblemKind::BadPriority);
//! ```

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use uuid::Uuid;

use crate::error::excerpt;

/// A route read from the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its line in the text (for JSON, the line its object starts on).
    pub line: usize,
    /// The route's id.
    pub id: Uuid,
    /// Its priority.
    pub priority: u64,
    /// Its expression text (not yet parsed).
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
    /// The route's line in the text.
    pub line: usize,
    /// What is wrong.
    pub kind: ProblemKind,
    /// The route's id, when it could be read.
    pub id: Option<Uuid>,
    /// Why, in words (quoting what it read, cut to a window).
    pub message: String,
    /// For a duplicate id: the line of the first route with it.
    pub first_line: Option<usize>,
}

/// The format of a route list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `priority<TAB>id<TAB>expression` per line; blank lines and `#` comments are skipped.
    Tsv,
    /// An array of `{"id", "priority", "expression"}` objects, or `{"routes": [...]}`.
    Json,
}

impl Format {
    /// `"tsv"` or `"json"`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Tsv => "tsv",
            Format::Json => "json",
        }
    }
}

/// A route list, read.
#[derive(Debug)]
pub struct RouteList {
    /// The format it was read as.
    pub format: Format,
    /// How many routes the list has (lines that are neither blank nor comments; elements of
    /// the JSON array), good or bad.
    pub count: usize,
    /// The routes read, without those of a duplicate id after the first.
    pub entries: Vec<Entry>,
    /// The routes that could not be read, in list order.
    pub problems: Vec<Problem>,
}

/// A line of a TSV text cut out by a reader that streams it (longer than its cap): counted as a
/// malformed route, never held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongLine {
    /// Its line number.
    pub line: usize,
    /// Its length in bytes.
    pub len: usize,
}

/// The format of `text`: JSON when its first non-blank character is `[` or `{`, TSV otherwise.
pub fn sniff(text: &[u8]) -> Format {
    match text.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[' | b'{') => Format::Json,
        _ => Format::Tsv,
    }
}

impl RouteList {
    /// Reads a list of either format ([`sniff`]); a TSV line longer than `max_line` bytes is a
    /// malformed route.
    pub fn read(text: &[u8], max_line: usize) -> Result<RouteList, String> {
        match sniff(text) {
            Format::Json => RouteList::read_json(text),
            Format::Tsv => Ok(RouteList::read_tsv(text, max_line, &[])),
        }
    }

    /// Reads a JSON list.
    pub fn read_json(text: &[u8]) -> Result<RouteList, String> {
        let text = std::str::from_utf8(text).map_err(|e| format!("not UTF-8 text: {e}"))?;
        read_json(text)
    }

    /// Reads a TSV list; `long` are lines a streaming reader left out of `text` (see
    /// [`LongLine`]), and a line of `text` longer than `max_line` bytes is malformed too.
    pub fn read_tsv(text: &[u8], max_line: usize, long: &[LongLine]) -> RouteList {
        read_tsv(text, long, max_line)
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

/// The routes of a TSV text; `long` are its lines longer than `max_line` left out of `bytes`,
/// and lines of `bytes` longer than it are malformed routes too.
fn read_tsv(bytes: &[u8], long: &[LongLine], max_line: usize) -> RouteList {
    let mut reads = Vec::new();
    let mut long = long.iter().peekable();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        if let Some(l) = long.next_if(|l| l.line == line) {
            reads.push(long_line(line, l.len, max_line));
            continue;
        }
        if raw.len() > max_line {
            reads.push(long_line(line, raw.len(), max_line));
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
    RouteList::from_reads(Format::Tsv, reads)
}

fn long_line(line: usize, len: usize, max_line: usize) -> Read {
    problem(
        line,
        ProblemKind::Malformed,
        None,
        format!("malformed line: {len} bytes, longer than the cap on a line ({max_line} bytes)"),
    )
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

fn read_json(text: &str) -> Result<RouteList, String> {
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
    Ok(RouteList::from_reads(Format::Json, reads))
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

impl RouteList {
    fn from_reads(format: Format, reads: Vec<Read>) -> RouteList {
        let count = reads.len();
        let (entries, problems) = first_of_each_id(reads.into_iter().map(|r| match r {
            Read::Good(e) => Ok(e),
            Read::Bad(p) => Err(p),
        }));
        RouteList {
            format,
            count,
            entries,
            problems,
        }
    }
}

/// The one rule for repeated ids in a route list, whoever read it (this module, a caller of the
/// C ABI handing routes over one by one, the CLI's reader of Kong's files): in list order, the
/// first route with an id keeps it, whether it could be read or not; every later readable route
/// with that id becomes a [`ProblemKind::DuplicateId`] problem naming the first one's line.
/// Order decides, not lines: the routes of a one-line JSON list share a line. Problems come
/// back sorted by line (ties in list order).
pub fn first_of_each_id(
    reads: impl IntoIterator<Item = Result<Entry, Problem>>,
) -> (Vec<Entry>, Vec<Problem>) {
    let mut first: HashMap<Uuid, usize> = HashMap::new();
    let (mut entries, mut problems) = (Vec::new(), Vec::new());
    for read in reads {
        match read {
            Ok(e) => match first.get(&e.id) {
                Some(&at) => problems.push(Problem {
                    line: e.line,
                    kind: ProblemKind::DuplicateId,
                    id: Some(e.id),
                    message: format!("duplicate id {}: line {at} has it already", e.id),
                    first_line: Some(at),
                }),
                None => {
                    first.insert(e.id, e.line);
                    entries.push(e);
                }
            },
            Err(p) => {
                if let Some(id) = p.id {
                    first.entry(id).or_insert(p.line);
                }
                problems.push(p);
            }
        }
    }
    problems.sort_by_key(|p| p.line);
    (entries, problems)
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

    #[test]
    fn the_first_route_of_an_id_keeps_it_by_order_even_on_one_line() {
        // A one-line JSON list: every route is on line 1, so only order tells them apart.
        let text = format!(
            r#"{{"routes": [{{"id": "{A}", "priority": 1, "expression": "a"}}, {{"id": "{A}", "priority": 2, "expression": "b"}}, {{"id": "{B}", "priority": -1, "expression": "c"}}, {{"id": "{B}", "priority": 3, "expression": "d"}}]}}"#
        );
        let f = RouteList::read_json(text.as_bytes()).unwrap();
        assert_eq!(f.entries.len(), 1);
        assert_eq!(f.entries[0].expression, "a");
        let kinds: Vec<ProblemKind> = f.problems.iter().map(|p| p.kind).collect();
        // The unreadable route with B comes first: it keeps B, and the readable one repeats it.
        assert_eq!(
            kinds,
            [
                ProblemKind::DuplicateId,
                ProblemKind::BadPriority,
                ProblemKind::DuplicateId
            ]
        );
        assert!(f.problems.iter().all(|p| p.line == 1));
        assert_eq!(f.problems[2].first_line, Some(1));
    }
}
