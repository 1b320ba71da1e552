//! Timer lines read into columns: what `parsers/timers.py`'s `_on_time_line` and
//! `_on_minmax` make of a plain line (`time (ms) | a: 1 | b: 2`, `name ....: (min, max)`),
//! without an event object a line.  A line whose reading needs the hook's state or a
//! Python number reader (a checkpoint save, the first offloading timer, a comms-logger
//! line, `n/a`, non-ASCII text) is handed back to the hook (`Read::Hook`).

use crate::numbers::{fast_float, py_strip};
use regex::Regex;

/// What one line gives.
#[derive(Debug, PartialEq)]
pub enum Read {
    /// nothing (the hook gives no event for it either)
    Nothing,
    /// the hook must read it
    Hook,
    /// timers (name, ms) in the order a Python dict keeps them, and the line's `[Rank N]` tag
    Timers(Vec<(String, f64)>, Option<i64>),
    /// one collective's time (DeepSpeed's comms logger): the op, its ms, the line's rank tag
    CommOp(String, f64, Option<i64>),
}

/// The longest op name kept (`TimerParser._comm_op`).
const MAX_OP: usize = 120;

/// The most pairs a list keeps (`timers.pairs`).
const MAX_PAIRS: usize = 256;

/// Python's `str.isspace` holds for \x1c-\x1f, the regex crate's `\s` does not: such lines,
/// and any that is not ASCII, go to the hook.
fn plain(body: &str) -> bool {
    body.bytes().all(|b| b.is_ascii() && !(0x1c..=0x1f).contains(&b))
}

/// `timers.pairs(text)`: `|`-separated parts, each split at its last colon; None when a
/// value is not a plain number (Python's `to_float` decides those).
fn pairs(text: &str) -> Option<Vec<(String, f64)>> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for seg in text.split('|') {
        let Some((name, value)) = seg.rsplit_once(':') else { continue };
        let v = fast_float(value)?;
        let name = py_strip(name);
        if name.is_empty() || out.len() >= MAX_PAIRS {
            continue;
        }
        match out.iter_mut().find(|(n, _)| n == name) {
            Some(pair) => pair.1 = v, // a dict keeps a name's first place and its last value
            None => out.push((name.to_string(), v)),
        }
    }
    Some(out)
}

/// `common.rank_tag`: the first `[Rank N]` (1-6 digits) of the line.
pub fn rank_tag(body: &str) -> Option<i64> {
    let bytes = body.as_bytes();
    let mut from = 0;
    while let Some(i) = memchr::memmem::find(&bytes[from..], b"[Rank ") {
        let start = from + i + 6;
        let digits = bytes[start..].iter().take_while(|b| b.is_ascii_digit()).count();
        if (1..=6).contains(&digits) && bytes.get(start + digits) == Some(&b']') {
            return body[start..start + digits].parse().ok();
        }
        from = from + i + 1;
    }
    None
}

/// `TimerParser._timers`'s checks on a plain line's timers.  `offload_said`: the run's
/// offloading was announced, or will be by a line before this one (the first line with an
/// offloading timer goes to the hook, which announces it; the lines after it need not).
fn checked(timers: Vec<(String, f64)>, body: &str, offload_said: &mut bool) -> Read {
    if timers.is_empty() {
        return Read::Nothing;
    }
    // a save's time belongs to the save announced before it
    if timers.iter().any(|(n, _)| n == "save-checkpoint") {
        return Read::Hook;
    }
    if !*offload_said && timers.iter().any(|(n, _)| n.starts_with("offloading")) {
        *offload_said = true;
        return Read::Hook;
    }
    Read::Timers(timers, tag(body))
}

fn tag(body: &str) -> Option<i64> {
    if body.contains("[Rank") { rank_tag(body) } else { None }
}

/// A `time (ms) | ...` line's body; `comm_op` is the definition's pattern of a comms-logger
/// line's op (`rank=0 | comm op: broadcast | time (ms): 3907.38 | msg size: ...`).
pub fn time_line(comm_op: &Regex, body: &str, offload_said: &mut bool) -> Read {
    if !plain(body) {
        return Read::Hook;
    }
    let Some(pos) = body.find("time (ms)") else { return Read::Nothing };
    let tail = &body[pos + 9..];
    if let Some(rest) = tail.strip_prefix(':') {
        // one collective's time: no breakdown, its sizes and bandwidths are no timers
        let Some(op) = comm_op.captures(body).and_then(|c| c.get(1)) else { return Read::Nothing };
        let op = py_strip(op.as_str());
        let Some(ms) = fast_float(rest.split('|').next().unwrap_or("")) else { return Read::Hook };
        if op.is_empty() {
            return Read::Nothing;
        }
        return Read::CommOp(op[..op.len().min(MAX_OP)].to_string(), ms, tag(body));
    }
    match pairs(tail) {
        Some(timers) => checked(timers, body, offload_said),
        None => Read::Hook,
    }
}

/// A `name ....: (min, max)` (or `name ....: max`) line's body, read by the definition's
/// regex `minmax`: the max is its third group, or its fourth.
pub fn minmax_line(minmax: &Regex, body: &str, offload_said: &mut bool) -> Read {
    if !plain(body) {
        return Read::Hook;
    }
    let Some(caps) = minmax.captures(body) else { return Read::Nothing };
    let (Some(name), Some(max)) = (caps.get(1), caps.get(3).or_else(|| caps.get(4))) else { return Read::Nothing };
    match fast_float(max.as_str()) {
        Some(v) => checked(vec![(py_strip(name.as_str()).to_string(), v)], body, offload_said),
        None => Read::Hook,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timers(read: Read) -> Vec<(String, f64)> {
        match read {
            Read::Timers(t, _) => t,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_lists_as_a_python_dict_does() {
        let said = &mut true;
        let c = &comm();
        let t = timers(time_line(c, "time (ms) | a: 1.5 | b : 2 | a: 3 | junk | c:: 4", said));
        assert_eq!(t, vec![("a".into(), 3.0), ("b".into(), 2.0), ("c:".into(), 4.0)]);
        assert_eq!(time_line(c, "time (ms) | a: n/a", said), Read::Hook);
        assert_eq!(time_line(c, "time (ms) | save-checkpoint: 5.0", said), Read::Hook);
        assert_eq!(time_line(c, "time (ms)", said), Read::Nothing);
        assert_eq!(time_line(c, "time (ms) | é: 1", said), Read::Hook);
    }

    fn comm() -> Regex {
        Regex::new(r"\bcomm op: ([^|]*?)\s*\|").unwrap()
    }

    #[test]
    fn reads_comms_logger_lines() {
        let (c, said) = (&comm(), &mut false);
        assert_eq!(time_line(c, "[Rank 2] rank=2 | comm op: all_reduce | time (ms): 3.5 | msg size: 1 KB", said),
                   Read::CommOp("all_reduce".into(), 3.5, Some(2)));
        assert_eq!(time_line(c, "x time (ms): 3.0 | msg size: 1", said), Read::Nothing);
        assert_eq!(time_line(c, "comm op:  | time (ms): 3.0 |", said), Read::Nothing);
        assert_eq!(time_line(c, "comm op: x | time (ms): n/a |", said), Read::Hook);
        assert_eq!(time_line(c, "xcomm op: x | time (ms): 1 |", said), Read::Nothing);
    }

    #[test]
    fn the_first_offloading_line_goes_to_the_hook() {
        let (c, said) = (&comm(), &mut false);
        assert_eq!(time_line(c, "time (ms) | a: 1", said), Read::Timers(vec![("a".into(), 1.0)], None));
        assert_eq!(time_line(c, "time (ms) | offloading-x: 5.0", said), Read::Hook);
        assert!(*said);
        assert!(matches!(time_line(c, "[Rank 3] time (ms) | offloading-x: 5.0", said), Read::Timers(_, Some(3))));
    }

    #[test]
    fn finds_the_first_well_formed_rank_tag() {
        assert_eq!(rank_tag("[Rank x] [Rank 12] [Rank 3]"), Some(12));
        assert_eq!(rank_tag("[Rank 1234567]"), None);
        assert_eq!(rank_tag("[Rank ]"), None);
    }

    #[test]
    fn reads_min_max_lines_by_the_definition() {
        let re = Regex::new(r"^\s*(\S.*?) \.{2,}: (?:\(([^,()]+), ([^,()]+)\)|([^\s,()]+))\s*$").unwrap();
        let said = &mut true;
        let t = timers(minmax_line(&re, "    forward-compute ....: (1000.12, 1100.34)", said));
        assert_eq!(t, vec![("forward-compute".into(), 1100.34)]);
        assert_eq!(minmax_line(&re, "nothing here", said), Read::Nothing);
        assert_eq!(minmax_line(&re, "  a ..: (1, inf)", said), Read::Hook);
        let t = timers(minmax_line(&re, "    forward-backward ....: 4670.69 ", said));
        assert_eq!(t, vec![("forward-backward".into(), 4670.69)]);
        assert_eq!(minmax_line(&re, "    forward-backward ....: (4670.69)", said), Read::Nothing);
    }
}
