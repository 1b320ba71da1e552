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

/// A group read, and how.
#[derive(Clone, Copy, Debug)]
pub struct Group {
    pub number: usize,
    pub int: bool,
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

/// `groups` of the match in `s` appended to `out`; false where one is a value only Python reads.
fn take(body: &str, s: &Groups, groups: &[Group], out: &mut Vec<Option<Value>>) -> bool {
    for g in groups {
        match s.get(g.number) {
            None => out.push(None),
            Some((a, z)) => {
                let text = &body[a..z];
                let value = if g.int { plain_int(text).map(Value::I) } else { numbers::fast_float(text).map(Value::F) };
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
        let Some((_, end)) = self.main.pattern.captures_at(body, 0, &mut s.main) else {
            return Verdict::Nothing;
        };
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
        Reading::new(regex::Regex::new(pattern).unwrap(), groups.iter().map(|&(number, int)| Group { number, int }).collect())
    }

    fn read(f: &Fields, body: &str) -> Verdict {
        f.read(body, &mut f.scratches())
    }

    // (test data: a made-up line shape, not any format's)
    #[test]
    fn groups_tag_and_then() {
        let f = Fields { main: reading(r"n=(\d+) x=(\S+)", &[(1, true), (2, false)]),
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
}
