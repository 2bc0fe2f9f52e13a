//! Witness requests: for a route, one concrete request it matches, built from its index
//! requirements (a host it needs, a path its pattern accepts, a port, an address).
//!
//! Invariant: a [`Witness`] is only ever returned after the route's own program was evaluated
//! on it and matched, so every finding drawn from it is about a request that exists. Routes
//! whose requirements do not pin a matching request (a bare regex, `!=`, a missing field)
//! have no witness, and the linter says nothing about them.
//!
//! Why witnesses: a route `s` that matches every request `r` matches also matches `r`'s
//! witness, so the index's candidates for the witness hold every such `s`: finding them costs
//! one lookup, not a scan of the table.

use crate::compile::eval::eval;
use crate::compile::program::Code;
use crate::compile::record::MatchRecord;
use crate::index::requirement::{Key, KeyKind};
use crate::index::requirements;
use crate::router::context::Context;
use crate::schema::names::FieldId;
use crate::value::Value;

/// One request, as the values of its fields (at most one per field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Witness {
    pub(crate) values: Vec<(FieldId, Value)>,
}

impl Witness {
    /// A request `program` matches, or `None` (see the module docs). `ctx` is scratch space
    /// of the router's schema; it is left holding the witness.
    pub(crate) fn of(
        program: Code<'_>,
        ctx: &mut Context,
        record: &mut MatchRecord,
        lowered: &mut String,
    ) -> Option<Witness> {
        // Each requirement offers a value (its first key); for each field, the first offer, in
        // order of how telling it is (an exact value, a path its pattern accepts, a prefix,
        // ...), that every requirement on the field admits.
        let reqs = requirements(&program);
        let mut offers: Vec<(u8, FieldId, Value)> = reqs
            .iter()
            .filter_map(|req| {
                let rank = match req.disc.kind {
                    KeyKind::Exact | KeyKind::Int | KeyKind::Cidr => 0,
                    KeyKind::Path => 1,
                    KeyKind::Prefix => 2,
                    KeyKind::Suffix => 3,
                    KeyKind::Contains => 4,
                    KeyKind::Regex => return None,
                };
                Some((rank, req.disc.field, value_of(req.keys.iter().next()?)?))
            })
            .collect();
        offers.sort_by_key(|(rank, _, _)| *rank);
        let mut values: Vec<(FieldId, Value)> = Vec::new();
        for (_, field, value) in offers {
            if values.iter().any(|(f, _)| *f == field) {
                continue;
            }
            // Regex requirements are left to the evaluation below: testing one here would
            // compile its regex again.
            if reqs
                .iter()
                .filter(|r| r.disc.field == field && r.disc.kind != KeyKind::Regex)
                .all(|r| r.admits_value(&value))
            {
                values.push((field, value));
            }
        }
        if values.is_empty() {
            return None;
        }
        let w = Witness { values };
        w.fill(ctx)?;
        record.clear();
        eval(program, &ctx.values, lowered, record).then_some(w)
    }

    /// Puts the witness's values in `ctx` (reset first).
    pub(crate) fn fill(&self, ctx: &mut Context) -> Option<()> {
        ctx.reset();
        for (f, v) in &self.values {
            ctx.add_value_by_id(*f, v.clone()).ok()?;
        }
        Some(())
    }
}

fn value_of(key: Key<'_>) -> Option<Value> {
    Some(match key {
        Key::Bytes(b) => Value::String(String::from_utf8(b.to_vec()).ok()?),
        Key::Int(i) => Value::Int(i),
        Key::Cidr(c) => Value::IpAddr(c.first_address()),
        Key::Path(p) => Value::String(String::from_utf8(p.sample()).ok()?),
    })
}
