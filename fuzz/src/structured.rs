//! The structured input of the `matcher` target: a small schema, a sequence of router
//! operations whose route expressions are built from arbitrary choices, and requests.
//!
//! Expressions are generated as *text* (so the parser, validation and printing are on the path
//! too) from a grammar-shaped generator: most routes are valid, some are not on purpose (type
//! mismatches, bad regexes, unknown fields, deep nesting), and a failed add must change nothing.
//! Every literal a route uses is remembered, and request values are mostly derived from those
//! literals (the literal itself, with a suffix for `^=`, a prefix for `=^`, uppercased for
//! `lower()`, a regex's sample text), so that requests reach routes deep in the table instead of
//! missing everything.
//!
//! Invariants:
//! - Generation is a pure function of the bytes: [`Scenario::arbitrary`] never consults
//!   anything else, so an artifact reproduces.
//! - Nesting is bounded by [`MAX_GEN_DEPTH`] (the generator's own recursion), independently of
//!   the parser's limit, so generating never risks the fuzzer's stack.

use std::fmt::Write as _;
use std::sync::Arc;

use arbitrary::{Arbitrary, Result, Unstructured};
use atc_router::{
    CaptureKey, Context, Error, FieldId, MatchedValue, RouteSpec, Router, Schema, SyncMode, Type,
    Uuid, Value,
};

/// Deepest nesting of groups the generator writes (the parser's default limit is 64; a few
/// routes go past a lower per-scenario limit on purpose, see [`Scenario::max_depth`]).
pub const MAX_GEN_DEPTH: usize = 5;
/// Route ids are drawn from this many slots, so removes and duplicate adds hit existing routes.
pub const SLOTS: u8 = 24;
const MAX_STEPS: usize = 48;
const MAX_REQUESTS: usize = 8;
const MAX_VALUES: usize = 10;

/// Names of the exact fields; their types are part of the input.
pub const EXACT_FIELDS: [&str; 4] = ["f0", "f1", "f2", "f3"];
/// The String wildcard of every scenario schema, and names that resolve through it.
pub const WILDCARD: &str = "h.*";
const WILDCARD_NAMES: [&str; 3] = ["h.x", "h.y", "h.X_1"];

pub const STRINGS: &[&str] = &[
    "",
    "a",
    "ab",
    "abc",
    "b",
    "A",
    "Ab",
    "/",
    "/a",
    "/a/",
    "/a/b",
    "/a/12",
    "/b/7/x",
    "x.example.com",
    ".example.com",
    "GET",
    "get",
    "é",
    "É",
    "Σa",
    "ΑΣ",
    "ας",
    "İ",
    "i̇",
    "K",
    "ẞ",
    "ß",
    "\u{0}",
    "\n",
    "\"",
    "\\",
    "a\"b",
    "🦀",
];
/// Regexes with a text each matches, so requests can be built to reach regex routes.
pub const REGEXES: &[(&str, &str)] = &[
    ("^a", "a1"),
    ("b$", "zb"),
    ("a|b", "xbx"),
    ("^(?<x>a)(b)?", "ab"),
    (r"^/a/(\d+)", "/a/12/x"),
    (r"^/(?<seg>[a-z])/(?<n>\d+)?", "/b/7"),
    ("(?i)^a", "Ax"),
    ("^$", ""),
    ("", "q"),
    ("^(a|ab)c?", "abc"),
    (r"^\w+", "é1"),
    (r"\.example\.com$", "x.example.com"),
    ("^/a$", "/a"),
    ("(?m)^b", "a\nb"),
    (r"\Ax", "xy"),
    (r"^/u/(?<id>\d+)$", "/u/42"),
    ("(a*)*b", "aaab"),
    (r"(?<a>x)|(?<b>y)", "y"),
    ("^(?:/v(?<ver>[0-9]+))?/api", "/v2/api"),
    ("(?i)σ", "ΑΣ"),
    (r"\bab\b", "x ab y"),
    ("(?s).", "\n"),
    ("^.{0,3}$", "abc"),
    (r"\p{Greek}+", "ΑΣ"),
    ("(?-u:\\xff)", "x"),
    ("(", "("),
    // Oversized regexes (`a{1000}{1000}`) are left to the limit tests and the text targets:
    // rejecting one costs ~0.4 s under ASan, which would starve this target.
    ("a{10}{10}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
];
/// Pieces of which the generator composes arbitrary (often invalid) regexes.
const REGEX_PIECES: &[&str] = &[
    "a", "b", "^", "$", "(", ")", "|", "*", "+", "?", r"\d", ".", "[a-z]", "(?<n>", "(?<m>", "{2}",
    "{0,}", "é", "(?i)", r"\b", "[", "]", "/", r"\", "(?:", "{99}",
];
pub const INTS: &[i64] = &[-1, 0, 1, 2, 7, 100, 443, i64::MAX, -i64::MAX, i64::MIN];
pub const IPS: &[&str] = &[
    "10.0.0.1",
    "10.1.0.1",
    "192.168.0.1",
    "0.0.0.0",
    "255.255.255.255",
    "::1",
    "::",
    "2001:db8::1",
    "::ffff:a00:1",
];
pub const CIDRS: &[&str] = &[
    "10.0.0.0/8",
    "10.0.0.0/31",
    "10.0.0.1/32",
    "::/0",
    "2001:db8::/32",
    "0.0.0.0/0",
    "::1/128",
];

/// What the generator remembers of a literal, to build request values that satisfy it.
#[derive(Debug, Clone)]
pub enum Seen {
    Text(String),
    Int(i64),
    Ip(String),
    Cidr(String),
}

/// One operation on the router.
#[derive(Debug, Clone)]
pub enum Step {
    Add {
        slot: u8,
        priority: u64,
        expr: String,
    },
    Remove {
        slot: u8,
    },
    /// Execute against a context made from another schema: must match nothing, leave nothing.
    ForeignContext,
    /// `Router::sync` to a whole desired list (ids may repeat; expressions may be invalid).
    Sync {
        mode: SyncMode,
        desired: Vec<Desired>,
    },
    /// A plan prepared, then the router changed (`remove`), then the plan applied: it must be
    /// refused as stale and change nothing.
    StaleSync {
        desired: Vec<Desired>,
        remove: u8,
    },
}

/// One route of a desired list.
#[derive(Debug, Clone)]
pub struct Desired {
    pub slot: u8,
    pub priority: u64,
    /// `None`: the slot's current expression, if it has one (an unchanged route).
    pub expr: Option<String>,
}

/// One request value: a field name and a value of the field's type (or, rarely, of another
/// type, which the context must refuse).
#[derive(Debug, Clone)]
pub struct RequestValue {
    pub field: String,
    pub value: Value,
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub types: [Type; 4],
    pub max_depth: usize,
    pub steps: Vec<Step>,
    pub requests: Vec<Vec<RequestValue>>,
}

/// The id of a slot. Spread over the u128 range so that id order (the tie-break of equal
/// priorities) is unrelated to slot order.
pub fn slot_id(slot: u8) -> Uuid {
    Uuid::from_u128(u128::from(slot).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) | 1)
}

struct Gen<'a, 'b> {
    u: &'a mut Unstructured<'b>,
    types: [Type; 4],
    seen: Vec<(Type, Seen)>,
}

fn pick<'t, T>(u: &mut Unstructured<'_>, items: &'t [T]) -> Result<&'t T> {
    Ok(&items[u.choose_index(items.len())?])
}

impl Gen<'_, '_> {
    fn ws(&mut self, out: &mut String) -> Result<()> {
        // Mostly one space; sometimes none or other whitespace the lexer accepts.
        out.push_str(match self.u.int_in_range(0u8..=15)? {
            0 => "",
            1 => "\n\t",
            2 => " \r\n ",
            _ => " ",
        });
        Ok(())
    }

    fn expr(&mut self, depth: usize, out: &mut String) -> Result<()> {
        let terms = if depth >= MAX_GEN_DEPTH {
            1
        } else {
            self.u.int_in_range(1u8..=4)?
        };
        for i in 0..terms {
            if i > 0 {
                self.ws(out)?;
                out.push_str(if self.u.arbitrary()? { "&&" } else { "||" });
                self.ws(out)?;
            }
            self.term(depth, out)?;
        }
        Ok(())
    }

    fn term(&mut self, depth: usize, out: &mut String) -> Result<()> {
        let kind = if depth >= MAX_GEN_DEPTH {
            0
        } else {
            self.u.int_in_range(0u8..=9)?
        };
        match kind {
            8 => {
                out.push('(');
                self.expr(depth + 1, out)?;
                out.push(')');
            }
            9 => {
                out.push_str("!(");
                self.expr(depth + 1, out)?;
                out.push(')');
            }
            _ => self.predicate(out)?,
        }
        Ok(())
    }

    /// A field name and its type (`None`: unknown to the schema).
    fn field(&mut self) -> Result<(String, Option<Type>)> {
        Ok(match self.u.int_in_range(0u8..=19)? {
            0..=13 => {
                let i = self.u.choose_index(4)?;
                (EXACT_FIELDS[i].to_owned(), Some(self.types[i]))
            }
            14..=17 => (
                (*pick(self.u, &WILDCARD_NAMES)?).to_owned(),
                Some(Type::String),
            ),
            18 => (
                format!("h.w{}", self.u.int_in_range(0u8..=3)?),
                Some(Type::String),
            ),
            _ => ("nope".to_owned(), None),
        })
    }

    fn predicate(&mut self, out: &mut String) -> Result<()> {
        let (field, ty) = self.field()?;
        let ty_or_string = ty.unwrap_or(Type::String);
        let mut transforms = Vec::new();
        for _ in 0..self.u.int_in_range(0u8..=3)? {
            // Mostly transformations that make sense for the type; now and then `lower` on a
            // non-String field (a validation error) or an unknown name (a syntax error).
            transforms.push(match self.u.int_in_range(0u8..=9)? {
                0..=4 => "any",
                5..=8 if ty_or_string == Type::String => "lower",
                5..=8 => "any",
                _ => *pick(self.u, &["lower", "upper"])?,
            });
        }
        let lower = transforms.contains(&"lower");
        for t in &transforms {
            out.push_str(t);
            out.push('(');
        }
        out.push_str(&field);
        for _ in &transforms {
            out.push(')');
        }
        let valid: &[&str] = match ty_or_string {
            Type::String => &["==", "==", "~", "~", "^=", "^=", "=^", "!=", "contains"],
            Type::Int => &["==", "!=", ">", ">=", "<", "<="],
            Type::IpAddr => &["==", "!=", "in", "not in", "not \n in"],
            Type::IpCidr => &["==", "!="],
        };
        let op = if self.u.ratio(1u8, 12)? {
            *pick(
                self.u,
                &[
                    "==", "!=", "~", "^=", "=^", ">", ">=", "<", "<=", "in", "not in", "contains",
                ],
            )?
        } else {
            *pick(self.u, valid)?
        };
        self.ws(out)?;
        out.push_str(op);
        self.ws(out)?;
        // The literal's type follows the operator; now and then another type on purpose.
        let lit_ty = if self.u.ratio(1u8, 16)? {
            *pick(
                self.u,
                &[Type::String, Type::Int, Type::IpAddr, Type::IpCidr],
            )?
        } else if op == "in" || op.starts_with("not") {
            Type::IpCidr
        } else {
            ty_or_string
        };
        self.literal(lit_ty, op == "~", lower, out)
    }

    fn literal(&mut self, ty: Type, regex: bool, lower: bool, out: &mut String) -> Result<()> {
        match ty {
            Type::String => {
                let text = if regex {
                    if self.u.ratio(1u8, 5)? {
                        let mut r = String::new();
                        for _ in 0..self.u.int_in_range(1u8..=4)? {
                            r.push_str(pick(self.u, REGEX_PIECES)?);
                        }
                        r
                    } else {
                        let (re, sample) = *pick(self.u, REGEXES)?;
                        self.seen
                            .push((Type::String, Seen::Text(sample.to_owned())));
                        re.to_owned()
                    }
                } else {
                    let s = match self.u.int_in_range(0u8..=9)? {
                        // A short arbitrary string: any Unicode, quotes and backslashes.
                        0 => {
                            let mut s = String::new();
                            for _ in 0..self.u.int_in_range(0u8..=4)? {
                                s.push(self.u.arbitrary::<char>()?);
                            }
                            s
                        }
                        _ => (*pick(self.u, STRINGS)?).to_owned(),
                    };
                    // A lowered field never equals an uppercase literal (a validation error):
                    // mostly write what could match.
                    if lower && self.u.ratio(7u8, 8)? {
                        s.to_lowercase()
                    } else {
                        s
                    }
                };
                self.seen.push((Type::String, Seen::Text(text.clone())));
                if !text.contains("\"#") && self.u.ratio(1u8, 4)? {
                    let _ = write!(out, "r#\"{text}\"#");
                } else {
                    let _ = write!(out, "{}", Value::String(text));
                }
            }
            Type::Int => {
                let i = *pick(self.u, INTS)?;
                self.seen.push((Type::Int, Seen::Int(i)));
                let (sign, m) = if i < 0 {
                    ("-", i.unsigned_abs())
                } else {
                    ("", i as u64)
                };
                let _ = match self.u.int_in_range(0u8..=3)? {
                    1 => write!(out, "{sign}0x{m:x}"),
                    2 if m > 0 => write!(out, "{sign}0{m:o}"),
                    _ => write!(out, "{sign}{m}"),
                };
            }
            Type::IpAddr => {
                let ip = *pick(self.u, IPS)?;
                self.seen.push((Type::IpAddr, Seen::Ip(ip.to_owned())));
                out.push_str(ip);
            }
            Type::IpCidr => {
                let c = *pick(self.u, CIDRS)?;
                self.seen.push((Type::IpCidr, Seen::Cidr(c.to_owned())));
                out.push_str(c);
            }
        }
        Ok(())
    }

    /// A desired list for a sync: mostly unchanged routes (the current expression) and some
    /// new or changed ones, now and then an id twice.
    fn desired(&mut self) -> Result<Vec<Desired>> {
        let mut out = Vec::new();
        for _ in 0..self.u.int_in_range(0u8..=10)? {
            let slot = self.u.int_in_range(0..=SLOTS - 1)?;
            let priority = u64::from(self.u.int_in_range(0u8..=3)?);
            let expr = if self.u.ratio(1u8, 2)? {
                None
            } else {
                let mut e = String::new();
                self.expr(0, &mut e)?;
                Some(e)
            };
            out.push(Desired {
                slot,
                priority,
                expr,
            });
        }
        Ok(out)
    }

    /// A value for a field of type `ty`: mostly derived from a literal some route uses.
    fn value(&mut self, ty: Type) -> Result<Value> {
        let from_seen: Vec<&Seen> = self
            .seen
            .iter()
            .filter(|(t, _)| *t == ty || (ty == Type::IpAddr && *t == Type::IpCidr))
            .map(|(_, s)| s)
            .collect();
        if !from_seen.is_empty() && self.u.ratio(3u8, 4)? {
            let seen = from_seen[self.u.choose_index(from_seen.len())?].clone();
            let variant = self.u.int_in_range(0u8..=7)?;
            return Ok(match (ty, seen) {
                (Type::String, Seen::Text(t)) => Value::String(match variant {
                    0 | 1 => t,
                    2 => format!("{t}/12"),
                    3 => format!("w.{t}"),
                    4 => t.to_uppercase(),
                    // Past the 256 bytes where regexes run on the long-text engine.
                    6 => format!("{}{t}", "/a".repeat(150)),
                    7 => t.repeat(300 / t.len().max(1) + 1),
                    _ => format!("x{t}y"),
                }),
                (Type::Int, Seen::Int(i)) => Value::Int(match variant {
                    0 | 1 => i,
                    2 => i.wrapping_add(1),
                    _ => i.wrapping_sub(1),
                }),
                (Type::IpAddr, Seen::Ip(a)) => Value::IpAddr(a.parse().expect("pool address")),
                (Type::IpAddr, Seen::Cidr(c)) => {
                    let c: atc_router::IpCidr = c.parse().expect("pool CIDR");
                    Value::IpAddr(c.first_address())
                }
                (Type::IpCidr, Seen::Cidr(c)) => Value::IpCidr(c.parse().expect("pool CIDR")),
                (ty, _) => self.pool_value(ty)?,
            });
        }
        self.pool_value(ty)
    }

    fn pool_value(&mut self, ty: Type) -> Result<Value> {
        Ok(match ty {
            Type::String => {
                if self.u.ratio(1u8, 6)? {
                    Value::String(self.u.arbitrary::<String>()?.chars().take(8).collect())
                } else {
                    Value::String((*pick(self.u, STRINGS)?).to_owned())
                }
            }
            Type::Int => Value::Int(if self.u.ratio(1u8, 6)? {
                self.u.arbitrary()?
            } else {
                *pick(self.u, INTS)?
            }),
            Type::IpAddr => Value::IpAddr(pick(self.u, IPS)?.parse().expect("pool address")),
            Type::IpCidr => Value::IpCidr(pick(self.u, CIDRS)?.parse().expect("pool CIDR")),
        })
    }
}

impl<'a> Arbitrary<'a> for Scenario {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Scenario> {
        let mut types = [Type::String; 4];
        for t in &mut types {
            *t = *pick(
                u,
                &[
                    Type::String,
                    Type::String,
                    Type::Int,
                    Type::IpAddr,
                    Type::IpCidr,
                ],
            )?;
        }
        // Usually the default depth limit; sometimes one the generator can exceed.
        let max_depth = if u.ratio(1u8, 8)? { 3 } else { 64 };
        let mut g = Gen {
            u,
            types,
            seen: Vec::new(),
        };
        let mut steps = Vec::new();
        let n_steps = g.u.int_in_range(1..=MAX_STEPS)?;
        for _ in 0..n_steps {
            let step = match g.u.int_in_range(0u8..=9)? {
                0..=6 => {
                    let slot = g.u.int_in_range(0..=SLOTS - 1)?;
                    let priority = u64::from(g.u.int_in_range(0u8..=3)?);
                    let mut expr = String::new();
                    g.expr(0, &mut expr)?;
                    Step::Add {
                        slot,
                        priority,
                        expr,
                    }
                }
                7 => Step::Remove {
                    slot: g.u.int_in_range(0..=SLOTS - 1)?,
                },
                8 => {
                    let mode = if g.u.arbitrary()? {
                        SyncMode::AllOrNothing
                    } else {
                        SyncMode::ApplyValid
                    };
                    let desired = g.desired()?;
                    if g.u.ratio(1u8, 6)? {
                        Step::StaleSync {
                            desired,
                            remove: g.u.int_in_range(0..=SLOTS - 1)?,
                        }
                    } else {
                        Step::Sync { mode, desired }
                    }
                }
                _ => Step::ForeignContext,
            };
            steps.push(step);
            if g.u.is_empty() {
                break;
            }
        }
        let mut requests = Vec::new();
        for _ in 0..g.u.int_in_range(1..=MAX_REQUESTS)? {
            let mut values = Vec::new();
            for _ in 0..g.u.int_in_range(0..=MAX_VALUES)? {
                let (field, ty) = g.field()?;
                let ty = ty.unwrap_or(Type::String);
                let ty = if g.u.ratio(1u8, 40)? {
                    *pick(g.u, &[Type::String, Type::Int, Type::IpAddr])?
                } else {
                    ty
                };
                let value = g.value(ty)?;
                values.push(RequestValue { field, value });
            }
            requests.push(values);
        }
        Ok(Scenario {
            types,
            max_depth,
            steps,
            requests,
        })
    }
}

impl Scenario {
    pub fn schema(&self) -> Arc<Schema> {
        let mut s = Schema::new();
        for (name, ty) in EXACT_FIELDS.iter().zip(self.types) {
            s.add_field(name, ty).expect("distinct valid names");
        }
        s.add_field(WILDCARD, Type::String).expect("valid wildcard");
        Arc::new(s)
    }

    /// Runs the scenario: applies every step to a router and to a model of what it should
    /// hold, and after each step checks the router against the model and the indexed matcher
    /// against the reference evaluator on every request. Panics on any difference. Returns
    /// counts of what happened (for choosing seeds).
    pub fn run(&self) -> Stats {
        let mut stats = Stats::default();
        let schema = self.schema();
        let limits = atc_router::Limits {
            max_depth: self.max_depth,
            ..atc_router::Limits::default()
        };
        let mut router = Router::with_limits(schema.clone(), limits);
        // slot → priority and expression of the route the router should hold there.
        let mut model: Model = vec![None; SLOTS as usize];
        let mut ctx = Context::new(schema.clone());
        let foreign_schema = self.schema();
        for (n, step) in self.steps.iter().enumerate() {
            match step {
                Step::Add {
                    slot,
                    priority,
                    expr,
                } => {
                    let id = slot_id(*slot);
                    let before = router.len();
                    match router.add(id, *priority, expr) {
                        Ok(()) => {
                            stats.added += 1;
                            assert!(model[*slot as usize].is_none(), "duplicate id accepted");
                            model[*slot as usize] = Some((*priority, expr.clone()));
                            let route = router.get(id).expect("added route is there");
                            assert_eq!(route.source(), expr.as_str());
                            // A route's tree is its source parsed again; printing it and
                            // parsing the print must give the same tree.
                            let tree = route.expr();
                            let printed = tree.to_string();
                            let again =
                                atc_router::parse_with_limits(&printed, &crate::reparse_limits())
                                    .unwrap_or_else(|e| panic!("{printed}\n{e}"));
                            assert_eq!(again.expr, tree, "print/re-parse of {expr:?}");
                        }
                        Err(Error::DuplicateRoute(d)) => {
                            assert_eq!(d, id);
                            assert!(model[*slot as usize].is_some(), "duplicate of nothing");
                        }
                        Err(e) => {
                            if let Error::Expr(ee) = &e {
                                crate::check_expr_error(expr, ee);
                            }
                            assert_eq!(router.len(), before, "a failed add changed the router");
                            let _ = e.to_string();
                        }
                    }
                }
                Step::Remove { slot } => {
                    let removed = router.remove(slot_id(*slot));
                    assert_eq!(removed, model[*slot as usize].take().is_some());
                }
                Step::Sync { mode, desired } => {
                    stats.added += self.sync(&mut router, &mut model, *mode, desired, &limits);
                }
                Step::StaleSync { desired, remove } => {
                    let (specs, _) = specs(&model, desired);
                    let plan = router
                        .prepare_sync(&specs, SyncMode::ApplyValid)
                        .expect("apply-valid plans are never refused");
                    let removed = router.remove(slot_id(*remove));
                    assert_eq!(removed, model[*remove as usize].take().is_some());
                    let report = router.apply(plan);
                    assert!(report.stale, "a plan older than a change was applied");
                }
                Step::ForeignContext => {
                    let mut foreign = Context::new(foreign_schema.clone());
                    for v in self.requests.iter().flatten() {
                        let _ = foreign.add_value(&v.field, v.value.clone());
                    }
                    assert!(!router.execute(&mut foreign));
                    assert!(foreign.result().is_none());
                    assert!(!router.execute_reference(&mut foreign));
                    assert!(foreign.result().is_none());
                }
            }
            self.check_model(&router, &model);
            for (r, request) in self.requests.iter().enumerate() {
                fill(&mut ctx, request);
                let fast = router.execute(&mut ctx);
                let fast_out = outcome(&ctx);
                assert_eq!(fast, fast_out.is_some());
                let slow = router.execute_reference(&mut ctx);
                let slow_out = outcome(&ctx);
                assert_eq!(
                    fast_out,
                    slow_out,
                    "indexed matcher and reference disagree after step {n} on request {r}\n\
                     routes: {:#?}\nrequest: {request:#?}",
                    router
                        .routes()
                        .map(|r| (r.priority(), r.id(), r.source().to_owned()))
                        .collect::<Vec<_>>()
                );
                assert_eq!(fast, slow);
                stats.matched += usize::from(fast);
            }
        }
        stats
    }

    /// Syncs the router to `desired` and the model by the rules of `Router::prepare_sync`;
    /// checks the report against the model's. Returns the number of routes added or changed.
    fn sync(
        &self,
        router: &mut Router,
        model: &mut Model,
        mode: SyncMode,
        desired: &[Desired],
        limits: &atc_router::Limits,
    ) -> usize {
        let (specs, slots) = specs(model, desired);
        let mut next: Model = vec![None; SLOTS as usize];
        let mut seen = [false; SLOTS as usize];
        let (mut added, mut changed, mut unchanged, mut errors) = (0, 0, 0, 0);
        for (spec, slot) in specs.iter().zip(&slots) {
            let slot = *slot as usize;
            if std::mem::replace(&mut seen[slot], true) {
                errors += 1; // an id repeated in the list: the first occurrence counts
                continue;
            }
            let current = &model[slot];
            if current
                .as_ref()
                .is_some_and(|(p, e)| *p == spec.priority && e == spec.expression)
            {
                unchanged += 1;
                next[slot] = current.clone();
                continue;
            }
            let schema = router.schema().clone();
            if Router::validate_with_limits(&schema, spec.expression, limits).is_ok() {
                if current.is_some() {
                    changed += 1;
                } else {
                    added += 1;
                }
                next[slot] = Some((spec.priority, spec.expression.to_owned()));
            } else {
                errors += 1;
                // A known route whose new version is invalid keeps its current version.
                next[slot] = current.clone();
            }
        }
        let removed = (0..SLOTS as usize)
            .filter(|s| model[*s].is_some() && !seen[*s])
            .count();
        match router.sync(&specs, mode) {
            Ok(report) => {
                assert!(
                    errors == 0 || mode == SyncMode::ApplyValid,
                    "{errors} invalid routes accepted"
                );
                assert!(!report.stale);
                assert_eq!(
                    (
                        report.added,
                        report.removed,
                        report.changed,
                        report.unchanged,
                        report.errors.len()
                    ),
                    (added, removed, changed, unchanged, errors),
                    "sync report (added, removed, changed, unchanged, errors) of {desired:#?}"
                );
                for (_, e) in &report.errors {
                    let _ = e.to_string();
                }
                *model = next;
                added + changed
            }
            Err(e) => {
                assert_eq!(mode, SyncMode::AllOrNothing, "{e}");
                assert_eq!(e.errors.len(), errors, "{e}");
                assert!(errors > 0);
                let _ = e.to_string();
                0
            }
        }
    }

    fn check_model(&self, router: &Router, model: &Model) {
        let mut want: Vec<(u64, Uuid)> = model
            .iter()
            .enumerate()
            .filter_map(|(slot, r)| r.as_ref().map(|(p, _)| (*p, slot_id(slot as u8))))
            .collect();
        // Routing order: priority descending, then id bytes descending.
        want.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.as_bytes().cmp(a.1.as_bytes())));
        let got: Vec<(u64, Uuid)> = router.routes().map(|r| (r.priority(), r.id())).collect();
        assert_eq!(got, want, "routes or their order differ from the model");
        assert_eq!(router.len(), want.len());
        let mut fields: Vec<String> = Vec::new();
        for r in router.routes() {
            let schema = router.schema();
            for f in r.field_ids() {
                let name = schema.field(f).expect("route fields resolve").0;
                if !fields.contains(&name) {
                    fields.push(name);
                }
            }
        }
        fields.sort();
        assert_eq!(router.fields(), fields, "fields in use");
        // Wildcard names are registered by the routes that use them, and by nothing else:
        // requests never register one, and the last route on a name releases it.
        let wildcard_names = fields.iter().filter(|f| f.starts_with("h.")).count();
        assert_eq!(
            router.schema().names_in_use(),
            wildcard_names,
            "wildcard names registered"
        );
        for (slot, r) in model.iter().enumerate() {
            if let Some((_, expr)) = r {
                let route = router.get(slot_id(slot as u8)).expect("modelled route");
                assert_eq!(route.source(), expr, "expression of slot {slot}");
            }
        }
    }
}

/// What the router should hold: per slot, the priority and expression of its route.
type Model = Vec<Option<(u64, String)>>;

/// The `RouteSpec`s of a desired list (an entry without an expression takes the slot's current
/// one, or an empty one, which is invalid), and the slot of each.
fn specs<'m>(model: &'m Model, desired: &'m [Desired]) -> (Vec<RouteSpec<'m>>, Vec<u8>) {
    desired
        .iter()
        .map(|d| {
            let expression = match (&d.expr, &model[d.slot as usize]) {
                (Some(e), _) => e.as_str(),
                (None, Some((_, e))) => e.as_str(),
                (None, None) => "",
            };
            (
                RouteSpec {
                    id: slot_id(d.slot),
                    priority: d.priority,
                    expression,
                },
                d.slot,
            )
        })
        .unzip()
}

/// What a run did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    /// Routes added successfully.
    pub added: usize,
    /// Requests that matched a route (counted after every step).
    pub matched: usize,
}

/// Resets the context and adds the request's values. Values the context refuses (another
/// type, an unknown name) are skipped; refusing must not add anything.
pub fn fill(ctx: &mut Context, request: &[RequestValue]) {
    ctx.reset();
    for v in request {
        let before = ctx.values(&v.field).len();
        if ctx.add_value(&v.field, v.value.clone()).is_err() {
            assert_eq!(
                ctx.values(&v.field).len(),
                before,
                "refused value was added"
            );
        }
    }
}

/// Everything a result says: id, priority, the matched value of every field that recorded one
/// (in recording order), and the captures in recording order.
pub type Outcome = (Uuid, u64, Vec<(FieldId, String)>, Vec<(String, String)>);

pub fn outcome(ctx: &Context) -> Option<Outcome> {
    let m = ctx.result()?;
    let matched = m
        .matched_fields()
        .into_iter()
        .map(|f| {
            let v = m
                .matched_value_by_id(f)
                .expect("a matched field has a value");
            let shown = match v {
                MatchedValue::String(s) => format!("s:{s}"),
                MatchedValue::Int(i) => format!("i:{i}"),
                MatchedValue::IpAddr(a) => format!("a:{a}"),
                MatchedValue::IpCidr(c) => format!("c:{c}"),
            };
            (f, shown)
        })
        .collect();
    let captures = m
        .captures()
        .map(|(k, v)| {
            let key = match k {
                CaptureKey::Index(i) => format!("#{i}"),
                CaptureKey::Name(n) => n.to_owned(),
            };
            // Every recorded capture can be read back by its key (the last one wins).
            assert!(m.capture(k).is_some());
            (key, v.to_owned())
        })
        .collect();
    Some((m.id(), m.priority(), matched, captures))
}
