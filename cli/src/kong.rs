//! Kong's own formats, turned into route entries for the check: its declarative configuration
//! (`kong.yml`, or the same document as JSON: `routes` at the top level and under each of
//! `services`) and the Admin API's listing of routes (`{"data": [...]}`).
//!
//! Each route is taken as Kong's expressions router takes it:
//!
//! - **id**: `id` when given; otherwise the id Kong's declarative loader gives a route with a
//!   `name`: UUID v5 of the name in the namespace v5("routes") of Kong's entity namespace
//!   `fd02801f-0957-4a15-a55a-c8d9606f30b5` (kong/db/schema/others/declarative_config.lua), so
//!   the ids match what Kong reports. A route with neither is an error: Kong gives it a random
//!   id on every load.
//! - **priority**: `priority`, 0 when absent or null (Kong's default), at most 2^46 - 1 (Kong's
//!   schema).
//! - **expression**: `expression` as Kong's router builds it (kong/router/expressions.lua):
//!   `net.port` followed by an operator is renamed `net.dst.port`, and unless the route's only
//!   protocol is https, tls or tls_passthrough, a test of its `protocols` is appended (default
//!   http and https; grpc counts as http, grpcs as https, tls_passthrough as tcp) without
//!   parentheses around the expression, as Kong does: ` && net.protocol in ["http", "https"]`,
//!   the set test equivalent to Kong's disjunction (see [`kong_expression`]). It is appended
//!   only when the schema has `net.protocol` (Kong's both do).
//! - Kong's router for HTTP sees only routes whose protocols are http, https, grpc or grpcs;
//!   its stream router only tcp, tls, udp and tls_passthrough ones: with `--schema http` the
//!   stream routes are left out, with `--schema stream` the HTTP ones, each with a note.
//! - A route without `expression` that has traditional fields (`paths`, `hosts`, ...) is left
//!   out with a note: Kong converts those itself. Without either it is an error, as it is for
//!   Kong.
//!
//! Both formats are read by one YAML parser (JSON is YAML), which gives every route its line.
//! Nothing is read without a bound: the parser keeps no recursion, aliases share their node
//! instead of copying it, and visiting more routes than the document has nodes (aliases
//! repeating routes) stops the read.

use std::collections::HashMap;

use atc_router::error::excerpt;
use atc_router::route_list::{sniff, EntryList, Format, Position, UnreadKind};
use atc_router::Uuid;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Which of Kong's routers the check stands for: the routes the other one takes are left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subsystem {
    Http,
    Stream,
}

/// Which of Kong's documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Declarative configuration (`_format_version`, `routes`, `services[].routes`).
    Declarative,
    /// The Admin API's listing of routes (`{"data": [...], "next": ...}`).
    Admin,
}

/// How to take the routes.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The router the check stands for; `None` (a schema file): every route.
    pub subsystem: Option<Subsystem>,
    /// Whether to append Kong's `net.protocol` term (the schema has the field).
    pub protocol_term: bool,
}

/// The routes read from a Kong document.
#[derive(Debug)]
pub struct Routes {
    /// Every route, as entries by line (repeated ids are left to the sync's rule).
    pub list: EntryList,
    /// The name of each route that has one, for reports.
    pub names: HashMap<Uuid, String>,
    /// What was left out and why, for standard error.
    pub notes: Vec<String>,
}

/// Kong's namespace of entity namespaces (declarative_config.lua, `uuid_generators._entities`).
const KONG_ENTITIES: Uuid = Uuid::from_u128(0xfd02801f_0957_4a15_a55a_c8d9606f30b5);

/// The id Kong's declarative loader gives a route that has a name and no id.
pub fn route_id_from_name(name: &str) -> Uuid {
    let routes = Uuid::new_v5(&KONG_ENTITIES, b"routes");
    Uuid::new_v5(&routes, name.as_bytes())
}

/// The largest priority Kong's schema takes for an expression route (`between = { 0, 2^46 - 1 }`).
pub const MAX_PRIORITY: u64 = (1 << 46) - 1;

/// More protocols than any valid route has (Kong's mutually exclusive sets have at most 2).
const MAX_PROTOCOLS: usize = 8;

/// Traditional route fields: a route with any of them non-empty is converted by Kong itself.
const TRADITIONAL: [&str; 7] = [
    "methods",
    "hosts",
    "paths",
    "headers",
    "snis",
    "sources",
    "destinations",
];

/// Whether a text that is not JSON is a Kong YAML document: its first line that is neither
/// blank nor a comment starts it (`---`) or is one of its top-level keys.
pub fn looks_like_yaml(text: &[u8]) -> bool {
    let Some(first) = text
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .find(|l| {
            let t = l.trim_ascii_start();
            !t.is_empty() && !t.starts_with(b"#")
        })
    else {
        return false;
    };
    first.starts_with(b"---")
        || [&b"_format_version:"[..], b"services:", b"routes:"]
            .iter()
            .any(|k| first.starts_with(k))
}

/// Which Kong document a text is when it is JSON by the core's rule (`route_list::sniff`), by
/// its top-level keys: `_format_version` makes it declarative configuration, `data` (without
/// `routes`) an Admin API listing. `None`: not a JSON object of either kind (the route-list
/// reader takes it).
pub fn sniff_json(text: &[u8]) -> Option<Kind> {
    if sniff(text) != Format::Json {
        return None;
    }
    let keys: HashMap<String, serde::de::IgnoredAny> = serde_json::from_slice(text).ok()?;
    if keys.contains_key("_format_version") {
        Some(Kind::Declarative)
    } else if keys.contains_key("data") && !keys.contains_key("routes") {
        Some(Kind::Admin)
    } else {
        None
    }
}

/// Reads the routes of a Kong document (YAML or JSON). An `Err` is a document that cannot be
/// read as a whole.
pub fn read(text: &[u8], kind: Kind, options: Options) -> Result<Routes, String> {
    let text = std::str::from_utf8(text).map_err(|e| format!("not UTF-8 text: {e}"))?;
    let doc = Doc::parse(text)?;
    let root = doc.root.ok_or("the document is empty")?;
    let Node::Map(_) = doc.node(root) else {
        return Err("expected a mapping (Kong's configuration) at the top level".into());
    };
    let mut reader = Reader {
        doc: &doc,
        options,
        visits_left: doc.nodes.len(),
        reads: Vec::new(),
        notes: Notes::default(),
    };
    match kind {
        Kind::Declarative => {
            if let Some(routes) = doc.get(root, "routes") {
                reader.routes(routes, "`routes`")?;
            }
            if let Some(services) = doc.get(root, "services") {
                let Some(services) = doc.seq(services) else {
                    return Err(format!(
                        "line {}: `services` is not a list",
                        doc.line(services)
                    ));
                };
                for &service in services {
                    reader.visit()?;
                    if let Node::Map(_) = doc.node(service) {
                        if let Some(routes) = doc.get(service, "routes") {
                            reader.routes(routes, "a service's `routes`")?;
                        }
                    }
                }
            }
        }
        Kind::Admin => {
            let data = doc.get(root, "data").ok_or("no `data` list of routes")?;
            reader.routes(data, "`data`")?;
            if let Some(next) = doc.get(root, "next") {
                if let Some(Scalar::Str(url)) = doc.scalar(next) {
                    reader.notes.more_pages = Some(url);
                }
            }
        }
    }
    let notes = reader.notes.lines(options);
    let mut names = HashMap::new();
    let mut list = EntryList::new();
    for read in reader.reads {
        match read {
            Ok((r, name)) => {
                if let Some(n) = name {
                    // The first route with an id is the one kept: its name is the id's.
                    names.entry(r.id).or_insert(n);
                }
                list.push_route(Position::Line(r.line), r.id, r.priority, &r.expression);
            }
            Err(u) => list.push_unreadable(Position::Line(u.line), u.id, u.kind, &u.message),
        }
    }
    Ok(Routes { list, names, notes })
}

/// A route read from a document.
struct RouteRead {
    line: usize,
    id: Uuid,
    priority: u64,
    expression: String,
}

/// A route that could not be read, and why.
struct Unread {
    line: usize,
    kind: UnreadKind,
    id: Option<Uuid>,
    message: String,
}

/// What was left out, counted for the notes.
#[derive(Default)]
struct Notes {
    other_subsystem: Vec<usize>,
    traditional: Vec<usize>,
    more_pages: Option<String>,
}

impl Notes {
    fn lines(mut self, options: Options) -> Vec<String> {
        self.other_subsystem.sort_unstable();
        self.traditional.sort_unstable();
        let mut out = Vec::new();
        let at = |lines: &[usize]| {
            let shown: Vec<String> = lines.iter().take(5).map(|l| l.to_string()).collect();
            let more = if lines.len() > 5 { ", …" } else { "" };
            format!("line(s) {}{more}", shown.join(", "))
        };
        if !self.other_subsystem.is_empty() {
            let (these, other, flag) = match options.subsystem {
                Some(Subsystem::Http) => ("stream", "stream", "--schema stream"),
                _ => ("HTTP", "HTTP", "--schema http"),
            };
            out.push(format!(
                "{} {these} route(s) left out ({}): Kong's {other} router takes them; check them \
                 with {flag}",
                self.other_subsystem.len(),
                at(&self.other_subsystem)
            ));
        }
        if !self.traditional.is_empty() {
            out.push(format!(
                "{} route(s) without `expression` left out ({}): traditional routes (paths, \
                 hosts, methods, ...), which Kong converts into expressions itself",
                self.traditional.len(),
                at(&self.traditional)
            ));
        }
        if let Some(next) = self.more_pages {
            out.push(format!(
                "the listing has more pages (next: {}): only this page was checked; ask the \
                 Admin API for every page (GET /routes?size=1000, then each `next`)",
                excerpt(&next)
            ));
        }
        out
    }
}

struct Reader<'a> {
    doc: &'a Doc,
    options: Options,
    /// Routes and services visited may not outnumber the document's nodes: only aliases
    /// repeating routes make them, and each repetition would cost a route's work again.
    visits_left: usize,
    reads: Vec<Result<(RouteRead, Option<String>), Unread>>,
    notes: Notes,
}

impl Reader<'_> {
    fn visit(&mut self) -> Result<(), String> {
        self.spend(1)
    }

    /// Charges `n` to the work the document's size allows: without aliases, a route or
    /// service costs at most the nodes it is made of.
    fn spend(&mut self, n: usize) -> Result<(), String> {
        self.visits_left = self.visits_left.checked_sub(n).ok_or(
            "aliases repeat more routes and services than the document holds nodes; \
             write each route out",
        )?;
        Ok(())
    }

    fn routes(&mut self, list: usize, what: &str) -> Result<(), String> {
        let doc = self.doc;
        if let Some(Scalar::Null) = doc.scalar(list) {
            return Ok(());
        }
        let Some(routes) = doc.seq(list) else {
            return Err(format!("line {}: {what} is not a list", doc.line(list)));
        };
        for &route in routes {
            self.visit()?;
            if let Node::Map(pairs) = doc.node(route) {
                self.spend(pairs.len())?;
            }
            if let Some(read) = self.route(route) {
                self.reads.push(read);
            }
        }
        Ok(())
    }

    /// One route: an entry, a problem, or `None` when it is left out (noted).
    fn route(&mut self, route: usize) -> Option<Result<(RouteRead, Option<String>), Unread>> {
        let doc = self.doc;
        let line = doc.line(route);
        let problem = |kind, id, message: String| {
            Some(Err(Unread {
                line,
                kind,
                id,
                message,
            }))
        };
        let Node::Map(_) = doc.node(route) else {
            return problem(
                UnreadKind::Malformed,
                None,
                "malformed route: expected a mapping with `expression` and `name` or `id`".into(),
            );
        };
        let field = |key: &str| doc.get(route, key).map(|n| doc.member(n));

        let name = match field("name") {
            None | Some(Member::Null) => None,
            Some(Member::Str(s)) => Some(s),
            Some(other) => {
                return problem(
                    UnreadKind::Malformed,
                    None,
                    format!(
                        "malformed route: `name` is {}, expected a string",
                        other.describe()
                    ),
                )
            }
        };
        let who = name
            .as_ref()
            .map_or_else(String::new, |n| format!("route `{}`: ", excerpt(n)));

        let id = match field("id") {
            Some(Member::Str(s)) => match Uuid::try_parse(&s) {
                Ok(id) => id,
                Err(_) => {
                    return problem(
                        UnreadKind::BadId,
                        None,
                        format!("{who}bad id `{}`: not a UUID", excerpt(&s)),
                    )
                }
            },
            None | Some(Member::Null) => match &name {
                Some(n) => route_id_from_name(n),
                None => {
                    return problem(
                        UnreadKind::Malformed,
                        None,
                        "malformed route: neither `id` nor `name` (Kong gives such a route a \
                         random id on every load): give it a `name`, from which its id is \
                         derived as Kong does, or an `id`"
                            .into(),
                    )
                }
            },
            Some(other) => {
                return problem(
                    UnreadKind::BadId,
                    None,
                    format!("{who}bad id: {}, expected a UUID string", other.describe()),
                )
            }
        };

        let protocols = match field("protocols") {
            None | Some(Member::Null) => vec!["http".to_owned(), "https".to_owned()],
            Some(Member::List(list)) => {
                let items = doc.seq(list).unwrap_or_default();
                if items.len() > MAX_PROTOCOLS {
                    return problem(
                        UnreadKind::Malformed,
                        Some(id),
                        format!(
                            "{who}malformed route: {} protocols (Kong's routes have at most 2)",
                            items.len()
                        ),
                    );
                }
                let mut protocols = Vec::new();
                for &item in items {
                    match doc.member(item) {
                        Member::Str(p) => protocols.push(p),
                        other => {
                            return problem(
                                UnreadKind::Malformed,
                                Some(id),
                                format!(
                                    "{who}malformed route: a protocol is {}, expected a string",
                                    other.describe()
                                ),
                            )
                        }
                    }
                }
                protocols
            }
            Some(other) => {
                return problem(
                    UnreadKind::Malformed,
                    Some(id),
                    format!(
                        "{who}malformed route: `protocols` is {}, expected a list",
                        other.describe()
                    ),
                )
            }
        };
        if let (Some(want), Some(first)) = (self.options.subsystem, protocols.first()) {
            let stream = matches!(first.as_str(), "tcp" | "tls" | "udp" | "tls_passthrough");
            if stream != (want == Subsystem::Stream) {
                self.notes.other_subsystem.push(line);
                return None;
            }
        }

        let traditional: Vec<&str> = TRADITIONAL
            .iter()
            .copied()
            .filter(|key| field(key).is_some_and(|m| !m.is_empty(doc)))
            .collect();
        let expression = match field("expression") {
            Some(Member::Str(s)) => s,
            None | Some(Member::Null) if !traditional.is_empty() => {
                self.notes.traditional.push(line);
                return None;
            }
            None | Some(Member::Null) => {
                return problem(
                    UnreadKind::Malformed,
                    Some(id),
                    format!("{who}malformed route: no `expression`"),
                )
            }
            Some(other) => {
                return problem(
                    UnreadKind::Malformed,
                    Some(id),
                    format!(
                        "{who}malformed route: `expression` is {}, expected a string",
                        other.describe()
                    ),
                )
            }
        };
        if !traditional.is_empty() {
            return problem(
                UnreadKind::Malformed,
                Some(id),
                format!(
                    "{who}malformed route: `expression` with `{}` (Kong refuses a route with both)",
                    traditional.join("`, `")
                ),
            );
        }

        let priority = match field("priority") {
            None | Some(Member::Null) => 0,
            Some(Member::Int(text)) => match text.parse::<u64>() {
                Ok(p) if p <= MAX_PRIORITY => p,
                _ => {
                    return problem(
                        UnreadKind::BadPriority,
                        Some(id),
                        format!(
                            "{who}bad priority `{}`: Kong takes an integer from 0 to 2^46 - 1 \
                             ({MAX_PRIORITY})",
                            excerpt(&text)
                        ),
                    )
                }
            },
            Some(other) => {
                return problem(
                    UnreadKind::BadPriority,
                    Some(id),
                    format!(
                        "{who}bad priority: {}, expected an integer from 0 to 2^46 - 1",
                        other.describe()
                    ),
                )
            }
        };

        let expression = kong_expression(&expression, &protocols, self.options.protocol_term);
        Some(Ok((
            RouteRead {
                line,
                id,
                priority,
                expression,
            },
            name,
        )))
    }
}

/// The expression Kong's expressions router gives the atc router for a route
/// (kong/router/expressions.lua `get_expression`, kong/router/transform.lua), its protocol
/// test written as the equivalent set test: Kong writes `(net.protocol == r#"http"# ||
/// net.protocol == r#"https"#)`, which matches the same requests as `net.protocol in ["http",
/// "https"]`; the linter reasons about a set test (one route's set within another's) where it
/// takes a disjunction as opaque, and would miss every finding between such routes.
pub fn kong_expression(expression: &str, protocols: &[String], protocol_term: bool) -> String {
    let exp = rename_net_port(expression);
    if !protocol_term
        || protocols.is_empty()
        || (protocols.len() == 1
            && matches!(protocols[0].as_str(), "https" | "tls" | "tls_passthrough"))
    {
        return exp;
    }
    let mut names: Vec<&str> = Vec::new();
    for p in protocols {
        let p = match p.as_str() {
            "tls_passthrough" => "tcp",
            "grpc" => "http",
            "grpcs" => "https",
            other => other,
        };
        if !names.contains(&p) {
            names.push(p);
        }
    }
    // Appended without parentheses around the route's own expression, as Kong does.
    match names[..] {
        [one] => format!("{exp} && net.protocol == {}", kong_string(one)),
        _ => {
            let set: Vec<String> = names.iter().map(|p| kong_string(p)).collect();
            format!("{exp} && net.protocol in [{}]", set.join(", "))
        }
    }
}

/// A string literal of the route language.
fn kong_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// `net.port` followed by optional blanks and `=`, `>`, `<` or `!` becomes `net.dst.port`, as
/// Kong's `amending_expression` does (anywhere in the text, as its regex does).
fn rename_net_port(expression: &str) -> String {
    const OLD: &str = "net.port";
    if !expression.contains(OLD) {
        return expression.to_owned();
    }
    let mut out = String::with_capacity(expression.len() + 8);
    let mut rest = expression;
    while let Some(at) = rest.find(OLD) {
        let after = &rest[at + OLD.len()..];
        let op = after.trim_start_matches(|c: char| c.is_whitespace());
        out.push_str(&rest[..at]);
        if op.starts_with(['=', '>', '<', '!']) {
            out.push_str("net.dst.port");
        } else {
            out.push_str(OLD);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A YAML document as nodes with lines; aliases point at their anchor's node.
struct Doc {
    nodes: Vec<(Node, usize)>,
    root: Option<usize>,
}

enum Node {
    /// Text and whether it was plain (unquoted, untagged: its type comes from its text).
    Scalar(String, bool),
    Seq(Vec<usize>),
    /// Keys and values, in order.
    Map(Vec<(usize, usize)>),
}

/// A scalar's value, typed as YAML 1.2's core schema types plain scalars.
enum Scalar {
    Null,
    Bool,
    Int(String),
    Float,
    Str(String),
}

/// A route's member, typed.
enum Member {
    Null,
    Bool,
    Int(String),
    Float,
    Str(String),
    /// A sequence node.
    List(usize),
    /// A mapping node.
    Map(usize),
}

impl Member {
    fn describe(&self) -> String {
        match self {
            Member::Null => "null".into(),
            Member::Bool => "a boolean".into(),
            Member::Int(t) => format!("the number {}", excerpt(t)),
            Member::Float => "a fractional number".into(),
            Member::Str(s) => format!("the string `{}`", excerpt(s)),
            Member::List(_) => "a list".into(),
            Member::Map(_) => "a mapping".into(),
        }
    }

    /// Whether a traditional field counts as not set (Kong's `is_empty_field`).
    fn is_empty(&self, doc: &Doc) -> bool {
        match self {
            Member::Null => true,
            Member::Str(s) => s.is_empty(),
            Member::List(list) => doc.seq(*list).is_none_or(<[usize]>::is_empty),
            Member::Map(map) => matches!(doc.node(*map), Node::Map(pairs) if pairs.is_empty()),
            Member::Bool | Member::Int(_) | Member::Float => false,
        }
    }
}

/// The type of a plain scalar (YAML 1.2 core schema; JSON's literals included).
fn resolve(text: &str) -> Scalar {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        "true" | "True" | "TRUE" | "false" | "False" | "FALSE" => return Scalar::Bool,
        ".inf" | ".Inf" | ".INF" | "-.inf" | "-.Inf" | "-.INF" | "+.inf" | ".nan" | ".NaN"
        | ".NAN" => return Scalar::Float,
        _ => {}
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Scalar::Int(text.to_owned());
    }
    if (text.starts_with("0x") || text.starts_with("0o")) && text.len() > 2 {
        return Scalar::Int(text.to_owned());
    }
    let float = digits.bytes().any(|b| b.is_ascii_digit())
        && digits
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
        && digits.parse::<f64>().is_ok();
    if float {
        return Scalar::Float;
    }
    Scalar::Str(text.to_owned())
}

impl Doc {
    /// Parses the first document of `text` (a second one is an error), driving the parser's
    /// events without recursion.
    fn parse(text: &str) -> Result<Doc, String> {
        let mut parser = Parser::new_from_str(text);
        let mut doc = Doc {
            nodes: Vec::new(),
            root: None,
        };
        let mut anchors: HashMap<usize, usize> = HashMap::new();
        // Open collections: the node and, for a mapping, its key waiting for a value.
        let mut open: Vec<(usize, Option<usize>)> = Vec::new();
        let mut documents = 0;
        let error = |e: yaml_rust2::ScanError| {
            let m: &Marker = e.marker();
            format!(
                "not YAML or JSON: line {}, column {}: {}",
                m.line(),
                m.col() + 1,
                e.info()
            )
        };
        loop {
            let (event, mark) = parser.next_token().map_err(error)?;
            let line = mark.line().max(1);
            let (done, anchor) = match event {
                Event::StreamEnd => break,
                Event::DocumentStart => {
                    documents += 1;
                    if documents > 1 {
                        return Err(format!(
                            "line {line}: a second YAML document; Kong reads one"
                        ));
                    }
                    continue;
                }
                Event::StreamStart | Event::DocumentEnd | Event::Nothing => continue,
                Event::Scalar(text, style, anchor, tag) => {
                    let plain = style == TScalarStyle::Plain && tag.is_none();
                    doc.nodes.push((Node::Scalar(text, plain), line));
                    (doc.nodes.len() - 1, anchor)
                }
                Event::Alias(anchor) => {
                    let &node = anchors
                        .get(&anchor)
                        .ok_or_else(|| format!("line {line}: an alias of an unknown anchor"))?;
                    (node, 0)
                }
                Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                    let node = if matches!(event, Event::SequenceStart(..)) {
                        Node::Seq(Vec::new())
                    } else {
                        Node::Map(Vec::new())
                    };
                    doc.nodes.push((node, line));
                    let index = doc.nodes.len() - 1;
                    if anchor > 0 {
                        anchors.insert(anchor, index);
                    }
                    open.push((index, None));
                    continue;
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    let (index, _) = open.pop().expect("the parser balances collections");
                    (index, 0)
                }
            };
            if anchor > 0 {
                anchors.insert(anchor, done);
            }
            // The finished node goes into the collection around it.
            match open.last_mut() {
                None => doc.root = Some(done),
                Some((parent, key)) => match (&mut doc.nodes[*parent].0, key.take()) {
                    (Node::Seq(items), _) => items.push(done),
                    (Node::Map(_), None) => *key = Some(done),
                    (Node::Map(pairs), Some(k)) => pairs.push((k, done)),
                    (Node::Scalar(..), _) => unreachable!("only collections are open"),
                },
            }
        }
        Ok(doc)
    }

    fn node(&self, i: usize) -> &Node {
        &self.nodes[i].0
    }

    fn line(&self, i: usize) -> usize {
        self.nodes[i].1
    }

    /// The value of `key` in the mapping `map` (the last one, if repeated).
    fn get(&self, map: usize, key: &str) -> Option<usize> {
        let Node::Map(pairs) = self.node(map) else {
            return None;
        };
        pairs
            .iter()
            .rev()
            .find(|(k, _)| matches!(self.node(*k), Node::Scalar(t, _) if t == key))
            .map(|&(_, v)| v)
    }

    fn seq(&self, i: usize) -> Option<&[usize]> {
        match self.node(i) {
            Node::Seq(items) => Some(items),
            _ => None,
        }
    }

    fn scalar(&self, i: usize) -> Option<Scalar> {
        match self.node(i) {
            Node::Scalar(text, true) => Some(resolve(text)),
            Node::Scalar(text, false) => Some(Scalar::Str(text.clone())),
            _ => None,
        }
    }

    fn member(&self, i: usize) -> Member {
        match self.node(i) {
            Node::Seq(_) => Member::List(i),
            Node::Map(_) => Member::Map(i),
            Node::Scalar(..) => match self.scalar(i).expect("a scalar") {
                Scalar::Null => Member::Null,
                Scalar::Bool => Member::Bool,
                Scalar::Int(t) => Member::Int(t),
                Scalar::Float => Member::Float,
                Scalar::Str(s) => Member::Str(s),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HTTP: Options = Options {
        subsystem: Some(Subsystem::Http),
        protocol_term: true,
    };

    fn read_ok(text: &str, kind: Kind) -> Routes {
        read(text.as_bytes(), kind, HTTP).unwrap()
    }

    #[test]
    fn v5_is_the_uuid_of_resty_jit_uuid() {
        // lua-resty-jit-uuid's own test vectors for generate_v5 (t/05-v5.t), the function
        // Kong's factory_v5 uses.
        let ns = Uuid::parse_str("e6ebd542-06ae-11e6-8e82-bba81706b27d").unwrap();
        assert_eq!(
            Uuid::new_v5(&ns, b"hello").to_string(),
            "4850816f-1658-5890-8bfd-1ed14251f1f0"
        );
        assert_eq!(
            Uuid::new_v5(&ns, b"foobar").to_string(),
            "c9be99fc-326b-5066-bdba-dcd31a6d01ab"
        );
        // A route's id: v5 of its name in v5("routes") of Kong's entity namespace.
        let routes = Uuid::new_v5(&KONG_ENTITIES, b"routes");
        assert_eq!(route_id_from_name("users"), Uuid::new_v5(&routes, b"users"));
        assert_eq!(route_id_from_name("users").get_version_num(), 5);
    }

    #[test]
    fn kong_builds_expressions_like_this() {
        let http = ["http".to_owned(), "https".to_owned()];
        assert_eq!(
            kong_expression(r#"http.path ^= "/a""#, &http, true),
            r#"http.path ^= "/a" && net.protocol in ["http", "https"]"#
        );
        // No parentheses around the route's own expression, as in Kong.
        assert_eq!(
            kong_expression("a == 1 || b == 2", &["grpc".to_owned()], true),
            r#"a == 1 || b == 2 && net.protocol == "http""#
        );
        for only in ["https", "tls", "tls_passthrough"] {
            assert_eq!(kong_expression("x", &[only.to_owned()], true), "x");
        }
        let several = ["grpcs", "https", "tls_passthrough"].map(str::to_owned);
        assert_eq!(
            kong_expression("x", &several, true),
            r#"x && net.protocol in ["https", "tcp"]"#
        );
        assert_eq!(kong_expression("x", &http, false), "x");
        assert_eq!(
            kong_expression(
                "net.port == 80 && net.port!=1 && net.portal == 2 && net.port",
                &[],
                true
            ),
            "net.dst.port == 80 && net.dst.port!=1 && net.portal == 2 && net.port"
        );
        assert_eq!(kong_string(r#"a"\b"#), r#""a\"\\b""#);
    }

    /// The readable routes of a list: line, id, priority, expression.
    fn good(list: &EntryList) -> Vec<(usize, Uuid, u64, String)> {
        list.iter()
            .filter_map(|e| match e.item {
                atc_router::route_list::Item::Route {
                    id,
                    priority,
                    expression,
                } => Some((e.at.number(), id, priority, expression.to_owned())),
                _ => None,
            })
            .collect()
    }

    /// The entries that could not be read: line, kind, why.
    fn unread(list: &EntryList) -> Vec<(usize, UnreadKind, String)> {
        list.iter()
            .filter_map(|e| match e.item {
                atc_router::route_list::Item::Unreadable { kind, why, .. } => {
                    Some((e.at.number(), kind, why.to_owned()))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn declarative_yaml_routes_at_the_top_and_under_services() {
        let text = r#"_format_version: "3.0"
services:
  - name: users-api
    url: http://users:8080
    routes:
      - name: users
        expression: http.path ^= "/users"
        priority: 200
      - id: 6a1d8c2e-41f0-4b7e-9c3a-0e5b2d7f9a01
        expression: 'http.host == "a.example"'
routes:
  - name: health
    expression: http.path == "/health"
"#;
        let r = read_ok(text, Kind::Declarative);
        assert!(unread(&r.list).is_empty(), "{:?}", unread(&r.list));
        let got: Vec<(usize, Uuid, u64)> = good(&r.list)
            .into_iter()
            .map(|(line, id, p, _)| (line, id, p))
            .collect();
        // Top-level routes first (Kong reads them first too; order does not matter).
        assert_eq!(
            got,
            [
                (12, route_id_from_name("health"), 0),
                (6, route_id_from_name("users"), 200),
                (
                    9,
                    Uuid::parse_str("6a1d8c2e-41f0-4b7e-9c3a-0e5b2d7f9a01").unwrap(),
                    0
                ),
            ]
        );
        assert_eq!(r.list.len(), 3);
        assert_eq!(r.names[&route_id_from_name("users")], "users");
        assert!(good(&r.list)[0]
            .3
            .ends_with(r#"net.protocol in ["http", "https"]"#));
    }

    #[test]
    fn admin_listing_in_json_on_one_line() {
        let text = r#"{"data":[{"id":"6a1d8c2e-41f0-4b7e-9c3a-0e5b2d7f9a01","name":null,"expression":"http.path == \"/a\"","priority":5,"protocols":["https"],"paths":null},{"id":"6a1d8c2e-41f0-4b7e-9c3a-0e5b2d7f9a01","expression":"true","priority":1}],"next":"/routes?offset=abc"}"#;
        let r = read_ok(text, Kind::Admin);
        // Both routes are read, on line 1: the repeated id is the sync's to judge.
        let routes = good(&r.list);
        assert_eq!(routes.len(), 2);
        assert_eq!(routes[0].3, r#"http.path == "/a""#);
        assert_eq!((routes[0].0, routes[0].2), (1, 5));
        assert_eq!(routes[1].1, routes[0].1);
        assert!(r.notes[0].contains("more pages"), "{:?}", r.notes);
    }

    #[test]
    fn problems_left_out_routes_and_notes() {
        let text = r#"_format_version: "3.0"
routes:
  - expression: http.path == "/"
  - name: bad-priority
    expression: http.path == "/"
    priority: "10"
  - name: too-high
    expression: http.path == "/"
    priority: 70368744177664
  - name: classic
    paths: [/old]
  - name: both
    paths: [/old]
    expression: http.path == "/"
  - name: tcp
    protocols: [tcp]
    expression: net.dst.port == 80
  - name: empty
  - name: bad-id
    id: nope
    expression: http.path == "/"
  - 42
  - name: 7
    expression: http.path == "/"
"#;
        let r = read_ok(text, Kind::Declarative);
        let problems = unread(&r.list);
        let got: Vec<(usize, UnreadKind)> = problems.iter().map(|p| (p.0, p.1)).collect();
        assert_eq!(
            got,
            [
                (3, UnreadKind::Malformed),
                (4, UnreadKind::BadPriority),
                (7, UnreadKind::BadPriority),
                (12, UnreadKind::Malformed),
                (18, UnreadKind::Malformed),
                (19, UnreadKind::BadId),
                (22, UnreadKind::Malformed),
                (23, UnreadKind::Malformed),
            ],
            "{problems:#?}"
        );
        assert!(problems[0].2.contains("neither `id` nor `name`"));
        assert!(problems[1].2.contains("the string `10`"));
        assert!(problems[3].2.contains("`expression` with `paths`"));
        assert!(good(&r.list).is_empty());
        assert_eq!(r.list.len(), 8);
        assert_eq!(r.notes.len(), 2, "{:?}", r.notes);
        assert!(r.notes[0].starts_with("1 stream route(s) left out (line(s) 15)"));
        assert!(r.notes[1].starts_with("1 route(s) without `expression` left out (line(s) 10)"));

        // With the stream schema, the tcp route is in and the HTTP ones are out.
        let stream = Options {
            subsystem: Some(Subsystem::Stream),
            protocol_term: true,
        };
        let r = read(text.as_bytes(), Kind::Declarative, stream).unwrap();
        let routes = good(&r.list);
        assert_eq!(routes.len(), 1);
        assert_eq!(
            routes[0].3,
            r#"net.dst.port == 80 && net.protocol == "tcp""#
        );
    }

    #[test]
    fn whole_document_errors() {
        let bad = |text: &str, kind| read(text.as_bytes(), kind, HTTP).unwrap_err();
        assert!(bad("- a\n- b\n", Kind::Declarative).contains("mapping"));
        assert!(bad("routes: 5\n", Kind::Declarative).contains("`routes` is not a list"));
        assert!(bad("services: {}\n", Kind::Declarative).contains("`services` is not a list"));
        assert!(bad("{\"next\": null}", Kind::Admin).contains("no `data`"));
        assert!(bad("a: [\n", Kind::Declarative).starts_with("not YAML or JSON: line"));
        assert!(bad("a: 1\n---\nb: 2\n", Kind::Declarative).contains("second YAML document"));
        assert!(bad("", Kind::Declarative).contains("empty"));
    }

    #[test]
    fn no_recursion_and_no_blow_up() {
        // Deep nesting: the parser's own limit, an error, not a stack overflow.
        let deep = format!("routes: {}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(read(deep.as_bytes(), Kind::Declarative, HTTP).is_err());
        // Deep block nesting (indentation) is read without recursion.
        let mut block = String::from("x:\n");
        for i in 1..5_000 {
            block.push_str(&" ".repeat(i));
            block.push_str("- \n");
        }
        let _ = read(block.as_bytes(), Kind::Declarative, HTTP);
        // Aliases repeating routes: refused once visits pass the document's size.
        let mut text = String::from("r: &r\n");
        for i in 0..50 {
            text.push_str(&format!("  - {{name: n{i}, expression: 'true'}}\n"));
        }
        text.push_str("services:\n");
        for _ in 0..200 {
            text.push_str("  - routes: *r\n");
        }
        let err = read(text.as_bytes(), Kind::Declarative, HTTP).unwrap_err();
        assert!(err.contains("aliases repeat"), "{err}");
    }

    #[test]
    fn sniffing() {
        assert_eq!(
            sniff_json(br#"{"_format_version": "3.0"}"#),
            Some(Kind::Declarative)
        );
        assert_eq!(
            sniff_json(br#"{"data": [], "next": null}"#),
            Some(Kind::Admin)
        );
        assert_eq!(sniff_json(br#"{"routes": []}"#), None);
        assert_eq!(sniff_json(br#"[{"id": "x"}]"#), None);
        assert_eq!(sniff_json(b"_format_version: \"3.0\"\n"), None);
        assert!(looks_like_yaml(b"# kong\n\n_format_version: \"3.0\"\n"));
        assert!(looks_like_yaml(b"---\nservices: []\n"));
        assert!(!looks_like_yaml(b"10\tid\thttp.path == \"/\"\n"));
        assert!(!looks_like_yaml(b"# only a comment\n"));
    }
}
