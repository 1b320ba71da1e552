//! Launcher prefixes (`parsers/prefix.py`, the definition): `srun --label`'s `12: `,
//! pdsh's `host: `, torchrun's `[default3]:` and `[rank3]:`, stacked.
//!
//! Only ASCII lines are read here; the caller hands any other line to the Python
//! definition (whose `\d` is every Unicode decimal digit).

use regex::Regex;
use std::sync::OnceLock;

/// The prefix of one line: where the body starts, and what the prefix says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix {
    pub body: usize,
    pub rank: Option<i64>,
    pub local_rank: Option<i64>,
    /// byte range of the node's name in the line
    pub node: Option<(usize, usize)>,
}

fn pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // the Python pattern, spelled for ASCII (leftmost-first: the same match as `re`'s backtracking)
    RE.get_or_init(|| {
        Regex::new(concat!(
            r"^(?: {0,6}(?P<label>[0-9]{1,6}): ",
            r"|(?P<host>(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}|[a-z][a-z0-9-]*[0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*|localhost)): )?",
            r"(?:\[default(?P<local>[0-9]{1,5})\]: ?)?",
            r"(?:\[rank(?P<rank>[0-9]{1,6})\]: ?)*",
        ))
        .expect("the prefix pattern compiles")
    })
}

/// False for most lines: no launcher prefix can start there (`may_have_prefix`).
pub fn may_have_prefix(line: &[u8]) -> bool {
    match line.first() {
        Some(b' ') => {
            let pad = line.iter().take_while(|&&b| b == b' ').count();
            pad <= 6 && line.get(pad).is_some_and(u8::is_ascii_digit) && may_have_prefix(&line[pad..])
        }
        Some(c) if c.is_ascii_digit() || c.is_ascii_lowercase() => {
            let space = memchr::memchr(b' ', line).unwrap_or(line.len());
            space > 1 && memchr::memchr(b':', &line[1..space]).is_some()
        }
        _ => line.starts_with(b"[default") || line.starts_with(b"[rank"),
    }
}

/// The prefix of an ASCII line (`split_prefix`).
pub fn split(line: &str) -> Prefix {
    let none = Prefix { body: 0, rank: None, local_rank: None, node: None };
    if !may_have_prefix(line.as_bytes()) {
        return none;
    }
    let caps = match pattern().captures(line) {
        Some(c) if c.get(0).is_some_and(|m| m.end() > 0) => c,
        _ => return none,
    };
    let int = |name: &str| caps.name(name).map(|m| m.as_str().parse::<i64>().expect("digits"));
    let mut rank = int("rank");
    let local_rank = int("local");
    let mut node = caps.name("host").map(|m| (m.start(), m.end()));
    if let Some(label) = caps.name("label") {
        if local_rank.is_none() && rank.is_none() {
            // the srun task id is the global rank when each task is one process
            rank = Some(label.as_str().parse::<i64>().expect("digits"));
        } else {
            node = Some((label.start(), label.end()));
        }
    }
    Prefix { body: caps.get(0).map_or(0, |m| m.end()), rank, local_rank, node }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_of(line: &str) -> Option<&str> {
        split(line).node.map(|(a, b)| &line[a..b])
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
