//! Routes in priority order, and matching a request against them (spec §7).
//!
//! Invariants: routes are ordered by priority (higher first), then by id bytes (higher first);
//! ids are unique. Regexes with the same source are compiled once per router and freed with the
//! last route that uses them. An execute either leaves the first matching route's result in the
//! context or no result at all.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use uuid::Uuid;

use crate::ast::Expr;
use crate::context::Context;
use crate::error::Error;
use crate::limits::Limits;
use crate::parser::{parse_with_limits, Parsed};
use crate::reference;
use crate::regex_cache::RegexCache;
use crate::resolved::{resolve, Node};
use crate::schema::Schema;
use crate::validate::validate;

/// Order key: ascending order of this key is routing order.
type RouteKey = (Reverse<u64>, Reverse<Uuid>);

/// One route of a router.
#[derive(Debug)]
pub struct Route {
    id: Uuid,
    priority: u64,
    source: String,
    expr: Expr,
    fields: Vec<String>,
    pub(crate) node: Node,
}

impl Route {
    pub fn id(&self) -> Uuid {
        self.id
    }
    pub fn priority(&self) -> u64 {
        self.priority
    }
    /// The expression text as it was added.
    pub fn source(&self) -> &str {
        &self.source
    }
    pub fn expr(&self) -> &Expr {
        &self.expr
    }
    /// Fields the expression uses, in order of first use.
    pub fn fields(&self) -> &[String] {
        &self.fields
    }
}

/// A set of routes over one schema.
///
/// ```
/// use std::sync::Arc;
/// use atc_router::{Context, Router, Schema, Type};
/// use uuid::Uuid;
///
/// let mut schema = Schema::new();
/// schema.add_field("http.host", Type::String).unwrap();
/// schema.add_field("http.path", Type::String).unwrap();
/// let schema = Arc::new(schema);
///
/// let mut router = Router::new(schema.clone());
/// let api = Uuid::from_u128(1);
/// router.add(api, 10, r#"http.host == "a.com" && http.path ~ "^/users/(?<id>\d+)$""#).unwrap();
///
/// let mut ctx = Context::new(schema);
/// ctx.add_value("http.host", "a.com").unwrap();
/// ctx.add_value("http.path", "/users/42").unwrap();
/// assert!(router.execute(&mut ctx));
/// let m = ctx.result().unwrap();
/// assert_eq!(m.id(), api);
/// assert_eq!(m.matched_value("http.path").unwrap().to_string(), "/users/42");
/// assert_eq!(m.captures_map()["id"], "42");
/// ```
#[derive(Debug)]
pub struct Router {
    schema: Arc<Schema>,
    limits: Limits,
    routes: BTreeMap<RouteKey, Route>,
    keys: HashMap<Uuid, RouteKey>,
    regexes: RegexCache,
    field_use: HashMap<String, usize>,
}

impl Router {
    pub fn new(schema: Arc<Schema>) -> Router {
        Router::with_limits(schema, Limits::default())
    }

    pub fn with_limits(schema: Arc<Schema>, limits: Limits) -> Router {
        Router {
            schema,
            limits,
            routes: BTreeMap::new(),
            keys: HashMap::new(),
            regexes: RegexCache::default(),
            field_use: HashMap::new(),
        }
    }

    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Parses, validates and inserts a route. Nothing changes on error.
    pub fn add(&mut self, id: Uuid, priority: u64, expression: &str) -> Result<(), Error> {
        if self.keys.contains_key(&id) {
            return Err(Error::DuplicateRoute(id));
        }
        let parsed = parse_with_limits(expression, &self.limits)?;
        let fields = validate(expression, &parsed, &self.schema)?;
        let node = match resolve(
            expression,
            &parsed,
            &self.schema,
            &self.limits,
            &mut self.regexes,
        ) {
            Ok(node) => node,
            Err(e) => {
                // Regexes compiled for this route before the error must not stay cached.
                self.release_regexes(&parsed);
                return Err(e.into());
            }
        };
        for f in &fields {
            *self.field_use.entry(f.clone()).or_insert(0) += 1;
        }
        let key = (Reverse(priority), Reverse(id));
        self.keys.insert(id, key);
        self.routes.insert(
            key,
            Route {
                id,
                priority,
                source: expression.to_owned(),
                expr: parsed.expr,
                fields,
                node,
            },
        );
        Ok(())
    }

    fn release_regexes(&mut self, parsed: &Parsed) {
        for p in parsed.expr.predicates() {
            if let (crate::ast::Op::Regex, crate::value::Value::String(s)) = (p.op, &p.rhs) {
                self.regexes.release(s);
            }
        }
    }

    /// Removes a route; `false` when there is none with that id.
    pub fn remove(&mut self, id: Uuid) -> bool {
        let Some(key) = self.keys.remove(&id) else {
            return false;
        };
        let route = self.routes.remove(&key).expect("keys and routes agree");
        for f in &route.fields {
            if let Some(n) = self.field_use.get_mut(f) {
                *n -= 1;
                if *n == 0 {
                    self.field_use.remove(f);
                }
            }
        }
        let mut sources = Vec::new();
        route.node.regex_sources(&mut sources);
        drop(route);
        for s in &sources {
            self.regexes.release(s);
        }
        true
    }

    pub fn get(&self, id: Uuid) -> Option<&Route> {
        self.keys.get(&id).and_then(|k| self.routes.get(k))
    }

    /// Routes in routing order.
    pub fn routes(&self) -> impl Iterator<Item = &Route> {
        self.routes.values()
    }

    /// Fields used by at least one route, sorted by name.
    pub fn fields(&self) -> Vec<String> {
        let mut f: Vec<String> = self.field_use.keys().cloned().collect();
        f.sort();
        f
    }

    /// Number of distinct compiled regexes held.
    pub fn regex_count(&self) -> usize {
        self.regexes.len()
    }

    /// Checks an expression against a schema without adding it (regexes are compiled to check
    /// them, then dropped). Returns the fields it uses, in order of first use.
    pub fn validate(schema: &Schema, expression: &str) -> Result<Vec<String>, Error> {
        Router::validate_with_limits(schema, expression, &Limits::default())
    }

    pub fn validate_with_limits(
        schema: &Schema,
        expression: &str,
        limits: &Limits,
    ) -> Result<Vec<String>, Error> {
        let parsed = parse_with_limits(expression, limits)?;
        let fields = validate(expression, &parsed, schema)?;
        resolve(
            expression,
            &parsed,
            schema,
            limits,
            &mut RegexCache::default(),
        )?;
        Ok(fields)
    }

    /// Finds the first route in routing order whose expression holds, and leaves its result in
    /// the context; returns whether one matched. A context made from another schema never
    /// matches.
    pub fn execute(&self, ctx: &mut Context) -> bool {
        self.execute_reference(ctx)
    }

    /// The reference evaluator: every route in order, plain tree walk. The oracle for
    /// [`Router::execute`].
    pub fn execute_reference(&self, ctx: &mut Context) -> bool {
        ctx.clear_result();
        if !Arc::ptr_eq(&self.schema, ctx.schema()) {
            return false;
        }
        let mut w = std::mem::take(&mut ctx.witnesses);
        let mut found = None;
        for route in self.routes.values() {
            if reference::eval(&route.node, ctx, &mut w) {
                found = Some((route.id, route.priority));
                break;
            }
            w.clear();
        }
        ctx.witnesses = w;
        ctx.outcome = found;
        found.is_some()
    }
}
