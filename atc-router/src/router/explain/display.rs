//! The explanation as a report for people (`{}` of an [`Explanation`]).
//!
//! Invariant: every cut the report's caps made is said in words ("… and N more …"), so the
//! printed report never silently shows less than the explanation holds.

use std::fmt;

use super::Explanation;

impl fmt::Display for Explanation {
    /// A report for people: the winner, then each candidate with its deciding predicates.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.winner {
            Some(id) => writeln!(f, "matched route {id}")?,
            None => writeln!(f, "no route matched")?,
        }
        writeln!(
            f,
            "{} candidate(s) of {} route(s), in routing order:",
            self.candidates.len() + self.candidates_omitted,
            self.routes
        )?;
        for c in &self.candidates {
            let verdict = match (c.matched, Some(c.id) == self.winner) {
                (true, true) => "matched (winner)",
                (true, false) => "matched, after the winner",
                _ => "failed",
            };
            writeln!(f, "- {} (priority {}): {verdict}", c.id, c.priority)?;
            if c.expression_truncated {
                writeln!(f, "  expression (cut): {}", c.expression)?;
            }
            for p in &c.predicates {
                let what = match (p.holds, p.negated) {
                    (true, false) => "holds",
                    (false, false) => "does not hold",
                    (true, true) => "holds, under !",
                    (false, true) => "does not hold, under !",
                };
                writeln!(
                    f,
                    "  line {}, column {}: {} {what}\n{}",
                    p.location.line,
                    p.location.column,
                    p.text,
                    indent(&p.location.to_string())
                )?;
            }
            if c.predicates_omitted > 0 {
                writeln!(
                    f,
                    "  … and {} more predicate(s), not shown (report truncated)",
                    c.predicates_omitted
                )?;
            }
        }
        if self.candidates_omitted > 0 {
            writeln!(
                f,
                "- … and {} more candidate(s), not shown (report truncated)",
                self.candidates_omitted
            )?;
        }
        for r in &self.ruled_out {
            match &r.key {
                Some(k) => writeln!(f, "- {} ruled out by the index: {k}", r.id)?,
                None => writeln!(f, "- {} ruled out by the index", r.id)?,
            }
        }
        if self.ruled_out_omitted > 0 {
            writeln!(
                f,
                "- … and {} more route(s) ruled out by the index, not shown (report truncated)",
                self.ruled_out_omitted
            )?;
        }
        Ok(())
    }
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
