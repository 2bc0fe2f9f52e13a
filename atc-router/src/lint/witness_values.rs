//! The witnesses' values, sorted by field and value, so that the witnesses a requirement admits
//! are found by a range rather than a scan.

use std::collections::BTreeSet;
use std::net::IpAddr;

use super::witness::Witness;
use super::WitnessId;
use crate::index::requirement::{Key, KeyKind};
use crate::index::Requirement;
use crate::schema::names::FieldId;
use crate::value::Value;

/// The witnesses' values, sorted, so that the witnesses a requirement admits are found by a
/// range rather than a scan.
///
/// Invariant: [`WitnessValues::admitted`] returns every witness with a value on the
/// requirement's field that meets it (and possibly others, which the caller evaluates). A
/// witness without a value on the field cannot satisfy a route with that requirement.
#[derive(Debug, Default)]
pub(super) struct WitnessValues {
    texts: BTreeSet<(FieldId, String, WitnessId)>,
    lowered: BTreeSet<(FieldId, String, WitnessId)>,
    reversed: BTreeSet<(FieldId, Vec<u8>, WitnessId)>,
    ints: BTreeSet<(FieldId, i64, WitnessId)>,
    addrs: BTreeSet<(FieldId, IpAddr, WitnessId)>,
    fields: BTreeSet<(FieldId, WitnessId)>,
}

impl WitnessValues {
    /// The values of all of `witnesses`, each set built from one sorted list.
    pub(super) fn build<'a>(
        witnesses: impl Iterator<Item = (WitnessId, &'a Witness)>,
    ) -> WitnessValues {
        let mut texts = Vec::new();
        let mut lowered = Vec::new();
        let mut reversed_texts = Vec::new();
        let mut ints = Vec::new();
        let mut addrs = Vec::new();
        let mut fields = Vec::new();
        for (id, w) in witnesses {
            for (f, v) in &w.values {
                fields.push((*f, id));
                match v {
                    Value::String(s) => {
                        texts.push((*f, s.clone(), id));
                        lowered.push((*f, s.to_lowercase(), id));
                        reversed_texts.push((*f, reversed(s), id));
                    }
                    Value::Int(i) => ints.push((*f, *i, id)),
                    Value::IpAddr(a) => addrs.push((*f, *a, id)),
                    Value::IpCidr(_) => {}
                }
            }
        }
        WitnessValues {
            texts: texts.into_iter().collect(),
            lowered: lowered.into_iter().collect(),
            reversed: reversed_texts.into_iter().collect(),
            ints: ints.into_iter().collect(),
            addrs: addrs.into_iter().collect(),
            fields: fields.into_iter().collect(),
        }
    }

    pub(super) fn insert(&mut self, id: WitnessId, w: &Witness) {
        for (f, v) in &w.values {
            self.fields.insert((*f, id));
            match v {
                Value::String(s) => {
                    self.texts.insert((*f, s.clone(), id));
                    self.lowered.insert((*f, s.to_lowercase(), id));
                    self.reversed.insert((*f, reversed(s), id));
                }
                Value::Int(i) => {
                    self.ints.insert((*f, *i, id));
                }
                Value::IpAddr(a) => {
                    self.addrs.insert((*f, *a, id));
                }
                Value::IpCidr(_) => {}
            }
        }
    }

    pub(super) fn remove(&mut self, id: WitnessId, w: &Witness) {
        for (f, v) in &w.values {
            self.fields.remove(&(*f, id));
            match v {
                Value::String(s) => {
                    self.texts.remove(&(*f, s.clone(), id));
                    self.lowered.remove(&(*f, s.to_lowercase(), id));
                    self.reversed.remove(&(*f, reversed(s), id));
                }
                Value::Int(i) => {
                    self.ints.remove(&(*f, *i, id));
                }
                Value::IpAddr(a) => {
                    self.addrs.remove(&(*f, *a, id));
                }
                Value::IpCidr(_) => {}
            }
        }
    }

    /// The witnesses whose value on `req`'s field may meet it (see the invariant).
    ///
    /// `None` as soon as there are more than `cap`: the caller keeps the smallest set.
    pub(super) fn admitted(&self, req: &Requirement, cap: usize) -> Option<Vec<WitnessId>> {
        let field = req.disc.field;
        let texts = if req.disc.lower {
            &self.lowered
        } else {
            &self.texts
        };
        let room = |out: &Vec<WitnessId>| cap.saturating_add(1).saturating_sub(out.len());
        let starting = |prefix: &str, out: &mut Vec<WitnessId>| {
            let n = room(out);
            out.extend(
                texts
                    .range((field, prefix.to_owned(), 0)..)
                    .take_while(|(f, s, _)| *f == field && s.starts_with(prefix))
                    .map(|(_, _, id)| *id)
                    .take(n),
            );
        };
        // Kinds without an order to search the witnesses' values by: every witness with a value
        // of the field. (An exhaustive match: a new kind of key must say how lint searches it.)
        let searchable = match req.disc.kind {
            KeyKind::Exact | KeyKind::Prefix | KeyKind::Path | KeyKind::Int | KeyKind::Cidr => true,
            // Reversed texts are kept as written, not lowered.
            KeyKind::Suffix => !req.disc.lower,
            KeyKind::Contains | KeyKind::Regex => false,
        };
        let mut out = Vec::new();
        if !searchable {
            out.extend(
                self.fields
                    .range((field, 0)..=(field, WitnessId::MAX))
                    .map(|(_, id)| *id)
                    .take(cap.saturating_add(1)),
            );
            return (out.len() <= cap).then_some(out);
        }
        for key in req.keys.iter() {
            // A key's form follows its kind (`Requirement`'s invariant), so each kind reads the
            // form it has.
            match (req.disc.kind, key) {
                (KeyKind::Exact, Key::Bytes(k)) => {
                    let Ok(k) = std::str::from_utf8(k) else {
                        continue;
                    };
                    let n = room(&out);
                    out.extend(
                        texts
                            .range((field, k.to_owned(), 0)..)
                            .take_while(|(f, s, _)| *f == field && s == k)
                            .map(|(_, _, id)| *id)
                            .take(n),
                    );
                }
                (KeyKind::Prefix, Key::Bytes(k)) => {
                    let Ok(k) = std::str::from_utf8(k) else {
                        continue;
                    };
                    starting(k, &mut out);
                }
                (KeyKind::Path, Key::Path(p)) => starting(&p.literal_start(), &mut out),
                (KeyKind::Suffix, Key::Bytes(k)) => {
                    let tail: Vec<u8> = k.iter().rev().copied().collect();
                    let n = room(&out);
                    out.extend(
                        self.reversed
                            .range((field, tail.clone(), 0)..)
                            .take_while(|(f, s, _)| *f == field && s.starts_with(&tail))
                            .map(|(_, _, id)| *id)
                            .take(n),
                    );
                }
                (KeyKind::Int, Key::Int(i)) => {
                    let n = room(&out);
                    out.extend(
                        self.ints
                            .range((field, i, 0)..)
                            .take_while(|(f, v, _)| *f == field && *v == i)
                            .map(|(_, _, id)| *id)
                            .take(n),
                    );
                }
                (KeyKind::Cidr, Key::Cidr(c)) => {
                    let (first, last) = (c.first_address(), c.last_address());
                    let n = room(&out);
                    out.extend(
                        self.addrs
                            .range((field, first, 0)..=(field, last, WitnessId::MAX))
                            .map(|(_, _, id)| *id)
                            .take(n),
                    );
                }
                // A key whose form is not its kind's: no requirement is derived that way.
                (
                    KeyKind::Exact
                    | KeyKind::Prefix
                    | KeyKind::Path
                    | KeyKind::Suffix
                    | KeyKind::Int
                    | KeyKind::Cidr
                    | KeyKind::Contains
                    | KeyKind::Regex,
                    Key::Bytes(_) | Key::Int(_) | Key::Cidr(_) | Key::Path(_),
                ) => {
                    debug_assert!(false, "a {:?} key of form {key:?}", req.disc.kind);
                    return None;
                }
            }
            if out.len() > cap {
                return None;
            }
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }
}

fn reversed(s: &str) -> Vec<u8> {
    s.bytes().rev().collect()
}
