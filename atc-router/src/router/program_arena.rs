//! The programs of a router's routes, by slot, in one arena of instructions and one of text.
//!
//! Why one arena: a route's program is a few instructions (a host and a prefix are two, 64
//! bytes), and a fixed room per slot big enough for the common larger routes was three cache
//! lines for every route, most of them `End` padding: a third of a host + prefix route's memory.
//! Here each program takes the instructions it has, found from its slot through a room record.
//!
//! The record also holds the route's place in routing order ([`Order`]): evaluating a
//! candidate reads the record anyway, so the order a request's candidates are sorted by and
//! the winner's id and priority come with it, and the index's leaves need hold only slots.
//!
//! Invariants:
//! - `rooms[s]` names the instructions `code.get(room.code, room.code_len)` and the bytes
//!   `text.get(room.text, room.text_len)` of slot `s`; no two rooms overlap.
//! - A live slot's program is the start of its room's instructions, the rest `Instr::End`, and
//!   its text the start of its room's text; a free slot's room holds only `End` (the empty
//!   program, true) and keeps its place, so that the next program placed in the slot reuses it
//!   when it fits (a route changed in place is removed and placed again in its slot).
//! - Every room of two or more instructions starts on a cache line (each chunk of
//!   instructions starts with the lead that puts its first room on one, and such rooms are
//!   whole lines), so that the first two instructions of a program, which evaluation reads
//!   first, are one line. A program of one instruction (a route of one predicate: a path
//!   prefix, a header) takes a room of one, half a line: a new line is taken for it and its
//!   other half filed as a free room of one, so the arena's end stays on a line.
//! - `live` counts the instructions of live slots' rooms, `spare` those of free slots' rooms and
//!   of rooms a slot outgrew. An outgrown room of fewer than [`FREE_SIZES`] instructions is
//!   filed in `free` by size and taken by the next program that needs that size, so that churn
//!   reuses rooms rather than growing the arena. Once spare outweighs live, the arena is
//!   rewritten in slot order, with each live program's room exactly its length (rounded up to a
//!   line, but for a room of one) and free slots without one: the arena stays within about
//!   twice its live programs, and a rewrite
//!   costs a move of the live instructions (4.5 MB at 50,000 host + prefix routes), amortized
//!   over as many outgrowing changes as there were live instructions.
//! - Growing never moves a program: instructions and text are [`Chunked`], so a new room that
//!   does not fit goes into a new chunk, and at most a chunk (64 KB) is spare beyond the rooms.

use super::chunked::Chunked;
use super::slot_vec::SlotVec;
use crate::compile::program::{Code, Instr, Program};
use crate::index::Order;

/// Instructions per cache line.
const LINE: usize = 2;
/// Spare instructions tolerated before a rewrite is considered at all: small tables never
/// rewrite for a few changes. (Small in unit tests, so that their churn rewrites.)
const SPARE_MIN: usize = if cfg!(test) { 64 } else { 4096 };
/// Rooms of fewer instructions than this are kept for reuse when their slot outgrows them (a
/// route of up to 31 predicates).
const FREE_SIZES: usize = 32;
/// Instructions per chunk: `1 << 11`, 64 KB.
const CODE_SHIFT: u32 = 11;
/// Text bytes per chunk: `1 << 14`, 16 KB.
const TEXT_SHIFT: u32 = 14;

#[derive(Debug, Default)]
pub(super) struct ProgramArena {
    code: Chunked<Instr, CODE_SHIFT>,
    text: Chunked<u8, TEXT_SHIFT>,
    rooms: SlotVec<Room, 10>,
    /// Empty rooms no slot holds, by size in instructions: where the next program of that size
    /// goes.
    free: Vec<Vec<u32>>,
    live: usize,
    spare: usize,
}

/// Where a slot's program lives (see the module docs), and its route's routing order.
#[derive(Debug, Clone, Copy, Default)]
struct Room {
    code: u32,
    code_len: u32,
    text: u32,
    text_len: u32,
    order: Order,
}

/// The room a program of `len` instructions takes: whole lines, but for a program of one
/// instruction, which a half line holds whole.
fn room_len(len: usize) -> usize {
    if len <= 1 {
        len
    } else {
        len.div_ceil(LINE) * LINE
    }
}

/// Instructions to skip at the start of a chunk so that the next one starts a cache line (its
/// allocation is aligned to an instruction, 32 bytes, so this is 0 or 1).
fn lead_of(v: &[Instr]) -> usize {
    let misaligned = (v.as_ptr() as usize) % (LINE * std::mem::size_of::<Instr>());
    usize::from(misaligned != 0)
}

impl ProgramArena {
    /// A new slot holding the empty program; returns its number.
    pub(super) fn push_slot(&mut self) -> u32 {
        self.rooms.push(Room::default());
        (self.rooms.len() - 1) as u32
    }

    /// Room for `slots` more slots (a router built for a sync knows its size).
    pub(super) fn reserve(&mut self, slots: usize) {
        self.rooms.reserve(slots);
    }

    /// The program in `slot` (the empty program for a free slot).
    #[inline]
    pub(super) fn code(&self, slot: u32) -> Code<'_> {
        let r = self.rooms[slot as usize];
        let code = self.code.get(r.code, r.code_len as usize);
        let text = self.text.get(r.text, r.text_len as usize);
        // A slot that never held a program has no room: no runs, the empty program (true).
        Code::new(code, text)
    }

    /// The routing order of the route in live `slot` (what [`Self::set_order`] gave it).
    #[inline]
    pub(super) fn order(&self, slot: u32) -> Order {
        self.rooms[slot as usize].order
    }

    /// Records the routing order of the route placed in `slot`.
    pub(super) fn set_order(&mut self, slot: u32, order: Order) {
        self.rooms[slot as usize].order = order;
    }

    /// Places `program` in `slot`, which must be free (a new slot or one [`Self::clear`]ed).
    pub(super) fn set(&mut self, slot: u32, program: Program) {
        let (code, text) = program.into_parts();
        let s = slot as usize;
        let room = self.rooms[s];
        if code.len() <= room.code_len as usize {
            self.spare -= room.code_len as usize;
            self.live += room.code_len as usize;
        } else {
            // Outgrown (or no room yet): the old room goes to the free rooms of its size.
            self.release(room.code, room.code_len as usize);
            self.rooms[s].code_len = 0;
            let len = room_len(code.len());
            let at = self.take_room(len);
            self.rooms[s].code = at;
            self.rooms[s].code_len = len as u32;
        }
        let r = self.rooms[s];
        // The rest of the room is `End` already (a free room holds only `End`).
        let room = self.code.get_mut(r.code, r.code_len as usize);
        for (place, instr) in room.iter_mut().zip(code.into_vec()) {
            *place = instr;
        }
        if text.len() <= r.text_len as usize {
            self.text.get_mut(r.text, text.len()).copy_from_slice(&text);
        } else {
            // The old text stays behind until the next rewrite.
            self.rooms[s].text = self
                .text
                .push(text.len(), |_| 0, || 0, text.iter().copied());
            self.rooms[s].text_len = text.len() as u32;
        }
    }

    /// A room of `len` instructions, all `End`: a free one of that size, or new at the end.
    fn take_room(&mut self, len: usize) -> u32 {
        if let Some(at) = self.free.get_mut(len).and_then(Vec::pop) {
            self.spare -= len;
            self.live += len;
            return at;
        }
        self.live += len;
        if len == 1 {
            return self.half_line();
        }
        self.code
            .push(len, lead_of, || Instr::End, std::iter::empty())
    }

    /// The first half of a new line at the end, as a room of one; the other half is filed as a
    /// free room of one (counted spare).
    fn half_line(&mut self) -> u32 {
        let at = self
            .code
            .push(LINE, lead_of, || Instr::End, std::iter::empty());
        // A block lies within one chunk, so the next position is the line's other half.
        self.spare += 1;
        self.file(at + 1, 1);
        at
    }

    /// Files an empty room (counted spare) for the next program of its size; a room larger
    /// than any size kept stays spare until the next rewrite.
    fn release(&mut self, at: u32, len: usize) {
        if len == 0 || len >= FREE_SIZES {
            return;
        }
        self.file(at, len);
    }

    fn file(&mut self, at: u32, len: usize) {
        if self.free.len() <= len {
            self.free.resize_with(len + 1, Vec::new);
        }
        self.free[len].push(at);
    }

    /// Empties `slot`'s room (its program's regexes and sets are released now); the room stays
    /// for the slot's next program.
    pub(super) fn clear(&mut self, slot: u32) {
        let r = self.rooms[slot as usize];
        let room = self.code.get_mut(r.code, r.code_len as usize);
        if room.first().is_none_or(|i| matches!(i, Instr::End)) {
            return; // free already: a live program is never empty (it has a predicate)
        }
        room.fill_with(|| Instr::End);
        self.live -= room.len();
        self.spare += room.len();
        if self.spare > SPARE_MIN && self.spare > self.live {
            self.rewrite();
        }
    }

    /// Rewrites the arena in slot order into new chunks: live programs keep rooms of their
    /// length, free slots lose theirs, texts left behind are dropped.
    fn rewrite(&mut self) {
        let mut old = std::mem::take(&mut self.code);
        let old_text = std::mem::take(&mut self.text);
        // The free rooms were the old arena's; halves of the new one's lines are filed below.
        self.free.iter_mut().for_each(Vec::clear);
        let mut live = 0;
        // The other half of the last line a room of one was given, until the next takes it.
        let mut half: Option<u32> = None;
        for s in 0..self.rooms.len() {
            let room = &mut self.rooms[s];
            let program = old.get_mut(room.code, room.code_len as usize);
            if program.first().is_none_or(|i| matches!(i, Instr::End)) {
                *room = Room::default();
                continue;
            }
            // Trailing `End`s are padding; a room keeps the lines its program fills.
            let len = program
                .iter()
                .rposition(|i| !matches!(i, Instr::End))
                .map_or(0, |last| last + 1);
            let code_len = room_len(len);
            let mut moved = program[..len]
                .iter_mut()
                .map(|i| std::mem::replace(i, Instr::End));
            let code = if code_len == 1 {
                let at = match half.take() {
                    Some(at) => at,
                    None => {
                        let at = self
                            .code
                            .push(LINE, lead_of, || Instr::End, std::iter::empty());
                        half = Some(at + 1);
                        at
                    }
                };
                self.code.get_mut(at, 1)[0] = moved.next().expect("a program of one");
                at
            } else {
                self.code.push(code_len, lead_of, || Instr::End, moved)
            };
            let bytes = old_text.get(room.text, room.text_len as usize);
            let text = self
                .text
                .push(bytes.len(), |_| 0, || 0, bytes.iter().copied());
            *room = Room {
                code,
                code_len: code_len as u32,
                text,
                text_len: room.text_len,
                order: room.order,
            };
            live += code_len;
        }
        self.live = live;
        self.spare = 0;
        if let Some(at) = half {
            self.spare = 1;
            self.file(at, 1);
        }
    }

    /// Instructions held for live programs and kept spare (for tests of the bound).
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        (self.live, self.spare)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::program::test_program;

    fn text_of(a: &ProgramArena, slot: u32) -> String {
        format!("{:?}", a.code(slot).code())
    }

    #[test]
    fn every_program_starts_on_a_cache_line() {
        let mut a = ProgramArena::default();
        for i in 0..100 {
            let slot = a.push_slot();
            let extra = "|| http.path ^= \"/x\" ".repeat(i % 4);
            a.set(
                slot,
                test_program(&format!(
                    r#"http.host == "h{i}" && (http.path ^= "/p" {extra})"#
                )),
            );
        }
        for slot in 0..100 {
            let code = a.code(slot);
            assert_eq!(code.code().as_ptr() as usize % 64, 0, "slot {slot}");
            // The heads of both runs (host, then the path group) are on the first line.
            assert!(code.runs().all(|i| i < LINE), "slot {slot}");
        }
    }

    #[test]
    fn a_room_is_reused_by_a_program_that_fits_and_left_by_one_that_does_not() {
        let mut a = ProgramArena::default();
        let s = a.push_slot();
        a.set(s, test_program(r#"http.host == "a" && http.path ^= "/a""#));
        let at = a.code(s).code().as_ptr();
        a.clear(s);
        assert_eq!(a.counts(), (0, 2));
        assert!(
            a.code(s).code().iter().all(|i| matches!(i, Instr::End)),
            "a free slot holds the empty program"
        );
        a.set(s, test_program(r#"http.path == "/b""#));
        assert_eq!(a.code(s).code().as_ptr(), at, "fits: same room");
        assert_eq!(a.counts(), (2, 0));
        assert!(
            text_of(&a, s).contains("End"),
            "the rest of the room is End"
        );
        a.clear(s);
        a.set(
            s,
            test_program(r#"http.host == "a" && http.path ^= "/a" && http.path != "/z""#),
        );
        assert_ne!(a.code(s).code().as_ptr(), at, "outgrown: a new room");
        assert_eq!(a.counts(), (4, 2));
    }

    #[test]
    fn an_outgrown_room_goes_to_the_next_program_of_its_size() {
        let mut a = ProgramArena::default();
        let (x, y) = (a.push_slot(), a.push_slot());
        a.set(x, test_program(r#"http.host == "x" && http.path ^= "/x""#));
        a.set(y, test_program(r#"http.host == "y""#));
        let old = a.code(x).code().as_ptr();
        a.clear(x);
        a.set(
            x,
            test_program(r#"http.host == "x" && http.path ^= "/x" && http.path != "/z""#),
        );
        let end = a.code.len();
        let z = a.push_slot();
        a.set(z, test_program(r#"http.host == "z" && http.path ^= "/z""#));
        assert_eq!(a.code(z).code().as_ptr(), old, "x's first room, one line");
        assert_eq!(a.code.len(), end, "the arena did not grow");
        // y's program of one holds half a line, the other half spare.
        assert_eq!(a.counts(), (2 + 1 + 4, 1));
        let code = a.code(z);
        let Instr::Pred(host) = &code.code()[0] else {
            panic!("{:?}", code.code());
        };
        assert_eq!(code.bytes(&host.lit), Some(&b"z"[..]));
    }

    #[test]
    fn programs_of_one_instruction_share_a_line_and_the_rest_start_one() {
        let mut a = ProgramArena::default();
        let one = |i: usize| test_program(&format!(r#"http.path ^= "/p{i}""#));
        let two = |i: usize| test_program(&format!(r#"http.host == "h{i}" && http.path ^= "/p""#));
        let slots: Vec<u32> = (0..6).map(|_| a.push_slot()).collect();
        a.set(slots[0], one(0));
        a.set(slots[1], two(1));
        a.set(slots[2], one(2));
        a.set(slots[3], one(3));
        let at = |a: &ProgramArena, s: u32| a.code(s).code().as_ptr() as usize;
        // The second program of one takes the half line the first left; the two-instruction
        // program, the line after it.
        assert_eq!(at(&a, slots[0]) % 64, 0);
        assert_eq!(at(&a, slots[1]) % 64, 0);
        assert_eq!(at(&a, slots[2]), at(&a, slots[0]) + 32);
        assert_eq!(at(&a, slots[3]) % 64, 0);
        assert_eq!(a.code(slots[0]).code().len(), 1);
        assert_eq!(a.counts(), (1 + 2 + 1 + 1, 1));
        // A freed room of one goes to the next program of one.
        a.clear(slots[2]);
        a.set(slots[2], two(2));
        a.set(slots[4], one(4));
        assert_eq!(at(&a, slots[4]), at(&a, slots[0]) + 32);
        assert_eq!(a.counts(), (1 + 2 + 2 + 1 + 1, 1));
        for (s, want) in [(0, "/p0"), (3, "/p3"), (4, "/p4")] {
            let code = a.code(slots[s]);
            let Instr::Pred(p) = &code.code()[0] else {
                panic!("{:?}", code.code());
            };
            assert_eq!(code.bytes(&p.lit), Some(want.as_bytes()));
        }
    }

    /// Instructions up to the end of the last run, as text: what a program means.
    fn meaning(code: Code<'_>) -> String {
        let len = code.runs().last().map_or(0, |i| code.end(i));
        let strings: Vec<_> = code.code()[..len]
            .iter()
            .map(|i| match i {
                Instr::Pred(p) => format!("{:?}", code.bytes(&p.lit)),
                other => format!("{other:?}"),
            })
            .collect();
        strings.join(" ")
    }

    proptest::proptest! {
        /// Any sequence of placements and clears leaves every slot holding what was placed
        /// last (or the empty program), each on a cache line, within the spare bound.
        #[test]
        fn churn_keeps_every_program(
            ops in proptest::collection::vec((0u32..40, 0usize..7, proptest::bool::ANY), 1..600)
        ) {
            let mut a = ProgramArena::default();
            let mut want: Vec<Option<String>> = Vec::new();
            for (slot, size, place) in ops {
                while want.len() <= slot as usize {
                    a.push_slot();
                    want.push(None);
                }
                if want[slot as usize].is_some() {
                    a.clear(slot);
                    want[slot as usize] = None;
                }
                if place {
                    // `size + 1` prefixes, long ones into the text; for the largest size, a
                    // program of one instruction (one prefix alone).
                    let long = "p".repeat(size * 5);
                    let paths: Vec<String> = (0..=size)
                        .map(|i| format!(r#"http.path ^= "/{slot}-{i}-{long}""#))
                        .collect();
                    let p = if size == 6 {
                        test_program(&paths[0])
                    } else {
                        test_program(&format!(
                            r#"http.host == "h{slot}" && ({})"#,
                            paths.join(" || ")
                        ))
                    };
                    want[slot as usize] = Some(meaning(p.view()));
                    a.set(slot, p);
                }
                let (live, spare) = a.counts();
                proptest::prop_assert!(spare <= live.max(SPARE_MIN) + 64);
            }
            for (slot, w) in want.iter().enumerate() {
                let code = a.code(slot as u32);
                match w {
                    Some(w) => {
                        // A program of two or more instructions starts a line; one of one is
                        // within a line (as every instruction is).
                        let one = code.runs().count() == 1 && code.end(0) == 1;
                        let align = if one { 32 } else { 64 };
                        proptest::prop_assert_eq!(code.code().as_ptr() as usize % align, 0);
                        proptest::prop_assert_eq!(&meaning(code), w);
                    }
                    None => proptest::prop_assert!(
                        code.code().iter().all(|i| matches!(i, Instr::End))
                    ),
                }
            }
        }
    }

    #[test]
    fn long_literals_keep_their_text_through_rewrites() {
        let mut a = ProgramArena::default();
        let long = |i: usize| format!("{i}-a-host-name-longer-than-an-instruction.example");
        let n = 3000;
        for i in 0..n {
            let s = a.push_slot();
            a.set(s, test_program(&format!(r#"http.host == "{}""#, long(i))));
        }
        // Churn: every other route removed and placed again, larger, until rewrites happened.
        for round in 0..4 {
            for i in (round % 2..n).step_by(2) {
                a.clear(i as u32);
                a.set(
                    i as u32,
                    test_program(&format!(
                        r#"http.host == "{}" && http.path ^= "/{round}" && http.path != "/z""#,
                        long(i)
                    )),
                );
            }
            let (live, spare) = a.counts();
            assert!(spare <= live.max(SPARE_MIN), "{live} {spare}");
        }
        for i in 0..n {
            let code = a.code(i as u32);
            let crate::compile::program::Instr::Pred(p) = &code.code()[0] else {
                panic!("slot {i}: {:?}", code.code());
            };
            assert_eq!(code.bytes(&p.lit), Some(long(i).as_bytes()));
            assert_eq!(code.code().as_ptr() as usize % 64, 0);
        }
    }
}
