//! The stamp a line starts with, read by the declaration `parsers/timestamps.py` hands over
//! (`CORE`; its `line_stamp` is the definition), for ASCII lines without the separators
//! \x1c-\x1f (where the pattern's `\s` means what it means to Python), as POSIX seconds read as UTC.

use crate::numbers::py_space;
use crate::text::{mark, space};

/// A leading stamp reader's declaration (`parsers.timestamps.CORE`): the stamp's shape, and how
/// far into the line the stamp's first dash may lie.
pub struct StampRules {
    pub shape: StampShape,
    pub reach: usize,
}

/// Where a line's leading stamp lies (`parsers.timestamps.STAMP_SHAPE`, whose regex `LEADING` is
/// made of it): spaces; a label between `opener` and `closer` (1 to `label` characters, none a
/// digit or the closer) and spaces; the opener; then `YYYY-MM-DD`, one of `between`, `HH:MM:SS`,
/// and one of `fraction` with 1 to `digits` digits.  Read without a regex: its capture engines
/// took 0.4 us a stamped line (the label and the opener both start with the bracket: the regex
/// needs its backtracker), the shape reads it in a pass, trying each way in the regex's order.
pub struct StampShape {
    pub opener: u8,
    pub closer: u8,
    pub label: usize,
    pub between: Vec<u8>,
    pub fraction: Vec<u8>,
    pub digits: usize,
}

impl StampShape {
    /// `opener` and `closer` two ASCII punctuation characters; `between` and `fraction` ASCII and no
    /// digit; `label` and `digits` at least 1.
    pub fn new(opener: &str, closer: &str, label: usize, between: &str, fraction: &str, digits: usize)
        -> Result<Self, String> {
        let (opener, closer) = (mark("stamp shape", "opener", opener)?, mark("stamp shape", "closer", closer)?);
        let plain = |text: &str| text.is_ascii() && !text.is_empty() && !text.bytes().any(|b| b.is_ascii_digit());
        if opener == closer || !plain(between) || !plain(fraction) || label == 0 || digits == 0 {
            return Err("the stamp shape cannot be read one way only".into());
        }
        Ok(StampShape { opener, closer, label, between: between.into(), fraction: fraction.into(), digits })
    }

    /// The stamp's span in an ASCII `body` without \x1c-\x1f, as the regex's group 1 (None: no match).
    pub fn find(&self, body: &[u8]) -> Option<(usize, usize)> {
        let n = body.len();
        let i = body.iter().position(|&b| !space(b)).unwrap_or(n);
        if body.get(i) == Some(&self.opener) {
            let run = body[i + 1..].iter().take(self.label + 1).take_while(|&&b| b != self.closer && !b.is_ascii_digit())
                .count();
            if (1..=self.label).contains(&run) && body.get(i + 1 + run) == Some(&self.closer) {
                let mut j = i + 2 + run;
                while j < n && space(body[j]) {
                    j += 1;
                }
                if body.get(j) == Some(&self.opener) {
                    if let Some(found) = self.stamp(body, j + 1) {
                        return Some(found);
                    }
                }
                if let Some(found) = self.stamp(body, j) {
                    return Some(found);
                }
            }
            if let Some(found) = self.stamp(body, i + 1) {
                return Some(found);
            }
        }
        self.stamp(body, i)
    }

    /// A stamp starting at `at`: its end (the longest fraction).
    fn stamp(&self, b: &[u8], at: usize) -> Option<(usize, usize)> {
        let s = b.get(at..at + 19)?;
        let digit = |k: usize| s[k].is_ascii_digit();
        let date = (0..4).all(digit) && s[4] == b'-' && digit(5) && digit(6) && s[7] == b'-' && digit(8) && digit(9);
        let time = digit(11) && digit(12) && s[13] == b':' && digit(14) && digit(15) && s[16] == b':' && digit(17)
            && digit(18);
        if !(date && self.between.contains(&s[10]) && time) {
            return None;
        }
        let mut end = at + 19;
        if b.get(end).is_some_and(|c| self.fraction.contains(c)) {
            let digits = b[end + 1..].iter().take(self.digits).take_while(|c| c.is_ascii_digit()).count();
            if digits > 0 {
                end += 1 + digits;
            }
        }
        Some((at, end))
    }
}

fn num(s: &[u8]) -> i64 {
    s.iter().fold(0, |n, &d| n * 10 + i64::from(d - b'0'))
}

/// Days from 1970-01-01 to the first of `month` of `year` (proleptic Gregorian), as
/// `datetime.date(y, m, 1).toordinal()` minus the epoch's; None for year 0.
fn days_to_month(year: i64, month: i64) -> Option<i64> {
    if year < 1 {
        return None;
    }
    let (y, m) = if month <= 2 { (year - 1, month + 9) } else { (year, month - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// `calendar.timegm` of a stamp's fields, None where `_to_epoch` gives None.
fn epoch(s: &[u8]) -> Option<f64> {
    let (y, mo, d) = (num(&s[0..4]), num(&s[5..7]), num(&s[8..10]));
    let (h, mi, sec) = (num(&s[11..13]), num(&s[14..16]), num(&s[17..19]));
    if !((1..=12).contains(&mo) && (1..=31).contains(&d) && h < 24 && mi < 60 && sec < 62) {
        return None;
    }
    // timegm counts days from the month's first: the 31st of February is the 3rd of March
    let days = days_to_month(y, mo)? + d - 1;
    Some((((days * 24 + h) * 60 + mi) * 60 + sec) as f64)
}

/// `YYYY-MM-DD?HH:MM:SS`, then nothing or one separator and 1 to 9 fraction digits: the form
/// the declaration's stamp group has (anything else a changed declaration captured is no stamp).
fn iso_shaped(stamp: &[u8]) -> bool {
    const DIGITS: [usize; 14] = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];
    stamp.len() >= 19
        && DIGITS.iter().all(|&i| stamp[i].is_ascii_digit())
        && (stamp.len() == 19 || (stamp.len() <= 29 && stamp.len() > 20 && stamp[20..].iter().all(u8::is_ascii_digit)))
}

/// The stamp an ASCII line's body starts with (its first dash within `reach` characters).
pub fn line_stamp(rules: &StampRules, body: &[u8]) -> Option<f64> {
    let mut head = body.first().copied();
    if head == Some(b' ') {
        head = body.get(1).copied();
    }
    match head {
        Some(c) if c == rules.shape.opener || c.is_ascii_digit() || py_space(c) => {}
        _ => return None, // after white space, a leading stamp starts with its opener or a digit
    }
    // a stamp starts "YYYY-" within the first `reach` characters
    let window = &body[..body.len().min(rules.reach)];
    let dash = (4..window.len()).find(|&i| window[i] == b'-' && window[i - 4..i].iter().all(u8::is_ascii_digit));
    dash?;
    let (a, z) = rules.shape.find(body)?;
    let stamp = &body[a..z];
    if !iso_shaped(stamp) {
        return None;
    }
    let base = epoch(&stamp[..19])?;
    Some(if stamp.len() > 20 {
        let frac = &stamp[20..];
        base + num(frac) as f64 / 10f64.powi(frac.len() as i32)
    } else {
        base
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // test data: the shape of parsers.timestamps.CORE (the Python module is the definition)
    fn shape() -> StampShape {
        StampShape::new("[", "]", 16, " T", ".,", 9).unwrap()
    }

    fn line_stamp(body: &[u8]) -> Option<f64> {
        super::line_stamp(&StampRules { shape: shape(), reach: 40 }, body)
    }

    /// The shape finds every stamp its regex (`parsers.timestamps.LEADING`) finds, where it finds it:
    /// random lines of the pieces that matter, ASCII without \x1c-\x1f (the lines the core reads).
    #[test]
    fn the_stamp_shape_reads_as_its_regex() {
        let regex = regex::bytes::Regex::new(concat!(
            r"^[\t\n\x0B\x0C\r ]*(?:\[[^\]0-9]{1,16}\][\t\n\x0B\x0C\r ]*)?\[?",
            r"([0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?)",
        ))
        .unwrap();
        let shape = shape();
        let pieces = ["[", "]", " ", "\t", "\x0b", "2024-05-01", " ", "T", "10:00:01", ",", ".", "5", "1234567890",
                      "titan", "INFO", "x", "-", ":", "0", "[2024-05-01 10:00:01", "] ", "abcdefghijklmnop", "q"];
        let mut draws = crate::testing::Draws::new(0x9e37_79b9_7f4a_7c15);
        let mut next = |n: usize| draws.below(n);
        let mut matched = 0;
        for _ in 0..200_000 {
            let line: String = (0..next(12)).map(|_| pieces[next(pieces.len())]).collect();
            let want = regex.captures(line.as_bytes()).map(|c| c.get(1).unwrap().range()).map(|r| (r.start, r.end));
            assert_eq!(shape.find(line.as_bytes()), want, "{line:?}");
            matched += usize::from(want.is_some());
        }
        assert!(matched > 2_000, "{matched} lines matched: the lines do not test the shape");
    }

    #[test]
    fn a_stamp_shape_that_reads_two_ways_is_refused() {
        assert!(StampShape::new("[", "[", 16, " T", ".,", 9).is_err());
        assert!(StampShape::new("[", "]", 0, " T", ".,", 9).is_err());
        assert!(StampShape::new("[", "]", 16, " 1", ".,", 9).is_err());
        assert!(StampShape::new("ab", "]", 16, " T", ".,", 9).is_err());
    }

    #[test]
    fn common_stamps() {
        assert_eq!(line_stamp(b"[2024-05-01 00:00:01,250] x"), Some(1714521601.25));
        assert_eq!(line_stamp(b"[titan] 2026-05-19 23:02:48,804 - root"), Some(1779231768.804));
        assert_eq!(line_stamp(b" [2026-04-15 11:19:02.524672] iteration"), Some(1776251942.0 + 524672.0 / 1e6));
        assert_eq!(line_stamp(b"2021-05-27T21:42:11 x"), Some(1622151731.0));
    }

    #[test]
    fn not_stamps() {
        assert_eq!(line_stamp(b"iteration 5"), None);
        assert_eq!(line_stamp(b"[2024-13-01 00:00:01] bad month"), None);
        assert_eq!(line_stamp(b"[0000-01-01 00:00:01] year 0"), None);
        assert_eq!(line_stamp(b""), None);
        // the dash lies beyond the first 40 characters
        assert_eq!(line_stamp(b"                                         2024-05-01 00:00:01"), None);
    }

    #[test]
    fn february_31st_is_march_3rd() {
        assert_eq!(line_stamp(b"2023-02-31 00:00:00"), line_stamp(b"2023-03-03 00:00:00"));
    }
}
