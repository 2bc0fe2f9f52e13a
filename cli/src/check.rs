//! `check`: every route of a file into a router, the errors by line, then the lint findings.

use std::collections::HashMap;
use std::sync::Arc;

use atc_router::route_list::{Item, UnreadKind};
use atc_router::{
    check_field_name, EntryFault, Error, ExprError, Finding, Linter, NameRule, Router, Schema,
    SyncMode, Uuid,
};

use crate::routes::RouteFile;

/// What kind of error a route has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The route could not be read.
    Unreadable(UnreadKind),
    /// Its id is an earlier route's.
    DuplicateId,
    /// The expression does not parse or does not fit the schema.
    Expression,
    /// The router refused the route for another reason (a limit).
    Rejected,
    /// The expression uses a field name no request can have (an empty segment:
    /// `http.headers.`, `a..b`), which a wildcard of the schema lets through.
    BadField,
}

impl ErrorKind {
    /// The name of the kind in reports.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Unreadable(kind) => kind.name(),
            ErrorKind::DuplicateId => "duplicate-id",
            ErrorKind::Expression => "expression",
            ErrorKind::Rejected => "rejected",
            ErrorKind::BadField => "bad-field",
        }
    }
}

/// A route with an error.
#[derive(Debug, Clone)]
pub struct RouteError {
    pub line: usize,
    pub kind: ErrorKind,
    pub id: Option<Uuid>,
    /// The message without position (for an expression, [`ExprError::message`]).
    pub message: String,
    /// For a duplicate id: the line of the first route with it.
    pub first_line: Option<usize>,
    /// For an expression error: the error, with its place in the expression.
    pub expr: Option<ExprError>,
}

/// Where a route of the router came from.
#[derive(Debug, Clone, Copy)]
pub struct Origin {
    pub line: usize,
    pub priority: u64,
}

/// The result of checking a route file.
pub struct Checked {
    pub file: RouteFile,
    /// Every error, by line.
    pub errors: Vec<RouteError>,
    /// The valid routes.
    pub router: Router,
    /// The line and priority of each valid route.
    pub origins: HashMap<Uuid, Origin>,
    /// The lint findings, by kind, then by the lines of their routes (at most
    /// `LintOptions::DEFAULT_MAX_PER_KIND` of each kind).
    pub findings: Vec<Finding>,
    /// Findings the linter left out past that limit.
    pub findings_omitted: usize,
}

impl Checked {
    /// How many routes went into the router.
    pub fn valid(&self) -> usize {
        self.router.len()
    }
}

/// Syncs every route of `file` that can be (the core's rules: the first route with an id has
/// it), and lints the result.
pub fn check(file: RouteFile, schema: Arc<Schema>) -> Checked {
    let mut router = Router::new(schema);
    let entries = file.entries();
    let report = router
        .sync_entries(&entries, SyncMode::ApplyValid)
        .expect("an apply-valid sync into an empty router is never refused");
    let mut origins = HashMap::with_capacity(entries.len());
    for e in &entries {
        if let Item::Route { id, priority, .. } = e.item {
            if router.get(id).is_some_and(|r| r.priority() == priority) {
                origins.entry(id).or_insert(Origin {
                    line: e.at.number(),
                    priority,
                });
            }
        }
    }
    let mut errors: Vec<RouteError> = report
        .errors
        .into_iter()
        .map(|e| {
            let line = e.at.number();
            let message = e.fault.to_string();
            let (kind, first_line, expr) = match e.fault {
                EntryFault::Duplicate { first } => {
                    (ErrorKind::DuplicateId, Some(first.number()), None)
                }
                EntryFault::Unreadable { kind, .. } => (ErrorKind::Unreadable(kind), None, None),
                EntryFault::Invalid(Error::Expr(x)) => (ErrorKind::Expression, None, Some(x)),
                EntryFault::Invalid(_) => (ErrorKind::Rejected, None, None),
            };
            RouteError {
                line,
                kind,
                id: e.id,
                message: match &expr {
                    Some(x) => x.message.clone(),
                    None => message,
                },
                first_line,
                expr,
            }
        })
        .collect();
    drop(entries);
    drop_bad_fields(&mut router, &mut origins, &mut errors);
    errors.sort_by_key(|e| e.line);
    // By kind, then by where the routes are in the file.
    let lint = Linter::new(&router);
    let mut findings: Vec<Finding> = lint.findings().cloned().collect();
    let findings_omitted = lint.omitted();
    findings.sort_by_cached_key(|f| {
        let lines: Vec<usize> = f
            .routes
            .iter()
            .map(|id| origins.get(id).map_or(usize::MAX, |o: &Origin| o.line))
            .collect();
        (f.kind, lines)
    });
    Checked {
        file,
        errors,
        router,
        origins,
        findings,
        findings_omitted,
    }
}

/// Takes out of the router every route that uses a field name no request can have (the core's
/// [`NameRule::Request`]), as a `bad-field` error. The core takes such a name when a wildcard
/// of the schema covers it (`http.headers.*` covers `http.headers.`), as Kong's grammar does,
/// but no request has that field: the route is a mistake. The routes are looked at only when
/// the router's fields have such a name.
fn drop_bad_fields(
    router: &mut Router,
    origins: &mut HashMap<Uuid, Origin>,
    errors: &mut Vec<RouteError>,
) {
    let refused = |name: &str| check_field_name(name, NameRule::Request).err();
    if router.fields().iter().all(|f| refused(f).is_none()) {
        return;
    }
    let schema = router.schema().clone();
    let mut bad = Vec::new();
    for route in router.routes() {
        let first_bad = route
            .field_ids()
            .into_iter()
            .filter_map(|id| schema.field(id))
            .find_map(|(name, _)| refused(&name));
        if let Some(e) = first_bad {
            bad.push((route.id(), e));
        }
    }
    for (id, e) in bad {
        router.remove(id);
        let line = origins.remove(&id).map_or(0, |o| o.line);
        errors.push(RouteError {
            line,
            kind: ErrorKind::BadField,
            id: Some(id),
            message: format!(
                "the expression has an invalid field name `{}`: {}",
                e.name,
                e.fault.why()
            ),
            first_line: None,
            expr: None,
        });
    }
}
