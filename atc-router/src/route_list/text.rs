//! Route lists in text: TSV (`priority<TAB>id<TAB>expression` per line) or JSON (an array of
//! `{"id", "priority", "expression"}` objects, or `{"routes": [...]}`), the formats a control
//! plane sends and route files are kept in, read into an [`EntryList`].
//!
//! Reading keeps going past a bad route: each one is an unreadable entry with its line and why,
//! and the others are returned. Only a text that cannot be read as a whole (JSON that does not
//! parse or is not an array of routes) is an error.
//!
//! ```
//! use atc_router::route_list::{EntryList, Item, UnreadKind};
//! let text = "10\t00000000-0000-4000-8000-00000000000a\thttp.path ^= \"/a\"\n\
//!             x\t00000000-0000-4000-8000-00000000000b\thttp.path ^= \"/b\"\n";
//! let list = EntryList::read(text.as_bytes(), usize::MAX).unwrap();
//! assert_eq!(list.len(), 2);
//! assert!(matches!(list.get(1).item, Item::Unreadable { kind: UnreadKind::BadPriority, .. }));
//! ```

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use uuid::Uuid;

use super::{EntryList, Position, UnreadKind};
use crate::error::excerpt;

/// A line of a TSV text cut out by a reader that streams it (longer than its cap): counted as a
/// malformed route, never held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongLine {
    /// Its line number.
    pub line: usize,
    /// Its length in bytes.
    pub len: usize,
}

/// A route as read.
enum Read {
    Good {
        id: Uuid,
        priority: u64,
        expression: String,
    },
    Bad {
        id: Option<Uuid>,
        kind: UnreadKind,
        why: String,
    },
}

fn bad(kind: UnreadKind, id: Option<Uuid>, why: String) -> Read {
    Read::Bad { id, kind, why }
}

fn push(list: &mut EntryList, line: usize, read: Read) {
    let at = Position::Line(line);
    match read {
        Read::Good {
            id,
            priority,
            expression,
        } => list.push_route(at, id, priority, &expression),
        Read::Bad { id, kind, why } => list.push_unreadable(at, id, kind, &why),
    }
}

/// The entries of a TSV text; `long` are its lines longer than `max_line` left out of `bytes`,
/// and lines of `bytes` longer than it are malformed entries too.
pub(super) fn read_tsv(bytes: &[u8], long: &[LongLine], cap: LineCap<'_>) -> EntryList {
    let max_line = cap.bytes;
    // About a hundred bytes a route: sized once, the buffer holds every expression.
    let mut list = EntryList::with_capacity(bytes.len() / 100 + 1, bytes.len());
    let mut long = long.iter().peekable();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let at = Position::Line(line);
        if let Some(l) = long.next_if(|l| l.line == line) {
            list.push_unreadable(at, None, UnreadKind::Malformed, &long_line(l.len, cap));
            continue;
        }
        if raw.len() > max_line {
            list.push_unreadable(at, None, UnreadKind::Malformed, &long_line(raw.len(), cap));
            continue;
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let Ok(text) = std::str::from_utf8(raw) else {
            list.push_unreadable(
                at,
                None,
                UnreadKind::NotUtf8,
                "malformed line: not UTF-8 text",
            );
            continue;
        };
        let trimmed = text.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        tsv_line(&mut list, at, text);
    }
    list
}

fn long_line(len: usize, cap: LineCap<'_>) -> String {
    format!(
        "malformed line: {len} bytes, longer than the cap on a line ({} bytes{})",
        cap.bytes, cap.named
    )
}

/// The longest line a TSV reader takes, and how its caller names that cap in messages
/// (appended after the number: `", --max-line-size"`), or `""`.
#[derive(Debug, Clone, Copy)]
pub struct LineCap<'a> {
    /// Bytes a line may have.
    pub bytes: usize,
    /// Said of the cap in the message of a longer line.
    pub named: &'a str,
}

impl LineCap<'_> {
    /// A cap of `bytes` with no name.
    pub fn of(bytes: usize) -> LineCap<'static> {
        LineCap { bytes, named: "" }
    }
}

fn tsv_line(list: &mut EntryList, at: Position, text: &str) {
    let mut parts = text.split('\t');
    let (Some(priority), Some(id), Some(expression), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        let found = text.split('\t').count();
        list.push_unreadable(
            at,
            None,
            UnreadKind::Malformed,
            &format!(
                "malformed line: expected 3 tab-separated parts (priority, id, expression), \
                 found {found}"
            ),
        );
        return;
    };
    let id = match parse_id(id.trim()) {
        Ok(id) => id,
        Err(m) => return list.push_unreadable(at, None, UnreadKind::BadId, &m),
    };
    match parse_priority(priority) {
        Some(p) => list.push_route(at, id, p, expression),
        None => list.push_unreadable(
            at,
            Some(id),
            UnreadKind::BadPriority,
            &bad_priority(priority),
        ),
    }
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

pub(super) fn read_json(text: &str) -> Result<EntryList, String> {
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
    let mut list = EntryList::with_capacity(elements.len(), text.len());
    for raw in elements {
        let at = raw.get().as_ptr() as usize - base;
        line += text[counted_to..at].matches('\n').count();
        counted_to = at;
        push(&mut list, line, json_route(raw.get()));
    }
    Ok(list)
}

fn json_route(text: &str) -> Read {
    let malformed = |m: String| bad(UnreadKind::Malformed, None, m);
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
            Err(m) => return bad(UnreadKind::BadId, None, m),
        },
        Some((_, raw)) => {
            return bad(
                UnreadKind::BadId,
                None,
                format!("bad id {}: expected a UUID string", excerpt(raw.get())),
            )
        }
        None => return malformed("malformed route: no `id`".into()),
    };
    let priority = match object.remove("priority") {
        Some(raw) => match parse_priority(raw.get()) {
            Some(p) => p,
            None => return bad(UnreadKind::BadPriority, Some(id), bad_priority(raw.get())),
        },
        None => {
            return bad(
                UnreadKind::Malformed,
                Some(id),
                "malformed route: no `priority`".into(),
            )
        }
    };
    let expression = match object.remove("expression").map(member) {
        Some(Some(Value::String(s))) => s,
        Some(_) => {
            return bad(
                UnreadKind::Malformed,
                Some(id),
                "malformed route: `expression` is not a string".into(),
            )
        }
        None => {
            return bad(
                UnreadKind::Malformed,
                Some(id),
                "malformed route: no `expression`".into(),
            )
        }
    };
    Read::Good {
        id,
        priority,
        expression,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route_list::Item;

    const A: &str = "00000000-0000-4000-8000-00000000000a";
    const B: &str = "00000000-0000-4000-8000-00000000000b";

    fn kinds(list: &EntryList) -> Vec<(usize, Option<UnreadKind>)> {
        list.iter()
            .map(|e| {
                let kind = match e.item {
                    Item::Unreadable { kind, .. } => Some(kind),
                    _ => None,
                };
                (e.at.number(), kind)
            })
            .collect()
    }

    #[test]
    fn tsv_lines_and_what_could_not_be_read() {
        let mut text = format!(
            "# comment\n\n10\t{A}\thttp.path == \"/a\"\r\nx\t{B}\ttrue\n5\tnope\te\n1\t2\n3\t{A}\te\n"
        )
        .into_bytes();
        text.extend_from_slice(b"\xff\n");
        let f = read_tsv(&text, &[], LineCap::of(1000));
        assert_eq!(
            f.get(0).item,
            Item::Route {
                id: A.parse().unwrap(),
                priority: 10,
                expression: "http.path == \"/a\""
            }
        );
        // A repeated id is read like any other entry: the sync's rule judges it.
        assert_eq!(
            kinds(&f),
            [
                (3, None),
                (4, Some(UnreadKind::BadPriority)),
                (5, Some(UnreadKind::BadId)),
                (6, Some(UnreadKind::Malformed)),
                (7, None),
                (8, Some(UnreadKind::NotUtf8)),
            ]
        );
        assert_eq!(f.get(1).item.id(), Some(B.parse().unwrap()));
    }

    #[test]
    fn json_elements_know_their_lines() {
        let text = format!(
            "{{\"routes\": [\n  {{\"id\": \"{A}\", \"priority\": 1, \"expression\": \"a\"}},\n\n  \
             {{\"id\": \"{B}\",\n \"priority\": -1, \"expression\": \"b\"}},\n 7\n]}}"
        );
        let f = read_json(&text).unwrap();
        assert_eq!(
            kinds(&f),
            [
                (2, None),
                (4, Some(UnreadKind::BadPriority)),
                (6, Some(UnreadKind::Malformed))
            ]
        );
        assert!(read_json("[1,").is_err());
        assert!(read_json("{\"rules\": []}").is_err());
    }

    #[test]
    fn long_lines_are_malformed_entries() {
        // Line 2 was too long for the caller's reader, which left it out (an empty line here).
        let text = format!("1\t{A}\t{}\n\n3\t{B}\tb\n", "x".repeat(50));
        let f = read_tsv(
            text.as_bytes(),
            &[LongLine { line: 2, len: 9999 }],
            LineCap::of(45),
        );
        assert_eq!(
            kinds(&f),
            [
                (1, Some(UnreadKind::Malformed)),
                (2, Some(UnreadKind::Malformed)),
                (3, None)
            ],
        );
    }
}
