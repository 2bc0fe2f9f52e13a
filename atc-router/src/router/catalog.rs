//! The catalog: what a sync compares, stored for a sync to read fast and for a route change to
//! cost the same every time.

use std::sync::Arc;

use uuid::Uuid;

use super::slot_vec::SlotVec;

/// Bytes of text per chunk: a text never moves once written (a chunk is never grown past the
/// capacity it was made with), so no route change copies the texts of the others, where one
/// growing arena copied megabytes (milliseconds) every time it doubled.
const CHUNK: usize = 64 * 1024;

/// Version and expression text of every live slot, stored densely in slot order, so that a
/// sync of an unchanged list reads sequential arrays instead of chasing one pointer per route
/// into the heap (at 100,000 routes those cache misses were most of its cost). A route's id
/// and priority are its routing order, kept in its program's record (`program_arena.rs`),
/// which evaluation reads; a [`CatalogRow`] is the two read together.
///
/// Invariants: `slots[s]` describes the route in slot `s` (`len == FREE` for a free slot); slot
/// `s` owns the bytes its room names in one chunk, and a live slot's text is the first `len` of
/// them, byte for byte the route's source (the rest is padding). A slot keeps its room while
/// free, so the next route placed in it (a route changed in place is removed and added again
/// in the same slot) writes its text there when it fits. `written` counts the bytes of every
/// room made since the chunks were last rewritten and `live` the bytes of live texts; once the
/// difference (text of no route) outweighs the live text, the chunks are rewritten in slot order.
///
/// Chunks are shared, not copied, with a [`TextsCopy`] (a builder's copy of the routes): a
/// chunk shared is never written in place; a write to it copies that chunk first (64 KiB), and
/// an append goes to a new chunk.
#[derive(Debug, Default)]
pub(super) struct Catalog {
    slots: SlotVec<Slot, 10>,
    chunks: Vec<Arc<String>>,
    written: usize,
    live: usize,
}

/// What a route view and a sync read of a live slot: its id and priority (from its program's
/// record) and its version (from the catalog).
#[derive(Debug, Clone, Copy)]
pub(super) struct CatalogRow {
    pub(super) id: Uuid,
    pub(super) priority: u64,
    pub(super) instance: u64,
}

/// A slot's version, text length and room, in 24 bytes.
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// The route's version (`Route::instance`).
    instance: u64,
    /// Bytes of the live text, or [`FREE`].
    len: u32,
    room: Room,
}

/// The `len` of a free slot.
const FREE: u32 = u32::MAX;

/// Where a slot's text goes: `cap` bytes from `start` in chunk `chunk`.
#[derive(Debug, Clone, Copy, Default)]
struct Room {
    chunk: u32,
    start: u32,
    cap: u32,
}

impl Slot {
    const EMPTY: Slot = Slot {
        instance: 0,
        len: FREE,
        room: Room {
            chunk: 0,
            start: 0,
            cap: 0,
        },
    };

    fn live(&self) -> Option<u64> {
        (self.len != FREE).then_some(self.instance)
    }
}

impl Catalog {
    /// Slots, live or free.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Room for `n` more slots.
    pub(super) fn reserve(&mut self, n: usize) {
        self.slots.reserve(n);
    }

    /// The version of every slot's route in slot order (`None` for a free slot).
    pub(super) fn instances(&self) -> impl Iterator<Item = Option<u64>> + '_ {
        self.slots.iter().map(Slot::live)
    }

    pub(super) fn set(&mut self, slot: u32, instance: u64, text: &str) {
        let slot = slot as usize;
        if self.slots.len() <= slot {
            self.slots.grow_to(slot + 1, Slot::EMPTY);
        }
        // Callers clear a slot before setting it again; this keeps the counts right if not.
        self.clear(slot as u32);
        if self.garbage() > 4096 && self.garbage() > self.live {
            self.compact();
        }
        let room = self.slots[slot].room;
        if text.len() <= room.cap as usize {
            // Overwrite the room whole, so that both ends of each write fall between
            // characters: blanks first, then the text over them.
            // A chunk a copy still reads is copied first (`Arc::make_mut`).
            let chunk = Arc::make_mut(&mut self.chunks[room.chunk as usize]);
            let start = room.start as usize;
            let end = start + room.cap as usize;
            chunk.replace_range(start..end, &" ".repeat(end - start));
            chunk.replace_range(start..start + text.len(), text);
        } else {
            self.slots[slot].room = self.append(text);
        }
        self.live += text.len();
        let s = &mut self.slots[slot];
        s.instance = instance;
        // Texts are bounded far below 4 GiB (`Limits::max_expression_len`, 1 MiB by default).
        s.len = u32::try_from(text.len()).unwrap_or(FREE - 1);
    }

    /// Bytes of the chunks that are no live route's text.
    fn garbage(&self) -> usize {
        self.written - self.live
    }

    /// Writes `text` after the last text (in a new chunk when the last has no room), as the
    /// room of a slot.
    fn append(&mut self, text: &str) -> Room {
        // A shared chunk is full for this purpose: appending would copy it.
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| Arc::strong_count(c) == 1 && c.capacity() - c.len() >= text.len());
        if !fits {
            self.chunks
                .push(Arc::new(String::with_capacity(CHUNK.max(text.len()))));
        }
        let chunk = self.chunks.len() - 1;
        let c = Arc::make_mut(&mut self.chunks[chunk]);
        let start = c.len();
        c.push_str(text);
        self.written += text.len();
        Room {
            chunk: chunk as u32,
            start: start as u32,
            cap: text.len() as u32,
        }
    }

    pub(super) fn clear(&mut self, slot: u32) {
        if let Some(s) = self.slots.get_mut(slot as usize) {
            if s.len != FREE {
                self.live -= s.len as usize;
                s.len = FREE;
            }
        }
    }

    /// Rewrites the live texts in slot order into fresh chunks, each slot's room exactly its
    /// text; free slots lose their rooms.
    pub(super) fn compact(&mut self) {
        let old = std::mem::take(&mut self.chunks);
        self.written = 0;
        for slot in 0..self.slots.len() {
            let Slot { len, room, .. } = self.slots[slot];
            self.slots[slot].room = if len == FREE {
                Room::default()
            } else {
                let start = room.start as usize;
                self.append(&old[room.chunk as usize][start..start + len as usize])
            };
        }
    }

    /// Room for `bytes` more text: a fresh router built for a sync knows its size.
    pub(super) fn reserve_text(&mut self, bytes: usize) {
        if self.chunks.is_empty() && bytes > 0 {
            self.chunks
                .push(Arc::new(String::with_capacity(bytes.min(CHUNK))));
        }
    }

    pub(super) fn text(&self, slot: usize) -> &str {
        match self.slots.get(slot) {
            Some(&Slot { len, room, .. }) if len != FREE => {
                let start = room.start as usize;
                &self.chunks[room.chunk as usize][start..start + len as usize]
            }
            _ => "",
        }
    }

    /// The version of the route in `slot`, or `None` for a free slot.
    pub(super) fn instance(&self, slot: usize) -> Option<u64> {
        self.slots.get(slot).and_then(Slot::live)
    }

    pub(super) fn is_live(&self, slot: usize) -> bool {
        self.instance(slot).is_some()
    }

    /// The live texts, sharing the chunks: `(slot, chunk, start, len)` of each live slot, read
    /// with [`TextsCopy::text`]. O(slots), without copying a text.
    pub(super) fn share_texts(&self) -> TextsCopy {
        let mut rows = Vec::with_capacity(self.slots.len());
        for (slot, s) in self.slots.iter().enumerate() {
            if s.len != FREE {
                rows.push((slot as u32, s.room.chunk, s.room.start, s.len));
            }
        }
        TextsCopy {
            chunks: self.chunks.clone(),
            rows,
        }
    }

    /// Whether slot `slot` holds a route with this expression text.
    pub(super) fn same_text(&self, slot: u32, text: &str) -> bool {
        self.is_live(slot as usize) && self.text(slot as usize).as_bytes() == text.as_bytes()
    }
}

/// The live texts of a catalog at one moment, sharing its chunks ([`Catalog::share_texts`]):
/// another thread reads them while the catalog changes (a chunk the catalog writes to after
/// this was taken is copied first).
#[derive(Debug, Default)]
pub(super) struct TextsCopy {
    chunks: Vec<Arc<String>>,
    /// `(slot, chunk, start, len)` of each live slot, in slot order.
    rows: Vec<(u32, u32, u32, u32)>,
}

impl TextsCopy {
    /// The live slots, in slot order.
    pub(super) fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.rows.iter().map(|r| r.0)
    }

    /// The text of the `i`-th live slot.
    pub(super) fn text(&self, i: usize) -> &str {
        let (_, chunk, start, len) = self.rows[i];
        &self.chunks[chunk as usize][start as usize..(start + len) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(c: &Catalog) -> Vec<&str> {
        (0..c.len()).map(|s| c.text(s)).collect()
    }

    /// A copy shares the chunks and keeps reading what they held when it was taken, whatever
    /// the catalog writes afterwards (in place, appended, or compacted).
    #[test]
    fn a_shared_copy_keeps_its_texts_while_the_catalog_changes() {
        let mut c = Catalog::default();
        for s in 0..200u32 {
            c.set(s, 1, &format!("route number {s}"));
        }
        c.clear(7);
        let copy = c.share_texts();
        let slots: Vec<u32> = copy.slots().collect();
        assert_eq!(slots.len(), 199);
        assert!(!slots.contains(&7));
        c.set(3, 2, "changed in its room");
        c.set(250, 1, "appended after the copy");
        for s in 10..200u32 {
            c.clear(s);
        }
        c.compact();
        for (i, slot) in slots.iter().enumerate() {
            assert_eq!(copy.text(i), format!("route number {slot}"));
        }
        assert_eq!(c.text(3), "changed in its room");
        assert_eq!(c.text(250), "appended after the copy");
        assert_eq!(c.text(4), "route number 4");
    }

    #[test]
    fn a_slot_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 24);
    }

    #[test]
    fn a_slot_changed_in_place_keeps_its_room_and_every_other_text() {
        let mut c = Catalog::default();
        for s in 0..100u32 {
            c.set(s, 1, &format!("route number {s}"));
        }
        let chunks = c.chunks.len();
        for round in 0..10_000u32 {
            c.clear(50);
            // Shorter, equal and (once, in the first round) longer than the room.
            let text = match round % 3 {
                0 => format!("a longer text for route fifty, round {round}"),
                1 => "short".to_owned(),
                _ => "route number 50".to_owned(),
            };
            c.set(50, 1, &text);
            assert_eq!(c.text(50), text);
        }
        assert_eq!(
            c.chunks.len(),
            chunks,
            "no text appended after the room grew once"
        );
        let t = texts(&c);
        for s in (0..100).filter(|&s| s != 50) {
            assert_eq!(t[s], format!("route number {s}"));
        }
        assert!(c.same_text(49, "route number 49"));
        assert!(!c.same_text(49, "route number 48"));
        c.clear(49);
        assert!(!c.same_text(49, ""));
    }

    #[test]
    fn garbage_is_compacted_away_and_multibyte_texts_survive() {
        let mut c = Catalog::default();
        for s in 0..64u32 {
            c.set(s, 1, &format!("é{}ü", "x".repeat(s as usize)));
        }
        // Every slot freed and refilled with longer texts: rooms are outgrown, garbage piles
        // up and is compacted.
        for round in 1..20usize {
            for s in 0..64u32 {
                c.clear(s);
                let text = format!("ñ{}{}", "y".repeat(s as usize + round), "€");
                c.set(s, 1, &text);
                assert_eq!(c.text(s as usize), text);
            }
            assert!(c.garbage() <= c.live.max(4096) + 4096, "round {round}");
        }
        for s in 0..64usize {
            assert_eq!(c.text(s), format!("ñ{}€", "y".repeat(s + 19)));
        }
        c.clear(3);
        assert_eq!(c.text(3), "");
        c.compact();
        assert_eq!(c.text(4), format!("ñ{}€", "y".repeat(23)));
    }

    #[test]
    fn a_text_longer_than_a_chunk_gets_a_chunk_of_its_own() {
        let mut c = Catalog::default();
        let long = "z".repeat(CHUNK + 10);
        c.set(0, 1, "short");
        c.set(1, 1, &long);
        c.set(2, 1, "after");
        assert_eq!(texts(&c), ["short", long.as_str(), "after"]);
    }
}
