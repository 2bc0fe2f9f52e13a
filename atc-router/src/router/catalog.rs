//! The catalog: what a sync compares, stored for a sync to read fast.

use uuid::Uuid;

/// Id, priority and expression text of every live slot, stored densely in slot order, so that
/// a sync of an unchanged list reads two sequential arrays instead of chasing one pointer per
/// route into the heap (at 100,000 routes those cache misses were most of its cost).
///
/// Invariant: `rows[s]` describes the route in slot `s` (`None` for a free slot) and its text is
/// `texts[start..start + len]`, byte for byte the route's source. Texts of removed routes stay in
/// `texts` as garbage until it outweighs the live text, then the arena is rewritten in slot
/// order.
#[derive(Debug, Default)]
pub(super) struct Catalog {
    pub(super) rows: Vec<Option<CatalogRow>>,
    pub(super) texts: String,
    pub(super) garbage: usize,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct CatalogRow {
    pub(super) id: Uuid,
    pub(super) priority: u64,
    pub(super) instance: u64,
    pub(super) start: usize,
    pub(super) len: usize,
}

impl Catalog {
    pub(super) fn set(&mut self, slot: u32, id: Uuid, priority: u64, instance: u64, text: &str) {
        let slot = slot as usize;
        if self.rows.len() <= slot {
            self.rows.resize(slot + 1, None);
        }
        if self.garbage > 4096 && self.garbage > self.texts.len() / 2 {
            self.compact();
        }
        let start = self.texts.len();
        self.texts.push_str(text);
        self.rows[slot] = Some(CatalogRow {
            id,
            priority,
            instance,
            start,
            len: text.len(),
        });
    }

    pub(super) fn clear(&mut self, slot: u32) {
        if let Some(row) = self.rows.get_mut(slot as usize).and_then(Option::take) {
            self.garbage += row.len;
        }
    }

    pub(super) fn compact(&mut self) {
        let mut texts = String::with_capacity(self.texts.len() - self.garbage);
        for row in self.rows.iter_mut().flatten() {
            let start = texts.len();
            texts.push_str(&self.texts[row.start..row.start + row.len]);
            row.start = start;
        }
        self.texts = texts;
        self.garbage = 0;
    }

    pub(super) fn text(&self, slot: usize) -> &str {
        self.rows[slot].map_or("", |r| &self.texts[r.start..r.start + r.len])
    }

    pub(super) fn id(&self, slot: usize) -> Option<Uuid> {
        self.row(slot).map(|r| r.id)
    }

    pub(super) fn row(&self, slot: usize) -> Option<CatalogRow> {
        self.rows.get(slot).copied().flatten()
    }

    /// Whether slot `slot` holds a route with this priority and expression text.
    pub(super) fn same(&self, slot: u32, priority: u64, text: &str) -> bool {
        self.rows[slot as usize].is_some_and(|r| {
            r.priority == priority
                && self.texts.as_bytes()[r.start..r.start + r.len] == *text.as_bytes()
        })
    }
}
