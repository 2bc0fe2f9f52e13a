//! The report of `check`: text for people, or one JSON document (`docs/cli.md` describes its
//! shape; its `explain` member is the core's explain report, docs/explain.md).

use std::collections::HashMap;
use std::fmt::Write;

use atc_router::{ExplainJson, Explanation, Location, RouteNote, Uuid, Value};
use serde::Serialize;

use crate::check::{Checked, ErrorKind};

/// A request explained, and the explanation.
pub struct Explained {
    pub request: String,
    pub fields: Vec<(String, Value)>,
    pub explanation: Explanation,
}

/// What the report covers besides the check itself.
pub struct Context<'a> {
    /// The route file as named in messages.
    pub file: &'a str,
    /// How it was read: `tsv`, `json`, `kong-yaml`, `kong-json`, `kong-admin`.
    pub format: &'static str,
    /// The schema as given to `--schema`.
    pub schema: &'a str,
    /// Route names (Kong's documents).
    pub names: &'a HashMap<Uuid, String>,
    pub explained: Option<Explained>,
}

impl Context<'_> {
    /// `` `name` `` after a route id, when the route has a name.
    fn named(&self, id: &Uuid) -> String {
        self.names.get(id).map_or_else(String::new, |n| {
            format!(" `{}`", atc_router::error::excerpt(n))
        })
    }

    fn name(&self, id: &Uuid) -> Option<String> {
        self.names.get(id).cloned()
    }
}

/// The text report: errors, findings, a summary line, then the explanation.
pub fn text(c: &Checked, cx: &Context) -> String {
    let file = cx.file;
    let mut out = String::new();
    for e in &c.errors {
        match (&e.expr, e.id) {
            (Some(x), Some(id)) => {
                let _ = writeln!(
                    out,
                    "{file}:{}: error: route {id}{}: invalid expression\n{}",
                    e.line,
                    cx.named(&id),
                    indent(&x.to_string(), "  ")
                );
            }
            (None, Some(id)) if e.kind == ErrorKind::Rejected => {
                let _ = writeln!(
                    out,
                    "{file}:{}: error: route {id}{}: {}",
                    e.line,
                    cx.named(&id),
                    e.message
                );
            }
            _ => {
                let _ = writeln!(out, "{file}:{}: error: {}", e.line, e.message);
            }
        }
    }
    for f in &c.findings {
        let line = f
            .routes
            .first()
            .and_then(|id| c.origins.get(id))
            .map_or(String::new(), |o| format!("{}:", o.line));
        let _ = writeln!(
            out,
            "{file}:{line} warning: {}: {}",
            f.kind.name(),
            f.message
        );
        if f.routes.len() > 1 {
            for id in &f.routes {
                if let Some(o) = c.origins.get(id) {
                    let _ = writeln!(
                        out,
                        "  {file}:{}: route {id}{} (priority {})",
                        o.line,
                        cx.named(id),
                        o.priority
                    );
                }
            }
        }
        if f.more > 0 {
            let _ = writeln!(
                out,
                "  … and {}{} more route(s)",
                if f.at_least { "at least " } else { "" },
                f.more
            );
        }
        if let Some(l) = &f.location {
            let _ = writeln!(out, "{}", indent(&l.to_string(), "  "));
        }
    }
    let omitted = match c.findings_omitted {
        0 => String::new(),
        n => format!(" ({n} more not shown)"),
    };
    let _ = writeln!(
        out,
        "{file}: {}, {} valid, {}, {}{omitted}",
        count(c.file.len(), "route", "routes"),
        c.valid(),
        count(c.errors.len(), "error", "errors"),
        count(c.findings.len(), "finding", "findings"),
    );
    if let Some(x) = &cx.explained {
        let _ = write!(out, "\nexplain {}:\n{}", x.request, x.explanation);
    }
    out
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn indent(s: &str, by: &str) -> String {
    s.lines()
        .map(|l| format!("{by}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The version of the JSON document's shape (2: findings about groups, bounded explanations;
/// 3: `explain` is the core's explain report, the C ABI's shape, see docs/cli.md and
/// docs/explain.md).
const VERSION: u32 = 3;

#[derive(Serialize)]
struct Report<'a> {
    version: u32,
    file: &'a str,
    format: &'static str,
    schema: &'a str,
    routes: usize,
    valid: usize,
    errors: Vec<ErrorOut>,
    findings: Vec<FindingOut>,
    findings_omitted: usize,
    explain: Option<ExplainJson<'a>>,
}

#[derive(Serialize)]
struct ErrorOut {
    line: usize,
    kind: &'static str,
    id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expression_error: Option<ExprErrorOut>,
}

#[derive(Serialize)]
struct ExprErrorOut {
    kind: &'static str,
    line: usize,
    column: usize,
    span: [usize; 2],
    rendered: String,
}

#[derive(Serialize)]
struct FindingOut {
    kind: &'static str,
    message: String,
    routes: Vec<RouteRef>,
    more: usize,
    at_least: bool,
    location: Option<LocationOut>,
}

#[derive(Serialize)]
struct RouteRef {
    id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    line: Option<usize>,
    priority: Option<u64>,
}

#[derive(Serialize)]
struct LocationOut {
    line: usize,
    column: usize,
    span: [usize; 2],
}

impl From<&Location> for LocationOut {
    fn from(l: &Location) -> LocationOut {
        LocationOut {
            line: l.line,
            column: l.column,
            span: [l.span.start, l.span.end],
        }
    }
}

/// The JSON report, one document.
pub fn json(c: &Checked, cx: &Context) -> String {
    let line = |id: &Uuid| c.origins.get(id).map(|o| o.line);
    let notes = |id: &Uuid| RouteNote {
        name: cx.name(id),
        line: line(id),
    };
    let report = Report {
        version: VERSION,
        file: cx.file,
        format: cx.format,
        schema: cx.schema,
        routes: c.file.len(),
        valid: c.valid(),
        errors: c
            .errors
            .iter()
            .map(|e| ErrorOut {
                line: e.line,
                kind: e.kind.name(),
                id: e.id.map(|id| id.to_string()),
                name: e.id.and_then(|id| cx.name(&id)),
                message: e.message.clone(),
                first_line: e.first_line,
                expression_error: e.expr.as_ref().map(|x| ExprErrorOut {
                    kind: match x.kind {
                        atc_router::ExprErrorKind::Syntax => "syntax",
                        atc_router::ExprErrorKind::Semantic => "semantic",
                        atc_router::ExprErrorKind::Limit => "limit",
                    },
                    line: x.line,
                    column: x.column,
                    span: [x.span.start, x.span.end],
                    rendered: x.to_string(),
                }),
            })
            .collect(),
        findings: c
            .findings
            .iter()
            .map(|f| FindingOut {
                kind: f.kind.name(),
                message: f.message.clone(),
                routes: f
                    .routes
                    .iter()
                    .map(|id| RouteRef {
                        id: id.to_string(),
                        name: cx.name(id),
                        line: line(id),
                        priority: c.origins.get(id).map(|o| o.priority),
                    })
                    .collect(),
                more: f.more,
                at_least: f.at_least,
                location: f.location.as_ref().map(LocationOut::from),
            })
            .collect(),
        findings_omitted: c.findings_omitted,
        // The core's explain report, the shape of the C ABI's (docs/explain.md), with what
        // the file knows of each route (its name and line) and the request as given.
        explain: cx.explained.as_ref().map(|x| {
            ExplainJson::new(&x.explanation)
                .request(&x.request, &x.fields)
                .notes(&notes)
        }),
    };
    let mut s = serde_json::to_string_pretty(&report).expect("a report serializes");
    s.push('\n');
    s
}
