//! Explanations and match lists as JSON: the one shape of the C ABI (`atc_router_explain`,
//! `atc_router_matches`), of the Lua binding that decodes them (`r:explain`, `r:matches`) and
//! of the `explain` member of `atc-router check --format json`. docs/explain.md describes it,
//! docs/explain.schema.json states it, and `cli/tests/explain_schema.rs` checks real outputs
//! of the C ABI and of the command against that schema.
//!
//! Invariants:
//! - Members are written in the order the structs below declare them, and every member is
//!   always present, except those a report about a route file adds ([`ExplainJson::request`]
//!   and, through [`RouteNote`], a route's `name` and `line`): a reader that knows one report
//!   knows them all.
//! - Integers are exact: a priority is a `u64` number, never a float or a string.
//! - A member may be added within a [`REPORT_JSON_VERSION`]; one whose meaning changes, or that
//!   goes, takes a new version (the C header's `ATC_JSON_VERSION` is this number).

use serde::ser::{Serialize, Serializer};
use serde::Serialize as DeriveSerialize;
use uuid::Uuid;

use super::{CandidateReport, Explanation, PredicateOutcome, RouteMatch, RuledOut};
use crate::value::Value;

/// The `"version"` member of every report this module writes (2: explanations are bounded,
/// with `*_omitted` and `*_truncated` members saying what was left out).
pub const REPORT_JSON_VERSION: u32 = 2;

/// What a route file knows about a route that a router does not: where it is in the file and
/// what it is called there. A report about a file (the `atc-router check` command) adds them
/// to each route it names; the C ABI has no file and writes neither.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteNote {
    /// The route's name (Kong's documents name routes); the `name` member, left out when
    /// `None`.
    pub name: Option<String>,
    /// The line of the file the route is on; the `line` member (`null` when `None`).
    pub line: Option<usize>,
}

/// An [`Explanation`] as the JSON report of docs/explain.md: serialize it with serde (as the
/// command embeds it in its document), or write it with [`ExplainJson::to_json`].
///
/// ```
/// # use std::sync::Arc;
/// # use atc_router::{Context, ExplainJson, Router, Schema, Type, Uuid};
/// # let mut schema = Schema::new();
/// # schema.add_field("http.path", Type::String).unwrap();
/// # let schema = Arc::new(schema);
/// # let mut router = Router::new(schema.clone());
/// # router.add(Uuid::from_u128(1), 1, r#"http.path ^= "/a""#).unwrap();
/// # let mut ctx = Context::new(schema);
/// # ctx.add_value("http.path", "/a/b").unwrap();
/// let why = router.explain(&mut ctx).unwrap();
/// let text = ExplainJson::new(&why).to_json();
/// assert!(text.starts_with(r#"{"version":2,"winner":"00000000-0000-0000-0000-000000000001""#));
/// ```
#[derive(Clone, Copy)]
pub struct ExplainJson<'a> {
    explanation: &'a Explanation,
    request: Option<(&'a str, &'a [(String, Value)])>,
    notes: Option<&'a dyn Fn(&Uuid) -> RouteNote>,
}

impl<'a> ExplainJson<'a> {
    /// The report of `explanation`, as the C ABI writes it.
    pub fn new(explanation: &'a Explanation) -> ExplainJson<'a> {
        ExplainJson {
            explanation,
            request: None,
            notes: None,
        }
    }

    /// Also writes the request as a person gave it (`request`, the text) and the values it
    /// was read as (`fields`: `name` and `value` of each).
    pub fn request(mut self, text: &'a str, fields: &'a [(String, Value)]) -> ExplainJson<'a> {
        self.request = Some((text, fields));
        self
    }

    /// Also writes, for each route named (candidates and ruled-out routes), what `notes` says
    /// of it: its `name` when it has one, and its `line`.
    pub fn notes(mut self, notes: &'a dyn Fn(&Uuid) -> RouteNote) -> ExplainJson<'a> {
        self.notes = Some(notes);
        self
    }

    /// The report as compact JSON text (UTF-8, no trailing newline).
    pub fn to_json(&self) -> String {
        // Writing into a String fails only if a Serialize impl fails, and none of these does.
        serde_json::to_string(self).expect("an explanation serializes")
    }

    fn note(&self, id: &Uuid) -> (Option<String>, Option<Option<usize>>) {
        match self.notes {
            Some(notes) => {
                let n = notes(id);
                (n.name, Some(n.line))
            }
            None => (None, None),
        }
    }
}

/// A list of matches ([`crate::Router::matches`]) as the JSON report of docs/explain.md.
#[derive(Clone, Copy)]
pub struct MatchesJson<'a>(pub &'a [RouteMatch]);

impl MatchesJson<'_> {
    /// The report as compact JSON text (UTF-8, no trailing newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a list of matches serializes")
    }
}

// The shapes. Borrowed views of the core's reports, so that the order and the names of the
// members are stated once, here, and serde writes them (escaping included).

#[derive(DeriveSerialize)]
struct ExplainOut<'a> {
    version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fields: Option<Vec<FieldOut<'a>>>,
    winner: Option<String>,
    routes: usize,
    candidates: Vec<CandidateOut<'a>>,
    candidates_omitted: usize,
    ruled_out: Vec<RuledOutOut<'a>>,
    ruled_out_omitted: usize,
}

#[derive(DeriveSerialize)]
struct FieldOut<'a> {
    name: &'a str,
    value: ValueOut<'a>,
}

#[derive(DeriveSerialize)]
struct CandidateOut<'a> {
    id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// Outer `None`: not a report about a file (left out); inner `None`: `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<Option<usize>>,
    priority: u64,
    matched: bool,
    expression: &'a str,
    expression_truncated: bool,
    predicates: Vec<PredicateOut<'a>>,
    predicates_omitted: usize,
}

#[derive(DeriveSerialize)]
struct PredicateOut<'a> {
    index: usize,
    text: &'a str,
    text_truncated: bool,
    holds: bool,
    negated: bool,
    line: usize,
    column: usize,
    span: [usize; 2],
    source_line: &'a str,
    caret: String,
}

#[derive(DeriveSerialize)]
struct RuledOutOut<'a> {
    id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<Option<usize>>,
    priority: u64,
    key: Option<&'a str>,
}

#[derive(DeriveSerialize)]
struct MatchesOut<'a> {
    version: u32,
    matches: Vec<MatchOut<'a>>,
}

#[derive(DeriveSerialize)]
struct MatchOut<'a> {
    id: String,
    priority: u64,
    expression: &'a str,
    matched_values: Vec<MatchedValueOut<'a>>,
    captures: Vec<CaptureOut<'a>>,
}

#[derive(DeriveSerialize)]
struct MatchedValueOut<'a> {
    field: &'a str,
    #[serde(rename = "type")]
    ty: &'static str,
    value: ValueOut<'a>,
}

#[derive(DeriveSerialize)]
struct CaptureOut<'a> {
    key: CaptureKeyOut<'a>,
    value: &'a str,
}

/// A value: an Int as a number, a String as itself, an address or a network as its text
/// (`10.0.0.1`, `10.0.0.0/8`).
enum ValueOut<'a> {
    Text(&'a str),
    Int(i64),
    Shown(String),
}

impl<'a> From<&'a Value> for ValueOut<'a> {
    fn from(v: &'a Value) -> ValueOut<'a> {
        match v {
            Value::String(s) => ValueOut::Text(s),
            Value::Int(i) => ValueOut::Int(*i),
            other => ValueOut::Shown(other.to_string()),
        }
    }
}

impl Serialize for ValueOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ValueOut::Text(t) => s.serialize_str(t),
            ValueOut::Int(i) => s.serialize_i64(*i),
            ValueOut::Shown(t) => s.serialize_str(t),
        }
    }
}

/// A capture's key: a group number as a number, a group name as a string. Group names cannot
/// be all digits, so a key that reads as a number is a group number.
enum CaptureKeyOut<'a> {
    Number(u64),
    Name(&'a str),
}

impl<'a> CaptureKeyOut<'a> {
    fn of(key: &'a str) -> CaptureKeyOut<'a> {
        match key.parse::<u64>() {
            // `parse` takes a leading `+`, which no group number is written with.
            Ok(n) if !key.starts_with('+') => CaptureKeyOut::Number(n),
            _ => CaptureKeyOut::Name(key),
        }
    }
}

impl Serialize for CaptureKeyOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CaptureKeyOut::Number(n) => s.serialize_u64(*n),
            CaptureKeyOut::Name(t) => s.serialize_str(t),
        }
    }
}

impl Serialize for ExplainJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let e = self.explanation;
        ExplainOut {
            version: REPORT_JSON_VERSION,
            request: self.request.map(|(text, _)| text),
            fields: self.request.map(|(_, fields)| {
                fields
                    .iter()
                    .map(|(name, value)| FieldOut {
                        name,
                        value: value.into(),
                    })
                    .collect()
            }),
            winner: e.winner.map(|id| id.to_string()),
            routes: e.routes,
            candidates: e.candidates.iter().map(|c| self.candidate(c)).collect(),
            candidates_omitted: e.candidates_omitted,
            ruled_out: e.ruled_out.iter().map(|r| self.ruled_out(r)).collect(),
            ruled_out_omitted: e.ruled_out_omitted,
        }
        .serialize(s)
    }
}

impl<'a> ExplainJson<'a> {
    fn candidate(&self, c: &'a CandidateReport) -> CandidateOut<'a> {
        let (name, line) = self.note(&c.id);
        CandidateOut {
            id: c.id.to_string(),
            name,
            line,
            priority: c.priority,
            matched: c.matched,
            expression: &c.expression,
            expression_truncated: c.expression_truncated,
            predicates: c.predicates.iter().map(predicate).collect(),
            predicates_omitted: c.predicates_omitted,
        }
    }

    fn ruled_out(&self, r: &'a RuledOut) -> RuledOutOut<'a> {
        let (name, line) = self.note(&r.id);
        RuledOutOut {
            id: r.id.to_string(),
            name,
            line,
            priority: r.priority,
            key: r.key.as_deref(),
        }
    }
}

fn predicate(p: &PredicateOutcome) -> PredicateOut<'_> {
    let at = &p.location;
    PredicateOut {
        index: p.index,
        text: &p.text,
        text_truncated: p.text_truncated,
        holds: p.holds,
        negated: p.negated,
        line: at.line,
        column: at.column,
        span: [at.span.start, at.span.end],
        source_line: at.source_line(),
        caret: at.caret(),
    }
}

impl Serialize for MatchesJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        MatchesOut {
            version: REPORT_JSON_VERSION,
            matches: self
                .0
                .iter()
                .map(|m| MatchOut {
                    id: m.id.to_string(),
                    priority: m.priority,
                    expression: &m.expression,
                    matched_values: m
                        .matched_values
                        .iter()
                        .map(|(field, value)| MatchedValueOut {
                            field,
                            ty: value.ty().name(),
                            value: value.into(),
                        })
                        .collect(),
                    captures: m
                        .captures
                        .iter()
                        .map(|(key, value)| CaptureOut {
                            key: CaptureKeyOut::of(key),
                            value,
                        })
                        .collect(),
                })
                .collect(),
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_capture_keys() {
        let json = |v: &Value| serde_json::to_string(&ValueOut::from(v)).unwrap();
        assert_eq!(json(&Value::Int(-3)), "-3");
        assert_eq!(json(&Value::String("a\"\n".into())), r#""a\"\n""#);
        assert_eq!(
            json(&Value::IpAddr("10.0.0.1".parse().unwrap())),
            r#""10.0.0.1""#
        );
        let key = |k: &str| serde_json::to_string(&CaptureKeyOut::of(k)).unwrap();
        assert_eq!(key("0"), "0");
        assert_eq!(key("12"), "12");
        assert_eq!(key("+1"), r#""+1""#);
        assert_eq!(key("id"), r#""id""#);
    }
}
