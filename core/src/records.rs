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
    /// for any other line (none; several: ranks writing at once; a counter past i64).
    pub fn one_mark(&self, body: &str) -> Option<(i64, i64)> {
        if self.skip.iter().any(|s| body.starts_with(s.as_str())) {
            return None;
        }
        let mut found = self.mark.captures_iter(body);
        let (Some(caps), None) = (found.next(), found.next()) else { return None };
        Some((counter(caps.get(1)?.as_str())?, counter(caps.get(2)?.as_str())?))
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

    #[test]
    fn one_mark_a_line() {
        let r = rules();
        assert_eq!(r.one_mark(" iteration       30/      50 | lm loss: 1.0 |"), Some((30, 50)));
        assert_eq!(r.one_mark("iteration=  1/  317892 | x"), Some((1, 317892)));
        assert_eq!(r.one_mark("iteration 1/ 2 |iteration 3/4|"), None);
        assert_eq!(r.one_mark("iterationiteration 5/6 |"), Some((5, 6)));
        assert_eq!(r.one_mark("iteration 1/2 x |"), None);
        assert_eq!(r.one_mark("iteration 99999999999999999999/2 |"), None);
        assert_eq!(r.one_mark("Training epoch 0, iteration 1/2 |"), None);
    }
}
