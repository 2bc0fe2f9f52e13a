//! A route's way into and out of a router's structures: prepared (parsed, validated, resolved
//! and compiled) without changing the router, put in a slot and the index, taken out again,
//! and its regexes released with the last route using them.
//!
//! Invariant: everything that can fail happens in preparing; putting a prepared route in and
//! taking one out cannot fail, and run inside [`Router::changing`], so a panic part-way leaves
//! the router marked broken.

use uuid::Uuid;

use super::{fields, next_instance, Ids, Prepared, Programs, Router};
use crate::compile::program::Program;
use crate::compile::regex_cache::{PreparedRegexes, RegexSource};
use crate::compile::resolve::{resolve, Fields, Node};
use crate::error::Error;
use crate::index::{requirements, Order};
use crate::language::{parse_with_limits, Parsed};
use crate::schema::names::Holds;
use crate::schema::validate::validate;

impl Router {
    /// Parses, validates and resolves a route without changing the router; new regexes go to
    /// the regexes.
    pub(super) fn prepare(
        &self,
        id: Uuid,
        priority: u64,
        expression: &str,
        regexes: &mut dyn RegexSource,
    ) -> Result<Prepared, Error> {
        let mut p = self.prepare_unnumbered(id, priority, expression, regexes)?;
        p.instance = next_instance();
        Ok(p)
    }

    /// [`Router::prepare`], the route's version not yet numbered (0): the caller numbers it,
    /// or gives it the version of the route it copies.
    pub(super) fn prepare_unnumbered(
        &self,
        id: Uuid,
        priority: u64,
        expression: &str,
        regexes: &mut dyn RegexSource,
    ) -> Result<Prepared, Error> {
        let parsed = self.parse_route(expression)?;
        self.resolve_route(id, priority, expression, &parsed, regexes)
    }

    /// The first half of preparing a route: its text parsed and validated.
    pub(super) fn parse_route(&self, expression: &str) -> Result<Parsed, Error> {
        let parsed = parse_with_limits(expression, &self.limits)?;
        validate(expression, &parsed, &self.schema)?;
        Ok(parsed)
    }

    /// The second half: the parsed route resolved (registering the wildcard names it uses)
    /// and compiled, its version not yet numbered.
    pub(super) fn resolve_route(
        &self,
        id: Uuid,
        priority: u64,
        expression: &str,
        parsed: &Parsed,
        regexes: &mut dyn RegexSource,
    ) -> Result<Prepared, Error> {
        let mut holds = Holds::new(self.schema.clone());
        let node = resolve(
            expression,
            parsed,
            Fields::Acquire(&mut holds),
            &self.limits,
            regexes,
        )?;
        Ok(self.prepared(id, priority, expression, node, holds))
    }

    /// A resolved route compiled, its version not yet numbered.
    pub(super) fn prepared(
        &self,
        id: Uuid,
        priority: u64,
        expression: &str,
        node: Node,
        holds: Holds,
    ) -> Prepared {
        Prepared {
            id,
            priority,
            instance: 0,
            program: Program::compile(&node),
            reqs: None,
            source: expression.into(),
            node,
            _holds: holds,
        }
    }

    /// The tree of the route in `slot` built anew from its text (see the module invariants
    /// for why this cannot fail).
    pub(super) fn resolve_again(&self, slot: u32) -> Box<Node> {
        let text = self.catalog.text(slot as usize);
        let parsed = parse_with_limits(text, &self.limits)
            .expect("a route's text parsed with these limits when it was added");
        let node = resolve(
            text,
            &parsed,
            Fields::Peek(&self.schema),
            &self.limits,
            &mut PreparedRegexes::new(&self.regexes),
        )
        .expect("a route's text resolved against this schema when it was added");
        Box::new(node)
    }

    /// Puts a prepared route in a slot and in the index.
    pub(super) fn insert(&mut self, p: Prepared) {
        let fields = fields(&p.node);
        for f in &fields {
            let uses = self.field_use.entry(*f).or_insert(0);
            if *uses == 0 {
                // The router's own registration, held while any of its routes uses the name.
                self.schema.retain(*f);
            }
            *uses += 1;
        }
        crate::failpoint::hit();
        let order = Order::new(p.priority, p.id);
        let slot = match self.free.pop() {
            Some(s) => s,
            None => self.programs.push_slot(),
        };
        self.programs.set(slot, p.program);
        self.programs.set_order(slot, order);
        self.needs.insert(slot, &fields);
        let reqs = match p.reqs {
            Some(reqs) => reqs,
            None => requirements(&self.programs.code(slot)),
        };
        match &mut self.pending_index {
            Some(pending) => pending.push(((order, slot), reqs)),
            None => {
                let all = Programs(&self.programs);
                self.index.insert((order, slot), &reqs, &all);
                if let Some(flat) = &mut self.flat {
                    flat.inserted((order, slot), &reqs, &all);
                }
            }
        }
        // Into the id map before the slot is live (see `IdMap::insert`).
        let ids = Ids {
            catalog: &self.catalog,
            programs: &self.programs,
        };
        self.ids.insert(p.id, slot, &ids);
        self.catalog.set(slot, p.instance, &p.source);
        if let Some(view) = self.reference.get_mut() {
            view.insert(order, slot);
        }
    }

    /// Takes a route out of every structure and returns its tree (`tree`, if the caller
    /// resolved it already); its regexes are still cached (see `release`).
    pub(super) fn take(&mut self, id: Uuid, tree: Option<Box<Node>>) -> Option<Box<Node>> {
        let slot = self.slot_of(id)?;
        let order = self.programs.order(slot);
        let cached = self
            .reference
            .get_mut()
            .and_then(|view| view.remove(order, slot));
        let tree = match (tree, cached) {
            (Some(t), _) | (None, Some(t)) => t,
            (None, None) => self.resolve_again(slot),
        };
        let reqs = requirements(&self.programs.code(slot));
        let all = Programs(&self.programs);
        self.index.remove(slot, &reqs, &all);
        if let Some(flat) = &mut self.flat {
            flat.removed(slot, &reqs, &all);
        }
        let ids = Ids {
            catalog: &self.catalog,
            programs: &self.programs,
        };
        self.ids.remove(id, &ids);
        self.free.push(slot);
        self.catalog.clear(slot);
        self.programs.clear(slot);
        self.needs.remove(slot);
        for f in fields(&tree) {
            if let Some(n) = self.field_use.get_mut(&f) {
                *n -= 1;
                if *n == 0 {
                    self.field_use.remove(&f);
                    self.schema.release(f);
                }
            }
        }
        crate::failpoint::hit();
        Some(tree)
    }

    /// Drops a route taken out, and the regexes no other route uses.
    pub(super) fn release(&mut self, tree: Box<Node>) {
        let mut sources = Vec::new();
        tree.regex_sources(&mut sources);
        drop(tree);
        for s in &sources {
            self.regexes.release(s);
        }
    }
}
