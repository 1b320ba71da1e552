//! Launcher prefixes, read by the declaration `parsers/prefix.py` hands over (`CORE`): the
//! rule kind is "a stack of prefixes before the line's body", what they look like is the
//! declaration's (srun's `12: `, pdsh's `host: `, torchrun's `[default3]:` and `[rank3]:`).
//!
//! Only ASCII lines are read here; the caller hands any other line to the Python
//! definition (whose `\d` is every Unicode decimal digit).

use regex::Regex;

/// The prefix of one line: where the body starts, and what the prefix says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix {
    pub body: usize,
    pub rank: Option<i64>,
    pub local_rank: Option<i64>,
    /// byte range of the node's name in the line
    pub node: Option<(usize, usize)>,
}

/// A launcher prefix reader's declaration (`parsers.prefix.CORE`): the pattern (named groups
/// `label`, `host`, `local`, `rank`), the bytes a label or host prefix can start with, the
/// prefixes that open with a bracket, and how many spaces may pad a label.
pub struct PrefixRules {
    pub pattern: Regex,
    pub starts: Vec<u8>,
    pub brackets: Vec<String>,
    pub pad: usize,
    /// the indices of the groups `label`, `host`, `local` and `rank` (looked up once, not a line)
    groups: [Option<usize>; 4],
}

impl PrefixRules {
    pub fn new(pattern: Regex, starts: Vec<u8>, brackets: Vec<String>, pad: usize) -> Self {
        let index = |name: &str| pattern.capture_names().position(|n| n == Some(name));
        let groups = [index("label"), index("host"), index("local"), index("rank")];
        PrefixRules { pattern, starts, brackets, pad, groups }
    }
}

/// False for most lines: no launcher prefix can start there (`may_have_prefix`).  A label
/// or host prefix holds no space and ends in a colon and a space: the line's first space comes
/// right after a colon (a colon before it alone let llm.c's `s:1 trl:...` lines through to the
/// pattern: a third of framing them).
pub fn may_have_prefix(rules: &PrefixRules, line: &[u8]) -> bool {
    match line.first() {
        Some(b' ') => {
            let pad = line.iter().take_while(|&&b| b == b' ').count();
            pad <= rules.pad && line.get(pad).is_some_and(u8::is_ascii_digit) && may_have_prefix(rules, &line[pad..])
        }
        Some(c) if rules.starts.contains(c) => {
            memchr::memchr(b' ', line).is_some_and(|space| space > 1 && line[space - 1] == b':')
        }
        _ => rules.brackets.iter().any(|b| line.starts_with(b.as_bytes())),
    }
}

/// The prefix of an ASCII line (`split_prefix`); `locs`: the pattern's capture slots, reused
/// from line to line.
pub fn split(rules: &PrefixRules, line: &str, locs: &mut regex::CaptureLocations) -> Prefix {
    let none = Prefix { body: 0, rank: None, local_rank: None, node: None };
    if !may_have_prefix(rules, line.as_bytes()) {
        return none;
    }
    let body = match rules.pattern.captures_read(locs, line) {
        Some(m) if m.end() > 0 => m.end(),
        _ => return none,
    };
    let span = |g: Option<usize>| g.and_then(|g| locs.get(g));
    let [label, host, local, rank] = rules.groups.map(span);
    // ASCII digits (the pattern's `\d` on an ASCII line), at most a few: parsed, or None if absurd
    let int = |at: Option<(usize, usize)>| at.and_then(|(a, z)| line[a..z].parse::<i64>().ok());
    let mut rank = int(rank);
    let local_rank = int(local);
    let mut node = host;
    if let Some(label) = label {
        if local_rank.is_none() && rank.is_none() {
            // the srun task id is the global rank when each task is one process
            rank = int(Some(label));
        } else {
            node = Some(label);
        }
    }
    Prefix { body, rank, local_rank, node }
}

/// `split` for the lines of one block: a prefix's text read once.  Its pattern's match is found by
/// the regex's DFA alone, and the groups of a text already read taken from a table (a block's lines
/// repeat a few prefixes: `12: `, a host's, a rank's); captures cost 0.25 us a line.  The groups
/// of a match are those of its text alone: the pattern has no look-around, so the paths that end
/// where it ends, the one chosen among them, are the same without what follows.
pub struct Splitter<'r, 'a> {
    rules: &'r PrefixRules,
    locs: regex::CaptureLocations,
    seen: std::collections::HashMap<&'a str, Prefix>,
}

/// Prefix texts a splitter keeps at most (a block holds a few: each is a line's first bytes).
const SPLITTER_TEXTS: usize = 4096;

impl<'r, 'a> Splitter<'r, 'a> {
    pub fn new(rules: &'r PrefixRules) -> Self {
        Splitter { rules, locs: rules.pattern.capture_locations(), seen: std::collections::HashMap::new() }
    }

    /// `split(line)`.
    pub fn split(&mut self, line: &'a str) -> Prefix {
        if !may_have_prefix(self.rules, line.as_bytes()) {
            return Prefix { body: 0, rank: None, local_rank: None, node: None };
        }
        let end = match self.rules.pattern.find(line) {
            Some(m) if m.end() > 0 => m.end(),
            _ => return Prefix { body: 0, rank: None, local_rank: None, node: None },
        };
        let text = &line[..end];
        if let Some(p) = self.seen.get(text) {
            return p.clone();
        }
        let p = split(self.rules, text, &mut self.locs);
        if self.seen.len() < SPLITTER_TEXTS {
            self.seen.insert(text, p.clone());
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // test data: the shape of parsers.prefix.CORE (the Python module is the definition)
    fn rules() -> PrefixRules {
        PrefixRules::new(
            Regex::new(concat!(
                r"^(?: {0,6}(?P<label>\d{1,6}): ",
                r"|(?P<host>(?:\d{1,3}(?:\.\d{1,3}){3}|[a-z][a-z0-9-]*\d[a-z0-9-]*(?:\.[a-z0-9-]+)*|localhost)): )?",
                r"(?:\[default(?P<local>\d{1,5})\]: ?)?",
                r"(?:\[rank(?P<rank>\d{1,6})\]: ?)*",
            ))
            .unwrap(),
            b"0123456789abcdefghijklmnopqrstuvwxyz".to_vec(),
            vec!["[default".into(), "[rank".into()],
            6,
        )
    }

    fn split(line: &str) -> Prefix {
        let rules = rules();
        let mut locs = rules.pattern.capture_locations();
        super::split(&rules, line, &mut locs)
    }

    fn node_of(line: &str) -> Option<&str> {
        split(line).node.map(|(a, b)| &line[a..b])
    }

    #[test]
    fn a_splitter_reads_what_split_reads() {
        use crate::testing::Draws;
        let firsts = ["", " 0: ", "12: ", "      7: ", "       8: ", "gpu-node1: ", "10.0.0.1: ", "localhost: ", "a1b: ",
                      "x: ", "1234567: ", "0:"];
        let locals = ["", "[default3]: ", "[default3]:", "[default123456]: ", "[default"];
        let ranks = ["", "[rank5]: ", "[rank5]:[rank5]: ", "[rank1]:", "[rank12]: [rank3]: ", "[rank]: "];
        let pieces = ["0", "12", ":", ": ", " ", "[", "]", "gpu-node", "a", ".", "x", "-", "step 1"];
        let rules = rules();
        let mut locs = rules.pattern.capture_locations();
        let mut d = Draws::new(9);
        let lines: Vec<String> = (0..20_000).map(|_| {
            let mut line = [firsts[d.below(firsts.len())], locals[d.below(locals.len())], ranks[d.below(ranks.len())]]
                .concat();
            for _ in 0..d.below(4) {
                line.push_str(pieces[d.below(pieces.len())]);
            }
            if d.below(4) == 0 && !line.is_empty() {
                line.remove(d.below(line.len())); // (a character short)
            }
            line
        }).collect();
        let mut splitter = Splitter::new(&rules);
        let mut read = 0;
        for line in &lines {
            let want = super::split(&rules, line, &mut locs);
            read += usize::from(want.body > 0);
            assert_eq!(splitter.split(line), want, "{line:?}");
        }
        assert!(read > 2000 && splitter.seen.len() > 100, "{read} prefixes read, {} kept", splitter.seen.len());
    }

    #[test]
    fn srun_label_is_the_rank() {
        let p = split("12: iteration 5/ 10 |");
        assert_eq!((p.body, p.rank, p.local_rank), (4, Some(12), None));
        assert_eq!(split("  3: x").rank, Some(3));
    }

    #[test]
    fn stacked_prefixes_name_the_node() {
        let line = "0: [default3]: [rank11]: hello";
        let p = split(line);
        assert_eq!((p.rank, p.local_rank), (Some(11), Some(3)));
        assert_eq!(node_of(line), Some("0"));
        assert_eq!(&line[p.body..], "hello");
    }

    #[test]
    fn hosts_and_plain_lines() {
        assert_eq!(node_of("gpu-node12: [default0]: x"), Some("gpu-node12"));
        assert_eq!(node_of("10.0.0.1: x"), Some("10.0.0.1"));
        assert_eq!(split("time (ms) | a: 1").body, 0);
        assert_eq!(split("abc: no digit").body, 0);
        assert_eq!(split("       7: seven spaces").body, 0);
        assert_eq!(split("").body, 0);
    }
}
