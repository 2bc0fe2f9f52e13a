//! Programs in image form: every route's program written as fixed-size instruction records in
//! one word array, literals in one byte arena, sets and regex sources beside them; read in
//! place by [`ImageCode`], which the evaluator runs as it runs an in-process program (see
//! `code_view.rs`).
//!
//! Layout of an instruction, four words:
//! - word 0: kind (bits 0-2: end, `&&`, `||`, `!`, predicate), bit 3 last run, bit 4 `lower()`,
//!   bit 5 `any()`, bits 8-15 the operator (its place in [`Op::ALL`]), bits 16-23 the literal
//!   kind;
//! - word 1: a group's end (an instruction number within the program), or a predicate's field
//!   (its number in the image's field table, which the reader maps to its own schema's ids);
//! - words 2-3: the literal: a string's offset and length in the arena; a regex's number; an
//!   integer's low and high words; an address's or network's offset in the arena (a family
//!   byte, 4 or 6, then 16 address bytes, then for a network its prefix length); a set's
//!   offset in the set words and its element count (strings as offset and length pairs in
//!   byte order, integers as low and high words ascending, networks as arena offsets).
//!
//! Regexes are written as their source text and compiled in the process that reads the image
//! ([`RegexSlots`]), by the first request that evaluates each unless another image router of
//! the process holds it already: regex-automata's capture engines have no serialized form.
//!
//! Invariant: [`check`] runs over every program when an image is opened, so the evaluator's
//! walks over an image program always move forward inside it and nest no deeper than the
//! parser allows; literal reads stay bounds-checked and a literal that cannot be read makes
//! its predicate false.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use crate::compile::code_view::{CodeView, LitRef, PredRef, SetRef, Shape, Step};
use crate::compile::image_set::{read_addr, read_cidr, ImageSet, L_SET_INT, L_SET_NET, L_SET_STR};
use crate::compile::program::{Code, Instr, Lit, Set};
use crate::compile::regex::CompiledRegex;
use crate::compile::regex_shelf;
use crate::image::Words;
use crate::language::Op;
use crate::schema::{FieldId, FieldMask};

/// Words per instruction.
pub(crate) const INSTR_WORDS: usize = 4;

const K_END: u32 = 0;
const K_AND: u32 = 1;
const K_OR: u32 = 2;
const K_NOT: u32 = 3;
const K_PRED: u32 = 4;

const LAST_RUN: u32 = 1 << 3;
const LOWER: u32 = 1 << 4;
const ANY: u32 = 1 << 5;

const L_NONE: u32 = 0;
const L_STR: u32 = 1;
const L_REGEX: u32 = 2;
const L_INT: u32 = 3;
const L_ADDR: u32 = 4;
const L_CIDR: u32 = 5;

/// Programs being written; [`ProgramWriter::program`] per route, then the sections.
#[derive(Debug, Default)]
pub(crate) struct ProgramWriter {
    pub(crate) code: Vec<u32>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) sets: Vec<u32>,
    /// Per regex: offset and length of its source in `bytes`.
    pub(crate) regexes: Vec<u32>,
    regex_numbers: rustc_hash::FxHashMap<Box<str>, u32>,
}

fn word(n: usize) -> Option<u32> {
    u32::try_from(n).ok()
}

impl ProgramWriter {
    /// Appends `p`; returns its first instruction's number and its length in instructions.
    /// `field` numbers a field in the image's field table. `None` when the image outgrows
    /// 32-bit offsets.
    pub(crate) fn program(
        &mut self,
        code: Code<'_>,
        field: &mut dyn FnMut(FieldId) -> u32,
    ) -> Option<(u32, u32)> {
        let len = code.runs().last().map_or(0, |i| code.end(i));
        let start = word(self.code.len() / INSTR_WORDS)?;
        for instr in &code.code()[..len] {
            let last = if instr.is_last_run() { LAST_RUN } else { 0 };
            let rec = match instr {
                Instr::And { end, .. } => [K_AND | last, *end, 0, 0],
                Instr::Or { end, .. } => [K_OR | last, *end, 0, 0],
                Instr::Not { end, .. } => [K_NOT | last, *end, 0, 0],
                Instr::End => [K_END | LAST_RUN, 0, 0, 0],
                Instr::Pred(pred) => {
                    let op = Op::ALL.iter().position(|o| *o == pred.op)? as u32;
                    let (kind, a, b) = self.literal(&code, &pred.lit)?;
                    let flags =
                        last | if pred.lower { LOWER } else { 0 } | if pred.any { ANY } else { 0 };
                    [
                        K_PRED | flags | op << 8 | kind << 16,
                        field(pred.field),
                        a,
                        b,
                    ]
                }
            };
            self.code.extend(rec);
        }
        Some((start, word(len)?))
    }

    fn text(&mut self, s: &[u8]) -> Option<(u32, u32)> {
        let at = word(self.bytes.len())?;
        self.bytes.extend_from_slice(s);
        Some((at, word(s.len())?))
    }

    fn addr(&mut self, a: &IpAddr, prefix: Option<u8>) -> Option<u32> {
        let at = word(self.bytes.len())?;
        match a {
            IpAddr::V4(a) => {
                self.bytes.push(4);
                self.bytes.extend(a.octets());
                self.bytes.extend([0; 12]);
            }
            IpAddr::V6(a) => {
                self.bytes.push(6);
                self.bytes.extend(a.octets());
            }
        }
        self.bytes.extend(prefix);
        Some(at)
    }

    fn literal(
        &mut self,
        code: &crate::compile::program::Code<'_>,
        lit: &Lit,
    ) -> Option<(u32, u32, u32)> {
        Some(match lit {
            Lit::Inline { .. } | Lit::Str { .. } => {
                let (at, len) = self.text(code.bytes(lit)?)?;
                (L_STR, at, len)
            }
            Lit::Regex(re) => {
                let source = re.as_str();
                let n = match self.regex_numbers.get(source) {
                    Some(n) => *n,
                    None => {
                        let n = word(self.regexes.len() / 2)?;
                        let (at, len) = self.text(source.as_bytes())?;
                        self.regexes.extend([at, len]);
                        self.regex_numbers.insert(source.into(), n);
                        n
                    }
                };
                (L_REGEX, n, 0)
            }
            Lit::Int(i) => (L_INT, *i as u64 as u32, ((*i as u64) >> 32) as u32),
            Lit::IpAddr(a) => (L_ADDR, self.addr(a, None)?, 0),
            Lit::IpCidr(c) => (
                L_CIDR,
                self.addr(&c.first_address(), Some(c.network_length()))?,
                0,
            ),
            Lit::Set(set) => {
                let at = word(self.sets.len())?;
                let (kind, count) = match &**set {
                    Set::Str(v) => {
                        for s in v.iter() {
                            let (o, l) = self.text(s.as_bytes())?;
                            self.sets.extend([o, l]);
                        }
                        (L_SET_STR, v.len())
                    }
                    Set::Int(v) => {
                        for i in v.iter() {
                            self.sets
                                .extend([*i as u64 as u32, ((*i as u64) >> 32) as u32]);
                        }
                        (L_SET_INT, v.len())
                    }
                    Set::Net(v) => {
                        for c in v.iter() {
                            let o = self.addr(&c.first_address(), Some(c.network_length()))?;
                            self.sets.push(o);
                        }
                        (L_SET_NET, v.len())
                    }
                };
                (kind, at, word(count)?)
            }
        })
    }
}

/// An image's regexes, compiled in this process: each the first time a request needs it, or
/// all at once by [`RegexSlots::compile_all`]; [`RegexSlots::reuse_all`] (what opening an
/// image on a thread does) takes those another image router of the process holds. Every
/// compile goes through the process's shelf (`regex_shelf.rs`), so a regex another image
/// router holds is taken, not compiled again.
#[derive(Debug)]
pub(crate) struct RegexSlots {
    size_limit: usize,
    compiled: Box<[OnceLock<Option<Arc<CompiledRegex>>>]>,
}

impl RegexSlots {
    pub(crate) fn new(count: usize, size_limit: usize) -> RegexSlots {
        RegexSlots {
            size_limit,
            compiled: (0..count).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Regex `n` of the image whose regex table is `sources` (over `bytes`); `None` when it
    /// cannot be read or compiled (the builder compiled it under the same limits, so only a
    /// corrupt image gets here).
    #[inline]
    fn get<'a>(&'a self, n: u32, sources: Words<'_>, bytes: &[u8]) -> Option<&'a CompiledRegex> {
        let slot = self.compiled.get(n as usize)?;
        match slot.get() {
            Some(compiled) => compiled.as_deref(),
            None => self.compile(slot, n, sources, bytes),
        }
    }

    /// Regex `n`, compiled (or taken from the shelf) if it is not yet (once, whichever thread
    /// gets there).
    #[cold]
    fn compile<'a>(
        &self,
        slot: &'a OnceLock<Option<Arc<CompiledRegex>>>,
        n: u32,
        sources: Words<'_>,
        bytes: &[u8],
    ) -> Option<&'a CompiledRegex> {
        slot.get_or_init(|| {
            regex_shelf::get_or_compile(source(n, sources, bytes)?, self.size_limit)
        })
        .as_deref()
    }

    /// Takes, for every regex not compiled yet, the compiled regex another image router of
    /// this process holds for its source; compiles nothing. Returns how many are compiled now.
    pub(crate) fn reuse_all(&self, sources: Words<'_>, bytes: &[u8]) -> usize {
        for (n, slot) in self.compiled.iter().enumerate() {
            if slot.get().is_none() {
                let found = source(n as u32, sources, bytes)
                    .and_then(|s| regex_shelf::lookup(s, self.size_limit));
                if let Some(found) = found {
                    let _ = slot.set(Some(found));
                }
            }
        }
        self.compiled()
    }

    /// Compiles every regex not compiled yet; returns how many are compiled now.
    pub(crate) fn compile_all(&self, sources: Words<'_>, bytes: &[u8]) -> usize {
        for (n, slot) in self.compiled.iter().enumerate() {
            if slot.get().is_none() {
                let _ = self.compile(slot, n as u32, sources, bytes);
            }
        }
        self.compiled()
    }

    /// How many have been compiled here (a source that did not compile is not counted).
    pub(crate) fn compiled(&self) -> usize {
        self.compiled
            .iter()
            .filter(|s| s.get().is_some_and(Option::is_some))
            .count()
    }

    /// The compiled regexes, for tests that check which are shared.
    #[cfg(test)]
    pub(crate) fn all_compiled(&self) -> Vec<Arc<CompiledRegex>> {
        self.compiled
            .iter()
            .filter_map(|s| s.get()?.clone())
            .collect()
    }
}

/// The source text of regex `n` of the image whose regex table is `sources` (offset and length
/// pairs over `bytes`); `None` when it is outside the bytes or not UTF-8.
fn source<'b>(n: u32, sources: Words<'_>, bytes: &'b [u8]) -> Option<&'b str> {
    let i = n as usize * 2;
    let (at, len) = (sources.get(i)? as usize, sources.get(i + 1)? as usize);
    std::str::from_utf8(bytes.get(at..at.checked_add(len)?)?).ok()
}

/// What every program of one image shares: the arenas, the regexes, the field map.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProgramArenas<'a> {
    pub(crate) code: Words<'a>,
    pub(crate) bytes: &'a [u8],
    pub(crate) sets: Words<'a>,
    pub(crate) regex_sources: Words<'a>,
    pub(crate) regexes: &'a RegexSlots,
    /// The image's field numbers to this process's ids.
    pub(crate) fields: &'a [FieldId],
}

/// One program read in place from an image.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImageCode<'a> {
    code: Words<'a>,
    arenas: ProgramArenas<'a>,
}

impl<'a> ProgramArenas<'a> {
    /// The program of `len` instructions from instruction `start`; `None` when it is not inside.
    pub(crate) fn program(&self, start: u32, len: u32) -> Option<ImageCode<'a>> {
        let start = start as usize * INSTR_WORDS;
        let end = start.checked_add(len as usize * INSTR_WORDS)?;
        Some(ImageCode {
            code: self.code.slice(start..end)?,
            arenas: *self,
        })
    }
}

/// Why an image program is refused.
pub(crate) type CheckError = &'static str;

/// Checks that `code` (one program) is well formed: groups end after themselves and inside
/// their parent, the last run is flagged, nesting is at most `max_depth` deep. What
/// evaluation's walks rely on (see the module docs).
pub(crate) fn check(code: &ImageCode<'_>, max_depth: usize) -> Result<(), CheckError> {
    let len = code.len();
    if len == 0 {
        return Ok(());
    }
    // The open groups, innermost last: where each ends, and for a negation where it starts
    // (its one operand must be the instruction after it, ending where it ends).
    let mut open: Vec<(usize, Option<usize>)> = Vec::new();
    let mut last_seen = false;
    let mut top = 0;
    for i in 0..len {
        while open.last().is_some_and(|g| g.0 == i) {
            open.pop();
        }
        let w0 = code.word(i, 0);
        let kind = w0 & 7;
        if open.is_empty() {
            if i != top {
                return Err("a top-level run starts inside another");
            }
            if last_seen {
                return Err("instructions after the last run");
            }
            if w0 & LAST_RUN != 0 {
                last_seen = true;
            }
        }
        let end = match kind {
            K_AND | K_OR | K_NOT => code.word(i, 1) as usize,
            K_PRED | K_END => i + 1,
            _ => return Err("an unknown instruction"),
        };
        let (limit, parent_not) = open.last().map_or((len, None), |g| (g.0, g.1));
        if end <= i || end > limit {
            return Err("a group that ends outside its parent");
        }
        if parent_not.is_some_and(|at| at + 1 == i && end != limit) {
            return Err("a negation of more than one operand");
        }
        if kind == K_NOT && end < i + 2 {
            return Err("a negation without its operand");
        }
        if open.is_empty() {
            top = end;
        }
        if matches!(kind, K_AND | K_OR | K_NOT) {
            open.push((end, (kind == K_NOT).then_some(i)));
            if open.len() > max_depth {
                return Err("groups nested deeper than the parser allows");
            }
        }
    }
    if !last_seen {
        return Err("no run is flagged last");
    }
    Ok(())
}

impl<'a> ImageCode<'a> {
    fn len(&self) -> usize {
        self.code.len() / INSTR_WORDS
    }

    #[inline]
    fn word(&self, i: usize, w: usize) -> u32 {
        self.code.get(i * INSTR_WORDS + w).unwrap_or(0)
    }

    /// Instruction `i`'s four words, read with one bounds check (zeros past the end: an end
    /// marker).
    #[inline]
    fn record(&self, i: usize) -> [u32; INSTR_WORDS] {
        let at = i.wrapping_mul(INSTR_WORDS);
        match self.code.raw(at..at.wrapping_add(INSTR_WORDS)) {
            Some(raw) if raw.len() == 4 * INSTR_WORDS => {
                let w = |k: usize| {
                    u32::from_le_bytes([raw[4 * k], raw[4 * k + 1], raw[4 * k + 2], raw[4 * k + 3]])
                };
                [w(0), w(1), w(2), w(3)]
            }
            _ => [0; INSTR_WORDS],
        }
    }

    /// The fields its predicates read, as a mask of this process's field ids (every bit when
    /// one cannot be read: more fields read, never fewer).
    pub(crate) fn field_mask(&self) -> FieldMask {
        let mut mask = 0;
        for i in 0..self.len() {
            let [w0, field, ..] = self.record(i);
            if w0 & 7 == K_PRED {
                mask |= match self.arenas.fields.get(field as usize) {
                    Some(id) => id.bit(),
                    None => return FieldMask::MAX,
                };
            }
        }
        mask
    }

    fn str_at(&self, at: u32, len: u32) -> Option<&'a [u8]> {
        let at = at as usize;
        self.arenas.bytes.get(at..at.checked_add(len as usize)?)
    }
}

impl<'a> CodeView<'a> for ImageCode<'a> {
    #[inline]
    fn shape(&self, i: usize) -> Shape {
        let [w0, end, ..] = self.record(i);
        // `check` has made every end greater than its instruction's number (and past the end,
        // `record` reads an end marker).
        let end = (end as usize).max(i + 1);
        match w0 & 7 {
            K_AND => Shape::And(end),
            K_OR => Shape::Or(end),
            K_NOT => Shape::Not(end),
            K_PRED => Shape::Pred,
            _ => Shape::End,
        }
    }

    #[inline]
    fn is_last_run(&self, i: usize) -> bool {
        i >= self.len() || self.word(i, 0) & LAST_RUN != 0
    }

    #[inline(always)]
    fn step(&self, i: usize) -> Step<'a> {
        let rec = self.record(i);
        let end = (rec[1] as usize).max(i + 1);
        match rec[0] & 7 {
            K_AND => Step::And(end),
            K_OR => Step::Or(end),
            K_NOT => Step::Not,
            K_PRED => match self.decode(rec) {
                Some(p) => Step::Pred(p),
                None => Step::Unreadable,
            },
            _ => Step::End,
        }
    }

    fn pred(&self, i: usize) -> Option<PredRef<'a>> {
        let rec = self.record(i);
        if rec[0] & 7 != K_PRED {
            return None;
        }
        self.decode(rec)
    }
}

impl<'a> ImageCode<'a> {
    /// A predicate's record, read. Inlined: what it returns is large, and evaluation reads
    /// fields of it at once.
    #[inline(always)]
    fn decode(&self, [w0, field, a, b]: [u32; INSTR_WORDS]) -> Option<PredRef<'a>> {
        let op = *Op::ALL.get(((w0 >> 8) & 0xff) as usize)?;
        let bytes = self.arenas.bytes;
        let int = |a: u32, b: u32| (u64::from(b) << 32 | u64::from(a)) as i64;
        let lit = match (w0 >> 16) & 0xff {
            L_STR => self.str_at(a, b).map(LitRef::Str),
            L_REGEX => self
                .arenas
                .regexes
                .get(a, self.arenas.regex_sources, bytes)
                .map(LitRef::Regex),
            L_INT => Some(LitRef::Int(int(a, b))),
            L_ADDR => read_addr(bytes, a).map(|(addr, _)| LitRef::IpAddr(addr)),
            L_CIDR => read_cidr(bytes, a).map(LitRef::IpCidr),
            kind @ (L_SET_STR | L_SET_INT | L_SET_NET) => {
                let per = if kind == L_SET_NET { 1 } else { 2 };
                let start = a as usize;
                let words = self
                    .arenas
                    .sets
                    .slice(start..start.checked_add(b as usize * per)?);
                words.map(|words| LitRef::Set(SetRef::Image(ImageSet { kind, words, bytes })))
            }
            L_NONE => None,
            _ => None,
        };
        let field = self
            .arenas
            .fields
            .get(field as usize)
            .copied()
            .unwrap_or(FieldId::unused(crate::value::Type::String));
        Some(PredRef {
            field,
            lower: w0 & LOWER != 0,
            any: w0 & ANY != 0,
            op,
            lit: lit.unwrap_or(LitRef::Missing),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::program::test_program;

    /// Writes the program of `expression`, lets `change` edit its words, checks it.
    fn checked(expression: &str, change: impl FnOnce(&mut Vec<u32>)) -> Result<(), CheckError> {
        let mut w = ProgramWriter::default();
        let (start, len) = w
            .program(test_program(expression).view(), &mut |f| f.index() as u32)
            .unwrap();
        change(&mut w.code);
        let bytes: Vec<u8> = w.code.iter().flat_map(|x| x.to_le_bytes()).collect();
        let regexes = RegexSlots::new(0, 1 << 20);
        let arenas = ProgramArenas {
            code: Words::new(&bytes).unwrap(),
            bytes: &w.bytes,
            sets: Words::new(&[]).unwrap(),
            regex_sources: Words::new(&[]).unwrap(),
            regexes: &regexes,
            fields: &[],
        };
        check(&arenas.program(start, len).unwrap(), 8)
    }

    const NESTED: &str =
        r#"http.host == "a" && !(http.path ^= "/b") && (http.path ^= "/c" || http.host == "d")"#;

    #[test]
    fn what_the_compiler_writes_passes() {
        assert_eq!(checked(NESTED, |_| {}), Ok(()));
        assert_eq!(checked(r#"http.host == "a""#, |_| {}), Ok(()));
    }

    #[test]
    fn a_group_that_does_not_move_forward_or_leaves_its_parent_is_refused() {
        // Instruction 1 is the `!`, 3 the `||` (ends at 6).
        let at = |i: usize, w: usize| i * INSTR_WORDS + w;
        assert!(
            checked(NESTED, |c| c[at(3, 1)] = 3).is_err(),
            "ends at itself"
        );
        assert!(
            checked(NESTED, |c| c[at(3, 1)] = 2).is_err(),
            "ends before itself"
        );
        assert!(
            checked(NESTED, |c| c[at(3, 1)] = 7).is_err(),
            "past the program"
        );
        assert!(
            checked(NESTED, |c| c[at(1, 1)] = 4).is_err(),
            "a `!` of two"
        );
        assert!(
            checked(NESTED, |c| c[at(1, 0)] = 7).is_err(),
            "an unknown kind"
        );
    }

    #[test]
    fn the_last_run_is_flagged_once_at_the_end() {
        let at = |i: usize| i * INSTR_WORDS;
        assert!(
            checked(NESTED, |c| c[at(3)] &= !LAST_RUN).is_err(),
            "none flagged"
        );
        assert!(
            checked(NESTED, |c| c[at(1)] |= LAST_RUN).is_err(),
            "runs after the last"
        );
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_refused() {
        let deep = format!("{}http.host == \"a\"{}", "!(".repeat(9), ")".repeat(9));
        assert!(checked(&deep, |_| {}).is_err());
        let shallow = format!("{}http.host == \"a\"{}", "!(".repeat(8), ")".repeat(8));
        assert_eq!(checked(&shallow, |_| {}), Ok(()));
    }
}
