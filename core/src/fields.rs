//! Lines read by a declared regex into numbers: the rule kind "a line whose pattern's groups are
//! numbers" (`parsers.megatron.CORE_EFFECTIVE`, `parsers.deepspeed.CORE_STEP`, ...). Everything a
//! reader looks for is its declaration's: the pattern, the groups read (floats as `to_float`
//! reads them, ints as `to_int` does), a pattern whose line goes to the hook first, a tag whose
//! number is read too (`[Rank N]`), and a second pattern searched after the first's match.

use crate::numbers;
use crate::template::{Groups, Templated};

/// A value read: a float group, an int group or a tag.
#[derive(Clone, Copy, Debug, PartialEq, pyo3::IntoPyObject)]
pub enum Value {
    F(f64),
    I(i64),
}

/// How a group is read: as `to_float`, `to_int` or a format's `si` type read it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Float,
    Int,
    Si,
}

/// A group read, and how.
#[derive(Clone, Copy, Debug)]
pub struct Group {
    pub number: usize,
    pub kind: Kind,
}

/// A pattern (read by its template where it has one: see `template`) and its groups read.
#[derive(Debug)]
pub struct Reading {
    pub pattern: Templated,
    pub groups: Vec<Group>,
}

impl Reading {
    pub fn new(pattern: regex::Regex, groups: Vec<Group>) -> Reading {
        Reading { pattern: Templated::new(pattern), groups }
    }

    /// A multi-line pattern's (a data rule's: `^` and `$` at a line's ends), searched in a line alone.
    pub fn of_line(pattern: regex::Regex, groups: Vec<Group>) -> Reading {
        Reading { pattern: Templated::of_line(pattern), groups }
    }
}

/// A reader: its pattern and groups, the line's hook first where `hook_if` matches, the tag's
/// number read after the groups (`tag`: its group 1), then the groups of `then`, searched from the
/// end of the pattern's match.
#[derive(Debug)]
pub struct Fields {
    pub main: Reading,
    /// a line holding a second match after the first is the hook's (a data rule's lines: Python's
    /// engine makes an event of each match)
    pub once: bool,
    pub hook_if: Option<regex::Regex>,
    pub tag: Option<Reading>,
    pub then: Option<Reading>,
}

/// The groups of a reader's searches, reused from line to line.
pub struct Scratches {
    main: Groups,
    tag: Option<Groups>,
    then: Option<Groups>,
}

/// What a reader makes of a line.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// no match: nothing
    Nothing,
    /// a value only Python reads (or the hook goes first): the hook reads the line
    Hook,
    /// its values, in the order of the groups, the tag, then `then`'s groups (None: not there)
    Read(Vec<Option<Value>>),
}

/// An int group as `to_int` reads it, for plain digits without a leading zero (the hook tells "0"
/// from "00"): None, ask Python.
fn plain_int(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() > 1 && b[0] == b'0' {
        return None;
    }
    numbers::fast_int(text).filter(|_| b.iter().all(u8::is_ascii_digit))
}

/// A number with an SI suffix as the `si` type reads it (`parsers.schema._si`: the number as
/// `to_float` reads it, times 1e3 for `K`...), for a plain number and one suffix letter alone
/// (`1.31M`, `107K`, `104`): None, ask Python.
fn si(text: &str) -> Option<f64> {
    let (number, scale) = match text.as_bytes().last()? {
        b'K' => (&text[..text.len() - 1], 1e3),
        b'M' => (&text[..text.len() - 1], 1e6),
        b'B' | b'G' => (&text[..text.len() - 1], 1e9),
        b'T' => (&text[..text.len() - 1], 1e12),
        b'P' => (&text[..text.len() - 1], 1e15),
        _ => (text, 1.0),
    };
    let b = number.as_bytes();
    let lead = b.first().copied()?;
    if !(lead.is_ascii_digit() || lead == b'.' || lead == b'-' || lead == b'+')
        || !b.iter().all(|c| c.is_ascii_digit() || b"+-.eE".contains(c)) {
        return None;
    }
    numbers::fast_float(number).map(|v| v * scale)
}

/// `groups` of the match in `s` appended to `out`; false where one is a value only Python reads.
fn take(body: &str, s: &Groups, groups: &[Group], out: &mut Vec<Option<Value>>) -> bool {
    for g in groups {
        match s.get(g.number) {
            None => out.push(None),
            Some((a, z)) => {
                let text = &body[a..z];
                let value = match g.kind {
                    Kind::Int => plain_int(text).map(Value::I),
                    Kind::Float => numbers::fast_float(text).map(Value::F),
                    Kind::Si => si(text).map(Value::F),
                };
                match value {
                    Some(v) => out.push(Some(v)),
                    None => return false,
                }
            }
        }
    }
    true
}

impl Fields {
    /// How many values a line read gives: the groups, the tag's, `then`'s groups.
    pub fn width(&self) -> usize {
        self.main.groups.len() + usize::from(self.tag.is_some()) + self.then.as_ref().map_or(0, |t| t.groups.len())
    }

    pub fn scratches(&self) -> Scratches {
        Scratches { main: self.main.pattern.groups(), tag: self.tag.as_ref().map(|t| t.pattern.groups()),
                    then: self.then.as_ref().map(|t| t.pattern.groups()) }
    }

    pub fn read(&self, body: &str, s: &mut Scratches) -> Verdict {
        if self.hook_if.as_ref().is_some_and(|p| p.is_match(body)) {
            return Verdict::Hook;
        }
        let Some((start, end)) = self.main.pattern.captures_at(body, 0, &mut s.main) else {
            return Verdict::Nothing;
        };
        if self.once {  // (where `re` searches on from: past an empty match by one)
            let next = if end > start { end } else { end + 1 };
            if next <= body.len() && self.main.pattern.regex.is_match_at(body, next) {
                return Verdict::Hook;
            }
        }
        let mut values = Vec::with_capacity(self.main.groups.len() + 3);
        if !take(body, &s.main, &self.main.groups, &mut values) {
            return Verdict::Hook;
        }
        if let (Some(tag), Some(ts)) = (&self.tag, s.tag.as_mut()) {
            match tag.pattern.captures_at(body, 0, ts).and_then(|_| ts.get(1)) {
                None => values.push(None),
                Some((a, z)) => match numbers::fast_int(&body[a..z]) {
                    Some(v) => values.push(Some(Value::I(v))),
                    None => return Verdict::Hook,
                },
            }
        }
        if let (Some(then), Some(ts)) = (&self.then, s.then.as_mut()) {
            if then.pattern.captures_at(body, end, ts).is_some() {
                if !take(body, ts, &then.groups, &mut values) {
                    return Verdict::Hook;
                }
            } else {
                values.extend(std::iter::repeat_n(None, then.groups.len()));
            }
        }
        Verdict::Read(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(pattern: &str, groups: &[(usize, bool)]) -> Reading {
        Reading::new(regex::Regex::new(pattern).unwrap(),
                     groups.iter().map(|&(number, int)| Group { number, kind: if int { Kind::Int } else { Kind::Float } })
                         .collect())
    }

    fn read(f: &Fields, body: &str) -> Verdict {
        f.read(body, &mut f.scratches())
    }

    // (test data: a made-up line shape, not any format's)
    #[test]
    fn groups_tag_and_then() {
        let f = Fields { main: reading(r"n=(\d+) x=(\S+)", &[(1, true), (2, false)]), once: false,
                         hook_if: Some(regex::Regex::new(r"old").unwrap()),
                         tag: Some(reading(r"<(\d+)>", &[])),
                         then: Some(reading(r"m=(\S+)", &[(1, false)])) };
        assert_eq!(read(&f, "<3> n=12 x=0.5 m=2"),
                   Verdict::Read(vec![Some(Value::I(12)), Some(Value::F(0.5)), Some(Value::I(3)), Some(Value::F(2.0))]));
        // `then` is searched after the match only
        assert_eq!(read(&f, "m=2 n=12 x=0.5"),
                   Verdict::Read(vec![Some(Value::I(12)), Some(Value::F(0.5)), None, None]));
        assert_eq!(read(&f, "nothing"), Verdict::Nothing);
        assert_eq!(read(&f, "old n=1 x=1"), Verdict::Hook);
        // what only Python reads: a leading zero, a lenient float, a long int
        assert_eq!(read(&f, "n=01 x=1"), Verdict::Hook);
        assert_eq!(read(&f, "n=1 x=1,5"), Verdict::Hook);
        assert_eq!(read(&f, "n=1234567890123456789 x=1"), Verdict::Hook);
        assert_eq!(read(&f, "n=0 x=1 m=1x"), Verdict::Hook);
        assert_eq!(read(&f, "n=0 x=1"), Verdict::Read(vec![Some(Value::I(0)), Some(Value::F(1.0)), None, None]));
    }

    #[test]
    fn once_leaves_a_line_of_two_matches_and_si_reads_a_suffix() {
        let mut main = reading(r"n=(\d+) x=(\S+)", &[(1, true), (2, false)]);
        main.groups[1].kind = Kind::Si;
        let f = Fields { main, once: true, hook_if: None, tag: None, then: None };
        assert_eq!(read(&f, "n=1 x=1.31M"), Verdict::Read(vec![Some(Value::I(1)), Some(Value::F(1.31 * 1e6))]));
        assert_eq!(read(&f, "n=1 x=107K n=2"), Verdict::Read(vec![Some(Value::I(1)), Some(Value::F(107e3))]));
        assert_eq!(read(&f, "n=1 x=104 n=2 x=5"), Verdict::Hook);  // a second match: Python's
        for odd in ["1.3Mx", "M", "inf", "1,5K", "1..5", "K5"] {
            assert_eq!(read(&f, &format!("n=1 x={odd}")), Verdict::Hook, "{odd}");
        }
        assert_eq!(si("-2.5e3G"), Some(-2.5e3 * 1e9));
        assert_eq!(si(".5T"), Some(0.5 * 1e12));
    }
}
