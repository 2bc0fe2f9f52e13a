//! One table per operator, to show what the index makes of each: every route uses the operator
//! on a literal of its own (`http.path contains "/seg<i>x/"`), a request hits one route, and
//! what is measured is how many routes the index hands to evaluation (candidates per request)
//! and the time of a whole execute, at every table size asked for. An operator the index keys
//! keeps its candidates at one whatever the size; one it cannot key (a negation alone: it holds
//! for every value but one, so no key can leave a request out) has every route as a candidate,
//! and the table says so rather than hiding it.
//!
//! The families are the language's operators and forms: `==`, `^=`, `=^`, `contains`, `in`,
//! `~` with a literal prefix, with only an inner literal, and path-shaped; `lower()` and
//! `any(lower(...))`; and `!=`, `not in` and `!(...)`, both beside a host (the common form:
//! keyed by the host) and alone.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use atc_router::{Context, FieldId, Router, Schema, Uuid};

/// One operator's table: the route of index `i`, and a request (field, value pairs) that
/// routes to it.
pub struct OperatorFamily {
    /// Short name, as printed.
    pub name: &'static str,
    /// Whether the index can key the form (else every route is a candidate, by design).
    pub keyed: bool,
    route: fn(usize) -> String,
    request: fn(usize) -> Vec<(&'static str, String)>,
}

fn path(p: String) -> Vec<(&'static str, String)> {
    vec![("http.path", p)]
}

fn host_path(i: usize, p: String) -> Vec<(&'static str, String)> {
    vec![("http.host", format!("h{i}.example")), ("http.path", p)]
}

/// Every family, in the order printed.
pub const FAMILIES: &[OperatorFamily] = &[
    OperatorFamily {
        name: "==",
        keyed: true,
        route: |i| format!(r#"http.path == "/e{i}/x""#),
        request: |i| path(format!("/e{i}/x")),
    },
    OperatorFamily {
        name: "^=",
        keyed: true,
        route: |i| format!(r#"http.path ^= "/p{i}/""#),
        request: |i| path(format!("/p{i}/rest")),
    },
    OperatorFamily {
        name: "=^",
        keyed: true,
        route: |i| format!(r#"http.path =^ ".{i}x""#),
        request: |i| path(format!("/files/name.{i}x")),
    },
    OperatorFamily {
        name: "contains",
        keyed: true,
        route: |i| format!(r#"http.path contains "/seg{i}x/""#),
        request: |i| path(format!("/a/b/seg{i}x/c")),
    },
    OperatorFamily {
        name: "in",
        keyed: true,
        route: |i| format!(r#"http.path in ["/in{i}", "/in{i}/b"]"#),
        request: |i| path(format!("/in{i}/b")),
    },
    OperatorFamily {
        name: "~ prefix",
        keyed: true,
        route: |i| format!(r#"http.path ~ "^/r{i}/[0-9]+$""#),
        request: |i| path(format!("/r{i}/42")),
    },
    OperatorFamily {
        name: "~ inner",
        keyed: true,
        route: |i| format!(r#"http.path ~ "[0-9]+/u{i}/""#),
        request: |i| path(format!("/x/12/u{i}/y")),
    },
    OperatorFamily {
        name: "~ rest",
        keyed: true,
        route: |i| format!(r#"http.path ~ "^/v{i}/items/(?<id>[^/]+)$""#),
        request: |i| path(format!("/v{i}/items/abc")),
    },
    OperatorFamily {
        name: "lower ==",
        keyed: true,
        route: |i| format!(r#"lower(http.path) == "/low{i}""#),
        request: |i| path(format!("/LOW{i}")),
    },
    OperatorFamily {
        name: "any(lower)",
        keyed: true,
        route: |i| format!(r#"any(lower(http.headers.x_tag)) == "t{i}""#),
        request: |i| {
            vec![
                ("http.headers.x_tag", "x".into()),
                ("http.headers.x_tag", format!("T{i}")),
            ]
        },
    },
    OperatorFamily {
        name: "host && !=",
        keyed: true,
        route: |i| format!(r#"http.host == "h{i}.example" && http.path != "/n{i}""#),
        request: |i| host_path(i, format!("/m{i}")),
    },
    OperatorFamily {
        name: "host && not in",
        keyed: true,
        route: |i| format!(r#"http.host == "h{i}.example" && http.path not in ["/n{i}"]"#),
        request: |i| host_path(i, format!("/m{i}")),
    },
    OperatorFamily {
        name: "host && !()",
        keyed: true,
        route: |i| format!(r#"http.host == "h{i}.example" && !(http.path ^= "/n{i}")"#),
        request: |i| host_path(i, format!("/m{i}")),
    },
    OperatorFamily {
        name: "!= alone",
        keyed: false,
        route: |i| format!(r#"http.path != "/n{i}""#),
        request: |i| path(format!("/n{i}")),
    },
];

/// One family at one size.
pub struct OperatorRow {
    /// Candidates per request, mean and max, over the requests.
    pub candidates: (f64, usize),
    /// A whole execute (reset, values added, execute), nanoseconds per request.
    pub ns: f64,
    /// Share of the requests that found a route.
    pub hits: f64,
}

impl OperatorFamily {
    /// Builds the family's table of `n` routes in `schema` and measures it on `requests`
    /// requests for routes spread over the table, for about `budget` of execute time.
    pub fn measure(
        &self,
        schema: &Arc<Schema>,
        n: usize,
        requests: usize,
        budget: Duration,
    ) -> OperatorRow {
        let mut router = Router::new(schema.clone());
        for i in 0..n {
            router
                .add(Uuid::from_u128(i as u128 + 1), i as u64, &(self.route)(i))
                .unwrap_or_else(|e| panic!("{}: {e}", (self.route)(i)));
        }
        let reqs: Vec<Vec<(FieldId, String)>> = (0..requests)
            .map(|k| {
                let i = (k * 7919) % n;
                (self.request)(i)
                    .into_iter()
                    .map(|(f, v)| (schema.resolve(f).expect("a field of the schema").0, v))
                    .collect()
            })
            .collect();
        let mut ctx = Context::new(schema.clone());
        // As a gateway adds values: by field id, into the context's reused buffers.
        let fill = |ctx: &mut Context, req: &[(FieldId, String)]| {
            ctx.reset();
            for (id, v) in req {
                ctx.add_str(*id, v).expect("a value of its field");
            }
        };
        let (mut sum, mut max, mut hits) = (0, 0, 0);
        for req in &reqs {
            fill(&mut ctx, req);
            let c = router.candidate_count(&mut ctx);
            sum += c;
            max = max.max(c);
            hits += usize::from(router.execute(&mut ctx));
        }
        let start = Instant::now();
        let mut done = 0usize;
        while start.elapsed() < budget {
            for req in &reqs {
                fill(&mut ctx, req);
                black_box(router.execute(&mut ctx));
            }
            done += reqs.len();
        }
        OperatorRow {
            candidates: (sum as f64 / reqs.len() as f64, max),
            ns: start.elapsed().as_nanos() as f64 / done.max(1) as f64,
            hits: hits as f64 / reqs.len() as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atc_router::Op;

    /// The Int comparisons have no table: the index keys none of them (like `!= alone`, every
    /// route would be a candidate) and the family would show nothing the others do not.
    const WITHOUT_A_FAMILY: [Op; 4] = [Op::Greater, Op::GreaterOrEqual, Op::Less, Op::LessOrEqual];

    /// docs/architecture.md, "Where a change belongs": a new operator gets a table here (or a
    /// reason above), so that docs/performance.md shows what the index makes of it.
    #[test]
    fn every_operator_has_a_family() {
        for op in Op::ALL {
            let used = FAMILIES.iter().any(|f| {
                let expr = atc_router::parse(&(f.route)(0)).expect("a family's route parses");
                expr.predicates().iter().any(|p| p.op == op)
            });
            assert!(
                used != WITHOUT_A_FAMILY.contains(&op),
                "`{op}`: no family in benches/src/operators.rs uses it (or one does and it is \
                 still in WITHOUT_A_FAMILY)"
            );
        }
    }
}
