//! `|`-separated `key: value` records around a mark (`parsers/megatron.py`'s iteration lines,
//! declared in `megatron.CORE_RECORD`): the mark is the declaration's pattern (groups 1 and 2
//! the counter and the total), found as `re.finditer` finds it; the keys are the declaration's
//! key table's, asked through its `spec_of` (`tuimon._core.Records`).

use crate::template::{self, Template};
use regex::Regex;

/// A record reader's declaration, compiled.
pub struct RecordRules {
    /// a record's mark: group 1 the counter, group 2 the total
    pub mark: Regex,
    /// its template, where it is a plain sequence (three groups at most)
    template: Option<Template>,
    /// a form whose counter counts within an epoch, renumbered through the run
    pub epoch: Option<EpochRule>,
    /// integer fields whose value over 0 sends the line to the hook (it makes a failure event)
    pub vetoes: Vec<String>,
    /// the field the losses go into, and the tag `spec_of` answers for a loss key
    pub losses: String,
    pub loss_tag: String,
}

/// A record form that counts its iterations within an epoch (NeMo 2's progress printer): lines
/// starting with `start` whose `pattern` matches at their start (groups 1 to 3: the epoch, the
/// epoch's last counter, the run's step) are the step of the run, done at the end of the epoch at
/// least: `(epoch + 1) * (last + 1) - 1`.
pub struct EpochRule {
    pub start: String,
    pub pattern: Regex,
}

impl EpochRule {
    /// (step, total) of a line of this form; None where its numbers do not fit an i64 (the hook's).
    fn renumbered(&self, body: &str) -> Option<Option<(i64, i64)>> {
        if !body.starts_with(self.start.as_str()) {
            return Some(None);
        }
        let caps = match self.pattern.captures(body) {
            Some(c) if c.get(0).is_some_and(|m| m.start() == 0) => c,
            _ => return Some(None), // not the whole form: the mark's own numbers
        };
        let group = |g: usize| caps.get(g).and_then(|m| counter(m.as_str()));
        let (epoch, last, step) = (group(1)?, group(2)?, group(3)?);
        let total = epoch.checked_add(1)?.checked_mul(last.checked_add(1)?)?.checked_sub(1)?;
        Some(Some((step, total)))
    }
}

/// What the mark's template makes of a line: its one mark's counter and total (None: past an
/// i64), no single mark (none, or two or more), or a line the regex is to read.
enum Found {
    Match(Option<i64>, Option<i64>),
    NoMatch,
    GaveUp,
}

impl RecordRules {
    pub fn new(mark: Regex, epoch: Option<EpochRule>, vetoes: Vec<String>, losses: String, loss_tag: String) -> Self {
        let template = Template::of(mark.as_str()).filter(|t| t.slots().len() <= 3);
        RecordRules { mark, template, epoch, vetoes, losses, loss_tag }
    }

    /// `one_mark`'s look by the mark's template (see `template`): a plain sequence, read without
    /// the regex's captures (0.3 us a line).
    fn templated_mark(&self, body: &str) -> Found {
        let Some(t) = &self.template else { return Found::GaveUp };
        let mut slots = [None; 3];
        let bytes = body.as_bytes();
        let (start, end) = match t.find_at(bytes, 0, &mut slots) {
            template::Found::Match(a, z) => (a, z),
            template::Found::NoMatch => return Found::NoMatch,
            template::Found::GaveUp => return Found::GaveUp,
        };
        let group = |g: usize| slots[g].and_then(|(a, z): (usize, usize)| counter(&body[a..z]));
        let (it, total) = (group(1), group(2));
        match t.find_at(bytes, end.max(start + 1).min(body.len()), &mut slots) {
            template::Found::Match(..) => Found::NoMatch,
            template::Found::NoMatch => Found::Match(it, total),
            template::Found::GaveUp => Found::GaveUp,
        }
    }

    /// The (counter, total) of a line holding exactly one mark whose numbers fit an i64; None
    /// for any other line (none; several: ranks writing at once; a counter past i64).  `locs`:
    /// the mark's capture slots, reused from line to line.
    pub fn one_mark(&self, body: &str, locs: &mut regex::CaptureLocations) -> Option<(i64, i64)> {
        let marked = match self.templated_mark(body) {
            Found::Match(it, total) => (it?, total?),
            Found::NoMatch => return None,
            Found::GaveUp => {
                let (start, end) = self.mark.captures_read(locs, body).map(|m| (m.start(), m.end()))?;
                // a second mark after it (non-overlapping, as finditer walks): ranks writing at once
                if self.mark.find_at(body, end.max(start + 1).min(body.len())).is_some() {
                    return None;
                }
                let group = |g: usize| locs.get(g).and_then(|(a, z)| counter(&body[a..z]));
                (group(1)?, group(2)?)
            }
        };
        match &self.epoch {
            Some(rule) => rule.renumbered(body).map(|found| found.unwrap_or(marked)),
            None => Some(marked),
        }
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
        RecordRules::new(
            Regex::new(r"iteration[ =]+(\d+)/ *(\d+) *\|").unwrap(),
            Some(EpochRule {
                start: "Training epoch".into(),
                pattern: Regex::new(r"Training\ epoch (\d+), iteration \d+/(\d+) \|.*?\| global_step: (\d+)\b").unwrap(),
            }),
            vec![],
            "losses".into(),
            "loss".into(),
        )
    }

    struct Marks<'a>(&'a RecordRules, &'a mut regex::CaptureLocations);
    impl Marks<'_> {
        fn one(&mut self, body: &str) -> Option<(i64, i64)> {
            self.0.one_mark(body, self.1)
        }
    }

    #[test]
    fn the_marks_template_reads_what_its_regex_reads() {
        use crate::testing::Draws;
        let pieces = ["iteration", " ", "  ", "=", "12", "7", "/", "100", "|", " |", "x", "99999999999999999999", "é",
                      "iteration 3/ 9 |", "Training epoch 1, iteration 2/5 | a | global_step: 11 "];
        let with = rules();
        assert!(with.template.is_some());
        let mut without = rules();
        without.template = None;
        let (mut a, mut b) = (with.mark.capture_locations(), without.mark.capture_locations());
        let mut d = Draws::new(21);
        let mut marked = 0;
        for _ in 0..50_000 {
            let line: String = (0..d.below(10)).map(|_| pieces[d.below(pieces.len())]).collect();
            let want = without.one_mark(&line, &mut b);
            marked += usize::from(want.is_some());
            assert_eq!(with.one_mark(&line, &mut a), want, "{line:?}");
        }
        assert!(marked > 1000, "{marked}");
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
        // an epoch's counter, renumbered through the run; the form unfinished: the mark's numbers
        assert_eq!(r.one("Training epoch 2, iteration 5/49 | lr: 1e-05 | global_step: 105 | x: 1"), Some((105, 149)));
        assert_eq!(r.one("Training epoch 0, iteration 1/2 |"), Some((1, 2)));
        assert_eq!(r.one("Training epoch 99999999999999999999, iteration 1/2 | a | global_step: 3 |"), None);
    }
}
