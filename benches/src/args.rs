//! The command line of `atc-bench`: a subcommand, then `--name value` (or `--name=value`)
//! options and `--name` switches, each declared by the subcommand as an [`Opt`].
//!
//! Invariant: what a subcommand reads must be what the user wrote or the default it states in
//! its help. So an undeclared, repeated or value-less option, a stray argument, a number that
//! does not parse and a missing required option are all errors naming the option: nothing is
//! ignored or guessed.

use atc_workload::{Family, Mix};

/// One option of a subcommand.
#[derive(Clone, Copy, Debug)]
pub struct Opt {
    /// With its dashes: `--routes`.
    pub name: &'static str,
    /// The placeholder of its value (`N`), or `None` for a switch.
    pub value: Option<&'static str>,
    /// One line for the help text, defaults included.
    pub help: &'static str,
}

/// What a command line set, checked against the declared options.
#[derive(Debug, Default)]
pub struct Parsed {
    values: Vec<(&'static str, String)>,
    switches: Vec<&'static str>,
}

/// Reads `args` (what follows the subcommand) against `opts`.
pub fn parse(args: &[String], opts: &[Opt]) -> Result<Parsed, String> {
    let mut out = Parsed::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let Some(opt) = opts.iter().find(|o| o.name == name) else {
            return Err(if name.starts_with('-') {
                format!("unknown option `{name}`")
            } else {
                format!("unexpected argument `{arg}`")
            });
        };
        if out.values.iter().any(|(n, _)| *n == opt.name) || out.switches.contains(&opt.name) {
            return Err(format!("`{}` given twice", opt.name));
        }
        match (opt.value, inline) {
            (None, None) => out.switches.push(opt.name),
            (None, Some(_)) => return Err(format!("`{}` takes no value", opt.name)),
            (Some(_), Some(v)) => out.values.push((opt.name, v)),
            (Some(meta), None) => match it.next() {
                Some(v) if !v.starts_with("--") => out.values.push((opt.name, v.clone())),
                _ => return Err(format!("`{}` needs a value ({meta})", opt.name)),
            },
        }
    }
    Ok(out)
}

impl Parsed {
    /// Whether the switch was given.
    pub fn switch(&self, name: &str) -> bool {
        self.switches.contains(&name)
    }

    /// The value given for `name`, if any.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `name` as a count (`10000`, `10_000` or `10,000`), `default` when absent;
    /// required when `default` is `None`.
    pub fn count(&self, name: &str, default: Option<usize>) -> Result<usize, String> {
        match self.value(name) {
            Some(v) => v
                .replace(['_', ','], "")
                .parse()
                .map_err(|_| format!("`{name}` wants a whole number, not `{v}`")),
            None => default.ok_or_else(|| format!("`{name}` is required")),
        }
    }

    /// The WORKLOAD family named by `name`, `default` when absent; required when `None`.
    pub fn family(&self, name: &str, default: Option<Family>) -> Result<Family, String> {
        match self.value(name) {
            Some(v) => Family::from_name(v).ok_or_else(|| {
                let all: Vec<_> = Family::all()
                    .iter()
                    .chain(&Family::stress())
                    .map(Family::name)
                    .collect();
                format!("unknown family `{v}`; one of: {}", all.join(", "))
            }),
            None => default.ok_or_else(|| format!("`{name}` is required")),
        }
    }

    /// The request mix named by `name` (required).
    pub fn mix(&self, name: &str) -> Result<Mix, String> {
        let v = self
            .value(name)
            .ok_or_else(|| format!("`{name}` is required"))?;
        Mix::from_name(v).ok_or_else(|| {
            let all: Vec<_> = Mix::all().iter().map(Mix::name).collect();
            format!("unknown mix `{v}`; one of: {}", all.join(", "))
        })
    }
}

/// The help lines of a subcommand's options, aligned.
pub fn options_help(opts: &[Opt]) -> String {
    let heads: Vec<String> = opts
        .iter()
        .map(|o| match o.value {
            Some(meta) => format!("{} {meta}", o.name),
            None => o.name.to_owned(),
        })
        .collect();
    let width = heads.iter().map(String::len).max().unwrap_or(0);
    heads
        .iter()
        .zip(opts)
        .map(|(h, o)| format!("  {h:<width$}  {}\n", o.help))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: &[Opt] = &[
        Opt {
            name: "--routes",
            value: Some("N"),
            help: "table size",
        },
        Opt {
            name: "--family",
            value: Some("F"),
            help: "family",
        },
        Opt {
            name: "--plain",
            value: None,
            help: "plain only",
        },
    ];

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn reads_values_switches_and_defaults() {
        let p = parse(&args("--routes 10_000 --plain --family=rest-api"), OPTS).unwrap();
        assert_eq!(p.count("--routes", None), Ok(10_000));
        assert!(p.switch("--plain"));
        assert_eq!(p.family("--family", None), Ok(Family::RestApi));
        let p = parse(&[], OPTS).unwrap();
        assert_eq!(p.count("--routes", Some(7)), Ok(7));
        assert!(!p.switch("--plain"));
        assert_eq!(p.family("--family", Some(Family::Mixed)), Ok(Family::Mixed));
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        for (line, says) in [
            ("--route 5", "unknown option `--route`"),
            ("5", "unexpected argument `5`"),
            ("--routes", "`--routes` needs a value (N)"),
            ("--routes --plain", "`--routes` needs a value (N)"),
            ("--plain --plain", "`--plain` given twice"),
            ("--routes 1 --routes=2", "`--routes` given twice"),
            ("--plain=yes", "`--plain` takes no value"),
        ] {
            assert_eq!(parse(&args(line), OPTS).unwrap_err(), says, "{line}");
        }
        let p = parse(&args("--routes ten --family nope"), OPTS).unwrap();
        assert!(p.count("--routes", Some(1)).unwrap_err().contains("`ten`"));
        assert!(p.family("--family", None).unwrap_err().contains("rest-api"));
        let p = parse(&[], OPTS).unwrap();
        assert_eq!(
            p.count("--routes", None).unwrap_err(),
            "`--routes` is required"
        );
        assert_eq!(p.mix("--mix").unwrap_err(), "`--mix` is required");
    }
}
