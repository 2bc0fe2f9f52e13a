//! The form the indexed matcher evaluates: a route's resolved expression flattened into one
//! array of instructions plus one string holding every literal's bytes.
//!
//! Why: a resolved [`Node`] is a tree of separately allocated children and literals. At 100,000
//! routes each candidate a request evaluates sits in memory no other request touched lately, so
//! every pointer followed is a cache (and TLB) miss. A program is one array of 32-byte
//! instructions, two to a cache line, with short literals inside their instructions: a host and
//! a path prefix are one line. The router keeps every route's program in one arena, each
//! starting on a cache line (`router/program_arena.rs`), so a candidate's program is found from
//! its slot number and read in as few lines as it fills.
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
//! - The head instruction of a program's last top-level run is flagged `last_run`, and
//!   evaluation stops after that run. There is no length field: a length would have to be
//!   read before the first instruction, and finding the end by its marker read the line after
//!   the last instruction (a host and a prefix fill the first line; the `End` after them is on
//!   the second). The flag sits in an instruction evaluation reads anyway. `Instr::End` fills
//!   the places after a program in a room larger than it (see the arena) and is the whole of an
//!   empty program (true): evaluation also stops at it, so a program stays correct even if its
//!   flag were missing.

use std::net::IpAddr;
use std::sync::Arc;

use crate::compile::regex::CompiledRegex;
use crate::compile::resolve::{self as resolved, Node};
use crate::language::Op;
use crate::schema::FieldId;
use crate::value::{cidr_contains, IpCidr};

/// Longest literal kept inside its instruction; chosen so that an instruction stays 32 bytes.
pub(crate) const INLINE: usize = 22;

/// A route's program: its instructions and the bytes of its literals longer than [`INLINE`].
/// The router moves it into its arena; the linter keeps one per distinct expression.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    code: Box<[Instr]>,
    /// Whole UTF-8 strings, one after another.
    text: Box<[u8]>,
}

/// The parts of a program evaluation reads, found once per evaluation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Code<'a> {
    code: &'a [Instr],
    text: &'a [u8],
}

/// 32 bytes aligned to 32 (see [`HalfLine`]), so that no instruction straddles two cache lines
/// and an arena can start a program on a line.
#[derive(Debug, Clone)]
pub(crate) enum Instr {
    /// Fills the places of a room after its program; the whole of an empty program (true).
    End,
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
            Instr::End => true,
        }
    }

    fn set_last_run(&mut self) {
        match self {
            Instr::And { last_run, .. }
            | Instr::Or { last_run, .. }
            | Instr::Not { last_run, .. } => *last_run = true,
            Instr::Pred(p) => p.last_run = true,
            Instr::End => {}
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
    pub _align: [HalfLine; 0],
}

/// Gives [`Instr`] the alignment of half a cache line while it stays 32 bytes: an enum marked
/// `repr(align(32))` itself is laid out with its tag apart (64 bytes), a zero-length field of
/// this type in one variant is not (`two_instructions_fill_a_cache_line` checks both).
#[derive(Debug, Clone, Copy)]
#[repr(align(32))]
pub(crate) struct HalfLine;

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
        Program {
            code: crate::fitted::fitted(b.code),
            text: crate::fitted::fitted(b.text.into_bytes()),
        }
    }

    /// The instructions and the literal text, moved out (into an arena).
    pub(crate) fn into_parts(self) -> (Box<[Instr]>, Box<[u8]>) {
        (self.code, self.text)
    }

    #[inline]
    pub(crate) fn view(&self) -> Code<'_> {
        Code {
            code: &self.code,
            text: &self.text,
        }
    }
}

#[cfg(test)]
impl Default for Program {
    /// The empty program (true).
    fn default() -> Program {
        Program {
            code: Box::new([Instr::End]),
            text: Box::new([]),
        }
    }
}

impl<'a> Code<'a> {
    /// A view of instructions and the text their `Lit::Str` literals point into.
    #[inline]
    pub(crate) fn new(code: &'a [Instr], text: &'a [u8]) -> Code<'a> {
        Code { code, text }
    }

    #[inline]
    pub(crate) fn code(&self) -> &'a [Instr] {
        self.code
    }

    /// An owned copy (the linter keeps one program per distinct expression).
    pub(crate) fn to_program(self) -> Program {
        Program {
            code: self.code.into(),
            text: self.text.into(),
        }
    }

    /// Reads the head instruction of every top-level run, so that the lines evaluation reads
    /// are in cache when it comes (see `Router::needed_fields`). The result means nothing.
    #[inline]
    pub(crate) fn touch(&self) -> bool {
        let mut seen = false;
        for i in self.runs() {
            seen ^= matches!(self.code[i], Instr::Pred(_));
        }
        seen
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
            Instr::Pred(_) | Instr::End => i + 1,
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
            _align: [],
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
    fn two_instructions_fill_a_cache_line() {
        assert_eq!(std::mem::size_of::<Instr>(), 32);
        assert_eq!(std::mem::align_of::<Instr>(), 32);
    }

    use super::test_program as program;

    /// Instructions up to the end of the last run: the program's length.
    fn length(p: &Program) -> usize {
        let code = p.view();
        code.runs().last().map_or(0, |i| code.end(i))
    }

    #[test]
    fn a_host_and_a_prefix_are_two_instructions() {
        let p = program(r#"http.host == "a.com" && http.path ^= "/a""#);
        let code = p.view();
        // One cache line: the runs' heads (the only instructions evaluation reads to find the
        // end) are both in it, and the last is flagged.
        assert_eq!(code.runs().collect::<Vec<_>>(), [0, 1]);
        assert!(code.code()[1].is_last_run());
        assert_eq!(code.code().len(), 2);
    }

    #[test]
    fn long_literals_go_to_the_text() {
        let p = program(
            r#"http.host == "a-long-host-name.example.com" && (http.path ^= "/a" || http.path ^= "/b" || http.path ^= "/c")"#,
        );
        assert_eq!(length(&p), 5);
        assert_eq!(p.view().runs().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(p.view().text, b"a-long-host-name.example.com");
        let short = program(r#"http.path ^= "/a-path-of-22-bytes-xy""#);
        assert!(short.view().text.is_empty(), "22 bytes stay inline");
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
