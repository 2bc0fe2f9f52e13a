//! A deliberately small regular-expression subset: enough to *generate* strings that the
//! generated route regexes match (random digits for `\d+` captures, and so on) and to *check*
//! matches in this crate's own tests, without depending on the `regex` crate.
//!
//! Supported: literals, `.`, `^`, `$`, escapes (`\d \w \s \D \W \S`, `\n \r \t`, escaped
//! punctuation), classes `[...]` / `[^...]` with ranges and escapes, groups `(...)`, `(?:...)`,
//! `(?<name>...)`, `(?P<name>...)`, alternation `|`, and quantifiers `* + ? {n} {n,} {n,m}`
//! (a lazy `?` suffix is accepted and ignored). Anything else is reported as unsupported.

use crate::rng::Rng;

#[derive(Clone, Debug)]
enum Node {
    Char(char),
    Set {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
    Dot,
    Start,
    End,
    Group(Vec<Vec<Item>>),
}

#[derive(Clone, Debug)]
struct Item {
    node: Node,
    min: u32,
    max: Option<u32>,
}

/// A parsed pattern of the supported subset. Matching is "search" (unanchored unless the pattern
/// uses `^` / `$`), like the route language's `~`.
#[derive(Clone, Debug)]
pub(crate) struct Regex {
    alt: Vec<Vec<Item>>,
}

const DIGITS: &[(char, char)] = &[('0', '9')];
const WORD: &[(char, char)] = &[('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')];
const SPACE: &[(char, char)] = &[(' ', ' '), ('\t', '\t'), ('\n', '\n'), ('\r', '\r')];
/// Characters tried, in order, when a negated class or `.` needs a character.
const FALLBACK: &str = "abcdefghijklmnopqrstuvwxyz0123456789";

struct Parser {
    chars: Vec<char>,
    i: usize,
    depth: usize,
}

impl Regex {
    /// Parses `pattern`, or says what is not supported.
    pub(crate) fn parse(pattern: &str) -> Result<Regex, String> {
        let mut p = Parser {
            chars: pattern.chars().collect(),
            i: 0,
            depth: 0,
        };
        let alt = p.alternation()?;
        if p.i != p.chars.len() {
            return Err(format!("unbalanced ')' in regex {pattern:?}"));
        }
        Ok(Regex { alt })
    }

    /// A random string matched by the pattern. Unbounded repetitions produce 1 to 4 items
    /// (`\d+` gives 1 to 4 random digits), so results stay short.
    pub(crate) fn generate(&self, rng: &mut Rng) -> String {
        let mut out = String::new();
        gen_alt(&self.alt, rng, &mut out);
        out
    }

    /// Whether the pattern matches somewhere in `text`.
    pub(crate) fn is_match(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        (0..=chars.len()).any(|start| m_alt(&self.alt, &chars, start, &mut |_| true))
    }
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    fn alternation(&mut self) -> Result<Vec<Vec<Item>>, String> {
        self.depth += 1;
        if self.depth > 64 {
            return Err("regex nesting too deep".into());
        }
        let mut alt = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.i += 1;
            alt.push(self.sequence()?);
        }
        self.depth -= 1;
        Ok(alt)
    }

    fn sequence(&mut self) -> Result<Vec<Item>, String> {
        let mut seq = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let node = self.atom()?;
            let (min, max) = self.quantifier()?;
            seq.push(Item { node, min, max });
        }
        Ok(seq)
    }

    fn atom(&mut self) -> Result<Node, String> {
        let c = self.chars[self.i];
        self.i += 1;
        Ok(match c {
            '^' => Node::Start,
            '$' => Node::End,
            '.' => Node::Dot,
            '(' => {
                if self.peek() == Some('?') {
                    self.i += 1;
                    match self.peek() {
                        Some(':') => self.i += 1,
                        Some('<') | Some('P') => {
                            while let Some(c) = self.peek() {
                                self.i += 1;
                                if c == '>' {
                                    break;
                                }
                            }
                        }
                        _ => return Err("unsupported regex group flags".into()),
                    }
                }
                let alt = self.alternation()?;
                if self.peek() != Some(')') {
                    return Err("unclosed regex group".into());
                }
                self.i += 1;
                Node::Group(alt)
            }
            '[' => self.class()?,
            '\\' => self.escape(false)?,
            '*' | '+' | '?' | '{' => return Err(format!("nothing to repeat before {c:?}")),
            c => Node::Char(c),
        })
    }

    /// After a backslash. Inside a class, returns sets as `Node::Set` too.
    fn escape(&mut self, in_class: bool) -> Result<Node, String> {
        let Some(c) = self.peek() else {
            return Err("regex ends with a backslash".into());
        };
        self.i += 1;
        let set = |r: &[(char, char)], negated| Node::Set {
            ranges: r.to_vec(),
            negated,
        };
        Ok(match c {
            'd' => set(DIGITS, false),
            'w' => set(WORD, false),
            's' => set(SPACE, false),
            'D' | 'W' | 'S' if in_class => return Err("negated escape inside a class".into()),
            'D' => set(DIGITS, true),
            'W' => set(WORD, true),
            'S' => set(SPACE, true),
            'n' => Node::Char('\n'),
            'r' => Node::Char('\r'),
            't' => Node::Char('\t'),
            c if c.is_ascii_alphanumeric() => {
                return Err(format!("unsupported regex escape \\{c}"))
            }
            c => Node::Char(c),
        })
    }

    fn class(&mut self) -> Result<Node, String> {
        let mut negated = false;
        if self.peek() == Some('^') {
            negated = true;
            self.i += 1;
        }
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let Some(c) = self.peek() else {
                return Err("unclosed regex class".into());
            };
            if c == ']' && !first {
                self.i += 1;
                break;
            }
            first = false;
            self.i += 1;
            let lo = if c == '\\' {
                match self.escape(true)? {
                    Node::Char(c) => c,
                    Node::Set { ranges: r, .. } => {
                        ranges.extend(r);
                        continue;
                    }
                    _ => unreachable!(),
                }
            } else {
                c
            };
            if self.peek() == Some('-') && self.chars.get(self.i + 1).is_some_and(|&n| n != ']') {
                self.i += 1;
                let mut hi = self.chars[self.i];
                self.i += 1;
                if hi == '\\' {
                    match self.escape(true)? {
                        Node::Char(c) => hi = c,
                        _ => return Err("bad range in regex class".into()),
                    }
                }
                if hi < lo {
                    return Err("reversed range in regex class".into());
                }
                ranges.push((lo, hi));
            } else {
                ranges.push((lo, lo));
            }
        }
        Ok(Node::Set { ranges, negated })
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        let s: String = self.chars[start..self.i].iter().collect();
        s.parse().ok()
    }

    fn quantifier(&mut self) -> Result<(u32, Option<u32>), String> {
        let q = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                self.i += 1;
                let min = self.number().ok_or("bad regex repetition")?;
                let max = if self.peek() == Some(',') {
                    self.i += 1;
                    if self.peek() == Some('}') {
                        None
                    } else {
                        Some(self.number().ok_or("bad regex repetition")?)
                    }
                } else {
                    Some(min)
                };
                if self.peek() != Some('}') || max.is_some_and(|m| m < min) {
                    return Err("bad regex repetition".into());
                }
                (min, max)
            }
            _ => return Ok((1, Some(1))),
        };
        self.i += 1;
        if self.peek() == Some('?') {
            self.i += 1; // lazy: irrelevant for generation and for match existence
        }
        Ok(q)
    }
}

fn in_ranges(ranges: &[(char, char)], c: char) -> bool {
    ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi)
}

fn gen_alt(alt: &[Vec<Item>], rng: &mut Rng, out: &mut String) {
    let seq = rng.pick(alt);
    for item in seq {
        let count = match item.max {
            Some(max) => rng.range(u64::from(item.min), u64::from(max)) as u32,
            None => item.min.max(1) + rng.below(4) as u32,
        };
        for _ in 0..count {
            gen_node(&item.node, rng, out);
        }
    }
}

fn gen_node(node: &Node, rng: &mut Rng, out: &mut String) {
    match node {
        Node::Char(c) => out.push(*c),
        Node::Set {
            ranges,
            negated: false,
        } => {
            let &(lo, hi) = rng.pick(ranges);
            let c = char::from_u32(rng.range(u64::from(lo), u64::from(hi)) as u32).unwrap_or(lo);
            out.push(c);
        }
        Node::Set {
            ranges,
            negated: true,
        } => {
            let allowed: Vec<char> = FALLBACK
                .chars()
                .filter(|&c| !in_ranges(ranges, c))
                .collect();
            out.push(if allowed.is_empty() {
                '~'
            } else {
                *rng.pick(&allowed)
            });
        }
        Node::Dot => out.push(*rng.pick(&FALLBACK.chars().collect::<Vec<_>>())),
        Node::Start | Node::End => {}
        Node::Group(alt) => gen_alt(alt, rng, out),
    }
}

type Cont<'a> = &'a mut dyn FnMut(usize) -> bool;

fn m_alt(alt: &[Vec<Item>], s: &[char], pos: usize, k: Cont) -> bool {
    for seq in alt {
        if m_seq(seq, 0, s, pos, k) {
            return true;
        }
    }
    false
}

fn m_seq(seq: &[Item], i: usize, s: &[char], pos: usize, k: Cont) -> bool {
    if i == seq.len() {
        return k(pos);
    }
    m_rep(seq, i, 0, s, pos, k)
}

fn m_rep(seq: &[Item], i: usize, count: u32, s: &[char], pos: usize, k: Cont) -> bool {
    let item = &seq[i];
    if item.max.is_none_or(|m| count < m) {
        let more = m_node(&item.node, s, pos, &mut |p| {
            if p == pos {
                // zero-width iteration: stop repeating
                count + 1 >= item.min && m_seq(seq, i + 1, s, p, k)
            } else {
                m_rep(seq, i, count + 1, s, p, k)
            }
        });
        if more {
            return true;
        }
    }
    count >= item.min && m_seq(seq, i + 1, s, pos, k)
}

fn m_node(node: &Node, s: &[char], pos: usize, k: Cont) -> bool {
    match node {
        Node::Char(c) => pos < s.len() && s[pos] == *c && k(pos + 1),
        Node::Set { ranges, negated } => {
            pos < s.len() && in_ranges(ranges, s[pos]) != *negated && k(pos + 1)
        }
        Node::Dot => pos < s.len() && s[pos] != '\n' && k(pos + 1),
        Node::Start => pos == 0 && k(pos),
        Node::End => pos == s.len() && k(pos),
        Node::Group(alt) => m_alt(alt, s, pos, k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_like_a_search() {
        let r = Regex::parse(r"^/users/(?<id>\d+)/orders/(?P<oid>\d+)$").unwrap();
        assert!(r.is_match("/users/12/orders/3"));
        assert!(!r.is_match("/users/12/orders/"));
        assert!(!r.is_match("/users/12/orders/3/x"));
        let r = Regex::parse(r"b[a-c]{2,3}(?:x|yz)?").unwrap();
        assert!(r.is_match("aabcaz"));
        assert!(r.is_match("__babcyz"));
        assert!(!r.is_match("bd"));
        let r = Regex::parse(r"^/f/(?<n>[^/]+)\.(json|xml)$").unwrap();
        assert!(r.is_match("/f/abc.json"));
        assert!(!r.is_match("/f/a/b.json"));
        assert!(Regex::parse(r"\bx").is_err());
        assert!(Regex::parse(r"(a").is_err());
        assert!(Regex::parse(r"a)").is_err());
        assert!(Regex::parse(r"+a").is_err());
    }

    #[test]
    fn generated_strings_match() {
        let pats = [
            r"^/users/(?<id>\d+)/orders/(?<oid>\d+)$",
            r"^/x/(?<uuid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{12})$",
            r"^/s/(?<slug>[a-z0-9]+(?:-[a-z0-9]+)*)$",
            r"^/n/(?<name>[A-Za-z_]\w*)/[^/]+\.(?:json|xml)$",
            r"^/o/(?<id>\d+)(?:/(?<sid>\d+))?$",
        ];
        let mut rng = Rng::new(1, 1);
        for p in pats {
            let r = Regex::parse(p).unwrap();
            for _ in 0..200 {
                let s = r.generate(&mut rng);
                assert!(r.is_match(&s), "{p} did not match generated {s:?}");
            }
        }
    }
}
