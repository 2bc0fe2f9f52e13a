//! The form the indexed matcher evaluates: a route's resolved expression flattened into one
//! array of instructions plus one string holding every literal's bytes.
//!
//! Why: a resolved [`Node`] is a tree of separately allocated children and literals. At 100,000
//! routes each candidate a request evaluates sits in memory no other request touched lately, so
//! every pointer followed is a cache (and TLB) miss. A typical program (a host and up to three
//! path prefixes, or a method pair, a host and a prefix) lives entirely in its router slot:
//! instructions and long literals in the slot's own three cache lines, found from the index
//! entry's slot number with no pointer to follow (the previous layout, a slot pointing at a
//! heap array, was one more dependent miss per candidate). Only a larger program spills to the
//! heap.
//!
//! Invariants:
//! - A program means exactly what the node it was compiled from means; the reference evaluator
//!   keeps evaluating the node, and the property tests compare the two.
//! - Layout is pre-order: a group (`And`, `Or`, `Not`) is followed by its children in order, and
//!   its `end` is the index just past its last descendant. A predicate takes one instruction.
//! - A program is true when each of its top-level runs (an instruction and its descendants) is:
//!   an expression that is an `&&` (most routes) is compiled as its children, the `And` left
//!   out, since every evaluation would read those 32 bytes that say only that; any other
//!   expression is one run. (So an empty program is true; free slots hold one, and no index
//!   points at a free slot.)
//! - `Lit::Str { start, len }` is `text[start..start + len]`; `Lit::Inline` holds the whole
//!   literal (at most [`INLINE`] bytes, a UTF-8 string); `Lit::Regex` holds its regex itself;
//!   `Lit::Set` holds a set literal behind a pointer, ready for membership tests.
//! - A program is either in its slot (the code is `head`, the text is in `head_text`) or
//!   spilled (`head[0]` is `Instr::OnHeap`, holding both), never split between the two:
//!   evaluation reads one contiguous instruction array. `Instr::OnHeap` never appears in the
//!   code a [`Code`] view hands out.
//! - The head instruction of a program's last top-level run is flagged `last_run`, and
//!   evaluation stops after that run. There is no length field: a length would have to be
//!   read before the first instruction, and finding the end by its marker read the line after
//!   the last instruction (a host and a prefix fill the first line; the `End` after them is on
//!   the second). The flag sits in an instruction evaluation reads anyway. `Instr::End` fills
//!   the places after a short program in its slot and is the whole of an empty program (true):
//!   evaluation also stops at it, so a program stays correct even if its flag were missing.

use std::net::IpAddr;
use std::sync::Arc;

use crate::compile::regex::CompiledRegex;
use crate::compile::resolve::{self as resolved, Node};
use crate::language::Op;
use crate::schema::FieldId;
use crate::value::{cidr_contains, IpCidr};

/// Longest literal kept inside its instruction; chosen so that an instruction stays 32 bytes.
pub(crate) const INLINE: usize = 22;

/// Instructions a program keeps in its slot: a host and three path prefixes under an `||`, or
/// a method pair, a host and a prefix (the workload's common larger routes). The benchmark
/// that keeps this layout (against every program on the heap) is in docs/performance.md,
/// "Layout choices".
const IN_SLOT: usize = 5;
/// Bytes of long literals a program keeps in its slot (one host or path longer than
/// [`INLINE`]: two such literals in one route are rare); with [`IN_SLOT`] instructions it makes
/// the slot three cache lines.
const IN_SLOT_TEXT: usize = 32;

/// A route's program, as stored in the router's slot array: see the module docs for the layout.
/// Aligned to a cache line so that a program in its slot touches no line of another. Cloned
/// only by the linter, which keeps one program per distinct expression.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub(crate) struct Program {
    head: [Instr; IN_SLOT],
    head_text: [u8; IN_SLOT_TEXT],
}

#[derive(Debug, Clone)]
pub(crate) struct HeapCode {
    code: Box<[Instr]>,
    text: Box<str>,
}

/// The parts of a program evaluation reads, found once per evaluation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Code<'a> {
    code: &'a [Instr],
    text: &'a [u8],
}

#[derive(Debug, Clone)]
pub(crate) enum Instr {
    /// Fills a slot's places after its program; the whole of an empty program (true).
    End,
    /// Stands first in the slot of a program kept on the heap (likewise).
    OnHeap(Box<HeapCode>),
    And {
        end: u32,
        last_run: bool,
    },
    Or {
        end: u32,
        last_run: bool,
    },
    Not {
        end: u32,
        last_run: bool,
    },
    Pred(Pred),
}

impl Instr {
    /// Whether evaluation stops after this instruction's run (see the module docs).
    #[inline]
    pub(crate) fn is_last_run(&self) -> bool {
        match self {
            Instr::And { last_run, .. }
            | Instr::Or { last_run, .. }
            | Instr::Not { last_run, .. } => *last_run,
            Instr::Pred(p) => p.last_run,
            Instr::End | Instr::OnHeap(_) => true,
        }
    }

    fn set_last_run(&mut self) {
        match self {
            Instr::And { last_run, .. }
            | Instr::Or { last_run, .. }
            | Instr::Not { last_run, .. } => *last_run = true,
            Instr::Pred(p) => p.last_run = true,
            Instr::End | Instr::OnHeap(_) => {}
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Pred {
    pub field: FieldId,
    pub lower: bool,
    pub any: bool,
    pub op: Op,
    /// See [`Instr::is_last_run`].
    pub last_run: bool,
    pub lit: Lit,
}

#[derive(Debug, Clone)]
pub(crate) enum Lit {
    /// A literal of up to [`INLINE`] bytes, stored in the instruction itself (most hosts and
    /// path prefixes): comparing it reads no other memory.
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    Str {
        start: u32,
        len: u32,
    },
    /// A `~` predicate's regex, held by the instruction: at 100,000 routes the regex is cold
    /// memory, and a separate array of them was one more miss on the way to it.
    Regex(Arc<CompiledRegex>),
    Int(i64),
    IpAddr(IpAddr),
    IpCidr(IpCidr),
    /// The elements of an `in` / `not in` set, shared with no other route.
    Set(Arc<Set>),
}

/// A set literal, for membership tests: strings and integers sorted with duplicates removed,
/// addresses as full-length networks (`10.0.0.1` as `10.0.0.1/32`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Set {
    Str(Box<[Box<str>]>),
    Int(Box<[i64]>),
    Net(Box<[IpCidr]>),
}

impl Set {
    /// From a resolved set's elements: validation has made them all strings, all integers, or
    /// all addresses and networks.
    fn new(elements: &[resolved::Lit]) -> Set {
        let set = match elements.first() {
            Some(resolved::Lit::Str(_)) => Set::Str(
                elements
                    .iter()
                    .filter_map(|e| match e {
                        resolved::Lit::Str(s) => Some(Box::from(&**s)),
                        _ => None,
                    })
                    .collect(),
            ),
            Some(resolved::Lit::Int(_)) => Set::Int(
                elements
                    .iter()
                    .filter_map(|e| match e {
                        resolved::Lit::Int(i) => Some(*i),
                        _ => None,
                    })
                    .collect(),
            ),
            _ => Set::Net(
                elements
                    .iter()
                    .filter_map(|e| match e {
                        resolved::Lit::IpAddr(a) => {
                            IpCidr::new(*a, if a.is_ipv4() { 32 } else { 128 }).ok()
                        }
                        resolved::Lit::IpCidr(c) => Some(*c),
                        _ => None,
                    })
                    .collect(),
            ),
        };
        set.sorted()
    }

    fn sorted(self) -> Set {
        fn sort<T: Ord>(v: Box<[T]>) -> Box<[T]> {
            let mut v = v.into_vec();
            v.sort_unstable();
            v.dedup();
            v.into_boxed_slice()
        }
        match self {
            Set::Str(v) => Set::Str(sort(v)),
            Set::Int(v) => Set::Int(sort(v)),
            Set::Net(v) => Set::Net(sort(v)),
        }
    }

    /// Whether the string is an element.
    #[inline]
    pub(crate) fn has_str(&self, s: &str) -> bool {
        match self {
            Set::Str(v) => v.binary_search_by(|e| (**e).cmp(s)).is_ok(),
            _ => false,
        }
    }

    /// Whether the integer is an element.
    pub(crate) fn has_int(&self, i: i64) -> bool {
        match self {
            Set::Int(v) => v.binary_search(&i).is_ok(),
            _ => false,
        }
    }

    /// Whether the address is an element or inside one.
    pub(crate) fn has_addr(&self, a: &IpAddr) -> bool {
        match self {
            Set::Net(v) => v.iter().any(|c| cidr_contains(c, a)),
            _ => false,
        }
    }

    /// Number of distinct elements.
    pub(crate) fn len(&self) -> usize {
        match self {
            Set::Str(v) => v.len(),
            Set::Int(v) => v.len(),
            Set::Net(v) => v.len(),
        }
    }
}

impl Program {
    /// Flattens a resolved expression.
    ///
    /// Offsets are `u32`: an expression long enough to overflow them (4 GiB) cannot have been
    /// parsed, and the instruction count is bounded by the predicate limit.
    pub(crate) fn compile(node: &Node) -> Program {
        let mut b = Builder::default();
        b.code.reserve_exact(node.size());
        let mut last_run = 0;
        match node {
            Node::And(children) => children.iter().for_each(|c| {
                last_run = b.code.len();
                b.node(c);
            }),
            _ => b.node(node),
        }
        if let Some(head) = b.code.get_mut(last_run) {
            head.set_last_run();
        }
        let mut p = Program::default();
        if b.code.len() <= IN_SLOT && b.text.len() <= IN_SLOT_TEXT {
            p.head_text[..b.text.len()].copy_from_slice(b.text.as_bytes());
            for (slot, instr) in p.head.iter_mut().zip(b.code) {
                *slot = instr;
            }
        } else {
            p.head[0] = Instr::OnHeap(Box::new(HeapCode {
                code: crate::fitted::fitted(b.code),
                text: crate::fitted::fitted_str(b.text),
            }));
        }
        p
    }

    #[inline]
    pub(crate) fn view(&self) -> Code<'_> {
        if let Instr::OnHeap(s) = &self.head[0] {
            return Code {
                code: &s.code,
                text: s.text.as_bytes(),
            };
        }
        Code {
            code: &self.head,
            text: &self.head_text,
        }
    }

    /// Reads the head instruction of every top-level run, so that the lines evaluation reads
    /// are in cache when it comes (see `Router::needed_fields`). The result means nothing.
    #[inline]
    pub(crate) fn touch(&self) -> bool {
        let code = self.view();
        let mut seen = false;
        for i in code.runs() {
            seen ^= matches!(code.code[i], Instr::Pred(_));
        }
        seen
    }

    /// Whether the program lives in its slot, without a heap allocation.
    #[cfg(test)]
    fn in_slot(&self) -> bool {
        !matches!(self.head[0], Instr::OnHeap(_))
    }
}

impl Default for Program {
    /// The empty program (true), as free slots hold.
    fn default() -> Program {
        Program {
            head: [const { Instr::End }; IN_SLOT],
            head_text: [0; IN_SLOT_TEXT],
        }
    }
}

impl<'a> Code<'a> {
    #[inline]
    pub(crate) fn code(&self) -> &'a [Instr] {
        self.code
    }

    /// The bytes of a string literal (`None` for other literals); always a whole UTF-8 string,
    /// copied from one.
    #[inline]
    pub(crate) fn bytes<'b>(&self, lit: &'b Lit) -> Option<&'b [u8]>
    where
        'a: 'b,
    {
        match lit {
            Lit::Inline { len, bytes } => Some(&bytes[..*len as usize]),
            Lit::Str { start, len } => Some(&self.text[*start as usize..(*start + *len) as usize]),
            _ => None,
        }
    }

    /// Where the program's top-level runs start, up to the one flagged last (see the module
    /// docs). Reads those head instructions only.
    #[inline]
    pub(crate) fn runs(&self) -> impl Iterator<Item = usize> + 'a {
        let code = *self;
        let mut next = Some(0);
        std::iter::from_fn(move || {
            let i = next?;
            let instr = code.code.get(i)?;
            next = (!instr.is_last_run()).then(|| code.end(i));
            Some(i)
        })
    }

    /// Index just past instruction `i` and its descendants.
    #[inline]
    pub(crate) fn end(&self, i: usize) -> usize {
        match self.code[i] {
            Instr::And { end, .. } | Instr::Or { end, .. } | Instr::Not { end, .. } => end as usize,
            Instr::Pred(_) | Instr::End | Instr::OnHeap(_) => i + 1,
        }
    }
}

#[derive(Default)]
struct Builder {
    code: Vec<Instr>,
    text: String,
}

impl Builder {
    fn node(&mut self, node: &Node) {
        let at = self.code.len();
        let children: &[Node] = match node {
            Node::Pred(p) => {
                let instr = Instr::Pred(self.pred(p));
                self.code.push(instr);
                return;
            }
            Node::And(c) | Node::Or(c) => c,
            Node::Not(inner) => std::slice::from_ref(&**inner),
        };
        // Placeholder, patched once the children's extent is known.
        self.code.push(Instr::End);
        crate::stack::guarded(|| {
            for c in children {
                self.node(c);
            }
        });
        let end = u32::try_from(self.code.len()).unwrap_or(u32::MAX);
        let last_run = false;
        self.code[at] = match node {
            Node::And(_) => Instr::And { end, last_run },
            Node::Or(_) => Instr::Or { end, last_run },
            _ => Instr::Not { end, last_run },
        };
    }

    fn pred(&mut self, p: &resolved::Pred) -> Pred {
        let lit = match (&p.regex, &p.lit) {
            (Some(re), _) => Lit::Regex(re.clone()),
            (None, resolved::Lit::Str(s)) if s.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..s.len()].copy_from_slice(s.as_bytes());
                Lit::Inline {
                    len: s.len() as u8,
                    bytes,
                }
            }
            (None, resolved::Lit::Str(s)) => {
                let start = self.text.len() as u32;
                self.text.push_str(s);
                Lit::Str {
                    start,
                    len: s.len() as u32,
                }
            }
            (None, resolved::Lit::Int(i)) => Lit::Int(*i),
            (None, resolved::Lit::IpAddr(a)) => Lit::IpAddr(*a),
            (None, resolved::Lit::IpCidr(c)) => Lit::IpCidr(*c),
            (None, resolved::Lit::Set(elements)) => Lit::Set(Arc::new(Set::new(elements))),
        };
        Pred {
            field: p.field,
            lower: p.lower,
            any: p.any,
            op: p.op,
            last_run: false,
            lit,
        }
    }
}

/// The program of `expression` over the String fields `http.host` and `http.path`, for unit
/// tests of the compiler and of what reads programs (the index's requirements).
#[cfg(test)]
pub(crate) fn test_program(expression: &str) -> Program {
    use crate::compile::regex_cache::{PreparedRegexes, RegexCache};
    use crate::limits::Limits;
    use crate::schema::Schema;
    use crate::value::Type;
    let mut schema = Schema::new();
    schema.add_field("http.host", Type::String).unwrap();
    schema.add_field("http.path", Type::String).unwrap();
    let limits = Limits::default();
    let parsed = crate::language::parse_with_limits(expression, &limits).unwrap();
    let cache = RegexCache::default();
    let node = crate::compile::resolve::resolve(
        expression,
        &parsed,
        crate::compile::resolve::Fields::Peek(&schema),
        &limits,
        &mut PreparedRegexes::new(&cache),
    )
    .unwrap();
    Program::compile(&node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_stay_small() {
        // Two per cache line: the point of the flat form is few lines per candidate.
        assert!(
            std::mem::size_of::<Instr>() <= 32,
            "{}",
            std::mem::size_of::<Instr>()
        );
    }

    #[test]
    fn a_slot_is_three_cache_lines() {
        assert_eq!(std::mem::size_of::<Program>(), 192);
        assert_eq!(std::mem::align_of::<Program>(), 64);
    }

    use super::test_program as program;

    /// Instructions up to the end of the last run: the program's length.
    fn length(p: &Program) -> usize {
        let code = p.view();
        code.runs().last().map_or(0, |i| code.end(i))
    }

    #[test]
    fn a_host_and_a_prefix_are_read_from_the_first_line_only() {
        let p = program(r#"http.host == "a.com" && http.path ^= "/a""#);
        let code = p.view();
        // Two instructions per line: the runs' heads (the only instructions evaluation reads
        // to find the end) are both in the first.
        assert_eq!(code.runs().collect::<Vec<_>>(), [0, 1]);
        assert!(code.code()[1].is_last_run());
        assert!(matches!(code.code()[2], Instr::End));
    }

    #[test]
    fn a_host_and_three_prefixes_stay_in_the_slot() {
        let p = program(
            r#"http.host == "a-long-host-name.example.com" && (http.path ^= "/a" || http.path ^= "/b" || http.path ^= "/c")"#,
        );
        assert!(p.in_slot());
        assert_eq!(length(&p), 5);
        assert_eq!(p.view().runs().collect::<Vec<_>>(), [0, 1]);
        assert!(p.view().text.starts_with(b"a-long-host-name.example.com"));
    }

    #[test]
    fn a_larger_program_spills_whole() {
        let p = program(
            r#"http.host == "a.com" && (http.path ^= "/a" || http.path ^= "/b" || http.path ^= "/c" || http.path ^= "/d")"#,
        );
        assert!(!p.in_slot());
        assert_eq!(length(&p), 6);
        assert_eq!(p.view().code().len(), 6);
        let long = "x".repeat(IN_SLOT_TEXT + 1);
        let p = program(&format!(r#"http.path ^= "/{long}""#));
        assert!(!p.in_slot());
        assert_eq!(p.view().text.len(), IN_SLOT_TEXT + 2);
    }

    #[test]
    fn an_expression_that_is_not_a_conjunction_is_one_run() {
        let p = program(r#"http.host == "a.com" || http.path ^= "/a""#);
        assert_eq!(p.view().runs().collect::<Vec<_>>(), [0]);
        assert_eq!(length(&p), 3);
        assert_eq!(
            length(&Program::default()),
            1,
            "an empty program is its End marker"
        );
    }
}
