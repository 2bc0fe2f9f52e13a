//! Why an entry of a route list is invalid, and the one message a refused list is reported
//! with, whoever handed the list over (the core's callers, the C ABI, the Lua binding, the
//! builder's thread). The rules that decide it are in `sync.rs`.
//!
//! Invariant: an error names its entry by the entry's [`Position`] in the caller's list, so a
//! caller maps every error back to its own input without ids (which an unreadable entry may
//! lack), and the message text is made here only: callers pass it on, they do not reword it.

use std::fmt;

use uuid::Uuid;

use crate::error::Error;
use crate::route_list::{Position, UnreadKind};

/// Why an entry of a route list is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryFault {
    /// Its id is the id of an earlier entry, at `first`.
    Duplicate {
        /// Where the first entry with the id is.
        first: Position,
    },
    /// Its route is refused: the expression does not parse or validate, or exceeds a limit.
    Invalid(Error),
    /// It could not be read.
    Unreadable {
        /// What is wrong.
        kind: UnreadKind,
        /// Why, in words.
        why: String,
    },
}

/// An invalid entry of a route list, by its place in the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryError {
    /// Where it is in the caller's list.
    pub at: Position,
    /// Its id, when it has one.
    pub id: Option<Uuid>,
    /// Why it is invalid.
    pub fault: EntryFault,
}

impl fmt::Display for EntryFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntryFault::Duplicate { first } => write!(f, "duplicate id: {first} has it already"),
            EntryFault::Invalid(e) => write!(f, "{e}"),
            EntryFault::Unreadable { why, .. } => f.write_str(why),
        }
    }
}

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.id {
            Some(id) => write!(f, "{} ({id}): {}", self.at, self.fault),
            None => write!(f, "{}: {}", self.at, self.fault),
        }
    }
}

/// The one message of a refused list: how many entries are invalid, and the first of them.
pub(crate) fn refusal_message(errors: &[EntryError]) -> String {
    match errors.first() {
        Some(first) => format!(
            "{} invalid route(s), nothing changed; {first}",
            errors.len()
        ),
        None => "the list was refused, nothing changed".to_owned(),
    }
}
