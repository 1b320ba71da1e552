//! Timer lines read into columns: what `parsers/timers.py`'s `_on_time_line` and
//! `_on_minmax` make of a plain line (a `|`-separated list after the declaration's anchor, or a
//! line of its `(min, max)` pattern), without an event object a line.  A line whose reading
//! needs the hook's state or a Python number reader (a timer the declaration hands to the hook,
//! the first of the announcing prefix, a comms-logger line's `n/a`, non-ASCII text) is handed
//! back to the hook (`Read::Hook`).  Every name, anchor and pattern is the declaration's
//! (`parsers.timers.CORE`): none is written here.

use crate::numbers::{fast_float, py_strip};
use crate::text::{mark, space};
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
    pub minmax: MinMaxShape,
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

/// A `(min, max)` line's shape (`parsers.timers.MINMAX_SHAPE`, whose regex `MINMAX` is made of
/// it): optional spaces, a name (a non-space, then any characters, as few as match), a space and
/// at least two `leader`s, `after`; then a pair, `open` min `comma` and a space, max `close`, or
/// a value alone (no space, `comma`, `open` or `close`); spaces to the end.  Read without a
/// regex: the regex's capture engines took 0.8 us a line, the shape reads it in a pass.
#[derive(Debug, Clone)]
pub struct MinMaxShape {
    pub leader: u8,
    pub after: Vec<u8>,
    pub open: u8,
    pub comma: u8,
    pub close: u8,
}

impl MinMaxShape {
    /// Each of `leader`, `open`, `comma` and `close` one ASCII punctuation character, each other;
    /// `after` ASCII, not starting with `leader` (so that the leaders' run ends where it reads
    /// as the regex reads it, longest first, with no other way to match).
    pub fn new(leader: &str, after: &str, open: &str, comma: &str, close: &str) -> Result<Self, String> {
        let one = |name: &str, text: &str| mark("shape", name, text);
        let shape = MinMaxShape { leader: one("leader", leader)?, after: after.as_bytes().to_vec(), open: one("open", open)?,
                                  comma: one("comma", comma)?, close: one("close", close)? };
        let marks = [shape.leader, shape.open, shape.comma, shape.close];
        if marks.iter().enumerate().any(|(i, m)| marks[..i].contains(m)) {
            return Err("the shape's leader, open, comma and close are not four characters".into());
        }
        if !after.is_ascii() || after.is_empty() || shape.after[0] == shape.leader {
            return Err(format!("the shape's \"after\" cannot follow its leaders: {after:?}"));
        }
        Ok(shape)
    }

    /// The name's and the max's byte ranges in an ASCII `body` (the regex's groups 1, and 3 or 4).
    pub fn read(&self, body: &[u8]) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
        let s = body.iter().position(|&b| !space(b))?;
        let mut from = s + 1; // (the name is at least its first character)
        while let Some(i) = memchr::memchr(b' ', &body[from..]) {
            let p = from + i;
            from = p + 1;
            let leaders = body[p + 1..].iter().take_while(|&&b| b == self.leader).count();
            let t = p + 1 + leaders;
            if leaders < 2 || !body[t..].starts_with(&self.after) {
                continue;
            }
            if let Some(max) = self.tail(body, t + self.after.len()) {
                return Some((s..p, max));
            }
        }
        None
    }

    /// The max of what follows `after` (from `t`), if it reads to the end: each run is the longest
    /// (what may follow a run is a character it cannot hold), so the first way to read is the only one.
    fn tail(&self, b: &[u8], t: usize) -> Option<std::ops::Range<usize>> {
        let value = |c: &u8| *c != self.comma && *c != self.open && *c != self.close;
        let blank = |at: usize| b[at..].iter().all(|&c| space(c));
        if b.get(t) == Some(&self.open) {
            let a = t + 1;
            let e = a + b[a..].iter().take_while(|c| value(c)).count();
            if e > a && b.get(e) == Some(&self.comma) && b.get(e + 1) == Some(&b' ') {
                let a = e + 2;
                let e = a + b[a..].iter().take_while(|c| value(c)).count();
                if e > a && b.get(e) == Some(&self.close) && blank(e + 1) {
                    return Some(a..e);
                }
            }
        }
        let e = t + b[t..].iter().take_while(|c| value(c) && !space(**c)).count();
        (e > t && blank(e)).then_some(t..e)
    }
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
        let Some((name, max)) = self.minmax.read(body.as_bytes()) else { return Read::Nothing };
        match fast_float(&body[max]) {
            Some(v) => self.checked(vec![(py_strip(&body[name]), v)], body, offload_said),
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
            minmax: MinMaxShape::new(".", ": ", "(", ",", ")").unwrap(),
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

    /// The shape reads every ASCII line as its regex (`parsers.timers.MINMAX`) does: random lines
    /// of the characters that matter, and lines made of the shape's parts with one changed.
    #[test]
    fn the_min_max_shape_reads_as_its_regex() {
        let regex = Regex::new(r"^\s*(\S.*?) \.{2,}: (?:\(([^,()]+), ([^,()]+)\)|([^\s,()]+))\s*$").unwrap();
        let shape = MinMaxShape::new(".", ": ", "(", ",", ")").unwrap();
        let by_regex = |line: &str| regex.captures(line).map(|c| {
            let max = c.get(3).or_else(|| c.get(4)).unwrap();
            (c.get(1).unwrap().range(), max.range())
        });
        let alphabet = [" ", ".", ":", "(", ")", ",", "a", "1", "\t", "\x0b", "\r", "-", "..", ": ", ", ", " ..", "\x1c"];
        let parts = ["  ", "fwd-bwd", " ", "....", ": ", "(", "1.5", ", ", "2.5", ")", " "];
        let mut draws = crate::testing::Draws::new(0x2545_f491_4f6c_dd1d);
        let mut next = |n: usize| draws.below(n);
        let (mut matched, mut lines) = (0, 0);
        for round in 0..200_000 {
            let line: String = if round % 2 == 0 {
                (0..next(24)).map(|_| alphabet[next(alphabet.len())]).collect()
            } else {
                let mut p: Vec<&str> = parts.to_vec();
                let k = next(p.len());
                p[k] = alphabet[next(alphabet.len())];
                if next(3) == 0 {
                    p.insert(next(p.len()), alphabet[next(alphabet.len())]);
                }
                p.concat()
            };
            let want = by_regex(&line);
            assert_eq!(shape.read(line.as_bytes()), want, "{line:?}");
            matched += usize::from(want.is_some());
            lines += 1;
        }
        assert!(matched > lines / 10, "{matched} of {lines} lines matched: the lines do not test the shape");
    }

    #[test]
    fn a_shape_that_reads_two_ways_is_refused() {
        assert!(MinMaxShape::new(".", ".: ", "(", ",", ")").is_err());
        assert!(MinMaxShape::new(".", ": ", "(", "(", ")").is_err());
        assert!(MinMaxShape::new("ab", ": ", "(", ",", ")").is_err());
        assert!(MinMaxShape::new(".", "", "(", ",", ")").is_err());
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
