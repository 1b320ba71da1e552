//! `|`-separated `key: value` records around a mark (`parsers/megatron.py`'s iteration lines,
//! declared in `megatron.CORE_RECORD`): the mark is the declaration's pattern (groups 1 and 2
//! the counter and the total), found as `re.finditer` finds it; the keys are the declaration's
//! key table's, asked through its `spec_of` (`tuimon._core.Records`).

use regex::Regex;

/// A record reader's declaration, compiled.
pub struct RecordRules {
    /// a record's mark: group 1 the counter, group 2 the total
    pub mark: Regex,
    /// lines starting with one of these go to the hook (another form of the same line)
    pub skip: Vec<String>,
    /// integer fields whose value over 0 sends the line to the hook (it makes a failure event)
    pub vetoes: Vec<String>,
    /// the field the losses go into, and the tag `spec_of` answers for a loss key
    pub losses: String,
    pub loss_tag: String,
}

impl RecordRules {
    /// The (counter, total) of a line holding exactly one mark whose numbers fit an i64; None
    /// for any other line (none; several: ranks writing at once; a counter past i64).  `locs`:
    /// the mark's capture slots, reused from line to line.
    pub fn one_mark(&self, body: &str, locs: &mut regex::CaptureLocations) -> Option<(i64, i64)> {
        if self.skip.iter().any(|s| body.starts_with(s.as_str())) {
            return None;
        }
        let (start, end) = self.mark.captures_read(locs, body).map(|m| (m.start(), m.end()))?;
        // a second mark after it (non-overlapping, as finditer walks): ranks writing at once
        if self.mark.find_at(body, end.max(start + 1).min(body.len())).is_some() {
            return None;
        }
        let group = |g: usize| locs.get(g).and_then(|(a, z)| counter(&body[a..z]));
        Some((group(1)?, group(2)?))
    }
}

/// A counter's digits as `to_int` reads them, where they fit an i64.
pub fn counter(digits: &str) -> Option<i64> {
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // test data: the shape of megatron.CORE_RECORD
    fn rules() -> RecordRules {
        RecordRules {
            mark: Regex::new(r"iteration[ =]+(\d+)/ *(\d+) *\|").unwrap(),
            skip: vec!["Training epoch".into()],
            vetoes: vec![],
            losses: "losses".into(),
            loss_tag: "loss".into(),
        }
    }

    struct Marks<'a>(&'a RecordRules, &'a mut regex::CaptureLocations);
    impl Marks<'_> {
        fn one(&mut self, body: &str) -> Option<(i64, i64)> {
            self.0.one_mark(body, self.1)
        }
    }

    #[test]
    fn one_mark_a_line() {
        let rules = rules();
        let mut locs = rules.mark.capture_locations();
        let mut r = Marks(&rules, &mut locs);
        assert_eq!(r.one(" iteration       30/      50 | lm loss: 1.0 |"), Some((30, 50)));
        assert_eq!(r.one("iteration=  1/  317892 | x"), Some((1, 317892)));
        assert_eq!(r.one("iteration 1/ 2 |iteration 3/4|"), None);
        assert_eq!(r.one("iterationiteration 5/6 |"), Some((5, 6)));
        assert_eq!(r.one("iteration 1/2 x |"), None);
        assert_eq!(r.one("iteration 99999999999999999999/2 |"), None);
        assert_eq!(r.one("Training epoch 0, iteration 1/2 |"), None);
    }
}
