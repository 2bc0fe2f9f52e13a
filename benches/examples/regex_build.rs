use regex_automata::meta;
use regex_automata::nfa::thompson::{self, backtrack::BoundedBacktracker, pikevm::PikeVM};
use std::time::Instant;
fn main() {
    let table = atc_workload::Table::generate(10_000, 1, false);
    let mut pats: Vec<String> = Vec::new();
    for r in &table.routes {
        for part in r.expression.split("~ ").skip(1) {
            let lit = part.trim_start();
            let p = if let Some(rest) = lit.strip_prefix("r#\"") {
                rest.split("\"#").next().unwrap().to_string()
            } else {
                lit[1..].split('"').next().unwrap().replace("\\\\", "\\")
            };
            pats.push(p);
        }
    }
    pats.sort();
    pats.dedup();
    let hirs: Vec<_> = pats
        .iter()
        .map(|p| regex_syntax::Parser::new().parse(p).unwrap())
        .collect();
    let t = Instant::now();
    for h in &hirs {
        let cfg = meta::Config::new().onepass(false).dfa(false).hybrid(false);
        meta::Regex::builder()
            .configure(cfg)
            .build_from_hir(h)
            .unwrap();
    }
    println!(
        "{} regexes: meta {:?}/regex",
        hirs.len(),
        t.elapsed() / hirs.len() as u32
    );
    let t = Instant::now();
    let c = thompson::Compiler::new();
    for h in &hirs {
        let nfa = c.build_from_hir(h).unwrap();
        let _p = PikeVM::new_from_nfa(nfa.clone()).unwrap();
        let _b = BoundedBacktracker::new_from_nfa(nfa).unwrap();
    }
    println!(
        "reused compiler + pikevm + backtracker {:?}/regex",
        t.elapsed() / hirs.len() as u32
    );
    let t = Instant::now();
    for h in &hirs {
        let _ = regex_syntax::Parser::new().parse(&h.to_string());
    }
    println!("parse {:?}/regex", t.elapsed() / hirs.len() as u32);
}
