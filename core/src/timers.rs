//! Timer lines read into columns: what `parsers/timers.py`'s `_on_time_line` and
//! `_on_minmax` make of a plain line (a `|`-separated list after the declaration's anchor, or a
//! line of its `(min, max)` pattern), without an event object a line.  A line whose reading
//! needs the hook's state or a Python number reader (a timer the declaration hands to the hook,
//! the first of the announcing prefix, a comms-logger line's `n/a`, non-ASCII text) is handed
//! back to the hook (`Read::Hook`).  Every name, anchor and pattern is the declaration's
//! (`parsers.timers.CORE`): none is written here.

use crate::numbers::{fast_float, py_strip};
use regex::Regex;

/// What one line gives.
#[derive(Debug, PartialEq)]
pub enum Read<'a> {
    /// nothing (the hook gives no event for it either)
    Nothing,
    /// the hook must read it
    Hook,
    /// timers (name, ms) in the order a Python dict keeps them, and the line's rank tag
    Timers(Vec<(&'a str, f64)>, Option<i64>),
    /// one collective's time (DeepSpeed's comms logger): the op, its ms, the line's rank tag
    CommOp(&'a str, f64, Option<i64>),
}

/// The longest op name kept (`TimerParser._comm_op`).
const MAX_OP: usize = 120;

/// The most pairs a list keeps (`timers.pairs`).
const MAX_PAIRS: usize = 256;

/// A timer reader's declaration (`parsers.timers.CORE`), compiled.
pub struct TimerRules {
    /// what starts a list (its pairs follow; a colon right after it makes a comms-logger line)
    pub list_anchor: String,
    /// a `(min, max)` line: the name is group 1, the max group 3, or group 4 alone
    pub minmax: Regex,
    /// a comms-logger line's op, group 1
    pub comm_op: Regex,
    /// timers whose line the hook reads (a save's time belongs to the save announced before it)
    pub to_hook: Vec<String>,
    /// a timer name prefix whose first line the hook reads (it announces what they are)
    pub announce: String,
    /// a rank tag's anchor, and its pattern (the rank: the first digits of its match)
    pub rank_anchor: String,
    pub rank_tag: Regex,
}

/// Python's `str.isspace` holds for \x1c-\x1f, the regex crate's `\s` does not: such lines,
/// and any that is not ASCII, go to the hook.
fn plain(body: &str) -> bool {
    crate::text::plain(body.as_bytes())
}

/// `timers.pairs(text)`: `|`-separated parts, each split at its last colon; None when a
/// value is not a plain number (Python's `to_float` decides those).
fn pairs(text: &str) -> Option<Vec<(&str, f64)>> {
    let mut out: Vec<(&str, f64)> = Vec::new();
    for seg in text.split('|') {
        let Some(at) = memchr::memrchr(b':', seg.as_bytes()) else { continue };
        let (name, value) = (&seg[..at], &seg[at + 1..]);
        let v = fast_float(value)?;
        let name = py_strip(name);
        if name.is_empty() || out.len() >= MAX_PAIRS {
            continue;
        }
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(pair) => pair.1 = v, // a dict keeps a name's first place and its last value
            None => out.push((name, v)),
        }
    }
    Some(out)
}

impl TimerRules {
    /// `common.rank_or`'s tag: the first match of the rank pattern, on a line holding its anchor
    /// (`find`, not `captures`: a timer line a rank writes carries one, and captures cost 7 %).
    pub fn tag(&self, body: &str) -> Option<i64> {
        if !body.contains(self.rank_anchor.as_str()) {
            return None;
        }
        // the tag's digits: the match less the pattern's text before and after its group
        let m = self.rank_tag.find(body)?;
        let digits = m.as_str().trim_start_matches(|c: char| !c.is_ascii_digit());
        digits[..digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len())].parse().ok()
    }

    /// `TimerParser._timers`'s checks on a plain line's timers.  `offload_said`: the run's
    /// announcing prefix was announced, or will be by a line before this one (the first line
    /// with such a timer goes to the hook, which announces it; the lines after it need not).
    fn checked<'a>(&self, timers: Vec<(&'a str, f64)>, body: &str, offload_said: &mut bool) -> Read<'a> {
        if timers.is_empty() {
            return Read::Nothing;
        }
        if timers.iter().any(|(n, _)| self.to_hook.iter().any(|h| h == n)) {
            return Read::Hook;
        }
        if !*offload_said && timers.iter().any(|(n, _)| n.starts_with(self.announce.as_str())) {
            *offload_said = true;
            return Read::Hook;
        }
        Read::Timers(timers, self.tag(body))
    }

    /// A list line's body (the list after the anchor), or a comms-logger line (a colon right
    /// after the anchor: one collective's time, no breakdown, its sizes and bandwidths no timers).
    pub fn time_line<'a>(&self, body: &'a str, offload_said: &mut bool) -> Read<'a> {
        if !plain(body) {
            return Read::Hook;
        }
        let Some(pos) = body.find(self.list_anchor.as_str()) else { return Read::Nothing };
        let tail = &body[pos + self.list_anchor.len()..];
        if let Some(rest) = tail.strip_prefix(':') {
            let Some(op) = self.comm_op.captures(body).and_then(|c| c.get(1)) else { return Read::Nothing };
            let op = py_strip(op.as_str());
            let Some(ms) = fast_float(rest.split('|').next().unwrap_or("")) else { return Read::Hook };
            if op.is_empty() {
                return Read::Nothing;
            }
            return Read::CommOp(&op[..op.len().min(MAX_OP)], ms, self.tag(body));
        }
        match pairs(tail) {
            Some(timers) => self.checked(timers, body, offload_said),
            None => Read::Hook,
        }
    }

    /// A `(min, max)` line's body: the max is the pattern's third group, or its fourth.
    pub fn minmax_line<'a>(&self, body: &'a str, offload_said: &mut bool) -> Read<'a> {
        if !plain(body) {
            return Read::Hook;
        }
        let Some(caps) = self.minmax.captures(body) else { return Read::Nothing };
        let (Some(name), Some(max)) = (caps.get(1), caps.get(3).or_else(|| caps.get(4))) else { return Read::Nothing };
        match fast_float(max.as_str()) {
            Some(v) => self.checked(vec![(py_strip(&body[name.range()]), v)], body, offload_said),
            None => Read::Hook,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // test data: the shapes of parsers.timers.CORE's declaration
    fn rules() -> TimerRules {
        TimerRules {
            list_anchor: "time (ms)".into(),
            minmax: Regex::new(r"^\s*(\S.*?) \.{2,}: (?:\(([^,()]+), ([^,()]+)\)|([^\s,()]+))\s*$").unwrap(),
            comm_op: Regex::new(r"\bcomm op: ([^|]*?)\s*\|").unwrap(),
            to_hook: vec!["save-checkpoint".into()],
            announce: "offloading".into(),
            rank_anchor: "[Rank".into(),
            rank_tag: Regex::new(r"\[Rank (\d{1,6})\]").unwrap(),
        }
    }

    fn timers(read: Read<'_>) -> Vec<(&str, f64)> {
        match read {
            Read::Timers(t, _) => t,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_lists_as_a_python_dict_does() {
        let said = &mut true;
        let r = rules();
        let t = timers(r.time_line("time (ms) | a: 1.5 | b : 2 | a: 3 | junk | c:: 4", said));
        assert_eq!(t, vec![("a", 3.0), ("b", 2.0), ("c:", 4.0)]);
        assert_eq!(r.time_line("time (ms) | a: n/a", said), Read::Hook);
        assert_eq!(r.time_line("time (ms) | save-checkpoint: 5.0", said), Read::Hook);
        assert_eq!(r.time_line("time (ms)", said), Read::Nothing);
        assert_eq!(r.time_line("time (ms) | é: 1", said), Read::Hook);
    }

    #[test]
    fn reads_comms_logger_lines() {
        let (r, said) = (rules(), &mut false);
        assert_eq!(r.time_line("[Rank 2] rank=2 | comm op: all_reduce | time (ms): 3.5 | msg size: 1 KB", said),
                   Read::CommOp("all_reduce", 3.5, Some(2)));
        assert_eq!(r.time_line("x time (ms): 3.0 | msg size: 1", said), Read::Nothing);
        assert_eq!(r.time_line("comm op:  | time (ms): 3.0 |", said), Read::Nothing);
        assert_eq!(r.time_line("comm op: x | time (ms): n/a |", said), Read::Hook);
        assert_eq!(r.time_line("xcomm op: x | time (ms): 1 |", said), Read::Nothing);
    }

    #[test]
    fn the_first_offloading_line_goes_to_the_hook() {
        let (r, said) = (rules(), &mut false);
        assert_eq!(r.time_line("time (ms) | a: 1", said), Read::Timers(vec![("a", 1.0)], None));
        assert_eq!(r.time_line("time (ms) | offloading-x: 5.0", said), Read::Hook);
        assert!(*said);
        assert!(matches!(r.time_line("[Rank 3] time (ms) | offloading-x: 5.0", said), Read::Timers(_, Some(3))));
    }

    #[test]
    fn finds_the_first_well_formed_rank_tag() {
        assert_eq!(rules().tag("[Rank x] [Rank 12] [Rank 3]"), Some(12));
        assert_eq!(rules().tag("[Rank 1234567]"), None);
        assert_eq!(rules().tag("[Rank ]"), None);
    }

    #[test]
    fn reads_min_max_lines_by_the_definition() {
        let r = rules();
        let said = &mut true;
        let t = timers(r.minmax_line("    forward-compute ....: (1000.12, 1100.34)", said));
        assert_eq!(t, vec![("forward-compute", 1100.34)]);
        assert_eq!(r.minmax_line("nothing here", said), Read::Nothing);
        assert_eq!(r.minmax_line("  a ..: (1, inf)", said), Read::Hook);
        let t = timers(r.minmax_line("    forward-backward ....: 4670.69 ", said));
        assert_eq!(t, vec![("forward-backward", 4670.69)]);
        assert_eq!(r.minmax_line("    forward-backward ....: (4670.69)", said), Read::Nothing);
    }
}
