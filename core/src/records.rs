//! `|`-separated `key: value` records around a mark (`parsers/megatron.py`'s iteration lines,
//! declared in `megatron.CORE_RECORD`): the mark is the declaration's pattern (groups 1 and 2
//! the counter and the total), found as `re.finditer` finds it; the keys are the declaration's
//! key table's, asked through its `spec_of` (`tuimon._core.Records`).

use crate::template::{Groups, Templated};
use regex::Regex;

/// A record reader's declaration, compiled.
pub struct RecordRules {
    /// a record's mark (read by its template where it has one): group 1 the counter, group 2 the total
    pub mark: Templated,
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

impl RecordRules {
    pub fn new(mark: Regex, epoch: Option<EpochRule>, vetoes: Vec<String>, losses: String, loss_tag: String) -> Self {
        RecordRules { mark: Templated::new(mark), epoch, vetoes, losses, loss_tag }
    }

    /// The (counter, total) of a line holding exactly one mark whose numbers fit an i64; None
    /// for any other line (none; several: ranks writing at once; a counter past i64).  `groups`:
    /// the mark's, reused from line to line.
    pub fn one_mark(&self, body: &str, groups: &mut Groups) -> Option<(i64, i64)> {
        let (start, end) = self.mark.captures_at(body, 0, groups)?;
        let group = |g: usize| groups.get(g).and_then(|(a, z)| counter(&body[a..z]));
        let marked = (group(1), group(2));
        // a second mark after it (non-overlapping, as finditer walks): ranks writing at once
        if self.mark.captures_at(body, end.max(start + 1).min(body.len()), groups).is_some() {
            return None;
        }
        let marked = (marked.0?, marked.1?);
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

    struct Marks<'a>(&'a RecordRules, &'a mut Groups);
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
        assert!(with.mark.has_template());
        let mut without = rules();
        without.mark = Templated::without_template(with.mark.regex.clone());
        let (mut a, mut b) = (with.mark.groups(), without.mark.groups());
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
        let mut groups = rules.mark.groups();
        let mut r = Marks(&rules, &mut groups);
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
