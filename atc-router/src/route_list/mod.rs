//! Route lists as they arrive: the one form a list takes on its way to a sync, whoever read it
//! (the C ABI from a caller's arrays, the builder's thread from a text, the `atc-router`
//! command from a file).
//!
//! A list is a sequence of [`Entry`]s: where the entry is in the caller's list ([`Position`]),
//! and what it is ([`Item`]): a route (id, priority, expression), a removal by id (only in a
//! list of changes), or an entry that could not be read, with why. Entries are not judged
//! against each other here: the rule for repeated ids, and everything about expressions, is
//! the sync's (`router/sync.rs`), so that every caller gets the same answer for the same list.
//!
//! [`EntryList`] owns a list: every expression and reason in one text buffer, and one small
//! record per entry, so that handing a list over costs one copy of its bytes (no allocation per
//! route), and reading it back ([`EntryList::get`]) borrows from the buffer.
//!
//! Invariant: an entry's [`Position`] is what the caller calls it (its number in an array, or
//! its line in a text), and it stays attached to the entry and its errors all the way through,
//! so that every error names the caller's own entry.
//!
//! ```
//! use atc_router::route_list::{EntryList, Item, Position};
//! use atc_router::Uuid;
//! let mut list = EntryList::new();
//! list.push_route(Position::Item(1), Uuid::from_u128(1), 10, r#"http.path ^= "/a""#);
//! list.push_removal(Position::Item(2), Uuid::from_u128(2));
//! assert_eq!(list.len(), 2);
//! assert!(matches!(list.get(0).item, Item::Route { priority: 10, .. }));
//! assert_eq!(list.get(1).at.to_string(), "route #2");
//! ```

mod raw;
mod sniff;
mod text;

pub use raw::{parse_id, read_id, read_text};
pub use sniff::{sniff, strip_bom, Format, Sniffer, BOM};
pub use text::{LineCap, LongLine};

use std::fmt;
use std::ops::Range;

use uuid::Uuid;

/// Where an entry is in the caller's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Position {
    /// The entry's number in an array, from 1.
    Item(usize),
    /// The line of a text the entry is on (for JSON, the line its object starts on).
    Line(usize),
}

impl Position {
    /// The number: the item's from 1, or the line.
    pub fn number(self) -> usize {
        match self {
            Position::Item(n) | Position::Line(n) => n,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Item(n) => write!(f, "route #{n}"),
            Position::Line(n) => write!(f, "route at line {n}"),
        }
    }
}

/// Why an entry could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnreadKind {
    /// Not a route: a part missing, not three tab-separated parts, not an object, a NULL
    /// pointer.
    Malformed,
    /// An id that is not a UUID.
    BadId,
    /// A priority that is not an integer from 0 to 2^64 - 1.
    BadPriority,
    /// Text that is not UTF-8.
    NotUtf8,
}

impl UnreadKind {
    /// The kind's name in reports (`malformed`, `bad-id`, `bad-priority`, `not-utf8`).
    pub fn name(self) -> &'static str {
        match self {
            UnreadKind::Malformed => "malformed",
            UnreadKind::BadId => "bad-id",
            UnreadKind::BadPriority => "bad-priority",
            UnreadKind::NotUtf8 => "not-utf8",
        }
    }
}

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    /// A route (in a list of changes: put in, or in place of the route with its id).
    Route {
        /// Its id.
        id: Uuid,
        /// Its priority.
        priority: u64,
        /// Its expression, not yet parsed.
        expression: &'a str,
    },
    /// Take out the route with this id (only in a list of changes).
    Remove(Uuid),
    /// An entry that could not be read.
    Unreadable {
        /// Its id, when that could be read: the id then counts (a later entry with it repeats
        /// it, and a route of the table with it keeps its current version in apply-valid
        /// mode).
        id: Option<Uuid>,
        /// What is wrong.
        kind: UnreadKind,
        /// Why, in words, quoting what was read.
        why: &'a str,
    },
}

impl Item<'_> {
    /// The entry's id, when it has one that could be read.
    pub fn id(&self) -> Option<Uuid> {
        match *self {
            Item::Route { id, .. } | Item::Remove(id) => Some(id),
            Item::Unreadable { id, .. } => id,
        }
    }
}

/// One entry of a route list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Where it is in the caller's list.
    pub at: Position,
    /// What it is.
    pub item: Item<'a>,
}

/// How an [`EntryList`] stores one entry: its text as a range of the list's buffer.
#[derive(Debug, Clone)]
enum Record {
    Route {
        id: Uuid,
        priority: u64,
        expression: Range<usize>,
    },
    Remove(Uuid),
    Unreadable {
        id: Option<Uuid>,
        kind: UnreadKind,
        why: Range<usize>,
    },
}

/// A route list that owns its entries (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct EntryList {
    text: String,
    records: Vec<(Position, Record)>,
    removals: usize,
    format: Option<Format>,
}

impl EntryList {
    /// An empty list.
    pub fn new() -> EntryList {
        EntryList::default()
    }

    /// An empty list with room for `entries` entries and `bytes` bytes of text.
    pub fn with_capacity(entries: usize, bytes: usize) -> EntryList {
        EntryList {
            text: String::with_capacity(bytes),
            records: Vec::with_capacity(entries),
            ..EntryList::default()
        }
    }

    fn keep(&mut self, s: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(s);
        start..self.text.len()
    }

    /// Appends a route.
    pub fn push_route(&mut self, at: Position, id: Uuid, priority: u64, expression: &str) {
        let expression = self.keep(expression);
        self.records.push((
            at,
            Record::Route {
                id,
                priority,
                expression,
            },
        ));
    }

    /// Appends a removal.
    pub fn push_removal(&mut self, at: Position, id: Uuid) {
        self.removals += 1;
        self.records.push((at, Record::Remove(id)));
    }

    /// Appends an entry that could not be read.
    pub fn push_unreadable(&mut self, at: Position, id: Option<Uuid>, kind: UnreadKind, why: &str) {
        let why = self.keep(why);
        self.records
            .push((at, Record::Unreadable { id, kind, why }));
    }

    /// Appends `entry`, copying its text.
    pub fn push(&mut self, entry: Entry<'_>) {
        match entry.item {
            Item::Route {
                id,
                priority,
                expression,
            } => self.push_route(entry.at, id, priority, expression),
            Item::Remove(id) => self.push_removal(entry.at, id),
            Item::Unreadable { id, kind, why } => self.push_unreadable(entry.at, id, kind, why),
        }
    }

    /// Empties the list, keeping its buffers for the next one.
    pub fn clear(&mut self) {
        self.text.clear();
        self.records.clear();
        self.removals = 0;
        self.format = None;
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the list has no entry.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The number of removals: a list with any is a list of changes.
    pub fn removals(&self) -> usize {
        self.removals
    }

    /// The format of the text the list was read from, if it was.
    pub fn format(&self) -> Option<Format> {
        self.format
    }

    /// Entry `i`.
    pub fn get(&self, i: usize) -> Entry<'_> {
        let (at, record) = &self.records[i];
        let item = match record {
            Record::Route {
                id,
                priority,
                expression,
            } => Item::Route {
                id: *id,
                priority: *priority,
                expression: &self.text[expression.clone()],
            },
            Record::Remove(id) => Item::Remove(*id),
            Record::Unreadable { id, kind, why } => Item::Unreadable {
                id: *id,
                kind: *kind,
                why: &self.text[why.clone()],
            },
        };
        Entry { at: *at, item }
    }

    /// The entries, in list order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Entry<'_>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// The entries as a slice's worth of values (what a sync takes).
    pub fn entries(&self) -> Vec<Entry<'_>> {
        self.iter().collect()
    }

    /// Reads a list in text of either format ([`sniff`]; a leading byte-order mark is not
    /// content); a TSV line longer than `max_line` bytes is a malformed entry. An error only
    /// for a text that is no route list as a whole (JSON that does not parse, or is not an
    /// array of routes).
    pub fn read(text: &[u8], max_line: usize) -> Result<EntryList, String> {
        let text = strip_bom(text);
        match sniff(text) {
            Format::Json => EntryList::read_json(text),
            Format::Tsv => Ok(EntryList::read_tsv(text, LineCap::of(max_line), &[])),
        }
    }

    /// Reads a JSON list: an array of `{"id", "priority", "expression"}` objects, or
    /// `{"routes": [...]}`.
    pub fn read_json(text: &[u8]) -> Result<EntryList, String> {
        let text = std::str::from_utf8(text).map_err(|e| format!("not UTF-8 text: {e}"))?;
        let mut list = text::read_json(text)?;
        list.format = Some(Format::Json);
        Ok(list)
    }

    /// Reads a TSV list (`priority<TAB>id<TAB>expression` per line; blank lines and `#`
    /// comments are skipped); `long` are lines a streaming reader left out of `text` (see
    /// [`LongLine`]), and a line of `text` longer than `cap` is malformed too.
    pub fn read_tsv(text: &[u8], cap: LineCap<'_>, long: &[LongLine]) -> EntryList {
        let mut list = text::read_tsv(text, long, cap);
        list.format = Some(Format::Tsv);
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_borrow_their_text_from_the_list() {
        let mut l = EntryList::with_capacity(3, 64);
        l.push_route(
            Position::Line(3),
            Uuid::from_u128(7),
            5,
            "http.path == \"/x\"",
        );
        l.push_unreadable(
            Position::Line(4),
            Some(Uuid::from_u128(8)),
            UnreadKind::BadPriority,
            "bad priority `x`",
        );
        l.push_removal(Position::Item(9), Uuid::from_u128(9));
        let e: Vec<Entry<'_>> = l.entries();
        assert_eq!(
            e[0].item,
            Item::Route {
                id: Uuid::from_u128(7),
                priority: 5,
                expression: "http.path == \"/x\""
            }
        );
        assert_eq!(e[1].item.id(), Some(Uuid::from_u128(8)));
        assert_eq!(e[2].at.to_string(), "route #9");
        assert_eq!(l.removals(), 1);
        let mut copy = EntryList::new();
        for entry in l.iter() {
            copy.push(entry);
        }
        assert_eq!(copy.entries(), e);
    }
}
