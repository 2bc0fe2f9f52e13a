//! Writes the route tables and requests of the gateway demo (scripts/demo) and benchmark
//! (scripts/gateway-bench): atc-workload tables as `priority<TAB>uuid<TAB>expression` lines, and
//! HTTP requests that target their routes.
//!
//! ```sh
//! cargo run --release -p atc-router-ffi --example gateway_data -- OUT_DIR [options]
//!   --routes N        table size (default 10000)
//!   --family F        the workload family of the table (default mixed; e.g. rest-api: one API
//!                     host, routes told apart by path parameters and methods)
//!   --catch-all-only  the table is the single route `http.path ^= "/"` instead
//!   --catch-all-reading-fields-of N
//!                     the table is a single route that matches every request like the catch-all
//!                     but uses every field an N-route table of the family uses
//!                     (`http.path ^= "/" || f == …`), so the gateway reads the same fields from
//!                     each request as with N routes
//!   --requests M      requests for the benchmark (default 20000; 0 for none)
//!   --demo            also write demo.tsv: one request per route shape, with what it must give
//!   --port P          the port nginx listens on (net.dst.port of the requests; default 8080)
//! ```
//!
//! Files:
//! - `routes.tsv`: the table.
//! - `requests.tsv`: `mode<TAB>method<TAB>host<TAB>path<TAB>query<TAB>headers` from the
//!   "realistic" mix (Zipf over the routes). `headers` is `name:value` pairs joined by `\x1f`.
//!   `mode` tells the wrk script how to make every path unique without changing the route it
//!   reaches, as checked here with the core router: `S` append `/<n>`, `R` replace the trailing
//!   digits with `<n>`, `K` keep the path (no unique form found).
//! - `demo.tsv`: `label<TAB>method<TAB>host<TAB>path<TAB>query<TAB>headers<TAB>route id<TAB>
//!   matched path<TAB>captures` (captures `k=v` joined by spaces, sorted).
//!
//! Requests carry only what HTTP carries (method, host, path, query, headers); the connection
//! fields are those of a plain-HTTP connection from 127.0.0.1 to 127.0.0.1:P, as the gateway
//! reads them, so requests for routes on TLS SNI or other addresses miss, as they would.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;

use atc_router::{Context, Router, Schema, Type, Uuid, Value};
use atc_workload::{requests, Family, Mix, Request, Route, Table};

const SEED: u64 = 42;

struct Args {
    out: PathBuf,
    routes: usize,
    family: Family,
    catch_all_only: bool,
    /// Fields of a table of this size (see the module docs).
    fields_of: Option<usize>,
    requests: usize,
    demo: bool,
    port: u16,
}

fn args() -> Args {
    let mut it = std::env::args().skip(1);
    let usage = "usage: gateway_data OUT_DIR [--routes N] [--family F] [--catch-all-only] \
                 [--catch-all-reading-fields-of N] [--requests M] [--demo] [--port P]";
    let mut a = Args {
        out: PathBuf::from(it.next().expect(usage)),
        routes: 10_000,
        family: Family::Mixed,
        catch_all_only: false,
        fields_of: None,
        requests: 20_000,
        demo: false,
        port: 8080,
    };
    while let Some(flag) = it.next() {
        let mut num = || -> usize { it.next().and_then(|v| v.parse().ok()).expect(usage) };
        match flag.as_str() {
            "--routes" => a.routes = num(),
            "--family" => a.family = it.next().and_then(|f| Family::from_name(&f)).expect(usage),
            "--requests" => a.requests = num(),
            "--port" => a.port = u16::try_from(num()).expect(usage),
            "--catch-all-only" => a.catch_all_only = true,
            "--catch-all-reading-fields-of" => {
                a.fields_of = Some(num());
                a.catch_all_only = true;
            }
            "--demo" => a.demo = true,
            _ => panic!("{usage}"),
        }
    }
    a
}

/// A request as HTTP carries it.
#[derive(Clone, Debug, Default)]
struct HttpReq {
    method: String,
    host: String,
    path: String,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
}

impl HttpReq {
    fn from_workload(r: &Request) -> HttpReq {
        let mut h = HttpReq {
            method: "GET".into(),
            ..HttpReq::default()
        };
        for (name, value) in &r.fields {
            let atc_workload::Value::Str(text) = value else {
                continue; // connection fields: not carried
            };
            match name.as_str() {
                "http.method" => h.method = text.clone(),
                "http.host" => h.host = text.clone(),
                "http.path" => h.path = text.clone(),
                n => {
                    if let Some(name) = n.strip_prefix("http.headers.") {
                        h.headers.push((name.replace('_', "-"), text.clone()));
                    } else if let Some(name) = n.strip_prefix("http.queries.") {
                        h.query.push((name.to_owned(), text.clone()));
                    }
                }
            }
        }
        h
    }

    /// Whether the text can go into a request line and a TSV field unchanged.
    fn is_plain(&self) -> bool {
        let ok = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_graphic() && !b"%#?&=\x1f:".contains(&b))
        };
        ok(&self.method)
            && ok(&self.host)
            && self.path.starts_with('/')
            && ok(&self.path)
            // nginx would normalise dot segments and repeated slashes.
            && !self.path.split('/').any(|s| s == "." || s == "..")
            && !self.path.contains("//")
            && self.query.iter().all(|(k, v)| ok(k) && ok(v))
            && self.headers.iter().all(|(k, v)| ok(k) && ok(v))
    }

    /// The context resty.router.gateway builds for this request on a plain-HTTP connection
    /// from 127.0.0.1 to 127.0.0.1:port.
    fn context(&self, schema: &Arc<Schema>, fields: &[String], port: u16) -> Context {
        let mut ctx = Context::new(schema.clone());
        let local = IpAddr::V4(Ipv4Addr::LOCALHOST);
        for f in fields {
            let values: Vec<Value> = match f.as_str() {
                "http.method" => vec![Value::String(self.method.clone())],
                "http.host" => vec![Value::String(self.host.to_ascii_lowercase())],
                "http.path" => vec![Value::String(self.path.clone())],
                "net.src.ip" | "net.dst.ip" => vec![Value::IpAddr(local)],
                "net.dst.port" => vec![Value::Int(i64::from(port))],
                "net.protocol" => vec![Value::String("http".into())],
                f => {
                    if let Some(h) = f.strip_prefix("http.headers.") {
                        let h = h.replace('_', "-");
                        self.headers
                            .iter()
                            .filter(|(k, _)| k.eq_ignore_ascii_case(&h))
                            .map(|(_, v)| Value::String(v.clone()))
                            .collect()
                    } else if let Some(q) = f.strip_prefix("http.queries.") {
                        self.query
                            .iter()
                            .filter(|(k, _)| k == q)
                            .map(|(_, v)| Value::String(v.clone()))
                            .collect()
                    } else if let Some(n) = f.strip_prefix("http.path.segments.") {
                        let n: usize = n.parse().unwrap_or(usize::MAX);
                        self.path
                            .trim_start_matches('/')
                            .split('/')
                            .nth(n)
                            .map(|s| Value::String(s.to_owned()))
                            .into_iter()
                            .collect()
                    } else {
                        vec![]
                    }
                }
            };
            for v in values {
                let _ = ctx.add_value(f, v);
            }
        }
        ctx
    }

    fn query_text(&self) -> String {
        self.query
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    }

    fn headers_text(&self) -> String {
        self.headers
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join("\x1f")
    }
}

struct Gateway {
    schema: Arc<Schema>,
    router: Router,
    fields: Vec<String>,
    port: u16,
}

impl Gateway {
    /// (route id, matched path, captures) the gateway answers with.
    fn route(&self, req: &HttpReq) -> Option<(Uuid, String, BTreeMap<String, String>)> {
        let mut ctx = req.context(&self.schema, &self.fields, self.port);
        if !self.router.execute(&mut ctx) {
            return None;
        }
        let m = ctx.result()?;
        let matched = m
            .matched_value("http.path")
            .map(|v| v.to_string())
            .unwrap_or_default();
        Some((m.id(), matched, m.captures_map().into_iter().collect()))
    }

    fn id_of(&self, req: &HttpReq) -> Option<Uuid> {
        self.route(req).map(|r| r.0)
    }
}

/// How the wrk script can make this request's path unique (see the module docs).
fn unique_mode(gw: &Gateway, req: &HttpReq) -> char {
    let want = gw.id_of(req);
    let mut probe = req.clone();
    probe.path = format!("{}/9876543210", req.path.trim_end_matches('/'));
    if gw.id_of(&probe) == want {
        return 'S';
    }
    let trimmed = req.path.trim_end_matches(|c: char| c.is_ascii_digit());
    if trimmed.len() < req.path.len() {
        probe.path = format!("{trimmed}9876543210");
        if gw.id_of(&probe) == want {
            return 'R';
        }
    }
    'K'
}

fn main() {
    let a = args();
    std::fs::create_dir_all(&a.out).unwrap();
    let schema = Arc::new(atc_router::request::http_schema());

    let table = if a.catch_all_only {
        let mut route = Route::catch_all(
            *Uuid::from_u128(0x0c0ffee0_0000_4000_8000_000000000001).as_bytes(),
            0,
        );
        if let Some(n) = a.fields_of {
            let mut r = Router::new(schema.clone());
            for route in Table::family(a.family, n, SEED).routes {
                r.add(
                    Uuid::from_bytes(route.id),
                    route.priority,
                    &route.expression,
                )
                .unwrap();
            }
            for f in r.fields() {
                let literal = match schema.field_type(&f) {
                    Some(Type::Int) => "1",
                    Some(Type::IpAddr) => "192.0.2.1",
                    Some(Type::IpCidr) => "192.0.2.0/24",
                    _ => "\"-\"",
                };
                route.expression.push_str(&format!(" || {f} == {literal}"));
            }
        }
        Table {
            routes: vec![route],
            catch_all: true,
        }
    } else {
        Table::family(a.family, a.routes, SEED)
    };
    let mut router = Router::new(schema.clone());
    let mut tsv = String::with_capacity(table.routes.len() * 128);
    for r in &table.routes {
        assert!(!r.expression.contains(['\t', '\n']));
        tsv.push_str(&format!(
            "{}\t{}\t{}\n",
            r.priority,
            r.id_string(),
            r.expression
        ));
        router
            .add(Uuid::from_bytes(r.id), r.priority, &r.expression)
            .unwrap();
    }
    std::fs::write(a.out.join("routes.tsv"), tsv).unwrap();
    let gw = Gateway {
        fields: router.fields(),
        schema,
        router,
        port: a.port,
    };

    if a.requests > 0 {
        // Requests of the realistic mix over a 10,000-route table of the family stand in for
        // the single catch-all route's, so that both runs send the same kind of traffic.
        let source = if a.catch_all_only {
            Table::family(a.family, 10_000, SEED)
        } else {
            table.clone()
        };
        let mut out = String::new();
        let (mut written, mut hits) = (0, 0);
        let mut modes = BTreeMap::new();
        for r in requests(&source, Mix::Realistic, a.requests, SEED + 1) {
            let req = HttpReq::from_workload(&r);
            if !req.is_plain() {
                continue;
            }
            let mode = unique_mode(&gw, &req);
            *modes.entry(mode).or_insert(0) += 1;
            if gw.id_of(&req).is_some() {
                hits += 1;
            }
            written += 1;
            out.push_str(&format!(
                "{mode}\t{}\t{}\t{}\t{}\t{}\n",
                req.method,
                req.host,
                req.path,
                req.query_text(),
                req.headers_text()
            ));
        }
        std::fs::write(a.out.join("requests.tsv"), out).unwrap();
        eprintln!(
            "gateway_data: {} routes, {written} requests ({hits} routed as sent; unique-path \
             modes {modes:?})",
            table.routes.len()
        );
    }

    if a.demo {
        write_demo(&a, &table, &gw);
    }
}

/// One request per route family that routes to its target over plain HTTP.
fn write_demo(a: &Args, table: &Table, gw: &Gateway) {
    let wanted = [
        (Family::HostPrefixes, "host + nested path prefixes"),
        (Family::RestApi, "REST path with named captures"),
        (Family::HeaderOnly, "host + path + header"),
        (Family::MethodSplit, "method set"),
        (Family::WildcardHosts, "wildcard host"),
    ];
    let mut out = String::new();
    for (class, label) in wanted {
        let found = table
            .routes
            .iter()
            .filter(|r| r.family == class)
            .flat_map(|r| {
                let one = Table {
                    routes: vec![r.clone()],
                    catch_all: false,
                };
                requests(&one, Mix::HitFirst, 4, SEED)
                    .into_iter()
                    .map(move |q| (Uuid::from_bytes(r.id), HttpReq::from_workload(&q)))
            })
            .find(|(id, req)| {
                req.is_plain()
                    && gw.id_of(req) == Some(*id)
                    // A header route shows the header at work only if the header is sent.
                    && (class != Family::HeaderOnly || !req.headers.is_empty())
                    // HEAD answers have no body to show the result in.
                    && req.method != "HEAD"
                    && (class != Family::RestApi
                        || gw.route(req).is_some_and(|r| r.2.len() > 2))
            });
        let Some((_, req)) = found else {
            eprintln!("gateway_data: no demo request for {label}");
            continue;
        };
        let (id, matched, caps) = gw.route(&req).unwrap();
        let caps: Vec<String> = caps.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&format!(
            "{label}\t{}\t{}\t{}\t{}\t{}\t{id}\t{matched}\t{}\n",
            req.method,
            req.host,
            req.path,
            req.query_text(),
            req.headers_text(),
            caps.join(" ")
        ));
    }
    std::fs::write(a.out.join("demo.tsv"), out).unwrap();
}
