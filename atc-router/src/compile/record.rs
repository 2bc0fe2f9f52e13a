//! What the deciding predicates of the matching route recorded: the values of `==`, `^=`, `=^`
//! and `~`, and the regex captures, in one reusable text buffer.
//!
//! Invariant: a sub-expression that turns out false rolls back to the [`Mark`] taken before it,
//! so only deciding predicates leave anything here; a record costs no allocation once its
//! buffers have grown.

use std::fmt;
use std::net::IpAddr;
use std::ops::Range;

use crate::compile::resolve::Lit;
use crate::schema::FieldId;
use crate::value::{IpCidr, Value};

/// What the deciding predicates recorded. Text (matched strings, captures, group names) is
/// copied into one reusable buffer and referred to by range: recording costs no allocation once
/// the buffers have grown, and no reference counting (copying a few bytes is cheaper than the
/// atomic increments and decrements of sharing the route's `Arc<str>`).
///
/// Invariant: a sub-expression that turns out false rolls back to the [`Mark`] taken before it,
/// so only deciding predicates leave anything here.
#[derive(Debug, Default)]
pub(crate) struct MatchRecord {
    matched: Vec<(FieldId, Matched)>,
    captures: Vec<(Key, Range<usize>)>,
    text: String,
}

#[derive(Debug)]
enum Matched {
    Text(Range<usize>),
    Int(i64),
    IpAddr(IpAddr),
    IpCidr(IpCidr),
}

/// A capture's keys: its group number, and its group's name (a range of `text`) when the
/// group has one; a named group is read under both keys, number first.
#[derive(Debug)]
enum Key {
    Index(usize),
    Named(usize, Range<usize>),
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark(usize, usize, usize);

/// A [`MatchRecord`]'s content, owned: each field's value, then each capture key's text.
pub(crate) type OwnedRecord = (Vec<(FieldId, Value)>, Vec<(String, String)>);

impl MatchRecord {
    pub(crate) fn mark(&self) -> Mark {
        Mark(self.matched.len(), self.captures.len(), self.text.len())
    }

    pub(crate) fn rollback(&mut self, m: Mark) {
        self.matched.truncate(m.0);
        self.captures.truncate(m.1);
        self.text.truncate(m.2);
    }

    pub(crate) fn clear(&mut self) {
        self.rollback(Mark(0, 0, 0));
    }

    #[inline]
    pub(crate) fn literal(&mut self, field: FieldId, lit: &Lit) {
        let m = match lit {
            Lit::Str(s) => Matched::Text(self.push_text(s)),
            Lit::Int(i) => Matched::Int(*i),
            Lit::IpAddr(a) => Matched::IpAddr(*a),
            Lit::IpCidr(c) => Matched::IpCidr(*c),
            // A set records the element a value equals, never itself.
            Lit::Set(_) => return,
        };
        self.matched.push((field, m));
    }

    #[inline]
    fn push_text(&mut self, s: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(s);
        start..self.text.len()
    }

    #[inline]
    pub(crate) fn text(&mut self, field: FieldId, s: &str) {
        let r = self.push_text(s);
        self.matched.push((field, Matched::Text(r)));
    }

    /// Records `s` as `field`'s matched value and as capture 0, sharing one copy; returns where
    /// the copy starts, for [`MatchRecord::capture_within`].
    #[inline]
    pub(crate) fn text_and_whole_match(&mut self, field: FieldId, s: &str) -> usize {
        let r = self.push_text(s);
        let start = r.start;
        self.matched.push((field, Matched::Text(r.clone())));
        self.captures.push((Key::Index(0), r));
        start
    }

    /// Records `s` as group `index`'s capture, under its `name` too when it has one.
    pub(crate) fn capture_copy(&mut self, index: usize, name: Option<&str>, s: &str) {
        let r = self.push_text(s);
        self.group(index, name, r);
    }

    /// Records the text at `at` of what is already recorded (a group's part of the whole
    /// match, copied once) as group `index`'s capture, under its `name` too when it has one.
    pub(crate) fn capture_within(&mut self, index: usize, name: Option<&str>, at: Range<usize>) {
        debug_assert!(at.end <= self.text.len() && self.text.is_char_boundary(at.start));
        self.group(index, name, at);
    }

    fn group(&mut self, index: usize, name: Option<&str>, r: Range<usize>) {
        let key = match name {
            Some(name) => Key::Named(index, self.push_text(name)),
            None => Key::Index(index),
        };
        self.captures.push((key, r));
    }

    /// The value recorded last for `field`.
    pub(crate) fn matched_value(&self, field: FieldId) -> Option<MatchedValue<'_>> {
        self.matched
            .iter()
            .rev()
            .find(|(f, _)| *f == field)
            .map(|(_, m)| match m {
                Matched::Int(i) => MatchedValue::Int(*i),
                Matched::IpAddr(a) => MatchedValue::IpAddr(*a),
                Matched::IpCidr(c) => MatchedValue::IpCidr(*c),
                Matched::Text(r) => MatchedValue::String(&self.text[r.clone()]),
            })
    }

    /// The fields with a recorded value, in recording order (with repeats).
    pub(crate) fn matched_fields(&self) -> impl Iterator<Item = FieldId> + '_ {
        self.matched.iter().map(|(f, _)| *f)
    }

    /// The captures in recording order, a named group by number and then by name.
    pub(crate) fn captures(&self) -> Captures<'_> {
        Captures {
            record: self,
            next: 0,
            name_of: None,
        }
    }

    /// The capture recorded last under `key`.
    pub(crate) fn capture(&self, key: CaptureKey<'_>) -> Option<&str> {
        self.captures
            .iter()
            .rev()
            .find(|(k, _)| match (k, key) {
                (Key::Index(a) | Key::Named(a, _), CaptureKey::Index(b)) => *a == b,
                (Key::Named(_, a), CaptureKey::Name(b)) => self.text[a.clone()] == *b,
                (Key::Index(_), CaptureKey::Name(_)) => false,
            })
            .map(|(_, r)| &self.text[r.clone()])
    }

    /// What was recorded, owned: each field's last value and each capture key's last text, in
    /// the order first recorded (what [`MatchResult`] answers for the winner).
    pub(crate) fn to_owned_parts(&self) -> OwnedRecord {
        let mut values: Vec<(FieldId, Value)> = Vec::new();
        for (f, m) in &self.matched {
            let v = match m {
                Matched::Text(r) => Value::String(self.text[r.clone()].to_owned()),
                Matched::Int(i) => Value::Int(*i),
                Matched::IpAddr(a) => Value::IpAddr(*a),
                Matched::IpCidr(c) => Value::IpCidr(*c),
            };
            match values.iter_mut().find(|(g, _)| g == f) {
                Some(slot) => slot.1 = v,
                None => values.push((*f, v)),
            }
        }
        let mut captures: Vec<(String, String)> = Vec::new();
        for (k, text) in self.captures() {
            let (key, text) = (k.to_string(), text.to_owned());
            match captures.iter_mut().find(|(g, _)| *g == key) {
                Some(slot) => slot.1 = text,
                None => captures.push((key, text)),
            }
        }
        (values, captures)
    }
}

/// The captures of a [`MatchRecord`] in recording order (see [`MatchRecord::captures`]).
pub(crate) struct Captures<'a> {
    record: &'a MatchRecord,
    next: usize,
    /// The named group just read by number, to read by name next.
    name_of: Option<(&'a Range<usize>, &'a str)>,
}

impl<'a> Iterator for Captures<'a> {
    type Item = (CaptureKey<'a>, &'a str);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let text = &self.record.text;
        if let Some((name, value)) = self.name_of.take() {
            return Some((CaptureKey::Name(&text[name.clone()]), value));
        }
        let (key, r) = self.record.captures.get(self.next)?;
        self.next += 1;
        let value = &text[r.clone()];
        let index = match key {
            Key::Index(i) => *i,
            Key::Named(i, name) => {
                self.name_of = Some((name, value));
                *i
            }
        };
        Some((CaptureKey::Index(index), value))
    }
}

/// A matched value, borrowed from the context or the route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchedValue<'a> {
    /// A string field's value.
    String(&'a str),
    /// An integer field's value.
    Int(i64),
    /// An address field's value.
    IpAddr(IpAddr),
    /// A network field's value.
    IpCidr(IpCidr),
}

impl fmt::Display for MatchedValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchedValue::String(s) => f.write_str(s),
            MatchedValue::Int(i) => write!(f, "{i}"),
            MatchedValue::IpAddr(a) => write!(f, "{a}"),
            MatchedValue::IpCidr(c) => write!(f, "{c}"),
        }
    }
}

/// The key of a capture: group number or group name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureKey<'a> {
    /// A numbered group (`0` is the whole match).
    Index(usize),
    /// A named group.
    Name(&'a str),
}

impl fmt::Display for CaptureKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureKey::Index(i) => write!(f, "{i}"),
            CaptureKey::Name(n) => f.write_str(n),
        }
    }
}
